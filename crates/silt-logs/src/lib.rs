//! Generic log readers: NDJSON, MessagePack, CSV, TSV, LTSV, Avro, Docker json-file and syslog
//! to Arrow batches, plus schema files (`--schema`: Avro `.avsc` or BigQuery JSON).
//!
//! Every reader has the reader shape of `silt_core::emit` plus its [`LogOptions`]; [`read`]
//! dispatches on [`LogFormat`]. One module per format; shared parts:
//! - [`sink`]: records ([`silt_readers::json::Value`] objects) to batches: time field, schema
//!   inference (the EVE rules of `silt_readers::json`) or conformance to a schema, rejects;
//! - [`time`]: which field is the event time and how its values become UTC microseconds;
//! - [`schema_file`]: Avro / BigQuery schemas to Arrow, and conforming records to them;
//! - [`lines`]: bounded line reading.
//!
//! Table names ([`LogOptions::table_for`]): `--table module.type` if given; else Docker logs go
//! to `docker.logs`, and every other format to `<format>.<file stem>` (the file name up to its
//! first dot, sanitized: `/var/log/app.2024.log.gz` read as json -> `json.app`), or
//! `<format>.stdin` for standard input.
//!
//! This crate touches nothing but the inputs and the schema file it is handed and the `Emit` it
//! writes to.

pub mod avro;
pub mod delimited;
pub mod docker;
pub mod lines;
pub mod ltsv;
pub mod msgpack;
pub mod ndjson;
pub mod schema_file;
pub mod sink;
pub mod syslog;
pub mod time;

use std::io::BufRead;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use silt_core::{Emit, ReadOptions, SourceInfo, TableName};

pub use schema_file::TargetSchema;
pub use time::TimeUnit;

/// The generic log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogFormat {
    Json,
    Msgpack,
    Csv,
    Tsv,
    Ltsv,
    Avro,
    Docker,
    Syslog,
}

impl LogFormat {
    pub const ALL: [LogFormat; 8] = [
        LogFormat::Json,
        LogFormat::Msgpack,
        LogFormat::Csv,
        LogFormat::Tsv,
        LogFormat::Ltsv,
        LogFormat::Avro,
        LogFormat::Docker,
        LogFormat::Syslog,
    ];

    /// The name used on the command line and as the default table module.
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Json => "json",
            LogFormat::Msgpack => "msgpack",
            LogFormat::Csv => "csv",
            LogFormat::Tsv => "tsv",
            LogFormat::Ltsv => "ltsv",
            LogFormat::Avro => "avro",
            LogFormat::Docker => "docker",
            LogFormat::Syslog => "syslog",
        }
    }

    /// The format a file extension says (`.gz` is looked through): `.json`/`.ndjson`/`.jsonl`,
    /// `.msgpack`/`.mpk`/`.mp`, `.csv`, `.tsv`, `.ltsv`, `.avro`; `None` for anything else.
    pub fn from_path(path: &Path) -> Option<LogFormat> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        let ext = name.rsplit_once('.')?.1;
        Some(match ext {
            "json" | "ndjson" | "jsonl" => LogFormat::Json,
            "msgpack" | "mpk" | "mp" => LogFormat::Msgpack,
            "csv" => LogFormat::Csv,
            "tsv" => LogFormat::Tsv,
            "ltsv" => LogFormat::Ltsv,
            "avro" => LogFormat::Avro,
            _ => return None,
        })
    }

    /// Guesses the format from the first bytes of the input: Avro magic `Obj\x01`; a JSON object
    /// (Docker when the first line has `"log"` and `"stream"` or `"time"` keys); a MessagePack
    /// map marker; a syslog `<PRI>` or a BSD `Mmm dd hh:mm:ss` start; tab-separated `label:value`
    /// fields (LTSV); tabs (TSV); commas (CSV).
    pub fn sniff(head: &[u8]) -> Option<LogFormat> {
        if head.starts_with(b"Obj\x01") {
            return Some(LogFormat::Avro);
        }
        let first = *head.first()?;
        if matches!(first, 0x80..=0x8f | 0xde | 0xdf) {
            return Some(LogFormat::Msgpack);
        }
        let line_end = memchr::memchr(b'\n', head).unwrap_or(head.len());
        let line = String::from_utf8_lossy(&head[..line_end]);
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.starts_with('{') {
            if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(line) {
                if o.get("log").is_some_and(|l| l.is_string())
                    && (o.contains_key("stream") || o.contains_key("time"))
                {
                    return Some(LogFormat::Docker);
                }
            }
            return Some(LogFormat::Json);
        }
        let b = line.as_bytes();
        if b.len() > 3 && b[0] == b'<' && b[1].is_ascii_digit() {
            return Some(LogFormat::Syslog);
        }
        const MONTHS: [&str; 12] = [
            "Jan ", "Feb ", "Mar ", "Apr ", "May ", "Jun ", "Jul ", "Aug ", "Sep ", "Oct ", "Nov ",
            "Dec ",
        ];
        if MONTHS.iter().any(|m| line.starts_with(m)) {
            return Some(LogFormat::Syslog);
        }
        if line.contains('\t') {
            let ltsv = line
                .split('\t')
                .all(|f| f.split_once(':').is_some_and(|(k, _)| !k.is_empty()));
            return Some(if ltsv {
                LogFormat::Ltsv
            } else {
                LogFormat::Tsv
            });
        }
        if line.contains(',') {
            return Some(LogFormat::Csv);
        }
        None
    }
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let l = s.to_ascii_lowercase();
        LogFormat::ALL
            .into_iter()
            .find(|f| f.name() == l || (l == "ndjson" && *f == LogFormat::Json))
            .ok_or_else(|| format!("unknown format {s:?}"))
    }
}

/// What a user can say about generic logs.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// `--table module.type`; `None` = the default naming rule.
    pub table: Option<TableName>,
    /// `--time-field NAME`; `None` = auto-detection ([`time::CANDIDATES`]).
    pub time_field: Option<String>,
    /// `--time-unit` for numeric times; `None` = guessed from the magnitude.
    pub time_unit: Option<TimeUnit>,
    /// `--schema FILE`, already read.
    pub schema: Option<Arc<TargetSchema>>,
    /// `--delimiter` for CSV/TSV.
    pub delimiter: Option<u8>,
    /// `--no-header` for CSV/TSV.
    pub no_header: bool,
    /// The year of RFC 3164 timestamps (which have none); `None` = the current year.
    pub syslog_year: Option<i32>,
}

impl LogOptions {
    /// The table for an input of `format` (see the crate documentation).
    pub fn table_for(&self, format: LogFormat, source: &SourceInfo) -> TableName {
        if let Some(t) = &self.table {
            return t.clone();
        }
        default_table(format, source)
    }
}

/// The default table name: `docker.logs`, else `<format>.<file stem>` / `<format>.stdin`.
pub fn default_table(format: LogFormat, source: &SourceInfo) -> TableName {
    if format == LogFormat::Docker {
        return TableName::new("docker", "logs");
    }
    let stem = source
        .file_name
        .as_deref()
        .map(|f| f.split('.').next().unwrap_or(f))
        .filter(|s| !s.is_empty())
        .unwrap_or("stdin");
    TableName::new(format.name(), stem)
}

/// Reads one input in `format`.
pub fn read(
    format: LogFormat,
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    match format {
        LogFormat::Json => ndjson::read(input, source, ro, lo, out),
        LogFormat::Msgpack => msgpack::read(input, source, ro, lo, out),
        LogFormat::Csv | LogFormat::Tsv => delimited::read(format, input, source, ro, lo, out),
        LogFormat::Ltsv => ltsv::read(input, source, ro, lo, out),
        LogFormat::Avro => avro::read(input, source, ro, lo, out),
        LogFormat::Docker => docker::read(input, source, ro, lo, out),
        LogFormat::Syslog => syslog::read(input, source, ro, lo, out),
    }
}

/// Reads one input whose format is not given: the file extension decides, else the first bytes
/// ([`LogFormat::sniff`]). `Ok(None)` when neither tells (nothing was read).
pub fn read_detect(
    path: Option<&Path>,
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<Option<LogFormat>> {
    let format = match path.and_then(LogFormat::from_path) {
        Some(f) => Some(f),
        None => LogFormat::sniff(input.fill_buf()?),
    };
    if let Some(f) = format {
        read(f, input, source, ro, lo, out)?;
    }
    Ok(format)
}
