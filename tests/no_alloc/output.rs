//! Proof that encoding frames as text (src/output/) allocates nothing per frame
//! once the caller's buffer has grown: a counting global allocator, armed on
//! this thread only, watches 1,200 frames of every format (racing, menu, and
//! with values that are no finite number) go through a JSON and an influx
//! encoder of every column and of a few.

use std::sync::atomic::Ordering;
use std::time::{Duration, UNIX_EPOCH};

use forza_relay::output::{Encoder, Encoding, Frame, Selection};
use forza_relay::wire::{Format, Packet, Puddle, Wheels};

use crate::counting::{ALLOCATIONS, ARMED};

/// Frame `i` of `format`: racing, a menu frame every tenth, and a NaN rpm every
/// seventh; every value moves with `i`.
fn packet(format: Format, i: u32) -> Vec<u8> {
    let mut buf = vec![0u8; format.len()];
    let mut p = Packet::new_checked(&mut buf[..], format).expect("the format's length");
    p.set_timestamp_ms(1_000 + i);
    if i % 10 == 9 {
        return buf;
    }
    p.set_is_race_on(1);
    p.set_engine_max_rpm(8_250.0);
    p.set_current_engine_rpm(if i % 7 == 6 {
        f32::NAN
    } else {
        800.0 + i as f32
    });
    p.set_velocity_x(i as f32 * 0.01);
    p.set_velocity_z(40.0);
    p.set_wheel_in_puddle(Wheels::from_array([Puddle::Flag((i % 2) as i32); 4]));
    p.set_car_ordinal(3_141);
    p.set_car_class((i % 8) as i32);
    if format.layout().dash.is_some() {
        p.set_speed(i as f32 * 0.5).expect("a Dash block");
        p.set_gear((i % 12) as u8).expect("a Dash block");
        p.set_tire_temp(Wheels::from_array([180.0 + i as f32; 4]))
            .expect("a Dash block");
    }
    buf
}

#[test]
fn encoding_allocates_nothing_per_frame_once_the_buffer_has_grown() {
    const FRAMES: u32 = 200;
    let packets: Vec<(Format, Vec<Vec<u8>>)> = Format::ALL
        .into_iter()
        .map(|f| (f, (0..FRAMES).map(|i| packet(f, i)).collect()))
        .collect();
    let few = Selection::names(["Speed", "CurrentEngineRpm", "gear_label", "TireTemp"]).unwrap();
    let mut encoders: Vec<Encoder> = [Encoding::Json, Encoding::Influx]
        .into_iter()
        .flat_map(|e| [Encoder::new(e, &Selection::all()), Encoder::new(e, &few)])
        .collect();
    let t0 = UNIX_EPOCH + Duration::from_secs(1_764_000_000);
    let mut out = Vec::new();
    let run = |encoders: &mut Vec<Encoder>, out: &mut Vec<u8>| {
        let (mut written, mut bytes) = (0u64, 0usize);
        for encoder in encoders.iter_mut() {
            for (format, packets) in &packets {
                for (i, payload) in packets.iter().enumerate() {
                    let frame = Frame {
                        payload,
                        format: *format,
                        time: t0 + Duration::from_millis(i as u64 * 16),
                    };
                    if encoder.encode(&frame, out).is_ok() {
                        written += 1;
                        bytes += out.len();
                    }
                }
            }
        }
        (written, bytes)
    };
    // Warm-up: the buffer grows to the longest text.
    let warm = run(&mut encoders, &mut out);

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    ARMED.with(|a| a.set(true));
    let measured = run(&mut encoders, &mut out);
    ARMED.with(|a| a.set(false));
    let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;

    assert_eq!(allocations, 0, "{allocations} allocations while encoding");
    // The measured run did the work: the same frames, the same text.
    assert_eq!(measured, warm);
    // Every json frame; every influx frame but the menu frames (no car in
    // them: no line, issue 30) and the sled ones of `few` (no Dash block: no
    // Speed, no gear, no tyres; the rpm NaN every 7th).
    let racing = (0..FRAMES).filter(|i| i % 10 != 9).count() as u64;
    let sled_few_with_rpm = (0..FRAMES).filter(|i| i % 10 != 9 && i % 7 != 6).count() as u64;
    let all = 6 * u64::from(FRAMES);
    assert_eq!(
        measured.0,
        all * 2 + 6 * racing + 5 * racing + sled_few_with_rpm
    );
}
