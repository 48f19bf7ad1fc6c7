//! An editor's request that may be given up (issue 30): whoever carries it
//! out commits to it at the last moment it can still not be done, and the
//! editor gives it up when it has answered without it (a timeout, a client
//! gone). One of the two wins, never both: an edit answered "not made" is
//! never made afterwards. A ticket may also say by when it must be committed
//! to: later, it is given up (its request would be answered first).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

const OPEN: u8 = 0;
const COMMITTED: u8 = 1;
const ABANDONED: u8 = 2;

/// One request's fate; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Ticket {
    state: Arc<AtomicU8>,
    /// Not committed to after this: given up instead.
    commit_by: Option<Instant>,
}

impl Ticket {
    /// Neither committed to nor given up yet.
    pub fn new() -> Ticket {
        Ticket::default()
    }

    /// A ticket that can be committed to only until `commit_by`.
    pub fn until(commit_by: Instant) -> Ticket {
        Ticket {
            state: Arc::default(),
            commit_by: Some(commit_by),
        }
    }

    /// By when it must be committed to, if it says.
    pub fn commit_by(&self) -> Option<Instant> {
        self.commit_by
    }

    /// Commits to carrying it out: `false` if it was given up, or its time
    /// to be committed to has passed (then it is given up).
    pub fn commit(&self) -> bool {
        if self.commit_by.is_some_and(|by| Instant::now() > by) {
            return self.settle(ABANDONED) == COMMITTED;
        }
        self.settle(COMMITTED) != ABANDONED
    }

    /// Gives it up: `false` if it was committed to already (it is being,
    /// or was, carried out).
    pub fn abandon(&self) -> bool {
        self.settle(ABANDONED) != COMMITTED
    }

    /// Whether it was given up.
    pub fn is_abandoned(&self) -> bool {
        self.state.load(Ordering::Acquire) == ABANDONED
    }

    /// Moves an open ticket to `to`; the state it ends in.
    fn settle(&self, to: u8) -> u8 {
        match self
            .state
            .compare_exchange(OPEN, to, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => to,
            Err(now) => now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_commit_and_abandon_wins_and_each_is_idempotent() {
        let t = Ticket::new();
        assert!(t.commit());
        assert!(t.commit(), "committed still");
        assert!(!t.abandon(), "too late to give it up");
        assert!(!t.is_abandoned());

        let t = Ticket::new();
        let held = t.clone();
        assert!(held.abandon());
        assert!(t.abandon(), "given up still");
        assert!(!t.commit(), "never carried out after");
        assert!(t.is_abandoned());
    }

    /// Review of issue 30: a request answered 408 at its deadline could
    /// still be committed to just before it, and made after the answer.
    #[test]
    fn a_ticket_past_its_time_is_given_up_not_committed_to() {
        let late = Ticket::until(Instant::now() - std::time::Duration::from_millis(1));
        assert!(!late.commit());
        assert!(late.is_abandoned());
        let in_time = Ticket::until(Instant::now() + std::time::Duration::from_secs(60));
        assert!(in_time.commit());
        assert!(!in_time.abandon());
    }
}
