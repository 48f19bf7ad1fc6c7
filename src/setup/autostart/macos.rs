//! macOS: a LaunchAgent in `~/Library/LaunchAgents`, loaded at the next login.

use std::io;
use std::path::PathBuf;

use super::files::{describe_file, remove_file, write_file};
use super::{plist_text, Launch, Start};

fn agent_path() -> io::Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|home| PathBuf::from(home).join("Library/LaunchAgents/net.forza-relay.plist"))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "HOME is not set"))
}

/// Writes the agent, which launchd loads at the next login.
pub fn on(launch: &Launch, _start: Start) -> io::Result<Vec<String>> {
    let path = agent_path()?;
    let written = write_file(&path, &plist_text(launch))?;
    Ok(vec![
        written.to_string(),
        format!(
            "it starts at the next login; to start it now: launchctl load {}",
            path.display()
        ),
    ])
}

/// Removes the agent.
pub fn off() -> io::Result<Vec<String>> {
    Ok(remove_file(&agent_path()?)?
        .map(|removed| vec![removed])
        .unwrap_or_else(|| vec!["off: forza-relay was not set to start at login".to_owned()]))
}

/// Whether the agent is there.
pub fn status() -> io::Result<Vec<String>> {
    let path = agent_path()?;
    Ok(vec![describe_file(&path).unwrap_or_else(
        || match std::fs::read_to_string(&path) {
            Ok(_) => format!("on: {} starts it at login", path.display()),
            Err(_) => "off: forza-relay does not start at login".to_owned(),
        },
    )])
}
