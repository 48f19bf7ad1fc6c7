//! Watching the configuration file: its folder, and its target's folder when
//! it is a symbolic link, for changes to either name; and what can change
//! while it is being written (see the module documentation of [`super`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::SystemTime;

use notify::event::{EventKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

use super::Event;

/// The folder holding `path` (`.` for a bare file name).
fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Watches the folder of `path`, and of its target when it is a symbolic link
/// to another folder, sending an [`Event`] for each change to either name.
/// Returns the watcher and how to name what is watched.
pub(super) fn watch_file(
    path: &Path,
    tx: mpsc::Sender<Event>,
) -> notify::Result<(RecommendedWatcher, String)> {
    let mut names: Vec<OsString> = path
        .file_name()
        .map(ToOwned::to_owned)
        .into_iter()
        .collect();
    let mut folders = vec![folder_of(path)];
    let mut described = path.display().to_string();
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if let Some(target) = std::fs::canonicalize(path).ok().filter(|_| is_link) {
        described = format!("{described} (a link to {})", target.display());
        names.extend(target.file_name().map(ToOwned::to_owned));
        let folder = folder_of(&target);
        let same = |f: &PathBuf| std::fs::canonicalize(f).is_ok_and(|f| f == folder);
        if !folders.iter().any(same) {
            folders.push(folder);
        }
    }
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let event = match event {
            // Reading the file (ours included) is not a change.
            Ok(e) if matches!(e.kind, EventKind::Access(_)) => return,
            Ok(e)
                if !e.paths.iter().any(|p| {
                    p.file_name()
                        .is_some_and(|n| names.iter().any(|ours| ours == n))
                }) =>
            {
                return
            }
            Ok(e)
                if matches!(
                    e.kind,
                    EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(_))
                ) =>
            {
                Event::Replaced
            }
            // A change, or an error from the watcher: look at the file, to be safe.
            _ => Event::Written,
        };
        let _ = tx.send(event);
    })?;
    for folder in &folders {
        watcher.watch(folder, RecursiveMode::NonRecursive)?;
    }
    Ok((watcher, described))
}

/// What can change while a file is being written: its size and modification
/// time (`None` when it can't be looked at).
pub(super) fn stamp(path: &Path) -> Option<(u64, Option<SystemTime>)> {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}
