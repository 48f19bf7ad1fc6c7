//! `run --watch`: an observer of the relay ([`LiveView`], see [`crate::app`])
//! that owns the calling thread while the relay runs on its own: the
//! dashboard (or, when stdout is not a terminal, one plain line a second), fed
//! by a tap of every datagram admitted and by the relay's counters snapshot.
//!
//! The loop never waits on the screen: a full tap drops and counts (the table's
//! title shows how many), and a snapshot is a command the loop answers between
//! packets. The screen asks for one at most every [`SNAPSHOT_EVERY`] and waits at
//! most [`SNAPSHOT_TIMEOUT`] for it. Quitting the screen (q, Esc, Ctrl-C) stops
//! the relay; the relay stopping (a signal, the console closing) ends the
//! screen, which restores the terminal either way.

use std::io::{self, IsTerminal as _};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{dashboard, print_lines};
use crate::app::{Attach, Failure, Observer};
use crate::config::Input;
use crate::relay::Control;
use crate::report::Snapshot;
use crate::tap::Tap;
use crate::view::model::{DestinationRates, Model};
use crate::view::source::{Source, TapSource};

/// How often the screen asks the relay for its counters.
pub const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);
/// How long the screen waits for the relay's answer before drawing without it.
pub const SNAPSHOT_TIMEOUT: Duration = Duration::from_millis(100);
/// Between plain lines when stdout is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(1);

/// The relay shown live: the dashboard with a table of every destination when
/// stdout is a terminal, else one plain line a second on stdout.
pub struct LiveView {
    input: Input,
    attached: Option<(Tap, Control, String)>,
}

impl LiveView {
    /// Reads packets as `input` (the relay's own input setting).
    pub fn new(input: Input) -> LiveView {
        LiveView {
            input,
            attached: None,
        }
    }
}

impl Observer for LiveView {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        let described = format!("relaying from {}", relay.local_addr());
        self.attached = Some((relay.tap(), relay.control(), described));
        Ok(())
    }

    fn in_foreground(&self) -> bool {
        true
    }

    fn foreground(&mut self, relay_done: &Arc<AtomicBool>) -> Result<(), Failure> {
        let Some((tap, control, described)) = self.attached.take() else {
            return Ok(());
        };
        let source = TapSource::new(tap, described, relay_done.clone());
        let screen = io::stdout().is_terminal();
        match show(source, self.input, &control, relay_done, screen) {
            // The terminal's window was closed: nothing left to show.
            Err(_) if screen && !io::stdout().is_terminal() => Ok(()),
            result => result.map_err(|e| Failure::start(format!("the live view failed: {e}"))),
        }
    }

    fn finish(self: Box<Self>, _last: &mut Snapshot) -> Result<(), Failure> {
        Ok(())
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
            model.set_not_recorded(snapshot.not_recorded);
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
