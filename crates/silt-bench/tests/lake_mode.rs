//! `silt bench --lake`: tables loaded from a lake hold every row the lake has (up to the cap),
//! input bytes are unknown (empty ratios), and the benchmark runs on them.

use silt_bench::collect::load_lake;
use silt_bench::matrix::{self, CodecSpec};
use silt_bench::BenchOptions;
use silt_core::Emit;
use silt_lake::{LakeWriter, StoreKind, WriterConfig};
use std::path::{Path, PathBuf};

/// A lake under `dir/lake` imported from `events` generated records of each Zeek log in `logs`.
fn generated_lake(dir: &Path, events: u64, logs: &[&str]) -> (PathBuf, silt_gen::GenReport) {
    let zr = silt_gen::generate_zeek(
        &dir.join("logs"),
        events,
        &silt_gen::GenOptions {
            logs: Some(logs.iter().map(|l| l.to_string()).collect()),
            ..Default::default()
        },
    )
    .unwrap();
    let lake = dir.join("lake");
    let mut w = LakeWriter::new(&lake, WriterConfig::default()).unwrap();
    for f in &zr.files {
        silt_ingest::jobs::read_file(
            &silt_readers::zeek::FORMAT,
            &f.path,
            &Default::default(),
            &mut w as &mut dyn Emit,
        )
        .unwrap();
    }
    w.finish().unwrap();
    (lake, zr)
}

#[test]
fn bench_over_a_lake() {
    let dir = tempfile::tempdir().unwrap();
    let (lake, zr) = generated_lake(dir.path(), 3000, &["conn", "dns"]);

    let tables = load_lake(&lake, 1_000_000).unwrap();
    let by_name = |n: &str| tables.iter().find(|t| t.name.to_string() == n).unwrap();
    for f in &zr.files {
        let t = by_name(&format!("zeek.{}", f.log));
        assert_eq!(t.events, f.records, "{}", f.log);
        assert_eq!(t.input_bytes(), None);
        assert!(silt_core::meta::time_column(&t.schema).is_some());
    }
    // The cap keeps the first rows only.
    let capped = load_lake(&lake, 100).unwrap();
    assert!(capped.iter().all(|t| t.events <= 100));
    assert!(capped.iter().any(|t| t.capped()));

    let (configs, _) = matrix::build(
        &[StoreKind::Parquet],
        &[CodecSpec::parse("zstd:1").unwrap()],
        &[32 << 20],
    );
    let o = silt_bench::run(
        tables,
        &BenchOptions {
            out: dir.path().join("report"),
            configs,
            variants: false,
            source: "lake".into(),
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(o.rows.len(), zr.files.len());
    assert!(o
        .rows
        .iter()
        .all(|r| r.ratio_vs_input.is_none() && r.output_bytes > 0));
}

/// A lake file that cannot be read is a reject (kept in the rejects file with its path and the
/// reason), not the end of the run: the other files' rows are loaded. `load_lake` (no rejects
/// file to keep it in) refuses such a lake instead.
#[test]
fn unreadable_lake_files_are_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let (lake, _) = generated_lake(dir.path(), 500, &["conn"]);
    let good = silt_lake::catalog::data_files(&lake.join("zeek.conn")).unwrap();
    assert!(!good.is_empty());
    let part = good[0].path.parent().unwrap().to_path_buf();
    // A truncated copy of a real file (no footer) and bytes that are not Parquet at all.
    let bytes = std::fs::read(&good[0].path).unwrap();
    std::fs::write(part.join("truncated.parquet"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(part.join("noise.parquet"), b"PAR1 not really").unwrap();

    let out = dir.path().join("report");
    let mut c = silt_bench::BoundedCollect::new(1_000_000).keep_rejects(&out);
    silt_bench::collect::load_lake_into(&lake, &mut c).unwrap();
    assert_eq!(c.rejects, 2);
    let done = c.finish(false).unwrap();
    let conn = &done.tables[0];
    assert_eq!(conn.events, 500, "every row of the readable files");
    let file = done.rejects_file.expect("a rejects file");
    assert!(file.starts_with(out.join(silt_lake::rejects::REJECTS_DIR)));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for (l, name) in lines.iter().zip(["noise.parquet", "truncated.parquet"]) {
        assert!(l["source"].as_str().unwrap().ends_with(name), "{l}");
        assert_eq!(l["table"], "zeek.conn");
        assert!(
            l["reason"]
                .as_str()
                .unwrap()
                .contains("cannot read this parquet file"),
            "{l}"
        );
    }

    let e = load_lake(&lake, 1_000_000).unwrap_err().to_string();
    assert!(e.contains("cannot read this parquet file"), "{e}");
}
