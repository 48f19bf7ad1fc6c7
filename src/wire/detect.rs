//! Telling formats apart (docs/formats.md "Telling formats apart"), and the one
//! rule for which datagrams are packets of the input ([`Acceptor`]).
//!
//! Length decides everything but the 324-byte Horizon formats. Between fh4/fh5 and
//! fh6 only the WheelInPuddle words can hint: fh6 types them S32 0/1, fh4/fh5 as an
//! F32 depth. A configured format always wins over a guess.
//!
//! A datagram's bytes decide how that datagram is read (issue 23): a Horizon
//! packet whose puddle words tell its format is read as that format, whatever
//! the stream's answer. The stream's answer is for the packets that tell
//! nothing (a dry road): with `auto`, only [`AGREEING_PACKETS`] Horizon packets
//! in a row that say the same thing change it (issue 12), so one stray or
//! spoofed datagram cannot, and a caller that knows who sent a datagram lets
//! only the stream it follows teach it ([`Acceptor::read_from`]).

use std::fmt;

use super::{field, Format};
/// What the puddle words say about a 324-byte packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HorizonGuess {
    /// Every word is 0 or 1 and at least one is 1: S32 flags.
    Fh6,
    /// Every word is 0 or a normal float in (0, 1], at least one non-zero: F32 depths.
    Fh5,
    /// All zero (dry road), contradictory, or out of range: can't tell.
    Unknown,
}

const PUDDLE_AT: usize = field::WHEEL_IN_PUDDLE.offset;

/// Guesses fh5 or fh6 from the WheelInPuddle words of a Horizon packet.
pub fn detect_horizon(packet: &[u8]) -> HorizonGuess {
    let Some(words) = packet.get(PUDDLE_AT..PUDDLE_AT + field::WHEEL_IN_PUDDLE.size) else {
        return HorizonGuess::Unknown;
    };
    let (mut flags, mut depths, mut zeros) = (0, 0, 0);
    for w in words.chunks_exact(4) {
        let bits = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let depth = f32::from_bits(bits);
        if bits == 0 {
            zeros += 1;
        } else if bits == 1 {
            flags += 1;
        } else if depth.is_normal() && depth > 0.0 && depth <= 1.0 {
            // A real depth is never subnormal: small integers like 7 read as
            // subnormal floats and are neither flag nor depth.
            depths += 1;
        }
    }
    match (flags, depths) {
        (f, 0) if f > 0 && f + zeros == 4 => HorizonGuess::Fh6,
        (0, d) if d > 0 && d + zeros == 4 => HorizonGuess::Fh5,
        _ => HorizonGuess::Unknown,
    }
}

/// The format of `packet`, by length, and for 324 bytes by [`detect_horizon`].
///
/// `None` for a length no format has, **and for a 324-byte packet that can't be
/// told apart** (most packets: the puddle words are zero on a dry road). Streams
/// should use a [`Detector`], which remembers the last certain answer.
pub fn detect(packet: &[u8]) -> Option<Format> {
    match packet.len() {
        232 => Some(Format::Sled),
        311 => Some(Format::Fm7),
        331 => Some(Format::Fm2023),
        324 => match detect_horizon(packet) {
            HorizonGuess::Fh6 => Some(Format::Fh6),
            HorizonGuess::Fh5 => Some(Format::Fh5),
            HorizonGuess::Unknown => None,
        },
        _ => None,
    }
}

/// Horizon packets in a row that must agree before a [`Detector`] changes its
/// answer: half a second of 60 Hz telemetry.
pub const AGREEING_PACKETS: u32 = 30;

/// Detection for a stream: a 324-byte packet is read as the Horizon format its
/// own puddle words tell (see [`detect_horizon`]) and, when they tell nothing,
/// as the detector's answer for the stream: the default given at start until
/// the stream shows its format ([`Detector::is_certain`] says which).
///
/// The answer changes only when [`AGREEING_PACKETS`] packets it learns from
/// ([`Detector::learn`]) tell the same other format, with no packet telling
/// otherwise between them; a packet that tells nothing (a dry road) neither
/// counts nor breaks the run. Confirming the default is a change too (from a
/// guess to a certain answer), so it takes as many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detector {
    horizon: Format,
    certain: bool,
    /// The answer the latest telling packets give, and how many in a row did.
    candidate: Format,
    agreeing: u32,
}

impl Detector {
    /// A detector that assumes `default_horizon` until the stream says otherwise.
    pub const fn new(default_horizon: Format) -> Self {
        Detector {
            horizon: default_horizon,
            certain: false,
            candidate: default_horizon,
            agreeing: 0,
        }
    }

    /// False until the stream has shown its Horizon format: until then the
    /// answer for 324 bytes that tell nothing is the default, a guess that
    /// callers should not act on where fh4/fh5 and fh6 differ (CarClass).
    pub fn is_certain(&self) -> bool {
        self.certain
    }

    /// The Horizon format assumed for 324-byte packets that tell nothing.
    pub fn horizon(&self) -> Format {
        self.horizon
    }

    /// The format of `packet`, learning from it; `None` only for a length no
    /// format has.
    #[inline]
    pub fn detect(&mut self, packet: &[u8]) -> Option<Format> {
        self.learn(packet).map(|r| r.format)
    }

    /// How `packet` reads, without learning from it: by its length; a
    /// 324-byte packet as its puddle words tell, for certain, or, when they
    /// tell nothing, as the stream's answer. `None` for a length no format has.
    #[inline]
    pub fn read(&self, packet: &[u8]) -> Option<Reading> {
        match packet.len() {
            324 => Some(self.reading(self.told(packet))),
            _ => detect(packet).map(Reading::sure),
        }
    }

    /// As [`Detector::read`], and `packet` counts towards the stream's answer.
    #[inline]
    pub fn learn(&mut self, packet: &[u8]) -> Option<Reading> {
        match packet.len() {
            324 => {
                let told = self.told(packet);
                if let Some(told) = told {
                    self.tell(told);
                }
                Some(self.reading(told))
            }
            _ => detect(packet).map(Reading::sure),
        }
    }

    /// What the puddle words of a 324-byte `packet` say, by this detector's
    /// names: fh4 and fh5 share every byte's meaning, so a depth says "not
    /// fh6", and a detector told fh4 keeps fh4.
    #[inline]
    fn told(&self, packet: &[u8]) -> Option<Format> {
        match detect_horizon(packet) {
            HorizonGuess::Fh6 => Some(Format::Fh6),
            HorizonGuess::Fh5 if self.horizon == Format::Fh4 => Some(Format::Fh4),
            HorizonGuess::Fh5 => Some(Format::Fh5),
            HorizonGuess::Unknown => None,
        }
    }

    /// A 324-byte packet that told `told`: its own format, or the stream's.
    #[inline]
    fn reading(&self, told: Option<Format>) -> Reading {
        match told {
            Some(format) => Reading::sure(format),
            None => Reading {
                format: self.horizon,
                certain: self.certain,
            },
        }
    }

    /// One packet said it is `told`.
    fn tell(&mut self, told: Format) {
        if self.certain && told == self.horizon {
            // The answer stands; a run towards another one is broken.
            self.agreeing = 0;
            return;
        }
        if told == self.candidate {
            self.agreeing += 1;
        } else {
            self.candidate = told;
            self.agreeing = 1;
        }
        if self.agreeing >= AGREEING_PACKETS {
            self.horizon = told;
            self.certain = true;
            self.agreeing = 0;
        }
    }
}

impl Default for Detector {
    /// Assumes fh6, the Horizon game that sends this stream today.
    fn default() -> Self {
        Detector::new(Format::Fh6)
    }
}

/// What the listening socket is told to expect (`listen.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Tell the format by length, and fh5/fh6 by the puddle heuristic.
    Auto,
    /// Every datagram is this format; other lengths are malformed.
    Fixed(Format),
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::Auto => f.write_str("auto"),
            Input::Fixed(format) => format.fmt(f),
        }
    }
}

/// How a datagram reads: as a packet of `format`, for certain or on a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The format it is read as.
    pub format: Format,
    /// False only for `auto`'s Horizon answer for a packet that tells nothing,
    /// while the stream has not confirmed it (see [`Detector::is_certain`]).
    pub certain: bool,
}

impl Reading {
    /// `format`, for certain.
    pub const fn sure(format: Format) -> Reading {
        Reading {
            format,
            certain: true,
        }
    }
}

impl fmt::Display for Reading {
    /// `fh6`, or `fh6?` for a guess.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.format, if self.certain { "" } else { "?" })
    }
}

/// The one rule for which datagrams of a stream are packets of the input, used
/// by the relay's core and by every tool that reads a stream (`watch`,
/// `export`): a configured format takes datagrams of its length; `auto` takes
/// every Forza length, telling the Horizon formats apart with a [`Detector`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acceptor {
    input: Input,
    detector: Detector,
}

impl Acceptor {
    /// The rule for `input`; `auto` assumes fh6 for Horizon packets that tell
    /// nothing until the stream shows otherwise.
    pub fn new(input: Input) -> Acceptor {
        Acceptor {
            input,
            detector: Detector::default(),
        }
    }

    /// The input it expects.
    pub fn input(&self) -> Input {
        self.input
    }

    /// How `datagram`, one of a stream with one sender, reads, or `None` when
    /// it is no packet of the input; with `auto` it counts towards the
    /// stream's answer.
    #[inline]
    pub fn read(&mut self, datagram: &[u8]) -> Option<Reading> {
        self.read_from(datagram, true)
    }

    /// How `datagram` reads, or `None` when it is no packet of the input. With
    /// `auto` it counts towards the stream's answer only when it `follows`:
    /// it comes from the sender whose stream the caller follows (the game's).
    /// Another sender's datagrams are read by their own bytes alone.
    #[inline]
    pub fn read_from(&mut self, datagram: &[u8], follows: bool) -> Option<Reading> {
        match self.input {
            Input::Fixed(format) => {
                (datagram.len() == format.len()).then_some(Reading::sure(format))
            }
            Input::Auto if follows => self.detector.learn(datagram),
            Input::Auto => self.detector.read(datagram),
        }
    }

    /// `datagram` counts towards the stream's answer (its sender became the
    /// one followed after it was read); nothing for a fixed input.
    pub fn learn(&mut self, datagram: &[u8]) {
        if self.input == Input::Auto {
            self.detector.learn(datagram);
        }
    }

    /// How a 324-byte packet that tells nothing reads now, with `auto`;
    /// `None` for a fixed input.
    pub fn horizon(&self) -> Option<Reading> {
        match self.input {
            Input::Fixed(_) => None,
            Input::Auto => Some(Reading {
                format: self.detector.horizon(),
                certain: self.detector.is_certain(),
            }),
        }
    }
}

/// What an input takes, for a message about a datagram it did not:
/// `in the fh6 format (324 bytes)`, or `in any Forza format (lengths: sled 232,
/// fm7 311, fm2023 331, fh4/fh5/fh6 324)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected(pub Input);

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Input::Fixed(format) => write!(f, "in the {format} format ({} bytes)", format.len()),
            Input::Auto => {
                f.write_str("in any Forza format (lengths: ")?;
                // Each length once, with every format of that length.
                let mut sep = "";
                for (i, format) in Format::ALL.iter().enumerate() {
                    let len = format.len();
                    if Format::ALL[..i].iter().any(|x| x.len() == len) {
                        continue;
                    }
                    f.write_str(sep)?;
                    sep = ", ";
                    let mut slash = "";
                    for same in Format::ALL.iter().filter(|x| x.len() == len) {
                        write!(f, "{slash}{same}")?;
                        slash = "/";
                    }
                    write!(f, " {len}")?;
                }
                f.write_str(")")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn horizon_with_puddles(words: [u32; 4]) -> [u8; 324] {
        let mut b = [0u8; 324];
        for (i, w) in words.iter().enumerate() {
            b[132 + 4 * i..136 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    #[test]
    fn length_decides_all_but_horizon() {
        assert_eq!(detect(&[0; 232]), Some(Format::Sled));
        assert_eq!(detect(&[0; 311]), Some(Format::Fm7));
        assert_eq!(detect(&[0; 331]), Some(Format::Fm2023));
        for len in [0, 1, 231, 233, 310, 312, 323, 325, 330, 332, 1500] {
            assert_eq!(detect(&vec![0; len]), None, "len {len}");
        }
    }

    #[test]
    fn puddle_words_tell_fh5_from_fh6() {
        assert_eq!(
            detect(&horizon_with_puddles([0, 1, 0, 0])),
            Some(Format::Fh6)
        );
        assert_eq!(
            detect(&horizon_with_puddles([1, 1, 1, 1])),
            Some(Format::Fh6)
        );
        let half = 0.5f32.to_bits();
        let one = 1.0f32.to_bits();
        assert_eq!(
            detect(&horizon_with_puddles([half, 0, one, 0])),
            Some(Format::Fh5)
        );
        // Dry road: can't tell.
        assert_eq!(detect(&horizon_with_puddles([0, 0, 0, 0])), None);
        // A flag beside a depth, or a depth out of range: can't tell.
        assert_eq!(detect(&horizon_with_puddles([1, half, 0, 0])), None);
        assert_eq!(
            detect(&horizon_with_puddles([2.0f32.to_bits(), 0, 0, 0])),
            None
        );
        assert_eq!(detect(&horizon_with_puddles([7, 0, 0, 0])), None);
    }

    /// Feeds `n` copies of `packet` to `d`, returning the last answer.
    fn feed(d: &mut Detector, packet: &[u8], n: u32) -> Option<Format> {
        (0..n).map(|_| d.detect(packet)).last().flatten()
    }

    const HALF: u32 = 0x3F00_0000; // 0.5f32

    #[test]
    fn detector_changes_its_answer_only_after_a_run_of_agreeing_packets() {
        let mut d = Detector::default();
        let dry = horizon_with_puddles([0; 4]);
        let wet_fh5 = horizon_with_puddles([HALF, 0, 0, 0]);
        assert_eq!(d.detect(&dry), Some(Format::Fh6));
        assert!(!d.is_certain(), "a dry packet is a guess");
        // Issue 23: each wet packet is read as its own bytes say at once...
        assert_eq!(
            feed(&mut d, &wet_fh5, AGREEING_PACKETS - 1),
            Some(Format::Fh5),
            "a packet whose puddles are depths reads as fh5"
        );
        // ... but the stream's answer, for dry ones, is one short of the run.
        assert_eq!(d.horizon(), Format::Fh6, "one short of the run");
        assert!(!d.is_certain());
        // A dry packet tells nothing: the run goes on.
        assert_eq!(d.detect(&dry), Some(Format::Fh6));
        assert_eq!(d.detect(&wet_fh5), Some(Format::Fh5));
        assert_eq!(d.horizon(), Format::Fh5, "the run is complete");
        assert!(d.is_certain());
        assert_eq!(d.detect(&dry), Some(Format::Fh5));
        assert!(d.is_certain(), "the answer stands");
        assert_eq!(d.detect(&[0; 311]), Some(Format::Fm7));
        assert_eq!(d.detect(&[0; 5]), None);
        assert_eq!(d.horizon(), Format::Fh5);
    }

    #[test]
    fn issue12_one_spoofed_datagram_does_not_flip_a_certain_fh6_stream() {
        let mut d = Detector::default();
        let dry = horizon_with_puddles([0; 4]);
        let wet_fh6 = horizon_with_puddles([1, 0, 0, 0]);
        let spoofed = horizon_with_puddles([HALF, 0, 0, 0]);
        assert_eq!(feed(&mut d, &wet_fh6, AGREEING_PACKETS), Some(Format::Fh6));
        assert!(d.is_certain(), "30 flags confirm fh6");
        // Issue 23: the datagram reads as its own bytes say; the stream's
        // answer stays.
        assert_eq!(d.detect(&spoofed), Some(Format::Fh5));
        assert_eq!(d.horizon(), Format::Fh6);
        assert_eq!(
            feed(&mut d, &dry, 100),
            Some(Format::Fh6),
            "and nothing after it changes how dry packets read"
        );
        // A run broken by one packet that says otherwise starts again (dry
        // packets tell nothing: they neither count nor break a run).
        d.detect(&wet_fh6);
        feed(&mut d, &spoofed, AGREEING_PACKETS - 1);
        d.detect(&wet_fh6);
        feed(&mut d, &spoofed, AGREEING_PACKETS - 1);
        assert_eq!(d.detect(&dry), Some(Format::Fh6), "no run completed");
        d.detect(&spoofed);
        assert_eq!(d.detect(&dry), Some(Format::Fh5), "a whole run does");
    }

    #[test]
    fn reading_without_learning_never_moves_the_answer() {
        let d = Detector::default();
        let wet_fh5 = horizon_with_puddles([HALF, 0, 0, 0]);
        let wet_fh6 = horizon_with_puddles([0, 1, 1, 0]);
        for _ in 0..AGREEING_PACKETS * 3 {
            assert_eq!(d.read(&wet_fh5), Some(Reading::sure(Format::Fh5)));
        }
        assert_eq!((d.horizon(), d.is_certain()), (Format::Fh6, false));
        let guess = Reading {
            format: Format::Fh6,
            certain: false,
        };
        assert_eq!(d.read(&horizon_with_puddles([0; 4])), Some(guess));
        assert_eq!(d.read(&wet_fh6), Some(Reading::sure(Format::Fh6)));
        assert_eq!(d.read(&[0; 232]), Some(Reading::sure(Format::Sled)));
        assert_eq!(d.read(&[0; 323]), None);
        let mut auto = Acceptor::new(Input::Auto);
        for _ in 0..AGREEING_PACKETS {
            assert_eq!(
                auto.read_from(&wet_fh5, false),
                Some(Reading::sure(Format::Fh5))
            );
        }
        assert_eq!(auto.horizon(), Some(guess), "another sender taught nothing");
        for _ in 0..AGREEING_PACKETS - 1 {
            auto.read_from(&wet_fh5, true);
        }
        assert_eq!(auto.horizon(), Some(guess));
        auto.learn(&wet_fh5);
        assert_eq!(auto.horizon(), Some(Reading::sure(Format::Fh5)));
    }

    #[test]
    fn a_detector_told_fh4_keeps_fh4_for_depth_typed_packets() {
        let mut d = Detector::new(Format::Fh4);
        let wet = horizon_with_puddles([0.3f32.to_bits(), 0, 0, 0]);
        assert_eq!(feed(&mut d, &wet, AGREEING_PACKETS), Some(Format::Fh4));
        assert!(d.is_certain());
        assert_eq!(
            feed(
                &mut d,
                &horizon_with_puddles([1, 0, 0, 0]),
                AGREEING_PACKETS
            ),
            Some(Format::Fh6)
        );
        assert_eq!(feed(&mut d, &wet, AGREEING_PACKETS), Some(Format::Fh5));
    }

    #[test]
    fn acceptor_takes_the_configured_length_or_any_forza_length() {
        let mut fixed = Acceptor::new(Input::Fixed(Format::Fm7));
        let fm7 = Reading {
            format: Format::Fm7,
            certain: true,
        };
        assert_eq!(fixed.read(&[0; 311]), Some(fm7));
        assert_eq!(fixed.read(&[0; 324]), None);
        assert_eq!(fixed.horizon(), None);
        let mut auto = Acceptor::new(Input::Auto);
        assert_eq!(auto.read(&[0; 311]), Some(fm7));
        let guess = Reading {
            format: Format::Fh6,
            certain: false,
        };
        assert_eq!(auto.read(&[0; 324]), Some(guess));
        assert_eq!(auto.horizon(), Some(guess));
        assert_eq!(guess.to_string(), "fh6?");
        assert_eq!(auto.read(&[0; 12]), None);
    }

    #[test]
    fn expected_lists_the_lengths() {
        assert_eq!(
            Expected(Input::Fixed(Format::Fh6)).to_string(),
            "in the fh6 format (324 bytes)"
        );
        assert_eq!(
            Expected(Input::Auto).to_string(),
            "in any Forza format (lengths: sled 232, fm7 311, fm2023 331, fh4/fh5/fh6 324)"
        );
    }
}
