//! Taking a new configuration while running: the core plans, the shell opens
//! every new socket first (so that a failure changes nothing), closes and
//! drops what the plan closes and drops, and the core commits and says what
//! changed ([`Applied`]). The shell never matches destinations itself.

use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use log::info;

use super::link::check_loop;
use super::{
    bind_listener, hold_back_age, put, wait_slack, Opened, Outbox, Shell, StartError,
    DEFAULT_WARN_INTERVAL,
};
use crate::config::Config;
use crate::fanout::{Action, Changes, Routes};

/// What a new configuration changed: the listening address (the shell's) and
/// everything the core changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The listening address, before and after, when it changed.
    pub listen: Option<(SocketAddr, SocketAddr)>,
    /// What changed in the core: destinations, input format, allow-list.
    pub changes: Changes,
}

impl Applied {
    /// True when the new configuration changed nothing the relay does.
    pub fn is_empty(&self) -> bool {
        self.listen.is_none() && self.changes.is_empty()
    }
}

impl fmt::Display for Applied {
    /// One line: `~ listen: A -> B, + C (fm7), ~ B: same -> fh5, - D`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some((before, after)) = self.listen {
            write!(f, "~ listen: {before} -> {after}")?;
            sep = ", ";
        }
        self.changes.write_items(f, &mut sep)?;
        if sep.is_empty() {
            f.write_str("no changes")?;
        }
        Ok(())
    }
}

/// A configuration as the loop takes it: the core's routes, and the parts the
/// shell keeps for itself.
pub(super) struct LoopConfig {
    pub(super) listen: SocketAddr,
    /// Where `listen` was written, for a "port in use" message.
    pub(super) listen_place: String,
    pub(super) stats_interval: Option<Duration>,
    pub(super) routes: Routes,
}

impl LoopConfig {
    pub(super) fn of(config: &Config) -> LoopConfig {
        LoopConfig {
            listen: config.listen,
            listen_place: config.listen_place.clone(),
            stats_interval: config.stats_interval,
            routes: config.routes(),
        }
    }
}
impl Shell {
    /// Takes a new configuration, all of it or (when a socket can't be opened)
    /// none of it: the core plans, the shell opens what the plan opens, then
    /// closes and drops what it closes and drops, and the core commits.
    /// Destinations that did not change keep their sockets, backlogs, filters
    /// and counters.
    pub(super) fn apply(&mut self, setup: LoopConfig, now: Instant) -> Result<Applied, StartError> {
        // Open what is new first, so that a failure changes nothing.
        // Port 0 in a config means "any": the port bound is as good.
        let listener = if setup.listen == self.intake.configured_listen
            || setup.listen == self.intake.listen
        {
            None
        } else {
            Some(bind_listener(
                &self.registry,
                setup.listen,
                &setup.listen_place,
            )?)
        };
        let listen = listener
            .as_ref()
            .map_or(self.intake.listen, |(_, addr)| *addr);
        let plan = self.core.plan(&setup.routes);
        let mut opened = Vec::new();
        let warn_every = setup.stats_interval.unwrap_or(DEFAULT_WARN_INTERVAL);
        let opening = plan.steps().try_for_each(|(d, step)| match step.action {
            Action::Open => Opened::open(step.id, d, listen, warn_every)
                .map(|link| opened.push((step.id, link))),
            // The same socket stays; a new listen address may make it a loop.
            Action::Keep { .. } => check_loop(d, listen),
        });
        if let Err(e) = opening {
            if let Some((mut socket, _)) = listener {
                let _ = self.registry.deregister(&mut socket);
            }
            return Err(e);
        }
        let mut moved = None;
        if let Some((socket, addr)) = listener {
            // What the old socket still holds is relayed before it closes.
            self.drain(now);
            let mut old = std::mem::replace(&mut self.intake.listener, socket);
            let _ = self.registry.deregister(&mut old);
            moved = Some((self.intake.listen, addr));
            self.intake.listen = addr;
            self.intake.configured_listen = setup.listen;
            self.open_wake();
        }
        // Held-back frames go as they would have, before anything closes.
        self.release_held_back(now);
        for &id in plan.closed() {
            if let Some(mut link) = self.out.links.get_mut(id.index()).and_then(Option::take) {
                link.clear_backlog(&self.registry);
            }
            // Its publisher says "offline" and ends by itself.
            if let Some(broker) = self.out.brokers.get_mut(id.index()).and_then(Option::take) {
                broker.replaced_by(None);
            }
        }
        for (_, step) in plan.steps() {
            if let Action::Keep {
                discard_backlog: true,
                ..
            } = step.action
            {
                // Frames waiting are in the old format.
                if let Some(Some(link)) = self.out.links.get_mut(step.id.index()) {
                    link.clear_backlog(&self.registry);
                }
            }
        }
        for (id, link) in opened {
            // What it had before goes: a socket with what it held, a
            // publisher (quiet when the new one says "online" on its topic).
            let old_link = self.out.links.get_mut(id.index()).and_then(Option::take);
            let old_broker = self.out.brokers.get_mut(id.index()).and_then(Option::take);
            if let Some(mut old) = old_link {
                old.clear_backlog(&self.registry);
            }
            match link {
                Opened::Udp(link) => {
                    put(&mut self.out.links, id, link);
                    if let Some(old) = old_broker {
                        old.replaced_by(None);
                    }
                }
                Opened::Broker(broker) => {
                    if let Some(old) = old_broker {
                        old.replaced_by(Some(&broker));
                    }
                    put(&mut self.out.brokers, id, broker);
                }
            }
        }
        let changes = self.core.commit(plan);
        self.out.hold_back_age = hold_back_age(&self.core);
        self.out.outbox = Outbox::for_links(&self.out.links);
        for removed in &changes.removed {
            // Its last word: the final summary no longer lists it.
            let s = &removed.stats;
            info!(
                "{} removed: received {}, sent {}{}, dropped {}{}",
                removed.destination.name,
                s.received,
                s.sent,
                crate::report::Refusals(s),
                s.dropped_total(),
                crate::report::Drops(s)
            );
        }
        self.warnings.horizon = self.core.horizon();
        self.set_stats_interval(setup.stats_interval, now);
        self.check_backlogs();
        Ok(Applied {
            listen: moved,
            changes,
        })
    }

    /// A new summary interval. The schedule stays as it is when the interval
    /// does; otherwise the next summary (or, with summaries off, the end of
    /// the latency window) comes one new interval after the last one (or the
    /// start), and not before now.
    fn set_stats_interval(&mut self, interval: Option<Duration>, now: Instant) {
        if interval == self.schedule.stats_interval {
            return;
        }
        self.schedule.stats_interval = interval;
        self.intake.wait_slack = wait_slack(interval);
        self.schedule.warn_every = interval.unwrap_or(DEFAULT_WARN_INTERVAL);
        // The publishers follow the same rule for their connection problems.
        for broker in self.out.brokers.iter().flatten() {
            broker.publisher.set_warn_every(self.schedule.warn_every);
        }
        self.schedule.next_summary = self
            .schedule
            .last_summary
            .checked_add(self.schedule.warn_every)
            .map(|due| due.max(now));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::relay::Relay;

    #[test]
    fn applied_lists_the_listen_address_first() {
        let applied = Applied {
            listen: Some((
                "127.0.0.1:5400".parse().unwrap(),
                "127.0.0.1:5401".parse().unwrap(),
            )),
            changes: Changes {
                allow: true,
                ..Changes::default()
            },
        };
        assert_eq!(
            applied.to_string(),
            "~ listen: 127.0.0.1:5400 -> 127.0.0.1:5401, ~ listen.allow"
        );
        assert!(!applied.is_empty());
        assert_eq!(Applied::default().to_string(), "no changes");
        assert!(Applied::default().is_empty());
    }

    #[test]
    fn a_new_summary_interval_keeps_the_phase() {
        let config = Config::from_toml(
            "[listen]\naddr = \"127.0.0.1:0\"\n[stats]\ninterval = 3\n\
             [[destination]]\naddr = \"127.0.0.1:9\"\n",
            "phase.toml",
            &crate::config::Overrides::default(),
        )
        .unwrap();
        let mut relay = Relay::bind(&config).unwrap();
        let shell = &mut relay.shell;
        let s = Duration::from_secs;
        let t0 = shell.schedule.last_summary;
        assert_eq!(shell.schedule.next_summary, Some(t0 + s(3)));
        shell.set_stats_interval(Some(s(3)), t0 + s(2));
        assert_eq!(
            shell.schedule.next_summary,
            Some(t0 + s(3)),
            "a reload moves nothing"
        );
        shell.set_stats_interval(Some(s(10)), t0 + s(2));
        assert_eq!(
            shell.schedule.next_summary,
            Some(t0 + s(10)),
            "one new interval after the last summary"
        );
        shell.set_stats_interval(Some(s(1)), t0 + s(5));
        assert_eq!(shell.schedule.next_summary, Some(t0 + s(5)), "overdue: now");
        shell.set_stats_interval(None, t0 + s(6));
        assert_eq!(
            shell.schedule.next_summary,
            Some(t0 + DEFAULT_WARN_INTERVAL),
            "summaries off: the latency window keeps its schedule"
        );
        shell.set_stats_interval(Some(s(2)), t0 + s(7));
        assert_eq!(shell.schedule.next_summary, Some(t0 + s(7)));
    }

    #[test]
    fn port_0_and_the_port_it_bound_are_the_same_listen_address() {
        let toml = |listen: &str| {
            Config::from_toml(
                &format!(
                    "[listen]\naddr = \"{listen}\"\n[[destination]]\naddr = \"127.0.0.1:9\"\n"
                ),
                "listen.toml",
                &crate::config::Overrides::default(),
            )
            .unwrap()
        };
        let mut relay = Relay::bind(&toml("127.0.0.1:0")).unwrap();
        let bound = relay.local_addr();
        for listen in [
            bound.to_string(),
            "127.0.0.1:0".to_owned(),
            bound.to_string(),
        ] {
            let applied = relay.apply(&toml(&listen)).unwrap();
            assert_eq!(applied.listen, None, "{listen}: {applied}");
            assert_eq!(relay.local_addr(), bound);
        }
    }
}
