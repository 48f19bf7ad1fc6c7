//! No `sendmmsg` here: nothing is ever staged ([`Many::push`] says no), and
//! each destination sends on its own connected socket.

use std::io;
use std::net::SocketAddr;

/// Whether this platform sends many datagrams in one call.
pub const AVAILABLE: bool = false;

/// A destination's address (only kept).
#[derive(Debug, Clone, Copy)]
pub struct Address(SocketAddr);

impl Address {
    pub fn new(addr: SocketAddr) -> Address {
        Address(addr)
    }

    pub fn is_v6(&self) -> bool {
        self.0.is_ipv6()
    }
}

/// Holds nothing.
pub struct Many;

impl Many {
    pub fn new(_capacity: usize) -> Many {
        Many
    }

    pub fn len(&self) -> usize {
        0
    }

    pub fn is_empty(&self) -> bool {
        true
    }

    pub fn push(&mut self, _to: &Address, _bytes: &[u8]) -> bool {
        false
    }

    pub fn bytes(&self, _i: usize) -> &[u8] {
        &[]
    }

    pub fn send(&mut self, _socket: &std::net::UdpSocket, _from: usize) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    pub fn clear(&mut self) {}
}

/// No shared sender here.
pub fn sender(_v6: bool) -> io::Result<std::net::UdpSocket> {
    Err(io::ErrorKind::Unsupported.into())
}

/// No error queue here.
pub fn read_errors(_socket: &std::net::UdpSocket, _f: impl FnMut(SocketAddr, io::Error)) -> usize {
    0
}
