//! What each subcommand does, from its options — library types the binary
//! makes once from its command line — to its end. Each returns `Ok` or the
//! [`Failure`] to print, and stops on the [`Signals`] the program installed.
//! The relaying ones are an [`App`] (the runner, [`crate::app`]) and the
//! observers the command asks for: this module is the glue above the runner,
//! which knows nothing of the page, the dashboard or the demo.
//!
//! Here: `run`, `check` and `doctor`, and where their configuration comes
//! from ([`ConfigSource`]); `record` and `replay` in `capture.rs`; `simulate`
//! and `demo` in `simulate.rs`; `watch`, `export` and `dissector` in
//! `watch.rs`. `setup`, `doctor`'s checks and `autostart` are in
//! [`crate::setup::command`].

use std::io::{self, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;

use log::info;

use crate::app::observers::{Owning, Printer, Recording};
use crate::app::races::KeepingRaces;
use crate::app::{App, Failure, Signals};
use crate::capture::record;
use crate::config::{system_look_up, Config, ConfigError, Overrides, DEFAULT_FILE_NAME};
use crate::dashboard::live::LiveView;
use crate::net::socket::PortInUse;
use crate::numbers::Thousands;
use crate::owner::Owner;
use crate::relay::{Relay, StartError};
use crate::setup::running::{self, Beside};
use crate::web::Web;

mod capture;
mod simulate;
mod tray;
pub mod watch;

pub use crate::app::to_stdout;
pub use capture::{record, replay, RecordOptions, ReplayOptions};
pub use simulate::{demo, send_options, simulate};

/// What `forza-relay` prints when it finds no configuration.
pub const NO_CONFIG_HELP: &str = "\
forza-relay needs to know where to send the game's packets.

Quick start: forward to SimHub on this PC, and to a tool that wants FH5 packets:
  forza-relay run --to 127.0.0.1:8000 --to 127.0.0.1:5301,format=fh5

Or put a forza-relay.toml next to forza-relay (see config.example.toml), or
drop a .toml file onto forza-relay:
  [listen]
  addr = \"0.0.0.0:5400\"

  [[destination]]
  name = \"simhub\"
  addr = \"127.0.0.1:8000\"

Then, in the game's HUD/Gameplay settings, turn Data Out on, set Data Out IP
Address to this PC's address (127.0.0.1 when the game runs on this PC) and
Data Out IP Port to 5400.

\"forza-relay --help\" lists every option.";

/// Where the configuration of `run` and `check` comes from.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    /// A configuration file (`--config FILE`, or a `.toml` file given alone).
    pub file: Option<PathBuf>,
    /// `--to` destinations, instead of a file.
    pub to: Vec<String>,
    /// The other options, which override the file.
    pub overrides: Overrides,
}

/// Each problem of `e` on a line, under a heading, as the message of a bad
/// configuration.
fn bad_configuration(e: &ConfigError) -> Failure {
    let n = e.problems.len();
    let mut message = format!(
        "the configuration has {} problem{}:",
        Thousands(n as u64),
        if n == 1 { "" } else { "s" }
    );
    for p in &e.problems {
        message.push_str(&format!("\n  {}: {}", p.place, p.message));
    }
    Failure::usage(message)
}

/// Bad command-line options: one `error:` line each (exit code 2).
pub fn bad_options(e: &ConfigError) -> Failure {
    let lines: Vec<String> = e
        .problems
        .iter()
        .map(|p| format!("error: {}: {}", p.place, p.message))
        .collect();
    Failure::help(lines.join("\n"))
}

/// `forza-relay.toml` in the current folder, else next to the program (where a
/// Windows user who double-clicks it keeps it).
pub fn find_default_file() -> Option<PathBuf> {
    let here = PathBuf::from(DEFAULT_FILE_NAME);
    let beside_exe = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(DEFAULT_FILE_NAME)));
    std::iter::once(here)
        .chain(beside_exe)
        .find(|p| p.is_file())
}

/// Where `run` would listen, for a tool started without `--listen` (`watch`,
/// `export`, `record`): the `[listen]` of `forza-relay.toml` here or beside the
/// program, as `doctor` and `setup` read it (issue 30: `watch` listened on
/// 0.0.0.0:5400 in a folder whose file said otherwise). `None` with no file,
/// or with one whose `[listen]` can't be used, which one warning names; the
/// rest of the file is not read.
pub fn listen_of_default_file() -> Option<(std::net::SocketAddr, crate::config::Input)> {
    let path = find_default_file()?;
    match crate::config::listen_of_file(&path) {
        Ok((listen, input)) => {
            info!(
                "listening where {} says ([listen]: {listen}, {input})",
                path.display()
            );
            Some((listen, input))
        }
        Err(e) => {
            log::warn!(
                "{} can't be used ({}); listening on {} instead (--listen chooses)",
                path.display(),
                e.problems
                    .first()
                    .map_or_else(String::new, |p| format!("{}: {}", p.place, p.message)),
                crate::config::DEFAULT_LISTEN
            );
            None
        }
    }
}

/// The configuration of `setup`, with the file it came from (to reload).
fn load(setup: &ConfigSource) -> Result<(Config, Option<PathBuf>), Failure> {
    find(setup)?.ok_or_else(|| Failure::help(NO_CONFIG_HELP))
}

/// The configuration of `setup`, with the file it came from; `None` when it
/// names none and there is no default file.
fn find(setup: &ConfigSource) -> Result<Option<(Config, Option<PathBuf>)>, Failure> {
    let from_file = |path: PathBuf| {
        Config::from_file(&path, &setup.overrides)
            .map(|c| Some((c, Some(path))))
            .map_err(|e| bad_configuration(&e))
    };
    match (&setup.file, setup.to.is_empty()) {
        (Some(_), false) => Err(Failure::usage(
            "use either --config FILE or --to DEST, not both",
        )),
        (Some(path), true) => from_file(path.clone()),
        (None, false) => Config::from_args(&setup.to, &setup.overrides)
            .map(|c| Some((c, None)))
            .map_err(|e| bad_configuration(&e)),
        (None, true) => match find_default_file() {
            Some(path) => {
                info!("using {}", path.display());
                from_file(path)
            }
            None => Ok(None),
        },
    }
}

/// Why a command that listens (`record`, `watch`) could not start. When a
/// forza-relay holds its port and answers, how to do it beside that relay
/// instead of stopping it (issue 23).
pub(crate) fn listen_failure(e: &StartError, what: Beside) -> Failure {
    if let StartError::Listen { addr, source, .. } = e {
        if let Some(answer) = running::relay_on(*addr, source) {
            return Failure::start(format!(
                "cannot listen on {addr}: {}",
                running::beside(&answer, what)
            ));
        }
    }
    start_failure(e)
}

/// One instance (issue 32): a start whose listen port a running relay holds
/// (it answers the status query) says so in one line naming that relay and
/// its page, opens the page when it was double-clicked (no arguments), and
/// ends with 0, instead of failing on the port. `None`: no relay answered.
fn already_running(e: &StartError, double_clicked: bool) -> Option<Result<(), Failure>> {
    let StartError::Listen { addr, source, .. } = e else {
        return None;
    };
    let answer = running::relay_on(*addr, source)?;
    let link = running::page_link(&answer);
    let page = match &link {
        Some(link) => format!("its page is {link}"),
        None => "it serves no page ([web] addr in its configuration)".to_owned(),
    };
    info!(
        "forza-relay is already running (pid {}), listening on {}: {page}; nothing more to start",
        answer.pid, answer.listen
    );
    if let (true, Some(link)) = (double_clicked, &link) {
        crate::web::open::page_and_wait(link);
    }
    Some(Ok(()))
}

/// Why the relay could not start, a port in use naming the program that
/// holds it when this computer says (the socket table is `setup`'s, above
/// the relay, which words it without).
pub(crate) fn start_failure(e: &StartError) -> Failure {
    match e {
        StartError::Listen {
            addr,
            place,
            source,
        } => Failure::start(format!(
            "{place}: cannot listen on {addr}: {}",
            PortInUse::new(*addr, source).held_by(crate::setup::finder::blocker(*addr, source))
        )),
        e => Failure::start(e.to_string()),
    }
}

/// A command that printed its own outcome and ended with `code`.
pub fn exited(code: u8) -> Result<(), Failure> {
    match code {
        0 => Ok(()),
        code => Err(Failure {
            code,
            message: String::new(),
        }),
    }
}

/// `setup`: also asks for a running relay where the configuration `run`
/// would use here listens.
pub fn setup(mut options: crate::setup::command::SetupOptions) -> Result<(), Failure> {
    if options.config_listen.is_none() {
        options.config_listen = find_default_file()
            .and_then(|path| Config::from_file(&path, &Overrides::default()).ok())
            .map(|config| config.listen);
    }
    exited(crate::setup::command::setup(&options))
}

/// `doctor`: checks the configuration `run` would use (the default listen
/// address when there is none), the ports and the packets.
pub fn doctor(
    setup: &ConfigSource,
    options: &crate::setup::command::DoctorOptions,
) -> Result<(), Failure> {
    let config = find(setup)?.map(|(config, _)| config);
    exited(crate::setup::command::doctor(config, options))
}

/// Writes `text` and a newline to standard output, flushed.
pub(crate) fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// `check`: validates the configuration and prints what the relay would do.
pub fn check(setup: &ConfigSource) -> Result<(), Failure> {
    let (config, _) = load(setup)?;
    to_stdout(print(&format!("{}\nconfiguration OK", config.describe())))
}

/// Where the page's token is kept: the user's state folder; `None` (a
/// token for this run, said in the log) when there is none.
fn page_token_file() -> Option<crate::state::TokenFile> {
    crate::state::TokenFile::of_user()
        .map_err(|e| log::warn!("the page's token can't be kept ({e}): a new one each start"))
        .ok()
}

/// `run`: relays until stopped; reloads the file when it changes; with
/// `watch`, shows the telemetry and the counters live. `double_clicked`: the
/// program started with no arguments at all, so the page (if served and a
/// configuration file was found) opens in the default browser.
pub fn run(
    setup: &ConfigSource,
    watch: bool,
    double_clicked: bool,
    signals: &Signals,
) -> Result<(), Failure> {
    let (config, file) = load(setup)?;
    let relay = match Relay::bind(&config) {
        Ok(relay) => relay,
        Err(e) => return already_running(&e, double_clicked).unwrap_or(Err(start_failure(&e))),
    };
    let mut shown = config.clone();
    shown.listen = relay.local_addr();
    info!("{}", shown.describe());
    let screen = watch && io::stdout().is_terminal();
    let recording = config.record.clone();
    let owner = Owner::start(
        file.as_deref(),
        setup.overrides.clone(),
        config.clone(),
        relay.control(),
        Arc::new(system_look_up),
    )
    .map_err(|e| Failure::start(format!("cannot start the configuration's thread: {e}")))?;
    // The page is there even when off: a saved `[web] addr` serves it
    // (issue 30), as it moves it.
    let web = Web::new(config.web, owner.editor(), config.input, file.clone())
        .open_in_browser(double_clicked && file.is_some())
        .token_file(page_token_file())
        .races(config.races.as_ref().map(|r| r.dir.clone()));
    owner.move_page_with(web.mover());
    let mut app = App::new(relay, signals);
    app.observe(Owning::new(owner));
    app.observe(web);
    if let Some(path) = &recording {
        app.observe(Recording::new(path.clone(), record::Existing::Number, None));
    }
    if let Some(races) = &config.races {
        app.observe(KeepingRaces::new(races.clone(), config.input));
    }
    app.observe(Printer::new(config.stats_format, screen));
    if watch {
        app.observe(LiveView::new(config.input));
    }
    // Started by a double-click, a shortcut or the login entry on Windows:
    // in the tray, once it runs (a mistake at the start stays on screen).
    let mut in_tray = None;
    if !watch && tray::wanted() {
        if let Some(log) = tray::keep_log() {
            let icon = tray::icon(shown.listen, file.clone(), config.web.is_some());
            in_tray = Some((log, icon.shown_flag()));
            app.observe(icon);
        }
    }
    let running = app.start()?;
    info!("running; press Ctrl-C to stop");
    if let Some((log, shown)) = in_tray {
        if shown.load(std::sync::atomic::Ordering::SeqCst) {
            tray::leave_console(&log);
        }
    }
    running.wait().map(|_| ())
}
