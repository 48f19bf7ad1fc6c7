//! The editors' side of the owner: an [`Editor`] sends an edit with its
//! ticket and waits for what the relay did, no longer than the ticket allows
//! (see the module documentation of [`super`]).

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Instant;

use super::{Edit, EditError, Event, Failed, Ticket, COMMITTED_WAIT, EDIT_WAIT};
use crate::relay::Applied;

/// What an edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// What the relay changed.
    pub applied: Applied,
    /// The file the edit was saved in; `None` without one (the change lasts
    /// until the relay stops).
    pub saved: Option<PathBuf>,
    /// One line for the editor and the log: `added destination "dash"
    /// (127.0.0.1:5301): + dash (fh5); saved in forza-relay.toml`.
    pub message: String,
}

/// What an editor's answer comes back on.
pub(super) type Answer = mpsc::Sender<Result<Edited, EditError>>;

/// Sends edits to an [`Owner`] from any thread; cheap to clone.
#[derive(Clone)]
pub struct Editor(pub(super) mpsc::Sender<Event>);

impl Editor {
    /// Makes `edit` and waits (at most [`EDIT_WAIT`]) for what the relay did.
    pub fn edit(&self, edit: Edit) -> Result<Edited, EditError> {
        self.edit_with(edit, &Ticket::new())
    }

    /// Makes `edit` unless `ticket` is given up before the owner commits to
    /// it (the page's request was answered meanwhile: issue 30), and waits
    /// for what the relay did. An edit not yet committed to after
    /// [`EDIT_WAIT`] is given up here and never made; one being made is
    /// waited for a little longer.
    pub fn edit_with(&self, edit: Edit, ticket: &Ticket) -> Result<Edited, EditError> {
        let (tx, rx) = mpsc::channel();
        if self
            .0
            .send(Event::Edit(Box::new(edit), ticket.clone(), tx))
            .is_err()
        {
            return Err(EditError::new(Failed::Unavailable, "the relay is stopping"));
        }
        let stopping = || EditError::new(Failed::Unavailable, "the relay is stopping");
        // No longer than the ticket may be committed to.
        let wait = ticket.commit_by().map_or(EDIT_WAIT, |by| {
            EDIT_WAIT.min(by.saturating_duration_since(Instant::now()))
        });
        match rx.recv_timeout(wait) {
            Ok(answer) => return answer,
            Err(RecvTimeoutError::Disconnected) => return Err(stopping()),
            Err(RecvTimeoutError::Timeout) => {}
        }
        if ticket.abandon() {
            return Err(EditError::new(
                Failed::Unavailable,
                "nothing changed: the configuration's owner did not get to it in time (a slow \
                 disk, a hostname look-up or a busy relay); try again"
                    .to_owned(),
            ));
        }
        // Committed to: the relay is taking it.
        match rx.recv_timeout(COMMITTED_WAIT) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Timeout) => Err(EditError::new(
                Failed::Unavailable,
                "the change was being made when time ran out (a busy relay): reload the page \
                 to see whether it applied",
            )),
            Err(RecvTimeoutError::Disconnected) => Err(stopping()),
        }
    }
}
