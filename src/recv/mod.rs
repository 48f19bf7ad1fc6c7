//! Receiving datagrams from the listening socket in batches, into buffers made
//! once at start-up.
//!
//! On Linux one `recvmmsg` call takes up to [`Batch::SIZE`] queued datagrams, and
//! a batch that comes back short means the queue is empty: the drain ends without
//! a read that would only say "would block". Elsewhere a batch is one
//! `recv_from`, and the drain reads until `WouldBlock`, as mio's edge-triggered
//! readiness asks. The `unsafe` that `recvmmsg` takes stays in `linux.rs`.
//!
//! On Linux the receive can also be the wait ([`Batch::wait`], [`wait`]): the
//! relay sleeps in it when nothing else needs watching ([`WAITS`]).

#[cfg_attr(target_os = "linux", path = "linux.rs")]
#[cfg_attr(not(target_os = "linux"), path = "portable.rs")]
mod imp;

pub mod wait;

pub use imp::{Batch, WAITS};

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
            .arm(&socket, Some(Duration::from_secs(5)), Duration::ZERO)
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
            .arm(&socket, Some(Duration::from_millis(20)), Duration::ZERO)
            .unwrap();
        let e = batch.wait(&socket).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }

    #[test]
    fn an_empty_socket_would_block() {
        let (socket, _) = listener();
        let e = Batch::new().recv(&socket).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
}
