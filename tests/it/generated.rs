//! Files committed to the repository that the code generates: the format reference
//! `docs/formats.md`, the table of a frame's keys `docs/fields.md` and the packet
//! fixtures `tests/fixtures/*.bin`. Each test fails
//! when a committed file is not what its generator makes now, and says how to write
//! it again: `FORZA_RELAY_BLESS=1 cargo test --test it generated::` rewrites every file
//! here instead of comparing (then review the diff and commit it).

#[path = "../generated/fixtures.rs"]
mod fixtures;
#[path = "../generated/reference.rs"]
mod reference;

use std::path::Path;

use forza_relay::wire::Format;

/// Set to 1 to write the generated files instead of checking them.
const BLESS: &str = "FORZA_RELAY_BLESS";

/// Fails unless the file at `path` (relative to the repository) holds `expected`;
/// with [`BLESS`] = 1, writes `expected` there instead. Line endings are not
/// compared in text, so a checkout with CRLF line endings (git's `autocrlf` on
/// Windows) passes.
#[track_caller]
fn check_or_bless(path: &str, expected: &[u8], text: bool) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if std::env::var_os(BLESS).is_some_and(|v| v == "1") {
        std::fs::write(&file, expected).unwrap_or_else(|e| panic!("writing {path}: {e}"));
        return;
    }
    let regenerate = format!(
        "write it again with `{}`, review the diff and commit it",
        reference::REGENERATE
    );
    let actual =
        std::fs::read(&file).unwrap_or_else(|e| panic!("{path} can't be read ({e}): {regenerate}"));
    if text {
        let actual = String::from_utf8_lossy(&actual).replace("\r\n", "\n");
        let expected = String::from_utf8_lossy(expected);
        if actual != expected {
            let end = || std::iter::repeat("(end of file)");
            let lines = actual.lines().count().max(expected.lines().count());
            let (line, (a, e)) = actual
                .lines()
                .chain(end())
                .zip(expected.lines().chain(end()))
                .take(lines)
                .enumerate()
                .find(|(_, (a, e))| a != e)
                .unwrap_or((lines, ("(a line end)", "(no line end)")));
            panic!(
                "{path} is not what the code generates: line {} is\n  {a}\nbut the code \
                 makes\n  {e}\n{regenerate}",
                line + 1
            );
        }
    } else if actual != expected {
        let at = actual
            .iter()
            .zip(expected)
            .position(|(a, e)| a != e)
            .unwrap_or(actual.len().min(expected.len()));
        panic!(
            "{path} is not what the generator makes: {} bytes where it makes {}, \
             first different at byte {at}; {regenerate}",
            actual.len(),
            expected.len()
        );
    }
}

#[test]
fn docs_formats_md_is_the_reference_generated_from_the_field_table() {
    assert_eq!(reference::PATH, "docs/formats.md");
    check_or_bless(reference::PATH, reference::markdown().as_bytes(), true);
}

#[test]
fn docs_fields_md_is_the_key_table_generated_from_the_columns() {
    assert_eq!(reference::fields::PATH, "docs/fields.md");
    check_or_bless(
        reference::fields::PATH,
        reference::fields::markdown().as_bytes(),
        true,
    );
}

#[test]
fn packet_fixtures_are_what_the_fixture_generator_makes() {
    for format in Format::ALL {
        let bytes = fixtures::packet(format);
        assert_eq!(bytes.len(), format.len(), "{format}");
        check_or_bless(&format!("tests/fixtures/{format}.bin"), &bytes, false);
    }
}
