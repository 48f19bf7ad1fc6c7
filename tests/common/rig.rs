//! The test rig shared by tests/it and tests/no_alloc.rs: a [`Game`] sending
//! frames to the relay and [`Tool`]s receiving what it forwards.
//!
//! Every socket is one the operating system gave and the test keeps: no port
//! is bound, closed and handed on (another program could take it meanwhile).
//! The waits end on facts, each with a bound only a lost frame reaches:
//! - [`Game::wait_sent`]: the game has sent so many;
//! - [`Tool::stop_once_it_has`]: the tool has received so many (the game's
//!   count, or the relay's own `sent` from its snapshot);
//! - [`Tool::finish`], once the relay has stopped: everything it sent is in the
//!   tool's queue (a send on loopback queues the datagram at the receiver
//!   before it returns), so reading until the queue is empty reads it all.
//!   No reader decides a stream has ended after a quiet period.
//!
//! The one sleep is the game's pace. Self-contained (std and forza_relay
//! only), so tests/no_alloc.rs includes it by path.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The bound of every wait here: reached only when a frame is lost or a thread
/// stopped, never on a loaded machine.
pub const WITHIN: Duration = Duration::from_secs(30);

/// How often a waiting thread looks at its flag (not a bound on anything).
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// How the game paces its frames.
#[derive(Clone, Copy, Debug)]
pub enum Pace {
    /// `n` frames a second, each at its own moment from the start (a game's
    /// rendering rate).
    Hz(u64),
    /// As fast as it can, pausing 1 ms after every `n` frames (a burst the
    /// relay drains in batches).
    Bursts(u32),
}

/// A game: sends `frame(i)` for i = 0, 1, 2… to the relay at its [`Pace`],
/// until stopped or until it has sent `count` frames.
pub struct Game {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU32>,
    thread: Option<JoinHandle<u32>>,
}

impl Game {
    /// Sends until stopped.
    pub fn start(
        to: SocketAddr,
        pace: Pace,
        frame: impl FnMut(u32) -> Vec<u8> + Send + 'static,
    ) -> Game {
        Game::start_counted(to, u32::MAX, pace, frame)
    }

    /// Sends `count` frames, or fewer when stopped first.
    pub fn start_counted(
        to: SocketAddr,
        count: u32,
        pace: Pace,
        mut frame: impl FnMut(u32) -> Vec<u8> + Send + 'static,
    ) -> Game {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU32::new(0));
        let (stopped, counter) = (stop.clone(), sent.clone());
        let thread = thread::spawn(move || {
            let from: SocketAddr = if to.is_ipv6() {
                "[::1]:0".parse().expect("an address")
            } else {
                "127.0.0.1:0".parse().expect("an address")
            };
            let socket = UdpSocket::bind(from).expect("bind the game's socket");
            let start = Instant::now();
            let mut i = 0u32;
            while i < count && !stopped.load(Ordering::SeqCst) {
                let bytes = frame(i);
                loop {
                    match socket.send_to(&bytes, to) {
                        Ok(n) => {
                            assert_eq!(n, bytes.len(), "a datagram is sent whole");
                            break;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => panic!("the game's send to {to}: {e}"),
                    }
                }
                i += 1;
                counter.store(i, Ordering::SeqCst);
                // Pacing the game: the one place the rig sleeps.
                match pace {
                    Pace::Hz(hz) => {
                        let due = start + Duration::from_micros(u64::from(i) * 1_000_000 / hz);
                        thread::sleep(due.saturating_duration_since(Instant::now()));
                    }
                    Pace::Bursts(n) if i.is_multiple_of(n) => {
                        thread::sleep(Duration::from_millis(1))
                    }
                    Pace::Bursts(_) => {}
                }
            }
            i
        });
        Game {
            stop,
            sent,
            thread: Some(thread),
        }
    }

    /// How many it has sent so far.
    pub fn sent(&self) -> u32 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Waits until it has sent `n` in all.
    #[track_caller]
    pub fn wait_sent(&self, n: u32) {
        let deadline = Instant::now() + WITHIN;
        while self.sent() < n {
            let thread = self.thread.as_ref().expect("running");
            assert!(
                !thread.is_finished() && Instant::now() < deadline,
                "the game stopped at {} of {n} frames",
                self.sent()
            );
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Lets `more` frames go, then stops: how many it sent in all.
    #[track_caller]
    pub fn stop_after(self, more: u32) -> u32 {
        self.wait_sent(self.sent() + more);
        self.stop()
    }

    /// Waits until a counted game has sent all its frames (at most
    /// [`WITHIN`]), then stops: how many it sent.
    #[track_caller]
    pub fn finish(self) -> u32 {
        let deadline = Instant::now() + WITHIN;
        let thread = self.thread.as_ref().expect("running");
        while !thread.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(2));
        }
        self.stop()
    }

    /// Stops now: how many it sent.
    #[track_caller]
    pub fn stop(mut self) -> u32 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .expect("stopped once")
            .join()
            .expect("the game's thread did not panic")
    }
}

impl Drop for Game {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A tool listening where the relay sends: keeps `read(bytes)` of every
/// datagram, in order, on its own thread.
pub struct Tool<T> {
    addr: SocketAddr,
    /// 0: receiving; 1: stop now; 2: read what is queued, then stop.
    end: Arc<AtomicU32>,
    got: Arc<AtomicU32>,
    thread: Option<JoinHandle<Vec<T>>>,
}

const RECEIVING: u32 = 0;
const STOP: u32 = 1;
const DRAIN: u32 = 2;

impl<T: Send + 'static> Tool<T> {
    /// Receives on `socket` (bound by the test and kept).
    pub fn start(socket: UdpSocket, mut read: impl FnMut(&[u8]) -> T + Send + 'static) -> Tool<T> {
        let addr = socket.local_addr().expect("a bound socket");
        socket
            .set_read_timeout(Some(LOOK_EVERY))
            .expect("set a read timeout");
        let end = Arc::new(AtomicU32::new(RECEIVING));
        let got = Arc::new(AtomicU32::new(0));
        let (ended, count) = (end.clone(), got.clone());
        let thread = thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = vec![0u8; 65_536];
            loop {
                match ended.load(Ordering::SeqCst) {
                    STOP => return kept,
                    DRAIN => {
                        socket.set_nonblocking(true).expect("set non-blocking");
                        loop {
                            match socket.recv(&mut buf) {
                                Ok(n) => {
                                    kept.push(read(&buf[..n]));
                                    count.fetch_add(1, Ordering::SeqCst);
                                }
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                                // WouldBlock: the queue is empty. Another error
                                // (a refusal reported on Windows) ends it too.
                                Err(_) => return kept,
                            }
                        }
                    }
                    _ => {}
                }
                // An error is the timeout (to look at the flag), or one the
                // relay's refusals cause on some systems: receive on.
                if let Ok(n) = socket.recv(&mut buf) {
                    kept.push(read(&buf[..n]));
                    count.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Tool {
            addr,
            end,
            got,
            thread: Some(thread),
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many datagrams it has received so far.
    pub fn got(&self) -> u32 {
        self.got.load(Ordering::SeqCst)
    }

    /// Waits until it has received `n` (at most [`WITHIN`]); whether it has.
    pub fn wait_for(&self, n: u32) -> bool {
        let deadline = Instant::now() + WITHIN;
        while self.got() < n {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(2));
        }
        true
    }

    /// Waits until it has received `n` (at most [`WITHIN`]: the test's own
    /// assertions then say what is missing), then stops: what it kept.
    pub fn stop_once_it_has(self, n: u32) -> Vec<T> {
        self.wait_for(n);
        self.end_with(STOP)
    }

    /// Once whatever sends to it has stopped (the relay's thread joined, or
    /// its process ended): reads what is still queued, then stops: what it kept.
    pub fn finish(self) -> Vec<T> {
        self.end_with(DRAIN)
    }

    /// Stops now: what it kept.
    pub fn stop(self) -> Vec<T> {
        self.end_with(STOP)
    }

    fn end_with(mut self, how: u32) -> Vec<T> {
        self.end.store(how, Ordering::SeqCst);
        self.thread
            .take()
            .expect("stopped once")
            .join()
            .expect("the tool's thread did not panic")
    }
}

impl<T> Drop for Tool<T> {
    fn drop(&mut self) {
        self.end.store(STOP, Ordering::SeqCst);
    }
}
