//! Per-destination decisions, pure and allocation-free: IsRaceOn and rate.

use std::time::{Duration, Instant};

/// `only_race_on`: passes racing frames, and the first not-racing frame after
/// them so a dashboard sees the race end; drops the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RaceFilter {
    racing: bool,
}

impl RaceFilter {
    /// Whether to pass a frame whose IsRaceOn is `race_on` (`None`: not a packet
    /// we can read, passed as it is).
    #[inline]
    pub fn admit(&mut self, race_on: Option<bool>) -> bool {
        match race_on {
            Some(true) => {
                self.racing = true;
                true
            }
            Some(false) => std::mem::replace(&mut self.racing, false),
            None => true,
        }
    }
}

/// `max_rate`: at most one frame per interval. A frame that comes early waits,
/// replaced by any newer one, until its slot comes: the newest is always sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimiter {
    interval: Option<Duration>,
    next_due: Option<Instant>,
}

impl RateLimiter {
    /// A limiter for `max_rate` frames per second; 0 passes everything.
    pub fn new(max_rate: u32) -> Self {
        RateLimiter {
            interval: (max_rate > 0).then(|| Duration::from_secs(1) / max_rate),
            next_due: None,
        }
    }

    /// True when a frame may be sent at `now`.
    #[inline]
    pub fn is_due(&self, now: Instant) -> bool {
        self.next_due.is_none_or(|due| now >= due)
    }

    /// Records a frame sent at `now`.
    #[inline]
    pub fn sent(&mut self, now: Instant) {
        if let Some(interval) = self.interval {
            // Keep the cadence (a late wake-up doesn't lower the rate), but don't
            // bank slots across a pause.
            let next = self.next_due.map_or(now, |due| due + interval);
            self.next_due = Some(if next <= now { now + interval } else { next });
        }
    }

    /// When the next frame may go, if a limit is set and a frame went already.
    pub fn next_due(&self) -> Option<Instant> {
        self.next_due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn race_filter_passes_racing_and_the_first_frame_after() {
        let mut f = RaceFilter::default();
        let decisions: Vec<bool> = [false, true, true, false, false, true, false, false]
            .iter()
            .map(|&r| f.admit(Some(r)))
            .collect();
        assert_eq!(
            decisions,
            [false, true, true, true, false, true, true, false]
        );
        assert!(f.admit(None));
    }

    #[test]
    fn rate_limiter_spaces_frames_and_does_not_bank_slots() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut r = RateLimiter::new(10); // 100 ms
        assert!(r.is_due(t0));
        r.sent(t0);
        assert!(!r.is_due(t0 + ms(50)));
        assert_eq!(r.next_due(), Some(t0 + ms(100)));
        assert!(r.is_due(t0 + ms(100)));
        r.sent(t0 + ms(103)); // a late wake-up keeps the cadence
        assert_eq!(r.next_due(), Some(t0 + ms(200)));
        r.sent(t0 + ms(900)); // after a pause, one interval from now
        assert_eq!(r.next_due(), Some(t0 + ms(1000)));
    }

    #[test]
    fn zero_rate_passes_everything() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(0);
        for _ in 0..3 {
            assert!(r.is_due(t0));
            r.sent(t0);
        }
        assert_eq!(r.next_due(), None);
    }
}
