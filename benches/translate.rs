//! Per-packet costs of the pure core: translation between formats, detection and
//! decoding, with a plain 324-byte copy as the baseline a translation is held to.
//!
//! ```sh
//! cargo bench --bench translate -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Every buffer is built once, outside `b.iter`; inputs and results go through
//! `std::hint::black_box` so the work is not folded away. Routines return `()`:
//! criterion's own sink for a returned value is a volatile read of it, which costs
//! ~1 ns for translate's 16-byte `Result` and far more for a whole `Telemetry`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use forza_relay::wire::{detect, Fields, Format, Packet, Puddle, Wheels};
use forza_relay::{translate, Telemetry};

/// A `format` packet with plausible values: wet front-left wheel, so a 324-byte
/// packet's detection runs the whole puddle check and answers.
fn packet(format: Format) -> Vec<u8> {
    let fields = Fields {
        is_race_on: 1,
        timestamp_ms: 123_456,
        engine_max_rpm: 8_000.0,
        current_engine_rpm: 6_000.0,
        acceleration_x: 4.0,
        acceleration_z: -9.0,
        velocity_x: 3.0,
        velocity_z: 40.0,
        wheel_in_puddle: Wheels::from_array([1.0, 0.0, 0.0, 0.0]).map(Puddle::Depth),
        car_class: 6,
        drivetrain_type: 2,
        speed: Some(40.1),
        power: Some(250_000.0),
        tire_temp: Some(Wheels::from_array([180.0, 181.0, 182.0, 183.0])),
        accel: Some(200),
        brake: Some(10),
        gear: Some(4),
        steer: Some(-20),
        ..Fields::default()
    };
    let mut p = Packet::new_checked(vec![0u8; format.len()], format).expect("sized to the format");
    fields.write(&mut p);
    p.set_tail_byte(0x5A);
    p.into_inner()
}

/// A 64-byte-aligned buffer: every benchmark copies between the same kind of
/// buffers, so memcpy alignment doesn't differ between a translation and the
/// baseline (a 324-byte memcpy varies by 2x with the buffers' relative placement).
#[repr(C, align(64))]
struct Buf([u8; 512]);

impl Buf {
    fn holding(bytes: &[u8]) -> Box<Buf> {
        let mut b = Box::new(Buf([0; 512]));
        b.0[..bytes.len()].copy_from_slice(bytes);
        b
    }
}

fn translation(c: &mut Criterion) {
    let mut g = c.benchmark_group("translate");
    let mut out = Buf::holding(&[]);
    for (from, to) in [
        (Format::Fh6, Format::Fh5),
        (Format::Fh6, Format::Fm7),
        (Format::Fm7, Format::Fh6),
        (Format::Fh6, Format::Fh6),
    ] {
        let input = Buf::holding(&packet(from));
        let input = &input.0[..from.len()];
        g.bench_function(format!("{from}->{to}"), |b| {
            b.iter(|| {
                let _ = black_box(translate(
                    black_box(input),
                    black_box(from),
                    black_box(to),
                    black_box(&mut out.0[..]),
                ));
            })
        });
    }
    let input = Buf::holding(&packet(Format::Fh6));
    g.bench_function("copy_from_slice 324 (baseline)", |b| {
        b.iter(|| black_box(&mut out.0[..324]).copy_from_slice(black_box(&input.0[..324])))
    });
    g.finish();
}

fn detection(c: &mut Criterion) {
    let mut g = c.benchmark_group("detect");
    let horizon = packet(Format::Fh6);
    let dry = vec![0u8; 324];
    let fm7 = packet(Format::Fm7);
    g.bench_function("324 bytes (fh6 flag)", |b| {
        b.iter(|| {
            black_box(detect(black_box(&horizon)));
        })
    });
    g.bench_function("324 bytes (dry, can't tell)", |b| {
        b.iter(|| {
            black_box(detect(black_box(&dry)));
        })
    });
    g.bench_function("fm7 (311 bytes)", |b| {
        b.iter(|| {
            black_box(detect(black_box(&fm7)));
        })
    });
    g.finish();
}

fn decoding(c: &mut Criterion) {
    let input = packet(Format::Fh6);
    let p = Packet::new_checked(&input[..], Format::Fh6).expect("sized to the format");
    c.bench_function("Telemetry::decode fh6", |b| {
        b.iter(|| {
            black_box(Telemetry::decode(black_box(&p)));
        })
    });
}

criterion_group!(benches, translation, detection, decoding);
criterion_main!(benches);
