//! Destinations changed from the page. With a configuration file, the change
//! is made to the file's text with toml_edit (the user's comments, order and
//! formatting stay), checked as the relay would check it, and written
//! atomically (a temporary file in the same folder, then a rename); the
//! reloader sees the new file and applies it as it applies a hand edit. With
//! no file (`run --to …`), it is applied to the running relay only.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use toml_edit::{ArrayOfTables, DocumentMut, Item, Table};

use super::{lock, Shared};
use crate::config::{self, Config, Problem, MAX_MAX_AGE, MIN_MAX_AGE};
use crate::wire::{Format, FORMAT_IDS};

/// How long a change without a file waits for the relay to take it.
const APPLY_WAIT: Duration = Duration::from_secs(3);

/// A destination's settings as the page's form has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    pub name: String,
    pub addr: String,
    /// `None` or `same`: what the game sends.
    pub format: Option<String>,
    pub only_race_on: bool,
    pub max_rate: u32,
    /// `max_age` in milliseconds; `None`: frames of any age.
    pub max_age_ms: Option<u64>,
}

/// The form's label of each key of a `[[destination]]`: an error about what
/// the user typed names the field, never a line of a file (issue 24).
const LABELS: [(&str, &str); 6] = [
    ("name", "Name"),
    ("addr", "Address"),
    ("format", "Format"),
    ("only_race_on", "Only race on"),
    ("max_rate", "Max rate"),
    ("max_age", "Max age"),
];

/// Checks what the form says, each field on its own, as the relay would:
/// the error starts with the field's label ("Address: …").
pub fn check_fields(f: &Fields) -> Result<(), String> {
    if f.name.is_empty() {
        return Err("Name: a destination needs a name, like \"simhub\"".to_owned());
    }
    if f.addr.is_empty() {
        return Err(
            "Address: a destination needs an address and port, like \"192.168.1.50:5300\" \
             (a tool on another computer) or \"127.0.0.1:5300\" (on this one)"
                .to_owned(),
        );
    }
    if let Err(message) = config::resolve(&f.addr, &config::system_look_up) {
        return Err(format!("Address: {:?}: {message}", f.addr));
    }
    if let Some(format) = f.format.as_deref().filter(|s| !s.is_empty()) {
        if !format.eq_ignore_ascii_case("same") && format.parse::<Format>().is_err() {
            return Err(format!(
                "Format: {format:?} is not a format (valid: same, {FORMAT_IDS})"
            ));
        }
    }
    if let Some(ms) = f.max_age_ms {
        let (min, max) = (MIN_MAX_AGE.as_millis(), MAX_MAX_AGE.as_millis());
        if u128::from(ms) < min || u128::from(ms) > max {
            return Err(format!(
                "Max age: {ms} ms is out of range: write {min} to {max} milliseconds, or leave \
                 it empty to send frames of any age"
            ));
        }
    }
    Ok(())
}

/// The configuration's problems as the page says them: those of the
/// destination at `index` (0-based) of the file by the form's label, the rest
/// by their place.
fn described(problems: &[Problem], index: Option<usize>) -> String {
    problems
        .iter()
        .map(|p| {
            let field = index.and_then(|i| {
                let table = format!("destination[{}].", i + 1);
                let key = p.place.rsplit_once(&table)?.1;
                LABELS
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, label)| *label)
            });
            match field {
                Some(label) => format!("{label}: {}", p.message),
                None => format!("{}: {}", p.place, p.message),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    Add(Fields),
    /// The destination named so gets these fields.
    Change(String, Fields),
    Remove(String),
}

impl Edit {
    fn describe(&self) -> String {
        match self {
            Edit::Add(f) => format!("added destination {:?} ({})", f.name, f.addr),
            Edit::Change(was, f) => format!("changed destination {was:?} ({})", f.addr),
            Edit::Remove(name) => format!("removed destination {name:?}"),
        }
    }
}

/// Makes the change: `Ok` says what was done, `Err` why nothing was.
pub fn apply(shared: &Shared, edit: &Edit) -> Result<String, String> {
    if let Edit::Add(f) | Edit::Change(_, f) = edit {
        check_fields(f)?;
    }
    match &shared.file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let (edited, index) = edit_doc(&text, edit)?;
            // Checked as the reloader will check it: a change that makes the
            // file invalid is not written.
            Config::from_toml(&edited, &path.display().to_string(), &shared.overrides)
                .map_err(|e| described(&e.problems, index))?;
            write_atomically(path, &edited)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(format!("{} in {}", edit.describe(), path.display()))
        }
        None => apply_unsaved(shared, edit),
    }
}

/// The index of the `[[destination]]` called `name` (a table without a name
/// is called by its address, as the relay calls it).
fn find(tables: &ArrayOfTables, name: &str) -> Option<usize> {
    tables.iter().position(|t| {
        let key = |k: &str| t.get(k).and_then(Item::as_str);
        key("name").or_else(|| key("addr")) == Some(name)
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

/// Sets `table`'s keys to `f`, leaving out the defaults.
fn fill(table: &mut Table, f: &Fields) {
    set(table, "name", f.name.as_str());
    set(table, "addr", f.addr.as_str());
    match f.format.as_deref() {
        Some(format) if !format.is_empty() && format != "same" => {
            set(table, "format", format);
        }
        _ => {
            table.remove("format");
        }
    }
    if f.only_race_on {
        set(table, "only_race_on", true);
    } else {
        table.remove("only_race_on");
    }
    if f.max_rate > 0 {
        set(table, "max_rate", i64::from(f.max_rate));
    } else {
        table.remove("max_rate");
    }
    match f.max_age_ms {
        Some(ms) => set(table, "max_age", format!("{ms}ms")),
        None => {
            table.remove("max_age");
        }
    }
}

/// `text` with the change made, everything else as it was.
#[cfg(test)]
pub fn edit_text(text: &str, edit: &Edit) -> Result<String, String> {
    edit_doc(text, edit).map(|(text, _)| text)
}

/// As [`edit_text`], with the index of the destination added or changed.
fn edit_doc(text: &str, edit: &Edit) -> Result<(String, Option<usize>), String> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| format!("the configuration file is not valid TOML: {e}"))?;
    if doc.get("destination").is_none() {
        doc.insert("destination", Item::ArrayOfTables(ArrayOfTables::new()));
    }
    let tables = doc["destination"]
        .as_array_of_tables_mut()
        .ok_or("destination is not a list of [[destination]] tables")?;
    let mut index = None;
    match edit {
        Edit::Add(f) => {
            if find(tables, &f.name).is_some() {
                return Err(format!(
                    "Name: there is a destination called {:?} already",
                    f.name
                ));
            }
            let mut table = Table::new();
            fill(&mut table, f);
            tables.push(table);
            index = Some(tables.len() - 1);
        }
        Edit::Change(was, f) => {
            let i = find(tables, was).ok_or_else(|| format!("no destination is called {was:?}"))?;
            if *was != f.name && find(tables, &f.name).is_some() {
                return Err(format!(
                    "Name: there is a destination called {:?} already",
                    f.name
                ));
            }
            let table = tables.get_mut(i).ok_or("the destination went away")?;
            fill(table, f);
            index = Some(i);
        }
        Edit::Remove(name) => {
            let i =
                find(tables, name).ok_or_else(|| format!("no destination is called {name:?}"))?;
            tables.remove(i);
        }
    }
    Ok((doc.to_string(), index))
}

/// Writes `text` into a temporary file beside `path`, then renames it over
/// `path`: a reader sees the old file or the new one, never half of one.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path.file_name().map_or_else(
        || "forza-relay.toml".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let temp = path.with_file_name(format!(".{name}.web-edit"));
    let mut file = std::fs::File::create(&temp)?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| std::fs::rename(&temp, path)) {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(())
}

/// The `--to` value of `f`.
fn to_spec(f: &Fields) -> Result<String, String> {
    if f.name.contains(',') || f.addr.contains(',') {
        return Err(
            "Name or Address: a comma can't be used without a configuration file".to_owned(),
        );
    }
    let mut spec = format!("{},name={}", f.addr, f.name);
    if let Some(format) = f.format.as_deref().filter(|f| !f.is_empty()) {
        spec.push_str(&format!(",format={format}"));
    }
    if f.only_race_on {
        spec.push_str(",only-race-on");
    }
    if f.max_rate > 0 {
        spec.push_str(&format!(",max-rate={}", f.max_rate));
    }
    if let Some(ms) = f.max_age_ms {
        spec.push_str(&format!(",max-age={ms}ms"));
    }
    Ok(spec)
}

/// Without a file: the running configuration with the change, checked as
/// `--to` values are, then applied to the relay.
fn apply_unsaved(shared: &Shared, edit: &Edit) -> Result<String, String> {
    let mut config = lock(&shared.config);
    let mut fields: Vec<Fields> = config
        .destinations
        .iter()
        .map(|d| Fields {
            name: d.name.clone(),
            addr: d.addr_text.clone(),
            format: Some(d.output.to_string()),
            only_race_on: d.only_race_on,
            max_rate: d.max_rate,
            max_age_ms: d
                .max_age
                .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX)),
        })
        .collect();
    let at = |fields: &[Fields], name: &str| fields.iter().position(|f| f.name == name);
    match edit {
        Edit::Add(f) => {
            if at(&fields, &f.name).is_some() {
                return Err(format!(
                    "Name: there is a destination called {:?} already",
                    f.name
                ));
            }
            fields.push(f.clone());
        }
        Edit::Change(was, f) => {
            let i = at(&fields, was).ok_or_else(|| format!("no destination is called {was:?}"))?;
            fields[i] = f.clone();
        }
        Edit::Remove(name) => {
            let i =
                at(&fields, name).ok_or_else(|| format!("no destination is called {name:?}"))?;
            fields.remove(i);
        }
    }
    let specs = fields.iter().map(to_spec).collect::<Result<Vec<_>, _>>()?;
    let mut next = Config::from_args(&specs, &shared.overrides).map_err(|e| {
        // The `--to` text is the page's, not the user's: a problem with the
        // edited destination is said without it.
        let edited = match edit {
            Edit::Add(f) | Edit::Change(_, f) => to_spec(f).ok(),
            Edit::Remove(_) => None,
        };
        e.problems
            .iter()
            .map(|p| match &edited {
                Some(spec) if p.place == format!("--to {spec:?}") => p.message.clone(),
                _ => format!("{}: {}", p.place, p.message),
            })
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    // What the page can't change stays as it runs.
    next.listen = config.listen;
    next.listen_place = config.listen_place.clone();
    next.web = config.web;
    match shared.control.apply_and_wait(next.clone(), APPLY_WAIT) {
        Some(Ok(applied)) => {
            *config = next;
            Ok(format!(
                "{} (not saved: no configuration file): configuration applied: {applied}",
                edit.describe()
            ))
        }
        Some(Err(e)) => Err(e.to_string()),
        None => Err("the relay did not answer".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# my relay
[listen]
addr = \"0.0.0.0:5400\" # the game sends here

# SimHub on this PC
[[destination]]
name = \"simhub\"
addr = \"127.0.0.1:8000\"
";

    fn fields(name: &str, addr: &str) -> Fields {
        Fields {
            name: name.to_owned(),
            addr: addr.to_owned(),
            format: Some("fh5".to_owned()),
            only_race_on: true,
            max_rate: 30,
            max_age_ms: None,
        }
    }

    #[test]
    fn an_added_destination_keeps_every_comment() {
        let out = edit_text(FILE, &Edit::Add(fields("dash", "127.0.0.1:5301"))).unwrap();
        assert!(out.starts_with(FILE), "{out}");
        let config = Config::from_toml(&out, "t", &Default::default()).unwrap();
        let d = &config.destinations[1];
        assert_eq!(
            (d.name.as_str(), d.max_rate, d.only_race_on),
            ("dash", 30, true)
        );
        assert_eq!(d.output.to_string(), "fh5");
    }

    #[test]
    fn a_change_and_a_remove_touch_only_their_table() {
        let added = edit_text(FILE, &Edit::Add(fields("dash", "127.0.0.1:5301"))).unwrap();
        let mut f = fields("dash", "127.0.0.1:5302");
        f.format = Some("same".to_owned());
        let changed = edit_text(&added, &Edit::Change("dash".to_owned(), f)).unwrap();
        assert!(changed.contains("127.0.0.1:5302") && !changed.contains("fh5"));
        let removed = edit_text(&changed, &Edit::Remove("dash".to_owned())).unwrap();
        assert_eq!(removed.trim_end(), FILE.trim_end());
    }

    #[test]
    fn a_change_keeps_the_comment_after_a_value() {
        let text = FILE.replace(
            "addr = \"127.0.0.1:8000\"\n",
            "addr = \"127.0.0.1:8000\" # SimHub's port\n",
        );
        let mut f = fields("simhub", "127.0.0.1:8001");
        f.format = None;
        f.only_race_on = false;
        f.max_rate = 0;
        f.max_age_ms = None;
        let changed = edit_text(&text, &Edit::Change("simhub".to_owned(), f)).unwrap();
        assert_eq!(
            changed,
            text.replace("127.0.0.1:8000", "127.0.0.1:8001"),
            "only the address changed"
        );
    }

    #[test]
    fn a_taken_name_or_a_missing_one_is_refused_by_name() {
        let e = edit_text(FILE, &Edit::Add(fields("simhub", "127.0.0.1:1"))).unwrap_err();
        assert!(e.contains("\"simhub\""), "{e}");
        let e = edit_text(FILE, &Edit::Remove("nope".to_owned())).unwrap_err();
        assert!(e.contains("\"nope\""), "{e}");
    }

    #[test]
    fn max_age_is_written_in_milliseconds_and_removed_when_off() {
        let mut f = fields("rig", "127.0.0.1:5302");
        f.max_age_ms = Some(50);
        let added = edit_text(FILE, &Edit::Add(f.clone())).unwrap();
        assert!(added.contains("max_age = \"50ms\"\n"), "{added}");
        let config = Config::from_toml(&added, "t", &Default::default()).unwrap();
        assert_eq!(
            config.destinations[1].max_age,
            Some(std::time::Duration::from_millis(50))
        );
        f.max_age_ms = None;
        let off = edit_text(&added, &Edit::Change("rig".to_owned(), f)).unwrap();
        assert!(!off.contains("max_age"), "{off}");
        assert!(!to_spec(&fields("a", "127.0.0.1:1"))
            .unwrap()
            .contains("max-age"));
        let mut f = fields("a", "127.0.0.1:1");
        f.max_age_ms = Some(20);
        assert!(to_spec(&f).unwrap().ends_with(",max-age=20ms"));
    }

    #[test]
    fn what_the_user_typed_is_faulted_by_the_fields_label_never_a_line() {
        let e = check_fields(&fields("dash", "192.168.1.50")).unwrap_err();
        assert!(
            e.starts_with("Address: \"192.168.1.50\": needs a port"),
            "{e}"
        );
        let e = check_fields(&fields("", "127.0.0.1:1")).unwrap_err();
        assert!(e.starts_with("Name: "), "{e}");
        let mut f = fields("dash", "127.0.0.1:1");
        f.format = Some("fh9".to_owned());
        assert!(check_fields(&f).unwrap_err().starts_with("Format: \"fh9\""));
        f.format = None;
        f.max_age_ms = Some(0);
        let e = check_fields(&f).unwrap_err();
        assert!(e.starts_with("Max age: 0 ms"), "{e}");
        f.max_age_ms = Some(60_001);
        assert!(check_fields(&f)
            .unwrap_err()
            .starts_with("Max age: 60001 ms"));
        f.max_age_ms = Some(50);
        assert_eq!(check_fields(&f), Ok(()));
        // A problem the whole file finds with the edited table: by its label.
        let problems = [
            Problem {
                place: "forza-relay.toml:79: destination[3].addr".to_owned(),
                message: "packets would loop".to_owned(),
            },
            Problem {
                place: "forza-relay.toml:4: listen.addr".to_owned(),
                message: "taken".to_owned(),
            },
        ];
        assert_eq!(
            described(&problems, Some(2)),
            "Address: packets would loop; forza-relay.toml:4: listen.addr: taken"
        );
    }
}
