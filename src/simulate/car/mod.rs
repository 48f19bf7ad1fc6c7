//! How the car moves, frame by frame: the driver (braking before each corner,
//! steering, the throttle on the way out as the grip allows, a pace drawn per
//! lap), the six-speed gearbox, the engine, the tyres' heat and wear, and the
//! body's squat and roll; then what all that shows ([`Shown`]).

use std::f64::consts::{PI, TAU};

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

/// Everything a packet shows, as the last frame left it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Shown {
    pub(super) accel: [f64; 3],
    pub(super) velocity: [f64; 3],
    pub(super) angular: [f64; 3],
    pub(super) yaw: f64,
    pub(super) pitch: f64,
    pub(super) roll: f64,
    pub(super) position: [f64; 3],
    pub(super) suspension: [f64; 4],
    pub(super) slip_ratio: [f64; 4],
    pub(super) slip_angle: [f64; 4],
    pub(super) wheel_speed: [f64; 4],
    pub(super) kerb: [bool; 4],
    pub(super) puddle: [f64; 4],
    pub(super) rumble: [f64; 4],
    pub(super) power: f64,
    pub(super) torque: f64,
    pub(super) steer: f64,
    pub(super) line: f64,
    pub(super) ai_brake: f64,
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
mod tests;
