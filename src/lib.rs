//! forza-relay: receive Forza "Data Out" telemetry on one UDP port and forward it to
//! many destinations, each in the packet layout it understands.
//!
//! The library holds the pure parts (formats, translation, decoding, the fan-out
//! core) and the relay shell that owns every socket; `main.rs` only parses the
//! command line.

pub mod telemetry;
pub mod translate;
pub mod wire;

pub use telemetry::{Gear, Telemetry};
pub use translate::translate;
pub use wire::{detect, Detector, Format, Packet};

pub mod capture;
pub mod cli;
pub mod config;
pub mod demo;
pub mod fanout;
pub mod filter;
pub mod platform;
pub mod recv;
pub mod relay;
pub mod reload;
pub mod setup;
pub mod simulate;
pub mod socket;
pub mod stats;
pub mod tap;
pub mod watch;
