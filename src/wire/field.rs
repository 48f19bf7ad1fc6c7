//! The field table: every named field of docs/formats.md, with its type and its offset
//! relative to its block, written exactly once.
//!
//! The [`fields!`] invocation at the bottom of this file generates, from one list:
//! a [`Field`] const per field (and [`ALL`]), a typed getter and a `set_*` setter per
//! field on [`Packet`], and the [`Fields`] struct holding every value by name. Sled
//! fields exist in every format, so their getters return the value; the others
//! return `Option` (`None` when the format lacks the block) and their setters return
//! `Err(Absent)`.
//!
//! Each entry also says what the field means (its doc comment's first line), its
//! unit and the values it takes, where known: the data the generated pages
//! (docs/formats.md, docs/fields.md) print, kept here so that there is one list.

use serde::Serialize;

use super::{Absent, Block, Format, Packet, PuddleKind};

/// The scalar types of docs/formats.md ("S32", "F32", …), plus WheelInPuddle's, which
/// is typed per format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// S8.
    S8,
    /// U8.
    U8,
    /// U16.
    U16,
    /// S32.
    S32,
    /// U32.
    U32,
    /// F32.
    F32,
    /// WheelInPuddle: F32 or S32 as the format's [`PuddleKind`] says.
    Puddle,
}

impl Scalar {
    /// The type as `format` stores it: [`Scalar::Puddle`] becomes F32 or S32, the
    /// others stay as they are.
    pub const fn in_format(self, format: Format) -> Scalar {
        match (self, format.layout().puddle) {
            (Scalar::Puddle, PuddleKind::Depth) => Scalar::F32,
            (Scalar::Puddle, PuddleKind::Flag) => Scalar::S32,
            (other, _) => other,
        }
    }

    /// Bytes one value takes.
    pub const fn size(self) -> usize {
        match self {
            Scalar::S8 | Scalar::U8 => 1,
            Scalar::U16 => 2,
            Scalar::S32 | Scalar::U32 | Scalar::F32 | Scalar::Puddle => 4,
        }
    }
}

/// A value stored in a packet as a fixed number of little-endian bytes.
pub trait Value: Copy {
    /// Bytes the value takes in a packet.
    const SIZE: usize;
    /// Its scalar type (of each wheel, for [`Wheels`]).
    const SCALAR: Scalar;
    /// True for [`Wheels`]: four values, FL, FR, RL, RR.
    const WHEELS: bool = false;
    /// Reads the value from the start of `b`, typed as `format` types it.
    /// `b` holds at least `SIZE` bytes: a [`Packet`] guarantees it.
    fn read(b: &[u8], format: Format) -> Self;
    /// Writes the value at the start of `b`, typed as `format` types it.
    fn write(self, b: &mut [u8], format: Format);
}

macro_rules! le_value {
    ($($t:ty: $scalar:ident),*) => {$(
        impl Value for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            const SCALAR: Scalar = Scalar::$scalar;
            #[inline(always)]
            fn read(b: &[u8], _: Format) -> Self {
                <$t>::from_le_bytes(*b.first_chunk().expect("Packet checked the length"))
            }
            #[inline(always)]
            fn write(self, b: &mut [u8], _: Format) {
                b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_value!(i8: S8, u8: U8, u16: U16, i32: S32, u32: U32, f32: F32);

/// One value per wheel, in the packet's order: front left, front right, rear left,
/// rear right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Wheels<T> {
    /// Front left.
    pub fl: T,
    /// Front right.
    pub fr: T,
    /// Rear left.
    pub rl: T,
    /// Rear right.
    pub rr: T,
}

impl<T> Wheels<T> {
    /// The four values in packet order.
    pub fn from_array([fl, fr, rl, rr]: [T; 4]) -> Self {
        Wheels { fl, fr, rl, rr }
    }

    /// The four values in packet order.
    pub fn into_array(self) -> [T; 4] {
        [self.fl, self.fr, self.rl, self.rr]
    }

    /// Applies `f` to each wheel.
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> Wheels<U> {
        Wheels {
            fl: f(self.fl),
            fr: f(self.fr),
            rl: f(self.rl),
            rr: f(self.rr),
        }
    }
}

impl<T: Value> Value for Wheels<T> {
    const SIZE: usize = 4 * T::SIZE;
    const SCALAR: Scalar = T::SCALAR;
    const WHEELS: bool = true;
    #[inline(always)]
    fn read(b: &[u8], format: Format) -> Self {
        let n = T::SIZE;
        Wheels {
            fl: T::read(&b[0..], format),
            fr: T::read(&b[n..], format),
            rl: T::read(&b[2 * n..], format),
            rr: T::read(&b[3 * n..], format),
        }
    }
    #[inline(always)]
    fn write(self, b: &mut [u8], format: Format) {
        let n = T::SIZE;
        self.fl.write(&mut b[0..], format);
        self.fr.write(&mut b[n..], format);
        self.rl.write(&mut b[2 * n..], format);
        self.rr.write(&mut b[3 * n..], format);
    }
}

/// One WheelInPuddle word, typed as its format types it (docs/formats.md): a depth
/// 0..1 in sled, fm7, fm2023, fh4, fh5; a 0/1 flag in fh6.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Puddle {
    /// F32 depth, 0 (dry) … 1.
    Depth(f32),
    /// S32 flag, 0 or 1.
    Flag(i32),
}

impl Default for Puddle {
    fn default() -> Self {
        Puddle::Depth(0.0)
    }
}

impl Puddle {
    /// As a depth: a set flag is 1.0, a clear one 0.0.
    pub fn depth(self) -> f32 {
        match self {
            Puddle::Depth(d) => d,
            Puddle::Flag(v) => {
                if v != 0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }

    /// As a flag: a depth above 0 is 1, anything else (0, negative, NaN) is 0.
    pub fn flag(self) -> i32 {
        match self {
            Puddle::Flag(v) => v,
            Puddle::Depth(d) => i32::from(d > 0.0),
        }
    }

    /// True when the wheel is in water.
    pub fn is_wet(self) -> bool {
        self.depth() > 0.0
    }
}

impl Value for Puddle {
    const SIZE: usize = 4;
    const SCALAR: Scalar = Scalar::Puddle;
    #[inline(always)]
    fn read(b: &[u8], format: Format) -> Self {
        match format.layout().puddle {
            PuddleKind::Depth => Puddle::Depth(f32::read(b, format)),
            PuddleKind::Flag => Puddle::Flag(i32::read(b, format)),
        }
    }
    #[inline(always)]
    fn write(self, b: &mut [u8], format: Format) {
        match format.layout().puddle {
            PuddleKind::Depth => self.depth().write(b, format),
            PuddleKind::Flag => self.flag().write(b, format),
        }
    }
}

/// Where one named field lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The name docs/formats.md gives it (per-wheel fields carry all four wheels).
    pub name: &'static str,
    /// The snake_case name of its getter on [`Packet`] and of its key in [`Fields`].
    pub key: &'static str,
    /// The block it belongs to.
    pub block: Block,
    /// Its offset from the start of the block.
    pub offset: usize,
    /// Its size in bytes (all four wheels for a per-wheel field).
    pub size: usize,
    /// The type of its value (of each wheel's, for a per-wheel field).
    pub scalar: Scalar,
    /// True for a per-wheel field: four values, FL, FR, RL, RR.
    pub wheels: bool,
    /// Its unit (`"rpm"`, `"m/s²"`), `""` for a count, a code or a ratio.
    pub unit: &'static str,
    /// The values it takes, where the games' documents or the code say
    /// (`"0 … 255"`); `""` where nothing is known.
    pub range: &'static str,
    /// What it means: the first line of its documentation in the table.
    pub meaning: &'static str,
}

impl Field {
    /// Where the field starts in a `format` packet, or `None` if the format lacks it.
    pub const fn start(&self, format: Format) -> Option<usize> {
        match format.layout().start(self.block) {
            Some(block) => Some(block + self.offset),
            None => None,
        }
    }
}

macro_rules! fields {
    (
        $(
            $block:ident $presence:ident {
                $(
                    #[doc = $meaning:literal]
                    $(#[doc = $doc:literal])*
                    $name:ident, $setter:ident, $konst:ident: $ty:ty = $off:literal, $wire:literal
                        $(, unit $unit:literal)? $(, range $range:literal)?;
                )*
            }
        )*
    ) => {
        $($(
            #[doc = concat!("`", $wire, "`: ", stringify!($ty), " at +", $off, " in the ", stringify!($block), " block.")]
            pub const $konst: Field = Field {
                name: $wire,
                key: stringify!($name),
                block: Block::$block,
                offset: $off,
                size: <$ty as Value>::SIZE,
                scalar: <$ty as Value>::SCALAR,
                wheels: <$ty as Value>::WHEELS,
                unit: fields!(@or $($unit)?),
                range: fields!(@or $($range)?),
                meaning: fields!(@trim $meaning),
            };
        )*)*

        /// Every field, block by block, in offset order.
        pub const ALL: &[Field] = &[$($($konst,)*)*];

        impl<T: AsRef<[u8]>> Packet<T> {
            $($(
                fields!(@get $presence, $name, $konst, $ty, $wire, $meaning $(, $doc)*);
            )*)*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            $($(
                fields!(@set $presence, $setter, $konst, $ty, $wire);
            )*)*
        }

        /// Every field of a packet by name; fields the format lacks are `None`.
        #[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
        pub struct Fields {
            $($(
                #[doc = $meaning]
                $(#[doc = $doc])*
                $(#[doc = concat!("\n\nIn ", $unit, ".")])?
                pub $name: fields!(@ty $presence, $ty),
            )*)*
        }

        impl Fields {
            /// Reads every field `packet` has.
            pub fn read<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
                Fields { $($($name: packet.$name(),)*)* }
            }

            /// Writes every field the packet's format has; a `None` leaves its bytes
            /// as they are, and a value for a block the format lacks is skipped.
            pub fn write<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
                $($(fields!(@write $presence, self.$name, packet.$setter);)*)*
            }
        }
    };

    (@get always, $name:ident, $konst:ident, $ty:ty, $wire:literal, $meaning:literal $(, $doc:literal)*) => {
        #[doc = $meaning]
        $(#[doc = $doc])*
        #[inline]
        pub fn $name(&self) -> $ty {
            <$ty as Value>::read(&self.as_bytes()[$konst.offset..], self.format())
        }
    };
    (@get optional, $name:ident, $konst:ident, $ty:ty, $wire:literal, $meaning:literal $(, $doc:literal)*) => {
        #[doc = $meaning]
        $(#[doc = $doc])*
        #[doc = ""]
        #[doc = concat!("`None` when the packet's format has no ", $wire, ".")]
        #[inline]
        pub fn $name(&self) -> Option<$ty> {
            let at = $konst.start(self.format())?;
            Some(<$ty as Value>::read(&self.as_bytes()[at..], self.format()))
        }
    };
    (@set always, $setter:ident, $konst:ident, $ty:ty, $wire:literal) => {
        #[doc = concat!("Sets ", $wire, ".")]
        #[inline]
        pub fn $setter(&mut self, value: $ty) {
            let format = self.format();
            value.write(&mut self.as_bytes_mut()[$konst.offset..], format);
        }
    };
    (@set optional, $setter:ident, $konst:ident, $ty:ty, $wire:literal) => {
        #[doc = concat!("Sets ", $wire, "; `Err(Absent)` when the format has no ", $wire, ".")]
        #[inline]
        pub fn $setter(&mut self, value: $ty) -> Result<(), Absent> {
            let format = self.format();
            let at = $konst.start(format).ok_or(Absent { field: $wire, format })?;
            value.write(&mut self.as_bytes_mut()[at..], format);
            Ok(())
        }
    };
    (@or) => { "" };
    (@or $text:literal) => { $text };
    // A doc comment's text starts with the space after `///`.
    (@trim $doc:literal) => {
        match $doc.as_bytes() {
            [b' ', rest @ ..] => match std::str::from_utf8(rest) {
                Ok(text) => text,
                Err(_) => panic!("a doc comment is UTF-8"),
            },
            _ => $doc,
        }
    };
    (@ty always, $ty:ty) => { $ty };
    (@ty optional, $ty:ty) => { Option<$ty> };
    (@write always, $value:expr, $packet:ident . $setter:ident) => {
        $packet.$setter($value);
    };
    (@write optional, $value:expr, $packet:ident . $setter:ident) => {
        if let Some(v) = $value {
            // A value for a block this format lacks is skipped, as documented.
            let _ = $packet.$setter(v);
        }
    };
}

fields! {
    Sled always {
        /// 1 while driving, 0 in menus or when the race is stopped.
        is_race_on, set_is_race_on, IS_RACE_ON: i32 = 0, "IsRaceOn", range "0 or 1";
        /// Wraps to 0 after 2^32 ms: an order, not a clock.
        timestamp_ms, set_timestamp_ms, TIMESTAMP_MS: u32 = 4, "TimestampMS", unit "ms";
        /// The redline.
        engine_max_rpm, set_engine_max_rpm, ENGINE_MAX_RPM: f32 = 8, "EngineMaxRpm", unit "rpm";
        /// Idle revs.
        engine_idle_rpm, set_engine_idle_rpm, ENGINE_IDLE_RPM: f32 = 12, "EngineIdleRpm", unit "rpm";
        /// Current revs.
        current_engine_rpm, set_current_engine_rpm, CURRENT_ENGINE_RPM: f32 = 16, "CurrentEngineRpm", unit "rpm",
            range "EngineIdleRpm … EngineMaxRpm while driving";
        /// Acceleration in car space, X to the right.
        acceleration_x, set_acceleration_x, ACCELERATION_X: f32 = 20, "AccelerationX", unit "m/s²";
        /// Acceleration in car space, Y up.
        acceleration_y, set_acceleration_y, ACCELERATION_Y: f32 = 24, "AccelerationY", unit "m/s²";
        /// Acceleration in car space, Z forward.
        acceleration_z, set_acceleration_z, ACCELERATION_Z: f32 = 28, "AccelerationZ", unit "m/s²";
        /// Velocity in car space, X to the right.
        velocity_x, set_velocity_x, VELOCITY_X: f32 = 32, "VelocityX", unit "m/s";
        /// Velocity in car space, Y up.
        velocity_y, set_velocity_y, VELOCITY_Y: f32 = 36, "VelocityY", unit "m/s";
        /// Velocity in car space, Z forward.
        velocity_z, set_velocity_z, VELOCITY_Z: f32 = 40, "VelocityZ", unit "m/s";
        /// Pitch rate.
        angular_velocity_x, set_angular_velocity_x, ANGULAR_VELOCITY_X: f32 = 44, "AngularVelocityX", unit "rad/s";
        /// Yaw rate.
        angular_velocity_y, set_angular_velocity_y, ANGULAR_VELOCITY_Y: f32 = 48, "AngularVelocityY", unit "rad/s";
        /// Roll rate.
        angular_velocity_z, set_angular_velocity_z, ANGULAR_VELOCITY_Z: f32 = 52, "AngularVelocityZ", unit "rad/s";
        /// Heading.
        yaw, set_yaw, YAW: f32 = 56, "Yaw", unit "rad";
        /// Pitch.
        pitch, set_pitch, PITCH: f32 = 60, "Pitch", unit "rad";
        /// Roll.
        roll, set_roll, ROLL: f32 = 64, "Roll", unit "rad";
        /// Suspension travel: 0 stretched, 1 compressed.
        normalized_suspension_travel, set_normalized_suspension_travel, NORMALIZED_SUSPENSION_TRAVEL: Wheels<f32> = 68, "NormalizedSuspensionTravel",
            range "0 … 1";
        /// Tyre slip ratio: 0 is grip, an absolute value above 1 is grip lost.
        tire_slip_ratio, set_tire_slip_ratio, TIRE_SLIP_RATIO: Wheels<f32> = 84, "TireSlipRatio";
        /// How fast the wheel turns.
        wheel_rotation_speed, set_wheel_rotation_speed, WHEEL_ROTATION_SPEED: Wheels<f32> = 100, "WheelRotationSpeed", unit "rad/s";
        /// 1 on a rumble strip.
        wheel_on_rumble_strip, set_wheel_on_rumble_strip, WHEEL_ON_RUMBLE_STRIP: Wheels<i32> = 116, "WheelOnRumbleStrip", range "0 or 1";
        /// In water: an F32 depth in sled, fm7, fm2023, fh4, fh5; an S32 flag (0 or 1) in fh6.
        wheel_in_puddle, set_wheel_in_puddle, WHEEL_IN_PUDDLE: Wheels<Puddle> = 132, "WheelInPuddle", range "0 … 1";
        /// Force-feedback rumble of the surface.
        surface_rumble, set_surface_rumble, SURFACE_RUMBLE: Wheels<f32> = 148, "SurfaceRumble";
        /// Tyre slip angle, normalised like the slip ratio.
        tire_slip_angle, set_tire_slip_angle, TIRE_SLIP_ANGLE: Wheels<f32> = 164, "TireSlipAngle";
        /// Combined slip, normalised like the slip ratio.
        tire_combined_slip, set_tire_combined_slip, TIRE_COMBINED_SLIP: Wheels<f32> = 180, "TireCombinedSlip";
        /// Suspension travel.
        suspension_travel_meters, set_suspension_travel_meters, SUSPENSION_TRAVEL_METERS: Wheels<f32> = 196, "SuspensionTravelMeters", unit "m";
        /// The id of the car's make and model.
        car_ordinal, set_car_ordinal, CAR_ORDINAL: i32 = 212, "CarOrdinal";
        /// Class index on the game's own scale (docs/formats.md "Car class").
        car_class, set_car_class, CAR_CLASS: i32 = 216, "CarClass";
        /// Performance index.
        car_performance_index, set_car_performance_index, CAR_PERFORMANCE_INDEX: i32 = 220, "CarPerformanceIndex", range "100 … 999";
        /// 0 FWD, 1 RWD, 2 AWD.
        drivetrain_type, set_drivetrain_type, DRIVETRAIN_TYPE: i32 = 224, "DrivetrainType", range "0 … 2";
        /// Number of cylinders.
        num_cylinders, set_num_cylinders, NUM_CYLINDERS: i32 = 228, "NumCylinders";
    }
    Horizon optional {
        /// Car category.
        car_group, set_car_group, CAR_GROUP: u32 = 0, "CarGroup";
        /// Speed lost hitting a smashable object.
        smashable_vel_diff, set_smashable_vel_diff, SMASHABLE_VEL_DIFF: f32 = 4, "SmashableVelDiff", unit "m/s";
        /// Mass of that object.
        smashable_mass, set_smashable_mass, SMASHABLE_MASS: f32 = 8, "SmashableMass", unit "kg";
    }
    Dash optional {
        /// Position in the world, X.
        position_x, set_position_x, POSITION_X: f32 = 0, "PositionX", unit "m";
        /// Position in the world, Y.
        position_y, set_position_y, POSITION_Y: f32 = 4, "PositionY", unit "m";
        /// Position in the world, Z.
        position_z, set_position_z, POSITION_Z: f32 = 8, "PositionZ", unit "m";
        /// Speed.
        speed, set_speed, SPEED: f32 = 12, "Speed", unit "m/s";
        /// Engine power.
        power, set_power, POWER: f32 = 16, "Power", unit "W";
        /// Engine torque.
        torque, set_torque, TORQUE: f32 = 20, "Torque", unit "N·m";
        /// Tyre temperature.
        tire_temp, set_tire_temp, TIRE_TEMP: Wheels<f32> = 24, "TireTemp", unit "°F";
        /// Boost above atmospheric pressure.
        boost, set_boost, BOOST: f32 = 40, "Boost", unit "psi";
        /// Fuel left.
        fuel, set_fuel, FUEL: f32 = 44, "Fuel", range "0 … 1";
        /// Distance driven.
        distance_traveled, set_distance_traveled, DISTANCE_TRAVELED: f32 = 48, "DistanceTraveled", unit "m";
        /// Best lap time.
        best_lap, set_best_lap, BEST_LAP: f32 = 52, "BestLap", unit "s";
        /// Last lap time.
        last_lap, set_last_lap, LAST_LAP: f32 = 56, "LastLap", unit "s";
        /// Time in the current lap.
        current_lap, set_current_lap, CURRENT_LAP: f32 = 60, "CurrentLap", unit "s";
        /// Time in the race.
        current_race_time, set_current_race_time, CURRENT_RACE_TIME: f32 = 64, "CurrentRaceTime", unit "s";
        /// Laps completed.
        lap_number, set_lap_number, LAP_NUMBER: u16 = 68, "LapNumber";
        /// Position in the race.
        race_position, set_race_position, RACE_POSITION: u8 = 70, "RacePosition";
        /// Throttle.
        accel, set_accel, ACCEL: u8 = 71, "Accel", range "0 … 255";
        /// Brake.
        brake, set_brake, BRAKE: u8 = 72, "Brake", range "0 … 255";
        /// Clutch.
        clutch, set_clutch, CLUTCH: u8 = 73, "Clutch", range "0 … 255";
        /// Handbrake.
        hand_brake, set_hand_brake, HAND_BRAKE: u8 = 74, "HandBrake", range "0 … 255";
        /// 0 = R, 1 … 10 forward, 11 = N (docs/formats.md "Gear").
        gear, set_gear, GEAR: u8 = 75, "Gear";
        /// Steering: -127 full left, 127 full right.
        steer, set_steer, STEER: i8 = 76, "Steer", range "-127 … 127";
        /// Position relative to the racing line.
        normalized_driving_line, set_normalized_driving_line, NORMALIZED_DRIVING_LINE: i8 = 77, "NormalizedDrivingLine", range "-127 … 127";
        /// Difference from the AI's braking hint.
        normalized_ai_brake_difference, set_normalized_ai_brake_difference, NORMALIZED_AI_BRAKE_DIFFERENCE: i8 = 78, "NormalizedAIBrakeDifference",
            range "-127 … 127";
    }
    Extras optional {
        /// Tyre wear (FM2023).
        tire_wear, set_tire_wear, TIRE_WEAR: Wheels<f32> = 0, "TireWear", range "0 … 1";
        /// The track's id (FM2023).
        track_ordinal, set_track_ordinal, TRACK_ORDINAL: i32 = 16, "TrackOrdinal";
    }
}

/// True when the fields of `block` in [`ALL`] follow each other with no gap or
/// overlap and end exactly at the block's length.
const fn tiles(block: Block) -> bool {
    let mut next = 0;
    let mut i = 0;
    while i < ALL.len() {
        let f = ALL[i];
        if f.block as u8 == block as u8 {
            if f.offset != next {
                return false;
            }
            next += f.size;
        }
        i += 1;
    }
    next == block.len()
}

/// True when every field's size is its scalar's, times four for a per-wheel field.
const fn sizes_match_types() -> bool {
    let mut i = 0;
    while i < ALL.len() {
        let f = ALL[i];
        let n = if f.wheels { 4 } else { 1 };
        if f.size != n * f.scalar.size() {
            return false;
        }
        i += 1;
    }
    true
}

const _: () = assert!(sizes_match_types());
const _: () = assert!(tiles(Block::Sled));
const _: () = assert!(tiles(Block::Horizon));
const _: () = assert!(tiles(Block::Dash));
const _: () = assert!(tiles(Block::Extras));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_offsets_match_formats_md() {
        // Spot checks of the FH and FM columns of docs/formats.md's Dash table.
        assert_eq!(SPEED.start(Format::Fm7), Some(244));
        assert_eq!(SPEED.start(Format::Fh6), Some(256));
        assert_eq!(GEAR.start(Format::Fm7), Some(307));
        assert_eq!(GEAR.start(Format::Fh5), Some(319));
        assert_eq!(NORMALIZED_AI_BRAKE_DIFFERENCE.start(Format::Fh4), Some(322));
        assert_eq!(TIRE_WEAR.start(Format::Fm2023), Some(311));
        assert_eq!(TRACK_ORDINAL.start(Format::Fm2023), Some(327));
        assert_eq!(CAR_GROUP.start(Format::Fh6), Some(232));
        assert_eq!(CAR_GROUP.start(Format::Fm7), None);
        assert_eq!(SPEED.start(Format::Sled), None);
        assert_eq!(WHEEL_IN_PUDDLE.start(Format::Sled), Some(132));
        assert_eq!(NUM_CYLINDERS.start(Format::Sled), Some(228));
    }

    #[test]
    fn types_and_keys_match_formats_md() {
        assert_eq!((IS_RACE_ON.scalar, IS_RACE_ON.wheels), (Scalar::S32, false));
        assert_eq!(TIMESTAMP_MS.scalar, Scalar::U32);
        assert_eq!((TIRE_TEMP.scalar, TIRE_TEMP.wheels), (Scalar::F32, true));
        assert_eq!(WHEEL_ON_RUMBLE_STRIP.scalar, Scalar::S32);
        assert_eq!(LAP_NUMBER.scalar, Scalar::U16);
        assert_eq!(GEAR.scalar, Scalar::U8);
        assert_eq!(STEER.scalar, Scalar::S8);
        assert_eq!(CAR_GROUP.scalar, Scalar::U32);
        assert_eq!(WHEEL_IN_PUDDLE.scalar.in_format(Format::Fh6), Scalar::S32);
        assert_eq!(WHEEL_IN_PUDDLE.scalar.in_format(Format::Fh5), Scalar::F32);
        assert_eq!(WHEEL_IN_PUDDLE.scalar.in_format(Format::Sled), Scalar::F32);
        assert_eq!(SPEED.scalar.in_format(Format::Fh6), Scalar::F32);
        assert_eq!(TIRE_TEMP.key, "tire_temp");
        assert_eq!(
            NORMALIZED_AI_BRAKE_DIFFERENCE.key,
            "normalized_ai_brake_difference"
        );
        assert_eq!(TIMESTAMP_MS.key, "timestamp_ms");
    }

    #[test]
    fn every_field_says_what_it_means_in_a_sentence() {
        for f in ALL {
            let m = f.meaning;
            assert!(!m.starts_with(' ') && m.ends_with('.'), "{}: {m:?}", f.name);
            assert!(
                m.chars().next().is_some_and(|c| !c.is_lowercase()),
                "{}",
                f.name
            );
        }
        assert_eq!(
            IS_RACE_ON.meaning,
            "1 while driving, 0 in menus or when the race is stopped."
        );
        assert_eq!((SPEED.unit, SPEED.range), ("m/s", ""));
        assert_eq!((ACCEL.unit, ACCEL.range), ("", "0 … 255"));
    }

    #[test]
    fn puddle_conversions_follow_formats_md() {
        assert_eq!(Puddle::Flag(1).depth(), 1.0);
        assert_eq!(Puddle::Flag(0).depth(), 0.0);
        assert_eq!(Puddle::Depth(0.25).flag(), 1);
        assert_eq!(Puddle::Depth(0.0).flag(), 0);
        assert_eq!(Puddle::Depth(-0.5).flag(), 0);
        assert_eq!(Puddle::Depth(f32::NAN).flag(), 0);
    }

    #[test]
    fn wheels_keep_packet_order() {
        let w = Wheels::from_array([1, 2, 3, 4]);
        assert_eq!((w.fl, w.fr, w.rl, w.rr), (1, 2, 3, 4));
        assert_eq!(w.map(|v| v * 10).into_array(), [10, 20, 30, 40]);
    }
}
