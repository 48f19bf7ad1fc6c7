//! One turn of the loop: wait (in the receive in the plain case, else in the
//! poll), drain the listening socket in batches, hand each batch to the core
//! and then to the taps, flush destinations that became writable, and run the
//! timers (due frames, the summary). See the module documentation of
//! [`crate::relay`] for the two ways of waiting and for holding back.

use std::io;
use std::time::{Duration, Instant};

use log::{debug, error, trace, warn};
use ringbuf::traits::Observer;

use super::broker::BrokerLink;
use super::link::Env;
use super::outbox::Links;
use super::warn::{Clock, Suppressed};
use super::{
    destination_of, Intake, Link, Out, Relay, Schedule, Shell, Wait, BACKLOG_IN_ROW, DRAIN_BUDGET,
    HOLD_BACK_MAX, LISTENER, MAX_RECV_ERRORS, POLL_ERROR_PAUSE, WAKER,
};
use crate::counters::{LatencyWindow, Status};
use crate::fanout::{Arrival, DestinationId, Report, Verdict};
use crate::net::recv::wait::{self, RecvTimeout, WakeFilter};
use crate::net::recv::{Batch, Moment, WAITS};
use crate::relay::mqtt::MqttPublisher;
use crate::report::CountersOf as _;
use crate::report::{DestinationSnapshot, Snapshot};
use crate::tap::TapProducer;

impl Relay {
    /// Runs until stopped, then returns the final snapshot, in which every
    /// destination's frames are sent or dropped: none is held any more.
    pub fn run(&mut self) -> Snapshot {
        while !self.shell.inbox.stopping {
            self.step(None);
        }
        self.shell.finish(Instant::now());
        self.shell.snapshot(LatencyWindow::Run)
    }

    /// One turn of [`Relay::run`]: waits for at most `timeout` (`None`: until
    /// something happens or the next deadline), in the receive in the plain
    /// case, else in the poll ([`Relay::poll_once`]), then handles everything
    /// that is ready.
    pub fn step(&mut self, timeout: Option<Duration>) {
        let shell = &mut self.shell;
        // While packets flow, the turn starts when the last batch was read:
        // its sends took microseconds since.
        let now = if shell.intake.wait == Wait::Flowing {
            shell.intake.last_read
        } else {
            Instant::now()
        };
        // Walks every destination when one may wait for its rate slot (once
        // here for the wait, once more in `timers` when it was due).
        let deadline = shell.core.next_deadline();
        let until = match (
            shell.next_wake(deadline),
            timeout.and_then(|t| now.checked_add(t)),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if shell.plain(deadline) {
            if shell.intake.wait == Wait::Poll {
                shell.intake.wait = Wait::Receive;
            }
            shell.wait(until, now);
            return;
        }
        if matches!(shell.intake.wait, Wait::Receive | Wait::Flowing) {
            // Datagrams may have come since the last receive: look, drain
            // until empty, then sleep (mio is edge-triggered). The next wait
            // in the receive reads the clock and sets its timeout again.
            shell.intake.wait = Wait::Unread;
        }
        self.poll_once(until.map(|d| d.saturating_duration_since(now)));
    }

    /// Waits for at most `timeout` (`None`: until something happens), then handles
    /// everything that is ready: datagrams, writable destinations, commands, due
    /// frames and the periodic summary.
    pub fn poll_once(&mut self, timeout: Option<Duration>) {
        let shell = &mut self.shell;
        // Datagrams left unread by the last drain: look, don't wait.
        let unread = shell.intake.wait == Wait::Unread;
        let timeout = if unread {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        if let Err(e) = self.poll.poll(&mut self.events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                let now = Instant::now();
                if let Some(more) =
                    shell
                        .warnings
                        .poll_error
                        .occurred(1, now, shell.schedule.warn_every)
                {
                    error!(
                        "waiting for packets failed: {e}; trying again{}",
                        Suppressed(more)
                    );
                }
                std::thread::sleep(POLL_ERROR_PAUSE);
            }
            return;
        }
        let now = Instant::now();
        for event in self.events.iter() {
            match event.token() {
                LISTENER if !unread => shell.drain(now),
                LISTENER => {}
                WAKER => shell.commands(now),
                token => {
                    if let Some(id) = destination_of(token) {
                        shell.destination_event(id, event, now);
                    }
                }
            }
        }
        if unread {
            shell.drain(now);
        }
        shell.timers(now);
    }
}

impl Shell {
    fn clock(&self, now: Instant) -> Clock {
        Clock {
            now,
            warn_every: self.schedule.warn_every,
        }
    }

    /// As [`Shell::snapshot`], into `into`, reusing its lists' capacity.
    pub(super) fn snapshot_into(&self, window: LatencyWindow, into: &mut Snapshot) {
        let now = Instant::now();
        into.listen = self.intake.listen;
        into.elapsed = now.saturating_duration_since(self.schedule.started);
        into.input = self.core.counters_into(window, now, &mut into.destinations);
        self.brokers_status(&mut into.destinations);
        into.tap_dropped =
            self.taps.dropped + self.taps.list.iter().map(TapProducer::dropped).sum::<u64>();
        into.not_recorded = self.taps.not_recorded
            + self
                .taps
                .list
                .iter()
                .map(TapProducer::not_recorded)
                .sum::<u64>();
        into.config.clone_from(&self.inbox.config_state);
    }

    /// Every counter, latency over `window`.
    pub(super) fn snapshot(&self, window: LatencyWindow) -> Snapshot {
        let mut snapshot = Snapshot::empty();
        self.snapshot_into(window, &mut snapshot);
        snapshot
    }

    /// What the MQTT destinations' publishers did: each one's published and
    /// not published frames and connections, and a destination whose broker
    /// can't be reached is failing, even while no frame comes to tell (the
    /// core's status follows its frames). `rows` are the core's, in its order.
    fn brokers_status(&self, rows: &mut [DestinationSnapshot]) {
        if self.out.brokers.iter().all(Option::is_none) {
            return;
        }
        for (row, (id, _)) in rows.iter_mut().zip(self.core.destinations()) {
            if let Some(Some(broker)) = self.out.brokers.get(id.index()) {
                // Once stopped, the core's health alone says (see `finish`).
                let stopped = broker.publisher.is_stopping();
                if broker.is_down() && !stopped && row.status != Status::Refused {
                    row.status = Status::Failing;
                }
                if let Some(mqtt) = row.mqtt.as_mut() {
                    let counts = broker.publisher.counts();
                    mqtt.published = counts.published;
                    mqtt.not_published = counts.not_published;
                    mqtt.connections = counts.connections;
                    broker.publisher.problem_into(&mut mqtt.problem);
                }
            }
        }
    }

    /// Makes the wake-up socket for the listening socket bound now, and puts the
    /// listening socket in blocking mode, so the loop can wait in its receive;
    /// if either fails, the loop only waits in the poll.
    pub(super) fn open_wake(&mut self) {
        self.intake.wake = None;
        self.intake.recv_timeout = RecvTimeout::default();
        let sender = if WAITS {
            match wait::set_blocking(&self.intake.listener)
                .and_then(|()| wait::wake_pair(self.intake.listen))
            {
                Ok((sender, filter)) => {
                    self.intake.wake = Some(filter);
                    Some(sender)
                }
                Err(e) => {
                    debug!("{}: waiting in the poll only: {e}", self.intake.listen);
                    None
                }
            }
        } else {
            None
        };
        if let Ok(mut wake) = self.inbox.control.wake.lock() {
            *wake = sender;
        }
    }

    /// The plain case, in which the loop can wait inside the receive: nothing
    /// left unread, no frame waiting in a backlog or for its rate slot.
    fn plain(&self, deadline: Option<Instant>) -> bool {
        self.intake.wake.is_some()
            && self.intake.wait != Wait::Unread
            && self.out.holding_back.is_none()
            && !self.inbox.stopping
            && deadline.is_none()
            && self
                .out
                .links
                .iter()
                .flatten()
                .all(|link| link.backlog.is_empty())
    }

    /// One turn in the plain case: sleeps inside the receive until a datagram
    /// comes (a packet, or the wake-up of a command) or `until` passes, then
    /// handles what came, the timers and the commands.
    fn wait(&mut self, until: Option<Instant>, mut now: Instant) {
        // A command whose wake-up was lost (a full socket, a moved listener)
        // is not left waiting for the next packet.
        self.commands(now);
        if self.inbox.stopping {
            return;
        }
        if until.is_none_or(|until| until > now) {
            let slack = self.intake.wait_slack;
            // While packets flow a timeout within the slack is right for any
            // deadline: nothing to work out.
            let flowing = self.intake.wait == Wait::Flowing;
            let armed = if flowing
                && until.is_some()
                && self.intake.recv_timeout.holds_while_flowing(slack)
            {
                Ok(())
            } else {
                let timeout = until.map(|d| d.saturating_duration_since(now));
                self.intake
                    .recv_timeout
                    .arm(&self.intake.listener, timeout, slack, flowing)
            };
            now = match armed.and_then(|()| self.intake.batch.wait(&self.intake.listener)) {
                Ok(n) => {
                    self.intake.wait_errors = 0;
                    let read = self.handle_batch(n, 0);
                    // While packets flow `now` is the last batch's moment:
                    // they flow while batches come within the slack.
                    self.intake.wait = if read < now + slack {
                        Wait::Flowing
                    } else {
                        Wait::Receive
                    };
                    self.intake.last_read = read;
                    if n == Batch::SIZE {
                        // More may be queued.
                        self.drain(read);
                        Instant::now()
                    } else {
                        self.release_held_back(read);
                        self.warn_input(read);
                        self.check_backlogs();
                        // The sends since took microseconds: no clock read
                        // for them.
                        read
                    }
                }
                Err(e) => {
                    self.intake.wait = Wait::Receive;
                    self.wait_failed(&e, now);
                    Instant::now()
                }
            };
        }
        // The timers first: a snapshot never shows a latency window that is
        // overdue for its new start.
        self.timers(now);
        self.commands(now);
    }

    /// A wait in the receive that ended without a datagram: the timeout or a
    /// signal say nothing; another error is counted and warned about as a
    /// drain does, and after [`MAX_RECV_ERRORS`] in a row the loop waits in the
    /// poll for good, so a socket that keeps failing can't make it spin.
    fn wait_failed(&mut self, e: &io::Error, now: Instant) {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => {}
            io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused => {
                trace!("ignored {e} on the listening socket");
            }
            _ => {
                self.receive_failed(e, now);
                self.intake.wait_errors += 1;
                if self.intake.wait_errors == MAX_RECV_ERRORS {
                    warn!(
                        "{}: the receive keeps failing; waiting in the poll from now on",
                        self.intake.listen
                    );
                    self.intake.wake = None;
                    if let Ok(mut wake) = self.inbox.control.wake.lock() {
                        *wake = None;
                    }
                }
            }
        }
    }

    /// The earliest moment the loop must wake without an event, given the
    /// core's next `deadline`.
    fn next_wake(&self, deadline: Option<Instant>) -> Option<Instant> {
        match (deadline, self.schedule.next_summary) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Receives until the socket is empty, handing each datagram to the core
    /// with when it reached the machine.
    pub(super) fn drain(&mut self, mut now: Instant) {
        if self.intake.wait == Wait::Unread {
            self.intake.wait = Wait::Poll;
        }
        let mut unread = false;
        let mut errors = 0;
        let mut read = 0;
        loop {
            match self.intake.batch.recv(&self.intake.listener) {
                Ok(n) => {
                    now = self.handle_batch(n, read);
                    read += n;
                    if n < Batch::SIZE {
                        // A short batch: the queue is empty (Linux's recvmmsg).
                        break;
                    }
                    if read >= DRAIN_BUDGET {
                        // Datagrams still queued: other work (writable
                        // destinations, rate slots, commands) goes first, then
                        // draining resumes.
                        unread = true;
                        break;
                    }
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => {}
                    // A closed consumer reported on the listening socket (Windows):
                    // not ours to act on, and never a reason to stop receiving.
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused => {
                        trace!("ignored {e} on the listening socket");
                    }
                    _ => {
                        self.receive_failed(&e, now);
                        // Keep reading what is queued (mio is edge-triggered), but
                        // don't spin on a socket that keeps failing.
                        errors += 1;
                        if errors == MAX_RECV_ERRORS {
                            break;
                        }
                    }
                },
            }
        }
        if unread {
            self.intake.wait = Wait::Unread;
        } else {
            self.release_held_back(now);
        }
        self.warn_input(now);
        self.check_backlogs();
    }

    /// Whether the last batch (`n` datagrams, after `read` in the same drain,
    /// read at `moment`) shows a backlog: many queued at once, or its oldest
    /// frame already past the smallest `max_age`. Only worth acting on when
    /// some destinations have a limit and others don't ([`hold_back_age`](super::hold_back_age)).
    fn is_backlog(&self, n: usize, read: usize, moment: &Moment) -> bool {
        let Some(smallest) = self.out.hold_back_age.filter(|_| n > 0) else {
            return false;
        };
        let oldest = moment.received(&self.intake.batch, 0);
        read + n >= BACKLOG_IN_ROW || moment.instant.saturating_duration_since(oldest) > smallest
    }

    /// The listening socket is empty (or a command needs the frames out): the
    /// frames held back go, in order.
    pub(super) fn release_held_back(&mut self, now: Instant) {
        if self.out.holding_back.take().is_none() {
            return;
        }
        for i in 0..self.out.links.len() {
            self.on_link(DestinationId::from_index(i), now, |link, report, env| {
                link.release(report, env);
            });
        }
    }

    /// Hands the `n` datagrams of the last batch (read after `read` others in
    /// the same drain) to the core, each with when it reached the machine,
    /// then to the taps; returns the moment the batch was read, on the loop's
    /// clock. The wake-up datagram goes to neither: it only ended the wait,
    /// after which the commands are looked at (in the poll, the waker says
    /// so). A status query the core recognised is answered after the sends.
    fn handle_batch(&mut self, n: usize, read: usize) -> Instant {
        // Both clocks once per batch, after the receive: the kernel's times
        // are before it.
        let moment = Moment::now();
        let now = moment.instant;
        if self
            .out
            .holding_back
            .is_some_and(|since| now.saturating_duration_since(since) > HOLD_BACK_MAX)
        {
            // Under a load the relay can't keep up with, the socket never
            // empties: destinations without a limit still get their frames.
            self.release_held_back(now);
        }
        if self.out.holding_back.is_none() && self.is_backlog(n, read, &moment) {
            // Destinations with a limit reach the newest frame before those
            // without get the backlog (issue 15).
            self.out.holding_back = Some(now);
        }
        let Shell {
            intake:
                Intake {
                    batch,
                    verdicts,
                    wake,
                    ..
                },
            core,
            out:
                Out {
                    links,
                    brokers,
                    outbox,
                    holding_back,
                    ..
                },
            registry,
            schedule: Schedule { warn_every, .. },
            ..
        } = self;
        let env = Env {
            registry,
            clock: Clock {
                now,
                warn_every: *warn_every,
            },
        };
        let mut sink = Links {
            links,
            brokers,
            outbox,
            env,
            hold_back: holding_back.is_some(),
        };
        // A datagram from another port than the wake-up's is no wake-up: one
        // comparison with the port as received, before its sender's address
        // is built (0 without a wake-up: the whole check then says no).
        let wake_port = wake.as_ref().map_or(0, WakeFilter::port);
        for (i, verdict) in verdicts[..n].iter_mut().enumerate() {
            if batch.sender_port(i) == wake_port
                && wake.as_ref().is_some_and(|w| {
                    let (data, from) = batch.datagram(i);
                    w.is_wake(data, from)
                })
            {
                *verdict = Verdict::WakeUp;
                continue;
            }
            let (data, from) = batch.datagram(i);
            let (received, wall) = moment.times(batch, i);
            let arrival = Arrival::new(data, from, received, wall);
            *verdict = core.handle(arrival, now, &mut sink);
        }
        // The batch's frames for the UDP destinations, in one call (Linux).
        outbox.send(links, core, &env);
        if self.core.queries() != self.inbox.answered {
            self.answer_queries(n);
        }
        // After the sends: a tap's copy never delays a packet.
        if !self.taps.list.is_empty() {
            self.tap(n, moment);
        }
        now
    }

    /// Copies the admitted datagrams of the last batch (`n` of them, read at
    /// `moment`) into every tap, each with the time it reached the machine,
    /// and lets go of taps whose readers have gone.
    fn tap(&mut self, n: usize, moment: Moment) {
        let Shell {
            taps,
            intake:
                Intake {
                    batch,
                    verdicts,
                    listen,
                    ..
                },
            ..
        } = self;
        for tap in taps.list.iter_mut() {
            for (i, verdict) in verdicts.iter().enumerate().take(n) {
                if verdict.is_admitted() {
                    let (data, from) = batch.datagram(i);
                    let time = batch.received(i).unwrap_or(moment.wall);
                    tap.push(time, from, *listen, data);
                }
            }
        }
        if self.taps.list.iter().any(TapProducer::is_closed) {
            let gone: u64 = self
                .taps
                .list
                .iter()
                .filter(|t| t.is_closed())
                .map(TapProducer::dropped)
                .sum();
            self.taps.dropped += gone;
            self.taps.not_recorded += self
                .taps
                .list
                .iter()
                .filter(|t| t.is_closed())
                .map(TapProducer::not_recorded)
                .sum::<u64>();
            self.taps.list.retain(|t| !t.is_closed());
        }
    }

    /// In debug builds, checks that each backlog holds what the core counts
    /// as queued for it: every outcome reached the core.
    pub(super) fn check_backlogs(&self) {
        if cfg!(debug_assertions) {
            for (i, link) in self.out.links.iter().enumerate() {
                if let Some(link) = link {
                    let id = DestinationId::from_index(i);
                    debug_assert_eq!(
                        link.holding() as u64,
                        self.core.queued(id),
                        "{}: the backlog and the core disagree",
                        link.warner.name
                    );
                }
            }
        }
    }

    /// Runs `f` on destination `id`'s link at `now`, with where it reports
    /// to the core and what it needs from the loop.
    fn on_link(
        &mut self,
        id: DestinationId,
        now: Instant,
        f: impl FnOnce(&mut Link, &mut Report<'_>, &Env<'_>),
    ) {
        let clock = self.clock(now);
        let Shell {
            out: Out { links, .. },
            core,
            registry,
            ..
        } = self;
        if let (Some(Some(link)), Some(mut report)) = (links.get_mut(id.index()), core.report(id)) {
            f(link, &mut report, &Env { registry, clock });
        }
    }

    fn destination_event(&mut self, id: DestinationId, event: &mio::event::Event, now: Instant) {
        self.on_link(id, now, |link, report, env| {
            if event.is_error() || event.is_read_closed() {
                // Collect a pending ICMP error now, so it doesn't fail the next send.
                if let Ok(Some(e)) = link.socket.take_error() {
                    link.warner.report(&e, report, env.clock);
                }
            }
            if event.is_writable() {
                link.flush(report, env);
            }
        });
    }

    /// Frames whose rate slot has come, and the summary when it is due.
    fn timers(&mut self, now: Instant) {
        if self.core.next_deadline().is_some_and(|due| now >= due) {
            let clock = self.clock(now);
            let Shell {
                core,
                out:
                    Out {
                        links,
                        brokers,
                        outbox,
                        holding_back,
                        ..
                    },
                registry,
                ..
            } = self;
            let env = Env { registry, clock };
            core.due(
                now,
                &mut Links {
                    links,
                    brokers,
                    outbox,
                    env,
                    hold_back: holding_back.is_some(),
                },
            );
            outbox.send(links, core, &env);
            self.check_backlogs();
        }
        if self.schedule.next_summary.is_some_and(|due| now >= due) {
            self.schedule.last_summary = now;
            self.schedule.next_summary = now.checked_add(self.schedule.warn_every);
            if let Some(tx) = self
                .schedule
                .summaries
                .as_ref()
                .filter(|_| self.schedule.stats_interval.is_some())
            {
                // A reader that is behind misses this one; one that is gone is
                // no reason to stop.
                let _ = tx.try_send(self.snapshot(LatencyWindow::Interval));
            }
            // The summary's own latency window, on the same schedule when
            // summaries are off.
            self.core.new_interval();
        }
    }

    /// The relay stops: one last try to send what waits in the backlogs,
    /// without waiting; what is still there, or waits for its rate slot, the
    /// core counts dropped.
    fn finish(&mut self, now: Instant) {
        self.release_held_back(now);
        for i in 0..self.out.links.len() {
            self.on_link(DestinationId::from_index(i), now, |link, report, env| {
                if !link.backlog.is_empty() {
                    link.flush(report, env);
                }
            });
        }
        self.check_backlogs();
        for link in self.out.links.iter_mut().flatten() {
            link.clear_backlog(&self.registry);
        }
        self.core.finish();
        // A broker that can't be reached now stays failing in the final
        // summary, as in the periodic ones, however long ago its last frame
        // came: its publisher is gone once stopped.
        for (i, broker) in self.out.brokers.iter().enumerate() {
            if broker.as_ref().is_some_and(BrokerLink::is_down) {
                if let Some(mut report) = self.core.report(DestinationId::from_index(i)) {
                    report.unavailable(now);
                }
            }
        }
        // Every publisher says "offline" and disconnects, together, within
        // a second or two whatever the brokers do.
        // They stay, for the final summary's published counts.
        MqttPublisher::stop_all(
            self.out
                .brokers
                .iter_mut()
                .flatten()
                .map(|b| &mut b.publisher),
        );
        self.last_words();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::relay::DEFAULT_WARN_INTERVAL;

    /// Issue 15: with summaries off, the latency the dashboard and the page
    /// show (the interval's) still starts afresh every
    /// [`DEFAULT_WARN_INTERVAL`], as it does at each summary when they are on;
    /// the run's figures keep everything.
    #[test]
    fn with_summaries_off_the_latency_window_still_starts_afresh() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let config = Config::from_toml(
            &format!(
                "[listen]\naddr = \"127.0.0.1:0\"\n[stats]\ninterval = 0\n\
                 [[destination]]\naddr = \"{}\"\n",
                receiver.local_addr().unwrap()
            ),
            "window.toml",
            &crate::config::Overrides::default(),
        )
        .unwrap();
        let mut relay = Relay::bind(&config).unwrap();
        let t0 = relay.shell.schedule.last_summary;
        assert_eq!(
            relay.shell.schedule.next_summary,
            Some(t0 + DEFAULT_WARN_INTERVAL)
        );
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.send_to(&[7; 324], relay.local_addr()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while relay.input_stats().received == 0 && Instant::now() < deadline {
            relay.poll_once(Some(Duration::from_millis(50)));
        }
        let mut buf = [0u8; 512];
        assert_eq!(receiver.recv(&mut buf).unwrap(), 324);
        let count =
            |relay: &Relay, window| relay.shell.snapshot(window).destinations[0].latency.count;
        assert_eq!(count(&relay, LatencyWindow::Interval), 1);

        let due = relay.shell.schedule.next_summary.unwrap();
        relay.shell.timers(due);
        assert_eq!(count(&relay, LatencyWindow::Interval), 0, "a new window");
        assert_eq!(count(&relay, LatencyWindow::Run), 1, "the run keeps it");
        assert_eq!(
            relay.shell.schedule.next_summary,
            Some(due + DEFAULT_WARN_INTERVAL),
            "and the next one after the same interval"
        );
    }
}
