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
    /// opening any socket.
    Check(Settings),
    /// Send a simulated drive (believable telemetry in any format) without the game.
    Simulate(SimulateArgs),
    /// See forza-relay work on this computer alone: a simulated drive relayed to
    /// two local tools, one of them translated, printed as it happens.
    Demo(DemoArgs),
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
}
