//! Linux, macOS and the rest: no loopback isolation, and the firewall (when
//! there is one) is the user's own tool to read: `doctor` has nothing to add.

use std::net::SocketAddr;

use super::doctor::Finding;

/// No checks beyond the portable ones.
pub fn checks(_listen: SocketAddr) -> Vec<Finding> {
    Vec::new()
}

/// The process that `pid`, as the socket listing gives it, belongs to: on Linux
/// the listing may name a thread of a process (one in /proc/PID/task), whose
/// process id is the Tgid in its status. Elsewhere `pid` as it is.
pub fn process_id(pid: u32) -> u32 {
    if !cfg!(target_os = "linux") {
        return pid;
    }
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:")?.trim().parse().ok())
        })
        .unwrap_or(pid)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_thread_is_named_by_its_process() {
        let id = std::process::id();
        assert_eq!(super::process_id(id), id);
        // A thread of this process, asked while it runs: its own id in
        // /proc/self/task.
        let (tid, of) = std::thread::spawn(|| {
            let tid = std::fs::read_link("/proc/thread-self")
                .ok()
                .and_then(|p| p.file_name()?.to_str()?.parse::<u32>().ok())
                .expect("a thread id");
            (tid, super::process_id(tid))
        })
        .join()
        .expect("the thread");
        assert_ne!(tid, id);
        assert_eq!(of, id);
    }
}
