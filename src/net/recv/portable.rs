//! Every platform but Linux: one `recv_from` per batch, with no receive time
//! from the OS (the caller takes the moment it read the batch).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::SystemTime;

use super::MAX_DATAGRAM;

/// [`Batch::wait`] is not available: the relay waits in its poll.
pub const WAITS: bool = false;

/// One received datagram at a time, in a buffer made at start-up.
pub struct Batch {
    buf: Box<[u8]>,
    len: usize,
    from: SocketAddr,
}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

impl Batch {
    /// Datagrams one call can return.
    pub const SIZE: usize = 1;

    /// A batch with its buffer allocated.
    pub fn new() -> Self {
        Batch {
            buf: vec![0u8; MAX_DATAGRAM].into_boxed_slice(),
            len: 0,
            from: (Ipv4Addr::UNSPECIFIED, 0).into(),
        }
    }

    /// Receives one datagram; `WouldBlock` when none is queued.
    pub fn recv(&mut self, socket: &mio::net::UdpSocket) -> io::Result<usize> {
        let (len, from) = socket.recv_from(&mut self.buf)?;
        self.len = len;
        self.from = from;
        Ok(1)
    }

    /// Not available here ([`WAITS`] is false): always `Unsupported`.
    pub fn wait(&mut self, _socket: &mio::net::UdpSocket) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Datagram `i` of the last batch and its sender.
    #[inline]
    pub fn datagram(&self, i: usize) -> (&[u8], SocketAddr) {
        debug_assert_eq!(i, 0);
        (&self.buf[..self.len], self.from)
    }

    /// The port datagram `i` of the last batch came from.
    #[inline]
    pub fn sender_port(&self, i: usize) -> u16 {
        debug_assert_eq!(i, 0);
        self.from.port()
    }

    /// When the OS received datagram `i`: never known here.
    pub fn received(&self, _i: usize) -> Option<SystemTime> {
        None
    }
}

/// Sends `bytes` to `to` from the listening socket, which is never in
/// blocking mode here: the answer to a status query ([`crate::report::query`]).
pub fn send_now(socket: &mio::net::UdpSocket, bytes: &[u8], to: SocketAddr) -> io::Result<usize> {
    socket.send_to(bytes, to)
}

/// Sends `bytes` on the connected `socket`.
#[inline]
pub fn send(socket: &mio::net::UdpSocket, bytes: &[u8]) -> io::Result<usize> {
    socket.send(bytes)
}

/// Kernel receive times are read on Linux only.
pub fn enable_receive_times(_socket: &mio::net::UdpSocket) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}
