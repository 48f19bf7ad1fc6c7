//! What a configuration makes the relay do, in words, as `check` prints it.

use super::{Config, Input, Output, StatsFormat};
use crate::fanout::{Records, Target};
use crate::output::Encoding;

impl Config {
    /// What this configuration makes the relay do, as `check` prints it.
    pub fn describe(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let input = match self.input {
            Input::Auto => "any Forza format (detected by length)".to_owned(),
            Input::Fixed(f) => format!("{f} packets ({}, {} bytes)", f.game(), f.len()),
        };
        let _ = write!(s, "listen on {} ({}) for {input}", self.listen, self.origin);
        if self.allow.is_empty() {
            s.push_str(" from any sender");
        } else {
            let nets: Vec<String> = self.allow.iter().map(ToString::to_string).collect();
            let _ = write!(s, " only from {}", nets.join(", "));
        }
        let _ = write!(
            s,
            "\nsend every packet to {} destination",
            self.destinations.len()
        );
        if self.destinations.len() != 1 {
            s.push('s');
        }
        s.push(':');
        for d in &self.destinations {
            let _ = write!(s, "\n  {:<16} {:<22} ", d.name, d.target.to_string());
            match d.output {
                Output::Same => s.push_str("same (byte-for-byte)"),
                Output::Format(f) => {
                    let _ = write!(s, "{f} (translated)");
                }
                Output::Text(Encoding::Json) => s.push_str("json (one JSON object per frame)"),
                Output::Text(Encoding::Influx) => {
                    s.push_str("influx (one InfluxDB line per frame)");
                }
            }
            if d.output.is_text() {
                match &d.fields {
                    Some(f) => {
                        let _ = write!(s, " of {}", f.names.join(", "));
                    }
                    None => s.push_str(" of every column"),
                }
                if d.records != Records::FRAMES {
                    let _ = write!(s, ", records: {}", d.records);
                }
            }
            match &d.target {
                Target::Udp(addr) => {
                    if d.addr_text != addr.to_string() && d.addr_text != d.name {
                        let _ = write!(s, ", from {:?}", d.addr_text);
                    }
                }
                Target::Mqtt(m) => {
                    let _ = write!(
                        s,
                        ", published on {:?} (status on {:?})",
                        m.topic,
                        m.status_topic()
                    );
                    if let Some(user) = &m.username {
                        let _ = write!(s, ", as {user:?}");
                        match (&m.password_env, &m.password) {
                            (Some(var), _) => {
                                let _ = write!(s, " with the password in ${var}");
                            }
                            (None, Some(_)) => s.push_str(" with a password"),
                            (None, None) => {}
                        }
                    }
                    if let Some(ca) = m.ca_file() {
                        let _ = write!(s, ", trusting {}", ca.display());
                    } else if m.broker.tls {
                        s.push_str(", trusting the system's certificates");
                    }
                }
            }
            if d.only_race_on {
                s.push_str(", only while racing");
            }
            if d.max_rate > 0 {
                let _ = write!(s, ", at most {}/s", d.max_rate);
            }
            if let Some(age) = d.max_age {
                let _ = write!(s, ", none older than {}", humantime::format_duration(age));
            }
            if let Some(hold) = d.hold {
                let _ = write!(
                    s,
                    ", the last racing frame through blank ones for up to {}",
                    humantime::format_duration(hold)
                );
            }
        }
        match self.stats_interval {
            Some(i) => {
                let _ = write!(s, "\nsummary every {}s", i.as_secs());
            }
            None => s.push_str("\nperiodic summary off"),
        }
        if self.stats_format == StatsFormat::Json {
            s.push_str(", summaries as JSON lines on standard output");
        }
        if let Some(path) = &self.record {
            let _ = write!(
                s,
                "\nrecord every datagram received into {}",
                path.display()
            );
        }
        s
    }
}
