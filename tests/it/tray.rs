//! Issue 32 item 3, the tray: started as the Start-menu shortcut, the login
//! entry or a double-click start it — in a console window of its own — the
//! relay shows its tray icon, keeps its log in the state folder and lets the
//! window go, and relays on. Windows only, and it needs a desktop: run it on
//! Windows with `cargo test --test it tray:: -- --ignored`.

#![cfg(windows)]

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::rig::Tool;
use common::*;
use forza_relay::report::query;
use forza_relay::wire::Format;

/// How long the first lines may take: the first window of a fresh Wine
/// prefix on a display builds its font caches first.
const FIRST_LINES_WITHIN: Duration = Duration::from_secs(120);

/// The log file's text once it holds `needle` (at most [`FIRST_LINES_WITHIN`]).
#[track_caller]
fn log_with(log: &Path, needle: &str) -> String {
    let deadline = Instant::now() + FIRST_LINES_WITHIN;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in {} within {FIRST_LINES_WITHIN:?}:\n{text}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs a desktop: under Wine it passed in a used prefix with Xvfb but not in CI's fresh one, where `start` gave no console of the program's own; run it on Windows with --ignored"]
fn issue32_started_in_a_window_of_its_own_it_goes_to_the_tray_logs_to_its_file_and_relays() {
    let (tool_socket, to) = receiver();
    let state = TempPath::dir("tray-state");
    let file = TempPath::file(
        "tray.toml",
        &format!(
            "[listen]\naddr = \"127.0.0.1:0\"\n[web]\naddr = \"127.0.0.1:0\"\n[stats]\ninterval = 0\n\n\
             [[destination]]\nname = \"tool\"\naddr = \"{to}\"\n"
        ),
    );
    // As a shortcut starts it: `start` gives it a console window of its own.
    // (Built on Linux for Wine, the program's path is a Unix one, which
    // `start` takes only made absolute on a drive.)
    let exe = std::path::absolute(env!("CARGO_BIN_EXE_forza-relay")).expect("the program's path");
    let started = Command::new("cmd")
        .args(["/C", "start", "", "/MIN"])
        .arg(&exe)
        .args(["run", "--config", &file.display()])
        .env(forza_relay::state::STATE_DIR_VAR, state.path())
        .env_remove("RUST_LOG")
        .status()
        .expect("run cmd /c start");
    assert!(started.success(), "{started}");

    let log = state.path().join(forza_relay::state::LOG_FILE);
    let text = log_with(&log, "in the tray from now on");
    assert!(
        text.contains("the tray icon is shown"),
        "the icon is said shown before the window goes:\n{text}"
    );
    let listen: std::net::SocketAddr = text
        .split_once("listen on ")
        .and_then(|(_, after)| after.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no 'listen on' line in the log:\n{text}"));

    // It relays: every frame reaches the tool.
    let tool = Tool::start(tool_socket, |_| ());
    let sender = Sender::new(listen);
    for ts in 0..50 {
        sender.send(&Spec::new(Format::Fh6, ts).build());
    }
    let got = tool.stop_once_it_has(50).len();
    assert_eq!(got, 50, "frames relayed from the tray");

    // Ended as Quit would end it is the menu's (not clickable here): the
    // process is ended by its id, which the status query gives.
    let answer = query::ask(listen, Duration::from_secs(5)).expect("the relay answers");
    let killed = Command::new("taskkill")
        .args(["/F", "/PID", &answer.pid.to_string()])
        .status()
        .expect("run taskkill");
    assert!(killed.success(), "{killed}");
}
