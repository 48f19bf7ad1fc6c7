//! Windows: most users start forza-relay by double-clicking it.

use std::io::{BufRead, IsTerminal, Write};

/// A double-clicked program's console window closes the moment it exits, so an
/// error (a config mistake, the port in use) would flash by unread: when started
/// without arguments from a console, wait for Enter before exiting.
pub fn hold_console_on_error(started_without_arguments: bool) {
    if started_without_arguments && std::io::stdin().is_terminal() {
        eprint!("\nPress Enter to close this window.");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
}
