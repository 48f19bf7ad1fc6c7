//! A destination's link: its own connected UDP socket, the backlog of the
//! newest frames that wait while the socket would block, and the frames held
//! back while a backlog of received datagrams is drained (issue 15). The
//! shell's side of the core's [`Sink`] ([`Links`]) sends through them and
//! tells the core what became of every frame.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use log::warn;
use mio::net::UdpSocket;
use mio::{Interest, Registry, Token};
use ringbuf::storage::Heap;
use ringbuf::traits::{Consumer, Observer, Producer, RingBuffer};
use ringbuf::LocalRb;

use super::broker::BrokerLink;
use super::warn::{Clock, Warner};
use super::{token_of, StartError, FRAME_CAPACITY};
use crate::config;
use crate::counters::{DropReason, SendErrorKind};
use crate::fanout::{self, Destination, DestinationId, Fate, HeldFrame, Report, Sink};
use crate::net::recv;
use crate::net::socket;

/// Newest frames kept per destination while its socket would block.
pub const BACKLOG_FRAMES: usize = 8;
/// Bytes a destination without `max_age` may hold back: about 3,000 Horizon
/// frames, 8 s at 360 frames/s.
const HELD_BACK_BYTES: usize = 1 << 20;
/// Frames a destination without `max_age` may hold back.
const HELD_BACK_FRAMES: usize = 4_096;

/// What one send attempt did.
enum Sent {
    Yes,
    WouldBlock,
    Failed,
}

/// One send, reporting its errors but `WouldBlock` ([`socket::send_retrying`]:
/// a refused send is tried once more). The send that goes is the loop's own
/// code; the rest is [`send_failed`]'s.
#[inline]
fn try_send(
    socket: &UdpSocket,
    warner: &mut Warner,
    bytes: &[u8],
    report: &mut Report<'_>,
    clock: Clock,
) -> Sent {
    match recv::send(socket, bytes) {
        Ok(_) => Sent::Yes,
        Err(e) => send_failed(e, socket, warner, bytes, report, clock),
    }
}

/// [`try_send`] after its first attempt failed with `first`: the same rules
/// ([`socket::send_retrying`] sees that error first), out of the loop's code.
#[cold]
#[inline(never)]
fn send_failed(
    first: io::Error,
    socket: &UdpSocket,
    warner: &mut Warner,
    bytes: &[u8],
    report: &mut Report<'_>,
    clock: Clock,
) -> Sent {
    let mut first = Some(first);
    let sent = socket::send_retrying(
        || match first.take() {
            Some(e) => Err(e),
            None => recv::send(socket, bytes),
        },
        |e, _| {
            e.kind() != io::ErrorKind::WouldBlock
                && warner.report(e, report, clock) == SendErrorKind::Refused
        },
    );
    match sent {
        Ok(_) => Sent::Yes,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Sent::WouldBlock,
        Err(_) => Sent::Failed,
    }
}

/// One send of a frame received at `received`: its outcome, with its latency
/// reported when it went; `None` when the socket would block.
#[inline(always)]
fn send_now(
    socket: &UdpSocket,
    warner: &mut Warner,
    bytes: &[u8],
    received: Instant,
    report: &mut Report<'_>,
    clock: Clock,
) -> Option<Fate> {
    match try_send(socket, warner, bytes, report, clock) {
        Sent::Yes => {
            // A vDSO read, no system call.
            if let Some(refused) = report.record_latency(received, Instant::now()) {
                warner.receiving_again(refused);
            }
            Some(Fate::Sent)
        }
        Sent::Failed => Some(Fate::Dropped(DropReason::SendError)),
        Sent::WouldBlock => None,
    }
}

/// Refuses a destination that is this computer on the port the relay listens
/// on (`listen`, as bound): packets would loop. The one rule is
/// [`fanout::is_loop`]; config validation applies it too, but can't know a
/// port 0 will be bound.
pub(super) fn check_loop(d: &Destination, listen: SocketAddr) -> Result<(), StartError> {
    match d.target.udp() {
        Some(addr) if fanout::is_loop(listen, addr, config::is_own_address) => {
            Err(StartError::Loop {
                name: d.name.clone(),
                addr,
            })
        }
        // A broker is reached over TCP: never the relay's UDP port.
        _ => Ok(()),
    }
}

/// Frames held back for a destination without `max_age` while a backlog is
/// drained, oldest first, packed end to end: after a stall there are hundreds,
/// and a [`HeldFrame`] each would cost 1.5 KiB. The rings are allocated once
/// and their pages touched only when used. `heads`, which every send reads
/// (to tell there are none), comes first (`repr(C)`).
#[repr(C)]
pub(super) struct HeldBack {
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

/// A destination's socket and backlog. What every send reads — whether frames
/// wait in the backlog, the socket, whether frames are held back — is in its
/// first two cache lines (`repr(C)` keeps the order, `align(64)` starts each
/// link on a line; issue 26), its name and wording after.
#[repr(C, align(64))]
pub(super) struct Link {
    pub(super) backlog: LocalRb<Heap<HeldFrame>>,
    pub(super) socket: UdpSocket,
    /// Frames not yet sent because a backlog is being drained (issue 15);
    /// all older than any frame that comes after them.
    pub(super) held_back: HeldBack,
    /// Registered with the poll for writability: only while frames wait.
    pub(super) watched: bool,
    pub(super) token: Token,
    pub(super) warner: Warner,
}

impl Link {
    /// Opens the connected socket for destination `id`, `d`, at `addr`,
    /// refusing one that would loop back to `listen`.
    pub(super) fn open(
        id: DestinationId,
        d: &Destination,
        addr: SocketAddr,
        listen: SocketAddr,
    ) -> Result<Link, StartError> {
        let err = |source| StartError::Destination {
            name: d.name.clone(),
            addr,
            source,
        };
        check_loop(d, listen)?;
        let socket = UdpSocket::from_std(socket::connect_destination(addr).map_err(err)?);
        Ok(Link {
            socket,
            token: token_of(id),
            backlog: LocalRb::new(BACKLOG_FRAMES),
            held_back: HeldBack::new(),
            watched: false,
            warner: Warner::new(d.name.clone(), addr),
        })
    }

    /// Sends `bytes`, received at `received`, now, or queues them behind
    /// frames already waiting. The common case (nothing waits, the socket
    /// takes it) is straight-line code; the rest is out of line.
    #[inline(always)]
    fn send(
        &mut self,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
        env: &Env<'_>,
    ) -> Fate {
        if !self.backlog.is_empty() {
            return self.send_behind(bytes, received, report, env);
        }
        match send_now(
            &self.socket,
            &mut self.warner,
            bytes,
            received,
            report,
            env.clock,
        ) {
            Some(outcome) => outcome,
            None => self.queue_and_watch(bytes, received, report, env),
        }
    }

    /// [`Link::send`] with frames waiting: this one joins them, then as many
    /// as the socket takes go.
    #[cold]
    #[inline(never)]
    fn send_behind(
        &mut self,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
        env: &Env<'_>,
    ) -> Fate {
        let outcome = self.queue(bytes, received, report);
        self.flush(report, env);
        outcome
    }

    /// [`Link::send`] when the socket would block: the frame waits, and the
    /// socket is watched until the backlog is flushed. Out of line, so that a
    /// [`HeldFrame`] (1.5 KiB) is never in the send's stack frame.
    #[cold]
    #[inline(never)]
    fn queue_and_watch(
        &mut self,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
        env: &Env<'_>,
    ) -> Fate {
        let outcome = self.queue(bytes, received, report);
        self.watch(env.registry, true);
        outcome
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
        env: &Env<'_>,
    ) -> Fate {
        let len = match u16::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= FRAME_CAPACITY => len,
            // Too large to hold: it goes now, after the frames before it.
            _ => {
                self.release(report, env);
                return self.send(bytes, received, report, env);
            }
        };
        if !self.held_back.has_room(bytes.len()) {
            self.release(report, env);
        }
        // Released, the rings have room for any frame up to FRAME_CAPACITY.
        let _ = self.held_back.heads.try_push((len, received));
        self.held_back.bytes.push_slice(bytes);
        Fate::Queued
    }

    /// Sends the held-back frames, oldest first, as they would have been sent
    /// when they came (behind the backlog, into it when the socket would
    /// block).
    #[inline]
    pub(super) fn release(&mut self, report: &mut Report<'_>, env: &Env<'_>) {
        if !self.held_back.heads.is_empty() {
            self.release_held(report, env);
        }
    }

    /// [`Link::release`] when frames are held back: after a stall only.
    #[cold]
    #[inline(never)]
    fn release_held(&mut self, report: &mut Report<'_>, env: &Env<'_>) {
        // Taking the boxed slice leaves an empty one: no allocation.
        let mut scratch = std::mem::take(&mut self.held_back.scratch);
        while let Some((len, received)) = self.held_back.heads.try_pop() {
            let frame = &mut scratch[..usize::from(len)];
            self.held_back.bytes.pop_slice(frame);
            let outcome = self.send(frame, received, report, env);
            report.held(outcome);
        }
        self.held_back.scratch = scratch;
    }

    /// Frames the shell holds for the destination: the core's `queued`.
    pub(super) fn holding(&self) -> usize {
        self.backlog.occupied_len() + self.held_back.heads.occupied_len()
    }

    /// Keeps `bytes` for later, dropping the oldest waiting frame when full.
    fn queue(&mut self, bytes: &[u8], received: Instant, report: &mut Report<'_>) -> Fate {
        let mut frame = HeldFrame::EMPTY;
        if !frame.store(bytes, received) {
            return Fate::Dropped(DropReason::Backlog);
        }
        if self.backlog.push_overwrite(frame).is_some() {
            report.held(Fate::Dropped(DropReason::Backlog));
        }
        Fate::Queued
    }

    /// Sends waiting frames, oldest first, straight from the ring, until the
    /// socket would block; a frame grown too old for the destination's
    /// `max_age` is dropped instead. The socket is watched only while frames
    /// remain.
    pub(super) fn flush(&mut self, report: &mut Report<'_>, env: &Env<'_>) {
        let clock = env.clock;
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
        self.watch(env.registry, !self.backlog.is_empty());
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
    pub(super) fn clear_backlog(&mut self, registry: &Registry) {
        self.backlog.clear();
        self.held_back.clear();
        self.watch(registry, false);
    }
}

/// What every call of a link that may send needs from the loop, besides
/// where it reports to the core: the registry that watches its socket while
/// frames wait, and the time. Made once a batch (or a timer, or an event),
/// and lent to each call.
#[derive(Clone, Copy)]
pub(super) struct Env<'a> {
    pub(super) registry: &'a Registry,
    pub(super) clock: Clock,
}

/// The shell's side of the core's [`Sink`]: each destination's link, a UDP
/// one or a broker's.
pub(super) struct Links<'a> {
    pub(super) links: &'a mut [Option<Box<Link>>],
    pub(super) brokers: &'a mut [Option<BrokerLink>],
    pub(super) env: Env<'a>,
    /// A backlog is being drained: frames for destinations without `max_age`
    /// are held back.
    pub(super) hold_back: bool,
}

impl Sink for Links<'_> {
    // Inlined whole into the core's loop over destinations (issue 26):
    // `#[inline]` alone left `Link::send` out of line.
    #[inline(always)]
    fn deliver(
        &mut self,
        id: DestinationId,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Fate {
        let env = &self.env;
        match self.links.get_mut(id.index()) {
            Some(Some(link)) if self.hold_back && !report.has_age_limit() => {
                link.hold_back(bytes, received, report, env)
            }
            Some(Some(link)) => {
                // Frames held back go first (none are, outside a drain).
                link.release(report, env);
                link.send(bytes, received, report, env)
            }
            _ => match self.brokers.get_mut(id.index()) {
                Some(Some(broker)) => broker.deliver(bytes, received, report, env.clock),
                // Every destination of the core has a link (see `Shell::apply`).
                _ => Fate::Dropped(DropReason::SendError),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mio::Poll;

    use super::*;
    use std::time::SystemTime;

    use crate::counters::DestinationStats;
    use crate::fanout::{Arrival, Fanout, Output, Routes, Target};
    use crate::relay::DEFAULT_WARN_INTERVAL;
    use crate::report::CountersOf as _;
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
                target: Target::Udp(addr),
                output: Output::Same,
                fields: None,
                only_race_on: false,
                max_rate: 0,
                max_age,
            }],
        });
        let (id, d) = core.destinations().next().unwrap();
        let listen = "127.0.0.1:5400".parse().unwrap();
        let link = Link::open(id, d, addr, listen).unwrap();
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
        ) -> Fate {
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
        ) -> Fate {
            self.0.send(
                bytes,
                received,
                report,
                &Env {
                    registry: self.1,
                    clock: self.2,
                },
            )
        }
    }

    fn stats(core: &Fanout) -> DestinationStats {
        core.counters().destinations[0].stats
    }

    /// What every send reads of its link lies in the link's first two cache
    /// lines (issue 26): a field put in front, or `repr(C)` dropped, shows
    /// here.
    #[test]
    fn a_send_reads_the_first_two_cache_lines_of_its_link() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!(align_of::<Link>(), 64);
        let ends = [
            (
                "backlog",
                offset_of!(Link, backlog) + size_of::<LocalRb<Heap<HeldFrame>>>(),
            ),
            ("socket", offset_of!(Link, socket) + size_of::<UdpSocket>()),
            (
                "held_back.heads",
                offset_of!(Link, held_back)
                    + offset_of!(HeldBack, heads)
                    + size_of::<LocalRb<Heap<(u16, Instant)>>>(),
            ),
        ];
        for (field, end) in ends {
            assert!(end <= 2 * 64, "{field} ends at byte {end} of the link");
        }
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
        link.flush(
            &mut core.report(id).unwrap(),
            &Env {
                registry: poll.registry(),
                clock,
            },
        );
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
            let arrival = Arrival::new(&packet, FROM, t0 + ms(at), SystemTime::now());
            core.handle(arrival, t0 + ms(at), &mut WouldBlock(&mut link));
        }
        assert_eq!(stats(&core).held, 4);
        let clock = Clock {
            now: t0 + ms(100),
            warn_every: DEFAULT_WARN_INTERVAL,
        };
        link.flush(
            &mut core.report(id).unwrap(),
            &Env {
                registry: poll.registry(),
                clock,
            },
        );
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
                target: Target::Udp(addr),
                output: Output::Same,
                fields: None,
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
        let mut links: Vec<Option<Box<Link>>> = core
            .destinations()
            .map(|(id, d)| {
                let link = Link::open(id, d, d.target.udp().unwrap(), listen).unwrap();
                Some(Box::new(link))
            })
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
            let arrival =
                Arrival::new(&packet, FROM, t0 + ms(10) * u32::from(i), SystemTime::now());
            let mut sink = Links {
                links: &mut links,
                brokers: &mut [],
                env: Env {
                    registry: poll.registry(),
                    clock,
                },
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
        plain_link.release(
            &mut core.report(plain).unwrap(),
            &Env {
                registry: poll.registry(),
                clock,
            },
        );
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
                brokers: &mut [],
                env: Env {
                    registry: poll.registry(),
                    clock,
                },
                hold_back: true,
            };
            core.handle(
                Arrival::new(&packet, FROM, now, SystemTime::now()),
                now,
                &mut sink,
            );
        }
        let s = counts(&core, 1);
        assert_eq!(
            (s.sent, s.held, s.dropped_total()),
            (30 + HELD_BACK_FRAMES as u64, extra as u64, 0)
        );
        assert_eq!(links[1].as_ref().unwrap().holding(), extra);
    }
}
