//! The export's columns: every field of the one field table ([`field::ALL`]) by its
//! docs/formats.md name, per-wheel fields as four columns (`TireTempFL` …), then the
//! values [`Telemetry`] derives, then where and when the datagram was received.
//!
//! Raw values are read straight from the table (block start + offset + the field's
//! scalar type as the format types it), so a field added to the table is a new
//! column with no change here. The derived values are [`Telemetry`]'s; a test checks
//! that [`Derived`] lists every one of them.

use std::fmt;
use std::time::SystemTime;

use serde::{Serialize, Serializer};

use crate::telemetry::{Gear, Telemetry};
use crate::wire::{field, Field, Format, Packet, Scalar};

/// Wheel suffixes of per-wheel fields, in packet order.
pub const WHEELS: [&str; 4] = ["FL", "FR", "RL", "RR"];

/// One value of one row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    /// An integer field.
    Int(i64),
    /// A float field or derived value.
    Float(f32),
    /// Seconds, rounded to the microsecond.
    Seconds(f64),
    /// A word: a format id, a class letter, a drivetrain.
    Text(&'static str),
    /// A gear as a driver reads it.
    Gear(Gear),
    /// A wall-clock time, written as RFC 3339 UTC.
    Time(SystemTime),
    /// Absent in this packet's format: empty in CSV, `null` in JSON.
    Null,
}

impl fmt::Display for Cell {
    /// The text written in a CSV cell; [`Cell::Null`] is empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Cell::Int(v) => write!(f, "{v}"),
            Cell::Float(v) => write!(f, "{v}"),
            Cell::Seconds(v) => write!(f, "{v:.6}"),
            Cell::Text(t) => f.write_str(t),
            Cell::Gear(g) => write!(f, "{g}"),
            Cell::Time(t) => write!(f, "{}", humantime::format_rfc3339_micros(t)),
            Cell::Null => Ok(()),
        }
    }
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Cell::Int(v) => s.serialize_i64(v),
            Cell::Float(v) => s.serialize_f32(v),
            Cell::Seconds(v) => s.serialize_f64((v * 1e6).round() / 1e6),
            Cell::Null => s.serialize_none(),
            Cell::Text(_) | Cell::Gear(_) | Cell::Time(_) => s.collect_str(self),
        }
    }
}

/// The values [`Telemetry`] derives from the fields, by the names it serialises
/// them under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Derived {
    /// `speed_kmh`.
    SpeedKmh,
    /// `speed_mph`.
    SpeedMph,
    /// `power_hp`.
    PowerHp,
    /// `gear_label`: R, N, 1..10 or the raw number.
    GearLabel,
    /// `throttle_pct`.
    ThrottlePct,
    /// `brake_pct`.
    BrakePct,
    /// `clutch_pct`.
    ClutchPct,
    /// `handbrake_pct`.
    HandbrakePct,
    /// `steer_axis`.
    SteerAxis,
    /// `rev_fraction`.
    RevFraction,
    /// `g_lat`.
    GLat,
    /// `g_long`.
    GLong,
    /// `g_vert`.
    GVert,
    /// `drift_angle_deg`.
    DriftAngleDeg,
    /// `tire_temp_c`, per wheel.
    TireTempC,
    /// `car_class_letter`.
    CarClassLetter,
    /// `drivetrain`.
    Drivetrain,
}

impl Derived {
    /// Every derived value, in column order.
    pub const ALL: [Derived; 17] = [
        Derived::SpeedKmh,
        Derived::SpeedMph,
        Derived::PowerHp,
        Derived::GearLabel,
        Derived::ThrottlePct,
        Derived::BrakePct,
        Derived::ClutchPct,
        Derived::HandbrakePct,
        Derived::SteerAxis,
        Derived::RevFraction,
        Derived::GLat,
        Derived::GLong,
        Derived::GVert,
        Derived::DriftAngleDeg,
        Derived::TireTempC,
        Derived::CarClassLetter,
        Derived::Drivetrain,
    ];

    /// Its name: the one [`Telemetry`] serialises it under.
    pub const fn name(self) -> &'static str {
        match self {
            Derived::SpeedKmh => "speed_kmh",
            Derived::SpeedMph => "speed_mph",
            Derived::PowerHp => "power_hp",
            Derived::GearLabel => "gear_label",
            Derived::ThrottlePct => "throttle_pct",
            Derived::BrakePct => "brake_pct",
            Derived::ClutchPct => "clutch_pct",
            Derived::HandbrakePct => "handbrake_pct",
            Derived::SteerAxis => "steer_axis",
            Derived::RevFraction => "rev_fraction",
            Derived::GLat => "g_lat",
            Derived::GLong => "g_long",
            Derived::GVert => "g_vert",
            Derived::DriftAngleDeg => "drift_angle_deg",
            Derived::TireTempC => "tire_temp_c",
            Derived::CarClassLetter => "car_class_letter",
            Derived::Drivetrain => "drivetrain",
        }
    }

    /// True for a per-wheel value.
    pub const fn wheels(self) -> bool {
        matches!(self, Derived::TireTempC)
    }

    /// Its unit, range and meaning, and how [`Telemetry::decode`] makes it
    /// (docs/fields.md prints them; a test there checks them against values).
    pub const fn about(self) -> About {
        let (unit, range, meaning, from) = match self {
            Derived::SpeedKmh => (
                "km/h",
                "0 or more",
                "Speed in kilometres per hour.",
                "Speed × 3.6",
            ),
            Derived::SpeedMph => (
                "mph",
                "0 or more",
                "Speed in miles per hour.",
                "Speed × 2.2369363 (1 / 0.44704)",
            ),
            Derived::PowerHp => (
                "hp",
                "",
                "Engine power in mechanical horsepower.",
                "Power / 745.6999",
            ),
            Derived::GearLabel => (
                "",
                "R, N, 1 … 10, or another Gear byte as its number",
                "The gear as a driver reads it.",
                "Gear: 0 is R, 11 is N, 1 … 10 and any other byte its number",
            ),
            Derived::ThrottlePct => ("%", "0 … 100", "Throttle.", "Accel × 100 / 255"),
            Derived::BrakePct => ("%", "0 … 100", "Brake.", "Brake × 100 / 255"),
            Derived::ClutchPct => ("%", "0 … 100", "Clutch.", "Clutch × 100 / 255"),
            Derived::HandbrakePct => ("%", "0 … 100", "Handbrake.", "HandBrake × 100 / 255"),
            Derived::SteerAxis => (
                "",
                "-1 … 1",
                "Steering: -1 full left, 0 straight ahead, 1 full right.",
                "Steer / 127, held within -1 … 1 (-128 reads -1)",
            ),
            Derived::RevFraction => (
                "",
                "0 … 1",
                "The revs as a share of the redline: 1 at the redline.",
                "CurrentEngineRpm / EngineMaxRpm, held within 0 … 1; 0 when EngineMaxRpm \
                 is 0 or less",
            ),
            Derived::GLat => (
                "g",
                "",
                "Sideways acceleration: positive when the car accelerates to its right \
                 (turning right), negative to its left; the driver is pressed the other way.",
                "AccelerationX / 9.80665",
            ),
            Derived::GLong => (
                "g",
                "",
                "Acceleration along the car: positive forwards (speeding up), negative \
                 backwards (braking).",
                "AccelerationZ / 9.80665",
            ),
            Derived::GVert => (
                "g",
                "",
                "Vertical acceleration in car space, positive upwards.",
                "AccelerationY / 9.80665",
            ),
            Derived::DriftAngleDeg => (
                "°",
                "-180 … 180",
                "The angle between where the nose points and where the car goes: positive \
                 when it goes to the right of its nose, negative to the left, ±180 backwards.",
                "atan2(VelocityX, VelocityZ) in degrees; 0 below 2 m/s of horizontal speed \
                 (VelocityX, VelocityZ)",
            ),
            Derived::TireTempC => (
                "°C",
                "",
                "Tyre temperature in degrees Celsius.",
                "(TireTemp − 32) × 5 / 9",
            ),
            Derived::CarClassLetter => (
                "",
                "a letter of the game's class scale",
                "The car's class as a letter, where the game's class scale is known.",
                "CarClass on the game's scale (docs/formats.md \"Car class\")",
            ),
            Derived::Drivetrain => (
                "",
                "FWD, RWD or AWD",
                "The driven wheels.",
                "DrivetrainType: 0 is FWD, 1 RWD, 2 AWD; any other value null",
            ),
        };
        About {
            unit,
            range,
            meaning,
            from: Some(from),
        }
    }

    /// Its value in `packet`, read from the fields it needs alone (what
    /// [`Telemetry::decode`] gives, without decoding the rest). `packet` is
    /// no menu frame ([`crate::telemetry::is_menu_frame`]): a menu frame has no derived value.
    pub fn read<T: AsRef<[u8]>>(self, packet: &Packet<T>, wheel: usize) -> Cell {
        use crate::telemetry as t;
        let float = |v: Option<f32>| v.map_or(Cell::Null, Cell::Float);
        let text = |v: Option<&'static str>| v.map_or(Cell::Null, Cell::Text);
        match self {
            Derived::SpeedKmh => float(packet.speed().map(t::speed_kmh)),
            Derived::SpeedMph => float(packet.speed().map(t::speed_mph)),
            Derived::PowerHp => float(packet.power().map(t::power_hp)),
            Derived::GearLabel => packet.gear().map_or(Cell::Null, |g| Cell::Gear(g.into())),
            Derived::ThrottlePct => float(packet.accel().map(t::pct)),
            Derived::BrakePct => float(packet.brake().map(t::pct)),
            Derived::ClutchPct => float(packet.clutch().map(t::pct)),
            Derived::HandbrakePct => float(packet.hand_brake().map(t::pct)),
            Derived::SteerAxis => float(packet.steer().map(t::steer_axis)),
            Derived::RevFraction => Cell::Float(t::rev_fraction(
                packet.current_engine_rpm(),
                packet.engine_max_rpm(),
            )),
            Derived::GLat => Cell::Float(t::g(packet.acceleration_x())),
            Derived::GLong => Cell::Float(t::g(packet.acceleration_z())),
            Derived::GVert => Cell::Float(t::g(packet.acceleration_y())),
            Derived::DriftAngleDeg => {
                Cell::Float(t::drift_angle_deg(packet.velocity_x(), packet.velocity_z()))
            }
            Derived::TireTempC => float(
                packet
                    .tire_temp()
                    .map(|w| t::celsius(w.into_array()[wheel])),
            ),
            Derived::CarClassLetter => text(packet.format().class_letter(packet.car_class())),
            Derived::Drivetrain => text(t::drivetrain(packet.drivetrain_type())),
        }
    }

    fn value(self, t: &Telemetry, wheel: usize) -> Cell {
        let float = |v: Option<f32>| v.map_or(Cell::Null, Cell::Float);
        let text = |v: Option<&'static str>| v.map_or(Cell::Null, Cell::Text);
        match self {
            Derived::SpeedKmh => float(t.speed_kmh),
            Derived::SpeedMph => float(t.speed_mph),
            Derived::PowerHp => float(t.power_hp),
            Derived::GearLabel => t.gear.map_or(Cell::Null, Cell::Gear),
            Derived::ThrottlePct => float(t.throttle_pct),
            Derived::BrakePct => float(t.brake_pct),
            Derived::ClutchPct => float(t.clutch_pct),
            Derived::HandbrakePct => float(t.handbrake_pct),
            Derived::SteerAxis => float(t.steer_axis),
            Derived::RevFraction => float(t.rev_fraction),
            Derived::GLat => float(t.g_lat),
            Derived::GLong => float(t.g_long),
            Derived::GVert => float(t.g_vert),
            Derived::DriftAngleDeg => float(t.drift_angle_deg),
            Derived::TireTempC => float(t.tire_temp_c.map(|w| w.into_array()[wheel])),
            Derived::CarClassLetter => text(t.car_class_letter),
            Derived::Drivetrain => text(t.drivetrain),
        }
    }
}

/// What a column's values are, for the people who read them: docs/fields.md
/// prints one row of these per column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct About {
    /// Its unit (`"km/h"`), `""` for a count, a code, a ratio or a word.
    pub unit: &'static str,
    /// The values it takes, where known (`"-1 … 1"`); `""` where not.
    pub range: &'static str,
    /// What it means, in a sentence.
    pub meaning: &'static str,
    /// How forza-relay makes it; `None` for a field of the packet, which is
    /// read as the game sent it.
    pub from: Option<&'static str>,
}

/// What one column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// `recv_time`: when the datagram was received, RFC 3339 UTC.
    RecvTime,
    /// `recv_s`: seconds since the first exported datagram was received.
    RecvSeconds,
    /// `format`: the format id the packet was read as.
    Format,
    /// A field of the table; `wheel` 0..4 for per-wheel fields.
    Raw {
        /// The field.
        field: Field,
        /// FL, FR, RL, RR as 0..4; `None` for a single value.
        wheel: Option<usize>,
    },
    /// A value [`Telemetry`] derives; `wheel` 0..4 for per-wheel values.
    Derived {
        /// The value.
        value: Derived,
        /// FL, FR, RL, RR as 0..4; `None` for a single value.
        wheel: Option<usize>,
    },
}

/// One packet as the columns see it.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// When it was received.
    pub time: SystemTime,
    /// Seconds since the first exported datagram.
    pub since_start: f64,
    /// The packet, checked against its format.
    pub packet: Packet<&'a [u8]>,
    /// The packet decoded.
    pub telemetry: &'a Telemetry,
}

impl Column {
    /// Every column, in order: receive time, format, the fields, the derived values.
    pub fn all() -> Vec<Column> {
        let mut all = vec![Column::RecvTime, Column::RecvSeconds, Column::Format];
        for &field in field::ALL {
            if field.wheels {
                all.extend((0..4).map(|w| Column::Raw {
                    field,
                    wheel: Some(w),
                }));
            } else {
                all.push(Column::Raw { field, wheel: None });
            }
        }
        for value in Derived::ALL {
            if value.wheels() {
                all.extend((0..4).map(|w| Column::Derived {
                    value,
                    wheel: Some(w),
                }));
            } else {
                all.push(Column::Derived { value, wheel: None });
            }
        }
        all
    }

    /// The column's name: `IsRaceOn`, `TireTempFL`, `speed_kmh`, `tire_temp_c_fl`.
    pub fn name(&self) -> String {
        match *self {
            Column::RecvTime => "recv_time".to_owned(),
            Column::RecvSeconds => "recv_s".to_owned(),
            Column::Format => "format".to_owned(),
            Column::Raw { field, wheel } => match wheel {
                Some(w) => format!("{}{}", field.name, WHEELS[w]),
                None => field.name.to_owned(),
            },
            Column::Derived { value, wheel } => match wheel {
                Some(w) => format!("{}_{}", value.name(), WHEELS[w].to_ascii_lowercase()),
                None => value.name().to_owned(),
            },
        }
    }

    /// The name of the group a per-wheel column belongs to (`TireTemp`,
    /// `tire_temp_c`), which `--fields` accepts for all four.
    pub fn group(&self) -> Option<&'static str> {
        match *self {
            Column::Raw {
                field,
                wheel: Some(_),
            } => Some(field.name),
            Column::Derived {
                value,
                wheel: Some(_),
            } => Some(value.name()),
            _ => None,
        }
    }

    /// Its unit, range and meaning: a field's from the field table, a derived
    /// value's from [`Derived::about`].
    pub const fn about(&self) -> About {
        match *self {
            Column::RecvTime => About {
                unit: "",
                range: "",
                meaning: "When forza-relay received the datagram: RFC 3339, UTC, to the \
                          microsecond.",
                from: Some(
                    "the receive time (the kernel's on Linux; with export --file, the \
                     capture's)",
                ),
            },
            Column::RecvSeconds => About {
                unit: "s",
                range: "0 or more",
                meaning: "Seconds since the first frame this output wrote (this destination, \
                          stream or export), to the microsecond.",
                from: Some("recv_time − the first frame's recv_time"),
            },
            Column::Format => About {
                unit: "",
                range: "",
                meaning: "The format the packet was read as (configured, or detected with auto).",
                from: Some("the input's format"),
            },
            Column::Raw { field, .. } => About {
                unit: field.unit,
                range: field.range,
                meaning: field.meaning,
                from: None,
            },
            Column::Derived { value, .. } => value.about(),
        }
    }

    /// The column's value in `row`.
    pub fn value(&self, row: &Row<'_>) -> Cell {
        match *self {
            Column::RecvTime => Cell::Time(row.time),
            Column::RecvSeconds => Cell::Seconds(row.since_start),
            Column::Format => Cell::Text(row.packet.format().id()),
            Column::Raw { field, wheel } => read_raw(&field, wheel, &row.packet),
            Column::Derived { value, wheel } => value.value(row.telemetry, wheel.unwrap_or(0)),
        }
    }
}

/// Reads one field (one wheel of a per-wheel field) from the table alone: where
/// its block starts in the packet's format, its offset, its type as the format
/// types it. [`Cell::Null`] when the format lacks the field.
pub fn read_raw<T: AsRef<[u8]>>(field: &Field, wheel: Option<usize>, packet: &Packet<T>) -> Cell {
    match raw_location(field, wheel, packet.format()) {
        Some((at, scalar)) => read_scalar(packet.as_bytes(), at, scalar),
        None => Cell::Null,
    }
}

/// Where one field (one wheel of a per-wheel field) is in a `format` packet, and
/// its type there; `None` when the format lacks it. What [`read_raw`] reads, for
/// a reader that works it out once per format (src/output/).
pub fn raw_location(
    field: &Field,
    wheel: Option<usize>,
    format: Format,
) -> Option<(usize, Scalar)> {
    let start = field.start(format)?;
    let scalar = field.scalar.in_format(format);
    Some((start + wheel.unwrap_or(0) * scalar.size(), scalar))
}

/// The `scalar` at `at` in `bytes` (as [`raw_location`] gives them);
/// [`Cell::Null`] when `bytes` is too short to hold it.
#[inline(always)]
pub fn read_scalar(bytes: &[u8], at: usize, scalar: Scalar) -> Cell {
    let Some(b) = bytes.get(at..at + scalar.size()) else {
        return Cell::Null;
    };
    let word = |b: &[u8]| [b[0], b[1], b[2], b[3]];
    match scalar {
        Scalar::S8 => Cell::Int(i64::from(i8::from_le_bytes([b[0]]))),
        Scalar::U8 => Cell::Int(i64::from(b[0])),
        Scalar::U16 => Cell::Int(i64::from(u16::from_le_bytes([b[0], b[1]]))),
        Scalar::S32 | Scalar::Puddle => Cell::Int(i64::from(i32::from_le_bytes(word(b)))),
        Scalar::U32 => Cell::Int(i64::from(u32::from_le_bytes(word(b)))),
        Scalar::F32 => Cell::Float(f32::from_le_bytes(word(b))),
    }
}

/// A `--fields` name that is no column, or that names a column twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownColumns {
    /// The names given that match nothing.
    pub unknown: Vec<String>,
    /// The names given that choose a column an earlier name chose (`speed`
    /// after `Speed`, `TireTempFL` after `TireTemp`): a JSON object can't
    /// have a key twice, nor an influx line a field (issue 30).
    pub repeated: Vec<String>,
}

impl UnknownColumns {
    /// `names` (a list's own words) as one text: `"a", "b"`.
    pub fn quoted(names: &[String]) -> String {
        let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        quoted.join(", ")
    }

    /// The repeated names said as what is wrong with them.
    pub fn repeated_message(&self) -> String {
        format!(
            "{} chooses a column named before (names ignore case; a per-wheel field such as \
             TireTemp chooses its four wheels): name each column once",
            UnknownColumns::quoted(&self.repeated)
        )
    }
}

impl fmt::Display for UnknownColumns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.unknown.is_empty() && !self.repeated.is_empty() {
            return write!(f, "--fields: {}", self.repeated_message());
        }
        let quoted: Vec<String> = self.unknown.iter().map(|n| format!("{n:?}")).collect();
        let names: Vec<String> = Column::all().iter().map(Column::name).collect();
        write!(
            f,
            "--fields: no column named {} (a per-wheel field such as TireTemp also \
             selects its four wheels). Valid names: {}",
            quoted.join(", "),
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownColumns {}

/// The columns `spec` names, comma separated, in its order. Names ignore case; a
/// per-wheel group name (`TireTemp`, `tire_temp_c`) selects its four columns.
pub fn select(spec: &str) -> Result<Vec<Column>, UnknownColumns> {
    select_names(spec.split(',')).map_err(|e| {
        if e.unknown.is_empty() && e.repeated.is_empty() {
            UnknownColumns {
                unknown: vec![spec.to_owned()],
                repeated: Vec::new(),
            }
        } else {
            e
        }
    })
}

/// The columns `names` name, in their order, by the rules of [`select`] (blank
/// names are skipped). Every name that is no column is in the error, and
/// every name that chooses a column again; when no name is given, the error
/// names none.
pub fn select_names<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Column>, UnknownColumns> {
    let all = Column::all();
    let mut chosen: Vec<Column> = Vec::new();
    let mut unknown = Vec::new();
    let mut repeated = Vec::new();
    for name in names.into_iter().map(str::trim).filter(|n| !n.is_empty()) {
        let exact: Vec<Column> = all
            .iter()
            .filter(|c| c.name().eq_ignore_ascii_case(name))
            .copied()
            .collect();
        let group: Vec<Column> = all
            .iter()
            .filter(|c| c.group().is_some_and(|g| g.eq_ignore_ascii_case(name)))
            .copied()
            .collect();
        let these = match (exact.is_empty(), group.is_empty()) {
            (false, _) => exact,
            (true, false) => group,
            (true, true) => {
                unknown.push(name.to_owned());
                continue;
            }
        };
        if these.iter().any(|c| chosen.contains(c)) {
            repeated.push(name.to_owned());
        }
        chosen.extend(these);
    }
    if !unknown.is_empty() || !repeated.is_empty() || chosen.is_empty() {
        return Err(UnknownColumns { unknown, repeated });
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Puddle, Wheels};
    use std::collections::BTreeSet;

    fn names(columns: &[Column]) -> Vec<String> {
        columns.iter().map(Column::name).collect()
    }

    #[test]
    fn every_field_of_the_table_is_a_column_with_its_formats_md_name() {
        let all = names(&Column::all());
        for name in [
            "recv_time",
            "IsRaceOn",
            "TimestampMS",
            "TireTempFL",
            "TireTempRR",
            "WheelInPuddleRL",
            "CarGroup",
            "Speed",
            "NormalizedAIBrakeDifference",
            "TireWearFR",
            "TrackOrdinal",
            "speed_kmh",
            "gear_label",
            "tire_temp_c_fl",
        ] {
            assert!(all.iter().any(|n| n == name), "no column {name}");
        }
        let unique: BTreeSet<&String> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "duplicate column names");
        let wheel_fields = field::ALL.iter().filter(|f| f.wheels).count();
        assert_eq!(
            all.len(),
            3 + field::ALL.len() + 3 * wheel_fields + Derived::ALL.len() + 3
        );
    }

    /// `Derived::read`, from the fields one value needs, is what
    /// `Telemetry::decode` derives, to the bit, in every format.
    #[test]
    fn a_derived_value_read_alone_is_the_decoded_one() {
        for format in Format::ALL {
            let mut buf = vec![0u8; format.len()];
            let mut p = Packet::new_checked(&mut buf[..], format).unwrap();
            p.set_is_race_on(1);
            p.set_engine_max_rpm(7_000.0);
            p.set_current_engine_rpm(7_700.0);
            p.set_acceleration_x(-12.5);
            p.set_acceleration_y(0.3);
            p.set_velocity_x(-7.5);
            p.set_velocity_z(1.0);
            p.set_car_class(2);
            p.set_drivetrain_type(1);
            let _ = p.set_speed(41.5);
            let _ = p.set_power(123_456.7);
            let _ = p.set_steer(-128);
            let _ = p.set_accel(200);
            let _ = p.set_gear(11);
            let _ = p.set_tire_temp(Wheels::from_array([180.0, 190.5, -40.0, 1e6]));
            let t = Telemetry::decode(&p);
            for value in Derived::ALL {
                for wheel in 0..4 {
                    let (read, decoded) = (value.read(&p, wheel), value.value(&t, wheel));
                    match (read, decoded) {
                        (Cell::Float(a), Cell::Float(b)) => {
                            assert_eq!(a.to_bits(), b.to_bits(), "{format} {value:?}")
                        }
                        _ => assert_eq!(read, decoded, "{format} {value:?}"),
                    }
                }
            }
        }
    }

    /// Every value `Telemetry` serializes beyond the raw fields and the format is a
    /// `Derived` (per-wheel objects as four columns), so a value added there and
    /// forgotten here fails.
    #[test]
    fn derived_lists_every_derived_value_of_telemetry() {
        let mut buf = [0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        let t = Telemetry::decode(&p);
        let json = serde_json::to_value(t).unwrap();
        let fields = serde_json::to_value(t.fields).unwrap();
        let mut from_telemetry = BTreeSet::new();
        for (key, value) in json.as_object().unwrap() {
            if key == "format" || fields.get(key).is_some() {
                continue;
            }
            match value.as_object() {
                Some(wheels) => {
                    for w in wheels.keys() {
                        from_telemetry.insert(format!("{key}_{w}"));
                    }
                }
                None => {
                    from_telemetry.insert(key.clone());
                }
            }
        }
        let derived: BTreeSet<String> = Column::all()
            .iter()
            .filter(|c| matches!(c, Column::Derived { .. }))
            .map(Column::name)
            .collect();
        assert_eq!(derived, from_telemetry);
    }

    #[test]
    fn raw_reads_follow_each_formats_types_and_blocks() {
        let mut buf = [0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_speed(39.5).unwrap();
        p.set_steer(-100).unwrap();
        p.set_timestamp_ms(4_000_000_000);
        p.set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(1); 4]));
        p.set_tire_temp(Wheels::from_array([1.0, 2.0, 3.0, 4.5]))
            .unwrap();
        let p = Packet::new_checked(&buf[..], Format::Fh6).unwrap();
        assert_eq!(read_raw(&field::SPEED, None, &p), Cell::Float(39.5));
        assert_eq!(read_raw(&field::STEER, None, &p), Cell::Int(-100));
        assert_eq!(
            read_raw(&field::TIMESTAMP_MS, None, &p),
            Cell::Int(4_000_000_000)
        );
        assert_eq!(read_raw(&field::WHEEL_IN_PUDDLE, Some(2), &p), Cell::Int(1));
        assert_eq!(read_raw(&field::TIRE_TEMP, Some(3), &p), Cell::Float(4.5));
        assert_eq!(read_raw(&field::TIRE_WEAR, Some(0), &p), Cell::Null);
        // The same bytes read as fh5 type the puddle words as depths.
        let p5 = Packet::new_checked(&buf[..], Format::Fh5).unwrap();
        assert_eq!(
            read_raw(&field::WHEEL_IN_PUDDLE, Some(0), &p5),
            Cell::Float(f32::from_bits(1))
        );
        let sled = Packet::new_checked(&buf[..232], Format::Sled).unwrap();
        assert_eq!(read_raw(&field::SPEED, None, &sled), Cell::Null);
    }

    #[test]
    fn select_by_name_ignoring_case_and_by_wheel_group() {
        let c = select("speed, Gear,TireTemp , tire_temp_c_rr").unwrap();
        assert_eq!(
            names(&c),
            [
                "Speed",
                "Gear",
                "TireTempFL",
                "TireTempFR",
                "TireTempRL",
                "TireTempRR",
                "tire_temp_c_rr"
            ]
        );
    }

    #[test]
    fn select_names_every_unknown_column_and_lists_the_valid_ones() {
        let e = select("Speed,Sped,gear_lable").unwrap_err();
        assert_eq!(e.unknown, ["Sped", "gear_lable"]);
        let msg = e.to_string();
        assert!(msg.contains("\"Sped\", \"gear_lable\""), "{msg}");
        assert!(
            msg.contains("TireTempFL") && msg.contains("speed_kmh"),
            "{msg}"
        );
        assert!(select(" , ").is_err());
    }

    /// Issue 30: a column named twice wrote a JSON key and an influx field
    /// twice.
    #[test]
    fn a_column_named_twice_is_refused_naming_the_second_name() {
        for (spec, named) in [
            ("Speed,speed", "\"speed\""),
            ("TireTemp,TireTempFL", "\"TireTempFL\""),
            ("gear_label, Gear_Label ,Speed", "\"Gear_Label\""),
        ] {
            let e = select(spec).unwrap_err();
            assert!(e.unknown.is_empty(), "{spec}: {e:?}");
            assert_eq!(e.to_string(), format!("--fields: {}", e.repeated_message()));
            assert!(
                e.to_string()
                    .starts_with(&format!("--fields: {named} chooses a column named before")),
                "{e}"
            );
        }
        assert_eq!(select("Speed,speed_kmh,TireTemp").unwrap().len(), 6);
    }

    #[test]
    fn cells_write_as_csv_text() {
        assert_eq!(Cell::Float(39.4444).to_string(), "39.4444");
        assert_eq!(Cell::Int(-7).to_string(), "-7");
        assert_eq!(Cell::Null.to_string(), "");
        assert_eq!(Cell::Gear(Gear::from(11)).to_string(), "N");
        assert_eq!(Cell::Seconds(1.5).to_string(), "1.500000");
        assert_eq!(
            Cell::Time(SystemTime::UNIX_EPOCH).to_string(),
            "1970-01-01T00:00:00.000000Z"
        );
    }
}
