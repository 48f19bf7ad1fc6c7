//! Issue 9's start-up faults, through the real binary: configuration files that
//! are empty, truncated, binary, in the wrong encoding or huge each end with a
//! message naming the file and exit code 2, never a panic; a listen port taken by
//! another forza-relay ends with exit code 1 and leaves the first one running;
//! this computer's LAN address on the listen port is refused as a loop.

// Only the binary helpers, receivers and packets are used here.
use crate::common;

use std::net::SocketAddr;

use forza_relay::config::{Config, Overrides, MAX_FILE_BYTES};
use forza_relay::wire::Format;
use proptest::prelude::*;

use common::bin::{Bin, Finished};
use common::{receiver, recv, Sender, Spec, TempPath};

const EXAMPLE: &str = include_str!("../../config.example.toml");

/// A temp file holding `bytes`.
#[track_caller]
fn file_of(tag: &str, bytes: &[u8]) -> TempPath {
    let file = TempPath::file(tag, "");
    std::fs::write(file.path(), bytes).expect("write a temp file");
    file
}

/// Runs `forza-relay check --config PATH`.
#[track_caller]
fn check(path: &str) -> Finished {
    Bin::run(&["check", "--config", path], None)
}

/// Fails unless the run ended with exit code 2, the message of a configuration
/// problem at `place` containing `message`, and no panic.
#[track_caller]
fn assert_refused(done: &Finished, place: &str, message: &str) {
    assert_eq!(done.code(), 2, "{}", done.stderr);
    done.assert_stderr_has(&[
        "error: the configuration has 1 problem:",
        &format!("  {place}: "),
        message,
    ]);
    assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
    assert_eq!(done.stdout, "");
}

#[test]
fn issue9_an_empty_config_file_exits_2_naming_it() {
    for (tag, contents) in [("empty", ""), ("blank", "\n  \r\n\t\n")] {
        let file = TempPath::file(tag, contents);
        let done = check(&file.display());
        assert_refused(
            &done,
            &file.display(),
            "the file is empty: add a [[destination]] table (see config.example.toml)",
        );
    }
}

#[test]
fn issue9_a_truncated_config_file_exits_2_naming_the_file_and_the_line() {
    // Cut inside a quoted value, inside a table header, and after a key: each is
    // where a save interrupted by a crash or a full disk leaves a file.
    for (cut_after, message) in [
        ("addr = \"127.0.0.1:80", "invalid basic string"),
        ("\n[[desti", "invalid table header; expected `.`, `]]`"),
        (
            "max_rate =",
            "the file ends in the middle of this setting: was it saved completely?",
        ),
    ] {
        let end = EXAMPLE.find(cut_after).expect("in the example") + cut_after.len();
        let text = &EXAMPLE[..end];
        let line = text.lines().count();
        let last = text.lines().last().expect("a line");
        let file = TempPath::file("truncated", text);
        let done = check(&file.display());
        assert_refused(
            &done,
            &format!("{}:{line}: {last}", file.display()),
            message,
        );
    }
}

#[test]
fn issue9_every_prefix_of_the_example_is_accepted_or_refused_naming_the_file() {
    let mut refused = 0;
    for end in (0..=EXAMPLE.len()).filter(|&i| EXAMPLE.is_char_boundary(i)) {
        match Config::from_toml(&EXAMPLE[..end], "cut.toml", &Overrides::default()) {
            Ok(c) => assert!(!c.destinations.is_empty(), "cut at {end}"),
            Err(e) => {
                refused += 1;
                for p in &e.problems {
                    assert!(p.place.starts_with("cut.toml"), "cut at {end}: {p:?}");
                    assert!(!p.message.trim().is_empty(), "cut at {end}: {p:?}");
                }
            }
        }
    }
    // Most prefixes end mid-line or before the first destination.
    assert!(refused > EXAMPLE.len() / 2, "only {refused} refused");
    assert!(Config::from_toml(EXAMPLE, "cut.toml", &Overrides::default()).is_ok());
}

#[test]
fn issue9_a_file_cut_inside_a_character_exits_2_naming_the_line() {
    let text = "[[destination]]\naddr = \"127.0.0.1:8000\"\nname = \"caf\u{e9}\"\n";
    let cut = text.find('\u{e9}').expect("in the text") + 1;
    let file = file_of("cut-char", &text.as_bytes()[..cut]);
    let done = check(&file.display());
    assert_refused(
        &done,
        &format!("{}:3", file.display()),
        "this line is not UTF-8 text: a configuration is a TOML text file saved as UTF-8",
    );
}

/// `len` pseudo-random bytes (xorshift64, fixed seed: the same bytes every run).
fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed.to_le_bytes()[0]
        })
        .collect()
}

#[test]
fn issue9_random_bytes_as_config_exit_2_naming_the_file() {
    let bytes = random_bytes(4096, 0x9E37_79B9_7F4A_7C15);
    assert!(std::str::from_utf8(&bytes).is_err(), "pick another seed");
    let at = std::str::from_utf8(&bytes).unwrap_err().valid_up_to();
    let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let file = file_of("random", &bytes);
    let done = check(&file.display());
    assert_refused(
        &done,
        &format!("{}:{line}", file.display()),
        "this line is not UTF-8 text",
    );
}

#[test]
fn issue9_binary_bytes_that_are_valid_utf8_exit_2_naming_the_line() {
    let file = file_of(
        "nul",
        b"[listen]\naddr = \"0.0.0.0:5400\"\n\0\0\x01\x02\x7f\n",
    );
    let done = check(&file.display());
    // The line is quoted with its control bytes escaped.
    assert_refused(
        &done,
        &format!(
            "{}:3: \\u{{0}}\\u{{0}}\\u{{1}}\\u{{2}}\\u{{7f}}",
            file.display()
        ),
        "invalid key",
    );
}

#[test]
fn issue9_a_utf16_config_file_exits_2_saying_to_save_it_as_utf8() {
    // What Windows PowerShell 5's `>` writes: UTF-16LE with a byte-order mark.
    let text = "[[destination]]\r\naddr = \"127.0.0.1:8000\"\r\n";
    let mut bytes = vec![0xFF, 0xFE];
    bytes.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    let file = file_of("utf16", &bytes);
    let done = check(&file.display());
    assert_refused(
        &done,
        &file.display(),
        "the file is saved as UTF-16 (PowerShell's `>` does that): save it as UTF-8",
    );
}

#[test]
fn issue9_a_utf8_byte_order_mark_is_accepted() {
    // What Notepad wrote before Windows 10 1903.
    let file = file_of(
        "bom",
        b"\xEF\xBB\xBF[[destination]]\naddr = \"127.0.0.1:8000\"\n",
    );
    let done = check(&file.display());
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(done.stdout.contains("configuration OK"), "{}", done.stdout);
}

#[test]
fn issue9_a_50_mb_config_file_exits_2_without_being_read() {
    // A valid-looking TOML file: every line a comment.
    let line = "# ".to_owned() + &"x".repeat(97) + "\n";
    let text = line.repeat((50 << 20) / line.len() + 1);
    let size = text.len();
    assert!(size >= 50 << 20);
    let file = TempPath::file("huge", &text);
    drop(text);
    let done = check(&file.display());
    assert_refused(
        &done,
        &file.display(),
        &format!(
            "the file is {size} bytes: a configuration may be at most 1024 KiB (a real one is \
             a few KB); is this the right file?"
        ),
    );
}

#[test]
fn issue9_a_file_just_under_the_size_limit_is_read() {
    let destination = "[[destination]]\naddr = \"127.0.0.1:8000\"\n";
    let padding = "#".repeat(MAX_FILE_BYTES as usize - destination.len() - 1) + "\n";
    let file = TempPath::file("limit", &(padding + destination));
    let done = check(&file.display());
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[cfg(unix)]
#[test]
fn issue12_a_device_as_config_is_refused_without_being_read() {
    // An endless file: refused by what it is, before it is opened.
    let done = check("/dev/zero");
    assert_refused(
        &done,
        "/dev/zero",
        "cannot read the config file: it is a device; a configuration is a TOML text file",
    );
}

#[test]
fn issue9_a_folder_given_as_config_exits_2_naming_it() {
    let dir = TempPath::dir("folder");
    let done = check(&dir.display());
    assert_refused(
        &done,
        &dir.display(),
        "cannot read the config file: it is a folder",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever bytes a file holds, reading it ends in a configuration or in
    /// problems that name the file: never a panic.
    #[test]
    fn issue9_any_bytes_give_a_config_or_problems_naming_the_file(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let file = file_of("prop", &bytes);
        let origin = file.display();
        if let Err(e) = Config::from_file(file.path(), &Overrides::default()) {
            prop_assert!(!e.problems.is_empty());
            for p in &e.problems {
                prop_assert!(p.place.starts_with(&origin), "{:?}", p);
            }
        }
    }
}

/// Issue 9, as issue 32 item 4 changed it: a second relay on the same port
/// used to exit 1 naming the first as the port's holder; it now names the
/// running relay and exits 0 (tests/it/instance.rs has the page's side).
#[test]
fn issue9_a_second_relay_on_the_same_port_names_the_first_which_keeps_relaying() {
    let (simhub, simhub_addr) = receiver();
    let to_simhub = format!("{simhub_addr},name=simhub");
    let mut first = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--to",
            &to_simhub,
            "--stats-interval",
            "0",
        ],
        None,
    );
    let listen = first.wait_until_running();
    let listen_text = listen.to_string();
    let second = Bin::run(&["run", "--listen", &listen_text, "--to", &to_simhub], None);
    assert_eq!(second.code(), 0, "{}", second.stderr);
    second.assert_stderr_has(&[&format!(
        "forza-relay is already running (pid {}), listening on {listen}",
        first.id()
    )]);
    // The first relay still has the port, and every packet.
    let sender = Sender::new(listen);
    for ts in 1..=3 {
        let bytes = Spec::new(Format::Fh6, ts).build();
        sender.send(&bytes);
        assert_eq!(recv(&simhub), bytes);
    }
}

#[test]
fn issue9_this_computers_lan_address_on_the_listen_port_is_refused_as_a_loop() {
    let Some(ip) = crate::common::lan_address() else {
        eprintln!("note: this computer has no route off loopback; LAN loop not tested");
        return;
    };
    let dest = SocketAddr::new(ip, 5400).to_string();
    // `check` opens no listening socket, so 0.0.0.0 exposes nothing.
    let done = Bin::run(&["check", "--listen", "0.0.0.0:5400", "--to", &dest], None);
    assert_eq!(done.code(), 2, "{}", done.stderr);
    done.assert_stderr_has(&[&format!(
        "--to {dest:?}: {dest:?} ({dest}) is forza-relay's own listen address 0.0.0.0:5400: \
         packets would loop forever"
    )]);
    let other_port = SocketAddr::new(ip, 5401).to_string();
    let done = Bin::run(
        &["check", "--listen", "0.0.0.0:5400", "--to", &other_port],
        None,
    );
    assert_eq!(done.code(), 0, "{}", done.stderr);
}
