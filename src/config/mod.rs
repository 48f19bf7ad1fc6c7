//! The relay's configuration: the TOML file ([`FileConfig`]) or the quick form on
//! the command line, validated once into a [`Config`] with every address resolved
//! and every format parsed: the relay itself parses no string. Names and
//! addresses are stored with their control characters escaped, so every place
//! that prints them is safe. [`Config::routes`] is the one place the relay's
//! core gets its own input from.
//!
//! Every mistake becomes a [`ConfigError`] naming the place (file and line, or the
//! command-line flag), the key, the value and what is wrong; all mistakes are
//! reported together, so a user fixes them in one go.
//!
//! Where things are: the file as written ([`FileConfig`]), how it is read
//! (regular file, size, encoding) and turned into settings, in `file.rs`; the
//! quick form of the command line (`--to HOST:PORT,format=…`) in `quick.rs`;
//! the checks that make settings a [`Config`] (addresses resolved, formats
//! parsed, every mistake named) in `validate/`; what a configuration makes
//! the relay do, as `check` prints it ([`Config::describe`]), in
//! `describe.rs`. The types every part shares are here.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use crate::fanout::Routes;
pub use crate::fanout::{Destination, Output};
pub use crate::wire::Input;
use crate::wire::{Format, FORMAT_IDS};

mod describe;
mod edit;
mod file;
mod quick;
mod validate;

pub use crate::logging::escape_controls;
pub use edit::{admit, field, DestinationSpec};
pub use file::{
    listen_of_file, read_text, AddrText, DestinationFile, FileConfig, ListenFile, RecordFile,
    StatsFile, WebFile,
};
pub use validate::{parse_hold, parse_listen, parse_max_age, parse_web, resolve};

/// The port forza-relay listens on when none is given. Outside FH6's own
/// 5200..5300, SimHub's 8000 and the community's usual 5300, 5555, 9999, 12350,
/// 20777 (docs/formats.md).
pub const DEFAULT_PORT: u16 = 5400;
/// The listen address when none is given: every interface, so an Xbox on the LAN
/// reaches it too.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), DEFAULT_PORT);
/// Where `run` serves its web page unless told otherwise: this PC only.
pub const DEFAULT_WEB: SocketAddr =
    SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5480);
/// Seconds between summary lines when `stats.interval` is not set.
pub const DEFAULT_STATS_INTERVAL: u64 = 10;
/// The longest `stats.interval` accepted: a day.
pub const MAX_STATS_INTERVAL: u64 = 86_400;
/// The shortest `max_age` accepted: a frame spends about that long in the OS
/// and the relay, so a shorter limit would drop live frames.
pub const MIN_MAX_AGE: Duration = Duration::from_millis(1);
/// The longest `max_age` accepted: a frame a minute old is not live by any
/// measure (the receive buffer holds about 18 s at 360 frames/s).
pub const MAX_MAX_AGE: Duration = Duration::from_secs(60);
/// The longest `hold` accepted: the Trueforce-for-All guide holds 15 s; a
/// car shown a minute after the game stopped sending it is a stale one.
pub const MAX_HOLD: Duration = Duration::from_secs(60);
/// The file looked for in the current folder and next to the program.
pub const DEFAULT_FILE_NAME: &str = "forza-relay.toml";
/// The largest configuration file read. A real one is a few KB; a bigger file is
/// the wrong file, and reading no more than this keeps a mistake (a video, a
/// disk image, `/dev/zero`) from taking minutes or gigabytes.
pub const MAX_FILE_BYTES: u64 = crate::named_file::MAX_BYTES;

impl std::str::FromStr for Input {
    type Err = String;

    /// `auto` or a format id, ignoring case; the error lists the valid values.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(Input::Auto);
        }
        text.parse::<Format>().map(Input::Fixed).map_err(|_| {
            let ids: Vec<&str> = std::iter::once("auto")
                .chain(Format::ALL.iter().map(|f| f.id()))
                .collect();
            format!(
                "unknown input format {text:?}{} (valid: auto, {FORMAT_IDS})",
                crate::words::did_you_mean(text, &ids)
            )
        })
    }
}

/// How summaries are printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StatsFormat {
    /// A line a person reads, in the log.
    #[default]
    Text,
    /// One JSON object per summary, one per line, on standard output.
    Json,
}

impl std::str::FromStr for StatsFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(StatsFormat::Text),
            "json" => Ok(StatsFormat::Json),
            _ => Err(format!("{s:?} is not a stats format (valid: text, json)")),
        }
    }
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where it came from: a file path, or "command line".
    pub origin: String,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// Where `listen` was written, for a "port in use" message.
    pub listen_place: String,
    /// The input format.
    pub input: Input,
    /// Source ranges allowed to send; empty = everyone.
    pub allow: Vec<IpNet>,
    /// Time between summary lines; `None` = off.
    pub stats_interval: Option<Duration>,
    /// How summaries are printed.
    pub stats_format: StatsFormat,
    /// Where packets go.
    pub destinations: Vec<Destination>,
    /// A capture file recording every datagram received (`{time}` in it becomes
    /// the start time); `None` = no recording.
    pub record: Option<PathBuf>,
    /// `[record] races`: every race kept as its own capture file.
    pub races: Option<Races>,
    /// Where `run` serves the web page (`[web] addr`, `--web`); `None` = off.
    pub web: Option<SocketAddr>,
}

/// `[record] races = "DIR"`, `keep = N` (issue 34): each race (its racing
/// frames and a second either side) written as its own capture file in
/// `dir`, the newest `keep` kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Races {
    /// The folder.
    pub dir: PathBuf,
    /// Races kept in it.
    pub keep: usize,
}

/// Races `[record] races` keeps unless told.
pub const DEFAULT_RACES_KEPT: usize = 20;
/// The most races `keep` takes.
pub const MAX_RACES_KEPT: usize = 10_000;

/// One configuration mistake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `file:line: key`, or the command-line flag.
    pub place: String,
    /// What is wrong, naming the value.
    pub message: String,
}

/// Every mistake found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The mistakes, in the order they appear.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: {}", p.place, p.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error of one problem at `place`.
    pub fn one(place: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            problems: vec![Problem {
                place: place.into(),
                message: message.into(),
            }],
        }
    }
}

/// How hostnames are looked up: [`system_look_up`], or a test's own.
pub type LookUp = dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Send + Sync;

/// The operating system's resolver.
pub fn system_look_up(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// True when `ip` is an address of this computer: the operating system's
/// answer for [`crate::fanout::is_loop`]. Connecting a UDP socket sends
/// nothing: the OS only picks the address it would send from, and for one of
/// its own addresses that is the address itself. This asks the routing table
/// the question a packet would, so there is no interface list to keep up to
/// date.
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

/// A configuration read again while running, and what it kept from before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The new configuration.
    pub config: Config,
    /// Things the running relay should know but that don't make the file
    /// invalid: a hostname that no longer resolves keeps its previous address.
    pub warnings: Vec<Problem>,
}

/// Settings given on the command line, which override or replace the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--format` (the input format).
    pub input: Option<String>,
    /// `--stats-interval`.
    pub stats_interval: Option<u64>,
    /// `--stats-format`.
    pub stats_format: Option<String>,
    /// `--record`.
    pub record: Option<String>,
    /// `--web`.
    pub web: Option<String>,
}

impl Config {
    /// What the relay's core takes from this configuration: the input format,
    /// the allow-list and the destinations (the shell keeps the rest).
    pub fn routes(&self) -> Routes {
        Routes {
            input: self.input,
            allow: self.allow.clone(),
            destinations: self.destinations.clone(),
        }
    }
}

#[cfg(test)]
mod testing {
    use super::{Config, ConfigError, Overrides};

    pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, "test.toml", &Overrides::default())
    }

    #[track_caller]
    pub(super) fn problems(text: &str) -> Vec<String> {
        parse(text)
            .unwrap_err()
            .problems
            .into_iter()
            .map(|p| format!("{}: {}", p.place, p.message))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fanout;

    fn at(text: &str) -> SocketAddr {
        text.parse().expect("a socket address")
    }

    #[test]
    fn another_computer_is_not_this_one() {
        // TEST-NET-3 (RFC 5737): documentation only, never assigned to a host.
        assert!(!is_own_address("203.0.113.9".parse().unwrap()));
        assert!(!fanout::is_loop(
            at("0.0.0.0:5400"),
            at("203.0.113.9:5400"),
            is_own_address
        ));
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
            assert!(
                fanout::is_loop(at(&format!("{any}:5400")), dest, is_own_address),
                "{dest}"
            );
            assert!(
                fanout::is_loop(at("[::]:5400"), dest, is_own_address),
                "{dest} via ::"
            );
            assert!(
                !fanout::is_loop(at(&format!("{any}:5401")), dest, is_own_address),
                "{dest}"
            );
            // Bound to loopback only, the listener never sees packets for the LAN.
            assert!(
                !fanout::is_loop(at("127.0.0.1:5400"), dest, is_own_address),
                "{dest}"
            );
        }
    }
}
