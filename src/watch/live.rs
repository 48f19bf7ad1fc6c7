//! `run --watch`: the relay on its own thread, and on this one the dashboard (or,
//! when stdout is not a terminal, one plain line a second), fed by a tap of
//! every datagram received and by the relay's counters snapshot.
//!
//! The loop never waits on the screen: a full tap drops and counts (the table's
//! title shows how many), and a snapshot is a command the loop answers between
//! packets. The screen asks for one at most every [`SNAPSHOT_EVERY`] and waits at
//! most [`SNAPSHOT_TIMEOUT`] for it. Quitting the screen (q, Esc, Ctrl-C) stops
//! the relay; the relay stopping (Ctrl-C without a terminal, SIGTERM, the console
//! closing) ends the screen. Either way the relay's final snapshot is returned
//! once the terminal is restored.

use std::io::{self, IsTerminal as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::warn;

use super::dashboard::{dashboard, print_lines};
use super::model::{DestinationRates, Model};
use super::source::{Source, TapSource};
use crate::config::Input;
use crate::relay::{Control, Relay};
use crate::stats::Snapshot;
use crate::tap;

/// How often the screen asks the relay for its counters.
pub const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);
/// How long the screen waits for the relay's answer before drawing without it.
pub const SNAPSHOT_TIMEOUT: Duration = Duration::from_millis(100);
/// Between plain lines when stdout is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(1);

/// How a watched run ended.
#[derive(Debug)]
pub struct Watched {
    /// The relay's final counters.
    pub last: Snapshot,
    /// Why the screen (or the plain lines) stopped early, if it failed; the relay
    /// was stopped then too.
    pub screen_error: Option<io::Error>,
}

/// Runs `relay` on its own thread until it is stopped, showing it meanwhile: the
/// dashboard with a table of every destination when stdout is a terminal, else
/// one plain line a second on stdout. `input` is how the screen reads packets
/// (the relay's own input setting).
pub fn run(relay: &mut Relay, input: Input) -> Watched {
    let (producer, tap) = tap::tap(tap::DEFAULT_CAPACITY);
    relay.attach(producer);
    let control = relay.control();
    let done = Arc::new(AtomicBool::new(false));
    let source = TapSource::new(
        tap,
        format!("relaying from {}", relay.local_addr()),
        done.clone(),
    );
    let screen = io::stdout().is_terminal();
    let watched = std::thread::scope(|scope| {
        let runner = std::thread::Builder::new()
            .name("relay".to_owned())
            .spawn_scoped(scope, || {
                // Set however the loop ends, a panic too, so the screen ends.
                let _done = SetOnDrop(&done);
                relay.run()
            });
        let runner = match runner {
            Ok(runner) => runner,
            Err(e) => {
                warn!("cannot start the relay's own thread ({e}): relaying without the screen");
                return None;
            }
        };
        let result = show(source, input, &control, &done, screen);
        // The screen is gone, for whatever reason: so is the relay.
        control.stop();
        let last = match runner.join() {
            Ok(last) => last,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Some(Watched {
            last,
            screen_error: result.err(),
        })
    });
    watched.unwrap_or_else(|| Watched {
        last: relay.run(),
        screen_error: None,
    })
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The dashboard (`screen`) or the plain lines, until `done` or the user quits.
fn show(
    mut source: TapSource,
    input: Input,
    control: &Control,
    done: &AtomicBool,
    screen: bool,
) -> io::Result<()> {
    let mut model = Model::new(input, source.describe());
    let mut rates = DestinationRates::default();
    let mut next_snapshot = Instant::now();
    let mut refresh = |model: &mut Model| {
        let now = Instant::now();
        if now < next_snapshot {
            return;
        }
        next_snapshot = now + SNAPSHOT_EVERY;
        if let Some(snapshot) = control.snapshot(SNAPSHOT_TIMEOUT) {
            model.set_destinations(rates.rows(&snapshot));
            model.set_not_shown(snapshot.tap_dropped);
        }
    };
    // The first rates are counted from here.
    refresh(&mut model);
    if screen {
        dashboard(&mut source, &mut model, done, refresh)
    } else {
        print_lines(
            &mut source,
            &mut model,
            done,
            &mut io::stdout().lock(),
            LINE_EVERY,
            &mut refresh,
        )
    }
}
