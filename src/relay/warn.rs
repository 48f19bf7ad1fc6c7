//! The relay's warnings: a repeated problem (a malformed datagram, a sender
//! outside `listen.allow`, a failed receive) is logged at most once per
//! interval, with how many more happened since the last message, and what no
//! message described is said once as the relay stops; a destination's send
//! errors are said once and again when they change ([`Warner`]). Per packet nothing
//! here logs or formats: the loop looks at the core's counters once per drain
//! ([`Shell::warn_input`]) and only formats when they moved.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use log::{info, warn};

use super::Shell;
use crate::counters::{InputStats, SendErrorKind, FOLLOW_SILENCE};
use crate::fanout::Report;
pub(super) use crate::logging::{Suppressed, Throttle};
use crate::wire::{Expected, Input, Reading, AGREEING_PACKETS};

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

/// Says one destination's send errors once, and again only when they change
/// (issue 30: a tool that was not running gave a warning every 10 s for as
/// long as it was off, filling the page's last 50 lines): another kind of
/// error, the same after it had stopped for a warning interval, or (said by
/// [`Warner::receiving_again`]) a refused destination receiving again. Every
/// error is counted in the summaries and on the page meanwhile.
pub(super) struct Warner {
    pub(super) name: String,
    pub(super) addr: SocketAddr,
    said: News,
}

/// When a destination's send error is news (see [`Warner`]).
#[derive(Debug, Default)]
struct News {
    /// The kind of error last said.
    said: Option<SendErrorKind>,
    /// When the last error came.
    last: Option<Instant>,
    /// News is said at most once an interval too: errors of two kinds
    /// taking turns (a flaky route) would otherwise be said per packet.
    throttle: Throttle,
}

impl News {
    /// An error of `kind` at `now`: true when it is to be said.
    fn is_news(&mut self, kind: SendErrorKind, now: Instant, every: Duration) -> bool {
        let quiet = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= every);
        self.last = Some(now);
        let news = quiet || self.said != Some(kind);
        if news && self.throttle.occurred(1, now, every).is_some() {
            self.said = Some(kind);
            return true;
        }
        false
    }

    /// The destination receives again: its next error is news.
    fn reset(&mut self) {
        self.said = None;
        self.last = None;
    }
}

impl Warner {
    /// Says nothing yet for destination `name` at `addr`.
    pub(super) fn new(name: String, addr: SocketAddr) -> Warner {
        Warner {
            name,
            addr,
            said: News::default(),
        }
    }

    /// Reports a send error (from `send`, or collected from the socket after an
    /// ICMP message) to the core, and warns when it is news.
    pub(super) fn report(
        &mut self,
        e: &io::Error,
        report: &mut Report<'_>,
        clock: Clock,
    ) -> SendErrorKind {
        let kind = SendErrorKind::of(e);
        report.send_error(kind, clock.now);
        if self.said.is_news(kind, clock.now, clock.warn_every) {
            warn!(
                "{} ({}): {}; still sending to it (the summaries count {}; said again when \
                 that changes)",
                self.name,
                self.addr,
                SendProblem(kind, e),
                match kind {
                    SendErrorKind::Refused => "its refusals",
                    _ => "its send errors",
                }
            );
        }
        kind
    }

    /// The destination, refused `refused` times, sends without a refusal
    /// again: said once.
    #[cold]
    #[inline(never)]
    pub(super) fn receiving_again(&mut self, refused: u64) {
        self.said.reset();
        info!(
            "{} ({}) is receiving again (after {refused} refused)",
            self.name, self.addr
        );
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
        if let Some(more) = self
            .warnings
            .recv_error
            .occurred(1, now, self.schedule.warn_every)
        {
            warn!(
                "receive failed on {}: {e}{}",
                self.intake.listen,
                Suppressed(more)
            );
        }
    }

    /// Warns, at most once per interval each, about datagrams the core counted
    /// as malformed or from a sender outside `listen.allow` since the last look,
    /// and says when `auto` changed how it reads Horizon packets.
    #[inline]
    pub(super) fn warn_input(&mut self, now: Instant) {
        let stats = self.core.input_stats();
        if stats.malformed != self.warnings.warned.malformed
            || stats.disallowed != self.warnings.warned.disallowed
            || stats.senders.changes() != self.warnings.warned.senders.changes()
            || self.core.horizon() != self.warnings.horizon
        {
            self.warn_new_input(now);
        }
    }

    /// [`Shell::warn_input`] when there is something new to consider.
    #[cold]
    #[inline(never)]
    fn warn_new_input(&mut self, now: Instant) {
        let stats = *self.core.input_stats();
        let new = stats.malformed - self.warnings.warned.malformed;
        if let (Some(more), Some((len, from))) = (
            self.warnings
                .malformed
                .occurred(new, now, self.schedule.warn_every),
            self.core.last_malformed(),
        ) {
            warn!(
                "a {len}-byte datagram from {from} is not {}; sent only to \
                 destinations with format \"same\"{}",
                Expected(self.core.input()),
                Suppressed(more)
            );
        }
        let new = stats.disallowed - self.warnings.warned.disallowed;
        if let (Some(more), Some(from)) = (
            self.warnings
                .disallowed
                .occurred(new, now, self.schedule.warn_every),
            self.core.last_disallowed(),
        ) {
            warn!(
                "dropped a datagram from {from}: not in listen.allow{}",
                Suppressed(more)
            );
        }
        self.warn_senders(&stats, now);
        self.warnings.warned = stats;
        let horizon = self.core.horizon();
        if horizon != self.warnings.horizon {
            if let (Some(before), Some(after)) = (self.warnings.horizon, horizon) {
                info!(
                    "Horizon packets: {}",
                    HorizonChange {
                        before,
                        after,
                        from: stats.senders.followed().map(|s| s.addr),
                    }
                );
            }
            self.warnings.horizon = horizon;
        }
    }

    /// Says, once each (at most once per interval), a sender beside the one
    /// whose stream is followed, and when another sender's stream becomes
    /// the one followed.
    fn warn_senders(&mut self, stats: &InputStats, now: Instant) {
        let (senders, before) = (&stats.senders, &self.warnings.warned.senders);
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
            self.warnings
                .senders
                .occurred(new, now, self.schedule.warn_every),
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
                self.intake.listen,
                Suppressed(more)
            );
        }
    }

    /// What the throttles held back, said once as the relay stops.
    pub(super) fn last_words(&mut self) {
        let n = self.warnings.malformed.unlogged();
        if n > 0 {
            warn!(
                "{} since the last message {} not {}; sent only to destinations with \
                 format \"same\"",
                More(n, "datagram"),
                if n == 1 { "was" } else { "were" },
                Expected(self.core.input())
            );
        }
        let n = self.warnings.disallowed.unlogged();
        if n > 0 {
            warn!(
                "dropped {} since the last message from senders not in listen.allow",
                More(n, "datagram")
            );
        }
        let n = self.warnings.recv_error.unlogged();
        if n > 0 {
            warn!(
                "{} on {} since the last message",
                More(n, "receive error"),
                self.intake.listen
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Issue 30: a destination refusing for as long as its tool is off is
    /// said once; another kind of error, or the same after a quiet interval,
    /// is said again, and two kinds taking turns (found in review: a flaky
    /// route said per packet) are said at most once an interval.
    #[test]
    fn a_send_error_is_said_once_and_again_when_it_changes() {
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut news = News::default();
        let refused = SendErrorKind::Refused;
        let unreachable = SendErrorKind::Unreachable;
        let said: Vec<u64> = (0..3_000u64)
            .filter(|&i| news.is_news(refused, ms(i * 10), every))
            .collect();
        assert_eq!(said, [0], "30 s of refusals: said once");
        assert!(
            news.is_news(unreachable, ms(30_000), every),
            "another kind is news"
        );
        // Two kinds taking turns every 10 ms for 25 s: once an interval.
        let turns: Vec<u64> = (1..2_500u64)
            .filter(|&i| {
                let kind = if i % 2 == 0 { refused } else { unreachable };
                news.is_news(kind, ms(30_000 + i * 10), every)
            })
            .collect();
        assert_eq!(turns.len(), 2, "{turns:?}");
        // Quiet for an interval, then the same kind again: news.
        assert!(news.is_news(refused, ms(80_000), every));
        assert!(!news.is_news(refused, ms(80_010), every));
        news.reset();
        assert!(
            !news.is_news(refused, ms(80_020), every),
            "receiving again, refused again within the interval: held to it"
        );
        assert!(news.is_news(refused, ms(90_000), every));
    }
}
