//! An edit of the configuration, as an editor (the page) sends it to the
//! owner: one destination added, changed or removed, with every key of a
//! `[[destination]]` table. With a configuration file the edit is made to the
//! file's text with toml_edit ([`edit_text`]: the user's comments, order and
//! formatting stay); without one, to the running configuration's list
//! ([`crate::config::Config::edited`]), where every other destination keeps
//! every key as it runs.

use std::fmt;

use toml_edit::{ArrayOfTables, DocumentMut, Item, Table};

use crate::config::DestinationSpec;
use crate::output::mqtt::{default_topic, Broker, Secret, DEFAULT_MAX_RATE};

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// A new destination.
    Add(DestinationSpec),
    /// The destination named so gets these keys.
    Change(String, DestinationSpec),
    /// The destination named so goes.
    Remove(String),
}

impl Edit {
    /// The destination it names: the new one, or the one changed or removed.
    pub fn name(&self) -> &str {
        match self {
            Edit::Add(d) => &d.name,
            Edit::Change(was, _) | Edit::Remove(was) => was,
        }
    }

    /// `added destination "dash" (127.0.0.1:5301)`.
    pub fn describe(&self) -> String {
        match self {
            Edit::Add(d) => format!("added destination {:?} ({})", d.name, d.addr),
            Edit::Change(was, d) => format!("changed destination {was:?} ({})", d.addr),
            Edit::Remove(name) => format!("removed destination {name:?}"),
        }
    }
}

/// How an edit failed, for the answer's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// What was asked is not valid (a field, a name taken): 400.
    Invalid,
    /// The file is not the text the running configuration came from (the
    /// user's editor changed it, or it has an error): 409.
    Conflict,
    /// The relay or the file did not answer in time, or the relay is gone: 503.
    Unavailable,
    /// The relay could not take it (a socket), or the file could not be
    /// written: 500.
    Refused,
}

/// Why nothing changed, naming the field at fault when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditError {
    /// The kind of failure.
    pub failed: Failed,
    /// The form's field the message is about (`"Address"`), if one is.
    pub field: Option<&'static str>,
    /// What is wrong.
    pub message: String,
}

impl EditError {
    /// An error of `failed` kind, about no field in particular.
    pub fn new(failed: Failed, message: impl Into<String>) -> EditError {
        EditError {
            failed,
            field: None,
            message: message.into(),
        }
    }

    /// An invalid `field`: `Address: needs a port…`.
    pub fn field(field: &'static str, message: impl Into<String>) -> EditError {
        EditError {
            failed: Failed::Invalid,
            field: Some(field),
            message: message.into(),
        }
    }
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field {
            Some(field) => write!(f, "{field}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The index of the `[[destination]]` called `name` (a table without a name
/// is called by its address, trimmed, as the relay calls it).
fn find(tables: &ArrayOfTables, name: &str) -> Option<usize> {
    tables.iter().position(|t| {
        let key = |k: &str| t.get(k).and_then(Item::as_str);
        key("name").or_else(|| key("addr").map(str::trim)) == Some(name)
    })
}

/// Sets `key` to `v`, keeping what was written around the old value (its
/// spacing, a comment after it).
fn set(table: &mut Table, key: &str, v: impl Into<toml_edit::Value>) {
    let mut new = v.into();
    if let Some(old) = table.get(key).and_then(Item::as_value) {
        *new.decor_mut() = old.decor().clone();
    }
    table[key] = Item::Value(new);
}

/// Sets `key` to `v` when there is one (not empty), else removes it.
fn set_or_remove(table: &mut Table, key: &str, v: Option<&str>) {
    match v.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => set(table, key, v),
        None => {
            table.remove(key);
        }
    }
}

/// Sets `table`'s keys to `d`, leaving out the defaults. A password is
/// written only when the editor gives one; otherwise the table keeps its
/// own (an editor never sees it) while the broker stays the same and there
/// is a username, unless the password comes from `password_env`.
/// `password_env` and `ca_file` are never written from an editor: the
/// table's own stay when the editor keeps them (and, for the variable, the
/// broker and the username stay), and go when it clears them
/// ([`crate::config::admit`] refused any other).
fn fill(table: &mut Table, d: &DestinationSpec) {
    let stays = table
        .get("addr")
        .and_then(Item::as_str)
        .is_some_and(|was| Broker::same_address(was, &d.addr));
    set(table, "name", d.name.as_str());
    set(table, "addr", d.addr.as_str());
    match d.format.as_deref() {
        Some(format) if !format.is_empty() && format != "same" => set(table, "format", format),
        _ => {
            table.remove("format");
        }
    }
    match d.only_race_on {
        true => set(table, "only_race_on", true),
        false => {
            table.remove("only_race_on");
        }
    }
    let default_rate = if Broker::is_broker(&d.addr) {
        DEFAULT_MAX_RATE
    } else {
        0
    };
    match d.max_rate.filter(|&rate| rate != default_rate) {
        None => {
            table.remove("max_rate");
        }
        Some(rate) => set(table, "max_rate", i64::from(rate)),
    }
    set_or_remove(table, "max_age", d.max_age.as_deref());
    set_or_remove(table, "hold", d.hold.as_deref());
    let records: Vec<&str> = d
        .records
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .collect();
    if records.is_empty() || records == ["frames"] {
        table.remove("records");
    } else {
        set(table, "records", toml_edit::Array::from_iter(records));
    }
    let fields: Vec<&str> = d
        .fields
        .iter()
        .map(|f| f.trim())
        .filter(|f| !f.is_empty())
        .collect();
    if fields.is_empty() {
        table.remove("fields");
    } else {
        set(table, "fields", toml_edit::Array::from_iter(fields));
    }
    let topic = d
        .topic
        .as_deref()
        .filter(|t| t.trim() != default_topic(&d.name));
    set_or_remove(table, "topic", topic);
    set_or_remove(table, "username", d.username.as_deref());
    let no_username = table.get("username").is_none();
    let asked = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.trim().is_empty());
    if !asked(&d.password_env) || no_username || !stays {
        table.remove("password_env");
    }
    let from_env = table.get("password_env").is_some();
    match d.password.as_ref().map(Secret::expose) {
        // Without a username the check refused it already.
        Some(p) if !p.is_empty() && !no_username => set(table, "password", p),
        _ if no_username || from_env || !stays => {
            table.remove("password");
        }
        _ => {}
    }
    if !asked(&d.ca_file) {
        table.remove("ca_file");
    }
}

/// `text` (a TOML body, without its byte-order mark) with `edit` made,
/// everything else as it was.
pub fn edit_text(text: &str, edit: &Edit) -> Result<String, EditError> {
    let mut doc: DocumentMut = text.parse().map_err(|e| {
        EditError::new(
            Failed::Conflict,
            format!("the configuration file is not valid TOML: {e}"),
        )
    })?;
    if doc.get("destination").is_none() {
        doc.insert("destination", Item::ArrayOfTables(ArrayOfTables::new()));
    }
    let tables = doc["destination"].as_array_of_tables_mut().ok_or_else(|| {
        EditError::new(
            Failed::Conflict,
            "destination is not a list of [[destination]] tables",
        )
    })?;
    let taken = |name: &str| EditError::field("Name", format!("{name:?} is taken already"));
    let missing = |name: &str| {
        EditError::new(
            Failed::Conflict,
            format!("no destination is called {name:?} (any more): reload the page"),
        )
    };
    match edit {
        Edit::Add(d) => {
            if find(tables, &d.name).is_some() {
                return Err(taken(&d.name));
            }
            let mut table = Table::new();
            fill(&mut table, d);
            tables.push(table);
        }
        Edit::Change(was, d) => {
            let i = find(tables, was).ok_or_else(|| missing(was))?;
            if *was != d.name && find(tables, &d.name).is_some() {
                return Err(taken(&d.name));
            }
            let table = tables.get_mut(i).ok_or_else(|| missing(was))?;
            fill(table, d);
        }
        Edit::Remove(name) => {
            let i = find(tables, name).ok_or_else(|| missing(name))?;
            tables.remove(i);
        }
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Overrides};

    const FILE: &str = "\
# my relay
[listen]
addr = \"0.0.0.0:5400\" # the game sends here

# SimHub on this PC
[[destination]]
name = \"simhub\"
addr = \"127.0.0.1:8000\"
";

    fn spec(name: &str, addr: &str) -> DestinationSpec {
        DestinationSpec {
            name: name.to_owned(),
            addr: addr.to_owned(),
            format: Some("fh5".to_owned()),
            only_race_on: true,
            max_rate: Some(30),
            max_age: Some("50ms".to_owned()),
            ..DestinationSpec::default()
        }
    }

    #[test]
    fn an_added_destination_keeps_every_comment_and_every_key() {
        let out = edit_text(FILE, &Edit::Add(spec("dash", "127.0.0.1:5301"))).unwrap();
        assert!(out.starts_with(FILE), "{out}");
        let config = Config::from_toml(&out, "t", &Overrides::default()).unwrap();
        let d = &config.destinations[1];
        assert_eq!(d.name, "dash");
        assert_eq!(d.max_rate, 30);
        assert!(d.only_race_on);
        assert_eq!(d.max_age, Some(std::time::Duration::from_millis(50)));
        assert_eq!(d.output.to_string(), "fh5");
        assert!(out.contains("max_age = \"50ms\""), "{out}");
    }

    #[test]
    fn a_change_and_a_remove_touch_only_their_table() {
        let added = edit_text(FILE, &Edit::Add(spec("dash", "127.0.0.1:5301"))).unwrap();
        let mut d = spec("dash", "127.0.0.1:5302");
        d.format = Some("same".to_owned());
        d.max_age = None;
        let changed = edit_text(&added, &Edit::Change("dash".to_owned(), d)).unwrap();
        assert!(changed.contains("127.0.0.1:5302"), "{changed}");
        assert!(
            !changed.contains("fh5") && !changed.contains("max_age"),
            "{changed}"
        );
        let removed = edit_text(&changed, &Edit::Remove("dash".to_owned())).unwrap();
        assert_eq!(removed.trim_end(), FILE.trim_end());
    }

    #[test]
    fn a_change_keeps_the_comment_after_a_value() {
        let text = FILE.replace(
            "addr = \"127.0.0.1:8000\"\n",
            "addr = \"127.0.0.1:8000\" # SimHub's port\n",
        );
        let d = DestinationSpec {
            name: "simhub".to_owned(),
            addr: "127.0.0.1:8001".to_owned(),
            ..DestinationSpec::default()
        };
        let changed = edit_text(&text, &Edit::Change("simhub".to_owned(), d)).unwrap();
        assert_eq!(
            changed,
            text.replace("127.0.0.1:8000", "127.0.0.1:8001"),
            "only the address changed"
        );
    }

    #[test]
    fn an_mqtt_destination_is_written_with_its_keys_and_keeps_its_password() {
        let spec = DestinationSpec {
            name: "league".to_owned(),
            addr: "mqtt://127.0.0.1:1883".to_owned(),
            format: Some("influx".to_owned()),
            fields: vec!["Speed".to_owned(), "gear_label".to_owned()],
            topic: Some("league/7".to_owned()),
            username: Some("driver7".to_owned()),
            password: Some(Secret::new("s3cret")),
            max_rate: Some(20),
            ..DestinationSpec::default()
        };
        let added = edit_text(FILE, &Edit::Add(spec.clone())).unwrap();
        assert!(
            added.contains("fields = [\"Speed\", \"gear_label\"]"),
            "{added}"
        );
        assert!(added.contains("password = \"s3cret\""), "{added}");
        assert!(!added.contains("max_rate"), "20 is MQTT's default: {added}");
        let config = Config::from_toml(&added, "t", &Overrides::default()).unwrap();
        let m = config.destinations[1].target.mqtt().unwrap();
        assert_eq!(
            (m.topic.as_str(), m.username.as_deref()),
            ("league/7", Some("driver7"))
        );
        assert_eq!(config.destinations[1].max_rate, 20);

        // The page never sees the password: a change without one keeps it.
        let unseen = DestinationSpec {
            password: None,
            topic: Some("league/8".to_owned()),
            max_rate: Some(0),
            ..spec.clone()
        };
        let changed = edit_text(&added, &Edit::Change("league".to_owned(), unseen)).unwrap();
        assert!(changed.contains("password = \"s3cret\""), "{changed}");
        assert!(changed.contains("topic = \"league/8\""), "{changed}");
        assert!(
            changed.contains("max_rate = 0"),
            "every frame, said: {changed}"
        );
        // Issue 30: another broker gets no stored password.
        let moved = DestinationSpec {
            addr: "mqtt://127.0.0.1:1884".to_owned(),
            password: None,
            ..spec.clone()
        };
        let changed = edit_text(&added, &Edit::Change("league".to_owned(), moved)).unwrap();
        assert!(!changed.contains("password"), "{changed}");
        // An editor never writes a variable or a CA file.
        let env = DestinationSpec {
            password: None,
            password_env: Some("FORZA_MQTT_PASSWORD".to_owned()),
            ca_file: Some("/etc/passwd".to_owned()),
            ..spec.clone()
        };
        let changed = edit_text(&added, &Edit::Change("league".to_owned(), env)).unwrap();
        assert!(
            !changed.contains("password_env") && !changed.contains("ca_file"),
            "{changed}"
        );
        // Without a username: no password in the file.
        let anonymous = DestinationSpec {
            username: None,
            password: None,
            ..spec
        };
        let changed = edit_text(&added, &Edit::Change("league".to_owned(), anonymous)).unwrap();
        assert!(
            !changed.contains("s3cret") && !changed.contains("username"),
            "{changed}"
        );
    }

    #[test]
    fn a_taken_name_names_the_field_and_a_gone_one_asks_for_a_reload() {
        let e = edit_text(FILE, &Edit::Add(spec("simhub", "127.0.0.1:1"))).unwrap_err();
        assert_eq!((e.failed, e.field), (Failed::Invalid, Some("Name")));
        assert_eq!(e.to_string(), "Name: \"simhub\" is taken already");
        let e = edit_text(FILE, &Edit::Remove("nope".to_owned())).unwrap_err();
        assert_eq!(e.failed, Failed::Conflict);
        assert!(e.message.contains("\"nope\""), "{e}");
    }
}
