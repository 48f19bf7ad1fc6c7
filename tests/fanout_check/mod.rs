//! Hostile input for the whole fan-out core (issue 9): a script decoded from
//! arbitrary bytes (routes, then datagrams at advancing times, timer ticks,
//! outcomes for frames the shell queued, and reloads with other routes) run
//! through [`Fanout`] beside an oracle of what it must do, with a sink that
//! records what it is handed and answers as a shell would: sent, queued (the
//! socket would block), or a failed send.
//!
//! The oracle is written from the formats reference (docs/formats.md) and the
//! relay's stated rules, not from the crate: its own layouts and field offsets,
//! its own translation (block by block, field by field), its own detection
//! (by length and by the puddle words, with the 30-packet rule of issue 12),
//! its own race filter. It uses the crate only for the types it talks to the
//! core with.
//!
//! Shared by the cargo-fuzz target `fanout` (fuzz/fuzz_targets/fanout.rs, which
//! includes this file by path) and the stable property test
//! tests/it/fanout_props.rs, so CI runs the same checks over random scripts.
//!
//! What [`run`] asserts, besides "never panics":
//! - `handle`'s verdict: the status query for exactly the query's bytes from
//!   loopback (nothing delivered, nothing counted), disallowed exactly for
//!   senders outside `listen.allow`, and otherwise the oracle's reading
//!   (format, certain or guessed: a Horizon packet's own puddle words first,
//!   then the answer of the stream followed); nothing reaches any destination
//!   from a disallowed sender;
//! - with `auto`, only the stream followed (the first sender's, another's
//!   after it was silent for two seconds) teaches how Horizon packets that
//!   tell nothing are read (issue 23), and the senders the core lists, with
//!   their counts and the one followed, are the oracle's;
//! - each destination is handed at most the current datagram: `same` gets it
//!   byte for byte; a translating destination gets exactly the oracle's
//!   translation (a guessed Horizon input passes as it came to a Horizon
//!   destination);
//! - a frame that is not delivered at once and fits [`FRAME_CAPACITY`] is the
//!   destination's pending frame, and `due` hands over exactly that frame;
//! - `next_deadline` is `Some` exactly when some frame is pending, and `due(now)`
//!   delivers something exactly when that deadline has come; a pending frame's
//!   deadline is one and a half intervals after it came (at once with no limit
//!   or a new limiter that sent nothing yet);
//! - a `max_rate` destination's k-th delivery since its limiter started comes no
//!   sooner than k - 1 intervals after the first (the rate, with one frame of
//!   tolerance: issue 30), and a frame that comes a whole interval after its
//!   last delivery (or before any) is never held;
//! - `max_age` (issue 15): a frame older than the limit (from its receive
//!   time, which the script sets before `now`) is never handed over: on
//!   arrival it is counted stale and the pending frame stays; a pending frame
//!   is dropped stale by `due` only when it is older than the limit; the shell's
//!   `drop_if_stale` for a held frame answers as the limit says; every frame
//!   handed over carries the receive time of its datagram;
//! - `plan` names, per destination, the oracle's action and keeps every id, and
//!   `commit` reports exactly the names added, changed and removed; a removed
//!   destination's final counters are the oracle's, every frame it held
//!   counted;
//! - after every step, every destination's counters are the oracle's and add
//!   up: received = sent + dropped by reason + held;
//! - at the end (after `finish`), nothing is held any more.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};

use forza_relay::report::CountersOf as _;

use forza_relay::counters::{DestinationStats, DropReason, SendErrorKind};
use forza_relay::fanout::{
    Action, Arrival, Changes, Destination, DestinationId, Fanout, Fate, Output, Report, Routes,
    Sink, Target, Verdict, FRAME_CAPACITY,
};
use forza_relay::wire::{Format, Input, Reading};
use ipnet::IpNet;

/// Destination names a script picks from, so that a reload keeps some, adds
/// some and removes some.
const NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
/// `max_rate` values a script picks from (0 = no limit).
const RATES: [u32; 8] = [0, 0, 0, 1, 10, 60, 144, 1_000];
/// Longest datagram a script makes: past every Forza length and past
/// [`FRAME_CAPACITY`], so oversized pending frames are exercised.
const MAX_SCRIPT_DATAGRAM: usize = 2_048;
/// Longest script step: a timer or datagram advances the clock by up to this.
const STEP: Duration = Duration::from_micros(500);
/// `max_age` values a script picks from (issue 15), around the ages a script
/// makes: a datagram received up to [`LAG`] × 31 before it is handled, and
/// steps of up to [`STEP`] × 255.
const AGES: [Option<Duration>; 8] = [
    None,
    None,
    None,
    None,
    Some(Duration::from_millis(1)),
    Some(Duration::from_millis(5)),
    Some(Duration::from_millis(20)),
    Some(Duration::from_millis(50)),
];
/// A datagram's receive time is a multiple of this before it is handled.
const LAG: Duration = Duration::from_millis(2);

// ---- The formats, as docs/formats.md describes them. ----

/// Lengths of the blocks ("The five layouts").
const SLED_LEN: usize = 232;
const HORIZON_LEN: usize = 12;
const DASH_LEN: usize = 79;
const EXTRAS_LEN: usize = 20;
/// Sled block fields the oracle looks at.
const IS_RACE_ON: usize = 0;
const WHEEL_IN_PUDDLE: usize = 132;
const CAR_CLASS: usize = 216;
/// Dash fields named in failure messages (relative to the block).
const DASH_SPEED: usize = 12;

/// Where one format's blocks are.
#[derive(Debug, Clone, Copy)]
struct Shape {
    len: usize,
    horizon: Option<usize>,
    dash: Option<usize>,
    extras: Option<usize>,
    tail: Option<usize>,
    /// WheelInPuddle typed S32 0/1 (fh6) rather than an F32 depth.
    puddle_flags: bool,
    /// CarClass letters by value: FH4/FH5 and FH6 ("Car class").
    classes: Option<&'static [&'static str]>,
}

const FH5_CLASSES: &[&str] = &["D", "C", "B", "A", "S1", "S2", "X"];
const FH6_CLASSES: &[&str] = &["D", "C", "B", "A", "S1", "S2", "R", "X"];

fn shape(f: Format) -> Shape {
    let sled = Shape {
        len: SLED_LEN,
        horizon: None,
        dash: None,
        extras: None,
        tail: None,
        puddle_flags: false,
        classes: None,
    };
    let horizon = Shape {
        len: 324,
        horizon: Some(232),
        dash: Some(244),
        tail: Some(323),
        classes: Some(FH5_CLASSES),
        ..sled
    };
    match f {
        Format::Sled => sled,
        Format::Fm7 => Shape {
            len: 311,
            dash: Some(232),
            ..sled
        },
        Format::Fm2023 => Shape {
            len: 331,
            dash: Some(232),
            extras: Some(311),
            ..sled
        },
        Format::Fh4 | Format::Fh5 => horizon,
        Format::Fh6 => Shape {
            puddle_flags: true,
            classes: Some(FH6_CLASSES),
            ..horizon
        },
    }
}

/// Every format id the oracle knows, by length ("Telling formats apart").
fn by_length(len: usize) -> Option<Format> {
    match len {
        232 => Some(Format::Sled),
        311 => Some(Format::Fm7),
        331 => Some(Format::Fm2023),
        _ => None,
    }
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// What the four puddle words of a 324-byte packet say, read strictly: a word
/// equal to 1 is fh6's flag; a word whose bits are a normal float in (0, 1]
/// is fh4/fh5's depth (a subnormal one, which 1 is, is not); 0 says nothing;
/// and the packet tells only when every other word agrees.
fn told_by_puddles(packet: &[u8]) -> Option<Format> {
    let (mut flags, mut depths) = (0, 0);
    for i in 0..4 {
        let w = word(packet, WHEEL_IN_PUDDLE + 4 * i);
        let depth = f32::from_bits(w);
        if w == 0 {
            continue;
        } else if w == 1 {
            flags += 1;
        } else if depth.is_normal() && depth > 0.0 && depth <= 1.0 {
            depths += 1;
        } else {
            return None;
        }
    }
    match (flags, depths) {
        (0, 0) => None,
        (_, 0) => Some(Format::Fh6),
        (0, _) => Some(Format::Fh5),
        _ => None,
    }
}

/// Packets in a row that must agree before `auto` reads Horizon packets
/// another way (issue 12: "say 30, half a second of real telemetry").
const AGREEING: u32 = 30;

/// How long the stream followed may be silent before another sender's is
/// followed (issue 23).
const FOLLOW_SILENCE: Duration = Duration::from_secs(2);

/// The relay's status query (issue 23): these bytes, from loopback.
const QUERY: &[u8] = b"forza-relay?status/1";

/// `listen.format`, as the relay must read a stream: a fixed format by its
/// length; `auto` by length, and a Horizon packet as its own puddle words
/// tell (issue 23) or, when they tell nothing, as the stream followed has
/// shown them (fh6 until then, a guess), changing only after [`AGREEING`]
/// telling packets of that stream agree; a packet that tells nothing neither
/// counts nor breaks a run.
#[derive(Debug, Clone, Copy)]
struct InputOracle {
    input: Input,
    horizon: Format,
    certain: bool,
    candidate: Format,
    run: u32,
}

impl InputOracle {
    fn new(input: Input) -> Self {
        InputOracle {
            input,
            horizon: Format::Fh6,
            certain: false,
            candidate: Format::Fh6,
            run: 0,
        }
    }

    fn read(&mut self, data: &[u8], follows: bool) -> Option<Reading> {
        let certain = |format| Reading {
            format,
            certain: true,
        };
        match self.input {
            Input::Fixed(f) => (data.len() == shape(f).len).then(|| certain(f)),
            Input::Auto if data.len() == 324 => {
                let told = told_by_puddles(data);
                if let Some(told) = told.filter(|_| follows) {
                    if self.certain && told == self.horizon {
                        self.run = 0;
                    } else {
                        if told == self.candidate {
                            self.run += 1;
                        } else {
                            (self.candidate, self.run) = (told, 1);
                        }
                        if self.run == AGREEING {
                            (self.horizon, self.certain, self.run) = (told, true, 0);
                        }
                    }
                }
                Some(match told {
                    Some(format) => certain(format),
                    None => Reading {
                        format: self.horizon,
                        certain: self.certain,
                    },
                })
            }
            Input::Auto => by_length(data.len()).map(certain),
        }
    }

    fn horizon(&self) -> Option<Reading> {
        (self.input == Input::Auto).then_some(Reading {
            format: self.horizon,
            certain: self.certain,
        })
    }
}

/// CarClass `value` from `from`'s scale to `to`'s, by letter; a letter `to`
/// lacks becomes the next lower class there (FH6's R is FH5's S2). Only
/// between the Horizon scales; a value off the scale passes as it is.
fn map_class(value: i32, from: Shape, to: Shape) -> i32 {
    let (Some(from), Some(to)) = (from.classes, to.classes) else {
        return value;
    };
    let Some(letter) = usize::try_from(value).ok().and_then(|i| from.get(i)) else {
        return value;
    };
    let mut target = *letter;
    loop {
        if let Some(i) = to.iter().position(|l| *l == target) {
            return i as i32;
        }
        let below = from
            .iter()
            .position(|l| *l == target)
            .expect("a letter of from");
        target = from[below - 1];
    }
}

/// `data` (a whole `from` packet) as a `to` packet, by docs/formats.md's
/// "Translation rules": every byte written; Sled copied with the puddle words
/// retyped and CarClass mapped; Horizon block, Dash, FM2023 extras and the
/// tail byte copied when both formats have them, else zero.
fn translation(data: &[u8], from: Format, to: Format) -> Vec<u8> {
    let (f, t) = (shape(from), shape(to));
    let mut out = vec![0u8; t.len];
    out[..SLED_LEN].copy_from_slice(&data[..SLED_LEN]);
    if f.puddle_flags != t.puddle_flags {
        for i in 0..4 {
            let at = WHEEL_IN_PUDDLE + 4 * i;
            let w = word(data, at);
            let retyped = if f.puddle_flags {
                // S32 0/1 → F32 0.0/1.0 (any value but 0 is in water).
                if w != 0 { 1.0f32 } else { 0.0 }.to_bits()
            } else {
                // F32 depth → S32: depth > 0 → 1, else 0 (NaN too).
                u32::from(f32::from_bits(w) > 0.0)
            };
            out[at..at + 4].copy_from_slice(&retyped.to_le_bytes());
        }
    }
    if from.is_horizon() && to.is_horizon() {
        let class = map_class(word(data, CAR_CLASS) as i32, f, t);
        out[CAR_CLASS..CAR_CLASS + 4].copy_from_slice(&class.to_le_bytes());
    }
    for (a, b, len) in [
        (f.horizon, t.horizon, HORIZON_LEN),
        (f.dash, t.dash, DASH_LEN),
        (f.extras, t.extras, EXTRAS_LEN),
        (f.tail, t.tail, 1),
    ] {
        if let (Some(a), Some(b)) = (a, b) {
            out[b..b + len].copy_from_slice(&data[a..a + len]);
        }
    }
    out
}

/// The field of a `format` packet at byte `at`, for a failure message.
fn field_at(format: Format, at: usize) -> String {
    let s = shape(format);
    let inside = |start: Option<usize>, len: usize| start.filter(|&b| at >= b && at < b + len);
    if (WHEEL_IN_PUDDLE..WHEEL_IN_PUDDLE + 16).contains(&at) {
        "WheelInPuddle".to_owned()
    } else if (CAR_CLASS..CAR_CLASS + 4).contains(&at) {
        "CarClass".to_owned()
    } else if at < SLED_LEN {
        format!("Sled byte {at}")
    } else if inside(s.horizon, HORIZON_LEN).is_some() {
        "Horizon block".to_owned()
    } else if let Some(dash) = inside(s.dash, DASH_LEN) {
        match at - dash {
            r if (DASH_SPEED..DASH_SPEED + 4).contains(&r) => "Speed".to_owned(),
            r => format!("Dash +{r}"),
        }
    } else if inside(s.extras, EXTRAS_LEN).is_some() {
        "TireWear / TrackOrdinal".to_owned()
    } else {
        "the tail byte".to_owned()
    }
}

/// What destination `output` must be handed for `data`, read as `reading`;
/// `None`: untranslatable. The relay's rule: a guessed Horizon input is
/// passed as it came to a Horizon destination (issue 3).
fn expected_output(data: &[u8], reading: Option<Reading>, output: Output) -> Option<Vec<u8>> {
    let to = match output {
        Output::Same => return Some(data.to_vec()),
        Output::Format(to) => to,
        Output::Text(_) => unreachable!("the scripts make no text outputs"),
    };
    let reading = reading?;
    if reading.format == to || (!reading.certain && to.is_horizon()) {
        return Some(data.to_vec());
    }
    Some(translation(data, reading.format, to))
}

/// The race filter (`only_race_on`): racing frames, and the first not-racing
/// frame after them; a datagram that is no packet passes.
#[derive(Debug, Default)]
struct RaceOracle {
    racing: bool,
}

impl RaceOracle {
    fn admit(&mut self, race_on: Option<bool>) -> bool {
        match race_on {
            None => true,
            Some(true) => {
                self.racing = true;
                true
            }
            Some(false) => std::mem::replace(&mut self.racing, false),
        }
    }
}

// ---- The script. ----

/// The script's bytes; past the end every read is 0, so any input is a script.
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn is_done(&self) -> bool {
        self.at >= self.data.len()
    }

    /// Up to `n` bytes (fewer at the end).
    fn take(&mut self, n: usize) -> &[u8] {
        let start = self.at.min(self.data.len());
        let end = start.saturating_add(n).min(self.data.len());
        self.at = start + n;
        &self.data[start..end]
    }
}

/// Senders a datagram may come from: loopback, a LAN address (plain and as a
/// dual-stack socket shows it), IPv6 loopback.
fn sender(i: u8) -> SocketAddr {
    let ip: IpAddr = match i % 4 {
        0 => Ipv4Addr::LOCALHOST.into(),
        1 => Ipv4Addr::new(10, 1, 2, 3).into(),
        2 => Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped().into(),
        _ => Ipv6Addr::LOCALHOST.into(),
    };
    SocketAddr::new(ip, 50_000)
}

/// `listen.allow` lists a script picks from.
fn allow(i: u8) -> Vec<IpNet> {
    let nets: &[&str] = match i % 4 {
        0 => &[],
        1 => &["127.0.0.0/8"],
        2 => &["10.0.0.0/8"],
        _ => &["127.0.0.1/32", "::1/128"],
    };
    nets.iter()
        .map(|n| n.parse().expect("a valid net"))
        .collect()
}

/// Whether the oracle lets `from` through `allow`: an IPv4 sender seen through
/// a dual-stack socket is itself.
fn allowed(allow: &[IpNet], from: SocketAddr) -> bool {
    let ip = match from.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    allow.is_empty() || allow.iter().any(|n| n.contains(&ip))
}

/// Routes from the script: input format, allow-list, then for each of
/// [`NAMES`] whether it is there and, if so, its output (`same` or any format)
/// and `max_age` (one byte), `only_race_on`, `max_rate` and one of two ports.
fn routes(b: &mut Bytes) -> Routes {
    let input = match b.u8() as usize % (Format::ALL.len() + 1) {
        0 => Input::Auto,
        i => Input::Fixed(Format::ALL[i - 1]),
    };
    let allow = allow(b.u8());
    let present = b.u8();
    let mut destinations = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        if present & (1 << i) == 0 {
            continue;
        }
        let kind = b.u8();
        let output = match kind as usize % (Format::ALL.len() + 1) {
            0 => Output::Same,
            f => Output::Format(Format::ALL[f - 1]),
        };
        let max_age = AGES[usize::from(kind >> 4) % AGES.len()];
        let flags = b.u8();
        let port = 9_000 + i as u16 + 100 * u16::from(flags >> 7);
        let addr = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port);
        destinations.push(Destination {
            name: (*name).to_owned(),
            addr_text: addr.to_string(),
            target: Target::Udp(addr),
            output,
            fields: None,
            only_race_on: flags & 1 == 1,
            max_rate: RATES[usize::from(flags >> 1) % RATES.len()],
            max_age,
            hold: None,
            records: Default::default(),
        });
    }
    Routes {
        input,
        allow,
        destinations,
    }
}

/// A datagram from the script: mostly a Forza length (or one byte off), else
/// any length up to [`MAX_SCRIPT_DATAGRAM`]; bytes from the script, with
/// IsRaceOn and the puddle words often set to what detection looks at.
/// Returns how long before it is handled it was received, in [`LAG`]s (the
/// top bits of the byte that shapes it).
fn datagram(b: &mut Bytes, buf: &mut Vec<u8>) -> u32 {
    const LENGTHS: [usize; 4] = [232, 311, 331, 324];
    let kind = b.u8();
    let len = LENGTHS[usize::from(kind >> 3) % LENGTHS.len()];
    let len = match kind % 8 {
        0..=4 => len,
        5 => len - 1,
        6 => len + 1,
        _ => usize::from(b.u16()) % (MAX_SCRIPT_DATAGRAM + 1),
    };
    let fill = b.u8();
    buf.clear();
    buf.extend_from_slice(b.take(len));
    buf.resize(len, fill);
    let shape = b.u8();
    let lag = u32::from(shape >> 3);
    if let Some(race) = buf.get_mut(IS_RACE_ON..IS_RACE_ON + 4) {
        race.copy_from_slice(&i32::from(shape & 1).to_le_bytes());
    }
    if let Some(puddles) = buf.get_mut(WHEEL_IN_PUDDLE..WHEEL_IN_PUDDLE + 16) {
        let word: u32 = match (shape >> 1) % 4 {
            0 => return lag,
            1 => 0,
            2 => 1,
            _ => 0.5f32.to_bits(),
        };
        puddles[..4].copy_from_slice(&word.to_le_bytes());
        puddles[4..].fill(0);
    }
    lag
}

/// IsRaceOn of a packet of `reading`'s format: every format starts with the
/// Sled block, so it is the first word.
fn race_on(data: &[u8], reading: Option<Reading>) -> Option<bool> {
    reading.map(|_| word(data, IS_RACE_ON) != 0)
}

/// One delivery the sink was handed, and what it answered.
struct Delivery {
    id: DestinationId,
    bytes: Vec<u8>,
    /// The receive time the core handed over with it.
    received: Instant,
    outcome: Fate,
}

/// Records every delivery and answers as a shell would: every `fail_every`-th
/// send fails (a send error, the frame dropped), every `queue_every`-th would
/// block (the frame queued); the rest are sent.
struct Recorder {
    got: Vec<Delivery>,
    fail_every: u8,
    queue_every: u8,
    count: u64,
}

impl Sink for Recorder {
    fn deliver(
        &mut self,
        id: DestinationId,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Fate {
        self.count += 1;
        let nth = |every: u8| every > 0 && self.count.is_multiple_of(u64::from(every));
        let outcome = if nth(self.fail_every) {
            report.send_error(SendErrorKind::Other, received);
            Fate::Dropped(DropReason::SendError)
        } else if nth(self.queue_every) {
            Fate::Queued
        } else {
            Fate::Sent
        };
        self.got.push(Delivery {
            id,
            bytes: bytes.to_vec(),
            received,
            outcome,
        });
        outcome
    }
}

/// What one destination must have seen and counted.
struct Model {
    config: Destination,
    race: RaceOracle,
    /// The frame waiting for its rate slot, as it must be delivered, and its
    /// receive time.
    pending: Option<(Vec<u8>, Instant)>,
    /// When the pending frame came (the core's `now`, not its receive time).
    pending_at: Option<Instant>,
    /// The receive times of the frames the shell holds for it, oldest first.
    queued: VecDeque<Instant>,
    stats: DestinationStats,
    /// The first delivery since its limiter started, deliveries since, and
    /// the last.
    rate: Option<(Instant, u32, Instant)>,
}

impl Model {
    fn new(config: Destination) -> Model {
        Model {
            config,
            race: RaceOracle::default(),
            pending: None,
            pending_at: None,
            queued: VecDeque::new(),
            stats: DestinationStats::default(),
            rate: None,
        }
    }

    /// The pending frame is dropped: superseded, or forgotten.
    fn forget_pending(&mut self) {
        if self.pending.take().is_some() {
            self.stats.drop(DropReason::RateLimited);
        }
    }

    /// The shell drops what it holds.
    fn drop_queued(&mut self) {
        self.stats.dropped[DropReason::Backlog as usize] += self.queued.len() as u64;
        self.queued.clear();
    }

    /// True when a frame received at `received` is too old to send at `now`.
    fn is_stale(&self, received: Instant, now: Instant) -> bool {
        self.config
            .max_age
            .is_some_and(|max| now.saturating_duration_since(received) > max)
    }

    /// Counts one frame's outcome (a frame received at `received`).
    fn outcome(&mut self, outcome: Fate, received: Instant) {
        match outcome {
            Fate::Sent => self.stats.sent += 1,
            Fate::Queued => self.queued.push_back(received),
            Fate::Dropped(reason) => self.stats.drop(reason),
        }
    }

    /// Counts a delivery at `now`, checking the `max_rate` spacing.
    fn delivered(&mut self, d: &Delivery, now: Instant) {
        if d.outcome == Fate::Dropped(DropReason::SendError) {
            self.stats.send_errors.add(SendErrorKind::Other);
        }
        assert!(
            !self.is_stale(d.received, now),
            "{}: handed a frame {:?} old, max_age {:?}",
            self.config.name,
            now - d.received,
            self.config.max_age
        );
        self.outcome(d.outcome, d.received);
        if self.config.max_rate == 0 {
            return;
        }
        let interval = Duration::from_secs(1) / self.config.max_rate;
        match &mut self.rate {
            None => self.rate = Some((now, 1, now)),
            Some((first, k, last)) => {
                assert!(
                    now + interval >= *first + interval * *k,
                    "{}: delivery {k} at {:?} after the first, max_rate {}",
                    self.config.name,
                    now - *first,
                    self.config.max_rate
                );
                *k += 1;
                *last = now;
            }
        }
    }

    /// Whether the core may hold a frame that comes at `now` instead of
    /// delivering it: only within an interval of the last delivery.
    fn may_hold(&self, now: Instant) -> bool {
        if self.config.max_rate == 0 {
            return false;
        }
        let interval = Duration::from_secs(1) / self.config.max_rate;
        self.rate.is_some_and(|(_, _, last)| now < last + interval)
    }

    /// When its pending frame goes if nothing newer goes first.
    fn pending_deadline(&self) -> Option<Instant> {
        let at = self.pending.as_ref().and(self.pending_at)?;
        Some(match self.config.max_rate {
            // No limit, or a new one that sent nothing yet: at once.
            0 => at,
            _ if self.rate.is_none() => at,
            rate => {
                let interval = Duration::from_secs(1) / rate;
                at + interval + interval / 2
            }
        })
    }

    /// Its counters, `held` included.
    fn counters(&self) -> DestinationStats {
        DestinationStats {
            held: self.queued.len() as u64 + u64::from(self.pending.is_some()),
            ..self.stats
        }
    }
}

/// The oracle of the core's input side.
struct InputModel {
    reader: InputOracle,
    allow: Vec<IpNet>,
    received: u64,
    bytes: u64,
    malformed: u64,
    disallowed: u64,
    /// Every sender let in, in the order first heard, with its datagrams and
    /// when it was last heard (the scripts never have more than the core's
    /// table holds).
    senders: Vec<(SocketAddr, u64, Instant)>,
    /// The sender whose stream is followed.
    followed: Option<SocketAddr>,
    /// Status queries.
    queries: u64,
}

impl InputModel {
    /// Whether a datagram from `from` at `now` is of the stream followed:
    /// the first sender's, or another's once the one followed has been
    /// silent for [`FOLLOW_SILENCE`], which then is followed.
    fn follow(&mut self, from: SocketAddr, now: Instant) -> bool {
        if self.followed != Some(from) {
            let silent = match self.followed {
                None => true,
                Some(f) => self
                    .senders
                    .iter()
                    .find(|(a, _, _)| *a == f)
                    .is_none_or(|(_, _, last)| now.duration_since(*last) >= FOLLOW_SILENCE),
            };
            if silent {
                self.followed = Some(from);
            }
        }
        match self.senders.iter_mut().find(|(a, _, _)| *a == from) {
            Some(s) => (s.1, s.2) = (s.1 + 1, now),
            None => self.senders.push((from, 1, now)),
        }
        self.followed == Some(from)
    }
}

/// `from` as the relay names it: an IPv4 sender seen through a dual-stack
/// socket is itself.
fn canonical(from: SocketAddr) -> SocketAddr {
    let ip = match from.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    SocketAddr::new(ip, from.port())
}

/// The figures of one run, for a property test to say what it covered.
#[derive(Debug, Default, Clone, Copy)]
pub struct Covered {
    /// Datagrams handled.
    pub datagrams: u64,
    /// Deliveries the sink was handed.
    pub deliveries: u64,
    /// Frames delivered by `due`.
    pub due_deliveries: u64,
    /// Frames the shell queued, then sent or dropped.
    pub flushed: u64,
    /// Reloads applied.
    pub applies: u64,
    /// Frames dropped, any reason, over every destination.
    pub dropped: u64,
    /// Frames dropped stale (`max_age`), over the destinations left at the end.
    pub stale: u64,
    /// Pending frames `due` dropped stale.
    pub due_stale: u64,
    /// Times `auto` changed how it reads Horizon packets.
    pub horizon_changes: u64,
    /// Times another sender's stream became the one followed.
    pub follow_changes: u64,
}

/// The whole oracle: input side and destinations.
struct Oracle {
    input: InputModel,
    models: BTreeMap<String, Model>,
    /// Each destination's id, as the core named it.
    ids: Vec<(DestinationId, String)>,
}

/// Runs the script in `data`; panics (with what went wrong) on any broken
/// invariant. See the module documentation.
pub fn run(data: &[u8]) -> Covered {
    let mut b = Bytes { data, at: 0 };
    let first = routes(&mut b);
    let mut sink = Recorder {
        got: Vec::new(),
        fail_every: b.u8() % 8,
        queue_every: b.u8() % 6,
        count: 0,
    };
    let mut core = Fanout::new(&first);
    let mut oracle = Oracle {
        input: InputModel {
            reader: InputOracle::new(first.input),
            allow: first.allow.clone(),
            received: 0,
            bytes: 0,
            malformed: 0,
            disallowed: 0,
            senders: Vec::new(),
            followed: None,
            queries: 0,
        },
        models: first
            .destinations
            .iter()
            .map(|d| (d.name.clone(), Model::new(d.clone())))
            .collect(),
        ids: ids_by_name(&core),
    };
    let mut order = names_of(&first);
    let mut covered = Covered::default();
    let mut now = Instant::now();
    let mut buf = Vec::with_capacity(MAX_SCRIPT_DATAGRAM);
    let mut steps = 0;
    while !b.is_done() && steps < 10_000 {
        steps += 1;
        let op = b.u8();
        now += STEP * u32::from(b.u8());
        match op % 9 {
            0..=4 => {
                let lag = LAG * datagram(&mut b, &mut buf);
                let received = now.checked_sub(lag).unwrap_or(now);
                let from = sender(op >> 4);
                let horizon = oracle.input.reader.horizon();
                let followed = oracle.input.followed;
                let arrival = Arrival::new(&buf, from, received, SystemTime::UNIX_EPOCH);
                let verdict = core.handle(arrival, now, &mut sink);
                covered.datagrams += 1;
                oracle.check_handle(&buf, from, (received, now), verdict, &mut sink);
                if oracle.input.reader.horizon() != horizon {
                    covered.horizon_changes += 1;
                }
                if followed.is_some() && oracle.input.followed != followed {
                    covered.follow_changes += 1;
                }
                assert_eq!(
                    core.horizon(),
                    oracle.input.reader.horizon(),
                    "how auto reads Horizon packets"
                );
            }
            5 => {
                let deadline = core.next_deadline();
                core.due(now, &mut sink);
                let due = deadline.is_some_and(|d| d <= now);
                let on_time = sink.got.len() as u64;
                covered.due_deliveries += on_time;
                for d in sink.got.drain(..) {
                    let name = name_of(&oracle.ids, d.id).to_owned();
                    let m = oracle
                        .models
                        .get_mut(&name)
                        .expect("a modelled destination");
                    let pending = m.pending.take();
                    assert_eq!(
                        Some((&d.bytes, d.received)),
                        pending.as_ref().map(|(bytes, at)| (bytes, *at)),
                        "{name}: due delivered a frame that was not its pending one"
                    );
                    m.delivered(&d, now);
                }
                // A pending frame the core no longer holds and did not hand
                // over was due and too old: dropped stale, its slot free.
                let counters = core.counters();
                let mut stale = 0u64;
                for c in &counters.destinations {
                    let m = oracle
                        .models
                        .get_mut(&c.name)
                        .expect("a modelled destination");
                    let Some((_, received)) = m.pending else {
                        continue;
                    };
                    if c.stats.held == m.queued.len() as u64 {
                        assert!(
                            m.is_stale(received, now),
                            "{}: due dropped a pending frame {:?} old, max_age {:?}",
                            c.name,
                            now - received,
                            m.config.max_age
                        );
                        m.pending = None;
                        m.stats.drop(DropReason::Stale);
                        stale += 1;
                    }
                }
                covered.due_stale += stale;
                assert_eq!(
                    on_time + stale > 0,
                    due,
                    "due(now) delivered {on_time} frames and dropped {stale} stale; \
                     next_deadline was {:?} from now",
                    deadline.map(|d| d.checked_duration_since(now))
                );
            }
            6 => {
                // A socket became writable (or failed): the shell says what
                // became of up to three of the frames it held for one
                // destination. Always four bytes, so a script keeps its shape.
                let which = usize::from(b.u8());
                let n = u64::from(b.u8() % 4);
                let fates = [b.u8(), b.u8(), b.u8()];
                let Some((id, name)) = oracle.ids.get(which % oracle.ids.len().max(1)) else {
                    continue;
                };
                let m = oracle.models.get_mut(name).expect("a modelled destination");
                let mut report = core.report(*id).expect("a live destination");
                for fate in fates.into_iter().take(n as usize) {
                    let Some(&received) = m.queued.front() else {
                        break;
                    };
                    let outcome = match fate % 4 {
                        0 => Fate::Dropped(DropReason::SendError),
                        1 => Fate::Dropped(DropReason::Backlog),
                        2 => Fate::Sent,
                        _ => {
                            // The shell asks before it sends (issue 15).
                            let stale = m.is_stale(received, now);
                            assert_eq!(
                                report.drop_if_stale(received, now),
                                stale,
                                "{name}: drop_if_stale for a frame {:?} old, max_age {:?}",
                                now - received,
                                m.config.max_age
                            );
                            if !stale {
                                continue;
                            }
                            m.queued.pop_front();
                            m.stats.drop(DropReason::Stale);
                            covered.flushed += 1;
                            continue;
                        }
                    };
                    report.held(outcome);
                    m.queued.pop_front();
                    m.outcome(outcome, received);
                    covered.flushed += 1;
                }
            }
            _ => {
                let next = routes(&mut b);
                let plan = core.plan(&next);
                oracle.check_plan(&next, &plan);
                let changes = core.commit(plan);
                covered.applies += 1;
                oracle.check_commit(&next, &changes);
                oracle.ids = ids_by_name(&core);
                order = names_of(&next);
            }
        }
        oracle.check_counters(&core);
        check_deadline(&core, &oracle.models);
    }
    core.finish();
    for m in oracle.models.values_mut() {
        m.forget_pending();
        m.drop_queued();
    }
    check_deadline(&core, &oracle.models);
    let counters = oracle.check_counters(&core);
    let names: Vec<&str> = counters
        .destinations
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(
        names, order,
        "the snapshot's destinations, in configuration order"
    );
    for d in &counters.destinations {
        assert_eq!(d.stats.held, 0, "{}: held after finish", d.name);
        covered.dropped += d.stats.dropped_total();
        covered.stale += d.stats.dropped(DropReason::Stale);
    }
    covered.deliveries = sink.count;
    covered
}

/// Fails unless sent + dropped by reason + held is every datagram the
/// destination received.
#[track_caller]
fn assert_counts_add_up(name: &str, s: &DestinationStats) {
    assert_eq!(
        s.sent + s.dropped_total() + s.held,
        s.received,
        "{name}: sent {} + dropped {:?} + held {} is not the {} datagrams it received",
        s.sent,
        s.dropped,
        s.held,
        s.received
    );
}

fn names_of(routes: &Routes) -> Vec<String> {
    routes.destinations.iter().map(|d| d.name.clone()).collect()
}

fn ids_by_name(core: &Fanout) -> Vec<(DestinationId, String)> {
    core.destinations()
        .map(|(id, d)| (id, d.name.clone()))
        .collect()
}

fn name_of(ids: &[(DestinationId, String)], id: DestinationId) -> &str {
    ids.iter()
        .find(|(i, _)| *i == id)
        .map(|(_, n)| n.as_str())
        .unwrap_or_else(|| panic!("a delivery to {id:?}, which is no destination"))
}

/// Fails, naming the first differing field, unless `got` is `want`.
#[track_caller]
fn assert_same_packet(name: &str, output: Output, got: &[u8], want: &[u8], data: &[u8]) {
    if got == want {
        return;
    }
    let (to, what) = match output {
        Output::Same => (None, "same: not byte for byte".to_owned()),
        Output::Format(to) => (Some(to), format!("{to}: not the translation")),
        Output::Text(_) => (None, "text: not the text".to_owned()),
    };
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let field = to.map_or_else(|| format!("byte {at}"), |to| field_at(to, at));
    panic!(
        "{name}: {what} of the {}-byte datagram: {} bytes where {} were due; first \
         difference at {field} (byte {at})",
        data.len(),
        got.len(),
        want.len()
    );
}

impl Oracle {
    fn check_handle(
        &mut self,
        data: &[u8],
        from: SocketAddr,
        (received, now): (Instant, Instant),
        verdict: Verdict,
        sink: &mut Recorder,
    ) {
        let input = &mut self.input;
        let from = canonical(from);
        if data == QUERY && from.ip().is_loopback() {
            input.queries += 1;
            assert_eq!(verdict, Verdict::Query, "the status query from {from}");
            assert!(sink.got.is_empty(), "the status query was delivered");
            return;
        }
        input.received += 1;
        input.bytes += data.len() as u64;
        if !allowed(&input.allow, from) {
            input.disallowed += 1;
            assert_eq!(verdict, Verdict::Disallowed, "a datagram from {from}");
            assert!(
                sink.got.is_empty(),
                "a datagram from {from}, outside listen.allow, was delivered"
            );
            return;
        }
        let follows = input.follow(from, now);
        let reading = input.reader.read(data, follows);
        assert_eq!(
            verdict,
            Verdict::Admitted(reading),
            "the verdict on a {}-byte datagram",
            data.len()
        );
        if reading.is_none() {
            input.malformed += 1;
        }
        let race_on = race_on(data, reading);
        let mut got: Vec<Delivery> = sink.got.drain(..).collect();
        for (id, name) in &self.ids {
            let m = self.models.get_mut(name).expect("a modelled destination");
            m.stats.received += 1;
            let mut mine = got.iter().filter(|d| d.id == *id);
            let delivery = mine.next();
            assert!(
                mine.next().is_none(),
                "{name}: two deliveries of one datagram"
            );
            if m.config.only_race_on && !m.race.admit(race_on) {
                assert!(delivery.is_none(), "{name}: delivered a not-racing frame");
                m.stats.drop(DropReason::NotRacing);
                continue;
            }
            let Some(expected) = expected_output(data, reading, m.config.output) else {
                assert!(
                    delivery.is_none(),
                    "{name}: delivered an untranslatable datagram"
                );
                m.stats.drop(DropReason::Untranslatable);
                continue;
            };
            if m.is_stale(received, now) {
                // Dropped before the rate limit: the pending frame stays.
                assert!(delivery.is_none(), "{name}: delivered a stale frame");
                m.stats.drop(DropReason::Stale);
                continue;
            }
            m.forget_pending();
            assert!(
                delivery.is_some() || m.may_hold(now),
                "{name}: held a frame that came {:?} after its last delivery, max_rate {}",
                m.rate.map(|(_, _, last)| now - last),
                m.config.max_rate
            );
            match delivery {
                Some(d) => {
                    assert_same_packet(name, m.config.output, &d.bytes, &expected, data);
                    assert_eq!(d.received, received, "{name}: the frame's receive time");
                    m.delivered(d, now);
                }
                None if expected.len() <= FRAME_CAPACITY => {
                    m.pending = Some((expected, received));
                    m.pending_at = Some(now);
                }
                None => m.stats.drop(DropReason::RateLimited),
            }
        }
        got.retain(|d| !self.ids.iter().any(|(id, _)| *id == d.id));
        assert!(
            got.is_empty(),
            "deliveries to destinations that don't exist"
        );
    }

    /// The plan for `next`: by name, an unchanged address keeps its socket
    /// (dropping what the shell holds when the output changes), a new address
    /// opens one, a new name gets an id nobody keeps, and names gone close.
    fn check_plan(&self, next: &Routes, plan: &forza_relay::fanout::Plan) {
        let mut kept_ids = Vec::new();
        let mut new_ids = Vec::new();
        for (d, step) in plan.steps() {
            match self.models.get(&d.name) {
                Some(m) => {
                    let id = self
                        .ids
                        .iter()
                        .find(|(_, n)| *n == d.name)
                        .map(|(id, _)| *id)
                        .expect("a live destination");
                    assert_eq!(step.id, id, "{}: keeps its id", d.name);
                    let want = if m.config.target != d.target {
                        Action::Open
                    } else {
                        Action::Keep {
                            discard_backlog: m.config.output != d.output,
                            reset_limiter: m.config.max_rate != d.max_rate,
                        }
                    };
                    assert_eq!(step.action, want, "{}: the plan", d.name);
                    kept_ids.push(id);
                }
                None => {
                    assert_eq!(step.action, Action::Open, "{}: new", d.name);
                    new_ids.push(step.id);
                }
            }
        }
        for id in &new_ids {
            assert!(!kept_ids.contains(id), "a new destination got a kept id");
        }
        new_ids.sort_unstable();
        new_ids.dedup();
        assert_eq!(
            new_ids.len() + kept_ids.len(),
            next.destinations.len(),
            "every destination has an id of its own"
        );
        let mut closed: Vec<&str> = plan
            .closed()
            .iter()
            .map(|id| name_of(&self.ids, *id))
            .collect();
        closed.sort_unstable();
        let gone: Vec<&str> = self
            .models
            .keys()
            .filter(|n| !next.destinations.iter().any(|d| d.name == **n))
            .map(String::as_str)
            .collect();
        assert_eq!(closed, gone, "plan: closed");
    }

    fn check_commit(&mut self, next: &Routes, changes: &Changes) {
        if next.input != self.input.reader.input {
            self.input.reader = InputOracle::new(next.input);
        }
        self.input.allow = next.allow.clone();
        let mut removed = Vec::new();
        let mut changed = Vec::new();
        for (name, m) in self.models.iter_mut() {
            let Some(d) = next.destinations.iter().find(|d| d.name == *name) else {
                removed.push(name.clone());
                continue;
            };
            if *d == m.config {
                continue;
            }
            changed.push(name.clone());
            if d.output != m.config.output || d.target != m.config.target {
                m.forget_pending();
                m.drop_queued();
            }
            if d.max_rate != m.config.max_rate {
                m.rate = None;
            }
            if d.only_race_on != m.config.only_race_on {
                m.race = RaceOracle::default();
            }
            m.config = d.clone();
        }
        let added: Vec<String> = next
            .destinations
            .iter()
            .filter(|d| !self.models.contains_key(&d.name))
            .map(|d| d.name.clone())
            .collect();
        let mut reported: Vec<String> = changes.added.iter().map(|(_, d)| d.name.clone()).collect();
        reported.sort_unstable();
        let mut want = added.clone();
        want.sort_unstable();
        assert_eq!(reported, want, "commit: added");
        let mut reported: Vec<String> = changes
            .changed
            .iter()
            .map(|c| c.after.name.clone())
            .collect();
        reported.sort_unstable();
        assert_eq!(reported, changed, "commit: changed");
        let mut reported: Vec<&str> = changes
            .removed
            .iter()
            .map(|r| r.destination.name.as_str())
            .collect();
        reported.sort_unstable();
        assert_eq!(reported, removed, "commit: removed");
        for r in &changes.removed {
            let mut m = self
                .models
                .remove(&r.destination.name)
                .expect("a modelled destination");
            m.forget_pending();
            m.drop_queued();
            assert_eq!(
                r.stats,
                m.counters(),
                "{}: final counters",
                r.destination.name
            );
            assert_counts_add_up(&r.destination.name, &r.stats);
        }
        for name in added {
            let d = next
                .destinations
                .iter()
                .find(|d| d.name == name)
                .expect("listed above");
            self.models.insert(name, Model::new(d.clone()));
        }
    }

    /// The core's counters are the oracle's, and add up.
    #[track_caller]
    fn check_counters(&self, core: &Fanout) -> forza_relay::report::Counters {
        let c = core.counters();
        let i = &self.input;
        assert_eq!(
            (
                c.input.received,
                c.input.bytes,
                c.input.malformed,
                c.input.disallowed,
                c.input.recv_errors
            ),
            (i.received, i.bytes, i.malformed, i.disallowed, 0),
            "input counters (received, bytes, malformed, disallowed, recv_errors)"
        );
        let senders: Vec<(SocketAddr, u64)> = c
            .input
            .senders
            .list()
            .iter()
            .map(|s| (s.addr, s.datagrams))
            .collect();
        let want: Vec<(SocketAddr, u64)> = i.senders.iter().map(|(a, n, _)| (*a, *n)).collect();
        assert_eq!(senders, want, "the senders and their datagrams");
        assert_eq!(
            c.input.senders.followed().map(|s| s.addr),
            i.followed,
            "the sender followed"
        );
        assert_eq!(core.queries(), i.queries, "status queries");
        for d in &c.destinations {
            let m = &self.models[&d.name];
            assert_eq!(d.stats, m.counters(), "{}: counters", d.name);
            assert_counts_add_up(&d.name, &d.stats);
            assert_eq!(
                core.queued(name_to_id(&self.ids, &d.name)),
                m.queued.len() as u64,
                "{}: frames the shell holds",
                d.name
            );
        }
        c
    }
}

fn name_to_id(ids: &[(DestinationId, String)], name: &str) -> DestinationId {
    ids.iter()
        .find(|(_, n)| n == name)
        .map(|(id, _)| *id)
        .expect("a live destination")
}

/// `next_deadline` is `Some` exactly when a frame is pending somewhere, and
/// then the earliest pending frame's (issue 30: one and a half intervals
/// after it came).
#[track_caller]
fn check_deadline(core: &Fanout, models: &BTreeMap<String, Model>) {
    let waiting: Vec<&str> = models
        .iter()
        .filter(|(_, m)| m.pending.is_some())
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        core.next_deadline().is_some(),
        !waiting.is_empty(),
        "next_deadline() is {:?} while frames wait for {waiting:?}",
        core.next_deadline()
    );
    let earliest = models.values().filter_map(Model::pending_deadline).min();
    assert_eq!(
        core.next_deadline(),
        earliest,
        "next_deadline() while frames wait for {waiting:?}"
    );
}

#[cfg(test)]
mod oracle_tests {
    use super::*;

    #[test]
    fn the_oracle_maps_classes_by_letter() {
        let (fh5, fh6) = (shape(Format::Fh5), shape(Format::Fh6));
        assert_eq!(map_class(6, fh6, fh5), 5, "R becomes S2");
        assert_eq!(map_class(7, fh6, fh5), 6, "X");
        assert_eq!(map_class(6, fh5, fh6), 7, "X");
        assert_eq!(map_class(99, fh5, fh6), 99, "off the scale");
    }
}
