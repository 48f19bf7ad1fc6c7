//! Section 6, the work per packet (issue 26): what each relay does in user
//! space for one packet, as counts that don't depend on the machine's load,
//! beside what the kernel says it cost. Run by `cargo bench --bench relay --
//! work` (or `work-counts`, the counts alone), in a child of the bench under
//! `taskset -c 0`: the relay, the paced sender and the receivers share CPU 0.
//!
//! - Counts, under valgrind (see [`crate::valgrind`]): callgrind's
//!   instructions per packet in user space over the measured traffic only,
//!   by function for forza-relay, with the receive, send and clock calls
//!   per packet and the simulated cache misses (a simulation of this process
//!   alone: what the sender, the receivers and the kernel evict between
//!   packets is not in it); and from lackey's trace the distinct 64-byte
//!   lines of code and of data each wake-up touches, which is what a packet
//!   at the game's rate finds cold.
//! - Native, pinned, [`ROUNDS`] interleaved rounds (or `FORZA_RELAY_WORK_ROUNDS`:
//!   three rounds can't resolve a 10 % aim on this VM), medians: CPU per packet
//!   (schedstat), the user and kernel ticks, wake-ups per packet, p50 ×
//!   direct, and `perf stat`'s hardware counters where the machine has them.
//!
//! Nothing asserts: the aims of issue 26 print PASS/MISS.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::peers::{self, Peer};
use crate::process::procfs;
use crate::report::{num, opt, pass, print_anomalies, Dests, Rounds};
use crate::traffic::Wake;
use crate::trial::{Outcome, Trial};
use crate::valgrind::{Callgrind, Counted, Lines, Tool};
use crate::{GAME_RATE, PIN_CPU};

/// The flag that runs this section, as a child started under `taskset`.
pub const WORK_CHILD: &str = "--work-child";
/// The flag that, with [`WORK_CHILD`], runs the counts alone.
pub const COUNTS_ONLY: &str = "--counts-only";

/// Native runs: 1,080 packets at the game's rate, rounds.
const NATIVE_TIME: Duration = Duration::from_secs(3);
const ROUNDS: usize = 3;
/// Sets the native rounds instead of [`ROUNDS`].
const ROUNDS_ENV: &str = "FORZA_RELAY_WORK_ROUNDS";

/// The native rounds: [`ROUNDS_ENV`] if it holds a number from 1 up.
fn rounds() -> usize {
    std::env::var(ROUNDS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(ROUNDS)
}
/// Under callgrind the relay runs some 50× slower: at this rate every
/// wake-up still carries one packet (the receives per packet say so), and
/// the instructions per packet are those of the game's rate.
const CALLGRIND_RATE: u32 = 100;
const CALLGRIND_TIME: Duration = Duration::from_secs(3);
/// Lackey, slower still (a trace line per instruction and per access:
/// forza-relay to 4 destinations takes tens of ms a packet under it).
const LACKEY_RATE: u32 = 10;
const LACKEY_TIME: Duration = Duration::from_secs(8);
/// forza-relay's functions shown, most instructions first.
const TOP_FUNCTIONS: usize = 15;

/// Issue 26's aims: user-space instructions per packet against floor.c's,
/// CPU per packet against samplicator's, p50 ratio to direct against
/// samplicator's plus this.
const AIM_INSTRUCTIONS_VS_FLOOR: f64 = 2.0;
const AIM_CPU_VS_SAMPLICATOR: f64 = 1.10;
const AIM_P50_OVER_SAMPLICATOR: f64 = 0.05;

/// What one relay did per packet under valgrind.
struct Counts {
    label: &'static str,
    dests: usize,
    /// Measured packets forwarded (to the worst destination) under callgrind.
    packets: u64,
    calls: Option<Callgrind>,
    lines: Option<Lines>,
    /// Measured packets forwarded under lackey: about one per wake-up.
    lackey_packets: u64,
}

impl Counts {
    fn per_packet(&self, n: Option<u64>) -> Option<f64> {
        Some(n? as f64 / self.packets.max(1) as f64)
    }

    fn event(&self, event: &str) -> Option<f64> {
        self.per_packet(self.calls.as_ref()?.total(event))
    }

    fn instructions(&self) -> Option<f64> {
        self.event("Ir")
    }
}

/// The section: `samplicator` and `c_relay` as the bench found them.
pub fn section(samplicator: Option<PathBuf>, c_relay: Option<PathBuf>, counts_only: bool) {
    let epoch = Instant::now();
    println!(
        "\n6. Work per packet (issue 26): relay, sender and receivers on CPU {PIN_CPU}; load \
         average {}",
        opt(procfs::loadavg())
    );
    let mut relays = vec![Peer::Forza];
    relays.extend(samplicator.map(Peer::Samplicator));
    relays.extend(c_relay.map(Peer::CRelay));
    relays.extend(peers::build_floor().map(Peer::Floor));

    let counts = match Tool::available() {
        Ok(()) => count_section(&relays, epoch),
        Err(e) => {
            println!("   counts: not measured: {e}");
            Vec::new()
        }
    };
    let native = (!counts_only).then(|| native_section(&relays, epoch));
    println!(
        "\n   Aims (issue 26; load average now {}):",
        opt(procfs::loadavg())
    );
    for dests in [1, 4] {
        let of = |label: &str| {
            counts
                .iter()
                .find(|c| c.dests == dests && c.label == label)
                .and_then(Counts::instructions)
        };
        ratio_aim(
            &format!("user-space instructions per packet ≤ {AIM_INSTRUCTIONS_VS_FLOOR}× floor.c's"),
            "(callgrind)",
            dests,
            (of(Peer::Forza.label()), of(floor_label())),
            AIM_INSTRUCTIONS_VS_FLOOR,
            0,
        );
        if let Some(runs) = &native {
            native_aims(runs, dests);
        }
    }
}

fn floor_label() -> &'static str {
    Peer::Floor(PathBuf::new()).label()
}

fn samplicator_label() -> &'static str {
    Peer::Samplicator(PathBuf::new()).label()
}

/// Runs every relay under callgrind and under lackey; prints the tables.
fn count_section(relays: &[Peer], epoch: Instant) -> Vec<Counts> {
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("work");
    println!(
        "   counts under valgrind: callgrind at {CALLGRIND_RATE}/s for {} s (counters zeroed \
         after the warm-up, dumped after the traffic settled), lackey at {LACKEY_RATE}/s for \
         {} s; per measured packet forwarded",
        CALLGRIND_TIME.as_secs(),
        LACKEY_TIME.as_secs()
    );
    let mut all = Vec::new();
    for dests in [1, 4] {
        // With 4 destinations forza-relay also runs with every one `same`:
        // the translations' share of its count.
        let same = (dests > 1).then_some(Peer::ForzaAllSame);
        for peer in relays
            .iter()
            .take(1)
            .chain(&same)
            .chain(relays.iter().skip(1))
        {
            let run = |tool: Tool, rate: u32, time: Duration| {
                let trial = Trial {
                    peer: peer.clone(),
                    dests,
                    rate,
                    time,
                    wake: Wake::Blocking,
                    strace: false,
                    idle: None,
                    under: Some(tool),
                    perf: false,
                };
                let o = crate::attempt(trial, epoch)?;
                print_anomalies(&o);
                let packets = o.delivered.iter().map(|d| d.received).min().unwrap_or(0);
                let counted = o.relay?.counted?;
                match counted {
                    Ok(c) => Some((c, packets)),
                    Err(e) => {
                        println!("    ! {}, {}: {e}", peer.label(), Dests(dests));
                        None
                    }
                }
            };
            let name = format!("{}-{dests}", peer_file_name(peer));
            let calls = run(
                Tool::Callgrind(scratch.join(format!("{name}-callgrind"))),
                CALLGRIND_RATE,
                CALLGRIND_TIME,
            );
            let lines = run(
                Tool::Lackey(scratch.join(format!("{name}-lackey"))),
                LACKEY_RATE,
                LACKEY_TIME,
            );
            let (calls, packets) = match calls {
                Some((Counted::Calls(c), packets)) => (Some(c), packets),
                _ => (None, 0),
            };
            let (lines, lackey_packets) = match lines {
                Some((Counted::Lines(l), packets)) => (Some(l), packets),
                _ => (None, 0),
            };
            all.push(Counts {
                label: peer.label(),
                dests,
                packets,
                calls,
                lines,
                lackey_packets,
            });
        }
    }
    print_counts(&all);
    for dests in [1, 4] {
        if let Some(c) = all
            .iter()
            .find(|c| c.dests == dests && c.label == Peer::Forza.label())
        {
            print_functions(c);
        }
    }
    all
}

/// A file name for a peer's scratch folder.
fn peer_file_name(peer: &Peer) -> String {
    peer.label()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The median of `v`.
fn median(v: &[usize]) -> Option<f64> {
    Rounds::of(v.iter().map(|&x| Some(x as f64))).median()
}

fn print_counts(all: &[Counts]) {
    println!(
        "\n   {:<28} {:>5} {:>7} {:>10} {:>7} {:>9} {:>6} {:>7} {:>22} {:>12} {:>12} {:>9}",
        "relay",
        "dests",
        "packets",
        "instr/pkt",
        "×floor",
        "recv/pkt",
        "sends",
        "clocks",
        "sim. misses I1/D1/LL",
        "code lines",
        "data lines",
        "wake-ups"
    );
    println!(
        "   {:<28} {:>5} {:>7} {:>10} {:>7} {:>9} {:>6} {:>7} {:>22} {:>12} {:>12} {:>9}",
        "",
        "",
        "",
        "user space",
        "",
        "",
        "/pkt",
        "/pkt",
        "per packet",
        "per wake-up",
        "per wake-up",
        "/packets"
    );
    for c in all {
        let floor = all
            .iter()
            .find(|f| f.dests == c.dests && f.label == floor_label())
            .and_then(Counts::instructions);
        let calls = c.calls.as_ref();
        let sum = |events: &[&str]| events.iter().map(|e| c.event(e)).sum::<Option<f64>>();
        let (i1, d1, ll) = (
            c.event("I1mr"),
            sum(&["D1mr", "D1mw"]),
            sum(&["ILmr", "DLmr", "DLmw"]),
        );
        let lines = c.lines.as_ref();
        println!(
            "   {:<28} {:>5} {:>7} {:>10} {:>7} {:>9} {:>6} {:>7} {:>22} {:>12} {:>12} {:>9}",
            c.label,
            c.dests,
            c.packets,
            num(c.instructions(), 0),
            num(c.instructions().zip(floor).map(|(a, b)| a / b), 2),
            num(c.per_packet(calls.map(Callgrind::receives)), 2),
            num(c.per_packet(calls.map(Callgrind::sends)), 2),
            num(c.per_packet(calls.map(Callgrind::clock_reads)), 2),
            format!("{} / {} / {}", num(i1, 3), num(d1, 3), num(ll, 3)),
            num(lines.and_then(|l| median(&l.code)), 0),
            num(lines.and_then(|l| median(&l.data)), 0),
            lines.map_or_else(
                || "n/a".to_owned(),
                |l| format!("{}/{}", l.code.len(), c.lackey_packets)
            ),
        );
    }
    for c in all {
        let receives = c.per_packet(c.calls.as_ref().map(Callgrind::receives));
        if receives.is_some_and(|r| r < 0.95) {
            println!(
                "    ! {}, {}: {} receives per packet: some wake-ups under callgrind took \
                 several packets (the machine was busy), so its instructions per packet are \
                 below the game rate's; run it again on a quieter machine",
                c.label,
                Dests(c.dests),
                num(receives, 2)
            );
        }
    }
    println!(
        "   instr = callgrind's Ir over every thread (the kernel and the vDSO are not in it: \
         a clock read counts as glibc's clock_gettime making the call, about 10 instructions, \
         where natively it is the vDSO's few dozen); code/data lines = distinct 64-byte lines \
         from one receive's entry to the next, median"
    );
}

fn print_functions(c: &Counts) {
    let Some(calls) = &c.calls else { return };
    println!(
        "\n   forza-relay, {}: its own instructions per packet by function (inlined code \
         counts as its caller's), top {TOP_FUNCTIONS}",
        Dests(c.dests)
    );
    println!(
        "   {:>9} {:>9}  function (object)",
        "instr/pkt", "calls/pkt"
    );
    for (function, object, ir) in calls.top("Ir", TOP_FUNCTIONS) {
        let called = calls.calls.get(&function).copied();
        println!(
            "   {:>9} {:>9}  {} ({})",
            num(c.per_packet(Some(ir)), 1),
            num(c.per_packet(called), 2),
            function,
            object.rsplit('/').next().unwrap_or(&object)
        );
    }
    let total = c.instructions();
    let relay_own: u64 = calls
        .own
        .iter()
        .filter(|((ob, _), _)| ob.ends_with("/forza-relay"))
        .map(|(_, v)| v[0])
        .sum();
    println!(
        "   total {} instr/pkt, of which forza-relay's binary {} (the rest libc and ld.so)",
        num(total, 0),
        num(c.per_packet(Some(relay_own)), 0)
    );
}

/// Every native run: (destinations, round, outcome).
type NativeRuns = Vec<(usize, usize, Outcome)>;

fn native_section(relays: &[Peer], epoch: Instant) -> NativeRuns {
    let rounds = rounds();
    println!(
        "\n   native, pinned: {GAME_RATE}/s for {} s, {rounds} interleaved rounds, medians \
         (min–max); CPU = schedstat over the traffic / packets; user/kernel = utime/stime \
         ticks summed over the rounds (sampled at the tick: coarse); wake-ups = voluntary \
         context switches / packets; p50 × direct in the same round",
        NATIVE_TIME.as_secs()
    );
    let mut runs: NativeRuns = Vec::new();
    for round in 0..rounds {
        for dests in [1, 4] {
            let mut peers = vec![Peer::Direct];
            peers.extend(relays.iter().cloned());
            // Like for like with samplicator, which can't translate; and
            // the sends one by one, as before the outbox (issue 33).
            if dests > 1 {
                peers.push(Peer::ForzaAllSame);
                peers.push(Peer::ForzaSendEach);
            }
            let n = peers.len();
            peers.rotate_left(round % n);
            for peer in peers {
                let trial = Trial {
                    dests: if peer.serves(dests) { dests } else { 1 },
                    perf: peer != Peer::Direct,
                    peer,
                    rate: GAME_RATE,
                    time: NATIVE_TIME,
                    wake: Wake::Blocking,
                    strace: false,
                    idle: None,
                    under: None,
                };
                if let Some(o) = crate::attempt(trial, epoch) {
                    print_anomalies(&o);
                    runs.push((dests, round, o));
                }
            }
        }
    }
    let hardware = runs
        .iter()
        .any(|(_, _, o)| perf_of(o).is_some_and(|p| p.get("instructions:u").is_some()));
    println!(
        "\n   {:<28} {:>5} {:>20} {:>8} {:>13} {:>9} {:>20} {:>40}",
        "relay",
        "dests",
        "CPU µs/pkt",
        "×sampl.",
        "user/kernel",
        "wake/pkt",
        "p50 ×direct",
        "perf: instr u/k, cycles u/k per pkt"
    );
    for dests in [1, 4] {
        let sampl = figures(&runs, dests, samplicator_label()).cpu.median();
        let variants: &[Peer] = if dests > 1 {
            &[Peer::ForzaAllSame, Peer::ForzaSendEach]
        } else {
            &[]
        };
        for peer in relays.iter().chain(variants) {
            let f = figures(&runs, dests, peer.label());
            let (user, system) = f.ticks;
            let hw = if hardware {
                let per = |e: &str| {
                    f.perf_per_packet(e)
                        .map_or("-".to_owned(), |v| format!("{v:.0}"))
                };
                format!(
                    "{} / {}, {} / {}",
                    per("instructions:u"),
                    per("instructions:k"),
                    per("cycles:u"),
                    per("cycles:k")
                )
            } else {
                "n/a".to_owned()
            };
            println!(
                "   {:<28} {:>5} {:>20} {:>8} {:>13} {:>9} {:>20} {:>40}",
                peer.label(),
                dests,
                f.cpu.show(2),
                num(f.cpu.median().zip(sampl).map(|(a, b)| a / b), 2),
                format!("{user} / {system} ticks"),
                num(f.wakes.median(), 2),
                f.p50_ratio.show(2),
                hw
            );
        }
    }
    if !hardware {
        println!(
            "   perf stat: hardware counters (instructions, cycles, cache and dTLB misses) are \
             not supported on this machine (`perf stat -e instructions` says <not supported>); \
             the counts above stand in for them"
        );
    }
    runs
}

fn perf_of(o: &Outcome) -> Option<&crate::process::PerfCounts> {
    o.relay.as_ref()?.perf.as_ref()?.as_ref().ok()
}

/// One relay's native figures over the rounds.
struct Native {
    cpu: Rounds,
    wakes: Rounds,
    p50_ratio: Rounds,
    ticks: (u64, u64),
    perf: Vec<(u64, crate::process::PerfCounts)>,
}

impl Native {
    /// `event` per packet, summed over the rounds that counted it.
    fn perf_per_packet(&self, event: &str) -> Option<f64> {
        let (mut value, mut packets) = (0.0, 0);
        for (sent, counts) in &self.perf {
            value += counts.get(event)?;
            packets += sent;
        }
        (packets > 0).then(|| value / packets as f64)
    }
}

fn figures(runs: &NativeRuns, dests: usize, label: &str) -> Native {
    // CPU and p50 as the latency section works them out.
    let shared = crate::peer_figures(runs, dests, label);
    let mine: Vec<&Outcome> = runs
        .iter()
        .filter(|(d, _, o)| *d == dests && o.trial.peer.label() == label)
        .map(|(_, _, o)| o)
        .collect();
    let mut ticks = (0, 0);
    for o in &mine {
        if let Some((u, s)) = o.relay.as_ref().and_then(|r| r.user_system_ticks) {
            ticks.0 += u;
            ticks.1 += s;
        }
    }
    Native {
        cpu: shared.cpu_us,
        wakes: Rounds::of(
            mine.iter()
                .map(|o| Some(o.relay.as_ref()?.sleeps? as f64 / o.sent.max(1) as f64)),
        ),
        p50_ratio: shared.p50_ratio,
        ticks,
        perf: mine
            .iter()
            .filter_map(|o| Some((o.sent, perf_of(o)?.clone())))
            .collect(),
    }
}

fn native_aims(runs: &NativeRuns, dests: usize) {
    let ours = figures(runs, dests, Peer::Forza.label());
    let theirs = figures(runs, dests, samplicator_label());
    ratio_aim(
        &format!("CPU per packet ≤ {AIM_CPU_VS_SAMPLICATOR}× samplicator's"),
        "(pinned, medians)",
        dests,
        (ours.cpu.median(), theirs.cpu.median()),
        AIM_CPU_VS_SAMPLICATOR,
        2,
    );
    // The machine drifts between rounds by more than the aim: each round's
    // own ratio cancels what the round shared.
    let mut paired = vec![Peer::Forza];
    if dests > 1 {
        paired.extend([Peer::ForzaAllSame, Peer::ForzaSendEach]);
    }
    for peer in paired {
        let ratios = paired_cpu_ratios(runs, dests, peer.label());
        println!(
            "   {} {} CPU ÷ samplicator's in the same round, {}: {} (the median of {} rounds' \
             ratios)",
            pass(ratios.median().is_some_and(|r| r <= AIM_CPU_VS_SAMPLICATOR)),
            peer.label(),
            Dests(dests),
            ratios.show(2),
            ratios.len()
        );
    }
    let (a, b) = (ours.p50_ratio.median(), theirs.p50_ratio.median());
    println!(
        "   {} p50 ratio to direct ≤ samplicator's + {AIM_P50_OVER_SAMPLICATOR}, {}: {} vs {}",
        pass(
            a.zip(b)
                .is_some_and(|(a, b)| a <= b + AIM_P50_OVER_SAMPLICATOR)
        ),
        Dests(dests),
        num(a, 2),
        num(b, 2)
    );
}

/// Each round's CPU per packet of `label` over samplicator's in that round.
fn paired_cpu_ratios(runs: &NativeRuns, dests: usize, label: &str) -> Rounds {
    let cpu = |round: usize, label: &str| {
        runs.iter()
            .find(|(d, r, o)| *d == dests && *r == round && o.trial.peer.label() == label)
            .and_then(|(_, _, o)| o.cpu_ns_per_packet())
    };
    let rounds: std::collections::BTreeSet<usize> = runs.iter().map(|(_, r, _)| *r).collect();
    Rounds::of(
        rounds
            .into_iter()
            .map(|r| Some(cpu(r, label)? / cpu(r, samplicator_label())?)),
    )
}

/// Prints `what` for `dests` destinations, met when ours ≤ `aim` × theirs.
fn ratio_aim(
    what: &str,
    how: &str,
    dests: usize,
    (ours, theirs): (Option<f64>, Option<f64>),
    aim: f64,
    digits: usize,
) {
    println!(
        "   {} {what}, {} {how}: {} vs {} = {}×",
        pass(ours.zip(theirs).is_some_and(|(a, b)| a <= aim * b)),
        Dests(dests),
        num(ours, digits),
        num(theirs, digits),
        num(ours.zip(theirs).map(|(a, b)| a / b), 2)
    );
}
