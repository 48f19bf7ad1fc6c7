//! The command line (clap derive), private to the binary: `main` turns each
//! subcommand's arguments once, here, into the library's options type
//! ([`ConfigSource`], [`WatchCommand`], [`SendOptions`], …); nothing past that reads
//! them.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use forza_relay::app::Failure;
use forza_relay::commands::watch::{ExportCommand, SourceOptions, WatchCommand};
use forza_relay::commands::{
    bad_options, find_default_file, ConfigSource, RecordOptions, ReplayOptions,
};
use forza_relay::config::{ConfigError, Overrides};
use forza_relay::setup::command::{AutostartOptions, DoctorOptions, SetupOptions};
use forza_relay::simulate::SendOptions;

/// Relay Forza "Data Out" telemetry to many tools at once, each in the packet
/// format it understands.
#[derive(Debug, Parser)]
#[command(name = "forza-relay", version, args_conflicts_with_subcommands = true)]
#[command(after_help = "Examples:
  forza-relay forza-relay.toml
  forza-relay run --listen 0.0.0.0:5400 --format fh6 --to 127.0.0.1:8000 --to 127.0.0.1:5301,format=fh5,only-race-on,max-rate=30
  forza-relay check --config forza-relay.toml")]
pub struct Cli {
    /// What to do (default: run).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of `run`, when no subcommand is named.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Relay packets until Ctrl-C (the default).
    Run(RunArgs),
    /// Validate the configuration and print what the relay would do, without
    /// listening or sending anything.
    Check(CheckArgs),
    /// Show the telemetry live: a full-screen dashboard (one line per second when
    /// the output is not a terminal). q, Esc or Ctrl-C quits.
    Watch(WatchArgs),
    /// Write every packet as a row of decoded fields, CSV or JSON lines, until
    /// Ctrl-C (or the end of a capture file).
    Export(ExportArgs),
    /// Print a Wireshark Lua dissector for the Forza formats:
    /// forza-relay dissector > forza.lua
    Dissector(DissectorArgs),
    /// Send a simulated drive (believable telemetry in any format) without the game.
    Simulate(SimulateArgs),
    /// See forza-relay work on this computer alone: a simulated drive relayed to
    /// two local tools, one of them translated, printed as it happens.
    Demo(DemoArgs),
    /// Record what arrives on a UDP port into a capture file (pcap), for
    /// replay, Wireshark or a bug report.
    Record(RecordArgs),
    /// Send the UDP packets of a capture (pcap or pcapng) again, with their
    /// original spacing, or a raw dump of Forza datagrams at --rate.
    Replay(ReplayArgs),
    /// List the UDP ports in use on this computer, recognise the telemetry
    /// tools among them, and propose a configuration.
    Setup(SetupArgs),
    /// Find out why nothing arrives: the ports, the destinations, the packets,
    /// and on Windows the loopback exemption and the firewall.
    Doctor(DoctorArgs),
    /// Start forza-relay at login (on), stop doing so (off), or say (status).
    Autostart(AutostartArgs),
    /// The web page's token: `web new-token` makes a new one, and every link
    /// with the old one opens nothing any more.
    Web(WebArgs),
}

/// Options of `web`.
#[derive(Debug, Clone, Args)]
pub struct WebArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: WebAction,
}

/// What `web` does.
#[derive(Debug, Clone, Subcommand)]
pub enum WebAction {
    /// Make a new token for the page (kept across starts in the user's state
    /// folder); a running forza-relay takes it at once.
    NewToken,
}

/// Options of `setup`.
#[derive(Debug, Clone, Args)]
pub struct SetupArgs {
    /// Write the proposed configuration to FILE.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// With --write: replace FILE if it exists.
    #[arg(long, requires = "write")]
    pub force: bool,
    /// Print one JSON object per socket (addr, port, pid, process, tool).
    #[arg(long)]
    pub json: bool,
}

/// Options of `doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// The configuration to check, as for run.
    #[command(flatten)]
    pub settings: Settings,
    /// Seconds to wait for datagrams.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    pub wait: f64,
    /// Print one JSON object for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Options of `autostart`.
#[derive(Debug, Clone, Args)]
pub struct AutostartArgs {
    /// on, off or status.
    #[arg(value_name = "on|off|status")]
    pub action: String,
    /// With on: the configuration to run [default: forza-relay.toml here or
    /// next to the program].
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Where `watch` and `export` read packets from, and as what.
#[derive(Debug, Clone, Default, Args)]
pub struct SourceArgs {
    /// Address to listen on, IP:PORT or a bare PORT [default: the [listen] of
    /// forza-relay.toml here or beside the program, else 0.0.0.0:5400].
    #[arg(long, value_name = "ADDR", conflicts_with = "file")]
    pub listen: Option<String>,
    /// Read a capture (pcap or pcapng) instead of listening: `watch` plays it at
    /// its own pace, `export` as fast as it reads, to its end.
    #[arg(long, value_name = "CAPTURE")]
    pub file: Option<PathBuf>,
    /// With --file: only the packets sent to this UDP port; needed when the
    /// capture holds packets to several ports.
    #[arg(long, value_name = "PORT", requires = "file")]
    pub port: Option<u16>,
    /// Packet format the game sends: auto, sled, fm7, fm2023, fh4, fh5 or fh6
    /// [default: auto].
    #[arg(long, alias = "input", value_name = "FORMAT")]
    pub format: Option<String>,
}

/// Options of `watch`.
#[derive(Debug, Clone, Default, Args)]
pub struct WatchArgs {
    /// Where the packets come from.
    #[command(flatten)]
    pub source: SourceArgs,
}

/// Options of `export`.
#[derive(Debug, Clone, Default, Args)]
pub struct ExportArgs {
    /// Where the packets come from.
    #[command(flatten)]
    pub source: SourceArgs,
    /// File to write ("-" for standard output). It is replaced if it exists.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// csv or jsonl [default: jsonl for a .jsonl or .json file, else csv].
    #[arg(long = "as", value_name = "KIND")]
    pub table: Option<String>,
    /// Columns to write, comma separated, by name (IsRaceOn, Speed, TireTempFL,
    /// speed_kmh, recv_time …; TireTemp selects all four wheels) [default: all].
    #[arg(long, value_name = "A,B,C")]
    pub fields: Option<String>,
    /// Skip packets with IsRaceOn = 0 (menus, paused).
    #[arg(long)]
    pub only_race_on: bool,
}

/// Options of `dissector`.
#[derive(Debug, Clone, Args)]
pub struct DissectorArgs {
    /// UDP port the dissector decodes by default (changeable in Wireshark's
    /// preferences).
    #[arg(long, value_name = "PORT", default_value_t = forza_relay::config::DEFAULT_PORT,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
}

/// Options of `simulate`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Example:
  forza-relay simulate --to 127.0.0.1:5400 --format fh6 --rate 60 --duration 30")]
pub struct SimulateArgs {
    /// Where to send the packets, HOST:PORT: forza-relay's listen port, or a tool's.
    #[arg(long, value_name = "ADDR")]
    pub to: String,
    /// Packet format to send, as that game does: sled, fm7, fm2023, fh4, fh5
    /// or fh6.
    #[arg(long, alias = "input", value_name = "FORMAT", default_value = "fh6")]
    pub format: String,
    /// Packets per second, 1 to 1000 (a game sends one per frame).
    #[arg(long, value_name = "HZ", default_value_t = forza_relay::simulate::DEFAULT_RATE)]
    pub rate: u32,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// The drive's seed: the same seed and rate send the same packets.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
}

/// Options of `demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// How long to run, in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = forza_relay::demo::DEFAULT_SECONDS,
        allow_negative_numbers = true
    )]
    pub seconds: f64,
}

/// Options of `record`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Example:
  forza-relay record --listen 0.0.0.0:5400 --output drive.pcap --duration 600")]
pub struct RecordArgs {
    /// Address to listen on, IP:PORT or a bare PORT [default: the [listen] of
    /// forza-relay.toml here or beside the program, else 0.0.0.0:5400].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The capture file to write; {time} in the name becomes the start time.
    /// An existing file is never replaced (a name with {time} gets -1, -2, …)
    /// unless --force is given.
    #[arg(short, long, value_name = "FILE.pcap")]
    pub output: PathBuf,
    /// Replace the --output file if it exists.
    #[arg(long)]
    pub force: bool,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Stop after this many datagrams have arrived.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// Options of `replay`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:
  forza-relay replay drive.pcap --to 127.0.0.1:5400
  forza-relay replay busy.pcapng --port 5300 --to 127.0.0.1:8000 --speed 2 --loop
  forza-relay replay race.pcap --lap best --to 127.0.0.1:5400 --loop")]
pub struct ReplayArgs {
    /// The capture: a pcap or pcapng file (from forza-relay, tcpdump or
    /// Wireshark), or a raw dump of Forza datagrams back to back.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Where to send the packets: HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    pub to: String,
    /// Play this many times faster than recorded (0.5 = half speed).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub speed: f64,
    /// Start again at the end, until Ctrl-C.
    #[arg(long = "loop")]
    pub repeat: bool,
    /// Replay only the packets sent to this UDP port; needed when the capture
    /// holds packets to several ports.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Datagrams a second for a raw dump, which has no times [default: 60].
    #[arg(long, value_name = "HZ")]
    pub rate: Option<u32>,
    /// Replay one lap: N (the first lap is 1: the game's LapNumber + 1) or
    /// best (the smallest LastLap). Only a lap the capture completes counts
    /// (LapNumber steps up to the next); its racing frames are sent, spaced as
    /// recorded. A capture of several races: the first lap N in the file.
    #[arg(long, value_name = "N|best")]
    pub lap: Option<String>,
}

/// Options of `run`.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// Where the configuration comes from.
    #[command(flatten)]
    pub settings: Settings,
    /// Show the telemetry and every destination's counters while relaying, full
    /// screen (q, Esc or Ctrl-C stops); one line a second when the output is not
    /// a terminal.
    #[arg(long)]
    pub watch: bool,
}

/// Options of `check`.
#[derive(Debug, Clone, Default, Args)]
pub struct CheckArgs {
    /// Where the configuration comes from.
    #[command(flatten)]
    pub settings: Settings,
    /// Not an option of check: only accepted to say so.
    #[arg(long, hide = true)]
    pub watch: bool,
}

/// Where the configuration comes from.
#[derive(Debug, Clone, Default, Args)]
pub struct Settings {
    /// A configuration file given without --config: what Windows passes when a
    /// .toml file is dropped onto forza-relay.
    #[arg(value_name = "FILE.toml")]
    pub file: Option<PathBuf>,
    /// Configuration file (TOML). Without it and without --to, forza-relay.toml is
    /// looked for in the current folder and next to the program.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on, IP:PORT or a bare PORT (overrides the file).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Packet format the game sends: auto, sled, fm7, fm2023, fh4, fh5 or fh6
    /// (overrides the file).
    #[arg(long, alias = "input", value_name = "FORMAT")]
    pub format: Option<String>,
    /// A destination: HOST:PORT[,format=ID][,only-race-on][,max-rate=HZ][,max-age=50ms][,hold=15s][,name=NAME].
    /// Repeat for more. Format defaults to "same" (byte-for-byte).
    #[arg(long = "to", value_name = "DEST")]
    pub to: Vec<String>,
    /// Seconds between summary lines, 0 = off (overrides the file).
    #[arg(long, value_name = "SECONDS")]
    pub stats_interval: Option<u64>,
    /// How summaries are printed: text (in the log) or json (one object per
    /// line on standard output, for scripts).
    #[arg(long, value_name = "FORMAT")]
    pub stats_format: Option<String>,
    /// Record every datagram received into this capture file (pcap), while
    /// relaying; {time} in the name becomes the start time (overrides the file).
    #[arg(long, value_name = "FILE")]
    pub record: Option<String>,
    /// Where `run` serves its web page, IP:PORT (default 127.0.0.1:5480, this PC
    /// only), or off (overrides the file).
    #[arg(long, value_name = "ADDR|off")]
    pub web: Option<String>,
}

impl Settings {
    /// Where the configuration comes from, for the library: a `.toml` file
    /// given alone is the configuration file; any other plain argument says
    /// to use `--config`.
    pub fn setup(&self) -> Result<ConfigSource, Failure> {
        let file = match (&self.config, &self.file) {
            (Some(_), Some(extra)) => {
                return Err(Failure::usage(format!(
                    "\"{}\": a configuration file is already given with --config; use \
                     --config FILE once",
                    extra.display()
                )))
            }
            (Some(config), None) => Some(config.clone()),
            (None, Some(file)) => Some(config_argument(file)?),
            (None, None) => None,
        };
        Ok(ConfigSource {
            file,
            to: self.to.clone(),
            overrides: Overrides {
                listen: self.listen.clone(),
                input: self.format.clone(),
                stats_interval: self.stats_interval,
                stats_format: self.stats_format.clone(),
                record: self.record.clone(),
                web: self.web.clone(),
            },
        })
    }
}

/// A plain argument where a subcommand may go: the configuration file when it
/// is a `.toml` file that exists (issue 13: dragged onto the program).
fn config_argument(path: &Path) -> Result<PathBuf, Failure> {
    let toml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    if toml && path.is_file() {
        return Ok(path.to_path_buf());
    }
    Err(Failure::usage(format!(
        "\"{}\" is not a subcommand or a .toml file that exists: to use a configuration \
         file, use --config FILE (forza-relay --help lists the subcommands)",
        path.display()
    )))
}

impl SourceArgs {
    fn options(&self) -> SourceOptions {
        SourceOptions {
            listen: self.listen.clone(),
            file: self.file.clone(),
            port: self.port,
            format: self.format.clone(),
        }
    }
}

impl WatchArgs {
    /// What `watch` is asked.
    pub fn options(&self) -> WatchCommand {
        WatchCommand {
            source: self.source.options(),
        }
    }
}

impl ExportArgs {
    /// What `export` is asked.
    pub fn options(&self) -> ExportCommand {
        ExportCommand {
            source: self.source.options(),
            output: self.output.clone(),
            table: self.table.clone(),
            fields: self.fields.clone(),
            only_race_on: self.only_race_on,
        }
    }
}

impl SimulateArgs {
    /// The drive to send, validated: every bad option named.
    pub fn options(&self) -> Result<SendOptions, Failure> {
        forza_relay::commands::send_options(
            &self.to,
            &self.format,
            self.rate,
            self.duration,
            self.seed,
        )
        .map_err(|e| bad_options(&e))
    }
}

impl RecordArgs {
    /// What `record` is asked.
    pub fn options(&self) -> RecordOptions {
        RecordOptions {
            listen: self.listen.clone(),
            output: self.output.clone(),
            duration: self.duration,
            count: self.count,
            force: self.force,
        }
    }
}

impl ReplayArgs {
    /// What `replay` is asked.
    pub fn options(&self) -> ReplayOptions {
        ReplayOptions {
            file: self.file.clone(),
            to: self.to.clone(),
            speed: self.speed,
            repeat: self.repeat,
            port: self.port,
            rate: self.rate,
            lap: self.lap.clone(),
        }
    }
}

impl SetupArgs {
    /// What `setup` is asked.
    pub fn options(&self) -> SetupOptions {
        SetupOptions {
            write: self.write.clone(),
            force: self.force,
            json: self.json,
            config_listen: None,
        }
    }
}

impl DoctorArgs {
    /// What `doctor` is asked, besides the configuration: `--wait` checked.
    pub fn options(&self) -> Result<DoctorOptions, Failure> {
        let wait = forza_relay::setup::command::wait_seconds(self.wait)
            .map_err(|message| bad_options(&ConfigError::one("--wait", message)))?;
        Ok(DoctorOptions {
            wait,
            json: self.json,
        })
    }
}

impl AutostartArgs {
    /// What `autostart` is asked; `on` without `--config` takes the file
    /// `run` finds.
    pub fn options(&self) -> Result<AutostartOptions, Failure> {
        let action = self
            .action
            .parse()
            .map_err(|message: String| bad_options(&ConfigError::one("autostart", message)))?;
        Ok(AutostartOptions {
            action,
            config: self.config.clone().or_else(find_default_file),
        })
    }
}
