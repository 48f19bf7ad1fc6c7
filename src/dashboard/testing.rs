//! What the dashboard's tests share: a racing fh6 packet set field by field,
//! a model that read it for a second, the screen it renders to, and where
//! things are on that screen.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::Terminal;

use super::render;
use crate::config::Input;
use crate::view::model::Model;
use crate::wire::{Format, Packet, Wheels};

pub(super) fn from() -> SocketAddr {
    "127.0.0.1:5555".parse().unwrap()
}

/// An fh6 packet built field by field: 39.4444 m/s is 142 km/h and 88 mph.
pub(super) fn fixture() -> Vec<u8> {
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
pub(super) fn driving(source: &str) -> Model {
    let t0 = Instant::now();
    let mut model = Model::new(Input::Auto, source);
    for i in 0..60 {
        model.on_datagram(t0 + Duration::from_millis(i * 16), from(), &fixture());
    }
    model.tick(t0 + Duration::from_secs(1));
    model
}

pub(super) fn screen(model: &Model, width: u16, height: u16) -> (String, ratatui::buffer::Buffer) {
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
pub(super) fn assert_shows(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} not on the screen:\n{text}");
    }
}

/// The cell where `needle` starts on the screen (every symbol one column wide).
#[track_caller]
pub(super) fn at(text: &str, needle: &str) -> (u16, u16) {
    let (y, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not on the screen"));
    let byte = line.find(needle).expect("found above");
    (line[..byte].chars().count() as u16, y as u16)
}

/// The words of the screen line that starts (inside its border) with `name`.
#[track_caller]
pub(super) fn row<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let line = text
        .lines()
        .find(|l| l.trim_start_matches('│').starts_with(name))
        .unwrap_or_else(|| panic!("no row {name:?}:\n{text}"));
    line.trim_matches('│').split_whitespace().collect()
}

/// FH6's frame in a menu or pause: all zero but TimestampMS.
pub(super) fn menu_frame() -> Vec<u8> {
    let mut buf = vec![0u8; 324];
    let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
    p.set_timestamp_ms(77);
    buf
}
