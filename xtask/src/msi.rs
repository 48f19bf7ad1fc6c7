//! The Windows installer, `forza-relay-vX.Y.Z-x86_64.msi`, made by wixl
//! (Debian's `wixl`, of msitools) from `packaging/windows/forza-relay.wxs`,
//! which says what it installs and why.
//!
//! wixl reads a subset of WiX 3 and ignores the rest with a warning. What it
//! ignores and the installer needs is set afterwards with msitools' `msibuild`
//! and checked with `msiinfo`: the configuration component's Permanent and
//! NeverOverwrite attributes (an uninstall leaves the user's configuration,
//! an upgrade never replaces it).
//!
//! The ProductCode is new for each version (a major upgrade needs that) and
//! the same for the same version: it is derived from the version, so the
//! winget manifest can name it before anyone installs the file.

use std::path::Path;
use std::process::Command;

use sha2::{Digest as _, Sha256};

use crate::build::Target;
use crate::{on_path, run_output, Release};

pub const WXS: &str = "packaging/windows/forza-relay.wxs";

/// The component that holds the user's configuration (its Id in the .wxs).
const CONFIG_COMPONENT: &str = "UserConfiguration";
/// msidbComponentAttributesPermanent | msidbComponentAttributesNeverOverwrite.
const KEEP: u32 = 16 | 128;

/// The installer's file name for a version.
pub fn file_name(version: &str) -> String {
    format!("forza-relay-v{version}-x86_64.msi")
}

/// Makes the MSI of `target`'s `exe`, or says in one line why this host can't.
pub fn make(release: &Release, target: &Target, exe: &Path, starter: &Path) -> Result<(), String> {
    if target.arch() != "x86_64" {
        println!("no MSI for {}: the installer is x86_64's", target.triple);
        return Ok(());
    }
    if let Some(tool) = ["wixl", "msibuild", "msiinfo"]
        .into_iter()
        .find(|t| !on_path(t))
    {
        println!(
            "skipping the MSI: no {tool} here (Debian: apt-get install wixl msitools); \
             the release workflow makes it on Linux from this program"
        );
        return Ok(());
    }
    let name = file_name(&release.version);
    let out = release.out.join(&name);
    // wixl finds a Source only by a path relative to the folder it runs in.
    let stage = release.target_dir.join("xtask-msi");
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage).map_err(|e| format!("{}: {e}", stage.display()))?;
    let copy = |from: &Path, to: &str| {
        std::fs::copy(from, stage.join(to))
            .map(drop)
            .map_err(|e| format!("{} to {}: {e}", from.display(), stage.display()))
    };
    copy(exe, "forza-relay.exe")?;
    copy(starter, crate::STARTER)?;
    copy(
        &release.root.join("config.example.toml"),
        "forza-relay.toml",
    )?;
    copy(&release.root.join("LICENSE-MIT"), "LICENSE-MIT.txt")?;
    copy(&release.root.join("LICENSE-APACHE"), "LICENSE-APACHE.txt")?;
    let wixl = Command::new("wixl")
        .args(["--arch", "x64", "-D"])
        .arg(format!("Version={}", release.version))
        .arg("-D")
        .arg(format!("ProductCode={}", product_code(&release.version)))
        .arg("-o")
        .arg(std::path::absolute(&out).map_err(|e| format!("{}: {e}", out.display()))?)
        .arg(release.root.join(WXS))
        .current_dir(&stage)
        .output()
        .map_err(|e| format!("wixl: {e}"))?;
    let _ = std::fs::remove_dir_all(&stage);
    // Its warnings of the two attributes it ignores are expected (set below).
    for line in String::from_utf8_lossy(&wixl.stderr).lines() {
        let known = line.contains("no property named 'Permanent'")
            || line.contains("no property named 'NeverOverwrite'");
        if !known && !line.trim().is_empty() {
            eprintln!("wixl: {line}");
        }
    }
    if !wixl.status.success() {
        return Err(format!("wixl failed ({}) on {WXS}", wixl.status));
    }
    keep_the_configuration(&out)?;
    println!("made {name}");
    Ok(())
}

/// Sets [`KEEP`] on the configuration's component and checks it holds.
fn keep_the_configuration(msi: &Path) -> Result<(), String> {
    let attributes = || -> Result<u32, String> {
        let table = run_output(
            Command::new("msiinfo")
                .arg("export")
                .arg(msi)
                .arg("Component"),
        )?;
        table_rows(&table)
            .into_iter()
            .find(|row| row.first().map(String::as_str) == Some(CONFIG_COMPONENT))
            .and_then(|row| row.get(3).and_then(|a| a.parse().ok()))
            .ok_or_else(|| {
                format!(
                    "{}: no component {CONFIG_COMPONENT} in {WXS}",
                    msi.display()
                )
            })
    };
    let wanted = attributes()? | KEEP;
    run_output(Command::new("msibuild").arg(msi).arg("-q").arg(format!(
        "UPDATE `Component` SET `Attributes` = {wanted} WHERE `Component` = '{CONFIG_COMPONENT}'"
    )))?;
    match attributes()? {
        got if got == wanted => Ok(()),
        got => Err(format!(
            "{}: component {CONFIG_COMPONENT} has attributes {got} after msibuild, not {wanted}",
            msi.display()
        )),
    }
}

/// The rows of a table as `msiinfo export` prints it: a line of column
/// names, one of types, one naming the table, then a row a line, tab-separated.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip(3)
        .map(|line| {
            line.trim_end_matches('\r')
                .split('\t')
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// An MSI's property (ProductCode, UpgradeCode, ProductVersion …).
pub fn property(msi: &Path, name: &str) -> Result<String, String> {
    let table = run_output(
        Command::new("msiinfo")
            .arg("export")
            .arg(msi)
            .arg("Property"),
    )?;
    table_rows(&table)
        .into_iter()
        .find(|row| row.first().map(String::as_str) == Some(name))
        .and_then(|row| row.get(1).cloned())
        .ok_or_else(|| format!("{}: no property {name}", msi.display()))
}

/// The ProductCode of a version: a GUID from the SHA-256 of the version,
/// marked as RFC 9562's version 8 (a GUID of the maker's own design).
pub fn product_code(version: &str) -> String {
    let digest = Sha256::digest(format!("forza-relay MSI ProductCode {version}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
    format!(
        "{{{}-{}-{}-{}-{}}}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_s_product_code_is_a_guid_of_its_own_that_never_changes() {
        let code = product_code("0.1.0");
        assert_eq!(code, product_code("0.1.0"));
        assert_ne!(code, product_code("0.1.1"));
        assert_eq!(code.len(), 38);
        let groups: Vec<usize> = code
            .trim_matches(['{', '}'])
            .split('-')
            .map(str::len)
            .collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert!(code[1..37]
            .chars()
            .all(|c| c == '-' || c.is_ascii_digit() || c.is_ascii_uppercase()));
        assert_eq!(&code[15..16], "8", "version 8: {code}");
        assert!("89AB".contains(&code[20..21]), "variant: {code}");
    }

    #[test]
    fn msiinfo_s_tables_are_read_from_their_fourth_line() {
        let text =
            "Property\tValue\ns72\tl0\nProperty\tProperty\nProductCode\t{X}\r\nUpgradeCode\t{Y}\n";
        assert_eq!(
            table_rows(text),
            [
                vec!["ProductCode".to_owned(), "{X}".to_owned()],
                vec!["UpgradeCode".to_owned(), "{Y}".to_owned()]
            ]
        );
    }
}
