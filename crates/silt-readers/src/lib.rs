//! Format readers: bytes from a source become Arrow [`RecordBatch`](arrow::record_batch::RecordBatch)es
//! with a named schema (`zeek.conn`, `suricata.dns`).
//!
//! One module per format; each exposes
//! `pub fn read(input: &mut dyn BufRead, source: &SourceInfo, opts: &ReadOptions, out: &mut dyn Emit) -> anyhow::Result<()>`
//! and may touch nothing but its input and `out` (no files, no global state).
//! - [`zeek::tsv`]: Zeek/Bro ASCII logs with `#` header blocks;
//! - [`zeek::json`]: Zeek NDJSON logs, typed like the TSV logs;
//! - [`suricata`]: Suricata EVE JSON, one table per `event_type`;
//! - [`json`]: JSON values to Arrow with schema inference (shared by EVE and generic JSON);
//! - [`source`]: opening files, directories, gzip and stdin; [`detect`]: guessing a format.

pub mod detect;
pub mod json;
pub mod source;
pub mod suricata;
pub mod zeek;

use std::io::BufRead;

use silt_core::{Emit, ReadOptions, SourceInfo};

/// The formats `silt import` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Zeek logs, TSV or JSON (decided per file by content).
    Zeek,
    ZeekTsv,
    ZeekJson,
    Suricata,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Zeek => "zeek",
            Format::ZeekTsv => "zeek-tsv",
            Format::ZeekJson => "zeek-json",
            Format::Suricata => "suricata",
        }
    }
}

/// Reads one input in `format`. [`Format::Zeek`] looks at the first bytes to choose TSV or JSON.
pub fn read(
    format: Format,
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &ReadOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    match format {
        Format::Zeek => match detect::sniff(input)? {
            Some(Format::ZeekJson) => zeek::json::read(input, source, opts, out),
            _ => zeek::tsv::read(input, source, opts, out),
        },
        Format::ZeekTsv => zeek::tsv::read(input, source, opts, out),
        Format::ZeekJson => zeek::json::read(input, source, opts, out),
        Format::Suricata => suricata::read(input, source, opts, out),
    }
}
