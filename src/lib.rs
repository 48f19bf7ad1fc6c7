//! forza-relay: receive Forza "Data Out" telemetry on one UDP port and forward it to
//! many destinations, each in the packet layout it understands.
//!
//! The library holds the pure parts (formats, translation, decoding) and the relay
//! shell that owns every socket; `main.rs` only parses the command line.

pub mod telemetry;
pub mod translate;
pub mod wire;

pub use telemetry::{Gear, Telemetry};
pub use translate::translate;
pub use wire::{detect, Detector, Format, Packet};

pub mod cli;
pub mod config;
pub mod filter;
pub mod relay;
pub mod socket;
pub mod stats;

/// What a configuration makes the relay do, as `check` prints it.
pub fn describe(config: &config::Config) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let input = match config.input {
        config::Input::Auto => "any Forza format (detected by length)".to_owned(),
        config::Input::Fixed(f) => format!("{f} packets ({}, {} bytes)", f.game(), f.len()),
    };
    let _ = write!(
        s,
        "listen on {} ({}) for {input}",
        config.listen, config.origin
    );
    if config.allow.is_empty() {
        s.push_str(" from any sender");
    } else {
        let nets: Vec<String> = config.allow.iter().map(ToString::to_string).collect();
        let _ = write!(s, " only from {}", nets.join(", "));
    }
    let _ = write!(
        s,
        "\nsend every packet to {} destination",
        config.destinations.len()
    );
    if config.destinations.len() != 1 {
        s.push('s');
    }
    s.push(':');
    for d in &config.destinations {
        let _ = write!(s, "\n  {:<16} {:<22} ", d.name, d.addr.to_string());
        match d.output {
            config::Output::Same => s.push_str("same (byte-for-byte)"),
            config::Output::Format(f) => {
                let _ = write!(s, "{f} (translated)");
            }
        }
        if d.addr_text != d.addr.to_string() && d.addr_text != d.name {
            let _ = write!(s, ", from {:?}", d.addr_text);
        }
        if d.only_race_on {
            s.push_str(", only while racing");
        }
        if d.max_rate > 0 {
            let _ = write!(s, ", at most {}/s", d.max_rate);
        }
    }
    match config.stats_interval {
        Some(i) => {
            let _ = write!(s, "\nsummary every {}s", i.as_secs());
        }
        None => s.push_str("\nperiodic summary off"),
    }
    s
}
