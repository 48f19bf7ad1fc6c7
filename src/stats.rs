//! Plain counters, why frames were dropped, and the lines a person reads.

use std::fmt::{self, Write as _};
use std::io;
use std::time::Duration;

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
    /// Every reason, in the order they are printed.
    pub const ALL: [DropReason; 5] = [
        DropReason::NotRacing,
        DropReason::RateLimited,
        DropReason::Untranslatable,
        DropReason::Backlog,
        DropReason::SendError,
    ];

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
    /// Every kind, in the order they are printed.
    pub const ALL: [SendErrorKind; 4] = [
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
pub struct SendErrors([u64; 4]);

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

/// Counters of one destination.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DestinationStats {
    /// Frames handed to the OS.
    pub sent: u64,
    /// Frames not sent, by [`DropReason`].
    pub dropped: [u64; 5],
    /// Send failures by kind.
    pub send_errors: SendErrors,
}

impl DestinationStats {
    /// Counts a frame dropped for `reason`.
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        self.dropped[reason as usize] += 1;
    }

    /// Frames dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize]
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

/// Appends `, N label` for every non-zero drop reason and send error kind.
pub fn write_drops(out: &mut String, s: &DestinationStats) {
    for reason in DropReason::ALL {
        let n = s.dropped(reason);
        if n > 0 && reason != DropReason::SendError {
            let _ = write!(out, ", {n} {}", reason.label());
        }
    }
    for kind in SendErrorKind::ALL {
        let n = s.send_errors.get(kind);
        if n > 0 {
            let _ = write!(out, ", {n} send errors: {}", kind.label());
        }
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
        let mut out = String::new();
        write_drops(&mut out, &s);
        assert_eq!(
            out,
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
