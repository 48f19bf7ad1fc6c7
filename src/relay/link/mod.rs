//! A destination's link: its own connected UDP socket, the backlog of the
//! newest frames that wait while the socket would block, and the frames held
//! back while a backlog of received datagrams is drained (issue 15). The
//! shell's side of the core's `Sink` (`super::outbox::Links`) sends through them and
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

use super::warn::{Clock, Warner};
use super::{token_of, StartError, FRAME_CAPACITY};
use crate::config;
use crate::counters::{DropReason, SendErrorKind};
use crate::fanout::{self, Destination, DestinationId, Fate, HeldFrame, Report};
use crate::net::many::Address;
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
    /// Frames in the outbox for it, not yet sent (issue 33): its next frames
    /// go behind them.
    pub(super) staged: usize,
    /// Its address, as the outbox's one call takes it.
    pub(super) address: Address,
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
            staged: 0,
            address: Address::new(addr),
        })
    }

    /// Sends `bytes`, received at `received`, now, or queues them behind
    /// frames already waiting. The common case (nothing waits, the socket
    /// takes it) is straight-line code; the rest is out of line.
    #[inline(always)]
    pub(super) fn send(
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
    pub(super) fn hold_back(
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
        self.backlog.occupied_len() + self.held_back.heads.occupied_len() + self.staged
    }

    /// Keeps `bytes` for later, dropping the oldest waiting frame when full.
    pub(super) fn queue(
        &mut self,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Fate {
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

#[cfg(test)]
mod tests;
