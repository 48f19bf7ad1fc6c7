//! The counters' unit tests: histograms, windows, health and summaries, checked
//! field by field.

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
fn drops_are_listed_only_when_nonzero() {
    let mut s = DestinationStats {
        sent: 10,
        ..Default::default()
    };
    s.drop(DropReason::NotRacing);
    s.drop(DropReason::NotRacing);
    s.send_errors.add(SendErrorKind::Refused);
    s.send_errors.add(SendErrorKind::Unreachable);
    assert_eq!(
        Drops(&s).to_string(),
        ", 2 not racing, 1 send errors: unreachable"
    );
    assert_eq!(Refusals(&s).to_string(), " (1 refused: nothing listening)");
    assert_eq!(s.send_errors.total(), 2);
    assert_eq!(Refusals(&DestinationStats::default()).to_string(), "");
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
fn latency_reads_as_json_and_as_text() {
    let l = Latency {
        count: 360,
        p50: Duration::from_micros(23),
        p99: Duration::from_micros(870),
        max: Duration::from_micros(3_140),
    };
    assert_eq!(
        serde_json::to_string(&l).unwrap(),
        r#"{"p50":23,"p99":870,"max":3140,"count":360}"#
    );
    assert_eq!(LatencyText(&l).to_string(), "0.02/0.87/3.1");
    assert_eq!(
        serde_json::to_string(&Latency::default()).unwrap(),
        r#"{"p50":null,"p99":null,"max":null,"count":0}"#,
        "nothing sent: no figures"
    );
}

#[test]
fn stale_frames_are_listed_with_the_other_drops() {
    let mut s = DestinationStats::default();
    s.drop(DropReason::Stale);
    s.drop(DropReason::RateLimited);
    assert_eq!(Drops(&s).to_string(), ", 1 rate-limited, 1 stale");
    assert_eq!(DropReason::Stale.key(), "stale");
}

#[test]
fn an_mqtt_destination_shows_its_settings_and_never_its_password() {
    use crate::output::mqtt::{Broker, Secret};
    let mut settings = MqttSettings::new(Broker::parse("mqtt://b").unwrap(), "league/7");
    settings.username = Some("driver7".to_owned());
    settings.password = Some(Secret::new("s3cret"));
    let mut s = DestinationStats {
        received: 10,
        sent: 4,
        ..Default::default()
    };
    s.drop(DropReason::BrokerUnavailable);
    s.drop(DropReason::RateLimited);
    s.held = 4;
    let d = DestinationSnapshot {
        name: "league".to_owned(),
        addr: None,
        addr_text: "mqtt://b".to_owned(),
        output: Output::Text(crate::output::Encoding::Json),
        fields: vec!["Speed".to_owned()],
        mqtt: Some(MqttRow {
            published: 1,
            not_published: 3,
            connections: 2,
            ..MqttRow::of(&settings)
        }),
        only_race_on: false,
        max_rate: 20,
        max_age: None,
        status: Status::Failing,
        stats: s,
        latency: Latency::default(),
    };
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["addr"], "mqtt://b");
    assert_eq!(json["resolved"], serde_json::Value::Null);
    assert_eq!(json["output"], "json");
    assert_eq!(json["fields"], serde_json::json!(["Speed"]));
    assert_eq!(json["topic"], "league/7");
    assert_eq!(json["username"], "driver7");
    assert_eq!(json["password_set"], true);
    assert_eq!(json["password_env"], serde_json::Value::Null);
    assert_eq!(json["broker_unavailable"], 1);
    assert_eq!(json["published"], 1);
    assert_eq!(json["not_published"], 3);
    assert_eq!(json["connections"], 2);
    assert_eq!(json["status"], "failing");
    assert!(!json.to_string().contains("s3cret"), "{json}");
    assert_eq!(
        Drops(&d.stats).to_string(),
        ", 1 rate-limited, 1 broker unavailable"
    );
    let mut snapshot = Snapshot::empty();
    snapshot.destinations.push(d);
    assert!(
        snapshot.to_string().contains(
            "\n  league (mqtt://b), json: sent 4, 1 rate-limited, 1 broker unavailable, 3 not \
                 published (its connection ended or its queue was full first)"
        ),
        "{snapshot}"
    );
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
