//! Issue 25: the MQTT publisher against a real broker. Debian's `mosquitto` is
//! started on a loopback port of its own (anonymous, with a password file, with
//! TLS); what arrives is read with `mosquitto_sub`, a client that is not ours.
//! Frames are fed through a tap, as the relay feeds it. The last test needs no
//! broker: a stop is prompt whatever the broker does.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use common::{free_port, require_tool, Spec, TempPath, CAR_ORDINAL, GEAR, SPEED};
use forza_relay::output::mqtt::{Broker, MqttCounts, MqttPublisher, MqttSettings, Roots};
use forza_relay::output::Encoding;
use forza_relay::tap::{self, TapProducer, DEFAULT_CAPACITY};
use forza_relay::wire::{Format, Input, Packet};
use serde_json::Value;

/// The longest a test waits for a broker to start, a message to arrive or a
/// count to move: only a hang reaches it.
const WAIT: Duration = Duration::from_secs(20);

/// Whether `mosquitto` and `mosquitto_sub` can be run here.
fn mosquitto_available() -> bool {
    let runs = |tool: &str, arg: &str| {
        Command::new(tool)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    require_tool(
        "mosquitto",
        runs("mosquitto", "-h")
            && runs("mosquitto_sub", "--help")
            && runs("mosquitto_passwd", "-h"),
        "the MQTT checks need Debian's mosquitto and mosquitto-clients",
    )
}

/// A running mosquitto with a configuration of the test's, killed (by its id)
/// when dropped; its folder is the test's.
struct Mosquitto {
    child: Child,
    port: u16,
    config: PathBuf,
    log: PathBuf,
}

impl Mosquitto {
    /// Starts mosquitto listening on 127.0.0.1:`port` with `extra` lines of
    /// configuration, writing its log in `dir`; waits until it takes a TCP
    /// connection.
    fn start(dir: &Path, port: u16, extra: &str) -> Mosquitto {
        let config = dir.join("mosquitto.conf");
        let log = dir.join("mosquitto.log");
        // `user root`: started as root (CI), mosquitto would otherwise switch to
        // the `mosquitto` user, who can read neither the test's key files nor
        // its folder; as anyone else it changes nothing.
        std::fs::write(
            &config,
            format!(
                "listener {port} 127.0.0.1\nuser root\npersistence false\nlog_dest file {}\n\
                 {extra}\n",
                log.display()
            ),
        )
        .expect("write mosquitto.conf");
        Mosquitto::run(port, config, log)
    }

    fn run(port: u16, config: PathBuf, log: PathBuf) -> Mosquitto {
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mosquitto");
        let mut m = Mosquitto {
            child,
            port,
            config,
            log,
        };
        let deadline = Instant::now() + WAIT;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
            if let Ok(Some(status)) = m.child.try_wait() {
                panic!("mosquitto exited ({status}):\n{}", m.log());
            }
            assert!(
                Instant::now() < deadline,
                "mosquitto did not start:\n{}",
                m.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
        m
    }

    /// Kills it at once (SIGKILL: no goodbye to the clients).
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again with the same configuration and port.
    fn restart(&mut self) {
        self.kill();
        let again = Mosquitto::run(self.port, self.config.clone(), self.log.clone());
        let old = std::mem::replace(self, again);
        drop(old);
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn broker(&self) -> Broker {
        Broker::parse(&format!("mqtt://127.0.0.1:{}", self.port)).unwrap()
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One message as `mosquitto_sub -F '%r %t %p'` prints it.
#[derive(Debug, Clone, PartialEq)]
struct Message {
    retained: bool,
    topic: String,
    payload: String,
}

/// A `mosquitto_sub` reading one topic, its lines read on a thread; killed
/// when dropped.
struct Sub {
    child: Child,
    messages: Receiver<Message>,
}

impl Sub {
    /// Subscribes to `topic` at 127.0.0.1:`port` with `args` (login, TLS).
    fn start(port: u16, topic: &str, args: &[&str]) -> Sub {
        let mut child = Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-t", topic])
            .args(["-F", "%r %t %p"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mosquitto_sub");
        let stdout = child.stdout.take().expect("piped");
        let (tx, messages) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // An influx payload's own line end prints an empty line.
                let mut parts = line.splitn(3, ' ');
                let (Some(r), Some(t), Some(p)) = (parts.next(), parts.next(), parts.next()) else {
                    continue;
                };
                let message = Message {
                    retained: r == "1",
                    topic: t.to_owned(),
                    payload: p.to_owned(),
                };
                if tx.send(message).is_err() {
                    break;
                }
            }
        });
        Sub { child, messages }
    }

    /// The next message; fails the test after [`WAIT`].
    #[track_caller]
    fn next(&self) -> Message {
        self.messages
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("no MQTT message within {WAIT:?}: {e}"))
    }

    /// The retained message of `topic` as a new subscriber gets it.
    #[track_caller]
    fn retained(port: u16, topic: &str, args: &[&str]) -> Message {
        let sub = Sub::start(port, topic, args);
        let m = sub.next();
        assert!(m.retained, "{topic} is not retained: {m:?}");
        m
    }
}

impl Drop for Sub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rpm of frame `i`: a different value in each.
fn rpm(i: u32) -> f32 {
    2_000.0 + i as f32 * 7.25
}

/// Frame `i`: an fh6 packet of the named test values, TimestampMS 1000 + i.
fn frame(i: u32) -> Vec<u8> {
    let mut bytes = Spec::new(Format::Fh6, 1_000 + i).build();
    Packet::new_checked(&mut bytes[..], Format::Fh6)
        .unwrap()
        .set_current_engine_rpm(rpm(i));
    bytes
}

/// Pushes frames into the tap as the relay would, one every `every`, until
/// told to stop or `count` are in; returns how many it pushed.
struct Feeder {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<u32>,
}

impl Feeder {
    fn start(mut producer: TapProducer, every: Duration, count: Option<u32>) -> Feeder {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::spawn(move || {
            let from: SocketAddr = "127.0.0.1:50000".parse().unwrap();
            let to: SocketAddr = "127.0.0.1:5400".parse().unwrap();
            let mut i = 0;
            while !flag.load(Ordering::SeqCst) && count.is_none_or(|n| i < n) {
                producer.push(SystemTime::now(), from, to, &frame(i));
                i += 1;
                thread::sleep(every);
            }
            i
        });
        Feeder { stop, thread }
    }

    /// Stops it; returns how many frames it pushed.
    fn finish(self) -> u32 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the feeder did not panic")
    }

    /// Waits until it has pushed its count; returns it.
    fn wait(self) -> u32 {
        self.thread.join().expect("the feeder did not panic")
    }
}

/// Waits (at most [`WAIT`]) until `done` holds for the publisher's counts.
#[track_caller]
fn wait_for(
    publisher: &MqttPublisher,
    what: &str,
    done: impl Fn(&MqttCounts) -> bool,
) -> MqttCounts {
    let deadline = Instant::now() + WAIT;
    loop {
        let counts = publisher.counts();
        if done(&counts) {
            return counts;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: never so in {WAIT:?}: {counts:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// A topic of this test's own.
fn topic(tag: &str) -> String {
    format!("forza-relay-test/{}/{tag}", std::process::id())
}

fn settings(broker: Broker, topic: &str) -> MqttSettings {
    MqttSettings::new(broker, topic, Input::Fixed(Format::Fh6))
}

/// Checks a JSON frame field by field against the frame it says it is (its
/// TimestampMS); returns that frame's number.
#[track_caller]
fn check_json(payload: &str) -> u32 {
    let o: Value = serde_json::from_str(payload).unwrap_or_else(|e| panic!("{e}: {payload}"));
    let i = o["TimestampMS"].as_u64().expect("TimestampMS") as u32 - 1_000;
    assert_eq!(o["format"], "fh6", "{payload}");
    assert_eq!(o["IsRaceOn"], 1);
    assert_eq!(o["CurrentEngineRpm"].as_f64().unwrap() as f32, rpm(i));
    assert_eq!(o["Speed"].as_f64().unwrap() as f32, SPEED);
    assert_eq!(o["speed_kmh"].as_f64().unwrap() as f32, SPEED * 3.6);
    assert_eq!(o["Gear"], GEAR);
    assert_eq!(o["gear_label"], GEAR.to_string());
    assert_eq!(o["CarOrdinal"], CAR_ORDINAL);
    i
}

#[test]
fn mqtt_publishes_json_frames_at_max_rate_and_says_online_then_offline() {
    if !mosquitto_available() {
        return;
    }
    let dir = TempPath::dir("mosquitto");
    let broker = Mosquitto::start(dir.path(), free_port(), "allow_anonymous true");
    let topic = topic("json");
    let data = Sub::start(broker.port, &topic, &[]);
    let (producer, tap) = tap::tap(DEFAULT_CAPACITY);
    let started = Instant::now();
    let publisher = MqttPublisher::start(settings(broker.broker(), &topic), tap).unwrap();
    wait_for(&publisher, "connected", |c| c.connected);
    assert_eq!(
        Sub::retained(broker.port, &format!("{topic}/status"), &[]).payload,
        "online"
    );

    // 150 frames at about 200 a second; at most 20 a second are published.
    let feeder = Feeder::start(producer, Duration::from_millis(5), Some(150));
    let mut seen = Vec::new();
    while seen.len() < 10 {
        let m = data.next();
        assert_eq!(m.topic, topic);
        assert!(!m.retained, "frames are not retained: {m:?}");
        seen.push(check_json(&m.payload));
    }
    assert_eq!(feeder.wait(), 150);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order: {seen:?}");
    // Every frame taken is published or replaced by a newer one: nothing else.
    let counts = wait_for(&publisher, "all taken", |c| {
        c.taken == 150 && c.published + c.superseded == 150
    });
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        (counts.published as f64) <= elapsed * 20.0 + 2.0,
        "{} published in {elapsed:.2} s at max_rate 20",
        counts.published
    );
    assert!(counts.superseded > 0, "{counts:?}");
    assert_eq!(
        (
            counts.not_published,
            counts.ignored,
            counts.stale,
            counts.connections
        ),
        (0, 0, 0, 1),
        "{counts:?}"
    );
    // The last frame is always published: newest wins.
    let mut last = *seen.last().unwrap();
    while last != 149 {
        last = check_json(&data.next().payload);
    }

    let counts = publisher.stop();
    assert!(!counts.connected);
    assert_eq!(
        Sub::retained(broker.port, &format!("{topic}/status"), &[]).payload,
        "offline"
    );
    assert!(
        broker.log().contains("disconnected"),
        "a clean disconnect:\n{}",
        broker.log()
    );
}

#[test]
fn mqtt_with_a_password_connects_with_the_right_one_only_and_sends_influx_lines() {
    if !mosquitto_available() {
        return;
    }
    let dir = TempPath::dir("mosquitto-login");
    let passwd = dir.path().join("passwd");
    let made = Command::new("mosquitto_passwd")
        .args(["-b", "-c"])
        .arg(&passwd)
        .args(["driver", "s3cret pass"])
        .status()
        .expect("run mosquitto_passwd");
    assert!(made.success());
    let broker = Mosquitto::start(
        dir.path(),
        free_port(),
        &format!("allow_anonymous false\npassword_file {}", passwd.display()),
    );
    let topic = topic("influx");
    let login = ["-u", "driver", "-P", "s3cret pass"];
    let data = Sub::start(broker.port, &topic, &login);

    // The wrong password: never connected, every frame due counted.
    let (producer, tap) = tap::tap(DEFAULT_CAPACITY);
    let mut wrong = settings(broker.broker(), &topic);
    wrong.username = Some("driver".into());
    wrong.password = Some("wrong".into());
    let publisher = MqttPublisher::start(wrong, tap).unwrap();
    let feeder = Feeder::start(producer, Duration::from_millis(5), None);
    let counts = wait_for(&publisher, "frames not published", |c| c.not_published >= 5);
    assert_eq!(
        (counts.connected, counts.connections, counts.published),
        (false, 0, 0)
    );
    let counts = publisher.stop();
    feeder.finish();
    assert_eq!(counts.published, 0, "{counts:?}");

    // The right one, influx lines.
    let (producer, tap) = tap::tap(DEFAULT_CAPACITY);
    let mut right = settings(broker.broker(), &topic);
    right.username = Some("driver".into());
    right.password = Some("s3cret pass".into());
    right.encoding = Encoding::Influx;
    right.max_rate = 50;
    let publisher = MqttPublisher::start(right, tap).unwrap();
    wait_for(&publisher, "connected", |c| c.connected);
    let feeder = Feeder::start(producer, Duration::from_millis(5), None);
    for _ in 0..5 {
        let m = data.next();
        let (series, rest) = m.payload.split_once(' ').expect("tags, then fields");
        assert_eq!(series, format!("forza,game=fh6,car={CAR_ORDINAL},class=S2"));
        let (fields, stamp) = rest.rsplit_once(' ').expect("fields, then the time");
        assert!(stamp.parse::<u128>().is_ok(), "{stamp}");
        let fields: BTreeMap<&str, &str> = fields
            .split(',')
            .map(|kv| kv.split_once('=').expect("key=value"))
            .collect();
        let i = fields["TimestampMS"]
            .trim_end_matches('i')
            .parse::<u32>()
            .unwrap()
            - 1_000;
        assert_eq!(fields["CurrentEngineRpm"].parse::<f32>().unwrap(), rpm(i));
        assert_eq!(fields["Speed"].parse::<f32>().unwrap(), SPEED);
        assert_eq!(fields["Gear"], format!("{GEAR}i"));
        assert_eq!(fields["gear_label"], format!("\"{GEAR}\""));
    }
    feeder.finish();
    let counts = publisher.stop();
    assert_eq!(counts.not_published, 0, "{counts:?}");
    assert_eq!(
        Sub::retained(broker.port, &format!("{topic}/status"), &login).payload,
        "offline"
    );
}

#[test]
fn mqtt_counts_what_it_cannot_publish_while_the_broker_is_gone_and_flows_again() {
    if !mosquitto_available() {
        return;
    }
    let dir = TempPath::dir("mosquitto-killed");
    let mut broker = Mosquitto::start(dir.path(), free_port(), "allow_anonymous true");
    let topic = topic("killed");
    let (producer, tap) = tap::tap(DEFAULT_CAPACITY);
    let publisher = MqttPublisher::start(settings(broker.broker(), &topic), tap).unwrap();
    let feeder = Feeder::start(producer, Duration::from_millis(10), None);
    {
        let data = Sub::start(broker.port, &topic, &[]);
        check_json(&data.next().payload);
    }

    broker.kill();
    let killed = Instant::now();
    let lost = wait_for(&publisher, "frames not published", |c| {
        !c.connected && c.not_published >= 5
    });
    assert_eq!(lost.connections, 1);
    // Down for 2 s.
    thread::sleep(Duration::from_secs(2).saturating_sub(killed.elapsed()));
    broker.restart();
    let back = Instant::now();
    let data = Sub::start(broker.port, &topic, &[]);
    check_json(&data.next().payload);
    let flowing = back.elapsed();
    assert!(
        flowing <= Duration::from_secs(6),
        "frames flowed again {flowing:?} after the broker's return"
    );
    // The broker forgot everything (no persistence): "online" is said again.
    assert_eq!(
        Sub::retained(broker.port, &format!("{topic}/status"), &[]).payload,
        "online"
    );
    feeder.finish();
    let counts = publisher.stop();
    assert_eq!(counts.connections, 2, "{counts:?}");
    assert!(counts.not_published >= lost.not_published, "{counts:?}");
}

/// Makes a CA and a certificate for 127.0.0.1 signed by it with `openssl`;
/// returns (ca.pem, server.pem, server.key).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec![
        "req", "-x509", "-days", "2", "-keyout", "ca.key", "-out", "ca.pem",
    ];
    ca.extend(ec);
    ca.extend([
        "-subj",
        "/CN=forza-relay test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    run(&ca);
    let mut csr = vec![
        "req",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ];
    csr.extend(ec);
    run(&csr);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-days",
        "2",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-extfile",
        "server.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

#[test]
fn mqtts_with_a_ca_file_reaches_a_tls_broker_that_system_roots_do_not_trust() {
    if !mosquitto_available()
        || !require_tool(
            "openssl",
            Command::new("openssl").arg("version").output().is_ok(),
            "the TLS check makes its certificates with openssl",
        )
    {
        return;
    }
    let dir = TempPath::dir("mosquitto-tls");
    let (ca, cert, key) = certificates(dir.path());
    let broker = Mosquitto::start(
        dir.path(),
        free_port(),
        &format!(
            "allow_anonymous true\ncafile {}\ncertfile {}\nkeyfile {}",
            ca.display(),
            cert.display(),
            key.display()
        ),
    );
    let mqtts = Broker::parse(&format!("mqtts://127.0.0.1:{}", broker.port)).unwrap();
    let topic = topic("tls");
    let tls_args = ["--cafile", ca.to_str().unwrap()];

    // The system's roots do not know this CA: no connection, frames counted.
    let (producer, tap) = tap::tap(DEFAULT_CAPACITY);
    let mut system = settings(mqtts.clone(), &topic);
    system.roots = Roots::System;
    match MqttPublisher::start(system, tap) {
        Ok(publisher) => {
            let feeder = Feeder::start(producer, Duration::from_millis(5), None);
            let counts = wait_for(&publisher, "refused", |c| c.not_published >= 3);
            assert_eq!((counts.connections, counts.published), (0, 0), "{counts:?}");
            feeder.finish();
            publisher.stop();
        }
        // A machine with no root certificate at all says so at the start.
        Err(e) => assert!(e.to_string().contains("ca_file"), "{e}"),
    }

    // With the CA as ca_file: connected, over TLS.
    let data = Sub::start(broker.port, &topic, &tls_args);
    let (producer, tap) = tap::tap(DEFAULT_CAPACITY);
    let mut trusted = settings(mqtts, &topic);
    trusted.roots = Roots::CaFile(ca.clone());
    let publisher = MqttPublisher::start(trusted, tap).unwrap();
    wait_for(&publisher, "connected", |c| c.connected);
    let feeder = Feeder::start(producer, Duration::from_millis(5), None);
    for _ in 0..3 {
        check_json(&data.next().payload);
    }
    feeder.finish();
    publisher.stop();
    assert_eq!(
        Sub::retained(broker.port, &format!("{topic}/status"), &tls_args).payload,
        "offline"
    );
}

/// A stop is prompt whatever the broker does: nothing listening (every
/// attempt refused), and a server that takes the connection and never answers.
#[test]
fn mqtt_stops_within_seconds_whatever_the_broker_does() {
    let closed = free_port();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let (accepted_tx, accepted) = mpsc::channel();
    thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().take(8) {
            let Ok(stream) = stream else { break };
            held.push(stream);
            let _ = accepted_tx.send(());
        }
    });
    for (what, port) in [
        ("nothing listening", closed),
        ("a silent server", silent_port),
    ] {
        let broker = Broker::parse(&format!("mqtt://127.0.0.1:{port}")).unwrap();
        let (producer, tap) = tap::tap(DEFAULT_CAPACITY);
        let publisher = MqttPublisher::start(settings(broker, &topic("stop")), tap).unwrap();
        let feeder = Feeder::start(producer, Duration::from_millis(5), None);
        let counts = wait_for(&publisher, what, |c| c.not_published >= 3);
        assert_eq!(
            (counts.connected, counts.published),
            (false, 0),
            "{what}: {counts:?}"
        );
        if port == silent_port {
            accepted
                .recv_timeout(WAIT)
                .expect("the publisher connected to the silent server");
        }
        let asked = Instant::now();
        let counts = publisher.stop();
        let took = asked.elapsed();
        feeder.finish();
        assert!(
            took < Duration::from_secs(3),
            "{what}: the stop took {took:?}"
        );
        assert_eq!(counts.published, 0);
    }
}
