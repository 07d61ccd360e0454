//! Generic log readers: NDJSON, MessagePack, CSV, TSV, LTSV, Avro, Docker json-file and syslog
//! to Arrow batches, plus schema files (`--schema`: Avro `.avsc` or BigQuery JSON).
//!
//! One module per format, each with its [`silt_core::Decoder`] (fed the stream in pieces split
//! anywhere, or reading it whole) and its `FORMAT` spec for the format registry, sniffer
//! included: [`ndjson::FORMAT`], [`msgpack::FORMAT`], [`delimited::CSV_FORMAT`],
//! [`delimited::TSV_FORMAT`], [`ltsv::FORMAT`], [`avro::FORMAT`], [`docker::FORMAT`],
//! [`syslog::FORMAT`]. Decoders take their options as [`LogOptions`] (through
//! `silt_core::FormatOptions`). [`read`] is the old entry point, a thin wrapper that makes the
//! format's decoder and reads a whole `BufRead` with it. Shared parts:
//! - [`sink`]: records ([`silt_readers::json::Value`] objects) to batches: time field, schema
//!   inference (the EVE rules of `silt_readers::json`) or conformance to a schema, rejects;
//! - [`time`]: which field is the event time and how its values become UTC microseconds;
//! - [`schema_file`]: Avro / BigQuery schemas to Arrow, and conforming records to them;
//! - [`text_columns`]: CSV/TSV rows straight into Arrow columns, typed as [`sink::retype_text`]
//!   types them (the sink's fast path for those formats);
//! - [`lines`]: the decoder of the line-based formats (NDJSON, Docker, LTSV, syslog) on
//!   `silt_core::decode::LineFramer`.
//!
//! Table names ([`LogOptions::table_for`]): `--table module.type` if given; else Docker logs go
//! to `docker.logs`, and every other format to `<format>.<file stem>` (the file name up to its
//! first dot, sanitized: `/var/log/app.2024.log.gz` read as json -> `json.app`), or
//! `<format>.stdin` for standard input.
//!
//! This crate touches nothing but the bytes and the schema file it is handed and the `Emit` it
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
pub mod text_columns;
pub mod time;

use std::io::BufRead;
use std::str::FromStr;
use std::sync::Arc;

use silt_core::{Emit, FormatOptions, FormatSpec, ReadOptions, SourceInfo, TableName};

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
        self.spec().name
    }

    /// The format's spec for the format registry.
    pub fn spec(self) -> &'static FormatSpec {
        match self {
            LogFormat::Json => &ndjson::FORMAT,
            LogFormat::Msgpack => &msgpack::FORMAT,
            LogFormat::Csv => &delimited::CSV_FORMAT,
            LogFormat::Tsv => &delimited::TSV_FORMAT,
            LogFormat::Ltsv => &ltsv::FORMAT,
            LogFormat::Avro => &avro::FORMAT,
            LogFormat::Docker => &docker::FORMAT,
            LogFormat::Syslog => &syslog::FORMAT,
        }
    }
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        LogFormat::ALL
            .into_iter()
            .find(|f| f.spec().is_named(s))
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

/// Reads one input in `format`: a thin wrapper over the format's decoder
/// ([`silt_core::Decoder::read`], which also reports progress).
pub fn read(
    format: LogFormat,
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let opts = FormatOptions::new(ro.clone()).with(lo.clone());
    let mut decoder = (format.spec().open)(&opts, source)?;
    decoder.read(input, out)
}
