//! One measured run: receivers up, the peer started, a warm-up, paced traffic,
//! then every reading taken before the peer is stopped.

use std::time::{Duration, Instant};

use crate::peers::Peer;
use crate::process::{
    procfs, Ended, FinalLine, PerfCounts, PerfStat, Spawned, Strace, SyscallCounts,
};
use crate::traffic::{free_port, Receivers, Sender, Wake};
use crate::valgrind::{self, Counted};

/// What `perf stat` is asked to count (`Trial::perf`): user and kernel apart
/// where the machine has hardware counters, and two software events any
/// Linux has.
pub const PERF_EVENTS: [&str; 10] = [
    "instructions:u",
    "instructions:k",
    "cycles:u",
    "cycles:k",
    "cache-misses:u",
    "cache-misses:k",
    "dTLB-load-misses:u",
    "dTLB-load-misses:k",
    "task-clock",
    "context-switches",
];
/// How long a relay under valgrind may take to start.
const VALGRIND_WARM_UP: Duration = Duration::from_secs(60);

/// What to run.
#[derive(Debug, Clone)]
pub struct Trial {
    /// What forwards the packets.
    pub peer: Peer,
    /// How many destinations (receiving sockets).
    pub dests: usize,
    /// Input packets per second.
    pub rate: u32,
    /// How long the measured traffic lasts.
    pub time: Duration,
    /// How the receivers wait.
    pub wake: Wake,
    /// Count the peer's system calls with strace over the measured traffic.
    pub strace: bool,
    /// After the traffic, measure the peer with no traffic for this long.
    pub idle: Option<Duration>,
    /// Run the peer under a valgrind tool, counting over the measured traffic.
    pub under: Option<valgrind::Tool>,
    /// Count the peer with `perf stat` ([`PERF_EVENTS`]) over the measured
    /// traffic.
    pub perf: bool,
}

impl Trial {
    /// Measured packets sent.
    pub fn count(&self) -> u32 {
        (f64::from(self.rate) * self.time.as_secs_f64()).round() as u32
    }
}

/// What one destination's receiver saw.
pub struct Delivered {
    /// Measured datagrams that arrived.
    pub received: u64,
    /// A sequence number seen again.
    pub duplicates: u64,
    /// Datagrams of the wrong length, or with a sequence number never sent.
    pub malformed: u64,
    /// One-way latencies in ns, sorted.
    pub latencies: Vec<u64>,
    /// The kernel's drop counter for the receiving socket.
    pub kernel_drops: Option<u64>,
}

/// What the relay process showed.
pub struct RelayMeasures {
    /// ns on a CPU over the measured traffic and its settling, every thread.
    pub cpu_ns: Option<u64>,
    /// Peak resident memory at the end of the run.
    pub peak_rss_kib: Option<u64>,
    /// The kernel's drop counter for the relay's listening socket.
    pub listen_drops: Option<u64>,
    /// Its final JSON stats, when it prints them.
    pub counters: Option<Result<FinalLine, String>>,
    /// strace's counts, when asked for.
    pub syscalls: Option<Result<SyscallCounts, String>>,
    /// With no traffic, when asked for.
    pub idle: Option<IdleMeasures>,
    /// utime and stime clock ticks over the measured traffic.
    pub user_system_ticks: Option<(u64, u64)>,
    /// Times a thread went to sleep over the measured traffic: its wake-ups.
    pub sleeps: Option<u64>,
    /// `perf stat`'s counts, when asked for.
    pub perf: Option<Result<PerfCounts, String>>,
    /// What valgrind counted, when the peer ran under it.
    pub counted: Option<Result<Counted, String>>,
    /// How it ended: `None` when it had to be killed.
    pub ended: Ended,
}

/// The relay with no traffic.
pub struct IdleMeasures {
    /// How long.
    pub time: Duration,
    /// ns on a CPU, every thread.
    pub cpu_ns: Option<u64>,
    /// utime + stime clock ticks.
    pub ticks: Option<u64>,
    /// Times a thread went to sleep: each is a wake-up before it.
    pub sleeps: Option<u64>,
}

/// What one run measured.
pub struct Outcome {
    /// What ran.
    pub trial: Trial,
    /// Measured packets sent.
    pub sent: u64,
    /// From the first measured send to the last.
    pub send_time: Duration,
    /// Sends that failed.
    pub send_errors: u64,
    /// One per destination.
    pub delivered: Vec<Delivered>,
    /// `None` for direct.
    pub relay: Option<RelayMeasures>,
}

impl Outcome {
    /// Packets per second actually sent.
    pub fn sent_rate(&self) -> f64 {
        self.sent as f64 / self.send_time.as_secs_f64().max(1e-9)
    }

    /// Every destination's latencies pooled, sorted.
    pub fn pooled_latencies(&self) -> Vec<u64> {
        let mut all: Vec<u64> = self
            .delivered
            .iter()
            .flat_map(|d| d.latencies.iter().copied())
            .collect();
        all.sort_unstable();
        all
    }

    /// Measured datagrams that never arrived, over every destination.
    pub fn lost(&self) -> u64 {
        self.delivered
            .iter()
            .map(|d| self.sent.saturating_sub(d.received))
            .sum()
    }

    /// The relay's CPU ns per measured packet sent to it.
    pub fn cpu_ns_per_packet(&self) -> Option<f64> {
        let ns = self.relay.as_ref()?.cpu_ns?;
        Some(ns as f64 / self.sent.max(1) as f64)
    }
}

/// Runs `trial`; `Err` says why it could not be measured.
pub fn run(trial: Trial, epoch: Instant) -> Result<Outcome, String> {
    let count = trial.count();
    let receivers = Receivers::spawn(
        &trial.peer.arriving(trial.dests),
        trial.wake,
        count as usize,
        epoch,
    )
    .map_err(|e| format!("bind the receivers: {e}"))?;
    let listen = free_port().map_err(|e| format!("find a free port: {e}"))?;
    let relay = match trial.peer.command(listen, receivers.addrs()) {
        Some(cmd) => {
            let cmd = match &trial.under {
                Some(tool) => tool.wrap(&cmd),
                None => cmd,
            };
            let program = format!("{:?}", cmd.get_program());
            Some(Spawned::start(cmd).map_err(|e| format!("start {program}: {e}"))?)
        }
        None => None,
    };
    let target = if relay.is_some() {
        listen
    } else {
        receivers.addrs()[0]
    };
    let mut sender = Sender::connect(target).map_err(|e| format!("bind the sender: {e}"))?;
    let warm_up = if trial.under.is_some() {
        sender.warm_up_within(&receivers, VALGRIND_WARM_UP)
    } else {
        sender.warm_up(&receivers)
    };
    if let Err(e) = warm_up {
        let log = relay.map(|r| r.stop().stderr).unwrap_or_default();
        receivers.finish();
        return Err(format!("{e}; the relay's stderr:\n{log}"));
    }
    let pid = relay.as_ref().map(Spawned::pid);
    let strace = match pid {
        Some(pid) if trial.strace => Some(Strace::attach(pid)),
        _ => None,
    };
    let perf = match pid {
        Some(pid) if trial.perf => Some(PerfStat::attach(pid, &PERF_EVENTS)),
        _ => None,
    };
    let mark = match (pid, &trial.under) {
        (Some(pid), Some(tool)) => {
            // Slowed down, it may still be handling the warm-up: counting
            // starts once it is idle.
            quiesce(pid);
            Some(tool.begin(pid))
        }
        _ => None,
    };
    let before = pid.and_then(procfs::cpu_ns);
    let (ticks_before, sleeps_before) = (
        pid.and_then(procfs::user_system_ticks),
        pid.and_then(procfs::sleeps),
    );
    let sent = sender.send_paced(count, trial.rate, epoch);
    receivers.settle(u64::from(count) * trial.dests as u64);
    let after = pid.and_then(procfs::cpu_ns);
    let (ticks_after, sleeps_after) = (
        pid.and_then(procfs::user_system_ticks),
        pid.and_then(procfs::sleeps),
    );
    let mark = match (pid, &trial.under, mark) {
        (Some(pid), Some(tool), Some(Ok(mut m))) => Some(tool.end(pid, &mut m).map(|()| m)),
        (_, _, m) => m,
    };
    let syscalls = strace.map(|s| s.and_then(Strace::detach));
    let perf = perf.map(|p| p.and_then(PerfStat::detach));

    let kernel_drops: Vec<Option<u64>> = receivers
        .addrs()
        .iter()
        .map(|a| procfs::udp_drops(a.port()))
        .collect();
    let relay = relay.map(|relay| {
        let pid = relay.pid();
        let listen_drops = procfs::udp_drops(listen.port());
        let idle = trial.idle.map(|time| measure_idle(pid, time));
        let peak_rss_kib = procfs::peak_rss_kib(pid);
        let ended = relay.stop();
        let counters = trial
            .peer
            .has_json()
            .then(|| FinalLine::find(&ended.stdout));
        let counted = trial.under.as_ref().zip(mark).map(|(tool, mark)| {
            let counted = mark.and_then(|m| tool.read(&m));
            tool.clean();
            counted
        });
        let d = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        RelayMeasures {
            cpu_ns: d(before, after),
            user_system_ticks: ticks_before
                .zip(ticks_after)
                .map(|((u0, s0), (u1, s1))| (u1.saturating_sub(u0), s1.saturating_sub(s0))),
            sleeps: d(sleeps_before, sleeps_after),
            perf,
            counted,
            peak_rss_kib,
            listen_drops,
            counters,
            syscalls,
            idle,
            ended,
        }
    });
    let delivered = receivers
        .finish()
        .into_iter()
        .zip(kernel_drops)
        .map(|(arrivals, kernel_drops)| Delivered {
            received: arrivals.received,
            duplicates: arrivals.duplicates,
            malformed: arrivals.malformed,
            latencies: arrivals.latencies(&sent.at),
            kernel_drops,
        })
        .collect();
    Ok(Outcome {
        trial,
        sent: u64::from(count),
        send_time: sent.time,
        send_errors: sent.errors,
        delivered,
        relay,
    })
}

/// Waits until `pid` uses (almost) no CPU for a while, at most
/// [`VALGRIND_WARM_UP`].
fn quiesce(pid: u32) {
    const QUIET: Duration = Duration::from_millis(300);
    const BUSY_NS: u64 = 1_000_000;
    let deadline = Instant::now() + VALGRIND_WARM_UP;
    let mut last = procfs::cpu_ns(pid);
    while Instant::now() < deadline {
        std::thread::sleep(QUIET);
        let now = procfs::cpu_ns(pid);
        if let (Some(a), Some(b)) = (last, now) {
            if b.saturating_sub(a) < BUSY_NS {
                return;
            }
        }
        last = now;
    }
}

fn measure_idle(pid: u32, time: Duration) -> IdleMeasures {
    let (ns, ticks, sleeps) = (
        procfs::cpu_ns(pid),
        procfs::cpu_ticks(pid),
        procfs::sleeps(pid),
    );
    std::thread::sleep(time);
    let d = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
    IdleMeasures {
        time,
        cpu_ns: d(ns, procfs::cpu_ns(pid)),
        ticks: d(ticks, procfs::cpu_ticks(pid)),
        sleeps: d(sleeps, procfs::sleeps(pid)),
    }
}
