//! `forza-relay watch`: the full-screen dashboard (ratatui on crossterm, so it runs
//! in Windows Terminal as in any terminal), or one plain line per second when
//! stdout is not a terminal.
//!
//! [`render`] draws a [`Model`] and nothing else; the loop reads the source until
//! the next frame is due, then reads the keys and redraws, at most [`FPS`] times a
//! second whatever the packet rate. The terminal is restored on every way out: `q`,
//! Esc, Ctrl-C, an error (a guard's `Drop`) and a panic (a panic hook).

use std::borrow::Cow;
use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Gauge, Paragraph, Row, Table};
use ratatui::Frame;

use super::columns::WHEELS;
use super::console;
use super::model::{grip_lost, shown, Car, DestinationRow, Finite, LapTime, Model, NONE};
use super::source::{Next, Source};
use crate::config::Input;
use crate::stats::{Latency, LatencyText};

/// Redraws per second at most.
pub const FPS: u32 = 30;
/// Above this fraction of the redline the RPM bar turns red.
const REDLINE_WARN: f64 = 0.9;

/// How to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchOptions {
    /// The input format, or auto.
    pub input: Input,
}

/// Watches `source` until `q`, Esc or Ctrl-C (or `stop`): the dashboard when stdout
/// is a terminal, else one line per second on stdout until `stop` or the source's
/// end.
pub fn watch(source: &mut dyn Source, options: &WatchOptions, stop: &AtomicBool) -> io::Result<()> {
    let mut model = Model::new(options.input, source.describe());
    if io::stdout().is_terminal() {
        dashboard(source, &mut model, stop, |_| {})
    } else {
        print_lines(
            source,
            &mut model,
            stop,
            &mut io::stdout().lock(),
            Duration::from_secs(1),
            |_| {},
        )
    }
}

/// Restores the terminal when dropped, whatever ended the dashboard.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = ratatui::try_restore();
        let _ = execute!(io::stdout(), cursor::Show);
    }
}

/// Runs the full-screen dashboard on `model` until `q`, Esc, Ctrl-C or `stop`.
/// `on_frame` runs before each redraw: the place to hand the model fresh data from
/// elsewhere (the relay's destinations, [`Model::set_destinations`]). Log lines
/// are held back meanwhile (the newest is shown) and printed once the terminal
/// is restored ([`console`]).
pub fn dashboard(
    source: &mut dyn Source,
    model: &mut Model,
    stop: &AtomicBool,
    mut on_frame: impl FnMut(&mut Model),
) -> io::Result<()> {
    // Dropped last: the held lines go to the restored terminal.
    let _held = console::hold();
    // Made first, so a failure halfway through try_init is undone too.
    let _restore = Restore;
    let mut terminal = ratatui::try_init()?;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // ratatui's hook (inside `hook`) leaves raw mode and the alternate screen;
        // the cursor it may leave hidden.
        let _ = execute!(io::stdout(), cursor::Show);
        hook(info);
    }));
    let frame = Duration::from_secs(1) / FPS;
    let mut next_draw = Instant::now();
    loop {
        while !model.ended {
            let left = next_draw.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match source.next(left)? {
                Next::Datagram(d) => model.on_datagram(Instant::now(), d.from, d.payload),
                Next::Idle => {}
                Next::End => model.end(),
            }
        }
        if model.ended {
            std::thread::sleep(next_draw.saturating_duration_since(Instant::now()));
        }
        // Before the keys: after a hang-up, crossterm's poll spins on the
        // terminal's end of file and never returns.
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        while event::poll(Duration::ZERO)? {
            if let Event::Key(key) = event::read()? {
                let quit = key.kind == KeyEventKind::Press
                    && (matches!(key.code, KeyCode::Char('q' | 'Q') | KeyCode::Esc)
                        || (key.code == KeyCode::Char('c')
                            && key.modifiers.contains(KeyModifiers::CONTROL)));
                if quit {
                    return Ok(());
                }
            }
        }
        let now = Instant::now();
        model.tick(now);
        on_frame(model);
        model.set_log_line(console::latest());
        terminal.draw(|f| render(f, model))?;
        next_draw = now + frame;
    }
}

/// Prints [`plain_line`] every `interval` until `stop` or the source's end (then
/// once more). `on_line` runs before each line but the last, as `on_frame` does
/// for [`dashboard`]. A closed stdout (`| head`) ends it quietly.
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

/// What the status says while the game sends IsRaceOn = 0 frames.
pub const NOT_RACING: &str = "not racing (menu or paused)";

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

/// `fh6`, or `fh6 (guess)` while a Horizon format is still the default guess.
fn format_label(model: &Model) -> String {
    match model.format() {
        Some((f, true)) => f.id().to_owned(),
        Some((f, false)) => format!("{f} (guess)"),
        None => NONE.to_owned(),
    }
}

/// A lap time as `m:ss.mmm`; [`NONE`] for none.
pub fn lap_time(time: Option<LapTime>) -> String {
    shown(time, |t| t.to_string())
}

const DIM: Style = Style::new().fg(Color::DarkGray);
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
const ALERT: Style = Style::new().fg(Color::White).bg(Color::Red);

/// The car to draw, and whether it is the last one before a menu or pause
/// (then every value is dimmed).
#[derive(Clone, Copy)]
struct View<'a> {
    car: Option<&'a Car>,
    dim: bool,
}

impl View<'_> {
    /// The base style of a box.
    fn style(self) -> Style {
        if self.dim {
            DIM
        } else {
            Style::new()
        }
    }

    /// `color`, or grey when dimmed.
    fn color(self, color: Color) -> Color {
        if self.dim {
            Color::DarkGray
        } else {
            color
        }
    }
}

/// Draws one of the car's boxes.
type DrawBox = fn(&mut Frame<'_>, Rect, View<'_>);

/// Rows the car's boxes take when the screen has room.
const BODY_HEIGHT: u16 = 18;
/// Rows kept for the car however many destinations there are: Speed and Inputs.
const BODY_KEEP: u16 = 11;

/// Stacks boxes of (height, rank) in `area` from the top, in order, leaving out
/// the lowest-ranked ones until the rest fit; `None` for a box left out.
fn fit<const N: usize>(area: Rect, boxes: [(u16, u8); N]) -> [Option<Rect>; N] {
    let mut shown = [true; N];
    let mut total: u16 = boxes.iter().map(|&(height, _)| height).sum();
    let mut by_rank: [usize; N] = std::array::from_fn(|i| i);
    by_rank.sort_by_key(|&i| boxes[i].1);
    for i in by_rank {
        if total <= area.height {
            break;
        }
        shown[i] = false;
        total -= boxes[i].0;
    }
    let mut y = area.y;
    std::array::from_fn(|i| {
        let (height, _) = boxes[i];
        (shown[i] && height <= area.bottom().saturating_sub(y)).then(|| {
            let r = Rect::new(area.x, y, area.width, height);
            y += height;
            r
        })
    })
}

/// Draws the dashboard for `model` over the whole frame.
pub fn render(frame: &mut Frame<'_>, model: &Model) {
    let car = View {
        car: model.car(),
        dim: model.not_racing(),
    };
    let area = frame.area();
    let log_height = u16::from(model.log_line.is_some()).min(area.height);
    // Title, status and log first; then the car's boxes get what they need of
    // the rest, keeping at least Speed and Inputs when the table is long; the
    // table gets the remainder.
    let room = area.height.saturating_sub(2 + log_height);
    let table_want = model.destinations.as_ref().map_or(0, |rows| {
        u16::try_from(rows.len())
            .unwrap_or(u16::MAX)
            .saturating_add(3)
    });
    let body_height = BODY_HEIGHT
        .min(room.saturating_sub(table_want))
        .max(BODY_KEEP.min(room));
    let [title, status, body, destinations, log] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(body_height),
        Constraint::Length(table_want.min(room - body_height)),
        Constraint::Length(log_height),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(title_line(model)), title);
    frame.render_widget(Paragraph::new(status_line(model)), status);

    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
    // Boxes by rank: when the body is short, the lowest ranks go first (detail
    // before the inputs, issue 13).
    let [speed, rpm, inputs, motion] = fit(left, [(4, 3), (3, 2), (7, 4), (4, 1)]);
    let [tyres, car_area, race] = fit(right, [(7, 3), (3, 1), (6, 2)]);
    let boxes: [(Option<Rect>, DrawBox); 7] = [
        (speed, render_speed),
        (rpm, render_rpm),
        (inputs, render_inputs),
        (motion, render_motion),
        (tyres, render_tyres),
        (car_area, render_car),
        (race, render_race),
    ];
    for (area, render) in boxes {
        if let Some(area) = area {
            render(frame, area, car);
        }
    }
    if let Some(rows) = &model.destinations {
        render_destinations(
            frame,
            destinations,
            rows,
            model.not_shown,
            model.not_recorded,
        );
    }
    if let Some(line) = &model.log_line {
        let style = if line.contains(" WARN ") || line.contains(" ERROR ") {
            Style::new().fg(Color::Yellow)
        } else {
            DIM
        };
        let line = format!(" log: {}", printable(line));
        frame.render_widget(Paragraph::new(line).style(style), log);
    }
}

fn title_line(model: &Model) -> Line<'static> {
    let command = if model.destinations.is_some() {
        " forza-relay run "
    } else {
        " forza-relay watch "
    };
    Line::from(vec![
        Span::styled(command, BOLD),
        Span::raw(format!("│ {} ", printable(&model.source))),
        Span::raw(format!("│ format {} ", format_label(model))),
        Span::styled(format!("│ {:.0} Hz ", model.rate_hz()), BOLD),
        Span::styled("│ q quits", DIM),
    ])
}

fn status_line(model: &Model) -> Line<'static> {
    let text = if model.ended {
        format!("the end: {} packets read; q quits", model.packets())
    } else if let Some(silent) = model.silent_for {
        format!(
            "no packets for {} s: is the game paused, in a menu, or not focused?",
            silent.as_secs()
        )
    } else if model.packets() == 0 {
        "waiting for packets: in the game, turn Data Out on and send to this PC's address and port"
            .to_owned()
    } else if model.not_racing() {
        if model.car().is_some() {
            format!("{NOT_RACING}: the last racing values, dimmed")
        } else {
            NOT_RACING.to_owned()
        }
    } else if let Some(why) = model.why_ignored() {
        why
    } else if model.car().is_some_and(|c| !c.has_dash()) {
        "sled packets carry no speed, gear, pedals, tyre temperatures or laps".to_owned()
    } else {
        let sender = model
            .sender
            .map(|s| format!(" from {s}"))
            .unwrap_or_default();
        format!("{} packets{sender}", model.packets())
    };
    let style = if model.silent_for.is_some() || model.not_racing() || model.ignored() > 0 {
        Style::new().fg(Color::Yellow)
    } else {
        DIM
    };
    Line::styled(format!(" {text}"), style)
}

fn boxed(title: &str) -> Block<'static> {
    Block::bordered().title(format!(" {title} "))
}

fn render_speed(frame: &mut Frame<'_>, area: Rect, view: View<'_>) {
    let car = view.car;
    let kmh = shown(car.and_then(|c| c.speed_kmh), |s| format!("{s:.0}"));
    let mph = shown(car.and_then(|c| c.speed_mph), |s| format!("{s:.0}"));
    let gear = shown(car.and_then(|c| c.gear), |g| g.to_string());
    let race_on = shown(car, |c| u8::from(c.racing).to_string());
    let lines = vec![
        Line::from(vec![
            Span::styled(format!("{kmh} km/h"), BOLD),
            Span::raw(format!("   {mph} mph")),
        ]),
        Line::from(vec![
            Span::raw("Gear "),
            Span::styled(gear, BOLD),
            Span::raw(format!("   IsRaceOn {race_on}")),
        ]),
    ];
    let speed = Paragraph::new(lines).block(boxed("Speed"));
    frame.render_widget(speed.style(view.style()), area);
}

fn render_rpm(frame: &mut Frame<'_>, area: Rect, view: View<'_>) {
    let car = view.car;
    let ratio = car.and_then(|c| c.rev_fraction).map_or(0.0, Finite::get);
    let label = match car {
        Some(c) => format!(
            "{} / {} rpm",
            shown(c.rpm, |r| format!("{r:.0}")),
            shown(c.redline_rpm, |r| format!("{r:.0}"))
        ),
        None => format!("{NONE} rpm"),
    };
    let color = view.color(if f64::from(ratio) > REDLINE_WARN {
        Color::Red
    } else {
        Color::Green
    });
    // The model holds the fraction in 0..=1: Gauge::ratio asserts that it is.
    let gauge = Gauge::default()
        .block(boxed("RPM"))
        .style(view.style())
        .gauge_style(Style::new().fg(color).bg(Color::Black))
        .ratio(f64::from(ratio))
        .label(label);
    frame.render_widget(gauge, area);
}

fn render_inputs(frame: &mut Frame<'_>, area: Rect, view: View<'_>) {
    let car = view.car;
    let block = boxed("Inputs").style(view.style());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = Layout::vertical([Constraint::Length(1); 5]).split(inner);
    let pedals = [
        ("Throttle", car.and_then(|c| c.throttle_pct), Color::Green),
        ("Brake", car.and_then(|c| c.brake_pct), Color::Red),
        ("Clutch", car.and_then(|c| c.clutch_pct), Color::Blue),
        (
            "Handbrake",
            car.and_then(|c| c.handbrake_pct),
            Color::Magenta,
        ),
    ];
    for (row, (name, pct, color)) in rows.iter().zip(pedals) {
        let [label, bar] =
            Layout::horizontal([Constraint::Length(10), Constraint::Min(1)]).areas(*row);
        frame.render_widget(Paragraph::new(name).style(view.style()), label);
        // The model holds a pedal in 0..=100 %.
        let gauge = Gauge::default()
            .gauge_style(Style::new().fg(view.color(color)).bg(Color::Black))
            .ratio(pct.map_or(0.0, |p| f64::from(p.get()) / 100.0))
            .label(shown(pct, |p| format!("{p:.0}%")));
        frame.render_widget(gauge, bar);
    }
    let [label, bar] =
        Layout::horizontal([Constraint::Length(10), Constraint::Min(1)]).areas(rows[4]);
    frame.render_widget(Paragraph::new("Steer").style(view.style()), label);
    let steer = car.and_then(|c| c.steer);
    let steer = Paragraph::new(steer_bar(steer, bar.width)).style(view.style());
    frame.render_widget(steer, bar);
}

/// A track `width` wide with the centre marked and the wheel's position as a
/// block, then the percentage: `──────┼──█───  +42%`.
fn steer_bar(axis: Option<Finite>, width: u16) -> String {
    let text = shown(axis, |a| format!("{:+.0}%", a.get() * 100.0));
    let track = usize::from(width)
        .saturating_sub(text.chars().count() + 1)
        .max(3);
    let centre = track / 2;
    // The model holds the axis in -1..=1.
    let at = axis.map(|a| ((a.get() + 1.0) / 2.0 * (track - 1) as f32).round() as usize);
    let mut s: String = (0..track)
        .map(|i| match (Some(i) == at, i == centre) {
            (true, _) => '█',
            (false, true) => '┼',
            (false, false) => '─',
        })
        .collect();
    s.push(' ');
    s.push_str(&text);
    s
}

fn render_motion(frame: &mut Frame<'_>, area: Rect, view: View<'_>) {
    let car = view.car;
    let g = |v: Option<Finite>| shown(v, |v| format!("{v:+.2}"));
    let lines = vec![
        Line::raw(format!(
            "G lat {}   long {}   vert {}",
            g(car.and_then(|c| c.g_lat)),
            g(car.and_then(|c| c.g_long)),
            g(car.and_then(|c| c.g_vert)),
        )),
        Line::raw(format!(
            "Drift {}",
            shown(car.and_then(|c| c.drift_angle_deg), |d| {
                let side = if d.get() > 0.5 {
                    "sliding right"
                } else if d.get() < -0.5 {
                    "sliding left"
                } else {
                    "straight"
                };
                format!("{d:+.1}° ({side})")
            })
        )),
    ];
    let motion = Paragraph::new(lines).block(boxed("Motion"));
    frame.render_widget(motion.style(view.style()), area);
}

fn render_tyres(frame: &mut Frame<'_>, area: Rect, view: View<'_>) {
    let car = view.car;
    let header = Row::new(["", "°C", "slip", "angle", "comb", "susp"]).style(DIM);
    let tyres = car.map(|c| c.tyres.into_array());
    let rows: Vec<Row> = (0..4)
        .map(|w| {
            let tyre = tyres.map(|t| t[w]).unwrap_or_default();
            let slip = |v: Option<Finite>| {
                let style = if grip_lost(v) && !view.dim {
                    ALERT
                } else {
                    Style::new()
                };
                Cell::from(shown(v, |v| format!("{v:+.2}"))).style(style)
            };
            Row::new([
                Cell::from(WHEELS[w]),
                Cell::from(shown(tyre.temp_c, |t| format!("{t:.0}"))),
                slip(tyre.slip_ratio),
                slip(tyre.slip_angle),
                slip(tyre.combined_slip),
                Cell::from(shown(tyre.suspension, |s| format!("{s:.2}"))),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(3),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(5),
    ];
    let title = if car.is_some_and(|c| c.grip_lost) {
        "Tyres: GRIP LOST"
    } else {
        "Tyres"
    };
    let table = Table::new(rows, widths)
        .header(header)
        .block(boxed(title))
        .style(view.style());
    frame.render_widget(table, area);
}

fn render_car(frame: &mut Frame<'_>, area: Rect, view: View<'_>) {
    let line = match view.car {
        Some(c) => {
            let class = c
                .class_letter
                .map_or_else(|| format!("#{}", c.class), str::to_owned);
            format!(
                "Class {class}  PI {}  {}  {} cyl  car {}",
                c.performance_index,
                c.drivetrain.unwrap_or(NONE),
                c.cylinders,
                c.ordinal
            )
        }
        None => format!("Class {NONE}  PI {NONE}  {NONE}  {NONE} cyl"),
    };
    let car = Paragraph::new(line).block(boxed("Car"));
    frame.render_widget(car.style(view.style()), area);
}

fn render_race(frame: &mut Frame<'_>, area: Rect, view: View<'_>) {
    let car = view.car;
    let lines = vec![
        Line::raw(format!(
            "Lap {}   Position {}",
            shown(car.and_then(|c| c.lap), |v| v.to_string()),
            shown(car.and_then(|c| c.race_position), |v| v.to_string()),
        )),
        Line::raw(format!(
            "Current {}",
            lap_time(car.and_then(|c| c.current_lap))
        )),
        Line::raw(format!(
            "Last    {}",
            lap_time(car.and_then(|c| c.last_lap))
        )),
        Line::raw(format!(
            "Best    {}",
            lap_time(car.and_then(|c| c.best_lap))
        )),
    ];
    let race = Paragraph::new(lines).block(boxed("Race"));
    frame.render_widget(race.style(view.style()), area);
}

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

/// `text` with every control character (ESC, a newline, C1 codes…) written as
/// its Rust escape (`\u{1b}`, `\n`): a name from a config file or a line of the
/// log never drives the terminal (issue 12).
fn printable(text: &str) -> Cow<'_, str> {
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

/// p50/p99/max in milliseconds (`0.02/0.87/3.1`), [`NONE`] when nothing was
/// sent in the interval.
fn latency(l: &Latency) -> String {
    if l.count == 0 {
        return NONE.to_owned();
    }
    LatencyText(l).to_string()
}

/// Packets per second as a whole number ([`NONE`] if it is not a number).
fn rate(per_sec: f64) -> String {
    if per_sec.is_finite() {
        format!("{per_sec:.0}")
    } else {
        NONE.to_owned()
    }
}

fn render_destinations(
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
    use super::*;
    use crate::config::Output;
    use crate::stats::{DropReason, SendErrorKind};
    use crate::watch::{DestinationRates, DestinationRow};
    use crate::wire::{Format, Packet, Wheels};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use std::net::SocketAddr;

    fn from() -> SocketAddr {
        "127.0.0.1:5555".parse().unwrap()
    }

    /// An fh6 packet built field by field: 39.4444 m/s is 142 km/h and 88 mph.
    fn fixture() -> Vec<u8> {
        let mut buf = vec![0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(1);
        p.set_speed(39.444_4).unwrap();
        p.set_gear(4).unwrap();
        p.set_engine_max_rpm(8_250.0);
        p.set_current_engine_rpm(6_543.0);
        p.set_accel(255).unwrap();
        p.set_brake(51).unwrap();
        p.set_steer(-127).unwrap();
        p.set_acceleration_x(9.806_65);
        p.set_acceleration_z(-19.613_3);
        p.set_velocity_x(3.0);
        p.set_velocity_z(4.0);
        p.set_tire_temp(Wheels::from_array([212.0, 194.0, 176.0, 176.0]))
            .unwrap();
        p.set_tire_combined_slip(Wheels::from_array([0.1, 1.5, 0.2, 0.3]));
        p.set_car_class(5);
        p.set_car_performance_index(901);
        p.set_drivetrain_type(2);
        p.set_num_cylinders(8);
        p.set_lap_number(3).unwrap();
        p.set_race_position(2).unwrap();
        p.set_current_lap(12.75).unwrap();
        p.set_last_lap(84.5).unwrap();
        p.set_best_lap(83.456).unwrap();
        buf
    }

    /// A model of `source` that read the fixture 60 times in a second.
    fn driving(source: &str) -> Model {
        let t0 = Instant::now();
        let mut model = Model::new(Input::Auto, source);
        for i in 0..60 {
            model.on_datagram(t0 + Duration::from_millis(i * 16), from(), &fixture());
        }
        model.tick(t0 + Duration::from_secs(1));
        model
    }

    fn screen(model: &Model, width: u16, height: u16) -> (String, ratatui::buffer::Buffer) {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| render(f, model)).unwrap();
        let buffer = terminal.backend().buffer().clone();
        let text = (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n");
        (text, buffer)
    }

    #[track_caller]
    fn assert_shows(text: &str, parts: &[&str]) {
        for part in parts {
            assert!(text.contains(part), "{part:?} not on the screen:\n{text}");
        }
    }

    #[test]
    fn renders_the_key_values_of_a_packet() {
        let model = driving("listening on 127.0.0.1:5400");
        let (text, buffer) = screen(&model, 100, 24);
        assert_shows(
            &text,
            &[
                "142 km/h",
                "88 mph",
                "Gear 4",
                "6543 / 8250 rpm",
                "100%",
                "20%",
                "-100%",
                "G lat +1.00",
                "long -2.00",
                "Drift +36.9°",
                "Class S2",
                "PI 901",
                "AWD",
                "8 cyl",
                // LapNumber 3 counts from 0: the driver is on lap 4 (issue 13).
                "Lap 4",
                "Position 2",
                "Current 0:12.750",
                "Last    1:24.500",
                "Best    1:23.456",
                "IsRaceOn 1",
                "60 Hz",
                "format fh6 (guess)",
                "listening on 127.0.0.1:5400",
                "60 packets from 127.0.0.1:5555",
                "GRIP LOST",
                "+1.50",
            ],
        );
        // FL 212 °F is 100 °C, RR 176 °F is 80 °C.
        let fl = text.lines().find(|l| l.contains("FL ")).unwrap();
        assert!(fl.contains("100"), "{fl}");
        let rr = text.lines().find(|l| l.contains("RR ")).unwrap();
        assert!(rr.contains("80"), "{rr}");
        // The lost-grip slip is highlighted, the others are not.
        assert_eq!(buffer[at(&text, "+1.50")].bg, Color::Red);
        assert_ne!(buffer[at(&text, "+0.10")].bg, Color::Red);
    }

    /// The cell where `needle` starts on the screen (every symbol one column wide).
    #[track_caller]
    fn at(text: &str, needle: &str) -> (u16, u16) {
        let (y, line) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not on the screen"));
        let byte = line.find(needle).expect("found above");
        (line[..byte].chars().count() as u16, y as u16)
    }

    #[test]
    fn renders_placeholders_before_any_packet() {
        let model = Model::new(Input::Fixed(Format::Fm7), "listening on 0.0.0.0:5400");
        let (text, _) = screen(&model, 100, 30);
        assert_shows(
            &text,
            &[
                "forza-relay watch",
                "waiting for packets",
                "– km/h",
                "Gear –",
                "Best    –",
            ],
        );
        assert!(!text.contains("Destinations"), "{text}");
    }

    use crate::watch::model::fixtures::{destination, snapshot};

    /// The words of the screen line that starts (inside its border) with `name`.
    #[track_caller]
    fn row<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        let line = text
            .lines()
            .find(|l| l.trim_start_matches('│').starts_with(name))
            .unwrap_or_else(|| panic!("no row {name:?}:\n{text}"));
        line.trim_matches('│').split_whitespace().collect()
    }

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

    #[test]
    fn a_sled_packet_shows_what_it_has() {
        let mut buf = vec![0u8; 232];
        let mut p = Packet::new_checked(&mut buf[..], Format::Sled).unwrap();
        p.set_is_race_on(1);
        p.set_current_engine_rpm(5_000.0);
        p.set_engine_max_rpm(7_000.0);
        let mut model = Model::new(Input::Auto, "test");
        model.on_datagram(Instant::now(), from(), &buf);
        let (text, _) = screen(&model, 100, 24);
        assert_shows(
            &text,
            &[
                "5000 / 7000 rpm",
                "– km/h",
                "sled packets carry no speed",
                "format sled",
            ],
        );
        assert_eq!(
            plain_line(&model),
            "speed –, gear –, 5000 rpm, lap –, 0 Hz, sled"
        );
    }

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
        let mut source = crate::watch::MemorySource::new();
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

    /// Issue 12 item 2: `CurrentEngineRpm = NaN` with `EngineMaxRpm > 0` (or both
    /// +inf) made the RPM fraction NaN, and ratatui's `Gauge::ratio` asserted.
    #[test]
    fn issue_12_a_nan_or_infinite_rpm_renders_as_a_dash() {
        for (rpm, max, label) in [
            (f32::NAN, 8_250.0, "– / 8250 rpm"),
            (f32::INFINITY, f32::INFINITY, "– / – rpm"),
        ] {
            let mut buf = fixture();
            let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
            p.set_current_engine_rpm(rpm);
            p.set_engine_max_rpm(max);
            p.set_speed(f32::NAN).unwrap();
            p.set_best_lap(f32::INFINITY).unwrap();
            p.set_last_lap(3.0e38).unwrap();
            p.set_acceleration_x(f32::NAN);
            p.set_tire_temp(Wheels::from_array([f32::NAN; 4])).unwrap();
            let mut model = Model::new(Input::Auto, "test");
            model.on_datagram(Instant::now(), from(), &buf);
            for (width, height) in [(80, 24), (20, 5), (200, 60)] {
                screen(&model, width, height);
            }
            let (text, _) = screen(&model, 100, 30);
            assert_shows(
                &text,
                &["– km/h", label, "Best    –", "Last    –", "G lat –"],
            );
            assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
            let line = plain_line(&model);
            assert!(line.starts_with("speed –, gear 4, – rpm, "), "{line}");
        }
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

    /// FH6's frame in a menu or pause: all zero but TimestampMS.
    fn menu_frame() -> Vec<u8> {
        let mut buf = vec![0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_timestamp_ms(77);
        buf
    }

    /// Issue 13 item 7: menu and pause frames were shown as driving (`0 km/h`,
    /// `Gear R`, tyres at −18 °C, `Class D PI 0`).
    #[test]
    fn issue_13_a_menu_frame_keeps_the_last_racing_values_dimmed() {
        let t0 = Instant::now();
        let mut model = Model::new(Input::Fixed(Format::Fh6), "test");
        model.on_datagram(t0, from(), &menu_frame());
        let (text, _) = screen(&model, 100, 30);
        assert_shows(&text, &["not racing (menu or paused)", "– km/h", "Gear –"]);
        assert!(
            !text.contains("Gear R") && !text.contains("Class D"),
            "{text}"
        );
        assert_eq!(plain_line(&model), "not racing (menu or paused), 0 Hz, fh6");

        model.on_datagram(t0, from(), &fixture());
        model.on_datagram(t0, from(), &menu_frame());
        let (text, buffer) = screen(&model, 100, 30);
        assert_shows(
            &text,
            &[
                "not racing (menu or paused): the last racing values, dimmed",
                "142 km/h",
                "Gear 4",
                "Class S2",
                "6543 / 8250 rpm",
            ],
        );
        assert!(!text.contains("Gear R") && !text.contains("-18"), "{text}");
        for value in ["142 km/h", "Gear 4", "Class S2", "Lap 4", "FL  100"] {
            assert_eq!(buffer[at(&text, value)].fg, Color::DarkGray, "{value}");
        }
        assert_ne!(
            buffer[at(&text, "+1.50")].bg,
            Color::Red,
            "no alert when dimmed"
        );
        assert!(
            plain_line(&model)
                .starts_with("not racing (menu or paused); last: speed 142 km/h, gear 4, "),
            "{}",
            plain_line(&model)
        );

        model.on_datagram(t0, from(), &fixture());
        let (text, buffer) = screen(&model, 100, 30);
        assert!(!text.contains("not racing"), "{text}");
        assert_ne!(buffer[at(&text, "142 km/h")].fg, Color::DarkGray);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Four bytes of a packet: any bytes, or a float a screen could choke on.
        fn word() -> impl Strategy<Value = [u8; 4]> {
            prop_oneof![
                3 => any::<[u8; 4]>(),
                1 => prop::sample::select(vec![
                    f32::NAN,
                    -f32::NAN,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::MAX,
                    f32::MIN,
                    f32::MIN_POSITIVE,
                    -0.0,
                    1.0e7,
                    3.0e38,
                ])
                .prop_map(f32::to_le_bytes),
            ]
        }

        /// A datagram of every Forza length, and of others.
        fn datagram() -> impl Strategy<Value = Vec<u8>> {
            let len = prop_oneof![
                4 => prop::sample::select(vec![232usize, 311, 324, 331]),
                1 => 0usize..400,
            ];
            (len, prop::collection::vec(word(), 100)).prop_map(|(len, words)| {
                let mut bytes: Vec<u8> = words.concat();
                bytes.resize(len, 0);
                bytes
            })
        }

        fn input() -> impl Strategy<Value = Input> {
            prop_oneof![
                Just(Input::Auto),
                prop::sample::select(Format::ALL.to_vec()).prop_map(Input::Fixed),
            ]
        }

        fn row() -> impl Strategy<Value = DestinationRow> {
            (
                "[a-z0-9 \\x00-\\x1f\\x7f]{0,30}",
                any::<f64>(),
                any::<[u64; 4]>(),
                "[a-z0-9 (),]{0,60}",
            )
                .prop_map(
                    |(name, rate, [sent, filtered, rate_limited, errors], problems)| {
                        DestinationRow {
                            name,
                            output: "fh5".to_owned(),
                            packets_per_sec: rate,
                            sent,
                            filtered,
                            rate_limited,
                            errors,
                            problems,
                            ..Default::default()
                        }
                    },
                )
        }

        /// The screen rows that show the car (title, status and the car's boxes).
        const CAR_ROWS: usize = 20;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            /// Issue 12 items 2 and 12: arbitrary bytes of every Forza length go
            /// through the model and render at any size, with and without a
            /// destinations table (names with control characters), and no value
            /// on the screen is NaN or infinite, no control character reaches it.
            #[test]
            fn any_datagram_renders_at_any_size(
                datagrams in prop::collection::vec(datagram(), 1..4),
                input in input(),
                rows in prop::option::of(prop::collection::vec(row(), 0..6)),
            ) {
                let t0 = Instant::now();
                let mut model = Model::new(input, "listening on 127.0.0.1:5400");
                for (i, d) in datagrams.iter().enumerate() {
                    model.on_datagram(t0 + Duration::from_millis(i as u64 * 16), from(), d);
                }
                model.tick(t0 + Duration::from_secs(1));
                if let Some(rows) = rows {
                    model.set_destinations(rows);
                }
                for (width, height) in [(0, 0), (1, 1), (20, 5), (80, 24), (200, 60)] {
                    let (_, buffer) = screen(&model, width, height);
                    let control = buffer
                        .content()
                        .iter()
                        .any(|c| c.symbol().chars().any(char::is_control));
                    prop_assert!(!control, "a control character on a {}x{} screen", width, height);
                }
                let (text, _) = screen(&model, 200, 60);
                for line in text.lines().take(CAR_ROWS) {
                    prop_assert!(!line.contains("NaN") && !line.contains("inf"), "{}", line);
                }
                let line = plain_line(&model);
                let car = line.split(" | ").next().unwrap_or_default();
                prop_assert!(!car.contains("NaN") && !car.contains("inf"), "{}", line);
            }
        }
    }

    #[test]
    fn lap_times_read_m_ss_mmm() {
        let t = |s: f32| lap_time(LapTime::new(s));
        assert_eq!(t(83.456), "1:23.456");
        assert_eq!(t(12.75), "0:12.750");
        assert_eq!(t(3_600.5), "60:00.500");
        assert_eq!(t(59.999_9), "1:00.000");
        assert_eq!(t(359_999.0), "5999:59.000");
        for none in [0.0, -1.0, f32::NAN, f32::INFINITY, 360_000.0, 3.0e38] {
            assert_eq!(t(none), "–", "{none}");
        }
    }

    #[test]
    fn steer_bar_marks_the_wheel_position() {
        // 16 wide: the track is what the text and one blank leave, its centre ┼.
        let axis = |a: f32| Finite::within(a, -1.0..=1.0);
        assert_eq!(steer_bar(axis(0.0), 16), "──────█───── +0%");
        assert_eq!(steer_bar(axis(-1.0), 16), "█────┼──── -100%");
        assert_eq!(steer_bar(axis(1.0), 16), "─────┼───█ +100%");
        assert_eq!(steer_bar(axis(-0.5), 16), "───█─┼───── -50%");
        assert_eq!(steer_bar(None, 10), "────┼─── –");
    }
}
