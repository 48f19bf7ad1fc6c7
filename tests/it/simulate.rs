//! `simulate` and `demo` run as a user runs them (the real binary). The
//! simulator's promise to allocate nothing per frame is in tests/no_alloc.rs.
//!
//! The physics of the drive is checked frame by frame in `src/simulate/car/tests.rs`; here
//! the packets come over a real loopback socket from the real program.

// The shared helpers; these tests use the receiver and the child-process parts.
use crate::common;

use std::io;
use std::net::UdpSocket;
use std::time::Duration;

use common::bin::Bin;
use forza_relay::simulate::RACE_OFF_FRAMES;
use forza_relay::wire::Format;
use forza_relay::{Gear, Telemetry};

/// Everything waiting at `socket` (the sender has exited, so all of it is there).
fn drain(socket: &UdpSocket) -> Vec<Vec<u8>> {
    let mut packets = Vec::new();
    let mut buf = vec![0u8; common::MAX_DATAGRAM];
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("set a read timeout");
    loop {
        match common::recv_into(socket, &mut buf) {
            Ok(n) => packets.push(buf[..n].to_vec()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return packets
            }
            Err(e) => panic!("receive failed: {e}"),
        }
    }
}

#[test]
fn simulate_sends_fm7_at_the_rate_for_the_duration() {
    let (socket, addr) = common::receiver();
    let to = addr.to_string();
    let run = Bin::run(
        &[
            "simulate",
            "--to",
            &to,
            "--format",
            "fm7",
            "--rate",
            "100",
            "--duration",
            "1",
        ],
        None,
    );
    assert_eq!(run.code(), 0, "{run:?}");
    let packets = drain(&socket);
    println!("received {} packets", packets.len());
    // 100/s for 1 s; the pacing is checked in unit tests, so allow ±20 % here.
    assert!(
        (80..=120).contains(&packets.len()),
        "{} packets",
        packets.len()
    );
    assert!(
        run.stdout
            .contains(&format!("fm7 packets (311 bytes) to {addr} at 100/s")),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains(&format!("sent {} packets to {addr}", packets.len())),
        "{run:?}"
    );
    let decoded: Vec<Telemetry> = packets
        .iter()
        .map(|p| Telemetry::from_bytes(p, Format::Fm7).expect("an fm7 packet"))
        .collect();
    let off = RACE_OFF_FRAMES as usize;
    let racing = &decoded[off..decoded.len() - off];
    for (i, t) in decoded.iter().enumerate() {
        let f = &t.fields;
        if i < off || i >= decoded.len() - off {
            assert_eq!(f.is_race_on, 0, "packet {i}");
            continue;
        }
        assert_eq!(f.is_race_on, 1, "packet {i}");
        assert!(
            (850.0..=7_999.995).contains(&f.current_engine_rpm),
            "packet {i}: {t:?}"
        );
        let speed = f.speed.expect("fm7 has Speed");
        assert!((0.0..95.0).contains(&speed), "packet {i}: {speed} m/s");
        assert!(
            matches!(t.gear, Some(Gear::Forward(1..=6) | Gear::Neutral)),
            "packet {i}: gear {:?}",
            t.gear
        );
        assert_eq!(t.car_class_letter, Some("R"), "packet {i}");
        let temps = f.tire_temp.expect("fm7 has TireTemp");
        assert_eq!(temps.rl, temps.rr, "packet {i}");
    }
    for pair in decoded.windows(2) {
        assert!(pair[1].fields.timestamp_ms > pair[0].fields.timestamp_ms);
    }
    // A standing start: the car pulls away.
    let first = racing[0].fields.speed.unwrap();
    let last = racing[racing.len() - 1].fields.speed.unwrap();
    assert!(first < 2.0 && last > 5.0, "{first} -> {last} m/s");
}

#[test]
fn demo_shows_the_drive_the_translation_and_the_summary() {
    let run = Bin::run(&["demo", "--seconds", "2"], None);
    assert_eq!(run.code(), 0, "{run:?}");
    let out = &run.stdout;
    println!("{out}");
    for part in [
        "forza-relay demo",
        "fh6-tool on 127.0.0.1:",
        "fh5-tool on 127.0.0.1:",
        "Running for 2.0s",
        "speed",
        "Stopped after 2.",
        "forza-relay ran for",
    ] {
        assert!(out.contains(part), "{part:?} not in:\n{out}");
    }
    // One line every half second: at 0.5, 1.0, 1.5 and perhaps 2.0 s (that one
    // races the end; on a machine stalled near the end, 1.5 s may be missed too).
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" km/h ")).collect();
    assert!((2..=4).contains(&lines.len()), "{lines:#?}");
    let mut received = 0;
    for line in &lines {
        assert!(line.contains("CarClass R(6) -> S2(5)"), "{line}");
        // The last column before the counts: the drive's first lap is lap 1, as
        // `watch` shows it too (issue 13; tests/it/watch.rs).
        let lap = line
            .split('|')
            .next()
            .and_then(|car| car.split_whitespace().last());
        assert_eq!(lap, Some("1"), "{line}");
        let counts: Vec<u64> = line
            .split('|')
            .nth(1)
            .expect("a counts column")
            .split_whitespace()
            .map(|n| n.parse().expect("a count"))
            .collect();
        assert_eq!(counts.len(), 2, "{line}");
        assert!(counts[0] > received, "{line}: counts rise");
        received = counts[0];
    }
    // The car is moving by the last line.
    let kmh: f64 = lines[lines.len() - 1]
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("a speed");
    assert!(kmh > 20.0, "{}", lines[lines.len() - 1]);
    // The relay's report: both destinations sent what the receivers counted.
    let sent = |name: &str, output: &str| -> u64 {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(name) && l.contains(&format!("{output}: sent ")))
            .unwrap_or_else(|| panic!("no report line for {name}:\n{out}"));
        line.rsplit("sent ")
            .next()
            .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {line:?}"))
    };
    let (same, fh5) = (sent("fh6-tool", "same"), sent("fh5-tool", "fh5"));
    println!("the relay sent {same} and {fh5}");
    // 60/s for 2 s, and the race-off frames at the end.
    assert!((96..=160).contains(&same), "{same}");
    assert_eq!(same, fh5);
    assert!(
        out.contains(&format!(
            "fh6-tool: received {same} packets, as sent. fh5-tool: received {fh5}, as fh5."
        )),
        "{out}"
    );
    assert!(out.contains("differed in: CarClass ("), "{out}");
}

#[test]
fn bad_options_are_named_with_their_values_and_exit_2() {
    let cases: [(&[&str], &str); 7] = [
        (
            &["simulate", "--to", "127.0.0.1:5400", "--rate", "0"],
            "--rate 0: must be from 1 to 1000 packets per second",
        ),
        (
            &["simulate", "--to", "127.0.0.1:5400", "--rate", "5000"],
            "--rate 5000: must be from 1 to 1000",
        ),
        (
            &["simulate", "--to", "127.0.0.1:5400", "--format", "fh7"],
            "--format \"fh7\": not a packet format (did you mean \"fm7\", \"fh4\", \"fh5\" or \
             \"fh6\"?) (valid: sled, fm7, fm2023, fh4, fh5, fh6)",
        ),
        (
            &["simulate", "--to", "localhost"],
            "--to \"localhost\": needs a port",
        ),
        (
            &["simulate", "--to", "127.0.0.1:5400", "--duration", "-1"],
            "--duration -1: must be a number of seconds above 0",
        ),
        (
            &["demo", "--seconds", "0"],
            "--seconds 0: must be a number of seconds above 0",
        ),
        (
            &["demo", "--seconds", "soon"],
            "invalid value 'soon' for '--seconds",
        ),
    ];
    for (args, message) in cases {
        let run = Bin::run(args, None);
        assert_eq!(run.code(), 2, "{args:?}: {run:?}");
        run.assert_stderr_has(&[message]);
    }
}
