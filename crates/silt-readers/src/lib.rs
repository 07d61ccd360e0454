//! Format readers: bytes from a source become Arrow [`RecordBatch`](arrow::record_batch::RecordBatch)es
//! with a named schema (`zeek.conn`, `suricata.dns`).
//!
//! One module per format; each has a [`silt_core::Decoder`] (fed the stream in pieces or reading
//! it whole), a `FORMAT` spec for the format registry ([`zeek::FORMAT`], [`suricata::FORMAT`])
//! and the thin wrapper
//! `pub fn read(input: &mut dyn BufRead, source: &SourceInfo, opts: &ReadOptions, out: &mut dyn Emit) -> anyhow::Result<()>`,
//! and may touch nothing but its input and `out` (no files, no global state).
//! - [`zeek`]: the `zeek` format (TSV or JSON, decided per stream); [`zeek::tsv`]: Zeek/Bro ASCII
//!   logs with `#` header blocks; [`zeek::json`]: Zeek NDJSON logs, typed like the TSV logs;
//! - [`suricata`]: Suricata EVE JSON, one table per `event_type`;
//! - [`json`]: JSON values to Arrow with schema inference (shared by EVE and generic JSON).
//!
//! Opening inputs and choosing a format are `silt-ingest`'s (its file source and format
//! registry).

pub mod json;
pub mod suricata;
pub mod zeek;
