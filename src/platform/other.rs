//! Linux, macOS and the rest: programs run from a terminal that stays open.

use std::io;

/// Nothing to do: the terminal keeps the error on screen.
pub fn hold_console_on_error(_started_without_arguments: bool) {}

/// Nothing to do: Unix reports a closed port's ICMP only on the connected socket
/// that sent to it, as one error, and the socket stays usable.
pub fn prepare_udp_socket(_socket: &socket2::Socket) -> io::Result<()> {
    Ok(())
}

/// Nothing to do: without `SO_REUSEADDR`/`SO_REUSEPORT` on both sockets, which
/// forza-relay never sets, a second program cannot bind the listener's port.
pub fn prepare_listener(_socket: &socket2::Socket) -> io::Result<()> {
    Ok(())
}

/// Nothing to do: closing a terminal sends SIGHUP, which the Ctrl-C handler
/// (the `ctrlc` crate's `termination` feature) already turns into a stop.
pub fn on_console_close(_stop: impl Fn() + Send + Sync + 'static) -> io::Result<()> {
    Ok(())
}

/// Nothing waits for it here.
pub fn summary_printed() {}
