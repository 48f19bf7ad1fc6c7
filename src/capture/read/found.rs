//! What a reading found: the file's format, what it skipped and what it
//! found damaged, counted by reason and said in one line each.

use crate::capture::ip::Skip;
use crate::capture::thousands;
use crate::wire::Format;

/// The file formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// libpcap's format (tcpdump's default).
    Pcap,
    /// pcapng (Wireshark's default).
    PcapNg,
    /// Forza datagrams of one length back to back, without times or addresses.
    RawDump {
        /// The datagrams' length: 232, 311, 324 or 331 bytes.
        len: usize,
        /// How many.
        datagrams: u64,
    },
}

impl std::fmt::Display for FileFormat {
    /// `pcap`, `pcapng`, `a raw dump of 3,600 datagrams of 324 bytes (fh4/fh5/fh6)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileFormat::Pcap => f.write_str("pcap"),
            FileFormat::PcapNg => f.write_str("pcapng"),
            FileFormat::RawDump { len, datagrams } => {
                let games = match Format::ALL.iter().find(|g| g.len() == *len) {
                    Some(_) if *len == Format::Fh6.len() => "fh4/fh5/fh6".to_owned(),
                    Some(g) => g.id().to_owned(),
                    None => "?".to_owned(),
                };
                write!(
                    f,
                    "a raw dump of {} datagrams of {len} bytes ({games})",
                    thousands(*datagrams)
                )
            }
        }
    }
}

/// Frames read that held no UDP datagram to use, by reason.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    /// Not IP, or IP but not UDP (TCP, ICMP, ARP...).
    pub not_udp: u64,
    /// IP fragments: a fragmented datagram is not put back together.
    pub fragments: u64,
    /// Frames shorter than their headers say (captured with a short snap length).
    pub cut_short: u64,
    /// Frames whose headers make no sense.
    pub malformed: u64,
    /// Frames on a pcapng interface whose link type is not read here.
    pub other_link: u64,
    /// Records longer than [`MAX_RECORD`]: no UDP datagram is that long.
    pub oversized: u64,
    /// Records whose own fields make no sense (longer than their block, on an
    /// interface the file never described).
    pub bad_records: u64,
}

impl Skipped {
    /// Every frame skipped.
    pub fn total(&self) -> u64 {
        self.not_udp
            + self.fragments
            + self.cut_short
            + self.malformed
            + self.other_link
            + self.oversized
            + self.bad_records
    }

    pub(super) fn add(&mut self, skip: Skip) {
        let n = match skip {
            Skip::NotUdp => &mut self.not_udp,
            Skip::Fragment => &mut self.fragments,
            Skip::CutShort => &mut self.cut_short,
            Skip::Malformed => &mut self.malformed,
        };
        *n += 1;
    }
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        list(
            f,
            &[
                (self.not_udp, "not UDP"),
                (self.fragments, "IP fragments"),
                (self.cut_short, "cut short"),
                (self.malformed, "malformed"),
                (self.other_link, "on a link type not read"),
                (self.oversized, "records over 256 KiB"),
                (self.bad_records, "records whose fields make no sense"),
            ],
        )
    }
}

/// What was wrong in a capture but read past, besides the frames [`Skipped`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Damage {
    /// Packets whose timestamp has a fraction of a second or more: each is given
    /// the previous packet's time.
    pub timestamps: u64,
    /// pcapng options ignored because their length is wrong for their kind (an
    /// `if_tsresol` that is not one byte) or runs past their block.
    pub options: u64,
    /// pcapng blocks skipped because they are too short for their kind.
    pub blocks: u64,
}

impl Damage {
    /// Whether anything was wrong.
    pub fn any(&self) -> bool {
        *self != Damage::default()
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        list(
            f,
            &[
                (
                    self.timestamps,
                    "timestamps with a fraction of a second or more (each packet given the \
                     previous one's time)",
                ),
                (self.options, "options of the wrong length ignored"),
                (self.blocks, "blocks too short for their kind skipped"),
            ],
        )
    }
}

/// `2 not UDP, 1 IP fragments`: the non-zero counts, or "none".
fn list(f: &mut std::fmt::Formatter<'_>, parts: &[(u64, &str)]) -> std::fmt::Result {
    let mut first = true;
    for (n, what) in parts {
        if *n > 0 {
            if !first {
                f.write_str(", ")?;
            }
            write!(f, "{} {what}", thousands(*n))?;
            first = false;
        }
    }
    if first {
        f.write_str("none")?;
    }
    Ok(())
}
