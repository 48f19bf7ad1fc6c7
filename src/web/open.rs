//! Opens the page in the default browser, for a start by double-click (no
//! arguments, a `forza-relay.toml` found; issue 14). Each platform's opener is
//! chosen at compile time: Windows `cmd /C start "" URL`, macOS `open`, other
//! Unixes `xdg-open` where it is installed; elsewhere nothing is opened. The
//! program named by [`OPENER_VAR`], when set, is run instead (tests, and users
//! who want another browser). Never fatal: what fails is logged, and the relay
//! runs on.

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use log::{info, warn};

/// An environment variable naming the program that opens the page (run with
/// the URL as its one argument) instead of the platform's.
pub const OPENER_VAR: &str = "FORZA_RELAY_OPENER";

/// The platform's way to open `url` in the default browser, if it has one.
#[cfg(windows)]
fn platform_opener(url: &str) -> Option<Command> {
    // `start`'s first quoted argument is a window title: "" keeps the URL
    // from being taken for one. The URL holds no character cmd treats
    // specially (`&`, `|`, `^`, `<`, `>`): an address, a port, `?token=` hex.
    let mut command = Command::new("cmd");
    command.args(["/C", "start", "", url]);
    Some(command)
}

/// The platform's way to open `url` in the default browser, if it has one.
#[cfg(target_os = "macos")]
fn platform_opener(url: &str) -> Option<Command> {
    let mut command = Command::new("open");
    command.arg(url);
    Some(command)
}

/// The platform's way to open `url` in the default browser, if it has one:
/// `xdg-open`, where it is installed (a server often has none).
#[cfg(all(unix, not(target_os = "macos")))]
fn platform_opener(url: &str) -> Option<Command> {
    let path = std::env::var_os("PATH")?;
    let program = std::env::split_paths(&path)
        .map(|dir| dir.join("xdg-open"))
        .find(|p| p.is_file())?;
    let mut command = Command::new(program);
    command.arg(url);
    Some(command)
}

/// No known way on this platform.
#[cfg(not(any(windows, unix)))]
fn platform_opener(_url: &str) -> Option<Command> {
    None
}

/// The command that opens `url`: [`OPENER_VAR`]'s program, else the
/// platform's.
fn opener(url: &str, chosen: Option<OsString>) -> Option<Command> {
    match chosen.filter(|p| !p.is_empty()) {
        Some(program) => {
            let mut command = Command::new(program);
            command.arg(url);
            Some(command)
        }
        None => platform_opener(url),
    }
}

/// How long [`page_and_wait`] waits for the opener.
pub const OPEN_WAIT: Duration = Duration::from_secs(5);

/// Opens `url` in the default browser, on a thread of its own (the opener is
/// waited for there, so it leaves no zombie behind); says so in the log.
pub fn page(url: &str) {
    let shown = url.to_owned();
    let spawned = std::thread::Builder::new()
        .name("web-open".to_owned())
        .spawn(move || open(&shown, None));
    if let Err(e) = spawned {
        warn!("cannot open {url} in the browser: {e}");
    }
}

/// Opens `url` in the default browser and waits (at most [`OPEN_WAIT`]) for
/// the opener to end: for a program about to exit, whose threads end with it.
pub fn page_and_wait(url: &str) {
    open(url, Some(OPEN_WAIT));
}

/// Runs the opener of `url` and waits for it: until it ends, or at most
/// `wait` (then it goes on by itself).
fn open(url: &str, wait: Option<Duration>) {
    let Some(mut command) = opener(url, std::env::var_os(OPENER_VAR)) else {
        info!("open {url} in a browser to see the page");
        return;
    };
    info!("opening {url} in the browser");
    let program = command.get_program().to_string_lossy().into_owned();
    let spawned = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            warn!("cannot run {program} to open {url}: {e}; open it in a browser");
            return;
        }
    };
    let deadline = wait.map(|w| Instant::now() + w);
    let ended = loop {
        match deadline {
            None => break child.wait().ok(),
            Some(deadline) => match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => break None,
            },
        }
    };
    if let Some(status) = ended.filter(|s| !s.success()) {
        warn!("{program} could not open {url} ({status}): open it in a browser");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chosen_opener_gets_the_url_as_its_one_argument() {
        let c = opener("http://127.0.0.1:5480/", Some("my-browser".into())).unwrap();
        assert_eq!(c.get_program(), "my-browser");
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, ["http://127.0.0.1:5480/"]);
    }

    #[cfg(windows)]
    #[test]
    fn windows_starts_the_url_with_an_empty_title() {
        let c = opener("http://127.0.0.1:5480/", None).unwrap();
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, ["/C", "start", "", "http://127.0.0.1:5480/"]);
    }
}
