//! The relay's warnings: a repeated problem (a malformed datagram, a sender
//! outside `listen.allow`, a failed receive or send) is logged at most once
//! per interval, with how many more happened since the last message, and what
//! no message described is said once as the relay stops. Per packet nothing
//! here logs or formats: the loop looks at the core's counters once per drain
//! ([`Shell::warn_input`]) and only formats when they moved.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use log::{info, warn};

use super::Shell;
use crate::fanout::Report;
use crate::stats::{InputStats, SendErrorKind, FOLLOW_SILENCE};
use crate::wire::{Expected, Input, Reading, AGREEING_PACKETS};

/// Logs a repeated problem at most once per interval, and counts what it held
/// back.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    last: Option<Instant>,
    /// Occurrences since the last message.
    unlogged: u64,
}

impl Throttle {
    /// `n` more occurrences at `now`. `Some(more)` when a message about the
    /// latest may be logged now, `more` being the other occurrences since the
    /// last message, which no message described.
    pub(super) fn occurred(&mut self, n: u64, now: Instant, every: Duration) -> Option<u64> {
        if n == 0 {
            return None;
        }
        self.unlogged += n;
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < every)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged) - 1)
    }

    /// The occurrences no message described, for a last word at the end.
    pub(super) fn unlogged(&mut self) -> u64 {
        std::mem::take(&mut self.unlogged)
    }
}

/// How many occurrences a throttle held back, for the end of the next message.
pub(super) struct Suppressed(pub(super) u64);

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} more like this since the last message)"),
        }
    }
}

/// `1 more datagram` or `3 more datagrams`.
pub(super) struct More(u64, &'static str);

impl fmt::Display for More {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.0 == 1 { "" } else { "s" };
        write!(f, "{} more {}{s}", self.0, self.1)
    }
}

/// A send error as a person reads it.
pub(super) struct SendProblem<'a>(SendErrorKind, &'a io::Error);

impl fmt::Display for SendProblem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.1;
        match self.0 {
            SendErrorKind::Refused => {
                f.write_str("nothing is listening on that port (is the tool running?)")
            }
            SendErrorKind::Unreachable => write!(f, "the address can't be reached ({e})"),
            SendErrorKind::TooLarge => write!(f, "datagram too large for the path ({e})"),
            SendErrorKind::Other => write!(f, "send failed ({e})"),
        }
    }
}

/// The moment and the warning interval a batch of sends shares.
#[derive(Clone, Copy)]
pub(super) struct Clock {
    pub(super) now: Instant,
    pub(super) warn_every: Duration,
}

/// Warns about one destination's send errors, at most once per interval.
pub(super) struct Warner {
    pub(super) name: String,
    pub(super) addr: SocketAddr,
    pub(super) throttle: Throttle,
}

impl Warner {
    /// Reports a send error (from `send`, or collected from the socket after an
    /// ICMP message) to the core, and warns at most once per interval.
    pub(super) fn report(
        &mut self,
        e: &io::Error,
        report: &mut Report<'_>,
        clock: Clock,
    ) -> SendErrorKind {
        let kind = SendErrorKind::of(e);
        report.send_error(kind, clock.now);
        if let Some(more) = self.throttle.occurred(1, clock.now, clock.warn_every) {
            warn!(
                "{} ({}): {}; still sending to it{}",
                self.name,
                self.addr,
                SendProblem(kind, e),
                Suppressed(more)
            );
        }
        kind
    }

    /// The destination, refused `refused` times, sends without a refusal
    /// again: said once, and the refusals before are said with it (a later
    /// last word counts only what came after).
    #[cold]
    #[inline(never)]
    pub(super) fn receiving_again(&mut self, refused: u64) {
        self.throttle = Throttle::default();
        info!(
            "{} ({}) is receiving again (after {refused} refused)",
            self.name, self.addr
        );
    }

    /// The send errors no message described, said once as the relay stops.
    pub(super) fn last_word(&mut self) {
        let n = self.throttle.unlogged();
        if n > 0 {
            warn!(
                "{} ({}): {} since the last message",
                self.name,
                self.addr,
                More(n, "send error")
            );
        }
    }
}

/// How `auto`'s reading of Horizon packets that tell nothing changed, for
/// the log: `reading fh6 (confirmed by 30 packets from 127.0.0.1:5201; was a
/// guess)`, or `reading fh5 (30 packets in a row from … said so; was fh6)`.
struct HorizonChange {
    before: Reading,
    after: Reading,
    from: Option<SocketAddr>,
}

impl fmt::Display for HorizonChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let HorizonChange {
            before,
            after,
            from,
        } = self;
        let from = from.map(|a| format!(" from {a}")).unwrap_or_default();
        let was = if before.certain {
            before.format.to_string()
        } else if before.format == after.format {
            "a guess".to_owned()
        } else {
            format!("{}, a guess", before.format)
        };
        if !after.certain {
            write!(f, "reading {} (a guess; was {was})", after.format)
        } else if before.format == after.format {
            write!(
                f,
                "reading {} (confirmed by {AGREEING_PACKETS} packets{from}; was {was})",
                after.format
            )
        } else {
            write!(
                f,
                "reading {} ({AGREEING_PACKETS} packets in a row{from} said so; was {was})",
                after.format
            )
        }
    }
}

impl Shell {
    /// A receive that failed for a reason of its own: counted, and warned
    /// about at most once per interval.
    pub(super) fn receive_failed(&mut self, e: &io::Error, now: Instant) {
        self.core.count_recv_error();
        if let Some(more) = self.recv_error.occurred(1, now, self.warn_every) {
            warn!("receive failed on {}: {e}{}", self.listen, Suppressed(more));
        }
    }

    /// Warns, at most once per interval each, about datagrams the core counted
    /// as malformed or from a sender outside `listen.allow` since the last look,
    /// and says when `auto` changed how it reads Horizon packets.
    #[inline]
    pub(super) fn warn_input(&mut self, now: Instant) {
        let stats = self.core.input_stats();
        if stats.malformed != self.warned.malformed
            || stats.disallowed != self.warned.disallowed
            || stats.senders.changes() != self.warned.senders.changes()
            || self.core.horizon() != self.horizon
        {
            self.warn_new_input(now);
        }
    }

    /// [`Shell::warn_input`] when there is something new to consider.
    #[cold]
    #[inline(never)]
    fn warn_new_input(&mut self, now: Instant) {
        let stats = *self.core.input_stats();
        let new = stats.malformed - self.warned.malformed;
        if let (Some(more), Some((len, from))) = (
            self.malformed.occurred(new, now, self.warn_every),
            self.core.last_malformed(),
        ) {
            warn!(
                "a {len}-byte datagram from {from} is not {}; sent only to \
                 destinations with format \"same\"{}",
                Expected(self.core.input()),
                Suppressed(more)
            );
        }
        let new = stats.disallowed - self.warned.disallowed;
        if let (Some(more), Some(from)) = (
            self.disallowed.occurred(new, now, self.warn_every),
            self.core.last_disallowed(),
        ) {
            warn!(
                "dropped a datagram from {from}: not in listen.allow{}",
                Suppressed(more)
            );
        }
        self.warn_senders(&stats, now);
        self.warned = stats;
        let horizon = self.core.horizon();
        if horizon != self.horizon {
            if let (Some(before), Some(after)) = (self.horizon, horizon) {
                info!(
                    "Horizon packets: {}",
                    HorizonChange {
                        before,
                        after,
                        from: stats.senders.followed().map(|s| s.addr),
                    }
                );
            }
            self.horizon = horizon;
        }
    }

    /// Says, once each (at most once per interval), a sender beside the one
    /// whose stream is followed, and when another sender's stream becomes
    /// the one followed.
    fn warn_senders(&mut self, stats: &InputStats, now: Instant) {
        let (senders, before) = (&stats.senders, &self.warned.senders);
        if senders.changes() == before.changes() {
            return;
        }
        let followed = senders.followed().map(|s| s.addr);
        let switched = senders.switches() != before.switches();
        if switched {
            if let Some(to) = followed {
                info!(
                    "following the stream from {to} now: the one followed before sent \
                     nothing for {} s{}",
                    FOLLOW_SILENCE.as_secs(),
                    if self.core.input() == Input::Auto {
                        "; its packets teach how Horizon packets that tell nothing are read"
                    } else {
                        ""
                    }
                );
            }
        }
        // Senders beyond the first; a new one that took over was said above.
        let new = senders.added().saturating_sub(1) - before.added().saturating_sub(1);
        let newest = senders
            .newest()
            .map(|s| s.addr)
            .filter(|&a| !(switched && Some(a) == followed));
        if let (Some(more), Some(newest), Some(followed)) = (
            self.senders.occurred(new, now, self.warn_every),
            newest,
            followed,
        ) {
            let auto = if self.core.input() == Input::Auto {
                ", each read by its own bytes; they never change how the stream \
                 followed is read"
            } else {
                ""
            };
            warn!(
                "another sender: {newest} sends to {} too, beside {followed} (the stream \
                 followed); its datagrams are forwarded as well{auto}{}",
                self.listen,
                Suppressed(more)
            );
        }
    }

    /// What the throttles held back, said once as the relay stops.
    pub(super) fn last_words(&mut self) {
        let n = self.malformed.unlogged();
        if n > 0 {
            warn!(
                "{} since the last message {} not {}; sent only to destinations with \
                 format \"same\"",
                More(n, "datagram"),
                if n == 1 { "was" } else { "were" },
                Expected(self.core.input())
            );
        }
        let n = self.disallowed.unlogged();
        if n > 0 {
            warn!(
                "dropped {} since the last message from senders not in listen.allow",
                More(n, "datagram")
            );
        }
        let n = self.recv_error.unlogged();
        if n > 0 {
            warn!(
                "{} on {} since the last message",
                More(n, "receive error"),
                self.listen
            );
        }
        for link in self.links.iter_mut().flatten() {
            link.warner.last_word();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_counts_occurrences_not_calls() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let every = s(10);
        let mut t = Throttle::default();
        assert_eq!(t.occurred(1, t0, every), Some(0));
        assert_eq!(t.occurred(1, t0 + s(1), every), None, "held back");
        // Many drains with nothing new (issue 17: they were counted).
        for i in 2..30 {
            assert_eq!(t.occurred(0, t0 + s(i), every), None);
        }
        assert_eq!(
            t.occurred(1, t0 + s(30), every),
            Some(1),
            "the latest, and 1 more held back"
        );
        assert_eq!(t.occurred(3, t0 + s(40), every), Some(2), "3 at once");
        assert_eq!(t.occurred(1, t0 + s(41), every), None);
        assert_eq!(t.unlogged(), 1, "for the last word");
        assert_eq!(t.unlogged(), 0);
    }

    /// Issue 23: the log says what changed and from what.
    #[test]
    fn a_change_of_the_horizon_reading_says_what_it_was() {
        use crate::wire::Format;
        let guess = |format| Reading {
            format,
            certain: false,
        };
        let from: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let said = |before, after| {
            HorizonChange {
                before,
                after,
                from: Some(from),
            }
            .to_string()
        };
        assert_eq!(
            said(guess(Format::Fh6), Reading::sure(Format::Fh6)),
            "reading fh6 (confirmed by 30 packets from 127.0.0.1:5201; was a guess)"
        );
        assert_eq!(
            said(Reading::sure(Format::Fh6), Reading::sure(Format::Fh5)),
            "reading fh5 (30 packets in a row from 127.0.0.1:5201 said so; was fh6)"
        );
        assert_eq!(
            said(guess(Format::Fh6), Reading::sure(Format::Fh5)),
            "reading fh5 (30 packets in a row from 127.0.0.1:5201 said so; was fh6, a guess)"
        );
        assert_eq!(
            said(Reading::sure(Format::Fh5), guess(Format::Fh6)),
            "reading fh6 (a guess; was fh5)"
        );
    }
}
