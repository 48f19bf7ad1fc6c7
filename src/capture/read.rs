//! Reading captures: pcap or pcapng (told by the magic number), any link type of
//! [`Link`], one UDP datagram at a time so a capture of any size streams through.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{PcapError, TsResolution};

use super::ip::Skip;
use super::link::Link;
use super::{CaptureError, Datagram};

/// The first four bytes of a pcapng file (a Section Header Block).
const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];
/// pcap's magic numbers, microsecond and nanosecond, in both byte orders.
const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xA1, 0xB2, 0xC3, 0xD4],
    [0xD4, 0xC3, 0xB2, 0xA1],
    [0xA1, 0xB2, 0x3C, 0x4D],
    [0x4D, 0x3C, 0xB2, 0xA1],
];
/// pcapng's default timestamp resolution: microseconds (if_tsresol = 6).
const DEFAULT_TSRESOL: u8 = 6;

/// The file formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// libpcap's format (tcpdump's default).
    Pcap,
    /// pcapng (Wireshark's default).
    PcapNg,
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
}

impl Skipped {
    /// Every frame skipped.
    pub fn total(&self) -> u64 {
        self.not_udp + self.fragments + self.cut_short + self.malformed
    }

    fn add(&mut self, skip: Skip) {
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
        let parts = [
            (self.not_udp, "not UDP"),
            (self.fragments, "IP fragments"),
            (self.cut_short, "cut short"),
            (self.malformed, "malformed"),
        ];
        let mut first = true;
        for (n, what) in parts {
            if n > 0 {
                if !first {
                    f.write_str(", ")?;
                }
                write!(f, "{} {what}", super::thousands(n))?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// A pcapng interface: its link layer and its clock.
#[derive(Debug, Clone, Copy)]
struct Interface {
    /// The link type, or its number when it is not one read here.
    link: Result<Link, u32>,
    /// if_tsresol: 10^-n seconds per tick, or 2^-n when the top bit is set.
    tsresol: u8,
    /// if_tsoffset: seconds added to every timestamp.
    tsoffset: u64,
}

impl Interface {
    fn of(idb: &InterfaceDescriptionBlock<'_>) -> Interface {
        let mut interface = Interface {
            link: Link::from_code(idb.linktype.into()).ok_or(idb.linktype.into()),
            tsresol: DEFAULT_TSRESOL,
            tsoffset: 0,
        };
        for option in &idb.options {
            match option {
                InterfaceDescriptionOption::IfTsResol(r) => interface.tsresol = *r,
                InterfaceDescriptionOption::IfTsOffset(o) => interface.tsoffset = *o,
                _ => {}
            }
        }
        interface
    }

    /// The time of a packet stamped `ticks`.
    fn time(&self, ticks: u64) -> SystemTime {
        let ticks = u128::from(ticks);
        let nanos = if self.tsresol & 0x80 == 0 {
            let exp = u32::from(self.tsresol);
            if exp <= 9 {
                ticks * 10u128.pow(9 - exp)
            } else {
                ticks / 10u128.checked_pow(exp - 9).unwrap_or(u128::MAX)
            }
        } else {
            let exp = u32::from(self.tsresol & 0x7F);
            (ticks * 1_000_000_000).checked_shr(exp).unwrap_or(0)
        };
        let since = Duration::from_secs(self.tsoffset).saturating_add(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ));
        UNIX_EPOCH.checked_add(since).unwrap_or(UNIX_EPOCH)
    }
}

enum Source {
    Pcap {
        reader: PcapReader<File>,
        link: Link,
        resolution: TsResolution,
    },
    PcapNg {
        reader: PcapNgReader<File>,
        interfaces: Vec<Interface>,
    },
}

/// One captured frame, borrowing the reader's buffer.
struct Frame<'a> {
    time: SystemTime,
    link: Link,
    data: Cow<'a, [u8]>,
}

/// Reads the UDP datagrams of a pcap or pcapng file, in file order.
///
/// An iterator of `Result<Datagram, CaptureError>`: frames without a usable UDP
/// datagram are skipped and counted ([`Reader::skipped`]); an error ends it (the
/// file ends inside a record: [`CaptureError::Truncated`], with how many frames
/// were read fine).
pub struct Reader {
    path: PathBuf,
    format: FileFormat,
    source: Source,
    frames: u64,
    skipped: Skipped,
    last_time: SystemTime,
    done: bool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("frames", &self.frames)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path) -> Result<Reader, CaptureError> {
        let open_error = |source| CaptureError::Open {
            path: path.to_owned(),
            source,
        };
        let mut file = File::open(path).map_err(open_error)?;
        let mut magic = [0u8; 4];
        let got = read_up_to(&mut file, &mut magic).map_err(open_error)?;
        file.rewind().map_err(open_error)?;
        let format = if got == 4 && magic == PCAPNG_MAGIC {
            FileFormat::PcapNg
        } else if got == 4 && PCAP_MAGICS.contains(&magic) {
            FileFormat::Pcap
        } else if got == 0 {
            return Err(CaptureError::Empty {
                path: path.to_owned(),
            });
        } else {
            return Err(CaptureError::NotACapture {
                path: path.to_owned(),
                start: magic[..got].to_vec(),
            });
        };
        let source = match format {
            FileFormat::Pcap => {
                let reader = PcapReader::new(file).map_err(|e| error(path, 0, e))?;
                let header = reader.header();
                let code = header.datalink.into();
                let link = Link::from_code(code).ok_or_else(|| CaptureError::UnsupportedLink {
                    path: path.to_owned(),
                    link: code,
                })?;
                Source::Pcap {
                    reader,
                    link,
                    resolution: header.ts_resolution,
                }
            }
            FileFormat::PcapNg => Source::PcapNg {
                reader: PcapNgReader::new(file).map_err(|e| error(path, 0, e))?,
                interfaces: Vec::new(),
            },
        };
        Ok(Reader {
            path: path.to_owned(),
            format,
            source,
            frames: 0,
            skipped: Skipped::default(),
            last_time: UNIX_EPOCH,
            done: false,
        })
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// pcap or pcapng.
    pub fn format(&self) -> FileFormat {
        self.format
    }

    /// Frames read so far, UDP or not.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Frames read so far that held no usable UDP datagram.
    pub fn skipped(&self) -> Skipped {
        self.skipped
    }
}

impl Iterator for Reader {
    type Item = Result<Datagram, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let Reader {
            path,
            source,
            frames,
            skipped,
            last_time,
            done,
            ..
        } = self;
        loop {
            let frame = match next_frame(source, path, *frames, *last_time) {
                None => {
                    *done = true;
                    return None;
                }
                Some(Err(e)) => {
                    *done = true;
                    return Some(Err(e));
                }
                Some(Ok(None)) => continue,
                Some(Ok(Some(frame))) => frame,
            };
            *frames += 1;
            *last_time = frame.time;
            match frame.link.udp(&frame.data) {
                Ok(udp) => {
                    return Some(Ok(Datagram {
                        time: frame.time,
                        from: udp.from,
                        to: udp.to,
                        payload: udp.payload.to_vec(),
                    }))
                }
                Err(skip) => skipped.add(skip),
            }
        }
    }
}

/// The next record of the file: a frame, or `None` for a pcapng block that holds
/// no packet (taken in: a section starts, an interface is described).
fn next_frame<'a>(
    source: &'a mut Source,
    path: &Path,
    frames: u64,
    last_time: SystemTime,
) -> Option<Result<Option<Frame<'a>>, CaptureError>> {
    match source {
        Source::Pcap {
            reader,
            link,
            resolution,
        } => {
            let raw = match reader.next_raw_packet()? {
                Ok(raw) => raw,
                Err(e) => return Some(Err(error(path, frames, e))),
            };
            let nanos = match resolution {
                TsResolution::MicroSecond => u64::from(raw.ts_frac) * 1_000,
                TsResolution::NanoSecond => u64::from(raw.ts_frac),
            };
            if nanos >= 1_000_000_000 {
                return Some(Err(CaptureError::Corrupt {
                    path: path.to_owned(),
                    packets: frames,
                    what: "a timestamp's fraction is a second or more",
                }));
            }
            let since = Duration::from_secs(raw.ts_sec.into()) + Duration::from_nanos(nanos);
            let time = UNIX_EPOCH.checked_add(since).unwrap_or(UNIX_EPOCH);
            Some(Ok(Some(Frame {
                time,
                link: *link,
                data: raw.data,
            })))
        }
        Source::PcapNg { reader, interfaces } => {
            let block = match reader.next_block()? {
                Ok(block) => block,
                Err(e) => return Some(Err(error(path, frames, e))),
            };
            let (interface_id, ticks, data) = match block {
                Block::SectionHeader(_) => {
                    // A new section numbers its interfaces from zero again.
                    interfaces.clear();
                    return Some(Ok(None));
                }
                Block::InterfaceDescription(idb) => {
                    interfaces.push(Interface::of(&idb));
                    return Some(Ok(None));
                }
                Block::EnhancedPacket(epb) => {
                    // pcap-file stores the raw tick count as nanoseconds.
                    let ticks = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                    (epb.interface_id, Some(ticks), epb.data)
                }
                Block::Packet(pb) => (u32::from(pb.interface_id), Some(pb.timestamp), pb.data),
                // A Simple Packet Block has no timestamp: it takes the previous one.
                Block::SimplePacket(spb) => (0, None, spb.data),
                _ => return Some(Ok(None)),
            };
            let Some(interface) = interfaces.get(interface_id as usize) else {
                return Some(Err(CaptureError::Corrupt {
                    path: path.to_owned(),
                    packets: frames,
                    what: "a packet names an interface the file never described",
                }));
            };
            let link = match interface.link {
                Ok(link) => link,
                Err(code) => {
                    return Some(Err(CaptureError::UnsupportedLink {
                        path: path.to_owned(),
                        link: code,
                    }))
                }
            };
            let time = ticks.map_or(last_time, |t| interface.time(t));
            Some(Ok(Some(Frame { time, link, data })))
        }
    }
}

/// Fills `buf` as far as the file goes; the number of bytes read.
fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A pcap-file error, after `packets` good frames, as a [`CaptureError`].
fn error(path: &Path, packets: u64, e: PcapError) -> CaptureError {
    let path = path.to_owned();
    match e {
        PcapError::IncompleteBuffer => CaptureError::Truncated { path, packets },
        PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            CaptureError::Truncated { path, packets }
        }
        PcapError::IoError(source) => CaptureError::Read {
            path,
            packets,
            source,
        },
        PcapError::InvalidField(what) => CaptureError::Corrupt {
            path,
            packets,
            what,
        },
        PcapError::Utf8Error(_) | PcapError::FromUtf8Error(_) => CaptureError::Corrupt {
            path,
            packets,
            what: "a text option is not UTF-8",
        },
        PcapError::InvalidInterfaceId(_) => CaptureError::Corrupt {
            path,
            packets,
            what: "a block names an interface the file never described",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interface(tsresol: u8, tsoffset: u64) -> Interface {
        Interface {
            link: Ok(Link::Raw),
            tsresol,
            tsoffset,
        }
    }

    fn since_epoch(t: SystemTime) -> Duration {
        t.duration_since(UNIX_EPOCH).expect("after 1970")
    }

    #[test]
    fn pcapng_timestamps_follow_if_tsresol_and_if_tsoffset() {
        let ticks = 1_700_000_000_123_456;
        assert_eq!(
            since_epoch(interface(6, 0).time(ticks)),
            Duration::new(1_700_000_000, 123_456_000),
            "microseconds, the default"
        );
        assert_eq!(
            since_epoch(interface(9, 0).time(ticks)),
            Duration::new(1_700_000, 123_456),
            "nanoseconds"
        );
        assert_eq!(
            since_epoch(interface(12, 0).time(ticks)),
            Duration::new(1_700, 123),
            "picoseconds: below a nanosecond is dropped"
        );
        assert_eq!(
            since_epoch(interface(0x80 | 10, 0).time(3 * 1024 + 512)),
            Duration::new(3, 500_000_000),
            "binary: 2^-10 s per tick"
        );
        assert_eq!(
            since_epoch(interface(3, 100).time(2_500)),
            Duration::new(102, 500_000_000),
            "milliseconds plus an offset of 100 s"
        );
    }

    #[test]
    fn skipped_counts_print_only_what_happened() {
        let mut s = Skipped::default();
        assert_eq!(s.to_string(), "none");
        for skip in [Skip::NotUdp, Skip::NotUdp, Skip::Fragment] {
            s.add(skip);
        }
        assert_eq!(s.to_string(), "2 not UDP, 1 IP fragments");
        assert_eq!(s.total(), 3);
    }
}
