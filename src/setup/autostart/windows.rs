//! Windows: a value named `forza-relay` under the current user's Run key,
//! `HKCU\Software\Microsoft\Windows\CurrentVersion\Run`, which Windows starts
//! at login. Only that one value is written or deleted, through `winreg` (no
//! unsafe code of ours).

use std::io;

use winreg::enums::{HKEY_CURRENT_USER, KEY_QUERY_VALUE, KEY_SET_VALUE};
use winreg::RegKey;

use super::{run_value, Launch, Start, Written, NAME};

/// The Run key, under HKEY_CURRENT_USER.
pub const RUN_KEY: &str = r"Software\Microsoft\Windows\CurrentVersion\Run";

/// Opens (creating if needed) `subkey` of HKEY_CURRENT_USER.
fn open(subkey: &str) -> io::Result<RegKey> {
    RegKey::predef(HKEY_CURRENT_USER)
        .create_subkey_with_flags(subkey, KEY_SET_VALUE | KEY_QUERY_VALUE)
        .map(|(key, _)| key)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open HKCU\\{subkey}: {e}")))
}

/// Writes the Run value under `subkey` (the Run key, or another for tests).
pub fn on_at(subkey: &str, launch: &Launch) -> io::Result<Vec<String>> {
    let value = run_value(launch);
    open(subkey)?
        .set_value(NAME, &value)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot write the value {NAME}: {e}")))?;
    let written = Written {
        place: format!("HKEY_CURRENT_USER\\{subkey}\\{NAME}"),
        contents: value,
    };
    Ok(vec![
        written.to_string(),
        if launch.exe.ends_with(super::WINDOWS_STARTER) {
            "it starts at the next login, in the tray, with no console window".to_owned()
        } else {
            "it starts at the next login, in a console window".to_owned()
        },
    ])
}

/// Deletes the Run value under `subkey`.
pub fn off_at(subkey: &str) -> io::Result<Vec<String>> {
    Ok(vec![match open(subkey)?.delete_value(NAME) {
        Ok(()) => format!("removed HKEY_CURRENT_USER\\{subkey}\\{NAME}"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            "off: forza-relay was not set to start at login".to_owned()
        }
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot delete the value {NAME}: {e}"),
            ))
        }
    }])
}

/// Reads the Run value under `subkey`.
pub fn status_at(subkey: &str) -> io::Result<Vec<String>> {
    Ok(vec![match open(subkey)?.get_value::<String, _>(NAME) {
        Ok(command) => {
            format!("on: HKEY_CURRENT_USER\\{subkey}\\{NAME} starts at login: {command}")
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            "off: forza-relay does not start at login".to_owned()
        }
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot read the value {NAME}: {e}"),
            ))
        }
    }])
}

/// Writes the Run value: the relay starts at the next login.
pub fn on(launch: &Launch, _start: Start) -> io::Result<Vec<String>> {
    on_at(RUN_KEY, launch)
}

/// Deletes the Run value.
pub fn off() -> io::Result<Vec<String>> {
    off_at(RUN_KEY)
}

/// Reads the Run value.
pub fn status() -> io::Result<Vec<String>> {
    status_at(RUN_KEY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_is_written_read_and_deleted_under_a_test_key() {
        let key = r"Software\forza-relay-tests\Run";
        let launch = Launch {
            exe: r"C:\Program Files\forza-relay\forza-relay.exe".into(),
            config: r"C:\Users\sam\forza-relay.toml".into(),
        };
        let said = on_at(key, &launch).expect("written");
        assert!(said[0].contains(&run_value(&launch)), "{said:?}");
        let status = status_at(key).expect("read");
        assert_eq!(
            status,
            [format!(
                "on: HKEY_CURRENT_USER\\{key}\\forza-relay starts at login: {}",
                run_value(&launch)
            )]
        );
        assert_eq!(
            off_at(key).expect("deleted")[0],
            format!("removed HKEY_CURRENT_USER\\{key}\\forza-relay")
        );
        assert!(status_at(key).expect("read")[0].starts_with("off:"));
    }
}
