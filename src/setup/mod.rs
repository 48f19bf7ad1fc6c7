//! Getting set up: the known tools ([`tools`], from `src/tools.toml`), the UDP
//! sockets on this computer and who holds them ([`finder`]), `doctor`'s checks
//! ([`doctor`]), starting at login ([`autostart`]), and the three subcommands'
//! glue ([`command`]).
//!
//! Per-OS code sits in its own files, chosen with `#[cfg]`: `windows.rs` and
//! `other.rs` for `doctor`'s platform checks (the parsers they use,
//! `windows_text.rs`, build everywhere so they are tested everywhere), and
//! `autostart/{linux,macos,windows}.rs`.

pub mod autostart;
pub mod command;
pub mod doctor;
pub mod finder;
pub mod running;
pub mod tools;
pub mod windows_text;

#[cfg_attr(windows, path = "windows.rs")]
#[cfg_attr(not(windows), path = "other.rs")]
mod platform;

pub use finder::{blocker, holder, Holder};
