use std::time::Duration;

use mio::Poll;

use super::*;
use std::time::SystemTime;

use crate::counters::DestinationStats;
use crate::fanout::Sink;
use crate::fanout::{Arrival, Fanout, Output, Routes, Target};
use crate::relay::outbox::{Links, Outbox};
use crate::relay::DEFAULT_WARN_INTERVAL;
use crate::report::CountersOf as _;
use crate::wire::Input;

const FROM: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 50_000);

/// A core with one `same` destination, a loopback receiver for it, and its
/// link.
fn core_and_link() -> (Fanout, DestinationId, Link, std::net::UdpSocket) {
    core_and_link_aged(None)
}

/// As [`core_and_link`], with the destination's `max_age`.
fn core_and_link_aged(
    max_age: Option<Duration>,
) -> (Fanout, DestinationId, Link, std::net::UdpSocket) {
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let addr = receiver.local_addr().unwrap();
    let core = Fanout::new(&Routes {
        input: Input::Auto,
        allow: Vec::new(),
        destinations: vec![Destination {
            name: "rig".to_owned(),
            addr_text: addr.to_string(),
            target: Target::Udp(addr),
            output: Output::Same,
            fields: None,
            only_race_on: false,
            max_rate: 0,
            max_age,
            hold: None,
            records: Default::default(),
        }],
    });
    let (id, d) = core.destinations().next().unwrap();
    let listen = "127.0.0.1:5400".parse().unwrap();
    let link = Link::open(id, d, addr, listen).unwrap();
    (core, id, link, receiver)
}

/// Stands in for a socket that would block: every frame goes to the
/// link's backlog, as `Link::send` does on `WouldBlock`.
struct WouldBlock<'a>(&'a mut Link);

impl Sink for WouldBlock<'_> {
    fn deliver(
        &mut self,
        _: DestinationId,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Fate {
        self.0.queue(bytes, received, report)
    }
}

/// Sends through the link, as the shell does.
struct Sends<'a>(&'a mut Link, &'a Registry, Clock);

impl Sink for Sends<'_> {
    fn deliver(
        &mut self,
        _: DestinationId,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Fate {
        self.0.send(
            bytes,
            received,
            report,
            &Env {
                registry: self.1,
                clock: self.2,
            },
        )
    }
}

fn stats(core: &Fanout) -> DestinationStats {
    core.counters().destinations[0].stats
}

/// What every send reads of its link lies in the link's first two cache
/// lines (issue 26): a field put in front, or `repr(C)` dropped, shows
/// here.
#[test]
fn a_send_reads_the_first_two_cache_lines_of_its_link() {
    use std::mem::{align_of, offset_of, size_of};
    assert_eq!(align_of::<Link>(), 64);
    let ends = [
        (
            "backlog",
            offset_of!(Link, backlog) + size_of::<LocalRb<Heap<HeldFrame>>>(),
        ),
        ("socket", offset_of!(Link, socket) + size_of::<UdpSocket>()),
        (
            "held_back.heads",
            offset_of!(Link, held_back)
                + offset_of!(HeldBack, heads)
                + size_of::<LocalRb<Heap<(u16, Instant)>>>(),
        ),
    ];
    for (field, end) in ends {
        assert!(end <= 2 * 64, "{field} ends at byte {end} of the link");
    }
}

#[test]
fn a_full_backlog_keeps_the_newest_frames_and_sends_them_oldest_first() {
    let poll = Poll::new().unwrap();
    let (mut core, id, mut link, receiver) = core_and_link();
    let now = Instant::now();
    let extra = 3u8;
    for i in 0..BACKLOG_FRAMES as u8 + extra {
        core.handle_at(&[i; 324], FROM, now, &mut WouldBlock(&mut link));
    }
    let s = stats(&core);
    assert_eq!(s.dropped(DropReason::Backlog), u64::from(extra));
    assert_eq!(s.held, BACKLOG_FRAMES as u64);
    assert!(s.is_balanced(), "{s:?}");
    core.handle_at(
        &[0xFF; FRAME_CAPACITY + 1],
        FROM,
        now,
        &mut WouldBlock(&mut link),
    );
    assert_eq!(
        stats(&core).dropped(DropReason::Backlog),
        u64::from(extra) + 1,
        "too large to hold"
    );

    let clock = Clock {
        now,
        warn_every: DEFAULT_WARN_INTERVAL,
    };
    link.watch(poll.registry(), true);
    assert!(link.watched);
    link.flush(
        &mut core.report(id).unwrap(),
        &Env {
            registry: poll.registry(),
            clock,
        },
    );
    assert!(link.backlog.is_empty());
    assert!(!link.watched, "a flushed link is no longer watched");
    let s = stats(&core);
    assert_eq!((s.sent, s.held), (BACKLOG_FRAMES as u64, 0));
    assert!(s.is_balanced(), "{s:?}");
    let mut buf = [0u8; 2048];
    for i in extra..BACKLOG_FRAMES as u8 + extra {
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(n, 324);
        assert!(buf[..n].iter().all(|&b| b == i), "frame {i} out of order");
    }
    // With frames waiting, a new frame goes behind them, never ahead.
    core.handle_at(&[0xA1; 311], FROM, now, &mut WouldBlock(&mut link));
    let registry = poll.registry();
    core.handle_at(
        &[0xA2; 232],
        FROM,
        now,
        &mut Sends(&mut link, registry, clock),
    );
    assert_eq!(receiver.recv(&mut buf).unwrap(), 311);
    assert_eq!(receiver.recv(&mut buf).unwrap(), 232);
    assert_eq!(stats(&core).sent, BACKLOG_FRAMES as u64 + 2);

    // Removed while a frame waits: the plan closes its link, and the core
    // counts the frame before it returns the final counters.
    core.handle_at(&[0xA3; 311], FROM, now, &mut WouldBlock(&mut link));
    assert_eq!(core.queued(id), 1);
    let plan = core.plan(&Routes {
        input: Input::Auto,
        allow: Vec::new(),
        destinations: Vec::new(),
    });
    assert_eq!(plan.closed(), [id]);
    link.clear_backlog(registry);
    let removed = &core.commit(plan).removed[0].stats;
    assert_eq!(
        removed.dropped(DropReason::Backlog),
        u64::from(extra) + 2,
        "{removed:?}"
    );
    assert_eq!(removed.held, 0);
    assert!(removed.is_balanced(), "{removed:?}");
}

/// Issue 15: frames that waited in the backlog past `max_age` are dropped
/// and counted stale when it is flushed; the fresh ones go, with their
/// latency from their receive time.
#[test]
fn a_backlog_flush_drops_frames_grown_older_than_max_age() {
    let poll = Poll::new().unwrap();
    let ms = Duration::from_millis;
    let (mut core, id, mut link, receiver) = core_and_link_aged(Some(ms(50)));
    // The synthetic clock runs 200 ms behind: the sends' latencies (read
    // on the real clock) are over 100 ms.
    let t0 = Instant::now() - ms(200);
    for (i, at) in [0, 10, 60, 70].into_iter().enumerate() {
        let packet = [i as u8; 324];
        let arrival = Arrival::new(&packet, FROM, t0 + ms(at), SystemTime::now());
        core.handle(arrival, t0 + ms(at), &mut WouldBlock(&mut link));
    }
    assert_eq!(stats(&core).held, 4);
    let clock = Clock {
        now: t0 + ms(100),
        warn_every: DEFAULT_WARN_INTERVAL,
    };
    link.flush(
        &mut core.report(id).unwrap(),
        &Env {
            registry: poll.registry(),
            clock,
        },
    );
    assert!(link.backlog.is_empty());
    let s = stats(&core);
    assert_eq!((s.sent, s.dropped(DropReason::Stale), s.held), (2, 2, 0));
    assert!(s.is_balanced(), "{s:?}");
    let mut buf = [0u8; 2048];
    for i in [2u8, 3] {
        let n = receiver.recv(&mut buf).unwrap();
        assert!(buf[..n].iter().all(|&b| b == i), "frame {i}");
    }
    let latency = core.counters().destinations[0].latency;
    assert_eq!(latency.count, 2);
    assert!(latency.max >= ms(100), "from the receive time: {latency:?}");
}

/// Issue 15: while a backlog is drained, a destination with `max_age`
/// gets the newest frame before one without gets any of the backlog;
/// released, that one gets every frame, in order, none dropped. Held-back
/// frames that fill their rings are released, not dropped.
#[test]
fn a_drain_holds_back_frames_for_destinations_without_max_age() {
    let poll = Poll::new().unwrap();
    let ms = Duration::from_millis;
    let receivers: Vec<_> = (0..2)
        .map(|_| {
            let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            r.set_nonblocking(true).unwrap();
            r
        })
        .collect();
    let destination = |name: &str, r: &std::net::UdpSocket, max_age| {
        let addr = r.local_addr().unwrap();
        Destination {
            name: name.to_owned(),
            addr_text: addr.to_string(),
            target: Target::Udp(addr),
            output: Output::Same,
            fields: None,
            only_race_on: false,
            max_rate: 0,
            max_age,
            hold: None,
            records: Default::default(),
        }
    };
    let mut core = Fanout::new(&Routes {
        input: Input::Auto,
        allow: Vec::new(),
        destinations: vec![
            destination("rig", &receivers[0], Some(ms(50))),
            destination("plain", &receivers[1], None),
        ],
    });
    let listen = "127.0.0.1:5400".parse().unwrap();
    let mut links: Vec<Option<Box<Link>>> = core
        .destinations()
        .map(|(id, d)| {
            let link = Link::open(id, d, d.target.udp().unwrap(), listen).unwrap();
            Some(Box::new(link))
        })
        .collect();
    let [rig, plain] = [0, 1].map(DestinationId::from_index);
    // A stall: 30 frames 10 ms apart, read 300 ms after the first came.
    let t0 = Instant::now() - ms(400);
    let now = t0 + ms(300);
    let clock = Clock {
        now,
        warn_every: DEFAULT_WARN_INTERVAL,
    };
    for i in 0..30u8 {
        let packet = [i; 324];
        let arrival = Arrival::new(&packet, FROM, t0 + ms(10) * u32::from(i), SystemTime::now());
        let mut sink = Links {
            links: &mut links,
            brokers: &mut [],
            outbox: &mut Outbox::off(),
            env: Env {
                registry: poll.registry(),
                clock,
            },
            hold_back: true,
        };
        core.handle(arrival, now, &mut sink);
    }
    let mut buf = [0u8; 2048];
    let mut got = |r: &std::net::UdpSocket| {
        let mut frames = Vec::new();
        while let Ok(n) = r.recv(&mut buf) {
            frames.push(buf[..n][0]);
        }
        frames
    };
    // Frames 25..30 are within 50 ms of `now`.
    assert_eq!(got(&receivers[0]), (25..30).collect::<Vec<_>>());
    assert_eq!(
        got(&receivers[1]),
        Vec::<u8>::new(),
        "plain's frames are held back"
    );
    assert_eq!(core.queued(plain), 30);
    let counts = |core: &Fanout, i: usize| core.counters().destinations[i].stats;
    assert_eq!(counts(&core, 0).dropped(DropReason::Stale), 25);

    let plain_link = links[1].as_mut().unwrap();
    assert_eq!(plain_link.holding(), 30);
    plain_link.release(
        &mut core.report(plain).unwrap(),
        &Env {
            registry: poll.registry(),
            clock,
        },
    );
    assert_eq!(got(&receivers[1]), (0..30).collect::<Vec<_>>());
    for (i, s) in [counts(&core, 0), counts(&core, 1)].iter().enumerate() {
        assert!(s.is_balanced(), "{i}: {s:?}");
        assert_eq!(s.held, 0);
    }
    assert_eq!(counts(&core, 1).sent, 30);
    assert_eq!(core.queued(rig), 0);

    // Rings full: the held-back frames go first, nothing is dropped.
    let extra = 5;
    for i in 0..HELD_BACK_FRAMES + extra {
        let packet = [i as u8; 16];
        let mut sink = Links {
            links: &mut links,
            brokers: &mut [],
            outbox: &mut Outbox::off(),
            env: Env {
                registry: poll.registry(),
                clock,
            },
            hold_back: true,
        };
        core.handle(
            Arrival::new(&packet, FROM, now, SystemTime::now()),
            now,
            &mut sink,
        );
    }
    let s = counts(&core, 1);
    assert_eq!(
        (s.sent, s.held, s.dropped_total()),
        (30 + HELD_BACK_FRAMES as u64, extra as u64, 0)
    );
    assert_eq!(links[1].as_ref().unwrap().holding(), extra);
}
