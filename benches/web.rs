//! What the web page costs (issues 14 and 24), measured on the real binary
//! over loopback: with the page closed and no traffic, the wake-ups of the web
//! threads over 5 s (the aim: 0); at 360 packets/s (FH6's rate, `simulate`'s
//! drive), the web threads' CPU per second and the relay thread's CPU per
//! packet with nothing open, with one page's event stream (`/api/events`)
//! connected, and with an overlay (its 30 Hz frame stream) and a full frame
//! stream (`/api/stream`, every field, 30 Hz) connected, alternated over
//! [`ROUNDS`] rounds. Run it pinned to one CPU for steadier figures:
//! `taskset -c 1 target/release/deps/web-* --bench` after `cargo bench --bench
//! web --no-run`.
//!
//! ```sh
//! cargo bench --bench web
//! ```
//!
//! A plain `fn main`: it drives a separate process. Per-thread figures come
//! from `/proc/PID/task/TID/{comm,schedstat,status}` (Linux only; elsewhere
//! it says so and stops). Nothing asserts: the machine may be shared, so the
//! load average is printed with the figures.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use forza_relay::simulate::Simulator;
use forza_relay::wire::{Format, MAX_LEN};

const RATE: u32 = 360;
const PHASE: Duration = Duration::from_secs(5);
const ROUNDS: usize = 5;
const WEB_THREADS: [&str; 3] = ["web", "web-feed", "web-work"];

/// CPU ns and context switches (voluntary, involuntary) of one thread.
#[derive(Debug, Clone, Copy, Default)]
struct Use {
    cpu_ns: u64,
    wakes: u64,
}

/// Every thread of `pid` by name (threads of one name summed).
fn threads(pid: u32) -> HashMap<String, Use> {
    let mut out: HashMap<String, Use> = HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let read = |f: &str| std::fs::read_to_string(path.join(f)).unwrap_or_default();
        let name = read("comm").trim().to_owned();
        let cpu_ns = read("schedstat")
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let status = read("status");
        let field = |key: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let wakes = field("voluntary_ctxt_switches:") + field("nonvoluntary_ctxt_switches:");
        let e = out.entry(name).or_default();
        e.cpu_ns += cpu_ns;
        e.wakes += wakes;
    }
    out
}

/// What changed between two readings, for the threads named `names`
/// (threads that appeared in between count from 0).
fn delta(before: &HashMap<String, Use>, after: &HashMap<String, Use>, names: &[&str]) -> Use {
    let mut d = Use::default();
    for name in names {
        let a = after.get(*name).copied().unwrap_or_default();
        let b = before.get(*name).copied().unwrap_or_default();
        d.cpu_ns += a.cpu_ns.saturating_sub(b.cpu_ns);
        d.wakes += a.wakes.saturating_sub(b.wakes);
    }
    d
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".to_owned())
}

/// The relay, with the page on loopback; its addresses from its log.
struct Relay {
    child: Child,
    listen: SocketAddr,
    web: SocketAddr,
}

impl Relay {
    fn start(to: SocketAddr) -> Relay {
        let mut child = Command::new(env!("CARGO_BIN_EXE_forza-relay"))
            .args(["run", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0"])
            .args(["--stats-interval", "0", "--to", &to.to_string()])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start forza-relay");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let addr_after = |line: &str, before: &str| -> Option<SocketAddr> {
            let rest = &line[line.find(before)? + before.len()..];
            rest.split(|c: char| c.is_whitespace() || c == '/' || c == ',')
                .next()?
                .parse()
                .ok()
        };
        let (mut listen, mut web) = (None, None);
        let deadline = Instant::now() + Duration::from_secs(10);
        while listen.is_none() || web.is_none() {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the relay says where it listens and serves");
            listen = listen.or_else(|| addr_after(&line, "listen on "));
            web = web.or_else(|| addr_after(&line, "web page on http://"));
        }
        // Drain the rest of the log so the relay never blocks on it.
        thread::spawn(move || while rx.recv().is_ok() {});
        Relay {
            child,
            listen: listen.unwrap(),
            web: web.unwrap(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// `simulate`'s drive at [`RATE`] to `to` until `stop`; counts what it sent.
fn drive(to: SocketAddr, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind the sender");
        let mut sim = Simulator::new(Format::Fh6, 7);
        let mut buf = [0u8; MAX_LEN];
        let dt = Duration::from_secs(1) / RATE;
        let start = Instant::now();
        let mut n: u32 = 0;
        while !stop.load(Ordering::Relaxed) {
            let len = sim.frame(dt, &mut buf).expect("MAX_LEN holds fh6");
            if socket.send_to(&buf[..len], to).is_ok() {
                sent.fetch_add(1, Ordering::Relaxed);
            }
            n += 1;
            let due = start + dt * n;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
        }
    })
}

/// The overlay's frame stream: the fields it shows, 30 a second.
const OVERLAY_STREAM: &str = "/api/stream?hz=30&fields=speed_kmh,speed_mph,gear_label,\
    rev_fraction,CurrentEngineRpm,throttle_pct,brake_pct,g_lat,g_long,LapNumber,CurrentLap,\
    LastLap,BestLap";

/// What is open in a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Nothing,
    /// One page's event stream.
    Page,
    /// An overlay's frame stream and a full frame stream.
    OverlayAndStream,
}

impl Open {
    const ALL: [Open; 3] = [Open::Nothing, Open::Page, Open::OverlayAndStream];

    fn name(self) -> &'static str {
        match self {
            Open::Nothing => "nothing open",
            Open::Page => "one page",
            Open::OverlayAndStream => "overlay+stream",
        }
    }

    /// The streams it reads: path, and what marks one event in it.
    fn streams(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Open::Nothing => &[],
            Open::Page => &[("/api/events", "event:")],
            Open::OverlayAndStream => &[(OVERLAY_STREAM, "data:"), ("/api/stream", "data:")],
        }
    }
}

/// One event stream at `path`, read until `stop`; counts the events (each
/// marked by `mark`).
fn page(
    web: SocketAddr,
    path: &'static str,
    mark: &'static str,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut s = TcpStream::connect(web).expect("connect to the page");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {web}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .expect("ask for the events");
        s.set_read_timeout(Some(Duration::from_millis(100))).ok();
        let mut buf = [0u8; 16 << 10];
        let mut events = 0;
        while !stop.load(Ordering::Relaxed) {
            if let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                events += buf[..n]
                    .windows(mark.len())
                    .filter(|w| *w == mark.as_bytes())
                    .count() as u64;
            }
        }
        events
    })
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this binary
    // too, without it: a test run is no place for a measurement.
    if !std::env::args().any(|a| a == "--bench") {
        println!("web bench: skipped outside `cargo bench --bench web`");
        return;
    }
    if !cfg!(target_os = "linux") {
        println!("web bench: the per-thread figures need Linux's /proc");
        return;
    }
    let sink = UdpSocket::bind("127.0.0.1:0").expect("bind the destination");
    let sink_addr = sink.local_addr().expect("bound");
    thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while sink.recv(&mut buf).is_ok() {}
    });
    let relay = Relay::start(sink_addr);
    let pid = relay.pid();
    println!("forza-relay web bench: pid {pid}, page on {}", relay.web);
    println!("load average before: {}", loadavg());

    // 1. Idle, the page closed.
    thread::sleep(Duration::from_secs(1));
    let before = threads(pid);
    thread::sleep(PHASE);
    let after = threads(pid);
    let web = delta(&before, &after, &WEB_THREADS);
    let all: Vec<&str> = after.keys().map(String::as_str).collect();
    let every = delta(&before, &after, &all);
    println!(
        "idle, page closed, {} s: web threads {} wake-ups, {} ns on a CPU; every thread {} \
         wake-ups (load average {})",
        PHASE.as_secs(),
        web.wakes,
        web.cpu_ns,
        every.wakes,
        loadavg()
    );

    // 2. 360 packets/s: nothing open, one page, an overlay and a stream.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let sender = drive(relay.listen, stop.clone(), sent.clone());
    thread::sleep(Duration::from_secs(1));
    let mut rows: Vec<(Open, f64, f64, f64)> = Vec::new();
    for round in 0..ROUNDS {
        for open in Open::ALL {
            let page_stop = Arc::new(AtomicBool::new(false));
            let readers: Vec<_> = open
                .streams()
                .iter()
                .map(|(path, mark)| page(relay.web, path, mark, page_stop.clone()))
                .collect();
            if open != Open::Nothing {
                // The feed attaches its tap and starts sampling.
                thread::sleep(Duration::from_millis(500));
            }
            let (b, s0, t0) = (threads(pid), sent.load(Ordering::Relaxed), Instant::now());
            thread::sleep(PHASE);
            let (a, s1, secs) = (
                threads(pid),
                sent.load(Ordering::Relaxed),
                t0.elapsed().as_secs_f64(),
            );
            page_stop.store(true, Ordering::Relaxed);
            let events: Vec<u64> = readers.into_iter().map(|r| r.join().unwrap_or(0)).collect();
            let relay_use = delta(&b, &a, &["relay"]);
            let web_use = delta(&b, &a, &WEB_THREADS);
            let packets = (s1 - s0).max(1);
            let row = (
                open,
                relay_use.cpu_ns as f64 / packets as f64,
                web_use.cpu_ns as f64 / secs / 1e6,
                web_use.wakes as f64 / secs,
            );
            let events: Vec<String> = events
                .iter()
                .map(|e| format!("{:.1}", *e as f64 / secs))
                .collect();
            println!(
                "round {}: {:<14} relay {:>7.0} ns/packet ({} packets), web threads {:>6.2} ms \
                 CPU/s, {:>6.1} wake-ups/s{} (load average {})",
                round + 1,
                open.name(),
                row.1,
                packets,
                row.2,
                row.3,
                if events.is_empty() {
                    String::new()
                } else {
                    format!(", events/s to each client: {}", events.join(", "))
                },
                loadavg()
            );
            rows.push(row);
            // The streams close; the feed notices and detaches.
            thread::sleep(Duration::from_millis(500));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    let median = |open: Open, f: fn(&(Open, f64, f64, f64)) -> f64| {
        let mut v: Vec<f64> = rows.iter().filter(|r| r.0 == open).map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for open in Open::ALL {
        println!(
            "median at {RATE}/s, {:<14}: relay {:.0} ns/packet, web threads {:.2} ms CPU/s, \
             {:.1} wake-ups/s",
            open.name(),
            median(open, |r| r.1),
            median(open, |r| r.2),
            median(open, |r| r.3),
        );
    }
    println!("load average after: {}", loadavg());
}
