//! What the core's tests share: routes from TOML, a racing fh6 packet set
//! field by field, a sink that records every delivery, and lookups by name.

use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use super::{Arrival, DestinationId, Fanout, Fate, Report, Routes, Sink, Verdict};
use crate::config::{Config, Overrides};
use crate::counters::DestinationStats;
use crate::report::Counters;
use crate::wire::{Format, Packet, Puddle, Wheels};

pub(super) const SENDER: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1)),
    50_000,
);

pub(super) fn routes(toml: &str) -> Routes {
    Config::from_toml(toml, "fanout.toml", &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}\n{toml}"))
        .routes()
}

pub(super) fn destination_toml(name: &str, port: u16, format: &str, options: &str) -> String {
    format!(
        "[[destination]]\nname = \"{name}\"\naddr = \"127.0.0.1:{port}\"\nformat = \"{format}\"\n{options}\n"
    )
}

/// A racing fh6 packet, fields set by name: TimestampMS, IsRaceOn, CarClass R,
/// a wet front-left wheel, Speed.
pub(super) fn fh6(timestamp_ms: u32, race_on: bool) -> Vec<u8> {
    let mut buf = vec![0u8; Format::Fh6.len()];
    let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
    p.set_timestamp_ms(timestamp_ms);
    p.set_is_race_on(i32::from(race_on));
    p.set_car_class(6);
    p.set_wheel_in_puddle(Wheels::from_array([
        Puddle::Flag(1),
        Puddle::Flag(0),
        Puddle::Flag(0),
        Puddle::Flag(0),
    ]));
    p.set_speed(41.5).unwrap();
    buf
}

/// A sink that records every delivery, and where its bytes were, and says
/// what `outcome` says (sent, unless told otherwise).
pub(super) struct Recorder {
    pub(super) got: Vec<(DestinationId, Vec<u8>)>,
    pub(super) at: Vec<*const u8>,
    pub(super) outcome: Fate,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            got: Vec::new(),
            at: Vec::new(),
            outcome: Fate::Sent,
        }
    }
}

impl Sink for Recorder {
    fn deliver(&mut self, id: DestinationId, bytes: &[u8], _: Instant, _: &mut Report<'_>) -> Fate {
        self.got.push((id, bytes.to_vec()));
        self.at.push(bytes.as_ptr());
        self.outcome
    }
}

impl Recorder {
    pub(super) fn to(&self, core: &Fanout, name: &str) -> Vec<Vec<u8>> {
        let id = id_of(core, name);
        self.got
            .iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, b)| b.clone())
            .collect()
    }
}

#[track_caller]
pub(super) fn id_of(core: &Fanout, name: &str) -> DestinationId {
    core.destinations()
        .find(|(_, d)| d.name == name)
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("no destination {name}"))
}

pub(super) fn stats(c: &Counters, name: &str) -> DestinationStats {
    c.destinations
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no destination {name}"))
        .stats
}

/// Every destination's counters add up: received = sent + dropped + held.
#[track_caller]
pub(super) fn assert_balanced(c: &Counters) {
    for d in &c.destinations {
        assert!(d.stats.is_balanced(), "{}: {:?}", d.name, d.stats);
    }
}

/// The timestamps of the frames `name` was handed (all `same`, fh6).
pub(super) fn timestamps_to(sink: &Recorder, core: &Fanout, name: &str) -> Vec<u32> {
    sink.to(core, name)
        .iter()
        .map(|b| {
            Packet::new_checked(&b[..], Format::Fh6)
                .unwrap()
                .timestamp_ms()
        })
        .collect()
}

/// A sink whose socket would block: every frame goes to its backlog.
pub(super) fn queue_everything(_: DestinationId, _: &[u8]) -> Fate {
    Fate::Queued
}

impl Fanout {
    /// A datagram received and handled at `at`, nothing known behind it.
    pub(crate) fn handle_at(
        &mut self,
        data: &[u8],
        from: SocketAddr,
        at: Instant,
        sink: &mut impl Sink,
    ) -> Verdict {
        self.handle(Arrival::new(data, from, at, test_wall()), at, sink)
    }
}

/// The wall-clock time of every datagram [`Fanout::handle_at`] hands in:
/// 2023-11-14T22:13:20Z.
pub(crate) fn test_wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)
}
