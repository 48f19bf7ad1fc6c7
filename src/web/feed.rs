//! What the pages show, sampled while at least one is open: the car from a
//! tap (at most every [`CAR_EVERY`]), the counters and the log lines every
//! [`COUNTERS_EVERY`]. Every update is one JSON object, the same as the
//! matching part of `/api/snapshot`, kept as the newest of its kind in
//! [`Updates`] for the event streams to send.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use log::{info, warn};
use serde_json::{json, Value};
use tokio::sync::watch;

use super::{lock, Shared, CAR_EVERY, COUNTERS_EVERY};
use crate::capture::record::{Existing, Recorder};
use crate::config::Input;
use crate::counters::DropReason;
use crate::logging;
use crate::relay::Snapshots;
use crate::report::{Snapshot, SnapshotKind};
use crate::tap;
use crate::view::model::{Car, DestinationRates, Finite, Model, Tyre};
use crate::view::Reader;
use crate::wire::{Format, MAX_LEN};

/// How long the feed listens before it sends its first counters.
const FIRST_COUNTERS: Duration = Duration::from_millis(250);

/// How long the feed waits for the relay's counters.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_millis(200);

/// How long `/api/snapshot` listens for the car when no page is open.
pub const CAR_WAIT: Duration = Duration::from_millis(500);
/// The ring of that short listen: a second of a 360 Hz stream.
const LISTEN_CAPACITY: usize = 128 << 10;
/// How long starting a recording waits for the relay to take its tap.
const ATTACH_WAIT: Duration = Duration::from_secs(2);

/// The newest update of each kind, as JSON text (`None` before the first):
/// `{"car":…}`'s value, the counters, the log's last lines. Sent to every
/// open page as they change; `/api/snapshot` answers with them while one is
/// open.
pub struct Updates {
    pub car: watch::Sender<Option<Arc<str>>>,
    pub counters: watch::Sender<Option<Arc<str>>>,
    pub log: watch::Sender<Option<Arc<str>>>,
    /// The newest frame of the game, for `/api/stream` (and the overlay).
    pub frame: watch::Sender<Option<Frame>>,
}

impl Updates {
    /// None yet.
    pub fn new() -> Updates {
        Updates {
            car: watch::Sender::new(None),
            counters: watch::Sender::new(None),
            log: watch::Sender::new(None),
            frame: watch::Sender::new(None),
        }
    }
}

/// One frame of the game as the relay admitted it, copied whole: its bytes,
/// the format it reads as, when it was received.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub time: SystemTime,
    pub format: Format,
    len: usize,
    bytes: [u8; MAX_LEN],
}

impl Frame {
    /// Its bytes.
    pub fn payload(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The fastest a stream may ask for: FH6's rate, the highest a Forza game
/// sends at.
pub const MAX_HZ: u32 = 360;

/// Replaces the newest update in `tx` (with or without a stream to see it).
fn publish(tx: &watch::Sender<Option<Arc<str>>>, value: &Value) {
    tx.send_replace(Some(Arc::from(value.to_string())));
}

/// The newest update in `tx`, as JSON.
pub fn newest(tx: &watch::Sender<Option<Arc<str>>>) -> Option<Value> {
    let text = tx.borrow().clone()?;
    serde_json::from_str(&text).ok()
}

/// Who listens to the feed now.
#[derive(Debug, Default)]
pub struct Listeners {
    /// Open pages' event streams.
    pub pages: usize,
    /// Each open frame stream's rate, frames a second.
    pub streams: Vec<u32>,
}

impl Listeners {
    fn any(&self) -> bool {
        self.pages > 0 || !self.streams.is_empty()
    }

    /// How long the feed sleeps between two looks at its tap: the car's
    /// period, or the fastest stream's (at most [`MAX_HZ`]).
    fn period(&self) -> Duration {
        match self.streams.iter().max() {
            Some(&hz) => (Duration::from_secs(1) / hz.clamp(1, MAX_HZ)).min(CAR_EVERY),
            None => CAR_EVERY,
        }
    }
}

/// What a listener wants from the feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wants {
    /// The car, the counters, the log lines.
    Page,
    /// Frames, this many a second.
    Frames(u32),
}

/// One listener, counted while it lives.
pub struct Listening {
    shared: Arc<Shared>,
    wants: Wants,
}

/// Counts a listener in (waking the feed); it is counted out when the
/// returned guard is dropped.
pub fn listen(shared: &Arc<Shared>, wants: Wants) -> Listening {
    let mut listeners = lock(&shared.listeners);
    match wants {
        Wants::Page => listeners.pages += 1,
        Wants::Frames(hz) => listeners.streams.push(hz),
    }
    shared.listeners_changed.notify_all();
    Listening {
        shared: shared.clone(),
        wants,
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut listeners = lock(&self.shared.listeners);
        match self.wants {
            Wants::Page => listeners.pages = listeners.pages.saturating_sub(1),
            Wants::Frames(hz) => {
                if let Some(at) = listeners.streams.iter().position(|&h| h == hz) {
                    listeners.streams.swap_remove(at);
                }
            }
        }
        self.shared.listeners_changed.notify_all();
    }
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
        // "Started" means every frame from now on is in it.
        if !shared.control.attach_now(producer, ATTACH_WAIT) {
            warn!("the relay took more than {ATTACH_WAIT:?} to start the recording");
        }
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

    /// Closes the file and says what was recorded: in the log, and as the
    /// page shows it once stopped (its path, packets and bytes; `None` when
    /// writing failed).
    pub fn finish(self) -> Option<Value> {
        let seconds = self.started.elapsed().as_secs();
        match self.recorder.finish() {
            Ok(r) => {
                info!("{r}");
                Some(json!({
                    "path": r.path.display().to_string(),
                    "bytes": std::fs::metadata(&r.path).map_or(0, |m| m.len()),
                    "packets": r.packets,
                    "seconds": seconds,
                }))
            }
            Err(e) => {
                warn!("the recording stopped early: {e}");
                None
            }
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

/// Laps the page is sent: its table's newest.
const LAPS_SHOWN: usize = 20;

/// Adds the session's laps to the car's value (issue 34): `laps`, the newest
/// [`LAPS_SHOWN`] oldest first, each with its number from 1, time, delta
/// to the best before it and splits, `best` marking the session's best;
/// and `live_delta_s`, the lap being driven against the best.
pub fn add_laps(value: &mut Value, model: &Model) {
    let table = model.lap_table();
    let best = table.iter().map(|l| l.best_lap_s).next_back();
    let laps: Vec<Value> = table
        .iter()
        .skip(table.len().saturating_sub(LAPS_SHOWN))
        .map(|l| {
            json!({
                "lap": l.lap,
                "lap_time_s": l.lap_time_s,
                "delta_to_best_s": l.delta_to_best_s,
                "splits_s": l.splits_s,
                "split_deltas_s": l.split_deltas_s,
                "best": Some(l.lap_time_s) == best,
            })
        })
        .collect();
    value["laps"] = json!(laps);
    value["live_delta_s"] = json!(model.live_delta_s());
}

/// The counters as the page shows them: the relay's snapshot as `[stats]
/// format = "json"` prints it (every drop reason by its key, so a new one
/// shows without a change here), each destination with its packets/s, and
/// what the tap's model says about the input.
pub fn counters_json(
    shared: &Shared,
    snapshot: &Snapshot,
    counting: &mut Counting,
    model: Option<&Model>,
) -> Value {
    let mut value: Value = serde_json::from_str(&snapshot.to_json(SnapshotKind::Summary))
        .unwrap_or_else(|_| json!({}));
    let rows = counting.rates.rows(snapshot);
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
    if let Some(model) = model {
        value["input"]["packets_per_sec"] = json!(model.rate_hz());
        value["input"]["sender"] = json!(model.sender().map(|s| s.to_string()));
        value["input"]["silent_s"] = json!(model.silent_for().map(|d| d.as_secs()));
        // Nothing ever received, by the relay's count (the model listens only
        // since a page opened).
        value["input"]["never"] = json!(model.packets() == 0 && snapshot.input.received == 0);
        value["input"]["why_ignored"] = json!(model.why_ignored());
        // The game in a menu or paused: the page says so over the car it
        // last saw racing.
        value["input"]["not_racing"] = json!(model.not_racing());
        if let Some((format, certain)) = model.format() {
            value["input"]["format"] = json!(format.id());
            value["input"]["format_guessed"] = json!(!certain);
        }
    }
    // Whether changes are saved, and the file's last error: the relay's
    // snapshot says it (its `config`), as the configuration's owner told it.
    value["saved"] = json!(snapshot.config.path.is_some());
    value["file"] = json!(snapshot.config.path);
    value["recording"] = lock(&shared.recording)
        .as_ref()
        .map_or(Value::Null, PageRecording::describe);
    // Issue 30: once stopped, where the file went ("not recording" alone
    // left no path to it).
    value["last_recording"] = lock(&shared.last_recording).clone().unwrap_or(Value::Null);
    value
}

/// The log's last lines.
pub fn log_json() -> Value {
    json!({ "lines": logging::recent().1 })
}

/// The input and the car now, for `/api/snapshot` with no page open (the
/// feed listens only while one is): a tap attached until the first frame
/// comes, at most [`CAR_WAIT`], then detached.
pub fn listen_once(shared: &Shared) -> Model {
    let input = shared.input;
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

/// What the destinations' rates are computed from, kept from one sample to
/// the next (their statuses are the relay's).
#[derive(Default)]
pub struct Counting {
    rates: DestinationRates,
}

/// The feed thread: waits for a listener, then samples until the last one
/// goes, until the web page stops.
pub fn run(shared: &Shared, input: Input) {
    let mut counting = Counting::default();
    // The relay fills these buffers in place: its answers allocate nothing.
    let mut snapshots = shared.control.snapshots();
    loop {
        {
            let mut listeners = lock(&shared.listeners);
            while !listeners.any() && !shared.stopping() {
                listeners = shared
                    .listeners_changed
                    .wait(listeners)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        if shared.stopping() {
            return;
        }
        sample(shared, input, &mut counting, &mut snapshots);
    }
}

/// Feeds the listeners until none is left: the pages while one is open, the
/// newest frame while a stream is.
fn sample(shared: &Shared, input: Input, counting: &mut Counting, snapshots: &mut Snapshots) {
    let (producer, mut tap) = tap::tap(tap::DEFAULT_CAPACITY);
    shared.control.attach(producer);
    let mut model = Model::new(input, "the relay");
    // The stream the relay follows is the one shown, from the first datagram
    // (a page opened while two programs send shows the game's).
    if let Some(sender) = snapshots
        .take(SNAPSHOT_TIMEOUT)
        .and_then(|s| s.input.senders.followed())
    {
        model.follow(sender.addr, Instant::now());
    }
    let mut reader = Reader::new(input);
    let mut newest = Frame {
        time: SystemTime::UNIX_EPOCH,
        format: Format::Fh6,
        len: 0,
        bytes: [0; MAX_LEN],
    };
    let mut shown_packets = u64::MAX;
    // The first counters once the model has had a moment of the game's
    // frames: a model that has seen nothing yet would say "nothing for N s"
    // for a second (the page has /api/snapshot's counters meanwhile).
    let mut next_counters = Instant::now() + FIRST_COUNTERS;
    let mut shown_log = u64::MAX;
    loop {
        let (pages, streams, period) = {
            let listeners = lock(&shared.listeners);
            if shared.stopping() || !listeners.any() {
                break;
            }
            (
                listeners.pages > 0,
                !listeners.streams.is_empty(),
                listeners.period(),
            )
        };
        let now = Instant::now();
        let mut framed = false;
        while let Some(d) = tap.pop() {
            // The model follows one sender when several send at once; the
            // streams show what it shows.
            model.on_datagram(now, d.from, d.payload);
            if !streams || model.sender() != Some(d.from) {
                continue;
            }
            if let Some(format) = reader.format_of(d.payload) {
                if let Some(bytes) = newest.bytes.get_mut(..d.payload.len()) {
                    bytes.copy_from_slice(d.payload);
                    (newest.time, newest.format, newest.len) = (d.time, format, d.payload.len());
                    framed = true;
                }
            }
        }
        if framed {
            // The newest of the batch: a stream sends the newest it has.
            shared.updates.frame.send_replace(Some(newest));
        }
        if !pages {
            std::thread::sleep(period);
            continue;
        }
        model.tick(now);
        if model.packets() != shown_packets {
            shown_packets = model.packets();
            if let Some(car) = model.car() {
                let mut value = car_json(car);
                add_laps(&mut value, &model);
                publish(&shared.updates.car, &value);
            }
        }
        if now >= next_counters {
            next_counters = now + COUNTERS_EVERY;
            if let Some(snapshot) = snapshots.take(SNAPSHOT_TIMEOUT) {
                let counters = counters_json(shared, snapshot, counting, Some(&model));
                publish(&shared.updates.counters, &counters);
            }
            let written = logging::written_lines();
            if written != shown_log {
                shown_log = written;
                publish(&shared.updates.log, &log_json());
            }
        }
        std::thread::sleep(period);
    }
    // Dropping the tap detaches it: with no page open the relay copies nothing.
    drop(tap);
}
