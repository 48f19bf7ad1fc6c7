//! Decoding a packet into named values and the derived numbers a HUD shows.
//!
//! [`Telemetry::decode`] reads every field by name ([`Fields`]) and adds the values
//! a dashboard, the live view and the exports print: km/h and mph, hp, gear as
//! text, pedal percentages, G-forces, drift angle, tyre temperatures in °C. It is a
//! plain `Copy` struct: decoding never allocates.
//!
//! A frame the game sends in menus and pauses ([`is_menu_frame`]) describes no
//! car: its raw fields are kept as sent, and it has no derived values (FH6 sends
//! them all zero, which would read as gear R, tyres at −18 °C and class D).
//!
//! The same values laid out as a table are in `columns.rs` ([`Column`],
//! [`Cell`]): every column a JSON or influx frame, an export or the stream
//! carries, with its unit and range, by the names export's `--fields` takes.

use std::fmt;

use serde::Serialize;

use crate::wire::{field, Error, Fields, Format, Packet, Wheels};

pub mod columns;
pub mod laps;
pub mod session;

pub use columns::{Cell, Column};

/// Standard gravity, m/s², for G-forces.
pub const STANDARD_GRAVITY: f32 = 9.806_65;
/// Below this horizontal speed (m/s) the drift angle is 0: at a standstill the
/// velocity's direction is noise.
pub const DRIFT_MIN_SPEED: f32 = 2.0;
/// Watts in one mechanical horsepower.
pub const WATTS_PER_HP: f32 = 745.699_9;
/// km/h in one m/s.
pub const KMH_PER_MS: f32 = 3.6;
/// mph in one m/s (1 / 0.44704).
pub const MPH_PER_MS: f32 = 2.236_936_3;

/// The Gear byte as a driver reads it (docs/formats.md "Gear").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gear {
    /// 0.
    Reverse,
    /// 11.
    Neutral,
    /// 1..=10.
    Forward(u8),
    /// Any other value, shown raw.
    Other(u8),
}

impl From<u8> for Gear {
    fn from(raw: u8) -> Self {
        match raw {
            0 => Gear::Reverse,
            11 => Gear::Neutral,
            1..=10 => Gear::Forward(raw),
            _ => Gear::Other(raw),
        }
    }
}

impl Gear {
    /// The byte as sent.
    pub fn raw(self) -> u8 {
        match self {
            Gear::Reverse => 0,
            Gear::Neutral => 11,
            Gear::Forward(n) | Gear::Other(n) => n,
        }
    }
}

impl fmt::Display for Gear {
    /// `R`, `N`, `1`..`10`, or the raw number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Gear::Reverse => f.write_str("R"),
            Gear::Neutral => f.write_str("N"),
            Gear::Forward(n) | Gear::Other(n) => write!(f, "{n}"),
        }
    }
}

impl Serialize for Gear {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Every field of one packet by name, plus derived values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Telemetry {
    /// The format the packet was read as.
    pub format: Format,
    /// The raw fields; those the format lacks are `None`.
    #[serde(flatten)]
    pub fields: Fields,
    /// Speed in km/h.
    pub speed_kmh: Option<f32>,
    /// Speed in mph.
    pub speed_mph: Option<f32>,
    /// Power in mechanical horsepower.
    pub power_hp: Option<f32>,
    /// Gear as a driver reads it: `R`, `N`, `1`..`10`, or the raw number. Named
    /// `gear_label` in exports, beside the raw `Gear` byte.
    #[serde(rename = "gear_label")]
    pub gear: Option<Gear>,
    /// Throttle, 0..100 %.
    pub throttle_pct: Option<f32>,
    /// Brake, 0..100 %.
    pub brake_pct: Option<f32>,
    /// Clutch, 0..100 %.
    pub clutch_pct: Option<f32>,
    /// Handbrake, 0..100 %.
    pub handbrake_pct: Option<f32>,
    /// Steering, -1 (full left) … 1 (full right).
    pub steer_axis: Option<f32>,
    /// Current revs over the redline, 0..1 (0 when the redline is unknown).
    pub rev_fraction: Option<f32>,
    /// Lateral G (positive: pushed right).
    pub g_lat: Option<f32>,
    /// Longitudinal G (positive: accelerating).
    pub g_long: Option<f32>,
    /// Vertical G.
    pub g_vert: Option<f32>,
    /// Angle between heading and travel, degrees, positive when sliding right;
    /// 0 below [`DRIFT_MIN_SPEED`].
    pub drift_angle_deg: Option<f32>,
    /// Tyre temperatures in °C (the packet sends °F).
    pub tire_temp_c: Option<Wheels<f32>>,
    /// CarClass as a letter, where the game's class scale is known.
    pub car_class_letter: Option<&'static str>,
    /// DrivetrainType as `FWD`, `RWD` or `AWD`.
    pub drivetrain: Option<&'static str>,
}

impl Telemetry {
    /// Reads every field of `packet` and derives the HUD values (none for a menu
    /// frame, see [`is_menu_frame`]).
    pub fn decode<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
        let f = Fields::read(packet);
        let format = packet.format();
        if is_menu_frame(packet) {
            return Telemetry::underived(format, f);
        }
        Telemetry {
            format,
            speed_kmh: f.speed.map(speed_kmh),
            speed_mph: f.speed.map(speed_mph),
            power_hp: f.power.map(power_hp),
            gear: f.gear.map(Gear::from),
            throttle_pct: f.accel.map(pct),
            brake_pct: f.brake.map(pct),
            clutch_pct: f.clutch.map(pct),
            handbrake_pct: f.hand_brake.map(pct),
            steer_axis: f.steer.map(steer_axis),
            rev_fraction: Some(rev_fraction(f.current_engine_rpm, f.engine_max_rpm)),
            g_lat: Some(g(f.acceleration_x)),
            g_long: Some(g(f.acceleration_z)),
            g_vert: Some(g(f.acceleration_y)),
            drift_angle_deg: Some(drift_angle_deg(f.velocity_x, f.velocity_z)),
            tire_temp_c: f.tire_temp.map(|w| w.map(celsius)),
            car_class_letter: format.class_letter(f.car_class),
            drivetrain: drivetrain(f.drivetrain_type),
            fields: f,
        }
    }

    /// The raw `fields` of a `format` packet, with no derived values.
    fn underived(format: Format, fields: Fields) -> Self {
        Telemetry {
            format,
            fields,
            speed_kmh: None,
            speed_mph: None,
            power_hp: None,
            gear: None,
            throttle_pct: None,
            brake_pct: None,
            clutch_pct: None,
            handbrake_pct: None,
            steer_axis: None,
            rev_fraction: None,
            g_lat: None,
            g_long: None,
            g_vert: None,
            drift_angle_deg: None,
            tire_temp_c: None,
            car_class_letter: None,
            drivetrain: None,
        }
    }

    /// Checks `bytes` as a `format` packet and decodes it.
    pub fn from_bytes(bytes: &[u8], format: Format) -> Result<Self, Error> {
        Ok(Self::decode(&Packet::new_checked(bytes, format)?))
    }
}

// The derived values' formulas, one each: [`Telemetry::decode`] and
// [`columns::Derived::read`] (which reads only the fields one value needs) both
// use them, so the two agree to the bit.

/// Speed in km/h from m/s.
pub(crate) fn speed_kmh(speed: f32) -> f32 {
    speed * KMH_PER_MS
}

/// Speed in mph from m/s.
pub(crate) fn speed_mph(speed: f32) -> f32 {
    speed * MPH_PER_MS
}

/// Horsepower from watts.
pub(crate) fn power_hp(watts: f32) -> f32 {
    watts / WATTS_PER_HP
}

/// A pedal byte as a percentage.
pub(crate) fn pct(v: u8) -> f32 {
    f32::from(v) * 100.0 / 255.0
}

/// The Steer byte as -1 … 1.
pub(crate) fn steer_axis(steer: i8) -> f32 {
    (f32::from(steer) / 127.0).clamp(-1.0, 1.0)
}

/// The revs over the redline, 0 … 1; 0 when the redline is unknown.
pub(crate) fn rev_fraction(current: f32, max: f32) -> f32 {
    if max > 0.0 {
        (current / max).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// An acceleration in g.
pub(crate) fn g(acceleration: f32) -> f32 {
    acceleration / STANDARD_GRAVITY
}

/// The drift angle of a car moving at (VelocityX, VelocityZ).
pub(crate) fn drift_angle_deg(velocity_x: f32, velocity_z: f32) -> f32 {
    if velocity_x.hypot(velocity_z) >= DRIFT_MIN_SPEED {
        velocity_x.atan2(velocity_z).to_degrees()
    } else {
        0.0
    }
}

/// °C from °F.
pub(crate) fn celsius(fahrenheit: f32) -> f32 {
    (fahrenheit - 32.0) * 5.0 / 9.0
}

/// DrivetrainType as a word.
pub(crate) fn drivetrain(code: i32) -> Option<&'static str> {
    match code {
        0 => Some("FWD"),
        1 => Some("RWD"),
        2 => Some("AWD"),
        _ => None,
    }
}

/// Whether `packet` is a frame the game sends in menus and pauses: IsRaceOn = 0
/// and every byte but TimestampMS zero (docs/formats.md: "FH6's IsRaceOn = 0 frames are
/// all zero except TimestampMS").
pub fn is_menu_frame<T: AsRef<[u8]>>(packet: &Packet<T>) -> bool {
    let bytes = packet.as_bytes();
    // A racing frame (IsRaceOn, the first field of every layout, 1) is told
    // by its first byte, without a look at the rest.
    if bytes.first().is_some_and(|&b| b != 0) {
        return false;
    }
    let (before, after) = match field::TIMESTAMP_MS.start(packet.format()) {
        Some(at) => (
            bytes.get(..at).unwrap_or(bytes),
            bytes.get(at + field::TIMESTAMP_MS.size..).unwrap_or(&[]),
        ),
        None => (bytes, &[][..]),
    };
    // OR-ing every byte, with no early exit, is a few vector instructions for
    // a whole packet: this runs on every frame an output encodes.
    let zero = |b: &[u8]| b.iter().fold(0u8, |any, &b| any | b) == 0;
    zero(before) && zero(after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Puddle;

    #[test]
    fn a_menu_frame_keeps_its_raw_fields_and_derives_nothing() {
        for format in Format::ALL {
            let mut buf = vec![0u8; format.len()];
            let mut p = Packet::new_checked(&mut buf[..], format).unwrap();
            p.set_timestamp_ms(123_456);
            let t = Telemetry::decode(&p);
            assert!(is_menu_frame(&p), "{format}");
            assert_eq!(
                t,
                Telemetry::underived(format, Fields::read(&p)),
                "{format}"
            );
            assert_eq!(t.fields.timestamp_ms, 123_456);
            assert_eq!(t.fields.gear, format.layout().dash.map(|_| 0));
            // Any other byte set, IsRaceOn's too, and it is a frame of a car.
            for at in [0, 8, format.len() - 1] {
                let mut other = buf.clone();
                other[at] = 1;
                let p = Packet::new_checked(&other[..], format).unwrap();
                assert!(!is_menu_frame(&p), "{format}: byte {at}");
                assert!(Telemetry::decode(&p).g_lat.is_some(), "{format}: byte {at}");
            }
        }
    }

    #[test]
    fn gear_codes_follow_formats_md() {
        let labels: Vec<String> = [0u8, 1, 6, 10, 11, 12, 21, 255]
            .iter()
            .map(|&g| Gear::from(g).to_string())
            .collect();
        assert_eq!(labels, ["R", "1", "6", "10", "N", "12", "21", "255"]);
        for raw in 0..=255u8 {
            assert_eq!(Gear::from(raw).raw(), raw);
        }
    }

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() <= 1e-4 * b.abs().max(1.0)
    }

    #[test]
    fn derived_values_from_named_fields() {
        let mut buf = [0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_speed(27.777_779).unwrap(); // 100 km/h
        p.set_power(745_699.9).unwrap(); // 1000 hp
        p.set_gear(0).unwrap();
        p.set_accel(255).unwrap();
        p.set_brake(51).unwrap();
        p.set_steer(-127).unwrap();
        p.set_engine_max_rpm(8000.0);
        p.set_current_engine_rpm(6000.0);
        p.set_acceleration_x(9.806_65);
        p.set_acceleration_z(-19.6133);
        p.set_velocity_x(10.0);
        p.set_velocity_z(10.0);
        p.set_tire_temp(Wheels::from_array([212.0, 32.0, 122.0, -40.0]))
            .unwrap();
        p.set_car_class(6);
        p.set_drivetrain_type(1);
        let t = Telemetry::decode(&p);
        assert!(close(t.speed_kmh.unwrap(), 100.0));
        assert!(close(t.speed_mph.unwrap(), 62.137_12));
        assert!(close(t.power_hp.unwrap(), 1000.0));
        assert_eq!(t.gear, Some(Gear::Reverse));
        assert_eq!(t.throttle_pct, Some(100.0));
        assert!(close(t.brake_pct.unwrap(), 20.0));
        assert_eq!(t.steer_axis, Some(-1.0));
        assert_eq!(t.rev_fraction, Some(0.75));
        assert!(close(t.g_lat.unwrap(), 1.0));
        assert!(close(t.g_long.unwrap(), -2.0));
        assert_eq!(t.g_vert, Some(0.0));
        assert!(close(t.drift_angle_deg.unwrap(), 45.0));
        let c = t.tire_temp_c.unwrap();
        assert!(close(c.fl, 100.0) && close(c.fr, 0.0) && close(c.rl, 50.0) && close(c.rr, -40.0));
        assert_eq!(t.car_class_letter, Some("R"));
        assert_eq!(t.drivetrain, Some("RWD"));
    }

    /// Drift angle of a Sled packet moving at (VelocityX, VelocityZ).
    fn drift(vx: f32, vz: f32) -> f32 {
        let mut buf = [0u8; 232];
        let mut p = Packet::new_checked(&mut buf[..], Format::Sled).unwrap();
        p.set_velocity_x(vx);
        p.set_velocity_z(vz);
        Telemetry::decode(&p).drift_angle_deg.unwrap()
    }

    #[test]
    fn drift_angle_sign_follows_the_slide_and_its_size_the_velocity() {
        // atan(3/4) = 36.8699°: positive sliding right (X right), negative left.
        assert!(close(drift(3.0, 4.0), 36.869_9));
        assert!(close(drift(-3.0, 4.0), -36.869_9));
        assert!(close(drift(4.0, 3.0), 53.130_1));
        assert_eq!(drift(0.0, 30.0), 0.0);
        // Sideways, then backwards.
        assert!(close(drift(-20.0, 0.0), -90.0));
        assert!(close(drift(0.0, -10.0), 180.0));
        // 2.5 m/s is above DRIFT_MIN_SPEED: slow, but it counts.
        assert!(close(drift(1.5, 2.0), 36.869_9));
    }

    #[test]
    fn speed_and_g_for_the_dashboard_fixture() {
        let mut buf = [0u8; 311];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fm7).unwrap();
        p.set_speed(39.444_4).unwrap();
        p.set_acceleration_x(-4.903_325); // half a G, pushed left
        p.set_acceleration_y(9.806_65);
        p.set_acceleration_z(14.709_975); // 1.5 G accelerating
        p.set_gear(10).unwrap();
        let t = Telemetry::decode(&p);
        // 39.4444 × 3.6 = 141.99984; × 2.2369363 = 88.23460.
        assert!(close(t.speed_kmh.unwrap(), 141.999_84));
        assert!(close(t.speed_mph.unwrap(), 88.234_6));
        assert!(close(t.g_lat.unwrap(), -0.5));
        assert!(close(t.g_vert.unwrap(), 1.0));
        assert!(close(t.g_long.unwrap(), 1.5));
        assert_eq!(t.gear.unwrap().to_string(), "10");
    }

    #[test]
    fn drift_angle_is_zero_when_nearly_stopped() {
        let mut buf = [0u8; 232];
        let mut p = Packet::new_checked(&mut buf[..], Format::Sled).unwrap();
        p.set_velocity_x(1.0);
        p.set_velocity_z(0.5);
        assert_eq!(Telemetry::decode(&p).drift_angle_deg, Some(0.0));
    }

    #[test]
    fn sled_has_no_dash_values() {
        let mut buf = [0u8; 232];
        Packet::new_checked(&mut buf[..], Format::Sled)
            .unwrap()
            .set_is_race_on(1);
        let t = Telemetry::from_bytes(&buf, Format::Sled).unwrap();
        assert_eq!(t.speed_kmh, None);
        assert_eq!(t.gear, None);
        assert_eq!(t.tire_temp_c, None);
        assert_eq!(t.car_class_letter, None);
        assert_eq!(t.fields.speed, None);
        assert_eq!(t.rev_fraction, Some(0.0));
        assert!(Telemetry::from_bytes(&[0u8; 231], Format::Sled).is_err());
    }

    #[test]
    fn serializes_every_field_by_name_with_absent_as_null() {
        let mut buf = [0u8; 311];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fm7).unwrap();
        p.set_gear(11).unwrap();
        p.set_wheel_in_puddle(Wheels::from_array([Puddle::Depth(0.5); 4]));
        let json = serde_json::to_value(Telemetry::decode(&p)).unwrap();
        assert_eq!(json["format"], "fm7");
        assert_eq!(json["gear"], 11);
        assert_eq!(json["gear_label"], "N");
        assert_eq!(json["car_group"], serde_json::Value::Null);
        assert_eq!(json["track_ordinal"], serde_json::Value::Null);
        assert_eq!(json["wheel_in_puddle"]["fl"], 0.5);
        assert_eq!(json["speed"], 0.0);
        assert_eq!(json["car_class_letter"], "D");
    }
}

/// The checked-in fixtures of `tests/fixtures/`, written by
/// `cargo run --example make_fixtures`. The expected values are literals here, not
/// taken from the generator, so a generator or decoder change that moves a value
/// fails these tests.
#[cfg(test)]
mod fixtures {
    use super::*;
    use crate::wire::{detect, Detector, Puddle, AGREEING_PACKETS};

    const SLED: &[u8] = include_bytes!("../../tests/fixtures/sled.bin");
    const FM7: &[u8] = include_bytes!("../../tests/fixtures/fm7.bin");
    const FM2023: &[u8] = include_bytes!("../../tests/fixtures/fm2023.bin");
    const FH4: &[u8] = include_bytes!("../../tests/fixtures/fh4.bin");
    const FH5: &[u8] = include_bytes!("../../tests/fixtures/fh5.bin");
    const FH6: &[u8] = include_bytes!("../../tests/fixtures/fh6.bin");

    #[track_caller]
    fn close(actual: f32, expected: f32) {
        assert!(
            (actual - expected).abs() <= 1e-5 * expected.abs().max(1.0),
            "{actual} is not {expected}"
        );
    }

    #[track_caller]
    fn decode(bytes: &[u8], format: Format) -> Telemetry {
        let t = Telemetry::from_bytes(bytes, format).expect("fixture has the format's length");
        assert_eq!(t.format, format);
        t
    }

    /// Four values by wheel, front left first.
    fn wheels<T>(fl: T, fr: T, rl: T, rr: T) -> Wheels<T> {
        Wheels { fl, fr, rl, rr }
    }

    /// The Sled values every fixture shares (all but TimestampMS, CarClass,
    /// DrivetrainType and WheelInPuddle), and the values derived from them.
    #[track_caller]
    fn shared_sled(t: &Telemetry) {
        let f = &t.fields;
        assert_eq!(f.is_race_on, 1);
        assert_eq!(f.engine_max_rpm, 8_000.0);
        assert_eq!(f.engine_idle_rpm, 800.0);
        assert_eq!(f.current_engine_rpm, 6_000.0);
        assert_eq!(f.acceleration_x, 9.806_65);
        assert_eq!(f.acceleration_y, -0.5);
        assert_eq!(f.acceleration_z, -19.613_3);
        assert_eq!(f.velocity_x, 3.0);
        assert_eq!(f.velocity_y, 0.25);
        assert_eq!(f.velocity_z, 4.0);
        assert_eq!(f.angular_velocity_x, 0.125);
        assert_eq!(f.angular_velocity_y, -0.375);
        assert_eq!(f.angular_velocity_z, 0.062_5);
        assert_eq!(f.yaw, 1.5);
        assert_eq!(f.pitch, -0.031_25);
        assert_eq!(f.roll, 0.015_625);
        assert_eq!(
            f.normalized_suspension_travel,
            wheels(0.41, 0.42, 0.43, 0.44)
        );
        assert_eq!(f.tire_slip_ratio, wheels(0.11, 0.12, 0.13, 0.14));
        assert_eq!(f.wheel_rotation_speed, wheels(101.0, 102.0, 103.0, 104.0));
        assert_eq!(f.wheel_on_rumble_strip, wheels(1, 0, 0, 1));
        assert_eq!(f.surface_rumble, wheels(0.21, 0.22, 0.23, 0.24));
        assert_eq!(f.tire_slip_angle, wheels(0.31, 0.32, 0.33, 0.34));
        assert_eq!(f.tire_combined_slip, wheels(0.51, 0.52, 0.53, 0.54));
        assert_eq!(
            f.suspension_travel_meters,
            wheels(0.061, 0.062, 0.063, 0.064)
        );
        assert_eq!(f.car_ordinal, 3_456);
        assert_eq!(f.car_performance_index, 901);
        assert_eq!(f.num_cylinders, 8);
        assert_eq!(t.rev_fraction, Some(0.75));
        close(t.g_lat.unwrap(), 1.0);
        close(t.g_long.unwrap(), -2.0);
        close(t.g_vert.unwrap(), -0.050_985_81);
        // Sliding at atan2(3, 4).
        close(t.drift_angle_deg.unwrap(), 36.869_896);
    }

    /// WheelInPuddle as the depth formats carry it in every depth fixture.
    #[track_caller]
    fn depth_puddles(t: &Telemetry) {
        assert_eq!(
            t.fields.wheel_in_puddle,
            wheels(
                Puddle::Depth(0.5),
                Puddle::Depth(0.0),
                Puddle::Depth(0.25),
                Puddle::Depth(0.0)
            )
        );
    }

    /// The Dash values every fixture with a Dash block shares (all but Gear).
    #[track_caller]
    fn shared_dash(t: &Telemetry) {
        let f = &t.fields;
        assert_eq!(f.position_x, Some(-1_234.5));
        assert_eq!(f.position_y, Some(56.25));
        assert_eq!(f.position_z, Some(7_890.125));
        assert_eq!(f.speed, Some(27.5));
        assert_eq!(f.power, Some(186_425.0));
        assert_eq!(f.torque, Some(512.5));
        assert_eq!(f.tire_temp, Some(wheels(212.0, 194.0, 176.0, 158.0)));
        assert_eq!(f.boost, Some(14.5));
        assert_eq!(f.fuel, Some(0.75));
        assert_eq!(f.distance_traveled, Some(12_345.5));
        assert_eq!(f.best_lap, Some(83.25));
        assert_eq!(f.last_lap, Some(84.5));
        assert_eq!(f.current_lap, Some(12.75));
        assert_eq!(f.current_race_time, Some(300.5));
        assert_eq!(f.lap_number, Some(4));
        assert_eq!(f.race_position, Some(2));
        assert_eq!(f.accel, Some(255));
        assert_eq!(f.brake, Some(51));
        assert_eq!(f.clutch, Some(0));
        assert_eq!(f.hand_brake, Some(102));
        assert_eq!(f.steer, Some(-127));
        assert_eq!(f.normalized_driving_line, Some(17));
        assert_eq!(f.normalized_ai_brake_difference, Some(-9));
        close(t.speed_kmh.unwrap(), 99.0);
        close(t.speed_mph.unwrap(), 61.515_75);
        close(t.power_hp.unwrap(), 250.0);
        assert_eq!(t.throttle_pct, Some(100.0));
        close(t.brake_pct.unwrap(), 20.0);
        assert_eq!(t.clutch_pct, Some(0.0));
        close(t.handbrake_pct.unwrap(), 40.0);
        assert_eq!(t.steer_axis, Some(-1.0));
        let c = t.tire_temp_c.unwrap();
        close(c.fl, 100.0);
        close(c.fr, 90.0);
        close(c.rl, 80.0);
        close(c.rr, 70.0);
    }

    #[track_caller]
    fn horizon(t: &Telemetry, car_group: u32) {
        assert_eq!(t.fields.car_group, Some(car_group));
        assert_eq!(t.fields.smashable_vel_diff, Some(4.5));
        assert_eq!(t.fields.smashable_mass, Some(250.0));
    }

    #[track_caller]
    fn no_horizon(t: &Telemetry) {
        assert_eq!(t.fields.car_group, None);
        assert_eq!(t.fields.smashable_vel_diff, None);
        assert_eq!(t.fields.smashable_mass, None);
    }

    #[track_caller]
    fn no_extras(t: &Telemetry) {
        assert_eq!(t.fields.tire_wear, None);
        assert_eq!(t.fields.track_ordinal, None);
    }

    #[track_caller]
    fn tail_byte(bytes: &[u8], format: Format) -> Option<u8> {
        Packet::new_checked(bytes, format).unwrap().tail_byte()
    }

    #[test]
    fn sled_fixture() {
        assert_eq!(SLED.len(), 232);
        let t = decode(SLED, Format::Sled);
        shared_sled(&t);
        depth_puddles(&t);
        assert_eq!(t.fields.timestamp_ms, 111_111);
        assert_eq!(t.fields.car_class, 5);
        assert_eq!(t.fields.drivetrain_type, 2);
        assert_eq!(t.drivetrain, Some("AWD"));
        // docs/formats.md gives no class scale for the Sled packet.
        assert_eq!(t.car_class_letter, None);
        no_horizon(&t);
        no_extras(&t);
        let f = &t.fields;
        assert_eq!(f.position_x, None);
        assert_eq!(f.position_y, None);
        assert_eq!(f.position_z, None);
        assert_eq!(f.speed, None);
        assert_eq!(f.power, None);
        assert_eq!(f.torque, None);
        assert_eq!(f.tire_temp, None);
        assert_eq!(f.boost, None);
        assert_eq!(f.fuel, None);
        assert_eq!(f.distance_traveled, None);
        assert_eq!(f.best_lap, None);
        assert_eq!(f.last_lap, None);
        assert_eq!(f.current_lap, None);
        assert_eq!(f.current_race_time, None);
        assert_eq!(f.lap_number, None);
        assert_eq!(f.race_position, None);
        assert_eq!(f.accel, None);
        assert_eq!(f.brake, None);
        assert_eq!(f.clutch, None);
        assert_eq!(f.hand_brake, None);
        assert_eq!(f.gear, None);
        assert_eq!(f.steer, None);
        assert_eq!(f.normalized_driving_line, None);
        assert_eq!(f.normalized_ai_brake_difference, None);
        assert_eq!(t.speed_kmh, None);
        assert_eq!(t.speed_mph, None);
        assert_eq!(t.power_hp, None);
        assert_eq!(t.gear, None);
        assert_eq!(t.throttle_pct, None);
        assert_eq!(t.brake_pct, None);
        assert_eq!(t.clutch_pct, None);
        assert_eq!(t.handbrake_pct, None);
        assert_eq!(t.steer_axis, None);
        assert_eq!(t.tire_temp_c, None);
        assert_eq!(tail_byte(SLED, Format::Sled), None);
        assert_eq!(detect(SLED), Some(Format::Sled));
    }

    #[test]
    fn fm7_fixture() {
        assert_eq!(FM7.len(), 311);
        let t = decode(FM7, Format::Fm7);
        shared_sled(&t);
        depth_puddles(&t);
        shared_dash(&t);
        assert_eq!(t.fields.timestamp_ms, 222_222);
        assert_eq!(t.fields.car_class, 6);
        assert_eq!(t.car_class_letter, Some("P"));
        assert_eq!(t.fields.drivetrain_type, 1);
        assert_eq!(t.drivetrain, Some("RWD"));
        assert_eq!(t.fields.gear, Some(0));
        assert_eq!(t.gear, Some(Gear::Reverse));
        no_horizon(&t);
        no_extras(&t);
        assert_eq!(tail_byte(FM7, Format::Fm7), None);
        // docs/formats.md: Speed at 244 and Gear at 307 in FM.
        assert_eq!(FM7[244..248], 27.5f32.to_le_bytes());
        assert_eq!(FM7[307], 0);
        assert_eq!(detect(FM7), Some(Format::Fm7));
    }

    #[test]
    fn fm2023_fixture() {
        assert_eq!(FM2023.len(), 331);
        let t = decode(FM2023, Format::Fm2023);
        shared_sled(&t);
        depth_puddles(&t);
        shared_dash(&t);
        assert_eq!(t.fields.timestamp_ms, 333_333);
        assert_eq!(t.fields.car_class, 3);
        // docs/formats.md gives no FM2023 class scale.
        assert_eq!(t.car_class_letter, None);
        assert_eq!(t.fields.drivetrain_type, 0);
        assert_eq!(t.drivetrain, Some("FWD"));
        assert_eq!(t.fields.gear, Some(11));
        assert_eq!(t.gear, Some(Gear::Neutral));
        assert_eq!(t.fields.tire_wear, Some(wheels(0.91, 0.92, 0.93, 0.94)));
        assert_eq!(t.fields.track_ordinal, Some(860));
        no_horizon(&t);
        assert_eq!(tail_byte(FM2023, Format::Fm2023), None);
        // docs/formats.md: TireWear at 311, TrackOrdinal at 327.
        assert_eq!(FM2023[311..315], 0.91f32.to_le_bytes());
        assert_eq!(FM2023[327..331], 860i32.to_le_bytes());
        assert_eq!(detect(FM2023), Some(Format::Fm2023));
    }

    #[test]
    fn fh4_fixture() {
        assert_eq!(FH4.len(), 324);
        let t = decode(FH4, Format::Fh4);
        shared_sled(&t);
        depth_puddles(&t);
        shared_dash(&t);
        horizon(&t, 14);
        no_extras(&t);
        assert_eq!(t.fields.timestamp_ms, 444_444);
        assert_eq!(t.fields.car_class, 4);
        assert_eq!(t.car_class_letter, Some("S1"));
        assert_eq!(t.drivetrain, Some("AWD"));
        assert_eq!(t.fields.gear, Some(3));
        assert_eq!(t.gear, Some(Gear::Forward(3)));
        assert_eq!(tail_byte(FH4, Format::Fh4), Some(0xA4));
        // fh4 and fh5 share one layout and type puddles the same way, so nothing in
        // a packet tells them apart: detection names the layout fh5, and only a
        // Detector told fh4 (or a configured format) keeps the name fh4.
        assert_eq!(detect(FH4), Some(Format::Fh5));
        assert_eq!(Detector::new(Format::Fh4).detect(FH4), Some(Format::Fh4));
    }

    #[test]
    fn fh5_fixture() {
        assert_eq!(FH5.len(), 324);
        let t = decode(FH5, Format::Fh5);
        shared_sled(&t);
        depth_puddles(&t);
        shared_dash(&t);
        horizon(&t, 15);
        no_extras(&t);
        assert_eq!(t.fields.timestamp_ms, 555_555);
        assert_eq!(t.fields.car_class, 6);
        assert_eq!(t.car_class_letter, Some("X"));
        assert_eq!(t.drivetrain, Some("AWD"));
        assert_eq!(t.fields.gear, Some(12));
        assert_eq!(t.gear, Some(Gear::Other(12)));
        assert_eq!(t.gear.unwrap().to_string(), "12");
        assert_eq!(tail_byte(FH5, Format::Fh5), Some(0xA5));
        // docs/formats.md: puddles are F32 depths, Speed at 256, Gear at 319, tail at 323.
        assert_eq!(FH5[132..136], 0.5f32.to_le_bytes());
        assert_eq!(FH5[256..260], 27.5f32.to_le_bytes());
        assert_eq!(FH5[319], 12);
        assert_eq!(FH5[323], 0xA5);
        assert_eq!(detect(FH5), Some(Format::Fh5));
        let mut d = Detector::new(Format::Fh6);
        assert_eq!(
            (0..AGREEING_PACKETS)
                .map(|_| d.detect(FH5))
                .last()
                .flatten(),
            Some(Format::Fh5)
        );
    }

    #[test]
    fn fh6_fixture() {
        assert_eq!(FH6.len(), 324);
        let t = decode(FH6, Format::Fh6);
        shared_sled(&t);
        shared_dash(&t);
        horizon(&t, 16);
        no_extras(&t);
        assert_eq!(
            t.fields.wheel_in_puddle,
            wheels(
                Puddle::Flag(1),
                Puddle::Flag(0),
                Puddle::Flag(1),
                Puddle::Flag(0)
            )
        );
        assert_eq!(t.fields.timestamp_ms, 666_666);
        assert_eq!(t.fields.car_class, 6);
        assert_eq!(t.car_class_letter, Some("R"));
        assert_eq!(t.drivetrain, Some("AWD"));
        assert_eq!(t.fields.gear, Some(6));
        assert_eq!(t.gear, Some(Gear::Forward(6)));
        assert_eq!(t.gear.unwrap().to_string(), "6");
        assert_eq!(tail_byte(FH6, Format::Fh6), Some(0xA6));
        // docs/formats.md: puddles are S32 flags, CarGroup at 232, Speed at 256.
        assert_eq!(FH6[132..136], 1i32.to_le_bytes());
        assert_eq!(FH6[232..236], 16u32.to_le_bytes());
        assert_eq!(FH6[256..260], 27.5f32.to_le_bytes());
        assert_eq!(FH6[323], 0xA6);
        assert_eq!(detect(FH6), Some(Format::Fh6));
        let mut d = Detector::new(Format::Fh5);
        assert_eq!(
            (0..AGREEING_PACKETS)
                .map(|_| d.detect(FH6))
                .last()
                .flatten(),
            Some(Format::Fh6)
        );
    }
}
