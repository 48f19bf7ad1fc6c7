//! Writing captures: a standard pcap that Wireshark, tshark and tcpdump open.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use byteorder_slice::LittleEndian;
use pcap_file::pcap::{PcapHeader, PcapPacket};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

use super::ip;
use super::CaptureError;

/// The snap length the file header declares: tcpdump's default, above the longest
/// packet written.
const SNAPLEN: u32 = 262_144;
const _: () = assert!(ip::MAX_PACKET <= SNAPLEN as usize);
/// Bytes buffered before a write to the file.
const FILE_BUFFER: usize = 64 * 1024;
/// The file header. Little-endian whatever the host, so a capture's bytes do not
/// depend on the machine that wrote it.
const HEADER: PcapHeader = PcapHeader {
    version_major: 2,
    version_minor: 4,
    ts_correction: 0,
    ts_accuracy: 0,
    snaplen: SNAPLEN,
    datalink: DataLink::RAW,
    ts_resolution: TsResolution::NanoSecond,
    endianness: Endianness::Little,
};

/// Writes UDP datagrams to a pcap file, one record each.
///
/// The file has nanosecond timestamps and link type RAW (101): every record is a
/// real IPv4/UDP packet (or IPv6/UDP when either address is IPv6) from the sender
/// to the listen address, with correct lengths and checksums. Records go through
/// one reused buffer: writing allocates nothing per datagram. Output is buffered:
/// call [`Writer::flush`] to put it in the file (dropping the writer flushes too,
/// ignoring errors).
pub struct Writer {
    path: PathBuf,
    file: BufWriter<File>,
    packet: Vec<u8>,
    ident: u16,
    packets: u64,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

impl Writer {
    /// The longest payload written from and to IPv4 addresses.
    pub const MAX_PAYLOAD_V4: usize = ip::MAX_PAYLOAD_V4;
    /// The longest payload written when either address is IPv6.
    pub const MAX_PAYLOAD_V6: usize = ip::MAX_PAYLOAD_V6;

    /// Creates (or truncates) the file at `path` and writes the pcap header.
    pub fn create(path: &Path) -> Result<Writer, CaptureError> {
        let file = File::create(path).map_err(|source| CaptureError::Create {
            path: path.to_owned(),
            source,
        })?;
        let mut file = BufWriter::with_capacity(FILE_BUFFER, file);
        HEADER
            .write_to(&mut file)
            .map_err(|e| write_error(path, e))?;
        Ok(Writer {
            path: path.to_owned(),
            file,
            packet: Vec::with_capacity(ip::MAX_PACKET),
            ident: 0,
            packets: 0,
        })
    }

    /// Writes one datagram `payload` received at `time`, sent by `from` to `to`.
    ///
    /// A payload longer than [`Writer::MAX_PAYLOAD_V4`] (IPv4) or
    /// [`Writer::MAX_PAYLOAD_V6`] (IPv6) is refused, and nothing is written. A time
    /// before 1970 is written as 1970-01-01.
    pub fn write(
        &mut self,
        time: SystemTime,
        from: SocketAddr,
        to: SocketAddr,
        payload: &[u8],
    ) -> Result<(), CaptureError> {
        self.packet.clear();
        ip::build(&mut self.packet, from, to, self.ident, payload).map_err(|max| {
            CaptureError::TooLong {
                path: self.path.clone(),
                len: payload.len(),
                max,
            }
        })?;
        self.ident = self.ident.wrapping_add(1);
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        // The packet is at most MAX_PACKET bytes: its length fits a u32.
        let len = self.packet.len() as u32;
        let record = PcapPacket::new(since, len, &self.packet);
        record
            .write_to::<_, LittleEndian>(&mut self.file, HEADER.ts_resolution, SNAPLEN)
            .map_err(|e| write_error(&self.path, e))?;
        self.packets += 1;
        Ok(())
    }

    /// Writes what is buffered to the file.
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        self.file.flush().map_err(|source| CaptureError::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// Records written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn write_error(path: &Path, e: PcapError) -> CaptureError {
    let source = match e {
        PcapError::IoError(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
    };
    CaptureError::Write {
        path: path.to_owned(),
        source,
    }
}
