//! Section 5, freshness after a stall (issue 15): at the game's rate, the relay is
//! stopped with SIGSTOP for [`STALL`] and resumed, while the sender goes on.
//! Per destination: the frames delivered after the resume, the age of the
//! oldest of them (arrival − send), and the time from the resume to the first
//! fresh frame (at most [`MAX_AGE`] old). forza-relay runs with one
//! destination with `max-age` and one without; socat and the Python relay
//! (no limit) show what a relay without one delivers. forza-relay runs once
//! with the limited destination alone and once beside the other. Unix only (signals by
//! the `kill` command).

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::peers::Peer;
use crate::process::{FinalLine, Spawned};
use crate::report::{num, pass, percentile_us};
use crate::traffic::{free_port, nanos_since, Receivers, Sender, Wake};
use crate::GAME_RATE;

/// Traffic before the stall, the stall, and traffic after it.
const BEFORE: Duration = Duration::from_secs(1);
const STALL: Duration = Duration::from_secs(2);
const AFTER: Duration = Duration::from_secs(1);
/// The limit forza-relay's first destination gets.
pub const MAX_AGE: Duration = Duration::from_millis(50);
/// Aims with the limit: nothing older than the limit plus this is delivered,
/// and the first fresh frame leaves within this of the resume.
const SLACK: Duration = Duration::from_millis(5);

/// What one destination saw.
pub struct Fresh {
    /// Which relay, which destination.
    pub label: String,
    /// Whether it had the limit.
    pub limited: bool,
    /// Frames delivered after the resume.
    pub after_resume: u64,
    /// The age (arrival − send) of the oldest of them, ns.
    pub oldest_ns: Option<u64>,
    /// From the resume to the first frame at most `MAX_AGE` old, ns.
    pub first_fresh_ns: Option<u64>,
    /// The relay's own count of stale frames, and its latency figures
    /// (p50/p99/max µs over the run) beside the bench's for the same frames.
    pub stale: Option<u64>,
    pub relay_latency_us: Option<[Option<u64>; 3]>,
    pub bench_latency_us: [Option<f64>; 3],
}

fn signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|s| s.success())
}

/// One stall run of `peer` to `dests` destinations.
fn run(peer: &Peer, dests: usize, epoch: Instant) -> Result<Vec<Fresh>, String> {
    let count = (f64::from(GAME_RATE) * (BEFORE + STALL + AFTER).as_secs_f64()) as u32;
    let receivers = Receivers::spawn(&peer.arriving(dests), Wake::Blocking, count as usize, epoch)
        .map_err(|e| format!("bind the receivers: {e}"))?;
    let listen = free_port().map_err(|e| format!("find a free port: {e}"))?;
    let cmd = peer
        .command(listen, receivers.addrs())
        .ok_or("no relay to stop")?;
    let relay = Spawned::start(cmd).map_err(|e| format!("start the relay: {e}"))?;
    let mut sender = Sender::connect(listen).map_err(|e| format!("bind the sender: {e}"))?;
    if let Err(e) = sender.warm_up(&receivers) {
        let log = relay.stop().stderr;
        receivers.finish();
        return Err(format!("{e}; the relay's stderr:\n{log}"));
    }
    let pid = relay.pid();
    let stopper = thread::spawn(move || {
        thread::sleep(BEFORE);
        let stopped = signal(pid, "STOP");
        thread::sleep(STALL);
        // Before the `kill` runs: the figures after it are not flattered.
        let resumed = nanos_since(epoch);
        let resumed_ok = signal(pid, "CONT");
        (stopped && resumed_ok).then_some(resumed)
    });
    let sent = sender.send_paced(count, GAME_RATE, epoch);
    let resumed = stopper.join().map_err(|_| "the stopping thread panicked")?;
    receivers.settle(u64::from(count) * dests as u64);
    let ended = relay.stop();
    let resumed = resumed.ok_or("kill -STOP / -CONT failed")?;
    let counters = peer.has_json().then(|| FinalLine::find(&ended.stdout));
    let counters = match counters {
        Some(Err(e)) => return Err(e),
        Some(Ok(c)) => Some(c),
        None => None,
    };
    let max_age = MAX_AGE.as_nanos() as u64;
    Ok(receivers
        .finish()
        .into_iter()
        .enumerate()
        .map(|(i, arrivals)| {
            let mut after_resume = 0;
            let mut oldest_ns = None::<u64>;
            let mut first_fresh_ns = None::<u64>;
            for (&arrived, &sent_at) in arrivals.at.iter().zip(&sent.at) {
                if arrived == 0 || arrived < resumed {
                    continue;
                }
                after_resume += 1;
                let age = arrived.saturating_sub(sent_at);
                oldest_ns = Some(oldest_ns.map_or(age, |o| o.max(age)));
                if age <= max_age {
                    let since = arrived - resumed;
                    first_fresh_ns = Some(first_fresh_ns.map_or(since, |f| f.min(since)));
                }
            }
            let latencies = arrivals.latencies(&sent.at);
            let final_dest = counters.as_ref().and_then(|c| c.destinations.get(i));
            Fresh {
                label: format!("{}, {dests} dest: d{i}", peer.label()),
                limited: *peer == Peer::ForzaAged && i == 0,
                after_resume,
                oldest_ns,
                first_fresh_ns,
                stale: final_dest.map(|d| d.stale),
                relay_latency_us: final_dest.map(|d| {
                    let l = &d.latency_us;
                    [l.p50, l.p99, l.max]
                }),
                bench_latency_us: [
                    percentile_us(&latencies, 50.0),
                    percentile_us(&latencies, 99.0),
                    latencies.last().map(|&ns| ns as f64 / 1e3),
                ],
            }
        })
        .collect())
}

/// Runs the section: forza-relay (2 destinations, one limited), then each
/// peer this machine has, without a limit.
pub fn section(socat: bool, python: bool, epoch: Instant) {
    println!(
        "\n5. Freshness after a stall: {GAME_RATE} packets/s, the relay stopped (SIGSTOP) for \
         {} s after {} s and resumed (SIGCONT); forza-relay d0 has max-age={}ms, d1 none; \
         age = arrival − send; fresh = at most {} ms old",
        STALL.as_secs(),
        BEFORE.as_secs(),
        MAX_AGE.as_millis(),
        MAX_AGE.as_millis()
    );
    // Alone, then beside a destination without the limit, which gets the
    // whole backlog: its sends come first for each older frame.
    let mut peers = vec![(Peer::ForzaAged, 1), (Peer::ForzaAged, 2)];
    if socat {
        peers.push((Peer::Socat, 1));
    }
    if python {
        peers.push((Peer::Python, 1));
    }
    println!(
        "   {:<28} {:>12} {:>11} {:>15} {:>6}  {:<26} {:<26}",
        "relay, destination",
        "after resume",
        "oldest ms",
        "first fresh ms",
        "stale",
        "relay latency µs p50/99/max",
        "bench arrival−send µs"
    );
    for (peer, dests) in peers {
        let rows = match run(&peer, dests, epoch) {
            Ok(rows) => rows,
            Err(e) => {
                println!("    ! {}: not measured: {e}", peer.label());
                continue;
            }
        };
        for r in rows {
            let ms = |ns: Option<u64>| num(ns.map(|n| n as f64 / 1e6), 1);
            let relay = r.relay_latency_us.map_or_else(
                || "–".to_owned(),
                |l| {
                    l.map(|v| v.map_or_else(|| "–".to_owned(), |v| v.to_string()))
                        .join("/")
                },
            );
            let bench = r.bench_latency_us.map(|v| num(v, 0)).join("/");
            let aims = if r.limited {
                let limit = (MAX_AGE + SLACK).as_nanos() as u64;
                let slack = SLACK.as_nanos() as u64;
                format!(
                    "  oldest ≤{}ms {}, first fresh ≤{}ms {}",
                    (MAX_AGE + SLACK).as_millis(),
                    pass(r.oldest_ns.is_none_or(|o| o <= limit)),
                    SLACK.as_millis(),
                    pass(r.first_fresh_ns.is_some_and(|f| f <= slack))
                )
            } else {
                String::new()
            };
            println!(
                "   {:<28} {:>12} {:>11} {:>15} {:>6}  {:<26} {:<26}{aims}",
                r.label,
                r.after_resume,
                ms(r.oldest_ns),
                ms(r.first_fresh_ns),
                r.stale.map_or_else(|| "–".to_owned(), |s| s.to_string()),
                relay,
                bench
            );
        }
    }
}
