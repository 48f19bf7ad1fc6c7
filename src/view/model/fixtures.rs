//! Relay snapshots for the dashboard's tests (here and in `dashboard/`).

use std::time::Duration;

use crate::config::Output;
use crate::counters::DestinationStats;
use crate::report::{DestinationSnapshot, Snapshot};

/// A destination that has sent `sent` packets and nothing else.
pub(crate) fn destination(name: &str, output: Output, sent: u64) -> DestinationSnapshot {
    DestinationSnapshot {
        name: name.to_owned(),
        addr: Some("127.0.0.1:9002".parse().expect("an address")),
        addr_text: "127.0.0.1:9002".to_owned(),
        output,
        fields: Vec::new(),
        mqtt: None,
        only_race_on: false,
        max_rate: 0,
        max_age: None,
        hold: None,
        records: Default::default(),
        status: crate::counters::Status::Ok,
        stats: DestinationStats {
            sent,
            ..Default::default()
        },
        latency: Default::default(),
        held_through_blank: 0,
    }
}

/// The relay's counters `ms` after its start.
pub(crate) fn snapshot(ms: u64, destinations: Vec<DestinationSnapshot>) -> Snapshot {
    Snapshot {
        listen: "127.0.0.1:5400".parse().expect("an address"),
        elapsed: Duration::from_millis(ms),
        input: Default::default(),
        destinations,
        tap_dropped: 0,
        not_recorded: 0,
        config: Default::default(),
    }
}
