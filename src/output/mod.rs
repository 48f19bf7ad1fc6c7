//! Frames as text for the tools that want named values: one JSON object (the
//! object `export --as jsonl` writes) or one InfluxDB line-protocol line per frame.
//!
//! An [`Encoder`] is made once per (encoding, field selection) and fed one frame
//! at a time ([`Frame`]: the datagram's bytes, the format it was read as, when it
//! was received); it writes into a caller-owned `Vec<u8>` kept between frames, so
//! once that buffer has grown, encoding allocates nothing (tests/no_alloc/output.rs).
//! Everything a frame's text needs that does not change between frames (the
//! column names, quoted and escaped, each with its separator; where each
//! field is in each format) is made by [`Encoder::new`], so a frame walks one
//! table, its format's, and reads only the fields its columns need: a derived
//! value no column asks for is not computed.
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
pub mod records;

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::telemetry::columns::{self, Cell, Column, Derived, UnknownColumns};
use crate::telemetry::{is_menu_frame, Gear};
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

/// How one column's value is read from a frame of one format, worked out
/// once per (column, format) by [`Value::new`]: a field's place and type in
/// that format, so a frame reads it with no lookup; a derived value by the
/// fields it needs alone ([`Derived::read`]). The values are [`Column::value`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    /// A field the format lacks: always absent.
    Absent,
    /// An F32 field, at this offset.
    F32(usize),
    /// An integer field, at this offset, of this type.
    Int(usize, Scalar),
    /// A derived value (of this wheel, 0 for a single value).
    Derived(Derived, usize),
    /// `recv_time`.
    RecvTime,
    /// `recv_s`.
    RecvSeconds,
    /// `format`.
    Format,
}

impl Value {
    /// How `column` is read from a `format` frame.
    pub(crate) fn new(column: &Column, format: Format) -> Value {
        match *column {
            Column::RecvTime => Value::RecvTime,
            Column::RecvSeconds => Value::RecvSeconds,
            Column::Format => Value::Format,
            Column::Raw { field, wheel } => match columns::raw_location(&field, wheel, format) {
                Some((at, Scalar::F32)) => Value::F32(at),
                Some((at, scalar)) => Value::Int(at, scalar),
                None => Value::Absent,
            },
            Column::Derived { value, wheel } => Value::Derived(value, wheel.unwrap_or(0)),
        }
    }

    /// Its value in `frame` (a frame of the format it was made for).
    #[inline]
    pub(crate) fn cell(self, frame: &Values<'_>) -> Cell {
        let bytes = frame.packet.as_bytes();
        match self {
            Value::Absent => Cell::Null,
            Value::F32(at) => f32_at(bytes, at).map_or(Cell::Null, Cell::Float),
            Value::Int(at, scalar) => columns::read_scalar(bytes, at, scalar),
            Value::Derived(_, _) if frame.menu => Cell::Null,
            Value::Derived(value, wheel) => value.read(&frame.packet, wheel),
            Value::RecvTime => Cell::Time(frame.time),
            Value::RecvSeconds => Cell::Seconds(frame.since_start),
            Value::Format => Cell::Text(frame.packet.format().id()),
        }
    }
}

/// One frame as the writers read it: the packet, checked, and what is known of
/// it beside its bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Values<'a> {
    /// The packet.
    pub(crate) packet: Packet<&'a [u8]>,
    /// Whether it is a menu frame ([`is_menu_frame`]): no derived value.
    pub(crate) menu: bool,
    /// When it was received.
    pub(crate) time: SystemTime,
    /// Seconds since the encoder's first frame.
    pub(crate) since_start: f64,
}

impl<'a> Values<'a> {
    /// `packet`, received at `time`, `since_start` seconds after the first frame.
    pub(crate) fn new(packet: Packet<&'a [u8]>, time: SystemTime, since_start: f64) -> Self {
        Values {
            menu: is_menu_frame(&packet),
            packet,
            time,
            since_start,
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
/// key with its quotes, punctuation and a JSON `null`
/// (`,"NormalizedSuspensionTravelFL":null`).
const KEY_SLOT: usize = 40;

/// A column's key with its punctuation, made once and copied into each frame's
/// text. A short one (all of today's) is copied as a fixed-size block of which
/// only its length counts ([`Text::key`]): the compiler makes that a few moves,
/// where a copy of unknown length is a call to `memcpy`, and a frame copies a
/// hundred.
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

    /// How many bytes it writes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Key::Short { len, .. } => usize::from(*len),
            Key::Long(bytes) => bytes.len(),
        }
    }

    /// Appends it to `out`.
    #[cfg(test)]
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let mut room = Vec::new();
        let mut text = Text::new(&mut room);
        text.key(self);
        out.extend_from_slice(text.as_bytes());
    }
}

/// The most bytes one value's text takes but a [`Value::F32`]'s or a
/// [`Value::Int`]'s (a `recv_time` quoted is 29, a word a few): what a
/// writer's room for a frame's text is made for.
pub(crate) const VALUE_MAX: usize = 32;

/// The most bytes an f32's shortest text takes (`-1.1754944e-38`).
const F32_MAX: usize = 16;

/// The most bytes an integer's text takes (`-9223372036854775808`).
const INT_MAX: usize = 20;

impl Value {
    /// The most bytes its text takes.
    pub(crate) fn most(self) -> usize {
        match self {
            Value::Absent => 0,
            Value::F32(_) => F32_MAX,
            Value::Int(_, _) => INT_MAX,
            _ => VALUE_MAX,
        }
    }
}

/// A frame's text being written into a buffer its writer keeps between frames
/// (a [`json::Object`]'s, an [`influx::Line`]'s): the buffer is kept as long as
/// the longest text, so keys and values are copied in as blocks of a fixed
/// size (a few moves each, where a copy of unknown length is a call to
/// `memcpy`, and a frame makes two hundred) with nothing to clear first; the
/// text is then appended to the caller's buffer with one copy.
pub(crate) struct Text<'a> {
    /// The room: its length is how much there is; what lies past `at` is
    /// a former text's.
    room: &'a mut Vec<u8>,
    /// Where the text ends.
    at: usize,
}

impl<'a> Text<'a> {
    /// An empty text in `room` (more room is made as needed).
    #[inline]
    pub(crate) fn new(room: &'a mut Vec<u8>) -> Self {
        Text { room, at: 0 }
    }

    /// The text.
    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.room[..self.at]
    }

    /// Its length.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.at
    }

    /// Cuts it back to `len` bytes.
    #[inline(always)]
    pub(crate) fn truncate(&mut self, len: usize) {
        self.at = self.at.min(len);
    }

    /// Sets its byte at `i` (below its length).
    #[inline(always)]
    pub(crate) fn set(&mut self, i: usize, b: u8) {
        if i < self.at {
            self.room[i] = b;
        }
    }

    /// The next `N` bytes of `out`, made if they are not there yet.
    #[inline(always)]
    fn slot<const N: usize>(&mut self) -> &mut [u8; N] {
        if self.room.len() < self.at + N {
            self.grow(N);
        }
        (&mut self.room[self.at..self.at + N])
            .try_into()
            .expect("a slice of N bytes")
    }

    #[cold]
    fn grow(&mut self, n: usize) {
        self.room.resize(self.at + n, 0);
    }

    /// Appends `b`.
    #[inline(always)]
    pub(crate) fn byte(&mut self, b: u8) {
        self.slot::<1>()[0] = b;
        self.at += 1;
    }

    /// Appends `key`.
    #[inline(always)]
    pub(crate) fn key(&mut self, key: &Key) {
        match key {
            Key::Short { bytes, len } => {
                self.slot::<KEY_SLOT>().copy_from_slice(bytes);
                self.at += usize::from(*len);
            }
            Key::Long(bytes) => self.all(bytes),
        }
    }

    /// Appends `text` with one copy of its length.
    fn all(&mut self, text: &[u8]) {
        let at = self.at;
        if self.room.len() < at + text.len() {
            self.grow(text.len());
        }
        self.room[at..at + text.len()].copy_from_slice(text);
        self.at += text.len();
    }

    /// Appends `text`, a number's or a word's: at most [`VALUE_MAX`] bytes
    /// are copied as two blocks of a fixed size that overlap; a longer text
    /// with one copy of its length.
    #[inline(always)]
    pub(crate) fn put(&mut self, text: &[u8]) {
        let n = text.len();
        if n > VALUE_MAX {
            return self.all(text);
        }
        let slot = self.slot::<VALUE_MAX>();
        if n >= 16 {
            slot[..16].copy_from_slice(&text[..16]);
            slot[n - 16..n].copy_from_slice(&text[n - 16..]);
        } else if n >= 8 {
            slot[..8].copy_from_slice(&text[..8]);
            slot[n - 8..n].copy_from_slice(&text[n - 8..]);
        } else if n >= 4 {
            slot[..4].copy_from_slice(&text[..4]);
            slot[n - 4..n].copy_from_slice(&text[n - 4..]);
        } else if n > 0 {
            slot[0] = text[0];
            slot[n / 2] = text[n / 2];
            slot[n - 1] = text[n - 1];
        }
        self.at += n;
    }

    /// Appends `v`'s shortest text, serde_json's (zmij's). `v` is finite.
    ///
    /// A whole number below 2^24 is written as its digits and `.0` without
    /// zmij: every integer of that range is an f32 and so is no other number
    /// within 1/2 of it, so its own digits are the shortest that read back,
    /// and zmij writes those, in full below 10^13 (a test compares a sample;
    /// a run outside the tests compared every such f32, issue 33).
    #[inline(always)]
    pub(crate) fn f32(&mut self, v: f32) {
        // Truncated toward zero, so equal to `v` for a whole `v` alone; 0
        // (and -0.0) left to zmij, for the sign.
        let whole = v as i32;
        if whole as f32 == v && whole != 0 && whole.unsigned_abs() < 1 << 24 {
            self.put(itoa::Buffer::new().format(whole).as_bytes());
            self.put(b".0");
        } else {
            self.put(zmij::Buffer::new().format_finite(v).as_bytes());
        }
    }

    /// Appends `v`'s shortest text, serde_json's (zmij's). `v` is finite.
    #[inline]
    pub(crate) fn f64(&mut self, v: f64) {
        self.put(zmij::Buffer::new().format_finite(v).as_bytes());
    }

    /// Appends `v` in decimal.
    #[inline(always)]
    pub(crate) fn int(&mut self, v: i64) {
        self.put(itoa::Buffer::new().format(v).as_bytes());
    }

    /// Appends a gear as a driver reads it: `R`, `N` or its number ([`Gear`]'s text).
    #[inline]
    pub(crate) fn gear(&mut self, gear: Gear) {
        match gear {
            Gear::Reverse => self.byte(b'R'),
            Gear::Neutral => self.byte(b'N'),
            Gear::Forward(n) | Gear::Other(n) => self.put(itoa::Buffer::new().format(n).as_bytes()),
        }
    }

    /// Appends what `write` appends to a `Vec` (the rare ways: text to escape).
    #[cold]
    pub(crate) fn with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let room = self.room.len();
        self.room.truncate(self.at);
        write(self.room);
        self.at = self.room.len();
        if self.room.len() < room {
            self.room.resize(room, 0);
        }
    }
}

/// Seconds as written: rounded to the microsecond ([`Cell::Seconds`]).
#[inline]
pub(crate) fn micros(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// `time` as RFC 3339 UTC to the microsecond, the text humantime's
/// `format_rfc3339_micros` writes (`2023-11-14T22:13:20.016000Z`), made with
/// digit pairs rather than `core::fmt`; `None` outside the years 1970 to 9999,
/// where humantime writes nothing.
pub(crate) fn rfc3339_micros(time: SystemTime) -> Option<[u8; 27]> {
    // 10000-01-01T00:00:00Z: humantime's end.
    const END: u64 = 253_402_300_800;
    let since = time.duration_since(UNIX_EPOCH).ok()?;
    let secs = since.as_secs();
    if secs >= END {
        return None;
    }
    let (year, month, day) = civil_from_days(secs / 86_400);
    let of_day = secs % 86_400;
    let micros = since.subsec_micros();
    let mut text = *b"0000-00-00T00:00:00.000000Z";
    let pair = |text: &mut [u8; 27], at: usize, v: u64| {
        text[at] = b'0' + (v / 10) as u8;
        text[at + 1] = b'0' + (v % 10) as u8;
    };
    pair(&mut text, 0, year / 100);
    pair(&mut text, 2, year % 100);
    pair(&mut text, 5, month);
    pair(&mut text, 8, day);
    pair(&mut text, 11, of_day / 3_600);
    pair(&mut text, 14, of_day / 60 % 60);
    pair(&mut text, 17, of_day % 60);
    let micros = u64::from(micros);
    pair(&mut text, 20, micros / 10_000);
    pair(&mut text, 22, micros / 100 % 100);
    pair(&mut text, 24, micros % 100);
    Some(text)
}

/// The (year, month, day) of `days` after 1970-01-01, in the proleptic
/// Gregorian calendar: counted in 400-year eras that start on 1 March, so
/// the leap day is the era-year's last.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // 1970-01-01 is day 719,468 from 0000-03-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March, each 30.6 days on average.
    let m = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * m + 2) / 5 + 1;
    let month = if m < 10 { m + 3 } else { m - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
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
        let menu = is_menu_frame(&packet);
        if matches!(self.writer, Writer::Influx(_)) && menu {
            return Err(Skipped::MenuFrame);
        }
        let first = *self.first.get_or_insert(frame.time);
        let since_start = frame
            .time
            .duration_since(first)
            .map_or(0.0, |e| e.as_secs_f64());
        let values = Values {
            packet,
            menu,
            time: frame.time,
            since_start,
        };
        match &mut self.writer {
            Writer::Json(object) => {
                object.write(&values, out);
                Ok(())
            }
            Writer::Influx(line) => {
                if line.write(&values, out) {
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
    fn a_value_is_the_columns_value_in_every_format() {
        use crate::telemetry::columns::Row;
        use crate::telemetry::Telemetry;
        use crate::wire::{Puddle, Wheels};
        for format in Format::ALL {
            let mut racing = vec![0u8; format.len()];
            let mut p = Packet::new_checked(&mut racing[..], format).unwrap();
            p.set_is_race_on(1);
            p.set_timestamp_ms(4_000_000_000);
            p.set_current_engine_rpm(f32::NAN);
            p.set_engine_max_rpm(7_000.0);
            p.set_acceleration_y(-3.25);
            p.set_velocity_x(-7.5);
            p.set_velocity_z(1.0);
            p.set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(1); 4]));
            p.set_car_ordinal(-7);
            p.set_car_class(2);
            p.set_drivetrain_type(2);
            let _ = p.set_speed(41.5);
            let _ = p.set_power(123_456.7);
            let _ = p.set_steer(-100);
            let _ = p.set_accel(200);
            let _ = p.set_hand_brake(1);
            let _ = p.set_gear(4);
            let _ = p.set_tire_temp(Wheels::from_array([180.0, 190.5, -40.0, 1e6]));
            let _ = p.set_car_group(26);
            let _ = p.set_track_ordinal(860);
            let mut menu = vec![0u8; format.len()];
            Packet::new_checked(&mut menu[..], format)
                .unwrap()
                .set_timestamp_ms(77);
            for buf in [racing, menu] {
                let packet = Packet::new_checked(&buf[..], format).unwrap();
                let telemetry = Telemetry::decode(&packet);
                let row = Row {
                    time: UNIX_EPOCH,
                    since_start: 0.5,
                    packet,
                    telemetry: &telemetry,
                };
                let values = Values::new(packet, UNIX_EPOCH, 0.5);
                for column in Column::all() {
                    let read = Value::new(&column, format).cell(&values);
                    let value = column.value(&row);
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
    }

    #[test]
    fn a_value_of_up_to_its_slot_is_appended_whole() {
        let text: Vec<u8> = (0..VALUE_MAX as u8 + 8).map(|b| b'a' + b % 26).collect();
        for room in [0, 3, 100] {
            for n in 0..text.len() {
                let mut room = vec![b'?'; room];
                let mut t = Text::new(&mut room);
                t.byte(b'x');
                t.put(&text[..n]);
                assert_eq!(t.as_bytes()[1..], text[..n], "{n} bytes");
            }
        }
        // Cut back, a byte set, a rare way, more: each where it was put.
        let mut room = vec![b'?'; 64];
        let mut t = Text::new(&mut room);
        t.put(b"xabcdef");
        t.truncate(3);
        t.set(1, b'B');
        t.with(|v| v.extend_from_slice(b"[vec]"));
        t.int(-12);
        assert_eq!(t.as_bytes(), b"xBb[vec]-12");
        assert_eq!(room.len(), 64, "the room is kept");
    }

    #[test]
    fn a_whole_f32_is_zmijs_text() {
        let mut room = Vec::new();
        let mut check = |v: f32| {
            let mut text = Text::new(&mut room);
            text.f32(v);
            assert_eq!(
                text.as_bytes(),
                zmij::Buffer::new().format_finite(v).as_bytes(),
                "{v:?}"
            );
        };
        for v in (1..=1 << 24).step_by(61).chain([1 << 24, (1 << 24) - 1]) {
            check(v as f32);
            check(-(v as f32));
        }
        for v in [
            0.0,
            -0.0,
            0.5,
            -1.5,
            16_777_218.0,
            3e9,
            1e13,
            2.5e-7,
            8_250.0,
        ] {
            check(v);
        }
    }

    #[test]
    fn recv_time_is_humantimes_text() {
        let mut times = vec![
            UNIX_EPOCH,
            UNIX_EPOCH + Duration::from_nanos(1_700_000_000_016_000_999),
            // Leap days, the ends of years and centuries, the last second.
            UNIX_EPOCH + Duration::from_secs(951_782_400),
            UNIX_EPOCH + Duration::from_secs(4_107_542_399),
            UNIX_EPOCH + Duration::from_secs(253_402_300_799) + Duration::from_nanos(999_999_999),
        ];
        // Every day from 1970 to 2200, at a time of day that moves.
        let mut t = 0u64;
        while t < 7_258_118_400 {
            times.push(UNIX_EPOCH + Duration::new(t, (t % 1_000_000_007) as u32 % 1_000_000_000));
            t += 86_400 + 3_601;
        }
        for time in times {
            let text = rfc3339_micros(time).expect("within 1970 … 9999");
            assert_eq!(
                std::str::from_utf8(&text).unwrap(),
                humantime::format_rfc3339_micros(time).to_string()
            );
        }
        assert_eq!(
            rfc3339_micros(UNIX_EPOCH + Duration::from_secs(253_402_300_800)),
            None
        );
        assert_eq!(rfc3339_micros(UNIX_EPOCH - Duration::from_secs(1)), None);
    }

    #[test]
    fn keys_short_and_long_are_appended_whole() {
        let mut out = b"x".to_vec();
        for text in [
            &b""[..],
            b",\"Speed\":",
            b",\"NormalizedSuspensionTravelFL\":null",
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
