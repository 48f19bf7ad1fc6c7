//! The table of the keys of a frame, `docs/fields.md`, generated from the code
//! that writes frames, so the page can never disagree with them.
//!
//! What is generated, and from where: the keys, in order, from
//! [`Column::all`]; each one's unit, range and meaning from [`Column::about`]
//! (the field table's data for the packet's fields, [`Derived::about`] for the
//! derived values); its JSON type and where it is `null` by reading its
//! value from a simulated drive's packets of every format and from a menu
//! frame of every format; its place in an influx line from [`Kind::of`] and
//! [`tag_of`]; which formats carry a packet field from the layouts.
//! `tests/it/generated.rs` fails when `docs/fields.md` is not exactly
//! [`markdown`]'s output, and `tests/it/docs.rs` checks the page's keys
//! against the frames the relay sends.
//!
//! Like [`super::markdown`], generating allocates freely and panics when a
//! value is of a kind this page has no words for.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use forza_relay::output::influx::{tag_of, Kind};
use forza_relay::simulate::Simulator;
use forza_relay::telemetry::columns::{Cell, Column, Derived, Row};
use forza_relay::telemetry::Telemetry;
use forza_relay::wire::{Format, Packet};

use super::{anchor, and_list, block_heading, block_name, or_dash, REGENERATE};

/// Where the generated page lives, relative to the repository root.
pub const PATH: &str = "docs/fields.md";

/// The seed of the simulated drive the values are read from.
const SEED: u64 = 30;

/// A few seconds into a simulated drive in `format`: a packet of a car
/// racing, with a value in every field its format has.
fn racing(format: Format) -> Vec<u8> {
    let mut sim = Simulator::new(format, SEED);
    let mut out = vec![0u8; format.len()];
    let mut n = 0;
    for _ in 0..300 {
        n = sim
            .frame(Duration::from_millis(16), &mut out)
            .expect("room for a packet");
    }
    assert!(sim.is_racing(), "{format}: racing after 300 frames");
    out.truncate(n);
    out
}

/// The frame a game sends in menus: every byte 0 but TimestampMS.
fn menu(format: Format) -> Vec<u8> {
    let mut out = vec![0u8; format.len()];
    Packet::new_checked(&mut out[..], format)
        .expect("made format.len() long")
        .set_timestamp_ms(123_456);
    out
}

/// `column`'s value in `bytes`, a `format` packet.
fn value(column: &Column, bytes: &[u8], format: Format) -> Cell {
    let packet = Packet::new_checked(bytes, format).expect("a whole packet");
    let telemetry = Telemetry::decode(&packet);
    let row = Row {
        time: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        since_start: 1.5,
        packet,
        telemetry: &telemetry,
    };
    column.value(&row)
}

/// The JSON type of a value, as this page names it.
fn json_kind(cell: Cell) -> Option<&'static str> {
    match cell {
        Cell::Int(_) => Some("integer"),
        Cell::Float(_) | Cell::Seconds(_) => Some("number"),
        Cell::Text(_) | Cell::Gear(_) | Cell::Time(_) => Some("string"),
        Cell::Null => None,
    }
}

/// The JSON cell of `column`: its type (by format where it differs) and
/// where it is `null`, read from a racing packet and a menu frame of every
/// format.
fn json_text(column: &Column) -> String {
    let mut kinds: Vec<(&str, Vec<Format>)> = Vec::new();
    let mut absent = Vec::new();
    let mut menu_null = Vec::new();
    for format in Format::ALL {
        match json_kind(value(column, &racing(format), format)) {
            Some(kind) => match kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, formats)) => formats.push(format),
                None => kinds.push((kind, vec![format])),
            },
            None => absent.push(format),
        }
        let in_menu = value(column, &menu(format), format);
        if in_menu == Cell::Null && !absent.contains(&format) {
            menu_null.push(format);
        }
    }
    let (kind, _) = kinds.first().expect("a value in some format");
    let mut text = (*kind).to_owned();
    for (kind, formats) in &kinds[1..] {
        let _ = write!(text, " ({kind} in {})", and_list(formats));
    }
    let mut nulls = Vec::new();
    if !absent.is_empty() {
        nulls.push(format!("in {}", and_list(&absent)));
    }
    match menu_null.len() {
        0 => {}
        n if n + absent.len() == Format::ALL.len() => nulls.push("in menu frames".to_owned()),
        _ => panic!(
            "{}: null in the menu frames of some formats only",
            column.name()
        ),
    }
    if !nulls.is_empty() {
        let _ = write!(text, "; `null` {}", nulls.join(" and "));
    }
    text
}

/// The influx cell of `column`: a field of which type, a tag, or the timestamp.
fn influx_text(column: &Column) -> String {
    let kind = Kind::of(column).map(|k| match k {
        Kind::Integer => "integer",
        Kind::Float => "float",
        Kind::String => "string",
    });
    match (kind, tag_of(column), column) {
        (Some(kind), None, _) => kind.to_owned(),
        (Some(kind), Some(tag), _) => format!("{kind}, and the tag `{tag}`"),
        (None, Some(tag), _) => format!("the tag `{tag}`"),
        (None, None, Column::RecvTime) => "the line's timestamp, in ns".to_owned(),
        (None, None, other) => panic!("{} is in no place of a line", other.name()),
    }
}

/// The "from" cell: a packet field's block, linked to its offsets, or how
/// forza-relay makes the value.
fn from_text(column: &Column) -> String {
    match (column, column.about().from) {
        (Column::Raw { field, .. }, None) => format!(
            "packet, [{} block](formats.md#{})",
            block_name(field.block),
            anchor(&block_heading(field.block))
        ),
        (_, Some(from)) => from.to_owned(),
        (other, None) => panic!(
            "{}: no field, and no word on where it is from",
            other.name()
        ),
    }
}

/// The rows of the table: one per column, one per per-wheel group.
fn rows() -> Vec<(Vec<String>, Column)> {
    let mut rows: Vec<(Vec<String>, Column)> = Vec::new();
    for column in Column::all() {
        match rows.last_mut() {
            Some((names, first)) if column.group().is_some() && first.group() == column.group() => {
                names.push(column.name())
            }
            _ => rows.push((vec![column.name()], column)),
        }
    }
    rows
}

/// The whole of `docs/fields.md`.
pub fn markdown() -> String {
    let mut s = String::new();
    let columns = Column::all();
    let derived = Derived::ALL.len();
    let _ = write!(
        s,
        "# The fields of a frame: json, influx, MQTT and the stream

<!-- Generated from the code by tests/generated/reference/fields.rs: do not edit. After changing the
     columns, the field table or the derived values, run
     `{REGENERATE}` and commit the result. -->

Every key of the frames forza-relay writes as text: the JSON object of a `format = \"json\"`
destination, of an MQTT destination and of the page's [live stream](stream.md) (and each
line of [`export --as jsonl`](export.md), whose CSV has the same columns), and every field
and tag of a `format = \"influx\"` line ([outputs](outputs.md)). The table is generated
from the code that writes them: the columns and the derived values
(`src/telemetry/columns.rs`), the field table (`src/wire/field.rs`), the influx writer
(`src/output/influx.rs`), and the values they give for packets of every format;
`tests/it/generated.rs` fails when this page and the code disagree, and
`tests/it/docs.rs` checks it against the frames the relay sends.

A frame has {} keys, in this order: `recv_time`, `recv_s` and `format`; every field
of the Data Out packet by the name the games' documents give it, a per-wheel field as
four keys (FL, FR, RL, RR: front left, front right, rear left, rear right); then the
{derived} values forza-relay derives from them (per wheel, four keys too). `fields`
(and `--fields`, `?fields=`) chooses some of them, by these names, ignoring case; a
per-wheel name without its wheel (`TireTemp`, `tire_temp_c`) chooses its four.

- **JSON**: a value the packet's format lacks, or that is not a finite number, is
  `null`. In a menu frame (the game in menus or paused: IsRaceOn 0 and every field 0
  but TimestampMS) the packet's fields are written as sent and every derived value is
  `null`. Numbers are the shortest text that reads back as the same value.
- **influx**: the measurement is `forza`; a value that would be `null` in JSON is left
  out (line protocol has no null), and a menu frame, which describes no car, writes no
  line. Each field keeps its type in every frame and every game.
- **From**: a field of the packet is as the game sent it (its offsets are in
  [the format reference](formats.md)); a derived value says how it is made. Units: g is
  standard gravity, 9.80665 m/s²; hp is mechanical horsepower, 745.6999 W.

| key | JSON | influx | unit | range | meaning | from |
|---|---|---|---|---|---|---|
",
        columns.len()
    );
    for (names, column) in rows() {
        let about = column.about();
        let keys: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        let cells = [
            keys.join(", "),
            json_text(&column),
            influx_text(&column),
            or_dash(about.unit).to_owned(),
            or_dash(about.range).to_owned(),
            about.meaning.to_owned(),
            from_text(&column),
        ];
        assert!(
            cells.iter().all(|c| !c.contains('|')),
            "a | would split a cell: {cells:?}"
        );
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use forza_relay::telemetry::is_menu_frame;

    #[test]
    fn a_row_per_key_and_per_wheel_group_in_column_order() {
        let rows = rows();
        let keys: Vec<String> = rows.iter().flat_map(|(names, _)| names.clone()).collect();
        let all: Vec<String> = Column::all().iter().map(Column::name).collect();
        assert_eq!(keys, all);
        let md = markdown();
        assert!(md.contains(
            "| `TireTempFL`, `TireTempFR`, `TireTempRL`, `TireTempRR` | number; `null` in `sled` \
             | float | °F | — | Tyre temperature. | packet, [Dash block]\
             (formats.md#dash-block-79-bytes-fm7-fm2023-fh4-fh5-fh6) |"
        ));
    }

    #[test]
    fn types_and_nulls_come_from_the_values() {
        let md = markdown();
        // WheelInPuddle: an S32 flag in fh6, a depth elsewhere; always a float in influx.
        assert!(md.contains("| number (integer in `fh6`) | float | — | 0 … 1 |"));
        // The class letter: no scale for sled and fm2023; a tag in influx.
        assert!(md.contains(
            "| `car_class_letter` | string; `null` in `sled` and `fm2023` and in menu frames \
             | the tag `class` |"
        ));
        assert!(md.contains("| `CarOrdinal` | integer | integer, and the tag `car` |"));
        assert!(md.contains("| `recv_time` | string | the line's timestamp, in ns |"));
        assert!(md.contains(
            "| `steer_axis` | number; `null` in `sled` and in menu frames | float | — | -1 … 1 |"
        ));
        assert!(
            md.contains("| `gear_label` | string; `null` in `sled` and in menu frames | string |")
        );
    }

    #[test]
    fn every_derived_value_and_receive_column_says_how_it_is_made() {
        for column in Column::all() {
            let about = column.about();
            assert!(about.meaning.ends_with('.'), "{}", column.name());
            assert_eq!(
                about.from.is_none(),
                matches!(column, Column::Raw { .. }),
                "{}",
                column.name()
            );
        }
    }

    #[test]
    fn the_menu_frame_is_one_and_the_drive_is_not() {
        for format in Format::ALL {
            let m = menu(format);
            assert!(is_menu_frame(&Packet::new_checked(&m[..], format).unwrap()));
            let r = racing(format);
            assert!(!is_menu_frame(
                &Packet::new_checked(&r[..], format).unwrap()
            ));
        }
    }
}
