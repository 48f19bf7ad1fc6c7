//! Recording through the real binary: `forza-relay record`, then `replay` of
//! what it wrote; `[record]` while relaying at 1,000 packets/s; and tshark
//! reading a recording.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use forza_relay::capture::record;
use forza_relay::capture::Reader;
use forza_relay::wire::Format;

use common::bin::Bin;
use common::*;

/// The datagrams a test records: Forza packets of every format, with distinct
/// timestamps, and a few that are not Forza packets at all.
fn datagrams(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 8 {
            0 => Spec::new(Format::Fh6, i).build(),
            1 => Spec::new(Format::Fh5, i).build(),
            2 => Spec::new(Format::Fm7, i).build(),
            3 => Spec::new(Format::Fm2023, i).build(),
            4 => Spec::new(Format::Sled, i).racing(false).build(),
            5 => vec![(i % 251) as u8; 1 + i as usize],
            6 => Vec::new(),
            _ => Spec::new(Format::Fh6, i).class(FH6_R).build(),
        })
        .collect()
}

/// Starts `forza-relay record` on a fresh loopback port into `file`, with
/// `extra` arguments, and returns it with the address it records.
fn start_recording(file: &Path, count: u32, extra: &[&str]) -> (Bin, SocketAddr) {
    let count = count.to_string();
    let file = file.display().to_string();
    let mut args = vec![
        "record",
        "--listen",
        "127.0.0.1:0",
        "-o",
        &file,
        "--count",
        &count,
    ];
    args.extend_from_slice(extra);
    let mut bin = Bin::spawn(&args, None);
    let line = bin.wait_for_line("recording what arrives on ");
    (bin, address_in(&line))
}

/// The address after "arrives on " in `line`.
#[track_caller]
fn address_in(line: &str) -> SocketAddr {
    line.split("arrives on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// Sends `datagrams` from one socket, `gap` apart; returns the sender's port.
fn send_paced(to: SocketAddr, datagrams: &[Vec<u8>], gap: Duration) -> u16 {
    let sender = Sender::new(to);
    let start = Instant::now();
    for (i, d) in datagrams.iter().enumerate() {
        sender.send(d);
        let due = start + gap * (i as u32 + 1);
        thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    sender.port()
}

#[test]
fn record_then_replay_reproduces_every_payload_byte_and_the_spacing() {
    const N: u32 = 60;
    const GAP: Duration = Duration::from_millis(10);
    let dir = TempPath::dir("record-replay");
    let file = dir.path().join("recorded.pcap");
    let sent = datagrams(N);
    let (bin, addr) = start_recording(&file, N, &[]);
    send_paced(addr, &sent, GAP);
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_stderr_has(&[&format!("recorded {N} datagrams into {}", file.display())]);

    let (rx, rx_addr) = receiver();
    let receiving = thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; MAX_DATAGRAM];
        while got.len() < N as usize {
            let Ok(n) = recv_into(&rx, &mut buf) else {
                break;
            };
            got.push((Instant::now(), buf[..n].to_vec()));
        }
        got
    });
    let to = rx_addr.to_string();
    let replayed = Bin::run(&["replay", &file.display().to_string(), "--to", &to], None);
    assert_eq!(replayed.code(), 0, "{}", replayed.stderr);
    let got = receiving.join().expect("the receiver thread");

    assert_eq!(got.len(), sent.len(), "every datagram replayed");
    for (i, ((_, bytes), sent)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(bytes, sent, "datagram {i}, byte for byte");
    }
    // The spacing: the whole run within 30 % of the recorded one (10 ms apart),
    // and most gaps at least half their recorded size. A loaded 2-core machine
    // may wake the receiver late now and then, which bunches a few together.
    let span = got[got.len() - 1].0 - got[0].0;
    let recorded = GAP * (N - 1);
    println!(
        "replayed {} datagrams over {span:?} (recorded over about {recorded:?})",
        got.len()
    );
    assert!(
        span.as_secs_f64() > recorded.as_secs_f64() * 0.7
            && span.as_secs_f64() < recorded.as_secs_f64() * 1.3,
        "replayed over {span:?}, recorded over about {recorded:?}"
    );
    let wide = got
        .windows(2)
        .filter(|w| w[1].0 - w[0].0 >= GAP / 2)
        .count();
    assert!(
        wide * 2 >= got.len(),
        "only {wide} gaps kept half their size"
    );
}

#[test]
fn recording_while_relaying_1000_packets_a_second_loses_nothing() {
    const N: u32 = 2_000;
    let dir = TempPath::dir("record-run");
    let (same, same_addr) = receiver();
    let (fh5, fh5_addr) = receiver();
    let toml = listen_toml("fh6")
        + "\n[record]\npath = \"laps/drive-{time}.pcap\"\n"
        + &destination_toml("same", same_addr, "same", "")
        + &destination_toml("fh5", fh5_addr, "fh5", "");
    let config = dir.path().join("forza-relay.toml");
    std::fs::write(&config, toml).expect("write the config");
    let config = config.display().to_string();
    let mut bin = Bin::spawn(&["--config", &config, "--stats-format", "json"], None);
    let listen = bin.wait_until_running();
    let counting = |socket: UdpSocket| {
        thread::spawn(move || {
            let mut buf = vec![0u8; MAX_DATAGRAM];
            let mut n = 0u32;
            while n < N && recv_into(&socket, &mut buf).is_ok() {
                n += 1;
            }
            n
        })
    };
    let (same_rx, fh5_rx) = (counting(same), counting(fh5));
    let packets: Vec<Vec<u8>> = (0..N).map(|i| Spec::new(Format::Fh6, i).build()).collect();
    // 1,000 a second: ten every 10 ms.
    let sender = Sender::new(listen);
    let start = Instant::now();
    for (i, p) in packets.iter().enumerate() {
        sender.send(p);
        if i % 10 == 9 {
            let due = start + Duration::from_millis(i as u64 + 1);
            thread::sleep(due.saturating_duration_since(Instant::now()));
        }
    }
    let (same_got, fh5_got) = (same_rx.join().unwrap(), fh5_rx.join().unwrap());
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);

    let recording = std::fs::read_dir(dir.path().join("laps"))
        .expect("the laps folder was made")
        .map(|e| e.expect("a folder entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "pcap"))
        .expect("a recording in laps/");
    let name = recording
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("drive-20") && !name.contains("{time}"),
        "{name}"
    );
    let recorded: Vec<_> = Reader::open(&recording)
        .expect("open the recording")
        .map(|d| d.expect("a good record"))
        .collect();
    let last: serde_json::Value =
        serde_json::from_str(done.stdout.lines().last().expect("the final JSON line"))
            .expect("JSON");
    println!(
        "sent {N}: same got {same_got}, fh5 got {fh5_got}, recorded {}; relay received {}, \
         tap dropped {}",
        recorded.len(),
        last["input"]["received"],
        last["tap_dropped"]
    );
    assert_eq!((same_got, fh5_got), (N, N), "relayed");
    assert_eq!(recorded.len(), N as usize, "recorded");
    for (i, (d, sent)) in recorded.iter().zip(&packets).enumerate() {
        assert_eq!(&d.payload, sent, "recorded datagram {i}");
        assert_eq!(d.to, listen, "recorded datagram {i}'s destination");
    }
    assert!(
        recorded.windows(2).all(|w| w[0].time <= w[1].time),
        "timestamps in order"
    );
    assert_eq!(last["event"], "final");
    assert_eq!(last["tap_dropped"], 0);
    assert_eq!(last["input"]["received"], N);
    done.assert_stderr_has(&[
        "recording every datagram received into",
        "recorded 2,000 datagrams into",
    ]);
}

#[test]
fn tshark_reads_a_recording_as_udp_with_the_right_ports() {
    if !common::require_tool("tshark", common::runs("tshark"), "it reads the recording") {
        return;
    }
    const N: u32 = 24;
    let dir = TempPath::dir("for-tshark");
    let file = dir.path().join("for-tshark.pcap");
    let (bin, addr) = start_recording(&file, N, &[]);
    let from_port = send_paced(addr, &datagrams(N), Duration::from_millis(2));
    assert_eq!(bin.wait().code(), 0);
    let out = Command::new("tshark")
        .args([
            "-r",
            &file.display().to_string(),
            "-T",
            "fields",
            "-e",
            "udp.srcport",
            "-e",
            "udp.dstport",
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
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), N as usize, "{lines:?}");
    for (line, d) in lines.iter().zip(datagrams(N)) {
        assert_eq!(
            *line,
            format!("{from_port}\t{}\t{}", addr.port(), d.len() + 8),
            "source port, destination port, UDP length"
        );
    }
}

/// The record header, IPv4 and UDP headers around each payload in a recording.
#[cfg(unix)]
const RECORD_OVERHEAD: u64 = 16 + 20 + 8;
/// A pcap's file header.
#[cfg(unix)]
const PCAP_HEADER: u64 = 24;

/// forza-relay under `ulimit -f BLOCKS` (of 512 bytes) with SIGXFSZ ignored, so
/// a write past the limit fails with EFBIG, as on a full disk; add its arguments.
#[cfg(unix)]
fn with_file_size_limit(blocks: u64) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f {blocks}; exec \"$0\" \"$@\""
        ))
        .args(common::bin::argv())
        .env("FORZA_RELAY_STATE_DIR", common::bin::test_state_dir());
    command
}

/// `forza-relay record` under `ulimit -f` (SIGXFSZ ignored): the file system says
/// EFBIG past the limit, which is what a full disk looks like to the writer.
#[test]
#[cfg(unix)] // sh and ulimit
fn issue12_a_full_disk_while_recording_is_logged_counted_and_ends_on_a_whole_record() {
    const N: u32 = 300;
    const LIMIT_BLOCKS: u64 = 64; // of 512 bytes: 32 KiB
    let dir = TempPath::dir("full-disk");
    let file = dir.path().join("full.pcap");
    let mut command = with_file_size_limit(LIMIT_BLOCKS);
    command
        .args(["record", "--listen", "127.0.0.1:0", "--count"])
        .arg(N.to_string())
        .arg("-o")
        .arg(&file);
    let mut bin = Bin::spawn_command(command);
    let addr = address_in(&bin.wait_for_line("recording what arrives on "));
    let packets: Vec<Vec<u8>> = (0..N).map(|i| Spec::new(Format::Fh6, i).build()).collect();
    send_paced(addr, &packets, Duration::from_millis(1));
    let done = bin.wait();

    let record_len = RECORD_OVERHEAD + packets[0].len() as u64;
    let fit = (LIMIT_BLOCKS * 512 - PCAP_HEADER) / record_len;
    let size = std::fs::metadata(&file).expect("the recording").len();
    assert_eq!(size, PCAP_HEADER + fit * record_len, "whole records only");
    let recorded: Vec<_> = Reader::open(&file)
        .expect("open the recording")
        .map(|d| d.expect("a whole record"))
        .collect();
    assert_eq!(recorded.len() as u64, fit);
    for (i, (d, sent)) in recorded.iter().zip(&packets).enumerate() {
        assert_eq!(&d.payload, sent, "recorded datagram {i}");
    }
    let lost = u64::from(N) - fit;
    let shown = file.display().to_string();
    done.assert_stderr_has(&[
        &format!("cannot write to {shown}"),
        "File too large",
        &format!("recorded {fit} datagrams into {shown}; {lost} not recorded"),
    ]);
    let failure = done.stderr.find("cannot write to").expect("found above");
    let last = done.stderr.find("recorded ").expect("found above");
    assert!(
        failure < last,
        "the failure is told when it happens:\n{}",
        done.stderr
    );
    assert_eq!(
        done.stderr.matches("cannot write to").count(),
        1,
        "told once:\n{}",
        done.stderr
    );
    assert_eq!(done.code(), 1, "{}", done.stderr);
}

/// `run --record` under the same file-size limit: the final summary (text and
/// JSON) counts every datagram admitted but not written, beside the relayed
/// ones, which all arrive (issue 12 item 4).
#[test]
#[cfg(unix)] // sh and ulimit
fn issue12_run_record_on_a_full_disk_counts_not_recorded_in_the_summary() {
    const N: u32 = 300;
    const LIMIT_BLOCKS: u64 = 64;
    let dir = TempPath::dir("full-disk-run");
    let file = dir.path().join("full.pcap");
    let tool = UdpSocket::bind("127.0.0.1:0").expect("bind the tool");
    tool.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    let to = tool.local_addr().expect("bound").to_string();
    let mut command = with_file_size_limit(LIMIT_BLOCKS);
    command
        .args(["run", "--listen", "127.0.0.1:0", "--to", &to])
        .args(["--stats-format", "json", "--record"])
        .arg(&file);
    let mut bin = Bin::spawn_command(command);
    let listen = bin.wait_until_running();
    let packets: Vec<Vec<u8>> = (0..N).map(|i| Spec::new(Format::Fh6, i).build()).collect();
    let receiver = thread::spawn(move || {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut got = Vec::new();
        while got.len() < N as usize {
            match recv_into(&tool, &mut buf) {
                Ok(n) => got.push(buf[..n].to_vec()),
                Err(_) => break,
            }
        }
        got
    });
    send_paced(listen, &packets, Duration::from_millis(1));
    let relayed = receiver.join().expect("the tool's thread");
    assert_eq!(relayed, packets, "every datagram is relayed");
    bin.wait_for_line("cannot write to");
    bin.signal("TERM");
    let done = bin.wait();
    let record_len = RECORD_OVERHEAD + packets[0].len() as u64;
    let fit = (LIMIT_BLOCKS * 512 - PCAP_HEADER) / record_len;
    let lost = u64::from(N) - fit;
    let last: serde_json::Value =
        serde_json::from_str(done.stdout.lines().last().expect("the final JSON line"))
            .expect("JSON");
    assert_eq!(last["event"], "final");
    assert_eq!(last["input"]["received"], N);
    assert_eq!(last["not_recorded"], lost, "{last}");
    assert_eq!(last["tap_dropped"], 0, "{last}");
    done.assert_stderr_has(&[&format!("{lost} not recorded (writing the capture failed)")]);
}

/// The files in `dir`, by name.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the folder")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn issue12_record_refuses_an_existing_file_unless_forced() {
    let dir = TempPath::dir("exists");
    let file = dir.path().join("drive.pcap");
    let shown = file.display().to_string();
    std::fs::write(&file, "last week's drive").expect("write");
    let done = Bin::run(
        &[
            "record",
            "--listen",
            "127.0.0.1:0",
            "-o",
            &shown,
            "--duration",
            "0.2",
        ],
        None,
    );
    assert_eq!(done.code(), 1, "{}", done.stderr);
    done.assert_stderr_has(&[&format!("{shown} already exists"), "--force"]);
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "last week's drive",
        "untouched"
    );
    assert_eq!(names_in(dir.path()), ["drive.pcap"], "nothing else made");

    let (bin, addr) = start_recording(&file, 1, &["--force"]);
    send_paced(addr, &datagrams(1), Duration::ZERO);
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let recorded: Vec<_> = Reader::open(&file)
        .expect("a capture now")
        .map(|d| d.expect("a whole record"))
        .collect();
    assert_eq!(recorded.len(), 1, "replaced with --force");
}

#[test]
fn issue12_time_in_a_record_name_is_expanded_and_never_collides() {
    let dir = TempPath::dir("time-name");
    let template = dir.path().join("drive-{time}.pcap");
    // Earlier drives hold the names of this second and the next 30.
    let now = SystemTime::now();
    let mut earlier = Vec::new();
    for s in 0..30 {
        let path = record::path_for(&template, now + Duration::from_secs(s));
        std::fs::write(&path, "an earlier drive").expect("write");
        earlier.push(path);
    }
    let template = template.display().to_string();
    for _ in 0..2 {
        let done = Bin::run(
            &[
                "record",
                "--listen",
                "127.0.0.1:0",
                "-o",
                &template,
                "--duration",
                "0.1",
            ],
            None,
        );
        assert_eq!(done.code(), 0, "{}", done.stderr);
    }
    for path in &earlier {
        assert_eq!(
            std::fs::read_to_string(path).expect("still there"),
            "an earlier drive",
            "{} untouched",
            path.display()
        );
    }
    let names = names_in(dir.path());
    let new: Vec<&String> = names
        .iter()
        .filter(|n| {
            !earlier
                .iter()
                .any(|p| p.file_name().is_some_and(|f| f == n.as_str()))
        })
        .collect();
    assert_eq!(new.len(), 2, "two new recordings: {names:?}");
    for name in new {
        assert!(
            name.starts_with("drive-20") && !name.contains("{time}"),
            "{name}"
        );
        let stem = name.trim_end_matches(".pcap");
        assert!(
            stem.ends_with("-1") || stem.ends_with("-2"),
            "{name}: numbered after the taken name"
        );
        let path = dir.path().join(name);
        assert_eq!(Reader::open(&path).expect("a capture").count(), 0);
    }
}

#[test]
fn issue12_a_record_path_without_time_does_not_replace_the_last_drive() {
    let dir = TempPath::dir("record-path");
    let toml = listen_toml("fh6")
        + "\n[record]\npath = \"laps/drive.pcap\"\n"
        + &destination_toml("tool", "127.0.0.1:9".parse().expect("addr"), "same", "");
    let config = dir.path().join("forza-relay.toml");
    std::fs::write(&config, toml).expect("write the config");
    let config = config.display().to_string();
    let laps = dir.path().join("laps");
    for run in 0..3 {
        let mut bin = Bin::spawn(&["--config", &config], None);
        bin.wait_until_running();
        bin.signal("INT");
        let done = bin.wait();
        assert_eq!(done.code(), 0, "{}", done.stderr);
        if run == 0 {
            std::fs::write(laps.join("drive.pcap"), "the first drive").expect("write");
        }
    }
    assert_eq!(
        names_in(&laps),
        ["drive-1.pcap", "drive-2.pcap", "drive.pcap"]
    );
    assert_eq!(
        std::fs::read_to_string(laps.join("drive.pcap")).expect("read"),
        "the first drive"
    );
}
