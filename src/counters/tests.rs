//! The counters' unit tests.

use std::time::{Duration, Instant};

use super::latency::*;
use super::*;
#[test]
fn a_status_follows_the_newest_sends_and_errors_and_recovery_is_said_once() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut h = Health::default();
    assert_eq!(h.status(at(0)), Status::Idle, "nothing sent yet");
    assert_eq!(h.sent(at(10)), None);
    assert_eq!(h.status(at(20)), Status::Ok);
    // A closed port: every other send is refused.
    for i in 0..10 {
        h.failed(SendErrorKind::Refused, at(100 + i * 20));
        assert_eq!(h.sent(at(110 + i * 20)), None, "refused 10 ms ago");
    }
    assert_eq!(h.status(at(400)), Status::Refused);
    // The tool listens: sends go, and a second after the last refusal
    // the destination is receiving again, once.
    assert_eq!(h.sent(at(900)), None, "not yet a second without a refusal");
    assert_eq!(h.sent(at(1_281)), Some(10));
    assert_eq!(h.sent(at(1_300)), None, "said once");
    assert_eq!(h.status(at(1_300)), Status::Ok);
    // Another error is failing for 5 s, then the status follows the sends.
    h.failed(SendErrorKind::Unreachable, at(2_000));
    assert_eq!(h.status(at(2_001)), Status::Failing);
    assert_eq!(h.status(at(6_999)), Status::Failing);
    assert_eq!(
        h.status(at(7_000)),
        Status::Idle,
        "nothing sent since 1.3 s"
    );
    // Refused and nothing sent since: refused for 5 s, then idle.
    h.failed(SendErrorKind::Refused, at(8_000));
    assert_eq!(h.status(at(12_999)), Status::Refused);
    assert_eq!(h.status(at(13_000)), Status::Idle);
}

#[test]
fn every_latency_falls_in_the_bucket_that_holds_it() {
    let mut previous_top = None;
    for i in 0..BUCKETS {
        let top = bucket_top(i);
        let bottom = previous_top.map_or(0, |t| t + 1);
        assert!(bottom <= top, "bucket {i}");
        assert_eq!(bucket(bottom), i, "the bottom of bucket {i}: {bottom} µs");
        assert_eq!(bucket(top), i, "the top of bucket {i}: {top} µs");
        // Exact to the microsecond below 32 µs, then within 1/16.
        if top >= 2 * SUB as u64 {
            assert!((top - bottom + 1) * 16 <= bottom, "bucket {i} too wide");
        } else {
            assert_eq!(top, bottom);
        }
        previous_top = Some(top);
    }
    assert_eq!(previous_top, Some((1 << TOP_BITS) - 1));
    assert_eq!(bucket(u64::MAX), BUCKETS - 1, "longer ones share the last");
}

#[test]
fn latency_percentiles_are_within_a_bucket_and_the_max_is_exact() {
    let mut h = LatencyHistogram::default();
    assert_eq!(h.figures(), Latency::default());
    // 1..=1000 µs: p50 is 500 µs, p99 990 µs, max 1000 µs.
    for us in 1..=1_000 {
        h.record(Duration::from_micros(us));
    }
    let l = h.figures();
    assert_eq!(l.count, 1_000);
    assert_eq!(l.max, Duration::from_micros(1_000));
    for (got, want) in [(l.p50, 500), (l.p99, 990)] {
        let got = got.as_micros() as u64;
        assert!(
            got >= want && got * 16 <= want * 17,
            "{got} µs for {want} µs"
        );
    }
    // One slow frame among fast ones: p99 stays fast, max shows it.
    let mut h = LatencyHistogram::default();
    for _ in 0..199 {
        h.record(Duration::from_micros(20));
    }
    h.record(Duration::from_millis(136));
    let l = h.figures();
    assert_eq!(
        (l.p50, l.p99),
        (Duration::from_micros(20), Duration::from_micros(20))
    );
    assert_eq!(l.max, Duration::from_millis(136));
    h.clear();
    assert_eq!(h.figures().count, 0);
}

#[test]
fn the_runs_latency_is_every_interval_added_up() {
    let t0 = Instant::now();
    let (mut l, mut whole) = (Latencies::default(), LatencyHistogram::default());
    // Three intervals of different shapes: the run's figures are those of
    // one histogram that counted everything.
    for (interval, range) in [(0, 1..400u64), (1, 2_000..2_100), (2, 7..9)] {
        if interval > 0 {
            l.new_interval();
        }
        for us in range {
            let latency = Duration::from_micros(us * 3);
            l.record(t0, t0 + latency);
            whole.record(latency);
        }
    }
    assert_eq!(l.figures(LatencyWindow::Run), whole.figures());
    assert_eq!(l.figures(LatencyWindow::Run).count, 399 + 100 + 2);
    assert_eq!(l.figures(LatencyWindow::Interval).count, 2);
    let interval = l.figures(LatencyWindow::Interval);
    assert_eq!(
        (interval.p50, interval.max),
        (Duration::from_micros(21), Duration::from_micros(24)),
        "the last interval alone: 21 and 24 µs"
    );
}

#[test]
fn only_a_summary_starts_a_new_latency_interval() {
    let t0 = Instant::now();
    let mut l = Latencies::default();
    l.record(t0, t0 + Duration::from_micros(40));
    l.record(t0 + Duration::from_millis(5), t0);
    assert_eq!(l.figures(LatencyWindow::Interval).count, 2);
    assert_eq!(
        l.figures(LatencyWindow::Interval).max,
        Duration::from_micros(40),
        "a send before the receive time counts 0"
    );
    l.new_interval();
    l.record(t0, t0 + Duration::from_micros(7));
    let interval = l.figures(LatencyWindow::Interval);
    assert_eq!(
        (interval.count, interval.max),
        (1, Duration::from_micros(7))
    );
    assert_eq!(l.figures(LatencyWindow::Run).count, 3);
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
