//! Receiving datagrams from the listening socket in batches, into buffers made
//! once at start-up.
//!
//! On Linux one `recvmmsg` call takes up to [`Batch::SIZE`] queued datagrams, and
//! a batch that comes back short means the queue is empty: the drain ends without
//! a read that would only say "would block". Elsewhere a batch is one
//! `recv_from`, and the drain reads until `WouldBlock`, as mio's edge-triggered
//! readiness asks. The `unsafe` that `recvmmsg` takes stays in `linux.rs`.
//!
//! On Linux each datagram also comes with the moment the kernel received it
//! ([`enable_receive_times`], [`Batch::received`]): on the wall clock, which a
//! [`Moment`] read once per batch turns into the loop's `Instant`s. Elsewhere
//! there is none, and the moment the batch was read stands for it.
//!
//! On Linux the receive can also be the wait ([`Batch::wait`], [`wait`]): the
//! relay sleeps in it when nothing else needs watching ([`WAITS`]).
//!
//! A destination's send ([`send`]) is here too: on Linux it is the system
//! call made without glibc's cancellation bookkeeping, with the rest of the
//! relay's `unsafe` socket code.

use std::time::{Duration, Instant, SystemTime};

#[cfg_attr(target_os = "linux", path = "linux.rs")]
#[cfg_attr(not(target_os = "linux"), path = "portable.rs")]
mod imp;

pub mod wait;

#[cfg(target_os = "linux")]
pub(crate) use imp::socket_addr;
pub use imp::{enable_receive_times, send, send_now, Batch, WAITS};

/// One moment on both clocks, read once per batch right after the receive
/// (both reads are vDSO calls on Linux, no system call): turns the kernel's
/// receive times (the wall clock) into the loop's clock.
#[derive(Debug, Clone, Copy)]
pub struct Moment {
    /// On the loop's clock.
    pub instant: Instant,
    /// On the wall clock.
    pub wall: SystemTime,
}

impl Moment {
    /// Now, on both clocks.
    pub fn now() -> Moment {
        Moment {
            wall: SystemTime::now(),
            instant: Instant::now(),
        }
    }

    /// The wall-clock time `wall` on the loop's clock: as long before
    /// `self.instant` as it is before `self.wall`. A time after `self.wall`
    /// (the wall clock was set back meanwhile) reads as `self.instant`.
    pub fn instant_of(&self, wall: SystemTime) -> Instant {
        self.wall
            .duration_since(wall)
            .ok()
            .and_then(|ago| self.instant.checked_sub(ago))
            .unwrap_or(self.instant)
    }

    /// When datagram `i` of `batch` reached the machine, on the loop's clock:
    /// the kernel's receive time, or this moment when there is none.
    pub fn received(&self, batch: &Batch, i: usize) -> Instant {
        self.times(batch, i).0
    }

    /// When datagram `i` of `batch` reached the machine, on the loop's clock
    /// and on the wall clock: the kernel's receive time, or this moment when
    /// there is none — then datagram `i` is stamped `i` nanoseconds after it
    /// on the wall clock, so that the frames of one batch keep distinct
    /// times in order (InfluxDB keeps one point per series and time: two
    /// frames of one batch with one time were one point, under qemu, which
    /// gives no receive times). Nothing is read from a clock here.
    #[inline]
    pub fn times(&self, batch: &Batch, i: usize) -> (Instant, SystemTime) {
        match batch.received(i) {
            Some(wall) => (self.instant_of(wall), wall),
            None => (self.instant, self.wall + Duration::from_nanos(i as u64)),
        }
    }
}

/// Receive buffer per datagram: larger than the largest UDP payload (65,507), so
/// nothing is ever truncated.
pub const MAX_DATAGRAM: usize = 65_536;

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, UdpSocket};
    use std::time::{Duration, Instant};

    use super::*;

    fn listener() -> (mio::net::UdpSocket, SocketAddr) {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        let addr = socket.local_addr().unwrap();
        (mio::net::UdpSocket::from_std(socket), addr)
    }

    /// Receives until `want` datagrams arrived (the kernel may hand them over in
    /// more than one batch), for at most two seconds.
    fn receive(
        batch: &mut Batch,
        socket: &mio::net::UdpSocket,
        want: usize,
    ) -> Vec<(Vec<u8>, SocketAddr)> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut got = Vec::new();
        while got.len() < want && Instant::now() < deadline {
            match batch.recv(socket) {
                Ok(n) => {
                    assert!(n <= Batch::SIZE);
                    for i in 0..n {
                        let (bytes, from) = batch.datagram(i);
                        got.push((bytes.to_vec(), from));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("recv: {e}"),
            }
        }
        got
    }

    #[test]
    fn a_batch_holds_every_datagram_whole_with_its_sender() {
        let (socket, addr) = listener();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let from = sender.local_addr().unwrap();
        let big: Vec<u8> = (0..65_507u32).map(|i| (i % 251) as u8).collect();
        let datagrams: Vec<Vec<u8>> = (0..Batch::SIZE + 3)
            .map(|i| match i {
                0 => Vec::new(),
                5 => big.clone(),
                _ => vec![i as u8; 300 + i],
            })
            .collect();
        for d in &datagrams {
            sender.send_to(d, addr).unwrap();
        }
        let got = receive(&mut Batch::new(), &socket, datagrams.len());
        assert_eq!(got.len(), datagrams.len());
        for (i, ((bytes, sender_addr), sent)) in got.iter().zip(&datagrams).enumerate() {
            assert_eq!(bytes, sent, "datagram {i}");
            assert_eq!(*sender_addr, from, "sender of datagram {i}");
        }
    }

    /// Without the kernel's receive times, the frames of one batch are told
    /// apart on the wall clock, in order (InfluxDB keeps one point per time).
    #[test]
    fn without_receive_times_the_datagrams_of_a_batch_have_distinct_rising_times() {
        let (socket, addr) = listener();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..3u8 {
            sender.send_to(&[i; 324], addr).unwrap();
        }
        let mut batch = Batch::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        let n = loop {
            match batch.recv(&socket) {
                Ok(n) => break n,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("recv: {e}"),
            }
        };
        let moment = Moment::now();
        let walls: Vec<SystemTime> = (0..n).map(|i| moment.times(&batch, i).1).collect();
        for (i, wall) in walls.iter().enumerate() {
            match batch.received(i) {
                Some(kernel) => assert_eq!(*wall, kernel, "datagram {i}"),
                None => {
                    assert_eq!(*wall, moment.wall + Duration::from_nanos(i as u64));
                    assert_eq!(moment.times(&batch, i).0, moment.instant, "datagram {i}");
                }
            }
        }
        assert!(walls.windows(2).all(|w| w[0] < w[1]), "{walls:?}");
    }

    #[test]
    fn an_ipv6_sender_is_read_back() {
        let Ok(socket) = UdpSocket::bind("[::1]:0") else {
            eprintln!("note: no IPv6 loopback here; skipped");
            return;
        };
        socket.set_nonblocking(true).unwrap();
        let addr = socket.local_addr().unwrap();
        let socket = mio::net::UdpSocket::from_std(socket);
        let sender = UdpSocket::bind("[::1]:0").unwrap();
        sender.send_to(b"forza", addr).unwrap();
        let got = receive(&mut Batch::new(), &socket, 1);
        assert_eq!(got, [(b"forza".to_vec(), sender.local_addr().unwrap())]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_wait_sleeps_until_a_datagram_then_takes_every_one_queued() {
        let (socket, addr) = listener();
        wait::set_blocking(&socket).unwrap();
        let mut timeout = wait::RecvTimeout::default();
        timeout
            .arm(&socket, Some(Duration::from_secs(5)), Duration::ZERO, false)
            .unwrap();
        let sender = std::thread::spawn(move || {
            let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
            // Queued while the receiver sleeps, as one burst.
            std::thread::sleep(Duration::from_millis(50));
            for i in 0..3u8 {
                sender.send_to(&[i; 324], addr).unwrap();
            }
        });
        let mut batch = Batch::new();
        let mut got = Vec::new();
        while got.len() < 3 {
            let n = batch.wait(&socket).expect("a datagram within 5 s");
            got.extend((0..n).map(|i| batch.datagram(i).0.to_vec()));
        }
        sender.join().unwrap();
        assert_eq!(got, [[0u8; 324], [1; 324], [2; 324]]);
        // The poll's receive still never waits on the blocking socket.
        let e = batch.recv(&socket).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        // And the wait ends with its timeout.
        timeout
            .arm(
                &socket,
                Some(Duration::from_millis(20)),
                Duration::ZERO,
                false,
            )
            .unwrap();
        let e = batch.wait(&socket).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_receive_time_is_as_long_before_the_moment_on_both_clocks() {
        let m = Moment::now();
        let ago = Duration::from_millis(1_234);
        assert_eq!(m.instant_of(m.wall - ago), m.instant - ago);
        assert_eq!(m.instant_of(m.wall), m.instant);
        assert_eq!(
            m.instant_of(m.wall + ago),
            m.instant,
            "the wall clock was set back: not in the future"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_stamps_each_datagram_with_its_receive_time() {
        let (socket, addr) = listener();
        if let Err(e) = enable_receive_times(&socket) {
            // qemu-user (the Raspberry Pi build's tests, .ci/aarch64.sh) does
            // not emulate SO_TIMESTAMPNS; the relay then ages frames from when
            // it reads them. Every Linux kernel since 2.6.22 has it.
            let emulated = std::env::var_os("FORZA_RELAY_TEST_RUNNER").is_some();
            assert!(
                emulated && e.raw_os_error() == Some(libc::ENOPROTOOPT),
                "SO_TIMESTAMPNS: {e}"
            );
            return;
        }
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = std::time::SystemTime::now();
        for i in 0..3u8 {
            sender.send_to(&[i; 12], addr).unwrap();
        }
        let mut batch = Batch::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut times = Vec::new();
        while times.len() < 3 && Instant::now() < deadline {
            match batch.recv(&socket) {
                Ok(n) => times.extend((0..n).map(|i| batch.received(i))),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("recv: {e}"),
            }
        }
        let after = std::time::SystemTime::now();
        assert_eq!(times.len(), 3);
        let times: Vec<_> = times
            .into_iter()
            .map(|t| t.expect("a receive time"))
            .collect();
        for (i, t) in times.iter().enumerate() {
            assert!(before <= *t && *t <= after, "datagram {i}: {t:?}");
        }
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "in order: {times:?}"
        );
    }

    #[test]
    fn without_receive_times_the_batch_says_none() {
        let (socket, addr) = listener();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.send_to(b"forza", addr).unwrap();
        let mut batch = Batch::new();
        assert_eq!(receive(&mut batch, &socket, 1).len(), 1);
        assert_eq!(batch.received(0), None);
        let m = Moment::now();
        assert_eq!(m.received(&batch, 0), m.instant);
    }

    #[test]
    fn an_empty_socket_would_block() {
        let (socket, _) = listener();
        let e = Batch::new().recv(&socket).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
}
