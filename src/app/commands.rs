//! What each subcommand does, from its options — library types the binary
//! makes once from its command line — to its end: `run`, `check`, `record`,
//! `simulate`, `demo` and `replay` (`watch`, `export` and `dissector` are in
//! [`crate::watch::command`]). Each returns `Ok` or the [`Failure`] to print,
//! and stops on the [`Signals`] the program installed.

use std::io::{self, IsTerminal as _, Write as _};
use std::path::PathBuf;

use log::{info, warn};

use super::observers::{Printer, Recording, Reloading, StopAfter};
use super::{App, Failure, Signals};
use crate::capture::{record, replay};
use crate::config::{system_look_up, Config, ConfigError, Overrides, DEFAULT_FILE_NAME};
use crate::numbers::Thousands;
use crate::relay::Relay;
use crate::simulate::SendOptions;
use crate::watch::live::LiveView;
use crate::web::Web;

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

/// `doctor`: checks the configuration `run` would use (the default listen
/// address when there is none), the ports and the packets.
pub fn doctor(
    setup: &ConfigSource,
    options: &crate::setup::command::DoctorOptions,
) -> Result<(), Failure> {
    let config = find(setup)?.map(|(config, _)| config);
    exited(crate::setup::command::doctor(config, options))
}

/// What a write to standard output that failed means: a reader that is gone
/// (`| head`, `| true`) ends the command quietly; anything else is an error.
pub fn to_stdout(result: io::Result<()>) -> Result<(), Failure> {
    match result {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Failure::start(format!(
            "cannot write to standard output: {e}"
        ))),
        _ => Ok(()),
    }
}

/// Writes `text` and a newline to standard output, flushed.
fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// `check`: validates the configuration and prints what the relay would do.
pub fn check(setup: &ConfigSource) -> Result<(), Failure> {
    let (config, _) = load(setup)?;
    to_stdout(print(&format!("{}\nconfiguration OK", config.describe())))
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
    let relay = Relay::bind(&config).map_err(|e| Failure::start(e.to_string()))?;
    let mut shown = config.clone();
    shown.listen = relay.local_addr();
    info!("{}", shown.describe());
    let screen = watch && io::stdout().is_terminal();
    let recording = config.record.clone();
    let mut app = App::new(relay, signals);
    if let Some(path) = &file {
        app.observe(Reloading::new(
            path.clone(),
            setup.overrides.clone(),
            config.clone(),
        ));
    }
    if let Some(addr) = config.web {
        app.observe(
            Web::new(addr, file.clone(), setup.overrides.clone(), shown.clone())
                .open_in_browser(double_clicked && file.is_some()),
        );
    }
    if let Some(path) = &recording {
        app.observe(Recording::new(path.clone(), record::Existing::Number, None));
    }
    app.observe(Printer::new(config.stats_format, screen));
    if watch {
        app.observe(LiveView::new(config.input));
    }
    let running = app.start()?;
    info!("running; press Ctrl-C to stop");
    running.wait().map(|_| ())
}

/// What `record` is asked.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// `--listen`, as typed (the default when `None`).
    pub listen: Option<String>,
    /// The capture file to write.
    pub output: PathBuf,
    /// `--duration`, in seconds.
    pub duration: Option<f64>,
    /// `--count`.
    pub count: Option<u64>,
    /// `--force`: replace the output file if it exists.
    pub force: bool,
}

/// `record`: writes what arrives on the listen address into a capture file,
/// until stopped, `--duration` or `--count`.
pub fn record(options: &RecordOptions, signals: &Signals) -> Result<(), Failure> {
    let mut problems = Vec::new();
    let config = Config::listen_only(options.listen.as_deref())
        .map_err(|e| problems.extend(e.problems))
        .ok();
    let duration = options
        .duration
        .map(|d| crate::simulate::seconds("--duration", d))
        .transpose()
        .map_err(|p| problems.push(p))
        .ok()
        .flatten();
    if options.count == Some(0) {
        problems.push(crate::config::Problem {
            place: "--count".to_owned(),
            message: "must be at least 1".to_owned(),
        });
    }
    let Some(config) = config.filter(|_| problems.is_empty()) else {
        return Err(bad_options(&ConfigError { problems }));
    };
    let relay = Relay::bind(&config).map_err(|e| Failure::start(e.to_string()))?;
    let listen = relay.local_addr();
    let mut app = App::new(relay, signals);
    let existing = record::Existing::for_output(&options.output, options.force);
    app.observe(Recording::new(options.output.clone(), existing, options.count).announcing(listen));
    if let Some(duration) = duration {
        app.observe(StopAfter::new(duration));
    }
    app.start()?.wait().map(|_| ())
}

/// `simulate`: sends a simulated drive until its duration is over or a stop.
pub fn simulate(options: &SendOptions, signals: &Signals) -> Result<(), Failure> {
    if let Err(e) = print(&format!("{} (Ctrl-C stops)", options.describe())) {
        // Nobody reads what it says: it has nothing to do.
        return to_stdout(Err(e));
    }
    let report = crate::simulate::send(options, &signals.stop_flag()).map_err(|e| {
        Failure::start(format!(
            "cannot open a socket to send to {}: {e}",
            options.to
        ))
    })?;
    to_stdout(print(&report.to_string()))
}

/// `demo`: the simulator, a relay and two tools, all on this computer, for
/// `seconds` or until stopped.
pub fn demo(seconds: f64, signals: &Signals) -> Result<(), Failure> {
    let seconds = crate::simulate::seconds("--seconds", seconds)
        .map_err(|p| bad_options(&ConfigError { problems: vec![p] }))?;
    match crate::demo::run(seconds, &signals.stop_flag(), &mut io::stdout().lock()) {
        Ok(()) => Ok(()),
        Err(crate::demo::DemoError::Output(e)) => to_stdout(Err(e)),
        Err(e) => Err(Failure::start(e.to_string())),
    }
}

/// What `replay` is asked.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The capture.
    pub file: PathBuf,
    /// `--to HOST:PORT`, as typed.
    pub to: String,
    /// `--speed`.
    pub speed: f64,
    /// `--loop`.
    pub repeat: bool,
    /// `--port`: which stream of the capture.
    pub port: Option<u16>,
    /// `--rate`: datagrams a second for a raw dump.
    pub rate: Option<u32>,
}

/// `replay`: sends a capture's datagrams again, paced as recorded. A bad option
/// or an unreadable capture is exit code 2, a socket or read failure 1.
pub fn replay(options: &ReplayOptions, signals: &Signals) -> Result<(), Failure> {
    let speed = replay::check_speed(options.speed)
        .map_err(|message| Failure::usage(format!("--speed {message}")))?;
    let to = crate::config::resolve(&options.to, &system_look_up)
        .map_err(|message| Failure::usage(format!("--to {:?}: {message}", options.to)))?;
    let rate = options
        .rate
        .map(replay::check_rate)
        .transpose()
        .map_err(|message| Failure::usage(format!("--rate {message}")))?;
    let request = replay::Request {
        file: &options.file,
        to,
        port: options.port,
        speed,
        rate,
        repeat: options.repeat,
    };
    let plan = replay::Plan::new(&request).map_err(|e| Failure::usage(e.to_string()))?;
    for warning in &plan.warnings {
        warn!("{warning}");
    }
    info!("{plan}");
    let total = plan.length.as_secs_f64();
    let bar = io::stderr().is_terminal().then(|| {
        let style = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} packets  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        indicatif::ProgressBar::new(plan.selection.packets).with_style(style)
    });
    let stop = signals.stop_flag();
    let result = plan.run(&stop, &mut |p| {
        if let Some(bar) = &bar {
            bar.set_position(p.sent_in_pass);
            let elapsed = p.elapsed.as_secs_f64();
            bar.set_message(if options.repeat {
                format!("pass {}, {elapsed:.1} s", p.pass)
            } else {
                format!("{elapsed:.1} s / {total:.1} s")
            });
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = result.map_err(|e| Failure::start(e.to_string()))?;
    info!("{report}");
    Ok(())
}
