//! What a publisher tells the log about its connection, by the rule every
//! repeated warning follows ([`Throttle`]): a broker that drops each
//! connection, or refuses each attempt, is said at most once per interval
//! (the summary's) for each of the two kinds, with how many were held back,
//! and what no message said is said once when the publisher stops (issue 30:
//! a broker that closed each connection gave 114 lines in 20 s). The first
//! connection is said, and a connection after a loss or a failed attempt that
//! was said; one after a loss held back is not.
//! A failed attempt is not said again while it fails the same way.

use std::time::{Duration, Instant};

use crate::logging::Throttle;

/// What the log was told about one publisher's connection.
#[derive(Debug, Default)]
pub(super) struct Said {
    /// Connections lost.
    losses: Throttle,
    /// Attempts that failed.
    failures: Throttle,
    /// The last thing said was that the connection was lost or could not be
    /// made: the next connection is said.
    lost: bool,
    /// Connected once at least.
    connected_once: bool,
    /// Why the last failed attempt said failed, until a connection.
    why: Option<String>,
}

/// How a connection is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Connected {
    /// The first one.
    First,
    /// After a loss that was said.
    Again,
}

impl Said {
    /// A connection: how to say it, if it is said.
    pub(super) fn connected(&mut self) -> Option<Connected> {
        self.why = None;
        let said = if !self.connected_once {
            Some(Connected::First)
        } else if self.lost {
            Some(Connected::Again)
        } else {
            None
        };
        self.connected_once = true;
        self.lost = false;
        said
    }

    /// A connection lost at `now`: `Some(held back)` when it is said.
    pub(super) fn lost(&mut self, now: Instant, every: Duration) -> Option<u64> {
        let said = self.losses.occurred(1, now, every);
        self.lost |= said.is_some();
        said
    }

    /// An attempt failed at `now` because of `why`: `Some(held back)` when it
    /// is said; never when the last one said failed the same way.
    pub(super) fn failed(&mut self, why: &str, now: Instant, every: Duration) -> Option<u64> {
        if self.why.as_deref() == Some(why) {
            return None;
        }
        let said = self.failures.occurred(1, now, every);
        if said.is_some() {
            self.why = Some(why.to_owned());
            // The connection that ends this is news too.
            self.lost = true;
        }
        said
    }

    /// The losses and failed attempts no message described, for the last
    /// word.
    pub(super) fn unsaid(&mut self) -> u64 {
        self.losses.unlogged() + self.failures.unlogged()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_that_drops_every_connection_is_said_once_an_interval() {
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut said = Said::default();
        assert_eq!(said.connected(), Some(Connected::First));
        assert_eq!(said.lost(ms(100), every), Some(0));
        assert_eq!(said.connected(), Some(Connected::Again));
        // Forty more in the interval: nothing said.
        for i in 0..40 {
            assert_eq!(said.lost(ms(200 + i * 200), every), None);
            assert_eq!(said.connected(), None);
        }
        assert_eq!(said.lost(ms(10_100), every), Some(40), "the next interval");
        assert_eq!(said.connected(), Some(Connected::Again));
        assert_eq!(said.lost(ms(10_200), every), None);
        assert_eq!(said.unsaid(), 1, "the last word");
    }

    /// Found in review: a broker restarted (a loss said, then a failed
    /// attempt said) came back without a word.
    #[test]
    fn a_connection_after_a_failure_that_was_said_is_said() {
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut said = Said::default();
        assert_eq!(said.connected(), Some(Connected::First));
        assert_eq!(said.lost(s(1), every), Some(0));
        assert_eq!(said.failed("refused", s(2), every), Some(0));
        assert_eq!(said.connected(), Some(Connected::Again));
    }

    #[test]
    fn a_failed_attempt_is_said_once_while_it_fails_the_same_way() {
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut said = Said::default();
        assert_eq!(said.failed("refused", s(0), every), Some(0));
        for i in 1..100 {
            assert_eq!(said.failed("refused", s(i), every), None);
        }
        assert_eq!(said.unsaid(), 0, "the same failure is no news");
        assert_eq!(said.failed("timed out", s(100), every), Some(0));
        // Two ways taking turns: held to the interval.
        assert_eq!(said.failed("refused", s(101), every), None);
        assert_eq!(said.failed("timed out", s(102), every), None);
        assert_eq!(said.failed("refused", s(111), every), Some(1));
        assert_eq!(said.connected(), Some(Connected::First));
        // A loss is another kind: said at once.
        assert_eq!(said.lost(s(112), every), Some(0));
    }
}
