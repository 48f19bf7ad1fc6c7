//! The small pieces every part of the dashboard writes with: names made
//! printable, rates, the format's label, the not-racing status, a box and
//! the dim style. Below `lines`, `table` and `view`, which all use them.

use std::borrow::Cow;

use ratatui::style::{Color, Style};
use ratatui::widgets::Block;

use crate::view::model::{Model, NONE};

/// What the status says while the game sends IsRaceOn = 0 frames.
pub const NOT_RACING: &str = "not racing (menu or paused)";

pub(super) const DIM: Style = Style::new().fg(Color::DarkGray);

/// `text` with every control character (ESC, a newline, C1 codes…) written as
/// its Rust escape (`\u{1b}`, `\n`): a name from a config file or a line of the
/// log never drives the terminal (issue 12).
pub(super) fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Packets per second as a whole number ([`NONE`] if it is not a number).
pub(super) fn rate(per_sec: f64) -> String {
    if per_sec.is_finite() {
        format!("{per_sec:.0}")
    } else {
        NONE.to_owned()
    }
}

/// A bordered block titled ` title `.
pub(super) fn boxed(title: &str) -> Block<'static> {
    Block::bordered().title(format!(" {title} "))
}

/// `fh6`, or `fh6 (guess)` while a Horizon format is still the default guess.
pub(super) fn format_label(model: &Model) -> String {
    match model.format() {
        Some((f, true)) => f.id().to_owned(),
        Some((f, false)) => format!("{f} (guess)"),
        None => NONE.to_owned(),
    }
}
