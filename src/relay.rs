//! The relay's shell: a single-threaded mio loop that owns every socket, timer
//! and hand-off, around the pure fan-out core ([`Fanout`]).
//!
//! One packet's way: the loop wakes with it; the listening socket is drained in
//! batches ([`Batch`]: one `recvmmsg` on Linux, which brings each datagram's
//! kernel receive time along); the core decides whether each datagram is
//! admitted and, per destination, what to send; the shell sends it on that
//! destination's own connected socket and tells the core what the network did
//! ([`Outcome`]) and how long the frame took from its receipt to the return of
//! the send; taps get the admitted datagrams after the sends. The clocks are
//! read through the vDSO: once on each clock per batch, once after each send.
//!
//! The loop waits in one of two ways (issue 16). In the plain case, on Linux
//! (no frame waits in a backlog or for its rate slot, nothing left unread), it
//! sleeps inside the receive itself ([`Batch::wait`]), bounded by the next
//! summary ([`wait::RecvTimeout`]): a packet then costs one system call plus
//! one send per destination. Otherwise, and on every other platform, it sleeps
//! in mio's `poll`, which also watches the destinations that would block, and
//! then receives: one call more. Going back from the receive to the poll, the
//! first poll only looks, and the socket is drained until empty before the poll
//! may sleep: mio is edge-triggered. Per packet nothing is allocated, nothing
//! is logged above `trace!`, and no error is fatal: a send error is counted
//! against its destination alone, a bad datagram against the input, a failed
//! `poll` is logged and the loop goes on.
//!
//! Each destination has its own connected UDP socket, so the ICMP "port
//! unreachable" of a closed consumer lands on that socket only (it comes back
//! from its next send), never on the listening one (which on Windows would fail
//! its next `recv` with WSAECONNRESET). When a send would block, up to
//! [`BACKLOG_FRAMES`] of the newest frames wait in a preallocated ring, and only
//! then is the socket registered with the poll, until the ring is flushed; a
//! waiting frame that has grown older than the destination's `max_age` is
//! dropped instead of sent ([`Report::drop_if_stale`]). The core counts those
//! frames as held until the shell says what became of them; when the relay
//! stops, one last flush is tried and the rest is counted dropped.
//!
//! After a stall (issue 15), a destination with `max_age` must get the newest
//! frame at once, and one without must get every frame in order. So while a
//! backlog is drained (a full batch, `BACKLOG_IN_ROW` datagrams in a row, or
//! frames older than the smallest `max_age`), frames for destinations without
//! a limit are held back in rings made with the link (`Link::hold_back`)
//! instead of sent, and sent in order once the listening socket is empty
//! (`Link::release`), after `HOLD_BACK_MAX`, or before the rings would
//! overflow: the limited
//! destinations reach the newest frame after the receives alone, not after a
//! send per backlog frame to each neighbour. Holding back drops nothing.
//!
//! A new configuration is planned by the core, carried out here (every new
//! socket opened first, so that a failure changes nothing) and committed to the
//! core, which returns what changed: the shell never matches destinations
//! itself.
//!
//! Other threads talk to the loop only through [`Control`]: a message on a
//! channel plus a wake-up of the poll's [`Waker`] and, for a loop asleep in the
//! receive, a datagram from the relay's own wake-up socket
//! ([`wait::WakeSender`]), which is never forwarded, tapped or counted. The
//! loop acts on commands between packets, and looks for them after every
//! receive, so a wake-up datagram lost under a flood delays nothing.
//! Summaries leave the loop as [`Snapshot`]s on a bounded channel
//! ([`Relay::summaries`]), so the loop never waits for a terminal or a pipe.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{debug, error, info, trace, warn};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use ringbuf::storage::Heap;
use ringbuf::traits::{Consumer, Observer, Producer, RingBuffer};
use ringbuf::LocalRb;

use crate::config::{self, Config};
use crate::fanout::{
    self, Action, Arrival, Changes, Counters, Destination, DestinationId, Fanout, HeldFrame,
    Outcome, Report, Routes, Sink, Verdict,
};
use crate::recv::wait::{self, RecvTimeout, WakeFilter, WakeSender};
use crate::recv::{self, Batch, Moment, WAITS};
use crate::socket::{self, PortInUse};
use crate::stats::{DropReason, InputStats, LatencyWindow, SendErrorKind, Snapshot};
use crate::tap::TapProducer;
use crate::wire::{Expected, Reading, AGREEING_PACKETS};

/// The poll's tokens: the listening socket, the waker, then one per
/// destination, `Token(FIRST_DESTINATION + id.index())`.
const LISTENER: Token = Token(0);
const WAKER: Token = Token(LISTENER.0 + 1);
const FIRST_DESTINATION: usize = WAKER.0 + 1;

/// The token destination `id`'s socket is registered with.
fn token_of(id: DestinationId) -> Token {
    Token(FIRST_DESTINATION + id.index())
}

/// The destination a token belongs to, if it is a destination's.
fn destination_of(token: Token) -> Option<DestinationId> {
    token
        .0
        .checked_sub(FIRST_DESTINATION)
        .map(DestinationId::from_index)
}

pub use crate::fanout::FRAME_CAPACITY;
pub use crate::recv::MAX_DATAGRAM;
/// Newest frames kept per destination while its socket would block.
pub const BACKLOG_FRAMES: usize = 8;
/// Datagrams read per drain before other work gets a turn.
const DRAIN_BUDGET: usize = 256;
/// Datagrams found queued in a row that mean a backlog is being drained (a
/// full `recvmmsg` batch on Linux), so frames for destinations without
/// `max_age` are held back (issue 15).
const BACKLOG_IN_ROW: usize = 32;
/// Bytes a destination without `max_age` may hold back: about 3,000 Horizon
/// frames, 8 s at 360 frames/s.
const HELD_BACK_BYTES: usize = 1 << 20;
/// Frames a destination without `max_age` may hold back.
const HELD_BACK_FRAMES: usize = 4_096;
/// How long frames are held back at most: draining the 720 frames of a 2 s
/// stall takes 3 ms here, so this only matters when the relay can't keep up
/// and the listening socket never empties.
const HOLD_BACK_MAX: Duration = Duration::from_millis(20);
/// Consecutive unexpected receive errors after which a drain gives up.
const MAX_RECV_ERRORS: usize = 8;
/// Events handled per `poll` call.
const EVENTS: usize = 256;
/// How often a repeated warning may be logged when the stats line is off.
const DEFAULT_WARN_INTERVAL: Duration = Duration::from_secs(10);
/// Summaries waiting for their reader; more are dropped, never waited for.
const SUMMARY_QUEUE: usize = 4;
/// Pause after a failed `poll`, so a poll that keeps failing doesn't spin.
const POLL_ERROR_PAUSE: Duration = Duration::from_millis(10);
/// How late the wait in the receive may end after the next summary is due,
/// when packets stop: a twentieth of the interval, within these bounds (while
/// packets flow the wait's timeout is this slack and is never set again, see
/// [`RecvTimeout::arm`]). With summaries off the schedule only starts a new
/// latency window, which nobody sees late (a command is answered after the
/// timers): up to a whole [`DEFAULT_WARN_INTERVAL`], so the first wait after
/// packets stop ends with the schedule, not a wake-up before it.
const MIN_WAIT_SLACK: Duration = Duration::from_millis(5);
const MAX_WAIT_SLACK: Duration = Duration::from_millis(500);

/// Logs a repeated problem at most once per interval, and counts what it held
/// back.
#[derive(Debug, Default)]
struct Throttle {
    last: Option<Instant>,
    /// Occurrences since the last message.
    unlogged: u64,
}

impl Throttle {
    /// `n` more occurrences at `now`. `Some(more)` when a message about the
    /// latest may be logged now, `more` being the other occurrences since the
    /// last message, which no message described.
    fn occurred(&mut self, n: u64, now: Instant, every: Duration) -> Option<u64> {
        if n == 0 {
            return None;
        }
        self.unlogged += n;
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < every)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged) - 1)
    }

    /// The occurrences no message described, for a last word at the end.
    fn unlogged(&mut self) -> u64 {
        std::mem::take(&mut self.unlogged)
    }
}

/// How many occurrences a throttle held back, for the end of the next message.
struct Suppressed(u64);

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} more like this since the last message)"),
        }
    }
}

/// `1 more datagram` or `3 more datagrams`.
struct More(u64, &'static str);

impl fmt::Display for More {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.0 == 1 { "" } else { "s" };
        write!(f, "{} more {}{s}", self.0, self.1)
    }
}

/// A send error as a person reads it.
struct SendProblem<'a>(SendErrorKind, &'a io::Error);

impl fmt::Display for SendProblem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.1;
        match self.0 {
            SendErrorKind::Refused => {
                f.write_str("nothing is listening on that port (is the tool running?)")
            }
            SendErrorKind::Unreachable => write!(f, "the address can't be reached ({e})"),
            SendErrorKind::TooLarge => write!(f, "datagram too large for the path ({e})"),
            SendErrorKind::Other => write!(f, "send failed ({e})"),
        }
    }
}

/// What one send attempt did.
enum Sent {
    Yes,
    WouldBlock,
    Failed,
}

/// The moment and the warning interval a batch of sends shares.
#[derive(Clone, Copy)]
struct Clock {
    now: Instant,
    warn_every: Duration,
}

/// Warns about one destination's send errors, at most once per interval.
struct Warner {
    name: String,
    addr: SocketAddr,
    throttle: Throttle,
}

impl Warner {
    /// Reports a send error (from `send`, or collected from the socket after an
    /// ICMP message) to the core, and warns at most once per interval.
    fn report(&mut self, e: &io::Error, report: &mut Report<'_>, clock: Clock) -> SendErrorKind {
        let kind = SendErrorKind::of(e);
        report.send_error(kind);
        if let Some(more) = self.throttle.occurred(1, clock.now, clock.warn_every) {
            warn!(
                "{} ({}): {}; still sending to it{}",
                self.name,
                self.addr,
                SendProblem(kind, e),
                Suppressed(more)
            );
        }
        kind
    }

    /// The send errors no message described, said once as the relay stops.
    fn last_word(&mut self) {
        let n = self.throttle.unlogged();
        if n > 0 {
            warn!(
                "{} ({}): {} since the last message",
                self.name,
                self.addr,
                More(n, "send error")
            );
        }
    }
}

/// One send, reporting its errors. A refused send is tried once more: Linux
/// reports an earlier frame's ICMP on the next send and drops that frame, so the
/// retry is what delivers the first frame after a consumer comes back.
fn try_send(
    socket: &UdpSocket,
    warner: &mut Warner,
    bytes: &[u8],
    report: &mut Report<'_>,
    clock: Clock,
) -> Sent {
    let mut retried = false;
    loop {
        match socket.send(bytes) {
            Ok(_) => return Sent::Yes,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Sent::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let kind = warner.report(&e, report, clock);
                if kind == SendErrorKind::Refused && !retried {
                    retried = true;
                    continue;
                }
                return Sent::Failed;
            }
        }
    }
}

/// One send of a frame received at `received`: its outcome, with its latency
/// reported when it went; `None` when the socket would block.
fn send_now(
    socket: &UdpSocket,
    warner: &mut Warner,
    bytes: &[u8],
    received: Instant,
    report: &mut Report<'_>,
    clock: Clock,
) -> Option<Outcome> {
    match try_send(socket, warner, bytes, report, clock) {
        Sent::Yes => {
            // A vDSO read, no system call.
            report.record_latency(received, Instant::now());
            Some(Outcome::Sent)
        }
        Sent::Failed => Some(Outcome::Dropped(DropReason::SendError)),
        Sent::WouldBlock => None,
    }
}

/// Refuses a destination that is this computer on the port the relay listens
/// on (`listen`, as bound): packets would loop. The one rule is
/// [`fanout::is_loop`]; config validation applies it too, but can't know a
/// port 0 will be bound.
fn check_loop(d: &Destination, listen: SocketAddr) -> Result<(), StartError> {
    if fanout::is_loop(listen, d.addr, config::is_own_address) {
        return Err(StartError::Loop {
            name: d.name.clone(),
            addr: d.addr,
        });
    }
    Ok(())
}

/// Frames held back for a destination without `max_age` while a backlog is
/// drained, oldest first, packed end to end: after a stall there are hundreds,
/// and a [`HeldFrame`] each would cost 1.5 KiB. The rings are allocated once
/// and their pages touched only when used.
struct HeldBack {
    /// Each frame's length and receive time.
    heads: LocalRb<Heap<(u16, Instant)>>,
    bytes: LocalRb<Heap<u8>>,
    /// Where a frame is copied out to be sent.
    scratch: Box<[u8]>,
}

impl HeldBack {
    fn new() -> Self {
        HeldBack {
            heads: LocalRb::new(HELD_BACK_FRAMES),
            bytes: LocalRb::new(HELD_BACK_BYTES),
            scratch: vec![0; FRAME_CAPACITY].into_boxed_slice(),
        }
    }

    /// True when `len` more bytes fit.
    fn has_room(&self, len: usize) -> bool {
        !self.heads.is_full() && self.bytes.vacant_len() >= len
    }

    fn clear(&mut self) {
        self.heads.clear();
        self.bytes.clear();
    }
}

/// A destination's socket and backlog.
struct Link {
    socket: UdpSocket,
    token: Token,
    backlog: LocalRb<Heap<HeldFrame>>,
    /// Frames not yet sent because a backlog is being drained (issue 15);
    /// all older than any frame that comes after them.
    held_back: HeldBack,
    /// Registered with the poll for writability: only while frames wait.
    watched: bool,
    warner: Warner,
}

impl Link {
    /// Opens the connected socket for destination `id`, `d`, refusing one that
    /// would loop back to `listen`.
    fn open(id: DestinationId, d: &Destination, listen: SocketAddr) -> Result<Link, StartError> {
        let err = |source| StartError::Destination {
            name: d.name.clone(),
            addr: d.addr,
            source,
        };
        check_loop(d, listen)?;
        let socket = UdpSocket::from_std(socket::connect_destination(d.addr).map_err(err)?);
        Ok(Link {
            socket,
            token: token_of(id),
            backlog: LocalRb::new(BACKLOG_FRAMES),
            held_back: HeldBack::new(),
            watched: false,
            warner: Warner {
                name: d.name.clone(),
                addr: d.addr,
                throttle: Throttle::default(),
            },
        })
    }

    /// Sends `bytes`, received at `received`, now, or queues them behind
    /// frames already waiting.
    fn send(
        &mut self,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
        registry: &Registry,
        clock: Clock,
    ) -> Outcome {
        if !self.backlog.is_empty() {
            let outcome = self.queue(bytes, received, report);
            self.flush(report, registry, clock);
            return outcome;
        }
        send_now(
            &self.socket,
            &mut self.warner,
            bytes,
            received,
            report,
            clock,
        )
        .unwrap_or_else(|| {
            let outcome = self.queue(bytes, received, report);
            self.watch(registry, true);
            outcome
        })
    }

    /// Holds `bytes`, received at `received`, back while a backlog is drained,
    /// so that destinations with `max_age` reach the newest frame first;
    /// [`Link::release`] sends them, in order. When the held-back frames fill
    /// their rings they are released first: holding back never drops a frame.
    fn hold_back(
        &mut self,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
        registry: &Registry,
        clock: Clock,
    ) -> Outcome {
        let len = match u16::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= FRAME_CAPACITY => len,
            // Too large to hold: it goes now, after the frames before it.
            _ => {
                self.release(report, registry, clock);
                return self.send(bytes, received, report, registry, clock);
            }
        };
        if !self.held_back.has_room(bytes.len()) {
            self.release(report, registry, clock);
        }
        // Released, the rings have room for any frame up to FRAME_CAPACITY.
        let _ = self.held_back.heads.try_push((len, received));
        self.held_back.bytes.push_slice(bytes);
        Outcome::Queued
    }

    /// Sends the held-back frames, oldest first, as they would have been sent
    /// when they came (behind the backlog, into it when the socket would
    /// block).
    fn release(&mut self, report: &mut Report<'_>, registry: &Registry, clock: Clock) {
        if self.held_back.heads.is_empty() {
            return;
        }
        // Taking the boxed slice leaves an empty one: no allocation.
        let mut scratch = std::mem::take(&mut self.held_back.scratch);
        while let Some((len, received)) = self.held_back.heads.try_pop() {
            let frame = &mut scratch[..usize::from(len)];
            self.held_back.bytes.pop_slice(frame);
            let outcome = self.send(frame, received, report, registry, clock);
            report.held(outcome);
        }
        self.held_back.scratch = scratch;
    }

    /// Frames the shell holds for the destination: the core's `queued`.
    fn holding(&self) -> usize {
        self.backlog.occupied_len() + self.held_back.heads.occupied_len()
    }

    /// Keeps `bytes` for later, dropping the oldest waiting frame when full.
    fn queue(&mut self, bytes: &[u8], received: Instant, report: &mut Report<'_>) -> Outcome {
        let mut frame = HeldFrame::EMPTY;
        if !frame.store(bytes, received) {
            return Outcome::Dropped(DropReason::Backlog);
        }
        if self.backlog.push_overwrite(frame).is_some() {
            report.held(Outcome::Dropped(DropReason::Backlog));
        }
        Outcome::Queued
    }

    /// Sends waiting frames, oldest first, straight from the ring, until the
    /// socket would block; a frame grown too old for the destination's
    /// `max_age` is dropped instead. The socket is watched only while frames
    /// remain.
    fn flush(&mut self, report: &mut Report<'_>, registry: &Registry, clock: Clock) {
        let Link {
            socket,
            backlog,
            warner,
            ..
        } = self;
        while let Some(frame) = backlog.first() {
            let received = frame.received().unwrap_or(clock.now);
            if report.drop_if_stale(received, clock.now) {
                backlog.try_pop();
                continue;
            }
            let Some(outcome) = send_now(socket, warner, frame.bytes(), received, report, clock)
            else {
                break;
            };
            backlog.try_pop();
            report.held(outcome);
        }
        self.watch(registry, !self.backlog.is_empty());
    }

    /// Registers the socket for writability, or deregisters it. A failure is
    /// logged: without the registration, waiting frames go with the next send.
    fn watch(&mut self, registry: &Registry, on: bool) {
        if on == self.watched {
            return;
        }
        let result = if on {
            registry.register(&mut self.socket, self.token, Interest::WRITABLE)
        } else {
            registry.deregister(&mut self.socket)
        };
        match result {
            Ok(()) => self.watched = on,
            Err(e) => warn!(
                "{} ({}): cannot {} its socket with the event loop: {e}",
                self.warner.name,
                self.warner.addr,
                if on { "register" } else { "deregister" }
            ),
        }
    }

    /// Drops the frames still waiting: the core counts them (its plan said so,
    /// or the relay stops).
    fn clear_backlog(&mut self, registry: &Registry) {
        self.backlog.clear();
        self.held_back.clear();
        self.watch(registry, false);
    }
}

/// The shell's side of the core's [`Sink`]: each destination's link.
struct Links<'a> {
    links: &'a mut [Option<Link>],
    registry: &'a Registry,
    clock: Clock,
    /// A backlog is being drained: frames for destinations without `max_age`
    /// are held back.
    hold_back: bool,
}

impl Sink for Links<'_> {
    fn deliver(
        &mut self,
        id: DestinationId,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Outcome {
        let (registry, clock) = (self.registry, self.clock);
        match self.links.get_mut(id.index()) {
            Some(Some(link)) if self.hold_back && !report.has_age_limit() => {
                link.hold_back(bytes, received, report, registry, clock)
            }
            Some(Some(link)) => {
                // Frames held back go first (none are, outside a drain).
                link.release(report, registry, clock);
                link.send(bytes, received, report, registry, clock)
            }
            // Every destination of the core has a link (see `Shell::apply`).
            _ => Outcome::Dropped(DropReason::SendError),
        }
    }
}

/// Why the relay could not start, or a new configuration was not taken.
#[derive(Debug)]
pub enum StartError {
    /// The listening socket could not be bound.
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Where it was configured.
        place: String,
        /// The OS error.
        source: io::Error,
    },
    /// A destination socket could not be set up.
    Destination {
        /// Its name.
        name: String,
        /// Its address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// A destination is this computer on the listen port: packets would loop.
    Loop {
        /// Its name.
        name: String,
        /// Its address.
        addr: SocketAddr,
    },
    /// The event loop could not be created.
    Poll(io::Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Listen {
                addr,
                place,
                source,
            } => write!(
                f,
                "{place}: cannot listen on {addr}: {}",
                PortInUse::new(*addr, source)
            ),
            StartError::Destination { name, addr, source } => {
                write!(
                    f,
                    "destination {name:?} ({addr}): cannot set up a socket: {source}"
                )
            }
            StartError::Loop { name, addr } => write!(
                f,
                "destination {name:?} ({addr}) is this computer, on the port forza-relay \
                 listens on: packets would loop forever. Point it at the tool's own port."
            ),
            StartError::Poll(e) => write!(f, "cannot create the event loop: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// What a new configuration changed: the listening address (the shell's) and
/// everything the core changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The listening address, before and after, when it changed.
    pub listen: Option<(SocketAddr, SocketAddr)>,
    /// What changed in the core: destinations, input format, allow-list.
    pub changes: Changes,
}

impl Applied {
    /// True when the new configuration changed nothing the relay does.
    pub fn is_empty(&self) -> bool {
        self.listen.is_none() && self.changes.is_empty()
    }
}

impl fmt::Display for Applied {
    /// One line: `~ listen: A -> B, + C (fm7), ~ B: same -> fh5, - D`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some((before, after)) = self.listen {
            write!(f, "~ listen: {before} -> {after}")?;
            sep = ", ";
        }
        self.changes.write_items(f, &mut sep)?;
        if sep.is_empty() {
            f.write_str("no changes")?;
        }
        Ok(())
    }
}

/// A configuration as the loop takes it: the core's routes, and the parts the
/// shell keeps for itself.
struct Setup {
    listen: SocketAddr,
    /// Where `listen` was written, for a "port in use" message.
    listen_place: String,
    stats_interval: Option<Duration>,
    routes: Routes,
}

impl Setup {
    fn of(config: &Config) -> Setup {
        Setup {
            listen: config.listen,
            listen_place: config.listen_place.clone(),
            stats_interval: config.stats_interval,
            routes: config.routes(),
        }
    }
}

/// What other threads ask of the loop.
enum Command {
    /// Finish: `run` returns its final snapshot.
    Stop,
    /// Take this configuration (a reload), and say how it went if asked.
    Apply(
        Box<Setup>,
        Option<mpsc::Sender<Result<Applied, StartError>>>,
    ),
    /// Reply with a snapshot of every counter.
    Snapshot(mpsc::Sender<Snapshot>),
    /// Fill this snapshot with every counter and hand it back: the reader's
    /// buffers, so the loop allocates nothing ([`Snapshots`]).
    Fill(Box<Snapshot>, mpsc::SyncSender<Box<Snapshot>>),
    /// Copy every datagram admitted into this tap from now on.
    Attach(Box<TapProducer>),
}

/// Talks to a running relay from any thread: a message, then a wake-up.
#[derive(Clone)]
pub struct Control {
    commands: mpsc::Sender<Command>,
    waker: Arc<Waker>,
    /// Wakes a loop asleep in the receive; `None` where it never sleeps there.
    /// The loop replaces it when its listening address moves.
    wake: Arc<Mutex<Option<WakeSender>>>,
    /// Set after a message is sent, before the wake-up: the loop reads the
    /// channel only when it is, so a packet costs one flag, not a channel.
    pending: Arc<AtomicBool>,
}

impl Control {
    fn send(&self, command: Command) {
        // A relay that is gone has nothing left to do with the message.
        if self.commands.send(command).is_ok() {
            self.pending.store(true, Ordering::Release);
            // If waking fails the loop still sees the message at its next wake-up.
            let _ = self.waker.wake();
            if let Ok(wake) = self.wake.lock() {
                if let Some(wake) = &*wake {
                    let _ = wake.wake();
                }
            }
        }
    }

    /// Asks the loop to finish; `run` then returns its final snapshot.
    pub fn stop(&self) {
        self.send(Command::Stop);
    }

    /// Asks the loop to take `config`: the listen address and summary interval
    /// here, the rest in the core, which matches destinations by name, so those
    /// that did not change lose nothing (see [`Fanout::plan`]).
    pub fn apply(&self, config: Config) {
        self.send(Command::Apply(Box::new(Setup::of(&config)), None));
    }

    /// As [`Control::apply`], then waits (at most `timeout`) for what changed,
    /// or why nothing did; `None` when the loop didn't answer in time.
    pub fn apply_and_wait(
        &self,
        config: Config,
        timeout: Duration,
    ) -> Option<Result<Applied, StartError>> {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Apply(Box::new(Setup::of(&config)), Some(tx)));
        rx.recv_timeout(timeout).ok()
    }

    /// Copies every datagram admitted from now on into `tap` (see
    /// [`crate::tap`]); dropping the tap's reader detaches it.
    pub fn attach(&self, tap: TapProducer) {
        self.send(Command::Attach(Box::new(tap)));
    }

    /// Every counter now, or `None` if the loop doesn't answer within `timeout`.
    pub fn snapshot(&self, timeout: Duration) -> Option<Snapshot> {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Snapshot(tx));
        rx.recv_timeout(timeout).ok()
    }

    /// A reader of snapshots that brings its own buffers (see [`Snapshots`]).
    pub fn snapshots(&self) -> Snapshots {
        let (answers, returned) = mpsc::sync_channel(Snapshots::IN_FLIGHT);
        Snapshots {
            control: self.clone(),
            spare: None,
            answers,
            returned,
        }
    }

    /// As [`Control::apply`], returning where the loop will say how it went:
    /// the caller can wait as long as it likes, and a closed channel means the
    /// relay is gone (its loop will never answer).
    pub fn apply_with_reply(&self, config: Config) -> mpsc::Receiver<Result<Applied, StartError>> {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Apply(Box::new(Setup::of(&config)), Some(tx)));
        rx
    }
}

/// Asks the loop for every counter, again and again, without allocating on
/// the loop's thread: each request carries a [`Snapshot`] that the loop fills
/// in place (its lists and names keep their capacity) and hands back, so a page
/// asking once a second costs the relay no allocation (issue 14). One buffer
/// is reused from request to request; a request that timed out leaves its
/// buffer with the loop, and the next one takes it back if it has come.
pub struct Snapshots {
    control: Control,
    /// The buffer of the last answer, or `None` while the loop holds it.
    spare: Option<Box<Snapshot>>,
    answers: mpsc::SyncSender<Box<Snapshot>>,
    returned: mpsc::Receiver<Box<Snapshot>>,
}

impl Snapshots {
    /// Answers the loop can hand back before it drops one (it never waits for
    /// the reader): requests that timed out, plus the one being waited for.
    const IN_FLIGHT: usize = 2;

    /// Every counter now, or `None` if the loop doesn't answer within
    /// `timeout`. After a timeout, the next answer may be the late one: at
    /// most `timeout` older than the request.
    pub fn take(&mut self, timeout: Duration) -> Option<&Snapshot> {
        let buffer = match self.spare.take() {
            Some(b) => b,
            None => match self.returned.try_recv() {
                Ok(b) => b,
                Err(_) => Box::new(Snapshot::empty()),
            },
        };
        self.control
            .send(Command::Fill(buffer, self.answers.clone()));
        let answer = self.returned.recv_timeout(timeout).ok()?;
        Some(&**self.spare.insert(answer))
    }
}

/// The running relay.
pub struct Relay {
    poll: Poll,
    events: Events,
    shell: Shell,
}

/// Everything but the poll: split so events can be iterated while handled.
struct Shell {
    registry: Registry,
    listener: UdpSocket,
    /// The address bound, and the one configured (they differ with port 0).
    listen: SocketAddr,
    configured_listen: SocketAddr,
    batch: Batch,
    /// What the core decided about each datagram of the last batch.
    verdicts: [Verdict; Batch::SIZE],
    core: Fanout,
    /// Indexed by [`DestinationId`], as the core's destinations are.
    links: Vec<Option<Link>>,
    commands: mpsc::Receiver<Command>,
    control: Control,
    stopping: bool,
    /// The last drain stopped at its budget with datagrams still queued.
    unread: bool,
    /// Since when a backlog is being drained: frames for destinations without
    /// `max_age` are held back until the listening socket is empty, or for
    /// [`HOLD_BACK_MAX`] at most (issue 15).
    holding_back: Option<Instant>,
    /// The smallest `max_age` when destinations with and without a limit are
    /// both configured (else holding back has no use): worked out when the
    /// destinations change, not per batch.
    hold_back_age: Option<Duration>,
    /// Tells the wake-up datagram apart; `None`: the loop never waits in the
    /// receive (not Linux, or the wake-up socket could not be made).
    wake: Option<WakeFilter>,
    /// The listening socket's timeout for the wait in the receive.
    recv_timeout: RecvTimeout,
    /// The last turn waited in the receive, not in the poll.
    waiting: bool,
    /// Waits in the receive that failed in a row.
    wait_errors: usize,
    /// Whether the last wait in the receive ended with a datagram sooner than
    /// its slack: packets flow, and the receive's timeout may end a wait
    /// early ([`RecvTimeout::arm`]).
    flowing: bool,
    started: Instant,
    stats_interval: Option<Duration>,
    /// When the last summary was taken (the start, before the first).
    last_summary: Instant,
    /// When the next summary is due, and the latency window ends: every
    /// `stats_interval`, or with summaries off every
    /// [`DEFAULT_WARN_INTERVAL`], so the latency the dashboard and the page
    /// show is recent either way (issue 15).
    next_summary: Option<Instant>,
    summaries: Option<mpsc::SyncSender<Snapshot>>,
    /// Readers of every datagram admitted (the capture writer, the dashboard).
    taps: Vec<TapProducer>,
    /// Datagrams dropped by taps whose readers have gone.
    tap_dropped: u64,
    /// Datagrams taps whose readers have gone took but could not keep.
    not_recorded: u64,
    warn_every: Duration,
    /// Input counters when their warnings were last considered.
    warned: InputStats,
    /// How `auto` reads Horizon packets, as last logged.
    horizon: Option<Reading>,
    malformed: Throttle,
    disallowed: Throttle,
    recv_error: Throttle,
    poll_error: Throttle,
}

impl Relay {
    /// Opens every socket of `config`. Nothing is left half-started on error.
    pub fn bind(config: &Config) -> Result<Relay, StartError> {
        let setup = Setup::of(config);
        let poll = Poll::new().map_err(StartError::Poll)?;
        let registry = poll.registry().try_clone().map_err(StartError::Poll)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(StartError::Poll)?);
        let (listener, listen) = bind_listener(&registry, setup.listen, &setup.listen_place)?;
        let core = Fanout::new(&setup.routes);
        let mut links = Vec::new();
        for (id, d) in core.destinations() {
            let link = Link::open(id, d, listen)?;
            links.resize_with(links.len().max(id.index() + 1), || None);
            links[id.index()] = Some(link);
        }
        let (tx, commands) = mpsc::channel();
        let now = Instant::now();
        let interval = setup.stats_interval;
        let mut relay = Relay {
            poll,
            events: Events::with_capacity(EVENTS),
            shell: Shell {
                registry,
                listener,
                listen,
                configured_listen: setup.listen,
                batch: Batch::new(),
                verdicts: [Verdict::Disallowed; Batch::SIZE],
                horizon: core.horizon(),
                core,
                links,
                commands,
                control: Control {
                    commands: tx,
                    waker,
                    wake: Arc::new(Mutex::new(None)),
                    pending: Arc::new(AtomicBool::new(false)),
                },
                stopping: false,
                unread: false,
                holding_back: None,
                hold_back_age: None,
                wake: None,
                recv_timeout: RecvTimeout::default(),
                waiting: false,
                wait_errors: 0,
                flowing: false,
                started: now,
                stats_interval: interval,
                last_summary: now,
                next_summary: now.checked_add(interval.unwrap_or(DEFAULT_WARN_INTERVAL)),
                summaries: None,
                taps: Vec::new(),
                tap_dropped: 0,
                not_recorded: 0,
                warn_every: interval.unwrap_or(DEFAULT_WARN_INTERVAL),
                warned: InputStats::default(),
                malformed: Throttle::default(),
                disallowed: Throttle::default(),
                recv_error: Throttle::default(),
                poll_error: Throttle::default(),
            },
        };
        relay.shell.hold_back_age = hold_back_age(&relay.shell.core);
        relay.shell.open_wake();
        Ok(relay)
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shell.listen
    }

    /// A handle that stops, reconfigures or asks the relay from anywhere.
    pub fn control(&self) -> Control {
        self.shell.control.clone()
    }

    /// The periodic summaries (every `stats.interval`), as snapshots to render
    /// with [`crate::stats::Summary`] or as JSON. The loop never waits for the
    /// reader: a summary the reader hasn't taken while more pile up is dropped.
    /// The channel closes when the relay is dropped.
    pub fn summaries(&mut self) -> mpsc::Receiver<Snapshot> {
        let (tx, rx) = mpsc::sync_channel(SUMMARY_QUEUE);
        self.shell.summaries = Some(tx);
        rx
    }

    /// Runs until stopped, then returns the final snapshot, in which every
    /// destination's frames are sent or dropped: none is held any more.
    pub fn run(&mut self) -> Snapshot {
        while !self.shell.stopping {
            self.step(None);
        }
        self.shell.finish(Instant::now());
        self.shell.snapshot(LatencyWindow::Run)
    }

    /// One turn of [`Relay::run`]: waits for at most `timeout` (`None`: until
    /// something happens or the next deadline), in the receive in the plain
    /// case, else in the poll ([`Relay::poll_once`]), then handles everything
    /// that is ready.
    pub fn step(&mut self, timeout: Option<Duration>) {
        let shell = &mut self.shell;
        let now = Instant::now();
        // Looked up once a turn: it walks every destination.
        let deadline = shell.core.next_deadline();
        let until = match (
            shell.next_wake(deadline),
            timeout.and_then(|t| now.checked_add(t)),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if shell.plain(deadline) {
            shell.waiting = true;
            shell.wait(until, now);
            return;
        }
        if std::mem::take(&mut shell.waiting) {
            // Datagrams may have come since the last receive: look, drain
            // until empty, then sleep (mio is edge-triggered).
            shell.unread = true;
        }
        self.poll_once(until.map(|d| d.saturating_duration_since(now)));
    }

    /// Waits for at most `timeout` (`None`: until something happens), then handles
    /// everything that is ready: datagrams, writable destinations, commands, due
    /// frames and the periodic summary.
    pub fn poll_once(&mut self, timeout: Option<Duration>) {
        let shell = &mut self.shell;
        // Datagrams left unread by the last drain: look, don't wait.
        let timeout = if shell.unread {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        if let Err(e) = self.poll.poll(&mut self.events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                let now = Instant::now();
                if let Some(more) = shell.poll_error.occurred(1, now, shell.warn_every) {
                    error!(
                        "waiting for packets failed: {e}; trying again{}",
                        Suppressed(more)
                    );
                }
                std::thread::sleep(POLL_ERROR_PAUSE);
            }
            return;
        }
        let now = Instant::now();
        let unread = shell.unread;
        for event in self.events.iter() {
            match event.token() {
                LISTENER if !unread => shell.drain(now),
                LISTENER => {}
                WAKER => shell.commands(now),
                token => {
                    if let Some(id) = destination_of(token) {
                        shell.destination_event(id, event, now);
                    }
                }
            }
        }
        if unread {
            shell.drain(now);
        }
        shell.timers(now);
    }

    /// Copies every datagram admitted from now on into `tap`, as
    /// [`Control::attach`] does from another thread.
    pub fn attach(&mut self, tap: TapProducer) {
        self.shell.taps.push(tap);
    }

    /// Takes `config` now, as [`Control::apply`] does from another thread: all of
    /// it, or (when a socket can't be opened) none of it, returning why.
    pub fn apply(&mut self, config: &Config) -> Result<Applied, StartError> {
        self.shell.apply(Setup::of(config), Instant::now())
    }

    /// Input counters so far.
    pub fn input_stats(&self) -> InputStats {
        *self.shell.core.input_stats()
    }

    /// Every counter so far, latency over the summary interval so far.
    pub fn snapshot(&self) -> Snapshot {
        self.shell.snapshot(LatencyWindow::Interval)
    }
}

/// The smallest `max_age` of `core`'s destinations when some have one and
/// others don't: the only case in which holding back frames helps.
fn hold_back_age(core: &Fanout) -> Option<Duration> {
    let mut smallest = None::<Duration>;
    let mut unlimited = false;
    for (_, d) in core.destinations() {
        match d.max_age {
            Some(age) => smallest = Some(smallest.map_or(age, |s| s.min(age))),
            None => unlimited = true,
        }
    }
    smallest.filter(|_| unlimited)
}

/// Binds and registers the listening socket on `addr` (configured at `place`).
fn bind_listener(
    registry: &Registry,
    addr: SocketAddr,
    place: &str,
) -> Result<(UdpSocket, SocketAddr), StartError> {
    let (std_listener, granted) =
        socket::bind_listener(addr).map_err(|source| StartError::Listen {
            addr,
            place: place.to_owned(),
            source,
        })?;
    let mut listener = UdpSocket::from_std(std_listener);
    let listen = listener.local_addr().unwrap_or(addr);
    if let Err(e) = recv::enable_receive_times(&listener) {
        // Ages then count from when the loop read each batch.
        debug!("{listen}: no kernel receive times ({e}): frames are aged from when they are read");
    }
    registry
        .register(&mut listener, LISTENER, Interest::READABLE)
        .map_err(StartError::Poll)?;
    if granted < socket::MIN_RECV_BUFFER {
        warn!(
            "the OS gave the listening socket a {} KiB receive buffer (asked for {} KiB): \
             bursts may be lost while forza-relay is busy. On Linux, raise \
             net.core.rmem_max.",
            granted >> 10,
            socket::RECV_BUFFER >> 10
        );
    } else {
        debug!("listening on {listen} with a {granted}-byte receive buffer");
    }
    Ok((listener, listen))
}

/// How `auto` reads Horizon packets, for the log: `fh5`, or `fh6 (a guess)`.
struct HorizonReading(Reading);

impl fmt::Display for HorizonReading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        write!(
            f,
            "{}{}",
            r.format,
            if r.certain { "" } else { " (a guess)" }
        )
    }
}

impl Shell {
    fn clock(&self, now: Instant) -> Clock {
        Clock {
            now,
            warn_every: self.warn_every,
        }
    }

    /// As [`Shell::snapshot`], into `into`, reusing its lists' capacity.
    fn snapshot_into(&self, window: LatencyWindow, into: &mut Snapshot) {
        into.listen = self.listen;
        into.elapsed = self.started.elapsed();
        into.input = self.core.counters_into(window, &mut into.destinations);
        into.tap_dropped =
            self.tap_dropped + self.taps.iter().map(TapProducer::dropped).sum::<u64>();
        into.not_recorded =
            self.not_recorded + self.taps.iter().map(TapProducer::not_recorded).sum::<u64>();
    }

    /// Every counter, latency over `window`.
    fn snapshot(&self, window: LatencyWindow) -> Snapshot {
        let Counters {
            input,
            destinations,
        } = self.core.counters_over(window);
        Snapshot {
            listen: self.listen,
            elapsed: self.started.elapsed(),
            input,
            destinations,
            tap_dropped: self.tap_dropped + self.taps.iter().map(TapProducer::dropped).sum::<u64>(),
            not_recorded: self.not_recorded
                + self.taps.iter().map(TapProducer::not_recorded).sum::<u64>(),
        }
    }

    /// Makes the wake-up socket for the listening socket bound now, and puts the
    /// listening socket in blocking mode, so the loop can wait in its receive;
    /// if either fails, the loop only waits in the poll.
    fn open_wake(&mut self) {
        self.wake = None;
        self.recv_timeout = RecvTimeout::default();
        let sender = if WAITS {
            match wait::set_blocking(&self.listener).and_then(|()| wait::wake_pair(self.listen)) {
                Ok((sender, filter)) => {
                    self.wake = Some(filter);
                    Some(sender)
                }
                Err(e) => {
                    debug!("{}: waiting in the poll only: {e}", self.listen);
                    None
                }
            }
        } else {
            None
        };
        if let Ok(mut wake) = self.control.wake.lock() {
            *wake = sender;
        }
    }

    /// The plain case, in which the loop can wait inside the receive: nothing
    /// left unread, no frame waiting in a backlog or for its rate slot.
    fn plain(&self, deadline: Option<Instant>) -> bool {
        self.wake.is_some()
            && !self.unread
            && self.holding_back.is_none()
            && !self.stopping
            && deadline.is_none()
            && self
                .links
                .iter()
                .flatten()
                .all(|link| link.backlog.is_empty())
    }

    /// One turn in the plain case: sleeps inside the receive until a datagram
    /// comes (a packet, or the wake-up of a command) or `until` passes, then
    /// handles what came, the timers and the commands.
    fn wait(&mut self, until: Option<Instant>, mut now: Instant) {
        // A command whose wake-up was lost (a full socket, a moved listener)
        // is not left waiting for the next packet.
        self.commands(now);
        if self.stopping {
            return;
        }
        let timeout = until.map(|d| d.saturating_duration_since(now));
        if timeout != Some(Duration::ZERO) {
            let slack = self.stats_interval.map_or(DEFAULT_WARN_INTERVAL, |i| {
                (i / 20).clamp(MIN_WAIT_SLACK, MAX_WAIT_SLACK)
            });
            let armed = self
                .recv_timeout
                .arm(&self.listener, timeout, slack, self.flowing);
            now = match armed.and_then(|()| self.batch.wait(&self.listener)) {
                Ok(n) => {
                    self.wait_errors = 0;
                    let read = self.handle_batch(n, 0);
                    self.flowing = read.saturating_duration_since(now) < slack;
                    if n == Batch::SIZE {
                        // More may be queued.
                        self.drain(read);
                        Instant::now()
                    } else {
                        self.release_held_back(read);
                        self.warn_input(read);
                        self.check_backlogs();
                        // The sends since took microseconds: no clock read
                        // for them.
                        read
                    }
                }
                Err(e) => {
                    self.flowing = false;
                    self.wait_failed(&e, now);
                    Instant::now()
                }
            };
        }
        // The timers first: a snapshot never shows a latency window that is
        // overdue for its new start.
        self.timers(now);
        self.commands(now);
    }

    /// A receive that failed for a reason of its own: counted, and warned
    /// about at most once per interval.
    fn receive_failed(&mut self, e: &io::Error, now: Instant) {
        self.core.count_recv_error();
        if let Some(more) = self.recv_error.occurred(1, now, self.warn_every) {
            warn!("receive failed on {}: {e}{}", self.listen, Suppressed(more));
        }
    }

    /// A wait in the receive that ended without a datagram: the timeout or a
    /// signal say nothing; another error is counted and warned about as a
    /// drain does, and after [`MAX_RECV_ERRORS`] in a row the loop waits in the
    /// poll for good, so a socket that keeps failing can't make it spin.
    fn wait_failed(&mut self, e: &io::Error, now: Instant) {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => {}
            io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused => {
                trace!("ignored {e} on the listening socket");
            }
            _ => {
                self.receive_failed(e, now);
                self.wait_errors += 1;
                if self.wait_errors == MAX_RECV_ERRORS {
                    warn!(
                        "{}: the receive keeps failing; waiting in the poll from now on",
                        self.listen
                    );
                    self.wake = None;
                    if let Ok(mut wake) = self.control.wake.lock() {
                        *wake = None;
                    }
                }
            }
        }
    }

    /// The earliest moment the loop must wake without an event, given the
    /// core's next `deadline`.
    fn next_wake(&self, deadline: Option<Instant>) -> Option<Instant> {
        match (deadline, self.next_summary) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Receives until the socket is empty, handing each datagram to the core
    /// with when it reached the machine.
    fn drain(&mut self, mut now: Instant) {
        self.unread = false;
        let mut errors = 0;
        let mut read = 0;
        loop {
            match self.batch.recv(&self.listener) {
                Ok(n) => {
                    now = self.handle_batch(n, read);
                    read += n;
                    if n < Batch::SIZE {
                        // A short batch: the queue is empty (Linux's recvmmsg).
                        break;
                    }
                    if read >= DRAIN_BUDGET {
                        // Datagrams still queued: other work (writable
                        // destinations, rate slots, commands) goes first, then
                        // draining resumes.
                        self.unread = true;
                        break;
                    }
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => {}
                    // A closed consumer reported on the listening socket (Windows):
                    // not ours to act on, and never a reason to stop receiving.
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused => {
                        trace!("ignored {e} on the listening socket");
                    }
                    _ => {
                        self.receive_failed(&e, now);
                        // Keep reading what is queued (mio is edge-triggered), but
                        // don't spin on a socket that keeps failing.
                        errors += 1;
                        if errors == MAX_RECV_ERRORS {
                            break;
                        }
                    }
                },
            }
        }
        if !self.unread {
            self.release_held_back(now);
        }
        self.warn_input(now);
        self.check_backlogs();
    }

    /// Whether the last batch (`n` datagrams, after `read` in the same drain,
    /// read at `moment`) shows a backlog: many queued at once, or its oldest
    /// frame already past the smallest `max_age`. Only worth acting on when
    /// some destinations have a limit and others don't ([`hold_back_age`]).
    fn is_backlog(&self, n: usize, read: usize, moment: &Moment) -> bool {
        let Some(smallest) = self.hold_back_age.filter(|_| n > 0) else {
            return false;
        };
        let oldest = moment.received(&self.batch, 0);
        read + n >= BACKLOG_IN_ROW || moment.instant.saturating_duration_since(oldest) > smallest
    }

    /// The listening socket is empty (or a command needs the frames out): the
    /// frames held back go, in order.
    fn release_held_back(&mut self, now: Instant) {
        if self.holding_back.take().is_none() {
            return;
        }
        let clock = self.clock(now);
        for i in 0..self.links.len() {
            self.on_link(DestinationId::from_index(i), |link, report, registry| {
                link.release(report, registry, clock);
            });
        }
    }

    /// Hands the `n` datagrams of the last batch (read after `read` others in
    /// the same drain) to the core, each with when it reached the machine,
    /// then to the taps; returns the moment the batch was read, on the loop's
    /// clock. The wake-up datagram goes to neither: it only ended the wait,
    /// after which the commands are looked at (in the poll, the waker says
    /// so).
    fn handle_batch(&mut self, n: usize, read: usize) -> Instant {
        // Both clocks once per batch, after the receive: the kernel's times
        // are before it.
        let moment = Moment::now();
        let now = moment.instant;
        if self
            .holding_back
            .is_some_and(|since| now.saturating_duration_since(since) > HOLD_BACK_MAX)
        {
            // Under a load the relay can't keep up with, the socket never
            // empties: destinations without a limit still get their frames.
            self.release_held_back(now);
        }
        if self.holding_back.is_none() && self.is_backlog(n, read, &moment) {
            // Destinations with a limit reach the newest frame before those
            // without get the backlog (issue 15).
            self.holding_back = Some(now);
        }
        let Shell {
            batch,
            verdicts,
            core,
            links,
            registry,
            warn_every,
            wake,
            holding_back,
            ..
        } = self;
        let mut sink = Links {
            links,
            registry,
            clock: Clock {
                now,
                warn_every: *warn_every,
            },
            hold_back: holding_back.is_some(),
        };
        for (i, verdict) in verdicts.iter_mut().enumerate().take(n) {
            let (data, from) = batch.datagram(i);
            if wake.is_some_and(|w| w.is_wake(data, from)) {
                *verdict = Verdict::Disallowed;
                continue;
            }
            let arrival = Arrival::new(data, from, moment.received(batch, i));
            *verdict = core.handle(arrival, now, &mut sink);
        }
        // After the sends: a tap's copy never delays a packet.
        if !self.taps.is_empty() {
            self.tap(n, moment);
        }
        now
    }

    /// Copies the admitted datagrams of the last batch (`n` of them, read at
    /// `moment`) into every tap, each with the time it reached the machine,
    /// and lets go of taps whose readers have gone.
    fn tap(&mut self, n: usize, moment: Moment) {
        let Shell {
            taps,
            batch,
            verdicts,
            listen,
            ..
        } = self;
        for tap in taps.iter_mut() {
            for (i, verdict) in verdicts.iter().enumerate().take(n) {
                if verdict.is_admitted() {
                    let (data, from) = batch.datagram(i);
                    let time = batch.received(i).unwrap_or(moment.wall);
                    tap.push(time, from, *listen, data);
                }
            }
        }
        if self.taps.iter().any(TapProducer::is_closed) {
            let gone: u64 = self
                .taps
                .iter()
                .filter(|t| t.is_closed())
                .map(TapProducer::dropped)
                .sum();
            self.tap_dropped += gone;
            self.not_recorded += self
                .taps
                .iter()
                .filter(|t| t.is_closed())
                .map(TapProducer::not_recorded)
                .sum::<u64>();
            self.taps.retain(|t| !t.is_closed());
        }
    }

    /// Warns, at most once per interval each, about datagrams the core counted
    /// as malformed or from a sender outside `listen.allow` since the last look,
    /// and says when `auto` changed how it reads Horizon packets.
    #[inline]
    fn warn_input(&mut self, now: Instant) {
        let stats = self.core.input_stats();
        if stats.malformed != self.warned.malformed
            || stats.disallowed != self.warned.disallowed
            || self.core.horizon() != self.horizon
        {
            self.warn_new_input(now);
        }
    }

    /// [`Shell::warn_input`] when there is something new to consider.
    #[cold]
    #[inline(never)]
    fn warn_new_input(&mut self, now: Instant) {
        let stats = *self.core.input_stats();
        let new = stats.malformed - self.warned.malformed;
        if let (Some(more), Some((len, from))) = (
            self.malformed.occurred(new, now, self.warn_every),
            self.core.last_malformed(),
        ) {
            warn!(
                "a {len}-byte datagram from {from} is not {}; sent only to \
                 destinations with format \"same\"{}",
                Expected(self.core.input()),
                Suppressed(more)
            );
        }
        let new = stats.disallowed - self.warned.disallowed;
        if let (Some(more), Some(from)) = (
            self.disallowed.occurred(new, now, self.warn_every),
            self.core.last_disallowed(),
        ) {
            warn!(
                "dropped a datagram from {from}: not in listen.allow{}",
                Suppressed(more)
            );
        }
        self.warned = stats;
        let horizon = self.core.horizon();
        if horizon != self.horizon {
            if let (Some(before), Some(after)) = (self.horizon, horizon) {
                info!(
                    "listen.format auto: 324-byte packets now read as {}, no longer {}: \
                     the last {AGREEING_PACKETS} that told said so",
                    HorizonReading(after),
                    HorizonReading(before)
                );
            }
            self.horizon = horizon;
        }
    }

    /// What the throttles held back, said once as the relay stops.
    fn last_words(&mut self) {
        let n = self.malformed.unlogged();
        if n > 0 {
            warn!(
                "{} since the last message {} not {}; sent only to destinations with \
                 format \"same\"",
                More(n, "datagram"),
                if n == 1 { "was" } else { "were" },
                Expected(self.core.input())
            );
        }
        let n = self.disallowed.unlogged();
        if n > 0 {
            warn!(
                "dropped {} since the last message from senders not in listen.allow",
                More(n, "datagram")
            );
        }
        let n = self.recv_error.unlogged();
        if n > 0 {
            warn!(
                "{} on {} since the last message",
                More(n, "receive error"),
                self.listen
            );
        }
        for link in self.links.iter_mut().flatten() {
            link.warner.last_word();
        }
    }

    /// In debug builds, checks that each backlog holds what the core counts
    /// as queued for it: every outcome reached the core.
    fn check_backlogs(&self) {
        if cfg!(debug_assertions) {
            for (i, link) in self.links.iter().enumerate() {
                if let Some(link) = link {
                    let id = DestinationId::from_index(i);
                    debug_assert_eq!(
                        link.holding() as u64,
                        self.core.queued(id),
                        "{}: the backlog and the core disagree",
                        link.warner.name
                    );
                }
            }
        }
    }

    /// Runs `f` on destination `id`'s link, with where it reports to the core.
    fn on_link(
        &mut self,
        id: DestinationId,
        f: impl FnOnce(&mut Link, &mut Report<'_>, &Registry),
    ) {
        let Shell {
            links,
            core,
            registry,
            ..
        } = self;
        if let (Some(Some(link)), Some(mut report)) = (links.get_mut(id.index()), core.report(id)) {
            f(link, &mut report, registry);
        }
    }

    fn destination_event(&mut self, id: DestinationId, event: &mio::event::Event, now: Instant) {
        let clock = self.clock(now);
        self.on_link(id, |link, report, registry| {
            if event.is_error() || event.is_read_closed() {
                // Collect a pending ICMP error now, so it doesn't fail the next send.
                if let Ok(Some(e)) = link.socket.take_error() {
                    link.warner.report(&e, report, clock);
                }
            }
            if event.is_writable() {
                link.flush(report, registry, clock);
            }
        });
    }

    /// Frames whose rate slot has come, and the summary when it is due.
    fn timers(&mut self, now: Instant) {
        if self.core.next_deadline().is_some_and(|due| now >= due) {
            let clock = self.clock(now);
            let Shell {
                core,
                links,
                registry,
                holding_back,
                ..
            } = self;
            core.due(
                now,
                &mut Links {
                    links,
                    registry,
                    clock,
                    hold_back: holding_back.is_some(),
                },
            );
            self.check_backlogs();
        }
        if self.next_summary.is_some_and(|due| now >= due) {
            self.last_summary = now;
            self.next_summary = now.checked_add(self.warn_every);
            if let Some(tx) = self
                .summaries
                .as_ref()
                .filter(|_| self.stats_interval.is_some())
            {
                // A reader that is behind misses this one; one that is gone is
                // no reason to stop.
                let _ = tx.try_send(self.snapshot(LatencyWindow::Interval));
            }
            // The summary's own latency window, on the same schedule when
            // summaries are off.
            self.core.new_interval();
        }
    }

    /// Acts on every command waiting.
    #[inline]
    fn commands(&mut self, now: Instant) {
        // Cleared before reading: a message sent meanwhile sets it again.
        if self.control.pending.swap(false, Ordering::Acquire) {
            self.read_commands(now);
        }
    }

    /// Acts on every command in the channel: seldom, so kept out of the
    /// loop's own code.
    #[cold]
    #[inline(never)]
    fn read_commands(&mut self, now: Instant) {
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Stop => self.stopping = true,
                Command::Apply(setup, reply) => {
                    let result = self.apply(*setup, now);
                    match &result {
                        Ok(applied) => info!("configuration applied: {applied}"),
                        Err(e) => error!(
                            "the new configuration was not applied, the previous one runs on: {e}"
                        ),
                    }
                    if let Some(reply) = reply {
                        let _ = reply.send(result);
                    }
                }
                Command::Snapshot(reply) => {
                    let _ = reply.send(self.snapshot(LatencyWindow::Interval));
                }
                Command::Fill(mut snapshot, reply) => {
                    self.snapshot_into(LatencyWindow::Interval, &mut snapshot);
                    // A reader that gave up twice gets this one dropped.
                    let _ = reply.try_send(snapshot);
                }
                Command::Attach(tap) => self.taps.push(*tap),
            }
        }
    }

    /// Takes a new configuration, all of it or (when a socket can't be opened)
    /// none of it: the core plans, the shell opens what the plan opens, then
    /// closes and drops what it closes and drops, and the core commits.
    /// Destinations that did not change keep their sockets, backlogs, filters
    /// and counters.
    fn apply(&mut self, setup: Setup, now: Instant) -> Result<Applied, StartError> {
        // Open what is new first, so that a failure changes nothing.
        // Port 0 in a config means "any": the port bound is as good.
        let listener = if setup.listen == self.configured_listen || setup.listen == self.listen {
            None
        } else {
            Some(bind_listener(
                &self.registry,
                setup.listen,
                &setup.listen_place,
            )?)
        };
        let listen = listener.as_ref().map_or(self.listen, |(_, addr)| *addr);
        let plan = self.core.plan(&setup.routes);
        let mut opened = Vec::new();
        let opening = plan.steps().try_for_each(|(d, step)| match step.action {
            Action::Open(_) => {
                Link::open(step.id, d, listen).map(|link| opened.push((step.id, link)))
            }
            // The same socket stays; a new listen address may make it a loop.
            Action::Keep { .. } => check_loop(d, listen),
        });
        if let Err(e) = opening {
            if let Some((mut socket, _)) = listener {
                let _ = self.registry.deregister(&mut socket);
            }
            return Err(e);
        }
        let mut moved = None;
        if let Some((socket, addr)) = listener {
            // What the old socket still holds is relayed before it closes.
            self.drain(now);
            let mut old = std::mem::replace(&mut self.listener, socket);
            let _ = self.registry.deregister(&mut old);
            moved = Some((self.listen, addr));
            self.listen = addr;
            self.configured_listen = setup.listen;
            self.open_wake();
        }
        // Held-back frames go as they would have, before anything closes.
        self.release_held_back(now);
        for &id in plan.closed() {
            if let Some(mut link) = self.links.get_mut(id.index()).and_then(Option::take) {
                link.clear_backlog(&self.registry);
            }
        }
        for (_, step) in plan.steps() {
            if let Action::Keep {
                discard_backlog: true,
                ..
            } = step.action
            {
                // Frames waiting are in the old format.
                if let Some(Some(link)) = self.links.get_mut(step.id.index()) {
                    link.clear_backlog(&self.registry);
                }
            }
        }
        for (id, link) in opened {
            if self.links.len() <= id.index() {
                self.links.resize_with(id.index() + 1, || None);
            }
            if let Some(mut old) = self.links[id.index()].replace(link) {
                old.clear_backlog(&self.registry);
            }
        }
        let changes = self.core.commit(plan);
        self.hold_back_age = hold_back_age(&self.core);
        for removed in &changes.removed {
            // Its last word: the final summary no longer lists it.
            let s = &removed.stats;
            info!(
                "{} removed: received {}, sent {}{}, dropped {}{}",
                removed.destination.name,
                s.received,
                s.sent,
                crate::stats::Refusals(s),
                s.dropped_total(),
                crate::stats::Drops(s)
            );
        }
        self.horizon = self.core.horizon();
        self.set_stats_interval(setup.stats_interval, now);
        self.check_backlogs();
        Ok(Applied {
            listen: moved,
            changes,
        })
    }

    /// A new summary interval. The schedule stays as it is when the interval
    /// does; otherwise the next summary (or, with summaries off, the end of
    /// the latency window) comes one new interval after the last one (or the
    /// start), and not before now.
    fn set_stats_interval(&mut self, interval: Option<Duration>, now: Instant) {
        if interval == self.stats_interval {
            return;
        }
        self.stats_interval = interval;
        self.warn_every = interval.unwrap_or(DEFAULT_WARN_INTERVAL);
        self.next_summary = self
            .last_summary
            .checked_add(self.warn_every)
            .map(|due| due.max(now));
    }

    /// The relay stops: one last try to send what waits in the backlogs,
    /// without waiting; what is still there, or waits for its rate slot, the
    /// core counts dropped.
    fn finish(&mut self, now: Instant) {
        self.release_held_back(now);
        let clock = self.clock(now);
        for i in 0..self.links.len() {
            self.on_link(DestinationId::from_index(i), |link, report, registry| {
                if !link.backlog.is_empty() {
                    link.flush(report, registry, clock);
                }
            });
        }
        self.check_backlogs();
        for link in self.links.iter_mut().flatten() {
            link.clear_backlog(&self.registry);
        }
        self.core.finish();
        self.last_words();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fanout::Output;
    use crate::stats::DestinationStats;
    use crate::wire::Input;

    const FROM: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 50_000);

    /// A core with one `same` destination, a loopback receiver for it, and its
    /// link.
    fn core_and_link() -> (Fanout, DestinationId, Link, std::net::UdpSocket) {
        core_and_link_aged(None)
    }

    /// As [`core_and_link`], with the destination's `max_age`.
    fn core_and_link_aged(
        max_age: Option<Duration>,
    ) -> (Fanout, DestinationId, Link, std::net::UdpSocket) {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let addr = receiver.local_addr().unwrap();
        let core = Fanout::new(&Routes {
            input: Input::Auto,
            allow: Vec::new(),
            destinations: vec![Destination {
                name: "rig".to_owned(),
                addr_text: addr.to_string(),
                addr,
                output: Output::Same,
                only_race_on: false,
                max_rate: 0,
                max_age,
            }],
        });
        let (id, d) = core.destinations().next().unwrap();
        let listen = "127.0.0.1:5400".parse().unwrap();
        let link = Link::open(id, d, listen).unwrap();
        (core, id, link, receiver)
    }

    /// Stands in for a socket that would block: every frame goes to the
    /// link's backlog, as `Link::send` does on `WouldBlock`.
    struct WouldBlock<'a>(&'a mut Link);

    impl Sink for WouldBlock<'_> {
        fn deliver(
            &mut self,
            _: DestinationId,
            bytes: &[u8],
            received: Instant,
            report: &mut Report<'_>,
        ) -> Outcome {
            self.0.queue(bytes, received, report)
        }
    }

    /// Sends through the link, as the shell does.
    struct Sends<'a>(&'a mut Link, &'a Registry, Clock);

    impl Sink for Sends<'_> {
        fn deliver(
            &mut self,
            _: DestinationId,
            bytes: &[u8],
            received: Instant,
            report: &mut Report<'_>,
        ) -> Outcome {
            self.0.send(bytes, received, report, self.1, self.2)
        }
    }

    fn stats(core: &Fanout) -> DestinationStats {
        core.counters().destinations[0].stats
    }

    #[test]
    fn a_full_backlog_keeps_the_newest_frames_and_sends_them_oldest_first() {
        let poll = Poll::new().unwrap();
        let (mut core, id, mut link, receiver) = core_and_link();
        let now = Instant::now();
        let extra = 3u8;
        for i in 0..BACKLOG_FRAMES as u8 + extra {
            core.handle_at(&[i; 324], FROM, now, &mut WouldBlock(&mut link));
        }
        let s = stats(&core);
        assert_eq!(s.dropped(DropReason::Backlog), u64::from(extra));
        assert_eq!(s.held, BACKLOG_FRAMES as u64);
        assert!(s.is_balanced(), "{s:?}");
        core.handle_at(
            &[0xFF; FRAME_CAPACITY + 1],
            FROM,
            now,
            &mut WouldBlock(&mut link),
        );
        assert_eq!(
            stats(&core).dropped(DropReason::Backlog),
            u64::from(extra) + 1,
            "too large to hold"
        );

        let clock = Clock {
            now,
            warn_every: DEFAULT_WARN_INTERVAL,
        };
        link.watch(poll.registry(), true);
        assert!(link.watched);
        link.flush(&mut core.report(id).unwrap(), poll.registry(), clock);
        assert!(link.backlog.is_empty());
        assert!(!link.watched, "a flushed link is no longer watched");
        let s = stats(&core);
        assert_eq!((s.sent, s.held), (BACKLOG_FRAMES as u64, 0));
        assert!(s.is_balanced(), "{s:?}");
        let mut buf = [0u8; 2048];
        for i in extra..BACKLOG_FRAMES as u8 + extra {
            let n = receiver.recv(&mut buf).unwrap();
            assert_eq!(n, 324);
            assert!(buf[..n].iter().all(|&b| b == i), "frame {i} out of order");
        }
        // With frames waiting, a new frame goes behind them, never ahead.
        core.handle_at(&[0xA1; 311], FROM, now, &mut WouldBlock(&mut link));
        let registry = poll.registry();
        core.handle_at(
            &[0xA2; 232],
            FROM,
            now,
            &mut Sends(&mut link, registry, clock),
        );
        assert_eq!(receiver.recv(&mut buf).unwrap(), 311);
        assert_eq!(receiver.recv(&mut buf).unwrap(), 232);
        assert_eq!(stats(&core).sent, BACKLOG_FRAMES as u64 + 2);

        // Removed while a frame waits: the plan closes its link, and the core
        // counts the frame before it returns the final counters.
        core.handle_at(&[0xA3; 311], FROM, now, &mut WouldBlock(&mut link));
        assert_eq!(core.queued(id), 1);
        let plan = core.plan(&Routes {
            input: Input::Auto,
            allow: Vec::new(),
            destinations: Vec::new(),
        });
        assert_eq!(plan.closed(), [id]);
        link.clear_backlog(registry);
        let removed = &core.commit(plan).removed[0].stats;
        assert_eq!(
            removed.dropped(DropReason::Backlog),
            u64::from(extra) + 2,
            "{removed:?}"
        );
        assert_eq!(removed.held, 0);
        assert!(removed.is_balanced(), "{removed:?}");
    }

    /// Issue 15: frames that waited in the backlog past `max_age` are dropped
    /// and counted stale when it is flushed; the fresh ones go, with their
    /// latency from their receive time.
    #[test]
    fn a_backlog_flush_drops_frames_grown_older_than_max_age() {
        let poll = Poll::new().unwrap();
        let ms = Duration::from_millis;
        let (mut core, id, mut link, receiver) = core_and_link_aged(Some(ms(50)));
        // The synthetic clock runs 200 ms behind: the sends' latencies (read
        // on the real clock) are over 100 ms.
        let t0 = Instant::now() - ms(200);
        for (i, at) in [0, 10, 60, 70].into_iter().enumerate() {
            let packet = [i as u8; 324];
            let arrival = Arrival::new(&packet, FROM, t0 + ms(at));
            core.handle(arrival, t0 + ms(at), &mut WouldBlock(&mut link));
        }
        assert_eq!(stats(&core).held, 4);
        let clock = Clock {
            now: t0 + ms(100),
            warn_every: DEFAULT_WARN_INTERVAL,
        };
        link.flush(&mut core.report(id).unwrap(), poll.registry(), clock);
        assert!(link.backlog.is_empty());
        let s = stats(&core);
        assert_eq!((s.sent, s.dropped(DropReason::Stale), s.held), (2, 2, 0));
        assert!(s.is_balanced(), "{s:?}");
        let mut buf = [0u8; 2048];
        for i in [2u8, 3] {
            let n = receiver.recv(&mut buf).unwrap();
            assert!(buf[..n].iter().all(|&b| b == i), "frame {i}");
        }
        let latency = core.counters().destinations[0].latency;
        assert_eq!(latency.count, 2);
        assert!(latency.max >= ms(100), "from the receive time: {latency:?}");
    }

    /// Issue 15: while a backlog is drained, a destination with `max_age`
    /// gets the newest frame before one without gets any of the backlog;
    /// released, that one gets every frame, in order, none dropped. Held-back
    /// frames that fill their rings are released, not dropped.
    #[test]
    fn a_drain_holds_back_frames_for_destinations_without_max_age() {
        let poll = Poll::new().unwrap();
        let ms = Duration::from_millis;
        let receivers: Vec<_> = (0..2)
            .map(|_| {
                let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                r.set_nonblocking(true).unwrap();
                r
            })
            .collect();
        let destination = |name: &str, r: &std::net::UdpSocket, max_age| {
            let addr = r.local_addr().unwrap();
            Destination {
                name: name.to_owned(),
                addr_text: addr.to_string(),
                addr,
                output: Output::Same,
                only_race_on: false,
                max_rate: 0,
                max_age,
            }
        };
        let mut core = Fanout::new(&Routes {
            input: Input::Auto,
            allow: Vec::new(),
            destinations: vec![
                destination("rig", &receivers[0], Some(ms(50))),
                destination("plain", &receivers[1], None),
            ],
        });
        let listen = "127.0.0.1:5400".parse().unwrap();
        let mut links: Vec<Option<Link>> = core
            .destinations()
            .map(|(id, d)| Some(Link::open(id, d, listen).unwrap()))
            .collect();
        let [rig, plain] = [0, 1].map(DestinationId::from_index);
        // A stall: 30 frames 10 ms apart, read 300 ms after the first came.
        let t0 = Instant::now() - ms(400);
        let now = t0 + ms(300);
        let clock = Clock {
            now,
            warn_every: DEFAULT_WARN_INTERVAL,
        };
        for i in 0..30u8 {
            let packet = [i; 324];
            let arrival = Arrival::new(&packet, FROM, t0 + ms(10) * u32::from(i));
            let mut sink = Links {
                links: &mut links,
                registry: poll.registry(),
                clock,
                hold_back: true,
            };
            core.handle(arrival, now, &mut sink);
        }
        let mut buf = [0u8; 2048];
        let mut got = |r: &std::net::UdpSocket| {
            let mut frames = Vec::new();
            while let Ok(n) = r.recv(&mut buf) {
                frames.push(buf[..n][0]);
            }
            frames
        };
        // Frames 25..30 are within 50 ms of `now`.
        assert_eq!(got(&receivers[0]), (25..30).collect::<Vec<_>>());
        assert_eq!(
            got(&receivers[1]),
            Vec::<u8>::new(),
            "plain's frames are held back"
        );
        assert_eq!(core.queued(plain), 30);
        let counts = |core: &Fanout, i: usize| core.counters().destinations[i].stats;
        assert_eq!(counts(&core, 0).dropped(DropReason::Stale), 25);

        let plain_link = links[1].as_mut().unwrap();
        assert_eq!(plain_link.holding(), 30);
        plain_link.release(&mut core.report(plain).unwrap(), poll.registry(), clock);
        assert_eq!(got(&receivers[1]), (0..30).collect::<Vec<_>>());
        for (i, s) in [counts(&core, 0), counts(&core, 1)].iter().enumerate() {
            assert!(s.is_balanced(), "{i}: {s:?}");
            assert_eq!(s.held, 0);
        }
        assert_eq!(counts(&core, 1).sent, 30);
        assert_eq!(core.queued(rig), 0);

        // Rings full: the held-back frames go first, nothing is dropped.
        let extra = 5;
        for i in 0..HELD_BACK_FRAMES + extra {
            let packet = [i as u8; 16];
            let mut sink = Links {
                links: &mut links,
                registry: poll.registry(),
                clock,
                hold_back: true,
            };
            core.handle(Arrival::new(&packet, FROM, now), now, &mut sink);
        }
        let s = counts(&core, 1);
        assert_eq!(
            (s.sent, s.held, s.dropped_total()),
            (30 + HELD_BACK_FRAMES as u64, extra as u64, 0)
        );
        assert_eq!(links[1].as_ref().unwrap().holding(), extra);
    }

    #[test]
    fn throttle_counts_occurrences_not_calls() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let every = s(10);
        let mut t = Throttle::default();
        assert_eq!(t.occurred(1, t0, every), Some(0));
        assert_eq!(t.occurred(1, t0 + s(1), every), None, "held back");
        // Many drains with nothing new (issue 17: they were counted).
        for i in 2..30 {
            assert_eq!(t.occurred(0, t0 + s(i), every), None);
        }
        assert_eq!(
            t.occurred(1, t0 + s(30), every),
            Some(1),
            "the latest, and 1 more held back"
        );
        assert_eq!(t.occurred(3, t0 + s(40), every), Some(2), "3 at once");
        assert_eq!(t.occurred(1, t0 + s(41), every), None);
        assert_eq!(t.unlogged(), 1, "for the last word");
        assert_eq!(t.unlogged(), 0);
    }

    #[test]
    fn tokens_name_the_listener_the_waker_and_each_destination() {
        assert_eq!(destination_of(LISTENER), None);
        assert_eq!(destination_of(WAKER), None);
        for i in [0, 1, 7, 1_000] {
            let id = DestinationId::from_index(i);
            let token = token_of(id);
            assert!(token != LISTENER && token != WAKER);
            assert_eq!(destination_of(token), Some(id));
        }
    }

    #[test]
    fn applied_lists_the_listen_address_first() {
        let applied = Applied {
            listen: Some((
                "127.0.0.1:5400".parse().unwrap(),
                "127.0.0.1:5401".parse().unwrap(),
            )),
            changes: Changes {
                allow: true,
                ..Changes::default()
            },
        };
        assert_eq!(
            applied.to_string(),
            "~ listen: 127.0.0.1:5400 -> 127.0.0.1:5401, ~ listen.allow"
        );
        assert!(!applied.is_empty());
        assert_eq!(Applied::default().to_string(), "no changes");
        assert!(Applied::default().is_empty());
    }

    #[test]
    fn a_new_summary_interval_keeps_the_phase() {
        let config = Config::from_toml(
            "[listen]\naddr = \"127.0.0.1:0\"\n[stats]\ninterval = 3\n\
             [[destination]]\naddr = \"127.0.0.1:9\"\n",
            "phase.toml",
            &crate::config::Overrides::default(),
        )
        .unwrap();
        let mut relay = Relay::bind(&config).unwrap();
        let shell = &mut relay.shell;
        let s = Duration::from_secs;
        let t0 = shell.last_summary;
        assert_eq!(shell.next_summary, Some(t0 + s(3)));
        shell.set_stats_interval(Some(s(3)), t0 + s(2));
        assert_eq!(
            shell.next_summary,
            Some(t0 + s(3)),
            "a reload moves nothing"
        );
        shell.set_stats_interval(Some(s(10)), t0 + s(2));
        assert_eq!(
            shell.next_summary,
            Some(t0 + s(10)),
            "one new interval after the last summary"
        );
        shell.set_stats_interval(Some(s(1)), t0 + s(5));
        assert_eq!(shell.next_summary, Some(t0 + s(5)), "overdue: now");
        shell.set_stats_interval(None, t0 + s(6));
        assert_eq!(
            shell.next_summary,
            Some(t0 + DEFAULT_WARN_INTERVAL),
            "summaries off: the latency window keeps its schedule"
        );
        shell.set_stats_interval(Some(s(2)), t0 + s(7));
        assert_eq!(shell.next_summary, Some(t0 + s(7)));
    }

    /// Issue 15: with summaries off, the latency the dashboard and the page
    /// show (the interval's) still starts afresh every
    /// [`DEFAULT_WARN_INTERVAL`], as it does at each summary when they are on;
    /// the run's figures keep everything.
    #[test]
    fn with_summaries_off_the_latency_window_still_starts_afresh() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let config = Config::from_toml(
            &format!(
                "[listen]\naddr = \"127.0.0.1:0\"\n[stats]\ninterval = 0\n\
                 [[destination]]\naddr = \"{}\"\n",
                receiver.local_addr().unwrap()
            ),
            "window.toml",
            &crate::config::Overrides::default(),
        )
        .unwrap();
        let mut relay = Relay::bind(&config).unwrap();
        let t0 = relay.shell.last_summary;
        assert_eq!(relay.shell.next_summary, Some(t0 + DEFAULT_WARN_INTERVAL));
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.send_to(&[7; 324], relay.local_addr()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while relay.input_stats().received == 0 && Instant::now() < deadline {
            relay.poll_once(Some(Duration::from_millis(50)));
        }
        let mut buf = [0u8; 512];
        assert_eq!(receiver.recv(&mut buf).unwrap(), 324);
        let count =
            |relay: &Relay, window| relay.shell.snapshot(window).destinations[0].latency.count;
        assert_eq!(count(&relay, LatencyWindow::Interval), 1);

        let due = relay.shell.next_summary.unwrap();
        relay.shell.timers(due);
        assert_eq!(count(&relay, LatencyWindow::Interval), 0, "a new window");
        assert_eq!(count(&relay, LatencyWindow::Run), 1, "the run keeps it");
        assert_eq!(
            relay.shell.next_summary,
            Some(due + DEFAULT_WARN_INTERVAL),
            "and the next one after the same interval"
        );
    }

    #[test]
    fn port_0_and_the_port_it_bound_are_the_same_listen_address() {
        let toml = |listen: &str| {
            Config::from_toml(
                &format!(
                    "[listen]\naddr = \"{listen}\"\n[[destination]]\naddr = \"127.0.0.1:9\"\n"
                ),
                "listen.toml",
                &crate::config::Overrides::default(),
            )
            .unwrap()
        };
        let mut relay = Relay::bind(&toml("127.0.0.1:0")).unwrap();
        let bound = relay.local_addr();
        for listen in [
            bound.to_string(),
            "127.0.0.1:0".to_owned(),
            bound.to_string(),
        ] {
            let applied = relay.apply(&toml(&listen)).unwrap();
            assert_eq!(applied.listen, None, "{listen}: {applied}");
            assert_eq!(relay.local_addr(), bound);
        }
    }
}
