//! The relay: a single-threaded mio loop that owns every socket and buffer.
//!
//! Data flows one way: listening socket → [`Packet`] view → per-destination filter
//! → translation (once per distinct output format per packet, into a buffer made
//! at start-up) → each destination's own connected socket. Per packet nothing is
//! allocated, nothing is logged above `trace!`, and no error is fatal: a send error
//! is counted against its destination alone, a bad datagram against the input.
//!
//! Each destination has its own connected UDP socket, so the ICMP "port
//! unreachable" of a closed consumer lands on that socket only, never on the
//! listening one (which on Windows would fail its next `recv` with WSAECONNRESET).
//! When a send would block, up to [`BACKLOG_FRAMES`] of the newest frames wait in
//! a preallocated ring and go out when the socket is writable.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use log::{debug, info, trace, warn};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use ringbuf::traits::{Consumer, Observer, RingBuffer};
use ringbuf::LocalRb;

use crate::config::{Config, Destination, Input, Output};
use crate::filter::{RaceFilter, RateLimiter};
use crate::socket;
use crate::stats::{self, DestinationStats, DropReason, Elapsed, InputStats, SendErrorKind};
use crate::translate::translate;
use crate::wire::{Detector, Format, Packet, MAX_LEN};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// Destination `i` is registered as `Token(FIRST_DESTINATION + i)`.
const FIRST_DESTINATION: usize = 2;

/// Receive buffer: larger than the largest UDP payload (65,507), so nothing is
/// ever truncated.
pub const MAX_DATAGRAM: usize = 65_536;
/// Newest frames kept per destination while its socket would block.
pub const BACKLOG_FRAMES: usize = 8;
/// Largest frame a backlog or rate-limit slot holds: every Forza format, and any
/// datagram that fits one Ethernet frame. Larger `same` datagrams that must wait
/// are dropped and counted.
pub const FRAME_CAPACITY: usize = 1_472;
/// Datagrams read per drain before other work gets a turn.
const DRAIN_BUDGET: usize = 256;
/// Datagrams between clock reads while draining (the rate limiter's clock).
const CLOCK_EVERY: usize = 32;
/// Consecutive unexpected receive errors after which a drain gives up.
const MAX_RECV_ERRORS: usize = 8;
/// Events handled per `poll` call.
const EVENTS: usize = 256;
/// How often a repeated warning may be logged when the stats line is off.
const DEFAULT_WARN_INTERVAL: Duration = Duration::from_secs(10);

/// A frame waiting in a backlog or a rate-limit slot.
#[derive(Clone, Copy)]
struct Frame {
    len: usize,
    data: [u8; FRAME_CAPACITY],
}

impl Frame {
    const EMPTY: Frame = Frame {
        len: 0,
        data: [0; FRAME_CAPACITY],
    };

    /// Copies `bytes` in; `false` when they don't fit.
    fn store(&mut self, bytes: &[u8]) -> bool {
        match self.data.get_mut(..bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = bytes.len();
                true
            }
            None => false,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

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

/// A destination's socket, backlog and counters.
struct Link {
    socket: UdpSocket,
    backlog: LocalRb<ringbuf::storage::Heap<Frame>>,
    tally: Tally,
}

/// A destination's counters, and the throttle on its warnings.
#[derive(Default)]
struct Tally {
    stats: DestinationStats,
    throttle: Throttle,
}

impl Tally {
    /// Counts a send error (from `send`, or collected from the socket after an
    /// ICMP message) and warns at most once per interval.
    fn report_error(
        &mut self,
        e: &io::Error,
        config: &Destination,
        now: Instant,
        every: Duration,
    ) -> SendErrorKind {
        let kind = SendErrorKind::of(e);
        self.stats.send_errors.add(kind);
        if let Some(more) = self.throttle.ready(now, every) {
            warn!(
                "{} ({}): {}; still sending to it{}",
                config.name,
                config.addr,
                SendProblem(kind, e),
                Suppressed(more)
            );
        }
        kind
    }
}

/// What one send attempt did.
enum Sent {
    Yes,
    WouldBlock,
    Failed,
}

/// One send, counting the outcome. A refused send is tried once more: Linux
/// reports an earlier frame's ICMP on the next send and drops that frame, so the
/// retry is what delivers the first frame after a consumer comes back.
fn try_send(
    socket: &UdpSocket,
    tally: &mut Tally,
    bytes: &[u8],
    config: &Destination,
    now: Instant,
    every: Duration,
) -> Sent {
    let mut retried = false;
    loop {
        match socket.send(bytes) {
            Ok(_) => {
                tally.stats.sent += 1;
                return Sent::Yes;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Sent::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let kind = tally.report_error(&e, config, now, every);
                if kind == SendErrorKind::Refused && !retried {
                    retried = true;
                    continue;
                }
                tally.stats.drop(DropReason::SendError);
                return Sent::Failed;
            }
        }
    }
}

impl Link {
    /// Sends `bytes` now, or queues them behind frames already waiting.
    fn send(&mut self, bytes: &[u8], config: &Destination, now: Instant, every: Duration) {
        if !self.backlog.is_empty() {
            self.queue(bytes);
            self.flush(config, now, every);
            return;
        }
        match try_send(&self.socket, &mut self.tally, bytes, config, now, every) {
            Sent::Yes | Sent::Failed => {}
            Sent::WouldBlock => self.queue(bytes),
        }
    }

    /// Keeps `bytes` for later, dropping the oldest waiting frame when full.
    fn queue(&mut self, bytes: &[u8]) {
        let mut frame = Frame::EMPTY;
        if !frame.store(bytes) {
            self.tally.stats.drop(DropReason::Backlog);
            return;
        }
        if self.backlog.push_overwrite(frame).is_some() {
            self.tally.stats.drop(DropReason::Backlog);
        }
    }

    /// Sends waiting frames, oldest first, straight from the ring, until the
    /// socket would block.
    fn flush(&mut self, config: &Destination, now: Instant, every: Duration) {
        while let Some(frame) = self.backlog.first() {
            match try_send(
                &self.socket,
                &mut self.tally,
                frame.bytes(),
                config,
                now,
                every,
            ) {
                Sent::WouldBlock => break,
                Sent::Yes | Sent::Failed => {
                    self.backlog.try_pop();
                }
            }
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

/// One destination while running.
struct Dest {
    config: Destination,
    race: RaceFilter,
    rate: RateLimiter,
    /// The newest frame waiting for its `max_rate` slot, if `has_pending`.
    pending: Box<Frame>,
    has_pending: bool,
    link: Link,
}

impl Dest {
    /// Applies `max_rate`, then sends.
    fn deliver(&mut self, bytes: &[u8], now: Instant, every: Duration) {
        if self.has_pending {
            // This newer frame supersedes the waiting one.
            self.has_pending = false;
            self.link.tally.stats.drop(DropReason::RateLimited);
        }
        if self.rate.is_due(now) {
            self.rate.sent(now);
            self.link.send(bytes, &self.config, now, every);
        } else if self.pending.store(bytes) {
            self.has_pending = true;
        } else {
            self.link.tally.stats.drop(DropReason::RateLimited);
        }
    }

    /// Sends the waiting frame if its slot has come.
    fn flush_pending(&mut self, now: Instant, every: Duration) {
        if self.has_pending && self.rate.is_due(now) {
            self.has_pending = false;
            self.rate.sent(now);
            self.link
                .send(self.pending.bytes(), &self.config, now, every);
        }
    }

    fn deadline(&self) -> Option<Instant> {
        if self.has_pending {
            self.rate.next_due()
        } else {
            None
        }
    }
}

/// The translated packet of one output format, rebuilt at most once per packet.
/// There is one per format, indexed by [`Format::index`], made at start-up.
struct OutputSlot {
    buf: Box<[u8; MAX_LEN]>,
    /// Length of the translation in `buf`; 0 when the packet couldn't be translated.
    len: usize,
    /// The packet number `buf` holds.
    packet: u64,
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

/// Stops a running relay from another thread or a signal handler.
#[derive(Clone)]
pub struct StopHandle {
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl StopHandle {
    /// Asks the loop to finish; `run` then returns its final report.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // If waking fails the loop still sees the flag at its next wake-up.
        let _ = self.waker.wake();
    }
}

/// One destination's line in a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationReport {
    /// Its name.
    pub name: String,
    /// Its address.
    pub addr: SocketAddr,
    /// What it receives.
    pub output: Output,
    /// Its counters.
    pub stats: DestinationStats,
}

/// Everything counted since start: what the final summary prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The listening address.
    pub listen: SocketAddr,
    /// How long the relay ran.
    pub elapsed: Duration,
    /// Input counters.
    pub input: InputStats,
    /// Every destination, in configuration order.
    pub destinations: Vec<DestinationReport>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.input;
        write!(
            f,
            "forza-relay ran for {}. Received {} packets on {}",
            Elapsed(self.elapsed),
            i.received,
            self.listen
        )?;
        if let Some(format) = i.last_format {
            write!(f, " ({format}{})", if i.format_guessed { "?" } else { "" })?;
        }
        write!(
            f,
            ", {} malformed, {} disallowed",
            i.malformed, i.disallowed
        )?;
        if i.recv_errors > 0 {
            write!(f, ", {} receive errors", i.recv_errors)?;
        }
        f.write_str(".")?;
        for d in &self.destinations {
            let mut drops = String::new();
            stats::write_drops(&mut drops, &d.stats);
            write!(f, "\n  {}", d.name)?;
            if d.name != d.addr.to_string() {
                write!(f, " ({})", d.addr)?;
            }
            write!(f, ", {}: sent {}{}", d.output, d.stats.sent, drops)?;
        }
        Ok(())
    }
}

/// The running relay.
pub struct Relay {
    poll: Poll,
    events: Events,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    core: Core,
}

/// Everything but the poll: split so events can be iterated while handled.
struct Core {
    registry: Registry,
    listener: UdpSocket,
    listen: SocketAddr,
    recv: Box<[u8]>,
    input: Input,
    detector: Detector,
    allow: Vec<IpNet>,
    slots: [OutputSlot; Format::ALL.len()],
    dests: Vec<Option<Dest>>,
    stats: InputStats,
    /// The last drain stopped at its budget with datagrams still queued.
    unread: bool,
    packet: u64,
    started: Instant,
    stats_interval: Option<Duration>,
    next_summary: Option<Instant>,
    summary_from: (Instant, u64),
    warn_every: Duration,
    malformed: Throttle,
    disallowed: Throttle,
    recv_error: Throttle,
}

impl Relay {
    /// Opens every socket of `config`. Nothing is left half-started on error.
    pub fn bind(config: &Config) -> Result<Relay, StartError> {
        let poll = Poll::new().map_err(StartError::Poll)?;
        let registry = poll.registry().try_clone().map_err(StartError::Poll)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(StartError::Poll)?);
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
        let now = Instant::now();
        let mut core = Core {
            registry,
            listener,
            listen,
            recv: vec![0u8; MAX_DATAGRAM].into_boxed_slice(),
            input: config.input,
            detector: Detector::default(),
            allow: config.allow.clone(),
            slots: std::array::from_fn(|_| OutputSlot {
                buf: Box::new([0; MAX_LEN]),
                len: 0,
                packet: 0,
            }),
            dests: Vec::new(),
            stats: InputStats::default(),
            unread: false,
            packet: 0,
            started: now,
            stats_interval: config.stats_interval,
            next_summary: config.stats_interval.and_then(|i| now.checked_add(i)),
            summary_from: (now, 0),
            warn_every: config.stats_interval.unwrap_or(DEFAULT_WARN_INTERVAL),
            malformed: Throttle::default(),
            disallowed: Throttle::default(),
            recv_error: Throttle::default(),
        };
        for d in &config.destinations {
            core.add(d.clone())?;
        }
        Ok(Relay {
            poll,
            events: Events::with_capacity(EVENTS),
            stop: Arc::new(AtomicBool::new(false)),
            waker,
            core,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.core.listen
    }

    /// A handle that stops [`Relay::run`] from anywhere.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            stop: self.stop.clone(),
            waker: self.waker.clone(),
        }
    }

    /// Adds a destination while running. The caller validates it first, as
    /// [`Config`] does (unique name and address, no loop to our own port).
    pub fn add_destination(&mut self, d: Destination) -> Result<(), StartError> {
        self.core.add(d)
    }

    /// Removes the destination called `name`, returning its final counters.
    pub fn remove_destination(&mut self, name: &str) -> Option<DestinationReport> {
        self.core.remove(name)
    }

    /// Runs until stopped, then returns the final report.
    pub fn run(&mut self) -> io::Result<Report> {
        while !self.stop.load(Ordering::SeqCst) {
            let timeout = self
                .core
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()));
            self.poll_once(timeout)?;
        }
        // A frame still waiting for its rate slot will never go: count it.
        for dest in self.core.dests.iter_mut().flatten() {
            if std::mem::take(&mut dest.has_pending) {
                dest.link.tally.stats.drop(DropReason::RateLimited);
            }
        }
        Ok(self.report())
    }

    /// Waits for at most `timeout` (`None`: until something happens), then handles
    /// everything that is ready: datagrams, writable destinations, due frames and
    /// the periodic summary.
    pub fn poll_once(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        // Datagrams left unread by the last drain: look, don't wait.
        let timeout = if self.core.unread {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        let unread = self.core.unread;
        for event in self.events.iter() {
            match event.token() {
                LISTENER if !unread => self.core.drain(now),
                LISTENER => {}
                WAKER => {}
                Token(t) => self
                    .core
                    .destination_event(t - FIRST_DESTINATION, event, now),
            }
        }
        if unread {
            self.core.drain(now);
        }
        self.core.tick(Instant::now());
        Ok(())
    }

    /// Input counters so far.
    pub fn input_stats(&self) -> InputStats {
        self.core.stats
    }

    /// Counters so far, for every destination.
    pub fn report(&self) -> Report {
        Report {
            listen: self.core.listen,
            elapsed: self.core.started.elapsed(),
            input: self.core.stats,
            destinations: self.core.dests.iter().flatten().map(report_of).collect(),
        }
    }
}

fn report_of(d: &Dest) -> DestinationReport {
    DestinationReport {
        name: d.config.name.clone(),
        addr: d.config.addr,
        output: d.config.output,
        stats: d.link.tally.stats,
    }
}

impl Core {
    fn add(&mut self, config: Destination) -> Result<(), StartError> {
        let err = |source| StartError::Destination {
            name: config.name.clone(),
            addr: config.addr,
            source,
        };
        let mut socket =
            UdpSocket::from_std(socket::connect_destination(config.addr).map_err(err)?);
        // The config catches loopback loops; a connected socket also reveals a
        // destination that is this computer's own LAN address on our port.
        let local = socket.local_addr().map_err(err)?;
        let listen_ip = self.listen.ip().to_canonical();
        if config.addr.port() == self.listen.port()
            && local.ip().to_canonical() == config.addr.ip().to_canonical()
            && (listen_ip.is_unspecified() || listen_ip == config.addr.ip().to_canonical())
        {
            return Err(StartError::Loop {
                name: config.name.clone(),
                addr: config.addr,
            });
        }
        let index = self
            .dests
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.dests.len());
        self.registry
            .register(
                &mut socket,
                Token(FIRST_DESTINATION + index),
                Interest::WRITABLE,
            )
            .map_err(err)?;
        let dest = Dest {
            race: RaceFilter::default(),
            rate: RateLimiter::new(config.max_rate),
            pending: Box::new(Frame::EMPTY),
            has_pending: false,
            link: Link {
                socket,
                backlog: LocalRb::new(BACKLOG_FRAMES),
                tally: Tally::default(),
            },
            config,
        };
        if index == self.dests.len() {
            self.dests.push(Some(dest));
        } else {
            self.dests[index] = Some(dest);
        }
        Ok(())
    }

    fn remove(&mut self, name: &str) -> Option<DestinationReport> {
        let entry = self
            .dests
            .iter_mut()
            .find(|d| d.as_ref().is_some_and(|d| d.config.name == name))?;
        let mut dest = entry.take()?;
        let _ = self.registry.deregister(&mut dest.link.socket);
        Some(report_of(&dest))
    }

    /// Receives until the socket would block.
    fn drain(&mut self, mut now: Instant) {
        self.unread = false;
        let mut errors = 0;
        for n in 1..=DRAIN_BUDGET {
            if n % CLOCK_EVERY == 0 {
                now = Instant::now();
            }
            match self.listener.recv_from(&mut self.recv) {
                Ok((len, from)) => self.relay(len, from, now),
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return,
                    io::ErrorKind::Interrupted => {}
                    // A closed consumer reported on the listening socket (Windows):
                    // not ours to act on, and never a reason to stop receiving.
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused => {
                        trace!("ignored {e} on the listening socket");
                    }
                    _ => {
                        self.stats.recv_errors += 1;
                        if let Some(more) = self.recv_error.ready(now, self.warn_every) {
                            warn!("receive failed on {}: {e}{}", self.listen, Suppressed(more));
                        }
                        // Keep reading what is queued (mio is edge-triggered), but
                        // don't spin on a socket that keeps failing.
                        errors += 1;
                        if errors == MAX_RECV_ERRORS {
                            return;
                        }
                    }
                },
            }
        }
        // Budget spent with datagrams still queued: other work (writable
        // destinations, rate slots, the summary) goes first, then draining resumes.
        self.unread = true;
    }

    /// Relays the datagram of `len` bytes in the receive buffer, from `from`.
    fn relay(&mut self, len: usize, from: SocketAddr, now: Instant) {
        let Core {
            recv,
            stats,
            allow,
            input,
            detector,
            slots,
            dests,
            packet,
            warn_every,
            malformed,
            disallowed,
            ..
        } = self;
        let data = &recv[..len];
        stats.received += 1;
        stats.bytes += len as u64;
        // An IPv4 sender seen through a dual-stack socket reads as itself.
        let from = SocketAddr::new(from.ip().to_canonical(), from.port());
        let ip = from.ip();
        if !allow.is_empty() && !allow.iter().any(|net| net.contains(&ip)) {
            stats.disallowed += 1;
            if let Some(more) = disallowed.ready(now, *warn_every) {
                warn!(
                    "dropped a datagram from {from}: not in listen.allow{}",
                    Suppressed(more)
                );
            }
            return;
        }
        let (format, guessed) = match *input {
            Input::Fixed(f) => ((len == f.len()).then_some(f), false),
            Input::Auto => {
                let f = detector.detect(data);
                (
                    f,
                    f.is_some_and(Format::is_horizon) && !detector.is_certain(),
                )
            }
        };
        match format {
            Some(f) => {
                stats.last_format = Some(f);
                stats.format_guessed = guessed;
            }
            None => {
                stats.malformed += 1;
                if let Some(more) = malformed.ready(now, *warn_every) {
                    warn!(
                        "a {len}-byte datagram from {from} is not {}; sent only to \
                         destinations with format \"same\"{}",
                        Expected(*input),
                        Suppressed(more)
                    );
                }
            }
        }
        let race_on = format.map(|f| Packet::new_unchecked(data, f).race_on());
        *packet += 1;
        trace!("packet {} from {from}: {len} bytes, {format:?}", *packet);
        for dest in dests.iter_mut().flatten() {
            if dest.config.only_race_on && !dest.race.admit(race_on) {
                dest.link.tally.stats.drop(DropReason::NotRacing);
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
                        let slot = &mut slots[to.index()];
                        if slot.packet != *packet {
                            slot.packet = *packet;
                            slot.len = from
                                .and_then(|from| translate(data, from, to, &mut slot.buf[..]).ok())
                                .unwrap_or(0);
                        }
                        if slot.len == 0 {
                            dest.link.tally.stats.drop(DropReason::Untranslatable);
                            continue;
                        }
                        &slot.buf[..slot.len]
                    }
                }
            };
            dest.deliver(bytes, now, *warn_every);
        }
    }

    fn destination_event(&mut self, index: usize, event: &mio::event::Event, now: Instant) {
        let Some(Some(dest)) = self.dests.get_mut(index) else {
            return;
        };
        if event.is_error() || event.is_read_closed() {
            // Collect a pending ICMP error now, so it doesn't fail the next send.
            if let Ok(Some(e)) = dest.link.socket.take_error() {
                dest.link
                    .tally
                    .report_error(&e, &dest.config, now, self.warn_every);
            }
        }
        if event.is_writable() {
            dest.link.flush(&dest.config, now, self.warn_every);
        }
    }

    /// Sends frames whose rate slot has come, and the summary when it is due.
    fn tick(&mut self, now: Instant) {
        for dest in self.dests.iter_mut().flatten() {
            dest.flush_pending(now, self.warn_every);
        }
        if let (Some(due), Some(interval)) = (self.next_summary, self.stats_interval) {
            if now >= due {
                self.summary(now);
                self.next_summary = now.checked_add(interval);
            }
        }
    }

    /// The earliest moment the loop must wake without an event.
    fn next_deadline(&self) -> Option<Instant> {
        self.dests
            .iter()
            .flatten()
            .filter_map(Dest::deadline)
            .chain(self.next_summary)
            .min()
    }

    /// Logs the one-line summary.
    fn summary(&mut self, now: Instant) {
        let (since, before) = self.summary_from;
        let received = self.stats.received - before;
        let secs = now.saturating_duration_since(since).as_secs_f64();
        self.summary_from = (now, self.stats.received);
        if received == 0 {
            info!(
                "waiting: nothing received on {} in the last {} (is the game's Data Out \
                 pointed here?)",
                self.listen,
                Elapsed(now - since)
            );
            return;
        }
        let mut line = format!(
            "in {:.0}/s ({} total{}",
            received as f64 / secs.max(1e-9),
            self.stats.received,
            self.stats
                .last_format
                .map(|f| format!(", {f}{}", if self.stats.format_guessed { "?" } else { "" }))
                .unwrap_or_default()
        );
        if self.stats.malformed > 0 {
            line.push_str(&format!(", {} malformed", self.stats.malformed));
        }
        if self.stats.disallowed > 0 {
            line.push_str(&format!(", {} disallowed", self.stats.disallowed));
        }
        line.push(')');
        for d in self.dests.iter().flatten() {
            line.push_str(&format!(
                " | {} {} sent",
                d.config.name, d.link.tally.stats.sent
            ));
            stats::write_drops(&mut line, &d.link.tally.stats);
        }
        info!("{line}");
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

    /// A link to a fresh loopback receiver, with its backlog.
    fn link_to_receiver() -> (Link, std::net::UdpSocket, Destination) {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let addr = receiver.local_addr().unwrap();
        let link = Link {
            socket: UdpSocket::from_std(socket::connect_destination(addr).unwrap()),
            backlog: LocalRb::new(BACKLOG_FRAMES),
            tally: Tally::default(),
        };
        let config = Destination {
            name: "rig".to_owned(),
            addr_text: addr.to_string(),
            addr,
            output: Output::Same,
            only_race_on: false,
            max_rate: 0,
        };
        (link, receiver, config)
    }

    #[test]
    fn a_full_backlog_keeps_the_newest_frames_and_sends_them_oldest_first() {
        let (mut link, receiver, config) = link_to_receiver();
        // What a socket that would block leaves behind: frames queued in order.
        let extra = 3u8;
        for i in 0..BACKLOG_FRAMES as u8 + extra {
            link.queue(&[i; 324]);
        }
        assert_eq!(
            link.tally.stats.dropped(DropReason::Backlog),
            u64::from(extra)
        );
        link.queue(&[0xFF; FRAME_CAPACITY + 1]);
        assert_eq!(
            link.tally.stats.dropped(DropReason::Backlog),
            u64::from(extra) + 1
        );

        let now = Instant::now();
        link.flush(&config, now, DEFAULT_WARN_INTERVAL);
        assert!(link.backlog.is_empty());
        assert_eq!(link.tally.stats.sent, BACKLOG_FRAMES as u64);
        let mut buf = [0u8; 2048];
        for i in extra..BACKLOG_FRAMES as u8 + extra {
            let n = receiver.recv(&mut buf).unwrap();
            assert_eq!(n, 324);
            assert!(buf[..n].iter().all(|&b| b == i), "frame {i} out of order");
        }
        // With frames waiting, a new frame goes behind them, never ahead.
        link.queue(&[0xA1; 311]);
        link.send(&[0xA2; 232], &config, now, DEFAULT_WARN_INTERVAL);
        assert_eq!(receiver.recv(&mut buf).unwrap(), 311);
        assert_eq!(receiver.recv(&mut buf).unwrap(), 232);
        assert_eq!(link.tally.stats.sent, BACKLOG_FRAMES as u64 + 2);
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
    fn frames_refuse_what_does_not_fit() {
        let mut f = Frame::EMPTY;
        assert!(f.store(&[1, 2, 3]));
        assert_eq!(f.bytes(), &[1, 2, 3]);
        assert!(!f.store(&[0; FRAME_CAPACITY + 1]));
        assert_eq!(f.bytes(), &[1, 2, 3]);
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
