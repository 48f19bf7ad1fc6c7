//! The page's token (issue 30): kept across starts in the user's state folder
//! ([`crate::state`]), so that a phone's bookmark keeps working, and read
//! again on every check, so that a new one (`forza-relay web new-token`, or
//! the page's own button) shuts the old one out at once. Where the folder
//! can't be used, a token for this run only.

use std::io;
use std::sync::Mutex;

use log::warn;

use super::lock;
use crate::state::{self, TokenFile};

/// The session's token.
pub struct PageToken {
    /// Where it is kept; `None`: in memory only, for this run.
    file: Option<TokenFile>,
    /// The last one read (or made).
    current: Mutex<String>,
}

impl PageToken {
    /// The token kept in `file` (made there if it holds none); with no file,
    /// or one that can't be used (said in the log), a new one for this run.
    pub fn new(file: Option<TokenFile>) -> PageToken {
        let kept = file.as_ref().map(|f| (f, f.load_or_create()));
        let (file, token) = match kept {
            Some((f, Ok(token))) => (Some(f.clone()), token),
            Some((f, Err(e))) => {
                warn!(
                    "the page's token can't be kept in {} ({e}): a new one each start",
                    f.path().display()
                );
                (None, random())
            }
            None => (None, random()),
        };
        PageToken {
            file,
            current: Mutex::new(token),
        }
    }

    /// The token now: the file's when it holds one (a new token written there
    /// by another forza-relay counts at once), else the last one known.
    pub fn current(&self) -> String {
        let read = self.file.as_ref().and_then(|f| f.read().ok().flatten());
        let mut current = lock(&self.current);
        if let Some(token) = read {
            if *current != token {
                *current = token;
            }
        }
        current.clone()
    }

    /// Whether `given` is the token now (compared without stopping at the
    /// first difference).
    pub fn matches(&self, given: &str) -> bool {
        let token = self.current();
        token.len() == given.len()
            && token
                .bytes()
                .zip(given.bytes())
                .fold(0u8, |acc, (x, y)| acc | (x ^ y))
                == 0
    }

    /// A new token, kept; the old one opens nothing from now on.
    pub fn renew(&self) -> io::Result<String> {
        let token = match &self.file {
            Some(f) => f.renew()?,
            None => state::random_token()?,
        };
        lock(&self.current).clone_from(&token);
        Ok(token)
    }

    /// Where it is kept, if in a file.
    pub fn file(&self) -> Option<&TokenFile> {
        self.file.as_ref()
    }
}

/// A token for this run: from the OS's random source, or (if that ever
/// fails) from the standard library's hasher keys, which it seeds.
fn random() -> String {
    state::random_token().unwrap_or_else(|e| {
        warn!("the OS's random source failed ({e}): the page's token comes from the hasher keys");
        use std::hash::{BuildHasher as _, Hasher as _};
        (0..2u64)
            .map(|i| {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u64(i);
                format!("{:016x}", h.finish())
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_written_to_the_file_by_another_program_counts_at_once() {
        let folder = std::env::temp_dir().join(format!(
            "forza-relay-page-token-{}-{}",
            std::process::id(),
            state::random_token().unwrap()
        ));
        let file = TokenFile::in_folder(&folder);
        let token = PageToken::new(Some(file.clone()));
        let first = token.current();
        assert!(token.matches(&first));
        // `forza-relay web new-token` from another process.
        let second = file.renew().unwrap();
        assert!(!token.matches(&first), "the old one opens nothing");
        assert!(token.matches(&second));
        let third = token.renew().unwrap();
        assert_eq!(file.read().unwrap(), Some(third.clone()), "kept");
        assert!(!token.matches(&second));
        let _ = std::fs::remove_dir_all(folder);
    }

    #[test]
    fn without_a_file_the_token_is_this_run_s() {
        let token = PageToken::new(None);
        let first = token.current();
        assert!(state::is_token(&first));
        assert!(token.matches(&first));
        let second = token.renew().unwrap();
        assert!(!token.matches(&first));
        assert!(token.matches(&second));
    }
}
