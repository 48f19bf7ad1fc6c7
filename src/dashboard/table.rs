//! The relay's destinations on the dashboard: one row each (sends, pkt/s,
//! sent, latency, the drops and errors, the problems in words), the columns
//! that do not fit left out from the right; names and log lines are made
//! printable first, so none of them drives the terminal.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

use super::pieces::{boxed, printable, rate, DIM};
use crate::counters::Latency;
use crate::report::LatencyText;
use crate::view::model::{DestinationRow, NONE};

/// One column of the destinations table.
struct Column {
    header: &'static str,
    width: u16,
    cell: fn(&DestinationRow) -> Cell<'static>,
}

/// The counts between the name and the problems; the last ones are left out
/// first when the screen is narrow (the errors are in the problems text too).
const COUNTS: [Column; 8] = [
    Column {
        header: "sends",
        width: 6,
        cell: |d| Cell::from(printable(&d.output).into_owned()),
    },
    Column {
        header: "pkt/s",
        width: 6,
        cell: |d| Cell::from(rate(d.packets_per_sec)),
    },
    Column {
        header: "sent",
        width: 9,
        cell: |d| Cell::from(d.sent.to_string()),
    },
    Column {
        header: "latency ms",
        width: 14,
        cell: |d| Cell::from(latency(&d.latency)),
    },
    Column {
        header: "stale",
        width: 6,
        cell: |d| Cell::from(d.stale.to_string()),
    },
    Column {
        header: "filtered",
        width: 8,
        cell: |d| Cell::from(d.filtered.to_string()),
    },
    Column {
        header: "rate-limited",
        width: 12,
        cell: |d| Cell::from(d.rate_limited.to_string()),
    },
    Column {
        header: "errors",
        width: 7,
        cell: |d| {
            let style = if d.errors > 0 {
                Style::new().fg(Color::Red)
            } else {
                Style::new()
            };
            Cell::from(d.errors.to_string()).style(style)
        },
    },
];
/// Counts always shown: sends, pkt/s, sent.
const COUNTS_KEPT: usize = 3;
/// The name column is never wider than this.
const NAME_WIDTH: u16 = 24;

/// p50/p99/max in milliseconds (`0.02/0.87/3.1`), [`NONE`] when nothing was
/// sent in the interval.
fn latency(l: &Latency) -> String {
    if l.count == 0 {
        return NONE.to_owned();
    }
    LatencyText(l).to_string()
}

pub(super) fn render_destinations(
    frame: &mut Frame<'_>,
    area: Rect,
    rows: &[DestinationRow],
    not_shown: u64,
    not_recorded: u64,
) {
    let width = |s: &str| u16::try_from(s.chars().count()).unwrap_or(u16::MAX);
    let names: Vec<String> = rows
        .iter()
        .map(|d| printable(&d.name).into_owned())
        .collect();
    let problems: Vec<String> = rows
        .iter()
        .map(|d| printable(&d.problems).into_owned())
        .collect();
    let name_width = names
        .iter()
        .map(|n| width(n))
        .fold(width("destination"), u16::max)
        .min(NAME_WIDTH);
    let problems_width = problems
        .iter()
        .map(|p| width(p))
        .fold(width("problems"), u16::max);
    // Inside the borders, with one space between columns.
    let room = area.width.saturating_sub(2);
    let needs = |counts: &[Column]| -> u16 {
        let columns: u16 = counts.iter().map(|c| c.width + 1).sum();
        name_width + 1 + columns + problems_width
    };
    let mut shown = COUNTS.len();
    while shown > COUNTS_KEPT && needs(&COUNTS[..shown]) > room {
        shown -= 1;
    }
    let counts = &COUNTS[..shown];
    let header = Row::new(
        std::iter::once("destination")
            .chain(counts.iter().map(|c| c.header))
            .chain(std::iter::once("problems")),
    )
    .style(DIM);
    let body: Vec<Row> = rows
        .iter()
        .zip(names)
        .zip(problems)
        .map(|((d, name), problems)| {
            Row::new(
                std::iter::once(Cell::from(name))
                    .chain(counts.iter().map(|c| (c.cell)(d)))
                    .chain(std::iter::once(Cell::from(problems))),
            )
        })
        .collect();
    let widths: Vec<Constraint> = std::iter::once(Constraint::Length(name_width))
        .chain(counts.iter().map(|c| Constraint::Length(c.width)))
        .chain(std::iter::once(Constraint::Min(8)))
        .collect();
    let mut title = "Destinations".to_owned();
    if not_shown > 0 {
        title += &format!(
            " │ {not_shown} packets not shown: the screen fell behind (forwarding is unaffected)"
        );
    }
    if not_recorded > 0 {
        title += &format!(" │ {not_recorded} packets not recorded: writing the capture failed");
    }
    let table = Table::new(body, widths).header(header).block(boxed(&title));
    frame.render_widget(table, area);
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::config::{Input, Output};
    use crate::counters::{DropReason, SendErrorKind};
    use crate::dashboard::plain_line;
    use crate::dashboard::testing::*;
    use crate::view::model::fixtures::{destination, snapshot};
    use crate::view::{DestinationRates, Model};
    use crate::wire::Format;

    #[test]
    fn says_how_many_packets_a_failed_recording_did_not_write() {
        let mut model = driving("relaying from 127.0.0.1:5400");
        let mut rates = DestinationRates::default();
        let row = destination("simhub", Output::Same, 60);
        model.set_destinations(rates.rows(&snapshot(1_000, vec![row])));
        let (text, _) = screen(&model, 140, 30);
        assert!(!text.contains("not recorded"), "{text}");
        model.set_not_recorded(212);
        let (text, _) = screen(&model, 140, 30);
        assert_shows(
            &text,
            &["212 packets not recorded: writing the capture failed"],
        );
    }

    #[test]
    fn renders_the_relay_s_destinations_from_its_snapshots() {
        let mut model = driving("relaying from 127.0.0.1:5400");
        let mut rates = DestinationRates::default();
        rates.rows(&snapshot(
            0,
            vec![
                destination("simhub", Output::Same, 0),
                destination("dash", Output::Format(Format::Fh5), 0),
            ],
        ));
        let simhub = destination("simhub", Output::Same, 60);
        let mut dash = destination("dash", Output::Format(Format::Fh5), 30);
        dash.stats.dropped[DropReason::NotRacing as usize] = 4;
        dash.stats.dropped[DropReason::RateLimited as usize] = 26;
        dash.stats.dropped[DropReason::Stale as usize] = 5;
        dash.latency = Latency {
            count: 25,
            p50: Duration::from_micros(23),
            p99: Duration::from_micros(870),
            max: Duration::from_micros(3_140),
        };
        for _ in 0..7 {
            dash.stats.send_errors.add(SendErrorKind::Refused);
        }
        model.set_destinations(rates.rows(&snapshot(1_000, vec![simhub, dash])));
        model.set_not_shown(12);
        model.set_log_line(Some(
            "12:00:00 WARN  dash (127.0.0.1:9002): nothing".to_owned(),
        ));
        let (text, buffer) = screen(&model, 120, 30);
        assert_shows(
            &text,
            &[
                "forza-relay run",
                "relaying from 127.0.0.1:5400",
                "142 km/h",
                "Gear 4",
                "destination",
                "pkt/s",
                "latency ms",
                "stale",
                "rate-limited",
                "12 packets not shown: the screen fell behind",
                "log: 12:00:00 WARN  dash (127.0.0.1:9002): nothing",
            ],
        );
        // destination, sends, pkt/s, sent, latency, stale, filtered,
        // rate-limited, errors, problems.
        assert_eq!(
            row(&text, "simhub"),
            ["simhub", "same", "60", "60", NONE, "0", "0", "0", "0"]
        );
        assert_eq!(
            row(&text, "dash"),
            [
                "dash",
                "fh5",
                "30",
                "30",
                "0.02/0.87/3.1",
                "5",
                "4",
                "26",
                "7",
                "7",
                "refused",
                "(nothing",
                "listening)"
            ]
        );
        let (_, y) = at(&text, "│dash ");
        let line = text.lines().nth(usize::from(y)).unwrap();
        let errors = line.find(" 7 ").expect("the error count") + 1;
        let x = line[..errors].chars().count() as u16;
        assert_eq!(buffer[(x, y)].symbol(), "7");
        assert_eq!(buffer[(x, y)].fg, Color::Red, "errors are red");
    }

    /// Issue 13 item 8: in an 80×24 terminal `run --watch` hid the Brake and
    /// Handbrake rows and cut the problems column to `224 refuse`.
    #[test]
    fn issue_13_an_80x24_screen_with_four_destinations_shows_every_input() {
        let mut model = driving("relaying from 0.0.0.0:5400");
        let mut rows = Vec::new();
        for (name, refused) in [
            ("simhub", 0),
            ("motion-rig", 224),
            ("dash", 3),
            ("logger", 0),
        ] {
            let mut d = destination(name, Output::Format(Format::Fh5), 900);
            for _ in 0..refused {
                d.stats.send_errors.add(SendErrorKind::Refused);
            }
            d.stats.dropped[DropReason::RateLimited as usize] = 1_234;
            rows.push(DestinationRow::of(&d, 60.0));
        }
        model.set_destinations(rows);
        model.set_log_line(Some(
            "12:00:00 WARN  motion-rig (127.0.0.1:9002): nothing listening".to_owned(),
        ));
        let (text, _) = screen(&model, 80, 24);
        assert_shows(
            &text,
            &[
                "Throttle",
                "Brake",
                "Clutch",
                "Handbrake",
                "Steer",
                "142 km/h",
                "Gear 4",
                "6543 / 8250 rpm",
                "Best    1:23.456",
                "simhub",
                "motion-rig",
                "dash",
                "logger",
                "224 refused (nothing listening)",
                "3 refused (nothing listening)",
                "log: 12:00:00 WARN",
            ],
        );
    }

    /// Issue 12 item 12: a destination's name (or a log line) with ESC or a
    /// newline went to the terminal raw.
    #[test]
    fn issue_12_control_characters_in_names_are_escaped_on_screen() {
        let mut model = Model::new(Input::Auto, "relaying from 127.0.0.1:5400");
        model.on_datagram(Instant::now(), from(), &fixture());
        let evil = "evil\x1b[2J\nname\u{9b}";
        model.set_destinations(vec![DestinationRow::of(
            &destination(evil, Output::Same, 5),
            1.0,
        )]);
        model.set_log_line(Some(format!("12:00:00 WARN  {evil}: refused")));
        let (text, buffer) = screen(&model, 110, 30);
        let control: Vec<&str> = buffer
            .content()
            .iter()
            .map(|c| c.symbol())
            .filter(|s| s.chars().any(char::is_control))
            .collect();
        assert!(control.is_empty(), "{control:?} on screen:\n{text}");
        let shown = r"evil\u{1b}[2J\nname\u{9b}";
        assert_shows(
            &text,
            &[shown, &format!("log: 12:00:00 WARN  {shown}: refused")],
        );
        let line = plain_line(&model);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.contains(&format!(" | {shown} 1/s")), "{line}");
    }
}
