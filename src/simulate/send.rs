//! Sending a simulated drive over UDP at a steady rate.
//!
//! Frame `n` is due at `start + n / rate` ([`Pacer`]), so sleeping late once never
//! shifts the frames after it: the pacing does not drift. The simulator is fed the
//! nominal `1 / rate` per frame whatever the scheduling did, so a seed gives the
//! same packets at the same rate on every run. The caller stops a drive by setting
//! a flag (a Ctrl-C handler, or the demo), which ends the race with
//! [`RACE_OFF_FRAMES`] IsRaceOn = 0 frames as a game does.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Simulator, RACE_OFF_FRAMES};
use crate::net::socket;
use crate::numbers::Elapsed;
use crate::numbers::{Count, Thousands};
use crate::wire::{Format, MAX_LEN};

/// Packets per second when `--rate` is not given: a game at 60 fps.
pub const DEFAULT_RATE: u32 = 60;
/// The highest `--rate` accepted.
pub const MAX_RATE: u32 = 1_000;
/// Further behind schedule than this (a suspended laptop, a stalled machine), the
/// schedule restarts from now instead of sending the missed frames in a burst.
const MAX_LAG: Duration = Duration::from_millis(250);

/// A validated `simulate` command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOptions {
    /// Where the packets go.
    pub to: SocketAddr,
    /// The packet format.
    pub format: Format,
    /// Packets per second, 1..=[`MAX_RATE`].
    pub rate: u32,
    /// How long to send; `None` = until stopped.
    pub duration: Option<Duration>,
    /// The drive's seed.
    pub seed: u64,
}

impl SendOptions {
    /// The number of frames a drive of [`SendOptions::duration`] sends, if set.
    pub fn frames(&self) -> Option<u64> {
        self.duration
            .map(|d| ((d.as_secs_f64() * f64::from(self.rate)).ceil() as u64).max(1))
    }

    /// The line `simulate` prints when it starts.
    pub fn describe(&self) -> String {
        let until = match self.duration {
            Some(d) => format!("for {}", Elapsed(d)),
            None => "until Ctrl-C".to_owned(),
        };
        format!(
            "simulating a {} drive: {} packets ({} bytes) to {} at {}/s {until}, seed {}",
            self.format.game(),
            self.format,
            self.format.len(),
            self.to,
            self.rate,
            self.seed
        )
    }
}

/// When each frame is due: frame `n` at `start + n / rate`, so one late frame
/// does not delay the others.
#[derive(Debug, Clone)]
pub struct Pacer {
    anchor: Instant,
    rate: u32,
    /// Frames sent since `anchor`.
    n: u64,
    restarts: u64,
}

impl Pacer {
    /// The first frame is due at `start`.
    pub fn new(start: Instant, rate: u32) -> Pacer {
        Pacer {
            anchor: start,
            rate: rate.max(1),
            n: 0,
            restarts: 0,
        }
    }

    /// Time from the anchor to frame `n`, exact to the nanosecond.
    fn offset(&self, n: u64) -> Duration {
        let nanos = u128::from(n) * 1_000_000_000 / u128::from(self.rate);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// When the next frame is due.
    pub fn due(&self) -> Instant {
        self.anchor + self.offset(self.n)
    }

    /// Counts the frame just sent; at `now`, more than 250 ms behind, the
    /// schedule restarts with the next frame due now.
    pub fn sent(&mut self, now: Instant) {
        self.n += 1;
        if now.saturating_duration_since(self.due()) > MAX_LAG {
            self.anchor = now;
            self.n = 0;
            self.restarts += 1;
        }
    }

    /// How many times the schedule restarted.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// The simulated length of every frame: 1 / rate.
    pub fn frame_time(&self) -> Duration {
        self.offset(1)
    }
}

/// What a drive sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendReport {
    /// Where to.
    pub to: SocketAddr,
    /// Packets handed to the network.
    pub sent: u64,
    /// Sends that failed.
    pub send_errors: u64,
    /// Sends refused because nothing listened at the target (each frame was
    /// sent again).
    pub refused: u64,
    /// The first send error, if any.
    pub first_error: Option<String>,
    /// Times the schedule fell far behind and restarted.
    pub restarts: u64,
    /// From the first frame to the last.
    pub elapsed: Duration,
}

impl fmt::Display for SendReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed.as_secs_f64();
        write!(
            f,
            "sent {} to {} in {}",
            Count(self.sent, "packet"),
            self.to,
            Elapsed(self.elapsed)
        )?;
        if secs > 0.0 {
            write!(f, " ({:.1}/s)", self.sent as f64 / secs)?;
        }
        if self.refused > 0 {
            write!(
                f,
                "; nothing was listening there ({} refused)",
                Thousands(self.refused)
            )?;
        }
        if self.send_errors > 0 {
            write!(f, "; {} sends failed", Thousands(self.send_errors))?;
            if let Some(e) = &self.first_error {
                write!(f, " (first: {e})")?;
            }
        }
        if self.restarts > 0 {
            write!(
                f,
                "; fell behind and restarted the schedule {} times",
                Thousands(self.restarts)
            )?;
        }
        Ok(())
    }
}

/// Sends the drive `options` describes until its duration is over or `stop` is
/// set, then the race-off frames. Errors only when no socket can be opened; a
/// failed send is counted and the drive goes on (UDP: nobody may be listening).
pub fn send(options: &SendOptions, stop: &AtomicBool) -> io::Result<SendReport> {
    // Connected, so a closed port's ICMP comes back as "refused" on the next
    // send: said once, as the relay does for a destination.
    let socket = socket::connect(options.to)?;
    let mut refused = false;
    let mut sim = Simulator::new(options.format, options.seed);
    let mut buf = [0u8; MAX_LEN];
    let total = options.frames();
    let start = Instant::now();
    let mut pacer = Pacer::new(start, options.rate);
    let dt = pacer.frame_time();
    let mut report = SendReport {
        to: options.to,
        sent: 0,
        send_errors: 0,
        refused: 0,
        first_error: None,
        restarts: 0,
        elapsed: Duration::ZERO,
    };
    let mut frames = 0u64;
    let mut race_off_left: Option<u64> = None;
    loop {
        if race_off_left.is_none() {
            let end = total.is_some_and(|t| frames + u64::from(RACE_OFF_FRAMES) >= t);
            if end || stop.load(Ordering::SeqCst) {
                sim.finish();
                let left = u64::from(RACE_OFF_FRAMES);
                race_off_left = Some(total.map_or(left, |t| t.saturating_sub(frames).min(left)));
            }
        }
        if race_off_left == Some(0) {
            break;
        }
        let now = Instant::now();
        let due = pacer.due();
        if due > now {
            std::thread::sleep(due - now);
        }
        let len = sim
            .frame(dt, &mut buf)
            .expect("a MAX_LEN buffer holds every format");
        let sent = socket::send_retrying(
            || socket.send(&buf[..len]),
            // The refusal of an earlier frame: this one was not sent yet.
            |e, retry_left| {
                if !retry_left || e.kind() != io::ErrorKind::ConnectionRefused {
                    return false;
                }
                if !refused {
                    refused = true;
                    log::warn!(
                        "{}: nothing is listening on that port (is forza-relay or the \
                         tool running?); still sending to it",
                        options.to
                    );
                }
                report.refused += 1;
                true
            },
        );
        match sent {
            Ok(_) => report.sent += 1,
            Err(e) => {
                report.send_errors += 1;
                if report.first_error.is_none() {
                    log::warn!("sending to {} failed: {e}", options.to);
                    report.first_error = Some(e.to_string());
                }
            }
        }
        frames += 1;
        if let Some(left) = &mut race_off_left {
            *left -= 1;
        }
        pacer.sent(Instant::now());
    }
    // The last frame's slot ends one period after it: 60 frames at 60/s is 1 s.
    let now = Instant::now();
    if pacer.due() > now {
        std::thread::sleep(pacer.due() - now);
    }
    report.elapsed = start.elapsed();
    report.restarts = pacer.restarts();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;

    #[test]
    fn frames_are_due_on_a_fixed_grid() {
        let start = Instant::now();
        let mut p = Pacer::new(start, 60);
        assert_eq!(p.due(), start);
        for _ in 0..60 {
            // Sent on time: no restart.
            let due = p.due();
            p.sent(due);
        }
        assert_eq!(p.due(), start + Duration::from_secs(1));
        assert_eq!(p.frame_time(), Duration::from_nanos(16_666_666));
        // 1/3 s steps don't accumulate rounding: frame 3 is exactly 1 s in.
        let mut p = Pacer::new(start, 3);
        for _ in 0..3 {
            let due = p.due();
            p.sent(due);
        }
        assert_eq!(p.due(), start + Duration::from_secs(1));
        assert_eq!(p.restarts(), 0);
    }

    #[test]
    fn a_late_frame_does_not_shift_the_next_ones() {
        let start = Instant::now();
        let mut p = Pacer::new(start, 100);
        // Frame 0 goes out 30 ms late; frame 1 is still due at 10 ms.
        p.sent(start + Duration::from_millis(30));
        assert_eq!(p.due(), start + Duration::from_millis(10));
        assert_eq!(p.restarts(), 0);
    }

    #[test]
    fn far_behind_the_schedule_restarts_from_now() {
        let start = Instant::now();
        let mut p = Pacer::new(start, 100);
        let late = start + Duration::from_secs(2);
        p.sent(late);
        assert_eq!(p.due(), late);
        assert_eq!(p.restarts(), 1);
    }

    #[test]
    fn a_drive_of_a_set_duration_sends_rate_times_seconds_and_ends_race_off() {
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let to = receiver.local_addr().unwrap();
        let options = SendOptions {
            to,
            format: Format::Fh6,
            rate: 200,
            duration: Some(Duration::from_millis(100)),
            seed: 3,
        };
        let report = send(&options, &AtomicBool::new(false)).unwrap();
        assert_eq!(report.sent, 20);
        assert_eq!(report.send_errors, 0);
        let mut race_on = Vec::new();
        let mut buf = [0u8; 1024];
        for _ in 0..20 {
            let n = receiver.recv(&mut buf).unwrap();
            assert_eq!(n, 324);
            let p = crate::Packet::new_checked(&buf[..n], Format::Fh6).unwrap();
            race_on.push(p.is_race_on());
        }
        let off = RACE_OFF_FRAMES as usize;
        assert!(race_on[..off].iter().all(|&r| r == 0), "{race_on:?}");
        assert!(
            race_on[off..20 - off].iter().all(|&r| r == 1),
            "{race_on:?}"
        );
        assert!(race_on[20 - off..].iter().all(|&r| r == 0), "{race_on:?}");
    }

    #[test]
    fn a_stop_request_still_ends_the_race() {
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = receiver.local_addr().unwrap();
        let options = SendOptions {
            to,
            format: Format::Fm7,
            rate: 1_000,
            duration: None,
            seed: 3,
        };
        // Stopped before the first frame: only the race-off frames go.
        let report = send(&options, &AtomicBool::new(true)).unwrap();
        assert_eq!(report.sent, u64::from(RACE_OFF_FRAMES));
    }
}
