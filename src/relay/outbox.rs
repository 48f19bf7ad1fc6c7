//! Where the core's frames go ([`Links`], the shell's side of its [`Sink`]),
//! and every destination of a batch in one system call (issue 33): on Linux the
//! frames a batch (or a timer's due frames) has for the UDP destinations are
//! staged in the outbox as the core hands them out, then go in one
//! `sendmmsg` per address family on one unconnected socket
//! ([`crate::net::many`]). Each staged frame is the shell's to hold
//! ([`Fate::Queued`]) until that call says what became of it.
//!
//! - A destination whose frames wait (its backlog, frames held back) sends on
//!   its own connected socket as before, so that the order of frames to one
//!   destination never changes; when the shared socket would block, the rest
//!   of the call goes on each destination's own socket, in order (into its
//!   backlog only if that one would block too).
//! - A refusal (a closed port's ICMP) comes back in the socket's error
//!   queue with the address it was for, and is charged to the destinations
//!   at that address, so that `refused`, "receiving again" and the summaries
//!   say what they said with connected sockets.
//! - A frame the shared socket still refuses after the error queue was read
//!   goes on its destination's own socket, whose errors are its own.
//!
//! Elsewhere the outbox is never opened, and every frame goes on its
//! destination's connected socket, as it always did.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use log::warn;
use ringbuf::traits::Observer as _;

use super::broker::BrokerLink;
use super::link::{Env, Link};
use crate::counters::DropReason;
use crate::fanout::{DestinationId, Fanout, Fate, Report, Sink};
use crate::net::many::{self, Address, Many};
use crate::net::recv::Batch;

/// Calls made again for a frame after an error, before it goes on its
/// destination's own socket.
const RETRIES: u32 = 2;

/// UDP destinations from which the outbox is used: below, a frame's one send
/// is the plain one.
pub(super) const MIN_DESTINATIONS: usize = 2;

/// Set (to anything), the outbox is never used: a send on each destination's
/// own socket, as on other platforms. The bench's like-for-like comparison
/// of the two ways (`forza-relay, a send each` in its work section).
pub const SEND_EACH_VAR: &str = "FORZA_RELAY_SEND_EACH";

/// The staged frames of one address family, and the socket they go on.
struct Family {
    socket: std::net::UdpSocket,
    many: Many,
    /// Each staged frame's destination, and when it reached the machine.
    staged: Box<[(DestinationId, Instant)]>,
    /// The last call met a refusal: the next one's is read right after it,
    /// before it fails the call after (a closed tool refuses every frame).
    refusing: bool,
}

impl Family {
    fn open(v6: bool, capacity: usize) -> Option<Family> {
        match many::sender(v6) {
            Ok(socket) => Some(Family {
                socket,
                many: Many::new(capacity),
                staged: vec![(DestinationId::from_index(0), Instant::now()); capacity.max(1)]
                    .into_boxed_slice(),
                refusing: false,
            }),
            Err(e) => {
                warn!(
                    "cannot open the {} socket that sends to every destination at once ({e}): \
                     each sends on its own",
                    if v6 { "IPv6" } else { "IPv4" }
                );
                None
            }
        }
    }
}

/// The frames staged for one call per family.
pub(super) struct Outbox {
    v4: Option<Family>,
    v6: Option<Family>,
    /// `sendmmsg` calls made so far (the tests' to read).
    calls: u64,
    /// Frames are staged.
    staged: bool,
    /// A frame waits in its destination's backlog behind staged ones: never,
    /// as the outbox has room for a whole batch to every destination (and a
    /// timer's due frames are one a destination at most), but should it be
    /// full, the frame waits rather than overtakes, and goes once they went.
    behind: bool,
}

impl Outbox {
    /// An outbox that stages nothing.
    pub(super) fn off() -> Outbox {
        Outbox {
            v4: None,
            v6: None,
            calls: 0,
            staged: false,
            behind: false,
        }
    }

    /// The outbox for `links`: a family's socket and room for a whole batch
    /// to each of its destinations, when there are [`MIN_DESTINATIONS`] and
    /// the platform has the call.
    pub(super) fn for_links(links: &[Option<Box<Link>>]) -> Outbox {
        let count = |v6: bool| {
            links
                .iter()
                .flatten()
                .filter(|l| l.address.is_v6() == v6)
                .count()
        };
        let (v4, v6) = (count(false), count(true));
        if !many::AVAILABLE
            || v4 + v6 < MIN_DESTINATIONS
            || std::env::var_os(SEND_EACH_VAR).is_some()
        {
            return Outbox::off();
        }
        let open = |v6, n: usize| (n > 0).then(|| Family::open(v6, n * Batch::SIZE)).flatten();
        Outbox {
            v4: open(false, v4),
            v6: open(true, v6),
            calls: 0,
            staged: false,
            behind: false,
        }
    }

    /// Whether it stages frames (Linux, [`MIN_DESTINATIONS`]): looked at
    /// before each [`Outbox::stage`], which is not inlined.
    #[inline(always)]
    pub(super) fn is_on(&self) -> bool {
        self.v4.is_some() || self.v6.is_some()
    }

    /// `sendmmsg` calls made so far.
    #[cfg(all(test, target_os = "linux"))]
    pub(super) fn calls(&self) -> u64 {
        self.calls
    }

    /// Stages `bytes`, received at `received`, for destination `id` at `to`;
    /// `false` when the outbox is off for its family or full.
    #[inline]
    pub(super) fn stage(
        &mut self,
        id: DestinationId,
        to: &Address,
        bytes: &[u8],
        received: Instant,
    ) -> bool {
        let family = if to.is_v6() {
            &mut self.v6
        } else {
            &mut self.v4
        };
        let Some(family) = family else {
            return false;
        };
        let i = family.many.len();
        if !family.many.push(to, bytes) {
            return false;
        }
        family.staged[i] = (id, received);
        self.staged = true;
        true
    }

    /// Sends what is staged: one call per family (more only when the kernel
    /// takes part of it), each frame's outcome reported to the core; then
    /// the destinations left with a backlog drain it on their own sockets.
    #[inline]
    pub(super) fn send(
        &mut self,
        links: &mut [Option<Box<Link>>],
        core: &mut Fanout,
        env: &Env<'_>,
    ) {
        if self.staged {
            self.staged = false;
            self.send_staged(links, core, env);
        }
    }

    /// [`Outbox::send`] with frames staged.
    fn send_staged(&mut self, links: &mut [Option<Box<Link>>], core: &mut Fanout, env: &Env<'_>) {
        for family in [&mut self.v4, &mut self.v6].into_iter().flatten() {
            if !family.many.is_empty() {
                send_family(family, links, core, env, &mut self.calls);
            }
        }
        if std::mem::take(&mut self.behind) {
            // Frames that waited behind staged ones (see `Links::deliver`).
            for (i, link) in links.iter_mut().enumerate() {
                let Some(link) = link else { continue };
                if !link.backlog.is_empty() {
                    if let Some(mut report) = core.report(DestinationId::from_index(i)) {
                        link.flush(&mut report, env);
                    }
                }
            }
        }
    }
}

/// One `sendmmsg` of `many` from `from` on; in tests, a socket that would
/// block when [`tests::WOULD_BLOCK`] says so.
#[inline]
fn call(many: &mut Many, socket: &std::net::UdpSocket, from: usize) -> io::Result<usize> {
    #[cfg(test)]
    if tests::WOULD_BLOCK.with(std::cell::Cell::get) {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    many.send(socket, from)
}

/// Sends `family`'s staged frames.
fn send_family(
    family: &mut Family,
    links: &mut [Option<Box<Link>>],
    core: &mut Fanout,
    env: &Env<'_>,
    calls: &mut u64,
) {
    let Family {
        socket,
        many,
        staged,
        refusing,
    } = family;
    let n = many.len();
    let mut to = Staged { links, core, env };
    // Even a call of one frame goes on the shared socket: a destination's
    // frames keep to one flow (a queueing discipline such as fq_codel may
    // send a new flow's datagram ahead of an older flow's).
    let mut from = 0;
    // Calls made again for the frame at `from` after an error.
    let mut tries = 0;
    while from < n {
        *calls += 1;
        match call(many, socket, from) {
            Ok(k) if k > 0 => {
                let at = Instant::now();
                for &(id, received) in &staged[from..from + k] {
                    to.sent(id, received, at);
                }
                from += k;
                tries = 0;
                if from < n || *refusing {
                    // Cut short by an error the kernel doesn't return; or,
                    // while a tool refuses, its refusal of this call, read
                    // now so that it doesn't fail the next.
                    *refusing = to.read_errors(socket) > 0;
                }
            }
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                // An earlier datagram's ICMP error fails the next send on the
                // socket (the socket's pending error, which says nothing of
                // this frame): read the queue and send this one again. Should
                // it still fail, it goes on its destination's own connected
                // socket, whose errors are that destination's alone.
                *refusing |= to.read_errors(socket) > 0;
                if tries < RETRIES {
                    tries += 1;
                    continue;
                }
                let (id, received) = staged[from];
                to.alone(id, many.bytes(from), received);
                from += 1;
                tries = 0;
            }
            // The shared socket would block (or took nothing): the rest goes
            // on each destination's own socket, in order, each waiting in its
            // own backlog only if that socket would block too.
            _ => {
                for (i, &(id, received)) in staged.iter().enumerate().take(n).skip(from) {
                    to.alone(id, many.bytes(i), received);
                }
                from = n;
            }
        }
    }
    many.clear();
}

/// Where a staged frame's outcome goes: its link and the core.
struct Staged<'s, 'e> {
    links: &'s mut [Option<Box<Link>>],
    core: &'s mut Fanout,
    env: &'s Env<'e>,
}

impl Staged<'_, '_> {
    /// Runs `f` on `id`'s link and report, the frame no longer staged.
    #[inline]
    fn with(&mut self, id: DestinationId, f: impl FnOnce(&mut Link, &mut Report<'_>)) {
        if let (Some(Some(link)), Some(mut report)) =
            (self.links.get_mut(id.index()), self.core.report(id))
        {
            link.staged -= 1;
            f(link, &mut report);
        }
    }

    #[inline]
    fn sent(&mut self, id: DestinationId, received: Instant, at: Instant) {
        self.with(id, |link, report| {
            report.held(Fate::Sent);
            if let Some(refused) = report.record_latency(received, at) {
                link.warner.receiving_again(refused);
            }
        });
    }

    /// The one staged frame: on the destination's own socket.
    fn alone(&mut self, id: DestinationId, bytes: &[u8], received: Instant) {
        let env = self.env;
        self.with(id, |link, report| {
            let outcome = link.send(bytes, received, report, env);
            report.held(outcome);
        });
    }

    /// Charges every error queued on `socket` to the destinations at its
    /// address; how many were read.
    fn read_errors(&mut self, socket: &std::net::UdpSocket) -> usize {
        let Staged { links, core, env } = self;
        many::read_errors(socket, |addr, e| {
            for (i, link) in links.iter_mut().enumerate() {
                let Some(link) = link else { continue };
                if same_place(link.warner.addr, addr) {
                    if let Some(mut report) = core.report(DestinationId::from_index(i)) {
                        link.warner.report(&e, &mut report, env.clock);
                    }
                }
            }
        })
    }
}

/// Whether `a` and `b` are the same port of the same host (an IPv4-mapped
/// IPv6 address is its IPv4 one).
fn same_place(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && a.ip().to_canonical() == b.ip().to_canonical()
}

/// The shell's side of the core's [`Sink`]: each destination's link, a UDP
/// one or a broker's.
pub(super) struct Links<'a> {
    pub(super) links: &'a mut [Option<Box<Link>>],
    pub(super) brokers: &'a mut [Option<BrokerLink>],
    /// Where frames wait for the one call that sends them all (Linux, with
    /// [`MIN_DESTINATIONS`]): [`Outbox::send`] after the
    /// core is done.
    pub(super) outbox: &'a mut Outbox,
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
                if self.outbox.is_on()
                    && link.backlog.is_empty()
                    && self.outbox.stage(id, &link.address, bytes, received)
                {
                    link.staged += 1;
                    return Fate::Queued;
                }
                if link.staged > 0 {
                    // Behind its staged frames (the outbox is full, which
                    // its room for a batch to every destination rules out):
                    // its backlog is drained after the outbox's call.
                    debug_assert!(false, "the outbox was full");
                    self.outbox.behind = true;
                    return link.queue(bytes, received, report);
                }
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
    use std::cell::Cell;
    use std::net::UdpSocket;
    #[cfg(target_os = "linux")]
    use std::time::Duration;

    use crate::config::Config;
    use crate::relay::Relay;

    thread_local! {
        /// Set, the outbox's shared socket would block (this thread's
        /// relay only).
        pub(super) static WOULD_BLOCK: Cell<bool> = const { Cell::new(false) };
    }

    #[cfg(target_os = "linux")]
    /// A frame whose first two bytes say which it is.
    fn frame(i: u16) -> Vec<u8> {
        let mut bytes = vec![0xA5; 324];
        bytes[..2].copy_from_slice(&i.to_le_bytes());
        bytes
    }

    #[cfg(target_os = "linux")]
    /// A relay at 4 destinations, and the tools there.
    fn relay_at_four() -> (Relay, Vec<UdpSocket>) {
        let tools: Vec<UdpSocket> = (0..4)
            .map(|_| {
                let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
                socket
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                socket
            })
            .collect();
        let mut toml = "[listen]\naddr = \"127.0.0.1:0\"\n[stats]\ninterval = 0\n".to_owned();
        for tool in &tools {
            toml += &format!(
                "[[destination]]\naddr = \"{}\"\n",
                tool.local_addr().unwrap()
            );
        }
        let config = Config::from_toml(&toml, "batch.toml", &Default::default()).unwrap();
        (Relay::bind(&config).unwrap(), tools)
    }

    #[cfg(target_os = "linux")]
    /// Sends 32 frames to `relay` before it looks, then lets it take them.
    fn thirty_two(relay: &mut Relay) {
        let game = UdpSocket::bind("127.0.0.1:0").unwrap();
        // Queued before the relay looks: one receive takes them all.
        for i in 0..32 {
            game.send_to(&frame(i), relay.local_addr()).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while relay.input_stats().received < 32 && std::time::Instant::now() < deadline {
            relay.poll_once(Some(Duration::from_millis(50)));
        }
        assert_eq!(relay.input_stats().received, 32);
    }

    #[cfg(target_os = "linux")]
    /// Each tool got the 32 frames, whole and in order, and the relay says
    /// it sent 32 to each.
    fn each_got_32(relay: &Relay, tools: &[UdpSocket]) {
        let mut buf = [0u8; 512];
        for (t, tool) in tools.iter().enumerate() {
            for i in 0..32u16 {
                let n = tool.recv(&mut buf).unwrap();
                assert_eq!(&buf[..n], frame(i), "destination {t}, frame {i}");
            }
        }
        for d in &relay.snapshot().destinations {
            assert_eq!(d.stats.sent, 32, "{}", d.name);
            assert_eq!(d.stats.dropped_total(), 0, "{}", d.name);
        }
    }

    /// When the shared socket would block, the frames go on each
    /// destination's own socket, in order: none is lost, none overtakes.
    #[cfg(target_os = "linux")]
    #[test]
    fn when_the_shared_socket_would_block_each_destination_s_own_socket_sends_in_order() {
        let (mut relay, tools) = relay_at_four();
        WOULD_BLOCK.with(|w| w.set(true));
        thirty_two(&mut relay);
        WOULD_BLOCK.with(|w| w.set(false));
        assert_eq!(
            relay.shell.out.outbox.calls(),
            1,
            "the one call that would block"
        );
        each_got_32(&relay, &tools);
    }

    /// A batch of 32 datagrams to 4 destinations is one `sendmmsg` of 128
    /// messages, and each destination gets the 32, whole and in order.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_batch_of_32_to_4_destinations_goes_in_one_call_whole_and_in_order() {
        let (mut relay, tools) = relay_at_four();
        assert!(relay.shell.out.outbox.is_on());
        thirty_two(&mut relay);
        assert_eq!(
            relay.shell.out.outbox.calls(),
            1,
            "one call for 128 datagrams"
        );
        each_got_32(&relay, &tools);
    }

    /// One destination: no outbox, each frame's one send as before.
    #[test]
    fn with_one_destination_the_outbox_is_off() {
        let tool = UdpSocket::bind("127.0.0.1:0").unwrap();
        let toml = format!(
            "[listen]\naddr = \"127.0.0.1:0\"\n[[destination]]\naddr = \"{}\"\n",
            tool.local_addr().unwrap()
        );
        let config = Config::from_toml(&toml, "one.toml", &Default::default()).unwrap();
        let relay = Relay::bind(&config).unwrap();
        assert!(!relay.shell.out.outbox.is_on());
    }
}
