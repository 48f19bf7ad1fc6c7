//! Linux: `sendmmsg` from slots made once, on an unconnected socket with
//! `IP_RECVERR` / `IPV6_RECVERR`, and its error queue read with `recvmsg(…,
//! MSG_ERRQUEUE)`. Every `unsafe` block says why it holds.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

use socket2::{Domain, Protocol, Socket, Type};

use crate::net::recv::{socket_addr, MAX_DATAGRAM};
use crate::net::socket::{ephemeral, SEND_BUFFER};

/// Whether this platform sends many datagrams in one call.
pub const AVAILABLE: bool = true;

/// The largest datagram a slot holds: any (a frame staged behind others to
/// the same destination can't go another way without overtaking them). The
/// slots are zeroed pages the OS maps only when written, as a received
/// batch's: a Forza frame costs its slot's first page.
const SLOT: usize = MAX_DATAGRAM;

/// A destination's address as the kernel takes it, made once (an
/// IPv4-mapped IPv6 address as the IPv4 one, for the IPv4 socket).
#[derive(Clone, Copy)]
pub struct Address {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
    v6: bool,
}

impl Address {
    pub fn new(addr: SocketAddr) -> Address {
        let addr = match addr {
            SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
                Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
                None => addr,
            },
            SocketAddr::V4(_) => addr,
        };
        let raw = socket2::SockAddr::from(addr);
        // SAFETY: sockaddr_storage is plain data, valid zeroed; `raw` holds at
        // most a sockaddr_storage's bytes (its `len`), copied into it.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = raw.len();
        // SAFETY: both regions are at least `len` bytes (see above) and
        // don't overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                raw.as_ptr().cast::<u8>(),
                (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
                len as usize,
            );
        }
        Address {
            storage,
            len,
            v6: addr.is_ipv6(),
        }
    }

    /// Whether it goes out on the IPv6 socket.
    pub fn is_v6(&self) -> bool {
        self.v6
    }
}

/// Datagrams staged for one `sendmmsg`: up to a capacity fixed when made,
/// each copied into a slot of its own, its header pointing to the slot and to
/// its address.
pub struct Many {
    data: Box<[u8]>,
    msgs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    names: Box<[libc::sockaddr_storage]>,
    len: usize,
}

// SAFETY: the raw pointers in `msgs` and `iovs` point only into the boxed
// slices of the same `Many`, whose heap memory moves with it and is reached
// by nothing else.
unsafe impl Send for Many {}

impl Many {
    /// Room for `capacity` datagrams (at least one).
    pub fn new(capacity: usize) -> Many {
        let capacity = capacity.max(1);
        // SAFETY: these C structs are plain data, valid zeroed; every pointer
        // in them is set below before a call reads it.
        let (msg, iov, name): (libc::mmsghdr, libc::iovec, libc::sockaddr_storage) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed(), std::mem::zeroed()) };
        let mut many = Many {
            data: vec![0u8; capacity * SLOT].into_boxed_slice(),
            msgs: vec![msg; capacity].into_boxed_slice(),
            iovs: vec![iov; capacity].into_boxed_slice(),
            names: vec![name; capacity].into_boxed_slice(),
            len: 0,
        };
        let Many {
            data,
            msgs,
            iovs,
            names,
            ..
        } = &mut many;
        for (((msg, iov), name), slot) in msgs
            .iter_mut()
            .zip(iovs.iter_mut())
            .zip(names.iter_mut())
            .zip(data.chunks_exact_mut(SLOT))
        {
            iov.iov_base = slot.as_mut_ptr().cast();
            msg.msg_hdr.msg_iov = iov;
            msg.msg_hdr.msg_iovlen = 1;
            msg.msg_hdr.msg_name = (name as *mut libc::sockaddr_storage).cast();
        }
        many
    }

    /// Datagrams staged.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stages `bytes` for `to`; `false` (nothing staged) when full, or when
    /// they are larger than a slot.
    #[inline]
    pub fn push(&mut self, to: &Address, bytes: &[u8]) -> bool {
        let i = self.len;
        if i == self.msgs.len() || bytes.len() > SLOT {
            return false;
        }
        self.data[i * SLOT..i * SLOT + bytes.len()].copy_from_slice(bytes);
        self.iovs[i].iov_len = bytes.len();
        // The address's own bytes (a sockaddr_in6's 28 cover a
        // sockaddr_in's 16), not the whole storage: the kernel reads
        // msg_namelen of them. A fixed size: a few moves, no call.
        const ADDRESS: usize = std::mem::size_of::<libc::sockaddr_in6>();
        // SAFETY: both are sockaddr_storage (128 bytes, more than ADDRESS),
        // distinct objects; read and written unaligned as plain bytes.
        unsafe {
            let bytes: [u8; ADDRESS] =
                std::ptr::read_unaligned((&to.storage as *const libc::sockaddr_storage).cast());
            std::ptr::write_unaligned(
                (&mut self.names[i] as *mut libc::sockaddr_storage).cast(),
                bytes,
            );
        }
        self.msgs[i].msg_hdr.msg_namelen = to.len;
        self.len = i + 1;
        true
    }

    /// Staged datagram `i`.
    pub fn bytes(&self, i: usize) -> &[u8] {
        &self.data[i * SLOT..i * SLOT + self.iovs[i].iov_len]
    }

    /// One `sendmmsg` of the staged datagrams from `from` on, without
    /// waiting: how many went (from `from`). A datagram the kernel refused
    /// first is the error; one refused after others went is not said (the
    /// count is short: send again from there, and read the error queue).
    pub fn send(&mut self, socket: &std::net::UdpSocket, from: usize) -> io::Result<usize> {
        let rest = &mut self.msgs[from..self.len];
        if rest.is_empty() {
            return Ok(0);
        }
        // SAFETY: each header's msg_name and msg_iov (and its iov_base) point
        // into self.names, self.iovs and self.data, made by `new`, alive as
        // long as self and not otherwise borrowed during the call; the lengths
        // were set by `push` within those buffers; `rest` holds the count
        // given. Made through `syscall` as the relay's other sends are
        // (crate::net::recv::send says why).
        let n = unsafe {
            libc::syscall(
                libc::SYS_sendmmsg,
                libc::c_long::from(socket.as_raw_fd()),
                rest.as_mut_ptr(),
                rest.len() as libc::c_long,
                libc::c_long::from(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL),
            )
        };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Forgets every staged datagram.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// The unconnected, non-blocking socket the datagrams of one family go out
/// on, on a port the OS picks, with its errors queued with their addresses.
pub fn sender(v6: bool) -> io::Result<std::net::UdpSocket> {
    let domain = if v6 { Domain::IPV6 } else { Domain::IPV4 };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if v6 {
        socket.set_only_v6(true)?;
    }
    // A broadcast destination goes out as it does from its own socket.
    socket.set_broadcast(true)?;
    let _ = socket.set_send_buffer_size(SEND_BUFFER);
    let any = ephemeral(if v6 {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
    });
    socket.bind(&any.into())?;
    socket.set_nonblocking(true)?;
    // Nothing it is sent is ever read: a filter that keeps nothing, so that
    // datagrams to its port can't fill the receive budget the error queue
    // shares (its errors would then be lost).
    let keep_nothing = [libc::sock_filter {
        // BPF_RET | BPF_K: return 0, keep 0 bytes.
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 0,
    }];
    let program = libc::sock_fprog {
        len: 1,
        filter: keep_nothing.as_ptr().cast_mut(),
    };
    // SAFETY: the option value is a sock_fprog pointing to one instruction,
    // both alive across the call (the kernel copies the program); the length
    // is the struct's size.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&program as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let (level, name) = if v6 {
        (libc::SOL_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::SOL_IP, libc::IP_RECVERR)
    };
    let on: libc::c_int = 1;
    // SAFETY: the option value points to a c_int that lives across the call,
    // and the length given is its size.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(socket.into())
}

/// Room for one queued error's control messages: a `sock_extended_err` and
/// the offender's address, with slack.
const ERROR_CONTROL: usize = 128;

/// Reads every error queued on `socket` (made by [`sender`]), oldest first:
/// each with the address the datagram that met it was sent to. How many.
pub fn read_errors(
    socket: &std::net::UdpSocket,
    mut f: impl FnMut(SocketAddr, io::Error),
) -> usize {
    /// Errors read in one call.
    const AT_ONCE: usize = 8;
    #[derive(Clone, Copy)]
    #[repr(C, align(8))]
    struct Control([u8; ERROR_CONTROL]);
    let mut read = 0;
    loop {
        let mut controls = [Control([0; ERROR_CONTROL]); AT_ONCE];
        // Each datagram's own bytes come back too: a few are enough.
        let mut payloads = [[0u8; 16]; AT_ONCE];
        // SAFETY: plain data, valid zeroed.
        let mut names: [libc::sockaddr_storage; AT_ONCE] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut iovs: [libc::iovec; AT_ONCE] = unsafe { std::mem::zeroed() };
        // SAFETY: as above; every pointer is set below.
        let mut msgs: [libc::mmsghdr; AT_ONCE] = unsafe { std::mem::zeroed() };
        for i in 0..AT_ONCE {
            iovs[i] = libc::iovec {
                iov_base: payloads[i].as_mut_ptr().cast(),
                iov_len: payloads[i].len(),
            };
            let hdr = &mut msgs[i].msg_hdr;
            hdr.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
            hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_iov = &mut iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = controls[i].0.as_mut_ptr().cast();
            hdr.msg_controllen = ERROR_CONTROL as _;
        }
        // SAFETY: every pointer in `msgs` points to a local array above that
        // outlives the call, with the lengths given; AT_ONCE headers; a null
        // timeout is allowed.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                msgs.as_mut_ptr(),
                AT_ONCE as libc::c_uint,
                (libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) as _,
                std::ptr::null_mut(),
            )
        };
        let Ok(n) = usize::try_from(n) else {
            return read;
        };
        read += n;
        for (msg, name) in msgs.iter().zip(&names).take(n) {
            if let Some(errno) = queued_errno(&msg.msg_hdr) {
                f(socket_addr(name), io::Error::from_raw_os_error(errno));
            }
        }
        if n < AT_ONCE {
            return read;
        }
    }
}

/// `sock_extended_err`'s `ee_origin` of an ICMP message, and of an ICMPv6 one.
const ORIGIN_ICMP: u8 = 2;
const ORIGIN_ICMP6: u8 = 3;

/// Whether the ICMP message an error came from is one a connected socket
/// reports too (Linux's "hard" errors, `icmp_err_convert` and
/// `icmpv6_err_convert`): a closed port, a protocol or a destination
/// refused by policy. The soft ones (a network or host unreachable for now,
/// a time exceeded, a packet too big, and the errors made locally) a
/// connected socket keeps to itself, and so does this one: a destination
/// says what it said before.
fn is_hard(origin: u8, kind: u8, code: u8) -> bool {
    match (origin, kind) {
        // Destination unreachable: protocol, port, unknown network or host,
        // host isolated, prohibited, filtered, precedence.
        (ORIGIN_ICMP, 3) => matches!(code, 2 | 3 | 6..=10 | 13..=15),
        // Parameter problem.
        (ORIGIN_ICMP, 12) => true,
        // Destination unreachable: prohibited, port, policy, reject route.
        (ORIGIN_ICMP6, 1) => matches!(code, 1 | 4 | 5 | 6),
        // Parameter problem.
        (ORIGIN_ICMP6, 4) => true,
        _ => false,
    }
}

/// The error number of the `IP_RECVERR` / `IPV6_RECVERR` control message
/// `recvmsg` filled in, when it is one a connected socket reports too
/// ([`is_hard`]).
fn queued_errno(msg: &libc::msghdr) -> Option<i32> {
    // SAFETY: `msg` was filled in by the kernel: msg_control points to the
    // caller's buffer and msg_controllen says how much of it was written,
    // which CMSG_FIRSTHDR and CMSG_NXTHDR stay within.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: a non-null header lies wholly within the buffer.
        let c = unsafe { &*cmsg };
        let ours = (c.cmsg_level == libc::SOL_IP && c.cmsg_type == libc::IP_RECVERR)
            || (c.cmsg_level == libc::SOL_IPV6 && c.cmsg_type == libc::IPV6_RECVERR);
        // SAFETY: CMSG_LEN only computes a length.
        let want = unsafe { libc::CMSG_LEN(std::mem::size_of::<libc::sock_extended_err>() as _) };
        if ours && c.cmsg_len as usize >= want as usize {
            // SAFETY: the header says a sock_extended_err follows it, within
            // the buffer; read_unaligned assumes nothing of its alignment.
            let err: libc::sock_extended_err =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            return is_hard(err.ee_origin, err.ee_type, err.ee_code)
                .then(|| i32::try_from(err.ee_errno).ok())
                .flatten();
        }
        // SAFETY: the next header, or null at the end.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn receiver() -> std::net::UdpSocket {
        let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        r.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        r
    }

    #[test]
    fn one_call_sends_each_datagram_to_its_own_address_in_order() {
        let (a, b) = (receiver(), receiver());
        let socket = sender(false).unwrap();
        let mut many = Many::new(4);
        let (to_a, to_b) = (
            Address::new(a.local_addr().unwrap()),
            Address::new(b.local_addr().unwrap()),
        );
        assert!(many.push(&to_a, b"first for a"));
        assert!(many.push(&to_b, b"for b"));
        assert!(many.push(&to_a, b"second for a"));
        assert_eq!(many.bytes(1), b"for b");
        assert_eq!(many.send(&socket, 0).unwrap(), 3);
        let mut buf = [0u8; 64];
        let n = a.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"first for a");
        let n = a.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"second for a");
        let n = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"for b");
    }

    #[test]
    fn a_full_many_and_an_oversized_datagram_are_refused() {
        let to = Address::new("127.0.0.1:9".parse().unwrap());
        let mut many = Many::new(2);
        assert!(!many.push(&to, &[0; SLOT + 1]), "larger than a slot");
        assert!(many.push(&to, &[1; SLOT]));
        assert!(many.push(&to, &[2; 3]));
        assert!(!many.push(&to, &[3; 3]), "full");
        assert_eq!(many.len(), 2);
        many.clear();
        assert!(many.is_empty());
    }

    #[test]
    fn a_closed_port_s_refusal_is_queued_with_its_address() {
        let open = receiver();
        // A port nothing listens on: bound, its number kept, closed.
        let closed = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let socket = sender(false).unwrap();
        let mut many = Many::new(2);
        assert!(many.push(&Address::new(closed), b"nobody"));
        assert!(many.push(&Address::new(open.local_addr().unwrap()), b"somebody"));
        // Loopback's ICMP comes back within the call, as a rule, and fails
        // the next datagram's send (the socket's pending error): the call
        // stops short, the error not said, and the rest is sent again.
        let mut errors = Vec::new();
        let mut sent = 0;
        for _ in 0..10 {
            if sent == 2 {
                break;
            }
            sent += many.send(&socket, sent).unwrap_or(0);
            read_errors(&socket, |addr, e| errors.push((addr, e.kind())));
        }
        assert_eq!(sent, 2, "both datagrams went");
        for _ in 0..500 {
            if !errors.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            read_errors(&socket, |addr, e| errors.push((addr, e.kind())));
        }
        assert_eq!(errors, [(closed, io::ErrorKind::ConnectionRefused)]);
        let mut buf = [0u8; 16];
        assert_eq!(
            open.recv(&mut buf).unwrap(),
            8,
            "the open one got its datagram"
        );
        assert_eq!(read_errors(&socket, |_, _| ()), 0, "nothing more queued");
    }

    #[test]
    fn only_the_errors_a_connected_socket_reports_are_said() {
        assert!(is_hard(ORIGIN_ICMP, 3, 3), "port unreachable");
        assert!(is_hard(ORIGIN_ICMP6, 1, 4), "port unreachable (v6)");
        assert!(!is_hard(ORIGIN_ICMP, 3, 1), "host unreachable: soft");
        assert!(!is_hard(ORIGIN_ICMP, 3, 4), "fragmentation needed: soft");
        assert!(!is_hard(ORIGIN_ICMP, 11, 0), "time exceeded: soft");
        assert!(!is_hard(1, 0, 0), "a local error: soft");
    }

    #[test]
    fn datagrams_sent_to_the_sender_s_port_are_never_kept() {
        let socket = sender(false).unwrap();
        let port = socket.local_addr().unwrap().port();
        let other = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..10 {
            other.send_to(b"a reply", ("127.0.0.1", port)).unwrap();
        }
        let mut buf = [0u8; 16];
        let err = socket.recv(&mut buf).expect_err("nothing kept");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn an_ipv4_mapped_address_goes_out_on_the_ipv4_socket() {
        let r = receiver();
        let port = r.local_addr().unwrap().port();
        let mapped: SocketAddr = format!("[::ffff:127.0.0.1]:{port}").parse().unwrap();
        let to = Address::new(mapped);
        assert!(!to.is_v6());
        let mut many = Many::new(1);
        assert!(many.push(&to, b"mapped"));
        assert_eq!(many.send(&sender(false).unwrap(), 0).unwrap(), 1);
        let mut buf = [0u8; 16];
        assert_eq!(r.recv(&mut buf).unwrap(), 6);
    }
}
