//! Captures of UDP telemetry: pcap and pcapng files written, read and replayed.
//!
//! - [`Writer`] writes a standard pcap, one record per datagram holding a real
//!   IPv4/UDP (or IPv6/UDP) packet from the sender to the listen address, so
//!   Wireshark, tshark and tcpdump show UDP.
//! - [`Reader`] reads pcap and pcapng files made by us or by other tools (link
//!   types Ethernet, raw IP, Linux cooked v1/v2, BSD/Windows loopback), one UDP
//!   datagram at a time, skipping and counting every other frame, and reading
//!   past (and counting) records of any size and fields that make no sense.
//! - [`Streams`] lists a capture's UDP streams by destination and picks the one
//!   to replay ([`Selection`]), or one lap of it ([`LapChoice`], read by the
//!   wire's fields); [`replay`] sends it with its original spacing.
//!
//! The file formats are read and written here (pcap-file only names link
//! types). Nothing here panics on a file's contents: every problem is counted or
//! is a [`CaptureError`] naming the file.

mod ip;
mod lap;
mod link;
mod raw;
mod read;
pub mod record;
pub mod replay;
mod streams;
mod write;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

pub use crate::tap::Datagram;
pub use lap::{Completed, LapChoice, LapFinder, LapFrame, LapSpan};
pub use link::LinkType;
pub use raw::{NotRawDump, RAW_DUMP_ADDR, RAW_DUMP_RATE};
pub use read::{Damage, FileFormat, Reader, Skipped, MAX_RECORD};
pub use record::{create_new, Existing};
pub use streams::{Listing, Selection, Stream, Streams, MAX_STREAMS, SHOWN_STREAMS};
pub use write::Writer;

/// What went wrong with a capture file, naming the file.
#[derive(Debug)]
pub enum CaptureError {
    /// The file could not be opened.
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file could not be created.
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A recording's file exists, and is not to be replaced.
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A recording was to replace something that is not a regular file (a
    /// FIFO, a device, a folder).
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// Reading failed part-way.
    Read {
        /// The file.
        path: PathBuf,
        /// Frames read fine before.
        packets: u64,
        /// Why.
        source: io::Error,
    },
    /// Writing failed.
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file is empty.
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file starts with neither a pcap nor a pcapng magic number, and is
    /// not a raw dump either.
    NotACapture {
        /// The file.
        path: PathBuf,
        /// Its first (up to four) bytes.
        start: Vec<u8>,
        /// Why it is not a raw dump.
        why: NotRawDump,
    },
    /// The file ends inside a record (or inside its header, with 0 packets).
    Truncated {
        /// The file.
        path: PathBuf,
        /// Frames read fine before the cut.
        packets: u64,
    },
    /// A header or record field makes no sense.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Frames read fine before.
        packets: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// The capture's link type is not one this module reads.
    UnsupportedLink {
        /// The file.
        path: PathBuf,
        /// The LINKTYPE_ number.
        link: u32,
    },
    /// A datagram too long for an IP packet was given to the writer.
    TooLong {
        /// The file being written.
        path: PathBuf,
        /// The payload's length.
        len: usize,
        /// The longest allowed for its address family.
        max: usize,
    },
    /// The capture holds no UDP datagram.
    NoUdp {
        /// The file.
        path: PathBuf,
        /// Frames read.
        frames: u64,
        /// Why each was skipped.
        skipped: Skipped,
    },
    /// No port was given and the capture holds datagrams to several ports.
    SeveralPorts {
        /// The file.
        path: PathBuf,
        /// How many destination ports.
        ports: usize,
        /// Its streams with the most packets, and how many more.
        streams: Listing,
    },
    /// The port given has no datagram in the capture.
    NoSuchPort {
        /// The file.
        path: PathBuf,
        /// The port asked for.
        port: u16,
        /// The streams there are: those with the most packets, and how many more.
        streams: Listing,
    },
    /// The lap asked for is not one the capture completes.
    NoSuchLap {
        /// The file.
        path: PathBuf,
        /// The lap asked for.
        chosen: LapChoice,
        /// The laps it completes.
        completed: Completed,
    },
    /// The replay's socket could not be opened.
    Socket {
        /// The address it was to send to.
        to: SocketAddr,
        /// Why.
        source: io::Error,
    },
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CaptureError as E;
        match self {
            E::Open { path, source } => write!(f, "cannot open {}: {source}", path.display()),
            E::Create { path, source } => {
                write!(f, "cannot create {}: {source}", path.display())
            }
            E::Exists { path } => write!(
                f,
                "{} already exists, and a recording never replaces a file: give another \
                 name, put {{time}} in it, or add --force to replace it",
                path.display()
            ),
            E::NotAFile { path } => write!(
                f,
                "{} is not a regular file (a folder, a FIFO or a device): record into a file",
                path.display()
            ),
            E::Read {
                path,
                packets,
                source,
            } => write!(
                f,
                "cannot read {} after {}: {source}",
                path.display(),
                packet_count(*packets)
            ),
            E::Write { path, source } => {
                write!(f, "cannot write to {}: {source}", path.display())
            }
            E::Empty { path } => write!(f, "{} is empty, not a capture", path.display()),
            E::NotACapture { path, start, why } => {
                write!(
                    f,
                    "{} is not a capture forza-relay reads; it reads pcap (starting with d4 c3 \
                     b2 a1 or a1 b2 c3 d4), pcapng (0a 0d 0d 0a) and raw dumps of Forza \
                     datagrams back to back (232, 311, 324 or 331 bytes each). It starts with",
                    path.display()
                )?;
                for b in start {
                    write!(f, " {b:02x}")?;
                }
                write!(f, ", and {why}")
            }
            E::Truncated { path, packets: 0 } => write!(
                f,
                "{} is truncated: it ends inside its header or first packet",
                path.display()
            ),
            E::Truncated { path, packets } => write!(
                f,
                "{} is truncated: it ends inside a record, after {} read fine",
                path.display(),
                packet_count(*packets)
            ),
            E::Corrupt {
                path,
                packets,
                what,
            } => write!(
                f,
                "{} is damaged after {}: {what}",
                path.display(),
                packet_count(*packets)
            ),
            E::UnsupportedLink { path, link } => write!(
                f,
                "{} has link type {link} ({}), which forza-relay does not read; it reads {}",
                path.display(),
                link::name(*link),
                link::SUPPORTED
            ),
            E::TooLong { path, len, max } => write!(
                f,
                "cannot write a {}-byte datagram to {}: at most {} bytes fit one IP packet",
                thousands(*len as u64),
                path.display(),
                thousands(*max as u64)
            ),
            E::NoUdp {
                path,
                frames,
                skipped,
            } => write!(
                f,
                "{} holds no UDP datagrams ({} frames: {skipped})",
                path.display(),
                thousands(*frames)
            ),
            E::SeveralPorts {
                path,
                ports,
                streams,
            } => write!(
                f,
                "{} holds UDP datagrams to {} destination ports; pick one with --port PORT:{streams}",
                path.display(),
                thousands(*ports as u64)
            ),
            E::NoSuchPort {
                path,
                port,
                streams,
            } => write!(
                f,
                "{} holds no UDP datagrams to port {port}; its streams are:{streams}",
                path.display()
            ),
            E::NoSuchLap {
                path,
                chosen,
                completed,
            } => write!(f, "{} {}", path.display(), completed.explain(*chosen)),
            E::Socket { to, source } => {
                write!(f, "cannot open a socket to send to {to}: {source}")
            }
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaptureError::Open { source, .. }
            | CaptureError::Create { source, .. }
            | CaptureError::Read { source, .. }
            | CaptureError::Write { source, .. }
            | CaptureError::Socket { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub(crate) use crate::numbers::thousands;

fn packet_count(n: u64) -> String {
    if n == 1 {
        "1 packet".to_owned()
    } else {
        format!("{} packets", thousands(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recorder runs the writer on its own thread (and a viewer the reader):
    /// this stops compiling if either loses `Send`.
    #[test]
    fn writer_and_reader_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<Writer>();
        send::<Reader>();
        send::<CaptureError>();
    }
}
