//! One measured run: receivers up, the peer started, a warm-up, paced traffic,
//! then every reading taken before the peer is stopped.

use std::time::{Duration, Instant};

use crate::peers::Peer;
use crate::process::{procfs, Ended, FinalLine, Spawned, Strace, SyscallCounts};
use crate::traffic::{free_port, Receivers, Sender, Wake};

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
    if let Err(e) = sender.warm_up(&receivers) {
        let log = relay.map(|r| r.stop().stderr).unwrap_or_default();
        receivers.finish();
        return Err(format!("{e}; the relay's stderr:\n{log}"));
    }
    let pid = relay.as_ref().map(Spawned::pid);
    let strace = match pid {
        Some(pid) if trial.strace => Some(Strace::attach(pid)),
        _ => None,
    };
    let before = pid.and_then(procfs::cpu_ns);
    let sent = sender.send_paced(count, trial.rate, epoch);
    receivers.settle(u64::from(count) * trial.dests as u64);
    let after = pid.and_then(procfs::cpu_ns);
    let syscalls = strace.map(|s| s.and_then(Strace::detach));

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
        RelayMeasures {
            cpu_ns: before.zip(after).map(|(b, a)| a.saturating_sub(b)),
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
