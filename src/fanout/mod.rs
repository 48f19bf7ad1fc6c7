//! The fan-out core: every decision the relay makes about a datagram, and every
//! counter, with no sockets, no clock reads and no logging above `trace!`.
//!
//! The core is built from its own input, [`Routes`] (the input format, who may
//! send, where packets go), which a validated `Config` makes in one place
//! (`Config::routes`); it knows nothing of files, summaries or recordings.
//!
//! [`Fanout::handle`] takes one datagram ([`Arrival`]: its bytes, its sender,
//! when it reached the machine) and the time now, decides whether it is admitted ([`Verdict`]),
//! and hands each destination's bytes to a [`Sink`] the caller gives it. In
//! order: the allow-list, the input format ([`Acceptor`]: a configured format,
//! or `auto`), then per destination the race filter, translation (done at most
//! once per distinct output format per packet into buffers made at start-up),
//! the age limit, and the rate limit (the newest early frame waits for its slot
//! in a pending frame; [`Fanout::due`] sends it).
//!
//! Who sends is counted in a table of a few senders, in place
//! ([`crate::counters::Senders`]); with `auto`, each datagram is read by its own
//! bytes where they tell, and only the stream followed (the game's) teaches
//! how the others are read (issue 23). Among the datagrams it refuses anyway
//! (no packet of the input, or from outside the allow-list), the core
//! recognises the status query of a tool on this computer
//! ([`crate::report::query`]): [`Verdict::Query`], sent nowhere, counted nowhere, so
//! a packet's way pays nothing for it.
//!
//! A text output (`json`, `influx`, issue 25) is made the same way, once per
//! frame for every destination sharing its encoding and fields, but only
//! when one of them is due to send it: a frame waiting for its rate slot
//! waits as the datagram, and is encoded only if its slot comes. Its
//! encoder and buffer are made at commit and kept while some destination
//! writes them. The wall-clock time a text output writes comes with the
//! [`Arrival`]: the kernel's receive time, or the wall clock the shell reads
//! once per batch; the core reads no clock. An MQTT destination is a
//! destination like any other here ([`Target::Mqtt`]): its filters, its text
//! and its counters are the core's; only its link, a publisher's ring
//! instead of a socket, is the shell's.
//!
//! The age limit (`max_age`, issue 15) keeps a motion rig on live data: a
//! frame older than the limit when it would be sent (on arrival after a stall,
//! waiting for its rate slot, or in the shell's backlog) is dropped and counted
//! stale. Dropping costs only a count, so after a stall the stale part of
//! the queue goes by quickly and the fresh frames go at once. Without a limit a
//! destination gets every frame, as before.
//!
//! Destinations are known by a [`DestinationId`] that stays the same while the
//! destination exists. A new configuration is taken in two steps: the pure
//! [`Fanout::plan`] matches destinations by name (the one place that rule
//! lives) and says, per destination, what the shell must do with its socket;
//! the shell does it (all or nothing), then [`Fanout::commit`] applies the plan
//! and returns the [`Changes`]: an unchanged destination keeps all its state, a
//! changed one keeps its counters, new ones start, and removed ones come back
//! with their final counters.
//!
//! Counting happens here and nowhere else. The shell never touches a counter: it
//! says what the network did with each frame it was handed ([`Fate`]: sent,
//! queued, dropped), later what became of the frames it queued, and which send
//! errors it met ([`Report`]). So, per destination, every admitted datagram is
//! counted exactly once: `received = sent + dropped by reason + held`, where
//! `held` is the pending frame plus the frames the shell queued
//! ([`DestinationStats::is_balanced`]). Frames the shell drops on the plan's
//! word (a destination removed, readdressed, or given another output) and those
//! left when the relay stops ([`Fanout::finish`]) are counted dropped by the
//! core, so a removed destination's final counters include them. The shell
//! also reports each send's latency ([`Report::record_latency`]); the core keeps
//! it in histograms made with the destination.
//!
//! Invariants: nothing here allocates per datagram, and no datagram can make it
//! panic.
//!
//! Where things are: what the core is built from ([`Routes`], [`Destination`],
//! [`DestinationId`], [`Output`], the loop rule [`is_loop`]) in `routes.rs`;
//! the shell's side of a delivery ([`Sink`], [`Report`], [`Fate`],
//! [`HeldFrame`]) in `sink.rs`; the core itself ([`Fanout`]: handling a
//! datagram, each destination's state, the counters) in `core/`; taking new
//! routes ([`Fanout::plan`], [`Fanout::commit`] and what they return) in
//! `plan.rs`, and how a [`Changes`] reads (its `Display`, in the log and on
//! the page) beside it in `changes.rs`. The core counts with the types of
//! [`crate::counters`]; every rendering of them is [`crate::report`]'s.
//!
//! [`Acceptor`]: crate::wire::Acceptor
//! [`DestinationStats::is_balanced`]: crate::counters::DestinationStats::is_balanced

mod changes;
mod core;
pub mod plan;
pub mod routes;
pub mod sink;
#[cfg(test)]
mod testing;

pub use self::core::{Arrival, Counted, Fanout, Verdict};
pub use plan::{Action, Changed, Changes, Plan, Removed, Step};
pub use routes::{is_loop, Destination, DestinationId, Fields, Output, Records, Routes, Target};
pub use sink::{Fate, HeldFrame, Report, Sink, FRAME_CAPACITY};
