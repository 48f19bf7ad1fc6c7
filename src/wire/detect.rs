//! Telling formats apart (FORMATS.md "Telling formats apart").
//!
//! Length decides everything but the 324-byte Horizon formats. Between fh4/fh5 and
//! fh6 only the WheelInPuddle words can hint: fh6 types them S32 0/1, fh4/fh5 as an
//! F32 depth. A configured format always wins over a guess.

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

/// Detection for a stream: a 324-byte packet that can't be told apart is taken to
/// be the Horizon format last seen for certain, or the default given at start
/// ([`Detector::is_certain`] says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detector {
    horizon: Format,
    certain: bool,
}

impl Detector {
    /// A detector that assumes `default_horizon` until the stream says otherwise.
    pub const fn new(default_horizon: Format) -> Self {
        Detector {
            horizon: default_horizon,
            certain: false,
        }
    }

    /// False until a 324-byte packet has shown its Horizon format: until then the
    /// answer for 324 bytes is the default, a guess that callers should not act on
    /// where fh4/fh5 and fh6 differ (CarClass).
    pub fn is_certain(&self) -> bool {
        self.certain
    }

    /// The Horizon format currently assumed for ambiguous packets.
    pub fn horizon(&self) -> Format {
        self.horizon
    }

    /// The format of `packet`; `None` only for a length no format has.
    #[inline]
    pub fn detect(&mut self, packet: &[u8]) -> Option<Format> {
        match packet.len() {
            324 => {
                let guess = detect_horizon(packet);
                self.certain |= guess != HorizonGuess::Unknown;
                match guess {
                    HorizonGuess::Fh6 => self.horizon = Format::Fh6,
                    // fh4 and fh5 share every byte's meaning: a depth says "not
                    // fh6", and a detector told fh4 stays fh4.
                    HorizonGuess::Fh5 if self.horizon == Format::Fh4 => {}
                    HorizonGuess::Fh5 => self.horizon = Format::Fh5,
                    HorizonGuess::Unknown => {}
                }
                Some(self.horizon)
            }
            _ => detect(packet),
        }
    }
}

impl Default for Detector {
    /// Assumes fh6, the Horizon game that sends this stream today.
    fn default() -> Self {
        Detector::new(Format::Fh6)
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

    #[test]
    fn detector_remembers_the_last_certain_horizon_format() {
        let mut d = Detector::default();
        let dry = horizon_with_puddles([0; 4]);
        assert_eq!(d.detect(&dry), Some(Format::Fh6));
        assert!(!d.is_certain(), "a dry packet is a guess");
        assert_eq!(
            d.detect(&horizon_with_puddles([0.3f32.to_bits(), 0, 0, 0])),
            Some(Format::Fh5)
        );
        assert!(d.is_certain());
        assert_eq!(d.detect(&dry), Some(Format::Fh5));
        assert!(d.is_certain(), "the last certain answer stands");
        assert_eq!(d.detect(&[0; 311]), Some(Format::Fm7));
        assert_eq!(d.detect(&[0; 5]), None);
        assert_eq!(d.horizon(), Format::Fh5);
    }

    #[test]
    fn a_detector_told_fh4_keeps_fh4_for_depth_typed_packets() {
        let mut d = Detector::new(Format::Fh4);
        let wet = horizon_with_puddles([0.3f32.to_bits(), 0, 0, 0]);
        assert_eq!(d.detect(&wet), Some(Format::Fh4));
        assert_eq!(
            d.detect(&horizon_with_puddles([1, 0, 0, 0])),
            Some(Format::Fh6)
        );
        assert_eq!(d.detect(&wet), Some(Format::Fh5));
    }
}
