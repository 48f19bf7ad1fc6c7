//! Issue 23 item 6: the tools beside a running relay, through the real
//! binaries. `doctor`, `record`, `watch` and `setup` find the listen port held
//! and ask the relay holding it for its status (a query datagram on its
//! listening port, answered with the page off: every relay here runs
//! `--web off`), then report what it sees, or say how to do what they were
//! asked beside it.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::bin::Bin;
use common::{receiver, Spec, TempPath};
use forza_relay::wire::{Format, Puddle};

/// `run` on a fresh loopback port, forwarding to `to`, the page off: the
/// binary, and where it listens.
fn relay_to(to: SocketAddr) -> (Bin, SocketAddr) {
    relay_on("127.0.0.1:0", to)
}

/// `run` listening on `listen`, forwarding to `to`, the page off: the
/// binary, and where it listens.
fn relay_on(listen: &str, to: SocketAddr) -> (Bin, SocketAddr) {
    let to = to.to_string();
    let mut bin = Bin::spawn(
        &[
            "run",
            "--listen",
            listen,
            "--to",
            &to,
            "--web",
            "off",
            "--stats-interval",
            "0",
        ],
        None,
    );
    let listen = bin.wait_until_running();
    (bin, listen)
}

/// The finding of `check` in a doctor report.
#[track_caller]
fn finding<'a>(report: &'a serde_json::Value, check: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["check"] == check)
        .unwrap_or_else(|| panic!("no {check} in {report}"))
}

fn text(v: &serde_json::Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("{v} is not a string"))
}

#[test]
fn issue23_doctor_beside_a_running_relay_fed_nothing_exits_1_with_the_fixes() {
    let (_tool, to) = receiver();
    let (relay, listen) = relay_to(to);
    let (listen_text, to_text) = (listen.to_string(), to.to_string());
    let done = Bin::run(
        &[
            "doctor",
            "--listen",
            &listen_text,
            "--to",
            &to_text,
            "--wait",
            "3",
        ],
        None,
    );
    assert_eq!(done.code(), 1, "{done:?}");
    let out = &done.stdout;
    assert!(!out.contains("all is well"), "{out}");
    let pid = relay.id();
    assert!(
        out.contains(&format!("(pid {pid}) is running and listens on {listen}")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "PROBLEM  forza-relay (pid {pid}) received nothing on {listen} in "
        )),
        "{out}"
    );
    // The fixes doctor gives when it listens itself.
    for fix in [
        "turn Data Out on",
        &format!("Data Out IP Port to {}", listen.port()),
        "not in focus",
        "firewall",
    ] {
        assert!(out.contains(fix), "{fix:?} missing:\n{out}");
    }
    assert!(out.trim_end().ends_with("1 problem"), "{out}");
    done_with(relay);
}

#[test]
fn issue23_doctor_beside_a_running_relay_fed_60_frames_a_second_exits_0_saying_rate_sender_format()
{
    let (tool, to) = receiver();
    let (relay, listen) = relay_to(to);
    let (listen_text, to_text) = (listen.to_string(), to.to_string());
    let doctor = Bin::spawn(
        &[
            "doctor",
            "--listen",
            &listen_text,
            "--to",
            &to_text,
            "--wait",
            "3",
            "--json",
        ],
        None,
    );
    let (done, sender) = fed_by_the_game(doctor, &relay, listen, listen);
    let report: serde_json::Value = serde_json::from_str(&done.stdout).expect("one JSON object");
    let arrivals = finding(&report, "arrivals");
    assert_eq!(arrivals["status"], "ok", "{report}");
    let message = text(&arrivals["message"]);
    let prefix = format!("forza-relay (pid {}) receives ", relay.id());
    let rest = message
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{message}"));
    let (rate, rest) = rest.split_once(" datagrams/s").expect("a rate");
    assert_eq!(
        rest,
        format!(" on {listen} from {sender}, format fh6"),
        "{message}"
    );
    // Sent at 60 a second: how many the relay saw in its own seconds is the
    // OS's to decide, within reason.
    let rate: f64 = rate.parse().expect("a number");
    assert!((20.0..=200.0).contains(&rate), "{message}");
    let destination = finding(&report, "destination");
    assert_eq!(destination["status"], "ok", "{report}");
    assert!(
        text(&destination["message"]).contains("the running relay sends to it"),
        "{destination}"
    );
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(done.code(), 0, "{done:?}");
    drop(tool);
    done_with(relay);
}

/// The game: wet FH6 frames at 60 a second to `listen`, from a socket of its
/// own, until stopped (at most 300 of them).
struct Game {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u32>,
}

impl Game {
    fn start(listen: SocketAddr) -> Game {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind the game's socket");
        let addr = socket.local_addr().expect("bound");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut sent = 0u32;
            while !stopped.load(Ordering::SeqCst) && sent < 300 {
                let frame = Spec::new(Format::Fh6, sent)
                    .puddle([
                        Puddle::Flag(1),
                        Puddle::Flag(0),
                        Puddle::Flag(0),
                        Puddle::Flag(0),
                    ])
                    .build();
                socket.send_to(&frame, listen).expect("send");
                sent += 1;
                std::thread::sleep(Duration::from_micros(16_667));
            }
            sent
        });
        Game { addr, stop, thread }
    }

    /// Stops sending; how many frames were sent.
    fn stop(self) -> u32 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the game's thread")
    }
}

/// Once `doctor` says it watches `relay` on `checked`, the game sends to
/// `listen` until doctor has answered: its end, and the game's address.
#[track_caller]
fn fed_by_the_game(
    mut doctor: Bin,
    relay: &Bin,
    checked: SocketAddr,
    listen: SocketAddr,
) -> (common::bin::Finished, SocketAddr) {
    doctor.wait_for_line(&format!(
        "forza-relay (pid {}) listens on {checked}: watching what it receives",
        relay.id()
    ));
    let game = Game::start(listen);
    let sender = game.addr;
    let done = doctor.wait();
    assert!(game.stop() > 0);
    (done, sender)
}

/// Issue 23: `doctor` with no configuration (no --config, no --to, no file)
/// checks the forza-relay running on this computer and says which: the
/// missing file is no problem while it runs, and the game's 60 frames a
/// second make it answer "all is well", exit 0. First beside a relay on the
/// default port, then beside one on another port (stop 30: doctor checked
/// only 5400 and told the user to point the game there). Only when ports
/// 5400 and 4399 are free on loopback here (4399: below every port the other
/// tests' relays listen on, so that it is the first relay doctor finds).
#[test]
fn issue23_doctor_without_a_configuration_checks_the_relay_running_on_the_default_port_or_another()
{
    for listen in [
        SocketAddr::from(([127, 0, 0, 1], 5_400)),
        SocketAddr::from(([127, 0, 0, 1], 4_399)),
    ] {
        if UdpSocket::bind(listen).is_err() {
            eprintln!("note: {listen} is taken here: not run");
            continue;
        }
        // Found by its process's name on another port: under an emulator
        // (qemu-user) the process is named after the emulator.
        if listen.port() != 5_400 && std::env::var_os("FORZA_RELAY_TEST_RUNNER").is_some() {
            eprintln!("note: under an emulator the relay's process is not named forza-relay: {listen} not run");
            continue;
        }
        let (tool, to) = receiver();
        let (relay, _) = relay_on(&listen.to_string(), to);
        let dir = TempPath::dir("doctor-no-config");
        let doctor = Bin::spawn(&["doctor", "--wait", "3"], Some(dir.path()));
        let (done, sender) = fed_by_the_game(doctor, &relay, listen, listen);
        let out = &done.stdout;
        assert!(
            out.contains(&format!(
                "ok       no configuration here (no --config, no --to, no forza-relay.toml): \
                 doctor checks the forza-relay running on this computer (pid {}, listening on \
                 {listen}), which runs without a configuration file",
                relay.id()
            )),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                " datagrams/s on {listen} from {sender}, format fh6"
            )),
            "{out}"
        );
        assert!(!out.contains("PROBLEM"), "{out}");
        assert!(out.trim_end().ends_with("all is well"), "{out}");
        assert_eq!(done.code(), 0, "{done:?}");
        drop(tool);
        done_with(relay);
    }
}

#[test]
fn issue23_record_watch_and_export_beside_a_running_relay_say_how_to_do_it_beside_it() {
    let (_tool, to) = receiver();
    // This relay serves its page, on a port of its own.
    let to_text = to.to_string();
    let mut relay = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--to",
            &to_text,
            "--web",
            "127.0.0.1:0",
            "--stats-interval",
            "0",
        ],
        None,
    );
    let listen = relay.wait_for_address("listen on ");
    let line = relay.wait_for_line("web page on http://");
    let page = line[line.find("http://").expect("found above")..]
        .trim()
        .to_owned();
    relay.wait_for_line("running; press Ctrl-C to stop");
    let listen_text = listen.to_string();
    let capture = TempPath::dir("beside");
    let output = capture.path().join("drive.pcap");
    let output = output.to_str().expect("UTF-8");
    let relay_named = format!(
        "forza-relay (pid {}) already listens on {listen}, relaying to 1 destination",
        relay.id()
    );
    let start_recording = format!("Press Start recording on its page, {page}, or start it");
    let open_page = format!("Open its page, {page}, or start it");
    for (args, how) in [
        (
            vec!["record", "--listen", &listen_text, "--output", output],
            [start_recording.as_str(), "`forza-relay run --record FILE`"],
        ),
        (
            vec!["watch", "--listen", &listen_text],
            [open_page.as_str(), "`forza-relay run --watch`"],
        ),
        (
            vec!["export", "--listen", &listen_text, "--output", "-"],
            [
                "`forza-relay run --record FILE`",
                "then `forza-relay export --file FILE`",
            ],
        ),
    ] {
        let done = Bin::run(&args, None);
        assert_eq!(done.code(), 1, "{args:?}: {done:?}");
        done.assert_stderr_has(&[&relay_named, how[0], how[1], "instead of stopping it"]);
        assert!(!done.stderr.contains("stop it,"), "{}", done.stderr);
    }
    assert!(!std::path::Path::new(output).exists(), "nothing recorded");
    done_with(relay);
}

#[test]
fn issue23_setup_write_onto_a_folder_says_it_is_a_folder() {
    let dir = TempPath::dir("setup-folder");
    let done = Bin::run(&["setup", "--write", &dir.display()], Some(dir.path()));
    assert_eq!(done.code(), 1, "{done:?}");
    done.assert_stderr_has(&[&format!(
        "{} is a folder: name the file to write, e.g. --write ",
        dir.display()
    )]);
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("the folder").count(),
        0,
        "nothing written in it"
    );
}

/// Issue 23: `setup` where the relay runs, its configuration in the folder:
/// it names the relay and what it forwards to, keeps its listen address
/// (not another port), and proposes a destination for a socket on a known
/// tool's default port, saying the process holding it does not confirm the
/// tool. The tool's socket is this test's own, on SimHub's port (8000) when
/// it is free, else on another tool's. Linux only, as the other `setup` tests
/// (the socket table under Wine).
#[cfg(target_os = "linux")]
#[test]
fn issue23_setup_beside_a_running_relay_names_it_and_proposes_from_there() {
    let Some(socket) = [8_000u16, 32_000, 1_234, 5_301]
        .iter()
        .find_map(|&port| UdpSocket::bind(("127.0.0.1", port)).ok())
    else {
        eprintln!("note: the tools' ports 8000, 32000, 1234 and 5301 are all taken here: not run");
        return;
    };
    let tool_port = socket.local_addr().expect("bound").port();
    let (_hub, hub) = receiver();
    let dir = TempPath::dir("setup-beside");
    let listen = SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    std::fs::write(
        dir.path().join("forza-relay.toml"),
        format!(
            "[listen]\naddr = \"{listen}\"\n[web]\naddr = \"off\"\n[stats]\ninterval = 0\n\n\
             [[destination]]\nname = \"hub\"\naddr = \"{hub}\"\n"
        ),
    )
    .expect("write the configuration");
    let mut relay = Bin::spawn(&["run"], Some(dir.path()));
    relay.wait_until_running();

    let done = Bin::run(&["setup"], Some(dir.path()));
    assert_eq!(done.code(), 0, "{done:?}");
    let out = &done.stdout;
    assert!(
        out.contains(&format!(
            "is running on this computer (pid {}): it listens on {listen}",
            relay.id()
        )),
        "{out}"
    );
    assert!(out.contains("  hub "), "{out}");
    assert!(out.contains(&hub.to_string()), "{out}");
    assert!(
        out.contains("Tools found that it does not forward to yet."),
        "{out}"
    );
    assert!(
        out.contains(&format!("# Port {tool_port} is the default port of "))
            && out.contains("is not one forza-relay knows as that tool: check it is.")
            && out.contains(&format!("addr = \"127.0.0.1:{tool_port}\"")),
        "{out}"
    );
    if tool_port == 8_000 {
        assert!(
            out.contains("# Port 8000 is the default port of SimHub, but the program"),
            "{out}"
        );
    } else {
        eprintln!("note: port 8000 is taken here: checked on port {tool_port} instead");
    }
    assert!(!out.contains("5401"), "no other listen port: {out}");

    // Written, it is what the relay runs plus the tool, and valid.
    let written = dir.path().join("proposed.toml");
    let written_text = written.to_str().expect("UTF-8");
    let done = Bin::run(&["setup", "--write", written_text], Some(dir.path()));
    assert_eq!(done.code(), 0, "{done:?}");
    let toml = std::fs::read_to_string(&written).expect("written");
    assert!(
        toml.contains(&format!(
            "[listen]\n# Where the forza-relay running now listens.\naddr = \"{listen}\""
        )),
        "{toml}"
    );
    assert!(
        toml.contains(&format!("name = \"hub\"\naddr = \"{hub}\"")),
        "{toml}"
    );
    assert!(
        toml.contains(&format!("addr = \"127.0.0.1:{tool_port}\"")),
        "{toml}"
    );
    let checked = Bin::run(&["check", "--config", written_text], None);
    assert_eq!(checked.code(), 0, "{checked:?}");
    drop(socket);
    done_with(relay);
}

/// The status query through a relay on its own thread: answered with what
/// it runs and has received, never forwarded (a `same` destination would get
/// any datagram that is no packet), never counted; then, packets from two
/// senders show in `input.senders`, the first one followed, and a sender
/// beyond this computer asking gets nothing (it is a malformed datagram
/// like any other).
#[test]
fn issue23_the_status_query_is_answered_and_never_forwarded_or_counted() {
    use forza_relay::report::query::{self, QUERY};
    let (raw, raw_addr) = receiver();
    let relay = common::Running::start(common::config(
        &(common::listen_toml("fh6") + &common::destination_toml("raw", raw_addr, "same", "")),
    ));
    let answer = query::ask(relay.addr, Duration::from_secs(5)).expect("the relay answers");
    assert_eq!(answer.program, "forza-relay");
    assert_eq!(answer.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(answer.pid, std::process::id());
    assert_eq!(answer.listen, relay.addr);
    assert_eq!(answer.input.expects, "fh6");
    assert_eq!(answer.input.received, 0, "the query is not counted");
    assert!(answer.input.senders.is_empty());
    let names: Vec<(&str, &str, &str)> = answer
        .destinations
        .iter()
        .map(|d| (d.name.as_str(), d.addr.as_str(), d.output.as_str()))
        .collect();
    assert_eq!(names, [("raw", raw_addr.to_string().as_str(), "same")]);
    assert_eq!(answer.page, None, "a relay without its page");

    let (game, other) = (relay.sender(), relay.sender());
    for ts in 0..3 {
        let p = Spec::new(Format::Fh6, ts).build();
        game.send(&p);
        assert_eq!(common::recv(&raw), p);
    }
    let p = Spec::new(Format::Fh6, 9).build();
    other.send(&p);
    assert_eq!(common::recv(&raw), p);
    let answer = query::ask(relay.addr, Duration::from_secs(5)).expect("the relay answers");
    assert_eq!(answer.input.received, 4);
    let senders: Vec<(SocketAddr, u64, bool)> = answer
        .input
        .senders
        .iter()
        .map(|s| (s.addr, s.datagrams, s.following))
        .collect();
    assert_eq!(
        senders,
        [(game.local_addr(), 3, true), (other.local_addr(), 1, false)]
    );
    assert_eq!(answer.destinations[0].sent, 4);
    common::assert_nothing_waiting(&raw);

    // The query's bytes from a socket that is not loopback's (this
    // computer's LAN address, where Linux has one): no answer, forwarded to
    // `same` as any datagram that is no packet.
    if let Some(lan) = common::lan_address().filter(|_| cfg!(target_os = "linux")) {
        let socket = UdpSocket::bind((lan, 0)).expect("bind on the LAN address");
        socket.connect(relay.addr).expect("connect");
        socket.send(QUERY).expect("send");
        assert_eq!(common::recv(&raw), QUERY, "a malformed datagram, relayed");
        socket
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let mut buf = [0u8; 64];
        assert!(socket.recv(&mut buf).is_err(), "no answer beyond loopback");
    }
    let report = relay.stop();
    assert_eq!(report.input.malformed, report.input.received - 4);
}

/// Stops the relay and checks it ended well.
#[track_caller]
fn done_with(relay: Bin) {
    relay.stop();
}

/// Issue 30: beside a relay whose MQTT broker can't be reached, `doctor` said
/// the destination "fails — the log says the error". It names the broker and
/// the error, as the relay's log said it.
#[test]
fn issue30_doctor_names_a_broker_that_cannot_be_reached_and_why() {
    let (_held, closed) = common::refusing_tcp_port();
    let to = format!("mqtt://{closed},name=league");
    let mut relay = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--to",
            &to,
            "--web",
            "off",
            "--stats-interval",
            "0",
        ],
        None,
    );
    let listen = relay.wait_for_address("listen on ");
    // The publisher may say it before or after the loop says it runs.
    let refused = format!("MQTT mqtt://{closed}: cannot connect (");
    // Under load it may even come before the line that names the address.
    if !relay.has_said(&refused) {
        relay.wait_for_line(&refused);
    }
    if !relay.has_said("running; press Ctrl-C to stop") {
        relay.wait_for_line("running; press Ctrl-C to stop");
    }
    let listen_text = listen.to_string();
    let done = Bin::run(
        &[
            "doctor",
            "--listen",
            &listen_text,
            "--to",
            &to,
            "--wait",
            "1",
        ],
        None,
    );
    let out = &done.stdout;
    let line = out
        .lines()
        .find(|l| l.contains("destination \"league\""))
        .unwrap_or_else(|| panic!("no line about league:\n{out}"));
    assert!(
        line.contains(&format!(
            "destination \"league\" (mqtt://{closed}): the running relay can't publish to this \
             broker: cannot connect ("
        )),
        "{line}"
    );
    assert!(out.contains("start the broker"), "{out}");
    done_with(relay);
}
