//! Socket builders (socket2): buffer sizes, non-blocking, dual-stack, the
//! platform's quirks ([`crate::platform`]); and [`is_loop`], the one check that
//! a destination is not the relay's own listening socket.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

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

/// The platform's settings for every UDP socket the relay opens (see
/// [`platform::prepare_udp_socket`]). A failure is only logged at debug level:
/// the relay counts and survives the errors these settings avoid, and the user
/// can do nothing about it (Wine 8, for one, has no `SIO_UDP_NETRESET`).
fn prepare(socket: &Socket, addr: SocketAddr) {
    if let Err(e) = platform::prepare_udp_socket(socket) {
        debug!("{addr}: cannot turn off ICMP error reports on its socket: {e}");
    }
}

/// True when a datagram sent to `dest` reaches a socket listening on `listen`, so
/// relaying to it would loop: the same port, and `dest` is the listen address
/// itself or, when listening on every interface (`0.0.0.0`, `::`), any address
/// of this computer (loopback, or one of its own LAN addresses). IPv4-mapped
/// addresses count as IPv4. `::` counts as dual-stack, as [`bind_listener`]
/// asks, and `0.0.0.0` receives no IPv6. The one loop check: configuration and
/// relay both call it.
pub fn is_loop(listen: SocketAddr, dest: SocketAddr) -> bool {
    if listen.port() != dest.port() {
        return false;
    }
    let (l, d) = (listen.ip().to_canonical(), dest.ip().to_canonical());
    if l == d {
        return true;
    }
    if !l.is_unspecified() || (l.is_ipv4() && d.is_ipv6()) {
        return false;
    }
    d.is_unspecified() || d.is_loopback() || is_own_address(d)
}

/// True when `ip` is an address of this computer. Connecting a UDP socket sends
/// nothing: the OS only picks the address it would send from, and for one of its
/// own addresses that is the address itself. This asks the routing table the
/// question a packet would, so there is no interface list to keep up to date.
pub fn is_own_address(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    let any: IpAddr = if ip.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    // Port 9 (discard) only because connect needs one.
    UdpSocket::bind((any, 0))
        .and_then(|s| s.connect((ip, 9)).and_then(|()| s.local_addr()))
        .is_ok_and(|local| local.ip().to_canonical() == ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SocketAddr {
        text.parse().expect("a socket address")
    }

    #[test]
    fn every_interface_loops_to_loopback_of_its_family_on_the_same_port() {
        assert!(is_loop(at("0.0.0.0:5400"), at("127.0.0.1:5400")));
        assert!(is_loop(at("0.0.0.0:5400"), at("127.0.0.2:5400")));
        assert!(is_loop(at("[::]:5400"), at("[::1]:5400")));
        // `::` is dual-stack: IPv4 reaches it too.
        assert!(is_loop(at("[::]:5400"), at("127.0.0.1:5400")));
        assert!(is_loop(at("0.0.0.0:5400"), at("[::ffff:127.0.0.1]:5400")));
        // An IPv4-only socket receives no IPv6.
        assert!(!is_loop(at("0.0.0.0:5400"), at("[::1]:5400")));
    }

    #[test]
    fn a_specific_listen_address_loops_only_to_itself() {
        assert!(is_loop(at("127.0.0.1:5400"), at("127.0.0.1:5400")));
        assert!(is_loop(at("[::1]:5400"), at("[::1]:5400")));
        assert!(is_loop(at("[::ffff:127.0.0.1]:5400"), at("127.0.0.1:5400")));
        assert!(!is_loop(at("127.0.0.1:5400"), at("127.0.0.2:5400")));
        assert!(!is_loop(at("[::1]:5400"), at("127.0.0.1:5400")));
    }

    #[test]
    fn another_computer_is_never_a_loop() {
        // TEST-NET-3 (RFC 5737): documentation only, never assigned to a host.
        assert!(!is_own_address("203.0.113.9".parse().unwrap()));
        assert!(!is_loop(at("0.0.0.0:5400"), at("203.0.113.9:5400")));
        assert!(!is_loop(at("[::]:5400"), at("[2001:db8::9]:5400")));
    }

    #[test]
    fn different_ports_are_never_a_loop() {
        let listens = ["0.0.0.0", "[::]", "127.0.0.1", "[::1]"];
        let dests = ["127.0.0.1", "[::1]", "203.0.113.9"];
        for l in listens {
            for d in dests {
                for (lp, dp) in [(5400, 5401), (5401, 5400), (1, 65535)] {
                    assert!(
                        !is_loop(at(&format!("{l}:{lp}")), at(&format!("{d}:{dp}"))),
                        "{l}:{lp} -> {d}:{dp}"
                    );
                }
            }
        }
    }

    /// This computer's non-loopback addresses as `ip -o addr` lists them
    /// (Linux); `None` when the command is missing.
    fn own_addresses_from_ip_command() -> Option<Vec<IpAddr>> {
        let out = std::process::Command::new("ip")
            .args(["-o", "addr", "show"])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        Some(
            text.lines()
                .filter_map(|line| {
                    let mut words = line.split_whitespace();
                    words.find(|w| *w == "inet" || *w == "inet6")?;
                    words.next()?.split('/').next()?.parse::<IpAddr>().ok()
                })
                // Link-local IPv6 needs a scope id that `ip -o` doesn't give.
                .filter(|ip| !ip.is_loopback() && !is_link_local_v6(*ip))
                .collect(),
        )
    }

    fn is_link_local_v6(ip: IpAddr) -> bool {
        matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
    }

    #[test]
    fn this_computers_lan_addresses_loop_when_listening_on_every_interface() {
        let Some(own) = own_addresses_from_ip_command() else {
            eprintln!("note: no `ip` command; this computer's LAN addresses not tested");
            return;
        };
        if own.is_empty() {
            eprintln!("note: this computer has no non-loopback address; not tested");
            return;
        }
        for ip in own {
            let any = if ip.is_ipv4() { "0.0.0.0" } else { "[::]" };
            let dest = SocketAddr::new(ip, 5400);
            assert!(is_own_address(ip), "{ip}");
            assert!(is_loop(at(&format!("{any}:5400")), dest), "{dest}");
            assert!(is_loop(at("[::]:5400"), dest), "{dest} via ::");
            assert!(!is_loop(at(&format!("{any}:5401")), dest), "{dest}");
            // Bound to loopback only, the listener never sees packets for the LAN.
            assert!(!is_loop(at("127.0.0.1:5400"), dest), "{dest}");
        }
    }
}
