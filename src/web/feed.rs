//! What the pages show, sampled while at least one is open: the car from a
//! tap (at most every [`CAR_EVERY`]), the counters and the log lines every
//! [`COUNTERS_EVERY`]. Every update is one JSON object, the same as the
//! matching part of `/api/snapshot`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{info, warn};
use serde_json::{json, Value};

use super::{lock, Shared, CAR_EVERY, COUNTERS_EVERY};
use crate::capture::record::{Existing, Recorder};
use crate::config::Input;
use crate::logging;
use crate::relay::Snapshots;
use crate::stats::{DropReason, Snapshot, SnapshotKind};
use crate::tap;
use crate::watch::model::{Car, DestinationRates, Finite, Model, Tyre};

/// How long the feed waits for the relay's counters.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_millis(200);

/// How long `/api/snapshot` listens for the car when no page is open.
pub const CAR_WAIT: Duration = Duration::from_millis(500);
/// The ring of that short listen: a second of a 360 Hz stream.
const LISTEN_CAPACITY: usize = 128 << 10;

/// The latest update of each kind.
#[derive(Debug, Default)]
pub struct Latest {
    /// `{"car":…}` or `null` before the first racing packet.
    pub car: Option<Value>,
    /// `{"input":…,"destinations":…,"recording":…,"saved":…}`.
    pub counters: Option<Value>,
    /// The log's last lines.
    pub log: Option<Value>,
}

/// A recording started from the page.
pub struct PageRecording {
    recorder: Recorder,
    started: Instant,
}

impl PageRecording {
    /// Starts recording what the relay admits into `template` (see
    /// [`Recorder::start`]).
    pub fn start(shared: &Shared, template: &std::path::Path) -> Result<PageRecording, String> {
        let (producer, tap) = tap::tap(tap::DEFAULT_CAPACITY);
        let recorder = Recorder::start(template, Existing::Number, tap, None, || {})
            .map_err(|e| e.to_string())?;
        shared.control.attach(producer);
        info!(
            "recording from the web page into {}",
            recorder.path().display()
        );
        Ok(PageRecording {
            recorder,
            started: Instant::now(),
        })
    }

    /// Its name, size, packet count and time so far.
    pub fn describe(&self) -> Value {
        let path = self.recorder.path();
        json!({
            "path": path.display().to_string(),
            "bytes": std::fs::metadata(path).map_or(0, |m| m.len()),
            "packets": self.recorder.packets(),
            "seconds": self.started.elapsed().as_secs(),
        })
    }

    /// Closes the file and says what was recorded.
    pub fn finish(self) {
        match self.recorder.finish() {
            Ok(r) => info!("{r}"),
            Err(e) => warn!("the recording stopped early: {e}"),
        }
    }
}

/// Where a recording started from the page goes: next to the configuration
/// file, else in the current folder.
pub fn recording_template(shared: &Shared) -> PathBuf {
    let name = "forza-relay-{time}.pcap";
    match shared.file.as_ref().and_then(|f| f.parent()) {
        Some(folder) if !folder.as_os_str().is_empty() => folder.join(name),
        _ => PathBuf::from(name),
    }
}

fn num(v: Option<Finite>) -> Value {
    v.map_or(Value::Null, |f| json!(f.get()))
}

/// The car as the page shows it: the same values as `watch`.
pub fn car_json(car: &Car) -> Value {
    let tyre = |t: &Tyre| json!({"temp_c": num(t.temp_c), "slip": num(t.combined_slip)});
    let t = &car.tyres;
    json!({
        "format": car.format.id(),
        "racing": car.racing,
        "speed_kmh": num(car.speed_kmh),
        "speed_mph": num(car.speed_mph),
        "gear": car.gear.map(|g| g.to_string()),
        "rpm": num(car.rpm),
        "redline_rpm": num(car.redline_rpm),
        "rev_fraction": num(car.rev_fraction),
        "throttle_pct": num(car.throttle_pct),
        "brake_pct": num(car.brake_pct),
        "clutch_pct": num(car.clutch_pct),
        "steer": num(car.steer),
        "tyres": [tyre(&t.fl), tyre(&t.fr), tyre(&t.rl), tyre(&t.rr)],
        "lap": car.lap,
        "current_lap": car.current_lap.map(|l| l.to_string()),
        "last_lap": car.last_lap.map(|l| l.to_string()),
        "best_lap": car.best_lap.map(|l| l.to_string()),
        "x": car.position.map(|p| p.x.get()),
        "z": car.position.map(|p| p.z.get()),
    })
}

/// The counters as the page shows them: the relay's snapshot as `[stats]
/// format = "json"` prints it (every drop reason by its key, so a new one
/// shows without a change here), each destination with its packets/s, and
/// what the tap's model says about the input.
pub fn counters_json(
    shared: &Shared,
    snapshot: &Snapshot,
    rates: &mut DestinationRates,
    model: Option<&Model>,
) -> Value {
    let mut value: Value = serde_json::from_str(&snapshot.to_json(SnapshotKind::Summary))
        .unwrap_or_else(|_| json!({}));
    let rows = rates.rows(snapshot);
    if let Some(list) = value.get_mut("destinations").and_then(Value::as_array_mut) {
        for (d, row) in list.iter_mut().zip(&rows) {
            d["packets_per_sec"] = json!(row.packets_per_sec);
            d["problems"] = json!(row.problems);
        }
        for (d, s) in list.iter_mut().zip(&snapshot.destinations) {
            // Every reason the relay counts, by its key: a new one shows up
            // on the page with no change to it.
            let drops: serde_json::Map<String, Value> = DropReason::ALL
                .iter()
                .map(|&r| (r.key().to_owned(), json!(s.stats.dropped(r))))
                .collect();
            d["drops"] = Value::Object(drops);
        }
    }
    // Each destination as configured: its filter and rate limit, and the
    // address as written.
    let config = lock(&shared.config);
    if let Some(list) = value.get_mut("destinations").and_then(Value::as_array_mut) {
        for d in list.iter_mut() {
            let name = d["name"].as_str().unwrap_or_default().to_owned();
            if let Some(c) = config.destinations.iter().find(|c| c.name == name) {
                d["addr_text"] = json!(c.addr_text);
                d["only_race_on"] = json!(c.only_race_on);
                d["max_rate"] = json!(c.max_rate);
            }
        }
    }
    drop(config);
    if let Some(model) = model {
        value["input"]["packets_per_sec"] = json!(model.rate_hz());
        value["input"]["sender"] = json!(model.sender().map(|s| s.to_string()));
        value["input"]["silent_s"] = json!(model.silent_for().map(|d| d.as_secs()));
        value["input"]["never"] = json!(model.packets() == 0);
        value["input"]["why_ignored"] = json!(model.why_ignored());
        // The game in a menu or paused: the page says so over the car it
        // last saw racing.
        value["input"]["not_racing"] = json!(model.not_racing());
        if let Some((format, certain)) = model.format() {
            value["input"]["format"] = json!(format.id());
            value["input"]["format_guessed"] = json!(!certain);
        }
    }
    value["saved"] = json!(shared.file.is_some());
    value["file"] = json!(shared.file.as_ref().map(|f| f.display().to_string()));
    value["recording"] = lock(&shared.recording)
        .as_ref()
        .map_or(Value::Null, PageRecording::describe);
    value
}

/// The log's last lines.
pub fn log_json() -> Value {
    json!({ "lines": logging::recent().1 })
}

/// Reads the configuration file again when it changed (a hand edit, or the
/// page's), for what the page shows of each destination (filters, rate
/// limits, addresses as written).
fn follow_file(shared: &Shared, seen: &mut Option<std::time::SystemTime>) {
    let Some(path) = &shared.file else {
        return;
    };
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    if modified == *seen {
        return;
    }
    *seen = modified;
    if let Ok(config) = crate::config::Config::from_file(path, &shared.overrides) {
        *lock(&shared.config) = config;
    }
}

/// The input and the car now, for `/api/snapshot` with no page open (the
/// feed listens only while one is): a tap attached until the first frame
/// comes, at most [`CAR_WAIT`], then detached.
pub fn listen_once(shared: &Shared) -> Model {
    let input = lock(&shared.config).input;
    let (producer, mut tap) = tap::tap(LISTEN_CAPACITY);
    shared.control.attach(producer);
    let mut model = Model::new(input, "the relay");
    let until = Instant::now() + CAR_WAIT;
    loop {
        let now = Instant::now();
        while let Some(d) = tap.pop() {
            model.on_datagram(now, d.from, d.payload);
        }
        if model.car().is_some() || now >= until {
            return model;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One Server-Sent Event.
fn event(kind: &str, data: &Value) -> Arc<str> {
    Arc::from(format!("event: {kind}\ndata: {data}\n\n"))
}

/// The feed thread: waits for a page to open, then samples until the last one
/// closes, until the web page stops.
pub fn run(shared: &Shared, input: Input) {
    let mut rates = DestinationRates::default();
    // The relay fills these buffers in place: its answers allocate nothing.
    let mut snapshots = shared.control.snapshots();
    loop {
        {
            let mut clients = lock(&shared.clients);
            while clients.is_empty() && !shared.stopping() {
                clients = shared
                    .clients_changed
                    .wait(clients)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        if shared.stopping() {
            return;
        }
        sample(shared, input, &mut rates, &mut snapshots);
    }
}

/// Feeds the open pages until none is left.
fn sample(shared: &Shared, input: Input, rates: &mut DestinationRates, snapshots: &mut Snapshots) {
    let (producer, mut tap) = tap::tap(tap::DEFAULT_CAPACITY);
    shared.control.attach(producer);
    let mut model = Model::new(input, "the relay");
    let mut shown_packets = u64::MAX;
    let mut next_counters = Instant::now();
    let mut shown_log = u64::MAX;
    let mut file_time = None;
    while !shared.stopping() && !lock(&shared.clients).is_empty() {
        let now = Instant::now();
        while let Some(d) = tap.pop() {
            model.on_datagram(now, d.from, d.payload);
        }
        model.tick(now);
        if model.packets() != shown_packets {
            shown_packets = model.packets();
            if let Some(car) = model.car() {
                let car = car_json(car);
                shared.broadcast(&event("car", &car));
                lock(&shared.latest).car = Some(car);
            }
        }
        if now >= next_counters {
            next_counters = now + COUNTERS_EVERY;
            follow_file(shared, &mut file_time);
            if let Some(snapshot) = snapshots.take(SNAPSHOT_TIMEOUT) {
                let counters = counters_json(shared, snapshot, rates, Some(&model));
                shared.broadcast(&event("counters", &counters));
                lock(&shared.latest).counters = Some(counters);
            }
            let written = logging::written_lines();
            if written != shown_log {
                shown_log = written;
                let log = log_json();
                shared.broadcast(&event("log", &log));
                lock(&shared.latest).log = Some(log);
            }
        }
        std::thread::sleep(CAR_EVERY);
    }
    // Dropping the tap detaches it: with no page open the relay copies nothing.
    drop(tap);
}
