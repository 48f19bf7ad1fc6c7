//! Recording: the relay's tap written to a capture file by a thread of its own,
//! so the relay's loop never touches the disk.
//!
//! The recorder reads whole datagrams from the [`Tap`] and writes them with a
//! [`Writer`], flushing at least once a second (a crash loses at most the last
//! second) and at the end. When the disk can't keep up the tap's ring fills and
//! the relay drops and counts ([`Tap::dropped`]); forwarding never waits.
//!
//! When a write fails (the disk is full), the recorder says so at once, once,
//! keeps the file ending on its last whole record, and from then on counts every
//! datagram it takes as not recorded ([`Tap::count_not_recorded`]), so the relay
//! can show the loss while it goes on relaying.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use log::error;

use super::{thousands, CaptureError, Writer};
use crate::tap::Tap;

/// Longest time between two flushes of the file.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How long the recorder sleeps when the tap is empty.
const IDLE_SLEEP: Duration = Duration::from_millis(20);

/// What a recording wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The file.
    pub path: PathBuf,
    /// Datagrams written.
    pub packets: u64,
    /// Datagrams the relay could not hand over because the recorder was behind.
    pub dropped: u64,
    /// Datagrams too long for a capture record (over 65,507 bytes), skipped.
    pub too_long: u64,
    /// Datagrams taken after writing failed (or lost with the write that failed).
    pub not_recorded: u64,
    /// Why writing failed, if it did.
    pub failure: Option<String>,
}

impl fmt::Display for Recorded {
    /// `recorded 3,600 datagrams into drive.pcap`, and what is not in it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "recorded {} datagrams into {}",
            thousands(self.packets),
            self.path.display()
        )?;
        if self.not_recorded > 0 || self.failure.is_some() {
            write!(f, "; {} not recorded", thousands(self.not_recorded))?;
            if let Some(why) = &self.failure {
                write!(f, " after writing failed ({why})")?;
            }
        }
        if self.dropped > 0 {
            write!(
                f,
                "; {} more arrived while the disk was behind and are not in it (they were \
                 relayed)",
                thousands(self.dropped)
            )?;
        }
        if self.too_long > 0 {
            write!(
                f,
                "; {} longer than a capture record holds were left out",
                thousands(self.too_long)
            )?;
        }
        Ok(())
    }
}

/// What to do when a recording's file name is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Fail, naming the file (`record -o FILE`).
    Refuse,
    /// Replace it (`record -o FILE --force`), if it is a regular file.
    Replace,
    /// Add `-1`, `-2`, … before the extension until the name is free (a
    /// `[record] path`, and any name with `{time}`).
    Number,
}

impl Existing {
    /// For `record -o PATH [--force]`: replace with `--force`; otherwise number a
    /// name with `{time}` (one-second names collide on a quick restart), and
    /// refuse any other.
    pub fn for_output(path: &Path, force: bool) -> Existing {
        if force {
            Existing::Replace
        } else if path.to_string_lossy().contains(TIME) {
            Existing::Number
        } else {
            Existing::Refuse
        }
    }
}

/// The most numbered names tried before giving up.
const MAX_NUMBER: u32 = 9_999;
/// What a recording's name may hold to get the start time.
const TIME: &str = "{time}";

/// Creates the file of a recording named `template` started at `now`: `{time}`
/// in the name becomes `now` ([`path_for`]), the folder is made if needed, and
/// an existing file is never replaced unless `existing` says so. Every
/// recording's file is made here. Returns the file, empty, and its path.
pub fn create_new(
    template: &Path,
    now: SystemTime,
    existing: Existing,
) -> Result<(std::fs::File, PathBuf), CaptureError> {
    use std::io::ErrorKind;

    let path = path_for(template, now);
    if let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) {
        // A folder that can't be made shows up as the file's error below.
        let _ = std::fs::create_dir_all(folder);
    }
    let create_error = |path: &Path, source| CaptureError::Create {
        path: path.to_owned(),
        source,
    };
    let new = |path: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
    };
    match existing {
        Existing::Replace => {
            // A FIFO or a device would block or be clobbered: only a file is replaced.
            if let Ok(meta) = std::fs::metadata(&path) {
                if !meta.is_file() {
                    return Err(CaptureError::NotAFile { path });
                }
            }
            let file = std::fs::File::create(&path).map_err(|e| create_error(&path, e))?;
            Ok((file, path))
        }
        Existing::Refuse => match new(&path) {
            Ok(file) => Ok((file, path)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(CaptureError::Exists { path }),
            Err(e) => Err(create_error(&path, e)),
        },
        Existing::Number => {
            for n in 0..=MAX_NUMBER {
                let candidate = if n == 0 {
                    path.clone()
                } else {
                    numbered(&path, n)
                };
                match new(&candidate) {
                    Ok(file) => return Ok((file, candidate)),
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(create_error(&candidate, e)),
                }
            }
            Err(create_error(
                &numbered(&path, MAX_NUMBER),
                std::io::Error::new(
                    ErrorKind::AlreadyExists,
                    format!("that name and {MAX_NUMBER} numbered ones are taken"),
                ),
            ))
        }
    }
}

/// `drive.pcap` as `drive-3.pcap`.
fn numbered(path: &Path, n: u32) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    path.with_file_name(name)
}

/// A recording in progress.
pub struct Recorder {
    stop: Arc<AtomicBool>,
    /// Datagrams in the file so far: stored by the recorder thread after
    /// each drain of the tap (an atomic, no lock, nothing allocated).
    written: Arc<AtomicU64>,
    path: PathBuf,
    thread: JoinHandle<Result<Recorded, CaptureError>>,
}

impl Recorder {
    /// Creates the file named `template` (see [`create_new`]; an error now,
    /// before anything runs, if it can't be) and starts writing what `tap`
    /// receives. With `limit`, stops after taking that many datagrams from the
    /// tap (recorded or not) and calls `at_limit` (e.g. to stop the relay).
    /// [`Recorder::path`] says which file it writes.
    pub fn start(
        template: &Path,
        existing: Existing,
        tap: Tap,
        limit: Option<u64>,
        at_limit: impl FnOnce() + Send + 'static,
    ) -> Result<Recorder, CaptureError> {
        let (file, path) = create_new(template, SystemTime::now(), existing)?;
        let writer = Writer::new(file, &path)?;
        let path = path.as_path();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let written = Arc::new(AtomicU64::new(0));
        let count = written.clone();
        let thread = std::thread::Builder::new()
            .name("recorder".to_owned())
            .spawn(move || record(writer, tap, &flag, &count, limit, at_limit))
            .map_err(|source| CaptureError::Create {
                path: path.to_owned(),
                source,
            })?;
        Ok(Recorder {
            stop,
            written,
            path: path.to_owned(),
            thread,
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Datagrams written so far (the web page's count while it grows).
    pub fn packets(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Writes what the tap still holds, flushes, and says what was recorded.
    /// Call it once the relay has stopped, so nothing more arrives.
    pub fn finish(self) -> Result<Recorded, CaptureError> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_else(|_| {
            Err(CaptureError::Write {
                path: self.path.clone(),
                source: std::io::Error::other("the recorder thread panicked"),
            })
        })
    }
}

/// The recorder thread.
fn record(
    writer: Writer,
    mut tap: Tap,
    stop: &AtomicBool,
    written: &AtomicU64,
    limit: Option<u64>,
    at_limit: impl FnOnce(),
) -> Result<Recorded, CaptureError> {
    let mut at_limit = Some(at_limit);
    let mut file = Output {
        writer,
        handed: 0,
        failure: None,
    };
    let mut taken = 0;
    let mut too_long = 0;
    let mut flushed = Instant::now();
    loop {
        // Read the flag before draining: what arrived before the stop is written.
        let stopping = stop.load(Ordering::SeqCst);
        let mut took = false;
        while limit.is_none_or(|n| taken < n) {
            let Some(d) = tap.pop() else { break };
            taken += 1;
            took = true;
            if file.failure.is_some() {
                tap.count_not_recorded(1);
                continue;
            }
            file.handed += 1;
            let result = file.writer.write(d.time, d.from, d.to, d.payload);
            match result {
                Ok(()) => {}
                Err(CaptureError::TooLong { .. }) => {
                    file.handed -= 1;
                    too_long += 1;
                }
                Err(e) => file.failed(e, &tap),
            }
        }
        if took {
            written.store(file.writer.packets(), Ordering::Relaxed);
        }
        if limit.is_some_and(|n| taken >= n) {
            if let Some(f) = at_limit.take() {
                f();
            }
        }
        if flushed.elapsed() >= FLUSH_EVERY {
            file.flush(&tap);
            flushed = Instant::now();
        }
        if stopping {
            break;
        }
        if !took {
            std::thread::sleep(IDLE_SLEEP);
        }
    }
    file.flush(&tap);
    Ok(Recorded {
        path: file.writer.path().to_owned(),
        packets: file.writer.packets(),
        dropped: tap.dropped(),
        too_long,
        not_recorded: tap.not_recorded(),
        failure: file.failure,
    })
}

/// The recorder's writer, and what became of the datagrams handed to it.
struct Output {
    writer: Writer,
    /// Datagrams handed to the writer (those too long for a record excepted).
    handed: u64,
    /// Why writing failed, once it has.
    failure: Option<String>,
}

impl Output {
    fn flush(&mut self, tap: &Tap) {
        if self.failure.is_none() {
            if let Err(e) = self.writer.flush() {
                self.failed(e, tap);
            }
        }
    }

    /// Says once that writing failed, and counts what the file lost with it.
    fn failed(&mut self, e: CaptureError, tap: &Tap) {
        let lost = self.handed.saturating_sub(self.writer.packets());
        tap.count_not_recorded(lost);
        error!(
            "{e}; the recording keeps its first {} datagrams, and every datagram from now \
             on is counted as not recorded (relaying goes on)",
            thousands(self.writer.packets())
        );
        let why = match e {
            CaptureError::Write { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        self.failure = Some(why);
    }
}

/// `path` with `{time}` replaced by the start time (UTC) as
/// `2026-12-01_13-02-10`, so that each run of a configured relay records into
/// a file of its own.
pub fn path_for(path: &Path, now: SystemTime) -> PathBuf {
    let text = path.to_string_lossy();
    if !text.contains(TIME) {
        return path.to_owned();
    }
    let stamp = humantime::format_rfc3339_seconds(now).to_string();
    // "2026-12-01T13:02:10Z": colons are not allowed in Windows file names.
    let stamp = stamp
        .trim_end_matches('Z')
        .replace('T', "_")
        .replace(':', "-");
    PathBuf::from(text.replace(TIME, &stamp))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::capture::Reader;
    use crate::tap::{tap, DEFAULT_CAPACITY};

    fn temp(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!(
            "forza-relay-record-{}-{tag}.pcap",
            std::process::id()
        ))
    }

    #[test]
    fn everything_tapped_before_finish_is_in_the_file() {
        let path = temp("all");
        let (mut tx, rx) = tap(DEFAULT_CAPACITY);
        let recorder = Recorder::start(&path, Existing::Replace, rx, None, || {}).unwrap();
        let from: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        let to: SocketAddr = "127.0.0.1:5400".parse().unwrap();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_764_000_000);
        for i in 0..500u32 {
            tx.push(
                t0 + Duration::from_millis(u64::from(i)),
                from,
                to,
                &i.to_le_bytes(),
            );
        }
        let recorded = recorder.finish().unwrap();
        assert_eq!(
            (
                recorded.packets,
                recorded.dropped,
                recorded.too_long,
                recorded.not_recorded
            ),
            (500, 0, 0, 0)
        );
        assert_eq!(recorded.failure, None);
        let read: Vec<_> = Reader::open(&path).unwrap().map(Result::unwrap).collect();
        assert_eq!(read.len(), 500);
        for (i, d) in read.iter().enumerate() {
            assert_eq!(d.payload, (i as u32).to_le_bytes(), "payload {i}");
            assert_eq!((d.from, d.to), (from, to));
            assert_eq!(d.time, t0 + Duration::from_millis(i as u64));
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_limit_stops_the_recording_and_calls_back() {
        let path = temp("limit");
        let (mut tx, rx) = tap(DEFAULT_CAPACITY);
        let called = Arc::new(AtomicBool::new(false));
        let flag = called.clone();
        let recorder = Recorder::start(&path, Existing::Replace, rx, Some(3), move || {
            flag.store(true, Ordering::SeqCst)
        })
        .unwrap();
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        for i in 0..10u8 {
            tx.push(SystemTime::now(), a, a, &[i; 8]);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !called.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(called.load(Ordering::SeqCst), "the limit was reached");
        assert_eq!(recorder.packets(), 3, "the count while it runs");
        assert_eq!(recorder.finish().unwrap().packets, 3);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn numbered_names_go_before_the_extension() {
        assert_eq!(
            numbered(Path::new("laps/drive.pcap"), 2),
            PathBuf::from("laps/drive-2.pcap")
        );
        assert_eq!(numbered(Path::new("drive"), 1), PathBuf::from("drive-1"));
        assert_eq!(
            numbered(Path::new("a.b.pcapng"), 10),
            PathBuf::from("a.b-10.pcapng")
        );
    }

    #[test]
    fn only_force_replaces_and_a_time_name_is_numbered() {
        let plain = Path::new("drive.pcap");
        let timed = Path::new("drive-{time}.pcap");
        assert_eq!(Existing::for_output(plain, false), Existing::Refuse);
        assert_eq!(Existing::for_output(timed, false), Existing::Number);
        assert_eq!(Existing::for_output(plain, true), Existing::Replace);
        assert_eq!(Existing::for_output(timed, true), Existing::Replace);
    }

    #[test]
    fn create_new_never_opens_a_taken_name_unless_replacing() {
        let dir = temp("create-new");
        std::fs::create_dir_all(&dir).unwrap();
        let taken = dir.join("drive.pcap");
        std::fs::write(&taken, "kept").unwrap();
        let t = SystemTime::now();
        let e = create_new(&taken, t, Existing::Refuse).unwrap_err();
        assert!(matches!(e, CaptureError::Exists { .. }), "{e}");
        let (_, first) = create_new(&taken, t, Existing::Number).unwrap();
        let (_, second) = create_new(&taken, t, Existing::Number).unwrap();
        assert_eq!(
            (first, second),
            (dir.join("drive-1.pcap"), dir.join("drive-2.pcap"))
        );
        assert_eq!(std::fs::read_to_string(&taken).unwrap(), "kept");
        let (_, replaced) = create_new(&taken, t, Existing::Replace).unwrap();
        assert_eq!(replaced, taken);
        assert_eq!(std::fs::read(&taken).unwrap(), b"", "replaced");
        let e = create_new(&dir, t, Existing::Replace).unwrap_err();
        assert!(matches!(e, CaptureError::NotAFile { .. }), "{e}");
        let (_, nested) = create_new(&dir.join("a/b/c.pcap"), t, Existing::Refuse).unwrap();
        assert!(nested.is_file(), "folders made");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn time_in_the_path_makes_a_file_per_run() {
        let t = UNIX_EPOCH + Duration::from_secs(1_764_594_130);
        assert_eq!(
            path_for(Path::new("laps/drive-{time}.pcap"), t),
            PathBuf::from("laps/drive-2025-12-01_13-02-10.pcap")
        );
        assert_eq!(path_for(Path::new("a.pcap"), t), PathBuf::from("a.pcap"));
    }
}
