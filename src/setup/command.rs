//! The glue of `setup`, `doctor` and `autostart`: options in, text out, an
//! exit code back (0 done, 1 failed or a problem found, 2 bad input).

use std::io::{self, BufRead as _, IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::autostart::{self, Action, Launch};
use super::doctor::{self, Finding, Report};
use super::finder::{self, Proposal, Socket};
use super::running;
use super::tools;
use crate::config::{Config, Input, StatsFormat, DEFAULT_FILE_NAME, DEFAULT_LISTEN};
use crate::report::query::{self, Answer};

/// Options of `setup`.
#[derive(Debug, Clone, Default)]
pub struct SetupOptions {
    /// Write the proposed configuration to this file.
    pub write: Option<PathBuf>,
    /// Replace that file if it exists.
    pub force: bool,
    /// One JSON object per socket instead of the table and proposal.
    pub json: bool,
    /// Where the configuration `run` would use here listens: a running
    /// relay is looked for there too.
    pub config_listen: Option<SocketAddr>,
}

/// `forza-relay setup`: list the UDP sockets, mark the known tools, find the
/// forza-relay already running (it answers on its listening port), propose a
/// configuration from there, and write it when asked.
pub fn setup(options: &SetupOptions) -> u8 {
    let sockets = match finder::udp_sockets() {
        Ok(sockets) => sockets,
        Err(e) => {
            eprintln!("error: cannot list the UDP sockets of this computer: {e}");
            return 1;
        }
    };
    let relays = running_relays(&sockets, options.config_listen);
    let relay = relays.first();
    let proposal = finder::propose(&sockets, relay);
    let mut out = io::stdout().lock();
    let printed = if options.json {
        sockets
            .iter()
            .try_for_each(|s| writeln!(out, "{}", socket_json(s)))
    } else {
        write!(out, "{}", table(&sockets, relay))
            .and_then(|()| write!(out, "{}", proposal_text(&proposal, &relays)))
    };
    if printed.is_err() {
        // A closed reader (`| head`) has seen what it wanted.
        return 0;
    }
    drop(out);
    let target = match &options.write {
        Some(path) => Some(path.clone()),
        None if !options.json && relay.is_none_or(|r| r.config.path.is_none()) => {
            ask_to_write(&proposal)
        }
        None => None,
    };
    match target {
        Some(path) => match write_new(&path, &proposal.to_toml(), options.force) {
            Ok(()) => {
                eprintln!(
                    "wrote {}; check it with: forza-relay check --config {}",
                    path.display(),
                    path.display()
                );
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
        None => 0,
    }
}

/// `forza-relay web new-token` (issue 30): a new token for the page, kept in
/// the state folder; the old one opens nothing any more, in a running relay
/// too (it reads the file on every request). Prints where it is kept and the
/// page of each relay running that keeps it there. 0, or 1 when it can't be
/// written.
pub fn new_token() -> u8 {
    let file = match crate::state::TokenFile::of_user() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: cannot keep the page's token: {e}");
            return 1;
        }
    };
    if let Err(e) = file.renew() {
        eprintln!(
            "error: cannot write a new token to {}: {e}",
            file.path().display()
        );
        return 1;
    }
    let shown = file.path().display().to_string();
    println!(
        "A new token for the web page is kept in {shown}: every link with the old one opens \
         nothing any more."
    );
    let relays = finder::udp_sockets()
        .map(|sockets| running_relays(&sockets, None))
        .unwrap_or_default();
    let mut told = false;
    for relay in &relays {
        if relay.page_token_file.as_deref() != Some(shown.as_str()) {
            continue;
        }
        if let Some(link) = running::page_link(relay) {
            println!("The page of forza-relay (pid {}): {link}", relay.pid);
            told = true;
        }
    }
    // A relay that keeps its token elsewhere (FORZA_RELAY_STATE_DIR) keeps it.
    let elsewhere: Vec<String> = relays
        .iter()
        .filter(|r| {
            r.page_token_file
                .as_deref()
                .is_some_and(|f| f != shown.as_str())
        })
        .map(|r| format!("pid {}", r.pid))
        .collect();
    if !elsewhere.is_empty() {
        println!(
            "forza-relay ({}) keeps its token in another folder (FORZA_RELAY_STATE_DIR): its \
             link is unchanged; run this command with the same FORZA_RELAY_STATE_DIR for it.",
            elsewhere.join(", ")
        );
    }
    if !told {
        println!("A forza-relay started with this folder serves its page with it.");
    }
    0
}

/// The forza-relays running on this computer that answer (issue 23): asked
/// on the port of the configuration `run` would use, the default port, and
/// every port a process named forza-relay holds, at once, each for
/// [`running::ASK_TIMEOUT`] at most. The one on `config_listen` first.
fn running_relays(sockets: &[Socket], config_listen: Option<SocketAddr>) -> Vec<Answer> {
    let mut targets: Vec<SocketAddr> = Vec::new();
    let held = |addr: SocketAddr| sockets.iter().any(|s| finder::covers(s.addr, addr));
    for addr in config_listen.into_iter().chain([DEFAULT_LISTEN]) {
        if held(addr) {
            targets.push(query::target(addr));
        }
    }
    for s in sockets
        .iter()
        .filter(|s| finder::is_forza_relay(&s.process))
    {
        targets.push(query::target(s.addr));
    }
    targets.dedup();
    targets.truncate(MAX_ASKED);
    let answers: Vec<Answer> = std::thread::scope(|scope| {
        let asking: Vec<_> = targets
            .iter()
            .map(|&to| scope.spawn(move || query::ask(to, running::ASK_TIMEOUT).ok()))
            .collect();
        asking
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut unique: Vec<Answer> = Vec::new();
    for a in answers {
        if !unique
            .iter()
            .any(|u| u.pid == a.pid && u.listen == a.listen)
        {
            unique.push(a);
        }
    }
    unique
}

/// Where the forza-relay running on this computer listens, when one answers
/// (the one on the default port first): what `doctor` without a
/// configuration checks.
fn running_listen() -> Option<SocketAddr> {
    let sockets = finder::udp_sockets().ok()?;
    let relays = running_relays(&sockets, None);
    relays
        .iter()
        .find(|a| a.listen.port() == DEFAULT_LISTEN.port())
        .or(relays.first())
        .map(|a| a.listen)
}

/// Ports `setup` asks at most for a running relay.
const MAX_ASKED: usize = 16;

/// What `setup` says after the table: the running relay and what it sends
/// to, then the proposal, and how to use it.
fn proposal_text(proposal: &Proposal, relays: &[Answer]) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let Some(relay) = relays.first() else {
        let _ = write!(
            text,
            "\nProposed configuration:\n\n{}\nWrite it with `forza-relay setup --write \
             {DEFAULT_FILE_NAME}`; `forza-relay run` in this folder then uses it.\n",
            proposal.to_toml()
        );
        return text;
    };
    let _ = write!(
        text,
        "\nforza-relay {} is running on this computer (pid {}): it listens on {}",
        relay.version, relay.pid, relay.listen
    );
    if let Some(path) = &relay.config.path {
        let _ = write!(text, ", runs {path}");
    }
    if relay.destinations.is_empty() {
        text.push_str(", and forwards to nothing yet.\n");
    } else {
        text.push_str(", and forwards to:\n");
        for d in &relay.destinations {
            let _ = writeln!(
                text,
                "  {:<20} {:<24} {:<7} {}, {} sent",
                d.name,
                d.addr,
                d.output,
                serde_json::to_value(d.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                d.sent
            );
        }
    }
    for other in &relays[1..] {
        let _ = writeln!(
            text,
            "Another forza-relay runs too (pid {}), listening on {}.",
            other.pid, other.listen
        );
    }
    match &relay.config.path {
        Some(path) if proposal.destinations.is_empty() => {
            let _ = write!(
                text,
                "\nEvery tool found here is one of its destinations already; {path} is its \
                 configuration.\n{}",
                proposal.new_destinations_toml()
            );
        }
        Some(path) => {
            let _ = write!(
                text,
                "\nTools found that it does not forward to yet. Add these to {path} (it applies \
                 the file when it is saved), or add them on its page{}:\n{}",
                match running::page_link(relay) {
                    Some(link) => format!(", {link}"),
                    None => String::new(),
                },
                proposal.new_destinations_toml()
            );
        }
        None => {
            let _ = write!(
                text,
                "\nIt runs without a configuration file. Proposed configuration, what it runs \
                 and the tools found:\n\n{}\nWrite it with `forza-relay setup --write \
                 {DEFAULT_FILE_NAME}`, then start the relay again with `forza-relay run \
                 --config {DEFAULT_FILE_NAME}`.\n",
                proposal.to_toml()
            );
        }
    }
    text
}

/// One socket as `setup --json` prints it.
pub fn socket_json(s: &Socket) -> String {
    serde_json::json!({
        "addr": s.addr.ip().to_string(),
        "port": s.addr.port(),
        "pid": s.pid,
        "process": s.process,
        "tool": s.tool().map(|t| t.id.as_str()),
    })
    .to_string()
}

/// The sockets as a table, with the tool each one is, or may be, and the
/// running relay's listening socket. The running relay's other sockets (one
/// per destination it sends from, and its wake-up) are one line under it, not
/// a row each (issue 30: seven "forza-relay" rows beside a relay of six
/// destinations).
fn table(sockets: &[Socket], relay: Option<&Answer>) -> String {
    use std::fmt::Write as _;
    let (own, listed): (Vec<&Socket>, Vec<&Socket>) = sockets
        .iter()
        .partition(|s| relay.is_some_and(|r| r.pid == s.pid && r.listen.port() != s.addr.port()));
    let mut text = format!(
        "UDP sockets on this computer ({}):\n  {:<40} {:>5} {:>7}  {:<20} TOOL\n",
        listed.len(),
        "ADDRESS",
        "PORT",
        "PID",
        "PROCESS"
    );
    for s in listed {
        let listening = relay.is_some_and(|r| r.pid == s.pid && r.listen.port() == s.addr.port());
        let tool = match s.tool() {
            _ if listening => "forza-relay, listening (running)".to_owned(),
            _ if finder::is_forza_relay(&s.process) => "forza-relay".to_owned(),
            Some(t) => t.name.clone(),
            None => {
                let maybe: Vec<&str> = tools::by_port(s.addr.port())
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect();
                if maybe.is_empty() {
                    String::new()
                } else {
                    format!("? the default port of {}", maybe.join(", "))
                }
            }
        };
        let _ = writeln!(
            text,
            "  {:<40} {:>5} {:>7}  {:<20} {tool}",
            s.addr.ip().to_string(),
            s.addr.port(),
            s.pid,
            s.process
        );
    }
    if let (Some(r), n @ 1..) = (relay, own.len()) {
        let _ = writeln!(
            text,
            "  (and {n} more of the running forza-relay's (pid {}): the sockets it sends \
             from, not listed)",
            r.pid
        );
    }
    text
}

/// On a terminal, offers to write the proposal to forza-relay.toml here when
/// that file doesn't exist. Without a terminal it never asks.
fn ask_to_write(proposal: &Proposal) -> Option<PathBuf> {
    let path = PathBuf::from(DEFAULT_FILE_NAME);
    if proposal.destinations.is_empty()
        || path.exists()
        || !io::stdin().is_terminal()
        || !io::stderr().is_terminal()
    {
        return None;
    }
    eprint!("Write it to {}? [y/N] ", path.display());
    let _ = io::stderr().flush();
    let mut answer = String::new();
    io::stdin().lock().read_line(&mut answer).ok()?;
    answer.trim().eq_ignore_ascii_case("y").then_some(path)
}

/// Writes `text` to `path`, refusing to replace a file unless `force`, and
/// saying so when `path` is a folder.
fn write_new(path: &Path, text: &str, force: bool) -> io::Result<()> {
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!(
                "{} is a folder: name the file to write, e.g. --write {}",
                path.display(),
                path.join(DEFAULT_FILE_NAME).display()
            ),
        ));
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => io::Error::new(
            e.kind(),
            format!("{} exists: add --force to replace it", path.display()),
        ),
        _ => io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())),
    })?;
    file.write_all(text.as_bytes())
}

/// Options of `doctor`.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// How long to wait for datagrams.
    pub wait: Duration,
    /// Print one JSON object instead of lines.
    pub json: bool,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        DoctorOptions {
            wait: doctor::DEFAULT_WAIT,
            json: false,
        }
    }
}

/// `--wait SECONDS`: non-negative and finite.
pub fn wait_seconds(seconds: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("{seconds} is not a number of seconds (0 or more)"))
}

/// `forza-relay doctor` for the configuration `run` would use (`None` when
/// there is none): 0 when all is well, 1 for a problem.
pub fn doctor(config: Option<Config>, options: &DoctorOptions) -> u8 {
    let given = config.is_some();
    let (config, first) = match config {
        Some(config) => {
            let origin = Finding::ok("configuration", format!("configuration: {}", config.origin));
            (config, origin)
        }
        None => (
            Config {
                // The forza-relay running here, on whatever port it listens,
                // is the one to check; the default port without one.
                listen: running_listen().unwrap_or(DEFAULT_LISTEN),
                ..default_config()
            },
            Finding::problem(
                "configuration",
                format!(
                    "no configuration: no --config, no --to, and no {DEFAULT_FILE_NAME} here or \
                     next to the program; checking the default listen address {DEFAULT_LISTEN}"
                ),
                format!("forza-relay setup --write {DEFAULT_FILE_NAME}"),
            ),
        ),
    };
    // The relay found running, if any: without a configuration here, what
    // doctor checks is what that relay runs, which is no problem.
    let mut running: Option<(u32, SocketAddr, Option<String>)> = None;
    // On stderr in both modes: a script reading the JSON waits for this line
    // before sending.
    let report = doctor::diagnose(&config, options.wait, &mut |listen, relay| match relay {
        None => eprintln!(
            "waiting up to {} s for datagrams on {listen} (drive in the game now) ...",
            options.wait.as_secs_f64()
        ),
        Some(answer) => {
            running = Some((answer.pid, answer.listen, answer.config.path.clone()));
            eprintln!(
                "forza-relay (pid {}) listens on {listen}: watching what it receives for up \
                 to {} s (drive in the game now){} ...",
                answer.pid,
                options.wait.as_secs_f64(),
                match running::page_link(answer) {
                    Some(link) => format!("; its page: {link}"),
                    None => String::new(),
                }
            );
        }
    });
    let first = match running {
        Some((pid, listen, path)) if !given => Finding::ok(
            "configuration",
            format!(
                "no configuration here (no --config, no --to, no {DEFAULT_FILE_NAME}): doctor \
                 checks the forza-relay running on this computer (pid {pid}, listening on \
                 {listen}), which runs {}",
                match path {
                    Some(path) => format!("from {path}"),
                    None => "without a configuration file".to_owned(),
                }
            ),
        ),
        _ => first,
    };
    let report = Report::new(std::iter::once(first).chain(report.checks).collect());
    print_report(&report, options.json);
    if report.ok {
        0
    } else {
        1
    }
}

fn print_report(report: &Report, json: bool) {
    let mut out = io::stdout().lock();
    let _ = if json {
        writeln!(out, "{}", report.to_json())
    } else {
        writeln!(out, "{report}")
    };
}

/// What `doctor` checks when there is no configuration: the default listen
/// address and no destination.
fn default_config() -> Config {
    Config {
        origin: "defaults".to_owned(),
        listen: DEFAULT_LISTEN,
        listen_place: "default".to_owned(),
        input: Input::Auto,
        allow: Vec::new(),
        stats_interval: None,
        stats_format: StatsFormat::Text,
        destinations: Vec::new(),
        record: None,
        races: None,
        web: None,
    }
}

/// Options of `autostart`.
#[derive(Debug, Clone)]
pub struct AutostartOptions {
    /// on, off or status.
    pub action: Action,
    /// With `on`: the configuration to run.
    pub config: Option<PathBuf>,
}

/// `forza-relay autostart on|off|status`.
pub fn autostart(options: &AutostartOptions) -> u8 {
    let result = match options.action {
        Action::On => {
            let Some(config) = &options.config else {
                eprintln!(
                    "error: autostart on needs a configuration: --config FILE, or a \
                     {DEFAULT_FILE_NAME} here or next to the program"
                );
                return 2;
            };
            match Launch::new(config) {
                Ok(launch) => autostart::on(&launch, autostart::Start::Now),
                Err(e) => {
                    eprintln!("error: --config {e}");
                    return 2;
                }
            }
        }
        Action::Off => autostart::off(),
        Action::Status => autostart::status(),
    };
    match result {
        Ok(lines) => {
            let mut out = io::stdout().lock();
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socket(addr: &str, pid: u32, process: &str) -> Socket {
        Socket {
            addr: addr.parse().expect("an address"),
            pid,
            process: process.to_owned(),
        }
    }

    /// Issue 30: the running relay's own sending sockets were a row each.
    #[test]
    fn the_running_relays_own_sockets_are_one_line_not_a_row_each() {
        let relay: Answer = serde_json::from_value(serde_json::json!({
            "program": "forza-relay", "version": "0.1.0", "pid": 700,
            "listen": "127.0.0.1:5400", "elapsed_s": 3.0,
            "input": {"expects": "fh6", "received": 0, "malformed": 0, "disallowed": 0,
                      "format": null, "format_guessed": false, "senders": []},
            "destinations": [], "config": {"path": null, "error": null}
        }))
        .expect("an answer");
        let sockets = [
            socket("127.0.0.1:5400", 700, "forza-relay"),
            socket("0.0.0.0:8000", 900, "SimHubWPF.exe"),
            socket("127.0.0.1:55134", 700, "forza-relay"),
            socket("127.0.0.1:59122", 700, "forza-relay"),
            socket("127.0.0.1:59218", 700, "forza-relay"),
            socket("127.0.0.1:41000", 701, "forza-relay"),
        ];
        let text = table(&sockets, Some(&relay));
        let rows: Vec<&str> = text.lines().skip(2).collect();
        assert_eq!(rows.len(), 4, "{text}");
        assert!(
            text.starts_with("UDP sockets on this computer (3):"),
            "{text}"
        );
        assert!(rows[0].contains("5400") && rows[0].ends_with("forza-relay, listening (running)"));
        assert!(rows[1].contains("8000") && rows[1].contains("SimHubWPF.exe"));
        // Another forza-relay (a `watch`, a `simulate`) keeps its row.
        assert!(rows[2].contains("41000") && rows[2].ends_with("forza-relay"));
        assert_eq!(
            rows[3],
            "  (and 3 more of the running forza-relay's (pid 700): the sockets it sends from, \
             not listed)"
        );
        // With no relay running, every socket is a row.
        assert_eq!(table(&sockets, None).lines().count(), 2 + 6);
    }
}
