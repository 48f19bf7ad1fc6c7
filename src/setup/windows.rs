//! Windows: `doctor`'s checks of loopback isolation and the firewall, running
//! Windows' own tools and reading their output with src/setup/windows_text.rs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use super::doctor::Finding;
use super::windows_text::{
    exempt_command, exempt_names, firewall_command, firewall_rules, is_exempt, FIREWALL_SCRIPT,
    STORE_GAMES,
};

/// The loopback exemption of every installed Microsoft Store Forza game, and,
/// when listening beyond loopback, whether the firewall lets UDP in.
pub fn checks(listen: SocketAddr) -> Vec<Finding> {
    let mut findings = loopback();
    if !listen.ip().is_loopback() {
        findings.push(firewall(listen.port()));
    }
    findings
}

/// A Store app keeps its per-user data in %LOCALAPPDATA%\Packages\FAMILY: the
/// folder exists once the game is installed for this user.
fn installed(family: &str) -> bool {
    std::env::var_os("LOCALAPPDATA")
        .map(|dir| PathBuf::from(dir).join("Packages").join(family))
        .is_some_and(|p| p.is_dir())
}

fn loopback() -> Vec<Finding> {
    let games: Vec<(&str, &str)> = STORE_GAMES
        .iter()
        .copied()
        .filter(|(_, family)| installed(family))
        .collect();
    if games.is_empty() {
        return vec![Finding::ok(
            "loopback_exemption",
            "no Microsoft Store Forza game is installed for this user (Steam games need no \
             loopback exemption)",
        )];
    }
    let output = match Command::new("CheckNetIsolation")
        .args(["LoopbackExempt", "-s"])
        .output()
    {
        Ok(output) => output,
        Err(e) => {
            return vec![Finding::unknown(
                "loopback_exemption",
                format!("cannot run CheckNetIsolation to see the loopback exemptions: {e}"),
            )]
        }
    };
    let exempt = exempt_names(&String::from_utf8_lossy(&output.stdout));
    games
        .into_iter()
        .map(|(game, family)| {
            if is_exempt(&exempt, family) {
                Finding::ok(
                    "loopback_exemption",
                    format!(
                        "{game} (Microsoft Store) may send to 127.0.0.1: it is loopback exempt"
                    ),
                )
            } else {
                Finding::problem(
                    "loopback_exemption",
                    format!(
                        "{game} (Microsoft Store) is not exempt from loopback isolation: it cannot \
                         send to 127.0.0.1 on this computer"
                    ),
                    format!(
                        "in a Command Prompt run as administrator: {}, then restart the game",
                        exempt_command(family)
                    ),
                )
            }
        })
        .collect()
}

fn firewall(port: u16) -> Finding {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let output = match Command::new("powershell")
        .args(["-NoProfile", "-NonInteractive", "-Command", FIREWALL_SCRIPT])
        .output()
    {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            return Finding::unknown(
                "firewall",
                format!(
                    "cannot read the firewall rules: {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            )
        }
        Err(e) => {
            return Finding::unknown(
                "firewall",
                format!("cannot run PowerShell to read the firewall rules: {e}"),
            )
        }
    };
    match firewall_rules(&String::from_utf8_lossy(&output.stdout)) {
        Err(e) => Finding::unknown("firewall", format!("cannot read the firewall rules: {e}")),
        Ok(rules) => match rules.iter().find(|r| r.allows(port, &exe)) {
            Some(rule) => Finding::ok(
                "firewall",
                format!(
                    "the firewall lets UDP reach port {port} (rule {:?})",
                    rule.name
                ),
            ),
            None => Finding::problem(
                "firewall",
                format!(
                    "no enabled inbound firewall rule lets UDP reach port {port}: an Xbox or \
                     another computer cannot send here"
                ),
                format!(
                    "allow forza-relay when Windows asks, or in a Command Prompt run as \
                     administrator: {}",
                    firewall_command(port)
                ),
            ),
        },
    }
}
