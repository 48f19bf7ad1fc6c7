//! Taking new routes in two steps: the pure [`Fanout::plan`] matches
//! destinations by name (the one place that rule lives) and says, per
//! destination, what the shell must do with its socket ([`Plan`], [`Step`],
//! [`Action`]); the shell does it (all or nothing), then [`Fanout::commit`]
//! applies the plan and returns the [`Changes`]. How a change reads is beside
//! it, in `changes.rs`.

use super::core::DestinationState;
use super::{Destination, DestinationId, Fanout, Routes};
use crate::counters::DestinationStats;
use crate::filter::{AgeLimit, RaceFilter, RateLimiter};
use crate::wire::{Acceptor, Input};

/// What the shell must do with one destination's socket for a [`Plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Open its link (a socket to its address, or a publisher to its
    /// broker): for a new destination, or one whose address (or broker
    /// settings) changed, whose old link closes with what it held.
    Open,
    /// The same socket stays.
    Keep {
        /// The frames the shell holds for it are dropped: they are in the old
        /// output format.
        discard_backlog: bool,
        /// Its rate limiter starts afresh (its `max_rate` changed); the core's
        /// own business, listed for completeness.
        reset_limiter: bool,
    },
}

/// One destination of a [`Plan`]: the id it has, or will get, and what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Its id from the commit on.
    pub id: DestinationId,
    /// What the shell does with its socket.
    pub action: Action,
}

/// What a new set of [`Routes`] changes, per destination, before anything is
/// changed: made by [`Fanout::plan`], carried out by the shell (sockets) and
/// then by [`Fanout::commit`] (everything else).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The commits the core had seen when the plan was made.
    generation: u64,
    /// The new routes, a repeated name left out.
    routes: Routes,
    /// One per destination of `routes`, in order.
    steps: Vec<Step>,
    /// Destinations that go away: the shell closes their sockets and drops
    /// what they held.
    closed: Vec<DestinationId>,
}

impl Plan {
    /// Every destination of the new routes, in order, with its step.
    pub fn steps(&self) -> impl Iterator<Item = (&Destination, Step)> {
        self.routes
            .destinations
            .iter()
            .zip(self.steps.iter().copied())
    }

    /// The destinations that go away.
    pub fn closed(&self) -> &[DestinationId] {
        &self.closed
    }

    /// The routes it leads to.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }
}

/// A destination whose configuration changed; it kept its counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// Its id, which stays.
    pub id: DestinationId,
    /// The configuration it had.
    pub before: Destination,
    /// The configuration it has now.
    pub after: Destination,
}

/// A destination no longer configured, with its final counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The id it had.
    pub id: DestinationId,
    /// Its last configuration.
    pub destination: Destination,
    /// Its counters at removal, every frame it held counted dropped.
    pub stats: DestinationStats,
}

/// What [`Fanout::commit`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// New destinations.
    pub added: Vec<(DestinationId, Destination)>,
    /// Destinations whose configuration changed.
    pub changed: Vec<Changed>,
    /// Destinations removed.
    pub removed: Vec<Removed>,
    /// The input format, before and after, when it changed.
    pub input: Option<(Input, Input)>,
    /// The allow-list changed.
    pub allow: bool,
}

impl Changes {
    /// True when the new routes made no difference to the core.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.changed.is_empty()
            && self.removed.is_empty()
            && self.input.is_none()
            && !self.allow
    }
}

impl Fanout {
    /// What `routes` would change, destination by destination, matching them
    /// by name: changes nothing.
    pub fn plan(&self, routes: &Routes) -> Plan {
        let mut kept: Vec<Destination> = Vec::with_capacity(routes.destinations.len());
        for d in &routes.destinations {
            if !kept.iter().any(|k| k.name == d.name) {
                kept.push(d.clone());
            }
        }
        let named = |name: &str| {
            self.states()
                .find(|(_, s)| s.config.name == name)
                .map(|(id, s)| (id, &s.config))
        };
        let closed: Vec<DestinationId> = self
            .states()
            .filter(|(_, s)| !kept.iter().any(|d| d.name == s.config.name))
            .map(|(id, _)| id)
            .collect();
        // New destinations take the free ids, lowest first: those never
        // used, and those of the destinations that go away.
        let mut free = (0..)
            .map(DestinationId)
            .filter(|id| match self.dests.get(id.0) {
                Some(slot) => slot.is_none() || closed.contains(id),
                None => true,
            });
        let steps = kept
            .iter()
            .map(|d| match named(&d.name) {
                Some((id, before)) if before.target != d.target => Step {
                    id,
                    action: Action::Open,
                },
                Some((id, before)) => Step {
                    id,
                    action: Action::Keep {
                        discard_backlog: before.output != d.output,
                        reset_limiter: before.max_rate != d.max_rate,
                    },
                },
                None => Step {
                    id: free.next().expect("ids never run out"),
                    action: Action::Open,
                },
            })
            .collect();
        Plan {
            generation: self.generation,
            routes: Routes {
                input: routes.input,
                allow: routes.allow.clone(),
                destinations: kept,
            },
            steps,
            closed,
        }
    }

    /// Takes the routes of `plan`, which the shell has carried out, and says
    /// what changed. Panics if another plan was committed since `plan` was
    /// made (the shell plans and commits in one go).
    pub fn commit(&mut self, plan: Plan) -> Changes {
        assert_eq!(
            plan.generation, self.generation,
            "a plan is committed to the core it was made from, with no commit between"
        );
        self.generation += 1;
        let Plan {
            routes,
            steps,
            closed,
            ..
        } = plan;
        let mut changes = Changes::default();
        if routes.input != self.acceptor.input() {
            changes.input = Some((self.acceptor.input(), routes.input));
            self.acceptor = Acceptor::new(routes.input);
        }
        if routes.allow != self.allow {
            changes.allow = true;
            self.allow = routes.allow;
        }
        for id in closed {
            let Some(mut state) = self.dests.get_mut(id.0).and_then(Option::take) else {
                continue;
            };
            state.forget_pending();
            state.drop_queued();
            changes.removed.push(Removed {
                id,
                stats: state.stats(),
                destination: state.config,
            });
        }
        self.order.clear();
        for (d, step) in routes.destinations.into_iter().zip(steps) {
            let id = step.id;
            self.order.push(id);
            if self.dests.len() <= id.0 {
                self.dests.resize_with(id.0 + 1, || None);
            }
            let Some(state) = self.dests[id.0].as_mut() else {
                changes.added.push((id, d.clone()));
                self.dests[id.0] = Some(Box::new(DestinationState::new(d)));
                continue;
            };
            if state.config == d {
                continue;
            }
            if state.config.output != d.output || state.config.target != d.target {
                // The waiting frame is in the old format, or for the old address.
                state.forget_pending();
            }
            let dropped_by_shell = match step.action {
                Action::Open => true,
                Action::Keep {
                    discard_backlog, ..
                } => discard_backlog,
            };
            if dropped_by_shell {
                state.drop_queued();
            }
            if state.config.max_rate != d.max_rate {
                state.rate = RateLimiter::new(d.max_rate);
            }
            // A new limit applies to the frames held too.
            state.age = AgeLimit::new(d.max_age);
            if state.config.only_race_on != d.only_race_on {
                state.race = RaceFilter::default();
            }
            let before = std::mem::replace(&mut state.config, d.clone());
            changes.changed.push(Changed {
                id,
                before,
                after: d,
            });
        }
        self.rebuild_texts();
        let may_wait = self.states().any(|(_, d)| d.may_wait());
        self.may_wait = may_wait;
        self.note_holds();
        self.note_session();
        changes
    }

    /// [`Fanout::plan`] then [`Fanout::commit`], for a caller with no sockets.
    pub fn apply(&mut self, routes: &Routes) -> Changes {
        let plan = self.plan(routes);
        self.commit(plan)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::counters::DropReason;
    use crate::fanout::testing::*;
    use crate::report::CountersOf as _;
    use crate::wire::{Format, Packet};

    #[test]
    fn plan_then_commit_keeps_unchanged_state_and_changed_counters() {
        let before = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9001, "same", "")
                + &destination_toml("b", 9002, "same", "max_rate = 10")
                + &destination_toml("d", 9004, "fm7", "")),
        );
        let mut core = Fanout::new(&before);
        let mut sink = Recorder::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // b sends the first and one more within its tolerance; the third waits.
        core.handle_at(&fh6(1, true), SENDER, t0, &mut sink);
        core.handle_at(&fh6(2, true), SENDER, t0 + ms(5), &mut sink);
        core.handle_at(&fh6(3, true), SENDER, t0 + ms(10), &mut sink);
        let ids: Vec<DestinationId> = core.destinations().map(|(id, _)| id).collect();

        let after = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("c", 9003, "fm7", "")
                + &destination_toml("b", 9002, "fh5", "max_rate = 10")
                + &destination_toml("a", 9001, "same", "")),
        );
        let plan = core.plan(&after);
        let steps: Vec<(&str, Step)> = plan.steps().map(|(d, s)| (d.name.as_str(), s)).collect();
        assert_eq!(
            steps,
            [
                (
                    "c",
                    Step {
                        // c takes the id d leaves.
                        id: ids[2],
                        action: Action::Open
                    }
                ),
                (
                    "b",
                    Step {
                        id: ids[1],
                        action: Action::Keep {
                            discard_backlog: true,
                            reset_limiter: false
                        }
                    }
                ),
                (
                    "a",
                    Step {
                        id: ids[0],
                        action: Action::Keep {
                            discard_backlog: false,
                            reset_limiter: false
                        }
                    }
                ),
            ]
        );
        assert_eq!(plan.closed(), [ids[2]]);
        assert_eq!(
            core.counters().destinations.len(),
            3,
            "a plan changes nothing"
        );
        let changes = core.commit(plan);
        assert_eq!(changes.to_string(), "+ c (fm7), ~ b: same -> fh5, - d");
        assert_eq!(changes.removed.len(), 1);
        assert_eq!(changes.removed[0].destination.name, "d");
        assert_eq!(changes.removed[0].stats.sent, 3, "d's final counters");
        assert_eq!(changes.changed[0].id, ids[1], "b keeps its id");
        assert_eq!(changes.added[0].0, ids[2]);
        let names: Vec<&str> = core.destinations().map(|(_, d)| d.name.as_str()).collect();
        assert_eq!(names, ["c", "b", "a"], "configuration order");

        let c = core.counters();
        assert_eq!(stats(&c, "a").sent, 3, "a kept its counters");
        let b = stats(&c, "b");
        assert_eq!(b.sent, 2, "b kept its counters");
        assert_eq!(
            b.dropped(DropReason::RateLimited),
            1,
            "b's pending frame was in the old format"
        );
        assert_eq!(stats(&c, "c").sent, 0);
        assert_balanced(&c);

        // b's rate limiter (max_rate unchanged) still holds its slot after the
        // change of format.
        core.handle_at(&fh6(4, true), SENDER, t0 + ms(20), &mut sink);
        let got_b = sink.to(&core, "b");
        assert_eq!(got_b.len(), 2, "b's tolerance is still used");
        assert_eq!(core.next_deadline(), Some(t0 + ms(170)));
        core.due(t0 + ms(170), &mut sink);
        let got_b = sink.to(&core, "b");
        assert_eq!(got_b.len(), 3);
        let p = Packet::new_checked(&got_b[2][..], Format::Fh5).unwrap();
        assert_eq!(p.timestamp_ms(), 4);
        assert_eq!(p.car_class(), 5, "now translated to fh5");

        assert!(
            core.apply(&after).is_empty(),
            "the same routes change nothing"
        );
        assert_eq!(core.apply(&after).to_string(), "no changes");
    }

    #[test]
    fn a_new_address_opens_a_socket_and_a_new_rate_resets_the_limiter() {
        let before = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9001, "same", "max_rate = 10")),
        );
        let after = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9005, "same", "max_rate = 20")),
        );
        let core = Fanout::new(&before);
        let plan = core.plan(&after);
        let steps: Vec<Step> = plan.steps().map(|(_, s)| s).collect();
        assert_eq!(
            steps,
            [Step {
                id: id_of(&core, "a"),
                action: Action::Open
            }]
        );
        let rate_only = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("a", 9001, "same", "max_rate = 20")),
        );
        let steps: Vec<Step> = core.plan(&rate_only).steps().map(|(_, s)| s).collect();
        assert_eq!(
            steps[0].action,
            Action::Keep {
                discard_backlog: false,
                reset_limiter: true
            }
        );
    }

    #[test]
    #[should_panic(expected = "a plan is committed to the core it was made from")]
    fn a_stale_plan_is_refused() {
        let r = routes(&("[listen]\n".to_owned() + &destination_toml("a", 9001, "same", "")));
        let mut core = Fanout::new(&r);
        let stale = core.plan(&r);
        core.apply(&r);
        core.commit(stale);
    }

    #[test]
    fn a_new_output_format_drops_what_the_shell_held_in_the_old_one() {
        let before = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("dash", 9001, "fh5", "")),
        );
        let after = routes(
            &("[listen]\nformat = \"fh6\"\n".to_owned()
                + &destination_toml("dash", 9001, "fm7", "")),
        );
        let mut core = Fanout::new(&before);
        core.handle_at(&fh6(1, true), SENDER, Instant::now(), &mut queue_everything);
        let changes = core.apply(&after);
        assert_eq!(changes.to_string(), "~ dash: fh5 -> fm7");
        let dash = stats(&core.counters(), "dash");
        assert_eq!((dash.dropped(DropReason::Backlog), dash.held), (1, 0));
    }
}
