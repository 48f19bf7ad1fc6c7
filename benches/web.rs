//! What the web page costs (issue 14), measured on the real binary over
//! loopback: with the page closed and no traffic, the wake-ups of the web
//! threads over 5 s (the aim: 0); at 360 packets/s (FH6's rate, `simulate`'s
//! drive), the web threads' CPU per second and the relay thread's CPU per
//! packet with no page open and with one page's event stream (`/api/events`)
//! connected, alternated over [`ROUNDS`] rounds.
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
const ROUNDS: usize = 3;
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

/// One page's event stream, read until `stop`; counts the events.
fn page(web: SocketAddr, stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut s = TcpStream::connect(web).expect("connect to the page");
        write!(
            s,
            "GET /api/events HTTP/1.1\r\nHost: {web}\r\nAccept: text/event-stream\r\n\r\n"
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
                events += buf[..n].windows(6).filter(|w| w == b"event:").count() as u64;
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

    // 2. 360 packets/s, without and with one page connected.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let sender = drive(relay.listen, stop.clone(), sent.clone());
    thread::sleep(Duration::from_secs(1));
    let mut rows = Vec::new();
    for round in 0..ROUNDS {
        for with_page in [false, true] {
            let page_stop = Arc::new(AtomicBool::new(false));
            let reader = with_page.then(|| page(relay.web, page_stop.clone()));
            if with_page {
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
            let events = reader.map(|r| r.join().unwrap_or(0));
            let relay_use = delta(&b, &a, &["relay"]);
            let web_use = delta(&b, &a, &WEB_THREADS);
            let packets = (s1 - s0).max(1);
            let row = (
                with_page,
                relay_use.cpu_ns as f64 / packets as f64,
                web_use.cpu_ns as f64 / secs / 1e6,
                web_use.wakes as f64 / secs,
            );
            println!(
                "round {}: {:<13} relay {:>7.0} ns/packet ({} packets), web threads {:>6.2} ms \
                 CPU/s, {:>6.1} wake-ups/s{} (load average {})",
                round + 1,
                if with_page { "one page" } else { "no page" },
                row.1,
                packets,
                row.2,
                row.3,
                events.map_or(String::new(), |e| format!(
                    ", {:.1} events/s to the page",
                    e as f64 / secs
                )),
                loadavg()
            );
            rows.push(row);
            // The stream closes; the feed notices and detaches.
            thread::sleep(Duration::from_millis(500));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    let median = |page: bool, f: fn(&(bool, f64, f64, f64)) -> f64| {
        let mut v: Vec<f64> = rows.iter().filter(|r| r.0 == page).map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "medians at {RATE}/s: relay {:.0} ns/packet without a page, {:.0} with one; web \
         threads {:.2} ms CPU/s without, {:.2} with",
        median(false, |r| r.1),
        median(true, |r| r.1),
        median(false, |r| r.2),
        median(true, |r| r.2),
    );
    println!("load average after: {}", loadavg());
}
