//! The counters' types, why frames were dropped, and every rendering of them.
//!
//! The core ([`crate::fanout`]) keeps and counts them; the relay's shell reads
//! them as one [`Snapshot`], which adds what only the shell knows (the address
//! bound, the run time, what taps dropped). The periodic summary line
//! ([`Summary`]), the final report (`Display` for [`Snapshot`]), the JSON form
//! for scripts and the bench ([`Snapshot::to_json`]) and a destination's trouble
//! in a few words ([`Problems`], for a dashboard) are all rendered here.
//! How a change of routes reads (`Display` for [`crate::fanout::Changes`]) is
//! in `stats/changes.rs`. The imports go one way: stats reads the routes and
//! plan types (`fanout::routes`, `fanout::plan`), never the core ([`Fanout`]),
//! and the core counts with the types here.
//!
//! [`Fanout`]: crate::fanout::Fanout
//!
//! Each destination's latency (from the moment a datagram reached the machine
//! to the return of its send, issue 15) is kept in fixed log-linear histograms
//! ([`LatencyHistogram`], made when the destination is, so recording allocates
//! nothing): one over the summary interval, reset only when a summary is taken,
//! and one adding up the intervals before it, for the whole run
//! ([`Latencies`]). A snapshot carries their p50, p99 and max ([`Latency`]).

use std::fmt::{self, Write as _};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::fanout::routes::Output;
use crate::output::mqtt::MqttSettings;
use crate::wire::Format;

mod changes;
mod senders;

pub use senders::{Sender, Senders, FOLLOW_SILENCE, MAX_SENDERS};

/// Why a frame did not reach a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// `only_race_on` and IsRaceOn was 0.
    NotRacing,
    /// `max_rate`: a newer frame replaced it before its slot came.
    RateLimited,
    /// The datagram could not be translated to the destination's format.
    Untranslatable,
    /// The socket was full and the backlog kept newer frames instead.
    Backlog,
    /// The send failed (counted by kind in [`SendErrors`]).
    SendError,
    /// `max_age`: older than the limit when it would have been sent (on
    /// arrival, waiting for its rate slot, or in the backlog).
    Stale,
    /// An MQTT destination's broker was not connected (down, refusing the
    /// login, or gone) when the frame was due.
    BrokerUnavailable,
}

impl DropReason {
    /// How many reasons there are: the length of every table indexed by one.
    pub const COUNT: usize = DropReason::BrokerUnavailable as usize + 1;

    /// Every reason, in the order they are printed.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::NotRacing,
        DropReason::RateLimited,
        DropReason::Untranslatable,
        DropReason::Backlog,
        DropReason::SendError,
        DropReason::Stale,
        DropReason::BrokerUnavailable,
    ];

    /// Its key in the JSON form.
    pub const fn key(self) -> &'static str {
        match self {
            DropReason::NotRacing => "not_racing",
            DropReason::RateLimited => "rate_limited",
            DropReason::Untranslatable => "untranslatable",
            DropReason::Backlog => "backlog_full",
            DropReason::SendError => "send_failed",
            DropReason::Stale => "stale",
            DropReason::BrokerUnavailable => "broker_unavailable",
        }
    }

    /// How the summary names it.
    pub const fn label(self) -> &'static str {
        match self {
            DropReason::NotRacing => "not racing",
            DropReason::RateLimited => "rate-limited",
            DropReason::Untranslatable => "untranslatable",
            DropReason::Backlog => "backlog full",
            DropReason::SendError => "send errors",
            DropReason::Stale => "stale",
            DropReason::BrokerUnavailable => "broker unavailable",
        }
    }
}

/// Send failures by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendErrorKind {
    /// Nothing listens there (ICMP port unreachable; Windows reports a reset).
    Refused,
    /// No route to the host or network.
    Unreachable,
    /// The datagram is larger than the path allows.
    TooLarge,
    /// Anything else.
    Other,
}

impl SendErrorKind {
    /// How many kinds there are: the length of every table indexed by one.
    pub const COUNT: usize = SendErrorKind::Other as usize + 1;

    /// Every kind, in the order they are printed.
    pub const ALL: [SendErrorKind; SendErrorKind::COUNT] = [
        SendErrorKind::Refused,
        SendErrorKind::Unreachable,
        SendErrorKind::TooLarge,
        SendErrorKind::Other,
    ];

    /// Classifies an I/O error from `send`.
    pub fn of(e: &io::Error) -> Self {
        use io::ErrorKind as K;
        match e.kind() {
            K::ConnectionRefused | K::ConnectionReset => SendErrorKind::Refused,
            K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable => {
                SendErrorKind::Unreachable
            }
            _ if e.raw_os_error() == Some(libc_emsgsize()) => SendErrorKind::TooLarge,
            _ => SendErrorKind::Other,
        }
    }

    /// Its key in the JSON form.
    pub const fn key(self) -> &'static str {
        match self {
            SendErrorKind::Refused => "refused",
            SendErrorKind::Unreachable => "unreachable",
            SendErrorKind::TooLarge => "too_large",
            SendErrorKind::Other => "other",
        }
    }

    /// How the summary names it.
    pub const fn label(self) -> &'static str {
        match self {
            SendErrorKind::Refused => "refused (nothing listening)",
            SendErrorKind::Unreachable => "unreachable",
            SendErrorKind::TooLarge => "too large",
            SendErrorKind::Other => "other",
        }
    }
}

// Each table's entry `i` is the variant whose index is `i`.
const _: () = {
    let mut i = 0;
    while i < DropReason::COUNT {
        assert!(DropReason::ALL[i] as usize == i);
        i += 1;
    }
    let mut i = 0;
    while i < SendErrorKind::COUNT {
        assert!(SendErrorKind::ALL[i] as usize == i);
        i += 1;
    }
};

/// EMSGSIZE on this platform (WSAEMSGSIZE on Windows).
const fn libc_emsgsize() -> i32 {
    if cfg!(windows) {
        10040
    } else if cfg!(any(
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd"
    )) {
        40
    } else {
        90
    }
}

/// Send failures counted by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendErrors([u64; SendErrorKind::COUNT]);

impl SendErrors {
    /// Counts one.
    pub fn add(&mut self, kind: SendErrorKind) {
        self.0[kind as usize] += 1;
    }

    /// The count for `kind`.
    pub fn get(&self, kind: SendErrorKind) -> u64 {
        self.0[kind as usize]
    }

    /// All kinds together.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// Counters of one destination. The core keeps them ([`crate::fanout`]): every
/// datagram it admitted while the destination existed is `received`, and is
/// then sent, dropped for one reason, or held (waiting for its rate slot, or in
/// the shell's backlog), so `received = sent + dropped + held` at every moment
/// ([`DestinationStats::is_balanced`]), and `held` is 0 once the relay stopped.
/// `received` and `sent`, which every frame counts, come first (`repr(C)`
/// keeps the order): one cache line (issue 26).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DestinationStats {
    /// Admitted datagrams this destination saw.
    pub received: u64,
    /// Frames handed to the OS.
    pub sent: u64,
    /// Frames not sent, by [`DropReason`].
    pub dropped: [u64; DropReason::COUNT],
    /// Frames held now: the one waiting for its `max_rate` slot, and those in
    /// the shell's backlog while the socket would block.
    pub held: u64,
    /// Send failures by kind.
    pub send_errors: SendErrors,
}

impl DestinationStats {
    /// Counts a frame dropped for `reason`.
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        self.dropped[reason as usize] += 1;
    }

    /// True when every datagram received is sent, dropped or held.
    pub fn is_balanced(&self) -> bool {
        self.received == self.sent + self.dropped_total() + self.held
    }

    /// Frames dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize]
    }

    /// Frames dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

/// Sub-buckets per power of two: a latency is kept to within 1/16 (6 %) of
/// its value, and to the microsecond below 32 µs.
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Latencies of 2^32 µs (71 minutes) and more share the last bucket.
const TOP_BITS: u32 = 32;
/// Buckets of a [`LatencyHistogram`]: `2 * SUB` of one microsecond each, then
/// `SUB` for each power of two up to `TOP_BITS`.
const BUCKETS: usize = 2 * SUB + (TOP_BITS - SUB_BITS - 1) as usize * SUB;

/// The bucket of a latency of `us` microseconds.
fn bucket(us: u64) -> usize {
    let us = us.min((1 << TOP_BITS) - 1);
    if us < 2 * SUB as u64 {
        return us as usize;
    }
    let shift = 63 - us.leading_zeros() - SUB_BITS;
    2 * SUB + (shift as usize - 1) * SUB + ((us >> shift) as usize - SUB)
}

/// The largest latency, in microseconds, that bucket `i` holds.
fn bucket_top(i: usize) -> u64 {
    if i < 2 * SUB {
        return i as u64;
    }
    let k = i - 2 * SUB;
    let shift = k / SUB + 1;
    let top = (k % SUB + SUB) as u64;
    ((top + 1) << shift) - 1
}

// The last bucket holds the largest latency kept apart.
const _: () = assert!(BUCKETS == 464);

/// Latencies counted in fixed log-linear buckets, as HDR histograms keep
/// them: made once, recording never allocates. Percentiles are the top of
/// their bucket (at most 6 % above the true value), the maximum is exact.
#[derive(Clone)]
pub struct LatencyHistogram {
    counts: [u32; BUCKETS],
    count: u64,
    max_us: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: [0; BUCKETS],
            count: 0,
            max_us: 0,
        }
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LatencyHistogram({:?})", self.figures())
    }
}

impl LatencyHistogram {
    /// Counts one latency.
    #[inline]
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let slot = &mut self.counts[bucket(us)];
        *slot = slot.saturating_add(1);
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    /// p50, p99 and max of what was counted.
    pub fn figures(&self) -> Latency {
        Self::figures_of(&[self])
    }

    /// p50, p99 and max of what `all` counted together: a latency `p`
    /// percent of them are at or below (nearest rank), as the top of its
    /// bucket but never above the maximum. Nothing is allocated.
    fn figures_of(all: &[&LatencyHistogram]) -> Latency {
        let count: u64 = all.iter().map(|h| h.count).sum();
        if count == 0 {
            return Latency::default();
        }
        let max_us = all.iter().map(|h| h.max_us).max().unwrap_or(0);
        let percentile = |p: u64| {
            let rank = (count * p).div_ceil(100).max(1);
            let mut seen = 0;
            for i in 0..BUCKETS {
                seen += all.iter().map(|h| u64::from(h.counts[i])).sum::<u64>();
                if seen >= rank {
                    return Duration::from_micros(bucket_top(i).min(max_us));
                }
            }
            Duration::from_micros(max_us)
        };
        Latency {
            count,
            p50: percentile(50),
            p99: percentile(99),
            max: Duration::from_micros(max_us),
        }
    }

    /// Adds what `other` counted.
    fn absorb(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.count += other.count;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Forgets everything counted.
    pub fn clear(&mut self) {
        *self = LatencyHistogram::default();
    }
}

/// Which stretch of time latency figures cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyWindow {
    /// Since the last periodic summary (since the start before the first);
    /// only taking a summary starts a new interval, so other readers (a
    /// dashboard, a page) don't disturb the summary's figures.
    Interval,
    /// Since the destination started.
    Run,
}

/// One destination's latencies, over the summary interval and over the run.
/// A send is counted once, in the interval's histogram; the intervals before
/// it are added up when a new one starts, so the run's figures are those of
/// both together (issue 26: one histogram's lines per send, not two).
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    interval: LatencyHistogram,
    /// Every interval before the current one.
    before: LatencyHistogram,
}

impl Latencies {
    /// Counts a frame that reached the machine at `received` and whose send
    /// returned at `sent`.
    #[inline]
    pub fn record(&mut self, received: Instant, sent: Instant) {
        self.interval
            .record(sent.saturating_duration_since(received));
    }

    /// The figures over `window`.
    pub fn figures(&self, window: LatencyWindow) -> Latency {
        match window {
            LatencyWindow::Interval => self.interval.figures(),
            LatencyWindow::Run => LatencyHistogram::figures_of(&[&self.before, &self.interval]),
        }
    }

    /// A summary was taken: the interval starts again.
    pub fn new_interval(&mut self) {
        self.before.absorb(&self.interval);
        self.interval.clear();
    }
}

/// A destination's latency over a window: from the moment each datagram
/// reached the machine to the return of the send that delivered it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    /// Frames measured (sent in the window).
    pub count: u64,
    /// Half of them took at most this.
    pub p50: Duration,
    /// 99 % took at most this.
    pub p99: Duration,
    /// The longest.
    pub max: Duration,
}

impl Serialize for Latency {
    /// `{"p50":…,"p99":…,"max":…,"count":…}` in whole microseconds; `null`
    /// figures when nothing was sent.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let us = |d: Duration| {
            (self.count > 0).then(|| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        };
        let mut st = s.serialize_struct("Latency", 4)?;
        st.serialize_field("p50", &us(self.p50))?;
        st.serialize_field("p99", &us(self.p99))?;
        st.serialize_field("max", &us(self.max))?;
        st.serialize_field("count", &self.count)?;
        st.end()
    }
}

/// p50/p99/max in milliseconds, compact: `0.02/0.05/1.3` (the caller adds
/// the unit). Two decimals
/// below a millisecond, one below 100 ms, none above.
pub struct LatencyText<'a>(pub &'a Latency);

impl fmt::Display for LatencyText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.0;
        let ms = |f: &mut fmt::Formatter<'_>, d: Duration| {
            let ms = d.as_secs_f64() * 1e3;
            let digits = match ms {
                m if m < 1.0 => 2,
                m if m < 100.0 => 1,
                _ => 0,
            };
            write!(f, "{ms:.digits$}")
        };
        ms(f, l.p50)?;
        f.write_str("/")?;
        ms(f, l.p99)?;
        f.write_str("/")?;
        ms(f, l.max)
    }
}

impl Serialize for SendErrors {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(SendErrorKind::ALL.len()))?;
        for kind in SendErrorKind::ALL {
            map.serialize_entry(kind.key(), &self.get(kind))?;
        }
        map.end()
    }
}

/// Counters of the listening socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputStats {
    /// Datagrams received.
    pub received: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Datagrams whose length fits no expected format (still sent to `same`).
    pub malformed: u64,
    /// Datagrams from senders outside `listen.allow` (dropped).
    pub disallowed: u64,
    /// Receive errors other than "would block".
    pub recv_errors: u64,
    /// The format of the last packet that had one.
    pub last_format: Option<Format>,
    /// True when `last_format` is `auto`'s default for a 324-byte packet, not yet
    /// confirmed by the packets (see [`crate::wire::Detector::is_certain`]).
    pub format_guessed: bool,
    /// Who sends, and whose stream is followed (issue 23).
    pub senders: Senders,
}

impl Serialize for InputStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("InputStats", 9)?;
        st.serialize_field("received", &self.received)?;
        st.serialize_field("bytes", &self.bytes)?;
        st.serialize_field("malformed", &self.malformed)?;
        st.serialize_field("disallowed", &self.disallowed)?;
        st.serialize_field("recv_errors", &self.recv_errors)?;
        st.serialize_field("format", &self.last_format)?;
        st.serialize_field("format_guessed", &self.format_guessed)?;
        st.serialize_field("senders", &senders::SendersList(&self.senders))?;
        st.serialize_field("other_senders", &self.senders.others())?;
        st.end()
    }
}

/// How long a destination's newest send, refusal or other send error counts
/// for its [`Status`] (issue 23).
pub const STATUS_WINDOW: Duration = Duration::from_secs(5);
/// How long a destination that was refused must send without a refusal to be
/// receiving again: on a closed port every other send is refused (the ICMP
/// answer of one fails the next), so one send that went says nothing.
pub const RECOVERY: Duration = Duration::from_secs(1);

/// How a destination is doing now, from its newest sends and send errors
/// (not from the run's totals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Frames go, and nothing refused or failed in the last [`STATUS_WINDOW`].
    Ok,
    /// Refused in the last [`STATUS_WINDOW`] (nothing listens on its port)
    /// and not receiving again since.
    Refused,
    /// Another send error in the last [`STATUS_WINDOW`].
    Failing,
    /// Nothing sent for [`STATUS_WINDOW`]: nothing came, or every frame was
    /// filtered.
    Idle,
}

/// When a destination last sent, was refused and failed otherwise: what its
/// [`Status`] is worked out from, and when it is receiving again. Kept by the
/// core with its counters; a send that went costs one store and one test, of
/// the two fields first (`repr(C)` keeps the order: one cache line, issue 26).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Health {
    last_sent: Option<Instant>,
    /// Refused and not receiving again since.
    refusing: bool,
    last_refused: Option<Instant>,
    last_failed: Option<Instant>,
    /// Refused since it last received (or since the start).
    refused: u64,
}

impl Health {
    /// A send went at `at`; `Some(n)` when this makes a destination refused
    /// `n` times receiving again (it sent without a refusal for
    /// [`RECOVERY`]), which is said once.
    #[inline]
    pub fn sent(&mut self, at: Instant) -> Option<u64> {
        self.last_sent = Some(at);
        if self.refusing {
            return self.recovered(at);
        }
        None
    }

    #[cold]
    #[inline(never)]
    fn recovered(&mut self, at: Instant) -> Option<u64> {
        let quiet = self
            .last_refused
            .is_none_or(|refused| at.saturating_duration_since(refused) >= RECOVERY);
        if !quiet {
            return None;
        }
        self.refusing = false;
        Some(std::mem::take(&mut self.refused))
    }

    /// A send failed at `at`.
    #[cold]
    pub fn failed(&mut self, kind: SendErrorKind, at: Instant) {
        match kind {
            SendErrorKind::Refused => {
                self.last_refused = Some(at);
                self.refused += 1;
                self.refusing = true;
            }
            _ => self.last_failed = Some(at),
        }
    }

    /// Its status at `now`.
    pub fn status(&self, now: Instant) -> Status {
        let recent = |t: Option<Instant>| {
            t.is_some_and(|t| now.saturating_duration_since(t) < STATUS_WINDOW)
        };
        if self.refusing && recent(self.last_refused) {
            Status::Refused
        } else if recent(self.last_failed) {
            Status::Failing
        } else if recent(self.last_sent) {
            Status::Ok
        } else {
            Status::Idle
        }
    }
}

/// An MQTT destination's settings as a snapshot shows them: never the
/// password, only whether there is one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MqttRow {
    /// Where frames are published.
    pub topic: String,
    /// The login's user name.
    pub username: Option<String>,
    /// The environment variable the password is read from.
    pub password_env: Option<String>,
    /// Whether there is a password (from the file or `password_env`).
    pub password_set: bool,
    /// The CA certificate file trusted, as a path.
    pub ca_file: Option<String>,
    /// Frames its publisher wrote to the broker's connection.
    pub published: u64,
    /// Frames handed to its publisher and lost: the connection ended (or
    /// its queue was full) before they were written. Counted `sent` by the
    /// relay, which handed them over.
    pub not_published: u64,
    /// Connections made to the broker (the first, and each reconnection).
    pub connections: u64,
}

impl MqttRow {
    /// The row of `settings`.
    pub fn of(settings: &MqttSettings) -> MqttRow {
        let mut row = MqttRow::default();
        row.fill(settings);
        row
    }

    /// Fills it from `settings`, reusing its texts' capacity.
    pub fn fill(&mut self, settings: &MqttSettings) {
        fn set(into: &mut Option<String>, from: Option<&str>) {
            match (into.as_mut(), from) {
                (Some(into), Some(from)) => {
                    into.clear();
                    into.push_str(from);
                }
                (_, from) => *into = from.map(str::to_owned),
            }
        }
        self.topic.clone_from(&settings.topic);
        set(&mut self.username, settings.username.as_deref());
        set(&mut self.password_env, settings.password_env.as_deref());
        self.password_set = settings.password.is_some();
        let ca = settings.ca_file().map(|p| p.to_string_lossy());
        set(&mut self.ca_file, ca.as_deref());
    }
}

/// One destination's counters, with what it is: the settings the running
/// relay has for it (what the page draws its rows from: issue 23) and how it
/// is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationSnapshot {
    /// Its name.
    pub name: String,
    /// Its resolved address; `None` for an MQTT broker (its publisher looks
    /// the host up at each connection).
    pub addr: Option<SocketAddr>,
    /// Its address as the user wrote it (a hostname stays a hostname).
    pub addr_text: String,
    /// What it receives.
    pub output: Output,
    /// The columns of a text output, as written; empty: every column.
    pub fields: Vec<String>,
    /// An MQTT destination's settings.
    pub mqtt: Option<MqttRow>,
    /// Only frames of a race.
    pub only_race_on: bool,
    /// At most this many frames a second; 0 = every frame.
    pub max_rate: u32,
    /// No frame older than this; `None` = frames of any age.
    pub max_age: Option<Duration>,
    /// How it is doing now.
    pub status: Status,
    /// Its counters.
    pub stats: DestinationStats,
    /// Its latency over the snapshot's window: the summary interval for a
    /// periodic summary or a reader's snapshot, the whole run for the final one.
    pub latency: Latency,
}

impl Serialize for DestinationSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("addr", &self.addr_text)?;
        map.serialize_entry("resolved", &self.addr)?;
        map.serialize_entry("output", &self.output)?;
        if self.output.is_text() {
            map.serialize_entry("fields", &self.fields)?;
        }
        if let Some(mqtt) = &self.mqtt {
            map.serialize_entry("topic", &mqtt.topic)?;
            map.serialize_entry("username", &mqtt.username)?;
            map.serialize_entry("password_env", &mqtt.password_env)?;
            map.serialize_entry("password_set", &mqtt.password_set)?;
            map.serialize_entry("ca_file", &mqtt.ca_file)?;
            map.serialize_entry("published", &mqtt.published)?;
            map.serialize_entry("not_published", &mqtt.not_published)?;
            map.serialize_entry("connections", &mqtt.connections)?;
        }
        map.serialize_entry("only_race_on", &self.only_race_on)?;
        map.serialize_entry("max_rate", &self.max_rate)?;
        let age = self
            .max_age
            .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX));
        map.serialize_entry("max_age_ms", &age)?;
        map.serialize_entry("status", &self.status)?;
        map.serialize_entry("received", &self.stats.received)?;
        map.serialize_entry("sent", &self.stats.sent)?;
        for reason in DropReason::ALL {
            map.serialize_entry(reason.key(), &self.stats.dropped(reason))?;
        }
        map.serialize_entry("held", &self.stats.held)?;
        map.serialize_entry("send_errors", &self.stats.send_errors)?;
        map.serialize_entry("latency_us", &self.latency)?;
        map.end()
    }
}

/// The configuration file's state, as its owner last told the relay
/// ([`crate::owner`]): which file, and why its last saved version was not
/// applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ConfigState {
    /// The file's path; `None` when the configuration came from the command
    /// line.
    pub path: Option<String>,
    /// Why the last saved version of the file was not applied (its problems,
    /// each with file and line); `None` once a save applies.
    pub error: Option<String>,
}

/// Every counter of a running relay at one moment: what every summary, report
/// and dashboard is rendered from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// The listening address.
    pub listen: SocketAddr,
    /// Time since the relay started.
    #[serde(rename = "elapsed_s", serialize_with = "seconds")]
    pub elapsed: Duration,
    /// Input counters.
    pub input: InputStats,
    /// Every destination, in configuration order.
    pub destinations: Vec<DestinationSnapshot>,
    /// Datagrams not copied to a tap (a capture file, the dashboard) because
    /// its reader fell behind; forwarding is never affected.
    pub tap_dropped: u64,
    /// Datagrams a recording took but could not write (its disk is full, or
    /// the file can no longer be written); forwarding is never affected.
    pub not_recorded: u64,
    /// The configuration file's state.
    pub config: ConfigState,
}

fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Which summary a JSON line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotKind {
    /// A periodic summary.
    Summary,
    /// The final summary, after the relay stopped.
    Final,
}

impl SnapshotKind {
    const fn key(self) -> &'static str {
        match self {
            SnapshotKind::Summary => "summary",
            SnapshotKind::Final => "final",
        }
    }
}

impl Snapshot {
    /// A snapshot of nothing: a buffer for [`crate::relay::Snapshots`] to fill.
    pub fn empty() -> Snapshot {
        Snapshot {
            listen: SocketAddr::from(([0, 0, 0, 0], 0)),
            elapsed: Duration::ZERO,
            input: InputStats::default(),
            destinations: Vec::new(),
            tap_dropped: 0,
            not_recorded: 0,
            config: ConfigState::default(),
        }
    }

    /// The counters of the destination called `name`.
    pub fn destination(&self, name: &str) -> Option<&DestinationSnapshot> {
        self.destinations.iter().find(|d| d.name == name)
    }

    /// One JSON object on one line: `{"event":"summary","elapsed_s":…,"listen":…,
    /// "input":{…},"destinations":[{"name":…,"sent":…,"not_racing":…,…,"stale":…,
    /// "latency_us":{"p50":…,"p99":…,"max":…,"count":…}}]}`.
    pub fn to_json(&self, kind: SnapshotKind) -> String {
        #[derive(Serialize)]
        struct Line<'a> {
            event: &'static str,
            #[serde(flatten)]
            snapshot: &'a Snapshot,
        }
        serde_json::to_string(&Line {
            event: kind.key(),
            snapshot: self,
        })
        .unwrap_or_else(|e| format!("{{\"event\":\"error\",\"error\":\"{e}\"}}"))
    }
}

impl fmt::Display for Snapshot {
    /// The final summary: how long it ran, the input, every destination.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.input;
        write!(
            f,
            "forza-relay ran for {}. Received {} packets on {}",
            Elapsed(self.elapsed),
            i.received,
            self.listen
        )?;
        if let Some(format) = i.last_format {
            write!(f, " ({format}{})", if i.format_guessed { "?" } else { "" })?;
        }
        write!(
            f,
            ", {} malformed, {} disallowed",
            i.malformed, i.disallowed
        )?;
        if i.recv_errors > 0 {
            write!(f, ", {} receive errors", i.recv_errors)?;
        }
        if self.tap_dropped > 0 {
            write!(
                f,
                ", {} not recorded or shown (the reader fell behind)",
                self.tap_dropped
            )?;
        }
        if self.not_recorded > 0 {
            write!(
                f,
                ", {} not recorded (writing the capture failed)",
                self.not_recorded
            )?;
        }
        f.write_str(".")?;
        for d in &self.destinations {
            write!(f, "\n  {}", d.name)?;
            match d.addr {
                Some(addr) if d.name != addr.to_string() => write!(f, " ({addr})")?,
                None if d.name != d.addr_text => write!(f, " ({})", d.addr_text)?,
                _ => {}
            }
            write!(
                f,
                ", {}: sent {}{}{}",
                d.output,
                d.stats.sent,
                Refusals(&d.stats),
                Drops(&d.stats)
            )?;
            if let Some(m) = d.mqtt.as_ref().filter(|m| m.not_published > 0) {
                write!(
                    f,
                    ", {} not published (its connection ended or its queue was full first)",
                    m.not_published
                )?;
            }
            if d.latency.count > 0 {
                write!(f, ", latency {} ms (p50/p99/max)", LatencyText(&d.latency))?;
            }
        }
        Ok(())
    }
}

/// The periodic one-line summary: rates since the previous line.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// When the previous line was made (time since start) and the count then.
    previous: (Duration, u64),
}

/// The end of the relay's idle line: "waiting: nothing received on ADDR in the
/// last 10 s (…); run `forza-relay doctor` to find out why".
pub const IDLE_HINT: &str = "run `forza-relay doctor` to find out why";

impl Summary {
    /// The line for `now`, relative to the previous call.
    pub fn line(&mut self, now: &Snapshot) -> String {
        let (since, before) =
            std::mem::replace(&mut self.previous, (now.elapsed, now.input.received));
        let interval = now.elapsed.saturating_sub(since);
        let received = now.input.received.saturating_sub(before);
        let i = &now.input;
        if received == 0 {
            return format!(
                "waiting: nothing received on {} in the last {} (is the game's Data Out \
                 pointed here?); {}",
                now.listen,
                Elapsed(interval),
                IDLE_HINT
            );
        }
        let mut line = format!(
            "in {:.0}/s ({} total",
            received as f64 / interval.as_secs_f64().max(1e-9),
            i.received
        );
        if let Some(f) = i.last_format {
            let _ = write!(line, ", {f}{}", if i.format_guessed { "?" } else { "" });
        }
        if i.malformed > 0 {
            let _ = write!(line, ", {} malformed", i.malformed);
        }
        if i.disallowed > 0 {
            let _ = write!(line, ", {} disallowed", i.disallowed);
        }
        line.push(')');
        for d in &now.destinations {
            let _ = write!(
                line,
                " | {} {} sent{}{}",
                d.name,
                d.stats.sent,
                Refusals(&d.stats),
                Drops(&d.stats)
            );
            if d.latency.count > 0 {
                let _ = write!(line, ", lat {} ms", LatencyText(&d.latency));
            }
        }
        line
    }
}

/// A duration as a person reads it: `42s`, `3m 05s`, `2h 01m`.
pub struct Elapsed(pub Duration);

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.as_secs();
        match s {
            0..=59 => write!(f, "{}.{}s", s, self.0.subsec_millis() / 100),
            60..=3599 => write!(f, "{}m {:02}s", s / 60, s % 60),
            _ => write!(f, "{}h {:02}m", s / 3600, s % 3600 / 60),
        }
    }
}

/// A destination's trouble in a few words, for a dashboard's table: the send
/// errors by kind and the drops that are not the user's own filters
/// (untranslatable, backlog full, broker unavailable), `3 refused (nothing listening), 1
/// untranslatable`; empty when there is none.
pub struct Problems<'a>(pub &'a DestinationStats);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let errors = SendErrorKind::ALL.map(|kind| (s.send_errors.get(kind), kind.label()));
        let drops = [
            DropReason::Untranslatable,
            DropReason::Backlog,
            DropReason::BrokerUnavailable,
        ]
        .map(|reason| (s.dropped(reason), reason.label()));
        let mut sep = "";
        for (n, label) in errors.into_iter().chain(drops) {
            if n > 0 {
                write!(f, "{sep}{n} {label}")?;
                sep = ", ";
            }
        }
        Ok(())
    }
}

/// ` (N refused: nothing listening)` after a sent count, when the
/// destination's computer refused some of what was sent; empty when it
/// refused none. UDP has no receipts: a refusal comes back for a datagram
/// already sent, so the refused are part of the sent count, not a drop (a
/// tool that isn't running shows as `sent 721 (720 refused: nothing
/// listening)`).
pub struct Refusals<'a>(pub &'a DestinationStats);

impl fmt::Display for Refusals<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.send_errors.get(SendErrorKind::Refused) {
            0 => Ok(()),
            n => write!(f, " ({n} refused: nothing listening)"),
        }
    }
}

/// `, N label` for every non-zero drop reason and send error kind but the
/// refusals ([`Refusals`] says those beside the sent count).
pub struct Drops<'a>(pub &'a DestinationStats);

impl fmt::Display for Drops<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        for reason in DropReason::ALL {
            let n = s.dropped(reason);
            if n > 0 && reason != DropReason::SendError {
                write!(f, ", {n} {}", reason.label())?;
            }
        }
        for kind in SendErrorKind::ALL {
            let n = s.send_errors.get(kind);
            if n > 0 && kind != SendErrorKind::Refused {
                write!(f, ", {n} send errors: {}", kind.label())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
