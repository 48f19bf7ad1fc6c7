//! `simulate` and `demo`: a simulated drive sent to an address, and the
//! simulator, a relay and two tools all on this computer.

use std::io;

use super::{bad_options, print};
use crate::app::{to_stdout, Failure, Signals};
use crate::config::ConfigError;
use crate::simulate::SendOptions;

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
    crate::demo::run(seconds, signals, Box::new(io::stdout().lock()))
}
