//! What describes the release files: `SHA256SUMS.txt` over them, and the
//! package managers' manifests filled with this build's version, addresses
//! and hashes, in folders of their own beside them:
//!
//! - `winget/`: the multi-file manifest (version, installer, default locale;
//!   schema 1.10.0, vendored in packaging/winget/schema/) of the MSI. The MSI
//!   rather than the zip: winget installs a zip's program in a folder of its
//!   own, and an upgrade replaces that folder, with the user's edited
//!   forza-relay.toml in it; the MSI keeps the configuration in the user's
//!   settings folder, and winget upgrades it by its codes.
//! - `scoop/forza-relay.json`: the zip, whose forza-relay.toml scoop keeps
//!   across updates (`persist`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::{msi, Release};

/// winget's identifier of the package (Publisher.Name). A placeholder until
/// the first submission to winget-pkgs fixes it for good (docs/releasing.md).
pub const WINGET_ID: &str = "forza-relay.forza-relay";
/// The manifest schema the winget files follow.
pub const WINGET_SCHEMA: &str = "1.10.0";
pub const SUMS: &str = "SHA256SUMS.txt";

/// The lower-case hex SHA-256 of a file.
pub fn sha256(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The release files: the files at the top of the folder, by name.
fn release_files(out: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(out).map_err(|e| format!("{}: {e}", out.display()))? {
        let path = entry.map_err(|e| format!("{}: {e}", out.display()))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        match name {
            Some(name) if path.is_file() && name != SUMS => files.push((name, path)),
            _ => {}
        }
    }
    files.sort();
    Ok(files)
}

/// Writes SHA256SUMS.txt over every release file, as `sha256sum` prints.
pub fn sums(release: &Release) -> Result<(), String> {
    let mut text = String::new();
    for (name, path) in release_files(&release.out)? {
        let _ = writeln!(text, "{}  {name}", sha256(&path)?);
    }
    let path = release.out.join(SUMS);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("made {SUMS}");
    Ok(())
}

/// The Windows zip in the folder, if one was made for this version.
fn windows_zip(release: &Release) -> Result<Option<(String, PathBuf)>, String> {
    let prefix = release.file_name("x86_64-pc-windows-");
    Ok(release_files(&release.out)?
        .into_iter()
        .find(|(name, _)| name.starts_with(&prefix) && name.ends_with(".zip")))
}

/// A JSON string literal.
fn json(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Writes scoop/forza-relay.json for the Windows zip, if there is one.
pub fn scoop(release: &Release) -> Result<(), String> {
    let Some((zip, path)) = windows_zip(release)? else {
        println!("no scoop manifest: no Windows zip");
        return Ok(());
    };
    let text = scoop_text(release, &zip, &sha256(&path)?);
    write_new(&release.out.join("scoop").join("forza-relay.json"), &text)?;
    println!("made scoop/forza-relay.json");
    Ok(())
}

fn scoop_text(release: &Release, zip: &str, hash: &str) -> String {
    // The version in the base address and the file name becomes scoop's
    // $version, for `autoupdate`.
    let url = format!("{}/{zip}", release.base_url);
    let pattern = url.replace(&release.version, "$version");
    let homepage = release.repository.clone().unwrap_or_else(|| {
        release
            .base_url
            .split("/releases/")
            .next()
            .unwrap_or(&release.base_url)
            .to_owned()
    });
    let checkver = if homepage.starts_with("https://github.com/") {
        format!("  \"checkver\": {{ \"github\": {} }},\n", json(&homepage))
    } else {
        String::new()
    };
    format!(
        "{{\n  \"version\": {},\n  \"description\": {},\n  \"homepage\": {},\n  \
         \"license\": {},\n  \"architecture\": {{\n    \"64bit\": {{\n      \
         \"url\": {},\n      \"hash\": {}\n    }}\n  }},\n  \
         \"bin\": \"forza-relay.exe\",\n  \
         \"shortcuts\": [[\"forza-relayw.exe\", \"forza-relay\"]],\n  \
         \"persist\": \"forza-relay.toml\",\n{checkver}  \
         \"autoupdate\": {{\n    \"architecture\": {{\n      \"64bit\": {{ \"url\": {} }}\n    }}\n  }}\n}}\n",
        json(&release.version),
        json(&release.description),
        json(&homepage),
        // scoop writes "either licence" with a |.
        json(&release.license.replace(" OR ", "|")),
        json(&url),
        json(hash),
        json(&pattern),
    )
}

/// A YAML string in single quotes (a ' doubled), so that nothing reads as
/// a number, a date or a boolean.
fn yaml(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Writes winget/WINGET_ID.yaml, .installer.yaml and .locale.en-US.yaml for
/// the MSI, if there is one (the codes are read back from it with msiinfo).
pub fn winget(release: &Release) -> Result<(), String> {
    let name = msi::file_name(&release.version);
    let path = release.out.join(&name);
    if !path.is_file() {
        println!("no winget manifest: no {name}");
        return Ok(());
    }
    let codes = Codes {
        product: msi::property(&path, "ProductCode")?,
        upgrade: msi::property(&path, "UpgradeCode")?,
    };
    let url = format!("{}/{name}", release.base_url);
    let hash = sha256(&path)?.to_ascii_uppercase();
    let dir = release.out.join("winget");
    for (suffix, text) in winget_texts(release, &codes, &url, &hash) {
        write_new(&dir.join(format!("{WINGET_ID}{suffix}")), &text)?;
    }
    println!("made winget/{WINGET_ID}.yaml, .installer.yaml, .locale.en-US.yaml");
    Ok(())
}

/// The MSI's codes, as winget matches an installed program to its package.
struct Codes {
    product: String,
    upgrade: String,
}

fn winget_texts(
    release: &Release,
    codes: &Codes,
    url: &str,
    hash: &str,
) -> [(&'static str, String); 3] {
    let head = |kind: &str| {
        format!(
            "# yaml-language-server: $schema=https://aka.ms/winget-manifest.{kind}.{WINGET_SCHEMA}.schema.json\n\
             # Made by `cargo xtask dist` (docs/releasing.md).\n\
             PackageIdentifier: {}\nPackageVersion: {}\n",
            yaml(WINGET_ID),
            yaml(&release.version)
        )
    };
    let tail = |kind: &str| format!("ManifestType: {kind}\nManifestVersion: {WINGET_SCHEMA}\n");
    let version = format!(
        "{}DefaultLocale: en-US\n{}",
        head("version"),
        tail("version")
    );
    let installer = format!(
        "{}InstallerLocale: en-US\nPlatform:\n- Windows.Desktop\nMinimumOSVersion: 10.0.0.0\n\
         InstallerType: msi\nScope: user\nInstallModes:\n- interactive\n- silent\n- silentWithProgress\n\
         UpgradeBehavior: install\nProductCode: {}\nAppsAndFeaturesEntries:\n- DisplayName: forza-relay\n  \
         Publisher: forza-relay\n  ProductCode: {}\n  UpgradeCode: {}\nInstallers:\n- Architecture: x64\n  \
         InstallerUrl: {}\n  InstallerSha256: {hash}\n{}",
        head("installer"),
        yaml(&codes.product),
        yaml(&codes.product),
        yaml(&codes.upgrade),
        yaml(url),
        tail("installer"),
    );
    let mut urls = String::new();
    if let Some(repo) = &release.repository {
        let _ = write!(
            urls,
            "PackageUrl: {}\nPublisherUrl: {}\nLicenseUrl: {}\n",
            yaml(repo),
            yaml(repo),
            yaml(&format!("{repo}#license"))
        );
    }
    let locale = format!(
        "{}PackageLocale: en-US\nPublisher: forza-relay\nPackageName: forza-relay\n{urls}\
         License: {}\nShortDescription: {}\nTags:\n- forza\n- telemetry\n- udp\n- simracing\n{}",
        head("defaultLocale"),
        yaml(&release.license),
        yaml(&release.description),
        tail("defaultLocale"),
    );
    [
        (".yaml", version),
        (".installer.yaml", installer),
        (".locale.en-US.yaml", locale),
    ]
}

/// Writes `text` to `path`, making its folder.
fn write_new(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(repository: Option<&str>) -> Release {
        Release {
            root: ".".into(),
            target_dir: "target".into(),
            out: "target/dist".into(),
            version: "1.2.3".into(),
            description: "Relay \"Data Out\" telemetry".into(),
            license: "MIT OR Apache-2.0".into(),
            repository: repository.map(str::to_owned),
            base_url: "https://github.com/o/forza-relay/releases/download/v1.2.3".into(),
            stamp: 0,
        }
    }

    #[test]
    fn the_scoop_manifest_is_json_with_this_build_s_url_hash_and_an_autoupdate_pattern() {
        let text = scoop_text(
            &release(None),
            "forza-relay-v1.2.3-x86_64-pc-windows-msvc.zip",
            "ab12",
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], "1.2.3");
        assert_eq!(v["description"], "Relay \"Data Out\" telemetry");
        assert_eq!(v["homepage"], "https://github.com/o/forza-relay");
        assert_eq!(v["license"], "MIT|Apache-2.0");
        assert_eq!(
            v["architecture"]["64bit"]["url"],
            "https://github.com/o/forza-relay/releases/download/v1.2.3/forza-relay-v1.2.3-x86_64-pc-windows-msvc.zip"
        );
        assert_eq!(v["architecture"]["64bit"]["hash"], "ab12");
        assert_eq!(v["bin"], "forza-relay.exe");
        assert_eq!(v["persist"], "forza-relay.toml");
        assert_eq!(v["checkver"]["github"], "https://github.com/o/forza-relay");
        assert_eq!(
            v["autoupdate"]["architecture"]["64bit"]["url"],
            "https://github.com/o/forza-relay/releases/download/v$version/forza-relay-v$version-x86_64-pc-windows-msvc.zip"
        );
    }

    #[test]
    fn winget_s_files_quote_every_value_and_name_the_msi_s_codes() {
        let codes = Codes {
            product: "{P}".into(),
            upgrade: "{U}".into(),
        };
        let [version, installer, locale] = winget_texts(
            &release(Some("https://github.com/o/forza-relay")),
            &codes,
            "https://x/f.msi",
            "AB",
        );
        assert_eq!(version.0, ".yaml");
        assert!(version.1.starts_with(
            "# yaml-language-server: $schema=https://aka.ms/winget-manifest.version.1.10.0.schema.json\n"
        ));
        assert!(version
            .1
            .contains("\nPackageIdentifier: 'forza-relay.forza-relay'\nPackageVersion: '1.2.3'\n"));
        assert!(version
            .1
            .ends_with("ManifestType: version\nManifestVersion: 1.10.0\n"));
        assert!(installer.1.contains("\nProductCode: '{P}'\n"));
        assert!(installer.1.contains("\n  UpgradeCode: '{U}'\n"));
        assert!(installer
            .1
            .contains("\n  InstallerUrl: 'https://x/f.msi'\n  InstallerSha256: AB\n"));
        assert!(installer.1.contains("\nScope: user\n"));
        assert!(locale.1.contains("\nLicense: 'MIT OR Apache-2.0'\n"));
        assert!(locale
            .1
            .contains("\nPackageUrl: 'https://github.com/o/forza-relay'\n"));
        assert_eq!(yaml("it's"), "'it''s'");
    }
}
