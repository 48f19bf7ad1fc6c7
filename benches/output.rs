//! Encoding one FH6 frame as text (src/output/): the JSON object of a `json`
//! output and the line of an `influx` one, every column, into a buffer kept
//! between frames as the outputs keep it. Issue 25 aims at under 3 µs each.

use std::time::{Duration, UNIX_EPOCH};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use forza_relay::output::{Encoder, Encoding, Frame, Selection};
use forza_relay::wire::Format;

/// A checked-in FH6 packet with every block set (tests/fixtures/).
const FH6: &[u8] = include_bytes!("../tests/fixtures/fh6.bin");

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
