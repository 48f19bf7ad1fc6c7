//! The core's unit tests: datagrams through [`Fanout`] into a sink that keeps
//! what it is given, checked field by field.

use std::time::Duration;

use super::*;
use crate::counters::SendErrorKind;
use crate::fanout::testing::*;
use crate::fanout::Fate;
use crate::report::CountersOf as _;
use crate::wire::{Puddle, Wheels, AGREEING_PACKETS};

/// Issue 15: on a synthetic clock, a frame older than `max_age` when it
/// would go is dropped and counted stale, on arrival (after a stall) and
/// as a rate-limited pending frame; a destination without the limit gets
/// every frame, and every destination's counters add up.
#[test]
fn frames_older_than_max_age_are_not_sent_but_counted_stale() {
    let r = routes(
        &(destination_toml("rig", 9000, "same", "max_age = \"50ms\"")
            + &destination_toml("plain", 9001, "same", "")
            + &destination_toml(
                "slow-rig",
                9002,
                "same",
                "max_age = \"50ms\"\nmax_rate = 10",
            )),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let handle = |core: &mut Fanout, sink: &mut Recorder, ts: u32, received: u64, now: u64| {
        let packet = fh6(ts, true);
        let arrival = Arrival::new(&packet, SENDER, t0 + ms(received), test_wall());
        core.handle(arrival, t0 + ms(now), sink);
    };
    // Live: every destination gets it.
    handle(&mut core, &mut sink, 1, 0, 0);
    // Read 51 ms after it arrived (a stall): too old for the limit.
    handle(&mut core, &mut sink, 2, 0, 51);
    // Exactly 50 ms old: still fresh; slow-rig sends it within its
    // limiter's tolerance.
    handle(&mut core, &mut sink, 3, 10, 60);
    // Too early for slow-rig: 4 waits, and 5 replaces it, to go at 230 ms.
    handle(&mut core, &mut sink, 4, 70, 70);
    handle(&mut core, &mut sink, 5, 80, 80);
    assert_eq!(core.next_deadline(), Some(t0 + ms(230)));
    // 150 ms old by then: dropped, and the limiter's slot stays free.
    core.due(t0 + ms(230), &mut sink);
    assert_eq!(core.next_deadline(), None, "nothing waits");
    // A stall: ten frames 2.7 ms apart, read at once 60 ms after the
    // first; only those at most 50 ms old go to the rigs, in order.
    for i in 0..10u64 {
        let received = 300 + i * 27 / 10;
        handle(&mut core, &mut sink, 10 + i as u32, received, 360);
    }
    let c = core.counters();
    assert_balanced(&c);
    assert_eq!(c.input.received, 15);
    assert_eq!(
        timestamps_to(&sink, &core, "plain"),
        [1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    );
    // Frames 10..=13 arrived at 300, 302, 305, 308 ms: over 50 ms old at 360.
    assert_eq!(
        timestamps_to(&sink, &core, "rig"),
        [1, 3, 4, 5, 14, 15, 16, 17, 18, 19]
    );
    // 14 takes the free slot at once and 15 the tolerance; 16..=19 wait,
    // each replacing the one before.
    assert_eq!(timestamps_to(&sink, &core, "slow-rig"), [1, 3, 14, 15]);
    for (name, sent, stale, rate_limited, held) in [
        ("plain", 15, 0, 0, 0),
        // 2, 10..=13.
        ("rig", 10, 5, 0, 0),
        // 2, 10..=13 on arrival, 5 when it would go; 4, 16..=18 replaced;
        // 19 waits.
        ("slow-rig", 4, 6, 4, 1),
    ] {
        let s = stats(&c, name);
        assert_eq!(
            (
                s.sent,
                s.dropped(DropReason::Stale),
                s.dropped(DropReason::RateLimited),
                s.held
            ),
            (sent, stale, rate_limited, held),
            "{name}: {s:?}"
        );
        let drops: u64 = DropReason::ALL.iter().map(|&r| s.dropped(r)).sum();
        assert_eq!(
            s.sent + drops + s.held,
            c.input.received,
            "{name}: sent + drops + held = received"
        );
    }
}

/// A shell that reports each send as taking `took` from its receive time.
struct Timed {
    took: Duration,
}

impl Sink for Timed {
    fn deliver(
        &mut self,
        _: DestinationId,
        _: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Fate {
        report.record_latency(received, received + self.took);
        Fate::Sent
    }
}

#[test]
fn latency_reported_by_the_shell_is_kept_per_destination_and_interval() {
    let r = routes(&destination_toml("rig", 9000, "same", ""));
    let mut core = Fanout::new(&r);
    let t0 = Instant::now();
    let packet = fh6(1, true);
    for us in [20, 30, 40] {
        let mut sink = Timed {
            took: Duration::from_micros(us),
        };
        core.handle(
            Arrival::new(&packet, SENDER, t0, test_wall()),
            t0,
            &mut sink,
        );
    }
    let l = core.counters().destinations[0].latency;
    assert_eq!(
        (l.count, l.p50, l.max),
        (3, Duration::from_micros(30), Duration::from_micros(40))
    );
    core.new_interval();
    assert_eq!(core.counters().destinations[0].latency.count, 0);
    let run = core
        .counters_over(LatencyWindow::Run, Instant::now())
        .destinations[0]
        .latency;
    assert_eq!(run.count, 3, "the whole run keeps them");
}

#[test]
fn translates_once_per_output_format_and_sends_same_as_it_came() {
    let r = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned()
            + &destination_toml("raw", 9001, "same", "")
            + &destination_toml("fh5-a", 9002, "fh5", "")
            + &destination_toml("fh5-b", 9003, "fh5", "")
            + &destination_toml("sled", 9004, "sled", "")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    let packet = fh6(7, true);
    let verdict = core.handle_at(&packet, SENDER, t0, &mut sink);
    assert_eq!(
        verdict,
        Verdict::Admitted(Some(Reading {
            format: Format::Fh6,
            certain: true
        }))
    );

    assert_eq!(sink.to(&core, "raw"), std::slice::from_ref(&packet));
    let a = sink.to(&core, "fh5-a");
    let b = sink.to(&core, "fh5-b");
    assert_eq!(a, b);
    let p = Packet::new_checked(&a[0][..], Format::Fh5).unwrap();
    assert_eq!(p.timestamp_ms(), 7, "TimestampMS");
    assert_eq!(p.car_class(), 5, "CarClass R becomes S2");
    assert_eq!(
        p.wheel_in_puddle().into_array(),
        [
            Puddle::Depth(1.0),
            Puddle::Depth(0.0),
            Puddle::Depth(0.0),
            Puddle::Depth(0.0)
        ],
        "WheelInPuddle"
    );
    assert_eq!(p.speed(), Some(41.5), "Speed");
    let s = sink.to(&core, "sled");
    assert_eq!(s[0].len(), 232);
    let p = Packet::new_checked(&s[0][..], Format::Sled).unwrap();
    assert_eq!(p.timestamp_ms(), 7, "TimestampMS");
    // One translation per format: both fh5 destinations were handed the one
    // fh5 buffer, and `same` the datagram itself.
    assert_eq!(sink.at[0], packet.as_ptr(), "same: the input as it came");
    assert_eq!(
        sink.at[1], sink.at[2],
        "fh5-a and fh5-b share one translation"
    );
    assert_eq!(sink.at[1], core.outputs[Format::Fh5.index()].buf.as_ptr());
    assert_ne!(sink.at[3], sink.at[1], "sled has its own");
    assert_eq!(core.outputs[Format::Fh6.index()].packet, 0, "same: no copy");

    let c = core.counters();
    assert_eq!(c.input.received, 1);
    assert_eq!(c.input.last_format, Some(Format::Fh6));
    assert_eq!(stats(&c, "raw").received, 1);
    assert_eq!(stats(&c, "raw").sent, 1);
    assert_balanced(&c);
}

#[test]
fn race_filter_and_untranslatable_datagrams_are_counted_per_destination() {
    let r = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned()
            + &destination_toml("race", 9001, "same", "only_race_on = true")
            + &destination_toml("fm7", 9002, "fm7", "")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    for (ts, racing) in [(1, false), (2, true), (3, false), (4, false)] {
        core.handle_at(&fh6(ts, racing), SENDER, t0, &mut sink);
    }
    let verdict = core.handle_at(b"not a packet", SENDER, t0, &mut sink);
    assert_eq!(verdict, Verdict::Admitted(None), "malformed, still relayed");

    let timestamps: Vec<u32> = sink
        .to(&core, "race")
        .iter()
        .filter(|b| b.len() == 324)
        .map(|b| {
            Packet::new_checked(&b[..], Format::Fh6)
                .unwrap()
                .timestamp_ms()
        })
        .collect();
    assert_eq!(timestamps, [2, 3], "racing, and the first frame after");
    let c = core.counters();
    assert_eq!(c.input.received, 5);
    assert_eq!(c.input.malformed, 1);
    assert_eq!(
        core.last_malformed(),
        Some((12, SENDER)),
        "length and sender of the malformed datagram"
    );
    let race = stats(&c, "race");
    assert_eq!(
        race.sent, 3,
        "2, 3 and the malformed datagram (passed as it is)"
    );
    assert_eq!(race.dropped(DropReason::NotRacing), 2);
    let fm7 = stats(&c, "fm7");
    assert_eq!(fm7.sent, 4);
    assert_eq!(fm7.dropped(DropReason::Untranslatable), 1);
    assert_balanced(&c);
}

/// Issue 30: the first frame and one more within the limiter's tolerance go
/// at once; a frame that comes too early waits, replaced by any newer one,
/// and goes one and a half intervals after it came; a frame a whole interval
/// after the last sent goes at once.
#[test]
fn rate_limit_keeps_the_newest_frame_pending_until_its_slot() {
    let r = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned()
            + &destination_toml("slow", 9001, "same", "max_rate = 10")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    for (ts, at) in [(1, 0), (2, 10), (3, 20), (4, 30)] {
        core.handle_at(&fh6(ts, true), SENDER, t0 + ms(at), &mut sink);
    }
    assert_eq!(sink.got.len(), 2, "the first and one more went at once");
    assert_eq!(core.next_deadline(), Some(t0 + ms(180)));
    core.due(t0 + ms(179), &mut sink);
    assert_eq!(sink.got.len(), 2, "not before its time");
    core.due(t0 + ms(180), &mut sink);
    assert_eq!(sink.got.len(), 3);
    let last = Packet::new_checked(&sink.got[2].1[..], Format::Fh6).unwrap();
    assert_eq!(last.timestamp_ms(), 4, "the newest waiting frame goes");
    assert_eq!(core.next_deadline(), None);

    // A whole interval after the last sent: at once.
    core.handle_at(&fh6(5, true), SENDER, t0 + ms(280), &mut sink);
    assert_eq!(sink.got.len(), 4);
    core.handle_at(&fh6(6, true), SENDER, t0 + ms(290), &mut sink);
    let slow = stats(&core.counters(), "slow");
    assert_eq!(slow.sent, 4);
    assert_eq!(slow.dropped(DropReason::RateLimited), 1, "frame 3");
    assert_eq!(slow.held, 1, "frame 6 waits");
    assert!(slow.is_balanced(), "{slow:?}");
    core.finish();
    let slow = stats(&core.counters(), "slow");
    assert_eq!(slow.dropped(DropReason::RateLimited), 2);
    assert_eq!(slow.held, 0);
    assert!(slow.is_balanced(), "{slow:?}");
}

#[test]
fn disallowed_senders_are_dropped_before_any_destination() {
    let r = routes(
        &("[listen]\nformat = \"fh6\"\nallow = [\"10.0.0.0/8\"]\n".to_owned()
            + &destination_toml("raw", 9001, "same", "")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    assert_eq!(
        core.handle_at(&fh6(1, true), SENDER, t0, &mut sink),
        Verdict::Disallowed
    );
    assert!(!Verdict::Disallowed.is_admitted());
    let lan: SocketAddr = "10.1.2.3:5000".parse().unwrap();
    assert!(core
        .handle_at(&fh6(2, true), lan, t0, &mut sink)
        .is_admitted());
    // A dual-stack socket shows an IPv4 sender as ::ffff:a.b.c.d.
    let mapped: SocketAddr = "[::ffff:10.1.2.3]:5000".parse().unwrap();
    assert!(core
        .handle_at(&fh6(3, true), mapped, t0, &mut sink)
        .is_admitted());
    assert_eq!(sink.got.len(), 2);
    let c = core.counters();
    assert_eq!(c.input.disallowed, 1);
    assert_eq!(core.last_disallowed(), Some(SENDER));
    assert_eq!(stats(&c, "raw").received, 2, "only what was admitted");
    assert_balanced(&c);
}

#[test]
fn frames_the_shell_holds_are_counted_when_it_sends_or_drops_them() {
    let r = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned()
            + &destination_toml("stuck", 9001, "same", "")
            + &destination_toml("moved", 9002, "same", "")
            + &destination_toml("gone", 9003, "same", "")
            + &destination_toml("stays", 9004, "same", "")),
    );
    let mut core = Fanout::new(&r);
    let t0 = Instant::now();
    for ts in 1..=5 {
        core.handle_at(&fh6(ts, true), SENDER, t0, &mut queue_everything);
    }
    let stuck = id_of(&core, "stuck");
    assert_eq!(core.queued(stuck), 5);
    assert_eq!(stats(&core.counters(), "stuck").held, 5);
    // The socket became writable: two went, one failed.
    let mut report = core.report(stuck).expect("a destination");
    report.held(Fate::Sent);
    report.held(Fate::Sent);
    report.send_error(SendErrorKind::Refused, Instant::now());
    report.held(Fate::Dropped(DropReason::SendError));
    report.held(Fate::Queued);
    let s = stats(&core.counters(), "stuck");
    assert_eq!(
        (s.received, s.sent, s.dropped_total(), s.held),
        (5, 2, 1, 2)
    );
    assert_eq!(s.send_errors.get(SendErrorKind::Refused), 1);

    // A reload readdresses one and removes another: what the shell held for
    // them is dropped with their sockets, and counted before `gone`'s final
    // counters come back.
    let after = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned()
            + &destination_toml("stuck", 9001, "same", "")
            + &destination_toml("moved", 9012, "same", "")
            + &destination_toml("stays", 9004, "same", "")),
    );
    let changes = core.apply(&after);
    let gone = &changes.removed[0];
    assert_eq!(gone.destination.name, "gone");
    assert_eq!(gone.stats.dropped(DropReason::Backlog), 5);
    assert_eq!(gone.stats.held, 0);
    assert!(gone.stats.is_balanced(), "{:?}", gone.stats);
    let c = core.counters();
    let moved = stats(&c, "moved");
    assert_eq!((moved.dropped(DropReason::Backlog), moved.held), (5, 0));
    assert_eq!(stats(&c, "stays").held, 5, "its socket and backlog stay");
    assert_balanced(&c);

    // The relay stops: what is still held is dropped.
    core.finish();
    let c = core.counters();
    for d in &c.destinations {
        assert_eq!(d.stats.held, 0, "{}", d.name);
    }
    assert_eq!(stats(&c, "stuck").dropped(DropReason::Backlog), 2);
    assert_eq!(stats(&c, "stays").dropped(DropReason::Backlog), 5);
    assert_balanced(&c);
}

fn json(bytes: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::from_slice(bytes) {
        Ok(serde_json::Value::Object(o)) => o,
        other => panic!("not a JSON object: {other:?}"),
    }
}

/// Issue 25: a frame's text is made once for every destination that
/// shares its encoding and fields, and each gets it field by field.
#[test]
fn text_outputs_share_one_encoding_per_encoding_and_fields() {
    let r = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned()
            + &destination_toml("json-a", 9001, "json", "")
            + &destination_toml("json-b", 9002, "json", "")
            + &destination_toml("narrow", 9003, "json", "fields = [\"speed\", \"Gear\"]")
            + &destination_toml("narrow-too", 9004, "JSON", "fields = [\"Speed\", \"gear\"]")
            + &destination_toml("influx", 9005, "influx", "")
            + &destination_toml("fh5", 9006, "fh5", "")),
    );
    let mut core = Fanout::new(&r);
    assert_eq!(core.texts.len(), 3, "json, json of two fields, influx");
    let mut sink = Recorder::default();
    core.handle_at(&fh6(7, true), SENDER, Instant::now(), &mut sink);
    let (a, b) = (sink.to(&core, "json-a"), sink.to(&core, "json-b"));
    assert_eq!(a, b);
    assert_eq!(sink.at[0], sink.at[1], "json-a and json-b share one text");
    assert_eq!(sink.at[2], sink.at[3], "so do the two narrow ones");
    assert_ne!(sink.at[0], sink.at[2]);
    let o = json(&a[0]);
    assert_eq!(o["TimestampMS"], 7);
    assert_eq!(o["IsRaceOn"], 1);
    assert_eq!(o["Speed"], 41.5);
    assert_eq!(o["speed_kmh"].as_f64().unwrap() as f32, 41.5 * 3.6);
    assert_eq!(o["format"], "fh6");
    assert_eq!(
        o["recv_time"], "2023-11-14T22:13:20.000000Z",
        "the arrival's wall time"
    );
    assert_eq!(o["recv_s"], 0.0);
    let narrow = String::from_utf8(sink.to(&core, "narrow")[0].clone()).unwrap();
    assert_eq!(narrow, r#"{"Speed":41.5,"Gear":0}"#);
    let line = String::from_utf8(sink.to(&core, "influx")[0].clone()).unwrap();
    let p = crate::output::influx::parse::line(&line);
    assert_eq!(p.measurement, "forza");
    assert_eq!(p.tags["game"], "fh6");
    assert_eq!(p.tags["class"], "R");
    assert_eq!(p.timestamp, Some(1_700_000_000_000_000_000));
    assert_eq!(
        p.fields["TimestampMS"],
        crate::output::influx::parse::Value::Integer(7)
    );
    let fh5 = sink.to(&core, "fh5");
    assert_eq!(
        fh5[0].len(),
        Format::Fh5.len(),
        "the binary outputs as before"
    );
    assert_balanced(&core.counters());
}

/// A text output that waits for its rate slot keeps the datagram and
/// encodes only the frame it sends, when it sends it.
#[test]
fn a_rate_limited_text_output_encodes_only_what_it_sends() {
    let r = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned()
            + &destination_toml(
                "slow",
                9001,
                "json",
                "max_rate = 10\nfields = [\"TimestampMS\"]",
            )),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    for (ts, at) in [(1, 0), (2, 10), (3, 20), (4, 30)] {
        core.handle_at(&fh6(ts, true), SENDER, t0 + ms(at), &mut sink);
    }
    assert_eq!(sink.got.len(), 2, "the first and one more went at once");
    assert_eq!(
        core.texts[0].built_for, 2,
        "frames 3 and 4 were not encoded"
    );
    core.due(t0 + ms(180), &mut sink);
    let got: Vec<String> = sink
        .to(&core, "slow")
        .into_iter()
        .map(|b| String::from_utf8(b).unwrap())
        .collect();
    assert_eq!(
        got,
        [
            r#"{"TimestampMS":1}"#,
            r#"{"TimestampMS":2}"#,
            r#"{"TimestampMS":4}"#
        ]
    );
    assert_eq!(core.texts[0].built_for, 4);
    let s = stats(&core.counters(), "slow");
    assert_eq!(
        (s.sent, s.dropped(DropReason::RateLimited), s.held),
        (3, 1, 0)
    );
}

/// A datagram that is no packet of the input, and an influx line with no
/// value to write (a sled packet has no Speed), are untranslatable.
#[test]
fn frames_a_text_output_cannot_write_are_untranslatable() {
    let r = routes(
        &("[listen]\nformat = \"auto\"\n".to_owned()
            + &destination_toml("json", 9001, "json", "")
            + &destination_toml("speed", 9002, "influx", "fields = [\"Speed\"]")
            + &destination_toml(
                "slow-speed",
                9003,
                "influx",
                "fields = [\"Speed\"]\nmax_rate = 1",
            )),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    // Racing, so not a menu frame (which is not racing: see below).
    let mut sled = [0u8; 232];
    sled[0] = 1;
    core.handle_at(b"not a packet", SENDER, t0, &mut sink);
    core.handle_at(&sled, SENDER, t0, &mut sink);
    // Waits for its slot, then can't be written.
    core.handle_at(&sled, SENDER, t0 + Duration::from_millis(1), &mut sink);
    core.due(t0 + Duration::from_secs(1), &mut sink);
    let c = core.counters();
    let json = stats(&c, "json");
    assert_eq!(
        (json.sent, json.dropped(DropReason::Untranslatable)),
        (2, 1)
    );
    let speed = stats(&c, "speed");
    assert_eq!(
        (speed.sent, speed.dropped(DropReason::Untranslatable)),
        (0, 3)
    );
    let slow = stats(&c, "slow-speed");
    assert_eq!(
        (slow.sent, slow.dropped(DropReason::Untranslatable)),
        (0, 3)
    );
    assert_eq!(core.next_deadline(), None, "nothing waits");
    assert_balanced(&c);
}

/// Issue 30: a menu frame (the game in a menu: IsRaceOn 0, all else 0) goes
/// to a json destination and is counted not racing by an influx one, at
/// once or at its rate slot, with or without `only_race_on`; the race's
/// frames go to both.
#[test]
fn an_influx_destination_counts_a_menu_frame_not_racing_and_writes_no_line() {
    let r = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned()
            + &destination_toml("json", 9001, "json", "only_race_on = true")
            + &destination_toml("influx", 9002, "influx", "")
            + &destination_toml("race-influx", 9003, "influx", "only_race_on = true")
            + &destination_toml("slow-influx", 9004, "influx", "max_rate = 1")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let menu = |ts: u32| {
        let mut buf = vec![0u8; Format::Fh6.len()];
        Packet::new_checked(&mut buf[..], Format::Fh6)
            .unwrap()
            .set_timestamp_ms(ts);
        buf
    };
    core.handle_at(&menu(1), SENDER, t0, &mut sink);
    core.handle_at(&fh6(2, true), SENDER, t0 + ms(1), &mut sink);
    core.handle_at(&fh6(5, true), SENDER, t0 + ms(1) + ms(1) / 2, &mut sink);
    // The race's end: only_race_on passes this first menu frame; slow-influx,
    // its limiter's tolerance used by 2 and 5, holds it for its slot.
    core.handle_at(&menu(3), SENDER, t0 + ms(2), &mut sink);
    core.handle_at(&menu(4), SENDER, t0 + ms(3), &mut sink);
    core.due(t0 + ms(2_000), &mut sink);
    let c = core.counters();
    assert_balanced(&c);
    let json_stamps: Vec<serde_json::Value> = sink
        .to(&core, "json")
        .iter()
        .map(|b| json(b)["TimestampMS"].clone())
        .collect();
    assert_eq!(json_stamps, [2, 5, 3]);
    for name in ["influx", "race-influx", "slow-influx"] {
        let stamps: Vec<_> = sink
            .to(&core, name)
            .iter()
            .map(|line| {
                let p = crate::output::influx::parse::line(std::str::from_utf8(line).unwrap());
                p.fields["TimestampMS"].clone()
            })
            .collect();
        let racing = [2, 5].map(crate::output::influx::parse::Value::Integer);
        assert_eq!(stamps, racing, "{name}");
    }
    for (name, sent, not_racing, rate_limited) in [
        ("json", 3, 2, 0),
        ("influx", 2, 3, 0),
        ("race-influx", 2, 3, 0),
        // 2 and 5 go at once; 3 waits and is replaced by 4, a menu frame at
        // its slot.
        ("slow-influx", 2, 2, 1),
    ] {
        let s = stats(&c, name);
        assert_eq!(
            (
                s.sent,
                s.dropped(DropReason::NotRacing),
                s.dropped(DropReason::RateLimited)
            ),
            (sent, not_racing, rate_limited),
            "{name}"
        );
        assert_eq!(s.dropped(DropReason::Untranslatable), 0, "{name}");
    }
}

/// Encoders are made at commit and kept while some destination writes
/// them: `recv_s` goes on counting across a reload.
#[test]
fn a_text_slot_is_kept_across_a_commit_while_it_is_written() {
    let one = destination_toml("json", 9001, "json", "fields = [\"recv_s\"]");
    let r = routes(&one);
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    let packet = fh6(1, true);
    let wall = test_wall();
    core.handle(Arrival::new(&packet, SENDER, t0, wall), t0, &mut sink);
    let buf = core.texts[0].buf.as_ptr();
    let more = one.clone() + &destination_toml("other", 9002, "influx", "");
    core.apply(&routes(&more));
    assert_eq!(core.texts.len(), 2);
    assert_eq!(core.texts[0].buf.as_ptr(), buf, "the same slot");
    let later = wall + Duration::from_millis(1_500);
    core.handle(Arrival::new(&packet, SENDER, t0, later), t0, &mut sink);
    assert_eq!(
        sink.to(&core, "json")
            .last()
            .map(|b| String::from_utf8(b.clone()).unwrap()),
        Some(r#"{"recv_s":1.5}"#.to_owned()),
        "counted from the first frame, before the reload"
    );
    core.apply(&routes(&destination_toml(
        "json",
        9001,
        "json",
        "fields = [\"Speed\"]",
    )));
    assert_eq!(
        core.texts.len(),
        1,
        "one slot per (encoding, fields) written"
    );
    assert_eq!(
        core.texts[0].selection,
        crate::output::Selection::names(["Speed"]).unwrap()
    );
}

#[test]
fn auto_input_does_not_remap_horizon_on_a_guess() {
    let r = routes(
        &("[listen]\nformat = \"auto\"\n".to_owned() + &destination_toml("fh5", 9001, "fh5", "")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let mut dry = fh6(1, true);
    Packet::new_checked(&mut dry[..], Format::Fh6)
        .unwrap()
        .set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(0); 4]));
    let verdict = core.handle_at(&dry, SENDER, Instant::now(), &mut sink);
    assert_eq!(
        verdict,
        Verdict::Admitted(Some(Reading {
            format: Format::Fh6,
            certain: false
        }))
    );
    assert_eq!(sink.got[0].1, dry, "a guess passes the bytes as they came");
    assert!(core.counters().input.format_guessed);
}

#[test]
fn issue12_one_spoofed_depth_does_not_change_how_fh6_is_translated() {
    let r = routes(
        &("[listen]\nformat = \"auto\"\n".to_owned() + &destination_toml("fh5", 9001, "fh5", "")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    // Half a second of wet fh6 telemetry: the stream shows its format.
    for ts in 0..AGREEING_PACKETS {
        core.handle_at(&fh6(ts, true), SENDER, t0, &mut sink);
    }
    let fh6_for_sure = Reading::sure(Format::Fh6);
    assert_eq!(core.horizon(), Some(fh6_for_sure));
    let mut spoofed = fh6(1_000, true);
    Packet::new_checked(&mut spoofed[..], Format::Fh5)
        .unwrap()
        .set_wheel_in_puddle(Wheels::from_array([
            Puddle::Depth(0.5),
            Puddle::Depth(0.0),
            Puddle::Depth(0.0),
            Puddle::Depth(0.0),
        ]));
    let attacker: SocketAddr = "127.0.0.1:6666".parse().unwrap();
    // Issue 23: a datagram's own bytes decide how it is read.
    assert_eq!(
        core.handle_at(&spoofed, attacker, t0, &mut sink),
        Verdict::Admitted(Some(Reading::sure(Format::Fh5))),
        "one datagram is read as its puddles say"
    );
    sink.got.clear();
    let mut dry = fh6(1_001, true);
    Packet::new_checked(&mut dry[..], Format::Fh6)
        .unwrap()
        .set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(0); 4]));
    core.handle_at(&dry, SENDER, t0, &mut sink);
    let p = Packet::new_checked(&sink.got[0].1[..], Format::Fh5).unwrap();
    assert_eq!(p.timestamp_ms(), 1_001, "TimestampMS");
    assert_eq!(p.car_class(), 5, "CarClass R still becomes S2");
    assert_eq!(core.horizon(), Some(fh6_for_sure));
}

/// A wet fh6 packet, as [`fh6`] makes it, with puddle flags `flags`.
fn wet_fh6(timestamp_ms: u32, flags: [i32; 4]) -> Vec<u8> {
    let mut packet = fh6(timestamp_ms, true);
    Packet::new_checked(&mut packet[..], Format::Fh6)
        .unwrap()
        .set_wheel_in_puddle(Wheels::from_array(flags.map(Puddle::Flag)));
    packet
}

/// Issue 23: under `auto`, a wet FH6 frame reaches an fh5 tool translated
/// from the first one (its own puddle flags say fh6), not passed as it
/// came while the stream's answer is still a guess.
#[test]
fn issue23_wet_fh6_frames_reach_fh5_translated_from_the_first() {
    let r = routes(
        &("[listen]\nformat = \"auto\"\n".to_owned() + &destination_toml("fh5", 9001, "fh5", "")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    for ts in 0..60 {
        let verdict = core.handle_at(&wet_fh6(ts, [1, 1, 0, 0]), SENDER, t0, &mut sink);
        assert_eq!(
            verdict,
            Verdict::Admitted(Some(Reading::sure(Format::Fh6))),
            "frame {ts}"
        );
    }
    let got = sink.to(&core, "fh5");
    assert_eq!(got.len(), 60);
    for (ts, bytes) in got.iter().enumerate() {
        let p = Packet::new_checked(&bytes[..], Format::Fh5).unwrap();
        assert_eq!(p.timestamp_ms(), ts as u32, "TimestampMS");
        assert_eq!(p.car_class(), 5, "frame {ts}: CarClass R (6) is FH5's S2");
        assert_eq!(
            p.wheel_in_puddle().into_array(),
            [
                Puddle::Depth(1.0),
                Puddle::Depth(1.0),
                Puddle::Depth(0.0),
                Puddle::Depth(0.0)
            ],
            "frame {ts}: WheelInPuddle as FH5 types it"
        );
        assert_eq!(p.speed(), Some(41.5), "Speed");
    }
    assert_eq!(core.horizon(), Some(Reading::sure(Format::Fh6)));
}

/// Issue 23: another sender's FH5-looking datagrams interleaved with the
/// game's stream are read by their own bytes and never move the stream's
/// answer; the senders are counted, the game's followed.
#[test]
fn issue23_another_senders_datagrams_never_move_the_games_answer() {
    let r = routes(
        &("[listen]\nformat = \"auto\"\n".to_owned() + &destination_toml("fh5", 9001, "fh5", "")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let other: SocketAddr = "127.0.0.1:6666".parse().unwrap();
    let mut fh5_looking = fh6(0, true);
    Packet::new_checked(&mut fh5_looking[..], Format::Fh5)
        .unwrap()
        .set_wheel_in_puddle(Wheels::from_array([Puddle::Depth(0.25); 4]));
    // The game: confirmed fh6, then dry frames of class R.
    for ts in 0..AGREEING_PACKETS {
        core.handle_at(
            &wet_fh6(ts, [1, 0, 0, 0]),
            SENDER,
            t0 + ms(16 * u64::from(ts)),
            &mut sink,
        );
    }
    sink.got.clear();
    let mut at = t0 + ms(500);
    for ts in 100..140u32 {
        at += ms(8);
        assert_eq!(
            core.handle_at(&fh5_looking, other, at, &mut sink),
            Verdict::Admitted(Some(Reading::sure(Format::Fh5)))
        );
        at += ms(8);
        let dry = wet_fh6(ts, [0; 4]);
        assert_eq!(
            core.handle_at(&dry, SENDER, at, &mut sink),
            Verdict::Admitted(Some(Reading::sure(Format::Fh6))),
            "the game's dry frame {ts} is still read as fh6"
        );
    }
    let got = sink.to(&core, "fh5");
    assert_eq!(got.len(), 80);
    for (i, bytes) in got.iter().enumerate() {
        let p = Packet::new_checked(&bytes[..], Format::Fh5).unwrap();
        if i % 2 == 0 {
            assert_eq!(bytes, &fh5_looking, "fh5 to fh5: as it came");
        } else {
            assert_eq!(p.car_class(), 5, "game frame {i}: R becomes S2");
        }
    }
    assert_eq!(core.horizon(), Some(Reading::sure(Format::Fh6)));
    let senders = core.counters().input.senders;
    let list: Vec<(SocketAddr, u64)> = senders
        .list()
        .iter()
        .map(|s| (s.addr, s.datagrams))
        .collect();
    assert_eq!(list, [(SENDER, 70), (other, 40)]);
    assert_eq!(senders.followed().map(|s| s.addr), Some(SENDER));
    assert_eq!(senders.switches(), 0);
}

/// The status query from loopback (issue 23) is recognised among the
/// datagrams the core refuses anyway, and goes nowhere, counted nowhere;
/// from beyond this computer it is a malformed datagram like any other.
#[test]
fn issue23_the_status_query_goes_nowhere_and_counts_nowhere() {
    for allow in ["", "allow = [\"10.0.0.0/8\"]\n"] {
        let r = routes(
            &(format!("[listen]\nformat = \"fh6\"\n{allow}")
                + &destination_toml("raw", 9001, "same", "")),
        );
        let mut core = Fanout::new(&r);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let asker: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        assert_eq!(
            core.handle_at(crate::net::query::QUERY, asker, t0, &mut sink),
            Verdict::Query,
            "{allow}"
        );
        assert!(sink.got.is_empty(), "never forwarded");
        assert_eq!(core.queries(), 1);
        let c = core.counters();
        assert_eq!(
            (
                c.input.received,
                c.input.bytes,
                c.input.malformed,
                c.input.disallowed
            ),
            (0, 0, 0, 0),
            "counted nowhere"
        );
        assert!(c.input.senders.list().is_empty(), "no sender");
        assert_eq!(stats(&c, "raw").received, 0);
    }
    let r = routes(
        &("[listen]\nformat = \"fh6\"\n".to_owned() + &destination_toml("raw", 9001, "same", "")),
    );
    let mut core = Fanout::new(&r);
    let mut sink = Recorder::default();
    let lan: SocketAddr = "10.1.2.3:40000".parse().unwrap();
    assert_eq!(
        core.handle_at(crate::net::query::QUERY, lan, Instant::now(), &mut sink),
        Verdict::Admitted(None)
    );
    assert_eq!(core.queries(), 0);
    assert_eq!(core.counters().input.malformed, 1);
    assert_eq!(sink.got.len(), 1, "a malformed datagram goes to same");
}

/// What a frame sent at once reads and writes of its destination's state
/// lies in the state's first four cache lines (issue 26): a field put in
/// front, or `repr(C)` dropped, shows here. The margin is a few bytes: a new
/// drop reason or send error kind (each a counter in `stats`, before
/// `config`) may need `config`'s two fields moved up.
#[test]
fn a_frame_sent_at_once_touches_the_first_four_cache_lines_of_its_destination() {
    use std::mem::{align_of, offset_of, size_of};

    use crate::counters::{DestinationStats, Health};
    use crate::filter::{AgeLimit, RateLimiter};

    assert_eq!(align_of::<DestinationState>(), 64);
    let stats = offset_of!(DestinationState, stats);
    let config = offset_of!(DestinationState, config);
    let ends = [
        (
            "rate",
            offset_of!(DestinationState, rate) + size_of::<RateLimiter>(),
        ),
        (
            "age",
            offset_of!(DestinationState, age) + size_of::<AgeLimit>(),
        ),
        (
            "queued",
            offset_of!(DestinationState, queued) + size_of::<u64>(),
        ),
        (
            "latency",
            offset_of!(DestinationState, latency) + size_of::<usize>(),
        ),
        (
            "health",
            offset_of!(DestinationState, health) + size_of::<Health>(),
        ),
        (
            "stats.received",
            stats + offset_of!(DestinationStats, received) + 8,
        ),
        ("stats.sent", stats + offset_of!(DestinationStats, sent) + 8),
        ("has_pending", offset_of!(DestinationState, has_pending) + 1),
        ("race", offset_of!(DestinationState, race) + 1),
        (
            "config.output",
            config + offset_of!(Destination, output) + size_of::<Output>(),
        ),
        (
            "config.only_race_on",
            config + offset_of!(Destination, only_race_on) + 1,
        ),
    ];
    for (field, end) in ends {
        assert!(end <= 4 * 64, "{field} ends at byte {end} of the state");
    }
}

/// A menu frame, as the game sends in a rewind, a replay or a menu: every
/// byte zero but TimestampMS.
fn blank_fh6(timestamp_ms: u32) -> Vec<u8> {
    let mut buf = vec![0u8; Format::Fh6.len()];
    Packet::new_checked(&mut buf[..], Format::Fh6)
        .unwrap()
        .set_timestamp_ms(timestamp_ms);
    buf
}

/// Issue 34, item 4: racing frames, 3 s of blank frames, racing again, at
/// 60 Hz. A destination with `hold = "15s"` gets the last racing frame in
/// place of every blank one, re-stamped with the blank's TimestampMS, in its
/// own format too; one with `hold = "1s"` gets it for the first second, then
/// the blanks; one without gets the blanks. Every frame is counted.
#[test]
fn hold_sends_the_last_racing_frame_through_blank_frames_for_at_most_its_hold() {
    let mut core = Fanout::new(&routes(
        &(destination_toml("held", 9001, "same", "hold = \"15s\"")
            + &destination_toml("held-fh5", 9002, "fh5", "hold = \"15s\"")
            + &destination_toml("short", 9003, "same", "hold = \"1s\"")
            + &destination_toml("plain", 9004, "same", "")),
    ));
    let mut sink = Recorder::default();
    let frame = Duration::from_micros(16_667);
    let mut stamp = 1_000u32;
    let mut at = Instant::now();
    // The 30th racing frame's (the last before the blanks) rpm.
    let last_rpm = 5_000.0 + (1_000 + 17 * 29) as f32;
    let mut send = |core: &mut Fanout, racing: bool, sink: &mut Recorder| {
        let bytes = if racing {
            let mut b = fh6(stamp, true);
            Packet::new_checked(&mut b[..], Format::Fh6)
                .unwrap()
                .set_current_engine_rpm(5_000.0 + stamp as f32);
            b
        } else {
            blank_fh6(stamp)
        };
        core.handle_at(&bytes, SENDER, at, sink);
        stamp += 17;
        at += frame;
    };
    for _ in 0..30 {
        send(&mut core, true, &mut sink);
    }
    for _ in 0..180 {
        send(&mut core, false, &mut sink);
    }
    for _ in 0..30 {
        send(&mut core, true, &mut sink);
    }
    let read = |b: &Vec<u8>, format: Format| {
        let p = Packet::new_checked(&b[..], format).unwrap();
        (
            p.is_race_on(),
            p.timestamp_ms(),
            p.speed(),
            p.current_engine_rpm(),
        )
    };
    let held: Vec<_> = sink
        .to(&core, "held")
        .iter()
        .map(|b| read(b, Format::Fh6))
        .collect();
    assert_eq!(held.len(), 240);
    for (i, &(race_on, timestamp, speed, rpm)) in held.iter().enumerate() {
        assert_eq!(race_on, 1, "frame {i}");
        assert_eq!(timestamp, 1_000 + 17 * i as u32, "frame {i}: re-stamped");
        assert_eq!(speed, Some(41.5), "frame {i}");
        if (30..210).contains(&i) {
            assert_eq!(rpm, last_rpm, "frame {i}: the last racing frame's");
        } else {
            assert_eq!(rpm, 5_000.0 + timestamp as f32, "frame {i}: its own");
        }
    }
    let fh5: Vec<_> = sink
        .to(&core, "held-fh5")
        .iter()
        .map(|b| read(b, Format::Fh5))
        .collect();
    assert_eq!(fh5.len(), 240);
    for (i, &(race_on, timestamp, speed, _)) in fh5.iter().enumerate() {
        assert_eq!(
            (race_on, timestamp, speed),
            (1, 1_000 + 17 * i as u32, Some(41.5)),
            "fh5 {i}"
        );
    }
    // 1 s after the last racing frame: the 60 blanks within it are held.
    let short: Vec<_> = sink
        .to(&core, "short")
        .iter()
        .map(|b| read(b, Format::Fh6))
        .collect();
    let within = (1..=180u32)
        .filter(|&k| frame * k <= Duration::from_secs(1))
        .count();
    let held_short = short[30..210].iter().take_while(|f| f.0 == 1).count();
    assert_eq!(held_short, within);
    assert!(short[30 + within..210]
        .iter()
        .all(|f| f.0 == 0 && f.2 == Some(0.0)));
    assert_eq!(short[210].0, 1);
    let plain: Vec<_> = sink
        .to(&core, "plain")
        .iter()
        .map(|b| read(b, Format::Fh6))
        .collect();
    assert!(plain[30..210]
        .iter()
        .all(|f| (f.0, f.2, f.3) == (0, Some(0.0), 0.0)));
    let c = core.counters();
    assert_balanced(&c);
    for (name, held_count) in [
        ("held", 180),
        ("held-fh5", 180),
        ("short", within),
        ("plain", 0),
    ] {
        let d = c.destinations.iter().find(|d| d.name == name).unwrap();
        assert_eq!(
            (d.stats.received, d.stats.sent, d.held_through_blank),
            (240, 240, held_count as u64),
            "{name}"
        );
    }
}
