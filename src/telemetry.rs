//! Decoding a packet into named values and the derived numbers a HUD shows.
//!
//! [`Telemetry::decode`] reads every field by name ([`Fields`]) and adds the values
//! a dashboard, the live view and the exports print: km/h and mph, hp, gear as
//! text, pedal percentages, G-forces, drift angle, tyre temperatures in °C. It is a
//! plain `Copy` struct: decoding never allocates.

use std::fmt;

use serde::Serialize;

use crate::wire::{Error, Fields, Format, Packet, Wheels};

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

/// The Gear byte as a driver reads it (FORMATS.md "Gear").
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
    /// Gear as a driver reads it: `R`, `N`, `1`..`10`, or the raw number.
    pub gear_label: Option<Gear>,
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
    pub rev_fraction: f32,
    /// Lateral G (positive: pushed right).
    pub g_lat: f32,
    /// Longitudinal G (positive: accelerating).
    pub g_long: f32,
    /// Vertical G.
    pub g_vert: f32,
    /// Angle between heading and travel, degrees, positive when sliding right;
    /// 0 below [`DRIFT_MIN_SPEED`].
    pub drift_angle_deg: f32,
    /// Tyre temperatures in °C (the packet sends °F).
    pub tire_temp_c: Option<Wheels<f32>>,
    /// CarClass as a letter, where the game's class scale is known.
    pub car_class_letter: Option<&'static str>,
    /// DrivetrainType as `FWD`, `RWD` or `AWD`.
    pub drivetrain: Option<&'static str>,
}

impl Telemetry {
    /// Reads every field of `packet` and derives the HUD values.
    pub fn decode<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
        let f = Fields::read(packet);
        let format = packet.format();
        let pct = |v: Option<u8>| v.map(|v| f32::from(v) * 100.0 / 255.0);
        let horizontal = f.velocity_x.hypot(f.velocity_z);
        Telemetry {
            format,
            speed_kmh: f.speed.map(|s| s * KMH_PER_MS),
            speed_mph: f.speed.map(|s| s * MPH_PER_MS),
            power_hp: f.power.map(|w| w / WATTS_PER_HP),
            gear_label: f.gear.map(Gear::from),
            throttle_pct: pct(f.accel),
            brake_pct: pct(f.brake),
            clutch_pct: pct(f.clutch),
            handbrake_pct: pct(f.hand_brake),
            steer_axis: f.steer.map(|s| (f32::from(s) / 127.0).clamp(-1.0, 1.0)),
            rev_fraction: if f.engine_max_rpm > 0.0 {
                (f.current_engine_rpm / f.engine_max_rpm).clamp(0.0, 1.0)
            } else {
                0.0
            },
            g_lat: f.acceleration_x / STANDARD_GRAVITY,
            g_long: f.acceleration_z / STANDARD_GRAVITY,
            g_vert: f.acceleration_y / STANDARD_GRAVITY,
            drift_angle_deg: if horizontal >= DRIFT_MIN_SPEED {
                f.velocity_x.atan2(f.velocity_z).to_degrees()
            } else {
                0.0
            },
            tire_temp_c: f.tire_temp.map(|w| w.map(|t| (t - 32.0) * 5.0 / 9.0)),
            car_class_letter: format
                .layout()
                .classes
                .and_then(|c| usize::try_from(f.car_class).ok().and_then(|i| c.get(i)))
                .copied(),
            drivetrain: match f.drivetrain_type {
                0 => Some("FWD"),
                1 => Some("RWD"),
                2 => Some("AWD"),
                _ => None,
            },
            fields: f,
        }
    }

    /// Checks `bytes` as a `format` packet and decodes it.
    pub fn from_bytes(bytes: &[u8], format: Format) -> Result<Self, Error> {
        Ok(Self::decode(&Packet::new_checked(bytes, format)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Puddle;

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
        assert_eq!(t.gear_label, Some(Gear::Reverse));
        assert_eq!(t.throttle_pct, Some(100.0));
        assert!(close(t.brake_pct.unwrap(), 20.0));
        assert_eq!(t.steer_axis, Some(-1.0));
        assert_eq!(t.rev_fraction, 0.75);
        assert!(close(t.g_lat, 1.0));
        assert!(close(t.g_long, -2.0));
        assert_eq!(t.g_vert, 0.0);
        assert!(close(t.drift_angle_deg, 45.0));
        let c = t.tire_temp_c.unwrap();
        assert!(close(c.fl, 100.0) && close(c.fr, 0.0) && close(c.rl, 50.0) && close(c.rr, -40.0));
        assert_eq!(t.car_class_letter, Some("R"));
        assert_eq!(t.drivetrain, Some("RWD"));
    }

    #[test]
    fn drift_angle_is_zero_when_nearly_stopped() {
        let mut buf = [0u8; 232];
        let mut p = Packet::new_checked(&mut buf[..], Format::Sled).unwrap();
        p.set_velocity_x(1.0);
        p.set_velocity_z(0.5);
        assert_eq!(Telemetry::decode(&p).drift_angle_deg, 0.0);
    }

    #[test]
    fn sled_has_no_dash_values() {
        let t = Telemetry::from_bytes(&[0u8; 232], Format::Sled).unwrap();
        assert_eq!(t.speed_kmh, None);
        assert_eq!(t.gear_label, None);
        assert_eq!(t.tire_temp_c, None);
        assert_eq!(t.car_class_letter, None);
        assert_eq!(t.fields.speed, None);
        assert_eq!(t.rev_fraction, 0.0);
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
