//! `forza-relay autostart on|off|status`: start the relay at login.
//!
//! Only the user's own files are touched: on Linux a systemd user unit
//! (`$XDG_CONFIG_HOME/systemd/user/forza-relay.service`), or an XDG autostart
//! entry (`$XDG_CONFIG_HOME/autostart/forza-relay.desktop`) where there is no
//! systemd user session; on macOS a LaunchAgent
//! (`~/Library/LaunchAgents/net.forza-relay.plist`); on Windows the current
//! user's Run key. Every file starts with [`MARKER`], and `off` removes only a
//! file that does. The texts are built here, on every platform, so that each is
//! tested everywhere; the per-OS files do the writing.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

#[cfg_attr(windows, path = "windows.rs")]
#[cfg_attr(target_os = "macos", path = "macos.rs")]
#[cfg_attr(all(not(windows), not(target_os = "macos")), path = "linux.rs")]
mod imp;

// The Run key holds no file: Windows needs none of these.
#[cfg(not(windows))]
mod files;

pub use imp::{off, on, status};

/// The first line of every file `autostart on` writes.
pub const MARKER: &str =
    "Written by `forza-relay autostart on`; `forza-relay autostart off` removes it.";

/// The name of the unit, desktop entry, agent and Run value.
pub const NAME: &str = "forza-relay";

/// Set (to anything) to write and remove the systemd unit without calling
/// `systemctl --user` (tests, or a user who enables it by hand).
pub const NO_SYSTEMCTL_ENV: &str = "FORZA_RELAY_NO_SYSTEMCTL";

/// What `autostart` is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start at login.
    On,
    /// Stop starting at login.
    Off,
    /// Say whether it starts at login.
    Status,
}

impl FromStr for Action {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "on" => Ok(Action::On),
            "off" => Ok(Action::Off),
            "status" => Ok(Action::Status),
            _ => Err(format!("{text:?} is not on, off or status")),
        }
    }
}

/// The command started at login: this program running a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The program, an absolute path.
    pub exe: PathBuf,
    /// The configuration file, an absolute path.
    pub config: PathBuf,
}

impl Launch {
    /// This program running `config` (made absolute; it must exist).
    pub fn new(config: &Path) -> io::Result<Self> {
        let config = std::fs::canonicalize(config)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", config.display())))?;
        Ok(Launch {
            exe: std::env::current_exe()?,
            config: strip_verbatim(config),
        })
    }

    /// The arguments after the program.
    fn args(&self) -> [String; 3] {
        [
            "run".to_owned(),
            "--config".to_owned(),
            self.config.display().to_string(),
        ]
    }

    /// The folder the relay starts in: the configuration's.
    pub fn folder(&self) -> &Path {
        self.config.parent().unwrap_or(Path::new("/"))
    }
}

/// `canonicalize` on Windows gives `\\?\C:\…`, which some launchers refuse.
fn strip_verbatim(path: PathBuf) -> PathBuf {
    match path.to_str().and_then(|p| p.strip_prefix(r"\\?\")) {
        Some(plain) if !plain.starts_with("UNC\\") => PathBuf::from(plain),
        _ => path,
    }
}

/// One thing `autostart on` wrote, as it prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Where: a file path, or the registry value's full name.
    pub place: String,
    /// Exactly what was written there.
    pub contents: String,
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wrote {}:\n{}", self.place, self.contents.trim_end())
    }
}

/// A systemd unit `ExecStart=` word: quoted, with `\`, `"` escaped and `%`
/// doubled (systemd.service(5), systemd.unit(5) specifiers).
fn systemd_word(word: &str) -> String {
    let escaped = word
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    format!("\"{escaped}\"")
}

/// The systemd user unit.
pub fn unit_text(launch: &Launch) -> String {
    let command: Vec<String> = std::iter::once(launch.exe.display().to_string())
        .chain(launch.args())
        .map(|w| systemd_word(&w))
        .collect();
    format!(
        "# {MARKER}\n\
         [Unit]\n\
         Description=forza-relay: Forza Data Out telemetry to every tool\n\
         Wants=network-online.target\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         ExecStart={}\n\
         WorkingDirectory={}\n\
         Restart=on-failure\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        command.join(" "),
        launch.folder().display().to_string().replace('%', "%%"),
    )
}

/// A desktop entry `Exec=` argument: quoted, with `"`, `` ` ``, `$` and `\`
/// escaped, and `%` doubled (Desktop Entry Specification, "The Exec key").
fn desktop_word(word: &str) -> String {
    let mut quoted = String::from("\"");
    for c in word.chars() {
        match c {
            '"' | '`' | '$' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            '%' => quoted.push_str("%%"),
            _ => quoted.push(c),
        }
    }
    quoted.push('"');
    // The file format escapes backslashes once more.
    quoted.replace('\\', "\\\\")
}

/// The XDG autostart desktop entry.
pub fn desktop_text(launch: &Launch) -> String {
    let command: Vec<String> = std::iter::once(launch.exe.display().to_string())
        .chain(launch.args())
        .map(|w| desktop_word(&w))
        .collect();
    format!(
        "# {MARKER}\n\
         [Desktop Entry]\n\
         Type=Application\n\
         Name=forza-relay\n\
         Comment=Forza Data Out telemetry to every tool\n\
         Exec={}\n\
         Path={}\n\
         Terminal=false\n\
         X-GNOME-Autostart-enabled=true\n",
        command.join(" "),
        launch.folder().display()
    )
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The macOS LaunchAgent property list.
pub fn plist_text(launch: &Launch) -> String {
    let arguments: String = std::iter::once(launch.exe.display().to_string())
        .chain(launch.args())
        .map(|w| format!("        <string>{}</string>\n", xml_escape(&w)))
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!-- {MARKER} -->\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20   <key>Label</key>\n\
         \x20   <string>net.forza-relay</string>\n\
         \x20   <key>ProgramArguments</key>\n\
         \x20   <array>\n\
         {arguments}\
         \x20   </array>\n\
         \x20   <key>WorkingDirectory</key>\n\
         \x20   <string>{}</string>\n\
         \x20   <key>RunAtLoad</key>\n\
         \x20   <true/>\n\
         </dict>\n\
         </plist>\n",
        xml_escape(&launch.folder().display().to_string())
    )
}

/// The Run key's value: a command line, each part quoted as Windows'
/// `CommandLineToArgvW` reads it (the paths hold no `"`).
pub fn run_value(launch: &Launch) -> String {
    std::iter::once(launch.exe.display().to_string())
        .chain(launch.args())
        .map(|w| {
            if w.contains(' ') || w.contains('\t') || w.is_empty() {
                // A backslash before the closing quote would escape it.
                let tail = w.len() - w.trim_end_matches('\\').len();
                format!("\"{w}{}\"", "\\".repeat(tail))
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(exe: &str, config: &str) -> Launch {
        Launch {
            exe: PathBuf::from(exe),
            config: PathBuf::from(config),
        }
    }

    #[test]
    fn the_unit_quotes_paths_and_doubles_percent() {
        let text = unit_text(&launch(
            "/opt/forza relay/forza-relay",
            "/home/sam/50%/relay.toml",
        ));
        assert!(text.starts_with(&format!("# {MARKER}\n")), "{text}");
        assert!(
            text.contains(
                "ExecStart=\"/opt/forza relay/forza-relay\" \"run\" \"--config\" \
                 \"/home/sam/50%%/relay.toml\"\n"
            ),
            "{text}"
        );
        assert!(text.contains("WorkingDirectory=/home/sam/50%%\n"), "{text}");
        assert!(text.contains("WantedBy=default.target\n"));
    }

    #[test]
    fn the_desktop_entry_escapes_what_the_spec_reserves() {
        let text = desktop_text(&launch("/opt/fr/forza-relay", "/home/sam/$x/relay.toml"));
        assert!(
            text.contains(
                "Exec=\"/opt/fr/forza-relay\" \"run\" \"--config\" \"/home/sam/\\\\$x/relay.toml\"\n"
            ),
            "{text}"
        );
        assert!(text.contains("Path=/home/sam/$x\n"), "{text}");
    }

    #[test]
    fn the_plist_lists_each_argument_escaped() {
        let text = plist_text(&launch(
            "/Applications/forza-relay",
            "/Users/sam/a&b/relay.toml",
        ));
        assert!(text.contains("<string>/Applications/forza-relay</string>\n        <string>run</string>\n        <string>--config</string>\n        <string>/Users/sam/a&amp;b/relay.toml</string>\n"), "{text}");
        assert!(text.contains("<key>RunAtLoad</key>\n    <true/>"), "{text}");
        assert!(text.contains(MARKER));
    }

    #[test]
    fn the_run_value_quotes_paths_with_spaces() {
        let value = run_value(&launch(
            r"C:\Program Files\forza-relay\forza-relay.exe",
            r"C:\Users\sam\forza-relay.toml",
        ));
        assert_eq!(
            value,
            r#""C:\Program Files\forza-relay\forza-relay.exe" run --config C:\Users\sam\forza-relay.toml"#
        );
    }

    #[test]
    fn actions_parse_and_bad_ones_are_named() {
        assert_eq!("ON".parse(), Ok(Action::On));
        assert_eq!("status".parse(), Ok(Action::Status));
        assert_eq!(
            "start".parse::<Action>(),
            Err("\"start\" is not on, off or status".to_owned())
        );
    }
}
