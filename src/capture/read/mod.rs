//! Reading captures: pcap or pcapng (told by the magic number), any link type
//! of [`LinkType`], one UDP datagram at a time so a capture of any size streams
//! through; and raw dumps, Forza datagrams of one length back to back as many
//! tools save them, without times or addresses (told by their length and
//! content, `raw.rs`).
//!
//! The file is read record by record with a buffer of the reader's own: a record
//! of any size is read past (one over [`MAX_RECORD`] is skipped and counted), and
//! a field that makes no sense costs only its record or option, counted
//! ([`Skipped`], [`Damage`]), as tshark reads on. Only a file that ends inside a
//! record ([`CaptureError::Truncated`]) or a pcapng block whose length can't be
//! right ([`CaptureError::Corrupt`]) ends the reading early, after everything
//! before it.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::link::LinkType;
use super::raw::{raw_dump_length, RAW_DUMP_ADDR, RAW_DUMP_RATE, RAW_LENGTHS, RAW_SAMPLE};
use super::{CaptureError, Datagram};

mod found;
pub use found::{Damage, FileFormat, Skipped};

/// The first four bytes of a pcapng file (a Section Header Block).
const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];
/// pcap's magic numbers as they appear in a file: (bytes, big-endian, nanoseconds).
const PCAP_MAGICS: [([u8; 4], bool, bool); 4] = [
    ([0xA1, 0xB2, 0xC3, 0xD4], true, false),
    ([0xD4, 0xC3, 0xB2, 0xA1], false, false),
    ([0xA1, 0xB2, 0x3C, 0x4D], true, true),
    ([0x4D, 0x3C, 0xB2, 0xA1], false, true),
];
/// A pcap file header, and a pcap record header.
const PCAP_HEADER: usize = 24;
const PCAP_RECORD_HEADER: usize = 16;
/// pcapng's byte-order mark, as read in the section's own byte order.
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// pcapng block types read (pcapng spec, section 11.1); a Section Header Block
/// starts with [`PCAPNG_MAGIC`].
const INTERFACE_DESCRIPTION: u32 = 1;
const OBSOLETE_PACKET: u32 = 2;
const SIMPLE_PACKET: u32 = 3;
const ENHANCED_PACKET: u32 = 6;
/// Interface options read: if_tsresol and if_tsoffset; 0 ends the options.
const OPT_END: u16 = 0;
const IF_TSRESOL: u16 = 9;
const IF_TSOFFSET: u16 = 14;
/// pcapng's default timestamp resolution: microseconds (if_tsresol = 6).
const DEFAULT_TSRESOL: u8 = 6;
/// The longest record read: tcpdump's largest snap length, room for any IP packet
/// (at most 65,535 bytes) and its link header. Longer ones are skipped and counted.
pub const MAX_RECORD: usize = 262_144;

/// A pcapng interface: its link layer and its clock.
#[derive(Debug, Clone, Copy)]
struct Interface {
    /// The link type, or its number when it is not one read here.
    link: Result<LinkType, u32>,
    /// if_tsresol: 10^-n seconds per tick, or 2^-n when the top bit is set.
    tsresol: u8,
    /// if_tsoffset: seconds added to every timestamp.
    tsoffset: i64,
}

impl Interface {
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
        let since = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        let offset = Duration::from_secs(self.tsoffset.unsigned_abs());
        let time = if self.tsoffset >= 0 {
            UNIX_EPOCH.checked_add(since.saturating_add(offset))
        } else {
            UNIX_EPOCH.checked_add(since.saturating_sub(offset))
        };
        time.unwrap_or(UNIX_EPOCH)
    }
}

/// How the records of the file are laid out.
#[derive(Debug)]
enum Layout {
    Pcap {
        link: LinkType,
        nanos: bool,
        big_endian: bool,
    },
    PcapNg {
        /// The current section's byte order.
        big_endian: bool,
        /// The current section's interfaces, by number.
        interfaces: Vec<Interface>,
    },
    RawDump {
        len: usize,
    },
}

/// One packet record of the file, its bytes in the reader's buffer.
#[derive(Debug, Clone, Copy)]
struct LinkRecord {
    time: SystemTime,
    /// Its link layer; `None` for a raw dump's bare datagram.
    link: Option<LinkType>,
    len: usize,
}

/// Reads the UDP datagrams of a pcap or pcapng file, or the datagrams of a raw
/// dump, in file order: from a file ([`Reader::open`]) or any seekable input
/// ([`Reader::new`]).
///
/// [`Reader::next_datagram`] lends each datagram from the reader's buffer; as an
/// iterator it yields owned ones, `Result<Datagram, CaptureError>`. Frames
/// without a usable UDP datagram are skipped and counted ([`Reader::skipped`]),
/// damaged fields read past and counted ([`Reader::damage`]). An error ends it:
/// the file ends inside a record ([`CaptureError::Truncated`], with how many
/// frames were read fine), a pcapng block's length can't be right
/// ([`CaptureError::Corrupt`]), or the file can't be read.
pub struct Reader<R = File> {
    path: PathBuf,
    format: FileFormat,
    input: BufReader<R>,
    layout: Layout,
    buf: Vec<u8>,
    frames: u64,
    skipped: Skipped,
    damage: Damage,
    /// The link type of the first frame on an interface not read here.
    other_link: Option<u32>,
    last_time: SystemTime,
    done: bool,
}

impl<R> std::fmt::Debug for Reader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("frames", &self.frames)
            .field("skipped", &self.skipped)
            .field("damage", &self.damage)
            .finish_non_exhaustive()
    }
}

/// What [`Reader`]'s reading found instead of a record.
enum Stop {
    /// The file ended where a record could start: the normal end.
    End,
    /// Something to report: the reading ends with it.
    Error(CaptureError),
}

impl From<CaptureError> for Stop {
    fn from(e: CaptureError) -> Stop {
        Stop::Error(e)
    }
}

impl Reader {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path) -> Result<Reader, CaptureError> {
        let file = File::open(path).map_err(|source| CaptureError::Open {
            path: path.to_owned(),
            source,
        })?;
        Reader::new(file, path)
    }
}

impl<R: Read + Seek> Reader<R> {
    /// Reads the header of the capture `input`, called `path` in messages.
    pub fn new(input: R, path: &Path) -> Result<Reader<R>, CaptureError> {
        let mut reader = Reader {
            path: path.to_owned(),
            format: FileFormat::Pcap,
            input: BufReader::with_capacity(64 * 1024, input),
            layout: Layout::PcapNg {
                big_endian: false,
                interfaces: Vec::new(),
            },
            buf: Vec::new(),
            frames: 0,
            skipped: Skipped::default(),
            damage: Damage::default(),
            other_link: None,
            last_time: UNIX_EPOCH,
            done: false,
        };
        let mut magic = [0u8; 4];
        let got = reader.fill(&mut magic)?;
        if got == 4 && magic == PCAPNG_MAGIC {
            reader.format = FileFormat::PcapNg;
            match reader.section_header() {
                Ok(()) => {}
                Err(Stop::End) => return Err(reader.cut()),
                Err(Stop::Error(e)) => return Err(e),
            }
        } else if let Some(&(_, big_endian, nanos)) = PCAP_MAGICS
            .iter()
            .find(|(bytes, ..)| got == 4 && *bytes == magic)
        {
            let mut rest = [0u8; PCAP_HEADER - 4];
            reader.exactly(&mut rest)?;
            // The link type is in the low 16 bits; the high ones may flag an FCS.
            let code = u32_of(&rest[16..20], big_endian) & 0xFFFF;
            let link = LinkType::from_code(code).ok_or_else(|| CaptureError::UnsupportedLink {
                path: path.to_owned(),
                link: code,
            })?;
            reader.layout = Layout::Pcap {
                link,
                nanos,
                big_endian,
            };
        } else if got == 0 {
            return Err(CaptureError::Empty {
                path: path.to_owned(),
            });
        } else {
            reader.raw_dump(&magic[..got])?;
        }
        Ok(reader)
    }

    /// Takes the file, which starts with `start`, as a raw dump if it is one.
    fn raw_dump(&mut self, start: &[u8]) -> Result<(), CaptureError> {
        let path = self.path.clone();
        let open_error = |source| CaptureError::Open { path, source };
        let size = self
            .input
            .seek(io::SeekFrom::End(0))
            .map_err(open_error.clone())?;
        self.input.rewind().map_err(open_error.clone())?;
        let mut sample = vec![0u8; RAW_SAMPLE * RAW_LENGTHS[3]];
        let got = self.fill(&mut sample)?;
        sample.truncate(got);
        self.input.rewind().map_err(open_error)?;
        match raw_dump_length(size, &sample) {
            Ok(len) => {
                self.format = FileFormat::RawDump {
                    len,
                    datagrams: size / len as u64,
                };
                self.layout = Layout::RawDump { len };
                Ok(())
            }
            Err(why) => Err(CaptureError::NotACapture {
                path: self.path.clone(),
                start: start.to_vec(),
                why,
            }),
        }
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// pcap, pcapng, or a raw dump and its datagrams' length.
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

    /// What was wrong in the file so far, and read past.
    pub fn damage(&self) -> Damage {
        self.damage
    }

    /// The link type of the first frame skipped because its pcapng interface's
    /// link type is not read here.
    pub fn other_link(&self) -> Option<u32> {
        self.other_link
    }

    /// The next UDP datagram, lent from the reader's buffer; `None` at the end,
    /// and after an error.
    pub fn next_datagram(&mut self) -> Option<Result<Datagram<&[u8]>, CaptureError>> {
        if self.done {
            return None;
        }
        let (time, from, to, payload) = loop {
            let record = match self.next_record() {
                Ok(record) => record,
                Err(stop) => {
                    self.done = true;
                    return match stop {
                        Stop::End => None,
                        Stop::Error(e) => Some(Err(e)),
                    };
                }
            };
            self.frames += 1;
            self.last_time = record.time;
            let frame = &self.buf[..record.len];
            let Some(link) = record.link else {
                break (record.time, RAW_DUMP_ADDR, RAW_DUMP_ADDR, 0..record.len);
            };
            match link.udp(frame) {
                Ok(udp) => {
                    // The payload lies inside the frame: where, so that it can be
                    // lent once this loop's borrows end.
                    let start = udp.payload.as_ptr() as usize - frame.as_ptr() as usize;
                    break (
                        record.time,
                        udp.from,
                        udp.to,
                        start..start + udp.payload.len(),
                    );
                }
                Err(skip) => self.skipped.add(skip),
            }
        };
        Some(Ok(Datagram {
            time,
            from,
            to,
            payload: &self.buf[payload],
        }))
    }

    /// The next packet record, its bytes in `buf`, reading past every other block.
    fn next_record(&mut self) -> Result<LinkRecord, Stop> {
        loop {
            let record = match self.layout {
                Layout::Pcap {
                    link,
                    nanos,
                    big_endian,
                } => self.pcap_record(link, nanos, big_endian)?,
                Layout::PcapNg { .. } => self.pcapng_block()?,
                Layout::RawDump { len } => Some(self.raw_datagram(len)?),
            };
            if let Some(record) = record {
                return Ok(record);
            }
        }
    }

    /// The next datagram of a raw dump, timed [`RAW_DUMP_RATE`] a second.
    fn raw_datagram(&mut self, len: usize) -> Result<LinkRecord, Stop> {
        self.buf.resize(len, 0);
        let got = read_up_to(&mut self.input, &mut self.buf).map_err(|e| self.read_error(e))?;
        match got {
            0 => return Err(Stop::End),
            n if n < len => return Err(self.cut().into()),
            _ => {}
        }
        let nanos = u128::from(self.frames) * 1_000_000_000 / u128::from(RAW_DUMP_RATE);
        let since = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        Ok(LinkRecord {
            time: UNIX_EPOCH + since,
            link: None,
            len,
        })
    }

    /// The next pcap record; `None` when it was skipped (and counted).
    fn pcap_record(
        &mut self,
        link: LinkType,
        nanos: bool,
        big_endian: bool,
    ) -> Result<Option<LinkRecord>, Stop> {
        let mut header = [0u8; PCAP_RECORD_HEADER];
        match self.fill(&mut header)? {
            0 => return Err(Stop::End),
            PCAP_RECORD_HEADER => {}
            _ => return Err(self.cut().into()),
        }
        let seconds = u32_of(&header[0..4], big_endian);
        let fraction = u32_of(&header[4..8], big_endian);
        let len = u32_of(&header[8..12], big_endian) as usize;
        if len > MAX_RECORD {
            self.skip(len as u64)?;
            self.skipped.oversized += 1;
            return Ok(self.skipped_frame());
        }
        self.read_into_buf(len)?;
        let nanos = if nanos {
            u64::from(fraction)
        } else {
            u64::from(fraction) * 1_000
        };
        let time = if nanos < 1_000_000_000 {
            UNIX_EPOCH + Duration::from_secs(seconds.into()) + Duration::from_nanos(nanos)
        } else {
            self.damage.timestamps += 1;
            self.last_time
        };
        Ok(Some(LinkRecord {
            time,
            link: Some(link),
            len,
        }))
    }

    /// Reads a Section Header Block whose 4-byte type was just read: its byte
    /// order, then past its options. Its interfaces start from zero.
    fn section_header(&mut self) -> Result<(), Stop> {
        let mut head = [0u8; 8];
        self.exactly(&mut head)?;
        let big_endian = match u32::from_le_bytes([head[4], head[5], head[6], head[7]]) {
            BYTE_ORDER_MAGIC => false,
            m if m.swap_bytes() == BYTE_ORDER_MAGIC => true,
            _ => {
                return Err(self
                    .corrupt("a section header's byte-order mark is wrong")
                    .into())
            }
        };
        let total = u32_of(&head[..4], big_endian);
        // Type, length, byte-order mark, version (4), section length (8) and the
        // length again: 28 bytes around the options.
        let options = self.block_body(total, 28)?;
        self.layout = Layout::PcapNg {
            big_endian,
            interfaces: Vec::new(),
        };
        // Past the version, the section length and the options: none is used.
        self.skip(12 + options)?;
        self.block_end(total, big_endian)
    }

    /// The next pcapng block: a packet record, or `None` after any other block.
    fn pcapng_block(&mut self) -> Result<Option<LinkRecord>, Stop> {
        let mut kind = [0u8; 4];
        match self.fill(&mut kind)? {
            0 => return Err(Stop::End),
            4 => {}
            _ => return Err(self.cut().into()),
        }
        if kind == PCAPNG_MAGIC {
            self.section_header()?;
            return Ok(None);
        }
        let big_endian = match self.layout {
            Layout::PcapNg { big_endian, .. } => big_endian,
            Layout::Pcap { .. } | Layout::RawDump { .. } => false,
        };
        let mut len = [0u8; 4];
        self.exactly(&mut len)?;
        let total = u32_of(&len, big_endian);
        let mut body = self.block_body(total, 12)?;
        let record = match u32_of(&kind, big_endian) {
            INTERFACE_DESCRIPTION => {
                self.interface(&mut body, big_endian)?;
                None
            }
            ENHANCED_PACKET | OBSOLETE_PACKET if body < 20 => {
                self.damage.blocks += 1;
                None
            }
            ENHANCED_PACKET => self.packet_block(&mut body, big_endian, false)?,
            OBSOLETE_PACKET => self.packet_block(&mut body, big_endian, true)?,
            SIMPLE_PACKET if body < 4 => {
                self.damage.blocks += 1;
                None
            }
            SIMPLE_PACKET => self.simple_packet(&mut body, big_endian)?,
            // Name resolution, statistics, custom and any other block: not needed.
            _ => None,
        };
        self.skip(body)?;
        self.block_end(total, big_endian)?;
        Ok(record)
    }

    /// The body length of a block of `total` bytes whose first `header` bytes
    /// (with the trailing length) are not body; a length that can't be right ends
    /// the reading.
    fn block_body(&self, total: u32, header: u32) -> Result<u64, Stop> {
        if total < header || !total.is_multiple_of(4) {
            return Err(self
                .corrupt("a pcapng block's length is too short or not a multiple of 4")
                .into());
        }
        Ok(u64::from(total - header))
    }

    /// Reads a block's trailing length, which must repeat its leading one.
    fn block_end(&mut self, total: u32, big_endian: bool) -> Result<(), Stop> {
        let mut end = [0u8; 4];
        self.exactly(&mut end)?;
        if u32_of(&end, big_endian) != total {
            return Err(self
                .corrupt("a pcapng block's length at its end differs from its start")
                .into());
        }
        Ok(())
    }

    /// Reads an Interface Description Block's link type and clock from `body`
    /// bytes, counting down what it reads.
    fn interface(&mut self, body: &mut u64, big_endian: bool) -> Result<(), Stop> {
        let mut interface = Interface {
            link: Err(u32::MAX),
            tsresol: DEFAULT_TSRESOL,
            tsoffset: 0,
        };
        if *body < 8 {
            // Still numbered, so that later interfaces keep their numbers.
            self.damage.blocks += 1;
        } else {
            let mut fixed = [0u8; 8];
            self.exactly(&mut fixed)?;
            *body -= 8;
            let code = u32::from(u16_of(&fixed[..2], big_endian));
            interface.link = LinkType::from_code(code).ok_or(code);
            while *body >= 4 {
                let mut head = [0u8; 4];
                self.exactly(&mut head)?;
                *body -= 4;
                let code = u16_of(&head[..2], big_endian);
                let len = u64::from(u16_of(&head[2..], big_endian));
                let padded = len.next_multiple_of(4);
                if code == OPT_END {
                    break;
                }
                if padded > *body {
                    self.damage.options += 1;
                    break;
                }
                match (code, len) {
                    (IF_TSRESOL, 1) => {
                        let mut value = [0u8; 1];
                        self.exactly(&mut value)?;
                        interface.tsresol = value[0];
                        self.skip(padded - 1)?;
                    }
                    (IF_TSOFFSET, 8) => {
                        let mut value = [0u8; 8];
                        self.exactly(&mut value)?;
                        interface.tsoffset = if big_endian {
                            i64::from_be_bytes(value)
                        } else {
                            i64::from_le_bytes(value)
                        };
                    }
                    (IF_TSRESOL | IF_TSOFFSET, _) => {
                        self.damage.options += 1;
                        self.skip(padded)?;
                    }
                    _ => self.skip(padded)?,
                }
                *body -= padded;
            }
        }
        if let Layout::PcapNg { interfaces, .. } = &mut self.layout {
            interfaces.push(interface);
        }
        Ok(())
    }

    /// Reads an Enhanced (or obsolete) Packet Block's packet from `body` bytes
    /// (at least 20), counting down what it reads; `None` when it is skipped.
    fn packet_block(
        &mut self,
        body: &mut u64,
        big_endian: bool,
        obsolete: bool,
    ) -> Result<Option<LinkRecord>, Stop> {
        let mut fixed = [0u8; 20];
        self.exactly(&mut fixed)?;
        *body -= 20;
        let interface = if obsolete {
            u32::from(u16_of(&fixed[..2], big_endian))
        } else {
            u32_of(&fixed[..4], big_endian)
        };
        let ticks = u64::from(u32_of(&fixed[4..8], big_endian)) << 32
            | u64::from(u32_of(&fixed[8..12], big_endian));
        let len = u64::from(u32_of(&fixed[12..16], big_endian));
        if len > *body {
            self.skipped.bad_records += 1;
            return Ok(self.skipped_frame());
        }
        if len > MAX_RECORD as u64 {
            self.skipped.oversized += 1;
            return Ok(self.skipped_frame());
        }
        let Some(link) = self.link_of(interface) else {
            return Ok(self.skipped_frame());
        };
        self.read_into_buf(len as usize)?;
        *body -= len;
        let time = self.interface_time(interface, ticks);
        Ok(Some(LinkRecord {
            time,
            link: Some(link),
            len: len as usize,
        }))
    }

    /// Reads a Simple Packet Block's packet (interface 0, no timestamp: it takes
    /// the previous packet's) from `body` bytes (at least 4).
    fn simple_packet(
        &mut self,
        body: &mut u64,
        big_endian: bool,
    ) -> Result<Option<LinkRecord>, Stop> {
        let mut original = [0u8; 4];
        self.exactly(&mut original)?;
        *body -= 4;
        let len = u64::from(u32_of(&original, big_endian)).min(*body);
        if len > MAX_RECORD as u64 {
            self.skipped.oversized += 1;
            return Ok(self.skipped_frame());
        }
        let Some(link) = self.link_of(0) else {
            return Ok(self.skipped_frame());
        };
        self.read_into_buf(len as usize)?;
        *body -= len;
        Ok(Some(LinkRecord {
            time: self.last_time,
            link: Some(link),
            len: len as usize,
        }))
    }

    /// Counts a frame skipped (its reason counted by the caller): no record.
    fn skipped_frame(&mut self) -> Option<LinkRecord> {
        self.frames += 1;
        None
    }

    /// The link of pcapng interface `id`; `None` (the reason counted as skipped)
    /// when it was never described or is of a link type not read here.
    fn link_of(&mut self, id: u32) -> Option<LinkType> {
        let Layout::PcapNg { interfaces, .. } = &self.layout else {
            return None;
        };
        match interfaces.get(id as usize).map(|i| i.link) {
            Some(Ok(link)) => Some(link),
            Some(Err(code)) => {
                self.skipped.other_link += 1;
                self.other_link.get_or_insert(code);
                None
            }
            None => {
                self.skipped.bad_records += 1;
                None
            }
        }
    }

    fn interface_time(&self, id: u32, ticks: u64) -> SystemTime {
        match &self.layout {
            Layout::PcapNg { interfaces, .. } => interfaces
                .get(id as usize)
                .map_or(self.last_time, |i| i.time(ticks)),
            Layout::Pcap { .. } | Layout::RawDump { .. } => self.last_time,
        }
    }

    /// Reads `len` bytes into the buffer.
    fn read_into_buf(&mut self, len: usize) -> Result<(), Stop> {
        self.buf.resize(len, 0);
        let Reader { input, buf, .. } = self;
        match input.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.read_error(e).into()),
        }
    }

    /// Fills `buf` as far as the file goes; the number of bytes read.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, CaptureError> {
        read_up_to(&mut self.input, buf).map_err(|e| self.read_error(e))
    }

    /// Fills `buf`; the file ending first is a cut.
    fn exactly(&mut self, buf: &mut [u8]) -> Result<(), CaptureError> {
        match self.input.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.read_error(e)),
        }
    }

    /// Reads past `n` bytes; the file ending first is a cut.
    fn skip(&mut self, n: u64) -> Result<(), CaptureError> {
        match io::copy(&mut (&mut self.input).take(n), &mut io::sink()) {
            Ok(copied) if copied == n => Ok(()),
            Ok(_) => Err(self.cut()),
            Err(e) => Err(self.read_error(e)),
        }
    }

    fn read_error(&self, e: io::Error) -> CaptureError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            self.cut()
        } else {
            CaptureError::Read {
                path: self.path.clone(),
                packets: self.frames,
                source: e,
            }
        }
    }

    fn cut(&self) -> CaptureError {
        CaptureError::Truncated {
            path: self.path.clone(),
            packets: self.frames,
        }
    }

    fn corrupt(&self, what: &'static str) -> CaptureError {
        CaptureError::Corrupt {
            path: self.path.clone(),
            packets: self.frames,
            what,
        }
    }
}

impl<R: Read + Seek> Iterator for Reader<R> {
    type Item = Result<Datagram, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_datagram().map(|d| d.map(|d| d.owned()))
    }
}

/// Fills `buf` as far as `input` goes; the number of bytes read.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn u32_of(b: &[u8], big_endian: bool) -> u32 {
    let b = [b[0], b[1], b[2], b[3]];
    if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

fn u16_of(b: &[u8], big_endian: bool) -> u16 {
    let b = [b[0], b[1]];
    if big_endian {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests;
