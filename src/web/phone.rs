//! "Open on your phone" (issue 24): when the page is served beyond this
//! computer, its address on the LAN with the session's token, as a QR code —
//! SVG for the desktop page (`/qr.svg`), text for the console — so that a phone
//! opens it in one step, by its camera.
//!
//! The LAN address of a page bound to every interface is the one this
//! computer's default route leaves from: a UDP socket connected to a
//! documentation address (nothing is sent) says which.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use qrcode::render::{svg, unicode};
use qrcode::QrCode;

/// Where no packet goes: RFC 5737's TEST-NET-3 and RFC 3849's documentation
/// prefix, for the route lookup only.
const PROBE_V4: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)), 9);
const PROBE_V6: SocketAddr = SocketAddr::new(
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
    9,
);

/// The page as a phone opens it: its URL (with the token) and the QR code of
/// that URL.
#[derive(Debug, Clone)]
pub struct Phone {
    /// `http://LAN-ADDRESS:PORT/?token=…`.
    pub url: String,
    /// The QR code, an SVG document.
    pub svg: String,
}

/// The address this computer's default route leaves from, towards `probe`.
fn route_from(probe: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = match probe {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(any).ok()?;
    socket.connect(probe).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified() && !ip.is_loopback()).then_some(ip)
}

/// The address a phone on the LAN reaches the page bound to `bound` at: that
/// one, or for every interface the default route's (IPv4 first); `None` on
/// loopback, or with no route.
pub fn lan_ip(bound: IpAddr) -> Option<IpAddr> {
    if bound.is_loopback() {
        return None;
    }
    if !bound.is_unspecified() {
        return Some(bound);
    }
    route_from(PROBE_V4).or_else(|| match bound {
        IpAddr::V6(_) => route_from(PROBE_V6),
        IpAddr::V4(_) => None,
    })
}

/// The page's URL at `ip`:`port` with `token`.
pub fn url(ip: IpAddr, port: u16, token: &str) -> String {
    format!("http://{}/?token={token}", SocketAddr::new(ip, port))
}

impl Phone {
    /// The page at `url`, with its code; `None` if the URL can't be a code
    /// (it always can: a URL is far below the largest code's size).
    pub fn new(url: String) -> Option<Phone> {
        let code = QrCode::new(url.as_bytes()).ok()?;
        let svg = code
            .render::<svg::Color<'_>>()
            .min_dimensions(240, 240)
            .quiet_zone(true)
            .build();
        Some(Phone { url, svg })
    }

    /// The code as text for the console, light on dark (a console's usual
    /// colours): each character is two modules, one above the other.
    pub fn text(&self) -> String {
        QrCode::new(self.url.as_bytes()).map_or_else(
            |_| String::new(),
            |code| {
                code.render::<unicode::Dense1x2>()
                    .dark_color(unicode::Dense1x2::Light)
                    .light_color(unicode::Dense1x2::Dark)
                    .quiet_zone(true)
                    .build()
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_on_loopback_has_no_phone_address_and_a_bound_one_is_its_own() {
        assert_eq!(lan_ip(Ipv4Addr::LOCALHOST.into()), None);
        let lan: IpAddr = Ipv4Addr::new(192, 168, 1, 50).into();
        assert_eq!(lan_ip(lan), Some(lan));
        if let Some(ip) = lan_ip(Ipv4Addr::UNSPECIFIED.into()) {
            assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
        }
    }

    #[test]
    fn the_url_brackets_an_ipv6_address_and_the_code_is_an_svg() {
        let ip: IpAddr = "fd00::5".parse().unwrap();
        assert_eq!(url(ip, 5480, "ab12"), "http://[fd00::5]:5480/?token=ab12");
        let phone = Phone::new(url([192, 168, 1, 50].into(), 5480, &"f".repeat(32))).unwrap();
        assert!(phone.svg.contains("<svg"), "{}", &phone.svg[..80]);
        let text = phone.text();
        assert!(text.lines().count() > 10, "{text}");
        assert!(text.contains('▀') || text.contains('▄') || text.contains('█'));
    }
}
