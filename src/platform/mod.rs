//! Platform quirks, one file per platform chosen at compile time.
//!
//! Every function exists on every platform, so callers need no `#[cfg]`; where a
//! platform has nothing to do, its function does nothing.

#[cfg_attr(windows, path = "windows.rs")]
#[cfg_attr(not(windows), path = "other.rs")]
mod imp;

pub use imp::{
    colours_on_stderr, console_of_its_own, console_window_shown, create_private_dir, hide_console,
    hold_console_on_error, is_file_busy, on_signals, prepare_listener, prepare_udp_socket,
    private_file, state_dir, summary_printed,
};

/// What the user or the system asks of the program, whatever the platform
/// calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Stop, with the final summary: SIGINT (Ctrl-C) and SIGTERM on Unix;
    /// Ctrl-C, Ctrl-Break, the console window closing, log-off and shut-down
    /// on Windows.
    Stop,
    /// Read the configuration again: SIGHUP on Unix.
    Reload,
}
