//! Socket builders (socket2): buffer sizes, non-blocking, dual-stack.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};

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
    let _ = socket.set_send_buffer_size(SEND_BUFFER);
    let any: IpAddr = if dest.is_ipv6() {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    socket.bind(&SocketAddr::new(any, 0).into())?;
    socket.set_nonblocking(true)?;
    socket.connect(&dest.into())?;
    Ok(socket.into())
}
