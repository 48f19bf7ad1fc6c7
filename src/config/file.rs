//! The configuration file: its TOML as written ([`FileConfig`] and its
//! tables, serde with `deny_unknown_fields`), how it is read (a regular file,
//! at most [`MAX_FILE_BYTES`], within a deadline, UTF-8), and how its text
//! becomes settings to validate, each with the file and line it was written
//! at. A mistake toml finds is said as how to fix it ([`explain_toml`]).

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::validate::{Raw, RawDestination};
use super::{
    escape_controls, system_look_up, Config, ConfigError, Input, LookUp, Overrides, Reloaded,
    DEFAULT_LISTEN, MAX_FILE_BYTES,
};
use crate::named_file::{self, ReadError};
use crate::output::mqtt::Secret;

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
        "fields" if message.contains("sequence") || message.contains("string") => Some(format!(
            "fields must be a list of names in brackets, like fields = [\"Speed\", \
             \"gear_label\"]: {}",
            message.split(',').next().unwrap_or(message)
        )),
        "records" if message.contains("sequence") || message.contains("string") => Some(format!(
            "records must be a list in brackets, like records = [\"frames\", \"laps\"]: {}",
            message.split(',').next().unwrap_or(message)
        )),
        _ => None,
    }
}

/// `[record]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordFile {
    /// `path = "drive-{time}.pcap"`: relative to the config file's folder.
    pub path: Option<Spanned<String>>,
    /// `races = "races"`: a folder, each race its own capture file in it.
    pub races: Option<Spanned<String>>,
    /// `keep = 20`: the races kept in it, the oldest removed.
    pub keep: Option<Spanned<i64>>,
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

/// The `[listen]` of the file at `path` alone, its address and format, for a
/// tool that listens where the relay would (`watch`, `export`, `record`):
/// nothing else of the file is read, so a destination this shell can't
/// validate (a `password_env` set only where the relay runs, a host that
/// doesn't resolve) does not move the tool to the default (review of issue
/// 30).
pub fn listen_of_file(path: &Path) -> Result<(SocketAddr, Input), ConfigError> {
    /// The file, every table but `[listen]` skipped.
    #[derive(Deserialize)]
    struct OnlyListen {
        #[serde(default)]
        listen: ListenFile,
    }
    let origin = path.display().to_string();
    let text = read_text(path, &origin)?;
    let file: OnlyListen =
        toml::from_str(&text).map_err(|e| ConfigError::one(&origin, e.message().to_owned()))?;
    let addr = match &file.listen.addr {
        None => DEFAULT_LISTEN,
        Some(a) => super::parse_listen(&a.get_ref().0)
            .map_err(|m| ConfigError::one(format!("{origin}: listen.addr"), m))?,
    };
    let input = match &file.listen.format {
        None => Input::Auto,
        Some(f) => f
            .get_ref()
            .parse::<Input>()
            .map_err(|m| ConfigError::one(format!("{origin}: listen.format"), m))?,
    };
    Ok((addr, input))
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
    /// `"15s"`: the last racing frame instead of blank ones, that long at
    /// most; default off.
    pub hold: Option<Spanned<String>>,
    /// `["frames", "laps", "events"]`: what a text destination is sent;
    /// default the frames.
    pub records: Option<Spanned<Vec<String>>>,
    /// `["Speed", "gear_label"]`: the columns of a `json` or `influx` output;
    /// default every column.
    pub fields: Option<Spanned<Vec<String>>>,
    /// MQTT: the topic frames are published on; default `forza-relay/<name>`.
    pub topic: Option<Spanned<String>>,
    /// MQTT: the login's user name.
    pub username: Option<Spanned<String>>,
    /// MQTT: the password (or `password_env`).
    pub password: Option<Spanned<String>>,
    /// MQTT: the environment variable holding the password, read at load.
    pub password_env: Option<Spanned<String>>,
    /// MQTT over TLS: a PEM file of the CA certificates to trust, relative
    /// to the configuration file's folder; default the system's.
    pub ca_file: Option<Spanned<String>>,
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
impl Config {
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

    /// Validates `text`, read from the file at `path`, while `previous` runs
    /// (as [`Config::reload_file`] does with the file's text).
    pub fn from_toml_at(
        text: &str,
        path: &Path,
        overrides: &Overrides,
        previous: Option<&Config>,
        look_up: &LookUp,
    ) -> Result<Reloaded, ConfigError> {
        if text.trim().is_empty() {
            return Err(ConfigError::one(
                path.display().to_string(),
                "the file is empty: add a [[destination]] table (see config.example.toml)",
            ));
        }
        let origin = path.display().to_string();
        Self::parse(text, &origin, path.parent(), overrides, previous, look_up)
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
                    let text = |v: &Option<Spanned<String>>, name: &str| {
                        v.as_ref()
                            .map(|v| (key(Some(v.span()), name), v.get_ref().clone()))
                    };
                    RawDestination {
                        name_place: key(table.name.as_ref().map(|v| v.span()), "name"),
                        addr_place: key(Some(table.addr.span()), "addr"),
                        format_place: key(table.format.as_ref().map(|v| v.span()), "format"),
                        name: table.name.as_ref().map(|n| n.get_ref().clone()),
                        addr: table.addr.get_ref().0.clone(),
                        format: table.format.as_ref().map(|f| f.get_ref().clone()),
                        only_race_on: table.only_race_on.unwrap_or(false),
                        max_rate: table.max_rate.as_ref().map(|m| *m.get_ref()),
                        max_age: text(&table.max_age, "max_age"),
                        hold: text(&table.hold, "hold"),
                        records: table
                            .records
                            .as_ref()
                            .map(|v| (key(Some(v.span()), "records"), v.get_ref().clone())),
                        fields: table
                            .fields
                            .as_ref()
                            .map(|v| (key(Some(v.span()), "fields"), v.get_ref().clone())),
                        topic: text(&table.topic, "topic"),
                        username: text(&table.username, "username"),
                        password: text(&table.password, "password")
                            .map(|(place, p)| (place, Secret::new(p))),
                        password_env: text(&table.password_env, "password_env"),
                        ca_file: text(&table.ca_file, "ca_file")
                            .map(|(place, path)| (place, path, folder.map(Path::to_path_buf))),
                        known: None,
                        known_password: None,
                    }
                })
                .collect(),
            destinations_place: Some(origin.to_owned()),
            record: file.record.path.as_ref().map(|v| {
                let (place, text) = spanned(v, "record.path");
                (place, text, folder.map(Path::to_path_buf))
            }),
            races: file.record.races.as_ref().map(|v| {
                let (place, text) = spanned(v, "record.races");
                (place, text, folder.map(Path::to_path_buf))
            }),
            keep: file
                .record
                .keep
                .as_ref()
                .map(|v| (at(v.span(), "record.keep"), *v.get_ref())),
            web: file.web.addr.as_ref().map(|v| spanned(v, "web.addr")),
        };
        raw.apply(overrides).validate(previous, look_up)
    }
}

/// The text of the configuration file at `path`, at most [`MAX_FILE_BYTES`],
/// which must be UTF-8 (a UTF-8 byte-order mark is fine: toml skips it). Read
/// with the guards of every file a configuration names ([`named_file::read`]:
/// a regular file, a size cap, a deadline).
pub fn read_text(path: &Path, origin: &str) -> Result<String, ConfigError> {
    let bytes = named_file::read(path).map_err(|e| {
        let message = match e {
            ReadError::NotAFile(kind) => format!(
                "cannot read the config file: it is {kind}; a configuration is a TOML text \
                 file"
            ),
            ReadError::TooBig(size) => too_big(&format!("is {size} bytes")),
            ReadError::Grew => too_big(&format!("holds more than {} KiB", MAX_FILE_BYTES >> 10)),
            e @ (ReadError::Io(_) | ReadError::TimedOut) => {
                format!("cannot read the config file: {e}")
            }
        };
        ConfigError::one(origin, message)
    })?;
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

/// Why a configuration file of `size` is refused.
fn too_big(size: &str) -> String {
    format!(
        "the file {size}: a configuration may be at most {} KiB (a real one is a few KB); \
         is this the right file?",
        MAX_FILE_BYTES >> 10
    )
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::config::testing::{parse, problems};
    use crate::config::{Input, Output};
    use crate::wire::Format;

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
}
