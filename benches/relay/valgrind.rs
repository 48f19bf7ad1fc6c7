//! A peer run under valgrind, for counts that do not depend on the machine's
//! load (issue 26): instructions and simulated cache misses per packet from
//! callgrind, and the distinct cache lines each wake-up touches from lackey's
//! trace of every access.
//!
//! Callgrind counts from the start; its counters are zeroed after the warm-up
//! (`callgrind_control -z`) and dumped after the measured traffic
//! (`callgrind_control -d`), so start-up and shutdown are left out. Lackey
//! cannot be zeroed: its trace is read between the lengths the file had when
//! the measured traffic started and when it settled, and cut into wake-ups at
//! each entry to libc's receive functions (`recvmmsg`, `recvfrom`, …), whose
//! addresses in the traced process come from its `/proc/PID/maps` and `nm -D`.
//!
//! What valgrind cannot see: the kernel (system calls are the same for every
//! relay; see the syscall section) and the vDSO, which valgrind keeps from its
//! guest, so a clock read is counted as glibc's `clock_gettime` making the
//! system call (about 10 instructions) where natively it is the vDSO's code
//! (a few dozen more) and no system call. Clock reads are counted apart.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long `callgrind_control -d` may take to leave its file, and lackey's
/// trace to stop growing.
const DUMP_TIMEOUT: Duration = Duration::from_secs(30);
/// A lackey trace that has not grown for this long is complete.
const TRACE_QUIET: Duration = Duration::from_millis(500);

/// The libc functions a relay receives with: each entry starts a wake-up.
const RECEIVES: [&str; 4] = ["recvmmsg", "recvfrom", "recvmsg", "recv"];
/// forza-relay's own receive on Linux (src/net/recv/linux.rs): one `recvmmsg`
/// made through glibc's `syscall`, never inlined, so its entry starts a
/// wake-up as a libc receive's does, and each call is one `syscall` that is
/// not a send.
const OWN_RECEIVE: &str = "forza_relay::net::recv::imp::recvmmsg";
/// The libc functions a relay sends with (`syscall`: forza-relay's sends on
/// Linux, past glibc's cancellation bookkeeping; nothing else calls it per
/// packet).
const SENDS: [&str; 5] = ["send", "sendto", "sendmsg", "sendmmsg", "syscall"];
/// The clock read (natively through the vDSO).
const CLOCKS: [&str; 2] = ["clock_gettime", "__clock_gettime"];

/// Which valgrind tool, writing into which folder.
#[derive(Debug, Clone)]
pub enum Tool {
    /// Instructions by function, calls, simulated cache misses.
    Callgrind(PathBuf),
    /// Every access, for the lines touched per wake-up.
    Lackey(PathBuf),
}

impl Tool {
    /// Whether valgrind and its `callgrind_control` are installed.
    pub fn available() -> Result<(), String> {
        let runs = |program: &str, arg: &str| {
            Command::new(program)
                .arg(arg)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !runs("valgrind", "--version") {
            return Err("valgrind not installed (`apt-get install valgrind`)".to_owned());
        }
        if !runs("callgrind_control", "--version") {
            return Err("callgrind_control not found (it comes with valgrind)".to_owned());
        }
        Ok(())
    }

    fn dir(&self) -> &Path {
        match self {
            Tool::Callgrind(d) | Tool::Lackey(d) => d,
        }
    }

    /// `cmd` run under this tool.
    pub fn wrap(&self, cmd: &Command) -> Command {
        let _ = fs::remove_dir_all(self.dir());
        let _ = fs::create_dir_all(self.dir());
        let mut wrapped = Command::new("valgrind");
        wrapped.arg("-q");
        match self {
            Tool::Callgrind(dir) => {
                wrapped
                    .args(["--tool=callgrind", "--cache-sim=yes"])
                    .arg(format!("--callgrind-out-file={}/cg", dir.display()));
            }
            Tool::Lackey(dir) => {
                wrapped
                    .args(["--tool=lackey", "--trace-mem=yes"])
                    .arg(format!("--log-file={}/trace", dir.display()));
            }
        }
        wrapped.arg(cmd.get_program()).args(cmd.get_args());
        wrapped
    }

    /// The measured traffic starts: zero callgrind's counters, or note where
    /// lackey's trace is and where the receive functions are.
    pub fn begin(&self, pid: u32) -> Result<Mark, String> {
        match self {
            Tool::Callgrind(_) => {
                control(pid, "-z")?;
                Ok(Mark::default())
            }
            Tool::Lackey(dir) => Ok(Mark {
                receives: receive_entries(pid)?,
                trace_from: trace_len(dir),
                trace_to: 0,
            }),
        }
    }

    /// The measured traffic has settled: dump callgrind's counters, or note
    /// where lackey's trace ends. Read with [`Tool::read`] once the peer stopped.
    pub fn end(&self, pid: u32, mark: &mut Mark) -> Result<(), String> {
        match self {
            Tool::Callgrind(_) => control(pid, "-d"),
            Tool::Lackey(dir) => {
                // The traced relay may still be catching up after the
                // receivers settled: the trace ends when it stops growing.
                let deadline = Instant::now() + DUMP_TIMEOUT;
                let mut len = trace_len(dir);
                while Instant::now() < deadline {
                    thread::sleep(TRACE_QUIET);
                    let now = trace_len(dir);
                    if now == len {
                        break;
                    }
                    len = now;
                }
                mark.trace_to = len;
                Ok(())
            }
        }
    }

    /// What was counted between [`Tool::begin`] and [`Tool::end`].
    pub fn read(&self, mark: &Mark) -> Result<Counted, String> {
        match self {
            Tool::Callgrind(dir) => {
                let path = wait_for_dump(dir)?;
                let text = fs::read_to_string(&path)
                    .map_err(|e| format!("read {}: {e}", path.display()))?;
                Ok(Counted::Calls(Callgrind::parse(&text)?))
            }
            Tool::Lackey(dir) => Ok(Counted::Lines(Lines::read(&dir.join("trace"), mark)?)),
        }
    }

    /// Removes what the run left (traces are tens of MB).
    pub fn clean(&self) {
        let _ = fs::remove_dir_all(self.dir());
    }
}

/// Where the measured traffic starts and ends in a lackey trace, and the
/// addresses that start a wake-up.
#[derive(Debug, Clone, Default)]
pub struct Mark {
    receives: HashSet<u64>,
    trace_from: u64,
    trace_to: u64,
}

/// What a run under valgrind counted.
#[derive(Debug, Clone)]
pub enum Counted {
    Calls(Callgrind),
    Lines(Lines),
}

fn control(pid: u32, flag: &str) -> Result<(), String> {
    let out = Command::new("callgrind_control")
        .arg(flag)
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("callgrind_control {flag}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "callgrind_control {flag} {pid} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The first dump `callgrind_control -d` wrote (`cg.1`).
fn wait_for_dump(dir: &Path) -> Result<PathBuf, String> {
    let path = dir.join("cg.1");
    let deadline = Instant::now() + DUMP_TIMEOUT;
    while Instant::now() < deadline {
        if path.is_file() {
            return Ok(path);
        }
        thread::sleep(Duration::from_millis(50));
    }
    Err(format!("no callgrind dump at {}", path.display()))
}

fn trace_len(dir: &Path) -> u64 {
    fs::metadata(dir.join("trace")).map_or(0, |m| m.len())
}

/// Where the traced process's receive functions start: libc's (its load
/// address in `/proc/PID/maps` plus each symbol's offset, `nm -D`) and
/// forza-relay's own ([`OWN_RECEIVE`], in the program's symbol table).
fn receive_entries(pid: u32) -> Result<HashSet<u64>, String> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("read /proc/{pid}/maps: {e}"))?;
    // Each object's load address: where its first page (offset 0) is.
    let mut objects: Vec<(u64, String)> = Vec::new();
    for line in maps.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(range), Some(offset), Some(path)) = (cols.first(), cols.get(2), cols.get(5))
        else {
            continue;
        };
        let start = range
            .split('-')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok());
        if let (Some(start), Ok(0)) = (start, u64::from_str_radix(offset, 16)) {
            // Valgrind's own tool and preloads are not the guest's code.
            if path.starts_with('/')
                && !path.contains("valgrind")
                && !objects.iter().any(|(_, p)| p == path)
            {
                objects.push((start, (*path).to_owned()));
            }
        }
    }
    let mut entries = HashSet::new();
    for (start, path) in &objects {
        let is_libc = path
            .rsplit('/')
            .next()
            .is_some_and(|n| n.starts_with("libc.so"));
        let (flags, names): (&[&str], &[&str]) = if is_libc {
            (&["-D", "--defined-only"], &RECEIVES)
        } else {
            (&["-C", "--defined-only"], &[OWN_RECEIVE])
        };
        // A position-dependent program's symbols are addresses already.
        let base = if is_position_dependent(path) {
            0
        } else {
            *start
        };
        let out = Command::new("nm")
            .args(flags)
            .arg(path)
            .output()
            .map_err(|e| format!("nm {path}: {e}"))?;
        entries.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|line| {
                    let (offset, rest) = line.split_once(' ')?;
                    let offset = u64::from_str_radix(offset, 16).ok()?;
                    let name = rest.split_once(' ')?.1.split('@').next()?;
                    names.contains(&name).then_some(base + offset)
                }),
        );
    }
    if entries.is_empty() {
        return Err("no receive function in the traced process's symbols".to_owned());
    }
    Ok(entries)
}

/// True for an ELF file of type `ET_EXEC` (not position-independent).
fn is_position_dependent(path: &str) -> bool {
    let mut header = [0u8; 18];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| &header[..4] == b"\x7fELF" && header[16] == 2)
}

/// One callgrind dump: every function's own cost (not its callees'), and how
/// often each function was called.
#[derive(Debug, Clone, Default)]
pub struct Callgrind {
    /// The events counted, in the file's order (`Ir`, `I1mr`, …).
    pub events: Vec<String>,
    /// (object, function) → its own cost per event.
    pub own: HashMap<(String, String), Vec<u64>>,
    /// Function → calls to it.
    pub calls: HashMap<String, u64>,
}

impl Callgrind {
    /// Reads callgrind's format: name compression (`fn=(12) name`, then
    /// `fn=(12)`), a cost line per position whose first columns are positions,
    /// and after `calls=` a line holding the call's inclusive cost, which is
    /// the callee's, not this function's.
    pub fn parse(text: &str) -> Result<Callgrind, String> {
        let mut out = Callgrind::default();
        let mut positions = 1;
        let mut names: [HashMap<String, String>; 3] = Default::default();
        let (mut object, mut function, mut callee) = (String::new(), String::new(), String::new());
        let mut inclusive_next = false;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("events:") {
                out.events = rest.split_whitespace().map(str::to_owned).collect();
                continue;
            }
            if let Some(rest) = line.strip_prefix("positions:") {
                positions = rest.split_whitespace().count().max(1);
                continue;
            }
            if let Some((key, value)) = line.split_once('=') {
                let space = match key {
                    "ob" | "cob" => Some(0),
                    "fl" | "fi" | "fe" | "cfi" | "cfl" => Some(1),
                    "fn" | "cfn" => Some(2),
                    _ => None,
                };
                if let Some(space) = space {
                    let name = expand(&mut names[space], value);
                    match key {
                        "ob" => object = name,
                        "fn" => function = name,
                        "cfn" => callee = name,
                        _ => {}
                    }
                    continue;
                }
                if key == "calls" {
                    let n: u64 = value
                        .split_whitespace()
                        .next()
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| format!("a calls line without a count: {line}"))?;
                    *out.calls.entry(callee.clone()).or_default() += n;
                    inclusive_next = true;
                    continue;
                }
            }
            let first = line.as_bytes().first().copied();
            if !matches!(first, Some(b'0'..=b'9' | b'+' | b'-' | b'*')) {
                continue;
            }
            if std::mem::take(&mut inclusive_next) {
                continue;
            }
            let cost = out
                .own
                .entry((object.clone(), function.clone()))
                .or_insert_with(|| vec![0; out.events.len()]);
            for (slot, v) in cost.iter_mut().zip(line.split_whitespace().skip(positions)) {
                *slot += v.parse::<u64>().unwrap_or(0);
            }
        }
        if out.events.is_empty() {
            return Err("no events line: not a callgrind file".to_owned());
        }
        Ok(out)
    }

    /// The column of `event`.
    fn column(&self, event: &str) -> Option<usize> {
        self.events.iter().position(|e| e == event)
    }

    /// `event` summed over every function.
    pub fn total(&self, event: &str) -> Option<u64> {
        let c = self.column(event)?;
        Some(self.own.values().map(|v| v[c]).sum())
    }

    /// Functions by their own `event`, most first: (function, object, count).
    pub fn top(&self, event: &str, n: usize) -> Vec<(String, String, u64)> {
        let Some(c) = self.column(event) else {
            return Vec::new();
        };
        let mut all: Vec<(String, String, u64)> = self
            .own
            .iter()
            .map(|((ob, f), v)| (f.clone(), ob.clone(), v[c]))
            .collect();
        all.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }

    /// Calls to the libc functions named (a name's `@VERSION` left out).
    fn calls_to(&self, names: &[&str]) -> u64 {
        self.calls
            .iter()
            .filter(|(f, _)| names.contains(&f.split('@').next().unwrap_or(f)))
            .map(|(_, n)| n)
            .sum()
    }

    /// Receive calls (each a wake-up at the game's rate).
    pub fn receives(&self) -> u64 {
        self.calls_to(&RECEIVES) + self.calls_to(&[OWN_RECEIVE])
    }

    /// Send calls: forza-relay's receives each make a `syscall` too.
    pub fn sends(&self) -> u64 {
        self.calls_to(&SENDS)
            .saturating_sub(self.calls_to(&[OWN_RECEIVE]))
    }

    /// Clock reads.
    pub fn clock_reads(&self) -> u64 {
        self.calls_to(&CLOCKS)
    }
}

/// A compressed name: `(id) name` defines it, `(id)` repeats it.
fn expand(names: &mut HashMap<String, String>, value: &str) -> String {
    let Some(rest) = value.strip_prefix('(') else {
        return value.to_owned();
    };
    let Some((id, name)) = rest.split_once(')') else {
        return value.to_owned();
    };
    let name = name.trim_start();
    if name.is_empty() {
        names.get(id).cloned().unwrap_or_default()
    } else {
        names.insert(id.to_owned(), name.to_owned());
        name.to_owned()
    }
}

/// The 64-byte lines each wake-up touched, from a lackey trace.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    /// Per wake-up (from one receive's entry to the next): distinct lines of
    /// code and of data.
    pub code: Vec<usize>,
    pub data: Vec<usize>,
}

impl Lines {
    /// Reads `trace` from `mark.trace_from` to `mark.trace_to`; the stretches
    /// before the first receive and after the last are left out.
    fn read(trace: &Path, mark: &Mark) -> Result<Lines, String> {
        let mut file =
            fs::File::open(trace).map_err(|e| format!("open {}: {e}", trace.display()))?;
        file.seek(SeekFrom::Start(mark.trace_from))
            .map_err(|e| format!("seek in {}: {e}", trace.display()))?;
        let reader = BufReader::new(file.take(mark.trace_to.saturating_sub(mark.trace_from)));
        let mut lines = Lines::default();
        let (mut code, mut data) = (HashSet::new(), HashSet::new());
        let mut started = false;
        // The first line may be cut: `mark.trace_from` can fall within it.
        for line in reader.lines().skip(1) {
            let line = line.map_err(|e| format!("read {}: {e}", trace.display()))?;
            let Some((kind, addr, size)) = access(&line) else {
                continue;
            };
            if kind == b'I' && mark.receives.contains(&addr) {
                if started {
                    lines.code.push(code.len());
                    lines.data.push(data.len());
                }
                started = true;
                code.clear();
                data.clear();
            }
            let set = if kind == b'I' { &mut code } else { &mut data };
            set.insert(addr >> 6);
            set.insert((addr + size.max(1) - 1) >> 6);
        }
        Ok(lines)
    }
}

/// One line of lackey's trace: `I  0401a2c,3` or ` L 1ffefff8a8,8` (also `S`,
/// `M`): the kind, address and size.
fn access(line: &str) -> Option<(u8, u64, u64)> {
    let b = line.as_bytes();
    let kind = match (b.first()?, b.get(1)?) {
        (b'I', _) => b'I',
        (b' ', k @ (b'L' | b'S' | b'M')) => *k,
        _ => return None,
    };
    let (addr, size) = line.get(2..)?.trim_start().split_once(',')?;
    Some((
        kind,
        u64::from_str_radix(addr, 16).ok()?,
        size.trim().parse().ok()?,
    ))
}
