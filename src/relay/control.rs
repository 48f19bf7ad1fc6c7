//! The command channel: other threads talk to the loop only through
//! [`Control`], a message on a channel plus a wake-up (the poll's waker and,
//! for a loop asleep in the receive, a datagram from the relay's own wake-up
//! socket). The loop looks for commands after every receive and acts on them
//! between packets; a packet costs one flag ([`Shell::commands`]), not a
//! channel. [`Snapshots`] asks for every counter without the loop allocating.
//!
//! Other programs on this computer (`doctor`, `setup`, `record`, `watch`) ask
//! the loop what it sees with a status query on the listening socket
//! ([`crate::report::query`]); the core recognises it ([`Verdict::Query`]) and
//! [`Shell::answer_queries`] answers it from the listening socket.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{debug, error, info};
use mio::Waker;

use super::{Applied, LoopConfig, Shell, StartError};
use crate::config::Config;
use crate::counters::LatencyWindow;
use crate::fanout::Verdict;
use crate::net::recv;
use crate::net::recv::wait::WakeSender;
use crate::report::query::Answer;
use crate::report::{ConfigState, Snapshot};
use crate::tap::TapProducer;

/// What other threads ask of the loop.
pub(super) enum Command {
    /// Finish: `run` returns its final snapshot.
    Stop,
    /// Take this configuration (a reload), and say how it went if asked.
    Apply(
        Box<LoopConfig>,
        Option<mpsc::Sender<Result<Applied, StartError>>>,
    ),
    /// Reply with a snapshot of every counter.
    Snapshot(mpsc::Sender<Snapshot>),
    /// Fill this snapshot with every counter and hand it back: the reader's
    /// buffers, so the loop allocates nothing ([`Snapshots`]).
    Fill(Box<Snapshot>, mpsc::SyncSender<Box<Snapshot>>),
    /// Copy every datagram admitted into this tap from now on, and say so
    /// when asked.
    Attach(Box<TapProducer>, Option<mpsc::Sender<()>>),
    /// The configuration file's state, for the snapshots.
    ConfigState(Box<ConfigState>),
    /// Where the relay's page is served (`None`: nowhere any more), for the
    /// status query's answer.
    Page(Option<Box<crate::report::query::PageServed>>),
}

/// Talks to a running relay from any thread: a message, then a wake-up.
#[derive(Clone)]
pub struct Control {
    pub(super) commands: mpsc::Sender<Command>,
    pub(super) waker: Arc<Waker>,
    /// Wakes a loop asleep in the receive; `None` where it never sleeps there.
    /// The loop replaces it when its listening address moves.
    pub(super) wake: Arc<Mutex<Option<WakeSender>>>,
    /// Set after a message is sent, before the wake-up: the loop reads the
    /// channel only when it is, so a packet costs one flag, not a channel.
    pub(super) pending: Arc<AtomicBool>,
}

impl Control {
    fn send(&self, command: Command) {
        // A relay that is gone has nothing left to do with the message.
        if self.commands.send(command).is_ok() {
            self.pending.store(true, Ordering::Release);
            // If waking fails the loop still sees the message at its next wake-up.
            let _ = self.waker.wake();
            if let Ok(wake) = self.wake.lock() {
                if let Some(wake) = &*wake {
                    let _ = wake.wake();
                }
            }
        }
    }

    /// Asks the loop to finish; `run` then returns its final snapshot.
    pub fn stop(&self) {
        self.send(Command::Stop);
    }

    /// Asks the loop to take `config`: the listen address and summary interval
    /// here, the rest in the core, which matches destinations by name, so those
    /// that did not change lose nothing (see
    /// [`Fanout::plan`](crate::fanout::Fanout::plan)).
    pub fn apply(&self, config: Config) {
        self.send(Command::Apply(Box::new(LoopConfig::of(&config)), None));
    }

    /// As [`Control::apply`], then waits (at most `timeout`) for what changed,
    /// or why nothing did; `None` when the loop didn't answer in time.
    pub fn apply_and_wait(
        &self,
        config: Config,
        timeout: Duration,
    ) -> Option<Result<Applied, StartError>> {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Apply(Box::new(LoopConfig::of(&config)), Some(tx)));
        rx.recv_timeout(timeout).ok()
    }

    /// Copies every datagram admitted from now on into `tap` (see
    /// [`crate::tap`]); dropping the tap's reader detaches it.
    pub fn attach(&self, tap: TapProducer) {
        self.send(Command::Attach(Box::new(tap), None));
    }

    /// As [`Control::attach`], and waits (at most `timeout`) until the loop
    /// has taken the tap: every datagram received after this returns `true`
    /// is in it. A datagram that came in the same batch as the command's
    /// wake-up would otherwise be handled before the tap is attached (a
    /// recording started from the page missed the first frame sent after
    /// its "started"). `false`: the loop has not taken it yet (it will).
    pub fn attach_now(&self, tap: TapProducer, timeout: Duration) -> bool {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Attach(Box::new(tap), Some(tx)));
        rx.recv_timeout(timeout).is_ok()
    }

    /// Every counter now, or `None` if the loop doesn't answer within `timeout`.
    pub fn snapshot(&self, timeout: Duration) -> Option<Snapshot> {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Snapshot(tx));
        rx.recv_timeout(timeout).ok()
    }

    /// Tells the relay which configuration file it runs and why its last
    /// saved version was not applied (`None`: it was), for its snapshots.
    pub fn config_state(&self, path: Option<String>, error: Option<String>) {
        self.send(Command::ConfigState(Box::new(ConfigState { path, error })));
    }

    /// Tells the relay where its page is served, for the answer to a status
    /// query ([`crate::report::query`]): the tools point there.
    pub fn page_served(&self, page: Option<crate::report::query::PageServed>) {
        self.send(Command::Page(page.map(Box::new)));
    }

    /// A reader of snapshots that brings its own buffers (see [`Snapshots`]).
    pub fn snapshots(&self) -> Snapshots {
        let (answers, returned) = mpsc::sync_channel(Snapshots::IN_FLIGHT);
        Snapshots {
            control: self.clone(),
            spare: None,
            answers,
            returned,
        }
    }

    /// As [`Control::apply`], returning where the loop will say how it went:
    /// the caller can wait as long as it likes, and a closed channel means the
    /// relay is gone (its loop will never answer).
    pub fn apply_with_reply(&self, config: Config) -> mpsc::Receiver<Result<Applied, StartError>> {
        let (tx, rx) = mpsc::channel();
        self.send(Command::Apply(Box::new(LoopConfig::of(&config)), Some(tx)));
        rx
    }
}

/// Asks the loop for every counter, again and again, without allocating on
/// the loop's thread: each request carries a [`Snapshot`] that the loop fills
/// in place (its lists and names keep their capacity) and hands back, so a page
/// asking once a second costs the relay no allocation (issue 14). One buffer
/// is reused from request to request; a request that timed out leaves its
/// buffer with the loop, and the next one takes it back if it has come.
pub struct Snapshots {
    control: Control,
    /// The buffer of the last answer, or `None` while the loop holds it.
    spare: Option<Box<Snapshot>>,
    answers: mpsc::SyncSender<Box<Snapshot>>,
    returned: mpsc::Receiver<Box<Snapshot>>,
}

impl Snapshots {
    /// Answers the loop can hand back before it drops one (it never waits for
    /// the reader): requests that timed out, plus the one being waited for.
    const IN_FLIGHT: usize = 2;

    /// Every counter now, or `None` if the loop doesn't answer within
    /// `timeout`. After a timeout, the next answer may be the late one: at
    /// most `timeout` older than the request.
    pub fn take(&mut self, timeout: Duration) -> Option<&Snapshot> {
        let buffer = match self.spare.take() {
            Some(b) => b,
            None => match self.returned.try_recv() {
                Ok(b) => b,
                Err(_) => Box::new(Snapshot::empty()),
            },
        };
        self.control
            .send(Command::Fill(buffer, self.answers.clone()));
        let answer = self.returned.recv_timeout(timeout).ok()?;
        Some(&**self.spare.insert(answer))
    }
}

impl Shell {
    /// Acts on every command waiting.
    #[inline]
    pub(super) fn commands(&mut self, now: Instant) {
        // Cleared before reading: a message sent meanwhile sets it again.
        if self.inbox.control.pending.swap(false, Ordering::Acquire) {
            self.read_commands(now);
        }
    }

    /// Acts on every command in the channel: seldom, so kept out of the
    /// loop's own code.
    #[cold]
    #[inline(never)]
    fn read_commands(&mut self, now: Instant) {
        while let Ok(command) = self.inbox.commands.try_recv() {
            match command {
                Command::Stop => self.inbox.stopping = true,
                Command::Apply(setup, reply) => {
                    let result = self.apply(*setup, now);
                    match &result {
                        Ok(applied) => info!("configuration applied: {applied}"),
                        Err(e) => error!(
                            "the new configuration was not applied, the previous one runs on: {e}"
                        ),
                    }
                    if let Some(reply) = reply {
                        let _ = reply.send(result);
                    }
                }
                Command::Snapshot(reply) => {
                    let _ = reply.send(self.snapshot(LatencyWindow::Interval));
                }
                Command::Fill(mut snapshot, reply) => {
                    self.snapshot_into(LatencyWindow::Interval, &mut snapshot);
                    // A reader that gave up twice gets this one dropped.
                    let _ = reply.try_send(snapshot);
                }
                Command::Attach(tap, attached) => {
                    self.taps.list.push(*tap);
                    if let Some(attached) = attached {
                        let _ = attached.send(());
                    }
                }
                Command::ConfigState(state) => self.inbox.config_state = *state,
                Command::Page(page) => self.inbox.page = page,
            }
        }
    }

    /// Answers the status queries among the last batch's `n` datagrams, each
    /// from the listening socket to the socket that asked, without waiting:
    /// one JSON object ([`Answer`]). Seldom, so out of the loop's own code;
    /// building the answer allocates, as any command's does.
    #[cold]
    #[inline(never)]
    pub(super) fn answer_queries(&mut self, n: usize) {
        self.inbox.answered = self.core.queries();
        let mut answer = Answer::of(&self.snapshot(LatencyWindow::Interval), self.core.input());
        if let Some(page) = &self.inbox.page {
            page.describe(&mut answer);
        }
        let json = answer.to_json();
        for (i, verdict) in self.intake.verdicts.iter().enumerate().take(n) {
            if *verdict != Verdict::Query {
                continue;
            }
            let (_, from) = self.intake.batch.datagram(i);
            match recv::send_now(&self.intake.listener, &json, from) {
                Ok(_) => debug!("{from} asked for the relay's status: answered"),
                Err(e) => debug!("{from} asked for the relay's status: the answer failed: {e}"),
            }
        }
    }
}
