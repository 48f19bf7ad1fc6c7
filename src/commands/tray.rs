//! `run` as a Windows program (issue 32): started by a double-click, a
//! shortcut or the login entry, in a console window of its own, it shows its
//! tray icon, writes its log to the state folder and lets the window go. From
//! a terminal nothing changes. The icon's menu is done here, where the page,
//! the login entry and the files are all in reach.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::{info, warn};

use crate::platform;
use crate::report::query;
use crate::setup::{autostart, running};
use crate::tray::{Action, Offer, Tray};

/// How long the page's link is asked of the relay.
const ASK_WAIT: Duration = Duration::from_secs(2);

/// Whether `run` goes to the tray: started by `forza-relayw.exe` (the
/// shortcut, the login entry), or in a console window of its own (a
/// double-click on forza-relay.exe).
pub(super) fn wanted() -> bool {
    std::env::var_os(crate::tray::TRAY_VAR).is_some() || platform::console_of_its_own()
}

/// The icon of the relay listening on `listen`, which runs `file` and serves
/// its page when `page`.
pub(super) fn icon(listen: SocketAddr, file: Option<PathBuf>, page: bool) -> Tray {
    let file_for_offer = file.clone();
    Tray::new(
        move || Offer {
            page,
            at_login: file_for_offer
                .as_ref()
                .and_then(|_| autostart::status().ok().map(|said| autostart::is_on(&said))),
            config_file: file_for_offer.is_some(),
        },
        move |action| act(action, listen, file.as_deref()),
    )
}

/// Does a menu entry (Quit is the app's own).
fn act(action: Action, listen: SocketAddr, file: Option<&Path>) {
    match action {
        Action::OpenPage => match query::ask(listen, ASK_WAIT) {
            Ok(answer) => match running::page_link(&answer) {
                Some(link) => crate::web::open::page(&link),
                None => warn!("the page is not served ([web] addr is off)"),
            },
            Err(e) => warn!("the page's address could not be asked of the relay: {e}"),
        },
        Action::StartAtLogin => {
            let Some(file) = file else { return };
            let on = autostart::status().is_ok_and(|said| autostart::is_on(&said));
            let done = if on {
                autostart::off()
            } else {
                autostart::Launch::new(file)
                    .and_then(|launch| autostart::on(&launch, autostart::Start::AtNextLogin))
            };
            match done {
                Ok(said) => {
                    for line in said {
                        info!("{line}");
                    }
                }
                Err(e) => warn!("start at login: {e}"),
            }
        }
        Action::OpenFolder => {
            let Some(folder) = file.and_then(Path::parent) else {
                return;
            };
            crate::web::open::page(&folder.display().to_string());
        }
        // The app's own (see `Tray`).
        Action::Quit => {}
    }
}

/// Before the relay starts: the log goes to the state folder's file as well
/// (the lines so far, then every line). Its path; `None` (said) when it can't
/// be kept, and then the console window must stay.
pub(super) fn keep_log() -> Option<PathBuf> {
    let Some(folder) = crate::state::folder() else {
        warn!("no state folder to keep the log in: the console window stays");
        return None;
    };
    match crate::state::log_file(&folder) {
        Ok((path, mut file)) => {
            let (_, recent) = crate::logging::recent();
            for line in recent {
                let _ = writeln!(file, "{line}");
            }
            crate::logging::also_to(file);
            Some(path)
        }
        Err(e) => {
            warn!(
                "the log can't be kept in {} ({e}): the console window stays",
                folder.display()
            );
            None
        }
    }
}

/// Once the relay runs and its icon is shown: the console window is let go
/// of (it closes); the log is in `log`.
pub(super) fn leave_console(log: &Path) {
    info!("{}; the log is {}", crate::tray::IN_THE_TRAY, log.display());
    if !platform::console_window_shown() {
        info!("no console window is shown");
    }
    // What was logged reaches the file and the window before it closes.
    crate::logging::flush();
    if let Err(e) = platform::hide_console() {
        warn!("the console window could not be let go of: {e}");
    }
}
