//! Live reload: a thread off the loop notices when the config file changes (or,
//! on Unix, a SIGHUP), reads and validates it there — hostname look-ups never
//! run on the loop — and hands a valid [`Config`] to the relay through its
//! [`Control`]. The relay applies it between packets, and destinations that did
//! not change lose nothing (see [`crate::fanout::Fanout::apply`]).
//!
//! The file is watched through its folder (the `notify` crate: inotify, FSEvents,
//! ReadDirectoryChangesW), so a file that an editor saves by writing a new one
//! and renaming it over the old is noticed too; bursts of events are taken as one
//! change once the file has been quiet for [`SETTLE`]. An invalid file changes
//! nothing: the error is logged with its file, line, key and value, and the
//! previous configuration runs on.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, warn};
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::config::{Config, LookUp, Overrides};
use crate::relay::Control;

/// How long the file must be quiet before it is read: editors write in steps.
pub const SETTLE: Duration = Duration::from_millis(150);
/// The longest a stream of changes delays a read.
const MAX_SETTLE: Duration = Duration::from_millis(700);
/// How long to wait for the loop to say how the new configuration went.
const APPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the reload thread wakes.
enum Trigger {
    /// Something happened to the file (or its folder entry).
    Changed,
    /// SIGHUP: read the file now.
    #[cfg(unix)]
    Signal,
    /// The relay is stopping.
    Stop,
}

/// The running watcher; dropping it stops the thread.
pub struct Reloader {
    tx: mpsc::Sender<Trigger>,
    thread: Option<JoinHandle<()>>,
    _watcher: RecommendedWatcher,
    #[cfg(unix)]
    signals: Option<signal_hook::iterator::Handle>,
}

impl Reloader {
    /// Watches `path` and applies each valid version of it to the relay behind
    /// `control`, starting from `current` (what the relay runs now). `overrides`
    /// are the command-line options, which keep overriding the file.
    pub fn start(
        path: &Path,
        overrides: Overrides,
        current: Config,
        control: Control,
        look_up: Arc<LookUp>,
    ) -> notify::Result<Reloader> {
        let path = path.to_path_buf();
        let (tx, rx) = mpsc::channel();
        let name = path.file_name().map(ToOwned::to_owned);
        let events = tx.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let ours = match &event {
                    // Reading the file (ours included) is not a change.
                    Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => false,
                    Ok(e) => e.paths.iter().any(|p| p.file_name() == name.as_deref()),
                    // An error from the watcher: look at the file, to be safe.
                    Err(_) => true,
                };
                if ours {
                    let _ = events.send(Trigger::Changed);
                }
            })?;
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        watcher.watch(&folder, RecursiveMode::NonRecursive)?;
        #[cfg(unix)]
        let signals = hangups(tx.clone());
        let thread = std::thread::Builder::new()
            .name("reload".to_owned())
            .spawn(move || watch(&path, &overrides, current, &control, &*look_up, &rx))
            .map_err(notify::Error::io)?;
        Ok(Reloader {
            tx,
            thread: Some(thread),
            _watcher: watcher,
            #[cfg(unix)]
            signals,
        })
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(signals) = &self.signals {
            signals.close();
        }
        let _ = self.tx.send(Trigger::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// SIGHUP asks for a reload; `None` (with a warning) when it can't be caught.
#[cfg(unix)]
fn hangups(tx: mpsc::Sender<Trigger>) -> Option<signal_hook::iterator::Handle> {
    let mut signals = match signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP]) {
        Ok(s) => s,
        Err(e) => {
            warn!("SIGHUP will not reload the configuration: {e}");
            return None;
        }
    };
    let handle = signals.handle();
    let spawned = std::thread::Builder::new()
        .name("sighup".to_owned())
        .spawn(move || {
            for _ in signals.forever() {
                if tx.send(Trigger::Signal).is_err() {
                    break;
                }
            }
        });
    if let Err(e) = spawned {
        warn!("SIGHUP will not reload the configuration: {e}");
    }
    Some(handle)
}

/// The reload thread: wait for a trigger, let the file settle, read, apply.
fn watch(
    path: &Path,
    overrides: &Overrides,
    mut current: Config,
    control: &Control,
    look_up: &LookUp,
    rx: &mpsc::Receiver<Trigger>,
) {
    loop {
        match rx.recv() {
            Ok(Trigger::Changed) => {
                if !settle(rx) {
                    return;
                }
            }
            #[cfg(unix)]
            Ok(Trigger::Signal) => log::info!("SIGHUP: reading {} again", path.display()),
            Ok(Trigger::Stop) | Err(_) => return,
        }
        let reloaded = match Config::reload_file(path, overrides, Some(&current), look_up) {
            Ok(r) => r,
            Err(e) => {
                let mut message = format!(
                    "{} was not reloaded (the previous configuration runs on):",
                    path.display()
                );
                for p in &e.problems {
                    message.push_str(&format!("\n  {}: {}", p.place, p.message));
                }
                warn!("{message}");
                continue;
            }
        };
        for w in &reloaded.warnings {
            warn!("{}: {}", w.place, w.message);
        }
        if reloaded.config.record != current.record {
            warn!(
                "{}: a change to [record] takes effect at the next start",
                path.display()
            );
        }
        if reloaded.config == current {
            debug!("{}: saved, but nothing changed", path.display());
            continue;
        }
        match control.apply_and_wait(reloaded.config.clone(), APPLY_TIMEOUT) {
            Some(Ok(_)) => current = reloaded.config,
            // The loop logged why; the next save is compared with what runs.
            Some(Err(_)) => {}
            None => return,
        }
    }
}

/// Waits until no change has come for [`SETTLE`] (at most [`MAX_SETTLE`]);
/// `false` when told to stop meanwhile.
fn settle(rx: &mpsc::Receiver<Trigger>) -> bool {
    let deadline = Instant::now() + MAX_SETTLE;
    loop {
        let wait = SETTLE.min(deadline.saturating_duration_since(Instant::now()));
        match rx.recv_timeout(wait) {
            Ok(Trigger::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
            Ok(_) if Instant::now() < deadline => {}
            Ok(_) | Err(RecvTimeoutError::Timeout) => return true,
        }
    }
}
