//! `silt verify`: flags to `silt_lake::verify::VerifyOptions`, a line per damaged file on
//! standard error as it is found, a per-table summary (or JSON) at the end.

use indicatif::{ProgressBar, ProgressStyle};
use silt_lake::summary::human_bytes;
use silt_lake::verify::{verify, verify_remote, FileResult, Outcome, VerifyOptions};

use crate::cli::VerifyArgs;

pub fn run(a: VerifyArgs) -> anyhow::Result<i32> {
    let tables = crate::opts::table_names(&a.table)?;
    let opts = VerifyOptions {
        tables,
        decode: a.decode,
    };
    let show = !a.quiet && !a.json;
    // Drawn only on a terminal (indicatif hides it otherwise).
    let bar = if show {
        ProgressBar::new_spinner()
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("a valid template"),
    );
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut on_file = |f: &FileResult| {
        files += 1;
        bytes += f.bytes;
        bar.set_message(format!(
            "{files} files, {} checked ({})",
            human_bytes(bytes),
            f.table
        ));
        bar.tick();
        if let (Outcome::Failed(why), true) = (&f.outcome, show) {
            bar.suspend(|| {
                eprintln!(
                    "{}: {} is damaged: {why}; move it out of the lake (or restore it from a copy)",
                    f.table,
                    f.path.display()
                )
            });
        }
    };
    let rep = match silt_lake::remote::LakeRoot::open(&a.lake)? {
        silt_lake::remote::LakeRoot::Dir(d) => verify(&d, &opts, &mut on_file)?,
        silt_lake::remote::LakeRoot::Remote(r) => verify_remote(&r, &opts, &mut on_file)?,
    };
    bar.finish_and_clear();
    let total = rep.total();
    let status = if total.failed > 0 { 3 } else { 0 };
    if a.json {
        let tables: Vec<serde_json::Value> = rep
            .tables
            .iter()
            .map(|(t, c)| {
                serde_json::json!({
                    "table": t.to_string(), "files": c.files, "bytes": c.bytes,
                    "checksum_ok": c.summed, "decoded_without_checksum": c.decoded,
                    "failed": c.failed, "gone": c.gone,
                })
            })
            .collect();
        let failed: Vec<serde_json::Value> = rep
            .failed
            .iter()
            .map(|(p, why)| serde_json::json!({"path": p.display().to_string(), "reason": why}))
            .collect();
        let v = serde_json::json!({
            "tables": tables, "failed_files": failed, "files": total.files,
            "bytes": total.bytes, "checksum_ok": total.summed,
            "decoded_without_checksum": total.decoded, "failed": total.failed,
            "gone": total.gone, "seconds": rep.seconds,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(status);
    }
    for (t, c) in &rep.tables {
        println!(
            "{t}: {} files, {}: {} checksum ok, {} decoded (no checksum), {} damaged{}",
            c.files,
            human_bytes(c.bytes),
            c.summed,
            c.decoded,
            c.failed,
            if c.gone > 0 {
                format!(", {} removed while checked", c.gone)
            } else {
                String::new()
            }
        );
    }
    println!(
        "{} files, {} in {:.1}s: {}",
        total.files,
        human_bytes(total.bytes),
        rep.seconds,
        if total.failed == 0 {
            "all intact".to_string()
        } else {
            format!(
                "{} damaged or unreadable (listed above{})",
                total.failed,
                if a.quiet { "; run without --quiet" } else { "" }
            )
        }
    );
    Ok(status)
}
