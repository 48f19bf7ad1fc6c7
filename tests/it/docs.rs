//! The README and `docs/` hold together: every relative link goes to a file that
//! exists (and to a heading in it, for `file.md#heading`), and the test command the
//! README gives is the one `.ci/run` runs.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/ exists");
    for entry in docs {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn links(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, spaces as hyphens, punctuation other
/// than `-` and `_` dropped.
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

/// The anchors of every heading of a Markdown page (outside code blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_readme_and_docs_leads_somewhere() {
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let dir = page.parent().expect("a page is in a folder");
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, heading) = match target.split_once('#') {
                Some((file, heading)) => (file, Some(heading)),
                None => (target, None),
            };
            let linked = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            assert!(
                linked.exists(),
                "{}: the link ({target}) leads to no file",
                page.display()
            );
            if let Some(heading) = heading {
                assert!(
                    anchors(&read(&linked)).iter().any(|a| a == heading),
                    "{}: the link ({target}) leads to no heading of {}",
                    page.display(),
                    linked.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} links found");
}

#[test]
fn the_readme_test_command_is_the_one_ci_runs() {
    let readme = read(&root().join("README.md"));
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Run and test"))
        .expect("README.md has a \"Run and test\" section");
    assert!(
        section.contains("```sh\ncargo test --all-targets\n```"),
        "the Run and test section gives `cargo test --all-targets`:\n{section}"
    );
    let ci = read(&root().join(".ci/run"));
    assert!(
        ci.lines()
            .any(|l| l.trim_start().starts_with("cargo test --all-targets")),
        ".ci/run runs `cargo test --all-targets`"
    );
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(anchor(" Car class"), "car-class");
    assert_eq!(
        anchor(" `forza-relay run`: relay the game's packets"),
        "forza-relay-run-relay-the-games-packets"
    );
    assert_eq!(
        anchor(" What real drives look like"),
        "what-real-drives-look-like"
    );
}
