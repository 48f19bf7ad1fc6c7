//! Asking the relay that runs on this computer what it sees (issue 23).
//!
//! `doctor`, `setup`, `record` and `watch`, finding the listening port held by
//! forza-relay, send that port one datagram, [`QUERY`] (its bytes are
//! [`crate::net::query`]'s, which the core and the readers check), from a loopback socket.
//! The relay's core recognises it only among the datagrams it refuses anyway
//! (no packet of the input, or from outside `listen.allow`): its length is no
//! Forza format's, so a packet's way pays nothing for it
//! ([`crate::fanout::Verdict::Query`]). It is never forwarded, tapped or
//! counted. The shell answers the querying socket, from the listening one,
//! with one JSON object ([`Answer`]): the version, the address it listens on,
//! the input counters and who sends, each destination and its status, and the
//! configuration file's state.
//!
//! Only a loopback sender is answered, so the answer never leaves the
//! computer: nobody on the network can read it, or have it sent to someone
//! else. It works whatever the page's settings (off, on a port taken, on every
//! address behind a token), which is why it is a datagram and not the page's
//! `/api/snapshot`.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::counters::Status;
pub use crate::net::query::{is_query, QUERY};
use crate::report::{ConfigState, Snapshot};

/// Destinations an answer lists at most, so that it fits one datagram.
pub const MAX_LISTED: usize = 64;

/// The longest answer read.
const MAX_ANSWER: usize = 65_535;

/// What a running relay answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// `forza-relay`.
    pub program: String,
    /// Its version.
    pub version: String,
    /// Its process id.
    pub pid: u32,
    /// The address it listens on.
    pub listen: SocketAddr,
    /// Seconds since it started.
    pub elapsed_s: f64,
    /// What the listening socket received.
    pub input: Input,
    /// Its destinations (the first [`MAX_LISTED`]), in configuration order.
    pub destinations: Vec<Destination>,
    /// Destinations past [`MAX_LISTED`], not listed.
    #[serde(default)]
    pub more_destinations: usize,
    /// The configuration file it runs, and the error of its last save.
    pub config: ConfigState,
    /// Its page's address (`http://127.0.0.1:5480/`), `None` when it serves
    /// none.
    #[serde(default)]
    pub page: Option<String>,
    /// The page needs its token from this computer too (it is served to the
    /// network).
    #[serde(default)]
    pub page_needs_token: bool,
    /// Where the page's token is kept, readable by the user the relay runs
    /// as (issue 30: a link without it answers 401).
    #[serde(default)]
    pub page_token_file: Option<String>,
}

/// Where a relay's page is served, as the page tells the relay for the
/// status query's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageServed {
    /// The address it is bound to.
    pub addr: SocketAddr,
    /// It needs its token from this computer too.
    pub needs_token: bool,
    /// Where its token is kept, if in a file.
    pub token_file: Option<String>,
}

impl PageServed {
    /// Fills `answer`'s page fields.
    pub fn describe(&self, answer: &mut Answer) {
        answer.page = Some(page_url(self.addr));
        answer.page_needs_token = self.needs_token;
        answer.page_token_file.clone_from(&self.token_file);
    }
}

/// The input side of an [`Answer`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    /// `listen.format`: `auto` or a format id.
    pub expects: String,
    /// Datagrams received.
    pub received: u64,
    /// Datagrams that were no packet of the input.
    pub malformed: u64,
    /// Datagrams from senders outside `listen.allow`.
    pub disallowed: u64,
    /// The format of the last packet.
    pub format: Option<String>,
    /// That format is `auto`'s guess.
    pub format_guessed: bool,
    /// Who sends (a few), and whose stream is followed.
    pub senders: Vec<Sender>,
    /// Datagrams of senders not listed.
    #[serde(default)]
    pub other_senders: u64,
}

/// One sender of an [`Answer`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// Its address.
    pub addr: SocketAddr,
    /// Datagrams it sent.
    pub datagrams: u64,
    /// Its stream is the one followed (the game's).
    pub following: bool,
}

/// One destination of an [`Answer`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Destination {
    /// Its name.
    pub name: String,
    /// Its address as written.
    pub addr: String,
    /// Its output format: `same` or a format id.
    pub output: String,
    /// `only_race_on`.
    #[serde(default)]
    pub only_race_on: bool,
    /// `max_rate` (0: none).
    #[serde(default)]
    pub max_rate: u32,
    /// `max_age` in milliseconds, `None` when off.
    #[serde(default)]
    pub max_age_ms: Option<u64>,
    /// `hold` in milliseconds, `None` when off.
    #[serde(default)]
    pub hold_ms: Option<u64>,
    /// How it is doing now.
    pub status: Status,
    /// Datagrams it was handed.
    pub received: u64,
    /// Frames sent to it.
    pub sent: u64,
    /// An MQTT destination's broker problem now, as the relay's log said it
    /// (`cannot connect (connection refused)`); `None` while connected.
    #[serde(default)]
    pub problem: Option<String>,
}

impl Answer {
    /// The answer for `snapshot`, of a relay expecting `expects`.
    pub fn of(snapshot: &Snapshot, expects: crate::wire::Input) -> Answer {
        let i = &snapshot.input;
        let followed = i.senders.followed().map(|s| s.addr);
        Answer {
            program: "forza-relay".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
            listen: snapshot.listen,
            elapsed_s: snapshot.elapsed.as_secs_f64(),
            input: Input {
                expects: expects.to_string(),
                received: i.received,
                malformed: i.malformed,
                disallowed: i.disallowed,
                format: i.last_format.map(|f| f.to_string()),
                format_guessed: i.format_guessed,
                senders: i
                    .senders
                    .list()
                    .iter()
                    .map(|s| Sender {
                        addr: s.addr,
                        datagrams: s.datagrams,
                        following: Some(s.addr) == followed,
                    })
                    .collect(),
                other_senders: i.senders.others(),
            },
            destinations: snapshot
                .destinations
                .iter()
                .take(MAX_LISTED)
                .map(|d| Destination {
                    name: d.name.clone(),
                    addr: d.addr_text.clone(),
                    output: d.output.to_string(),
                    only_race_on: d.only_race_on,
                    max_rate: d.max_rate,
                    max_age_ms: d
                        .max_age
                        .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX)),
                    hold_ms: d
                        .hold
                        .map(|h| u64::try_from(h.as_millis()).unwrap_or(u64::MAX)),
                    status: d.status,
                    received: d.stats.received,
                    sent: d.stats.sent,
                    problem: d.mqtt.as_ref().and_then(|m| m.problem.clone()),
                })
                .collect(),
            more_destinations: snapshot.destinations.len().saturating_sub(MAX_LISTED),
            config: snapshot.config.clone(),
            page: None,
            page_needs_token: false,
            page_token_file: None,
        }
    }

    /// The answer as one JSON object.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}").into_bytes())
    }
}

#[cfg(test)]
impl Answer {
    /// A relay's answer for the tests: pid 30, listening on `listen`, input
    /// auto, nothing received, no destination, no file.
    pub(crate) fn example(listen: SocketAddr) -> Answer {
        Answer {
            program: "forza-relay".to_owned(),
            version: "0.1.0".to_owned(),
            pid: 30,
            listen,
            elapsed_s: 60.0,
            input: Input {
                expects: "auto".to_owned(),
                received: 0,
                malformed: 0,
                disallowed: 0,
                format: None,
                format_guessed: false,
                senders: Vec::new(),
                other_senders: 0,
            },
            destinations: Vec::new(),
            more_destinations: 0,
            config: ConfigState::default(),
            page: None,
            page_needs_token: false,
            page_token_file: None,
        }
    }
}

/// The address of a page served on `addr`, as a browser on this computer
/// opens it (loopback for every address).
pub fn page_url(addr: SocketAddr) -> String {
    format!("http://{}/", target(addr))
}

/// Why a running relay could not be asked.
#[derive(Debug)]
pub enum AskError {
    /// No answer within the time given: a forza-relay older than the query,
    /// or one too busy to answer.
    NoAnswer(Duration),
    /// Nothing listens on that port (the OS said so).
    NotListening,
    /// The answer was not a relay's status.
    NotAStatus(String),
    /// The query could not be sent.
    Io(io::Error),
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskError::NoAnswer(waited) => write!(
                f,
                "it did not answer within {:.1} s (a forza-relay older than this one does not)",
                waited.as_secs_f64()
            ),
            AskError::NotListening => f.write_str("nothing listens on that port any more"),
            AskError::NotAStatus(why) => write!(f, "its answer was not a status ({why})"),
            AskError::Io(e) => write!(f, "the question could not be sent ({e})"),
        }
    }
}

impl std::error::Error for AskError {}

/// Where to ask a relay listening on `listen`: its own address, or loopback
/// for every address.
pub fn target(listen: SocketAddr) -> SocketAddr {
    let ip: IpAddr = match listen.ip().to_canonical() {
        IpAddr::V4(v4) if v4.is_unspecified() => Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(v6) if v6.is_unspecified() => Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// Asks the relay listening on `listen` (on this computer) what it sees,
/// waiting at most `timeout`. The query goes from a loopback socket, three
/// times at most in that time (a relay under a flood may lose one).
pub fn ask(listen: SocketAddr, timeout: Duration) -> Result<Answer, AskError> {
    let to = target(listen);
    let from: IpAddr = if to.is_ipv4() {
        Ipv4Addr::LOCALHOST.into()
    } else {
        Ipv6Addr::LOCALHOST.into()
    };
    let socket = UdpSocket::bind(SocketAddr::new(from, 0)).map_err(AskError::Io)?;
    socket.connect(to).map_err(AskError::Io)?;
    let start = Instant::now();
    let deadline = start + timeout;
    let mut buf = vec![0u8; MAX_ANSWER];
    for attempt in 1..=3u32 {
        socket.send(QUERY).map_err(AskError::Io)?;
        let until = (start + timeout * attempt / 3).min(deadline);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            socket.set_read_timeout(Some(left)).map_err(AskError::Io)?;
            match socket.recv(&mut buf) {
                Ok(n) => {
                    return serde_json::from_slice::<Answer>(&buf[..n])
                        .map_err(|e| AskError::NotAStatus(e.to_string()));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    return Err(AskError::NotListening)
                }
                // Timed out (WouldBlock on Unix, TimedOut on Windows): ask again.
                Err(_) => break,
            }
        }
    }
    Err(AskError::NoAnswer(timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_query_from_loopback_is_one() {
        let local: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let local6: SocketAddr = "[::1]:40000".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:40000".parse().unwrap();
        let lan: SocketAddr = "192.168.1.20:40000".parse().unwrap();
        assert!(is_query(QUERY, local));
        assert!(is_query(QUERY, local6));
        assert!(is_query(QUERY, mapped));
        assert!(!is_query(QUERY, lan), "never answered beyond this computer");
        assert!(!is_query(&QUERY[1..], local));
        let mut longer = QUERY.to_vec();
        longer.push(0);
        assert!(!is_query(&longer, local));
    }

    #[test]
    fn the_target_is_loopback_for_every_address() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(target(at("0.0.0.0:5400")), at("127.0.0.1:5400"));
        assert_eq!(target(at("[::]:5400")), at("[::1]:5400"));
        assert_eq!(target(at("192.168.1.2:5400")), at("192.168.1.2:5400"));
    }

    #[test]
    fn a_port_that_answers_nothing_is_no_answer_within_the_time() {
        // A socket that reads nothing: the queries wait in its buffer.
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = ask(silent.local_addr().unwrap(), Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, AskError::NoAnswer(_)), "{e}");
        let mut buf = [0u8; 64];
        silent.set_nonblocking(true).unwrap();
        let (n, from) = silent.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], QUERY);
        assert!(from.ip().is_loopback());
    }
}
