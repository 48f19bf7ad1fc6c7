use std::time::Duration;

use super::*;
use crate::simulate::packet::{CAR_GROUP, CYLINDERS, DRIVETRAIN_RWD, GRID_POSITION, TRACK_ORDINAL};
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
        let across0 =
            f64::from(p.acceleration_x) * slide0.cos() + f64::from(p.acceleration_z) * slide0.sin();
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
                let rear = f64::from(f.wheel_rotation_speed.rl + f.wheel_rotation_speed.rr) / 2.0;
                let want = rear * GEAR_RATIOS[usize::from(gear) - 1] * FINAL_DRIVE * RPM_PER_RAD_S;
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
