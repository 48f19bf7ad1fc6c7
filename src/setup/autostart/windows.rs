//! Windows: a value named `forza-relay` under the current user's Run key,
//! `HKCU\Software\Microsoft\Windows\CurrentVersion\Run`, which Windows starts
//! at login. Only that one value is written or deleted.

use std::io;

use windows_sys::Win32::Foundation::{ERROR_FILE_NOT_FOUND, ERROR_SUCCESS};
use windows_sys::Win32::System::Registry::{
    RegCloseKey, RegCreateKeyExW, RegDeleteValueW, RegQueryValueExW, RegSetValueExW, HKEY,
    HKEY_CURRENT_USER, KEY_QUERY_VALUE, KEY_SET_VALUE, REG_OPTION_NON_VOLATILE, REG_SZ,
};

use super::{run_value, Launch, Written, NAME};

/// The Run key, under HKEY_CURRENT_USER.
pub const RUN_KEY: &str = r"Software\Microsoft\Windows\CurrentVersion\Run";

fn wide(text: &str) -> Vec<u16> {
    text.encode_utf16().chain(std::iter::once(0)).collect()
}

fn error(code: u32, what: &str) -> io::Error {
    let e = io::Error::from_raw_os_error(code as i32);
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// An open registry key, closed on drop.
struct Key(HKEY);

impl Key {
    /// Opens (creating if needed) `subkey` of HKEY_CURRENT_USER.
    fn open(subkey: &str) -> io::Result<Key> {
        let name = wide(subkey);
        let mut key: HKEY = std::ptr::null_mut();
        // SAFETY: `name` is a NUL-terminated UTF-16 string that outlives the
        // call; `key` is a valid out pointer; no security attributes, no
        // disposition wanted.
        let rc = unsafe {
            RegCreateKeyExW(
                HKEY_CURRENT_USER,
                name.as_ptr(),
                0,
                std::ptr::null(),
                REG_OPTION_NON_VOLATILE,
                KEY_SET_VALUE | KEY_QUERY_VALUE,
                std::ptr::null(),
                &mut key,
                std::ptr::null_mut(),
            )
        };
        if rc != ERROR_SUCCESS {
            return Err(error(rc, &format!("cannot open HKCU\\{subkey}")));
        }
        Ok(Key(key))
    }

    fn set(&self, value: &str, data: &str) -> io::Result<()> {
        let (name, data) = (wide(value), wide(data));
        // SAFETY: the key is open; name and data are NUL-terminated UTF-16
        // buffers that outlive the call; the size is data's, in bytes, with
        // its terminator, as REG_SZ asks.
        let rc = unsafe {
            RegSetValueExW(
                self.0,
                name.as_ptr(),
                0,
                REG_SZ,
                data.as_ptr().cast(),
                (data.len() * 2) as u32,
            )
        };
        if rc != ERROR_SUCCESS {
            return Err(error(rc, &format!("cannot write the value {value}")));
        }
        Ok(())
    }

    /// `Ok(false)` when there was no such value.
    fn delete(&self, value: &str) -> io::Result<bool> {
        let name = wide(value);
        // SAFETY: the key is open; name is NUL-terminated and outlives the call.
        let rc = unsafe { RegDeleteValueW(self.0, name.as_ptr()) };
        match rc {
            ERROR_SUCCESS => Ok(true),
            ERROR_FILE_NOT_FOUND => Ok(false),
            _ => Err(error(rc, &format!("cannot delete the value {value}"))),
        }
    }

    fn get(&self, value: &str) -> io::Result<Option<String>> {
        let name = wide(value);
        let mut kind = 0u32;
        let mut size = 0u32;
        // SAFETY: the key is open; name is NUL-terminated; a null data pointer
        // asks only for the size, written to `size`.
        let rc = unsafe {
            RegQueryValueExW(
                self.0,
                name.as_ptr(),
                std::ptr::null(),
                &mut kind,
                std::ptr::null_mut(),
                &mut size,
            )
        };
        match rc {
            ERROR_SUCCESS => {}
            ERROR_FILE_NOT_FOUND => return Ok(None),
            _ => return Err(error(rc, &format!("cannot read the value {value}"))),
        }
        let mut data = vec![0u16; (size as usize).div_ceil(2)];
        let mut size = (data.len() * 2) as u32;
        // SAFETY: as above, with `data` a writable buffer of `size` bytes.
        let rc = unsafe {
            RegQueryValueExW(
                self.0,
                name.as_ptr(),
                std::ptr::null(),
                &mut kind,
                data.as_mut_ptr().cast(),
                &mut size,
            )
        };
        if rc != ERROR_SUCCESS {
            return Err(error(rc, &format!("cannot read the value {value}")));
        }
        let text = String::from_utf16_lossy(&data);
        Ok(Some(text.trim_end_matches('\0').to_owned()))
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        // SAFETY: the key was opened by RegCreateKeyExW and is closed once.
        unsafe { RegCloseKey(self.0) };
    }
}

/// Writes the Run value under `subkey` (the Run key, or another for tests).
pub fn on_at(subkey: &str, launch: &Launch) -> io::Result<Vec<String>> {
    let value = run_value(launch);
    Key::open(subkey)?.set(NAME, &value)?;
    let written = Written {
        place: format!("HKEY_CURRENT_USER\\{subkey}\\{NAME}"),
        contents: value,
    };
    Ok(vec![
        written.to_string(),
        "it starts at the next login, in a console window".to_owned(),
    ])
}

/// Deletes the Run value under `subkey`.
pub fn off_at(subkey: &str) -> io::Result<Vec<String>> {
    Ok(vec![if Key::open(subkey)?.delete(NAME)? {
        format!("removed HKEY_CURRENT_USER\\{subkey}\\{NAME}")
    } else {
        "off: forza-relay was not set to start at login".to_owned()
    }])
}

/// Reads the Run value under `subkey`.
pub fn status_at(subkey: &str) -> io::Result<Vec<String>> {
    Ok(vec![match Key::open(subkey)?.get(NAME)? {
        Some(command) => {
            format!("on: HKEY_CURRENT_USER\\{subkey}\\{NAME} starts at login: {command}")
        }
        None => "off: forza-relay does not start at login".to_owned(),
    }])
}

/// Writes the Run value.
pub fn on(launch: &Launch) -> io::Result<Vec<String>> {
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
