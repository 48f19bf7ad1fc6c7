//! Who sends to the listening port (issue 23): a table of at most
//! [`MAX_SENDERS`] senders, kept by the core in place (no allocation), and the
//! one whose stream it follows: the game's. With `auto`, only the packets of
//! the sender followed teach how Horizon packets that tell nothing are read
//! (see [`crate::wire::Acceptor::read_from`]); another sender's datagrams are
//! read by their own bytes.
//!
//! The first sender is followed. Another sender's stream is followed instead
//! once the one followed has sent nothing for [`FOLLOW_SILENCE`] (the game
//! restarted on another port, or it stopped and something else sends): then
//! the new one's next datagram takes over. So datagrams of a second program
//! interleaved with the game's never move how the game's stream is read.
//!
//! A datagram of the sender followed costs one comparison, an increment and a
//! store ([`Senders::count_followed`]); any other goes out of line
//! ([`Senders::note_other`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

/// Senders the table holds: the game, and a few others to show.
pub const MAX_SENDERS: usize = 4;

/// How long the sender followed may be silent before the next datagram of
/// another sender makes its stream the one followed.
pub const FOLLOW_SILENCE: Duration = Duration::from_secs(2);

/// One sender in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sender {
    /// Its address (an IPv4 sender seen through a dual-stack socket as itself).
    pub addr: SocketAddr,
    /// Datagrams it sent that were let in (`listen.allow`), packets or not.
    pub datagrams: u64,
    /// When its latest datagram was handled, on the loop's clock.
    pub last: Option<Instant>,
}

impl Default for Sender {
    fn default() -> Self {
        Sender {
            addr: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            datagrams: 0,
            last: None,
        }
    }
}

/// The senders seen, the one followed, and what did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Senders {
    list: [Sender; MAX_SENDERS],
    len: usize,
    /// Index in `list` of the sender followed; `None` before the first.
    followed: Option<usize>,
    /// The address of the sender followed, for the one comparison a
    /// datagram of it costs: before the first, [`NOBODY`], which no datagram
    /// comes from.
    followed_addr: SocketAddr,
    /// `followed`'s index, 0 before the first: what the fast path indexes.
    followed_at: usize,
    /// Datagrams of senders no longer listed (the table was full, and they
    /// had been heard from least recently).
    others: u64,
    /// Senders added to the table so far (one that was put out and comes
    /// back counts again): the shell says each one after the first.
    added: u64,
    /// Times another sender's stream became the one followed.
    switches: u64,
    /// Index in `list` of the sender put there last.
    newest: usize,
    /// Senders added plus switches: what the shell compares once per drain.
    changes: u64,
}

/// The address no datagram comes from (the unspecified IPv6 address, port
/// 0): who is followed before anybody is.
const NOBODY: SocketAddr = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0);

// The fast path indexes with `i % MAX_SENDERS`, a mask.
const _: () = assert!(MAX_SENDERS.is_power_of_two());

impl Default for Senders {
    fn default() -> Self {
        Senders {
            list: [Sender::default(); MAX_SENDERS],
            len: 0,
            followed: None,
            followed_addr: NOBODY,
            followed_at: 0,
            others: 0,
            added: 0,
            switches: 0,
            newest: 0,
            changes: 0,
        }
    }
}

impl Senders {
    /// True when `from` is the sender followed.
    #[inline]
    pub fn follows(&self, from: SocketAddr) -> bool {
        from == self.followed_addr
    }

    /// Counts one datagram, at `now`, of the sender followed (whom
    /// [`Senders::follows`] named).
    #[inline]
    pub fn count_followed(&mut self, now: Instant) {
        // Set with `followed_addr`, which only the sender followed matches.
        let s = &mut self.list[self.followed_at % MAX_SENDERS];
        s.datagrams += 1;
        s.last = Some(now);
    }

    /// Takes back a datagram [`Senders::count_followed`] counted: it was no
    /// sender's telemetry (the status query).
    pub fn uncount_followed(&mut self) {
        let s = &mut self.list[self.followed_at % MAX_SENDERS];
        s.datagrams = s.datagrams.saturating_sub(1);
    }

    /// Counts one datagram of `from`, a sender not followed, at `now`: found
    /// or put in the table, and followed when none is or the one followed
    /// has been silent for [`FOLLOW_SILENCE`]. True when `from`'s stream
    /// became the one followed with this datagram.
    #[cold]
    #[inline(never)]
    pub fn note_other(&mut self, from: SocketAddr, now: Instant) -> bool {
        let i = match self.list[..self.len].iter().position(|s| s.addr == from) {
            Some(i) => i,
            None => self.add(from),
        };
        let s = &mut self.list[i];
        s.datagrams += 1;
        s.last = Some(now);
        let silent = match self.followed {
            None => true,
            Some(f) => self.list[f]
                .last
                .is_none_or(|t| now.saturating_duration_since(t) >= FOLLOW_SILENCE),
        };
        if silent {
            if self.followed.is_some() {
                self.switches += 1;
                self.changes += 1;
            }
            self.followed = Some(i);
            self.followed_addr = from;
            self.followed_at = i;
        }
        silent
    }

    /// Puts `from` in the table, in place of the sender heard from least
    /// recently (never the one followed) when it is full; its index.
    fn add(&mut self, from: SocketAddr) -> usize {
        self.added += 1;
        self.changes += 1;
        let i = if self.len < MAX_SENDERS {
            self.len += 1;
            self.len - 1
        } else {
            let oldest = (0..MAX_SENDERS)
                .filter(|&i| Some(i) != self.followed)
                .min_by_key(|&i| self.list[i].last)
                .unwrap_or(0);
            self.others += self.list[oldest].datagrams;
            oldest
        };
        self.list[i] = Sender {
            addr: from,
            datagrams: 0,
            last: None,
        };
        self.newest = i;
        i
    }

    /// The senders in the table, in the order they were put there.
    pub fn list(&self) -> &[Sender] {
        &self.list[..self.len]
    }

    /// The sender followed, if any datagram was let in yet.
    pub fn followed(&self) -> Option<&Sender> {
        self.followed.and_then(|i| self.list.get(i))
    }

    /// Datagrams of senders the table no longer lists.
    pub fn others(&self) -> u64 {
        self.others
    }

    /// Senders put in the table so far.
    pub fn added(&self) -> u64 {
        self.added
    }

    /// Times another sender's stream became the one followed.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// Senders added and switches so far: changes when either does.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The sender put in the table last.
    pub fn newest(&self) -> Option<&Sender> {
        self.list().get(self.newest)
    }
}

/// `[{"addr": "127.0.0.1:5201", "datagrams": 3600, "following": true}, …]`.
pub(crate) struct SendersList<'a>(pub(crate) &'a Senders);

impl Serialize for SendersList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct One<'a>(&'a Sender, bool);
        impl Serialize for One<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(3))?;
                map.serialize_entry("addr", &self.0.addr)?;
                map.serialize_entry("datagrams", &self.0.datagrams)?;
                map.serialize_entry("following", &self.1)?;
                map.end()
            }
        }
        let senders = self.0;
        let mut seq = s.serialize_seq(Some(senders.len))?;
        for (i, sender) in senders.list().iter().enumerate() {
            seq.serialize_element(&One(sender, senders.followed == Some(i)))?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Counts one datagram of `from` as the core does.
    fn note(s: &mut Senders, from: SocketAddr, now: Instant) -> bool {
        if s.follows(from) {
            s.count_followed(now);
            false
        } else {
            s.note_other(from, now)
        }
    }

    #[test]
    fn the_first_sender_is_followed_and_another_only_after_its_silence() {
        let mut s = Senders::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert!(note(&mut s, at(5201), t0), "the first sender is followed");
        for i in 1..100 {
            assert!(!note(&mut s, at(5201), t0 + ms(i * 16)));
            if i % 3 == 0 {
                assert!(!note(&mut s, at(6666), t0 + ms(i * 16)), "interleaved");
            }
        }
        assert_eq!(s.followed().map(|f| f.addr), Some(at(5201)));
        assert_eq!(s.added(), 2);
        assert_eq!(s.switches(), 0);
        let last = t0 + ms(99 * 16);
        assert!(!note(&mut s, at(6666), last + FOLLOW_SILENCE - ms(1)));
        assert!(
            note(&mut s, at(6666), last + FOLLOW_SILENCE),
            "the game's stream stopped: the other one is followed"
        );
        assert_eq!(s.switches(), 1);
        let got: Vec<(SocketAddr, u64)> = s.list().iter().map(|x| (x.addr, x.datagrams)).collect();
        assert_eq!(got, [(at(5201), 100), (at(6666), 35)]);
        assert_eq!(
            serde_json::to_string(&SendersList(&s)).unwrap(),
            r#"[{"addr":"127.0.0.1:5201","datagrams":100,"following":false},{"addr":"127.0.0.1:6666","datagrams":35,"following":true}]"#
        );
    }

    #[test]
    fn a_full_table_replaces_the_sender_heard_from_least_recently_never_the_one_followed() {
        let mut s = Senders::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        note(&mut s, at(1), t0);
        for port in 2..=MAX_SENDERS as u16 {
            note(&mut s, at(port), t0 + ms(u64::from(port)));
            note(&mut s, at(port), t0 + ms(u64::from(port)));
        }
        // The followed sender is the oldest, and stays.
        note(&mut s, at(100), t0 + ms(100));
        let ports: Vec<u16> = s.list().iter().map(|x| x.addr.port()).collect();
        assert_eq!(ports, [1, 100, 3, 4]);
        assert_eq!(s.others(), 2, "sender 2's datagrams");
        assert_eq!(s.added(), MAX_SENDERS as u64 + 1);
        let counted: u64 = s.list().iter().map(|x| x.datagrams).sum::<u64>() + s.others();
        assert_eq!(
            counted,
            1 + 2 * (MAX_SENDERS as u64 - 1) + 1,
            "every datagram"
        );
        assert_eq!(s.followed().map(|f| f.addr), Some(at(1)));
    }
}
