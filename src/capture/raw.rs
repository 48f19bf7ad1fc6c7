//! Raw dumps: Forza datagrams of one length back to back, as many tools save
//! them, without times or addresses. Their length is told by the file's size
//! and content ([`raw_dump_length`]); the [`Reader`](super::Reader) gives
//! their datagrams a time a frame apart and no address.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use super::thousands;
use crate::wire::{field, Format};

/// Datagrams a second a raw dump is read at: it has no times, so datagram `i`
/// is given the time `i / 60` s after the Unix epoch, one game frame apart.
pub const RAW_DUMP_RATE: u32 = 60;
/// The sender and destination a raw dump's datagrams are given: it has neither.
pub const RAW_DUMP_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
/// The Forza lengths a raw dump may have, shortest first.
pub(super) const RAW_LENGTHS: [usize; 4] = [232, 311, 324, 331];
const _: () = assert!(
    RAW_LENGTHS[0] == Format::Sled.len()
        && RAW_LENGTHS[1] == Format::Fm7.len()
        && RAW_LENGTHS[2] == Format::Fh6.len()
        && RAW_LENGTHS[3] == Format::Fm2023.len()
);
/// Datagrams of a raw dump looked at to tell its length.
pub(super) const RAW_SAMPLE: usize = 256;

/// Why a file that is neither pcap nor pcapng is not a raw dump either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRawDump {
    /// Its size is no whole number of datagrams of a Forza length.
    Size(u64),
    /// As datagrams of `len` bytes, datagram `index` (from 1) has an IsRaceOn
    /// other than 0 or 1.
    RaceOn {
        /// The length tried.
        len: usize,
        /// Which datagram, from 1.
        index: usize,
        /// Its IsRaceOn.
        value: i32,
    },
    /// Datagrams of several lengths read alike.
    Ambiguous(Vec<usize>),
}

impl std::fmt::Display for NotRawDump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotRawDump::Size(size) => write!(
                f,
                "its {} bytes are not a whole number of datagrams of any of those lengths",
                thousands(*size)
            ),
            NotRawDump::RaceOn { len, index, value } => write!(
                f,
                "read as a raw dump, datagram {index} of {len} bytes has IsRaceOn = {value}, \
                 where a Forza packet has 0 or 1"
            ),
            NotRawDump::Ambiguous(lens) => {
                f.write_str("it reads as datagrams of")?;
                for (i, len) in lens.iter().enumerate() {
                    let sep = match i {
                        0 => " ",
                        i if i + 1 == lens.len() => " or ",
                        _ => ", ",
                    };
                    write!(f, "{sep}{len}")?;
                }
                f.write_str(" bytes alike, so its length can't be told")
            }
        }
    }
}

/// The length of the datagrams of a raw dump of `size` bytes that starts with
/// `sample` (its first bytes, [`RAW_SAMPLE`] datagrams or all of it): one that
/// divides the size and gives every datagram looked at an IsRaceOn of 0 or 1;
/// among several, the one whose TimestampMS most often rises by a frame or so.
pub(super) fn raw_dump_length(size: u64, sample: &[u8]) -> Result<usize, NotRawDump> {
    let race_on_at = field::IS_RACE_ON.offset;
    let timestamp_at = field::TIMESTAMP_MS.offset;
    let word = |b: &[u8], at: usize| [b[at], b[at + 1], b[at + 2], b[at + 3]];
    let mut fits = Vec::new();
    let mut first_bad = None;
    for len in RAW_LENGTHS {
        if size == 0 || !size.is_multiple_of(len as u64) {
            continue;
        }
        let datagrams: Vec<&[u8]> = sample.chunks_exact(len).take(RAW_SAMPLE).collect();
        let bad = datagrams.iter().enumerate().find_map(|(i, d)| {
            let value = i32::from_le_bytes(word(d, race_on_at));
            (value != 0 && value != 1).then_some(NotRawDump::RaceOn {
                len,
                index: i + 1,
                value,
            })
        });
        if let Some(bad) = bad {
            first_bad.get_or_insert(bad);
            continue;
        }
        // A frame apart is 16 or 33 ms; a second covers pauses in sending.
        let steps = datagrams
            .windows(2)
            .filter(|w| {
                let step = u32::from_le_bytes(word(w[1], timestamp_at))
                    .wrapping_sub(u32::from_le_bytes(word(w[0], timestamp_at)));
                (1..=1_000).contains(&step)
            })
            .count();
        fits.push((len, steps));
    }
    let Some(best) = fits.iter().map(|(_, steps)| *steps).max() else {
        return Err(first_bad.unwrap_or(NotRawDump::Size(size)));
    };
    let best: Vec<usize> = fits
        .iter()
        .filter(|(_, steps)| *steps == best)
        .map(|(len, _)| *len)
        .collect();
    match best[..] {
        [len] => Ok(len),
        _ => Err(NotRawDump::Ambiguous(best)),
    }
}

/// `n` datagrams of `len` bytes: IsRaceOn 1, TimestampMS rising by 16 ms.
#[cfg(test)]
pub(super) fn dump(len: usize, n: u32) -> Vec<u8> {
    let mut b = Vec::new();
    for i in 0..n {
        let mut d = vec![0u8; len];
        d[..4].copy_from_slice(&1i32.to_le_bytes());
        d[4..8].copy_from_slice(&(5_000 + 16 * i).to_le_bytes());
        b.extend(d);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_dump_s_length_is_told_by_its_size_and_contents() {
        for len in RAW_LENGTHS {
            let b = dump(len, 100);
            assert_eq!(raw_dump_length(b.len() as u64, &b), Ok(len));
        }
        // 18,792 bytes: 81 of 232 or 58 of 324. Read as 232-byte datagrams, the
        // 324-byte ones' IsRaceOn lands on other fields.
        let b = dump(324, 58);
        assert_eq!(raw_dump_length(b.len() as u64, &b), Ok(324));
        // Zeros read alike at any length: IsRaceOn 0, TimestampMS 0.
        let zeros = vec![0u8; 18_792];
        assert_eq!(
            raw_dump_length(18_792, &zeros),
            Err(NotRawDump::Ambiguous(vec![232, 324]))
        );
        assert_eq!(
            raw_dump_length(1_000, &zeros[..1_000]),
            Err(NotRawDump::Size(1_000))
        );
        assert_eq!(raw_dump_length(0, &[]), Err(NotRawDump::Size(0)));
        let mut b = dump(311, 3);
        b[311..315].copy_from_slice(&7i32.to_le_bytes());
        assert_eq!(
            raw_dump_length(b.len() as u64, &b),
            Err(NotRawDump::RaceOn {
                len: 311,
                index: 2,
                value: 7
            })
        );
        assert_eq!(
            NotRawDump::Ambiguous(vec![232, 311, 324]).to_string(),
            "it reads as datagrams of 232, 311 or 324 bytes alike, so its length can't be told"
        );
    }
}
