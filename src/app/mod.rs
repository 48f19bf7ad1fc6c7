//! The composition root: the relay on a thread of its own, the observers
//! around it, and the one signal setup of the program.
//!
//! An [`App`] takes a bound [`Relay`] and any number of [`Observer`]s, each one
//! line: the summary printer, the recorder, the reloader, the live view
//! (`run --watch`), and whatever comes next (a web page). Each observer attaches
//! itself before the relay runs, through what [`Attach`] offers: the relay's
//! [`Control`] (stop, reconfigure, snapshots), a tap of every admitted
//! datagram, the periodic summaries, SIGHUP. At most one observer owns the
//! calling thread while the relay runs (the terminal: [`Observer::foreground`]);
//! when it returns, the relay is stopped. Once the relay has stopped, the
//! observers are finished in the order they were added, each given the final
//! snapshot: the reloader stops, the recording is closed, the final summary is
//! printed.
//!
//! [`Signals`] is installed once per process by `main` and shared by every
//! subcommand: SIGINT, SIGTERM and, on Windows, Ctrl-C, Ctrl-Break and the
//! console closing set its stop flag (what `watch`, `export`, `simulate`,
//! `replay` and `demo` check) and stop a running app's relay; SIGHUP reads the
//! configuration file again when a reloader is attached, and is otherwise
//! logged and ignored. No signal ends the program by itself, so every
//! subcommand ends the same way: its output flushed, its summary printed, the
//! terminal restored. Two exceptions keep a program from outliving its reason
//! to run: a SIGHUP whose terminal is gone (its window was closed: Unix's
//! counterpart of Windows' console closing) stops it, and a program still
//! running [`STOP_GRACE`] after a stop signal (something stuck in a write, or
//! in a terminal library) exits.

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use log::{error, info, warn};

use crate::platform::{self, Signal};
use crate::relay::{Control, Relay};
use crate::report::Snapshot;
use crate::tap::{self, Tap};

pub mod observers;
pub mod races;

/// Why a command failed: what to print, and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// 1: could not start or failed while running; 2: a bad option or
    /// configuration.
    pub code: u8,
    /// What to print, as it is: each line an `error: …`, or a help text.
    pub message: String,
}

impl Failure {
    /// A bad option or configuration (exit code 2): `error: {message}`.
    pub fn usage(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: 2,
            message: format!("error: {message}"),
        }
    }

    /// Could not start, or failed while running (exit code 1): `error: {message}`.
    pub fn start(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: 1,
            message: format!("error: {message}"),
        }
    }

    /// A help text instead of an error (exit code 2): nothing to run.
    pub fn help(text: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: text.into(),
        }
    }
}

/// What a write to standard output that failed means: a reader that is gone
/// (`| head`, `| true`) ends the command quietly; anything else is an error.
pub fn to_stdout(result: std::io::Result<()>) -> Result<(), Failure> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::start(format!(
            "cannot write to standard output: {e}"
        ))),
        _ => Ok(()),
    }
}

/// How long a program may take to end after a stop signal before it exits
/// anyway.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// What the hooks of a running app do on a signal.
type Hook = Box<dyn Fn() + Send>;

#[derive(Default)]
struct Hooks {
    stop: Vec<Hook>,
    reload: Option<Hook>,
}

#[derive(Default)]
struct Shared {
    stop: Arc<AtomicBool>,
    hooks: Mutex<Hooks>,
    /// Which of stdin, stdout and stderr were terminals at the start.
    terminals: [bool; 3],
}

/// The program's one signal setup (see the module doc). Clones share it.
#[derive(Clone, Default)]
pub struct Signals {
    shared: Arc<Shared>,
}

impl Signals {
    /// Catches the stop and reload signals of the platform for the whole
    /// process, from now on. Call it once, in `main`; when it can't, that is
    /// logged and the signals do what they do by default.
    pub fn install() -> Signals {
        let signals = Signals {
            shared: Arc::new(Shared {
                terminals: terminals(),
                ..Shared::default()
            }),
        };
        let delivered = signals.clone();
        let watchdog = std::sync::Once::new();
        if let Err(e) = platform::on_signals(move |signal| match signal {
            Signal::Reload if delivered.terminal_gone() => {
                info!("SIGHUP: the terminal is gone; stopping");
                delivered.stop();
                watchdog.call_once(exit_after_grace);
            }
            Signal::Reload => delivered.reload(),
            Signal::Stop => {
                delivered.stop();
                watchdog.call_once(exit_after_grace);
            }
        }) {
            warn!("Ctrl-C and SIGTERM will stop the program without its summary: {e}");
        }
        signals
    }

    /// Whether the program started on a terminal that has since hung up.
    fn terminal_gone(&self) -> bool {
        let was = self.shared.terminals;
        let now = terminals();
        was.iter().any(|&w| w) && was.iter().zip(now).all(|(&w, n)| !w || !n)
    }

    fn hooks(&self) -> MutexGuard<'_, Hooks> {
        // A hook that panicked leaves plain data, still usable.
        self.shared.hooks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a stop signal does: sets the stop flag and stops the running app.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for hook in &self.hooks().stop {
            hook();
        }
    }

    /// What SIGHUP does: asks the reloader to read the file again, or says
    /// that there is none.
    pub fn reload(&self) {
        match &self.hooks().reload {
            Some(hook) => hook(),
            None => info!("SIGHUP ignored: no configuration file to reload"),
        }
    }

    /// Whether a stop signal came.
    pub fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    /// The flag a stop signal sets, for loops that check it.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.shared.stop.clone()
    }

    /// Runs `hook` on every stop signal until [`Signals::clear`].
    fn on_stop(&self, hook: impl Fn() + Send + 'static) {
        self.hooks().stop.push(Box::new(hook));
    }

    /// Runs `hook` on SIGHUP (instead of ignoring it) until [`Signals::clear`].
    fn on_reload(&self, hook: impl Fn() + Send + 'static) {
        self.hooks().reload = Some(Box::new(hook));
    }

    /// Forgets the hooks of an app that has ended.
    fn clear(&self) {
        *self.hooks() = Hooks::default();
    }
}

/// Whether stdin, stdout and stderr are terminals.
fn terminals() -> [bool; 3] {
    [
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
        std::io::stderr().is_terminal(),
    ]
}

/// Exits the program if it is still running [`STOP_GRACE`] from now.
fn exit_after_grace() {
    let spawned = std::thread::Builder::new()
        .name("stop-grace".to_owned())
        .spawn(|| {
            std::thread::sleep(STOP_GRACE);
            error!(
                "still stopping {} s after the stop signal: exiting now",
                STOP_GRACE.as_secs()
            );
            crate::logging::flush();
            std::process::exit(1);
        });
    if let Err(e) = spawned {
        warn!("a stop that gets stuck will not end the program: {e}");
    }
}

/// A thread or a screen that watches or steers the relay (see the module doc).
pub trait Observer {
    /// Attaches to the relay before it runs: takes a [`Control`], a tap or the
    /// summaries from `relay`, and starts its threads. An error ends the app
    /// before the relay runs.
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure>;

    /// Whether it needs the calling thread while the relay runs (a screen).
    /// At most one observer of an app may.
    fn in_foreground(&self) -> bool {
        false
    }

    /// Runs on the calling thread while the relay runs, until the user quits
    /// or `relay_done` is set; the relay is stopped when it returns. Called
    /// only when [`Observer::in_foreground`] says so.
    fn foreground(&mut self, _relay_done: &Arc<AtomicBool>) -> Result<(), Failure> {
        Ok(())
    }

    /// After the relay stopped, in the order the observers were added: ends
    /// its threads and says what it has to say; `last` is the relay's final
    /// snapshot, which an observer that counts after the stop (a recording
    /// writing what its tap still held) completes for those after it.
    fn finish(self: Box<Self>, last: &mut Snapshot) -> Result<(), Failure>;
}

/// What an observer may take from the relay as it starts.
pub struct Attach<'a> {
    relay: &'a mut Relay,
    signals: &'a Signals,
}

impl Attach<'_> {
    /// A handle that stops, reconfigures or asks the relay from any thread.
    pub fn control(&self) -> Control {
        self.relay.control()
    }

    /// A copy of every datagram the relay admits from now on; the loop never
    /// waits for its reader (a full tap drops and counts).
    pub fn tap(&mut self) -> Tap {
        let (producer, consumer) = tap::tap(tap::DEFAULT_CAPACITY);
        self.relay.attach(producer);
        consumer
    }

    /// The periodic summaries; one observer takes them.
    pub fn summaries(&mut self) -> mpsc::Receiver<Snapshot> {
        self.relay.summaries()
    }

    /// The address the relay listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.relay.local_addr()
    }

    /// What stops the app as a stop signal does (the tray's Quit).
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let signals = self.signals.clone();
        move || signals.stop()
    }

    /// Calls `read_again` on SIGHUP, as long as the app runs.
    pub fn on_reload(&self, read_again: impl Fn() + Send + 'static) {
        self.signals.on_reload(read_again);
    }
}

/// A relay and its observers, before they run.
pub struct App {
    relay: Relay,
    signals: Signals,
    observers: Vec<Box<dyn Observer>>,
}

impl App {
    /// An app around `relay`, stopped by `signals`.
    pub fn new(relay: Relay, signals: &Signals) -> App {
        App {
            relay,
            signals: signals.clone(),
            observers: Vec::new(),
        }
    }

    /// Adds an observer; observers start and finish in the order added.
    pub fn observe(&mut self, observer: impl Observer + 'static) -> &mut App {
        self.observers.push(Box::new(observer));
        self
    }

    /// Starts every observer, then the relay on its own thread.
    pub fn start(self) -> Result<Running, Failure> {
        let App {
            mut relay,
            signals,
            observers,
        } = self;
        let control = relay.control();
        let mut started: Vec<Box<dyn Observer>> = Vec::with_capacity(observers.len());
        for mut observer in observers {
            let result = observer.start(&mut Attach {
                relay: &mut relay,
                signals: &signals,
            });
            if let Err(failure) = result {
                signals.clear();
                let mut now = relay.snapshot();
                for observer in started {
                    let _ = observer.finish(&mut now);
                }
                return Err(failure);
            }
            started.push(observer);
        }
        let stop = control.clone();
        signals.on_stop(move || stop.stop());
        // A stop that came while the app was starting.
        if signals.stopped() {
            control.stop();
        }
        let done = Arc::new(AtomicBool::new(false));
        let set_done = done.clone();
        let thread = std::thread::Builder::new()
            .name("relay".to_owned())
            .spawn(move || {
                // Set however the loop ends, a panic too, so a screen ends.
                let _done = SetOnDrop(&set_done);
                let last = relay.run();
                // Dropped here: the summaries channel closes.
                drop(relay);
                last
            })
            .map_err(|e| Failure::start(format!("cannot start the relay's thread: {e}")))?;
        Ok(Running {
            thread,
            control,
            done,
            signals,
            observers: started,
        })
    }
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A running app.
pub struct Running {
    thread: JoinHandle<Snapshot>,
    control: Control,
    done: Arc<AtomicBool>,
    signals: Signals,
    observers: Vec<Box<dyn Observer>>,
}

impl Running {
    /// A handle on the running relay.
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// Runs until the relay stops (a signal, an observer, the foreground
    /// observer quitting), then finishes every observer and returns the final
    /// snapshot, or the first failure (after finishing the others anyway).
    pub fn wait(mut self) -> Result<Snapshot, Failure> {
        let mut failure = None;
        if let Some(shown) = self.observers.iter_mut().find(|o| o.in_foreground()) {
            failure = shown.foreground(&self.done).err();
            // The screen is gone, for whatever reason: so is the relay.
            self.control.stop();
        }
        let mut last = match self.thread.join() {
            Ok(last) => last,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        self.signals.clear();
        for observer in self.observers {
            if let Err(e) = observer.finish(&mut last) {
                failure.get_or_insert(e);
            }
        }
        match failure {
            Some(f) => Err(f),
            None => Ok(last),
        }
    }
}

/// Waits at most `timeout` for `thread` to end and returns its result; `None`
/// (the thread left to end with the program) when it is still busy: a thread
/// blocked on a pipe or the disk is never waited for forever.
pub fn join_within<T>(
    thread: JoinHandle<T>,
    ended: &mpsc::Receiver<()>,
    timeout: Duration,
) -> Option<T> {
    match ended.recv_timeout(timeout) {
        Err(mpsc::RecvTimeoutError::Disconnected) | Ok(()) => thread.join().ok(),
        Err(mpsc::RecvTimeoutError::Timeout) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_stop_sets_the_flag_and_runs_the_hooks_until_cleared() {
        let signals = Signals::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        signals.on_stop(move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        assert!(!signals.stopped());
        signals.stop();
        assert!(signals.stopped());
        assert!(signals.stop_flag().load(Ordering::SeqCst));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        signals.clear();
        signals.stop();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "cleared");
    }

    #[test]
    fn sighup_reaches_the_reload_hook_only_while_one_is_set() {
        let signals = Signals::default();
        let calls = Arc::new(AtomicUsize::new(0));
        signals.reload();
        let c = calls.clone();
        signals.on_reload(move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        signals.reload();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        signals.clear();
        signals.reload();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(!signals.stopped(), "SIGHUP never stops");
    }
}
