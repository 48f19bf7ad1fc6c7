//! Per-destination decisions, pure and allocation-free: IsRaceOn, rate and age.

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

/// `max_age`: a frame older than this when it would be sent is stale (issue
/// 15). Its age counts from the moment it reached the machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgeLimit(Option<Duration>);

impl AgeLimit {
    /// A limit of `max_age`; `None` lets frames of any age through.
    pub const fn new(max_age: Option<Duration>) -> Self {
        AgeLimit(max_age)
    }

    /// True when a limit is set.
    #[inline]
    pub const fn is_set(self) -> bool {
        self.0.is_some()
    }

    /// True when a frame received at `received` is too old to send at `now`.
    #[inline]
    pub fn is_stale(self, received: Instant, now: Instant) -> bool {
        self.0
            .is_some_and(|max| now.saturating_duration_since(received) > max)
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
    fn age_limit_passes_a_frame_up_to_its_limit_and_no_older() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let limit = AgeLimit::new(Some(ms(50)));
        assert!(limit.is_set());
        assert!(!limit.is_stale(t0, t0));
        assert!(
            !limit.is_stale(t0, t0 + ms(50)),
            "exactly the limit is fresh"
        );
        assert!(limit.is_stale(t0, t0 + ms(50) + Duration::from_nanos(1)));
        // A receive time after `now` (clocks read in another order) is fresh.
        assert!(!limit.is_stale(t0 + ms(5), t0));
        let off = AgeLimit::default();
        assert!(!off.is_set());
        assert!(!off.is_stale(t0, t0 + Duration::from_secs(3_600)));
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
