//! Writing the archives: zip (Windows), tar.gz (Linux, macOS, a .deb's
//! members) and ar (the .deb itself). Every file is dated [`Release::stamp`]
//! and owned by root, so the same inputs make the same bytes on any host.
//!
//! [`Release::stamp`]: crate::Release::stamp

use std::io::Write as _;
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;

/// A file to put in an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its path inside the archive, `/`-separated.
    pub name: String,
    pub data: Vec<u8>,
    /// Unix permissions: 0o755 for a program, 0o644 for the rest.
    pub mode: u32,
}

impl Entry {
    pub fn file(name: &str, data: Vec<u8>) -> Self {
        Entry {
            name: name.to_owned(),
            data,
            mode: 0o644,
        }
    }

    pub fn program(name: &str, data: Vec<u8>) -> Self {
        Entry {
            mode: 0o755,
            ..Entry::file(name, data)
        }
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// A zip of `entries`, deflated, each at the top unless its name has a folder.
pub fn zip(path: &Path, entries: &[Entry], stamp: u64) -> Result<(), String> {
    write(path, &zip_bytes(entries, stamp)?)
}

fn zip_bytes(entries: &[Entry], stamp: u64) -> Result<Vec<u8>, String> {
    use zip::write::SimpleFileOptions;
    let (year, month, day, hour, minute, second) = civil(stamp);
    // A zip's dates start in 1980 and are local times without a zone: the UTC
    // time of the stamp, as tar's are.
    let time = zip::DateTime::from_date_and_time(
        year.clamp(1980, 2107) as u16,
        month,
        day,
        hour,
        minute,
        second,
    )
    .map_err(|e| format!("zip date {year}-{month}-{day}: {e}"))?;
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for entry in entries {
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(time)
            // Unix modes (a program executable when unzipped on Linux), and
            // the same "made by" byte whatever host writes it.
            .system(zip::System::Unix)
            .unix_permissions(entry.mode);
        writer
            .start_file(entry.name.as_str(), options)
            .and_then(|()| writer.write_all(&entry.data).map_err(Into::into))
            .map_err(|e| format!("zip {}: {e}", entry.name))?;
    }
    let cursor = writer.finish().map_err(|e| format!("zip: {e}"))?;
    Ok(cursor.into_inner())
}

/// A gzipped tar of `entries`, each folder of theirs written before them.
pub fn tar_gz(path: &Path, entries: &[Entry], stamp: u64) -> Result<(), String> {
    write(path, &tar_gz_bytes(entries, stamp)?)
}

pub fn tar_gz_bytes(entries: &[Entry], stamp: u64) -> Result<Vec<u8>, String> {
    let tar = tar_bytes(entries, stamp).map_err(|e| format!("tar: {e}"))?;
    // The gzip header's own time stays 0: the tar inside holds the dates.
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(&tar).map_err(|e| format!("gzip: {e}"))?;
    gz.finish().map_err(|e| format!("gzip: {e}"))
}

fn tar_bytes(entries: &[Entry], stamp: u64) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut folders: Vec<String> = Vec::new();
    let mut append = |name: &str, data: &[u8], mode: u32, kind: tar::EntryType| {
        let mut header = tar::Header::new_gnu();
        // The name as given, "./" and all (dpkg-deb's own members start so);
        // the tar crate's set_path would drop the "./".
        let field = &mut header.as_old_mut().name;
        if name.len() >= field.len() {
            return Err(std::io::Error::other(format!(
                "tar name {name:?} is too long"
            )));
        }
        field[..name.len()].copy_from_slice(name.as_bytes());
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_entry_type(kind);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(stamp);
        header.set_username("root")?;
        header.set_groupname("root")?;
        header.set_cksum();
        builder.append(&header, data)
    };
    for entry in entries {
        // "./usr/bin/x" makes "./", "./usr/" and "./usr/bin/" first.
        let parts: Vec<&str> = entry.name.split('/').collect();
        for depth in 1..parts.len() {
            let folder = format!("{}/", parts[..depth].join("/"));
            if !folders.contains(&folder) {
                append(&folder, &[], 0o755, tar::EntryType::Directory)?;
                folders.push(folder);
            }
        }
        append(
            &entry.name,
            &entry.data,
            entry.mode,
            tar::EntryType::Regular,
        )?;
    }
    builder.into_inner()
}

/// An ar archive of `members` (name, bytes), as dpkg reads a .deb.
pub fn ar(path: &Path, members: &[(&str, Vec<u8>)], stamp: u64) -> Result<(), String> {
    write(path, &ar_bytes(members, stamp)?)
}

pub fn ar_bytes(members: &[(&str, Vec<u8>)], stamp: u64) -> Result<Vec<u8>, String> {
    let mut out = b"!<arch>\n".to_vec();
    for (name, data) in members {
        // The common ar header: name (16), date (12), owner (6), group (6),
        // mode in octal (8), size (10), then "`\n". Names up to 15 bytes, as
        // dpkg-deb writes them (no "/" terminator).
        if name.len() > 15 {
            return Err(format!("ar member name {name:?} is longer than 15 bytes"));
        }
        let header = format!(
            "{name:<16}{stamp:<12}{:<6}{:<6}{:<8o}{:<10}`\n",
            0,
            0,
            0o100644,
            data.len()
        );
        debug_assert_eq!(header.len(), 60);
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    Ok(out)
}

/// (year, month, day, hour, minute, second) in UTC of `secs` since 1970
/// (the civil-from-days algorithm of Howard Hinnant's date library).
pub fn civil(secs: u64) -> (i64, u8, u8, u8, u8, u8) {
    let days = (secs / 86_400) as i64;
    let rest = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        (rest / 3600) as u8,
        (rest % 3600 / 60) as u8,
        (rest % 60) as u8,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_of_known_instants() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        // 2000-02-29 12:34:56 UTC, a leap day.
        assert_eq!(civil(951_827_696), (2000, 2, 29, 12, 34, 56));
        // 2026-12-31 23:59:59 UTC.
        assert_eq!(civil(1_798_761_599), (2026, 12, 31, 23, 59, 59));
    }

    #[test]
    fn an_ar_member_has_its_60_byte_header_and_is_padded_to_an_even_length() {
        let bytes = ar_bytes(
            &[
                ("debian-binary", b"2.0\n".to_vec()),
                ("odd", b"abc".to_vec()),
            ],
            7,
        )
        .unwrap();
        let mut expected = b"!<arch>\n".to_vec();
        expected.extend_from_slice(
            b"debian-binary   7           0     0     100644  4         `\n2.0\n",
        );
        expected.extend_from_slice(
            b"odd             7           0     0     100644  3         `\nabc\n",
        );
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            String::from_utf8_lossy(&expected)
        );
        assert!(ar_bytes(&[("a-name-of-16-byt", Vec::new())], 0).is_err());
    }

    #[test]
    fn the_same_entries_make_the_same_bytes() {
        let entries = [
            Entry::program("./usr/bin/x", b"#!/bin/sh\n".to_vec()),
            Entry::file("./usr/share/doc/x/README", b"hi\n".to_vec()),
        ];
        assert_eq!(
            tar_gz_bytes(&entries, 1).unwrap(),
            tar_gz_bytes(&entries, 1).unwrap()
        );
        assert_eq!(
            zip_bytes(&entries, 1_000_000_000).unwrap(),
            zip_bytes(&entries, 1_000_000_000).unwrap()
        );
    }

    #[test]
    fn a_tar_holds_each_folder_once_then_the_files_owned_by_root() {
        let entries = [
            Entry::program("./usr/bin/x", b"12".to_vec()),
            Entry::file("./usr/lib/y", b"3".to_vec()),
        ];
        let tar = tar_bytes(&entries, 42).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let seen: Vec<(String, u32, u64, u64, u64)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                let path = String::from_utf8_lossy(&e.path_bytes()).into_owned();
                (
                    path,
                    h.mode().unwrap(),
                    h.uid().unwrap(),
                    h.mtime().unwrap(),
                    h.size().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("./".into(), 0o755, 0, 42, 0),
                ("./usr/".into(), 0o755, 0, 42, 0),
                ("./usr/bin/".into(), 0o755, 0, 42, 0),
                ("./usr/bin/x".into(), 0o755, 0, 42, 2),
                ("./usr/lib/".into(), 0o755, 0, 42, 0),
                ("./usr/lib/y".into(), 0o644, 0, 42, 1),
            ]
        );
    }
}
