//! The session's lap table in the terminal (issue 34, item 3): one row a lap
//! — its number, time, delta to the best before it and its three splits with
//! theirs — the best marked, as the page's table shows them. It takes the
//! room left under the car's boxes and the destinations: the newest laps that
//! fit, oldest first.

use std::collections::VecDeque;

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Row, Table};
use ratatui::Frame;

use super::pieces::{boxed, DIM};
use crate::telemetry::laps::Lap;
use crate::view::model::{LapTime, NONE};

/// Rows the box asks for beyond its laps: two borders and the header.
pub(super) const LAPS_CHROME: u16 = 3;

/// Laps the box asks room for at most.
pub(super) const LAPS_ROWS: u16 = 10;

/// The height the lap table would like: none before the first lap.
pub(super) fn laps_want(laps: &VecDeque<Lap>) -> u16 {
    if laps.is_empty() {
        return 0;
    }
    u16::try_from(laps.len())
        .unwrap_or(u16::MAX)
        .min(LAPS_ROWS)
        .saturating_add(LAPS_CHROME)
}

/// `+0.123` / `-0.123`; [`NONE`] for none.
fn signed(delta: Option<f32>) -> String {
    match delta.filter(|d| d.is_finite()) {
        Some(d) => format!("{d:+.3}"),
        None => NONE.to_owned(),
    }
}

/// A split and its delta to the best lap's: `27.812 +0.101`.
fn split(time: Option<f32>, delta: Option<f32>) -> String {
    match time.filter(|t| t.is_finite()) {
        Some(t) if delta.is_some_and(f32::is_finite) => format!("{t:.3} {}", signed(delta)),
        Some(t) => format!("{t:.3}"),
        None => NONE.to_owned(),
    }
}

pub(super) fn render_laps(frame: &mut Frame<'_>, area: Rect, laps: &VecDeque<Lap>) {
    let fit = usize::from(area.height.saturating_sub(LAPS_CHROME));
    // The session's best: the newest lap says it.
    let best = laps.back().map(|l| l.best_lap_s);
    let header = Row::new(["lap", "time", "Δ best", "split 1", "split 2", "split 3"]).style(DIM);
    let rows: Vec<Row> = laps
        .iter()
        .skip(laps.len().saturating_sub(fit))
        .map(|l| {
            let is_best = Some(l.lap_time_s) == best;
            let lap = if is_best {
                format!("★ {}", l.lap)
            } else {
                l.lap.to_string()
            };
            let time =
                LapTime::new(l.lap_time_s).map_or_else(|| NONE.to_owned(), |t| t.to_string());
            let row = Row::new(
                [lap, time, signed(l.delta_to_best_s)]
                    .into_iter()
                    .chain((0..3).map(|i| split(l.splits_s[i], l.split_deltas_s[i]))),
            );
            if is_best {
                row.style(Style::new().add_modifier(Modifier::BOLD))
            } else {
                row
            }
        })
        .collect();
    let widths = [
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(15),
        Constraint::Length(15),
        Constraint::Length(15),
    ];
    let table = Table::new(rows, widths).header(header).block(boxed("Laps"));
    frame.render_widget(table, area);
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::config::Input;
    use crate::dashboard::testing::*;
    use crate::simulate::Simulator;
    use crate::view::model::LapTime;
    use crate::view::Model;
    use crate::wire::Format;

    /// A watch model fed a simulated drive until `laps` laps are done.
    fn after_laps(laps: usize) -> Model {
        let mut model = Model::new(Input::Fixed(Format::Fh6), "a simulated drive");
        let mut sim = Simulator::new(Format::Fh6, 5);
        let mut buf = [0u8; 400];
        let t0 = Instant::now();
        let mut i = 0u64;
        while model.lap_table().len() < laps {
            let n = sim.frame(Duration::from_micros(16_667), &mut buf).unwrap();
            model.on_datagram(t0 + Duration::from_micros(16_667 * i), from(), &buf[..n]);
            i += 1;
            assert!(i < 60 * 60 * 30, "{laps} laps in 30 minutes");
        }
        model
    }

    /// The words of each lap row in the Laps box (below its header).
    fn lap_rows(text: &str) -> Vec<Vec<&str>> {
        text.lines()
            .skip_while(|l| !l.contains(" Laps "))
            .skip(2)
            .take_while(|l| l.starts_with('│'))
            .map(|l| l.trim_matches('│').split_whitespace().collect())
            .collect()
    }

    /// Issue 34, item 3: `watch` shows the session's lap table — each lap's
    /// number, time, delta to the best and splits — with the best marked.
    #[test]
    fn watch_shows_each_lap_with_its_time_delta_and_splits_and_marks_the_best() {
        let model = after_laps(3);
        let laps: Vec<_> = model.lap_table().iter().copied().collect();
        let (text, _) = screen(&model, 100, 30);
        assert_shows(&text, &[" Laps ", "Δ best", "split 1"]);
        let rows = lap_rows(&text);
        assert_eq!(rows.len(), 3, "a row a lap:\n{text}");
        let best = laps.last().unwrap().best_lap_s;
        for (lap, cells) in laps.iter().zip(&rows) {
            let time = LapTime::new(lap.lap_time_s).unwrap().to_string();
            let delta = lap
                .delta_to_best_s
                .map_or("–".to_owned(), |d| format!("{d:+.3}"));
            let number = lap.lap.to_string();
            let mut want = vec![number.as_str(), time.as_str(), delta.as_str()];
            if lap.lap_time_s == best {
                want.insert(0, "★");
            }
            assert_eq!(&cells[..want.len()], &want[..], "lap {}", lap.lap);
            let splits: Vec<String> = (0..3)
                .map(|i| format!("{:.3}", lap.splits_s[i].unwrap()))
                .collect();
            for split in &splits {
                assert!(
                    cells.contains(&split.as_str()),
                    "lap {}: {cells:?}",
                    lap.lap
                );
            }
            if let Some(d) = lap.split_deltas_s[0] {
                let d = format!("{d:+.3}");
                assert!(cells.contains(&d.as_str()), "lap {}: {cells:?}", lap.lap);
            }
        }
        assert_eq!(text.matches('★').count(), 1, "one best lap marked:\n{text}");
    }

    /// Before the first lap there is no table; on a short screen the newest
    /// laps that fit.
    #[test]
    fn no_table_before_a_lap_and_the_newest_laps_on_a_short_screen() {
        let (text, _) = screen(&after_laps(0), 100, 30);
        assert!(!text.contains(" Laps "), "{text}");
        let model = after_laps(3);
        // 2 + 18 for the status lines and the car's boxes, 4 for the table:
        // its header and one lap.
        let (text, _) = screen(&model, 100, 24);
        let rows = lap_rows(&text);
        assert_eq!(rows.len(), 1, "room for one lap:\n{text}");
        assert!(
            rows[0].contains(&"3"),
            "the newest lap, 3: {:?}\n{text}",
            rows[0]
        );
    }
}
