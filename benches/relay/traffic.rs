//! The packets: a paced sender and the receiving threads. Both are threads of
//! this process and read one `Instant`, so a datagram's one-way latency is its
//! arrival time less its send time. The sequence number rides in TimestampMS
//! (the Sled block, which every output format keeps) and indexes both tables.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use forza_relay::wire::{Format, Packet};
use socket2::{Domain, Protocol, Socket, Type};

/// What the sender sends: FH6, 324 bytes.
pub const INPUT: Format = Format::Fh6;
/// TimestampMS of warm-up datagrams, which are not measured.
const WARM_UP_SEQ: u32 = u32::MAX;
/// Warm-up datagrams sent once every receiver has seen one.
const WARM_UP_PACKETS: u32 = 20;
/// How long the warm-up may take: the relay starting and binding its port.
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(10);
/// SO_RCVBUF asked for by each receiver (Linux caps it at `net.core.rmem_max`).
const RECV_BUFFER: usize = 4 << 20;
/// Above this rate the sender sends in bursts, one every `BURST_PERIOD`.
const BURST_ABOVE: u32 = 2_000;
const BURST_PERIOD: Duration = Duration::from_micros(500);
/// The last stretch before a send is spun, not slept: sleep overshoots by 50 µs
/// or more. Kept short: on two cores a spinning sender takes CPU from the relay.
const SPIN_WINDOW: Duration = Duration::from_micros(100);
/// How long a polling receiver sleeps once its socket is empty.
pub const POLL_PERIOD: Duration = Duration::from_millis(1);
/// A blocking receiver's read timeout, so it notices the stop flag.
const READ_TIMEOUT: Duration = Duration::from_millis(20);
/// Longest wait for datagrams still in flight after the last send.
const SETTLE_MAX: Duration = Duration::from_secs(2);

/// How a receiving thread waits for datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Blocked in `recv`, woken by every datagram, as a real consumer is;
    /// arrival times are exact.
    Blocking,
    /// Drains its socket, then sleeps [`POLL_PERIOD`]: nobody is woken per
    /// datagram, so a throughput run measures the relay, not the scheduler.
    Polling,
}

/// What arrives at one receiving socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrive {
    /// Packets of this format.
    Packet(Format),
    /// JSON objects (a `json` destination, issue 25): the sequence number is
    /// the object's `TimestampMS`.
    Json,
}

/// The value of `"TimestampMS":` in a JSON object, read without a parser.
fn json_timestamp(bytes: &[u8]) -> Option<u32> {
    const KEY: &[u8] = b"\"TimestampMS\":";
    let at = bytes.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let digits = bytes[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    std::str::from_utf8(&bytes[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

/// What arrived on one receiving socket.
pub struct Arrivals {
    /// What the datagrams are read as.
    pub arrive: Arrive,
    /// Arrival time (ns since the epoch) by sequence number; 0 = never arrived.
    pub at: Vec<u64>,
    /// Measured datagrams, each sequence number once.
    pub received: u64,
    /// A sequence number seen again.
    pub duplicates: u64,
    /// Not the expected length, or a sequence number never sent.
    pub malformed: u64,
    warm: Arc<AtomicU64>,
    measured: Arc<AtomicU64>,
}

impl Arrivals {
    fn record(&mut self, bytes: &[u8], at: u64) {
        let seq = match self.arrive {
            Arrive::Packet(format) => Packet::new_checked(bytes, format)
                .ok()
                .map(|p| p.timestamp_ms()),
            Arrive::Json => json_timestamp(bytes),
        };
        let Some(seq) = seq else {
            self.malformed += 1;
            return;
        };
        if seq == WARM_UP_SEQ {
            self.warm.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match self.at.get_mut(seq as usize) {
            Some(slot) if *slot == 0 => {
                *slot = at.max(1);
                self.received += 1;
                self.measured.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => self.duplicates += 1,
            None => self.malformed += 1,
        }
    }

    /// One-way latencies in ns of the datagrams that arrived, sorted.
    pub fn latencies(&self, sent_at: &[u64]) -> Vec<u64> {
        let mut all: Vec<u64> = self
            .at
            .iter()
            .zip(sent_at)
            .filter(|(arrived, _)| **arrived != 0)
            .map(|(arrived, sent)| arrived.saturating_sub(*sent))
            .collect();
        all.sort_unstable();
        all
    }
}

/// The receiving threads of one run: one loopback socket and thread each.
pub struct Receivers {
    addrs: Vec<SocketAddr>,
    warm: Vec<Arc<AtomicU64>>,
    measured: Vec<Arc<AtomicU64>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Arrivals>>,
}

impl Receivers {
    /// One socket per entry of `arriving` (what arrives there), with tables
    /// for `capacity` sequence numbers.
    pub fn spawn(
        arriving: &[Arrive],
        wake: Wake,
        capacity: usize,
        epoch: Instant,
    ) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (mut addrs, mut warm, mut measured, mut threads) = (vec![], vec![], vec![], vec![]);
        for (i, &arrive) in arriving.iter().enumerate() {
            let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
            // Best effort: a smaller buffer still works, and a loss shows in the
            // socket's kernel drop counter.
            let _ = socket.set_recv_buffer_size(RECV_BUFFER);
            socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
            match wake {
                Wake::Blocking => socket.set_read_timeout(Some(READ_TIMEOUT))?,
                Wake::Polling => socket.set_nonblocking(true)?,
            }
            let socket = UdpSocket::from(socket);
            let addr = socket.local_addr()?;
            let arrivals = Arrivals {
                arrive,
                at: vec![0; capacity],
                received: 0,
                duplicates: 0,
                malformed: 0,
                warm: Arc::default(),
                measured: Arc::default(),
            };
            addrs.push(addr);
            warm.push(arrivals.warm.clone());
            measured.push(arrivals.measured.clone());
            let stop = stop.clone();
            threads.push(
                thread::Builder::new()
                    .name(format!("recv-{i}"))
                    .spawn(move || receive(&socket, arrivals, wake, epoch, &stop))?,
            );
        }
        Ok(Receivers {
            addrs,
            warm,
            measured,
            stop,
            threads,
        })
    }

    /// The receiving addresses, in order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    fn all_warm(&self) -> bool {
        self.warm.iter().all(|w| w.load(Ordering::Relaxed) > 0)
    }

    fn measured_total(&self) -> u64 {
        self.measured
            .iter()
            .map(|d| d.load(Ordering::Relaxed))
            .sum()
    }

    /// Waits until every measured datagram arrived or the counts stop moving.
    pub fn settle(&self, expected: u64) {
        let deadline = Instant::now() + SETTLE_MAX;
        let mut last = u64::MAX;
        loop {
            // Longer than a polling receiver's sleep, so a still count means done.
            thread::sleep(Duration::from_millis(50));
            let now = self.measured_total();
            if now >= expected || now == last || Instant::now() >= deadline {
                return;
            }
            last = now;
        }
    }

    /// Stops the threads; what each socket saw, in order.
    pub fn finish(self) -> Vec<Arrivals> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .map(|t| t.join().expect("a receiving thread panicked"))
            .collect()
    }
}

fn receive(
    socket: &UdpSocket,
    mut arrivals: Arrivals,
    wake: Wake,
    epoch: Instant,
    stop: &AtomicBool,
) -> Arrivals {
    // An all-column JSON frame is ~2.5 kB.
    let mut buf = [0u8; 8192];
    while !stop.load(Ordering::Relaxed) {
        match socket.recv(&mut buf) {
            Ok(len) => arrivals.record(&buf[..len], nanos_since(epoch)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && wake == Wake::Polling => {
                thread::sleep(POLL_PERIOD)
            }
            // A timeout (blocking), an interrupt; a refused ICMP can't happen on
            // a socket that only receives, but is not a reason to stop either.
            Err(_) => {}
        }
    }
    arrivals
}

/// Nanoseconds since `epoch`.
pub fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The sending end: one connected socket, one packet rewritten per send.
pub struct Sender {
    socket: UdpSocket,
    buf: [u8; INPUT.len()],
}

/// What the sender did in a measured run.
pub struct Sent {
    /// Send time (ns since the epoch) by sequence number.
    pub at: Vec<u64>,
    /// From the first send to the last.
    pub time: Duration,
    /// Sends that failed.
    pub errors: u64,
}

impl Sender {
    /// A sender of racing FH6 packets to `to`.
    pub fn connect(to: SocketAddr) -> io::Result<Sender> {
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

    /// Sends warm-up datagrams until every receiver has seen one (the relay is
    /// up), then a few more.
    pub fn warm_up(&mut self, receivers: &Receivers) -> Result<(), String> {
        self.warm_up_within(receivers, WARM_UP_TIMEOUT)
    }

    /// As [`Sender::warm_up`], for a relay that may take up to `timeout` to
    /// start (one under valgrind).
    pub fn warm_up_within(
        &mut self,
        receivers: &Receivers,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while !receivers.all_warm() {
            if Instant::now() > deadline {
                return Err(format!(
                    "no warm-up datagram reached every receiver within {timeout:?}"
                ));
            }
            // Before the relay binds its port a send may fail (ICMP refused).
            let _ = self.send(WARM_UP_SEQ);
            thread::sleep(Duration::from_millis(2));
        }
        for _ in 0..WARM_UP_PACKETS {
            let _ = self.send(WARM_UP_SEQ);
            thread::sleep(Duration::from_millis(1));
        }
        // Let the last ones through before measuring.
        thread::sleep(Duration::from_millis(50));
        Ok(())
    }

    /// Sends `count` datagrams at `rate` per second: one at a time at low
    /// rates, in bursts every `BURST_PERIOD` above `BURST_ABOVE`. A sender that
    /// falls behind catches up at once, so the average rate holds.
    pub fn send_paced(&mut self, count: u32, rate: u32, epoch: Instant) -> Sent {
        let burst = if rate > BURST_ABOVE {
            (f64::from(rate) * BURST_PERIOD.as_secs_f64())
                .round()
                .max(1.0) as u32
        } else {
            1
        };
        let period = f64::from(burst) / f64::from(rate);
        let mut at = vec![0u64; count as usize];
        let mut errors = 0;
        let start = Instant::now();
        let (mut seq, mut bursts) = (0u32, 0u32);
        while seq < count {
            wait_until(start + Duration::from_secs_f64(f64::from(bursts) * period));
            for _ in 0..burst.min(count - seq) {
                at[seq as usize] = nanos_since(epoch);
                if self.send(seq).is_err() {
                    errors += 1;
                }
                seq += 1;
            }
            bursts += 1;
        }
        Sent {
            at,
            time: start.elapsed(),
            errors,
        }
    }
}

/// Sleeps most of the way, then spins.
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

/// A loopback port nobody is using right now, for a relay to listen on.
pub fn free_port() -> io::Result<SocketAddr> {
    UdpSocket::bind("127.0.0.1:0")?.local_addr()
}
