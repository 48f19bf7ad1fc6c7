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
//!
//! Where things are: the drive's state and its frame-by-frame API here; how
//! the car moves (the driver, the gearbox, the engine, the tyres, the body) in
//! `car.rs`; what a frame's packet shows, field by field, in `packet.rs`; the
//! random numbers in `random.rs`; the circuit in `track.rs`; sending a drive
//! over UDP in `send.rs`.
//!
//! [`Fields::write`]: crate::wire::Fields::write

mod car;
mod packet;
mod random;
mod send;
mod track;

pub use send::{send, Pacer, SendOptions, SendReport, DEFAULT_RATE, MAX_RATE};

use std::time::Duration;

use crate::wire::{Error, Format, Packet};
use car::Shown;
use car::{Lap, ENGINE_IDLE_RPM};
use random::SplitMix64;
use track::Track;

/// Frames with IsRaceOn = 0 at the start of a drive, and the number a sender
/// should send after [`Simulator::finish`].
pub const RACE_OFF_FRAMES: u32 = 5;

/// `dt` is taken to be at least this, and at most [`MAX_DT`], s.
const MIN_DT: f64 = 0.000_1;
const MAX_DT: f64 = 1.0;

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
}

#[cfg(test)]
mod testing {
    use std::time::Duration;

    use super::Simulator;
    use crate::telemetry::Telemetry;
    use crate::wire::{Format, MAX_LEN};

    pub(super) const DT_60: Duration = Duration::from_nanos(16_666_667);

    /// `frames` packets of a drive, decoded.
    pub(super) fn drive(format: Format, seed: u64, dt: Duration, frames: usize) -> Vec<Telemetry> {
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
}

#[cfg(test)]
mod tests {
    use super::testing::DT_60;
    use super::*;
    use crate::wire::MAX_LEN;

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
}
