//! The UDP sockets open on this computer, the processes holding them, and the
//! tools among them.
//!
//! The `listeners` crate reads the OS's tables: /proc/net/udp and udp6 with the
//! socket inodes of /proc/*/fd on Linux, `GetExtendedUdpTable` with the owner's
//! pid and image name on Windows, libproc on macOS. UDP has no listening state:
//! every bound socket is listed, so a tool's own sending sockets (and the game's,
//! in 5200..5300) show up too.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use serde::Serialize;

use super::tools::{self, Tool};
use crate::config::{Output, DEFAULT_PORT};

/// One UDP socket bound on this computer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Socket {
    /// The address it is bound to (0.0.0.0 or :: for every interface).
    pub addr: SocketAddr,
    /// The process holding it.
    pub pid: u32,
    /// That process's name as the OS gives it (`SimHubWPF.exe` on Windows).
    pub process: String,
}

impl Socket {
    /// The one tool this socket belongs to, when the table is sure.
    pub fn tool(&self) -> Option<&'static Tool> {
        match tools::recognise(&self.process, self.addr.port()).as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
}

/// Every UDP socket bound on this computer, sorted by port, address and pid.
/// Sockets of other users' processes may be missing where the OS hides them
/// (Linux without root).
pub fn udp_sockets() -> io::Result<Vec<Socket>> {
    let all = listeners::get_all().map_err(|e| io::Error::other(e.to_string()))?;
    let mut sockets: Vec<Socket> = all
        .into_iter()
        .filter(|l| l.protocol == listeners::Protocol::UDP)
        .map(|l| Socket {
            addr: l.socket,
            pid: super::platform::process_id(l.process.pid),
            process: l.process.name,
        })
        .collect();
    sockets.sort_by(|a, b| {
        (a.addr.port(), a.addr.ip(), a.pid).cmp(&(b.addr.port(), b.addr.ip(), b.pid))
    });
    sockets.dedup();
    Ok(sockets)
}

/// True when a socket bound to `held` receives what is sent to `wanted`, or
/// stops a bind to it: the same port, and the same address, or `held` is a
/// wildcard of the same family (`::` also covers IPv4, as dual-stack sockets do).
pub fn covers(held: SocketAddr, wanted: SocketAddr) -> bool {
    if held.port() != wanted.port() {
        return false;
    }
    let (h, w) = (held.ip().to_canonical(), wanted.ip().to_canonical());
    h == w
        || (h.is_unspecified() && (h.is_ipv6() || w.is_ipv4()))
        || (w.is_unspecified() && (w.is_ipv6() || h.is_ipv4()))
}

/// The sockets among `sockets` on `addr`'s port that cover it, the exact
/// address first.
pub fn on(sockets: &[Socket], addr: SocketAddr) -> Vec<&Socket> {
    let mut found: Vec<&Socket> = sockets.iter().filter(|s| covers(s.addr, addr)).collect();
    found.sort_by_key(|s| s.addr.ip().to_canonical() != addr.ip().to_canonical());
    found
}

/// The process holding a UDP port, as a port-in-use message names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Its name as the OS gives it.
    pub process: String,
    /// The address its socket is bound to.
    pub addr: SocketAddr,
    /// The tool the table says it is.
    pub tool: Option<&'static Tool>,
}

impl From<&Socket> for Holder {
    fn from(s: &Socket) -> Self {
        Holder {
            pid: s.pid,
            process: s.process.clone(),
            addr: s.addr,
            tool: s.tool(),
        }
    }
}

impl fmt::Display for Holder {
    /// `SimHubWPF.exe (pid 4312)`, or `SimHubWPF.exe (SimHub, pid 4312)` when
    /// the table knows the tool.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tool {
            Some(tool) => write!(f, "{} ({}, pid {})", self.process, tool.name, self.pid),
            None => write!(f, "{} (pid {})", self.process, self.pid),
        }
    }
}

/// The process holding the UDP port of `addr`, if this computer will say.
/// For the port-in-use messages of `run`, `record`, `watch`, `export` and the
/// web page.
pub fn holder(addr: SocketAddr) -> Option<Holder> {
    let sockets = udp_sockets().ok()?;
    on(&sockets, addr).first().map(|s| Holder::from(*s))
}

/// The process holding the TCP port of `addr` (the web page's), when the OS
/// says; `None` for an error other than a taken port.
pub fn tcp_blocker(addr: SocketAddr, error: &io::Error) -> Option<Holder> {
    if !matches!(
        error.kind(),
        io::ErrorKind::AddrInUse | io::ErrorKind::PermissionDenied
    ) {
        return None;
    }
    let all = listeners::get_all().ok()?;
    let sockets: Vec<Socket> = all
        .into_iter()
        .filter(|l| l.protocol == listeners::Protocol::TCP)
        .map(|l| Socket {
            addr: l.socket,
            pid: l.process.pid,
            process: l.process.name,
        })
        .collect();
    on(&sockets, addr).first().map(|s| Holder {
        tool: None,
        ..Holder::from(*s)
    })
}

/// Who stopped a bind to `addr` that failed with `error`: the holder when the
/// port is taken (`AddrInUse`) or, on Windows, refused because a program holds
/// it exclusively (`WSAEACCES`, which Rust reports as `PermissionDenied`).
/// `None` for other errors, or when no holder can be found.
pub fn blocker(addr: SocketAddr, error: &io::Error) -> Option<Holder> {
    match error.kind() {
        io::ErrorKind::AddrInUse | io::ErrorKind::PermissionDenied => holder(addr),
        _ => None,
    }
}

/// The destination `setup` proposes for one tool found on this computer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposed {
    /// The tool (the first of `candidates` when the port alone says it).
    pub tool: &'static Tool,
    /// Where to send: its socket's address, 127.0.0.1 (::1) for a wildcard.
    pub addr: SocketAddr,
    /// Who holds that socket.
    pub holder: Holder,
    /// True when the process holding the socket is the tool, as the table
    /// knows it; false when only the port says so (the tool's default port,
    /// held by a process the table doesn't name for it: python, node, a
    /// container, a renamed program).
    pub confirmed: bool,
    /// When not confirmed: every tool whose default port it is.
    pub candidates: Vec<&'static Tool>,
    /// The destination name to write (unique in the proposal).
    pub name: String,
}

impl Proposed {
    /// What to send it: the tool's layout, or `same` when the tools whose
    /// default port it is want different ones.
    pub fn output(&self) -> Output {
        match self.candidates.as_slice() {
            [] => self.tool.layout,
            [first, rest @ ..] if rest.iter().all(|t| t.layout == first.layout) => first.layout,
            _ => Output::Same,
        }
    }
}

/// What `setup` found: the tools recognised and where to listen.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The port forza-relay should listen on: the running relay's, else 5400
    /// unless something holds it.
    pub listen_port: u16,
    /// The running relay's listening address, when one answered.
    pub running_listen: Option<SocketAddr>,
    /// The running relay's destinations, kept as they are.
    pub running: Vec<crate::report::query::Destination>,
    /// One destination per tool recognised, and per socket on a known tool's
    /// default port, that the running relay does not already send to.
    pub destinations: Vec<Proposed>,
    /// Tools holding several sockets, none on their default port: which one
    /// gets Forza packets is theirs to say (tool, its ports).
    pub unsure: Vec<(&'static Tool, Vec<u16>)>,
}

/// True for a process name that is forza-relay's.
pub fn is_forza_relay(process: &str) -> bool {
    let name = process.trim();
    name.eq_ignore_ascii_case("forza-relay") || name.eq_ignore_ascii_case("forza-relay.exe")
}

/// True for a Forza game's own process (its socket in 5200..5300 is the
/// game's, never a tool's).
fn is_game(process: &str) -> bool {
    let name = process.trim().to_ascii_lowercase();
    name.starts_with("forzahorizon") || name.starts_with("forzamotorsport")
}

/// Proposes a configuration for `sockets`, beside the relay that answered
/// `running` if one did: its listen address (else a port nothing holds, never
/// in 5200..=5300, never a tool's default) and its destinations, then one
/// destination per tool recognised (on the tool's default port when it holds
/// that, else on its only socket), and one per other socket on a known tool's
/// default port, each unless the running relay already sends there.
pub fn propose(sockets: &[Socket], running: Option<&crate::report::query::Answer>) -> Proposal {
    let relay_port = running.map(|r| r.listen.port());
    // The relay's own sockets, and its listening port, are no tool's.
    let sockets: Vec<&Socket> = sockets
        .iter()
        .filter(|s| !is_forza_relay(&s.process) && Some(s.addr.port()) != relay_port)
        .collect();
    let already: Vec<SocketAddr> = running
        .map(|r| {
            r.destinations
                .iter()
                .filter_map(|d| d.addr.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let sent_to = |addr: SocketAddr| already.iter().any(|&a| covers(a, addr));
    let mut destinations: Vec<Proposed> = Vec::new();
    let mut unsure = Vec::new();
    for tool in tools::tools() {
        let held: Vec<&Socket> = sockets
            .iter()
            .copied()
            .filter(|s| s.tool().is_some_and(|t| t.id == tool.id))
            .collect();
        let chosen = held
            .iter()
            .find(|s| s.addr.port() == tool.port)
            .or(match held.as_slice() {
                [one] => Some(one),
                _ => None,
            });
        match chosen {
            Some(s) => {
                let addr = SocketAddr::new(reachable(s.addr.ip()), s.addr.port());
                if !sent_to(addr) {
                    destinations.push(Proposed {
                        tool,
                        addr,
                        holder: Holder::from(*s),
                        confirmed: true,
                        candidates: Vec::new(),
                        name: tool.id.clone(),
                    });
                }
            }
            None if !held.is_empty() => {
                let mut ports: Vec<u16> = held.iter().map(|s| s.addr.port()).collect();
                ports.dedup();
                unsure.push((tool, ports));
            }
            None => {}
        }
    }
    // Sockets on a known tool's default port that no process name confirms.
    for s in &sockets {
        let port = s.addr.port();
        let candidates = tools::by_port(port);
        let Some(&first) = candidates.first() else {
            continue;
        };
        if s.tool().is_some() || is_game(&s.process) {
            continue;
        }
        let addr = SocketAddr::new(reachable(s.addr.ip()), port);
        if sent_to(addr) || destinations.iter().any(|d| d.addr.port() == port) {
            continue;
        }
        let name = match candidates.as_slice() {
            [one] if !destinations.iter().any(|d| d.name == one.id) => one.id.clone(),
            _ => format!("port-{port}"),
        };
        destinations.push(Proposed {
            tool: first,
            addr,
            holder: Holder::from(*s),
            confirmed: false,
            candidates,
            name,
        });
    }
    let (listen_port, running_listen, running) = match running {
        Some(r) => (r.listen.port(), Some(r.listen), r.destinations.clone()),
        None => (free_listen_port(&sockets), None, Vec::new()),
    };
    Proposal {
        listen_port,
        running_listen,
        running,
        destinations,
        unsure,
    }
}

/// Loopback for a wildcard address; the address itself otherwise.
fn reachable(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(v6) if v6.is_unspecified() => Ipv6Addr::LOCALHOST.into(),
        other => other,
    }
}

/// True for ports a game binds itself: FH6's settings say to avoid 5200..5300.
pub fn game_port(port: u16) -> bool {
    (5200..=5300).contains(&port)
}

/// 5400, or the next port up that no socket in `sockets` holds, that is no
/// tool's default, and that this process can bind on every interface.
fn free_listen_port(sockets: &[&Socket]) -> u16 {
    (DEFAULT_PORT..=u16::MAX)
        .find(|&port| {
            !game_port(port)
                && tools::by_port(port).is_empty()
                && !sockets.iter().any(|s| s.addr.port() == port)
                && UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
        })
        .unwrap_or(DEFAULT_PORT)
}

impl Proposal {
    /// The configuration file, with a comment per destination saying what was
    /// found there.
    pub fn to_toml(&self) -> String {
        use std::fmt::Write as _;
        let mut text = String::from(
            "# Written by `forza-relay setup` from the tools found on this computer.\n\
             # In the game (HUD and Gameplay): Data Out On, Data Out IP Address 127.0.0.1\n\
             # (this PC's LAN address for an Xbox), Data Out IP Port as below.\n\n\
             [listen]\n",
        );
        match self.running_listen {
            Some(listen) => {
                let _ = writeln!(
                    text,
                    "# Where the forza-relay running now listens.\naddr = \"{listen}\""
                );
            }
            None => {
                text.push_str(
                    "# This PC only. For a game on an Xbox or another PC: \"0.0.0.0:PORT\", and\n\
                     # let forza-relay through the firewall (Private networks).\n",
                );
                let _ = writeln!(text, "addr = \"127.0.0.1:{}\"", self.listen_port);
            }
        }
        for d in &self.running {
            let _ = write!(
                text,
                "\n[[destination]]\n# Sent to by the forza-relay running now.\nname = {}\naddr = {}\nformat = \"{}\"\n",
                quoted(&d.name),
                quoted(&d.addr),
                d.output
            );
            if d.only_race_on {
                text.push_str("only_race_on = true\n");
            }
            if d.max_rate > 0 {
                let _ = writeln!(text, "max_rate = {}", d.max_rate);
            }
            if let Some(ms) = d.max_age_ms {
                let _ = writeln!(text, "max_age = \"{ms}ms\"");
            }
            if let Some(ms) = d.hold_ms {
                let _ = writeln!(text, "hold = \"{ms}ms\"");
            }
        }
        text.push_str(&self.new_destinations_toml());
        if self.running.is_empty() && self.destinations.is_empty() && self.unsure.is_empty() {
            text.push_str(
                "\n# No known tool was found listening. Add one [[destination]] per tool:\n\
                 # [[destination]]\n# name = \"simhub\"\n# addr = \"127.0.0.1:8000\"\n",
            );
        }
        text
    }

    /// The `[[destination]]` tables of the tools found (and the comments for
    /// those left to the user), without the rest: what to add to a running
    /// relay's file.
    pub fn new_destinations_toml(&self) -> String {
        use std::fmt::Write as _;
        let mut text = String::new();
        for d in &self.destinations {
            let found = if d.confirmed {
                format!(
                    "# {}: {} on {}. {}",
                    d.tool.name, d.holder, d.holder.addr, d.tool.note
                )
            } else {
                let names: Vec<&str> = d.candidates.iter().map(|t| t.name.as_str()).collect();
                let layouts: Vec<String> = d
                    .candidates
                    .iter()
                    .map(|t| format!("{} {}", t.name, output_id(t.layout)))
                    .collect();
                let which = if d.candidates.len() > 1 {
                    format!(
                        "\n# Each wants: {}. Set format to the one this is.",
                        layouts.join(", ")
                    )
                } else {
                    String::new()
                };
                format!(
                    "# Port {} is the default port of {}, but the program holding it, {} on \
                     {},\n# is not one forza-relay knows as that tool: check it is.{which}",
                    d.addr.port(),
                    names.join(" and of "),
                    d.holder,
                    d.holder.addr
                )
            };
            let _ = write!(
                text,
                "\n[[destination]]\n{found}\nname = {}\naddr = \"{}\"\nformat = \"{}\"\n",
                quoted(&d.name),
                d.addr,
                output_id(d.output())
            );
        }
        for (tool, ports) in &self.unsure {
            let _ = write!(
                text,
                "\n# {} holds UDP ports {}; its Forza port is {} by default. Add the one it\n\
                 # reads Forza on:\n# [[destination]]\n# name = \"{}\"\n# addr = \"127.0.0.1:PORT\"\n# format = \"{}\"\n",
                tool.name,
                join(ports),
                tool.port,
                tool.id,
                output_id(tool.layout)
            );
        }
        text
    }
}

/// `text` as a TOML basic string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// `same` or the format id, as the config file spells it.
fn output_id(output: Output) -> String {
    output.to_string()
}

fn join(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SocketAddr {
        text.parse().expect("a socket address")
    }

    fn socket(addr: &str, pid: u32, process: &str) -> Socket {
        Socket {
            addr: at(addr),
            pid,
            process: process.to_owned(),
        }
    }

    #[test]
    fn a_wildcard_covers_its_family_and_dual_stack_covers_both() {
        assert!(covers(at("0.0.0.0:8000"), at("127.0.0.1:8000")));
        assert!(covers(at("127.0.0.1:8000"), at("0.0.0.0:8000")));
        assert!(covers(at("[::]:8000"), at("127.0.0.1:8000")));
        assert!(covers(at("[::]:8000"), at("[::1]:8000")));
        assert!(!covers(at("0.0.0.0:8000"), at("[::1]:8000")));
        assert!(!covers(at("127.0.0.1:8000"), at("127.0.0.2:8000")));
        assert!(!covers(at("0.0.0.0:8000"), at("127.0.0.1:8001")));
    }

    #[test]
    fn the_exact_address_is_named_before_a_wildcard() {
        let sockets = [
            socket("0.0.0.0:8000", 1, "a"),
            socket("127.0.0.1:8000", 2, "b"),
            socket("127.0.0.1:8001", 3, "c"),
        ];
        let found: Vec<u32> = on(&sockets, at("127.0.0.1:8000"))
            .iter()
            .map(|s| s.pid)
            .collect();
        assert_eq!(found, [2, 1]);
    }

    #[test]
    fn a_holder_says_which_tool_it_is() {
        let simhub = Holder::from(&socket("0.0.0.0:8000", 4312, "SimHubWPF.exe"));
        assert_eq!(simhub.to_string(), "SimHubWPF.exe (SimHub, pid 4312)");
        let other = Holder::from(&socket("0.0.0.0:8000", 7, "nc"));
        assert_eq!(other.to_string(), "nc (pid 7)");
    }

    #[test]
    fn colliding_defaults_are_told_apart_by_process() {
        let on_5300 = |process: &str| {
            socket("0.0.0.0:5300", 1, process)
                .tool()
                .map(|t| t.id.as_str())
        };
        assert_eq!(on_5300("RacingDSX.exe"), Some("racingdsx"));
        assert_eq!(on_5300("fh5-telemetry"), Some("fh5-telemetry"));
        assert_eq!(on_5300("node"), Some("co-driver"));
        assert_eq!(on_5300("python3"), None);
    }

    #[test]
    fn the_proposal_sends_each_tool_its_format_and_listens_outside_the_games_range() {
        let sockets = [
            socket("0.0.0.0:8000", 10, "SimHubWPF.exe"),
            // SimHub's other game readers: not its Forza port.
            socket("0.0.0.0:20777", 10, "SimHubWPF.exe"),
            socket("127.0.0.1:20440", 11, "fh6-tel"),
            socket("[::]:5300", 12, "fh5-telemetry"),
            socket("0.0.0.0:5201", 13, "ForzaHorizon6.exe"),
        ];
        let proposal = propose(&sockets, None);
        assert!(!game_port(proposal.listen_port));
        let got: Vec<(&str, String, Output)> = proposal
            .destinations
            .iter()
            .map(|d| (d.tool.id.as_str(), d.addr.to_string(), d.tool.layout))
            .collect();
        assert_eq!(
            got,
            [
                ("simhub", "127.0.0.1:8000".to_owned(), Output::Same),
                (
                    "fh6-tel",
                    "127.0.0.1:20440".to_owned(),
                    Output::Format(crate::Format::Fh6)
                ),
                (
                    "fh5-telemetry",
                    "[::1]:5300".to_owned(),
                    Output::Format(crate::Format::Fh5)
                ),
            ]
        );
        assert!(proposal.unsure.is_empty());
        let text = proposal.to_toml();
        let config = crate::config::Config::from_toml(&text, "setup.toml", &Default::default())
            .expect("the proposal is a valid configuration");
        assert_eq!(config.destinations.len(), 3);
        assert_eq!(config.listen.port(), proposal.listen_port);
    }

    #[test]
    fn a_tool_off_its_default_port_with_several_sockets_is_left_to_the_user() {
        let sockets = [
            socket("0.0.0.0:8100", 10, "SimHubWPF.exe"),
            socket("0.0.0.0:20777", 10, "SimHubWPF.exe"),
        ];
        let proposal = propose(&sockets, None);
        assert!(proposal.destinations.is_empty());
        assert_eq!(proposal.unsure.len(), 1);
        assert_eq!(proposal.unsure[0].1, [8100, 20777]);
        assert!(proposal.to_toml().contains("holds UDP ports 8100, 20777"));
    }

    #[test]
    fn a_socket_on_a_tools_default_port_is_proposed_saying_nothing_confirms_the_tool() {
        let sockets = [
            // D-BOX's port: one tool has it.
            socket("0.0.0.0:32000", 20, "python3"),
            // LapScope's and Forza-data-tools' port: two tools, two layouts.
            socket("127.0.0.1:9999", 21, "python3"),
            // The game's own socket on 5300, a tools' port: the game's.
            socket("0.0.0.0:5300", 22, "ForzaHorizon6.exe"),
            // No tool's port.
            socket("0.0.0.0:4444", 23, "python3"),
        ];
        let proposal = propose(&sockets, None);
        let got: Vec<(&str, String, Output, bool)> = proposal
            .destinations
            .iter()
            .map(|d| (d.name.as_str(), d.addr.to_string(), d.output(), d.confirmed))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "d-box",
                    "127.0.0.1:32000".to_owned(),
                    Output::Format(crate::Format::Fh5),
                    false
                ),
                (
                    "port-9999",
                    "127.0.0.1:9999".to_owned(),
                    Output::Same,
                    false
                ),
            ]
        );
        let text = proposal.to_toml();
        assert!(
            text.contains(
                "# Port 32000 is the default port of D-BOX (Forza Horizon 5), but the program \
                 holding it, python3 (pid 20) on 0.0.0.0:32000,\n# is not one forza-relay knows \
                 as that tool: check it is.\nname = \"d-box\""
            ),
            "{text}"
        );
        assert!(
            text.contains("# Each wants: LapScope fh6, Forza-data-tools same."),
            "{text}"
        );
        let config = crate::config::Config::from_toml(&text, "setup.toml", &Default::default())
            .expect("the proposal is a valid configuration");
        assert_eq!(config.destinations.len(), 2);
    }

    #[test]
    fn beside_a_running_relay_the_proposal_keeps_what_it_runs_and_adds_the_rest() {
        use crate::report::query::{Answer, Destination};
        let mut running = Answer::example(at("0.0.0.0:5400"));
        running.destinations.push(Destination {
            name: "hub".to_owned(),
            addr: "127.0.0.1:8000".to_owned(),
            output: "same".to_owned(),
            only_race_on: true,
            max_rate: 30,
            max_age_ms: Some(50),
            hold_ms: Some(15_000),
            status: crate::counters::Status::Ok,
            received: 10,
            sent: 10,
            problem: None,
        });
        let sockets = [
            socket("0.0.0.0:5400", 30, "forza-relay"),
            socket("0.0.0.0:41000", 30, "forza-relay"),
            socket("0.0.0.0:8000", 10, "SimHubWPF.exe"),
            socket("0.0.0.0:20440", 11, "fh6-tel"),
        ];
        let proposal = propose(&sockets, Some(&running));
        assert_eq!(proposal.listen_port, 5400, "where the relay listens");
        let names: Vec<&str> = proposal
            .destinations
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(names, ["fh6-tel"], "SimHub is sent to already");
        let text = proposal.to_toml();
        let config = crate::config::Config::from_toml(&text, "setup.toml", &Default::default())
            .expect("the proposal is a valid configuration");
        assert_eq!(config.listen, at("0.0.0.0:5400"));
        let hub = &config.destinations[0];
        assert_eq!(
            (
                hub.name.as_str(),
                hub.target.udp(),
                hub.only_race_on,
                hub.max_rate,
                hub.max_age,
                hub.hold
            ),
            (
                "hub",
                Some(at("127.0.0.1:8000")),
                true,
                30,
                Some(std::time::Duration::from_millis(50)),
                Some(std::time::Duration::from_secs(15))
            )
        );
        assert_eq!(config.destinations[1].name, "fh6-tel");
        assert!(!proposal.new_destinations_toml().contains("hub"));
    }
}
