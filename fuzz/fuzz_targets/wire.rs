//! Arbitrary bytes through everything that reads a packet: detection, a stream
//! `Detector`, `translate` for all 36 (from, to) pairs, and `Packet` + `Telemetry`.
//!
//! Besides "never panics", it checks the contracts callers rely on:
//! - `detect` and `Detector::detect` only name a format whose length is the input's;
//! - `translate` is `Ok(to.len())` exactly when the input is a whole `from` packet and
//!   the output is long enough, never writes past `to.len()`, and a same-format
//!   translation is a byte-for-byte copy;
//! - `Fields::read` then `Fields::write` rebuilds the packet byte for byte (the
//!   field table covers every byte but the Horizon tail).

#![no_main]

use forza_relay::telemetry::Telemetry;
use forza_relay::translate::translate;
use forza_relay::wire::{detect, Detector, Error, Format, Packet, MAX_LEN};
use libfuzzer_sys::fuzz_target;

/// Filler for output buffers, so bytes translate left unwritten show.
const DIRTY: u8 = 0xEE;

fuzz_target!(|data: &[u8]| {
    let by_length = Format::ALL.iter().any(|f| f.len() == data.len());
    if let Some(f) = detect(data) {
        assert_eq!(f.len(), data.len(), "detect named {f}");
    }
    for default in [Format::Fh4, Format::Fh5, Format::Fh6] {
        let mut detector = Detector::new(default);
        for _ in 0..2 {
            let got = detector.detect(data);
            assert_eq!(got.is_some(), by_length, "Detector on {} bytes", data.len());
            if let Some(f) = got {
                assert_eq!(f.len(), data.len(), "Detector named {f}");
            }
            assert!(detector.horizon().is_horizon());
        }
    }

    for from in Format::ALL {
        let whole = data.get(..from.len());
        for input in whole.into_iter().chain([data]) {
            for to in Format::ALL {
                check_translate(input, from, to);
            }
            check_decode(input, from);
        }
    }
});

fn check_translate(input: &[u8], from: Format, to: Format) {
    let mut out = [DIRTY; MAX_LEN + 1];
    let result = translate(input, from, to, &mut out);
    if input.len() != from.len() {
        assert_eq!(
            result,
            Err(Error::Length {
                format: from,
                actual: input.len()
            })
        );
        assert!(out.iter().all(|&b| b == DIRTY), "an error wrote to out");
        return;
    }
    assert_eq!(result, Ok(to.len()), "{from} -> {to}");
    assert!(
        out[to.len()..].iter().all(|&b| b == DIRTY),
        "{from} -> {to} wrote past its end"
    );
    if from == to {
        assert_eq!(&out[..to.len()], input, "{from} -> {to} is not a copy");
    }
    let short = to.len() - 1;
    assert_eq!(
        translate(input, from, to, &mut out[..short]),
        Err(Error::OutputTooSmall {
            format: to,
            actual: short
        })
    );
}

fn check_decode(input: &[u8], format: Format) {
    let Ok(packet) = Packet::new_checked(input, format) else {
        assert_ne!(input.len(), format.len());
        return;
    };
    let telemetry = Telemetry::decode(&packet);
    assert_eq!(telemetry.format, format);
    let mut rebuilt = Packet::new_checked(vec![0u8; format.len()], format).expect("sized");
    telemetry.fields.write(&mut rebuilt);
    if let Some(tail) = packet.tail_byte() {
        rebuilt.set_tail_byte(tail);
    }
    assert_eq!(
        rebuilt.as_bytes(),
        input,
        "{format} fields don't rebuild the packet"
    );
}
