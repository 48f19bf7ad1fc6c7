//! Proof that a session's records (issue 34: src/telemetry/session.rs, written
//! by src/output/records.rs) allocate nothing per frame once the session is
//! made and the caller's buffer has grown: a counting global allocator, armed
//! on this thread only, watches a simulated drive of three laps and its finish
//! (the blank frames until the race ends) go through a session, each record
//! written as JSON and as an influx line.

use std::sync::atomic::Ordering;
use std::time::{Duration, UNIX_EPOCH};

use forza_relay::output::records::{write_influx, write_json, Origin};
use forza_relay::simulate::Simulator;
use forza_relay::telemetry::session::{Record, Session};
use forza_relay::telemetry::{is_menu_frame, Telemetry};
use forza_relay::wire::{Format, Packet};

use crate::counting::{ALLOCATIONS, ARMED};

/// The frames of a drive of three laps, then 11 s of the finish's blank frames.
fn drive() -> Vec<Vec<u8>> {
    let mut sim = Simulator::new(Format::Fh6, 7);
    let dt = Duration::from_micros(16_667);
    let mut buf = [0u8; 1500];
    let mut frames = Vec::new();
    let mut session = Session::new();
    let mut laps = 0;
    while laps < 3 {
        let n = sim.frame(dt, &mut buf).expect("room for a packet");
        let t = Telemetry::from_bytes(&buf[..n], Format::Fh6).expect("an fh6 packet");
        laps += session
            .observe(&t, false)
            .iter()
            .filter(|r| matches!(r, Record::Lap(_)))
            .count();
        frames.push(buf[..n].to_vec());
    }
    sim.finish();
    for _ in 0..60 * 11 {
        let n = sim.frame(dt, &mut buf).expect("room for a packet");
        frames.push(buf[..n].to_vec());
    }
    frames
}

#[test]
fn a_sessions_records_allocate_nothing_per_frame() {
    let frames = drive();
    let t0 = UNIX_EPOCH + Duration::from_secs(1_796_619_600);
    let mut out = Vec::new();
    // Records and bytes written.
    let run = |session: &mut Session, out: &mut Vec<u8>| {
        let (mut records, mut bytes) = (0usize, 0usize);
        for (i, payload) in frames.iter().enumerate() {
            let packet = Packet::new_checked(&payload[..], Format::Fh6).expect("an fh6 packet");
            let t = Telemetry::decode(&packet);
            let origin = Origin {
                format: Format::Fh6,
                time: t0 + Duration::from_millis(i as u64 * 16),
            };
            for record in &session.observe(&t, is_menu_frame(&packet)) {
                write_json(record, origin, out);
                bytes += out.len();
                write_influx(record, origin, out);
                bytes += out.len();
                records += 1;
            }
        }
        (records, bytes)
    };
    // Warm-up: the buffer grows to the longest record.
    let warm = run(&mut Session::new(), &mut out);
    let mut session = Session::new();

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    ARMED.with(|a| a.set(true));
    let measured = run(&mut session, &mut out);
    ARMED.with(|a| a.set(false));
    let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;

    assert_eq!(
        allocations, 0,
        "{allocations} allocations for a session's records"
    );
    // The measured run did the work: race_start, three laps (a record and
    // an event each), race_end.
    assert_eq!(measured, warm);
    assert_eq!(measured.0, 1 + 3 * 2 + 1);
}
