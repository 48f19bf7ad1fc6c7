//! Section 6, a `json` destination beside a `same` one (issue 25): forza-relay
//! with one `same` destination, with two, and with one `same` and one `json`
//! destination of every column (the frame's text made once per frame, ~2.5
//! kB), at the game's rate, with direct beside them; rounds interleaved, the
//! order rotating. Per run: the relay's CPU per packet, and the p50 latency
//! of each destination, `same`'s beside direct's in the same round. Two
//! `same` destinations say what any second destination costs (its send).

use std::time::Instant;

use crate::peers::Peer;
use crate::report::{num, percentile_us, print_anomalies, Rounds};
use crate::traffic::Wake;
use crate::trial::{Outcome, Trial};
use crate::{attempt, GAME_RATE, GAME_TIME};

/// Rounds: more than the latency section's, for a difference of two runs.
const ROUNDS: usize = 5;

/// The section: every run, then the table.
pub fn section(epoch: Instant) {
    println!(
        "\n7. A json destination beside a same one (issue 25): forza-relay to `same`, to \
         `same` + `same`, and to `same` + `json` (every column), {GAME_RATE} packets/s, {} s \
         per run, {ROUNDS} interleaved rounds; CPU = the relay's on-CPU ns over the traffic / \
         packets sent; p50 = arrival − send, per destination (d0, d1)",
        GAME_TIME.as_secs()
    );
    let mut runs: Vec<(usize, Outcome)> = Vec::new();
    for round in 0..ROUNDS {
        let mut plan = vec![
            (Peer::Direct, 1),
            (Peer::Forza, 1),
            (Peer::ForzaAllSame, 2),
            (Peer::ForzaJson, 2),
        ];
        let n = plan.len();
        plan.rotate_left(round % n);
        for (peer, dests) in plan {
            let trial = Trial {
                peer,
                dests,
                rate: GAME_RATE,
                time: GAME_TIME,
                wake: Wake::Blocking,
                strace: false,
                idle: None,
                under: None,
                perf: false,
            };
            if let Some(o) = attempt(trial, epoch) {
                print_anomalies(&o);
                runs.push((round, o));
            }
        }
    }
    let of = |peer: &Peer, dests: usize| -> Vec<&(usize, Outcome)> {
        runs.iter()
            .filter(|(_, o)| o.trial.peer == *peer && o.trial.dests == dests)
            .collect()
    };
    let p50 = |o: &Outcome, dest: usize| {
        o.delivered
            .get(dest)
            .and_then(|d| percentile_us(&d.latencies, 50.0))
    };
    let direct = |round: usize| {
        runs.iter()
            .find(|(r, o)| *r == round && o.trial.peer == Peer::Direct)
            .and_then(|(_, o)| p50(o, 0))
    };
    println!(
        "   {:<26} {:>21} {:>21} {:>21} {:>21} {:>9}",
        "peer", "CPU µs/packet", "d0 (same) p50 µs", "d0 p50 ×direct", "d1 p50 µs", "lost"
    );
    for (peer, dests) in [
        (Peer::Direct, 1),
        (Peer::Forza, 1),
        (Peer::ForzaAllSame, 2),
        (Peer::ForzaJson, 2),
    ] {
        let mine = of(&peer, dests);
        let rounds = |f: &dyn Fn(usize, &Outcome) -> Option<f64>| {
            Rounds::of(mine.iter().map(|(r, o)| f(*r, o)))
        };
        let cpu = rounds(&|_, o| o.cpu_ns_per_packet().map(|ns| ns / 1e3));
        let same = rounds(&|_, o| p50(o, 0));
        let ratio = rounds(&|r, o| Some(p50(o, 0)? / direct(r)?));
        let json = rounds(&|_, o| p50(o, 1));
        let lost: u64 = mine.iter().map(|(_, o)| o.lost()).sum();
        let label = match (&peer, dests) {
            (Peer::ForzaAllSame, _) => "forza-relay, same + same",
            (Peer::Forza, _) => "forza-relay, same",
            _ => peer.label(),
        };
        println!(
            "   {:<26} {:>21} {:>21} {:>21} {:>21} {:>9}",
            label,
            cpu.show(2),
            same.show(1),
            ratio.show(2),
            json.show(1),
            lost
        );
    }
    // The same round's difference: the machine's mood moves both.
    let extra = |than: Peer| {
        Rounds::of((0..ROUNDS).map(|round| {
            let cpu = |peer: &Peer| {
                runs.iter()
                    .find(|(r, o)| *r == round && o.trial.peer == *peer)
                    .and_then(|(_, o)| o.cpu_ns_per_packet())
            };
            Some((cpu(&Peer::ForzaJson)? - cpu(&than)?) / 1e3)
        }))
    };
    let (over_one, over_same) = (extra(Peer::Forza), extra(Peer::ForzaAllSame));
    println!(
        "   per round, CPU µs per packet of same + json less same: {} (median {}); less \
         same + same: {} (median {})",
        over_one.show(2),
        num(over_one.median(), 2),
        over_same.show(2),
        num(over_same.median(), 2)
    );
}
