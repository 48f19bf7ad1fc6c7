//! Writing and removing the files `autostart on` writes (Linux and macOS).

use std::io;
use std::path::Path;

use super::{Written, MARKER};

/// Writes `contents` to `path` (making its folder), refusing to replace a file
/// that `autostart on` did not write.
pub(super) fn write_file(path: &Path, contents: &str) -> io::Result<Written> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        if !existing.contains(MARKER) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and was not written by forza-relay: remove it or edit it by hand",
                    path.display()
                ),
            ));
        }
    }
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::write(path, contents)?;
    Ok(Written {
        place: path.display().to_string(),
        contents: contents.to_owned(),
    })
}

/// Removes `path` if `autostart on` wrote it; says what happened.
pub(super) fn remove_file(path: &Path) -> io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.contains(MARKER) => {
            std::fs::remove_file(path)?;
            Ok(Some(format!("removed {}", path.display())))
        }
        Ok(_) => Ok(Some(format!(
            "left {}: forza-relay did not write it",
            path.display()
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// `Some(description)` when `path` is a file `autostart on` wrote.
pub(super) fn describe_file(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.contains(MARKER).then(|| {
        let command = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("ExecStart=")
                    .or_else(|| l.strip_prefix("Exec="))
            })
            .unwrap_or("");
        format!("on: {} starts at login: {command}", path.display())
    })
}
