//! The README and `docs/` hold together: every relative link goes to a file that
//! exists (and to a heading in it, for `file.md#heading`), the test command the
//! README gives is the one `.ci/run` runs, docs/fields.md names every key of the
//! frames the relay writes, and docs/outputs.md's examples work on them
//! (`outputs`, issue 30).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{receiver, recv, Sender, Spec};
use forza_relay::output::{Encoder, Encoding, Frame, Selection};
use forza_relay::wire::{Format, Packet, Puddle};
use serde_json::Value;

mod outputs;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/ exists");
    for entry in docs {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn links(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, spaces as hyphens, punctuation other
/// than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading of a Markdown page (outside code blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_readme_and_docs_leads_somewhere() {
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let dir = page.parent().expect("a page is in a folder");
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, heading) = match target.split_once('#') {
                Some((file, heading)) => (file, Some(heading)),
                None => (target, None),
            };
            let linked = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            assert!(
                linked.exists(),
                "{}: the link ({target}) leads to no file",
                page.display()
            );
            if let Some(heading) = heading {
                assert!(
                    anchors(&read(&linked)).iter().any(|a| a == heading),
                    "{}: the link ({target}) leads to no heading of {}",
                    page.display(),
                    linked.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} links found");
}

#[test]
fn the_readme_test_command_is_the_one_ci_runs() {
    let readme = read(&root().join("README.md"));
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Run and test"))
        .expect("README.md has a \"Run and test\" section");
    // --workspace: xtask's own tests too (issue 32).
    let command = "cargo test --workspace --all-targets";
    assert!(
        section.contains(&format!("```sh\n{command}\n```")),
        "the Run and test section gives `{command}`:\n{section}"
    );
    let ci = read(&root().join(".ci/run"));
    assert!(
        ci.lines().any(|l| l.trim_start().starts_with(command)),
        ".ci/run runs `{command}`"
    );
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(anchor(" Car class"), "car-class");
    assert_eq!(
        anchor(" `forza-relay run`: relay the game's packets"),
        "forza-relay-run-relay-the-games-packets"
    );
    assert_eq!(
        anchor(" What real drives look like"),
        "what-real-drives-look-like"
    );
}

/// One row of docs/fields.md's table: its keys, its JSON cell and its influx cell.
#[derive(Debug)]
struct KeyRow {
    keys: Vec<String>,
    influx: String,
}

/// The rows of docs/fields.md's table, as committed.
fn key_table() -> Vec<KeyRow> {
    let text = read(&root().join("docs/fields.md"));
    let rows: Vec<KeyRow> = text
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 7, "seven cells: {line}");
            let keys = cells[0]
                .split(", ")
                .map(|k| k.trim_matches('`').to_owned())
                .collect();
            KeyRow {
                keys,
                influx: cells[2].to_owned(),
            }
        })
        .collect();
    assert!(rows.len() > 50, "{} rows in docs/fields.md", rows.len());
    rows
}

/// What an influx line carries: its tags, its fields with their type (`i`
/// integer, `f` float, `s` string), and whether it has a timestamp. Enough
/// of line protocol for the relay's lines, whose keys and strings hold no
/// space, comma or quote.
fn influx_keys(line: &str) -> (BTreeSet<String>, BTreeMap<String, char>, bool) {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let parts: Vec<&str> = line.split(' ').collect();
    assert!(matches!(parts.len(), 2 | 3), "{line}");
    let mut head = parts[0].split(',');
    assert_eq!(head.next(), Some("forza"), "{line}");
    let tags = head
        .map(|t| t.split_once('=').expect("tag=value").0.to_owned())
        .collect();
    let fields = parts[1]
        .split(',')
        .map(|f| {
            let (k, v) = f.split_once('=').expect("field=value");
            let kind = if v.starts_with('"') {
                's'
            } else if v.ends_with('i') {
                'i'
            } else {
                'f'
            };
            (k.to_owned(), kind)
        })
        .collect();
    (tags, fields, parts.len() == 3)
}

/// Every key the frames carry, by output.
#[derive(Default)]
struct Seen {
    json: BTreeSet<String>,
    tags: BTreeSet<String>,
    /// Influx fields, with every type seen.
    fields: BTreeMap<String, BTreeSet<char>>,
    lines: usize,
    stamped: usize,
}

impl Seen {
    fn json(&mut self, text: &[u8]) {
        let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(text) else {
            panic!("not a JSON object: {}", String::from_utf8_lossy(text));
        };
        self.json.extend(o.keys().cloned());
    }

    fn influx(&mut self, text: &[u8]) {
        let (tags, fields, stamped) = influx_keys(std::str::from_utf8(text).expect("UTF-8"));
        self.tags.extend(tags);
        for (k, kind) in fields {
            self.fields.entry(k).or_default().insert(kind);
        }
        self.lines += 1;
        self.stamped += usize::from(stamped);
    }
}

/// A packet of every format, its fields set by name (racing, stopped with
/// the car still in it, and a menu frame), read as that format.
fn packets_of_every_format() -> Vec<(Format, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, format) in Format::ALL.into_iter().enumerate() {
        let puddle = match format {
            Format::Fh6 => Puddle::Flag(1),
            _ => Puddle::Depth(0.5),
        };
        let spec = Spec::new(format, 100 * i as u32).puddle([puddle; 4]);
        out.push((format, spec.build()));
        out.push((format, spec.racing(false).build()));
        let mut menu = vec![0u8; format.len()];
        Packet::new_checked(&mut menu[..], format)
            .unwrap()
            .set_timestamp_ms(100 * i as u32 + 1);
        out.push((format, menu));
    }
    out
}

/// The JSON objects of `/api/stream` at `web`, one at a time.
struct EventStream {
    socket: TcpStream,
    seen: String,
}

impl EventStream {
    #[track_caller]
    fn open(web: SocketAddr, path: &str) -> EventStream {
        use std::io::Write as _;
        let mut socket = TcpStream::connect(web).expect("connect to the page");
        socket
            .set_read_timeout(Some(common::http::HTTP_TIMEOUT))
            .unwrap();
        write!(socket, "GET {path} HTTP/1.1\r\nHost: {web}\r\n\r\n").unwrap();
        let mut stream = EventStream {
            socket,
            seen: String::new(),
        };
        while !stream.seen.contains("\r\n\r\n") {
            assert!(stream.more(), "the page answers within the timeout");
        }
        let (head, rest) = stream.seen.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        stream.seen = rest.to_owned();
        stream
    }

    /// Reads what came; false when nothing did within the read timeout.
    #[track_caller]
    fn more(&mut self) -> bool {
        let mut buf = [0u8; 16 << 10];
        match self.socket.read(&mut buf) {
            Ok(got) => {
                assert!(got > 0, "the stream closed: {}", self.seen);
                self.seen.push_str(&String::from_utf8_lossy(&buf[..got]));
                true
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
            Err(e) => panic!("reading the stream: {e}"),
        }
    }

    /// The next object's text, if one comes within `within`.
    #[track_caller]
    fn next_within(&mut self, within: Duration) -> Option<String> {
        self.socket.set_read_timeout(Some(within)).unwrap();
        loop {
            if let Some(at) = self.seen.find("data: ") {
                if let Some(end) = self.seen[at..].find('\n') {
                    let text = self.seen[at + 6..at + end].to_owned();
                    self.seen.drain(..at + end + 1);
                    return Some(text);
                }
            }
            if !self.more() {
                return None;
            }
        }
    }

    /// The next object's text.
    #[track_caller]
    fn next(&mut self) -> String {
        self.next_within(common::http::HTTP_TIMEOUT)
            .expect("an event within the timeout")
    }
}

/// Issue 30: every key of real json, influx and stream frames, of packets of
/// every format built field by field, is named in docs/fields.md with the
/// influx type the line gives it, and every row of the table is in some frame.
/// The frames are made by the encoders for every format (menu frames too),
/// and by the relay itself for the formats `auto` tells apart: its json and
/// influx destinations and its page's stream.
#[test]
fn every_key_of_json_influx_and_stream_frames_is_in_docs_fields_md_and_back() {
    let rows = key_table();
    let mut seen = Seen::default();
    let mut json = Encoder::new(Encoding::Json, &Selection::all());
    let mut influx = Encoder::new(Encoding::Influx, &Selection::all());
    let mut out = Vec::new();
    for (format, payload) in packets_of_every_format() {
        let frame = Frame {
            payload: &payload,
            format,
            time: SystemTime::now(),
        };
        json.encode(&frame, &mut out).expect("a JSON object");
        seen.json(&out);
        if influx.encode(&frame, &mut out).is_ok() {
            seen.influx(&out);
        }
    }
    assert_eq!(seen.lines, 2 * Format::ALL.len(), "no line of a menu frame");

    // The relay: a json and an influx destination, and the page's stream.
    let (json_rx, json_to) = receiver();
    let (influx_rx, influx_to) = receiver();
    let (bin, listen, web) = crate::web::started_with_page(
        &[
            &format!("{json_to},format=json,name=json"),
            &format!("{influx_to},format=influx,name=influx"),
        ],
        None,
    );
    let mut stream = EventStream::open(web, "/api/stream?hz=360");
    let sender = Sender::new(listen);
    // The stream takes the frames that come once the page follows the relay's
    // frames, which it starts to when the stream opens: a frame every 50 ms
    // until one comes through.
    let mut warm = 0;
    loop {
        warm += 1;
        sender.send(&Spec::new(Format::Fh6, warm).build());
        seen.json(&recv(&json_rx));
        seen.influx(&recv(&influx_rx));
        if stream.next_within(Duration::from_millis(50)).is_some() {
            break;
        }
        assert!(warm < 600, "no frame on the stream in 600 tries");
    }
    let mut stream_formats = BTreeSet::new();
    for (i, (format, puddle)) in [
        (Format::Sled, Puddle::Depth(0.5)),
        (Format::Fm7, Puddle::Depth(0.5)),
        (Format::Fm2023, Puddle::Depth(0.5)),
        (Format::Fh5, Puddle::Depth(0.5)),
        (Format::Fh6, Puddle::Flag(1)),
    ]
    .into_iter()
    .enumerate()
    {
        let stamp = 5_000 + i as u32;
        sender.send(&Spec::new(format, stamp).puddle([puddle; 4]).build());
        let object = recv(&json_rx);
        seen.json(&object);
        let o: Value = serde_json::from_slice(&object).unwrap();
        assert_eq!(o["format"], format.id(), "read as {format} by auto");
        seen.influx(&recv(&influx_rx));
        // The stream sends the newest frame: this one, once it is there.
        loop {
            let text = stream.next();
            let o: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            if o["TimestampMS"] == stamp {
                stream_formats.insert(o["format"].as_str().unwrap().to_owned());
                seen.json(text.as_bytes());
                break;
            }
        }
    }
    assert_eq!(stream_formats.len(), 5, "{stream_formats:?}");
    drop(stream);
    bin.stop();

    let named: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.keys.iter().map(String::as_str))
        .collect();
    for key in &seen.json {
        assert!(
            named.contains(key.as_str()),
            "JSON key {key} is not in docs/fields.md"
        );
    }
    for key in seen.fields.keys() {
        assert!(
            named.contains(key.as_str()),
            "influx field {key} is not in docs/fields.md"
        );
    }
    let tag_rows: BTreeSet<String> = rows
        .iter()
        .filter_map(|r| {
            let at = r.influx.find("the tag `")? + 9;
            Some(r.influx[at..].trim_end_matches('`').to_owned())
        })
        .collect();
    assert_eq!(
        seen.tags, tag_rows,
        "the tags of the lines and of docs/fields.md"
    );
    assert_eq!(seen.stamped, seen.lines, "every line has its timestamp");
    for row in &rows {
        for key in &row.keys {
            assert!(seen.json.contains(key), "{key}: in no JSON frame");
            let kind = match row.influx.split(',').next().unwrap() {
                "integer" => Some('i'),
                "float" => Some('f'),
                "string" => Some('s'),
                _ => None,
            };
            let types = seen.fields.get(key);
            match kind {
                Some(kind) => assert_eq!(
                    types,
                    Some(&BTreeSet::from([kind])),
                    "{key}: docs/fields.md says {}",
                    row.influx
                ),
                None => assert_eq!(types, None, "{key} is a field: {}", row.influx),
            }
        }
    }
}
