//! One lap of a capture, for `replay --lap` (issue 34, item 5): which of the
//! datagrams to the replayed port are that lap's frames.
//!
//! The rule is the lap records' (`telemetry::laps`), read here from the wire's
//! fields since captures sit below telemetry (docs/architecture.md): only
//! racing frames (IsRaceOn 1) count; a lap ends when LapNumber steps up by one,
//! and its time is the game's LastLap on that step frame; a LapNumber that goes
//! back or jumps (a restart, a rewind past the line, another race) starts
//! afresh without a lap. Lap N (from 1) is then the racing frames with
//! LapNumber N - 1, from the first of them to the last before the step: every
//! racing frame between those two has that LapNumber, since any other would
//! have started afresh. Only a lap whose step frame is in the capture counts.
//!
//! When the capture holds several races, the first lap N in file order is the
//! one; `best` is the smallest LastLap, the first of equals.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use crate::wire::{Format, Packet};

/// Which lap `--lap` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LapChoice {
    /// Lap N, from 1: the game's LapNumber + 1.
    Number(u32),
    /// The completed lap with the smallest LastLap.
    Best,
}

impl FromStr for LapChoice {
    type Err = String;

    /// `2` or `best` (any case); the message names the value, as `--lap`
    /// follows it: `--lap 0: laps count from 1 ...`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        if text.eq_ignore_ascii_case("best") {
            return Ok(LapChoice::Best);
        }
        match text.parse::<u32>() {
            Ok(0) => Err("0: laps count from 1 (the first lap is lap 1)".to_owned()),
            Ok(n) => Ok(LapChoice::Number(n)),
            Err(_) => Err(format!(
                "{s:?} is not a lap: give its number (the first lap is 1) or best"
            )),
        }
    }
}

impl fmt::Display for LapChoice {
    /// `lap 2`, `the best lap`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LapChoice::Number(n) => write!(f, "lap {n}"),
            LapChoice::Best => f.write_str("the best lap"),
        }
    }
}

/// A lap's frames among the datagrams to a port, counted from 0 in file order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LapSpan {
    /// What was asked.
    pub chosen: LapChoice,
    /// The lap, from 1.
    pub lap: u32,
    /// The port's datagram that is the lap's first frame.
    pub first: u64,
    /// The port's datagram that is the lap's last frame, the one before the
    /// step.
    pub last: u64,
    /// The game's LastLap on the step frame, s.
    pub lap_time_s: f32,
}

impl LapSpan {
    /// Whether `payload`, the port's datagram `index`, is one of the lap's
    /// frames.
    pub fn holds(&self, index: u64, payload: &[u8]) -> bool {
        (self.first..=self.last).contains(&index)
            && racing(payload).is_some_and(|(number, _)| u32::from(number) + 1 == self.lap)
    }
}

impl fmt::Display for LapSpan {
    /// `lap 2 (83.456 s)`, `the best lap, lap 3 (81.002 s)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.chosen == LapChoice::Best {
            f.write_str("the best lap, ")?;
        }
        write!(f, "lap {} ({:.3} s)", self.lap, self.lap_time_s)
    }
}

/// The LapNumber and LastLap of a racing frame; `None` for a frame with
/// IsRaceOn 0, one without them (sled), or a datagram that is no Forza packet.
///
/// The format is told by the length alone: fh4, fh5 and fh6 (324 bytes) differ
/// only in WheelInPuddle, so any of them reads these fields right.
fn racing(payload: &[u8]) -> Option<(u16, f32)> {
    let format = Format::ALL.into_iter().find(|f| f.len() == payload.len())?;
    let packet = Packet::new_checked(payload, format).ok()?;
    if packet.is_race_on() != 1 {
        return None;
    }
    Some((packet.lap_number()?, packet.last_lap()?))
}

/// The laps a capture completes, for a message about one it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// Each lap completed, from 1.
    pub laps: BTreeSet<u32>,
    /// The lap being driven when the capture ends, if any.
    pub unfinished: Option<u32>,
}

impl Completed {
    /// Why `chosen` is not among them: `the capture completes laps 1 to 3;
    /// lap 7 is not among them` (after the file's name).
    pub fn explain(&self, chosen: LapChoice) -> String {
        if self.laps.is_empty() {
            let mut text = "completes no lap (a lap counts once LapNumber steps up to the \
                            next while racing)"
                .to_owned();
            if let Some(lap) = self.unfinished {
                text.push_str(&format!(": it ends during lap {lap}"));
            }
            return text;
        }
        let mut text = format!("completes {}", Runs(&self.laps));
        if let LapChoice::Number(n) = chosen {
            text.push_str(&format!("; lap {n} is not among them"));
            if self.unfinished == Some(n) {
                text.push_str(" (the capture ends during it)");
            }
        }
        text
    }
}

/// Laps as runs: `lap 2`, `laps 1 to 3`, `laps 1 to 3 and 5`.
struct Runs<'a>(&'a BTreeSet<u32>);

impl fmt::Display for Runs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for &lap in self.0 {
            match runs.last_mut() {
                Some((_, end)) if end.checked_add(1) == Some(lap) => *end = lap,
                _ => runs.push((lap, lap)),
            }
        }
        f.write_str(if self.0.len() == 1 { "lap " } else { "laps " })?;
        for (i, (start, end)) in runs.iter().enumerate() {
            if i > 0 {
                f.write_str(if i + 1 == runs.len() { " and " } else { ", " })?;
            }
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start} to {end}")?;
            }
        }
        Ok(())
    }
}

/// What a datagram given to a [`LapFinder`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LapFrame {
    /// Not a racing frame with a LapNumber: no lap's.
    Other,
    /// A frame of the lap being driven.
    Same,
    /// The first frame of a lap; `chosen` when the lap that ended here is,
    /// for now, the one asked for.
    Starts {
        /// The lap that ended here is the one asked for (so far, for `best`).
        chosen: bool,
    },
}

/// The lap being driven.
#[derive(Debug, Clone, Copy)]
struct Current {
    number: u16,
    first: u64,
    last: u64,
}

/// Finds a lap in the datagrams to one port, given one by one in file order.
#[derive(Debug, Clone)]
pub struct LapFinder {
    chosen: LapChoice,
    /// Datagrams given so far.
    index: u64,
    current: Option<Current>,
    found: Option<LapSpan>,
    completed: BTreeSet<u32>,
}

impl LapFinder {
    /// Looks for `chosen`.
    pub fn new(chosen: LapChoice) -> LapFinder {
        LapFinder {
            chosen,
            index: 0,
            current: None,
            found: None,
            completed: BTreeSet::new(),
        }
    }

    /// Takes the port's next datagram: which lap's frame it is.
    pub fn add(&mut self, payload: &[u8]) -> LapFrame {
        let index = self.index;
        self.index += 1;
        let Some((number, last_lap)) = racing(payload) else {
            return LapFrame::Other;
        };
        let chosen = match &mut self.current {
            Some(c) if c.number == number => {
                c.last = index;
                return LapFrame::Same;
            }
            Some(c) if number == c.number.wrapping_add(1) => {
                let done = *c;
                self.complete(done, last_lap)
            }
            _ => false,
        };
        self.current = Some(Current {
            number,
            first: index,
            last: index,
        });
        LapFrame::Starts { chosen }
    }

    /// `lap` ended with LastLap `lap_time_s`: whether it is the one asked for
    /// (so far).
    fn complete(&mut self, lap: Current, lap_time_s: f32) -> bool {
        let span = LapSpan {
            chosen: self.chosen,
            lap: u32::from(lap.number) + 1,
            first: lap.first,
            last: lap.last,
            lap_time_s,
        };
        self.completed.insert(span.lap);
        let better = match (self.chosen, &self.found) {
            (LapChoice::Number(n), None) => n == span.lap,
            (LapChoice::Number(_), Some(_)) => false,
            (LapChoice::Best, None) => true,
            // A LastLap that is no time loses to any that is.
            (LapChoice::Best, Some(best)) => {
                let key = |t: f32| if t.is_finite() { t } else { f32::INFINITY };
                key(lap_time_s) < key(best.lap_time_s)
            }
        };
        if better {
            self.found = Some(span);
        }
        better
    }

    /// The lap asked for; or the laps the capture completes, when it is not
    /// among them.
    pub fn finish(self) -> Result<LapSpan, Completed> {
        self.found.ok_or(Completed {
            laps: self.completed,
            unfinished: self.current.map(|c| u32::from(c.number) + 1),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::simulate::Simulator;

    const FRAME: Duration = Duration::from_micros(16_667);

    /// A simulated FH6 drive (seed 2) from the grid until `laps` laps are done and one
    /// frame into the next: each frame with its time, 60 a second.
    fn drive(laps: usize) -> Vec<(SystemTime, Vec<u8>)> {
        let mut sim = Simulator::new(Format::Fh6, 2);
        let mut buf = [0u8; 1500];
        let mut frames = Vec::new();
        let mut steps = 0;
        let mut number = None;
        while steps < laps {
            let n = sim.frame(FRAME, &mut buf).expect("a buffer long enough");
            let p = Packet::new_checked(&buf[..n], Format::Fh6).expect("an fh6 packet");
            if p.race_on() {
                if number.is_some_and(|l| Some(l) != p.lap_number()) {
                    steps += 1;
                }
                number = p.lap_number();
            }
            let time =
                UNIX_EPOCH + Duration::from_secs(1_700_000_000) + FRAME * frames.len() as u32;
            frames.push((time, buf[..n].to_vec()));
            assert!(frames.len() < 60 * 60 * 20, "no {laps} laps in 20 minutes");
        }
        frames
    }

    fn find(frames: &[(SystemTime, Vec<u8>)], chosen: LapChoice) -> Result<LapSpan, Completed> {
        let mut finder = LapFinder::new(chosen);
        for (_, payload) in frames {
            finder.add(payload);
        }
        finder.finish()
    }

    /// The frames a lap holds, with their indices.
    fn picked(frames: &[(SystemTime, Vec<u8>)], span: LapSpan) -> Vec<(usize, &[u8])> {
        frames
            .iter()
            .enumerate()
            .filter(|(i, (_, p))| span.holds(*i as u64, p))
            .map(|(i, (_, p))| (i, p.as_slice()))
            .collect()
    }

    #[test]
    fn lap_2_is_every_racing_frame_with_lap_number_1_and_nothing_else() {
        let frames = drive(3);
        let span = find(&frames, LapChoice::Number(2)).expect("lap 2 completes");
        // The oracle, from the fields as the formats reference names them.
        let fh6 = |p: &[u8]| Packet::new_checked(p.to_vec(), Format::Fh6).expect("fh6");
        let expected: Vec<usize> = frames
            .iter()
            .enumerate()
            .filter(|(_, (_, p))| {
                let p = fh6(p);
                p.is_race_on() == 1 && p.lap_number() == Some(1)
            })
            .map(|(i, _)| i)
            .collect();
        let got = picked(&frames, span);
        assert_eq!(got.len(), expected.len(), "every frame of lap 2, once");
        assert!(got.len() > 60, "a lap is more than a second: {}", got.len());
        for ((i, p), want) in got.iter().zip(&expected) {
            assert_eq!(i, want, "the frames in file order");
            let p = fh6(p);
            assert_eq!(p.is_race_on(), 1, "frame {i}: IsRaceOn");
            assert_eq!(p.lap_number(), Some(1), "frame {i}: LapNumber");
        }
        let (first, last) = (expected[0], expected[expected.len() - 1]);
        assert_eq!(
            (span.lap, span.first, span.last),
            (2, first as u64, last as u64)
        );
        assert_eq!(
            fh6(&frames[first - 1].1).lap_number(),
            Some(0),
            "lap 1 before it"
        );
        let step = fh6(&frames[last + 1].1);
        assert_eq!(step.lap_number(), Some(2), "the step right after it");
        assert_eq!(Some(span.lap_time_s), step.last_lap(), "the game's LastLap");
        assert_eq!(span.chosen, LapChoice::Number(2));
    }

    #[test]
    fn best_is_the_smallest_last_lap_of_the_laps_completed() {
        let frames = drive(3);
        let laps: Vec<LapSpan> = (1..=3)
            .map(|n| find(&frames, LapChoice::Number(n)).expect("completes"))
            .collect();
        let best = find(&frames, LapChoice::Best).expect("a best lap");
        let smallest = laps
            .iter()
            .min_by(|a, b| a.lap_time_s.total_cmp(&b.lap_time_s))
            .expect("three laps");
        assert_eq!(
            (best.lap, best.first, best.last),
            (smallest.lap, smallest.first, smallest.last)
        );
        assert_eq!(best.chosen, LapChoice::Best);
        assert_eq!(best.lap, 3, "seed 2's laps take 51.8, 50.3 and 50.1 s");
        let times: BTreeSet<u32> = laps.iter().map(|l| l.lap_time_s.to_bits()).collect();
        assert_eq!(times.len(), 3, "three different lap times: {laps:?}");
    }

    /// The rule is written twice, here on the wire's fields and in the lap
    /// records (telemetry sits above captures): both find the same laps with
    /// the same times.
    #[test]
    fn the_laps_found_are_the_lap_records_laps() {
        use crate::telemetry::laps::Laps;
        use crate::telemetry::Telemetry;
        let frames = drive(3);
        let mut records = Laps::new();
        let laps: Vec<(u32, f32)> = frames
            .iter()
            .filter_map(|(_, p)| {
                let t = Telemetry::from_bytes(p, Format::Fh6).expect("an fh6 packet");
                records.observe(&t).map(|lap| (lap.lap, lap.lap_time_s))
            })
            .collect();
        assert_eq!(laps.len(), 3, "{laps:?}");
        for (lap, time) in laps {
            let span = find(&frames, LapChoice::Number(lap)).expect("completes");
            assert_eq!((span.lap, span.lap_time_s), (lap, time));
        }
    }

    #[test]
    fn a_lap_the_capture_does_not_complete_is_named_with_those_it_does() {
        let frames = drive(3);
        let no = find(&frames, LapChoice::Number(7)).expect_err("no lap 7");
        assert_eq!(
            no.explain(LapChoice::Number(7)),
            "completes laps 1 to 3; lap 7 is not among them"
        );
        let no = find(&frames, LapChoice::Number(4)).expect_err("lap 4 has only begun");
        assert_eq!(
            no.explain(LapChoice::Number(4)),
            "completes laps 1 to 3; lap 4 is not among them (the capture ends during it)"
        );
        let first_lap = &frames[..frames.len() / 4];
        let no = find(first_lap, LapChoice::Best).expect_err("no lap completes");
        assert_eq!(
            no.explain(LapChoice::Best),
            "completes no lap (a lap counts once LapNumber steps up to the next while \
             racing): it ends during lap 1"
        );
    }

    #[test]
    fn a_second_race_with_the_same_laps_gives_the_first_race_s_lap() {
        let frames = drive(2);
        let twice: Vec<_> = frames.iter().chain(&frames).cloned().collect();
        let lap = find(&twice, LapChoice::Number(1)).expect("lap 1 completes");
        let once = find(&frames, LapChoice::Number(1)).expect("lap 1 completes");
        assert_eq!(lap, once, "the first race's lap 1");
        let best = find(&twice, LapChoice::Best).expect("a best lap");
        assert!(best.last < frames.len() as u64, "the first of equals");
    }

    #[test]
    fn laps_are_named_as_runs() {
        let runs = |laps: &[u32]| Runs(&laps.iter().copied().collect()).to_string();
        assert_eq!(runs(&[2]), "lap 2");
        assert_eq!(runs(&[1, 2, 3]), "laps 1 to 3");
        assert_eq!(runs(&[1, 2, 3, 5]), "laps 1 to 3 and 5");
        assert_eq!(runs(&[1, 3, 4, 6]), "laps 1, 3 to 4 and 6");
    }

    #[test]
    fn lap_choices_are_a_number_from_1_or_best() {
        assert_eq!("2".parse(), Ok(LapChoice::Number(2)));
        assert_eq!("Best".parse(), Ok(LapChoice::Best));
        assert_eq!(
            "0".parse::<LapChoice>(),
            Err("0: laps count from 1 (the first lap is lap 1)".to_owned())
        );
        assert_eq!(
            "fast".parse::<LapChoice>(),
            Err("\"fast\" is not a lap: give its number (the first lap is 1) or best".to_owned())
        );
        assert!("-1".parse::<LapChoice>().is_err());
    }
}
