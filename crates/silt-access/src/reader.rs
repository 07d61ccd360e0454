//! `silt import access`: web server access-log lines -> one table of typed columns.
//!
//! Reads the `BufRead` it is given and talks only to the [`Emit`] it is given.
//!
//! - Table: `access.<stem>` where the stem is the file name without directories, rotation
//!   suffix (`.1`, `.0`), `.log` and `.gz` (`/var/log/nginx/access.log.1` -> `access.access`,
//!   `shop_access_log.0` -> `access.shop_access_log`); standard input gives `access.access`.
//!   `--table NAME` overrides it (`NAME` or `module.name`).
//! - Columns: see [`crate::columns`]; the time column (`time`) is the table's event time
//!   (`silt.time_column`), `remote_addr` is a lookup column (bloom filter).
//! - A line that does not match the format, or is not valid UTF-8, is one reject (with line
//!   number, reason and raw bytes); reading goes on. Empty lines are not records and are skipped.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use silt_core::{meta, Emit, ReadOptions, Reject, SourceInfo, TableName};

use crate::columns::RowBuilder;
use crate::format::{trim_eol, LogFormat};

/// Options of the access-log reader.
#[derive(Debug, Clone)]
pub struct AccessOptions {
    pub format: Arc<LogFormat>,
    /// Overrides the table name derived from the file name.
    pub table: Option<TableName>,
}

impl AccessOptions {
    /// `format`: a preset or format string (see [`LogFormat::parse`]); `table`: `name` (module
    /// `access`) or `module.name`.
    pub fn new(format: &str, table: Option<&str>) -> anyhow::Result<Self> {
        Ok(AccessOptions {
            format: Arc::new(LogFormat::parse(format)?),
            table: table.map(|t| match t.split_once('.') {
                Some((m, n)) => TableName::new(m, n),
                None => TableName::new("access", t),
            }),
        })
    }
}

/// The table an input goes to.
pub fn table_for(source: &SourceInfo, opts: &AccessOptions) -> TableName {
    if let Some(t) = &opts.table {
        return t.clone();
    }
    let mut stem = source.file_name.clone().unwrap_or_default();
    loop {
        let before = stem.len();
        if let Some((head, tail)) = stem.rsplit_once('.') {
            if !head.is_empty()
                && (tail.eq_ignore_ascii_case("log")
                    || tail.eq_ignore_ascii_case("gz")
                    || tail.eq_ignore_ascii_case("txt")
                    || (!tail.is_empty() && tail.bytes().all(|c| c.is_ascii_digit())))
            {
                stem.truncate(head.len());
            }
        }
        if stem.len() == before {
            break;
        }
    }
    if stem.is_empty() {
        stem = "access".into();
    }
    TableName::new("access", &stem)
}

/// The Arrow schema of a format's table.
pub fn schema(format: &LogFormat, table: &TableName) -> SchemaRef {
    let cols = crate::columns::columns(format);
    let fields: Vec<_> = cols.iter().map(|c| c.field()).collect();
    let mut md = HashMap::from([(meta::TABLE.to_string(), table.to_string())]);
    if let Some(t) = cols
        .iter()
        .find(|c| matches!(c.data_type, arrow::datatypes::DataType::Timestamp(..)))
    {
        md.insert(meta::TIME_COLUMN.to_string(), t.name.clone());
    }
    if cols.iter().any(|c| c.name == "remote_addr") {
        md.insert(meta::LOOKUP_COLUMNS.to_string(), "remote_addr".into());
    }
    Arc::new(Schema::new_with_metadata(fields, md))
}

/// Reads access-log lines from `input` into `out` (see the module documentation).
pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &ReadOptions,
    access: &AccessOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let table = table_for(source, access);
    let schema = schema(&access.format, &table);
    let batch_rows = opts.batch_rows.max(1);
    let mut rows = RowBuilder::new(access.format.clone(), batch_rows);
    let mut buf = Vec::with_capacity(4096);
    let mut line_no = 0u64;
    let mut batch_bytes = 0u64;
    loop {
        buf.clear();
        let n = input.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        out.progress(n as u64);
        let line = trim_eol(&buf);
        if line.is_empty() {
            continue;
        }
        let result = match std::str::from_utf8(line) {
            Ok(s) => rows.push_line(s),
            Err(e) => Err(format!("invalid UTF-8 at byte {}", e.valid_up_to())),
        };
        match result {
            Ok(()) => {
                batch_bytes += n as u64;
                if rows.len() >= batch_rows {
                    flush(&mut rows, &schema, &table, &mut batch_bytes, out)?;
                }
            }
            Err(reason) => out.reject(Reject {
                source: source.display.clone(),
                line: line_no,
                reason,
                raw: line.to_vec(),
                table: Some(table.clone()),
            })?,
        }
    }
    if !rows.is_empty() {
        flush(&mut rows, &schema, &table, &mut batch_bytes, out)?;
    }
    Ok(())
}

fn flush(
    rows: &mut RowBuilder,
    schema: &SchemaRef,
    table: &TableName,
    bytes: &mut u64,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let batch = RecordBatch::try_new(schema.clone(), rows.finish())?;
    out.table_bytes(table, std::mem::take(bytes));
    out.batch(table, batch)
}
