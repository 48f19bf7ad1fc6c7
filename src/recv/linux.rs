//! Linux: `recvmmsg` takes up to [`Batch::SIZE`] datagrams in one system call,
//! each with the moment the kernel received it (`SO_TIMESTAMPNS`, a control
//! message in a buffer made at start-up: no extra call, nothing allocated),
//! and can be the wait itself ([`Batch::wait`]).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime};

use super::MAX_DATAGRAM;

/// Room for the control messages of one datagram: a `timespec` needs 32 bytes
/// (`CMSG_SPACE(16)`) on 64-bit Linux; the rest is slack.
const CONTROL_LEN: usize = 64;

/// One datagram's control-message buffer, aligned as `cmsghdr` asks.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control([u8; CONTROL_LEN]);

/// [`Batch::wait`] waits inside the receive.
pub const WAITS: bool = true;

/// Up to [`Batch::SIZE`] received datagrams, in buffers made at start-up. The
/// buffers are zeroed pages the OS maps only when written, so the memory a batch
/// really uses follows the sizes received.
pub struct Batch {
    /// `SIZE` slots of `MAX_DATAGRAM` bytes.
    bufs: Box<[u8]>,
    addrs: Box<[libc::sockaddr_storage]>,
    controls: Box<[Control]>,
    lens: [usize; Batch::SIZE],
    /// The kernel's receive time of each datagram, when it gave one.
    received: [Option<SystemTime>; Batch::SIZE],
}

/// Asks the kernel to stamp every datagram `socket` receives with the moment
/// it arrived (`SO_TIMESTAMPNS`, CLOCK_REALTIME), read by [`Batch::received`].
pub fn enable_receive_times(socket: &mio::net::UdpSocket) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: the option value points to a c_int that lives across the call,
    // and the length given is its size.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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
            controls: vec![Control([0; CONTROL_LEN]); Self::SIZE].into_boxed_slice(),
            lens: [0; Self::SIZE],
            received: [None; Self::SIZE],
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
        let slots = msgs
            .iter_mut()
            .zip(&mut iovecs)
            .zip(self.addrs.iter_mut())
            .zip(self.controls.iter_mut());
        for (((msg, iov), addr), control) in slots {
            msg.msg_hdr.msg_name = (addr as *mut libc::sockaddr_storage).cast();
            msg.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            msg.msg_hdr.msg_iov = iov;
            msg.msg_hdr.msg_iovlen = 1;
            msg.msg_hdr.msg_control = control.0.as_mut_ptr().cast();
            msg.msg_hdr.msg_controllen = CONTROL_LEN as _;
        }
        // SAFETY: every msg_name, iovec and msg_control points into self.addrs,
        // self.bufs and self.controls, which outlive the call and are not
        // otherwise borrowed during it; the lengths given are those of the
        // buffers; a null timeout is allowed.
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
        for ((len, received), msg) in self.lens.iter_mut().zip(&mut self.received).zip(&msgs[..n]) {
            *len = msg.msg_len as usize;
            *received = receive_time(&msg.msg_hdr);
        }
        Ok(n)
    }

    /// Datagram `i` of the last batch and its sender.
    pub fn datagram(&self, i: usize) -> (&[u8], SocketAddr) {
        let start = i * MAX_DATAGRAM;
        let bytes = &self.bufs[start..start + self.lens[i].min(MAX_DATAGRAM)];
        (bytes, socket_addr(&self.addrs[i]))
    }

    /// When the kernel received datagram `i` of the last batch (on the wall
    /// clock); `None` when it didn't say ([`enable_receive_times`] not called
    /// or refused).
    pub fn received(&self, i: usize) -> Option<SystemTime> {
        self.received.get(i).copied().flatten()
    }
}

/// The `SCM_TIMESTAMPNS` control message of a message `recvmmsg` filled in.
fn receive_time(hdr: &libc::msghdr) -> Option<SystemTime> {
    if hdr.msg_flags & libc::MSG_CTRUNC != 0 {
        return None;
    }
    // SAFETY: `hdr` was filled in by the kernel: msg_control points to this
    // slot's buffer in Batch::controls, and msg_controllen says how much of it
    // the kernel wrote (0 when nothing), which CMSG_FIRSTHDR and CMSG_NXTHDR
    // stay within.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(hdr) };
    // SAFETY: CMSG_LEN only computes a length.
    let want_len = unsafe { libc::CMSG_LEN(std::mem::size_of::<libc::timespec>() as _) } as usize;
    while !cmsg.is_null() {
        // SAFETY: a non-null header from CMSG_FIRSTHDR/CMSG_NXTHDR lies wholly
        // within the control buffer.
        let c = unsafe { &*cmsg };
        if c.cmsg_level == libc::SOL_SOCKET
            && c.cmsg_type == libc::SCM_TIMESTAMPNS
            && c.cmsg_len as usize >= want_len
        {
            // SAFETY: the header says a timespec follows it, within the
            // buffer; read_unaligned makes no assumption on its alignment.
            let ts: libc::timespec =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            let secs = u64::try_from(ts.tv_sec).ok()?;
            let nanos = u32::try_from(ts.tv_nsec).ok()?;
            return SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos));
        }
        // SAFETY: as for CMSG_FIRSTHDR: the next header, or null at the end.
        cmsg = unsafe { libc::CMSG_NXTHDR(hdr, cmsg) };
    }
    None
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
