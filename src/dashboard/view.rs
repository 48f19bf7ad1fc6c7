//! The dashboard's view: [`render`] draws a [`Model`] and nothing else — the
//! title and status lines, the car's boxes (speed, rpm, inputs, motion,
//! tyres, car, race) fitted to the screen, the relay's destinations
//! (`table.rs`), the session's laps (`laps.rs`) and the newest log line.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Gauge, Paragraph, Row, Table};
use ratatui::Frame;

use super::laps::{laps_want, render_laps, LAPS_CHROME};
use super::pieces::{boxed, format_label, printable, DIM, NOT_RACING};
use super::table::render_destinations;
use crate::telemetry::columns::WHEELS;
use crate::view::model::{grip_lost, shown, Car, Finite, LapTime, Model, NONE};

/// Above this fraction of the redline the RPM bar turns red.
const REDLINE_WARN: f64 = 0.9;

/// A lap time as `m:ss.mmm`; [`NONE`] for none.
pub fn lap_time(time: Option<LapTime>) -> String {
    shown(time, |t| t.to_string())
}

const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
const ALERT: Style = Style::new().fg(Color::White).bg(Color::Red);

/// The car to draw, and whether it is the last one before a menu or pause
/// (then every value is dimmed).
#[derive(Clone, Copy)]
struct View<'a> {
    car: Option<&'a Car>,
    dim: bool,
    /// The lap being driven less the best lap at the same distance (issue 34).
    delta: Option<f32>,
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
        delta: model.live_delta_s(),
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
    let table_height = table_want.min(room - body_height);
    // The lap table takes what is left, when that holds a lap.
    let laps_height = Some(laps_want(model.lap_table()).min(room - body_height - table_height))
        .filter(|h| *h > LAPS_CHROME)
        .unwrap_or(0);
    let [title, status, body, destinations, laps, log] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(body_height),
        Constraint::Length(table_height),
        Constraint::Length(laps_height),
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
    if laps_height > 0 {
        render_laps(frame, laps, model.lap_table());
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
            "Best    {}{}",
            lap_time(car.and_then(|c| c.best_lap)),
            // Against the best lap at the same distance, once there is one.
            view.delta
                .map(|d| format!("   Δ {d:+.3}"))
                .unwrap_or_default()
        )),
    ];
    let race = Paragraph::new(lines).block(boxed("Race"));
    frame.render_widget(race.style(view.style()), area);
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::config::Input;
    use crate::dashboard::plain_line;
    use crate::dashboard::testing::*;
    use crate::view::DestinationRow;
    use crate::wire::{Format, Packet, Wheels};

    /// Issue 34: once a lap is done, the race box says the live delta to the
    /// best lap at the same distance, signed.
    #[test]
    fn after_a_lap_the_race_box_says_the_delta_to_the_best() {
        use crate::simulate::Simulator;
        let mut model = Model::new(Input::Fixed(Format::Fh6), "a simulated drive");
        let mut sim = Simulator::new(Format::Fh6, 5);
        let mut buf = [0u8; 400];
        let t0 = Instant::now();
        let mut i = 0u64;
        while model.lap_table().is_empty() || !i.is_multiple_of(600) {
            let n = sim.frame(Duration::from_micros(16_667), &mut buf).unwrap();
            model.on_datagram(t0 + Duration::from_micros(16_667 * i), from(), &buf[..n]);
            i += 1;
            assert!(i < 60 * 60 * 10, "no lap in 10 minutes");
        }
        let delta = model.live_delta_s().expect("a delta after the first lap");
        let (text, _) = screen(&model, 100, 24);
        assert_shows(&text, &[&format!("Δ {delta:+.3}")]);
        assert_eq!(model.lap_table()[0].lap, 1);
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
