//! The packet-format reference, `docs/formats.md`, generated from the code that
//! reads and writes packets, so the page can never disagree with the relay.
//!
//! What is generated, and from where: the formats and their blocks from the
//! [`Layout`](forza_relay::wire::Layout) rows; every field's offsets (block-relative and
//! absolute per format), type and presence from [`field::ALL`]; what a translation
//! does to each block, to WheelInPuddle and to CarClass by running [`translate`]
//! on sample packets of every pair of formats; the car class letters from the
//! layouts; the gear labels from [`Gear`]; the Horizon guesses by running
//! [`detect_horizon`]; units, ranges and meanings from the field table too. The
//! prose about the stream comes from the constants at the end of this file. `tests/it/generated.rs` fails when
//! `docs/formats.md` is not exactly [`markdown`]'s output.
//!
//! Generating is not on any hot path: it allocates freely, and it panics when
//! [`translate`] does something this page has no words for, so that a change in
//! the translator shows up as a failing test rather than as a wrong page.

#[path = "reference/fields.rs"]
pub mod fields;

use std::fmt::Write as _;

use forza_relay::telemetry::Gear;
use forza_relay::translate::translate;
use forza_relay::wire::{
    detect_horizon, field, Block, Field, Format, HorizonGuess, Packet, Puddle, PuddleKind, Wheels,
};

/// Where the generated page lives, relative to the repository root.
pub const PATH: &str = "docs/formats.md";

/// The command that writes [`PATH`] again after the code changed.
pub const REGENERATE: &str = "FORZA_RELAY_BLESS=1 cargo test --test it generated::";

/// `text`, or `—` when it is empty: a table cell.
fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "—"
    } else {
        text
    }
}

/// Every block a format can have, in packet order of the Horizon formats.
const BLOCKS: [Block; 5] = [
    Block::Sled,
    Block::Horizon,
    Block::Dash,
    Block::Extras,
    Block::Tail,
];

fn block_name(block: Block) -> &'static str {
    match block {
        Block::Sled => "Sled",
        Block::Horizon => "Horizon",
        Block::Dash => "Dash",
        Block::Extras => "FM2023 extras",
        Block::Tail => "tail byte",
    }
}

/// `` `fh4`, `fh5` `` (or "every format").
fn list(formats: &[Format]) -> String {
    if formats.len() == Format::ALL.len() {
        return "every format".to_owned();
    }
    let ids: Vec<String> = formats.iter().map(|f| format!("`{f}`")).collect();
    ids.join(", ")
}

/// `` `sled` and `fm2023` ``: [`list`] for a sentence.
fn and_list(formats: &[Format]) -> String {
    let ids: Vec<String> = formats.iter().map(|f| format!("`{f}`")).collect();
    and(&ids)
}

/// `items` joined as a sentence: "a", "a and b", "a, b and c".
fn and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The formats grouped by `key`, in [`Format::ALL`] order, skipping `None`.
fn groups<K: PartialEq + Copy>(key: impl Fn(Format) -> Option<K>) -> Vec<(K, Vec<Format>)> {
    let mut out: Vec<(K, Vec<Format>)> = Vec::new();
    for f in Format::ALL {
        let Some(k) = key(f) else { continue };
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(f),
            None => out.push((k, vec![f])),
        }
    }
    out
}

/// The type of `field` as stored, with the formats that store it differently:
/// `F32×4 (S32×4 in `fh6`)`.
fn type_text(field: &Field) -> String {
    // `Scalar`'s variants are named as the formats notes name the types.
    let by_type = groups(|f| Some(field.scalar.in_format(f)));
    let wheels = if field.wheels { "×4" } else { "" };
    let mut text = format!("{:?}{wheels}", by_type[0].0);
    for (scalar, formats) in &by_type[1..] {
        let _ = write!(text, " ({scalar:?}{wheels} in {})", list(formats));
    }
    text
}

/// `at` for one value, `at..end` for four.
fn span(field: &Field, at: usize) -> String {
    if field.wheels {
        format!("{at}..{}", at + field.size)
    } else {
        at.to_string()
    }
}

/// The whole of `docs/formats.md`.
pub fn markdown() -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "# Forza \"Data Out\" packet formats

<!-- Generated from the code by tests/generated/reference.rs: do not edit. After changing the
     field table, the layouts or the translator, run
     `{REGENERATE}` and commit the result. -->

forza-relay's reference for the packets it reads, writes and translates. The tables
below are generated from the code that does it: the field table
(`src/wire/field.rs`), the layouts of the formats (`src/wire/mod.rs`), and what
`translate` (`src/translate.rs`) does to sample packets; `tests/it/generated.rs` fails
when this page and the code disagree.

Everything is little endian and packed, with no padding between fields. Types: S =
signed integer, U = unsigned integer, F = IEEE-754 float; the number is bits. ×4 is
one value per wheel, in the order front left, front right, rear left, rear right
(FL, FR, RL, RR).

"
    );
    formats_section(&mut s);
    for block in [Block::Sled, Block::Horizon, Block::Dash, Block::Extras] {
        block_section(&mut s, block);
    }
    tail_section(&mut s);
    translation_section(&mut s);
    class_section(&mut s);
    gear_section(&mut s);
    detection_section(&mut s);
    s.push_str(STREAM);
    s.push_str(REAL_DRIVES);
    s.push_str(SOURCES);
    s
}

fn formats_section(s: &mut String) {
    s.push_str(
        "## The formats

Every game starts with the same 232-byte **Sled** block. Most add a 79-byte **Dash**
block. Horizon games put a 12-byte **Horizon** block between the two and one byte
after them; Forza Motorsport (2023) adds 20 bytes after Dash.

| format id | game | length | blocks (start offset) | WheelInPuddle |
|---|---|---|---|---|
",
    );
    for f in Format::ALL {
        let layout = f.layout();
        let blocks: Vec<String> = BLOCKS
            .iter()
            .filter_map(|&b| layout.start(b).map(|at| format!("{} @{at}", block_name(b))))
            .collect();
        let puddle = match layout.puddle {
            PuddleKind::Depth => "F32 depth",
            PuddleKind::Flag => "S32 0/1",
        };
        let _ = writeln!(
            s,
            "| `{f}` | {} | {} | {} | {puddle} |",
            f.game(),
            f.len(),
            blocks.join(" + ")
        );
    }
    let horizon: Vec<Format> = Format::ALL.into_iter().filter(|f| f.is_horizon()).collect();
    let _ = write!(
        s,
        "
{} packets are all {} bytes: they **cannot be told apart by length**. Configure the
input format, or see [Telling formats apart](#telling-formats-apart).

### Blocks

| block | length | starts at |
|---|---|---|
",
        list(&horizon),
        Format::Fh6.len()
    );
    for block in BLOCKS {
        let starts: Vec<String> = groups(|f| f.layout().start(block))
            .into_iter()
            .map(|(at, formats)| format!("{at} in {}", list(&formats)))
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            block_name(block),
            block.len(),
            starts.join("; ")
        );
    }
    s.push('\n');
}

/// The heading of `block`'s section: `Sled block, 232 bytes (every format)`.
fn block_heading(block: Block) -> String {
    let all: Vec<Format> = Format::ALL
        .into_iter()
        .filter(|f| f.layout().start(block).is_some())
        .collect();
    format!(
        "{} block, {} bytes ({})",
        block_name(block),
        block.len(),
        list(&all)
    )
}

/// GitHub's anchor of a heading: lower case, spaces as hyphens, punctuation
/// other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn block_section(s: &mut String, block: Block) {
    let starts = groups(|f| f.layout().start(block));
    let fields: Vec<&Field> = field::ALL.iter().filter(|f| f.block == block).collect();
    let _ = writeln!(s, "## {}\n", block_heading(block));
    match block {
        Block::Horizon => s.push_str(HORIZON_NOTE),
        Block::Extras => {
            s.push_str("Only Forza Motorsport (2023) sends these, after the Dash block.\n\n")
        }
        _ => {}
    }
    let relative = starts.iter().any(|(at, _)| *at != 0);
    let mut header = String::from("|");
    let mut rule = String::from("|");
    if relative {
        header.push_str(" rel |");
        rule.push_str("---|");
    }
    for (_, formats) in &starts {
        let _ = write!(header, " offset in {} |", list(formats));
        rule.push_str("---|");
    }
    header.push_str(" type | field | unit | range | meaning |");
    rule.push_str("---|---|---|---|---|");
    let _ = writeln!(s, "{header}\n{rule}");
    for f in fields {
        let mut row = String::from("|");
        if relative {
            let _ = write!(row, " +{} |", span(f, f.offset));
        }
        for (at, _) in &starts {
            let _ = write!(row, " {} |", span(f, at + f.offset));
        }
        let name = if f.wheels {
            format!("{} FL, FR, RL, RR", f.name)
        } else {
            f.name.to_owned()
        };
        let _ = writeln!(
            row,
            " {} | {name} | {} | {} | {} |",
            type_text(f),
            or_dash(f.unit),
            or_dash(f.range),
            f.meaning
        );
        s.push_str(&row);
    }
    s.push('\n');
}

fn tail_section(s: &mut String) {
    let tails = groups(|f| f.layout().tail);
    let places: Vec<String> = tails
        .iter()
        .map(|(at, formats)| format!("byte {at} of {}", and_list(formats)))
        .collect();
    let _ = write!(
        s,
        "## The tail byte

The last byte of the Horizon formats ({}) is undocumented padding. forza-relay
passes it through untouched between Horizon formats and writes 0 when it builds a
Horizon packet from another format (see the table below).

",
        and(&places)
    );
}

/// A `format` packet whose bytes are all non-zero (so a zero-filled block shows),
/// with valid WheelInPuddle words (a depth of 0.5 or a flag of 1 on two wheels)
/// and the CarClass value `class`.
fn sample(format: Format, class: i32) -> Vec<u8> {
    let bytes = (0..format.len()).map(|i| (i % 251 + 1) as u8).collect();
    let mut p = Packet::new_checked(bytes, format).expect("made format.len() long");
    p.set_wheel_in_puddle(match format.layout().puddle {
        PuddleKind::Depth => Wheels::from_array([0.5, 0.0, 0.5, 0.0]).map(Puddle::Depth),
        PuddleKind::Flag => Wheels::from_array([1, 0, 1, 0]).map(Puddle::Flag),
    });
    p.set_car_class(class);
    p.into_inner()
}

/// `sample(from, class)` translated to `to`.
fn translated(from: Format, to: Format, class: i32) -> Vec<u8> {
    let mut out = vec![0xEE; to.len()];
    let n = translate(&sample(from, class), from, to, &mut out).expect("a whole packet");
    out.truncate(n);
    out
}

/// Whether byte `i` of a Sled block is a word [`translate`] may rewrite.
fn rewritable(i: usize) -> bool {
    [field::WHEEL_IN_PUDDLE, field::CAR_CLASS]
        .iter()
        .any(|f| (f.offset..f.offset + f.size).contains(&i))
}

/// One row of the translation table: what `translate` did to each block of a
/// `from` → `to` translation, found by looking at its output.
fn translation_row(from: Format, to: Format) -> String {
    const CLASS: i32 = 6;
    let input = sample(from, CLASS);
    let out = translated(from, to, CLASS);
    let (mut copied, mut zeroed, mut dropped) = (Vec::new(), Vec::new(), Vec::new());
    for block in BLOCKS {
        let name = block_name(block);
        match (from.layout().start(block), to.layout().start(block)) {
            (Some(a), Some(b)) => {
                let len = block.len();
                let same = (0..len)
                    .filter(|&i| block != Block::Sled || !rewritable(i))
                    .all(|i| input[a + i] == out[b + i]);
                assert!(same, "{from} -> {to}: {name} is not copied");
                copied.push(if a == b {
                    name.to_owned()
                } else {
                    format!("{name} ({a} → {b})")
                });
            }
            (None, Some(b)) => {
                let zero = out[b..b + block.len()].iter().all(|&x| x == 0);
                assert!(zero, "{from} -> {to}: {name} is not zero-filled");
                zeroed.push(name.to_owned());
            }
            (Some(_), None) => dropped.push(name.to_owned()),
            (None, None) => {}
        }
    }
    let read_in = Packet::new_checked(&input[..], from).expect("a whole packet");
    let read_out = Packet::new_checked(&out[..], to).expect("a whole packet");
    let mut rewritten = Vec::new();
    let (before, after) = (read_in.wheel_in_puddle(), read_out.wheel_in_puddle());
    match (from.layout().puddle, to.layout().puddle) {
        (a, b) if a == b => assert_eq!(before, after, "{from} -> {to}: WheelInPuddle"),
        (PuddleKind::Flag, PuddleKind::Depth) => {
            assert_eq!(after, before.map(|p| Puddle::Depth(p.depth())));
            rewritten.push("WheelInPuddle S32 → F32".to_owned());
        }
        (PuddleKind::Depth, PuddleKind::Flag) => {
            assert_eq!(after, before.map(|p| Puddle::Flag(p.flag())));
            rewritten.push("WheelInPuddle F32 → S32".to_owned());
        }
        _ => unreachable!("two puddle kinds"),
    }
    if read_out.car_class() != read_in.car_class() {
        rewritten.push("CarClass by letter".to_owned());
    }
    let cell = |items: &[String]| {
        if items.is_empty() {
            "—".to_owned()
        } else {
            items.join(", ")
        }
    };
    format!(
        "| `{from}` | `{to}` | {} | {} | {} | {} |",
        cell(&copied),
        cell(&zeroed),
        cell(&dropped),
        cell(&rewritten)
    )
}

fn translation_section(s: &mut String) {
    s.push_str(
        "## Translation rules

A destination with `format = \"same\"` gets every datagram byte for byte. Any other
format is a translation, which writes **every** byte of the output:

- A block both formats have is copied (Dash moves between offset 232 in Motorsport
  and 244 in Horizon packets).
- A block only the output has is zero-filled: the Horizon block and the tail byte
  from a Motorsport input, FM2023's TireWear and TrackOrdinal from any other input,
  and the whole Dash block from a `sled` input, **so a tool fed from `sled` sees
  Speed, Gear, lap times and the rest as 0**.
- A block only the input has is dropped; a `sled` output is the first 232 bytes.
- WheelInPuddle is converted when the two formats type it differently: an S32 0/1
  becomes F32 0.0/1.0; an F32 depth becomes S32 1 when above 0, else 0.
- CarClass is mapped by letter between `fh4`/`fh5` and `fh6` (see
  [Car class](#car-class)); between any other pair it is copied as it is.

What `translate` does to every pair of formats (the same format is a plain copy):

| from | to | copied | zero-filled | dropped | rewritten |
|---|---|---|---|---|---|
",
    );
    for from in Format::ALL {
        for to in Format::ALL {
            if from != to {
                s.push_str(&translation_row(from, to));
                s.push('\n');
            }
        }
    }
    s.push('\n');
}

/// The letter of `value` on `format`'s class scale, `—` when it has none there.
fn letter(format: Format, value: i32) -> &'static str {
    format
        .layout()
        .classes
        .and_then(|c| usize::try_from(value).ok().and_then(|i| c.get(i)))
        .copied()
        .unwrap_or("—")
}

/// A table of what `translate` makes of each CarClass value of `from` in `to`.
fn class_map(s: &mut String, from: Format, to: Format) {
    let scale = from.layout().classes.expect("a Horizon format has a scale");
    let _ = write!(
        s,
        "| `{from}` value | letter | `{to}` value | letter |\n|---|---|---|---|\n"
    );
    for value in 0..scale.len() as i32 {
        let out = translated(from, to, value);
        let mapped = Packet::new_checked(&out[..], to)
            .expect("a whole packet")
            .car_class();
        let _ = writeln!(
            s,
            "| {value} | {} | {mapped} | {} |",
            letter(from, value),
            letter(to, mapped)
        );
    }
    s.push('\n');
}

fn class_section(s: &mut String) {
    let scales = groups(|f| f.layout().classes);
    let longest = scales.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    s.push_str("## Car class\n\nCarClass is an index on the game's own scale:\n\n| value |");
    for (_, formats) in &scales {
        let _ = write!(s, " {} |", list(formats));
    }
    s.push_str("\n|---|");
    for _ in &scales {
        s.push_str("---|");
    }
    s.push('\n');
    for value in 0..longest {
        let _ = write!(s, "| {value} |");
        for (classes, _) in &scales {
            let _ = write!(s, " {} |", classes.get(value).copied().unwrap_or("—"));
        }
        s.push('\n');
    }
    let unknown: Vec<Format> = Format::ALL
        .into_iter()
        .filter(|f| f.layout().classes.is_none())
        .collect();
    let _ = write!(
        s,
        "
No scale is known for {}: their CarClass is shown as a number. One source says FH6
adds class R between S2 and X, as above.

Between `fh4`/`fh5` and `fh6` a translation maps the class by its letter; a letter the
target lacks becomes the next lower class there, and a value outside the scale passes
unchanged:

",
        and_list(&unknown)
    );
    class_map(s, Format::Fh5, Format::Fh6);
    class_map(s, Format::Fh6, Format::Fh5);
    let outside = 42;
    let kept = Packet::new_checked(
        &translated(Format::Fh6, Format::Fh5, outside)[..],
        Format::Fh5,
    )
    .expect("a whole packet")
    .car_class();
    assert_eq!(kept, outside, "a class outside the scale passes unchanged");
}

/// What a driver is shown for a Gear byte, in words, for the table.
fn gear_meaning(gear: Gear) -> &'static str {
    match gear {
        Gear::Reverse => "R (reverse)",
        Gear::Neutral => "N (neutral)",
        Gear::Forward(_) => "that forward gear",
        Gear::Other(_) => "the number as it is",
    }
}

fn gear_section(s: &mut String) {
    s.push_str(
        "## Gear

The official documents say only \"U8 current gear\". Every public parser and SimHub
read it as below, and so does forza-relay (watch, export, the demo):

| Gear byte | shown as |
|---|---|
",
    );
    // Runs of bytes shown the same way: 0, 1 … 10, 11, 12 … 255.
    let mut runs: Vec<(u8, u8, &str)> = Vec::new();
    for raw in 0..=u8::MAX {
        let gear = Gear::from(raw);
        if matches!(gear, Gear::Forward(_) | Gear::Other(_)) {
            assert_eq!(
                gear.to_string(),
                raw.to_string(),
                "{raw} is shown as a number"
            );
        }
        let meaning = gear_meaning(gear);
        match runs.last_mut() {
            Some((_, last, m)) if *m == meaning && *last + 1 == raw => *last = raw,
            _ => runs.push((raw, raw, meaning)),
        }
    }
    for (first, last, meaning) in runs {
        if first == last {
            let _ = writeln!(s, "| {first} | {meaning} |");
        } else {
            let _ = writeln!(s, "| {first} … {last} | {meaning} |");
        }
    }
    s.push_str(
        "
Another reading found in notes (0 = N, 11 = R, 21 = P) is not supported by any
source. Gear 11 (N) appears for a frame or two between gears while shifting.

",
    );
}

fn detection_section(s: &mut String) {
    s.push_str("## Telling formats apart\n\n");
    let by_len = groups(|f| Some(f.len()));
    let lens: Vec<String> = by_len
        .iter()
        .map(|(len, formats)| format!("{len} → {}", list(formats)))
        .collect();
    let _ = write!(
        s,
        "By length: {}.

Between the Horizon formats nothing in the packet is certain. The WheelInPuddle words
can hint, as forza-relay's `detect_horizon` reads them:

| the four WheelInPuddle words | guess |
|---|---|
",
        lens.join("; ")
    );
    let words = |w: [u32; 4]| {
        let mut p = vec![0u8; Format::Fh6.len()];
        let at = field::WHEEL_IN_PUDDLE.offset;
        for (i, v) in w.iter().enumerate() {
            p[at + 4 * i..at + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        detect_horizon(&p)
    };
    let half = 0.5f32.to_bits();
    for (text, w) in [
        ("0, 1, 0, 1 as integers", [0, 1, 0, 1]),
        ("0.5, 0, 0.5, 0 as floats", [half, 0, half, 0]),
        ("all 0 (a dry road)", [0; 4]),
        ("1 and 0.5 mixed", [1, half, 0, 0]),
    ] {
        let guess = match words(w) {
            HorizonGuess::Fh6 => "`fh6` (S32 flags)",
            HorizonGuess::Fh5 => "`fh5` (F32 depths)",
            HorizonGuess::Unknown => "unknown",
        };
        let _ = writeln!(s, "| {text} | {guess} |");
    }
    s.push_str(
        "
A configured format always wins over a guess. With `auto`, a 324-byte packet whose
puddle words tell is read as the format they tell; one that tells nothing (a dry road)
is read as the stream's answer: `fh6` (a guess) until 30 telling packets in a row from
the sender followed (the game's) agree, then that format. Another sender's packets are
read by their own bytes and never change the answer.

",
    );
}

const HORIZON_NOTE: &str = "\
FH6 documents these three. For FH4 and FH5 the community calls the block
\"HorizonPlaceholder\"; observed contents match the FH6 meaning (a category, then two
values that are non-zero only around collisions), so the bytes are read as the same
fields.

";

const STREAM: &str = "\
## Facts about the stream that a relay must live with

- One datagram per rendered frame (FH6 is not capped at 60 Hz: 30 to 360 or more per
  second).
- Nothing is sent in menus, while paused, in replays, after the finish line, or when
  the FH6 window loses focus. Some games keep sending IsRaceOn = 0 frames in menus.
- The game never reads anything back. It can send to 127.0.0.1 (FM2023, FH5, FH6) or
  to another machine on the LAN (Xbox to PC).
- FH6 binds its own socket to a port in **5200..5300**: never default to a port there.
  SimHub's default Forza port is **8000**; community tools use 5300, 5555, 9999, 12350,
  20777.
- On Windows, a `recv` on a UDP socket that earlier sent to a closed port fails with
  WSAECONNRESET (10054). A relay must turn that off (`SIO_UDP_CONNRESET`) or ignore
  `ConnectionReset`, or one closed consumer kills it.

";

const REAL_DRIVES: &str = "\
## What real drives look like

Public captures from FH6, FH5, FM7 and FM2023 show the following; the simulator and
the tests rely on it, and it tells a real stream from a broken one.

- Packets about 16 ms apart at 60 fps (33 ms from a console at 30 fps); TimestampMS
  only rises.
- The length of (VelocityX, VelocityY, VelocityZ) equals Speed to float precision;
  between packets the position moves by Speed × Δt (ratio 0.9 to 1.04).
- CurrentEngineRpm stays within EngineIdleRpm..EngineMaxRpm while driving;
  EngineMaxRpm reads like 11499.99 or 7999.995 rather than a round number.
- Gear 11 (N) appears for a frame or two between gears while shifting.
- CarOrdinal, CarClass, CarPerformanceIndex, DrivetrainType and NumCylinders never
  change within a drive. In FH6, CarGroup is set (26, say) and the Smashable fields
  are 0 until a hit.
- FH6's IsRaceOn = 0 frames are all zero except TimestampMS.
- In every game, TireTempRL equals TireTempRR in every driving frame (a game quirk).
- FM2023 tyre wear rises and fuel falls slowly over a lap; TrackOrdinal is set (1640,
  say).

";

const SOURCES: &str = "\
## Sources

Official: Forza Horizon 6 Data Out documentation (support.forza.net, article
51744149102611); Forza Motorsport Data Out documentation (support.forzamotorsport.net,
article 21742934024211); FM7 Data Out feature details (forums.forza.net topic 74013).
Community: geeooff/forza-data-web `Core/ForzaDataReader*.cs`; 0x20F/forza-telemetry
`src/decoder/formats.rs`; richstokes/Forza-data-tools; nettrom/forza_motorsport
`fdp.py`; alexanderzobnin/grafana-simracing-telemetry `pkg/forza/packet.go`;
SHWotever/SimHub issues 442, 1435, 2259; tokio-rs/tokio#2017.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_come_from_the_table() {
        let md = markdown();
        // Speed: F32 at +12 in Dash, 244 in FM, 256 in FH.
        assert!(md.contains("| +12 | 244 | 256 | F32 | Speed | m/s | — | Speed. |"));
        // Gear: U8 at +75, 307 / 319.
        assert!(md.contains("| +75 | 307 | 319 | U8 | Gear |"));
        // WheelInPuddle is typed per format, in every format at 132.
        assert!(md.contains("| 132..148 | F32×4 (S32×4 in `fh6`) | WheelInPuddle FL, FR, RL, RR |"));
        // TrackOrdinal at +16 in the extras, 327 in fm2023.
        assert!(
            md.contains("| +16 | 327 | S32 | TrackOrdinal | — | — | The track's id (FM2023). |")
        );
        assert!(md.contains("| `fh6` | Forza Horizon 6 | 324 | Sled @0 + Horizon @232 + Dash @244 + tail byte @323 | S32 0/1 |"));
    }

    #[test]
    fn translation_rows_say_what_translate_does() {
        let md = markdown();
        assert!(md.contains(
            "| `fh6` | `fh5` | Sled, Horizon, Dash, tail byte | — | — | WheelInPuddle S32 → F32, CarClass by letter |"
        ));
        assert!(md.contains("| `sled` | `fm7` | Sled | Dash | — | — |"));
        assert!(md.contains(
            "| `fm2023` | `fh6` | Sled, Dash (232 → 244) | Horizon, tail byte | FM2023 extras | WheelInPuddle F32 → S32 |"
        ));
        // FH6's R (6) becomes S2 (5) on FH5's scale; FH5's X (6) is FH6's X (7).
        assert!(md.contains("| 6 | R | 5 | S2 |"));
        assert!(md.contains("| 6 | X | 7 | X |"));
    }

    #[test]
    fn gears_and_guesses_come_from_the_code() {
        let md = markdown();
        assert!(md.contains(
            "| 0 | R (reverse) |\n| 1 … 10 | that forward gear |\n| 11 | N (neutral) |\n\
             | 12 … 255 | the number as it is |"
        ));
        assert!(md.contains("| 0, 1, 0, 1 as integers | `fh6` (S32 flags) |"));
        assert!(md.contains("| all 0 (a dry road) | unknown |"));
    }
}
