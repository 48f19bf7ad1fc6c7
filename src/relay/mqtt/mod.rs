//! The MQTT publisher: an MQTT destination's far end, a thread of its own that
//! holds the broker's connection, so the relay's loop never waits on TCP, DNS
//! or TLS.
//!
//! An MQTT destination is a destination of the relay like any other: the core
//! applies its race filter, rate limit (20 a second unless told otherwise) and
//! age limit, and builds its payload (the JSON object or the influx line,
//! once per frame for every destination sharing its encoding and fields).
//! Where a UDP destination's link sends the payload on its socket, an MQTT
//! destination's link pushes it into an [`Outbox`]: a ring made once, which
//! the loop never waits for (a full ring is a dropped frame, counted), read
//! by the publisher's thread, which publishes each payload to `topic`, QoS 0,
//! not retained. While the broker is not connected the link does not hand
//! frames over: it counts them as not published (the `broker_unavailable`
//! drop reason), and the destination's status is failing.
//!
//! `<topic>/status` is retained: "online" once connected, "offline" as the last
//! will (the broker says it when the connection dies) and on a clean stop.
//! A session's records (`records = ["laps", "events"]`, issue 34) go to
//! `<topic>/laps` (retained: a dashboard that connects late shows the last
//! lap) and `<topic>/events`, told from frames by their first bytes.
//!
//! A broker that is down, refuses the login or goes away: the client connects
//! again after a pause that doubles from 250 ms up to [`MAX_BACKOFF`]. Nothing
//! here blocks or panics its caller: [`MqttPublisher::stop`] returns within
//! [`STOP_WITHIN`] and a second whatever the broker does, and dropping a
//! publisher (a destination removed by a reload) stops it without waiting.
//!
//! The network client is rumqttc on a current-thread tokio runtime made and
//! owned by the publisher's thread; TLS is rustls with ring, with the system's
//! roots or a `ca_file`. Everything slow to start (the runtime, the
//! certificates) happens on that thread, so starting a publisher costs the
//! caller a thread spawn.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use log::{info, warn};
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use rumqttc::{
    AsyncClient, ConnectionError, Event, EventLoop, Incoming, LastWill, MqttOptions, Outgoing, QoS,
    TlsConfiguration, Transport,
};
use tokio::sync::Notify;

use crate::logging::Suppressed;

mod said;

use said::{Connected, Said};

pub use crate::output::mqtt::DEFAULT_MAX_RATE;
use crate::output::mqtt::{load_ca_file, Broker, CaFileError, MqttSettings, Roots, Secret};
use crate::output::records::{self, Kind};

/// The longest pause between two attempts to reach the broker.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The first pause after a failed attempt; it doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How long a stop waits for "offline" and the disconnect to go out.
pub const STOP_WITHIN: Duration = Duration::from_secs(1);
/// Bytes of an [`Outbox`]: 25 all-column JSON frames, or 1,500 small ones;
/// the publisher empties it as soon as it is woken.
pub const OUTBOX_BYTES: usize = 64 << 10;
/// How long the broker may take to answer before the connection is given up
/// (rumqttc's connection timeout is in whole seconds).
const CONNECT_TIMEOUT_SECS: u64 = 5;
/// Keep-alive pings: a broker gone without a word is noticed within 1.5 × this.
const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// Requests (publishes) the client queues for its connection.
const REQUESTS: usize = 64;
/// The largest MQTT packet sent or taken: an all-column JSON frame is ~2.5 kB.
const MAX_PACKET: usize = 64 << 10;
/// Each payload's length before it in the outbox.
const LEN_BYTES: usize = 4;
/// How often a connection problem may be said until the relay says its own
/// interval ([`MqttPublisher::set_warn_every`]): the relay's default.
const DEFAULT_WARN_EVERY: Duration = Duration::from_secs(10);

/// Why a publisher could not connect at all (said in its warning).
#[derive(Debug)]
enum MqttError {
    /// The `ca_file` can't be used.
    CaFile(std::path::PathBuf, CaFileError),
    /// The system has no root certificate to trust (`mqtts://` without `ca_file`).
    NoSystemRoots(String),
    /// rustls refused the configuration.
    Tls(rustls::Error),
}

impl fmt::Display for MqttError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MqttError::CaFile(path, e) => write!(f, "ca_file {}: {e}", path.display()),
            MqttError::NoSystemRoots(why) => write!(
                f,
                "mqtts:// found no root certificate on this system ({why}); give the broker's \
                 CA certificate as ca_file"
            ),
            MqttError::Tls(e) => write!(f, "TLS: {e}"),
        }
    }
}

/// What a publisher did, counted since it started. Every payload taken from
/// the outbox is published, not published, or on its way to the broker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MqttCounts {
    /// Payloads taken from the outbox.
    pub taken: u64,
    /// Payloads written to the broker's connection.
    pub published: u64,
    /// Payloads taken and lost: the connection ended (or its queue was full)
    /// before they were written. Frames the relay did not hand over while the
    /// broker was away are the destination's drops, not counted here.
    pub not_published: u64,
    /// Connections made (the first, and each reconnection).
    pub connections: u64,
    /// Connected now.
    pub connected: bool,
    /// The last attempt to reach the broker failed (or it can't be tried).
    pub down: bool,
}

/// What the publisher's thread, its owner and the outbox share.
#[derive(Debug)]
struct Shared {
    taken: AtomicU64,
    published: AtomicU64,
    /// Payloads handed to the client: `queued - published` are on their way.
    queued: AtomicU64,
    not_published: AtomicU64,
    connections: AtomicU64,
    connected: AtomicBool,
    down: AtomicBool,
    stopping: AtomicBool,
    /// Stop without saying "offline" (a publisher replaced by one on the same
    /// topic, which says "online").
    quiet: AtomicBool,
    wake: Notify,
    /// How often a connection problem may be said, in milliseconds.
    warn_every_ms: AtomicU64,
    /// What the log was told about the connection.
    said: Mutex<Said>,
    /// Why the broker can't be reached now, as the log last said it: `None`
    /// while connected (issue 30: `doctor` names the broker and this).
    problem: Mutex<Option<String>>,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            taken: AtomicU64::new(0),
            published: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            not_published: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            down: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            quiet: AtomicBool::new(false),
            wake: Notify::new(),
            warn_every_ms: AtomicU64::new(DEFAULT_WARN_EVERY.as_millis() as u64),
            said: Mutex::new(Said::default()),
            problem: Mutex::new(None),
        }
    }
}

impl Shared {
    /// How often a connection problem may be said.
    fn warn_every(&self) -> Duration {
        Duration::from_millis(self.warn_every_ms.load(Ordering::Relaxed))
    }

    /// What the log was told (a panic elsewhere leaves it usable).
    fn said(&self) -> MutexGuard<'_, Said> {
        self.said.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counts(&self) -> MqttCounts {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MqttCounts {
            taken: load(&self.taken),
            published: load(&self.published),
            not_published: load(&self.not_published),
            connections: load(&self.connections),
            connected: self.connected.load(Ordering::Relaxed),
            down: self.down.load(Ordering::Relaxed),
        }
    }

    /// Sets (or with `None` clears) why the broker can't be reached.
    fn set_problem(&self, problem: Option<String>) {
        *self.problem.lock().unwrap_or_else(|e| e.into_inner()) = problem;
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// The relay's end of a publisher: payloads are pushed in, each as it is, and
/// the publisher's thread is woken. Pushing allocates nothing and never waits.
pub struct Outbox {
    prod: HeapProd<u8>,
    shared: Arc<Shared>,
}

impl Outbox {
    /// Whether the broker is connected now: frames are handed over only then.
    #[inline]
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Relaxed)
    }

    /// Hands `payload` over and wakes the publisher; false (nothing pushed)
    /// when the ring hasn't room for it.
    pub fn push(&mut self, payload: &[u8]) -> bool {
        let Ok(len) = u32::try_from(payload.len()) else {
            return false;
        };
        if self.prod.vacant_len() < LEN_BYTES + payload.len() {
            return false;
        }
        // Room for both was checked above, and only this end adds bytes.
        self.prod.push_slice(&len.to_le_bytes());
        self.prod.push_slice(payload);
        // A permit when the publisher is busy, a wake-up when it waits: it
        // empties the ring either way.
        self.shared.wake.notify_one();
        true
    }
}

/// The publisher's end of the outbox.
struct Inbox {
    cons: HeapCons<u8>,
    payload: Vec<u8>,
}

impl Inbox {
    /// The next payload, if a whole one is in.
    fn pop(&mut self) -> Option<&[u8]> {
        let mut len = [0u8; LEN_BYTES];
        if self.cons.occupied_len() < LEN_BYTES {
            return None;
        }
        self.cons.peek_slice(&mut len);
        let len = u32::from_le_bytes(len) as usize;
        if self.cons.occupied_len() < LEN_BYTES + len {
            return None;
        }
        self.cons.skip(LEN_BYTES);
        self.payload.resize(len, 0);
        self.cons.pop_slice(&mut self.payload);
        Some(&self.payload)
    }
}

/// An MQTT publisher running on its own thread. Dropping it stops it without
/// waiting ([`MqttPublisher::stop`] waits).
pub struct MqttPublisher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    ended: mpsc::Receiver<()>,
    broker: Broker,
}

impl MqttPublisher {
    /// Starts a publisher to the broker of `settings`, with its outbox. Fails
    /// only when no thread can be made: a broker that can't be reached is
    /// retried, and one that can't be configured (a `ca_file` gone since the
    /// configuration was read) is warned about and counted down.
    pub fn start(settings: MqttSettings) -> std::io::Result<(MqttPublisher, Outbox)> {
        let (prod, cons) = HeapRb::<u8>::new(OUTBOX_BYTES).split();
        let shared = Arc::new(Shared::default());
        let (ended_tx, ended) = mpsc::channel::<()>();
        let broker = settings.broker.clone();
        let inbox = Inbox {
            cons,
            payload: Vec::new(),
        };
        let thread = std::thread::Builder::new().name("mqtt".to_owned()).spawn({
            let shared = shared.clone();
            move || {
                let _ended = ended_tx;
                run(settings, inbox, &shared);
                shared.connected.store(false, Ordering::SeqCst);
            }
        })?;
        Ok((
            MqttPublisher {
                shared: shared.clone(),
                thread: Some(thread),
                ended,
                broker,
            },
            Outbox { prod, shared },
        ))
    }

    /// What it did so far.
    pub fn counts(&self) -> MqttCounts {
        self.shared.counts()
    }

    /// Why the broker can't be reached now (`cannot connect (connection
    /// refused)`), as the log said it; `None` while connected or before the
    /// first attempt ends.
    pub fn problem(&self) -> Option<String> {
        let mut problem = None;
        self.problem_into(&mut problem);
        problem
    }

    /// [`Publisher::problem`] into `out`, reusing its text's room: a snapshot
    /// taken again while the broker stays down allocates nothing.
    pub fn problem_into(&self, out: &mut Option<String>) {
        out.clone_from(
            &self
                .shared
                .problem
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
    }

    /// Whether the last attempt to reach the broker failed (or it can't be
    /// tried): the destination is failing even when no frame comes.
    pub fn is_down(&self) -> bool {
        self.shared.down.load(Ordering::Relaxed)
    }

    /// The broker it publishes to.
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// How often a connection problem (a lost connection, a failed attempt)
    /// may be said: the interval every repeated warning of the relay
    /// follows. 10 s until told.
    pub fn set_warn_every(&self, every: Duration) {
        let ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX).max(1);
        self.shared.warn_every_ms.store(ms, Ordering::Relaxed);
    }

    /// Asks it to end: "offline" unless `quiet`, then the disconnect. Returns
    /// at once.
    pub fn signal_stop(&self, quiet: bool) {
        self.shared.quiet.store(quiet, Ordering::SeqCst);
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }

    /// Waits until `deadline` at most for a publisher asked to stop to end;
    /// returns what it did. A thread that does not end by then is left to end
    /// by itself.
    pub fn wait(&mut self, deadline: Instant) -> MqttCounts {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.ended.recv_timeout(left) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                warn!(
                    "MQTT {}: the publisher did not stop in time; left to end by itself",
                    self.broker
                );
            }
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(thread) = self.thread.take() {
                    let _ = thread.join();
                }
            }
        }
        self.shared.counts()
    }

    /// Says "offline" (when connected), disconnects and ends the thread, within
    /// [`STOP_WITHIN`] and a second; returns what it did.
    pub fn stop(mut self) -> MqttCounts {
        self.signal_stop(false);
        self.wait(Instant::now() + STOP_WITHIN + Duration::from_secs(1))
    }

    /// Stops every one of `publishers` at once (each says "offline"), waiting
    /// for them together within [`STOP_WITHIN`] and a second. They stay, with
    /// what they did ([`MqttPublisher::counts`]).
    pub fn stop_all<'a>(publishers: impl IntoIterator<Item = &'a mut MqttPublisher>) {
        let mut publishers: Vec<&mut MqttPublisher> = publishers.into_iter().collect();
        for p in &publishers {
            p.signal_stop(false);
        }
        let deadline = Instant::now() + STOP_WITHIN + Duration::from_secs(1);
        for p in &mut publishers {
            p.wait(deadline);
        }
    }

    /// Whether it was asked to stop: what it does from then on is its
    /// goodbye, not the broker's state.
    pub fn is_stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::Relaxed)
    }
}

impl Drop for MqttPublisher {
    fn drop(&mut self) {
        // Not stopped yet: it stops by itself, saying "offline" unless asked
        // for quiet before.
        if !self.shared.stopping.swap(true, Ordering::SeqCst) {
            self.shared.wake.notify_one();
        }
    }
}

/// The publisher's thread: its runtime, then [`publish`] until stopped.
fn run(settings: MqttSettings, mut inbox: Inbox, shared: &Arc<Shared>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            shared.down.store(true, Ordering::SeqCst);
            shared.set_problem(Some(format!("cannot start the publisher ({e})")));
            warn!(
                "MQTT {}: cannot start the publisher ({e}); frames to it are counted as not \
                 published",
                settings.broker
            );
            return;
        }
    };
    let options = match options(&settings) {
        Ok(o) => o,
        Err(e) => {
            shared.down.store(true, Ordering::SeqCst);
            shared.set_problem(Some(e.to_string()));
            warn!(
                "MQTT {}: {e}; frames to it are counted as not published until the \
                 configuration changes",
                settings.broker
            );
            // Wait for the stop, emptying the outbox meanwhile (the relay
            // hands nothing over while not connected).
            runtime.block_on(async {
                while !shared.stopping.load(Ordering::SeqCst) {
                    shared.wake.notified().await;
                    drain_unpublished(&mut inbox, shared);
                }
            });
            return;
        }
    };
    runtime.block_on(publish(settings, options, inbox, shared));
    // A look-up or connection still in flight is not waited for.
    runtime.shutdown_background();
}

/// Takes every payload in `inbox` and counts it not published.
fn drain_unpublished(inbox: &mut Inbox, shared: &Shared) {
    while inbox.pop().is_some() {
        Shared::add(&shared.taken, 1);
        Shared::add(&shared.not_published, 1);
    }
}

/// The client's options: broker, login, last will, TLS.
fn options(settings: &MqttSettings) -> Result<MqttOptions, MqttError> {
    let broker = &settings.broker;
    let mut options = MqttOptions::new(client_id(), broker.host.clone(), broker.port);
    options
        .set_keep_alive(KEEP_ALIVE)
        .set_clean_session(true)
        .set_max_packet_size(MAX_PACKET, MAX_PACKET)
        .set_request_channel_capacity(REQUESTS)
        .set_last_will(LastWill::new(
            settings.status_topic(),
            "offline",
            QoS::AtLeastOnce,
            true,
        ));
    if let Some(user) = &settings.username {
        let password = settings.password.as_ref().map_or("", Secret::expose);
        options.set_credentials(user.clone(), password);
    }
    if broker.tls {
        let config = tls_config(&settings.roots)?;
        options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
            Arc::new(config),
        )));
    }
    Ok(options)
}

/// `forza-relay-` and 8 hex digits, different for each publisher: two relays
/// (or two destinations) with one client id would take turns throwing each
/// other off the broker. 20 characters, within MQTT 3.1.1's 23.
fn client_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() ^ d.as_secs() as u32);
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) as u32;
    let mixed = nanos ^ std::process::id().rotate_left(16) ^ n.wrapping_mul(0x9E37_79B9);
    format!("forza-relay-{mixed:08x}")
}

/// A rustls client configuration with ring, trusting `roots`.
fn tls_config(roots: &Roots) -> Result<rustls::ClientConfig, MqttError> {
    let store = match roots {
        Roots::CaFile(path) => {
            load_ca_file(path).map_err(|e| MqttError::CaFile(path.clone(), e))?
        }
        Roots::System => {
            let mut store = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = match found.errors.first() {
                    Some(e) => e.to_string(),
                    None => "the store is empty".to_owned(),
                };
                return Err(MqttError::NoSystemRoots(why));
            }
            store
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(MqttError::Tls)?
        .with_root_certificates(store)
        .with_no_client_auth())
}

/// The publisher: publishes every payload the outbox brings while [`drive`]
/// runs the connection; ends with "offline" and the disconnect.
async fn publish(
    settings: MqttSettings,
    options: MqttOptions,
    mut inbox: Inbox,
    shared: &Arc<Shared>,
) {
    let (client, mut eventloop) = AsyncClient::new(options, REQUESTS);
    let mut network = eventloop.network_options();
    network
        .set_connection_timeout(CONNECT_TIMEOUT_SECS)
        .set_tcp_nodelay(true);
    eventloop.set_network_options(network);
    let status = settings.status_topic();
    // A session's records (issue 34) on topics of their own; a lap retained,
    // so a dashboard that connects late shows the last one.
    let laps = format!("{}/laps", settings.topic);
    let events = format!("{}/events", settings.topic);
    let mut driver = tokio::spawn(drive(
        eventloop,
        client.clone(),
        shared.clone(),
        settings.topic.clone(),
        settings.broker.clone(),
    ));
    loop {
        shared.wake.notified().await;
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        while let Some(payload) = inbox.pop() {
            Shared::add(&shared.taken, 1);
            // The relay handed it over while connected; the connection may
            // have ended since.
            let (topic, retain) = match records::kind_of(payload) {
                Kind::Frame => (settings.topic.as_str(), false),
                Kind::Lap => (laps.as_str(), true),
                Kind::Event => (events.as_str(), false),
            };
            let sent = shared.connected.load(Ordering::Relaxed)
                && client
                    .try_publish(topic, QoS::AtMostOnce, retain, payload.to_vec())
                    .is_ok();
            if sent {
                Shared::add(&shared.queued, 1);
            } else {
                Shared::add(&shared.not_published, 1);
            }
        }
    }
    drain_unpublished(&mut inbox, shared);
    // A clean stop: "offline", retained, then the disconnect, both in order on
    // the connection; not waited for longer than STOP_WITHIN.
    let mut ended = false;
    if shared.connected.load(Ordering::SeqCst) {
        if !shared.quiet.load(Ordering::SeqCst) {
            let _ = client.try_publish(status, QoS::AtLeastOnce, true, "offline");
        }
        let _ = client.try_disconnect();
        ended = tokio::time::timeout(STOP_WITHIN, &mut driver).await.is_ok();
    }
    if !ended {
        driver.abort();
        let _ = driver.await;
    }
    // Whatever was still on its way did not go.
    lost_in_flight(shared);
    let unsaid = shared.said().unsaid();
    if unsaid > 0 {
        warn!(
            "MQTT {}: {unsaid} more lost connection{} or failed attempt{} since the last \
             message",
            settings.broker,
            if unsaid == 1 { "" } else { "s" },
            if unsaid == 1 { "" } else { "s" },
        );
    }
}

/// Payloads handed to the client and not written when the connection ended
/// are not published.
fn lost_in_flight(shared: &Shared) {
    let queued = shared.queued.load(Ordering::Relaxed);
    let published = shared.published.load(Ordering::Relaxed);
    Shared::add(&shared.not_published, queued.saturating_sub(published));
    shared.queued.store(published, Ordering::Relaxed);
}

/// Runs the connection: connects, says "online" on `<topic>/status`,
/// reconnects after a failure with a pause growing to [`MAX_BACKOFF`], and ends
/// after the clean stop's disconnect (or when aborted).
async fn drive(
    mut eventloop: EventLoop,
    client: AsyncClient,
    shared: Arc<Shared>,
    topic: String,
    broker: Broker,
) {
    let status = format!("{topic}/status");
    let mut backoff = FIRST_BACKOFF;
    loop {
        match eventloop.poll().await {
            Ok(Event::Incoming(Incoming::ConnAck(_))) => {
                Shared::add(&shared.connections, 1);
                shared.down.store(false, Ordering::SeqCst);
                shared.connected.store(true, Ordering::SeqCst);
                shared.set_problem(None);
                backoff = FIRST_BACKOFF;
                match shared.said().connected() {
                    Some(Connected::First) => {
                        info!("MQTT {broker}: connected; publishing to {topic}");
                    }
                    Some(Connected::Again) => info!("MQTT {broker}: connected again"),
                    None => {}
                }
                let _ = client.try_publish(status.as_str(), QoS::AtLeastOnce, true, "online");
            }
            // QoS 0 publishes have no packet id; the status messages have one.
            Ok(Event::Outgoing(Outgoing::Publish(0))) => Shared::add(&shared.published, 1),
            Ok(Event::Outgoing(Outgoing::Disconnect)) => {
                shared.connected.store(false, Ordering::SeqCst);
                return;
            }
            Ok(_) => {}
            Err(e) => {
                let was_connected = shared.connected.swap(false, Ordering::SeqCst);
                shared.down.store(true, Ordering::SeqCst);
                // What rumqttc kept of the connection that ended is not sent
                // on the next (issue 30): the requests it took back (a
                // broker answering "session present" had them published
                // again, stale and counted twice), and the event of a
                // publish whose flush timed out (counted published after
                // the reconnection, and not published here). Every one of
                // them is counted not published, once, just below.
                eventloop.pending.clear();
                eventloop.state.events.clear();
                lost_in_flight(&shared);
                if shared.stopping.load(Ordering::SeqCst) {
                    return;
                }
                let why = describe(&e);
                shared.set_problem(Some(if was_connected {
                    format!("connection lost ({why})")
                } else {
                    format!("cannot connect ({why})")
                }));
                let (now, every) = (Instant::now(), shared.warn_every());
                if was_connected {
                    if let Some(more) = shared.said().lost(now, every) {
                        warn!(
                            "MQTT {broker}: connection lost ({why}); connecting again{}",
                            Suppressed(more)
                        );
                    }
                } else if let Some(more) = shared.said().failed(&why, now, every) {
                    warn!(
                        "MQTT {broker}: cannot connect ({why}); trying again, at least every {} s \
                         (frames meanwhile are counted as broker unavailable){}",
                        MAX_BACKOFF.as_secs(),
                        Suppressed(more)
                    );
                }
                // A stop meanwhile aborts this task: the pause is not waited out.
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// A connection error in words a user can act on.
fn describe(e: &ConnectionError) -> String {
    use rumqttc::ConnectReturnCode as Code;
    match e {
        ConnectionError::ConnectionRefused(Code::BadUserNamePassword) => {
            "the broker refused the username or password".to_owned()
        }
        ConnectionError::ConnectionRefused(Code::NotAuthorized) => {
            "the broker says this client is not authorized: check username and password".to_owned()
        }
        ConnectionError::NetworkTimeout => format!("no answer within {CONNECT_TIMEOUT_SECS} s"),
        ConnectionError::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_differ_and_fit_mqtt_3_1_1() {
        let ids: std::collections::BTreeSet<String> = (0..100).map(|_| client_id()).collect();
        assert_eq!(ids.len(), 100);
        assert!(ids.iter().all(|id| id.len() <= 23 && id.is_ascii()));
    }

    #[test]
    fn the_outbox_hands_over_whole_payloads_in_order_and_refuses_what_has_no_room() {
        let (prod, cons) = HeapRb::<u8>::new(64).split();
        let shared = Arc::new(Shared::default());
        let mut outbox = Outbox {
            prod,
            shared: shared.clone(),
        };
        let mut inbox = Inbox {
            cons,
            payload: Vec::new(),
        };
        assert!(!outbox.is_connected());
        assert!(outbox.push(b"{\"Speed\":41.5}"));
        assert!(outbox.push(b""));
        assert!(!outbox.push(&[b'x'; 64]), "no room: nothing pushed");
        assert_eq!(inbox.pop(), Some(&b"{\"Speed\":41.5}"[..]));
        assert_eq!(inbox.pop(), Some(&b""[..]));
        assert_eq!(inbox.pop(), None);
        assert!(outbox.push(&[b'y'; 60]), "room again");
        assert_eq!(inbox.pop().map(<[u8]>::len), Some(60));
        shared.connected.store(true, Ordering::Relaxed);
        assert!(outbox.is_connected());
    }

    #[test]
    fn a_ca_file_that_cannot_be_used_is_named_when_the_publisher_configures_tls() {
        let missing = std::env::temp_dir().join("forza-relay-no-such-ca.pem");
        let e = tls_config(&Roots::CaFile(missing.clone())).unwrap_err();
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );
    }
}
