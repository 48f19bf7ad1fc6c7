//! The `watch`, `export` and `dissector` subcommands: their options, as typed
//! ([`WatchCommand`], [`ExportCommand`]), turned once into [`WatchOptions`] /
//! [`ExportOptions`], the source opened (`--listen ADDR`, or `--file CAPTURE
//! [--port P]`: paced for `watch`, as fast as it reads for `export`), errors
//! turned into a [`Failure`] (1: could not start or failed, 2: a bad option or
//! an unreadable capture). Each stops on the program's [`Signals`].

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use log::{info, warn};

use crate::app::{to_stdout, Failure, Signals};
use crate::config::{parse_listen, Input, DEFAULT_LISTEN};
use crate::dashboard::{watch, WatchOptions};
use crate::dissector;
use crate::export::{export, ExportError, ExportOptions, Table};
use crate::relay::StartError;
use crate::setup::running::Beside;
use crate::telemetry::columns::{self, Column};
use crate::view::source::{CaptureSource, Pace, Source, UdpSource};

/// Where `watch` and `export` read packets from, and as what, as typed.
#[derive(Debug, Clone, Default)]
pub struct SourceOptions {
    /// `--listen ADDR` (the default address when neither it nor a file is given).
    pub listen: Option<String>,
    /// `--file CAPTURE`.
    pub file: Option<PathBuf>,
    /// `--port P`: which stream of the capture.
    pub port: Option<u16>,
    /// `--format`: the input format (auto when `None`).
    pub format: Option<String>,
}

/// What `watch` is asked.
#[derive(Debug, Clone, Default)]
pub struct WatchCommand {
    /// Where the packets come from.
    pub source: SourceOptions,
}

/// What `export` is asked.
#[derive(Debug, Clone, Default)]
pub struct ExportCommand {
    /// Where the packets come from.
    pub source: SourceOptions,
    /// The file to write, `-` for standard output.
    pub output: PathBuf,
    /// `--as csv|jsonl` (from the output's extension when `None`).
    pub table: Option<String>,
    /// `--fields A,B,C` (every column when `None`).
    pub fields: Option<String>,
    /// `--only-race-on`.
    pub only_race_on: bool,
}

fn listen_addr(text: Option<&str>, file: Option<SocketAddr>) -> Result<SocketAddr, Failure> {
    match text {
        None => Ok(file.unwrap_or(DEFAULT_LISTEN)),
        Some(t) => parse_listen(t).map_err(|e| Failure::usage(format!("--listen: {e}"))),
    }
}

fn input(text: Option<&str>, file: Option<Input>) -> Result<Input, Failure> {
    match text {
        None => Ok(file.unwrap_or(Input::Auto)),
        Some(t) => t
            .parse::<Input>()
            .map_err(|e| Failure::usage(format!("--format: {e}"))),
    }
}

impl SourceOptions {
    /// The `[listen]` of the configuration file `run` would use, when neither
    /// `--listen` nor `--file` says where the packets come from.
    fn listen_of_default_file(&self) -> Option<(SocketAddr, Input)> {
        if self.listen.is_some() || self.file.is_some() {
            return None;
        }
        super::listen_of_default_file()
    }
}

/// A socket on `addr`; a port in use is worded as `run` words it, and one
/// held by a running forza-relay says how `what` works beside it.
fn bind(addr: SocketAddr, what: Beside) -> Result<UdpSource, Failure> {
    UdpSource::bind(addr).map_err(|source| {
        super::listen_failure(
            &StartError::Listen {
                addr,
                place: "--listen".to_owned(),
                source,
            },
            what,
        )
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

/// The source of `--file CAPTURE [--port P]`, or of `--listen ADDR` (`file`:
/// the configuration file's address, without `--listen`).
fn open_source(
    options: &SourceOptions,
    file: Option<SocketAddr>,
    pace: Pace,
    what: Beside,
) -> Result<Box<dyn Source>, Failure> {
    let source: Box<dyn Source> = match &options.file {
        Some(path) => Box::new(open_capture(path, options.port, pace)?),
        None => Box::new(bind(listen_addr(options.listen.as_deref(), file)?, what)?),
    };
    Ok(source)
}

/// `forza-relay watch`.
pub fn watch_command(command: &WatchCommand, signals: &Signals) -> Result<(), Failure> {
    let source_options = &command.source;
    let file = source_options.listen_of_default_file();
    let options = WatchOptions {
        input: input(source_options.format.as_deref(), file.map(|f| f.1))?,
    };
    let mut source = open_source(
        source_options,
        file.map(|f| f.0),
        Pace::Recorded,
        Beside::Watch,
    )?;
    if !io::stdout().is_terminal() {
        // "listening on ADDR" (the port bound, for scripts) or "playing FILE (...)".
        info!("{}", source.describe());
    }
    let screen = io::stdout().is_terminal();
    match watch(&mut *source, &options, &signals.stop_flag()) {
        // The terminal's window was closed: nothing left to show.
        Err(_) if screen && !io::stdout().is_terminal() => Ok(()),
        result => result.map_err(|e| Failure::start(format!("watch stopped: {e}"))),
    }
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
pub fn export_command(command: &ExportCommand, signals: &Signals) -> Result<(), Failure> {
    let columns = match &command.fields {
        Some(spec) => columns::select(spec).map_err(Failure::usage)?,
        None => Column::all(),
    };
    let file = command.source.listen_of_default_file();
    let options = ExportOptions {
        input: input(command.source.format.as_deref(), file.map(|f| f.1))?,
        table: table(command.table.as_deref(), &command.output)?,
        columns,
        skip_not_racing: command.only_race_on,
    };
    // Opened before the output is created, so a bad capture or a port in use
    // leaves an existing output file alone.
    let mut source = open_source(
        &command.source,
        file.map(|f| f.0),
        Pace::Fastest,
        Beside::Export,
    )?;
    let to_stdout = command.output.as_os_str() == "-";
    let out: Box<dyn Write> = if to_stdout {
        Box::new(io::stdout().lock())
    } else {
        let file = File::create(&command.output).map_err(|e| {
            Failure::start(format!("cannot create {}: {e}", command.output.display()))
        })?;
        Box::new(file)
    };
    info!("{}", source.describe());
    let target = if to_stdout {
        "standard output".to_owned()
    } else {
        command.output.display().to_string()
    };
    if command.source.file.is_some() {
        info!("writing to {target}");
    } else {
        info!("writing to {target}; press Ctrl-C to stop");
    }
    match export(&mut *source, out, &options, &signals.stop_flag(), |why| {
        warn!("{why}")
    }) {
        Ok(summary) => {
            info!("{target}: {summary}");
            Ok(())
        }
        // Its reader is gone (`| head`): nothing more to do.
        Err(ExportError::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::start(format!("{e} ({target})"))),
    }
}

/// `forza-relay dissector`: the Lua dissector for UDP `port`, on standard output.
pub fn dissector_command(port: u16) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    to_stdout(
        out.write_all(dissector::lua(port).as_bytes())
            .and_then(|()| out.flush()),
    )
}
