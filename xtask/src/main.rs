//! forza-relay's release tooling, run as `cargo xtask dist` (the alias is in
//! `.cargo/config.toml`): every release file, for every target this computer
//! can build, into `target/dist/` (docs/releasing.md says what each holds).
//!
//! Here: the command line and the order of the work. `build.rs` says which
//! targets a host can build and builds them; `archive.rs` writes zip, tar.gz
//! and ar files; `package.rs` what goes into each release file; `msi.rs` the
//! Windows installer (wixl); `manifest.rs` SHA256SUMS.txt and the winget and
//! scoop manifests.

mod archive;
mod build;
mod manifest;
mod msi;
mod package;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use build::Target;

const USAGE: &str = "\
usage: cargo xtask dist [--target TRIPLE]... [--version X.Y.Z] [--base-url URL]
                        [--out DIR] [--prebuilt]

Builds forza-relay in release mode (cargo build --release --locked) for each
target and makes its release files in target/dist/ (docs/releasing.md).

  --target TRIPLE  a target to build and package; repeat for more [default:
                   every target this computer can build]
  --version X.Y.Z  the version the files are made for, instead of Cargo.toml's
                   (the program itself keeps Cargo.toml's): an installer that
                   upgrades this one, for a test
  --base-url URL   where the files will be downloaded from, for the manifests
                   [default: the releases of Cargo.toml's repository, or a
                   placeholder]
  --out DIR        the folder to make them in, emptied first unless
                   --prebuilt [default: target/dist]
  --prebuilt       package the binaries already in target/TRIPLE/release/ (built
                   by another job) instead of building, and add to the files
                   already in the folder";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.split_first() {
        Some((command, rest)) if command == "dist" => Options::parse(rest).and_then(|o| dist(&o)),
        Some((help, _)) if help == "-h" || help == "--help" || help == "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => Err(format!("no such task\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// What `cargo xtask dist` was asked for.
#[derive(Debug, Default, PartialEq)]
struct Options {
    targets: Vec<String>,
    version: Option<String>,
    base_url: Option<String>,
    out: Option<PathBuf>,
    prebuilt: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Options::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
                _ => (arg.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next().cloned())
                    .ok_or_else(|| format!("{flag} needs a value\n\n{USAGE}"))
            };
            match flag {
                "--target" => options.targets.push(value()?),
                "--version" => options.version = Some(value()?),
                "--base-url" => options.base_url = Some(value()?),
                "--out" => options.out = Some(PathBuf::from(value()?)),
                "--prebuilt" => options.prebuilt = true,
                "-h" | "--help" => return Err(USAGE.to_owned()),
                _ => return Err(format!("unknown option {arg}\n\n{USAGE}")),
            }
        }
        Ok(options)
    }
}

/// What `cargo metadata` says of the workspace and of forza-relay.
struct Metadata {
    root: PathBuf,
    target_dir: PathBuf,
    version: String,
    description: String,
    license: String,
    repository: Option<String>,
}

fn metadata() -> Result<Metadata, String> {
    let output = run_output(
        Command::new(cargo())
            .args(["metadata", "--format-version", "1", "--no-deps"])
            .current_dir(env!("CARGO_MANIFEST_DIR")),
    )?;
    let v: serde_json::Value = serde_json::from_str(&output)
        .map_err(|e| format!("cargo metadata's answer is not JSON: {e}"))?;
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    let package = v["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "forza-relay"))
        .ok_or("cargo metadata lists no forza-relay package")?;
    Ok(Metadata {
        root: text(&v["workspace_root"])
            .ok_or("no workspace_root")?
            .into(),
        target_dir: text(&v["target_directory"])
            .ok_or("no target_directory")?
            .into(),
        version: text(&package["version"]).ok_or("no version")?,
        description: text(&package["description"]).unwrap_or_default(),
        license: text(&package["license"]).unwrap_or_default(),
        repository: text(&package["repository"]),
    })
}

/// The facts every release file is made from.
pub struct Release {
    /// The repository's root (packaging/, the licences, config.example.toml).
    pub root: PathBuf,
    /// Cargo's target folder (each target's binary is in TRIPLE/release/).
    pub target_dir: PathBuf,
    /// Where the files go.
    pub out: PathBuf,
    /// X.Y.Z, without the `v` of the file names.
    pub version: String,
    pub description: String,
    pub license: String,
    /// The repository's address, when Cargo.toml has one.
    pub repository: Option<String>,
    /// Where the files will be downloaded from, without a trailing `/`.
    pub base_url: String,
    /// Seconds since 1970 given to every file in an archive: the same build
    /// makes the same bytes (SOURCE_DATE_EPOCH, else the last commit's time).
    pub stamp: u64,
}

/// The Windows starter's file name (src/bin/forza-relayw.rs).
pub const STARTER: &str = "forza-relayw.exe";

impl Release {
    /// A root file's bytes.
    pub fn read(&self, relative: &str) -> Result<Vec<u8>, String> {
        let path = self.root.join(relative);
        std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn dist(options: &Options) -> Result<(), String> {
    let started = Instant::now();
    let meta = metadata()?;
    let version = options.version.clone().unwrap_or(meta.version);
    check_version(&version)?;
    let (base_url, placeholder) = match (&options.base_url, &meta.repository) {
        (Some(url), _) => (url.trim_end_matches('/').to_owned(), false),
        (None, Some(repo)) => (
            format!(
                "{}/releases/download/v{version}",
                repo.trim_end_matches('/')
            ),
            false,
        ),
        (None, None) => (
            format!("https://github.com/OWNER/forza-relay/releases/download/v{version}"),
            true,
        ),
    };
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| meta.target_dir.join("dist"));
    let release = Release {
        stamp: stamp(&meta.root),
        root: meta.root,
        target_dir: meta.target_dir,
        out,
        version,
        description: meta.description,
        license: meta.license,
        repository: meta.repository,
        base_url,
    };

    let host = build::host()?;
    let targets = build::choose(&options.targets, &host, options.prebuilt)?;
    if targets.is_empty() {
        return Err("no target this computer can build: see the lines above".into());
    }
    if !options.prebuilt {
        if release.out.exists() {
            std::fs::remove_dir_all(&release.out)
                .map_err(|e| format!("emptying {}: {e}", release.out.display()))?;
        }
        build::build(&release.root, &targets, &host)?;
    }
    std::fs::create_dir_all(&release.out).map_err(|e| format!("{}: {e}", release.out.display()))?;

    for target in &targets {
        package::target(&release, target)?;
    }
    manifest::sums(&release)?;
    if placeholder {
        println!(
            "manifests: Cargo.toml has no `repository`: their URLs start with the placeholder \
             {} (--base-url sets it)",
            release.base_url
        );
    }
    manifest::scoop(&release)?;
    manifest::winget(&release)?;
    list(&release.out)?;
    println!("dist: done in {:.0?}", started.elapsed());
    Ok(())
}

/// A release version is X.Y.Z: the installer's ProductVersion can hold
/// nothing else (three numbers, the first two up to 255).
fn check_version(version: &str) -> Result<(), String> {
    let parts: Vec<&str> = version.split('.').collect();
    let numbers: Vec<u32> = parts.iter().filter_map(|p| p.parse().ok()).collect();
    let fits = numbers.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && numbers[0] <= 255
        && numbers[1] <= 255
        && numbers[2] <= 65535;
    if fits {
        Ok(())
    } else {
        Err(format!(
            "version {version:?}: a release is X.Y.Z (numbers; an MSI holds no pre-release part)"
        ))
    }
}

/// SOURCE_DATE_EPOCH, else the time of the last commit, else now.
fn stamp(root: &Path) -> u64 {
    let from_env = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let from_git = || {
        run_output(
            Command::new("git")
                .args(["log", "-1", "--format=%ct"])
                .current_dir(root),
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
    };
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    from_env.or_else(from_git).unwrap_or_else(now)
}

/// Prints each file made, with its size.
fn list(out: &Path) -> Result<(), String> {
    let mut files = files_under(out)?;
    files.sort();
    println!("in {}:", out.display());
    for file in files {
        let size = std::fs::metadata(&file).map_or(0, |m| m.len());
        let name = file.strip_prefix(out).unwrap_or(&file);
        println!("  {:>10}  {}", size, name.display());
    }
    Ok(())
}

/// Every file under `dir`, at any depth.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.is_dir() {
            files.extend(files_under(&path)?);
        } else {
            files.push(path);
        }
    }
    Ok(files)
}

/// The cargo that runs this task.
fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Runs `command`, failing with its standard error unless it succeeds.
fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", describe(command)))
    }
}

/// Runs `command` and returns its standard output, failing with its
/// standard error unless it succeeds.
fn run_output(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            describe(command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    String::from_utf8(output.stdout).map_err(|e| format!("{}: {e}", describe(command)))
}

fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `program` is on PATH (as `program.exe` on Windows too).
fn on_path(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        dir.join(program).is_file()
            || (cfg!(windows) && dir.join(format!("{program}.exe")).is_file())
    })
}

impl Release {
    /// A release file's name: `forza-relay-vX.Y.Z-SUFFIX`.
    pub fn file_name(&self, suffix: &str) -> String {
        format!("forza-relay-v{}-{suffix}", self.version)
    }

    /// Where `target`'s release binary is.
    pub fn binary(&self, target: &Target) -> PathBuf {
        self.target_dir
            .join(&target.triple)
            .join("release")
            .join(target.exe_name())
    }

    /// Where `target`'s Windows starter is (forza-relayw.exe, beside the
    /// program: what the shortcut and the login entry start).
    pub fn starter(&self, target: &Target) -> PathBuf {
        self.binary(target).with_file_name(STARTER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options_take_values_after_a_space_or_an_equals_sign() {
        let o = parse(&[
            "--target",
            "x86_64-pc-windows-gnu",
            "--target=aarch64-unknown-linux-musl",
            "--version",
            "1.2.3",
            "--base-url=https://example.com/r/",
            "--out",
            "x",
            "--prebuilt",
        ])
        .unwrap();
        assert_eq!(
            o,
            Options {
                targets: vec![
                    "x86_64-pc-windows-gnu".into(),
                    "aarch64-unknown-linux-musl".into()
                ],
                version: Some("1.2.3".into()),
                base_url: Some("https://example.com/r/".into()),
                out: Some("x".into()),
                prebuilt: true,
            }
        );
        assert!(parse(&["--target"])
            .unwrap_err()
            .starts_with("--target needs a value"));
        assert!(parse(&["--bogus"])
            .unwrap_err()
            .starts_with("unknown option --bogus"));
    }

    #[test]
    fn a_version_is_three_numbers_an_msi_can_hold() {
        for good in ["0.1.0", "1.2.3", "255.255.65535"] {
            assert_eq!(check_version(good), Ok(()), "{good}");
        }
        for bad in [
            "0.1",
            "0.1.0-rc.1",
            "1.2.3.4",
            "256.0.0",
            "0.256.0",
            "0.0.65536",
            "a.b.c",
            "1..2",
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }
}
