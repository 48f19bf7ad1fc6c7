//! Every race kept (issue 34, `[record] races = "DIR"`, `keep = N`): each
//! race — its racing frames, the pauses and rewinds within it, and a second
//! on either side — written as its own capture file in the folder, named by
//! its start time, game, car and track
//! (`race-2026-12-07T05-30-00Z-fh6-car3141.pcap`), the oldest removed
//! beyond `keep`. A racer who drove a good lap an hour ago can `replay` it.
//!
//! A race is the session's ([`Session`]): it starts with the first racing
//! frame and ends 10 s of the game's time after the last one (or when the
//! stream goes quiet that long, or the relay stops), so a rewind's or a
//! pause's frames stay inside it; the file ends a second after its last
//! racing frame. It runs on a thread of its own, reading the relay's tap
//! as the recorder does: the loop never waits for it, and a tap it can't
//! keep up with drops and counts.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use log::{info, warn};

use super::{Attach, Failure, Observer};
use crate::capture::record::{create_new, Existing};
use crate::capture::Writer;
use crate::config::{Input, Races};
use crate::report::Snapshot;
use crate::tap::{Datagram, Tap};
use crate::telemetry::session::{Event, Record, Session};
use crate::telemetry::{is_menu_frame, Telemetry};
use crate::view::Reader;
use crate::wire::{Format, Packet};

/// What a race's file holds on either side of its racing frames.
pub const MARGIN: Duration = Duration::from_secs(1);
/// No datagram for this long ends a race on: the game closed mid-race.
pub const QUIET: Duration = Duration::from_secs(10);
/// The start of every race file's name: only such files are ever removed.
pub const PREFIX: &str = "race-";
/// How long the thread sleeps when the tap is empty.
const IDLE_SLEEP: Duration = Duration::from_millis(20);
/// Frames held after the last racing frame, at most: 10 s at 360 a second.
const TRAILING_MAX: usize = 4_000;

/// The race being written.
struct Open {
    writer: Writer,
    /// The frames since its last racing frame: written when racing goes
    /// on, cut to [`MARGIN`] when the race ends.
    trailing: Vec<Datagram>,
    /// When its last racing frame came.
    last_racing: SystemTime,
}

/// Splits a stream of datagrams into race files. Pure but for the files.
pub struct RaceFiles {
    dir: PathBuf,
    keep: usize,
    reader: Reader,
    session: Session,
    /// The last [`MARGIN`] of datagrams while no race is on.
    before: VecDeque<Datagram>,
    open: Option<Open>,
    /// The files written, in order.
    written: Vec<PathBuf>,
    /// The first failure, said once.
    failed: bool,
}

impl RaceFiles {
    /// Race files in `races.dir`, of datagrams read as `input`.
    pub fn new(races: &Races, input: Input) -> RaceFiles {
        RaceFiles {
            dir: races.dir.clone(),
            keep: races.keep,
            reader: Reader::new(input),
            session: Session::new(),
            before: VecDeque::new(),
            open: None,
            written: Vec::new(),
            failed: false,
        }
    }

    /// The files it wrote so far, oldest first.
    pub fn written(&self) -> &[PathBuf] {
        &self.written
    }

    /// Takes one datagram.
    pub fn take(&mut self, d: &Datagram<&[u8]>) {
        let Some(format) = self.reader.format_of(d.payload) else {
            return;
        };
        let packet = Packet::new_unchecked(d.payload, format);
        let telemetry = Telemetry::decode(&packet);
        let records = self.session.observe(&telemetry, is_menu_frame(&packet));
        for record in &records {
            match record {
                Record::Event(e) if e.event == Event::RaceEnd => self.close(),
                Record::Event(e) if e.event == Event::RaceStart => {
                    self.start(d.time, format, e.car_ordinal, e.track_ordinal);
                }
                _ => {}
            }
        }
        let owned = d.owned();
        match &mut self.open {
            Some(open) if packet.race_on() => {
                for t in std::mem::take(&mut open.trailing) {
                    Self::write(&mut open.writer, &t, &mut self.failed);
                }
                Self::write(&mut open.writer, &owned, &mut self.failed);
                open.last_racing = d.time;
            }
            Some(open) => {
                if open.trailing.len() == TRAILING_MAX {
                    // A race paused this long: its oldest frames go in.
                    let t = open.trailing.remove(0);
                    Self::write(&mut open.writer, &t, &mut self.failed);
                }
                open.trailing.push(owned);
            }
            None => {
                self.before.push_back(owned);
                while self
                    .before
                    .front()
                    .is_some_and(|f| older(f.time, d.time, MARGIN))
                {
                    self.before.pop_front();
                }
            }
        }
    }

    /// Ends the race on, if one is: the stream went quiet, or the relay
    /// stops.
    pub fn end(&mut self) {
        let _ = self.session.end();
        self.close();
    }

    /// Whether a race is being written.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Opens the file of a race starting at `time`, with the second before.
    fn start(&mut self, time: SystemTime, format: Format, car: i32, track: Option<i32>) {
        self.close();
        let stamp = humantime::format_rfc3339_seconds(time)
            .to_string()
            .replace(':', "-");
        let track = track.map(|t| format!("-track{t}")).unwrap_or_default();
        let name = format!("{PREFIX}{stamp}-{}-car{car}{track}.pcap", format.id());
        let made = create_new(&self.dir.join(name), time, Existing::Number)
            .and_then(|(file, path)| Writer::new(file, &path));
        let mut writer = match made {
            Ok(w) => w,
            Err(e) => {
                if !std::mem::replace(&mut self.failed, true) {
                    warn!("races: cannot keep this race ({e}); the relay goes on");
                }
                return;
            }
        };
        for f in self.before.drain(..) {
            Self::write(&mut writer, &f, &mut self.failed);
        }
        self.open = Some(Open {
            writer,
            trailing: Vec::new(),
            last_racing: time,
        });
    }

    /// Ends the race file: the second after its last racing frame, then
    /// the oldest files beyond `keep` removed.
    fn close(&mut self) {
        let Some(mut open) = self.open.take() else {
            return;
        };
        for t in &open.trailing {
            if older(open.last_racing, t.time, MARGIN) {
                break;
            }
            Self::write(&mut open.writer, t, &mut self.failed);
        }
        if let Err(e) = open.writer.flush() {
            warn!("races: {e}");
        }
        let path = open.writer.path().to_owned();
        info!(
            "race kept: {} ({} frames)",
            path.display(),
            open.writer.packets()
        );
        self.written.push(path);
        prune(&self.dir, self.keep);
    }

    fn write(writer: &mut Writer, d: &Datagram, failed: &mut bool) {
        if let Err(e) = writer.write(d.time, d.from, d.to, &d.payload) {
            if !std::mem::replace(failed, true) {
                warn!("races: {e}; the relay goes on");
            }
        }
    }
}

/// Whether `earlier` is more than `margin` before `later`.
fn older(earlier: SystemTime, later: SystemTime, margin: Duration) -> bool {
    later.duration_since(earlier).is_ok_and(|gap| gap > margin)
}

/// Removes the oldest race files of `dir` (their names start with the time)
/// beyond the newest `keep`; nothing else in the folder is touched.
pub fn prune(dir: &Path, keep: usize) {
    let mut races = list(dir);
    while races.len() > keep {
        let oldest = races.remove(0);
        match std::fs::remove_file(&oldest) {
            Ok(()) => info!("races: removed the oldest, {}", oldest.display()),
            Err(e) => warn!("races: cannot remove {} ({e})", oldest.display()),
        }
    }
}

/// The race files of `dir`, oldest first.
pub fn list(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut races: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension().is_some_and(|e| e == "pcap")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(PREFIX))
        })
        .collect();
    races.sort();
    races
}

/// The observer: the race files, on a thread reading the relay's tap.
pub struct KeepingRaces {
    races: Races,
    input: Input,
    thread: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl KeepingRaces {
    /// Keeps every race in `races.dir`, datagrams read as `input`.
    pub fn new(races: Races, input: Input) -> KeepingRaces {
        KeepingRaces {
            races,
            input,
            thread: None,
        }
    }
}

impl Observer for KeepingRaces {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        std::fs::create_dir_all(&self.races.dir).map_err(|e| {
            Failure::start(format!(
                "cannot make {} for [record] races ({e})",
                self.races.dir.display()
            ))
        })?;
        let tap = relay.tap();
        let stop = Arc::new(AtomicBool::new(false));
        let files = RaceFiles::new(&self.races, self.input);
        let thread = std::thread::Builder::new()
            .name("races".to_owned())
            .spawn({
                let stop = stop.clone();
                move || run(files, tap, &stop)
            })
            .map_err(|e| Failure::start(format!("cannot start the races' thread: {e}")))?;
        info!(
            "keeping every race in {} (the newest {})",
            self.races.dir.display(),
            self.races.keep
        );
        self.thread = Some((stop, thread));
        Ok(())
    }

    fn finish(self: Box<Self>, _last: &mut Snapshot) -> Result<(), Failure> {
        if let Some((stop, thread)) = self.thread {
            stop.store(true, Ordering::SeqCst);
            let _ = thread.join();
        }
        Ok(())
    }
}

/// The races' thread: the tap into race files until told to stop.
fn run(mut files: RaceFiles, mut tap: Tap, stop: &AtomicBool) {
    let mut last = Instant::now();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let mut took = false;
        while let Some(d) = tap.pop() {
            files.take(&d);
            took = true;
        }
        if took {
            last = Instant::now();
        } else if files.is_open() && last.elapsed() >= QUIET {
            files.end();
        }
        if stopping {
            break;
        }
        if !took {
            std::thread::sleep(IDLE_SLEEP);
        }
    }
    files.end();
}
