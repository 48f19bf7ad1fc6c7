//! The relay's shell: a single-threaded mio loop that owns every socket, timer
//! and hand-off, around the pure fan-out core ([`Fanout`]).
//!
//! One packet's way: the loop wakes with it; the listening socket is drained in
//! batches ([`Batch`]: one `recvmmsg` on Linux, which brings each datagram's
//! kernel receive time along); the core decides whether each datagram is
//! admitted and, per destination, what to send; the shell sends it on that
//! destination's own connected socket and tells the core what the network did
//! ([`Fate`]) and how long the frame took from its receipt to the return of
//! the send; taps get the admitted datagrams after the sends. The clocks are
//! read through the vDSO: once on each clock per batch, once after each send.
//!
//! The loop waits in one of two ways (issue 16). In the plain case, on Linux
//! (no frame waits in a backlog or for its rate slot, nothing left unread), it
//! sleeps inside the receive itself ([`Batch::wait`]), bounded by the next
//! summary ([`wait::RecvTimeout`]): a packet then costs one system call plus
//! one send per destination. Otherwise, and on every other platform, it sleeps
//! in mio's `poll`, which also watches the destinations that would block, and
//! then receives: one call more. Going back from the receive to the poll, the
//! first poll only looks, and the socket is drained until empty before the poll
//! may sleep: mio is edge-triggered. Per packet nothing is allocated, nothing
//! is logged above `trace!`, and no error is fatal: a send error is counted
//! against its destination alone, a bad datagram against the input, a failed
//! `poll` is logged and the loop goes on.
//!
//! An MQTT destination's link is its publisher (issue 25): a thread of its
//! own holds the broker's connection, fed through a ring the loop pushes the
//! frame's text into (`broker.rs`); the loop never waits on TCP, DNS or TLS,
//! a broker that is not connected costs a count (`broker_unavailable`), and
//! when the relay stops every publisher says "offline" before the final
//! snapshot.
//!
//! Each destination has its own connected UDP socket, so the ICMP "port
//! unreachable" of a closed consumer lands on that socket only (it comes back
//! from its next send), never on the listening one (which on Windows would fail
//! its next `recv` with WSAECONNRESET). When a send would block, up to
//! [`BACKLOG_FRAMES`] of the newest frames wait in a preallocated ring, and only
//! then is the socket registered with the poll, until the ring is flushed; a
//! waiting frame that has grown older than the destination's `max_age` is
//! dropped instead of sent ([`Report::drop_if_stale`]). The core counts those
//! frames as held until the shell says what became of them; when the relay
//! stops, one last flush is tried and the rest is counted dropped.
//!
//! After a stall (issue 15), a destination with `max_age` must get the newest
//! frame at once, and one without must get every frame in order. So while a
//! backlog is drained (a full batch, `BACKLOG_IN_ROW` datagrams in a row, or
//! frames older than the smallest `max_age`), frames for destinations without
//! a limit are held back in rings made with the link (`Link::hold_back`)
//! instead of sent, and sent in order once the listening socket is empty
//! (`Link::release`), after `HOLD_BACK_MAX`, or before the rings would
//! overflow: the limited
//! destinations reach the newest frame after the receives alone, not after a
//! send per backlog frame to each neighbour. Holding back drops nothing.
//!
//! A new configuration is planned by the core, carried out here (every new
//! socket opened first, so that a failure changes nothing) and committed to the
//! core, which returns what changed: the shell never matches destinations
//! itself.
//!
//! Other threads talk to the loop only through [`Control`]: a message on a
//! channel plus a wake-up of the poll's [`Waker`] and, for a loop asleep in the
//! receive, a datagram from the relay's own wake-up socket
//! ([`wait::WakeSender`]), which is never forwarded, tapped or counted. The
//! loop acts on commands between packets, and looks for them after every
//! receive, so a wake-up datagram lost under a flood delays nothing.
//! Summaries leave the loop as [`Snapshot`]s on a bounded channel
//! ([`Relay::summaries`]), so the loop never waits for a terminal or a pipe.
//!
//! Where things are: the loop's turn (waiting, draining, handing batches to
//! the core, the taps, the timers) in `turn.rs`; each destination's link
//! (socket, backlog, hold-back) in `link.rs`, an MQTT destination's in
//! `broker.rs`; the command channel
//! ([`Control`], [`Snapshots`]) in `control.rs`; taking a new configuration
//! ([`Applied`]) in `apply.rs`; the throttled warnings in `warn.rs`; why the
//! relay could not start ([`StartError`]) in `error.rs`. The loop's state
//! ([`Relay`] and its `Shell`) is here, where every one of those files can
//! reach it.
//!
//! [`Fate`]: crate::fanout::Fate
//! [`wait::RecvTimeout`]: crate::net::recv::wait::RecvTimeout
//! [`Report::drop_if_stale`]: crate::fanout::Report::drop_if_stale
//! [`wait::WakeSender`]: crate::net::recv::wait::WakeSender

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Registry, Token, Waker};

use crate::config::Config;
use crate::counters::{InputStats, LatencyWindow};
use crate::fanout::{Destination, DestinationId, Fanout, Target, Verdict};
use crate::net::recv::wait::{RecvTimeout, WakeFilter};
use crate::net::recv::{self, Batch};
use crate::net::socket;
use crate::report::{ConfigState, Snapshot};
use crate::tap::TapProducer;
use crate::wire::Reading;

mod apply;
mod broker;
mod control;
mod error;
mod link;
pub mod mqtt;
mod outbox;

pub use outbox::SEND_EACH_VAR;
mod turn;
mod warn;

pub use apply::Applied;
use apply::LoopConfig;
use broker::BrokerLink;
use control::Command;
pub use control::{Control, Snapshots};
pub use error::StartError;
use link::Link;
pub use link::BACKLOG_FRAMES;
use outbox::Outbox;
use warn::Throttle;

/// The poll's tokens: the listening socket, the waker, then one per
/// destination, `Token(FIRST_DESTINATION + id.index())`.
const LISTENER: Token = Token(0);
const WAKER: Token = Token(LISTENER.0 + 1);
const FIRST_DESTINATION: usize = WAKER.0 + 1;

/// The token destination `id`'s socket is registered with.
fn token_of(id: DestinationId) -> Token {
    Token(FIRST_DESTINATION + id.index())
}

/// The destination a token belongs to, if it is a destination's.
fn destination_of(token: Token) -> Option<DestinationId> {
    token
        .0
        .checked_sub(FIRST_DESTINATION)
        .map(DestinationId::from_index)
}

pub use crate::fanout::FRAME_CAPACITY;
pub use crate::net::recv::MAX_DATAGRAM;
/// Datagrams read per drain before other work gets a turn.
const DRAIN_BUDGET: usize = 256;
/// Datagrams found queued in a row that mean a backlog is being drained (a
/// full `recvmmsg` batch on Linux), so frames for destinations without
/// `max_age` are held back (issue 15).
const BACKLOG_IN_ROW: usize = 32;
/// How long frames are held back at most: draining the 720 frames of a 2 s
/// stall takes 3 ms here, so this only matters when the relay can't keep up
/// and the listening socket never empties.
const HOLD_BACK_MAX: Duration = Duration::from_millis(20);
/// Consecutive unexpected receive errors after which a drain gives up.
const MAX_RECV_ERRORS: usize = 8;
/// Events handled per `poll` call.
const EVENTS: usize = 256;
/// How often a repeated warning may be logged when the stats line is off.
const DEFAULT_WARN_INTERVAL: Duration = Duration::from_secs(10);
/// Summaries waiting for their reader; more are dropped, never waited for.
const SUMMARY_QUEUE: usize = 4;
/// Pause after a failed `poll`, so a poll that keeps failing doesn't spin.
const POLL_ERROR_PAUSE: Duration = Duration::from_millis(10);
/// How late the wait in the receive may end after the next summary is due,
/// when packets stop: a twentieth of the interval, within these bounds (while
/// packets flow the wait's timeout is this slack and is never set again, see
/// [`RecvTimeout::arm`]). With summaries off the schedule only starts a new
/// latency window, which nobody sees late (a command is answered after the
/// timers): up to a whole [`DEFAULT_WARN_INTERVAL`], so the first wait after
/// packets stop ends with the schedule, not a wake-up before it.
const MIN_WAIT_SLACK: Duration = Duration::from_millis(5);
const MAX_WAIT_SLACK: Duration = Duration::from_millis(500);

/// The running relay.
pub struct Relay {
    poll: Poll,
    events: Events,
    shell: Shell,
}

/// Everything but the poll, split so events can be iterated while handled;
/// and in parts, each borrowed on its own.
struct Shell {
    registry: Registry,
    core: Fanout,
    /// The listening socket and how the loop waits for it.
    intake: Intake,
    /// The destinations' links, and holding frames back for some of them.
    out: Out,
    /// What other threads tell the loop, and what it keeps of it.
    inbox: Inbox,
    /// When summaries (and the latency windows) are due, and where they go.
    schedule: Schedule,
    /// The input's repeated warnings, each at most once an interval.
    warnings: InputWarnings,
    /// Readers of every datagram admitted, and what the gone ones lost.
    taps: Taps,
}

/// The listening socket and how the loop waits for it.
struct Intake {
    listener: UdpSocket,
    /// The address bound, and the one configured (they differ with port 0).
    listen: SocketAddr,
    configured_listen: SocketAddr,
    batch: Batch,
    /// What the core decided about each datagram of the last batch.
    verdicts: [Verdict; Batch::SIZE],
    /// Tells the wake-up datagram apart; `None`: the loop never waits in the
    /// receive (not Linux, or the wake-up socket could not be made).
    wake: Option<WakeFilter>,
    /// The listening socket's timeout for the wait in the receive.
    recv_timeout: RecvTimeout,
    /// How the last turn waited, and what the next one starts from.
    wait: Wait,
    /// Waits in the receive that failed in a row.
    wait_errors: usize,
    /// When the last wait's batch was read: while packets flow, the next turn
    /// starts from it instead of reading the clock (its sends took
    /// microseconds, and the wait's timeout is then its slack, right for any
    /// deadline: issue 26).
    last_read: Instant,
    /// How late the wait in the receive may end ([`MIN_WAIT_SLACK`]): worked
    /// out when the summary interval changes, not per wake-up.
    wait_slack: Duration,
}

/// How the loop waits for the listening socket, as the last turn left it
/// (see the module documentation for the two ways). One byte, looked at once
/// a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// In the poll, the listening socket drained.
    Poll,
    /// In the poll, with datagrams still queued: the last drain stopped at its
    /// budget, or the loop just left the receive (datagrams may have come
    /// since). The next poll looks without waiting, then drains.
    Unread,
    /// In the receive.
    Receive,
    /// In the receive while packets flow: the last wait ended with a datagram
    /// sooner than its slack, so the next turn starts from that batch's moment
    /// and the receive's timeout may end a wait early ([`RecvTimeout::arm`]).
    Flowing,
}

/// The destinations' links, and holding frames back for some of them.
struct Out {
    /// The UDP destinations' links, indexed by [`DestinationId`], as the
    /// core's destinations are. Boxed: a send tells whether a slot has a
    /// link from its pointer, in one line for all, not from a field far into
    /// the link that `Option` would keep its tag in (issue 26).
    links: Vec<Option<Box<Link>>>,
    /// The MQTT destinations' links, indexed the same way.
    brokers: Vec<Option<BrokerLink>>,
    /// Where a batch's frames for the UDP destinations wait for their one
    /// call (Linux; issue 33). Empty between turns.
    outbox: Outbox,
    /// Since when a backlog is being drained: frames for destinations without
    /// `max_age` are held back until the listening socket is empty, or for
    /// [`HOLD_BACK_MAX`] at most (issue 15).
    holding_back: Option<Instant>,
    /// The smallest `max_age` when destinations with and without a limit are
    /// both configured (else holding back has no use): worked out when the
    /// destinations change, not per batch.
    hold_back_age: Option<Duration>,
}

/// What other threads tell the loop, and what it keeps of it.
struct Inbox {
    commands: mpsc::Receiver<Command>,
    control: Control,
    stopping: bool,
    /// Status queries answered so far ([`crate::report::query`]).
    answered: u64,
    /// Where the relay's page is served, as the page said.
    page: Option<Box<crate::report::query::PageServed>>,
    /// The configuration file's state, as its owner last said (for the
    /// snapshots).
    config_state: ConfigState,
}

/// When summaries (and the latency windows) are due, and where they go.
struct Schedule {
    started: Instant,
    stats_interval: Option<Duration>,
    /// When the last summary was taken (the start, before the first).
    last_summary: Instant,
    /// When the next summary is due, and the latency window ends: every
    /// `stats_interval`, or with summaries off every
    /// [`DEFAULT_WARN_INTERVAL`], so the latency the dashboard and the page
    /// show is recent either way (issue 15).
    next_summary: Option<Instant>,
    summaries: Option<mpsc::SyncSender<Snapshot>>,
    warn_every: Duration,
}

/// The input's repeated warnings, each at most once an interval.
struct InputWarnings {
    /// Input counters when their warnings were last considered.
    warned: InputStats,
    /// How `auto` reads Horizon packets, as last logged.
    horizon: Option<Reading>,
    malformed: Throttle,
    disallowed: Throttle,
    /// Senders beside the one followed (issue 23).
    senders: Throttle,
    recv_error: Throttle,
    poll_error: Throttle,
}

/// Readers of every datagram admitted, and what the gone ones lost.
#[derive(Default)]
struct Taps {
    /// Readers of every datagram admitted (the capture writer, the dashboard).
    list: Vec<TapProducer>,
    /// Datagrams dropped by taps whose readers have gone.
    dropped: u64,
    /// Datagrams taps whose readers have gone took but could not keep.
    not_recorded: u64,
}

impl Relay {
    /// Opens every socket of `config`. Nothing is left half-started on error.
    pub fn bind(config: &Config) -> Result<Relay, StartError> {
        let setup = LoopConfig::of(config);
        let poll = Poll::new().map_err(StartError::Poll)?;
        let registry = poll.registry().try_clone().map_err(StartError::Poll)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(StartError::Poll)?);
        let (listener, listen) = bind_listener(&registry, setup.listen, &setup.listen_place)?;
        let core = Fanout::new(&setup.routes);
        let mut links = Vec::new();
        let mut brokers = Vec::new();
        for (id, d) in core.destinations() {
            let warn_every = setup.stats_interval.unwrap_or(DEFAULT_WARN_INTERVAL);
            match Opened::open(id, d, listen, warn_every)? {
                Opened::Udp(link) => {
                    put(&mut links, id, link);
                }
                Opened::Broker(broker) => {
                    put(&mut brokers, id, broker);
                }
            }
        }
        let (tx, commands) = mpsc::channel();
        let now = Instant::now();
        let interval = setup.stats_interval;
        let horizon = core.horizon();
        let mut relay = Relay {
            poll,
            events: Events::with_capacity(EVENTS),
            shell: Shell {
                registry,
                core,
                intake: Intake {
                    listener,
                    listen,
                    configured_listen: setup.listen,
                    batch: Batch::new(),
                    verdicts: [Verdict::Disallowed; Batch::SIZE],
                    wake: None,
                    recv_timeout: RecvTimeout::default(),
                    wait: Wait::Poll,
                    wait_errors: 0,
                    last_read: now,
                    wait_slack: wait_slack(interval),
                },
                out: Out {
                    outbox: Outbox::for_links(&links),
                    links,
                    brokers,
                    holding_back: None,
                    hold_back_age: None,
                },
                inbox: Inbox {
                    commands,
                    control: Control {
                        commands: tx,
                        waker,
                        wake: Arc::new(Mutex::new(None)),
                        pending: Arc::new(AtomicBool::new(false)),
                    },
                    stopping: false,
                    answered: 0,
                    page: None,
                    config_state: ConfigState::default(),
                },
                schedule: Schedule {
                    started: now,
                    stats_interval: interval,
                    last_summary: now,
                    next_summary: now.checked_add(interval.unwrap_or(DEFAULT_WARN_INTERVAL)),
                    summaries: None,
                    warn_every: interval.unwrap_or(DEFAULT_WARN_INTERVAL),
                },
                warnings: InputWarnings {
                    warned: InputStats::default(),
                    horizon,
                    malformed: Throttle::default(),
                    disallowed: Throttle::default(),
                    senders: Throttle::default(),
                    recv_error: Throttle::default(),
                    poll_error: Throttle::default(),
                },
                taps: Taps::default(),
            },
        };
        relay.shell.out.hold_back_age = hold_back_age(&relay.shell.core);
        relay.shell.open_wake();
        Ok(relay)
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shell.intake.listen
    }

    /// A handle that stops, reconfigures or asks the relay from anywhere.
    pub fn control(&self) -> Control {
        self.shell.inbox.control.clone()
    }

    /// The periodic summaries (every `stats.interval`), as snapshots to render
    /// with [`crate::report::Summary`] or as JSON. The loop never waits for the
    /// reader: a summary the reader hasn't taken while more pile up is dropped.
    /// The channel closes when the relay is dropped.
    pub fn summaries(&mut self) -> mpsc::Receiver<Snapshot> {
        let (tx, rx) = mpsc::sync_channel(SUMMARY_QUEUE);
        self.shell.schedule.summaries = Some(tx);
        rx
    }

    /// Copies every datagram admitted from now on into `tap`, as
    /// [`Control::attach`] does from another thread.
    pub fn attach(&mut self, tap: TapProducer) {
        self.shell.taps.list.push(tap);
    }

    /// Takes `config` now, as [`Control::apply`] does from another thread: all of
    /// it, or (when a socket can't be opened) none of it, returning why.
    pub fn apply(&mut self, config: &Config) -> Result<Applied, StartError> {
        self.shell.apply(LoopConfig::of(config), Instant::now())
    }

    /// Input counters so far.
    pub fn input_stats(&self) -> InputStats {
        *self.shell.core.input_stats()
    }

    /// Every counter so far, latency over the summary interval so far.
    pub fn snapshot(&self) -> Snapshot {
        self.shell.snapshot(LatencyWindow::Interval)
    }
}

/// A destination's new link.
enum Opened {
    Udp(Box<Link>),
    Broker(BrokerLink),
}

impl Opened {
    /// Opens destination `id`'s link: its socket (refusing one that would
    /// loop back to `listen`), or its broker's publisher (which says a
    /// connection problem at most once every `warn_every`).
    fn open(
        id: DestinationId,
        d: &Destination,
        listen: SocketAddr,
        warn_every: Duration,
    ) -> Result<Opened, StartError> {
        match &d.target {
            Target::Udp(addr) => Link::open(id, d, *addr, listen).map(|l| Opened::Udp(Box::new(l))),
            Target::Mqtt(settings) => BrokerLink::open(d, settings, warn_every).map(Opened::Broker),
        }
    }
}

/// Puts `item` at `id`'s place in `table`, returning what was there.
fn put<T>(table: &mut Vec<Option<T>>, id: DestinationId, item: T) -> Option<T> {
    if table.len() <= id.index() {
        table.resize_with(id.index() + 1, || None);
    }
    table[id.index()].replace(item)
}

/// How late the wait in the receive may end after the next summary is due,
/// with summaries every `interval` (see [`MIN_WAIT_SLACK`]).
fn wait_slack(interval: Option<Duration>) -> Duration {
    interval.map_or(DEFAULT_WARN_INTERVAL, |i| {
        (i / 20).clamp(MIN_WAIT_SLACK, MAX_WAIT_SLACK)
    })
}

/// The smallest `max_age` of `core`'s destinations when some have one and
/// others don't: the only case in which holding back frames helps.
fn hold_back_age(core: &Fanout) -> Option<Duration> {
    let mut smallest = None::<Duration>;
    let mut unlimited = false;
    for (_, d) in core.destinations() {
        match d.max_age {
            Some(age) => smallest = Some(smallest.map_or(age, |s| s.min(age))),
            None => unlimited = true,
        }
    }
    smallest.filter(|_| unlimited)
}

/// Binds and registers the listening socket on `addr` (configured at `place`).
fn bind_listener(
    registry: &Registry,
    addr: SocketAddr,
    place: &str,
) -> Result<(UdpSocket, SocketAddr), StartError> {
    let (std_listener, granted) =
        socket::bind_listener(addr).map_err(|source| StartError::Listen {
            addr,
            place: place.to_owned(),
            source,
        })?;
    let mut listener = UdpSocket::from_std(std_listener);
    let listen = listener.local_addr().unwrap_or(addr);
    if let Err(e) = recv::enable_receive_times(&listener) {
        // Ages then count from when the loop read each batch.
        debug!("{listen}: no kernel receive times ({e}): frames are aged from when they are read");
    }
    registry
        .register(&mut listener, LISTENER, Interest::READABLE)
        .map_err(StartError::Poll)?;
    if granted < socket::MIN_RECV_BUFFER {
        warn!(
            "the OS gave the listening socket a {} KiB receive buffer (asked for {} KiB): \
             bursts may be lost while forza-relay is busy. On Linux, raise \
             net.core.rmem_max.",
            granted >> 10,
            socket::RECV_BUFFER >> 10
        );
    } else {
        debug!("listening on {listen} with a {granted}-byte receive buffer");
    }
    Ok((listener, listen))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_the_listener_the_waker_and_each_destination() {
        assert_eq!(destination_of(LISTENER), None);
        assert_eq!(destination_of(WAKER), None);
        for i in [0, 1, 7, 1_000] {
            let id = DestinationId::from_index(i);
            let token = token_of(id);
            assert!(token != LISTENER && token != WAKER);
            assert_eq!(destination_of(token), Some(id));
        }
    }
}
