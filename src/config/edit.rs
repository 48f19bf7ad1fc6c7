//! Edits of a running configuration without a file (issue 23): one
//! destination added, changed or removed while every other keeps every key as
//! it runs ([`Config::splice`]), the problems of what an editor wrote placed
//! at its fields' names ([`field`]).

use super::validate::{validate_destinations, RawDestination};
use super::{Config, ConfigError, Destination, LookUp, Problem};

/// One destination as an editor (the page) writes it: the keys of a
/// `[[destination]]` table, as the file writes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestinationSpec {
    /// `name`.
    pub name: String,
    /// `addr`: `host:port`.
    pub addr: String,
    /// `format`: `None` or `same` for what the game sends.
    pub format: Option<String>,
    /// `only_race_on`.
    pub only_race_on: bool,
    /// `max_rate`, 0 = every frame.
    pub max_rate: u32,
    /// `max_age`, like `"50ms"`; `None` = frames of any age.
    pub max_age: Option<String>,
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
    /// Every field, to tell a field's place from another.
    pub const ALL: [&str; 4] = [NAME, ADDRESS, FORMAT, MAX_AGE];
}

impl RawDestination {
    /// A destination of the running configuration, as it runs: its address
    /// is not looked up again.
    fn running(d: &Destination) -> RawDestination {
        let place = format!("destination {:?}", d.name);
        RawDestination {
            name_place: place.clone(),
            addr_place: place.clone(),
            format_place: place.clone(),
            name: Some(d.name.clone()),
            addr: d.addr_text.clone(),
            format: Some(d.output.to_string()),
            only_race_on: d.only_race_on,
            max_rate: d.max_rate,
            max_age: d
                .max_age
                .map(|a| (place, humantime::format_duration(a).to_string())),
            known: Some(d.addr),
        }
    }

    /// What an editor wrote; each problem's place is the field's name.
    fn edited(d: &DestinationSpec) -> RawDestination {
        RawDestination {
            name_place: field::NAME.to_owned(),
            addr_place: field::ADDRESS.to_owned(),
            format_place: field::FORMAT.to_owned(),
            name: Some(d.name.clone()),
            addr: d.addr.clone(),
            format: d.format.clone().filter(|f| !f.trim().is_empty()),
            only_race_on: d.only_race_on,
            max_rate: d.max_rate,
            max_age: d
                .max_age
                .clone()
                .filter(|a| !a.trim().is_empty())
                .map(|a| (field::MAX_AGE.to_owned(), a)),
            known: None,
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
        raws.extend(new.map(RawDestination::edited));
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
