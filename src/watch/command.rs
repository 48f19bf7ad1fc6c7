//! The `watch`, `export` and `dissector` subcommands: their options turned once
//! into [`WatchOptions`] / [`ExportOptions`], the source opened (`--listen ADDR`,
//! or `--file CAPTURE [--port P]`: paced for `watch`, as fast as it reads for
//! `export`), errors turned into a message and an exit code (1: could not start
//! or failed, 2: a bad option or an unreadable capture).

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use log::{info, warn};

use super::columns::{self, Column};
use super::dashboard::{watch, WatchOptions};
use super::dissector;
use super::export::{export, ExportOptions, Table};
use super::source::{CaptureSource, Pace, Source, UdpSource};
use crate::cli::{DissectorArgs, ExportArgs, WatchArgs};
use crate::config::{parse_listen, Input, DEFAULT_LISTEN};

/// Why a subcommand failed: what to print, and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// 1: could not start or failed while running; 2: a bad option.
    pub code: u8,
    /// The message, naming the value at fault.
    pub message: String,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }

    fn start(message: impl Into<String>) -> Failure {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
}

fn listen_addr(text: Option<&str>) -> Result<SocketAddr, Failure> {
    match text {
        None => Ok(DEFAULT_LISTEN),
        Some(t) => parse_listen(t).map_err(|e| Failure::usage(format!("--listen: {e}"))),
    }
}

fn input(text: Option<&str>) -> Result<Input, Failure> {
    match text {
        None => Ok(Input::Auto),
        Some(t) => t
            .parse::<Input>()
            .map_err(|e| Failure::usage(format!("--format: {e}"))),
    }
}

fn bind(addr: SocketAddr) -> Result<UdpSource, Failure> {
    UdpSource::bind(addr).map_err(|e| {
        let hint = match e.kind() {
            io::ErrorKind::AddrInUse => format!(
                " (another program already uses port {}: forza-relay run, SimHub, another \
                 watch? Stop it, or watch a destination port of the relay instead)",
                addr.port()
            ),
            io::ErrorKind::AddrNotAvailable => {
                " (that IP is not an address of this computer; 0.0.0.0 means all of them)"
                    .to_owned()
            }
            _ => String::new(),
        };
        Failure::start(format!("cannot listen on {addr}: {e}{hint}"))
    })
}

/// The capture at `path`, its datagrams to `port` (or to its one port). A file
/// that cannot be read, or a port that cannot be picked, is a bad option (exit
/// 2, as for `replay`).
fn open_capture(path: &Path, port: Option<u16>, pace: Pace) -> Result<CaptureSource, Failure> {
    let source =
        CaptureSource::open(path, port, pace).map_err(|e| Failure::usage(e.to_string()))?;
    if let Some(cut) = source.truncated() {
        warn!("{cut}; reading the packets before the cut");
    }
    Ok(source)
}

/// The source of `--file CAPTURE [--port P]`, or of `--listen ADDR`.
fn open_source(
    listen: Option<&str>,
    file: Option<&Path>,
    port: Option<u16>,
    pace: Pace,
) -> Result<Box<dyn Source>, Failure> {
    let source: Box<dyn Source> = match file {
        Some(path) => Box::new(open_capture(path, port, pace)?),
        None => Box::new(bind(listen_addr(listen)?)?),
    };
    Ok(source)
}

/// A flag set by Ctrl-C, SIGTERM or the console closing.
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed)) {
        warn!("Ctrl-C may not stop cleanly: {e}");
    }
    stop
}

/// `forza-relay watch`.
pub fn watch_command(args: &WatchArgs) -> Result<(), Failure> {
    let options = WatchOptions {
        input: input(args.source.format.as_deref())?,
    };
    let mut source = open_source(
        args.source.listen.as_deref(),
        args.source.file.as_deref(),
        args.source.port,
        Pace::Recorded,
    )?;
    let stop = stop_flag();
    if !io::stdout().is_terminal() {
        // "listening on ADDR" (the port bound, for scripts) or "playing FILE (...)".
        info!("{}", source.describe());
    }
    watch(&mut *source, &options, &stop).map_err(|e| Failure::start(format!("watch stopped: {e}")))
}

/// The table format for `--as`, or guessed from the output file's extension.
fn table(arg: Option<&str>, output: &Path) -> Result<Table, Failure> {
    if let Some(t) = arg {
        return t.parse().map_err(Failure::usage);
    }
    let ext = output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    Ok(match ext.as_deref() {
        Some("jsonl" | "json" | "ndjson") => Table::Jsonl,
        _ => Table::Csv,
    })
}

/// `forza-relay export`.
pub fn export_command(args: &ExportArgs) -> Result<(), Failure> {
    let columns = match &args.fields {
        Some(spec) => columns::select(spec).map_err(|e| Failure::usage(e.to_string()))?,
        None => Column::all(),
    };
    let options = ExportOptions {
        input: input(args.source.format.as_deref())?,
        table: table(args.table.as_deref(), &args.output)?,
        columns,
        skip_not_racing: args.only_race_on,
    };
    // Opened before the output is created, so a bad capture or a port in use
    // leaves an existing output file alone.
    let mut source = open_source(
        args.source.listen.as_deref(),
        args.source.file.as_deref(),
        args.source.port,
        Pace::Fastest,
    )?;
    let to_stdout = args.output.as_os_str() == "-";
    let out: Box<dyn Write> = if to_stdout {
        Box::new(io::stdout().lock())
    } else {
        let file = File::create(&args.output)
            .map_err(|e| Failure::start(format!("cannot create {}: {e}", args.output.display())))?;
        Box::new(file)
    };
    let stop = stop_flag();
    info!("{}", source.describe());
    let target = if to_stdout {
        "standard output".to_owned()
    } else {
        args.output.display().to_string()
    };
    if args.source.file.is_some() {
        info!("writing to {target}");
    } else {
        info!("writing to {target}; press Ctrl-C to stop");
    }
    let summary = export(&mut *source, out, &options, &stop, |why| warn!("{why}"))
        .map_err(|e| Failure::start(format!("{e} ({target})")))?;
    info!("{summary} to {target}");
    Ok(())
}

/// `forza-relay dissector`.
pub fn dissector_command(args: &DissectorArgs) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    out.write_all(dissector::lua(args.port).as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure::start(format!("cannot write the dissector: {e}")))
}
