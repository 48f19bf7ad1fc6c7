//! A session's records, from the frames as they pass (issue 34): each lap
//! ([`Lap`], from [`Laps`]) and the events of a race — its start and end, each
//! lap, a pause and its end, a rewind ([`Event`]).
//!
//! Pure: [`Session::observe`] reads the frame's own fields (IsRaceOn,
//! TimestampMS, CurrentRaceTime, DistanceTraveled, LapNumber, CarOrdinal) and
//! whether it is blank (all zero but TimestampMS, [`super::is_menu_frame`]),
//! and never a clock: "10 s without racing" is 10 s of TimestampMS. After
//! [`Session::new`] nothing is allocated; a frame's records come back in a
//! [`Records`] of fixed size.
//!
//! The rules, and the research behind them, are docs/session.md's:
//! - a racing frame (IsRaceOn 1) with no race on starts one; so does one that
//!   is a new race (another car or track, LapNumber fallen by two or more,
//!   the race clock back under [`RESTART_S`]), after the old one's end;
//! - a frame with IsRaceOn 0 that still describes the car pauses the race; the
//!   next racing frame resumes it;
//! - the race clock going back, or DistanceTraveled going back more than
//!   [`REWIND_M`], is a rewind; blank frames mid-race are no event until
//!   racing returns and tells, by the clock, whether it was one;
//! - [`Session::race_end_after_ms`] of TimestampMS without a racing frame ends
//!   the race, as does [`Session::end`] when the caller sees the stream stop.
//!
//! Events come in order: `race_end` only after a `race_start`, every other
//! event between the two, `resumed` only after `paused`.

use std::fmt;

use crate::telemetry::laps::{Lap, Laps};
use crate::telemetry::Telemetry;

/// TimestampMS without a racing frame that ends a race, by default: longer
/// than a rewind or a replay's blank frames, short enough to say a race is
/// over soon after the results screen (docs/session.md "The rules").
pub const RACE_END_AFTER_MS: u32 = 10_000;

/// A race clock gone back to under this many seconds is a restart, not a
/// rewind: no game offers a rewind before the first corner
/// (docs/session.md).
pub const RESTART_S: f32 = 1.0;

/// DistanceTraveled gone back by more than this many metres between two
/// racing frames is a rewind: more than a car reverses in a frame.
pub const REWIND_M: f32 = 10.0;

/// The most records one frame gives: `resumed`, `rewind`, a lap's record
/// and its `lap` event.
pub const MAX_RECORDS: usize = 4;

/// What happened in a race.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// Racing began.
    RaceStart,
    /// The race is over.
    RaceEnd,
    /// A lap is done.
    Lap,
    /// The race went back in time.
    Rewind,
    /// The race stopped with the car still described (IsRaceOn 0).
    Paused,
    /// Racing again after a pause.
    Resumed,
}

impl Event {
    /// Every event, in the order docs/session.md lists them.
    pub const ALL: [Event; 6] = [
        Event::RaceStart,
        Event::Lap,
        Event::Paused,
        Event::Resumed,
        Event::Rewind,
        Event::RaceEnd,
    ];

    /// The name records carry: `race_start`, `race_end`, `lap`, `rewind`,
    /// `paused`, `resumed`.
    pub const fn name(self) -> &'static str {
        match self {
            Event::RaceStart => "race_start",
            Event::RaceEnd => "race_end",
            Event::Lap => "lap",
            Event::Rewind => "rewind",
            Event::Paused => "paused",
            Event::Resumed => "resumed",
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One event of a race, as the event records say it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventRecord {
    /// What happened.
    pub event: Event,
    /// CurrentRaceTime, s: at the frame for `race_start`, `resumed` and
    /// `rewind` (where it went back to), at the line for `lap`, at the last
    /// racing frame for `paused` and `race_end`. `None` where the format has
    /// no Dash block.
    pub race_time_s: Option<f32>,
    /// The lap as a driver counts it (LapNumber + 1), at the same frame as
    /// `race_time_s`; for `lap`, the lap just done.
    pub lap: Option<u32>,
    /// TimestampMS of the frame that told it (for [`Session::end`], of the
    /// last racing frame).
    pub timestamp_ms: u32,
    /// CarOrdinal.
    pub car_ordinal: i32,
    /// TrackOrdinal, where the format has it (FM2023).
    pub track_ordinal: Option<i32>,
}

/// One record: a lap done, or an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Record {
    /// A lap done.
    Lap(Lap),
    /// An event.
    Event(EventRecord),
}

/// The records of one frame, in order: at most [`MAX_RECORDS`], kept in
/// place (no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Records {
    items: [Option<Record>; MAX_RECORDS],
}

impl Records {
    /// None.
    pub const fn new() -> Records {
        Records {
            items: [None; MAX_RECORDS],
        }
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.items.iter().take_while(|r| r.is_some()).count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items[0].is_none()
    }

    /// Each, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Record> {
        self.items.iter().map_while(Option::as_ref)
    }

    /// The events only, in order.
    pub fn events(&self) -> impl Iterator<Item = &EventRecord> {
        self.iter().filter_map(|r| match r {
            Record::Event(e) => Some(e),
            Record::Lap(_) => None,
        })
    }

    /// Adds `record` after the others.
    fn push(&mut self, record: Record) {
        let slot = self
            .items
            .iter_mut()
            .find(|r| r.is_none())
            .expect("a frame gives at most MAX_RECORDS records (Session::observe's cases)");
        *slot = Some(record);
    }
}

impl IntoIterator for Records {
    type Item = Record;
    type IntoIter = std::iter::Flatten<std::array::IntoIter<Option<Record>, MAX_RECORDS>>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter().flatten()
    }
}

impl<'a> IntoIterator for &'a Records {
    type Item = &'a Record;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Option<Record>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter().flatten()
    }
}

/// What a racing frame says about where the race is.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Mark {
    timestamp_ms: u32,
    race_time: Option<f32>,
    distance: Option<f32>,
    lap_number: Option<u16>,
    car_ordinal: i32,
    track_ordinal: Option<i32>,
}

impl Mark {
    fn of(t: &Telemetry) -> Mark {
        let f = &t.fields;
        Mark {
            timestamp_ms: f.timestamp_ms,
            race_time: f.current_race_time.filter(|v| v.is_finite()),
            distance: f.distance_traveled.filter(|v| v.is_finite()),
            lap_number: f.lap_number,
            car_ordinal: f.car_ordinal,
            track_ordinal: f.track_ordinal,
        }
    }

    /// An event at this mark, told by a frame at `timestamp_ms`.
    fn event(&self, event: Event, timestamp_ms: u32) -> EventRecord {
        EventRecord {
            event,
            race_time_s: self.race_time,
            lap: self.lap_number.map(|n| u32::from(n) + 1),
            timestamp_ms,
            car_ordinal: self.car_ordinal,
            track_ordinal: self.track_ordinal,
        }
    }

    /// Whether `now`, a racing frame after this one, is another race: another
    /// car or track, LapNumber fallen by two or more, or the clock back under
    /// [`RESTART_S`].
    fn new_race(&self, now: &Mark) -> bool {
        let laps_fell = self
            .lap_number
            .zip(now.lap_number)
            .is_some_and(|(before, after)| u32::from(after) + 2 <= u32::from(before));
        let restarted = self
            .race_time
            .zip(now.race_time)
            .is_some_and(|(before, after)| after < before && after < RESTART_S);
        self.car_ordinal != now.car_ordinal
            || self.track_ordinal != now.track_ordinal
            || laps_fell
            || restarted
    }

    /// Whether `now`, a racing frame of the same race after this one, is
    /// behind it: the clock back, or DistanceTraveled back more than
    /// [`REWIND_M`].
    fn rewound(&self, now: &Mark) -> bool {
        let clock = self
            .race_time
            .zip(now.race_time)
            .is_some_and(|(before, after)| after < before);
        let way = self
            .distance
            .zip(now.distance)
            .is_some_and(|(before, after)| after < before - REWIND_M);
        clock || way
    }

    /// Whether `now`, the first racing frame after this race ended, goes on
    /// with it: the same race on a clock that kept running (a pause longer
    /// than the race's end), so its laps and best lap stand.
    fn goes_on(&self, now: &Mark) -> bool {
        let clock_on = self
            .race_time
            .zip(now.race_time)
            .is_some_and(|(before, after)| before > 0.0 && after >= before);
        let laps_on = self
            .lap_number
            .zip(now.lap_number)
            .is_some_and(|(before, after)| after == before || after == before.wrapping_add(1));
        !self.new_race(now) && clock_on && laps_on
    }
}

/// Where the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No race: before the first racing frame, and after a race's end.
    Idle,
    /// The last frame was a racing frame.
    Racing,
    /// Mid-race without racing frames: blank frames (`paused` false, nothing
    /// said yet) or paused ones (`paused` said).
    Stopped { paused: bool },
}

/// The records of a session, from its frames.
#[derive(Debug, Clone)]
pub struct Session {
    laps: Laps,
    state: State,
    /// The last racing frame: of the race on, or of the last race.
    last: Option<Mark>,
    race_end_after_ms: u32,
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

impl Session {
    /// No race yet; a race ends after [`RACE_END_AFTER_MS`] without racing.
    /// Its lap traces are made here (the only allocation).
    pub fn new() -> Session {
        Session::with_race_end_after_ms(RACE_END_AFTER_MS)
    }

    /// As [`Session::new`], with a race ending after `ms` of TimestampMS
    /// without a racing frame.
    pub fn with_race_end_after_ms(ms: u32) -> Session {
        Session {
            laps: Laps::new(),
            state: State::Idle,
            last: None,
            race_end_after_ms: ms,
        }
    }

    /// The TimestampMS without a racing frame that ends a race.
    pub fn race_end_after_ms(&self) -> u32 {
        self.race_end_after_ms
    }

    /// Whether a race is on (started and not ended; paused or not).
    pub fn is_racing(&self) -> bool {
        self.state != State::Idle
    }

    /// The laps so far (the best lap, the live delta).
    pub fn laps(&self) -> &Laps {
        &self.laps
    }

    /// Takes one frame, `blank` when it is all zero but TimestampMS
    /// ([`super::is_menu_frame`]): the records it gives, in order.
    pub fn observe(&mut self, t: &Telemetry, blank: bool) -> Records {
        let mut out = Records::new();
        if t.fields.is_race_on == 1 {
            self.racing(t, &mut out);
        } else {
            self.not_racing(t.fields.timestamp_ms, blank, &mut out);
        }
        out
    }

    /// Ends the race on, if one is: the stream stopped (the caller's timer
    /// says so, or the relay stops). Its `race_end` is at the last racing
    /// frame.
    pub fn end(&mut self) -> Records {
        let mut out = Records::new();
        if let Some(last) = self.last.filter(|_| self.is_racing()) {
            out.push(Record::Event(last.event(Event::RaceEnd, last.timestamp_ms)));
            self.state = State::Idle;
        }
        out
    }

    /// A racing frame.
    fn racing(&mut self, t: &Telemetry, out: &mut Records) {
        let now = Mark::of(t);
        let at = now.timestamp_ms;
        match (self.state, self.last) {
            (State::Idle, last) => {
                if !last.is_some_and(|last| last.goes_on(&now)) {
                    self.laps.reset();
                }
                out.push(Record::Event(now.event(Event::RaceStart, at)));
            }
            (State::Racing | State::Stopped { .. }, Some(last)) if last.new_race(&now) => {
                out.push(Record::Event(last.event(Event::RaceEnd, at)));
                self.laps.reset();
                out.push(Record::Event(now.event(Event::RaceStart, at)));
            }
            (State::Racing | State::Stopped { .. }, last) => {
                if self.state == (State::Stopped { paused: true }) {
                    out.push(Record::Event(now.event(Event::Resumed, at)));
                }
                if last.is_some_and(|last| last.rewound(&now)) {
                    out.push(Record::Event(now.event(Event::Rewind, at)));
                }
            }
        }
        self.state = State::Racing;
        self.last = Some(now);
        if let Some(lap) = self.laps.observe(t) {
            out.push(Record::Lap(lap));
            out.push(Record::Event(EventRecord {
                event: Event::Lap,
                race_time_s: lap.race_time_s,
                lap: Some(lap.lap),
                timestamp_ms: at,
                car_ordinal: lap.car_ordinal,
                track_ordinal: lap.track_ordinal,
            }));
        }
    }

    /// A frame with IsRaceOn 0 at `timestamp_ms`.
    fn not_racing(&mut self, timestamp_ms: u32, blank: bool, out: &mut Records) {
        let (State::Racing | State::Stopped { .. }, Some(last)) = (self.state, self.last) else {
            return;
        };
        // TimestampMS wraps: the time since is taken modulo 2^32, and a frame
        // from before the last racing one (reordered on the way) is 0 since.
        let since = timestamp_ms.wrapping_sub(last.timestamp_ms);
        let since = if since > u32::MAX / 2 { 0 } else { since };
        if since >= self.race_end_after_ms {
            out.push(Record::Event(last.event(Event::RaceEnd, timestamp_ms)));
            self.state = State::Idle;
        } else if !blank && self.state != (State::Stopped { paused: true }) {
            out.push(Record::Event(last.event(Event::Paused, timestamp_ms)));
            self.state = State::Stopped { paused: true };
        } else if self.state == State::Racing {
            self.state = State::Stopped { paused: false };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::simulate::{Simulator, RACE_OFF_FRAMES};
    use crate::telemetry::is_menu_frame;
    use crate::wire::{Format, Packet};

    /// The events of `records`, by name, with their lap.
    fn names(records: &[Record]) -> Vec<(&'static str, Option<u32>)> {
        records
            .iter()
            .map(|r| match r {
                Record::Lap(lap) => ("lap record", Some(lap.lap)),
                Record::Event(e) => (e.event.name(), e.lap),
            })
            .collect()
    }

    /// A session fed packets, every record kept in order.
    struct Rig {
        session: Session,
        records: Vec<Record>,
    }

    impl Rig {
        fn new() -> Rig {
            Rig {
                session: Session::new(),
                records: Vec::new(),
            }
        }

        /// Feeds one packet; its records.
        fn feed(&mut self, bytes: &[u8], format: Format) -> Vec<Record> {
            let packet = Packet::new_checked(bytes, format).expect("a packet of its format");
            let t = Telemetry::decode(&packet);
            let records: Vec<Record> = self
                .session
                .observe(&t, is_menu_frame(&packet))
                .into_iter()
                .collect();
            self.records.extend(records.iter().copied());
            records
        }
    }

    /// An fm2023 frame: racing or not, with the race's values.
    #[derive(Debug, Clone, Copy)]
    struct Frame {
        race_on: bool,
        timestamp_ms: u32,
        race_time: f32,
        distance: f32,
        lap_number: u16,
        current_lap: f32,
        last_lap: f32,
        car: i32,
        track: i32,
    }

    impl Frame {
        /// Racing on lap 1 of car 3141 at `race_time` s, 50 m a second.
        fn at(race_time: f32) -> Frame {
            Frame {
                race_on: true,
                timestamp_ms: 1_000_000 + (race_time * 1000.0) as u32,
                race_time,
                distance: race_time * 50.0,
                lap_number: 0,
                current_lap: race_time,
                last_lap: 0.0,
                car: 3_141,
                track: 1_640,
            }
        }

        /// The packet, built field by field.
        fn bytes(&self) -> Vec<u8> {
            let mut buf = vec![0u8; Format::Fm2023.len()];
            let mut p = Packet::new_checked(&mut buf[..], Format::Fm2023).unwrap();
            p.set_is_race_on(i32::from(self.race_on));
            p.set_timestamp_ms(self.timestamp_ms);
            p.set_car_ordinal(self.car);
            p.set_car_class(3);
            p.set_car_performance_index(700);
            p.set_current_race_time(self.race_time).unwrap();
            p.set_distance_traveled(self.distance).unwrap();
            p.set_lap_number(self.lap_number).unwrap();
            p.set_current_lap(self.current_lap).unwrap();
            p.set_last_lap(self.last_lap).unwrap();
            p.set_speed(50.0).unwrap();
            p.set_fuel(1.0 - self.race_time / 1000.0).unwrap();
            p.set_track_ordinal(self.track).unwrap();
            buf
        }
    }

    /// A blank fm2023 frame at `timestamp_ms`.
    fn blank(timestamp_ms: u32) -> Vec<u8> {
        let mut buf = vec![0u8; Format::Fm2023.len()];
        Packet::new_checked(&mut buf[..], Format::Fm2023)
            .unwrap()
            .set_timestamp_ms(timestamp_ms);
        buf
    }

    #[track_caller]
    fn event(record: &Record) -> EventRecord {
        match record {
            Record::Event(e) => *e,
            Record::Lap(lap) => panic!("a lap record, not an event: {lap:?}"),
        }
    }

    #[test]
    fn a_simulated_three_lap_drive_gives_start_three_laps_and_end_in_order() {
        let mut sim = Simulator::new(Format::Fh6, 7);
        let mut rig = Rig::new();
        let mut buf = [0u8; 1500];
        let dt = Duration::from_micros(16_667);
        let mut laps = 0;
        for _ in 0..60 * 60 * 20 {
            let n = sim.frame(dt, &mut buf).unwrap();
            let records = rig.feed(&buf[..n], Format::Fh6);
            laps += records
                .iter()
                .filter(|r| matches!(r, Record::Lap(_)))
                .count();
            if laps == 3 {
                break;
            }
        }
        assert_eq!(laps, 3, "three laps in 20 minutes");
        // The finish: the game sends blank frames, then none.
        sim.finish();
        let last_racing = match rig.records.last() {
            Some(Record::Event(e)) => *e,
            other => panic!("the last record is lap 3's event: {other:?}"),
        };
        let mut end = Vec::new();
        let mut blanks = 0;
        while end.is_empty() {
            let n = sim.frame(dt, &mut buf).unwrap();
            end = rig.feed(&buf[..n], Format::Fh6);
            blanks += 1;
        }
        // 10 s of TimestampMS at 60 frames a second.
        assert!((600..=602).contains(&blanks), "{blanks} blank frames");
        assert_eq!(
            names(&rig.records),
            [
                ("race_start", Some(1)),
                ("lap record", Some(1)),
                ("lap", Some(1)),
                ("lap record", Some(2)),
                ("lap", Some(2)),
                ("lap record", Some(3)),
                ("lap", Some(3)),
                ("race_end", Some(4)),
            ]
        );
        let start = event(&rig.records[0]);
        assert_eq!(start.event, Event::RaceStart);
        assert!(
            start.race_time_s.is_some_and(|t| t < 0.1),
            "the race starts at 0 s: {start:?}"
        );
        assert_eq!(start.track_ordinal, None, "FH6 has no TrackOrdinal");
        for (i, pair) in rig.records[1..7].chunks(2).enumerate() {
            let (Record::Lap(lap), Record::Event(e)) = (&pair[0], &pair[1]) else {
                panic!("a lap record, then its event: {pair:?}");
            };
            assert_eq!(lap.lap, i as u32 + 1);
            assert_eq!(e.event, Event::Lap);
            assert_eq!(e.lap, Some(lap.lap));
            assert_eq!(e.race_time_s, lap.race_time_s);
            assert_eq!(e.car_ordinal, lap.car_ordinal);
            assert_eq!(e.car_ordinal, start.car_ordinal);
            assert!(lap
                .race_time_s
                .is_some_and(|t| t > lap.lap_time_s * (i as f32 + 0.9)));
        }
        let race_end = event(&end[0]);
        assert_eq!(end.len(), 1);
        assert_eq!(race_end.event, Event::RaceEnd);
        assert!(
            race_end.race_time_s >= last_racing.race_time_s,
            "at the last racing frame: {race_end:?}"
        );
        assert!(!rig.session.is_racing());
        // Nothing more while the blank frames go on.
        for _ in 0..RACE_OFF_FRAMES * 100 {
            let n = sim.frame(dt, &mut buf).unwrap();
            assert_eq!(rig.feed(&buf[..n], Format::Fh6), []);
        }
    }

    #[test]
    fn a_pause_with_the_car_described_is_paused_then_resumed() {
        let mut rig = Rig::new();
        rig.feed(&Frame::at(10.0).bytes(), Format::Fm2023);
        rig.feed(&Frame::at(10.5).bytes(), Format::Fm2023);
        // Paused for 8 s of TimestampMS: IsRaceOn 0, the car still there,
        // the race clock stopped.
        let mut paused = Frame::at(10.5);
        paused.race_on = false;
        let mut during = Vec::new();
        for ms in (0..8_000).step_by(100) {
            paused.timestamp_ms = Frame::at(10.5).timestamp_ms + 16 + ms;
            during.extend(rig.feed(&paused.bytes(), Format::Fm2023));
        }
        assert_eq!(names(&during), [("paused", Some(1))], "said once");
        let p = event(&during[0]);
        assert_eq!(p.race_time_s, Some(10.5), "the last racing frame's clock");
        assert_eq!(p.timestamp_ms, Frame::at(10.5).timestamp_ms + 16);
        assert_eq!((p.car_ordinal, p.track_ordinal), (3_141, Some(1_640)));
        let mut back = Frame::at(10.516);
        back.timestamp_ms = paused.timestamp_ms + 16;
        let resumed = rig.feed(&back.bytes(), Format::Fm2023);
        assert_eq!(names(&resumed), [("resumed", Some(1))]);
        let r = event(&resumed[0]);
        assert_eq!(r.race_time_s, Some(10.516));
        assert_eq!(r.timestamp_ms, back.timestamp_ms);
        assert!(rig.session.is_racing());
        assert_eq!(
            names(&rig.records),
            [
                ("race_start", Some(1)),
                ("paused", Some(1)),
                ("resumed", Some(1))
            ]
        );
    }

    #[test]
    fn a_rewind_through_blank_frames_is_one_rewind_event_and_no_race_end() {
        let mut rig = Rig::new();
        for s in 0..=40 {
            rig.feed(&Frame::at(20.0 + s as f32 * 0.1).bytes(), Format::Fm2023);
        }
        // 3 s of blank frames (the rewind's animation), then racing again
        // 2 s earlier on the race clock, 100 m back.
        let from = Frame::at(24.0).timestamp_ms;
        let mut during = Vec::new();
        for ms in (16..3_000).step_by(16) {
            during.extend(rig.feed(&blank(from + ms), Format::Fm2023));
        }
        assert_eq!(during, [], "blank frames mid-race say nothing yet");
        let mut back = Frame::at(22.0);
        back.timestamp_ms = from + 3_016;
        let rewind = rig.feed(&back.bytes(), Format::Fm2023);
        assert_eq!(names(&rewind), [("rewind", Some(1))]);
        let r = event(&rewind[0]);
        assert_eq!(r.race_time_s, Some(22.0), "where the race went back to");
        assert_eq!(r.timestamp_ms, from + 3_016);
        // Driving on from there: nothing more.
        for s in 1..=10 {
            let mut f = Frame::at(22.0 + s as f32 * 0.1);
            f.timestamp_ms = back.timestamp_ms + s * 100;
            assert_eq!(rig.feed(&f.bytes(), Format::Fm2023), []);
        }
        assert_eq!(
            names(&rig.records),
            [("race_start", Some(1)), ("rewind", Some(1))]
        );
    }

    #[test]
    fn blank_frames_after_which_the_clock_goes_on_are_no_event() {
        let mut rig = Rig::new();
        rig.feed(&Frame::at(5.0).bytes(), Format::Fm2023);
        let from = Frame::at(5.0).timestamp_ms;
        for ms in (16..9_000).step_by(16) {
            assert_eq!(rig.feed(&blank(from + ms), Format::Fm2023), []);
        }
        let mut on = Frame::at(5.016);
        on.timestamp_ms = from + 9_016;
        assert_eq!(rig.feed(&on.bytes(), Format::Fm2023), []);
        assert_eq!(names(&rig.records), [("race_start", Some(1))]);
    }

    #[test]
    fn a_rewind_without_blank_frames_is_told_by_the_clock_or_the_way() {
        let mut rig = Rig::new();
        rig.feed(&Frame::at(30.0).bytes(), Format::Fm2023);
        // The clock back 3 s.
        let mut back = Frame::at(27.0);
        back.timestamp_ms = Frame::at(30.0).timestamp_ms + 16;
        assert_eq!(
            names(&rig.feed(&back.bytes(), Format::Fm2023)),
            [("rewind", Some(1))]
        );
        // The way back 50 m on a clock that went on (a rewind the clock
        // missed); reversing a metre is not a rewind.
        let mut on = back;
        on.timestamp_ms += 16;
        on.race_time = 27.016;
        on.distance -= 1.0;
        assert_eq!(rig.feed(&on.bytes(), Format::Fm2023), []);
        on.timestamp_ms += 16;
        on.race_time = 27.032;
        on.distance -= 50.0;
        assert_eq!(
            names(&rig.feed(&on.bytes(), Format::Fm2023)),
            [("rewind", Some(1))]
        );
    }

    #[test]
    fn a_pause_that_ends_behind_where_it_began_is_resumed_then_rewind() {
        let mut rig = Rig::new();
        rig.feed(&Frame::at(40.0).bytes(), Format::Fm2023);
        let mut paused = Frame::at(40.0);
        paused.race_on = false;
        paused.timestamp_ms += 16;
        assert_eq!(
            names(&rig.feed(&paused.bytes(), Format::Fm2023)),
            [("paused", Some(1))]
        );
        let mut back = Frame::at(38.0);
        back.timestamp_ms = paused.timestamp_ms + 2_000;
        assert_eq!(
            names(&rig.feed(&back.bytes(), Format::Fm2023)),
            [("resumed", Some(1)), ("rewind", Some(1))]
        );
    }

    #[test]
    fn ten_seconds_without_racing_end_the_race_once_and_racing_again_starts_one() {
        let mut rig = Rig::new();
        // Before any race, frames without racing say nothing.
        assert_eq!(rig.feed(&blank(999_000), Format::Fm2023), []);
        rig.feed(&Frame::at(60.0).bytes(), Format::Fm2023);
        let from = Frame::at(60.0).timestamp_ms;
        assert_eq!(rig.feed(&blank(from + 9_999), Format::Fm2023), []);
        let end = rig.feed(&blank(from + 10_000), Format::Fm2023);
        assert_eq!(names(&end), [("race_end", Some(1))]);
        let e = event(&end[0]);
        assert_eq!(e.race_time_s, Some(60.0), "the last racing frame's clock");
        assert_eq!(e.timestamp_ms, from + 10_000, "told by this frame");
        assert_eq!(rig.feed(&blank(from + 20_000), Format::Fm2023), []);
        assert_eq!(rig.session.end(), Records::new(), "ended once");
        // A new race from the start.
        let mut next = Frame::at(0.0);
        next.timestamp_ms = from + 30_000;
        let start = rig.feed(&next.bytes(), Format::Fm2023);
        assert_eq!(names(&start), [("race_start", Some(1))]);
        assert_eq!(event(&start[0]).race_time_s, Some(0.0));
    }

    #[test]
    fn the_clock_wrapping_is_not_ten_seconds_and_a_reordered_frame_not_an_age() {
        let mut rig = Rig::new();
        let mut f = Frame::at(1.0);
        f.timestamp_ms = u32::MAX - 100;
        rig.feed(&f.bytes(), Format::Fm2023);
        assert_eq!(rig.feed(&blank(5_000), Format::Fm2023), [], "5.1 s on");
        assert_eq!(rig.feed(&blank(u32::MAX - 200), Format::Fm2023), []);
        assert_eq!(
            names(&rig.feed(&blank(9_900), Format::Fm2023)),
            [("race_end", Some(1))]
        );
    }

    #[test]
    fn a_new_car_or_track_a_restart_or_laps_fallen_by_two_end_the_race_and_start_another() {
        /// What a case changes in the next frame.
        type Change = fn(&mut Frame);
        let cases: [(&str, Change); 4] = [
            ("another car", |f| f.car = 2_718),
            ("another track", |f| f.track = 860),
            ("a restart", |f| {
                f.race_time = 0.2;
                f.distance = 0.0;
            }),
            ("LapNumber fallen by two", |f| f.lap_number = 1),
        ];
        for (what, change) in cases {
            let mut rig = Rig::new();
            let mut f = Frame::at(300.0);
            f.lap_number = 3;
            rig.feed(&f.bytes(), Format::Fm2023);
            let mut next = Frame::at(300.016);
            next.lap_number = 3;
            change(&mut next);
            let records = rig.feed(&next.bytes(), Format::Fm2023);
            let (end, start) = (event(&records[0]), event(&records[1]));
            assert_eq!(records.len(), 2, "{what}");
            assert_eq!(
                (end.event, end.race_time_s, end.lap, end.car_ordinal),
                (Event::RaceEnd, Some(300.0), Some(4), 3_141),
                "{what}"
            );
            assert_eq!(
                (start.event, start.race_time_s, start.lap, start.car_ordinal),
                (
                    Event::RaceStart,
                    Some(next.race_time),
                    Some(u32::from(next.lap_number) + 1),
                    next.car
                ),
                "{what}"
            );
            assert_eq!(end.timestamp_ms, next.timestamp_ms, "{what}");
        }
    }

    #[test]
    fn a_race_that_goes_on_after_its_end_keeps_its_best_lap() {
        let mut rig = Rig::new();
        // Lap 1 of 60 s, then a pause longer than a race's end.
        for s in 0..60 {
            rig.feed(&Frame::at(s as f32).bytes(), Format::Fm2023);
        }
        let mut line = Frame::at(60.0);
        (line.lap_number, line.current_lap, line.last_lap) = (1, 0.0, 60.0);
        let lap = rig.feed(&line.bytes(), Format::Fm2023);
        assert_eq!(names(&lap), [("lap record", Some(1)), ("lap", Some(1))]);
        let mut paused = line;
        paused.race_on = false;
        paused.timestamp_ms += 16;
        rig.feed(&paused.bytes(), Format::Fm2023);
        paused.timestamp_ms = line.timestamp_ms + 30_000;
        assert_eq!(
            names(&rig.feed(&paused.bytes(), Format::Fm2023)),
            [("race_end", Some(2))]
        );
        let mut on = line;
        on.race_time += 0.016;
        on.timestamp_ms = paused.timestamp_ms + 16;
        assert_eq!(
            names(&rig.feed(&on.bytes(), Format::Fm2023)),
            [("race_start", Some(2))]
        );
        assert_eq!(rig.session.laps().best_lap_s(), Some(60.0), "kept");
    }

    #[test]
    fn end_ends_the_race_on_at_its_last_racing_frame() {
        let mut session = Session::new();
        assert_eq!(session.end(), Records::new(), "no race, nothing");
        let bytes = Frame::at(12.0).bytes();
        let t = Telemetry::from_bytes(&bytes, Format::Fm2023).unwrap();
        session.observe(&t, false);
        let records = session.end();
        assert_eq!(records.len(), 1);
        let e = *records.events().next().unwrap();
        assert_eq!(
            (e.event, e.race_time_s, e.lap, e.timestamp_ms),
            (
                Event::RaceEnd,
                Some(12.0),
                Some(1),
                Frame::at(12.0).timestamp_ms
            )
        );
        assert!(!session.is_racing());
        assert_eq!(session.end(), Records::new(), "once");
    }

    /// The fixture captures (tests/fixtures/captures/README.md): 50 copies of
    /// fh6.bin, a racing frame on lap 5 at 300.5 s, TimestampMS rising by 10.
    /// One race start; no lap completes, nothing else happens.
    #[test]
    fn the_fixture_captures_give_one_race_start_and_nothing_else() {
        use crate::capture::Reader;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/captures");
        for name in [
            "lo.pcap",
            "any-sll2.pcap",
            "any-sll.pcap",
            "lo.pcapng",
            "any.pcapng",
        ] {
            let mut reader = Reader::open(&dir.join(name)).expect("a capture");
            let mut rig = Rig::new();
            let mut frames = 0;
            while let Some(datagram) = reader.next_datagram() {
                let datagram = datagram.expect("a whole capture");
                if datagram.to.port() != 47400 {
                    continue;
                }
                frames += 1;
                rig.feed(datagram.payload, Format::Fh6);
            }
            assert_eq!(frames, 50, "{name}");
            assert_eq!(names(&rig.records), [("race_start", Some(5))], "{name}");
            let start = event(&rig.records[0]);
            assert_eq!(start.race_time_s, Some(300.5), "{name}");
            assert_eq!(start.timestamp_ms, 666_666, "{name}");
            assert!(rig.session.is_racing(), "{name}: the race does not end");
        }
    }

    #[test]
    fn records_hold_four_in_order_and_event_names_are_the_records() {
        let e = |event| {
            Record::Event(EventRecord {
                event,
                race_time_s: None,
                lap: None,
                timestamp_ms: 0,
                car_ordinal: 0,
                track_ordinal: None,
            })
        };
        let mut records = Records::new();
        assert!(records.is_empty());
        for event in [Event::Resumed, Event::Rewind, Event::Lap, Event::Paused] {
            records.push(e(event));
        }
        assert_eq!(records.len(), MAX_RECORDS);
        let order: Vec<&str> = records.events().map(|e| e.event.name()).collect();
        assert_eq!(order, ["resumed", "rewind", "lap", "paused"]);
        let names: Vec<String> = Event::ALL.iter().map(Event::to_string).collect();
        assert_eq!(
            names,
            [
                "race_start",
                "lap",
                "paused",
                "resumed",
                "rewind",
                "race_end"
            ]
        );
    }

    /// Every event in order, whatever the frames (docs/session.md "The
    /// rules"): the oracle is written from that page, not from the session.
    mod order {
        use proptest::prelude::*;

        use super::*;

        /// One frame of a made-up stream, after the one before it.
        #[derive(Debug, Clone, Copy)]
        enum Step {
            /// Racing, `ms` later, the clock moved by `clock` s, the way by
            /// `way` m, LapNumber by `laps`, the car another when `car`.
            Racing {
                ms: u32,
                clock: f32,
                way: f32,
                laps: i8,
                car: bool,
            },
            /// A blank frame, `ms` later.
            Blank { ms: u32 },
            /// A frame with IsRaceOn 0 that describes the car, `ms` later.
            Paused { ms: u32 },
        }

        fn ms() -> impl Strategy<Value = u32> {
            prop_oneof![8 => 0u32..100, 2 => 100u32..4_000, 1 => 4_000u32..30_000]
        }

        fn step() -> impl Strategy<Value = Step> {
            let racing = (
                ms(),
                -3.0f32..2.0,
                -30.0f32..60.0,
                -2i8..=1,
                proptest::bool::weighted(0.02),
            )
                .prop_map(|(ms, clock, way, laps, car)| Step::Racing {
                    ms,
                    clock,
                    way,
                    laps,
                    car,
                });
            prop_oneof![
                6 => racing,
                2 => ms().prop_map(|ms| Step::Blank { ms }),
                1 => ms().prop_map(|ms| Step::Paused { ms }),
            ]
        }

        /// Where the oracle is: in a race or not, paused or not.
        #[derive(Debug, Default)]
        struct Oracle {
            in_race: bool,
            paused: bool,
            /// The lap of a lap record whose event must come next.
            lap_record: Option<u32>,
        }

        impl Oracle {
            fn take(&mut self, record: &Record) -> Result<(), TestCaseError> {
                if let Some(lap) = self.lap_record.take() {
                    let next_is_its_event = matches!(record,
                        Record::Event(e) if e.event == Event::Lap && e.lap == Some(lap));
                    prop_assert!(next_is_its_event, "lap {} record, then {:?}", lap, record);
                    return Ok(());
                }
                let Record::Event(e) = record else {
                    let Record::Lap(lap) = record else {
                        unreachable!()
                    };
                    prop_assert!(self.in_race && !self.paused, "a lap outside racing");
                    self.lap_record = Some(lap.lap);
                    return Ok(());
                };
                match e.event {
                    Event::RaceStart => {
                        prop_assert!(!self.in_race, "race_start in a race");
                        (self.in_race, self.paused) = (true, false);
                    }
                    Event::RaceEnd => {
                        prop_assert!(self.in_race, "race_end without a race");
                        (self.in_race, self.paused) = (false, false);
                    }
                    Event::Paused => {
                        prop_assert!(self.in_race && !self.paused, "paused twice or outside");
                        self.paused = true;
                    }
                    Event::Resumed => {
                        prop_assert!(self.in_race && self.paused, "resumed without paused");
                        self.paused = false;
                    }
                    Event::Rewind | Event::Lap => {
                        prop_assert!(self.in_race && !self.paused, "{} outside racing", e.event);
                    }
                }
                Ok(())
            }
        }

        proptest! {
            #[test]
            fn events_come_in_order_whatever_the_frames(steps in proptest::collection::vec(step(), 1..300)) {
                let mut session = Session::new();
                let mut oracle = Oracle::default();
                let mut f = Frame::at(0.0);
                f.race_on = false;
                for step in steps {
                    let (ms, racing) = match step {
                        Step::Racing { ms, clock, way, laps, car } => {
                            f.race_time = (f.race_time + clock).max(0.0);
                            f.current_lap = (f.current_lap + clock).max(0.0);
                            f.distance += way;
                            f.lap_number = f.lap_number.saturating_add_signed(i16::from(laps));
                            if laps == 1 {
                                (f.last_lap, f.current_lap) = (f.current_lap.max(1.0), 0.0);
                            }
                            if car {
                                f.car += 1;
                            }
                            (ms, true)
                        }
                        Step::Blank { ms } | Step::Paused { ms } => (ms, false),
                    };
                    f.timestamp_ms = f.timestamp_ms.wrapping_add(ms);
                    f.race_on = racing;
                    let bytes = if matches!(step, Step::Blank { .. }) {
                        blank(f.timestamp_ms)
                    } else {
                        f.bytes()
                    };
                    let packet = Packet::new_checked(&bytes[..], Format::Fm2023).unwrap();
                    let records = session.observe(&Telemetry::decode(&packet), is_menu_frame(&packet));
                    for record in &records {
                        oracle.take(record)?;
                        if !racing {
                            let only_stops = matches!(record,
                                Record::Event(e) if matches!(e.event, Event::Paused | Event::RaceEnd));
                            prop_assert!(only_stops, "{:?} from a frame without racing", record);
                        }
                    }
                    prop_assert_eq!(oracle.lap_record, None, "a lap's event on its frame");
                    prop_assert_eq!(session.is_racing(), oracle.in_race);
                    if racing {
                        prop_assert!(oracle.in_race && !oracle.paused, "racing after a racing frame");
                    }
                }
                for record in &session.end() {
                    oracle.take(record)?;
                }
                prop_assert!(!oracle.in_race, "end ends the race");
            }
        }
    }
}
