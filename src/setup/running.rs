//! The forza-relay already running on this computer, as the tools find it
//! (issue 23): when the port a tool would listen on is taken, the tool asks
//! whoever holds it for its status ([`crate::report::query`]); a relay answers. Then
//! `doctor` reports what the relay receives ([`observe`]), `record` and
//! `watch` say how to do it beside the relay instead of stopping it
//! ([`beside`]), and `setup` proposes from what it runs.
//!
//! Every wait is bounded: [`ASK_TIMEOUT`] per question, and `doctor`'s own
//! `--wait` for watching.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::report::query::{self, Answer};
use crate::state::TokenFile;

/// How long a tool waits for the relay's answer to one question.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(1);

/// How often `doctor` asks while it watches.
const POLL: Duration = Duration::from_millis(250);

/// After the first datagrams seen, how long `doctor` keeps watching before
/// it answers (as when it listens itself).
pub const AFTER_FIRST: Duration = Duration::from_secs(1);

/// The relay listening on `addr`, when binding `addr` failed with `error`
/// because the port is taken and whoever holds it answers the status query.
pub fn relay_on(addr: SocketAddr, error: &io::Error) -> Option<Answer> {
    match error.kind() {
        io::ErrorKind::AddrInUse | io::ErrorKind::PermissionDenied => {
            query::ask(addr, ASK_TIMEOUT).ok()
        }
        _ => None,
    }
}

/// The page of the relay that answered, as a link that opens it from this
/// computer (issue 30: served to the network, a link without its token
/// answered 401): with the token read from the file the relay keeps it in
/// (the same user's) when it needs one; `None` when it serves no page.
pub fn page_link(answer: &Answer) -> Option<String> {
    let page = answer.page.as_deref()?;
    if !answer.page_needs_token {
        return Some(page.to_owned());
    }
    let token = answer
        .page_token_file
        .as_deref()
        .and_then(|f| TokenFile::at(std::path::Path::new(f)).read().ok().flatten());
    Some(match token {
        Some(token) => format!("{page}?token={token}"),
        None => format!(
            "{page}?token=… (with the token of the link it printed at its start: this user \
             can't read where it keeps it)"
        ),
    })
}

/// What a tool that would listen can do beside a running relay instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    /// `record`.
    Record,
    /// `watch`.
    Watch,
    /// `export`.
    Export,
}

/// Why a tool does not listen beside the relay that answered, and how to do
/// what it was asked beside it: `forza-relay (pid 4321) already listens on
/// 0.0.0.0:5400 …`.
pub fn beside(answer: &Answer, what: Beside) -> String {
    let who = format!(
        "forza-relay (pid {}) already listens on {}, relaying to {}",
        answer.pid,
        answer.listen,
        destinations(answer)
    );
    let config = match &answer.config.path {
        Some(path) => {
            format!(" (or `[record] path = \"drive-{{time}}.pcap\"` in {path}, at its next start)")
        }
        None => String::new(),
    };
    let link = page_link(answer);
    let page = link.as_deref();
    match what {
        Beside::Record => match page {
            Some(url) => format!(
                "{who}: record beside it instead of stopping it. Press Start recording on its \
                 page, {url}, or start it with `forza-relay run --record FILE`{config}."
            ),
            None => format!(
                "{who}: record beside it instead of stopping it. Start it with \
                 `forza-relay run --record FILE`{config}; or serve its page (it has none now) \
                 and press Start recording there."
            ),
        },
        Beside::Export => format!(
            "{who}: export beside it instead of stopping it. Record what it receives ({}\
             `forza-relay run --record FILE`{config}), then `forza-relay export --file FILE`.",
            match page {
                Some(url) => format!("Start recording on its page, {url}, or "),
                None => String::new(),
            }
        ),
        Beside::Watch => match page {
            Some(url) => format!(
                "{who}: watch beside it instead of stopping it. Open its page, {url}, or start \
                 it with `forza-relay run --watch`."
            ),
            None => format!(
                "{who}: watch beside it instead of stopping it. Start it with `forza-relay \
                 run --watch` (its page is off)."
            ),
        },
    }
}

/// `2 destinations (simhub, dash)`, `1 destination (simhub)`, `no destination`.
fn destinations(answer: &Answer) -> String {
    let n = answer.destinations.len() + answer.more_destinations;
    if n == 0 {
        return "no destination".to_owned();
    }
    let names: Vec<&str> = answer
        .destinations
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    let more = if answer.more_destinations > 0 {
        format!(", and {} more", answer.more_destinations)
    } else {
        String::new()
    };
    format!(
        "{n} destination{} ({}{more})",
        if n == 1 { "" } else { "s" },
        names.join(", ")
    )
}

/// What the relay received while `doctor` watched: its answers at the start
/// and at the end.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The answer before watching.
    pub first: Answer,
    /// The last answer.
    pub last: Answer,
}

/// One sender's datagrams while `doctor` watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The sender.
    pub addr: SocketAddr,
    /// Its datagrams while watched.
    pub datagrams: u64,
    /// Its stream is the one the relay follows.
    pub following: bool,
}

impl Observation {
    /// Seconds between the two answers, on the relay's clock.
    pub fn seconds(&self) -> f64 {
        (self.last.elapsed_s - self.first.elapsed_s).max(0.0)
    }

    /// Datagrams received while watched.
    pub fn received(&self) -> u64 {
        self.last
            .input
            .received
            .saturating_sub(self.first.input.received)
    }

    /// Of those, no packet of the input.
    pub fn malformed(&self) -> u64 {
        self.last
            .input
            .malformed
            .saturating_sub(self.first.input.malformed)
    }

    /// Of those, from senders outside `listen.allow`.
    pub fn disallowed(&self) -> u64 {
        self.last
            .input
            .disallowed
            .saturating_sub(self.first.input.disallowed)
    }

    /// Datagrams a second while watched.
    pub fn rate(&self) -> f64 {
        match self.seconds() {
            s if s > 0.0 => self.received() as f64 / s,
            _ => 0.0,
        }
    }

    /// Who sent while watched (senders let in, that the relay lists), most
    /// datagrams first.
    pub fn senders(&self) -> Vec<Sent> {
        let mut sent: Vec<Sent> = self
            .last
            .input
            .senders
            .iter()
            .map(|s| {
                let before = self
                    .first
                    .input
                    .senders
                    .iter()
                    .find(|f| f.addr == s.addr)
                    .map_or(0, |f| f.datagrams);
                Sent {
                    addr: s.addr,
                    datagrams: s.datagrams.saturating_sub(before),
                    following: s.following,
                }
            })
            .filter(|s| s.datagrams > 0)
            .collect();
        sent.sort_by_key(|s| std::cmp::Reverse(s.datagrams));
        sent
    }
}

/// Watches the relay on `listen`, which answered `first`, for at most `wait`
/// (1 s after datagrams are first seen), asking every 250 ms.
pub fn observe(listen: SocketAddr, first: Answer, wait: Duration) -> Observation {
    let start = Instant::now();
    let mut deadline = start + wait;
    let mut last = first.clone();
    let mut seen = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(POLL));
        if let Ok(answer) = query::ask(listen, ASK_TIMEOUT) {
            last = answer;
        }
        if !seen && last.input.received > first.input.received {
            seen = true;
            deadline = deadline.min(Instant::now() + AFTER_FIRST);
        }
    }
    Observation { first, last }
}

/// `60 datagrams/s`, `1.5 datagrams/s`.
pub struct Rate(pub f64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 10.0 {
            write!(f, "{:.0} datagrams/s", self.0)
        } else {
            write!(f, "{:.1} datagrams/s", self.0)
        }
    }
}
