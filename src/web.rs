//! `run`'s web page: one more observer of the relay ([`Web`], see
//! [`crate::app`]), served on `127.0.0.1:5480` by default (`[web] addr`,
//! `--web ADDR|off`).
//!
//! Three kinds of threads, none of them the relay's:
//! - `web` takes the HTTP requests ([`server`]): the page's embedded assets,
//!   `/api/snapshot`, and the changes (destinations, recording), each checked
//!   first (Host, token, Origin, sizes);
//! - one `web-events` thread per open page (at most [`MAX_CLIENTS`]) writes
//!   its Server-Sent Events from a small queue that drops the oldest update
//!   when the page is slow: a phone on Wi-Fi never slows the relay nor grows
//!   memory;
//! - `web-feed` samples what the pages show: the car at most [`CAR_EVERY`]
//!   (from a tap it attaches only while a page is open), the counters every
//!   [`COUNTERS_EVERY`] (a snapshot through the relay's [`Control`]). With no
//!   page open it waits on a condition variable: no wake-ups, no tap. Then
//!   `/api/snapshot` itself listens to the relay, for at most half a second
//!   ([`feed::CAR_WAIT`]), so a script gets the car too.
//!
//! Nothing here is on the relay loop's per-packet path: the loop copies
//! datagrams into the tap (as for a recording) and answers snapshots between
//! packets.

mod edit;
mod feed;
pub mod open;
mod server;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use log::{info, warn};

use crate::app::{Attach, Failure, Observer};
use crate::config::{Config, Overrides};
use crate::relay::Control;
use crate::stats::Snapshot;

/// Open pages (event streams) served at once; one more gets 503.
pub const MAX_CLIENTS: usize = 8;
/// Updates waiting for one page; a new one drops the oldest.
pub const CLIENT_QUEUE: usize = 8;
/// The car is sent at most this often (30 updates a second).
pub const CAR_EVERY: Duration = Duration::from_millis(33);
/// The counters and the log lines are sent this often.
pub const COUNTERS_EVERY: Duration = Duration::from_secs(1);
/// A request body larger than this gets 413.
pub const MAX_BODY: usize = 16 << 10;
/// Requests with more header bytes than this get 431.
pub const MAX_HEADER_BYTES: usize = 8 << 10;

/// Locks `m`, taking the data of a thread that panicked as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One open page: the updates waiting for it.
struct Client {
    queue: Mutex<std::collections::VecDeque<Arc<str>>>,
    ready: Condvar,
}

impl Client {
    fn new() -> Client {
        Client {
            queue: Mutex::new(std::collections::VecDeque::with_capacity(CLIENT_QUEUE)),
            ready: Condvar::new(),
        }
    }

    /// Queues `event`, dropping the oldest when the page is behind.
    fn push(&self, event: &Arc<str>) {
        let mut queue = lock(&self.queue);
        if queue.len() == CLIENT_QUEUE {
            queue.pop_front();
        }
        queue.push_back(event.clone());
        drop(queue);
        self.ready.notify_one();
    }
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
    control: Control,
    /// The configuration file changes are written to; `None` with `--to`.
    file: Option<PathBuf>,
    overrides: Overrides,
    /// What the relay runs (kept up to date for changes without a file).
    config: Mutex<Config>,
    clients: Mutex<Vec<Arc<Client>>>,
    /// Wakes the feed when the first page opens, or at the end.
    clients_changed: Condvar,
    /// The latest update of each kind, for a page that opens and for
    /// `/api/snapshot`.
    latest: Mutex<feed::Latest>,
    /// The server's own snapshot buffers, for `/api/snapshot` with no page
    /// open (the relay fills them in place).
    answers: Mutex<crate::relay::Snapshots>,
    /// The recording started from the page, if any.
    recording: Mutex<Option<feed::PageRecording>>,
    stop: AtomicBool,
}

impl Shared {
    /// Sends `event` to every open page.
    fn broadcast(&self, event: &Arc<str>) {
        for client in lock(&self.clients).iter() {
            client.push(event);
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// The web page, as an observer of the relay.
pub struct Web {
    addr: SocketAddr,
    file: Option<PathBuf>,
    overrides: Overrides,
    config: Config,
    /// Open the page in the default browser once it is served.
    browser: bool,
    running: Option<Running>,
}

struct Running {
    shared: Arc<Shared>,
    server: Arc<tiny_http::Server>,
    threads: Vec<JoinHandle<()>>,
}

impl Web {
    /// Serves the page on `addr` for the relay running `config`; changes are
    /// written to `file` (read back by the reloader), or with none applied to
    /// the running relay only.
    pub fn new(
        addr: SocketAddr,
        file: Option<PathBuf>,
        overrides: Overrides,
        config: Config,
    ) -> Web {
        Web {
            addr,
            file,
            overrides,
            config,
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

impl Observer for Web {
    fn start(&mut self, relay: &mut Attach<'_>) -> Result<(), Failure> {
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
        let server = match tiny_http::Server::from_listener(listener, None) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                warn!("no web page: cannot serve it on {addr}: {e}");
                return Ok(());
            }
        };
        let need_token = !addr.ip().is_loopback();
        let shared = Arc::new(Shared {
            addr,
            token: new_token(),
            need_token,
            control: relay.control(),
            file: self.file.clone(),
            overrides: self.overrides.clone(),
            config: Mutex::new(self.config.clone()),
            clients: Mutex::new(Vec::new()),
            clients_changed: Condvar::new(),
            latest: Mutex::new(feed::Latest::default()),
            answers: Mutex::new(relay.control().snapshots()),
            recording: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(f)
                .map_err(|e| Failure::start(format!("cannot start the web page's thread: {e}")))
        };
        let input = self.config.input;
        let feed_shared = shared.clone();
        let feed = spawn("web-feed", Box::new(move || feed::run(&feed_shared, input)))?;
        let serve_shared = shared.clone();
        let serve_server = server.clone();
        let serve = spawn(
            "web",
            Box::new(move || server::serve(&serve_shared, &serve_server)),
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
            server,
            threads: vec![feed, serve],
        });
        Ok(())
    }

    fn finish(self: Box<Self>, _last: &mut Snapshot) -> Result<(), Failure> {
        let Some(running) = self.running else {
            return Ok(());
        };
        running.shared.stop.store(true, Ordering::Release);
        {
            // Under the lock the feed checks the flag with: no wake-up is lost.
            let clients = lock(&running.shared.clients);
            running.shared.clients_changed.notify_all();
            for client in clients.iter() {
                let _queue = lock(&client.queue);
                client.ready.notify_all();
            }
        }
        running.server.unblock();
        for thread in running.threads {
            let _ = thread.join();
        }
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

    #[test]
    fn a_slow_page_keeps_only_the_newest_updates() {
        let client = Client::new();
        for i in 0..CLIENT_QUEUE + 3 {
            client.push(&Arc::from(i.to_string()));
        }
        let queue = lock(&client.queue);
        assert_eq!(queue.len(), CLIENT_QUEUE);
        assert_eq!(&*queue[0], "3");
    }
}
