//! Log lines held back while a full-screen view owns the terminal, and written
//! out when it gives the terminal back.
//!
//! The program's logger writes through [`LogWriter`] (`forza-relay`'s `main`
//! sets it as env_logger's target). Normally that is standard error; while a
//! [`Hold`] lives and standard error is a terminal, whole lines are kept instead
//! (the newest [`MAX_HELD`]), the newest is shown on the dashboard ([`latest`]),
//! and dropping the hold prints them all, in order, on the restored terminal. A
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
}

/// `Some` while held.
static HELD: Mutex<Option<Held>> = Mutex::new(None);

fn held() -> MutexGuard<'static, Option<Held>> {
    // A panic while holding the lock leaves plain data, still usable.
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// The log's writer: standard error, or the held lines while a [`Hold`] lives.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(h) = held().as_mut() {
            h.take(buf);
            return Ok(buf.len());
        }
        io::stderr().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// Holds log lines until dropped (see the module doc).
#[derive(Debug)]
#[must_use = "lines are held only while the hold lives"]
pub struct Hold {
    active: bool,
}

/// Starts holding log lines, when standard error is a terminal.
pub fn hold() -> Hold {
    hold_if(io::stderr().is_terminal())
}

fn hold_if(active: bool) -> Hold {
    if active {
        held().get_or_insert_with(Held::default);
    }
    Hold { active }
}

/// The newest line held, if any.
pub fn latest() -> Option<String> {
    held().as_ref().and_then(|h| h.lines.back().cloned())
}

/// Stops holding and returns what was held (a line cut short last).
fn release() -> Option<Held> {
    held().take()
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.active {
            return;
        }
        let Some(h) = release() else { return };
        let mut err = io::stderr().lock();
        if h.lost > 0 {
            let _ = writeln!(
                err,
                "({} earlier log lines from while the screen was on were not kept)",
                h.lost
            );
        }
        for line in &h.lines {
            let _ = writeln!(err, "{line}");
        }
        if !h.partial.is_empty() {
            let _ = err.write_all(&h.partial);
        }
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test, since the held lines are process-wide.
    #[test]
    fn lines_are_held_whole_and_the_oldest_let_go() {
        assert!(!hold_if(false).active, "not held without a terminal");
        assert_eq!(latest(), None);
        let hold = hold_if(true);
        let mut w = LogWriter;
        w.write_all(b"12:00:00 WARN  first\n12:00:01 INFO  sec")
            .unwrap();
        assert_eq!(latest().as_deref(), Some("12:00:00 WARN  first"));
        w.write_all(b"ond\n").unwrap();
        assert_eq!(latest().as_deref(), Some("12:00:01 INFO  second"));
        for i in 0..MAX_HELD {
            writeln!(w, "line {i}").unwrap();
        }
        {
            let guard = held();
            let h = guard.as_ref().unwrap();
            assert_eq!(h.lines.len(), MAX_HELD);
            assert_eq!(h.lost, 2);
            assert_eq!(h.lines.front().map(String::as_str), Some("line 0"));
        }
        assert_eq!(latest(), Some(format!("line {}", MAX_HELD - 1)));
        // The hold is process-wide: take it back without printing a thousand lines.
        std::mem::forget(hold);
        let h = release().unwrap();
        assert_eq!(h.lines.len(), MAX_HELD);
        assert_eq!(latest(), None);
    }
}
