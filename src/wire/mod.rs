//! The Forza "Data Out" packet formats, described once.
//!
//! Every format is built from the same blocks (see `docs/formats.md`):
//!
//! | block   | length | in                    |
//! |---------|--------|-----------------------|
//! | Sled    | 232    | every format, at 0    |
//! | Horizon | 12     | fh4, fh5, fh6, at 232 |
//! | Dash    | 79     | all but sled          |
//! | Extras  | 20     | fm2023, at 311        |
//! | Tail    | 1      | fh4, fh5, fh6, at 323 |
//!
//! Field offsets are relative to their block and written once, in [`field`]. A
//! [`Layout`] row says where each block of a format starts; the compile-time
//! asserts below check that the rows add up to the lengths, and [`field`] checks
//! that the fields tile every block with no gap or overlap.
//!
//! Invariants: nothing here allocates or panics on any input; a [`Packet`] is only
//! built over a buffer whose length equals its format's length.

mod detect;
pub mod field;
mod packet;

use std::fmt;
use std::str::FromStr;

pub use detect::{
    detect, detect_horizon, Acceptor, Detector, Expected, HorizonGuess, Input, Reading,
    AGREEING_PACKETS,
};
pub use field::{Field, Fields, Puddle, Scalar, Value, Wheels};
pub use packet::Packet;

/// Length of the Sled block, the start of every format.
pub const SLED_LEN: usize = 232;
/// Length of the Horizon block (CarGroup, SmashableVelDiff, SmashableMass).
pub const HORIZON_LEN: usize = 12;
/// Length of the Dash block (PositionX … NormalizedAIBrakeDifference).
pub const DASH_LEN: usize = 79;
/// Length of the FM2023 extras (TireWear ×4, TrackOrdinal).
pub const EXTRAS_LEN: usize = 20;
/// Length of the undocumented byte that ends the Horizon formats.
pub const TAIL_LEN: usize = 1;
/// The longest packet of any format (fm2023).
pub const MAX_LEN: usize = FM2023.len;
/// The shortest packet of any format (sled).
pub const MIN_LEN: usize = SLED.len;

/// One of the blocks a format is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Block {
    /// Bytes 0..232 of every format.
    Sled,
    /// CarGroup, SmashableVelDiff, SmashableMass (Horizon games only).
    Horizon,
    /// Position, speed, laps, inputs (all formats but sled).
    Dash,
    /// FM2023's TireWear and TrackOrdinal.
    Extras,
    /// The undocumented last byte of the Horizon formats.
    Tail,
}

impl Block {
    /// The block's length in bytes.
    pub const fn len(self) -> usize {
        match self {
            Block::Sled => SLED_LEN,
            Block::Horizon => HORIZON_LEN,
            Block::Dash => DASH_LEN,
            Block::Extras => EXTRAS_LEN,
            Block::Tail => TAIL_LEN,
        }
    }

    /// Blocks are never empty; present for clippy's `len_without_is_empty`.
    pub const fn is_empty(self) -> bool {
        false
    }
}

/// How a format types the four WheelInPuddle words (the one field that differs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PuddleKind {
    /// F32 depth 0..1 (sled, fm7, fm2023, fh4, fh5).
    Depth,
    /// S32 0/1 (fh6).
    Flag,
}

/// Where the blocks of one format start, and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Total length in bytes.
    pub len: usize,
    /// Start of the Horizon block, if the format has one.
    pub horizon: Option<usize>,
    /// Start of the Dash block, if the format has one.
    pub dash: Option<usize>,
    /// Start of the FM2023 extras, if the format has them.
    pub extras: Option<usize>,
    /// Offset of the undocumented tail byte, if the format has one.
    pub tail: Option<usize>,
    /// How WheelInPuddle is typed.
    pub puddle: PuddleKind,
    /// CarClass letters by value, where the game's scale is known.
    pub classes: Option<&'static [&'static str]>,
}

impl Layout {
    /// Where `block` starts in this format, or `None` if the format lacks it.
    pub const fn start(&self, block: Block) -> Option<usize> {
        match block {
            Block::Sled => Some(0),
            Block::Horizon => self.horizon,
            Block::Dash => self.dash,
            Block::Extras => self.extras,
            Block::Tail => self.tail,
        }
    }
}

// docs/formats.md "Car class".
const CLASSES_FH5: &[&str] = &["D", "C", "B", "A", "S1", "S2", "X"];
const CLASSES_FH6: &[&str] = &["D", "C", "B", "A", "S1", "S2", "R", "X"];
const CLASSES_FM7: &[&str] = &["D", "C", "B", "A", "S", "R", "P", "X"];

/// `sled`: the Sled block alone.
pub const SLED: Layout = Layout {
    len: SLED_LEN,
    horizon: None,
    dash: None,
    extras: None,
    tail: None,
    puddle: PuddleKind::Depth,
    classes: None,
};
/// `fm7`: Sled + Dash.
pub const FM7: Layout = Layout {
    len: SLED_LEN + DASH_LEN,
    dash: Some(SLED_LEN),
    classes: Some(CLASSES_FM7),
    ..SLED
};
/// `fm2023`: Sled + Dash + extras.
pub const FM2023: Layout = Layout {
    len: FM7.len + EXTRAS_LEN,
    extras: Some(FM7.len),
    classes: None,
    ..FM7
};
/// `fh4` and `fh5`: Sled + Horizon + Dash + tail byte.
pub const FH5: Layout = Layout {
    len: SLED_LEN + HORIZON_LEN + DASH_LEN + TAIL_LEN,
    horizon: Some(SLED_LEN),
    dash: Some(SLED_LEN + HORIZON_LEN),
    extras: None,
    tail: Some(SLED_LEN + HORIZON_LEN + DASH_LEN),
    puddle: PuddleKind::Depth,
    classes: Some(CLASSES_FH5),
};
/// `fh6`: as FH5, with WheelInPuddle typed S32.
pub const FH6: Layout = Layout {
    puddle: PuddleKind::Flag,
    classes: Some(CLASSES_FH6),
    ..FH5
};

const _: () = assert!(SLED.len == 232);
const _: () = assert!(FM7.len == 311);
const _: () = assert!(FM2023.len == 331);
const _: () = assert!(FH5.len == 324 && FH6.len == 324);
const _: () = assert!(FH5.horizon.unwrap() + HORIZON_LEN == FH5.dash.unwrap());
const _: () = assert!(FH5.dash.unwrap() + DASH_LEN == FH5.tail.unwrap());
const _: () = assert!(FH5.tail.unwrap() + TAIL_LEN == FH5.len);
const _: () = assert!(FM7.dash.unwrap() + DASH_LEN == FM7.len);
const _: () = assert!(FM2023.extras.unwrap() + EXTRAS_LEN == FM2023.len);

/// One of the six packet formats, by its user-facing id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// `sled`: Forza Motorsport 7 / 2023 "Sled", 232 bytes.
    Sled,
    /// `fm7`: Forza Motorsport 7 "Car Dash", 311 bytes.
    Fm7,
    /// `fm2023`: Forza Motorsport (2023) "Dash", 331 bytes.
    Fm2023,
    /// `fh4`: Forza Horizon 4, 324 bytes.
    Fh4,
    /// `fh5`: Forza Horizon 5, 324 bytes.
    Fh5,
    /// `fh6`: Forza Horizon 6, 324 bytes.
    Fh6,
}

impl Format {
    /// Every format, in the order of their ids in messages.
    pub const ALL: [Format; 6] = [
        Format::Sled,
        Format::Fm7,
        Format::Fm2023,
        Format::Fh4,
        Format::Fh5,
        Format::Fh6,
    ];

    /// The id users write in configs and on the command line.
    pub const fn id(self) -> &'static str {
        match self {
            Format::Sled => "sled",
            Format::Fm7 => "fm7",
            Format::Fm2023 => "fm2023",
            Format::Fh4 => "fh4",
            Format::Fh5 => "fh5",
            Format::Fh6 => "fh6",
        }
    }

    /// The game and mode that sends this format.
    pub const fn game(self) -> &'static str {
        match self {
            Format::Sled => "Forza Motorsport \"Sled\"",
            Format::Fm7 => "Forza Motorsport 7 \"Car Dash\"",
            Format::Fm2023 => "Forza Motorsport (2023) \"Dash\"",
            Format::Fh4 => "Forza Horizon 4",
            Format::Fh5 => "Forza Horizon 5",
            Format::Fh6 => "Forza Horizon 6",
        }
    }

    /// Where this format's blocks are.
    pub const fn layout(self) -> &'static Layout {
        match self {
            Format::Sled => &SLED,
            Format::Fm7 => &FM7,
            Format::Fm2023 => &FM2023,
            Format::Fh4 | Format::Fh5 => &FH5,
            Format::Fh6 => &FH6,
        }
    }

    /// The packet length in bytes.
    pub const fn len(self) -> usize {
        self.layout().len
    }

    /// Formats are never empty; present for clippy's `len_without_is_empty`.
    pub const fn is_empty(self) -> bool {
        false
    }

    /// True for the three Horizon formats (324 bytes, Horizon block).
    pub const fn is_horizon(self) -> bool {
        matches!(self, Format::Fh4 | Format::Fh5 | Format::Fh6)
    }

    /// A dense index 0..6, for tables indexed by format.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The letter of CarClass `value` on this format's scale (docs/formats.md "Car
    /// class"), where the scale is known.
    pub fn class_letter(self, value: i32) -> Option<&'static str> {
        let letters = self.layout().classes?;
        letters.get(usize::try_from(value).ok()?).copied()
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl serde::Serialize for Format {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

/// The valid format ids, comma separated, for messages: `sled, fm7, fm2023,
/// fh4, fh5, fh6`, from [`Format::ALL`].
pub const FORMAT_IDS: FormatIds = FormatIds;

/// Displays every format id, comma separated (see [`FORMAT_IDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatIds;

impl fmt::Display for FormatIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, format) in Format::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(format.id())?;
        }
        Ok(())
    }
}

/// A format id that is not one of [`FORMAT_IDS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown format {:?}{} (valid formats: {FORMAT_IDS})",
            self.0,
            crate::words::did_you_mean(&self.0, &Format::ALL.map(|f| f.id()))
        )
    }
}

impl std::error::Error for UnknownFormat {}

impl FromStr for Format {
    type Err = UnknownFormat;

    /// Parses an id, ignoring case and surrounding blanks.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Format::ALL
            .into_iter()
            .find(|f| f.id().eq_ignore_ascii_case(t))
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// Why a buffer could not be read or written as a format. `Copy`, no strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The input's length is not the format's length.
    Length {
        /// The format the input was taken to be.
        format: Format,
        /// The input's length.
        actual: usize,
    },
    /// The output buffer is shorter than the output format.
    OutputTooSmall {
        /// The output format.
        format: Format,
        /// The output buffer's length.
        actual: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Length { format, actual } => write!(
                f,
                "a {format} packet is {} bytes, got {actual}",
                format.len()
            ),
            Error::OutputTooSmall { format, actual } => write!(
                f,
                "a {format} packet needs a {}-byte buffer, got {actual}",
                format.len()
            ),
        }
    }
}

impl std::error::Error for Error {}

/// A field that the packet's format does not carry (Speed in `sled`, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Absent {
    /// The field's name as in docs/formats.md.
    pub field: &'static str,
    /// The format that lacks it.
    pub format: Format,
}

impl fmt::Display for Absent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} packets have no {}", self.format, self.field)
    }
}

impl std::error::Error for Absent {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_parse_ignores_case() {
        for f in Format::ALL {
            assert_eq!(f.id().parse::<Format>(), Ok(f));
            assert_eq!(f.id().to_uppercase().parse::<Format>(), Ok(f));
            assert_eq!(f.to_string(), f.id());
        }
        assert_eq!(" FH6 ".parse::<Format>(), Ok(Format::Fh6));
    }

    #[test]
    fn unknown_id_names_the_value_and_lists_the_valid_ones() {
        let e = "fh7".parse::<Format>().unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("\"fh7\""), "{msg}");
        for f in Format::ALL {
            assert!(msg.contains(f.id()), "{msg} lacks {f}");
        }
    }

    #[test]
    fn format_ids_list_every_format_in_order() {
        assert_eq!(FORMAT_IDS.to_string(), "sled, fm7, fm2023, fh4, fh5, fh6");
    }

    #[test]
    fn class_letters_follow_each_scale() {
        assert_eq!(Format::Fh6.class_letter(6), Some("R"));
        assert_eq!(Format::Fh5.class_letter(6), Some("X"));
        assert_eq!(Format::Fm7.class_letter(4), Some("S"));
        assert_eq!(Format::Fh6.class_letter(8), None);
        assert_eq!(Format::Fh6.class_letter(-1), None);
        assert_eq!(Format::Fm2023.class_letter(0), None, "no known scale");
    }

    #[test]
    fn lengths_are_those_of_formats_md() {
        let lens: Vec<(Format, usize)> = Format::ALL.iter().map(|f| (*f, f.len())).collect();
        assert_eq!(
            lens,
            [
                (Format::Sled, 232),
                (Format::Fm7, 311),
                (Format::Fm2023, 331),
                (Format::Fh4, 324),
                (Format::Fh5, 324),
                (Format::Fh6, 324)
            ]
        );
        assert_eq!(MAX_LEN, 331);
        assert_eq!(MIN_LEN, 232);
    }

    #[test]
    fn dash_starts_at_232_in_fm_and_244_in_fh() {
        assert_eq!(Format::Fm7.layout().dash, Some(232));
        assert_eq!(Format::Fm2023.layout().dash, Some(232));
        assert_eq!(Format::Fh5.layout().dash, Some(244));
        assert_eq!(Format::Fh6.layout().dash, Some(244));
        assert_eq!(Format::Sled.layout().dash, None);
        assert_eq!(Format::Fh4.layout().tail, Some(323));
        assert_eq!(Format::Fm2023.layout().extras, Some(311));
    }
}
