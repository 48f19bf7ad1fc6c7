//! `run`'s web page: one more observer of the relay ([`Web`], see
//! [`crate::app`]), served on `127.0.0.1:5480` by default (`[web] addr`,
//! `--web ADDR|off`).
//!
//! Two threads of its own (plus, for the few requests that wait on a file or
//! on the relay, at most [`WORKERS`] short-lived workers), none of them the
//! relay's:
//! - `web` runs the HTTP server ([`server`], [`connections`]) on a
//!   current-thread tokio runtime: every connection is a task, not a thread,
//!   and every dimension of one is bounded (see [`connections`]); every request
//!   is checked first (Host, token, Origin, sizes). Its event streams
//!   ([`live`]) send each open page the newest update of each kind: a phone on
//!   Wi-Fi never slows the relay nor grows memory, and a stream whose client
//!   stops reading is closed after [`connections::WRITE_DEADLINE`];
//! - `web-feed` samples what the pages show: the car at most [`CAR_EVERY`]
//!   (from a tap it attaches only while a page is open), the counters every
//!   [`COUNTERS_EVERY`] (a snapshot through the relay's [`Control`]). With no
//!   page open it waits on a condition variable: no wake-ups, no tap. Then
//!   `/api/snapshot` itself listens to the relay, for at most half a second
//!   ([`feed::CAR_WAIT`]), so a script gets the car too.
//!
//! Nothing here is on the relay loop's per-packet path: the loop copies
//! datagrams into the tap (as for a recording) and answers snapshots between
//! packets. A stop never waits on a client: the runtime is dropped with its
//! connections (at most [`STOP_WAIT`]).

mod connections;
mod edit;
mod feed;
mod live;
pub mod open;
mod phone;
mod server;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use log::{info, warn};
use tokio::sync::Notify;

use crate::app::{join_within, Attach, Failure, Observer};
use crate::config::Input;
use crate::owner::Editor;
use crate::relay::Control;
use crate::stats::Snapshot;

/// Open pages (event streams) served at once, and frame streams (`/api/stream`,
/// overlays) too; one more of a kind closes the oldest of that kind.
pub const MAX_CLIENTS: usize = 8;
/// The car is sent at most this often (30 updates a second).
pub const CAR_EVERY: Duration = Duration::from_millis(33);
/// The counters and the log lines are sent this often.
pub const COUNTERS_EVERY: Duration = Duration::from_secs(1);
/// A request body larger than this gets 413.
pub const MAX_BODY: usize = 16 << 10;
/// Requests with more header bytes than this get 431.
pub const MAX_HEADER_BYTES: usize = 8 << 10;
/// Threads that run the requests that wait (a file edit, a snapshot with no
/// page open); more such requests wait for one.
pub const WORKERS: usize = 2;
/// How long the end of the page waits for its threads: a client is never
/// waited for.
pub const STOP_WAIT: Duration = Duration::from_secs(1);

/// Locks `m`, taking the data of a thread that panicked as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the web threads share.
struct Shared {
    /// The address the page is served on.
    addr: SocketAddr,
    /// The session's token: required on every change, and on every request
    /// when the page is served beyond this computer.
    token: String,
    /// Served on an address other than loopback: every request needs the token.
    need_token: bool,
    /// The page as a phone on the LAN opens it, when it is served there.
    phone: Option<phone::Phone>,
    control: Control,
    /// Where the page's changes go: the configuration's owner, which makes
    /// them and answers with what the relay did. The page keeps no copy of
    /// the configuration: what it shows of each destination is the relay's
    /// snapshot.
    editor: Editor,
    /// How the relay reads the game's packets, for the car.
    input: Input,
    /// The configuration file's path (`None` with `--to`): where the page's
    /// recordings go, and what "Start at login" starts.
    file: Option<PathBuf>,
    /// Who is listening, for the feed: it samples only while someone is.
    listeners: Mutex<feed::Listeners>,
    /// Wakes the feed when the first listener comes, or at the end.
    listeners_changed: Condvar,
    /// The newest update of each kind: what an open page is sent, and what
    /// `/api/snapshot` answers while one is open.
    updates: feed::Updates,
    /// The open pages' event streams: one more closes the oldest.
    pages: live::Slots,
    /// The open frame streams (`/api/stream`, the overlay): the same.
    streams: live::Slots,
    /// The server's own snapshot buffers, for `/api/snapshot` with no page
    /// open (the relay fills them in place), and what its rates and statuses
    /// are computed from.
    answers: Mutex<crate::relay::Snapshots>,
    counting: Mutex<feed::Counting>,
    /// The recording started from the page, if any.
    recording: Mutex<Option<feed::PageRecording>>,
    stop: AtomicBool,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// The web page, as an observer of the relay.
pub struct Web {
    addr: SocketAddr,
    editor: Editor,
    input: Input,
    file: Option<PathBuf>,
    /// Open the page in the default browser once it is served.
    browser: bool,
    running: Option<Running>,
}

struct Running {
    shared: Arc<Shared>,
    /// Ends the server's accept loop.
    stop_server: Arc<Notify>,
    server: JoinHandle<()>,
    /// Closed when the server's thread ends.
    server_ended: mpsc::Receiver<()>,
    feed: JoinHandle<()>,
}

impl Web {
    /// Serves the page on `addr` for a relay that reads `input`; changes go
    /// to `editor` (the configuration's owner); `file` is the configuration
    /// file's path, if there is one.
    pub fn new(addr: SocketAddr, editor: Editor, input: Input, file: Option<PathBuf>) -> Web {
        Web {
            addr,
            editor,
            input,
            file,
            browser: false,
            running: None,
        }
    }

    /// Opens the page in the default browser once it is served (a start by
    /// double-click; see [`open`]).
    pub fn open_in_browser(mut self, open: bool) -> Web {
        self.browser = open;
        self
    }
}

/// A random token of 128 bits, in hex: from the standard library's hasher
/// keys, which the OS's random source seeds.
fn new_token() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (0..2u64)
        .map(|i| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(i);
            h.write_u128(nanos);
            h.write_u32(std::process::id());
            format!("{:016x}", h.finish())
        })
        .collect()
}

impl Web {
    /// Serves the page for the relay `control` steers: what [`Observer::start`]
    /// does with the relay's control (tests drive a relay of their own). A
    /// port that can't be bound is a warning, not a failure: the page is never
    /// a reason not to relay.
    pub fn serve(&mut self, control: Control) -> Result<(), Failure> {
        let listener = match TcpListener::bind(self.addr) {
            Ok(l) => l,
            Err(e) => {
                // The page is never a reason not to relay.
                let held = match crate::setup::finder::tcp_blocker(self.addr, &e) {
                    Some(h) => format!(" (held by {h})"),
                    None => String::new(),
                };
                warn!(
                    "no web page: cannot serve it on port {} of {}{held}: {e}; relaying on \
                     without it (choose another with --web ADDR, or [web] addr)",
                    self.addr.port(),
                    self.addr.ip(),
                );
                return Ok(());
            }
        };
        let addr = listener.local_addr().unwrap_or(self.addr);
        // The tools beside the relay point there (issue 23).
        control.page_served(addr);
        let runtime = match connections::runtime() {
            Ok(r) => r,
            Err(e) => {
                warn!("no web page: cannot start its server: {e}");
                return Ok(());
            }
        };
        let need_token = !addr.ip().is_loopback();
        let token = new_token();
        let phone = phone::lan_ip(addr.ip())
            .and_then(|ip| phone::Phone::new(phone::url(ip, addr.port(), &token)));
        let shared = Arc::new(Shared {
            addr,
            token,
            need_token,
            phone,
            control: control.clone(),
            editor: self.editor.clone(),
            input: self.input,
            file: self.file.clone(),
            listeners: Mutex::new(feed::Listeners::default()),
            listeners_changed: Condvar::new(),
            updates: feed::Updates::new(),
            pages: live::Slots::new(MAX_CLIENTS),
            streams: live::Slots::new(MAX_CLIENTS),
            answers: Mutex::new(control.snapshots()),
            counting: Mutex::new(feed::Counting::default()),
            recording: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(f)
                .map_err(|e| Failure::start(format!("cannot start the web page's thread: {e}")))
        };
        let input = self.input;
        let feed_shared = shared.clone();
        let feed = spawn("web-feed", Box::new(move || feed::run(&feed_shared, input)))?;
        let stop_server = Arc::new(Notify::new());
        let (ended_tx, server_ended) = mpsc::channel::<()>();
        let server = spawn(
            "web",
            Box::new({
                let (shared, stop) = (shared.clone(), stop_server.clone());
                move || {
                    let _ended = ended_tx;
                    connections::serve(runtime, listener, &shared, &stop);
                }
            }),
        )?;
        if need_token {
            let shown = match addr.ip().is_unspecified() {
                true => format!("<this computer's address>:{}", addr.port()),
                false => addr.to_string(),
            };
            info!(
                "web page on http://{shown}/?token={} (anyone with this link can change \
                 where telemetry goes)",
                shared.token
            );
            if let Some(phone) = &shared.phone {
                info!(
                    "on a phone or tablet on the same network, open {} or scan this code \
                     with its camera:",
                    phone.url
                );
                crate::logging::message(&phone.text());
            }
        } else {
            info!("web page on http://{addr}/");
        }
        if self.browser {
            // Served on every interface: this computer reaches it on loopback.
            let host = match addr.ip() {
                ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
                ip if ip.is_unspecified() => "[::1]".to_owned(),
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            };
            let query = match need_token {
                true => format!("?token={}", shared.token),
                false => String::new(),
            };
            open::page(&format!("http://{host}:{}/{query}", addr.port()));
        }
        self.running = Some(Running {
            shared,
            stop_server,
            server,
            server_ended,
            feed,
        });
        Ok(())
    }

    /// Where the page is served, once it is.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.running.as_ref().map(|r| r.shared.addr)
    }
}

impl Observer for Web {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        self.serve(relay.control())
    }

    fn finish(self: Box<Self>, _last: &mut Snapshot) -> Result<(), Failure> {
        let Some(running) = self.running else {
            return Ok(());
        };
        running.shared.stop.store(true, Ordering::Release);
        {
            // Under the lock the feed checks the flag with: no wake-up is lost.
            let _listeners = lock(&running.shared.listeners);
            running.shared.listeners_changed.notify_all();
        }
        // A permit is kept if the loop is not waiting yet: the stop is not lost.
        running.stop_server.notify_one();
        if join_within(running.server, &running.server_ended, 2 * STOP_WAIT).is_none() {
            warn!("the web page's server did not stop in time: left to end with the program");
        }
        // The feed waits at most a snapshot's timeout.
        let _ = running.feed.join();
        if let Some(recording) = lock(&running.shared.recording).take() {
            recording.finish();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_32_hex_digits_and_differ() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
