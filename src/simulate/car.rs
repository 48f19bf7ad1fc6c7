//! How the car moves, frame by frame: the driver (braking before each corner,
//! steering, the throttle on the way out as the grip allows, a pace drawn per
//! lap), the six-speed gearbox, the engine, the tyres' heat and wear, and the
//! body's squat and roll; then what all that shows ([`Shown`]).

use std::f64::consts::{PI, TAU};

use super::packet::Shown;
use super::random::SplitMix64;
use super::track::{self, wrap_angle};
use super::Simulator;

/// Standard gravity, m/s².
const G: f64 = 9.806_65;
/// Redline as the game reports it: not a round number (docs/formats.md).
pub(super) const ENGINE_MAX_RPM: f64 = 7_999.995;
/// Idle.
pub(super) const ENGINE_IDLE_RPM: f64 = 850.0;
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
pub(super) const SUSPENSION_TRAVEL: f64 = 0.12;
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

/// The wheels in packet order, with their side (-1 left) and axle (true front).
const WHEELS: [(f64, bool); 4] = [(-1.0, true), (1.0, true), (-1.0, false), (1.0, false)];

/// Per-lap choices of the driver.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lap {
    /// Share of the grip used in corners.
    pace: f64,
    /// Planned braking, m/s².
    brake: f64,
    /// Bit `i`: the driver clips the inside kerb of corner `i` this lap.
    kerbs: u64,
}

impl Simulator {
    pub(super) fn draw_lap(rng: &mut SplitMix64) -> Lap {
        Lap {
            pace: rng.range(PACE),
            brake: rng.range(BRAKE_PLAN) * BRAKE,
            kerbs: rng.next_u64(),
        }
    }

    /// What the car shows standing on the line before it moves.
    pub(super) fn at_rest(&self) -> Shown {
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

    pub(super) fn shifting(&self) -> bool {
        self.neutral_frames > 0
    }

    /// One frame of driving.
    pub(super) fn step(&mut self, dt: f64) {
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
    use std::time::Duration;

    use super::*;
    use crate::simulate::packet::{
        CAR_GROUP, CYLINDERS, DRIVETRAIN_RWD, GRID_POSITION, TRACK_ORDINAL,
    };
    use crate::simulate::testing::{drive, DT_60};
    use crate::simulate::RACE_OFF_FRAMES;
    use crate::wire::Format;

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
}
