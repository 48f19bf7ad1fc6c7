//! The known tools: `src/tools.toml`, embedded and parsed once.
//!
//! Several tools share a default port (5300, 5555, 9999): a socket is taken for a
//! tool by the name of the process that holds it, never by its port alone.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::config::Output;
use crate::wire::Format;

/// The table's text, as committed.
pub const TOOLS_TOML: &str = include_str!("../tools.toml");

/// One telemetry tool people run beside Forza.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tool {
    /// A short name, also the destination name `setup` proposes.
    pub id: String,
    /// What the tool calls itself.
    pub name: String,
    /// Executable names it runs as, without `.exe`.
    pub processes: Vec<String>,
    /// The interpreter it runs in (node, python) when it has no executable of
    /// its own: then it is recognised only on its default port.
    pub runtime: Option<String>,
    /// Its default UDP port.
    pub port: u16,
    /// What to send it.
    pub layout: Output,
    /// Another tool has the same default port.
    pub shared_port: bool,
    /// What a user should know.
    pub note: String,
    /// Port and layout were read in a public source.
    pub verified: bool,
    /// The process name was read in a public source too.
    pub process_verified: bool,
    /// Where the facts come from.
    pub sources: Vec<String>,
}

/// A row as written in the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    id: String,
    name: String,
    #[serde(default)]
    processes: Vec<String>,
    runtime: Option<String>,
    port: u16,
    layout: String,
    #[serde(default)]
    shared_port: bool,
    note: String,
    verified: bool,
    process_verified: bool,
    sources: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tool: Vec<Row>,
}

/// Parses a table in the format of `src/tools.toml`; the error names the row
/// and the value at fault.
pub fn parse(text: &str) -> Result<Vec<Tool>, String> {
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    file.tool
        .into_iter()
        .map(|row| {
            let layout = parse_layout(&row.layout)
                .map_err(|e| format!("tool {:?}: layout {:?}: {e}", row.id, row.layout))?;
            if row.port == 0 {
                return Err(format!("tool {:?}: port 0 is not a port", row.id));
            }
            if row.shared_port && row.processes.is_empty() && row.runtime.is_none() {
                // Only its process tells it apart from the others on its port.
                return Err(format!(
                    "tool {:?} shares port {} but names no process",
                    row.id, row.port
                ));
            }
            Ok(Tool {
                id: row.id,
                name: row.name,
                processes: row.processes,
                runtime: row.runtime,
                port: row.port,
                layout,
                shared_port: row.shared_port,
                note: row.note,
                verified: row.verified,
                process_verified: row.process_verified,
                sources: row.sources,
            })
        })
        .collect()
}

/// `same` or a format id.
fn parse_layout(text: &str) -> Result<Output, String> {
    if text.eq_ignore_ascii_case("same") {
        return Ok(Output::Same);
    }
    text.parse::<Format>()
        .map(Output::Format)
        .map_err(|e| e.to_string())
}

/// The embedded table, parsed on first use.
pub fn tools() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        parse(TOOLS_TOML).expect("src/tools.toml parses (tests/it/setup.rs checks every row)")
    })
}

/// The default ports that more than one tool listens on, with those tools' ids.
pub fn collisions(tools: &[Tool]) -> BTreeMap<u16, Vec<&str>> {
    let mut by_port: BTreeMap<u16, Vec<&str>> = BTreeMap::new();
    for tool in tools {
        by_port.entry(tool.port).or_default().push(&tool.id);
    }
    by_port.retain(|_, ids| ids.len() > 1);
    by_port
}

/// A process name as the OS gives it, compared without case and without `.exe`.
fn same_program(process: &str, name: &str) -> bool {
    bare(process).eq_ignore_ascii_case(bare(name))
}

/// `name` without a trailing `.exe` (any case) and surrounding blanks.
fn bare(name: &str) -> &str {
    let name = name.trim();
    match name.len().checked_sub(4) {
        Some(cut)
            if name
                .get(cut..)
                .is_some_and(|e| e.eq_ignore_ascii_case(".exe")) =>
        {
            name.get(..cut).unwrap_or(name)
        }
        _ => name,
    }
}

impl Tool {
    /// True when `process` holding a UDP socket on `port` is this tool: it runs
    /// as one of the tool's executables (on any port, since users change
    /// ports), or in the tool's interpreter on the tool's default port.
    pub fn holds(&self, process: &str, port: u16) -> bool {
        self.processes.iter().any(|p| same_program(process, p))
            || (port == self.port
                && self
                    .runtime
                    .as_deref()
                    .is_some_and(|r| same_program(process, r)))
    }
}

/// The tools that `process` holding `port` may be: one where the process name
/// says so, several only when interpreters collide.
pub fn recognise(process: &str, port: u16) -> Vec<&'static Tool> {
    tools().iter().filter(|t| t.holds(process, port)).collect()
}

/// The tools whose default port is `port`.
pub fn by_port(port: u16) -> Vec<&'static Tool> {
    tools().iter().filter(|t| t.port == port).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_name_matches_with_or_without_exe_and_case() {
        assert!(same_program("SimHubWPF.exe", "SimHubWPF"));
        assert!(same_program("simhubwpf", "SimHubWPF"));
        assert!(same_program("SIMHUBWPF.EXE", "SimHubWPF"));
        assert!(!same_program("SimHubWPF2.exe", "SimHubWPF"));
        assert!(!same_program(".exe", "SimHubWPF"));
    }

    #[test]
    fn an_interpreter_is_a_tool_only_on_that_tools_port() {
        let codriver = tools()
            .iter()
            .find(|t| t.id == "co-driver")
            .expect("co-driver is in the table");
        assert!(codriver.holds("node", 5300));
        assert!(codriver.holds("node.exe", 5300));
        assert!(!codriver.holds("node", 5301));
        let simhub = tools()
            .iter()
            .find(|t| t.id == "simhub")
            .expect("SimHub is in the table");
        // Users change SimHub's port: its own executable is SimHub anywhere.
        assert!(simhub.holds("SimHubWPF.exe", 8123));
    }

    #[test]
    fn a_bad_row_is_named_with_its_value() {
        let text = r#"
[[tool]]
id = "x"
name = "X"
port = 1
layout = "fh9"
note = ""
verified = true
process_verified = true
sources = []
"#;
        let e = parse(text).expect_err("fh9 is no format");
        assert!(e.contains("tool \"x\": layout \"fh9\""), "{e}");
        let shared = text
            .replace("fh9", "fh5")
            .replace("port = 1", "port = 1\nshared_port = true");
        let e = parse(&shared).expect_err("a shared port needs a process");
        assert!(e.contains("shares port 1 but names no process"), "{e}");
    }
}
