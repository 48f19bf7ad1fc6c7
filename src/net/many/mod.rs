//! Many datagrams, to many addresses, in one system call (issue 33): on Linux,
//! one `sendmmsg` on one unconnected socket per address family, and the ICMP
//! errors its datagrams met (a closed port's "port unreachable") read back
//! from the socket's error queue (`IP_RECVERR`), each with the address it was
//! for, so that a refusal is still charged to the destination it names.
//! Elsewhere there is no such call ([`AVAILABLE`] is false): the relay sends
//! on each destination's connected socket, as it always did.
//!
//! The messages are copied in ([`Many::push`]) into slots made once; the
//! headers the kernel reads point into them.

#[cfg_attr(target_os = "linux", path = "linux.rs")]
#[cfg_attr(not(target_os = "linux"), path = "portable.rs")]
mod imp;

pub use imp::{read_errors, sender, Address, Many, AVAILABLE};
