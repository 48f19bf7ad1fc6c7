//! The MQTT publisher: frames from the relay's tap published to a broker by a
//! thread of its own, so the relay's loop never waits on TCP, DNS or TLS.
//!
//! The publisher reads whole datagrams from a [`Tap`] (as the recorder does),
//! reads each with the relay's own rule ([`Reader`]), keeps the newest (the
//! race filter sees every one), and at most `max_rate` times a second encodes
//! the newest ([`Encoder`]: the JSON object or the influx line) and publishes
//! it to `topic`, QoS 0, not retained. Frames a newer one replaced before its
//! slot are counted as superseded, not lost.
//!
//! `<topic>/status` is retained: "online" once connected, "offline" as the last
//! will (the broker says it when the connection dies) and on a clean stop.
//!
//! A broker that is down, refuses the login or goes away: each frame due while
//! there is no connection is counted as not published (its own drop reason),
//! and the client connects again after a pause that doubles from 250 ms up to
//! [`MAX_BACKOFF`]. Nothing here blocks or panics its caller:
//! [`MqttPublisher::stop`] returns within [`STOP_WITHIN`] and a second
//! whatever the broker does.
//!
//! The network client is rumqttc on a current-thread tokio runtime owned by the
//! publisher's thread; TLS is rustls with ring, with the system's roots or a
//! `ca_file`.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use log::{info, warn};
use rumqttc::{
    AsyncClient, ConnectionError, Event, EventLoop, Incoming, LastWill, MqttOptions, Outgoing, QoS,
    TlsConfiguration, Transport,
};
use tokio::sync::Notify;

use super::{Encoder, Encoding, Frame, Selection};
use crate::filter::RaceFilter;
use crate::tap::Tap;
use crate::watch::Reader;
use crate::wire::{Format, Input, Packet, MAX_LEN};

/// Frames a second an MQTT destination publishes unless told otherwise: a
/// broker does not want 360.
pub const DEFAULT_MAX_RATE: u32 = 20;
/// The longest pause between two attempts to reach the broker.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The first pause after a failed attempt; it doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How long a stop waits for "offline" and the disconnect to go out.
pub const STOP_WITHIN: Duration = Duration::from_secs(1);
/// The broker's port for `mqtt://` when none is given.
pub const MQTT_PORT: u16 = 1883;
/// The broker's port for `mqtts://` when none is given.
pub const MQTTS_PORT: u16 = 8883;
/// How often the tap is read when `max_rate` is 0 (every frame).
const UNLIMITED_TICK: Duration = Duration::from_millis(2);
/// How long the broker may take to answer before the connection is given up
/// (rumqttc's connection timeout is in whole seconds).
const CONNECT_TIMEOUT_SECS: u64 = 5;
/// Keep-alive pings: a broker gone without a word is noticed within 1.5 × this.
const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// Requests (publishes) the client queues for its connection.
const REQUESTS: usize = 64;
/// The largest MQTT packet sent or taken: an all-column JSON frame is ~2.5 kB.
const MAX_PACKET: usize = 64 << 10;

/// Where the broker is: `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// A host name or an IP address (IPv6 without its brackets).
    pub host: String,
    /// The TCP port.
    pub port: u16,
    /// `mqtts://`: TLS.
    pub tls: bool,
}

impl Broker {
    /// Reads `mqtt://HOST[:PORT]` (port 1883) or `mqtts://HOST[:PORT]` (8883);
    /// an IPv6 address in brackets. The error names what is wrong.
    pub fn parse(addr: &str) -> Result<Broker, String> {
        let (tls, rest) = if let Some(rest) = strip_prefix_ignore_case(addr, "mqtts://") {
            (true, rest)
        } else if let Some(rest) = strip_prefix_ignore_case(addr, "mqtt://") {
            (false, rest)
        } else {
            return Err(format!(
                "{addr:?}: an MQTT broker is mqtt://HOST:PORT or mqtts://HOST:PORT"
            ));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let default_port = if tls { MQTTS_PORT } else { MQTT_PORT };
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{addr:?}: an IPv6 address ends with ]"))?;
            match after {
                "" => (host, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(format!("{addr:?}: write [ADDRESS]:PORT")),
                },
            }
        } else {
            match rest.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) {
            return Err(format!("{addr:?}: no broker host name or address in it"));
        }
        let port = match port {
            None => default_port,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("{addr:?}: the port {p:?} is not a number 1..65535"))?,
        };
        Ok(Broker {
            host: host.to_owned(),
            port,
            tls,
        })
    }
}

impl fmt::Display for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Which certificates a TLS connection trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// The system's (Windows' store, the distribution's bundle; `SSL_CERT_FILE`
    /// and `SSL_CERT_DIR` where set).
    System,
    /// The PEM certificates in this file (`ca_file`): a broker with a
    /// certificate of its own CA.
    CaFile(PathBuf),
}

/// What one MQTT destination does.
#[derive(Debug, Clone, PartialEq)]
pub struct MqttSettings {
    /// The broker.
    pub broker: Broker,
    /// The certificates trusted with `mqtts://`.
    pub roots: Roots,
    /// The login, if the broker wants one.
    pub username: Option<String>,
    /// The password, with `username`.
    pub password: Option<String>,
    /// Where frames are published; the status is at `<topic>/status`.
    pub topic: String,
    /// The payload: the JSON object or the influx line.
    pub encoding: Encoding,
    /// The columns written.
    pub selection: Selection,
    /// Frames a second at most; 0 publishes every frame.
    pub max_rate: u32,
    /// Publish only while racing (and the first frame after, as a UDP
    /// destination's `only_race_on`).
    pub only_race_on: bool,
    /// A frame older than this when its slot comes is not published.
    pub max_age: Option<Duration>,
    /// How the tap's datagrams are read: the relay's input.
    pub input: Input,
}

impl MqttSettings {
    /// JSON, every column, [`DEFAULT_MAX_RATE`], the system's roots, no login,
    /// every frame to `topic`.
    pub fn new(broker: Broker, topic: impl Into<String>, input: Input) -> MqttSettings {
        MqttSettings {
            broker,
            roots: Roots::System,
            username: None,
            password: None,
            topic: topic.into(),
            encoding: Encoding::Json,
            selection: Selection::all(),
            max_rate: DEFAULT_MAX_RATE,
            only_race_on: false,
            max_age: None,
            input,
        }
    }

    /// `<topic>/status`.
    pub fn status_topic(&self) -> String {
        format!("{}/status", self.topic)
    }
}

/// Why a publisher could not start. Its message names the value at fault.
#[derive(Debug)]
pub enum MqttError {
    /// The `ca_file` could not be read.
    CaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The `ca_file` holds no PEM certificate that can be used.
    NoCertificate {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        why: String,
    },
    /// The system has no root certificate to trust (`mqtts://` without `ca_file`).
    NoSystemRoots(String),
    /// rustls refused the configuration.
    Tls(rustls::Error),
    /// The thread or its runtime could not be made.
    Start(std::io::Error),
}

impl fmt::Display for MqttError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MqttError::CaFile { path, source } => {
                write!(f, "ca_file {}: cannot read it: {source}", path.display())
            }
            MqttError::NoCertificate { path, why } => write!(
                f,
                "ca_file {}: no certificate in it ({why}); it should hold the broker's CA \
                 certificate in PEM (-----BEGIN CERTIFICATE-----)",
                path.display()
            ),
            MqttError::NoSystemRoots(why) => write!(
                f,
                "mqtts:// found no root certificate on this system ({why}); give the broker's \
                 CA certificate as ca_file"
            ),
            MqttError::Tls(e) => write!(f, "TLS: {e}"),
            MqttError::Start(e) => write!(f, "cannot start the MQTT publisher: {e}"),
        }
    }
}

impl std::error::Error for MqttError {}

/// What a publisher did, counted since it started. Every datagram taken from
/// the tap ends in exactly one of the counts after `taken`, or is the newest
/// frame still waiting for its slot, or is on its way to the broker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MqttCounts {
    /// Datagrams taken from the tap.
    pub taken: u64,
    /// Frames written to the broker's connection.
    pub published: u64,
    /// Frames a newer one replaced before their slot (`max_rate`).
    pub superseded: u64,
    /// Frames left out by `only_race_on`.
    pub not_racing: u64,
    /// Frames older than `max_age` when their slot came.
    pub stale: u64,
    /// Datagrams that are no packet of the input format, or frames with no
    /// selected value (an influx line needs one).
    pub ignored: u64,
    /// Frames due while the broker could not be reached (down, refusing the
    /// login, gone): the destination's own drop reason.
    pub not_published: u64,
    /// Datagrams the relay could not hand over because the tap was full.
    pub tap_dropped: u64,
    /// Connections made (the first, and each reconnection).
    pub connections: u64,
    /// Connected now.
    pub connected: bool,
}

/// What the publisher's thread and its owner share.
#[derive(Debug, Default)]
struct Shared {
    taken: AtomicU64,
    published: AtomicU64,
    /// Frames handed to the client: `queued - published` are on their way.
    queued: AtomicU64,
    superseded: AtomicU64,
    not_racing: AtomicU64,
    stale: AtomicU64,
    ignored: AtomicU64,
    not_published: AtomicU64,
    tap_dropped: AtomicU64,
    connections: AtomicU64,
    connected: AtomicBool,
    stopping: AtomicBool,
    wake: Notify,
}

impl Shared {
    fn counts(&self) -> MqttCounts {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MqttCounts {
            taken: load(&self.taken),
            published: load(&self.published),
            superseded: load(&self.superseded),
            not_racing: load(&self.not_racing),
            stale: load(&self.stale),
            ignored: load(&self.ignored),
            not_published: load(&self.not_published),
            tap_dropped: load(&self.tap_dropped),
            connections: load(&self.connections),
            connected: self.connected.load(Ordering::Relaxed),
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// An MQTT publisher running on its own thread.
pub struct MqttPublisher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    ended: mpsc::Receiver<()>,
    broker: Broker,
}

impl MqttPublisher {
    /// Starts publishing what `tap` receives as `settings` say. Fails only on
    /// what can't work at all (a `ca_file` that can't be read, no thread); a
    /// broker that can't be reached is retried, not an error.
    pub fn start(settings: MqttSettings, tap: Tap) -> Result<MqttPublisher, MqttError> {
        let options = options(&settings)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(MqttError::Start)?;
        let shared = Arc::new(Shared::default());
        let (ended_tx, ended) = mpsc::channel::<()>();
        let broker = settings.broker.clone();
        let thread = std::thread::Builder::new()
            .name("mqtt".to_owned())
            .spawn({
                let shared = shared.clone();
                move || {
                    let _ended = ended_tx;
                    runtime.block_on(publish(settings, options, tap, &shared));
                    // A look-up or connection still in flight is not waited for.
                    runtime.shutdown_background();
                    shared.connected.store(false, Ordering::Relaxed);
                }
            })
            .map_err(MqttError::Start)?;
        Ok(MqttPublisher {
            shared,
            thread: Some(thread),
            ended,
            broker,
        })
    }

    /// What it did so far.
    pub fn counts(&self) -> MqttCounts {
        self.shared.counts()
    }

    /// The broker it publishes to.
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// Says "offline" (when connected), disconnects and ends the thread, within
    /// [`STOP_WITHIN`] and a second; returns what it did. A thread that does not
    /// end by then is left to end by itself.
    pub fn stop(mut self) -> MqttCounts {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
        match self
            .ended
            .recv_timeout(STOP_WITHIN + Duration::from_secs(1))
        {
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
}

impl Drop for MqttPublisher {
    fn drop(&mut self) {
        // A publisher dropped without `stop` still ends its thread.
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
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
        options.set_credentials(user.clone(), settings.password.clone().unwrap_or_default());
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
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    let mut store = rustls::RootCertStore::empty();
    match roots {
        Roots::CaFile(path) => {
            let pem = std::fs::read(path).map_err(|source| MqttError::CaFile {
                path: path.clone(),
                source,
            })?;
            let mut why = String::from("no PEM certificate");
            for cert in CertificateDer::pem_slice_iter(&pem) {
                match cert
                    .map_err(|e| e.to_string())
                    .and_then(|c| store.add(c).map_err(|e| e.to_string()))
                {
                    Ok(()) => {}
                    Err(e) => why = e,
                }
            }
            if store.is_empty() {
                return Err(MqttError::NoCertificate {
                    path: path.clone(),
                    why,
                });
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = match found.errors.first() {
                    Some(e) => e.to_string(),
                    None => "the store is empty".to_owned(),
                };
                return Err(MqttError::NoSystemRoots(why));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(MqttError::Tls)?
        .with_root_certificates(store)
        .with_no_client_auth())
}

/// The newest frame taken from the tap, waiting for its slot.
struct Latest {
    payload: Vec<u8>,
    format: Format,
    time: SystemTime,
    /// Not published (or dropped) yet.
    waiting: bool,
}

/// The publisher: takes frames from the tap on every tick and publishes the
/// newest, while [`drive`] runs the connection.
async fn publish(settings: MqttSettings, options: MqttOptions, mut tap: Tap, shared: &Arc<Shared>) {
    let (client, mut eventloop) = AsyncClient::new(options, REQUESTS);
    let mut network = eventloop.network_options();
    network
        .set_connection_timeout(CONNECT_TIMEOUT_SECS)
        .set_tcp_nodelay(true);
    eventloop.set_network_options(network);
    let status = settings.status_topic();
    let mut driver = tokio::spawn(drive(
        eventloop,
        client.clone(),
        shared.clone(),
        settings.topic.clone(),
        settings.broker.clone(),
    ));
    let period = match settings.max_rate {
        0 => UNLIMITED_TICK,
        rate => Duration::from_secs(1) / rate,
    };
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reader = Reader::new(settings.input);
    let mut race = RaceFilter::default();
    let mut encoder = Encoder::new(settings.encoding, &settings.selection);
    let mut latest = Latest {
        payload: Vec::with_capacity(MAX_LEN),
        format: Format::Fh6,
        time: SystemTime::UNIX_EPOCH,
        waiting: false,
    };
    let mut text = Vec::new();
    let mut dropped_seen = 0;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = shared.wake.notified() => {}
        }
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        while let Some(d) = tap.pop() {
            Shared::add(&shared.taken, 1);
            let Some(format) = reader.format_of(d.payload) else {
                Shared::add(&shared.ignored, 1);
                continue;
            };
            if settings.only_race_on {
                let race_on = Packet::new_unchecked(d.payload, format).race_on();
                if !race.admit(Some(race_on)) {
                    Shared::add(&shared.not_racing, 1);
                    continue;
                }
            }
            if latest.waiting {
                Shared::add(&shared.superseded, 1);
            }
            latest.payload.clear();
            latest.payload.extend_from_slice(d.payload);
            latest.format = format;
            latest.time = d.time;
            latest.waiting = true;
        }
        let dropped = tap.dropped();
        Shared::add(&shared.tap_dropped, dropped - dropped_seen);
        dropped_seen = dropped;
        if !latest.waiting {
            continue;
        }
        latest.waiting = false;
        let age = SystemTime::now()
            .duration_since(latest.time)
            .unwrap_or_default();
        if settings.max_age.is_some_and(|max| age > max) {
            Shared::add(&shared.stale, 1);
            continue;
        }
        if !shared.connected.load(Ordering::Relaxed) {
            Shared::add(&shared.not_published, 1);
            continue;
        }
        let frame = Frame {
            payload: &latest.payload,
            format: latest.format,
            time: latest.time,
        };
        if encoder.encode(&frame, &mut text).is_err() {
            Shared::add(&shared.ignored, 1);
            continue;
        }
        match client.try_publish(
            settings.topic.as_str(),
            QoS::AtMostOnce,
            false,
            text.clone(),
        ) {
            Ok(()) => Shared::add(&shared.queued, 1),
            Err(_) => Shared::add(&shared.not_published, 1),
        }
    }
    // A clean stop: "offline", retained, then the disconnect, both in order on
    // the connection; not waited for longer than STOP_WITHIN.
    let mut ended = false;
    if shared.connected.load(Ordering::SeqCst) {
        let _ = client.try_publish(status, QoS::AtLeastOnce, true, "offline");
        let _ = client.try_disconnect();
        ended = tokio::time::timeout(STOP_WITHIN, &mut driver).await.is_ok();
    }
    if !ended {
        driver.abort();
        let _ = driver.await;
    }
    // Whatever was still on its way did not go.
    lost_in_flight(shared);
}

/// Frames handed to the client and not written when the connection ended are
/// not published.
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
    let mut said: Option<String> = None;
    loop {
        match eventloop.poll().await {
            Ok(Event::Incoming(Incoming::ConnAck(_))) => {
                Shared::add(&shared.connections, 1);
                shared.connected.store(true, Ordering::SeqCst);
                backoff = FIRST_BACKOFF;
                said = None;
                info!("MQTT {broker}: connected; publishing to {topic}");
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
                lost_in_flight(&shared);
                if shared.stopping.load(Ordering::SeqCst) {
                    return;
                }
                let why = describe(&e);
                if was_connected {
                    warn!("MQTT {broker}: connection lost ({why}); connecting again");
                } else if said.as_deref() != Some(why.as_str()) {
                    warn!(
                        "MQTT {broker}: cannot connect ({why}); trying again, at least every {} s \
                         (frames meanwhile are counted as not published)",
                        MAX_BACKOFF.as_secs()
                    );
                }
                said = Some(why);
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
    fn broker_addresses_parse_with_their_default_ports() {
        let b = |s: &str| Broker::parse(s).unwrap();
        assert_eq!(
            b("mqtt://broker.local"),
            Broker {
                host: "broker.local".into(),
                port: 1883,
                tls: false
            }
        );
        assert_eq!(
            b("MQTTS://example.com:8884/"),
            Broker {
                host: "example.com".into(),
                port: 8884,
                tls: true
            }
        );
        assert_eq!(b("mqtts://10.0.0.2").port, 8883);
        let v6 = b("mqtt://[::1]:1884");
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 1884));
        assert_eq!(v6.to_string(), "mqtt://[::1]:1884");
        assert_eq!(b("mqtt://[fe80::1]").port, 1883);
        assert_eq!(b("mqtts://h:1").to_string(), "mqtts://h:1");
        for bad in [
            "tcp://h:1883",
            "h:1883",
            "mqtt://",
            "mqtt://:1883",
            "mqtt://h:0",
            "mqtt://h:70000",
            "mqtt://h:port",
            "mqtt://user@h",
            "mqtt://[::1",
            "mqtt://[::1]1883",
        ] {
            let e = Broker::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }

    #[test]
    fn client_ids_differ_and_fit_mqtt_3_1_1() {
        let ids: std::collections::BTreeSet<String> = (0..100).map(|_| client_id()).collect();
        assert_eq!(ids.len(), 100);
        assert!(ids.iter().all(|id| id.len() <= 23 && id.is_ascii()));
    }

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_certificate_is_named() {
        let missing = std::env::temp_dir().join("forza-relay-no-such-ca.pem");
        let e = tls_config(&Roots::CaFile(missing.clone())).unwrap_err();
        assert!(matches!(e, MqttError::CaFile { .. }), "{e}");
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );
        let junk = std::env::temp_dir().join(format!("forza-relay-ca-{}.pem", std::process::id()));
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = tls_config(&Roots::CaFile(junk.clone())).unwrap_err();
        let _ = std::fs::remove_file(&junk);
        assert!(matches!(e, MqttError::NoCertificate { .. }), "{e}");
        assert!(e.to_string().contains("BEGIN CERTIFICATE"), "{e}");
    }
}
