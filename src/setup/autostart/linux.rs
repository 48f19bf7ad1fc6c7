//! Linux (and other Unix desktops): a systemd user unit where the user has a
//! systemd session, else an XDG autostart entry, both under
//! `$XDG_CONFIG_HOME` (default `~/.config`).

use std::io;
use std::path::PathBuf;
use std::process::Command;

use super::files::{describe_file, remove_file, write_file};
use super::{desktop_text, unit_text, Launch, Start, Written, NAME, NO_SYSTEMCTL_ENV};

fn config_home() -> io::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|home| PathBuf::from(home).join(".config"))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "neither XDG_CONFIG_HOME nor HOME is set",
            )
        })
}

fn unit_path() -> io::Result<PathBuf> {
    Ok(config_home()?
        .join("systemd/user")
        .join(format!("{NAME}.service")))
}

fn desktop_path() -> io::Result<PathBuf> {
    Ok(config_home()?
        .join("autostart")
        .join(format!("{NAME}.desktop")))
}

/// A systemd user instance runs for this user: it keeps its private socket in
/// `$XDG_RUNTIME_DIR/systemd`.
fn systemd_session() -> bool {
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .is_some_and(|dir| PathBuf::from(dir).join("systemd").is_dir())
}

/// Runs `systemctl --user ARGS` unless [`NO_SYSTEMCTL_ENV`] is set; says what
/// it ran (or skipped) and how that went.
fn systemctl(args: &[&str]) -> String {
    let shown = format!("systemctl --user {}", args.join(" "));
    if std::env::var_os(NO_SYSTEMCTL_ENV).is_some() {
        return format!("skipped `{shown}` ({NO_SYSTEMCTL_ENV} is set)");
    }
    match Command::new("systemctl").arg("--user").args(args).status() {
        Ok(s) if s.success() => format!("ran `{shown}`"),
        Ok(s) => format!("`{shown}` failed ({s}): run it yourself to see why"),
        Err(e) => format!("could not run `{shown}`: {e}"),
    }
}

/// Writes the unit (and enables it, starting it now with [`Start::Now`]) or
/// the desktop entry.
pub fn on(launch: &Launch, start: Start) -> io::Result<Vec<String>> {
    let unit = format!("{NAME}.service");
    if systemd_session() {
        let written: Written = write_file(&unit_path()?, &unit_text(launch)?)?;
        let enable = match start {
            Start::Now => systemctl(&["enable", "--now", &unit]),
            Start::AtNextLogin => systemctl(&["enable", &unit]),
        };
        Ok(vec![
            written.to_string(),
            systemctl(&["daemon-reload"]),
            enable,
        ])
    } else {
        let written = write_file(&desktop_path()?, &desktop_text(launch))?;
        Ok(vec![
            written.to_string(),
            "no systemd user session: the desktop starts it at the next login".to_owned(),
        ])
    }
}

/// Disables and removes the unit, and removes the desktop entry: whichever
/// `on` wrote.
pub fn off() -> io::Result<Vec<String>> {
    let mut said = Vec::new();
    let unit_path = unit_path()?;
    if describe_file(&unit_path).is_some() && systemd_session() {
        said.push(systemctl(&["disable", "--now", &format!("{NAME}.service")]));
    }
    for path in [unit_path, desktop_path()?] {
        said.extend(remove_file(&path)?);
    }
    if said.is_empty() {
        said.push("off: forza-relay was not set to start at login".to_owned());
    }
    Ok(said)
}

/// Which file starts it at login, if any.
pub fn status() -> io::Result<Vec<String>> {
    let found: Vec<String> = [unit_path()?, desktop_path()?]
        .iter()
        .filter_map(|p| describe_file(p))
        .collect();
    if found.is_empty() {
        Ok(vec!["off: forza-relay does not start at login".to_owned()])
    } else {
        Ok(found)
    }
}
