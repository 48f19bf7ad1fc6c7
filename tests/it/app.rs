//! The program as a user runs it: every subcommand stops the same way on
//! SIGINT, SIGTERM and SIGHUP (issue 17), the relay keeps forwarding while
//! nobody reads its log (issue 12), a closed standard output ends a command
//! quietly (issue 12), and the command line has no dead ends (issue 13).
//!
//! Unix only: the tests send signals with `kill` and run the program on a
//! pseudo-terminal. Windows' console events have their test in
//! `src/platform/windows.rs`.
#![cfg(unix)]

use crate::common;

use std::io::{self, Write as _};
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use forza_relay::wire::{Format, Packet};

use common::bin::{Bin, BIN_TIMEOUT};
use common::*;

/// Frames the stall tests send through a relay whose log nobody reads.
const STALL_FRAMES: u32 = 2_000;
/// Destinations with nothing listening in the stall tests: each warns.
const DEAD_DESTINATIONS: u16 = 200;
/// How long the stall tests wait for every frame: a debug build sending each
/// to 201 destinations on a loaded machine takes a few seconds.
const ALL_FRAMES_WITHIN: Duration = Duration::from_secs(60);

/// Kills a child process (and other processes, by id) when dropped, so a test
/// that fails leaves nothing running.
struct Reaped(std::process::Child, Vec<String>);

impl Drop for Reaped {
    fn drop(&mut self) {
        for id in &self.1 {
            let _ = Command::new("kill").args(["-KILL", id]).status();
        }
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits (at most [`BIN_TIMEOUT`]) until the file at `path` has `lines` lines.
#[track_caller]
fn wait_for_lines(path: &Path, lines: usize) -> String {
    let deadline = Instant::now() + BIN_TIMEOUT;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} has {} lines, not {lines}, after {BIN_TIMEOUT:?}:\n{text}",
            path.display(),
            text.lines().count()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn issue17_export_stopped_by_sigterm_exits_0_with_every_row_written() {
    let dir = TempPath::dir("export-term");
    let csv = dir.path().join("rows.csv");
    let csv_text = csv.display().to_string();
    let mut bin = Bin::spawn(
        &[
            "export",
            "--listen",
            "127.0.0.1:0",
            "--format",
            "fh6",
            "-o",
            &csv_text,
        ],
        None,
    );
    let addr = bin.wait_for_address("listening on ");
    bin.wait_for_line("press Ctrl-C to stop");
    let sender = Sender::new(addr);
    for i in 0..5 {
        sender.send(&Spec::new(Format::Fh6, i).build());
    }
    // The export flushes its rows every second: a header and five rows.
    wait_for_lines(&csv, 6);
    bin.signal("TERM");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let text = std::fs::read_to_string(&csv).expect("read the export");
    assert_eq!(text.lines().count(), 6, "{text}");
    done.assert_stderr_has(&["5 rows written"]);
}

#[test]
fn issue17_watch_without_a_terminal_stopped_by_sigterm_exits_0_after_its_lines() {
    let mut bin = Bin::spawn(
        &["watch", "--listen", "127.0.0.1:0", "--format", "fh6"],
        None,
    );
    let addr = bin.wait_for_address("listening on ");
    Sender::new(addr).send(&Spec::new(Format::Fh6, 1).build());
    let line = bin.wait_for_stdout_line("km/h");
    bin.signal("TERM");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(done.stdout.contains(&line), "{}", done.stdout);
    assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
}

#[test]
fn issue17_run_to_keeps_relaying_after_sighup() {
    let (tool, tool_addr) = receiver();
    let to = tool_addr.to_string();
    let mut bin = Bin::spawn(&["run", "--listen", "127.0.0.1:0", "--to", &to], None);
    let addr = bin.wait_until_running();
    bin.signal("HUP");
    bin.wait_for_line("SIGHUP ignored: no configuration file to reload");
    let sender = Sender::new(addr);
    for i in 0..20 {
        sender.send(&Spec::new(Format::Fh6, i).build());
        let got = recv(&tool);
        let p = view(&got, Format::Fh6);
        assert_eq!(p.timestamp_ms(), i, "TimestampMS of packet {i}");
    }
    bin.signal("TERM");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_summary_line(&to, tool_addr, "same", 20);
}

#[test]
fn issue17_every_subcommand_that_runs_until_stopped_ignores_sighup() {
    let (_tool, tool_addr) = receiver();
    let to = tool_addr.to_string();
    let dir = TempPath::dir("sighup");
    let capture = dir.path().join("drive.pcap").display().to_string();
    for (args, running) in [
        (
            vec!["watch", "--listen", "127.0.0.1:0"],
            "listening on 127.0.0.1:",
        ),
        (
            vec!["simulate", "--to", to.as_str(), "--rate", "10"],
            "simulating",
        ),
        (
            vec!["record", "--listen", "127.0.0.1:0", "-o", capture.as_str()],
            "recording what arrives",
        ),
    ] {
        let mut bin = Bin::spawn(&args, None);
        if args[0] == "simulate" {
            bin.wait_for_stdout_line(running);
        } else {
            bin.wait_for_line(running);
        }
        bin.signal("HUP");
        bin.wait_for_line("SIGHUP ignored: no configuration file to reload");
        bin.signal("INT");
        let done = bin.wait();
        assert_eq!(done.code(), 0, "{args:?}: {}", done.stderr);
    }
}

/// The Python program that runs a command on a pseudo-terminal of 80×24 (see
/// [`on_a_terminal`]).
const PTY: &str = r#"
import os, pty, re, sys, select, signal, time, termios, fcntl, struct
mode, wait_for, argv = sys.argv[1], sys.argv[2].encode(), sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 80, 0, 0))
    os.execvp(argv[0], argv)
out = b''
def read(until, seconds):
    global out
    end = time.time() + seconds
    while not until() and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                return False
            if not data:
                return False
            out += data
    return until()
def lflag():
    try:
        return termios.tcgetattr(fd)[3]
    except termios.error:
        return -1
if mode == 'hangup':
    # Wait for the alternate screen, then close the terminal's window.
    entered = read(lambda: b'\x1b[?1049h' in out, 10)
    os.close(fd)
    end = time.time() + 20
    while time.time() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        os.kill(pid, signal.SIGKILL)
        print('entered' if entered else 'never-entered', 'still-running', flush=True)
        sys.exit(0)
    print('entered' if entered else 'never-entered', 'exit %d' % os.waitstatus_to_exitcode(status), flush=True)
    sys.exit(0)
if mode == 'screen':
    # Wait for the alternate screen, then stop it as a service manager would.
    entered = read(lambda: b'\x1b[?1049h' in out, 10)
    raw = lflag()
    saw = read(lambda: wait_for in out.split(b'\x1b[?1049h', 1)[-1], 10)
    print('entered' if entered else 'never-entered', 'saw' if saw else 'never-saw', flush=True)
    os.kill(pid, signal.SIGTERM)
else:
    # Where it listens, from its first lines; then XOFF, as Ctrl-S: the
    # terminal stops taking output.
    read(lambda: b'running; press Ctrl-C' in out, 20)
    listen = re.search(rb'listen on (\S+)', out)
    os.write(fd, b'\x13')
    print(pid, listen.group(1).decode() if listen else '-', flush=True)
    sys.stdin.readline()
    # XON, as Ctrl-Q: output flows again.
    os.write(fd, b'\x11')
    raw = 0
if mode == 'screen':
    read(lambda: False, 20)
else:
    # What the terminal shows from now on, as it comes.
    while True:
        r, _, _ = select.select([fd], [], [], 20)
        try:
            data = os.read(fd, 65536) if r else b''
        except OSError:
            data = b''
        if not data:
            break
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
_, status = os.waitpid(pid, 0)
restored = lflag()
sys.stdout.buffer.write(out)
print('\nraw-while-shown %d canonical-after %d exit %d' % (
    0 if raw == -1 or raw & termios.ICANON else 1,
    1 if restored != -1 and restored & termios.ICANON else 0,
    os.waitstatus_to_exitcode(status)), flush=True)
"#;

/// Starts `args` of the binary on a pseudo-terminal, through Python's `pty`
/// module, in `mode`: "hangup" waits for the alternate screen, closes the
/// terminal (as closing its window does) and says how the binary ended;
/// "screen" waits for the alternate screen and then for
/// `wait_for` on it, and sends SIGTERM; "xoff" stops the terminal's output
/// (Ctrl-S), prints the binary's pid, and lets output flow again (Ctrl-Q) when
/// a line arrives on its stdin, printing it as it comes. Both end with a line
/// saying how the binary exited. `None` when Python is missing.
fn on_a_terminal(mode: &str, wait_for: &str, args: &[&str]) -> Option<std::process::Child> {
    if !require_tool(
        "python3",
        runs("python3"),
        "the terminal tests run the binary on a pseudo-terminal with Python's pty module",
    ) {
        return None;
    }
    let child = Command::new("python3")
        .arg("-c")
        .arg(PTY)
        .arg(mode)
        .arg(wait_for)
        .args(common::bin::argv())
        .env("FORZA_RELAY_STATE_DIR", common::bin::test_state_dir())
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start python3");
    Some(child)
}

/// Waits (at most [`BIN_TIMEOUT`] beyond the helper's own bound) for the
/// pseudo-terminal helper to end and returns what it printed.
#[track_caller]
fn terminal_output(mut child: std::process::Child) -> String {
    let stdout = child.stdout.take().expect("piped");
    let _reaped = Reaped(child, Vec::new());
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(io::read_to_string(stdout));
    });
    rx.recv_timeout(BIN_TIMEOUT + Duration::from_secs(25))
        .expect("the pseudo-terminal helper ends")
        .expect("read the helper's output")
}

/// The end of `text`, at most `n` bytes (on a character boundary).
fn tail(text: &str, n: usize) -> &str {
    let mut start = text.len().saturating_sub(n);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[test]
fn issue17_watch_on_a_terminal_stopped_by_sigterm_restores_it() {
    let Some(child) = on_a_terminal("screen", "", &["watch", "--listen", "127.0.0.1:0"]) else {
        return;
    };
    let out = terminal_output(child);
    assert!(
        out.starts_with("entered saw"),
        "{:?}",
        &out[..out.len().min(300)]
    );
    // ratatui leaves the alternate screen and shows the cursor again.
    let left = out
        .rfind("\x1b[?1049l")
        .unwrap_or_else(|| panic!("never left the alternate screen: {:?}", tail(&out, 2_000)));
    assert!(
        out[left..].contains("\x1b[?25h"),
        "the cursor is shown: {:?}",
        &out[left..]
    );
    assert!(
        out.trim_end()
            .ends_with("raw-while-shown 1 canonical-after 1 exit 0"),
        "raw mode while shown, canonical mode after, exit 0: {:?}",
        &out[left..]
    );
}

#[test]
fn issue17_watch_whose_terminal_is_closed_stops_instead_of_spinning() {
    for args in [
        vec!["watch", "--listen", "127.0.0.1:0"],
        vec![
            "run",
            "--watch",
            "--listen",
            "127.0.0.1:0",
            "--to",
            "127.0.0.1:9",
        ],
    ] {
        let Some(child) = on_a_terminal("hangup", "", &args) else {
            return;
        };
        let out = terminal_output(child);
        // Stopped by the hang-up's SIGHUP, not killed by it (-1) nor left
        // running, and not ended by the stop grace (1).
        assert_eq!(out.trim_end(), "entered exit 0", "{args:?}");
    }
}

/// A configuration listening on `listen` (format fh6, a summary every second,
/// so every dead destination warns every second) with one live destination and
/// [`DEAD_DESTINATIONS`] where nothing listens: on 127.0.0.2, which no test
/// binds, so nothing anywhere receives them and each send is refused.
fn stall_config(listen: SocketAddr, live: SocketAddr) -> TempPath {
    let mut toml =
        format!("[listen]\naddr = \"{listen}\"\nformat = \"fh6\"\n\n[stats]\ninterval = 1\n");
    toml += &destination_toml("live", live, "same", "");
    for i in 0..DEAD_DESTINATIONS {
        let dead = SocketAddr::from(([127, 0, 0, 2], 47_000 + i));
        toml += &destination_toml(&format!("dead{i}"), dead, "same", "");
    }
    TempPath::file("stall.toml", &toml)
}

/// Where the relay listens when the system picks the port: the tests then
/// read the port from the relay's first lines ([`listen_address`]).
fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A loopback address nothing listens on, for a destination that is never
/// there (a port the system gave and took back: if another program took it
/// meanwhile, that destination would only not be refused).
fn unused_port() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("reserve a port")
}

/// Reads the relay's log from the pipe `read_end` up to the line saying where
/// it listens (at most [`BIN_TIMEOUT`]), and gives back that address and the
/// pipe, which is read no further.
#[cfg(target_os = "linux")]
#[track_caller]
fn listen_address(read_end: std::os::fd::OwnedFd) -> (SocketAddr, std::os::fd::OwnedFd) {
    use std::io::Read as _;
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let mut pipe = std::fs::File::from(read_end);
        let (mut line, mut log) = (Vec::new(), String::new());
        let mut byte = [0u8; 1];
        let found = loop {
            match pipe.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    line.clear();
                    log += &text;
                    log.push('\n');
                    let address = text
                        .split_once("listen on ")
                        .and_then(|(_, after)| after.split_whitespace().next())
                        .and_then(|a| a.parse::<SocketAddr>().ok());
                    if let Some(address) = address {
                        break Ok(address);
                    }
                }
                Ok(1) => line.push(byte[0]),
                _ => break Err(log),
            }
        };
        let _ = tx.send((found, std::os::fd::OwnedFd::from(pipe)));
    });
    match rx.recv_timeout(BIN_TIMEOUT) {
        Ok((Ok(address), pipe)) => (address, pipe),
        Ok((Err(log), _)) => panic!("the log ended before saying where it listens:\n{log}"),
        Err(_) => panic!("no 'listen on' line within {BIN_TIMEOUT:?}"),
    }
}

/// Counts the frames that arrive at `socket` (into `counted`) and checks their
/// order, until `done` and 500 ms of silence: (frames of the stream in order,
/// probes).
fn count_frames(
    socket: UdpSocket,
    done: Arc<AtomicBool>,
    counted: Arc<AtomicU32>,
) -> JoinHandle<(u32, u32)> {
    thread::spawn(move || {
        socket
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("a timeout");
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let (mut next, mut probes) = (0u32, 0u32);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match socket.recv(&mut buf) {
                Ok(n) => {
                    let ts = Packet::new_checked(&buf[..n], Format::Fh6)
                        .map_or(u32::MAX, |p| p.timestamp_ms());
                    if ts >= PROBE {
                        probes += 1;
                    } else {
                        assert_eq!(ts, next, "frame {next} arrived as {ts}");
                        next += 1;
                        counted.store(next, Ordering::SeqCst);
                    }
                }
                Err(_) if done.load(Ordering::SeqCst) || Instant::now() > deadline => break,
                Err(_) => {}
            }
        }
        (next, probes)
    })
}

/// TimestampMS of the probes sent until the relay answers.
const PROBE: u32 = 1 << 30;

/// Sends probes to `listen` until `live_probes` says one arrived.
#[track_caller]
fn wait_until_relaying(sender: &Sender, arrived: impl Fn() -> bool) {
    let deadline = Instant::now() + BIN_TIMEOUT;
    let mut n = 0;
    while !arrived() {
        assert!(Instant::now() < deadline, "the relay never forwarded");
        sender.send(&Spec::new(Format::Fh6, PROBE + n).build());
        n += 1;
        thread::sleep(Duration::from_millis(50));
    }
}

/// Sends a probe every 100 ms for `seconds` after the stream, so that each
/// of that many summaries (one line naming all 201 destinations, about 16 KB)
/// is logged: more than [`forza_relay::logging::QUEUE_BYTES`] in all, whatever
/// the warnings and the stream's own summaries came to.
fn keep_summaries_coming(sender: &Sender, seconds: u32) {
    for n in 0..seconds * 10 {
        sender.send(&Spec::new(Format::Fh6, PROBE + (1 << 20) + n).build());
        thread::sleep(Duration::from_millis(100));
    }
}

/// Streams [`STALL_FRAMES`] fh6 frames (TimestampMS 0, 1, …), about 1,000 a second.
fn stream(sender: &Sender) {
    for i in 0..STALL_FRAMES {
        sender.send(&Spec::new(Format::Fh6, i).build());
        if i % 10 == 9 {
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A receiver for the live destination whose frames are counted as they come:
/// the count so far is readable while the test runs.
struct Live {
    addr: SocketAddr,
    done: Arc<AtomicBool>,
    seen: Arc<AtomicBool>,
    counted: Arc<AtomicU32>,
    counter: JoinHandle<(u32, u32)>,
}

impl Live {
    fn start() -> Live {
        let (socket, addr) = receiver();
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(AtomicBool::new(false));
        // A clone that only peeks, so the first probe is seen at once.
        let peek = socket.try_clone().expect("clone the receiver");
        let flag = seen.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 1];
            let _ = peek.set_read_timeout(Some(BIN_TIMEOUT));
            if peek.peek(&mut buf).is_ok() {
                flag.store(true, Ordering::SeqCst);
            }
        });
        let counted = Arc::new(AtomicU32::new(0));
        let counter = count_frames(socket, done.clone(), counted.clone());
        Live {
            addr,
            done,
            seen,
            counted,
            counter,
        }
    }

    /// Waits until every frame of the stream has arrived, or fails after
    /// [`ALL_FRAMES_WITHIN`] (a relay blocked on its log never gets there).
    #[track_caller]
    fn wait_for_every_frame(&self) {
        let deadline = Instant::now() + ALL_FRAMES_WITHIN;
        while self.counted.load(Ordering::SeqCst) < STALL_FRAMES {
            assert!(
                Instant::now() < deadline,
                "{} of {STALL_FRAMES} frames arrived within {ALL_FRAMES_WITHIN:?}",
                self.counted.load(Ordering::SeqCst)
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn finish(self) -> (u32, u32) {
        self.done.store(true, Ordering::SeqCst);
        self.counter.join().expect("the counting thread")
    }
}

#[cfg(target_os = "linux")]
#[test]
fn issue12_a_stderr_nobody_reads_never_stops_the_relay() {
    use std::os::fd::{FromRawFd as _, OwnedFd};

    let live = Live::start();
    let config = stall_config(any_port(), live.addr);
    // A pipe of one page that is never read after the line saying where the
    // relay listens: the next few lines fill it.
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: a valid descriptor; F_SETPIPE_SZ takes an int.
    unsafe { libc::fcntl(fds[0], libc::F_SETPIPE_SZ, 4096) };
    let mut child = Reaped(
        common::bin::command()
            .args([
                "run",
                "--config",
                &config.display(),
                "--stats-format",
                "json",
            ])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(write_end))
            .spawn()
            .expect("start forza-relay"),
        Vec::new(),
    );
    let stdout = child.0.stdout.take().expect("piped");
    let reader = thread::spawn(move || io::read_to_string(stdout).unwrap_or_default());
    let (listen, read_end) = listen_address(read_end);
    let sender = Sender::new(listen);
    wait_until_relaying(&sender, || live.seen.load(Ordering::SeqCst));
    stream(&sender);
    // Every frame is forwarded while the log is stalled; then it is stopped.
    live.wait_for_every_frame();
    let stopped = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + BIN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "SIGTERM did not stop a relay whose stderr is not read"
        );
        thread::sleep(Duration::from_millis(10));
    };
    println!("stopped {:?} after SIGTERM", stopped.elapsed());
    drop(read_end);
    let (frames, probes) = live.finish();
    assert_eq!(frames, STALL_FRAMES, "frames at the live destination");
    assert_eq!(status.code(), Some(0), "{status}");
    let stdout = reader.join().expect("the stdout reader");
    let last: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|v: &serde_json::Value| v["event"] == "final")
        .unwrap_or_else(|| panic!("no final summary on stdout:\n{stdout}"));
    let live_sent = last["destinations"][0]["sent"].as_u64();
    assert_eq!(live_sent, Some(u64::from(STALL_FRAMES + probes)), "{last}");
    assert_eq!(
        last["input"]["received"].as_u64(),
        Some(u64::from(STALL_FRAMES + probes)),
        "{last}"
    );
}

#[test]
fn issue12_a_terminal_stopped_with_ctrl_s_never_stops_the_relay() {
    let live = Live::start();
    let config = stall_config(any_port(), live.addr);
    let config_text = config.display();
    let Some(child) = on_a_terminal("xoff", "", &["run", "--config", &config_text]) else {
        return;
    };
    let mut child = Reaped(child, Vec::new());
    let mut out = io::BufReader::new(child.0.stdout.take().expect("piped"));
    // The helper's first line: the relay's pid and where it listens.
    let mut first = String::new();
    io::BufRead::read_line(&mut out, &mut first).expect("the relay's pid");
    let (pid, listen) = first
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("no pid and address in {first:?}"));
    let pid = pid.to_owned();
    let listen: SocketAddr = listen
        .parse()
        .unwrap_or_else(|_| panic!("no 'listen on' line on the terminal: {first:?}"));
    child.1.push(pid.clone());
    let sender = Sender::new(listen);
    wait_until_relaying(&sender, || live.seen.load(Ordering::SeqCst));
    stream(&sender);
    keep_summaries_coming(&sender, 6);
    live.wait_for_every_frame();
    let (frames, probes) = live.finish();
    assert_eq!(frames, STALL_FRAMES, "frames at the live destination");
    // Ctrl-Q: the terminal shows output again, and says how many lines it lost.
    child
        .0
        .stdin
        .take()
        .expect("piped")
        .write_all(b"go\n")
        .expect("tell the helper");
    // The helper's lines, read on a thread so that no wait here is unbounded.
    let (tx, lines) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for line in io::BufRead::lines(out) {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut shown = String::new();
    let deadline = Instant::now() + BIN_TIMEOUT;
    while !shown.contains("log lines dropped: the console was not being read") {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => shown += &(line + "\n"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("no count of dropped lines: {}", tail(&shown, 3_000))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the helper ended early: {}", tail(&shown, 3_000))
            }
        }
    }
    let stopped = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + BIN_TIMEOUT + Duration::from_secs(25);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => shown += &(line + "\n"),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("the helper did not end: {}", tail(&shown, 3_000))
            }
        }
    }
    // The relay has ended and the helper has reaped it: its id is nobody's now.
    child.1.clear();
    println!("ended {:?} after SIGTERM", stopped.elapsed());
    assert!(
        shown.trim_end().ends_with("exit 0"),
        "{}",
        tail(&shown, 3_000)
    );
    let summary = shown
        .rsplit_once("forza-relay ran for")
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no final summary:\n{}", tail(&shown, 3_000)));
    let live_line = summary
        .lines()
        .find(|l| l.trim_start().starts_with("live "))
        .unwrap_or_else(|| panic!("no line for live:\n{summary}"));
    let sent: String = live_line
        .split_once("sent ")
        .map(|(_, n)| n)
        .unwrap_or_default()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    assert_eq!(
        sent,
        (STALL_FRAMES + probes).to_string(),
        "sent, in {live_line:?}"
    );
}

/// Where a command's standard output goes in [`with_stdout`].
enum Out {
    /// A pipe whose reader is gone before anything is written (`| true`).
    Closed,
    /// `/dev/full`: every write fails with "no space left on device".
    Full,
}

/// Runs the binary with `args` and its standard output as `out`; returns its
/// exit code (`None`: killed by a signal, a panic's abort too) and stderr.
#[track_caller]
fn with_stdout(args: &[&str], out: Out) -> (Option<i32>, String) {
    let stdout = match out {
        Out::Closed => Stdio::piped(),
        Out::Full => std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("open /dev/full")
            .into(),
    };
    let mut child = common::bin::command()
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start forza-relay");
    drop(child.stdout.take());
    let stderr = child.stderr.take().expect("piped");
    let reader = thread::spawn(move || io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + BIN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{args:?} did not end within {BIN_TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    (status.code(), reader.join().expect("the stderr reader"))
}

#[test]
fn issue12_every_subcommand_stops_quietly_when_its_reader_is_gone() {
    let (_tool, tool_addr) = receiver();
    let to = tool_addr.to_string();
    let dir = TempPath::dir("closed-stdout");
    let capture = dir.path().join("drive.pcap");
    write_capture(&capture, &[Spec::new(Format::Fh6, 1).build()]);
    let capture = capture.display().to_string();
    for args in [
        vec![
            "simulate",
            "--to",
            &to,
            "--rate",
            "200",
            "--duration",
            "0.5",
        ],
        vec!["demo", "--seconds", "1"],
        vec!["dissector"],
        vec!["check", "--to", &to],
        vec!["export", "--file", &capture, "-o", "-"],
    ] {
        let (code, stderr) = with_stdout(&args, Out::Closed);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
    }
}

#[test]
fn issue12_a_full_standard_output_is_an_error_that_says_so() {
    let (_tool, tool_addr) = receiver();
    let to = tool_addr.to_string();
    for args in [
        vec![
            "simulate",
            "--to",
            &to,
            "--rate",
            "200",
            "--duration",
            "0.5",
        ],
        vec!["demo", "--seconds", "1"],
        vec!["dissector"],
        vec!["check", "--to", &to],
    ] {
        let (code, stderr) = with_stdout(&args, Out::Full);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write to standard output: No space left on device"),
            "{args:?}: {stderr}"
        );
    }
}

/// Writes a capture at `path` holding `payloads` as datagrams to port 5400,
/// 10 ms apart.
fn write_capture(path: &Path, payloads: &[Vec<u8>]) {
    let mut w = forza_relay::capture::Writer::create(path).expect("create the capture");
    let t0 = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for (i, payload) in payloads.iter().enumerate() {
        w.write(
            t0 + Duration::from_millis(10 * i as u64),
            SocketAddr::from(([127, 0, 0, 1], 5555)),
            SocketAddr::from(([127, 0, 0, 1], 5400)),
            payload,
        )
        .expect("write a datagram");
    }
    w.flush().expect("flush the capture");
}

#[test]
fn issue13_run_watch_prints_the_summaries_of_while_the_screen_was_up() {
    let Some(child) = on_a_terminal(
        "screen",
        "waiting: nothing received",
        &[
            "run",
            "--watch",
            "--listen",
            "127.0.0.1:0",
            "--to",
            "127.0.0.1:9",
            "--stats-interval",
            "1",
        ],
    ) else {
        return;
    };
    let out = terminal_output(child);
    // The newest log line is shown on the screen, and the log printed after it.
    assert!(
        out.starts_with("entered saw"),
        "{:?}",
        &out[..out.len().min(300)]
    );
    let left = out
        .rfind("\x1b[?1049l")
        .unwrap_or_else(|| panic!("never left the alternate screen: {:?}", tail(&out, 2_000)));
    let after = &out[left..];
    assert!(
        after.contains("waiting: nothing received on 127.0.0.1:"),
        "the summary lines are in the log after the screen: {after:?}"
    );
    assert!(after.trim_end().ends_with("exit 0"), "{after:?}");
}

/// A configuration file, named `name` in a fresh folder, listening on a fresh
/// loopback port and sending to `to`.
fn config_file(name: &str, to: SocketAddr) -> (TempPath, std::path::PathBuf) {
    let dir = TempPath::dir("config-arg");
    let path = dir.path().join(name);
    std::fs::write(
        &path,
        listen_toml("fh6") + &destination_toml("tool", to, "same", ""),
    )
    .expect("write the config");
    (dir, path)
}

#[test]
fn issue13_a_toml_file_given_as_the_only_argument_is_the_configuration() {
    let (tool, tool_addr) = receiver();
    let (_dir, path) = config_file("dropped.toml", tool_addr);
    let path = path.display().to_string();
    for args in [vec![path.as_str()], vec!["run", &path]] {
        let mut bin = Bin::spawn(&args, None);
        let addr = bin.wait_until_running();
        Sender::new(addr).send(&Spec::new(Format::Fh6, 7).build());
        assert_eq!(view(&recv(&tool), Format::Fh6).timestamp_ms(), 7);
        bin.signal("INT");
        let done = bin.wait();
        assert_eq!(done.code(), 0, "{args:?}: {}", done.stderr);
        done.assert_summary_line("tool", tool_addr, "same", 1);
    }
    let done = Bin::run(&["check", &path], None);
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(done.stdout.contains("configuration OK"), "{}", done.stdout);
}

#[test]
fn issue13_anything_else_as_a_plain_argument_says_to_use_config() {
    let (_dir, path) = config_file("notes.txt", "127.0.0.1:9".parse().expect("an address"));
    let path = path.display().to_string();
    for args in [
        vec!["missing.toml"],
        vec!["run", "missing.toml"],
        vec![path.as_str()],
        vec!["wach"],
    ] {
        let done = Bin::run(&args, None);
        assert_eq!(done.code(), 2, "{args:?}: {}", done.stderr);
        done.assert_stderr_has(&["use --config FILE"]);
        let last = args.last().expect("an argument");
        assert!(done.stderr.contains(last), "{args:?}: {}", done.stderr);
    }
    let done = Bin::run(&["--config", &path, &path], None);
    assert_eq!(done.code(), 2, "{}", done.stderr);
}

#[test]
fn issue13_the_input_format_is_format_everywhere_and_input_still_works() {
    for flag in ["--format", "--input"] {
        let done = Bin::run(&["check", "--to", "127.0.0.1:9", flag, "fh5"], None);
        assert_eq!(done.code(), 0, "{flag}: {}", done.stderr);
        assert!(
            done.stdout.contains("fh5 packets"),
            "{flag}: {}",
            done.stdout
        );
        let done = Bin::run(&["check", "--to", "127.0.0.1:9", flag, "fh7"], None);
        assert_eq!(done.code(), 2, "{flag}: {}", done.stderr);
        done.assert_stderr_has(&["--format: unknown input format \"fh7\""]);
    }
    let (_tool, tool_addr) = receiver();
    let to = tool_addr.to_string();
    let done = Bin::run(
        &[
            "simulate",
            "--to",
            &to,
            "--input",
            "fm7",
            "--duration",
            "0.1",
        ],
        None,
    );
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(done.stdout.contains("fm7 packets"), "{}", done.stdout);
    let dir = TempPath::dir("input-alias");
    let capture = dir.path().join("one.pcap");
    write_capture(&capture, &[Spec::new(Format::Fh6, 1).build()]);
    let capture = capture.display().to_string();
    for sub in ["export", "watch"] {
        let mut args = vec![sub, "--file", &capture, "--input", "fh6"];
        if sub == "export" {
            args.extend(["-o", "-"]);
        }
        let done = Bin::run(&args, None);
        assert_eq!(done.code(), 0, "{sub}: {}", done.stderr);
    }
    for sub in ["run", "check", "watch", "export", "simulate"] {
        let done = Bin::run(&[sub, "--help"], None);
        assert!(done.stdout.contains("--format"), "{sub}: {}", done.stdout);
        assert!(!done.stdout.contains("--input"), "{sub}: {}", done.stdout);
    }
}

#[test]
fn issue13_config_mistakes_say_how_to_fix_them() {
    for (contents, expected) in [
        (
            "[listen]\naddr = \"127.0.0.1:5400\"\n[destination]\naddr = \"127.0.0.1:8000\"\n",
            ":3: [destination]: use [[destination]] (two brackets on each side): one such \
             table per tool",
        ),
        (
            "[[destination]]\naddr = \"127.0.0.1:8000\"\nmax_rate = -1\n",
            ":3: max_rate = -1: max_rate must be 0 (no limit) or a whole number of packets a \
             second",
        ),
        (
            "[[destination]]\naddr = 8000\n",
            ":2: destination[1].addr: \"8000\": needs a host before the port: \
             \"127.0.0.1:8000\" for a tool on this PC",
        ),
        (
            "[listen]\naddr = true\n[[destination]]\naddr = \"127.0.0.1:8000\"\n",
            ":2: addr = true: invalid type: boolean `true`, expected an address in quotes, \
             like \"127.0.0.1:8000\", or a port number",
        ),
    ] {
        let file = TempPath::file("mistake.toml", contents);
        let path = file.path().display().to_string();
        let done = Bin::run(&["check", "--config", &path], None);
        assert_eq!(done.code(), 2, "{contents}: {}", done.stderr);
        done.assert_stderr_has(&[&format!("{path}{expected}")]);
    }
    // A bare port without quotes is the README's bare port.
    let file = TempPath::file(
        "bare.toml",
        "[listen]\naddr = 47481\n[[destination]]\naddr = \"127.0.0.1:8000\"\n",
    );
    let path = file.path().display().to_string();
    let done = Bin::run(&["check", "--config", &path], None);
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.contains("listen on 0.0.0.0:47481"),
        "{}",
        done.stdout
    );
    let done = Bin::run(&["check", "--to", "8000"], None);
    assert_eq!(done.code(), 2, "{}", done.stderr);
    done.assert_stderr_has(&[
        "--to \"8000\": \"8000\": needs a host before the port: \"127.0.0.1:8000\" for a tool on \
         this PC",
    ]);
}

#[test]
fn issue13_check_help_has_no_watch_and_watch_port_needs_a_file() {
    let done = Bin::run(&["check", "--help"], None);
    assert_eq!(done.code(), 0);
    assert!(!done.stdout.contains("--watch"), "{}", done.stdout);
    let done = Bin::run(&["run", "--help"], None);
    assert!(done.stdout.contains("--watch"), "{}", done.stdout);
    let done = Bin::run(&["watch", "--port", "5400"], None);
    assert_eq!(done.code(), 2, "{}", done.stderr);
    done.assert_stderr_has(&["--file"]);
}

#[test]
fn issue13_a_port_in_use_is_worded_the_same_by_every_subcommand() {
    let taken = UdpSocket::bind("127.0.0.1:0").expect("take a port");
    let addr = taken.local_addr().expect("bound").to_string();
    let port = taken.local_addr().expect("bound").port();
    let expected = format!("cannot listen on {addr}: port {port} is ");
    let dir = TempPath::dir("port-in-use");
    let out = dir.path().join("x.csv").display().to_string();
    let pcap = dir.path().join("x.pcap").display().to_string();
    for args in [
        vec!["run", "--listen", &addr, "--to", "127.0.0.1:9"],
        vec!["record", "--listen", &addr, "-o", &pcap],
        vec!["watch", "--listen", &addr],
        vec!["export", "--listen", &addr, "-o", &out],
    ] {
        let done = Bin::run(&args, None);
        assert_eq!(done.code(), 1, "{args:?}: {}", done.stderr);
        done.assert_stderr_has(&[&expected]);
        // The port's holder is this test: its process is named (issue 18).
        done.assert_port_in_use(port, std::process::id());
        assert!(!done.stderr.contains("watch?"), "{args:?}: {}", done.stderr);
    }
}

#[test]
fn issue13_simulate_says_once_that_nothing_listens() {
    // A port with nothing on it: bound, then closed.
    let dead = unused_port().to_string();
    let done = Bin::run(
        &[
            "simulate",
            "--to",
            &dead,
            "--rate",
            "100",
            "--duration",
            "0.5",
        ],
        None,
    );
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let warnings = done
        .stderr
        .lines()
        .filter(|l| l.contains("nothing is listening"))
        .count();
    assert_eq!(warnings, 1, "{}", done.stderr);
    done.assert_stderr_has(&[&dead]);
}
