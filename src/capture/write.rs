//! Writing captures: a standard pcap that Wireshark, tshark and tcpdump open.
//!
//! Records are collected whole in a buffer and written to the file together.
//! When a write fails part-way (a full disk), the file is cut back to its last
//! whole record, so it always reads to its end.

use std::fs::File;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::ip;
use super::CaptureError;

/// The snap length the file header declares: tcpdump's default, above the longest
/// packet written.
const SNAPLEN: u32 = 262_144;
const _: () = assert!(ip::MAX_PACKET <= SNAPLEN as usize);
/// Bytes collected before a write to the file.
const FILE_BUFFER: usize = 64 * 1024;
/// A record's header: seconds, nanoseconds, captured and original length.
const RECORD_HEADER: usize = 16;
/// The file header: nanosecond magic, version 2.4, no time zone, no accuracy,
/// the snap length, link type RAW (101). Little-endian whatever the host, so a
/// capture's bytes do not depend on the machine that wrote it.
const FILE_HEADER: [u8; 24] = {
    let mut h = [0u8; 24];
    let magic = 0xA1B2_3C4Du32.to_le_bytes();
    let snaplen = SNAPLEN.to_le_bytes();
    let mut i = 0;
    while i < 4 {
        h[i] = magic[i];
        h[16 + i] = snaplen[i];
        i += 1;
    }
    h[4] = 2; // version 2.4
    h[6] = 4;
    h[20] = 101; // LINKTYPE_RAW
    h
};

/// Writes UDP datagrams to a pcap file, one record each.
///
/// The file has nanosecond timestamps and link type RAW (101): every record is a
/// real IPv4/UDP packet (or IPv6/UDP when either address is IPv6) from the sender
/// to the listen address, with correct lengths and checksums. Writing allocates
/// nothing per datagram. Output is buffered: call [`Writer::flush`] to put it in
/// the file (dropping the writer flushes too, ignoring errors).
///
/// A failed write (the disk is full) leaves the file ending on its last whole
/// record; [`Writer::packets`] then counts the records in the file, and every
/// later call fails without writing.
pub struct Writer {
    path: PathBuf,
    file: File,
    /// Whole records not yet in the file.
    buf: Vec<u8>,
    /// Records in `buf`.
    buffered: u64,
    /// Records in the file.
    written: u64,
    /// Bytes in the file: its header and `written` whole records.
    len: u64,
    packet: Vec<u8>,
    ident: u16,
    broken: bool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .field("packets", &self.packets())
            .finish_non_exhaustive()
    }
}

impl Writer {
    /// The longest payload written from and to IPv4 addresses.
    pub const MAX_PAYLOAD_V4: usize = ip::MAX_PAYLOAD_V4;
    /// The longest payload written when either address is IPv6.
    pub const MAX_PAYLOAD_V6: usize = ip::MAX_PAYLOAD_V6;

    /// Creates (or replaces) the file at `path` and writes the pcap header. A
    /// recording never replaces a file: it opens its file with
    /// [`create_new`](super::create_new) and hands it to [`Writer::new`].
    pub fn create(path: &Path) -> Result<Writer, CaptureError> {
        let file = File::create(path).map_err(|source| CaptureError::Create {
            path: path.to_owned(),
            source,
        })?;
        Writer::new(file, path)
    }

    /// Writes the pcap header to `file`, just created empty at `path`.
    pub fn new(mut file: File, path: &Path) -> Result<Writer, CaptureError> {
        file.write_all(&FILE_HEADER)
            .map_err(|source| CaptureError::Write {
                path: path.to_owned(),
                source,
            })?;
        Ok(Writer {
            path: path.to_owned(),
            file,
            buf: Vec::with_capacity(FILE_BUFFER + RECORD_HEADER + ip::MAX_PACKET),
            buffered: 0,
            written: 0,
            len: FILE_HEADER.len() as u64,
            packet: Vec::with_capacity(ip::MAX_PACKET),
            ident: 0,
            broken: false,
        })
    }

    /// Writes one datagram `payload` received at `time`, sent by `from` to `to`.
    ///
    /// A payload longer than [`Writer::MAX_PAYLOAD_V4`] (IPv4) or
    /// [`Writer::MAX_PAYLOAD_V6`] (IPv6) is refused, and nothing is written. A time
    /// before 1970 is written as 1970-01-01, one after 2106 as 2106.
    pub fn write(
        &mut self,
        time: SystemTime,
        from: SocketAddr,
        to: SocketAddr,
        payload: &[u8],
    ) -> Result<(), CaptureError> {
        self.check_not_broken()?;
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
        let seconds = u32::try_from(since.as_secs()).unwrap_or(u32::MAX);
        // The packet is at most MAX_PACKET bytes: its length fits a u32.
        let len = (self.packet.len() as u32).to_le_bytes();
        self.buf.extend_from_slice(&seconds.to_le_bytes());
        self.buf
            .extend_from_slice(&since.subsec_nanos().to_le_bytes());
        self.buf.extend_from_slice(&len);
        self.buf.extend_from_slice(&len);
        self.buf.extend_from_slice(&self.packet);
        self.buffered += 1;
        if self.buf.len() >= FILE_BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what is buffered to the file. On failure the file is cut back to
    /// its last whole record.
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        self.check_not_broken()?;
        let mut done = 0;
        while done < self.buf.len() {
            match self.file.write(&self.buf[done..]) {
                Ok(0) => return Err(self.fail(done, io::ErrorKind::WriteZero.into())),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail(done, e)),
            }
        }
        self.written += self.buffered;
        self.len += self.buf.len() as u64;
        self.buffered = 0;
        self.buf.clear();
        Ok(())
    }

    /// After `done` bytes of the buffer went into the file and then `e`: keeps
    /// the whole records among them, cuts off the rest, and stops writing.
    fn fail(&mut self, done: usize, e: io::Error) -> CaptureError {
        let (records, bytes) = whole_records(&self.buf[..done]);
        self.written += records;
        self.len += bytes as u64;
        self.buffered = 0;
        self.buf.clear();
        self.broken = true;
        if bytes < done {
            if let Err(cut) = self.file.set_len(self.len) {
                return self.error(io::Error::new(
                    e.kind(),
                    format!("{e}; and its last record could not be cut off ({cut})"),
                ));
            }
        }
        self.error(e)
    }

    fn error(&self, source: io::Error) -> CaptureError {
        CaptureError::Write {
            path: self.path.clone(),
            source,
        }
    }

    fn check_not_broken(&self) -> Result<(), CaptureError> {
        if self.broken {
            Err(self.error(io::Error::other(
                "writing stopped after an earlier write failed",
            )))
        } else {
            Ok(())
        }
    }

    /// Records written so far: in the file, or buffered for it.
    pub fn packets(&self) -> u64 {
        self.written + self.buffered
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.broken {
            let _ = self.flush();
        }
    }
}

/// The whole records at the start of `bytes` (records as [`Writer`] writes
/// them): how many, and how many bytes they fill.
fn whole_records(bytes: &[u8]) -> (u64, usize) {
    let (mut records, mut at) = (0, 0);
    while let Some(header) = bytes.get(at..at + RECORD_HEADER) {
        let len = u32::from_le_bytes([header[8], header[9], header[10], header[11]]) as usize;
        let end = at + RECORD_HEADER + len;
        if end > bytes.len() {
            break;
        }
        records += 1;
        at = end;
    }
    (records, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_header_is_a_little_endian_nanosecond_pcap_of_raw_ip() {
        assert_eq!(
            FILE_HEADER,
            [
                0x4D, 0x3C, 0xB2, 0xA1, // magic, nanoseconds
                2, 0, 4, 0, // version 2.4
                0, 0, 0, 0, // time zone
                0, 0, 0, 0, // accuracy
                0, 0, 4, 0, // snap length 262,144
                101, 0, 0, 0, // LINKTYPE_RAW
            ]
        );
    }

    #[test]
    fn whole_records_stops_before_a_cut_one() {
        let mut bytes = Vec::new();
        for len in [3u32, 0, 5] {
            bytes.extend_from_slice(&[0; 8]);
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend(std::iter::repeat_n(7u8, len as usize));
        }
        let all = bytes.len();
        assert_eq!(whole_records(&bytes), (3, all));
        assert_eq!(whole_records(&bytes[..all - 1]), (2, 19 + 16));
        assert_eq!(whole_records(&bytes[..19 + 15]), (1, 19), "a cut header");
        assert_eq!(whole_records(&[]), (0, 0));
    }
}
