//! Issue 32 item 3, the tray: started as the Start-menu shortcut and the
//! login entry start it — by forza-relayw.exe, a program with no console —
//! the relay shows its tray icon, keeps its log in the state folder, has no
//! console window, and relays on. Windows only, and it needs a desktop (under
//! Wine, .ci/windows.sh runs the suite on an Xvfb display).

#![cfg(windows)]

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::rig::Tool;
use common::*;
use forza_relay::report::query;
use forza_relay::tray::IN_THE_TRAY;
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

/// The subsystem a PE file asks Windows for: 2 a window of its own or none
/// (GUI), 3 a console.
fn subsystem(exe: &Path) -> u16 {
    let bytes = std::fs::read(exe).expect("read the program");
    let at = |i: usize, n: usize| &bytes[i..i + n];
    let pe = u32::from_le_bytes(at(0x3c, 4).try_into().unwrap()) as usize;
    assert_eq!(at(pe, 4), b"PE\0\0", "{} is a PE file", exe.display());
    // The optional header follows the 4-byte signature and the 20-byte file
    // header; Subsystem is at its offset 68 (PE32 and PE32+ alike).
    u16::from_le_bytes(at(pe + 24 + 68, 2).try_into().unwrap())
}

#[test]
fn issue32_started_as_the_shortcut_starts_it_it_goes_to_the_tray_with_no_console_and_relays() {
    let starter = Path::new(env!("CARGO_BIN_EXE_forza-relayw"));
    assert_eq!(
        subsystem(starter),
        2,
        "forza-relayw.exe is a GUI program: Windows opens no console for it"
    );
    assert_eq!(
        subsystem(Path::new(env!("CARGO_BIN_EXE_forza-relay"))),
        3,
        "forza-relay.exe is a console program: a terminal shows what it prints"
    );

    let (tool_socket, to) = receiver();
    let state = TempPath::dir("tray-state");
    let file = TempPath::file(
        "tray.toml",
        &format!(
            "[listen]\naddr = \"127.0.0.1:0\"\n[web]\naddr = \"127.0.0.1:0\"\n[stats]\ninterval = 0\n\n\
             [[destination]]\nname = \"tool\"\naddr = \"{to}\"\n"
        ),
    );
    // As the login entry starts it: forza-relayw.exe, then the arguments.
    let mut started = Command::new(starter)
        .args(["run", "--config", &file.display()])
        .env(forza_relay::state::STATE_DIR_VAR, state.path())
        .env_remove("RUST_LOG")
        .spawn()
        .expect("start forza-relayw.exe");

    let log = state.path().join(forza_relay::state::LOG_FILE);
    let text = log_with(&log, IN_THE_TRAY);
    assert!(
        text.contains("the tray icon is shown"),
        "the icon is said shown before the relay is in the tray:\n{text}"
    );
    let text = log_with(&log, "no console window is shown");
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
    // relay is ended by its id, which the status query gives; the starter,
    // which waited for it, ends with it (and shows nothing: the relay was in
    // the tray, its log in its file).
    let answer = query::ask(listen, Duration::from_secs(5)).expect("the relay answers");
    let killed = Command::new("taskkill")
        .args(["/F", "/PID", &answer.pid.to_string()])
        .status()
        .expect("run taskkill");
    assert!(killed.success(), "{killed}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while started
        .try_wait()
        .expect("wait for forza-relayw.exe")
        .is_none()
    {
        assert!(
            Instant::now() < deadline,
            "forza-relayw.exe outlived the relay it started by 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
