//! The layers of src/ (issue 31): every module imports only modules of the
//! layers below its own, so the shape docs/architecture.md draws stays. Read
//! from the source itself: every `crate::` path outside comments and test
//! code, against the order written once, here ([`LAYERS`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// src/'s top-level modules, layer by layer from the bottom. A module may use
/// the modules of the layers before its own, never one of its own layer or
/// above (a face never another face).
const LAYERS: &[&[&str]] = &[
    // Text and numbers for messages, the log's writer, files read safely.
    &["words"],
    &["numbers"],
    &["logging"],
    &["named_file"],
    // Per-OS quirks, and the user's state folder they locate.
    &["platform"],
    &["state"],
    // The formats, and what is decided per destination from them alone.
    &["wire"],
    &["translate", "filter"],
    // Sockets, receiving, the status query's bytes.
    &["net"],
    // The ring of received datagrams; captures and the believable drive.
    &["tap"],
    &["capture", "simulate"],
    // Named values, the table of columns, and what is generated from them.
    &["telemetry"],
    &["dissector"],
    // What the core counts; the text outputs; the core.
    &["counters"],
    &["output"],
    &["fanout"],
    // The configuration, and every rendering of the counters.
    &["config"],
    &["report"],
    // The view every face shares.
    &["view"],
    // The shell, the configuration's owner, the runner.
    &["relay"],
    &["owner"],
    &["app"],
    // The tools that look at the machine and the running relay.
    &["setup"],
    // The faces: each an observer of the app, none importing another.
    &["dashboard", "export", "demo", "web", "tray"],
    // Every subcommand's glue.
    &["commands"],
];

/// The layer of top-level module `name`.
fn layer(name: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&name))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` without comments, string literals' contents and `#[cfg(test)]`
/// modules: what the compiler builds into the library.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if rest.starts_with("#[cfg(test)]") {
            // The item after it: a `mod … { … }` or `mod …;` (a file this
            // test skips by its name), or any other item up to its end.
            let open = rest.find(['{', ';']).unwrap_or(rest.len());
            if rest.as_bytes().get(open) == Some(&b';') {
                i += open + 1;
                continue;
            }
            let mut depth = 0;
            let mut j = open;
            for (k, c) in rest[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            j = open + k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            i += j;
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() {
                match rest.as_bytes()[j] {
                    b'\\' => j += 2,
                    b'"' => break,
                    _ => j += 1,
                }
            }
            out.push_str("\"\"");
            i += j + 1;
        } else {
            let c = rest.chars().next().expect("a char");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The top-level module of `file` (a path under src/), `None` for the crate's
/// root files and for test code kept in files of its own.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).expect("under src/");
    let stem = file.file_stem()?.to_str()?;
    if matches!(stem, "tests" | "testing") {
        return None;
    }
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    // src/bin/'s programs are crate roots too, of crates of their own.
    (!matches!(name, "lib" | "main" | "cli" | "bin")).then(|| name.to_owned())
}

/// The top-level modules `code` uses through `crate::`.
fn uses(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .filter(|(at, _)| {
            // Not `forza_crate::` or the like.
            !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
        })
        .filter_map(|(at, m)| {
            let name: String = code[at + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// Every import that climbs: `file: module -> used (layer n -> layer m)`.
fn climbing(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let Some(module) = module_of(src, file) else {
            continue;
        };
        let Some(own) = layer(&module) else {
            found.push(format!(
                "{}: module {module} is in no layer: add it to LAYERS (tests/it/layers.rs) \
                 and to docs/architecture.md",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read a source file");
        for used in uses(&code(&text)) {
            if used == module {
                continue;
            }
            match layer(&used) {
                Some(theirs) if theirs < own => {}
                Some(theirs) => found.push(format!(
                    "{}: {module} (layer {own}) uses crate::{used} (layer {theirs}): an \
                     import that climbs",
                    file.display()
                )),
                None => found.push(format!(
                    "{}: {module} uses crate::{used}, which is in no layer",
                    file.display()
                )),
            }
        }
    }
    found
}

/// The module path of `file` under src/ (`["relay", "link"]` for
/// src/relay/link.rs, `["relay"]` for src/relay/mod.rs); `None` for the
/// crate's root files and test code in files of its own.
fn module_path(src: &Path, file: &Path) -> Option<Vec<String>> {
    module_of(src, file)?;
    if file.file_stem()? == "fixtures" {
        return None;
    }
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut path: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    Some(path)
}

/// The module paths `code` (of module `own`) names through `crate::`,
/// `super::` and `self::`.
fn paths_used(code: &str, own: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for head in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(head) {
            if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut segments: Vec<String> = Vec::new();
            let mut rest = &code[at..];
            loop {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if name.is_empty() || !rest[name.len()..].starts_with("::") {
                    // The last segment may be a module too (`use super::x;`).
                    if !name.is_empty() {
                        segments.push(name);
                    }
                    break;
                }
                rest = &rest[name.len() + 2..];
                segments.push(name);
            }
            let mut path = match segments.first().map(String::as_str) {
                Some("crate") => Vec::new(),
                Some("self") => own.to_vec(),
                _ => own[..own.len().saturating_sub(1)].to_vec(),
            };
            for s in segments.into_iter().skip(1) {
                if s == "super" {
                    path.pop();
                } else {
                    path.push(s);
                }
            }
            found.push(path);
        }
    }
    found
}

/// Every loop among the files of one folder: `a -> b -> a` by the modules
/// each one names of its siblings.
fn folder_loops(src: &Path) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};

    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(own) = module_path(src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read a source file");
        for used in paths_used(&code(&text), &own) {
            // The first segment where the two paths part, below a shared
            // folder: a sibling of `own` or of one of its folders.
            let depth = own.iter().zip(&used).take_while(|(a, b)| a == b).count();
            if depth == 0 || depth >= own.len() || depth >= used.len() {
                continue;
            }
            edges
                .entry(own[..=depth].join("/"))
                .or_default()
                .insert(used[..=depth].join("/"));
        }
    }
    // A loop: a module that reaches itself again.
    let mut loops = Vec::new();
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, way)) = stack.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if next == start {
                    let mut cycle = way.clone();
                    cycle.push(start.clone());
                    loops.push(cycle.join(" -> "));
                } else if seen.insert(next.clone()) {
                    let mut longer = way.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    loops
}

#[test]
fn issue31_no_folder_holds_a_loop_among_its_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let loops = folder_loops(&src);
    assert!(
        loops.is_empty(),
        "loops inside folders:\n{}",
        loops.join("\n")
    );
}

#[test]
fn the_paths_read_are_the_modules_named() {
    let own: Vec<String> = ["relay", "turn"].map(String::from).to_vec();
    let text = "use super::link::{Env, Links}; use crate::net::recv::Batch; self::x::y();";
    let paths: Vec<String> = paths_used(text, &own)
        .into_iter()
        .map(|p| p.join("/"))
        .collect();
    assert_eq!(paths, ["net/recv", "relay/link", "relay/turn/x/y"]);
}

#[test]
fn issue31_every_module_uses_only_the_layers_below_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = climbing(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_reader_skips_comments_strings_and_test_modules() {
    let text = "use crate::wire; // crate::web\n/* crate::app */ let s = \"crate::relay\";\n\
                #[cfg(test)]\nmod tests { use crate::commands; }\nfn f() { crate::net::x(); }";
    let seen: Vec<String> = uses(&code(text)).into_iter().collect();
    assert_eq!(seen, ["net", "wire"]);
    assert_eq!(layer("commands"), Some(LAYERS.len() - 1));
}
