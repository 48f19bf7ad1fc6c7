//! `forza-relay`: parse the command line, set up the log and the signals, run
//! the subcommand, and map how it ended to an exit code (0 ok, 1 could not
//! start or failed, 2 bad options or configuration).

mod cli;

use std::process::ExitCode;

use clap::Parser as _;

use cli::{Cli, Command};
use forza_relay::app::{Failure, Signals};
use forza_relay::commands::{self, watch};
use forza_relay::setup::command as setup;
use forza_relay::{logging, platform};

fn main() -> ExitCode {
    let bare = std::env::args_os().len() == 1;
    let cli = Cli::parse();
    if let Err(e) = logging::init() {
        eprintln!("warning: no log from here on: {e}");
    }
    // This thread's lines (the final summary) wait for room in the log's
    // queue; the relay's loop never does.
    logging::may_wait_on_this_thread();
    let signals = Signals::install();
    let code = match dispatch(cli, bare, &signals) {
        Ok(()) => 0,
        Err(failure) => {
            if !failure.message.is_empty() {
                logging::message(&failure.message);
            }
            failure.code
        }
    };
    logging::flush();
    platform::summary_printed();
    if code != 0 {
        platform::hold_console_on_error(bare);
    }
    ExitCode::from(code)
}

/// Runs the subcommand the command line names (`run` when none).
/// `bare`: started with no arguments (double-clicked).
fn dispatch(cli: Cli, bare: bool, signals: &Signals) -> Result<(), Failure> {
    match cli.command {
        None => commands::run(&cli.run.settings.setup()?, cli.run.watch, bare, signals),
        Some(Command::Run(a)) => commands::run(&a.settings.setup()?, a.watch, false, signals),
        Some(Command::Check(a)) if a.watch => {
            Err(Failure::usage("--watch is an option of run, not of check"))
        }
        Some(Command::Check(a)) => commands::check(&a.settings.setup()?),
        Some(Command::Watch(a)) => watch::watch_command(&a.options(), signals),
        Some(Command::Export(a)) => watch::export_command(&a.options(), signals),
        Some(Command::Dissector(a)) => watch::dissector_command(a.port),
        Some(Command::Simulate(a)) => commands::simulate(&a.options()?, signals),
        Some(Command::Demo(a)) => commands::demo(a.seconds, signals),
        Some(Command::Record(a)) => commands::record(&a.options(), signals),
        Some(Command::Replay(a)) => commands::replay(&a.options(), signals),
        Some(Command::Setup(a)) => commands::setup(a.options()),
        Some(Command::Doctor(a)) => commands::doctor(&a.settings.setup()?, &a.options()?),
        Some(Command::Autostart(a)) => commands::exited(setup::autostart(&a.options()?)),
        Some(Command::Web(a)) => match a.action {
            cli::WebAction::NewToken => commands::exited(setup::new_token()),
        },
    }
}
