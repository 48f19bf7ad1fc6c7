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
use crate::stats::{DestinationSnapshot, DropReason, Latency, Problems, Senders, Snapshot};
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
    /// [`crate::stats::FOLLOW_SILENCE`]), so that the car, the map and the
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
}

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
        }
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
        let car = Car::new(&Telemetry::decode(&Packet::new_unchecked(payload, format)));
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
mod tests {
    use super::*;
    use crate::stats::SendErrorKind;

    fn from() -> SocketAddr {
        "127.0.0.1:5555".parse().unwrap()
    }

    #[test]
    fn rate_is_packets_over_the_window_and_drops_to_zero_in_silence() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut m = Model::new(Input::Auto, "test");
        for i in 0..10 {
            m.on_datagram(at(i * 20), from(), &[0; 311]);
        }
        m.tick(at(200));
        assert_eq!(m.rate_hz(), 0.0, "too early to tell");
        for i in 10..25 {
            m.on_datagram(at(i * 20), from(), &[0; 311]);
        }
        m.tick(at(500));
        assert_eq!(m.rate_hz(), 50.0, "25 packets in the first 500 ms");
        for i in 25..60 {
            m.on_datagram(at(i * 20), from(), &[0; 311]);
        }
        m.tick(at(1_200));
        assert_eq!(m.rate_hz(), 50.0, "60 packets in 1.2 s");
        for i in 0..30 {
            m.on_datagram(at(1_200 + i * 33), from(), &[0; 311]);
        }
        m.tick(at(2_200));
        assert_eq!(m.rate_hz(), 30.0, "the next window alone");
        assert_eq!(m.packets(), 90);
        assert_eq!(m.format(), Some((Format::Fm7, true)));
        m.tick(at(5_000));
        assert_eq!(m.rate_hz(), 0.0);
        assert_eq!(m.silent_for(), Some(Duration::from_millis(2_843)));
        assert_eq!(m.sender(), Some(from()));
    }

    /// Two programs sending at once: the car is the first one's until it
    /// has been silent for FOLLOW_SILENCE, then the other's (seen on the page
    /// as a map drawing two drives at once).
    #[test]
    fn with_two_senders_the_car_is_one_senders_until_it_falls_silent() {
        let packet = |speed: f32| {
            let mut buf = [0u8; 324];
            let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
            p.set_is_race_on(1);
            p.set_speed(speed).unwrap();
            buf
        };
        let (game, other): (SocketAddr, SocketAddr) = (from(), "127.0.0.1:6666".parse().unwrap());
        let speed = |m: &Model| m.car().and_then(|c| c.speed_kmh).map(|v| v.get().round());
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut m = Model::new(Input::Fixed(Format::Fh6), "test");
        for i in 0..10 {
            m.on_datagram(at(i * 20), game, &packet(10.0));
            m.on_datagram(at(i * 20 + 10), other, &packet(30.0));
            assert_eq!(speed(&m), Some(36.0), "packet {i}");
        }
        assert_eq!(m.packets(), 10);
        assert_eq!(m.sender(), Some(game));
        // The game stops; the other program's stream is shown once the game
        // has been silent for FOLLOW_SILENCE.
        let quiet = 180 + crate::stats::FOLLOW_SILENCE.as_millis() as u64;
        m.on_datagram(at(quiet - 1), other, &packet(30.0));
        assert_eq!(speed(&m), Some(36.0));
        m.on_datagram(at(quiet), other, &packet(30.0));
        assert_eq!(speed(&m), Some(108.0));
        assert_eq!(m.sender(), Some(other));
        m.on_datagram(at(quiet + 10), game, &packet(10.0));
        assert_eq!(
            speed(&m),
            Some(108.0),
            "the game is not followed again at once"
        );

        // A model started beside a relay that follows `other` shows it, even
        // when the game's datagram comes first.
        let mut m = Model::new(Input::Fixed(Format::Fh6), "test");
        m.follow(other, at(0));
        m.on_datagram(at(1), game, &packet(10.0));
        assert_eq!(speed(&m), None);
        m.on_datagram(at(2), other, &packet(30.0));
        assert_eq!(speed(&m), Some(108.0));
        m.on_datagram(at(3), game, &packet(10.0));
        assert_eq!(speed(&m), Some(108.0));
        assert_eq!(m.sender(), Some(other));
    }

    use fixtures::snapshot;

    fn destination(name: &str, sent: u64) -> DestinationSnapshot {
        fixtures::destination(name, crate::config::Output::Format(Format::Fh5), sent)
    }

    #[track_caller]
    fn rates(rows: &[DestinationRow]) -> Vec<(&str, f64)> {
        rows.iter()
            .map(|r| (r.name.as_str(), r.packets_per_sec))
            .collect()
    }

    #[test]
    fn destination_rates_count_over_the_last_second_of_snapshots() {
        let mut r = DestinationRates::default();
        let rows = r.rows(&snapshot(0, vec![destination("simhub", 0)]));
        assert_eq!(rates(&rows), [("simhub", 0.0)], "nothing to compare yet");
        // 15 in 250 ms.
        let rows = r.rows(&snapshot(250, vec![destination("simhub", 15)]));
        assert_eq!(rates(&rows), [("simhub", 60.0)]);
        // Still from 0 ms: 60 in 1 s.
        let rows = r.rows(&snapshot(1_000, vec![destination("simhub", 60)]));
        assert_eq!(rates(&rows), [("simhub", 60.0)]);
        // From 250 ms, the newest a second old: 120 - 15 in 1.25 s; a destination
        // added by a reload counts from zero.
        let rows = r.rows(&snapshot(
            1_500,
            vec![destination("simhub", 120), destination("new", 30)],
        ));
        assert_eq!(rates(&rows), [("simhub", 84.0), ("new", 24.0)]);
        // The counters of another run: start again.
        let rows = r.rows(&snapshot(100, vec![destination("simhub", 5)]));
        assert_eq!(rates(&rows), [("simhub", 0.0)]);
    }

    #[test]
    fn a_destination_row_names_its_counters() {
        let mut d = destination("motion", 40);
        d.stats.drop(DropReason::NotRacing);
        d.stats.drop(DropReason::RateLimited);
        d.stats.drop(DropReason::RateLimited);
        d.stats.drop(DropReason::Untranslatable);
        d.stats.drop(DropReason::Stale);
        d.latency = Latency {
            count: 39,
            p50: Duration::from_micros(30),
            p99: Duration::from_micros(900),
            max: Duration::from_millis(2),
        };
        for _ in 0..3 {
            d.stats.send_errors.add(SendErrorKind::Refused);
        }
        d.stats.send_errors.add(SendErrorKind::Other);
        let row = DestinationRow::of(&d, 60.0);
        assert_eq!(
            row,
            DestinationRow {
                name: "motion".to_owned(),
                output: "fh5".to_owned(),
                packets_per_sec: 60.0,
                sent: 40,
                filtered: 1,
                rate_limited: 2,
                errors: 4,
                problems: "3 refused (nothing listening), 1 other, 1 untranslatable".to_owned(),
                stale: 1,
                latency: d.latency,
            }
        );
        assert_eq!(DestinationRow::of(&destination("ok", 1), 0.0).problems, "");
    }

    #[test]
    fn datagrams_of_another_format_are_counted_and_explained() {
        let mut m = Model::new(Input::Fixed(Format::Fh6), "test");
        m.on_datagram(Instant::now(), from(), &[0; 311]);
        assert_eq!(m.ignored(), 1);
        assert!(m.car().is_none());
        assert_eq!(
            m.why_ignored().unwrap(),
            "1 datagram ignored, not in the fh6 format (324 bytes); it is 311 bytes: fm7 \
             — use --format fm7 or auto (the last from 127.0.0.1:5555)"
        );
    }

    /// The Car is what the web page serialises: every value a number or null.
    #[test]
    fn a_car_serialises_with_null_for_what_cannot_be_shown() {
        let mut buf = [0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        p.set_speed(27.5).unwrap();
        p.set_current_engine_rpm(f32::NAN);
        p.set_engine_max_rpm(8_000.0);
        p.set_position_x(-1_234.5).unwrap();
        p.set_position_y(f32::INFINITY).unwrap();
        p.set_position_z(7_890.125).unwrap();
        p.set_lap_number(0).unwrap();
        p.set_best_lap(83.25).unwrap();
        p.set_last_lap(1.0e30).unwrap();
        p.set_tire_temp(Wheels::from_array([212.0, f32::NAN, 32.0, 32.0]))
            .unwrap();
        let car = Car::new(&Telemetry::decode(&p));
        let json = serde_json::to_value(car).unwrap();
        assert_eq!(json["format"], "fh6");
        assert_eq!(json["racing"], true);
        assert_eq!(json["speed_kmh"].as_f64().unwrap().round(), 99.0);
        assert_eq!(json["rpm"], serde_json::Value::Null);
        assert_eq!(json["redline_rpm"], 8_000.0);
        assert_eq!(json["rev_fraction"], serde_json::Value::Null);
        assert_eq!(json["gear"], "R");
        assert_eq!(json["lap"], 1);
        assert_eq!(json["best_lap"], 83.25);
        assert_eq!(json["last_lap"], serde_json::Value::Null);
        assert_eq!(json["current_lap"], serde_json::Value::Null);
        assert_eq!(json["tyres"]["fl"]["temp_c"], 100.0);
        assert_eq!(json["tyres"]["fr"]["temp_c"], serde_json::Value::Null);
        // One coordinate is not a number: no position to draw.
        assert_eq!(json["position"], serde_json::Value::Null);
        p.set_position_y(56.25).unwrap();
        let car = Car::new(&Telemetry::decode(&p));
        let at = car.position.expect("three numbers");
        assert_eq!(
            (at.x.get(), at.y.get(), at.z.get()),
            (-1_234.5, 56.25, 7_890.125)
        );
    }

    #[test]
    fn ignored_datagrams_say_what_they_are_and_what_reads_them() {
        let mut i = Ignored::default();
        for _ in 0..1_793 {
            i.add(331);
        }
        let fh6 = Input::Fixed(Format::Fh6);
        assert_eq!(
            i.nothing_matched(fh6),
            "none of the 1,793 datagrams is in the fh6 format (324 bytes); they are 331 bytes: \
             fm2023 — use --format fm2023 or auto"
        );
        i.add(311);
        i.add(100);
        i.add(40);
        assert_eq!(i.count(), 1_796);
        assert_eq!(
            i.explain(fh6),
            "1,796 datagrams ignored, not in the fh6 format (324 bytes); 1 is 311 bytes (fm7), \
             1,793 are 331 bytes (fm2023), 2 are 40 bytes (no Forza format) \
             — use --format auto (or one of fm7, fm2023)"
        );
        let mut i = Ignored::default();
        i.add(324);
        assert_eq!(
            i.nothing_matched(Input::Fixed(Format::Sled)),
            "the one datagram is not in the sled format (232 bytes); it is 324 bytes: \
             fh4, fh5 or fh6 — use --format auto (or one of fh4, fh5, fh6)"
        );
        let mut i = Ignored::default();
        i.add(100);
        i.add(7);
        assert_eq!(
            i.nothing_matched(Input::Auto),
            "none of the 2 datagrams is in any Forza format (lengths: sled 232, fm7 311, \
             fm2023 331, fh4/fh5/fh6 324); they are of no Forza length (the last 7 bytes)"
        );
    }

    #[test]
    fn a_dry_horizon_packet_is_fh6_but_not_for_certain() {
        let mut m = Model::new(Input::Auto, "test");
        m.on_datagram(Instant::now(), from(), &[0; 324]);
        assert_eq!(m.format(), Some((Format::Fh6, false)));
    }
}

/// Relay snapshots for the dashboard's tests (here and in `dashboard/`).
#[cfg(test)]
pub(crate) mod fixtures {
    use std::time::Duration;

    use crate::config::Output;
    use crate::stats::{DestinationSnapshot, DestinationStats, Snapshot};

    /// A destination that has sent `sent` packets and nothing else.
    pub(crate) fn destination(name: &str, output: Output, sent: u64) -> DestinationSnapshot {
        DestinationSnapshot {
            name: name.to_owned(),
            addr: Some("127.0.0.1:9002".parse().expect("an address")),
            addr_text: "127.0.0.1:9002".to_owned(),
            output,
            fields: Vec::new(),
            mqtt: None,
            only_race_on: false,
            max_rate: 0,
            max_age: None,
            status: crate::stats::Status::Ok,
            stats: DestinationStats {
                sent,
                ..Default::default()
            },
            latency: Default::default(),
        }
    }

    /// The relay's counters `ms` after its start.
    pub(crate) fn snapshot(ms: u64, destinations: Vec<DestinationSnapshot>) -> Snapshot {
        Snapshot {
            listen: "127.0.0.1:5400".parse().expect("an address"),
            elapsed: Duration::from_millis(ms),
            input: Default::default(),
            destinations,
            tap_dropped: 0,
            not_recorded: 0,
            config: Default::default(),
        }
    }
}
