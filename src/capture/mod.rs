//! Captures of UDP telemetry: pcap and pcapng files written, read and replayed.
//!
//! - [`Writer`] writes a standard pcap, one record per datagram holding a real
//!   IPv4/UDP (or IPv6/UDP) packet from the sender to the listen address, so
//!   Wireshark, tshark and tcpdump show UDP.
//! - [`Reader`] reads pcap and pcapng files made by us or by other tools (link
//!   types Ethernet, raw IP, Linux cooked v1/v2, BSD/Windows loopback), one UDP
//!   datagram at a time, skipping and counting every other frame.
//! - [`Streams`] lists a capture's UDP streams by destination and picks the one
//!   to replay ([`Selection`]); [`replay`] sends it with its original spacing.
//!
//! Files are the crate `pcap-file`'s; this module adds the IP/UDP and link
//! headers. Nothing here panics on a file's contents: every problem is a
//! [`CaptureError`] naming the file.

mod ip;
mod link;
mod read;
pub mod record;
pub mod replay;
mod streams;
mod write;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::SystemTime;

pub use link::Link;
pub use read::{FileFormat, Reader, Skipped};
pub use streams::{Selection, Stream, Streams};
pub use write::Writer;

/// One UDP datagram read from a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// When it was captured.
    pub time: SystemTime,
    /// The sender's address and port.
    pub from: SocketAddr,
    /// The destination address and port.
    pub to: SocketAddr,
    /// The UDP payload (a Forza packet, for the streams this program cares about).
    pub payload: Vec<u8>,
}

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
    /// The file starts with neither a pcap nor a pcapng magic number.
    NotACapture {
        /// The file.
        path: PathBuf,
        /// Its first (up to four) bytes.
        start: Vec<u8>,
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
        /// Its streams, most packets first.
        streams: Vec<Stream>,
    },
    /// The port given has no datagram in the capture.
    NoSuchPort {
        /// The file.
        path: PathBuf,
        /// The port asked for.
        port: u16,
        /// The streams there are.
        streams: Vec<Stream>,
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
            E::NotACapture { path, start } => {
                write!(
                    f,
                    "{} is not a pcap or pcapng capture (it starts with",
                    path.display()
                )?;
                for b in start {
                    write!(f, " {b:02x}")?;
                }
                f.write_str(
                    "; a pcap starts with d4 c3 b2 a1 or a1 b2 c3 d4, a pcapng with 0a 0d 0d 0a)",
                )
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
            E::SeveralPorts { path, streams } => {
                let mut ports: Vec<u16> = streams.iter().map(|s| s.to.port()).collect();
                ports.sort_unstable();
                ports.dedup();
                write!(
                    f,
                    "{} holds UDP datagrams to {} destination ports; pick one with --port PORT:",
                    path.display(),
                    ports.len()
                )?;
                list(f, streams)
            }
            E::NoSuchPort {
                path,
                port,
                streams,
            } => {
                write!(
                    f,
                    "{} holds no UDP datagrams to port {port}; its streams are:",
                    path.display()
                )?;
                list(f, streams)
            }
            E::Socket { to, source } => {
                write!(f, "cannot open a socket to send to {to}: {source}")
            }
        }
    }
}

fn list(f: &mut fmt::Formatter<'_>, streams: &[Stream]) -> fmt::Result {
    for s in streams {
        write!(f, "\n  --port {:<5}  {s}", s.to.port())?;
    }
    Ok(())
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

/// `n` with a comma every three digits: `3,600`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

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

    #[test]
    fn thousands_puts_commas_every_three_digits() {
        for (n, text) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1,000"),
            (65_507, "65,507"),
            (1_234_567, "1,234,567"),
        ] {
            assert_eq!(thousands(n), text);
        }
    }
}
