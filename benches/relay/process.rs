//! The relay under test as a child process: starting and stopping it, its
//! standard output (forza-relay's JSON stats), what `/proc` says about it, and
//! `strace -c` attached to it.

use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::Deserialize;

const STOP_TIMEOUT: Duration = Duration::from_secs(5);
const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);

/// A running child. Dropping it kills the process, so a panic never leaves one
/// behind.
pub struct Spawned {
    child: Child,
    stdout: Option<JoinHandle<Vec<String>>>,
    stderr: Option<JoinHandle<String>>,
}

/// What a child left when it stopped.
pub struct Ended {
    /// `None` when it had to be killed.
    pub status: Option<ExitStatus>,
    /// Its standard output, by line.
    pub stdout: Vec<String>,
    /// Its standard error, kept only to show when something went wrong.
    pub stderr: String,
}

impl Spawned {
    /// Starts `cmd` with its output collected by two threads.
    pub fn start(mut cmd: Command) -> io::Result<Spawned> {
        let mut child = cmd
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().map(|out| {
            thread::spawn(move || BufReader::new(out).lines().map_while(Result::ok).collect())
        });
        let stderr = child.stderr.take().map(|mut err| {
            thread::spawn(move || {
                let mut text = String::new();
                let _ = err.read_to_string(&mut text);
                text
            })
        });
        Ok(Spawned {
            child,
            stdout,
            stderr,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ctrl-C (forza-relay prints its final stats and exits 0), a kill if it
    /// hangs.
    pub fn stop(mut self) -> Ended {
        interrupt(self.pid());
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        let stdout = self.stdout.take().and_then(|t| t.join().ok());
        let stderr = self.stderr.take().and_then(|t| t.join().ok());
        Ended {
            status,
            stdout: stdout.unwrap_or_default(),
            stderr: stderr.unwrap_or_default(),
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// SIGINT, as Ctrl-C sends; elsewhere there is no such signal to send.
fn interrupt(pid: u32) {
    if cfg!(unix) {
        let _ = Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status();
    }
}

/// forza-relay's final stats line (`--stats-format json`): only the fields
/// the bench reads.
#[derive(Debug, Deserialize)]
pub struct FinalLine {
    /// Counters of the listening socket.
    pub input: FinalInput,
    /// One entry per destination, in order.
    pub destinations: Vec<FinalDestination>,
}

/// `input` of a [`FinalLine`].
#[derive(Debug, Deserialize)]
pub struct FinalInput {
    /// Datagrams received, warm-up included.
    pub received: u64,
    /// Datagrams of no expected length.
    pub malformed: u64,
}

/// One destination of a [`FinalLine`].
#[derive(Debug, Deserialize)]
pub struct FinalDestination {
    /// Handed to the OS.
    pub sent: u64,
    /// Dropped: `only_race_on`.
    pub not_racing: u64,
    /// Dropped: `max_rate`.
    pub rate_limited: u64,
    /// Dropped: could not be translated.
    pub untranslatable: u64,
    /// Dropped: the socket and its backlog were full.
    pub backlog_full: u64,
    /// Dropped: the send failed.
    pub send_failed: u64,
    /// Dropped: older than its `max_age` (issue 15).
    #[serde(default)]
    pub stale: u64,
    /// Its latency over the run, from receipt to the send's return.
    #[serde(default)]
    pub latency_us: FinalLatency,
}

/// `latency_us` of a [`FinalDestination`]: µs, `None` when nothing was sent.
#[derive(Debug, Default, Deserialize)]
pub struct FinalLatency {
    pub p50: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
}

impl FinalDestination {
    /// Frames the relay itself dropped for any reason.
    pub fn dropped(&self) -> u64 {
        self.not_racing
            + self.rate_limited
            + self.untranslatable
            + self.backlog_full
            + self.send_failed
            + self.stale
    }
}

impl FinalLine {
    /// The last `"event":"final"` line of `stdout`.
    pub fn find(stdout: &[String]) -> Result<FinalLine, String> {
        let line = stdout
            .iter()
            .rev()
            .find(|l| l.contains(r#""event":"final""#))
            .ok_or("no final stats line on standard output")?;
        serde_json::from_str(line).map_err(|e| format!("the final stats line ({e}): {line}"))
    }
}

/// `strace -c -f -p PID` running against a process.
pub struct Strace {
    child: Child,
    out: PathBuf,
}

/// What `strace -c` counted.
#[derive(Debug, Clone, Default)]
pub struct SyscallCounts {
    /// Every call, all threads.
    pub total: u64,
    /// Calls by name, most first.
    pub by_name: Vec<(String, u64)>,
    /// Calls that returned an error (EAGAIN included).
    pub errors: u64,
}

impl Strace {
    /// Attaches to every thread of `pid`; waits until strace says it is on.
    pub fn attach(pid: u32) -> Result<Strace, String> {
        let out = std::env::temp_dir().join(format!("forza-relay-bench-strace-{pid}.txt"));
        let mut child = Command::new("strace")
            .args(["-c", "-f", "-p", &pid.to_string(), "-o"])
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("strace not installed ({e})"))?;
        let stderr = child.stderr.take().ok_or("strace's stderr is piped")?;
        let (tx, rx) = mpsc::channel();
        // strace reports attaching and detaching on stderr; keep draining it.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + ATTACH_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("attached") => break,
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("strace did not attach (ptrace not permitted?)".to_owned());
                }
            }
        }
        // The message comes per thread; give the others a moment.
        thread::sleep(Duration::from_millis(200));
        Ok(Strace { child, out })
    }

    /// Detaches and reads the counts.
    pub fn detach(mut self) -> Result<SyscallCounts, String> {
        interrupt(self.child.id());
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out)
            .map_err(|e| format!("read {}: {e}", self.out.display()))?;
        let _ = std::fs::remove_file(&self.out);
        parse_strace_summary(&text)
    }
}

/// The table of `strace -c`: `% time  seconds  usecs/call  calls  [errors]  syscall`,
/// then `... total`.
fn parse_strace_summary(text: &str) -> Result<SyscallCounts, String> {
    let mut counts = SyscallCounts::default();
    let mut found_total = false;
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 5 || cols[0].parse::<f64>().is_err() {
            continue;
        }
        let Ok(calls) = cols[3].parse::<u64>() else {
            continue;
        };
        let errors = if cols.len() >= 6 {
            cols[4].parse().unwrap_or(0)
        } else {
            0
        };
        let name = cols[cols.len() - 1];
        if name == "total" {
            counts.total = calls;
            counts.errors = errors;
            found_total = true;
        } else {
            counts.by_name.push((name.to_owned(), calls));
        }
    }
    if !found_total {
        // No call at all makes an empty table.
        if text.trim().is_empty() {
            return Ok(counts);
        }
        return Err(format!("no total line in strace's summary:\n{text}"));
    }
    counts.by_name.sort_by_key(|c| std::cmp::Reverse(c.1));
    Ok(counts)
}

/// `perf stat -x, -p PID` counting a running process, when `perf` is
/// installed. Events the machine can't count (hardware counters in most VMs)
/// read `<not supported>`: their values are `None`.
pub struct PerfStat {
    child: Child,
    out: PathBuf,
    events: Vec<&'static str>,
}

/// What `perf stat` counted: each event asked for, in order, with its value.
#[derive(Debug, Clone, Default)]
pub struct PerfCounts(pub Vec<(&'static str, Option<f64>)>);

impl PerfCounts {
    /// The value of `event`, if it was counted.
    pub fn get(&self, event: &str) -> Option<f64> {
        self.0
            .iter()
            .find(|(e, _)| *e == event)
            .and_then(|(_, v)| *v)
    }
}

impl PerfStat {
    /// Starts counting `events` in every thread of `pid`.
    pub fn attach(pid: u32, events: &[&'static str]) -> Result<PerfStat, String> {
        let out = std::env::temp_dir().join(format!("forza-relay-bench-perf-{pid}.csv"));
        let child = Command::new("perf")
            .args([
                "stat",
                "-x",
                ",",
                "-p",
                &pid.to_string(),
                "-e",
                &events.join(","),
            ])
            .arg("-o")
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("perf not installed ({e})"))?;
        // perf prints nothing when it starts counting; give it a moment.
        thread::sleep(Duration::from_millis(200));
        Ok(PerfStat {
            child,
            out,
            events: events.to_vec(),
        })
    }

    /// Stops counting and reads the counts.
    pub fn detach(mut self) -> Result<PerfCounts, String> {
        interrupt(self.child.id());
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out)
            .map_err(|e| format!("read {}: {e}", self.out.display()))?;
        let _ = std::fs::remove_file(&self.out);
        // One CSV line per event, in the order asked: value,unit,event,…
        let values: Vec<Option<f64>> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split(',').next().and_then(|v| v.parse().ok()))
            .collect();
        if values.len() != self.events.len() {
            return Err(format!(
                "perf stat printed {} lines for {} events:\n{text}",
                values.len(),
                self.events.len()
            ));
        }
        Ok(PerfCounts(
            self.events.iter().copied().zip(values).collect(),
        ))
    }
}

/// `/proc` readings (Linux); elsewhere every reading is `None`.
pub mod procfs {
    use std::fs;

    /// Nanoseconds on a CPU, summed over every thread of `pid`
    /// (`/proc/PID/task/*/schedstat`, first field).
    pub fn cpu_ns(pid: u32) -> Option<u64> {
        sum_over_tasks(pid, |task| {
            let text = fs::read_to_string(format!("{task}/schedstat")).ok()?;
            text.split_whitespace().next()?.parse().ok()
        })
    }

    /// Times any thread of `pid` went to sleep (voluntary context switches).
    pub fn sleeps(pid: u32) -> Option<u64> {
        sum_over_tasks(pid, |task| {
            status_value(&format!("{task}/status"), "voluntary_ctxt_switches")
        })
    }

    fn sum_over_tasks(pid: u32, read: impl Fn(&str) -> Option<u64>) -> Option<u64> {
        let tasks = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        let mut total = None;
        for task in tasks.flatten() {
            // A thread that ended between the listing and the read counts 0.
            let v = read(&task.path().to_string_lossy()).unwrap_or(0);
            total = Some(total.unwrap_or(0) + v);
        }
        total
    }

    /// utime + stime of the whole process, in clock ticks (`/proc/PID/stat`).
    pub fn cpu_ticks(pid: u32) -> Option<u64> {
        user_system_ticks(pid).map(|(user, system)| user + system)
    }

    /// utime and stime of the whole process apart, in clock ticks: the
    /// kernel samples which side a tick finds a thread on, so over a short run
    /// the split is coarse.
    pub fn user_system_ticks(pid: u32) -> Option<(u64, u64)> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces; the fields after it are plain.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Fields 14 and 15 of proc(5); `rest` starts at field 3.
        Some((fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?))
    }

    /// Peak resident memory of `pid`, KiB (`VmHWM`).
    pub fn peak_rss_kib(pid: u32) -> Option<u64> {
        status_value(&format!("/proc/{pid}/status"), "VmHWM")
    }

    fn status_value(path: &str, key: &str) -> Option<u64> {
        let status = fs::read_to_string(path).ok()?;
        status.lines().find_map(|line| {
            let value = line.strip_prefix(key)?.strip_prefix(':')?;
            value.split_whitespace().next()?.parse().ok()
        })
    }

    /// The kernel's drop counter of the UDP socket(s) bound to `port`
    /// (`/proc/net/udp`, last column).
    pub fn udp_drops(port: u16) -> Option<u64> {
        let table = fs::read_to_string("/proc/net/udp").ok()?;
        let mut found = None;
        for line in table.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let Some((_, hex)) = cols.get(1).and_then(|local| local.split_once(':')) else {
                continue;
            };
            if u16::from_str_radix(hex, 16).ok() == Some(port) {
                let drops: u64 = cols.last()?.parse().ok()?;
                found = Some(found.unwrap_or(0) + drops);
            }
        }
        found
    }

    /// The three load averages.
    pub fn loadavg() -> Option<String> {
        let text = fs::read_to_string("/proc/loadavg").ok()?;
        Some(
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
}
