//! A frame as one JSON object: `{"recv_time":"…","format":"fh6","IsRaceOn":1,…}`,
//! the object `export --as jsonl` writes on each line (without the line end).
//!
//! Each value is the text serde_json writes for the column's [`Cell`]: numbers
//! as the formatters serde_json uses write them (zmij's shortest round-trip
//! floats, `3e+38`; itoa's integers), `null` for an absent value, NaN or an
//! infinity; a test compares the object with serde_json's. The keys, quoted, each with the `{`
//! or `,` before it and the `:` after (and `null` after it for a field the
//! format lacks), are made once per format by [`Object::new`].

use serde::Serialize;

use super::{f32_at, micros, rfc3339_micros, Key, Text, Value, Values};
use crate::telemetry::columns::{read_scalar, Cell, Column};
use crate::wire::Format;

/// The JSON object of a column selection.
#[derive(Debug, Clone)]
pub struct Object {
    /// For each format (by [`Format::index`]), each column: `{"recv_time":`
    /// (`,"recv_s":` …), and how its value is read in that format. A column
    /// the format lacks is its key with `null` and [`Value::Absent`].
    formats: [Vec<(Key, Value)>; Format::ALL.len()],
    /// Room for an object's text, as long as the longest ([`Text`]).
    room: Vec<u8>,
}

impl Object {
    /// The object of `columns`, in their order.
    pub fn new(columns: &[Column]) -> Object {
        let formats = Format::ALL.map(|format| {
            columns
                .iter()
                .enumerate()
                .map(|(i, column)| {
                    let mut key = vec![if i == 0 { b'{' } else { b',' }];
                    serde_json::to_writer(&mut key, &column.name())
                        .expect("a string serializes into a Vec");
                    key.push(b':');
                    let value = Value::new(column, format);
                    if value == Value::Absent {
                        key.extend_from_slice(b"null");
                    }
                    (Key::new(&key), value)
                })
                .collect::<Vec<_>>()
        });
        let longest = formats.iter().map(|columns| {
            columns
                .iter()
                .map(|(key, value)| key.len() + value.most())
                .sum::<usize>()
        });
        let room = vec![0; longest.max().unwrap_or(0) + super::VALUE_MAX];
        Object { formats, room }
    }

    /// Appends `frame`'s object to `out`.
    pub(crate) fn write(&mut self, frame: &Values<'_>, out: &mut Vec<u8>) {
        let format = frame.packet.format().index();
        let columns = &self.formats[format];
        if columns.is_empty() {
            out.extend_from_slice(b"{}");
            return;
        }
        let mut text = Text::new(&mut self.room);
        let bytes = frame.packet.as_bytes();
        for (key, value) in columns {
            text.key(key);
            match *value {
                Value::Absent => {}
                // Most fields: an F32 straight from the packet.
                Value::F32(at) => match f32_at(bytes, at) {
                    Some(v) if v.is_finite() => text.f32(v),
                    _ => text.put(b"null"),
                },
                Value::Int(at, scalar) => match read_scalar(bytes, at, scalar) {
                    Cell::Int(v) => text.int(v),
                    _ => text.put(b"null"),
                },
                Value::RecvTime => match rfc3339_micros(frame.time) {
                    Some(time) => {
                        text.byte(b'"');
                        text.put(&time);
                        text.byte(b'"');
                    }
                    None => write_value(value.cell(frame), &mut text),
                },
                _ => write_value(value.cell(frame), &mut text),
            }
        }
        text.byte(b'}');
        out.extend_from_slice(text.as_bytes());
    }
}

/// Appends `cell` as JSON, the text serde_json writes for it. Numbers and
/// words with nothing to escape are written here; the rest through serde_json's
/// serializer.
fn write_value(cell: Cell, text: &mut Text<'_>) {
    match cell {
        Cell::Int(v) => text.int(v),
        Cell::Float(v) if v.is_finite() => text.f32(v),
        Cell::Seconds(v) if micros(v).is_finite() => text.f64(micros(v)),
        Cell::Null | Cell::Float(_) | Cell::Seconds(_) => text.put(b"null"),
        Cell::Gear(g) => {
            text.byte(b'"');
            text.gear(g);
            text.byte(b'"');
        }
        // A word with nothing to escape (a format id, a class letter) is
        // written as serde_json would write it, without its escaping pass.
        Cell::Text(t) if !t.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') => {
            text.byte(b'"');
            text.put(t.as_bytes());
            text.byte(b'"');
        }
        other => text.with(|out| {
            other
                .serialize(&mut serde_json::Serializer::new(out))
                .expect("JSON is written into a Vec")
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use serde::ser::{SerializeMap, Serializer as _};
    use serde_json::Value;

    use super::*;
    use crate::telemetry::columns::{select, Row};
    use crate::telemetry::Telemetry;
    use crate::wire::{Packet, Puddle, Wheels};

    const T0: u64 = 1_700_000_000;

    /// `packet` read as `format`, received at T0 + 16 ms, 0.016 s after the first.
    fn object(columns: &[Column], bytes: &[u8], format: Format) -> Vec<u8> {
        let packet = Packet::new_checked(bytes, format).unwrap();
        let frame = Values::new(
            packet,
            UNIX_EPOCH + Duration::from_millis(T0 * 1000 + 16),
            0.016,
        );
        let mut out = b"dirty".to_vec();
        out.clear();
        Object::new(columns).write(&frame, &mut out);
        out
    }

    /// The object as export wrote it before the encoder (commit 786350d):
    /// serde_json's map serializer over the columns' cells.
    fn as_export_wrote_it(columns: &[Column], bytes: &[u8], format: Format) -> Vec<u8> {
        let packet = Packet::new_checked(bytes, format).unwrap();
        let telemetry = Telemetry::decode(&packet);
        let row = Row {
            time: UNIX_EPOCH + Duration::from_millis(T0 * 1000 + 16),
            since_start: 0.016,
            packet,
            telemetry: &telemetry,
        };
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::new(&mut out);
        let mut map = ser.serialize_map(Some(columns.len())).unwrap();
        for c in columns {
            map.serialize_entry(&c.name(), &c.value(&row)).unwrap();
        }
        map.end().unwrap();
        out
    }

    /// An fh6 packet with named values in every block.
    fn fh6() -> Vec<u8> {
        let mut buf = vec![0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        p.set_timestamp_ms(123_456);
        p.set_engine_max_rpm(8_250.0);
        p.set_current_engine_rpm(6_543.25);
        p.set_acceleration_x(-4.903_325);
        p.set_velocity_x(3.0);
        p.set_velocity_z(4.0);
        p.set_wheel_in_puddle(Wheels::from_array([
            Puddle::Flag(1),
            Puddle::Flag(0),
            Puddle::Flag(0),
            Puddle::Flag(1),
        ]));
        p.set_car_ordinal(3_141);
        p.set_car_class(6);
        p.set_drivetrain_type(2);
        p.set_car_group(26).unwrap();
        p.set_speed(41.5).unwrap();
        p.set_tire_temp(Wheels::from_array([212.0, 194.0, 176.0, 158.0]))
            .unwrap();
        p.set_lap_number(3).unwrap();
        p.set_gear(11).unwrap();
        p.set_steer(-100).unwrap();
        buf
    }

    fn parse(bytes: &[u8]) -> serde_json::Map<String, Value> {
        match serde_json::from_slice(bytes).unwrap() {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn every_column_by_name_with_its_value() {
        let o = parse(&object(&Column::all(), &fh6(), Format::Fh6));
        assert_eq!(o.len(), Column::all().len());
        assert_eq!(o["recv_time"], "2023-11-14T22:13:20.016000Z");
        assert_eq!(o["recv_s"], 0.016);
        assert_eq!(o["format"], "fh6");
        assert_eq!(o["IsRaceOn"], 1);
        assert_eq!(o["TimestampMS"], 123_456);
        assert_eq!(o["EngineMaxRpm"], 8_250.0);
        assert_eq!(o["CurrentEngineRpm"], 6_543.25);
        assert_eq!(o["WheelInPuddleFL"], 1);
        assert_eq!(o["WheelInPuddleFR"], 0);
        assert_eq!(o["CarOrdinal"], 3_141);
        assert_eq!(o["CarClass"], 6);
        assert_eq!(o["CarGroup"], 26);
        assert_eq!(o["Speed"], 41.5);
        assert_eq!(o["TireTempFL"], 212.0);
        assert_eq!(o["TireTempRR"], 158.0);
        assert_eq!(o["LapNumber"], 3);
        assert_eq!(o["Gear"], 11);
        assert_eq!(o["Steer"], -100);
        assert_eq!(o["gear_label"], "N");
        assert_eq!(o["car_class_letter"], "R");
        assert_eq!(o["drivetrain"], "AWD");
        assert_eq!(o["tire_temp_c_fl"], 100.0);
        // 41.5 m/s × 3.6, as an f32 and written shortest.
        assert_eq!(o["speed_kmh"].as_f64().unwrap() as f32, 41.5 * 3.6);
        assert_eq!(o["g_lat"].as_f64().unwrap() as f32, -0.5);
        let drift = o["drift_angle_deg"].as_f64().unwrap();
        assert!((drift - 36.869_9).abs() < 1e-3, "{drift}");
        // fh6 has no FM2023 extras.
        assert_eq!(o["TireWearFL"], Value::Null);
        assert_eq!(o["TrackOrdinal"], Value::Null);
    }

    #[test]
    fn the_object_is_byte_for_byte_the_one_export_wrote() {
        let mut fixtures: Vec<(Vec<u8>, Format)> = vec![(fh6(), Format::Fh6)];
        for format in Format::ALL {
            let mut buf = vec![0u8; format.len()];
            let mut p = Packet::new_checked(&mut buf[..], format).unwrap();
            p.set_is_race_on(1);
            p.set_current_engine_rpm(f32::NAN);
            p.set_acceleration_z(f32::INFINITY);
            p.set_yaw(1e-7);
            p.set_pitch(3.0e38);
            let _ = p.set_speed(39.444_4);
            let _ = p.set_gear(0);
            fixtures.push((buf.clone(), format));
            // A menu frame: raw fields only, no derived value.
            let mut menu = vec![0u8; format.len()];
            Packet::new_checked(&mut menu[..], format)
                .unwrap()
                .set_timestamp_ms(9);
            fixtures.push((menu, format));
        }
        let selections = [
            Column::all(),
            select("Speed,gear_label,TireTemp,recv_time").unwrap(),
        ];
        for columns in &selections {
            for (bytes, format) in &fixtures {
                assert_eq!(
                    String::from_utf8(object(columns, bytes, *format)).unwrap(),
                    String::from_utf8(as_export_wrote_it(columns, bytes, *format)).unwrap(),
                    "{format}"
                );
            }
        }
    }

    #[test]
    fn absent_and_non_finite_values_are_null() {
        let mut buf = vec![0u8; 232];
        let mut p = Packet::new_checked(&mut buf[..], Format::Sled).unwrap();
        p.set_is_race_on(1);
        p.set_current_engine_rpm(f32::NAN);
        p.set_engine_max_rpm(f32::INFINITY);
        p.set_acceleration_x(f32::NEG_INFINITY);
        let text = String::from_utf8(object(&Column::all(), &buf, Format::Sled)).unwrap();
        assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
        let o = parse(text.as_bytes());
        assert_eq!(o["CurrentEngineRpm"], Value::Null);
        assert_eq!(o["EngineMaxRpm"], Value::Null);
        assert_eq!(o["g_lat"], Value::Null);
        assert_eq!(o["rev_fraction"], Value::Null, "NaN / inf");
        // Sled has no Dash block.
        assert_eq!(o["Speed"], Value::Null);
        assert_eq!(o["speed_kmh"], Value::Null);
        assert_eq!(o["gear_label"], Value::Null);
        assert_eq!(o["IsRaceOn"], 1);
    }

    #[test]
    fn a_selection_writes_its_columns_in_its_order() {
        let columns = select("speed_kmh,Speed,CurrentEngineRpm").unwrap();
        let text = String::from_utf8(object(&columns, &fh6(), Format::Fh6)).unwrap();
        let speed_kmh = serde_json::to_string(&(41.5f32 * 3.6)).unwrap();
        assert_eq!(
            text,
            format!(r#"{{"speed_kmh":{speed_kmh},"Speed":41.5,"CurrentEngineRpm":6543.25}}"#)
        );
    }
}
