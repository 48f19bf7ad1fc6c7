//! Issue 25: influx lines read by a real InfluxDB. Debian's `influxd` (1.6) is
//! started on loopback ports of its own, with a temporary folder and two UDP
//! listeners; frames are sent to them by the real binary with an `influx`
//! destination, and encoded by `forza_relay::output` for every format, and
//! read back over HTTP with InfluxQL.

use crate::common;

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::bin::Bin;
use common::{free_port, http, require_tool, Sender, Spec, TempPath, CAR_ORDINAL, SPEED};
use forza_relay::output::{Encoder, Encoding, Frame, Selection};
use forza_relay::wire::{Format, Packet, Puddle};
use serde_json::Value;

/// The longest influxd may take to answer /ping, and the written points to be
/// read back: only a hang reaches it (it starts in a few seconds).
const WAIT: Duration = Duration::from_secs(60);

/// A running influxd, killed (by its id) and its folder removed when dropped.
pub(crate) struct Influxd {
    child: Child,
    http: SocketAddr,
    /// The UDP listener writing into database `forza`.
    pub(crate) udp: SocketAddr,
    /// The UDP listener writing into database `formats`.
    udp_formats: SocketAddr,
    dir: TempPath,
}

impl Influxd {
    /// Starts influxd with everything in a temporary folder and every port
    /// on loopback; waits (at most [`WAIT`]) until /ping answers. A port
    /// found free may be taken by another test before influxd binds it: then
    /// it starts again on others (three tries).
    pub(crate) fn start() -> Influxd {
        let mut tries = 0;
        loop {
            match Influxd::try_start() {
                Ok(influxd) => return influxd,
                Err(said) if tries < 2 && said.starts_with("exited") => tries += 1,
                Err(said) => panic!("influxd did not start: {said}"),
            }
        }
    }

    /// One try of [`Influxd::start`]: what its log says when it ends early or
    /// does not answer.
    fn try_start() -> Result<Influxd, String> {
        let dir = TempPath::dir("influxd");
        let [rpc, http, udp, udp_formats] = [(); 4].map(|()| free_port());
        let d = dir.display();
        // Every service that is not needed is off; the UDP listeners flush a
        // batch after 10 ms (the default waits a second).
        let config = format!(
            r#"reporting-disabled = true
bind-address = "127.0.0.1:{rpc}"
[meta]
  dir = "{d}/meta"
  logging-enabled = false
[data]
  dir = "{d}/data"
  wal-dir = "{d}/wal"
  query-log-enabled = false
[retention]
  enabled = false
[shard-precreation]
  enabled = false
[monitor]
  store-enabled = false
[subscriber]
  enabled = false
[continuous_queries]
  enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:{http}"
  log-enabled = false
[[udp]]
  enabled = true
  bind-address = "127.0.0.1:{udp}"
  database = "forza"
  batch-size = 1000
  batch-timeout = "10ms"
[[udp]]
  enabled = true
  bind-address = "127.0.0.1:{udp_formats}"
  database = "formats"
  batch-size = 1000
  batch-timeout = "10ms"
"#
        );
        let file = dir.path().join("influxdb.conf");
        std::fs::write(&file, config).expect("write influxdb.conf");
        let log = std::fs::File::create(dir.path().join("influxd.log")).expect("a log file");
        let child = Command::new("influxd")
            .arg("-config")
            .arg(&file)
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a second handle"))
            .stderr(log)
            .spawn()
            .expect("start influxd");
        let mut influxd = Influxd {
            child,
            http: ([127, 0, 0, 1], http).into(),
            udp: ([127, 0, 0, 1], udp).into(),
            udp_formats: ([127, 0, 0, 1], udp_formats).into(),
            dir,
        };
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(Some(status)) = influxd.child.try_wait() {
                return Err(format!("exited ({status}):\n{}", influxd.log()));
            }
            let up = TcpStream::connect_timeout(&influxd.http, Duration::from_secs(1)).is_ok()
                && http::get(influxd.http, "/ping", &[]).status == 204;
            if up {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "no answer to /ping within {WAIT:?}:\n{}",
                    influxd.log()
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
        for db in ["forza", "formats"] {
            influxd.query("", &format!("CREATE DATABASE {db}"));
        }
        Ok(influxd)
    }

    /// What influxd printed so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("influxd.log")).unwrap_or_default()
    }

    /// The first series of the answer to `q` in database `db`, times in ns;
    /// `Value::Null` when there is none yet.
    #[track_caller]
    pub(crate) fn query(&self, db: &str, q: &str) -> Value {
        let body = format!("db={}&epoch=ns&q={}", encode(db), encode(q));
        let reply = http::request(
            self.http,
            "POST",
            "/query",
            &["Content-Type: application/x-www-form-urlencoded"],
            &body,
        );
        assert_eq!(reply.status, 200, "{q}: {}", reply.body);
        let json = reply.json();
        let result = &json["results"][0];
        assert!(result.get("error").is_none(), "{q}: {json}");
        result["series"].clone()
    }

    /// Polls `q` until `done` holds for its series (at most [`WAIT`]); returns them.
    #[track_caller]
    pub(crate) fn query_until(&self, db: &str, q: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let series = self.query(db, q);
            if done(&series) {
                return series;
            }
            assert!(
                Instant::now() < deadline,
                "{q} gave {series} for {WAIT:?}:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Influxd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` for a form body: everything but letters and digits percent-encoded.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Whether influxd can be started here.
pub(crate) fn influxd_available() -> bool {
    require_tool(
        "influxd",
        Command::new("influxd")
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
        "the InfluxDB check needs Debian's influxdb (1.x)",
    )
}

/// The rpm of FH6 frame `i`: a different value in each.
fn rpm(i: u32) -> f32 {
    3_000.0 + i as f32 * 12.25
}

/// The nanoseconds since the epoch of `t`.
fn nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

#[test]
fn influxdb_reads_every_frame_of_120_with_their_values_tags_and_times() {
    if !influxd_available() {
        return;
    }
    let influxd = Influxd::start();
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a sender");
    let mut encoder = Encoder::new(Encoding::Influx, &Selection::all());
    let mut line = Vec::new();
    // A minute ago, 8 ms apart: each frame a point of its own.
    let t0 = SystemTime::now() - Duration::from_secs(60);
    let time = |i: u32| t0 + Duration::from_millis(8 * u64::from(i));
    for i in 0..120 {
        let mut bytes = Spec::new(Format::Fh6, 1_000 + i).build();
        let mut p = Packet::new_checked(&mut bytes[..], Format::Fh6).unwrap();
        p.set_current_engine_rpm(rpm(i));
        p.set_gear((i % 6 + 1) as u8).unwrap();
        let frame = Frame {
            payload: &bytes,
            format: Format::Fh6,
            time: time(i),
        };
        encoder.encode(&frame, &mut line).expect("an fh6 frame");
        socket.send_to(&line, influxd.udp).expect("send a line");
        // 500 a second: the listener reads as fast, with room to spare.
        thread::sleep(Duration::from_millis(2));
    }

    let count = influxd.query_until("forza", r#"SELECT count("Speed") FROM forza"#, |s| {
        s[0]["values"][0][1] == 120
    });
    assert_eq!(count[0]["values"][0][1], 120, "{count}");
    let last = influxd.query(
        "forza",
        r#"SELECT last("CurrentEngineRpm") FROM forza WHERE game = 'fh6' AND car = '3141' AND class = 'S2'"#,
    );
    let row = &last[0]["values"][0];
    assert_eq!(row[1].as_f64().unwrap() as f32, rpm(119), "{last}");
    assert_eq!(row[0].as_i64().unwrap(), nanos(time(119)), "{last}");
    // One frame, every value by name as it was sent.
    let first = influxd.query(
        "forza",
        &format!(
            r#"SELECT "CurrentEngineRpm", "Speed", "TimestampMS", "Gear", "gear_label", "speed_kmh", "CarOrdinal", "WheelInPuddleFL" FROM forza WHERE time = {}"#,
            nanos(time(4))
        ),
    );
    let columns: Vec<&str> = first[0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let values = first[0]["values"][0].as_array().unwrap();
    let get = |name: &str| &values[columns.iter().position(|c| *c == name).unwrap()];
    assert_eq!(get("CurrentEngineRpm").as_f64().unwrap() as f32, rpm(4));
    assert_eq!(get("Speed").as_f64().unwrap() as f32, SPEED);
    assert_eq!(get("TimestampMS"), 1_004);
    assert_eq!(get("Gear"), 5);
    assert_eq!(get("gear_label"), "5");
    assert_eq!(get("speed_kmh").as_f64().unwrap() as f32, SPEED * 3.6);
    assert_eq!(get("CarOrdinal"), i64::from(CAR_ORDINAL));
    assert_eq!(get("WheelInPuddleFL"), 0.0);
    // The types InfluxDB gave the fields: what the first line said, kept.
    let keys = influxd.query("forza", "SHOW FIELD KEYS FROM forza");
    let types: std::collections::BTreeMap<&str, &str> = keys[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kv| (kv[0].as_str().unwrap(), kv[1].as_str().unwrap()))
        .collect();
    assert_eq!(types["Gear"], "integer");
    assert_eq!(types["TimestampMS"], "integer");
    assert_eq!(types["Speed"], "float");
    assert_eq!(types["WheelInPuddleFL"], "float");
    assert_eq!(types["gear_label"], "string");
    assert!(!types.contains_key("recv_time"), "{types:?}");
}

/// Through the real binary: a relay with an `influx` destination pointed at
/// influxd's UDP listener, 120 frames at 120 a second; InfluxDB counts them
/// all, and the last one's rpm, tags and time read back as sent.
#[test]
fn influxdb_counts_all_120_frames_the_relay_sends_as_influx_lines() {
    if !influxd_available() {
        return;
    }
    let influxd = Influxd::start();
    let to = format!("{},format=influx,name=influxdb", influxd.udp);
    let mut bin = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--input",
            "fh6",
            "--to",
            &to,
            "--stats-interval",
            "0",
        ],
        None,
    );
    let listen = bin.wait_until_running();
    let sender = Sender::new(listen);
    let before = SystemTime::now();
    let start = Instant::now();
    for i in 0..120 {
        let mut bytes = Spec::new(Format::Fh6, 1_000 + i).build();
        Packet::new_checked(&mut bytes[..], Format::Fh6)
            .unwrap()
            .set_current_engine_rpm(rpm(i));
        let due = start + Duration::from_secs(u64::from(i)) / 120;
        thread::sleep(due.saturating_duration_since(Instant::now()));
        sender.send(&bytes);
    }
    let count = influxd.query_until("forza", r#"SELECT count("Speed") FROM forza"#, |s| {
        s[0]["values"][0][1] == 120
    });
    assert_eq!(count[0]["values"][0][1], 120, "{count}");
    let last = influxd.query(
        "forza",
        &format!(
            r#"SELECT last("CurrentEngineRpm") FROM forza WHERE game = 'fh6' AND car = '{CAR_ORDINAL}' AND class = 'S2'"#
        ),
    );
    let row = &last[0]["values"][0];
    assert_eq!(row[1].as_f64().unwrap() as f32, rpm(119), "{last}");
    let newest = influxd.query("forza", r#"SELECT last("TimestampMS") FROM forza"#);
    assert_eq!(newest[0]["values"][0][1], 1_119, "{newest}");
    // Stamped with when the relay received it.
    let stamp = row[0].as_i64().unwrap();
    assert!(
        stamp >= nanos(before) && stamp <= nanos(SystemTime::now()),
        "{stamp} is not a receive time of this run"
    );
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_summary_line("influxdb", influxd.udp, "influx", 120);
}

/// One line of every format into one measurement: no field changes type
/// between games (InfluxDB would refuse the line), WheelInPuddle included.
#[test]
fn influxdb_takes_a_line_of_every_format_into_one_measurement() {
    if !influxd_available() {
        return;
    }
    let influxd = Influxd::start();
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a sender");
    let mut encoder = Encoder::new(Encoding::Influx, &Selection::all());
    let mut line = Vec::new();
    let t0 = SystemTime::now() - Duration::from_secs(60);
    // fh6 first: its WheelInPuddle is an S32 flag, the others' an F32 depth.
    let formats = [
        Format::Fh6,
        Format::Fh5,
        Format::Fh4,
        Format::Fm2023,
        Format::Fm7,
        Format::Sled,
    ];
    for (i, format) in formats.into_iter().enumerate() {
        let puddle = match format {
            Format::Fh6 => Puddle::Flag(1),
            _ => Puddle::Depth(0.5),
        };
        let bytes = Spec::new(format, i as u32).puddle([puddle; 4]).build();
        let frame = Frame {
            payload: &bytes,
            format,
            time: t0 + Duration::from_millis(10 * i as u64),
        };
        encoder.encode(&frame, &mut line).expect("a frame");
        socket.send_to(&line, influxd.udp_formats).expect("send");
        // Pacing the sender, not a wait for a fact: in order, each in a
        // batch of its own (influxd's UDP listener batches by time), so
        // fh6's field types come first.
        thread::sleep(Duration::from_millis(50));
    }
    let counts = influxd.query_until(
        "formats",
        r#"SELECT count("IsRaceOn") FROM forza GROUP BY game"#,
        |s| s.as_array().is_some_and(|a| a.len() == formats.len()),
    );
    for series in counts.as_array().unwrap() {
        assert_eq!(series["values"][0][1], 1, "{series}");
    }
    let puddles = influxd.query(
        "formats",
        r#"SELECT "WheelInPuddleRL" FROM forza GROUP BY game"#,
    );
    for series in puddles.as_array().unwrap() {
        let game = series["tags"]["game"].as_str().unwrap();
        let expected = if game == "fh6" { 1.0 } else { 0.5 };
        assert_eq!(series["values"][0][1], expected, "{game}: {series}");
    }
    assert!(
        !influxd.log().contains("field type conflict"),
        "{}",
        influxd.log()
    );
}
