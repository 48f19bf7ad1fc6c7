//! The plain-line mode: one line per second for a log or a pipe (`watch`
//! when stdout is not a terminal), the same model as the dashboard's.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::pieces::{format_label, printable, rate, NOT_RACING};
use crate::view::model::{shown, Model};
use crate::view::source::{Next, Source};

/// Prints [`plain_line`] every `interval` until `stop` or the source's end (then
/// once more). `on_line` runs before each line but the last, as `on_frame` does
/// for [`dashboard`](super::dashboard). A closed stdout (`| head`) ends it quietly.
pub fn print_lines(
    source: &mut dyn Source,
    model: &mut Model,
    stop: &AtomicBool,
    out: &mut dyn Write,
    interval: Duration,
    mut on_line: impl FnMut(&mut Model),
) -> io::Result<()> {
    let mut next_line = Instant::now() + interval;
    let print = |model: &Model, out: &mut dyn Write| match writeln!(out, "{}", plain_line(model))
        .and_then(|()| out.flush())
    {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e),
        Ok(()) => Ok(true),
    };
    while !stop.load(Ordering::Relaxed) {
        let left = next_line
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        match source.next(left)? {
            Next::Datagram(d) => model.on_datagram(Instant::now(), d.from, d.payload),
            Next::Idle => {}
            Next::End => {
                model.end();
                model.tick(Instant::now());
                print(model, out)?;
                return Ok(());
            }
        }
        let now = Instant::now();
        if now >= next_line {
            model.tick(now);
            on_line(model);
            if !print(model, out)? {
                return Ok(());
            }
            next_line = now + interval;
        }
    }
    Ok(())
}

/// One line for a log or a pipe: speed, gear, rpm, lap, rate, format; while
/// not racing, the last racing values after [`NOT_RACING`].
pub fn plain_line(model: &Model) -> String {
    if model.packets() == 0 {
        let mut line = match model.why_ignored() {
            Some(why) => format!("no packets yet ({}; {why})", printable(&model.source)),
            None => format!("no packets yet ({})", printable(&model.source)),
        };
        destinations_text(model, &mut line);
        return line;
    }
    let mut line = String::new();
    if model.not_racing() {
        line.push_str(NOT_RACING);
        line.push_str(if model.car().is_some() {
            "; last: "
        } else {
            ", "
        });
    }
    if let Some(car) = model.car() {
        line.push_str(&format!(
            "speed {}, gear {}, {} rpm, lap {}, ",
            shown(car.speed_kmh, |s| format!("{s:.0} km/h")),
            shown(car.gear, |g| g.to_string()),
            shown(car.rpm, |r| format!("{r:.0}")),
            shown(car.lap, |l| l.to_string()),
        ));
    }
    line.push_str(&format!(
        "{:.0} Hz, {}",
        model.rate_hz(),
        format_label(model)
    ));
    if let Some(silent) = model.silent_for {
        line.push_str(&format!(", no packets for {} s", silent.as_secs()));
    }
    destinations_text(model, &mut line);
    line
}

/// ` | simhub 60/s, 3 errors` for each destination of the relay.
fn destinations_text(model: &Model, line: &mut String) {
    for d in model.destinations.iter().flatten() {
        line.push_str(&format!(
            " | {} {}/s",
            printable(&d.name),
            rate(d.packets_per_sec)
        ));
        for (n, what) in [
            (d.filtered, "filtered"),
            (d.rate_limited, "rate-limited"),
            (d.stale, "stale"),
            (d.errors, if d.errors == 1 { "error" } else { "errors" }),
        ] {
            if n > 0 {
                line.push_str(&format!(", {n} {what}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Input, Output};
    use crate::counters::{DropReason, SendErrorKind};
    use crate::dashboard::testing::*;
    use crate::view::model::fixtures::destination;
    use crate::view::DestinationRow;
    use crate::wire::Format;

    #[test]
    fn plain_line_has_speed_gear_rpm_lap_rate_and_format() {
        let t0 = Instant::now();
        let mut model = Model::new(Input::Fixed(Format::Fh6), "test");
        assert!(plain_line(&model).starts_with("no packets yet"));
        for i in 0..30 {
            model.on_datagram(t0 + Duration::from_millis(i * 33), from(), &fixture());
        }
        model.tick(t0 + Duration::from_secs(1));
        assert_eq!(
            plain_line(&model),
            "speed 142 km/h, gear 4, 6543 rpm, lap 4, 30 Hz, fh6"
        );
        let mut dash = destination("dash", Output::Format(Format::Fh5), 30);
        dash.stats.dropped[DropReason::RateLimited as usize] = 26;
        dash.stats.send_errors.add(SendErrorKind::Refused);
        let rows = vec![
            DestinationRow::of(&destination("simhub", Output::Same, 60), 60.0),
            DestinationRow::of(&dash, 30.0),
        ];
        model.set_destinations(rows);
        assert_eq!(
            plain_line(&model),
            "speed 142 km/h, gear 4, 6543 rpm, lap 4, 30 Hz, fh6 \
             | simhub 60/s | dash 30/s, 26 rate-limited, 1 error"
        );
    }

    #[test]
    fn print_lines_stops_at_the_end_of_the_source() {
        let mut source = crate::view::MemorySource::new();
        source.push(std::time::SystemTime::now(), from(), fixture());
        let mut model = Model::new(Input::Auto, "test");
        let mut out = Vec::new();
        print_lines(
            &mut source,
            &mut model,
            &AtomicBool::new(false),
            &mut out,
            Duration::from_secs(1),
            |_| panic!("no line before the end"),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.starts_with("speed 142 km/h, gear 4, 6543 rpm, lap 4"),
            "{text}"
        );
    }
}
