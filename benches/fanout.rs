//! Per-packet user-space cost of the pure fan-out core: one FH6 packet through
//! [`Fanout::handle`] to 1 and to 4 destinations, into a null sink, with no
//! sockets. What the relay spends per packet beyond this is system calls.
//!
//! ```sh
//! cargo bench --bench fanout -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! The core is built from TOML with `Config::from_toml` and `Config::routes`, as
//! a user's file would be; the packet and the core are made once, outside
//! `b.iter`. The sink answers "sent" and does nothing else, so the core counts
//! each delivery through its outcome, as it does in the relay. Every iteration is a new packet to the
//! core, so each distinct output format is translated once per iteration (the
//! cache is per packet), as it is in the relay.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion};
use forza_relay::config::{Config, Overrides};
use forza_relay::fanout::{Arrival, DestinationId, Fanout, Fate};
use forza_relay::report::CountersOf as _;
use forza_relay::wire::{Fields, Format, Packet, Puddle, Wheels};

/// A racing FH6 packet with plausible values (a wet front-left wheel, so the
/// puddle rewrite of fh5 has something to do).
fn fh6_packet() -> Vec<u8> {
    let fields = Fields {
        is_race_on: 1,
        timestamp_ms: 123_456,
        engine_max_rpm: 8_000.0,
        current_engine_rpm: 6_000.0,
        velocity_z: 40.0,
        wheel_in_puddle: Wheels::from_array([1.0, 0.0, 0.0, 0.0]).map(Puddle::Depth),
        car_class: 6,
        speed: Some(40.1),
        gear: Some(4),
        ..Fields::default()
    };
    let mut p =
        Packet::new_checked(vec![0u8; Format::Fh6.len()], Format::Fh6).expect("sized to fh6");
    fields.write(&mut p);
    p.into_inner()
}

/// A core listening for fh6, with one destination per entry of `outputs`
/// (`same` or a format id).
fn fanout(outputs: &[&str]) -> Fanout {
    let mut toml = String::from("[listen]\naddr = \"127.0.0.1:5400\"\nformat = \"fh6\"\n");
    for (i, output) in outputs.iter().enumerate() {
        toml.push_str(&format!(
            "[[destination]]\nname = \"d{i}\"\naddr = \"127.0.0.1:{}\"\nformat = \"{output}\"\n",
            8000 + i
        ));
    }
    let config = Config::from_toml(&toml, "bench.toml", &Overrides::default())
        .unwrap_or_else(|e| panic!("the bench's config is valid: {e}\n{toml}"));
    Fanout::new(&config.routes())
}

fn handle(c: &mut Criterion) {
    let mut g = c.benchmark_group("fanout::handle fh6");
    let packet = fh6_packet();
    let from: SocketAddr = ([127, 0, 0, 1], 50_000).into();
    let now = Instant::now();
    let wall = SystemTime::now();
    let mixes: [&[&str]; 8] = [
        &["same"],
        &["fh5"],
        &["fm7"],
        &["sled"],
        &["fm2023"],
        &["same", "same", "same", "same"],
        &["same", "fh5", "fm7", "sled"],
        &["fh5", "fm7", "sled", "fm2023"],
    ];
    for outputs in mixes {
        let mut core = fanout(outputs);
        let mut sink = |_: DestinationId, bytes: &[u8]| {
            black_box(bytes);
            Fate::Sent
        };
        let noun = if outputs.len() == 1 { "dest" } else { "dests" };
        let name = format!("{} {noun}: {}", outputs.len(), outputs.join(","));
        g.bench_function(name, |b| {
            b.iter(|| {
                core.handle(
                    Arrival::new(black_box(&packet), from, now, wall),
                    now,
                    &mut sink,
                )
            })
        });
        // Every packet reached every destination: nothing was filtered or dropped.
        let counters = core.counters();
        for d in &counters.destinations {
            assert_eq!(
                d.stats.sent, counters.input.received,
                "{}: every packet handled must be sent",
                d.name
            );
        }
    }
    g.finish();
}

criterion_group!(benches, handle);
criterion_main!(benches);
