//! The configuration's one owner (issue 23): a thread off the loop that holds
//! the one current configuration and is the only caller of the relay's apply.
//! Everything that changes the configuration goes through it, and it answers
//! with what the relay did:
//! - the file, when there is one: watched, and read again once a save has
//!   settled or on SIGHUP ([`Trigger`]);
//! - editors (the web page): an [`Edit`] sent through an [`Editor`], made to
//!   the file's text when there is a file (toml_edit: comments stay), to the
//!   running list when there is none, validated once, applied, and answered
//!   with the relay's [`Applied`] or an [`EditError`] naming the field.
//!
//! Nobody else keeps a copy: the page, `doctor` and the summaries read the
//! relay's snapshot, which carries each destination's settings and the file's
//! last error (`config.error`, [`crate::relay::Control::config_state`]).
//!
//! Reading the file (issue 12): it is watched through its folder, and through
//! its target's folder too when it is a symbolic link (the `notify` crate:
//! inotify, FSEvents, ReadDirectoryChangesW). A change is read only once the
//! file is stable, so that a save written in parts is never applied half-way:
//! a file renamed into place, as most editors save, once nothing has happened
//! to it for [`SETTLE_RENAMED`]; a file written in place once nothing has
//! happened to it for [`SETTLE`] and its size and modification time are the
//! same at both ends of that window. Every read goes through
//! [`crate::config::read_text`]: a regular file (a FIFO would block `open`
//! forever), at most 1 MiB, UTF-8.
//!
//! Editing the file ([`text`]): an edit is made only onto the text the running
//! configuration came from; a file that differs (saved by hand and not yet
//! read, half-saved, empty, or holding an error) is not touched, and the editor
//! is told to reload. The new text keeps the file's byte-order mark and line
//! endings, is written beside the file (through a symbolic link, to its
//! target) with its permissions and owner, compared once more with what was
//! read, and renamed over it. The relay takes the edit before the file is
//! replaced; if the file can't be replaced, the relay goes back to what it ran.
//!
//! Every reading of the file ends in one [`Outcome`], logged and sent to
//! whoever listens ([`Owner::outcomes`]): an invalid file changes nothing (each
//! problem is logged with its file, line, key and value, the previous
//! configuration runs on, and the snapshot's `config.error` says it until a
//! save applies, which the log says too); a file that says what runs already is
//! said to be unchanged (in one line for a SIGHUP); a key that only takes
//! effect at the next start (`[stats] format`, `[record] path`) is named in a
//! warning; the rest is applied. A relay slow to answer is logged after
//! [`APPLY_PATIENCE`] and waited for again: the thread ends only when the relay
//! is gone or the [`Owner`] is dropped, and dropping it never waits long for a
//! thread that may be blocked (a hostname look-up, a slow disk).

pub mod edit;
mod editor;
pub mod text;
mod ticket;
mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use notify::RecommendedWatcher;

pub use edit::{Edit, EditError, Failed};
use editor::Answer;
pub use editor::{Edited, Editor};
pub use ticket::Ticket;
use watch::{stamp, watch_file};

use crate::config::{self, Config, ConfigError, LookUp, Overrides};
use crate::relay::{Applied, Control, StartError};

/// How long a file written in place must stay the same before it is read: long
/// enough for a save written in parts with a pause (issue 12 tests half a second).
pub const SETTLE: Duration = Duration::from_secs(1);
/// How long a file renamed into place (a whole new file) must be left alone.
pub const SETTLE_RENAMED: Duration = Duration::from_millis(150);
/// How long the relay may take to answer before the wait is logged (and
/// goes on).
pub const APPLY_PATIENCE: Duration = Duration::from_secs(5);
/// How long an editor waits for the owner's answer: an edit never waits on a
/// FIFO, a slow disk or a hostname look-up for ever.
pub const EDIT_WAIT: Duration = Duration::from_secs(5);
/// How long an editor waits more for an edit the owner committed to when
/// [`EDIT_WAIT`] ran out: the relay is taking it.
pub const COMMITTED_WAIT: Duration = Duration::from_secs(3);
/// How long dropping an [`Owner`] waits for its thread to end.
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
    /// The relay has not answered within [`APPLY_PATIENCE`]; the owner
    /// waits on (the next outcome says how it ended).
    Waiting,
}

/// What wakes the owner's thread.
enum Event {
    /// The file was written (or removed).
    Written,
    /// A file was created or renamed at the path: a whole new file.
    Replaced,
    /// SIGHUP: read the file now.
    ReadAgain,
    /// An editor's change, the editor's ticket (given up: not made), and
    /// where to answer.
    Edit(Box<Edit>, Ticket, Answer),
    /// The owner is being dropped.
    Stop,
}

/// Asks an [`Owner`] to read its file now (what SIGHUP does); cheap to clone.
#[derive(Clone)]
pub struct Trigger(mpsc::Sender<Event>);

impl Trigger {
    /// Reads the file again as soon as the owner is free.
    pub fn read_again(&self) {
        let _ = self.0.send(Event::ReadAgain);
    }
}

/// What moves the web page when `[web] addr` changes in the file: the page
/// (above the owner) hands one in ([`Owner::move_page_with`]).
pub trait PageMover: Send {
    /// Serves the page on `addr` (`None`: no page), closing the old address;
    /// `false` when it can't (the page said why in the log, and stays where
    /// it was).
    fn move_to(&mut self, addr: Option<SocketAddr>) -> bool;
}

/// Where outcomes go, if anyone listens.
type Listener = Arc<Mutex<Option<mpsc::Sender<Outcome>>>>;

/// What moves the page, once the page is there.
type Mover = Arc<Mutex<Option<Box<dyn PageMover>>>>;

/// The running owner; dropping it stops the thread.
pub struct Owner {
    tx: mpsc::Sender<Event>,
    thread: Option<JoinHandle<()>>,
    /// Closed when the thread ends.
    ended: mpsc::Receiver<()>,
    listener: Listener,
    mover: Mover,
    _watcher: Option<RecommendedWatcher>,
}

impl Owner {
    /// Owns `current`, what the relay behind `control` runs, read from the
    /// file at `path` (`None`: from the command line, and edits last until
    /// the relay stops). `overrides` are the command-line options, which keep
    /// overriding the file. When the file can't be watched, that is logged and
    /// only [`Trigger::read_again`] reads it; the error is only that the
    /// thread could not start.
    pub fn start(
        path: Option<&Path>,
        overrides: Overrides,
        current: Config,
        control: Control,
        look_up: Arc<LookUp>,
    ) -> std::io::Result<Owner> {
        let (tx, rx) = mpsc::channel();
        let watcher = path.and_then(|path| match watch_file(path, tx.clone()) {
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
        });
        let listener: Listener = Arc::default();
        let mover: Mover = Arc::default();
        let (ended_tx, ended) = mpsc::channel::<()>();
        let mut thread = OwnerThread {
            file: path.map(|path| File {
                path: path.to_path_buf(),
                read: None,
                error: None,
            }),
            overrides,
            running: current,
            control,
            look_up,
            rx,
            listener: listener.clone(),
            mover: mover.clone(),
            pending: None,
        };
        let thread = std::thread::Builder::new()
            .name("config".to_owned())
            .spawn(move || {
                let _ended = ended_tx;
                thread.run();
            })?;
        Ok(Owner {
            tx,
            thread: Some(thread),
            ended,
            listener,
            mover,
            _watcher: watcher,
        })
    }

    /// A handle that asks for a reading now (for SIGHUP).
    pub fn trigger(&self) -> Trigger {
        Trigger(self.tx.clone())
    }

    /// A handle that sends edits (for the web page).
    pub fn editor(&self) -> Editor {
        Editor(self.tx.clone())
    }

    /// Moves the page with `mover` when a saved file changes `[web] addr`
    /// (issue 30); without one, such a change takes effect at the next start.
    pub fn move_page_with(&self, mover: Box<dyn PageMover>) {
        *self.mover.lock().unwrap_or_else(|e| e.into_inner()) = Some(mover);
    }

    /// Every [`Outcome`] of a reading from now on (a second call takes them
    /// over).
    pub fn outcomes(&mut self) -> mpsc::Receiver<Outcome> {
        let (tx, rx) = mpsc::channel();
        *self.listener.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        rx
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.tx.send(Event::Stop);
        // A thread blocked in a hostname look-up is left to end with the
        // program rather than waited for.
        if let Err(RecvTimeoutError::Disconnected) = self.ended.recv_timeout(STOP_WAIT) {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        } else {
            debug!("the configuration's thread is still busy; not waiting for it");
        }
    }
}

/// The configuration file, as the owner knows it.
struct File {
    path: PathBuf,
    /// The text the running configuration came from (`None` until it is
    /// known): the only text an edit is made to.
    read: Option<String>,
    /// Why the last saved version was not applied; `None` once one applies.
    error: Option<String>,
}

/// The owner's thread.
struct OwnerThread {
    /// `None`: the configuration came from the command line.
    file: Option<File>,
    overrides: Overrides,
    /// What the relay runs; the keys that take effect only at start are kept
    /// as they were at the start.
    running: Config,
    control: Control,
    look_up: Arc<LookUp>,
    rx: mpsc::Receiver<Event>,
    listener: Listener,
    mover: Mover,
    /// An event that came while the relay was being waited for.
    pending: Option<Event>,
}

/// How a wait for the relay ended.
enum Answered {
    Yes(Result<Applied, StartError>),
    /// The relay is gone, or the owner is being stopped.
    Gone,
}

impl OwnerThread {
    /// Learns the text the running configuration came from, then waits for
    /// events until stopped or the relay is gone.
    fn run(&mut self) {
        self.publish();
        if self.file.is_some() && !self.read_at_start() {
            return;
        }
        loop {
            let event = match self.pending.take() {
                Some(e) => e,
                None => self.rx.recv().unwrap_or(Event::Stop),
            };
            let asked = match event {
                Event::Stop => return,
                Event::ReadAgain => true,
                Event::Edit(edit, ticket, answer) => {
                    let _ = answer.send(self.edit(&edit, &ticket));
                    continue;
                }
                Event::Written | Event::Replaced => {
                    match self.settle(matches!(event, Event::Replaced)) {
                        Some(asked) => asked,
                        None => return,
                    }
                }
            };
            if !self.read(asked) {
                return;
            }
        }
    }

    /// Reads the file once at the start: its text is what the running
    /// configuration came from when it says the same; if it was saved since
    /// the relay read it, it is applied as any save. `false` when the thread
    /// should end.
    fn read_at_start(&mut self) -> bool {
        let Some(file) = &mut self.file else {
            return true;
        };
        let text = text::read(&file.path).ok();
        let same = text.as_deref().is_some_and(|text| {
            Config::from_toml_at(
                text,
                &file.path,
                &self.overrides,
                Some(&self.running),
                &*self.look_up,
            )
            .is_ok_and(|r| same_but_start_keys(&r.config, &self.running))
        });
        if same {
            file.read = text;
            return true;
        }
        self.read(false)
    }

    /// Tells the relay the file's state, for the snapshot's `config`.
    fn publish(&self) {
        let (path, error) = match &self.file {
            Some(f) => (Some(f.path.display().to_string()), f.error.clone()),
            None => (None, None),
        };
        self.control.config_state(path, error);
    }

    /// Waits until the file is stable (see the module doc), answering edits
    /// meanwhile; `Some(true)` if a SIGHUP came meanwhile, `None` when told to
    /// stop.
    fn settle(&mut self, mut replaced: bool) -> Option<bool> {
        let path = self.file.as_ref()?.path.clone();
        let mut asked = false;
        loop {
            let before = stamp(&path);
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
                    // The file is changing: the edit sees that it is not the
                    // text that runs, and is refused without waiting.
                    Ok(Event::Edit(edit, ticket, answer)) => {
                        let _ = answer.send(self.edit(&edit, &ticket));
                    }
                    Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => return None,
                    Err(RecvTimeoutError::Timeout) => break true,
                }
            };
            if quiet && stamp(&path) == before {
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

    /// Records that the saved file could not be applied, for the snapshot.
    fn failed(&mut self, error: String) {
        if let Some(file) = &mut self.file {
            if file.error.as_ref() != Some(&error) {
                file.error = Some(error);
                self.publish();
            }
        }
    }

    /// Records that the saved file runs (its text is what an edit is made
    /// to), and says so when it mends an earlier error.
    fn succeeded(&mut self, text: Option<String>) {
        let Some(file) = &mut self.file else {
            return;
        };
        if text.is_some() {
            file.read = text;
        }
        if file.error.take().is_some() {
            info!(
                "{} applied (the earlier error is fixed)",
                file.path.display()
            );
            self.publish();
        }
    }

    /// Sends `next` to the relay and waits for its answer, logging a slow one
    /// every [`APPLY_PATIENCE`] (meanwhile a stop ends the wait and other
    /// events wait their turn).
    fn apply(&mut self, next: &Config, what: &str) -> Answered {
        let reply = self.control.apply_with_reply(next.clone());
        let waited = Instant::now();
        loop {
            match reply.recv_timeout(APPLY_PATIENCE) {
                Ok(answer) => return Answered::Yes(answer),
                Err(RecvTimeoutError::Timeout) => {
                    warn!(
                        "{what}: the relay has not taken the new configuration after {} s \
                         (is the computer very busy?); still waiting",
                        waited.elapsed().as_secs()
                    );
                    self.report(Outcome::Waiting);
                    loop {
                        match self.rx.try_recv() {
                            Ok(Event::Stop) | Err(TryRecvError::Disconnected) => {
                                return Answered::Gone
                            }
                            // An editor waits no longer than EDIT_WAIT anyway.
                            Ok(Event::Edit(_, _, answer)) => {
                                let _ = answer.send(Err(EditError::new(
                                    Failed::Unavailable,
                                    "the relay is busy taking another change: try again",
                                )));
                            }
                            Ok(e) => self.pending = Some(e),
                            Err(TryRecvError::Empty) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Answered::Gone,
            }
        }
    }

    /// Reads the file and applies it; `false` when the thread should end.
    /// `asked`: a SIGHUP asked for it (its lines say so).
    fn read(&mut self, asked: bool) -> bool {
        let Some(file) = &self.file else {
            if asked {
                info!("SIGHUP ignored: no configuration file to reload");
            }
            return true;
        };
        let path = file.path.clone();
        let shown = path.display().to_string();
        let prefix = if asked { "SIGHUP: " } else { "" };
        let read = text::read(&path).and_then(|text| {
            Config::from_toml_at(
                &text,
                &path,
                &self.overrides,
                Some(&self.running),
                &*self.look_up,
            )
            .map(|r| (text, r))
        });
        let (text, reloaded) = match read {
            Ok(r) => r,
            Err(e) => {
                let mut message = format!(
                    "{prefix}{shown} was not reloaded (the previous configuration runs on):"
                );
                for p in &e.problems {
                    message.push_str(&format!("\n  {}: {}", p.place, p.message));
                }
                warn!("{message}");
                self.failed(e.to_string());
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
        // The page moves once the rest is applied (issue 30: a new address
        // was ignored in silence); the relay itself has no part in it.
        let web = std::mem::replace(&mut next.web, self.running.web);
        let mover = self.mover.clone();
        let mut mover = mover.lock().unwrap_or_else(|e| e.into_inner());
        if web != self.running.web && mover.is_none() {
            at_next_start.push("[web] addr");
        }
        if !at_next_start.is_empty() {
            warn!(
                "{prefix}{shown}: a change to {} takes effect at the next start",
                at_next_start.join(" and ")
            );
        }
        if next == self.running {
            if move_page(&mut self.running, &mut mover, web) {
                self.succeeded(Some(text));
                self.report(Outcome::Applied("the web page moved".to_owned()));
                return true;
            }
            if asked && at_next_start.is_empty() && web == self.running.web {
                info!("SIGHUP: {shown} is unchanged");
            } else {
                debug!("{shown}: saved, but nothing that applies live changed");
            }
            self.succeeded(Some(text));
            self.report(Outcome::Unchanged);
            return true;
        }
        match self.apply(&next, &shown) {
            Answered::Yes(Ok(changes)) => {
                self.running = next;
                move_page(&mut self.running, &mut mover, web);
                self.succeeded(Some(text));
                self.report(Outcome::Applied(changes.to_string()));
                true
            }
            // The loop logged why; the next save is compared with what runs.
            Answered::Yes(Err(e)) => {
                self.failed(format!("{shown}: {e}"));
                self.report(Outcome::Refused(e.to_string()));
                true
            }
            Answered::Gone => {
                debug!("the relay is gone: no more reloads of {shown}");
                false
            }
        }
    }

    /// Makes an editor's change: validated (the problems of what the editor
    /// wrote named by field), applied, saved in the file if there is one;
    /// not at all if the editor gave `ticket` up before it was applied.
    fn edit(&mut self, edit: &Edit, ticket: &Ticket) -> Result<Edited, EditError> {
        if ticket.is_abandoned() {
            return Err(given_up(edit));
        }
        let at = match edit {
            Edit::Add(_) => None,
            Edit::Change(name, _) | Edit::Remove(name) => Some(
                self.running
                    .destinations
                    .iter()
                    .position(|d| d.name == *name)
                    .ok_or_else(|| {
                        EditError::new(
                            Failed::Conflict,
                            format!(
                                "no destination is called {name:?} (any more): reload the page"
                            ),
                        )
                    })?,
            ),
        };
        let spec = match edit {
            Edit::Add(d) | Edit::Change(_, d) => Some(d),
            Edit::Remove(_) => None,
        };
        let mut note = None;
        if let Some(d) = spec {
            if d.name.trim().is_empty() {
                return Err(EditError::field(
                    config::field::NAME,
                    "a destination needs a name",
                ));
            }
            if d.addr.trim().is_empty() {
                return Err(EditError::field(
                    config::field::ADDRESS,
                    "a destination needs an address, like 192.168.1.50:5300",
                ));
            }
            // Before anything is read: what the editor may not ask of the
            // secrets (issue 30).
            let was = at.and_then(|i| self.running.destinations.get(i));
            let folder = self.file.as_ref().and_then(|f| f.path.parent());
            note = config::admit(d, was, folder).map_err(|e| field_error(&e))?;
        }
        let mut next = self
            .running
            .splice(at, spec, &*self.look_up)
            .map_err(|e| field_error(&e))?;
        let saving = match &self.file {
            None => None,
            Some(file) => {
                let (text, config) = self.edit_file(file, edit)?;
                next = config;
                Some((file.path.clone(), text))
            }
        };
        let what = edit.describe();
        // The last moment the editor can still give it up (issue 30: an edit
        // answered 408 was applied 81 s later).
        if !ticket.commit() {
            return Err(given_up(edit));
        }
        let applied = match self.apply(&next, &what) {
            Answered::Yes(Ok(applied)) => applied,
            Answered::Yes(Err(e)) => {
                return Err(EditError::new(
                    Failed::Refused,
                    format!("nothing changed: {e}"),
                ))
            }
            Answered::Gone => {
                return Err(EditError::new(Failed::Unavailable, "the relay is stopping"))
            }
        };
        let previous = std::mem::replace(&mut self.running, next);
        let mut message = format!("{what}: {applied}");
        if let Some((path, new_text)) = &saving {
            let read = self
                .file
                .as_ref()
                .and_then(|f| f.read.clone())
                .unwrap_or_default();
            if let Err(e) = text::replace(path, &read, new_text) {
                // The relay goes back to what the file still says.
                let failed = match e {
                    text::WriteError::Changed | text::WriteError::ReadOnly(_) => Failed::Conflict,
                    text::WriteError::Io(..) => Failed::Refused,
                };
                if !matches!(self.apply(&previous, &what), Answered::Yes(Ok(_))) {
                    warn!("{what}: the relay could not go back to {}", path.display());
                }
                self.running = previous;
                return Err(EditError::new(failed, format!("nothing changed: {e}")));
            }
            self.succeeded(Some(new_text.clone()));
            message.push_str(&format!("; saved in {}", path.display()));
        } else {
            message.push_str(" (not saved: no configuration file)");
        }
        if let Some(note) = note {
            message.push_str("; ");
            message.push_str(&note);
        }
        info!("{message}");
        Ok(Edited {
            applied,
            saved: saving.map(|(path, _)| path),
            message,
        })
    }

    /// The file's text with `edit` made, and the configuration it says: only
    /// when the file on disk is the text the running configuration came from.
    fn edit_file(&self, file: &File, edit: &Edit) -> Result<(String, Config), EditError> {
        let on_disk = text::read(&file.path)
            .map_err(|e| EditError::new(Failed::Conflict, format!("nothing changed: {e}")))?;
        if file.read.as_deref() != Some(on_disk.as_str()) {
            let message = match &file.error {
                Some(error) => {
                    format!("the file has an error, so nothing was changed: fix it first ({error})")
                }
                None => "the file changed on disk: reload the page".to_owned(),
            };
            return Err(EditError::new(Failed::Conflict, message));
        }
        let shape = text::Shape::of(&on_disk);
        let body = edit::edit_text(text::Shape::body(&on_disk), edit)?;
        let new_text = shape.restore(&body);
        let mut next = Config::from_toml_at(
            &new_text,
            &file.path,
            &self.overrides,
            Some(&self.running),
            &*self.look_up,
        )
        .map_err(|e| EditError::new(Failed::Invalid, e.to_string()))?
        .config;
        // What runs until the next start stays as it runs, and the page
        // where it is (it moves on a reading of the file).
        next.stats_format = self.running.stats_format;
        next.record.clone_from(&self.running.record);
        next.web = self.running.web;
        Ok((new_text, next))
    }
}

/// Moves the page to `web` when it is served elsewhere and there is a mover;
/// whether it moved (`running` then says so).
fn move_page(
    running: &mut Config,
    mover: &mut Option<Box<dyn PageMover>>,
    web: Option<SocketAddr>,
) -> bool {
    let Some(mover) = mover.as_mut().filter(|_| web != running.web) else {
        return false;
    };
    if !mover.move_to(web) {
        return false;
    }
    running.web = web;
    true
}

/// The answer to an edit its editor gave up (nobody reads it).
fn given_up(edit: &Edit) -> EditError {
    debug!(
        "{}: given up by its editor before it was made; not made",
        edit.describe()
    );
    EditError::new(Failed::Unavailable, "given up before it was made")
}

/// Whether `a` and `b` differ only in the keys that take effect at the next
/// start.
fn same_but_start_keys(a: &Config, b: &Config) -> bool {
    let mut a = a.clone();
    a.stats_format = b.stats_format;
    a.record.clone_from(&b.record);
    a == *b
}

/// An editor's error from `e`: the first problem placed at a field names it.
fn field_error(e: &ConfigError) -> EditError {
    let at_field = e.problems.iter().find_map(|p| {
        config::field::ALL
            .iter()
            .find(|f| **f == p.place)
            .map(|f| (*f, p))
    });
    match at_field {
        Some((field, p)) => EditError::field(field, p.message.clone()),
        None => EditError::new(Failed::Invalid, e.to_string()),
    }
}
