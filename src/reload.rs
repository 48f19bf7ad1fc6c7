//! Live reload: a thread off the loop notices when the config file changes (or
//! is asked to read it again: SIGHUP, through a [`Trigger`]), reads and
//! validates it there — hostname look-ups never run on the loop — and hands a
//! valid [`Config`] to the relay through its [`Control`]. The relay applies it
//! between packets, and destinations that did not change lose nothing (see
//! [`crate::fanout::Fanout::apply`]).
//!
//! The file is watched through its folder, and through its target's folder too
//! when it is a symbolic link (the `notify` crate: inotify, FSEvents,
//! ReadDirectoryChangesW). A change is read only once the file is stable, so
//! that a save written in parts is never applied half-way (issue 12): a file
//! renamed into place, as most editors save, once nothing has happened to it
//! for [`SETTLE_RENAMED`]; a file written in place once nothing has happened to
//! it for [`SETTLE`] and its size and modification time are the same at both
//! ends of that window. Before it is opened, its metadata must say it is a
//! regular file: a FIFO would block the thread in `open` forever (issue 12).
//!
//! Every read ends in one [`Outcome`], logged and sent to whoever listens
//! ([`Reloader::outcomes`]): an invalid file changes nothing (each problem is
//! logged with its file, line, key and value, and the previous configuration
//! runs on); a file that says what runs already is said to be unchanged (in one
//! line for a SIGHUP); a key that only takes effect at the next start
//! (`[stats] format`, `[record] path`) is named in a warning; the rest is
//! applied. A relay slow to answer is logged after [`APPLY_PATIENCE`] and waited
//! for again: the thread ends only when the relay is gone or the [`Reloader`]
//! is dropped, and dropping it never waits long for a thread that may be
//! blocked (a hostname look-up).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use log::{debug, info, warn};
use notify::event::{EventKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::config::{Config, ConfigError, LookUp, Overrides};
use crate::relay::Control;

/// How long a file written in place must stay the same before it is read: long
/// enough for a save written in parts with a pause (issue 12 tests half a second).
pub const SETTLE: Duration = Duration::from_secs(1);
/// How long a file renamed into place (a whole new file) must be left alone.
pub const SETTLE_RENAMED: Duration = Duration::from_millis(150);
/// How long the relay may take to answer before the wait is logged (and
/// goes on).
pub const APPLY_PATIENCE: Duration = Duration::from_secs(5);
/// How long dropping a [`Reloader`] waits for its thread to end.
const STOP_WAIT: Duration = Duration::from_secs(1);

/// How one reading of the file ended.
#[derive(Debug)]
pub enum Outcome {
    /// The relay took it; what changed, as the relay's log line says it.
    Applied(String),
    /// The file says what runs already.
    Unchanged,
    /// The file can't be read or is invalid: nothing changed.
    Invalid(ConfigError),
    /// The relay could not take it (a socket could not be opened): nothing
    /// changed, and the relay logged why.
    Refused(String),
    /// The relay has not answered within [`APPLY_PATIENCE`]; the reloader
    /// waits on (the next outcome says how it ended).
    Waiting,
}

/// What wakes the reload thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// The file was written (or removed).
    Written,
    /// A file was created or renamed at the path: a whole new file.
    Replaced,
    /// SIGHUP: read the file now.
    ReadAgain,
    /// The reloader is being dropped.
    Stop,
}

/// Asks a [`Reloader`] to read its file now (what SIGHUP does); cheap to clone.
#[derive(Debug, Clone)]
pub struct Trigger(mpsc::Sender<Event>);

impl Trigger {
    /// Reads the file again as soon as the reloader is free.
    pub fn read_again(&self) {
        let _ = self.0.send(Event::ReadAgain);
    }
}

/// Where outcomes go, if anyone listens.
type Listener = Arc<Mutex<Option<mpsc::Sender<Outcome>>>>;

/// The running reloader; dropping it stops the thread.
pub struct Reloader {
    tx: mpsc::Sender<Event>,
    thread: Option<JoinHandle<()>>,
    /// Closed when the thread ends.
    ended: mpsc::Receiver<()>,
    listener: Listener,
    _watcher: Option<RecommendedWatcher>,
}

impl Reloader {
    /// Watches `path` and applies each valid version of it to the relay behind
    /// `control`, starting from `current` (what the relay runs now). `overrides`
    /// are the command-line options, which keep overriding the file. When the
    /// file can't be watched, that is logged and only [`Trigger::read_again`]
    /// reads it; the error is only that the thread could not start.
    pub fn start(
        path: &Path,
        overrides: Overrides,
        current: Config,
        control: Control,
        look_up: Arc<LookUp>,
    ) -> std::io::Result<Reloader> {
        let path = path.to_path_buf();
        let (tx, rx) = mpsc::channel();
        let watcher = match watch_file(&path, tx.clone()) {
            Ok((watcher, described)) => {
                info!("watching {described} for changes (saved changes apply at once)");
                Some(watcher)
            }
            Err(e) => {
                warn!(
                    "changes to {} will need a restart or a SIGHUP: cannot watch it ({e})",
                    path.display()
                );
                None
            }
        };
        let listener: Listener = Arc::default();
        let (ended_tx, ended) = mpsc::channel::<()>();
        let mut thread = ReloadThread {
            path,
            overrides,
            running: current,
            control,
            look_up,
            rx,
            listener: listener.clone(),
            pending: None,
        };
        let thread = std::thread::Builder::new()
            .name("reload".to_owned())
            .spawn(move || {
                let _ended = ended_tx;
                thread.run();
            })?;
        Ok(Reloader {
            tx,
            thread: Some(thread),
            ended,
            listener,
            _watcher: watcher,
        })
    }

    /// A handle that asks for a reading now (for SIGHUP).
    pub fn trigger(&self) -> Trigger {
        Trigger(self.tx.clone())
    }

    /// Every [`Outcome`] from now on (a second call takes them over).
    pub fn outcomes(&mut self) -> mpsc::Receiver<Outcome> {
        let (tx, rx) = mpsc::channel();
        *self.listener.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        rx
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        let _ = self.tx.send(Event::Stop);
        // A thread blocked in a hostname look-up is left to end with the
        // program rather than waited for.
        if let Err(RecvTimeoutError::Disconnected) = self.ended.recv_timeout(STOP_WAIT) {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        } else {
            debug!("the reload thread is still busy; not waiting for it");
        }
    }
}

/// The folder holding `path` (`.` for a bare file name).
fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Watches the folder of `path`, and of its target when it is a symbolic link
/// to another folder, sending an [`Event`] for each change to either name.
/// Returns the watcher and how to name what is watched.
fn watch_file(
    path: &Path,
    tx: mpsc::Sender<Event>,
) -> notify::Result<(RecommendedWatcher, String)> {
    let mut names: Vec<OsString> = path
        .file_name()
        .map(ToOwned::to_owned)
        .into_iter()
        .collect();
    let mut folders = vec![folder_of(path)];
    let mut described = path.display().to_string();
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if let Some(target) = std::fs::canonicalize(path).ok().filter(|_| is_link) {
        described = format!("{described} (a link to {})", target.display());
        names.extend(target.file_name().map(ToOwned::to_owned));
        let folder = folder_of(&target);
        let same = |f: &PathBuf| std::fs::canonicalize(f).is_ok_and(|f| f == folder);
        if !folders.iter().any(same) {
            folders.push(folder);
        }
    }
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let event = match event {
            // Reading the file (ours included) is not a change.
            Ok(e) if matches!(e.kind, EventKind::Access(_)) => return,
            Ok(e)
                if !e.paths.iter().any(|p| {
                    p.file_name()
                        .is_some_and(|n| names.iter().any(|ours| ours == n))
                }) =>
            {
                return
            }
            Ok(e)
                if matches!(
                    e.kind,
                    EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(_))
                ) =>
            {
                Event::Replaced
            }
            // A change, or an error from the watcher: look at the file, to be safe.
            _ => Event::Written,
        };
        let _ = tx.send(event);
    })?;
    for folder in &folders {
        watcher.watch(folder, RecursiveMode::NonRecursive)?;
    }
    Ok((watcher, described))
}

/// What can change while a file is being written: its size and modification
/// time (`None` when it can't be looked at).
fn stamp(path: &Path) -> Option<(u64, Option<SystemTime>)> {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

/// The reload thread's state.
struct ReloadThread {
    path: PathBuf,
    overrides: Overrides,
    /// What the relay runs; the keys that take effect only at start are kept
    /// as they were at the start.
    running: Config,
    control: Control,
    look_up: Arc<LookUp>,
    rx: mpsc::Receiver<Event>,
    listener: Listener,
    /// An event that came while the relay was being waited for.
    pending: Option<Event>,
}

impl ReloadThread {
    /// Waits for an event, lets the file settle, reads it, applies it; until
    /// stopped or the relay is gone.
    fn run(&mut self) {
        loop {
            let event = match self.pending.take() {
                Some(e) => e,
                None => self.rx.recv().unwrap_or(Event::Stop),
            };
            let asked = match event {
                Event::Stop => return,
                Event::ReadAgain => true,
                Event::Written | Event::Replaced => match self.settle(event == Event::Replaced) {
                    Some(asked) => asked,
                    None => return,
                },
            };
            if !self.read(asked) {
                return;
            }
        }
    }

    /// Waits until the file is stable (see the module doc); `Some(true)` if a
    /// SIGHUP came meanwhile, `None` when told to stop.
    fn settle(&mut self, mut replaced: bool) -> Option<bool> {
        let mut asked = false;
        loop {
            let before = stamp(&self.path);
            let window = if replaced { SETTLE_RENAMED } else { SETTLE };
            let deadline = Instant::now() + window;
            let quiet = loop {
                match self
                    .rx
                    .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                {
                    Ok(Event::Written) => {
                        replaced = false;
                        break false;
                    }
                    Ok(Event::Replaced) => {
                        replaced = true;
                        break false;
                    }
                    Ok(Event::ReadAgain) => asked = true,
                    Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => return None,
                    Err(RecvTimeoutError::Timeout) => break true,
                }
            };
            if quiet && stamp(&self.path) == before {
                return Some(asked);
            }
        }
    }

    /// Sends `outcome` to the listener, if any.
    fn report(&self, outcome: Outcome) {
        let listener = self.listener.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = listener.as_ref() {
            let _ = tx.send(outcome);
        }
    }

    /// Reads the file and applies it; `false` when the thread should end.
    /// `asked`: a SIGHUP asked for it (its lines say so).
    fn read(&mut self, asked: bool) -> bool {
        let path = self.path.display();
        let prefix = if asked { "SIGHUP: " } else { "" };
        let reloaded = match Config::reload_file(
            &self.path,
            &self.overrides,
            Some(&self.running),
            &*self.look_up,
        ) {
            Ok(r) => r,
            Err(e) => {
                let mut message = format!(
                    "{prefix}{path} was not reloaded (the previous configuration runs on):"
                );
                for p in &e.problems {
                    message.push_str(&format!("\n  {}: {}", p.place, p.message));
                }
                warn!("{message}");
                self.report(Outcome::Invalid(e));
                return true;
            }
        };
        for w in &reloaded.warnings {
            warn!("{}: {}", w.place, w.message);
        }
        let mut next = reloaded.config;
        let mut at_next_start = Vec::new();
        if next.stats_format != self.running.stats_format {
            at_next_start.push("[stats] format");
            next.stats_format = self.running.stats_format;
        }
        if next.record != self.running.record {
            at_next_start.push("[record] path");
            next.record.clone_from(&self.running.record);
        }
        if !at_next_start.is_empty() {
            warn!(
                "{prefix}{path}: a change to {} takes effect at the next start",
                at_next_start.join(" and ")
            );
        }
        if next == self.running {
            if asked && at_next_start.is_empty() {
                info!("SIGHUP: {path} is unchanged");
            } else {
                debug!("{path}: saved, but nothing that applies live changed");
            }
            self.report(Outcome::Unchanged);
            return true;
        }
        let reply = self.control.apply_with_reply(next.clone());
        let waited = Instant::now();
        loop {
            match reply.recv_timeout(APPLY_PATIENCE) {
                Ok(Ok(changes)) => {
                    self.running = next;
                    self.report(Outcome::Applied(changes.to_string()));
                    return true;
                }
                // The loop logged why; the next save is compared with what runs.
                Ok(Err(e)) => {
                    self.report(Outcome::Refused(e.to_string()));
                    return true;
                }
                Err(RecvTimeoutError::Timeout) => {
                    warn!(
                        "{path}: the relay has not taken the new configuration after {} s \
                         (is the computer very busy?); still waiting",
                        waited.elapsed().as_secs()
                    );
                    self.report(Outcome::Waiting);
                    // Meanwhile: a stop ends the wait, a change is read after it.
                    loop {
                        match self.rx.try_recv() {
                            Ok(Event::Stop) | Err(TryRecvError::Disconnected) => return false,
                            Ok(e) => self.pending = Some(e),
                            Err(TryRecvError::Empty) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    debug!("the relay is gone: no more reloads of {path}");
                    return false;
                }
            }
        }
    }
}
