//! `forza-relayw.exe`: what the Start-menu shortcut and the login entry start
//! on Windows (the `w` of `pythonw` and `javaw`). A console program such as
//! forza-relay.exe gets a console window from Windows before its first line
//! runs; this one is a Windows-subsystem program, which gets none. It starts
//! forza-relay.exe, beside it, with the same arguments, no console window
//! ([`CREATE_NO_WINDOW`]) and the relay told to go to the tray; it then waits
//! for it, so that a relay that fails to start (a configuration mistake, a
//! port taken by another program) is said in a message box instead of
//! nowhere. Once the relay says it is in the tray, its log is in its file and
//! nothing more is shown.
//!
//! Elsewhere it only says what it is for.

#![cfg_attr(windows, windows_subsystem = "windows")]

use std::process::ExitCode;

#[cfg(windows)]
fn main() -> ExitCode {
    starter::main()
}

#[cfg(not(windows))]
fn main() -> ExitCode {
    eprintln!("forza-relayw starts forza-relay in the tray on Windows; here, run forza-relay");
    ExitCode::from(2)
}

#[cfg(windows)]
mod starter {
    use std::collections::VecDeque;
    use std::io::{BufRead as _, BufReader};
    use std::os::windows::process::CommandExt as _;
    use std::process::{Command, ExitCode, Stdio};

    use forza_relay::tray::{IN_THE_TRAY, TRAY_VAR};
    use windows_sys::Win32::System::Threading::CREATE_NO_WINDOW;
    use windows_sys::Win32::UI::WindowsAndMessaging::{MessageBoxW, MB_ICONERROR, MB_OK};

    /// The lines of a failed start the message box shows (its last ones).
    const SHOWN_LINES: usize = 12;

    pub fn main() -> ExitCode {
        let relay = match std::env::current_exe() {
            Ok(exe) => exe.with_file_name("forza-relay.exe"),
            Err(e) => return failed(&format!("cannot find where forza-relayw.exe is: {e}")),
        };
        let started = Command::new(&relay)
            .args(std::env::args_os().skip(1))
            .env(TRAY_VAR, "1")
            .creation_flags(CREATE_NO_WINDOW)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match started {
            Ok(child) => child,
            Err(e) => return failed(&format!("cannot start {}: {e}", relay.display())),
        };
        // The log's lines until the relay is in the tray; then only read, so
        // that the relay never waits on a full pipe.
        let mut last = VecDeque::with_capacity(SHOWN_LINES);
        let mut in_tray = false;
        if let Some(stderr) = child.stderr.take() {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if in_tray {
                    continue;
                }
                in_tray = line.contains(IN_THE_TRAY);
                if last.len() == SHOWN_LINES {
                    last.pop_front();
                }
                last.push_back(line);
            }
        }
        let code = match child.wait() {
            Ok(status) => status.code().unwrap_or(1),
            Err(e) => return failed(&format!("cannot wait for {}: {e}", relay.display())),
        };
        if code != 0 && !in_tray {
            let lines: Vec<String> = last.into_iter().collect();
            failed(&format!(
                "forza-relay stopped at its start (exit code {code}):\n\n{}",
                lines.join("\n")
            ));
        }
        ExitCode::from(u8::try_from(code).unwrap_or(1))
    }

    /// Says `text` in a message box (the only place this program can say it).
    fn failed(text: &str) -> ExitCode {
        let wide = |s: &str| s.encode_utf16().chain([0]).collect::<Vec<u16>>();
        let (text, caption) = (wide(text), wide("forza-relay"));
        // SAFETY: both strings are NUL-terminated UTF-16 that outlive the call;
        // no owner window.
        unsafe {
            MessageBoxW(
                std::ptr::null_mut(),
                text.as_ptr(),
                caption.as_ptr(),
                MB_OK | MB_ICONERROR,
            )
        };
        ExitCode::from(1)
    }
}
