//! Socket builders (socket2): buffer sizes, non-blocking, dual-stack, the
//! platform's quirks ([`crate::platform`]); the one ephemeral bind of a socket
//! that sends ([`ephemeral`], [`connect`]) and the one send with its retries
//! ([`send_retrying`]), for the relay, `replay` and `simulate` alike; and the
//! hint for a port in use ([`PortInUse`]).

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use log::{debug, warn};
use socket2::{Domain, Protocol, Socket, Type};

use crate::platform;

/// Receive buffer asked for on the listening socket: what absorbs a burst while
/// the loop is busy or off the CPU (the end-to-end bench lost packets at 150,000/s
/// with 1 MiB on a busy 2-core machine). The OS may grant less (Linux caps it at
/// `net.core.rmem_max`); [`bind_listener`] reports what it got.
pub const RECV_BUFFER: usize = 4 << 20;
/// Below this granted receive buffer the relay warns at start (issue 3 asks for
/// at least 1 MiB where the OS allows).
pub const MIN_RECV_BUFFER: usize = 1 << 20;
/// Send buffer asked for on each destination socket.
pub const SEND_BUFFER: usize = 256 << 10;

/// Binds the non-blocking listening socket. An unspecified IPv6 address listens
/// on IPv4 too. Returns the socket and the receive buffer size the OS granted.
pub fn bind_listener(addr: SocketAddr) -> io::Result<(std::net::UdpSocket, usize)> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort, like the buffer size: the relay still works without them.
    if let Err(e) = platform::prepare_listener(&socket) {
        warn!("{addr}: cannot keep other programs off this port: {e}");
    }
    prepare(&socket, addr);
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        // Windows defaults to IPv6 only; ask for both where the OS allows.
        let _ = socket.set_only_v6(false);
    }
    // Best effort: a smaller buffer still works, it only holds fewer frames.
    let _ = socket.set_recv_buffer_size(RECV_BUFFER);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    let granted = socket.recv_buffer_size().unwrap_or(0);
    Ok((socket.into(), granted))
}

/// A non-blocking UDP socket connected to `dest`, so that its errors (a closed
/// port's ICMP) are reported on it alone.
pub fn connect_destination(dest: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(dest), Type::DGRAM, Some(Protocol::UDP))?;
    prepare(&socket, dest);
    let _ = socket.set_send_buffer_size(SEND_BUFFER);
    socket.bind(&ephemeral(dest.ip()).into())?;
    socket.set_nonblocking(true)?;
    socket.connect(&dest.into())?;
    Ok(socket.into())
}

/// What a socket that sends to `ip` binds: every address of its family (IPv4
/// for an IPv4-mapped one), on a port the OS picks.
pub fn ephemeral(ip: IpAddr) -> SocketAddr {
    let any: IpAddr = if ip.to_canonical().is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    SocketAddr::new(any, 0)
}

/// A blocking UDP socket on an [`ephemeral`] port, connected to `to` so that
/// the OS reports when nothing listens there (on a later send).
pub fn connect(to: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind(ephemeral(to.ip()))?;
    socket.connect(to)?;
    Ok(socket)
}

/// Sends one datagram with `send` on a connected socket. A send cut short by
/// a signal (`Interrupted`) is made again. Any other error goes to `refused`,
/// with whether one more try is left, which says whether it is an earlier
/// datagram's refusal: the ICMP "port unreachable" of a closed port comes back
/// on the next send (Windows calls it a reset), which it fails without sending,
/// so that send is made once more (Linux: that retry is what delivers the first
/// frame after a consumer comes back). The last error is returned.
#[inline]
pub fn send_retrying<T>(
    mut send: impl FnMut() -> io::Result<T>,
    mut refused: impl FnMut(&io::Error, bool) -> bool,
) -> io::Result<T> {
    let mut retry_left = true;
    loop {
        match send() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if refused(&e, retry_left) && retry_left => retry_left = false,
            result => return result,
        }
    }
}

/// The platform's settings for every UDP socket the relay opens (see
/// [`platform::prepare_udp_socket`]). A failure is only logged at debug level:
/// the relay counts and survives the errors these settings avoid, and the user
/// can do nothing about it (Wine 8, for one, has no `SIO_UDP_NETRESET`).
fn prepare(socket: &Socket, addr: SocketAddr) {
    if let Err(e) = platform::prepare_udp_socket(socket) {
        debug!("{addr}: cannot turn off ICMP error reports on its socket: {e}");
    }
}

/// What to do about a listening address the OS refused, as a person reads it:
/// `port 5400 is already in use. Another forza-relay, or a tool such as SimHub,
/// may be listening there: …`. The one wording of these hints: the relay's
/// start error and every tool that listens (`watch`, `record`) use it.
pub struct PortInUse<'a> {
    /// The address that could not be bound.
    pub addr: SocketAddr,
    /// Why.
    pub error: &'a io::Error,
    /// The process holding the port, as a person reads it (`SimHubWPF.exe
    /// (SimHub, pid 4312)`), when whoever words it could find out (issue 18:
    /// `setup`'s socket table, which knows the tools, above this module).
    pub holder: Option<String>,
}

impl<'a> PortInUse<'a> {
    /// The hint for `error` binding `addr`.
    pub fn new(addr: SocketAddr, error: &'a io::Error) -> PortInUse<'a> {
        PortInUse {
            addr,
            error,
            holder: None,
        }
    }

    /// The same, naming `holder` as the process that holds the port.
    pub fn held_by(self, holder: Option<impl fmt::Display>) -> PortInUse<'a> {
        PortInUse {
            holder: holder.map(|h| h.to_string()),
            ..self
        }
    }
}

impl fmt::Display for PortInUse<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (addr, e) = (self.addr, self.error);
        if let Some(holder) = &self.holder {
            return write!(
                f,
                "port {} is in use by {holder}: stop it, or choose another port (and point \
                 the game's Data Out at it). \"forza-relay doctor\" says more.",
                addr.port()
            );
        }
        match e.kind() {
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
                "permission denied ({e}). Ports below 1024 need administrator \
                 rights, and Windows reserves some ranges: choose another port."
            ),
            _ => write!(f, "{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_binds_any_address_of_its_destination_s_family() {
        let v4: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let v6: SocketAddr = "[::]:0".parse().unwrap();
        assert_eq!(ephemeral("192.168.1.20".parse().unwrap()), v4);
        assert_eq!(ephemeral("::ffff:127.0.0.1".parse().unwrap()), v4);
        assert_eq!(ephemeral("::1".parse().unwrap()), v6);
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = receiver.local_addr().unwrap();
        let socket = connect(to).unwrap();
        assert_eq!(socket.peer_addr().unwrap(), to);
        assert_ne!(socket.local_addr().unwrap().port(), 0);
    }

    /// A refusal is tried once more, an interruption until it goes, and
    /// `refused` hears every other error with whether a try is left.
    #[test]
    fn a_send_is_retried_once_after_a_refusal_and_after_every_interruption() {
        let kinds = |list: &[io::ErrorKind]| {
            let mut results: Vec<io::Result<usize>> =
                list.iter().map(|&k| Err(io::Error::from(k))).collect();
            results.push(Ok(7));
            results.reverse();
            results
        };
        let refused = io::ErrorKind::ConnectionRefused;
        let interrupted = io::ErrorKind::Interrupted;
        for (errors, heard, result) in [
            (vec![], vec![], Ok(7)),
            (vec![interrupted, interrupted], vec![], Ok(7)),
            (vec![refused], vec![(refused, true)], Ok(7)),
            (
                vec![refused, interrupted, refused],
                vec![(refused, true), (refused, false)],
                Err(refused),
            ),
            (
                vec![io::ErrorKind::WouldBlock],
                vec![(io::ErrorKind::WouldBlock, true)],
                Err(io::ErrorKind::WouldBlock),
            ),
        ] {
            let mut sends = kinds(&errors);
            let mut calls = Vec::new();
            let got = send_retrying(
                || sends.pop().expect("no send after the last result"),
                |e, left| {
                    calls.push((e.kind(), left));
                    e.kind() == refused
                },
            );
            assert_eq!(got.map_err(|e| e.kind()), result, "{errors:?}");
            assert_eq!(calls, heard, "{errors:?}");
        }
    }

    #[test]
    fn a_port_in_use_says_who_may_hold_it() {
        let held = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind a port");
        let addr = held.local_addr().expect("an address");
        let error = bind_listener(addr).expect_err("the port is held");
        let text = PortInUse {
            addr,
            error: &error,
            holder: None,
        }
        .to_string();
        assert!(
            text.starts_with(&format!("port {} is already in use.", addr.port())),
            "{text}"
        );
    }
}
