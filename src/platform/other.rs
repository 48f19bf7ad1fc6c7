//! Linux, macOS and the rest: programs run from a terminal that stays open.

use std::io;

use super::Signal;

/// Nothing to do: the terminal keeps the error on screen.
pub fn hold_console_on_error(_started_without_arguments: bool) {}

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
