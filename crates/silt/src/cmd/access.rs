//! `silt import access` and `--parse-field`: builds the access-log reader and wraps other
//! readers' output in `silt_access::ParseFieldEmit`. Touches nothing but the closures it builds.

use silt_access::{AccessOptions, ParseFieldEmit, ParseFieldSpec};
use silt_core::ReadOptions;

use crate::cli::AccessArgs;
use crate::cmd::import::ReaderSpec;

/// `silt import access`: the access-log reader with `--log-format` and `--table`.
pub fn access_reader(
    a: &AccessArgs,
    table: Option<&str>,
    batch_rows: usize,
) -> anyhow::Result<ReaderSpec> {
    refuse_parse_field(a, "access")?;
    let opts = AccessOptions::new(&a.log_format, table)?;
    let ro = ReadOptions { batch_rows };
    Ok(ReaderSpec::Custom(Box::new(move |input, source, out| {
        silt_access::read(input, source, &ro, &opts, out)
    })))
}

/// The error for `--parse-field` on `format`, whose records hold no log line to parse (the
/// flag is never silently ignored).
pub fn refuse_parse_field(a: &AccessArgs, format: &str) -> anyhow::Result<()> {
    if a.parse_field.is_some() {
        anyhow::bail!(
            "--parse-field applies to the generic log formats (json, msgpack, csv, docker, ...), not to {format}"
        );
    }
    Ok(())
}

/// The `--parse-field`/`--keep-field` specification, if given.
pub fn parse_field_spec(a: &AccessArgs) -> anyhow::Result<Option<ParseFieldSpec>> {
    a.parse_field
        .as_deref()
        .map(|s| ParseFieldSpec::parse(s, a.keep_field))
        .transpose()
}

/// Wraps a custom reader so that its batches go through `--parse-field`.
pub fn with_parse_field(spec: ReaderSpec, a: &AccessArgs) -> anyhow::Result<ReaderSpec> {
    let Some(pf) = parse_field_spec(a)? else {
        return Ok(spec);
    };
    match spec {
        ReaderSpec::Custom(mut read) => {
            Ok(ReaderSpec::Custom(Box::new(move |input, source, out| {
                let mut w = ParseFieldEmit::new(out, pf.clone());
                let r = read(input, source, &mut w);
                report_unparsed(&w, &source.display);
                r
            })))
        }
        other => {
            refuse_parse_field(a, "this format")?;
            Ok(other)
        }
    }
}

/// Tells the user how many values of the field did not parse (they stay in the field's column).
pub fn report_unparsed(w: &ParseFieldEmit<'_>, source: &str) {
    if w.unparsed() > 0 {
        eprintln!(
            "{source}: {} of {} values did not match the access-log format; their rows are kept with the raw text in the original column and null parsed columns",
            w.unparsed(),
            w.unparsed() + w.parsed()
        );
    }
}
