//! Each destination's latency in fixed log-linear histograms: recording
//! allocates nothing, percentiles are the top of their bucket (see
//! [`LatencyHistogram`]).

use std::fmt;
use std::time::{Duration, Instant};

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// Sub-buckets per power of two: a latency is kept to within 1/16 (6 %) of
/// its value, and to the microsecond below 32 µs.
pub(super) const SUB_BITS: u32 = 4;
pub(super) const SUB: usize = 1 << SUB_BITS;
/// Latencies of 2^32 µs (71 minutes) and more share the last bucket.
pub(super) const TOP_BITS: u32 = 32;
/// Buckets of a [`LatencyHistogram`]: `2 * SUB` of one microsecond each, then
/// `SUB` for each power of two up to `TOP_BITS`.
pub(super) const BUCKETS: usize = 2 * SUB + (TOP_BITS - SUB_BITS - 1) as usize * SUB;

/// The bucket of a latency of `us` microseconds.
pub(super) fn bucket(us: u64) -> usize {
    let us = us.min((1 << TOP_BITS) - 1);
    if us < 2 * SUB as u64 {
        return us as usize;
    }
    let shift = 63 - us.leading_zeros() - SUB_BITS;
    2 * SUB + (shift as usize - 1) * SUB + ((us >> shift) as usize - SUB)
}

/// The largest latency, in microseconds, that bucket `i` holds.
pub(super) fn bucket_top(i: usize) -> u64 {
    if i < 2 * SUB {
        return i as u64;
    }
    let k = i - 2 * SUB;
    let shift = k / SUB + 1;
    let top = (k % SUB + SUB) as u64;
    ((top + 1) << shift) - 1
}

// The last bucket holds the largest latency kept apart.
const _: () = assert!(BUCKETS == 464);

/// Latencies counted in fixed log-linear buckets, as HDR histograms keep
/// them: made once, recording never allocates. Percentiles are the top of
/// their bucket (at most 6 % above the true value), the maximum is exact.
#[derive(Clone)]
pub struct LatencyHistogram {
    counts: [u32; BUCKETS],
    count: u64,
    max_us: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: [0; BUCKETS],
            count: 0,
            max_us: 0,
        }
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LatencyHistogram({:?})", self.figures())
    }
}

impl LatencyHistogram {
    /// Counts one latency.
    #[inline]
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let slot = &mut self.counts[bucket(us)];
        *slot = slot.saturating_add(1);
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    /// p50, p99 and max of what was counted.
    pub fn figures(&self) -> Latency {
        Self::figures_of(&[self])
    }

    /// p50, p99 and max of what `all` counted together: a latency `p`
    /// percent of them are at or below (nearest rank), as the top of its
    /// bucket but never above the maximum. Nothing is allocated.
    fn figures_of(all: &[&LatencyHistogram]) -> Latency {
        let count: u64 = all.iter().map(|h| h.count).sum();
        if count == 0 {
            return Latency::default();
        }
        let max_us = all.iter().map(|h| h.max_us).max().unwrap_or(0);
        let percentile = |p: u64| {
            let rank = (count * p).div_ceil(100).max(1);
            let mut seen = 0;
            for i in 0..BUCKETS {
                seen += all.iter().map(|h| u64::from(h.counts[i])).sum::<u64>();
                if seen >= rank {
                    return Duration::from_micros(bucket_top(i).min(max_us));
                }
            }
            Duration::from_micros(max_us)
        };
        Latency {
            count,
            p50: percentile(50),
            p99: percentile(99),
            max: Duration::from_micros(max_us),
        }
    }

    /// Adds what `other` counted.
    fn absorb(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.count += other.count;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Forgets everything counted.
    pub fn clear(&mut self) {
        *self = LatencyHistogram::default();
    }
}

/// Which stretch of time latency figures cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyWindow {
    /// Since the last periodic summary (since the start before the first);
    /// only taking a summary starts a new interval, so other readers (a
    /// dashboard, a page) don't disturb the summary's figures.
    Interval,
    /// Since the destination started.
    Run,
}

/// One destination's latencies, over the summary interval and over the run.
/// A send is counted once, in the interval's histogram; the intervals before
/// it are added up when a new one starts, so the run's figures are those of
/// both together (issue 26: one histogram's lines per send, not two).
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    interval: LatencyHistogram,
    /// Every interval before the current one.
    before: LatencyHistogram,
}

impl Latencies {
    /// Counts a frame that reached the machine at `received` and whose send
    /// returned at `sent`.
    #[inline]
    pub fn record(&mut self, received: Instant, sent: Instant) {
        self.interval
            .record(sent.saturating_duration_since(received));
    }

    /// The figures over `window`.
    pub fn figures(&self, window: LatencyWindow) -> Latency {
        match window {
            LatencyWindow::Interval => self.interval.figures(),
            LatencyWindow::Run => LatencyHistogram::figures_of(&[&self.before, &self.interval]),
        }
    }

    /// A summary was taken: the interval starts again.
    pub fn new_interval(&mut self) {
        self.before.absorb(&self.interval);
        self.interval.clear();
    }
}

/// A destination's latency over a window: from the moment each datagram
/// reached the machine to the return of the send that delivered it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    /// Frames measured (sent in the window).
    pub count: u64,
    /// Half of them took at most this.
    pub p50: Duration,
    /// 99 % took at most this.
    pub p99: Duration,
    /// The longest.
    pub max: Duration,
}

impl Serialize for Latency {
    /// `{"p50":…,"p99":…,"max":…,"count":…}` in whole microseconds; `null`
    /// figures when nothing was sent.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let us = |d: Duration| {
            (self.count > 0).then(|| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        };
        let mut st = s.serialize_struct("Latency", 4)?;
        st.serialize_field("p50", &us(self.p50))?;
        st.serialize_field("p99", &us(self.p99))?;
        st.serialize_field("max", &us(self.max))?;
        st.serialize_field("count", &self.count)?;
        st.end()
    }
}
