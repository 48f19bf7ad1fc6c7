//! `forza-relay demo`: the relay at work with nothing else on the machine.
//!
//! In one process, all on 127.0.0.1: the simulator sends a Forza Horizon 6 drive
//! at 60 packets/s to a relay (the real [`Relay`], built from a [`Config`] made
//! here), which forwards every packet to two local receivers: `fh6-tool` gets them
//! byte for byte, `fh5-tool` translated to FH5. Twice a second a line shows what
//! `fh6-tool` sees (speed, gear, revs, pedals, steering), how many packets each
//! receiver got, and which fields `fh5-tool` got differently: each FH5 packet is
//! paired with its FH6 original by TimestampMS and compared field by field. The
//! simulated car is class R in FH6, which FH5 lacks, and runs through puddles, so
//! the CarClass and WheelInPuddle conversions show. At the end come the relay's
//! final report and the receivers' totals.

use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::app::{to_stdout, App, Attach, Failure, Observer, Signals};
use crate::config::{Config, ConfigError, Overrides};
use crate::relay::{Relay, StartError};
use crate::report::Snapshot;
use crate::simulate::{self, SendOptions, SendReport};
use crate::telemetry::Telemetry;
use crate::view::model::{shown, Car, Finite};
use crate::wire::{field, Format, Packet, Puddle};

/// How long the demo runs when `--seconds` is not given.
pub const DEFAULT_SECONDS: f64 = 10.0;
/// The simulated game's frame rate.
const RATE: u32 = 60;
/// The drive's seed: every demo shows the same drive.
const SEED: u64 = 1;
/// Time between two printed lines.
const LINE_EVERY: Duration = Duration::from_millis(500);
/// How often the receivers are read.
const READ_EVERY: Duration = Duration::from_millis(2);
/// After the simulator stops, how long to wait for its last packets to arrive.
const SETTLE: Duration = Duration::from_millis(200);
/// The input format and the translated output.
const FROM: Format = Format::Fh6;
const TO: Format = Format::Fh5;
/// FH6 packets kept to pair with their FH5 translations.
const RECENT: usize = 32;

/// Why the demo could not run.
#[derive(Debug)]
pub enum DemoError {
    /// A loopback socket could not be opened.
    Socket(io::Error),
    /// The configuration built in code was refused (a bug).
    Config(ConfigError),
    /// The relay did not start.
    Relay(StartError),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoError::Socket(e) => write!(f, "cannot open a socket on 127.0.0.1: {e}"),
            DemoError::Config(e) => write!(f, "the demo's configuration is invalid: {e}"),
            DemoError::Relay(e) => write!(f, "the relay did not start: {e}"),
        }
    }
}

impl std::error::Error for DemoError {}

/// One of the two local receivers standing in for tools.
struct Receiver {
    name: &'static str,
    socket: UdpSocket,
    format: Format,
    received: u64,
}

impl Receiver {
    fn bind(name: &'static str, format: Format) -> Result<Receiver, DemoError> {
        let socket = UdpSocket::bind("127.0.0.1:0").map_err(DemoError::Socket)?;
        socket.set_nonblocking(true).map_err(DemoError::Socket)?;
        Ok(Receiver {
            name,
            socket,
            format,
            received: 0,
        })
    }

    fn addr(&self) -> Result<SocketAddr, DemoError> {
        self.socket.local_addr().map_err(DemoError::Socket)
    }
}

/// What `fh5-tool` got differently from `fh6-tool`, field by field.
#[derive(Debug, Clone)]
struct Differences {
    /// Packets of each field of [`field::ALL`] whose bytes differed.
    count: [u64; field::ALL.len()],
    /// FH5 packets paired with their FH6 original.
    paired: u64,
    /// The latest CarClass change: (fh6, fh5).
    class: Option<(i32, i32)>,
    /// The latest wet WheelInPuddle change, per wheel: (fh6, fh5).
    puddle: Option<[(Puddle, Puddle); 4]>,
}

impl Differences {
    fn new() -> Differences {
        Differences {
            count: [0; field::ALL.len()],
            paired: 0,
            class: None,
            puddle: None,
        }
    }

    /// Compares every field of a translation with its original.
    fn add(&mut self, original: &Packet<&[u8]>, translated: &Packet<&[u8]>) {
        self.paired += 1;
        for (i, f) in field::ALL.iter().enumerate() {
            let (Some(a), Some(b)) = (f.start(original.format()), f.start(translated.format()))
            else {
                continue;
            };
            let (a, b) = (
                &original.as_bytes()[a..a + f.size],
                &translated.as_bytes()[b..b + f.size],
            );
            if a == b {
                continue;
            }
            self.count[i] += 1;
            if *f == field::CAR_CLASS {
                self.class = Some((original.car_class(), translated.car_class()));
            } else if *f == field::WHEEL_IN_PUDDLE {
                let a = original.wheel_in_puddle().into_array();
                let b = translated.wheel_in_puddle().into_array();
                self.puddle = Some(std::array::from_fn(|w| (a[w], b[w])));
            }
        }
    }

    /// Indexes in [`field::ALL`] of the fields that differed: CarClass first (it
    /// differs in every packet), then the others in packet order.
    fn differing(&self) -> impl Iterator<Item = usize> + '_ {
        let class = field::ALL.iter().position(|f| *f == field::CAR_CLASS);
        class
            .into_iter()
            .chain((0..field::ALL.len()).filter(move |&i| Some(i) != class))
            .filter(|&i| self.count[i] > 0)
    }

    /// `CarClass R(6) -> S2(5), WheelInPuddle FL/RL 1 -> 1.0`: CarClass first, as
    /// it is in every line, then the others in packet order.
    fn describe(&self, out: &mut String) {
        let mut any = false;
        for i in self.differing() {
            if any {
                out.push_str(", ");
            }
            any = true;
            let f = field::ALL[i];
            match (self.class, self.puddle) {
                (Some((a, b)), _) if f == field::CAR_CLASS => {
                    let _ = write!(out, "CarClass {} -> {}", class(FROM, a), class(TO, b));
                }
                (_, Some(wheels)) if f == field::WHEEL_IN_PUDDLE => {
                    out.push_str("WheelInPuddle ");
                    // Wheels that changed alike are named together: FL/RL 1 -> 1.0.
                    let names = ["FL", "FR", "RL", "RR"];
                    let mut done = [false; 4];
                    for w in 0..4 {
                        let (a, b) = wheels[w];
                        if done[w] || !(a.is_wet() || b.is_wet()) {
                            continue;
                        }
                        if done.iter().any(|&d| d) {
                            out.push_str("; ");
                        }
                        let mut alike = Vec::new();
                        for (v, name) in names.iter().enumerate().skip(w) {
                            if wheels[v] == wheels[w] {
                                done[v] = true;
                                alike.push(*name);
                            }
                        }
                        let _ = write!(out, "{} {} -> {}", alike.join("/"), puddle(a), puddle(b));
                    }
                }
                _ => out.push_str(f.name),
            }
        }
        if !any {
            out.push_str(if self.paired == 0 {
                "(no pair yet)"
            } else {
                "nothing"
            });
        }
    }
}

/// `R(6)`: a class letter and its number on `format`'s scale.
fn class(format: Format, value: i32) -> String {
    let letter = format.class_letter(value).unwrap_or("?");
    format!("{letter}({value})")
}

/// A puddle word as its format types it: `1` (FH6's flag) or `1.0` (a depth).
fn puddle(p: Puddle) -> String {
    match p {
        Puddle::Flag(v) => v.to_string(),
        Puddle::Depth(d) => format!("{d:.1}"),
    }
}

/// The FH6 packets most recently received, to pair translations with.
struct Recent {
    packets: [[u8; 324]; RECENT],
    next: usize,
    len: usize,
}

impl Recent {
    fn push(&mut self, bytes: &[u8]) {
        self.packets[self.next].copy_from_slice(bytes);
        self.next = (self.next + 1) % RECENT;
        self.len = (self.len + 1).min(RECENT);
    }

    fn find(&self, timestamp: u32) -> Option<&[u8]> {
        self.packets[..self.len]
            .iter()
            .find(|p| Packet::new_unchecked(&p[..], FROM).timestamp_ms() == timestamp)
            .map(|p| &p[..])
    }
}

/// Runs the demo for `seconds` or until a stop signal, printing to `out`.
///
/// Through the runner, as `run` is: an [`App`] around the relay, with the
/// demo as its foreground observer. The app gets signals of its own, which
/// nothing raises: a stop ends the drive first (its race-off frames still
/// reach the tools), and the relay only once the screen returns, as before.
pub fn run(seconds: Duration, signals: &Signals, out: Box<dyn Write>) -> Result<(), Failure> {
    let start = |e: DemoError| Failure::start(e);
    let tools = [
        Receiver::bind("fh6-tool", FROM).map_err(start)?,
        Receiver::bind("fh5-tool", TO).map_err(start)?,
    ];
    let to = [
        format!("{},name={}", tools[0].addr().map_err(start)?, tools[0].name),
        format!(
            "{},format={TO},name={}",
            tools[1].addr().map_err(start)?,
            tools[1].name
        ),
    ];
    let overrides = Overrides {
        listen: Some("127.0.0.1:0".to_owned()),
        input: Some(FROM.id().to_owned()),
        stats_interval: Some(0),
        ..Overrides::default()
    };
    let config = Config::from_args(&to, &overrides)
        .map_err(DemoError::Config)
        .map_err(start)?;
    let relay = Relay::bind(&config)
        .map_err(DemoError::Relay)
        .map_err(start)?;
    let listen = relay.local_addr();
    let mut app = App::new(relay, &Signals::default());
    app.observe(Demo {
        seconds,
        stop: signals.stop_flag(),
        listen,
        tools,
        out,
        ended: None,
    });
    app.start()?.wait().map(|_| ())
}

/// The demo's screen, the app's foreground: starts the simulated game,
/// prints a line every half second, and at the end the totals and the
/// relay's final report.
struct Demo {
    seconds: Duration,
    stop: Arc<AtomicBool>,
    listen: SocketAddr,
    tools: [Receiver; 2],
    out: Box<dyn Write>,
    /// When the drive stopped, what the simulator sent, the differences
    /// seen, and the first failed write.
    ended: Option<Ended>,
}

/// How the screen ended.
struct Ended {
    stopped: Duration,
    sent: io::Result<SendReport>,
    total: Differences,
    result: io::Result<()>,
}

impl Observer for Demo {
    fn start(&mut self, _relay: &mut Attach<'_>) -> Result<(), Failure> {
        Ok(())
    }

    fn in_foreground(&self) -> bool {
        true
    }

    fn foreground(&mut self, _relay_done: &Arc<AtomicBool>) -> Result<(), Failure> {
        let Demo {
            seconds,
            stop,
            listen,
            tools,
            out,
            ..
        } = self;
        let (seconds, listen) = (*seconds, *listen);
        let options = SendOptions {
            to: listen,
            format: FROM,
            rate: RATE,
            duration: None,
            seed: SEED,
        };
        let sim_stop = Arc::new(AtomicBool::new(false));
        let sender = {
            let sim_stop = sim_stop.clone();
            let options = options.clone();
            thread::spawn(move || simulate::send(&options, &sim_stop))
        };

        let started = Instant::now();
        let shown = header(out, listen, tools, seconds);
        let mut screen = Screen {
            latest: None,
            since_line: Differences::new(),
            total: Differences::new(),
            recent: Recent {
                packets: [[0; 324]; RECENT],
                next: 0,
                len: 0,
            },
        };
        let mut next_line = started + LINE_EVERY;
        let mut result = shown;
        while result.is_ok() && started.elapsed() < seconds && !stop.load(Ordering::SeqCst) {
            screen.read(tools);
            if Instant::now() >= next_line {
                result = screen.line(out, started.elapsed(), tools);
                next_line += LINE_EVERY;
            }
            thread::sleep(READ_EVERY);
        }
        // Stop the drive (it sends its race-off frames) and let them arrive;
        // the runner stops the relay when this returns.
        let stopped = started.elapsed();
        sim_stop.store(true, Ordering::SeqCst);
        let sent = sender.join().expect("the simulator thread does not panic");
        let settle = Instant::now() + SETTLE;
        while Instant::now() < settle {
            screen.read(tools);
            thread::sleep(READ_EVERY);
        }
        self.ended = Some(Ended {
            stopped,
            sent,
            total: screen.total,
            result,
        });
        Ok(())
    }

    fn finish(mut self: Box<Self>, report: &mut Snapshot) -> Result<(), Failure> {
        let Some(ended) = self.ended.take() else {
            return Ok(());
        };
        if let Err(e) = ended.result {
            return to_stdout(Err(e));
        }
        let sent = ended
            .sent
            .map_err(|e| Failure::start(DemoError::Socket(e)))?;
        let out = &mut self.out;
        to_stdout(
            footer(out, ended.stopped, &sent, &self.tools, &ended.total)
                .and_then(|()| writeln!(out, "\n{report}")),
        )
    }
}

/// What the printed lines are made from.
struct Screen {
    latest: Option<Car>,
    since_line: Differences,
    total: Differences,
    recent: Recent,
}

impl Screen {
    /// Takes every datagram waiting at the two receivers.
    fn read(&mut self, tools: &mut [Receiver; 2]) {
        let mut buf = [0u8; 2048];
        for tool in tools.iter_mut() {
            while let Ok(n) = tool.socket.recv(&mut buf) {
                tool.received += 1;
                let Ok(packet) = Packet::new_checked(&buf[..n], tool.format) else {
                    continue;
                };
                if tool.format == FROM {
                    self.latest = Some(Car::new(&Telemetry::decode(&packet)));
                    self.recent.push(&buf[..n]);
                } else if let Some(original) = self.recent.find(packet.timestamp_ms()) {
                    let original = Packet::new_unchecked(original, FROM);
                    self.since_line.add(&original, &packet);
                    self.total.add(&original, &packet);
                }
            }
        }
    }

    /// One line: the car as `fh6-tool` sees it, the counts, the differences.
    fn line(
        &mut self,
        out: &mut impl Write,
        at: Duration,
        tools: &[Receiver; 2],
    ) -> io::Result<()> {
        let mut diff = String::new();
        self.since_line.describe(&mut diff);
        self.since_line = Differences::new();
        let time = format!("{:.1}s", at.as_secs_f64());
        let counts = [tools[0].received, tools[1].received].map(|n| n.to_string());
        let Some(c) = self.latest.filter(|c| c.racing) else {
            let waiting = ["", "not", "racing", "yet", "", "", ""].map(str::to_owned);
            return row(out, [&time], &waiting, &counts, &diff);
        };
        // The same values, and the same lap count, as `watch` shows (the model's Car).
        let pct = |v: Option<Finite>| shown(v, |p| format!("{p:.0}%"));
        let car = [
            shown(c.speed_kmh, |s| format!("{s:.0} km/h")),
            shown(c.gear, |g| g.to_string()),
            shown(c.rpm, |r| format!("{r:.0}")),
            pct(c.throttle_pct),
            pct(c.brake_pct),
            shown(c.steer, |s| match (s.get() * 100.0).round() {
                s if s < 0.0 => format!("L {:.0}%", -s),
                s if s > 0.0 => format!("R {s:.0}%"),
                _ => "0".to_owned(),
            }),
            shown(c.lap, |l| l.to_string()),
        ];
        row(out, [&time], &car, &counts, &diff)
    }
}

/// Column widths of a line, after the time: speed, gear, rpm, throttle, brake,
/// steer, lap; then the two counts.
const WIDTHS: [usize; 7] = [9, 4, 6, 8, 6, 6, 4];
const COUNT_WIDTH: usize = 8;

/// Prints one line of the table (the header too).
fn row(
    out: &mut impl Write,
    [time]: [&str; 1],
    car: &[String; 7],
    counts: &[String; 2],
    diff: &str,
) -> io::Result<()> {
    let mut line = format!("{time:>6}");
    for (value, width) in car.iter().zip(WIDTHS) {
        let _ = write!(line, " {value:>width$}");
    }
    let _ = write!(line, " |");
    for count in counts {
        let _ = write!(line, " {count:>COUNT_WIDTH$}");
    }
    writeln!(out, "{line} | {diff}")
}

fn header(
    out: &mut impl Write,
    listen: SocketAddr,
    tools: &[Receiver; 2],
    seconds: Duration,
) -> io::Result<()> {
    let [same, fh5] = tools;
    let (a, b) = (same.socket.local_addr()?, fh5.socket.local_addr()?);
    let sends = format!("sends a {} drive, {RATE} packets/s", FROM.game());
    let translates = format!("translates each packet to {TO}");
    writeln!(
        out,
        "forza-relay demo: no game, no configuration; all in this process, on 127.0.0.1."
    )?;
    writeln!(out, "  simulator  {sends:<44} -> the relay on {listen}")?;
    writeln!(
        out,
        "  the relay  {:<44} -> {} on {a}",
        "forwards each packet as it came (\"same\")", same.name
    )?;
    writeln!(out, "  the relay  {translates:<44} -> {} on {b}", fh5.name)?;
    writeln!(
        out,
        "({} and {} stand in for tools such as SimHub or a dashboard.)",
        same.name, fh5.name
    )?;
    writeln!(
        out,
        "Every half second: the car as {} sees it, the packets each tool has received,\n\
         and what {} got differently. Running for {}; Ctrl-C stops.",
        same.name,
        fh5.name,
        crate::numbers::Elapsed(seconds)
    )?;
    writeln!(out)?;
    let names = ["speed", "gear", "rpm", "throttle", "brake", "steer", "lap"].map(str::to_owned);
    let tools = [same.name, fh5.name].map(str::to_owned);
    row(out, ["time"], &names, &tools, &format!("{FROM} -> {TO}"))
}

fn footer(
    out: &mut impl Write,
    elapsed: Duration,
    sent: &SendReport,
    tools: &[Receiver; 2],
    total: &Differences,
) -> io::Result<()> {
    let [same, fh5] = tools;
    writeln!(out)?;
    writeln!(out, "Stopped after {}.", crate::numbers::Elapsed(elapsed))?;
    writeln!(out, "simulator: {sent}")?;
    writeln!(
        out,
        "{}: received {} packets, as sent. {}: received {}, as {TO}.",
        same.name, same.received, fh5.name, fh5.received
    )?;
    let mut differed = String::new();
    for i in total.differing() {
        if !differed.is_empty() {
            differed.push_str(", ");
        }
        let _ = write!(
            differed,
            "{} ({} packets)",
            field::ALL[i].name,
            total.count[i]
        );
    }
    if differed.is_empty() {
        differed.push_str("nothing");
    }
    writeln!(
        out,
        "Compared with their {FROM} originals ({} pairs, matched by TimestampMS), the {TO} \
         packets differed in: {differed}. Every other field came through unchanged.",
        total.paired
    )
}
