//! The shell's side of a delivery: the core hands each destination's bytes to
//! a [`Sink`], which says what became of them ([`Fate`]); what the shell
//! learns later about the frames it queued, the send errors it meets and each
//! send's latency it tells the core through that destination's [`Report`].
//! [`HeldFrame`] is a frame kept for later (a pending frame, a backlog's).

use std::time::Instant;

use super::DestinationId;
use crate::counters::{DestinationStats, DropReason, Health, Latencies, SendErrorKind};
use crate::filter::AgeLimit;

/// Largest frame a pending slot (or a shell's backlog) holds: every Forza
/// format, and any datagram that fits one Ethernet frame. A larger `same`
/// datagram that must wait is dropped and counted.
pub const FRAME_CAPACITY: usize = 1_472;

/// What became of a frame, as the shell reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Handed to the OS.
    Sent,
    /// Kept in the shell's backlog (the socket would block): what becomes of it
    /// is reported later, through a [`Report`].
    Queued,
    /// Not sent, for this reason.
    Dropped(DropReason),
}

/// Where the shell tells the core about one destination: what became of the
/// frames it queued for it, the send errors it met, and how long frames took.
/// It can do nothing else with the destination's counters.
pub struct Report<'a> {
    stats: &'a mut DestinationStats,
    /// Frames the shell holds for the destination: queued, or being delivered.
    queued: &'a mut u64,
    age: AgeLimit,
    latency: &'a mut Latencies,
    health: &'a mut Health,
}

impl Report<'_> {
    /// What became of one frame the shell held; `Queued` when it still does.
    pub fn held(&mut self, outcome: Fate) {
        match outcome {
            Fate::Queued => return,
            Fate::Sent => self.stats.sent += 1,
            Fate::Dropped(reason) => self.stats.drop(reason),
        }
        debug_assert!(*self.queued > 0, "an outcome for a frame nobody held");
        *self.queued = self.queued.saturating_sub(1);
    }

    /// A send failed at `at` (the frame's own outcome is reported apart).
    pub fn send_error(&mut self, kind: SendErrorKind, at: Instant) {
        self.stats.send_errors.add(kind);
        self.health.failed(kind, at);
    }

    /// The destination can't take frames now (an MQTT broker that is not
    /// connected): its status is failing, with no send error counted (the
    /// frame's own outcome is reported apart, as a drop).
    pub fn unavailable(&mut self, at: Instant) {
        self.health.failed(SendErrorKind::Other, at);
    }

    /// True when the destination has a `max_age`: the shell may hold back
    /// frames for destinations without one while a backlog is drained, so
    /// that those with one reach the newest frame first.
    pub fn has_age_limit(&self) -> bool {
        self.age.is_set()
    }

    /// Whether a frame the shell holds, received at `received`, is too old to
    /// send at `now` (the destination's `max_age`): if so it is counted stale,
    /// and the shell drops it instead of sending it.
    pub fn drop_if_stale(&mut self, received: Instant, now: Instant) -> bool {
        let stale = self.age.is_stale(received, now);
        if stale {
            self.held(Fate::Dropped(DropReason::Stale));
        }
        stale
    }

    /// A frame that reached the machine at `received` was handed to the OS by
    /// a send that returned at `sent`: its latency. `Some(n)` when the
    /// destination, refused `n` times, is receiving again (said once; see
    /// [`Health::sent`]).
    #[inline(always)]
    pub fn record_latency(&mut self, received: Instant, sent: Instant) -> Option<u64> {
        self.latency.record(received, sent);
        self.health.sent(sent)
    }
}

/// Where the core hands each destination's bytes: the shell sends them, a test
/// records them.
pub trait Sink {
    /// Delivers `bytes`, which reached the machine at `received`, to
    /// destination `id` and says what became of them; what the shell learns
    /// meanwhile about frames it queued earlier for `id`, the send errors it
    /// meets and each send's latency go to `report`.
    fn deliver(
        &mut self,
        id: DestinationId,
        bytes: &[u8],
        received: Instant,
        report: &mut Report<'_>,
    ) -> Fate;
}

impl<F: FnMut(DestinationId, &[u8]) -> Fate> Sink for F {
    fn deliver(&mut self, id: DestinationId, bytes: &[u8], _: Instant, _: &mut Report<'_>) -> Fate {
        self(id, bytes)
    }
}

/// A frame held for later, with the moment it reached the machine: a
/// destination's pending frame, or one in a shell's backlog.
#[derive(Clone, Copy)]
pub struct HeldFrame {
    len: usize,
    /// `None` until something is stored.
    received: Option<Instant>,
    data: [u8; FRAME_CAPACITY],
}

impl HeldFrame {
    /// A frame holding nothing.
    pub const EMPTY: HeldFrame = HeldFrame {
        len: 0,
        received: None,
        data: [0; FRAME_CAPACITY],
    };

    /// Copies `bytes`, received at `received`, in; `false` (and unchanged)
    /// when they don't fit.
    pub fn store(&mut self, bytes: &[u8], received: Instant) -> bool {
        match self.data.get_mut(..bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = bytes.len();
                self.received = Some(received);
                true
            }
            None => false,
        }
    }

    /// The bytes held.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// When the bytes held reached the machine; `None` for a frame that never
    /// held any.
    pub fn received(&self) -> Option<Instant> {
        self.received
    }
}

impl<'a> Report<'a> {
    pub(super) fn new(
        stats: &'a mut DestinationStats,
        queued: &'a mut u64,
        age: AgeLimit,
        latency: &'a mut Latencies,
        health: &'a mut Health,
    ) -> Self {
        Report {
            stats,
            queued,
            age,
            latency,
            health,
        }
    }
}

/// Hands `bytes` to the sink and counts the outcome through `report`: until
/// the sink says otherwise, the frame is the shell's to hold.
#[inline]
pub(super) fn send(
    id: DestinationId,
    bytes: &[u8],
    received: Instant,
    mut report: Report<'_>,
    sink: &mut impl Sink,
) {
    *report.queued += 1;
    let outcome = sink.deliver(id, bytes, received, &mut report);
    report.held(outcome);
}
