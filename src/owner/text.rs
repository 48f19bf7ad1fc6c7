//! The configuration file's text as the owner edits it (issue 23): read
//! through the same guards as a reload ([`config::read_text`]: a regular file,
//! at most 1 MiB, UTF-8 — a FIFO or a 200 MB file is refused before it is
//! read), changed without losing what the user's editor wrote (its byte-order
//! mark and line endings, [`Shape`]), and written back only over the text it
//! was read from ([`replace`]): compared again just before the rename, through
//! a symbolic link to its target, with the file's permissions and owner.
//!
//! The user's editor writes the same file. An editor that saves in place
//! truncates, then writes: between the two the file is empty or half written,
//! and an edit made then would throw the user's text away. So an edit is made
//! only onto the text the running configuration came from, and the file is
//! replaced only if it still holds that text a moment before the rename.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{config, platform};

/// How long a file another program holds open (Windows: an editor, the
/// indexer, a virus scanner) is tried again before the edit gives up, and the
/// pause between tries.
const BUSY_FOR: Duration = Duration::from_secs(2);
const BUSY_PAUSE: Duration = Duration::from_millis(20);

/// The UTF-8 byte-order mark, as a `char` at the start of a text.
const BOM: char = '\u{feff}';

/// How a text was written, so that an edit of it is written the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// It starts with a byte-order mark (Notepad's "UTF-8 with BOM").
    bom: bool,
    /// Its lines end in CR LF (Windows editors).
    crlf: bool,
}

impl Shape {
    /// The shape of `text`.
    pub fn of(text: &str) -> Shape {
        Shape {
            bom: text.starts_with(BOM),
            crlf: text.contains("\r\n"),
        }
    }

    /// `text` without its byte-order mark: what the TOML parser reads.
    pub fn body(text: &str) -> &str {
        text.strip_prefix(BOM).unwrap_or(text)
    }

    /// `body` written as the original was: its mark put back, and every line
    /// ending CR LF when the original's were (an edit's new lines included).
    pub fn restore(self, body: &str) -> String {
        let mut out = String::with_capacity(body.len() + body.len() / 16 + BOM.len_utf8());
        if self.bom {
            out.push(BOM);
        }
        if !self.crlf {
            out.push_str(body);
            return out;
        }
        let mut previous = '\0';
        for c in body.chars() {
            if c == '\n' && previous != '\r' {
                out.push('\r');
            }
            out.push(c);
            previous = c;
        }
        out
    }
}

/// The text of the configuration file at `path`, read as a reload reads it.
pub fn read(path: &Path) -> Result<String, config::ConfigError> {
    config::read_text(path, &path.display().to_string())
}

/// Why the file was not replaced; nothing was written in any case.
#[derive(Debug)]
pub enum WriteError {
    /// The file no longer holds the text the edit was made to: the user's
    /// editor saved meanwhile (or is saving now).
    Changed,
    /// The file is read-only: the user keeps it from being changed.
    ReadOnly(PathBuf),
    /// The file system refused: what was being done, and why.
    Io(&'static str, PathBuf, io::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Changed => f.write_str(
                "the file changed on disk while the change was being saved: reload the page",
            ),
            WriteError::ReadOnly(path) => write!(
                f,
                "{} is read-only: nothing was changed (make it writable to change it from \
                 here)",
                path.display()
            ),
            WriteError::Io(what, path, e) => write!(f, "cannot {what} {}: {e}", path.display()),
        }
    }
}

/// The file an edit of `path` is written to: its target when it is a symbolic
/// link (so that the link stays a link, and the file it points to changes).
pub fn target_of(path: &Path) -> PathBuf {
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    match is_link {
        true => fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        false => path.to_path_buf(),
    }
}

/// A temporary file that is removed unless it was renamed into place.
struct Temporary {
    path: PathBuf,
    placed: bool,
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.placed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Creates a new temporary file beside `target`, only readable by its owner
/// until its permissions are set.
fn temporary_beside(target: &Path) -> io::Result<(fs::File, Temporary)> {
    let name = target
        .file_name()
        .map_or_else(|| "config".into(), |n| n.to_string_lossy().into_owned());
    let temp = target.with_file_name(format!(".{name}.{}.forza-relay-edit", std::process::id()));
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let file = match options.open(&temp) {
        // Left by an edit that was cut off (the program killed half-way).
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(&temp)?;
            options.open(&temp)?
        }
        other => other?,
    };
    Ok((
        file,
        Temporary {
            path: temp,
            placed: false,
        },
    ))
}

/// Replaces the file at `path` — its target, when it is a symbolic link —
/// with `text`, if it still holds `expected`: written into a new file beside
/// it with its permissions (and, on Unix, its owner and group), flushed to
/// disk, the file compared with `expected` once more, then renamed over it, so
/// a reader sees the old text or the new one, never half of one. A read-only
/// file is not replaced. A file another program holds open (Windows refuses
/// the rename then) is tried again for [`BUSY_FOR`], compared each time.
pub fn replace(path: &Path, expected: &str, text: &str) -> Result<(), WriteError> {
    let target = target_of(path);
    let io = |what: &'static str| {
        let target = target.clone();
        move |e: io::Error| WriteError::Io(what, target, e)
    };
    let meta = fs::metadata(&target).map_err(io("look at"))?;
    if meta.permissions().readonly() {
        return Err(WriteError::ReadOnly(target));
    }
    let (mut file, mut temporary) =
        temporary_beside(&target).map_err(io("make a new file beside"))?;
    file.write_all(text.as_bytes())
        .map_err(io("write the new version of"))?;
    file.set_permissions(meta.permissions())
        .map_err(io("give the new version the permissions of"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        // Only the superuser may give a file away; anyone else's edit is of
        // their own file, which the new one already belongs to.
        let _ = std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()));
    }
    file.sync_all().map_err(io("write the new version of"))?;
    drop(file);
    let busy_until = Instant::now() + BUSY_FOR;
    loop {
        // Replaced only while it still holds what the edit was made to: the
        // program holding it (below) may be the user's editor, saving.
        match read(&target) {
            Ok(now) if now == expected => {}
            _ => return Err(WriteError::Changed),
        }
        match fs::rename(&temporary.path, &target) {
            Ok(()) => {
                temporary.placed = true;
                return Ok(());
            }
            Err(e) if platform::is_file_busy(&e) && Instant::now() < busy_until => {
                std::thread::sleep(BUSY_PAUSE);
            }
            Err(e) => return Err(WriteError::Io("replace", target, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own under the system's temporary folder, removed at
    /// the end.
    struct Folder(PathBuf);

    impl Folder {
        fn new(name: &str) -> Folder {
            let path = std::env::temp_dir()
                .join(format!("forza-relay-text-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            Folder(path)
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const TEXT: &str = "[[destination]]\nname = \"simhub\"\naddr = \"127.0.0.1:8000\"\n";

    #[test]
    fn a_bom_and_crlf_lines_are_written_back_new_lines_too() {
        let original = format!("\u{feff}{}", TEXT.replace('\n', "\r\n"));
        let shape = Shape::of(&original);
        let body = Shape::body(&original);
        assert!(body.starts_with("[[destination]]"));
        let edited = format!("{body}max_rate = 30\n");
        let out = shape.restore(&edited);
        assert!(out.starts_with('\u{feff}'));
        assert_eq!(out.matches("\r\n").count(), 4, "{out:?}");
        assert_eq!(out.matches('\n').count(), 4, "no bare LF: {out:?}");
        assert_eq!(Shape::of(TEXT).restore(TEXT), TEXT, "LF text unchanged");
    }

    #[test]
    fn a_file_is_replaced_only_while_it_holds_what_was_read() {
        let dir = Folder::new("changed");
        let path = dir.0.join("relay.toml");
        fs::write(&path, TEXT).unwrap();
        replace(&path, TEXT, "new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        // The editor saved something else meanwhile: it stays.
        let e = replace(&path, TEXT, "mine").unwrap_err();
        assert!(matches!(e, WriteError::Changed), "{e}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        let left: Vec<_> = fs::read_dir(&dir.0).unwrap().collect();
        assert_eq!(left.len(), 1, "the temporary file is gone");
    }

    /// Windows refuses a rename over a file another program holds open
    /// without sharing its deletion: the edit waits for it to let go, and
    /// one that never does is named, with the file unchanged.
    #[cfg(windows)]
    #[test]
    fn a_file_held_open_by_another_program_is_replaced_once_it_lets_go() {
        use std::os::windows::fs::OpenOptionsExt as _;
        let dir = Folder::new("busy");
        let path = dir.0.join("relay.toml");
        fs::write(&path, TEXT).unwrap();
        // Read sharing only, as a program that opened it for reading alone.
        let hold = || {
            fs::OpenOptions::new()
                .read(true)
                .share_mode(1)
                .open(&path)
                .unwrap()
        };
        let held = hold();
        let let_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(held);
        });
        replace(&path, TEXT, "new").unwrap();
        let_go.join().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");

        fs::write(&path, TEXT).unwrap();
        let _held = hold();
        let e = replace(&path, TEXT, "mine").unwrap_err();
        assert!(
            matches!(e, WriteError::Io("replace", _, _)) && e.to_string().contains("relay.toml"),
            "{e}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), TEXT);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_stays_a_link_and_the_mode_stays() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = Folder::new("link");
        let real = dir.0.join("real");
        fs::create_dir(&real).unwrap();
        let target = real.join("forza-relay.toml");
        fs::write(&target, TEXT).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.0.join("forza-relay.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        replace(&link, TEXT, "changed").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), "changed");
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_read_only_file_is_left_alone() {
        let dir = Folder::new("read-only");
        let path = dir.0.join("relay.toml");
        fs::write(&path, TEXT).unwrap();
        let mut permissions = fs::metadata(&path).unwrap().permissions();
        permissions.set_readonly(true);
        fs::set_permissions(&path, permissions.clone()).unwrap();
        let e = replace(&path, TEXT, "new").unwrap_err();
        assert!(matches!(e, WriteError::ReadOnly(_)), "{e}");
        assert_eq!(fs::read_to_string(&path).unwrap(), TEXT);
        #[allow(clippy::permissions_set_readonly_false)]
        permissions.set_readonly(false);
        fs::set_permissions(&path, permissions).unwrap();
    }
}
