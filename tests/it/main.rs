//! The integration tests, as one test program: each file here is a module
//! named after what it tests, and the whole crate is linked once, not once per
//! file (issue 23: seventeen programs each linked it, and CI once died of a
//! full disk building them). `tests/no_alloc.rs` and `tests/logging.rs` stay
//! programs of their own: each proves a loop allocates nothing with a counting
//! allocator that must be the program's only one, and `logging` installs the
//! program's logger for the whole process.
//!
//! One test: `cargo test --test it relay::binary_prints_a_periodic_summary`;
//! one file: `cargo test --test it relay::`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../counting/mod.rs"]
mod counting;
#[path = "../fanout_check/mod.rs"]
mod fanout_check;

// Counts only on a thread that arms it (the capture writer's allocation
// test); every other thread allocates through the system allocator as usual.
#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

mod app;
mod auto;
mod awake;
mod beside;
mod browser;
mod capture;
mod config_faults;
mod docs;
mod fanout_props;
mod faults;
mod generated;
mod influx;
mod instance;
mod layers;
mod mqtt;
mod mqtt_faults;
mod names;
mod owner;
mod page;
mod page_secrets;
mod record;
mod relay;
mod reload;
mod session;
mod setup;
mod simulate;
mod tray;
mod watch;
mod web;
