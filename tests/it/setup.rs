//! Issue 18: the known-tools table, `setup`, who holds a port, `doctor` and
//! `autostart`, through the library and the real binary.
//!
//! The sockets a tool would hold are held by a helper process: `python3`, or
//! `python3` started through a symlink named after a tool, which Linux reports
//! as the process name (/proc/PID/comm comes from the name executed). Those
//! tests run on Linux only: the Windows build of this file (under Wine) keeps
//! the table test and the doctor tests that need no helper.

use crate::common;

use std::collections::BTreeSet;
use std::net::UdpSocket;

use common::bin::Bin;
use forza_relay::setup::tools::{self, collisions, TOOLS_TOML};

/// A free loopback UDP port (bound, then released).
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

#[test]
fn the_tools_table_parses_and_flags_every_shared_port() {
    let table = tools::parse(TOOLS_TOML).expect("src/tools.toml parses");
    assert!(table.len() >= 13, "{} rows", table.len());
    let mut ids = BTreeSet::new();
    for tool in &table {
        assert!(ids.insert(tool.id.as_str()), "id {:?} twice", tool.id);
        assert_ne!(tool.port, 0, "{}", tool.id);
        assert!(!tool.sources.is_empty(), "{} names no source", tool.id);
        assert!(
            !tool.name.is_empty() && !tool.note.is_empty(),
            "{}",
            tool.id
        );
    }
    // The ports the issue lists as shared, and exactly those rows say so.
    let shared = collisions(&table);
    let expected: Vec<(u16, Vec<&str>)> = vec![
        (
            5300,
            vec!["co-driver", "pacefinder", "fh5-telemetry", "racingdsx"],
        ),
        (5555, vec!["virtualtcu", "dr-sim-manager"]),
        (9999, vec!["lapscope", "forza-data-tools"]),
    ];
    assert_eq!(shared.into_iter().collect::<Vec<_>>(), expected);
    for tool in &table {
        let in_group = expected
            .iter()
            .any(|(_, ids)| ids.contains(&tool.id.as_str()));
        assert_eq!(tool.shared_port, in_group, "{}: shared_port", tool.id);
    }
    // Tools on one port are told apart by process: no name twice in a group.
    for (port, ids) in &expected {
        let mut names = BTreeSet::new();
        for tool in table.iter().filter(|t| ids.contains(&t.id.as_str())) {
            let own = tool.processes.iter().chain(tool.runtime.as_ref());
            assert!(
                own.clone().count() > 0,
                "{} on {port} names no process",
                tool.id
            );
            for name in own {
                assert!(
                    names.insert(name.to_ascii_lowercase()),
                    "{name} twice on {port}"
                );
            }
        }
    }
    // The table the program uses is this one.
    assert_eq!(tools::tools(), table.as_slice());
}

#[test]
fn doctor_says_a_port_in_the_games_range_is_a_problem() {
    let to = format!("127.0.0.1:{}", free_port());
    let done = Bin::run(
        &[
            "doctor",
            "--listen",
            "127.0.0.1:5250",
            "--to",
            &to,
            "--wait",
            "0",
            "--json",
        ],
        None,
    );
    assert_eq!(done.code(), 1, "{done:?}");
    let report: serde_json::Value = serde_json::from_str(&done.stdout).expect("one JSON object");
    let range = finding(&report, "listen_range");
    assert_eq!(range["status"], "problem");
    assert!(
        text(&range["message"]).contains("port 5250 is in 5200-5300"),
        "{range}"
    );
    assert!(text(&range["fix"]).contains("5400"), "{range}");
}

#[test]
fn doctor_says_when_nothing_arrives() {
    let listen = format!("127.0.0.1:{}", free_port());
    let to = format!("127.0.0.1:{}", free_port());
    let done = Bin::run(
        &[
            "doctor", "--listen", &listen, "--to", &to, "--wait", "0.3", "--json",
        ],
        None,
    );
    assert_eq!(done.code(), 1, "{done:?}");
    let report: serde_json::Value = serde_json::from_str(&done.stdout).expect("one JSON object");
    assert_eq!(report["ok"], false);
    let arrivals = finding(&report, "arrivals");
    assert_eq!(arrivals["status"], "problem");
    assert!(
        text(&arrivals["message"]).starts_with(&format!("nothing arrived on {listen}")),
        "{arrivals}"
    );
    assert!(text(&arrivals["fix"]).contains("Data Out"), "{arrivals}");
    let port = finding(&report, "listen_port");
    assert_eq!(port["status"], "ok", "{port}");
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

/// All the findings of `check`.
#[cfg(target_os = "linux")]
fn findings<'a>(report: &'a serde_json::Value, check: &str) -> Vec<&'a serde_json::Value> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == check)
        .collect()
}

fn text(v: &serde_json::Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("{v} is not a string"))
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Stdio};

    use std::net::SocketAddr;
    use std::path::Path;
    use std::process::Command;

    use super::*;
    use common::Spec;
    use forza_relay::setup::{blocker, holder};
    use forza_relay::wire::{Format, Puddle};

    /// A helper process holding UDP sockets until dropped.
    struct Holding {
        child: Child,
        ports: Vec<u16>,
    }

    impl Holding {
        fn pid(&self) -> u32 {
            self.child.id()
        }

        fn addr(&self, i: usize) -> SocketAddr {
            SocketAddr::from(([127, 0, 0, 1], self.ports[i]))
        }
    }

    impl Drop for Holding {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    const HOLD: &str = "import socket, sys\n\
        ss = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for p in sys.argv[1:]]\n\
        for s, p in zip(ss, sys.argv[1:]): s.bind(('127.0.0.1', int(p)))\n\
        print(','.join(str(s.getsockname()[1]) for s in ss), flush=True)\n\
        sys.stdin.read()\n";

    /// Runs `program` (python3, or a link to it) holding 127.0.0.1:PORT for each
    /// of `ports` (0 = any free port); returns once they are bound.
    #[track_caller]
    fn hold(program: &Path, ports: &[u16]) -> Option<Holding> {
        if !common::require_tool(
            "python3",
            common::runs("python3"),
            "the helper holding UDP ports",
        ) {
            return None;
        }
        let mut child = Command::new(program)
            .arg("-c")
            .arg(HOLD)
            .args(ports.iter().map(u16::to_string))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the helper");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read the helper's ports");
        let ports: Vec<u16> = line
            .trim()
            .split(',')
            .map(|p| p.parse().unwrap_or_else(|_| panic!("helper said {line:?}")))
            .collect();
        Some(Holding { child, ports })
    }

    fn python() -> &'static Path {
        Path::new("python3")
    }

    /// A folder holding `name`, a symlink to the python3 interpreter itself
    /// (`python3` on PATH may be a launcher script, such as pyenv's shim).
    fn renamed_python(name: &str) -> tempdir::Dir {
        let dir = tempdir::Dir::new();
        if common::runs("python3") {
            let out = Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("run python3");
            let python = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            std::os::unix::fs::symlink(python, dir.path().join(name)).expect("symlink python3");
        }
        dir
    }

    /// A temporary folder removed on drop (no crate for it in this project).
    mod tempdir {
        use std::path::{Path, PathBuf};

        pub struct Dir(PathBuf);

        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!(
                    "forza-relay-setup-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                let _ = std::fs::remove_dir_all(&path);
                std::fs::create_dir_all(&path).expect("make a temp folder");
                Dir(path)
            }

            pub fn path(&self) -> &Path {
                &self.0
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn setup_json_lists_each_socket_of_a_helper_with_its_pid_and_name() {
        let Some(held) = hold(python(), &[0, 0, 0]) else {
            return;
        };
        let done = Bin::run(&["setup", "--json"], None);
        assert_eq!(done.code(), 0, "{done:?}");
        let rows: Vec<serde_json::Value> = done
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect();
        for &port in &held.ports {
            let row = rows
                .iter()
                .find(|r| r["port"] == port)
                .unwrap_or_else(|| panic!("port {port} not listed:\n{}", done.stdout));
            assert_eq!(row["addr"], "127.0.0.1", "{row}");
            assert_eq!(row["pid"], held.pid(), "{row}");
            assert_eq!(row["process"], "python3", "{row}");
            assert_eq!(row["tool"], serde_json::Value::Null, "{row}");
            let keys: Vec<&str> = row
                .as_object()
                .expect("an object")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, ["addr", "pid", "port", "process", "tool"]);
        }
    }

    #[test]
    fn a_tools_process_on_its_port_is_recognised_and_proposed() {
        // fh6-tel listens on 20440 (src/tools.toml); a python3 named fh6-tel
        // holds it here.
        let dir = renamed_python("fh6-tel");
        let Some(held) = hold(&dir.path().join("fh6-tel"), &[20440]) else {
            return;
        };
        let done = Bin::run(&["setup", "--json"], None);
        let row = done
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
            .find(|r| r["port"] == 20440)
            .unwrap_or_else(|| panic!("20440 not listed:\n{}", done.stdout));
        assert_eq!(row["process"], "fh6-tel");
        assert_eq!(row["pid"], held.pid());
        assert_eq!(row["tool"], "fh6-tel");

        let config = dir.path().join("proposed.toml");
        let config_text = config.to_str().expect("a UTF-8 path");
        let done = Bin::run(&["setup", "--write", config_text], None);
        assert_eq!(done.code(), 0, "{done:?}");
        let text = std::fs::read_to_string(&config).expect("written");
        assert!(
            text.contains("name = \"fh6-tel\"\naddr = \"127.0.0.1:20440\"\nformat = \"fh6\"\n"),
            "{text}"
        );
        let checked = Bin::run(&["check", "--config", config_text], None);
        assert_eq!(checked.code(), 0, "{checked:?}");
        // Written once; a second time needs --force.
        let again = Bin::run(&["setup", "--write", config_text], None);
        assert_eq!(again.code(), 1);
        again.assert_stderr_has(&["exists: add --force to replace it"]);
        assert_eq!(std::fs::read_to_string(&config).expect("kept"), text);
        let forced = Bin::run(&["setup", "--write", config_text, "--force"], None);
        assert_eq!(forced.code(), 0, "{forced:?}");
    }

    #[test]
    fn setup_without_a_terminal_asks_nothing_and_writes_nothing() {
        let dir = tempdir::Dir::new();
        // Bin::run gives it no standard input, as CI and scripts do.
        let done = Bin::run(&["setup"], Some(dir.path()));
        assert_eq!(done.code(), 0, "{done:?}");
        assert!(!done.stderr.contains("[y/N]"), "{}", done.stderr);
        assert!(!dir.path().join("forza-relay.toml").exists());
        // What it proposes depends on what else runs here: the other tests'
        // relays, started beside this one, are told instead of a proposal.
        assert!(
            done.stdout.contains("Proposed configuration")
                || done.stdout.contains("is running on this computer (pid "),
            "{}",
            done.stdout
        );
    }

    #[test]
    fn holder_names_the_process_and_pid_and_blocker_the_bind_it_stopped() {
        let Some(held) = hold(python(), &[0]) else {
            return;
        };
        let addr = held.addr(0);
        let h = holder(addr).expect("the helper holds it");
        assert_eq!(
            (h.pid, h.process.as_str(), h.addr),
            (held.pid(), "python3", addr)
        );
        assert_eq!(h.tool, None);
        assert_eq!(h.to_string(), format!("python3 (pid {})", held.pid()));
        // A wildcard bind on the port is refused because of it.
        let wild = SocketAddr::from(([0, 0, 0, 0], addr.port()));
        let e = UdpSocket::bind(wild).expect_err("the port is taken");
        let b = blocker(wild, &e).expect("the helper blocks it");
        assert_eq!(b.pid, held.pid());
        // Other errors name nobody.
        let other = std::io::Error::from(std::io::ErrorKind::AddrNotAvailable);
        assert_eq!(blocker(wild, &other), None);
        drop(held);
        assert_eq!(holder(addr), None, "released with the helper");
    }

    #[test]
    fn holder_says_which_tool_holds_the_port() {
        let dir = renamed_python("RacingDSX");
        let Some(held) = hold(&dir.path().join("RacingDSX"), &[0]) else {
            return;
        };
        let h = holder(held.addr(0)).expect("held");
        assert_eq!(h.tool.map(|t| t.id.as_str()), Some("racingdsx"));
        assert_eq!(
            h.to_string(),
            format!("RacingDSX (RacingDSX (ForzaDSX), pid {})", held.pid())
        );
    }

    #[test]
    fn doctor_names_who_holds_the_listen_port_and_who_listens_at_each_destination() {
        let Some(held) = hold(python(), &[0, 0]) else {
            return;
        };
        let listen = held.addr(0).to_string();
        let live = held.addr(1).to_string();
        let dead = format!("127.0.0.1:{}", free_port());
        let done = Bin::run(
            &[
                "doctor", "--listen", &listen, "--to", &live, "--to", &dead, "--wait", "0",
                "--json",
            ],
            None,
        );
        assert_eq!(done.code(), 1, "{done:?}");
        let report: serde_json::Value = serde_json::from_str(&done.stdout).expect("JSON");
        let port = finding(&report, "listen_port");
        assert_eq!(port["status"], "problem");
        assert_eq!(
            text(&port["message"]),
            format!(
                "port {} is in use by python3 (pid {})",
                held.ports[0],
                held.pid()
            )
        );
        assert!(text(&port["fix"]).starts_with("close python3"), "{port}");
        let dests = findings(&report, "destination");
        assert_eq!(dests.len(), 2, "{report}");
        assert_eq!(dests[0]["status"], "ok");
        assert_eq!(
            text(&dests[0]["message"]),
            format!(
                "destination \"{live}\" ({live}): python3 (pid {}) listens there",
                held.pid()
            )
        );
        assert_eq!(dests[1]["status"], "problem");
        assert_eq!(
            text(&dests[1]["message"]),
            format!("destination \"{dead}\" ({dead}): nothing listens there")
        );
        assert_eq!(finding(&report, "arrivals")["status"], "unknown");
    }

    #[test]
    fn doctor_reports_datagrams_arriving_their_sender_and_format() {
        let Some(tool) = hold(python(), &[0]) else {
            return;
        };
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let to = tool.addr(0).to_string();
        let mut doctor = Bin::spawn(
            &[
                "doctor", "--listen", &listen, "--to", &to, "--wait", "10", "--json",
            ],
            None,
        );
        doctor.wait_for_line("waiting up to 10 s for datagrams on");
        let game = UdpSocket::bind("127.0.0.1:0").expect("bind the game's socket");
        // FH6 types WheelInPuddle as S32 flags: a 1 says fh6, and
        // AGREEING_PACKETS packets that say so make the format certain.
        let flags = [
            Puddle::Flag(1),
            Puddle::Flag(0),
            Puddle::Flag(0),
            Puddle::Flag(0),
        ];
        let sent = forza_relay::wire::AGREEING_PACKETS;
        for t in 0..sent {
            let packet = Spec::new(Format::Fh6, 1000 + t).puddle(flags).build();
            game.send_to(&packet, ("127.0.0.1", port)).expect("send");
        }
        let done = doctor.wait();
        let report: serde_json::Value = serde_json::from_str(&done.stdout).expect("JSON");
        let arrivals = finding(&report, "arrivals");
        assert_eq!(arrivals["status"], "ok", "{report}");
        let sender = game.local_addr().expect("bound");
        assert_eq!(
            text(&arrivals["message"]),
            format!("{sent} datagrams arrived from {sender}, format fh6")
        );
        assert_eq!(report["ok"], true, "{report}");
        assert_eq!(done.code(), 0);
    }

    /// Issue 18 item 3 through the binary: every command that listens names
    /// the process holding its port.
    #[test]
    fn port_in_use_names_the_holder_for_run_record_watch_and_export() {
        let Some(held) = hold(python(), &[0]) else {
            return;
        };
        let listen = held.addr(0).to_string();
        let to = format!("127.0.0.1:{}", free_port());
        let dir = tempdir::Dir::new();
        let capture = dir.path().join("x.pcap");
        let capture = capture.to_str().expect("UTF-8");
        let named = format!("python3 (pid {})", held.pid());
        for args in [
            vec!["run", "--listen", &listen, "--to", &to],
            vec!["record", "--listen", &listen, "--output", capture],
            vec!["watch", "--listen", &listen],
            vec!["export", "--listen", &listen, "--output", "-"],
        ] {
            let done = Bin::run(&args, None);
            assert_eq!(done.code(), 1, "{args:?}: {done:?}");
            done.assert_stderr_has(&[&format!("port {} is in use by {named}", held.ports[0])]);
        }
    }

    /// `autostart` with its files in `home` and no systemctl calls.
    fn autostart(home: &Path, runtime: &Path, args: &[&str]) -> common::bin::Finished {
        let mut command = common::bin::command();
        command
            .arg("autostart")
            .args(args)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_RUNTIME_DIR", runtime)
            .env("FORZA_RELAY_NO_SYSTEMCTL", "1");
        Bin::spawn_command(command).wait()
    }

    #[test]
    fn autostart_writes_a_systemd_unit_naming_the_binary_and_config_and_removes_it() {
        let dir = tempdir::Dir::new();
        let (home, runtime) = (dir.path().join("home"), dir.path().join("run"));
        std::fs::create_dir_all(runtime.join("systemd")).expect("a systemd user session");
        let config = dir.path().join("my relay.toml");
        std::fs::write(&config, "[[destination]]\naddr = \"127.0.0.1:8000\"\n").expect("config");
        let config_text = config.to_str().expect("UTF-8");

        let on = autostart(&home, &runtime, &["on", "--config", config_text]);
        assert_eq!(on.code(), 0, "{on:?}");
        let unit = home.join(".config/systemd/user/forza-relay.service");
        let text = std::fs::read_to_string(&unit).expect("the unit is written");
        let exe = env!("CARGO_BIN_EXE_forza-relay");
        let canonical = std::fs::canonicalize(&config).expect("exists");
        assert!(
            text.contains(&format!(
                "ExecStart=\"{exe}\" \"run\" \"--config\" \"{}\"\n",
                canonical.display()
            )),
            "{text}"
        );
        // It prints exactly what it wrote, and that it skipped systemctl.
        assert!(
            on.stdout
                .contains(&format!("wrote {}:\n{}", unit.display(), text.trim_end())),
            "{}",
            on.stdout
        );
        assert!(
            on.stdout
                .contains("skipped `systemctl --user enable --now forza-relay.service`"),
            "{}",
            on.stdout
        );

        let status = autostart(&home, &runtime, &["status"]);
        assert!(
            status
                .stdout
                .starts_with(&format!("on: {}", unit.display())),
            "{}",
            status.stdout
        );

        let off = autostart(&home, &runtime, &["off"]);
        assert_eq!(off.code(), 0, "{off:?}");
        assert!(
            off.stdout.contains(&format!("removed {}", unit.display())),
            "{}",
            off.stdout
        );
        assert!(!unit.exists());
        let status = autostart(&home, &runtime, &["status"]);
        assert!(status.stdout.starts_with("off:"), "{}", status.stdout);
    }

    #[test]
    fn autostart_without_a_systemd_session_writes_an_xdg_autostart_entry() {
        let dir = tempdir::Dir::new();
        let (home, runtime) = (dir.path().join("home"), dir.path().join("run"));
        std::fs::create_dir_all(&runtime).expect("a runtime folder without systemd");
        let config = dir.path().join("relay.toml");
        std::fs::write(&config, "").expect("config");
        let on = autostart(
            &home,
            &runtime,
            &["on", "--config", config.to_str().expect("UTF-8")],
        );
        assert_eq!(on.code(), 0, "{on:?}");
        let entry = home.join(".config/autostart/forza-relay.desktop");
        let text = std::fs::read_to_string(&entry).expect("the entry is written");
        let canonical = std::fs::canonicalize(&config).expect("exists");
        assert!(
            text.contains(&format!(
                "Exec=\"{}\" \"run\" \"--config\" \"{}\"\n",
                env!("CARGO_BIN_EXE_forza-relay"),
                canonical.display()
            )),
            "{text}"
        );
        // A file the user wrote is never replaced or removed.
        std::fs::write(&entry, "[Desktop Entry]\nExec=mine\n").expect("the user's own");
        let refused = autostart(
            &home,
            &runtime,
            &["on", "--config", config.to_str().expect("UTF-8")],
        );
        assert_eq!(refused.code(), 1);
        let off = autostart(&home, &runtime, &["off"]);
        assert!(
            off.stdout.contains("forza-relay did not write it"),
            "{}",
            off.stdout
        );
        assert_eq!(
            std::fs::read_to_string(&entry).expect("kept"),
            "[Desktop Entry]\nExec=mine\n"
        );
    }

    /// `autostart` run by the program at `exe` (a link to the binary).
    fn autostart_by(
        exe: &Path,
        home: &Path,
        runtime: &Path,
        args: &[&str],
    ) -> common::bin::Finished {
        // Through the test runner where there is one (qemu-user), as
        // common::bin::command starts the binary.
        let mut command = match std::env::var_os("FORZA_RELAY_TEST_RUNNER") {
            Some(runner) => {
                let mut c = Command::new(runner);
                c.arg(exe);
                c
            }
            None => Command::new(exe),
        };
        command
            .arg("autostart")
            .args(args)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_RUNTIME_DIR", runtime)
            .env("FORZA_RELAY_NO_SYSTEMCTL", "1");
        Bin::spawn_command(command).wait()
    }

    /// The binary, linked (or copied) into `folder`.
    fn program_in(folder: &Path) -> std::path::PathBuf {
        std::fs::create_dir_all(folder).expect("the folder");
        let exe = folder.join("forza-relay");
        let binary = env!("CARGO_BIN_EXE_forza-relay");
        if std::fs::hard_link(binary, &exe).is_err() {
            std::fs::copy(binary, &exe).expect("copy the binary");
        }
        exe
    }

    /// GLib's reading of a desktop entry (python3's `gi`): the Exec key's
    /// arguments as GDesktopAppInfo makes them (shell-style unquoting, then
    /// `%%` as `%`), and the Path key.
    fn glib_reads(entry: &Path) -> serde_json::Value {
        let script = "import json, sys, gi\n\
                      gi.require_version('GLib', '2.0')\n\
                      from gi.repository import GLib\n\
                      kf = GLib.KeyFile()\n\
                      kf.load_from_file(sys.argv[1], GLib.KeyFileFlags.NONE)\n\
                      ok, argv = GLib.shell_parse_argv(kf.get_string('Desktop Entry', 'Exec'))\n\
                      print(json.dumps({'argv': [a.replace('%%', '%') for a in argv], \
                      'path': kf.get_string('Desktop Entry', 'Path')}))\n";
        let out = Command::new(PYTHON_GI)
            .args(["-c", script])
            .arg(entry)
            .output()
            .expect("run python3");
        assert!(out.status.success(), "GLib could not read it: {out:?}");
        serde_json::from_slice(&out.stdout).expect("JSON")
    }

    /// Debian's python3 with GLib's bindings (`python3-gi`).
    const PYTHON_GI: &str = "/usr/bin/python3";

    /// Issue 24: paths with `$`, `\` and `%` in them are written so that
    /// systemd (`systemd-analyze verify`, which finds the program at the path
    /// it reads) and GLib read back the same paths; a program path systemd
    /// can't start (a backslash) and a line break are refused, nothing written.
    #[test]
    fn autostart_writes_odd_paths_as_systemd_and_glib_read_them_and_refuses_a_line_break() {
        let gi = Command::new(PYTHON_GI)
            .args(["-c", "import gi"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !common::require_tool("python3-gi", gi, "install Debian's python3-gi")
            || !common::require_tool(
                "systemd-analyze",
                common::runs("systemd-analyze"),
                "install Debian's systemd",
            )
        {
            return;
        }
        let dir = tempdir::Dir::new();
        let home = dir.path().join("home");
        let (session, no_session) = (dir.path().join("run"), dir.path().join("run-none"));
        std::fs::create_dir_all(session.join("systemd")).expect("a systemd user session");
        std::fs::create_dir_all(&no_session).expect("no session");
        let odd = dir.path().join(r"c$HOME a\b %h");
        std::fs::create_dir_all(&odd).expect("the configuration's folder");
        let config = odd.join("relay.toml");
        std::fs::write(&config, "").expect("config");
        let config = std::fs::canonicalize(&config).expect("exists");
        let config_text = config.to_str().expect("UTF-8");

        // The unit, by a program in a folder with `$` and `%`.
        let exe = program_in(&dir.path().join("p$HOME %h"));
        let on = autostart_by(&exe, &home, &session, &["on", "--config", config_text]);
        assert_eq!(on.code(), 0, "{on:?}");
        let unit = home.join(".config/systemd/user/forza-relay.service");
        let verify = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&unit)
            .output()
            .expect("run systemd-analyze");
        let said = String::from_utf8_lossy(&verify.stderr).into_owned()
            + &String::from_utf8_lossy(&verify.stdout);
        assert!(
            verify.status.success() && !said.contains("forza-relay.service:"),
            "systemd reads {}:\n{said}\n{}",
            unit.display(),
            std::fs::read_to_string(&unit).unwrap_or_default()
        );
        assert_eq!(autostart_by(&exe, &home, &session, &["off"]).code(), 0);

        // The desktop entry, by a program in the folder with `\` too.
        let exe = program_in(&odd);
        let on = autostart_by(&exe, &home, &no_session, &["on", "--config", config_text]);
        assert_eq!(on.code(), 0, "{on:?}");
        let entry = home.join(".config/autostart/forza-relay.desktop");
        let read = glib_reads(&entry);
        assert_eq!(
            read["argv"],
            serde_json::json!([exe.to_str().unwrap(), "run", "--config", config_text]),
            "{}",
            std::fs::read_to_string(&entry).unwrap_or_default()
        );
        assert_eq!(read["path"], odd.canonicalize().unwrap().to_str().unwrap());
        assert_eq!(autostart_by(&exe, &home, &no_session, &["off"]).code(), 0);

        // systemd can't start a program at a path with a backslash: said.
        let refused = autostart_by(&exe, &home, &session, &["on", "--config", config_text]);
        assert_eq!(refused.code(), 1, "{refused:?}");
        refused.assert_stderr_has(&["systemd can't start a program whose path holds a backslash"]);
        assert!(!unit.exists());

        // A line break in a folder's name: refused, nothing written.
        let broken = dir.path().join("x\nExecStartPre=touch pwned");
        std::fs::create_dir_all(&broken).expect("the folder");
        std::fs::write(broken.join("relay.toml"), "").expect("config");
        let config = broken.join("relay.toml");
        for runtime in [&session, &no_session] {
            let refused = autostart(
                &home,
                runtime,
                &["on", "--config", config.to_str().unwrap()],
            );
            assert_eq!(refused.code(), 2, "{refused:?}");
            refused.assert_stderr_has(&["control character"]);
            assert!(!unit.exists() && !entry.exists());
        }
    }

    #[test]
    fn autostart_on_without_a_configuration_says_what_it_needs() {
        let dir = tempdir::Dir::new();
        let done = autostart(dir.path(), dir.path(), &["on"]);
        assert_eq!(done.code(), 2, "{done:?}");
        done.assert_stderr_has(&["autostart on needs a configuration"]);
    }
}
