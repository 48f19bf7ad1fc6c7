//! IPv4/UDP and IPv6/UDP packets: built for the writer, parsed for the reader.
//!
//! Built packets carry correct lengths, the IPv4 header checksum and the UDP
//! checksum (RFC 768, RFC 8200 §8.1), so Wireshark shows no warning. Parsing never
//! checks a checksum: captures taken on the sending host often hold zero or wrong
//! ones, left for the network card to fill in.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// An IPv4 header without options.
pub const IPV4_HEADER: usize = 20;
/// The fixed IPv6 header.
pub const IPV6_HEADER: usize = 40;
/// The UDP header.
pub const UDP_HEADER: usize = 8;
/// The longest UDP payload an IPv4 packet holds (total length is 16 bits).
pub const MAX_PAYLOAD_V4: usize = u16::MAX as usize - IPV4_HEADER - UDP_HEADER;
/// The longest UDP payload an IPv6 packet holds without a jumbogram.
pub const MAX_PAYLOAD_V6: usize = u16::MAX as usize - UDP_HEADER;
/// The longest packet [`build`] makes.
pub const MAX_PACKET: usize = IPV6_HEADER + UDP_HEADER + MAX_PAYLOAD_V6;

const PROTO_UDP: u8 = 17;
const TTL: u8 = 64;
// "Don't fragment": these packets were never fragments.
const FLAG_DF: u16 = 0x4000;

/// Why a frame holds no UDP datagram to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Not IP, or IP carrying something other than UDP.
    NotUdp,
    /// One piece of a fragmented IP packet.
    Fragment,
    /// The frame ends before the lengths in its headers say (a short snap length).
    CutShort,
    /// Header fields that make no sense (a length shorter than its header).
    Malformed,
}

/// A UDP datagram found in a frame, borrowing the frame's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp<'a> {
    /// Source address and port.
    pub from: SocketAddr,
    /// Destination address and port.
    pub to: SocketAddr,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// Appends to `out` one IP packet holding a UDP datagram from `from` to `to`.
///
/// Both addresses IPv4 (or IPv4-mapped IPv6) make an IPv4 packet with
/// identification `ident`; otherwise an IPv6 one, an IPv4 address written
/// IPv4-mapped. Fails with the longest payload allowed when `payload` is longer.
pub fn build(
    out: &mut Vec<u8>,
    from: SocketAddr,
    to: SocketAddr,
    ident: u16,
    payload: &[u8],
) -> Result<(), usize> {
    match (from.ip().to_canonical(), to.ip().to_canonical()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            if payload.len() > MAX_PAYLOAD_V4 {
                return Err(MAX_PAYLOAD_V4);
            }
            build_v4(out, src, dst, from.port(), to.port(), ident, payload);
        }
        (src, dst) => {
            if payload.len() > MAX_PAYLOAD_V6 {
                return Err(MAX_PAYLOAD_V6);
            }
            build_v6(out, v6(src), v6(dst), from.port(), to.port(), payload);
        }
    }
    Ok(())
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

fn build_v4(
    out: &mut Vec<u8>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    ident: u16,
    payload: &[u8],
) {
    let udp_len = (UDP_HEADER + payload.len()) as u16;
    let total = IPV4_HEADER as u16 + udp_len;
    let start = out.len();
    out.extend_from_slice(&[0x45, 0]);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&ident.to_be_bytes());
    out.extend_from_slice(&FLAG_DF.to_be_bytes());
    out.extend_from_slice(&[TTL, PROTO_UDP, 0, 0]);
    out.extend_from_slice(&src.octets());
    out.extend_from_slice(&dst.octets());
    let header_sum = !fold(sum(0, &out[start..]));
    out[start + 10..start + 12].copy_from_slice(&header_sum.to_be_bytes());

    let mut pseudo = sum(0, &src.octets());
    pseudo = sum(pseudo, &dst.octets());
    pseudo += u64::from(PROTO_UDP) + u64::from(udp_len);
    push_udp(out, pseudo, sport, dport, udp_len, payload);
}

fn build_v6(
    out: &mut Vec<u8>,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    sport: u16,
    dport: u16,
    payload: &[u8],
) {
    let udp_len = (UDP_HEADER + payload.len()) as u16;
    out.extend_from_slice(&[0x60, 0, 0, 0]);
    out.extend_from_slice(&udp_len.to_be_bytes());
    out.extend_from_slice(&[PROTO_UDP, TTL]);
    out.extend_from_slice(&src.octets());
    out.extend_from_slice(&dst.octets());

    let mut pseudo = sum(0, &src.octets());
    pseudo = sum(pseudo, &dst.octets());
    pseudo += u64::from(PROTO_UDP) + u64::from(udp_len);
    push_udp(out, pseudo, sport, dport, udp_len, payload);
}

/// Appends the UDP header and payload, the checksum over `pseudo` (the pseudo
/// header's sum), the header and the payload.
fn push_udp(out: &mut Vec<u8>, pseudo: u64, sport: u16, dport: u16, len: u16, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&sport.to_be_bytes());
    out.extend_from_slice(&dport.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    let mut check = !fold(sum(pseudo, &out[start..]));
    // RFC 768: a computed zero is sent as all ones; zero means "no checksum".
    if check == 0 {
        check = 0xFFFF;
    }
    out[start + 6..start + 8].copy_from_slice(&check.to_be_bytes());
}

/// Adds `bytes` as big-endian 16-bit words (an odd last byte padded with zero).
fn sum(mut acc: u64, bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// The ones' complement sum of a [`sum`].
fn fold(mut acc: u64) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The UDP datagram in an IP packet of either version (told by its first nibble).
pub fn parse_ip(packet: &[u8]) -> Result<Udp<'_>, Skip> {
    match packet.first().map(|b| b >> 4) {
        Some(4) => parse_ipv4(packet),
        Some(6) => parse_ipv6(packet),
        Some(_) => Err(Skip::NotUdp),
        None => Err(Skip::CutShort),
    }
}

/// The UDP datagram in an IPv4 packet (options skipped; fragments refused).
pub fn parse_ipv4(packet: &[u8]) -> Result<Udp<'_>, Skip> {
    if packet.len() < IPV4_HEADER {
        return Err(Skip::CutShort);
    }
    if packet[0] >> 4 != 4 {
        return Err(Skip::Malformed);
    }
    let header = usize::from(packet[0] & 0x0F) * 4;
    let total = usize::from(be16(packet, 2));
    if header < IPV4_HEADER || total < header {
        return Err(Skip::Malformed);
    }
    // Ethernet pads short frames: the total length, not the frame, says where it ends.
    let Some(packet) = packet.get(..total) else {
        return Err(Skip::CutShort);
    };
    let fragment = be16(packet, 6);
    let more_fragments = fragment & 0x2000 != 0;
    let offset = fragment & 0x1FFF;
    if more_fragments || offset != 0 {
        return Err(Skip::Fragment);
    }
    if packet[9] != PROTO_UDP {
        return Err(Skip::NotUdp);
    }
    let src = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
    let dst = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
    parse_udp(&packet[header..], src.into(), dst.into())
}

/// The UDP datagram in an IPv6 packet, after the usual extension headers
/// (hop-by-hop, routing, destination options, an unfragmented fragment header,
/// authentication, mobility, HIP, shim6).
pub fn parse_ipv6(packet: &[u8]) -> Result<Udp<'_>, Skip> {
    if packet.len() < IPV6_HEADER {
        return Err(Skip::CutShort);
    }
    if packet[0] >> 4 != 6 {
        return Err(Skip::Malformed);
    }
    let payload_len = usize::from(be16(packet, 4));
    // A zero payload length is a jumbogram: the frame says where it ends.
    let end = if payload_len == 0 {
        packet.len()
    } else {
        IPV6_HEADER + payload_len
    };
    let Some(packet) = packet.get(..end) else {
        return Err(Skip::CutShort);
    };
    let octets = |at: usize| -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&packet[at..at + 16]);
        a.into()
    };
    let (src, dst) = (octets(8), octets(24));
    let mut next = packet[6];
    let mut rest = &packet[IPV6_HEADER..];
    loop {
        let len = match next {
            PROTO_UDP => return parse_udp(rest, src.into(), dst.into()),
            // Hop-by-hop, routing, destination options, mobility, HIP, shim6:
            // length in 8-octet units, not counting the first 8 (RFC 8200 §4).
            0 | 43 | 60 | 135 | 139 | 140 => {
                let Some(&units) = rest.get(1) else {
                    return Err(Skip::CutShort);
                };
                (usize::from(units) + 1) * 8
            }
            44 => {
                if rest.len() < 8 {
                    return Err(Skip::CutShort);
                }
                let field = be16(rest, 2);
                if field >> 3 != 0 || field & 1 != 0 {
                    return Err(Skip::Fragment);
                }
                8
            }
            // Authentication header: length in 4-octet units, minus 2 (RFC 4302).
            51 => {
                let Some(&units) = rest.get(1) else {
                    return Err(Skip::CutShort);
                };
                (usize::from(units) + 2) * 4
            }
            _ => return Err(Skip::NotUdp),
        };
        let Some(&following) = rest.first() else {
            return Err(Skip::CutShort);
        };
        let Some(after) = rest.get(len..) else {
            return Err(Skip::CutShort);
        };
        next = following;
        rest = after;
    }
}

fn parse_udp(udp: &[u8], src: IpAddr, dst: IpAddr) -> Result<Udp<'_>, Skip> {
    if udp.len() < UDP_HEADER {
        return Err(Skip::CutShort);
    }
    let len = match usize::from(be16(udp, 4)) {
        // Zero only in an IPv6 jumbogram (RFC 2675): the IP payload says.
        0 => udp.len(),
        n if n < UDP_HEADER => return Err(Skip::Malformed),
        n => n,
    };
    let Some(payload) = udp.get(UDP_HEADER..len) else {
        return Err(Skip::CutShort);
    };
    Ok(Udp {
        from: SocketAddr::new(src, be16(udp, 0)),
        to: SocketAddr::new(dst, be16(udp, 2)),
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FROM4: &str = "192.168.1.20:51234";
    const TO4: &str = "127.0.0.1:5400";
    const FROM6: &str = "[fe80::1]:51234";
    const TO6: &str = "[2001:db8::7]:5400";

    fn packet(from: &str, to: &str, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        build(
            &mut out,
            from.parse().expect("an address"),
            to.parse().expect("an address"),
            0x1234,
            payload,
        )
        .expect("short enough");
        out
    }

    /// The ones' complement sum over a whole header (checksum included) is 0xFFFF
    /// when the checksum is right.
    fn verifies(acc: u64) -> bool {
        fold(acc) == 0xFFFF
    }

    #[test]
    fn ipv4_header_fields_and_checksums() {
        let payload = [7u8; 11];
        let p = packet(FROM4, TO4, &payload);
        assert_eq!(p.len(), IPV4_HEADER + UDP_HEADER + payload.len(), "length");
        assert_eq!(p[0], 0x45, "version 4, 5 words");
        assert_eq!(be16(&p, 2), p.len() as u16, "total length");
        assert_eq!(be16(&p, 4), 0x1234, "identification");
        assert_eq!(be16(&p, 6), FLAG_DF, "flags: don't fragment, offset 0");
        assert_eq!(p[8], TTL, "TTL");
        assert_eq!(p[9], PROTO_UDP, "protocol");
        assert_eq!(&p[12..16], &[192, 168, 1, 20], "source");
        assert_eq!(&p[16..20], &[127, 0, 0, 1], "destination");
        assert!(verifies(sum(0, &p[..IPV4_HEADER])), "header checksum");
        let udp = &p[IPV4_HEADER..];
        assert_eq!(be16(udp, 0), 51234, "source port");
        assert_eq!(be16(udp, 2), 5400, "destination port");
        assert_eq!(
            be16(udp, 4),
            (UDP_HEADER + payload.len()) as u16,
            "UDP length"
        );
        let mut pseudo = sum(0, &p[12..20]);
        pseudo += u64::from(PROTO_UDP) + u64::from(be16(udp, 4));
        assert!(verifies(sum(pseudo, udp)), "UDP checksum");
        assert_eq!(&udp[UDP_HEADER..], &payload, "payload");
    }

    #[test]
    fn ipv6_header_fields_and_checksum() {
        let payload = [0xA5u8; 324];
        let p = packet(FROM6, TO6, &payload);
        assert_eq!(p.len(), IPV6_HEADER + UDP_HEADER + payload.len(), "length");
        assert_eq!(p[0] >> 4, 6, "version");
        assert_eq!(
            be16(&p, 4),
            (UDP_HEADER + payload.len()) as u16,
            "payload length"
        );
        assert_eq!(p[6], PROTO_UDP, "next header");
        let src: Ipv6Addr = "fe80::1".parse().expect("an address");
        let dst: Ipv6Addr = "2001:db8::7".parse().expect("an address");
        assert_eq!(&p[8..24], &src.octets(), "source");
        assert_eq!(&p[24..40], &dst.octets(), "destination");
        let udp = &p[IPV6_HEADER..];
        let mut pseudo = sum(0, &p[8..40]);
        pseudo += u64::from(PROTO_UDP) + u64::from(be16(udp, 4));
        assert!(verifies(sum(pseudo, udp)), "UDP checksum");
        assert_ne!(be16(udp, 6), 0, "IPv6 needs a UDP checksum");
    }

    #[test]
    fn checksum_matches_a_known_packet() {
        // 10.0.0.1:1000 -> 10.0.0.2:2000, payload "hi", ident 0x1234, TTL 64; the
        // expected sums were computed apart from this code (RFC 1071 in Python).
        let mut out = Vec::new();
        build(
            &mut out,
            "10.0.0.1:1000".parse().expect("an address"),
            "10.0.0.2:2000".parse().expect("an address"),
            0x1234,
            b"hi",
        )
        .expect("short enough");
        assert_eq!(be16(&out, 10), 0x1499, "IPv4 header checksum");
        assert_eq!(be16(&out, 26), 0x77B6, "UDP checksum");
    }

    #[test]
    fn mapped_ipv4_makes_ipv4_and_mixed_families_make_ipv6() {
        let p = packet("[::ffff:10.1.2.3]:9", "10.9.8.7:5400", b"x");
        assert_eq!(p[0] >> 4, 4, "both IPv4 underneath");
        let u = parse_ip(&p).expect("UDP");
        assert_eq!(u.from, "10.1.2.3:9".parse().expect("an address"));

        let p = packet("10.1.2.3:9", TO6, b"x");
        assert_eq!(p[0] >> 4, 6, "one side IPv6");
        let u = parse_ip(&p).expect("UDP");
        assert_eq!(u.from, "[::ffff:10.1.2.3]:9".parse().expect("an address"));
        assert_eq!(u.to, TO6.parse().expect("an address"));
    }

    #[test]
    fn largest_payloads_fit_and_one_more_byte_is_refused() {
        let mut out = Vec::new();
        let (f4, t4) = (FROM4.parse().expect("addr"), TO4.parse().expect("addr"));
        let big = vec![1u8; MAX_PAYLOAD_V4];
        build(&mut out, f4, t4, 0, &big).expect("65,507 bytes fit IPv4");
        assert_eq!(be16(&out, 2), u16::MAX, "total length 65,535");
        assert_eq!(parse_ip(&out).expect("UDP").payload.len(), MAX_PAYLOAD_V4);
        let over = vec![1u8; MAX_PAYLOAD_V4 + 1];
        assert_eq!(build(&mut out, f4, t4, 0, &over), Err(MAX_PAYLOAD_V4));

        out.clear();
        let (f6, t6) = (FROM6.parse().expect("addr"), TO6.parse().expect("addr"));
        let big = vec![2u8; MAX_PAYLOAD_V6];
        build(&mut out, f6, t6, 0, &big).expect("65,527 bytes fit IPv6");
        assert_eq!(out.len(), MAX_PACKET, "the longest packet");
        assert_eq!(parse_ip(&out).expect("UDP").payload.len(), MAX_PAYLOAD_V6);
        let over = vec![2u8; MAX_PAYLOAD_V6 + 1];
        assert_eq!(build(&mut out, f6, t6, 0, &over), Err(MAX_PAYLOAD_V6));
    }

    #[test]
    fn ipv4_options_and_ethernet_padding_are_skipped() {
        let mut p = packet(FROM4, TO4, b"abc");
        // Insert 8 bytes of options (two NOPs... and an end-of-list word).
        let options = [1u8, 1, 1, 1, 0, 0, 0, 0];
        p.splice(IPV4_HEADER..IPV4_HEADER, options);
        p[0] = 0x47;
        let total = be16(&p, 2) + 8;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&[0xEE; 6]); // link-layer padding after the packet
        let u = parse_ipv4(&p).expect("UDP");
        assert_eq!(u.payload, b"abc");
        assert_eq!(u.to, TO4.parse().expect("an address"));
    }

    #[test]
    fn ipv4_fragments_other_protocols_and_short_frames_are_told_apart() {
        let p = packet(FROM4, TO4, b"abcdef");
        let mut first = p.clone();
        first[6..8].copy_from_slice(&(FLAG_DF | 0x2000).to_be_bytes());
        assert_eq!(parse_ipv4(&first), Err(Skip::Fragment), "more fragments");
        let mut later = p.clone();
        later[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
        assert_eq!(parse_ipv4(&later), Err(Skip::Fragment), "offset 128");
        let mut tcp = p.clone();
        tcp[9] = 6;
        assert_eq!(parse_ipv4(&tcp), Err(Skip::NotUdp));
        assert_eq!(parse_ipv4(&p[..p.len() - 1]), Err(Skip::CutShort));
        assert_eq!(parse_ipv4(&p[..10]), Err(Skip::CutShort));
        let mut bad = p.clone();
        bad[0] = 0x44;
        assert_eq!(parse_ipv4(&bad), Err(Skip::Malformed), "IHL 4");
        let mut short_udp = p;
        short_udp[IPV4_HEADER + 4..IPV4_HEADER + 6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(parse_ipv4(&short_udp), Err(Skip::Malformed), "UDP length 7");
    }

    /// An IPv6 UDP packet with `ext` (next-header, bytes) headers inserted.
    fn with_extensions(ext: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut p = packet(FROM6, TO6, b"payload");
        let mut inserted = Vec::new();
        // Each header's first byte names the one after it.
        let mut next_of_prev = p[6];
        for (code, bytes) in ext.iter().rev() {
            let mut h = bytes.clone();
            h[0] = next_of_prev;
            inserted.splice(0..0, h);
            next_of_prev = *code;
        }
        p[6] = next_of_prev;
        let len = be16(&p, 4) + inserted.len() as u16;
        p[4..6].copy_from_slice(&len.to_be_bytes());
        p.splice(IPV6_HEADER..IPV6_HEADER, inserted);
        p
    }

    #[test]
    fn ipv6_extension_headers_are_walked() {
        let hop = vec![0u8; 8];
        let mut dest = vec![0u8; 16];
        dest[1] = 1; // 16 bytes
        let fragment_whole = vec![0u8; 8];
        let mut auth = vec![0u8; 12];
        auth[1] = 1; // (1 + 2) * 4 = 12 bytes
        let p = with_extensions(&[(0, hop), (60, dest), (44, fragment_whole), (51, auth)]);
        let u = parse_ipv6(&p).expect("UDP after four extension headers");
        assert_eq!(u.payload, b"payload");
        assert_eq!(u.from, FROM6.parse().expect("an address"));
        assert_eq!(u.to, TO6.parse().expect("an address"));
    }

    #[test]
    fn ipv6_fragments_and_other_protocols_are_skipped() {
        let mut fragment = vec![0u8; 8];
        fragment[3] = 1; // more fragments
        assert_eq!(
            parse_ipv6(&with_extensions(&[(44, fragment)])),
            Err(Skip::Fragment)
        );
        let mut later = vec![0u8; 8];
        later[2] = 0x05; // offset 160
        assert_eq!(
            parse_ipv6(&with_extensions(&[(44, later)])),
            Err(Skip::Fragment)
        );
        let mut icmp = packet(FROM6, TO6, b"x");
        icmp[6] = 58;
        assert_eq!(parse_ipv6(&icmp), Err(Skip::NotUdp));
        let mut none = packet(FROM6, TO6, b"x");
        none[6] = 59;
        assert_eq!(parse_ipv6(&none), Err(Skip::NotUdp));
        let mut long_ext = vec![0u8; 8];
        long_ext[1] = 200; // claims 1,608 bytes
        assert_eq!(
            parse_ipv6(&with_extensions(&[(60, long_ext)])),
            Err(Skip::CutShort)
        );
    }
}
