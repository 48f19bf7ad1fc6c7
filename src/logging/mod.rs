//! The program's log: lines `HH:MM:SS LEVEL message` (UTC) on standard error,
//! written by a thread of their own, so that no other thread — the relay's
//! loop least of all — ever waits for the console (issue 12: Ctrl-S in a
//! terminal, `2>&1 | less`, a stalled log collector stopped every destination).
//!
//! A record is formatted on the caller's thread into that thread's own buffer
//! (made once and reused, so a thread that logs allocates nothing in steady
//! state), then copied into one bounded byte queue of [`QUEUE_BYTES`]. The lock
//! on the queue is only ever held for such a copy, and a caller only tries it
//! ([`LOCK_TRIES`] times): it never waits behind a blocked write. When the queue
//! is full (nobody reads the console) or stays locked, the line is dropped and
//! counted, and the writer says how many as soon as it can write again ("12
//! log lines dropped: the console was not being read"). Only a thread that
//! said it may ([`may_wait_on_this_thread`]: `main`, whose last lines are the
//! final summary) waits for room, and only while the writer is not stalled
//! (it wrote something within [`STALL`]). The writer hands each line to
//! [`console`], which holds it back while a full-screen view owns the
//! terminal.
//!
//! At exit, [`flush`] waits until the queue is written, giving up once the
//! writer is stalled: a console that is not read never keeps the program from
//! ending.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, TryLockError};
use std::thread::Thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::{Level, LevelFilter, Log, Metadata, Record};

use crate::numbers::Count;

pub mod console;
mod escape;
mod throttle;

pub use escape::{escape_controls, hidden};
pub use throttle::{Suppressed, Throttle};

/// Bytes of log lines waiting for the writer; more are dropped and counted.
pub const QUEUE_BYTES: usize = 64 << 10;
/// The longest line kept; a longer record is cut there (and ends in `…`).
pub const LINE_MAX: usize = 32 << 10;
/// A thread's formatting buffer starts this big (and grows only for a longer
/// line, once).
const LINE_START: usize = 1 << 10;
/// How often a caller tries the queue's lock before dropping its line.
pub const LOCK_TRIES: u32 = 64;
/// The writer is stalled when it has been writing one line this long: nobody
/// reads the console, and nobody waits for it any more.
pub const STALL: Duration = Duration::from_millis(300);
/// [`flush`] gives up after this long in any case.
const FLUSH_MAX: Duration = Duration::from_secs(5);

/// How many of the latest lines [`recent`] keeps (for the web page).
pub const RECENT_LINES: usize = 50;

/// The latest lines written, and how many were written in all: filled by the
/// writer thread (never the caller's), read by the web page.
static RECENT: Mutex<(u64, VecDeque<String>)> = Mutex::new((0, VecDeque::new()));

/// The lines waiting for the writer.
static QUEUE: Mutex<VecDeque<u8>> = Mutex::new(VecDeque::new());
/// Lines dropped since the writer last said so.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Bytes put in the queue, and bytes the writer has dealt with, since the start.
static QUEUED: AtomicU64 = AtomicU64::new(0);
static WRITTEN: AtomicU64 = AtomicU64::new(0);
/// The writer thread, to wake it.
static WRITER: OnceLock<Thread> = OnceLock::new();
/// When the log started, and the writer's last sign of life since then (ms):
/// it woke up, or finished writing a line.
static STARTED: OnceLock<Instant> = OnceLock::new();
static ALIVE_MS: AtomicU64 = AtomicU64::new(0);
/// The writer is asleep with nothing to write: not stalled, whatever the time
/// of its last sign of life (it sleeps until woken, so an idle relay makes no
/// wake-ups).
static IDLE: AtomicBool = AtomicBool::new(false);

/// A file every line goes to as well, from [`also_to`] on: the log of a
/// program that runs without its console window (the tray, issue 32).
static ALSO: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// Milliseconds since the log started.
fn now_ms() -> u64 {
    STARTED
        .get()
        .map_or(0, |start| start.elapsed().as_millis() as u64)
}

/// Whether the writer has been stuck in one write for [`STALL`].
fn stalled() -> bool {
    !IDLE.load(Ordering::Acquire)
        && now_ms().saturating_sub(ALIVE_MS.load(Ordering::Acquire)) >= STALL.as_millis() as u64
}

thread_local! {
    /// This thread's formatting buffer.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Whether this thread may wait for room in the queue.
    static MAY_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// Lets this thread wait for room in a full queue, while the writer is not
/// stalled, instead of dropping its line. For `main`, never for the relay's loop.
pub fn may_wait_on_this_thread() {
    MAY_WAIT.with(|w| w.set(true));
}

/// The logger [`init`] installs.
struct Logger {
    filter: env_filter::Filter,
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.filter.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let now = SystemTime::now();
        let formatted = LINE.try_with(|line| {
            let Ok(mut line) = line.try_borrow_mut() else {
                // A record logged while formatting another (from a Display
                // impl): drop it rather than recurse.
                DROPPED.fetch_add(1, Ordering::Relaxed);
                return;
            };
            line.clear();
            // Made once per thread, big enough for any line the loop logs.
            line.reserve(LINE_START);
            format_line(&mut line, now, record.level(), record.args());
            enqueue(&line);
        });
        if formatted.is_err() {
            // The thread is ending and its buffer is gone.
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn flush(&self) {}
}

/// Writes `HH:MM:SS LEVEL message\n` into `out` (cut at [`LINE_MAX`]).
fn format_line(out: &mut Vec<u8>, now: SystemTime, level: Level, args: &std::fmt::Arguments<'_>) {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    let (h, m, s) = (secs / 3_600, secs / 60 % 60, secs % 60);
    let _ = write!(out, "{h:02}:{m:02}:{s:02} {level:<5} ");
    let mut limited = Limited(out);
    let _ = write!(limited, "{args}");
    out.push(b'\n');
}

/// A writer into a line that stops at [`LINE_MAX`], marking the cut.
struct Limited<'a>(&'a mut Vec<u8>);

impl Write for Limited<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        const CUT: &[u8] = "…".as_bytes();
        let room = (LINE_MAX - CUT.len()).saturating_sub(self.0.len());
        if buf.len() > room {
            if room > 0 || !self.0.ends_with(CUT) {
                self.0.extend_from_slice(&buf[..floor_char(buf, room)]);
                self.0.extend_from_slice(CUT);
            }
            // Everything is taken, so `write!` doesn't fail; the rest is cut.
            return Ok(buf.len());
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The largest `n <= at` where `bytes[..n]` ends on a character boundary (when
/// `bytes` is UTF-8), so a cut never splits a character.
fn floor_char(bytes: &[u8], at: usize) -> usize {
    let mut n = at.min(bytes.len());
    while n > 0 && n < bytes.len() && (bytes[n] & 0xC0) == 0x80 {
        n -= 1;
    }
    n
}

/// Puts one formatted line in the queue, or counts it as dropped; waits only
/// on a thread that may ([`may_wait_on_this_thread`]).
fn enqueue(line: &[u8]) {
    let may_wait = MAY_WAIT.try_with(Cell::get).unwrap_or(false) && WRITER.get().is_some();
    let mut tries = 0;
    loop {
        match QUEUE.try_lock() {
            Ok(mut queue) => {
                let room = queue.capacity() - queue.len();
                // Capacity 0: before `init` (a library user logging), nothing drains it.
                if queue.capacity() > 0 && room >= line.len() {
                    queue.extend(line);
                    QUEUED.fetch_add(line.len() as u64, Ordering::Release);
                    drop(queue);
                    wake();
                    return;
                }
                drop(queue);
                if !may_wait || stalled() {
                    break;
                }
                wake();
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TryLockError::Poisoned(_)) => break,
            Err(TryLockError::WouldBlock) => {
                tries += 1;
                if tries >= LOCK_TRIES && (!may_wait || stalled()) {
                    break;
                }
                std::thread::yield_now();
            }
        }
    }
    DROPPED.fetch_add(1, Ordering::Relaxed);
}

/// Puts `text` in the log as it is, without time or level (a message for the
/// person at the console, such as an error or a help text), after the lines
/// logged before it.
pub fn message(text: &str) {
    if WRITER.get().is_none() {
        eprintln!("{text}");
        return;
    }
    let mut line = Vec::with_capacity(text.len().min(LINE_MAX) + 1);
    let _ = Limited(&mut line).write_all(text.as_bytes());
    line.push(b'\n');
    enqueue(&line);
}

/// Installs the logger: info by default, `RUST_LOG` overrides (`debug`,
/// `forza_relay::relay=trace`, …); starts the writer thread. Once per process.
pub fn init() -> io::Result<()> {
    let mut filter = env_filter::Builder::new();
    match std::env::var("RUST_LOG") {
        Ok(text) if !text.trim().is_empty() => filter.parse(&text),
        _ => filter.filter_level(LevelFilter::Info),
    };
    let filter = filter.build();
    let max = filter.filter();
    {
        let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
        queue.reserve_exact(QUEUE_BYTES);
    }
    let _ = STARTED.set(Instant::now());
    let writer = std::thread::Builder::new()
        .name("log".to_owned())
        .spawn(write_forever)?;
    let _ = WRITER.set(writer.thread().clone());
    log::set_boxed_logger(Box::new(Logger { filter }))
        .map_err(|e| io::Error::other(e.to_string()))?;
    log::set_max_level(max);
    Ok(())
}

/// From now on, every line logged goes to `file` as well as to the console:
/// for a program that lets go of its console window. Lines are written whole,
/// in the order logged, by the writer thread (never by the caller).
pub fn also_to(file: std::fs::File) {
    *ALSO.lock().unwrap_or_else(|e| e.into_inner()) = Some(file);
}

/// The writer thread: takes what is queued and writes it, line by line.
fn write_forever() {
    let mut taken = Vec::with_capacity(QUEUE_BYTES);
    loop {
        ALIVE_MS.store(now_ms(), Ordering::Release);
        {
            let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
            taken.extend(queue.drain(..));
        }
        // Lines dropped so far came after those just taken: said after them.
        let dropped = DROPPED.swap(0, Ordering::Relaxed);
        let mut err = io::stderr();
        let _ = console::write_released(&mut err);
        let mut also = ALSO.lock().unwrap_or_else(|e| e.into_inner());
        // Every queued line ends with its newline, so `taken` holds whole lines.
        for line in taken.split_inclusive(|&b| b == b'\n') {
            // A console that fails (closed, gone) loses the line; the program goes on.
            let _ = console::write_line(line, &mut err);
            if let Some(file) = also.as_mut() {
                // A file that fails (a full disk) loses the line too.
                let _ = file.write_all(line);
            }
            keep_recent(line);
            ALIVE_MS.store(now_ms(), Ordering::Release);
            WRITTEN.fetch_add(line.len() as u64, Ordering::Release);
        }
        if dropped > 0 {
            let mut line = Vec::new();
            let text = format_args!(
                "{} dropped: the console was not being read",
                Count(dropped, "log line")
            );
            format_line(&mut line, SystemTime::now(), Level::Warn, &text);
            let _ = console::write_line(&line, &mut err);
            if let Some(file) = also.as_mut() {
                let _ = file.write_all(&line);
            }
        }
        drop(also);
        taken.clear();
        IDLE.store(true, Ordering::Release);
        // Looked at after saying so: a line queued from now on wakes it.
        if QUEUE.lock().map_or(true, |q| q.is_empty()) && !console::has_released() {
            std::thread::park();
            // A sign of life before "not idle": never seen stalled meanwhile.
            ALIVE_MS.store(now_ms(), Ordering::Release);
        }
        IDLE.store(false, Ordering::Release);
    }
}

/// Keeps `line` among the [`RECENT_LINES`] latest.
fn keep_recent(line: &[u8]) {
    let text = String::from_utf8_lossy(line).trim_end().to_owned();
    let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    recent.0 += 1;
    if recent.1.len() == RECENT_LINES {
        recent.1.pop_front();
    }
    recent.1.push_back(text);
}

/// How many lines were written so far, and the latest [`RECENT_LINES`] of
/// them, oldest first.
pub fn recent() -> (u64, Vec<String>) {
    let recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    (recent.0, recent.1.iter().cloned().collect())
}

/// How many lines were written so far (cheap: to see whether [`recent`]
/// changed).
pub fn written_lines() -> u64 {
    RECENT.lock().unwrap_or_else(|e| e.into_inner()).0
}

/// Bytes of log lines queued since the log started (for tests and
/// diagnostics: it grows with every line logged and not dropped).
pub fn queued_bytes() -> u64 {
    QUEUED.load(Ordering::Acquire)
}

/// Wakes the writer thread (lines were released by the console); `false` when
/// there is none.
pub fn wake() -> bool {
    WRITER.get().map(Thread::unpark).is_some()
}

/// Waits until every line logged so far is written (or held), giving up when
/// the writer is stalled (the console is not being read) or after a few
/// seconds. Returns whether everything was written.
pub fn flush() -> bool {
    let Some(writer) = WRITER.get() else {
        return true;
    };
    let target = QUEUED.load(Ordering::Acquire);
    writer.unpark();
    let start = Instant::now();
    loop {
        let written = WRITTEN.load(Ordering::Acquire);
        if written >= target && !console::has_released() && DROPPED.load(Ordering::Relaxed) == 0 {
            return true;
        }
        if stalled() || start.elapsed() >= FLUSH_MAX {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(level: Level, args: std::fmt::Arguments<'_>) -> String {
        let mut out = Vec::new();
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000 + 3_600 * 24 * 10 + 45_296);
        format_line(&mut out, t, level, &args);
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn a_line_is_the_time_the_level_and_the_message() {
        // 1,700,000,000 s is 22:13:20 UTC; 45,296 s later is 10:48:16 the next day.
        assert_eq!(
            line(Level::Warn, format_args!("a {} b", 1)),
            "10:48:16 WARN  a 1 b\n"
        );
        assert_eq!(line(Level::Info, format_args!("x")), "10:48:16 INFO  x\n");
    }

    #[test]
    fn a_long_record_is_cut_on_a_character_and_marked() {
        let long = "é".repeat(LINE_MAX);
        let text = line(Level::Info, format_args!("{long}"));
        assert!(text.len() <= LINE_MAX + 1, "{}", text.len());
        assert!(text.ends_with("…\n"), "{}", &text[text.len() - 10..]);
        // Still UTF-8: `line` would have panicked otherwise.
        assert!(text.starts_with("10:48:16 INFO  éé"));
    }
}
