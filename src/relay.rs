//! The relay's shell: a single-threaded mio loop that owns every socket, timer
//! and hand-off, around the pure fan-out core ([`Fanout`]).
//!
//! One packet's way: `poll` wakes the loop; the listening socket is drained in
//! batches ([`Batch`]: one `recvmmsg` on Linux); the core decides, per
//! destination, what to send; the shell sends it on that destination's own
//! connected socket. At the game's rate that is the floor of system calls: the
//! wait, one receive, one send per destination. Per packet nothing is
//! allocated, nothing is logged above `trace!`, and no error is fatal: a send
//! error is counted against its destination alone, a bad datagram against the
//! input, a failed `poll` is logged and the loop goes on.
//!
//! Each destination has its own connected UDP socket, so the ICMP "port
//! unreachable" of a closed consumer lands on that socket only (it comes back
//! from its next send), never on the listening one (which on Windows would fail
//! its next `recv` with WSAECONNRESET). When a send would block, up to
//! [`BACKLOG_FRAMES`] of the newest frames wait in a preallocated ring, and only
//! then is the socket registered with the poll, until the ring is flushed.
//!
//! Other threads talk to the loop only through [`Control`]: a message on a
//! channel plus a wake-up of the poll's [`Waker`]; the loop acts on it between
//! packets. Summaries leave the loop as [`Snapshot`]s on a bounded channel
//! ([`Relay::summaries`]), so the loop never waits for a terminal or a pipe.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use log::{debug, error, info, trace, warn};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use ringbuf::traits::{Consumer, Observer, RingBuffer};
use ringbuf::LocalRb;

use crate::config::{Config, Destination, Input};
use crate::fanout::{Changes, DestinationId, Fanout, Frame, Sink};
use crate::recv::Batch;
use crate::socket;
use crate::stats::{DestinationStats, DropReason, InputStats, SendErrorKind, Snapshot};
use crate::tap::TapProducer;
use crate::wire::Format;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// Destination `id` is registered as `Token(FIRST_DESTINATION + id.index())`.
const FIRST_DESTINATION: usize = 2;

pub use crate::fanout::FRAME_CAPACITY;
pub use crate::recv::MAX_DATAGRAM;
/// Newest frames kept per destination while its socket would block.
pub const BACKLOG_FRAMES: usize = 8;
/// Datagrams read per drain before other work gets a turn.
const DRAIN_BUDGET: usize = 256;
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

/// Logs a repeated problem at most once per interval and counts the rest.
#[derive(Debug, Default)]
struct Throttle {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    /// `Some(n)` when a message may be logged now, `n` being how many were
    /// suppressed since the last one.
    fn ready(&mut self, now: Instant, every: Duration) -> Option<u64> {
        if self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= every)
        {
            self.last = Some(now);
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

/// How many messages a throttle held back, for the end of the next one.
struct Suppressed(u64);

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} more like this since the last message)"),
        }
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
    /// Counts a send error (from `send`, or collected from the socket after an
    /// ICMP message) and warns at most once per interval.
    fn report(
        &mut self,
        e: &io::Error,
        stats: &mut DestinationStats,
        clock: Clock,
    ) -> SendErrorKind {
        let kind = SendErrorKind::of(e);
        stats.send_errors.add(kind);
        if let Some(more) = self.throttle.ready(clock.now, clock.warn_every) {
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
}

/// One send, counting the outcome. A refused send is tried once more: Linux
/// reports an earlier frame's ICMP on the next send and drops that frame, so the
/// retry is what delivers the first frame after a consumer comes back.
fn try_send(
    socket: &UdpSocket,
    warner: &mut Warner,
    bytes: &[u8],
    stats: &mut DestinationStats,
    clock: Clock,
) -> Sent {
    let mut retried = false;
    loop {
        match socket.send(bytes) {
            Ok(_) => {
                stats.sent += 1;
                return Sent::Yes;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Sent::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let kind = warner.report(&e, stats, clock);
                if kind == SendErrorKind::Refused && !retried {
                    retried = true;
                    continue;
                }
                stats.drop(DropReason::SendError);
                return Sent::Failed;
            }
        }
    }
}

/// Refuses a destination that is this computer on the port the relay listens
/// on (`listen`, as bound): packets would loop. The one rule is
/// [`socket::is_loop`]; config validation applies it too, but can't know a
/// port 0 will be bound.
fn check_loop(d: &Destination, listen: SocketAddr) -> Result<(), StartError> {
    if socket::is_loop(listen, d.addr) {
        return Err(StartError::Loop {
            name: d.name.clone(),
            addr: d.addr,
        });
    }
    Ok(())
}

/// A destination's socket and backlog.
struct Link {
    socket: UdpSocket,
    token: Token,
    backlog: LocalRb<ringbuf::storage::Heap<Frame>>,
    /// Registered with the poll for writability: only while frames wait.
    watched: bool,
    warner: Warner,
}

impl Link {
    /// Opens the connected socket for `d`, refusing one that would loop back to
    /// `listen`.
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
            token: Token(FIRST_DESTINATION + id.index()),
            backlog: LocalRb::new(BACKLOG_FRAMES),
            watched: false,
            warner: Warner {
                name: d.name.clone(),
                addr: d.addr,
                throttle: Throttle::default(),
            },
        })
    }

    /// Sends `bytes` now, or queues them behind frames already waiting.
    fn send(
        &mut self,
        bytes: &[u8],
        stats: &mut DestinationStats,
        registry: &Registry,
        clock: Clock,
    ) {
        if !self.backlog.is_empty() {
            self.queue(bytes, stats);
            self.flush(stats, registry, clock);
            return;
        }
        match try_send(&self.socket, &mut self.warner, bytes, stats, clock) {
            Sent::Yes | Sent::Failed => {}
            Sent::WouldBlock => {
                self.queue(bytes, stats);
                self.watch(registry, true);
            }
        }
    }

    /// Keeps `bytes` for later, dropping the oldest waiting frame when full.
    fn queue(&mut self, bytes: &[u8], stats: &mut DestinationStats) {
        let mut frame = Frame::EMPTY;
        if !frame.store(bytes) {
            stats.drop(DropReason::Backlog);
            return;
        }
        if self.backlog.push_overwrite(frame).is_some() {
            stats.drop(DropReason::Backlog);
        }
    }

    /// Sends waiting frames, oldest first, straight from the ring, until the
    /// socket would block; the socket is watched only while frames remain.
    fn flush(&mut self, stats: &mut DestinationStats, registry: &Registry, clock: Clock) {
        let Link {
            socket,
            backlog,
            warner,
            ..
        } = self;
        while let Some(frame) = backlog.first() {
            match try_send(socket, warner, frame.bytes(), stats, clock) {
                Sent::WouldBlock => break,
                Sent::Yes | Sent::Failed => {
                    backlog.try_pop();
                }
            }
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

    /// Frames still waiting, dropped now (the destination changed or went away).
    fn discard_backlog(&mut self, stats: &mut DestinationStats) {
        let waiting = self.backlog.occupied_len() as u64;
        self.backlog.clear();
        stats.dropped[DropReason::Backlog as usize] += waiting;
    }
}

/// The shell's side of the core's [`Sink`]: each destination's link.
struct Links<'a> {
    links: &'a mut [Option<Link>],
    registry: &'a Registry,
    clock: Clock,
}

impl Sink for Links<'_> {
    fn deliver(&mut self, id: DestinationId, bytes: &[u8], stats: &mut DestinationStats) {
        match self.links.get_mut(id.index()) {
            Some(Some(link)) => link.send(bytes, stats, self.registry, self.clock),
            // Every destination of the core has a link (see `Shell::apply`).
            _ => stats.drop(DropReason::SendError),
        }
    }
}

/// Why the relay could not start.
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
            } => {
                write!(f, "{place}: cannot listen on {addr}: ")?;
                match source.kind() {
                    io::ErrorKind::AddrInUse => write!(
                        f,
                        "port {} is already in use. Another forza-relay, or a tool such as \
                         SimHub, may be listening there: stop it, or choose another port \
                         (and point the game's Data Out at it).",
                        addr.port()
                    ),
                    io::ErrorKind::AddrNotAvailable => write!(
                        f,
                        "{} is not an address of this computer. Use 0.0.0.0 to listen on \
                         every interface.",
                        addr.ip()
                    ),
                    io::ErrorKind::PermissionDenied => write!(
                        f,
                        "permission denied ({source}). Ports below 1024 need administrator \
                         rights, and Windows reserves some ranges: choose another port."
                    ),
                    _ => write!(f, "{source}"),
                }
            }
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

/// What other threads ask of the loop.
enum Command {
    /// Finish: `run` returns its final snapshot.
    Stop,
    /// Take this configuration (a reload), and say how it went if asked.
    Apply(
        Box<Config>,
        Option<mpsc::Sender<Result<Changes, StartError>>>,
    ),
    /// Reply with a snapshot of every counter.
    Snapshot(mpsc::Sender<Snapshot>),
    /// Copy every datagram received into this tap from now on.
    Attach(Box<TapProducer>),
}

/// Talks to a running relay from any thread: a message, then a wake-up.
#[derive(Clone)]
pub struct Control {
    commands: mpsc::Sender<Command>,
    waker: Arc<Waker>,
}

impl Control {
    fn send(&self, command: Command) {
        // A relay that is gone has nothing left to do with the message.
        if self.commands.send(command).is_ok() {
            // If waking fails the loop still sees the message at its next wake-up.
            let _ = self.waker.wake();
        }
    }

    /// Asks the loop to finish; `run` then returns its final snapshot.
    pub fn stop(&self) {
        self.send(Command::Stop);
    }

    /// Asks the loop to take `config`, matching destinations by name: those
    /// that did not change lose nothing (see [`Fanout::apply`]).
    pub fn apply(&self, config: Config) {
        self.send(Command::Apply(Box::new(config), None));
    }

    /// As [`Control::apply`], then waits (at most `timeout`) for what changed,
    /// or why nothing did; `None` when the loop didn't answer in time.
    pub fn apply_and_wait(
        &self,
        config: Config,
        timeout: Duration,
    ) -> Option<Result<Changes, StartError>> {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Apply(Box::new(config), Some(tx)));
        rx.recv_timeout(timeout).ok()
    }

    /// Copies every datagram received from now on into `tap` (see
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

    /// As [`Control::apply`], returning where the loop will say how it went:
    /// the caller can wait as long as it likes, and a closed channel means the
    /// relay is gone (its loop will never answer).
    pub fn apply_with_reply(&self, config: Config) -> mpsc::Receiver<Result<Changes, StartError>> {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Apply(Box::new(config), Some(tx)));
        rx
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
    core: Fanout,
    /// Indexed by [`DestinationId`], as the core's destinations are.
    links: Vec<Option<Link>>,
    commands: mpsc::Receiver<Command>,
    control: Control,
    stopping: bool,
    /// The last drain stopped at its budget with datagrams still queued.
    unread: bool,
    started: Instant,
    stats_interval: Option<Duration>,
    next_summary: Option<Instant>,
    summaries: Option<mpsc::SyncSender<Snapshot>>,
    /// Readers of every datagram received (the capture writer, the dashboard).
    taps: Vec<TapProducer>,
    /// Datagrams dropped by taps whose readers have gone.
    tap_dropped: u64,
    warn_every: Duration,
    /// Input counters when their warnings were last considered.
    warned: InputStats,
    malformed: Throttle,
    disallowed: Throttle,
    recv_error: Throttle,
    poll_error: Throttle,
}

impl Relay {
    /// Opens every socket of `config`. Nothing is left half-started on error.
    pub fn bind(config: &Config) -> Result<Relay, StartError> {
        let poll = Poll::new().map_err(StartError::Poll)?;
        let registry = poll.registry().try_clone().map_err(StartError::Poll)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(StartError::Poll)?);
        let (listener, listen) = bind_listener(&registry, config)?;
        let core = Fanout::new(config);
        let mut links = Vec::new();
        for (id, d) in core.destinations() {
            let link = Link::open(id, d, listen)?;
            links.resize_with(links.len().max(id.index() + 1), || None);
            links[id.index()] = Some(link);
        }
        let (tx, commands) = mpsc::channel();
        let now = Instant::now();
        Ok(Relay {
            poll,
            events: Events::with_capacity(EVENTS),
            shell: Shell {
                registry,
                listener,
                listen,
                configured_listen: config.listen,
                batch: Batch::new(),
                core,
                links,
                commands,
                control: Control {
                    commands: tx,
                    waker,
                },
                stopping: false,
                unread: false,
                started: now,
                stats_interval: config.stats_interval,
                next_summary: config.stats_interval.and_then(|i| now.checked_add(i)),
                summaries: None,
                taps: Vec::new(),
                tap_dropped: 0,
                warn_every: config.stats_interval.unwrap_or(DEFAULT_WARN_INTERVAL),
                warned: InputStats::default(),
                malformed: Throttle::default(),
                disallowed: Throttle::default(),
                recv_error: Throttle::default(),
                poll_error: Throttle::default(),
            },
        })
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

    /// Runs until stopped, then returns the final snapshot.
    pub fn run(&mut self) -> Snapshot {
        while !self.shell.stopping {
            let timeout = self
                .shell
                .next_wake()
                .map(|d| d.saturating_duration_since(Instant::now()));
            self.poll_once(timeout);
        }
        // A frame still waiting for its rate slot will never go: count it.
        self.shell.core.finish();
        self.snapshot()
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
                if let Some(more) = shell.poll_error.ready(now, shell.warn_every) {
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
                Token(t) => shell.destination_event(t - FIRST_DESTINATION, event, now),
            }
        }
        if unread {
            shell.drain(now);
        }
        shell.timers(now);
    }

    /// Copies every datagram received from now on into `tap`, as
    /// [`Control::attach`] does from another thread.
    pub fn attach(&mut self, tap: TapProducer) {
        self.shell.taps.push(tap);
    }

    /// Takes `config` now, as [`Control::apply`] does from another thread: all of
    /// it, or (when a socket can't be opened) none of it, returning why.
    pub fn apply(&mut self, config: &Config) -> Result<Changes, StartError> {
        self.shell.apply(config, Instant::now())
    }

    /// Input counters so far.
    pub fn input_stats(&self) -> InputStats {
        *self.shell.core.input_stats()
    }

    /// Every counter so far.
    pub fn snapshot(&self) -> Snapshot {
        self.shell.snapshot()
    }
}

/// Binds and registers the listening socket of `config`.
fn bind_listener(
    registry: &Registry,
    config: &Config,
) -> Result<(UdpSocket, SocketAddr), StartError> {
    let (std_listener, granted) =
        socket::bind_listener(config.listen).map_err(|source| StartError::Listen {
            addr: config.listen,
            place: config.listen_place.clone(),
            source,
        })?;
    let mut listener = UdpSocket::from_std(std_listener);
    let listen = listener.local_addr().unwrap_or(config.listen);
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

impl Shell {
    fn clock(&self, now: Instant) -> Clock {
        Clock {
            now,
            warn_every: self.warn_every,
        }
    }

    fn snapshot(&self) -> Snapshot {
        let mut snapshot = self.core.snapshot(self.listen, self.started.elapsed());
        snapshot.tap_dropped =
            self.tap_dropped + self.taps.iter().map(TapProducer::dropped).sum::<u64>();
        snapshot
    }

    /// The earliest moment the loop must wake without an event.
    fn next_wake(&self) -> Option<Instant> {
        match (self.core.next_deadline(), self.next_summary) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Receives until the socket is empty, handing each datagram to the core.
    fn drain(&mut self, mut now: Instant) {
        self.unread = false;
        let mut errors = 0;
        let mut read = 0;
        loop {
            match self.batch.recv(&self.listener) {
                Ok(n) => {
                    let Shell {
                        batch,
                        core,
                        links,
                        registry,
                        warn_every,
                        ..
                    } = self;
                    let mut sink = Links {
                        links,
                        registry,
                        clock: Clock {
                            now,
                            warn_every: *warn_every,
                        },
                    };
                    for i in 0..n {
                        let (data, from) = batch.datagram(i);
                        core.handle(data, from, now, &mut sink);
                    }
                    // After the sends: a tap's copy never delays a packet.
                    if !self.taps.is_empty() {
                        self.tap(n);
                    }
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
                    now = Instant::now();
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
                        self.core.count_recv_error();
                        if let Some(more) = self.recv_error.ready(now, self.warn_every) {
                            warn!("receive failed on {}: {e}{}", self.listen, Suppressed(more));
                        }
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
        self.warn_input(now);
    }

    /// Copies the `n` datagrams of the last batch into every tap, and lets go of
    /// taps whose readers have gone.
    fn tap(&mut self, n: usize) {
        let time = SystemTime::now();
        for tap in &mut self.taps {
            for i in 0..n {
                let (data, from) = self.batch.datagram(i);
                tap.push(time, from, self.listen, data);
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
            self.taps.retain(|t| !t.is_closed());
        }
    }

    /// Warns, at most once per interval each, about datagrams the core counted
    /// as malformed or from a sender outside `listen.allow` since the last look.
    fn warn_input(&mut self, now: Instant) {
        let stats = *self.core.input_stats();
        if stats.malformed != self.warned.malformed {
            if let (Some(more), Some((len, from))) = (
                self.malformed.ready(now, self.warn_every),
                self.core.last_malformed(),
            ) {
                // Messages since the last one, less the one this reports.
                let more = more + (stats.malformed - self.warned.malformed - 1);
                warn!(
                    "a {len}-byte datagram from {from} is not {}; sent only to \
                     destinations with format \"same\"{}",
                    Expected(self.core.input()),
                    Suppressed(more)
                );
                self.warned.malformed = stats.malformed;
            }
        }
        if stats.disallowed != self.warned.disallowed {
            if let (Some(more), Some(from)) = (
                self.disallowed.ready(now, self.warn_every),
                self.core.last_disallowed(),
            ) {
                let more = more + (stats.disallowed - self.warned.disallowed - 1);
                warn!(
                    "dropped a datagram from {from}: not in listen.allow{}",
                    Suppressed(more)
                );
                self.warned.disallowed = stats.disallowed;
            }
        }
    }

    fn destination_event(&mut self, index: usize, event: &mio::event::Event, now: Instant) {
        let clock = self.clock(now);
        let id = DestinationId::from_index(index);
        let (Some(Some(link)), Some(stats)) = (self.links.get_mut(index), self.core.stats_mut(id))
        else {
            return;
        };
        if event.is_error() || event.is_read_closed() {
            // Collect a pending ICMP error now, so it doesn't fail the next send.
            if let Ok(Some(e)) = link.socket.take_error() {
                link.warner.report(&e, stats, clock);
            }
        }
        if event.is_writable() {
            link.flush(stats, &self.registry, clock);
        }
    }

    /// Frames whose rate slot has come, and the summary when it is due.
    fn timers(&mut self, now: Instant) {
        if self.core.next_deadline().is_some_and(|due| now >= due) {
            let clock = self.clock(now);
            let Shell {
                core,
                links,
                registry,
                ..
            } = self;
            core.due(
                now,
                &mut Links {
                    links,
                    registry,
                    clock,
                },
            );
        }
        if self.next_summary.is_some_and(|due| now >= due) {
            self.next_summary = self.stats_interval.and_then(|i| now.checked_add(i));
            if let Some(tx) = &self.summaries {
                // A reader that is behind misses this one; one that is gone is
                // no reason to stop.
                let _ = tx.try_send(self.snapshot());
            }
        }
    }

    /// Acts on every command waiting.
    fn commands(&mut self, now: Instant) {
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Stop => self.stopping = true,
                Command::Apply(config, reply) => {
                    let result = self.apply(&config, now);
                    match &result {
                        Ok(changes) => info!("configuration applied: {changes}"),
                        Err(e) => error!(
                            "the new configuration was not applied, the previous one runs on: {e}"
                        ),
                    }
                    if let Some(reply) = reply {
                        let _ = reply.send(result);
                    }
                }
                Command::Snapshot(reply) => {
                    let _ = reply.send(self.snapshot());
                }
                Command::Attach(tap) => self.taps.push(*tap),
            }
        }
    }

    /// Takes a new configuration, all of it or (when a socket can't be opened)
    /// none of it. Destinations that did not change keep their sockets, backlogs,
    /// filters and counters.
    fn apply(&mut self, config: &Config, now: Instant) -> Result<Changes, StartError> {
        // Open what is new first, so that a failure changes nothing.
        // Port 0 in a config means "any": the port bound is as good.
        let listener = if config.listen == self.configured_listen || config.listen == self.listen {
            None
        } else {
            Some(bind_listener(&self.registry, config)?)
        };
        let listen = listener.as_ref().map_or(self.listen, |(_, addr)| *addr);
        let mut opened: Vec<(String, Link)> = Vec::new();
        let mut problem = None;
        for d in &config.destinations {
            let current = self
                .core
                .destinations()
                .find(|(_, c)| c.name == d.name && c.addr == d.addr)
                .and_then(|(id, _)| self.links.get(id.index())?.as_ref());
            let result = match current {
                // The same socket stays; a new listen address may make it a loop.
                Some(_) => check_loop(d, listen),
                // The id is set below, once the core has placed the destination.
                None => Link::open(DestinationId::from_index(0), d, listen)
                    .map(|link| opened.push((d.name.clone(), link))),
            };
            if let Err(e) = result {
                problem = Some(e);
                break;
            }
        }
        if let Some(e) = problem {
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
            self.configured_listen = config.listen;
        }
        let mut changes = self.core.apply(config);
        changes.listen = moved;
        for removed in &changes.removed {
            if let Some(mut link) = self
                .links
                .get_mut(removed.id.index())
                .and_then(Option::take)
            {
                link.watch(&self.registry, false);
                debug!(
                    "{} removed after sending {}{}",
                    removed.destination.name,
                    removed.stats.sent,
                    crate::stats::Drops(&removed.stats)
                );
            }
        }
        for changed in &changes.changed {
            let id = changed.id;
            if changed.before.output != changed.after.output {
                // Frames waiting are in the old format.
                if let (Some(Some(link)), Some(stats)) =
                    (self.links.get_mut(id.index()), self.core.stats_mut(id))
                {
                    link.discard_backlog(stats);
                }
            }
        }
        for (name, mut link) in opened {
            let Some(id) = self
                .core
                .destinations()
                .find(|(_, d)| d.name == name)
                .map(|(id, _)| id)
            else {
                continue;
            };
            link.token = Token(FIRST_DESTINATION + id.index());
            if self.links.len() <= id.index() {
                self.links.resize_with(id.index() + 1, || None);
            }
            if let Some(mut old) = self.links[id.index()].take() {
                if let Some(stats) = self.core.stats_mut(id) {
                    old.discard_backlog(stats);
                }
                old.watch(&self.registry, false);
            }
            self.links[id.index()] = Some(link);
        }
        self.stats_interval = config.stats_interval;
        self.warn_every = config.stats_interval.unwrap_or(DEFAULT_WARN_INTERVAL);
        self.next_summary = config.stats_interval.and_then(|i| now.checked_add(i));
        Ok(changes)
    }
}

/// What the input expects, for the malformed-datagram warning.
struct Expected(Input);

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Input::Fixed(format) => write!(f, "in the {format} format ({} bytes)", format.len()),
            Input::Auto => {
                f.write_str("in any Forza format (lengths: ")?;
                // fh4 and fh5 share fh6's length: name the three once.
                let lengths = Format::ALL
                    .iter()
                    .filter(|x| !matches!(x, Format::Fh4 | Format::Fh5));
                for (i, format) in lengths.enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    match format {
                        Format::Fh6 => write!(f, "{sep}fh4/fh5/fh6 {}", format.len())?,
                        _ => write!(f, "{sep}{format} {}", format.len())?,
                    }
                }
                f.write_str(")")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Output;

    /// A link to a fresh loopback receiver, with its backlog.
    fn link_to_receiver() -> (Link, std::net::UdpSocket) {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let addr = receiver.local_addr().unwrap();
        let config = Destination {
            name: "rig".to_owned(),
            addr_text: addr.to_string(),
            addr,
            output: Output::Same,
            only_race_on: false,
            max_rate: 0,
        };
        let listen = "127.0.0.1:5400".parse().unwrap();
        let link = Link::open(DestinationId::from_index(0), &config, listen).unwrap();
        (link, receiver)
    }

    #[test]
    fn a_full_backlog_keeps_the_newest_frames_and_sends_them_oldest_first() {
        let poll = Poll::new().unwrap();
        let (mut link, receiver) = link_to_receiver();
        let mut stats = DestinationStats::default();
        // What a socket that would block leaves behind: frames queued in order.
        let extra = 3u8;
        for i in 0..BACKLOG_FRAMES as u8 + extra {
            link.queue(&[i; 324], &mut stats);
        }
        assert_eq!(stats.dropped(DropReason::Backlog), u64::from(extra));
        link.queue(&[0xFF; FRAME_CAPACITY + 1], &mut stats);
        assert_eq!(stats.dropped(DropReason::Backlog), u64::from(extra) + 1);

        let clock = Clock {
            now: Instant::now(),
            warn_every: DEFAULT_WARN_INTERVAL,
        };
        link.watch(poll.registry(), true);
        assert!(link.watched);
        link.flush(&mut stats, poll.registry(), clock);
        assert!(link.backlog.is_empty());
        assert!(!link.watched, "a flushed link is no longer watched");
        assert_eq!(stats.sent, BACKLOG_FRAMES as u64);
        let mut buf = [0u8; 2048];
        for i in extra..BACKLOG_FRAMES as u8 + extra {
            let n = receiver.recv(&mut buf).unwrap();
            assert_eq!(n, 324);
            assert!(buf[..n].iter().all(|&b| b == i), "frame {i} out of order");
        }
        // With frames waiting, a new frame goes behind them, never ahead.
        link.queue(&[0xA1; 311], &mut stats);
        link.send(&[0xA2; 232], &mut stats, poll.registry(), clock);
        assert_eq!(receiver.recv(&mut buf).unwrap(), 311);
        assert_eq!(receiver.recv(&mut buf).unwrap(), 232);
        assert_eq!(stats.sent, BACKLOG_FRAMES as u64 + 2);

        link.queue(&[0xA3; 311], &mut stats);
        link.discard_backlog(&mut stats);
        assert_eq!(stats.dropped(DropReason::Backlog), u64::from(extra) + 2);
    }

    #[test]
    fn throttle_lets_one_message_through_per_interval() {
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        let mut t = Throttle::default();
        assert_eq!(t.ready(t0, every), Some(0));
        assert_eq!(t.ready(t0 + Duration::from_secs(1), every), None);
        assert_eq!(t.ready(t0 + Duration::from_secs(2), every), None);
        assert_eq!(t.ready(t0 + Duration::from_secs(10), every), Some(2));
    }

    #[test]
    fn expected_lists_the_lengths() {
        assert_eq!(
            Expected(Input::Fixed(Format::Fh6)).to_string(),
            "in the fh6 format (324 bytes)"
        );
        assert_eq!(
            Expected(Input::Auto).to_string(),
            "in any Forza format (lengths: sled 232, fm7 311, fm2023 331, fh4/fh5/fh6 324)"
        );
    }
}
