//! Arbitrary bytes read as a capture: pcap, pcapng or a raw dump, as
//! `replay`, `watch --file` and `export --file` read a file.
//!
//! Besides "never panics" (src/capture promises it on any file's contents), it
//! checks what the commands rely on:
//! - every frame read is a datagram or counted as skipped, and an error ends the
//!   reading;
//! - a datagram's payload fits one IP packet, and a raw dump's is a Forza length;
//! - the scan agrees with the reader, lists at most 20 streams, and picks for any
//!   port what the reader yields to it;
//! - a replay's schedule of the picked datagrams never pauses longer than a long
//!   gap is played, and every error message can be printed.

#![no_main]

use std::io::Cursor;
use std::path::Path;
use std::time::{Duration, Instant};

use forza_relay::capture::replay::{Schedule, LONG_GAP, LONG_GAP_PLAYED};
use forza_relay::capture::{FileFormat, Reader, Streams, Writer, SHOWN_STREAMS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let name = Path::new("fuzz.cap");
    let mut reader = match Reader::new(Cursor::new(data), name) {
        Ok(reader) => reader,
        Err(e) => {
            let _ = e.to_string();
            assert!(
                Streams::read_bytes(data).is_err(),
                "open failed, but the scan did not"
            );
            return;
        }
    };
    let format = reader.format();
    let mut datagrams = 0u64;
    let mut ports = Vec::new();
    let mut ended = false;
    while let Some(d) = reader.next_datagram() {
        assert!(!ended, "a datagram after an error");
        match d {
            Ok(d) => {
                datagrams += 1;
                assert!(
                    d.payload.len() <= Writer::MAX_PAYLOAD_V6,
                    "{}",
                    d.payload.len()
                );
                if let FileFormat::RawDump { len, .. } = format {
                    assert_eq!(d.payload.len(), len);
                }
                ports.push(d.to.port());
            }
            Err(e) => {
                let _ = e.to_string();
                ended = true;
            }
        }
    }
    assert_eq!(
        reader.frames(),
        datagrams + reader.skipped().total(),
        "every frame is a datagram or skipped"
    );
    let _ = reader.damage().to_string();

    let Ok(streams) = Streams::read_bytes(data) else {
        return;
    };
    let listed: u64 = streams.streams.iter().map(|s| s.packets).sum();
    assert!(listed <= datagrams);
    let listing = streams.listing();
    assert!(listing.streams.len() <= SHOWN_STREAMS);
    let _ = listing.to_string();
    ports.sort_unstable();
    ports.dedup();
    for port in ports
        .iter()
        .copied()
        .map(Some)
        .chain([None, Some(0), Some(5400)])
    {
        let selection = match streams.select(port) {
            Ok(s) => s,
            Err(e) => {
                let _ = e.to_string();
                continue;
            }
        };
        let _ = selection.long_gaps_note();
        // The schedule of the picked datagrams, in file order, at speed 1.
        let start = Instant::now();
        let mut schedule = Schedule::new(start, 1.0, &selection);
        let mut previous = start;
        let mut reader = Reader::new(Cursor::new(data), name).expect("opened above");
        let mut picked = 0u64;
        while let Some(Ok(d)) = reader.next_datagram() {
            if !selection.matches(&d) {
                continue;
            }
            picked += 1;
            let due = schedule.due(0, selection.offset(d.time));
            let wait = due.saturating_duration_since(previous);
            assert!(
                wait <= LONG_GAP.max(LONG_GAP_PLAYED) + Duration::from_millis(1),
                "a wait of {wait:?}"
            );
            previous = previous.max(due);
        }
        assert_eq!(picked, selection.packets, "the scan and the reader agree");
        assert!(previous - start <= selection.played + Duration::from_millis(1));
    }
});
