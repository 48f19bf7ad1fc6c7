//! End-to-end benchmark of the real `forza-relay` binary on loopback, beside its
//! peers in the same run: sending direct (no relay), socat, a naive Python relay,
//! samplicator (the C relay) and the relay of an older commit.
//!
//! ```sh
//! FORZA_RELAY_BASELINE=/tmp/baseline/target/release/forza-relay \
//! FORZA_RELAY_SAMPLICATOR=/tmp/samplicator/samplicate cargo bench --bench relay
//! ```
//!
//! A plain `fn main` (no criterion): it drives separate processes and measures
//! what their users see. forza-relay is the binary cargo builds for benches
//! (optimized, LTO), started with `--stats-format json --stats-interval 0`; its
//! final counters are the JSON line it prints on Ctrl-C. The sender and the
//! receivers are threads of this process (see `traffic`).
//!
//! 1. System calls per packet at 360 packets/s (`strace -c -f -p PID`).
//! 2. Latency and CPU per packet at 360 packets/s, 1 and 4 destinations, every
//!    peer side by side, 3 interleaved rounds, medians; then again with the
//!    bench and every relay pinned to one CPU (a child of this bench run
//!    under `taskset`), where no wake-up crosses CPUs.
//! 3. Delivered packets/s at 150,000 in to 1 destination and 50,000 and
//!    150,000 in to 4, against the baseline relay, with each loss located.
//! 4. CPU and wake-ups with no traffic, peak memory.
//! 5. Freshness after a stall (issue 15): the relay stopped with SIGSTOP for
//!    2 s at 360 packets/s, then resumed; what each destination gets after
//!    the resume, with and without `max-age` (see `freshness`).
//! 6. The work per packet (issue 26), only when asked for (`work`, or
//!    `work-counts` for the counts alone): instructions, calls and cache
//!    lines per packet under valgrind, beside samplicator, the C relay and
//!    floor.c, then CPU per packet pinned (see `work`).
//! 7. A `json` destination beside a `same` one (issue 25): CPU per packet and
//!    p50 against `same` alone, in the same rounds (see `json`).
//!
//! `cargo bench --bench relay -- latency` (or `syscalls`, `throughput`,
//! `freshness`, `json`, `work`) runs one section. Aims are printed as PASS/MISS beside the figures; nothing here
//! asserts.
//! The `/proc` figures are Linux only; elsewhere they print "n/a".

mod freshness;
mod json;
mod peers;
mod process;
mod report;
mod traffic;
mod trial;
mod valgrind;
mod work;

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use peers::{Peer, BASELINE_ENV, MIX, SAMPLICATOR_ENV};
use process::procfs;
use report::{num, opt, pass, percentile_us, print_anomalies, Dests, Rounds};
use traffic::{Wake, INPUT, POLL_PERIOD};
use trial::{Outcome, Trial};

/// FH6's own Data Out rate.
const GAME_RATE: u32 = 360;
/// 1,080 packets at the game's rate.
const GAME_TIME: Duration = Duration::from_secs(3);
const ROUNDS: usize = 3;
const IDLE_TIME: Duration = Duration::from_secs(5);
/// Throughput runs: destinations, input packets/s. The last is past the aim
/// (50,000/s to 4), to find where the relays part.
const LOADS: [(usize, u32); 3] = [(1, 150_000), (4, 50_000), (4, 150_000)];
const LOAD_TIME: Duration = Duration::from_secs(2);

/// System calls per packet at the game's rate (issue 16): the receive, which
/// is the wait, and one send per destination.
const AIM_SYSCALLS: [(usize, f64); 2] = [(1, 2.0), (4, 5.0)];
/// forza-relay's CPU per packet against each peer's in the same run.
const AIM_CPU_RATIO: f64 = 1.1;
/// …and against samplicator's, the C relay (issue 16).
const AIM_CPU_RATIO_C: f64 = 0.9;
/// forza-relay's p50 ratio to direct against the best peer's.
const AIM_P50_RATIO: f64 = 1.15;
const AIM_PEAK_RSS_KIB: u64 = 8 * 1024;
/// Issue 26: under overload (50,000/s to 4 destinations), forza-relay
/// delivers at least this many times what samplicator does in the same run.
const AIM_OVERLOAD_VS_SAMPLICATOR: f64 = 1.3;

/// The flag that runs the latency section alone, as a child started under
/// `taskset -c PIN_CPU` by [`latency_pinned`].
const PINNED_CHILD: &str = "--pinned-child";
/// The CPU the pinned run uses.
const PIN_CPU: usize = 0;

/// What this machine has: which peers can run.
struct Tools {
    strace: bool,
    socat: bool,
    python: bool,
    baseline: Option<PathBuf>,
    samplicator: Option<PathBuf>,
    c_relay: Option<PathBuf>,
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this binary
    // without it, where a minutes-long load test of a debug build has no place.
    if !std::env::args().any(|a| a == "--bench") {
        println!("relay bench: skipped outside `cargo bench --bench relay`");
        return;
    }
    let started = Instant::now();
    let epoch = Instant::now();
    let pinned = std::env::args().any(|a| a == PINNED_CHILD);
    let tools = Tools {
        strace: peers::installed("strace", "-V"),
        socat: peers::installed("socat", "-V"),
        python: peers::installed("python3", "--version"),
        baseline: std::env::var_os(BASELINE_ENV)
            .map(PathBuf::from)
            .filter(|p| p.is_file()),
        samplicator: std::env::var_os(SAMPLICATOR_ENV)
            .map(PathBuf::from)
            .filter(|p| p.is_file()),
        c_relay: peers::build_c_relay(),
    };
    if std::env::args().any(|a| a == work::WORK_CHILD) {
        // Started by `run_pinned`: section 6 alone.
        let counts_only = std::env::args().any(|a| a == work::COUNTS_ONLY);
        work::section(tools.samplicator, tools.c_relay, counts_only);
        return;
    }
    if pinned {
        // Started by `latency_pinned`: the latency section alone, then its aims.
        let (runs, _) = latency_section(&tools, epoch, Some(PIN_CPU));
        println!(
            "
   Aims, with every thread on CPU {PIN_CPU}:"
        );
        latency_aims(&runs);
        return;
    }
    println!("forza-relay end-to-end benchmark (loopback)");
    println!("binary: {}", env!("CARGO_BIN_EXE_forza-relay"));
    match &tools.samplicator {
        Some(p) => println!("samplicator ({SAMPLICATOR_ENV}): {}", p.display()),
        None => println!(
            "samplicator: {SAMPLICATOR_ENV} not set to a file; its rows are skipped \
             (docs/performance.md says how to build it)"
        ),
    }
    match &tools.baseline {
        Some(p) => println!("baseline ({BASELINE_ENV}): {}", p.display()),
        None => println!(
            "baseline: {BASELINE_ENV} not set to a file; its rows are skipped (README, \
             Performance, says how to build it)"
        ),
    }
    println!(
        "input: {INPUT} packets, {} bytes; 4 destinations of forza-relay get: {} (socat and \
         the Python relay forward the bytes as they came)",
        INPUT.len(),
        MIX.map(|m| m.0).join(", ")
    );
    println!(
        "machine: {} CPUs, load average {}; sender, receivers and relay share them",
        thread::available_parallelism().map_or(0, |n| n.get()),
        opt(procfs::loadavg())
    );
    for (tool, ok) in [
        ("strace", tools.strace),
        ("socat", tools.socat),
        ("python3", tools.python),
    ] {
        if !ok {
            println!("note: {tool} not installed; its rows are skipped");
        }
    }

    // `cargo bench --bench relay -- latency` runs that section alone.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |section: &str| only.is_empty() || only.iter().any(|o| o == section);
    let syscalls = wanted("syscalls").then(|| syscall_section(&tools, epoch));
    let latency = wanted("latency").then(|| {
        let figures = latency_section(&tools, epoch, None);
        latency_pinned();
        figures
    });
    let loads = wanted("throughput").then(|| throughput_section(&tools, epoch));
    if wanted("freshness") {
        freshness::section(tools.socat, tools.python, epoch);
    }
    if wanted("json") {
        json::section(epoch);
    }
    // Minutes under valgrind: only when asked for by name.
    if only.iter().any(|o| o == "work") {
        run_pinned(&[work::WORK_CHILD], "6. (work per packet");
    } else if only.iter().any(|o| o == "work-counts") {
        run_pinned(
            &[work::WORK_CHILD, work::COUNTS_ONLY],
            "6. (work per packet",
        );
    }
    // Section 6 prints its own aims.
    if only.is_empty() || !only.iter().all(|o| o.starts_with("work")) {
        summary(syscalls.as_ref(), latency.as_ref(), loads.as_ref());
    }
    println!(
        "\nfinished in {:.0} s; load average now {}",
        started.elapsed().as_secs_f64(),
        opt(procfs::loadavg())
    );
}

/// Runs `trial`, printing why when it could not be measured.
fn attempt(trial: Trial, epoch: Instant) -> Option<Outcome> {
    let what = format!("{}, {}", trial.peer.label(), Dests(trial.dests));
    match trial::run(trial, epoch) {
        Ok(o) => Some(o),
        Err(e) => {
            println!("    ! {what}: not measured: {e}");
            None
        }
    }
}

/// The peers of a latency group of `dests` destinations this machine can run.
fn peers_for(dests: usize, tools: &Tools) -> Vec<Peer> {
    let mut peers = vec![Peer::Direct, Peer::Forza];
    if dests > 1 {
        peers.push(Peer::ForzaAllSame);
    }
    if tools.socat && Peer::Socat.serves(dests) {
        peers.push(Peer::Socat);
    }
    if tools.python {
        peers.push(Peer::Python);
    }
    if let Some(path) = &tools.samplicator {
        peers.push(Peer::Samplicator(path.clone()));
    }
    if let Some(path) = &tools.c_relay {
        peers.push(Peer::CRelay(path.clone()));
    }
    peers
}

/// Calls per packet meet the aim as printed, to 2 decimals.
fn within_syscall_aim(per_packet: f64, aim: f64) -> bool {
    per_packet < aim + 0.005
}

/// forza-relay's calls per packet by destination count, for the summary.
type SyscallFigures = Vec<(usize, Option<f64>)>;

fn syscall_section(tools: &Tools, epoch: Instant) -> SyscallFigures {
    println!(
        "\n1. System calls per packet: `strace -c -f -p PID` on the relay over {} packets at \
         {GAME_RATE}/s (receivers blocked in recv), total calls of every thread / packets sent",
        (f64::from(GAME_RATE) * GAME_TIME.as_secs_f64()) as u32
    );
    let mut figures = Vec::new();
    if !tools.strace {
        println!("   strace not installed: not measured");
        return figures;
    }
    let mut runs: Vec<(Peer, usize)> = vec![(Peer::Forza, 1), (Peer::Forza, 4)];
    if let Some(b) = &tools.baseline {
        runs.extend([
            (Peer::Baseline(b.clone()), 1),
            (Peer::Baseline(b.clone()), 4),
        ]);
    }
    if tools.python {
        runs.extend([(Peer::Python, 1), (Peer::Python, 4)]);
    }
    if tools.socat {
        runs.push((Peer::Socat, 1));
    }
    if let Some(path) = &tools.samplicator {
        let c = Peer::Samplicator(path.clone());
        runs.extend([(c.clone(), 1), (c, 4)]);
    }
    if let Some(path) = &tools.c_relay {
        let c = Peer::CRelay(path.clone());
        runs.extend([(c.clone(), 1), (c, 4)]);
    }
    println!(
        "   {:<22} {:>6} {:>7} {:>9} {:>7} {:>9} {:<9}  by call, per packet",
        "relay", "dests", "packets", "delivered", "calls", "calls/pkt", "aim"
    );
    for (peer, dests) in runs {
        let trial = Trial {
            peer: peer.clone(),
            dests,
            rate: GAME_RATE,
            time: GAME_TIME,
            wake: Wake::Blocking,
            strace: true,
            idle: None,
            under: None,
            perf: false,
        };
        let Some(o) = attempt(trial, epoch) else {
            continue;
        };
        let delivered = o.delivered.iter().map(|d| d.received).min().unwrap_or(0);
        let counts = o
            .relay
            .as_ref()
            .and_then(|r| r.syscalls.as_ref())
            .and_then(|s| s.as_ref().ok());
        let per = counts.map(|c| c.total as f64 / o.sent.max(1) as f64);
        let aim = match peer {
            Peer::Forza => AIM_SYSCALLS.iter().find(|a| a.0 == dests).map(|a| a.1),
            _ => None,
        };
        let aim_text = match (aim, per) {
            (Some(a), Some(p)) => format!("{} ≤{a:.0}", pass(within_syscall_aim(p, a))),
            _ => String::new(),
        };
        let by_call = counts.map_or_else(String::new, |c| {
            let mut parts: Vec<String> = c
                .by_name
                .iter()
                .take(5)
                .map(|(name, n)| format!("{name} {:.2}", *n as f64 / o.sent.max(1) as f64))
                .collect();
            if c.errors > 0 {
                parts.push(format!("({} returned an error)", c.errors));
            }
            parts.join(", ")
        });
        println!(
            "   {:<22} {:>6} {:>7} {:>9} {:>7} {:>9} {:<9}  {by_call}",
            peer.label(),
            dests,
            o.sent,
            delivered,
            opt(counts.map(|c| c.total)),
            num(per, 2),
            aim_text
        );
        print_anomalies(&o);
        if peer == Peer::Forza {
            figures.push((dests, per));
        }
    }
    figures
}

/// Every latency run: (destinations, round, outcome).
type LatencyRuns = Vec<(usize, usize, Outcome)>;

/// The latency section; `pinned` when every thread of this process and of the
/// relays runs on that one CPU.
fn latency_section(
    tools: &Tools,
    epoch: Instant,
    pinned: Option<usize>,
) -> (LatencyRuns, Option<trial::IdleMeasures>) {
    match pinned {
        None => println!(
            "\n2. Latency and CPU at {GAME_RATE} packets/s, {} s per run, {ROUNDS} interleaved \
             rounds (the order rotates each round), medians with (min–max) over rounds",
            GAME_TIME.as_secs()
        ),
        Some(cpu) => println!(
            "\n2b. The same with the bench and every relay pinned to CPU {cpu} (`taskset -c \
             {cpu}`): no wake-up crosses CPUs, so this is the relays' own work"
        ),
    }
    println!(
        "   receivers: a thread per socket blocked in recv; latency = arrival − send, one \
         Instant; ratios are to direct in the same round; CPU = the relay's \
         /proc/PID/task/*/schedstat on-CPU ns over the traffic / packets sent"
    );
    let mut runs: LatencyRuns = Vec::new();
    let mut idle = None;
    for round in 0..ROUNDS {
        for dests in [1, 4] {
            let mut peers = peers_for(dests, tools);
            let n = peers.len();
            peers.rotate_left(round % n);
            for peer in peers {
                // The idle measure follows one 4-destination forza-relay run.
                let measure_idle =
                    pinned.is_none() && round == 0 && dests == 4 && peer == Peer::Forza;
                let trial = Trial {
                    dests: if peer.serves(dests) { dests } else { 1 },
                    peer,
                    rate: GAME_RATE,
                    time: GAME_TIME,
                    wake: Wake::Blocking,
                    strace: false,
                    idle: measure_idle.then_some(IDLE_TIME),
                    under: None,
                    perf: false,
                };
                let Some(mut o) = attempt(trial, epoch) else {
                    continue;
                };
                print_anomalies(&o);
                if let Some(r) = o.relay.as_mut() {
                    if r.idle.is_some() {
                        idle = r.idle.take();
                    }
                }
                runs.push((dests, round, o));
            }
        }
    }
    for dests in [1, 4] {
        print_latency_table(&runs, dests, tools);
    }
    (runs, idle)
}

/// Runs the latency section again in a child of this bench started under
/// `taskset -c PIN_CPU`, so the bench's threads and every relay share one CPU.
/// On this 2-CPU VM a wake-up that crosses CPUs costs 10–20 µs, and where the
/// scheduler puts each thread differs between runs and between peers.
fn latency_pinned() {
    run_pinned(&[PINNED_CHILD], "2b. (pinned to one CPU");
}

/// Runs this bench again with `flags` in a child under `taskset -c PIN_CPU`;
/// `what` starts the line that says why it could not.
fn run_pinned(flags: &[&str], what: &str) {
    if !peers::installed("taskset", "-V") {
        println!("\n{what}: taskset not installed, skipped)");
        return;
    }
    let Ok(me) = std::env::current_exe() else {
        println!("\n{what}: skipped, this bench's path is unknown)");
        return;
    };
    let status = std::process::Command::new("taskset")
        .args(["-c", &PIN_CPU.to_string()])
        .arg(me)
        .arg("--bench")
        .args(flags)
        .status();
    if !status.as_ref().is_ok_and(|s| s.success()) {
        println!("\n{what}: the run failed: {status:?})");
    }
}

/// One group's figures for one peer, over the rounds.
struct PeerFigures {
    p50_us: Rounds,
    p99_us: Rounds,
    p50_ratio: Rounds,
    p99_ratio: Rounds,
    slowest_p50_ratio: Rounds,
    cpu_us: Rounds,
    peak_rss_kib: Option<u64>,
    lost: u64,
    expected: u64,
}

fn peer_figures(runs: &LatencyRuns, dests: usize, label: &str) -> PeerFigures {
    let direct = |round: usize| {
        runs.iter()
            .find(|(d, r, o)| *d == dests && *r == round && o.trial.peer == Peer::Direct)
            .and_then(|(_, _, o)| {
                let all = o.pooled_latencies();
                percentile_us(&all, 50.0).zip(percentile_us(&all, 99.0))
            })
    };
    let mine: Vec<&(usize, usize, Outcome)> = runs
        .iter()
        .filter(|(d, _, o)| *d == dests && o.trial.peer.label() == label)
        .collect();
    let each = |f: &dyn Fn(usize, &Outcome) -> Option<f64>| {
        Rounds::of(mine.iter().map(|(_, round, o)| f(*round, o)))
    };
    let pct = |o: &Outcome, p| percentile_us(&o.pooled_latencies(), p);
    PeerFigures {
        p50_us: each(&|_, o| pct(o, 50.0)),
        p99_us: each(&|_, o| pct(o, 99.0)),
        p50_ratio: each(&|r, o| Some(pct(o, 50.0)? / direct(r)?.0)),
        p99_ratio: each(&|r, o| Some(pct(o, 99.0)? / direct(r)?.1)),
        slowest_p50_ratio: each(&|r, o| {
            let slowest = o
                .delivered
                .iter()
                .filter_map(|d| percentile_us(&d.latencies, 50.0))
                .reduce(f64::max)?;
            Some(slowest / direct(r)?.0)
        }),
        cpu_us: each(&|_, o| o.cpu_ns_per_packet().map(|ns| ns / 1e3)),
        peak_rss_kib: mine
            .iter()
            .filter_map(|(_, _, o)| o.relay.as_ref()?.peak_rss_kib)
            .max(),
        lost: mine.iter().map(|(_, _, o)| o.lost()).sum(),
        expected: mine
            .iter()
            .map(|(_, _, o)| o.sent * o.delivered.len() as u64)
            .sum(),
    }
}

fn print_latency_table(runs: &LatencyRuns, dests: usize, tools: &Tools) {
    println!(
        "\n   {} at {GAME_RATE}/s{}",
        Dests(dests),
        if dests > 1 {
            " (direct: one receiver; p50/p99 over every datagram delivered, \"slowest\" = the \
             destination with the highest p50)"
        } else {
            ""
        }
    );
    println!(
        "   {:<22} {:>7} {:>8} {:>20} {:>22} {:>20} {:>21} {:>9} {:>11}",
        "peer",
        "p50 µs",
        "p99 µs",
        "p50 ×direct",
        "p99 ×direct",
        "slowest p50 ×dir",
        "CPU µs/packet",
        "VmHWM",
        "lost"
    );
    let mut labels: Vec<&'static str> = Vec::new();
    for (d, _, o) in runs {
        if *d == dests && !labels.contains(&o.trial.peer.label()) {
            labels.push(o.trial.peer.label());
        }
    }
    for label in labels {
        let f = peer_figures(runs, dests, label);
        println!(
            "   {:<22} {:>7} {:>8} {:>20} {:>22} {:>20} {:>21} {:>9} {:>11}",
            label,
            num(f.p50_us.median(), 1),
            num(f.p99_us.median(), 1),
            f.p50_ratio.show(2),
            f.p99_ratio.show(2),
            f.slowest_p50_ratio.show(2),
            f.cpu_us.show(2),
            f.peak_rss_kib.map_or_else(
                || "-".to_owned(),
                |k| format!("{:.1} MiB", k as f64 / 1024.0)
            ),
            format!("{}/{}", f.lost, f.expected),
        );
    }
    if dests > 1 && tools.socat {
        println!(
            "   {:<22} n/a: socat forwards to one address (a fan-out needs one socat per \
             destination, each with its own input port, which is not the same job)",
            "socat"
        );
    }
}

/// Every throughput run: (destinations, rate, round, outcome).
type LoadRuns = Vec<(usize, u32, usize, Outcome)>;

fn throughput_section(tools: &Tools, epoch: Instant) -> LoadRuns {
    println!(
        "\n3. Throughput: {} s per run, {ROUNDS} interleaved rounds; the sender bursts every \
         500 µs; receivers drain their socket every {} ms (nobody is woken per datagram, so \
         this measures the relay)",
        LOAD_TIME.as_secs(),
        POLL_PERIOD.as_millis()
    );
    println!(
        "   delivered/s = measured datagrams that arrived / send time; lost at: the relay's \
         listening socket (kernel drops, /proc/net/udp; each is lost for every destination) \
         / inside the relay (its JSON counters; n/a for the baseline, which has none) / the \
         receivers' sockets (kernel drops)"
    );
    let mut runs: LoadRuns = Vec::new();
    for round in 0..ROUNDS {
        for (dests, rate) in LOADS {
            let mut peers = vec![Peer::Forza];
            if dests == 1 {
                peers.insert(0, Peer::Direct);
            }
            if let Some(b) = &tools.baseline {
                peers.push(Peer::Baseline(b.clone()));
            }
            if let Some(s) = &tools.samplicator {
                peers.push(Peer::Samplicator(s.clone()));
            }
            let n = peers.len();
            peers.rotate_left(round % n);
            for peer in peers {
                let trial = Trial {
                    peer,
                    dests,
                    rate,
                    time: LOAD_TIME,
                    wake: Wake::Polling,
                    strace: false,
                    idle: None,
                    under: None,
                    perf: false,
                };
                if let Some(o) = attempt(trial, epoch) {
                    runs.push((dests, rate, round, o));
                }
            }
        }
    }
    for (dests, rate) in LOADS {
        println!("\n   {} at {rate} packets/s in", Dests(dests));
        println!(
            "   {:<22} {:>5} {:>8}  {:<36} {:>8} {:>8}  {:<26} {:>10}",
            "peer",
            "round",
            "sent/s",
            "delivered/s, each destination",
            "min",
            "min %",
            "lost at: socket/relay/dests",
            "CPU µs/pkt"
        );
        let mut group: Vec<&(usize, u32, usize, Outcome)> = runs
            .iter()
            .filter(|(d, r, _, _)| *d == dests && *r == rate)
            .collect();
        group.sort_by_key(|(_, _, round, o)| (o.trial.peer.label(), *round));
        for (_, _, round, o) in group {
            print_load_row(*round, o);
        }
    }
    runs
}

/// The share of measured packets that arrived at the worst destination.
fn worst_delivered_share(o: &Outcome) -> Option<f64> {
    let least = o.delivered.iter().map(|d| d.received).min()?;
    Some(least as f64 / o.sent.max(1) as f64)
}

/// Delivered packets/s at each destination.
fn delivered_rates(o: &Outcome) -> Vec<f64> {
    let secs = o.send_time.as_secs_f64().max(1e-9);
    o.delivered
        .iter()
        .map(|d| d.received as f64 / secs)
        .collect()
}

fn print_load_row(round: usize, o: &Outcome) {
    let rates = delivered_rates(o);
    let min = rates.iter().copied().reduce(f64::min);
    let each: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    let dest_drops: Option<u64> = o.delivered.iter().map(|d| d.kernel_drops).sum();
    let (at_socket, in_relay) = match &o.relay {
        None => ("-".to_owned(), "-".to_owned()),
        Some(r) => {
            let inside = match &r.counters {
                Some(Ok(c)) => Some(c.destinations.iter().map(|d| d.dropped()).sum::<u64>()),
                _ => None,
            };
            (opt(r.listen_drops), opt(inside))
        }
    };
    println!(
        "   {:<22} {:>5} {:>8}  {:<36} {:>8} {:>8}  {:<26} {:>10}",
        o.trial.peer.label(),
        round + 1,
        format!("{:.0}", o.sent_rate()),
        each.join(" "),
        num(min, 0),
        num(worst_delivered_share(o).map(|s| 100.0 * s), 3),
        format!("{at_socket} / {in_relay} / {}", opt(dest_drops)),
        num(o.cpu_ns_per_packet().map(|ns| ns / 1e3), 2)
    );
    print_anomalies(o);
}

fn summary(
    syscalls: Option<&SyscallFigures>,
    latency: Option<&(LatencyRuns, Option<trial::IdleMeasures>)>,
    loads: Option<&LoadRuns>,
) {
    let idle = latency.and_then(|l| l.1.as_ref());
    let forza_runs = latency
        .into_iter()
        .flat_map(|l| l.0.iter().map(|(_, _, o)| o))
        .chain(loads.into_iter().flatten().map(|(_, _, _, o)| o))
        .filter(|o| o.trial.peer == Peer::Forza);
    let peak = forza_runs
        .filter_map(|o| Some((o.relay.as_ref()?.peak_rss_kib?, o)))
        .max_by_key(|(kib, _)| *kib);
    println!("\n4. Idle and memory");
    match idle {
        Some(i) => println!(
            "   no traffic for {} s after a 4-destination run: {} ns on a CPU, {} clock ticks, \
             {} wake-ups (every thread of the relay)",
            i.time.as_secs(),
            opt(i.cpu_ns),
            opt(i.ticks),
            opt(i.sleeps)
        ),
        None => println!("   idle: not measured (it follows a run of the latency section)"),
    }
    if let Some((kib, o)) = peak {
        println!(
            "   peak memory (VmHWM) over every forza-relay run: {kib} KiB ({:.2} MiB), {} at \
             {}/s",
            kib as f64 / 1024.0,
            Dests(o.trial.dests),
            o.trial.rate
        );
    }

    println!(
        "\nAims (figures are noisy on a shared 2-core machine; load average {})",
        opt(procfs::loadavg())
    );
    if let Some(figures) = syscalls {
        syscall_aims(figures);
    }
    if let Some((runs, _)) = latency {
        latency_aims(runs);
    }
    if let Some(runs) = loads {
        load_aims(runs);
    }
    if let Some(i) = idle {
        println!(
            "   {} 0 CPU while idle: {} ns, {} wake-ups in {} s",
            pass(i.cpu_ns == Some(0) && i.sleeps == Some(0)),
            opt(i.cpu_ns),
            opt(i.sleeps),
            i.time.as_secs()
        );
    }
    if let Some((kib, _)) = peak {
        println!(
            "   {} peak memory < {} MiB: {:.2} MiB",
            pass(kib < AIM_PEAK_RSS_KIB),
            AIM_PEAK_RSS_KIB / 1024,
            kib as f64 / 1024.0
        );
    }
}

fn syscall_aims(figures: &SyscallFigures) {
    for (dests, aim) in AIM_SYSCALLS {
        let got = figures.iter().find(|s| s.0 == dests).and_then(|s| s.1);
        println!(
            "   {} system calls per packet ≤ {aim:.0} at {GAME_RATE}/s, {}: {}",
            pass(got.is_some_and(|g| within_syscall_aim(g, aim))),
            Dests(dests),
            num(got, 2)
        );
    }
}

fn latency_aims(runs: &LatencyRuns) {
    for dests in [1, 4] {
        let ours = peer_figures(runs, dests, Peer::Forza.label());
        let others: Vec<(&str, PeerFigures)> = [
            Peer::Socat,
            Peer::Python,
            Peer::Samplicator(PathBuf::new()),
            Peer::CRelay(PathBuf::new()),
        ]
        .iter()
        .filter(|p| p.serves(dests))
        .map(|p| (p.label(), peer_figures(runs, dests, p.label())))
        .filter(|(_, f)| f.cpu_us.median().is_some())
        .collect();
        if others.is_empty() {
            println!(
                "   MISS CPU and p50 against the peers, {}: no peer measured",
                Dests(dests)
            );
            continue;
        }
        for (name, theirs) in &others {
            let (a, b) = (ours.cpu_us.median(), theirs.cpu_us.median());
            let ratio = a.zip(b).map(|(a, b)| a / b);
            let c_relays = [
                Peer::Samplicator(PathBuf::new()).label(),
                Peer::CRelay(PathBuf::new()).label(),
            ];
            let aim = if c_relays.contains(name) {
                AIM_CPU_RATIO_C
            } else {
                AIM_CPU_RATIO
            };
            println!(
                "   {} CPU per packet ≤ {aim}× {name}'s, {}: {} µs vs {} µs = {}×",
                pass(ratio.is_some_and(|r| r <= aim)),
                Dests(dests),
                num(a, 2),
                num(b, 2),
                num(ratio, 2)
            );
        }
        let best = others
            .iter()
            .filter_map(|(name, f)| Some((*name, f.p50_ratio.median()?)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let mine = ours.p50_ratio.median();
        let verdict = mine
            .zip(best)
            .is_some_and(|(m, (_, b))| m <= AIM_P50_RATIO * b);
        println!(
            "   {} p50 ratio to direct ≤ {AIM_P50_RATIO}× the best peer's, {}: {}× vs {} = {}",
            pass(verdict),
            Dests(dests),
            num(mine, 2),
            best.map_or_else(|| "n/a".to_owned(), |(n, b)| format!("{n}'s {b:.2}×")),
            num(mine.zip(best).map(|(m, (_, b))| m / b), 2)
        );
    }
}

fn load_aims(runs: &LoadRuns) {
    for (dests, rate) in LOADS {
        // Both relays get the same packets at the same rate in each run, so the
        // share delivered compares them without the send time's jitter.
        let of = |label: &str, figure: &dyn Fn(&Outcome) -> Option<f64>| {
            Rounds::of(
                runs.iter()
                    .filter(|(d, r, _, o)| {
                        *d == dests && *r == rate && o.trial.peer.label() == label
                    })
                    .map(|(_, _, _, o)| figure(o)),
            )
        };
        let min_rate = |o: &Outcome| delivered_rates(o).into_iter().reduce(f64::min);
        let share = |o: &Outcome| worst_delivered_share(o).map(|s| 100.0 * s);
        let cpu = |o: &Outcome| o.cpu_ns_per_packet().map(|ns| ns / 1e3);
        let (forza, old) = (Peer::Forza.label(), Peer::Baseline(PathBuf::new()).label());
        let (ours, theirs) = (of(forza, &share), of(old, &share));
        let past = if dests == 4 && rate > 50_000 {
            ", past the aim"
        } else {
            ""
        };
        let shown = |label| {
            format!(
                "{} % = {}/s, {} µs CPU/packet",
                of(label, &share).show(3),
                num(of(label, &min_rate).median(), 0),
                num(of(label, &cpu).median(), 2)
            )
        };
        match (ours.median(), theirs.median()) {
            (Some(a), Some(b)) => println!(
                "   {} delivered ≥ the old relay's, {} at {rate}/s{past} (worst destination, \
                 median of rounds): {} vs {}",
                pass(a >= b),
                Dests(dests),
                shown(forza),
                shown(old)
            ),
            _ => println!(
                "   MISS delivered ≥ the old relay's, {} at {rate}/s{past}: {} vs n/a (no \
                 baseline: set {BASELINE_ENV})",
                Dests(dests),
                shown(forza)
            ),
        }
        // Beside samplicator (issue 26): delivered to the worst destination,
        // median of rounds; the aim is at 50,000/s to 4 destinations.
        let samplicator = Peer::Samplicator(PathBuf::new()).label();
        let ratio = of(forza, &min_rate)
            .median()
            .zip(of(samplicator, &min_rate).median())
            .map(|(a, b)| a / b.max(1.0));
        // A samplicator that delivers every packet is not overloaded: the
        // aim, about capacity under overload, can't be judged at that rate.
        let overloaded = of(samplicator, &share).median().is_some_and(|s| s < 99.9);
        if let Some(ratio) = ratio {
            let verdict = if dests == 4 && rate == 50_000 && !overloaded {
                format!(
                    "n/a  delivered ≥ {AIM_OVERLOAD_VS_SAMPLICATOR}× samplicator's under \
                     overload (samplicator delivered every packet: not overloaded here)"
                )
            } else if dests == 4 && rate == 50_000 {
                format!(
                    "{} delivered ≥ {AIM_OVERLOAD_VS_SAMPLICATOR}× samplicator's",
                    pass(ratio >= AIM_OVERLOAD_VS_SAMPLICATOR)
                )
            } else {
                "     delivered against samplicator's (no aim)".to_owned()
            };
            println!(
                "   {verdict}, {} at {rate}/s: {} vs {} = {ratio:.2}×",
                Dests(dests),
                shown(forza),
                shown(samplicator)
            );
        }
    }
}
