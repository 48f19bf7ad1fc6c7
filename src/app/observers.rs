//! The observers every relaying command is made of: the summary printer, the
//! recorder, the reloader, and a timer that stops the relay. Observers that
//! belong to a module above the runner live there: the live view
//! (`watch::live`), the web page (`web`), the demo's screen (`demo`).

use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use log::{info, warn};

use super::{join_within, Attach, Failure, Observer};
use crate::capture::record::{Existing, Recorder};
use crate::config::StatsFormat;
use crate::numbers::Elapsed;
use crate::owner::Owner;
use crate::report::{Snapshot, SnapshotKind, Summary};

/// How long the end of a command waits for standard output to take the last
/// JSON line; a reader that takes nothing is not waited for forever.
const PRINT_WAIT: Duration = Duration::from_secs(2);

/// One JSON line on standard output, flushed so a script sees it at once. A
/// reader that is gone loses it.
fn print_json(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Prints the summaries: every `stats.interval` a line, and the final summary
/// at the end. Text goes to the log; JSON lines (`[stats] format = "json"`) to
/// standard output, except while a screen owns it (then the lines are text,
/// in the log, which shows them once the screen closes).
pub struct Printer {
    format: StatsFormat,
    screen: bool,
    running: Option<PrinterThread>,
}

struct PrinterThread {
    thread: JoinHandle<()>,
    ended: mpsc::Receiver<()>,
    last: mpsc::Sender<Snapshot>,
}

impl Printer {
    /// Summaries in `format`; `screen`: a full-screen view owns standard output.
    pub fn new(format: StatsFormat, screen: bool) -> Printer {
        Printer {
            format,
            screen,
            running: None,
        }
    }
}

impl Observer for Printer {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        let summaries = relay.summaries();
        let (last_tx, last_rx) = mpsc::channel::<Snapshot>();
        let (ended_tx, ended) = mpsc::channel::<()>();
        let json = self.format == StatsFormat::Json;
        let periodic_json = json && !self.screen;
        let thread = std::thread::Builder::new()
            .name("summaries".to_owned())
            .spawn(move || {
                let _ended = ended_tx;
                let mut summary = Summary::default();
                // Ends when the relay is dropped.
                for snapshot in summaries {
                    if periodic_json {
                        print_json(&snapshot.to_json(SnapshotKind::Summary));
                    } else {
                        info!("{}", summary.line(&snapshot));
                    }
                }
                if let (true, Ok(last)) = (json, last_rx.recv()) {
                    print_json(&last.to_json(SnapshotKind::Final));
                }
            })
            .map_err(|e| Failure::start(format!("cannot start the summary thread: {e}")))?;
        self.running = Some(PrinterThread {
            thread,
            ended,
            last: last_tx,
        });
        Ok(())
    }

    fn finish(self: Box<Self>, last: &mut Snapshot) -> Result<(), Failure> {
        if let Some(p) = self.running {
            let _ = p.last.send(last.clone());
            drop(p.last);
            if join_within(p.thread, &p.ended, PRINT_WAIT).is_none() {
                warn!("standard output is not being read: the last summary line is not on it");
            }
        }
        info!("{last}");
        Ok(())
    }
}

/// Records every datagram the relay admits into a capture file.
pub struct Recording {
    path: PathBuf,
    existing: Existing,
    count: Option<u64>,
    listen: Option<SocketAddr>,
    recorder: Option<Recorder>,
}

impl Recording {
    /// Into `path` (`{time}` in it becomes the start; `existing` says what
    /// happens when the name is taken); with `count`, the relay is stopped
    /// after that many datagrams.
    pub fn new(path: PathBuf, existing: Existing, count: Option<u64>) -> Recording {
        Recording {
            path,
            existing,
            count,
            listen: None,
            recorder: None,
        }
    }

    /// Says, when it starts, that it records what arrives on `listen`: the
    /// one line of `forza-relay record`.
    pub fn announcing(mut self, listen: SocketAddr) -> Recording {
        self.listen = Some(listen);
        self
    }
}

impl Observer for Recording {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        let tap = relay.tap();
        let at_count = relay.control();
        let recorder = Recorder::start(&self.path, self.existing, tap, self.count, move || {
            at_count.stop()
        })
        .map_err(|e| Failure::start(e.to_string()))?;
        let path = recorder.path().display();
        match self.listen {
            Some(listen) => info!("recording what arrives on {listen} into {path}; Ctrl-C stops"),
            None => info!("recording every datagram received into {path}"),
        }
        self.recorder = Some(recorder);
        Ok(())
    }

    fn finish(self: Box<Self>, last: &mut Snapshot) -> Result<(), Failure> {
        let Some(recorder) = self.recorder else {
            return Ok(());
        };
        let elapsed = Elapsed(last.elapsed);
        let finished = recorder.finish();
        if let Ok(r) = &finished {
            // The relay's count stopped with it; the recorder went on writing
            // (or failing to write) what its tap still held. An app records
            // into one file, so its count is the whole of it.
            last.not_recorded = r.not_recorded;
        }
        match finished {
            Ok(r) if r.failure.is_some() => Err(Failure::start(format!("{r} in {elapsed}"))),
            Ok(r) => {
                info!("{r} in {elapsed}");
                Ok(())
            }
            Err(e) => Err(Failure::start(format!("the recording stopped early: {e}"))),
        }
    }
}

/// The configuration's owner ([`crate::owner`]) for as long as the relay
/// runs: SIGHUP reads the file again; the end stops its thread.
pub struct Owning {
    owner: Option<Owner>,
}

impl Owning {
    /// Keeps `owner` (already started: the page's editor comes from it) until
    /// the relay stops.
    pub fn new(owner: Owner) -> Owning {
        Owning { owner: Some(owner) }
    }
}

impl Observer for Owning {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        if let Some(owner) = &self.owner {
            let trigger = owner.trigger();
            relay.on_reload(move || trigger.read_again());
        }
        Ok(())
    }

    fn finish(self: Box<Self>, _last: &mut Snapshot) -> Result<(), Failure> {
        drop(self.owner);
        Ok(())
    }
}

/// Stops the relay after a while (`record --duration`).
pub struct StopAfter {
    after: Duration,
    cancel: Option<mpsc::Sender<()>>,
}

impl StopAfter {
    /// Stops it `after` this long.
    pub fn new(after: Duration) -> StopAfter {
        StopAfter {
            after,
            cancel: None,
        }
    }
}

impl Observer for StopAfter {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        let control = relay.control();
        let (cancel, cancelled) = mpsc::channel::<()>();
        let after = self.after;
        std::thread::Builder::new()
            .name("timer".to_owned())
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(after) {
                    control.stop();
                }
            })
            .map_err(|e| Failure::start(format!("cannot start the timer: {e}")))?;
        self.cancel = Some(cancel);
        Ok(())
    }

    fn finish(self: Box<Self>, _last: &mut Snapshot) -> Result<(), Failure> {
        // Dropping the sender ends the timer's wait.
        Ok(())
    }
}
