//! Where the viewers' datagrams come from: one small trait, so the dashboard and the
//! exporter read a UDP socket, a capture file or the relay's tap alike.
//!
//! A [`Source`] lends one datagram at a time from its own buffer; nothing is
//! allocated per datagram. [`Source::next`] waits at most the time it is given, so a
//! consumer can redraw, read keys or check a stop flag between datagrams. A source
//! that plays a capture at its own pace answers [`Next::Idle`] until the next
//! datagram is due; one fed by the relay's tap gives the receive time as wall-clock
//! time (an `Instant` anchored to a `SystemTime` taken once).

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, SystemTime};

use crate::socket;

/// One received datagram, borrowed from the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// When it was received (wall clock: a capture file records it so).
    pub time: SystemTime,
    /// Who sent it.
    pub from: SocketAddr,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// What [`Source::next`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next<'a> {
    /// A datagram.
    Datagram(Datagram<'a>),
    /// Nothing within the time given; ask again.
    Idle,
    /// The source has no more datagrams (end of a capture file, the relay stopped).
    End,
}

/// A stream of datagrams: a UDP socket, a capture file, the relay's tap.
pub trait Source {
    /// Waits at most `timeout` for the next datagram. An error is fatal to the
    /// source (the consumer reports it and stops); passing conditions such as a
    /// timeout or an interrupted call are [`Next::Idle`].
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>>;

    /// Where the datagrams come from, for a title line: `"listening on 0.0.0.0:5400"`.
    fn describe(&self) -> String;
}

impl<S: Source + ?Sized> Source for &mut S {
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>> {
        (**self).next(timeout)
    }

    fn describe(&self) -> String {
        (**self).describe()
    }
}

impl<S: Source + ?Sized> Source for Box<S> {
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>> {
        (**self).next(timeout)
    }

    fn describe(&self) -> String {
        (**self).describe()
    }
}

/// The largest UDP payload: a longer-than-Forza datagram is received whole, so its
/// true length can be reported.
const MAX_DATAGRAM: usize = 65_536;

/// Datagrams arriving on a UDP socket (`--listen ADDR`).
#[derive(Debug)]
pub struct UdpSource {
    socket: UdpSocket,
    addr: SocketAddr,
    buf: Box<[u8]>,
}

impl UdpSource {
    /// Binds `addr` with the relay's socket settings (large receive buffer, IPv4 on
    /// an unspecified IPv6 address). Port 0 picks a free port: see
    /// [`UdpSource::local_addr`].
    pub fn bind(addr: SocketAddr) -> io::Result<UdpSource> {
        let (socket, _granted) = socket::bind_listener(addr)?;
        socket.set_nonblocking(false)?;
        let addr = socket.local_addr()?;
        Ok(UdpSource {
            socket,
            addr,
            buf: vec![0; MAX_DATAGRAM].into_boxed_slice(),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Source for UdpSource {
    fn next(&mut self, timeout: Duration) -> io::Result<Next<'_>> {
        // A zero read timeout is refused by the OS (it would mean "block forever").
        let timeout = timeout.max(Duration::from_millis(1));
        self.socket.set_read_timeout(Some(timeout))?;
        match self.socket.recv_from(&mut self.buf) {
            Ok((n, from)) => Ok(Next::Datagram(Datagram {
                time: SystemTime::now(),
                from: canonical(from),
                payload: &self.buf[..n],
            })),
            Err(e) => match e.kind() {
                // Windows reports an earlier send's ICMP refusal on recv (FORMATS.md);
                // the viewers never send, but it costs nothing to be safe.
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionRefused => Ok(Next::Idle),
                _ => Err(e),
            },
        }
    }

    fn describe(&self) -> String {
        format!("listening on {}", self.addr)
    }
}

/// An IPv4 sender seen on a dual-stack socket reads as IPv4.
fn canonical(from: SocketAddr) -> SocketAddr {
    SocketAddr::new(from.ip().to_canonical(), from.port())
}

/// Datagrams held in memory, then [`Next::End`]: for tests, and for feeding a
/// consumer from data already read.
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    queue: VecDeque<(SystemTime, SocketAddr, Vec<u8>)>,
    current: Vec<u8>,
}

impl MemorySource {
    /// An empty source.
    pub fn new() -> MemorySource {
        MemorySource::default()
    }

    /// Adds a datagram at the end.
    pub fn push(&mut self, time: SystemTime, from: SocketAddr, payload: Vec<u8>) {
        self.queue.push_back((time, from, payload));
    }
}

impl Source for MemorySource {
    fn next(&mut self, _timeout: Duration) -> io::Result<Next<'_>> {
        match self.queue.pop_front() {
            Some((time, from, payload)) => {
                self.current = payload;
                Ok(Next::Datagram(Datagram {
                    time,
                    from,
                    payload: &self.current,
                }))
            }
            None => Ok(Next::End),
        }
    }

    fn describe(&self) -> String {
        "datagrams in memory".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::time::Instant;

    #[test]
    fn udp_source_lends_each_datagram_and_idles_when_quiet() {
        let mut source = UdpSource::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let to = source.local_addr();
        assert_ne!(to.port(), 0);
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.send_to(&[1, 2, 3], to).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let got = loop {
            match source.next(Duration::from_millis(100)).unwrap() {
                Next::Datagram(d) => break (d.from, d.payload.to_vec()),
                Next::Idle if Instant::now() < deadline => continue,
                other => panic!("no datagram: {other:?}"),
            }
        };
        assert_eq!(got, (sender.local_addr().unwrap(), vec![1, 2, 3]));
        assert_eq!(source.next(Duration::ZERO).unwrap(), Next::Idle);
        assert_eq!(source.describe(), format!("listening on {to}"));
    }

    #[test]
    fn udp_source_reports_a_port_in_use() {
        let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = UdpSource::bind(taken.local_addr().unwrap()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn memory_source_plays_in_order_then_ends() {
        let from = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9));
        let mut source = MemorySource::new();
        source.push(SystemTime::UNIX_EPOCH, from, vec![7]);
        source.push(SystemTime::UNIX_EPOCH, from, vec![8, 9]);
        for expected in [&[7u8][..], &[8, 9]] {
            match source.next(Duration::ZERO).unwrap() {
                Next::Datagram(d) => assert_eq!(d.payload, expected),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(source.next(Duration::ZERO).unwrap(), Next::End);
    }
}
