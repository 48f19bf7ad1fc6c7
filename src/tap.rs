//! The tap: every datagram the relay receives, handed to another thread (the
//! capture writer, the dashboard) through a preallocated single-producer ring.
//!
//! The loop pushes; it never waits. A record is the receive time, the sender,
//! the listening address and the payload, written as one header plus the
//! payload bytes; when the ring hasn't room for both, the datagram is dropped
//! and counted ([`Tap::dropped`]), and forwarding goes on untouched. The
//! consumer takes whole records only: it reads a header, and the payload once
//! all of it is in. A consumer that takes datagrams but can't keep them (a
//! recording whose disk is full) counts them on the tap too
//! ([`Tap::count_not_recorded`]), so the relay's counters show both losses
//! ([`TapProducer::dropped`], [`TapProducer::not_recorded`]).
//!
//! Invariants: pushing allocates nothing; the ring is made once, by [`tap`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};

/// Bytes of ring a tap gets when none is asked for: about 8 s of a 360 Hz
/// stream, and 60 ms at 50,000 packets/s.
pub const DEFAULT_CAPACITY: usize = 1 << 20;

/// An address as 19 bytes: family (4 or 6), port (LE), 16 address bytes.
const ADDR_LEN: usize = 19;
/// Receive time (ns since the Unix epoch, LE), sender, listening address, length.
const HEADER_LEN: usize = 8 + 2 * ADDR_LEN + 4;

/// What both ends of one tap share.
#[derive(Debug, Default)]
struct Shared {
    /// Datagrams the ring had no room for.
    dropped: AtomicU64,
    /// Datagrams the consumer took but could not keep.
    not_recorded: AtomicU64,
    /// The consumer is gone: the producer can be dropped.
    closed: AtomicBool,
}

/// A new tap of `capacity` bytes: the loop's end and the reader's end.
pub fn tap(capacity: usize) -> (TapProducer, Tap) {
    let (prod, cons) = HeapRb::<u8>::new(capacity.max(HEADER_LEN + 1)).split();
    let shared = Arc::new(Shared::default());
    (
        TapProducer {
            prod,
            shared: shared.clone(),
        },
        Tap {
            cons,
            shared,
            payload: Vec::new(),
        },
    )
}

/// The loop's end of a tap.
pub struct TapProducer {
    prod: HeapProd<u8>,
    shared: Arc<Shared>,
}

impl TapProducer {
    /// Hands one datagram over, or drops and counts it when the ring is full.
    pub fn push(&mut self, time: SystemTime, from: SocketAddr, to: SocketAddr, payload: &[u8]) {
        let Ok(len) = u32::try_from(payload.len()) else {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if self.prod.vacant_len() < HEADER_LEN + payload.len() {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let nanos = time
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(&nanos.to_le_bytes());
        write_addr(&mut header[8..8 + ADDR_LEN], from);
        write_addr(&mut header[8 + ADDR_LEN..8 + 2 * ADDR_LEN], to);
        header[8 + 2 * ADDR_LEN..].copy_from_slice(&len.to_le_bytes());
        // Room for both was checked above, and only this end adds bytes.
        self.prod.push_slice(&header);
        self.prod.push_slice(payload);
    }

    /// True once the reader has gone: the loop then lets this end go too.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Relaxed)
    }

    /// Datagrams dropped so far because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Datagrams the reader took but could not keep (a recording whose file can
    /// no longer be written), so far.
    pub fn not_recorded(&self) -> u64 {
        self.shared.not_recorded.load(Ordering::Relaxed)
    }
}

/// One UDP datagram: when it was received, who sent it, where to, and its bytes.
///
/// Lent (`Datagram<&[u8]>`) by whoever owns the bytes (a tap, a capture reader,
/// a viewer's source), owned (`Datagram`, with a `Vec`) where it is kept: one
/// type, two ownerships. Inside the relay's loop the core takes an
/// [`Arrival`](crate::fanout::Arrival) instead, timed on the loop's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<P = Vec<u8>> {
    /// When it was received (or captured).
    pub time: SystemTime,
    /// Who sent it.
    pub from: SocketAddr,
    /// Where it was sent: the relay's listening address, or a capture's destination.
    pub to: SocketAddr,
    /// Its bytes (a Forza packet, for the streams this program cares about).
    pub payload: P,
}

impl Datagram<&[u8]> {
    /// A copy that owns its payload.
    pub fn owned(&self) -> Datagram {
        Datagram {
            time: self.time,
            from: self.from,
            to: self.to,
            payload: self.payload.to_vec(),
        }
    }
}

/// The reader's end of a tap.
pub struct Tap {
    cons: HeapCons<u8>,
    shared: Arc<Shared>,
    payload: Vec<u8>,
}

impl Tap {
    /// The header of the next record and its payload's length, once all of the
    /// record is in.
    fn next_record(&self) -> Option<([u8; HEADER_LEN], usize)> {
        let mut header = [0u8; HEADER_LEN];
        if self.cons.occupied_len() < HEADER_LEN {
            return None;
        }
        self.cons.peek_slice(&mut header);
        let len = u32::from_le_bytes(
            header[8 + 2 * ADDR_LEN..]
                .try_into()
                .expect("the header ends with 4 length bytes"),
        ) as usize;
        (self.cons.occupied_len() >= HEADER_LEN + len).then_some((header, len))
    }

    /// Whether a whole datagram is in, so that [`Tap::pop`] returns it. It
    /// borrows nothing: a reader can wait on it, then pop.
    pub fn is_ready(&self) -> bool {
        self.next_record().is_some()
    }

    /// The next whole datagram, if one is in.
    pub fn pop(&mut self) -> Option<Datagram<&[u8]>> {
        let (header, len) = self.next_record()?;
        self.cons.skip(HEADER_LEN);
        self.payload.resize(len, 0);
        self.cons.pop_slice(&mut self.payload);
        let nanos = u64::from_le_bytes(header[..8].try_into().expect("8 time bytes"));
        Some(Datagram {
            time: UNIX_EPOCH + Duration::from_nanos(nanos),
            from: read_addr(&header[8..8 + ADDR_LEN]),
            to: read_addr(&header[8 + ADDR_LEN..8 + 2 * ADDR_LEN]),
            payload: &self.payload,
        })
    }

    /// Datagrams the relay dropped from this tap so far because it was full
    /// (the reader fell behind).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Counts `n` datagrams taken from this tap that could not be kept, for the
    /// relay to show ([`TapProducer::not_recorded`]).
    pub fn count_not_recorded(&self, n: u64) {
        self.shared.not_recorded.fetch_add(n, Ordering::Relaxed);
    }

    /// Datagrams counted by [`Tap::count_not_recorded`] so far.
    pub fn not_recorded(&self) -> u64 {
        self.shared.not_recorded.load(Ordering::Relaxed)
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
    }
}

fn write_addr(out: &mut [u8], addr: SocketAddr) {
    let (family, octets) = match addr.ip() {
        IpAddr::V4(ip) => (4, ip.to_ipv6_mapped().octets()),
        IpAddr::V6(ip) => (6, ip.octets()),
    };
    out[0] = family;
    out[1..3].copy_from_slice(&addr.port().to_le_bytes());
    out[3..].copy_from_slice(&octets);
}

fn read_addr(b: &[u8]) -> SocketAddr {
    let port = u16::from_le_bytes([b[1], b[2]]);
    let octets: [u8; 16] = b[3..ADDR_LEN].try_into().expect("16 address bytes");
    let v6 = Ipv6Addr::from(octets);
    let ip = match (b[0], v6.to_ipv4_mapped()) {
        (4, Some(v4)) => IpAddr::V4(v4),
        (4, None) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        _ => IpAddr::V6(v6),
    };
    SocketAddr::new(ip, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_out_whole_and_in_order_with_their_addresses() {
        let (mut tx, mut rx) = tap(4096);
        let from: SocketAddr = "192.168.1.20:51234".parse().unwrap();
        let from6: SocketAddr = "[fe80::1]:5000".parse().unwrap();
        let to: SocketAddr = "0.0.0.0:5400".parse().unwrap();
        let t0 = UNIX_EPOCH + Duration::new(1_764_000_000, 123_456_789);
        tx.push(t0, from, to, &[1; 324]);
        tx.push(t0 + Duration::from_millis(16), from6, to, &[]);
        tx.push(t0 + Duration::from_millis(33), from, to, &[3; 232]);

        let d = rx.pop().unwrap();
        assert_eq!((d.time, d.from, d.to), (t0, from, to));
        assert_eq!(d.payload, &[1; 324][..]);
        let d = rx.pop().unwrap();
        assert_eq!(
            (d.time, d.from, d.payload.len()),
            (t0 + Duration::from_millis(16), from6, 0)
        );
        let d = rx.pop().unwrap();
        assert_eq!(d.payload, &[3; 232][..]);
        assert!(rx.pop().is_none());
        assert_eq!(rx.dropped(), 0);
    }

    #[test]
    fn a_full_ring_drops_and_counts_and_keeps_what_it_has() {
        let (mut tx, mut rx) = tap(HEADER_LEN * 2 + 600);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let now = SystemTime::now();
        tx.push(now, a, a, &[7; 324]);
        tx.push(now, a, a, &[8; 324]); // no room: dropped
        tx.push(now, a, a, &[9; 100]); // fits beside the first
        assert_eq!(tx.dropped(), 1);
        assert_eq!(rx.dropped(), 1);
        assert_eq!(rx.pop().unwrap().payload, &[7; 324][..]);
        assert_eq!(rx.pop().unwrap().payload, &[9; 100][..]);
        assert!(rx.pop().is_none());
        // Room again after reading: records wrap around the ring whole.
        for i in 0..10u8 {
            tx.push(now, a, a, &[i; 324]);
            assert_eq!(rx.pop().unwrap().payload, &[i; 324][..]);
        }
        assert_eq!(tx.dropped(), 1);
    }

    #[test]
    fn is_ready_waits_for_a_whole_record() {
        let (mut tx, mut rx) = tap(4096);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert!(!rx.is_ready(), "empty");
        // A header whose payload is not in yet, as the producer leaves it between
        // its two pushes.
        let mut header = [0u8; HEADER_LEN];
        header[8 + 2 * ADDR_LEN..].copy_from_slice(&3u32.to_le_bytes());
        tx.prod.push_slice(&header);
        assert!(!rx.is_ready(), "only the header is in");
        assert!(rx.pop().is_none());
        tx.prod.push_slice(&[1, 2]);
        assert!(!rx.is_ready(), "two of three payload bytes");
        tx.prod.push_slice(&[3]);
        assert!(rx.is_ready());
        assert!(rx.is_ready(), "asking again takes nothing");
        assert_eq!(rx.pop().unwrap().payload, &[1, 2, 3][..]);
        assert!(!rx.is_ready());
        tx.push(SystemTime::now(), a, a, &[9; 10]);
        assert!(rx.is_ready());
        assert_eq!(rx.pop().unwrap().payload, &[9; 10][..]);
    }

    #[test]
    fn what_the_reader_could_not_keep_is_counted_on_both_ends() {
        let (tx, rx) = tap(1024);
        assert_eq!((tx.not_recorded(), rx.not_recorded()), (0, 0));
        rx.count_not_recorded(3);
        rx.count_not_recorded(1);
        assert_eq!((tx.not_recorded(), rx.not_recorded()), (4, 4));
        assert_eq!(tx.dropped(), 0, "a separate count");
        drop(rx);
        assert_eq!(tx.not_recorded(), 4, "kept after the reader goes");
    }

    #[test]
    fn the_producer_sees_the_reader_go() {
        let (tx, rx) = tap(1024);
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
    }
}
