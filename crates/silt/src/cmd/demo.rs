//! `silt demo`: generate sample telemetry, import it into a local lake, run example queries.

use std::path::Path;

use silt_core::{FormatOptions, ReadOptions};
use silt_gen::GenOptions;
use silt_ingest::{FormatChoice, Pipeline};
use silt_lake::WriterConfig;
use silt_query::OutputFormat;

use crate::cli::DemoArgs;
use crate::{progress, render};

/// Marks a directory as made by `silt demo`, so a rerun may replace it and nothing else is touched.
const MARKER: &str = ".silt-demo";

/// The example queries: (what it shows, SQL).
pub const QUERIES: &[(&str, &str)] = &[
    (
        "Top talkers in the last ten minutes (files are sorted by ts: only the pages in the window are read, see the bytes line)",
        "SELECT id.orig_h, count(*) AS n FROM zeek.conn WHERE ts >= TIMESTAMP '2018-03-24 17:50:00' GROUP BY 1 ORDER BY n DESC LIMIT 10",
    ),
    (
        "Busiest client/server pairs with bytes",
        "SELECT id.orig_h, id.resp_h, count(*) AS conns, sum(orig_bytes + resp_bytes) AS bytes FROM zeek.conn GROUP BY 1, 2 ORDER BY bytes DESC NULLS LAST LIMIT 5",
    ),
    (
        "Internal clients in 10.0.0.0/8 querying .ru domains in a ten-minute window",
        "SELECT id.orig_h, query, count(*) AS n FROM zeek.dns WHERE ts BETWEEN TIMESTAMP '2018-03-24 17:10:00' AND TIMESTAMP '2018-03-24 17:20:00' AND query LIKE '%.ru' AND cidr_contains('10.0.0.0/8', id.orig_h) GROUP BY 1, 2 ORDER BY n DESC LIMIT 5",
    ),
    (
        "HTTP hosts by bytes received, joining conn and http on uid",
        "SELECT h.host, count(*) AS requests, sum(c.resp_bytes) AS resp_bytes FROM zeek.http h JOIN zeek.conn c ON c.uid = h.uid GROUP BY 1 ORDER BY resp_bytes DESC NULLS LAST LIMIT 5",
    ),
    (
        "Weighted average connection duration per service (weighted by bytes)",
        "SELECT service, sum(duration * (orig_bytes + resp_bytes)) / sum(orig_bytes + resp_bytes) AS weighted_duration, count(*) AS n FROM zeek.conn WHERE duration IS NOT NULL AND orig_bytes + resp_bytes > 0 GROUP BY 1 ORDER BY n DESC LIMIT 5",
    ),
    (
        "Suricata alerts with their flows (EVE join on flow_id)",
        "SELECT a.alert.signature, count(*) AS alerts, sum(f.flow.bytes_toserver) AS bytes_toserver FROM suricata.alert a JOIN suricata.flow f ON a.flow_id = f.flow_id GROUP BY 1 ORDER BY alerts DESC LIMIT 5",
    ),
];

pub fn run(a: DemoArgs) -> anyhow::Result<i32> {
    let dir = &a.dir;
    prepare_dir(dir)?;
    let logs = dir.join("logs");
    let lake = dir.join("lake");

    println!("== 1. generating sample telemetry into {}", logs.display());
    let opts = GenOptions::default();
    let z = silt_gen::generate_zeek(&logs.join("zeek"), a.events, &opts)?;
    let s = silt_gen::generate_suricata(&logs.join("suricata"), (a.events / 5).max(1), &opts)?;
    for f in z.files.iter().chain(&s.files) {
        println!("   {:<40} {:>9} records", f.path.display(), f.records);
    }

    println!(
        "\n== 2. silt import auto {} --lake {}",
        logs.display(),
        lake.display()
    );
    let inputs = silt_ingest::expand(std::slice::from_ref(&logs))?;
    let pipeline = Pipeline::new(
        FormatChoice::Auto {
            extension_first: false,
        },
        FormatOptions::new(ReadOptions::default()),
    );
    let mut bar = progress::Bar::new(false);
    let done = silt_ingest::jobs::import(
        inputs,
        pipeline,
        &lake,
        WriterConfig::default(),
        silt_ingest::Reimport::Skip,
        &mut bar,
    )?;
    drop(bar);
    render::import_summary(&done, &lake, true);

    println!("\n== 3. silt tables --lake {}", lake.display());
    render::tables(&lake, false)?;

    println!("\n== 4. example queries");
    let rt = silt_query::runtime()?;
    rt.block_on(async {
        let session = silt_query::open(&lake).await?;
        for (what, sql) in QUERIES {
            println!(
                "\n-- {what}\n$ silt query --lake {} \"{sql}\"",
                lake.display()
            );
            let r = session.query(sql).await?;
            r.write(OutputFormat::Table, &mut std::io::stdout())?;
            println!("{}", r.stats);
        }
        anyhow::Ok(())
    })?;
    println!(
        "\nThe lake is plain Parquet: try\n  silt query --lake {l} --stats \"SELECT count(*) FROM zeek.conn WHERE ts >= TIMESTAMP '2018-03-24 17:30:00'\"\n  \
         duckdb -c \"SELECT count(*) FROM read_parquet('{l}/zeek.conn/**/*.parquet', hive_partitioning=true)\"",
        l = lake.display()
    );
    Ok(0)
}

/// Creates the demo directory, replacing an earlier demo's; refuses to touch anything else.
fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let ours = dir.join(MARKER).exists();
        let empty = std::fs::read_dir(dir)?.next().is_none();
        if !ours && !empty {
            anyhow::bail!(
                "{} exists and was not made by silt demo; choose another directory with --dir",
                dir.display()
            );
        }
        for sub in ["logs", "lake"] {
            let p = dir.join(sub);
            if p.exists() {
                std::fs::remove_dir_all(&p)?;
            }
        }
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(MARKER), "made by silt demo; safe to delete\n")?;
    Ok(())
}
