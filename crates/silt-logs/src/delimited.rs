//! CSV and TSV with the `csv` crate.
//!
//! - CSV: RFC 4180 quoting (`"a ""quoted"", with comma"`, newlines inside quotes), delimiter `,`
//!   unless `--delimiter`; TSV: tab-separated, no quoting and no escapes (a field cannot hold a
//!   tab or a newline).
//! - The first row is the header unless `--no-header`, which names the columns `c1`, `c2`, ...;
//!   an empty header name becomes `_`, a repeated one gets `_2`, `_3`, ... appended.
//! - Types are inferred per column and batch ([`crate::sink::retype_text`]): integers, numbers,
//!   booleans (`true`/`false`), ISO 8601 times, else text exactly as written; an empty field is
//!   null. Batches unify by the EVE rules (int then float -> float; anything else -> text).
//!   With `--schema`, fields are parsed to the schema's types instead.
//!
//! Rejected with the line number where the row starts: a row with a different number of fields
//! than the header, a field that is not valid UTF-8 (the raw row keeps the bytes; it is rebuilt
//! from the parsed fields joined by the delimiter, so quoting is not reproduced).
//! Touches nothing but `input` and `out`.

use std::io::BufRead;

use anyhow::Context;
use silt_core::{Emit, ReadOptions, SourceInfo};
use silt_readers::json::Value;

use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

pub fn read(
    format: LogFormat,
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let tsv = format == LogFormat::Tsv;
    let delim = lo.delimiter.unwrap_or(if tsv { b'\t' } else { b',' });
    let table = lo.table_for(format, source);
    let mut sink = Sink::new(source, table, ro, lo, true, None)?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delim)
        .quoting(!tsv)
        .from_reader(input);
    let res = read_rows(&mut rdr, delim, lo.no_header, source, &mut sink, out);
    let fin = sink.finish(out);
    res.and(fin.map(|_| ()))
}

fn raw_row(rec: &csv::ByteRecord, delim: u8) -> Vec<u8> {
    let mut raw = Vec::new();
    for (i, f) in rec.iter().enumerate() {
        if i > 0 {
            raw.push(delim);
        }
        raw.extend_from_slice(f);
    }
    raw
}

fn header_names(rec: &csv::ByteRecord) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for f in rec.iter() {
        let base = String::from_utf8_lossy(f).trim().to_string();
        let base = if base.is_empty() {
            "_".to_string()
        } else {
            base
        };
        let mut name = base.clone();
        let mut k = 2;
        while names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        names.push(name);
    }
    names
}

fn read_rows<R: std::io::Read>(
    rdr: &mut csv::Reader<R>,
    delim: u8,
    no_header: bool,
    source: &SourceInfo,
    sink: &mut Sink,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let mut rec = csv::ByteRecord::new();
    let mut names: Option<Vec<String>> = None;
    let mut last_byte = 0u64;
    loop {
        let more = match rdr.read_byte_record(&mut rec) {
            Ok(m) => m,
            Err(e) => match e.kind() {
                csv::ErrorKind::Io(_) => {
                    return Err(e).with_context(|| format!("{}: read error", source.display))
                }
                _ => {
                    let line = e.position().map_or(0, |p| p.line());
                    sink.reject(out, line, format!("bad row: {e}"), Vec::new())?;
                    continue;
                }
            },
        };
        if !more {
            break;
        }
        let line = rec.position().map_or(0, |p| p.line());
        let byte = rdr.position().byte();
        out.progress(byte - last_byte);
        let row_bytes = (byte - last_byte) as usize;
        last_byte = byte;
        if rec.len() == 1 && rec.get(0).is_some_and(|f| f.is_empty()) {
            continue; // a blank line
        }
        let names = match &names {
            Some(n) => n,
            None => {
                let n = if no_header {
                    (1..=rec.len()).map(|i| format!("c{i}")).collect()
                } else {
                    header_names(&rec)
                };
                sink.decide_time_from_names(n.iter().map(String::as_str));
                names = Some(n);
                if no_header {
                    names.as_ref().expect("set")
                } else {
                    continue;
                }
            }
        };
        if rec.len() != names.len() {
            let reason = format!("expected {} fields, found {}", names.len(), rec.len());
            sink.reject(out, line, reason, raw_row(&rec, delim))?;
            continue;
        }
        let mut o: Vec<(String, Value)> = Vec::with_capacity(names.len());
        let mut bad = None;
        for (name, f) in names.iter().zip(rec.iter()) {
            match std::str::from_utf8(f) {
                Ok(s) => o.push((name.clone(), Value::Str(s.to_string()))),
                Err(e) => {
                    bad = Some(format!(
                        "field {name}: invalid UTF-8 at byte {}",
                        e.valid_up_to()
                    ));
                    break;
                }
            }
        }
        if let Some(reason) = bad {
            sink.reject(out, line, reason, raw_row(&rec, delim))?;
            continue;
        }
        sink.push(
            Value::Object(o),
            line,
            &|| raw_row(&rec, delim),
            row_bytes,
            out,
        )?;
    }
    Ok(())
}
