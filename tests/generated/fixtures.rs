//! The packets of `tests/fixtures/{sled,fm7,fm2023,fh4,fh5,fh6}.bin`, one per format.
//! `tests/it/generated.rs` checks that the committed files are these bytes, and with
//! `FORZA_RELAY_BLESS=1` writes them again.
//!
//! Each packet is built field by field from a [`Fields`] literal with distinct,
//! named values (no two neighbouring fields share a value, so a field read at the
//! wrong offset shows), then read back and compared. Per
//! format, the values that tell the fixtures apart are:
//!
//! | format | TimestampMS | CarClass | Gear | DrivetrainType | WheelInPuddle             | tail |
//! |--------|-------------|----------|------|----------------|---------------------------|------|
//! | sled   | 111111      | 5        | —    | 2 (AWD)        | depth 0.5, 0, 0.25, 0     | —    |
//! | fm7    | 222222      | 6 (P)    | 0 R  | 1 (RWD)        | depth 0.5, 0, 0.25, 0     | —    |
//! | fm2023 | 333333      | 3        | 11 N | 0 (FWD)        | depth 0.5, 0, 0.25, 0     | —    |
//! | fh4    | 444444      | 4 (S1)   | 3    | 2 (AWD)        | depth 0.5, 0, 0.25, 0     | 0xA4 |
//! | fh5    | 555555      | 6 (X)    | 12   | 2 (AWD)        | depth 0.5, 0, 0.25, 0     | 0xA5 |
//! | fh6    | 666666      | 6 (R)    | 6    | 2 (AWD)        | flag 1, 0, 1, 0           | 0xA6 |
//!
//! The Horizon block holds CarGroup 14/15/16 for fh4/fh5/fh6. Every other value is
//! the same in every format that has the field (see [`fields`]).
//!
//! The expected values are written out again, as literals, in the `fixtures` tests
//! at the bottom of `src/telemetry/mod.rs`: change a value here and those tests must be
//! changed by hand, which is the point (the tests don't trust this generator).

use forza_relay::wire::{Block, Fields, Format, Packet, Puddle, PuddleKind, Wheels};

/// The values written to the `format` fixture; fields the format lacks are `None`.
fn fields(format: Format) -> Fields {
    let layout = format.layout();
    let (timestamp_ms, car_class, gear, drivetrain_type) = match format {
        Format::Sled => (111_111, 5, 0, 2),
        Format::Fm7 => (222_222, 6, 0, 1),
        Format::Fm2023 => (333_333, 3, 11, 0),
        Format::Fh4 => (444_444, 4, 3, 2),
        Format::Fh5 => (555_555, 6, 12, 2),
        Format::Fh6 => (666_666, 6, 6, 2),
    };
    let wheel_in_puddle = match layout.puddle {
        PuddleKind::Depth => Wheels::from_array([0.5, 0.0, 0.25, 0.0]).map(Puddle::Depth),
        PuddleKind::Flag => Wheels::from_array([1, 0, 1, 0]).map(Puddle::Flag),
    };
    let mut f = Fields {
        is_race_on: 1,
        timestamp_ms,
        engine_max_rpm: 8_000.0,
        engine_idle_rpm: 800.0,
        current_engine_rpm: 6_000.0,
        acceleration_x: 9.806_65,
        acceleration_y: -0.5,
        acceleration_z: -19.613_3,
        velocity_x: 3.0,
        velocity_y: 0.25,
        velocity_z: 4.0,
        angular_velocity_x: 0.125,
        angular_velocity_y: -0.375,
        angular_velocity_z: 0.062_5,
        yaw: 1.5,
        pitch: -0.031_25,
        roll: 0.015_625,
        normalized_suspension_travel: Wheels::from_array([0.41, 0.42, 0.43, 0.44]),
        tire_slip_ratio: Wheels::from_array([0.11, 0.12, 0.13, 0.14]),
        wheel_rotation_speed: Wheels::from_array([101.0, 102.0, 103.0, 104.0]),
        wheel_on_rumble_strip: Wheels::from_array([1, 0, 0, 1]),
        wheel_in_puddle,
        surface_rumble: Wheels::from_array([0.21, 0.22, 0.23, 0.24]),
        tire_slip_angle: Wheels::from_array([0.31, 0.32, 0.33, 0.34]),
        tire_combined_slip: Wheels::from_array([0.51, 0.52, 0.53, 0.54]),
        suspension_travel_meters: Wheels::from_array([0.061, 0.062, 0.063, 0.064]),
        car_ordinal: 3_456,
        car_class,
        car_performance_index: 901,
        drivetrain_type,
        num_cylinders: 8,
        ..Fields::default()
    };
    if layout.start(Block::Horizon).is_some() {
        f.car_group = Some(match format {
            Format::Fh4 => 14,
            Format::Fh5 => 15,
            _ => 16,
        });
        f.smashable_vel_diff = Some(4.5);
        f.smashable_mass = Some(250.0);
    }
    if layout.start(Block::Dash).is_some() {
        f.position_x = Some(-1_234.5);
        f.position_y = Some(56.25);
        f.position_z = Some(7_890.125);
        f.speed = Some(27.5);
        f.power = Some(186_425.0);
        f.torque = Some(512.5);
        f.tire_temp = Some(Wheels::from_array([212.0, 194.0, 176.0, 158.0]));
        f.boost = Some(14.5);
        f.fuel = Some(0.75);
        f.distance_traveled = Some(12_345.5);
        f.best_lap = Some(83.25);
        f.last_lap = Some(84.5);
        f.current_lap = Some(12.75);
        f.current_race_time = Some(300.5);
        f.lap_number = Some(4);
        f.race_position = Some(2);
        f.accel = Some(255);
        f.brake = Some(51);
        f.clutch = Some(0);
        f.hand_brake = Some(102);
        f.gear = Some(gear);
        f.steer = Some(-127);
        f.normalized_driving_line = Some(17);
        f.normalized_ai_brake_difference = Some(-9);
    }
    if layout.start(Block::Extras).is_some() {
        f.tire_wear = Some(Wheels::from_array([0.91, 0.92, 0.93, 0.94]));
        f.track_ordinal = Some(860);
    }
    f
}

/// The undocumented byte 323 of the Horizon formats: non-zero, so a translation
/// that drops it shows.
fn tail_byte(format: Format) -> Option<u8> {
    match format {
        Format::Fh4 => Some(0xA4),
        Format::Fh5 => Some(0xA5),
        Format::Fh6 => Some(0xA6),
        _ => None,
    }
}

/// The `format` fixture's bytes.
pub fn packet(format: Format) -> Vec<u8> {
    let expected = fields(format);
    let mut p = Packet::new_checked(vec![0u8; format.len()], format)
        .expect("the buffer is made format.len() long");
    expected.write(&mut p);
    if let Some(tail) = tail_byte(format) {
        assert!(p.set_tail_byte(tail), "{format} has a tail byte");
    }
    assert_eq!(Fields::read(&p), expected, "{format} reads back");
    assert_eq!(p.tail_byte(), tail_byte(format), "{format} tail reads back");
    p.into_inner()
}
