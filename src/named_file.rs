//! Reading a file a configuration names (the configuration file itself, an
//! MQTT destination's `ca_file`) with the same three guards every time: it
//! must be a regular file (a FIFO would block `open` until a writer comes, a
//! device never ends), it is read up to [`MAX_BYTES`] (a video or a disk image
//! named by mistake takes no minutes and no gigabytes), and the read ends
//! within [`READ_WITHIN`] (issue 30: a `ca_file` read with no guard took the
//! relay to 1 GiB, and a FIFO blocked the configuration's owner for ever).
//!
//! The type is looked at before the file is opened, and again on the handle
//! that was opened (a file swapped for a FIFO in between is refused too). The
//! opening and reading run on a thread of their own that the caller waits for
//! at most [`READ_WITHIN`]: whatever the file system does, the caller goes
//! on, and a thread that stays stuck (a FIFO swapped in between the look and
//! the open, a hung network share) is left to end by itself.

use std::fmt;
use std::fs::File;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// The largest file read. A configuration is a few KB and a CA file a few
/// (a whole system bundle is ~200 KB): a bigger one is the wrong file.
pub const MAX_BYTES: u64 = 1 << 20;
/// How long a read may take: a local file takes milliseconds.
pub const READ_WITHIN: Duration = Duration::from_secs(2);

/// Why a named file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// The operating system's error (no such file, no permission…).
    Io(io::Error),
    /// It is no regular file: what it is.
    NotAFile(&'static str),
    /// It is this many bytes, more than [`MAX_BYTES`].
    TooBig(u64),
    /// It grew past [`MAX_BYTES`] while it was read.
    Grew,
    /// No answer within [`READ_WITHIN`].
    TimedOut,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotAFile(kind) => write!(f, "it is {kind}, not a file"),
            ReadError::TooBig(size) => write!(
                f,
                "it is {size} bytes, more than the {} KiB read",
                MAX_BYTES >> 10
            ),
            ReadError::Grew => write!(f, "it holds more than the {} KiB read", MAX_BYTES >> 10),
            ReadError::TimedOut => write!(
                f,
                "it could not be read within {} s (a file that never ends, or a stalled disk \
                 or network share)",
                READ_WITHIN.as_secs()
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// What a path that is not a regular file is, for the message refusing it.
fn not_a_file(file_type: std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return Some("a named pipe (FIFO)");
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return Some("a device");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// The bytes of the file at `path`: a regular file of at most [`MAX_BYTES`],
/// read within [`READ_WITHIN`].
pub fn read(path: &Path) -> Result<Vec<u8>, ReadError> {
    // Looked at before it is opened: opening a FIFO waits for a writer.
    let kind = std::fs::metadata(path).map_err(ReadError::Io)?.file_type();
    if let Some(kind) = not_a_file(kind) {
        return Err(ReadError::NotAFile(kind));
    }
    let path = path.to_path_buf();
    within(READ_WITHIN, move || read_regular(&path))
}

/// Opens and reads `path`, checking the handle opened.
fn read_regular(path: &PathBuf) -> Result<Vec<u8>, ReadError> {
    let file = File::open(path).map_err(ReadError::Io)?;
    let metadata = file.metadata().map_err(ReadError::Io)?;
    if let Some(kind) = not_a_file(metadata.file_type()) {
        return Err(ReadError::NotAFile(kind));
    }
    // Its size as it is now (a sparse file is refused without a read); one
    // that grows while it is read is still read only up to the limit.
    if metadata.len() > MAX_BYTES {
        return Err(ReadError::TooBig(metadata.len()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(ReadError::Grew);
    }
    Ok(bytes)
}

/// What `work` returns, if it returns within `limit`; it runs on a thread of
/// its own, left to end by itself when it does not.
fn within<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce() -> Result<T, ReadError> + Send + 'static,
) -> Result<T, ReadError> {
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("read-file".to_owned())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(ReadError::Io)?;
    match rx.recv_timeout(limit) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(ReadError::TimedOut),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(ReadError::Io(io::Error::other(
            "the reading thread ended without an answer",
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("forza-relay-named-{tag}-{}", std::process::id()))
    }

    #[test]
    fn a_small_file_is_read_whole() {
        let path = temp("small");
        std::fs::write(&path, b"abc\n").unwrap();
        let read = read(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(read.unwrap(), b"abc\n");
    }

    #[test]
    fn a_sparse_file_over_the_cap_is_refused_without_a_read() {
        let path = temp("sparse");
        let file = File::create(&path).unwrap();
        file.set_len(1 << 30).unwrap();
        drop(file);
        let e = read(&path).unwrap_err();
        let _ = std::fs::remove_file(&path);
        assert!(matches!(e, ReadError::TooBig(n) if n == 1 << 30), "{e}");
        assert_eq!(
            e.to_string(),
            "it is 1073741824 bytes, more than the 1024 KiB read"
        );
    }

    #[test]
    fn a_folder_and_a_missing_file_are_said() {
        let e = read(&std::env::temp_dir()).unwrap_err();
        assert_eq!(e.to_string(), "it is a folder, not a file");
        let e = read(&temp("missing")).unwrap_err();
        assert!(matches!(e, ReadError::Io(ref io) if io.kind() == io::ErrorKind::NotFound));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let path = temp("fifo");
        let _ = std::fs::remove_file(&path);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let e = read(&path).unwrap_err();
        let _ = std::fs::remove_file(&path);
        assert_eq!(e.to_string(), "it is a named pipe (FIFO), not a file");
    }

    #[test]
    fn work_that_never_ends_is_given_up_at_the_deadline() {
        let (_keep, never) = mpsc::channel::<()>();
        let e = within(Duration::from_millis(50), move || {
            let _ = never.recv();
            Ok(())
        })
        .unwrap_err();
        assert!(matches!(e, ReadError::TimedOut), "{e}");
    }
}
