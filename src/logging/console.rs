//! Log lines held back while a full-screen view owns the terminal, and written
//! out when it gives the terminal back.
//!
//! The log's writer thread ([`crate::logging`]) hands every line to
//! [`write_line`]. Normally it goes to standard error; while a [`Hold`] lives
//! and standard error is a terminal, whole lines are kept instead (the newest
//! [`MAX_HELD`]), the newest is shown on the dashboard ([`latest`]), and
//! dropping the hold gives them back to the writer, which writes them, in order,
//! before any later line ([`write_released`]). The thread that drops the hold
//! never writes them itself, so a console that is not read never blocks it. A
//! log redirected to a file or a pipe is never held: it cannot garble the screen.

use std::collections::VecDeque;
use std::io::{self, IsTerminal, Write};
use std::sync::{Mutex, MutexGuard};

/// Lines kept while held; older ones are counted, not kept.
pub const MAX_HELD: usize = 1_000;

/// What is held: whole lines, the count of those let go, and a line being written.
#[derive(Debug, Default)]
struct Held {
    lines: VecDeque<String>,
    lost: u64,
    partial: Vec<u8>,
}

impl Held {
    fn take(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..end]).into_owned();
            if self.lines.len() == MAX_HELD {
                self.lines.pop_front();
                self.lost += 1;
            }
            self.lines.push_back(text);
        }
    }

    /// Adds what `later` held after these lines.
    fn append(&mut self, later: Held) {
        self.lost += later.lost;
        for line in later.lines {
            if self.lines.len() == MAX_HELD {
                self.lines.pop_front();
                self.lost += 1;
            }
            self.lines.push_back(line);
        }
        self.partial.extend_from_slice(&later.partial);
    }

    /// Writes every line held, and a note of those let go first.
    fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.lost > 0 {
            writeln!(
                out,
                "({} earlier log lines from while the screen was on were not kept)",
                crate::numbers::Thousands(self.lost)
            )?;
        }
        for line in &self.lines {
            writeln!(out, "{line}")?;
        }
        if !self.partial.is_empty() {
            out.write_all(&self.partial)?;
        }
        out.flush()
    }
}

/// The held lines (`Some` while held) and those released but not yet written.
#[derive(Debug)]
struct State {
    held: Option<Held>,
    released: Option<Held>,
}

static STATE: Mutex<State> = Mutex::new(State {
    held: None,
    released: None,
});

fn state() -> MutexGuard<'static, State> {
    // A panic while holding the lock leaves plain data, still usable.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes one log line to `out`, after any lines just released, or holds it
/// while a [`Hold`] lives. Called by the log's writer thread.
pub fn write_line(line: &[u8], out: &mut dyn Write) -> io::Result<()> {
    let released = {
        let mut state = state();
        if let Some(held) = state.held.as_mut() {
            held.take(line);
            return Ok(());
        }
        state.released.take()
    };
    if let Some(held) = released {
        held.write_to(out)?;
    }
    out.write_all(line)
}

/// Writes the lines released by a [`Hold`], if any, to `out`.
pub fn write_released(out: &mut dyn Write) -> io::Result<()> {
    let released = state().released.take();
    match released {
        Some(held) => held.write_to(out),
        None => Ok(()),
    }
}

/// Whether released lines wait for [`write_released`].
pub fn has_released() -> bool {
    state().released.is_some()
}

/// Holds log lines until dropped (see the module doc).
#[derive(Debug)]
#[must_use = "lines are held only while the hold lives"]
pub struct Hold {
    active: bool,
}

/// Starts holding log lines, when standard error is a terminal, once the
/// lines logged so far are written (they belong before the screen).
pub fn hold() -> Hold {
    let active = io::stderr().is_terminal();
    if active {
        crate::logging::flush();
    }
    hold_if(active)
}

fn hold_if(active: bool) -> Hold {
    if active {
        state().held.get_or_insert_with(Held::default);
    }
    Hold { active }
}

/// The newest line held, if any.
pub fn latest() -> Option<String> {
    state().held.as_ref().and_then(|h| h.lines.back().cloned())
}

/// Stops holding: what was held waits for the log's writer.
fn release() {
    let mut state = state();
    if let Some(held) = state.held.take() {
        match state.released.as_mut() {
            Some(earlier) => earlier.append(held),
            None => state.released = Some(held),
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.active {
            return;
        }
        release();
        if !crate::logging::wake() {
            // No writer thread (a library user): the lines are written here.
            let _ = write_released(&mut io::stderr().lock());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test, since the held lines are process-wide.
    #[test]
    fn lines_are_held_whole_the_oldest_let_go_and_released_before_later_ones() {
        let mut out = Vec::new();
        write_line(b"not held\n", &mut out).unwrap();
        assert!(!hold_if(false).active, "not held without a terminal");
        assert_eq!(latest(), None);
        let hold = hold_if(true);
        write_line(b"12:00:00 WARN  first\n", &mut out).unwrap();
        assert_eq!(latest().as_deref(), Some("12:00:00 WARN  first"));
        write_line(b"12:00:01 INFO  second\n", &mut out).unwrap();
        assert_eq!(latest().as_deref(), Some("12:00:01 INFO  second"));
        for i in 0..MAX_HELD {
            write_line(format!("line {i}\n").as_bytes(), &mut out).unwrap();
        }
        {
            let guard = state();
            let h = guard.held.as_ref().unwrap();
            assert_eq!(h.lines.len(), MAX_HELD);
            assert_eq!(h.lost, 2);
            assert_eq!(h.lines.front().map(String::as_str), Some("line 0"));
        }
        assert_eq!(latest(), Some(format!("line {}", MAX_HELD - 1)));
        assert_eq!(out, b"not held\n", "nothing written while held");
        // Released: the writer writes them before the next line.
        std::mem::forget(hold);
        release();
        assert!(has_released());
        assert_eq!(latest(), None);
        write_line(b"after\n", &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 1 + MAX_HELD + 1, "{}", &text[..200]);
        assert_eq!(
            lines[1],
            "(2 earlier log lines from while the screen was on were not kept)"
        );
        assert_eq!(lines[2], "line 0");
        assert_eq!(lines[MAX_HELD + 1], format!("line {}", MAX_HELD - 1));
        assert_eq!(lines[MAX_HELD + 2], "after");
        assert!(!has_released());
    }
}
