use super::*;
use crate::counters::SendErrorKind;

fn from() -> SocketAddr {
    "127.0.0.1:5555".parse().unwrap()
}

#[test]
fn rate_is_packets_over_the_window_and_drops_to_zero_in_silence() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut m = Model::new(Input::Auto, "test");
    for i in 0..10 {
        m.on_datagram(at(i * 20), from(), &[0; 311]);
    }
    m.tick(at(200));
    assert_eq!(m.rate_hz(), 0.0, "too early to tell");
    for i in 10..25 {
        m.on_datagram(at(i * 20), from(), &[0; 311]);
    }
    m.tick(at(500));
    assert_eq!(m.rate_hz(), 50.0, "25 packets in the first 500 ms");
    for i in 25..60 {
        m.on_datagram(at(i * 20), from(), &[0; 311]);
    }
    m.tick(at(1_200));
    assert_eq!(m.rate_hz(), 50.0, "60 packets in 1.2 s");
    for i in 0..30 {
        m.on_datagram(at(1_200 + i * 33), from(), &[0; 311]);
    }
    m.tick(at(2_200));
    assert_eq!(m.rate_hz(), 30.0, "the next window alone");
    assert_eq!(m.packets(), 90);
    assert_eq!(m.format(), Some((Format::Fm7, true)));
    m.tick(at(5_000));
    assert_eq!(m.rate_hz(), 0.0);
    assert_eq!(m.silent_for(), Some(Duration::from_millis(2_843)));
    assert_eq!(m.sender(), Some(from()));
}

/// Two programs sending at once: the car is the first one's until it
/// has been silent for FOLLOW_SILENCE, then the other's (seen on the page
/// as a map drawing two drives at once).
#[test]
fn with_two_senders_the_car_is_one_senders_until_it_falls_silent() {
    let packet = |speed: f32| {
        let mut buf = [0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        p.set_speed(speed).unwrap();
        buf
    };
    let (game, other): (SocketAddr, SocketAddr) = (from(), "127.0.0.1:6666".parse().unwrap());
    let speed = |m: &Model| m.car().and_then(|c| c.speed_kmh).map(|v| v.get().round());
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut m = Model::new(Input::Fixed(Format::Fh6), "test");
    for i in 0..10 {
        m.on_datagram(at(i * 20), game, &packet(10.0));
        m.on_datagram(at(i * 20 + 10), other, &packet(30.0));
        assert_eq!(speed(&m), Some(36.0), "packet {i}");
    }
    assert_eq!(m.packets(), 10);
    assert_eq!(m.sender(), Some(game));
    // The game stops; the other program's stream is shown once the game
    // has been silent for FOLLOW_SILENCE.
    let quiet = 180 + crate::counters::FOLLOW_SILENCE.as_millis() as u64;
    m.on_datagram(at(quiet - 1), other, &packet(30.0));
    assert_eq!(speed(&m), Some(36.0));
    m.on_datagram(at(quiet), other, &packet(30.0));
    assert_eq!(speed(&m), Some(108.0));
    assert_eq!(m.sender(), Some(other));
    m.on_datagram(at(quiet + 10), game, &packet(10.0));
    assert_eq!(
        speed(&m),
        Some(108.0),
        "the game is not followed again at once"
    );

    // A model started beside a relay that follows `other` shows it, even
    // when the game's datagram comes first.
    let mut m = Model::new(Input::Fixed(Format::Fh6), "test");
    m.follow(other, at(0));
    m.on_datagram(at(1), game, &packet(10.0));
    assert_eq!(speed(&m), None);
    m.on_datagram(at(2), other, &packet(30.0));
    assert_eq!(speed(&m), Some(108.0));
    m.on_datagram(at(3), game, &packet(10.0));
    assert_eq!(speed(&m), Some(108.0));
    assert_eq!(m.sender(), Some(other));
}

use fixtures::snapshot;

fn destination(name: &str, sent: u64) -> DestinationSnapshot {
    fixtures::destination(name, crate::config::Output::Format(Format::Fh5), sent)
}

#[track_caller]
fn rates(rows: &[DestinationRow]) -> Vec<(&str, f64)> {
    rows.iter()
        .map(|r| (r.name.as_str(), r.packets_per_sec))
        .collect()
}

#[test]
fn destination_rates_count_over_the_last_second_of_snapshots() {
    let mut r = DestinationRates::default();
    let rows = r.rows(&snapshot(0, vec![destination("simhub", 0)]));
    assert_eq!(rates(&rows), [("simhub", 0.0)], "nothing to compare yet");
    // 15 in 250 ms.
    let rows = r.rows(&snapshot(250, vec![destination("simhub", 15)]));
    assert_eq!(rates(&rows), [("simhub", 60.0)]);
    // Still from 0 ms: 60 in 1 s.
    let rows = r.rows(&snapshot(1_000, vec![destination("simhub", 60)]));
    assert_eq!(rates(&rows), [("simhub", 60.0)]);
    // From 250 ms, the newest a second old: 120 - 15 in 1.25 s; a destination
    // added by a reload counts from zero.
    let rows = r.rows(&snapshot(
        1_500,
        vec![destination("simhub", 120), destination("new", 30)],
    ));
    assert_eq!(rates(&rows), [("simhub", 84.0), ("new", 24.0)]);
    // The counters of another run: start again.
    let rows = r.rows(&snapshot(100, vec![destination("simhub", 5)]));
    assert_eq!(rates(&rows), [("simhub", 0.0)]);
}

#[test]
fn a_destination_row_names_its_counters() {
    let mut d = destination("motion", 40);
    d.stats.drop(DropReason::NotRacing);
    d.stats.drop(DropReason::RateLimited);
    d.stats.drop(DropReason::RateLimited);
    d.stats.drop(DropReason::Untranslatable);
    d.stats.drop(DropReason::Stale);
    d.latency = Latency {
        count: 39,
        p50: Duration::from_micros(30),
        p99: Duration::from_micros(900),
        max: Duration::from_millis(2),
    };
    for _ in 0..3 {
        d.stats.send_errors.add(SendErrorKind::Refused);
    }
    d.stats.send_errors.add(SendErrorKind::Other);
    let row = DestinationRow::of(&d, 60.0);
    assert_eq!(
        row,
        DestinationRow {
            name: "motion".to_owned(),
            output: "fh5".to_owned(),
            packets_per_sec: 60.0,
            sent: 40,
            filtered: 1,
            rate_limited: 2,
            errors: 4,
            problems: "3 refused (nothing listening), 1 other, 1 untranslatable".to_owned(),
            stale: 1,
            latency: d.latency,
        }
    );
    assert_eq!(DestinationRow::of(&destination("ok", 1), 0.0).problems, "");
}

#[test]
fn datagrams_of_another_format_are_counted_and_explained() {
    let mut m = Model::new(Input::Fixed(Format::Fh6), "test");
    m.on_datagram(Instant::now(), from(), &[0; 311]);
    assert_eq!(m.ignored(), 1);
    assert!(m.car().is_none());
    assert_eq!(
        m.why_ignored().unwrap(),
        "1 datagram ignored, not in the fh6 format (324 bytes); it is 311 bytes: fm7 \
             — use --format fm7 or auto (the last from 127.0.0.1:5555)"
    );
}

/// The Car is what the web page serialises: every value a number or null.
#[test]
fn a_car_serialises_with_null_for_what_cannot_be_shown() {
    let mut buf = [0u8; 324];
    let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
    p.set_is_race_on(1);
    p.set_speed(27.5).unwrap();
    p.set_current_engine_rpm(f32::NAN);
    p.set_engine_max_rpm(8_000.0);
    p.set_position_x(-1_234.5).unwrap();
    p.set_position_y(f32::INFINITY).unwrap();
    p.set_position_z(7_890.125).unwrap();
    p.set_lap_number(0).unwrap();
    p.set_best_lap(83.25).unwrap();
    p.set_last_lap(1.0e30).unwrap();
    p.set_tire_temp(Wheels::from_array([212.0, f32::NAN, 32.0, 32.0]))
        .unwrap();
    let car = Car::new(&Telemetry::decode(&p));
    let json = serde_json::to_value(car).unwrap();
    assert_eq!(json["format"], "fh6");
    assert_eq!(json["racing"], true);
    assert_eq!(json["speed_kmh"].as_f64().unwrap().round(), 99.0);
    assert_eq!(json["rpm"], serde_json::Value::Null);
    assert_eq!(json["redline_rpm"], 8_000.0);
    assert_eq!(json["rev_fraction"], serde_json::Value::Null);
    assert_eq!(json["gear"], "R");
    assert_eq!(json["lap"], 1);
    assert_eq!(json["best_lap"], 83.25);
    assert_eq!(json["last_lap"], serde_json::Value::Null);
    assert_eq!(json["current_lap"], serde_json::Value::Null);
    assert_eq!(json["tyres"]["fl"]["temp_c"], 100.0);
    assert_eq!(json["tyres"]["fr"]["temp_c"], serde_json::Value::Null);
    // One coordinate is not a number: no position to draw.
    assert_eq!(json["position"], serde_json::Value::Null);
    p.set_position_y(56.25).unwrap();
    let car = Car::new(&Telemetry::decode(&p));
    let at = car.position.expect("three numbers");
    assert_eq!(
        (at.x.get(), at.y.get(), at.z.get()),
        (-1_234.5, 56.25, 7_890.125)
    );
}

#[test]
fn ignored_datagrams_say_what_they_are_and_what_reads_them() {
    let mut i = Ignored::default();
    for _ in 0..1_793 {
        i.add(331);
    }
    let fh6 = Input::Fixed(Format::Fh6);
    assert_eq!(
        i.nothing_matched(fh6),
        "none of the 1,793 datagrams is in the fh6 format (324 bytes); they are 331 bytes: \
             fm2023 — use --format fm2023 or auto"
    );
    i.add(311);
    i.add(100);
    i.add(40);
    assert_eq!(i.count(), 1_796);
    assert_eq!(
        i.explain(fh6),
        "1,796 datagrams ignored, not in the fh6 format (324 bytes); 1 is 311 bytes (fm7), \
             1,793 are 331 bytes (fm2023), 2 are 40 bytes (no Forza format) \
             — use --format auto (or one of fm7, fm2023)"
    );
    let mut i = Ignored::default();
    i.add(324);
    assert_eq!(
        i.nothing_matched(Input::Fixed(Format::Sled)),
        "the one datagram is not in the sled format (232 bytes); it is 324 bytes: \
             fh4, fh5 or fh6 — use --format auto (or one of fh4, fh5, fh6)"
    );
    let mut i = Ignored::default();
    i.add(100);
    i.add(7);
    assert_eq!(
        i.nothing_matched(Input::Auto),
        "none of the 2 datagrams is in any Forza format (lengths: sled 232, fm7 311, \
             fm2023 331, fh4/fh5/fh6 324); they are of no Forza length (the last 7 bytes)"
    );
}

#[test]
fn a_dry_horizon_packet_is_fh6_but_not_for_certain() {
    let mut m = Model::new(Input::Auto, "test");
    m.on_datagram(Instant::now(), from(), &[0; 324]);
    assert_eq!(m.format(), Some((Format::Fh6, false)));
}
