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

/// Black (256-colour 16) on white (231): the 256 colours' fixed greys, which
/// a terminal's theme does not remap as it does the first 16.
const INK_ON_PAPER: &str = "\x1b[38;5;16;48;5;231m";
/// The terminal's own colours again.
const RESET: &str = "\x1b[0m";

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

    /// The code as text for the console: each character two modules, one
    /// above the other, the dark ones drawn in the foreground, with the
    /// standard quiet zone of 4 modules. With `colours` (a terminal), each
    /// line sets its own black on white (issue 30: drawn in the terminal's
    /// colours, light on dark, a light terminal showed it inverted and it
    /// could not be read); without, dark is ink, as on paper.
    pub fn text(&self, colours: bool) -> String {
        let Ok(code) = QrCode::new(self.url.as_bytes()) else {
            return String::new();
        };
        let drawn = code
            .render::<unicode::Dense1x2>()
            .dark_color(unicode::Dense1x2::Dark)
            .light_color(unicode::Dense1x2::Light)
            .quiet_zone(true)
            .build();
        if !colours {
            return drawn;
        }
        drawn
            .lines()
            .map(|line| format!("{INK_ON_PAPER}{line}{RESET}"))
            .collect::<Vec<_>>()
            .join("\n")
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
        let text = phone.text(false);
        assert!(text.lines().count() > 10, "{text}");
        assert!(text.contains('▀') || text.contains('▄') || text.contains('█'));
    }

    /// A terminal's picture of `text`: each character two modules of
    /// `SCALE` pixels, in the colours its escapes set or else the terminal's
    /// own (`fg`, `bg`), inside a margin of the terminal's background; as a
    /// PGM image.
    fn screen(text: &str, fg: u8, bg: u8) -> Vec<u8> {
        const SCALE: usize = 4;
        const MARGIN: usize = 8;
        let mut rows: Vec<Vec<u8>> = Vec::new();
        for line in text.lines() {
            let (mut ink, mut paper) = (fg, bg);
            let (mut top, mut bottom) = (Vec::new(), Vec::new());
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                if c == '\x1b' {
                    let mut seq = String::new();
                    for c in chars.by_ref() {
                        if c == 'm' {
                            break;
                        }
                        seq.push(c);
                    }
                    let seq = seq.trim_start_matches('[');
                    if seq == "0" {
                        (ink, paper) = (fg, bg);
                    }
                    let grey = |code: &str| if code == "16" { 0 } else { 255 };
                    let parts: Vec<&str> = seq.split(';').collect();
                    for w in parts.windows(3) {
                        match w {
                            ["38", "5", code] => ink = grey(code),
                            ["48", "5", code] => paper = grey(code),
                            _ => {}
                        }
                    }
                    continue;
                }
                let (t, b) = match c {
                    '█' => (ink, ink),
                    '▀' => (ink, paper),
                    '▄' => (paper, ink),
                    _ => (paper, paper),
                };
                top.extend([t; SCALE]);
                bottom.extend([b; SCALE]);
            }
            for _ in 0..SCALE {
                rows.push(top.clone());
            }
            for _ in 0..SCALE {
                rows.push(bottom.clone());
            }
        }
        let width = rows.iter().map(Vec::len).max().unwrap_or(0) + 2 * MARGIN * SCALE;
        let height = rows.len() + 2 * MARGIN * SCALE;
        let mut image = format!("P5 {width} {height} 255\n").into_bytes();
        let blank = vec![bg; width];
        for _ in 0..MARGIN * SCALE {
            image.extend(&blank);
        }
        for row in &rows {
            let mut full = vec![bg; width];
            full[MARGIN * SCALE..MARGIN * SCALE + row.len()].copy_from_slice(row);
            image.extend(full);
        }
        for _ in 0..MARGIN * SCALE {
            image.extend(&blank);
        }
        image
    }

    /// What zbar reads in `image`; `None` when it reads no code. Skipped
    /// (`Err`) where zbarimg can't run: fails instead on Linux CI, which
    /// installs it (FORZA_RELAY_REQUIRE_TOOLS).
    fn zbar(image: &[u8], name: &str) -> Result<Option<String>, ()> {
        let path =
            std::env::temp_dir().join(format!("forza-relay-qr-{name}-{}.pgm", std::process::id()));
        std::fs::write(&path, image).unwrap();
        let out = std::process::Command::new("zbarimg")
            .args(["--raw", "-q"])
            .arg(&path)
            .output();
        let _ = std::fs::remove_file(&path);
        match out {
            Ok(out) => Ok(out
                .status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())),
            Err(e) if std::env::var_os("FORZA_RELAY_REQUIRE_TOOLS").is_some() && !cfg!(windows) => {
                panic!("zbarimg is not available ({e}): install Debian's zbar-tools")
            }
            Err(e) => {
                eprintln!("note: zbarimg is not available ({e}); skipped");
                Err(())
            }
        }
    }

    #[test]
    fn issue30_the_console_code_reads_on_a_light_terminal_and_on_a_dark_one() {
        let url = url(
            [192, 168, 1, 50].into(),
            5480,
            &"0123456789abcdef".repeat(2),
        );
        let phone = Phone::new(url.clone()).unwrap();
        let text = phone.text(true);
        // Each line says its own colours, and gives the terminal's back.
        for line in text.lines() {
            assert!(
                line.starts_with(INK_ON_PAPER) && line.ends_with(RESET),
                "{line:?}"
            );
        }
        for (theme, fg, bg) in [("light", 0, 255), ("dark", 230, 20)] {
            match zbar(&screen(&text, fg, bg), theme) {
                Ok(read) => {
                    assert_eq!(read.as_deref(), Some(url.as_str()), "on a {theme} terminal")
                }
                Err(()) => return,
            }
        }
        // The quiet zone: 4 light modules around the code (2 lines of half
        // blocks above it, 4 columns beside it).
        let plain = phone.text(false);
        let lines: Vec<&str> = plain.lines().collect();
        assert!(
            lines[..2].iter().all(|l| l.chars().all(|c| c == ' ')),
            "{plain}"
        );
        assert!(lines.iter().all(|l| l.starts_with("    ")), "{plain}");
    }
}
