//! Frames as text for the tools that want named values: one JSON object (the
//! object `export --as jsonl` writes) or one InfluxDB line-protocol line per frame.
//!
//! An [`Encoder`] is made once per (encoding, field selection) and fed one frame
//! at a time ([`Frame`]: the datagram's bytes, the format it was read as, when it
//! was received); it writes into a caller-owned `Vec<u8>` kept between frames, so
//! once that buffer has grown, encoding allocates nothing (tests/no_alloc/output.rs).
//! Everything a frame's text needs that does not change between frames (the
//! column names, quoted and escaped, each with its separator) is made by
//! [`Encoder::new`].
//!
//! The names and the selection rules are export's ([`crate::telemetry::columns`]):
//! the Data Out names (`Speed`, `CurrentEngineRpm`, `TireTempFL` …) and the
//! values [`crate::telemetry::Telemetry`] derives (`speed_kmh`, `gear_label`,
//! `g_lat` …). JSON writes `null` for what the frame's format lacks and for a
//! value that is not a finite number; the influx line leaves such a value out.
//!
//! A menu frame ([`is_menu_frame`]: IsRaceOn 0, every byte 0 but TimestampMS)
//! describes no car. JSON writes it (its derived values `null`, which tells a
//! reader the race is over); an influx line would be a point of a car 0 at 0
//! rpm, a series no chart wants (issue 30), so none is written.

pub mod influx;
pub mod json;
pub mod mqtt;

use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use crate::telemetry::columns::{self, Cell, Column, Row, UnknownColumns};
use crate::telemetry::{is_menu_frame, Telemetry};
use crate::wire::{Format, Packet, Scalar};

/// What an output writes for each frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `json`: one JSON object, the one `export --as jsonl` writes.
    Json,
    /// `influx`: one InfluxDB line-protocol line, ending in a newline.
    Influx,
}

impl Encoding {
    /// Both encodings, in the order messages list them.
    pub const ALL: [Encoding; 2] = [Encoding::Json, Encoding::Influx];

    /// The name users write: `json` or `influx`.
    pub const fn id(self) -> &'static str {
        match self {
            Encoding::Json => "json",
            Encoding::Influx => "influx",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl FromStr for Encoding {
    type Err = String;

    /// `json` or `influx`, ignoring case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.id().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("{s:?} is no text encoding: write json or influx"))
    }
}

/// The columns an output writes, in order: every column, or those a list of
/// names chose by export's `--fields` rules ([`columns::select_names`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    columns: Vec<Column>,
}

impl Selection {
    /// Every column, in export's order.
    pub fn all() -> Selection {
        Selection {
            columns: Column::all(),
        }
    }

    /// The columns `names` choose, in their order: names ignore case, and a
    /// per-wheel group (`TireTemp`) chooses its four wheels. Every name that is
    /// no column is in the error.
    pub fn names<'a>(
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Selection, UnknownColumns> {
        Ok(Selection {
            columns: columns::select_names(names)?,
        })
    }

    /// The columns, in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }
}

/// How one column's value is read from a row, worked out once: a raw field's
/// place and type in each format (so a frame reads it with one lookup), any
/// other column by the column itself. The values are [`Column::value`]'s.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Read {
    /// A field of the table that is an F32 in every format that has it
    /// (most of them): where it is, by [`Format::index`]; `None` where the
    /// format lacks it. Read straight into the float, without a [`Cell`].
    F32([Option<usize>; Format::ALL.len()]),
    /// Any other field of the table: where it is and how it is typed, by
    /// [`Format::index`]; `None` where the format lacks it.
    Raw([Option<(usize, Scalar)>; Format::ALL.len()]),
    /// Every other column.
    Column(Column),
}

impl Read {
    /// How `column` is read.
    pub(crate) fn new(column: &Column) -> Read {
        match *column {
            Column::Raw { field, wheel } => {
                let places = Format::ALL.map(|f| columns::raw_location(&field, wheel, f));
                if places.iter().flatten().all(|&(_, s)| s == Scalar::F32) {
                    Read::F32(places.map(|p| p.map(|(at, _)| at)))
                } else {
                    Read::Raw(places)
                }
            }
            other => Read::Column(other),
        }
    }

    /// The column's value in `row`.
    #[inline]
    pub(crate) fn cell(&self, row: &Row<'_>) -> Cell {
        match self {
            Read::F32(places) => match places[row.packet.format().index()] {
                Some(at) => columns::read_scalar(row.packet.as_bytes(), at, Scalar::F32),
                None => Cell::Null,
            },
            Read::Raw(places) => match places[row.packet.format().index()] {
                Some((at, scalar)) => columns::read_scalar(row.packet.as_bytes(), at, scalar),
                None => Cell::Null,
            },
            Read::Column(column) => column.value(row),
        }
    }
}

/// The F32 at `at` of `bytes` (a packet, checked for its format's length);
/// `None` when it is not there.
#[inline(always)]
pub(crate) fn f32_at(bytes: &[u8], at: usize) -> Option<f32> {
    let b = bytes.get(at..at + 4)?;
    Some(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Bytes a [`Key`] copies with one fixed-size copy: room for the longest
/// column name with its quotes and punctuation (`,"NormalizedSuspensionTravelFL":`).
const KEY_SLOT: usize = 32;

/// A column's key with its punctuation, made once and copied into each frame's
/// text. A short one (all of today's) is copied as a fixed-size block and the
/// text cut back to its length: the compiler makes that a few moves, where a
/// copy of unknown length is a call to `memcpy`, and a frame copies a hundred.
#[derive(Debug, Clone)]
pub(crate) enum Key {
    /// At most [`KEY_SLOT`] bytes, padded.
    Short {
        /// The key, then padding.
        bytes: [u8; KEY_SLOT],
        /// How many of `bytes` are the key.
        len: u8,
    },
    /// Longer.
    Long(Box<[u8]>),
}

impl Key {
    /// The key `text`.
    pub(crate) fn new(text: &[u8]) -> Key {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= KEY_SLOT => {
                let mut bytes = [0u8; KEY_SLOT];
                bytes[..text.len()].copy_from_slice(text);
                Key::Short { bytes, len }
            }
            _ => Key::Long(text.into()),
        }
    }

    /// Appends it to `out`.
    #[inline]
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            Key::Short { bytes, len } => {
                let at = out.len();
                out.extend_from_slice(bytes);
                out.truncate(at + usize::from(*len));
            }
            Key::Long(bytes) => out.extend_from_slice(bytes),
        }
    }
}

/// One datagram to encode.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Its bytes.
    pub payload: &'a [u8],
    /// The format it was read as (configured, or detected).
    pub format: Format,
    /// When it was received, by the wall clock.
    pub time: SystemTime,
}

/// Why a frame produced no text. Counted, never fatal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// The bytes are not a packet of the frame's format (the wrong length).
    NotAPacket,
    /// An influx line would have no field: every selected value is absent in
    /// the frame's format or not a finite number.
    NoValue,
    /// A menu frame, which describes no car, for an influx line.
    MenuFrame,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Skipped::NotAPacket => "not a packet of its format",
            Skipped::NoValue => "no selected value in this frame",
            Skipped::MenuFrame => "a menu frame, which describes no car",
        })
    }
}

/// The writer of one encoding, with everything made once.
#[derive(Debug, Clone)]
enum Writer {
    Json(json::Object),
    Influx(influx::Line),
}

/// Encodes frames as text: one per (encoding, selection), kept between frames.
///
/// `recv_s` counts from the first frame this encoder encoded.
#[derive(Debug, Clone)]
pub struct Encoder {
    writer: Writer,
    first: Option<SystemTime>,
}

impl Encoder {
    /// An encoder writing `selection` as `encoding`.
    pub fn new(encoding: Encoding, selection: &Selection) -> Encoder {
        let columns = selection.columns();
        Encoder {
            writer: match encoding {
                Encoding::Json => Writer::Json(json::Object::new(columns)),
                Encoding::Influx => Writer::Influx(influx::Line::new(columns)),
            },
            first: None,
        }
    }

    /// What it writes.
    pub fn encoding(&self) -> Encoding {
        match self.writer {
            Writer::Json(_) => Encoding::Json,
            Writer::Influx(_) => Encoding::Influx,
        }
    }

    /// Replaces the contents of `out` with `frame`'s text. On `Err`, `out` is
    /// empty. Allocates nothing once `out` has room for the text.
    pub fn encode(&mut self, frame: &Frame<'_>, out: &mut Vec<u8>) -> Result<(), Skipped> {
        out.clear();
        let packet =
            Packet::new_checked(frame.payload, frame.format).map_err(|_| Skipped::NotAPacket)?;
        if matches!(self.writer, Writer::Influx(_)) && is_menu_frame(&packet) {
            return Err(Skipped::MenuFrame);
        }
        let first = *self.first.get_or_insert(frame.time);
        let since_start = frame
            .time
            .duration_since(first)
            .map_or(0.0, |e| e.as_secs_f64());
        let telemetry = Telemetry::decode(&packet);
        let row = Row {
            time: frame.time,
            since_start,
            packet,
            telemetry: &telemetry,
        };
        match &self.writer {
            Writer::Json(object) => {
                object.write(&row, out);
                Ok(())
            }
            Writer::Influx(line) => {
                if line.write(&row, out) {
                    Ok(())
                } else {
                    out.clear();
                    Err(Skipped::NoValue)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_read_gives_the_columns_value_in_every_format() {
        use crate::wire::{Puddle, Wheels};
        for format in Format::ALL {
            let mut buf = vec![0u8; format.len()];
            let mut p = Packet::new_checked(&mut buf[..], format).unwrap();
            p.set_is_race_on(1);
            p.set_timestamp_ms(4_000_000_000);
            p.set_current_engine_rpm(f32::NAN);
            p.set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(1); 4]));
            p.set_car_ordinal(-7);
            let _ = p.set_speed(41.5);
            let _ = p.set_steer(-100);
            let _ = p.set_car_group(26);
            let _ = p.set_track_ordinal(860);
            let packet = Packet::new_checked(&buf[..], format).unwrap();
            let telemetry = Telemetry::decode(&packet);
            let row = Row {
                time: UNIX_EPOCH,
                since_start: 0.5,
                packet,
                telemetry: &telemetry,
            };
            for column in Column::all() {
                let (read, value) = (Read::new(&column).cell(&row), column.value(&row));
                // NaN is not equal to itself: compare the bits.
                match (read, value) {
                    (Cell::Float(a), Cell::Float(b)) => {
                        assert_eq!(a.to_bits(), b.to_bits(), "{format} {}", column.name())
                    }
                    _ => assert_eq!(read, value, "{format} {}", column.name()),
                }
            }
        }
    }

    #[test]
    fn keys_short_and_long_are_appended_whole() {
        let mut out = b"x".to_vec();
        for text in [
            &b""[..],
            b",\"Speed\":",
            &[b'k'; KEY_SLOT],
            &[b'l'; KEY_SLOT + 1],
        ] {
            let key = Key::new(text);
            assert_eq!(matches!(key, Key::Short { .. }), text.len() <= KEY_SLOT);
            out.truncate(1);
            key.write(&mut out);
            assert_eq!(&out[1..], text);
        }
    }

    #[test]
    fn encodings_parse_by_name() {
        assert_eq!("json".parse::<Encoding>(), Ok(Encoding::Json));
        assert_eq!(" Influx ".parse::<Encoding>(), Ok(Encoding::Influx));
        let e = "csv".parse::<Encoding>().unwrap_err();
        assert!(e.contains("\"csv\"") && e.contains("json or influx"), "{e}");
    }

    #[test]
    fn a_selection_names_every_unknown_field() {
        let s = Selection::names(["Speed", "TireTemp"]).unwrap();
        let names: Vec<String> = s.columns().iter().map(Column::name).collect();
        assert_eq!(
            names,
            [
                "Speed",
                "TireTempFL",
                "TireTempFR",
                "TireTempRL",
                "TireTempRR"
            ]
        );
        let e = Selection::names(["Speed", "Sped", "gear_lable"]).unwrap_err();
        assert_eq!(e.unknown, ["Sped", "gear_lable"]);
        assert!(Selection::names([]).is_err(), "an empty selection");
    }

    #[test]
    fn a_datagram_of_the_wrong_length_is_skipped_with_an_empty_buffer() {
        let mut encoder = Encoder::new(Encoding::Json, &Selection::all());
        let mut out = b"dirty".to_vec();
        let frame = Frame {
            payload: &[0; 100],
            format: Format::Fh6,
            time: UNIX_EPOCH,
        };
        assert_eq!(encoder.encode(&frame, &mut out), Err(Skipped::NotAPacket));
        assert!(out.is_empty());
    }

    /// Issue 30: a menu frame is a JSON object with its raw fields and no
    /// derived value, and no influx line, in every format; a frame with
    /// IsRaceOn 0 that still describes a car is a line.
    #[test]
    fn an_influx_encoder_writes_no_menu_frame_and_json_does() {
        use crate::wire::Wheels;
        let mut json = Encoder::new(Encoding::Json, &Selection::all());
        let mut influx = Encoder::new(Encoding::Influx, &Selection::all());
        let mut out = b"dirty".to_vec();
        for format in Format::ALL {
            let mut menu = vec![0u8; format.len()];
            Packet::new_checked(&mut menu[..], format)
                .unwrap()
                .set_timestamp_ms(77);
            let frame = Frame {
                payload: &menu,
                format,
                time: UNIX_EPOCH,
            };
            assert_eq!(
                influx.encode(&frame, &mut out),
                Err(Skipped::MenuFrame),
                "{format}"
            );
            assert!(out.is_empty(), "{format}");
            json.encode(&frame, &mut out).unwrap();
            let o: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!((&o["IsRaceOn"], &o["TimestampMS"]), (&0.into(), &77.into()));
            assert_eq!(o["CarOrdinal"], 0, "{format}");
            assert!(
                o["g_lat"].is_null() && o["rev_fraction"].is_null(),
                "{format}"
            );
            // Paused with a car: IsRaceOn 0, the rest as the car is.
            let mut paused = menu.clone();
            let mut p = Packet::new_checked(&mut paused[..], format).unwrap();
            p.set_car_ordinal(3_141);
            let _ = p.set_tire_temp(Wheels::from_array([180.0; 4]));
            let frame = Frame {
                payload: &paused,
                format,
                time: UNIX_EPOCH,
            };
            influx.encode(&frame, &mut out).unwrap();
            let line = String::from_utf8(out.clone()).unwrap();
            assert!(
                line.starts_with(&format!("forza,game={format},car=3141"))
                    && line.contains(",IsRaceOn=0i,"),
                "{line}"
            );
        }
    }

    #[test]
    fn recv_s_counts_from_the_first_frame_encoded() {
        let selection = Selection::names(["recv_s"]).unwrap();
        let mut encoder = Encoder::new(Encoding::Json, &selection);
        let mut out = Vec::new();
        let packet = [0u8; 232];
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut at = |t: SystemTime, out: &mut Vec<u8>| {
            let frame = Frame {
                payload: &packet,
                format: Format::Sled,
                time: t,
            };
            encoder.encode(&frame, out).unwrap();
            serde_json::from_slice::<serde_json::Value>(out).unwrap()["recv_s"].clone()
        };
        assert_eq!(at(t0, &mut out), 0.0);
        assert_eq!(at(t0 + Duration::from_millis(1_500), &mut out), 1.5);
        // A clock stepped back reads as the start, never negative.
        assert_eq!(at(t0 - Duration::from_secs(1), &mut out), 0.0);
    }
}
