//! docs/outputs.md's examples, taken from the page itself, work on what the
//! relay sends (issue 30): the Home Assistant template rendered by Jinja2 for
//! every frame of a race, its end included; the Grafana panels' InfluxQL run
//! against a real InfluxDB fed by `forza-relay simulate`; the sizes it states
//! for a frame measured.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use common::bin::Bin;
use common::{receiver, recv};
use forza_relay::counters::DropReason;
use forza_relay::output::{Encoder, Encoding, Frame, Selection};
use forza_relay::wire::{Format, Packet};
use serde_json::Value;

use super::{read, root};

/// The fenced code blocks of `text` written in `language`, in order.
fn code_blocks(text: &str, language: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match current.as_mut() {
            None if line == format!("```{language}") => current = Some(String::new()),
            Some(block) if line == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// The part of docs/outputs.md under the heading `heading`, to the next
/// heading of any level.
fn section(heading: &str) -> String {
    let text = read(&root().join("docs/outputs.md"));
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/outputs.md has the heading {heading:?}"));
    let rest = &text[start + heading.len() + 2..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    rest[..end].to_owned()
}

/// A relay running in this process with one destination `name` of `format`
/// at `to` (`options` are its other settings), reading `fh6`.
fn relay_to(name: &str, to: SocketAddr, format: &str, options: &str) -> common::Running {
    common::Running::start(common::config(&format!(
        "{}{}",
        common::listen_toml("fh6"),
        common::destination_toml(name, to, format, options)
    )))
}

/// `forza-relay simulate --duration SECONDS` to `to`, run to its end; the number
/// of packets it sent (its last line: `sent N packets to …`).
#[track_caller]
fn simulate(to: SocketAddr, seconds: &str) -> u64 {
    let done = Bin::run(
        &["simulate", "--to", &to.to_string(), "--duration", seconds],
        None,
    );
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let said = format!("{}{}", done.stdout, done.stderr);
    let line = said
        .lines()
        .find(|l| l.starts_with("sent "))
        .unwrap_or_else(|| panic!("no 'sent N packets' line:\n{said}"));
    line.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"))
}

/// Debian's python3 with Jinja2 (`python3-jinja2`), the template engine Home
/// Assistant's templates are written for.
const PYTHON_JINJA2: &str = "/usr/bin/python3";

/// Renders `template` with Jinja2 for each MQTT payload of `payloads`, as Home
/// Assistant renders a `value_template` (`value` the payload, `value_json` it
/// parsed); the text of each, in order. Fails the test on an error.
#[track_caller]
fn render_jinja2(template: &str, payloads: &[String]) -> Vec<String> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    const SCRIPT: &str = "
import json, sys, jinja2
template = jinja2.Environment().from_string(sys.argv[1])
for line in sys.stdin:
    payload = line.rstrip('\\n')
    print(template.render(value=payload, value_json=json.loads(payload)))
";
    let mut child = Command::new(PYTHON_JINJA2)
        .args(["-c", SCRIPT, template])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python3");
    let mut stdin = child.stdin.take().expect("piped");
    let input = payloads.join("\n") + "\n";
    // Written from a thread of its own: python writes while it reads.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("python3 ends");
    // A template that fails ends python before it reads every payload: its
    // error, not the broken pipe, says why.
    assert!(
        out.status.success(),
        "Jinja2 failed on {template}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    writer
        .join()
        .expect("the writer")
        .expect("write the payloads");
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Issue 30: docs/outputs.md's Home Assistant `value_template`, rendered by
/// Jinja2 for every frame the relay sends a json destination with
/// `only_race_on` (as the page's MQTT example has) while `forza-relay
/// simulate` drives a race, the frame that ends it (`speed_kmh: null`)
/// included, and for every frame of a capture made with tcpdump
/// (tests/fixtures/captures/lo.pcap, through `export`): a number each time,
/// the speed rounded, and 0 once the race is over.
#[test]
fn the_home_assistant_template_of_outputs_md_renders_every_frame_of_a_race_and_its_end() {
    let jinja2 = std::process::Command::new(PYTHON_JINJA2)
        .args(["-c", "import jinja2"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !common::require_tool("python3-jinja2", jinja2, "install Debian's python3-jinja2") {
        return;
    }
    let yaml = code_blocks(&read(&root().join("docs/outputs.md")), "yaml")
        .into_iter()
        .find(|b| b.contains("value_template:"))
        .expect("docs/outputs.md has the Home Assistant example");
    let line = yaml
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("value_template:"))
        .expect("a value_template line");
    let template = line
        .trim()
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .expect("a double-quoted YAML string")
        .replace("\\\"", "\"");

    let (rx, to) = receiver();
    let relay = relay_to("home-assistant", to, "json", "only_race_on = true");
    let sent = simulate(relay.addr, "2");
    let mut frames = Vec::new();
    let mut racing = false;
    // Every frame the relay sends, to the one that ends the race.
    loop {
        let text = String::from_utf8(recv(&rx)).expect("UTF-8");
        let o: Value = serde_json::from_str(&text).unwrap();
        frames.push(text);
        match o["IsRaceOn"].as_i64() {
            Some(1) => racing = true,
            _ if racing => {
                assert!(o["speed_kmh"].is_null(), "the race's last frame: {o}");
                break;
            }
            _ => {}
        }
    }
    let snapshot = relay.wait_until("every packet handled", |s| {
        common::destination(s, "home-assistant").stats.received == sent
    });
    let stats = &common::destination(&snapshot, "home-assistant").stats;
    assert_eq!(stats.sent, frames.len() as u64, "every frame sent was read");
    drop(relay);

    let capture = root().join("tests/fixtures/captures/lo.pcap");
    let export = Bin::run(
        &[
            "export",
            "--file",
            capture.to_str().expect("a UTF-8 path"),
            "--port",
            "47400",
            "--as",
            "jsonl",
            "--output",
            "-",
        ],
        None,
    );
    assert_eq!(export.code(), 0, "{}", export.stderr);
    let captured: Vec<String> = export.stdout.lines().map(str::to_owned).collect();
    assert_eq!(captured.len(), 50, "the capture's Forza stream");
    frames.extend(captured);

    let rendered = render_jinja2(&template, &frames);
    assert_eq!(rendered.len(), frames.len());
    for (frame, text) in frames.iter().zip(&rendered) {
        let shown: f64 = text
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{template} gave {text:?} ({e}) for {frame}"));
        let o: Value = serde_json::from_str(frame).unwrap();
        match o["speed_kmh"].as_f64() {
            Some(kmh) => assert!((shown - kmh).abs() <= 0.5, "{shown} for {kmh} km/h"),
            None => assert_eq!(shown, 0.0, "{frame}"),
        }
    }
}

/// The InfluxQL of a Grafana panel, its time range and interval as Grafana
/// would fill them in: the last hour, a point a second.
fn influxql(panel: &str) -> String {
    panel
        .replace("$timeFilter", "time > now() - 1h")
        .replace("$__interval", "1s")
}

/// Issue 30: the Grafana panels of docs/outputs.md (InfluxQL), run against a
/// real InfluxDB 1.x fed by a relay's influx destination while `forza-relay
/// simulate` drives with menu frames before and after the race: a line per
/// simulated car and no other (no car "0" of menu frames), speed and revs and
/// the four tyres charted; the menu frames counted not racing.
#[test]
fn the_grafana_queries_of_outputs_md_chart_the_simulated_car_and_no_car_of_menu_frames() {
    if !crate::influx::influxd_available() {
        return;
    }
    let panels = code_blocks(&section("### Grafana: a starting point"), "sql");
    assert_eq!(panels.len(), 2, "the speed and revs panel, the tyres panel");
    let influxd = crate::influx::Influxd::start();
    let relay = relay_to("influxdb", influxd.udp, "influx", "");
    let sent = simulate(relay.addr, "3");
    let menu = 2 * u64::from(forza_relay::simulate::RACE_OFF_FRAMES);
    let snapshot = relay.wait_until("every packet handled", |s| {
        common::destination(s, "influxdb").stats.received == sent
    });
    let stats = &common::destination(&snapshot, "influxdb").stats;
    assert_eq!(
        (stats.sent, stats.dropped(DropReason::NotRacing)),
        (sent - menu, menu),
        "the menu frames are counted not racing"
    );
    let points = sent - menu;
    influxd.query_until("forza", r#"SELECT count("IsRaceOn") FROM forza"#, |s| {
        s[0]["values"][0][1] == points
    });

    let by_car = influxd.query("forza", &influxql(&panels[0]));
    let cars: Vec<&Value> = by_car
        .as_array()
        .unwrap_or_else(|| panic!("no series: {by_car}"))
        .iter()
        .map(|s| &s["tags"]["car"])
        .collect();
    assert_eq!(
        cars,
        [&Value::from("2352")],
        "one car, the simulated one: {by_car}"
    );
    let columns = &by_car[0]["columns"];
    assert_eq!(columns[1], "km/h");
    assert_eq!(columns[2], "rpm / 100");
    let rows = by_car[0]["values"].as_array().unwrap();
    assert!(rows.len() >= 2, "a point a second over 3 s: {by_car}");
    for row in rows {
        let (kmh, revs) = (row[1].as_f64().unwrap(), row[2].as_f64().unwrap());
        assert!(
            (0.0..400.0).contains(&kmh) && (5.0..120.0).contains(&revs),
            "{row}"
        );
    }

    let tyres = influxd.query("forza", &influxql(&panels[1]));
    let series = tyres
        .as_array()
        .unwrap_or_else(|| panic!("no series: {tyres}"));
    assert_eq!(series.len(), 1, "{tyres}");
    for row in series[0]["values"].as_array().unwrap() {
        for celsius in &row.as_array().unwrap()[1..5] {
            let c = celsius
                .as_f64()
                .unwrap_or_else(|| panic!("a tyre without a value: {row}"));
            assert!((0.0..200.0).contains(&c), "{row}");
        }
    }
    assert!(
        !influxd.log().contains("field type conflict"),
        "{}",
        influxd.log()
    );
}

/// The `A to B` (kB) just before `marker` in `text`.
#[track_caller]
fn kb_range_before(text: &str, marker: &str) -> (f64, f64) {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("docs/outputs.md says {marker:?}"));
    let words: Vec<&str> = text[..at].split_whitespace().rev().take(3).collect();
    match words[..] {
        [hi, "to", lo] => (
            lo.trim_start_matches('(')
                .parse()
                .unwrap_or_else(|e| panic!("{lo}: {e}")),
            hi.parse().unwrap_or_else(|e| panic!("{hi}: {e}")),
        ),
        _ => panic!("no 'A to B' before {marker:?}: {words:?}"),
    }
}

/// Fails unless `lo` to `hi` kB covers the sizes `min` to `max` bytes at its
/// precision (a tenth of a kB), and says no more than 100 bytes beyond them.
#[track_caller]
fn assert_range(what: &str, (lo, hi): (f64, f64), (min, max): (usize, usize)) {
    let (lo, hi) = (lo * 1000.0, hi * 1000.0);
    let (min, max) = (min as f64, max as f64);
    assert!(
        lo - 50.0 <= min && max <= hi + 50.0 && min < lo + 100.0 && max > hi - 100.0,
        "docs/outputs.md says {what} is {lo} to {hi} bytes; measured {min} to {max}"
    );
}

/// Issue 30: the sizes docs/outputs.md gives for an all-column frame are
/// those of the frames of a simulated minute in every format, encoded as the
/// relay encodes them: JSON, and influx lines with and without a Dash block.
#[test]
fn the_frame_sizes_outputs_md_states_are_those_of_a_simulated_minute_in_every_format() {
    use forza_relay::simulate::Simulator;
    let text = read(&root().join("docs/outputs.md"));
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let json_kb = kb_range_before(&text, "kB of JSON");
    let line_kb = kb_range_before(&text, "kB of line protocol");
    let sled_kb = kb_range_before(&text, "kB from a `sled` packet");
    let (mut json_bytes, mut line_bytes, mut sled_bytes) =
        ((usize::MAX, 0), (usize::MAX, 0), (usize::MAX, 0));
    let grow = |(min, max): &mut (usize, usize), n: usize| {
        *min = (*min).min(n);
        *max = (*max).max(n);
    };
    let frame_time = Duration::from_micros(16_667);
    let t0 = SystemTime::now();
    for format in Format::ALL {
        let mut sim = Simulator::new(format, 30);
        let mut json = Encoder::new(Encoding::Json, &Selection::all());
        let mut influx = Encoder::new(Encoding::Influx, &Selection::all());
        let (mut out, mut buf) = (Vec::new(), vec![0u8; format.len()]);
        for i in 0..3_600 {
            let n = sim.frame(frame_time, &mut buf).expect("room for a packet");
            if Packet::new_checked(&buf[..n], format).unwrap().is_race_on() == 0 {
                continue;
            }
            let frame = Frame {
                payload: &buf[..n],
                format,
                time: t0 + frame_time * i,
            };
            json.encode(&frame, &mut out).expect("an object");
            grow(&mut json_bytes, out.len());
            influx.encode(&frame, &mut out).expect("a line");
            match format {
                Format::Sled => grow(&mut sled_bytes, out.len()),
                _ => grow(&mut line_bytes, out.len()),
            }
        }
    }
    assert_range("an all-column JSON object", json_kb, json_bytes);
    assert_range("an all-column influx line", line_kb, line_bytes);
    assert_range("an all-column sled influx line", sled_kb, sled_bytes);
}
