//! Issue 25: MQTT destinations against a real broker. Debian's `mosquitto` is
//! started on a loopback port of its own (anonymous, with a password file, with
//! TLS); what arrives is read with `mosquitto_sub`, a client that is not ours.
//! Frames go through a relay with MQTT destinations (on a thread, or the real
//! binary stopped with Ctrl-C). The last test needs no broker: a publisher's
//! stop is prompt whatever the broker does.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::bin::Bin;
use common::{
    config, destination, final_json, free_port, listen_toml, receiver, recv, require_tool, Running,
    Sender, Spec, TempPath, CAR_ORDINAL, GEAR, SPEED,
};
use forza_relay::counters::{DropReason, Status};
use forza_relay::output::mqtt::{Broker, MqttSettings};
use forza_relay::relay::mqtt::MqttPublisher;
use forza_relay::report::Snapshot;
use forza_relay::wire::{Format, Packet};
use serde_json::Value;

/// The longest a test waits for a broker to start, a message to arrive or a
/// count to move: only a hang reaches it.
const WAIT: Duration = Duration::from_secs(20);

/// Whether `mosquitto` and `mosquitto_sub` can be run here.
pub(crate) fn mosquitto_available() -> bool {
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
pub(crate) struct Mosquitto {
    child: Child,
    pub(crate) port: u16,
    config: PathBuf,
    log: PathBuf,
}

impl Mosquitto {
    /// Starts mosquitto listening on 127.0.0.1 on a free port with `extra`
    /// lines of configuration, writing its log in `dir`; waits until it takes
    /// a TCP connection. A port found free may be taken by another test before
    /// mosquitto binds it: then it starts again on another (three tries).
    pub(crate) fn start(dir: &Path, extra: &str) -> Mosquitto {
        let config = dir.join("mosquitto.conf");
        let log = dir.join("mosquitto.log");
        let mut tries = 0;
        loop {
            let port = free_port();
            // `user root`: started as root (CI), mosquitto would otherwise
            // switch to the `mosquitto` user, who can read neither the test's
            // key files nor its folder; as anyone else it changes nothing.
            std::fs::write(
                &config,
                format!(
                    "listener {port} 127.0.0.1\nuser root\npersistence false\nlog_dest file {}\n\
                     {extra}\n",
                    log.display()
                ),
            )
            .expect("write mosquitto.conf");
            match Mosquitto::try_run(port, config.clone(), log.clone()) {
                Ok(m) => return m,
                // It ended at once: the likely reason, the port taken since
                // (what it says to stderr, which is not kept, says so).
                Err(said) if tries < 2 && said.starts_with("exited") => tries += 1,
                Err(said) => panic!("mosquitto did not start on port {port}:\n{said}"),
            }
        }
    }

    fn run(port: u16, config: PathBuf, log: PathBuf) -> Mosquitto {
        Mosquitto::try_run(port, config, log)
            .unwrap_or_else(|said| panic!("mosquitto did not start on port {port}:\n{said}"))
    }

    /// Starts mosquitto with `config` and waits until it takes a connection
    /// on `port`; what its log says when it exits or does not answer.
    fn try_run(port: u16, config: PathBuf, log: PathBuf) -> Result<Mosquitto, String> {
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
                return Err(format!("exited ({status}):\n{}", m.log()));
            }
            if Instant::now() >= deadline {
                return Err(format!("no answer within {WAIT:?}:\n{}", m.log()));
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(m)
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

    /// Its address as a destination writes it.
    pub(crate) fn addr(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One message as `mosquitto_sub -F '%r %t %p'` prints it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Message {
    pub(crate) retained: bool,
    pub(crate) topic: String,
    pub(crate) payload: String,
}

/// A `mosquitto_sub` reading one topic, its lines read on a thread; killed
/// when dropped.
pub(crate) struct Sub {
    child: Child,
    messages: Receiver<Message>,
}

impl Sub {
    /// Subscribes to `topic` at 127.0.0.1:`port` with `args` (login, TLS).
    pub(crate) fn start(port: u16, topic: &str, args: &[&str]) -> Sub {
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
    pub(crate) fn next(&self) -> Message {
        self.messages
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("no MQTT message within {WAIT:?}: {e}"))
    }

    /// The retained message of `topic` as a new subscriber gets it. A
    /// subscriber that came before the message was published gets it live,
    /// not flagged retained (a slow relay, under qemu): then a second
    /// subscriber, after it, must get it retained.
    #[track_caller]
    pub(crate) fn retained(port: u16, topic: &str, args: &[&str]) -> Message {
        let first = Sub::start(port, topic, args).next();
        if first.retained {
            return first;
        }
        let m = Sub::start(port, topic, args).next();
        assert!(m.retained, "{topic} is not retained: {first:?}, then {m:?}");
        assert_eq!(m.payload, first.payload, "{topic}");
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

/// Sends frames to a relay, one every `every`, until told to stop or
/// `count` are out; says how many it sent.
struct Stream {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU32>,
    thread: JoinHandle<u32>,
}

impl Stream {
    fn start(to: SocketAddr, every: Duration, count: Option<u32>) -> Stream {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU32::new(0));
        let (flag, counter) = (stop.clone(), sent.clone());
        let thread = thread::spawn(move || {
            let sender = Sender::new(to);
            let mut i = 0;
            while !flag.load(Ordering::SeqCst) && count.is_none_or(|n| i < n) {
                sender.send(&frame(i));
                i += 1;
                counter.store(i, Ordering::SeqCst);
                thread::sleep(every);
            }
            i
        });
        Stream { stop, sent, thread }
    }

    /// Frames sent so far.
    fn sent(&self) -> u32 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Stops it; returns how many frames it sent.
    fn finish(self) -> u32 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the stream did not panic")
    }

    /// Waits until it has sent its count; returns it.
    fn wait(self) -> u32 {
        self.thread.join().expect("the stream did not panic")
    }
}

/// A topic of this test's own.
pub(crate) fn topic(tag: &str) -> String {
    format!("forza-relay-test/{}/{tag}", std::process::id())
}

/// An MQTT `[[destination]]` called `name` publishing to `topic` on `broker`;
/// `options` are extra lines.
fn mqtt_toml(name: &str, broker: &str, topic: &str, options: &str) -> String {
    format!(
        "\n[[destination]]\nname = \"{name}\"\naddr = \"{broker}\"\ntopic = \"{topic}\"\n{options}\n"
    )
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

/// The counters of destination `name` in `s`.
#[track_caller]
fn counts(s: &Snapshot, name: &str) -> forza_relay::counters::DestinationStats {
    destination(s, name).stats
}

#[test]
fn mqtt_destination_publishes_json_frames_at_max_rate_and_says_online_then_offline() {
    if !mosquitto_available() {
        return;
    }
    let dir = TempPath::dir("mosquitto");
    let broker = Mosquitto::start(dir.path(), "allow_anonymous true");
    let topic = topic("json");
    let data = Sub::start(broker.port, &topic, &[]);
    let (raw, raw_addr) = receiver();
    let relay = Running::start(config(
        &(listen_toml("fh6")
            + &common::destination_toml("raw", raw_addr, "same", "")
            + &mqtt_toml("league", &broker.addr(), &topic, "")),
    ));
    assert_eq!(
        Sub::retained(broker.port, &format!("{topic}/status"), &[]).payload,
        "online"
    );
    let league = destination(&relay.snapshot(), "league").clone();
    assert_eq!(league.output.to_string(), "json", "json by default");
    assert_eq!(league.max_rate, 20, "20 a second by default");
    assert_eq!(league.addr, None);
    assert_eq!(league.mqtt.as_ref().unwrap().topic, topic);

    // 150 frames at about 200 a second; at most 20 a second are published.
    let started = Instant::now();
    let stream = Stream::start(relay.addr, Duration::from_millis(5), Some(150));
    let mut seen = Vec::new();
    while seen.len() < 10 {
        let m = data.next();
        assert_eq!(m.topic, topic);
        assert!(!m.retained, "frames are not retained: {m:?}");
        seen.push(check_json(&m.payload));
    }
    assert_eq!(stream.wait(), 150);
    for _ in 0..150 {
        recv(&raw);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order: {seen:?}");
    // The newest frame waits for its slot and goes: the last one arrives.
    let mut last = *seen.last().unwrap();
    while last != 149 {
        last = check_json(&data.next().payload);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let report = relay.stop();
    let league = destination(&report, "league");
    let s = league.stats;
    assert_eq!(s.received, 150, "{report}");
    assert_eq!(
        s.sent + s.dropped(DropReason::RateLimited),
        150,
        "published or replaced by a newer one, nothing else: {report}"
    );
    assert!(s.is_balanced() && s.held == 0, "{s:?}");
    assert!(
        (s.sent as f64) <= elapsed * 20.0 + 2.0,
        "{} sent in {elapsed:.2} s at max_rate 20",
        s.sent
    );
    assert!(s.dropped(DropReason::RateLimited) > 0, "{s:?}");
    assert_eq!(
        counts(&report, "raw").sent,
        150,
        "the UDP destination: every frame"
    );
    // Ctrl-C or not, a stop says "offline" and disconnects cleanly.
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
        &format!("allow_anonymous false\npassword_file {}", passwd.display()),
    );
    let (wrong_topic, right_topic) = (topic("wrong"), topic("influx"));
    let login = ["-u", "driver", "-P", "s3cret pass"];
    let data = Sub::start(broker.port, &right_topic, &login);
    let relay = Running::start(config(
        &(listen_toml("fh6")
            + &mqtt_toml(
                "wrong",
                &broker.addr(),
                &wrong_topic,
                "username = \"driver\"\npassword = \"wrong\"",
            )
            + &mqtt_toml(
                "right",
                &broker.addr(),
                &right_topic,
                "username = \"driver\"\npassword = \"s3cret pass\"\nformat = \"influx\"\n\
                 max_rate = 50",
            )),
    ));
    // Connected before the first frame: none is due while it connects.
    assert_eq!(
        Sub::retained(broker.port, &format!("{right_topic}/status"), &login).payload,
        "online"
    );
    let stream = Stream::start(relay.addr, Duration::from_millis(5), None);
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
    // The wrong password: never connected, every frame due counted, failing.
    let now = relay.wait_until("the wrong login counted", |s| {
        counts(s, "wrong").dropped(DropReason::BrokerUnavailable) >= 5
    });
    let wrong = destination(&now, "wrong");
    assert_eq!(
        (wrong.stats.sent, wrong.status),
        (0, Status::Failing),
        "{now}"
    );
    assert_eq!(destination(&now, "right").status, Status::Ok, "{now}");
    // The password is never shown.
    let json = now.to_json(forza_relay::report::SnapshotKind::Summary);
    assert!(
        !json.contains("s3cret") && !now.to_string().contains("s3cret"),
        "{json}"
    );
    assert!(json.contains("\"password_set\":true"), "{json}");
    stream.finish();
    let report = relay.stop();
    let right = counts(&report, "right");
    assert_eq!(right.dropped(DropReason::BrokerUnavailable), 0, "{report}");
    assert!(right.is_balanced(), "{report}");
    assert_eq!(
        Sub::retained(broker.port, &format!("{right_topic}/status"), &login).payload,
        "offline"
    );
}

/// Issue 25, through the real binary: a broker killed for 2 s costs the UDP
/// destination beside it nothing, the MQTT destination counts what it could
/// not publish, frames flow again within 6 s of the broker's return, and
/// Ctrl-C says "offline".
#[test]
fn binary_mqtt_counts_its_drops_while_the_broker_is_gone_and_ctrl_c_says_offline() {
    if !mosquitto_available() {
        return;
    }
    let dir = TempPath::dir("mosquitto-killed");
    let mut broker = Mosquitto::start(dir.path(), "allow_anonymous true");
    let topic = topic("killed");
    let (raw, raw_addr) = receiver();
    let file = TempPath::file(
        "mqtt.toml",
        &(listen_toml("fh6").replace("interval = 0", "interval = 1")
            + &common::destination_toml("raw", raw_addr, "same", "")
            + &mqtt_toml("league", &broker.addr(), &topic, "")),
    );
    let mut bin = Bin::spawn(
        &["--config", &file.display(), "--stats-format", "json"],
        None,
    );
    let listen = bin.wait_until_running();
    // Every frame reaches the UDP destination, read as it comes.
    let reading = thread::spawn(move || {
        let mut got = 0u32;
        let mut buf = [0u8; 2048];
        while raw.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    let stream = Stream::start(listen, Duration::from_millis(10), None);
    {
        let data = Sub::start(broker.port, &topic, &[]);
        check_json(&data.next().payload);
    }

    broker.kill();
    let killed = Instant::now();
    // The summaries (one a second, JSON on stdout) count the drops.
    loop {
        let line = bin.wait_for_stdout_line("\"event\":\"summary\"");
        let summary: Value = serde_json::from_str(&line).unwrap();
        let league = summary["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == "league")
            .expect("league in the summary")
            .clone();
        if league["broker_unavailable"].as_u64().unwrap() >= 5 {
            assert_eq!(league["status"], "failing", "{league}");
            break;
        }
    }
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
    let sent = stream.finish();
    // The last frame is read before the relay stops.
    let deadline = Instant::now() + Duration::from_secs(10);
    while bin_received(&mut bin) < u64::from(sent) {
        assert!(
            Instant::now() < deadline,
            "the relay did not receive every frame"
        );
    }
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(
        Sub::retained(broker.port, &format!("{topic}/status"), &[]).payload,
        "offline",
        "Ctrl-C: a clean stop"
    );
    assert_eq!(
        reading.join().unwrap(),
        sent,
        "the UDP destination lost nothing"
    );
    let last = final_json(&done.stdout);
    let dest = |name: &str| {
        last["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(dest("raw")["sent"], sent);
    let league = dest("league");
    assert_eq!(league["received"], sent);
    assert!(
        league["broker_unavailable"].as_u64().unwrap() >= 5,
        "{league}"
    );
    assert_eq!(league["addr"], broker.addr());
    assert_eq!(league["topic"], topic.as_str());
    let total = [
        "sent",
        "rate_limited",
        "broker_unavailable",
        "stale",
        "backlog_full",
    ]
    .iter()
    .map(|k| league[*k].as_u64().unwrap())
    .sum::<u64>();
    assert_eq!(total, u64::from(sent), "every frame counted once: {league}");
    // What the publisher did with the frames handed to it, over its two
    // connections: each published or not, none unaccounted for.
    let count = |k: &str| {
        league[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {league}"))
    };
    assert!(count("connections") >= 2, "{league}");
    assert!(count("published") > 0, "{league}");
    assert_eq!(
        count("published") + count("not_published"),
        count("sent"),
        "{league}"
    );
}

/// A broker that never answers, with no frame for longer than a status's
/// window (5 s) before the stop: the final summary says the destination is
/// failing, as the periodic ones said, never idle.
#[test]
fn a_broker_down_at_the_stop_is_failing_in_the_final_summary_too() {
    let topic = topic("never");
    let (_raw, raw_addr) = receiver();
    let nobody = format!("mqtt://127.0.0.1:{}", free_port());
    let file = TempPath::file(
        "mqtt-down.toml",
        &(listen_toml("fh6").replace("interval = 0", "interval = 1")
            + &common::destination_toml("raw", raw_addr, "same", "")
            + &mqtt_toml("league", &nobody, &topic, "")),
    );
    let mut bin = Bin::spawn(
        &["--config", &file.display(), "--stats-format", "json"],
        None,
    );
    let listen = bin.wait_until_running();
    let sent = Stream::start(listen, Duration::from_millis(10), Some(20)).wait();
    let last_frame = Instant::now();
    let league = |summary: &Value| -> Value {
        summary["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == "league")
            .expect("league in the summary")
            .clone()
    };
    // Past the status window since the last frame, the periodic summary
    // still says failing: its broker is down.
    loop {
        let line = bin.wait_for_stdout_line("\"event\":\"summary\"");
        let periodic = league(&serde_json::from_str(&line).unwrap());
        if last_frame.elapsed() > Duration::from_secs(6) {
            assert_eq!(periodic["status"], "failing", "{periodic}");
            break;
        }
    }
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let league = league(&final_json(&done.stdout));
    assert_eq!(league["status"], "failing", "{league}");
    assert_eq!(league["received"], sent, "{league}");
    assert_eq!(league["sent"], 0, "{league}");
}

/// What the binary received so far, from its next JSON summary.
fn bin_received(bin: &mut Bin) -> u64 {
    let line = bin.wait_for_stdout_line("\"event\":\"summary\"");
    let summary: Value = serde_json::from_str(&line).unwrap();
    summary["input"]["received"].as_u64().unwrap()
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
        &format!(
            "allow_anonymous true\ncafile {}\ncertfile {}\nkeyfile {}",
            ca.display(),
            cert.display(),
            key.display()
        ),
    );
    let mqtts = format!("mqtts://127.0.0.1:{}", broker.port);
    let (system_topic, trusted_topic) = (topic("tls-system"), topic("tls"));
    let tls_args = ["--cafile", ca.to_str().unwrap()];
    let data = Sub::start(broker.port, &trusted_topic, &tls_args);
    let relay = Running::start(config(
        &(listen_toml("fh6")
            + &mqtt_toml("system", &mqtts, &system_topic, "")
            + &mqtt_toml(
                "trusted",
                &mqtts,
                &trusted_topic,
                &format!("ca_file = {:?}", ca.display().to_string()),
            )),
    ));
    let stream = Stream::start(relay.addr, Duration::from_millis(5), None);
    // With the CA as ca_file: connected, over TLS.
    for _ in 0..3 {
        check_json(&data.next().payload);
    }
    // The system's roots do not know this CA: no connection, frames counted.
    let now = relay.wait_until("system roots refused", |s| {
        counts(s, "system").dropped(DropReason::BrokerUnavailable) >= 3
    });
    assert_eq!(counts(&now, "system").sent, 0, "{now}");
    assert_eq!(destination(&now, "system").status, Status::Failing, "{now}");
    assert_eq!(
        destination(&now, "trusted")
            .mqtt
            .as_ref()
            .unwrap()
            .ca_file
            .as_deref(),
        Some(ca.to_str().unwrap())
    );
    assert!(stream.sent() > 0);
    stream.finish();
    relay.stop();
    assert_eq!(
        Sub::retained(broker.port, &format!("{trusted_topic}/status"), &tls_args).payload,
        "offline"
    );
}

/// A publisher's stop is prompt whatever the broker does: nothing listening
/// (every attempt refused), and a server that takes the connection and never
/// answers.
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
        let (publisher, mut outbox) =
            MqttPublisher::start(MqttSettings::new(broker, topic("stop"))).unwrap();
        if port == silent_port {
            accepted
                .recv_timeout(WAIT)
                .expect("the publisher connected to the silent server");
        } else {
            let deadline = Instant::now() + WAIT;
            while !publisher.is_down() {
                assert!(Instant::now() < deadline, "{what}: never down");
                thread::sleep(Duration::from_millis(10));
            }
        }
        assert!(!outbox.is_connected(), "{what}");
        // A payload the relay would not hand over; taken and not published.
        assert!(outbox.push(b"{}"));
        let asked = Instant::now();
        let counts = publisher.stop();
        let took = asked.elapsed();
        assert!(
            took < Duration::from_secs(3),
            "{what}: the stop took {took:?}"
        );
        assert_eq!(
            (counts.published, counts.connected, counts.connections),
            (0, false, 0),
            "{what}: {counts:?}"
        );
    }
}
