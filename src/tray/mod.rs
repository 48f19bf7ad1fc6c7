//! The tray icon's face (issue 32): what the icon shows — a colour and a
//! tooltip — and its menu, worked out from the relay's snapshots, the same the
//! page reads. The same everywhere and tested everywhere; the icon itself,
//! which draws this, is the platform's.
//!
//! The tooltip says what the relay is doing in the words of the page: frames
//! received a second, or for how long nothing came, and every destination
//! that is refused or failing. Windows keeps [`TOOLTIP_MAX`] characters of it,
//! so it is cut there, on a whole name.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use log::{info, warn};

use crate::app::{Attach, Failure, Observer};
use crate::counters::Status;
use crate::report::Snapshot;

#[cfg(windows)]
mod windows;

/// Set (to anything) in the environment of `run` by `forza-relayw.exe`, the
/// Windows starter of the Start-menu shortcut and the login entry: the relay
/// goes to the tray whatever its console (it has none to show).
pub const TRAY_VAR: &str = "FORZA_RELAY_TRAY";

/// The words of the line the relay logs once its icon is shown and its log is
/// in its file: the starter stops watching for a failed start there.
pub const IN_THE_TRAY: &str = "in the tray from now on";

/// The characters of a tooltip Windows keeps (`NOTIFYICONDATAW`'s `szTip` is
/// 128 UTF-16 units with its terminator).
pub const TOOLTIP_MAX: usize = 127;

/// The icon's colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// Frames arrive, and every destination takes them.
    Green,
    /// Frames arrive, and a destination is refused or failing.
    Amber,
    /// Nothing arrives: the game is not sending, or sends elsewhere.
    Grey,
}

/// What the icon shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    pub colour: Colour,
    pub tooltip: String,
}

/// Follows the relay's snapshots (one a second or so) and says what the icon
/// shows for each: the rate is the count received between two of them.
#[derive(Debug, Default)]
pub struct Follow {
    /// The last snapshot's time since the start and count received.
    last: Option<(Duration, u64)>,
    /// The time since the start at which the count last grew.
    grew_at: Option<Duration>,
}

impl Follow {
    /// What the icon shows for `snapshot`, the newest.
    pub fn look(&mut self, snapshot: &Snapshot) -> Look {
        let received = snapshot.input.received;
        let now = snapshot.elapsed;
        let rate = match self.last {
            Some((at, before)) if now > at && received > before => {
                Some((received - before) as f64 / (now - at).as_secs_f64())
            }
            // The first snapshot: the average since the start.
            None if received > 0 && !now.is_zero() => Some(received as f64 / now.as_secs_f64()),
            _ => None,
        };
        if rate.is_some() {
            self.grew_at = Some(now);
        }
        self.last = Some((now, received));
        let failing: Vec<String> = snapshot
            .destinations
            .iter()
            .filter_map(|d| match d.status {
                Status::Refused => Some(format!("{} refused", d.name)),
                Status::Failing => Some(format!("{} failing", d.name)),
                Status::Ok | Status::Idle => None,
            })
            .collect();
        let doing = match (rate, self.grew_at) {
            (Some(rate), _) => format!("receiving {rate:.0}/s"),
            (None, Some(at)) => format!(
                "nothing received for {} s",
                now.saturating_sub(at).as_secs()
            ),
            (None, None) => format!("nothing received yet on port {}", snapshot.listen.port()),
        };
        let colour = match (rate.is_some(), failing.is_empty()) {
            (false, _) => Colour::Grey,
            (true, true) => Colour::Green,
            (true, false) => Colour::Amber,
        };
        let mut tooltip = format!("forza-relay: {doing}");
        if !failing.is_empty() {
            tooltip.push('\n');
            tooltip += &cut_to_names(&failing, TOOLTIP_MAX - tooltip.chars().count());
        }
        Look { colour, tooltip }
    }
}

/// `names` joined with ", " in at most `room` characters: the names that fit
/// whole, then "and N more".
fn cut_to_names(names: &[String], room: usize) -> String {
    let mut text = String::new();
    for (i, name) in names.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let left = names.len() - i - 1;
        let more = if left == 0 {
            String::new()
        } else {
            format!(", and {left} more")
        };
        let with = text.chars().count() + sep.len() + name.chars().count();
        // This name fits, with room for what says how many are left.
        if with + more.len() <= room || (left == 0 && with <= room) {
            text += sep;
            text += name;
            continue;
        }
        let rest = names.len() - i;
        let tail = if i == 0 {
            format!(
                "{rest} destination{} failing",
                if rest == 1 { "" } else { "s" }
            )
        } else {
            format!(", and {rest} more")
        };
        text += &tail;
        return text.chars().take(room).collect();
    }
    text
}

/// What a menu entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Opens the relay's page in the browser.
    OpenPage,
    /// Turns starting at login on or off (`autostart`).
    StartAtLogin,
    /// Opens the folder holding the configuration file.
    OpenFolder,
    /// Stops the relay as Ctrl-C does, with its final summary.
    Quit,
}

/// One entry of the menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub action: Action,
    pub label: &'static str,
    /// Whether it can be chosen now (a greyed entry says why it can't).
    pub enabled: bool,
    /// For an entry that is on or off: whether it is on.
    pub checked: Option<bool>,
}

/// What the menu can offer: whether a page is served, whether the relay
/// starts at login (`None`: that can't be set here), and whether there is a
/// configuration file (whose folder can be opened, and which a login entry
/// starts the relay with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    pub page: bool,
    pub at_login: Option<bool>,
    pub config_file: bool,
}

/// The menu, in order.
pub fn menu(offer: Offer) -> Vec<Entry> {
    vec![
        Entry {
            action: Action::OpenPage,
            label: "Open the page",
            enabled: offer.page,
            checked: None,
        },
        Entry {
            action: Action::StartAtLogin,
            label: "Start at login",
            enabled: offer.config_file && offer.at_login.is_some(),
            checked: Some(offer.at_login == Some(true)),
        },
        Entry {
            action: Action::OpenFolder,
            label: "Open the configuration folder",
            enabled: offer.config_file,
            checked: None,
        },
        Entry {
            action: Action::Quit,
            label: "Quit",
            enabled: true,
            checked: None,
        },
    ]
}

/// What the icon asks of the rest of the program, on its own thread.
pub struct Hooks {
    /// The relay's newest snapshot (`None`: it did not answer in time).
    pub snapshot: Box<dyn FnMut() -> Option<Snapshot> + Send>,
    /// What the menu can offer now.
    pub offer: Box<dyn FnMut() -> Offer + Send>,
    /// Does what a menu entry says.
    pub act: Box<dyn FnMut(Action) + Send>,
}

/// The tray icon as an observer of the app: shown while the relay runs, for
/// a program that let go of its console window (Windows: started by a
/// double-click, a shortcut or the login entry). Where no icon can be shown
/// it says so once and the relay runs on.
pub struct Tray {
    offer: Option<Box<dyn FnMut() -> Offer + Send>>,
    act: Option<Box<dyn FnMut(Action) + Send>>,
    /// Set once the icon is shown: only then may the console window go.
    is_shown: Arc<AtomicBool>,
    #[cfg(windows)]
    shown: Option<windows::Shown>,
}

impl Tray {
    /// An icon whose menu offers what `offer` says and does the entries but
    /// Quit with `act` (Quit stops the app, as Ctrl-C does).
    pub fn new(
        offer: impl FnMut() -> Offer + Send + 'static,
        act: impl FnMut(Action) + Send + 'static,
    ) -> Tray {
        Tray {
            offer: Some(Box::new(offer)),
            act: Some(Box::new(act)),
            is_shown: Arc::new(AtomicBool::new(false)),
            #[cfg(windows)]
            shown: None,
        }
    }

    /// Whether the icon is shown, from the app's start on: a program without
    /// one keeps its console window (else nothing would show it runs).
    pub fn shown_flag(&self) -> Arc<AtomicBool> {
        self.is_shown.clone()
    }
}

/// How long the icon's thread waits for the relay's snapshot.
const SNAPSHOT_WAIT: Duration = Duration::from_millis(500);

impl Observer for Tray {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        let control = relay.control();
        let stop = relay.stopper();
        let mut act = self.act.take().expect("started once");
        let hooks = Hooks {
            snapshot: Box::new(move || control.snapshot(SNAPSHOT_WAIT)),
            offer: self.offer.take().expect("started once"),
            act: Box::new(move |action| match action {
                Action::Quit => {
                    info!("Quit chosen in the tray: stopping");
                    stop();
                }
                other => act(other),
            }),
        };
        #[cfg(windows)]
        match windows::show(hooks) {
            Ok(shown) => {
                info!("the tray icon is shown: its menu opens the page and quits");
                self.shown = Some(shown);
                self.is_shown
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
            Err(e) => warn!("no tray icon ({e}): the relay runs on without it"),
        }
        #[cfg(not(windows))]
        {
            drop(hooks);
            warn!("no tray icon on this platform: the relay runs on");
        }
        Ok(())
    }

    fn finish(self: Box<Self>, _last: &mut Snapshot) -> Result<(), Failure> {
        #[cfg(windows)]
        if let Some(shown) = self.shown {
            shown.remove();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
