//! `forza-relay doctor`: why nothing arrives, in plain words, with the fix.
//!
//! Each check gives a [`Finding`]. The listen port is bound for the arrival
//! check only when nothing else holds it, and released before returning; no
//! check sends a datagram anywhere.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::finder::{self, Holder, Socket};
use super::platform;
use super::tools;
use crate::config::{Config, Destination, Input};
use crate::wire::{Detector, Format};

/// How long `doctor` waits for datagrams unless told (`--wait`).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// After the first datagram, how long to keep counting before answering.
const AFTER_FIRST: Duration = Duration::from_secs(1);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Wrong, and the fix says what to do.
    Problem,
    /// Could not be checked here (a tool missing, another computer).
    Unknown,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Which check: `listen_port`, `listen_range`, `destination`, `arrivals`,
    /// `loopback_exemption`, `firewall`.
    pub check: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was found, in plain words.
    pub message: String,
    /// What to do about it.
    pub fix: Option<String>,
}

impl Finding {
    /// A check that passed.
    pub fn ok(check: &'static str, message: impl Into<String>) -> Self {
        Finding {
            check,
            status: Status::Ok,
            message: message.into(),
            fix: None,
        }
    }

    /// A check that failed, with its fix.
    pub fn problem(
        check: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Finding {
            check,
            status: Status::Problem,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    /// A check that could not be made.
    pub fn unknown(check: &'static str, message: impl Into<String>) -> Self {
        Finding {
            check,
            status: Status::Unknown,
            message: message.into(),
            fix: None,
        }
    }
}

/// Every finding, in the order the checks ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// True when no check found a problem.
    pub ok: bool,
    /// The findings.
    pub checks: Vec<Finding>,
}

impl Report {
    /// The report of `checks`.
    pub fn new(checks: Vec<Finding>) -> Self {
        Report {
            ok: checks.iter().all(|f| f.status != Status::Problem),
            checks,
        }
    }

    /// One JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.checks {
            let label = match finding.status {
                Status::Ok => "ok",
                Status::Problem => "PROBLEM",
                Status::Unknown => "unknown",
            };
            writeln!(f, "{label:<8} {}", finding.message)?;
            if let Some(fix) = &finding.fix {
                writeln!(f, "{:<8} fix: {fix}", "")?;
            }
        }
        let problems = self
            .checks
            .iter()
            .filter(|c| c.status == Status::Problem)
            .count();
        match problems {
            0 => write!(f, "all is well"),
            1 => write!(f, "1 problem"),
            n => write!(f, "{n} problems"),
        }
    }
}

/// Runs every check for `config`, waiting up to `wait` for datagrams.
/// `waiting` is called once before the wait, to say so.
pub fn diagnose(config: &Config, wait: Duration, waiting: &mut dyn FnMut(SocketAddr)) -> Report {
    let sockets = finder::udp_sockets();
    let mut checks = vec![listen_range(config.listen)];
    let (port_finding, listener) = listen_port(config.listen, sockets.as_deref().ok());
    checks.push(port_finding);
    // Sockets of this process (the listener just bound) are not a destination's.
    let others: Option<Vec<Socket>> = sockets.as_ref().ok().map(|all| {
        all.iter()
            .filter(|s| s.pid != std::process::id())
            .cloned()
            .collect()
    });
    for destination in &config.destinations {
        checks.push(destination_check(destination, others.as_deref()));
    }
    checks.extend(platform::checks(config.listen));
    match listener {
        Some(socket) => {
            waiting(config.listen);
            checks.push(arrivals(&socket, config, wait));
        }
        None => checks.push(Finding::unknown(
            "arrivals",
            format!(
                "whether datagrams arrive was not checked: {} is held by another program",
                config.listen
            ),
        )),
    }
    Report::new(checks)
}

/// The listen port is not one a game binds itself.
pub fn listen_range(listen: SocketAddr) -> Finding {
    let port = listen.port();
    if finder::game_port(port) {
        Finding::problem(
            "listen_range",
            format!(
                "port {port} is in 5200-5300, where Forza Horizon 6 binds its own socket (its \
                 Data Out settings say to avoid these ports)"
            ),
            "listen on another port, e.g. [listen] addr = \"0.0.0.0:5400\", and set the game's \
             Data Out IP Port to it",
        )
    } else {
        Finding::ok(
            "listen_range",
            format!("port {port} is outside 5200-5300, the ports Forza Horizon 6 uses itself"),
        )
    }
}

/// Binds the listen address, or names who holds it. The socket comes back for
/// the arrival check.
fn listen_port(listen: SocketAddr, sockets: Option<&[Socket]>) -> (Finding, Option<UdpSocket>) {
    match UdpSocket::bind(listen) {
        Ok(socket) => (
            Finding::ok(
                "listen_port",
                format!(
                    "port {} is free: forza-relay can listen on {listen}",
                    listen.port()
                ),
            ),
            Some(socket),
        ),
        Err(e) => {
            let holder = sockets
                .and_then(|s| finder::on(s, listen).first().map(|s| Holder::from(*s)))
                .or_else(|| finder::blocker(listen, &e));
            (held(listen, &e, holder), None)
        }
    }
}

/// The finding for a listen address that could not be bound.
fn held(listen: SocketAddr, error: &io::Error, holder: Option<Holder>) -> Finding {
    let port = listen.port();
    match holder {
        Some(h) if is_forza_relay(&h.process) => Finding::ok(
            "listen_port",
            format!(
                "forza-relay is already listening on port {port} ({h}): the relay is running; \
                 its summary lines say what arrives"
            ),
        ),
        Some(h) => Finding::problem(
            "listen_port",
            format!("port {port} is in use by {h}"),
            format!(
                "close {}, or listen on another port (and point the game's Data Out at it)",
                h.process
            ),
        ),
        None => Finding::problem(
            "listen_port",
            format!("cannot listen on {listen}: {error}"),
            "close the program that uses this port, or listen on another port",
        ),
    }
}

fn is_forza_relay(process: &str) -> bool {
    let name = process.trim();
    name.eq_ignore_ascii_case("forza-relay") || name.eq_ignore_ascii_case("forza-relay.exe")
}

/// Something listens at `destination` when it is on this computer.
pub fn destination_check(destination: &Destination, sockets: Option<&[Socket]>) -> Finding {
    let Some(addr) = destination.target.udp() else {
        return Finding::unknown(
            "destination",
            format!(
                "destination {:?} ({}) is an MQTT broker: its connection is said in the \
                 summaries and on the page (status), not checked from here",
                destination.name, destination.addr_text
            ),
        );
    };
    let what = format!("destination {:?} ({addr})", destination.name);
    let ip = addr.ip();
    if !(ip.is_loopback() || ip.is_unspecified() || crate::config::is_own_address(ip)) {
        return Finding::unknown(
            "destination",
            format!("{what} is on another computer: not checked from here"),
        );
    }
    let listening = match sockets {
        Some(sockets) => finder::on(sockets, addr)
            .first()
            .map(|s| Some(Holder::from(*s))),
        // Without the socket table, a bind says whether the port is free.
        None => match UdpSocket::bind(addr) {
            Ok(_) => None,
            Err(_) => Some(None),
        },
    };
    match listening {
        Some(Some(h)) => Finding::ok("destination", format!("{what}: {h} listens there")),
        Some(None) => Finding::ok("destination", format!("{what}: a program listens there")),
        None => {
            let known: Vec<&str> = tools::by_port(addr.port())
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            let whose = if known.is_empty() {
                String::new()
            } else {
                format!(
                    " (port {} is the default of {})",
                    addr.port(),
                    known.join(", ")
                )
            };
            Finding::problem(
                "destination",
                format!("{what}: nothing listens there{whose}"),
                "start the tool, or set this destination to the port the tool listens on \
                 (`forza-relay setup` lists them)",
            )
        }
    }
}

/// What arrived on `socket` in `wait` (or 1 s after the first datagram).
fn arrivals(socket: &UdpSocket, config: &Config, wait: Duration) -> Finding {
    let mut seen = Seen::default();
    let start = Instant::now();
    let mut deadline = start + wait;
    let mut buf = [0u8; 2048];
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if socket.set_read_timeout(Some(deadline - now)).is_err() {
            break;
        }
        match socket.recv_from(&mut buf) {
            Ok((len, from)) => {
                if seen.count == 0 {
                    deadline = deadline.min(Instant::now() + AFTER_FIRST);
                }
                seen.add(&buf[..len.min(buf.len())], len, from);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // WouldBlock / TimedOut: the wait is over. A reset from an earlier
            // send (Windows) cannot happen: this socket sends nothing.
            Err(_) => break,
        }
    }
    seen.finding(config, start.elapsed().min(wait))
}

/// Datagrams counted by the arrival check.
#[derive(Default)]
struct Seen {
    count: u64,
    senders: BTreeSet<SocketAddr>,
    formats: BTreeSet<Format>,
    other_lengths: BTreeSet<usize>,
    detector: Detector,
}

impl Seen {
    fn add(&mut self, bytes: &[u8], len: usize, from: SocketAddr) {
        self.count += 1;
        self.senders.insert(from);
        match self.detector.detect(bytes) {
            Some(f) if len == bytes.len() => {
                self.formats.insert(f);
            }
            _ => {
                self.other_lengths.insert(len);
            }
        }
    }

    fn finding(self, config: &Config, waited: Duration) -> Finding {
        let listen = config.listen;
        if self.count == 0 {
            return Finding::problem(
                "arrivals",
                format!(
                    "nothing arrived on {listen} in {:.1} s",
                    waited.as_secs_f64()
                ),
                format!(
                    "in the game's HUD and Gameplay settings turn Data Out on, set Data Out IP \
                     Address to this computer (127.0.0.1 when the game runs here) and Data Out \
                     IP Port to {}; then drive (nothing is sent in menus or while paused)",
                    listen.port()
                ),
            );
        }
        let senders: Vec<String> = self.senders.iter().map(SocketAddr::to_string).collect();
        let mut message = format!(
            "{} datagrams arrived from {}",
            self.count,
            senders.join(", ")
        );
        if !self.formats.is_empty() {
            let formats: Vec<String> = self.formats.iter().map(Format::to_string).collect();
            let guessed =
                if self.formats.iter().any(|f| f.is_horizon()) && !self.detector.is_certain() {
                    " (fh4/fh5/fh6 guessed)"
                } else {
                    ""
                };
            message.push_str(&format!(", format {}{guessed}", formats.join(", ")));
        }
        if !self.other_lengths.is_empty() {
            let lengths: Vec<String> = self.other_lengths.iter().map(usize::to_string).collect();
            message.push_str(&format!(
                "; not Forza packets: {} bytes",
                lengths.join(", ")
            ));
        }
        if !config.allow.is_empty() {
            let refused: Vec<String> = self
                .senders
                .iter()
                .filter(|s| {
                    !config
                        .allow
                        .iter()
                        .any(|net| net.contains(&s.ip().to_canonical()))
                })
                .map(SocketAddr::to_string)
                .collect();
            if !refused.is_empty() {
                return Finding::problem(
                    "arrivals",
                    format!("{message}; listen.allow refuses {}", refused.join(", ")),
                    "add the game's address to [listen] allow, or remove allow",
                );
            }
        }
        if self.formats.is_empty() {
            return Finding::problem(
                "arrivals",
                message,
                "another program sends to this port: point it elsewhere, or listen on another port",
            );
        }
        if let Input::Fixed(expected) = config.input {
            if let Some(f) = self.formats.iter().find(|f| f.len() != expected.len()) {
                return Finding::problem(
                    "arrivals",
                    message.clone(),
                    format!(
                        "the configuration says the game sends {expected} but {f} arrives: set \
                         [listen] format = \"{f}\" (or \"auto\")"
                    ),
                );
            }
        }
        Finding::ok("arrivals", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SocketAddr {
        text.parse().expect("a socket address")
    }

    #[test]
    fn the_games_own_range_is_a_problem_and_its_edges_count() {
        for port in [5200, 5250, 5300] {
            assert_eq!(
                listen_range(at(&format!("0.0.0.0:{port}"))).status,
                Status::Problem
            );
        }
        for port in [5199, 5301, 5400] {
            assert_eq!(
                listen_range(at(&format!("0.0.0.0:{port}"))).status,
                Status::Ok
            );
        }
    }

    #[test]
    fn a_running_relay_on_the_listen_port_is_not_a_problem() {
        let e = io::Error::from(io::ErrorKind::AddrInUse);
        let relay = Holder {
            pid: 9,
            process: "forza-relay.exe".to_owned(),
            addr: at("0.0.0.0:5400"),
            tool: None,
        };
        assert_eq!(held(at("0.0.0.0:5400"), &e, Some(relay)).status, Status::Ok);
        let other = Holder {
            pid: 9,
            process: "nc".to_owned(),
            addr: at("0.0.0.0:5400"),
            tool: None,
        };
        let f = held(at("0.0.0.0:5400"), &e, Some(other));
        assert_eq!(f.status, Status::Problem);
        assert_eq!(f.message, "port 5400 is in use by nc (pid 9)");
    }

    #[test]
    fn the_report_is_ok_only_without_problems() {
        let report = Report::new(vec![
            Finding::ok("a", "fine"),
            Finding::unknown("b", "not checked"),
        ]);
        assert!(report.ok);
        assert!(report.to_string().ends_with("all is well"));
        let report = Report::new(vec![Finding::problem("a", "broken", "mend it")]);
        assert!(!report.ok);
        assert_eq!(
            report.to_json(),
            r#"{"ok":false,"checks":[{"check":"a","status":"problem","message":"broken","fix":"mend it"}]}"#
        );
    }
}
