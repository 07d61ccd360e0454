//! What the commands print: an import's summary (shared by `import` and `demo`) and the tables
//! of a lake (shared by `tables` and `demo`). Formatting only; the figures come from the
//! libraries.
//!
//! Touches standard output (and standard error for the transforms' warnings) only.

use std::io::Write;
use std::path::Path;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use silt_ingest::jobs::ImportOutcome;
use silt_lake::catalog;
use silt_lake::summary::human_bytes;

/// The per-table summary, what the import record skipped or recovered, what transforms and
/// format detection did, and where rejects went.
pub fn import_summary(done: &ImportOutcome, lake: &Path, detected: bool) {
    let (s, run) = (&done.summary, &done.run);
    let rec = &done.recovered;
    if !rec.runs.is_empty() {
        println!(
            "recovered {} interrupted import(s) ({}): removed the {} file(s) they had published; \
their inputs are imported again in full",
            rec.runs.len(),
            rec.runs.join(", "),
            rec.files
        );
    }
    let rp = &done.replacements;
    if rp.completed + rp.abandoned > 0 {
        println!(
            "recovered {} compaction(s) a crash interrupted: {} finished ({} replaced file(s) removed), {} undone",
            rp.completed + rp.abandoned,
            rp.completed,
            rp.inputs_removed,
            rp.abandoned
        );
    }
    if !done.skipped.is_empty() {
        println!(
            "skipped {} input(s) whose content is already in the lake (--force imports them again):",
            done.skipped.len()
        );
        const SHOW: usize = 10;
        for k in done.skipped.iter().take(SHOW) {
            let path = k.path.display().to_string();
            match &k.run {
                Some((id, at)) if k.was == path => {
                    println!("  {path} (imported by run {id}, {at})")
                }
                Some((id, at)) => println!(
                    "  {path} (same content as {} imported by run {id}, {at})",
                    k.was
                ),
                None => println!("  {path} (same content as {} in this import)", k.was),
            }
        }
        if done.skipped.len() > SHOW {
            println!("  ... and {} more", done.skipped.len() - SHOW);
        }
    }
    grown(&done.grown);
    if run.streams.is_empty() && !(done.skipped.is_empty() && done.grown.is_empty()) {
        if done.grown.is_empty() {
            println!("nothing new to import");
        } else {
            println!("nothing imported");
        }
        return;
    }
    println!("{s}");
    if detected && !run.formats.is_empty() {
        let f: Vec<String> = run
            .formats
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        println!("inputs by detected format: {}", f.join(", "));
    }
    // What transforms say (values --parse-field could not parse) goes to stderr, as warnings.
    for line in &run.transform_reports {
        eprintln!("{line}");
    }
    for p in &s.rejects_files {
        println!("rejected lines kept in {}", p.display());
    }
    if s.total_events() > 0 {
        println!("lake: {}", lake.display());
    }
}

/// Inputs left out because they grew since an earlier run imported their start (to stderr:
/// the import's exit status says that something was not imported).
fn grown(grown: &[silt_ingest::Grown]) {
    if grown.is_empty() {
        return;
    }
    eprintln!(
        "not imported: {} input(s) that grew since an earlier import read them; importing them \
again would put the rows of what was read then in the lake twice:",
        grown.len()
    );
    for g in grown {
        let path = g.path.display().to_string();
        let was = if g.was == path {
            String::new()
        } else {
            format!(" (as {})", g.was)
        };
        eprintln!(
            "  {path}: its first {} bytes of {} were imported by run {}{was}, {}",
            g.imported_bytes, g.size, g.run.0, g.run.1
        );
    }
    eprintln!(
        "(to follow a log that is still being written, use `silt serve --tail`, which imports \
each line once; --force imports these inputs whole, rows already in the lake included)"
    );
}

fn fmt_ts(t: Option<i64>) -> String {
    t.and_then(chrono::DateTime::from_timestamp_micros)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
        .unwrap_or_else(|| "-".into())
}

/// `delta` for a table with a Delta Lake log, else `hive`.
fn table_format(root: &silt_lake::remote::LakeRoot, i: &catalog::TableInfo) -> &'static str {
    // A table whose log cannot be listed shows as what its files are: Hive.
    match silt_lake::delta::Lake::of(root).has_log(&i.name.to_string()) {
        Ok(true) => "delta",
        _ => "hive",
    }
}

/// Each table's rows, files, bytes and time range, as a table or as JSON.
pub fn tables(lake: &Path, json: bool) -> anyhow::Result<()> {
    let root = silt_lake::remote::LakeRoot::open(lake)?;
    let names = root.tables()?;
    let infos = names
        .iter()
        .map(|n| catalog::table_info_in(&root, n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for i in &infos {
        for (path, why) in &i.damaged {
            eprintln!(
                "warning: {} is not readable ({why}): its rows are not counted, and queries \
                 skip it; move it out of the lake or restore it",
                path.display()
            );
        }
    }
    if json {
        let v: Vec<serde_json::Value> = infos
            .iter()
            .map(|i| {
                serde_json::json!({
                    "table": i.name.to_string(), "format": table_format(&root, i), "rows": i.rows, "files": i.files, "bytes": i.bytes,
                    "time_column": i.time_column, "first_ts": fmt_ts(i.first_ts), "last_ts": fmt_ts(i.last_ts),
                    "damaged_files": i.damaged.iter().map(|(p, why)| serde_json::json!({"path": p.display().to_string(), "error": why})).collect::<Vec<_>>(),
                })
            })
            .collect();
        writeln!(
            std::io::stdout().lock(),
            "{}",
            serde_json::to_string_pretty(&v)?
        )?;
        return Ok(());
    }
    if infos.is_empty() {
        writeln!(
            std::io::stdout().lock(),
            "no tables in {} (import some logs with `silt import`)",
            lake.display()
        )?;
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "table",
        "rows",
        "files",
        "bytes",
        "first ts (UTC)",
        "last ts (UTC)",
    ]);
    for i in &infos {
        t.add_row(vec![
            match table_format(&root, i) {
                "delta" => format!("{} (delta)", i.name),
                _ => i.name.to_string(),
            },
            i.rows.to_string(),
            i.files.to_string(),
            human_bytes(i.bytes),
            fmt_ts(i.first_ts),
            fmt_ts(i.last_ts),
        ]);
    }
    // Written, not println!: a reader that goes away (`silt tables | head`) is an error that
    // main turns into a quiet exit, not a panic.
    writeln!(std::io::stdout().lock(), "{t}")?;
    Ok(())
}
