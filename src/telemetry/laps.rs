//! Laps, from the frames as they pass (issue 34, item 1): each lap's time,
//! the best so far and the delta to it, three splits at a third and two
//! thirds of the lap's distance with their deltas to the best lap's, top and
//! average speed, fuel used, and the car and track; and the live delta to the
//! best lap at the same distance into the lap.
//!
//! Pure: it reads the frames' own fields (LapNumber, LastLap, CurrentLap,
//! DistanceTraveled …) and never a clock. A lap ends when LapNumber steps up
//! by one; its time is the game's LastLap on that frame, not a sum of frame
//! gaps. A LapNumber that goes back or jumps (a restart, a rewind past the
//! line, another race) starts afresh without a lap. A rewind within a lap
//! (DistanceTraveled going back) takes back the way it undid.
//!
//! Each lap's way — the time into the lap at each metre of it — is kept in a
//! trace made once ([`TRACE_POINTS`] points), the best lap's in another: after
//! [`Laps::new`] nothing is allocated.

use crate::telemetry::Telemetry;

/// Points a lap's trace keeps: one a metre at most, so a lap of up to this
/// many metres is traced whole (the Nürburgring's Nordschleife is 20.8 km);
/// beyond, the last metres share the last point.
pub const TRACE_POINTS: usize = 32_768;

/// Metres between two points of a trace.
const POINT_EVERY_M: f32 = 1.0;

/// A lap's way: the time into the lap (CurrentLap) at each distance into it,
/// distance rising.
#[derive(Debug, Clone)]
struct Trace {
    points: Vec<(f32, f32)>,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            points: Vec::with_capacity(TRACE_POINTS),
        }
    }

    fn clear(&mut self) {
        self.points.clear();
    }

    /// Adds the car at `distance` m into the lap at `time` s; a point closer
    /// than [`POINT_EVERY_M`] to the last is skipped; a distance behind the
    /// last (a rewind) first takes back the points beyond it.
    fn add(&mut self, distance: f32, time: f32) {
        while self
            .points
            .last()
            .is_some_and(|&(d, _)| d > distance + POINT_EVERY_M)
        {
            self.points.pop();
        }
        let far_enough = self
            .points
            .last()
            .is_none_or(|&(d, _)| distance >= d + POINT_EVERY_M);
        if far_enough && self.points.len() < self.points.capacity() {
            self.points.push((distance, time));
        }
    }

    /// The time into the lap at `distance`, between the two points around it;
    /// `None` outside the trace.
    fn time_at(&self, distance: f32) -> Option<f32> {
        let i = self.points.partition_point(|&(d, _)| d < distance);
        let &(d1, t1) = self.points.get(i)?;
        if i == 0 {
            return (d1 == distance).then_some(t1);
        }
        let (d0, t0) = self.points[i - 1];
        let span = d1 - d0;
        if span <= 0.0 {
            return Some(t1);
        }
        Some(t0 + (t1 - t0) * (distance - d0) / span)
    }

    /// The distance of the last point.
    fn distance(&self) -> Option<f32> {
        self.points.last().map(|&(d, _)| d)
    }
}

/// One lap done, as the lap records say it (issue 34, item 2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lap {
    /// The lap as a driver counts it: the game's LapNumber + 1.
    pub lap: u32,
    /// The game's LastLap when the lap ended, s.
    pub lap_time_s: f32,
    /// The best lap of the session so far, this one included, s.
    pub best_lap_s: f32,
    /// This lap's time less the best before it (negative: a new best);
    /// `None` for the first lap.
    pub delta_to_best_s: Option<f32>,
    /// The time from the lap's start to a third of its distance, from there
    /// to two thirds, and from there to the line; `None` where the lap's
    /// trace does not reach.
    pub splits_s: [Option<f32>; 3],
    /// Each split less the best lap's (before this one); `None` for the first
    /// lap.
    pub split_deltas_s: [Option<f32>; 3],
    /// The highest Speed of the lap, km/h.
    pub top_speed_kmh: Option<f32>,
    /// The lap's distance over its time, km/h.
    pub avg_speed_kmh: Option<f32>,
    /// Fuel at the lap's start less fuel at its end (0 … 1 of a tank).
    pub fuel_used: Option<f32>,
    /// CarOrdinal.
    pub car_ordinal: i32,
    /// CarClass as a letter, where the format's scale is known.
    pub car_class: Option<&'static str>,
    /// CarPerformanceIndex.
    pub car_performance_index: i32,
    /// TrackOrdinal, where the format has it (FM2023).
    pub track_ordinal: Option<i32>,
    /// CurrentRaceTime when the lap ended, s.
    pub race_time_s: Option<f32>,
}

/// The best lap so far: its time, splits and trace.
#[derive(Debug, Clone)]
struct Best {
    time: f32,
    splits: [Option<f32>; 3],
}

/// The lap being driven.
#[derive(Debug, Clone, Copy)]
struct Current {
    /// The game's LapNumber.
    number: u16,
    /// DistanceTraveled at its start.
    start_distance: f32,
    /// Fuel at its start.
    start_fuel: Option<f32>,
    /// The highest Speed so far, m/s.
    top_speed: Option<f32>,
}

/// The laps of a session, from its frames.
#[derive(Debug, Clone)]
pub struct Laps {
    current: Option<Current>,
    trace: Trace,
    best: Option<Best>,
    best_trace: Trace,
    /// The live delta at the last racing frame.
    live_delta: Option<f32>,
}

impl Default for Laps {
    fn default() -> Self {
        Laps::new()
    }
}

impl Laps {
    /// No lap yet; its traces made (the only allocation).
    pub fn new() -> Laps {
        Laps {
            current: None,
            trace: Trace::new(),
            best: None,
            best_trace: Trace::new(),
            live_delta: None,
        }
    }

    /// Forgets the session: a new race.
    pub fn reset(&mut self) {
        self.current = None;
        self.trace.clear();
        self.best = None;
        self.best_trace.clear();
        self.live_delta = None;
    }

    /// The best lap so far, s.
    pub fn best_lap_s(&self) -> Option<f32> {
        self.best.as_ref().map(|b| b.time)
    }

    /// The time into this lap less the best lap's at the same distance into
    /// it (negative: ahead), at the last racing frame; `None` before a best
    /// lap, or beyond its trace.
    pub fn live_delta_s(&self) -> Option<f32> {
        self.live_delta
    }

    /// Takes one frame: the lap it ended, if it ended one. Frames with
    /// IsRaceOn 0 (menus, pauses, a race's end) change nothing.
    pub fn observe(&mut self, t: &Telemetry) -> Option<Lap> {
        let f = &t.fields;
        if f.is_race_on != 1 {
            return None;
        }
        // A frame whose distance or time into the lap is not a number (a
        // malformed or hostile packet) is passed over like one without them:
        // one NaN in a trace would make every delta and split after it NaN.
        let finite = |v: Option<f32>| v.filter(|v| v.is_finite());
        let (Some(number), Some(distance), Some(time)) = (
            f.lap_number,
            finite(f.distance_traveled),
            finite(f.current_lap),
        ) else {
            return None;
        };
        let Some(current) = self.current else {
            self.start(number, distance, time, t);
            return None;
        };
        if number == current.number {
            self.drive(current, distance, time, f.speed);
            return None;
        }
        let done = (number == current.number.wrapping_add(1))
            .then(|| self.finish(current, distance, t))
            .flatten();
        self.start(number, distance, time, t);
        done
    }

    /// A lap starts at this frame.
    fn start(&mut self, number: u16, distance: f32, time: f32, t: &Telemetry) {
        self.current = Some(Current {
            number,
            start_distance: distance,
            start_fuel: t.fields.fuel,
            top_speed: t.fields.speed,
        });
        self.trace.clear();
        // A lap may start some way in (the relay started mid-lap): its
        // trace then starts there too, and its splits are whatever it
        // reaches.
        self.trace.add(0.0, time.max(0.0));
        self.live_delta = None;
    }

    /// A frame within the lap.
    fn drive(&mut self, mut current: Current, distance: f32, time: f32, speed: Option<f32>) {
        let into = distance - current.start_distance;
        self.trace.add(into, time);
        if let Some(v) = speed.filter(|v| v.is_finite()) {
            current.top_speed = Some(current.top_speed.map_or(v, |top| top.max(v)));
        }
        self.current = Some(current);
        self.live_delta = self
            .best
            .as_ref()
            .and_then(|_| self.best_trace.time_at(into))
            .map(|best| time - best);
    }

    /// The lap `current` ended at this frame, `distance` into the session:
    /// its record, and the best updated. `None` when the game gives no
    /// LastLap for it.
    fn finish(&mut self, current: Current, distance: f32, t: &Telemetry) -> Option<Lap> {
        let f = &t.fields;
        let lap_time = f.last_lap.filter(|v| v.is_finite() && *v > 0.0)?;
        let length = (distance - current.start_distance).max(self.trace.distance().unwrap_or(0.0));
        // The line: the lap's last point.
        self.trace.add(length, lap_time);
        let at = |part: f32| self.trace.time_at(length * part);
        let (third, two_thirds) = (at(1.0 / 3.0), at(2.0 / 3.0));
        let splits = [
            third,
            third.zip(two_thirds).map(|(a, b)| b - a),
            two_thirds.map(|b| lap_time - b),
        ];
        let before = self.best.clone();
        let split_deltas = match &before {
            Some(best) => std::array::from_fn(|i| {
                splits[i]
                    .zip(best.splits[i])
                    .map(|(mine, theirs)| mine - theirs)
            }),
            None => [None; 3],
        };
        let best_lap = before.as_ref().map_or(lap_time, |b| b.time.min(lap_time));
        if before.as_ref().is_none_or(|b| lap_time < b.time) {
            self.best = Some(Best {
                time: lap_time,
                splits,
            });
            std::mem::swap(&mut self.trace, &mut self.best_trace);
        }
        Some(Lap {
            lap: u32::from(current.number) + 1,
            lap_time_s: lap_time,
            best_lap_s: best_lap,
            delta_to_best_s: before.map(|b| lap_time - b.time),
            splits_s: splits,
            split_deltas_s: split_deltas,
            top_speed_kmh: current.top_speed.map(|v| v * 3.6),
            avg_speed_kmh: (length > 0.0).then(|| length / lap_time * 3.6),
            fuel_used: current.start_fuel.zip(f.fuel).map(|(a, b)| a - b),
            car_ordinal: f.car_ordinal,
            car_class: t.car_class_letter,
            car_performance_index: f.car_performance_index,
            track_ordinal: f.track_ordinal,
            race_time_s: f.current_race_time,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::simulate::Simulator;
    use crate::wire::Format;

    /// Every frame of a simulated drive at 60 frames a second until `laps`
    /// laps are done, through `laps`: the laps it ended, and each frame's
    /// LastLap when LapNumber stepped.
    fn drive(format: Format, laps: usize) -> (Vec<Lap>, Vec<f32>, Laps) {
        let mut sim = Simulator::new(format, 7);
        let mut tracker = Laps::new();
        let mut buf = [0u8; 1500];
        let (mut done, mut last_laps) = (Vec::new(), Vec::new());
        let mut number = None;
        for _ in 0..60 * 60 * 20 {
            let n = sim.frame(Duration::from_micros(16_667), &mut buf).unwrap();
            let t = Telemetry::from_bytes(&buf[..n], format).unwrap();
            if t.fields.is_race_on == 1 {
                if number.is_some_and(|n| t.fields.lap_number != Some(n)) {
                    last_laps.push(t.fields.last_lap.unwrap());
                }
                number = t.fields.lap_number;
            }
            if let Some(lap) = tracker.observe(&t) {
                done.push(lap);
                if done.len() == laps {
                    break;
                }
            }
        }
        (done, last_laps, tracker)
    }

    #[test]
    fn three_simulated_laps_each_with_the_game_s_last_lap_and_best_and_deltas() {
        let (laps, last_laps, tracker) = drive(Format::Fh6, 3);
        assert_eq!(laps.len(), 3, "three laps in 20 minutes of driving");
        for (i, lap) in laps.iter().enumerate() {
            assert_eq!(lap.lap, i as u32 + 1, "laps count from 1");
            assert_eq!(
                lap.lap_time_s, last_laps[i],
                "lap {}: the game's LastLap",
                lap.lap
            );
            let best = laps[..=i]
                .iter()
                .map(|l| l.lap_time_s)
                .fold(f32::MAX, f32::min);
            assert_eq!(lap.best_lap_s, best, "lap {}: best so far", lap.lap);
            let best_before = laps[..i].iter().map(|l| l.lap_time_s).reduce(f32::min);
            assert_eq!(
                lap.delta_to_best_s,
                best_before.map(|b| lap.lap_time_s - b),
                "lap {}: delta to the best before it",
                lap.lap
            );
            let splits: f32 = lap.splits_s.iter().map(|s| s.expect("a split")).sum();
            assert!(
                (splits - lap.lap_time_s).abs() < 0.017,
                "lap {}: splits {:?} add up to {} within a frame",
                lap.lap,
                lap.splits_s,
                lap.lap_time_s
            );
            assert!(lap.splits_s.iter().all(|s| s.is_some_and(|s| s > 0.0)));
            let top = lap.top_speed_kmh.expect("a top speed");
            let avg = lap.avg_speed_kmh.expect("an average");
            assert!(
                avg > 10.0 && avg < top,
                "lap {}: avg {avg} < top {top}",
                lap.lap
            );
            assert!(
                lap.fuel_used.is_some_and(|f| f > 0.0),
                "fuel used on lap {}",
                lap.lap
            );
            assert_eq!(lap.track_ordinal, None, "FH6 has no TrackOrdinal");
        }
        assert_eq!(
            laps[0].split_deltas_s, [None; 3],
            "no best before the first lap"
        );
        assert!(laps[1].split_deltas_s.iter().all(Option::is_some));
        assert_eq!(tracker.best_lap_s(), Some(laps[2].best_lap_s));
    }

    #[test]
    fn the_live_delta_is_the_time_into_the_lap_less_the_best_lap_s_at_the_same_distance() {
        let mut tracker = Laps::new();
        let frame = |number: u16, distance: f32, time: f32, last: f32| {
            let mut t = Telemetry::from_bytes(&vec![0u8; Format::Fh5.len()], Format::Fh5).unwrap();
            t.fields.is_race_on = 1;
            t.fields.lap_number = Some(number);
            t.fields.distance_traveled = Some(distance);
            t.fields.current_lap = Some(time);
            t.fields.last_lap = Some(last);
            t.fields.speed = Some(50.0);
            t.fields.car_ordinal = 1;
            t
        };
        // Lap 1: 1,000 m in 100 s at an even pace; lap 2 ahead by 10 % at
        // half way.
        for m in 0..1000 {
            tracker.observe(&frame(0, m as f32, m as f32 / 10.0, 0.0));
        }
        let lap = tracker
            .observe(&frame(1, 1000.0, 0.0, 100.0))
            .expect("lap 1 ends");
        assert_eq!((lap.lap, lap.lap_time_s), (1, 100.0));
        assert_eq!(
            lap.splits_s.map(|s| s.map(|s| (s * 10.0).round() / 10.0)),
            [Some(33.3), Some(33.3), Some(33.3)]
        );
        tracker.observe(&frame(1, 1000.0 + 500.0, 45.0, 100.0));
        let delta = tracker.live_delta_s().expect("a live delta");
        assert!(
            (delta - -5.0).abs() < 0.1,
            "45 s where the best took 50: {delta}"
        );
    }

    #[test]
    fn a_frame_with_a_distance_or_time_not_a_number_changes_no_delta_or_split() {
        let mut tracker = Laps::new();
        let frame = |number: u16, distance: f32, time: f32, last: f32| {
            let mut t = Telemetry::from_bytes(&vec![0u8; Format::Fh5.len()], Format::Fh5).unwrap();
            t.fields.is_race_on = 1;
            t.fields.lap_number = Some(number);
            t.fields.distance_traveled = Some(distance);
            t.fields.current_lap = Some(time);
            t.fields.last_lap = Some(last);
            t.fields.car_ordinal = 1;
            t
        };
        // Lap 1 at an even 10 m/s, with bad frames among the good.
        for m in 0..1000 {
            tracker.observe(&frame(0, m as f32, m as f32 / 10.0, 0.0));
            if m % 100 == 50 {
                tracker.observe(&frame(0, m as f32 + 0.5, f32::NAN, 0.0));
                tracker.observe(&frame(0, f32::INFINITY, m as f32 / 10.0, 0.0));
            }
        }
        let lap = tracker
            .observe(&frame(1, 1000.0, 0.0, 100.0))
            .expect("lap 1 ends");
        assert!(
            lap.splits_s.iter().all(|s| s.is_some_and(f32::is_finite)),
            "splits {:?}",
            lap.splits_s
        );
        tracker.observe(&frame(1, 1500.0, 45.0, 100.0));
        tracker.observe(&frame(1, 1500.5, f32::NAN, 100.0));
        let delta = tracker.live_delta_s().expect("a live delta");
        assert!(
            (delta - -5.0).abs() < 0.1,
            "45 s where the best took 50, a NaN frame after: {delta}"
        );
    }

    #[test]
    fn a_lap_number_that_goes_back_starts_afresh_without_a_lap() {
        let mut tracker = Laps::new();
        let mut t = Telemetry::from_bytes(&vec![0u8; Format::Fh5.len()], Format::Fh5).unwrap();
        t.fields.is_race_on = 1;
        t.fields.car_ordinal = 1;
        t.fields.distance_traveled = Some(10.0);
        t.fields.current_lap = Some(1.0);
        t.fields.last_lap = Some(90.0);
        for number in [3, 3, 1, 1] {
            t.fields.lap_number = Some(number);
            assert_eq!(tracker.observe(&t), None, "LapNumber {number}");
        }
    }
}
