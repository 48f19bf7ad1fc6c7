use super::*;
use crate::capture::ip::Skip;
use crate::capture::raw::dump;

fn interface(tsresol: u8, tsoffset: i64) -> Interface {
    Interface {
        link: Ok(LinkType::Raw),
        tsresol,
        tsoffset,
    }
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).expect("after 1970")
}

#[test]
fn pcapng_timestamps_follow_if_tsresol_and_if_tsoffset() {
    let ticks = 1_700_000_000_123_456;
    assert_eq!(
        since_epoch(interface(6, 0).time(ticks)),
        Duration::new(1_700_000_000, 123_456_000),
        "microseconds, the default"
    );
    assert_eq!(
        since_epoch(interface(9, 0).time(ticks)),
        Duration::new(1_700_000, 123_456),
        "nanoseconds"
    );
    assert_eq!(
        since_epoch(interface(12, 0).time(ticks)),
        Duration::new(1_700, 123),
        "picoseconds: below a nanosecond is dropped"
    );
    assert_eq!(
        since_epoch(interface(0x80 | 10, 0).time(3 * 1024 + 512)),
        Duration::new(3, 500_000_000),
        "binary: 2^-10 s per tick"
    );
    assert_eq!(
        since_epoch(interface(3, 100).time(2_500)),
        Duration::new(102, 500_000_000),
        "milliseconds plus an offset of 100 s"
    );
    assert_eq!(
        since_epoch(interface(3, -2).time(2_500)),
        Duration::new(0, 500_000_000),
        "an offset may be negative"
    );
    assert_eq!(
        since_epoch(interface(255, 0).time(u64::MAX)),
        Duration::ZERO,
        "2^-127 s per tick: nothing, and no overflow"
    );
}

#[test]
fn a_raw_dump_is_read_a_frame_apart_without_addresses() {
    let bytes = dump(331, 3);
    let mut r = Reader::new(std::io::Cursor::new(&bytes), Path::new("dump.bin")).unwrap();
    assert_eq!(
        r.format(),
        FileFormat::RawDump {
            len: 331,
            datagrams: 3
        }
    );
    assert_eq!(
        r.format().to_string(),
        "a raw dump of 3 datagrams of 331 bytes (fm2023)"
    );
    let got: Vec<Datagram> = r.by_ref().map(Result::unwrap).collect();
    assert_eq!(got.len(), 3);
    for (i, d) in got.iter().enumerate() {
        assert_eq!(d.payload, &bytes[i * 331..(i + 1) * 331]);
        assert_eq!((d.from, d.to), (RAW_DUMP_ADDR, RAW_DUMP_ADDR));
        let nanos = i as u64 * 1_000_000_000 / 60;
        assert_eq!(
            d.time,
            UNIX_EPOCH + Duration::from_nanos(nanos),
            "{i} / 60 s"
        );
    }
    assert_eq!((r.frames(), r.skipped().total()), (3, 0));
}

#[test]
fn skipped_counts_print_only_what_happened() {
    let mut s = Skipped::default();
    assert_eq!(s.to_string(), "none");
    for skip in [Skip::NotUdp, Skip::NotUdp, Skip::Fragment] {
        s.add(skip);
    }
    s.oversized = 1;
    assert_eq!(
        s.to_string(),
        "2 not UDP, 1 IP fragments, 1 records over 256 KiB"
    );
    assert_eq!(s.total(), 4);
    assert_eq!(Damage::default().to_string(), "none");
    assert!(!Damage::default().any());
}
