//! An MQTT destination's link: its publisher (a thread of its own that holds
//! the broker's connection, [`crate::output::mqtt`]) and the outbox the loop
//! hands each payload to. A hand-over is a copy into a ring made once and a
//! wake-up of the publisher, never a wait: while the broker is not
//! connected the frame is dropped as `broker_unavailable`, and when the ring
//! is full (the publisher stuck) as `backlog_full`.

use std::time::{Duration, Instant};

use super::warn::Clock;
use super::StartError;
use crate::counters::DropReason;
use crate::fanout::{Destination, Fate, Report};
use crate::output::mqtt::MqttSettings;
use crate::relay::mqtt::{MqttPublisher, Outbox};

/// An MQTT destination's publisher and outbox.
pub(super) struct BrokerLink {
    pub(super) publisher: MqttPublisher,
    outbox: Outbox,
    /// Where it says "online" and "offline".
    status_topic: String,
}

impl BrokerLink {
    /// Starts the publisher of destination `d`, to the broker `settings`
    /// name, saying a connection problem at most once every `warn_every`: a
    /// thread spawn, nothing slower (the publisher's thread makes its
    /// runtime and reads its certificates).
    pub(super) fn open(
        d: &Destination,
        settings: &MqttSettings,
        warn_every: Duration,
    ) -> Result<BrokerLink, StartError> {
        let (publisher, outbox) =
            MqttPublisher::start(settings.clone()).map_err(|source| StartError::Broker {
                name: d.name.clone(),
                broker: settings.broker.to_string(),
                source,
            })?;
        publisher.set_warn_every(warn_every);
        Ok(BrokerLink {
            publisher,
            outbox,
            status_topic: settings.status_topic(),
        })
    }

    /// Hands `bytes`, received at `received`, to the publisher, or says why
    /// not.
    #[inline]
    pub(super) fn deliver(
        &mut self,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
        clock: Clock,
    ) -> Fate {
        if !self.outbox.is_connected() {
            report.unavailable(clock.now);
            return Fate::Dropped(DropReason::BrokerUnavailable);
        }
        if !self.outbox.push(bytes) {
            return Fate::Dropped(DropReason::Backlog);
        }
        // A vDSO read, no system call: from its receipt to its hand-over.
        let _ = report.record_latency(received, Instant::now());
        Fate::Sent
    }

    /// Whether the publisher can't reach its broker now.
    pub(super) fn is_down(&self) -> bool {
        self.publisher.is_down()
    }

    /// Lets it go, replaced by `next` (a reload changed its broker's
    /// settings): it stops without waiting, and without saying "offline"
    /// where its successor says "online".
    pub(super) fn replaced_by(self, next: Option<&BrokerLink>) {
        let quiet = next.is_some_and(|n| n.status_topic == self.status_topic);
        self.publisher.signal_stop(quiet);
    }
}
