//! Link-layer headers: from a captured frame to the IP packet inside it.
//!
//! The layouts are those of the tcpdump.org link-type list (LINKTYPE_*): each
//! frame's first bytes tell what follows, and only IPv4 and IPv6 are kept.

use pcap_file::DataLink;

use super::ip::{self, Skip, Udp};

/// The link types a capture may use, by their LINKTYPE_ number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// 0: BSD loopback; a 4-byte address family in the capturing host's byte order.
    Null,
    /// 1: Ethernet II, with any number of 802.1Q / 802.1ad VLAN tags.
    Ethernet,
    /// 101: raw IP, the version in the first nibble.
    Raw,
    /// 108: OpenBSD loopback; the address family in network byte order.
    Loop,
    /// 113: Linux cooked capture v1 (`tcpdump -i any` before libpcap 1.10).
    LinuxSll,
    /// 228: raw IPv4.
    Ipv4,
    /// 229: raw IPv6.
    Ipv6,
    /// 276: Linux cooked capture v2 (`tcpdump -i any` since libpcap 1.10).
    LinuxSll2,
}

/// The link types read, for messages.
pub const SUPPORTED: &str = "Ethernet (1), raw IP (101, 228, 229), Linux cooked (113, 276) \
                             and BSD/Windows loopback (0, 108)";

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;
/// 802.1Q, 802.1ad (QinQ) and the older QinQ value.
const ETHERTYPE_VLAN: [u16; 3] = [0x8100, 0x88A8, 0x9100];
const ETHERNET_HEADER: usize = 14;
const VLAN_TAG: usize = 4;
const SLL_HEADER: usize = 16;
const SLL2_HEADER: usize = 20;
const NULL_HEADER: usize = 4;
const AF_INET: u32 = 2;
/// AF_INET6 on Linux, Windows, NetBSD/OpenBSD, FreeBSD and macOS: a capture keeps
/// the value of the host that made it.
const AF_INET6: [u32; 5] = [10, 23, 24, 28, 30];

impl LinkType {
    /// The link type numbered `code`, if it is one read here.
    pub fn from_code(code: u32) -> Option<LinkType> {
        match DataLink::from(code) {
            DataLink::NULL => Some(LinkType::Null),
            DataLink::ETHERNET => Some(LinkType::Ethernet),
            DataLink::RAW => Some(LinkType::Raw),
            DataLink::LOOP => Some(LinkType::Loop),
            DataLink::LINUX_SLL => Some(LinkType::LinuxSll),
            DataLink::IPV4 => Some(LinkType::Ipv4),
            DataLink::IPV6 => Some(LinkType::Ipv6),
            DataLink::LINUX_SLL2 => Some(LinkType::LinuxSll2),
            _ => None,
        }
    }

    /// The LINKTYPE_ number.
    pub fn code(self) -> u32 {
        let link = match self {
            LinkType::Null => DataLink::NULL,
            LinkType::Ethernet => DataLink::ETHERNET,
            LinkType::Raw => DataLink::RAW,
            LinkType::Loop => DataLink::LOOP,
            LinkType::LinuxSll => DataLink::LINUX_SLL,
            LinkType::Ipv4 => DataLink::IPV4,
            LinkType::Ipv6 => DataLink::IPV6,
            LinkType::LinuxSll2 => DataLink::LINUX_SLL2,
        };
        link.into()
    }

    /// The UDP datagram in `frame`, or why there is none.
    pub fn udp(self, frame: &[u8]) -> Result<Udp<'_>, Skip> {
        match self {
            LinkType::Raw => ip::parse_ip(frame),
            LinkType::Ipv4 => ip::parse_ipv4(frame),
            LinkType::Ipv6 => ip::parse_ipv6(frame),
            LinkType::Ethernet => ethernet(frame),
            LinkType::LinuxSll => {
                let ethertype = be16_at(frame, 14).ok_or(Skip::CutShort)?;
                by_ethertype(ethertype, &frame[SLL_HEADER..])
            }
            LinkType::LinuxSll2 => {
                if frame.len() < SLL2_HEADER {
                    return Err(Skip::CutShort);
                }
                let ethertype = be16_at(frame, 0).ok_or(Skip::CutShort)?;
                by_ethertype(ethertype, &frame[SLL2_HEADER..])
            }
            LinkType::Null | LinkType::Loop => {
                let Some(family) = frame.get(..NULL_HEADER) else {
                    return Err(Skip::CutShort);
                };
                let family = [family[0], family[1], family[2], family[3]];
                let candidates = if self == LinkType::Loop {
                    [u32::from_be_bytes(family); 2]
                } else {
                    [u32::from_le_bytes(family), u32::from_be_bytes(family)]
                };
                let rest = &frame[NULL_HEADER..];
                if candidates.contains(&AF_INET) {
                    ip::parse_ipv4(rest)
                } else if candidates.iter().any(|c| AF_INET6.contains(c)) {
                    ip::parse_ipv6(rest)
                } else {
                    Err(Skip::NotUdp)
                }
            }
        }
    }
}

/// The name the tcpdump.org list gives link type `code`, or "unknown".
pub fn name(code: u32) -> String {
    match DataLink::from(code) {
        DataLink::Unknown(_) => "unknown".to_owned(),
        known => format!("{known:?}"),
    }
}

fn be16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn ethernet(frame: &[u8]) -> Result<Udp<'_>, Skip> {
    let mut at = ETHERNET_HEADER - 2;
    let mut ethertype = be16_at(frame, at).ok_or(Skip::CutShort)?;
    while ETHERTYPE_VLAN.contains(&ethertype) {
        at += VLAN_TAG;
        ethertype = be16_at(frame, at).ok_or(Skip::CutShort)?;
    }
    by_ethertype(ethertype, &frame[at + 2..])
}

fn by_ethertype(ethertype: u16, rest: &[u8]) -> Result<Udp<'_>, Skip> {
    match ethertype {
        ETHERTYPE_IPV4 => ip::parse_ipv4(rest),
        ETHERTYPE_IPV6 => ip::parse_ipv6(rest),
        _ => Err(Skip::NotUdp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn ipv4_udp(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        ip::build(
            &mut out,
            "127.0.0.1:51234".parse().expect("an address"),
            "127.0.0.1:5400".parse().expect("an address"),
            1,
            payload,
        )
        .expect("short enough");
        out
    }

    fn ipv6_udp(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        ip::build(
            &mut out,
            "[::1]:51234".parse().expect("an address"),
            "[::1]:5400".parse().expect("an address"),
            1,
            payload,
        )
        .expect("short enough");
        out
    }

    #[track_caller]
    fn assert_udp(link: LinkType, frame: &[u8], payload: &[u8], to: &str) {
        let u = link
            .udp(frame)
            .unwrap_or_else(|e| panic!("{link:?}: no UDP: {e:?}"));
        assert_eq!(u.payload, payload, "{link:?} payload");
        assert_eq!(
            u.to,
            to.parse::<SocketAddr>().expect("an address"),
            "{link:?} to"
        );
    }

    #[test]
    fn every_link_code_round_trips() {
        for code in [0, 1, 101, 108, 113, 228, 229, 276] {
            let link = LinkType::from_code(code).expect("supported");
            assert_eq!(link.code(), code);
        }
        assert_eq!(LinkType::from_code(105), None, "802.11 is not read");
        assert_eq!(name(105), "IEEE802_11");
        assert_eq!(name(60_000), "unknown");
    }

    #[test]
    fn ethernet_with_and_without_vlan_tags() {
        let ip = ipv4_udp(b"abc");
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        frame.extend_from_slice(&ip);
        assert_udp(LinkType::Ethernet, &frame, b"abc", "127.0.0.1:5400");

        let mut tagged = vec![0u8; 12];
        for tpid in [0x88A8u16, 0x8100] {
            tagged.extend_from_slice(&tpid.to_be_bytes());
            tagged.extend_from_slice(&[0x00, 0x2A]); // VLAN 42
        }
        tagged.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        tagged.extend_from_slice(&ipv6_udp(b"six"));
        assert_udp(LinkType::Ethernet, &tagged, b"six", "[::1]:5400");

        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&0x0806u16.to_be_bytes());
        arp.extend_from_slice(&[0u8; 28]);
        assert_eq!(LinkType::Ethernet.udp(&arp), Err(Skip::NotUdp));
        assert_eq!(LinkType::Ethernet.udp(&frame[..13]), Err(Skip::CutShort));
    }

    #[test]
    fn linux_cooked_v1_and_v2() {
        let ip = ipv4_udp(b"sll");
        let mut v1 = vec![0u8; 14];
        v1.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        v1.extend_from_slice(&ip);
        assert_udp(LinkType::LinuxSll, &v1, b"sll", "127.0.0.1:5400");

        let mut v2 = ETHERTYPE_IPV6.to_be_bytes().to_vec();
        v2.extend_from_slice(&[0u8; 18]);
        v2.extend_from_slice(&ipv6_udp(b"sll2"));
        assert_udp(LinkType::LinuxSll2, &v2, b"sll2", "[::1]:5400");
        assert_eq!(LinkType::LinuxSll2.udp(&v2[..19]), Err(Skip::CutShort));
    }

    #[test]
    fn loopback_families_in_either_byte_order() {
        for family in [
            AF_INET.to_le_bytes(),
            AF_INET.to_be_bytes(),
            30u32.to_le_bytes(),
            24u32.to_be_bytes(),
        ] {
            let mut frame = family.to_vec();
            let six = family != AF_INET.to_le_bytes() && family != AF_INET.to_be_bytes();
            frame.extend_from_slice(&if six {
                ipv6_udp(b"lo")
            } else {
                ipv4_udp(b"lo")
            });
            let to = if six { "[::1]:5400" } else { "127.0.0.1:5400" };
            assert_udp(LinkType::Null, &frame, b"lo", to);
        }
        let mut looped = AF_INET.to_be_bytes().to_vec();
        looped.extend_from_slice(&ipv4_udp(b"loop"));
        assert_udp(LinkType::Loop, &looped, b"loop", "127.0.0.1:5400");
        let mut other = 7u32.to_le_bytes().to_vec();
        other.extend_from_slice(&ipv4_udp(b"x"));
        assert_eq!(LinkType::Null.udp(&other), Err(Skip::NotUdp));
    }

    #[test]
    fn raw_ip_by_version() {
        assert_udp(LinkType::Raw, &ipv4_udp(b"r4"), b"r4", "127.0.0.1:5400");
        assert_udp(LinkType::Raw, &ipv6_udp(b"r6"), b"r6", "[::1]:5400");
        assert_udp(LinkType::Ipv4, &ipv4_udp(b"r4"), b"r4", "127.0.0.1:5400");
        assert_udp(LinkType::Ipv6, &ipv6_udp(b"r6"), b"r6", "[::1]:5400");
        assert_eq!(LinkType::Ipv4.udp(&ipv6_udp(b"r6")), Err(Skip::Malformed));
    }
}
