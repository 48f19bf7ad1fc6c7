//! Destinations changed from the page: the form's JSON turned into an
//! [`Edit`] for the configuration's owner ([`crate::owner`]), which makes it
//! (in the file when there is one), has the relay apply it, and answers with
//! what the relay did. The page's POST answers only then; it keeps no copy of
//! the configuration.

use serde_json::{json, Map, Value};

use super::Shared;
use crate::config::{field, DestinationSpec};
use crate::output::mqtt::Secret;
use crate::owner::{Edit, EditError, Failed, Ticket};

/// The label of the form's `max_rate` field, for its errors.
const MAX_RATE: &str = "Max rate";
/// The longest `max_age` the form takes, in milliseconds
/// ([`crate::config::MAX_MAX_AGE`]).
const MAX_AGE_MS: u64 = crate::config::MAX_MAX_AGE.as_millis() as u64;
/// The longest `hold` the form takes, in seconds ([`crate::config::MAX_HOLD`]).
const MAX_HOLD_S: u64 = crate::config::MAX_HOLD.as_secs();

/// The answer's status for an error of this kind.
fn status(failed: Failed) -> u16 {
    match failed {
        Failed::Invalid => 422,
        Failed::Conflict => 409,
        Failed::Unavailable => 503,
        Failed::Refused => 500,
    }
}

/// A text field of the form, trimmed (absent or null: empty).
fn text(form: &Map<String, Value>, key: &str, label: &'static str) -> Result<String, EditError> {
    match form.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.trim().to_owned()),
        Some(other) => Err(EditError::field(label, format!("{other} is not text"))),
    }
}

/// A whole number of the form, absent, null or empty meaning `None`.
fn number(
    form: &Map<String, Value>,
    key: &str,
    label: &'static str,
    what: &str,
) -> Result<Option<u64>, EditError> {
    let bad = |v: &dyn std::fmt::Display| EditError::field(label, format!("{v} is not {what}"));
    match form.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad(&format!("{:?}", s.trim()))),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| bad(n)),
        Some(other) => Err(bad(other)),
    }
}

/// A list of names: a JSON array of texts, or one text with the names
/// separated by commas.
fn names(
    form: &Map<String, Value>,
    key: &str,
    label: &'static str,
) -> Result<Vec<String>, EditError> {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    };
    match form.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(split(s)),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.trim().to_owned()),
                other => Err(EditError::field(label, format!("{other} is not a name"))),
            })
            .filter(|n| n.as_ref().map_or(true, |n| !n.is_empty()))
            .collect(),
        Some(other) => Err(EditError::field(
            label,
            format!("{other} is not a list of names"),
        )),
    }
}

/// A text field that may be left out (absent, null or empty: `None`).
fn optional(
    form: &Map<String, Value>,
    key: &str,
    label: &'static str,
) -> Result<Option<String>, EditError> {
    Ok(Some(text(form, key, label)?).filter(|t| !t.is_empty()))
}

/// The destination the form describes.
fn spec(form: &Map<String, Value>) -> Result<DestinationSpec, EditError> {
    let max_rate = number(
        form,
        "max_rate",
        MAX_RATE,
        "a whole number of frames a second",
    )?;
    let max_rate = max_rate
        .map(u32::try_from)
        .transpose()
        .map_err(|_| EditError::field(MAX_RATE, "is more frames a second than any game sends"))?;
    let max_age = number(
        form,
        "max_age_ms",
        field::MAX_AGE,
        "a whole number of milliseconds (empty: off)",
    )?;
    if let Some(ms) = max_age.filter(|&ms| ms == 0 || ms > MAX_AGE_MS) {
        return Err(EditError::field(
            field::MAX_AGE,
            format!("{ms} ms is out of range: 1 to {MAX_AGE_MS} (empty: frames of any age)"),
        ));
    }
    let hold = number(
        form,
        "hold_s",
        field::HOLD,
        "a whole number of seconds (empty or 0: off)",
    )?;
    if let Some(s) = hold.filter(|&s| s > MAX_HOLD_S) {
        return Err(EditError::field(
            field::HOLD,
            format!("{s} s is out of range: 0 to {MAX_HOLD_S} (empty or 0: off)"),
        ));
    }
    // The password is taken as typed (spaces are a password's own); an
    // empty one keeps what the destination has.
    let password = match form.get("password") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) if p.is_empty() => None,
        Some(Value::String(p)) => Some(Secret::new(p.clone())),
        Some(_) => return Err(EditError::field(field::PASSWORD, "is not text")),
    };
    Ok(DestinationSpec {
        name: text(form, "name", field::NAME)?,
        addr: text(form, "addr", field::ADDRESS)?,
        format: optional(form, "format", field::FORMAT)?,
        only_race_on: matches!(form.get("only_race_on"), Some(Value::Bool(true))),
        max_rate,
        max_age: max_age.map(|ms| format!("{ms}ms")),
        hold: hold.filter(|&s| s > 0).map(|s| format!("{s}s")),
        records: names(form, "records", field::RECORDS)?,
        fields: names(form, "fields", field::FIELDS)?,
        topic: optional(form, "topic", field::TOPIC)?,
        username: optional(form, "username", field::USERNAME)?,
        password,
        password_env: optional(form, "password_env", field::PASSWORD)?,
        ca_file: optional(form, "ca_file", field::CA_FILE)?,
    })
}

/// The edit a change from the page asks for.
fn edit_of(value: &Value) -> Result<Edit, EditError> {
    let invalid = |message: String| EditError::new(Failed::Invalid, message);
    let form = value
        .as_object()
        .ok_or_else(|| invalid("a change is a JSON object".to_owned()))?;
    let action = form
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match action {
        "add" => Ok(Edit::Add(spec(form)?)),
        "change" => {
            let d = spec(form)?;
            let was = text(form, "was", field::NAME)?;
            Ok(Edit::Change(
                if was.is_empty() { d.name.clone() } else { was },
                d,
            ))
        }
        "remove" => Ok(Edit::Remove(text(form, "name", field::NAME)?)),
        other => Err(invalid(format!(
            "unknown action {other:?}: add, change or remove"
        ))),
    }
}

/// Makes the change the page asks for; the answer's status and body: `{"ok":
/// true, "message": …, "saved": …}` once the relay applied it, or `{"ok":
/// false, "error": "Address: …", "field": "Address"}` with nothing changed.
/// Nothing is made once `ticket` is given up (the request was answered).
pub fn change(shared: &Shared, value: &Value, ticket: &Ticket) -> (u16, Value) {
    let answer = edit_of(value).and_then(|edit| shared.editor.edit_with(edit, ticket));
    match answer {
        Ok(edited) => (
            200,
            json!({
                "ok": true,
                "message": edited.message,
                "saved": edited.saved.is_some(),
                "changes": edited.applied.to_string(),
            }),
        ),
        Err(e) => (
            status(e.failed),
            json!({"ok": false, "error": e.to_string(), "field": e.field}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_becomes_an_edit_with_every_key() {
        let edit = edit_of(&json!({
            "action": "change", "was": "dash", "name": " dash2 ", "addr": "127.0.0.1:5301",
            "format": "fh5", "only_race_on": true, "max_rate": 30, "max_age_ms": "50",
            "hold_s": 15
        }))
        .unwrap();
        let expected = DestinationSpec {
            name: "dash2".to_owned(),
            addr: "127.0.0.1:5301".to_owned(),
            format: Some("fh5".to_owned()),
            only_race_on: true,
            max_rate: Some(30),
            max_age: Some("50ms".to_owned()),
            hold: Some("15s".to_owned()),
            ..DestinationSpec::default()
        };
        assert_eq!(edit, Edit::Change("dash".to_owned(), expected));
    }

    /// Issue 34: `hold_s` 0 or empty is off; beyond a minute it is refused
    /// naming the field.
    #[test]
    fn a_hold_of_zero_is_off_and_one_too_long_names_its_field() {
        for off in [json!(0), json!(""), json!(null)] {
            let edit =
                edit_of(&json!({"action": "add", "name": "a", "addr": "b:1", "hold_s": off}));
            let Ok(Edit::Add(d)) = edit else {
                panic!("{off}: {edit:?}")
            };
            assert_eq!(d.hold, None, "{off}");
        }
        let e = edit_of(&json!({"action": "add", "name": "a", "addr": "b:1", "hold_s": 61}))
            .unwrap_err();
        assert_eq!(e.field, Some(field::HOLD));
        assert!(e.to_string().contains("61 s is out of range"), "{e}");
    }

    #[test]
    fn an_mqtt_destination_comes_with_its_keys_and_an_empty_password_keeps_the_old() {
        let edit = edit_of(&json!({
            "action": "add", "name": "league", "addr": "mqtt://broker:1883",
            "format": "influx", "fields": "Speed, gear_label,", "topic": "league/7",
            "username": "driver7", "password": "p4ss word", "password_env": "",
            "ca_file": "", "max_rate": ""
        }))
        .unwrap();
        let Edit::Add(d) = edit else {
            panic!("an add");
        };
        assert_eq!(d.fields, ["Speed", "gear_label"]);
        assert_eq!(d.topic.as_deref(), Some("league/7"));
        assert_eq!(d.username.as_deref(), Some("driver7"));
        assert_eq!(d.password.as_ref().map(Secret::expose), Some("p4ss word"));
        assert_eq!(
            (&d.password_env, &d.ca_file, d.max_rate),
            (&None, &None, None)
        );
        assert!(!format!("{d:?}").contains("p4ss"), "never in a debug print");
        let Edit::Change(_, d) = edit_of(&json!({
            "action": "change", "name": "league", "addr": "mqtt://broker:1883",
            "fields": ["Speed"], "password": ""
        }))
        .unwrap() else {
            panic!("a change");
        };
        assert_eq!((d.password, d.fields), (None, vec!["Speed".to_owned()]));
        let e = edit_of(&json!({"action": "add", "name": "a", "addr": "b:1", "fields": 5}))
            .unwrap_err();
        assert_eq!(e.field, Some(field::FIELDS));
    }

    #[test]
    fn an_empty_max_age_is_off_and_a_bad_number_names_its_field() {
        let Edit::Add(d) =
            edit_of(&json!({"action": "add", "name": "a", "addr": "b:1", "max_age_ms": ""}))
                .unwrap()
        else {
            panic!("an add");
        };
        assert_eq!((d.max_age, d.max_rate, d.format), (None, None, None));
        let e = edit_of(&json!({"action": "add", "name": "a", "addr": "b:1", "max_rate": -5}))
            .unwrap_err();
        assert_eq!(e.field, Some(MAX_RATE));
        assert_eq!(
            e.to_string(),
            "Max rate: -5 is not a whole number of frames a second"
        );
        let e =
            edit_of(&json!({"action": "add", "name": "a", "addr": "b:1", "max_age_ms": "soon"}))
                .unwrap_err();
        assert_eq!(e.field, Some(field::MAX_AGE));
    }
}
