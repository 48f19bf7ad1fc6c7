//! A session's records (issue 34, [`crate::telemetry::session`]) as text: one
//! JSON object or one InfluxDB line-protocol line per record, written into a
//! caller-owned `Vec<u8>` (cleared first) that, once it has room, is all the
//! memory a record needs: numbers through zmij and itoa, as the frames' text.
//!
//! JSON (docs/session.md "The records"): `record` (`lap` or `event`), the
//! frame's `recv_time` and `format` as in a frame's object, then the record's
//! values by name; a value the format lacks, or a number that is not finite,
//! is `null`.
//!
//! Influx, timestamped in nanoseconds from the frame's receive time, tagged
//! `game` (the format id) and `car` (CarOrdinal) as the frames' lines are:
//! - `forza_lap`: a point per lap, tags `class` and `track` where known (laps
//!   group by them), `lap` an integer, every other number a float, the splits
//!   as `split1_s` … `split3_s` and `split1_delta_s` … (no arrays in line
//!   protocol). A Grafana table of laps is `SELECT * FROM forza_lap`.
//! - `forza_event`: the event's name a tag, `event` (an indexed filter, and
//!   annotation tags in Grafana); the string field `text` says it in words with
//!   the lap, so an annotation query of one column needs no field mapping;
//!   `race_time_s` a float, `lap` an integer.
//!
//! A value the format lacks, or that is not finite, is left out of the line;
//! every line keeps at least `lap` or `text`.

use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use super::influx::{escape, Escape, TAG_CAR, TAG_CLASS, TAG_GAME};
use crate::telemetry::laps::Lap;
use crate::telemetry::session::{Event, EventRecord, Record};
use crate::wire::Format;

/// The measurement of laps.
pub const LAP_MEASUREMENT: &str = "forza_lap";
/// The measurement of events.
pub const EVENT_MEASUREMENT: &str = "forza_event";
/// The tag of the track: TrackOrdinal, where the format has it.
pub const TAG_TRACK: &str = "track";
/// The tag of an event's name.
pub const TAG_EVENT: &str = "event";

/// What a text payload is: a frame's, or a record's, told by its first
/// bytes (a frame's JSON object starts with a column's name, never
/// `"record"`; a frame's line with the measurement `forza,`). MQTT puts
/// each on its own topic by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A frame's object or line.
    Frame,
    /// A lap's record.
    Lap,
    /// An event's record.
    Event,
}

/// What `payload` (a text output's) is.
pub fn kind_of(payload: &[u8]) -> Kind {
    if payload.starts_with(br#"{"record":"lap""#) || payload.starts_with(b"forza_lap,") {
        Kind::Lap
    } else if payload.starts_with(br#"{"record":"event""#) || payload.starts_with(b"forza_event,") {
        Kind::Event
    } else {
        Kind::Frame
    }
}

/// The first second that RFC 3339 cannot write (year 10000).
const YEAR_10000_S: u64 = 253_402_300_800;

/// The frame a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The format it was read as.
    pub format: Format,
    /// When it was received, by the wall clock.
    pub time: SystemTime,
}

/// Replaces the contents of `out` with `record` as one JSON object.
pub fn write_json(record: &Record, origin: Origin, out: &mut Vec<u8>) {
    out.clear();
    let mut o = Object { out, first: true };
    match record {
        Record::Lap(lap) => {
            o.word("record", Some("lap"));
            o.origin(origin);
            json_lap(lap, &mut o);
        }
        Record::Event(e) => {
            o.word("record", Some("event"));
            o.word("event", Some(e.event.name()));
            o.origin(origin);
            o.float("race_time_s", e.race_time_s);
            o.int("lap", e.lap.map(i64::from));
            o.int("TimestampMS", Some(i64::from(e.timestamp_ms)));
            o.int("CarOrdinal", Some(i64::from(e.car_ordinal)));
            o.int("TrackOrdinal", e.track_ordinal.map(i64::from));
        }
    }
    o.out.push(b'}');
}

/// A lap's keys after `record` and the origin's.
fn json_lap(lap: &Lap, o: &mut Object<'_>) {
    o.int("lap", Some(i64::from(lap.lap)));
    o.float("lap_time_s", Some(lap.lap_time_s));
    o.float("best_lap_s", Some(lap.best_lap_s));
    o.float("delta_to_best_s", lap.delta_to_best_s);
    o.floats("splits_s", &lap.splits_s);
    o.floats("split_deltas_s", &lap.split_deltas_s);
    o.float("top_speed_kmh", lap.top_speed_kmh);
    o.float("avg_speed_kmh", lap.avg_speed_kmh);
    o.float("fuel_used", lap.fuel_used);
    o.float("race_time_s", lap.race_time_s);
    o.int("CarOrdinal", Some(i64::from(lap.car_ordinal)));
    o.word("CarClass", lap.car_class);
    o.int(
        "CarPerformanceIndex",
        Some(i64::from(lap.car_performance_index)),
    );
    o.int("TrackOrdinal", lap.track_ordinal.map(i64::from));
}

/// A JSON object being written: keys are ours, plain ASCII with nothing to
/// escape.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl Object<'_> {
    /// `{"key":` or `,"key":`.
    fn key(&mut self, key: &str) {
        self.out.push(if self.first { b'{' } else { b',' });
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    /// A number, `null` when absent or not finite.
    fn number(&mut self, v: Option<f32>) {
        match v.filter(|v| v.is_finite()) {
            Some(v) => self
                .out
                .extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes()),
            None => self.out.extend_from_slice(b"null"),
        }
    }

    fn float(&mut self, key: &str, v: Option<f32>) {
        self.key(key);
        self.number(v);
    }

    fn floats(&mut self, key: &str, vs: &[Option<f32>]) {
        self.key(key);
        self.out.push(b'[');
        for (i, v) in vs.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.number(*v);
        }
        self.out.push(b']');
    }

    fn int(&mut self, key: &str, v: Option<i64>) {
        self.key(key);
        match v {
            Some(v) => self
                .out
                .extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
            None => self.out.extend_from_slice(b"null"),
        }
    }

    /// A string, escaped as JSON wants.
    fn word(&mut self, key: &str, v: Option<&str>) {
        self.key(key);
        match v {
            Some(v) => {
                serde_json::to_writer(&mut *self.out, v).expect("a string serializes into a Vec")
            }
            None => self.out.extend_from_slice(b"null"),
        }
    }

    /// `recv_time` (RFC 3339, to the microsecond, as a frame's) and `format`.
    fn origin(&mut self, origin: Origin) {
        self.key("recv_time");
        let writable = origin
            .time
            .duration_since(UNIX_EPOCH)
            .is_ok_and(|d| d.as_secs() < YEAR_10000_S);
        if writable {
            write!(
                self.out,
                "\"{}\"",
                humantime::format_rfc3339_micros(origin.time)
            )
            .expect("a time writes into a Vec");
        } else {
            self.out.extend_from_slice(b"null");
        }
        self.word("format", Some(origin.format.id()));
    }
}

/// Replaces the contents of `out` with `record` as one line-protocol line,
/// ending in a newline.
pub fn write_influx(record: &Record, origin: Origin, out: &mut Vec<u8>) {
    out.clear();
    let mut line = Line { out };
    match record {
        Record::Lap(lap) => {
            line.tags(LAP_MEASUREMENT, origin.format, lap.car_ordinal);
            if let Some(class) = lap.car_class {
                line.tag(TAG_CLASS, class);
            }
            if let Some(track) = lap.track_ordinal {
                line.tag(TAG_TRACK, itoa::Buffer::new().format(track));
            }
            // `lap` first: every lap has it, so the fields start with a space.
            line.out.extend_from_slice(b" lap=");
            line.integer(lap.lap);
            line.float("lap_time_s", Some(lap.lap_time_s));
            line.float("best_lap_s", Some(lap.best_lap_s));
            line.float("delta_to_best_s", lap.delta_to_best_s);
            for (key, split) in ["split1_s", "split2_s", "split3_s"]
                .into_iter()
                .zip(lap.splits_s)
            {
                line.float(key, split);
            }
            let delta_keys = ["split1_delta_s", "split2_delta_s", "split3_delta_s"];
            for (key, delta) in delta_keys.into_iter().zip(lap.split_deltas_s) {
                line.float(key, delta);
            }
            line.float("top_speed_kmh", lap.top_speed_kmh);
            line.float("avg_speed_kmh", lap.avg_speed_kmh);
            line.float("fuel_used", lap.fuel_used);
            line.float("race_time_s", lap.race_time_s);
            line.float(
                "CarPerformanceIndex",
                Some(lap.car_performance_index as f32),
            );
        }
        Record::Event(e) => {
            line.tags(EVENT_MEASUREMENT, origin.format, e.car_ordinal);
            if let Some(track) = e.track_ordinal {
                line.tag(TAG_TRACK, itoa::Buffer::new().format(track));
            }
            line.tag(TAG_EVENT, e.event.name());
            line.out.extend_from_slice(b" text=\"");
            text(e, line.out);
            line.out.push(b'"');
            line.float("race_time_s", e.race_time_s);
            if let Some(lap) = e.lap {
                line.out.extend_from_slice(b",lap=");
                line.integer(lap);
            }
        }
    }
    // Before 1970 or after 2554 (no u64 of nanoseconds): left to the server.
    let nanos = origin
        .time
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_nanos()).ok());
    if let Some(nanos) = nanos {
        line.out.push(b' ');
        line.out
            .extend_from_slice(itoa::Buffer::new().format(nanos).as_bytes());
    }
    line.out.push(b'\n');
}

/// An event in words, with its lap where known: `race start (lap 1)`.
fn text(e: &EventRecord, out: &mut Vec<u8>) {
    let words = match e.event {
        Event::RaceStart => "race start",
        Event::RaceEnd => "race end",
        Event::Lap => "lap done",
        Event::Rewind => "rewind",
        Event::Paused => "paused",
        Event::Resumed => "resumed",
    };
    out.extend_from_slice(words.as_bytes());
    if let Some(lap) = e.lap {
        out.extend_from_slice(b" (lap ");
        out.extend_from_slice(itoa::Buffer::new().format(lap).as_bytes());
        out.push(b')');
    }
}

/// A line being written.
struct Line<'a> {
    out: &'a mut Vec<u8>,
}

impl Line<'_> {
    /// The measurement and the tags every line has: `game` and `car`.
    fn tags(&mut self, measurement: &str, format: Format, car: i32) {
        self.out.extend_from_slice(measurement.as_bytes());
        self.tag(TAG_GAME, format.id());
        self.tag(TAG_CAR, itoa::Buffer::new().format(car));
    }

    /// `,name=value`, the value escaped.
    fn tag(&mut self, name: &str, value: &str) {
        self.out.push(b',');
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(b'=');
        escape(self.out, value, Escape::Tag);
    }

    /// `n` as an integer field's value: `3i`.
    fn integer(&mut self, n: u32) {
        self.out
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self.out.push(b'i');
    }

    /// `,key=v` as a float, left out when absent or not finite.
    fn float(&mut self, key: &str, v: Option<f32>) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.out.push(b',');
            self.out.extend_from_slice(key.as_bytes());
            self.out.push(b'=');
            self.out
                .extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::Value;

    use super::super::influx::parse::{self, Value as Field};
    use super::*;

    /// 1,796,619,600.016 s after the epoch (2026-12-07T05:00:00.016Z), in ns.
    const STAMP: i128 = 1_796_619_600_016_000_000;

    fn origin(format: Format) -> Origin {
        Origin {
            format,
            time: UNIX_EPOCH + Duration::from_nanos(STAMP as u64),
        }
    }

    /// Lap 3 of an FM2023 race, every value set.
    fn lap() -> Lap {
        Lap {
            lap: 3,
            lap_time_s: 84.5,
            best_lap_s: 83.25,
            delta_to_best_s: Some(1.25),
            splits_s: [Some(28.125), Some(27.875), Some(28.5)],
            split_deltas_s: [Some(0.375), Some(0.25), Some(-0.5)],
            top_speed_kmh: Some(241.75),
            avg_speed_kmh: Some(171.5),
            fuel_used: Some(0.031_25),
            car_ordinal: 3_141,
            car_class: Some("A"),
            car_performance_index: 700,
            track_ordinal: Some(1_640),
            race_time_s: Some(253.0),
        }
    }

    /// The first lap of an FH6 drive: what the format or the first lap lacks
    /// absent, and a lap time that is not a number.
    fn sparse_lap() -> Lap {
        Lap {
            lap: 1,
            lap_time_s: f32::NAN,
            best_lap_s: f32::INFINITY,
            delta_to_best_s: None,
            splits_s: [Some(30.5), None, None],
            split_deltas_s: [None; 3],
            top_speed_kmh: None,
            avg_speed_kmh: None,
            fuel_used: None,
            car_ordinal: -7,
            car_class: None,
            car_performance_index: 0,
            track_ordinal: None,
            race_time_s: None,
        }
    }

    fn event(event: Event) -> EventRecord {
        EventRecord {
            event,
            race_time_s: Some(12.5),
            lap: Some(2),
            timestamp_ms: 4_000_000_000,
            car_ordinal: 3_141,
            track_ordinal: Some(1_640),
        }
    }

    fn json(record: &Record, format: Format) -> serde_json::Map<String, Value> {
        let mut out = b"dirty".to_vec();
        write_json(record, origin(format), &mut out);
        match serde_json::from_slice(&out).expect("JSON") {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn line(record: &Record, format: Format) -> parse::Point {
        let mut out = b"dirty".to_vec();
        write_influx(record, origin(format), &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with('\n') && !text.starts_with("dirty"),
            "{text:?}"
        );
        parse::line(&text)
    }

    #[track_caller]
    fn float(o: &serde_json::Map<String, Value>, key: &str) -> f32 {
        o[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {}", o[key])) as f32
    }

    #[track_caller]
    fn floats(o: &serde_json::Map<String, Value>, key: &str) -> Vec<Option<f32>> {
        o[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {}", o[key]))
            .iter()
            .map(|v| v.as_f64().map(|v| v as f32))
            .collect()
    }

    #[track_caller]
    fn field(p: &parse::Point, key: &str) -> f32 {
        match p.fields.get(key) {
            Some(Field::Float(v)) => *v as f32,
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn a_lap_as_json_has_every_key_by_name_in_order() {
        let o = json(&Record::Lap(lap()), Format::Fm2023);
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        let mut expected = [
            "record",
            "recv_time",
            "format",
            "lap",
            "lap_time_s",
            "best_lap_s",
            "delta_to_best_s",
            "splits_s",
            "split_deltas_s",
            "top_speed_kmh",
            "avg_speed_kmh",
            "fuel_used",
            "race_time_s",
            "CarOrdinal",
            "CarClass",
            "CarPerformanceIndex",
            "TrackOrdinal",
        ];
        // serde_json's map is ordered by key; the order written is checked
        // on the text below.
        expected.sort();
        assert_eq!(keys, expected);
        assert_eq!(o["record"], "lap");
        assert_eq!(o["recv_time"], "2026-12-07T05:00:00.016000Z");
        assert_eq!(o["format"], "fm2023");
        assert_eq!(o["lap"], 3);
        assert_eq!(float(&o, "lap_time_s"), 84.5);
        assert_eq!(float(&o, "best_lap_s"), 83.25);
        assert_eq!(float(&o, "delta_to_best_s"), 1.25);
        assert_eq!(
            floats(&o, "splits_s"),
            [Some(28.125), Some(27.875), Some(28.5)]
        );
        assert_eq!(
            floats(&o, "split_deltas_s"),
            [Some(0.375), Some(0.25), Some(-0.5)]
        );
        assert_eq!(float(&o, "top_speed_kmh"), 241.75);
        assert_eq!(float(&o, "avg_speed_kmh"), 171.5);
        assert_eq!(float(&o, "fuel_used"), 0.031_25);
        assert_eq!(float(&o, "race_time_s"), 253.0);
        assert_eq!(o["CarOrdinal"], 3_141);
        assert_eq!(o["CarClass"], "A");
        assert_eq!(o["CarPerformanceIndex"], 700);
        assert_eq!(o["TrackOrdinal"], 1_640);
        let mut text = Vec::new();
        write_json(&Record::Lap(lap()), origin(Format::Fm2023), &mut text);
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with(
                "{\"record\":\"lap\",\"recv_time\":\"2026-12-07T05:00:00.016000Z\",\
                 \"format\":\"fm2023\",\"lap\":3,\"lap_time_s\":84.5,"
            ),
            "{text}"
        );
        assert!(
            text.ends_with(",\"CarPerformanceIndex\":700,\"TrackOrdinal\":1640}"),
            "{text}"
        );
    }

    #[test]
    fn what_a_lap_lacks_or_cannot_be_a_number_is_null() {
        let o = json(&Record::Lap(sparse_lap()), Format::Fh6);
        assert_eq!(o.len(), 17);
        assert_eq!(o["format"], "fh6");
        assert_eq!(o["lap"], 1);
        for key in [
            "lap_time_s",
            "best_lap_s",
            "delta_to_best_s",
            "top_speed_kmh",
            "avg_speed_kmh",
            "fuel_used",
            "race_time_s",
            "CarClass",
            "TrackOrdinal",
        ] {
            assert_eq!(o[key], Value::Null, "{key}");
        }
        assert_eq!(floats(&o, "splits_s"), [Some(30.5), None, None]);
        assert_eq!(floats(&o, "split_deltas_s"), [None, None, None]);
        assert_eq!(o["CarOrdinal"], -7);
        assert_eq!(o["CarPerformanceIndex"], 0);
    }

    #[test]
    fn every_event_as_json_has_every_key_by_name() {
        for e in Event::ALL {
            let o = json(&Record::Event(event(e)), Format::Fm2023);
            let keys: Vec<&str> = o.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                [
                    "CarOrdinal",
                    "TimestampMS",
                    "TrackOrdinal",
                    "event",
                    "format",
                    "lap",
                    "race_time_s",
                    "record",
                    "recv_time"
                ],
                "{e}"
            );
            assert_eq!(o["record"], "event");
            assert_eq!(o["event"], e.name());
            assert_eq!(o["recv_time"], "2026-12-07T05:00:00.016000Z");
            assert_eq!(o["format"], "fm2023");
            assert_eq!(float(&o, "race_time_s"), 12.5);
            assert_eq!(o["lap"], 2);
            assert_eq!(o["TimestampMS"], 4_000_000_000u32);
            assert_eq!(o["CarOrdinal"], 3_141);
            assert_eq!(o["TrackOrdinal"], 1_640);
        }
        let mut sled = event(Event::RaceEnd);
        (sled.race_time_s, sled.lap, sled.track_ordinal) = (None, None, None);
        let o = json(&Record::Event(sled), Format::Sled);
        assert_eq!(o["event"], "race_end");
        assert_eq!(o["race_time_s"], Value::Null);
        assert_eq!(o["lap"], Value::Null);
        assert_eq!(o["TrackOrdinal"], Value::Null);
    }

    #[test]
    fn a_lap_as_an_influx_line_field_by_field() {
        let p = line(&Record::Lap(lap()), Format::Fm2023);
        assert_eq!(p.measurement, "forza_lap");
        assert_eq!(p.tags["game"], "fm2023");
        assert_eq!(p.tags["car"], "3141");
        assert_eq!(p.tags["class"], "A");
        assert_eq!(p.tags["track"], "1640");
        assert_eq!(p.tags.len(), 4);
        assert_eq!(p.timestamp, Some(STAMP));
        assert_eq!(p.fields["lap"], Field::Integer(3));
        assert_eq!(field(&p, "lap_time_s"), 84.5);
        assert_eq!(field(&p, "best_lap_s"), 83.25);
        assert_eq!(field(&p, "delta_to_best_s"), 1.25);
        assert_eq!(field(&p, "split1_s"), 28.125);
        assert_eq!(field(&p, "split2_s"), 27.875);
        assert_eq!(field(&p, "split3_s"), 28.5);
        assert_eq!(field(&p, "split1_delta_s"), 0.375);
        assert_eq!(field(&p, "split2_delta_s"), 0.25);
        assert_eq!(field(&p, "split3_delta_s"), -0.5);
        assert_eq!(field(&p, "top_speed_kmh"), 241.75);
        assert_eq!(field(&p, "avg_speed_kmh"), 171.5);
        assert_eq!(field(&p, "fuel_used"), 0.031_25);
        assert_eq!(field(&p, "race_time_s"), 253.0);
        assert_eq!(field(&p, "CarPerformanceIndex"), 700.0);
        assert_eq!(p.fields.len(), 15);
        assert_eq!(p.order[0], "lap");
    }

    #[test]
    fn what_a_lap_lacks_or_cannot_be_a_number_is_left_out_of_the_line() {
        let p = line(&Record::Lap(sparse_lap()), Format::Fh6);
        assert_eq!(p.tags["game"], "fh6");
        assert_eq!(p.tags["car"], "-7");
        assert!(!p.tags.contains_key("class") && !p.tags.contains_key("track"));
        assert_eq!(p.order, ["lap", "split1_s", "CarPerformanceIndex"]);
        assert_eq!(p.fields["lap"], Field::Integer(1));
        assert_eq!(field(&p, "split1_s"), 30.5);
    }

    #[test]
    fn every_event_as_an_influx_line_field_by_field() {
        let words = [
            (Event::RaceStart, "race start (lap 2)"),
            (Event::Lap, "lap done (lap 2)"),
            (Event::Paused, "paused (lap 2)"),
            (Event::Resumed, "resumed (lap 2)"),
            (Event::Rewind, "rewind (lap 2)"),
            (Event::RaceEnd, "race end (lap 2)"),
        ];
        for (e, text) in words {
            let p = line(&Record::Event(event(e)), Format::Fm2023);
            assert_eq!(p.measurement, "forza_event");
            assert_eq!(p.tags["game"], "fm2023");
            assert_eq!(p.tags["car"], "3141");
            assert_eq!(p.tags["track"], "1640");
            assert_eq!(p.tags["event"], e.name());
            assert_eq!(p.tags.len(), 4);
            assert_eq!(p.order, ["text", "race_time_s", "lap"]);
            assert_eq!(p.fields["text"], Field::String(text.to_owned()));
            assert_eq!(field(&p, "race_time_s"), 12.5);
            assert_eq!(p.fields["lap"], Field::Integer(2));
            assert_eq!(p.timestamp, Some(STAMP));
        }
        let mut sled = event(Event::Paused);
        (sled.race_time_s, sled.lap, sled.track_ordinal) = (None, None, None);
        let p = line(&Record::Event(sled), Format::Sled);
        assert_eq!(p.tags["game"], "sled");
        assert!(!p.tags.contains_key("track"));
        assert_eq!(p.order, ["text"]);
        assert_eq!(p.fields["text"], Field::String("paused".to_owned()));
    }

    #[test]
    fn a_time_before_the_epoch_has_no_recv_time_and_no_timestamp() {
        let before = Origin {
            format: Format::Fh5,
            time: UNIX_EPOCH - Duration::from_secs(1),
        };
        let mut out = Vec::new();
        write_json(&Record::Event(event(Event::RaceStart)), before, &mut out);
        let o: serde_json::Map<String, Value> = serde_json::from_slice(&out).unwrap();
        assert_eq!(o["recv_time"], Value::Null);
        write_influx(&Record::Event(event(Event::RaceStart)), before, &mut out);
        assert_eq!(
            parse::line(std::str::from_utf8(&out).unwrap()).timestamp,
            None
        );
    }

    /// A session's records from packets built field by field, written: the
    /// lap record of the lap the frames drove.
    #[test]
    fn a_sessions_lap_from_packets_is_written_with_the_frames_values() {
        use crate::telemetry::session::Session;
        use crate::telemetry::{is_menu_frame, Telemetry};
        use crate::wire::Packet;
        let frame = |s: u16, lap_number: u16, last_lap: f32| {
            let mut buf = vec![0u8; Format::Fm2023.len()];
            let mut p = Packet::new_checked(&mut buf[..], Format::Fm2023).unwrap();
            p.set_is_race_on(1);
            p.set_timestamp_ms(100_000 + u32::from(s) * 1_000);
            p.set_car_ordinal(3_141);
            p.set_car_class(3);
            p.set_car_performance_index(700);
            p.set_current_race_time(f32::from(s)).unwrap();
            p.set_distance_traveled(f32::from(s) * 50.0).unwrap();
            p.set_lap_number(lap_number).unwrap();
            p.set_current_lap(f32::from(s % 60)).unwrap();
            p.set_last_lap(last_lap).unwrap();
            p.set_speed(50.0).unwrap();
            p.set_fuel(1.0 - f32::from(s) / 1000.0).unwrap();
            p.set_track_ordinal(1_640).unwrap();
            buf
        };
        let mut session = Session::new();
        let mut records = Vec::new();
        for s in 0..=60 {
            let bytes = frame(s, s / 60, if s < 60 { 0.0 } else { 60.0 });
            let packet = Packet::new_checked(&bytes[..], Format::Fm2023).unwrap();
            let t = Telemetry::decode(&packet);
            records.extend(session.observe(&t, is_menu_frame(&packet)));
        }
        let Some(lap @ Record::Lap(_)) = records.iter().find(|r| matches!(r, Record::Lap(_)))
        else {
            panic!("a lap in {records:?}");
        };
        let o = json(lap, Format::Fm2023);
        assert_eq!(o["lap"], 1);
        assert_eq!(float(&o, "lap_time_s"), 60.0);
        assert_eq!(float(&o, "best_lap_s"), 60.0);
        assert_eq!(o["delta_to_best_s"], Value::Null, "no best before lap 1");
        assert_eq!(float(&o, "race_time_s"), 60.0);
        assert_eq!(float(&o, "avg_speed_kmh"), 180.0, "3,000 m in 60 s");
        assert_eq!(float(&o, "top_speed_kmh"), 180.0);
        assert!((float(&o, "fuel_used") - 0.06).abs() < 1e-6);
        assert_eq!(
            o["CarClass"],
            Value::Null,
            "FM2023's class scale is unknown"
        );
        assert_eq!(o["CarPerformanceIndex"], 700);
        assert_eq!(o["TrackOrdinal"], 1_640);
        let p = line(lap, Format::Fm2023);
        assert_eq!(p.fields["lap"], Field::Integer(1));
        assert_eq!(field(&p, "lap_time_s"), 60.0);
    }

    /// docs/session.md's examples are what the writers write.
    #[test]
    fn docs_session_md_shows_the_records_as_written() {
        let page = include_str!("../../docs/session.md");
        let fh5_lap = Lap {
            track_ordinal: None,
            ..lap()
        };
        let start = EventRecord {
            event: Event::RaceStart,
            race_time_s: Some(0.0),
            lap: Some(1),
            timestamp_ms: 1_234_567,
            car_ordinal: 3_141,
            track_ordinal: Some(1_640),
        };
        let four_minutes_before = Origin {
            format: Format::Fm2023,
            time: origin(Format::Fm2023).time - Duration::from_millis(240_016),
        };
        let mut out = Vec::new();
        let shown = |text: &[u8]| {
            let text = std::str::from_utf8(text).unwrap().trim_end();
            assert!(page.contains(text), "docs/session.md lacks {text}");
        };
        write_json(&Record::Lap(fh5_lap), origin(Format::Fh5), &mut out);
        shown(&out);
        write_json(&Record::Event(start), four_minutes_before, &mut out);
        shown(&out);
        write_influx(&Record::Lap(fh5_lap), origin(Format::Fh5), &mut out);
        shown(&out);
        write_influx(&Record::Event(start), four_minutes_before, &mut out);
        shown(&out);
    }
}
