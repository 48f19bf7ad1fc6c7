//! The real `forza-relay` binary as a child process: stderr read line by line on a
//! thread (so the pipe never fills), every wait bounded, the child killed (by its
//! id) if a test fails while it runs.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest a test waits for the binary to print a line or to exit.
pub const BIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `forza-relay`.
pub struct Bin {
    child: Child,
    lines: Receiver<String>,
    stderr: Vec<String>,
    stdout: Option<JoinHandle<String>>,
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
    match std::env::var_os("FORZA_RELAY_TEST_RUNNER") {
        Some(runner) => {
            let mut command = Command::new(runner);
            command.arg(exe);
            command
        }
        None => Command::new(exe),
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
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        Bin {
            child,
            lines,
            stderr: Vec::new(),
            stdout: Some(stdout),
        }
    }

    /// Runs the binary to its end (at most [`BIN_TIMEOUT`]).
    #[track_caller]
    pub fn run(args: &[&str], dir: Option<&Path>) -> Finished {
        Bin::spawn(args, dir).wait()
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

    /// Waits until it is running and returns the address it listens on (it logs
    /// the bound address, so `--listen 127.0.0.1:0` works).
    #[track_caller]
    pub fn wait_until_running(&mut self) -> SocketAddr {
        let line = self.wait_for_line("listen on ");
        let after = &line[line.find("listen on ").expect("found above") + "listen on ".len()..];
        let addr = after
            .split_whitespace()
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        // Logged after the signal handler is installed.
        self.wait_for_line("running; press Ctrl-C to stop");
        addr
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

    /// Waits for the exit (at most [`BIN_TIMEOUT`], then kills it and fails).
    #[track_caller]
    pub fn wait(mut self) -> Finished {
        let deadline = Instant::now() + BIN_TIMEOUT;
        let status = loop {
            match self.child.try_wait().expect("try_wait") {
                Some(status) => break status,
                None if Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    self.collect_stderr();
                    panic!(
                        "forza-relay did not exit within {BIN_TIMEOUT:?}; stderr:\n{}",
                        self.stderr.join("\n")
                    );
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        self.collect_stderr();
        let stdout = self
            .stdout
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        Finished {
            status,
            stdout,
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
