//! What the core is built from and reconfigured with: [`Routes`] (the input
//! format, who may send, the destinations), each [`Destination`] as validated,
//! where it is ([`Target`]: a UDP address or an MQTT broker), what it receives
//! ([`Output`]: the datagram, a Forza layout, or text with its [`Fields`]), the
//! [`DestinationId`] the shell knows it by, and the one rule that says a
//! destination would loop back ([`is_loop`]). Plain data: nothing here
//! depends on the core or on the counters.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;

use crate::output::mqtt::MqttSettings;
use crate::output::{Encoding, Selection};
use crate::wire::{Format, Input};

/// A destination's name for as long as it exists; the shell indexes its sockets
/// by it. A removed destination's id may be given to a later new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DestinationId(pub(super) usize);

impl DestinationId {
    /// A dense index from 0, for tables indexed by destination.
    pub const fn index(self) -> usize {
        self.0
    }

    /// The id of index `i` (the shell's tokens carry the index).
    pub(crate) const fn from_index(i: usize) -> Self {
        DestinationId(i)
    }
}

/// What a destination receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Output {
    /// Every datagram byte for byte, whatever it is.
    Same,
    /// Packets translated to this format.
    Format(Format),
    /// Each frame as text: export's JSON object or an InfluxDB line (issue 25),
    /// of the destination's [`Fields`].
    Text(Encoding),
}

impl Output {
    /// True for the text outputs (`json`, `influx`), which take `fields`.
    pub fn is_text(self) -> bool {
        matches!(self, Output::Text(_))
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Same => f.write_str("same"),
            Output::Format(format) => format.fmt(f),
            Output::Text(encoding) => encoding.fmt(f),
        }
    }
}

/// Where a destination is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A UDP address, resolved: its own connected socket sends there.
    Udp(SocketAddr),
    /// An MQTT broker: a publisher on a thread of its own holds the
    /// connection, fed by the destination's link (see
    /// [`crate::output::mqtt`]).
    Mqtt(Box<MqttSettings>),
}

impl Target {
    /// The UDP address, if it is one.
    pub fn udp(&self) -> Option<SocketAddr> {
        match self {
            Target::Udp(addr) => Some(*addr),
            Target::Mqtt(_) => None,
        }
    }

    /// The broker's settings, if it is one.
    pub fn mqtt(&self) -> Option<&MqttSettings> {
        match self {
            Target::Mqtt(settings) => Some(settings),
            Target::Udp(_) => None,
        }
    }
}

impl fmt::Display for Target {
    /// The resolved address, or the broker's.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Udp(addr) => addr.fmt(f),
            Target::Mqtt(settings) => settings.broker.fmt(f),
        }
    }
}

/// The columns a text output writes (`fields = [...]`): the names as written,
/// and the columns they choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    /// As written (`"TireTemp"` stays one name).
    pub names: Vec<String>,
    /// The columns chosen, in order.
    pub selection: Selection,
}

impl serde::Serialize for Output {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a text destination (`json`, `influx`, MQTT) is sent (`records =
/// [...]`, issue 34): the frames, the session's laps, its events, or any
/// of them. Default: the frames only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Records {
    /// Each frame, as its text.
    pub frames: bool,
    /// One record per lap done.
    pub laps: bool,
    /// One record per race event (start, end, lap, rewind, pause, resume).
    pub events: bool,
}

impl Default for Records {
    fn default() -> Self {
        Records::FRAMES
    }
}

impl Records {
    /// The frames only: what every destination is sent unless told.
    pub const FRAMES: Records = Records {
        frames: true,
        laps: false,
        events: false,
    };
    /// The names `records` takes, in order.
    pub const NAMES: [&'static str; 3] = ["frames", "laps", "events"];

    /// The records `names` choose (ignoring case); the error names every
    /// value that is none, or says the list is empty.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Records, String> {
        let mut r = Records {
            frames: false,
            laps: false,
            events: false,
        };
        let mut unknown = Vec::new();
        for name in names {
            match name.trim().to_ascii_lowercase().as_str() {
                "frames" => r.frames = true,
                "laps" => r.laps = true,
                "events" => r.events = true,
                _ => unknown.push(format!("{name:?}")),
            }
        }
        if !unknown.is_empty() {
            return Err(format!(
                "{} {} no record: write any of \"frames\", \"laps\" and \"events\", like \
                 records = [\"frames\", \"laps\"]",
                unknown.join(", "),
                if unknown.len() == 1 { "is" } else { "are" }
            ));
        }
        if r == (Records {
            frames: false,
            laps: false,
            events: false,
        }) {
            return Err(
                "records is empty: write any of \"frames\", \"laps\" and \"events\" \
                 (or leave it out for the frames)"
                    .to_owned(),
            );
        }
        Ok(r)
    }

    /// The names chosen, in [`Records::NAMES`]' order.
    pub fn names(self) -> Vec<&'static str> {
        [self.frames, self.laps, self.events]
            .into_iter()
            .zip(Records::NAMES)
            .filter_map(|(on, name)| on.then_some(name))
            .collect()
    }

    /// Whether the session (laps, events) must be followed for it.
    pub fn wants_session(self) -> bool {
        self.laps || self.events
    }
}

impl fmt::Display for Records {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(", "))
    }
}

/// One destination, validated. What every frame's way reads (`output`,
/// `only_race_on`) comes first (`repr(C)` keeps the order; issue 26).
#[derive(Debug, Clone, PartialEq, Eq)]
#[repr(C)]
pub struct Destination {
    /// What it receives.
    pub output: Output,
    /// Drop frames with IsRaceOn = 0, except the first one after racing.
    pub only_race_on: bool,
    /// At most this many frames per second, the newest; 0 = every frame.
    pub max_rate: u32,
    /// Frames older than this when they would be sent are dropped (stale),
    /// and after a stall only the newest goes; `None` = frames of any age.
    pub max_age: Option<Duration>,
    /// `hold`: while the game sends blank frames (a rewind, a replay, a
    /// menu), the last racing frame goes instead, re-stamped, for at most
    /// this long after it; `None` = the blank frames as they come.
    pub hold: Option<Duration>,
    /// What a text destination is sent: frames, laps, events.
    pub records: Records,
    /// Unique name, used in logs and summaries (control characters already
    /// escaped by the configuration, so it is safe to print).
    pub name: String,
    /// The address as the user wrote it (a hostname stays a hostname here).
    pub addr_text: String,
    /// Where it is: the resolved address, or the broker.
    pub target: Target,
    /// The columns of a text output; `None`: every column (and for the
    /// binary outputs, which take none).
    pub fields: Option<Fields>,
}

impl Destination {
    /// The columns its text output writes: its `fields`, or every column.
    pub fn selection(&self) -> Selection {
        self.fields
            .as_ref()
            .map_or_else(Selection::all, |f| f.selection.clone())
    }
}

/// What the core is built from and reconfigured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    /// The input format.
    pub input: Input,
    /// Source ranges allowed to send; empty = everyone.
    pub allow: Vec<IpNet>,
    /// Where packets go, in order; names are unique (a repeated name is ignored).
    pub destinations: Vec<Destination>,
}

/// True when a datagram sent to `dest` reaches a socket listening on `listen`, so
/// relaying to it would loop: the same port, and `dest` is the listen address
/// itself or, when listening on every interface (`0.0.0.0`, `::`), any address
/// of this computer (loopback, or one `is_own` says is its own). IPv4-mapped
/// addresses count as IPv4. `::` counts as dual-stack, as the listener asks, and
/// `0.0.0.0` receives no IPv6. The one loop rule: the configuration and the
/// relay both apply it, with the operating system's answer as `is_own`.
pub fn is_loop(listen: SocketAddr, dest: SocketAddr, is_own: impl FnOnce(IpAddr) -> bool) -> bool {
    if listen.port() != dest.port() {
        return false;
    }
    let (l, d) = (listen.ip().to_canonical(), dest.ip().to_canonical());
    if l == d {
        return true;
    }
    if !l.is_unspecified() || (l.is_ipv4() && d.is_ipv6()) {
        return false;
    }
    d.is_unspecified() || d.is_loopback() || is_own(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SocketAddr {
        text.parse().expect("a socket address")
    }

    /// A computer whose only LAN address is 192.168.1.20.
    fn lan_host(ip: IpAddr) -> bool {
        ip == IpAddr::from([192, 168, 1, 20])
    }

    #[test]
    fn every_interface_loops_to_loopback_of_its_family_on_the_same_port() {
        let l = |listen, dest| is_loop(at(listen), at(dest), lan_host);
        assert!(l("0.0.0.0:5400", "127.0.0.1:5400"));
        assert!(l("0.0.0.0:5400", "127.0.0.2:5400"));
        assert!(l("[::]:5400", "[::1]:5400"));
        // `::` is dual-stack: IPv4 reaches it too.
        assert!(l("[::]:5400", "127.0.0.1:5400"));
        assert!(l("0.0.0.0:5400", "[::ffff:127.0.0.1]:5400"));
        // An IPv4-only socket receives no IPv6.
        assert!(!l("0.0.0.0:5400", "[::1]:5400"));
        // This computer's LAN address, and another computer's.
        assert!(l("0.0.0.0:5400", "192.168.1.20:5400"));
        assert!(l("[::]:5400", "192.168.1.20:5400"));
        assert!(!l("0.0.0.0:5400", "192.168.1.21:5400"));
    }

    #[test]
    fn a_specific_listen_address_loops_only_to_itself() {
        let l = |listen, dest| is_loop(at(listen), at(dest), lan_host);
        assert!(l("127.0.0.1:5400", "127.0.0.1:5400"));
        assert!(l("[::1]:5400", "[::1]:5400"));
        assert!(l("[::ffff:127.0.0.1]:5400", "127.0.0.1:5400"));
        assert!(!l("127.0.0.1:5400", "127.0.0.2:5400"));
        assert!(!l("[::1]:5400", "127.0.0.1:5400"));
        // Bound to loopback only, the listener never sees packets for the LAN.
        assert!(!l("127.0.0.1:5400", "192.168.1.20:5400"));
    }

    #[test]
    fn different_ports_are_never_a_loop() {
        let listens = ["0.0.0.0", "[::]", "127.0.0.1", "[::1]"];
        let dests = ["127.0.0.1", "[::1]", "192.168.1.20"];
        for l in listens {
            for d in dests {
                for (lp, dp) in [(5400, 5401), (5401, 5400), (1, 65535)] {
                    assert!(
                        !is_loop(at(&format!("{l}:{lp}")), at(&format!("{d}:{dp}")), |_| true),
                        "{l}:{lp} -> {d}:{dp}"
                    );
                }
            }
        }
    }
}
