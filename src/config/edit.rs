//! Edits of a running configuration without a file (issue 23): one
//! destination added, changed or removed while every other keeps every key as
//! it runs ([`Config::splice`]), the problems of what an editor wrote placed
//! at its fields' names ([`field`]).

use super::validate::{validate_destinations, RawDestination};
use super::{Config, ConfigError, Destination, LookUp, Problem};
use crate::output::mqtt::{default_topic, Roots, Secret};

/// One destination as an editor (the page) writes it: the keys of a
/// `[[destination]]` table, as the file writes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestinationSpec {
    /// `name`.
    pub name: String,
    /// `addr`: `host:port`, or `mqtt://HOST:PORT` / `mqtts://HOST:PORT`.
    pub addr: String,
    /// `format`: `None` or `same` for what the game sends; `json` by
    /// default for MQTT.
    pub format: Option<String>,
    /// `only_race_on`.
    pub only_race_on: bool,
    /// `max_rate`; `None` = the default (every frame; 20 a second for MQTT).
    pub max_rate: Option<u32>,
    /// `max_age`, like `"50ms"`; `None` = frames of any age.
    pub max_age: Option<String>,
    /// `fields` of a json or influx output; empty = every column.
    pub fields: Vec<String>,
    /// MQTT: `topic`; `None` = `forza-relay/<name>`.
    pub topic: Option<String>,
    /// MQTT: `username`.
    pub username: Option<String>,
    /// MQTT: `password`. `None` keeps the password the destination has (an
    /// editor never sees it: the page's field stays empty), and adds none.
    pub password: Option<Secret>,
    /// MQTT: `password_env`, the variable holding the password.
    pub password_env: Option<String>,
    /// MQTT over TLS: `ca_file`.
    pub ca_file: Option<String>,
}

/// The names of an editor's fields, for the places of their problems: an
/// error about what the user typed names the field, never a line of a file.
pub mod field {
    /// `name`.
    pub const NAME: &str = "Name";
    /// `addr`.
    pub const ADDRESS: &str = "Address";
    /// `format`.
    pub const FORMAT: &str = "Format";
    /// `max_age`.
    pub const MAX_AGE: &str = "Max age";
    /// `fields`.
    pub const FIELDS: &str = "Fields";
    /// `topic`.
    pub const TOPIC: &str = "Topic";
    /// `username`.
    pub const USERNAME: &str = "Username";
    /// `password` and `password_env`.
    pub const PASSWORD: &str = "Password";
    /// `ca_file`.
    pub const CA_FILE: &str = "CA file";
    /// Every field, to tell a field's place from another.
    pub const ALL: [&str; 9] = [
        NAME, ADDRESS, FORMAT, MAX_AGE, FIELDS, TOPIC, USERNAME, PASSWORD, CA_FILE,
    ];
}

impl RawDestination {
    /// A destination of the running configuration, as it runs: its address
    /// is not looked up again.
    fn running(d: &Destination) -> RawDestination {
        let place = format!("destination {:?}", d.name);
        let at = |v: &str| (place.clone(), v.to_owned());
        let mqtt = d.target.mqtt();
        RawDestination {
            name_place: place.clone(),
            addr_place: place.clone(),
            format_place: place.clone(),
            name: Some(d.name.clone()),
            addr: d.addr_text.clone(),
            format: Some(d.output.to_string()),
            only_race_on: d.only_race_on,
            max_rate: Some(d.max_rate),
            max_age: d
                .max_age
                .map(|a| at(&humantime::format_duration(a).to_string())),
            fields: d.fields.as_ref().map(|f| (place.clone(), f.names.clone())),
            topic: mqtt.map(|m| at(&m.topic)),
            username: mqtt.and_then(|m| m.username.as_deref()).map(at),
            // A password read from a variable stays the one read, and is
            // not written as the file's.
            password: mqtt
                .filter(|m| m.password_env.is_none())
                .and_then(|m| m.password.clone())
                .map(|p| (place.clone(), p)),
            password_env: mqtt.and_then(|m| m.password_env.as_deref()).map(at),
            ca_file: mqtt.and_then(|m| match &m.roots {
                Roots::CaFile(path) => Some((place.clone(), path.display().to_string(), None)),
                Roots::System => None,
            }),
            known: d.target.udp(),
            known_password: mqtt
                .filter(|m| m.password_env.is_some())
                .and_then(|m| m.password.clone()),
        }
    }

    /// What an editor wrote; each problem's place is the field's name.
    /// `was`: the destination it replaces, whose password it keeps unless
    /// it gives one.
    fn edited(d: &DestinationSpec, was: Option<&Destination>) -> RawDestination {
        let given = |v: &Option<String>, field: &str| {
            v.as_ref()
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(|v| (field.to_owned(), v.to_owned()))
        };
        let kept = was
            .and_then(|w| w.target.mqtt())
            .filter(|m| m.password_env.is_none())
            .and_then(|m| m.password.clone());
        let password_env = given(&d.password_env, field::PASSWORD);
        let password = match (&d.password, &password_env) {
            (Some(p), _) if !p.expose().is_empty() => Some(p.clone()),
            // Asking for the variable replaces a password kept from before.
            (_, Some(_)) => None,
            _ => kept,
        };
        // A username taken away takes its password along.
        let username = given(&d.username, field::USERNAME);
        let password = password
            .filter(|_| username.is_some())
            .map(|p| (field::PASSWORD.to_owned(), p));
        RawDestination {
            name_place: field::NAME.to_owned(),
            addr_place: field::ADDRESS.to_owned(),
            format_place: field::FORMAT.to_owned(),
            name: Some(d.name.clone()),
            addr: d.addr.clone(),
            format: d.format.clone().filter(|f| !f.trim().is_empty()),
            only_race_on: d.only_race_on,
            max_rate: d.max_rate,
            max_age: given(&d.max_age, field::MAX_AGE),
            fields: (!d.fields.is_empty()).then(|| (field::FIELDS.to_owned(), d.fields.clone())),
            // The default topic is not written: it follows the name.
            topic: given(&d.topic, field::TOPIC).filter(|(_, t)| *t != default_topic(&d.name)),
            username,
            password,
            password_env,
            ca_file: given(&d.ca_file, field::CA_FILE).map(|(place, path)| (place, path, None)),
            known: None,
            known_password: None,
        }
    }
}

impl Config {
    /// This configuration with the destination at `at` replaced by `new`
    /// (`at` `None`: `new` added at the end; `new` `None`: the destination
    /// removed), validated as a file's destinations are. Every other
    /// destination keeps every key as it runs, its address too (nothing is
    /// looked up again); the problems of `new` are placed at its fields'
    /// names ([`field`]). What an editor changes without a file.
    pub fn splice(
        &self,
        at: Option<usize>,
        new: Option<&DestinationSpec>,
        look_up: &LookUp,
    ) -> Result<Config, ConfigError> {
        let mut raws: Vec<RawDestination> = self
            .destinations
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != at)
            .map(|(_, d)| RawDestination::running(d))
            .collect();
        // Checked last, so that a name or an address it shares with another
        // is its problem, not the other's.
        let was = at.and_then(|i| self.destinations.get(i));
        raws.extend(new.map(|d| RawDestination::edited(d, was)));
        let mut problems = Vec::new();
        let mut warnings = Vec::new();
        let mut destinations = validate_destinations(
            &raws,
            Some(self.listen),
            Some(self),
            look_up,
            &mut |place: &str, message| {
                problems.push(Problem {
                    place: place.to_owned(),
                    message,
                })
            },
            &mut warnings,
        );
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        if let (Some(at), Some(_)) = (at, new) {
            if let Some(changed) = destinations.pop() {
                destinations.insert(at.min(destinations.len()), changed);
            }
        }
        Ok(Config {
            destinations,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::system_look_up;
    use crate::config::testing::parse;

    const RUNNING: &str = r#"[[destination]]
name = "league"
addr = "mqtts://broker.example.com"
format = "influx"
fields = ["Speed", "TireTemp"]
topic = "league/7"
username = "driver7"
password = "s3cret"
max_rate = 5
only_race_on = true
max_age = "50ms"
[[destination]]
name = "env"
addr = "mqtt://b"
username = "me"
password_env = "PATH"
[[destination]]
name = "script"
addr = "127.0.0.1:9999"
format = "json"
fields = ["gear_label"]
"#;

    fn league(password: Option<&str>) -> DestinationSpec {
        DestinationSpec {
            name: "league".to_owned(),
            addr: "mqtts://broker.example.com".to_owned(),
            format: Some("influx".to_owned()),
            topic: Some("league/8".to_owned()),
            username: Some("driver7".to_owned()),
            password: password.map(Secret::new),
            ..DestinationSpec::default()
        }
    }

    /// Issue 23's bug, for the new keys: an edit without a file keeps every
    /// key of every other destination, and the password an editor never sees.
    #[test]
    fn issue23_an_edit_without_a_file_keeps_every_key_of_every_other_destination() {
        let c = parse(RUNNING).unwrap();
        let dash = DestinationSpec {
            name: "dash".to_owned(),
            addr: "127.0.0.1:5301".to_owned(),
            ..DestinationSpec::default()
        };
        let added = c.splice(None, Some(&dash), &system_look_up).unwrap();
        assert_eq!(added.destinations[..3], c.destinations[..]);
        let removed = c.splice(Some(2), None, &system_look_up).unwrap();
        assert_eq!(removed.destinations[..], c.destinations[..2]);

        // Changed without a password: the one it had stays.
        let changed = c
            .splice(Some(0), Some(&league(None)), &system_look_up)
            .unwrap();
        let m = changed.destinations[0].target.mqtt().unwrap();
        assert_eq!(m.topic, "league/8");
        assert_eq!(m.password.as_ref().map(Secret::expose), Some("s3cret"));
        assert_eq!(changed.destinations[1..], c.destinations[1..]);
        // A new one replaces it; a variable replaces it too.
        let changed = c
            .splice(Some(0), Some(&league(Some("n3w"))), &system_look_up)
            .unwrap();
        let m = changed.destinations[0].target.mqtt().unwrap();
        assert_eq!(m.password.as_ref().map(Secret::expose), Some("n3w"));
        let mut from_env = league(None);
        from_env.password_env = Some("PATH".to_owned());
        let changed = c.splice(Some(0), Some(&from_env), &system_look_up).unwrap();
        let m = changed.destinations[0].target.mqtt().unwrap();
        assert_eq!(m.password_env.as_deref(), Some("PATH"));
        assert_eq!(
            m.password.as_ref().map(Secret::expose),
            std::env::var("PATH").ok().as_deref()
        );
        // Without a username, no password.
        let mut anonymous = league(None);
        anonymous.username = None;
        let changed = c
            .splice(Some(0), Some(&anonymous), &system_look_up)
            .unwrap();
        let m = changed.destinations[0].target.mqtt().unwrap();
        assert_eq!((m.username.as_ref(), m.password.as_ref()), (None, None));
    }
}
