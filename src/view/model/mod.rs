//! What the dashboard shows, as plain data: the car of the latest packet, the
//! packet rate, what was ignored, and (when watching the relay) one row per
//! destination.
//!
//! The model never reads a clock: every update takes `now`, so tests drive it with
//! made-up instants and [`super::render`] stays a pure function of it.
//!
//! [`Car`] is the one view of a packet that screens and pages show. It is made at
//! the model's boundary ([`Car::new`]) and holds every value as a [`Finite`] (or a
//! [`LapTime`]) checked against its quantity's range: a NaN, an infinity or a
//! value out of range from a datagram is `None`, shown as "–", so no screen can
//! be handed a number it cannot draw (issue 12: a NaN RPM aborted the dashboard).

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Reader;
use crate::config::Input;
use crate::counters::{DropReason, Latency, Senders};
use crate::report::{DestinationSnapshot, Problems, Snapshot};
use crate::telemetry::laps::{Lap, Laps};
use crate::telemetry::{Gear, Telemetry};
use crate::wire::{Expected, Format, Packet, Wheels};

/// The rate is counted over windows this long.
const RATE_WINDOW: Duration = Duration::from_secs(1);
/// After this long without a packet the dashboard says the stream stopped.
pub const SILENCE: Duration = Duration::from_secs(2);

/// What a screen shows for a value that is absent, not a number, or out of range.
pub const NONE: &str = "–";

/// `v` formatted by `f`, or [`NONE`] when there is no value to show.
pub fn shown<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| NONE.to_owned(), f)
}

/// Values with no narrower natural range (speeds, G, temperatures, slips,
/// positions): f32 holds about seven digits, and a float beyond a million in a
/// datagram is noise no screen could fit.
pub const SHOWN: RangeInclusive<f32> = -1.0e6..=1.0e6;
/// [`SHOWN`] for quantities that cannot be negative (speed, revs).
const UNSIGNED: RangeInclusive<f32> = 0.0..=1.0e6;
/// A share of a whole (revs over the redline).
const FRACTION: RangeInclusive<f32> = 0.0..=1.0;
/// A pedal.
const PERCENT: RangeInclusive<f32> = 0.0..=100.0;
/// The steering axis, full left to full right.
const AXIS: RangeInclusive<f32> = -1.0..=1.0;
/// An angle in degrees.
const ANGLE: RangeInclusive<f32> = -180.0..=180.0;
/// A tyre whose |slip| is above this has lost grip (docs/formats.md: slip is
/// normalised, above 1 the tyre slides).
pub const GRIP_LOST: f32 = 1.0;

/// A float that is a number (never NaN or ±infinity) inside the range its
/// quantity was checked against: the only kind of float a [`Car`] holds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Finite(f32);

impl Finite {
    /// `value` if it is a number in `range` (a finite range); `None` for NaN,
    /// ±infinity or a number outside it.
    pub fn within(value: f32, range: RangeInclusive<f32>) -> Option<Finite> {
        range.contains(&value).then_some(Finite(value))
    }

    /// The number.
    pub fn get(self) -> f32 {
        self.0
    }
}

impl fmt::Display for Finite {
    /// As an `f32`, with the formatter's precision and sign.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A lap time, seconds: above 0 (the game sends 0 for "none yet") and below
/// [`LapTime::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct LapTime(f32);

impl LapTime {
    /// 100 hours: a longer "lap" is not one.
    pub const MAX: f32 = 360_000.0;

    /// `seconds` as a lap time, or `None` for 0, a negative, NaN or huge value.
    pub fn new(seconds: f32) -> Option<LapTime> {
        (seconds > 0.0 && seconds < LapTime::MAX).then_some(LapTime(seconds))
    }

    /// The time in seconds.
    pub fn seconds(self) -> f32 {
        self.0
    }
}

impl fmt::Display for LapTime {
    /// `m:ss.mmm`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Below 3.6e8 ms: exact in u64, and far from its limit.
        let ms = (f64::from(self.0) * 1000.0).round() as u64;
        write!(f, "{}:{:02}.{:03}", ms / 60_000, ms / 1000 % 60, ms % 1000)
    }
}

/// One tyre as a screen shows it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Tyre {
    /// Temperature, °C.
    pub temp_c: Option<Finite>,
    /// TireSlipRatio (normalised: above 1 in size, no grip).
    pub slip_ratio: Option<Finite>,
    /// TireSlipAngle (normalised).
    pub slip_angle: Option<Finite>,
    /// TireCombinedSlip (normalised).
    pub combined_slip: Option<Finite>,
    /// NormalizedSuspensionTravel, 0 (stretched) … 1 (compressed).
    pub suspension: Option<Finite>,
}

/// Where the car is in the world, metres (PositionX/Y/Z): all three numbers, or
/// no position.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Position {
    /// PositionX.
    pub x: Finite,
    /// PositionY (up).
    pub y: Finite,
    /// PositionZ.
    pub z: Finite,
}

/// The car of one packet as a screen or a page shows it: plain data, every
/// float finite and in range or `None` (see [`Finite`]), so it serialises to JSON
/// with `null` for what cannot be shown.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Car {
    /// The format the packet was read as.
    pub format: Format,
    /// IsRaceOn.
    pub racing: bool,
    /// km/h.
    pub speed_kmh: Option<Finite>,
    /// mph.
    pub speed_mph: Option<Finite>,
    /// Mechanical horsepower.
    pub power_hp: Option<Finite>,
    /// `R`, `N`, 1..10 or the raw number.
    pub gear: Option<Gear>,
    /// CurrentEngineRpm.
    pub rpm: Option<Finite>,
    /// EngineMaxRpm, the redline.
    pub redline_rpm: Option<Finite>,
    /// Revs over the redline, 0..1, when both are known.
    pub rev_fraction: Option<Finite>,
    /// Throttle, 0..100 %.
    pub throttle_pct: Option<Finite>,
    /// Brake, 0..100 %.
    pub brake_pct: Option<Finite>,
    /// Clutch, 0..100 %.
    pub clutch_pct: Option<Finite>,
    /// Handbrake, 0..100 %.
    pub handbrake_pct: Option<Finite>,
    /// Steering, -1 (full left) … 1 (full right).
    pub steer: Option<Finite>,
    /// Lateral G (positive: pushed right).
    pub g_lat: Option<Finite>,
    /// Longitudinal G (positive: accelerating).
    pub g_long: Option<Finite>,
    /// Vertical G.
    pub g_vert: Option<Finite>,
    /// Angle between heading and travel, degrees, positive sliding right.
    pub drift_angle_deg: Option<Finite>,
    /// The four tyres.
    pub tyres: Wheels<Tyre>,
    /// Some tyre's slip is above [`GRIP_LOST`] in size.
    pub grip_lost: bool,
    /// CarClass as a letter, where the game's scale is known.
    pub class_letter: Option<&'static str>,
    /// CarClass as sent.
    pub class: i32,
    /// CarPerformanceIndex.
    pub performance_index: i32,
    /// `FWD`, `RWD` or `AWD`.
    pub drivetrain: Option<&'static str>,
    /// NumCylinders.
    pub cylinders: i32,
    /// CarOrdinal.
    pub ordinal: i32,
    /// The lap as a driver counts it: LapNumber + 1, since the game counts from
    /// 0 (issue 13: the first lap is lap 1 everywhere).
    pub lap: Option<u32>,
    /// RacePosition.
    pub race_position: Option<u8>,
    /// CurrentLap.
    pub current_lap: Option<LapTime>,
    /// LastLap.
    pub last_lap: Option<LapTime>,
    /// BestLap.
    pub best_lap: Option<LapTime>,
    /// PositionX/Y/Z.
    pub position: Option<Position>,
}

/// Whether a tyre with this slip has lost grip.
pub fn grip_lost(slip: Option<Finite>) -> bool {
    slip.is_some_and(|s| s.get().abs() > GRIP_LOST)
}

impl Car {
    /// The car of a decoded packet: each value [`Telemetry`] derives, and each raw
    /// field a screen shows, checked against its range.
    pub fn new(t: &Telemetry) -> Car {
        let f = &t.fields;
        let within =
            |v: Option<f32>, range: RangeInclusive<f32>| v.and_then(|v| Finite::within(v, range));
        let rpm = Finite::within(f.current_engine_rpm, UNSIGNED);
        let redline_rpm = Finite::within(f.engine_max_rpm, UNSIGNED);
        let temps = t.tire_temp_c.map(Wheels::into_array).unwrap_or_default();
        let [ratio, angle, combined, suspension] = [
            f.tire_slip_ratio,
            f.tire_slip_angle,
            f.tire_combined_slip,
            f.normalized_suspension_travel,
        ]
        .map(Wheels::into_array);
        let tyres = Wheels::from_array(std::array::from_fn(|w| Tyre {
            temp_c: t.tire_temp_c.and_then(|_| Finite::within(temps[w], SHOWN)),
            slip_ratio: Finite::within(ratio[w], SHOWN),
            slip_angle: Finite::within(angle[w], SHOWN),
            combined_slip: Finite::within(combined[w], SHOWN),
            suspension: Finite::within(suspension[w], SHOWN),
        }));
        let grip = tyres.into_array().iter().any(|t| {
            [t.slip_ratio, t.slip_angle, t.combined_slip]
                .into_iter()
                .any(grip_lost)
        });
        let position = || {
            Some(Position {
                x: within(f.position_x, SHOWN)?,
                y: within(f.position_y, SHOWN)?,
                z: within(f.position_z, SHOWN)?,
            })
        };
        Car {
            format: t.format,
            racing: f.is_race_on != 0,
            speed_kmh: within(t.speed_kmh, UNSIGNED),
            speed_mph: within(t.speed_mph, UNSIGNED),
            power_hp: within(t.power_hp, SHOWN),
            gear: t.gear,
            rpm,
            redline_rpm,
            rev_fraction: rpm
                .and(redline_rpm)
                .and_then(|_| within(t.rev_fraction, FRACTION)),
            throttle_pct: within(t.throttle_pct, PERCENT),
            brake_pct: within(t.brake_pct, PERCENT),
            clutch_pct: within(t.clutch_pct, PERCENT),
            handbrake_pct: within(t.handbrake_pct, PERCENT),
            steer: within(t.steer_axis, AXIS),
            g_lat: within(t.g_lat, SHOWN),
            g_long: within(t.g_long, SHOWN),
            g_vert: within(t.g_vert, SHOWN),
            drift_angle_deg: within(t.drift_angle_deg, ANGLE),
            tyres,
            grip_lost: grip,
            class_letter: t.car_class_letter,
            class: f.car_class,
            performance_index: f.car_performance_index,
            drivetrain: t.drivetrain,
            cylinders: f.num_cylinders,
            ordinal: f.car_ordinal,
            lap: f.lap_number.map(|l| u32::from(l) + 1),
            race_position: f.race_position,
            current_lap: f.current_lap.and_then(LapTime::new),
            last_lap: f.last_lap.and_then(LapTime::new),
            best_lap: f.best_lap.and_then(LapTime::new),
            position: position(),
        }
    }

    /// Whether the packet's format has the Dash block (speed, gear, pedals, laps):
    /// a sled packet has not.
    pub fn has_dash(&self) -> bool {
        self.format.layout().dash.is_some()
    }
}

/// The datagram lengths of the Forza formats, shortest first (fh4 and fh5 share
/// fh6's).
const FORZA_LENGTHS: [usize; 4] = [
    Format::Sled.len(),
    Format::Fm7.len(),
    Format::Fh6.len(),
    Format::Fm2023.len(),
];
// Every format's length is one of them.
const _: () = {
    let mut i = 0;
    while i < Format::ALL.len() {
        let mut j = 0;
        while j < FORZA_LENGTHS.len() && FORZA_LENGTHS[j] != Format::ALL[i].len() {
            j += 1;
        }
        assert!(j < FORZA_LENGTHS.len(), "a format's length is missing");
        i += 1;
    }
};

/// Datagrams that were not packets of the input format, by length: what they
/// are, so a message can say why they were ignored and what would read them
/// (issue 13: "1793 datagrams that are not packets ignored" said neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ignored {
    /// By length, as [`FORZA_LENGTHS`].
    forza: [u64; FORZA_LENGTHS.len()],
    /// Of no Forza length.
    other: u64,
    /// The length of the latest of those.
    other_len: usize,
}

/// The ids of the formats `len` bytes long: `fh4, fh5 or fh6`.
fn formats_of(len: usize) -> String {
    let ids: Vec<&str> = Format::ALL
        .iter()
        .filter(|f| f.len() == len)
        .map(|f| f.id())
        .collect();
    match ids.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "no Forza format".to_owned(),
    }
}

impl Ignored {
    /// Counts one datagram of `len` bytes.
    pub fn add(&mut self, len: usize) {
        match FORZA_LENGTHS.iter().position(|&l| l == len) {
            Some(i) => self.forza[i] += 1,
            None => {
                self.other += 1;
                self.other_len = len;
            }
        }
    }

    /// Datagrams counted.
    pub fn count(&self) -> u64 {
        self.forza.iter().sum::<u64>() + self.other
    }

    /// What they are: `they are 331 bytes: fm2023`, or with several lengths
    /// `10 are 331 bytes (fm2023), 2 are of no Forza length (the last 100 bytes)`;
    /// then what would read them: ` — use --format fm2023 or auto`.
    fn what(&self) -> String {
        let mut kinds: Vec<(u64, String, String)> = FORZA_LENGTHS
            .iter()
            .zip(self.forza)
            .filter(|(_, n)| *n > 0)
            .map(|(&len, n)| (n, format!("{len} bytes"), formats_of(len)))
            .collect();
        if self.other > 0 {
            kinds.push((
                self.other,
                format!("{} bytes", self.other_len),
                "no Forza format".to_owned(),
            ));
        }
        let they = if self.count() == 1 {
            "it is"
        } else {
            "they are"
        };
        let mut text = match kinds.as_slice() {
            [(_, len, formats)] if self.other == 0 => format!("{they} {len}: {formats}"),
            [(1, len, _)] => format!("{they} of no Forza length ({len})"),
            [(_, len, _)] => format!("{they} of no Forza length (the last {len})"),
            _ => kinds
                .iter()
                .map(|(n, len, formats)| {
                    let are = if *n == 1 { "is" } else { "are" };
                    format!("{} {are} {len} ({formats})", crate::capture::thousands(*n))
                })
                .collect::<Vec<_>>()
                .join(", "),
        };
        let readable: Vec<&str> = FORZA_LENGTHS
            .iter()
            .zip(self.forza)
            .filter(|(_, n)| *n > 0)
            .flat_map(|(&len, _)| Format::ALL.iter().filter(move |f| f.len() == len))
            .map(|f| f.id())
            .collect();
        match readable.as_slice() {
            [] => {}
            [one] => text.push_str(&format!(" — use --format {one} or auto")),
            many => text.push_str(&format!(
                " — use --format auto (or one of {})",
                many.join(", ")
            )),
        }
        text
    }

    /// Why they were ignored when reading `input`: `12 datagrams ignored, not in
    /// the fh6 format (324 bytes); they are 331 bytes: fm2023 — use --format fm2023
    /// or auto`.
    pub fn explain(&self, input: Input) -> String {
        let count = match self.count() {
            1 => "1 datagram".to_owned(),
            n => format!("{} datagrams", crate::capture::thousands(n)),
        };
        format!("{count} ignored, not {}; {}", Expected(input), self.what())
    }

    /// That nothing read was a packet of `input`: `none of the 1,793 datagrams is
    /// in the fh6 format (324 bytes); they are 331 bytes: fm2023 — use --format
    /// fm2023 or auto`.
    pub fn nothing_matched(&self, input: Input) -> String {
        let expected = Expected(input);
        match self.count() {
            1 => format!("the one datagram is not {expected}; {}", self.what()),
            n => format!(
                "none of the {} datagrams is {expected}; {}",
                crate::capture::thousands(n),
                self.what()
            ),
        }
    }
}

/// One destination of the relay, as the relay's counters snapshot reports it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DestinationRow {
    /// The destination's name.
    pub name: String,
    /// What it receives: `same`, or the format packets are translated to.
    pub output: String,
    /// Packets sent per second, lately.
    pub packets_per_sec: f64,
    /// Packets sent in all.
    pub sent: u64,
    /// Packets not sent because of its race filter (IsRaceOn = 0).
    pub filtered: u64,
    /// Packets not sent because of its rate limit.
    pub rate_limited: u64,
    /// Send errors.
    pub errors: u64,
    /// The send errors by kind and the other drops (untranslatable, backlog
    /// full), `"3 refused (nothing listening)"`; empty when there are none.
    pub problems: String,
    /// Packets not sent because they were older than its `max_age`.
    pub stale: u64,
    /// Its latency (receipt to the return of the send) over the relay's
    /// summary interval so far.
    pub latency: Latency,
}

impl DestinationRow {
    /// The row of `d`, sending `packets_per_sec`.
    pub fn of(d: &DestinationSnapshot, packets_per_sec: f64) -> DestinationRow {
        let s = &d.stats;
        DestinationRow {
            name: d.name.clone(),
            output: d.output.to_string(),
            packets_per_sec,
            sent: s.sent,
            filtered: s.dropped(DropReason::NotRacing),
            rate_limited: s.dropped(DropReason::RateLimited),
            errors: s.send_errors.total(),
            problems: Problems(s).to_string(),
            stale: s.dropped(DropReason::Stale),
            latency: d.latency,
        }
    }
}

/// Each destination's packets per second, from successive counter snapshots:
/// the packets sent since the newest snapshot at least a second older than
/// the latest (or since the oldest kept, early on), over the relay's own clock.
#[derive(Debug, Clone, Default)]
pub struct DestinationRates {
    /// (time since the relay started, each destination's name and sent count).
    history: VecDeque<(Duration, Vec<(String, u64)>)>,
}

impl DestinationRates {
    /// Takes `snapshot` and returns the destinations' rows, with their rates.
    pub fn rows(&mut self, snapshot: &Snapshot) -> Vec<DestinationRow> {
        let now = snapshot.elapsed;
        if self.history.back().is_some_and(|(t, _)| *t > now) {
            // Another relay's snapshots, or a clock gone back: start again.
            self.history.clear();
        }
        let sent = snapshot
            .destinations
            .iter()
            .map(|d| (d.name.clone(), d.stats.sent))
            .collect();
        self.history.push_back((now, sent));
        while self.history.len() >= 2 && self.history[1].0 + RATE_WINDOW <= now {
            self.history.pop_front();
        }
        let (since, before) = self.history.front().expect("pushed above");
        let span = now.saturating_sub(*since).as_secs_f64();
        snapshot
            .destinations
            .iter()
            .map(|d| {
                // A destination added since (a reload) counts from zero.
                let base = before
                    .iter()
                    .find(|(name, _)| *name == d.name)
                    .map_or(0, |(_, n)| *n);
                let rate = if span > 0.0 {
                    d.stats.sent.saturating_sub(base) as f64 / span
                } else {
                    0.0
                };
                DestinationRow::of(d, rate)
            })
            .collect()
    }
}

/// Until the first window closes, a rate is shown once this much has been counted.
const FIRST_ESTIMATE: Duration = Duration::from_millis(250);

/// Packets per second, counted over [`RATE_WINDOW`]-long windows (the first one
/// estimated while it is open, so a new stream does not read 0 Hz for a second).
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    window_start: Option<Instant>,
    count: u64,
    hz: f64,
    closed_one: bool,
}

impl Rate {
    fn count(&mut self, now: Instant) {
        self.window_start.get_or_insert(now);
        self.count += 1;
    }

    fn tick(&mut self, now: Instant) {
        let Some(start) = self.window_start else {
            return;
        };
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= RATE_WINDOW {
            self.hz = self.count as f64 / elapsed.as_secs_f64();
            self.count = 0;
            self.window_start = Some(now);
            self.closed_one = true;
        } else if !self.closed_one && elapsed >= FIRST_ESTIMATE {
            self.hz = self.count as f64 / elapsed.as_secs_f64();
        }
    }
}

/// The dashboard's state.
#[derive(Debug, Clone)]
pub struct Model {
    /// Where the datagrams come from (`listening on 0.0.0.0:5400`).
    pub(crate) source: String,
    pub(crate) reader: Reader,
    /// The car of the latest racing packet (IsRaceOn = 1): a menu or pause frame
    /// leaves it as it was.
    pub(crate) car: Option<Car>,
    /// The latest packet's format, and whether it was racing.
    latest: Option<(Format, bool)>,
    /// The latest packet's sender.
    pub(crate) sender: Option<SocketAddr>,
    /// Whose packets are shown when several programs send at once: the
    /// relay's own rule (the first; another once it has been silent for
    /// [`crate::counters::FOLLOW_SILENCE`]), so that the car, the map and the
    /// rate are one game's, never two drives interleaved.
    pub(crate) senders: Senders,
    /// Packets read.
    pub(crate) packets: u64,
    /// Datagrams that were not packets of the input format.
    pub(crate) ignored: Ignored,
    /// The sender of the latest of those.
    pub(crate) ignored_from: Option<SocketAddr>,
    rate: Rate,
    last_at: Option<Instant>,
    /// How long since the last packet, once that is over [`SILENCE`].
    pub(crate) silent_for: Option<Duration>,
    /// The relay's destinations, when watching the relay.
    pub(crate) destinations: Option<Vec<DestinationRow>>,
    /// Datagrams the relay received but could not hand to the screen (it fell
    /// behind), when watching the relay.
    pub(crate) not_shown: u64,
    /// Datagrams a recording could not write.
    pub(crate) not_recorded: u64,
    /// The latest log line held back while the screen is on.
    pub(crate) log_line: Option<String>,
    /// True once the source has ended (end of a capture file).
    pub(crate) ended: bool,
    /// The laps of the drive shown, from its frames (issue 34).
    laps: Box<Laps>,
    /// The laps done since the model started, the newest [`LAPS_KEPT`].
    lap_table: VecDeque<Lap>,
}

/// Laps a model keeps for its lap table: a long session's last ones.
pub const LAPS_KEPT: usize = 50;

impl Model {
    /// An empty model reading `input` from the source described as `source`.
    pub fn new(input: Input, source: impl Into<String>) -> Model {
        Model {
            source: source.into(),
            reader: Reader::new(input),
            car: None,
            latest: None,
            sender: None,
            senders: Senders::default(),
            packets: 0,
            ignored: Ignored::default(),
            ignored_from: None,
            rate: Rate::default(),
            last_at: None,
            silent_for: None,
            destinations: None,
            not_shown: 0,
            not_recorded: 0,
            log_line: None,
            ended: false,
            laps: Box::new(Laps::new()),
            lap_table: VecDeque::with_capacity(LAPS_KEPT),
        }
    }

    /// The laps done since the model started, oldest first (the newest
    /// [`LAPS_KEPT`]); each says its time, the best before and its splits.
    pub fn lap_table(&self) -> &VecDeque<Lap> {
        &self.lap_table
    }

    /// The lap being driven less the best lap at the same distance into
    /// it, s; `None` before a best lap or off its trace.
    pub fn live_delta_s(&self) -> Option<f32> {
        self.laps.live_delta_s()
    }

    /// Follows `sender` from now on (as if its datagram had come first): the
    /// sender the relay follows, when the model starts beside a relay that
    /// has already chosen, so that the two show the same stream.
    pub fn follow(&mut self, sender: SocketAddr, now: Instant) {
        if !self.senders.follows(sender) {
            self.senders.note_other(sender, now);
        }
    }

    /// Takes one datagram received at `now` from `from`.
    pub fn on_datagram(&mut self, now: Instant, from: SocketAddr, payload: &[u8]) {
        let Some(format) = self.reader.format_of(payload) else {
            self.ignored.add(payload.len());
            self.ignored_from = Some(from);
            return;
        };
        if self.senders.follows(from) {
            self.senders.count_followed(now);
        } else if !self.senders.note_other(from, now) {
            // Another program's packets while the one shown still sends.
            return;
        }
        let telemetry = Telemetry::decode(&Packet::new_unchecked(payload, format));
        if let Some(lap) = self.laps.observe(&telemetry) {
            if self.lap_table.len() == LAPS_KEPT {
                self.lap_table.pop_front();
            }
            self.lap_table.push_back(lap);
        }
        let car = Car::new(&telemetry);
        self.latest = Some((format, car.racing));
        if car.racing {
            self.car = Some(car);
        }
        self.sender = Some(from);
        self.packets += 1;
        self.rate.count(now);
        self.last_at = Some(now);
        self.silent_for = None;
    }

    /// Ages the model to `now`: closes the rate window, notices silence.
    pub fn tick(&mut self, now: Instant) {
        self.rate.tick(now);
        self.silent_for = self
            .last_at
            .map(|at| now.saturating_duration_since(at))
            .filter(|&d| d >= SILENCE);
        if self.silent_for.is_some() {
            self.rate.hz = 0.0;
        }
    }

    /// Shows the relay's destinations (replacing the previous rows).
    pub fn set_destinations(&mut self, rows: Vec<DestinationRow>) {
        self.destinations = Some(rows);
    }

    /// Shows how many datagrams the relay could not hand to the screen.
    pub fn set_not_shown(&mut self, datagrams: u64) {
        self.not_shown = datagrams;
    }

    /// Shows how many datagrams a recording could not write.
    pub fn set_not_recorded(&mut self, datagrams: u64) {
        self.not_recorded = datagrams;
    }

    /// Shows `line`, the latest log line (held back while the screen is on).
    pub fn set_log_line(&mut self, line: Option<String>) {
        self.log_line = line;
    }

    /// Marks the source as ended (a capture file played to its end).
    pub fn end(&mut self) {
        self.ended = true;
    }

    /// The car of the latest racing packet; while [`Model::not_racing`], the last
    /// one before the menu or pause.
    pub fn car(&self) -> Option<&Car> {
        self.car.as_ref()
    }

    /// True when the latest packet had IsRaceOn = 0: the game is in a menu or
    /// paused (or the race is over).
    pub fn not_racing(&self) -> bool {
        self.latest.is_some_and(|(_, racing)| !racing)
    }

    /// The format the latest packet was read as, and whether that is certain (a
    /// Horizon packet read as fh6 before any puddle said so is not).
    pub fn format(&self) -> Option<(Format, bool)> {
        self.latest
            .map(|(format, _)| (format, self.reader.is_certain(format)))
    }

    /// Packets per second over the last window.
    pub fn rate_hz(&self) -> f64 {
        self.rate.hz
    }

    /// Packets read so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Who sent the latest packet.
    pub fn sender(&self) -> Option<SocketAddr> {
        self.sender
    }

    /// How long since the latest packet, once that is [`SILENCE`] or more.
    pub fn silent_for(&self) -> Option<Duration> {
        self.silent_for
    }

    /// Datagrams ignored so far (not packets of the input format).
    pub fn ignored(&self) -> u64 {
        self.ignored.count()
    }

    /// Why datagrams were ignored, and where the latest came from; `None` when
    /// none was.
    pub fn why_ignored(&self) -> Option<String> {
        let from = self.ignored_from?;
        Some(format!(
            "{} (the last from {from})",
            self.ignored.explain(self.reader.input())
        ))
    }
}

#[cfg(test)]
mod tests;

/// Relay snapshots for the dashboard's tests (here and in `dashboard/`).
#[cfg(test)]
pub(crate) mod fixtures;
