//! Linux, macOS and the rest: programs run from a terminal that stays open.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::Signal;

/// Nothing to do: the terminal keeps the error on screen.
pub fn hold_console_on_error(_started_without_arguments: bool) {}

/// Windows only: a console window of the program's own, which it lets go of
/// to live in the tray. Elsewhere a terminal is the user's.
pub fn console_of_its_own() -> bool {
    false
}

/// Windows only: whether the program's console has a window on screen.
pub fn console_window_shown() -> bool {
    false
}

/// Windows only (see [`console_of_its_own`]).
pub fn hide_console() -> std::io::Result<()> {
    Ok(())
}

/// Nothing to do: Unix reports a closed port's ICMP only on the connected socket
/// that sent to it, as one error, and the socket stays usable.
pub fn prepare_udp_socket(_socket: &socket2::Socket) -> io::Result<()> {
    Ok(())
}

/// Never: on Unix a rename over a file that another program has open
/// succeeds, and an error is the answer.
pub fn is_file_busy(_error: &io::Error) -> bool {
    false
}

/// Nothing to do: without `SO_REUSEADDR`/`SO_REUSEPORT` on both sockets, which
/// forza-relay never sets, a second program cannot bind the listener's port.
pub fn prepare_listener(_socket: &socket2::Socket) -> io::Result<()> {
    Ok(())
}

/// Calls `on` on a thread of its own for each SIGINT or SIGTERM ([`Signal::Stop`])
/// and SIGHUP ([`Signal::Reload`]), from now until the program ends. None of
/// them ends the program by itself any more; what they do is the app's
/// ([`crate::app::Signals`]), which also tells a SIGHUP from a closed terminal.
/// Call it once.
#[cfg(unix)]
pub fn on_signals(on: impl Fn(Signal) + Send + Sync + 'static) -> io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("signals".to_owned())
        .spawn(move || {
            for signal in signals.forever() {
                on(if signal == SIGHUP {
                    Signal::Reload
                } else {
                    Signal::Stop
                });
            }
        })?;
    Ok(())
}

/// No signals to catch on this platform: the program stops when it is killed.
#[cfg(not(unix))]
pub fn on_signals(_on: impl Fn(Signal) + Send + Sync + 'static) -> io::Result<()> {
    Ok(())
}

/// Nothing waits for it here.
pub fn summary_printed() {}

/// The user's folder for what forza-relay keeps between runs: on macOS
/// `~/Library/Application Support/forza-relay`; elsewhere the XDG state folder,
/// `$XDG_STATE_HOME/forza-relay` (default `~/.local/state/forza-relay`).
/// `None` without a home.
pub fn state_dir() -> Option<PathBuf> {
    let home = || {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
    };
    if cfg!(target_os = "macos") {
        return home().map(|h| h.join("Library/Application Support/forza-relay"));
    }
    match std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("forza-relay")),
        None => home().map(|h| h.join(".local/state/forza-relay")),
    }
}

/// Creates `dir` (and its parents) if needed, and makes it the user's alone
/// (mode 0700): what is kept in it is a secret.
#[cfg(unix)]
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // A folder made earlier (or by hand) with wider rights is narrowed.
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Creates `dir` (and its parents) if needed.
#[cfg(not(unix))]
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// A new file at `path` that only the user can read (mode 0600); fails if
/// one is there.
#[cfg(unix)]
pub fn private_file(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// A new file at `path`; fails if one is there.
#[cfg(not(unix))]
pub fn private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Whether the log (stderr) goes to a terminal, which takes ANSI colours.
pub fn colours_on_stderr() -> bool {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal()
}
