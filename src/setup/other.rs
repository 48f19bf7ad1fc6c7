//! Linux, macOS and the rest: no loopback isolation, and the firewall (when
//! there is one) is the user's own tool to read: `doctor` has nothing to add.

use std::net::SocketAddr;

use super::doctor::Finding;

/// No checks beyond the portable ones.
pub fn checks(_listen: SocketAddr) -> Vec<Finding> {
    Vec::new()
}
