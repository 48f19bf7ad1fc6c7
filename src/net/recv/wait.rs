//! Waiting inside the receive (issue 16): the relay's thread sleeps in the
//! listening socket's own receive ([`Batch::wait`](super::Batch::wait)) rather
//! than in a poll followed by a receive, so a packet costs one system call plus
//! one per destination.
//!
//! Two things make that wait safe:
//! - its end: the socket's `SO_RCVTIMEO`, kept at the next deadline
//!   ([`RecvTimeout`]). Setting it is a system call, so it is set again only when
//!   the wait it would allow ends too early or more than a slack too late;
//! - its wake-up: other threads can't wake a thread asleep in a receive through
//!   the poll's waker, so they send the listening socket a datagram from the
//!   relay's own socket on this computer ([`WakeSender`]), carrying a cookie
//!   drawn at start. [`WakeFilter`] tells it apart from every other datagram; it
//!   is never forwarded, tapped or counted as input.
//!
//! Portable code: the `unsafe` receive stays in `linux.rs`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, SystemTime};

/// Bytes of the wake-up datagram: a cookie drawn per socket pair.
const COOKIE_LEN: usize = 16;

/// The shortest `SO_RCVTIMEO` set: a zero one would mean "no timeout".
const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// Sends the wake-up datagram to a listening socket (held by
/// [`crate::relay::Control`], used from any thread).
#[derive(Debug)]
pub struct WakeSender {
    socket: UdpSocket,
    cookie: [u8; COOKIE_LEN],
}

impl WakeSender {
    /// Sends the wake-up. It never blocks; a failure means the relay notices
    /// the command at its next datagram or deadline instead.
    pub fn wake(&self) -> io::Result<()> {
        self.socket.send(&self.cookie).map(drop)
    }
}

/// Recognises the wake-up datagram among those received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeFilter {
    from: SocketAddr,
    cookie: [u8; COOKIE_LEN],
}

impl WakeFilter {
    /// True for the wake-up datagram: sent from the wake-up socket's address,
    /// holding its cookie, nothing else.
    pub fn is_wake(&self, bytes: &[u8], from: SocketAddr) -> bool {
        from.port() == self.from.port() && from.ip() == self.from.ip() && bytes == self.cookie
    }

    /// The port the wake-up comes from: for every other datagram, comparing
    /// it with the sender's port alone decides (see
    /// [`Batch::sender_port`](super::Batch::sender_port)).
    #[inline]
    pub fn port(&self) -> u16 {
        self.from.port()
    }
}

/// A wake-up socket for a socket listening on `listen`: bound to the address
/// the wake-up is sent to (loopback when `listen` is every address), so its
/// datagrams come from an address known in advance.
pub fn wake_pair(listen: SocketAddr) -> io::Result<(WakeSender, WakeFilter)> {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(ip) if ip.is_unspecified() => Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    let socket = UdpSocket::bind(SocketAddr::new(ip, 0))?;
    socket.connect(SocketAddr::new(ip, listen.port()))?;
    socket.set_nonblocking(true)?;
    let from = socket.local_addr()?;
    let cookie = cookie();
    Ok((WakeSender { socket, cookie }, WakeFilter { from, cookie }))
}

/// Sixteen bytes no other program can guess: SipHash under the process's
/// random keys (std draws them from the OS), over the time.
fn cookie() -> [u8; COOKIE_LEN] {
    let time = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut cookie = [0u8; COOKIE_LEN];
    for half in cookie.chunks_exact_mut(8) {
        // Each RandomState has keys of its own.
        let mut h = RandomState::new().build_hasher();
        h.write_u128(time);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    cookie
}

/// Puts the listening socket in blocking mode, for [`Batch::wait`]
/// (super::Batch::wait). On Linux the poll's receives say `MSG_DONTWAIT`
/// themselves, so the socket serves both.
pub fn set_blocking(socket: &mio::net::UdpSocket) -> io::Result<()> {
    socket2::SockRef::from(socket).set_nonblocking(false)
}

/// The listening socket's `SO_RCVTIMEO`, as last set.
#[derive(Debug, Default)]
pub struct RecvTimeout {
    /// `None`: no timeout (as a new socket has).
    set: Option<Duration>,
}

impl RecvTimeout {
    /// Makes the next wait on `socket` end no later than `slack` after `want`
    /// from now (`None`: only with a datagram) and, unless packets are
    /// `flowing`, no sooner than `want`, setting the socket option only when
    /// the one set doesn't already.
    ///
    /// While packets flow (the last wait ended with a datagram sooner than
    /// `slack`), the next one ends the wait long before any timeout, so ending
    /// early costs nothing: a timeout of `slack` itself is never late however
    /// near the deadline comes, and it stays set, with no `setsockopt` while
    /// packets flow. The first wait after they stop ends within `slack` and
    /// finds them stopped; the waits after it are exact again.
    pub fn arm(
        &mut self,
        socket: &mio::net::UdpSocket,
        want: Option<Duration>,
        slack: Duration,
        flowing: bool,
    ) -> io::Result<()> {
        let want = want.map(|w| w.max(MIN_TIMEOUT));
        let Some(next) = self.next(want, slack, flowing) else {
            return Ok(());
        };
        socket2::SockRef::from(socket).set_read_timeout(next)?;
        self.set = next;
        Ok(())
    }

    /// True when the timeout set is at most `slack`: while packets flow,
    /// [`RecvTimeout::arm`] then changes nothing for any deadline, so the
    /// caller need not work one out.
    #[inline]
    pub fn holds_while_flowing(&self, slack: Duration) -> bool {
        self.set.is_some_and(|set| set <= slack.max(MIN_TIMEOUT))
    }

    /// The timeout to set for a wait of `want`; `None` when the one set will
    /// do.
    fn next(
        &self,
        want: Option<Duration>,
        slack: Duration,
        flowing: bool,
    ) -> Option<Option<Duration>> {
        match (self.set, want) {
            (None, None) => None,
            (Some(set), Some(want))
                if set <= want.saturating_add(slack) && (flowing || set >= want) =>
            {
                None
            }
            (_, Some(_)) if flowing => Some(Some(slack.max(MIN_TIMEOUT))),
            (_, want) => Some(want),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wake_up_is_known_by_its_sender_and_cookie_only() {
        let listener = UdpSocket::bind("127.0.0.1:0").unwrap();
        listener
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let listen = listener.local_addr().unwrap();
        let (sender, filter) =
            wake_pair(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), listen.port())).unwrap();
        sender.wake().unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = listener.recv_from(&mut buf).unwrap();
        assert!(filter.is_wake(&buf[..n], from));
        assert_eq!(filter.port(), from.port());

        // The same bytes from elsewhere, or other bytes from the same socket.
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(!filter.is_wake(&buf[..n], other.local_addr().unwrap()));
        assert!(!filter.is_wake(&buf[..n - 1], from));
        let mut changed = buf;
        changed[0] ^= 1;
        assert!(!filter.is_wake(&changed[..n], from));

        let (_, another) = wake_pair(listen).unwrap();
        assert_ne!(another.cookie, filter.cookie, "a cookie per pair");
    }

    #[test]
    fn a_timeout_within_the_slack_holds_for_any_deadline_while_packets_flow() {
        let ms = Duration::from_millis;
        let slack = ms(50);
        for set in [ms(1), ms(30), ms(50)] {
            let t = RecvTimeout { set: Some(set) };
            assert!(t.holds_while_flowing(slack));
            for want in [ms(1), ms(49), ms(50), ms(10_000)] {
                assert_eq!(
                    t.next(Some(want), slack, true),
                    None,
                    "{set:?} for {want:?}"
                );
            }
        }
        assert!(!RecvTimeout { set: Some(ms(51)) }.holds_while_flowing(slack));
        assert!(!RecvTimeout { set: None }.holds_while_flowing(slack));
    }

    #[test]
    fn the_timeout_is_set_again_only_when_the_wait_would_end_too_soon_or_too_late() {
        let ms = Duration::from_millis;
        let slack = ms(50);
        let t = |set| RecvTimeout { set };
        let needs = |set, want| t(set).next(want, slack, false).is_some();
        assert!(!needs(None, None));
        assert!(needs(None, Some(ms(1_000))));
        assert!(needs(Some(ms(1_000)), None));
        assert!(!needs(Some(ms(1_000)), Some(ms(1_000))));
        assert!(!needs(Some(ms(1_000)), Some(ms(950))), "within the slack");
        assert!(needs(Some(ms(1_000)), Some(ms(949))), "too late");
        assert!(needs(Some(ms(1_000)), Some(ms(1_001))), "too soon");
        assert_eq!(
            t(Some(ms(1_000))).next(Some(ms(949)), slack, false),
            Some(Some(ms(949))),
            "exact"
        );
    }

    #[test]
    fn while_packets_flow_the_timeout_is_the_slack_and_stays_as_the_deadline_nears() {
        let ms = Duration::from_millis;
        let slack = ms(50);
        let t = |set| RecvTimeout { set };
        // A timeout set for the whole interval becomes too late as the
        // deadline nears: the slack replaces it, never late, ...
        assert_eq!(
            t(Some(ms(1_000))).next(Some(ms(949)), slack, true),
            Some(Some(slack))
        );
        assert_eq!(
            t(None).next(Some(ms(1_000)), slack, true),
            Some(Some(slack))
        );
        // ... and stays, whatever is left of the interval, ending early at most.
        for left in [1_000, 500, 49, 1, 0] {
            assert_eq!(
                t(Some(slack)).next(Some(ms(left)), slack, true),
                None,
                "{left} ms"
            );
        }
        assert_eq!(t(Some(ms(1_000))).next(Some(ms(960)), slack, true), None);
        // Once packets stop, the wait is exact again.
        assert_eq!(
            t(Some(slack)).next(Some(ms(700)), slack, false),
            Some(Some(ms(700)))
        );
    }

    #[test]
    fn an_armed_socket_stops_waiting() {
        let std_socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let socket = mio::net::UdpSocket::from_std(std_socket);
        set_blocking(&socket).unwrap();
        let mut timeout = RecvTimeout::default();
        timeout
            .arm(&socket, Some(Duration::ZERO), Duration::ZERO, false)
            .unwrap();
        assert_eq!(
            timeout.set,
            Some(MIN_TIMEOUT),
            "never zero: that means none"
        );
        let mut buf = [0u8; 16];
        let e = socket.recv_from(&mut buf).unwrap_err();
        // Windows says "timed out".
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{e}"
        );
    }
}
