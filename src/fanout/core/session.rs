//! The session in the core (issue 34): while some text destination wants
//! laps or events (`records = [...]`), every packet of the input is read
//! into a [`Session`], and the records it gives go to each destination that
//! wants them, as its text (a JSON object, an influx line), right after
//! that frame. A record is handed to the sink like a frame, so it is
//! counted as one (received, then sent or dropped) and takes the same way
//! out: a UDP datagram, or an MQTT payload (which the publisher puts on
//! `<topic>/laps` or `<topic>/events` by its first bytes,
//! [`records::kind_of`]). No filter or limit applies to a record: a lap
//! record is never rate-limited away.
//!
//! A stream that stops mid-race (the game closed) ends the race when no
//! frame has come for the session's race end time: [`SessionState::deadline`]
//! is one of the core's deadlines, and [`Fanout::due`] ends it.

use std::time::{Duration, Instant, SystemTime};

use crate::output::records::{self, Origin};
use crate::output::Encoding;
use crate::telemetry::session::{Record, Records as Produced, Session};
use crate::telemetry::{is_menu_frame, Telemetry};
use crate::wire::{Format, Packet};

/// Room a record's text takes: a lap's JSON object is ~600 bytes.
const TEXT_ROOM: usize = 2_048;

/// The session, and each encoding's text of the record being delivered.
pub(super) struct SessionState {
    session: Session,
    json: Vec<u8>,
    influx: Vec<u8>,
    /// Which of `json` and `influx` hold the current record's text.
    made: [bool; Encoding::ALL.len()],
    /// The last packet's format, when it came (both clocks): what a record
    /// made by [`Fanout::due`] is stamped with.
    last: Option<(Format, Instant, SystemTime)>,
}

impl SessionState {
    pub(super) fn new() -> Box<SessionState> {
        Box::new(SessionState {
            session: Session::new(),
            json: Vec::with_capacity(TEXT_ROOM),
            influx: Vec::with_capacity(TEXT_ROOM),
            made: [false; Encoding::ALL.len()],
            last: None,
        })
    }

    /// Takes the current packet, `data` read as `format`: the records it
    /// gives.
    #[inline]
    pub(super) fn observe(
        &mut self,
        data: &[u8],
        format: Format,
        received: Instant,
        wall: SystemTime,
    ) -> Produced {
        let packet = Packet::new_unchecked(data, format);
        self.last = Some((format, received, wall));
        let telemetry = Telemetry::decode(&packet);
        self.session.observe(&telemetry, is_menu_frame(&packet))
    }

    /// When a race on ends for want of frames, if one is on.
    pub(super) fn deadline(&self) -> Option<Instant> {
        if !self.session.is_racing() {
            return None;
        }
        let (_, received, _) = self.last?;
        Some(received + Duration::from_millis(u64::from(self.session.race_end_after_ms())))
    }

    /// Ends the race on if its deadline has come by `now`: the records, and
    /// the origin they are stamped with (the wall clock moved on from the
    /// last frame's by the time since).
    pub(super) fn end_if_due(&mut self, now: Instant) -> Option<(Produced, Origin, Instant)> {
        if self.deadline().is_none_or(|at| now < at) {
            return None;
        }
        let (format, received, wall) = self.last?;
        let origin = Origin {
            format,
            time: wall + now.saturating_duration_since(received),
        };
        Some((self.session.end(), origin, received))
    }

    /// Starts a new record: no text is made of it yet.
    pub(super) fn start(&mut self) {
        self.made = [false; Encoding::ALL.len()];
    }

    /// `record`'s text as `encoding`, made once per record.
    pub(super) fn text(&mut self, record: &Record, origin: Origin, encoding: Encoding) -> &[u8] {
        let i = encoding as usize;
        let made = std::mem::replace(&mut self.made[i], true);
        match encoding {
            Encoding::Json => {
                if !made {
                    records::write_json(record, origin, &mut self.json);
                }
                &self.json
            }
            Encoding::Influx => {
                if !made {
                    records::write_influx(record, origin, &mut self.influx);
                }
                &self.influx
            }
        }
    }
}
