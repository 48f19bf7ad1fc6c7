//! The fan-out core under hostile input, on stable Rust (issue 9): the checks of
//! the cargo-fuzz target `fanout` (tests/fanout_check, shared with fuzz/) over a
//! few hundred random scripts, so CI exercises allow → detect → verdict →
//! filter → translate → sink → outcomes, `due`, `plan`/`commit` and the
//! counters with hostile bytes on every run, against an oracle written from
//! the formats reference (issue 17).

use crate::common;
use crate::fanout_check;

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use forza_relay::fanout::{Arrival, DestinationId, Fanout, Fate};
use forza_relay::wire::Format;
use proptest::prelude::*;

use common::{config, destination_toml, listen_toml, view, Spec};

/// Scripts per run: a few hundred, well under a second here.
const CASES: u32 = 384;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        // A failing script is shrunk to a short one; keep that bounded too.
        max_shrink_iters: 4_096,
        ..ProptestConfig::default()
    })]

    #[test]
    fn issue9_random_scripts_keep_every_fanout_invariant(
        script in prop::collection::vec(any::<u8>(), 0..4_096)
    ) {
        fanout_check::run(&script);
    }
}

/// Script bytes for an fh6-length datagram from loopback, 8 ms on, whose
/// puddle words are set by `puddles` (1: dry, 2: fh6's flag, 3: fh5's depth;
/// see `fanout_check::datagram`) and IsRaceOn by `racing`.
fn horizon_datagram(script: &mut Vec<u8>, fill: u8, puddles: u8, racing: bool) {
    // op 0 (a datagram), 16 steps on, kind 24 (the fourth length: 324 bytes).
    script.extend_from_slice(&[0, 16, 0b0001_1000, fill]);
    script.extend(std::iter::repeat_n(fill, 324));
    script.push(puddles << 1 | u8::from(racing));
}

/// The script byte for a destination's output (0: same, else a format index
/// from 1) and its `max_age` (an index into `fanout_check`'s ages, 0..8; see
/// `fanout_check::routes`).
fn output_and_age(output: u8, age: u8) -> u8 {
    let rest = (i32::from(output) - 2 * i32::from(age)).rem_euclid(7) as u8;
    // 16 is 2 more than a multiple of 7.
    16 * age + rest
}

/// Scripts built to reach what random bytes reach rarely: a long stream at a
/// Forza length through rate-limited destinations, some with `max_age`, with
/// outcomes for queued frames and reloads between.
#[test]
fn issue9_a_long_rate_limited_stream_with_reloads_keeps_every_invariant() {
    let mut total = fanout_check::Covered::default();
    for seed in 0..64u8 {
        let mut script = vec![
            6,           // input fh6
            0,           // allow everyone
            0b0111_1111, // destinations a..g
        ];
        for i in 0..7u8 {
            // same, then every format; every max_age in turn (issue 15)
            script.push(output_and_age(i, (seed + 3 * i) % 8));
            script.push((i.wrapping_mul(5) ^ seed) & 0x7F); // race filter, max_rate
        }
        script.push(seed % 5); // a failed send every n-th delivery
        script.push(seed % 4); // a send that would block every n-th delivery
        for step in 0..400u32 {
            let at = step as u8;
            match step % 50 {
                49 => {
                    // Reload: the same input, a different set and different
                    // limits (two bytes for each destination present).
                    let present = seed ^ at;
                    script.extend_from_slice(&[7, at, 6, 0, present]);
                    for i in (0..8u8).filter(|i| present & (1 << i) != 0) {
                        script.push(i.wrapping_add(seed));
                        script.push(at.wrapping_mul(3) ^ i);
                    }
                }
                // A timer, 20 ms on; every other one 40 ms, long enough for a
                // 60-a-second destination's waiting frame to go (issue 30).
                s if s % 7 == 6 => {
                    script.extend_from_slice(&[5, if s % 14 == 13 { 80 } else { 40 }])
                }
                s if s % 11 == 10 => script.extend_from_slice(&[6, 1, at, 3, at, seed, 2]), // outcomes
                _ => horizon_datagram(&mut script, at, (at ^ seed) >> 1, at & 1 == 0),
            }
        }
        let c = fanout_check::run(&script);
        total.datagrams += c.datagrams;
        total.deliveries += c.deliveries;
        total.due_deliveries += c.due_deliveries;
        total.flushed += c.flushed;
        total.applies += c.applies;
        total.dropped += c.dropped;
        total.stale += c.stale;
        total.due_stale += c.due_stale;
    }
    println!("fanout scripts: {total:?}");
    assert!(total.stale > 0, "no frame was too old: {total:?}");
    assert!(
        total.due_stale > 0,
        "no frame grew too old waiting for its slot: {total:?}"
    );
    assert!(
        total.due_deliveries > 0,
        "no frame waited for its slot: {total:?}"
    );
    assert!(total.flushed > 0, "no queued frame was resolved: {total:?}");
    assert!(total.applies > 0);
}

/// Issue 12: with `auto`, a stream whose puddle words tell fh5, then fh6, in
/// runs, with single packets telling otherwise between them. The oracle's
/// 30-packet rule must match the core's answer at every packet, and a run
/// must complete now and then.
#[test]
fn issue12_auto_input_changes_its_answer_only_after_a_run_of_agreeing_packets() {
    let mut total = fanout_check::Covered::default();
    for seed in 0..16u8 {
        let mut script = vec![
            0,           // input auto
            0,           // allow everyone
            0b0000_0111, // destinations a..c
            5,           // a: fh5
            0,
            6, // b: fh6
            0,
            0, // c: same
            0,
            0, // no failed sends
            0, // no blocked sends
        ];
        for step in 0..300u32 {
            let at = step as u8;
            // Runs of 40 to 100 telling packets, dry ones between, and now and
            // then one that says otherwise.
            let run = 40 + u32::from(seed) * 4;
            let telling = if (step / run) % 2 == 0 { 3 } else { 2 };
            let puddles = match step % 41 {
                40 => 5 - telling,    // the other answer, breaking a run
                s if s % 7 == 6 => 1, // dry
                _ => telling,
            };
            horizon_datagram(&mut script, at ^ seed, puddles, true);
        }
        let c = fanout_check::run(&script);
        total.datagrams += c.datagrams;
        total.deliveries += c.deliveries;
        total.horizon_changes += c.horizon_changes;
    }
    println!("auto scripts: {total:?}");
    assert!(total.horizon_changes > 0, "no run completed: {total:?}");
}

/// Issue 23: with `auto`, the game's stream (the first sender's) and another
/// sender's datagrams interleaved, each telling its own Horizon format; then
/// the game falls silent for over two seconds and the other's stream is
/// followed. Every datagram must read as the oracle says (its own puddles
/// first), the answer must move only with the stream followed, and the
/// senders the core lists must be the oracle's.
#[test]
fn issue23_another_senders_datagrams_never_move_the_answer_of_the_stream_followed() {
    let mut total = fanout_check::Covered::default();
    for seed in 0..8u8 {
        let mut script = vec![
            0,           // input auto
            0,           // allow everyone
            0b0000_0111, // destinations a..c
            5,           // a: fh5
            0,
            6, // b: fh6
            0,
            0, // c: same
            0,
            0, // no failed sends
            0, // no blocked sends
        ];
        // The game (op 0: 127.0.0.1) sends wet fh6 and dry frames; another
        // sender (10.1.2.3) wet fh5, once every third frame.
        for step in 0..200u32 {
            let at = step as u8 ^ seed;
            let game = if step % 5 == 4 { 1 } else { 2 };
            horizon_datagram(&mut script, at, game, true);
            if step % 3 == 0 {
                let len = script.len();
                horizon_datagram(&mut script, at, 3, true);
                script[len] = OTHER;
            }
        }
        // The game goes quiet: 20 timers of 127 ms.
        for _ in 0..20 {
            script.extend_from_slice(&[5, 255]);
        }
        for step in 0..(40 + u32::from(seed)) {
            let len = script.len();
            horizon_datagram(&mut script, step as u8, 3, true);
            script[len] = OTHER;
        }
        let c = fanout_check::run(&script);
        total.datagrams += c.datagrams;
        total.horizon_changes += c.horizon_changes;
        total.follow_changes += c.follow_changes;
    }
    println!("two senders: {total:?}");
    // Per script: fh6 confirmed by the game, then fh5 once its stream is
    // followed.
    assert_eq!(total.follow_changes, 8, "{total:?}");
    assert_eq!(total.horizon_changes, 16, "{total:?}");
}

/// A datagram's op from the second sender: `op % 9 == 0` makes it a datagram,
/// `op >> 4 == 1` its sender 10.1.2.3 (see `fanout_check::run`).
const OTHER: u8 = 0x12;

/// Found by the scripts above: a frame waiting for its `max_rate` slot when a
/// reload changes that destination's `max_rate` (same name, format and address)
/// keeps waiting, but the new limiter has no slot, so `next_deadline` no longer
/// names it and the shell never wakes to send it: it goes only if another
/// destination's timer happens to call `due`, or is dropped as rate-limited when
/// the next frame comes. At a pause (a menu, the finish line) the last frame a
/// rate-limited dashboard should show is lost.
#[test]
fn issue9_a_frame_waiting_for_its_rate_slot_still_goes_after_max_rate_changes() {
    let to: SocketAddr = "127.0.0.1:9001".parse().expect("an address");
    let before =
        config(&(listen_toml("fh6") + &destination_toml("dash", to, "same", "max_rate = 10")));
    let after =
        config(&(listen_toml("fh6") + &destination_toml("dash", to, "same", "max_rate = 20")));
    let mut core = Fanout::new(&before.routes());
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut sink = |_: DestinationId, bytes: &[u8]| {
        got.push(bytes.to_vec());
        Fate::Sent
    };
    let from: SocketAddr = "127.0.0.1:50000".parse().expect("an address");
    let t0 = Instant::now();
    let first = Spec::new(Format::Fh6, 1).build();
    core.handle(
        Arrival::new(&first, from, t0, SystemTime::now()),
        t0,
        &mut sink,
    );
    // The second goes at once, within the limiter's tolerance (issue 30).
    let second = Spec::new(Format::Fh6, 2).build();
    let t5 = t0 + Duration::from_millis(5);
    core.handle(
        Arrival::new(&second, from, t5, SystemTime::now()),
        t5,
        &mut sink,
    );
    let waiting = Spec::new(Format::Fh6, 3).build();
    let t10 = t0 + Duration::from_millis(10);
    core.handle(
        Arrival::new(&waiting, from, t10, SystemTime::now()),
        t10,
        &mut sink,
    );
    assert_eq!(
        core.next_deadline(),
        Some(t10 + Duration::from_millis(150)),
        "frame 3 waits for its slot"
    );

    let changes = core.apply(&after.routes());
    assert_eq!(changes.to_string(), "~ dash: max_rate 10 -> 20");
    let deadline = core
        .next_deadline()
        .expect("frame 3 still waits: next_deadline must say when the shell sends it");
    // Found in review of issue 30: the new limiter has sent nothing, so it
    // would admit any frame; the waiting one goes at once, not 1.5 of the new
    // intervals later.
    assert_eq!(deadline, t10, "at once");
    core.due(deadline, &mut sink);
    assert_eq!(got.len(), 3, "frame 3 went at its deadline");
    assert_eq!(view(&got[2], Format::Fh6).timestamp_ms(), 3, "TimestampMS");
    assert_eq!(got[2], waiting, "same: byte for byte");
}
