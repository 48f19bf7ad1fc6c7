//! The fan-out core: every decision the relay makes about a datagram, and every
//! counter, with no sockets, no clock reads and no logging above `trace!`.
//!
//! The core is built from its own input, [`Routes`] (the input format, who may
//! send, where packets go), which a validated `Config` makes in one place
//! (`Config::routes`); it knows nothing of files, summaries or recordings.
//!
//! [`Fanout::handle`] takes one datagram ([`Arrival`]: its bytes, its sender,
//! when it reached the machine) and the time now, decides whether it is admitted ([`Verdict`]),
//! and hands each destination's bytes to a [`Sink`] the caller gives it. In
//! order: the allow-list, the input format ([`Acceptor`]: a configured format,
//! or `auto`), then per destination the race filter, translation (done at most
//! once per distinct output format per packet into buffers made at start-up),
//! the age limit, and the rate limit (the newest early frame waits for its slot
//! in a pending frame; [`Fanout::due`] sends it).
//!
//! The age limit (`max_age`, issue 15) keeps a motion rig on live data: a
//! frame older than the limit when it would be sent (on arrival after a stall,
//! waiting for its rate slot, or in the shell's backlog) is dropped and counted
//! stale. Dropping costs only a count, so after a stall the stale part of
//! the queue goes by quickly and the fresh frames go at once. Without a limit a
//! destination gets every frame, as before.
//!
//! Destinations are known by a [`DestinationId`] that stays the same while the
//! destination exists. A new configuration is taken in two steps: the pure
//! [`Fanout::plan`] matches destinations by name (the one place that rule
//! lives) and says, per destination, what the shell must do with its socket;
//! the shell does it (all or nothing), then [`Fanout::commit`] applies the plan
//! and returns the [`Changes`]: an unchanged destination keeps all its state, a
//! changed one keeps its counters, new ones start, and removed ones come back
//! with their final counters.
//!
//! Counting happens here and nowhere else. The shell never touches a counter: it
//! says what the network did with each frame it was handed ([`Outcome`]: sent,
//! queued, dropped), later what became of the frames it queued, and which send
//! errors it met ([`Report`]). So, per destination, every admitted datagram is
//! counted exactly once: `received = sent + dropped by reason + held`, where
//! `held` is the pending frame plus the frames the shell queued
//! ([`DestinationStats::is_balanced`]). Frames the shell drops on the plan's
//! word (a destination removed, readdressed, or given another output) and those
//! left when the relay stops ([`Fanout::finish`]) are counted dropped by the
//! core, so a removed destination's final counters include them. The shell
//! also reports each send's latency ([`Report::record_latency`]); the core keeps
//! it in histograms made with the destination.
//!
//! Invariants: nothing here allocates per datagram, and no datagram can make it
//! panic.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use log::trace;

use crate::filter::{AgeLimit, RaceFilter, RateLimiter};
use crate::stats::{
    DestinationSnapshot, DestinationStats, DropReason, InputStats, Latencies, LatencyWindow,
    SendErrorKind,
};
use crate::translate::translate;
use crate::wire::{Acceptor, Format, Input, Packet, Reading, MAX_LEN};

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

/// What a destination receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Output {
    /// Every datagram byte for byte, whatever it is.
    Same,
    /// Packets translated to this format.
    Format(Format),
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Same => f.write_str("same"),
            Output::Format(format) => format.fmt(f),
        }
    }
}

impl serde::Serialize for Output {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One destination, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Unique name, used in logs and summaries (control characters already
    /// escaped by the configuration, so it is safe to print).
    pub name: String,
    /// The address as the user wrote it (a hostname stays a hostname here).
    pub addr_text: String,
    /// The resolved address.
    pub addr: SocketAddr,
    /// What it receives.
    pub output: Output,
    /// Drop frames with IsRaceOn = 0, except the first one after racing.
    pub only_race_on: bool,
    /// At most this many frames per second, the newest; 0 = every frame.
    pub max_rate: u32,
    /// Frames older than this when they would be sent are dropped (stale),
    /// and after a stall only the newest goes; `None` = frames of any age.
    pub max_age: Option<Duration>,
}

/// What the core is built from and reconfigured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    /// The input format.
    pub input: Input,
    /// Source ranges allowed to send; empty = everyone.
    pub allow: Vec<IpNet>,
    /// Where packets go, in order; names are unique (a repeated name is ignored).
    pub destinations: Vec<Destination>,
}

/// True when a datagram sent to `dest` reaches a socket listening on `listen`, so
/// relaying to it would loop: the same port, and `dest` is the listen address
/// itself or, when listening on every interface (`0.0.0.0`, `::`), any address
/// of this computer (loopback, or one `is_own` says is its own). IPv4-mapped
/// addresses count as IPv4. `::` counts as dual-stack, as the listener asks, and
/// `0.0.0.0` receives no IPv6. The one loop rule: the configuration and the
/// relay both apply it, with the operating system's answer as `is_own`.
pub fn is_loop(listen: SocketAddr, dest: SocketAddr, is_own: impl FnOnce(IpAddr) -> bool) -> bool {
    if listen.port() != dest.port() {
        return false;
    }
    let (l, d) = (listen.ip().to_canonical(), dest.ip().to_canonical());
    if l == d {
        return true;
    }
    if !l.is_unspecified() || (l.is_ipv4() && d.is_ipv6()) {
        return false;
    }
    d.is_unspecified() || d.is_loopback() || is_own(d)
}

/// What became of a frame, as the shell reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Handed to the OS.
    Sent,
    /// Kept in the shell's backlog (the socket would block): what becomes of it
    /// is reported later, through a [`Report`].
    Queued,
    /// Not sent, for this reason.
    Dropped(DropReason),
}

/// Where the shell tells the core about one destination: what became of the
/// frames it queued for it, the send errors it met, and how long frames took.
/// It can do nothing else with the destination's counters.
pub struct Report<'a> {
    stats: &'a mut DestinationStats,
    /// Frames the shell holds for the destination: queued, or being delivered.
    queued: &'a mut u64,
    age: AgeLimit,
    latency: &'a mut Latencies,
}

impl Report<'_> {
    /// What became of one frame the shell held; `Queued` when it still does.
    pub fn held(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Queued => return,
            Outcome::Sent => self.stats.sent += 1,
            Outcome::Dropped(reason) => self.stats.drop(reason),
        }
        debug_assert!(*self.queued > 0, "an outcome for a frame nobody held");
        *self.queued = self.queued.saturating_sub(1);
    }

    /// A send failed (the frame's own outcome is reported apart).
    pub fn send_error(&mut self, kind: SendErrorKind) {
        self.stats.send_errors.add(kind);
    }

    /// True when the destination has a `max_age`: the shell may hold back
    /// frames for destinations without one while a backlog is drained, so
    /// that those with one reach the newest frame first.
    pub fn has_age_limit(&self) -> bool {
        self.age.is_set()
    }

    /// Whether a frame the shell holds, received at `received`, is too old to
    /// send at `now` (the destination's `max_age`): if so it is counted stale,
    /// and the shell drops it instead of sending it.
    pub fn drop_if_stale(&mut self, received: Instant, now: Instant) -> bool {
        let stale = self.age.is_stale(received, now);
        if stale {
            self.held(Outcome::Dropped(DropReason::Stale));
        }
        stale
    }

    /// A frame that reached the machine at `received` was handed to the OS by
    /// a send that returned at `sent`: its latency.
    #[inline]
    pub fn record_latency(&mut self, received: Instant, sent: Instant) {
        self.latency.record(received, sent);
    }
}

/// Where the core hands each destination's bytes: the shell sends them, a test
/// records them.
pub trait Sink {
    /// Delivers `bytes`, which reached the machine at `received`, to
    /// destination `id` and says what became of them; what the shell learns
    /// meanwhile about frames it queued earlier for `id`, the send errors it
    /// meets and each send's latency go to `report`.
    fn deliver(
        &mut self,
        id: DestinationId,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Outcome;
}

impl<F: FnMut(DestinationId, &[u8]) -> Outcome> Sink for F {
    fn deliver(
        &mut self,
        id: DestinationId,
        bytes: &[u8],
        _: Instant,
        _: &mut Report<'_>,
    ) -> Outcome {
        self(id, bytes)
    }
}

/// A frame held for later, with the moment it reached the machine: a
/// destination's pending frame, or one in a shell's backlog.
#[derive(Clone, Copy)]
pub struct HeldFrame {
    len: usize,
    /// `None` until something is stored.
    received: Option<Instant>,
    data: [u8; FRAME_CAPACITY],
}

impl HeldFrame {
    /// A frame holding nothing.
    pub const EMPTY: HeldFrame = HeldFrame {
        len: 0,
        received: None,
        data: [0; FRAME_CAPACITY],
    };

    /// Copies `bytes`, received at `received`, in; `false` (and unchanged)
    /// when they don't fit.
    pub fn store(&mut self, bytes: &[u8], received: Instant) -> bool {
        match self.data.get_mut(..bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = bytes.len();
                self.received = Some(received);
                true
            }
            None => false,
        }
    }

    /// The bytes held.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// When the bytes held reached the machine; `None` for a frame that never
    /// held any.
    pub fn received(&self) -> Option<Instant> {
        self.received
    }
}

/// One datagram as the shell received it.
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    /// Its bytes.
    pub data: &'a [u8],
    /// Its sender.
    pub from: SocketAddr,
    /// When it reached the machine: the kernel's receive time where there is
    /// one, else when the shell read it.
    pub received: Instant,
}

impl<'a> Arrival<'a> {
    /// `data` from `from`, received at `received`.
    pub fn new(data: &'a [u8], from: SocketAddr, received: Instant) -> Self {
        Arrival {
            data,
            from,
            received,
        }
    }
}

/// One destination's live state: its filters, its pending frame, its counters.
struct DestinationState {
    config: Destination,
    race: RaceFilter,
    rate: RateLimiter,
    age: AgeLimit,
    /// The newest frame waiting for its `max_rate` slot, if `has_pending`.
    pending: Box<HeldFrame>,
    has_pending: bool,
    /// When the pending frame came: its deadline when the limiter names none
    /// (a reload changed `max_rate` while it waited, so the limiter is new and
    /// the frame may go at once).
    pending_at: Option<Instant>,
    /// Frames the shell holds for it (see [`Report`]).
    queued: u64,
    /// Every counter but `held`, which [`DestinationState::stats`] adds.
    stats: DestinationStats,
    /// Its latency histograms, reported by the shell (see [`Report`]).
    latency: Box<Latencies>,
}

impl DestinationState {
    fn new(config: Destination) -> Self {
        DestinationState {
            race: RaceFilter::default(),
            rate: RateLimiter::new(config.max_rate),
            age: AgeLimit::new(config.max_age),
            pending: Box::new(HeldFrame::EMPTY),
            has_pending: false,
            pending_at: None,
            queued: 0,
            stats: DestinationStats::default(),
            latency: Box::default(),
            config,
        }
    }

    /// Applies `max_age` and `max_rate`, then hands the frame to the sink.
    fn deliver(
        &mut self,
        id: DestinationId,
        bytes: &[u8],
        received: Instant,
        now: Instant,
        sink: &mut impl Sink,
    ) {
        if self.age.is_stale(received, now) {
            // Costs nothing but a count: a long backlog after a stall doesn't
            // delay the first fresh frame.
            self.stats.drop(DropReason::Stale);
            return;
        }
        // This newer frame supersedes the waiting one.
        self.forget_pending();
        if self.rate.is_due(now) {
            self.rate.sent(now);
            self.send(id, bytes, received, sink);
        } else if self.pending.store(bytes, received) {
            self.has_pending = true;
            self.pending_at = Some(now);
        } else {
            self.stats.drop(DropReason::RateLimited);
        }
    }

    /// Hands over the pending frame if its slot has come, unless it has grown
    /// too old.
    fn due(&mut self, id: DestinationId, now: Instant, sink: &mut impl Sink) {
        if !self.has_pending || !self.rate.is_due(now) {
            return;
        }
        self.has_pending = false;
        let received = self.pending.received().unwrap_or(now);
        if self.age.is_stale(received, now) {
            // Its slot stays free for a fresh frame.
            self.stats.drop(DropReason::Stale);
            return;
        }
        self.rate.sent(now);
        let DestinationState {
            pending,
            stats,
            queued,
            age,
            latency,
            ..
        } = self;
        send(
            id,
            pending.bytes(),
            received,
            Report::new(stats, queued, *age, latency),
            sink,
        );
    }

    /// Hands `bytes` to the sink, counting the outcome.
    fn send(&mut self, id: DestinationId, bytes: &[u8], received: Instant, sink: &mut impl Sink) {
        let report = Report::new(
            &mut self.stats,
            &mut self.queued,
            self.age,
            &mut self.latency,
        );
        send(id, bytes, received, report, sink);
    }

    /// Drops the pending frame, counting it: it will never go.
    fn forget_pending(&mut self) {
        if std::mem::take(&mut self.has_pending) {
            self.stats.drop(DropReason::RateLimited);
        }
    }

    /// Counts the frames the shell held for it as dropped: the shell drops them
    /// (the plan said so, or the relay stops).
    fn drop_queued(&mut self) {
        self.stats.dropped[DropReason::Backlog as usize] += std::mem::take(&mut self.queued);
    }

    fn deadline(&self) -> Option<Instant> {
        if self.has_pending {
            self.rate.next_due().or(self.pending_at)
        } else {
            None
        }
    }

    /// Its counters, `held` included.
    fn stats(&self) -> DestinationStats {
        DestinationStats {
            held: self.queued + u64::from(self.has_pending),
            ..self.stats
        }
    }

    fn snapshot(&self, window: LatencyWindow) -> DestinationSnapshot {
        DestinationSnapshot {
            name: self.config.name.clone(),
            addr: self.config.addr,
            output: self.config.output,
            stats: self.stats(),
            latency: self.latency.figures(window),
        }
    }

    /// As [`DestinationState::snapshot`], into `into`: its name's capacity is
    /// reused, so nothing is allocated once it is long enough.
    fn snapshot_into(&self, window: LatencyWindow, into: &mut DestinationSnapshot) {
        into.name.clone_from(&self.config.name);
        into.addr = self.config.addr;
        into.output = self.config.output;
        into.stats = self.stats();
        into.latency = self.latency.figures(window);
    }
}

impl<'a> Report<'a> {
    fn new(
        stats: &'a mut DestinationStats,
        queued: &'a mut u64,
        age: AgeLimit,
        latency: &'a mut Latencies,
    ) -> Self {
        Report {
            stats,
            queued,
            age,
            latency,
        }
    }
}

/// Hands `bytes` to the sink and counts the outcome through `report`: until
/// the sink says otherwise, the frame is the shell's to hold.
fn send(
    id: DestinationId,
    bytes: &[u8],
    received: Instant,
    mut report: Report<'_>,
    sink: &mut impl Sink,
) {
    *report.queued += 1;
    let outcome = sink.deliver(id, bytes, received, &mut report);
    report.held(outcome);
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

/// What the core decided about one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// From a sender outside `listen.allow`: counted, and sent nowhere.
    Disallowed,
    /// Relayed: read as `Some(reading)`, or `None` when it is no packet of the
    /// input (counted malformed, and sent only to `same` destinations).
    Admitted(Option<Reading>),
}

impl Verdict {
    /// True when the datagram was relayed (what a tap records or shows).
    pub fn is_admitted(self) -> bool {
        matches!(self, Verdict::Admitted(_))
    }
}

/// What the shell must do with one destination's socket for a [`Plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Open a socket to this address: for a new destination, or one whose
    /// address changed (whose old socket closes, with what it held).
    Open(SocketAddr),
    /// The same socket stays.
    Keep {
        /// The frames the shell holds for it are dropped: they are in the old
        /// output format.
        discard_backlog: bool,
        /// Its rate limiter starts afresh (its `max_rate` changed); the core's
        /// own business, listed for completeness.
        reset_limiter: bool,
    },
}

/// One destination of a [`Plan`]: the id it has, or will get, and what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Its id from the commit on.
    pub id: DestinationId,
    /// What the shell does with its socket.
    pub action: Action,
}

/// What a new set of [`Routes`] changes, per destination, before anything is
/// changed: made by [`Fanout::plan`], carried out by the shell (sockets) and
/// then by [`Fanout::commit`] (everything else).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The commits the core had seen when the plan was made.
    generation: u64,
    /// The new routes, a repeated name left out.
    routes: Routes,
    /// One per destination of `routes`, in order.
    steps: Vec<Step>,
    /// Destinations that go away: the shell closes their sockets and drops
    /// what they held.
    closed: Vec<DestinationId>,
}

impl Plan {
    /// Every destination of the new routes, in order, with its step.
    pub fn steps(&self) -> impl Iterator<Item = (&Destination, Step)> {
        self.routes
            .destinations
            .iter()
            .zip(self.steps.iter().copied())
    }

    /// The destinations that go away.
    pub fn closed(&self) -> &[DestinationId] {
        &self.closed
    }

    /// The routes it leads to.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }
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
    /// Its counters at removal, every frame it held counted dropped.
    pub stats: DestinationStats,
}

/// What [`Fanout::commit`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// New destinations.
    pub added: Vec<(DestinationId, Destination)>,
    /// Destinations whose configuration changed.
    pub changed: Vec<Changed>,
    /// Destinations removed.
    pub removed: Vec<Removed>,
    /// The input format, before and after, when it changed.
    pub input: Option<(Input, Input)>,
    /// The allow-list changed.
    pub allow: bool,
}

impl Changes {
    /// True when the new routes made no difference to the core.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.changed.is_empty()
            && self.removed.is_empty()
            && self.input.is_none()
            && !self.allow
    }

    /// Writes each change, every one after `sep` (then `", "`); `sep` is left
    /// as it is when there is none. For a shell that lists its own changes
    /// first.
    pub fn write_items(&self, f: &mut fmt::Formatter<'_>, sep: &mut &str) -> fmt::Result {
        let mut item = |f: &mut fmt::Formatter<'_>| {
            let s = *sep;
            *sep = ", ";
            f.write_str(s)
        };
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
            write!(f, "{}", DestinationDiff(&c.before, &c.after))?;
        }
        for r in &self.removed {
            item(f)?;
            write!(f, "- {}", r.destination.name)?;
        }
        Ok(())
    }
}

impl fmt::Display for Changes {
    /// One line: `+ C (fm7), ~ B: same -> fh5, - D`, or `no changes`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("no changes");
        }
        self.write_items(f, &mut "")
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
        if a.max_age != b.max_age {
            let age = |d: Option<Duration>| {
                d.map_or_else(
                    || "off".to_owned(),
                    |d| humantime::format_duration(d).to_string(),
                )
            };
            part(
                f,
                format_args!("max_age {} -> {}", age(a.max_age), age(b.max_age)),
            )?;
        }
        Ok(())
    }
}

/// Every counter of the core at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Input counters.
    pub input: InputStats,
    /// Every destination, in configuration order.
    pub destinations: Vec<DestinationSnapshot>,
}

/// The pure fan-out core. See the module documentation.
pub struct Fanout {
    acceptor: Acceptor,
    allow: Vec<IpNet>,
    outputs: [OutputSlot; Format::ALL.len()],
    /// Indexed by [`DestinationId`]; `None` for a free id.
    dests: Vec<Option<DestinationState>>,
    /// Live ids in configuration order: the order of sends and of reports.
    order: Vec<DestinationId>,
    stats: InputStats,
    /// Packets handled so far: the number of the current one.
    packet: u64,
    /// Plans committed so far: a plan is committed to the core it was made
    /// from, with no commit between.
    generation: u64,
    /// The length and sender of the last datagram that was not the input format.
    last_malformed: Option<(usize, SocketAddr)>,
    /// The last sender outside `listen.allow`.
    last_disallowed: Option<SocketAddr>,
}

impl Fanout {
    /// A core for `routes`, every destination started.
    pub fn new(routes: &Routes) -> Fanout {
        let mut core = Fanout {
            acceptor: Acceptor::new(routes.input),
            allow: routes.allow.clone(),
            outputs: std::array::from_fn(|_| OutputSlot {
                buf: Box::new([0; MAX_LEN]),
                len: 0,
                packet: 0,
            }),
            dests: Vec::new(),
            order: Vec::new(),
            stats: InputStats::default(),
            packet: 0,
            generation: 0,
            last_malformed: None,
            last_disallowed: None,
        };
        // Every destination is new to an empty core.
        core.commit(core.plan(routes));
        core
    }

    /// Relays one datagram, at `now` (what rate slots and ages are measured
    /// at; its receive time may be earlier).
    pub fn handle(&mut self, arrival: Arrival<'_>, now: Instant, sink: &mut impl Sink) -> Verdict {
        let Arrival {
            data,
            from,
            received,
        } = arrival;
        let len = data.len();
        self.stats.received += 1;
        self.stats.bytes += len as u64;
        // An IPv4 sender seen through a dual-stack socket reads as itself.
        let from = SocketAddr::new(from.ip().to_canonical(), from.port());
        let ip = from.ip();
        if !self.allow.is_empty() && !self.allow.iter().any(|net| net.contains(&ip)) {
            self.stats.disallowed += 1;
            self.last_disallowed = Some(from);
            return Verdict::Disallowed;
        }
        let reading = self.acceptor.read(data);
        match reading {
            Some(r) => {
                self.stats.last_format = Some(r.format);
                self.stats.format_guessed = !r.certain;
            }
            None => {
                self.stats.malformed += 1;
                self.last_malformed = Some((len, from));
            }
        }
        let race_on = reading.map(|r| Packet::new_unchecked(data, r.format).race_on());
        self.packet += 1;
        let packet = self.packet;
        trace!("packet {packet} from {from}: {len} bytes, {reading:?}");
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
            dest.stats.received += 1;
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
                    let from = match reading {
                        Some(r) if !r.certain && to.is_horizon() => Some(to),
                        r => r.map(|r| r.format),
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
            dest.deliver(id, bytes, received, now, sink);
        }
        Verdict::Admitted(reading)
    }

    /// Hands over every pending frame whose rate slot has come by `now`; a
    /// pending frame grown older than its `max_age` is dropped instead.
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

    /// The relay stops: every frame still held (waiting for its rate slot, or
    /// left in the shell's backlog after its last flush) is counted dropped,
    /// and the shell drops them.
    pub fn finish(&mut self) {
        for d in self.dests.iter_mut().flatten() {
            d.forget_pending();
            d.drop_queued();
        }
    }

    /// What `routes` would change, destination by destination, matching them
    /// by name: changes nothing.
    pub fn plan(&self, routes: &Routes) -> Plan {
        let mut kept: Vec<Destination> = Vec::with_capacity(routes.destinations.len());
        for d in &routes.destinations {
            if !kept.iter().any(|k| k.name == d.name) {
                kept.push(d.clone());
            }
        }
        let named = |name: &str| {
            self.states()
                .find(|(_, s)| s.config.name == name)
                .map(|(id, s)| (id, &s.config))
        };
        let closed: Vec<DestinationId> = self
            .states()
            .filter(|(_, s)| !kept.iter().any(|d| d.name == s.config.name))
            .map(|(id, _)| id)
            .collect();
        // New destinations take the free ids, lowest first: those never
        // used, and those of the destinations that go away.
        let mut free = (0..)
            .map(DestinationId)
            .filter(|id| match self.dests.get(id.0) {
                Some(slot) => slot.is_none() || closed.contains(id),
                None => true,
            });
        let steps = kept
            .iter()
            .map(|d| match named(&d.name) {
                Some((id, before)) if before.addr != d.addr => Step {
                    id,
                    action: Action::Open(d.addr),
                },
                Some((id, before)) => Step {
                    id,
                    action: Action::Keep {
                        discard_backlog: before.output != d.output,
                        reset_limiter: before.max_rate != d.max_rate,
                    },
                },
                None => Step {
                    id: free.next().expect("ids never run out"),
                    action: Action::Open(d.addr),
                },
            })
            .collect();
        Plan {
            generation: self.generation,
            routes: Routes {
                input: routes.input,
                allow: routes.allow.clone(),
                destinations: kept,
            },
            steps,
            closed,
        }
    }

    /// Takes the routes of `plan`, which the shell has carried out, and says
    /// what changed. Panics if another plan was committed since `plan` was
    /// made (the shell plans and commits in one go).
    pub fn commit(&mut self, plan: Plan) -> Changes {
        assert_eq!(
            plan.generation, self.generation,
            "a plan is committed to the core it was made from, with no commit between"
        );
        self.generation += 1;
        let Plan {
            routes,
            steps,
            closed,
            ..
        } = plan;
        let mut changes = Changes::default();
        if routes.input != self.acceptor.input() {
            changes.input = Some((self.acceptor.input(), routes.input));
            self.acceptor = Acceptor::new(routes.input);
        }
        if routes.allow != self.allow {
            changes.allow = true;
            self.allow = routes.allow;
        }
        for id in closed {
            let Some(mut state) = self.dests.get_mut(id.0).and_then(Option::take) else {
                continue;
            };
            state.forget_pending();
            state.drop_queued();
            changes.removed.push(Removed {
                id,
                stats: state.stats(),
                destination: state.config,
            });
        }
        self.order.clear();
        for (d, step) in routes.destinations.into_iter().zip(steps) {
            let id = step.id;
            self.order.push(id);
            if self.dests.len() <= id.0 {
                self.dests.resize_with(id.0 + 1, || None);
            }
            let Some(state) = self.dests[id.0].as_mut() else {
                changes.added.push((id, d.clone()));
                self.dests[id.0] = Some(DestinationState::new(d));
                continue;
            };
            if state.config == d {
                continue;
            }
            if state.config.output != d.output || state.config.addr != d.addr {
                // The waiting frame is in the old format, or for the old address.
                state.forget_pending();
            }
            let dropped_by_shell = match step.action {
                Action::Open(_) => true,
                Action::Keep {
                    discard_backlog, ..
                } => discard_backlog,
            };
            if dropped_by_shell {
                state.drop_queued();
            }
            if state.config.max_rate != d.max_rate {
                state.rate = RateLimiter::new(d.max_rate);
            }
            // A new limit applies to the frames held too.
            state.age = AgeLimit::new(d.max_age);
            if state.config.only_race_on != d.only_race_on {
                state.race = RaceFilter::default();
            }
            let before = std::mem::replace(&mut state.config, d.clone());
            changes.changed.push(Changed {
                id,
                before,
                after: d,
            });
        }
        changes
    }

    /// [`Fanout::plan`] then [`Fanout::commit`], for a caller with no sockets.
    pub fn apply(&mut self, routes: &Routes) -> Changes {
        let plan = self.plan(routes);
        self.commit(plan)
    }

    /// The destinations in configuration order, with their ids.
    pub fn destinations(&self) -> impl Iterator<Item = (DestinationId, &Destination)> {
        self.states().map(|(id, d)| (id, &d.config))
    }

    /// The configuration of destination `id`.
    pub fn destination(&self, id: DestinationId) -> Option<&Destination> {
        self.dests.get(id.0)?.as_ref().map(|d| &d.config)
    }

    /// Where the shell reports what became of the frames it queued for `id`,
    /// and the send errors it met, outside [`Fanout::handle`] and
    /// [`Fanout::due`] (a socket became writable, an ICMP error came back).
    pub fn report(&mut self, id: DestinationId) -> Option<Report<'_>> {
        let d = self.dests.get_mut(id.0)?.as_mut()?;
        Some(Report::new(
            &mut d.stats,
            &mut d.queued,
            d.age,
            &mut d.latency,
        ))
    }

    /// Frames the shell holds for `id`, as the core counts them: what the
    /// shell's backlog for it must hold.
    pub fn queued(&self, id: DestinationId) -> u64 {
        self.dests
            .get(id.0)
            .and_then(Option::as_ref)
            .map_or(0, |d| d.queued)
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
        self.acceptor.input()
    }

    /// How a 324-byte packet reads now, with `auto` input; `None` for a fixed
    /// input. Changes only after a run of packets agree (see
    /// [`crate::wire::Detector`]).
    pub fn horizon(&self) -> Option<Reading> {
        self.acceptor.horizon()
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

    /// Every counter now, latency over the summary interval so far.
    pub fn counters(&self) -> Counters {
        self.counters_over(LatencyWindow::Interval)
    }

    /// Every counter now, latency over `window`.
    pub fn counters_over(&self, window: LatencyWindow) -> Counters {
        Counters {
            input: self.stats,
            destinations: self.states().map(|(_, d)| d.snapshot(window)).collect(),
        }
    }

    /// As [`Fanout::counters_over`], into `destinations` (returning the input's
    /// counters): the list and each name keep their capacity, so a reused list
    /// costs no allocation unless destinations were added or renamed longer.
    pub fn counters_into(
        &self,
        window: LatencyWindow,
        destinations: &mut Vec<DestinationSnapshot>,
    ) -> InputStats {
        let mut n = 0;
        for (_, d) in self.states() {
            match destinations.get_mut(n) {
                Some(into) => d.snapshot_into(window, into),
                None => destinations.push(d.snapshot(window)),
            }
            n += 1;
        }
        destinations.truncate(n);
        self.stats
    }

    /// A periodic summary was taken: every destination's latency interval
    /// starts again (only the summary's reader does this).
    pub fn new_interval(&mut self) {
        for d in self.dests.iter_mut().flatten() {
            d.latency.new_interval();
        }
    }

    fn states(&self) -> impl Iterator<Item = (DestinationId, &DestinationState)> {
        self.order
            .iter()
            .filter_map(|&id| self.dests[id.0].as_ref().map(|d| (id, d)))
    }
}

#[cfg(test)]
impl Fanout {
    /// A datagram received and handled at `at`, nothing known behind it.
    pub(crate) fn handle_at(
        &mut self,
        data: &[u8],
        from: SocketAddr,
        at: Instant,
        sink: &mut impl Sink,
    ) -> Verdict {
        self.handle(Arrival::new(data, from, at), at, sink)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{Config, Overrides};
    use crate::wire::{Puddle, Wheels, AGREEING_PACKETS};

    const SENDER: SocketAddr = SocketAddr::new(
        std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1)),
        50_000,
    );

    fn routes(toml: &str) -> Routes {
        Config::from_toml(toml, "fanout.toml", &Overrides::default())
            .unwrap_or_else(|e| panic!("{e}\n{toml}"))
            .routes()
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

    /// A sink that records every delivery, and where its bytes were, and says
    /// what `outcome` says (sent, unless told otherwise).
    struct Recorder {
        got: Vec<(DestinationId, Vec<u8>)>,
        at: Vec<*const u8>,
        outcome: Outcome,
    }

    impl Default for Recorder {
        fn default() -> Self {
            Recorder {
                got: Vec::new(),
                at: Vec::new(),
                outcome: Outcome::Sent,
            }
        }
    }

    impl Sink for Recorder {
        fn deliver(
            &mut self,
            id: DestinationId,
            bytes: &[u8],
            _: Instant,
            _: &mut Report<'_>,
        ) -> Outcome {
            self.got.push((id, bytes.to_vec()));
            self.at.push(bytes.as_ptr());
            self.outcome
        }
    }

    impl Recorder {
        fn to(&self, core: &Fanout, name: &str) -> Vec<Vec<u8>> {
            let id = id_of(core, name);
            self.got
                .iter()
                .filter(|(i, _)| *i == id)
                .map(|(_, b)| b.clone())
                .collect()
        }
    }

    #[track_caller]
    fn id_of(core: &Fanout, name: &str) -> DestinationId {
        core.destinations()
            .find(|(_, d)| d.name == name)
            .map(|(id, _)| id)
            .unwrap_or_else(|| panic!("no destination {name}"))
    }

    fn stats(c: &Counters, name: &str) -> DestinationStats {
        c.destinations
            .iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("no destination {name}"))
            .stats
    }

    /// Every destination's counters add up: received = sent + dropped + held.
    #[track_caller]
    fn assert_balanced(c: &Counters) {
        for d in &c.destinations {
            assert!(d.stats.is_balanced(), "{}: {:?}", d.name, d.stats);
        }
    }

    /// The timestamps of the frames `name` was handed (all `same`, fh6).
    fn timestamps_to(sink: &Recorder, core: &Fanout, name: &str) -> Vec<u32> {
        sink.to(core, name)
            .iter()
            .map(|b| {
                Packet::new_checked(&b[..], Format::Fh6)
                    .unwrap()
                    .timestamp_ms()
            })
            .collect()
    }

    /// Issue 15: on a synthetic clock, a frame older than `max_age` when it
    /// would go is dropped and counted stale, on arrival (after a stall) and
    /// as a rate-limited pending frame; a destination without the limit gets
    /// every frame, and every destination's counters add up.
    #[test]
    fn frames_older_than_max_age_are_not_sent_but_counted_stale() {
        let r = routes(
            &(destination_toml("rig", 9000, "same", "max_age = \"50ms\"")
                + &destination_toml("plain", 9001, "same", "")
                + &destination_toml(
                    "slow-rig",
                    9002,
                    "same",
                    "max_age = \"50ms\"\nmax_rate = 10",
                )),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let handle = |core: &mut Fanout, sink: &mut Recorder, ts: u32, received: u64, now: u64| {
            let packet = fh6(ts, true);
            let arrival = Arrival::new(&packet, SENDER, t0 + ms(received));
            core.handle(arrival, t0 + ms(now), sink);
        };
        // Live: every destination gets it.
        handle(&mut core, &mut sink, 1, 0, 0);
        // Read 51 ms after it arrived (a stall): too old for the limit.
        handle(&mut core, &mut sink, 2, 0, 51);
        // Exactly 50 ms old: still fresh; slow-rig's slot is at 100 ms.
        handle(&mut core, &mut sink, 3, 10, 60);
        // Replaces 3 in slow-rig's slot, and is 30 ms old there: it goes.
        handle(&mut core, &mut sink, 4, 70, 70);
        core.due(t0 + ms(100), &mut sink);
        // Waits for the slot at 200 ms, 90 ms old by then: dropped, and the
        // slot stays free.
        handle(&mut core, &mut sink, 5, 110, 110);
        assert_eq!(core.next_deadline(), Some(t0 + ms(200)));
        core.due(t0 + ms(200), &mut sink);
        assert_eq!(core.next_deadline(), None, "nothing waits");
        // A stall: ten frames 2.7 ms apart, read at once 60 ms after the
        // first; only those at most 50 ms old go to the rigs, in order.
        for i in 0..10u64 {
            let received = 300 + i * 27 / 10;
            handle(&mut core, &mut sink, 10 + i as u32, received, 360);
        }
        let c = core.counters();
        assert_balanced(&c);
        assert_eq!(c.input.received, 15);
        assert_eq!(
            timestamps_to(&sink, &core, "plain"),
            [1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
        );
        // Frames 10..=13 arrived at 300, 302, 305, 308 ms: over 50 ms old at 360.
        assert_eq!(
            timestamps_to(&sink, &core, "rig"),
            [1, 3, 4, 5, 14, 15, 16, 17, 18, 19]
        );
        // 14 takes the free slot at once; 15..=19 wait for the next, each
        // replacing the one before.
        assert_eq!(timestamps_to(&sink, &core, "slow-rig"), [1, 4, 14]);
        for (name, sent, stale, rate_limited, held) in [
            ("plain", 15, 0, 0, 0),
            // 2, 10..=13.
            ("rig", 10, 5, 0, 0),
            // 2, 10..=13 on arrival, 5 at its slot; 3, 15..=18 replaced; 19 waits.
            ("slow-rig", 3, 6, 5, 1),
        ] {
            let s = stats(&c, name);
            assert_eq!(
                (
                    s.sent,
                    s.dropped(DropReason::Stale),
                    s.dropped(DropReason::RateLimited),
                    s.held
                ),
                (sent, stale, rate_limited, held),
                "{name}: {s:?}"
            );
            let drops: u64 = DropReason::ALL.iter().map(|&r| s.dropped(r)).sum();
            assert_eq!(
                s.sent + drops + s.held,
                c.input.received,
                "{name}: sent + drops + held = received"
            );
        }
    }

    /// A shell that reports each send as taking `took` from its receive time.
    struct Timed {
        took: Duration,
    }

    impl Sink for Timed {
        fn deliver(
            &mut self,
            _: DestinationId,
            _: &[u8],
            received: Instant,
            report: &mut Report<'_>,
        ) -> Outcome {
            report.record_latency(received, received + self.took);
            Outcome::Sent
        }
    }

    #[test]
    fn latency_reported_by_the_shell_is_kept_per_destination_and_interval() {
        let r = routes(&destination_toml("rig", 9000, "same", ""));
        let mut core = Fanout::new(&r);
        let t0 = Instant::now();
        let packet = fh6(1, true);
        for us in [20, 30, 40] {
            let mut sink = Timed {
                took: Duration::from_micros(us),
            };
            core.handle(Arrival::new(&packet, SENDER, t0), t0, &mut sink);
        }
        let l = core.counters().destinations[0].latency;
        assert_eq!(
            (l.count, l.p50, l.max),
            (3, Duration::from_micros(30), Duration::from_micros(40))
        );
        core.new_interval();
        assert_eq!(core.counters().destinations[0].latency.count, 0);
        let run = core.counters_over(LatencyWindow::Run).destinations[0].latency;
        assert_eq!(run.count, 3, "the whole run keeps them");
    }

    #[test]
    fn translates_once_per_output_format_and_sends_same_as_it_came() {
        let r = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("raw", 9001, "same", "")
                + &destination_toml("fh5-a", 9002, "fh5", "")
                + &destination_toml("fh5-b", 9003, "fh5", "")
                + &destination_toml("sled", 9004, "sled", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let packet = fh6(7, true);
        let verdict = core.handle_at(&packet, SENDER, t0, &mut sink);
        assert_eq!(
            verdict,
            Verdict::Admitted(Some(Reading {
                format: Format::Fh6,
                certain: true
            }))
        );

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

        let c = core.counters();
        assert_eq!(c.input.received, 1);
        assert_eq!(c.input.last_format, Some(Format::Fh6));
        assert_eq!(stats(&c, "raw").received, 1);
        assert_eq!(stats(&c, "raw").sent, 1);
        assert_balanced(&c);
    }

    #[test]
    fn race_filter_and_untranslatable_datagrams_are_counted_per_destination() {
        let r = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("race", 9001, "same", "only_race_on = true")
                + &destination_toml("fm7", 9002, "fm7", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        for (ts, racing) in [(1, false), (2, true), (3, false), (4, false)] {
            core.handle_at(&fh6(ts, racing), SENDER, t0, &mut sink);
        }
        let verdict = core.handle_at(b"not a packet", SENDER, t0, &mut sink);
        assert_eq!(verdict, Verdict::Admitted(None), "malformed, still relayed");

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
        let c = core.counters();
        assert_eq!(c.input.received, 5);
        assert_eq!(c.input.malformed, 1);
        assert_eq!(
            core.last_malformed(),
            Some((12, SENDER)),
            "length and sender of the malformed datagram"
        );
        let race = stats(&c, "race");
        assert_eq!(
            race.sent, 3,
            "2, 3 and the malformed datagram (passed as it is)"
        );
        assert_eq!(race.dropped(DropReason::NotRacing), 2);
        let fm7 = stats(&c, "fm7");
        assert_eq!(fm7.sent, 4);
        assert_eq!(fm7.dropped(DropReason::Untranslatable), 1);
        assert_balanced(&c);
    }

    #[test]
    fn rate_limit_keeps_the_newest_frame_pending_until_its_slot() {
        let r = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("slow", 9001, "same", "max_rate = 10")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        core.handle_at(&fh6(1, true), SENDER, t0, &mut sink);
        core.handle_at(&fh6(2, true), SENDER, t0 + ms(10), &mut sink);
        core.handle_at(&fh6(3, true), SENDER, t0 + ms(20), &mut sink);
        assert_eq!(sink.got.len(), 1, "only the first went at once");
        assert_eq!(core.next_deadline(), Some(t0 + ms(100)));
        core.due(t0 + ms(99), &mut sink);
        assert_eq!(sink.got.len(), 1, "not before its slot");
        core.due(t0 + ms(100), &mut sink);
        assert_eq!(sink.got.len(), 2);
        let last = Packet::new_checked(&sink.got[1].1[..], Format::Fh6).unwrap();
        assert_eq!(last.timestamp_ms(), 3, "the newest waiting frame goes");
        assert_eq!(core.next_deadline(), None);

        core.handle_at(&fh6(4, true), SENDER, t0 + ms(150), &mut sink);
        let slow = stats(&core.counters(), "slow");
        assert_eq!(slow.sent, 2);
        assert_eq!(slow.dropped(DropReason::RateLimited), 1, "frame 2");
        assert_eq!(slow.held, 1, "frame 4 waits");
        assert!(slow.is_balanced(), "{slow:?}");
        core.finish();
        let slow = stats(&core.counters(), "slow");
        assert_eq!(slow.dropped(DropReason::RateLimited), 2);
        assert_eq!(slow.held, 0);
        assert!(slow.is_balanced(), "{slow:?}");
    }

    #[test]
    fn disallowed_senders_are_dropped_before_any_destination() {
        let r = routes(
            &("[listen]\nformat = \"fh6\"\nallow = [\"10.0.0.0/8\"]\n".to_owned()
                + &destination_toml("raw", 9001, "same", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        assert_eq!(
            core.handle_at(&fh6(1, true), SENDER, t0, &mut sink),
            Verdict::Disallowed
        );
        assert!(!Verdict::Disallowed.is_admitted());
        let lan: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        assert!(core
            .handle_at(&fh6(2, true), lan, t0, &mut sink)
            .is_admitted());
        // A dual-stack socket shows an IPv4 sender as ::ffff:a.b.c.d.
        let mapped: SocketAddr = "[::ffff:10.1.2.3]:5000".parse().unwrap();
        assert!(core
            .handle_at(&fh6(3, true), mapped, t0, &mut sink)
            .is_admitted());
        assert_eq!(sink.got.len(), 2);
        let c = core.counters();
        assert_eq!(c.input.disallowed, 1);
        assert_eq!(core.last_disallowed(), Some(SENDER));
        assert_eq!(stats(&c, "raw").received, 2, "only what was admitted");
        assert_balanced(&c);
    }

    #[test]
    fn plan_then_commit_keeps_unchanged_state_and_changed_counters() {
        let before = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9001, "same", "")
                + &destination_toml("b", 9002, "same", "max_rate = 10")
                + &destination_toml("d", 9004, "fm7", "")),
        );
        let mut core = Fanout::new(&before);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        core.handle_at(&fh6(1, true), SENDER, t0, &mut sink);
        core.handle_at(&fh6(2, true), SENDER, t0 + ms(10), &mut sink);
        let ids: Vec<DestinationId> = core.destinations().map(|(id, _)| id).collect();

        let after = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("c", 9003, "fm7", "")
                + &destination_toml("b", 9002, "fh5", "max_rate = 10")
                + &destination_toml("a", 9001, "same", "")),
        );
        let plan = core.plan(&after);
        let steps: Vec<(&str, Step)> = plan.steps().map(|(d, s)| (d.name.as_str(), s)).collect();
        assert_eq!(
            steps,
            [
                (
                    "c",
                    Step {
                        // c takes the id d leaves.
                        id: ids[2],
                        action: Action::Open("127.0.0.1:9003".parse().unwrap())
                    }
                ),
                (
                    "b",
                    Step {
                        id: ids[1],
                        action: Action::Keep {
                            discard_backlog: true,
                            reset_limiter: false
                        }
                    }
                ),
                (
                    "a",
                    Step {
                        id: ids[0],
                        action: Action::Keep {
                            discard_backlog: false,
                            reset_limiter: false
                        }
                    }
                ),
            ]
        );
        assert_eq!(plan.closed(), [ids[2]]);
        assert_eq!(
            core.counters().destinations.len(),
            3,
            "a plan changes nothing"
        );
        let changes = core.commit(plan);
        assert_eq!(changes.to_string(), "+ c (fm7), ~ b: same -> fh5, - d");
        assert_eq!(changes.removed.len(), 1);
        assert_eq!(changes.removed[0].destination.name, "d");
        assert_eq!(changes.removed[0].stats.sent, 2, "d's final counters");
        assert_eq!(changes.changed[0].id, ids[1], "b keeps its id");
        assert_eq!(changes.added[0].0, ids[2]);
        let names: Vec<&str> = core.destinations().map(|(_, d)| d.name.as_str()).collect();
        assert_eq!(names, ["c", "b", "a"], "configuration order");

        let c = core.counters();
        assert_eq!(stats(&c, "a").sent, 2, "a kept its counters");
        let b = stats(&c, "b");
        assert_eq!(b.sent, 1, "b kept its counters");
        assert_eq!(
            b.dropped(DropReason::RateLimited),
            1,
            "b's pending frame was in the old format"
        );
        assert_eq!(stats(&c, "c").sent, 0);
        assert_balanced(&c);

        // b's rate limiter (max_rate unchanged) still holds its slot after the
        // change of format.
        core.handle_at(&fh6(3, true), SENDER, t0 + ms(20), &mut sink);
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
            "the same routes change nothing"
        );
        assert_eq!(core.apply(&after).to_string(), "no changes");
    }

    #[test]
    fn a_new_address_opens_a_socket_and_a_new_rate_resets_the_limiter() {
        let before = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9001, "same", "max_rate = 10")),
        );
        let after = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9005, "same", "max_rate = 20")),
        );
        let core = Fanout::new(&before);
        let plan = core.plan(&after);
        let steps: Vec<Step> = plan.steps().map(|(_, s)| s).collect();
        assert_eq!(
            steps,
            [Step {
                id: id_of(&core, "a"),
                action: Action::Open("127.0.0.1:9005".parse().unwrap())
            }]
        );
        let rate_only = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9001, "same", "max_rate = 20")),
        );
        let steps: Vec<Step> = core.plan(&rate_only).steps().map(|(_, s)| s).collect();
        assert_eq!(
            steps[0].action,
            Action::Keep {
                discard_backlog: false,
                reset_limiter: true
            }
        );
    }

    #[test]
    #[should_panic(expected = "a plan is committed to the core it was made from")]
    fn a_stale_plan_is_refused() {
        let r = routes(&("[listen]\n".to_owned() + &destination_toml("a", 9001, "same", "")));
        let mut core = Fanout::new(&r);
        let stale = core.plan(&r);
        core.apply(&r);
        core.commit(stale);
    }

    /// A sink whose socket would block: every frame goes to its backlog.
    fn queue_everything(_: DestinationId, _: &[u8]) -> Outcome {
        Outcome::Queued
    }

    #[test]
    fn frames_the_shell_holds_are_counted_when_it_sends_or_drops_them() {
        let r = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("stuck", 9001, "same", "")
                + &destination_toml("moved", 9002, "same", "")
                + &destination_toml("gone", 9003, "same", "")
                + &destination_toml("stays", 9004, "same", "")),
        );
        let mut core = Fanout::new(&r);
        let t0 = Instant::now();
        for ts in 1..=5 {
            core.handle_at(&fh6(ts, true), SENDER, t0, &mut queue_everything);
        }
        let stuck = id_of(&core, "stuck");
        assert_eq!(core.queued(stuck), 5);
        assert_eq!(stats(&core.counters(), "stuck").held, 5);
        // The socket became writable: two went, one failed.
        let mut report = core.report(stuck).expect("a destination");
        report.held(Outcome::Sent);
        report.held(Outcome::Sent);
        report.send_error(SendErrorKind::Refused);
        report.held(Outcome::Dropped(DropReason::SendError));
        report.held(Outcome::Queued);
        let s = stats(&core.counters(), "stuck");
        assert_eq!(
            (s.received, s.sent, s.dropped_total(), s.held),
            (5, 2, 1, 2)
        );
        assert_eq!(s.send_errors.get(SendErrorKind::Refused), 1);

        // A reload readdresses one and removes another: what the shell held for
        // them is dropped with their sockets, and counted before `gone`'s final
        // counters come back.
        let after = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("stuck", 9001, "same", "")
                + &destination_toml("moved", 9012, "same", "")
                + &destination_toml("stays", 9004, "same", "")),
        );
        let changes = core.apply(&after);
        let gone = &changes.removed[0];
        assert_eq!(gone.destination.name, "gone");
        assert_eq!(gone.stats.dropped(DropReason::Backlog), 5);
        assert_eq!(gone.stats.held, 0);
        assert!(gone.stats.is_balanced(), "{:?}", gone.stats);
        let c = core.counters();
        let moved = stats(&c, "moved");
        assert_eq!((moved.dropped(DropReason::Backlog), moved.held), (5, 0));
        assert_eq!(stats(&c, "stays").held, 5, "its socket and backlog stay");
        assert_balanced(&c);

        // The relay stops: what is still held is dropped.
        core.finish();
        let c = core.counters();
        for d in &c.destinations {
            assert_eq!(d.stats.held, 0, "{}", d.name);
        }
        assert_eq!(stats(&c, "stuck").dropped(DropReason::Backlog), 2);
        assert_eq!(stats(&c, "stays").dropped(DropReason::Backlog), 5);
        assert_balanced(&c);
    }

    #[test]
    fn a_new_output_format_drops_what_the_shell_held_in_the_old_one() {
        let before = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("dash", 9001, "fh5", "")),
        );
        let after = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("dash", 9001, "fm7", "")),
        );
        let mut core = Fanout::new(&before);
        core.handle_at(&fh6(1, true), SENDER, Instant::now(), &mut queue_everything);
        let changes = core.apply(&after);
        assert_eq!(changes.to_string(), "~ dash: fh5 -> fm7");
        let dash = stats(&core.counters(), "dash");
        assert_eq!((dash.dropped(DropReason::Backlog), dash.held), (1, 0));
    }

    #[test]
    fn auto_input_does_not_remap_horizon_on_a_guess() {
        let r = routes(
            &("[listen]\nformat = \"auto\"\n".to_owned()
                + &destination_toml("fh5", 9001, "fh5", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let mut dry = fh6(1, true);
        Packet::new_checked(&mut dry[..], Format::Fh6)
            .unwrap()
            .set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(0); 4]));
        let verdict = core.handle_at(&dry, SENDER, Instant::now(), &mut sink);
        assert_eq!(
            verdict,
            Verdict::Admitted(Some(Reading {
                format: Format::Fh6,
                certain: false
            }))
        );
        assert_eq!(sink.got[0].1, dry, "a guess passes the bytes as they came");
        assert!(core.counters().input.format_guessed);
    }

    #[test]
    fn issue12_one_spoofed_depth_does_not_change_how_fh6_is_translated() {
        let r = routes(
            &("[listen]\nformat = \"auto\"\n".to_owned()
                + &destination_toml("fh5", 9001, "fh5", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        // Half a second of wet fh6 telemetry: the stream shows its format.
        for ts in 0..AGREEING_PACKETS {
            core.handle_at(&fh6(ts, true), SENDER, t0, &mut sink);
        }
        let fh6_for_sure = Reading {
            format: Format::Fh6,
            certain: true,
        };
        assert_eq!(core.horizon(), Some(fh6_for_sure));
        let mut spoofed = fh6(1_000, true);
        Packet::new_checked(&mut spoofed[..], Format::Fh5)
            .unwrap()
            .set_wheel_in_puddle(Wheels::from_array([
                Puddle::Depth(0.5),
                Puddle::Depth(0.0),
                Puddle::Depth(0.0),
                Puddle::Depth(0.0),
            ]));
        let attacker: SocketAddr = "127.0.0.1:6666".parse().unwrap();
        assert_eq!(
            core.handle_at(&spoofed, attacker, t0, &mut sink),
            Verdict::Admitted(Some(fh6_for_sure)),
            "one datagram is read as the stream's format"
        );
        sink.got.clear();
        core.handle_at(&fh6(1_001, true), SENDER, t0, &mut sink);
        let p = Packet::new_checked(&sink.got[0].1[..], Format::Fh5).unwrap();
        assert_eq!(p.timestamp_ms(), 1_001, "TimestampMS");
        assert_eq!(p.car_class(), 5, "CarClass R still becomes S2");
        assert_eq!(core.horizon(), Some(fh6_for_sure));
    }

    fn at(text: &str) -> SocketAddr {
        text.parse().expect("a socket address")
    }

    /// A computer whose only LAN address is 192.168.1.20.
    fn lan_host(ip: IpAddr) -> bool {
        ip == IpAddr::from([192, 168, 1, 20])
    }

    #[test]
    fn every_interface_loops_to_loopback_of_its_family_on_the_same_port() {
        let l = |listen, dest| is_loop(at(listen), at(dest), lan_host);
        assert!(l("0.0.0.0:5400", "127.0.0.1:5400"));
        assert!(l("0.0.0.0:5400", "127.0.0.2:5400"));
        assert!(l("[::]:5400", "[::1]:5400"));
        // `::` is dual-stack: IPv4 reaches it too.
        assert!(l("[::]:5400", "127.0.0.1:5400"));
        assert!(l("0.0.0.0:5400", "[::ffff:127.0.0.1]:5400"));
        // An IPv4-only socket receives no IPv6.
        assert!(!l("0.0.0.0:5400", "[::1]:5400"));
        // This computer's LAN address, and another computer's.
        assert!(l("0.0.0.0:5400", "192.168.1.20:5400"));
        assert!(l("[::]:5400", "192.168.1.20:5400"));
        assert!(!l("0.0.0.0:5400", "192.168.1.21:5400"));
    }

    #[test]
    fn a_specific_listen_address_loops_only_to_itself() {
        let l = |listen, dest| is_loop(at(listen), at(dest), lan_host);
        assert!(l("127.0.0.1:5400", "127.0.0.1:5400"));
        assert!(l("[::1]:5400", "[::1]:5400"));
        assert!(l("[::ffff:127.0.0.1]:5400", "127.0.0.1:5400"));
        assert!(!l("127.0.0.1:5400", "127.0.0.2:5400"));
        assert!(!l("[::1]:5400", "127.0.0.1:5400"));
        // Bound to loopback only, the listener never sees packets for the LAN.
        assert!(!l("127.0.0.1:5400", "192.168.1.20:5400"));
    }

    #[test]
    fn different_ports_are_never_a_loop() {
        let listens = ["0.0.0.0", "[::]", "127.0.0.1", "[::1]"];
        let dests = ["127.0.0.1", "[::1]", "192.168.1.20"];
        for l in listens {
            for d in dests {
                for (lp, dp) in [(5400, 5401), (5401, 5400), (1, 65535)] {
                    assert!(
                        !is_loop(at(&format!("{l}:{lp}")), at(&format!("{d}:{dp}")), |_| true),
                        "{l}:{lp} -> {d}:{dp}"
                    );
                }
            }
        }
    }
}
