//! The counters' types, why frames were dropped, and every rendering of them.
//!
//! The core ([`crate::fanout`]) keeps and counts them; the relay's shell reads
//! them as one [`Snapshot`], which adds what only the shell knows (the address
//! bound, the run time, what taps dropped). The periodic summary line
//! ([`Summary`]), the final report (`Display` for [`Snapshot`]), the JSON form
//! for scripts and the bench ([`Snapshot::to_json`]) and a destination's trouble
//! in a few words ([`Problems`], for a dashboard) are all rendered here.

use std::fmt::{self, Write as _};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::fanout::Output;
use crate::wire::Format;

/// Why a frame did not reach a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// `only_race_on` and IsRaceOn was 0.
    NotRacing,
    /// `max_rate`: a newer frame replaced it before its slot came.
    RateLimited,
    /// The datagram could not be translated to the destination's format.
    Untranslatable,
    /// The socket was full and the backlog kept newer frames instead.
    Backlog,
    /// The send failed (counted by kind in [`SendErrors`]).
    SendError,
}

impl DropReason {
    /// How many reasons there are: the length of every table indexed by one.
    pub const COUNT: usize = DropReason::SendError as usize + 1;

    /// Every reason, in the order they are printed.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::NotRacing,
        DropReason::RateLimited,
        DropReason::Untranslatable,
        DropReason::Backlog,
        DropReason::SendError,
    ];

    /// Its key in the JSON form.
    pub const fn key(self) -> &'static str {
        match self {
            DropReason::NotRacing => "not_racing",
            DropReason::RateLimited => "rate_limited",
            DropReason::Untranslatable => "untranslatable",
            DropReason::Backlog => "backlog_full",
            DropReason::SendError => "send_failed",
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
}

impl Serialize for InputStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("InputStats", 7)?;
        st.serialize_field("received", &self.received)?;
        st.serialize_field("bytes", &self.bytes)?;
        st.serialize_field("malformed", &self.malformed)?;
        st.serialize_field("disallowed", &self.disallowed)?;
        st.serialize_field("recv_errors", &self.recv_errors)?;
        st.serialize_field("format", &self.last_format)?;
        st.serialize_field("format_guessed", &self.format_guessed)?;
        st.end()
    }
}

/// One destination's counters, with what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationSnapshot {
    /// Its name.
    pub name: String,
    /// Its address.
    pub addr: SocketAddr,
    /// What it receives.
    pub output: Output,
    /// Its counters.
    pub stats: DestinationStats,
}

impl Serialize for DestinationSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("addr", &self.addr)?;
        map.serialize_entry("output", &self.output)?;
        map.serialize_entry("received", &self.stats.received)?;
        map.serialize_entry("sent", &self.stats.sent)?;
        for reason in DropReason::ALL {
            map.serialize_entry(reason.key(), &self.stats.dropped(reason))?;
        }
        map.serialize_entry("held", &self.stats.held)?;
        map.serialize_entry("send_errors", &self.stats.send_errors)?;
        map.end()
    }
}

/// Every counter of a running relay at one moment: what every summary, report
/// and dashboard is rendered from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// The listening address.
    pub listen: SocketAddr,
    /// Time since the relay started.
    #[serde(rename = "elapsed_s", serialize_with = "seconds")]
    pub elapsed: Duration,
    /// Input counters.
    pub input: InputStats,
    /// Every destination, in configuration order.
    pub destinations: Vec<DestinationSnapshot>,
    /// Datagrams not copied to a tap (a capture file, the dashboard) because
    /// its reader fell behind; forwarding is never affected.
    pub tap_dropped: u64,
    /// Datagrams a recording took but could not write (its disk is full, or
    /// the file can no longer be written); forwarding is never affected.
    pub not_recorded: u64,
}

fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Which summary a JSON line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotKind {
    /// A periodic summary.
    Summary,
    /// The final summary, after the relay stopped.
    Final,
}

impl SnapshotKind {
    const fn key(self) -> &'static str {
        match self {
            SnapshotKind::Summary => "summary",
            SnapshotKind::Final => "final",
        }
    }
}

impl Snapshot {
    /// The counters of the destination called `name`.
    pub fn destination(&self, name: &str) -> Option<&DestinationSnapshot> {
        self.destinations.iter().find(|d| d.name == name)
    }

    /// One JSON object on one line: `{"event":"summary","elapsed_s":…,"listen":…,
    /// "input":{…},"destinations":[{"name":…,"sent":…,"not_racing":…,…}]}`.
    pub fn to_json(&self, kind: SnapshotKind) -> String {
        #[derive(Serialize)]
        struct Line<'a> {
            event: &'static str,
            #[serde(flatten)]
            snapshot: &'a Snapshot,
        }
        serde_json::to_string(&Line {
            event: kind.key(),
            snapshot: self,
        })
        .unwrap_or_else(|e| format!("{{\"event\":\"error\",\"error\":\"{e}\"}}"))
    }
}

impl fmt::Display for Snapshot {
    /// The final summary: how long it ran, the input, every destination.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.input;
        write!(
            f,
            "forza-relay ran for {}. Received {} packets on {}",
            Elapsed(self.elapsed),
            i.received,
            self.listen
        )?;
        if let Some(format) = i.last_format {
            write!(f, " ({format}{})", if i.format_guessed { "?" } else { "" })?;
        }
        write!(
            f,
            ", {} malformed, {} disallowed",
            i.malformed, i.disallowed
        )?;
        if i.recv_errors > 0 {
            write!(f, ", {} receive errors", i.recv_errors)?;
        }
        if self.tap_dropped > 0 {
            write!(
                f,
                ", {} not recorded or shown (the reader fell behind)",
                self.tap_dropped
            )?;
        }
        if self.not_recorded > 0 {
            write!(
                f,
                ", {} not recorded (writing the capture failed)",
                self.not_recorded
            )?;
        }
        f.write_str(".")?;
        for d in &self.destinations {
            write!(f, "\n  {}", d.name)?;
            if d.name != d.addr.to_string() {
                write!(f, " ({})", d.addr)?;
            }
            write!(
                f,
                ", {}: sent {}{}",
                d.output,
                d.stats.sent,
                Drops(&d.stats)
            )?;
        }
        Ok(())
    }
}

/// The periodic one-line summary: rates since the previous line.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// When the previous line was made (time since start) and the count then.
    previous: (Duration, u64),
}

/// The end of the relay's idle line: "waiting: nothing received on ADDR in the
/// last 10 s (…); run `forza-relay doctor` to find out why".
pub const IDLE_HINT: &str = "run `forza-relay doctor` to find out why";

impl Summary {
    /// The line for `now`, relative to the previous call.
    pub fn line(&mut self, now: &Snapshot) -> String {
        let (since, before) =
            std::mem::replace(&mut self.previous, (now.elapsed, now.input.received));
        let interval = now.elapsed.saturating_sub(since);
        let received = now.input.received.saturating_sub(before);
        let i = &now.input;
        if received == 0 {
            return format!(
                "waiting: nothing received on {} in the last {} (is the game's Data Out \
                 pointed here?); {}",
                now.listen,
                Elapsed(interval),
                IDLE_HINT
            );
        }
        let mut line = format!(
            "in {:.0}/s ({} total",
            received as f64 / interval.as_secs_f64().max(1e-9),
            i.received
        );
        if let Some(f) = i.last_format {
            let _ = write!(line, ", {f}{}", if i.format_guessed { "?" } else { "" });
        }
        if i.malformed > 0 {
            let _ = write!(line, ", {} malformed", i.malformed);
        }
        if i.disallowed > 0 {
            let _ = write!(line, ", {} disallowed", i.disallowed);
        }
        line.push(')');
        for d in &now.destinations {
            let _ = write!(
                line,
                " | {} {} sent{}",
                d.name,
                d.stats.sent,
                Drops(&d.stats)
            );
        }
        line
    }
}

/// A duration as a person reads it: `42s`, `3m 05s`, `2h 01m`.
pub struct Elapsed(pub Duration);

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.as_secs();
        match s {
            0..=59 => write!(f, "{}.{}s", s, self.0.subsec_millis() / 100),
            60..=3599 => write!(f, "{}m {:02}s", s / 60, s % 60),
            _ => write!(f, "{}h {:02}m", s / 3600, s % 3600 / 60),
        }
    }
}

/// A destination's trouble in a few words, for a dashboard's table: the send
/// errors by kind and the drops that are not the user's own filters
/// (untranslatable, backlog full), `3 refused (nothing listening), 1
/// untranslatable`; empty when there is none.
pub struct Problems<'a>(pub &'a DestinationStats);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let errors = SendErrorKind::ALL.map(|kind| (s.send_errors.get(kind), kind.label()));
        let drops = [DropReason::Untranslatable, DropReason::Backlog]
            .map(|reason| (s.dropped(reason), reason.label()));
        let mut sep = "";
        for (n, label) in errors.into_iter().chain(drops) {
            if n > 0 {
                write!(f, "{sep}{n} {label}")?;
                sep = ", ";
            }
        }
        Ok(())
    }
}

/// `, N label` for every non-zero drop reason and send error kind.
pub struct Drops<'a>(pub &'a DestinationStats);

impl fmt::Display for Drops<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        for reason in DropReason::ALL {
            let n = s.dropped(reason);
            if n > 0 && reason != DropReason::SendError {
                write!(f, ", {n} {}", reason.label())?;
            }
        }
        for kind in SendErrorKind::ALL {
            let n = s.send_errors.get(kind);
            if n > 0 {
                write!(f, ", {n} send errors: {}", kind.label())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_listed_only_when_nonzero() {
        let mut s = DestinationStats {
            sent: 10,
            ..Default::default()
        };
        s.drop(DropReason::NotRacing);
        s.drop(DropReason::NotRacing);
        s.send_errors.add(SendErrorKind::Refused);
        assert_eq!(
            Drops(&s).to_string(),
            ", 2 not racing, 1 send errors: refused (nothing listening)"
        );
        assert_eq!(s.send_errors.total(), 1);
    }

    #[test]
    fn elapsed_reads_naturally() {
        assert_eq!(Elapsed(Duration::from_millis(4_250)).to_string(), "4.2s");
        assert_eq!(Elapsed(Duration::from_secs(185)).to_string(), "3m 05s");
        assert_eq!(Elapsed(Duration::from_secs(7_260)).to_string(), "2h 01m");
    }

    #[test]
    fn refused_and_reset_are_one_kind() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(SendErrorKind::of(&refused), SendErrorKind::Refused);
        assert_eq!(SendErrorKind::of(&reset), SendErrorKind::Refused);
        assert_eq!(
            SendErrorKind::of(&io::Error::from_raw_os_error(libc_emsgsize())),
            SendErrorKind::TooLarge
        );
    }
}
