//! forza-relay: receive Forza "Data Out" telemetry on one UDP port and forward it to
//! many destinations, each in the packet layout it understands.
//!
//! The library holds the pure parts (formats, translation, decoding, the fan-out
//! core built from its own `fanout::Routes`), the relay shell that owns every
//! socket (`relay`), the runner that starts it with its observers ([`app`]),
//! the observers, and every subcommand's work ([`commands`]); the binary's
//! `main.rs` parses the command line (its `cli` module, private to it), sets up
//! the log and the signals, and maps how a subcommand ended to an exit code.

pub mod telemetry;
pub mod translate;
pub mod wire;

pub use telemetry::{Gear, Telemetry};
pub use translate::translate;
pub use wire::{detect, Detector, Format, Packet};

pub mod app;
pub mod capture;
pub mod commands;
pub mod config;
pub mod counters;
pub mod dashboard;
pub mod demo;
pub mod dissector;
pub mod export;
pub mod fanout;
pub mod filter;
pub mod logging;
pub mod named_file;
pub mod net;
pub mod numbers;
pub mod output;
pub mod owner;
pub mod platform;
pub mod relay;
pub mod report;
pub mod setup;
pub mod simulate;
pub mod state;
pub mod tap;
pub mod tray;
pub mod view;
pub mod web;
pub mod words;
