//! The command line (clap derive). Nothing past `main` reads it: it is turned once
//! into a [`Config`](crate::config::Config).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Relay Forza "Data Out" telemetry to many tools at once, each in the packet
/// format it understands.
#[derive(Debug, Parser)]
#[command(name = "forza-relay", version, args_conflicts_with_subcommands = true)]
#[command(after_help = "Examples:
  forza-relay --config forza-relay.toml
  forza-relay run --listen 0.0.0.0:5400 --input fh6 --to 127.0.0.1:8000 --to 127.0.0.1:5301,format=fh5,only-race-on,max-rate=30
  forza-relay check --config forza-relay.toml")]
pub struct Cli {
    /// What to do (default: run).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of `run`, when no subcommand is named.
    #[command(flatten)]
    pub run: Settings,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Relay packets until Ctrl-C (the default).
    Run(Settings),
    /// Validate the configuration and print what the relay would do, without
    /// listening or sending anything.
    Check(Settings),
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
    /// original spacing.
    Replay(ReplayArgs),
    /// List the UDP ports in use on this computer, recognise the telemetry
    /// tools among them, and propose a configuration.
    Setup(SetupArgs),
    /// Find out why nothing arrives: the ports, the destinations, the packets,
    /// and on Windows the loopback exemption and the firewall.
    Doctor(DoctorArgs),
    /// Start forza-relay at login (on), stop doing so (off), or say (status).
    Autostart(AutostartArgs),
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
    /// Configuration file (TOML), as for run.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on, IP:PORT or a bare PORT (overrides the file).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// A destination, as for run. Repeat for more.
    #[arg(long = "to", value_name = "DEST")]
    pub to: Vec<String>,
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
    /// Address to listen on, IP:PORT or a bare PORT [default: 0.0.0.0:5400].
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
    /// Packet format: auto, sled, fm7, fm2023, fh4, fh5 or fh6 [default: auto].
    #[arg(long, value_name = "FORMAT")]
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
    #[arg(long, value_name = "PORT", default_value_t = crate::config::DEFAULT_PORT,
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
    /// Packet format: sled, fm7, fm2023, fh4, fh5 or fh6.
    #[arg(long, value_name = "FORMAT", default_value = "fh6")]
    pub format: String,
    /// Packets per second, 1 to 1000 (a game sends one per frame).
    #[arg(long, value_name = "HZ", default_value_t = crate::simulate::DEFAULT_RATE)]
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
        default_value_t = crate::demo::DEFAULT_SECONDS,
        allow_negative_numbers = true
    )]
    pub seconds: f64,
}

/// Options of `record`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Example:
  forza-relay record --listen 0.0.0.0:5400 --output drive.pcap --duration 600")]
pub struct RecordArgs {
    /// Address to listen on, IP:PORT or a bare PORT [default: 0.0.0.0:5400].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The capture file to write (replaced if it exists).
    #[arg(short, long, value_name = "FILE.pcap")]
    pub output: PathBuf,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Stop after this many datagrams.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// Options of `replay`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:
  forza-relay replay drive.pcap --to 127.0.0.1:5400
  forza-relay replay busy.pcapng --port 5300 --to 127.0.0.1:8000 --speed 2 --loop")]
pub struct ReplayArgs {
    /// The capture: a pcap or pcapng file (from forza-relay, tcpdump or Wireshark).
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
}

/// Where the configuration comes from.
#[derive(Debug, Clone, Default, Args)]
pub struct Settings {
    /// Configuration file (TOML). Without it and without --to, forza-relay.toml is
    /// looked for in the current folder and next to the program.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on, IP:PORT or a bare PORT (overrides the file).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Input format: auto, sled, fm7, fm2023, fh4, fh5 or fh6 (overrides the file).
    #[arg(long, value_name = "FORMAT")]
    pub input: Option<String>,
    /// A destination: HOST:PORT[,format=ID][,only-race-on][,max-rate=HZ][,name=NAME].
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
    /// Show the telemetry and every destination's counters while relaying, full
    /// screen (q, Esc or Ctrl-C stops); one line a second when the output is not
    /// a terminal.
    #[arg(long)]
    pub watch: bool,
}
