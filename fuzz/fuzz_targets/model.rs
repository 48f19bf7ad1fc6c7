//! Arbitrary bytes through the dashboard's model and onto a screen: datagrams of
//! every Forza length (and others) fed to a `Model`, read as each input format or
//! detected, with and without the relay's destinations table and a log line,
//! rendered to ratatui's `TestBackend` at sizes from nothing to 200×60, and as the
//! plain line `watch` prints without a terminal.
//!
//! Besides "never panics" (issue 12: a NaN RPM made ratatui's `Gauge::ratio`
//! assert), it checks that no value of the car reaches the screen or the plain
//! line as `NaN` or `inf` (the model shows what it cannot show as "–"), and that
//! no control character from a destination's name or a log line reaches a screen
//! cell or the plain line.

#![no_main]

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use forza_relay::config::Input;
use forza_relay::counters::Latency;
use forza_relay::dashboard::plain_line;
use forza_relay::dashboard::render;
use forza_relay::view::{DestinationRow, Model};
use forza_relay::wire::Format;
use libfuzzer_sys::fuzz_target;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// Screen sizes, the tiny ones first, 200×60 last.
const SIZES: [(u16, u16); 6] = [(0, 0), (1, 1), (20, 5), (40, 12), (80, 24), (200, 60)];
/// The screen rows that show the car (title, status and the car's boxes) at 200×60.
const CAR_ROWS: usize = 20;
/// Datagrams per input at most.
const MAX_DATAGRAMS: usize = 8;

/// Reads the input front to back; past its end, zeros.
struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    /// `len` bytes, zero-filled where the input runs out.
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let take = len.min(self.0.len());
        let mut v = self.0[..take].to_vec();
        self.0 = &self.0[take..];
        v.resize(len, 0);
        v
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(std::array::from_fn(|_| self.byte()))
    }
}

thread_local! {
    /// One test terminal per size, made once: a fresh one per input would spend
    /// most of the run allocating screen buffers.
    static TERMINALS: RefCell<Vec<Terminal<TestBackend>>> = RefCell::new(
        SIZES
            .iter()
            .map(|&(w, h)| Terminal::new(TestBackend::new(w, h)).expect("a test terminal"))
            .collect(),
    );
}

/// Renders `model` at every size of [`SIZES`]: no screen cell may hold a control
/// character (a destination's name or a log line could: issue 12). Returns the
/// text of the last, largest screen.
fn screens(model: &Model) -> Vec<String> {
    TERMINALS.with_borrow_mut(|terminals| {
        let mut text = Vec::new();
        for terminal in terminals.iter_mut() {
            let frame = terminal.draw(|f| render(f, model)).expect("drawn");
            let buffer = frame.buffer;
            for cell in &buffer.content {
                assert!(
                    !cell.symbol().chars().any(char::is_control),
                    "{:?} on a {}x{} screen",
                    cell.symbol(),
                    buffer.area.width,
                    buffer.area.height
                );
            }
            text = (0..buffer.area.height)
                .map(|y| (0..buffer.area.width).map(|x| buffer[(x, y)].symbol()).collect())
                .collect();
        }
        text
    })
}

fuzz_target!(|data: &[u8]| {
    let mut s = Script(data);
    let flags = s.byte();
    let input = match usize::from(flags & 7) {
        0 | 7 => Input::Auto,
        i => Input::Fixed(Format::ALL[i - 1]),
    };
    let from: SocketAddr = "127.0.0.1:5555".parse().expect("an address");
    let mut model = Model::new(input, "listening on 127.0.0.1:5400");
    let t0 = Instant::now();
    let count = usize::from(s.byte()) % MAX_DATAGRAMS + 1;
    for i in 0..count {
        let len = match s.byte() % 6 {
            0 => 232,
            1 => 311,
            2 => 324,
            3 => 331,
            4 => usize::from(s.byte()) * 2,
            _ => s.0.len(),
        };
        let datagram = s.bytes(len);
        model.on_datagram(t0 + Duration::from_millis(16 * i as u64), from, &datagram);
    }
    model.tick(t0 + Duration::from_millis(u64::from(s.byte()) * 20));
    if flags & 8 != 0 {
        let rows = (0..s.byte() % 6)
            .map(|_| {
                let name_len = usize::from(s.byte() % 40);
                let problems_len = usize::from(s.byte() % 80);
                DestinationRow {
                    name: String::from_utf8_lossy(&s.bytes(name_len)).into_owned(),
                    output: "fh5".to_owned(),
                    packets_per_sec: f64::from_bits(s.u64()),
                    sent: s.u64(),
                    filtered: s.u64(),
                    rate_limited: s.u64(),
                    errors: s.u64(),
                    stale: s.u64(),
                    latency: Latency {
                        count: s.u64(),
                        p50: Duration::from_nanos(s.u64()),
                        p99: Duration::from_nanos(s.u64()),
                        max: Duration::from_nanos(s.u64()),
                    },
                    problems: String::from_utf8_lossy(&s.bytes(problems_len)).into_owned(),
                }
            })
            .collect();
        model.set_destinations(rows);
        model.set_not_shown(s.u64());
    }
    if flags & 16 != 0 {
        let len = usize::from(s.byte());
        model.set_log_line(Some(String::from_utf8_lossy(&s.bytes(len)).into_owned()));
    }
    for line in screens(&model).iter().take(CAR_ROWS) {
        assert!(!line.contains("NaN") && !line.contains("inf"), "{line}");
    }
    let line = plain_line(&model);
    assert!(!line.chars().any(char::is_control), "{line:?}");
    let car = line.split(" | ").next().unwrap_or_default();
    assert!(!car.contains("NaN") && !car.contains("inf"), "{line}");
});
