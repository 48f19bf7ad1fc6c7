//! Issue 34: the relay knows the session. Through the real binary, a
//! simulated drive of three laps and its finish: lap records and events on
//! `json` destinations (`records = [...]`), the same laps in a real InfluxDB
//! (`forza_lap`) and on a real mosquitto (`<topic>/laps`, the last retained).

use crate::common;
use crate::influx::{influxd_available, Influxd};
use crate::mqtt::{mosquitto_available, Mosquitto, Sub};

use std::net::UdpSocket;
use std::thread;
use std::time::{Duration, Instant};

use common::bin::Bin;
use common::{receiver, recv_into, TempPath};
use forza_relay::simulate::Simulator;
use forza_relay::wire::{Format, Packet};
use serde_json::Value;

/// One frame of the drive: 60 a second, as the game sends.
const FRAME: Duration = Duration::from_micros(16_667);

/// The drive: every frame of a simulated FH6 race from the start until three
/// laps are done, then its finish (IsRaceOn 0) for 12 s of TimestampMS, more
/// than a race's end takes; and the LastLap each lap ended with, as sent.
fn drive() -> (Vec<Vec<u8>>, Vec<f32>) {
    let mut sim = Simulator::new(Format::Fh6, 3);
    let mut buf = [0u8; 1500];
    let (mut frames, mut last_laps) = (Vec::new(), Vec::new());
    let mut lap = None;
    while last_laps.len() < 3 {
        let n = sim.frame(FRAME, &mut buf).unwrap();
        let p = Packet::new_checked(&buf[..n], Format::Fh6).unwrap();
        if p.race_on() {
            let number = p.lap_number().unwrap();
            if lap.is_some_and(|l| l != number) {
                last_laps.push(p.last_lap().unwrap());
            }
            lap = Some(number);
        }
        frames.push(buf[..n].to_vec());
        assert!(frames.len() < 60 * 60 * 20, "no three laps in 20 minutes");
    }
    sim.finish();
    for _ in 0..12 * 60 {
        let n = sim.frame(FRAME, &mut buf).unwrap();
        frames.push(buf[..n].to_vec());
    }
    (frames, last_laps)
}

/// Sends `frames` to `to` 20 at a time, a burst every 10 ms (2,000 a
/// second: the drive's minutes in seconds, within loopback's buffers and
/// what the relay reads under qemu).
fn send_all(frames: &[Vec<u8>], to: std::net::SocketAddr) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let start = Instant::now();
    for (i, burst) in frames.chunks(20).enumerate() {
        let due = start + Duration::from_millis(10 * i as u64);
        thread::sleep(due.saturating_duration_since(Instant::now()));
        for f in burst {
            socket.send_to(f, to).unwrap();
        }
    }
}

/// The JSON objects `socket` gets until `done` says so, within 60 s.
fn objects_until(socket: &UdpSocket, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&got) {
        assert!(
            Instant::now() < deadline,
            "within 60 s only {} objects, the last {:?}",
            got.len(),
            got.last()
        );
        let n = recv_into(socket, &mut buf).expect("a record");
        got.push(serde_json::from_slice(&buf[..n]).expect("a JSON object"));
    }
    got
}

#[track_caller]
fn close(a: f64, b: f64, within: f64, what: &str) {
    assert!((a - b).abs() <= within, "{what}: {a} vs {b}");
}

/// The lap records, checked field by field against what was sent: lap from
/// 1, the game's LastLap to the millisecond, the best so far and the delta
/// to the best before, the splits adding up to the lap within a frame.
#[track_caller]
fn check_laps(laps: &[Value], last_laps: &[f32]) {
    assert_eq!(laps.len(), 3, "{laps:?}");
    let mut best: Option<f64> = None;
    for (i, lap) in laps.iter().enumerate() {
        let sent = f64::from(last_laps[i]);
        assert_eq!(lap["record"], "lap");
        assert_eq!(lap["format"], "fh6");
        assert_eq!(lap["lap"], i + 1, "{lap}");
        let time = lap["lap_time_s"].as_f64().unwrap();
        close(time, sent, 0.0005, "lap_time_s is LastLap");
        let before = best;
        best = Some(best.map_or(time, |b| b.min(time)));
        close(
            lap["best_lap_s"].as_f64().unwrap(),
            best.unwrap(),
            1e-6,
            "best_lap_s",
        );
        match before {
            None => assert!(lap["delta_to_best_s"].is_null(), "{lap}"),
            Some(b) => close(
                lap["delta_to_best_s"].as_f64().unwrap(),
                time - b,
                1e-4,
                "delta_to_best_s",
            ),
        }
        let splits: Vec<f64> = lap["splits_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();
        assert_eq!(splits.len(), 3, "{lap}");
        close(
            splits.iter().sum(),
            time,
            FRAME.as_secs_f64(),
            "the splits add up",
        );
        assert!(lap["top_speed_kmh"].as_f64().unwrap() > 0.0, "{lap}");
        assert!(lap["CarOrdinal"].as_i64().is_some(), "{lap}");
        assert!(lap["TrackOrdinal"].is_null(), "fh6 has no track: {lap}");
    }
}

#[test]
fn a_simulated_three_lap_race_gives_three_lap_records_and_its_events_in_order() {
    let (frames, last_laps) = drive();
    let (laps, laps_addr) = receiver();
    let (events, events_addr) = receiver();
    let (all, all_addr) = receiver();
    let file = TempPath::file(
        "session.toml",
        &format!(
            "[listen]\naddr = \"127.0.0.1:0\"\nformat = \"fh6\"\n[stats]\ninterval = 0\n\
             [[destination]]\nname = \"laps\"\naddr = \"{laps_addr}\"\nformat = \"json\"\n\
             records = [\"laps\"]\n\
             [[destination]]\nname = \"events\"\naddr = \"{events_addr}\"\nformat = \"json\"\n\
             records = [\"events\"]\n\
             [[destination]]\nname = \"all\"\naddr = \"{all_addr}\"\nformat = \"json\"\n\
             fields = [\"TimestampMS\"]\nrecords = [\"frames\", \"laps\", \"events\"]\n"
        ),
    );
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let listen = bin.wait_until_running();
    // The destination taking everything is read as it comes (its frames
    // would fill any receive buffer), until the race's end.
    let mixed = thread::spawn(move || {
        objects_until(&all, |g| g.last().is_some_and(|o| o["event"] == "race_end"))
    });
    let sender = thread::spawn({
        let frames = frames.clone();
        move || send_all(&frames, listen)
    });
    let got_laps = objects_until(&laps, |g| g.len() == 3);
    check_laps(&got_laps, &last_laps);
    let got_events = objects_until(&events, |g| {
        g.last().is_some_and(|e| e["event"] == "race_end")
    });
    let names: Vec<&str> = got_events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["race_start", "lap", "lap", "lap", "race_end"]);
    for (i, e) in got_events[1..4].iter().enumerate() {
        assert_eq!(
            (&e["record"], &e["lap"]),
            (&"event".into(), &(i + 1).into()),
            "{e}"
        );
    }
    sender.join().unwrap();
    // The destination taking everything: the frames, and the records among
    // them in order.
    let mixed = mixed.join().unwrap();
    assert!(
        mixed.iter().filter(|o| o["record"].is_null()).count() > 1_000,
        "the frames too"
    );
    let kinds: Vec<&str> = mixed.iter().filter_map(|o| o["record"].as_str()).collect();
    assert_eq!(
        kinds,
        ["event", "lap", "event", "lap", "event", "lap", "event", "event"],
        "race_start, then each lap's record and its event, then race_end"
    );
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// The same laps in a real InfluxDB, through its UDP listener: three points
/// in `forza_lap`, lap 1 to 3, each the LastLap sent.
#[test]
fn influxdb_counts_the_three_laps_of_a_simulated_race() {
    if !influxd_available() {
        return;
    }
    let influxd = Influxd::start();
    let (frames, last_laps) = drive();
    let to = format!(
        "{},format=influx,name=influxdb,records=laps+events",
        influxd.udp
    );
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
    send_all(&frames, listen);
    let count = influxd.query_until(
        "forza",
        r#"SELECT count("lap_time_s") FROM forza_lap"#,
        |s| s[0]["values"][0][1] == 3,
    );
    assert_eq!(count[0]["values"][0][1], 3, "{count}");
    let laps = influxd.query("forza", r#"SELECT "lap", "lap_time_s" FROM forza_lap"#);
    for (i, row) in laps[0]["values"].as_array().unwrap().iter().enumerate() {
        assert_eq!(row[1], i + 1, "{laps}");
        close(
            row[2].as_f64().unwrap(),
            f64::from(last_laps[i]),
            0.0005,
            "lap_time_s",
        );
    }
    let events = influxd.query_until(
        "forza",
        r#"SELECT count("text") FROM forza_event GROUP BY "event""#,
        |s| s.as_array().is_some_and(|a| a.len() == 3),
    );
    let by_name: Vec<(String, u64)> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["tags"]["event"].as_str().unwrap().to_owned(),
                s["values"][0][1].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_name,
        [
            ("lap".to_owned(), 3),
            ("race_end".to_owned(), 1),
            ("race_start".to_owned(), 1)
        ]
    );
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
}

/// On a real mosquitto: the laps on `<topic>/laps`, the last one retained
/// for a dashboard that connects later; the events on `<topic>/events`.
#[test]
fn mosquitto_gets_the_laps_on_their_topic_and_keeps_the_last() {
    if !mosquitto_available() {
        return;
    }
    let dir = TempPath::dir("session-mqtt");
    let broker = Mosquitto::start(dir.path(), "allow_anonymous true");
    let (frames, last_laps) = drive();
    let laps = Sub::start(broker.port, "car/laps", &[]);
    let events = Sub::start(broker.port, "car/events", &[]);
    let to = format!(
        "mqtt://127.0.0.1:{},name=broker,topic=car,records=laps+events",
        broker.port
    );
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
    // Connected before the race starts: a record due before is not published.
    if !bin.has_said("connected; publishing to car") {
        bin.wait_for_line("connected; publishing to car");
    }
    send_all(&frames, listen);
    let got: Vec<Value> = (0..3)
        .map(|_| serde_json::from_str(&laps.next().payload).unwrap())
        .collect();
    check_laps(&got, &last_laps);
    let names: Vec<String> = (0..5)
        .map(|_| {
            let e: Value = serde_json::from_str(&events.next().payload).unwrap();
            e["event"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(names, ["race_start", "lap", "lap", "lap", "race_end"]);
    let kept = Sub::retained(broker.port, "car/laps", &[]);
    let kept: Value = serde_json::from_str(&kept.payload).unwrap();
    assert_eq!(kept["lap"], 3, "the last lap is retained: {kept}");
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
}

/// A race of `frames` racing fh6 frames of car `car`, then its end: blank
/// frames (zero but TimestampMS), the last 11 s of the game's time later.
fn race(sender: &UdpSocket, to: std::net::SocketAddr, car: i32, first_ms: u32, frames: u32) {
    let mut buf = vec![0u8; Format::Fh6.len()];
    for i in 0..frames + 31 {
        buf.fill(0);
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        let racing = i < frames;
        let ts = first_ms + 16 * i + if i == frames + 30 { 11_000 } else { 0 };
        p.set_timestamp_ms(ts);
        if racing {
            p.set_is_race_on(1);
            p.set_car_ordinal(car);
            p.set_current_engine_rpm(5_000.0 + i as f32);
            p.set_current_race_time(i as f32 / 60.0).unwrap();
            p.set_lap_number(0).unwrap();
            p.set_distance_traveled(i as f32).unwrap();
        }
        sender.send_to(&buf, to).unwrap();
        thread::sleep(Duration::from_millis(2));
    }
}

/// The racing frames of a capture: (CarOrdinal, TimestampMS) each.
fn racing_in(file: &std::path::Path) -> Vec<(i32, u32)> {
    forza_relay::capture::Reader::open(file)
        .expect("a capture")
        .map(|d| d.expect("a good record"))
        .filter_map(|d| {
            let p = Packet::new_checked(&d.payload[..], Format::Fh6).ok()?;
            p.race_on().then(|| (p.car_ordinal(), p.timestamp_ms()))
        })
        .collect()
}

/// Issue 34, item 5: `[record] races` keeps each race as its own capture
/// file, named by its start, game and car: two races make two files with
/// each race's racing frames, in order (read back by our reader, by
/// tshark and by `replay`); a third with `keep = 2` removes the first.
#[test]
fn every_race_is_kept_in_its_own_file_and_the_oldest_go_beyond_keep() {
    let dir = TempPath::dir("races");
    let (_tool, tool_addr) = receiver();
    let (played, played_addr) = receiver();
    let file = TempPath::file(
        "races.toml",
        &format!(
            "[listen]\naddr = \"127.0.0.1:0\"\nformat = \"fh6\"\n[stats]\ninterval = 0\n\
             [web]\naddr = \"127.0.0.1:0\"\n[record]\nraces = {:?}\nkeep = 2\n\
             [[destination]]\nname = \"tool\"\naddr = \"{tool_addr}\"\n",
            dir.path().join("kept").display().to_string()
        ),
    );
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let listen = bin.wait_until_running();
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    let kept = dir.path().join("kept");
    let races = [(101, 10_000), (202, 40_000), (303, 70_000)];
    let mut files = Vec::new();
    for (n, &(car, first_ms)) in races.iter().enumerate() {
        race(&sender, listen, car, first_ms, 120);
        let line = bin.wait_for_line("race kept: ");
        let path =
            line[line.find("race kept: ").unwrap() + 11..line.rfind(" (").unwrap()].to_owned();
        let path = std::path::PathBuf::from(path);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("race-20") && name.ends_with(&format!("-fh6-car{car}.pcap")),
            "{name}"
        );
        let expected: Vec<(i32, u32)> = (0..120).map(|i| (car, first_ms + 16 * i)).collect();
        assert_eq!(racing_in(&path), expected, "race {}", n + 1);
        files.push(path);
        // A second and more between races: no race's file holds another's.
        thread::sleep(Duration::from_millis(1_300));
    }
    assert!(
        !files[0].exists(),
        "the first race is removed beyond keep = 2"
    );
    assert!(files[1].exists() && files[2].exists());
    // The page lists the races kept, newest first.
    let line = bin
        .line_said("web page on http://")
        .expect("the page's address said before running");
    let web: std::net::SocketAddr = line[line.find("http://").unwrap() + 7..]
        .trim()
        .trim_end_matches('/')
        .parse()
        .expect("the page's address");
    let snapshot: Value = common::http::get(web, "/api/snapshot", &[]).json();
    let listed: Vec<String> = snapshot["races"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        listed,
        [
            files[2].display().to_string(),
            files[1].display().to_string()
        ],
        "{snapshot}"
    );
    let left: Vec<_> = std::fs::read_dir(&kept).unwrap().flatten().collect();
    assert_eq!(left.len(), 2, "{left:?}");
    if common::require_tool("tshark", common::runs("tshark"), "it reads the race files") {
        let out = std::process::Command::new("tshark")
            .args([
                "-r",
                &files[2].display().to_string(),
                "-T",
                "fields",
                "-e",
                "udp.length",
            ])
            .output()
            .expect("run tshark");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lengths: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        assert!(lengths.len() >= 120, "{}", lengths.len());
        assert!(lengths.iter().all(|l| l == "332"), "{lengths:?}");
    }
    // Played back by `replay`: the race's racing frames, in order.
    let replay = Bin::run(
        &[
            "replay",
            &files[2].display().to_string(),
            "--to",
            &played_addr.to_string(),
            "--speed",
            "20",
        ],
        None,
    );
    assert_eq!(replay.code(), 0, "{}", replay.stderr);
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
    let mut replayed = Vec::new();
    let mut buf = [0u8; 2048];
    while let Ok(n) = recv_into(&played, &mut buf) {
        let p = Packet::new_checked(&buf[..n], Format::Fh6).unwrap();
        if p.race_on() {
            replayed.push((p.car_ordinal(), p.timestamp_ms()));
        }
    }
    let expected: Vec<(i32, u32)> = (0..120).map(|i| (303, 70_000 + 16 * i)).collect();
    assert_eq!(replayed, expected);
}

/// Every query of the shipped Grafana dashboard (docs/grafana/forza-relay.json:
/// its panels, its game variable, its annotations) runs against a real
/// InfluxDB fed by the relay with a simulated race, frames, laps and events,
/// and answers rows: the dashboard shows something the first time.
#[test]
fn every_query_of_the_grafana_dashboard_answers_rows_from_a_simulated_race() {
    if !influxd_available() {
        return;
    }
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/grafana/forza-relay.json"
        ))
        .expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let mut queries = Vec::new();
    fn collect(v: &Value, out: &mut Vec<String>) {
        match v {
            // The data source variable's "query" is a plugin's name.
            Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("datasource") => {}
            Value::Object(m) => {
                for (k, v) in m {
                    match v {
                        Value::String(q) if k == "query" => out.push(q.clone()),
                        _ => collect(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    collect(&dashboard, &mut queries);
    // The game variable, 7 panels, the annotations.
    assert_eq!(queries.len(), 9, "{queries:#?}");
    let influxd = Influxd::start();
    let (frames, _) = drive();
    let to = format!(
        "{},format=influx,name=influxdb,records=frames+laps+events",
        influxd.udp
    );
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
    send_all(&frames, listen);
    influxd.query_until("forza", r#"SELECT count("text") FROM forza_event"#, |s| {
        s[0]["values"][0][1] == 5
    });
    for q in &queries {
        // As Grafana sends them: the time range, an interval, the game chosen.
        let q = q
            .replace("$timeFilter", "time > now() - 1h")
            .replace("$__interval", "1s")
            .replace("$game", "fh6");
        let series = influxd.query("forza", &q);
        let rows = series[0]["values"].as_array().map_or(0, Vec::len);
        assert!(rows > 0, "{q} answered no row: {series}");
    }
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
}
