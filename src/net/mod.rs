//! The network, as the relay and the tools use it: sockets made the one way
//! (`socket.rs`: the listening socket's buffer, the destinations' connected
//! sockets, the one send with its retries, the ephemeral bind of replay and
//! simulate, the wording of a port in use), and receiving (`recv/`: a batch of
//! datagrams with the kernel's receive times, `recvmmsg` on Linux and
//! `recv_from` elsewhere, and waiting inside the receive), and sending many
//! datagrams to many addresses in one call (`many/`: `sendmmsg` and the error
//! queue on Linux). The places with `unsafe` for sockets are `recv/linux.rs`
//! and `many/linux.rs`, each block with its `// SAFETY:`.

pub mod many;
pub mod query;
pub mod recv;
pub mod socket;
