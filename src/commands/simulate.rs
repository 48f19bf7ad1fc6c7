//! `simulate` and `demo`: a simulated drive sent to an address, and the
//! simulator, a relay and two tools all on this computer.

use std::io;
use std::time::Duration;

use super::{bad_options, print};
use crate::app::{to_stdout, Failure, Signals};
use crate::config::{self, ConfigError, Problem};
use crate::simulate::{SendOptions, MAX_RATE};
use crate::wire::{Format, FORMAT_IDS};

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
    let seconds = self::seconds("--seconds", seconds)
        .map_err(|p| bad_options(&ConfigError { problems: vec![p] }))?;
    crate::demo::run(seconds, signals, Box::new(io::stdout().lock()))
}

/// `simulate`'s options as typed, validated: every mistake is listed, each
/// naming the flag and its value.
pub fn send_options(
    to: &str,
    format: &str,
    rate: u32,
    duration: Option<f64>,
    seed: u64,
) -> Result<SendOptions, ConfigError> {
    let mut problems = Vec::new();
    let to = config::resolve(to, &config::system_look_up)
        .map_err(|message| problems.push(problem(format!("--to {to:?}"), message)))
        .ok();
    let format = format
        .parse::<Format>()
        .map_err(|_| {
            problems.push(problem(
                format!("--format {format:?}"),
                format!(
                    "not a packet format{} (valid: {FORMAT_IDS})",
                    crate::words::did_you_mean(format, &Format::ALL.map(|f| f.id()))
                ),
            ))
        })
        .ok();
    if rate == 0 || rate > MAX_RATE {
        problems.push(problem(
            format!("--rate {rate}"),
            format!("must be from 1 to {MAX_RATE} packets per second"),
        ));
    }
    let duration = match duration.map(|d| seconds("--duration", d)) {
        Some(Err(p)) => {
            problems.push(p);
            None
        }
        Some(Ok(d)) => Some(d),
        None => None,
    };
    match (to, format) {
        (Some(to), Some(format)) if problems.is_empty() => Ok(SendOptions {
            to,
            format,
            rate,
            duration,
            seed,
        }),
        _ => Err(ConfigError { problems }),
    }
}

fn problem(place: String, message: impl Into<String>) -> Problem {
    Problem {
        place,
        message: message.into(),
    }
}

/// `value` seconds given to `flag` as a duration: a number above 0.
pub fn seconds(flag: &str, value: f64) -> Result<Duration, Problem> {
    match Duration::try_from_secs_f64(value) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(problem(
            format!("{flag} {value}"),
            "must be a number of seconds above 0",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_all_named_with_their_values() {
        let e = send_options("nonsense", "fh7", 0, Some(-1.0), 1).unwrap_err();
        let text = e.to_string();
        for part in [
            "--to \"nonsense\"",
            "--format \"fh7\"",
            "sled, fm7, fm2023, fh4, fh5, fh6",
            "--rate 0: must be from 1 to 1000",
            "--duration -1: must be a number of seconds above 0",
        ] {
            assert!(text.contains(part), "{part:?} not in:\n{text}");
        }
        assert_eq!(e.problems.len(), 4);
        let e = send_options("127.0.0.1:5400", "fh6", 1001, Some(f64::NAN), 1);
        let text = e.unwrap_err().to_string();
        assert!(text.contains("--rate 1001"), "{text}");
        assert!(text.contains("--duration NaN"), "{text}");
        let e = send_options("127.0.0.1:0", "fh6", 60, Some(0.0), 1);
        let text = e.unwrap_err().to_string();
        assert!(text.contains("port 0"), "{text}");
        assert!(text.contains("--duration 0"), "{text}");
    }

    #[test]
    fn good_options_are_kept() {
        let o = send_options("127.0.0.1:5400", "FM7", 100, Some(1.5), 9).unwrap();
        assert_eq!(o.to, "127.0.0.1:5400".parse().unwrap());
        assert_eq!(o.format, Format::Fm7);
        assert_eq!(o.duration, Some(Duration::from_millis(1_500)));
        assert_eq!(o.frames(), Some(150));
        assert_eq!(o.seed, 9);
        let text = o.describe();
        assert!(
            text.contains("fm7 packets (311 bytes) to 127.0.0.1:5400 at 100/s"),
            "{text}"
        );
        assert!(text.contains("seed 9"), "{text}");
    }
}
