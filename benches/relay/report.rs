//! Turning outcomes into figures: percentiles, medians over rounds, and the
//! small formatting helpers every table shares.

use std::fmt::{self, Display};

use crate::trial::Outcome;

/// Nearest-rank percentile `p` of sorted nanoseconds, in µs.
pub fn percentile_us(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1] as f64 / 1_000.0)
}

/// One figure over several rounds.
#[derive(Debug, Clone, Default)]
pub struct Rounds(Vec<f64>);

impl Rounds {
    /// Every round's value that could be measured.
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Rounds {
        Rounds(values.into_iter().flatten().collect())
    }

    /// How many rounds were measured.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The median (the mean of the middle two for an even count).
    pub fn median(&self) -> Option<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2]),
            _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    }

    /// The median with the smallest and largest round: `2.10 (1.90–2.40)`.
    pub fn show(&self, digits: usize) -> String {
        let Some(m) = self.median() else {
            return "n/a".to_owned();
        };
        let lo = self.0.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if self.0.len() == 1 {
            format!("{m:.digits$}")
        } else {
            format!("{m:.digits$} ({lo:.digits$}–{hi:.digits$})")
        }
    }
}

/// `PASS` or `MISS`.
pub fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// A value, or `n/a`.
pub fn opt<T: Display>(v: Option<T>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| v.to_string())
}

/// A number with `digits` decimals, or `n/a`.
pub fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
}

/// `1 destination`, `4 destinations`.
pub struct Dests(pub usize);

impl Display for Dests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("1 destination"),
            n => write!(f, "{n} destinations"),
        }
    }
}

/// Everything a run saw that its table row does not show, one `!` line each.
pub fn print_anomalies(o: &Outcome) {
    let who = o.trial.peer.label();
    if o.send_errors > 0 {
        println!("    ! {who}: {} sends failed", o.send_errors);
    }
    for (i, d) in o.delivered.iter().enumerate() {
        if d.duplicates > 0 || d.malformed > 0 {
            println!(
                "    ! {who} -> d{i}: {} duplicates, {} malformed datagrams",
                d.duplicates, d.malformed
            );
        }
    }
    let Some(r) = &o.relay else { return };
    match &r.counters {
        Some(Ok(c)) => {
            // `received` counts the warm-up too: fewer than the measured packets
            // means some never reached the relay.
            if c.input.received < o.sent {
                println!(
                    "    ! {who}: received {} of {} measured packets",
                    c.input.received, o.sent
                );
            }
            if c.input.malformed > 0 {
                println!("    ! {who}: {} malformed datagrams in", c.input.malformed);
            }
            for (i, d) in c.destinations.iter().enumerate() {
                if d.dropped() > 0 {
                    println!(
                        "    ! {who} -> d{i}: sent {}, dropped {} (backlog full {}, send \
                         failed {}, untranslatable {}, not racing {}, rate-limited {})",
                        d.sent,
                        d.dropped(),
                        d.backlog_full,
                        d.send_failed,
                        d.untranslatable,
                        d.not_racing,
                        d.rate_limited
                    );
                }
            }
        }
        Some(Err(e)) => println!("    ! {who}: {e}"),
        None => {}
    }
    if let Some(Err(e)) = &r.syscalls {
        println!("    ! {who}: {e}");
    }
    let clean = r.ended.status.is_some_and(|s| s.success());
    // socat and Python end on SIGINT with their own status; only forza-relay's is checked.
    if o.trial.peer.has_json() && !clean {
        println!(
            "    ! {who} did not end cleanly ({:?}); its stderr:\n{}",
            r.ended.status, r.ended.stderr
        );
    }
}
