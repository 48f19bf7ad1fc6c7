//! Hostile input for the whole fan-out core (issue 9): a script decoded from
//! arbitrary bytes (a config, then datagrams at advancing times, timer ticks and
//! reloads with other configs) run through [`Fanout`] beside a model of what it
//! must do, with a sink that records what it is handed.
//!
//! Shared by the cargo-fuzz target `fanout` (fuzz/fuzz_targets/fanout.rs, which
//! includes this file by path) and the stable property test
//! tests/fanout_props.rs, so CI runs the same checks over random scripts.
//!
//! What [`run`] asserts, besides "never panics":
//! - `handle` hands each destination at most the current datagram: `same` gets
//!   it byte for byte; a translating destination gets exactly `to.len()` bytes
//!   that read as a `to` packet and decode, equal to a fresh `translate` of the
//!   datagram from its format (fixed, or as a `Detector` fed the same stream sees
//!   it; a guessed Horizon input passes as it came to a Horizon destination);
//!   nothing reaches any destination from a sender outside `listen.allow`;
//! - a frame that is not delivered at once and fits [`FRAME_CAPACITY`] is the
//!   destination's pending frame, and `due` hands over exactly that frame;
//! - `next_deadline` is `Some` exactly when some frame is pending, and `due(now)`
//!   delivers something exactly when that deadline has come;
//! - a `max_rate` destination's k-th delivery since its limiter started comes no
//!   sooner than k intervals after the first;
//! - `apply` reports exactly the names added, changed and removed, and a removed
//!   destination's final counters are the model's;
//! - at the end (after `finish`), `snapshot` has the model's input counters and,
//!   per destination, exactly the model's counters, which add up: sent + dropped
//!   by reason = datagrams it saw.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use forza_relay::config::{Config, Destination, Input, Output, StatsFormat};
use forza_relay::fanout::{DestinationId, Fanout, Sink, FRAME_CAPACITY};
use forza_relay::filter::RaceFilter;
use forza_relay::stats::{DestinationStats, DropReason, SendErrorKind};
use forza_relay::telemetry::Telemetry;
use forza_relay::translate::translate;
use forza_relay::wire::{field, Detector, Format, Packet, MAX_LEN};
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

/// A config from the script: input format, allow-list, then for each of
/// [`NAMES`] whether it is there and, if so, its output (`same` or any format),
/// `only_race_on`, `max_rate` and one of two ports.
fn config(b: &mut Bytes) -> Config {
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
        let output = match b.u8() as usize % (Format::ALL.len() + 1) {
            0 => Output::Same,
            f => Output::Format(Format::ALL[f - 1]),
        };
        let flags = b.u8();
        let port = 9_000 + i as u16 + 100 * u16::from(flags >> 7);
        let addr = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port);
        destinations.push(Destination {
            name: (*name).to_owned(),
            addr_text: addr.to_string(),
            addr,
            output,
            only_race_on: flags & 1 == 1,
            max_rate: RATES[usize::from(flags >> 1) % RATES.len()],
        });
    }
    Config {
        origin: "script".to_owned(),
        listen: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 5_400),
        listen_place: "script".to_owned(),
        input,
        allow,
        stats_interval: None,
        stats_format: StatsFormat::Text,
        destinations,
        record: None,
    }
}

/// A datagram from the script: mostly a Forza length (or one byte off), else
/// any length up to [`MAX_SCRIPT_DATAGRAM`]; bytes from the script, with
/// IsRaceOn and the puddle words often set to what detection looks at.
fn datagram(b: &mut Bytes, buf: &mut Vec<u8>) {
    let kind = b.u8();
    let format = Format::ALL[usize::from(kind >> 3) % Format::ALL.len()];
    let len = match kind % 8 {
        0..=4 => format.len(),
        5 => format.len() - 1,
        6 => format.len() + 1,
        _ => usize::from(b.u16()) % (MAX_SCRIPT_DATAGRAM + 1),
    };
    let fill = b.u8();
    buf.clear();
    buf.extend_from_slice(b.take(len));
    buf.resize(len, fill);
    let shape = b.u8();
    if let Some(race) = buf.get_mut(field::IS_RACE_ON.offset..field::IS_RACE_ON.offset + 4) {
        race.copy_from_slice(&i32::from(shape & 1).to_le_bytes());
    }
    let at = field::WHEEL_IN_PUDDLE.offset;
    if let Some(puddles) = buf.get_mut(at..at + 16) {
        let word: u32 = match (shape >> 1) % 4 {
            0 => return,
            1 => 0,
            2 => 1,
            _ => 0.5f32.to_bits(),
        };
        puddles[..4].copy_from_slice(&word.to_le_bytes());
        puddles[4..].fill(0);
    }
}

/// One delivery the sink was handed.
struct Delivery {
    id: DestinationId,
    bytes: Vec<u8>,
    /// The sink counted it sent (else a failed send).
    sent: bool,
}

/// Records every delivery and counts it: sent, or (every `fail_every`-th) a
/// failed send, as a shell meeting a closed port would.
struct Recorder {
    got: Vec<Delivery>,
    fail_every: u8,
    /// Deliveries since the last failed one.
    since_failure: u8,
    count: u64,
}

impl Sink for Recorder {
    fn deliver(&mut self, id: DestinationId, bytes: &[u8], stats: &mut DestinationStats) {
        self.count += 1;
        let sent = if self.fail_every == 0 {
            true
        } else {
            self.since_failure += 1;
            self.since_failure < self.fail_every
        };
        if !sent {
            self.since_failure = 0;
        }
        if sent {
            stats.sent += 1;
        } else {
            stats.send_errors.add(SendErrorKind::Other);
            stats.drop(DropReason::SendError);
        }
        self.got.push(Delivery {
            id,
            bytes: bytes.to_vec(),
            sent,
        });
    }
}

/// What one destination must have seen and counted.
struct Model {
    config: Destination,
    race: RaceFilter,
    /// The frame waiting for its rate slot, as it must be delivered.
    pending: Option<Vec<u8>>,
    stats: DestinationStats,
    /// Datagrams it saw (from allowed senders, while it existed).
    seen: u64,
    /// The first delivery since its limiter started, and deliveries since.
    rate: Option<(Instant, u32)>,
}

impl Model {
    fn new(config: Destination) -> Model {
        Model {
            config,
            race: RaceFilter::default(),
            pending: None,
            stats: DestinationStats::default(),
            seen: 0,
            rate: None,
        }
    }

    /// The pending frame is dropped: superseded, or forgotten.
    fn forget_pending(&mut self) {
        if self.pending.take().is_some() {
            self.stats.drop(DropReason::RateLimited);
        }
    }

    /// Counts a delivery at `now`, checking the `max_rate` spacing.
    fn delivered(&mut self, d: &Delivery, now: Instant) {
        if d.sent {
            self.stats.sent += 1;
        } else {
            self.stats.send_errors.add(SendErrorKind::Other);
            self.stats.drop(DropReason::SendError);
        }
        if self.config.max_rate == 0 {
            return;
        }
        let interval = Duration::from_secs(1) / self.config.max_rate;
        match &mut self.rate {
            None => self.rate = Some((now, 1)),
            Some((first, k)) => {
                assert!(
                    now >= *first + interval * *k,
                    "{}: delivery {k} at {:?} after the first, max_rate {}",
                    self.config.name,
                    now - *first,
                    self.config.max_rate
                );
                *k += 1;
            }
        }
    }
}

/// The model of the core's input side.
struct InputModel {
    input: Input,
    allow: Vec<IpNet>,
    detector: Detector,
    received: u64,
    bytes: u64,
    malformed: u64,
    disallowed: u64,
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
    /// Reloads applied.
    pub applies: u64,
    /// Frames dropped, any reason, over every destination.
    pub dropped: u64,
}

/// Runs the script in `data`; panics (with what went wrong) on any broken
/// invariant. See the module documentation.
pub fn run(data: &[u8]) -> Covered {
    let mut b = Bytes { data, at: 0 };
    let first = config(&mut b);
    let mut sink = Recorder {
        got: Vec::new(),
        fail_every: b.u8() % 8,
        since_failure: 0,
        count: 0,
    };
    let mut core = Fanout::new(&first);
    let mut input = InputModel {
        input: first.input,
        allow: first.allow.clone(),
        detector: Detector::default(),
        received: 0,
        bytes: 0,
        malformed: 0,
        disallowed: 0,
    };
    let mut models: BTreeMap<String, Model> = first
        .destinations
        .iter()
        .map(|d| (d.name.clone(), Model::new(d.clone())))
        .collect();
    let mut ids = ids_by_name(&core);
    let mut order = names_of(&first);
    let mut covered = Covered::default();
    let mut now = Instant::now();
    let mut buf = Vec::with_capacity(MAX_SCRIPT_DATAGRAM);
    let mut steps = 0;
    while !b.is_done() && steps < 10_000 {
        steps += 1;
        let op = b.u8();
        now += STEP * u32::from(b.u8());
        match op % 8 {
            0..=4 => {
                datagram(&mut b, &mut buf);
                let from = sender(op >> 3);
                core.handle(&buf, from, now, &mut sink);
                covered.datagrams += 1;
                check_handle(&buf, from, now, &mut input, &mut models, &ids, &mut sink);
            }
            5 | 6 => {
                let deadline = core.next_deadline();
                core.due(now, &mut sink);
                let due = deadline.is_some_and(|d| d <= now);
                let on_time = sink.got.len();
                assert_eq!(
                    on_time > 0,
                    due,
                    "due(now) delivered {on_time} frames; next_deadline was {:?} from now",
                    deadline.map(|d| d.checked_duration_since(now))
                );
                covered.due_deliveries += sink.got.len() as u64;
                for d in sink.got.drain(..) {
                    let name = name_of(&ids, d.id);
                    let m = models.get_mut(name).expect("a modelled destination");
                    let pending = m.pending.take();
                    assert_eq!(
                        Some(&d.bytes),
                        pending.as_ref(),
                        "{name}: due delivered a frame that was not its pending one"
                    );
                    m.delivered(&d, now);
                }
            }
            _ => {
                let next = config(&mut b);
                let changes = core.apply(&next);
                covered.applies += 1;
                check_apply(&next, &changes, &mut input, &mut models);
                ids = ids_by_name(&core);
                order = names_of(&next);
            }
        }
        check_deadline(&core, &models);
    }
    core.finish();
    for m in models.values_mut() {
        m.forget_pending();
    }
    check_deadline(&core, &models);
    let snap = core.snapshot(
        SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 5_400),
        Duration::ZERO,
    );
    let i = snap.input;
    assert_eq!(
        (
            i.received,
            i.bytes,
            i.malformed,
            i.disallowed,
            i.recv_errors
        ),
        (
            input.received,
            input.bytes,
            input.malformed,
            input.disallowed,
            0
        ),
        "input counters (received, bytes, malformed, disallowed, recv_errors)"
    );
    let names: Vec<&str> = snap.destinations.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names, order,
        "the snapshot's destinations, in configuration order"
    );
    for d in &snap.destinations {
        let m = &models[&d.name];
        assert_eq!(d.stats, m.stats, "{}: counters", d.name);
        assert_counts_add_up(&d.name, &d.stats, m.seen);
        covered.dropped += d.stats.dropped_total();
    }
    covered.deliveries = sink.count;
    covered
}

/// Fails unless sent + dropped by reason is every datagram the destination saw.
#[track_caller]
fn assert_counts_add_up(name: &str, s: &DestinationStats, seen: u64) {
    assert_eq!(
        s.sent + s.dropped_total(),
        seen,
        "{name}: sent {} + dropped {:?} is not the {seen} datagrams it saw",
        s.sent,
        s.dropped
    );
}

fn names_of(config: &Config) -> Vec<String> {
    config.destinations.iter().map(|d| d.name.clone()).collect()
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

/// What destination `output` must be handed for `data`, read as `format`
/// (`guessed`: a Horizon default not confirmed yet); `None`: untranslatable.
fn expected_output(
    data: &[u8],
    format: Option<Format>,
    guessed: bool,
    output: Output,
) -> Option<Vec<u8>> {
    let to = match output {
        Output::Same => return Some(data.to_vec()),
        Output::Format(to) => to,
    };
    let from = match format {
        Some(_) if guessed && to.is_horizon() => Some(to),
        f => f,
    }?;
    if from == to {
        return Some(data.to_vec());
    }
    let mut out = [0u8; MAX_LEN];
    let len = translate(data, from, to, &mut out).ok()?;
    Some(out[..len].to_vec())
}

fn check_handle(
    data: &[u8],
    from: SocketAddr,
    now: Instant,
    input: &mut InputModel,
    models: &mut BTreeMap<String, Model>,
    ids: &[(DestinationId, String)],
    sink: &mut Recorder,
) {
    input.received += 1;
    input.bytes += data.len() as u64;
    let ip = from.ip().to_canonical();
    if !input.allow.is_empty() && !input.allow.iter().any(|n| n.contains(&ip)) {
        input.disallowed += 1;
        assert!(
            sink.got.is_empty(),
            "a datagram from {from}, outside listen.allow, was delivered"
        );
        return;
    }
    let (format, guessed) = match input.input {
        Input::Fixed(f) => ((data.len() == f.len()).then_some(f), false),
        Input::Auto => {
            let f = input.detector.detect(data);
            (
                f,
                f.is_some_and(Format::is_horizon) && !input.detector.is_certain(),
            )
        }
    };
    if format.is_none() {
        input.malformed += 1;
    }
    let race_on = format.map(|f| {
        Packet::new_checked(data, f)
            .expect("a format of the datagram's length")
            .race_on()
    });
    let mut got: Vec<Delivery> = sink.got.drain(..).collect();
    for (id, name) in ids {
        let m = models.get_mut(name).expect("a modelled destination");
        m.seen += 1;
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
        let Some(expected) = expected_output(data, format, guessed, m.config.output) else {
            assert!(
                delivery.is_none(),
                "{name}: delivered an untranslatable datagram"
            );
            m.stats.drop(DropReason::Untranslatable);
            continue;
        };
        m.forget_pending();
        match delivery {
            Some(d) => {
                check_bytes(name, m.config.output, &d.bytes, data);
                assert!(
                    d.bytes == expected,
                    "{name} ({}): delivered bytes are not the {} datagram's ({:?}, guessed {guessed})",
                    m.config.output,
                    data.len(),
                    format
                );
                m.delivered(d, now);
            }
            None if expected.len() <= FRAME_CAPACITY => m.pending = Some(expected),
            None => m.stats.drop(DropReason::RateLimited),
        }
    }
    got.retain(|d| !ids.iter().any(|(id, _)| *id == d.id));
    assert!(
        got.is_empty(),
        "deliveries to destinations that don't exist"
    );
}

/// A delivery's shape: `same` is the datagram; a format is its length and
/// decodes.
fn check_bytes(name: &str, output: Output, bytes: &[u8], data: &[u8]) {
    match output {
        Output::Same => assert_eq!(bytes, data, "{name}: same is not byte for byte"),
        Output::Format(to) => {
            let packet = Packet::new_checked(bytes, to)
                .unwrap_or_else(|e| panic!("{name}: not a {to} packet: {e}"));
            let t = Telemetry::decode(&packet);
            assert_eq!(t.format, to, "{name}: decoded format");
        }
    }
}

fn check_apply(
    next: &Config,
    changes: &forza_relay::fanout::Changes,
    input: &mut InputModel,
    models: &mut BTreeMap<String, Model>,
) {
    if next.input != input.input {
        input.input = next.input;
        input.detector = Detector::default();
    }
    input.allow = next.allow.clone();
    let mut removed = Vec::new();
    let mut changed = Vec::new();
    for (name, m) in models.iter_mut() {
        let Some(d) = next.destinations.iter().find(|d| d.name == *name) else {
            removed.push(name.clone());
            continue;
        };
        if *d == m.config {
            continue;
        }
        changed.push(name.clone());
        if d.output != m.config.output || d.addr != m.config.addr {
            m.forget_pending();
        }
        if d.max_rate != m.config.max_rate {
            m.rate = None;
        }
        if d.only_race_on != m.config.only_race_on {
            m.race = RaceFilter::default();
        }
        m.config = d.clone();
    }
    let added: Vec<String> = next
        .destinations
        .iter()
        .filter(|d| !models.contains_key(&d.name))
        .map(|d| d.name.clone())
        .collect();
    let mut reported: Vec<String> = changes.added.iter().map(|(_, d)| d.name.clone()).collect();
    reported.sort_unstable();
    let mut want = added.clone();
    want.sort_unstable();
    assert_eq!(reported, want, "apply: added");
    let mut reported: Vec<String> = changes
        .changed
        .iter()
        .map(|c| c.after.name.clone())
        .collect();
    reported.sort_unstable();
    assert_eq!(reported, changed, "apply: changed");
    let mut reported: Vec<&str> = changes
        .removed
        .iter()
        .map(|r| r.destination.name.as_str())
        .collect();
    reported.sort_unstable();
    assert_eq!(reported, removed, "apply: removed");
    for r in &changes.removed {
        let mut m = models
            .remove(&r.destination.name)
            .expect("a modelled destination");
        m.forget_pending();
        assert_eq!(r.stats, m.stats, "{}: final counters", r.destination.name);
        assert_counts_add_up(&r.destination.name, &r.stats, m.seen);
    }
    for name in added {
        let d = next
            .destinations
            .iter()
            .find(|d| d.name == name)
            .expect("listed above");
        models.insert(name, Model::new(d.clone()));
    }
}

/// `next_deadline` is `Some` exactly when a frame is pending somewhere.
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
}
