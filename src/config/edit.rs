//! Edits of a running configuration without a file (issue 23): one
//! destination added, changed or removed while every other keeps every key as
//! it runs ([`Config::splice`]), the problems of what an editor wrote placed
//! at its fields' names ([`field`]).
//!
//! What an editor may do with a destination's secrets (issue 30), checked by
//! [`admit`] before anything is read and kept to by the edit itself, with a
//! file ([`crate::owner::edit`]) and without: a password typed goes with a
//! username, as in the file; a stored password, and the variable it is read
//! from, go only to the broker they were written for (a changed host, port
//! or scheme keeps neither unless the password is typed again); and
//! `password_env` and `ca_file` are the file's owner's to write: an editor
//! may keep the ones the destination has, or clear them, never name another
//! (the page could otherwise send any variable of the relay to a broker of
//! its choosing, and learn which variables and files exist).

use std::path::{Path, PathBuf};

use super::validate::{validate_destinations, RawDestination};
use super::{Config, ConfigError, Destination, LookUp, Problem};
use crate::fanout::Records;
use crate::output::mqtt::{default_topic, Broker, MqttSettings, Roots, Secret};

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
    /// `hold`, like `"15s"`; `None` = blank frames as they come.
    pub hold: Option<String>,
    /// `records` of a json, influx or MQTT destination; empty = the frames.
    pub records: Vec<String>,
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
    /// `hold`.
    pub const HOLD: &str = "Hold";
    /// `records`.
    pub const RECORDS: &str = "Records";
    /// `fields`.
    pub const FIELDS: &str = "Fields";
    /// `topic`.
    pub const TOPIC: &str = "Topic";
    /// `username`.
    pub const USERNAME: &str = "Username";
    /// `password`.
    pub const PASSWORD: &str = "Password";
    /// `password_env`.
    pub const PASSWORD_ENV: &str = "Password variable";
    /// `ca_file`.
    pub const CA_FILE: &str = "CA file";
    /// Every field, to tell a field's place from another.
    pub const ALL: [&str; 12] = [
        NAME,
        ADDRESS,
        FORMAT,
        MAX_AGE,
        HOLD,
        RECORDS,
        FIELDS,
        TOPIC,
        USERNAME,
        PASSWORD,
        PASSWORD_ENV,
        CA_FILE,
    ];
}

/// `text` (a trimmed field), if the editor wrote something.
fn written(text: &Option<String>) -> Option<&str> {
    text.as_deref().map(str::trim).filter(|t| !t.is_empty())
}

/// `ca_file`'s `text` as the file reads it: relative to `folder`, the
/// configuration file's (none: the current folder, as on the command line).
fn ca_path(text: &str, folder: Option<&Path>) -> PathBuf {
    let path = PathBuf::from(text.trim());
    match folder {
        Some(folder) if path.is_relative() && !folder.as_os_str().is_empty() => folder.join(path),
        _ => path,
    }
}

/// The MQTT settings of `was` whose secrets may go to the broker `addr`
/// names: only when it is the same broker.
fn staying<'a>(was: Option<&'a Destination>, addr: &str) -> Option<&'a MqttSettings> {
    was.and_then(|w| w.target.mqtt())
        .filter(|m| Broker::parse(addr.trim()).is_ok_and(|b| b.is_same(&m.broker)))
}

/// What an editor may not ask, refused before any variable or file is read
/// (see the module doc): `d` as an editor wrote it, replacing `was` (`None`
/// for a new destination), in a configuration whose file is in `folder`. The
/// problem is placed at its field; `Some(note)` says what the edit will not
/// keep, for the editor's answer.
pub fn admit(
    d: &DestinationSpec,
    was: Option<&Destination>,
    folder: Option<&Path>,
) -> Result<Option<String>, ConfigError> {
    let kept = was.and_then(|w| w.target.mqtt());
    if let Some(var) = written(&d.password_env) {
        if kept.and_then(|m| m.password_env.as_deref()) != Some(var) {
            return Err(ConfigError::one(
                field::PASSWORD_ENV,
                "a password variable is named in the configuration file only (password_env = \
                 \"…\"), never from the page: type the password instead, or leave this empty",
            ));
        }
    }
    if let Some(text) = written(&d.ca_file) {
        let same = kept
            .and_then(MqttSettings::ca_file)
            .is_some_and(|path| path == ca_path(text, folder) || path == Path::new(text));
        if !same {
            return Err(ConfigError::one(
                field::CA_FILE,
                "a CA file is named in the configuration file only (ca_file = \"…\"), never \
                 from the page: leave this empty for the system's certificates",
            ));
        }
    }
    let typed = d.password.as_ref().is_some_and(|p| !p.expose().is_empty());
    let left = kept.filter(|m| m.password.is_some() && staying(was, &d.addr).is_none());
    Ok(left
        .filter(|_| !typed && written(&d.username).is_some())
        .map(|m| {
            format!(
                "its password was not kept: it goes only to {}, the broker it was written \
                 for; type it again for this one",
                m.broker
            )
        }))
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
            hold: d
                .hold
                .map(|h| at(&humantime::format_duration(h).to_string())),
            records: (d.records != Records::FRAMES).then(|| {
                (
                    place.clone(),
                    d.records.names().into_iter().map(str::to_owned).collect(),
                )
            }),
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
    /// `was`: the destination it replaces, whose password, password variable
    /// and CA file it keeps as the module doc says.
    fn edited(d: &DestinationSpec, was: Option<&Destination>) -> RawDestination {
        let given =
            |v: &Option<String>, field: &str| written(v).map(|v| (field.to_owned(), v.to_owned()));
        let username = given(&d.username, field::USERNAME);
        // A username taken away takes its password along; a broker changed
        // keeps none of it.
        let stays = staying(was, &d.addr).filter(|_| username.is_some());
        // Kept, never named: the variable the destination has, if asked.
        let password_env = stays
            .and_then(|m| m.password_env.clone())
            .filter(|_| written(&d.password_env).is_some());
        let typed = d.password.clone().filter(|p| !p.expose().is_empty());
        let password = match (typed, &password_env) {
            // Without a username too: the file's rule refuses it, by name.
            (Some(p), _) => Some(p),
            (None, Some(_)) => None,
            (None, None) => stays
                .filter(|m| m.password_env.is_none())
                .and_then(|m| m.password.clone()),
        };
        let password = password.map(|p| (field::PASSWORD.to_owned(), p));
        let known_password = password_env
            .as_ref()
            .and_then(|_| stays.and_then(|m| m.password.clone()));
        let password_env = password_env.map(|v| (field::PASSWORD_ENV.to_owned(), v));
        // Kept, never named: the CA file the destination has (already taken
        // from the configuration file's folder), if asked.
        let ca_file = written(&d.ca_file)
            .and(was.and_then(|w| w.target.mqtt()))
            .and_then(MqttSettings::ca_file)
            .map(|path| (field::CA_FILE.to_owned(), path.display().to_string(), None));
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
            hold: given(&d.hold, field::HOLD),
            records: (!d.records.is_empty())
                .then(|| (field::RECORDS.to_owned(), d.records.clone())),
            fields: (!d.fields.is_empty()).then(|| (field::FIELDS.to_owned(), d.fields.clone())),
            // The default topic is not written: it follows the name.
            topic: given(&d.topic, field::TOPIC).filter(|(_, t)| *t != default_topic(&d.name)),
            username,
            password,
            password_env,
            ca_file,
            known: None,
            known_password,
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
        // A new one replaces it.
        let changed = c
            .splice(Some(0), Some(&league(Some("n3w"))), &system_look_up)
            .unwrap();
        let m = changed.destinations[0].target.mqtt().unwrap();
        assert_eq!(m.password.as_ref().map(Secret::expose), Some("n3w"));
        // The variable a destination has stays when the editor keeps it.
        let env = DestinationSpec {
            name: "env".to_owned(),
            addr: "mqtt://b".to_owned(),
            username: Some("me".to_owned()),
            password_env: Some("PATH".to_owned()),
            max_rate: Some(5),
            ..DestinationSpec::default()
        };
        let changed = c.splice(Some(1), Some(&env), &system_look_up).unwrap();
        let m = changed.destinations[1].target.mqtt().unwrap();
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

    /// Issue 30, item 9: a stored password (or its variable) goes only to the
    /// broker it was written for; a host, a port or a scheme changed keeps
    /// neither, unless the password is typed again.
    #[test]
    fn issue30_a_changed_broker_keeps_no_stored_password() {
        let c = parse(RUNNING).unwrap();
        for moved in [
            "mqtts://evil.example.com",
            "mqtts://broker.example.com:8884",
            "mqtt://broker.example.com:8883",
        ] {
            let spec = DestinationSpec {
                addr: moved.to_owned(),
                ..league(None)
            };
            let changed = c.splice(Some(0), Some(&spec), &system_look_up).unwrap();
            let m = changed.destinations[0].target.mqtt().unwrap();
            assert_eq!(m.password, None, "{moved}");
            let note = admit(&spec, c.destinations.first(), None).unwrap();
            assert!(
                note.as_deref().is_some_and(|n| n.contains("type it again")),
                "{moved}: {note:?}"
            );
            let typed = DestinationSpec {
                addr: moved.to_owned(),
                ..league(Some("typed"))
            };
            let changed = c.splice(Some(0), Some(&typed), &system_look_up).unwrap();
            let m = changed.destinations[0].target.mqtt().unwrap();
            assert_eq!(m.password.as_ref().map(Secret::expose), Some("typed"));
        }
        let same = DestinationSpec {
            addr: "MQTTS://Broker.Example.com:8883/".to_owned(),
            ..league(None)
        };
        assert_eq!(admit(&same, c.destinations.first(), None).unwrap(), None);
        let changed = c.splice(Some(0), Some(&same), &system_look_up).unwrap();
        let m = changed.destinations[0].target.mqtt().unwrap();
        assert_eq!(m.password.as_ref().map(Secret::expose), Some("s3cret"));
        // The variable too, kept by the form as it was.
        let env = DestinationSpec {
            name: "env".to_owned(),
            addr: "mqtt://elsewhere".to_owned(),
            username: Some("me".to_owned()),
            password_env: Some("PATH".to_owned()),
            ..DestinationSpec::default()
        };
        let changed = c.splice(Some(1), Some(&env), &system_look_up).unwrap();
        let m = changed.destinations[1].target.mqtt().unwrap();
        assert_eq!((&m.password_env, &m.password), (&None, &None));
    }

    /// Issue 30, item 10: an editor names no variable and no file the
    /// destination does not have already; the answer is the same whether
    /// they exist or not, and comes before either is looked at.
    #[test]
    fn issue30_an_editor_names_no_variable_and_no_file() {
        let c = parse(RUNNING).unwrap();
        let unset = format!("FORZA_RELAY_TEST_UNSET_{}", std::process::id());
        let answers: Vec<String> = ["PATH", "HOME", unset.as_str()]
            .iter()
            .map(|var| {
                let spec = DestinationSpec {
                    password_env: Some((*var).to_owned()),
                    ..league(None)
                };
                let e = admit(&spec, c.destinations.first(), None).unwrap_err();
                assert_eq!(e.problems[0].place, field::PASSWORD_ENV);
                e.problems[0].message.clone()
            })
            .collect();
        assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
        assert!(!answers[0].contains("PATH"), "{}", answers[0]);
        let files: Vec<String> = ["/etc/passwd", "/no/such/file.pem", "ca.pem"]
            .iter()
            .map(|path| {
                let spec = DestinationSpec {
                    ca_file: Some((*path).to_owned()),
                    ..league(None)
                };
                let e = admit(&spec, c.destinations.first(), Some(Path::new("/etc"))).unwrap_err();
                assert_eq!(e.problems[0].place, field::CA_FILE);
                e.problems[0].message.clone()
            })
            .collect();
        assert!(files.iter().all(|a| *a == files[0]), "{files:?}");
        // A new destination: none either.
        let new = DestinationSpec {
            name: "new".to_owned(),
            password_env: Some("FORZA_RELAY_TEST".to_owned()),
            ..league(None)
        };
        assert!(admit(&new, None, None).is_err());
        // Keeping or clearing what it has is fine.
        let env = |var: Option<&str>| DestinationSpec {
            name: "env".to_owned(),
            addr: "mqtt://b".to_owned(),
            username: Some("me".to_owned()),
            password_env: var.map(str::to_owned),
            ..DestinationSpec::default()
        };
        assert_eq!(
            admit(&env(Some(" PATH ")), c.destinations.get(1), None).unwrap(),
            None
        );
        assert_eq!(
            admit(&env(None), c.destinations.get(1), None).unwrap(),
            None
        );
    }
}
