//! Which targets this computer can build, and building them.
//!
//! A Linux x86-64 computer builds the three release targets the CI tries:
//! Windows with Debian's mingw-w64, Linux x86-64 as a static musl binary, and
//! the Raspberry Pi's aarch64 musl binary with Debian's aarch64 cross linker
//! (as `.ci/aarch64.sh` links it: Rust's musl target brings musl and its start
//! files, the glibc cross gcc only drives the linker). Any other computer
//! builds its own kind: Windows `x86_64-pc-windows-msvc` (the release
//! workflow's), macOS its own triple.

use std::process::Command;
use std::time::Instant;

use crate::{cargo, on_path, run, run_output};

/// The linker `.ci/aarch64.sh` gives the aarch64 musl target.
const AARCH64_LINKER: &str = "aarch64-linux-gnu-gcc";
const AARCH64_LINKER_VAR: &str = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER";

/// A target triple, and what its release files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub triple: String,
}

/// The operating systems that get different release files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// A zip, and the MSI where wixl is.
    Windows,
    /// A tar.gz and, for the architectures Debian names, a .deb.
    Linux,
    /// A tar.gz.
    Other,
}

impl Target {
    pub fn new(triple: &str) -> Self {
        Target {
            triple: triple.to_owned(),
        }
    }

    pub fn os(&self) -> Os {
        if self.triple.contains("-windows") {
            Os::Windows
        } else if self.triple.contains("-linux") {
            Os::Linux
        } else {
            Os::Other
        }
    }

    /// The first part of the triple: x86_64, aarch64 …
    pub fn arch(&self) -> &str {
        self.triple.split('-').next().unwrap_or("")
    }

    /// The program's file name.
    pub fn exe_name(&self) -> &'static str {
        match self.os() {
            Os::Windows => "forza-relay.exe",
            _ => "forza-relay",
        }
    }

    /// What this host lacks to build it, as one line saying how to get it.
    fn missing(&self, host: &str) -> Option<String> {
        let libdir = run_output(Command::new("rustc").args([
            "--print",
            "target-libdir",
            "--target",
            &self.triple,
        ]));
        match libdir {
            Ok(dir) if std::path::Path::new(dir.trim()).is_dir() => {}
            _ => {
                return Some(format!(
                    "its Rust library (rustup target add {})",
                    self.triple
                ))
            }
        }
        if self.triple == host {
            return None;
        }
        let (tool, variable, package) = match self.triple.as_str() {
            // Rust's own choice of linker for this target.
            "x86_64-pc-windows-gnu" => ("x86_64-w64-mingw32-gcc", None, "gcc-mingw-w64-x86-64"),
            // ring's C and assembly are compiled for musl with musl-gcc.
            "x86_64-unknown-linux-musl" => (
                "musl-gcc",
                Some("CC_x86_64_unknown_linux_musl"),
                "musl-tools",
            ),
            "aarch64-unknown-linux-musl" => (
                AARCH64_LINKER,
                Some(AARCH64_LINKER_VAR),
                "gcc-aarch64-linux-gnu",
            ),
            _ => return None,
        };
        let set = variable.is_some_and(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
        (!set && !on_path(tool)).then(|| format!("{tool} (Debian: apt-get install {package})"))
    }
}

/// This computer's own target triple.
pub fn host() -> Result<String, String> {
    let text = run_output(Command::new("rustc").arg("-vV"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV names no host".to_owned())
}

/// The targets a host builds when none is named (see the module's comment).
fn defaults(host: &str) -> Vec<&str> {
    if host == "x86_64-unknown-linux-gnu" {
        vec![
            "x86_64-pc-windows-gnu",
            "x86_64-unknown-linux-musl",
            "aarch64-unknown-linux-musl",
        ]
    } else if host.ends_with("-pc-windows-gnu") || host.ends_with("-pc-windows-msvc") {
        vec!["x86_64-pc-windows-msvc"]
    } else {
        vec![host]
    }
}

/// The targets to package: those named, else every default one. To be
/// built, each must be buildable here (a named one that is not is an error,
/// a default one is skipped in one line); `prebuilt` ones need nothing of the
/// host (their binary was built elsewhere).
pub fn choose(named: &[String], host: &str, prebuilt: bool) -> Result<Vec<Target>, String> {
    let mut targets: Vec<Target> = Vec::new();
    let given = !named.is_empty();
    let triples: Vec<&str> = if given {
        named.iter().map(String::as_str).collect()
    } else {
        defaults(host)
    };
    for triple in triples {
        let target = Target::new(triple);
        match target.missing(host).filter(|_| !prebuilt) {
            Some(missing) if given => {
                return Err(format!("{triple}: this computer lacks {missing}"))
            }
            Some(missing) => println!("skipping {triple}: this computer lacks {missing}"),
            None if targets.contains(&target) => {}
            None => targets.push(target),
        }
    }
    Ok(targets)
}

/// `cargo build --release --locked` for every target at once: their serial
/// link-time optimisations overlap on a computer with more than one core.
pub fn build(root: &std::path::Path, targets: &[Target], host: &str) -> Result<(), String> {
    let mut command = Command::new(cargo());
    command
        .args(["build", "--release", "--locked", "--package", "forza-relay"])
        .current_dir(root);
    for target in targets {
        command.args(["--target", &target.triple]);
    }
    let aarch64 = targets
        .iter()
        .any(|t| t.triple == "aarch64-unknown-linux-musl");
    if aarch64 && !host.starts_with("aarch64-") && std::env::var_os(AARCH64_LINKER_VAR).is_none() {
        command.env(AARCH64_LINKER_VAR, AARCH64_LINKER);
    }
    let names: Vec<&str> = targets.iter().map(|t| t.triple.as_str()).collect();
    println!("building {}", names.join(", "));
    let started = Instant::now();
    run(&mut command)?;
    println!("built in {:.0?}", started.elapsed());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_target_s_kind_and_program() {
        let windows = Target::new("x86_64-pc-windows-msvc");
        assert_eq!(
            (windows.os(), windows.arch(), windows.exe_name()),
            (Os::Windows, "x86_64", "forza-relay.exe")
        );
        let pi = Target::new("aarch64-unknown-linux-musl");
        assert_eq!(
            (pi.os(), pi.arch(), pi.exe_name()),
            (Os::Linux, "aarch64", "forza-relay")
        );
        let mac = Target::new("aarch64-apple-darwin");
        assert_eq!(
            (mac.os(), mac.arch(), mac.exe_name()),
            (Os::Other, "aarch64", "forza-relay")
        );
    }

    #[test]
    fn a_linux_computer_builds_the_three_targets_ci_tries_and_windows_its_msvc_one() {
        assert_eq!(
            defaults("x86_64-unknown-linux-gnu"),
            [
                "x86_64-pc-windows-gnu",
                "x86_64-unknown-linux-musl",
                "aarch64-unknown-linux-musl"
            ]
        );
        assert_eq!(
            defaults("x86_64-pc-windows-msvc"),
            ["x86_64-pc-windows-msvc"]
        );
        assert_eq!(defaults("aarch64-apple-darwin"), ["aarch64-apple-darwin"]);
    }
}
