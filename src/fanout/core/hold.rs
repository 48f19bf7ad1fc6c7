//! `hold` (issue 34): while the game sends blank frames — a rewind, a
//! replay, a menu between two races — SimHub and the tools like it read a
//! car of 0 rpm at 0 km/h, reset their car, engine and dashboards, and
//! (with a wheel's force feedback) let go of the wheel. A destination with
//! `hold` gets the last racing frame instead, re-stamped with each blank
//! frame's TimestampMS (a tool that watches the stamp sees time go on),
//! for at most its `hold` after that racing frame came; after it, the
//! blank frames themselves.
//!
//! A blank frame is [`is_menu_frame`]'s: IsRaceOn 0 and every other byte
//! zero. A pause that still describes the car (IsRaceOn 0, its values
//! there) is no blank: it goes as it is.

use std::time::{Duration, Instant};

use crate::telemetry::is_menu_frame;
use crate::wire::{Format, Packet, Reading, MAX_LEN};

/// Marks the packet number of a held frame: translations and texts are
/// made once per (packet, held or not).
const HELD: u64 = 1 << 63;

/// The last racing frame, and the current packet's re-stamped copy of it.
pub(super) struct LastRacing {
    /// The last frame with IsRaceOn 1, as it came.
    frame: [u8; MAX_LEN],
    len: usize,
    format: Option<Format>,
    /// When it came.
    received: Option<Instant>,
    /// The frame a held destination gets for the current packet.
    restamped: [u8; MAX_LEN],
    /// The packet number `restamped` was made for.
    restamped_for: u64,
}

/// What the current packet is to a destination with `hold`.
pub(super) struct Blank {
    /// The blank frame's TimestampMS.
    timestamp_ms: u32,
    /// Its format.
    format: Format,
    /// When it came.
    received: Instant,
}

impl LastRacing {
    pub(super) fn new() -> Box<LastRacing> {
        Box::new(LastRacing {
            frame: [0; MAX_LEN],
            len: 0,
            format: None,
            received: None,
            restamped: [0; MAX_LEN],
            restamped_for: 0,
        })
    }

    /// Forgets the last racing frame (no destination holds any more).
    pub(super) fn clear(&mut self) {
        self.len = 0;
        self.format = None;
        self.received = None;
    }

    /// Takes the current packet, `data` read as `reading`: a racing frame is
    /// kept; a blank one is returned, for the destinations that hold.
    #[inline]
    pub(super) fn observe(
        &mut self,
        data: &[u8],
        reading: Option<Reading>,
        received: Instant,
    ) -> Option<Blank> {
        let format = reading?.format;
        let packet = Packet::new_unchecked(data, format);
        if packet.race_on() {
            if let Some(dst) = self.frame.get_mut(..data.len()) {
                dst.copy_from_slice(data);
                self.len = data.len();
                self.format = Some(format);
                self.received = Some(received);
            }
            return None;
        }
        is_menu_frame(&packet).then(|| Blank {
            timestamp_ms: packet.timestamp_ms(),
            format,
            received,
        })
    }

    /// What a destination holding for `hold` gets in place of `blank`
    /// (packet number `packet`): the last racing frame re-stamped, and the
    /// number its translations and text go by; `None` when there is none
    /// of its format or it is older than `hold`.
    #[inline]
    pub(super) fn held(
        &mut self,
        blank: &Blank,
        hold: Duration,
        packet: u64,
    ) -> Option<(&[u8], u64)> {
        let received = self.received?;
        if self.format != Some(blank.format)
            || blank.received.saturating_duration_since(received) > hold
        {
            return None;
        }
        let key = packet | HELD;
        if self.restamped_for != key {
            self.restamped_for = key;
            let len = self.len;
            self.restamped[..len].copy_from_slice(&self.frame[..len]);
            Packet::new_unchecked(&mut self.restamped[..len], blank.format)
                .set_timestamp_ms(blank.timestamp_ms);
        }
        Some((&self.restamped[..self.len], key))
    }
}
