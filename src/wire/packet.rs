//! A zero-copy, length-checked view of one packet.

use super::{Error, Format};

/// A view of a packet of a known format over any byte buffer.
///
/// Built with [`Packet::new_checked`], the buffer's length equals the format's, so
/// every getter reads in bounds. Field getters and `set_*` setters are generated
/// from the field table in [`super::field`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    format: Format,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking its length: getters panic on a short buffer.
    pub const fn new_unchecked(buffer: T, format: Format) -> Self {
        Packet { buffer, format }
    }

    /// Wraps `buffer`, which must be exactly `format.len()` bytes long.
    pub fn new_checked(buffer: T, format: Format) -> Result<Self, Error> {
        let packet = Self::new_unchecked(buffer, format);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Error::Length)` unless the buffer is exactly the format's length.
    pub fn check_len(&self) -> Result<(), Error> {
        let actual = self.buffer.as_ref().len();
        if actual == self.format.len() {
            Ok(())
        } else {
            Err(Error::Length {
                format: self.format,
                actual,
            })
        }
    }

    /// The format the bytes are read as.
    #[inline]
    pub fn format(&self) -> Format {
        self.format
    }

    /// The packet's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The undocumented last byte of the Horizon formats (offset 323), if any.
    pub fn tail_byte(&self) -> Option<u8> {
        let at = self.format.layout().tail?;
        Some(self.as_bytes()[at])
    }

    /// True while driving (IsRaceOn ≠ 0).
    #[inline]
    pub fn race_on(&self) -> bool {
        self.is_race_on() != 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The packet's bytes, writable.
    #[inline]
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the tail byte; `false` when the format has none.
    pub fn set_tail_byte(&mut self, value: u8) -> bool {
        match self.format.layout().tail {
            Some(at) => {
                self.as_bytes_mut()[at] = value;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Absent, Fields, Puddle, Wheels};

    #[test]
    fn new_checked_rejects_every_wrong_length() {
        for format in Format::ALL {
            for len in [0, 1, format.len() - 1, format.len() + 1, 65507] {
                let buf = vec![0u8; len];
                assert_eq!(
                    Packet::new_checked(&buf[..], format).unwrap_err(),
                    Error::Length {
                        format,
                        actual: len
                    }
                );
            }
            assert!(Packet::new_checked(vec![0u8; format.len()], format).is_ok());
        }
    }

    #[test]
    fn getters_read_what_setters_wrote_at_formats_md_offsets() {
        let mut buf = [0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        p.set_timestamp_ms(0xDEAD_BEEF);
        p.set_speed(41.5).unwrap();
        p.set_gear(3).unwrap();
        p.set_steer(-100).unwrap();
        p.set_car_group(7).unwrap();
        p.set_wheel_in_puddle(Wheels::from_array([
            Puddle::Flag(1),
            Puddle::Flag(0),
            Puddle::Flag(0),
            Puddle::Flag(1),
        ]));
        assert!(p.race_on());
        assert_eq!(p.timestamp_ms(), 0xDEAD_BEEF);
        assert_eq!(p.speed(), Some(41.5));
        assert_eq!(p.gear(), Some(3));
        assert_eq!(p.steer(), Some(-100));
        assert_eq!(p.car_group(), Some(7));
        assert_eq!(p.wheel_in_puddle().fl, Puddle::Flag(1));
        assert_eq!(p.wheel_in_puddle().fr, Puddle::Flag(0));
        // docs/formats.md: Speed at 256, Gear at 319, Steer at 320, CarGroup at 232 in FH.
        assert_eq!(&buf[256..260], &41.5f32.to_le_bytes());
        assert_eq!(buf[319], 3);
        assert_eq!(buf[320] as i8, -100);
        assert_eq!(&buf[232..236], &7u32.to_le_bytes());
        assert_eq!(&buf[4..8], &0xDEAD_BEEFu32.to_le_bytes());
        assert_eq!(&buf[132..136], &1i32.to_le_bytes());
    }

    #[test]
    fn fields_a_format_lacks_are_absent_not_zero() {
        let buf = [0u8; 232];
        let p = Packet::new_checked(&buf[..], Format::Sled).unwrap();
        assert_eq!(p.speed(), None);
        assert_eq!(p.car_group(), None);
        assert_eq!(p.tire_wear(), None);
        assert_eq!(p.tail_byte(), None);
        let buf = [0u8; 311];
        let mut p = Packet::new_checked(buf, Format::Fm7).unwrap();
        assert_eq!(p.car_group(), None);
        assert_eq!(p.speed(), Some(0.0));
        assert_eq!(
            p.set_car_group(3),
            Err(Absent {
                field: "CarGroup",
                format: Format::Fm7
            })
        );
        let f = Fields::read(&p);
        assert_eq!(f.smashable_mass, None);
        assert_eq!(f.track_ordinal, None);
        assert_eq!(f.speed, Some(0.0));
    }

    #[test]
    fn puddle_is_typed_per_format() {
        let mut buf = [0u8; 324];
        buf[132..136].copy_from_slice(&0.5f32.to_le_bytes());
        let fh5 = Packet::new_checked(&buf[..], Format::Fh5).unwrap();
        assert_eq!(fh5.wheel_in_puddle().fl, Puddle::Depth(0.5));
        buf[132..136].copy_from_slice(&1i32.to_le_bytes());
        let fh6 = Packet::new_checked(&buf[..], Format::Fh6).unwrap();
        assert_eq!(fh6.wheel_in_puddle().fl, Puddle::Flag(1));
    }
}
