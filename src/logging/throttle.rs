//! The rule every repeated warning follows: a problem that happens again and
//! again (a malformed datagram, a send error, a broker that drops each
//! connection) is logged at most once per interval, the summary's (10 s when
//! it is off), and the next message says how many were held back since the
//! last one; what no message described is said once at the end. More
//! occurrences raise the counts, never the number of lines.

use std::fmt;
use std::time::{Duration, Instant};

/// Logs a repeated problem at most once per interval, and counts what it held
/// back.
#[derive(Debug, Default)]
pub struct Throttle {
    last: Option<Instant>,
    /// Occurrences since the last message.
    unlogged: u64,
}

impl Throttle {
    /// `n` more occurrences at `now`. `Some(more)` when a message about the
    /// latest may be logged now, `more` being the other occurrences since the
    /// last message, which no message described.
    pub fn occurred(&mut self, n: u64, now: Instant, every: Duration) -> Option<u64> {
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
    pub fn unlogged(&mut self) -> u64 {
        std::mem::take(&mut self.unlogged)
    }
}

/// How many occurrences a throttle held back, for the end of the next message.
pub struct Suppressed(pub u64);

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} more like this since the last message)"),
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
}
