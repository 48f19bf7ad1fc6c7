//! The core itself: [`Fanout::handle`] takes one datagram ([`Arrival`]) and
//! decides ([`Verdict`]), each destination's state applies its filters and
//! limits and keeps its counters, and [`Counters`] is every counter at one
//! moment. See the documentation of [`crate::fanout`].

use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use ipnet::IpNet;
use log::trace;

use super::sink::send;
use super::{Destination, DestinationId, HeldFrame, Output, Report, Routes, Sink};
use crate::filter::{AgeLimit, RaceFilter, RateLimiter};
use crate::output::{Encoder, Encoding, Frame, Selection};
use crate::stats::{
    DestinationSnapshot, DestinationStats, DropReason, Health, InputStats, Latencies,
    LatencyWindow, MqttRow,
};
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

impl Source {
    const NONE: Source = Source {
        format: Format::Fh6,
        wall: SystemTime::UNIX_EPOCH,
        packet: 0,
    };
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
    /// Whether it could be encoded.
    ok: bool,
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
            ok: false,
        }
    }

    /// The text of packet number `packet`, `payload` read as `source`
    /// says, made now unless it was already; `None` when it can't be made
    /// (an influx line with no value).
    #[inline]
    fn text(&mut self, payload: &[u8], source: Source) -> Option<&[u8]> {
        if self.built_for != source.packet {
            self.built_for = source.packet;
            let frame = Frame {
                payload,
                format: source.format,
                time: source.wall,
            };
            self.ok = self.encoder.encode(&frame, &mut self.buf).is_ok();
        }
        self.ok.then_some(self.buf.as_slice())
    }
}

/// One destination's live state: its filters, its pending frame, its counters.
pub(super) struct DestinationState {
    pub(super) config: Destination,
    pub(super) race: RaceFilter,
    pub(super) rate: RateLimiter,
    pub(super) age: AgeLimit,
    /// The newest frame waiting for its `max_rate` slot, if `has_pending`:
    /// the bytes to send, or for a text output the datagram to encode.
    pending: Box<HeldFrame>,
    has_pending: bool,
    /// What a text output's pending datagram is.
    pending_source: Source,
    /// A text output's slot in [`Fanout`]'s texts.
    pub(super) text: Option<usize>,
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
    /// When it last sent, was refused and failed: its status.
    pub(super) health: Health,
}

impl DestinationState {
    pub(super) fn new(config: Destination) -> Self {
        DestinationState {
            race: RaceFilter::default(),
            rate: RateLimiter::new(config.max_rate),
            age: AgeLimit::new(config.max_age),
            pending: Box::new(HeldFrame::EMPTY),
            has_pending: false,
            pending_source: Source::NONE,
            text: None,
            pending_at: None,
            queued: 0,
            stats: DestinationStats::default(),
            latency: Box::default(),
            health: Health::default(),
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

    /// As [`DestinationState::deliver`] for a text output: the datagram
    /// `data`, read as `source` says, is encoded in `slot` (once for every
    /// destination sharing it) only when it is due to be sent now; a frame
    /// that must wait for its rate slot waits as the datagram.
    #[allow(clippy::too_many_arguments)]
    fn deliver_text(
        &mut self,
        id: DestinationId,
        slot: &mut TextSlot,
        data: &[u8],
        source: Source,
        received: Instant,
        now: Instant,
        sink: &mut impl Sink,
    ) {
        if self.age.is_stale(received, now) {
            self.stats.drop(DropReason::Stale);
            return;
        }
        self.forget_pending();
        if self.rate.is_due(now) {
            match slot.text(data, source) {
                Some(text) => {
                    self.rate.sent(now);
                    self.send(id, text, received, sink);
                }
                None => self.stats.drop(DropReason::Untranslatable),
            }
        } else if self.pending.store(data, received) {
            self.has_pending = true;
            self.pending_at = Some(now);
            self.pending_source = source;
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
        let DestinationState {
            pending,
            pending_source,
            text,
            stats,
            queued,
            age,
            latency,
            health,
            rate,
            ..
        } = self;
        let bytes = match text.and_then(|i| texts.get_mut(i)) {
            Some(slot) => match slot.text(pending.bytes(), *pending_source) {
                Some(text) => text,
                None => {
                    // Its slot stays free for a frame that can be sent.
                    stats.drop(DropReason::Untranslatable);
                    return;
                }
            },
            None => pending.bytes(),
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

    fn deadline(&self) -> Option<Instant> {
        if self.has_pending {
            self.rate.next_due().or(self.pending_at)
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

    fn snapshot(&self, window: LatencyWindow, now: Instant) -> DestinationSnapshot {
        let c = &self.config;
        DestinationSnapshot {
            name: c.name.clone(),
            addr: c.target.udp(),
            addr_text: c.addr_text.clone(),
            output: c.output,
            fields: c
                .fields
                .as_ref()
                .map(|f| f.names.clone())
                .unwrap_or_default(),
            mqtt: c.target.mqtt().map(MqttRow::of),
            only_race_on: c.only_race_on,
            max_rate: c.max_rate,
            max_age: c.max_age,
            status: self.health.status(now),
            stats: self.stats(),
            latency: self.latency.figures(window),
        }
    }

    /// As [`DestinationState::snapshot`], into `into`: its texts' capacity is
    /// reused, so nothing is allocated once they are long enough.
    fn snapshot_into(&self, window: LatencyWindow, now: Instant, into: &mut DestinationSnapshot) {
        let c = &self.config;
        into.name.clone_from(&c.name);
        into.addr = c.target.udp();
        into.addr_text.clone_from(&c.addr_text);
        into.output = c.output;
        match &c.fields {
            Some(f) => into.fields.clone_from(&f.names),
            None => into.fields.clear(),
        }
        match (c.target.mqtt(), &mut into.mqtt) {
            (Some(settings), Some(row)) => row.fill(settings),
            (settings, row) => *row = settings.map(MqttRow::of),
        }
        into.only_race_on = c.only_race_on;
        into.max_rate = c.max_rate;
        into.max_age = c.max_age;
        into.status = self.health.status(now);
        into.stats = self.stats();
        into.latency = self.latency.figures(window);
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
    /// The status query of a tool on this computer ([`crate::query`]): sent
    /// nowhere, counted nowhere; the shell answers it.
    Query,
}

impl Verdict {
    /// True when the datagram was relayed (what a tap records or shows).
    pub fn is_admitted(self) -> bool {
        matches!(self, Verdict::Admitted(_))
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
    pub(super) acceptor: Acceptor,
    pub(super) allow: Vec<IpNet>,
    outputs: [OutputSlot; Format::ALL.len()],
    /// One per (encoding, selection) the text outputs write, made at commit.
    pub(super) texts: Vec<TextSlot>,
    /// Indexed by [`DestinationId`]; `None` for a free id.
    pub(super) dests: Vec<Option<DestinationState>>,
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
        let Fanout {
            outputs,
            texts,
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
                Output::Text(_) => {
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
                    dest.deliver_text(id, slot, data, source, received, now, sink);
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
            dest.deliver(id, bytes, received, now, sink);
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

    /// The status query ([`crate::query::is_query`]) takes back what
    /// [`Fanout::handle`] counted of it: it is no datagram of the input.
    fn is_query(&mut self, data: &[u8], from: SocketAddr) -> bool {
        if !crate::query::is_query(data, from) {
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
        if !self.may_wait {
            return None;
        }
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

    /// Every counter now, latency over the summary interval so far (statuses
    /// at the clock's now).
    pub fn counters(&self) -> Counters {
        self.counters_over(LatencyWindow::Interval, Instant::now())
    }

    /// Every counter, latency over `window`, statuses at `now`.
    pub fn counters_over(&self, window: LatencyWindow, now: Instant) -> Counters {
        Counters {
            input: self.stats,
            destinations: self
                .states()
                .map(|(_, d)| d.snapshot(window, now))
                .collect(),
        }
    }

    /// As [`Fanout::counters_over`], into `destinations` (returning the input's
    /// counters): the list and each name keep their capacity, so a reused list
    /// costs no allocation unless destinations were added or renamed longer.
    pub fn counters_into(
        &self,
        window: LatencyWindow,
        now: Instant,
        destinations: &mut Vec<DestinationSnapshot>,
    ) -> InputStats {
        let mut n = 0;
        for (_, d) in self.states() {
            match destinations.get_mut(n) {
                Some(into) => d.snapshot_into(window, now, into),
                None => destinations.push(d.snapshot(window, now)),
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

    /// Makes the text slots the destinations' outputs need, one per
    /// (encoding, selection), keeping each slot (its encoder, its buffer)
    /// that some destination still writes, and points every text output at
    /// its slot. At commit only.
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
        self.handle(Arrival::new(data, from, at, test_wall()), at, sink)
    }
}

/// The wall-clock time of every datagram [`Fanout::handle_at`] hands in:
/// 2023-11-14T22:13:20Z.
#[cfg(test)]
pub(crate) fn test_wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fanout::testing::*;
    use crate::fanout::Fate;
    use crate::stats::SendErrorKind;
    use crate::wire::{Puddle, Wheels, AGREEING_PACKETS};

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
            let arrival = Arrival::new(&packet, SENDER, t0 + ms(received), test_wall());
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
        ) -> Fate {
            report.record_latency(received, received + self.took);
            Fate::Sent
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
            core.handle(
                Arrival::new(&packet, SENDER, t0, test_wall()),
                t0,
                &mut sink,
            );
        }
        let l = core.counters().destinations[0].latency;
        assert_eq!(
            (l.count, l.p50, l.max),
            (3, Duration::from_micros(30), Duration::from_micros(40))
        );
        core.new_interval();
        assert_eq!(core.counters().destinations[0].latency.count, 0);
        let run = core
            .counters_over(LatencyWindow::Run, Instant::now())
            .destinations[0]
            .latency;
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
        report.held(Fate::Sent);
        report.held(Fate::Sent);
        report.send_error(SendErrorKind::Refused, Instant::now());
        report.held(Fate::Dropped(DropReason::SendError));
        report.held(Fate::Queued);
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

    fn json(bytes: &[u8]) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::from_slice(bytes) {
            Ok(serde_json::Value::Object(o)) => o,
            other => panic!("not a JSON object: {other:?}"),
        }
    }

    /// Issue 25: a frame's text is made once for every destination that
    /// shares its encoding and fields, and each gets it field by field.
    #[test]
    fn text_outputs_share_one_encoding_per_encoding_and_fields() {
        let r = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("json-a", 9001, "json", "")
                + &destination_toml("json-b", 9002, "json", "")
                + &destination_toml("narrow", 9003, "json", "fields = [\"speed\", \"Gear\"]")
                + &destination_toml("narrow-too", 9004, "JSON", "fields = [\"Speed\", \"gear\"]")
                + &destination_toml("influx", 9005, "influx", "")
                + &destination_toml("fh5", 9006, "fh5", "")),
        );
        let mut core = Fanout::new(&r);
        assert_eq!(core.texts.len(), 3, "json, json of two fields, influx");
        let mut sink = Recorder::default();
        core.handle_at(&fh6(7, true), SENDER, Instant::now(), &mut sink);
        let (a, b) = (sink.to(&core, "json-a"), sink.to(&core, "json-b"));
        assert_eq!(a, b);
        assert_eq!(sink.at[0], sink.at[1], "json-a and json-b share one text");
        assert_eq!(sink.at[2], sink.at[3], "so do the two narrow ones");
        assert_ne!(sink.at[0], sink.at[2]);
        let o = json(&a[0]);
        assert_eq!(o["TimestampMS"], 7);
        assert_eq!(o["IsRaceOn"], 1);
        assert_eq!(o["Speed"], 41.5);
        assert_eq!(o["speed_kmh"].as_f64().unwrap() as f32, 41.5 * 3.6);
        assert_eq!(o["format"], "fh6");
        assert_eq!(
            o["recv_time"], "2023-11-14T22:13:20.000000Z",
            "the arrival's wall time"
        );
        assert_eq!(o["recv_s"], 0.0);
        let narrow = String::from_utf8(sink.to(&core, "narrow")[0].clone()).unwrap();
        assert_eq!(narrow, r#"{"Speed":41.5,"Gear":0}"#);
        let line = String::from_utf8(sink.to(&core, "influx")[0].clone()).unwrap();
        let p = crate::output::influx::parse::line(&line);
        assert_eq!(p.measurement, "forza");
        assert_eq!(p.tags["game"], "fh6");
        assert_eq!(p.tags["class"], "R");
        assert_eq!(p.timestamp, Some(1_700_000_000_000_000_000));
        assert_eq!(
            p.fields["TimestampMS"],
            crate::output::influx::parse::Value::Integer(7)
        );
        let fh5 = sink.to(&core, "fh5");
        assert_eq!(
            fh5[0].len(),
            Format::Fh5.len(),
            "the binary outputs as before"
        );
        assert_balanced(&core.counters());
    }

    /// A text output that waits for its rate slot keeps the datagram and
    /// encodes only the frame it sends, when it sends it.
    #[test]
    fn a_rate_limited_text_output_encodes_only_what_it_sends() {
        let r = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml(
                    "slow",
                    9001,
                    "json",
                    "max_rate = 10\nfields = [\"TimestampMS\"]",
                )),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        for (ts, at) in [(1, 0), (2, 10), (3, 20)] {
            core.handle_at(&fh6(ts, true), SENDER, t0 + ms(at), &mut sink);
        }
        assert_eq!(sink.got.len(), 1, "only the first went at once");
        assert_eq!(
            core.texts[0].built_for, 1,
            "frames 2 and 3 were not encoded"
        );
        core.due(t0 + ms(100), &mut sink);
        let got: Vec<String> = sink
            .to(&core, "slow")
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect();
        assert_eq!(got, [r#"{"TimestampMS":1}"#, r#"{"TimestampMS":3}"#]);
        assert_eq!(core.texts[0].built_for, 3);
        let s = stats(&core.counters(), "slow");
        assert_eq!(
            (s.sent, s.dropped(DropReason::RateLimited), s.held),
            (2, 1, 0)
        );
    }

    /// A datagram that is no packet of the input, and an influx line with no
    /// value to write (a sled packet has no Speed), are untranslatable.
    #[test]
    fn frames_a_text_output_cannot_write_are_untranslatable() {
        let r = routes(
            &("[listen]\nformat = \"auto\"\n".to_owned()
                + &destination_toml("json", 9001, "json", "")
                + &destination_toml("speed", 9002, "influx", "fields = [\"Speed\"]")
                + &destination_toml(
                    "slow-speed",
                    9003,
                    "influx",
                    "fields = [\"Speed\"]\nmax_rate = 1",
                )),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        core.handle_at(b"not a packet", SENDER, t0, &mut sink);
        core.handle_at(&[0u8; 232], SENDER, t0, &mut sink);
        // Waits for its slot, then can't be written.
        core.handle_at(
            &[0u8; 232],
            SENDER,
            t0 + Duration::from_millis(1),
            &mut sink,
        );
        core.due(t0 + Duration::from_secs(1), &mut sink);
        let c = core.counters();
        let json = stats(&c, "json");
        assert_eq!(
            (json.sent, json.dropped(DropReason::Untranslatable)),
            (2, 1)
        );
        let speed = stats(&c, "speed");
        assert_eq!(
            (speed.sent, speed.dropped(DropReason::Untranslatable)),
            (0, 3)
        );
        let slow = stats(&c, "slow-speed");
        assert_eq!(
            (slow.sent, slow.dropped(DropReason::Untranslatable)),
            (0, 3)
        );
        assert_eq!(core.next_deadline(), None, "nothing waits");
        assert_balanced(&c);
    }

    /// Encoders are made at commit and kept while some destination writes
    /// them: `recv_s` goes on counting across a reload.
    #[test]
    fn a_text_slot_is_kept_across_a_commit_while_it_is_written() {
        let one = destination_toml("json", 9001, "json", "fields = [\"recv_s\"]");
        let r = routes(&one);
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let packet = fh6(1, true);
        let wall = test_wall();
        core.handle(Arrival::new(&packet, SENDER, t0, wall), t0, &mut sink);
        let buf = core.texts[0].buf.as_ptr();
        let more = one.clone() + &destination_toml("other", 9002, "influx", "");
        core.apply(&routes(&more));
        assert_eq!(core.texts.len(), 2);
        assert_eq!(core.texts[0].buf.as_ptr(), buf, "the same slot");
        let later = wall + Duration::from_millis(1_500);
        core.handle(Arrival::new(&packet, SENDER, t0, later), t0, &mut sink);
        assert_eq!(
            sink.to(&core, "json")
                .last()
                .map(|b| String::from_utf8(b.clone()).unwrap()),
            Some(r#"{"recv_s":1.5}"#.to_owned()),
            "counted from the first frame, before the reload"
        );
        core.apply(&routes(&destination_toml(
            "json",
            9001,
            "json",
            "fields = [\"Speed\"]",
        )));
        assert_eq!(
            core.texts.len(),
            1,
            "one slot per (encoding, fields) written"
        );
        assert_eq!(
            core.texts[0].selection,
            crate::output::Selection::names(["Speed"]).unwrap()
        );
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
        let fh6_for_sure = Reading::sure(Format::Fh6);
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
        // Issue 23: a datagram's own bytes decide how it is read.
        assert_eq!(
            core.handle_at(&spoofed, attacker, t0, &mut sink),
            Verdict::Admitted(Some(Reading::sure(Format::Fh5))),
            "one datagram is read as its puddles say"
        );
        sink.got.clear();
        let mut dry = fh6(1_001, true);
        Packet::new_checked(&mut dry[..], Format::Fh6)
            .unwrap()
            .set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(0); 4]));
        core.handle_at(&dry, SENDER, t0, &mut sink);
        let p = Packet::new_checked(&sink.got[0].1[..], Format::Fh5).unwrap();
        assert_eq!(p.timestamp_ms(), 1_001, "TimestampMS");
        assert_eq!(p.car_class(), 5, "CarClass R still becomes S2");
        assert_eq!(core.horizon(), Some(fh6_for_sure));
    }

    /// A wet fh6 packet, as [`fh6`] makes it, with puddle flags `flags`.
    fn wet_fh6(timestamp_ms: u32, flags: [i32; 4]) -> Vec<u8> {
        let mut packet = fh6(timestamp_ms, true);
        Packet::new_checked(&mut packet[..], Format::Fh6)
            .unwrap()
            .set_wheel_in_puddle(Wheels::from_array(flags.map(Puddle::Flag)));
        packet
    }

    /// Issue 23: under `auto`, a wet FH6 frame reaches an fh5 tool translated
    /// from the first one (its own puddle flags say fh6), not passed as it
    /// came while the stream's answer is still a guess.
    #[test]
    fn issue23_wet_fh6_frames_reach_fh5_translated_from_the_first() {
        let r = routes(
            &("[listen]\nformat = \"auto\"\n".to_owned()
                + &destination_toml("fh5", 9001, "fh5", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        for ts in 0..60 {
            let verdict = core.handle_at(&wet_fh6(ts, [1, 1, 0, 0]), SENDER, t0, &mut sink);
            assert_eq!(
                verdict,
                Verdict::Admitted(Some(Reading::sure(Format::Fh6))),
                "frame {ts}"
            );
        }
        let got = sink.to(&core, "fh5");
        assert_eq!(got.len(), 60);
        for (ts, bytes) in got.iter().enumerate() {
            let p = Packet::new_checked(&bytes[..], Format::Fh5).unwrap();
            assert_eq!(p.timestamp_ms(), ts as u32, "TimestampMS");
            assert_eq!(p.car_class(), 5, "frame {ts}: CarClass R (6) is FH5's S2");
            assert_eq!(
                p.wheel_in_puddle().into_array(),
                [
                    Puddle::Depth(1.0),
                    Puddle::Depth(1.0),
                    Puddle::Depth(0.0),
                    Puddle::Depth(0.0)
                ],
                "frame {ts}: WheelInPuddle as FH5 types it"
            );
            assert_eq!(p.speed(), Some(41.5), "Speed");
        }
        assert_eq!(core.horizon(), Some(Reading::sure(Format::Fh6)));
    }

    /// Issue 23: another sender's FH5-looking datagrams interleaved with the
    /// game's stream are read by their own bytes and never move the stream's
    /// answer; the senders are counted, the game's followed.
    #[test]
    fn issue23_another_senders_datagrams_never_move_the_games_answer() {
        let r = routes(
            &("[listen]\nformat = \"auto\"\n".to_owned()
                + &destination_toml("fh5", 9001, "fh5", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let other: SocketAddr = "127.0.0.1:6666".parse().unwrap();
        let mut fh5_looking = fh6(0, true);
        Packet::new_checked(&mut fh5_looking[..], Format::Fh5)
            .unwrap()
            .set_wheel_in_puddle(Wheels::from_array([Puddle::Depth(0.25); 4]));
        // The game: confirmed fh6, then dry frames of class R.
        for ts in 0..AGREEING_PACKETS {
            core.handle_at(
                &wet_fh6(ts, [1, 0, 0, 0]),
                SENDER,
                t0 + ms(16 * u64::from(ts)),
                &mut sink,
            );
        }
        sink.got.clear();
        let mut at = t0 + ms(500);
        for ts in 100..140u32 {
            at += ms(8);
            assert_eq!(
                core.handle_at(&fh5_looking, other, at, &mut sink),
                Verdict::Admitted(Some(Reading::sure(Format::Fh5)))
            );
            at += ms(8);
            let dry = wet_fh6(ts, [0; 4]);
            assert_eq!(
                core.handle_at(&dry, SENDER, at, &mut sink),
                Verdict::Admitted(Some(Reading::sure(Format::Fh6))),
                "the game's dry frame {ts} is still read as fh6"
            );
        }
        let got = sink.to(&core, "fh5");
        assert_eq!(got.len(), 80);
        for (i, bytes) in got.iter().enumerate() {
            let p = Packet::new_checked(&bytes[..], Format::Fh5).unwrap();
            if i % 2 == 0 {
                assert_eq!(bytes, &fh5_looking, "fh5 to fh5: as it came");
            } else {
                assert_eq!(p.car_class(), 5, "game frame {i}: R becomes S2");
            }
        }
        assert_eq!(core.horizon(), Some(Reading::sure(Format::Fh6)));
        let senders = core.counters().input.senders;
        let list: Vec<(SocketAddr, u64)> = senders
            .list()
            .iter()
            .map(|s| (s.addr, s.datagrams))
            .collect();
        assert_eq!(list, [(SENDER, 70), (other, 40)]);
        assert_eq!(senders.followed().map(|s| s.addr), Some(SENDER));
        assert_eq!(senders.switches(), 0);
    }

    /// The status query from loopback (issue 23) is recognised among the
    /// datagrams the core refuses anyway, and goes nowhere, counted nowhere;
    /// from beyond this computer it is a malformed datagram like any other.
    #[test]
    fn issue23_the_status_query_goes_nowhere_and_counts_nowhere() {
        for allow in ["", "allow = [\"10.0.0.0/8\"]\n"] {
            let r = routes(
                &(format!("[listen]\nformat = \"fh6\"\n{allow}")
                    + &destination_toml("raw", 9001, "same", "")),
            );
            let mut core = Fanout::new(&r);
            let mut sink = Recorder::default();
            let t0 = Instant::now();
            let asker: SocketAddr = "127.0.0.1:40000".parse().unwrap();
            assert_eq!(
                core.handle_at(crate::query::QUERY, asker, t0, &mut sink),
                Verdict::Query,
                "{allow}"
            );
            assert!(sink.got.is_empty(), "never forwarded");
            assert_eq!(core.queries(), 1);
            let c = core.counters();
            assert_eq!(
                (
                    c.input.received,
                    c.input.bytes,
                    c.input.malformed,
                    c.input.disallowed
                ),
                (0, 0, 0, 0),
                "counted nowhere"
            );
            assert!(c.input.senders.list().is_empty(), "no sender");
            assert_eq!(stats(&c, "raw").received, 0);
        }
        let r = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("raw", 9001, "same", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let lan: SocketAddr = "10.1.2.3:40000".parse().unwrap();
        assert_eq!(
            core.handle_at(crate::query::QUERY, lan, Instant::now(), &mut sink),
            Verdict::Admitted(None)
        );
        assert_eq!(core.queries(), 0);
        assert_eq!(core.counters().input.malformed, 1);
        assert_eq!(sink.got.len(), 1, "a malformed datagram goes to same");
    }
}
