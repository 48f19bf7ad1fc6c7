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

use std::fmt;
use std::fs::File;
use std::io::{self, Read as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use crate::fanout::{self, Routes};
pub use crate::fanout::{Destination, Output};
pub use crate::wire::Input;
use crate::wire::{Format, FORMAT_IDS};

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
/// The file looked for in the current folder and next to the program.
pub const DEFAULT_FILE_NAME: &str = "forza-relay.toml";
/// The largest configuration file read. A real one is a few KB; a bigger file is
/// the wrong file, and reading no more than this keeps a mistake (a video, a
/// disk image, `/dev/zero`) from taking minutes or gigabytes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

impl std::str::FromStr for Input {
    type Err = String;

    /// `auto` or a format id, ignoring case; the error lists the valid values.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(Input::Auto);
        }
        text.parse::<Format>()
            .map(Input::Fixed)
            .map_err(|_| format!("unknown input format {text:?} (valid: auto, {FORMAT_IDS})"))
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
    /// Where `run` serves the web page (`[web] addr`, `--web`); `None` = off.
    pub web: Option<SocketAddr>,
}

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
/// answer for [`fanout::is_loop`]. Connecting a UDP socket sends nothing: the OS
/// only picks the address it would send from, and for one of its own addresses
/// that is the address itself. This asks the routing table the question a
/// packet would, so there is no interface list to keep up to date.
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

/// `text` safe to print: every control character (ESC, a newline…) written as
/// its escape (`\u{1b}`, `\n`), everything else as it is. Destination names
/// and addresses are stored this way at load, so every log line, summary and
/// dashboard that shows them is safe (issue 12).
pub fn escape_controls(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    escaped
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

/// The TOML file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `[listen]`.
    #[serde(default)]
    pub listen: ListenFile,
    /// `[stats]`.
    #[serde(default)]
    pub stats: StatsFile,
    /// `[[destination]]`, one per table.
    #[serde(default)]
    pub destination: Vec<Spanned<DestinationFile>>,
    /// `[record]`.
    #[serde(default)]
    pub record: RecordFile,
    /// `[web]`.
    #[serde(default)]
    pub web: WebFile,
}

/// `[web]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebFile {
    /// `addr = "127.0.0.1:5480"`, or `"off"`.
    pub addr: Option<Spanned<String>>,
}

/// An address as written: text, or a bare port number without quotes (which the
/// checks then read as the text of that number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrText(pub String);

impl<'de> Deserialize<'de> for AddrText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = AddrText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an address in quotes, like \"127.0.0.1:8000\", or a port number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<AddrText, E> {
                Ok(AddrText(v.to_owned()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<AddrText, E> {
                Ok(AddrText(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<AddrText, E> {
                Ok(AddrText(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// What toml's message about `key`'s value means, said as how to fix it:
/// toml names a type, where a user needs the rule (issue 13).
fn explain_toml(line: &str, message: &str) -> Option<String> {
    let line = line.trim();
    let key = line.split('=').next().unwrap_or_default().trim();
    if line.starts_with("[destination]") && message.contains("expected a sequence") {
        return Some(
            "use [[destination]] (two brackets on each side): one such table per tool".to_owned(),
        );
    }
    let whole = |what: &str| {
        format!(
            "{key} must be {what}: {}",
            message.split(',').next().unwrap_or(message)
        )
    };
    match key {
        "max_rate" if message.contains("integer") => Some(whole(
            "0 (no limit) or a whole number of packets a second, up to 4294967295",
        )),
        "interval" if message.contains("integer") => {
            Some(whole("0 (no summary) or a whole number of seconds"))
        }
        _ => None,
    }
}

/// `[record]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordFile {
    /// `path = "drive-{time}.pcap"`: relative to the config file's folder.
    pub path: Option<Spanned<String>>,
}

/// `[listen]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenFile {
    /// `addr = "0.0.0.0:5400"` (or a bare port, quoted or not).
    pub addr: Option<Spanned<AddrText>>,
    /// `format = "auto"`.
    pub format: Option<Spanned<String>>,
    /// `allow = ["192.168.1.0/24"]`.
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
}

/// `[stats]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsFile {
    /// Seconds between summary lines, 0 = off.
    pub interval: Option<Spanned<u64>>,
    /// `text` (default) or `json`.
    pub format: Option<Spanned<String>>,
}

/// One `[[destination]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationFile {
    /// Defaults to the address.
    pub name: Option<Spanned<String>>,
    /// `host:port`.
    pub addr: Spanned<AddrText>,
    /// `same` or a format id; default `same`.
    pub format: Option<Spanned<String>>,
    /// Default false.
    pub only_race_on: Option<bool>,
    /// Hz, default 0.
    pub max_rate: Option<Spanned<u32>>,
    /// `"50ms"`: frames older than this are not sent; default none.
    pub max_age: Option<Spanned<String>>,
}

/// A destination before validation, from the file or from `--to`.
struct RawDestination {
    /// Where its `name`, `addr` and `format` keys were written, e.g.
    /// `relay.toml:12: destination[2].addr`, or `--to "…"`.
    name_place: String,
    addr_place: String,
    format_place: String,
    name: Option<String>,
    addr: String,
    format: Option<String>,
    only_race_on: bool,
    max_rate: u32,
    /// Where `max_age` was written, and its text.
    max_age: Option<(String, String)>,
}

/// The settings before validation.
struct Raw {
    origin: String,
    listen: Option<(String, String)>,
    format: Option<(String, String)>,
    allow: Vec<(String, String)>,
    stats_interval: Option<(String, u64)>,
    stats_format: Option<(String, String)>,
    destinations: Vec<RawDestination>,
    /// Where to point a "no destinations" message; `None` for a configuration
    /// that forwards nothing (what `record` runs).
    destinations_place: Option<String>,
    /// `record.path`, and the folder a relative one is in.
    record: Option<(String, String, Option<PathBuf>)>,
    /// `web.addr` (or `--web`), where it was written.
    web: Option<(String, String)>,
}

/// The text of the config file at `path`, and its name for messages.
fn read_file(path: &Path) -> Result<(String, String), ConfigError> {
    let origin = path.display().to_string();
    let text = read_text(path, &origin)?;
    if text.trim().is_empty() {
        return Err(ConfigError::one(
            &origin,
            "the file is empty: add a [[destination]] table (see config.example.toml)",
        ));
    }
    Ok((text, origin))
}

/// 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
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

    /// What this configuration makes the relay do, as `check` prints it.
    pub fn describe(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let input = match self.input {
            Input::Auto => "any Forza format (detected by length)".to_owned(),
            Input::Fixed(f) => format!("{f} packets ({}, {} bytes)", f.game(), f.len()),
        };
        let _ = write!(s, "listen on {} ({}) for {input}", self.listen, self.origin);
        if self.allow.is_empty() {
            s.push_str(" from any sender");
        } else {
            let nets: Vec<String> = self.allow.iter().map(ToString::to_string).collect();
            let _ = write!(s, " only from {}", nets.join(", "));
        }
        let _ = write!(
            s,
            "\nsend every packet to {} destination",
            self.destinations.len()
        );
        if self.destinations.len() != 1 {
            s.push('s');
        }
        s.push(':');
        for d in &self.destinations {
            let _ = write!(s, "\n  {:<16} {:<22} ", d.name, d.addr.to_string());
            match d.output {
                Output::Same => s.push_str("same (byte-for-byte)"),
                Output::Format(f) => {
                    let _ = write!(s, "{f} (translated)");
                }
            }
            if d.addr_text != d.addr.to_string() && d.addr_text != d.name {
                let _ = write!(s, ", from {:?}", d.addr_text);
            }
            if d.only_race_on {
                s.push_str(", only while racing");
            }
            if d.max_rate > 0 {
                let _ = write!(s, ", at most {}/s", d.max_rate);
            }
            if let Some(age) = d.max_age {
                let _ = write!(s, ", none older than {}", humantime::format_duration(age));
            }
        }
        match self.stats_interval {
            Some(i) => {
                let _ = write!(s, "\nsummary every {}s", i.as_secs());
            }
            None => s.push_str("\nperiodic summary off"),
        }
        if self.stats_format == StatsFormat::Json {
            s.push_str(", summaries as JSON lines on standard output");
        }
        if let Some(path) = &self.record {
            let _ = write!(
                s,
                "\nrecord every datagram received into {}",
                path.display()
            );
        }
        s
    }

    /// Reads and validates the file at `path`, then applies `overrides`.
    pub fn from_file(path: &Path, overrides: &Overrides) -> Result<Config, ConfigError> {
        let (text, origin) = read_file(path)?;
        Self::parse(
            &text,
            &origin,
            path.parent(),
            overrides,
            None,
            &system_look_up,
        )
        .map(|r| r.config)
    }

    /// Validates TOML `text`; `origin` names it in messages.
    pub fn from_toml(
        text: &str,
        origin: &str,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        Self::parse(text, origin, None, overrides, None, &system_look_up).map(|r| r.config)
    }

    /// Reads the file at `path` again while `previous` runs, looking hostnames
    /// up with `look_up`. As [`Config::from_file`], except that a destination
    /// whose hostname no longer resolves, written exactly as before, keeps its
    /// previous address (with a warning) instead of making the file invalid.
    pub fn reload_file(
        path: &Path,
        overrides: &Overrides,
        previous: Option<&Config>,
        look_up: &LookUp,
    ) -> Result<Reloaded, ConfigError> {
        let (text, origin) = read_file(path)?;
        Self::parse(&text, &origin, path.parent(), overrides, previous, look_up)
    }

    /// Validates `text`; a relative `record.path` is taken from `folder`.
    fn parse(
        text: &str,
        origin: &str,
        folder: Option<&Path>,
        overrides: &Overrides,
        previous: Option<&Config>,
        look_up: &LookUp,
    ) -> Result<Reloaded, ConfigError> {
        let file: FileConfig = toml::from_str(text).map_err(|e| {
            // toml's message names the type, not the key: quote the line too.
            let place = match e.span() {
                Some(span) => {
                    let line = line_of(text, span.start);
                    let source = text.lines().nth(line - 1).unwrap_or_default().trim();
                    // A binary file's control bytes would garble the terminal.
                    let quoted = escape_controls(source);
                    format!("{origin}:{line}: {quoted}")
                }
                None => origin.to_owned(),
            };
            // One line ("invalid array; expected `]`"), and never empty: toml says
            // nothing when the text stops right after `key =`.
            let mut message: Vec<&str> = e.message().lines().map(str::trim).collect();
            message.retain(|l| !l.is_empty());
            let source = e
                .span()
                .and_then(|span| text.lines().nth(line_of(text, span.start) - 1))
                .unwrap_or_default();
            let message = match e.span() {
                _ if !message.is_empty() => {
                    let joined = message.join("; ");
                    explain_toml(source, &joined).unwrap_or(joined)
                }
                Some(span) if span.start >= text.trim_end().len() => {
                    "the file ends in the middle of this setting: was it saved completely?"
                        .to_owned()
                }
                _ => "this is not valid TOML".to_owned(),
            };
            ConfigError::one(place, message)
        })?;
        let at = |span: std::ops::Range<usize>, key: &str| {
            format!("{origin}:{}: {key}", line_of(text, span.start))
        };
        let spanned = |v: &Spanned<String>, key: &str| (at(v.span(), key), v.get_ref().clone());
        let address = |v: &Spanned<AddrText>, key: &str| (at(v.span(), key), v.get_ref().0.clone());
        let raw = Raw {
            origin: origin.to_owned(),
            listen: file.listen.addr.as_ref().map(|v| address(v, "listen.addr")),
            format: file
                .listen
                .format
                .as_ref()
                .map(|v| spanned(v, "listen.format")),
            allow: file
                .listen
                .allow
                .iter()
                .map(|v| spanned(v, "listen.allow"))
                .collect(),
            stats_interval: file
                .stats
                .interval
                .as_ref()
                .map(|v| (at(v.span(), "stats.interval"), *v.get_ref())),
            stats_format: file
                .stats
                .format
                .as_ref()
                .map(|v| spanned(v, "stats.format")),
            destinations: file
                .destination
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let table = d.get_ref();
                    let key = |span: Option<std::ops::Range<usize>>, key: &str| {
                        at(
                            span.unwrap_or(d.span()),
                            &format!("destination[{}].{key}", i + 1),
                        )
                    };
                    RawDestination {
                        name_place: key(table.name.as_ref().map(|v| v.span()), "name"),
                        addr_place: key(Some(table.addr.span()), "addr"),
                        format_place: key(table.format.as_ref().map(|v| v.span()), "format"),
                        name: table.name.as_ref().map(|n| n.get_ref().clone()),
                        addr: table.addr.get_ref().0.clone(),
                        format: table.format.as_ref().map(|f| f.get_ref().clone()),
                        only_race_on: table.only_race_on.unwrap_or(false),
                        max_rate: table.max_rate.as_ref().map_or(0, |m| *m.get_ref()),
                        max_age: table
                            .max_age
                            .as_ref()
                            .map(|v| (key(Some(v.span()), "max_age"), v.get_ref().clone())),
                    }
                })
                .collect(),
            destinations_place: Some(origin.to_owned()),
            record: file.record.path.as_ref().map(|v| {
                let (place, text) = spanned(v, "record.path");
                (place, text, folder.map(Path::to_path_buf))
            }),
            web: file.web.addr.as_ref().map(|v| spanned(v, "web.addr")),
        };
        raw.apply(overrides).validate(previous, look_up)
    }

    /// Builds a configuration from the quick form: `--to` values such as
    /// `127.0.0.1:5301,format=fh5,only-race-on,max-rate=30,name=dash`.
    pub fn from_args(to: &[String], overrides: &Overrides) -> Result<Config, ConfigError> {
        let mut problems = Vec::new();
        let mut destinations = Vec::new();
        for spec in to {
            match parse_to(spec) {
                Ok(d) => destinations.push(d),
                Err(p) => problems.push(p),
            }
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        Raw {
            origin: "command line".to_owned(),
            listen: None,
            format: None,
            allow: Vec::new(),
            stats_interval: None,
            stats_format: None,
            destinations,
            destinations_place: Some("command line".to_owned()),
            record: None,
            web: None,
        }
        .apply(overrides)
        .validate(None, &system_look_up)
        .map(|r| r.config)
    }
}

impl Config {
    /// A configuration that listens on `listen` (`--listen`; the default when
    /// `None`) and forwards nothing: what `record` runs. Validated as any other.
    pub fn listen_only(listen: Option<&str>) -> Result<Config, ConfigError> {
        Raw {
            origin: "command line".to_owned(),
            listen: listen.map(|l| ("--listen".to_owned(), l.to_owned())),
            format: None,
            allow: Vec::new(),
            stats_interval: Some(("command line".to_owned(), 0)),
            stats_format: None,
            destinations: Vec::new(),
            destinations_place: None,
            record: None,
            web: Some(("command line".to_owned(), "off".to_owned())),
        }
        .validate(None, &system_look_up)
        .map(|r| r.config)
    }
}

/// What a path that is not a regular file is, for the message refusing it.
fn not_a_file(file_type: std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return Some("a named pipe (FIFO)");
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return Some("a device");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// The text of the configuration file at `path`, at most [`MAX_FILE_BYTES`],
/// which must be UTF-8 (a UTF-8 byte-order mark is fine: toml skips it).
fn read_text(path: &Path, origin: &str) -> Result<String, ConfigError> {
    let cannot =
        |e: io::Error| ConfigError::one(origin, format!("cannot read the config file: {e}"));
    // Looked at before it is opened: opening a FIFO waits for a writer forever.
    let kind = std::fs::metadata(path).map_err(cannot)?.file_type();
    if let Some(kind) = not_a_file(kind) {
        return Err(ConfigError::one(
            origin,
            format!(
                "cannot read the config file: it is {kind}; a configuration is a TOML text \
                 file"
            ),
        ));
    }
    let file = File::open(path).map_err(cannot)?;
    let too_big = |size: &str| {
        ConfigError::one(
            origin,
            format!(
                "the file {size}: a configuration may be at most {} KiB (a real one is a \
                 few KB); is this the right file?",
                MAX_FILE_BYTES >> 10
            ),
        )
    };
    // Its size as it is now; one that grows while it is read is still read
    // only up to the limit.
    if let Ok(size) = file.metadata().map(|m| m.len()) {
        if size > MAX_FILE_BYTES {
            return Err(too_big(&format!("is {size} bytes")));
        }
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(&format!(
            "holds more than {} KiB",
            MAX_FILE_BYTES >> 10
        )));
    }
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(ConfigError::one(
            origin,
            "the file is saved as UTF-16 (PowerShell's `>` does that): save it as UTF-8 \
             (Notepad: File > Save as > Encoding: UTF-8)",
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        ConfigError::one(
            format!("{origin}:{line}"),
            "this line is not UTF-8 text: a configuration is a TOML text file saved as \
             UTF-8; is this the right file?",
        )
    })
}

/// Parses one `--to` value.
fn parse_to(spec: &str) -> Result<RawDestination, Problem> {
    let place = format!("--to {spec:?}");
    let mut parts = spec.split(',').map(str::trim);
    let addr = parts.next().unwrap_or_default().to_owned();
    let mut d = RawDestination {
        name_place: place.clone(),
        addr_place: place.clone(),
        format_place: place.clone(),
        name: None,
        addr,
        format: None,
        only_race_on: false,
        max_rate: 0,
        max_age: None,
    };
    for part in parts {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (part, None),
        };
        match (key.replace('_', "-").as_str(), value) {
            ("format", Some(v)) => d.format = Some(v.to_owned()),
            ("name", Some(v)) => d.name = Some(v.to_owned()),
            ("only-race-on", None) => d.only_race_on = true,
            ("only-race-on", Some(v)) => {
                d.only_race_on = v.parse().map_err(|_| Problem {
                    place: place.clone(),
                    message: format!("only-race-on={v:?} must be true or false"),
                })?
            }
            ("max-rate", Some(v)) => {
                d.max_rate = v.parse().map_err(|_| Problem {
                    place: place.clone(),
                    message: format!("max-rate={v:?} must be a whole number of Hz (0 = every frame)"),
                })?
            }
            ("max-age", Some(v)) => d.max_age = Some((place.clone(), v.to_owned())),
            _ => {
                return Err(Problem {
                    place,
                    message: format!(
                        "unknown option {part:?} (options: format=ID, only-race-on, max-rate=HZ, max-age=DURATION, name=NAME)"
                    ),
                })
            }
        }
    }
    Ok(d)
}

impl Raw {
    fn apply(mut self, o: &Overrides) -> Self {
        if let Some(l) = &o.listen {
            self.listen = Some(("--listen".to_owned(), l.clone()));
        }
        if let Some(i) = &o.input {
            self.format = Some(("--format".to_owned(), i.clone()));
        }
        if let Some(s) = o.stats_interval {
            self.stats_interval = Some(("--stats-interval".to_owned(), s));
        }
        if let Some(f) = &o.stats_format {
            self.stats_format = Some(("--stats-format".to_owned(), f.clone()));
        }
        if let Some(r) = &o.record {
            // Relative to the current folder, as any path on a command line.
            self.record = Some(("--record".to_owned(), r.clone(), None));
        }
        if let Some(w) = &o.web {
            self.web = Some(("--web".to_owned(), w.clone()));
        }
        self
    }

    fn validate(
        self,
        previous: Option<&Config>,
        look_up: &LookUp,
    ) -> Result<Reloaded, ConfigError> {
        let mut warnings = Vec::new();
        let mut problems = Vec::new();
        let mut problem = |place: &str, message: String| {
            problems.push(Problem {
                place: place.to_owned(),
                message,
            })
        };

        let (listen_place, listen) = match &self.listen {
            None => (
                format!("{}: listen.addr (default)", self.origin),
                Some(DEFAULT_LISTEN),
            ),
            Some((place, text)) => match parse_listen(text) {
                Ok(addr) => (place.clone(), Some(addr)),
                Err(message) => {
                    problem(place, message);
                    (place.clone(), None)
                }
            },
        };

        let input = match &self.format {
            None => Input::Auto,
            Some((place, text)) => text.parse::<Input>().unwrap_or_else(|message| {
                problem(place, message);
                Input::Auto
            }),
        };

        let stats_interval = match &self.stats_interval {
            None => Some(Duration::from_secs(DEFAULT_STATS_INTERVAL)),
            Some((_, 0)) => None,
            Some((place, s)) if *s > MAX_STATS_INTERVAL => {
                problem(
                    place,
                    format!(
                        "{s} seconds is longer than a day ({MAX_STATS_INTERVAL}); use 0 to turn \
                         the summary off"
                    ),
                );
                None
            }
            Some((_, s)) => Some(Duration::from_secs(*s)),
        };

        let stats_format = match &self.stats_format {
            None => StatsFormat::Text,
            Some((place, text)) => text.parse().unwrap_or_else(|message| {
                problem(place, message);
                StatsFormat::Text
            }),
        };

        let mut allow = Vec::new();
        for (place, text) in &self.allow {
            match parse_net(text) {
                Some(net) => allow.push(net),
                None => problem(
                    place,
                    format!("{text:?} is not an IP address or CIDR range (like 192.168.1.0/24)"),
                ),
            }
        }

        let mut destinations: Vec<Destination> = Vec::new();
        // Every name and address seen so far, valid or not, to catch duplicates.
        let mut seen: Vec<(String, Option<SocketAddr>)> = Vec::new();
        if let (true, Some(place)) = (self.destinations.is_empty(), &self.destinations_place) {
            problem(
                place,
                "no destinations: add a [[destination]] table (or --to HOST:PORT)".to_owned(),
            );
        }
        for d in &self.destinations {
            let raw_name = d.name.as_deref().unwrap_or(&d.addr);
            if raw_name.trim().is_empty() {
                problem(&d.name_place, "name is empty".to_owned());
            }
            // Stored escaped, so that every place that shows them is safe.
            let name = escape_controls(raw_name);
            let addr_text = escape_controls(&d.addr);
            let output = match d.format.as_deref().map(str::trim) {
                None => Some(Output::Same),
                Some(s) if s.eq_ignore_ascii_case("same") => Some(Output::Same),
                Some(s) => match s.parse::<Format>() {
                    Ok(f) => Some(Output::Format(f)),
                    Err(_) => {
                        problem(
                            &d.format_place,
                            format!("{s:?} is not a format (valid: same, {FORMAT_IDS})"),
                        );
                        None
                    }
                },
            };
            let addr = match resolve(&d.addr, look_up) {
                Ok(a) => Some(a),
                Err(message) => {
                    // The same text resolved before, so only the look-up failed.
                    let before = previous
                        .and_then(|p| p.destinations.iter().find(|x| x.addr_text == addr_text));
                    match before {
                        Some(before) => {
                            warnings.push(Problem {
                                place: d.addr_place.clone(),
                                message: format!(
                                    "{:?}: {message}; keeping its previous address {}",
                                    d.addr, before.addr
                                ),
                            });
                            Some(before.addr)
                        }
                        None => {
                            problem(&d.addr_place, format!("{:?}: {message}", d.addr));
                            None
                        }
                    }
                }
            };
            if seen.iter().any(|(n, _)| *n == name) {
                problem(
                    &d.name_place,
                    format!("{name:?} is already the name of another destination"),
                );
            }
            if let Some(addr) = addr {
                if let Some((other, _)) = seen.iter().find(|(_, a)| *a == Some(addr)) {
                    problem(
                        &d.addr_place,
                        format!(
                            "{:?} ({addr}) is the same address as destination {other:?}",
                            d.addr
                        ),
                    );
                }
                if let Some(listen) = listen {
                    if fanout::is_loop(listen, addr, is_own_address) {
                        problem(
                            &d.addr_place,
                            format!(
                                "{:?} ({addr}) is forza-relay's own listen address {listen}: \
                                 packets would loop forever",
                                d.addr
                            ),
                        );
                    }
                }
            }
            seen.push((name.clone(), addr));
            let max_age = match &d.max_age {
                None => Some(None),
                Some((place, text)) => match parse_max_age(text) {
                    Ok(age) => Some(Some(age)),
                    Err(message) => {
                        problem(place, message);
                        None
                    }
                },
            };
            if let (Some(addr), Some(output), Some(max_age)) = (addr, output, max_age) {
                destinations.push(Destination {
                    name,
                    addr_text,
                    addr,
                    output,
                    only_race_on: d.only_race_on,
                    max_rate: d.max_rate,
                    max_age,
                });
            }
        }

        let record = match &self.record {
            None => None,
            Some((place, text, _)) if text.trim().is_empty() => {
                problem(
                    place,
                    "the path is empty: write a file name, like \"drive-{time}.pcap\"".to_owned(),
                );
                None
            }
            Some((_, text, folder)) => {
                let path = PathBuf::from(text.trim());
                Some(match folder {
                    Some(folder) if path.is_relative() && !folder.as_os_str().is_empty() => {
                        folder.join(path)
                    }
                    _ => path,
                })
            }
        };

        let web = match &self.web {
            None => Some(DEFAULT_WEB),
            Some((place, text)) => parse_web(text).unwrap_or_else(|message| {
                problem(place, message);
                None
            }),
        };

        match listen {
            Some(listen) if problems.is_empty() => Ok(Reloaded {
                warnings,
                config: Config {
                    origin: self.origin,
                    listen,
                    listen_place,
                    input,
                    allow,
                    stats_interval,
                    stats_format,
                    destinations,
                    record,
                    web,
                },
            }),
            _ => Err(ConfigError { problems }),
        }
    }
}

/// A listen address: `IP:PORT`, `[IPv6]:PORT`, or a bare `PORT` (all interfaces).
/// The error quotes the text and shows the two usual forms.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::new(DEFAULT_LISTEN.ip(), port));
    }
    t.parse::<SocketAddr>().map_err(|_| {
        format!(
            "{text:?} is not an address to listen on: write IP:PORT, like \"0.0.0.0:{DEFAULT_PORT}\" \
             (every interface) or \"127.0.0.1:{DEFAULT_PORT}\" (this PC only)"
        )
    })
}

/// A destination's `max_age`: a duration with a unit (`"50ms"`, `"0.1s"`),
/// from [`MIN_MAX_AGE`] to [`MAX_MAX_AGE`]. The error quotes the text.
pub fn parse_max_age(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let example = "like \"50ms\" (or leave max_age out to send frames of any age)";
    if t.starts_with('-') {
        return Err(format!(
            "{text:?} is negative: write an age limit {example}"
        ));
    }
    let age = humantime::parse_duration(t).map_err(|e| {
        format!("{text:?} is not a duration ({e}): write a number and a unit, {example}")
    })?;
    if age.is_zero() {
        Err(format!(
            "{text:?} would drop every frame: write an age limit {example}"
        ))
    } else if age < MIN_MAX_AGE {
        Err(format!(
            "{text:?} is shorter than {}: every frame spends about that long in the OS and \
             the relay; write an age limit {example}",
            humantime::format_duration(MIN_MAX_AGE)
        ))
    } else if age > MAX_MAX_AGE {
        Err(format!(
            "{text:?} is longer than {}: a frame that old is not live; write an age limit {example}",
            humantime::format_duration(MAX_MAX_AGE)
        ))
    } else {
        Ok(age)
    }
}

/// The web page's address: `IP:PORT`, a bare `PORT` (this PC only), or `off`.
pub fn parse_web(text: &str) -> Result<Option<SocketAddr>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    if let Ok(port) = t.parse::<u16>() {
        return Ok(Some(SocketAddr::new(DEFAULT_WEB.ip(), port)));
    }
    t.parse::<SocketAddr>().map(Some).map_err(|_| {
        format!(
            "{text:?} is not an address for the web page: write IP:PORT, like \"{DEFAULT_WEB}\" \
             (this PC only) or \"0.0.0.0:{}\" (phones on the network too, with a token), or \"off\"",
            DEFAULT_WEB.port()
        )
    })
}

/// An IP (a single host) or a CIDR range.
fn parse_net(text: &str) -> Option<IpNet> {
    let t = text.trim();
    t.parse::<IpNet>()
        .ok()
        .or_else(|| t.parse::<IpAddr>().ok().map(IpNet::from))
}

/// Resolves a destination `host:port` with `look_up` (never on the relay's loop;
/// IPv4 preferred). The error says what is wrong, without quoting `text`.
pub fn resolve(text: &str, look_up: &LookUp) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return check_port(a);
    }
    let Some((host, port)) = t.rsplit_once(':') else {
        if let Ok(port) = t.parse::<u16>() {
            return Err(format!(
                "needs a host before the port: \"127.0.0.1:{port}\" for a tool on this PC"
            ));
        }
        return Err("needs a port, like \"127.0.0.1:8000\"".to_owned());
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!("port {port:?} is not a number from 1 to 65535"));
    };
    if host.is_empty() {
        return Err("needs a host before the port, like \"127.0.0.1:8000\"".to_owned());
    }
    let addrs = look_up(host, port).map_err(|e| format!("cannot resolve host {host:?}: {e}"))?;
    // Prefer IPv4: most tools listen on 0.0.0.0, and "localhost" may list ::1 first.
    let chosen = addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .ok_or_else(|| format!("host {host:?} has no address"))?;
    check_port(*chosen)
}

fn check_port(a: SocketAddr) -> Result<SocketAddr, String> {
    if a.port() == 0 {
        Err("port 0 is not a destination port".to_owned())
    } else if a.ip().is_unspecified() {
        Err(format!(
            "{} means \"any address\" and can't be sent to; use 127.0.0.1 for this PC",
            a.ip()
        ))
    } else {
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, "test.toml", &Overrides::default())
    }

    #[track_caller]
    fn problems(text: &str) -> Vec<String> {
        parse(text)
            .unwrap_err()
            .problems
            .into_iter()
            .map(|p| format!("{}: {}", p.place, p.message))
            .collect()
    }

    #[test]
    fn a_full_file_is_read_with_defaults() {
        let c = parse(
            r#"
[listen]
addr = "127.0.0.1:5999"
format = "FH6"
allow = ["192.168.1.0/24", "127.0.0.1"]

[[destination]]
name = "simhub"
addr = "127.0.0.1:8000"

[[destination]]
addr = "127.0.0.1:5301"
format = "fh5"
only_race_on = true
max_rate = 30
"#,
        )
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:5999".parse().unwrap());
        assert_eq!(c.input, Input::Fixed(Format::Fh6));
        assert_eq!(c.allow.len(), 2);
        assert!(c.allow[1].contains(&"127.0.0.1".parse::<IpAddr>().unwrap()));
        assert_eq!(c.stats_interval, Some(Duration::from_secs(10)));
        assert_eq!(c.destinations[0].name, "simhub");
        assert_eq!(c.destinations[0].output, Output::Same);
        assert!(!c.destinations[0].only_race_on);
        assert_eq!(c.destinations[1].name, "127.0.0.1:5301");
        assert_eq!(c.destinations[1].output, Output::Format(Format::Fh5));
        assert!(c.destinations[1].only_race_on);
        assert_eq!(c.destinations[1].max_rate, 30);
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let p = problems("[listen]\naddr = \"0.0.0.0:5400\"\n\n[[destination]]\naddr = \"127.0.0.1:8000\"\nformt = \"fh5\"\n");
        assert_eq!(p.len(), 1);
        assert!(p[0].starts_with("test.toml:6"), "{p:?}");
        assert!(p[0].contains("formt"), "{p:?}");
    }

    #[test]
    fn every_mistake_is_reported_with_its_line_and_value() {
        let p = problems(
            r#"[listen]
addr = "0.0.0.0:5400"
format = "fh7"
allow = ["10.0.0.0/33"]

[[destination]]
name = "a"
addr = "127.0.0.1:8000"
format = "fm8"

[[destination]]
name = "a"
addr = "127.0.0.1:8000"

[[destination]]
name = "b"
addr = "127.0.0.1:5400"

[[destination]]
name = "c"
addr = "localhost"
"#,
        );
        let all = p.join("\n");
        for expect in [
            "test.toml:3: listen.format: unknown input format \"fh7\" (valid: auto, sled",
            "test.toml:4: listen.allow: \"10.0.0.0/33\" is not an IP address or CIDR range",
            "test.toml:9: destination[1].format: \"fm8\" is not a format (valid: same, sled",
            "test.toml:12: destination[2].name: \"a\" is already the name of another destination",
            "test.toml:13: destination[2].addr: \"127.0.0.1:8000\" (127.0.0.1:8000) is the same \
             address as destination \"a\"",
            "test.toml:17: destination[3].addr: \"127.0.0.1:5400\" (127.0.0.1:5400) is \
             forza-relay's own listen address 0.0.0.0:5400",
            "test.toml:21: destination[4].addr: \"localhost\": needs a port",
        ] {
            assert!(all.contains(expect), "missing {expect:?} in\n{all}");
        }
        assert_eq!(p.len(), 7, "{all}");
    }

    /// The loop problems `parse` reports for a `listen` address and `dests`.
    #[track_caller]
    fn loop_problems(listen: &str, dests: &[&str]) -> Vec<String> {
        let mut text = format!("[listen]\naddr = \"{listen}\"\n");
        for (i, d) in dests.iter().enumerate() {
            text += &format!("[[destination]]\nname = \"d{i}\"\naddr = \"{d}\"\n");
        }
        match parse(&text) {
            Ok(_) => Vec::new(),
            Err(e) => e.problems.into_iter().map(|p| p.message).collect(),
        }
    }

    #[test]
    fn issue9_a_destination_on_the_listen_port_of_this_computer_is_refused_however_written() {
        assert_eq!(
            loop_problems(
                "[::]:5400",
                &["127.0.0.2:5400", "localhost:5400", "[::1]:5400"]
            ),
            [
                "\"127.0.0.2:5400\" (127.0.0.2:5400) is forza-relay's own listen address \
                 [::]:5400: packets would loop forever",
                "\"localhost:5400\" (127.0.0.1:5400) is forza-relay's own listen address \
                 [::]:5400: packets would loop forever",
                "\"[::1]:5400\" ([::1]:5400) is forza-relay's own listen address [::]:5400: \
                 packets would loop forever",
            ]
        );
        assert_eq!(
            loop_problems("127.0.0.1:5400", &["localhost:5400"]),
            [
                "\"localhost:5400\" (127.0.0.1:5400) is forza-relay's own listen address \
              127.0.0.1:5400: packets would loop forever"
            ]
        );
        // Another port, or IPv6 loopback for an IPv4-only listener, is fine.
        assert_eq!(
            loop_problems("0.0.0.0:5400", &["localhost:5401", "[::1]:5400"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn issue9_this_computers_own_hostname_on_the_listen_port_is_refused() {
        let name = std::process::Command::new("hostname")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|n| !n.is_empty());
        let Some(name) = name else {
            eprintln!("note: no `hostname` command; this computer's own name not tested");
            return;
        };
        let dest = format!("{name}:5400");
        let Ok(addr) = resolve(&dest, &system_look_up) else {
            eprintln!("note: {name:?} does not resolve here; not tested");
            return;
        };
        assert!(is_own_address(addr.ip()), "{name} is {addr}");
        let p = loop_problems("0.0.0.0:5400", &[&dest]);
        assert_eq!(
            p,
            [format!(
                "{dest:?} ({addr}) is forza-relay's own listen address 0.0.0.0:5400: \
                 packets would loop forever"
            )]
        );
    }

    #[test]
    fn a_stats_interval_longer_than_a_day_is_refused() {
        let p = problems(
            "[stats]\ninterval = 9223372036854775807\n[[destination]]\naddr = \"127.0.0.1:8000\"\n",
        );
        assert_eq!(
            p,
            [
                "test.toml:2: stats.interval: 9223372036854775807 seconds is longer than a day \
              (86400); use 0 to turn the summary off"
            ]
        );
    }

    #[test]
    fn stats_format_is_text_or_json() {
        let dest = "[[destination]]\naddr = \"127.0.0.1:8000\"\n";
        assert_eq!(
            parse(&format!("[stats]\nformat = \"JSON\"\n{dest}"))
                .unwrap()
                .stats_format,
            StatsFormat::Json
        );
        assert_eq!(parse(dest).unwrap().stats_format, StatsFormat::Text);
        assert_eq!(
            problems(&format!("[stats]\nformat = \"xml\"\n{dest}")),
            ["test.toml:2: stats.format: \"xml\" is not a stats format (valid: text, json)"]
        );
    }

    #[test]
    fn a_relative_record_path_is_next_to_the_config_file() {
        let dir = std::env::temp_dir().join(format!("forza-relay-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("forza-relay.toml");
        let dest = "[[destination]]\naddr = \"127.0.0.1:8000\"\n";
        std::fs::write(
            &file,
            format!("[record]\npath = \"laps/drive-{{time}}.pcap\"\n{dest}"),
        )
        .unwrap();
        let c = Config::from_file(&file, &Overrides::default()).unwrap();
        assert_eq!(c.record, Some(dir.join("laps/drive-{time}.pcap")));
        let c = Config::from_file(
            &file,
            &Overrides {
                record: Some("here.pcap".to_owned()),
                ..Overrides::default()
            },
        )
        .unwrap();
        assert_eq!(
            c.record,
            Some(PathBuf::from("here.pcap")),
            "--record is as given"
        );
        assert_eq!(
            problems(&format!("[record]\npath = \" \"\n{dest}")),
            ["test.toml:2: record.path: the path is empty: write a file name, like \"drive-{time}.pcap\""]
        );
        assert_eq!(parse(dest).unwrap().record, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_destinations_is_an_error() {
        assert_eq!(
            problems("[listen]\naddr = \"0.0.0.0:5400\"\n"),
            ["test.toml: no destinations: add a [[destination]] table (or --to HOST:PORT)"]
        );
    }

    #[test]
    fn bad_listen_and_unresolvable_host_name_the_value() {
        let p = problems(
            "[listen]\naddr = \"0.0.0.0\"\n[[destination]]\naddr = \"no-such-host.invalid:9\"\n",
        )
        .join("\n");
        assert!(
            p.contains("test.toml:2: listen.addr: \"0.0.0.0\" is not an address to listen on"),
            "{p}"
        );
        assert!(
            p.contains("test.toml:4: destination[1].addr: \"no-such-host.invalid:9\": cannot resolve host \"no-such-host.invalid\""),
            "{p}"
        );
    }

    #[test]
    fn the_web_page_is_on_this_pc_by_default_and_off_or_moved_on_request() {
        let dest = "[[destination]]\naddr = \"127.0.0.1:8000\"\n";
        let c = |text: &str| Config::from_toml(text, "t.toml", &Overrides::default());
        assert_eq!(c(dest).unwrap().web, Some(DEFAULT_WEB));
        let off = c(&format!("[web]\naddr = \"off\"\n{dest}")).unwrap();
        assert_eq!(off.web, None);
        let lan = c(&format!("[web]\naddr = \"0.0.0.0:8080\"\n{dest}")).unwrap();
        assert_eq!(lan.web, Some("0.0.0.0:8080".parse().unwrap()));
        let e = c(&format!("[web]\naddr = \"nowhere\"\n{dest}")).unwrap_err();
        assert_eq!(e.problems[0].place, "t.toml:2: web.addr");
        assert!(e.problems[0].message.contains("\"nowhere\""), "{e:?}");
        let flag = Overrides {
            web: Some("off".to_owned()),
            ..Overrides::default()
        };
        assert_eq!(Config::from_toml(dest, "t", &flag).unwrap().web, None);
    }

    #[test]
    fn quick_form_parses_options() {
        let c = Config::from_args(
            &[
                "127.0.0.1:8000".to_owned(),
                "127.0.0.1:5301,format=fh5,only-race-on,max-rate=30,name=dash".to_owned(),
            ],
            &Overrides {
                listen: Some("0.0.0.0:5555".to_owned()),
                input: Some("fh6".to_owned()),
                stats_interval: Some(0),
                stats_format: Some("json".to_owned()),
                record: None,
                web: Some("off".to_owned()),
            },
        )
        .unwrap();
        assert_eq!(c.listen.port(), 5555);
        assert_eq!(c.input, Input::Fixed(Format::Fh6));
        assert_eq!(c.stats_interval, None);
        assert_eq!(c.stats_format, StatsFormat::Json);
        assert_eq!(c.destinations[0].name, "127.0.0.1:8000");
        let d = &c.destinations[1];
        assert_eq!(
            (d.name.as_str(), d.output, d.only_race_on, d.max_rate),
            ("dash", Output::Format(Format::Fh5), true, 30)
        );
        let e = Config::from_args(
            &["127.0.0.1:1,fromat=fh5".to_owned()],
            &Overrides::default(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "--to \"127.0.0.1:1,fromat=fh5\": unknown option \"fromat=fh5\" (options: format=ID, only-race-on, max-rate=HZ, max-age=DURATION, name=NAME)");
    }

    #[test]
    fn max_age_is_off_by_default_and_read_from_the_file_and_from_to() {
        let c = Config::from_toml(
            "[[destination]]\naddr = \"127.0.0.1:20777\"\nmax_age = \"50ms\"\n\
             [[destination]]\naddr = \"127.0.0.1:8000\"\n",
            "rig.toml",
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.destinations[0].max_age, Some(Duration::from_millis(50)));
        assert_eq!(c.destinations[1].max_age, None);
        assert!(
            c.describe().contains("none older than 50ms"),
            "{}",
            c.describe()
        );
        let c = Config::from_args(
            &["127.0.0.1:20777,max-age=0.1s".to_owned()],
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.destinations[0].max_age, Some(Duration::from_millis(100)));
    }

    #[test]
    fn a_bad_max_age_is_refused_naming_the_value() {
        for (text, says) in [
            ("50", "is not a duration"),
            ("fast", "is not a duration"),
            ("-5ms", "is negative"),
            ("0ms", "would drop every frame"),
            ("500us", "is shorter than 1ms"),
            ("2min", "is longer than 1m"),
        ] {
            let e = Config::from_args(
                &[format!("127.0.0.1:20777,max-age={text}")],
                &Overrides::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(&format!("{text:?} {says}")), "{text}: {e}");
            let toml = format!("[[destination]]\naddr = \"127.0.0.1:1\"\nmax_age = \"{text}\"\n");
            let e = Config::from_toml(&toml, "rig.toml", &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("max_age") && e.contains(says), "{text}: {e}");
        }
    }

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
