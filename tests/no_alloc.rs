//! Proof that the relay (and the simulator) allocate nothing per packet: a counting global allocator,
//! armed only on the relay's thread, watches 1,000+ packets go through the real
//! loop on loopback (after a warm-up) to four destinations, one of each kind:
//! byte-for-byte with an age limit, translated, translated with `only_race_on`,
//! and rate-limited with an age limit (every send's latency measured, issue
//! 15), one holding the last racing frame through blank ones (issue 34), while recording (`[record]`: the tap drained into a capture file by the
//! recorder thread); and with the web page's tap and snapshots (issue 14), and
//! the real web page with a page, an overlay and a frame stream open (issue 24);
//! and with json, influx and MQTT destinations (issue 25); and a session's
//! records, written as text (issue 34).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use forza_relay::capture::record::{Existing, Recorder};
use forza_relay::config::{Config, Overrides};
use forza_relay::counters::SendErrorKind;
use forza_relay::relay::Relay;
use forza_relay::simulate::Simulator;
use forza_relay::tap;
use forza_relay::view::model::Model;
use forza_relay::wire::{Format, Packet, MAX_LEN};

mod counting;
#[path = "common/rig.rs"]
#[allow(dead_code)]
mod rig;

use counting::{ALLOCATIONS, ARMED};
use rig::{Game, Pace, Tool};

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// The text outputs' encoder (src/output/): nothing allocated per frame.
#[path = "no_alloc/output.rs"]
mod output;

/// A session's records (src/telemetry/session.rs, src/output/records.rs):
/// nothing allocated per frame.
#[path = "no_alloc/records.rs"]
mod records;

const WARM_UP: u64 = 200;
const MEASURED: u64 = 1_500;
/// Frames a counted game sends: the warm-up, the measured and 200 more.
const ALL: u32 = (WARM_UP + MEASURED + 200) as u32;

/// Turns the relay with `turn` until WARM_UP datagrams have arrived, then
/// counts the allocations on this thread while MEASURED more go through
/// (bounded at 30 s).
fn measure(relay: &mut Relay, turn: fn(&mut Relay, Option<Duration>)) -> usize {
    measure_until(relay, turn, || true)
}

/// As [`measure`], the count going on, after the packets, until `also` says
/// so too (within the same time limit).
fn measure_until(
    relay: &mut Relay,
    turn: fn(&mut Relay, Option<Duration>),
    also: impl Fn() -> bool,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    while relay.input_stats().received < WARM_UP && Instant::now() < deadline {
        turn(relay, Some(Duration::from_millis(10)));
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    ARMED.with(|a| a.set(true));
    while (relay.input_stats().received < WARM_UP + MEASURED || !also())
        && Instant::now() < deadline
    {
        turn(relay, Some(Duration::from_millis(10)));
    }
    ARMED.with(|a| a.set(false));
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// `n` tools counting what the relay sends them (tests/it's rig), and their
/// ports.
fn start_tools(n: usize) -> (Vec<Tool<()>>, Vec<u16>) {
    let tools: Vec<Tool<()>> = (0..n)
        .map(|_| Tool::start(UdpSocket::bind("127.0.0.1:0").unwrap(), |_| ()))
        .collect();
    let ports = tools.iter().map(|t| t.addr().port()).collect();
    (tools, ports)
}

/// What each tool received, read once the relay has stopped sending.
fn received_by(tools: Vec<Tool<()>>) -> Vec<u64> {
    tools.into_iter().map(|t| t.finish().len() as u64).collect()
}

#[test]
fn relaying_allocates_nothing_per_packet() {
    let (tools, ports) = start_tools(4);
    let toml = format!(
        r#"
[listen]
addr = "127.0.0.1:0"
format = "fh6"
[stats]
interval = 0
[[destination]]
name = "same"
addr = "127.0.0.1:{}"
max_age = "10s"
[[destination]]
name = "fh5"
addr = "127.0.0.1:{}"
format = "fh5"
hold = "15s"
[[destination]]
name = "sled-racing"
addr = "127.0.0.1:{}"
format = "sled"
only_race_on = true
[[destination]]
name = "fm7-limited"
addr = "127.0.0.1:{}"
format = "fm7"
max_rate = 100
max_age = "1s"
"#,
        ports[0], ports[1], ports[2], ports[3]
    );
    let config = Config::from_toml(&toml, "no_alloc.toml", &Overrides::default()).unwrap();
    let mut relay = Relay::bind(&config).unwrap();
    let target = relay.local_addr();
    // Recording on, as `[record]` does it: the tap drained by the capture writer.
    let capture =
        std::env::temp_dir().join(format!("forza-relay-no-alloc-{}.pcap", std::process::id()));
    let (producer, tap) = tap::tap(tap::DEFAULT_CAPACITY);
    let recorder = Recorder::start(&capture, Existing::Replace, tap, None, || {}).unwrap();
    relay.attach(producer);

    let game = Game::start_counted(target, ALL, Pace::Bursts(20), |i| {
        let mut buf = vec![0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        // Mostly racing, with stretches of blank frames (a rewind's: zero
        // but TimestampMS) so the race filter both passes and drops, and
        // `hold` (issue 34) sends the last racing frame through them.
        let racing = i % 50 < 40;
        p.set_is_race_on(i32::from(racing));
        p.set_timestamp_ms(i);
        if racing {
            p.set_speed(i as f32).unwrap();
            p.set_car_class(6);
        }
        buf
    });

    let allocations = measure(&mut relay, Relay::poll_once);
    let received = relay.input_stats().received;

    assert_eq!(game.finish(), ALL);
    // Unmeasured: the rest is read, and frames held back for destinations
    // without max_age while a backlog was drained go once the socket is
    // empty (issue 15).
    for _ in 0..20 {
        relay.poll_once(Some(Duration::from_millis(10)));
    }
    let counts = received_by(tools);
    let recorded = recorder.finish().unwrap();
    let _ = std::fs::remove_file(&capture);
    let report = relay.snapshot();

    assert!(
        received >= WARM_UP + MEASURED,
        "only {received} packets arrived"
    );
    assert_eq!(allocations, 0, "{allocations} allocations while relaying");
    // The loop really did the work that was measured.
    let sent = |name: &str| {
        report
            .destinations
            .iter()
            .find(|d| d.name == name)
            .unwrap()
            .stats
            .sent
    };
    assert!(sent("same") >= WARM_UP + MEASURED, "{report}");
    assert!(sent("fh5") >= WARM_UP + MEASURED, "{report}");
    let held = |name: &str| {
        report
            .destinations
            .iter()
            .find(|d| d.name == name)
            .unwrap()
            .held_through_blank
    };
    assert!(held("fh5") > 0 && held("same") == 0, "{report}");
    assert!(
        sent("sled-racing") > 0 && sent("sled-racing") < sent("same"),
        "{report}"
    );
    assert!(
        sent("fm7-limited") > 0 && sent("fm7-limited") < sent("same"),
        "{report}"
    );
    assert!(counts.iter().all(|&n| n > 0), "receivers got {counts:?}");
    assert_eq!(
        recorded.packets + recorded.dropped,
        relay.input_stats().received,
        "every datagram was recorded or counted as dropped at the tap"
    );
    assert!(recorded.packets > 0, "the recording holds the traffic");
}

/// Issue 33: three tools and one closed port. On Linux every frame of a
/// batch goes in one call, and the closed port's refusals are read back from
/// the error queue: none of it allocates per packet.
#[test]
fn relaying_with_a_refused_destination_allocates_nothing_per_packet() {
    let (tools, ports) = start_tools(3);
    let closed = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let toml = format!(
        r#"
[listen]
addr = "127.0.0.1:0"
format = "fh6"
[stats]
interval = 0
[[destination]]
name = "same"
addr = "127.0.0.1:{}"
[[destination]]
name = "fh5"
addr = "127.0.0.1:{}"
format = "fh5"
[[destination]]
name = "closed"
addr = "127.0.0.1:{closed}"
[[destination]]
name = "sled"
addr = "127.0.0.1:{}"
format = "sled"
"#,
        ports[0], ports[1], ports[2]
    );
    let config = Config::from_toml(&toml, "no_alloc.toml", &Overrides::default()).unwrap();
    let mut relay = Relay::bind(&config).unwrap();
    let target = relay.local_addr();
    let game = Game::start_counted(target, ALL, Pace::Bursts(20), |i| {
        let mut buf = vec![0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        p.set_timestamp_ms(i);
        p.set_speed(i as f32).unwrap();
        buf
    });

    let allocations = measure(&mut relay, Relay::poll_once);
    assert_eq!(game.finish(), ALL);
    for _ in 0..20 {
        relay.poll_once(Some(Duration::from_millis(10)));
    }
    let counts = received_by(tools);
    let report = relay.snapshot();
    assert_eq!(allocations, 0, "{allocations} allocations while relaying");
    let of = |name: &str| {
        report
            .destinations
            .iter()
            .find(|d| d.name == name)
            .unwrap()
            .stats
    };
    let received = relay.input_stats().received;
    for name in ["same", "fh5", "sled"] {
        assert_eq!(of(name).sent, received, "{name}: {report}");
        assert_eq!(
            of(name).send_errors.get(SendErrorKind::Refused),
            0,
            "{name}: {report}"
        );
    }
    // Windows never says a port is closed (docs/platforms.md).
    if !cfg!(windows) {
        assert!(
            of("closed").send_errors.get(SendErrorKind::Refused) > 0,
            "{report}"
        );
    }
    assert!(
        counts.iter().all(|&n| n == received),
        "receivers got {counts:?} of {received}"
    );
}

/// A mosquitto of the test's own on a loopback port, killed when dropped;
/// `None` (the test then fails with FORZA_RELAY_REQUIRE_TOOLS=1) when it
/// can't be run here.
struct Mosquitto(std::process::Child, u16);

impl Mosquitto {
    fn start() -> Option<Mosquitto> {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            probe.local_addr().ok()?.port()
        };
        // Without a configuration file mosquitto 2 listens on loopback only
        // and takes anonymous clients.
        let child = std::process::Command::new("mosquitto")
            .args(["-p", &port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let mut broker = match child {
            Ok(child) => Mosquitto(child, port),
            Err(e) => {
                assert!(
                    std::env::var_os("FORZA_RELAY_REQUIRE_TOOLS").is_none(),
                    "mosquitto is required here: {e}"
                );
                eprintln!("note: no mosquitto ({e}); the MQTT destination is not measured");
                return None;
            }
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = broker.0.try_wait() {
                panic!("mosquitto exited: {status}");
            }
            assert!(Instant::now() < deadline, "mosquitto did not start");
            thread::sleep(Duration::from_millis(20));
        }
        Some(broker)
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 25: json and influx destinations (every column, a few, one waiting
/// for its rate slot) and an MQTT destination handed every frame, some with
/// the session's laps and events (issue 34): their text
/// is made into buffers kept between frames, and the MQTT frames go into the
/// publisher's ring; the loop allocates nothing per packet.
#[test]
fn text_and_mqtt_outputs_allocate_nothing_per_packet() {
    let (tools, ports) = start_tools(5);
    let broker = Mosquitto::start();
    let mqtt = match &broker {
        Some(b) => format!(
            r#"
[[destination]]
name = "broker"
addr = "mqtt://127.0.0.1:{}"
topic = "forza-relay-no-alloc/{}"
fields = ["Speed", "CurrentEngineRpm", "gear_label"]
max_rate = 0
records = ["frames", "laps", "events"]
"#,
            b.1,
            std::process::id()
        ),
        None => String::new(),
    };
    let toml = format!(
        r#"
[listen]
addr = "127.0.0.1:0"
format = "fh6"
[stats]
interval = 0
[[destination]]
name = "same"
addr = "127.0.0.1:{}"
[[destination]]
name = "json"
addr = "127.0.0.1:{}"
format = "json"
[[destination]]
name = "json-few"
addr = "127.0.0.1:{}"
format = "json"
fields = ["Speed", "gear_label", "TireTemp"]
max_age = "10s"
records = ["frames", "laps", "events"]
[[destination]]
name = "influx"
addr = "127.0.0.1:{}"
format = "influx"
only_race_on = true
records = ["frames", "laps", "events"]
[[destination]]
name = "influx-slow"
addr = "127.0.0.1:{}"
format = "influx"
max_rate = 100
{mqtt}"#,
        ports[0], ports[1], ports[2], ports[3], ports[4]
    );
    let config = Config::from_toml(&toml, "no_alloc.toml", &Overrides::default()).unwrap();
    let mut relay = Relay::bind(&config).unwrap();
    let target = relay.local_addr();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let packet = |i: u64| {
        let mut buf = [0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(i32::from(i % 50 < 40));
        p.set_timestamp_ms(i as u32);
        p.set_speed(i as f32).unwrap();
        p.set_current_engine_rpm(1_000.0 + i as f32);
        p.set_car_class(6);
        // A lap every 100 frames (issue 34): the session's laps and events
        // (a pause each menu stretch) go to the destinations that ask.
        let (lap, into) = (i / 100, (i % 100) as f32);
        p.set_lap_number(lap as u16).unwrap();
        p.set_current_lap(into / 60.0).unwrap();
        p.set_last_lap(if lap > 0 { 100.0 / 60.0 } else { 0.0 })
            .unwrap();
        p.set_current_race_time(i as f32 / 60.0).unwrap();
        p.set_distance_traveled(i as f32 * 10.0).unwrap();
        buf
    };
    // The broker connected (its first frame went) before the count.
    let sent_to = |relay: &Relay, name: &str| {
        relay
            .snapshot()
            .destination(name)
            .map_or(0, |d| d.stats.sent)
    };
    if broker.is_some() {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut i = 0;
        while sent_to(&relay, "broker") == 0 {
            assert!(Instant::now() < deadline, "the broker never took a frame");
            socket.send_to(&packet(i), target).unwrap();
            i += 1;
            relay.poll_once(Some(Duration::from_millis(10)));
        }
    }
    let sender = thread::spawn(move || {
        for i in 0..(WARM_UP + MEASURED + 200) {
            socket.send_to(&packet(i), target).unwrap();
            if i % 20 == 19 {
                thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let allocations = measure(&mut relay, Relay::poll_once);
    let received = relay.input_stats().received;
    sender.join().unwrap();
    for _ in 0..20 {
        relay.poll_once(Some(Duration::from_millis(10)));
    }
    let counts = received_by(tools);
    let report = relay.snapshot();

    assert!(
        received >= WARM_UP + MEASURED,
        "only {received} packets arrived"
    );
    assert_eq!(allocations, 0, "{allocations} allocations while relaying");
    let sent = |name: &str| report.destination(name).unwrap().stats.sent;
    for name in ["same", "json", "json-few"] {
        assert!(sent(name) >= WARM_UP + MEASURED, "{name}: {report}");
    }
    // The laps and events went too, on top of every frame.
    assert!(sent("json-few") > sent("json") + 10, "{report}");
    assert!(
        sent("influx") > 0 && sent("influx") < sent("same"),
        "{report}"
    );
    assert!(
        sent("influx-slow") > 0 && sent("influx-slow") < sent("same"),
        "{report}"
    );
    if broker.is_some() {
        assert!(sent("broker") >= WARM_UP + MEASURED / 2, "{report}");
    }
    assert!(counts.iter().all(|&n| n > 0), "receivers got {counts:?}");
}

/// Issue 25: how the loop hands an MQTT destination's frames to its client
/// thread. The payload is copied into the outbox, a byte ring made once when
/// the publisher starts, behind its length, and the thread is woken with a
/// tokio `Notify` (a permit when it is busy, the waiting task woken when it
/// waits); a ring without room refuses the frame. None of it allocates on the
/// loop's thread, whether the publisher waits, is busy or is behind: 3,000
/// frames pushed by this thread, armed, in bursts that fill the ring and with
/// pauses that let the publisher wait again; the broker gets what was taken.
#[test]
fn the_hand_off_to_the_mqtt_thread_allocates_nothing() {
    use forza_relay::output::mqtt::{Broker, MqttSettings};
    use forza_relay::relay::mqtt::MqttPublisher;

    let Some(broker) = Mosquitto::start() else {
        return;
    };
    let settings = MqttSettings::new(
        Broker {
            host: "127.0.0.1".to_owned(),
            port: broker.1,
            tls: false,
        },
        format!("forza-relay-no-alloc/{}/hand-off", std::process::id()),
    );
    let (publisher, mut outbox) = MqttPublisher::start(settings).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !outbox.is_connected() {
        assert!(Instant::now() < deadline, "the broker never connected");
        thread::sleep(Duration::from_millis(10));
    }
    // An all-column JSON frame is about 2.5 kB: 26 fill the 64 KiB ring.
    let payload = |i: u32, len: usize| {
        let mut p = [b' '; 2_600];
        let head = format!("{{\"TimestampMS\":{i}}}");
        p[..head.len()].copy_from_slice(head.as_bytes());
        (p, len)
    };
    let frames: Vec<_> = (0..3_000u32)
        .map(|i| payload(i, if i % 3 == 0 { 2_600 } else { 200 }))
        .collect();
    let mut pushed = 0u64;
    let mut refused = 0u64;
    ALLOCATIONS.store(0, Ordering::SeqCst);
    ARMED.with(|a| a.set(true));
    let mut refused_in_burst = false;
    for (i, (p, len)) in frames.iter().enumerate() {
        if outbox.push(&p[..*len]) {
            pushed += 1;
        } else {
            refused += 1;
            refused_in_burst = true;
        }
        // Bursts of 100, then a pause: the publisher empties the ring and
        // waits for the next wake-up; a longer one after a burst that
        // filled the ring, for a slow publisher (under qemu it took a fifth
        // of the frames with 5 ms pauses alone).
        if i % 100 == 99 {
            let pause = if refused_in_burst { 50 } else { 5 };
            thread::sleep(Duration::from_millis(pause));
            refused_in_burst = false;
        }
    }
    ARMED.with(|a| a.set(false));
    let allocations = ALLOCATIONS.load(Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    while publisher.counts().taken < pushed {
        assert!(Instant::now() < deadline, "{:?}", publisher.counts());
        thread::sleep(Duration::from_millis(10));
    }
    let counts = publisher.stop();
    assert_eq!(
        allocations, 0,
        "{allocations} allocations handing frames over"
    );
    assert_eq!(pushed + refused, 3_000);
    assert!(pushed >= 1_000, "{pushed} pushed, {refused} refused");
    assert_eq!(counts.taken, pushed, "{counts:?}");
    assert_eq!(
        counts.published + counts.not_published,
        pushed,
        "{counts:?}"
    );
    drop(broker);
}

#[test]
fn the_simulator_allocates_nothing_per_frame() {
    for format in Format::ALL {
        let mut sim = Simulator::new(format, 42);
        let mut buf = [0u8; MAX_LEN];
        let dt = Duration::from_nanos(16_666_667);
        // Through a whole lap, a finish and race-off frames.
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        ARMED.with(|a| a.set(true));
        for i in 0..4_000 {
            if i == 3_990 {
                sim.finish();
            }
            let n = sim.frame(dt, &mut buf).expect("MAX_LEN holds every format");
            std::hint::black_box(&buf[..n]);
        }
        ARMED.with(|a| a.set(false));
        let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;
        assert_eq!(allocations, 0, "{format}: {allocations} allocations");
    }
}

/// Issue 16: the same through [`Relay::step`], which waits inside the receive
/// when no frame waits (no `max_rate` here, so every turn may), with a tap
/// attached. (A command's answer allocates, a snapshot's list for one: commands
/// are not per packet, and tests/it/relay.rs wakes the wait with them.)
#[test]
fn waiting_in_the_receive_allocates_nothing_per_packet() {
    let (tools, ports) = start_tools(3);
    let toml = format!(
        r#"
[listen]
addr = "127.0.0.1:0"
format = "fh6"
[stats]
interval = 0
[[destination]]
name = "same"
addr = "127.0.0.1:{}"
[[destination]]
name = "fh5"
addr = "127.0.0.1:{}"
format = "fh5"
[[destination]]
name = "sled"
addr = "127.0.0.1:{}"
format = "sled"
"#,
        ports[0], ports[1], ports[2]
    );
    let config = Config::from_toml(&toml, "no_alloc.toml", &Overrides::default()).unwrap();
    let mut relay = Relay::bind(&config).unwrap();
    let target = relay.local_addr();
    let (producer, mut tap) = tap::tap(tap::DEFAULT_CAPACITY);
    relay.attach(producer);
    // Slow enough that the loop sleeps between packets.
    let game = Game::start_counted(target, ALL, Pace::Bursts(4), |i| {
        let mut buf = vec![0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        p.set_timestamp_ms(i);
        buf
    });
    let allocations = measure(&mut relay, Relay::step);
    let received = relay.input_stats().received;
    assert_eq!(game.finish(), ALL);
    let counts = received_by(tools);
    // The ring (1 MiB) holds every packet sent.
    let mut tapped = 0u64;
    while tap.pop().is_some() {
        tapped += 1;
    }

    assert!(
        received >= WARM_UP + MEASURED,
        "only {received} packets arrived"
    );
    assert_eq!(allocations, 0, "{allocations} allocations while relaying");
    assert!(counts.iter().all(|&n| n > 0), "receivers got {counts:?}");
    assert_eq!(
        tapped,
        relay.input_stats().received,
        "the tap got every packet"
    );
}

/// Issue 23: under `auto`, the game's stream (wet and dry fh6 frames) and a
/// second sender's FH5-looking datagrams interleaved: each datagram read by
/// its own bytes, the senders counted in place, the game's stream followed.
/// Both senders are heard (and said in the log) during the warm-up; after it
/// nothing is allocated per packet.
#[test]
fn two_senders_under_auto_allocate_nothing_per_packet() {
    use forza_relay::wire::{Puddle, Wheels};
    let (tools, ports) = start_tools(2);
    let toml = format!(
        r#"
[listen]
addr = "127.0.0.1:0"
format = "auto"
[stats]
interval = 0
[[destination]]
name = "same"
addr = "127.0.0.1:{}"
[[destination]]
name = "fh5"
addr = "127.0.0.1:{}"
format = "fh5"
"#,
        ports[0], ports[1]
    );
    let config = Config::from_toml(&toml, "no_alloc.toml", &Overrides::default()).unwrap();
    let mut relay = Relay::bind(&config).unwrap();
    let target = relay.local_addr();
    let sender = thread::spawn(move || {
        let game = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 324];
        for i in 0..(WARM_UP + MEASURED + 200) {
            let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
            p.set_is_race_on(1);
            p.set_timestamp_ms(i as u32);
            p.set_car_class(6);
            if i % 3 == 2 {
                p.set_wheel_in_puddle(Wheels::from_array([Puddle::Depth(0.5); 4]));
                other.send_to(&buf, target).unwrap();
            } else {
                let flag = i32::from(i % 2 == 0);
                p.set_wheel_in_puddle(Wheels::from_array([Puddle::Flag(flag); 4]));
                game.send_to(&buf, target).unwrap();
            }
            if i % 20 == 19 {
                thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let allocations = measure(&mut relay, Relay::step);
    let received = relay.input_stats().received;
    sender.join().unwrap();
    let counts = received_by(tools);
    let senders = relay.input_stats().senders;

    assert!(
        received >= WARM_UP + MEASURED,
        "only {received} packets arrived"
    );
    assert_eq!(allocations, 0, "{allocations} allocations while relaying");
    assert!(counts.iter().all(|&n| n > 0), "receivers got {counts:?}");
    assert_eq!(senders.list().len(), 2, "{senders:?}");
    assert_eq!(senders.switches(), 0, "the game's stream stays followed");
}

/// Issue 14: the web page in use — its tap read into `watch`'s model on the
/// feed's thread, and the counters asked for every [`SNAPSHOT_EVERY`] packets
/// through [`forza_relay::relay::Snapshots`] (the page asks once a second) —
/// costs the loop no allocation: it fills the reader's snapshot in place.
#[test]
fn the_web_pages_tap_and_snapshots_allocate_nothing_per_packet() {
    const SNAPSHOT_EVERY: u64 = 25;
    let stop = Arc::new(AtomicBool::new(false));
    let (tools, ports) = start_tools(2);
    let toml = format!(
        r#"
[listen]
addr = "127.0.0.1:0"
format = "fh6"
[stats]
interval = 0
[[destination]]
name = "same"
addr = "127.0.0.1:{}"
[[destination]]
name = "a-longer-name-for-fm7"
addr = "127.0.0.1:{}"
format = "fm7"
"#,
        ports[0], ports[1]
    );
    let config = Config::from_toml(&toml, "no_alloc.toml", &Overrides::default()).unwrap();
    let mut relay = Relay::bind(&config).unwrap();
    let target = relay.local_addr();
    let control = relay.control();
    let answered = Arc::new(AtomicU64::new(0));
    let feed = thread::spawn({
        let (stop, answered, input) = (stop.clone(), answered.clone(), config.input);
        move || {
            // As the page's feed does it: through the command channel.
            let (producer, mut tap) = tap::tap(tap::DEFAULT_CAPACITY);
            control.attach(producer);
            let mut snapshots = control.snapshots();
            let mut model = Model::new(input, "the relay");
            let mut asked_at = 0;
            let mut last_ask = Instant::now();
            let mut sent = 0;
            let mut ask = |snapshots: &mut forza_relay::relay::Snapshots| {
                if let Some(s) = snapshots.take(Duration::from_secs(5)) {
                    sent = s.destinations[0].stats.sent;
                    answered.fetch_add(1, Ordering::SeqCst);
                }
            };
            ask(&mut snapshots);
            while !stop.load(Ordering::SeqCst) {
                let now = Instant::now();
                while let Some(d) = tap.pop() {
                    model.on_datagram(now, d.from, d.payload);
                }
                // Every SNAPSHOT_EVERY packets, and at least every 20 ms (as
                // the page asks once a second): the answers go on after the
                // packets, on a slow machine too (qemu, Wine).
                if model.packets() >= asked_at + SNAPSHOT_EVERY
                    || last_ask.elapsed() >= Duration::from_millis(20)
                {
                    asked_at = model.packets();
                    last_ask = Instant::now();
                    ask(&mut snapshots);
                }
                thread::sleep(Duration::from_millis(1));
            }
            (model.packets(), sent)
        }
    });
    // The first answer fills the reader's empty snapshot (its list, its
    // names): before the count, as the page's first second is.
    let deadline = Instant::now() + Duration::from_secs(10);
    while answered.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        relay.poll_once(Some(Duration::from_millis(10)));
    }
    let sender = thread::spawn(move || {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 324];
        for i in 0..(WARM_UP + MEASURED + 200) {
            let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
            p.set_is_race_on(1);
            p.set_timestamp_ms(i as u32);
            p.set_speed(i as f32).unwrap();
            socket.send_to(&buf, target).unwrap();
            if i % 10 == 9 {
                thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let answered_before = answered.load(Ordering::SeqCst);
    let allocations = measure_until(&mut relay, Relay::poll_once, || {
        answered.load(Ordering::SeqCst) - answered_before >= 10
    });
    let answered_measured = answered.load(Ordering::SeqCst) - answered_before;
    let received = relay.input_stats().received;
    sender.join().unwrap();
    // The feed's last question still gets its answer.
    let deadline = Instant::now() + Duration::from_millis(200);
    while Instant::now() < deadline {
        relay.poll_once(Some(Duration::from_millis(10)));
    }
    stop.store(true, Ordering::SeqCst);
    let (modelled, sent) = feed.join().unwrap();
    received_by(tools);

    assert!(
        received >= WARM_UP + MEASURED,
        "only {received} packets arrived"
    );
    assert_eq!(allocations, 0, "{allocations} allocations while relaying");
    assert!(
        answered_measured >= 10,
        "only {answered_measured} snapshots answered while measured"
    );
    assert!(
        modelled > WARM_UP,
        "the tap fed the model {modelled} packets"
    );
    assert!(sent > WARM_UP, "the snapshots counted {sent} sent");
}

/// Issue 24: the real web page served for this relay, with a page's event
/// stream, an overlay (its page and its frame stream) and a full frame stream
/// at 360 a second open and read, costs the relay's loop no allocation per
/// packet: one tap and a snapshot a second, whatever the clients.
#[test]
fn a_page_an_overlay_and_a_stream_open_allocate_nothing_per_packet() {
    use forza_relay::app::Observer as _;
    use forza_relay::web::Web;
    use std::io::{Read as _, Write as _};

    let stop = Arc::new(AtomicBool::new(false));
    let (tools, ports) = start_tools(2);
    let toml = format!(
        r#"
[listen]
addr = "127.0.0.1:0"
format = "fh6"
[stats]
interval = 0
[[destination]]
name = "same"
addr = "127.0.0.1:{}"
[[destination]]
name = "fm7"
addr = "127.0.0.1:{}"
format = "fm7"
"#,
        ports[0], ports[1]
    );
    let config = Config::from_toml(&toml, "no_alloc.toml", &Overrides::default()).unwrap();
    let mut relay = Relay::bind(&config).unwrap();
    let target = relay.local_addr();
    // The page's changes go to the configuration's owner (none are made here).
    let owner = forza_relay::owner::Owner::start(
        None,
        Overrides::default(),
        config.clone(),
        relay.control(),
        Arc::new(forza_relay::config::system_look_up),
    )
    .unwrap();
    let mut web = Web::new(
        Some("127.0.0.1:0".parse().unwrap()),
        owner.editor(),
        config.input,
        None,
    );
    web.serve(relay.control()).unwrap();
    let page = web.local_addr().expect("the page is served");

    // Each client reads its stream until told to stop, counting what came:
    // events of the page, data lines of the streams.
    let client = |path: &'static str, counted: &'static str| {
        let (stop, seen) = (stop.clone(), Arc::new(AtomicU64::new(0)));
        let counter = seen.clone();
        let handle = thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(page).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\nHost: {page}\r\n\r\n").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let mut buf = vec![0u8; 64 << 10];
            while !stop.load(Ordering::SeqCst) {
                if let Ok(n) = s.read(&mut buf) {
                    let found = buf[..n]
                        .windows(counted.len())
                        .filter(|w| *w == counted.as_bytes())
                        .count();
                    counter.fetch_add(found as u64, Ordering::SeqCst);
                }
            }
        });
        (seen, handle)
    };
    let overlay = {
        let mut s = std::net::TcpStream::connect(page).unwrap();
        write!(
            s,
            "GET /overlay HTTP/1.1\r\nHost: {page}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    };
    assert!(overlay.starts_with("HTTP/1.1 200"), "{overlay}");
    let clients = [
        client("/api/events", "event: counters"),
        client("/api/events", "event: car"),
        client(
            "/api/stream?hz=30&fields=speed_kmh,speed_mph,gear_label,rev_fraction,\
             CurrentEngineRpm,throttle_pct,brake_pct,g_lat,g_long,LapNumber,CurrentLap,LastLap,BestLap",
            "data: ",
        ),
        client("/api/stream?hz=360", "data: "),
    ];
    let seen = |i: usize| clients[i].0.load(Ordering::SeqCst);

    let sender = thread::spawn({
        let stop = stop.clone();
        move || {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut buf = [0u8; 324];
            let mut i = 0u32;
            while !stop.load(Ordering::SeqCst) {
                let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
                p.set_is_race_on(1);
                p.set_timestamp_ms(i);
                p.set_speed(i as f32).unwrap();
                let _ = socket.send_to(&buf, target);
                i += 1;
                // About 1,000 a second: the streams keep up, the loop works.
                if i % 10 == 9 {
                    thread::sleep(Duration::from_millis(10));
                }
            }
        }
    });

    // Warm-up: every client has what it counts, twice over (the page's first
    // counters fill the feed's empty snapshot, which allocates once).
    let deadline = Instant::now() + Duration::from_secs(30);
    while (relay.input_stats().received < WARM_UP || (0..4).any(|i| seen(i) < 2))
        && Instant::now() < deadline
    {
        relay.poll_once(Some(Duration::from_millis(10)));
    }
    let before: Vec<u64> = (0..4).map(seen).collect();
    let received_before = relay.input_stats().received;
    let allocations_before = ALLOCATIONS.load(Ordering::SeqCst);
    ARMED.with(|a| a.set(true));
    while (relay.input_stats().received < received_before + MEASURED
        || (0..4).any(|i| seen(i) < before[i] + 2))
        && Instant::now() < deadline
    {
        relay.poll_once(Some(Duration::from_millis(10)));
    }
    ARMED.with(|a| a.set(false));
    let allocations = ALLOCATIONS.load(Ordering::SeqCst) - allocations_before;
    let measured = relay.input_stats().received - received_before;
    let after: Vec<u64> = (0..4).map(seen).collect();

    stop.store(true, Ordering::SeqCst);
    sender.join().unwrap();
    for (_, handle) in clients {
        handle.join().unwrap();
    }
    received_by(tools);
    let mut last = relay.snapshot();
    Box::new(web).finish(&mut last).unwrap();

    assert!(measured >= MEASURED, "only {measured} packets measured");
    for i in 0..4 {
        assert!(
            after[i] >= before[i] + 2,
            "client {i} got {} while measured (before: {before:?}, after: {after:?})",
            after[i] - before[i]
        );
    }
    assert_eq!(allocations, 0, "{allocations} allocations while relaying");
}
