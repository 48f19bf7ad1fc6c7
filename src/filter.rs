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

/// `max_rate`: at most `max_rate` frames a second in the long run, and a
/// frame that may go goes at once (issue 30).
///
/// The generic cell rate algorithm with a tolerance of one interval: the
/// limiter keeps the time the next frame is due at the exact rate (`tat`,
/// its theoretical arrival time), and a frame may go when it comes no more
/// than one interval before that. A stream a little faster than the limit
/// (a game at 60.3 frames a second into `max_rate = 60`) then goes through
/// undelayed until it has used up that one interval of slack, loses one
/// frame, and goes on undelayed: never held for a growing part of a frame,
/// as a fixed cadence held it (up to a whole frame, for as long as it ran).
///
/// A frame that comes too early waits, replaced by any newer one, and goes one
/// and a half intervals after it came unless a newer frame went first: the
/// newest frame always reaches the destination. Not one interval: a game's
/// frames come a little early or late, and a frame that waited one interval
/// would go just before the next (late) frame, delaying it and every frame
/// after it by a part of a frame again (1.6 % of frames a whole frame late, fed
/// 60.3 frames a second with ±1 ms of jitter); half an interval more lets the
/// next frame replace it. A frame that comes a whole interval after the last
/// one sent always goes at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimiter {
    interval: Option<Duration>,
    /// When the next frame is due at the exact rate; `None` before the first.
    tat: Option<Instant>,
}

impl RateLimiter {
    /// A limiter for `max_rate` frames per second; 0 passes everything.
    pub fn new(max_rate: u32) -> Self {
        RateLimiter {
            interval: (max_rate > 0).then(|| Duration::from_secs(1) / max_rate),
            tat: None,
        }
    }

    /// True when a frame that comes at `now` may go at once.
    #[inline]
    pub fn admits(&self, now: Instant) -> bool {
        match (self.interval, self.tat) {
            (Some(interval), Some(tat)) => now + interval >= tat,
            _ => true,
        }
    }

    /// Records a frame sent at `now`.
    #[inline]
    pub fn sent(&mut self, now: Instant) {
        if let Some(interval) = self.interval {
            // A pause banks no more than the one interval of tolerance.
            let from = self.tat.map_or(now, |tat| tat.max(now));
            self.tat = Some(from + interval);
        }
    }

    /// When a frame held since `held_at` goes if no newer one went first: one
    /// and a half intervals after it came. By then it is always admitted: the
    /// last frame sent, no later than `held_at`, admitted one more at most one
    /// interval after itself. At once when the limiter would admit any frame:
    /// no limit, or a new limiter that sent nothing yet (a reload changed
    /// `max_rate` while the frame waited).
    #[inline]
    pub fn release_at(&self, held_at: Instant) -> Instant {
        match (self.interval, self.tat) {
            (Some(interval), Some(_)) => held_at + interval + interval / 2,
            _ => held_at,
        }
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

    /// What the core does with a limiter: a frame it admits goes at once,
    /// one it doesn't waits (replaced by any newer one) until
    /// [`RateLimiter::release_at`]. Returns each frame sent as (arrival,
    /// sent at), in order, and how many were replaced.
    fn drive(max_rate: u32, arrivals: &[Instant]) -> (Vec<(Instant, Instant)>, usize) {
        let mut r = RateLimiter::new(max_rate);
        let mut held: Option<Instant> = None;
        let mut sent = Vec::new();
        let mut replaced = 0;
        for &at in arrivals {
            if let Some(h) = held {
                let release = r.release_at(h);
                if release <= at {
                    assert!(r.admits(release), "a held frame is admitted when it goes");
                    r.sent(release);
                    sent.push((h, release));
                    held = None;
                }
            }
            if r.admits(at) {
                replaced += usize::from(held.take().is_some());
                r.sent(at);
                sent.push((at, at));
            } else {
                replaced += usize::from(held.replace(at).is_some());
            }
        }
        if let Some(h) = held {
            sent.push((h, r.release_at(h)));
        }
        (sent, replaced)
    }

    /// `count` frames `period` apart from `t0`, each moved by up to
    /// ±`jitter_us` (a fixed pseudo-random sequence).
    fn stream(t0: Instant, count: u32, period: Duration, jitter_us: i64) -> Vec<Instant> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..count)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let j = if jitter_us == 0 {
                    0
                } else {
                    (x % (2 * jitter_us as u64 + 1)) as i64 - jitter_us
                };
                let at = t0 + Duration::from_millis(10) + period * i;
                if j >= 0 {
                    at + Duration::from_micros(j as u64)
                } else {
                    at - Duration::from_micros(j.unsigned_abs())
                }
            })
            .collect()
    }

    fn delays_ms(sent: &[(Instant, Instant)]) -> Vec<f64> {
        let mut d: Vec<f64> = sent
            .iter()
            .map(|(at, went)| (*went - *at).as_secs_f64() * 1e3)
            .collect();
        d.sort_by(f64::total_cmp);
        d
    }

    /// The most frames sent within any `window` (from a send).
    fn most_in(sent: &[(Instant, Instant)], window: Duration) -> usize {
        let times: Vec<Instant> = sent.iter().map(|(_, went)| *went).collect();
        (0..times.len())
            .map(|i| {
                times[i..]
                    .iter()
                    .take_while(|&&t| t < times[i] + window)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn a_stream_slower_than_the_limit_or_at_it_goes_through_at_once() {
        let t0 = Instant::now();
        for (hz, jitter_us) in [(50.0, 1_000), (60.0, 0), (59.9, 1_000)] {
            let period = Duration::from_secs_f64(1.0 / hz);
            let arrivals = stream(t0, 3_600, period, jitter_us);
            let (sent, replaced) = drive(60, &arrivals);
            let d = delays_ms(&sent);
            assert_eq!(
                (sent.len(), replaced, d[d.len() - 1]),
                (3_600, 0, 0.0),
                "{hz} frames/s ±{jitter_us} µs into max_rate 60"
            );
        }
    }

    /// Issue 30: a game a little faster than the limit, with jitter, loses a
    /// frame now and then and delays none; the old fixed cadence held half
    /// of them for 6 ms or more.
    #[test]
    fn issue30_a_stream_a_little_faster_than_the_limit_is_never_held() {
        let t0 = Instant::now();
        let period = Duration::from_secs_f64(1.0 / 60.3);
        // A minute of frames.
        let arrivals = stream(t0, 3_618, period, 1_000);
        let (sent, replaced) = drive(60, &arrivals);
        let d = delays_ms(&sent);
        let p50 = d[d.len() / 2];
        let held = d.iter().filter(|&&ms| ms > 0.0).count();
        assert_eq!(p50, 0.0, "p50 of the delay, ms");
        // Only the stream's last frame waits (nothing newer came).
        assert!(held <= 1, "{held} frames held: {:?}", &d[d.len() - 3..]);
        // The minute's frames at 60 a second, and one frame of tolerance.
        let span = sent[sent.len() - 1].1 - sent[0].1;
        let most = (span.as_secs_f64() * 60.0).floor() as usize + 2;
        assert!(sent.len() <= most, "{} sent in {span:?}", sent.len());
        assert_eq!(sent.len() + replaced, arrivals.len());
        assert!(replaced >= 17, "{replaced} replaced");
    }

    /// A game at 360 frames a second into `max_rate = 60`: 60 a second, each
    /// sent as it came, never more than two within an interval.
    #[test]
    fn a_stream_much_faster_than_the_limit_is_thinned_to_it() {
        let t0 = Instant::now();
        let arrivals = stream(t0, 3_600, Duration::from_secs(1) / 360, 200);
        let (sent, replaced) = drive(60, &arrivals);
        assert_eq!(sent.len() + replaced, 3_600);
        // Ten seconds: 600 slots, plus the first frame's and the tolerance.
        assert!((598..=602).contains(&sent.len()), "{}", sent.len());
        let interval = Duration::from_secs(1) / 60;
        assert_eq!(most_in(&sent, interval), 2, "one frame of tolerance");
        assert!(most_in(&sent, interval * 60) <= 61);
        // Every frame but the last went as it came.
        let d = delays_ms(&sent);
        assert_eq!(d[d.len() - 2], 0.0);
    }

    /// Bursts (a stall in the game, then the frames of it at once) never go
    /// out faster than the limit allows, and the newest of each goes.
    #[test]
    fn a_burst_sends_two_at_most_and_then_the_newest() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Ten frames within 1 ms, every 100 ms.
        let arrivals: Vec<Instant> = (0..10u32)
            .flat_map(|b| {
                (0..10u32).map(move |i| t0 + ms(100) * b + Duration::from_micros(100) * i)
            })
            .collect();
        let (sent, replaced) = drive(60, &arrivals);
        assert_eq!(sent.len() + replaced, 100);
        let interval = Duration::from_secs(1) / 60;
        assert!(most_in(&sent, interval) <= 2);
        // In each burst the first goes, then one waits and is replaced until
        // the burst's last, which goes one and a half intervals after it came.
        for b in 0..10u32 {
            let last = t0 + ms(100) * b + Duration::from_micros(900);
            assert!(
                sent.iter()
                    .any(|&(at, went)| at == last && went <= last + interval * 3 / 2),
                "burst {b}'s newest frame"
            );
        }
    }

    /// After a pause the first frame goes at once, and the pause banks at
    /// most one interval: two frames at once, then the rate.
    #[test]
    fn after_a_pause_the_first_frame_goes_at_once_and_no_slots_are_banked() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut r = RateLimiter::new(10); // 100 ms
        assert!(r.admits(t0));
        r.sent(t0);
        assert!(r.admits(t0 + ms(1)), "one frame of tolerance");
        r.sent(t0 + ms(1));
        assert!(!r.admits(t0 + ms(99)));
        assert_eq!(r.release_at(t0 + ms(50)), t0 + ms(200));
        assert!(
            r.admits(t0 + ms(100)),
            "a whole interval after the last sent"
        );
        r.sent(t0 + ms(100));
        // A ten-second pause.
        let back = t0 + ms(10_100);
        assert!(r.admits(back));
        r.sent(back);
        assert!(r.admits(back + ms(1)));
        r.sent(back + ms(1));
        assert!(!r.admits(back + ms(2)), "the pause banked no more");
        assert!(r.admits(back + ms(100)));
    }

    /// Whatever the arrivals, a frame that comes a whole interval after the
    /// last one sent goes at once, and no two intervals carry more than
    /// three frames.
    #[test]
    fn a_frame_a_whole_interval_after_the_last_sent_is_never_held() {
        let t0 = Instant::now();
        let mut x: u64 = 7;
        let mut at = t0;
        let mut arrivals = Vec::new();
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            at += Duration::from_micros(x % 40_000);
            arrivals.push(at);
        }
        let interval = Duration::from_secs(1) / 60;
        let (sent, _) = drive(60, &arrivals);
        let mut last_sent: Option<Instant> = None;
        let mut k = 0;
        for &a in &arrivals {
            while k < sent.len() && sent[k].1 <= a {
                last_sent = Some(sent[k].1);
                k += 1;
            }
            if last_sent.is_none_or(|s| a >= s + interval) {
                assert!(
                    sent.iter().any(|&(came, went)| came == a && went == a),
                    "held a frame {:?} after the last sent",
                    last_sent.map(|s| a - s)
                );
            }
        }
        assert!(most_in(&sent, interval * 2) <= 3);
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
            assert!(r.admits(t0));
            r.sent(t0);
        }
        assert_eq!(
            r.release_at(t0),
            t0,
            "a frame held from before goes at once"
        );
        let fresh = RateLimiter::new(10);
        assert_eq!(
            fresh.release_at(t0),
            t0,
            "a new limiter (a reload changed max_rate) lets a waiting frame go at once"
        );
    }
}
