//! A frame as one InfluxDB line-protocol line, for InfluxDB 1.x's UDP listener
//! and Telegraf's `socket_listener` (and through Telegraf, InfluxDB 2 and 3):
//!
//! ```text
//! forza,game=fh6,car=3141,class=S2 IsRaceOn=1i,TimestampMS=123456i,…,Speed=41.5,…,gear_label="3" 1700000000016000000
//! ```
//!
//! - measurement `forza`; tags `game` (the format the frame was read as), `car`
//!   (CarOrdinal) and `class` (the class letter; left out where the game's
//!   class scale is unknown). A menu frame, which describes no car, is given
//!   no line: the [`Encoder`](super::Encoder) skips it;
//! - the selected columns as fields, by their JSON names: integer fields of the
//!   table with the `i` suffix (InfluxDB 1.x and Telegraf read them as
//!   integers), every other number as a float, `gear_label` and `drivetrain` as
//!   strings. A field's type is the column's, whatever the frame: WheelInPuddle,
//!   an S32 flag in fh6 and an F32 depth elsewhere, is always a float, since
//!   InfluxDB refuses a field whose type changes. `recv_time`, `format` and
//!   `car_class_letter` are the timestamp and the tags, not fields;
//! - a value the frame's format lacks, or that is not a finite number, is left
//!   out (line protocol has no null); a line left with no field is not written;
//! - the timestamp in nanoseconds from the receive time;
//! - tag values escaped (`,`, `=`, space), string fields quoted with `"` and `\`
//!   escaped; the line ends with a newline.

use std::time::UNIX_EPOCH;

use super::{f32_at, micros, Key, Text, Value, Values};
use crate::telemetry::columns::{read_scalar, Cell, Column, Derived};
use crate::wire::{field, Format, Scalar};

/// The measurement every line is written to.
pub const MEASUREMENT: &str = "forza";

/// The tag of the format the frame was read as.
pub const TAG_GAME: &str = "game";
/// The tag of the car: CarOrdinal, also a field.
pub const TAG_CAR: &str = "car";
/// The tag of the car's class letter.
pub const TAG_CLASS: &str = "class";

/// The tag whose value is `column`'s, if one is.
pub fn tag_of(column: &Column) -> Option<&'static str> {
    match *column {
        Column::Format => Some(TAG_GAME),
        Column::Raw { field, .. } if field == field::CAR_ORDINAL => Some(TAG_CAR),
        Column::Derived {
            value: Derived::CarClassLetter,
            ..
        } => Some(TAG_CLASS),
        _ => None,
    }
}

/// How one column is written as a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer, with the `i` suffix.
    Integer,
    /// A float (an integer cell written without suffix reads as a float).
    Float,
    /// A quoted string.
    String,
}

impl Kind {
    /// How `column` is written, or `None` when it is the line's timestamp or a tag
    /// rather than a field.
    pub fn of(column: &Column) -> Option<Kind> {
        match *column {
            Column::RecvTime | Column::Format => None,
            Column::RecvSeconds => Some(Kind::Float),
            Column::Raw { field, .. } => Some(match field.scalar {
                // A Puddle is S32 in one format and F32 in another: one type.
                Scalar::F32 | Scalar::Puddle => Kind::Float,
                Scalar::S8 | Scalar::U8 | Scalar::U16 | Scalar::S32 | Scalar::U32 => Kind::Integer,
            }),
            Column::Derived { value, .. } => match value {
                Derived::CarClassLetter => None,
                Derived::GearLabel | Derived::Drivetrain => Some(Kind::String),
                _ => Some(Kind::Float),
            },
        }
    }
}

/// The line of a column selection.
#[derive(Debug, Clone)]
pub struct Line {
    /// For each format (by [`Format::index`]): `forza,game=fh6,car=`, the
    /// line up to the car's number.
    heads: Box<[Key; Format::ALL.len()]>,
    /// For each format, `,class=S2` for each CarClass the game's scale has.
    classes: [Vec<Key>; Format::ALL.len()],
    /// For each format, the selected columns that are fields and that the
    /// format has: the key, escaped, after a `,` and with its `=`; how the
    /// value is read; how it is written.
    formats: [Vec<(Key, Value, Kind)>; Format::ALL.len()],
    /// Room for a line's text, as long as the longest ([`Text`]).
    room: Vec<u8>,
}

/// The most bytes the tags after `car=` and the timestamp take: a car number
/// (11), `,class=` and an escaped letter or two, a space and 20 digits.
const TAGS_AND_TIME_MAX: usize = 64;

impl Line {
    /// The line of `columns`, in their order.
    pub fn new(columns: &[Column]) -> Line {
        let heads = Format::ALL.map(|format| {
            let mut head = MEASUREMENT.as_bytes().to_vec();
            head.push(b',');
            head.extend_from_slice(TAG_GAME.as_bytes());
            head.push(b'=');
            escape(&mut head, format.id(), Escape::Tag);
            head.push(b',');
            head.extend_from_slice(TAG_CAR.as_bytes());
            head.push(b'=');
            Key::new(&head)
        });
        let classes = Format::ALL.map(|format| {
            let letters = format.layout().classes.unwrap_or_default();
            letters
                .iter()
                .map(|letter| {
                    let mut tag = vec![b','];
                    tag.extend_from_slice(TAG_CLASS.as_bytes());
                    tag.push(b'=');
                    escape(&mut tag, letter, Escape::Tag);
                    Key::new(&tag)
                })
                .collect()
        });
        let formats = Format::ALL.map(|format| {
            columns
                .iter()
                .filter_map(|column| {
                    let kind = Kind::of(column)?;
                    let value = Value::new(column, format);
                    if value == Value::Absent {
                        return None;
                    }
                    let mut key = vec![b','];
                    escape(&mut key, &column.name(), Escape::Key);
                    key.push(b'=');
                    Some((Key::new(&key), value, kind))
                })
                .collect::<Vec<_>>()
        });
        let longest = Format::ALL.map(|format| {
            let fields = &formats[format.index()];
            heads[format.index()].len()
                + TAGS_AND_TIME_MAX
                + fields
                    .iter()
                    .map(|(key, value, _)| key.len() + value.most() + 1)
                    .sum::<usize>()
        });
        let room = vec![0; longest.into_iter().max().unwrap_or(0) + super::VALUE_MAX];
        Line {
            heads: Box::new(heads),
            classes,
            formats,
            room,
        }
    }

    /// Appends `frame`'s line to `out`; false (with `out` as it was) when no
    /// selected value is in the frame. `frame` is no menu frame (the
    /// [`Encoder`](super::Encoder) writes none).
    pub(crate) fn write(&mut self, frame: &Values<'_>, out: &mut Vec<u8>) -> bool {
        let packet = &frame.packet;
        let format = packet.format().index();
        let mut text = Text::new(&mut self.room);
        text.key(&self.heads[format]);
        text.int(i64::from(packet.car_ordinal()));
        if !frame.menu {
            let class = usize::try_from(packet.car_class()).ok();
            if let Some(tag) = class.and_then(|c| self.classes[format].get(c)) {
                text.key(tag);
            }
        }
        // Each key comes after a `,`; the first field written is after a
        // space instead, put in its place at the end.
        let fields_at = text.len();
        let bytes = packet.as_bytes();
        for (key, value, kind) in &self.formats[format] {
            let mark = text.len();
            text.key(key);
            let written = match *value {
                // Most fields: an F32 straight from the packet.
                Value::F32(at) => f32_at(bytes, at).is_some_and(|v| write_float(v, &mut text)),
                Value::Int(at, scalar) => match read_scalar(bytes, at, scalar) {
                    Cell::Int(v) => {
                        text.int(v);
                        if *kind == Kind::Integer {
                            text.byte(b'i');
                        }
                        true
                    }
                    _ => false,
                },
                _ => write_value(value.cell(frame), *kind, &mut text),
            };
            if !written {
                text.truncate(mark);
            }
        }
        if text.len() == fields_at {
            return false;
        }
        text.set(fields_at, b' ');
        // Before 1970 or after 2554 (no u64 of nanoseconds): left to the server.
        let nanos = frame
            .time
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|d| u64::try_from(d.as_nanos()).ok());
        if let Some(nanos) = nanos {
            text.byte(b' ');
            text.put(itoa::Buffer::new().format(nanos).as_bytes());
        }
        text.byte(b'\n');
        out.extend_from_slice(text.as_bytes());
        true
    }
}

/// Appends `v` as a float field value; false (nothing written) when it is
/// not a finite number.
#[inline(always)]
fn write_float(v: f32, text: &mut Text<'_>) -> bool {
    if !v.is_finite() {
        return false;
    }
    text.f32(v);
    true
}

/// Appends `cell` as a `kind` field value; false when there is nothing to write.
fn write_value(cell: Cell, kind: Kind, text: &mut Text<'_>) -> bool {
    match (cell, kind) {
        (Cell::Null, _) => return false,
        (Cell::Int(v), Kind::Integer) => {
            text.int(v);
            text.byte(b'i');
        }
        (Cell::Int(v), Kind::Float) => text.int(v),
        (Cell::Float(v), Kind::Float) => return write_float(v, text),
        (Cell::Seconds(v), Kind::Float) => {
            // Rounded to the microsecond, as in JSON.
            let v = micros(v);
            if !v.is_finite() {
                return false;
            }
            text.f64(v);
        }
        (Cell::Text(t), Kind::String) => {
            text.byte(b'"');
            if t.bytes().any(|b| Escape::String.needs(b)) {
                text.with(|out| escape(out, t, Escape::String));
            } else {
                text.put(t.as_bytes());
            }
            text.byte(b'"');
        }
        (Cell::Gear(g), Kind::String) => {
            // R, N or digits: nothing to escape.
            text.byte(b'"');
            text.gear(g);
            text.byte(b'"');
        }
        // A column's kind is made from the column, and each column has one
        // kind of cell (an integer cell may be a float field): nothing else
        // meets here. Should it ever, the field is left out, not mistyped.
        _ => return false,
    }
    true
}

/// Which characters line protocol wants escaped in a piece of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Escape {
    /// A tag value: comma, equals sign, space.
    Tag,
    /// A tag or field key: comma, equals sign, space.
    Key,
    /// A string field's value, inside its quotes: double quote, backslash.
    String,
}

impl Escape {
    fn needs(self, b: u8) -> bool {
        match self {
            Escape::Tag | Escape::Key => matches!(b, b',' | b'=' | b' '),
            Escape::String => matches!(b, b'"' | b'\\'),
        }
    }
}

/// Appends `text` with the characters `how` names escaped by a backslash. A line
/// end, which line protocol cannot carry in a tag or key, becomes an escaped space.
pub(crate) fn escape(out: &mut Vec<u8>, text: &str, how: Escape) {
    for &b in text.as_bytes() {
        let b = if how != Escape::String && matches!(b, b'\n' | b'\r') {
            b' '
        } else {
            b
        };
        if how.needs(b) {
            out.push(b'\\');
        }
        out.push(b);
    }
}

/// A line-protocol reader for tests: enough of the grammar to check what
/// [`Line`] writes, field by field, written from the InfluxDB 1.x reference
/// rather than from the writer.
#[cfg(test)]
pub(crate) mod parse {
    use std::collections::BTreeMap;

    /// A field's value as line protocol types it.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        /// `123i`.
        Integer(i64),
        /// `1.5`, `2`, `1e-7`.
        Float(f64),
        /// `"text"`.
        String(String),
    }

    /// One parsed line.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Point {
        pub measurement: String,
        pub tags: BTreeMap<String, String>,
        pub fields: BTreeMap<String, Value>,
        /// Field keys in the order written.
        pub order: Vec<String>,
        pub timestamp: Option<i128>,
    }

    /// Reads an unquoted token up to one of `stops`, unescaping `\x`.
    fn token(s: &[u8], i: &mut usize, stops: &[u8]) -> String {
        let mut t = Vec::new();
        while *i < s.len() && !stops.contains(&s[*i]) {
            if s[*i] == b'\\' && *i + 1 < s.len() {
                *i += 1;
            }
            t.push(s[*i]);
            *i += 1;
        }
        String::from_utf8(t).expect("utf-8")
    }

    /// Parses one line (with or without its newline); panics on bad syntax.
    pub fn line(text: &str) -> Point {
        let s = text.strip_suffix('\n').unwrap_or(text).as_bytes();
        assert!(!s.contains(&b'\n'), "one line: {text:?}");
        let mut i = 0;
        let measurement = token(s, &mut i, b", ");
        let mut tags = BTreeMap::new();
        while i < s.len() && s[i] == b',' {
            i += 1;
            let k = token(s, &mut i, b"=");
            assert_eq!(s[i], b'=', "tag {k} has a value");
            i += 1;
            let v = token(s, &mut i, b", ");
            assert!(!v.is_empty(), "tag {k} is not empty");
            tags.insert(k, v);
        }
        assert_eq!(s.get(i), Some(&b' '), "fields follow the tags: {text:?}");
        i += 1;
        let mut fields = BTreeMap::new();
        let mut order = Vec::new();
        loop {
            let k = token(s, &mut i, b"=");
            assert_eq!(s[i], b'=', "field {k} has a value");
            i += 1;
            let v = if s[i] == b'"' {
                i += 1;
                let mut t = Vec::new();
                while s[i] != b'"' {
                    if s[i] == b'\\' && matches!(s[i + 1], b'"' | b'\\') {
                        i += 1;
                    }
                    t.push(s[i]);
                    i += 1;
                }
                i += 1;
                Value::String(String::from_utf8(t).unwrap())
            } else {
                let raw = token(s, &mut i, b", ");
                match raw.strip_suffix('i') {
                    Some(int) => {
                        Value::Integer(int.parse().unwrap_or_else(|e| panic!("{raw}: {e}")))
                    }
                    None => Value::Float(raw.parse().unwrap_or_else(|e| panic!("{raw}: {e}"))),
                }
            };
            assert!(fields.insert(k.clone(), v).is_none(), "field {k} twice");
            order.push(k);
            match s.get(i) {
                Some(b',') => i += 1,
                _ => break,
            }
        }
        let timestamp = match s.get(i) {
            None => None,
            Some(b' ') => Some(
                std::str::from_utf8(&s[i + 1..])
                    .unwrap()
                    .parse()
                    .expect("an integer timestamp"),
            ),
            Some(c) => panic!("unexpected {:?} in {text:?}", *c as char),
        };
        Point {
            measurement,
            tags,
            fields,
            order,
            timestamp,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::parse::{self, Value};
    use super::*;
    use crate::telemetry::columns::select;
    use crate::wire::{Packet, Puddle, Wheels};

    /// 1,700,000,000.016 s after the epoch, in nanoseconds.
    const STAMP: i128 = 1_700_000_000_016_000_000;

    fn line(columns: &[Column], bytes: &[u8], format: Format) -> Option<String> {
        let packet = Packet::new_checked(bytes, format).unwrap();
        let frame = Values::new(
            packet,
            UNIX_EPOCH + Duration::from_nanos(STAMP as u64),
            0.25,
        );
        let mut out = b"kept".to_vec();
        let written = Line::new(columns).write(&frame, &mut out);
        assert_eq!(&out[..4], b"kept", "appended after what was there");
        let text = String::from_utf8(out[4..].to_vec()).unwrap();
        if written {
            assert!(text.ends_with('\n'), "{text:?}");
            Some(text)
        } else {
            assert_eq!(text, "", "nothing appended");
            None
        }
    }

    fn fh6(gear: u8, puddle: i32) -> Vec<u8> {
        let mut buf = vec![0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        p.set_timestamp_ms(4_000_000_000);
        p.set_engine_max_rpm(8_250.0);
        p.set_current_engine_rpm(6_543.25);
        p.set_acceleration_x(9.806_65);
        p.set_yaw(1e-7);
        p.set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(puddle); 4]));
        p.set_car_ordinal(3_141);
        p.set_car_class(5);
        p.set_drivetrain_type(1);
        p.set_car_group(26).unwrap();
        p.set_speed(41.5).unwrap();
        p.set_tire_temp(Wheels::from_array([212.0, 194.0, 176.0, 158.0]))
            .unwrap();
        p.set_gear(gear).unwrap();
        p.set_steer(-100).unwrap();
        buf
    }

    #[track_caller]
    fn float(p: &parse::Point, name: &str) -> f64 {
        match p.fields.get(name) {
            Some(Value::Float(v)) => *v,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[track_caller]
    fn integer(p: &parse::Point, name: &str) -> i64 {
        match p.fields.get(name) {
            Some(Value::Integer(v)) => *v,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn every_field_by_its_json_name_with_tags_and_timestamp() {
        let text = line(&Column::all(), &fh6(3, 1), Format::Fh6).unwrap();
        let p = parse::line(&text);
        assert_eq!(p.measurement, "forza");
        assert_eq!(p.tags["game"], "fh6");
        assert_eq!(p.tags["car"], "3141");
        assert_eq!(p.tags["class"], "S2");
        assert_eq!(p.tags.len(), 3);
        assert_eq!(p.timestamp, Some(STAMP));
        assert_eq!(integer(&p, "IsRaceOn"), 1);
        assert_eq!(integer(&p, "TimestampMS"), 4_000_000_000);
        assert_eq!(float(&p, "EngineMaxRpm") as f32, 8_250.0);
        assert_eq!(float(&p, "CurrentEngineRpm") as f32, 6_543.25);
        assert_eq!(float(&p, "Yaw") as f32, 1e-7);
        assert_eq!(float(&p, "WheelInPuddleRR"), 1.0, "a flag as a float");
        assert_eq!(integer(&p, "CarOrdinal"), 3_141);
        assert_eq!(integer(&p, "CarClass"), 5);
        assert_eq!(integer(&p, "CarGroup"), 26);
        assert_eq!(float(&p, "Speed") as f32, 41.5);
        assert_eq!(float(&p, "TireTempFR") as f32, 194.0);
        assert_eq!(integer(&p, "Gear"), 3);
        assert_eq!(integer(&p, "Steer"), -100);
        assert_eq!(float(&p, "speed_kmh") as f32, 41.5 * 3.6);
        assert_eq!(float(&p, "g_lat") as f32, 1.0);
        assert_eq!(float(&p, "tire_temp_c_fl") as f32, 100.0);
        assert_eq!(float(&p, "recv_s"), 0.25);
        assert_eq!(p.fields["gear_label"], Value::String("3".to_owned()));
        assert_eq!(p.fields["drivetrain"], Value::String("RWD".to_owned()));
        // Tags and the timestamp, not fields; fh6 lacks the FM2023 extras.
        for absent in [
            "recv_time",
            "format",
            "car_class_letter",
            "TireWearFL",
            "TrackOrdinal",
        ] {
            assert!(!p.fields.contains_key(absent), "{absent} in {text}");
        }
        // Every other column is a field, in the selection's order.
        let expected: Vec<String> = Column::all()
            .iter()
            .filter(|c| Kind::of(c).is_some())
            .map(Column::name)
            .filter(|n| !n.starts_with("TireWear") && n != "TrackOrdinal")
            .collect();
        assert_eq!(p.order, expected);
    }

    #[test]
    fn a_fields_type_is_the_same_in_every_format_and_frame() {
        let mut types: std::collections::BTreeMap<String, std::mem::Discriminant<Value>> =
            Default::default();
        let mut frames: Vec<(Vec<u8>, Format)> = vec![
            (fh6(0, 0), Format::Fh6),
            (fh6(11, 1), Format::Fh6),
            (fh6(12, 0), Format::Fh6),
        ];
        for format in Format::ALL {
            let mut buf = vec![0u8; format.len()];
            let mut p = Packet::new_checked(&mut buf[..], format).unwrap();
            p.set_is_race_on(1);
            p.set_wheel_in_puddle(Wheels::from_array([Puddle::Depth(0.5); 4]));
            p.set_current_engine_rpm(7_000.0);
            frames.push((buf, format));
        }
        for (bytes, format) in &frames {
            let p = parse::line(&line(&Column::all(), bytes, *format).unwrap());
            for (name, value) in &p.fields {
                let t = std::mem::discriminant(value);
                assert_eq!(
                    *types.entry(name.clone()).or_insert(t),
                    t,
                    "{name} changed type in {format}: {value:?}"
                );
            }
        }
        assert!(types.len() > 100, "{} fields seen", types.len());
    }

    #[test]
    fn absent_and_non_finite_values_are_left_out() {
        let mut buf = vec![0u8; 232];
        let mut p = Packet::new_checked(&mut buf[..], Format::Sled).unwrap();
        p.set_is_race_on(1);
        p.set_current_engine_rpm(f32::NAN);
        p.set_engine_max_rpm(f32::INFINITY);
        p.set_engine_idle_rpm(800.0);
        p.set_car_ordinal(-2);
        let text = line(&Column::all(), &buf, Format::Sled).unwrap();
        assert!(
            !text.contains("NaN") && !text.to_lowercase().contains("inf"),
            "{text}"
        );
        let p = parse::line(&text);
        assert_eq!(p.tags["car"], "-2");
        assert!(!p.tags.contains_key("class"), "sled has no class scale");
        assert!(!p.fields.contains_key("CurrentEngineRpm"));
        assert!(!p.fields.contains_key("EngineMaxRpm"));
        assert!(!p.fields.contains_key("rev_fraction"), "NaN / inf");
        assert!(!p.fields.contains_key("Speed"), "sled has no Dash");
        assert!(!p.fields.contains_key("gear_label"));
        assert_eq!(float(&p, "EngineIdleRpm"), 800.0);
    }

    #[test]
    fn a_line_with_no_value_is_not_written() {
        let columns = select("Speed,gear_label,recv_time,format").unwrap();
        assert_eq!(line(&columns, &[0u8; 232], Format::Sled), None);
        let text = line(&columns, &fh6(0, 0), Format::Fh6).unwrap();
        let p = parse::line(&text);
        assert_eq!(p.order, ["Speed", "gear_label"]);
        assert_eq!(p.fields["gear_label"], Value::String("R".to_owned()));
    }

    #[test]
    fn a_menu_frame_has_no_class_and_no_derived_value() {
        let mut buf = vec![0u8; 324];
        Packet::new_checked(&mut buf[..], Format::Fh6)
            .unwrap()
            .set_timestamp_ms(77);
        let p = parse::line(&line(&Column::all(), &buf, Format::Fh6).unwrap());
        assert_eq!(p.tags.get("class"), None);
        assert_eq!(p.tags["car"], "0");
        assert_eq!(integer(&p, "IsRaceOn"), 0);
        assert_eq!(integer(&p, "TimestampMS"), 77);
        assert!(!p.fields.contains_key("speed_kmh"));
        assert!(!p.fields.contains_key("gear_label"));
    }

    #[test]
    fn tags_keys_and_strings_are_escaped() {
        let mut out = Vec::new();
        escape(&mut out, "a b,c=d\\e\"", Escape::Tag);
        assert_eq!(out, b"a\\ b\\,c\\=d\\e\"");
        out.clear();
        escape(&mut out, "two\nlines", Escape::Key);
        assert_eq!(out, b"two\\ lines");
        out.clear();
        escape(&mut out, "say \"hi\" \\o/", Escape::String);
        assert_eq!(out, b"say \\\"hi\\\" \\\\o/");
        // And the test reader reads them back.
        let p = parse::line("m,t=a\\ b\\,c\\=d s=\"say \\\"hi\\\" \\\\o/\",n=1i 5\n");
        assert_eq!(p.tags["t"], "a b,c=d");
        assert_eq!(p.fields["s"], Value::String("say \"hi\" \\o/".to_owned()));
        assert_eq!(p.fields["n"], Value::Integer(1));
        assert_eq!(p.timestamp, Some(5));
    }
}
