//! `forza-relay`: parse the command line, set up logging, run the subcommand, and
//! map errors to an exit code (0 ok, 1 could not start, 2 bad configuration).

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Parser as _;
use log::{error, info, warn};

use forza_relay::capture::record::{self, Recorder};
use forza_relay::capture::{replay, CaptureError, Streams};
use forza_relay::cli::{Cli, Command, DemoArgs, RecordArgs, ReplayArgs, Settings, SimulateArgs};
use forza_relay::config::{
    system_look_up, Config, ConfigError, Overrides, StatsFormat, DEFAULT_FILE_NAME,
};
use forza_relay::platform;
use forza_relay::relay::Relay;
use forza_relay::reload::Reloader;
use forza_relay::setup::command as setup;
use forza_relay::stats::{SnapshotKind, Summary};
use forza_relay::tap;
use forza_relay::watch::{command as watch, console, live};

const NO_CONFIG_HELP: &str = "\
forza-relay needs to know where to send the game's packets.

Quick start: forward to SimHub on this PC, and to a tool that wants FH5 packets:
  forza-relay run --to 127.0.0.1:8000 --to 127.0.0.1:5301,format=fh5

Or put a forza-relay.toml next to forza-relay (see config.example.toml):
  [listen]
  addr = \"0.0.0.0:5400\"

  [[destination]]
  name = \"simhub\"
  addr = \"127.0.0.1:8000\"

Then, in the game's HUD/Gameplay settings, turn Data Out on, set Data Out IP
Address to this PC's address (127.0.0.1 when the game runs on this PC) and
Data Out IP Port to 5400.

\"forza-relay --help\" lists every option.";

fn main() -> ExitCode {
    let bare = std::env::args_os().len() == 1;
    let code = real_main();
    if code != ExitCode::SUCCESS {
        platform::hold_console_on_error(bare);
    }
    code
}

fn real_main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let (check, settings) = match cli.command {
        Some(Command::Check(s)) => (true, s),
        Some(Command::Run(s)) => (false, s),
        Some(Command::Simulate(args)) => return simulate(&args),
        Some(Command::Demo(args)) => return demo(&args),
        None => (false, cli.run),
        Some(Command::Watch(a)) => return finish(watch::watch_command(&a)),
        Some(Command::Export(a)) => return finish(watch::export_command(&a)),
        Some(Command::Dissector(a)) => return finish(watch::dissector_command(&a)),
        Some(Command::Replay(args)) => return replay(&args),
        Some(Command::Record(args)) => return record_command(&args),
        Some(Command::Setup(a)) => {
            let (write, force, json) = (a.write, a.force, a.json);
            return ExitCode::from(setup::setup(&setup::SetupOptions { write, force, json }));
        }
        Some(Command::Doctor(a)) => return doctor(&a),
        Some(Command::Autostart(a)) => return autostart(a),
    };
    let (config, file) = match load(&settings) {
        Ok(Some(loaded)) => loaded,
        Ok(None) => {
            eprintln!("{NO_CONFIG_HELP}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!(
                "error: the configuration has {}:",
                plural(e.problems.len(), "problem")
            );
            for p in &e.problems {
                eprintln!("  {}: {}", p.place, p.message);
            }
            return ExitCode::from(2);
        }
    };
    if check && settings.watch {
        eprintln!("error: --watch is an option of run, not of check");
        return ExitCode::from(2);
    }
    if check {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}\nconfiguration OK", config.describe());
        return ExitCode::SUCCESS;
    }
    let file = file.map(|path| (path, overrides(&settings)));
    run(&config, file, settings.watch)
}

/// Runs the relay; with a config `file` (and the command-line overrides to
/// keep applying), reloads it whenever it changes; with `watch`, shows it live.
fn run(config: &Config, file: Option<(PathBuf, Overrides)>, watch: bool) -> ExitCode {
    let mut relay = match Relay::bind(config) {
        Ok(relay) => relay,
        Err(e) => {
            error!("{e}");
            return ExitCode::from(1);
        }
    };
    let control = relay.control();
    if let Err(e) = ctrlc::set_handler(move || control.stop()) {
        warn!("Ctrl-C will not print the final summary: {e}");
    }
    // After ctrlc's handler: Windows asks the newest one first.
    let on_close = relay.control();
    if let Err(e) = platform::on_console_close(move || on_close.stop()) {
        warn!("closing the window will not print the final summary: {e}");
    }
    #[cfg(unix)]
    stop_on_sigterm(relay.control());
    let recorder = match &config.record {
        Some(path) => match start_recording(&mut relay, path) {
            Ok(recorder) => Some(recorder),
            Err(e) => {
                error!("{e}");
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    // Summaries are printed off the loop, which never waits for the terminal;
    // the dashboard, which owns the terminal, shows the counters instead.
    let format = config.stats_format;
    let dashboard = watch && std::io::stdout().is_terminal();
    let printer = (!dashboard).then(|| {
        let summaries = relay.summaries();
        std::thread::spawn(move || {
            let mut summary = Summary::default();
            for snapshot in summaries {
                match format {
                    StatsFormat::Text => info!("{}", summary.line(&snapshot)),
                    StatsFormat::Json => print_json(&snapshot.to_json(SnapshotKind::Summary)),
                }
            }
        })
    });
    let mut shown = config.clone();
    shown.listen = relay.local_addr();
    info!("{}", shown.describe());
    let reloader = file.and_then(|(path, overrides)| {
        match Reloader::start(
            &path,
            overrides,
            config.clone(),
            relay.control(),
            Arc::new(system_look_up),
        ) {
            Ok(r) => {
                info!(
                    "watching {} for changes (saved changes apply at once)",
                    path.display()
                );
                Some(r)
            }
            Err(e) => {
                warn!(
                    "changes to {} will need a restart: cannot watch it ({e})",
                    path.display()
                );
                None
            }
        }
    });
    info!("running; press Ctrl-C to stop");
    let (last, screen_error) = if watch {
        let watched = live::run(&mut relay, config.input);
        (watched.last, watched.screen_error)
    } else {
        (relay.run(), None)
    };
    drop(reloader);
    // Closes the summaries channel, which ends the printer.
    drop(relay);
    if let Some(printer) = printer {
        let _ = printer.join();
    }
    if let Some(recorder) = recorder {
        finish_recording(recorder);
    }
    if format == StatsFormat::Json {
        print_json(&last.to_json(SnapshotKind::Final));
    }
    info!("{last}");
    platform::summary_printed();
    if let Some(e) = screen_error {
        error!("the live view failed: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Starts recording what `relay` receives into `path` (`{time}` in it becomes
/// now), creating its folder if needed.
fn start_recording(relay: &mut Relay, path: &std::path::Path) -> Result<Recorder, CaptureError> {
    let path = record::path_for(path, std::time::SystemTime::now());
    if let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) {
        // A folder that can't be made shows up as the file's error below.
        let _ = std::fs::create_dir_all(folder);
    }
    let (producer, tap) = tap::tap(tap::DEFAULT_CAPACITY);
    let recorder = Recorder::start(&path, tap, None, || {})?;
    relay.attach(producer);
    info!("recording every datagram received into {}", path.display());
    Ok(recorder)
}

/// Flushes the recording and says what is in it.
fn finish_recording(recorder: Recorder) {
    match recorder.finish() {
        Ok(r) => info!("{}", Recording(&r)),
        Err(e) => error!("the recording stopped early: {e}"),
    }
}

/// What a recording holds, as its last line says it.
struct Recording<'a>(&'a record::Recorded);

impl std::fmt::Display for Recording<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.0;
        write!(
            f,
            "recorded {} datagrams into {}",
            r.packets,
            r.path.display()
        )?;
        if r.dropped > 0 {
            write!(
                f,
                "; {} more arrived while the disk was behind and are not in it (they were \
                 relayed)",
                r.dropped
            )?;
        }
        if r.too_long > 0 {
            write!(
                f,
                "; {} longer than a capture record holds were left out",
                r.too_long
            )?;
        }
        Ok(())
    }
}

/// `record`: write what arrives on the listen address into a capture file,
/// until Ctrl-C, `--duration` or `--count`.
fn record_command(args: &RecordArgs) -> ExitCode {
    let mut problems = Vec::new();
    let listen_text = args.listen.as_deref().unwrap_or("0.0.0.0:5400");
    let listen = forza_relay::config::parse_listen(listen_text)
        .map_err(|message| problems.push(("--listen", message)))
        .ok();
    let duration = args
        .duration
        .map(|d| forza_relay::simulate::seconds("--duration", d))
        .transpose()
        .map_err(|p| problems.push(("--duration", p.message)))
        .ok()
        .flatten();
    if args.count == Some(0) {
        problems.push(("--count", "must be at least 1".to_owned()));
    }
    let Some(listen) = listen.filter(|_| problems.is_empty()) else {
        for (place, message) in problems {
            eprintln!("error: {place}: {message}");
        }
        return ExitCode::from(2);
    };
    let config = Config {
        origin: "command line".to_owned(),
        listen,
        listen_place: "--listen".to_owned(),
        input: forza_relay::config::Input::Auto,
        allow: Vec::new(),
        stats_interval: None,
        stats_format: StatsFormat::Text,
        destinations: Vec::new(),
        record: None,
    };
    let mut relay = match Relay::bind(&config) {
        Ok(relay) => relay,
        Err(e) => {
            error!("{e}");
            return ExitCode::from(1);
        }
    };
    let (producer, tap) = tap::tap(tap::DEFAULT_CAPACITY);
    let at_limit = relay.control();
    let recorder = match Recorder::start(&args.output, tap, args.count, move || at_limit.stop()) {
        Ok(r) => r,
        Err(e) => {
            error!("{e}");
            return ExitCode::from(1);
        }
    };
    relay.attach(producer);
    let control = relay.control();
    if let Err(e) = ctrlc::set_handler(move || control.stop()) {
        warn!("Ctrl-C will stop without flushing the file: {e}");
    }
    #[cfg(unix)]
    stop_on_sigterm(relay.control());
    if let Some(duration) = duration {
        let control = relay.control();
        std::thread::spawn(move || {
            std::thread::sleep(duration);
            control.stop();
        });
    }
    info!(
        "recording what arrives on {} into {}; Ctrl-C stops",
        relay.local_addr(),
        args.output.display()
    );
    let last = relay.run();
    drop(relay);
    match recorder.finish() {
        Ok(r) => {
            info!(
                "{} in {}",
                Recording(&r),
                forza_relay::stats::Elapsed(last.elapsed)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("the recording stopped early: {e}");
            ExitCode::from(1)
        }
    }
}

/// SIGTERM (a service manager, `kill`) stops the relay as Ctrl-C does. SIGHUP
/// is left to the config reloader.
#[cfg(unix)]
fn stop_on_sigterm(control: forza_relay::relay::Control) {
    use signal_hook::consts::SIGTERM;
    match signal_hook::iterator::Signals::new([SIGTERM]) {
        Ok(mut signals) => {
            std::thread::spawn(move || {
                if signals.forever().next().is_some() {
                    control.stop();
                }
            });
        }
        Err(e) => warn!("SIGTERM will not print the final summary: {e}"),
    }
}

/// One JSON line on standard output, flushed so a script sees it at once.
fn print_json(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The command-line options that override the file.
fn overrides(s: &Settings) -> Overrides {
    Overrides {
        listen: s.listen.clone(),
        input: s.input.clone(),
        stats_interval: s.stats_interval,
        stats_format: s.stats_format.clone(),
        record: s.record.clone(),
    }
}

/// `simulate`: send a simulated drive until its duration is over or Ctrl-C.
fn simulate(args: &SimulateArgs) -> ExitCode {
    use forza_relay::simulate::{self, SendOptions};
    let options =
        match SendOptions::from_args(&args.to, &args.format, args.rate, args.duration, args.seed) {
            Ok(options) => options,
            Err(e) => return option_errors(&e),
        };
    let stop = stop_on_ctrl_c();
    println!("{} (Ctrl-C stops)", options.describe());
    match simulate::send(&options, &stop) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("cannot open a socket to send to {}: {e}", options.to);
            ExitCode::from(1)
        }
    }
}

/// `demo`: the simulator, a relay and two tools, all on loopback.
fn demo(args: &DemoArgs) -> ExitCode {
    let seconds = match forza_relay::simulate::seconds("--seconds", args.seconds) {
        Ok(s) => s,
        Err(p) => return option_errors(&ConfigError { problems: vec![p] }),
    };
    let stop = stop_on_ctrl_c();
    match forza_relay::demo::run(seconds, &stop, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e}");
            ExitCode::from(1)
        }
    }
}

/// `forza-relay replay`: bad input exits 2, a socket or read failure 1.
fn replay(args: &ReplayArgs) -> ExitCode {
    use std::io::IsTerminal as _;

    let speed = match replay::check_speed(args.speed) {
        Ok(speed) => speed,
        Err(message) => {
            eprintln!("error: --speed {message}");
            return ExitCode::from(2);
        }
    };
    let to = match forza_relay::config::resolve(&args.to, &system_look_up) {
        Ok(to) => to,
        Err(message) => {
            eprintln!("error: --to {:?}: {message}", args.to);
            return ExitCode::from(2);
        }
    };
    let streams = match Streams::scan(&args.file) {
        Ok(streams) => streams,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(cut) = &streams.truncated {
        warn!("{cut}; replaying the packets before the cut");
    }
    let selection = match streams.select(args.port) {
        Ok(selection) => selection,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let stop = stop_on_ctrl_c();
    let total = selection.duration().as_secs_f64() / speed;
    info!(
        "replaying {} packets to port {} ({:.1} s at speed {speed}) from {} to {to}{}",
        selection.packets,
        selection.port,
        total,
        args.file.display(),
        if args.repeat { ", looping" } else { "" }
    );
    let bar = std::io::stderr().is_terminal().then(|| {
        let style = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} packets  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        indicatif::ProgressBar::new(selection.packets).with_style(style)
    });
    let options = replay::Options {
        to,
        speed,
        repeat: args.repeat,
    };
    let result = replay::replay(&args.file, &selection, &options, &stop, &mut |p| {
        if let Some(bar) = &bar {
            bar.set_position(p.sent_in_pass);
            let elapsed = p.elapsed.as_secs_f64();
            bar.set_message(if args.repeat {
                format!("pass {}, {elapsed:.1} s", p.pass)
            } else {
                format!("{elapsed:.1} s / {total:.1} s")
            });
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(report) => {
            info!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("{e}");
            ExitCode::from(1)
        }
    }
}

/// A flag that Ctrl-C (and SIGTERM) sets. A process has one handler: each
/// command that needs one installs it once, here.
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        warn!("Ctrl-C will stop the program without a summary: {e}");
    }
    #[cfg(unix)]
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone()) {
        warn!("SIGTERM will stop the program without a summary: {e}");
    }
    stop
}

/// Prints each bad command-line option and returns exit code 2.
fn option_errors(e: &ConfigError) -> ExitCode {
    for p in &e.problems {
        eprintln!("error: {}: {}", p.place, p.message);
    }
    ExitCode::from(2)
}

/// The configuration from `--config`, `--to`, or a `forza-relay.toml` found in the
/// current folder or next to the program, with the file it came from; `None`
/// when there is none.
fn load(s: &Settings) -> Result<Option<(Config, Option<PathBuf>)>, ConfigError> {
    let overrides = overrides(s);
    let from_file =
        |path: PathBuf| Config::from_file(&path, &overrides).map(|c| Some((c, Some(path))));
    match (&s.config, s.to.is_empty()) {
        (Some(_), false) => Err(ConfigError::one(
            "command line",
            "use either --config FILE or --to DEST, not both",
        )),
        (Some(path), true) => from_file(path.clone()),
        (None, false) => Config::from_args(&s.to, &overrides).map(|c| Some((c, None))),
        (None, true) => match find_default_file() {
            Some(path) => {
                info!("using {}", path.display());
                from_file(path)
            }
            None => Ok(None),
        },
    }
}

/// `forza-relay.toml` in the current folder, else next to the program (where a
/// Windows user who double-clicks it keeps it).
fn find_default_file() -> Option<PathBuf> {
    let here = PathBuf::from(DEFAULT_FILE_NAME);
    let beside_exe = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(DEFAULT_FILE_NAME)));
    std::iter::once(here)
        .chain(beside_exe)
        .find(|p| p.is_file())
}

/// `doctor` for the configuration `run` would use.
fn doctor(a: &forza_relay::cli::DoctorArgs) -> ExitCode {
    let wait = match setup::wait_seconds(a.wait) {
        Ok(wait) => wait,
        Err(message) => return option_errors(&ConfigError::one("--wait", message)),
    };
    let settings = Settings {
        config: a.config.clone(),
        listen: a.listen.clone(),
        to: a.to.clone(),
        ..Settings::default()
    };
    let options = setup::DoctorOptions { wait, json: a.json };
    ExitCode::from(setup::doctor(load(&settings), &options))
}

/// `autostart on|off|status`; `on` without --config takes the file `run` finds.
fn autostart(a: forza_relay::cli::AutostartArgs) -> ExitCode {
    let action = match a.action.parse() {
        Ok(action) => action,
        Err(message) => return option_errors(&ConfigError::one("autostart", message)),
    };
    let config = a.config.or_else(find_default_file);
    ExitCode::from(setup::autostart(&setup::AutostartOptions {
        action,
        config,
    }))
}

/// The exit code of `watch`, `export` or `dissector`, after printing its error.
fn finish(result: Result<(), watch::Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Info by default; `RUST_LOG` overrides. Lines read `HH:MM:SS LEVEL message`.
fn init_logging() {
    let env = env_logger::Env::default().default_filter_or("info");
    env_logger::Builder::from_env(env)
        .format(|buf, record| {
            let ts = buf.timestamp_seconds().to_string();
            // RFC 3339 "2026-11-30T13:00:00Z": the time of day is enough here.
            let time = ts.get(11..19).unwrap_or(&ts);
            writeln!(buf, "{time} {:<5} {}", record.level(), record.args())
        })
        // Held back while a full-screen view owns the terminal.
        .target(env_logger::Target::Pipe(Box::new(console::LogWriter)))
        .init();
}
