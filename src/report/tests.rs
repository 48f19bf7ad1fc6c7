//! The counters' unit tests: histograms, windows, health and summaries, checked
//! field by field.

use super::*;

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
        hold: None,
        records: Default::default(),
        status: Status::Failing,
        stats: s,
        latency: Latency::default(),
        held_through_blank: 0,
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
