//! The network, as the relay and the tools use it: sockets made the one way
//! (`socket.rs`: the listening socket's buffer, the destinations' connected
//! sockets, the one send with its retries, the ephemeral bind of replay and
//! simulate, the wording of a port in use), and receiving (`recv/`: a batch of
//! datagrams with the kernel's receive times, `recvmmsg` on Linux and
//! `recv_from` elsewhere, and waiting inside the receive). The one place with
//! `unsafe` for sockets is `recv/linux.rs`, each block with its `// SAFETY:`.

pub mod query;
pub mod recv;
pub mod socket;
