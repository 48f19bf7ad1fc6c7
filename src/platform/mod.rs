//! Platform quirks, one file per platform chosen at compile time.
//!
//! Every function exists on every platform, so callers need no `#[cfg]`; where a
//! platform has nothing to do, its function does nothing.

#[cfg_attr(windows, path = "windows.rs")]
#[cfg_attr(not(windows), path = "other.rs")]
mod imp;

pub use imp::{
    hold_console_on_error, on_console_close, prepare_listener, prepare_udp_socket, summary_printed,
};
