//! `run`'s web page: one more observer of the relay ([`Web`], see
//! [`crate::app`]), served on `127.0.0.1:5480` by default (`[web] addr`,
//! `--web ADDR|off`).
//!
//! Two threads of its own, and [`WORKERS`] that carry out the requests that
//! wait on a file or on the relay from a bounded queue ([`work`]: a request
//! answered meanwhile is never carried out), none of them the relay's:
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
//! The page's token ([`token`]) is kept across starts in the user's state
//! folder and travels in its links, never in a cookie. The page moves when
//! the configuration's owner says `[web] addr` changed ([`Web::mover`]): the
//! new address is bound, then the old server is stopped and a new one serves
//! the same state (open recordings, the feed) there.
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
mod token;
mod work;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use log::{info, warn};
use serde_json::Value;
use tokio::sync::Notify;

use crate::app::{join_within, Attach, Failure, Observer};
use crate::config::Input;
use crate::owner::{Editor, PageMover};
use crate::relay::Control;
use crate::report::query::PageServed;
use crate::report::Snapshot;
use crate::state::TokenFile;

pub use work::{QUEUED, WORKERS};

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
/// How long the end of the page waits for its threads: a client is never
/// waited for.
pub const STOP_WAIT: Duration = Duration::from_secs(1);

/// Locks `m`, taking the data of a thread that panicked as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the page is served now: it moves with `[web] addr` (issue 30).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Site {
    /// The address it is bound to.
    addr: SocketAddr,
    /// Served on an address other than loopback: every request needs the
    /// token.
    need_token: bool,
    /// Its address on the LAN, when it is served there (for a phone).
    lan: Option<IpAddr>,
}

impl Site {
    fn at(addr: SocketAddr) -> Site {
        Site {
            addr,
            need_token: !addr.ip().is_loopback(),
            lan: phone::lan_ip(addr.ip()),
        }
    }

    /// The page's address as a browser on this computer opens it: loopback
    /// for every interface.
    fn here(&self) -> String {
        let host = match self.addr.ip() {
            ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
            ip if ip.is_unspecified() => "[::1]".to_owned(),
            IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        format!("http://{host}:{}/", self.addr.port())
    }
}

/// What the web threads share.
struct Shared {
    /// Where the page is served.
    site: Mutex<Site>,
    /// The session's token: required on every change, and on every request
    /// when the page is served beyond this computer.
    token: token::PageToken,
    /// The page as a phone on the LAN opens it, for the site and token it
    /// was made for.
    phone: Mutex<Option<(Site, String, phone::Phone)>>,
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
    /// `[record] races`' folder: the races kept, listed on the page.
    races: Option<PathBuf>,
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
    /// What the last recording from the page wrote, once it stopped.
    last_recording: Mutex<Option<Value>>,
    /// The requests that wait on a file or on the relay (issue 30: bounded,
    /// and never run once answered).
    work: work::Queue,
    /// The `/api/snapshot` being made, which every request for one meanwhile
    /// shares.
    snapshot_flight: Mutex<Option<server::Flight>>,
    stop: AtomicBool,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn site(&self) -> Site {
        *lock(&self.site)
    }

    /// The page as a phone on the LAN opens it, when it is served there.
    fn phone(&self) -> Option<phone::Phone> {
        let site = self.site();
        let ip = site.lan?;
        let token = self.token.current();
        let mut cached = lock(&self.phone);
        match &*cached {
            Some((s, t, phone)) if *s == site && *t == token => Some(phone.clone()),
            _ => {
                let phone = phone::Phone::new(phone::url(ip, site.addr.port(), &token))?;
                *cached = Some((site, token, phone.clone()));
                Some(phone)
            }
        }
    }

    /// The page's address from this computer, with the token when it needs
    /// one: the link that opens it here.
    fn link_here(&self) -> String {
        let site = self.site();
        match site.need_token {
            true => format!("{}?token={}", site.here(), self.token.current()),
            false => site.here(),
        }
    }

    /// What the status query tells the tools about the page.
    fn served(&self) -> PageServed {
        let site = self.site();
        PageServed {
            addr: site.addr,
            needs_token: site.need_token,
            token_file: self.token.file().map(|f| f.path().display().to_string()),
        }
    }
}

/// The web page, as an observer of the relay. It can move while the relay
/// runs ([`Web::mover`]).
pub struct Web {
    page: Arc<Mutex<Page>>,
}

/// The page's state, shared with its mover.
struct Page {
    /// Where it is to be served (`None`: nowhere).
    addr: Option<SocketAddr>,
    editor: Editor,
    input: Input,
    file: Option<PathBuf>,
    /// Where the token is kept; `None`: for this run only.
    token_file: Option<TokenFile>,
    /// `[record] races`' folder, if races are kept.
    races: Option<PathBuf>,
    /// Open the page in the default browser once it is served.
    browser: bool,
    /// The relay's, once started.
    control: Option<Control>,
    /// The threads' shared state and the feed, made on the first serving.
    running: Option<Running>,
    /// The server, while the page is served.
    server: Option<Server>,
}

struct Running {
    shared: Arc<Shared>,
    feed: JoinHandle<()>,
}

/// One address's server: its thread and how to end it.
struct Server {
    /// Ends the server's accept loop.
    stop: Arc<Notify>,
    thread: JoinHandle<()>,
    /// Closed when the server's thread ends.
    ended: mpsc::Receiver<()>,
}

impl Server {
    /// Stops it, closing every connection, waiting at most twice
    /// [`STOP_WAIT`].
    fn stop(self) {
        // A permit is kept if the loop is not waiting yet: the stop is not lost.
        self.stop.notify_one();
        if join_within(self.thread, &self.ended, 2 * STOP_WAIT).is_none() {
            warn!("the web page's server did not stop in time: left to end with the program");
        }
    }
}

impl Web {
    /// Serves the page on `addr` (`None`: not until it is moved somewhere)
    /// for a relay that reads `input`; changes go to `editor` (the
    /// configuration's owner); `file` is the configuration file's path, if
    /// there is one. Its token is for this run only unless
    /// [`Web::token_file`] says where to keep it.
    pub fn new(
        addr: Option<SocketAddr>,
        editor: Editor,
        input: Input,
        file: Option<PathBuf>,
    ) -> Web {
        Web {
            page: Arc::new(Mutex::new(Page {
                addr,
                editor,
                input,
                file,
                token_file: None,
                races: None,
                browser: false,
                control: None,
                running: None,
                server: None,
            })),
        }
    }

    /// Opens the page in the default browser once it is served (a start by
    /// double-click; see [`open`]).
    pub fn open_in_browser(self, open: bool) -> Web {
        lock(&self.page).browser = open;
        self
    }

    /// Lists the races kept in `dir` (`[record] races`, issue 34).
    pub fn races(self, dir: Option<PathBuf>) -> Web {
        lock(&self.page).races = dir;
        self
    }

    /// Keeps the token in `file` across starts (issue 30).
    pub fn token_file(self, file: Option<TokenFile>) -> Web {
        lock(&self.page).token_file = file;
        self
    }

    /// What moves the page when `[web] addr` changes (for the
    /// configuration's owner).
    pub fn mover(&self) -> Box<dyn PageMover> {
        Box::new(Mover(self.page.clone()))
    }

    /// Serves the page for the relay `control` steers: what [`Observer::start`]
    /// does with the relay's control (tests drive a relay of their own). A
    /// port that can't be bound is a warning, not a failure: the page is never
    /// a reason not to relay.
    pub fn serve(&mut self, control: Control) -> Result<(), Failure> {
        let mut page = lock(&self.page);
        page.control = Some(control);
        let Some(addr) = page.addr else {
            return Ok(());
        };
        let served = page.open(addr, false)?;
        if served && page.browser {
            if let Some(running) = &page.running {
                open::page(&running.shared.link_here());
            }
        }
        Ok(())
    }

    /// Where the page is served, once it is.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        let page = lock(&self.page);
        page.server.as_ref()?;
        page.running.as_ref().map(|r| r.shared.site().addr)
    }
}

/// Moves a [`Web`] page.
struct Mover(Arc<Mutex<Page>>);

impl PageMover for Mover {
    fn move_to(&mut self, addr: Option<SocketAddr>) -> bool {
        lock(&self.0).move_to(addr)
    }
}

impl Page {
    /// Binds `addr` and serves the page there (closing the old address once
    /// the new one is bound, or first when the two share a port, as
    /// 127.0.0.1:5480 and 0.0.0.0:5480 do); `false`, with a warning, when it
    /// can't be bound (the page stays where it was). `moved`: the page was
    /// served elsewhere or not at all, and this is a change of the file.
    fn open(&mut self, addr: SocketAddr, moved: bool) -> Result<bool, Failure> {
        let Some(control) = self.control.clone() else {
            return Ok(false);
        };
        let before = self
            .running
            .as_ref()
            .filter(|_| self.server.is_some())
            .map(|r| (r.shared.site().addr, r.shared.site().here()));
        // Review of issue 30: the OS refuses 0.0.0.0:P while 127.0.0.1:P is
        // bound, so the page could not move from one to the other.
        let first = before.as_ref().filter(|(b, _)| shares_port(*b, addr));
        let old = first.map(|(_, here)| here.clone());
        if first.is_some() {
            if let Some(server) = self.server.take() {
                server.stop();
            }
        }
        let listener = match TcpListener::bind(addr) {
            Ok(l) => l,
            Err(e) => {
                // The page is never a reason not to relay.
                let held = match crate::setup::finder::tcp_blocker(addr, &e) {
                    Some(h) => format!(" (held by {h})"),
                    None => String::new(),
                };
                // Stopped to make room: served where it was again.
                let back = first.and_then(|(b, _)| TcpListener::bind(b).ok().map(|l| (l, *b)));
                let now = match &before {
                    Some((_, here)) if self.server.is_some() || back.is_some() => {
                        format!("it stays on {here}")
                    }
                    _ => "relaying on without it".to_owned(),
                };
                warn!(
                    "no web page on port {} of {}: cannot serve it there{held}: {e}; {now} \
                     (choose another with --web ADDR, or [web] addr)",
                    addr.port(),
                    addr.ip(),
                );
                if let Some((listener, b)) = back {
                    self.serve(listener, b, &control, None, false)?;
                }
                return Ok(false);
            }
        };
        let served = self.serve(listener, addr, &control, old, moved)?;
        if served {
            self.addr = Some(addr);
        }
        Ok(served)
    }

    /// Serves the page on `listener`, bound for `addr` (closing the server
    /// before it, whose address `old` says, when it is still up) and says
    /// where; `false` when its server can't start (said in the log).
    fn serve(
        &mut self,
        listener: TcpListener,
        addr: SocketAddr,
        control: &Control,
        mut old: Option<String>,
        moved: bool,
    ) -> Result<bool, Failure> {
        let bound = listener.local_addr().unwrap_or(addr);
        let runtime = match connections::runtime() {
            Ok(r) => r,
            Err(e) => {
                warn!("no web page: cannot start its server: {e}");
                return Ok(false);
            }
        };
        if let Some(server) = self.server.take() {
            server.stop();
            old = self.running.as_ref().map(|r| r.shared.site().here());
        }
        let shared = match &self.running {
            Some(r) => {
                *lock(&r.shared.site) = Site::at(bound);
                r.shared.clone()
            }
            None => {
                let running = self.start_shared(control, Site::at(bound))?;
                let shared = running.shared.clone();
                self.running = Some(running);
                shared
            }
        };
        let stop = Arc::new(Notify::new());
        let (ended_tx, ended) = mpsc::channel::<()>();
        let thread = spawn(
            "web",
            Box::new({
                let (shared, stop) = (shared.clone(), stop.clone());
                move || {
                    let _ended = ended_tx;
                    connections::serve(runtime, listener, &shared, &stop);
                }
            }),
        )?;
        self.server = Some(Server {
            stop,
            thread,
            ended,
        });
        // The tools beside the relay point there (issue 23).
        control.page_served(Some(shared.served()));
        match old {
            Some(old) if old != shared.site().here() => {
                info!("the web page moved from {old} to {}", shared.site().here());
            }
            Some(_) => {}
            None if moved => info!("the web page is served now"),
            None => {}
        }
        announce(&shared);
        Ok(true)
    }

    /// The threads' shared state for a page first served at `site`, and its
    /// feed thread.
    fn start_shared(&self, control: &Control, site: Site) -> Result<Running, Failure> {
        let shared = Arc::new(Shared {
            site: Mutex::new(site),
            token: token::PageToken::new(self.token_file.clone()),
            phone: Mutex::new(None),
            control: control.clone(),
            editor: self.editor.clone(),
            input: self.input,
            file: self.file.clone(),
            races: self.races.clone(),
            listeners: Mutex::new(feed::Listeners::default()),
            listeners_changed: Condvar::new(),
            updates: feed::Updates::new(),
            pages: live::Slots::new(MAX_CLIENTS),
            streams: live::Slots::new(MAX_CLIENTS),
            answers: Mutex::new(control.snapshots()),
            counting: Mutex::new(feed::Counting::default()),
            recording: Mutex::new(None),
            last_recording: Mutex::new(None),
            work: work::Queue::start(WORKERS, QUEUED),
            snapshot_flight: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let input = self.input;
        let feed_shared = shared.clone();
        let feed = spawn("web-feed", Box::new(move || feed::run(&feed_shared, input)))?;
        Ok(Running { shared, feed })
    }

    /// Serves the page on `addr` instead (`None`: nowhere); `false` when it
    /// can't (said in the log: it stays where it was).
    fn move_to(&mut self, addr: Option<SocketAddr>) -> bool {
        let served = self.server.is_some();
        match addr {
            Some(addr) => self.open(addr, !served).unwrap_or_else(|e| {
                warn!("the web page could not move: {}", e.message);
                false
            }),
            None => {
                if let Some(server) = self.server.take() {
                    server.stop();
                    let old = self.running.as_ref().map(|r| r.shared.site().here());
                    info!(
                        "the web page on {} is closed ([web] addr = \"off\")",
                        old.unwrap_or_default()
                    );
                }
                if let Some(control) = &self.control {
                    control.page_served(None);
                }
                self.addr = None;
                true
            }
        }
    }
}

/// Whether a socket on `a` keeps one on `b` from being bound: the same port,
/// and the same address or either one every address.
fn shares_port(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

fn spawn(name: &str, f: Box<dyn FnOnce() + Send>) -> Result<JoinHandle<()>, Failure> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map_err(|e| Failure::start(format!("cannot start the web page's thread: {e}")))
}

/// Logs where the page is, as links that open it (issue 30: each one
/// answers 200 from where it is meant to be opened): the first from this
/// computer, then, served to the network, the phone's with its QR code.
fn announce(shared: &Shared) {
    let site = shared.site();
    if !site.need_token {
        info!("web page on {}", shared.link_here());
        return;
    }
    info!(
        "web page on {} (on this computer; anyone with this link can change where telemetry \
         goes)",
        shared.link_here()
    );
    if let Some(phone) = shared.phone() {
        info!(
            "on a phone or tablet on the same network, open {} or scan this code with its \
             camera:",
            phone.url
        );
        crate::logging::message(&phone.text(crate::platform::colours_on_stderr()));
    }
}

impl Observer for Web {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
        self.serve(relay.control())
    }

    fn finish(self: Box<Self>, _last: &mut Snapshot) -> Result<(), Failure> {
        let mut page = lock(&self.page);
        // A mover called from now on finds no relay to serve for.
        page.control = None;
        if let Some(server) = page.server.take() {
            server.stop();
        }
        let Some(running) = page.running.take() else {
            return Ok(());
        };
        drop(page);
        let shared = &running.shared;
        shared.stop.store(true, Ordering::Release);
        {
            // Under the lock the feed checks the flag with: no wake-up is lost.
            let _listeners = lock(&shared.listeners);
            shared.listeners_changed.notify_all();
        }
        shared.work.close();
        // The feed waits at most a snapshot's timeout.
        let _ = running.feed.join();
        if let Some(recording) = lock(&shared.recording).take() {
            let _ = recording.finish();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_computer_opens_a_page_on_every_interface_through_loopback() {
        let here = |a: &str| Site::at(a.parse().unwrap()).here();
        assert_eq!(here("0.0.0.0:5480"), "http://127.0.0.1:5480/");
        assert_eq!(here("[::]:5480"), "http://[::1]:5480/");
        assert_eq!(here("127.0.0.1:5480"), "http://127.0.0.1:5480/");
        assert_eq!(here("192.168.1.20:5480"), "http://192.168.1.20:5480/");
        assert_eq!(here("[fd00::5]:5480"), "http://[fd00::5]:5480/");
        assert!(!Site::at("127.0.0.1:1".parse().unwrap()).need_token);
        assert!(Site::at("0.0.0.0:1".parse().unwrap()).need_token);
    }
}
