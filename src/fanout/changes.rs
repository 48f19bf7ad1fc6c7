//! How a change of routes reads, in the log and on the page:
//! `+ C (fm7), ~ B: same -> fh5, - D` ([`Changes`]' `Display`).

use std::fmt;
use std::time::Duration;

use crate::fanout::plan::Changes;
use crate::fanout::routes::{Destination, Fields};

impl Changes {
    /// Writes each change, every one after `sep` (then `", "`); `sep` is left
    /// as it is when there is none. For a shell that lists its own changes
    /// first.
    pub fn write_items(&self, f: &mut fmt::Formatter<'_>, sep: &mut &str) -> fmt::Result {
        let mut item = |f: &mut fmt::Formatter<'_>| {
            let s = *sep;
            *sep = ", ";
            f.write_str(s)
        };
        if let Some((before, after)) = self.input {
            item(f)?;
            write!(f, "~ input: {before} -> {after}")?;
        }
        if self.allow {
            item(f)?;
            f.write_str("~ listen.allow")?;
        }
        for (_, d) in &self.added {
            item(f)?;
            write!(f, "+ {} ({})", d.name, d.output)?;
        }
        for c in &self.changed {
            item(f)?;
            write!(f, "~ {}:", c.after.name)?;
            write!(f, "{}", DestinationDiff(&c.before, &c.after))?;
        }
        for r in &self.removed {
            item(f)?;
            write!(f, "- {}", r.destination.name)?;
        }
        Ok(())
    }
}

impl fmt::Display for Changes {
    /// One line: `+ C (fm7), ~ B: same -> fh5, - D`, or `no changes`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("no changes");
        }
        self.write_items(f, &mut "")
    }
}

/// What differs between two configurations of one destination: ` same -> fh5`.
struct DestinationDiff<'a>(&'a Destination, &'a Destination);

impl fmt::Display for DestinationDiff<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (self.0, self.1);
        let mut sep = " ";
        let mut part = |f: &mut fmt::Formatter<'_>, args: fmt::Arguments<'_>| {
            f.write_str(sep)?;
            sep = "; ";
            f.write_fmt(args)
        };
        if a.output != b.output {
            part(f, format_args!("{} -> {}", a.output, b.output))?;
        }
        if a.addr_text != b.addr_text {
            part(f, format_args!("{} -> {}", a.addr_text, b.addr_text))?;
        } else if a.target != b.target {
            match (a.target.mqtt(), b.target.mqtt()) {
                (Some(x), Some(y)) if x.topic != y.topic => {
                    part(f, format_args!("topic {} -> {}", x.topic, y.topic))?;
                }
                (Some(_), Some(_)) => part(f, format_args!("broker login or certificates"))?,
                _ => part(f, format_args!("{} -> {}", a.target, b.target))?,
            }
        }
        if a.fields != b.fields {
            let names = |f: &Option<Fields>| {
                f.as_ref()
                    .map_or_else(|| "every column".to_owned(), |f| f.names.join(", "))
            };
            part(
                f,
                format_args!("fields {} -> {}", names(&a.fields), names(&b.fields)),
            )?;
        }
        if a.only_race_on != b.only_race_on {
            part(f, format_args!("only_race_on {}", b.only_race_on))?;
        }
        if a.max_rate != b.max_rate {
            part(f, format_args!("max_rate {} -> {}", a.max_rate, b.max_rate))?;
        }
        let time = |d: Option<Duration>| {
            d.map_or_else(
                || "off".to_owned(),
                |d| humantime::format_duration(d).to_string(),
            )
        };
        if a.max_age != b.max_age {
            part(
                f,
                format_args!("max_age {} -> {}", time(a.max_age), time(b.max_age)),
            )?;
        }
        if a.records != b.records {
            part(f, format_args!("records {} -> {}", a.records, b.records))?;
        }
        if a.hold != b.hold {
            part(f, format_args!("hold {} -> {}", time(a.hold), time(b.hold)))?;
        }
        Ok(())
    }
}
