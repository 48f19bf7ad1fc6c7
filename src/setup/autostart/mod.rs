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
//!
//! A path with a control character (a line break in a folder's name) is
//! refused: no format here can hold one without it becoming lines of their own
//! (issue 24: an `ExecStartPre=` line, in a hostile test). Every other
//! character is written as each format reads it back: quoted, `\` and `"`
//! escaped, `$` doubled and `%` doubled in a systemd unit; quoted and escaped
//! twice (the Exec key, then the file's strings) in a desktop entry, whose
//! `Path=` escapes `\`; XML-escaped in a property list; quoted as Windows'
//! `CommandLineToArgvW` reads it in the Run key. (The `auto-launch` crate does
//! all three platforms, but writes a unit's `ExecStart=` unquoted and
//! unescaped and its files under `~/.config` whatever `XDG_CONFIG_HOME` says;
//! the Run key is `winreg`'s.)

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

pub use imp::{off, status};

/// When the relay first starts after `autostart on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Now as well, where the platform can (a systemd user unit): the command.
    Now,
    /// At the next login only: the web page's control, whose relay runs
    /// already (a second one would find its port taken).
    AtNextLogin,
}

/// Starts `launch` at login (see [`Start`]); says what it wrote and did.
pub fn on(launch: &Launch, start: Start) -> io::Result<Vec<String>> {
    launch.check()?;
    imp::on(launch, start)
}

/// Whether the relay starts at login, by what [`status`] says.
pub fn is_on(said: &[String]) -> bool {
    said.iter().any(|line| line.starts_with("on:"))
}

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

/// The Windows starter beside forza-relay.exe: a program with no console
/// window that starts the relay in the tray (src/bin/forza-relayw.rs).
pub const WINDOWS_STARTER: &str = "forza-relayw.exe";

/// The program a login starts: on Windows, [`WINDOWS_STARTER`] beside `exe`
/// when it is there (as in the zip and the installed folder), so that no
/// console window opens at each login; `exe` itself otherwise.
fn started_at_login(exe: PathBuf) -> PathBuf {
    let starter = exe.with_file_name(WINDOWS_STARTER);
    if cfg!(windows) && starter.is_file() {
        starter
    } else {
        exe
    }
}

impl Launch {
    /// This program running `config` (made absolute; it must exist).
    pub fn new(config: &Path) -> io::Result<Self> {
        let config = std::fs::canonicalize(config)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", config.display())))?;
        let launch = Launch {
            exe: started_at_login(std::env::current_exe()?),
            config: strip_verbatim(config),
        };
        launch.check()?;
        Ok(launch)
    }

    /// Refuses a path that is not text, or holds a control character.
    fn check(&self) -> io::Result<()> {
        for (what, path) in [
            ("the program", &self.exe),
            ("the configuration", &self.config),
        ] {
            let Some(text) = path.to_str() else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{what}'s path {} is not valid Unicode: move it to a folder whose name is",
                        path.display()
                    ),
                ));
            };
            if let Some(c) = text.chars().find(|c| c.is_control()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{what}'s path {text:?} holds a control character ({c:?}), which a \
                         login entry can't hold: move it to a folder whose name has none"
                    ),
                ));
            }
        }
        Ok(())
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

/// A systemd unit `ExecStart=` argument: quoted, with `\\`, `"` escaped, `$`
/// doubled (no variable is expanded) and `%` doubled (no specifier)
/// (systemd.service(5) "Command lines", systemd.unit(5) "Specifiers").
fn systemd_word(word: &str) -> String {
    let escaped = word
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('$', "$$")
        .replace('%', "%%");
    format!("\"{escaped}\"")
}

/// A systemd unit `ExecStart=`'s program: quoted with `%` doubled. systemd
/// takes its `$` as it is (no variable there), and refuses a program whose
/// path holds a `\\` or a quote ("Executable name contains special
/// characters", systemd 252): those are refused here, saying so.
fn systemd_program(path: &str) -> io::Result<String> {
    if path.contains(['\\', '"', '\'']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "systemd can't start a program whose path holds a backslash or a quote \
                 ({path:?}): move forza-relay to a folder whose name has none"
            ),
        ));
    }
    Ok(format!("\"{}\"", path.replace('%', "%%")))
}

/// The systemd user unit; an error for a program systemd can't start.
pub fn unit_text(launch: &Launch) -> io::Result<String> {
    let program = systemd_program(&launch.exe.display().to_string())?;
    let command: Vec<String> = std::iter::once(program)
        .chain(launch.args().iter().map(|w| systemd_word(w)))
        .collect();
    Ok(format!(
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
        // A path as it is (no variable, no unquoting), but its specifiers.
        launch.folder().display().to_string().replace('%', "%%"),
    ))
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

/// A desktop entry string value: `\` escaped (Desktop Entry Specification,
/// "Possible value types"), a leading space kept as `\s`.
fn desktop_string(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\");
    match escaped.strip_prefix(' ') {
        Some(rest) => format!("\\s{rest}"),
        None => escaped,
    }
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
        desktop_string(&launch.folder().display().to_string())
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

/// One argument as Windows' `CommandLineToArgvW` (and the C runtime) read it
/// back: quoted when it has a space, a tab, a quote or nothing; inside the
/// quotes a `"` is `\"`, and the backslashes before one (or before the
/// closing quote) are doubled.
fn windows_word(word: &str) -> String {
    if !word.is_empty() && !word.contains([' ', '\t', '"']) {
        return word.to_owned();
    }
    let mut quoted = String::from("\"");
    let mut backslashes = 0;
    for c in word.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                quoted.push_str(&"\\".repeat(2 * backslashes + 1));
                quoted.push('"');
                backslashes = 0;
            }
            _ => {
                quoted.push_str(&"\\".repeat(backslashes));
                quoted.push(c);
                backslashes = 0;
            }
        }
    }
    quoted.push_str(&"\\".repeat(2 * backslashes));
    quoted.push('"');
    quoted
}

/// The Run key's value: a command line, each part quoted as Windows'
/// `CommandLineToArgvW` reads it ([`windows_word`]).
pub fn run_value(launch: &Launch) -> String {
    std::iter::once(launch.exe.display().to_string())
        .chain(launch.args())
        .map(|w| windows_word(&w))
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
        ))
        .unwrap();
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
    fn on_windows_the_login_starts_the_starter_beside_the_program_when_it_is_there() {
        let dir = std::env::temp_dir().join(format!("forza-relay-starter-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("forza-relay.exe");
        std::fs::write(&exe, b"").unwrap();
        assert_eq!(started_at_login(exe.clone()), exe, "no starter beside it");
        std::fs::write(dir.join(WINDOWS_STARTER), b"").unwrap();
        let expected = if cfg!(windows) {
            dir.join(WINDOWS_STARTER)
        } else {
            exe.clone()
        };
        assert_eq!(started_at_login(exe), expected);
        std::fs::remove_dir_all(&dir).unwrap();
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
    fn the_unit_doubles_dollar_signs_so_no_variable_is_expanded() {
        let text = unit_text(&launch("/opt/$x/forza-relay", r"/home/$HOME/a\b/r.toml")).unwrap();
        assert!(
            text.contains(
                r#"ExecStart="/opt/$x/forza-relay" "run" "--config" "/home/$$HOME/a\\b/r.toml""#
            ),
            "{text}"
        );
        assert!(
            text.contains("WorkingDirectory=/home/$HOME/a\\b\n"),
            "{text}"
        );
        let e = unit_text(&launch(r"/opt/a\b/forza-relay", "/r.toml")).unwrap_err();
        assert!(e.to_string().contains("backslash"), "{e}");
    }

    #[test]
    fn the_desktop_entry_escapes_a_backslash_in_its_path() {
        let text = desktop_text(&launch("/opt/fr/forza-relay", r"/home/a\b/relay.toml"));
        assert!(text.contains("Path=/home/a\\\\b\n"), "{text}");
        // In Exec: escaped for the quotes, then for the file's strings.
        assert!(text.contains(r#""/home/a\\\\b/relay.toml""#), "{text}");
    }

    #[test]
    fn a_path_with_a_control_character_is_refused() {
        for bad in [
            "/home/sam/a\nExecStartPre=/bin/sh/r.toml",
            "/home/sam/tab\there/r.toml",
        ] {
            let e = launch("/opt/fr/forza-relay", bad).check().unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains("control character"), "{e}");
        }
        assert!(launch("/opt/fr/forza-relay", "/home/$x/a\\b/r.toml")
            .check()
            .is_ok());
    }

    #[test]
    fn windows_words_are_quoted_as_command_line_to_argv_reads_them() {
        assert_eq!(windows_word("run"), "run");
        assert_eq!(windows_word(""), "\"\"");
        assert_eq!(windows_word(r"C:\a b\"), r#""C:\a b\\""#);
        assert_eq!(windows_word(r#"a"b"#), r#""a\"b""#);
        assert_eq!(windows_word(r#"a\"b c"#), r#""a\\\"b c""#);
        assert_eq!(windows_word(r"C:\x\y.toml"), r"C:\x\y.toml");
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
