//! A believable, deterministic drive: packets of any format from a car lapping a
//! closed circuit, for trying forza-relay and the tools behind it without the game.
//!
//! [`Simulator::new`] takes a format and a seed; each [`Simulator::frame`] advances
//! the drive by `dt` and writes one packet through the [`Packet`] setters
//! ([`Fields::write`]), never by offset. The same seed and the same sequence of
//! `dt` give the same bytes: the only randomness is a
//! [SplitMix64](https://prng.di.unimi.it/splitmix64.c) generator written out here
//! (a crate's generator may change its output between versions), and the physics
//! is plain `f64` arithmetic. (Across operating systems, `sin`, `cos`, `exp` and
//! `atan` come from each system's maths library, which may differ in the last bit
//! of an `f64`; that rarely reaches the `f32` of a packet, but it can.)
//!
//! What the packets hold, and the relations a test can check (docs/formats.md "What
//! real drives look like"):
//! - The first [`RACE_OFF_FRAMES`] frames, and every frame after
//!   [`Simulator::finish`], have IsRaceOn = 0 and are all zero but TimestampMS, as
//!   FH6 sends them (we do the same in every format). TimestampMS rises strictly.
//! - The car starts from a standstill on the line and laps a 1.7 km circuit of
//!   straights and six corners (a 32 m hairpin to a 120 m sweeper, a left-right
//!   chicane) over gentle hills. Position moves by Speed × dt along the road;
//!   |(VelocityX, VelocityY, VelocityZ)| = Speed; the car's nose points a little
//!   into each corner, so VelocityX is a small sideways slide.
//! - AccelerationX is v²/r (positive turning right), AccelerationZ the change of
//!   speed, both rotated into car space by the slide angle; AngularVelocityY is the
//!   rate of change of Yaw (v/r plus the slide angle's own change), and likewise
//!   X and Z for Pitch and Roll.
//! - A six-speed gearbox: CurrentEngineRpm follows the driven wheels' rotation
//!   through the gear ratio, within EngineIdleRpm..EngineMaxRpm; Gear is 1..6,
//!   with 11 (N) for one or two frames at every change, up and down.
//! - The driver brakes before each corner, steers with its sign (Steer < 0 left),
//!   and opens the throttle on the way out as the grip allows.
//! - Tyres warm from the ambient temperature (RL = RR, as every game sends them);
//!   fuel falls and FM2023's tyre wear rises slowly; laps, lap times, race time and
//!   distance advance; now and then a wheel runs through a puddle or over a kerb.
//! - The car never changes: an invented rear-wheel-drive V8 of class R in FH6 (6),
//!   S2 in FH4/FH5 (5), R in FM7 (5), with CarGroup set and the Smashable fields 0.
//!
//! Conventions docs/formats.md leaves open are ours: see `track.rs` for headings; Pitch
//! is positive nose up, Roll positive leaning right.

mod send;
mod track;

pub use send::{seconds, send, Pacer, SendOptions, SendReport, DEFAULT_RATE, MAX_RATE};

use std::f64::consts::{PI, TAU};
use std::time::Duration;

use crate::wire::{Error, Fields, Format, Packet, Puddle, Wheels};
use track::{wrap_angle, Track};

/// Frames with IsRaceOn = 0 at the start of a drive, and the number a sender
/// should send after [`Simulator::finish`].
pub const RACE_OFF_FRAMES: u32 = 5;

/// Standard gravity, m/s².
const G: f64 = 9.806_65;
/// Redline as the game reports it: not a round number (docs/formats.md).
const ENGINE_MAX_RPM: f64 = 7_999.995;
/// Idle.
const ENGINE_IDLE_RPM: f64 = 850.0;
/// The driver changes up here...
const UPSHIFT_RPM: f64 = 7_600.0;
/// ...down when braking below this...
const DOWNSHIFT_RPM: f64 = 4_300.0;
/// ...or whenever below this...
const LUGGING_RPM: f64 = 3_000.0;
/// ...but only into a gear that lands below this.
const DOWNSHIFT_MAX_RPM: f64 = 6_600.0;
/// Frames in gear before the next change.
const MIN_FRAMES_IN_GEAR: u32 = 12;
/// Revs held with the clutch slipping while pulling away.
const LAUNCH_RPM: f64 = 3_800.0;
/// Gear ratios, first to sixth.
const GEAR_RATIOS: [f64; 6] = [3.10, 2.20, 1.65, 1.30, 1.06, 0.88];
/// Final drive ratio.
const FINAL_DRIVE: f64 = 3.55;
/// Rolling radius of the tyres, m.
const WHEEL_RADIUS: f64 = 0.34;
/// rpm per rad/s.
const RPM_PER_RAD_S: f64 = 60.0 / TAU;
/// kg.
const MASS: f64 = 1_450.0;
/// Peak power, W, at [`PEAK_POWER_RPM`].
const PEAK_POWER: f64 = 480_000.0;
/// Where the power peaks.
const PEAK_POWER_RPM: f64 = 7_000.0;
/// Share of the engine's torque that reaches the road.
const DRIVELINE: f64 = 0.9;
/// Engine braking at the redline with the throttle shut, m/s².
const ENGINE_BRAKING: f64 = 1.2;
/// ½ ρ Cd A, N per (m/s)².
const DRAG: f64 = 0.43;
/// Rolling resistance, m/s².
const ROLLING: f64 = 0.15;
/// The radius of the friction circle, m/s²: lateral and longitudinal together.
const GRIP: f64 = 1.25 * G;
/// The strongest braking, m/s².
const BRAKE: f64 = 1.2 * G;
/// Braking planned in a corner's entry spiral, m/s²: the grip the cornering leaves.
const TRAIL_BRAKE: f64 = 0.3 * GRIP;
/// The car is not faster than this, m/s (never reached here).
const TOP_SPEED: f64 = 90.0;
/// How quickly the driver closes a gap to the speed they want, s.
const SPEED_RESPONSE: f64 = 0.25;
/// Pedal speeds, full travel per second.
const THROTTLE_RATE: f64 = 5.0;
const BRAKE_RATE: f64 = 8.0;
/// Slide angle per m/s² of lateral acceleration, rad.
const SLIDE: f64 = 0.0025;
/// Body pitch per m/s² of longitudinal acceleration, rad (nose up accelerating).
const SQUAT: f64 = 0.001;
/// Body roll per m/s² of lateral acceleration, rad (leaning out of the corner).
const BODY_ROLL: f64 = 0.003;
/// Time constant of the body's pitch and roll, s.
const BODY_LAG: f64 = 0.15;
/// Half the distance between left and right wheels, m.
const HALF_TRACK: f64 = 0.8;
/// Front to rear axle, m.
const WHEELBASE: f64 = 2.6;
/// Suspension travel of a compressed spring, m.
const SUSPENSION_TRAVEL: f64 = 0.12;
/// Steer units per 1/m of curvature: full lock (127) at a 25 m radius.
const STEER_GAIN: f64 = 127.0 * 25.0;
/// Tyre heating per unit of work, °F per (m/s · m/s²) per s.
const TYRE_HEATING: f64 = 0.011;
/// Tyre cooling, per s, at a standstill (doubles at 40 m/s).
const TYRE_COOLING: f64 = 0.014;
/// Fuel burnt per second at full throttle and the redline, of a full tank.
const FUEL_RATE: f64 = 0.0008;
/// Tyre wear per metre at a combined slip of 1.
const WEAR_RATE: f64 = 0.000_008;
/// Turbo boost at full throttle and revs, psi, and the turbo's lag, s.
const BOOST: f64 = 16.0;
const BOOST_LAG: f64 = 0.3;
/// World position of the start line, m: the circuit sits somewhere on a map.
const ORIGIN: [f64; 3] = [-1_843.2, 112.5, 2_516.8];
/// Where the puddles are: (from, to) metres from the line, and the side
/// (-1 left wheels, 1 right), deepest in the middle.
const PUDDLES: [(f64, f64, f64); 2] = [(90.0, 116.0, -1.0), (1_300.0, 1_320.0, 1.0)];
/// Deepest puddle, as a depth 0..1.
const PUDDLE_DEPTH: f64 = 0.7;
/// Corner speeds use this share of the grip, drawn per lap...
const PACE: (f64, f64) = (0.955, 0.985);
/// ...and braking is planned at this share of the strongest.
const BRAKE_PLAN: (f64, f64) = (0.78, 0.9);
/// Frames are simulated in steps of at most this, s.
const MAX_STEP: f64 = 0.01;
/// `dt` is taken to be at least this, and at most [`MAX_DT`], s.
const MIN_DT: f64 = 0.000_1;
const MAX_DT: f64 = 1.0;
/// The car, as each game would identify it (docs/formats.md "Car class").
const CAR_ORDINAL: i32 = 2_352;
const CAR_PI: i32 = 925;
const FM_CAR_PI: i32 = 870;
const CAR_GROUP: u32 = 26;
const DRIVETRAIN_RWD: i32 = 1;
const CYLINDERS: i32 = 8;
/// FM2023's track id in docs/formats.md's example.
const TRACK_ORDINAL: i32 = 1_640;
/// The grid slot the car starts from; it gains a place a lap.
const GRID_POSITION: u8 = 4;

/// The wheels in packet order, with their side (-1 left) and axle (true front).
const WHEELS: [(f64, bool); 4] = [(-1.0, true), (1.0, true), (-1.0, false), (1.0, false)];

/// SplitMix64 (Steele, Lea, Flood 2014; the reference code is Vigna's, linked
/// above): a 64-bit counter run through a fixed mixing function. Tiny, fast,
/// fine for noise, and defined here so the bytes never change with a dependency.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    fn range(&mut self, (lo, hi): (f64, f64)) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}

/// Where the drive is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// IsRaceOn = 0 frames before the start; this many left.
    Grid(u32),
    /// Driving.
    Racing,
    /// After [`Simulator::finish`]: IsRaceOn = 0 from now on.
    Finished,
}

/// Per-lap choices of the driver.
#[derive(Debug, Clone, Copy)]
struct Lap {
    /// Share of the grip used in corners.
    pace: f64,
    /// Planned braking, m/s².
    brake: f64,
    /// Bit `i`: the driver clips the inside kerb of corner `i` this lap.
    kerbs: u64,
}

/// Everything a packet shows, as the last frame left it.
#[derive(Debug, Clone, Copy, Default)]
struct Shown {
    accel: [f64; 3],
    velocity: [f64; 3],
    angular: [f64; 3],
    yaw: f64,
    pitch: f64,
    roll: f64,
    position: [f64; 3],
    suspension: [f64; 4],
    slip_ratio: [f64; 4],
    slip_angle: [f64; 4],
    wheel_speed: [f64; 4],
    kerb: [bool; 4],
    puddle: [f64; 4],
    rumble: [f64; 4],
    power: f64,
    torque: f64,
    steer: f64,
    line: f64,
    ai_brake: f64,
}

/// A car lapping the circuit; one packet per [`Simulator::frame`]. Allocates
/// nothing after [`Simulator::new`].
#[derive(Debug, Clone)]
pub struct Simulator {
    format: Format,
    rng: SplitMix64,
    track: Track,
    phase: Phase,
    /// Simulated time since the first frame, µs; TimestampMS follows it.
    clock_us: u64,
    timestamp_base: u32,
    last_timestamp: Option<u32>,
    // The drive.
    s: f64,
    v: f64,
    lap: Lap,
    laps: u16,
    lap_time: f64,
    last_lap: f64,
    best_lap: f64,
    race_time: f64,
    distance: f64,
    // Driver and engine.
    throttle: f64,
    brake: f64,
    clutch: f64,
    gear: u8,
    next_gear: u8,
    neutral_frames: u8,
    neutral_total: u8,
    shift_from_rpm: f64,
    frames_in_gear: u32,
    rpm: f64,
    drive_slip: f64,
    brake_slip: f64,
    boost: f64,
    fuel: f64,
    // Body: pitch and roll offsets from the road, rad.
    squat: f64,
    body_roll: f64,
    // Tyres.
    ambient: f64,
    tyre_temp: [f64; 4],
    wear: [f64; 4],
    shown: Shown,
}

impl Simulator {
    /// A drive in `format` whose every choice follows from `seed`.
    pub fn new(format: Format, seed: u64) -> Simulator {
        let mut rng = SplitMix64(seed);
        let ambient = rng.range((62.0, 84.0));
        // Games count from their own start: some minutes in.
        let timestamp_base = 60_000 + (rng.next_u64() % 3_000_000) as u32;
        let lap = Self::draw_lap(&mut rng);
        let track = Track::new();
        let mut sim = Simulator {
            format,
            rng,
            track,
            phase: Phase::Grid(RACE_OFF_FRAMES),
            clock_us: 0,
            timestamp_base,
            last_timestamp: None,
            s: 0.0,
            v: 0.0,
            lap,
            laps: 0,
            lap_time: 0.0,
            last_lap: 0.0,
            best_lap: 0.0,
            race_time: 0.0,
            distance: 0.0,
            throttle: 0.0,
            brake: 0.0,
            clutch: 1.0,
            gear: 1,
            next_gear: 1,
            neutral_frames: 0,
            neutral_total: 0,
            shift_from_rpm: ENGINE_IDLE_RPM,
            frames_in_gear: 0,
            rpm: ENGINE_IDLE_RPM,
            drive_slip: 0.0,
            brake_slip: 0.0,
            boost: 0.0,
            fuel: 1.0,
            squat: 0.0,
            body_roll: 0.0,
            ambient,
            tyre_temp: [ambient; 4],
            wear: [0.0; 4],
            shown: Shown::default(),
        };
        sim.shown = sim.at_rest();
        sim
    }

    /// The format of the packets.
    pub fn format(&self) -> Format {
        self.format
    }

    /// True while frames have IsRaceOn = 1.
    pub fn is_racing(&self) -> bool {
        self.phase == Phase::Racing
    }

    /// Ends the race: every later frame has IsRaceOn = 0 (send
    /// [`RACE_OFF_FRAMES`] of them, as a game does before it goes quiet).
    pub fn finish(&mut self) {
        self.phase = Phase::Finished;
    }

    /// Advances the drive by `dt` (taken as 0.1 ms ..= 1 s) and writes the next
    /// packet into the start of `out`; returns its length, `format.len()`.
    /// Every byte up to that length is written. Errors, writing nothing, when
    /// `out` is shorter than the format.
    pub fn frame(&mut self, dt: Duration, out: &mut [u8]) -> Result<usize, Error> {
        let len = self.format.len();
        let Some(out) = out.get_mut(..len) else {
            return Err(Error::OutputTooSmall {
                format: self.format,
                actual: out.len(),
            });
        };
        let dt = dt.as_secs_f64().clamp(MIN_DT, MAX_DT);
        self.clock_us += (dt * 1e6).round() as u64;
        let timestamp = self.timestamp();
        out.fill(0);
        let mut packet = Packet::new_unchecked(out, self.format);
        match self.phase {
            Phase::Grid(left) => {
                self.phase = if left > 1 {
                    Phase::Grid(left - 1)
                } else {
                    Phase::Racing
                };
            }
            Phase::Racing => {
                self.step(dt);
                self.fields(timestamp).write(&mut packet);
            }
            Phase::Finished => {}
        }
        // Race-off frames, and the Horizon tail byte, stay zero (docs/formats.md).
        packet.set_timestamp_ms(timestamp);
        Ok(len)
    }

    /// TimestampMS for the current clock: strictly rising even when `dt` is
    /// under a millisecond, wrapping like the game's after 2^32 ms.
    fn timestamp(&mut self) -> u32 {
        let clock = self
            .timestamp_base
            .wrapping_add((self.clock_us / 1_000) as u32);
        let t = match self.last_timestamp {
            Some(last) if clock.wrapping_sub(last) as i32 <= 0 => last.wrapping_add(1),
            _ => clock,
        };
        self.last_timestamp = Some(t);
        t
    }

    fn draw_lap(rng: &mut SplitMix64) -> Lap {
        Lap {
            pace: rng.range(PACE),
            brake: rng.range(BRAKE_PLAN) * BRAKE,
            kerbs: rng.next_u64(),
        }
    }

    /// What the car shows standing on the line before it moves.
    fn at_rest(&self) -> Shown {
        let pose = self.track.pose(0.0);
        Shown {
            yaw: pose.heading,
            pitch: pose.grade.atan(),
            position: self.world(&pose),
            suspension: [0.5; 4],
            ..Shown::default()
        }
    }

    fn world(&self, pose: &track::Pose) -> [f64; 3] {
        [ORIGIN[0] + pose.x, ORIGIN[1] + pose.y, ORIGIN[2] + pose.z]
    }

    /// Revs of the driven wheels in `gear` at the current speed and slip.
    fn gear_rpm(&self, gear: u8, slip: f64) -> f64 {
        let ratio = GEAR_RATIOS[usize::from(gear.clamp(1, 6)) - 1];
        self.v * (1.0 + slip) / WHEEL_RADIUS * ratio * FINAL_DRIVE * RPM_PER_RAD_S
    }

    /// Engine power at `rpm` with the throttle open, W.
    fn full_power(rpm: f64) -> f64 {
        let x = rpm / PEAK_POWER_RPM;
        PEAK_POWER * x * (1.6 - 0.6 * x)
    }

    /// Decides gear changes, once a frame: a change shows N for one or two frames.
    fn gearbox(&mut self) {
        if self.neutral_frames > 0 {
            self.neutral_frames -= 1;
            if self.neutral_frames == 0 {
                self.gear = self.next_gear;
                self.frames_in_gear = 0;
            }
        }
        if self.neutral_frames > 0 || self.frames_in_gear < MIN_FRAMES_IN_GEAR {
            self.frames_in_gear += 1;
            return;
        }
        self.frames_in_gear += 1;
        let lower = self.gear.saturating_sub(1).max(1);
        let target = if self.gear < 6 && self.rpm >= UPSHIFT_RPM && self.throttle > 0.5 {
            self.gear + 1
        } else if self.gear > 1
            && (self.rpm < LUGGING_RPM || (self.brake > 0.1 && self.rpm < DOWNSHIFT_RPM))
            && self.gear_rpm(lower, 0.0) < DOWNSHIFT_MAX_RPM
        {
            lower
        } else {
            return;
        };
        self.next_gear = target;
        self.neutral_frames = 1 + (self.rng.next_u64() & 1) as u8;
        self.neutral_total = self.neutral_frames;
        self.shift_from_rpm = self.rpm;
    }

    fn shifting(&self) -> bool {
        self.neutral_frames > 0
    }

    /// One frame of driving.
    fn step(&mut self, dt: f64) {
        let before = (self.v, self.shown);
        self.gearbox();
        let steps = (dt / MAX_STEP).ceil().max(1.0);
        let h = dt / steps;
        for _ in 0..steps as u32 {
            self.substep(h);
        }
        self.update_engine(dt);
        self.show(before, dt);
    }

    /// Driver, engine and road over `h` seconds.
    fn substep(&mut self, h: f64) {
        let pose = self.track.pose(self.s);
        let v = self.v;
        let lateral = v * v * pose.curvature;
        let grip = (GRIP * GRIP - lateral * lateral)
            .max(0.0625 * GRIP * GRIP)
            .sqrt();
        let resist = if v > 0.0 {
            DRAG * v * v / MASS + ROLLING + G * pose.grade / (1.0 + pose.grade.powi(2)).sqrt()
        } else {
            0.0
        };
        let engaged = !self.shifting() && self.rpm < ENGINE_MAX_RPM;
        let engine = if engaged {
            let ratio = GEAR_RATIOS[usize::from(self.gear) - 1];
            let torque = Self::full_power(self.rpm) / (self.rpm / RPM_PER_RAD_S);
            torque * ratio * FINAL_DRIVE * DRIVELINE / WHEEL_RADIUS / MASS
        } else {
            0.0
        };
        let traction = engine.min(grip);
        let engine_braking = if self.shifting() {
            0.0
        } else {
            ENGINE_BRAKING * self.rpm / ENGINE_MAX_RPM
        };
        let coast = -resist - engine_braking;
        // The speed the driver wants: the corner limits ahead at this lap's pace.
        let limit = self.track.speed_limit(
            self.s,
            GRIP * self.lap.pace.powi(2),
            self.lap.brake,
            TRAIL_BRAKE,
            TOP_SPEED,
        );
        let want = (limit - v) / SPEED_RESPONSE;
        let (throttle, brake) = if want >= coast {
            let t = if traction > 0.0 {
                ((want - coast) / (traction + engine_braking)).clamp(0.0, 1.0)
            } else {
                self.throttle // a flat shift: the foot stays down
            };
            (t, 0.0)
        } else {
            (0.0, ((coast - want) / BRAKE.min(grip)).clamp(0.0, 1.0))
        };
        self.throttle = approach(self.throttle, throttle, THROTTLE_RATE * h);
        self.brake = approach(self.brake, brake, BRAKE_RATE * h);
        let engine_braking = engine_braking * (1.0 - self.throttle);
        let a = self.throttle * traction - self.brake * BRAKE.min(grip) - resist - engine_braking;
        // Wheelspin when the engine could push harder than the grip allows.
        let demand = self.throttle * engine / grip;
        self.drive_slip = if engaged {
            0.06 * demand.min(1.0) + 0.3 * (demand - 1.0).max(0.0)
        } else {
            0.0
        }
        .min(0.8);
        self.brake_slip = -0.08 * self.brake;
        let v1 = (v + a * h).max(0.0);
        let travelled = (v + v1) / 2.0 * h;
        self.v = v1;
        self.distance += travelled;
        self.s += travelled / (1.0 + pose.grade * pose.grade).sqrt();
        self.race_time += h;
        self.lap_time += h;
        if self.s >= self.track.len {
            // Crossed the line during this step: time the lap to the crossing.
            self.s -= self.track.len;
            let over = if travelled > 0.0 {
                h * self.s / travelled
            } else {
                0.0
            };
            let lap = self.lap_time - over;
            self.last_lap = lap;
            self.best_lap = if self.best_lap > 0.0 {
                self.best_lap.min(lap)
            } else {
                lap
            };
            self.lap_time = over;
            self.laps = self.laps.saturating_add(1);
            self.lap = Self::draw_lap(&mut self.rng);
        }
        self.tyres(h, lateral, a);
        self.fuel =
            (self.fuel - FUEL_RATE * self.throttle * self.rpm / ENGINE_MAX_RPM * h).max(0.0);
    }

    /// Heats and wears the tyres: the outer ones in corners, the front under
    /// braking, the driven rear under power; cooling grows with speed.
    fn tyres(&mut self, h: f64, lateral: f64, accel: f64) {
        let v = self.v;
        for (i, &(side, front)) in WHEELS.iter().enumerate() {
            // Load: the outside of the corner (left in a right turn) and the
            // front under braking carry more.
            let load =
                1.0 - side * lateral / GRIP * 0.6 + if front { -accel } else { accel } / GRIP * 0.4;
            let slip = if front {
                self.brake_slip
            } else {
                self.drive_slip + self.brake_slip
            };
            let work = v
                * (lateral.abs() * 0.7 + accel.abs() * 0.5 + 1.0)
                * load.max(0.2)
                * (1.0 + 3.0 * slip.abs());
            let cooling = TYRE_COOLING * (1.0 + v / 40.0) * (self.tyre_temp[i] - self.ambient);
            self.tyre_temp[i] += (TYRE_HEATING * work - cooling) * h;
            let angle = lateral / GRIP;
            let combined = slip.hypot(angle) * load.max(0.2);
            self.wear[i] = (self.wear[i] + WEAR_RATE * combined * v * h).min(1.0);
        }
        // docs/formats.md: every game sends TireTempRL equal to TireTempRR.
        let rear = (self.tyre_temp[2] + self.tyre_temp[3]) / 2.0;
        self.tyre_temp[2] = rear;
        self.tyre_temp[3] = rear;
    }

    /// Revs, clutch and boost after the frame's driving.
    fn update_engine(&mut self, dt: f64) {
        if self.shifting() {
            // Freewheeling from the old gear's revs to the new one's.
            let done = f64::from(self.neutral_total - self.neutral_frames + 1)
                / f64::from(self.neutral_total + 1);
            let to = self.gear_rpm(self.next_gear, 0.0);
            self.rpm = self.shift_from_rpm + (to - self.shift_from_rpm) * done;
            self.clutch = 1.0;
        } else {
            let wheels = self.gear_rpm(self.gear, self.drive_slip + self.brake_slip);
            if self.gear == 1 && wheels < LAUNCH_RPM {
                // Pulling away: the clutch slips until the wheels catch up.
                let held = ENGINE_IDLE_RPM + (LAUNCH_RPM - ENGINE_IDLE_RPM) * self.throttle;
                self.rpm = wheels.max(held);
                self.clutch = 1.0 - wheels / LAUNCH_RPM;
            } else {
                self.rpm = wheels;
                self.clutch = 0.0;
            }
        }
        self.rpm = self.rpm.clamp(ENGINE_IDLE_RPM, ENGINE_MAX_RPM);
        let spool = smoothstep(2_500.0, 5_000.0, self.rpm);
        let target = if self.shifting() {
            self.boost * 0.5
        } else {
            BOOST * self.throttle * spool
        };
        self.boost += (target - self.boost) * (1.0 - (-dt / BOOST_LAG).exp());
    }

    /// Fills [`Shown`] from the state after a frame; `before` is the speed and
    /// what was shown a frame ago, `dt` its length.
    fn show(&mut self, (v0, prev): (f64, Shown), dt: f64) {
        let pose = self.track.pose(self.s);
        let v = self.v;
        let along = (v - v0) / dt;
        let lateral = v * v * pose.curvature;
        // The nose points into the corner by the slide angle.
        let slide = SLIDE * lateral;
        let settle = 1.0 - (-dt / BODY_LAG).exp();
        self.squat += (SQUAT * along - self.squat) * settle;
        self.body_roll += (-BODY_ROLL * lateral - self.body_roll) * settle;
        let road_pitch = pose.grade.atan();
        let yaw = pose.heading + slide;
        let pitch = road_pitch + self.squat;
        let roll = self.body_roll;
        let (sin, cos) = slide.sin_cos();
        let noise = self.rng.range((-0.25, 0.25));
        let on_kerb = self.kerbs();
        let puddle = self.puddles();
        let bump = if on_kerb.iter().any(|&k| k) { 1.5 } else { 0.0 };
        let vertical = v * v * pose.bend + noise * (1.0 + bump);
        let mut shown = Shown {
            // Car space: rotate the road-frame vectors by the slide angle.
            accel: [
                lateral * cos - along * sin,
                vertical,
                lateral * sin + along * cos,
            ],
            velocity: [
                -v * self.squat.cos() * sin,
                -v * self.squat.sin(),
                v * self.squat.cos() * cos,
            ],
            angular: [
                (pitch - prev.pitch) / dt,
                wrap_angle(yaw - prev.yaw) / dt,
                (roll - prev.roll) / dt,
            ],
            yaw,
            pitch,
            roll,
            position: self.world(&pose),
            kerb: on_kerb,
            puddle,
            ..Shown::default()
        };
        for (i, &(side, front)) in WHEELS.iter().enumerate() {
            let slip = if front {
                self.brake_slip
            } else {
                self.drive_slip + self.brake_slip
            };
            // Outer wheels roll a longer way round.
            let ground = v * (1.0 - side * HALF_TRACK * pose.curvature);
            shown.wheel_speed[i] = ground * (1.0 + slip) / WHEEL_RADIUS;
            shown.slip_ratio[i] = slip;
            shown.slip_angle[i] = lateral / GRIP * if front { 0.9 } else { 0.75 };
            let transfer = -side * lateral * 0.018 + if front { -along } else { along } * 0.012;
            let bumps = self.rng.range((-0.02, 0.02)) * (1.0 + 4.0 * bump);
            shown.suspension[i] = (0.5 + transfer + vertical * 0.01 + bumps).clamp(0.02, 0.98);
            shown.rumble[i] = 0.03
                + self.rng.range((0.0, 0.02))
                + if on_kerb[i] { 0.4 } else { 0.0 }
                + puddle[i] * 0.2;
        }
        let omega = self.rpm / RPM_PER_RAD_S;
        shown.power = if self.shifting() {
            0.0
        } else if self.throttle > 0.0 {
            self.throttle * Self::full_power(self.rpm)
        } else {
            -ENGINE_BRAKING * MASS * v.max(1.0) * self.rpm / ENGINE_MAX_RPM * 0.2
        };
        shown.torque = shown.power / omega;
        shown.steer = pose.curvature * STEER_GAIN;
        shown.line = 35.0 * (self.s / 41.0 + f64::from(self.laps)).sin();
        shown.ai_brake = self.brake * 40.0 * (self.lap.brake / BRAKE - 0.84) / 0.06;
        self.shown = shown;
    }

    /// Which wheels are on the inside kerb: the middle of a corner's arc, on the
    /// laps the driver chose to clip it.
    fn kerbs(&self) -> [bool; 4] {
        let mut on = [false; 4];
        for (i, &(side, front)) in WHEELS.iter().enumerate() {
            let s = if front { self.s } else { self.s - WHEELBASE };
            let (seg, u) = self.track.segment_at(s);
            let seg = self.track.segments()[seg];
            let apex = seg.k0 == seg.k1 && seg.k0 != 0.0 && (u / seg.len - 0.5).abs() < 0.2;
            if let (true, Some(corner)) = (apex, seg.corner) {
                on[i] = self.lap.kerbs >> corner & 1 == 1 && side == seg.k0.signum();
            }
        }
        on
    }

    /// Puddle depth under each wheel.
    fn puddles(&self) -> [f64; 4] {
        let mut depth = [0.0; 4];
        for (i, &(side, front)) in WHEELS.iter().enumerate() {
            let s = (if front { self.s } else { self.s - WHEELBASE }).rem_euclid(self.track.len);
            for (from, to, puddle_side) in PUDDLES {
                if side == puddle_side && (from..to).contains(&s) {
                    depth[i] = PUDDLE_DEPTH * (PI * (s - from) / (to - from)).sin();
                }
            }
        }
        depth
    }

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
    fn fields(&self, timestamp: u32) -> Fields {
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

/// `from` moved toward `to` by at most `step`.
fn approach(from: f64, to: f64, step: f64) -> f64 {
    from + (to - from).clamp(-step, step)
}

/// 0 below `lo`, 1 above `hi`, smooth between.
fn smoothstep(lo: f64, hi: f64, x: f64) -> f64 {
    let t = ((x - lo) / (hi - lo)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Telemetry;
    use crate::wire::MAX_LEN;

    const DT_60: Duration = Duration::from_nanos(16_666_667);

    /// `frames` packets of a drive, decoded.
    fn drive(format: Format, seed: u64, dt: Duration, frames: usize) -> Vec<Telemetry> {
        let mut sim = Simulator::new(format, seed);
        let mut buf = [0u8; MAX_LEN];
        (0..frames)
            .map(|_| {
                let n = sim.frame(dt, &mut buf).expect("MAX_LEN holds every format");
                assert_eq!(n, format.len());
                Telemetry::from_bytes(&buf[..n], format).expect("the format's length")
            })
            .collect()
    }

    fn bytes(format: Format, seed: u64, frames: usize) -> Vec<u8> {
        let mut sim = Simulator::new(format, seed);
        let mut buf = [0u8; MAX_LEN];
        let mut all = Vec::new();
        for _ in 0..frames {
            let n = sim.frame(DT_60, &mut buf).unwrap();
            all.extend_from_slice(&buf[..n]);
        }
        all
    }

    #[test]
    fn same_seed_gives_the_same_bytes_and_another_seed_others() {
        for format in Format::ALL {
            let a = bytes(format, 7, 2_000);
            assert_eq!(a, bytes(format, 7, 2_000), "{format}");
            assert_ne!(a, bytes(format, 8, 2_000), "{format}");
        }
    }

    #[test]
    fn splitmix64_matches_the_reference_output() {
        // The first outputs of Vigna's splitmix64.c seeded with 1234567.
        let mut r = SplitMix64(1_234_567);
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
        for _ in 0..1_000 {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }

    /// True when every byte of `packet` but TimestampMS (4..8) is zero.
    fn zero_but_timestamp(packet: &[u8]) -> bool {
        packet
            .iter()
            .enumerate()
            .all(|(i, &b)| (4..8).contains(&i) || b == 0)
    }

    #[test]
    fn race_off_frames_at_the_start_and_after_finish_are_zero_but_the_timestamp() {
        for format in Format::ALL {
            let mut sim = Simulator::new(format, 1);
            let mut buf = [0xAAu8; MAX_LEN];
            let mut race_on = Vec::new();
            let mut last = 0;
            for i in 0..400 {
                if i == 300 {
                    assert!(sim.is_racing());
                    sim.finish();
                }
                let n = sim.frame(DT_60, &mut buf).unwrap();
                let p = Packet::new_checked(&buf[..n], format).unwrap();
                race_on.push(p.is_race_on());
                if p.is_race_on() == 0 {
                    assert!(zero_but_timestamp(&buf[..n]), "{format} frame {i}");
                    assert!(p.timestamp_ms() > last, "{format} frame {i}");
                }
                last = p.timestamp_ms();
            }
            assert!(!sim.is_racing());
            let off = RACE_OFF_FRAMES as usize;
            assert!(race_on[..off].iter().all(|&r| r == 0), "{format}");
            assert!(race_on[off..300].iter().all(|&r| r == 1), "{format}");
            assert!(race_on[300..].iter().all(|&r| r == 0), "{format}");
        }
    }

    #[test]
    fn timestamps_rise_strictly_even_below_a_millisecond_a_frame() {
        let mut sim = Simulator::new(Format::Fh6, 5);
        let mut buf = [0u8; MAX_LEN];
        let mut last = None;
        for dt in [DT_60, Duration::ZERO, Duration::from_micros(300), DT_60]
            .into_iter()
            .cycle()
            .take(2_000)
        {
            sim.frame(dt, &mut buf).unwrap();
            let t = Packet::new_checked(&buf[..324], Format::Fh6)
                .unwrap()
                .timestamp_ms();
            if let Some(last) = last {
                assert!(t > last, "{t} after {last}");
            }
            last = Some(t);
        }
    }

    #[test]
    fn a_short_buffer_is_an_error_and_is_left_alone() {
        let mut sim = Simulator::new(Format::Fm2023, 1);
        let mut buf = [7u8; 330];
        assert_eq!(
            sim.frame(DT_60, &mut buf),
            Err(Error::OutputTooSmall {
                format: Format::Fm2023,
                actual: 330
            })
        );
        assert!(buf.iter().all(|&b| b == 7));
    }

    /// Everything a drive must satisfy, checked frame by frame; returns counts of
    /// what it saw so callers can check the drive did the interesting things.
    #[derive(Debug, Default)]
    struct Seen {
        upshifts: usize,
        downshifts: usize,
        laps: u16,
        corners: usize,
        wet: usize,
        kerb: usize,
        lap_yaw: Vec<f64>,
    }

    #[track_caller]
    fn close(what: &str, i: usize, got: f64, want: f64, tolerance: f64) {
        assert!(
            (got - want).abs() <= tolerance,
            "frame {i}: {what} is {got}, expected {want} ± {tolerance}"
        );
    }

    fn check_drive(format: Format, seed: u64, dt: Duration, frames: usize) -> Seen {
        let t = drive(format, seed, dt, frames);
        let dt = dt.as_secs_f64();
        let off = RACE_OFF_FRAMES as usize;
        let dash = format.layout().dash.is_some();
        let first = &t[off].fields;
        let mut seen = Seen::default();
        let mut neutral_run = 0;
        let mut gear_before_n = None;
        let mut lap_yaw = 0.0;
        let mut in_corner = false;
        // Frame `off` is the first racing one; each later one is checked against the
        // one before it.
        for i in off + 1..t.len() {
            let (p, f) = (&t[i - 1].fields, &t[i].fields);
            assert_eq!(f.is_race_on, 1, "frame {i}");
            // The car never changes.
            assert_eq!(f.car_ordinal, first.car_ordinal);
            assert_eq!(f.car_class, first.car_class);
            assert_eq!(f.car_performance_index, first.car_performance_index);
            assert_eq!(f.drivetrain_type, DRIVETRAIN_RWD);
            assert_eq!(f.num_cylinders, CYLINDERS);
            assert_eq!(f.car_group, format.is_horizon().then_some(CAR_GROUP));
            if format.is_horizon() {
                assert_eq!(
                    (f.smashable_vel_diff, f.smashable_mass),
                    (Some(0.0), Some(0.0))
                );
            }
            // Engine.
            assert_eq!(f.engine_max_rpm, 7_999.995);
            assert_eq!(f.engine_idle_rpm, 850.0);
            let rpm = f64::from(f.current_engine_rpm);
            assert!(
                (850.0..=7_999.995).contains(&f.current_engine_rpm),
                "frame {i}: {rpm} rpm"
            );
            // Velocity: its size is Speed (the velocity's own in sled, which has no Speed).
            let (vx, vy, vz) = (
                f64::from(f.velocity_x),
                f64::from(f.velocity_y),
                f64::from(f.velocity_z),
            );
            let norm = (vx * vx + vy * vy + vz * vz).sqrt();
            let speed = f.speed.map_or(norm, f64::from);
            close("|velocity|", i, norm, speed, 1e-4 * speed.max(1.0));
            assert!((0.0..95.0).contains(&speed), "frame {i}: {speed} m/s");
            assert!(
                vz >= 0.0 && vx.abs() < 0.1 * speed.max(1.0),
                "frame {i}: mostly forward"
            );
            let v0 = {
                let (x, y, z) = (
                    f64::from(p.velocity_x),
                    f64::from(p.velocity_y),
                    f64::from(p.velocity_z),
                );
                p.speed.map_or((x * x + y * y + z * z).sqrt(), f64::from)
            };
            // Rates are the change of the angles.
            let yaw_step = wrap_angle(f64::from(f.yaw) - f64::from(p.yaw));
            close(
                "AngularVelocityY",
                i,
                f64::from(f.angular_velocity_y),
                yaw_step / dt,
                2e-3,
            );
            close(
                "AngularVelocityX",
                i,
                f64::from(f.angular_velocity_x),
                f64::from(f.pitch - p.pitch) / dt,
                2e-3,
            );
            close(
                "AngularVelocityZ",
                i,
                f64::from(f.angular_velocity_z),
                f64::from(f.roll - p.roll) / dt,
                2e-3,
            );
            lap_yaw += yaw_step;
            // Accelerations, back in the road's frame: the slide angle from the
            // velocity; along the road it is the change of speed, across it v²/r = v·(yaw
            // rate less the slide angle's change).
            let slide = (-vx).atan2(vz);
            let slide0 = f64::from(-p.velocity_x).atan2(f64::from(p.velocity_z));
            let (ax, az) = (f64::from(f.acceleration_x), f64::from(f.acceleration_z));
            let along = az * slide.cos() - ax * slide.sin();
            let across = ax * slide.cos() + az * slide.sin();
            let across0 = f64::from(p.acceleration_x) * slide0.cos()
                + f64::from(p.acceleration_z) * slide0.sin();
            close(
                "acceleration along the road",
                i,
                along,
                (speed - v0) / dt,
                2e-2,
            );
            // The yaw step is a mean over the frame: compare with the mean of the
            // frame's two ends.
            let turning = (yaw_step - wrap_angle(slide - slide0)) / dt;
            let mean = (across + across0) / 2.0;
            // (Where a spiral starts or ends the mean is off by up to ~0.2 m/s² at 30 Hz.)
            close(
                "v²/r",
                i,
                mean,
                (speed + v0) / 2.0 * turning,
                0.03 * mean.abs() + 0.25,
            );
            assert!(
                ax.abs() < 1.5 * G && az.abs() < 1.5 * G,
                "frame {i}: {ax}, {az}"
            );
            assert!(f64::from(f.acceleration_y).abs() < 0.5 * G, "frame {i}");
            // Wheels.
            for w in f.normalized_suspension_travel.into_array() {
                assert!((0.0..=1.0).contains(&w), "frame {i}: suspension {w}");
            }
            for (n, m) in f
                .normalized_suspension_travel
                .into_array()
                .iter()
                .zip(f.suspension_travel_meters.into_array())
            {
                close(
                    "SuspensionTravelMeters",
                    i,
                    f64::from(m),
                    f64::from(*n) * SUSPENSION_TRAVEL,
                    1e-6,
                );
            }
            for s in f.tire_slip_ratio.into_array() {
                assert!(s.abs() <= 1.0, "frame {i}: slip ratio {s}");
            }
            for s in f.tire_slip_angle.into_array() {
                assert!(s.abs() <= 1.2, "frame {i}: slip angle {s}");
            }
            for w in f.wheel_rotation_speed.into_array() {
                assert!((0.0..300.0).contains(&w), "frame {i}: wheel {w} rad/s");
            }
            let wet = f.wheel_in_puddle.into_array().map(|p| p.is_wet());
            if wet.iter().any(|&w| w) {
                seen.wet += 1;
                assert!(
                    !(wet[0] || wet[2]) || !(wet[1] || wet[3]),
                    "frame {i}: one side only"
                );
            }
            if f.wheel_on_rumble_strip.into_array().contains(&1) {
                seen.kerb += 1;
            }
            if !dash {
                continue;
            }
            // RPM through the gearbox: the driven (rear) wheels' rotation.
            let gear = f.gear.expect("dash");
            assert!(matches!(gear, 1..=6 | 11), "frame {i}: gear {gear}");
            if gear == 11 {
                neutral_run += 1;
                assert!(neutral_run <= 2, "frame {i}: N for {neutral_run} frames");
                gear_before_n.get_or_insert(p.gear.expect("dash"));
                assert_eq!(f.clutch, Some(255), "frame {i}");
            } else {
                if let Some(before) = gear_before_n.take() {
                    assert!(
                        before.abs_diff(gear) == 1,
                        "frame {i}: {before} -> N -> {gear}"
                    );
                    if gear > before {
                        seen.upshifts += 1;
                    } else {
                        seen.downshifts += 1;
                    }
                } else {
                    assert_eq!(p.gear, Some(gear), "frame {i}: a change without N");
                }
                neutral_run = 0;
                if f.clutch == Some(0) {
                    let rear =
                        f64::from(f.wheel_rotation_speed.rl + f.wheel_rotation_speed.rr) / 2.0;
                    let want =
                        rear * GEAR_RATIOS[usize::from(gear) - 1] * FINAL_DRIVE * RPM_PER_RAD_S;
                    close(
                        "rpm from the wheels",
                        i,
                        rpm,
                        want.min(ENGINE_MAX_RPM),
                        0.005 * want + 1.0,
                    );
                }
            }
            // The ground covered is Speed × dt.
            let moved = [
                f.position_x.unwrap() - p.position_x.unwrap(),
                f.position_y.unwrap() - p.position_y.unwrap(),
                f.position_z.unwrap() - p.position_z.unwrap(),
            ]
            .map(f64::from);
            let moved = (moved[0] * moved[0] + moved[1] * moved[1] + moved[2] * moved[2]).sqrt();
            if speed > 5.0 {
                let ratio = moved / (speed * dt);
                assert!(
                    (0.9..=1.04).contains(&ratio),
                    "frame {i}: moved {moved} m at {speed} m/s"
                );
            }
            // Pedals and steering follow the corners.
            let (throttle, brake) = (f.accel.unwrap(), f.brake.unwrap());
            assert!(throttle < 128 || brake < 128, "frame {i}: both pedals down");
            let steer = f.steer.unwrap();
            if across.abs() > 3.0 {
                assert_eq!(
                    f64::from(steer).signum(),
                    across.signum(),
                    "frame {i}: steer {steer}"
                );
            }
            // Steering follows the curvature: v²/r over v².
            if speed > 5.0 {
                let want = across / (speed * speed) * STEER_GAIN;
                close("Steer", i, f64::from(steer), want.clamp(-127.0, 127.0), 0.6);
            }
            if !in_corner && across.abs() > 4.0 {
                // Entering a corner: the driver braked for it in the last 4 s.
                in_corner = true;
                seen.corners += 1;
                let back = (4.0 / dt) as usize;
                let braked = t[i.saturating_sub(back).max(off)..i]
                    .iter()
                    .any(|t| t.fields.brake.unwrap() > 76);
                assert!(braked, "frame {i}: a corner without braking");
            } else if in_corner && across.abs() < 1.0 {
                // Leaving it: on the throttle within 2 s.
                in_corner = false;
                let ahead = (2.0 / dt) as usize;
                let opened = t[i..(i + ahead).min(t.len())]
                    .iter()
                    .any(|t| t.fields.accel.unwrap() > 128);
                assert!(opened || i + ahead > t.len(), "frame {i}: no throttle out");
            }
            // Tyres: RL = RR always, warming from the ambient.
            let temp = f.tire_temp.unwrap();
            assert_eq!(temp.rl, temp.rr, "frame {i}");
            for c in temp.into_array() {
                assert!((50.0..260.0).contains(&c), "frame {i}: {c} °F");
            }
            // Laps and times.
            let (lap, lap0) = (f.lap_number.unwrap(), p.lap_number.unwrap());
            close(
                "CurrentRaceTime",
                i,
                f64::from(f.current_race_time.unwrap() - p.current_race_time.unwrap()),
                dt,
                1e-3,
            );
            assert!(f.distance_traveled.unwrap() >= p.distance_traveled.unwrap());
            if lap == lap0 {
                close(
                    "CurrentLap",
                    i,
                    f64::from(f.current_lap.unwrap() - p.current_lap.unwrap()),
                    dt,
                    1e-3,
                );
                assert_eq!(f.last_lap, p.last_lap);
            } else {
                assert_eq!(lap, lap0 + 1, "frame {i}");
                let last = f64::from(f.last_lap.unwrap());
                close(
                    "LastLap",
                    i,
                    last,
                    f64::from(p.current_lap.unwrap()) + dt - f64::from(f.current_lap.unwrap()),
                    1e-3,
                );
                assert!((40.0..80.0).contains(&last), "frame {i}: a {last} s lap");
                let best = p.best_lap.unwrap();
                let want = if best > 0.0 {
                    best.min(f.last_lap.unwrap())
                } else {
                    f.last_lap.unwrap()
                };
                assert_eq!(f.best_lap.unwrap(), want);
                assert!(f.race_position.unwrap() <= p.race_position.unwrap());
                seen.lap_yaw.push(lap_yaw);
                lap_yaw = 0.0;
                seen.laps = lap;
            }
            assert!((1..=GRID_POSITION).contains(&f.race_position.unwrap()));
            assert!(f.fuel.unwrap() <= p.fuel.unwrap() && f.fuel.unwrap() > 0.5);
            if let (Some(w), Some(w0)) = (f.tire_wear, p.tire_wear) {
                for (a, b) in w.into_array().iter().zip(w0.into_array()) {
                    assert!(*a >= b && *a < 0.5, "frame {i}: wear {a}");
                }
                assert_eq!(f.track_ordinal, Some(TRACK_ORDINAL));
            }
        }
        if dash {
            // Tyres start at the ambient temperature and are warm a lap later.
            let start = first.tire_temp.unwrap();
            assert!(
                (60.0..90.0).contains(&start.fl) && start.fl == start.rr,
                "{start:?}"
            );
            let warm = t.last().unwrap().fields.tire_temp.unwrap();
            for (w, s) in warm.into_array().iter().zip(start.into_array()) {
                assert!(*w > s + 30.0, "{warm:?} from {start:?}");
            }
            assert!(t.last().unwrap().fields.fuel.unwrap() < first.fuel.unwrap());
        }
        seen
    }

    #[test]
    fn the_drive_is_physically_consistent_in_every_format() {
        for format in Format::ALL {
            let seen = check_drive(format, 11, DT_60, 8_000);
            if format != Format::Sled {
                assert!(seen.laps >= 2, "{format}: {seen:?}");
                assert!(
                    seen.upshifts >= 10 && seen.downshifts >= 10,
                    "{format}: {seen:?}"
                );
                // Six corners a lap, the chicane's two halves each counted.
                assert!(seen.corners >= 12, "{format}: {seen:?}");
                // A clockwise lap turns the car once round, to the right.
                for yaw in &seen.lap_yaw {
                    assert!((yaw - TAU).abs() < 0.05, "{format}: a lap turned {yaw} rad");
                }
            }
            assert!(seen.wet > 0 && seen.kerb > 0, "{format}: {seen:?}");
        }
    }

    #[test]
    fn the_drive_holds_at_other_frame_rates() {
        for (hz, format) in [(30, Format::Fh6), (144, Format::Fm7), (360, Format::Fh5)] {
            let dt = Duration::from_nanos(1_000_000_000 / hz);
            let frames = 130 * hz as usize;
            let seen = check_drive(format, 3, dt, frames);
            assert!(seen.laps >= 2, "{hz} Hz: {seen:?}");
        }
    }

    #[test]
    fn classes_show_the_mapping_fh6_r_to_fh5_s2() {
        let class = |format| drive(format, 1, DT_60, 10)[9].car_class_letter;
        assert_eq!(class(Format::Fh6), Some("R"));
        assert_eq!(class(Format::Fh5), Some("S2"));
        assert_eq!(class(Format::Fh4), Some("S2"));
        assert_eq!(class(Format::Fm7), Some("R"));
    }
}
