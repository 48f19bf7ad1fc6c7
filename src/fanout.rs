//! The fan-out core: every decision the relay makes about a datagram, and every
//! counter, with no sockets, no clock reads and no logging above `trace!`.
//!
//! [`Fanout::handle`] takes one datagram with its sender and the time, and hands
//! each destination's bytes to a [`Sink`] the caller gives it. In order: the
//! allow-list, detection (a configured format, or `auto`), then per destination
//! the race filter, the rate limit (the newest early frame waits for its slot in
//! a pending frame; [`Fanout::due`] sends it), and translation, done at most once
//! per distinct output format per packet into buffers made at start-up.
//!
//! Destinations are known by a [`DestinationId`] that stays the same while the
//! destination exists. [`Fanout::apply`] takes a new [`Config`] and matches
//! destinations by name: an unchanged one keeps all its state, a changed one keeps
//! its counters, new ones start, and removed ones come back with their final
//! counters.
//!
//! Invariants: nothing here allocates per datagram, and no input can make it
//! panic. Every datagram received is, for each destination, counted exactly once:
//! handed to the sink (which counts it sent or dropped), or dropped for a
//! [`DropReason`], or held as the one pending frame.

use std::fmt;
use std::net::SocketAddr;
use std::time::Instant;

use ipnet::IpNet;
use log::trace;

use crate::config::{Config, Destination, Input, Output};
use crate::filter::{RaceFilter, RateLimiter};
use crate::stats::{DestinationSnapshot, DestinationStats, DropReason, InputStats, Snapshot};
use crate::translate::translate;
use crate::wire::{Detector, Format, Packet, MAX_LEN};

/// Largest frame a pending slot (or a shell's backlog) holds: every Forza
/// format, and any datagram that fits one Ethernet frame. A larger `same`
/// datagram that must wait is dropped and counted.
pub const FRAME_CAPACITY: usize = 1_472;

/// A destination's name for as long as it exists; the shell indexes its sockets
/// by it. A removed destination's id may be given to a later new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DestinationId(usize);

impl DestinationId {
    /// A dense index from 0, for tables indexed by destination.
    pub const fn index(self) -> usize {
        self.0
    }

    /// The id of index `i` (the shell's tokens carry the index).
    pub(crate) const fn from_index(i: usize) -> Self {
        DestinationId(i)
    }
}

/// Where the core hands each destination's bytes: the shell sends them, a test
/// records them. `stats` are the destination's counters, lent for the call: the
/// sink counts what became of the frame (sent, queued then dropped, failed).
pub trait Sink {
    /// Delivers `bytes` to destination `id`.
    fn deliver(&mut self, id: DestinationId, bytes: &[u8], stats: &mut DestinationStats);
}

impl<F: FnMut(DestinationId, &[u8], &mut DestinationStats)> Sink for F {
    fn deliver(&mut self, id: DestinationId, bytes: &[u8], stats: &mut DestinationStats) {
        self(id, bytes, stats)
    }
}

/// A frame held for later: a destination's pending frame, or a shell's backlog.
#[derive(Clone, Copy)]
pub struct Frame {
    len: usize,
    data: [u8; FRAME_CAPACITY],
}

impl Frame {
    /// A frame holding nothing.
    pub const EMPTY: Frame = Frame {
        len: 0,
        data: [0; FRAME_CAPACITY],
    };

    /// Copies `bytes` in; `false` (and unchanged) when they don't fit.
    pub fn store(&mut self, bytes: &[u8]) -> bool {
        match self.data.get_mut(..bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = bytes.len();
                true
            }
            None => false,
        }
    }

    /// The bytes held.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

/// One destination's live state: its filters, its pending frame, its counters.
struct DestinationState {
    config: Destination,
    race: RaceFilter,
    rate: RateLimiter,
    /// The newest frame waiting for its `max_rate` slot, if `has_pending`.
    pending: Box<Frame>,
    has_pending: bool,
    /// When the pending frame came: its deadline when the limiter names none
    /// (a reload changed `max_rate` while it waited, so the limiter is new and
    /// the frame may go at once).
    pending_at: Option<Instant>,
    stats: DestinationStats,
}

impl DestinationState {
    fn new(config: Destination) -> Self {
        DestinationState {
            race: RaceFilter::default(),
            rate: RateLimiter::new(config.max_rate),
            pending: Box::new(Frame::EMPTY),
            has_pending: false,
            pending_at: None,
            stats: DestinationStats::default(),
            config,
        }
    }

    /// Applies `max_rate`, then hands the frame to the sink.
    fn deliver(&mut self, id: DestinationId, bytes: &[u8], now: Instant, sink: &mut impl Sink) {
        if self.has_pending {
            // This newer frame supersedes the waiting one.
            self.has_pending = false;
            self.stats.drop(DropReason::RateLimited);
        }
        if self.rate.is_due(now) {
            self.rate.sent(now);
            sink.deliver(id, bytes, &mut self.stats);
        } else if self.pending.store(bytes) {
            self.has_pending = true;
            self.pending_at = Some(now);
        } else {
            self.stats.drop(DropReason::RateLimited);
        }
    }

    /// Hands over the pending frame if its slot has come.
    fn due(&mut self, id: DestinationId, now: Instant, sink: &mut impl Sink) {
        if self.has_pending && self.rate.is_due(now) {
            self.has_pending = false;
            self.rate.sent(now);
            sink.deliver(id, self.pending.bytes(), &mut self.stats);
        }
    }

    /// Drops the pending frame, counting it: it will never go.
    fn forget_pending(&mut self) {
        if std::mem::take(&mut self.has_pending) {
            self.stats.drop(DropReason::RateLimited);
        }
    }

    fn deadline(&self) -> Option<Instant> {
        if self.has_pending {
            self.rate.next_due().or(self.pending_at)
        } else {
            None
        }
    }

    fn snapshot(&self) -> DestinationSnapshot {
        DestinationSnapshot {
            name: self.config.name.clone(),
            addr: self.config.addr,
            output: self.config.output,
            stats: self.stats,
        }
    }
}

/// The translation of the current packet into one output format, made at most
/// once per packet. One per format, indexed by [`Format::index`].
struct OutputSlot {
    buf: Box<[u8; MAX_LEN]>,
    /// Length of the translation in `buf`; 0 when the packet couldn't be translated.
    len: usize,
    /// The packet number `buf` holds.
    packet: u64,
}

/// A destination whose configuration changed; it kept its counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// Its id, which stays.
    pub id: DestinationId,
    /// The configuration it had.
    pub before: Destination,
    /// The configuration it has now.
    pub after: Destination,
}

/// A destination no longer configured, with its final counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The id it had.
    pub id: DestinationId,
    /// Its last configuration.
    pub destination: Destination,
    /// Its counters at removal.
    pub stats: DestinationStats,
}

/// What [`Fanout::apply`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// New destinations.
    pub added: Vec<(DestinationId, Destination)>,
    /// Destinations whose configuration changed.
    pub changed: Vec<Changed>,
    /// Destinations removed.
    pub removed: Vec<Removed>,
    /// The listening address, before and after, when it changed (the shell
    /// fills it in: the core has no sockets).
    pub listen: Option<(SocketAddr, SocketAddr)>,
    /// The input format, before and after, when it changed.
    pub input: Option<(Input, Input)>,
    /// The allow-list changed.
    pub allow: bool,
}

impl Changes {
    /// True when the new configuration made no difference to the core.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.changed.is_empty()
            && self.removed.is_empty()
            && self.listen.is_none()
            && self.input.is_none()
            && !self.allow
    }
}

impl fmt::Display for Changes {
    /// One line: `+ C (fm7), ~ B: same -> fh5, - D`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        let mut item = |f: &mut fmt::Formatter<'_>| {
            let s = sep;
            sep = ", ";
            f.write_str(s)
        };
        if let Some((before, after)) = self.listen {
            item(f)?;
            write!(f, "~ listen: {before} -> {after}")?;
        }
        if let Some((before, after)) = self.input {
            item(f)?;
            write!(f, "~ input: {before} -> {after}")?;
        }
        if self.allow {
            item(f)?;
            f.write_str("~ listen.allow")?;
        }
        for (_, d) in &self.added {
            item(f)?;
            write!(f, "+ {} ({})", d.name, d.output)?;
        }
        for c in &self.changed {
            item(f)?;
            write!(f, "~ {}:", c.after.name)?;
            DestinationDiff(&c.before, &c.after).fmt(f)?;
        }
        for r in &self.removed {
            item(f)?;
            write!(f, "- {}", r.destination.name)?;
        }
        if sep.is_empty() {
            f.write_str("no changes")?;
        }
        Ok(())
    }
}

/// What differs between two configurations of one destination: ` same -> fh5`.
struct DestinationDiff<'a>(&'a Destination, &'a Destination);

impl fmt::Display for DestinationDiff<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (self.0, self.1);
        let mut sep = " ";
        let mut part = |f: &mut fmt::Formatter<'_>, args: fmt::Arguments<'_>| {
            f.write_str(sep)?;
            sep = "; ";
            f.write_fmt(args)
        };
        if a.output != b.output {
            part(f, format_args!("{} -> {}", a.output, b.output))?;
        }
        if a.addr != b.addr || a.addr_text != b.addr_text {
            part(f, format_args!("{} -> {}", a.addr_text, b.addr_text))?;
        }
        if a.only_race_on != b.only_race_on {
            part(f, format_args!("only_race_on {}", b.only_race_on))?;
        }
        if a.max_rate != b.max_rate {
            part(f, format_args!("max_rate {} -> {}", a.max_rate, b.max_rate))?;
        }
        Ok(())
    }
}

/// The pure fan-out core. See the module documentation.
pub struct Fanout {
    input: Input,
    allow: Vec<IpNet>,
    detector: Detector,
    outputs: [OutputSlot; Format::ALL.len()],
    /// Indexed by [`DestinationId`]; `None` for a free id.
    dests: Vec<Option<DestinationState>>,
    /// Live ids in configuration order: the order of sends and of reports.
    order: Vec<DestinationId>,
    stats: InputStats,
    /// Packets handled so far: the number of the current one.
    packet: u64,
    /// The length and sender of the last datagram that was not the input format.
    last_malformed: Option<(usize, SocketAddr)>,
    /// The last sender outside `listen.allow`.
    last_disallowed: Option<SocketAddr>,
}

impl Fanout {
    /// A core for `config`, every destination started.
    pub fn new(config: &Config) -> Fanout {
        let mut core = Fanout {
            input: config.input,
            allow: config.allow.clone(),
            detector: Detector::default(),
            outputs: std::array::from_fn(|_| OutputSlot {
                buf: Box::new([0; MAX_LEN]),
                len: 0,
                packet: 0,
            }),
            dests: Vec::with_capacity(config.destinations.len()),
            order: Vec::with_capacity(config.destinations.len()),
            stats: InputStats::default(),
            packet: 0,
            last_malformed: None,
            last_disallowed: None,
        };
        for d in &config.destinations {
            core.add(d.clone());
        }
        core
    }

    fn add(&mut self, config: Destination) -> DestinationId {
        let id = DestinationId(
            self.dests
                .iter()
                .position(Option::is_none)
                .unwrap_or(self.dests.len()),
        );
        let state = Some(DestinationState::new(config));
        match self.dests.get_mut(id.0) {
            Some(slot) => *slot = state,
            None => self.dests.push(state),
        }
        self.order.push(id);
        id
    }

    /// Relays one datagram: `data` from `from`, received at `now`.
    pub fn handle(&mut self, data: &[u8], from: SocketAddr, now: Instant, sink: &mut impl Sink) {
        let len = data.len();
        self.stats.received += 1;
        self.stats.bytes += len as u64;
        // An IPv4 sender seen through a dual-stack socket reads as itself.
        let from = SocketAddr::new(from.ip().to_canonical(), from.port());
        let ip = from.ip();
        if !self.allow.is_empty() && !self.allow.iter().any(|net| net.contains(&ip)) {
            self.stats.disallowed += 1;
            self.last_disallowed = Some(from);
            return;
        }
        let (format, guessed) = match self.input {
            Input::Fixed(f) => ((len == f.len()).then_some(f), false),
            Input::Auto => {
                let f = self.detector.detect(data);
                (
                    f,
                    f.is_some_and(Format::is_horizon) && !self.detector.is_certain(),
                )
            }
        };
        match format {
            Some(f) => {
                self.stats.last_format = Some(f);
                self.stats.format_guessed = guessed;
            }
            None => {
                self.stats.malformed += 1;
                self.last_malformed = Some((len, from));
            }
        }
        let race_on = format.map(|f| Packet::new_unchecked(data, f).race_on());
        self.packet += 1;
        let packet = self.packet;
        trace!("packet {packet} from {from}: {len} bytes, {format:?}");
        let Fanout {
            outputs,
            dests,
            order,
            ..
        } = self;
        for &id in order.iter() {
            let Some(dest) = dests[id.0].as_mut() else {
                continue;
            };
            if dest.config.only_race_on && !dest.race.admit(race_on) {
                dest.stats.drop(DropReason::NotRacing);
                continue;
            }
            let bytes: &[u8] = match dest.config.output {
                Output::Same => data,
                Output::Format(to) => {
                    // A guessed Horizon input is not rewritten into another Horizon
                    // format: fh5 and fh6 differ only in CarClass (and puddles,
                    // which are zero when it can't tell), and a guess must not
                    // change the class a tool shows.
                    let from = match format {
                        Some(_) if guessed && to.is_horizon() => Some(to),
                        f => f,
                    };
                    if from == Some(to) {
                        // Already in the destination's format: send it as it came.
                        data
                    } else {
                        let slot = &mut outputs[to.index()];
                        if slot.packet != packet {
                            slot.packet = packet;
                            slot.len = from
                                .and_then(|from| translate(data, from, to, &mut slot.buf[..]).ok())
                                .unwrap_or(0);
                        }
                        if slot.len == 0 {
                            dest.stats.drop(DropReason::Untranslatable);
                            continue;
                        }
                        &slot.buf[..slot.len]
                    }
                }
            };
            dest.deliver(id, bytes, now, sink);
        }
    }

    /// Hands over every pending frame whose rate slot has come by `now`.
    pub fn due(&mut self, now: Instant, sink: &mut impl Sink) {
        let Fanout { dests, order, .. } = self;
        for &id in order.iter() {
            if let Some(dest) = dests[id.0].as_mut() {
                dest.due(id, now, sink);
            }
        }
    }

    /// When [`Fanout::due`] next has something to do, if anything waits.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.states().filter_map(|(_, d)| d.deadline()).min()
    }

    /// Drops every pending frame, counting it: called when the relay stops.
    pub fn finish(&mut self) {
        for d in self.dests.iter_mut().flatten() {
            d.forget_pending();
        }
    }

    /// Takes a new configuration; see the module documentation.
    pub fn apply(&mut self, config: &Config) -> Changes {
        let mut changes = Changes::default();
        if config.input != self.input {
            changes.input = Some((self.input, config.input));
            self.input = config.input;
            self.detector = Detector::default();
        }
        if config.allow != self.allow {
            changes.allow = true;
            self.allow = config.allow.clone();
        }
        // Removed first, so their ids are free for the new ones.
        let mut kept = Vec::with_capacity(config.destinations.len());
        for &id in &self.order {
            let Some(state) = self.dests[id.0].as_ref() else {
                continue;
            };
            if config
                .destinations
                .iter()
                .any(|d| d.name == state.config.name)
            {
                kept.push(id);
                continue;
            }
            let mut state = self.dests[id.0].take().expect("checked above");
            state.forget_pending();
            changes.removed.push(Removed {
                id,
                destination: state.config,
                stats: state.stats,
            });
        }
        self.order = kept;
        let mut order = Vec::with_capacity(config.destinations.len());
        for d in &config.destinations {
            let existing = self.order.iter().copied().find(|id| {
                self.dests[id.0]
                    .as_ref()
                    .is_some_and(|s| s.config.name == d.name)
            });
            let Some(id) = existing else {
                let id = self.add(d.clone());
                changes.added.push((id, d.clone()));
                order.push(id);
                continue;
            };
            order.push(id);
            let state = self.dests[id.0].as_mut().expect("found above");
            if state.config == *d {
                continue;
            }
            if state.config.output != d.output || state.config.addr != d.addr {
                // The waiting frame is in the old format, or for the old address.
                state.forget_pending();
            }
            if state.config.max_rate != d.max_rate {
                state.rate = RateLimiter::new(d.max_rate);
            }
            if state.config.only_race_on != d.only_race_on {
                state.race = RaceFilter::default();
            }
            let before = std::mem::replace(&mut state.config, d.clone());
            changes.changed.push(Changed {
                id,
                before,
                after: d.clone(),
            });
        }
        self.order = order;
        changes
    }

    /// The destinations in configuration order, with their ids.
    pub fn destinations(&self) -> impl Iterator<Item = (DestinationId, &Destination)> {
        self.states().map(|(id, d)| (id, &d.config))
    }

    /// The configuration of destination `id`.
    pub fn destination(&self, id: DestinationId) -> Option<&Destination> {
        self.dests.get(id.0)?.as_ref().map(|d| &d.config)
    }

    /// The counters of destination `id`, for what the shell learns later (a
    /// queued frame sent, an error collected from its socket).
    pub fn stats_mut(&mut self, id: DestinationId) -> Option<&mut DestinationStats> {
        self.dests.get_mut(id.0)?.as_mut().map(|d| &mut d.stats)
    }

    /// Counts a receive error the shell met on the listening socket.
    pub fn count_recv_error(&mut self) {
        self.stats.recv_errors += 1;
    }

    /// The input counters.
    pub fn input_stats(&self) -> &InputStats {
        &self.stats
    }

    /// The input format expected.
    pub fn input(&self) -> Input {
        self.input
    }

    /// The length and sender of the last datagram that was not in the input
    /// format (counted in [`InputStats::malformed`]).
    pub fn last_malformed(&self) -> Option<(usize, SocketAddr)> {
        self.last_malformed
    }

    /// The last sender outside `listen.allow` (counted in
    /// [`InputStats::disallowed`]).
    pub fn last_disallowed(&self) -> Option<SocketAddr> {
        self.last_disallowed
    }

    /// Every counter, with the listen address and run time the shell knows.
    pub fn snapshot(&self, listen: SocketAddr, elapsed: std::time::Duration) -> Snapshot {
        Snapshot {
            listen,
            elapsed,
            input: self.stats,
            destinations: self.states().map(|(_, d)| d.snapshot()).collect(),
            tap_dropped: 0,
        }
    }

    fn states(&self) -> impl Iterator<Item = (DestinationId, &DestinationState)> {
        self.order
            .iter()
            .filter_map(|&id| self.dests[id.0].as_ref().map(|d| (id, d)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Overrides;
    use crate::wire::{Puddle, Wheels};

    const SENDER: SocketAddr = SocketAddr::new(
        std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1)),
        50_000,
    );

    fn config(toml: &str) -> Config {
        Config::from_toml(toml, "fanout.toml", &Overrides::default())
            .unwrap_or_else(|e| panic!("{e}\n{toml}"))
    }

    fn destination_toml(name: &str, port: u16, format: &str, options: &str) -> String {
        format!(
            "[[destination]]\nname = \"{name}\"\naddr = \"127.0.0.1:{port}\"\nformat = \"{format}\"\n{options}\n"
        )
    }

    /// A racing fh6 packet, fields set by name: TimestampMS, IsRaceOn, CarClass R,
    /// a wet front-left wheel, Speed.
    fn fh6(timestamp_ms: u32, race_on: bool) -> Vec<u8> {
        let mut buf = vec![0u8; Format::Fh6.len()];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_timestamp_ms(timestamp_ms);
        p.set_is_race_on(i32::from(race_on));
        p.set_car_class(6);
        p.set_wheel_in_puddle(Wheels::from_array([
            Puddle::Flag(1),
            Puddle::Flag(0),
            Puddle::Flag(0),
            Puddle::Flag(0),
        ]));
        p.set_speed(41.5).unwrap();
        buf
    }

    /// A sink that records every delivery, and where its bytes were, and counts
    /// it sent.
    #[derive(Default)]
    struct Recorder {
        got: Vec<(DestinationId, Vec<u8>)>,
        at: Vec<*const u8>,
    }

    impl Sink for Recorder {
        fn deliver(&mut self, id: DestinationId, bytes: &[u8], stats: &mut DestinationStats) {
            stats.sent += 1;
            self.got.push((id, bytes.to_vec()));
            self.at.push(bytes.as_ptr());
        }
    }

    impl Recorder {
        fn to(&self, core: &Fanout, name: &str) -> Vec<Vec<u8>> {
            let id = core
                .destinations()
                .find(|(_, d)| d.name == name)
                .map(|(id, _)| id)
                .unwrap_or_else(|| panic!("no destination {name}"));
            self.got
                .iter()
                .filter(|(i, _)| *i == id)
                .map(|(_, b)| b.clone())
                .collect()
        }
    }

    fn stats<'a>(s: &'a Snapshot, name: &str) -> &'a DestinationStats {
        &s.destination(name).unwrap().stats
    }

    #[track_caller]
    fn assert_counts_add_up(s: &Snapshot, pending: u64) {
        for d in &s.destinations {
            assert_eq!(
                d.stats.sent + d.stats.dropped_total() + pending,
                s.input.received - s.input.disallowed,
                "{}: {:?}",
                d.name,
                d.stats
            );
        }
    }

    #[test]
    fn translates_once_per_output_format_and_sends_same_as_it_came() {
        let c = config(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("raw", 9001, "same", "")
                + &destination_toml("fh5-a", 9002, "fh5", "")
                + &destination_toml("fh5-b", 9003, "fh5", "")
                + &destination_toml("sled", 9004, "sled", "")),
        );
        let mut core = Fanout::new(&c);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let packet = fh6(7, true);
        core.handle(&packet, SENDER, t0, &mut sink);

        assert_eq!(sink.to(&core, "raw"), std::slice::from_ref(&packet));
        let a = sink.to(&core, "fh5-a");
        let b = sink.to(&core, "fh5-b");
        assert_eq!(a, b);
        let p = Packet::new_checked(&a[0][..], Format::Fh5).unwrap();
        assert_eq!(p.timestamp_ms(), 7, "TimestampMS");
        assert_eq!(p.car_class(), 5, "CarClass R becomes S2");
        assert_eq!(
            p.wheel_in_puddle().into_array(),
            [
                Puddle::Depth(1.0),
                Puddle::Depth(0.0),
                Puddle::Depth(0.0),
                Puddle::Depth(0.0)
            ],
            "WheelInPuddle"
        );
        assert_eq!(p.speed(), Some(41.5), "Speed");
        let s = sink.to(&core, "sled");
        assert_eq!(s[0].len(), 232);
        let p = Packet::new_checked(&s[0][..], Format::Sled).unwrap();
        assert_eq!(p.timestamp_ms(), 7, "TimestampMS");
        // One translation per format: both fh5 destinations were handed the one
        // fh5 buffer, and `same` the datagram itself.
        assert_eq!(sink.at[0], packet.as_ptr(), "same: the input as it came");
        assert_eq!(
            sink.at[1], sink.at[2],
            "fh5-a and fh5-b share one translation"
        );
        assert_eq!(sink.at[1], core.outputs[Format::Fh5.index()].buf.as_ptr());
        assert_ne!(sink.at[3], sink.at[1], "sled has its own");
        assert_eq!(core.outputs[Format::Fh6.index()].packet, 0, "same: no copy");

        let snap = core.snapshot(SENDER, Duration::ZERO);
        assert_eq!(snap.input.received, 1);
        assert_eq!(snap.input.last_format, Some(Format::Fh6));
        assert_counts_add_up(&snap, 0);
    }

    #[test]
    fn race_filter_and_untranslatable_datagrams_are_counted_per_destination() {
        let c = config(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("race", 9001, "same", "only_race_on = true")
                + &destination_toml("fm7", 9002, "fm7", "")),
        );
        let mut core = Fanout::new(&c);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        for (ts, racing) in [(1, false), (2, true), (3, false), (4, false)] {
            core.handle(&fh6(ts, racing), SENDER, t0, &mut sink);
        }
        core.handle(b"not a packet", SENDER, t0, &mut sink);

        let timestamps: Vec<u32> = sink
            .to(&core, "race")
            .iter()
            .filter(|b| b.len() == 324)
            .map(|b| {
                Packet::new_checked(&b[..], Format::Fh6)
                    .unwrap()
                    .timestamp_ms()
            })
            .collect();
        assert_eq!(timestamps, [2, 3], "racing, and the first frame after");
        let snap = core.snapshot(SENDER, Duration::ZERO);
        assert_eq!(snap.input.received, 5);
        assert_eq!(snap.input.malformed, 1);
        assert_eq!(
            core.last_malformed(),
            Some((12, SENDER)),
            "length and sender of the malformed datagram"
        );
        let race = stats(&snap, "race");
        assert_eq!(
            race.sent, 3,
            "2, 3 and the malformed datagram (passed as it is)"
        );
        assert_eq!(race.dropped(DropReason::NotRacing), 2);
        let fm7 = stats(&snap, "fm7");
        assert_eq!(fm7.sent, 4);
        assert_eq!(fm7.dropped(DropReason::Untranslatable), 1);
        assert_counts_add_up(&snap, 0);
    }

    #[test]
    fn rate_limit_keeps_the_newest_frame_pending_until_its_slot() {
        let c = config(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("slow", 9001, "same", "max_rate = 10")),
        );
        let mut core = Fanout::new(&c);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        core.handle(&fh6(1, true), SENDER, t0, &mut sink);
        core.handle(&fh6(2, true), SENDER, t0 + ms(10), &mut sink);
        core.handle(&fh6(3, true), SENDER, t0 + ms(20), &mut sink);
        assert_eq!(sink.got.len(), 1, "only the first went at once");
        assert_eq!(core.next_deadline(), Some(t0 + ms(100)));
        core.due(t0 + ms(99), &mut sink);
        assert_eq!(sink.got.len(), 1, "not before its slot");
        core.due(t0 + ms(100), &mut sink);
        assert_eq!(sink.got.len(), 2);
        let last = Packet::new_checked(&sink.got[1].1[..], Format::Fh6).unwrap();
        assert_eq!(last.timestamp_ms(), 3, "the newest waiting frame goes");
        assert_eq!(core.next_deadline(), None);

        core.handle(&fh6(4, true), SENDER, t0 + ms(150), &mut sink);
        let snap = core.snapshot(SENDER, Duration::ZERO);
        let slow = stats(&snap, "slow");
        assert_eq!(slow.sent, 2);
        assert_eq!(slow.dropped(DropReason::RateLimited), 1, "frame 2");
        assert_counts_add_up(&snap, 1);
        core.finish();
        let snap = core.snapshot(SENDER, Duration::ZERO);
        assert_eq!(stats(&snap, "slow").dropped(DropReason::RateLimited), 2);
        assert_counts_add_up(&snap, 0);
    }

    #[test]
    fn disallowed_senders_are_dropped_before_any_destination() {
        let c = config(
            &("[listen]\nformat = \"fh6\"\nallow = [\"10.0.0.0/8\"]\n".to_owned()
                + &destination_toml("raw", 9001, "same", "")),
        );
        let mut core = Fanout::new(&c);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        core.handle(&fh6(1, true), SENDER, t0, &mut sink);
        let lan: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        core.handle(&fh6(2, true), lan, t0, &mut sink);
        // A dual-stack socket shows an IPv4 sender as ::ffff:a.b.c.d.
        let mapped: SocketAddr = "[::ffff:10.1.2.3]:5000".parse().unwrap();
        core.handle(&fh6(3, true), mapped, t0, &mut sink);
        assert_eq!(sink.got.len(), 2);
        let snap = core.snapshot(SENDER, Duration::ZERO);
        assert_eq!(snap.input.disallowed, 1);
        assert_eq!(core.last_disallowed(), Some(SENDER));
        assert_counts_add_up(&snap, 0);
    }

    #[test]
    fn apply_keeps_unchanged_state_and_changed_counters() {
        let before = config(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9001, "same", "")
                + &destination_toml("b", 9002, "same", "max_rate = 10")
                + &destination_toml("d", 9004, "fm7", "")),
        );
        let mut core = Fanout::new(&before);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        core.handle(&fh6(1, true), SENDER, t0, &mut sink);
        core.handle(&fh6(2, true), SENDER, t0 + ms(10), &mut sink);
        let ids: Vec<DestinationId> = core.destinations().map(|(id, _)| id).collect();

        let after = config(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("c", 9003, "fm7", "")
                + &destination_toml("b", 9002, "fh5", "max_rate = 10")
                + &destination_toml("a", 9001, "same", "")),
        );
        let changes = core.apply(&after);
        assert_eq!(changes.to_string(), "+ c (fm7), ~ b: same -> fh5, - d");
        assert_eq!(changes.removed.len(), 1);
        assert_eq!(changes.removed[0].destination.name, "d");
        assert_eq!(changes.removed[0].stats.sent, 2, "d's final counters");
        assert_eq!(changes.changed[0].id, ids[1], "b keeps its id");
        // c takes the id d left.
        assert_eq!(changes.added[0].0, ids[2]);
        let names: Vec<&str> = core.destinations().map(|(_, d)| d.name.as_str()).collect();
        assert_eq!(names, ["c", "b", "a"], "configuration order");

        let snap = core.snapshot(SENDER, Duration::ZERO);
        assert_eq!(stats(&snap, "a").sent, 2, "a kept its counters");
        let b = stats(&snap, "b");
        assert_eq!(b.sent, 1, "b kept its counters");
        assert_eq!(
            b.dropped(DropReason::RateLimited),
            1,
            "b's pending frame was in the old format"
        );
        assert_eq!(stats(&snap, "c").sent, 0);

        // b's rate limiter (max_rate unchanged) still holds its slot after the
        // change of format.
        core.handle(&fh6(3, true), SENDER, t0 + ms(20), &mut sink);
        let got_b = sink.to(&core, "b");
        assert_eq!(got_b.len(), 1, "b still waits for its slot at 100 ms");
        core.due(t0 + ms(100), &mut sink);
        let got_b = sink.to(&core, "b");
        assert_eq!(got_b.len(), 2);
        let p = Packet::new_checked(&got_b[1][..], Format::Fh5).unwrap();
        assert_eq!(p.timestamp_ms(), 3);
        assert_eq!(p.car_class(), 5, "now translated to fh5");

        assert!(
            core.apply(&after).is_empty(),
            "the same config changes nothing"
        );
        assert_eq!(core.apply(&after).to_string(), "no changes");
    }

    #[test]
    fn auto_input_does_not_remap_horizon_on_a_guess() {
        let c = config(
            &("[listen]\nformat = \"auto\"\n".to_owned()
                + &destination_toml("fh5", 9001, "fh5", "")),
        );
        let mut core = Fanout::new(&c);
        let mut sink = Recorder::default();
        let mut dry = fh6(1, true);
        Packet::new_checked(&mut dry[..], Format::Fh6)
            .unwrap()
            .set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(0); 4]));
        core.handle(&dry, SENDER, Instant::now(), &mut sink);
        assert_eq!(sink.got[0].1, dry, "a guess passes the bytes as they came");
        let snap = core.snapshot(SENDER, Duration::ZERO);
        assert!(snap.input.format_guessed);
    }
}
