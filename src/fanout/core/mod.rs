//! The core itself: [`Fanout::handle`] takes one datagram ([`Arrival`]) and
//! decides ([`Verdict`]), each destination's state applies its filters and
//! limits and keeps its counters, and [`Counters`] is every counter at one
//! moment. See the documentation of [`crate::fanout`].

use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use ipnet::IpNet;
use log::trace;

mod hold;
mod session;

use self::hold::LastRacing;
use self::session::SessionState;
use super::sink::send;
use super::{Destination, DestinationId, HeldFrame, Output, Report, Routes, Sink};
use crate::counters::{
    DestinationStats, DropReason, Health, InputStats, Latencies, Latency, LatencyWindow, Status,
};
use crate::filter::{AgeLimit, RaceFilter, RateLimiter};
use crate::output::records::Origin;
use crate::output::{Encoder, Encoding, Frame, Selection, Skipped};
use crate::telemetry::session::{Record, Records as Produced};
use crate::translate::translate;
use crate::wire::{Acceptor, Format, Input, Packet, Reading, MAX_LEN};

/// One datagram as the loop hands it to the core: its bytes and sender, lent,
/// and when it reached the machine, on the loop's monotonic clock (which ages
/// and latencies are measured on) and on the wall clock (the time a text
/// output writes). Not a [`crate::tap::Datagram`] (the same datagram with
/// where it was sent, as taps, captures and viewers keep it): an arrival never
/// leaves the loop.
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    /// Its bytes.
    pub data: &'a [u8],
    /// Its sender.
    pub from: SocketAddr,
    /// When it reached the machine: the kernel's receive time where there is
    /// one, else when the shell read it.
    pub received: Instant,
    /// The same moment on the wall clock: the kernel's receive time itself,
    /// or the wall clock read with the batch. No offset between the two
    /// clocks is kept, so a step of the wall clock shows from the next
    /// datagram on.
    pub wall: SystemTime,
}

impl<'a> Arrival<'a> {
    /// `data` from `from`, received at `received` (`wall` on the wall clock).
    pub fn new(data: &'a [u8], from: SocketAddr, received: Instant, wall: SystemTime) -> Self {
        Arrival {
            data,
            from,
            received,
            wall,
        }
    }
}

/// What a text output's pending frame is: the datagram it holds is encoded
/// only if its rate slot comes.
#[derive(Debug, Clone, Copy)]
struct Source {
    /// The format it was read as.
    format: Format,
    /// When it was received, on the wall clock.
    wall: SystemTime,
    /// Its packet number, so that a slot encodes one frame once.
    packet: u64,
}

/// The newest frame waiting for its `max_rate` slot (while its
/// destination's `has_pending` says so), in one place: its bytes (for a
/// text output, the datagram to encode), when it came, and for a text
/// output how to read it.
struct Pending {
    frame: HeldFrame,
    /// When it came: it goes one and a half intervals later
    /// ([`RateLimiter::release_at`]; at once if a reload changed the limit
    /// while it waited).
    at: Option<Instant>,
    /// A text output's: what the datagram is. `None`: bytes to send as
    /// they are.
    source: Option<Source>,
}

/// What a destination is offered of the current packet: bytes to send as
/// they are, or for a text output the datagram, encoded (once, in its
/// shared `slot`) only when it is due to be sent.
enum Offered<'a> {
    Bytes(&'a [u8]),
    Text {
        slot: &'a mut TextSlot,
        data: &'a [u8],
        source: Source,
    },
}

/// The text of the current frame for one (encoding, selection), made at most
/// once per frame for every destination that shares them, the first time one
/// of them is due to send it: the encoder and the buffer are made at commit,
/// and kept across a commit while some destination still writes them.
pub(super) struct TextSlot {
    encoding: Encoding,
    selection: Selection,
    encoder: Encoder,
    buf: Vec<u8>,
    /// The packet number the text is of; 0: none.
    built_for: u64,
    /// Whether it could be encoded, and if not, why.
    encoded: Result<(), Skipped>,
}

impl TextSlot {
    fn new(encoding: Encoding, selection: Selection) -> TextSlot {
        // An all-column frame is ~2.5 kB; a value is at most ~30 bytes and
        // each key is written with it.
        let room = 256 + selection.columns().len() * 64;
        TextSlot {
            encoder: Encoder::new(encoding, &selection),
            encoding,
            selection,
            buf: Vec::with_capacity(room),
            built_for: 0,
            encoded: Err(Skipped::NotAPacket),
        }
    }

    /// The text of packet number `packet`, `payload` read as `source`
    /// says, made now unless it was already; the reason to drop the frame
    /// when it can't be made (an influx line with no value, or of a menu
    /// frame).
    #[inline]
    fn text(&mut self, payload: &[u8], source: Source) -> Result<&[u8], DropReason> {
        if self.built_for != source.packet {
            self.built_for = source.packet;
            let frame = Frame {
                payload,
                format: source.format,
                time: source.wall,
            };
            self.encoded = self.encoder.encode(&frame, &mut self.buf);
        }
        match self.encoded {
            Ok(()) => Ok(self.buf.as_slice()),
            // A menu frame is a frame with IsRaceOn 0, whose line would
            // chart a car that isn't there: not racing, not a failure.
            Err(Skipped::MenuFrame) => Err(DropReason::NotRacing),
            Err(Skipped::NotAPacket | Skipped::NoValue) => Err(DropReason::Untranslatable),
        }
    }
}

/// One destination's live state: its filters, its pending frame, its counters.
///
/// Laid out for the way of a frame that is sent at once (issue 26): what it
/// reads and writes — the limits, the frames held, the latency's histogram,
/// the health, the counters `received` and `sent`, the pending flag and the
/// race filter, the configured output — is in the first four cache lines
/// (`repr(C)` keeps this order, `align(64)` starts each state on a line); the
/// pending frame, a text output's slot and the configuration's names after.
#[repr(C, align(64))]
pub(super) struct DestinationState {
    pub(super) rate: RateLimiter,
    pub(super) age: AgeLimit,
    /// Frames the shell holds for it (see [`Report`]).
    queued: u64,
    /// Its latency histograms, reported by the shell (see [`Report`]).
    latency: Box<Latencies>,
    /// When it last sent, was refused and failed: its status.
    pub(super) health: Health,
    /// Every counter but `held`, which [`DestinationState::stats`] adds.
    stats: DestinationStats,
    /// A frame waits in `pending`: the flag a frame sent at once reads,
    /// here among what it touches, not behind `pending`'s pointer.
    has_pending: bool,
    pub(super) race: RaceFilter,
    /// Its configuration: `output` and `only_race_on` first.
    pub(super) config: Destination,
    /// The frame waiting for its `max_rate` slot, if `has_pending`.
    pending: Box<Pending>,
    /// A text output's slot in [`Fanout`]'s texts.
    pub(super) text: Option<usize>,
    /// Blank frames it got the last racing frame in place of (`hold`):
    /// each is counted as the frame it replaced too. Read only with a blank
    /// frame, so kept behind the rest.
    held_through_blank: u64,
}

impl DestinationState {
    pub(super) fn new(config: Destination) -> Self {
        DestinationState {
            race: RaceFilter::default(),
            rate: RateLimiter::new(config.max_rate),
            age: AgeLimit::new(config.max_age),
            pending: Box::new(Pending {
                frame: HeldFrame::EMPTY,
                at: None,
                source: None,
            }),
            has_pending: false,
            text: None,
            held_through_blank: 0,
            queued: 0,
            stats: DestinationStats::default(),
            latency: Box::default(),
            health: Health::default(),
            config,
        }
    }

    /// Applies `max_age` and `max_rate`, then hands the frame offered to
    /// the sink; one that must wait for its rate slot waits as offered (a
    /// text output's as the datagram, encoded only if its slot comes).
    #[inline(always)]
    fn deliver(
        &mut self,
        id: DestinationId,
        offered: Offered<'_>,
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
        if self.rate.admits(now) {
            let bytes = match offered {
                Offered::Bytes(bytes) => bytes,
                Offered::Text { slot, data, source } => match slot.text(data, source) {
                    Ok(text) => text,
                    Err(reason) => {
                        self.stats.drop(reason);
                        return;
                    }
                },
            };
            self.rate.sent(now);
            self.send(id, bytes, received, sink);
            return;
        }
        let (data, source) = match offered {
            Offered::Bytes(bytes) => (bytes, None),
            Offered::Text { data, source, .. } => (data, Some(source)),
        };
        let pending = &mut *self.pending;
        if pending.frame.store(data, received) {
            self.has_pending = true;
            pending.at = Some(now);
            pending.source = source;
        } else {
            self.stats.drop(DropReason::RateLimited);
        }
    }

    /// Hands over the pending frame if its slot has come, unless it has grown
    /// too old; a text output's is encoded (in its slot in `texts`) now.
    fn due(
        &mut self,
        id: DestinationId,
        now: Instant,
        texts: &mut [TextSlot],
        sink: &mut impl Sink,
    ) {
        if self.deadline().is_none_or(|at| now < at) {
            return;
        }
        self.has_pending = false;
        let received = self.pending.frame.received().unwrap_or(now);
        if self.age.is_stale(received, now) {
            // Its slot stays free for a fresh frame.
            self.stats.drop(DropReason::Stale);
            return;
        }
        let DestinationState {
            pending,
            text,
            stats,
            queued,
            age,
            latency,
            health,
            rate,
            ..
        } = self;
        let bytes = match (pending.source, text.and_then(|i| texts.get_mut(i))) {
            (Some(source), Some(slot)) => match slot.text(pending.frame.bytes(), source) {
                Ok(text) => text,
                Err(reason) => {
                    // Its slot stays free for a frame that can be sent.
                    stats.drop(reason);
                    return;
                }
            },
            _ => pending.frame.bytes(),
        };
        rate.sent(now);
        send(
            id,
            bytes,
            received,
            Report::new(stats, queued, *age, latency, health),
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
            &mut self.health,
        );
        send(id, bytes, received, report, sink);
    }

    /// Drops the pending frame, counting it: it will never go.
    pub(super) fn forget_pending(&mut self) {
        if std::mem::take(&mut self.has_pending) {
            self.stats.drop(DropReason::RateLimited);
        }
    }

    /// Counts the frames the shell held for it as dropped: the shell drops them
    /// (the plan said so, or the relay stops).
    pub(super) fn drop_queued(&mut self) {
        self.stats.dropped[DropReason::Backlog as usize] += std::mem::take(&mut self.queued);
    }

    /// Whether a frame of this destination may ever wait for a slot: only a
    /// limiter stores one (a destination that passes everything is always
    /// due), and one may still wait from before a reload lifted the limit.
    pub(super) fn may_wait(&self) -> bool {
        self.config.max_rate > 0 || self.has_pending
    }

    /// When the pending frame goes if no newer one goes first.
    fn deadline(&self) -> Option<Instant> {
        if self.has_pending {
            self.pending.at.map(|at| self.rate.release_at(at))
        } else {
            None
        }
    }

    /// Its counters, `held` included.
    pub(super) fn stats(&self) -> DestinationStats {
        DestinationStats {
            held: self.queued + u64::from(self.has_pending),
            ..self.stats
        }
    }

    /// What it counted: its counters, its status at `now`, its latency over
    /// `window`.
    fn counted(&self, window: LatencyWindow, now: Instant) -> Counted {
        Counted {
            stats: self.stats(),
            status: self.health.status(now),
            latency: self.latency.figures(window),
            held_through_blank: self.held_through_blank,
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

/// What the core decided about one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// From a sender outside `listen.allow`: counted, and sent nowhere.
    Disallowed,
    /// Relayed: read as `Some(reading)`, or `None` when it is no packet of the
    /// input (counted malformed, and sent only to `same` destinations).
    Admitted(Option<Reading>),
    /// The shell's own wake-up datagram (a command waits): not the core's,
    /// so never handed to it; sent nowhere, counted nowhere, tapped nowhere.
    WakeUp,
    /// The status query of a tool on this computer ([`crate::report::query`]): sent
    /// nowhere, counted nowhere; the shell answers it.
    Query,
}

impl Verdict {
    /// True when the datagram was relayed (what a tap records or shows).
    pub fn is_admitted(self) -> bool {
        matches!(self, Verdict::Admitted(_))
    }
}

/// What one destination counted at one moment: the core's share of what a
/// summary, the page or a test reads of it ([`crate::report`] joins it with
/// the destination's settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Its counters, `held` included.
    pub stats: DestinationStats,
    /// How it is doing now.
    pub status: Status,
    /// Its latency over the window asked for.
    pub latency: Latency,
    /// Blank frames it got the last racing frame in place of, by its
    /// `hold` (issue 34); each is in `stats` as the frame it replaced.
    pub held_through_blank: u64,
}

/// The pure fan-out core. See the module documentation.
pub struct Fanout {
    pub(super) acceptor: Acceptor,
    pub(super) allow: Vec<IpNet>,
    outputs: [OutputSlot; Format::ALL.len()],
    /// One per (encoding, selection) the text outputs write, made at commit.
    pub(super) texts: Vec<TextSlot>,
    /// Indexed by [`DestinationId`]; `None` for a free id. Boxed: a frame's
    /// way tells a live id from the pointer, in one line for all, not from a
    /// field far into the state that `Option` would keep its tag in (issue
    /// 26).
    pub(super) dests: Vec<Option<Box<DestinationState>>>,
    /// Live ids in configuration order: the order of sends and of reports.
    pub(super) order: Vec<DestinationId>,
    stats: InputStats,
    /// Packets handled so far: the number of the current one.
    packet: u64,
    /// Plans committed so far: a plan is committed to the core it was made
    /// from, with no commit between.
    pub(super) generation: u64,
    /// The length and sender of the last datagram that was not the input format.
    last_malformed: Option<(usize, SocketAddr)>,
    /// The last sender outside `listen.allow`.
    last_disallowed: Option<SocketAddr>,
    /// Status queries received ([`Verdict::Query`]).
    queries: u64,
    /// Some destination has a `max_rate`, or a frame waiting for its slot:
    /// worked out at each commit, so that with neither (the plain case)
    /// [`Fanout::next_deadline`] walks no destination per wake-up (issue 26).
    pub(super) may_wait: bool,
    /// Some destination has a `hold`: worked out at each commit; only then
    /// is the last racing frame kept.
    holds: bool,
    /// The last racing frame, for the destinations with `hold`.
    last_racing: Box<LastRacing>,
    /// The session, while some destination wants laps or events.
    session: Option<Box<SessionState>>,
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
            texts: Vec::new(),
            dests: Vec::new(),
            order: Vec::new(),
            stats: InputStats::default(),
            packet: 0,
            generation: 0,
            last_malformed: None,
            last_disallowed: None,
            queries: 0,
            may_wait: false,
            holds: false,
            last_racing: LastRacing::new(),
            session: None,
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
            wall,
        } = arrival;
        let len = data.len();
        self.stats.received += 1;
        self.stats.bytes += len as u64;
        // An IPv4 sender seen through a dual-stack socket reads as itself.
        let from = SocketAddr::new(from.ip().to_canonical(), from.port());
        let ip = from.ip();
        if !self.allow.is_empty() && !self.allow.iter().any(|net| net.contains(&ip)) {
            return self.disallowed(data, from);
        }
        // With `auto`, only the stream followed (the game's) teaches how
        // Horizon packets that tell nothing are read.
        let follows = self.stats.senders.follows(from);
        if follows {
            self.stats.senders.count_followed(now);
        }
        let reading = self.acceptor.read_from(data, follows);
        match reading {
            Some(r) => {
                self.stats.last_format = Some(r.format);
                self.stats.format_guessed = !r.certain;
            }
            None => {
                if self.not_a_packet(data, from, follows) {
                    return Verdict::Query;
                }
            }
        }
        if !follows && self.stats.senders.note_other(from, now) {
            // Its stream is followed from this datagram on, which counts too.
            self.acceptor.learn(data);
        }
        let race_on = reading.map(|r| Packet::new_unchecked(data, r.format).race_on());
        self.packet += 1;
        let packet = self.packet;
        trace!("packet {packet} from {from}: {len} bytes, {reading:?}");
        let blank = if self.holds {
            self.last_racing.observe(data, reading, received)
        } else {
            None
        };
        let Fanout {
            outputs,
            texts,
            dests,
            order,
            last_racing,
            ..
        } = self;
        for &id in order.iter() {
            let Some(dest) = dests[id.0].as_mut() else {
                continue;
            };
            dest.stats.received += 1;
            // A blank frame, to a destination that holds: the last racing
            // frame instead, while it is recent enough.
            // `hold` is read only with a blank frame: it lies beyond the
            // lines a frame's way touches (issue 26).
            let held = match &blank {
                Some(blank) => dest
                    .config
                    .hold
                    .and_then(|hold| last_racing.held(blank, hold, packet)),
                None => None,
            };
            let (data, race_on, packet) = match held {
                Some((held, key)) => {
                    dest.held_through_blank += 1;
                    (held, Some(true), key)
                }
                None => (data, race_on, packet),
            };
            if dest.config.only_race_on && !dest.race.admit(race_on) {
                dest.stats.drop(DropReason::NotRacing);
                continue;
            }
            let bytes: &[u8] = match dest.config.output {
                Output::Same => data,
                Output::Text(_) => {
                    if !dest.config.records.frames {
                        // Sent laps or events only: the frame is not its.
                        dest.stats.received -= 1;
                        continue;
                    }
                    let (Some(r), Some(slot)) = (reading, dest.text.and_then(|i| texts.get_mut(i)))
                    else {
                        // Not a packet of the input: there is nothing to write.
                        dest.stats.drop(DropReason::Untranslatable);
                        continue;
                    };
                    let source = Source {
                        format: r.format,
                        wall,
                        packet,
                    };
                    dest.deliver(
                        id,
                        Offered::Text { slot, data, source },
                        received,
                        now,
                        sink,
                    );
                    continue;
                }
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
            dest.deliver(id, Offered::Bytes(bytes), received, now, sink);
        }
        if let (Some(state), Some(r)) = (self.session.as_mut(), reading) {
            let records = state.observe(data, r.format, received, wall);
            if !records.is_empty() {
                let origin = Origin {
                    format: r.format,
                    time: wall,
                };
                deliver_records(
                    &records,
                    origin,
                    received,
                    state,
                    &mut self.dests,
                    &self.order,
                    sink,
                );
            }
        }
        Verdict::Admitted(reading)
    }

    /// A datagram from outside `listen.allow`: counted and dropped, unless it
    /// is the status query of a tool on this computer.
    #[cold]
    #[inline(never)]
    fn disallowed(&mut self, data: &[u8], from: SocketAddr) -> Verdict {
        if self.is_query(data, from) {
            return Verdict::Query;
        }
        self.stats.disallowed += 1;
        self.last_disallowed = Some(from);
        Verdict::Disallowed
    }

    /// A datagram that is no packet of the input: counted malformed, unless
    /// it is the status query (true).
    #[cold]
    #[inline(never)]
    fn not_a_packet(&mut self, data: &[u8], from: SocketAddr, follows: bool) -> bool {
        if self.is_query(data, from) {
            if follows {
                self.stats.senders.uncount_followed();
            }
            return true;
        }
        self.stats.malformed += 1;
        self.last_malformed = Some((data.len(), from));
        false
    }

    /// The status query ([`crate::net::query::is_query`]) takes back what
    /// [`Fanout::handle`] counted of it: it is no datagram of the input.
    fn is_query(&mut self, data: &[u8], from: SocketAddr) -> bool {
        if !crate::net::query::is_query(data, from) {
            return false;
        }
        self.stats.received -= 1;
        self.stats.bytes -= data.len() as u64;
        self.queries += 1;
        true
    }

    /// Status queries received so far: the shell answers the new ones.
    pub fn queries(&self) -> u64 {
        self.queries
    }

    /// Hands over every pending frame whose rate slot has come by `now`; a
    /// pending frame grown older than its `max_age` is dropped instead.
    pub fn due(&mut self, now: Instant, sink: &mut impl Sink) {
        if let Some(state) = self.session.as_mut() {
            if let Some((records, origin, received)) = state.end_if_due(now) {
                deliver_records(
                    &records,
                    origin,
                    received,
                    state,
                    &mut self.dests,
                    &self.order,
                    sink,
                );
            }
        }
        let Fanout {
            dests,
            order,
            texts,
            ..
        } = self;
        for &id in order.iter() {
            if let Some(dest) = dests[id.0].as_mut() {
                dest.due(id, now, texts, sink);
            }
        }
    }

    /// When [`Fanout::due`] next has something to do, if anything waits.
    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        let session = self.session.as_ref().and_then(|s| s.deadline());
        if !self.may_wait {
            return session;
        }
        self.states()
            .filter_map(|(_, d)| d.deadline())
            .chain(session)
            .min()
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
            &mut d.health,
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

    /// Every destination in configuration order, with what it counted:
    /// latency over `window`, statuses at `now`.
    pub fn counted(
        &self,
        window: LatencyWindow,
        now: Instant,
    ) -> impl Iterator<Item = (&Destination, Counted)> + '_ {
        self.states()
            .map(move |(_, d)| (&d.config, d.counted(window, now)))
    }

    /// A periodic summary was taken: every destination's latency interval
    /// starts again (only the summary's reader does this).
    pub fn new_interval(&mut self) {
        for d in self.dests.iter_mut().flatten() {
            d.latency.new_interval();
        }
    }

    /// Makes the text slots the destinations' outputs need, one per
    /// (encoding, selection), keeping each slot (its encoder, its buffer)
    /// that some destination still writes, and points every text output at
    /// its slot. At commit only.
    /// Makes the session when some destination first wants laps or events,
    /// and drops it when none does, at commit: a destination added later
    /// joins the session on.
    pub(super) fn note_session(&mut self) {
        let wanted = self
            .states()
            .any(|(_, d)| d.config.output.is_text() && d.config.records.wants_session());
        match (wanted, self.session.is_some()) {
            (true, false) => self.session = Some(SessionState::new()),
            (false, true) => self.session = None,
            _ => {}
        }
    }

    /// Works out whether some destination has a `hold`, at commit: the
    /// last racing frame is kept only then.
    pub(super) fn note_holds(&mut self) {
        let holds = self.states().any(|(_, d)| d.config.hold.is_some());
        self.holds = holds;
        if !self.holds {
            self.last_racing.clear();
        }
    }

    pub(super) fn rebuild_texts(&mut self) {
        let mut old: Vec<Option<TextSlot>> = std::mem::take(&mut self.texts)
            .into_iter()
            .map(Some)
            .collect();
        let Fanout {
            texts,
            dests,
            order,
            ..
        } = self;
        for id in order.iter() {
            let Some(dest) = dests[id.0].as_mut() else {
                continue;
            };
            let Output::Text(encoding) = dest.config.output else {
                dest.text = None;
                continue;
            };
            let selection = dest.config.selection();
            let same = |s: &TextSlot| s.encoding == encoding && s.selection == selection;
            dest.text = Some(match texts.iter().position(same) {
                Some(i) => i,
                None => {
                    let kept = old
                        .iter_mut()
                        .find(|s| s.as_ref().is_some_and(same))
                        .and_then(Option::take);
                    texts.push(kept.unwrap_or_else(|| TextSlot::new(encoding, selection)));
                    texts.len() - 1
                }
            });
        }
    }

    pub(super) fn states(&self) -> impl Iterator<Item = (DestinationId, &DestinationState)> {
        self.order
            .iter()
            .filter_map(|&id| self.dests[id.0].as_ref().map(|d| (id, &**d)))
    }
}

/// Hands each of `records` to every text destination that wants its kind,
/// as its encoding's text (made once per record), right away: a record is
/// counted as a frame of the destination, and no filter or limit applies.
fn deliver_records(
    records: &Produced,
    origin: Origin,
    received: Instant,
    state: &mut SessionState,
    dests: &mut [Option<Box<DestinationState>>],
    order: &[DestinationId],
    sink: &mut impl Sink,
) {
    for record in records {
        state.start();
        for &id in order {
            let Some(dest) = dests[id.0].as_mut() else {
                continue;
            };
            let wanted = match record {
                Record::Lap(_) => dest.config.records.laps,
                Record::Event(_) => dest.config.records.events,
            };
            let Output::Text(encoding) = dest.config.output else {
                continue;
            };
            if !wanted {
                continue;
            }
            dest.stats.received += 1;
            let text = state.text(record, origin, encoding);
            dest.send(id, text, received, sink);
        }
    }
}

#[cfg(test)]
mod tests;
