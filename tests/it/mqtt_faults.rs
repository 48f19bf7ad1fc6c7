//! Issue 30, item 13: what an MQTT publisher counts and logs when the broker
//! misbehaves, against a fake broker on a loopback port
//! ([`common::broker::FakeBroker`]): one that answers "session present" and
//! one that stops reading (each frame handed over is counted published or not
//! published, exactly once, and no frame of a connection that ended is
//! published on the next), and one that closes each connection (the log says
//! it once an interval, as every repeated warning).

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::bin::Bin;
use common::broker::{Conduct, FakeBroker, Seen, Then};
use common::{listen_toml, TempPath};
use forza_relay::output::mqtt::{Broker, MqttSettings};
use forza_relay::relay::mqtt::{MqttCounts, MqttPublisher, Outbox};

/// The longest a test waits for a publisher to connect or a count to move:
/// only a hang reaches it.
const WAIT: Duration = Duration::from_secs(20);
/// The topic the publishers publish on.
const TOPIC: &str = "forza-relay-test/faults";
/// Bytes of each payload: large, so that a broker that stops reading fills
/// the connection's buffers within a few hundred frames.
const PAYLOAD: usize = 48 << 10;

/// Payload `n`: `frame n`, then filler up to [`PAYLOAD`] bytes.
fn payload(n: u32) -> Vec<u8> {
    let mut p = format!("frame {n}\n").into_bytes();
    p.resize(PAYLOAD, b'.');
    p
}

/// The frame numbers of the data messages `seen` received.
fn frames(seen: &Seen) -> Vec<u32> {
    seen.published
        .iter()
        .filter(|(topic, _)| topic == TOPIC)
        .map(|(_, p)| {
            let text = String::from_utf8_lossy(&p[..p.len().min(32)]).into_owned();
            let n = text
                .strip_prefix("frame ")
                .and_then(|t| t.split('\n').next())
                .and_then(|n| n.parse().ok());
            n.unwrap_or_else(|| panic!("not a test frame: {text:?}"))
        })
        .collect()
}

/// Polls `done` until it holds; fails the test after [`WAIT`]. A publisher's
/// counts and state are atomics read here: there is nothing to wait on.
#[track_caller]
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// Hands frames `from..` over as the relay does (only while connected) until
/// `enough` says so; returns the next frame number.
fn hand_over(
    outbox: &mut Outbox,
    publisher: &MqttPublisher,
    from: u32,
    enough: impl Fn(&MqttCounts) -> bool,
) -> u32 {
    let deadline = Instant::now() + WAIT;
    let mut n = from;
    while !enough(&publisher.counts()) {
        assert!(
            Instant::now() < deadline,
            "never enough: {:?}",
            publisher.counts()
        );
        if outbox.is_connected() && outbox.push(&payload(n)) {
            n += 1;
        } else {
            // The ring holds one payload: the publisher takes it as soon as
            // it is woken.
            thread::sleep(Duration::from_micros(200));
        }
    }
    n
}

/// A publisher to `broker`, connected.
fn connected_publisher(broker: &FakeBroker) -> (MqttPublisher, Outbox) {
    let settings = MqttSettings::new(Broker::parse(&broker.addr()).unwrap(), TOPIC);
    let (publisher, outbox) = MqttPublisher::start(settings).unwrap();
    wait_for("the first connection", || outbox.is_connected());
    (publisher, outbox)
}

/// The second connection's part of the test: frames handed over after the
/// reconnection reach it, none from before, and what the publisher did adds
/// up, each frame counted once.
#[track_caller]
fn after_the_reconnection(
    broker: &FakeBroker,
    mut publisher: MqttPublisher,
    mut outbox: Outbox,
    fresh: u32,
) {
    wait_for("the reconnection", || {
        outbox.is_connected() && publisher.counts().connections == 2
    });
    let taken = publisher.counts().taken;
    let end = hand_over(&mut outbox, &publisher, fresh, |c| c.taken >= taken + 3);
    broker.wait_until("the fresh frames", |seen| {
        seen.len() >= 2 && frames(&seen[1]).last() == Some(&(end - 1))
    });
    publisher.signal_stop(false);
    let counts = publisher.wait(Instant::now() + WAIT);
    let seen = broker.wait_until("the goodbye", |seen| seen[1].disconnected);
    let second = frames(&seen[1]);
    assert_eq!(
        second,
        (fresh..end).collect::<Vec<_>>(),
        "the second connection got the frames handed over to it, once each, and none \
         left from the first"
    );
    assert_eq!(
        counts.published + counts.not_published,
        counts.taken,
        "each frame handed over counted once: {counts:?}"
    );
    assert!(counts.not_published > 0, "{counts:?}");
    assert!(counts.published >= second.len() as u64, "{counts:?}");
}

/// A broker that answers "session present" to a publisher that asked for a
/// clean session: the frames queued when the first connection ended were
/// published again on the second (up to 65, stale) and counted both not
/// published and published.
#[test]
fn issue30_session_present_republishes_nothing_and_counts_each_frame_once() {
    let release = Arc::new(AtomicBool::new(false));
    let stalled = release.clone();
    let broker = FakeBroker::start(move |n| Conduct {
        session_present: true,
        then: match n {
            0 => Then::Stall {
                release: stalled.clone(),
            },
            _ => Then::Serve,
        },
    });
    let (publisher, mut outbox) = connected_publisher(&broker);
    // Until the client's queue is full: its connection is stuck.
    let fresh = hand_over(&mut outbox, &publisher, 0, |c| c.not_published > 0);
    // Closed with data unread: a reset.
    release.store(true, Ordering::SeqCst);
    after_the_reconnection(&broker, publisher, outbox, fresh);
}

/// A broker that stops reading: the publish whose write timed out (the
/// connection's 5 s) was counted not published, then published after the
/// reconnection.
#[test]
fn issue30_a_write_that_times_out_is_counted_not_published_only() {
    let release = Arc::new(AtomicBool::new(false));
    let stalled = release.clone();
    let broker = FakeBroker::start(move |n| Conduct {
        session_present: false,
        then: match n {
            0 => Then::Stall {
                release: stalled.clone(),
            },
            _ => Then::Serve,
        },
    });
    let (publisher, mut outbox) = connected_publisher(&broker);
    let fresh = hand_over(&mut outbox, &publisher, 0, |c| c.not_published > 0);
    // The publisher gives the connection up by itself.
    wait_for("the write's timeout", || !outbox.is_connected());
    release.store(true, Ordering::SeqCst);
    after_the_reconnection(&broker, publisher, outbox, fresh);
}

/// A broker that takes each connection and closes it at once, through the
/// real binary with summaries every hour: the first connection, the first
/// loss and the connection after it are said, the other losses are held back
/// and counted in one last word at the stop (they were 2 lines a connection:
/// 114 in 20 s).
#[test]
fn issue30_a_broker_that_drops_each_connection_is_said_once_an_interval() {
    let broker = FakeBroker::start(|_| Conduct {
        session_present: false,
        then: Then::Close,
    });
    let file = TempPath::file(
        "mqtt-drops.toml",
        &(listen_toml("fh6").replace("interval = 0", "interval = 3600")
            + &format!(
                "\n[[destination]]\nname = \"league\"\naddr = \"{}\"\ntopic = \"{TOPIC}\"\n",
                broker.addr()
            )),
    );
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    bin.wait_until_running();
    let deadline = Instant::now() + WAIT;
    while broker.accepted() < 12 {
        assert!(
            Instant::now() < deadline,
            "{} connections",
            broker.accepted()
        );
        thread::sleep(Duration::from_millis(20));
    }
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let about = format!("MQTT {}:", Broker::parse(&broker.addr()).unwrap());
    let lines: Vec<&str> = done.stderr.lines().filter(|l| l.contains(&about)).collect();
    let text = lines.join("\n");
    // The first connection, the first loss and the connection after it are
    // said; a connection cut before its CONNACK was read (a reset can take
    // the CONNACK with it) is a failed attempt, said once too, with the
    // connection after it; then the last word. At most six lines for a dozen
    // connections (they were two a connection).
    assert!((4..=6).contains(&lines.len()), "{text}");
    assert!(lines[0].contains("connected; publishing to"), "{text}");
    assert!(lines[1].contains("connection lost ("), "{text}");
    assert!(lines[2].contains("connected again"), "{text}");
    let last = lines[lines.len() - 1];
    let held: u64 = last
        .split(&about)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {last:?}"));
    assert!(
        last.ends_with("more lost connections or failed attempts since the last message"),
        "{text}"
    );
    // Each connection is lost but the one the stop may have come in; one a
    // failed attempt said may be among them.
    let said = lines
        .iter()
        .filter(|l| l.contains("connection lost (") || l.contains("cannot connect ("))
        .count() as u64;
    let accepted = broker.accepted() as u64;
    assert!(
        (accepted - 2..=accepted).contains(&(held + said)),
        "every loss is said or counted: {held} held and {said} said for {accepted} \
         connections:\n{text}"
    );
}
