//! Linux: `recvmmsg` takes up to [`Batch::SIZE`] datagrams in one system call,
//! and can be the wait itself ([`Batch::wait`]).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

use super::MAX_DATAGRAM;

/// [`Batch::wait`] waits inside the receive.
pub const WAITS: bool = true;

/// Up to [`Batch::SIZE`] received datagrams, in buffers made at start-up. The
/// buffers are zeroed pages the OS maps only when written, so the memory a batch
/// really uses follows the sizes received.
pub struct Batch {
    /// `SIZE` slots of `MAX_DATAGRAM` bytes.
    bufs: Box<[u8]>,
    addrs: Box<[libc::sockaddr_storage]>,
    lens: [usize; Batch::SIZE],
}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

impl Batch {
    /// Datagrams one call can return.
    pub const SIZE: usize = 32;

    /// A batch with its buffers allocated.
    pub fn new() -> Self {
        // SAFETY: sockaddr_storage is a plain C struct of integers, for which all
        // zero bytes is a valid value.
        let empty: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        Batch {
            bufs: vec![0u8; Self::SIZE * MAX_DATAGRAM].into_boxed_slice(),
            addrs: vec![empty; Self::SIZE].into_boxed_slice(),
            lens: [0; Self::SIZE],
        }
    }

    /// Receives what is queued, up to [`Batch::SIZE`] datagrams, in one call;
    /// `WouldBlock` when nothing is.
    pub fn recv(&mut self, socket: &mio::net::UdpSocket) -> io::Result<usize> {
        self.receive(socket, libc::MSG_DONTWAIT)
    }

    /// Waits inside the receive for the first datagram, then takes what else is
    /// queued, up to [`Batch::SIZE`], in the same call (`MSG_WAITFORONE`). The
    /// socket must be in blocking mode; its `SO_RCVTIMEO` bounds the wait, after
    /// which the error is `WouldBlock` (see [`super::wait`]).
    pub fn wait(&mut self, socket: &mio::net::UdpSocket) -> io::Result<usize> {
        self.receive(socket, libc::MSG_WAITFORONE)
    }

    /// One `recvmmsg` with `flags`.
    fn receive(&mut self, socket: &mio::net::UdpSocket, flags: libc::c_int) -> io::Result<usize> {
        let mut slots = self.bufs.chunks_exact_mut(MAX_DATAGRAM);
        let mut iovecs: [libc::iovec; Self::SIZE] = std::array::from_fn(|_| {
            let slot = slots.next().expect("bufs holds SIZE slots");
            libc::iovec {
                iov_base: slot.as_mut_ptr().cast(),
                iov_len: slot.len(),
            }
        });
        // SAFETY: mmsghdr is a plain C struct of integers and pointers, for which
        // all zero bytes (null pointers, zero lengths) is a valid value.
        let mut msgs: [libc::mmsghdr; Self::SIZE] = unsafe { std::mem::zeroed() };
        for ((msg, iov), addr) in msgs.iter_mut().zip(&mut iovecs).zip(self.addrs.iter_mut()) {
            msg.msg_hdr.msg_name = (addr as *mut libc::sockaddr_storage).cast();
            msg.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            msg.msg_hdr.msg_iov = iov;
            msg.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: every msg_name and iovec points into self.addrs and self.bufs,
        // which outlive the call and are not otherwise borrowed during it; the
        // lengths given are those of the buffers; a null timeout is allowed.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                msgs.as_mut_ptr(),
                Self::SIZE as _,
                flags as _,
                std::ptr::null_mut(),
            )
        };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        for (len, msg) in self.lens.iter_mut().zip(&msgs[..n]) {
            *len = msg.msg_len as usize;
        }
        Ok(n)
    }

    /// Datagram `i` of the last batch and its sender.
    pub fn datagram(&self, i: usize) -> (&[u8], SocketAddr) {
        let start = i * MAX_DATAGRAM;
        let bytes = &self.bufs[start..start + self.lens[i].min(MAX_DATAGRAM)];
        (bytes, socket_addr(&self.addrs[i]))
    }
}

/// The address the kernel wrote; 0.0.0.0:0 for a family that isn't IP (a UDP
/// socket never reports one).
fn socket_addr(storage: &libc::sockaddr_storage) -> SocketAddr {
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the kernel wrote a sockaddr_in; storage is
            // large and aligned enough for any socket address.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )
            .into()
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )
            .into()
        }
        _ => (Ipv4Addr::UNSPECIFIED, 0).into(),
    }
}
