//! What the dashboard shows, as plain data: the latest packet decoded, the packet
//! rate, what was ignored, and (when watching the relay) one row per destination.
//!
//! The model never reads a clock: every update takes `now`, so tests drive it with
//! made-up instants and [`super::render`] stays a pure function of it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::Reader;
use crate::config::Input;
use crate::stats::{DestinationSnapshot, DropReason, Problems, Snapshot};
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
    /// What it receives: `same`, or the format packets are translated to.
    pub output: String,
    /// Packets sent per second, lately.
    pub packets_per_sec: f64,
    /// Packets sent in all.
    pub sent: u64,
    /// Packets not sent because of its race filter (IsRaceOn = 0).
    pub filtered: u64,
    /// Packets not sent because of its rate limit.
    pub rate_limited: u64,
    /// Send errors.
    pub errors: u64,
    /// The send errors by kind and the other drops (untranslatable, backlog
    /// full), `"3 refused (nothing listening)"`; empty when there are none.
    pub problems: String,
}

impl DestinationRow {
    /// The row of `d`, sending `packets_per_sec`.
    pub fn of(d: &DestinationSnapshot, packets_per_sec: f64) -> DestinationRow {
        let s = &d.stats;
        DestinationRow {
            name: d.name.clone(),
            output: d.output.to_string(),
            packets_per_sec,
            sent: s.sent,
            filtered: s.dropped(DropReason::NotRacing),
            rate_limited: s.dropped(DropReason::RateLimited),
            errors: s.send_errors.total(),
            problems: Problems(s).to_string(),
        }
    }
}

/// Each destination's packets per second, from successive counter snapshots:
/// the packets sent since the newest snapshot at least a second older than
/// the latest (or since the oldest kept, early on), over the relay's own clock.
#[derive(Debug, Clone, Default)]
pub struct DestinationRates {
    /// (time since the relay started, each destination's name and sent count).
    history: VecDeque<(Duration, Vec<(String, u64)>)>,
}

impl DestinationRates {
    /// Takes `snapshot` and returns the destinations' rows, with their rates.
    pub fn rows(&mut self, snapshot: &Snapshot) -> Vec<DestinationRow> {
        let now = snapshot.elapsed;
        if self.history.back().is_some_and(|(t, _)| *t > now) {
            // Another relay's snapshots, or a clock gone back: start again.
            self.history.clear();
        }
        let sent = snapshot
            .destinations
            .iter()
            .map(|d| (d.name.clone(), d.stats.sent))
            .collect();
        self.history.push_back((now, sent));
        while self.history.len() >= 2 && self.history[1].0 + RATE_WINDOW <= now {
            self.history.pop_front();
        }
        let (since, before) = self.history.front().expect("pushed above");
        let span = now.saturating_sub(*since).as_secs_f64();
        snapshot
            .destinations
            .iter()
            .map(|d| {
                // A destination added since (a reload) counts from zero.
                let base = before
                    .iter()
                    .find(|(name, _)| *name == d.name)
                    .map_or(0, |(_, n)| *n);
                let rate = if span > 0.0 {
                    d.stats.sent.saturating_sub(base) as f64 / span
                } else {
                    0.0
                };
                DestinationRow::of(d, rate)
            })
            .collect()
    }
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
    /// Datagrams the relay received but could not hand to the screen (it fell
    /// behind), when watching the relay.
    pub(crate) not_shown: u64,
    /// The latest log line held back while the screen is on.
    pub(crate) log_line: Option<String>,
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
            not_shown: 0,
            log_line: None,
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

    /// Shows how many datagrams the relay could not hand to the screen.
    pub fn set_not_shown(&mut self, datagrams: u64) {
        self.not_shown = datagrams;
    }

    /// Shows `line`, the latest log line (held back while the screen is on).
    pub fn set_log_line(&mut self, line: Option<String>) {
        self.log_line = line;
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
    use crate::stats::SendErrorKind;

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

    use fixtures::snapshot;

    fn destination(name: &str, sent: u64) -> DestinationSnapshot {
        fixtures::destination(name, crate::config::Output::Format(Format::Fh5), sent)
    }

    #[track_caller]
    fn rates(rows: &[DestinationRow]) -> Vec<(&str, f64)> {
        rows.iter()
            .map(|r| (r.name.as_str(), r.packets_per_sec))
            .collect()
    }

    #[test]
    fn destination_rates_count_over_the_last_second_of_snapshots() {
        let mut r = DestinationRates::default();
        let rows = r.rows(&snapshot(0, vec![destination("simhub", 0)]));
        assert_eq!(rates(&rows), [("simhub", 0.0)], "nothing to compare yet");
        // 15 in 250 ms.
        let rows = r.rows(&snapshot(250, vec![destination("simhub", 15)]));
        assert_eq!(rates(&rows), [("simhub", 60.0)]);
        // Still from 0 ms: 60 in 1 s.
        let rows = r.rows(&snapshot(1_000, vec![destination("simhub", 60)]));
        assert_eq!(rates(&rows), [("simhub", 60.0)]);
        // From 250 ms, the newest a second old: 120 - 15 in 1.25 s; a destination
        // added by a reload counts from zero.
        let rows = r.rows(&snapshot(
            1_500,
            vec![destination("simhub", 120), destination("new", 30)],
        ));
        assert_eq!(rates(&rows), [("simhub", 84.0), ("new", 24.0)]);
        // The counters of another run: start again.
        let rows = r.rows(&snapshot(100, vec![destination("simhub", 5)]));
        assert_eq!(rates(&rows), [("simhub", 0.0)]);
    }

    #[test]
    fn a_destination_row_names_its_counters() {
        let mut d = destination("motion", 40);
        d.stats.drop(DropReason::NotRacing);
        d.stats.drop(DropReason::RateLimited);
        d.stats.drop(DropReason::RateLimited);
        d.stats.drop(DropReason::Untranslatable);
        for _ in 0..3 {
            d.stats.send_errors.add(SendErrorKind::Refused);
        }
        d.stats.send_errors.add(SendErrorKind::Other);
        let row = DestinationRow::of(&d, 60.0);
        assert_eq!(
            row,
            DestinationRow {
                name: "motion".to_owned(),
                output: "fh5".to_owned(),
                packets_per_sec: 60.0,
                sent: 40,
                filtered: 1,
                rate_limited: 2,
                errors: 4,
                problems: "3 refused (nothing listening), 1 other, 1 untranslatable".to_owned(),
            }
        );
        assert_eq!(DestinationRow::of(&destination("ok", 1), 0.0).problems, "");
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

/// Relay snapshots for the dashboard's tests (here and in `dashboard.rs`).
#[cfg(test)]
pub(crate) mod fixtures {
    use std::time::Duration;

    use crate::config::Output;
    use crate::stats::{DestinationSnapshot, DestinationStats, Snapshot};

    /// A destination that has sent `sent` packets and nothing else.
    pub(crate) fn destination(name: &str, output: Output, sent: u64) -> DestinationSnapshot {
        DestinationSnapshot {
            name: name.to_owned(),
            addr: "127.0.0.1:9002".parse().expect("an address"),
            output,
            stats: DestinationStats {
                sent,
                ..Default::default()
            },
            latency: Default::default(),
        }
    }

    /// The relay's counters `ms` after its start.
    pub(crate) fn snapshot(ms: u64, destinations: Vec<DestinationSnapshot>) -> Snapshot {
        Snapshot {
            listen: "127.0.0.1:5400".parse().expect("an address"),
            elapsed: Duration::from_millis(ms),
            input: Default::default(),
            destinations,
            tap_dropped: 0,
        }
    }
}
