//! `silt compact`: flags to `silt_lake::compact::CompactOptions`, a line per merged group on
//! standard error, a per-table summary (or JSON) at the end.

use std::collections::BTreeMap;

use silt_lake::compact::{compact, CompactOptions, GroupResult};
use silt_lake::summary::human_bytes;
use silt_lake::WriterConfig;

use crate::cli::CompactArgs;

pub fn run(a: CompactArgs) -> anyhow::Result<i32> {
    let tables = crate::opts::table_names(&a.table)?;
    let writer = WriterConfig {
        codec: a.codec.parse().map_err(anyhow::Error::msg)?,
        level: a.level,
        memory_bytes: a.memory,
        ..WriterConfig::default()
    };
    writer.validate().map_err(anyhow::Error::msg)?;
    let opts = CompactOptions {
        tables,
        older_than: a.older_than,
        target_bytes: a.target_file_size as u64,
        writer,
        dry_run: a.dry_run,
        ..CompactOptions::default()
    };
    let show = !a.quiet && !a.json;
    let mut on_group = |g: &GroupResult| {
        if !show {
            return;
        }
        let part = if g.partition.is_empty() {
            String::new()
        } else {
            format!("/{}", g.partition)
        };
        for (path, e) in &g.damaged {
            eprintln!(
                "{}{part}: {} left in place, damaged ({e}); move it out of the lake (or restore \
                 it from a copy)",
                g.table,
                path.display()
            );
        }
        match &g.error {
            Some(e) => eprintln!("{}{part}: {} files NOT compacted: {e}", g.table, g.inputs),
            None if g.output.is_none() && !a.dry_run => {}
            None if a.dry_run => eprintln!(
                "{}{part}: would merge {} files, {}",
                g.table,
                g.inputs,
                human_bytes(g.bytes_in)
            ),
            None => eprintln!(
                "{}{part}: {} files, {} -> 1 file, {} ({} rows, {:.2}s)",
                g.table,
                g.inputs,
                human_bytes(g.bytes_in),
                human_bytes(g.bytes_out),
                g.rows,
                g.seconds
            ),
        }
    };
    let rep = match silt_lake::remote::LakeRoot::open(&a.lake)? {
        silt_lake::remote::LakeRoot::Dir(d) => compact(&d, &opts, &mut on_group)?,
        silt_lake::remote::LakeRoot::Remote(r) => {
            silt_lake::remote::compact::compact(&r, &opts, None, &mut on_group)?
        }
    };

    #[derive(Default)]
    struct Sum {
        groups: usize,
        files_in: usize,
        files_out: usize,
        bytes_in: u64,
        bytes_out: u64,
        rows: u64,
        seconds: f64,
        failed: usize,
        damaged: usize,
    }
    let mut per: BTreeMap<String, Sum> = BTreeMap::new();
    for g in &rep.groups {
        let s = per.entry(g.table.to_string()).or_default();
        s.groups += 1;
        s.damaged += g.damaged.len();
        if g.error.is_some() {
            s.failed += 1;
            continue;
        }
        if g.output.is_none() && !a.dry_run {
            // Damaged inputs left fewer than two to merge.
            continue;
        }
        s.files_in += g.inputs;
        s.files_out += usize::from(!a.dry_run);
        s.bytes_in += g.bytes_in;
        s.bytes_out += g.bytes_out;
        s.rows += g.rows;
        s.seconds += g.seconds;
    }
    if a.json {
        let tables: Vec<serde_json::Value> = per
            .iter()
            .map(|(t, s)| {
                serde_json::json!({
                    "table": t, "groups": s.groups, "failed": s.failed, "damaged": s.damaged,
                    "files_in": s.files_in,
                    "files_out": s.files_out, "bytes_in": s.bytes_in, "bytes_out": s.bytes_out,
                    "rows": s.rows, "seconds": s.seconds,
                })
            })
            .collect();
        let errors: Vec<serde_json::Value> = rep
            .groups
            .iter()
            .filter_map(|g| {
                g.error.as_ref().map(|e| {
                    serde_json::json!({"table": g.table.to_string(), "partition": g.partition, "error": e})
                })
            })
            .collect();
        let damaged: Vec<serde_json::Value> = rep
            .groups
            .iter()
            .flat_map(|g| {
                g.damaged.iter().map(|(path, e)| {
                    serde_json::json!({"table": g.table.to_string(), "partition": g.partition,
                        "file": path.display().to_string(), "error": e})
                })
            })
            .collect();
        let v = serde_json::json!({
            "dry_run": a.dry_run, "tables": tables, "errors": errors, "damaged_files": damaged,
            "in_flight": rep.in_flight,
            "recovered": {
                "completed": rep.recovery.completed, "abandoned": rep.recovery.abandoned,
                "inputs_removed": rep.recovery.inputs_removed, "dead_import_files": rep.dead_import_files,
            },
            "seconds": rep.seconds,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        if !rep.recovery.is_empty() || rep.dead_import_files > 0 {
            println!(
                "recovered first: {} interrupted compaction(s) finished ({} old file(s) removed), {} undone; {} file(s) of dead imports removed",
                rep.recovery.completed,
                rep.recovery.inputs_removed,
                rep.recovery.abandoned,
                rep.dead_import_files
            );
        }
        if per.is_empty() {
            println!(
                "nothing to compact in {} (no partition has two files under half of --target-file-size{})",
                a.lake.display(),
                if a.older_than.is_zero() {
                    String::new()
                } else {
                    " older than --older-than".into()
                }
            );
        }
        for (t, s) in &per {
            let mbps = s.bytes_in as f64 / 1e6 / s.seconds.max(1e-9);
            if !a.dry_run && s.files_in == 0 && s.failed == 0 {
                println!(
                    "{t}: nothing merged, {} damaged file(s) left in place",
                    s.damaged
                );
            } else if a.dry_run {
                println!(
                    "{t}: would merge {} files ({}) into {} file(s)",
                    s.files_in,
                    human_bytes(s.bytes_in),
                    s.groups
                );
            } else {
                println!(
                    "{t}: {} files ({}) -> {} file(s) ({}), {} rows, {:.1}s, {:.1} MB/s{}",
                    s.files_in,
                    human_bytes(s.bytes_in),
                    s.files_out,
                    human_bytes(s.bytes_out),
                    s.rows,
                    s.seconds,
                    mbps,
                    match (s.failed, s.damaged) {
                        (0, 0) => String::new(),
                        (f, 0) => format!(", {f} group(s) FAILED"),
                        (0, d) => format!(", {d} damaged file(s) left in place"),
                        (f, d) =>
                            format!(", {f} group(s) FAILED, {d} damaged file(s) left in place"),
                    }
                );
            }
        }
        if rep.in_flight > 0 {
            println!(
                "left {} file(s) of imports still running alone",
                rep.in_flight
            );
        }
    }
    Ok(if rep.failed() > 0 { 3 } else { 0 })
}
