//! The quick form on the command line: `--to` values such as
//! `127.0.0.1:5301,format=fh5,only-race-on,max-rate=30,name=dash`, each one
//! destination, validated as a file's would be; and the configuration that
//! listens and forwards nothing (`record`).

use super::validate::{Raw, RawDestination};
use super::{system_look_up, Config, ConfigError, Overrides, Problem};

impl Config {
    /// Builds a configuration from the quick form: `--to` values such as
    /// `127.0.0.1:5301,format=fh5,only-race-on,max-rate=30,name=dash`.
    pub fn from_args(to: &[String], overrides: &Overrides) -> Result<Config, ConfigError> {
        let mut problems = Vec::new();
        let mut destinations = Vec::new();
        for spec in to {
            match parse_to(spec) {
                Ok(d) => destinations.push(d),
                Err(p) => problems.push(p),
            }
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        Raw {
            origin: "command line".to_owned(),
            listen: None,
            format: None,
            allow: Vec::new(),
            stats_interval: None,
            stats_format: None,
            destinations,
            destinations_place: Some("command line".to_owned()),
            record: None,
            races: None,
            keep: None,
            web: None,
        }
        .apply(overrides)
        .validate(None, &system_look_up)
        .map(|r| r.config)
    }
}

impl Config {
    /// A configuration that listens on `listen` (`--listen`; the default when
    /// `None`) and forwards nothing: what `record` runs. Validated as any other.
    pub fn listen_only(listen: Option<&str>) -> Result<Config, ConfigError> {
        Raw {
            origin: "command line".to_owned(),
            listen: listen.map(|l| ("--listen".to_owned(), l.to_owned())),
            format: None,
            allow: Vec::new(),
            stats_interval: Some(("command line".to_owned(), 0)),
            stats_format: None,
            destinations: Vec::new(),
            destinations_place: None,
            record: None,
            races: None,
            keep: None,
            web: Some(("command line".to_owned(), "off".to_owned())),
        }
        .validate(None, &system_look_up)
        .map(|r| r.config)
    }
}

/// The options a `--to` value takes, as its error lists them.
const QUICK_OPTIONS: &str =
    "format=ID, only-race-on, max-rate=HZ, max-age=DURATION, hold=DURATION, name=NAME, \
     fields=A+B+C, records=frames+laps+events, and for mqtt:// topic=TOPIC, username=USER, password-env=VARIABLE, \
     ca-file=PEM";

/// Parses one `--to` value.
fn parse_to(spec: &str) -> Result<RawDestination, Problem> {
    let place = format!("--to {spec:?}");
    let mut parts = spec.split(',').map(str::trim);
    let addr = parts.next().unwrap_or_default().to_owned();
    let mut d = RawDestination {
        name_place: place.clone(),
        addr_place: place.clone(),
        format_place: place.clone(),
        addr,
        ..RawDestination::default()
    };
    for part in parts {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (part, None),
        };
        match (key.replace('_', "-").as_str(), value) {
            ("format", Some(v)) => d.format = Some(v.to_owned()),
            ("name", Some(v)) => d.name = Some(v.to_owned()),
            ("only-race-on", None) => d.only_race_on = true,
            ("only-race-on", Some(v)) => {
                d.only_race_on = v.parse().map_err(|_| Problem {
                    place: place.clone(),
                    message: format!("only-race-on={v:?} must be true or false"),
                })?
            }
            ("max-rate", Some(v)) => {
                d.max_rate = Some(v.parse().map_err(|_| Problem {
                    place: place.clone(),
                    message: format!(
                        "max-rate={v:?} must be a whole number of Hz (0 = every frame)"
                    ),
                })?)
            }
            ("max-age", Some(v)) => d.max_age = Some((place.clone(), v.to_owned())),
            ("hold", Some(v)) => d.hold = Some((place.clone(), v.to_owned())),
            ("records", Some(v)) => {
                d.records = Some((place.clone(), v.split('+').map(str::to_owned).collect()))
            }
            // Commas separate the options: the names are joined with `+`.
            ("fields", Some(v)) => {
                d.fields = Some((place.clone(), v.split('+').map(str::to_owned).collect()))
            }
            ("topic", Some(v)) => d.topic = Some((place.clone(), v.to_owned())),
            ("username", Some(v)) => d.username = Some((place.clone(), v.to_owned())),
            ("password-env", Some(v)) => d.password_env = Some((place.clone(), v.to_owned())),
            // A command line is seen by every process of the computer: no
            // password on it, and none repeated in the message.
            ("password", _) => {
                return Err(Problem {
                    place: "--to".to_owned(),
                    message: "password= is not taken on the command line, where every program \
                              of this computer can read it: put the password in an environment \
                              variable and write password-env=VARIABLE"
                        .to_owned(),
                })
            }
            ("ca-file", Some(v)) => d.ca_file = Some((place.clone(), v.to_owned(), None)),
            _ => {
                return Err(Problem {
                    place,
                    message: format!("unknown option {part:?} (options: {QUICK_OPTIONS})"),
                })
            }
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Input, Output, StatsFormat};
    use crate::wire::Format;

    #[test]
    fn quick_form_parses_options() {
        let c = Config::from_args(
            &[
                "127.0.0.1:8000".to_owned(),
                "127.0.0.1:5301,format=fh5,only-race-on,max-rate=30,name=dash".to_owned(),
            ],
            &Overrides {
                listen: Some("0.0.0.0:5555".to_owned()),
                input: Some("fh6".to_owned()),
                stats_interval: Some(0),
                stats_format: Some("json".to_owned()),
                record: None,
                web: Some("off".to_owned()),
            },
        )
        .unwrap();
        assert_eq!(c.listen.port(), 5555);
        assert_eq!(c.input, Input::Fixed(Format::Fh6));
        assert_eq!(c.stats_interval, None);
        assert_eq!(c.stats_format, StatsFormat::Json);
        assert_eq!(c.destinations[0].name, "127.0.0.1:8000");
        let d = &c.destinations[1];
        assert_eq!(
            (d.name.as_str(), d.output, d.only_race_on, d.max_rate),
            ("dash", Output::Format(Format::Fh5), true, 30)
        );
        let e = Config::from_args(
            &["127.0.0.1:1,fromat=fh5".to_owned()],
            &Overrides::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "--to \"127.0.0.1:1,fromat=fh5\": unknown option \"fromat=fh5\" (options: \
                 {QUICK_OPTIONS})"
            )
        );
    }
}
