//! The fan-out core under hostile input, on stable Rust (issue 9): the checks of
//! the cargo-fuzz target `fanout` (tests/fanout_check, shared with fuzz/) over a
//! few hundred random scripts, so CI exercises detect → filter → translate →
//! sink, `due`, `apply` and `snapshot` with hostile bytes on every run.

mod common;
mod fanout_check;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use forza_relay::fanout::{DestinationId, Fanout};
use forza_relay::stats::DestinationStats;
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

/// Scripts built to reach what random bytes reach rarely: a long stream at a
/// Forza length through rate-limited destinations, with reloads between.
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
            script.push(i); // same, then every format
            script.push((i.wrapping_mul(5) ^ seed) & 0x7F); // race filter, max_rate
        }
        script.push(seed % 5); // a failed send every n-th delivery
        for step in 0..400u32 {
            let at = step as u8;
            match step % 50 {
                49 => {
                    // Reload: same input, a different set and different limits.
                    script.extend_from_slice(&[7, at, 0, 0, seed ^ at]);
                    for i in 0..8u8 {
                        script.push(i.wrapping_add(seed));
                        script.push(at.wrapping_mul(3) ^ i);
                    }
                }
                s if s % 7 == 6 => script.extend_from_slice(&[5, 40]), // a timer
                _ => {
                    // An fh6-length datagram 8 ms on; race on/off and puddles vary.
                    script.extend_from_slice(&[0, 16, 0b0010_1000, seed]);
                    script.extend(std::iter::repeat_n(at, 324));
                    script.push(at ^ seed);
                }
            }
        }
        let c = fanout_check::run(&script);
        total.datagrams += c.datagrams;
        total.deliveries += c.deliveries;
        total.due_deliveries += c.due_deliveries;
        total.applies += c.applies;
        total.dropped += c.dropped;
    }
    println!("fanout scripts: {total:?}");
    assert!(
        total.due_deliveries > 0,
        "no frame waited for its slot: {total:?}"
    );
    assert!(total.applies > 0);
}

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
    let mut core = Fanout::new(&before);
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut sink = |_: DestinationId, bytes: &[u8], stats: &mut DestinationStats| {
        stats.sent += 1;
        got.push(bytes.to_vec());
    };
    let from: SocketAddr = "127.0.0.1:50000".parse().expect("an address");
    let t0 = Instant::now();
    core.handle(&Spec::new(Format::Fh6, 1).build(), from, t0, &mut sink);
    let waiting = Spec::new(Format::Fh6, 2).build();
    core.handle(&waiting, from, t0 + Duration::from_millis(10), &mut sink);
    assert_eq!(
        core.next_deadline(),
        Some(t0 + Duration::from_millis(100)),
        "frame 2 waits for its slot"
    );

    let changes = core.apply(&after);
    assert_eq!(changes.to_string(), "~ dash: max_rate 10 -> 20");
    let deadline = core
        .next_deadline()
        .expect("frame 2 still waits: next_deadline must say when the shell sends it");
    core.due(deadline, &mut sink);
    assert_eq!(got.len(), 2, "frame 2 went at its deadline");
    assert_eq!(view(&got[1], Format::Fh6).timestamp_ms(), 2, "TimestampMS");
    assert_eq!(got[1], waiting, "same: byte for byte");
}
