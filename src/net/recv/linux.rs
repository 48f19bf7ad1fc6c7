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
///
/// The message headers `recvmmsg` reads are built once, pointing into the
/// batch's own buffers: a receive touches only the slots it fills, so the
/// memory a packet costs stays a few cache lines (at 360 packets/s every packet
/// meets caches the game and the kernel have used meanwhile).
pub struct Batch {
    /// `SIZE` slots of `MAX_DATAGRAM` bytes.
    bufs: Box<[u8]>,
    /// Each slot's header, as `recvmmsg` takes them: in one array.
    msgs: Box<[libc::mmsghdr]>,
    /// What each header points to, besides its buffer.
    slots: Box<[Slot]>,
    /// Headers the last receive filled in, whose lengths the kernel changed.
    filled: usize,
    lens: [usize; Batch::SIZE],
    /// The kernel's receive time of each datagram, when it gave one.
    received: [Option<SystemTime>; Batch::SIZE],
}

/// One datagram's buffer vector, sender address and control messages.
#[repr(C)]
struct Slot {
    iov: libc::iovec,
    addr: libc::sockaddr_storage,
    control: Control,
}

// SAFETY: the raw pointers in `msgs` and `slots` point only into the batch's
// own boxed buffers, whose heap memory moves with the batch (a Box's contents
// never move) and is reached by nothing else: sending the batch to another
// thread sends everything they point to.
unsafe impl Send for Batch {}

/// Sends `bytes` to `to` from the listening socket without waiting, whether
/// the socket is in blocking mode (for [`Batch::wait`]) or not: the answer to
/// a status query ([`crate::report::query`]).
pub fn send_now(socket: &mio::net::UdpSocket, bytes: &[u8], to: SocketAddr) -> io::Result<usize> {
    socket2::SockRef::from(socket).send_to_with_flags(bytes, &to.into(), libc::MSG_DONTWAIT)
}

/// Sends `bytes` on the connected `socket`: the `sendto` system call made
/// through glibc's `syscall`, not its `send`. As soon as the process has a
/// second thread, glibc wraps every cancellation point in
/// `__pthread_enable/disable_asynccancel`, which cost as much as the call's
/// own code (issue 26); the relay never cancels a thread. `MSG_NOSIGNAL`,
/// as std's `send` says.
#[inline]
pub fn send(socket: &mio::net::UdpSocket, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length are those of a live slice the kernel
    // only reads; a null address of length 0 is what `send` passes for a
    // connected socket. Every argument is widened to the `long` the
    // variadic `syscall` reads.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(socket.as_raw_fd()),
            bytes.as_ptr(),
            bytes.len(),
            libc::c_long::from(libc::MSG_NOSIGNAL),
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::c_long,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// One `recvmmsg` system call on `fd` into the [`Batch::SIZE`] headers at
/// `msgs`, with no timeout: made through glibc's `syscall`, not its
/// `recvmmsg`, past the cancellation bookkeeping (see [`send`]). Never
/// inlined: its entry is where the relay bench's counts see a wake-up start
/// (benches/relay/valgrind.rs).
///
/// # Safety
///
/// As for `recvmmsg(2)`: `msgs` points to `Batch::SIZE` headers whose names,
/// buffers and control buffers are valid for writes of the lengths they give.
#[inline(never)]
unsafe fn recvmmsg(fd: libc::c_int, msgs: *mut libc::mmsghdr, flags: libc::c_int) -> libc::c_long {
    // SAFETY: the caller vouches for the headers; a null timeout is allowed.
    // Every integer is widened to the `long` the variadic `syscall` reads.
    unsafe {
        libc::syscall(
            libc::SYS_recvmmsg,
            libc::c_long::from(fd),
            msgs,
            Batch::SIZE as libc::c_long,
            libc::c_long::from(flags),
            std::ptr::null_mut::<libc::timespec>(),
        )
    }
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

    /// A batch with its buffers allocated and its headers built.
    pub fn new() -> Self {
        // SAFETY: sockaddr_storage, iovec and mmsghdr are plain C structs of
        // integers and pointers, for which all zero bytes (null pointers, zero
        // lengths) is a valid value.
        let (empty_addr, empty_iov, empty_msg): (
            libc::sockaddr_storage,
            libc::iovec,
            libc::mmsghdr,
        ) = unsafe { (std::mem::zeroed(), std::mem::zeroed(), std::mem::zeroed()) };
        let mut batch = Batch {
            bufs: vec![0u8; Self::SIZE * MAX_DATAGRAM].into_boxed_slice(),
            msgs: vec![empty_msg; Self::SIZE].into_boxed_slice(),
            slots: (0..Self::SIZE)
                .map(|_| Slot {
                    iov: empty_iov,
                    addr: empty_addr,
                    control: Control([0; CONTROL_LEN]),
                })
                .collect(),
            filled: Self::SIZE,
            lens: [0; Self::SIZE],
            received: [None; Self::SIZE],
        };
        let Batch {
            bufs, msgs, slots, ..
        } = &mut batch;
        for ((msg, slot), buf) in msgs
            .iter_mut()
            .zip(slots.iter_mut())
            .zip(bufs.chunks_exact_mut(MAX_DATAGRAM))
        {
            slot.iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            msg.msg_hdr.msg_name = (&mut slot.addr as *mut libc::sockaddr_storage).cast();
            msg.msg_hdr.msg_iov = &mut slot.iov;
            msg.msg_hdr.msg_iovlen = 1;
            msg.msg_hdr.msg_control = slot.control.0.as_mut_ptr().cast();
        }
        batch
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
        // The kernel wrote the lengths of the headers it filled last time:
        // give them back their buffers' sizes.
        for msg in &mut self.msgs[..self.filled] {
            msg.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            msg.msg_hdr.msg_controllen = CONTROL_LEN as _;
        }
        // SAFETY: each header's msg_name, msg_iov (and its iov_base) and
        // msg_control point into self.slots and self.bufs, built by `new` and
        // alive as long as self, not otherwise borrowed during the call; the
        // lengths given are those of the buffers (set just above for every
        // header the kernel may have changed); self.msgs holds Batch::SIZE.
        let n = unsafe { recvmmsg(socket.as_raw_fd(), self.msgs.as_mut_ptr(), flags) };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        self.filled = n;
        for ((len, received), msg) in self
            .lens
            .iter_mut()
            .zip(&mut self.received)
            .zip(&self.msgs[..n])
        {
            *len = msg.msg_len as usize;
            *received = receive_time(&msg.msg_hdr);
        }
        Ok(n)
    }

    /// Datagram `i` of the last batch and its sender.
    #[inline]
    pub fn datagram(&self, i: usize) -> (&[u8], SocketAddr) {
        let start = i * MAX_DATAGRAM;
        let bytes = &self.bufs[start..start + self.lens[i].min(MAX_DATAGRAM)];
        (bytes, socket_addr(&self.slots[i].addr))
    }

    /// The port datagram `i` of the last batch came from, read without
    /// building its address (0 for a family that isn't IP, as in
    /// [`Batch::datagram`]).
    #[inline]
    pub fn sender_port(&self, i: usize) -> u16 {
        let storage: *const libc::sockaddr_storage = &self.slots[i].addr;
        match libc::c_int::from(self.slots[i].addr.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the kernel wrote a sockaddr_in;
                // storage is large and aligned enough for any address.
                u16::from_be(unsafe { (*storage.cast::<libc::sockaddr_in>()).sin_port })
            }
            libc::AF_INET6 => {
                // SAFETY: as above, for sockaddr_in6.
                u16::from_be(unsafe { (*storage.cast::<libc::sockaddr_in6>()).sin6_port })
            }
            _ => 0,
        }
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
pub(crate) fn socket_addr(storage: &libc::sockaddr_storage) -> SocketAddr {
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
