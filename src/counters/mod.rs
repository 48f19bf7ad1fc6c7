//! What the fan-out core counts, per destination and for the input: why a
//! frame was dropped ([`DropReason`]), send errors by kind ([`SendErrors`]),
//! every destination's counters ([`DestinationStats`]: received = sent +
//! dropped + held, always), its health ([`Health`], from which its [`Status`]
//! is worked out), the input's counters ([`InputStats`]) and who sends
//! ([`Senders`], `senders.rs`), and each destination's latency
//! (`latency.rs`). The core keeps and counts them; nothing here renders them
//! for a person (that is [`crate::report`]'s), nor knows the routes.
//!
//! Each destination's latency (from the moment a datagram reached the machine
//! to the return of its send, issue 15) is kept in fixed log-linear histograms
//! ([`LatencyHistogram`], made when the destination is, so recording allocates
//! nothing): one over the summary interval, reset only when a summary is taken,
//! and one adding up the intervals before it, for the whole run
//! ([`Latencies`]). A snapshot carries their p50, p99 and max ([`Latency`]).

use std::io;
use std::time::{Duration, Instant};

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::wire::Format;

mod latency;
mod senders;

pub use latency::{Latencies, Latency, LatencyHistogram, LatencyWindow};
pub use senders::{Sender, Senders, FOLLOW_SILENCE, MAX_SENDERS};

/// Why a frame did not reach a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// IsRaceOn was 0 and the destination takes no such frame: `only_race_on`,
    /// or a menu frame (no car in it) to an influx destination.
    NotRacing,
    /// `max_rate`: a newer frame replaced it before its slot came.
    RateLimited,
    /// The datagram could not be translated to the destination's format.
    Untranslatable,
    /// The socket was full and the backlog kept newer frames instead.
    Backlog,
    /// The send failed (counted by kind in [`SendErrors`]).
    SendError,
    /// `max_age`: older than the limit when it would have been sent (on
    /// arrival, waiting for its rate slot, or in the backlog).
    Stale,
    /// An MQTT destination's broker was not connected (down, refusing the
    /// login, or gone) when the frame was due.
    BrokerUnavailable,
}

impl DropReason {
    /// How many reasons there are: the length of every table indexed by one.
    pub const COUNT: usize = DropReason::BrokerUnavailable as usize + 1;

    /// Every reason, in the order they are printed.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::NotRacing,
        DropReason::RateLimited,
        DropReason::Untranslatable,
        DropReason::Backlog,
        DropReason::SendError,
        DropReason::Stale,
        DropReason::BrokerUnavailable,
    ];

    /// Its key in the JSON form.
    pub const fn key(self) -> &'static str {
        match self {
            DropReason::NotRacing => "not_racing",
            DropReason::RateLimited => "rate_limited",
            DropReason::Untranslatable => "untranslatable",
            DropReason::Backlog => "backlog_full",
            DropReason::SendError => "send_failed",
            DropReason::Stale => "stale",
            DropReason::BrokerUnavailable => "broker_unavailable",
        }
    }

    /// How the summary names it.
    pub const fn label(self) -> &'static str {
        match self {
            DropReason::NotRacing => "not racing",
            DropReason::RateLimited => "rate-limited",
            DropReason::Untranslatable => "untranslatable",
            DropReason::Backlog => "backlog full",
            DropReason::SendError => "send errors",
            DropReason::Stale => "stale",
            DropReason::BrokerUnavailable => "broker unavailable",
        }
    }
}

/// Send failures by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendErrorKind {
    /// Nothing listens there (ICMP port unreachable; Windows reports a reset).
    Refused,
    /// No route to the host or network.
    Unreachable,
    /// The datagram is larger than the path allows.
    TooLarge,
    /// Anything else.
    Other,
}

impl SendErrorKind {
    /// How many kinds there are: the length of every table indexed by one.
    pub const COUNT: usize = SendErrorKind::Other as usize + 1;

    /// Every kind, in the order they are printed.
    pub const ALL: [SendErrorKind; SendErrorKind::COUNT] = [
        SendErrorKind::Refused,
        SendErrorKind::Unreachable,
        SendErrorKind::TooLarge,
        SendErrorKind::Other,
    ];

    /// Classifies an I/O error from `send`.
    pub fn of(e: &io::Error) -> Self {
        use io::ErrorKind as K;
        match e.kind() {
            K::ConnectionRefused | K::ConnectionReset => SendErrorKind::Refused,
            K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable => {
                SendErrorKind::Unreachable
            }
            _ if e.raw_os_error() == Some(libc_emsgsize()) => SendErrorKind::TooLarge,
            _ => SendErrorKind::Other,
        }
    }

    /// Its key in the JSON form.
    pub const fn key(self) -> &'static str {
        match self {
            SendErrorKind::Refused => "refused",
            SendErrorKind::Unreachable => "unreachable",
            SendErrorKind::TooLarge => "too_large",
            SendErrorKind::Other => "other",
        }
    }

    /// How the summary names it.
    pub const fn label(self) -> &'static str {
        match self {
            SendErrorKind::Refused => "refused (nothing listening)",
            SendErrorKind::Unreachable => "unreachable",
            SendErrorKind::TooLarge => "too large",
            SendErrorKind::Other => "other",
        }
    }
}

// Each table's entry `i` is the variant whose index is `i`.
const _: () = {
    let mut i = 0;
    while i < DropReason::COUNT {
        assert!(DropReason::ALL[i] as usize == i);
        i += 1;
    }
    let mut i = 0;
    while i < SendErrorKind::COUNT {
        assert!(SendErrorKind::ALL[i] as usize == i);
        i += 1;
    }
};

/// EMSGSIZE on this platform (WSAEMSGSIZE on Windows).
const fn libc_emsgsize() -> i32 {
    if cfg!(windows) {
        10040
    } else if cfg!(any(
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd"
    )) {
        40
    } else {
        90
    }
}

/// Send failures counted by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendErrors([u64; SendErrorKind::COUNT]);

impl SendErrors {
    /// Counts one.
    pub fn add(&mut self, kind: SendErrorKind) {
        self.0[kind as usize] += 1;
    }

    /// The count for `kind`.
    pub fn get(&self, kind: SendErrorKind) -> u64 {
        self.0[kind as usize]
    }

    /// All kinds together.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// Counters of one destination. The core keeps them ([`crate::fanout`]): every
/// datagram it admitted while the destination existed is `received`, and is
/// then sent, dropped for one reason, or held (waiting for its rate slot, or in
/// the shell's backlog), so `received = sent + dropped + held` at every moment
/// ([`DestinationStats::is_balanced`]), and `held` is 0 once the relay stopped.
/// `received` and `sent`, which every frame counts, come first (`repr(C)`
/// keeps the order): one cache line (issue 26).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DestinationStats {
    /// Admitted datagrams this destination saw.
    pub received: u64,
    /// Frames handed to the OS.
    pub sent: u64,
    /// Frames not sent, by [`DropReason`].
    pub dropped: [u64; DropReason::COUNT],
    /// Frames held now: the one waiting for its `max_rate` slot, and those in
    /// the shell's backlog while the socket would block.
    pub held: u64,
    /// Send failures by kind.
    pub send_errors: SendErrors,
}

impl DestinationStats {
    /// Counts a frame dropped for `reason`.
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        self.dropped[reason as usize] += 1;
    }

    /// True when every datagram received is sent, dropped or held.
    pub fn is_balanced(&self) -> bool {
        self.received == self.sent + self.dropped_total() + self.held
    }

    /// Frames dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize]
    }

    /// Frames dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

impl Serialize for SendErrors {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(SendErrorKind::ALL.len()))?;
        for kind in SendErrorKind::ALL {
            map.serialize_entry(kind.key(), &self.get(kind))?;
        }
        map.end()
    }
}

/// Counters of the listening socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputStats {
    /// Datagrams received.
    pub received: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Datagrams whose length fits no expected format (still sent to `same`).
    pub malformed: u64,
    /// Datagrams from senders outside `listen.allow` (dropped).
    pub disallowed: u64,
    /// Receive errors other than "would block".
    pub recv_errors: u64,
    /// The format of the last packet that had one.
    pub last_format: Option<Format>,
    /// True when `last_format` is `auto`'s default for a 324-byte packet, not yet
    /// confirmed by the packets (see [`crate::wire::Detector::is_certain`]).
    pub format_guessed: bool,
    /// Who sends, and whose stream is followed (issue 23).
    pub senders: Senders,
}

impl Serialize for InputStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("InputStats", 9)?;
        st.serialize_field("received", &self.received)?;
        st.serialize_field("bytes", &self.bytes)?;
        st.serialize_field("malformed", &self.malformed)?;
        st.serialize_field("disallowed", &self.disallowed)?;
        st.serialize_field("recv_errors", &self.recv_errors)?;
        st.serialize_field("format", &self.last_format)?;
        st.serialize_field("format_guessed", &self.format_guessed)?;
        st.serialize_field("senders", &senders::SendersList(&self.senders))?;
        st.serialize_field("other_senders", &self.senders.others())?;
        st.end()
    }
}

/// How long a destination's newest send, refusal or other send error counts
/// for its [`Status`] (issue 23).
pub const STATUS_WINDOW: Duration = Duration::from_secs(5);
/// How long a destination that was refused must send without a refusal to be
/// receiving again: on a closed port every other send is refused (the ICMP
/// answer of one fails the next), so one send that went says nothing.
pub const RECOVERY: Duration = Duration::from_secs(1);

/// How a destination is doing now, from its newest sends and send errors
/// (not from the run's totals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Frames go, and nothing refused or failed in the last [`STATUS_WINDOW`].
    Ok,
    /// Refused in the last [`STATUS_WINDOW`] (nothing listens on its port)
    /// and not receiving again since.
    Refused,
    /// Another send error in the last [`STATUS_WINDOW`].
    Failing,
    /// Nothing sent for [`STATUS_WINDOW`]: nothing came, or every frame was
    /// filtered.
    Idle,
}

/// When a destination last sent, was refused and failed otherwise: what its
/// [`Status`] is worked out from, and when it is receiving again. Kept by the
/// core with its counters; a send that went costs one store and one test, of
/// the two fields first (`repr(C)` keeps the order: one cache line, issue 26).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Health {
    last_sent: Option<Instant>,
    /// Refused and not receiving again since.
    refusing: bool,
    last_refused: Option<Instant>,
    last_failed: Option<Instant>,
    /// Refused since it last received (or since the start).
    refused: u64,
}

impl Health {
    /// A send went at `at`; `Some(n)` when this makes a destination refused
    /// `n` times receiving again (it sent without a refusal for
    /// [`RECOVERY`]), which is said once.
    #[inline]
    pub fn sent(&mut self, at: Instant) -> Option<u64> {
        self.last_sent = Some(at);
        if self.refusing {
            return self.recovered(at);
        }
        None
    }

    #[cold]
    #[inline(never)]
    fn recovered(&mut self, at: Instant) -> Option<u64> {
        let quiet = self
            .last_refused
            .is_none_or(|refused| at.saturating_duration_since(refused) >= RECOVERY);
        if !quiet {
            return None;
        }
        self.refusing = false;
        Some(std::mem::take(&mut self.refused))
    }

    /// A send failed at `at`.
    #[cold]
    pub fn failed(&mut self, kind: SendErrorKind, at: Instant) {
        match kind {
            SendErrorKind::Refused => {
                self.last_refused = Some(at);
                self.refused += 1;
                self.refusing = true;
            }
            _ => self.last_failed = Some(at),
        }
    }

    /// Its status at `now`.
    pub fn status(&self, now: Instant) -> Status {
        let recent = |t: Option<Instant>| {
            t.is_some_and(|t| now.saturating_duration_since(t) < STATUS_WINDOW)
        };
        if self.refusing && recent(self.last_refused) {
            Status::Refused
        } else if recent(self.last_failed) {
            Status::Failing
        } else if recent(self.last_sent) {
            Status::Ok
        } else {
            Status::Idle
        }
    }
}

#[cfg(test)]
mod tests;
