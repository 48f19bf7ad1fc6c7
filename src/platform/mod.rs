//! Platform quirks, one file per platform chosen at compile time.

#[cfg_attr(windows, path = "windows.rs")]
#[cfg_attr(not(windows), path = "other.rs")]
mod imp;

pub use imp::hold_console_on_error;
