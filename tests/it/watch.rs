//! `watch`, `export` and `dissector` run the way a user runs them: the real binary
//! on loopback, its output read back with the `csv` crate, serde_json and tshark.

use crate::common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use forza_relay::dissector::abbrev;
use forza_relay::telemetry::columns::{read_raw, Cell};
use forza_relay::wire::{field, Format, Packet};

use common::bin::Bin;
use common::*;

/// The lap a driver reads for the test packets' LapNumber, which the game counts
/// from 0 (issue 13: one convention everywhere).
const DRIVERS_LAP: u16 = LAP_NUMBER + 1;

/// Waits for the "listening on ADDR" line and returns the address.
#[track_caller]
fn listening(bin: &mut Bin) -> std::net::SocketAddr {
    listening_address(&bin.wait_for_line("listening on "))
}

/// The ADDR of a "listening on ADDR" line.
#[track_caller]
fn listening_address(line: &str) -> std::net::SocketAddr {
    let (_, after) = line
        .split_once("listening on ")
        .unwrap_or_else(|| panic!("no \"listening on\" in {line:?}"));
    after
        .split_whitespace()
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// Waits until `path` holds `lines` lines (the export flushes every second).
#[track_caller]
fn wait_for_lines(path: &Path, lines: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} has {} lines, not {lines}, after 10 s:\n{text}",
            path.display(),
            text.lines().count()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The packets both export tests send: fh6 racing, fm7 racing, fh6 in a menu,
/// sled racing.
fn send_mix(to: std::net::SocketAddr) {
    let sender = Sender::new(to);
    sender.send(&Spec::new(Format::Fh6, 100).build());
    sender.send(&Spec::new(Format::Fm7, 200).build());
    sender.send(&Spec::new(Format::Fh6, 300).racing(false).build());
    sender.send(&Spec::new(Format::Sled, 400).build());
}

#[test]
fn export_to_csv_through_the_binary_until_ctrl_c() {
    let dir = TempPath::dir("export-csv");
    let out = dir.path().join("laps.csv");
    let out_text = out.display().to_string();
    let mut bin = Bin::spawn(
        &["export", "--listen", "127.0.0.1:0", "--output", &out_text],
        None,
    );
    let addr = listening(&mut bin);
    send_mix(addr);
    let text = wait_for_lines(&out, 1 + 4);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_stderr_has(&[&format!("{out_text}: 4 rows written")]);

    let table = Table::read(text.as_bytes());
    assert_eq!(table.rows.len(), 4);
    let get = |row: usize, name: &str| table.get(row, name);
    let formats: Vec<String> = (0..4).map(|i| get(i, "format")).collect();
    assert_eq!(formats, ["fh6", "fm7", "fh6", "sled"]);
    let stamps: Vec<String> = (0..4).map(|i| get(i, "TimestampMS")).collect();
    assert_eq!(stamps, ["100", "200", "300", "400"]);
    assert_eq!(get(0, "IsRaceOn"), "1");
    assert_eq!(get(2, "IsRaceOn"), "0");
    assert_eq!(get(0, "Speed"), SPEED.to_string());
    assert_eq!(get(1, "Speed"), SPEED.to_string());
    assert_eq!(get(0, "Gear"), GEAR.to_string());
    assert_eq!(get(0, "gear_label"), GEAR.to_string());
    assert_eq!(get(0, "CarGroup"), CAR_GROUP.to_string());
    assert_eq!(get(1, "CarGroup"), "", "fm7 has no Horizon block");
    assert_eq!(
        get(0, "CarPerformanceIndex"),
        CAR_PERFORMANCE_INDEX.to_string()
    );
    assert_eq!(get(3, "CurrentEngineRpm"), CURRENT_ENGINE_RPM.to_string());
    assert_eq!(get(3, "Speed"), "", "sled has no Dash block");
    let kmh: f32 = get(0, "speed_kmh").parse().expect("a number");
    assert!((kmh - SPEED * 3.6).abs() < 1e-3, "{kmh}");
    assert_eq!(get(0, "car_class_letter"), "S2");
    assert!(get(0, "recv_time").ends_with('Z'));
}

#[test]
fn export_to_json_lines_with_fields_and_only_race_on() {
    let dir = TempPath::dir("export-jsonl");
    let out = dir.path().join("laps.jsonl");
    let out_text = out.display().to_string();
    let mut bin = Bin::spawn(
        &[
            "export",
            "--listen",
            "127.0.0.1:0",
            "--output",
            &out_text,
            "--fields",
            "format,TimestampMS,Speed,WheelInPuddle,speed_mph",
            "--only-race-on",
        ],
        None,
    );
    let addr = listening(&mut bin);
    send_mix(addr);
    let text = wait_for_lines(&out, 3);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_stderr_has(&["3 rows written", "1 with IsRaceOn = 0 skipped"]);

    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(rows.len(), 3);
    let keys: Vec<&str> = rows[0]
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = [
        "format",
        "TimestampMS",
        "Speed",
        "WheelInPuddleFL",
        "WheelInPuddleFR",
        "WheelInPuddleRL",
        "WheelInPuddleRR",
        "speed_mph",
    ];
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    assert_eq!(rows[0]["format"], "fh6");
    assert_eq!(rows[0]["TimestampMS"], 100);
    assert_eq!(rows[0]["Speed"].as_f64(), Some(f64::from(SPEED)));
    // WheelInPuddle is S32 in fh6, F32 in the others (Spec writes a dry road).
    assert_eq!(rows[0]["WheelInPuddleFL"], 0);
    assert_eq!(rows[1]["format"], "fm7");
    assert_eq!(rows[1]["WheelInPuddleFL"], 0.0);
    assert_eq!(rows[2]["format"], "sled");
    assert_eq!(rows[2]["TimestampMS"], 400);
    assert_eq!(rows[2]["Speed"], serde_json::Value::Null);
    assert_eq!(rows[2]["speed_mph"], serde_json::Value::Null);
}

#[test]
fn bad_options_name_the_value_and_exit_2() {
    let dir = TempPath::dir("export-bad");
    let out = dir.path().join("x.csv").display().to_string();
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["watch", "--listen", "localhost:port"],
            &["--listen", "\"localhost:port\""],
        ),
        (
            &["watch", "--listen", "127.0.0.1:0", "--format", "fh7"],
            &["--format", "\"fh7\"", "fh6"],
        ),
        (
            &[
                "export",
                "--listen",
                "127.0.0.1:0",
                "--output",
                &out,
                "--fields",
                "Speed,Sped",
            ],
            &["\"Sped\"", "Valid names", "TireTempFL", "speed_kmh"],
        ),
        (
            &[
                "export",
                "--listen",
                "127.0.0.1:0",
                "--output",
                &out,
                "--as",
                "xml",
            ],
            &["--as \"xml\"", "csv or jsonl"],
        ),
        (&["dissector", "--port", "0"], &["--port", "0"]),
    ];
    for (args, parts) in cases {
        let done = Bin::run(args, None);
        assert_eq!(done.code(), 2, "{args:?}: {}", done.stderr);
        done.assert_stderr_has(parts);
    }
}

#[test]
fn a_port_in_use_is_a_clear_error_and_exit_1() {
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("bound").to_string();
    for args in [
        vec!["watch", "--listen", &addr],
        vec!["export", "--listen", &addr, "--output", "-"],
    ] {
        let done = Bin::run(&args, None);
        assert_eq!(done.code(), 1, "{args:?}: {}", done.stderr);
        let port = taken.local_addr().expect("bound").port();
        done.assert_stderr_has(&[&format!("cannot listen on {addr}: port {port} is ")]);
        done.assert_port_in_use(port, std::process::id());
    }
}

#[test]
fn export_names_an_output_file_it_cannot_create() {
    let dir = TempPath::dir("export-nodir");
    let out = dir.path().join("no-such-dir").join("x.csv");
    let out = out.display().to_string();
    let done = Bin::run(
        &["export", "--listen", "127.0.0.1:0", "--output", &out],
        None,
    );
    assert_eq!(done.code(), 1, "{}", done.stderr);
    done.assert_stderr_has(&["cannot create", &out]);
}

#[test]
fn watch_without_a_terminal_prints_a_line_per_second_until_ctrl_c() {
    let mut bin = Bin::spawn(
        &["watch", "--listen", "127.0.0.1:0", "--format", "fh6"],
        None,
    );
    let addr = listening(&mut bin);
    let sender = Sender::new(addr);
    // Long enough for at least two one-second lines after the first packet.
    let until = Instant::now() + Duration::from_millis(2_500);
    let mut t = 0;
    while Instant::now() < until {
        t += 1;
        sender.send(&Spec::new(Format::Fh6, t).build());
        std::thread::sleep(Duration::from_millis(20));
    }
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let expected = format!(
        "speed {:.0} km/h, gear {GEAR}, {:.0} rpm, lap {},",
        SPEED * 3.6,
        CURRENT_ENGINE_RPM,
        DRIVERS_LAP
    );
    let line = done
        .stdout
        .lines()
        .find(|l| l.starts_with(&expected))
        .unwrap_or_else(|| panic!("no line starting {expected:?}:\n{}", done.stdout));
    assert!(line.ends_with(" Hz, fh6"), "{line}");
}

/// A `forza-relay` child whose stdout is read line by line while it runs (the
/// plain lines `watch` prints when stdout is not a terminal).
struct Piped {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<(bool, String)>,
    seen: Vec<String>,
}

impl Piped {
    #[track_caller]
    fn spawn(args: &[&str]) -> Piped {
        use std::io::BufRead;
        let mut child = common::bin::command()
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start forza-relay");
        let (tx, lines) = std::sync::mpsc::channel();
        let out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        for (is_stdout, stream) in [
            (true, Box::new(out) as Box<dyn std::io::Read + Send>),
            (false, Box::new(err)),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if tx.send((is_stdout, line)).is_err() {
                        break;
                    }
                }
            });
        }
        Piped {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Calls `tick` every 20 ms until a line (stdout if `stdout`, else stderr)
    /// satisfies `done`, which it returns; fails after 10 s.
    #[track_caller]
    fn until(
        &mut self,
        stdout: bool,
        done: impl Fn(&str) -> bool,
        mut tick: impl FnMut(),
    ) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            tick();
            while let Ok((is_stdout, line)) = self.lines.recv_timeout(Duration::from_millis(20)) {
                self.seen.push(line.clone());
                if is_stdout == stdout && done(&line) {
                    return line;
                }
            }
        }
        panic!("no such line within 10 s; seen:\n{}", self.seen.join("\n"));
    }

    /// The address of the "listening on ADDR" line.
    #[track_caller]
    fn listening(&mut self) -> std::net::SocketAddr {
        listening_address(&self.until(false, |l| l.contains("listening on "), || {}))
    }

    /// Sends SIGINT and returns the exit code (waiting at most 10 s).
    #[track_caller]
    fn interrupt(mut self) -> i32 {
        let status = Command::new("kill")
            .arg("-INT")
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status
                    .code()
                    .unwrap_or_else(|| panic!("killed by a signal: {status}"));
            }
            assert!(Instant::now() < deadline, "no exit 10 s after SIGINT");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Issue 12 item 2: one datagram with `CurrentEngineRpm = NaN` aborted the
/// dashboard. Without a terminal, `watch` shows it as "–" (it printed `NaN rpm`)
/// and goes on to show the next good packet.
#[test]
fn issue_12_watch_shows_a_nan_datagram_as_dashes_and_keeps_running() {
    let mut bin = Piped::spawn(&["watch", "--listen", "127.0.0.1:0", "--format", "fh6"]);
    let sender = Sender::new(bin.listening());
    let mut bad = Spec::new(Format::Fh6, 1).build();
    let mut p = Packet::new_checked(&mut bad[..], Format::Fh6).expect("fh6");
    p.set_current_engine_rpm(f32::NAN);
    p.set_speed(f32::INFINITY).expect("fh6 has Speed");
    let line = bin.until(
        true,
        |l| !l.starts_with("no packets yet"),
        || sender.send(&bad),
    );
    assert!(line.starts_with("speed –, gear 3, – rpm, "), "{line}");
    let good = Spec::new(Format::Fh6, 2).build();
    let speed = format!("speed {:.0} km/h, ", SPEED * 3.6);
    let line = bin.until(true, |l| l.starts_with(&speed), || sender.send(&good));
    assert!(
        line.contains(&format!("{CURRENT_ENGINE_RPM:.0} rpm")),
        "{line}"
    );
    assert_eq!(bin.interrupt(), 0);
}

/// FH6's frame in a menu or pause: all zero but TimestampMS and IsRaceOn = 0
/// (docs/formats.md).
fn menu_frame(timestamp_ms: u32) -> Vec<u8> {
    let mut buf = vec![0u8; Format::Fh6.len()];
    Packet::new_checked(&mut buf[..], Format::Fh6)
        .expect("fh6")
        .set_timestamp_ms(timestamp_ms);
    buf
}

/// Issue 13 item 7: a menu frame was shown as `0 km/h, gear R`.
#[test]
fn issue_13_watch_says_not_racing_for_a_menu_frame() {
    let mut bin = Piped::spawn(&["watch", "--listen", "127.0.0.1:0", "--format", "fh6"]);
    let sender = Sender::new(bin.listening());
    let racing = Spec::new(Format::Fh6, 1).build();
    let speed = format!("speed {:.0} km/h, ", SPEED * 3.6);
    bin.until(true, |l| l.starts_with(&speed), || sender.send(&racing));
    let line = bin.until(
        true,
        |l| !l.starts_with(&speed),
        || sender.send(&menu_frame(2)),
    );
    assert!(
        line.starts_with("not racing (menu or paused); last: "),
        "{line}"
    );
    assert!(line.contains(&speed), "the last racing values: {line}");
    assert!(!line.contains("gear R"), "{line}");
    assert_eq!(bin.interrupt(), 0);
}

/// Issue 13 item 7: export wrote `gear_label R`, `tire_temp_c_fl -17.78` and
/// `car_class_letter D` for a menu frame. The derived labels are empty; the raw
/// fields are as sent.
#[test]
fn issue_13_export_leaves_derived_labels_empty_for_a_menu_frame() {
    let dir = TempPath::dir("export-menu");
    let pcap = dir.path().join("drive.pcap");
    write_capture(
        &pcap,
        &[
            (0, 5400, Spec::new(Format::Fh6, 100).build()),
            (16, 5400, menu_frame(116)),
        ],
    );
    let out = dir.path().join("menu.csv");
    let (pcap_text, out_text) = (pcap.display().to_string(), out.display().to_string());
    let done = Bin::run(
        &[
            "export", "--file", &pcap_text, "--format", "fh6", "--output", &out_text,
        ],
        None,
    );
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let table = Table::read(std::fs::File::open(&out).expect("the CSV file"));
    assert_eq!(table.rows.len(), 2);
    assert_eq!(table.get(0, "gear_label"), GEAR.to_string());
    assert_eq!(table.get(0, "car_class_letter"), "S2");
    assert_eq!(table.get(1, "TimestampMS"), "116");
    for raw in [
        "IsRaceOn",
        "Gear",
        "TireTempFL",
        "CarClass",
        "DrivetrainType",
        "Speed",
    ] {
        assert_eq!(table.get(1, raw), "0", "{raw} as sent");
    }
    for derived in [
        "gear_label",
        "tire_temp_c_fl",
        "tire_temp_c_rr",
        "car_class_letter",
        "drivetrain",
        "speed_kmh",
        "speed_mph",
        "power_hp",
        "throttle_pct",
        "steer_axis",
        "rev_fraction",
        "g_lat",
        "drift_angle_deg",
    ] {
        assert_eq!(table.get(1, derived), "", "{derived} of a menu frame");
    }
}

/// Issue 13 item 9: the demo showed `lap 1` where `watch` showed `Lap 0` for the
/// same drive. The simulated drive starts on its first lap: `lap 1` in `watch`
/// as in the demo (tests/it/simulate.rs).
#[test]
fn issue_13_watch_counts_the_first_lap_of_a_drive_as_lap_1() {
    let mut bin = Piped::spawn(&["watch", "--listen", "127.0.0.1:0", "--format", "fh6"]);
    let to = bin.listening().to_string();
    let mut simulate = common::bin::command()
        .args([
            "simulate",
            "--to",
            &to,
            "--format",
            "fh6",
            "--duration",
            "3",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start simulate");
    let line = bin.until(true, |l| l.starts_with("speed "), || {});
    let _ = simulate.kill();
    let _ = simulate.wait();
    assert!(line.contains(", lap 1, "), "{line}");
    assert_eq!(bin.interrupt(), 0);
}

/// Issue 13 item 6: `export --format fh6` of an FM2023 capture wrote only a
/// header, logged "3 datagrams that are not packets ignored" and exited 0.
#[test]
fn issue_13_an_export_that_matched_nothing_fails_and_names_the_format_found() {
    let dir = TempPath::dir("export-nothing");
    let pcap = dir.path().join("fm2023.pcap");
    let datagrams: Vec<(u64, u16, Vec<u8>)> = (0..1_200)
        .map(|i| (i * 16, 5400, Spec::new(Format::Fm2023, i as u32).build()))
        .collect();
    write_capture(&pcap, &datagrams);
    let out = dir.path().join("x.csv");
    let (pcap_text, out_text) = (pcap.display().to_string(), out.display().to_string());
    let done = Bin::run(
        &[
            "export", "--file", &pcap_text, "--format", "fh6", "--output", &out_text,
        ],
        None,
    );
    assert_eq!(done.code(), 1, "{}", done.stderr);
    done.assert_stderr_has(&[
        "none of the 1,200 datagrams is in the fh6 format (324 bytes); \
         they are 331 bytes: fm2023 — use --format fm2023 or auto",
    ]);
    // The same capture read as it is exports every row.
    let done = Bin::run(
        &[
            "export", "--file", &pcap_text, "--format", "auto", "--output", &out_text,
        ],
        None,
    );
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(
        Table::read(std::fs::File::open(&out).expect("the CSV"))
            .rows
            .len(),
        1_200
    );
}

/// Issue 13 item 6: `watch` said how many datagrams it ignored, not why.
#[test]
fn issue_13_watch_says_why_it_ignores_datagrams() {
    let mut bin = Piped::spawn(&["watch", "--listen", "127.0.0.1:0", "--format", "fh6"]);
    let sender = Sender::new(bin.listening());
    let fm7 = Spec::new(Format::Fm7, 1).build();
    let line = bin.until(true, |l| l.contains(" ignored"), || sender.send(&fm7));
    assert!(line.starts_with("no packets yet ("), "{line}");
    for part in [
        "ignored, not in the fh6 format (324 bytes); ",
        " 311 bytes: fm7 — use --format fm7 or auto (the last from 127.0.0.1:",
    ] {
        assert!(line.contains(part), "{part:?} not in {line:?}");
    }
    assert_eq!(bin.interrupt(), 0);
}

/// Whether `tool` runs (see [`common::require_tool`]).
fn have(tool: &str) -> bool {
    common::require_tool(tool, common::runs(tool), "the dissector is checked with it")
}

/// `bytes` as text2pcap's input: one offset-prefixed hex line per 16 bytes.
fn hex_dump(bytes: &[u8]) -> String {
    let mut s = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        s.push_str(&format!("{:06x} ", i * 16));
        for b in chunk {
            s.push_str(&format!(" {b:02x}"));
        }
        s.push('\n');
    }
    s
}

/// A pcap file of `packets` as UDP datagrams from 127.0.0.1:5555 to `port`.
#[track_caller]
fn capture(dir: &Path, name: &str, packets: &[&[u8]], port: u16) -> std::path::PathBuf {
    let text = dir.join(format!("{name}.txt"));
    let pcap = dir.join(format!("{name}.pcap"));
    let dump: String = packets.iter().map(|p| hex_dump(p)).collect();
    std::fs::write(&text, dump).expect("write the hex dump");
    let status = Command::new("text2pcap")
        .arg("-q")
        .arg("-u")
        .arg(format!("5555,{port}"))
        .arg("-4")
        .arg("127.0.0.1,127.0.0.1")
        .arg(&text)
        .arg(&pcap)
        .stdout(Stdio::null())
        .output()
        .expect("run text2pcap");
    assert!(
        status.status.success(),
        "text2pcap failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    pcap
}

/// The Lua script as `forza-relay dissector` prints it, saved in `dir`.
#[track_caller]
fn dissector(dir: &Path, args: &[&str]) -> std::path::PathBuf {
    let out = common::bin::command()
        .arg("dissector")
        .args(args)
        .output()
        .expect("run forza-relay dissector");
    assert!(out.status.success(), "{out:?}");
    let path = dir.join("forza.lua");
    std::fs::write(&path, &out.stdout).expect("write forza.lua");
    path
}

/// tshark's `-T fields` output for `fields`, one row per packet.
#[track_caller]
fn tshark(lua: &Path, pcap: &Path, prefs: &[&str], fields: &[String]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .arg("-r")
        .arg(pcap)
        .args(["-T", "fields"]);
    for p in prefs {
        cmd.args(["-o", p]);
    }
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed:\n{stderr}");
    assert!(
        !stderr.contains("Lua: Error") && !stderr.contains("error"),
        "tshark complained:\n{stderr}"
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// True when tshark's text for a field is the value the relay's decoder reads.
fn same(shown: &str, value: Cell) -> bool {
    match value {
        Cell::Null => shown.is_empty(),
        Cell::Int(v) => shown.parse::<i64>() == Ok(v),
        // tshark prints six significant digits.
        Cell::Float(v) => shown
            .parse::<f64>()
            .is_ok_and(|s| (s - f64::from(v)).abs() <= 1e-5 * f64::from(v).abs().max(1e-3)),
        other => panic!("not a raw field value: {other:?}"),
    }
}

const FIXTURES: [(Format, &[u8]); 6] = [
    (Format::Sled, include_bytes!("../fixtures/sled.bin")),
    (Format::Fm7, include_bytes!("../fixtures/fm7.bin")),
    (Format::Fm2023, include_bytes!("../fixtures/fm2023.bin")),
    (Format::Fh4, include_bytes!("../fixtures/fh4.bin")),
    (Format::Fh5, include_bytes!("../fixtures/fh5.bin")),
    (Format::Fh6, include_bytes!("../fixtures/fh6.bin")),
];

/// Every field (every wheel) of the table with its display-filter name.
fn all_fields() -> Vec<(field::Field, Option<usize>, String)> {
    let mut all = Vec::new();
    for f in field::ALL {
        if f.wheels {
            for w in 0..4 {
                all.push((*f, Some(w), abbrev(f, Some(w))));
            }
        } else {
            all.push((*f, None, abbrev(f, None)));
        }
    }
    all
}

#[test]
fn tshark_reads_every_field_of_every_format_with_the_generated_dissector() {
    if !have("tshark") || !have("text2pcap") {
        return;
    }
    let dir = TempPath::dir("tshark");
    let lua = dissector(dir.path(), &[]);
    let fields = all_fields();
    let mut names: Vec<String> = vec!["forza.format".to_owned()];
    names.extend(fields.iter().map(|(_, _, n)| n.clone()));
    for (format, bytes) in FIXTURES {
        let pcap = capture(dir.path(), format.id(), &[bytes], 5400);
        let pref = format!("forza.horizon:{}", format.id());
        let prefs: &[&str] = if format.is_horizon() { &[&pref] } else { &[] };
        let rows = tshark(&lua, &pcap, prefs, &names);
        assert_eq!(rows.len(), 1, "{format}: {rows:?}");
        let row = &rows[0];
        assert_eq!(row.len(), names.len(), "{format}: {row:?}");
        assert_eq!(row[0], format.id());
        let packet = Packet::new_checked(bytes, format).expect("a fixture of its format");
        for ((f, wheel, name), shown) in fields.iter().zip(&row[1..]) {
            let value = read_raw(f, *wheel, &packet);
            assert!(
                same(shown, value),
                "{format} {name}: tshark shows {shown:?}, the relay reads {value:?}"
            );
        }
    }
}

#[test]
fn tshark_spot_checks_against_formats_md_values() {
    if !have("tshark") || !have("text2pcap") {
        return;
    }
    let dir = TempPath::dir("tshark-spot");
    let lua = dissector(dir.path(), &[]);
    let names: Vec<String> = [
        "forza.format",
        "forza.speed",
        "forza.gear",
        "forza.wheel_in_puddle.fl",
        "forza.tire_temp.rl",
        "forza.car_group",
        "forza.track_ordinal",
        "forza.tire_wear.rr",
        "forza.tail",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let fixture = |f: Format| FIXTURES.iter().find(|(g, _)| *g == f).expect("a fixture").1;
    // Sled, FM7, FM2023 and FH6 are told apart by length (FH6 is the default
    // Horizon preference); the values are those of src/telemetry/mod.rs's fixture tests.
    let pcap = capture(
        dir.path(),
        "mix",
        &[
            fixture(Format::Sled),
            fixture(Format::Fm7),
            fixture(Format::Fm2023),
            fixture(Format::Fh6),
        ],
        5400,
    );
    let rows = tshark(&lua, &pcap, &[], &names);
    let expected = [
        ["sled", "", "", "0.5", "", "", "", "", ""],
        ["fm7", "27.5", "0", "0.5", "176", "", "", "", ""],
        ["fm2023", "27.5", "11", "0.5", "176", "", "860", "0.94", ""],
        ["fh6", "27.5", "6", "1", "176", "16", "", "", "0xa6"],
    ];
    assert_eq!(rows, expected.map(|r| r.map(str::to_owned)));
    let pcap = capture(dir.path(), "fh5", &[fixture(Format::Fh5)], 5400);
    let rows = tshark(&lua, &pcap, &["forza.horizon:fh5"], &names);
    assert_eq!(
        rows,
        [["fh5", "27.5", "12", "0.5", "176", "15", "", "", "0xa5"].map(str::to_owned)]
    );
}

#[test]
fn tshark_decodes_the_port_given_to_the_generator() {
    if !have("tshark") || !have("text2pcap") {
        return;
    }
    let dir = TempPath::dir("tshark-port");
    let lua = dissector(dir.path(), &["--port", "20777"]);
    let fh6 = FIXTURES[5].1;
    let names = ["forza.format".to_owned(), "forza.timestamp_ms".to_owned()];
    let on_port = capture(dir.path(), "on", &[fh6], 20777);
    assert_eq!(tshark(&lua, &on_port, &[], &names), [["fh6", "666666"]]);
    let elsewhere = capture(dir.path(), "off", &[fh6], 5400);
    assert_eq!(tshark(&lua, &elsewhere, &[], &names), [["", ""]]);
    // The preference moves it.
    assert_eq!(
        tshark(&lua, &elsewhere, &["forza.port:5400"], &names),
        [["fh6", "666666"]]
    );
}

/// Writes a capture (with forza-relay's own writer) of `(ms after t0, destination
/// port, packet)`, each from 127.0.0.1:5555 to 127.0.0.1:PORT.
#[track_caller]
fn write_capture(path: &Path, datagrams: &[(u64, u16, Vec<u8>)]) {
    let mut w = forza_relay::capture::Writer::create(path).expect("create the capture");
    for (ms, port, packet) in datagrams {
        w.write(
            t0() + Duration::from_millis(*ms),
            "127.0.0.1:5555".parse().expect("an address"),
            std::net::SocketAddr::from(([127, 0, 0, 1], *port)),
            packet,
        )
        .expect("write a datagram");
    }
    w.flush().expect("flush the capture");
}

/// The first packet's capture time: 2023-11-14T22:13:20Z.
fn t0() -> std::time::SystemTime {
    std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// The mix of `send_mix` to port 5400, the last two an hour after the first (an
/// export that waited for them would not end within the test's time), and an
/// fh5 stream to port 5300 between them.
fn mixed_capture(path: &Path) {
    const HOUR: u64 = 3_600_000;
    write_capture(
        path,
        &[
            (0, 5400, Spec::new(Format::Fh6, 100).build()),
            (5, 5300, Spec::new(Format::Fh5, 999).build()),
            (16, 5400, Spec::new(Format::Fm7, 200).build()),
            (
                HOUR,
                5400,
                Spec::new(Format::Fh6, 300).racing(false).build(),
            ),
            (HOUR + 16, 5400, Spec::new(Format::Sled, 400).build()),
        ],
    );
}

#[test]
fn export_a_capture_file_to_csv_as_fast_as_it_reads() {
    let dir = TempPath::dir("export-file-csv");
    let pcap = dir.path().join("drive.pcap");
    mixed_capture(&pcap);
    let out = dir.path().join("laps.csv");
    let out_text = out.display().to_string();
    let pcap_text = pcap.display().to_string();
    let done = Bin::run(
        &[
            "export", "--file", &pcap_text, "--port", "5400", "--output", &out_text,
        ],
        None,
    );
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_stderr_has(&[
        &format!("{out_text}: 4 rows written"),
        "port 5400, 4 packets",
    ]);

    let table = Table::read(std::fs::File::open(&out).expect("the CSV file"));
    assert_eq!(table.rows.len(), 4);
    let get = |row: usize, name: &str| table.get(row, name);
    let formats: Vec<String> = (0..4).map(|i| get(i, "format")).collect();
    assert_eq!(formats, ["fh6", "fm7", "fh6", "sled"]);
    let stamps: Vec<String> = (0..4).map(|i| get(i, "TimestampMS")).collect();
    assert_eq!(
        stamps,
        ["100", "200", "300", "400"],
        "port 5300's fh5 left out"
    );
    assert_eq!(get(0, "IsRaceOn"), "1");
    assert_eq!(get(2, "IsRaceOn"), "0");
    assert_eq!(get(0, "Speed"), SPEED.to_string());
    assert_eq!(get(1, "Gear"), GEAR.to_string());
    assert_eq!(get(0, "CarGroup"), CAR_GROUP.to_string());
    assert_eq!(get(3, "CurrentEngineRpm"), CURRENT_ENGINE_RPM.to_string());
    assert_eq!(get(3, "Speed"), "", "sled has no Dash block");
    // The capture's own times, not the time of the export.
    assert_eq!(get(0, "recv_time"), "2023-11-14T22:13:20.000000Z");
    assert_eq!(get(1, "recv_s"), "0.016000");
    assert_eq!(get(2, "recv_time"), "2023-11-14T23:13:20.000000Z");
    assert_eq!(get(3, "recv_s"), "3600.016000");
}

#[test]
fn export_a_capture_file_to_json_lines_with_only_race_on() {
    let dir = TempPath::dir("export-file-jsonl");
    let pcap = dir.path().join("drive.pcapng.pcap");
    mixed_capture(&pcap);
    let out = dir.path().join("laps.jsonl");
    let (pcap_text, out_text) = (pcap.display().to_string(), out.display().to_string());
    let done = Bin::run(
        &[
            "export",
            "--file",
            &pcap_text,
            "--port",
            "5400",
            "--output",
            &out_text,
            "--fields",
            "format,TimestampMS,Speed,LapNumber,recv_s",
            "--only-race-on",
        ],
        None,
    );
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_stderr_has(&["3 rows written", "1 with IsRaceOn = 0 skipped"]);
    let text = std::fs::read_to_string(&out).expect("the export");
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].as_object().expect("an object").len(), 5);
    assert_eq!(rows[0]["format"], "fh6");
    assert_eq!(rows[0]["TimestampMS"], 100);
    assert_eq!(rows[0]["Speed"].as_f64(), Some(f64::from(SPEED)));
    assert_eq!(rows[0]["LapNumber"], LAP_NUMBER);
    assert_eq!(rows[0]["recv_s"], 0.0);
    assert_eq!(rows[1]["format"], "fm7");
    assert_eq!(rows[1]["recv_s"], 0.016);
    assert_eq!(rows[2]["format"], "sled");
    assert_eq!(rows[2]["TimestampMS"], 400);
    assert_eq!(rows[2]["LapNumber"], serde_json::Value::Null);
    assert_eq!(rows[2]["recv_s"], 3_600.016);
}

#[test]
fn a_capture_with_several_ports_needs_port_and_file_excludes_listen() {
    let dir = TempPath::dir("file-errors");
    let pcap = dir.path().join("two.pcap");
    mixed_capture(&pcap);
    let pcap_text = pcap.display().to_string();
    let out = dir.path().join("x.csv");
    let out_text = out.display().to_string();
    let several: &[&str] = &[
        "holds UDP datagrams to 2 destination ports",
        "--port 5400",
        "--port 5300",
        &pcap_text,
    ];
    let cases: [(&[&str], &[&str]); 6] = [
        (&["watch", "--file", &pcap_text], several),
        (
            &["export", "--file", &pcap_text, "--output", &out_text],
            several,
        ),
        (
            &["watch", "--file", &pcap_text, "--port", "9"],
            &["no UDP datagrams to port 9", "--port 5400"],
        ),
        (
            &["watch", "--file", &pcap_text, "--listen", "127.0.0.1:0"],
            &["--listen", "cannot be used with", "--file"],
        ),
        (
            &[
                "export", "--listen", "5400", "--file", &pcap_text, "-o", &out_text,
            ],
            &["--listen", "cannot be used with", "--file"],
        ),
        (
            &[
                "watch",
                "--file",
                &dir.path().join("none.pcap").display().to_string(),
            ],
            &["cannot open", "none.pcap"],
        ),
    ];
    for (args, parts) in cases {
        let done = Bin::run(args, None);
        assert_eq!(done.code(), 2, "{args:?}: {}", done.stderr);
        done.assert_stderr_has(parts);
    }
    assert!(
        !out.exists(),
        "no output file for a capture that cannot be read"
    );
}

#[test]
fn watch_a_capture_file_without_a_terminal_prints_lines_and_ends_with_it() {
    let dir = TempPath::dir("watch-file");
    let pcap = dir.path().join("drive.pcap");
    // 1.2 s of fh6 at 50 Hz: a line after a second, and one at the end.
    let datagrams: Vec<(u64, u16, Vec<u8>)> = (0..60)
        .map(|i| (i * 20, 5400, Spec::new(Format::Fh6, i as u32).build()))
        .collect();
    write_capture(&pcap, &datagrams);
    let pcap_text = pcap.display().to_string();
    let done = Bin::run(&["watch", "--file", &pcap_text, "--format", "fh6"], None);
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_stderr_has(&["playing", &pcap_text, "port 5400, 60 packets"]);
    let expected = format!(
        "speed {:.0} km/h, gear {GEAR}, {:.0} rpm, lap {},",
        SPEED * 3.6,
        CURRENT_ENGINE_RPM,
        DRIVERS_LAP
    );
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert!(!lines.is_empty(), "no lines:\n{}", done.stderr);
    for line in &lines {
        assert!(line.starts_with(&expected), "{line:?} in\n{}", done.stdout);
        assert!(line.ends_with(" Hz, fh6"), "{line}");
    }
}

#[test]
fn run_watch_without_a_terminal_prints_lines_and_the_final_summary() {
    let (simhub, simhub_addr) = receiver();
    let (dash, dash_addr) = receiver();
    let to_simhub = format!("{simhub_addr},name=simhub");
    let to_dash = format!("{dash_addr},format=fh5,name=dash");
    let mut bin = Bin::spawn(
        &[
            "run",
            "--watch",
            "--listen",
            "127.0.0.1:0",
            "--to",
            &to_simhub,
            "--to",
            &to_dash,
        ],
        None,
    );
    let addr = bin.wait_until_running();
    let sender = Sender::new(addr);
    // Long enough for two one-second lines.
    let until = Instant::now() + Duration::from_millis(2_500);
    let mut sent = 0u64;
    while Instant::now() < until {
        sent += 1;
        sender.send(&Spec::new(Format::Fh6, sent as u32).build());
        // Both have it before the next is sent, so none is in flight at the stop.
        assert_eq!(recv(&simhub).len(), Format::Fh6.len());
        assert_eq!(recv(&dash).len(), Format::Fh5.len());
        std::thread::sleep(Duration::from_millis(20));
    }
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_summary_line("simhub", simhub_addr, "same", sent);
    done.assert_summary_line("dash", dash_addr, "fh5", sent);

    let expected = format!(
        "speed {:.0} km/h, gear {GEAR}, {:.0} rpm, lap {},",
        SPEED * 3.6,
        CURRENT_ENGINE_RPM,
        DRIVERS_LAP
    );
    let lines: Vec<&str> = done
        .stdout
        .lines()
        .filter(|l| l.starts_with(&expected))
        .collect();
    assert!(lines.len() >= 2, "lines:\n{}", done.stdout);
    // Each names both destinations with a rate: " | simhub 50/s | dash 50/s".
    let rate = |line: &str, name: &str| -> f64 {
        let (_, after) = line
            .split_once(&format!(" | {name} "))
            .unwrap_or_else(|| panic!("no {name} in {line:?}"));
        let (n, _) = after
            .split_once("/s")
            .unwrap_or_else(|| panic!("no rate in {line:?}"));
        n.parse().unwrap_or_else(|_| panic!("{n:?} in {line:?}"))
    };
    for line in &lines {
        assert!(!line.contains("errors"), "{line}");
        rate(line, "simhub");
        rate(line, "dash");
    }
    assert!(
        lines
            .iter()
            .any(|l| rate(l, "simhub") > 0.0 && rate(l, "dash") > 0.0),
        "no line with both rates above zero:\n{}",
        done.stdout
    );
}

#[test]
fn watch_is_an_option_of_run_not_of_check() {
    let done = Bin::run(&["check", "--watch", "--to", "127.0.0.1:9000"], None);
    assert_eq!(done.code(), 2, "{}", done.stderr);
    done.assert_stderr_has(&["--watch is an option of run"]);
}

/// A CSV export read back: its header and rows, values found by column name.
struct Table {
    header: csv::StringRecord,
    rows: Vec<csv::StringRecord>,
}

impl Table {
    #[track_caller]
    fn read(from: impl std::io::Read) -> Table {
        let mut r = csv::Reader::from_reader(from);
        let header = r.headers().expect("a header").clone();
        let rows = r.records().map(|r| r.expect("a row")).collect();
        Table { header, rows }
    }

    /// The value of column `name` in row `row`.
    #[track_caller]
    fn get(&self, row: usize, name: &str) -> String {
        let i = self
            .header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"));
        self.rows[row][i].to_owned()
    }
}

/// Issue 30: `watch` with no options, in a folder whose forza-relay.toml
/// listens elsewhere, listened on 0.0.0.0:5400 (doctor and setup read the
/// file). It listens where the file's `[listen]` says, and reads its format:
/// fh4, which auto can't tell from fh5 by the length. Only `[listen]` is
/// read: a destination this shell can't validate (its password in a variable
/// set only where the relay runs) does not move it (found in review).
#[test]
fn issue30_watch_without_options_listens_where_the_configuration_file_says() {
    let dir = TempPath::dir("watch-config");
    let unused = UdpSocket::bind("127.0.0.1:0").expect("a port");
    std::fs::write(
        dir.path().join("forza-relay.toml"),
        format!(
            "[listen]\naddr = \"127.0.0.1:0\"\nformat = \"fh4\"\n\n{}\n\
             [[destination]]\nname = \"league\"\naddr = \"mqtt://127.0.0.1:1\"\n\
             username = \"me\"\npassword_env = \"FORZA_RELAY_TEST_UNSET_{}\"\n",
            destination_toml("simhub", unused.local_addr().expect("bound"), "same", ""),
            std::process::id()
        ),
    )
    .expect("write the configuration");
    let mut bin = Bin::spawn(&["watch"], Some(dir.path()));
    bin.wait_for_line("listening where forza-relay.toml says ([listen]: 127.0.0.1:0, fh4)");
    let addr = listening(&mut bin);
    assert_eq!(
        addr.ip().to_string(),
        "127.0.0.1",
        "the file's address, not 0.0.0.0"
    );
    let sender = Sender::new(addr);
    let until = Instant::now() + Duration::from_millis(1_500);
    let mut t = 0;
    // The game's pace: a frame every 20 ms.
    while Instant::now() < until {
        t += 1;
        sender.send(&Spec::new(Format::Fh4, t).build());
        std::thread::sleep(Duration::from_millis(20));
    }
    bin.wait_for_stdout_line(" Hz, fh4");
    bin.stop();
}
