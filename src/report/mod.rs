//! Every rendering of the counters, joined with what they are about: the
//! relay's shell reads the core's counters as one [`Snapshot`], with each
//! destination's settings (its routes' and configuration's) and what only the
//! shell knows (the address bound, the run time, what taps dropped). The
//! periodic summary line ([`Summary`]), the final report (`Display` for
//! [`Snapshot`]), the JSON form for scripts and the bench
//! ([`Snapshot::to_json`]) and a destination's trouble in a few words
//! ([`Problems`], for a dashboard) are all rendered here.

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::counters::{
    DestinationStats, DropReason, InputStats, Latency, LatencyWindow, SendErrorKind, Status,
};
use crate::fanout::routes::Output;
use crate::fanout::{Counted, Destination, Fanout, Records};
use crate::numbers::Elapsed;
use crate::output::mqtt::MqttSettings;

pub mod query;

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
    /// Why the broker can't be reached now, as the log said it; `None` while
    /// connected.
    pub problem: Option<String>,
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
    /// The last racing frame through blank ones for up to this; `None` = off.
    pub hold: Option<Duration>,
    /// What a text destination is sent: frames, laps, events.
    pub records: Records,
    /// How it is doing now.
    pub status: Status,
    /// Its counters.
    pub stats: DestinationStats,
    /// Its latency over the snapshot's window: the summary interval for a
    /// periodic summary or a reader's snapshot, the whole run for the final one.
    pub latency: Latency,
    /// Blank frames it got the last racing frame in place of (`hold`).
    pub held_through_blank: u64,
}

impl DestinationSnapshot {
    /// The row of destination `d`, which counted `counted`.
    pub fn of(d: &Destination, counted: Counted) -> DestinationSnapshot {
        DestinationSnapshot {
            name: d.name.clone(),
            addr: d.target.udp(),
            addr_text: d.addr_text.clone(),
            output: d.output,
            fields: d
                .fields
                .as_ref()
                .map(|f| f.names.clone())
                .unwrap_or_default(),
            mqtt: d.target.mqtt().map(MqttRow::of),
            only_race_on: d.only_race_on,
            max_rate: d.max_rate,
            max_age: d.max_age,
            hold: d.hold,
            records: d.records,
            status: counted.status,
            stats: counted.stats,
            latency: counted.latency,
            held_through_blank: counted.held_through_blank,
        }
    }

    /// As [`DestinationSnapshot::of`], into this row: its texts keep their
    /// room, so a row taken again allocates nothing unless a name grew.
    pub fn fill(&mut self, d: &Destination, counted: Counted) {
        self.name.clone_from(&d.name);
        self.addr = d.target.udp();
        self.addr_text.clone_from(&d.addr_text);
        self.output = d.output;
        match &d.fields {
            Some(f) => self.fields.clone_from(&f.names),
            None => self.fields.clear(),
        }
        match (d.target.mqtt(), &mut self.mqtt) {
            (Some(settings), Some(row)) => row.fill(settings),
            (settings, row) => *row = settings.map(MqttRow::of),
        }
        self.only_race_on = d.only_race_on;
        self.max_rate = d.max_rate;
        self.max_age = d.max_age;
        self.hold = d.hold;
        self.records = d.records;
        self.status = counted.status;
        self.stats = counted.stats;
        self.latency = counted.latency;
        self.held_through_blank = counted.held_through_blank;
    }
}

/// Every counter of the core at one moment, each destination's joined with
/// its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Input counters.
    pub input: InputStats,
    /// Every destination, in configuration order.
    pub destinations: Vec<DestinationSnapshot>,
}

/// The core's counters as rows: what the shell's snapshot, a bench and the
/// tests read of a [`Fanout`].
pub trait CountersOf {
    /// Every counter now, latency over the summary interval so far
    /// (statuses at the clock's now).
    fn counters(&self) -> Counters {
        self.counters_over(LatencyWindow::Interval, Instant::now())
    }

    /// Every counter, latency over `window`, statuses at `now`.
    fn counters_over(&self, window: LatencyWindow, now: Instant) -> Counters;

    /// As [`CountersOf::counters_over`], into `destinations` (returning the
    /// input's counters): the list and each name keep their capacity, so a
    /// reused list costs no allocation unless destinations were added or
    /// renamed longer.
    fn counters_into(
        &self,
        window: LatencyWindow,
        now: Instant,
        destinations: &mut Vec<DestinationSnapshot>,
    ) -> InputStats;
}

impl CountersOf for Fanout {
    fn counters_over(&self, window: LatencyWindow, now: Instant) -> Counters {
        let mut destinations = Vec::new();
        let input = self.counters_into(window, now, &mut destinations);
        Counters {
            input,
            destinations,
        }
    }

    fn counters_into(
        &self,
        window: LatencyWindow,
        now: Instant,
        destinations: &mut Vec<DestinationSnapshot>,
    ) -> InputStats {
        let mut n = 0;
        for (d, counted) in self.counted(window, now) {
            match destinations.get_mut(n) {
                Some(into) => into.fill(d, counted),
                None => destinations.push(DestinationSnapshot::of(d, counted)),
            }
            n += 1;
        }
        destinations.truncate(n);
        *self.input_stats()
    }
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
            map.serialize_entry("broker_problem", &mqtt.problem)?;
        }
        map.serialize_entry("only_race_on", &self.only_race_on)?;
        map.serialize_entry("max_rate", &self.max_rate)?;
        let age = self
            .max_age
            .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX));
        map.serialize_entry("max_age_ms", &age)?;
        let hold = self
            .hold
            .map(|h| u64::try_from(h.as_millis()).unwrap_or(u64::MAX));
        map.serialize_entry("hold_ms", &hold)?;
        map.serialize_entry("records", &self.records.names())?;
        map.serialize_entry("status", &self.status)?;
        map.serialize_entry("received", &self.stats.received)?;
        map.serialize_entry("sent", &self.stats.sent)?;
        for reason in DropReason::ALL {
            map.serialize_entry(reason.key(), &self.stats.dropped(reason))?;
        }
        map.serialize_entry("held", &self.stats.held)?;
        map.serialize_entry("held_through_blank", &self.held_through_blank)?;
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
            if d.held_through_blank > 0 {
                write!(
                    f,
                    ", {} blank frames held (the last racing frame went instead)",
                    d.held_through_blank
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
            if d.held_through_blank > 0 {
                let _ = write!(line, ", {} held through blanks", d.held_through_blank);
            }
            if d.latency.count > 0 {
                let _ = write!(line, ", lat {} ms", LatencyText(&d.latency));
            }
        }
        line
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
