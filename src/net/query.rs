//! The status query's bytes (issue 23): what the relay's core and the tools'
//! readers tell from a packet before anything else reads it. The answer, and
//! asking, are [`crate::report::query`]'s.

use std::net::SocketAddr;

/// The status query: bytes no Forza packet has (its length is no format's).
pub const QUERY: &[u8] = b"forza-relay?status/1";

const _: () = assert!(QUERY.len() < crate::wire::MIN_LEN);

/// True for the status query from a sender on this computer's loopback.
#[inline]
pub fn is_query(bytes: &[u8], from: SocketAddr) -> bool {
    bytes == QUERY && from.ip().to_canonical().is_loopback()
}
