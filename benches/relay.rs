//! End-to-end benchmark of the real `forza-relay` binary on loopback, against
//! sending straight to the receiver with no relay, in the same run.
//!
//! ```sh
//! cargo bench --bench relay
//! ```
//!
//! A plain `fn main` (no criterion): criterion times a closure, while this drives
//! a separate process and measures what its users see. The binary is the one
//! cargo builds for benches (`CARGO_BIN_EXE_forza-relay`, the bench profile:
//! optimized, LTO). The sender and the receivers are threads of this process, so
//! one `Instant` times both ends: the sequence number rides in TimestampMS (the
//! Sled block, which every output format keeps) and indexes a send-time table.
//!
//! - (a) one-way latency at a paced 360 packets/s: direct, relay with one
//!   destination, relay with four (same, fh5, fm7, sled); receivers blocked in
//!   `recv` as a real consumer is, and once more with one thread for all four;
//! - (b) throughput and loss in steps up to 150,000 packets/s to one destination
//!   and 50,000 packets/s to four, with receivers that drain their socket every
//!   millisecond (so the step measures the relay, not the waking of receiver
//!   threads on two cores), then the aim rates again with blocking receivers;
//!   each loss is located from the kernel's per-socket drop counters
//!   (`/proc/net/udp`) and the relay's own final report;
//! - (c) the relay's CPU per packet, its wait for a CPU, its memory, and its CPU
//!   and wake-ups during 5 s with no traffic.
//!
//! The `/proc` parts are Linux only; elsewhere they print "n/a". Aims are
//! printed as PASS/MISS beside the figures; nothing here asserts.

use std::io::{self, BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use forza_relay::wire::{Format, Packet};
use socket2::{Domain, Protocol, Socket, Type};

/// What the sender sends: a FH6 packet, 324 bytes.
const INPUT: Format = Format::Fh6;
/// The four destinations of a multi-destination run: `--to` format and what arrives.
const MIX: [Sink; 4] = [
    Sink::new("same", Format::Fh6),
    Sink::new("fh5", Format::Fh5),
    Sink::new("fm7", Format::Fm7),
    Sink::new("sled", Format::Sled),
];

/// FH6's own Data Out rate.
const LATENCY_RATE: u32 = 360;
const LATENCY_TIME: Duration = Duration::from_secs(5);
const STEP_TIME: Duration = Duration::from_secs(2);
const IDLE_TIME: Duration = Duration::from_secs(5);
/// Input rates for one destination; the last is past the aim, to show headroom.
const ONE_DEST_RATES: [u32; 6] = [1_000, 10_000, 50_000, 100_000, 150_000, 200_000];
/// Input rates for four destinations; the last is past the aim.
const FOUR_DEST_RATES: [u32; 5] = [1_000, 10_000, 25_000, 50_000, 75_000];

const AIM_P50_RATIO: f64 = 2.5;
const AIM_ONE_DEST_RATE: u32 = 150_000;
const AIM_FOUR_DEST_RATE: u32 = 50_000;
const AIM_RSS_KIB: u64 = 8 * 1024;

/// SO_RCVBUF asked for by each receiver (Linux caps it at `net.core.rmem_max`).
const RECV_BUFFER: usize = 4 << 20;
/// Above this rate the sender sends in bursts, one every `BATCH_PERIOD`.
const BATCH_ABOVE: u32 = 2_000;
const BATCH_PERIOD: Duration = Duration::from_micros(500);
/// The last stretch before a send is spun, not slept: sleep overshoots by ~50 µs+.
/// Kept short: on two cores a spinning sender takes CPU from the relay.
const SPIN_WINDOW: Duration = Duration::from_micros(100);
/// How long a polling receiver sleeps once its socket is empty.
const POLL_PERIOD: Duration = Duration::from_millis(1);
/// TimestampMS of warm-up packets, which are not measured.
const WARM_UP_SEQ: u32 = u32::MAX;
const WARM_UP_PACKETS: u32 = 20;
/// How long to wait for packets still in flight after the last send.
const SETTLE_MAX: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_millis(20);
const START_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// One destination: the `format=` given to the relay and the format that arrives.
#[derive(Debug, Clone, Copy)]
struct Sink {
    output: &'static str,
    format: Format,
}

impl Sink {
    const fn new(output: &'static str, format: Format) -> Self {
        Sink { output, format }
    }
}

/// Where the sender's packets go.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// Straight to one receiver.
    Direct,
    /// Through a relay to these destinations.
    Relay(&'static [Sink]),
}

impl Route {
    fn sinks(self) -> &'static [Sink] {
        match self {
            Route::Direct => &MIX[..1],
            Route::Relay(sinks) => sinks,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Relay(_) => "relay",
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, Copy)]
struct Plan {
    route: Route,
    wake: Wake,
    rate: u32,
    time: Duration,
    /// Measure the relay's idle CPU for this long after the traffic.
    idle: Option<Duration>,
}

/// What one run measured.
struct Outcome {
    plan: Plan,
    sent: u64,
    send_time: Duration,
    send_errors: u64,
    dests: Vec<DestOutcome>,
    relay: Option<RelayOutcome>,
}

impl Outcome {
    fn sent_rate(&self) -> f64 {
        self.sent as f64 / self.send_time.as_secs_f64().max(1e-9)
    }

    fn lost(&self) -> u64 {
        self.dests
            .iter()
            .map(|d| self.sent.saturating_sub(d.received))
            .sum()
    }

    fn worst_loss_pct(&self) -> f64 {
        self.dests
            .iter()
            .map(|d| loss_pct(self.sent, d.received))
            .fold(0.0, f64::max)
    }

    fn cpu_secs(&self, clock: &Clock) -> Option<f64> {
        let ticks = self.relay.as_ref()?.usage.ticks?;
        Some(ticks as f64 / clock.ticks_per_sec)
    }
}

/// What one destination's receiver saw.
struct DestOutcome {
    sink: Sink,
    received: u64,
    duplicates: u64,
    malformed: u64,
    /// One-way latencies in nanoseconds, sorted.
    latencies: Vec<u64>,
    /// The kernel's drop counter for the receiver's socket (`/proc/net/udp`).
    kernel_drops: Option<u64>,
}

/// What the relay process showed during one run.
struct RelayOutcome {
    /// Over the traffic and the settling after it.
    usage: Usage,
    vm_rss_kib: Option<u64>,
    vm_hwm_kib: Option<u64>,
    /// The kernel's drop counter for the relay's listening socket.
    listen_drops: Option<u64>,
    warm_up: u64,
    report: RelayReport,
    exit: Option<ExitStatus>,
    idle: Option<Idle>,
}

impl RelayOutcome {
    /// Measured packets the relay received (its count less the warm-up).
    fn received(&self) -> Option<u64> {
        self.report.received.map(|r| r.saturating_sub(self.warm_up))
    }

    /// Frames the relay itself dropped (backlog full, send errors, ...).
    fn dropped(&self) -> Option<u64> {
        if self.report.dests.is_empty() {
            return None;
        }
        Some(self.report.dests.iter().map(|d| d.dropped).sum())
    }
}

/// The relay's CPU and wake-ups with no traffic.
struct Idle {
    time: Duration,
    usage: Usage,
}

/// The relay's CPU counters at one moment (`/proc/<pid>/stat`, `status`,
/// `schedstat`); the last three are of the main thread, which runs the loop.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    /// utime + stime of the whole process, in clock ticks.
    ticks: Option<u64>,
    /// Time the loop thread ran, ns.
    run_ns: Option<u64>,
    /// Time the loop thread was runnable but waited for a CPU, ns.
    wait_ns: Option<u64>,
    /// Voluntary context switches of the loop thread: it went to sleep.
    sleeps: Option<u64>,
    /// Involuntary context switches of the loop thread: it was preempted.
    preempted: Option<u64>,
}

impl Usage {
    fn now(pid: u32) -> Usage {
        let sched = procfs::schedstat(pid);
        Usage {
            ticks: procfs::cpu_ticks(pid),
            run_ns: sched.map(|s| s.0),
            wait_ns: sched.map(|s| s.1),
            sleeps: procfs::status_value(pid, "voluntary_ctxt_switches"),
            preempted: procfs::status_value(pid, "nonvoluntary_ctxt_switches"),
        }
    }

    /// What happened between `self` and `later`.
    fn until(&self, later: &Usage) -> Usage {
        let d = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        Usage {
            ticks: d(self.ticks, later.ticks),
            run_ns: d(self.run_ns, later.run_ns),
            wait_ns: d(self.wait_ns, later.wait_ns),
            sleeps: d(self.sleeps, later.sleeps),
            preempted: d(self.preempted, later.preempted),
        }
    }
}

/// The relay's final summary, as printed on SIGINT.
#[derive(Debug, Default)]
struct RelayReport {
    received: Option<u64>,
    dests: Vec<RelayDest>,
}

#[derive(Debug)]
struct RelayDest {
    sent: u64,
    /// Every drop and send error the line lists.
    dropped: u64,
    drops_text: String,
}

impl RelayReport {
    /// Reads the final summary: `Received N packets ...`, then one indented line
    /// per destination, `  NAME ... : sent N[, COUNT REASON]...`.
    fn parse(log: &str) -> RelayReport {
        let mut report = RelayReport::default();
        let Some(at) = log.rfind("Received ") else {
            return report;
        };
        let summary = &log[at..];
        report.received = leading_number(&summary["Received ".len()..]);
        for line in summary.lines().skip(1) {
            if !line.starts_with("  ") {
                break;
            }
            let Some((_, rest)) = line.split_once(": sent ") else {
                continue;
            };
            let Some(sent) = leading_number(rest) else {
                continue;
            };
            let drops_text = rest
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start_matches(", ")
                .to_owned();
            // "3 backlog full, 2 send errors: refused (...)": the counts lead each item.
            let dropped = drops_text.split(", ").filter_map(leading_number).sum();
            report.dests.push(RelayDest {
                sent,
                dropped,
                drops_text,
            });
        }
        report
    }
}

fn leading_number(s: &str) -> Option<u64> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// Clock ticks per second for `/proc/<pid>/stat`.
struct Clock {
    ticks_per_sec: f64,
    source: &'static str,
}

impl Clock {
    fn get() -> Clock {
        let asked = Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0);
        match asked {
            Some(t) => Clock {
                ticks_per_sec: t,
                source: "from `getconf CLK_TCK`",
            },
            None => Clock {
                ticks_per_sec: 100.0,
                source: "ASSUMED: `getconf CLK_TCK` failed",
            },
        }
    }
}

/// How the receiving threads wait for datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// A thread per socket, blocked in `recv` and woken by every datagram, as a
    /// real consumer is; arrival times are exact.
    Blocking,
    /// A thread per socket that drains it, then sleeps [`POLL_PERIOD`]: nobody
    /// is woken per datagram, so a throughput step measures the relay rather
    /// than the scheduler. Arrival times are late by up to the period.
    Polling,
    /// One thread waiting on every socket at once (mio): the destinations share
    /// its wake-ups.
    Shared,
}

impl Wake {
    fn id(self) -> &'static str {
        match self {
            Wake::Blocking => "block",
            Wake::Polling => "poll",
            Wake::Shared => "shared",
        }
    }
}

/// What arrived on one destination's socket.
struct Tally {
    sink: Sink,
    /// Arrival time (ns since the epoch) by sequence number; 0 = never arrived.
    arrived: Vec<u64>,
    received: u64,
    duplicates: u64,
    malformed: u64,
    warm: Arc<AtomicU64>,
    data: Arc<AtomicU64>,
}

impl Tally {
    fn record(&mut self, bytes: &[u8], at: u64) {
        let Ok(packet) = Packet::new_checked(bytes, self.sink.format) else {
            self.malformed += 1;
            return;
        };
        let seq = packet.timestamp_ms();
        if seq == WARM_UP_SEQ {
            self.warm.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match self.arrived.get_mut(seq as usize) {
            Some(slot) if *slot == 0 => {
                *slot = at.max(1);
                self.received += 1;
                self.data.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => self.duplicates += 1,
            None => self.malformed += 1,
        }
    }
}

/// The receiving threads of one run, one loopback socket per destination.
struct Receivers {
    addrs: Vec<SocketAddr>,
    sinks: Vec<Sink>,
    warm: Vec<Arc<AtomicU64>>,
    data: Vec<Arc<AtomicU64>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Vec<Tally>>>,
}

impl Receivers {
    /// Binds a socket with a large receive buffer per sink and starts reading
    /// into tables of `capacity` sequence numbers.
    fn spawn(sinks: &[Sink], wake: Wake, capacity: usize, epoch: Instant) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut sockets = Vec::new();
        let mut tallies = Vec::new();
        for sink in sinks {
            let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
            // Best effort: a smaller buffer still works, and any loss shows in the
            // socket's kernel drop counter.
            let _ = socket.set_recv_buffer_size(RECV_BUFFER);
            socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
            match wake {
                Wake::Blocking => socket.set_read_timeout(Some(READ_TIMEOUT))?,
                Wake::Polling | Wake::Shared => socket.set_nonblocking(true)?,
            }
            sockets.push(UdpSocket::from(socket));
            tallies.push(Tally {
                sink: *sink,
                arrived: vec![0; capacity],
                received: 0,
                duplicates: 0,
                malformed: 0,
                warm: Arc::new(AtomicU64::new(0)),
                data: Arc::new(AtomicU64::new(0)),
            });
        }
        let addrs = sockets
            .iter()
            .map(UdpSocket::local_addr)
            .collect::<io::Result<Vec<_>>>()?;
        let warm = tallies.iter().map(|t| t.warm.clone()).collect();
        let data = tallies.iter().map(|t| t.data.clone()).collect();
        let mut threads = Vec::new();
        let spawn = |name: String, body: Box<dyn FnOnce() -> Vec<Tally> + Send>| {
            thread::Builder::new().name(name).spawn(body)
        };
        if wake == Wake::Shared {
            let stop = stop.clone();
            threads.push(spawn(
                "recv-shared".to_owned(),
                Box::new(move || receive_shared(sockets, tallies, epoch, &stop)),
            )?);
        } else {
            for (socket, tally) in sockets.into_iter().zip(tallies) {
                let stop = stop.clone();
                let name = format!("recv-{}", tally.sink.output);
                threads.push(spawn(
                    name,
                    Box::new(move || vec![receive_one(&socket, tally, wake, epoch, &stop)]),
                )?);
            }
        }
        Ok(Receivers {
            addrs,
            sinks: sinks.to_vec(),
            warm,
            data,
            stop,
            threads,
        })
    }

    fn all_warm(&self) -> bool {
        self.warm.iter().all(|w| w.load(Ordering::Relaxed) > 0)
    }

    fn data_total(&self) -> u64 {
        self.data.iter().map(|d| d.load(Ordering::Relaxed)).sum()
    }

    /// Stops the threads; one tally per sink, in order.
    fn finish(self) -> Vec<Tally> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .flat_map(|t| t.join().expect("a receiver thread panicked"))
            .collect()
    }
}

/// One socket, blocking or polling.
fn receive_one(
    socket: &UdpSocket,
    mut tally: Tally,
    wake: Wake,
    epoch: Instant,
    stop: &AtomicBool,
) -> Tally {
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        match socket.recv(&mut buf) {
            Ok(len) => tally.record(&buf[..len], nanos_since(epoch)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && wake == Wake::Polling => {
                thread::sleep(POLL_PERIOD)
            }
            Err(e) if is_transient(&e) => {}
            Err(e) => panic!("receive failed: {e}"),
        }
    }
    tally
}

/// Every socket from one thread, woken by mio (epoll).
fn receive_shared(
    sockets: Vec<UdpSocket>,
    mut tallies: Vec<Tally>,
    epoch: Instant,
    stop: &AtomicBool,
) -> Vec<Tally> {
    let mut poll = mio::Poll::new().expect("create a poll");
    let mut sockets: Vec<mio::net::UdpSocket> = sockets
        .into_iter()
        .map(mio::net::UdpSocket::from_std)
        .collect();
    for (i, socket) in sockets.iter_mut().enumerate() {
        poll.registry()
            .register(socket, mio::Token(i), mio::Interest::READABLE)
            .expect("register a receiver");
    }
    let mut events = mio::Events::with_capacity(16);
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        match poll.poll(&mut events, Some(READ_TIMEOUT)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("poll failed: {e}"),
        }
        for event in events.iter() {
            let i = event.token().0;
            // Edge-triggered: drain until the socket would block.
            loop {
                match sockets[i].recv(&mut buf) {
                    Ok(len) => tallies[i].record(&buf[..len], nanos_since(epoch)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if is_transient(&e) => {}
                    Err(e) => panic!("receive failed: {e}"),
                }
            }
        }
    }
    tallies
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The sending end: one connected socket and one packet rewritten per send.
struct Sender {
    socket: UdpSocket,
    buf: [u8; INPUT.len()],
}

/// What the sender did.
struct Sent {
    /// Send time (ns since the epoch) by sequence number.
    at: Vec<u64>,
    time: Duration,
    errors: u64,
}

impl Sender {
    fn connect(to: SocketAddr) -> io::Result<Sender> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.connect(to)?;
        let mut buf = [0u8; INPUT.len()];
        let mut packet = Packet::new_checked(&mut buf[..], INPUT).expect("sized to the format");
        packet.set_is_race_on(1);
        packet.set_engine_max_rpm(8_000.0);
        packet.set_current_engine_rpm(6_000.0);
        packet.set_velocity_z(40.0);
        Ok(Sender { socket, buf })
    }

    fn send(&mut self, seq: u32) -> io::Result<usize> {
        Packet::new_unchecked(&mut self.buf[..], INPUT).set_timestamp_ms(seq);
        self.socket.send(&self.buf)
    }

    /// Sends warm-up packets until every receiver has seen one.
    fn warm_up(&mut self, receivers: &Receivers) -> u64 {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut sent = 0;
        while !receivers.all_warm() {
            assert!(
                Instant::now() < deadline,
                "no warm-up packet reached every receiver within {START_TIMEOUT:?}"
            );
            if sent < u64::from(WARM_UP_PACKETS) && self.send(WARM_UP_SEQ).is_ok() {
                sent += 1;
            }
            thread::sleep(Duration::from_millis(1));
        }
        while sent < u64::from(WARM_UP_PACKETS) {
            if self.send(WARM_UP_SEQ).is_ok() {
                sent += 1;
            }
            thread::sleep(Duration::from_millis(1));
        }
        // Let the last ones through before measuring.
        thread::sleep(Duration::from_millis(50));
        sent
    }

    /// Sends `count` packets at `rate` per second: one at a time at low rates, in
    /// bursts every `BATCH_PERIOD` above `BATCH_ABOVE`. A sender that falls behind
    /// catches up at once, so the average rate holds.
    fn send_paced(&mut self, count: u32, rate: u32, epoch: Instant) -> Sent {
        let batch = if rate > BATCH_ABOVE {
            (f64::from(rate) * BATCH_PERIOD.as_secs_f64())
                .round()
                .max(1.0) as u32
        } else {
            1
        };
        let period = f64::from(batch) / f64::from(rate);
        let mut at = vec![0u64; count as usize];
        let mut errors = 0;
        let start = Instant::now();
        let mut seq = 0u32;
        let mut burst = 0u32;
        while seq < count {
            wait_until(start + Duration::from_secs_f64(f64::from(burst) * period));
            for _ in 0..batch.min(count - seq) {
                at[seq as usize] = nanos_since(epoch);
                if self.send(seq).is_err() {
                    errors += 1;
                }
                seq += 1;
            }
            burst += 1;
        }
        Sent {
            at,
            time: start.elapsed(),
            errors,
        }
    }
}

/// Sleeps most of the way, then spins: sleep alone overshoots by 50 µs or more.
fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > SPIN_WINDOW {
            thread::sleep(left - SPIN_WINDOW);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The relay child process. Dropping it kills the process, so a panic never
/// leaves one behind.
struct RelayProcess {
    child: Child,
    listen: SocketAddr,
    lines: mpsc::Receiver<String>,
    log: Option<JoinHandle<String>>,
}

impl RelayProcess {
    /// Starts the relay on a free loopback port, forwarding to `receivers`, and
    /// waits until it says it is running.
    fn start(receivers: &Receivers) -> RelayProcess {
        let listen = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_forza-relay"));
        cmd.args(["run", "--listen", &listen.to_string()]).args([
            "--input",
            INPUT.id(),
            "--stats-interval",
            "0",
        ]);
        for (i, (addr, sink)) in receivers.addrs.iter().zip(&receivers.sinks).enumerate() {
            cmd.arg("--to")
                .arg(format!("{addr},format={},name=d{i}", sink.output));
        }
        let mut child = cmd
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start forza-relay");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = mpsc::channel();
        let log = thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                all.push_str(&line);
                all.push('\n');
                let _ = tx.send(line);
            }
            all
        });
        let mut relay = RelayProcess {
            child,
            listen,
            lines,
            log: Some(log),
        };
        relay.wait_running();
        relay
    }

    fn wait_running(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains("running;") => return,
                Ok(_) => {}
                Err(_) => {
                    let status = self.child.try_wait();
                    let log = self.stop().1;
                    panic!("forza-relay did not start ({status:?}):\n{log}");
                }
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT (the relay prints its final summary and exits 0), SIGKILL if it
    /// hangs; returns the exit status and everything it wrote to stderr.
    fn stop(&mut self) -> (Option<ExitStatus>, String) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-INT", &self.pid().to_string()])
                .status();
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        let log = self
            .log
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (status, log)
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A loopback port nobody is using right now.
fn free_port() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("bind 127.0.0.1:0")
}

/// Waits until the receivers' counts stop moving (or all `expected` arrived).
fn settle(receivers: &Receivers, expected: u64) {
    let deadline = Instant::now() + SETTLE_MAX;
    let mut last = u64::MAX;
    loop {
        // Longer than a polling receiver's sleep, so a still count means done.
        thread::sleep(Duration::from_millis(50));
        let now = receivers.data_total();
        if now >= expected || now == last || Instant::now() >= deadline {
            return;
        }
        last = now;
    }
}

/// Runs one plan end to end.
fn run(plan: Plan, epoch: Instant) -> Outcome {
    let count = (f64::from(plan.rate) * plan.time.as_secs_f64()).round() as u32;
    let receivers = Receivers::spawn(plan.route.sinks(), plan.wake, count as usize, epoch)
        .expect("bind the receivers");
    let mut relay = match plan.route {
        Route::Direct => None,
        Route::Relay(_) => Some(RelayProcess::start(&receivers)),
    };
    let target = relay.as_ref().map_or(receivers.addrs[0], |r| r.listen);
    let mut sender = Sender::connect(target).expect("bind the sender");
    let warm_up = sender.warm_up(&receivers);

    let pid = relay.as_ref().map(RelayProcess::pid);
    let before = pid.map(Usage::now);
    let sent = sender.send_paced(count, plan.rate, epoch);
    let expected = u64::from(count) * receivers.addrs.len() as u64;
    settle(&receivers, expected);
    let after = pid.map(Usage::now);

    let kernel_drops: Vec<Option<u64>> = receivers
        .addrs
        .iter()
        .map(|a| procfs::udp_drops(a.port()))
        .collect();
    let relay_outcome = relay.as_mut().map(|relay| {
        let pid = relay.pid();
        let listen_drops = procfs::udp_drops(relay.listen.port());
        let usage = before
            .zip(after)
            .map(|(b, a)| b.until(&a))
            .unwrap_or_default();
        let idle = plan.idle.map(|time| measure_idle(pid, time));
        let vm_rss_kib = procfs::status_value(pid, "VmRSS");
        let vm_hwm_kib = procfs::status_value(pid, "VmHWM");
        let (exit, log) = relay.stop();
        let report = RelayReport::parse(&log);
        if report.received.is_none()
            || report.dests.len() != receivers.addrs.len()
            || exit.is_none_or(|s| !s.success())
        {
            eprintln!("forza-relay did not end cleanly ({exit:?}); its stderr:\n{log}");
        }
        RelayOutcome {
            usage,
            vm_rss_kib,
            vm_hwm_kib,
            listen_drops,
            warm_up,
            report,
            exit,
            idle,
        }
    });
    drop(relay);

    let dests = receivers
        .finish()
        .into_iter()
        .zip(kernel_drops)
        .map(|(got, kernel_drops)| {
            let mut latencies: Vec<u64> = got
                .arrived
                .iter()
                .zip(&sent.at)
                .filter(|(arrived, _)| **arrived != 0)
                .map(|(arrived, sent)| arrived.saturating_sub(*sent))
                .collect();
            latencies.sort_unstable();
            DestOutcome {
                sink: got.sink,
                received: got.received,
                duplicates: got.duplicates,
                malformed: got.malformed,
                latencies,
                kernel_drops,
            }
        })
        .collect();
    Outcome {
        plan,
        sent: u64::from(count),
        send_time: sent.time,
        send_errors: sent.errors,
        dests,
        relay: relay_outcome,
    }
}

fn measure_idle(pid: u32, time: Duration) -> Idle {
    let before = Usage::now(pid);
    thread::sleep(time);
    Idle {
        time,
        usage: before.until(&Usage::now(pid)),
    }
}

/// Nearest-rank percentile of sorted nanoseconds, in µs.
fn percentile_us(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1] as f64 / 1_000.0)
}

fn loss_pct(sent: u64, received: u64) -> f64 {
    if sent == 0 {
        0.0
    } else {
        100.0 * sent.saturating_sub(received) as f64 / sent as f64
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| v.to_string())
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.1}"))
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

fn route_label(plan: &Plan) -> String {
    let route = match plan.route {
        Route::Direct => "direct (no relay)".to_owned(),
        Route::Relay(s) if s.len() == 1 => "relay, 1 destination".to_owned(),
        Route::Relay(s) => format!("relay, {} destinations", s.len()),
    };
    match plan.wake {
        Wake::Shared => format!("{route}, 1 recv thread"),
        Wake::Blocking | Wake::Polling => route,
    }
}

/// Every destination's latencies of a run pooled together, sorted.
fn pooled(o: &Outcome) -> Vec<u64> {
    let mut all: Vec<u64> = o
        .dests
        .iter()
        .flat_map(|d| d.latencies.iter().copied())
        .collect();
    all.sort_unstable();
    all
}

/// The largest p50 among a run's destinations, in µs.
fn worst_p50(o: &Outcome) -> Option<f64> {
    o.dests
        .iter()
        .filter_map(|d| percentile_us(&d.latencies, 50.0))
        .reduce(f64::max)
}

fn print_latency_header() {
    println!(
        "{:<34} {:<6} {:>11} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10}",
        "route",
        "dest",
        "received",
        "p50 µs",
        "p99 µs",
        "max µs",
        "p50 ×dir",
        "p99 ×dir",
        "relay CPU"
    );
}

/// A run's latency rows: one per destination, plus a pooled row when several.
fn print_latency(o: &Outcome, direct: Option<(f64, f64)>, clock: &Clock) {
    let cpu = o
        .cpu_secs(clock)
        .map(|s| format!("{:.1} %", 100.0 * s / o.send_time.as_secs_f64()))
        .unwrap_or_else(|| "-".to_owned());
    let row = |label: &str, dest: &str, received: u64, expected: u64, sorted: &[u64], cpu: &str| {
        let p50 = percentile_us(sorted, 50.0);
        let p99 = percentile_us(sorted, 99.0);
        let ratio = |v: Option<f64>, d: Option<f64>| match (v, d) {
            (Some(v), Some(d)) if d > 0.0 => format!("{:.2}×", v / d),
            _ => "-".to_owned(),
        };
        println!(
            "{:<34} {:<6} {:>11} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10}",
            label,
            dest,
            format!("{received}/{expected}"),
            us(p50),
            us(p99),
            us(percentile_us(sorted, 100.0)),
            ratio(p50, direct.map(|d| d.0)),
            ratio(p99, direct.map(|d| d.1)),
            cpu
        );
    };
    let label = route_label(&o.plan);
    if let [d] = &o.dests[..] {
        row(
            &label,
            d.sink.output,
            d.received,
            o.sent,
            &d.latencies,
            &cpu,
        );
    } else {
        let received = o.dests.iter().map(|d| d.received).sum();
        let expected = o.sent * o.dests.len() as u64;
        row(&label, "all", received, expected, &pooled(o), &cpu);
        for d in &o.dests {
            row("", d.sink.output, d.received, o.sent, &d.latencies, "");
        }
    }
    print_anomalies(o);
}

/// Anything a run saw that the tables don't show.
fn print_anomalies(o: &Outcome) {
    if o.send_errors > 0 {
        println!("    ! {} sends failed", o.send_errors);
    }
    for d in &o.dests {
        if d.duplicates > 0 || d.malformed > 0 {
            println!(
                "    ! {}: {} duplicates, {} malformed datagrams",
                d.sink.output, d.duplicates, d.malformed
            );
        }
    }
    if let Some(r) = &o.relay {
        for (d, rd) in o.dests.iter().zip(&r.report.dests) {
            if !rd.drops_text.is_empty() {
                println!("    ! relay -> {}: {}", d.sink.output, rd.drops_text);
            }
        }
        if r.exit.is_none_or(|s| !s.success()) {
            println!("    ! relay exit: {:?}", r.exit);
        }
    }
}

fn print_throughput_header() {
    println!(
        "{:<7} {:>5} {:<6} {:>8} {:>8}  {:<30} {:<27} lost at: relay socket / in relay / dest sockets",
        "route", "dests", "recv", "target/s", "sent/s", "delivered/s, each destination", "loss %, each destination",
    );
}

fn print_throughput(o: &Outcome) {
    let secs = o.send_time.as_secs_f64().max(1e-9);
    let delivered: Vec<String> = o
        .dests
        .iter()
        .map(|d| format!("{:.0}", d.received as f64 / secs))
        .collect();
    let loss: Vec<String> = o
        .dests
        .iter()
        .map(|d| format!("{:.3}", loss_pct(o.sent, d.received)))
        .collect();
    let dest_drops: Option<u64> = o.dests.iter().map(|d| d.kernel_drops).sum();
    let (relay_in, in_relay) = match &o.relay {
        Some(r) => (
            opt(r
                .listen_drops
                .or_else(|| r.received().map(|got| o.sent.saturating_sub(got)))),
            opt(r.dropped()),
        ),
        None => ("-".to_owned(), "-".to_owned()),
    };
    println!(
        "{:<7} {:>5} {:<6} {:>8} {:>8}  {:<30} {:<27} {} / {} / {}",
        o.plan.route.name(),
        o.dests.len(),
        o.plan.wake.id(),
        o.plan.rate,
        format!("{:.0}", o.sent_rate()),
        delivered.join(" "),
        loss.join(" "),
        relay_in,
        in_relay,
        opt(dest_drops)
    );
    print_anomalies(o);
}

fn print_cpu_header() {
    println!(
        "{:<7} {:>5} {:<6} {:>8} {:>6} {:>8} {:>9} | {:>8} {:>7} {:>9} | {:>7} {:>7}",
        "route",
        "dests",
        "recv",
        "target/s",
        "CPU %",
        "µs/pkt",
        "µs/dgram",
        "loop µs",
        "wait %",
        "preempts",
        "RSS KiB",
        "HWM KiB"
    );
}

fn print_cpu(o: &Outcome, clock: &Clock) {
    let Some(r) = &o.relay else { return };
    let secs = o.send_time.as_secs_f64();
    let cpu = o.cpu_secs(clock);
    let received = r.received().unwrap_or(o.sent).max(1);
    let out = r
        .report
        .dests
        .iter()
        .map(|d| d.sent)
        .sum::<u64>()
        .saturating_sub(r.warm_up * o.dests.len() as u64)
        .max(1);
    let per = |n: u64| {
        cpu.map_or_else(
            || "n/a".to_owned(),
            |s| format!("{:.2}", s * 1e6 / n as f64),
        )
    };
    let u = &r.usage;
    println!(
        "{:<7} {:>5} {:<6} {:>8} {:>6} {:>8} {:>9} | {:>8} {:>7} {:>9} | {:>7} {:>7}",
        o.plan.route.name(),
        o.dests.len(),
        o.plan.wake.id(),
        o.plan.rate,
        cpu.map_or_else(|| "n/a".to_owned(), |s| format!("{:.1}", 100.0 * s / secs)),
        per(received),
        per(out),
        u.run_ns.map_or_else(
            || "n/a".to_owned(),
            |n| format!("{:.2}", n as f64 / 1e3 / received as f64)
        ),
        u.wait_ns.map_or_else(
            || "n/a".to_owned(),
            |n| format!("{:.1}", 100.0 * n as f64 / 1e9 / secs)
        ),
        opt(u.preempted),
        opt(r.vm_rss_kib),
        opt(r.vm_hwm_kib)
    );
}

/// The loss aim over the relay runs of `dests` destinations and receivers
/// woken by `wake`, up to `up_to` packets/s.
fn loss_aim(runs: &[Outcome], dests: usize, wake: Wake, up_to: u32) -> (bool, String) {
    let relevant: Vec<&Outcome> = runs
        .iter()
        .filter(|o| {
            matches!(o.plan.route, Route::Relay(s) if s.len() == dests)
                && o.plan.wake == wake
                && o.plan.rate <= up_to
        })
        .collect();
    let lost: u64 = relevant.iter().map(|o| o.lost()).sum();
    let worst = relevant
        .iter()
        .max_by(|a, b| a.worst_loss_pct().total_cmp(&b.worst_loss_pct()));
    let steps = match relevant.len() {
        1 => "1 step".to_owned(),
        n => format!("{n} steps"),
    };
    let mut text = match worst {
        Some(w) if lost > 0 => format!(
            "{lost} lost in {steps}; worst {:.3} % at {}/s",
            w.worst_loss_pct(),
            w.plan.rate
        ),
        _ => format!("0 lost in {steps}"),
    };
    if let Some(top) = relevant.iter().max_by_key(|o| o.plan.rate) {
        if top.sent_rate() < 0.98 * f64::from(top.plan.rate) {
            text.push_str(&format!(
                " (the sender reached only {:.0}/s at the top step)",
                top.sent_rate()
            ));
        }
    }
    (lost == 0 && !relevant.is_empty(), text)
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this binary
    // without it, where a 70-second load test of a debug build has no place.
    if !std::env::args().any(|a| a == "--bench") {
        println!("relay bench: skipped outside `cargo bench --bench relay`");
        return;
    }
    let started = Instant::now();
    let epoch = Instant::now();
    let clock = Clock::get();
    println!("forza-relay end-to-end benchmark (loopback)");
    println!("binary: {}", env!("CARGO_BIN_EXE_forza-relay"));
    println!(
        "input: {} packets, {} bytes; 4-destination mix: {}",
        INPUT,
        INPUT.len(),
        MIX.map(|s| s.output).join(", ")
    );
    println!(
        "machine: {} CPUs, load average {}; sender, receivers and relay share them",
        thread::available_parallelism().map_or(0, |n| n.get()),
        procfs::loadavg().unwrap_or_else(|| "n/a".to_owned())
    );
    if !cfg!(target_os = "linux") {
        println!("note: CPU, memory and kernel drop figures need Linux /proc; shown as n/a");
    }
    println!(
        "CPU ticks: {} per second ({})",
        clock.ticks_per_sec, clock.source
    );
    println!(
        "receivers (recv): block = a thread per socket woken by each datagram, like a real \
         consumer; poll = a thread per socket draining it every {} ms; shared = one thread \
         waiting on every socket",
        POLL_PERIOD.as_millis()
    );

    let one: &'static [Sink] = &MIX[..1];
    let four: &'static [Sink] = &MIX;

    println!(
        "\n(a) one-way latency at a paced {LATENCY_RATE} packets/s for {} s (receivers: block, \
         unless named)",
        LATENCY_TIME.as_secs()
    );
    print_latency_header();
    let latency = |route, wake, idle| Plan {
        route,
        wake,
        rate: LATENCY_RATE,
        time: LATENCY_TIME,
        idle,
    };
    let direct = run(latency(Route::Direct, Wake::Blocking, None), epoch);
    print_latency(&direct, None, &clock);
    let base = pooled(&direct);
    let base = percentile_us(&base, 50.0).zip(percentile_us(&base, 99.0));
    let relay1 = run(latency(Route::Relay(one), Wake::Blocking, None), epoch);
    print_latency(&relay1, base, &clock);
    let relay4 = run(
        latency(Route::Relay(four), Wake::Blocking, Some(IDLE_TIME)),
        epoch,
    );
    print_latency(&relay4, base, &clock);
    let relay4_shared = run(latency(Route::Relay(four), Wake::Shared, None), epoch);
    print_latency(&relay4_shared, base, &clock);

    println!(
        "\n(b) throughput and loss, {} s per step (the sender bursts every {} µs above {} \
         packets/s)",
        STEP_TIME.as_secs(),
        BATCH_PERIOD.as_micros(),
        BATCH_ABOVE
    );
    print_throughput_header();
    let mut steps = Vec::new();
    let step = |route, wake, rate| Plan {
        route,
        wake,
        rate,
        time: STEP_TIME,
        idle: None,
    };
    let mut plans = Vec::new();
    for rate in ONE_DEST_RATES {
        plans.push(step(Route::Direct, Wake::Polling, rate));
        plans.push(step(Route::Relay(one), Wake::Polling, rate));
    }
    plans.extend(FOUR_DEST_RATES.map(|rate| step(Route::Relay(four), Wake::Polling, rate)));
    // The aims again, with receivers woken by every datagram as real consumers are.
    plans.push(step(Route::Direct, Wake::Blocking, AIM_ONE_DEST_RATE));
    plans.push(step(Route::Relay(one), Wake::Blocking, AIM_ONE_DEST_RATE));
    plans.push(step(Route::Relay(four), Wake::Blocking, AIM_FOUR_DEST_RATE));
    for plan in plans {
        let o = run(plan, epoch);
        print_throughput(&o);
        steps.push(o);
    }

    println!(
        "\n(c) the relay process, by run: CPU % of one core, µs per packet in and per datagram \
         out (utime+stime, whole process) | the loop thread's on-CPU µs per packet in, time \
         spent waiting for a CPU, preemptions (schedstat, status) | VmRSS, VmHWM"
    );
    print_cpu_header();
    for o in [&relay1, &relay4, &relay4_shared].into_iter().chain(&steps) {
        print_cpu(o, &clock);
    }
    let idle = relay4.relay.as_ref().and_then(|r| r.idle.as_ref());
    let idle_ticks = idle.and_then(|i| i.usage.ticks);
    let idle_text = match idle {
        Some(i) => format!(
            "{} ticks in {} s = {} of one core (tick resolution {:.2} %); loop thread ran {} µs, \
             woke {} times",
            opt(i.usage.ticks),
            i.time.as_secs(),
            i.usage.ticks.map_or_else(
                || "n/a".to_owned(),
                |t| format!(
                    "{:.2} %",
                    100.0 * t as f64 / clock.ticks_per_sec / i.time.as_secs_f64()
                )
            ),
            100.0 / clock.ticks_per_sec / i.time.as_secs_f64(),
            opt(i.usage.run_ns.map(|n| n / 1_000)),
            opt(i.usage.sleeps)
        ),
        None => "n/a".to_owned(),
    };
    println!("idle (no traffic, after the 4-destination latency run): {idle_text}");
    let peak = [&relay1, &relay4, &relay4_shared]
        .into_iter()
        .chain(&steps)
        .filter_map(|o| Some((o.relay.as_ref()?.vm_hwm_kib?, o)))
        .max_by_key(|(kib, _)| *kib);

    println!("\nsummary (aims beside the figures; figures are noisy on a shared 2-core machine)");
    let d50 = base.map(|b| b.0);
    let ratio = |o: &Outcome| worst_p50(o).zip(d50).map(|(p, d)| p / d);
    let fmt_ratio = |r: Option<f64>| r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}×"));
    let p50_ok = |r: Option<f64>| r.is_some_and(|r| r <= AIM_P50_RATIO);
    let (r1, r4, r4s) = (ratio(&relay1), ratio(&relay4), ratio(&relay4_shared));
    println!(
        "  {} p50 through the relay <= {AIM_P50_RATIO}× direct at {LATENCY_RATE}/s, 1 destination: \
         {} (direct p50 {} µs)",
        pass(p50_ok(r1)),
        fmt_ratio(r1),
        us(d50)
    );
    println!(
        "  {} p50 through the relay <= {AIM_P50_RATIO}× direct at {LATENCY_RATE}/s, 4 destinations: \
         {} at the slowest destination ({} with one receiving thread)",
        pass(p50_ok(r4)),
        fmt_ratio(r4),
        fmt_ratio(r4s)
    );
    println!(
        "  {} 0 % CPU while idle: {idle_text}",
        pass(idle_ticks == Some(0))
    );
    for (dests, up_to) in [(4, AIM_FOUR_DEST_RATE), (1, AIM_ONE_DEST_RATE)] {
        let noun = if dests == 1 {
            "destination"
        } else {
            "destinations"
        };
        let (ok, text) = loss_aim(&steps, dests, Wake::Polling, up_to);
        let (_, woken) = loss_aim(&steps, dests, Wake::Blocking, up_to);
        println!(
            "  {} no loss, {dests} {noun} up to {up_to}/s in: {text} (receivers: poll); \
             with receivers woken per datagram: {woken}",
            pass(ok)
        );
    }
    let direct_lost = |wake: Wake| -> u64 {
        steps
            .iter()
            .filter(|o| {
                matches!(o.plan.route, Route::Direct)
                    && o.plan.wake == wake
                    && o.plan.rate <= AIM_ONE_DEST_RATE
            })
            .map(Outcome::lost)
            .sum()
    };
    println!(
        "       direct, no relay, up to {AIM_ONE_DEST_RATE}/s: {} lost (poll), {} lost (block)",
        direct_lost(Wake::Polling),
        direct_lost(Wake::Blocking)
    );
    match peak {
        Some((kib, o)) => println!(
            "  {} RSS under {} MiB: peak VmHWM {kib} KiB ({:.2} MiB), {} at {}/s",
            pass(kib < AIM_RSS_KIB),
            AIM_RSS_KIB / 1024,
            kib as f64 / 1024.0,
            route_label(&o.plan),
            o.plan.rate
        ),
        None => println!("  MISS RSS under {} MiB: n/a", AIM_RSS_KIB / 1024),
    }
    println!(
        "\nfinished in {:.0} s; load average now {}",
        started.elapsed().as_secs_f64(),
        procfs::loadavg().unwrap_or_else(|| "n/a".to_owned())
    );
}

/// `/proc` readings (Linux).
#[cfg(target_os = "linux")]
mod procfs {
    use std::fs;

    /// utime + stime of every thread of `pid`, in clock ticks.
    pub fn cpu_ticks(pid: u32) -> Option<u64> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces; the fields after it are plain.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Fields 14 and 15 of stat(5); `rest` starts at field 3.
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        Some(utime + stime)
    }

    /// A numeric `Key:` line of `/proc/<pid>/status` (kB for the `Vm*` keys).
    pub fn status_value(pid: u32, key: &str) -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status.lines().find_map(|line| {
            let value = line.strip_prefix(key)?.strip_prefix(':')?;
            value.split_whitespace().next()?.parse().ok()
        })
    }

    /// The main thread's time on a CPU and time waiting for one, in ns
    /// (`/proc/<pid>/schedstat`).
    pub fn schedstat(pid: u32) -> Option<(u64, u64)> {
        let text = fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
        let mut fields = text.split_whitespace().map(str::parse::<u64>);
        Some((fields.next()?.ok()?, fields.next()?.ok()?))
    }

    /// The kernel's drop counter of the UDP socket bound to `port`.
    pub fn udp_drops(port: u16) -> Option<u64> {
        let table = fs::read_to_string("/proc/net/udp").ok()?;
        let mut found = None;
        for line in table.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let Some(local) = fields.get(1) else { continue };
            let Some((_, hex)) = local.split_once(':') else {
                continue;
            };
            if u16::from_str_radix(hex, 16).ok() == Some(port) {
                let drops: u64 = fields.last()?.parse().ok()?;
                found = Some(found.unwrap_or(0) + drops);
            }
        }
        found
    }

    /// The three load averages.
    pub fn loadavg() -> Option<String> {
        let text = fs::read_to_string("/proc/loadavg").ok()?;
        Some(
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
}

/// Elsewhere: every reading is unavailable.
#[cfg(not(target_os = "linux"))]
mod procfs {
    pub fn cpu_ticks(_pid: u32) -> Option<u64> {
        None
    }

    pub fn status_value(_pid: u32, _key: &str) -> Option<u64> {
        None
    }

    pub fn schedstat(_pid: u32) -> Option<(u64, u64)> {
        None
    }

    pub fn udp_drops(_port: u16) -> Option<u64> {
        None
    }

    pub fn loadavg() -> Option<String> {
        None
    }
}
