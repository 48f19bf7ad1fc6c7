//! Where the viewers' datagrams come from: one small trait, so the dashboard and the
//! exporter read a UDP socket, a capture file or the relay's tap alike.
//!
//! A [`Source`] lends one datagram at a time (a [`Datagram<&[u8]>`], the
//! type taps and captures use), borrowed from a buffer it owns: [`UdpSource`] and [`TapSource`] reuse one buffer and allocate nothing
//! per datagram, [`CaptureSource`] lends the payload the capture reader read (one
//! allocation per record, on the viewer's thread) and [`MemorySource`] the one it
//! was given. [`Source::next`] waits at most the time it is given, so a consumer
//! can redraw, read keys or check a stop flag between datagrams. A source that
//! plays a capture at its own pace answers [`Next::Idle`] until the next datagram
//! is due. Every datagram carries its receive time as wall-clock time: the
//! socket's `SystemTime::now()` on receipt, the time a capture recorded, or the
//! time the relay stamped on the batch it copied into the tap.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::capture::{self, replay::Schedule, CaptureError, Selection, Streams};
use crate::net::socket;
use crate::tap::{Datagram, Tap};

/// What [`Source::next`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next<'a> {
    /// A datagram.
    Datagram(Datagram<&'a [u8]>),
    /// Nothing within the time given; ask again.
    Idle,
    /// The source has no more datagrams (end of a capture file, the relay stopped).
    End,
}

/// A stream of datagrams: a UDP socket, a capture file, the relay's tap.
pub trait Source {
    /// Waits at most `timeout` for the next datagram. An error is fatal to the
    /// source (the consumer reports it and stops); passing conditions such as a
    /// timeout or an interrupted call are [`Next::Idle`].
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>>;

    /// Where the datagrams come from, for a title line: `"listening on 0.0.0.0:5400"`.
    fn describe(&self) -> String;
}

impl<S: Source + ?Sized> Source for &mut S {
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>> {
        (**self).next(timeout)
    }

    fn describe(&self) -> String {
        (**self).describe()
    }
}

impl<S: Source + ?Sized> Source for Box<S> {
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>> {
        (**self).next(timeout)
    }

    fn describe(&self) -> String {
        (**self).describe()
    }
}

use crate::net::recv::MAX_DATAGRAM;

/// Datagrams arriving on a UDP socket (`--listen ADDR`).
#[derive(Debug)]
pub struct UdpSource {
    socket: UdpSocket,
    addr: SocketAddr,
    buf: Box<[u8]>,
}

impl UdpSource {
    /// Binds `addr` with the relay's socket settings (large receive buffer, IPv4 on
    /// an unspecified IPv6 address). Port 0 picks a free port: see
    /// [`UdpSource::local_addr`].
    pub fn bind(addr: SocketAddr) -> io::Result<UdpSource> {
        let (socket, _granted) = socket::bind_listener(addr)?;
        socket.set_nonblocking(false)?;
        let addr = socket.local_addr()?;
        Ok(UdpSource {
            socket,
            addr,
            buf: vec![0; MAX_DATAGRAM].into_boxed_slice(),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Source for UdpSource {
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>> {
        // A zero read timeout is refused by the OS (it would mean "block forever").
        let timeout = timeout.max(Duration::from_millis(1));
        self.socket.set_read_timeout(Some(timeout))?;
        match self.socket.recv_from(&mut self.buf) {
            // `setup` asking every socket a forza-relay holds whether it is a
            // relay (issue 23): not telemetry.
            Ok((n, from)) if crate::net::query::is_query(&self.buf[..n], from) => Ok(Next::Idle),
            Ok((n, from)) => Ok(Next::Datagram(Datagram {
                time: SystemTime::now(),
                from: canonical(from),
                to: self.addr,
                payload: &self.buf[..n],
            })),
            Err(e) => match e.kind() {
                // Windows reports an earlier send's ICMP refusal on recv (docs/formats.md);
                // the viewers never send, but it costs nothing to be safe.
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionRefused => Ok(Next::Idle),
                _ => Err(e),
            },
        }
    }

    fn describe(&self) -> String {
        format!("listening on {}", self.addr)
    }
}

/// An IPv4 sender seen on a dual-stack socket reads as IPv4.
fn canonical(from: SocketAddr) -> SocketAddr {
    SocketAddr::new(from.ip().to_canonical(), from.port())
}

/// Datagrams held in memory, then [`Next::End`]: for tests, and for feeding a
/// consumer from data already read. Where they were sent is not known: they
/// say `0.0.0.0:0`, as a raw dump's do ([`capture::RAW_DUMP_ADDR`]).
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    queue: VecDeque<(SystemTime, SocketAddr, Vec<u8>)>,
    current: Vec<u8>,
}

impl MemorySource {
    /// An empty source.
    pub fn new() -> MemorySource {
        MemorySource::default()
    }

    /// Adds a datagram at the end.
    pub fn push(&mut self, time: SystemTime, from: SocketAddr, payload: Vec<u8>) {
        self.queue.push_back((time, from, payload));
    }
}

impl Source for MemorySource {
    fn next(&mut self, _timeout: Duration) -> io::Result<Next<'_>> {
        match self.queue.pop_front() {
            Some((time, from, payload)) => {
                self.current = payload;
                Ok(Next::Datagram(Datagram {
                    time,
                    from,
                    to: capture::RAW_DUMP_ADDR,
                    payload: &self.current,
                }))
            }
            None => Ok(Next::End),
        }
    }

    fn describe(&self) -> String {
        "datagrams in memory".to_owned()
    }
}

/// How a [`CaptureSource`] plays its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// With the spacing the capture recorded, as the game sent it (`watch`).
    Recorded,
    /// As fast as the file reads (`export`).
    Fastest,
}

/// The UDP datagrams of a capture file (pcap or pcapng) sent to one port
/// (`--file CAPTURE [--port P]`), played at its own pace or as fast as it reads.
///
/// Paced, every datagram is due at the instant of the first `next` plus its
/// offset in the capture, as [`capture::replay`] schedules them: lateness never
/// accumulates. Until the next one is due it answers [`Next::Idle`]; at the end
/// of the file (or where a cut-off file ends) [`Next::End`].
pub struct CaptureSource {
    path: PathBuf,
    reader: capture::Reader,
    selection: Selection,
    pace: Pace,
    schedule: Option<Schedule>,
    /// Read, not yet due.
    pending: Option<capture::Datagram>,
    /// The payload lent by the last `next`.
    lent: Vec<u8>,
    ended: bool,
    truncated: Option<CaptureError>,
}

impl std::fmt::Debug for CaptureSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureSource")
            .field("path", &self.path)
            .field("selection", &self.selection)
            .field("pace", &self.pace)
            .finish_non_exhaustive()
    }
}

impl CaptureSource {
    /// Opens the capture at `path` and picks its datagrams to `port`, or, with no
    /// port, those of the one destination port it holds: several ports are an
    /// error listing them (as `replay` does).
    pub fn open(path: &Path, port: Option<u16>, pace: Pace) -> Result<CaptureSource, CaptureError> {
        let streams = Streams::scan(path)?;
        let selection = streams.select(port)?;
        Ok(CaptureSource {
            path: path.to_owned(),
            reader: capture::Reader::open(path)?,
            selection,
            pace,
            schedule: None,
            pending: None,
            lent: Vec::new(),
            ended: false,
            truncated: streams.truncated,
        })
    }

    /// The datagrams played: their port, count and time span.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// Set when the file ends inside a record: it is played up to the cut.
    pub fn truncated(&self) -> Option<&CaptureError> {
        self.truncated.as_ref()
    }

    /// The next datagram of the selection from the file, or `None` at its end.
    fn read(&mut self) -> io::Result<Option<capture::Datagram>> {
        for d in self.reader.by_ref() {
            match d {
                Ok(d) if self.selection.matches(&d) => return Ok(Some(d)),
                Ok(_) => {}
                // The scan found the cut too; everything before it was played.
                Err(CaptureError::Truncated { .. }) => break,
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
        Ok(None)
    }

    /// When `d` is due, with the schedule anchored at the first call.
    fn due(&mut self, d: &capture::Datagram) -> Instant {
        let selection = self.selection;
        let schedule = self
            .schedule
            .get_or_insert_with(|| Schedule::new(Instant::now(), 1.0, &selection));
        schedule.due(0, selection.offset(d.time))
    }
}

impl Source for CaptureSource {
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>> {
        if self.ended {
            return Ok(Next::End);
        }
        let d = match self.pending.take() {
            Some(d) => d,
            None => match self.read()? {
                Some(d) => d,
                None => {
                    self.ended = true;
                    return Ok(Next::End);
                }
            },
        };
        if self.pace == Pace::Recorded {
            let due = self.due(&d);
            let now = Instant::now();
            if due > now {
                let wake = due.min(now + timeout);
                std::thread::sleep(wake - now);
                if wake < due {
                    self.pending = Some(d);
                    return Ok(Next::Idle);
                }
            }
        }
        self.lent = d.payload;
        Ok(Next::Datagram(Datagram {
            time: d.time,
            from: d.from,
            to: d.to,
            payload: &self.lent,
        }))
    }

    fn describe(&self) -> String {
        let verb = match self.pace {
            Pace::Recorded => "playing",
            Pace::Fastest => "reading",
        };
        format!(
            "{verb} {} (port {}, {} packets, {:.1} s)",
            self.path.display(),
            self.selection.port,
            capture::thousands(self.selection.packets),
            self.selection.duration().as_secs_f64()
        )
    }
}

/// How often a [`TapSource`] looks at the tap while it waits: at 360 packets a
/// second a few arrive between looks, and the ring holds seconds of them.
const TAP_POLL: Duration = Duration::from_millis(2);

/// The datagrams a running relay receives, read from its tap (`run --watch`).
///
/// The relay never waits for this reader: when it falls behind, the tap drops
/// and counts ([`TapSource::dropped`]). It ends once `done` is set (the relay
/// stopped) and every datagram already in the tap has been read.
pub struct TapSource {
    tap: Tap,
    description: String,
    done: Arc<AtomicBool>,
}

impl std::fmt::Debug for TapSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapSource")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl TapSource {
    /// Reads `tap`, described as `description` (`"relaying from 0.0.0.0:5400"`),
    /// until `done`.
    pub fn new(tap: Tap, description: impl Into<String>, done: Arc<AtomicBool>) -> TapSource {
        TapSource {
            tap,
            description: description.into(),
            done,
        }
    }

    /// Datagrams the relay could not hand over because this reader fell behind.
    pub fn dropped(&self) -> u64 {
        self.tap.dropped()
    }
}

impl Source for TapSource {
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>> {
        let deadline = Instant::now() + timeout;
        loop {
            // Read before looking at the tap: once it is set, every datagram the
            // relay pushed is in view.
            let done = self.done.load(Ordering::Acquire);
            if self.tap.is_ready() {
                let d = self.tap.pop().expect("is_ready: a whole record is in");
                return Ok(Next::Datagram(d));
            }
            if done {
                return Ok(Next::End);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Next::Idle);
            }
            std::thread::sleep((deadline - now).min(TAP_POLL));
        }
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::time::Instant;

    #[test]
    fn udp_source_lends_each_datagram_and_idles_when_quiet() {
        let mut source = UdpSource::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let to = source.local_addr();
        assert_ne!(to.port(), 0);
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.send_to(&[1, 2, 3], to).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let got = loop {
            match source.next(Duration::from_millis(100)).unwrap() {
                Next::Datagram(d) => break (d.from, d.payload.to_vec()),
                Next::Idle if Instant::now() < deadline => continue,
                other => panic!("no datagram: {other:?}"),
            }
        };
        assert_eq!(got, (sender.local_addr().unwrap(), vec![1, 2, 3]));
        assert_eq!(source.next(Duration::ZERO).unwrap(), Next::Idle);
        assert_eq!(source.describe(), format!("listening on {to}"));
    }

    #[test]
    fn udp_source_reports_a_port_in_use() {
        let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = UdpSource::bind(taken.local_addr().unwrap()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
    }

    /// A file in the temporary folder, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str) -> TempFile {
            TempFile(std::env::temp_dir().join(format!(
                "forza-relay-source-{}-{name}.pcap",
                std::process::id()
            )))
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    /// A capture of `(ms after t0, destination, payload)`, from 127.0.0.1:5555.
    fn capture(name: &str, datagrams: &[(u64, &str, &[u8])]) -> (TempFile, SystemTime) {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let file = TempFile::new(name);
        let mut w = capture::Writer::create(&file.0).unwrap();
        for (ms, to, payload) in datagrams {
            w.write(
                t0 + Duration::from_millis(*ms),
                addr("127.0.0.1:5555"),
                addr(to),
                payload,
            )
            .unwrap();
        }
        w.flush().unwrap();
        (file, t0)
    }

    #[track_caller]
    fn datagram(next: Next<'_>) -> (SystemTime, SocketAddr, Vec<u8>) {
        match next {
            Next::Datagram(d) => (d.time, d.from, d.payload.to_vec()),
            other => panic!("not a datagram: {other:?}"),
        }
    }

    #[test]
    fn capture_source_reads_the_chosen_port_as_fast_as_it_can() {
        let (file, t0) = capture(
            "fastest",
            &[
                (0, "127.0.0.1:5400", &[1; 324]),
                (10, "127.0.0.1:53", &[2; 40]),
                (3_600_000, "127.0.0.1:5400", &[3; 311]),
            ],
        );
        let mut source = CaptureSource::open(&file.0, Some(5400), Pace::Fastest).unwrap();
        assert_eq!(source.selection().packets, 2);
        assert!(source.truncated().is_none());
        let (time, from, payload) = datagram(source.next(Duration::ZERO).unwrap());
        assert_eq!(
            (time, from, payload),
            (t0, addr("127.0.0.1:5555"), vec![1; 324])
        );
        // An hour later in the capture, but not waited for.
        let (time, _, payload) = datagram(source.next(Duration::ZERO).unwrap());
        assert_eq!(time, t0 + Duration::from_secs(3_600));
        assert_eq!(payload, vec![3; 311]);
        assert_eq!(source.next(Duration::ZERO).unwrap(), Next::End);
        assert_eq!(source.next(Duration::ZERO).unwrap(), Next::End);
        assert_eq!(
            source.describe(),
            format!(
                "reading {} (port 5400, 2 packets, 3600.0 s)",
                file.0.display()
            )
        );
    }

    #[test]
    fn capture_source_paced_idles_until_the_next_datagram_is_due() {
        let (file, t0) = capture(
            "paced-idle",
            &[
                (0, "127.0.0.1:5400", &[1; 8]),
                (3_600_000, "127.0.0.1:5400", &[2; 8]),
            ],
        );
        let mut source = CaptureSource::open(&file.0, None, Pace::Recorded).unwrap();
        assert_eq!(datagram(source.next(Duration::ZERO).unwrap()).0, t0);
        for _ in 0..3 {
            assert_eq!(source.next(Duration::from_millis(5)).unwrap(), Next::Idle);
        }
        assert!(source.describe().starts_with("playing "));
    }

    #[test]
    fn capture_source_paced_is_never_early_for_any_datagram() {
        let offsets = [0u64, 15, 30, 60, 61, 90];
        let datagrams: Vec<(u64, &str, &[u8])> = offsets
            .iter()
            .map(|&ms| (ms, "127.0.0.1:5400", &[7u8; 4][..]))
            .collect();
        let (file, t0) = capture("paced-order", &datagrams);
        let mut source = CaptureSource::open(&file.0, None, Pace::Recorded).unwrap();
        // Before the first call, so no later than the schedule's own start.
        let start = Instant::now();
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "not at the end after 10 s");
            match source.next(Duration::from_millis(7)).unwrap() {
                Next::Datagram(d) => {
                    let now = Instant::now();
                    let offset = d.time.duration_since(t0).unwrap();
                    assert!(now >= start + offset, "{offset:?} came early");
                    seen.push(offset.as_millis() as u64);
                }
                Next::Idle => {}
                Next::End => break,
            }
        }
        assert_eq!(seen, offsets);
    }

    #[test]
    fn capture_source_lists_the_ports_when_none_is_given() {
        let (file, _) = capture(
            "ports",
            &[
                (0, "127.0.0.1:5400", &[1; 324]),
                (5, "127.0.0.1:5300", &[2; 311]),
            ],
        );
        let e = CaptureSource::open(&file.0, None, Pace::Fastest).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, CaptureError::SeveralPorts { .. }), "{text}");
        assert!(
            text.contains("--port 5400") && text.contains("--port 5300"),
            "{text}"
        );
        let e = CaptureSource::open(&file.0, Some(9), Pace::Fastest).unwrap_err();
        assert!(matches!(e, CaptureError::NoSuchPort { port: 9, .. }), "{e}");
    }

    #[test]
    fn tap_source_reads_the_tap_then_ends_once_the_relay_is_done() {
        let (mut tx, rx) = crate::tap::tap(4096);
        let done = Arc::new(AtomicBool::new(false));
        let mut source = TapSource::new(rx, "relaying from 127.0.0.1:5400", done.clone());
        let from = addr("192.168.1.20:51234");
        let to = addr("0.0.0.0:5400");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        tx.push(t0, from, to, &[1; 324]);
        tx.push(t0 + Duration::from_millis(16), from, to, &[2; 324]);
        assert_eq!(
            datagram(source.next(Duration::ZERO).unwrap()),
            (t0, from, vec![1; 324])
        );
        assert_eq!(
            datagram(source.next(Duration::ZERO).unwrap()).2,
            vec![2; 324]
        );
        assert_eq!(source.next(Duration::from_millis(5)).unwrap(), Next::Idle);
        // What is still in the tap when the relay stops is read before the end.
        tx.push(t0, from, to, &[3; 232]);
        drop(tx);
        done.store(true, Ordering::Release);
        assert_eq!(
            datagram(source.next(Duration::ZERO).unwrap()).2,
            vec![3; 232]
        );
        assert_eq!(source.next(Duration::ZERO).unwrap(), Next::End);
        assert_eq!(source.dropped(), 0);
        assert_eq!(source.describe(), "relaying from 127.0.0.1:5400");
    }

    #[test]
    fn memory_source_plays_in_order_then_ends() {
        let from = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9));
        let mut source = MemorySource::new();
        source.push(SystemTime::UNIX_EPOCH, from, vec![7]);
        source.push(SystemTime::UNIX_EPOCH, from, vec![8, 9]);
        for expected in [&[7u8][..], &[8, 9]] {
            match source.next(Duration::ZERO).unwrap() {
                Next::Datagram(d) => assert_eq!(d.payload, expected),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(source.next(Duration::ZERO).unwrap(), Next::End);
    }
}
