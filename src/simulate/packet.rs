//! What a frame's packet shows: the state the car left (`car::Shown`) and the
//! car's identity, written field by field through the [`Packet`] setters
//! ([`Fields::write`]), never by offset.
//!
//! [`Packet`]: crate::wire::Packet

use super::car::{ENGINE_IDLE_RPM, ENGINE_MAX_RPM, SUSPENSION_TRAVEL};
use super::track::wrap_angle;
use super::Simulator;
use crate::wire::{Fields, Format, Puddle, Wheels};

/// The car, as each game would identify it (docs/formats.md "Car class").
const CAR_ORDINAL: i32 = 2_352;
const CAR_PI: i32 = 925;
const FM_CAR_PI: i32 = 870;
pub(super) const CAR_GROUP: u32 = 26;
pub(super) const DRIVETRAIN_RWD: i32 = 1;
pub(super) const CYLINDERS: i32 = 8;
/// FM2023's track id in docs/formats.md's example.
pub(super) const TRACK_ORDINAL: i32 = 1_640;
/// The grid slot the car starts from; it gains a place a lap.
pub(super) const GRID_POSITION: u8 = 4;

impl Simulator {
    /// The car as this format's game names it: (CarClass, CarPerformanceIndex).
    fn class(&self) -> (i32, i32) {
        match self.format {
            // FH6: D C B A S1 S2 R X; R shows the class mapping in translation.
            Format::Fh6 => (6, CAR_PI),
            // FH4/FH5: D C B A S1 S2 X.
            Format::Fh4 | Format::Fh5 => (5, CAR_PI),
            // FM7: D C B A S R P X; FM2023 and Sled: the same index.
            Format::Fm7 | Format::Fm2023 | Format::Sled => (5, FM_CAR_PI),
        }
    }

    /// Every field of the current frame, by name.
    pub(super) fn fields(&self, timestamp: u32) -> Fields {
        let s = &self.shown;
        let f = |v: f64| v as f32;
        let wheels = |a: [f64; 4]| Wheels::from_array(a.map(f));
        let byte = |v: f64| (v.clamp(0.0, 1.0) * 255.0).round() as u8;
        let signed = |v: f64| v.round().clamp(-127.0, 127.0) as i8;
        let (class, pi) = self.class();
        let gear = if self.shifting() { 11 } else { self.gear };
        Fields {
            is_race_on: 1,
            timestamp_ms: timestamp,
            engine_max_rpm: f(ENGINE_MAX_RPM),
            engine_idle_rpm: f(ENGINE_IDLE_RPM),
            current_engine_rpm: f(self.rpm),
            acceleration_x: f(s.accel[0]),
            acceleration_y: f(s.accel[1]),
            acceleration_z: f(s.accel[2]),
            velocity_x: f(s.velocity[0]),
            velocity_y: f(s.velocity[1]),
            velocity_z: f(s.velocity[2]),
            angular_velocity_x: f(s.angular[0]),
            angular_velocity_y: f(s.angular[1]),
            angular_velocity_z: f(s.angular[2]),
            yaw: f(wrap_angle(s.yaw)),
            pitch: f(s.pitch),
            roll: f(s.roll),
            normalized_suspension_travel: wheels(s.suspension),
            tire_slip_ratio: wheels(s.slip_ratio),
            wheel_rotation_speed: wheels(s.wheel_speed),
            wheel_on_rumble_strip: Wheels::from_array(s.kerb.map(i32::from)),
            wheel_in_puddle: Wheels::from_array(s.puddle.map(|d| Puddle::Depth(d as f32))),
            surface_rumble: wheels(s.rumble),
            tire_slip_angle: wheels(s.slip_angle),
            tire_combined_slip: Wheels::from_array(
                [0, 1, 2, 3].map(|i| s.slip_ratio[i].hypot(s.slip_angle[i]) as f32),
            ),
            suspension_travel_meters: wheels(s.suspension.map(|t| t * SUSPENSION_TRAVEL)),
            car_ordinal: CAR_ORDINAL,
            car_class: class,
            car_performance_index: pi,
            drivetrain_type: DRIVETRAIN_RWD,
            num_cylinders: CYLINDERS,
            car_group: Some(CAR_GROUP),
            smashable_vel_diff: Some(0.0),
            smashable_mass: Some(0.0),
            position_x: Some(f(s.position[0])),
            position_y: Some(f(s.position[1])),
            position_z: Some(f(s.position[2])),
            speed: Some(f(self.v)),
            power: Some(f(s.power)),
            torque: Some(f(s.torque)),
            tire_temp: Some(wheels(self.tyre_temp)),
            boost: Some(f(self.boost)),
            fuel: Some(f(self.fuel)),
            distance_traveled: Some(f(self.distance)),
            best_lap: Some(f(self.best_lap)),
            last_lap: Some(f(self.last_lap)),
            current_lap: Some(f(self.lap_time)),
            current_race_time: Some(f(self.race_time)),
            lap_number: Some(self.laps),
            race_position: Some(GRID_POSITION.saturating_sub(self.laps.min(3) as u8)),
            accel: Some(byte(self.throttle)),
            brake: Some(byte(self.brake)),
            clutch: Some(byte(self.clutch)),
            hand_brake: Some(0),
            gear: Some(gear),
            steer: Some(signed(s.steer)),
            normalized_driving_line: Some(signed(s.line)),
            normalized_ai_brake_difference: Some(signed(s.ai_brake)),
            tire_wear: Some(wheels(self.wear)),
            track_ordinal: Some(TRACK_ORDINAL),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate::testing::{drive, DT_60};
    use crate::wire::Format;

    #[test]
    fn classes_show_the_mapping_fh6_r_to_fh5_s2() {
        let class = |format| drive(format, 1, DT_60, 10)[9].car_class_letter;
        assert_eq!(class(Format::Fh6), Some("R"));
        assert_eq!(class(Format::Fh5), Some("S2"));
        assert_eq!(class(Format::Fh4), Some("S2"));
        assert_eq!(class(Format::Fm7), Some("R"));
    }
}
