//! `silt retain`: flags to `silt_lake::retain::RetainOptions`, the partitions dropped printed.

use std::time::SystemTime;

use silt_lake::retain::{retain, RetainOptions};
use silt_lake::summary::human_bytes;

use crate::cli::RetainArgs;

pub fn run(a: RetainArgs) -> anyhow::Result<i32> {
    let per_table = crate::opts::retention_windows(&a.table, "--table")?;
    let opts = RetainOptions {
        keep: a.keep,
        per_table,
        dry_run: a.dry_run,
    };
    let rep = match silt_lake::remote::LakeRoot::open(&a.lake)? {
        silt_lake::remote::LakeRoot::Dir(d) => retain(&d, &opts, SystemTime::now())?,
        silt_lake::remote::LakeRoot::Remote(r) => {
            silt_lake::remote::retain::retain(&r, &opts, SystemTime::now())?
        }
    };
    if a.json {
        let dropped: Vec<serde_json::Value> = rep
            .dropped
            .iter()
            .map(|d| {
                serde_json::json!({"table": d.table.to_string(), "partition": d.partition,
                    "files": d.files, "bytes": d.bytes})
            })
            .collect();
        let busy: Vec<serde_json::Value> = rep
            .busy
            .iter()
            .map(|(t, p)| serde_json::json!({"table": t.to_string(), "partition": p}))
            .collect();
        let v = serde_json::json!({
            "dry_run": a.dry_run, "dropped": dropped, "busy": busy,
            "not_partitioned": rep.not_partitioned.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    let verb = if a.dry_run { "would drop" } else { "dropped" };
    for d in &rep.dropped {
        println!(
            "{verb} {}/{} ({} files, {})",
            d.table,
            d.partition,
            d.files,
            human_bytes(d.bytes)
        );
    }
    let files: usize = rep.dropped.iter().map(|d| d.files).sum();
    let bytes: u64 = rep.dropped.iter().map(|d| d.bytes).sum();
    println!(
        "{verb} {} partition(s), {files} file(s), {}",
        rep.dropped.len(),
        human_bytes(bytes)
    );
    for (t, p) in &rep.busy {
        println!("kept {t}/{p} for now: an import or flush is writing into it");
    }
    for t in &rep.not_partitioned {
        println!(
            "kept {t}: it has no time partitions (imported with --partition none), so nothing says how old its rows are"
        );
    }
    Ok(0)
}
