//! Replaying a capture: its UDP payloads sent again with their original spacing.
//!
//! Every datagram is due at `start + offset / speed`, its offset taken from the
//! capture's timestamps and `start` fixed once: lateness never accumulates, however
//! long the replay runs. A gap over [`LONG_GAP`] (a clock jump, a damaged
//! timestamp that would make a replay wait for years) is played as
//! [`LONG_GAP_PLAYED`]. Waiting sleeps until shortly before the due time and spins
//! the rest, since a sleep may overshoot by a scheduler tick.

use std::fmt;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use log::warn;

use super::{
    thousands, CaptureError, FileFormat, LapChoice, Reader, Selection, Streams, RAW_DUMP_RATE,
};
use crate::net::socket;

/// The slowest replay accepted: a thousand times slower than captured.
pub const MIN_SPEED: f64 = 0.001;
/// The longest gap between two datagrams replayed as captured.
pub const LONG_GAP: Duration = Duration::from_secs(10);
/// How long a longer gap is replayed.
pub const LONG_GAP_PLAYED: Duration = Duration::from_secs(1);
/// How long before a due time sleeping stops and spinning starts. Windows wakes a
/// sleeper up to a millisecond late even with its high-resolution timer.
#[cfg(windows)]
const SPIN: Duration = Duration::from_micros(1_500);
/// How long before a due time sleeping stops and spinning starts.
#[cfg(not(windows))]
const SPIN: Duration = Duration::from_micros(200);
/// The longest single sleep, so Ctrl-C is noticed quickly during a long gap.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// Between the last datagram of a pass and the first of the next, when the
/// capture holds one datagram: one frame at 60 Hz.
const SINGLE_GAP: Duration = Duration::from_micros(16_667);
/// The shortest gap between passes, so a capture whose timestamps are all equal
/// does not loop as fast as the CPU allows.
const MIN_GAP: Duration = Duration::from_millis(1);

/// Checks a `--speed` value: finite and at least [`MIN_SPEED`].
pub fn check_speed(speed: f64) -> Result<f64, String> {
    if !speed.is_finite() || speed <= 0.0 {
        Err(format!(
            "{speed} is not a speed: give a number above 0, like 1 (as recorded) or 2 (twice as fast)"
        ))
    } else if speed < MIN_SPEED {
        Err(format!("{speed} is too slow: the slowest is {MIN_SPEED}"))
    } else {
        Ok(speed)
    }
}

/// The most datagrams a second `--rate` gives a raw dump.
pub const MAX_RATE: u32 = 10_000;

/// Checks a `--rate` value: 1 to [`MAX_RATE`] datagrams a second.
pub fn check_rate(rate: u32) -> Result<u32, String> {
    if (1..=MAX_RATE).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!(
            "{rate} is not a rate: give datagrams a second from 1 to {}, like 60 (a game \
             frame apart)",
            thousands(u64::from(MAX_RATE))
        ))
    }
}

/// What `forza-relay replay` is asked to do, its values checked
/// ([`check_speed`], [`check_rate`]).
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The capture or raw dump.
    pub file: &'a Path,
    /// Where to send.
    pub to: SocketAddr,
    /// The destination port whose datagrams to replay (`--port`).
    pub port: Option<u16>,
    /// Play this many times faster than captured.
    pub speed: f64,
    /// Datagrams a second for a raw dump, which has no times [default: 60].
    pub rate: Option<u32>,
    /// Start again at the end, until stopped.
    pub repeat: bool,
    /// Only this lap's frames (`--lap`).
    pub lap: Option<LapChoice>,
}

/// A replay ready to run: the file read through (once more for a lap), its
/// datagrams picked.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file.
    pub file: PathBuf,
    /// pcap, pcapng, or a raw dump.
    pub format: FileFormat,
    /// The datagrams replayed.
    pub selection: Selection,
    /// How: the speed includes a raw dump's rate.
    pub options: Options,
    /// What to tell before starting, once each: where the file ends early, long
    /// gaps, damage read past, options that do not apply.
    pub warnings: Vec<String>,
    /// How long a pass takes.
    pub length: Duration,
}

impl Plan {
    /// Reads the file of `request` through and picks what to replay.
    pub fn new(request: &Request<'_>) -> Result<Plan, CaptureError> {
        let streams = Streams::scan(request.file)?;
        let mut warnings = Vec::new();
        if let Some(cut) = &streams.truncated {
            warnings.push(format!("{cut}; replaying the packets before it"));
        }
        if streams.damage.any() {
            warnings.push(format!(
                "{} is damaged; read past {}",
                request.file.display(),
                streams.damage
            ));
        }
        let raw = matches!(streams.format, FileFormat::RawDump { .. });
        if raw && request.port.is_some() {
            warnings.push("--port is ignored: a raw dump has no ports".to_owned());
        }
        if !raw && request.rate.is_some() {
            warnings.push(format!(
                "--rate is ignored: {} has the time of each packet",
                request.file.display()
            ));
        }
        let mut selection = streams.select(request.port)?;
        if let Some(chosen) = request.lap {
            selection = selection.lap(Reader::open(request.file)?, chosen)?;
        }
        warnings.extend(selection.long_gaps_note());
        // A raw dump's times are RAW_DUMP_RATE a second: another rate is a speed.
        let rate = match (raw, request.rate) {
            (true, Some(rate)) => f64::from(rate) / f64::from(RAW_DUMP_RATE),
            _ => 1.0,
        };
        let options = Options {
            to: request.to,
            speed: request.speed * rate,
            repeat: request.repeat,
        };
        Ok(Plan {
            file: request.file.to_owned(),
            format: streams.format,
            length: selection.played.div_f64(options.speed),
            selection,
            options,
            warnings,
        })
    }

    /// Runs the replay: [`replay`] of the plan.
    pub fn run(
        &self,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Report, CaptureError> {
        replay(&self.file, &self.selection, &self.options, stop, progress)
    }
}

impl fmt::Display for Plan {
    /// `replaying drive.pcap to 127.0.0.1:9000: the 2,500 packets sent to port
    /// 5400, over 41.7 s at speed 2, again and again until Ctrl-C`; with a lap,
    /// `replaying race.pcap to 127.0.0.1:9000: lap 2 (50.303 s) of the packets
    /// sent to port 5400, its 3,019 packets, over 50.3 s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "replaying {} to {}: ",
            self.file.display(),
            self.options.to
        )?;
        let sel = &self.selection;
        if let Some(lap) = &sel.lap {
            write!(f, "{lap} of ")?;
        }
        match self.format {
            FileFormat::RawDump { .. } => {
                let rate = self.options.speed * f64::from(RAW_DUMP_RATE);
                if sel.lap.is_some() {
                    write!(f, "{}: its {} frames", self.format, thousands(sel.packets))?;
                } else {
                    write!(f, "{}", self.format)?;
                }
                write!(f, ", {} a second", Number(rate))?;
            }
            _ => {
                let noun = if sel.packets == 1 {
                    "packet"
                } else {
                    "packets"
                };
                match sel.lap {
                    Some(_) => write!(
                        f,
                        "the packets sent to port {}, its {} {noun}",
                        sel.port,
                        thousands(sel.packets)
                    )?,
                    None => write!(
                        f,
                        "the {} {noun} sent to port {}",
                        thousands(sel.packets),
                        sel.port
                    )?,
                }
                if self.options.speed != 1.0 {
                    write!(f, " at speed {}", Number(self.options.speed))?;
                }
            }
        }
        write!(f, ", over {:.1} s", self.length.as_secs_f64())?;
        if self.options.repeat {
            f.write_str(", again and again until Ctrl-C")?;
        }
        Ok(())
    }
}

/// A speed or a rate as typed: `2`, `0.5`, `1,000`.
struct Number(f64);

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n.fract() == 0.0 && n >= 0.0 && n < u64::MAX as f64 {
            f.write_str(&thousands(n as u64))
        } else {
            write!(f, "{n}")
        }
    }
}

/// How to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Where to send.
    pub to: SocketAddr,
    /// Time runs this many times faster than captured (checked by [`check_speed`]).
    pub speed: f64,
    /// Start again at the end, until stopped.
    pub repeat: bool,
}

/// When each datagram is due: one start instant, and offsets scaled by the speed.
///
/// Within a pass the offsets are taken in file order: the first datagram is due
/// at the pass's start, and a gap over [`LONG_GAP`] after the latest offset so
/// far is shortened to [`LONG_GAP_PLAYED`] (as [`Selection::played`] counts
/// it, so that a looping replay's passes follow on).
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    start: Instant,
    speed: f64,
    period: Duration,
    /// The pass the fields below are for.
    pass: u64,
    /// The latest offset seen in the pass.
    high: Option<Duration>,
    /// Capture time not played in the pass: before its first datagram, and cut
    /// from long gaps.
    cut: Duration,
}

impl Schedule {
    /// A schedule starting at `start` for the datagrams of `selection`.
    pub fn new(start: Instant, speed: f64, selection: &Selection) -> Schedule {
        let gap = match selection.packets {
            0 | 1 => SINGLE_GAP,
            n => selection.played / u32::try_from(n - 1).unwrap_or(u32::MAX),
        };
        Schedule {
            start,
            speed,
            period: selection.played + gap.max(MIN_GAP),
            pass: 0,
            high: None,
            cut: Duration::ZERO,
        }
    }

    /// The capture time of one pass, and the average gap after it.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// When the datagram `offset` after the capture's first is due in pass `pass`
    /// (0 for the first). Call it for the datagrams of a pass in file order; asking
    /// again for the same datagram gives the same answer.
    pub fn due(&mut self, pass: u64, offset: Duration) -> Instant {
        if pass != self.pass {
            self.pass = pass;
            self.high = None;
        }
        match self.high {
            None => {
                self.cut = offset;
                self.high = Some(offset);
            }
            Some(high) if offset > high => {
                let gap = offset - high;
                if gap > LONG_GAP {
                    self.cut += gap - LONG_GAP_PLAYED;
                }
                self.high = Some(offset);
            }
            Some(_) => {}
        }
        let played = offset.saturating_sub(self.cut);
        let capture = pass as f64 * self.period.as_secs_f64() + played.as_secs_f64();
        let wall = Duration::try_from_secs_f64(capture / self.speed).unwrap_or(Duration::MAX);
        // Only past any clock's range (centuries): then it is due now.
        self.start.checked_add(wall).unwrap_or(self.start)
    }
}

/// Where a replay is, after each datagram sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The pass, from 1.
    pub pass: u64,
    /// Datagrams sent in this pass.
    pub sent_in_pass: u64,
    /// Datagrams sent in every pass.
    pub sent: u64,
    /// Since the first was sent.
    pub elapsed: Duration,
}

/// How a replay went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Where it sent.
    pub to: SocketAddr,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams the socket refused.
    pub failed: u64,
    /// The first refusal's message.
    pub first_error: Option<String>,
    /// Sends after which the OS said nothing listens at the destination (an
    /// ICMP port unreachable; each was sent again, as the relay does).
    pub refused: u64,
    /// Passes started.
    pub passes: u64,
    /// From the first datagram to the end.
    pub elapsed: Duration,
    /// Stopped before the end (Ctrl-C).
    pub stopped: bool,
}

impl std::fmt::Display for Report {
    /// `replay finished: sent 400 packets to 127.0.0.1:9000 in 2.00 s`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.stopped { "stopped" } else { "finished" };
        let noun = if self.sent == 1 { "packet" } else { "packets" };
        write!(
            f,
            "replay {how}: sent {} {noun} to {} in {:.2} s",
            thousands(self.sent),
            self.to,
            self.elapsed.as_secs_f64()
        )?;
        if self.passes > 1 {
            write!(f, " ({} passes)", thousands(self.passes))?;
        }
        if self.refused > 0 {
            write!(
                f,
                "; nothing was listening there {} times",
                thousands(self.refused)
            )?;
        }
        if self.failed > 0 {
            write!(f, "; {} could not be sent", thousands(self.failed))?;
            if let Some(e) = &self.first_error {
                write!(f, " (first: {e})")?;
            }
        }
        Ok(())
    }
}

/// Sends the datagrams of `selection` read from the capture at `path` to
/// `options.to`, paced by their timestamps, until the end (or forever with
/// `options.repeat`) or until `stop` is set. `progress` is called after each
/// datagram sent.
///
/// A capture that ends inside a record is replayed up to there (its [`Streams`]
/// scan says so). Send failures are counted, not fatal.
///
/// [`Streams`]: super::Streams
pub fn replay(
    path: &Path,
    selection: &Selection,
    options: &Options,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, CaptureError> {
    let socket = socket::connect(options.to).map_err(|source| CaptureError::Socket {
        to: options.to,
        source,
    })?;
    let mut report = Report {
        to: options.to,
        sent: 0,
        failed: 0,
        first_error: None,
        refused: 0,
        passes: 0,
        elapsed: Duration::ZERO,
        stopped: false,
    };
    let mut schedule: Option<Schedule> = None;
    'passes: for pass in 0.. {
        report.passes = pass + 1;
        let mut sent_in_pass = 0;
        // The datagrams to the port so far in this pass, as a lap counts them.
        let mut to_port = 0;
        let mut reader = Reader::open(path)?;
        while let Some(d) = reader.next_datagram() {
            let d = match d {
                Ok(d) => d,
                // The scan reported where the reading ends early.
                Err(CaptureError::Truncated { .. } | CaptureError::Corrupt { .. }) => break,
                Err(e) => return Err(e),
            };
            if !selection.matches(&d) {
                continue;
            }
            to_port += 1;
            if !selection.takes(to_port - 1, d.payload) {
                continue;
            }
            let schedule = schedule
                .get_or_insert_with(|| Schedule::new(Instant::now(), options.speed, selection));
            if !wait_until(schedule.due(pass, selection.offset(d.time)), stop) {
                report.stopped = true;
                break 'passes;
            }
            match send(&socket, d.payload, &mut report) {
                Ok(()) => {
                    report.sent += 1;
                    sent_in_pass += 1;
                }
                Err(e) => {
                    report.failed += 1;
                    report.first_error.get_or_insert_with(|| e.to_string());
                }
            }
            report.elapsed = schedule.start.elapsed();
            progress(&Progress {
                pass: pass + 1,
                sent_in_pass,
                sent: report.sent,
                elapsed: report.elapsed,
            });
        }
        if !options.repeat || sent_in_pass == 0 {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            report.stopped = true;
            break;
        }
    }
    if let Some(s) = &schedule {
        report.elapsed = s.start.elapsed();
    }
    Ok(report)
}

/// One send ([`socket::send_retrying`]). An earlier datagram's ICMP "port
/// unreachable" comes back on a later send (Windows calls it a reset), which it
/// fails: that send is tried once more, counted, and the first one said
/// (nothing is listening yet, or any more).
fn send(socket: &UdpSocket, payload: &[u8], report: &mut Report) -> io::Result<()> {
    socket::send_retrying(
        || socket.send(payload),
        |e, retry_left| {
            let refused = matches!(
                e.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
            );
            if !retry_left || !refused {
                return false;
            }
            if report.refused == 0 {
                warn!(
                    "nothing is listening at {} (is the tool running?); still sending",
                    report.to
                );
            }
            report.refused += 1;
            true
        },
    )
    .map(|_| ())
}

/// Waits until `deadline`; false if `stop` was set first.
pub fn wait_until(deadline: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        let Some(left) = deadline
            .checked_duration_since(now)
            .filter(|l| !l.is_zero())
        else {
            return true;
        };
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(MAX_SLEEP));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::LapSpan;
    use std::time::UNIX_EPOCH;

    fn selection(packets: u64, ms: u64) -> Selection {
        let first = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        Selection {
            port: 5400,
            packets,
            first,
            last: first + Duration::from_millis(ms),
            played: Duration::from_millis(ms),
            long_gaps: 0,
            lap: None,
        }
    }

    #[test]
    fn due_times_scale_with_speed_from_one_start() {
        let start = Instant::now();
        let mut s = Schedule::new(start, 2.0, &selection(101, 1_000));
        assert_eq!(
            s.period(),
            Duration::from_millis(1_010),
            "1 s + the 10 ms average gap"
        );
        assert_eq!(s.due(0, Duration::ZERO), start);
        assert_eq!(
            s.due(0, Duration::from_millis(500)),
            start + Duration::from_millis(250)
        );
        // Pass 3 starts 3 periods in: 3.03 s of capture, 1.515 s at speed 2.
        let third = s.due(3, Duration::ZERO) - start;
        assert!(
            (third.as_secs_f64() - 1.515).abs() < 1e-9,
            "pass 3 at {third:?}"
        );
    }

    #[test]
    fn a_long_gap_is_played_as_one_second_and_each_pass_starts_afresh() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let year = Duration::from_secs(365 * 86_400);
        let mut sel = selection(4, 0);
        sel.played = ms(2_020);
        let mut s = Schedule::new(start, 1.0, &sel);
        // The first in file order is due at once, whatever its offset.
        assert_eq!(s.due(0, ms(5)), start);
        assert_eq!(s.due(0, ms(15)), start + ms(10));
        assert_eq!(s.due(0, ms(15)), start + ms(10), "asked again");
        assert_eq!(s.due(0, year), start + ms(1_010), "a year played as 1 s");
        assert_eq!(s.due(0, ms(1)), start, "back in time: at once");
        assert_eq!(s.due(0, year + ms(10)), start + ms(1_020));
        assert_eq!(s.due(0, 2 * year), start + ms(2_020), "and again");
        let period = s.period();
        assert_eq!(period, ms(2_020) + ms(2_020) / 3);
        assert_eq!(
            s.due(1, ms(5)),
            start + period,
            "the next pass from its start"
        );
        assert_eq!(s.due(1, year), start + period + ms(1_000));
    }

    #[test]
    fn a_single_datagram_loops_at_60_hz_and_equal_times_at_1_khz() {
        let start = Instant::now();
        assert_eq!(
            Schedule::new(start, 1.0, &selection(1, 0)).period(),
            SINGLE_GAP
        );
        assert_eq!(
            Schedule::new(start, 1.0, &selection(50, 0)).period(),
            MIN_GAP
        );
    }

    #[test]
    fn rates_are_checked() {
        assert_eq!(check_rate(60), Ok(60));
        assert_eq!(check_rate(MAX_RATE), Ok(MAX_RATE));
        for bad in [0, MAX_RATE + 1] {
            let e = check_rate(bad).expect_err("refused");
            assert!(e.starts_with(&format!("{bad} is not a rate")), "{e}");
        }
    }

    #[test]
    fn the_plan_reads_as_one_sentence() {
        let plan = |format, speed, repeat| Plan {
            file: PathBuf::from("drive.pcap"),
            format,
            selection: Selection {
                packets: 2_500,
                ..selection(2_500, 41_650)
            },
            options: Options {
                to: "127.0.0.1:47402".parse().expect("an address"),
                speed,
                repeat,
            },
            warnings: Vec::new(),
            length: Duration::from_millis(41_650).div_f64(speed),
        };
        assert_eq!(
            plan(FileFormat::Pcap, 1.0, false).to_string(),
            "replaying drive.pcap to 127.0.0.1:47402: the 2,500 packets sent to port 5400, \
             over 41.6 s"
        );
        assert_eq!(
            plan(FileFormat::PcapNg, 0.5, true).to_string(),
            "replaying drive.pcap to 127.0.0.1:47402: the 2,500 packets sent to port 5400 at \
             speed 0.5, over 83.3 s, again and again until Ctrl-C"
        );
        let raw = FileFormat::RawDump {
            len: 324,
            datagrams: 2_500,
        };
        assert_eq!(
            plan(raw, 2.0, false).to_string(),
            "replaying drive.pcap to 127.0.0.1:47402: a raw dump of 2,500 datagrams of 324 \
             bytes (fh4/fh5/fh6), 120 a second, over 20.8 s"
        );
        let lap = |chosen| {
            let mut p = plan(FileFormat::Pcap, 1.0, false);
            p.selection.lap = Some(LapSpan {
                chosen,
                lap: 2,
                first: 3_100,
                last: 6_118,
                lap_time_s: 50.302_68,
            });
            p
        };
        assert_eq!(
            lap(LapChoice::Number(2)).to_string(),
            "replaying drive.pcap to 127.0.0.1:47402: lap 2 (50.303 s) of the packets sent to \
             port 5400, its 2,500 packets, over 41.6 s"
        );
        let mut best = lap(LapChoice::Best);
        best.format = raw;
        best.options.speed = 20.0;
        assert_eq!(
            best.to_string(),
            "replaying drive.pcap to 127.0.0.1:47402: the best lap, lap 2 (50.303 s) of a raw \
             dump of 2,500 datagrams of 324 bytes (fh4/fh5/fh6): its 2,500 frames, 1,200 a \
             second, over 41.6 s"
        );
    }

    #[test]
    fn speeds_are_checked() {
        assert_eq!(check_speed(1.0), Ok(1.0));
        assert_eq!(check_speed(0.5), Ok(0.5));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.0001] {
            let e = check_speed(bad).expect_err("refused");
            assert!(e.contains(&bad.to_string()), "{e}");
        }
    }

    #[test]
    fn a_wait_returns_at_its_deadline_or_at_stop() {
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + Duration::from_millis(5);
        assert!(wait_until(deadline, &stop));
        assert!(Instant::now() >= deadline, "never early");
        stop.store(true, Ordering::Relaxed);
        assert!(!wait_until(
            Instant::now() + Duration::from_secs(3_600),
            &stop
        ));
    }

    #[test]
    fn the_report_reads_as_one_line() {
        let mut r = Report {
            to: "127.0.0.1:9000".parse().expect("an address"),
            sent: 3_600,
            failed: 0,
            first_error: None,
            refused: 0,
            passes: 1,
            elapsed: Duration::from_millis(30_004),
            stopped: false,
        };
        assert_eq!(
            r.to_string(),
            "replay finished: sent 3,600 packets to 127.0.0.1:9000 in 30.00 s"
        );
        r.stopped = true;
        r.passes = 3;
        r.failed = 2;
        r.first_error = Some("Network is unreachable".to_owned());
        r.refused = 1_500;
        assert_eq!(
            r.to_string(),
            "replay stopped: sent 3,600 packets to 127.0.0.1:9000 in 30.00 s (3 passes); \
             nothing was listening there 1,500 times; 2 could not be sent (first: Network is \
             unreachable)"
        );
    }
}
