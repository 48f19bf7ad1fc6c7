//! Windows: most users start forza-relay by double-clicking it.
//!
//! - Winsock turns a closed port's ICMP "port unreachable" (and "TTL expired")
//!   into `WSAECONNRESET` (`WSAENETRESET`) on a later call on the socket, and its
//!   `send` documentation says the socket is then "no longer usable":
//!   [`prepare_udp_socket`] turns both reports off, as Go's `net` package does for
//!   every UDP socket.
//! - Without `SO_EXCLUSIVEADDRUSE`, a program that sets `SO_REUSEADDR` can bind
//!   the listener's port too and take some of the game's packets:
//!   [`prepare_listener`] asks for the port alone.
//! - Ctrl-C and Ctrl-Break, and closing the console window (or logging off, or
//!   shutting down), come to a console handler ([`on_signals`]), which asks the
//!   program to stop. Windows ends the process when the handler of a close
//!   event returns (or after about 5 s), so that handler waits, bounded, for
//!   [`summary_printed`] before returning.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, IsTerminal, Write};
use std::os::windows::io::AsRawSocket;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use windows_sys::core::BOOL;
use windows_sys::Win32::Networking::WinSock::{
    setsockopt, WSAGetLastError, WSAIoctl, SIO_UDP_CONNRESET, SIO_UDP_NETRESET, SOCKET,
    SOCKET_ERROR, SOL_SOCKET, SO_EXCLUSIVEADDRUSE,
};
use windows_sys::Win32::System::Console::{
    FreeConsole, GetConsoleProcessList, GetConsoleWindow, SetConsoleCtrlHandler, CTRL_BREAK_EVENT,
    CTRL_CLOSE_EVENT, CTRL_C_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT,
};

use super::Signal;

const TRUE: BOOL = 1;
const FALSE: BOOL = 0;

/// How long the close handler waits for the final summary. Windows ends the
/// process about 5 s after the event, whatever the handler does.
const SUMMARY_WAIT: Duration = Duration::from_secs(3);
/// After the summary, how long the handler lets `main` exit with its own code
/// before returning (which lets Windows end the process).
const EXIT_WAIT: Duration = Duration::from_secs(1);

/// Whether a rename over a file failed because another program has it open
/// without sharing its deletion — an editor saving, the search indexer, a
/// virus scanner looking at what was just written — which lets go of it in
/// moments: `ERROR_ACCESS_DENIED` (5) or `ERROR_SHARING_VIOLATION` (32).
pub fn is_file_busy(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(5 | 32))
}

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

/// Whether the program shows its log in a console window of its own: Windows
/// made the window for it (a double-click, a shortcut, the login entry), no
/// other program shares it (not a terminal a user typed the command in), and
/// the log is not redirected. Such a window closes when it is let go of
/// ([`hide_console`]), and the program lives in the tray.
pub fn console_of_its_own() -> bool {
    let mut ids = [0u32; 2];
    // SAFETY: `ids` has room for the number of ids given as its length.
    let attached = unsafe { GetConsoleProcessList(ids.as_mut_ptr(), ids.len() as u32) };
    attached == 1 && std::io::stderr().is_terminal()
}

/// Whether the program's console has a window (none when it was started
/// with `CREATE_NO_WINDOW`, as `forza-relayw.exe` starts it, or has none).
pub fn console_window_shown() -> bool {
    // SAFETY: no arguments; it returns the window's handle or null.
    !unsafe { GetConsoleWindow() }.is_null()
}

/// Lets go of the console window, which then closes ([`console_of_its_own`]:
/// no other program shares it). What is printed from then on goes nowhere.
pub fn hide_console() -> io::Result<()> {
    // SAFETY: no arguments; it detaches the calling process from its console.
    if unsafe { FreeConsole() } == FALSE {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Turns off `SIO_UDP_CONNRESET` and `SIO_UDP_NETRESET` on `socket`, so an ICMP
/// message about an earlier datagram never fails a later call on it. Both are
/// tried; the error names the first that failed.
pub fn prepare_udp_socket(socket: &socket2::Socket) -> io::Result<()> {
    let off: BOOL = FALSE;
    let mut first_error = None;
    for (name, code) in [
        ("SIO_UDP_CONNRESET", SIO_UDP_CONNRESET),
        ("SIO_UDP_NETRESET", SIO_UDP_NETRESET),
    ] {
        let mut returned = 0u32;
        // SAFETY: the socket is open for the duration of the call; the input is
        // one BOOL that outlives it; no output buffer, no overlapped I/O.
        let rc = unsafe {
            WSAIoctl(
                socket.as_raw_socket() as SOCKET,
                code,
                std::ptr::from_ref(&off).cast(),
                size_of::<BOOL>() as u32,
                std::ptr::null_mut(),
                0,
                &mut returned,
                std::ptr::null_mut(),
                None,
            )
        };
        if rc == SOCKET_ERROR && first_error.is_none() {
            let e = last_socket_error();
            first_error = Some(io::Error::new(e.kind(), format!("{name}: {e}")));
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Sets `SO_EXCLUSIVEADDRUSE` on the listener (before `bind`), so no other
/// program can bind its port while it runs.
pub fn prepare_listener(socket: &socket2::Socket) -> io::Result<()> {
    let on: BOOL = TRUE;
    // SAFETY: the socket is open; the option value is one BOOL that outlives
    // the call, and its length is passed.
    let rc = unsafe {
        setsockopt(
            socket.as_raw_socket() as SOCKET,
            SOL_SOCKET,
            SO_EXCLUSIVEADDRUSE,
            std::ptr::from_ref(&on).cast(),
            size_of::<BOOL>() as i32,
        )
    };
    if rc == SOCKET_ERROR {
        return Err(last_socket_error());
    }
    Ok(())
}

fn last_socket_error() -> io::Error {
    // SAFETY: no arguments; reads this thread's last Winsock error.
    io::Error::from_raw_os_error(unsafe { WSAGetLastError() })
}

/// What the console handler calls.
static ON_SIGNAL: OnceLock<Box<dyn Fn(Signal) + Send + Sync>> = OnceLock::new();
/// Set by [`summary_printed`]; the close handler waits on it.
static PRINTED: Mutex<bool> = Mutex::new(false);
static PRINTED_CHANGED: Condvar = Condvar::new();

/// Calls `on` with [`Signal::Stop`] for Ctrl-C, Ctrl-Break, the console window
/// closing, log-off and shut-down. For the last three it then holds the process
/// until [`summary_printed`] is called, at most a few seconds. Call it once.
pub fn on_signals(on: impl Fn(Signal) + Send + Sync + 'static) -> io::Result<()> {
    ON_SIGNAL
        .set(Box::new(on))
        .map_err(|_| io::Error::other("on_signals was already called"))?;
    // SAFETY: `on_control` is a plain function that lives as long as the program.
    if unsafe { SetConsoleCtrlHandler(Some(on_control), TRUE) } == FALSE {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Tells a waiting close handler that the final summary is out.
pub fn summary_printed() {
    let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
    *printed = true;
    PRINTED_CHANGED.notify_all();
}

/// The console control handler; Windows runs it on a thread of its own.
unsafe extern "system" fn on_control(event: u32) -> BOOL {
    let closing = matches!(
        event,
        CTRL_CLOSE_EVENT | CTRL_LOGOFF_EVENT | CTRL_SHUTDOWN_EVENT
    );
    if !closing && !matches!(event, CTRL_C_EVENT | CTRL_BREAK_EVENT) {
        return FALSE;
    }
    if let Some(on) = ON_SIGNAL.get() {
        on(Signal::Stop);
    }
    if !closing {
        // Handled: the program stops by itself, with its summary.
        return TRUE;
    }
    let printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
    let (printed, _) = PRINTED_CHANGED
        .wait_timeout_while(printed, SUMMARY_WAIT, |printed| !*printed)
        .unwrap_or_else(|e| e.into_inner());
    if *printed {
        drop(printed);
        // `main` is returning its exit code; its exit ends this thread too.
        std::thread::sleep(EXIT_WAIT);
    }
    TRUE
}

/// The user's folder for what forza-relay keeps between runs:
/// `%LOCALAPPDATA%\forza-relay`. `None` when the variable is not set.
pub fn state_dir() -> Option<PathBuf> {
    std::env::var_os("LOCALAPPDATA")
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join("forza-relay"))
}

/// Creates `dir` (and its parents) if needed. The user's local application
/// data is already theirs: a folder made in it inherits an access list that
/// lets in only the user, SYSTEM and the administrators.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// A new file at `path` (private by its folder's access list, see
/// [`create_private_dir`]); fails if one is there.
pub fn private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Whether the log (stderr) goes to a console that takes ANSI colours: its
/// virtual-terminal mode is turned on (Windows 10 and later) or the terminal
/// says it has them.
pub fn colours_on_stderr() -> bool {
    std::io::stderr().is_terminal() && ratatui::crossterm::ansi_support::supports_ansi()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    // One test: the handler's state is process-wide.
    #[test]
    fn ctrl_c_stops_and_closing_stops_and_returns_only_after_the_summary() {
        let stops = Arc::new(AtomicUsize::new(0));
        let summary_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, p) = (stops.clone(), summary_out.clone());
        on_signals(move |signal| {
            assert_eq!(signal, Signal::Stop);
            if s.fetch_add(1, Ordering::SeqCst) == 1 {
                // Like main: the loop ends, the summary is printed, then the notice.
                let p = p.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    p.store(true, Ordering::SeqCst);
                    summary_printed();
                });
            }
        })
        .expect("the first registration");
        assert!(on_signals(|_| {}).is_err(), "a second registration");

        // SAFETY: called as Windows would, on a thread of its own.
        assert_eq!(
            unsafe { on_control(CTRL_C_EVENT) },
            TRUE,
            "Ctrl-C is handled"
        );
        assert_eq!(stops.load(Ordering::SeqCst), 1);
        assert!(!summary_out.load(Ordering::SeqCst), "Ctrl-C does not wait");

        assert_eq!(unsafe { on_control(CTRL_CLOSE_EVENT) }, TRUE);
        assert_eq!(stops.load(Ordering::SeqCst), 2);
        assert!(
            summary_out.load(Ordering::SeqCst),
            "returned before the summary"
        );
    }
}
