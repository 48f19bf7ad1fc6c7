//! Encoding one FH6 frame as text (src/output/): the JSON object of a `json`
//! output and the line of an `influx` one, every column, into a buffer kept
//! between frames as the outputs keep it. Issue 25 aims at under 3 µs each,
//! issue 33 at 2 µs.
//!
//! `tests/fixtures/fh6.bin` sets each field to a short value (`0.25`, `101`),
//! and the captures in tests/fixtures/captures/ hold copies of it: a real
//! drive's floats have 7 to 9 significant digits. The `drive` cases cycle
//! through 64 consecutive frames of a simulated drive (src/simulate/, the
//! values real drives have) to measure those.

use std::time::{Duration, UNIX_EPOCH};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use forza_relay::output::{Encoder, Encoding, Frame, Selection};
use forza_relay::simulate::Simulator;
use forza_relay::wire::Format;

/// A checked-in FH6 packet with every block set (tests/fixtures/).
const FH6: &[u8] = include_bytes!("../tests/fixtures/fh6.bin");

/// Frames of a simulated FH6 drive, 60 a second, after its first 10 s.
const DRIVE_FRAMES: usize = 64;

/// [`DRIVE_FRAMES`] consecutive FH6 frames of a simulated drive, racing.
fn drive() -> Vec<Vec<u8>> {
    let mut sim = Simulator::new(Format::Fh6, 33);
    let dt = Duration::from_micros(16_667);
    let mut buf = vec![0u8; Format::Fh6.len()];
    for _ in 0..600 {
        sim.frame(dt, &mut buf).expect("room for a packet");
    }
    assert!(sim.is_racing(), "racing after 10 s");
    (0..DRIVE_FRAMES)
        .map(|_| {
            let len = sim.frame(dt, &mut buf).expect("room for a packet");
            buf[..len].to_vec()
        })
        .collect()
}

fn encode(c: &mut Criterion) {
    let frame = Frame {
        payload: FH6,
        format: Format::Fh6,
        time: UNIX_EPOCH + Duration::from_millis(1_764_000_000_016),
    };
    let mut group = c.benchmark_group("output");
    for (name, encoding, selection) in [
        ("json_fh6_all_columns", Encoding::Json, Selection::all()),
        ("influx_fh6_all_columns", Encoding::Influx, Selection::all()),
        (
            "json_fh6_4_columns",
            Encoding::Json,
            Selection::names(["Speed", "CurrentEngineRpm", "Gear", "speed_kmh"]).unwrap(),
        ),
    ] {
        let mut encoder = Encoder::new(encoding, &selection);
        let mut out = Vec::with_capacity(8192);
        group.bench_function(name, |b| {
            b.iter(|| {
                encoder
                    .encode(black_box(&frame), &mut out)
                    .expect("an fh6 packet");
                black_box(out.len())
            })
        });
    }
    let drive = drive();
    for (name, encoding) in [
        ("json_fh6_drive_all_columns", Encoding::Json),
        ("influx_fh6_drive_all_columns", Encoding::Influx),
    ] {
        let mut encoder = Encoder::new(encoding, &Selection::all());
        let mut out = Vec::with_capacity(8192);
        let mut frames = drive.iter().enumerate().cycle();
        group.bench_function(name, |b| {
            b.iter(|| {
                let (i, payload) = frames.next().expect("a cycle never ends");
                let frame = Frame {
                    payload,
                    format: Format::Fh6,
                    time: UNIX_EPOCH
                        + Duration::from_micros(1_764_000_000_016_667 + 16_667 * i as u64),
                };
                encoder
                    .encode(black_box(&frame), &mut out)
                    .expect("a racing fh6 packet");
                black_box(out.len())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = encode
}
criterion_main!(benches);
