//! The UDP streams in a capture, and picking the one to replay.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::io::{Read, Seek};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::wire::{detect, Format};

use super::lap::{LapChoice, LapFinder, LapFrame, LapSpan};
use super::read::{Damage, FileFormat, Reader, Skipped};
use super::replay::{LONG_GAP, LONG_GAP_PLAYED};
use super::{thousands, CaptureError, Datagram};

/// Senders listed per stream; more are counted.
const MAX_SOURCES: usize = 8;
/// Payload lengths named in a stream's description; more are counted.
const SHOWN_LENGTHS: usize = 3;
/// Payload lengths counted per stream; datagrams of others are counted together.
const MAX_LENGTHS: usize = 64;
/// Destinations counted stream by stream; those seen after are only counted.
pub const MAX_STREAMS: usize = 1_000;
/// Streams an error message lists, most packets first; the rest are counted.
pub const SHOWN_STREAMS: usize = 20;
/// Fingerprints kept to count distinct senders and the destinations beyond
/// [`MAX_STREAMS`] (8 bytes each); past this many, those counts are lower bounds.
const MAX_FINGERPRINTS: usize = 1 << 20;

/// The datagrams of a capture sent to one address and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    /// The destination address and port.
    pub to: SocketAddr,
    /// The first few senders, in order of appearance.
    pub sources: Vec<SocketAddr>,
    /// Senders beyond [`Stream::sources`].
    pub more_sources: u64,
    /// Whether [`Stream::more_sources`] is exact, or a lower bound (the capture
    /// has over a million senders).
    pub more_sources_exact: bool,
    /// Datagrams.
    pub packets: u64,
    /// Datagrams by payload length, for the first [`MAX_LENGTHS`] lengths seen.
    pub lengths: BTreeMap<usize, u64>,
    /// Datagrams of other lengths.
    pub other_lengths: u64,
    /// The earliest timestamp.
    pub first: SystemTime,
    /// The latest timestamp.
    pub last: SystemTime,
    /// The Horizon format told apart for certain in a 324-byte packet, if any
    /// (the last one seen).
    pub horizon: Option<Format>,
}

impl Stream {
    fn new(d: &Datagram<&[u8]>) -> Stream {
        Stream {
            to: d.to,
            sources: Vec::new(),
            more_sources: 0,
            more_sources_exact: true,
            packets: 0,
            lengths: BTreeMap::new(),
            other_lengths: 0,
            first: d.time,
            last: d.time,
            horizon: None,
        }
    }

    /// Counts `d`; `new_sender` when its sender has not sent to this stream
    /// before (`None`: can't tell, the fingerprints are full).
    fn add(&mut self, d: &Datagram<&[u8]>, new_sender: Option<bool>) {
        self.packets += 1;
        let len = d.payload.len();
        let counted = self.lengths.len();
        match self.lengths.get_mut(&len) {
            Some(n) => *n += 1,
            None if counted < MAX_LENGTHS => {
                self.lengths.insert(len, 1);
            }
            None => self.other_lengths += 1,
        }
        self.first = self.first.min(d.time);
        self.last = self.last.max(d.time);
        match new_sender {
            Some(true) if self.sources.len() < MAX_SOURCES => self.sources.push(d.from),
            Some(true) => self.more_sources += 1,
            Some(false) => {}
            None => self.more_sources_exact = false,
        }
        if let Some(f) = detect(d.payload).filter(|f| f.is_horizon()) {
            self.horizon = Some(f);
        }
    }

    /// What a payload of `len` bytes is, when a Forza format has that length.
    fn label(&self, len: usize) -> Option<String> {
        if len == Format::Fh6.len() {
            return Some(match self.horizon {
                Some(f) => f.id().to_owned(),
                None => "fh4/fh5/fh6".to_owned(),
            });
        }
        Format::ALL
            .iter()
            .find(|f| f.len() == len)
            .map(|f| f.id().to_owned())
    }
}

impl fmt::Display for Stream {
    /// `127.0.0.1:5400 ← 127.0.0.1:51234: 3,600 packets of 324 bytes (fh6)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ←", self.to)?;
        for (i, s) in self.sources.iter().enumerate() {
            write!(f, "{}{s}", if i == 0 { " " } else { ", " })?;
        }
        if self.more_sources > 0 || !self.more_sources_exact {
            let at_least = if self.more_sources_exact {
                ""
            } else {
                "at least "
            };
            write!(f, " and {at_least}{} more", thousands(self.more_sources))?;
        }
        let noun = if self.packets == 1 {
            "packet"
        } else {
            "packets"
        };
        write!(f, ": {} {noun}", thousands(self.packets))?;
        let mut by_count: Vec<(usize, u64)> = self.lengths.iter().map(|(l, n)| (*l, *n)).collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let length = |f: &mut fmt::Formatter<'_>, len: usize| -> fmt::Result {
            write!(f, "{} bytes", thousands(len as u64))?;
            match self.label(len) {
                Some(label) => write!(f, " ({label})"),
                None => Ok(()),
            }
        };
        if let ([(len, _)], 0) = (&by_count[..], self.other_lengths) {
            f.write_str(" of ")?;
            return length(f, *len);
        }
        f.write_str(":")?;
        for (i, (len, n)) in by_count.iter().take(SHOWN_LENGTHS).enumerate() {
            write!(f, "{} {} of ", if i == 0 { "" } else { "," }, thousands(*n))?;
            length(f, *len)?;
        }
        if by_count.len() > SHOWN_LENGTHS {
            let others = by_count.len() - SHOWN_LENGTHS;
            write!(f, " and {} other lengths", thousands(others as u64))?;
        }
        if self.other_lengths > 0 {
            write!(
                f,
                " and {} of lengths not counted one by one",
                thousands(self.other_lengths)
            )?;
        }
        Ok(())
    }
}

/// The datagrams of a capture to one destination port (or of one lap of
/// them): what a replay of that port plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Port {
    packets: u64,
    first: SystemTime,
    last: SystemTime,
    /// The first one's time, in file order: where a replay starts.
    start: SystemTime,
    /// The latest time so far, in file order.
    high: SystemTime,
    /// Time cut from gaps over [`LONG_GAP`], each played as [`LONG_GAP_PLAYED`].
    cut: Duration,
    /// Those gaps.
    long_gaps: u64,
}

impl Port {
    /// None yet; the first will be at `time`.
    pub(super) fn new(time: SystemTime) -> Port {
        Port {
            packets: 0,
            first: time,
            last: time,
            start: time,
            high: time,
            cut: Duration::ZERO,
            long_gaps: 0,
        }
    }

    /// Counts a datagram of `time`, as a replay will pace it
    /// ([`Schedule::due`](super::replay::Schedule::due)).
    pub(super) fn add(&mut self, time: SystemTime) {
        self.packets += 1;
        self.first = self.first.min(time);
        self.last = self.last.max(time);
        if let Ok(gap) = time.duration_since(self.high) {
            if gap > LONG_GAP {
                self.cut += gap - LONG_GAP_PLAYED;
                self.long_gaps += 1;
            }
            self.high = time;
        }
    }

    /// How long a replay takes, from the first datagram to the last.
    fn played(&self) -> Duration {
        self.high
            .duration_since(self.start)
            .unwrap_or_default()
            .saturating_sub(self.cut)
    }

    /// The selection of these datagrams, to `port`, within `lap` if given.
    pub(super) fn selection(&self, port: u16, lap: Option<LapSpan>) -> Selection {
        Selection {
            port,
            packets: self.packets,
            first: self.first,
            last: self.last,
            played: self.played(),
            long_gaps: self.long_gaps,
            lap,
        }
    }
}

/// Streams being counted, datagram by datagram, in bounded memory: at most
/// [`MAX_STREAMS`] streams in detail, 65,536 ports, [`MAX_FINGERPRINTS`]
/// fingerprints.
#[derive(Debug, Default)]
struct Tally {
    streams: Vec<Stream>,
    /// Where each destination's stream is in `streams`.
    index: HashMap<SocketAddr, usize>,
    /// Fingerprints of (destination, sender) pairs of the streams counted in
    /// detail, and of the destinations beyond them.
    seen: HashSet<u64>,
    /// Destinations beyond `streams`.
    others: u64,
    /// Some fingerprint could not be kept: `others` and some `more_sources` are
    /// lower bounds.
    seen_full: bool,
    ports: HashMap<u16, Port>,
}

impl Tally {
    fn add(&mut self, d: &Datagram<&[u8]>) {
        self.ports
            .entry(d.to.port())
            .or_insert_with(|| Port::new(d.time))
            .add(d.time);
        let i = match self.index.get(&d.to) {
            Some(&i) => i,
            None if self.streams.len() < MAX_STREAMS => {
                self.streams.push(Stream::new(d));
                self.index.insert(d.to, self.streams.len() - 1);
                self.streams.len() - 1
            }
            None => {
                if self.remember(fingerprint(b'd', d.to, None)) == Some(true) {
                    self.others += 1;
                }
                return;
            }
        };
        let new_sender = self.remember(fingerprint(b'p', d.to, Some(d.from)));
        self.streams[i].add(d, new_sender);
    }

    /// Whether `print` is new; `None` when it can't be told (the set is full).
    fn remember(&mut self, print: u64) -> Option<bool> {
        if self.seen.contains(&print) {
            Some(false)
        } else if self.seen.len() < MAX_FINGERPRINTS {
            self.seen.insert(print);
            Some(true)
        } else {
            self.seen_full = true;
            None
        }
    }
}

/// 64 bits standing for a destination (`kind` b'd') or a (destination, sender)
/// pair (`kind` b'p'): two of a million collide with odds of about 1 in 30
/// million.
fn fingerprint(kind: u8, to: SocketAddr, from: Option<SocketAddr>) -> u64 {
    let mut h = DefaultHasher::new();
    (kind, to, from).hash(&mut h);
    h.finish()
}

/// Streams as an error lists them: the first [`SHOWN_STREAMS`] by packets, and
/// how many more there are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The streams listed, most packets first.
    pub streams: Vec<Stream>,
    /// Streams not listed.
    pub more: u64,
    /// Whether `more` is exact, or a lower bound.
    pub exact: bool,
}

impl fmt::Display for Listing {
    /// One line per stream, each with the `--port` that picks it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.streams {
            write!(f, "\n  --port {:<5}  {s}", s.to.port())?;
        }
        if self.more > 0 || !self.exact {
            let at_least = if self.exact { "" } else { "at least " };
            let noun = if self.more == 1 { "stream" } else { "streams" };
            write!(f, "\n  and {at_least}{} more {noun}", thousands(self.more))?;
        }
        Ok(())
    }
}

/// Every UDP stream in a capture, found by reading it once.
#[derive(Debug)]
pub struct Streams {
    /// The file read.
    pub path: PathBuf,
    /// pcap, pcapng, or a raw dump (whose datagrams have no addresses: every one
    /// is to [`RAW_DUMP_ADDR`](super::RAW_DUMP_ADDR), port 0).
    pub format: FileFormat,
    /// The streams counted in detail (the first [`MAX_STREAMS`] destinations
    /// seen), most packets first.
    pub streams: Vec<Stream>,
    /// Destinations seen after those, only counted.
    pub more_streams: u64,
    /// Whether every count is exact, or some (more than a million senders or
    /// destinations) are lower bounds.
    pub exact: bool,
    /// Frames read, UDP or not.
    pub frames: u64,
    /// Frames that held no usable UDP datagram.
    pub skipped: Skipped,
    /// What was wrong in the file but read past.
    pub damage: Damage,
    /// Set when the reading ended early: the file ends inside a record (a
    /// capture cut off by a crash or a full disk), or a pcapng block's length
    /// can't be right. Everything before was read. Other errors fail the scan.
    pub truncated: Option<CaptureError>,
    /// Every destination port, counted whole.
    ports: HashMap<u16, Port>,
}

impl Streams {
    /// Reads the capture at `path` to its end.
    pub fn scan(path: &Path) -> Result<Streams, CaptureError> {
        Streams::read(Reader::open(path)?)
    }

    /// Reads a capture held in memory (called "capture" in messages).
    pub fn read_bytes(bytes: &[u8]) -> Result<Streams, CaptureError> {
        Streams::read(Reader::new(
            std::io::Cursor::new(bytes),
            Path::new("capture"),
        )?)
    }

    /// Reads `reader`'s capture to its end.
    pub fn read<R: Read + Seek>(mut reader: Reader<R>) -> Result<Streams, CaptureError> {
        let path = reader.path().to_owned();
        let path = path.as_path();
        let mut tally = Tally::default();
        let mut truncated = None;
        while let Some(d) = reader.next_datagram() {
            match d {
                Ok(d) => tally.add(&d),
                Err(e @ (CaptureError::Truncated { .. } | CaptureError::Corrupt { .. })) => {
                    truncated = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        if tally.streams.is_empty() {
            if let Some(link) = reader.other_link() {
                return Err(CaptureError::UnsupportedLink {
                    path: path.to_owned(),
                    link,
                });
            }
        }
        let mut streams = Streams::of(path, tally, reader.frames(), reader.skipped());
        streams.format = reader.format();
        streams.damage = reader.damage();
        streams.truncated = truncated;
        Ok(streams)
    }

    fn of(path: &Path, tally: Tally, frames: u64, skipped: Skipped) -> Streams {
        let mut streams = tally.streams;
        // Stable: equal counts stay in order of appearance.
        streams.sort_by_key(|s| std::cmp::Reverse(s.packets));
        Streams {
            path: path.to_owned(),
            format: FileFormat::Pcap,
            streams,
            more_streams: tally.others,
            exact: !tally.seen_full,
            frames,
            skipped,
            damage: Damage::default(),
            truncated: None,
            ports: tally.ports,
        }
    }

    /// The streams an error lists.
    pub fn listing(&self) -> Listing {
        let shown = self.streams.len().min(SHOWN_STREAMS);
        Listing {
            streams: self.streams[..shown].to_vec(),
            more: (self.streams.len() - shown) as u64 + self.more_streams,
            exact: self.exact,
        }
    }

    /// The datagrams to replay: those to `port`, or when it is `None`, those of the
    /// one destination port the capture holds.
    ///
    /// Fails when nothing matches, and without a port when the capture holds
    /// datagrams to several ports (the error lists the streams). A raw dump has
    /// no ports: every datagram is selected, whatever the port.
    pub fn select(&self, port: Option<u16>) -> Result<Selection, CaptureError> {
        let port = match self.format {
            FileFormat::RawDump { .. } => None,
            _ => port,
        };
        if self.ports.is_empty() {
            return Err(CaptureError::NoUdp {
                path: self.path.clone(),
                frames: self.frames,
                skipped: self.skipped,
            });
        }
        let port = match (port, self.ports.keys().next()) {
            (Some(p), _) => p,
            (None, Some(&only)) if self.ports.len() == 1 => only,
            (None, _) => {
                return Err(CaptureError::SeveralPorts {
                    path: self.path.clone(),
                    ports: self.ports.len(),
                    streams: self.listing(),
                })
            }
        };
        let Some(p) = self.ports.get(&port) else {
            return Err(CaptureError::NoSuchPort {
                path: self.path.clone(),
                port,
                streams: self.listing(),
            });
        };
        Ok(p.selection(port, None))
    }
}

/// The datagrams picked for a replay: every one to a destination port, or
/// those of one lap of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selection {
    /// The destination port.
    pub port: u16,
    /// How many datagrams.
    pub packets: u64,
    /// The earliest timestamp among them.
    pub first: SystemTime,
    /// The latest timestamp among them.
    pub last: SystemTime,
    /// How long a replay of them takes at speed 1: from the first in the file to
    /// the latest, each gap over [`LONG_GAP`] played as [`LONG_GAP_PLAYED`].
    pub played: Duration,
    /// Gaps over [`LONG_GAP`] between one and the next (a clock jump, a damaged
    /// timestamp).
    pub long_gaps: u64,
    /// The lap they are (`replay --lap`), if only one lap's.
    pub lap: Option<LapSpan>,
}

impl Selection {
    /// Whether `d` is to the port (and so might be one of them: see
    /// [`Selection::takes`] for a lap).
    pub fn matches<P>(&self, d: &Datagram<P>) -> bool {
        d.to.port() == self.port
    }

    /// Whether `payload`, the datagram `index` (from 0, in file order) of those
    /// to the port, is one of them.
    pub fn takes(&self, index: u64, payload: &[u8]) -> bool {
        self.lap.is_none_or(|lap| lap.holds(index, payload))
    }

    /// From the first timestamp to the last.
    pub fn duration(&self) -> Duration {
        self.last.duration_since(self.first).unwrap_or_default()
    }

    /// Says the gaps over [`LONG_GAP`] a replay shortens, if there are any.
    pub fn long_gaps_note(&self) -> Option<String> {
        let (n, noun, verb) = match self.long_gaps {
            0 => return None,
            1 => (1, "gap", "it is"),
            n => (n, "gaps", "each is"),
        };
        Some(format!(
            "the packets to port {} have {} {noun} of more than {} s between packets (a clock \
             jump or a damaged timestamp); {verb} replayed as {} s",
            self.port,
            thousands(n),
            LONG_GAP.as_secs(),
            LONG_GAP_PLAYED.as_secs()
        ))
    }

    /// Where `time` falls after the first timestamp (zero if before it).
    pub fn offset(&self, time: SystemTime) -> Duration {
        time.duration_since(self.first).unwrap_or_default()
    }

    /// The selection of one lap of these datagrams (`replay --lap`), read from
    /// `reader`'s capture (to where it ends early, as its scan said).
    pub fn lap<R: Read + Seek>(
        &self,
        mut reader: Reader<R>,
        chosen: LapChoice,
    ) -> Result<Selection, CaptureError> {
        let mut finder = LapFinder::new(chosen);
        // The times of the lap being driven, and of the one chosen so far.
        let (mut current, mut found): (Option<Port>, Option<Port>) = (None, None);
        while let Some(d) = reader.next_datagram() {
            let d = match d {
                Ok(d) => d,
                Err(CaptureError::Truncated { .. } | CaptureError::Corrupt { .. }) => break,
                Err(e) => return Err(e),
            };
            if !self.matches(&d) {
                continue;
            }
            match finder.add(d.payload) {
                LapFrame::Other => {}
                LapFrame::Same => {
                    if let Some(p) = &mut current {
                        p.add(d.time);
                    }
                }
                LapFrame::Starts { chosen } => {
                    if chosen {
                        found = current;
                    }
                    let mut p = Port::new(d.time);
                    p.add(d.time);
                    current = Some(p);
                }
            }
        }
        let path = reader.path().to_owned();
        match finder.finish() {
            Ok(span) => {
                let times = found.expect("a lap is chosen at its end, so it started");
                Ok(times.selection(self.port, Some(span)))
            }
            Err(completed) => Err(CaptureError::NoSuchLap {
                path,
                chosen,
                completed,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn datagram(from: &str, to: &str, len: usize, ms: u64) -> Datagram {
        Datagram {
            time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + ms),
            from: from.parse().expect("an address"),
            to: to.parse().expect("an address"),
            payload: vec![0; len],
        }
    }

    fn tally(datagrams: &[Datagram]) -> Tally {
        let mut t = Tally::default();
        for d in datagrams {
            t.add(&Datagram {
                time: d.time,
                from: d.from,
                to: d.to,
                payload: &d.payload[..],
            });
        }
        t
    }

    fn streams(ds: &[Datagram]) -> Streams {
        Streams::of(
            Path::new("drive.pcap"),
            tally(ds),
            ds.len() as u64,
            Skipped::default(),
        )
    }

    fn stream_of(datagrams: &[Datagram]) -> Stream {
        let mut streams = streams(datagrams).streams;
        assert_eq!(streams.len(), 1, "one destination");
        streams.remove(0)
    }

    #[test]
    fn a_stream_of_one_length_reads_in_one_line() {
        let ds: Vec<Datagram> = (0..3_600)
            .map(|i| datagram("127.0.0.1:51234", "127.0.0.1:5400", 324, i * 16))
            .collect();
        let s = stream_of(&ds);
        assert_eq!(
            s.to_string(),
            "127.0.0.1:5400 ← 127.0.0.1:51234: 3,600 packets of 324 bytes (fh4/fh5/fh6)"
        );
        assert_eq!(
            s.last.duration_since(s.first).ok(),
            Some(Duration::from_millis(3_599 * 16))
        );
    }

    #[test]
    fn a_certain_horizon_guess_names_the_format() {
        let mut d = datagram("10.0.0.2:9", "10.0.0.1:5300", 324, 0);
        // FH6 types WheelInPuddle as S32 0/1 (docs/formats.md): one wheel in a puddle.
        let at = crate::wire::field::WHEEL_IN_PUDDLE.offset;
        d.payload[at..at + 4].copy_from_slice(&1i32.to_le_bytes());
        let s = stream_of(&[d]);
        assert_eq!(s.horizon, Some(Format::Fh6));
        assert_eq!(
            s.to_string(),
            "10.0.0.1:5300 ← 10.0.0.2:9: 1 packet of 324 bytes (fh6)"
        );
    }

    #[test]
    fn mixed_lengths_and_many_senders_are_summed_up() {
        let mut ds = Vec::new();
        for i in 0..10u64 {
            ds.push(datagram(
                &format!("10.0.0.{}:1000", i + 1),
                "10.0.0.100:53",
                40,
                i,
            ));
        }
        ds.push(datagram("10.0.0.1:1000", "10.0.0.100:53", 232, 20));
        ds.push(datagram("10.0.0.1:1000", "10.0.0.100:53", 311, 21));
        ds.push(datagram("10.0.0.1:1000", "10.0.0.100:53", 311, 22));
        ds.push(datagram("10.0.0.10:1000", "10.0.0.100:53", 7, 23));
        let s = stream_of(&ds);
        assert_eq!(s.sources.len(), MAX_SOURCES);
        assert_eq!(
            s.more_sources, 2,
            "10.0.0.9 and 10.0.0.10, each counted once"
        );
        assert_eq!(
            s.to_string(),
            "10.0.0.100:53 ← 10.0.0.1:1000, 10.0.0.2:1000, 10.0.0.3:1000, 10.0.0.4:1000, \
             10.0.0.5:1000, 10.0.0.6:1000, 10.0.0.7:1000, 10.0.0.8:1000 and 2 more: \
             14 packets: 10 of 40 bytes, 2 of 311 bytes (fm7), 1 of 7 bytes and 1 other lengths"
        );
    }

    #[test]
    fn one_port_is_chosen_without_asking() {
        let s = streams(&[
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, 10),
            datagram("127.0.0.1:5", "192.168.1.2:5400", 324, 30),
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, 20),
        ]);
        let sel = s.select(None).expect("one port");
        assert_eq!(sel.port, 5400);
        assert_eq!(sel.packets, 3, "both addresses on port 5400");
        assert_eq!(sel.duration(), Duration::from_millis(20));
    }

    #[test]
    fn several_ports_need_a_port_and_the_error_lists_them() {
        let s = streams(&[
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, 0),
            datagram("127.0.0.1:6", "127.0.0.1:53", 40, 1),
        ]);
        let e = s.select(None).expect_err("two ports");
        let text = e.to_string();
        for part in [
            "drive.pcap",
            "2 destination ports",
            "--port",
            "127.0.0.1:5400 ← 127.0.0.1:5: 1 packet of 324 bytes",
            "127.0.0.1:53 ← 127.0.0.1:6: 1 packet of 40 bytes",
        ] {
            assert!(text.contains(part), "{part:?} not in:\n{text}");
        }
        assert_eq!(s.select(Some(53)).expect("port 53").packets, 1);
        let e = s.select(Some(5401)).expect_err("no such port").to_string();
        assert!(e.contains("no UDP datagrams to port 5401"), "{e}");
        assert!(e.contains("127.0.0.1:5400 ←"), "{e}");
    }

    #[test]
    fn the_table_is_bounded_and_the_rest_counted_while_ports_stay_exact() {
        let mut ds = Vec::new();
        for i in 0..MAX_STREAMS + 5 {
            let to = format!("10.0.{}.{}:{}", i / 256, i % 256, 1_000 + i % 3);
            ds.push(datagram("10.1.0.1:9", &to, 8, i as u64));
        }
        // A stream after the table is full, and a second datagram to one beyond it.
        ds.push(datagram("10.1.0.1:9", "127.0.0.1:5400", 324, 5_000));
        ds.push(datagram("10.1.0.1:9", "127.0.0.1:5400", 324, 5_016));
        let s = streams(&ds);
        assert_eq!(s.streams.len(), MAX_STREAMS);
        assert_eq!(s.more_streams, 6, "five of 8 bytes and the one to 5400");
        assert!(s.exact);
        let sel = s.select(Some(5400)).expect("counted by port");
        assert_eq!(sel.long_gaps, 0);
        assert_eq!(
            (sel.packets, sel.duration()),
            (2, Duration::from_millis(16))
        );
        let listing = s.listing();
        assert_eq!(listing.streams.len(), SHOWN_STREAMS);
        assert_eq!(listing.more, (MAX_STREAMS + 6 - SHOWN_STREAMS) as u64);
        assert!(listing.to_string().ends_with("\n  and 986 more streams"));
        let e = s.select(None).expect_err("four ports").to_string();
        assert!(e.contains("to 4 destination ports"), "{e}");
    }

    #[test]
    fn lengths_past_the_counted_ones_are_counted_together() {
        let ds: Vec<Datagram> = (0..MAX_LENGTHS + 2)
            .map(|len| datagram("127.0.0.1:5", "127.0.0.1:53", len, 0))
            .collect();
        let s = stream_of(&ds);
        assert_eq!((s.lengths.len(), s.other_lengths), (MAX_LENGTHS, 2));
        assert!(
            s.to_string()
                .ends_with("and 61 other lengths and 2 of lengths not counted one by one"),
            "{s}"
        );
    }

    #[test]
    fn a_gap_over_ten_seconds_counts_as_one_and_is_noted() {
        let day = 86_400_000;
        let s = streams(&[
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, 0),
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, 10_000),
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, day),
            // Back in time: no gap, and the next gap is from the latest.
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, 5),
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, day + 16),
            datagram("127.0.0.1:5", "127.0.0.1:5400", 324, 2 * day),
        ]);
        let sel = s.select(None).expect("one port");
        assert_eq!(sel.long_gaps, 2, "10 s exactly is not over");
        assert_eq!(
            sel.played,
            Duration::from_millis(10_000 + 1_000 + 16 + 1_000)
        );
        assert_eq!(sel.duration(), Duration::from_millis(2 * day));
        assert_eq!(
            sel.long_gaps_note().as_deref(),
            Some(
                "the packets to port 5400 have 2 gaps of more than 10 s between packets (a \
                 clock jump or a damaged timestamp); each is replayed as 1 s"
            )
        );
        let plain = streams(&[datagram("127.0.0.1:5", "127.0.0.1:5400", 324, 0)]);
        assert_eq!(plain.select(None).unwrap().long_gaps_note(), None);
    }

    /// A raw dump of a simulated FH6 drive (seed 2) until lap 3 ends (the
    /// first frame with LapNumber 3), and each frame's IsRaceOn and LapNumber.
    fn raw_drive() -> (Vec<u8>, Vec<(i32, u16)>) {
        use crate::simulate::Simulator;
        use crate::wire::Packet;
        let mut sim = Simulator::new(Format::Fh6, 2);
        let (mut bytes, mut fields) = (Vec::new(), Vec::new());
        let mut buf = [0u8; 400];
        while fields.last().is_none_or(|&(_, lap)| lap < 3) {
            let n = sim
                .frame(Duration::from_micros(16_667), &mut buf)
                .expect("a buffer long enough");
            let p = Packet::new_checked(&buf[..n], Format::Fh6).expect("an fh6 packet");
            fields.push((p.is_race_on(), p.lap_number().expect("fh6 has LapNumber")));
            bytes.extend_from_slice(&buf[..n]);
            assert!(fields.len() < 60 * 60 * 10, "no 3 laps in 10 minutes");
        }
        (bytes, fields)
    }

    #[test]
    fn a_lap_s_selection_is_its_frames_and_their_times() {
        let (bytes, fields) = raw_drive();
        let whole = Streams::read_bytes(&bytes)
            .expect("a raw dump")
            .select(None)
            .expect("its datagrams");
        let reader = Reader::new(std::io::Cursor::new(&bytes[..]), Path::new("capture"))
            .expect("a raw dump");
        let lap = whole
            .lap(reader, LapChoice::Number(2))
            .expect("lap 2 completes");
        let frames: Vec<usize> = (0..fields.len()).filter(|&i| fields[i] == (1, 1)).collect();
        let (first, last) = (frames[0], frames[frames.len() - 1]);
        assert_eq!(frames.len(), last - first + 1, "one run, no pause");
        let at = |i: usize| UNIX_EPOCH + Duration::from_nanos(i as u64 * 1_000_000_000 / 60);
        assert_eq!(lap.port, whole.port);
        assert_eq!(lap.packets, frames.len() as u64);
        assert_eq!((lap.first, lap.last), (at(first), at(last)));
        assert_eq!(
            lap.played,
            at(last).duration_since(at(first)).expect("later")
        );
        assert_eq!(lap.long_gaps, 0);
        let span = lap.lap.expect("a lap");
        assert_eq!(
            (span.lap, span.first, span.last),
            (2, first as u64, last as u64)
        );
        let err = whole
            .lap(
                Reader::new(std::io::Cursor::new(&bytes[..]), Path::new("capture"))
                    .expect("a raw dump"),
                LapChoice::Number(4),
            )
            .expect_err("lap 4 has only begun");
        assert_eq!(
            err.to_string(),
            "capture completes laps 1 to 3; lap 4 is not among them (the capture ends during it)"
        );
    }
}
