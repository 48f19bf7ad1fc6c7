//! The car and the stream as every face shows them: the dashboard, the page,
//! the overlay, export and the demo read the same view.
//!
//! Every consumer reads a [`Source`]: a UDP socket ([`UdpSource`]), a capture
//! file ([`CaptureSource`]) or the relay's tap ([`TapSource`], for `run
//! --watch`). A [`Model`] is plain data: [`Model::on_datagram`] feeds it,
//! [`Model::tick`] ages it, [`Model::set_destinations`] adds the relay's
//! per-destination table; the faces render it. [`Reader`] tells the format
//! of each datagram by the relay's own rule.

pub mod model;
pub mod source;

pub use model::{DestinationRates, DestinationRow, Model};
pub use source::{CaptureSource, MemorySource, Next, Pace, Source, TapSource, UdpSource};

use crate::wire::{Acceptor, Expected, Format, Input};

/// Tells the format of each datagram of a stream by the relay's own rule
/// ([`Acceptor`]): the configured format (other lengths are not packets), or
/// detected by length and, for 324 bytes, by the puddle heuristic with memory.
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    acceptor: Acceptor,
}

impl Reader {
    /// A reader for `input`; `auto` assumes fh6 for Horizon packets until the
    /// stream shows otherwise.
    pub fn new(input: Input) -> Reader {
        Reader {
            acceptor: Acceptor::new(input),
        }
    }

    /// The format to read `payload` as, or `None` when it is no packet of the
    /// input format (or, for `auto`, of any format).
    pub fn format_of(&mut self, payload: &[u8]) -> Option<Format> {
        self.acceptor.read(payload).map(|r| r.format)
    }

    /// Whether `format`, as this reader last answered it, is certain: false only
    /// for a detected Horizon format that is still the default guess.
    pub fn is_certain(&self, format: Format) -> bool {
        !format.is_horizon() || self.acceptor.horizon().is_none_or(|r| r.certain)
    }

    /// The configured input.
    pub fn input(&self) -> Input {
        self.acceptor.input()
    }

    /// Why a datagram of `len` bytes was not read, for a warning.
    pub fn why_ignored(&self, len: usize) -> String {
        let hint = match self.input() {
            Input::Fixed(_) => " (--format auto reads every Forza format)",
            Input::Auto => "",
        };
        format!(
            "ignoring a {len}-byte datagram: it is not {}{hint}",
            Expected(self.input())
        )
    }
}
