//! The real `forza-relay` binary as a child process: stderr read line by line on a
//! thread (so the pipe never fills), every wait bounded, the child killed (by its
//! id) if a test fails while it runs.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The longest a test waits for the binary to print a line or to exit: a bound
/// that only a hang reaches, also on a loaded 2-core CI machine, under Wine and
/// under qemu (a passing test never waits for it).
pub const BIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `forza-relay`.
pub struct Bin {
    child: Child,
    lines: Receiver<String>,
    stderr: Vec<String>,
    stdout_lines: Receiver<String>,
    /// Every stdout line taken so far, each with its line end.
    stdout: String,
}

/// How a run of the binary ended.
#[derive(Debug)]
pub struct Finished {
    /// The exit status.
    pub status: ExitStatus,
    /// Everything printed on stdout.
    pub stdout: String,
    /// Everything printed on stderr (logs go there).
    pub stderr: String,
}

impl Finished {
    /// The exit code; fails the test if a signal ended the process.
    #[track_caller]
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| panic!("killed by a signal: {self:?}"))
    }

    /// Fails the test unless stderr contains every one of `parts`.
    #[track_caller]
    pub fn assert_stderr_has(&self, parts: &[&str]) {
        for part in parts {
            assert!(
                self.stderr.contains(part),
                "stderr lacks {part:?}:\n{}",
                self.stderr
            );
        }
    }

    /// Fails the test unless stderr says port `port` is taken, naming the
    /// process `pid` that holds it where the OS says (Linux here; elsewhere the
    /// hint without a name is also accepted).
    #[track_caller]
    pub fn assert_port_in_use(&self, port: u16, pid: u32) {
        let named = format!("port {port} is in use by ");
        let holder = format!("(pid {pid}): stop it, or choose another port");
        if cfg!(target_os = "linux") || self.stderr.contains(&named) {
            self.assert_stderr_has(&[&named, &holder]);
        } else {
            self.assert_stderr_has(&[&format!("port {port} is already in use")]);
        }
    }
}

impl Finished {
    /// Fails the test unless the final summary has a line for destination `name`
    /// naming its address and output format and saying it sent `sent` frames.
    #[track_caller]
    pub fn assert_summary_line(&self, name: &str, addr: SocketAddr, output: &str, sent: u64) {
        let summary = self
            .stderr
            .rsplit_once("forza-relay ran for")
            .map(|(_, after)| after)
            .unwrap_or_else(|| panic!("no final summary:\n{}", self.stderr));
        let line = summary
            .lines()
            .find(|l| l.trim_start().starts_with(name) && l.contains(&addr.to_string()))
            .unwrap_or_else(|| panic!("no summary line for {name} ({addr}):\n{}", self.stderr));
        for part in [output.to_owned(), format!("sent {sent}")] {
            assert!(line.contains(&part), "{part:?} not in the line {line:?}");
        }
    }
}

/// The command that runs the binary. With `FORZA_RELAY_TEST_RUNNER` set (as
/// .ci/aarch64.sh sets it to `qemu-aarch64`), through that program: a test
/// running under qemu-user cannot exec a foreign binary by itself unless the
/// kernel's binfmt_misc knows qemu, which CI leaves alone. The runner keeps the
/// process id, so signals and process names still reach the relay.
pub fn command() -> Command {
    let exe = env!("CARGO_BIN_EXE_forza-relay");
    let mut command = match std::env::var_os("FORZA_RELAY_TEST_RUNNER") {
        Some(runner) => {
            let mut command = Command::new(runner);
            command.arg(exe);
            command
        }
        None => Command::new(exe),
    };
    in_test_state(&mut command);
    command
}

/// The state folder every binary a test starts keeps its page's token in
/// (issue 30): one per test program under the system's temporary folder, never
/// the user's own (`~/.local/state/forza-relay`). A test that needs its own
/// sets `FORZA_RELAY_STATE_DIR` after this.
pub fn test_state_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        std::env::temp_dir().join(format!("forza-relay-test-state-{}", std::process::id()))
    })
}

/// Points `command` (the binary, or a program that runs it) at
/// [`test_state_dir`].
pub fn in_test_state(command: &mut Command) -> &mut Command {
    command.env("FORZA_RELAY_STATE_DIR", test_state_dir())
}

/// The start of a command line that runs the binary: its path, after the
/// `FORZA_RELAY_TEST_RUNNER` when one is set (see [`command`]), for tests that
/// start it through another program (a shell, python3, unshare, nsenter).
pub fn argv() -> Vec<std::ffi::OsString> {
    let exe = std::ffi::OsString::from(env!("CARGO_BIN_EXE_forza-relay"));
    match std::env::var_os("FORZA_RELAY_TEST_RUNNER") {
        Some(runner) => vec![runner, exe],
        None => vec![exe],
    }
}

impl Bin {
    /// Starts the binary with `args`, in `dir` if given, with the default log level.
    #[track_caller]
    pub fn spawn(args: &[&str], dir: Option<&Path>) -> Bin {
        let mut command = command();
        command.args(args);
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        Bin::spawn_command(command)
    }

    /// Starts `command`, which runs the binary (through a wrapper such as
    /// `unshare` that execs it, so the child's id is the relay's).
    #[track_caller]
    pub fn spawn_command(mut command: Command) -> Bin {
        command
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start forza-relay");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, stdout_lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            loop {
                // Each line with its end, so the text is kept exactly.
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx
                            .send(String::from_utf8_lossy(&line).into_owned())
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }
        });
        Bin {
            child,
            lines,
            stderr: Vec::new(),
            stdout_lines,
            stdout: String::new(),
        }
    }

    /// Runs the binary to its end (at most [`BIN_TIMEOUT`]).
    #[track_caller]
    pub fn run(args: &[&str], dir: Option<&Path>) -> Finished {
        Bin::spawn(args, dir).wait()
    }

    /// The first stderr line read so far (by the waits) containing `needle`.
    pub fn line_said(&self, needle: &str) -> Option<String> {
        self.stderr.iter().find(|l| l.contains(needle)).cloned()
    }

    /// Whether a stderr line read so far (by the waits) contains `needle`.
    pub fn has_said(&self, needle: &str) -> bool {
        self.stderr.iter().any(|l| l.contains(needle))
    }

    /// Waits for a stderr line containing `needle` and returns it.
    #[track_caller]
    pub fn wait_for_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + BIN_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stderr.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no line with {needle:?} within {BIN_TIMEOUT:?}; stderr so far:\n{}",
                    self.stderr.join("\n")
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "forza-relay closed stderr before printing {needle:?}:\n{}",
                    self.stderr.join("\n")
                ),
            }
        }
    }

    /// Waits for a stdout line containing `needle` and returns it (without its end).
    #[track_caller]
    pub fn wait_for_stdout_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + BIN_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout_lines.recv_timeout(left) {
                Ok(line) => {
                    self.stdout.push_str(&line);
                    if line.contains(needle) {
                        return line.trim_end().to_owned();
                    }
                }
                Err(_) => panic!(
                    "no stdout line with {needle:?} within {BIN_TIMEOUT:?}; stdout so far:\n{}",
                    self.stdout
                ),
            }
        }
    }

    /// Waits for a stderr line with `before` followed by an address, and returns
    /// the address (`listen on 127.0.0.1:5400 …`, `listening on …`).
    #[track_caller]
    pub fn wait_for_address(&mut self, before: &str) -> SocketAddr {
        let line = self.wait_for_line(before);
        let after = &line[line.find(before).expect("found above") + before.len()..];
        after
            .split_whitespace()
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
    }

    /// Waits until it is running and returns the address it listens on (it logs
    /// the bound address, so `--listen 127.0.0.1:0` works).
    #[track_caller]
    pub fn wait_until_running(&mut self) -> SocketAddr {
        let addr = self.wait_for_address("listen on ");
        // Logged after the signal handler is installed.
        self.wait_for_line("running; press Ctrl-C to stop");
        addr
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (`INT`, `TERM`) with the `kill` command, by process id.
    #[track_caller]
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed: {status}");
    }

    /// Stops it where the test checks what it did while running, not how it
    /// stops: Ctrl-C (SIGINT) and an exit of 0 on Unix; on Windows, where no
    /// test can press Ctrl-C in another console, the process is ended. The
    /// output it printed while running is returned either way.
    #[track_caller]
    pub fn stop(mut self) -> Finished {
        if cfg!(unix) {
            self.signal("INT");
            let done = self.wait();
            assert_eq!(done.code(), 0, "stopped by Ctrl-C:\n{}", done.stderr);
            done
        } else {
            let _ = self.child.kill();
            self.wait()
        }
    }

    /// Waits for the exit (at most [`BIN_TIMEOUT`], then kills it and fails).
    #[track_caller]
    pub fn wait(self) -> Finished {
        self.wait_within(BIN_TIMEOUT)
    }

    /// Waits for the exit (at most `limit`, then kills it and fails): for a
    /// stop that must not wait on anything (issue 24).
    #[track_caller]
    pub fn wait_within(mut self, limit: Duration) -> Finished {
        let deadline = Instant::now() + limit;
        let status = loop {
            match self.child.try_wait().expect("try_wait") {
                Some(status) => break status,
                None if Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    self.collect_stderr();
                    panic!(
                        "forza-relay did not exit within {limit:?}; stderr:\n{}",
                        self.stderr.join("\n")
                    );
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        self.collect_stderr();
        // The reader ends at end of file: the process and its children are gone.
        let deadline = Instant::now() + Duration::from_secs(2);
        while let Ok(line) = self
            .stdout_lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.stdout.push_str(&line);
        }
        Finished {
            status,
            stdout: std::mem::take(&mut self.stdout),
            stderr: self.stderr.join("\n"),
        }
    }

    /// Reads the rest of stderr after the exit (the reader ends at end of file).
    fn collect_stderr(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.stderr.push(line),
                Err(_) => break,
            }
        }
    }
}

impl Drop for Bin {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
