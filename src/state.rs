//! What forza-relay keeps between runs, in the user's state folder (issue 30):
//! the web page's token, so that a phone's bookmark of the page keeps working
//! after a restart.
//!
//! The folder is the platform's per-user one ([`crate::platform::state_dir`]:
//! `~/.local/state/forza-relay`, `~/Library/Application Support/forza-relay`,
//! `%LOCALAPPDATA%\forza-relay`), or the one [`STATE_DIR_VAR`] names (tests,
//! and users who keep it elsewhere). It is created private (0700 on Unix) and
//! the token file too (0600). The token is 128 bits from the OS's random
//! source (`getrandom`), in hex.
//!
//! The file is written whole and then put in place: a new file by a hard link
//! that fails if one is there (two relays starting at once keep the same
//! token), a new token by a rename over the old one. A reader never sees half
//! a token; it takes the file only when it holds one ([`TokenFile::read`]).

use std::fs;
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};

use crate::platform;

/// An environment variable naming the state folder instead of the platform's.
pub const STATE_DIR_VAR: &str = "FORZA_RELAY_STATE_DIR";

/// The token file's name in the state folder.
pub const TOKEN_FILE: &str = "web-token";

/// Hex digits in a token (128 bits).
pub const TOKEN_LEN: usize = 32;

/// The most of a token file that is read: a token and a line end, with room.
const MAX_TOKEN_FILE: u64 = 256;

/// The state folder: [`STATE_DIR_VAR`]'s, else the platform's; `None` when
/// neither is known (no home).
pub fn folder() -> Option<PathBuf> {
    std::env::var_os(STATE_DIR_VAR)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(platform::state_dir)
}

/// The log file's name in the state folder, for a program that runs without
/// its console window (the tray, issue 32).
pub const LOG_FILE: &str = "forza-relay.log";

/// A log file grown past this is kept as `forza-relay.log.old` and a new one
/// started, so it never fills the disk.
const LOG_KEEP: u64 = 8 << 20;

/// The log file in `folder`, opened to append (created, with the folder,
/// when missing); one past [`LOG_KEEP`] is moved to `.old` first. Its path
/// and the file.
pub fn log_file(folder: &Path) -> io::Result<(PathBuf, fs::File)> {
    platform::create_private_dir(folder)?;
    let path = folder.join(LOG_FILE);
    if fs::metadata(&path).is_ok_and(|m| m.len() > LOG_KEEP) {
        fs::rename(&path, path.with_extension("log.old"))?;
    }
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    Ok((path, file))
}

/// A new token: 16 bytes of the OS's random source, in hex.
pub fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; TOKEN_LEN / 2];
    getrandom::getrandom(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `text` is a token: [`TOKEN_LEN`] hex digits.
pub fn is_token(text: &str) -> bool {
    text.len() == TOKEN_LEN && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The page's token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    /// The token file in `folder`.
    pub fn in_folder(folder: &Path) -> TokenFile {
        TokenFile {
            path: folder.join(TOKEN_FILE),
        }
    }

    /// The token file at `path` (a relay's answer says where it keeps its
    /// own).
    pub fn at(path: &Path) -> TokenFile {
        TokenFile {
            path: path.to_path_buf(),
        }
    }

    /// The token file of the state folder ([`folder`]).
    pub fn of_user() -> io::Result<TokenFile> {
        folder().map(|f| TokenFile::in_folder(&f)).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no folder for it: set HOME, or {STATE_DIR_VAR}"),
            )
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn folder(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// The token it holds: `None` when there is no file, or it holds no token
    /// (a regular file only, read up to a few hundred bytes).
    pub fn read(&self) -> io::Result<Option<String>> {
        let kind = match fs::metadata(&self.path) {
            Ok(m) => m.file_type(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        // Looked at before it is opened: opening a FIFO waits for a writer.
        if !kind.is_file() {
            return Ok(None);
        }
        let mut text = String::new();
        fs::File::open(&self.path)?
            .take(MAX_TOKEN_FILE)
            .read_to_string(&mut text)?;
        let text = text.trim();
        Ok(is_token(text).then(|| text.to_owned()))
    }

    /// The token it holds, or a new one written to it when it holds none.
    pub fn load_or_create(&self) -> io::Result<String> {
        if let Some(token) = self.read()? {
            return Ok(token);
        }
        let token = random_token()?;
        let written = self.write_beside(&token)?;
        // Put in place only if none is there: two relays starting at once
        // keep the first one's token.
        let linked = fs::hard_link(&written, &self.path);
        let _ = fs::remove_file(&written);
        match linked {
            Ok(()) => Ok(token),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match self.read()? {
                Some(theirs) => Ok(theirs),
                // A file there that is no token: replaced.
                None => self.renew_with(token),
            },
            // A file system without hard links: renamed into place.
            Err(_) => self.renew_with(token),
        }
    }

    /// Writes a new token over the old one, which no longer opens anything.
    pub fn renew(&self) -> io::Result<String> {
        self.renew_with(random_token()?)
    }

    fn renew_with(&self, token: String) -> io::Result<String> {
        let written = self.write_beside(&token)?;
        let renamed = rename_retrying(&written, &self.path);
        if renamed.is_err() {
            let _ = fs::remove_file(&written);
        }
        renamed.map(|()| token)
    }

    /// A new private file beside the token file holding `token`.
    fn write_beside(&self, token: &str) -> io::Result<PathBuf> {
        platform::create_private_dir(self.folder())?;
        let name = format!(".{TOKEN_FILE}.{}.{}", std::process::id(), random_token()?);
        let path = self.folder().join(name);
        let mut file = platform::private_file(&path)?;
        let written = file
            .write_all(format!("{token}\n").as_bytes())
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        Ok(path)
    }
}

/// Renames `from` over `to`; on Windows, where a reader holding `to` open
/// refuses it for a moment, tries again for up to a second.
fn rename_retrying(from: &Path, to: &Path) -> io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match fs::rename(from, to) {
            Err(e) if platform::is_file_busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own under the system's temporary folder.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "forza-relay-state-{name}-{}-{}",
            std::process::id(),
            random_token().unwrap()
        ));
        dir.join("nested")
    }

    #[test]
    fn tokens_are_32_hex_digits_and_differ() {
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert!(is_token(&a), "{a}");
        assert_ne!(a, b);
        assert!(!is_token("abc"));
        assert!(!is_token(&"g".repeat(32)));
    }

    #[test]
    fn a_token_is_kept_until_renewed_and_the_file_is_private() {
        let folder = scratch("kept");
        let file = TokenFile::in_folder(&folder);
        assert_eq!(file.read().unwrap(), None);
        let first = file.load_or_create().unwrap();
        assert_eq!(file.load_or_create().unwrap(), first, "kept");
        assert_eq!(file.read().unwrap().as_deref(), Some(first.as_str()));
        let second = file.renew().unwrap();
        assert_ne!(second, first);
        assert_eq!(file.load_or_create().unwrap(), second);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(file.path()), 0o600);
            assert_eq!(mode(&folder), 0o700);
        }
        // Nothing left beside it.
        let names: Vec<_> = fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [TOKEN_FILE]);
        let _ = fs::remove_dir_all(folder.parent().unwrap());
    }

    #[test]
    fn a_file_that_holds_no_token_is_replaced() {
        let folder = scratch("bad");
        fs::create_dir_all(&folder).unwrap();
        let file = TokenFile::in_folder(&folder);
        fs::write(file.path(), "not a token\n").unwrap();
        assert_eq!(file.read().unwrap(), None);
        let token = file.load_or_create().unwrap();
        assert_eq!(file.read().unwrap(), Some(token));
        let _ = fs::remove_dir_all(folder.parent().unwrap());
    }
}
