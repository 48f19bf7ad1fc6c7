//! What the dashboard shows, as plain data: the latest packet decoded, the packet
//! rate, what was ignored, and (when watching the relay) one row per destination.
//!
//! The model never reads a clock: every update takes `now`, so tests drive it with
//! made-up instants and [`super::render`] stays a pure function of it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::Reader;
use crate::config::Input;
use crate::telemetry::Telemetry;
use crate::wire::{Format, Packet};

/// The rate is counted over windows this long.
const RATE_WINDOW: Duration = Duration::from_secs(1);
/// After this long without a packet the dashboard says the stream stopped.
pub const SILENCE: Duration = Duration::from_secs(2);

/// One destination of the relay, as the relay's counters snapshot reports it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DestinationRow {
    /// The destination's name.
    pub name: String,
    /// Packets sent per second, lately.
    pub packets_per_sec: f64,
    /// Packets not sent because of its race filter (IsRaceOn = 0).
    pub filtered: u64,
    /// Packets not sent because of its rate limit.
    pub rate_limited: u64,
    /// Send errors.
    pub errors: u64,
    /// The last send error, if any.
    pub last_error: Option<String>,
}

/// Until the first window closes, a rate is shown once this much has been counted.
const FIRST_ESTIMATE: Duration = Duration::from_millis(250);

/// Packets per second, counted over [`RATE_WINDOW`]-long windows (the first one
/// estimated while it is open, so a new stream does not read 0 Hz for a second).
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    window_start: Option<Instant>,
    count: u64,
    hz: f64,
    closed_one: bool,
}

impl Rate {
    fn count(&mut self, now: Instant) {
        self.window_start.get_or_insert(now);
        self.count += 1;
    }

    fn tick(&mut self, now: Instant) {
        let Some(start) = self.window_start else {
            return;
        };
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= RATE_WINDOW {
            self.hz = self.count as f64 / elapsed.as_secs_f64();
            self.count = 0;
            self.window_start = Some(now);
            self.closed_one = true;
        } else if !self.closed_one && elapsed >= FIRST_ESTIMATE {
            self.hz = self.count as f64 / elapsed.as_secs_f64();
        }
    }
}

/// The dashboard's state.
#[derive(Debug, Clone)]
pub struct Model {
    /// Where the datagrams come from (`listening on 0.0.0.0:5400`).
    pub(crate) source: String,
    pub(crate) reader: Reader,
    /// The latest packet, decoded.
    pub(crate) latest: Option<Telemetry>,
    /// The latest packet's sender.
    pub(crate) sender: Option<SocketAddr>,
    /// Packets read.
    pub(crate) packets: u64,
    /// Datagrams that were not packets of the input format.
    pub(crate) ignored: u64,
    /// Why the last ignored datagram was ignored.
    pub(crate) last_ignored: Option<String>,
    rate: Rate,
    last_at: Option<Instant>,
    /// How long since the last packet, once that is over [`SILENCE`].
    pub(crate) silent_for: Option<Duration>,
    /// The relay's destinations, when watching the relay.
    pub(crate) destinations: Option<Vec<DestinationRow>>,
    /// True once the source has ended (end of a capture file).
    pub(crate) ended: bool,
}

impl Model {
    /// An empty model reading `input` from the source described as `source`.
    pub fn new(input: Input, source: impl Into<String>) -> Model {
        Model {
            source: source.into(),
            reader: Reader::new(input),
            latest: None,
            sender: None,
            packets: 0,
            ignored: 0,
            last_ignored: None,
            rate: Rate::default(),
            last_at: None,
            silent_for: None,
            destinations: None,
            ended: false,
        }
    }

    /// Takes one datagram received at `now` from `from`.
    pub fn on_datagram(&mut self, now: Instant, from: SocketAddr, payload: &[u8]) {
        let Some(format) = self.reader.format_of(payload) else {
            self.ignored += 1;
            self.last_ignored = Some(format!(
                "{} (from {from})",
                self.reader.why_ignored(payload.len())
            ));
            return;
        };
        self.latest = Some(Telemetry::decode(&Packet::new_unchecked(payload, format)));
        self.sender = Some(from);
        self.packets += 1;
        self.rate.count(now);
        self.last_at = Some(now);
        self.silent_for = None;
    }

    /// Ages the model to `now`: closes the rate window, notices silence.
    pub fn tick(&mut self, now: Instant) {
        self.rate.tick(now);
        self.silent_for = self
            .last_at
            .map(|at| now.saturating_duration_since(at))
            .filter(|&d| d >= SILENCE);
        if self.silent_for.is_some() {
            self.rate.hz = 0.0;
        }
    }

    /// Shows the relay's destinations (replacing the previous rows).
    pub fn set_destinations(&mut self, rows: Vec<DestinationRow>) {
        self.destinations = Some(rows);
    }

    /// Marks the source as ended (a capture file played to its end).
    pub fn end(&mut self) {
        self.ended = true;
    }

    /// The latest packet, decoded.
    pub fn latest(&self) -> Option<&Telemetry> {
        self.latest.as_ref()
    }

    /// The format the latest packet was read as, and whether that is certain (a
    /// Horizon packet read as fh6 before any puddle said so is not).
    pub fn format(&self) -> Option<(Format, bool)> {
        self.latest
            .as_ref()
            .map(|t| (t.format, self.reader.is_certain(t.format)))
    }

    /// Packets per second over the last window.
    pub fn rate_hz(&self) -> f64 {
        self.rate.hz
    }

    /// Packets read so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Datagrams ignored so far (not packets of the input format).
    pub fn ignored(&self) -> u64 {
        self.ignored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from() -> SocketAddr {
        "127.0.0.1:5555".parse().unwrap()
    }

    #[test]
    fn rate_is_packets_over_the_window_and_drops_to_zero_in_silence() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut m = Model::new(Input::Auto, "test");
        for i in 0..10 {
            m.on_datagram(at(i * 20), from(), &[0; 311]);
        }
        m.tick(at(200));
        assert_eq!(m.rate_hz(), 0.0, "too early to tell");
        for i in 10..25 {
            m.on_datagram(at(i * 20), from(), &[0; 311]);
        }
        m.tick(at(500));
        assert_eq!(m.rate_hz(), 50.0, "25 packets in the first 500 ms");
        for i in 25..60 {
            m.on_datagram(at(i * 20), from(), &[0; 311]);
        }
        m.tick(at(1_200));
        assert_eq!(m.rate_hz(), 50.0, "60 packets in 1.2 s");
        for i in 0..30 {
            m.on_datagram(at(1_200 + i * 33), from(), &[0; 311]);
        }
        m.tick(at(2_200));
        assert_eq!(m.rate_hz(), 30.0, "the next window alone");
        assert_eq!(m.packets(), 90);
        assert_eq!(m.format(), Some((Format::Fm7, true)));
        m.tick(at(5_000));
        assert_eq!(m.rate_hz(), 0.0);
        assert!(m.silent_for.is_some());
    }

    #[test]
    fn datagrams_of_another_format_are_counted_and_explained() {
        let mut m = Model::new(Input::Fixed(Format::Fh6), "test");
        m.on_datagram(Instant::now(), from(), &[0; 311]);
        assert_eq!(m.ignored(), 1);
        assert!(m.latest().is_none());
        let why = m.last_ignored.as_deref().unwrap();
        assert!(why.contains("311-byte") && why.contains("fh6"), "{why}");
    }

    #[test]
    fn a_dry_horizon_packet_is_fh6_but_not_for_certain() {
        let mut m = Model::new(Input::Auto, "test");
        m.on_datagram(Instant::now(), from(), &[0; 324]);
        assert_eq!(m.format(), Some((Format::Fh6, false)));
    }
}
