//! The notification-area icon on Windows, with tauri's `tray-icon`: a disc in
//! the colour of [`super::Follow`]'s look with its tooltip, redrawn once a
//! second, and the menu of [`super::menu`]. Windows wants the icon made, and
//! its messages handled, on one thread with a message loop: the `tray` thread,
//! ended by a `WM_QUIT` posted to it.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use tray_icon::menu::{CheckMenuItem, Menu, MenuEvent, MenuId, MenuItem, PredefinedMenuItem};
use tray_icon::{Icon, TrayIcon, TrayIconBuilder};
use windows_sys::Win32::System::Threading::GetCurrentThreadId;
use windows_sys::Win32::UI::WindowsAndMessaging::{
    DispatchMessageW, GetMessageW, PostThreadMessageW, SetTimer, TranslateMessage, MSG, WM_QUIT,
    WM_TIMER,
};

use super::{menu, Action, Colour, Follow, Hooks, Offer};

/// How often the icon looks at the relay.
const EVERY: Duration = Duration::from_secs(1);
/// How long the start waits for the icon to be made.
const MAKE_WAIT: Duration = Duration::from_secs(10);
/// How long a stop waits for the icon's thread.
const END_WAIT: Duration = Duration::from_secs(2);
/// The icon's side, in pixels (Windows scales it).
const SIDE: u32 = 32;

/// A shown icon; [`Shown::remove`] takes it away.
pub struct Shown {
    thread_id: u32,
    thread: JoinHandle<()>,
}

impl Shown {
    /// Takes the icon away and ends its thread (waiting at most [`END_WAIT`]).
    pub fn remove(self) {
        // SAFETY: posting a message to a thread id; a thread that has ended
        // makes the call fail, which changes nothing.
        unsafe { PostThreadMessageW(self.thread_id, WM_QUIT, 0, 0) };
        let deadline = std::time::Instant::now() + END_WAIT;
        while !self.thread.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.thread.is_finished() {
            let _ = self.thread.join();
        }
    }
}

/// Shows the icon on a thread of its own; the error says why it could not be
/// made (no notification area: a session without a desktop).
pub fn show(hooks: Hooks) -> io::Result<Shown> {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("tray".to_owned())
        .spawn(move || {
            let mut hooks = hooks;
            let offer = (hooks.offer)();
            let made = Made::new(offer);
            let mut made = match made {
                Ok(made) => made,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            // SAFETY: no arguments; the id of the calling thread.
            let _ = tx.send(Ok(unsafe { GetCurrentThreadId() }));
            made.run(&mut hooks);
        })?;
    match rx.recv_timeout(MAKE_WAIT) {
        Ok(Ok(thread_id)) => Ok(Shown { thread_id, thread }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        // The notification area did not answer (a desktop still starting):
        // the relay does not wait for it, and keeps its window.
        Err(mpsc::RecvTimeoutError::Timeout) => Err(io::Error::other(format!(
            "the notification area did not answer within {} s",
            MAKE_WAIT.as_secs()
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(io::Error::other(
            "the tray's thread ended before the icon was made",
        )),
    }
}

/// The icon, its menu's entries and what it shows now.
struct Made {
    icon: TrayIcon,
    entries: Vec<(MenuId, Action)>,
    at_login: CheckMenuItem,
    follow: Follow,
    colour: Option<Colour>,
}

impl Made {
    fn new(offer: Offer) -> io::Result<Made> {
        let tray_menu = Menu::new();
        let mut entries = Vec::new();
        let mut at_login = None;
        for entry in menu(offer) {
            let id = match (entry.action, entry.checked) {
                (Action::StartAtLogin, Some(checked)) => {
                    let item = CheckMenuItem::new(entry.label, entry.enabled, checked, None);
                    let id = item.id().clone();
                    tray_menu.append(&item).map_err(io::Error::other)?;
                    at_login = Some(item);
                    id
                }
                (Action::Quit, _) => {
                    tray_menu
                        .append(&PredefinedMenuItem::separator())
                        .map_err(io::Error::other)?;
                    let item = MenuItem::new(entry.label, entry.enabled, None);
                    tray_menu.append(&item).map_err(io::Error::other)?;
                    item.id().clone()
                }
                _ => {
                    let item = MenuItem::new(entry.label, entry.enabled, None);
                    tray_menu.append(&item).map_err(io::Error::other)?;
                    item.id().clone()
                }
            };
            entries.push((id, entry.action));
        }
        let icon = TrayIconBuilder::new()
            .with_tooltip("forza-relay: starting")
            .with_icon(disc(Colour::Grey)?)
            .with_menu(Box::new(tray_menu))
            .build()
            .map_err(io::Error::other)?;
        Ok(Made {
            icon,
            entries,
            at_login: at_login.expect("the menu has Start at login"),
            follow: Follow::default(),
            colour: Some(Colour::Grey),
        })
    }

    /// The message loop: a timer's tick redraws the icon, a chosen entry is
    /// done; until `WM_QUIT`.
    fn run(&mut self, hooks: &mut Hooks) {
        // SAFETY: a timer of this thread (no window, no callback): it posts
        // WM_TIMER to the thread's queue every EVERY.
        unsafe { SetTimer(std::ptr::null_mut(), 0, EVERY.as_millis() as u32, None) };
        self.tick(hooks);
        // SAFETY: MSG is plain data; zeroes are a valid value.
        let mut msg: MSG = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: `msg` is valid for writes; any window of this thread.
            let got = unsafe { GetMessageW(&mut msg, std::ptr::null_mut(), 0, 0) };
            // 0: WM_QUIT; -1: an error (nothing more will come).
            if got <= 0 {
                break;
            }
            if msg.message == WM_TIMER && msg.hwnd.is_null() {
                self.tick(hooks);
            }
            // SAFETY: `msg` was filled by GetMessageW.
            unsafe {
                TranslateMessage(&msg);
                DispatchMessageW(&msg);
            }
            // Entries chosen while the message was handled.
            while let Ok(event) = MenuEvent::receiver().try_recv() {
                if let Some(&(_, action)) = self.entries.iter().find(|(id, _)| *id == event.id) {
                    (hooks.act)(action);
                }
            }
        }
    }

    /// Redraws the icon from the relay's newest snapshot, and the menu's
    /// login entry from what is set now.
    fn tick(&mut self, hooks: &mut Hooks) {
        if let Some(snapshot) = (hooks.snapshot)() {
            let look = self.follow.look(&snapshot);
            let _ = self.icon.set_tooltip(Some(&look.tooltip));
            if self.colour != Some(look.colour) {
                if let Ok(icon) = disc(look.colour) {
                    let _ = self.icon.set_icon(Some(icon));
                    self.colour = Some(look.colour);
                }
            }
        }
        let offer = (hooks.offer)();
        self.at_login
            .set_enabled(offer.config_file && offer.at_login.is_some());
        self.at_login.set_checked(offer.at_login == Some(true));
    }
}

/// A disc of `colour` on a clear square, [`SIDE`] pixels a side.
fn disc(colour: Colour) -> io::Result<Icon> {
    let (r, g, b) = match colour {
        Colour::Green => (0x2d, 0xa4, 0x4e),
        Colour::Amber => (0xd2, 0x99, 0x22),
        Colour::Grey => (0x8c, 0x95, 0x9f),
    };
    let mut rgba = Vec::with_capacity((SIDE * SIDE * 4) as usize);
    let centre = (SIDE as f32 - 1.0) / 2.0;
    let radius = SIDE as f32 / 2.0 - 1.0;
    for y in 0..SIDE {
        for x in 0..SIDE {
            let d = ((x as f32 - centre).powi(2) + (y as f32 - centre).powi(2)).sqrt();
            // A soft edge one pixel wide.
            let alpha = (radius - d + 0.5).clamp(0.0, 1.0);
            rgba.extend_from_slice(&[r, g, b, (alpha * 255.0) as u8]);
        }
    }
    Icon::from_rgba(rgba, SIDE, SIDE).map_err(io::Error::other)
}
