//! `forza-relay export`: one row per packet, every decoded field by name, as CSV
//! with a header or as JSON lines. A JSON line is the object the `json` outputs
//! send ([`crate::output::json`]): one definition of it.
//!
//! [`export`] reads any [`Source`] until it ends or the stop flag is set, and
//! flushes everything it wrote before it returns (also every second while it runs,
//! so a killed process loses at most a second of rows).

use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::config::Input;
use crate::output::json;
use crate::telemetry::columns::{Column, Row};
use crate::telemetry::Telemetry;
use crate::view::model::Ignored;
use crate::view::source::{Next, Source};
use crate::view::Reader;
use crate::wire::Packet;

/// How long one wait on the source lasts: how soon a stop request is seen.
const POLL: Duration = Duration::from_millis(100);
/// How often rows are flushed to the file while the export runs.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// The file format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// Comma-separated values with a header line.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

impl std::str::FromStr for Table {
    type Err = String;

    /// `csv` or `jsonl` (also `json`), ignoring case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "csv" => Ok(Table::Csv),
            "jsonl" | "json" => Ok(Table::Jsonl),
            _ => Err(format!("--as {s:?}: write csv or jsonl")),
        }
    }
}

/// What to export and how.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// How datagrams are read: a fixed format, or detected.
    pub input: Input,
    /// CSV or JSON lines.
    pub table: Table,
    /// The columns, in order.
    pub columns: Vec<Column>,
    /// Skip every packet with IsRaceOn = 0 (`--only-race-on`; unlike a
    /// destination's `only_race_on`, which passes the race-end frame).
    pub skip_not_racing: bool,
}

/// What an export did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSummary {
    /// Rows written.
    pub rows: u64,
    /// Packets skipped for IsRaceOn = 0 (with `skip_not_racing`).
    pub not_racing: u64,
    /// Datagrams that were not packets of the input format (or of any format).
    pub ignored: Ignored,
    /// The input format the datagrams were read as.
    pub input: Input,
}

impl ExportSummary {
    /// An empty summary of reading `input`.
    pub fn new(input: Input) -> ExportSummary {
        ExportSummary {
            rows: 0,
            not_racing: 0,
            ignored: Ignored::default(),
            input,
        }
    }
}

impl fmt::Display for ExportSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rows written", self.rows)?;
        if self.not_racing > 0 {
            write!(f, ", {} with IsRaceOn = 0 skipped", self.not_racing)?;
        }
        if self.ignored.count() > 0 {
            write!(f, "; {}", self.ignored.explain(self.input))?;
        }
        Ok(())
    }
}

/// Why an export stopped early.
#[derive(Debug)]
pub enum ExportError {
    /// The source failed.
    Source(io::Error),
    /// Writing the output failed.
    Write(io::Error),
    /// Datagrams were read, and not one was a packet of the input format: the
    /// output holds only a header (issue 13). Its message names the format the
    /// datagrams have.
    NothingMatched(ExportSummary),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Source(e) => write!(f, "reading datagrams failed: {e}"),
            ExportError::Write(e) => write!(f, "writing the export failed: {e}"),
            ExportError::NothingMatched(s) => f.write_str(&s.ignored.nothing_matched(s.input)),
        }
    }
}

impl std::error::Error for ExportError {}

/// Writes one row per packet of `source` to `out` until the source ends or `stop`
/// is set, then flushes. With `on_ignored`, the first datagram that is not a packet
/// is described to it once (for a warning). When datagrams were read and none was
/// a packet of the input format, the rows written (none) are flushed and the
/// result is [`ExportError::NothingMatched`].
pub fn export<W: Write>(
    source: &mut dyn Source,
    out: W,
    options: &ExportOptions,
    stop: &AtomicBool,
    mut on_ignored: impl FnMut(&str),
) -> Result<ExportSummary, ExportError> {
    let mut writer = Writer::new(out, options)?;
    let mut reader = Reader::new(options.input);
    let mut summary = ExportSummary::new(options.input);
    let mut first: Option<SystemTime> = None;
    let mut flushed = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let d = match source.next(POLL).map_err(ExportError::Source)? {
            Next::Datagram(d) => d,
            Next::Idle => {
                if flushed.elapsed() >= FLUSH_EVERY {
                    writer.flush()?;
                    flushed = Instant::now();
                }
                continue;
            }
            Next::End => break,
        };
        let Some(format) = reader.format_of(d.payload) else {
            if summary.ignored.count() == 0 {
                on_ignored(&reader.why_ignored(d.payload.len()));
            }
            summary.ignored.add(d.payload.len());
            continue;
        };
        let packet = Packet::new_unchecked(d.payload, format);
        if options.skip_not_racing && !packet.race_on() {
            summary.not_racing += 1;
            continue;
        }
        let start = *first.get_or_insert(d.time);
        let since_start = d
            .time
            .duration_since(start)
            .map_or(0.0, |e| e.as_secs_f64());
        let telemetry = Telemetry::decode(&packet);
        writer.row(&Row {
            time: d.time,
            since_start,
            packet,
            telemetry: &telemetry,
        })?;
        summary.rows += 1;
        if flushed.elapsed() >= FLUSH_EVERY {
            writer.flush()?;
            flushed = Instant::now();
        }
    }
    writer.flush()?;
    if summary.rows == 0 && summary.not_racing == 0 && summary.ignored.count() > 0 {
        return Err(ExportError::NothingMatched(summary));
    }
    Ok(summary)
}

/// The CSV or JSON-lines writer, with the column names made once.
enum Writer<'c, W: Write> {
    Csv {
        // Boxed: the csv writer holds its buffer inline, making this variant large.
        csv: Box<csv::Writer<W>>,
        columns: &'c [Column],
        cell: String,
    },
    Jsonl {
        out: io::BufWriter<W>,
        /// The object, as the `json` outputs write it (one definition).
        object: json::Object,
        /// One line, kept between rows.
        line: Vec<u8>,
    },
}

fn csv_error(e: csv::Error) -> ExportError {
    ExportError::Write(e.into())
}

impl<'c, W: Write> Writer<'c, W> {
    fn new(out: W, options: &'c ExportOptions) -> Result<Self, ExportError> {
        let columns = &options.columns;
        Ok(match options.table {
            Table::Csv => {
                let mut csv = Box::new(csv::Writer::from_writer(out));
                csv.write_record(columns.iter().map(Column::name))
                    .map_err(csv_error)?;
                Writer::Csv {
                    csv,
                    columns,
                    cell: String::new(),
                }
            }
            Table::Jsonl => Writer::Jsonl {
                out: io::BufWriter::new(out),
                object: json::Object::new(columns),
                line: Vec::new(),
            },
        })
    }

    fn row(&mut self, row: &Row<'_>) -> Result<(), ExportError> {
        match self {
            Writer::Csv { csv, columns, cell } => {
                for c in columns.iter() {
                    cell.clear();
                    let _ = write!(cell, "{}", c.value(row));
                    csv.write_field(cell.as_bytes()).map_err(csv_error)?;
                }
                csv.write_record(None::<&[u8]>).map_err(csv_error)
            }
            Writer::Jsonl { out, object, line } => {
                line.clear();
                let frame = crate::output::Values::new(row.packet, row.time, row.since_start);
                object.write(&frame, line);
                line.push(b'\n');
                out.write_all(line).map_err(ExportError::Write)
            }
        }
    }

    fn flush(&mut self) -> Result<(), ExportError> {
        match self {
            Writer::Csv { csv, .. } => csv.flush(),
            Writer::Jsonl { out, .. } => out.flush(),
        }
        .map_err(ExportError::Write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::columns::{self, Column};
    use crate::view::source::MemorySource;
    use crate::wire::{Format, Wheels};
    use std::net::SocketAddr;

    fn from() -> SocketAddr {
        "127.0.0.1:5555".parse().unwrap()
    }

    /// An fh6 packet with named values; `n` tells packets apart.
    fn fh6(n: u32, race_on: bool) -> Vec<u8> {
        let mut buf = vec![0u8; 324];
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).unwrap();
        p.set_is_race_on(i32::from(race_on));
        p.set_timestamp_ms(1_000 + n);
        p.set_speed(39.444_4).unwrap();
        p.set_gear(4).unwrap();
        p.set_lap_number(2).unwrap();
        p.set_tire_temp(Wheels::from_array([212.0, 194.0, 176.0, 158.0]))
            .unwrap();
        p.set_car_group(26).unwrap();
        buf
    }

    fn sled(n: u32) -> Vec<u8> {
        let mut buf = vec![0u8; 232];
        let mut p = Packet::new_checked(&mut buf[..], Format::Sled).unwrap();
        p.set_is_race_on(1);
        p.set_timestamp_ms(2_000 + n);
        p.set_current_engine_rpm(6_543.25);
        buf
    }

    fn source() -> MemorySource {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut s = MemorySource::new();
        s.push(t0, from(), fh6(0, true));
        s.push(t0 + Duration::from_millis(16), from(), fh6(1, false));
        s.push(t0 + Duration::from_millis(32), from(), vec![0; 100]);
        s.push(t0 + Duration::from_millis(48), from(), sled(2));
        s
    }

    fn run(options: &ExportOptions) -> (Vec<u8>, ExportSummary, Vec<String>) {
        let mut out = Vec::new();
        let mut warnings = Vec::new();
        let summary = export(
            &mut source(),
            &mut out,
            options,
            &AtomicBool::new(false),
            |w| warnings.push(w.to_owned()),
        )
        .unwrap();
        (out, summary, warnings)
    }

    fn options(table: Table) -> ExportOptions {
        ExportOptions {
            input: Input::Auto,
            table,
            columns: Column::all(),
            skip_not_racing: false,
        }
    }

    #[test]
    fn csv_has_a_header_and_one_row_per_packet_by_column_name() {
        let (out, summary, warnings) = run(&options(Table::Csv));
        assert_eq!((summary.rows, summary.not_racing), (3, 0));
        assert_eq!(summary.ignored.count(), 1);
        assert_eq!(
            summary.to_string(),
            "3 rows written; 1 datagram ignored, not in any Forza format (lengths: sled 232, \
             fm7 311, fm2023 331, fh4/fh5/fh6 324); it is of no Forza length (100 bytes)"
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("100-byte"), "{warnings:?}");
        let mut r = csv::Reader::from_reader(&out[..]);
        let header = r.headers().unwrap().clone();
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 3);
        let get = |row: usize, name: &str| {
            let i = header.iter().position(|h| h == name).unwrap();
            rows[row][i].to_owned()
        };
        assert_eq!(get(0, "format"), "fh6");
        assert_eq!(get(0, "IsRaceOn"), "1");
        assert_eq!(get(1, "IsRaceOn"), "0");
        assert_eq!(get(1, "TimestampMS"), "1001");
        assert_eq!(get(0, "Speed"), "39.4444");
        assert_eq!(get(0, "Gear"), "4");
        assert_eq!(get(0, "gear_label"), "4");
        assert_eq!(get(0, "CarGroup"), "26");
        assert_eq!(get(0, "TireTempRL"), "176");
        assert_eq!(get(0, "tire_temp_c_fl"), "100");
        assert_eq!(get(0, "speed_kmh").parse::<f32>().unwrap().round(), 142.0);
        assert_eq!(get(0, "recv_time"), "2023-11-14T22:13:20.000000Z");
        assert_eq!(get(1, "recv_s"), "0.016000");
        // Sled has no Dash or Horizon block: those cells are empty.
        assert_eq!(get(2, "format"), "sled");
        assert_eq!(get(2, "CurrentEngineRpm"), "6543.25");
        assert_eq!(get(2, "Speed"), "");
        assert_eq!(get(2, "CarGroup"), "");
        assert_eq!(get(2, "speed_kmh"), "");
        assert_eq!(get(2, "recv_s"), "0.048000");
    }

    #[test]
    fn jsonl_has_one_object_per_packet_with_null_for_absent_fields() {
        let (out, summary, _) = run(&options(Table::Jsonl));
        assert_eq!(summary.rows, 3);
        let text = String::from_utf8(out).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0]["format"], "fh6");
        assert_eq!(rows[0]["Speed"].as_f64().unwrap() as f32, 39.444_4);
        assert_eq!(rows[0]["Gear"], 4);
        assert_eq!(rows[0]["gear_label"], "4");
        assert_eq!(rows[0]["LapNumber"], 2);
        assert_eq!(rows[0]["TireTempFR"], 194.0);
        assert_eq!(rows[1]["IsRaceOn"], 0);
        assert_eq!(rows[1]["recv_s"], 0.016);
        assert_eq!(rows[2]["format"], "sled");
        assert_eq!(rows[2]["TimestampMS"], 2_002);
        assert_eq!(rows[2]["Speed"], serde_json::Value::Null);
        assert_eq!(rows[2]["tire_temp_c_rr"], serde_json::Value::Null);
        assert_eq!(
            rows[0].as_object().unwrap().len(),
            Column::all().len(),
            "every column in every object"
        );
    }

    #[test]
    fn fields_and_skip_not_racing_select_columns_and_rows() {
        let o = ExportOptions {
            input: Input::Fixed(Format::Fh6),
            columns: columns::select("TimestampMS,speed_kmh,TireTemp").unwrap(),
            skip_not_racing: true,
            ..options(Table::Csv)
        };
        let (out, summary, warnings) = run(&o);
        // The sled packet and the 100-byte datagram are not fh6 packets.
        assert_eq!((summary.rows, summary.not_racing), (1, 1));
        assert_eq!(summary.ignored.count(), 2);
        assert_eq!(
            summary.to_string(),
            "1 rows written, 1 with IsRaceOn = 0 skipped; 2 datagrams ignored, not in the fh6 \
             format (324 bytes); 1 is 232 bytes (sled), 1 is 100 bytes (no Forza format) \
             — use --format sled or auto"
        );
        assert!(warnings[0].contains("fh6"), "{warnings:?}");
        let mut r = csv::Reader::from_reader(&out[..]);
        assert_eq!(
            r.headers().unwrap().iter().collect::<Vec<_>>(),
            [
                "TimestampMS",
                "speed_kmh",
                "TireTempFL",
                "TireTempFR",
                "TireTempRL",
                "TireTempRR"
            ]
        );
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 1);
        assert_eq!(&rows[0][0], "1000");
    }

    /// Issue 13 item 6: an export that matched nothing exited 0 with a header.
    #[test]
    fn an_export_that_matched_nothing_is_an_error_naming_the_format_found() {
        let o = ExportOptions {
            input: Input::Fixed(Format::Fm7),
            ..options(Table::Csv)
        };
        let mut out = Vec::new();
        let e = export(&mut source(), &mut out, &o, &AtomicBool::new(false), |_| {})
            .expect_err("no fm7 packet");
        let ExportError::NothingMatched(summary) = &e else {
            panic!("{e:?}");
        };
        assert_eq!((summary.rows, summary.ignored.count()), (0, 4));
        assert_eq!(
            e.to_string(),
            "none of the 4 datagrams is in the fm7 format (311 bytes); 1 is 232 bytes (sled), \
             2 are 324 bytes (fh4, fh5 or fh6), 1 is 100 bytes (no Forza format) \
             — use --format auto (or one of sled, fh4, fh5, fh6)"
        );
        // The header is written and flushed all the same.
        let mut r = csv::Reader::from_reader(&out[..]);
        assert_eq!(r.headers().unwrap().get(0), Some("recv_time"));
        assert_eq!(r.records().count(), 0);
        // Nothing read at all is no error: an empty capture exports no rows.
        let summary = export(
            &mut MemorySource::new(),
            &mut Vec::new(),
            &o,
            &AtomicBool::new(false),
            |_| {},
        )
        .unwrap();
        assert_eq!(summary.rows, 0);
    }

    #[test]
    fn a_set_stop_flag_ends_the_export_with_the_header_flushed() {
        let mut out = Vec::new();
        let summary = export(
            &mut source(),
            &mut out,
            &options(Table::Csv),
            &AtomicBool::new(true),
            |_| {},
        )
        .unwrap();
        assert_eq!(summary.rows, 0);
        let mut r = csv::Reader::from_reader(&out[..]);
        assert_eq!(r.headers().unwrap().get(0), Some("recv_time"));
        assert_eq!(r.records().count(), 0);
    }

    #[test]
    fn table_names_parse() {
        assert_eq!("CSV".parse::<Table>(), Ok(Table::Csv));
        assert_eq!("jsonl".parse::<Table>(), Ok(Table::Jsonl));
        assert!("xml".parse::<Table>().unwrap_err().contains("\"xml\""));
    }
}
