//! Linux, macOS and the rest: programs run from a terminal that stays open.

/// Nothing to do: the terminal keeps the error on screen.
pub fn hold_console_on_error(_started_without_arguments: bool) {}
