//! `forza-relay doctor`: why nothing arrives, in plain words, with the fix.
//!
//! Each check gives a [`Finding`]. The listen port is bound for the arrival
//! check only when nothing else holds it, and released before returning.
//! When something holds it, `doctor` asks the holder for its status
//! ([`crate::report::query`], the one datagram `doctor` ever sends): a forza-relay
//! answers, and then the arrival and destination checks are what that relay
//! sees (issue 23), watched for `--wait` seconds. `doctor` says "all is well"
//! only when datagrams were seen arriving.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::finder::{self, Holder, Socket};
use super::platform;
use super::running::{self, Observation, Rate, AFTER_FIRST};
use super::tools;
use crate::config::{Config, Input};
use crate::counters::Status as DestinationStatus;
use crate::report::query::Answer;
use crate::wire::{Detector, Expected, Format};

/// How long `doctor` waits for datagrams unless told (`--wait`).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

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
    /// The report of `checks`: ok when none found a problem and datagrams
    /// were seen arriving (an arrival check that could not be made is not ok).
    pub fn new(checks: Vec<Finding>) -> Self {
        Report {
            ok: checks.iter().all(|f| f.status != Status::Problem) && !arrivals_unknown(&checks),
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
            0 if arrivals_unknown(&self.checks) => write!(
                f,
                "no problem found, but whether datagrams arrive could not be checked"
            ),
            0 => write!(f, "all is well"),
            1 => write!(f, "1 problem"),
            n => write!(f, "{n} problems"),
        }
    }
}

/// True when the arrival check could not be made.
fn arrivals_unknown(checks: &[Finding]) -> bool {
    checks
        .iter()
        .any(|c| c.check == "arrivals" && c.status == Status::Unknown)
}

/// Who holds the listen port, as `doctor` found it.
enum Listener {
    /// Nobody: `doctor` holds it now, to see what arrives.
    Free(UdpSocket),
    /// A forza-relay, which answered.
    Relay(Box<Answer>),
    /// Another program, or a forza-relay that did not answer.
    Held,
}

/// Runs every check for `config`, waiting up to `wait` for datagrams (or
/// watching the relay that holds the listen port as long). `waiting` is
/// called once before the wait, with the relay's answer when a relay is
/// watched, to say so.
pub fn diagnose(
    config: &Config,
    wait: Duration,
    waiting: &mut dyn FnMut(SocketAddr, Option<&Answer>),
) -> Report {
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
    // A relay is watched first: its destinations are reported as they are
    // at the end of the watch.
    let seen = match &listener {
        Listener::Relay(answer) => {
            waiting(config.listen, Some(answer));
            Some(running::observe(config.listen, (**answer).clone(), wait))
        }
        _ => None,
    };
    match &seen {
        // What the relay sends to, as it says, rather than what this
        // configuration would.
        Some(seen) => {
            for d in &seen.last.destinations {
                checks.push(relay_destination(d, others.as_deref()));
            }
            if let Some(error) = &seen.last.config.error {
                checks.push(Finding::problem(
                    "configuration_file",
                    format!(
                        "the running relay did not apply the last save of {}: {error}",
                        seen.last
                            .config
                            .path
                            .as_deref()
                            .unwrap_or("its configuration")
                    ),
                    "fix the file and save it again: the relay applies it when it is valid",
                ));
            }
        }
        None => {
            for destination in &config.destinations {
                checks.push(match destination.target.udp() {
                    Some(addr) => destination_check(&destination.name, addr, others.as_deref()),
                    None => Finding::unknown(
                        "destination",
                        format!(
                            "destination {:?} ({}) is an MQTT broker: its connection is said \
                             in the summaries and on the page (status), not checked from here",
                            destination.name, destination.addr_text
                        ),
                    ),
                });
            }
        }
    }
    checks.extend(platform::checks(config.listen));
    match (listener, seen) {
        (Listener::Free(socket), _) => {
            waiting(config.listen, None);
            checks.push(arrivals(&socket, config, wait));
        }
        (Listener::Relay(_), Some(seen)) => checks.push(relay_arrivals(&seen)),
        _ => checks.push(Finding::unknown(
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

/// Binds the listen address, or names who holds it and asks it for its
/// status. The socket, or the relay's answer, comes back for the arrival
/// check.
fn listen_port(listen: SocketAddr, sockets: Option<&[Socket]>) -> (Finding, Listener) {
    match UdpSocket::bind(listen) {
        Ok(socket) => (
            Finding::ok(
                "listen_port",
                format!(
                    "port {} is free: forza-relay can listen on {listen}",
                    listen.port()
                ),
            ),
            Listener::Free(socket),
        ),
        Err(e) => {
            if let Some(answer) = running::relay_on(listen, &e) {
                return (relay_listens(&answer), Listener::Relay(Box::new(answer)));
            }
            let holder = sockets
                .and_then(|s| finder::on(s, listen).first().map(|s| Holder::from(*s)))
                .or_else(|| finder::blocker(listen, &e));
            (held(listen, &e, holder), Listener::Held)
        }
    }
}

/// The finding for a listen port held by a forza-relay that answered.
fn relay_listens(answer: &Answer) -> Finding {
    let config = match &answer.config.path {
        Some(path) => format!(", running {path}"),
        None => String::new(),
    };
    Finding::ok(
        "listen_port",
        format!(
            "forza-relay {} (pid {}) is running and listens on {}{config}: doctor asks it \
             what it receives",
            answer.version, answer.pid, answer.listen
        ),
    )
}

/// The finding for a listen address that could not be bound.
fn held(listen: SocketAddr, error: &io::Error, holder: Option<Holder>) -> Finding {
    let port = listen.port();
    match holder {
        Some(h) if finder::is_forza_relay(&h.process) => Finding::ok(
            "listen_port",
            format!(
                "forza-relay is already listening on port {port} ({h}), but did not answer \
                 doctor's question within {} s (a forza-relay older than this one does not): \
                 its summary lines say what arrives",
                running::ASK_TIMEOUT.as_secs()
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

/// Something listens at destination `name`'s `addr` when it is on this
/// computer.
pub fn destination_check(name: &str, addr: SocketAddr, sockets: Option<&[Socket]>) -> Finding {
    let what = format!("destination {name:?} ({addr})");
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
        None => Finding::problem(
            "destination",
            format!("{what}: nothing listens there{}", whose_port(addr.port())),
            NOTHING_LISTENS_FIX,
        ),
    }
}

/// What to do when an MQTT destination's broker can't be reached.
const BROKER_FIX: &str = "start the broker, or correct the destination's address (host and \
                          port), its login (username, password) or its ca_file, on the page or \
                          in the configuration file";

/// What to do when nothing listens at a destination.
const NOTHING_LISTENS_FIX: &str = "start the tool, or set this destination to the port the \
                                   tool listens on (`forza-relay setup` lists them)";

/// ` (port 8000 is the default of SimHub)`, or nothing for a port no known
/// tool has.
fn whose_port(port: u16) -> String {
    let known: Vec<&str> = tools::by_port(port)
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    if known.is_empty() {
        String::new()
    } else {
        format!(" (port {port} is the default of {})", known.join(", "))
    }
}

/// A destination of the running relay, as it says it is doing, and who
/// listens there when its address is a socket address on this computer.
fn relay_destination(d: &crate::report::query::Destination, sockets: Option<&[Socket]>) -> Finding {
    let what = format!("destination {:?} ({})", d.name, d.addr);
    let addr: Option<SocketAddr> = d.addr.parse().ok();
    let whose = addr.map(|a| whose_port(a.port())).unwrap_or_default();
    match d.status {
        DestinationStatus::Refused => Finding::problem(
            "destination",
            format!("{what}: the running relay's sends are refused: nothing listens there{whose}"),
            NOTHING_LISTENS_FIX,
        ),
        DestinationStatus::Failing => match &d.problem {
            // An MQTT destination: its broker and why it can't be reached
            // (issue 30: "fails — the log says the error").
            Some(problem) => Finding::problem(
                "destination",
                format!("{what}: the running relay can't publish to this broker: {problem}"),
                BROKER_FIX,
            ),
            None => Finding::problem(
                "destination",
                format!("{what}: the running relay's sends there fail"),
                "the relay's log says the error of each destination",
            ),
        },
        DestinationStatus::Ok => Finding::ok(
            "destination",
            format!("{what}: the running relay sends to it ({} sent)", d.sent),
        ),
        // Nothing to send lately: whether anything listens is the socket
        // table's to say.
        DestinationStatus::Idle => match addr {
            Some(addr) => {
                let mut finding = destination_check(&d.name, addr, sockets);
                finding.message = format!(
                    "{}; the running relay sent nothing to it lately ({} sent)",
                    finding.message, d.sent
                );
                finding
            }
            None => Finding::ok(
                "destination",
                format!(
                    "{what}: the running relay sent nothing to it lately ({} sent)",
                    d.sent
                ),
            ),
        },
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
            // Another tool asking whether this socket is a relay's (`setup`
            // asks every socket a forza-relay holds): not telemetry.
            Ok((len, from)) if crate::net::query::is_query(&buf[..len.min(buf.len())], from) => {}
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
                data_out_fix(listen.port()),
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

/// What to do when nothing arrives on `port`.
fn data_out_fix(port: u16) -> String {
    format!(
        "in the game's HUD and Gameplay settings turn Data Out on, set Data Out IP Address to \
         this computer (127.0.0.1 when the game runs here) and Data Out IP Port to {port}; then \
         drive with the game's window in front (nothing is sent in menus, while paused, or, in \
         Forza Horizon 6, while its window is not in focus). A game on an Xbox or another PC \
         also needs the firewall to let forza-relay in"
    )
}

/// What the running relay received while `doctor` watched it.
fn relay_arrivals(seen: &Observation) -> Finding {
    let last = &seen.last;
    let relay = format!("forza-relay (pid {})", last.pid);
    let received = seen.received();
    if received == 0 {
        return Finding::problem(
            "arrivals",
            format!(
                "{relay} received nothing on {} in {:.1} s ({} datagrams in the {:.0} s since \
                 it started)",
                last.listen,
                seen.seconds(),
                last.input.received,
                last.elapsed_s
            ),
            data_out_fix(last.listen.port()),
        );
    }
    let senders = seen.senders();
    let from: Vec<String> = senders
        .iter()
        .map(|s| {
            if senders.len() > 1 && s.following {
                format!("{} (the stream followed)", s.addr)
            } else {
                s.addr.to_string()
            }
        })
        .collect();
    let mut message = format!(
        "{relay} receives {} on {} from {}",
        Rate(seen.rate()),
        last.listen,
        if from.is_empty() {
            "senders it does not list".to_owned()
        } else {
            from.join(", ")
        }
    );
    if let Some(format) = &last.input.format {
        let guessed = if last.input.format_guessed {
            " (guessed: no puddle has told fh5 from fh6 yet)"
        } else {
            ""
        };
        message.push_str(&format!(", format {format}{guessed}"));
    }
    let disallowed = seen.disallowed();
    if disallowed > 0 {
        message.push_str(&format!("; listen.allow refuses {disallowed} of them"));
        if disallowed == received {
            return Finding::problem(
                "arrivals",
                message,
                "add the game's address to [listen] allow, or remove allow",
            );
        }
    }
    let malformed = seen.malformed();
    if malformed > 0 {
        let expected = match last.input.expects.parse::<Input>() {
            Ok(input) => Expected(input).to_string(),
            Err(_) => format!("as {} expects", last.input.expects),
        };
        message.push_str(&format!("; {malformed} of them are not packets {expected}"));
        if malformed + disallowed == received {
            let fix = if last.input.expects == "auto" {
                "another program sends to this port: point it elsewhere, or listen on another \
                 port"
                    .to_owned()
            } else {
                format!(
                    "the relay expects {} packets: if the game sends another format, set \
                     [listen] format = \"auto\" (or the game's format); else another program \
                     sends to this port",
                    last.input.expects
                )
            };
            return Finding::problem("arrivals", message, fix);
        }
    }
    Finding::ok("arrivals", message)
}

#[cfg(test)]
mod tests;
