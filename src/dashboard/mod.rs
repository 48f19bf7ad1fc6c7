//! `forza-relay watch`: the full-screen dashboard (ratatui on crossterm, so it runs
//! in Windows Terminal as in any terminal), or one plain line per second when
//! stdout is not a terminal.
//!
//! [`render`] draws a [`Model`] and nothing else; the loop reads the source until
//! the next frame is due, then reads the keys and redraws, at most [`FPS`] times a
//! second whatever the packet rate. The terminal is restored on every way out: `q`,
//! Esc, Ctrl-C, an error (a guard's `Drop`) and a panic (a panic hook).
//!
//! Here is the terminal runner ([`watch`], [`dashboard`]); the plain-line mode
//! ([`print_lines`], [`plain_line`]) is in `dashboard/lines.rs`, the view
//! ([`render`]: the car's boxes) in `dashboard/view.rs` and its destinations
//! table in `dashboard/table.rs`.

use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute};

use crate::config::Input;
use crate::logging::console;
use crate::view::model::Model;
use crate::view::source::{Next, Source};

mod laps;
mod lines;
pub mod live;
pub mod pieces;
mod table;
#[cfg(test)]
mod testing;
mod view;

pub use lines::{plain_line, print_lines};
pub use pieces::NOT_RACING;
pub use view::{lap_time, render};

/// Redraws per second at most.
pub const FPS: u32 = 30;

/// How to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchOptions {
    /// The input format, or auto.
    pub input: Input,
}

/// Watches `source` until `q`, Esc or Ctrl-C (or `stop`): the dashboard when stdout
/// is a terminal, else one line per second on stdout until `stop` or the source's
/// end.
pub fn watch(source: &mut dyn Source, options: &WatchOptions, stop: &AtomicBool) -> io::Result<()> {
    let mut model = Model::new(options.input, source.describe());
    if io::stdout().is_terminal() {
        dashboard(source, &mut model, stop, |_| {})
    } else {
        print_lines(
            source,
            &mut model,
            stop,
            &mut io::stdout().lock(),
            Duration::from_secs(1),
            |_| {},
        )
    }
}

/// Restores the terminal when dropped, whatever ended the dashboard.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = ratatui::try_restore();
        let _ = execute!(io::stdout(), cursor::Show);
    }
}

/// Runs the full-screen dashboard on `model` until `q`, Esc, Ctrl-C or `stop`.
/// `on_frame` runs before each redraw: the place to hand the model fresh data from
/// elsewhere (the relay's destinations, [`Model::set_destinations`]). Log lines
/// are held back meanwhile (the newest is shown) and printed once the terminal
/// is restored ([`console`]).
pub fn dashboard(
    source: &mut dyn Source,
    model: &mut Model,
    stop: &AtomicBool,
    mut on_frame: impl FnMut(&mut Model),
) -> io::Result<()> {
    // Dropped last: the held lines go to the restored terminal.
    let _held = console::hold();
    // Made first, so a failure halfway through try_init is undone too.
    let _restore = Restore;
    let mut terminal = ratatui::try_init()?;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // ratatui's hook (inside `hook`) leaves raw mode and the alternate screen;
        // the cursor it may leave hidden.
        let _ = execute!(io::stdout(), cursor::Show);
        hook(info);
    }));
    let frame = Duration::from_secs(1) / FPS;
    let mut next_draw = Instant::now();
    loop {
        while !model.ended {
            let left = next_draw.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match source.next(left)? {
                Next::Datagram(d) => model.on_datagram(Instant::now(), d.from, d.payload),
                Next::Idle => {}
                Next::End => model.end(),
            }
        }
        if model.ended {
            std::thread::sleep(next_draw.saturating_duration_since(Instant::now()));
        }
        // Before the keys: after a hang-up, crossterm's poll spins on the
        // terminal's end of file and never returns.
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        while event::poll(Duration::ZERO)? {
            if let Event::Key(key) = event::read()? {
                let quit = key.kind == KeyEventKind::Press
                    && (matches!(key.code, KeyCode::Char('q' | 'Q') | KeyCode::Esc)
                        || (key.code == KeyCode::Char('c')
                            && key.modifiers.contains(KeyModifiers::CONTROL)));
                if quit {
                    return Ok(());
                }
            }
        }
        let now = Instant::now();
        model.tick(now);
        on_frame(model);
        model.set_log_line(console::latest());
        terminal.draw(|f| render(f, model))?;
        next_draw = now + frame;
    }
}
