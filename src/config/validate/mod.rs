//! The checks: settings as written, from the file or the command line
//! ([`Raw`]), become a [`Config`] with every address resolved (hostnames
//! through a [`LookUp`], never on the relay's loop) and every format parsed,
//! or a [`ConfigError`] naming every mistake with its place and value.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use super::{
    escape_controls, is_own_address, Config, ConfigError, Destination, Input, LookUp, Output,
    Overrides, Problem, Races, Reloaded, StatsFormat, DEFAULT_LISTEN, DEFAULT_PORT,
    DEFAULT_RACES_KEPT, DEFAULT_STATS_INTERVAL, DEFAULT_WEB, MAX_HOLD, MAX_MAX_AGE, MAX_RACES_KEPT,
    MAX_STATS_INTERVAL, MIN_MAX_AGE,
};
use crate::fanout::{self, Fields, Records, Target};
use crate::output::mqtt::{self, Broker, MqttSettings, Roots, Secret, DEFAULT_MAX_RATE};
use crate::output::{Encoding, Selection};
use crate::telemetry::columns::Column;
use crate::wire::{Format, FORMAT_IDS};
use crate::words::did_you_mean;
use names::{name_problem, Topics};

/// A destination before validation, from the file or from `--to`.
#[derive(Default)]
pub(super) struct RawDestination {
    /// Where its `name`, `addr` and `format` keys were written, e.g.
    /// `relay.toml:12: destination[2].addr`, or `--to "…"`.
    pub(super) name_place: String,
    pub(super) addr_place: String,
    pub(super) format_place: String,
    pub(super) name: Option<String>,
    pub(super) addr: String,
    pub(super) format: Option<String>,
    pub(super) only_race_on: bool,
    /// `None`: the default (every frame; 20 a second for MQTT).
    pub(super) max_rate: Option<u32>,
    /// Where `max_age` was written, and its text.
    pub(super) max_age: Option<(String, String)>,
    /// Where `hold` was written, and its text.
    pub(super) hold: Option<(String, String)>,
    /// Where `records` was written, and the names.
    pub(super) records: Option<(String, Vec<String>)>,
    /// Where `fields` was written, and the names.
    pub(super) fields: Option<(String, Vec<String>)>,
    /// MQTT's keys, each with where it was written: `topic`, `username`,
    /// `password`, `password_env` (the variable's name), `ca_file` (with the
    /// folder a relative path is in).
    pub(super) topic: Option<(String, String)>,
    pub(super) username: Option<(String, String)>,
    pub(super) password: Option<(String, Secret)>,
    pub(super) password_env: Option<(String, String)>,
    pub(super) ca_file: Option<(String, String, Option<PathBuf>)>,
    /// The address `addr` resolved to when the running configuration was
    /// loaded: an edit of another destination looks nothing up again.
    pub(super) known: Option<SocketAddr>,
    /// The password `password_env` held when the running configuration was
    /// loaded: an edit of another destination reads no variable again.
    pub(super) known_password: Option<Secret>,
}

/// The settings before validation.
pub(super) struct Raw {
    pub(super) origin: String,
    pub(super) listen: Option<(String, String)>,
    pub(super) format: Option<(String, String)>,
    pub(super) allow: Vec<(String, String)>,
    pub(super) stats_interval: Option<(String, u64)>,
    pub(super) stats_format: Option<(String, String)>,
    pub(super) destinations: Vec<RawDestination>,
    /// Where to point a "no destinations" message; `None` for a configuration
    /// that forwards nothing (what `record` runs).
    pub(super) destinations_place: Option<String>,
    /// `record.path`, and the folder a relative one is in.
    pub(super) record: Option<(String, String, Option<PathBuf>)>,
    /// `record.races`, and the folder a relative one is in.
    pub(super) races: Option<(String, String, Option<PathBuf>)>,
    /// `record.keep`, where it was written.
    pub(super) keep: Option<(String, i64)>,
    /// `web.addr` (or `--web`), where it was written.
    pub(super) web: Option<(String, String)>,
}

impl Raw {
    pub(super) fn apply(mut self, o: &Overrides) -> Self {
        if let Some(l) = &o.listen {
            self.listen = Some(("--listen".to_owned(), l.clone()));
        }
        if let Some(i) = &o.input {
            self.format = Some(("--format".to_owned(), i.clone()));
        }
        if let Some(s) = o.stats_interval {
            self.stats_interval = Some(("--stats-interval".to_owned(), s));
        }
        if let Some(f) = &o.stats_format {
            self.stats_format = Some(("--stats-format".to_owned(), f.clone()));
        }
        if let Some(r) = &o.record {
            // Relative to the current folder, as any path on a command line.
            self.record = Some(("--record".to_owned(), r.clone(), None));
        }
        if let Some(w) = &o.web {
            self.web = Some(("--web".to_owned(), w.clone()));
        }
        self
    }

    pub(super) fn validate(
        self,
        previous: Option<&Config>,
        look_up: &LookUp,
    ) -> Result<Reloaded, ConfigError> {
        let mut warnings = Vec::new();
        let mut problems = Vec::new();
        let mut problem = |place: &str, message: String| {
            problems.push(Problem {
                place: place.to_owned(),
                message,
            })
        };

        let (listen_place, listen) = match &self.listen {
            None => (
                format!("{}: listen.addr (default)", self.origin),
                Some(DEFAULT_LISTEN),
            ),
            Some((place, text)) => match parse_listen(text) {
                Ok(addr) => (place.clone(), Some(addr)),
                Err(message) => {
                    problem(place, message);
                    (place.clone(), None)
                }
            },
        };

        let input = match &self.format {
            None => Input::Auto,
            Some((place, text)) => text.parse::<Input>().unwrap_or_else(|message| {
                problem(place, message);
                Input::Auto
            }),
        };

        let stats_interval = match &self.stats_interval {
            None => Some(Duration::from_secs(DEFAULT_STATS_INTERVAL)),
            Some((_, 0)) => None,
            Some((place, s)) if *s > MAX_STATS_INTERVAL => {
                problem(
                    place,
                    format!(
                        "{s} seconds is longer than a day ({MAX_STATS_INTERVAL}); use 0 to turn \
                         the summary off"
                    ),
                );
                None
            }
            Some((_, s)) => Some(Duration::from_secs(*s)),
        };

        let stats_format = match &self.stats_format {
            None => StatsFormat::Text,
            Some((place, text)) => text.parse().unwrap_or_else(|message| {
                problem(place, message);
                StatsFormat::Text
            }),
        };

        let mut allow = Vec::new();
        for (place, text) in &self.allow {
            match parse_net(text) {
                Some(net) => allow.push(net),
                None => problem(
                    place,
                    format!("{text:?} is not an IP address or CIDR range (like 192.168.1.0/24)"),
                ),
            }
        }

        if let (true, Some(place)) = (self.destinations.is_empty(), &self.destinations_place) {
            problem(
                place,
                "no destinations: add a [[destination]] table (or --to HOST:PORT)".to_owned(),
            );
        }
        let destinations = validate_destinations(
            &self.destinations,
            listen,
            previous,
            look_up,
            &mut problem,
            &mut warnings,
        );

        let record = match &self.record {
            None => None,
            Some((place, text, _)) if text.trim().is_empty() => {
                problem(
                    place,
                    "the path is empty: write a file name, like \"drive-{time}.pcap\"".to_owned(),
                );
                None
            }
            Some((_, text, folder)) => {
                let path = PathBuf::from(text.trim());
                Some(match folder {
                    Some(folder) if path.is_relative() && !folder.as_os_str().is_empty() => {
                        folder.join(path)
                    }
                    _ => path,
                })
            }
        };

        let races = match (&self.races, &self.keep) {
            (None, None) => None,
            (None, Some((place, _))) => {
                problem(
                    place,
                    "keep is how many races [record] races keeps: write races = \"races\" too \
                     (a folder), or leave keep out"
                        .to_owned(),
                );
                None
            }
            (Some((place, text, _)), _) if text.trim().is_empty() => {
                problem(
                    place,
                    "the folder is empty: write one, like races = \"races\"".to_owned(),
                );
                None
            }
            (Some((_, text, folder)), keep) => {
                let keep = match keep {
                    None => Some(DEFAULT_RACES_KEPT),
                    Some((_, n)) if (1..=MAX_RACES_KEPT as i64).contains(n) => Some(*n as usize),
                    Some((place, n)) => {
                        problem(
                            place,
                            format!(
                                "{n} is out of range: keep 1 to {MAX_RACES_KEPT} races \
                                 (the oldest beyond are removed)"
                            ),
                        );
                        None
                    }
                };
                let path = PathBuf::from(text.trim());
                let dir = match folder {
                    Some(folder) if path.is_relative() && !folder.as_os_str().is_empty() => {
                        folder.join(path)
                    }
                    _ => path,
                };
                keep.map(|keep| Races { dir, keep })
            }
        };

        let web = match &self.web {
            None => Some(DEFAULT_WEB),
            Some((place, text)) => parse_web(text).unwrap_or_else(|message| {
                problem(place, message);
                None
            }),
        };

        match listen {
            Some(listen) if problems.is_empty() => Ok(Reloaded {
                warnings,
                config: Config {
                    origin: self.origin,
                    listen,
                    listen_place,
                    input,
                    allow,
                    stats_interval,
                    stats_format,
                    destinations,
                    record,
                    races,
                    web,
                },
            }),
            _ => Err(ConfigError { problems }),
        }
    }
}

/// Validates `raws` in order; a problem goes to `problem`, a look-up that
/// failed for an address that resolved before (in `previous`) to `warnings`.
pub(super) fn validate_destinations(
    raws: &[RawDestination],
    listen: Option<SocketAddr>,
    previous: Option<&Config>,
    look_up: &LookUp,
    problem: &mut dyn FnMut(&str, String),
    warnings: &mut Vec<Problem>,
) -> Vec<Destination> {
    let mut destinations: Vec<Destination> = Vec::new();
    // Every name and UDP address seen so far, valid or not, to catch
    // duplicates (brokers are shared by design: one topic each).
    let mut seen: Vec<(String, Option<SocketAddr>)> = Vec::new();
    let mut topics = Topics::default();
    for d in raws {
        let raw_name = d.name.as_deref().unwrap_or(d.addr.trim());
        if let Some(message) = name_problem(raw_name) {
            problem(&d.name_place, message);
        }
        // Stored escaped, so that every place that shows them is safe.
        let name = escape_controls(raw_name);
        let addr_text = escape_controls(&d.addr);
        let is_mqtt = Broker::is_broker(&d.addr);
        let output = output(d, is_mqtt, problem);
        let target = if is_mqtt {
            let settings = mqtt_settings(d, &name, problem);
            if let Some(clash) = settings.as_ref().and_then(|s| topics.claim(&name, s)) {
                let place = d.topic.as_ref().map_or(&d.name_place, |(place, _)| place);
                problem(place, clash);
            }
            settings.map(|s| Target::Mqtt(Box::new(s)))
        } else {
            for (key, place) in [
                ("topic", d.topic.as_ref().map(|t| &t.0)),
                ("username", d.username.as_ref().map(|t| &t.0)),
                ("password", d.password.as_ref().map(|t| &t.0)),
                ("password_env", d.password_env.as_ref().map(|t| &t.0)),
                ("ca_file", d.ca_file.as_ref().map(|t| &t.0)),
            ] {
                if let Some(place) = place {
                    problem(
                        place,
                        format!(
                            "{key} is for an MQTT destination (addr = \"mqtt://HOST:PORT\"); \
                             {:?} is a UDP address",
                            d.addr
                        ),
                    );
                }
            }
            udp_addr(
                d, &addr_text, listen, previous, look_up, &seen, problem, warnings,
            )
            .map(Target::Udp)
        };
        if seen.iter().any(|(n, _)| *n == name) {
            problem(
                &d.name_place,
                format!("{name:?} is already the name of another destination"),
            );
        }
        seen.push((name.clone(), target.as_ref().and_then(Target::udp)));
        let fields = match (&d.fields, output) {
            (None, _) => Some(None),
            (Some((place, names)), Some(Output::Text(_))) => match fields(names) {
                Ok(f) => Some(Some(f)),
                Err(message) => {
                    problem(place, message);
                    None
                }
            },
            (Some((place, _)), Some(other)) => {
                problem(
                    place,
                    format!(
                        "fields is for format = \"json\" or \"influx\": format {:?} sends \
                         whole packets",
                        other.to_string()
                    ),
                );
                None
            }
            (Some(_), None) => None,
        };
        let max_age = match &d.max_age {
            None => Some(None),
            Some((place, text)) => match parse_max_age(text) {
                Ok(age) => Some(Some(age)),
                Err(message) => {
                    problem(place, message);
                    None
                }
            },
        };
        let hold = match &d.hold {
            None => Some(None),
            Some((place, text)) => match parse_hold(text) {
                Ok(hold) => Some(hold),
                Err(message) => {
                    problem(place, message);
                    None
                }
            },
        };
        let records = match (&d.records, output) {
            (None, _) => Some(Records::FRAMES),
            (Some((place, names)), Some(Output::Text(_))) => {
                match Records::parse(names.iter().map(String::as_str)) {
                    Ok(r) => Some(r),
                    Err(message) => {
                        problem(place, message);
                        None
                    }
                }
            }
            (Some((place, _)), Some(other)) => {
                problem(
                    place,
                    format!(
                        "records is for format = \"json\" or \"influx\" and MQTT: format {:?} \
                         sends whole packets",
                        other.to_string()
                    ),
                );
                None
            }
            (Some(_), None) => None,
        };
        let default_rate = if is_mqtt { DEFAULT_MAX_RATE } else { 0 };
        if let (
            Some(target),
            Some(output),
            Some(fields),
            Some(max_age),
            Some(hold),
            Some(records),
        ) = (target, output, fields, max_age, hold, records)
        {
            destinations.push(Destination {
                name,
                addr_text,
                target,
                output,
                fields,
                only_race_on: d.only_race_on,
                max_rate: d.max_rate.unwrap_or(default_rate),
                max_age,
                hold,
                records,
            });
        }
    }
    destinations
}

/// Every value a destination's `format` takes, for "did you mean".
fn output_ids() -> Vec<&'static str> {
    ["same", "json", "influx"]
        .into_iter()
        .chain(Format::ALL.iter().map(|f| f.id()))
        .collect()
}

/// What `d` receives: its `format` (json by default for MQTT, which sends
/// text only).
fn output(
    d: &RawDestination,
    is_mqtt: bool,
    problem: &mut dyn FnMut(&str, String),
) -> Option<Output> {
    let format = d.format.as_deref().map(str::trim);
    let output = match format {
        None if is_mqtt => Output::Text(Encoding::Json),
        None => Output::Same,
        Some(s) if s.eq_ignore_ascii_case("same") => Output::Same,
        Some(s) => match (s.parse::<Encoding>(), s.parse::<Format>()) {
            (Ok(encoding), _) => Output::Text(encoding),
            (_, Ok(f)) => Output::Format(f),
            _ => {
                problem(
                    &d.format_place,
                    format!(
                        "{s:?} is not a format{} (valid: same, json, influx, {FORMAT_IDS})",
                        did_you_mean(s, &output_ids())
                    ),
                );
                return None;
            }
        },
    };
    if is_mqtt && !output.is_text() {
        problem(
            &d.format_place,
            format!(
                "an MQTT destination publishes json or influx, not {:?}: write format = \"json\" \
                 (or leave format out) or \"influx\"",
                output.to_string()
            ),
        );
        return None;
    }
    Some(output)
}

/// The columns `names` choose, or what is wrong with them, naming every name
/// that is no column.
fn fields(names: &[String]) -> Result<Fields, String> {
    match Selection::names(names.iter().map(String::as_str)) {
        Ok(selection) => Ok(Fields {
            names: names.iter().map(|n| n.trim().to_owned()).collect(),
            selection,
        }),
        Err(e) if e.unknown.is_empty() && e.repeated.is_empty() => Err(
            "fields is empty: leave it out to write every column, or name some, like \
             [\"Speed\", \"gear_label\"]"
                .to_owned(),
        ),
        Err(e) if e.unknown.is_empty() => Err(e.repeated_message()),
        Err(e) => {
            let named: Vec<String> = e
                .unknown
                .iter()
                .map(|n| match closest_column(n) {
                    Some(close) => format!("{n:?} (did you mean {close:?}?)"),
                    None => format!("{n:?}"),
                })
                .collect();
            Err(format!(
                "no field named {}: the names are export's (`forza-relay export --fields`), \
                 listed in docs/formats.md and docs/outputs.md; a per-wheel field such as \
                 TireTemp chooses its four wheels",
                named.join(", ")
            ))
        }
    }
}

/// The column name closest to `name` (at most two letters off), if any.
fn closest_column(name: &str) -> Option<String> {
    let name = name.trim().to_ascii_lowercase();
    let mut candidates: Vec<String> = Column::all().iter().map(Column::name).collect();
    candidates.extend(
        Column::all()
            .iter()
            .filter_map(|c| c.group().map(str::to_owned)),
    );
    candidates
        .into_iter()
        .map(|c| {
            (
                crate::words::edit_distance(&name, &c.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// An MQTT destination's broker, topic, login and certificates, or `None`
/// with every problem said.
fn mqtt_settings(
    d: &RawDestination,
    name: &str,
    problem: &mut dyn FnMut(&str, String),
) -> Option<MqttSettings> {
    let mut ok = true;
    let mut fail = |place: &str, message: String| {
        ok = false;
        problem(place, message);
    };
    let broker = match Broker::parse(d.addr.trim()) {
        Ok(b) => Some(b),
        Err(message) => {
            fail(&d.addr_place, message);
            None
        }
    };
    let topic = match &d.topic {
        Some((place, topic)) => {
            // Refused, never rewritten: what is published on is what was
            // written.
            if let Some(message) = mqtt::topic_problem(topic) {
                fail(place, message);
            }
            topic.clone()
        }
        None => mqtt::default_topic(name),
    };
    let username = d.username.as_ref().map(|(_, u)| u.clone());
    let password = match (&d.password, &d.password_env) {
        (Some((place, _)), Some(_)) => {
            fail(
                place,
                "write password or password_env, not both (password_env keeps it out of the file)"
                    .to_owned(),
            );
            None
        }
        (Some((_, p)), None) => Some(p.clone()),
        (None, Some((place, var))) => match &d.known_password {
            Some(known) => Some(known.clone()),
            None => match std::env::var(var.trim()) {
                Ok(p) => Some(Secret::new(p)),
                Err(std::env::VarError::NotPresent) => {
                    fail(
                        place,
                        format!(
                            "the environment variable {var:?} is not set: set it to the \
                             broker's password before starting forza-relay"
                        ),
                    );
                    None
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    fail(
                        place,
                        format!("the environment variable {var:?} is not UTF-8 text"),
                    );
                    None
                }
            },
        },
        (None, None) => None,
    };
    if let (None, Some(place)) = (
        &username,
        d.password
            .as_ref()
            .map(|p| &p.0)
            .or(d.password_env.as_ref().map(|p| &p.0)),
    ) {
        fail(
            place,
            "a password goes with a username: add username = \"…\"".to_owned(),
        );
    }
    let roots = match &d.ca_file {
        None => Roots::System,
        Some((place, text, folder)) => {
            let path = PathBuf::from(text.trim());
            let path = match folder {
                Some(folder) if path.is_relative() && !folder.as_os_str().is_empty() => {
                    folder.join(path)
                }
                _ => path,
            };
            if broker.as_ref().is_some_and(|b| !b.tls) {
                fail(
                    place,
                    format!(
                        "ca_file is for TLS: write the address as mqtts:// (it is {:?})",
                        d.addr
                    ),
                );
            } else if let Err(e) = mqtt::load_ca_file(&path) {
                fail(place, format!("{}: {e}", path.display()));
            }
            Roots::CaFile(path)
        }
    };
    let broker = broker?;
    ok.then(|| MqttSettings {
        broker,
        roots,
        username,
        password,
        password_env: d.password_env.as_ref().map(|(_, v)| v.trim().to_owned()),
        topic,
    })
}

/// A UDP destination's address, resolved: not the same as another's, not the
/// relay's own.
#[allow(clippy::too_many_arguments)]
fn udp_addr(
    d: &RawDestination,
    addr_text: &str,
    listen: Option<SocketAddr>,
    previous: Option<&Config>,
    look_up: &LookUp,
    seen: &[(String, Option<SocketAddr>)],
    problem: &mut dyn FnMut(&str, String),
    warnings: &mut Vec<Problem>,
) -> Option<SocketAddr> {
    let resolved = match d.known {
        Some(known) => Ok(known),
        None => resolve(&d.addr, look_up),
    };
    let addr = match resolved {
        Ok(a) => a,
        Err(message) => {
            // The same text resolved before, so only the look-up failed.
            let before = previous.and_then(|p| {
                p.destinations
                    .iter()
                    .filter(|x| x.addr_text == addr_text)
                    .find_map(|x| x.target.udp())
            });
            match before {
                Some(before) => {
                    warnings.push(Problem {
                        place: d.addr_place.clone(),
                        message: format!(
                            "{:?}: {message}; keeping its previous address {before}",
                            d.addr
                        ),
                    });
                    before
                }
                None => {
                    problem(&d.addr_place, format!("{:?}: {message}", d.addr));
                    return None;
                }
            }
        }
    };
    if let Some((other, _)) = seen.iter().find(|(_, a)| *a == Some(addr)) {
        problem(
            &d.addr_place,
            format!(
                "{:?} ({addr}) is the same address as destination {other:?}",
                d.addr
            ),
        );
    }
    if let Some(listen) = listen {
        if fanout::is_loop(listen, addr, is_own_address) {
            problem(
                &d.addr_place,
                format!(
                    "{:?} ({addr}) is forza-relay's own listen address {listen}: \
                     packets would loop forever",
                    d.addr
                ),
            );
        }
    }
    Some(addr)
}

/// A listen address: `IP:PORT`, `[IPv6]:PORT`, or a bare `PORT` (all interfaces).
/// The error quotes the text and shows the two usual forms.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::new(DEFAULT_LISTEN.ip(), port));
    }
    t.parse::<SocketAddr>().map_err(|_| {
        format!(
            "{text:?} is not an address to listen on: write IP:PORT, like \"0.0.0.0:{DEFAULT_PORT}\" \
             (every interface) or \"127.0.0.1:{DEFAULT_PORT}\" (this PC only)"
        )
    })
}

/// A destination's `max_age`: a duration with a unit (`"50ms"`, `"0.1s"`),
/// from [`MIN_MAX_AGE`] to [`MAX_MAX_AGE`]. The error quotes the text.
pub fn parse_max_age(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let example = "like \"50ms\" (or leave max_age out to send frames of any age)";
    if t.starts_with('-') {
        return Err(format!(
            "{text:?} is negative: write an age limit {example}"
        ));
    }
    let age = humantime::parse_duration(t).map_err(|e| {
        format!("{text:?} is not a duration ({e}): write a number and a unit, {example}")
    })?;
    if age.is_zero() {
        Err(format!(
            "{text:?} would drop every frame: write an age limit {example}"
        ))
    } else if age < MIN_MAX_AGE {
        Err(format!(
            "{text:?} is shorter than {}: every frame spends about that long in the OS and \
             the relay; write an age limit {example}",
            humantime::format_duration(MIN_MAX_AGE)
        ))
    } else if age > MAX_MAX_AGE {
        Err(format!(
            "{text:?} is longer than {}: a frame that old is not live; write an age limit {example}",
            humantime::format_duration(MAX_MAX_AGE)
        ))
    } else {
        Ok(age)
    }
}

/// A destination's `hold`: a duration with a unit (`"15s"`, `"500ms"`) up
/// to [`MAX_HOLD`]; `"0"` (or `"0s"`) is off (`None`). The error quotes
/// the text.
pub fn parse_hold(text: &str) -> Result<Option<Duration>, String> {
    let t = text.trim();
    let example = "like \"15s\" (or \"0\", or leave hold out, to send blank frames as they come)";
    if t.starts_with('-') {
        return Err(format!(
            "{text:?} is negative: write how long to hold {example}"
        ));
    }
    if t.parse::<f64>().is_ok_and(|n| n == 0.0) {
        return Ok(None);
    }
    let hold = humantime::parse_duration(t).map_err(|e| {
        format!("{text:?} is not a duration ({e}): write a number and a unit, {example}")
    })?;
    if hold > MAX_HOLD {
        Err(format!(
            "{text:?} is longer than {}: a car shown that long after the game stopped \
             sending it is a stale one; write {example}",
            humantime::format_duration(MAX_HOLD)
        ))
    } else {
        Ok(Some(hold).filter(|h| !h.is_zero()))
    }
}

/// The web page's address: `IP:PORT`, a bare `PORT` (this PC only), or `off`.
pub fn parse_web(text: &str) -> Result<Option<SocketAddr>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    if let Ok(port) = t.parse::<u16>() {
        return Ok(Some(SocketAddr::new(DEFAULT_WEB.ip(), port)));
    }
    t.parse::<SocketAddr>().map(Some).map_err(|_| {
        format!(
            "{text:?} is not an address for the web page: write IP:PORT, like \"{DEFAULT_WEB}\" \
             (this PC only) or \"0.0.0.0:{}\" (phones on the network too, with a token), or \"off\"",
            DEFAULT_WEB.port()
        )
    })
}

/// An IP (a single host) or a CIDR range.
fn parse_net(text: &str) -> Option<IpNet> {
    let t = text.trim();
    t.parse::<IpNet>()
        .ok()
        .or_else(|| t.parse::<IpAddr>().ok().map(IpNet::from))
}

/// Resolves a destination `host:port` with `look_up` (never on the relay's loop;
/// IPv4 preferred). The error says what is wrong, without quoting `text`.
pub fn resolve(text: &str, look_up: &LookUp) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return check_port(a);
    }
    let Some((host, port)) = t.rsplit_once(':') else {
        if let Ok(port) = t.parse::<u16>() {
            return Err(format!(
                "needs a host before the port: \"127.0.0.1:{port}\" for a tool on this PC"
            ));
        }
        return Err("needs a port, like \"127.0.0.1:8000\"".to_owned());
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!("port {port:?} is not a number from 1 to 65535"));
    };
    if host.is_empty() {
        return Err("needs a host before the port, like \"127.0.0.1:8000\"".to_owned());
    }
    let addrs = look_up(host, port).map_err(|e| format!("cannot resolve host {host:?}: {e}"))?;
    // Prefer IPv4: most tools listen on 0.0.0.0, and "localhost" may list ::1 first.
    let chosen = addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .ok_or_else(|| format!("host {host:?} has no address"))?;
    check_port(*chosen)
}

fn check_port(a: SocketAddr) -> Result<SocketAddr, String> {
    if a.port() == 0 {
        Err("port 0 is not a destination port".to_owned())
    } else if a.ip().is_unspecified() {
        Err(format!(
            "{} means \"any address\" and can't be sent to; use 127.0.0.1 for this PC",
            a.ip()
        ))
    } else {
        Ok(a)
    }
}

mod names;
#[cfg(test)]
mod tests;
