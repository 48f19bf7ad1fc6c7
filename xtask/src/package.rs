//! What each release file holds (docs/releasing.md lists them).
//!
//! - Windows: `forza-relay-vX.Y.Z-TRIPLE.zip` with every file at the top (a
//!   double-click on the program finds the `forza-relay.toml` beside it),
//!   and the MSI (`msi.rs`).
//! - Linux and macOS: `forza-relay-vX.Y.Z-TRIPLE.tar.gz`, one folder of the
//!   same files; on Linux also `forza-relay_X.Y.Z-1_ARCH.deb`.
//!
//! The `.deb` is written here rather than by `dpkg-deb`: the same code makes
//! it on any host the task runs on, with files owned by root and dated by the
//! stamp without fakeroot or a staging tree whose modes depend on the umask;
//! `dpkg -i` in `.ci/dist.sh` is what checks it.

use md5::{Digest as _, Md5};

use crate::archive::{self, Entry};
use crate::build::{Os, Target};
use crate::msi;
use crate::Release;

/// The Windows readme, for the person holding the zip.
const WINDOWS_README: &str = "packaging/windows/README.txt";
/// The Linux and macOS readme (archive and .deb).
const UNIX_README: &str = "packaging/unix/README.txt";
/// The systemd user unit the .deb installs, not enabled.
const UNIT: &str = "packaging/debian/forza-relay.service";
/// Who answers for the .deb. A placeholder until the repository is public
/// (docs/releasing.md); `.invalid` is a name no mail can reach.
const MAINTAINER: &str = "forza-relay maintainers <forza-relay@maintainers.invalid>";

/// Makes every release file of `target` from its built binary.
pub fn target(release: &Release, target: &Target) -> Result<(), String> {
    let binary_path = release.binary(target);
    let binary = std::fs::read(&binary_path).map_err(|e| {
        format!(
            "{}: {e} (built? --prebuilt takes binaries already built)",
            binary_path.display()
        )
    })?;
    match target.os() {
        Os::Windows => {
            let starter_path = release.starter(target);
            let starter = std::fs::read(&starter_path)
                .map_err(|e| format!("{}: {e}", starter_path.display()))?;
            let name = release.file_name(&format!("{}.zip", target.triple));
            archive::zip(
                &release.out.join(&name),
                &windows_files(release, binary.clone(), starter)?,
                release.stamp,
            )?;
            println!("made {name}");
            msi::make(release, target, &binary_path, &starter_path)?;
        }
        Os::Linux | Os::Other => {
            let folder = release.file_name(&target.triple);
            let name = format!("{folder}.tar.gz");
            let entries = unix_files(release, binary.clone())?
                .into_iter()
                .map(|e| Entry {
                    name: format!("{folder}/{}", e.name),
                    ..e
                })
                .collect::<Vec<_>>();
            archive::tar_gz(&release.out.join(&name), &entries, release.stamp)?;
            println!("made {name}");
            if target.os() == Os::Linux {
                match debian_arch(target.arch()) {
                    Some(arch) => deb(release, arch, binary)?,
                    None => println!(
                        "no .deb for {}: Debian has no name for its architecture here",
                        target.triple
                    ),
                }
            }
        }
    }
    Ok(())
}

/// The zip's files, all at the top.
fn windows_files(release: &Release, exe: Vec<u8>, starter: Vec<u8>) -> Result<Vec<Entry>, String> {
    Ok(vec![
        Entry::program("forza-relay.exe", exe),
        // What a shortcut or the login entry starts: the relay in the tray,
        // with no console window.
        Entry::program(crate::STARTER, starter),
        // The example, named as the program looks for it beside itself.
        Entry::file("forza-relay.toml", release.read("config.example.toml")?),
        Entry::file("README.txt", release.read(WINDOWS_README)?),
        // .txt: Windows opens them on a double-click.
        Entry::file("LICENSE-MIT.txt", release.read("LICENSE-MIT")?),
        Entry::file("LICENSE-APACHE.txt", release.read("LICENSE-APACHE")?),
    ])
}

/// The tar.gz's files, under its one folder.
fn unix_files(release: &Release, binary: Vec<u8>) -> Result<Vec<Entry>, String> {
    Ok(vec![
        Entry::program("forza-relay", binary),
        // Found beside the program, or in the folder it is run from.
        Entry::file("forza-relay.toml", release.read("config.example.toml")?),
        Entry::file("README.txt", release.read(UNIX_README)?),
        Entry::file("LICENSE-MIT", release.read("LICENSE-MIT")?),
        Entry::file("LICENSE-APACHE", release.read("LICENSE-APACHE")?),
    ])
}

/// Debian's name of a Rust architecture, where the .deb is made.
fn debian_arch(rust_arch: &str) -> Option<&'static str> {
    match rust_arch {
        "x86_64" => Some("amd64"),
        "aarch64" => Some("arm64"),
        _ => None,
    }
}

/// Debian's version of a release: X.Y.Z-1 (the first packaging of X.Y.Z).
fn debian_version(version: &str) -> String {
    format!("{version}-1")
}

/// The files the .deb installs. The example configuration is documentation:
/// each user copies it to ~/.config/forza-relay/forza-relay.toml, where the
/// unit reads it (packaging/unix/README.txt); nothing under /etc, as nothing
/// runs system-wide.
fn deb_files(release: &Release, binary: Vec<u8>) -> Result<Vec<Entry>, String> {
    let doc = "./usr/share/doc/forza-relay";
    Ok(vec![
        Entry::program("./usr/bin/forza-relay", binary),
        Entry::file(
            "./usr/lib/systemd/user/forza-relay.service",
            release.read(UNIT)?,
        ),
        Entry::file(
            &format!("{doc}/config.example.toml"),
            release.read("config.example.toml")?,
        ),
        Entry::file(&format!("{doc}/README.txt"), release.read(UNIX_README)?),
        Entry::file(
            &format!("{doc}/copyright"),
            copyright(&release.read("LICENSE-MIT")?).into_bytes(),
        ),
    ])
}

/// The .deb's copyright file, in Debian's machine-readable format: the MIT
/// text from LICENSE-MIT, the Apache one by its place on every Debian system.
fn copyright(mit: &[u8]) -> String {
    let mit = String::from_utf8_lossy(mit);
    // LICENSE-MIT's title line is the licence's name, given here by License:.
    let body = mit
        .trim()
        .strip_prefix("MIT License")
        .unwrap_or(&mit)
        .trim();
    let indented: String = body
        .lines()
        .map(|l| {
            if l.trim().is_empty() {
                " .\n".to_owned()
            } else {
                format!(" {l}\n")
            }
        })
        .collect();
    let holder = body
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("Copyright (c) ");
    format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: forza-relay\n\n\
         Files: *\nCopyright: {holder}\nLicense: MIT or Apache-2.0\n\n\
         License: MIT\n{indented}\n\
         License: Apache-2.0\n On Debian systems, the complete text of the Apache License, \
         Version 2.0, is in\n /usr/share/common-licenses/Apache-2.0.\n"
    )
}

/// The control file of the .deb. No Depends: the binary is static.
fn control(release: &Release, arch: &str, installed_kib: u64) -> String {
    let homepage = release
        .repository
        .as_deref()
        .map(|r| format!("Homepage: {r}\n"))
        .unwrap_or_default();
    format!(
        "Package: forza-relay\n\
         Version: {}\n\
         Architecture: {arch}\n\
         Maintainer: {MAINTAINER}\n\
         Installed-Size: {installed_kib}\n\
         Section: net\n\
         Priority: optional\n\
         {homepage}\
         Description: {}\n \
         The game sends its telemetry to one UDP port; forza-relay forwards every\n \
         packet to many tools at once (dashboards, motion rigs, loggers), each in\n \
         the Forza packet format it reads, and serves a page that shows the feed.\n \
         A systemd user unit is installed but not enabled: see\n \
         /usr/share/doc/forza-relay/README.txt.\n",
        debian_version(&release.version),
        summary(&release.description),
    )
}

/// The package's one-line summary: the description up to its first comma.
fn summary(description: &str) -> String {
    description
        .split(',')
        .next()
        .unwrap_or(description)
        .trim()
        .to_owned()
}

/// Writes `forza-relay_VERSION_ARCH.deb`.
fn deb(release: &Release, arch: &str, binary: Vec<u8>) -> Result<(), String> {
    let files = deb_files(release, binary)?;
    // dpkg counts each file in KiB, rounded up.
    let installed_kib = files
        .iter()
        .map(|f| (f.data.len() as u64).div_ceil(1024))
        .sum();
    let md5sums: String = files
        .iter()
        .map(|f| {
            let digest = Md5::digest(&f.data);
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}  {}\n", f.name.trim_start_matches("./"))
        })
        .collect();
    let control_tar = archive::tar_gz_bytes(
        &[
            Entry::file(
                "./control",
                control(release, arch, installed_kib).into_bytes(),
            ),
            Entry::file("./md5sums", md5sums.into_bytes()),
        ],
        release.stamp,
    )?;
    let data_tar = archive::tar_gz_bytes(&files, release.stamp)?;
    let name = format!(
        "forza-relay_{}_{arch}.deb",
        debian_version(&release.version)
    );
    archive::ar(
        &release.out.join(&name),
        &[
            ("debian-binary", b"2.0\n".to_vec()),
            ("control.tar.gz", control_tar),
            ("data.tar.gz", data_tar),
        ],
        release.stamp,
    )?;
    println!("made {name}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release() -> Release {
        Release {
            root: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .to_owned(),
            target_dir: "target".into(),
            out: "target/dist".into(),
            version: "1.2.3".into(),
            description:
                "Relay Forza \"Data Out\" UDP telemetry to many tools at once, translating".into(),
            license: "MIT OR Apache-2.0".into(),
            repository: None,
            base_url: "https://example.com/v1.2.3".into(),
            stamp: 0,
        }
    }

    #[test]
    fn the_zip_holds_the_program_its_configuration_the_readme_and_the_licences_at_the_top() {
        let names: Vec<String> = windows_files(&release(), b"MZ".to_vec(), b"MZ".to_vec())
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(
            names,
            [
                "forza-relay.exe",
                "forza-relayw.exe",
                "forza-relay.toml",
                "README.txt",
                "LICENSE-MIT.txt",
                "LICENSE-APACHE.txt"
            ]
        );
    }

    #[test]
    fn the_deb_installs_the_program_the_unit_and_the_documentation() {
        let files = deb_files(&release(), b"ELF".to_vec()).unwrap();
        let names: Vec<(&str, u32)> = files.iter().map(|e| (e.name.as_str(), e.mode)).collect();
        assert_eq!(
            names,
            [
                ("./usr/bin/forza-relay", 0o755),
                ("./usr/lib/systemd/user/forza-relay.service", 0o644),
                ("./usr/share/doc/forza-relay/config.example.toml", 0o644),
                ("./usr/share/doc/forza-relay/README.txt", 0o644),
                ("./usr/share/doc/forza-relay/copyright", 0o644),
            ]
        );
    }

    #[test]
    fn the_control_file_names_the_version_architecture_and_size() {
        let text = control(&release(), "arm64", 5321);
        let fields: Vec<&str> = text
            .lines()
            .take_while(|l| !l.starts_with("Description"))
            .collect();
        assert_eq!(
            fields,
            [
                "Package: forza-relay",
                "Version: 1.2.3-1",
                "Architecture: arm64",
                "Maintainer: forza-relay maintainers <forza-relay@maintainers.invalid>",
                "Installed-Size: 5321",
                "Section: net",
                "Priority: optional",
            ]
        );
        assert!(text.contains(
            "Description: Relay Forza \"Data Out\" UDP telemetry to many tools at once\n "
        ));
        // Every line of the long description is indented by one space.
        let long: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("Description"))
            .skip(1)
            .collect();
        assert!(
            long.len() >= 3
                && long
                    .iter()
                    .all(|l| l.starts_with(' ') && !l.trim().is_empty()),
            "{long:?}"
        );
        assert_eq!(debian_arch("x86_64"), Some("amd64"));
        assert_eq!(debian_arch("riscv64gc"), None);
    }

    #[test]
    fn the_copyright_file_quotes_license_mit_in_debian_s_format() {
        let text =
            copyright(b"MIT License\n\nCopyright (c) 2026 Us\n\nPermission is granted.\nAs is.\n");
        assert_eq!(
            text,
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
             Upstream-Name: forza-relay\n\n\
             Files: *\nCopyright: 2026 Us\nLicense: MIT or Apache-2.0\n\n\
             License: MIT\n Copyright (c) 2026 Us\n .\n Permission is granted.\n As is.\n\n\
             License: Apache-2.0\n On Debian systems, the complete text of the Apache License, \
             Version 2.0, is in\n /usr/share/common-licenses/Apache-2.0.\n"
        );
    }
}
