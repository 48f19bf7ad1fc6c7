//! Recording: the relay's tap written to a capture file by a thread of its own,
//! so the relay's loop never touches the disk.
//!
//! The recorder reads whole datagrams from the [`Tap`] and writes them with a
//! [`Writer`], flushing at least once a second (a crash loses at most the last
//! second) and at the end. When the disk can't keep up the tap's ring fills and
//! the relay drops and counts ([`Tap::dropped`]); forwarding never waits.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use super::{CaptureError, Writer};
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
}

/// A recording in progress.
pub struct Recorder {
    stop: Arc<AtomicBool>,
    path: PathBuf,
    thread: JoinHandle<Result<Recorded, CaptureError>>,
}

impl Recorder {
    /// Creates the file at `path` (an error now, before anything runs, if it
    /// can't be) and starts writing what `tap` receives. With `limit`, stops
    /// after that many datagrams and calls `at_limit` (e.g. to stop the relay).
    pub fn start(
        path: &Path,
        tap: Tap,
        limit: Option<u64>,
        at_limit: impl FnOnce() + Send + 'static,
    ) -> Result<Recorder, CaptureError> {
        let writer = Writer::create(path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("recorder".to_owned())
            .spawn(move || record(writer, tap, &flag, limit, at_limit))
            .map_err(|source| CaptureError::Create {
                path: path.to_owned(),
                source,
            })?;
        Ok(Recorder {
            stop,
            path: path.to_owned(),
            thread,
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
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
    mut writer: Writer,
    mut tap: Tap,
    stop: &AtomicBool,
    limit: Option<u64>,
    at_limit: impl FnOnce(),
) -> Result<Recorded, CaptureError> {
    let mut at_limit = Some(at_limit);
    let mut too_long = 0;
    let mut flushed = Instant::now();
    loop {
        // Read the flag before draining: what arrived before the stop is written.
        let stopping = stop.load(Ordering::SeqCst);
        let mut wrote = false;
        while limit.is_none_or(|n| writer.packets() < n) {
            let Some(d) = tap.pop() else { break };
            match writer.write(d.time, d.from, d.to, d.payload) {
                Ok(()) => wrote = true,
                Err(CaptureError::TooLong { .. }) => too_long += 1,
                Err(e) => return Err(e),
            }
        }
        if limit.is_some_and(|n| writer.packets() >= n) {
            if let Some(f) = at_limit.take() {
                f();
            }
        }
        if flushed.elapsed() >= FLUSH_EVERY {
            writer.flush()?;
            flushed = Instant::now();
        }
        if stopping {
            break;
        }
        if !wrote {
            std::thread::sleep(IDLE_SLEEP);
        }
    }
    writer.flush()?;
    Ok(Recorded {
        path: writer.path().to_owned(),
        packets: writer.packets(),
        dropped: tap.dropped(),
        too_long,
    })
}

/// `path` with `{time}` replaced by the start time (UTC) as
/// `2026-12-01_13-02-10`, so that each run of a configured relay records into
/// a file of its own.
pub fn path_for(path: &Path, now: SystemTime) -> PathBuf {
    let text = path.to_string_lossy();
    if !text.contains("{time}") {
        return path.to_owned();
    }
    let stamp = humantime::format_rfc3339_seconds(now).to_string();
    // "2026-12-01T13:02:10Z": colons are not allowed in Windows file names.
    let stamp = stamp
        .trim_end_matches('Z')
        .replace('T', "_")
        .replace(':', "-");
    PathBuf::from(text.replace("{time}", &stamp))
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
        let recorder = Recorder::start(&path, rx, None, || {}).unwrap();
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
            (recorded.packets, recorded.dropped, recorded.too_long),
            (500, 0, 0)
        );
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
        let recorder = Recorder::start(&path, rx, Some(3), move || {
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
        assert_eq!(recorder.finish().unwrap().packets, 3);
        let _ = std::fs::remove_file(&path);
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
