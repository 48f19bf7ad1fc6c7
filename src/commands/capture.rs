//! `record` and `replay`: a capture file written from what arrives on the
//! listen address (through the runner: a relay that forwards nothing, and a
//! recording observer), and a capture sent again, paced as recorded.

use std::io::{self, IsTerminal as _};
use std::path::PathBuf;

use log::{info, warn};

use super::{bad_options, listen_failure};
use crate::app::observers::{Recording, StopAfter};
use crate::app::{App, Failure, Signals};
use crate::capture::{record, replay, LapChoice};
use crate::config::{system_look_up, Config, ConfigError};
use crate::relay::Relay;
use crate::setup::running::Beside;

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
    // Without --listen, where the configuration file `run` would use says.
    let listen = options
        .listen
        .clone()
        .or_else(|| super::listen_of_default_file().map(|(addr, _)| addr.to_string()));
    let config = Config::listen_only(listen.as_deref())
        .map_err(|e| problems.extend(e.problems))
        .ok();
    let duration = options
        .duration
        .map(|d| super::simulate::seconds("--duration", d))
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
    let relay = Relay::bind(&config).map_err(|e| listen_failure(&e, Beside::Record))?;
    let listen = relay.local_addr();
    let mut app = App::new(relay, signals);
    let existing = record::Existing::for_output(&options.output, options.force);
    app.observe(Recording::new(options.output.clone(), existing, options.count).announcing(listen));
    if let Some(duration) = duration {
        app.observe(StopAfter::new(duration));
    }
    app.start()?.wait().map(|_| ())
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
    /// `--lap`, as typed.
    pub lap: Option<String>,
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
    let lap = options
        .lap
        .as_deref()
        .map(str::parse::<LapChoice>)
        .transpose()
        .map_err(|message| Failure::usage(format!("--lap {message}")))?;
    let request = replay::Request {
        file: &options.file,
        to,
        port: options.port,
        speed,
        rate,
        repeat: options.repeat,
        lap,
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
