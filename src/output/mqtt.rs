//! What an MQTT destination connects to and how: the broker's address
//! ([`Broker`], `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`), the
//! certificates it trusts ([`Roots`]), the login, the topic
//! ([`MqttSettings`]). Plain data, validated by the configuration and compared
//! by the core's plan: a destination whose settings change gets a new
//! publisher. A password is a [`Secret`], which no `Debug`, log line, summary
//! or page ever shows.

use std::fmt;
use std::path::{Path, PathBuf};

use rustls::RootCertStore;

use crate::logging::hidden;
use crate::named_file::{self, ReadError};

/// Frames a second an MQTT destination publishes unless told otherwise: a
/// broker does not want 360.
pub const DEFAULT_MAX_RATE: u32 = 20;

/// The broker's port for `mqtt://` when none is given.
pub const MQTT_PORT: u16 = 1883;
/// The broker's port for `mqtts://` when none is given.
pub const MQTTS_PORT: u16 = 8883;

/// Where the broker is: `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// A host name or an IP address (IPv6 without its brackets).
    pub host: String,
    /// The TCP port.
    pub port: u16,
    /// `mqtts://`: TLS.
    pub tls: bool,
}

impl Broker {
    /// Whether `addr` is written as a broker (`mqtt://…` or `mqtts://…`, any
    /// case) rather than a UDP `host:port`.
    pub fn is_broker(addr: &str) -> bool {
        let addr = addr.trim();
        strip_prefix_ignore_case(addr, "mqtt://").is_some()
            || strip_prefix_ignore_case(addr, "mqtts://").is_some()
    }

    /// Reads `mqtt://HOST[:PORT]` (port 1883) or `mqtts://HOST[:PORT]` (8883);
    /// an IPv6 address in brackets. The error names what is wrong.
    pub fn parse(addr: &str) -> Result<Broker, String> {
        let (tls, rest) = if let Some(rest) = strip_prefix_ignore_case(addr, "mqtts://") {
            (true, rest)
        } else if let Some(rest) = strip_prefix_ignore_case(addr, "mqtt://") {
            (false, rest)
        } else {
            return Err(format!(
                "{addr:?}: an MQTT broker is mqtt://HOST:PORT or mqtts://HOST:PORT"
            ));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let default_port = if tls { MQTTS_PORT } else { MQTT_PORT };
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{addr:?}: an IPv6 address ends with ]"))?;
            match after {
                "" => (host, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(format!("{addr:?}: write [ADDRESS]:PORT")),
                },
            }
        } else {
            match rest.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) {
            return Err(format!("{addr:?}: no broker host name or address in it"));
        }
        // Shown in every line about the broker: it must show as itself.
        if host
            .chars()
            .any(|c| c.is_whitespace() || hidden(c).is_some())
        {
            return Err(format!(
                "{addr:?}: the host name holds a character a host name can't hold"
            ));
        }
        let port = match port {
            None => default_port,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("{addr:?}: the port {p:?} is not a number 1..65535"))?,
        };
        Ok(Broker {
            host: host.to_owned(),
            port,
            tls,
        })
    }
}

impl Broker {
    /// Whether `other` is this broker: the same host (in any case), port and
    /// scheme. A password written for one broker goes to no other (issue 30:
    /// a page edit of the address took the stored password along, to any
    /// host, and from `mqtts://` to `mqtt://` in clear).
    pub fn is_same(&self, other: &Broker) -> bool {
        self.host.eq_ignore_ascii_case(&other.host)
            && self.port == other.port
            && self.tls == other.tls
    }

    /// Whether the addresses `a` and `b` are the same broker
    /// ([`Broker::is_same`]); false when either is no broker address.
    pub fn same_address(a: &str, b: &str) -> bool {
        match (Broker::parse(a.trim()), Broker::parse(b.trim())) {
            (Ok(a), Ok(b)) => a.is_same(&b),
            _ => false,
        }
    }
}

impl fmt::Display for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Which certificates a TLS connection trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// The system's (Windows' store, the distribution's bundle; `SSL_CERT_FILE`
    /// and `SSL_CERT_DIR` where set).
    System,
    /// The PEM certificates in this file (`ca_file`): a broker with a
    /// certificate of its own CA.
    CaFile(PathBuf),
}

/// A password: compared and cloned like a string, never shown (its `Debug`
/// is `Secret(…)`), handed to the client only ([`Secret::expose`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// `text` kept secret.
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The password itself, for the MQTT client and for nothing that prints.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// What one MQTT destination connects to and publishes on. What it publishes
/// (the JSON object or the influx line, which frames, how often) is the
/// destination's own business, decided by the relay's core like any
/// destination's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttSettings {
    /// The broker.
    pub broker: Broker,
    /// The certificates trusted with `mqtts://`.
    pub roots: Roots,
    /// The login, if the broker wants one.
    pub username: Option<String>,
    /// The password, with `username`.
    pub password: Option<Secret>,
    /// The environment variable `password` was read from (`password_env`),
    /// if it was: named in summaries, where the password never is.
    pub password_env: Option<String>,
    /// Where frames are published; the status is at `<topic>/status`.
    pub topic: String,
}

impl MqttSettings {
    /// The system's roots, no login, every frame to `topic`.
    pub fn new(broker: Broker, topic: impl Into<String>) -> MqttSettings {
        MqttSettings {
            broker,
            roots: Roots::System,
            username: None,
            password: None,
            password_env: None,
            topic: topic.into(),
        }
    }

    /// `<topic>/status`.
    pub fn status_topic(&self) -> String {
        format!("{}/status", self.topic)
    }

    /// The `ca_file`, if one is trusted.
    pub fn ca_file(&self) -> Option<&Path> {
        match &self.roots {
            Roots::CaFile(path) => Some(path),
            Roots::System => None,
        }
    }
}

/// What is wrong with a topic to publish on, if anything: MQTT forbids the
/// wildcards `+` and `#` in a topic one publishes to, an empty one and U+0000,
/// says it should hold no control character and no Unicode non-character
/// (brokers refuse the connection: mosquitto does), and keeps the topics
/// beginning with `$` (`$SYS/…`) for the broker's own use; a
/// bidirectional-text control or a line separator would show the topic as
/// it is not. Each is refused, naming the character.
pub fn topic_problem(topic: &str) -> Option<String> {
    if topic.is_empty() {
        Some("the topic is empty: write one, like \"forza-relay/my-car\"".to_owned())
    } else if topic.contains(['+', '#']) {
        Some(format!(
            "{topic:?} holds a wildcard (+ or #): those are for subscribing; publish to a \
             topic without them, like \"league/driver-7\""
        ))
    } else if let Some((c, what)) = topic.chars().find_map(|c| hidden(c).map(|w| (c, w))) {
        Some(format!(
            "{topic:?} holds {what} (U+{:04X}): write the topic without it",
            u32::from(c)
        ))
    } else if topic.starts_with('$') {
        Some(format!(
            "{topic:?} begins with $: topics beginning with $ ($SYS/…) are the broker's own; \
             publish to one like \"league/driver-7\""
        ))
    } else if topic.len() > 1_024 {
        Some("the topic is longer than 1024 bytes".to_owned())
    } else {
        None
    }
}

/// The topic a destination called `name` publishes on unless told otherwise:
/// `forza-relay/<name>`, with what a topic level can't hold (`/`, `+`, `#`,
/// control characters) as `-`. An unnamed destination is called by its
/// address, whose `mqtt://` or `mqtts://` says nothing in a topic: it goes
/// (`forza-relay/192.168.1.10:1883`, not `forza-relay/mqtt:--192.168.1.10:1883`).
pub fn default_topic(name: &str) -> String {
    let name = name.trim();
    let name = strip_prefix_ignore_case(name, "mqtt://")
        .or_else(|| strip_prefix_ignore_case(name, "mqtts://"))
        .unwrap_or(name);
    let level: String = name
        .chars()
        .map(|c| {
            if matches!(c, '/' | '+' | '#') || c.is_control() {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("forza-relay/{level}")
}

/// Why a certificate file can't be used.
#[derive(Debug)]
pub enum CaFileError {
    /// It could not be read, or not within the guards of every file a
    /// configuration names ([`crate::named_file`]).
    Read(ReadError),
    /// It holds no PEM certificate that can be used.
    NoCertificate(String),
}

impl fmt::Display for CaFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaFileError::Read(e) => write!(f, "cannot read it: {e}"),
            CaFileError::NoCertificate(why) => write!(
                f,
                "no certificate in it ({why}); it should hold the broker's CA certificate in \
                 PEM (-----BEGIN CERTIFICATE-----)"
            ),
        }
    }
}

/// The certificates of the PEM file at `path`: what the configuration checks
/// when it is loaded, and what the publisher trusts. Read as the
/// configuration file is: a regular file, at most 1 MiB, within 2 s.
pub fn load_ca_file(path: &Path) -> Result<RootCertStore, CaFileError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    let pem = named_file::read(path).map_err(CaFileError::Read)?;
    let mut store = RootCertStore::empty();
    let mut why = String::from("no PEM certificate");
    for cert in CertificateDer::pem_slice_iter(&pem) {
        match cert
            .map_err(|e| e.to_string())
            .and_then(|c| store.add(c).map_err(|e| e.to_string()))
        {
            Ok(()) => {}
            Err(e) => why = e,
        }
    }
    if store.is_empty() {
        return Err(CaFileError::NoCertificate(why));
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_addresses_parse_with_their_default_ports() {
        let b = |s: &str| Broker::parse(s).unwrap();
        assert_eq!(
            b("mqtt://broker.local"),
            Broker {
                host: "broker.local".into(),
                port: 1883,
                tls: false
            }
        );
        assert_eq!(
            b("MQTTS://example.com:8884/"),
            Broker {
                host: "example.com".into(),
                port: 8884,
                tls: true
            }
        );
        assert_eq!(b("mqtts://10.0.0.2").port, 8883);
        let v6 = b("mqtt://[::1]:1884");
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 1884));
        assert_eq!(v6.to_string(), "mqtt://[::1]:1884");
        assert_eq!(b("mqtt://[fe80::1]").port, 1883);
        assert_eq!(b("mqtts://h:1").to_string(), "mqtts://h:1");
        for bad in [
            "tcp://h:1883",
            "h:1883",
            "mqtt://",
            "mqtt://:1883",
            "mqtt://h:0",
            "mqtt://h:70000",
            "mqtt://h:port",
            "mqtt://user@h",
            "mqtt://[::1",
            "mqtt://[::1]1883",
            "mqtt://evil\u{202e}moc.example",
            "mqtt://h\tx",
            "mqtt://h\u{fffe}",
        ] {
            let e = Broker::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
        assert!(Broker::is_broker(" MQTT://h") && Broker::is_broker("mqtts://h:1"));
        assert!(Broker::same_address(
            "mqtt://Broker.local",
            "MQTT://broker.local:1883/"
        ));
        for other in [
            "mqtt://broker.local:1884",
            "mqtts://broker.local:1883",
            "mqtt://evil",
        ] {
            assert!(
                !Broker::same_address("mqtt://broker.local", other),
                "{other}"
            );
        }
        assert!(!Broker::same_address("mqtt://h", "h:1883"), "no broker");
        assert!(!Broker::is_broker("127.0.0.1:1883") && !Broker::is_broker("mqtt:/h"));
    }

    #[test]
    fn a_password_is_never_shown() {
        let mut s = MqttSettings::new(Broker::parse("mqtt://h").unwrap(), "t");
        s.username = Some("driver".into());
        s.password = Some(Secret::new("s3cret"));
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("Secret(…)"),
            "{shown}"
        );
        assert_eq!(s.password.as_ref().map(Secret::expose), Some("s3cret"));
    }

    #[test]
    fn topics_default_to_the_name_and_refuse_wildcards() {
        assert_eq!(default_topic("league"), "forza-relay/league");
        assert_eq!(default_topic("mqtt://b:1883"), "forza-relay/b:1883");
        assert_eq!(default_topic(" MQTTS://b"), "forza-relay/b");
        assert_eq!(
            default_topic("mqtt://[::1]:1883/x"),
            "forza-relay/[::1]:1883-x",
            "one topic level"
        );
        assert_eq!(default_topic("a+b#c"), "forza-relay/a-b-c");
        assert_eq!(topic_problem("league/driver-7"), None);
        assert_eq!(topic_problem("ligue/pilote-é/ドライバー"), None);
        for bad in ["", "league/+", "league/#", "a\0b"] {
            assert!(topic_problem(bad).is_some(), "{bad:?}");
        }
        // Issue 30: what mosquitto refuses, what is the broker's, what would
        // not show as itself; each named.
        for (bad, said) in [
            ("league/\u{fffe}", "a Unicode non-character (U+FFFE)"),
            ("league/\u{fdd0}", "a Unicode non-character (U+FDD0)"),
            ("league/\n7", "a control character (U+000A)"),
            ("league/\u{1b}[31m", "a control character (U+001B)"),
            ("league/\u{202e}7", "a bidirectional-text control (U+202E)"),
            ("$SYS/broker/uptime", "begins with $"),
            ("$share/x", "begins with $"),
        ] {
            let p = topic_problem(bad).unwrap_or_else(|| panic!("{bad:?} taken"));
            assert!(
                p.contains(said) && p.starts_with(&format!("{bad:?}")),
                "{p}"
            );
        }
    }

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_certificate_is_named() {
        let missing = std::env::temp_dir().join("forza-relay-no-such-ca.pem");
        let e = load_ca_file(&missing).unwrap_err();
        assert!(matches!(e, CaFileError::Read(_)), "{e}");
        let junk = std::env::temp_dir().join(format!("forza-relay-ca-{}.pem", std::process::id()));
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = load_ca_file(&junk).unwrap_err();
        let _ = std::fs::remove_file(&junk);
        assert!(matches!(e, CaFileError::NoCertificate(_)), "{e}");
        assert!(e.to_string().contains("BEGIN CERTIFICATE"), "{e}");
    }
}
