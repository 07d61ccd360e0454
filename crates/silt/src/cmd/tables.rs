//! `silt tables`: each table's rows, files, bytes and time range, from the files' footers.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use silt_lake::catalog;
use silt_lake::summary::human_bytes;

use crate::cli::TablesArgs;

fn fmt_ts(t: Option<i64>) -> String {
    t.and_then(chrono::DateTime::from_timestamp_micros)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
        .unwrap_or_else(|| "-".into())
}

pub fn run(a: TablesArgs) -> anyhow::Result<i32> {
    let names = catalog::tables(&a.lake)?;
    let infos = names
        .iter()
        .map(|n| catalog::table_info(&a.lake, n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if a.json {
        let v: Vec<serde_json::Value> = infos
            .iter()
            .map(|i| {
                serde_json::json!({
                    "table": i.name.to_string(), "rows": i.rows, "files": i.files, "bytes": i.bytes,
                    "time_column": i.time_column, "first_ts": fmt_ts(i.first_ts), "last_ts": fmt_ts(i.last_ts),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    if infos.is_empty() {
        println!(
            "no tables in {} (import some logs with `silt import`)",
            a.lake.display()
        );
        return Ok(0);
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
            i.name.to_string(),
            i.rows.to_string(),
            i.files.to_string(),
            human_bytes(i.bytes),
            fmt_ts(i.first_ts),
            fmt_ts(i.last_ts),
        ]);
    }
    println!("{t}");
    Ok(0)
}
