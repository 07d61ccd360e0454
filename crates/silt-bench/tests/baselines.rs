//! Goal 3's baselines for real: DuckDB and pyarrow (from the project's venv, `scripts/pyenv.sh`,
//! which installs them from PyPI on first use) write a small generated table `--repetitions`
//! times; the results must hold the median of the repetitions, the same rows as silt's table,
//! and the size of the file each tool left; `baselines.csv` must list every repetition. Skips
//! with a message when no Python with duckdb and pyarrow can be had (fails in CI: silt-testkit).

use std::path::Path;

use silt_bench::matrix::{self, CodecSpec};
use silt_bench::{BenchOptions, BoundedCollect};
use silt_lake::StoreKind;

/// Runs the benchmark with baselines on 3,000 generated conn rows: Parquet with `codec` only,
/// three repetitions, files kept. `None` when no Python with duckdb and pyarrow can be had.
fn bench(dir: &Path, codec: &str) -> Option<silt_bench::BenchOutcome> {
    let py = match silt_bench::baselines::find_python(None) {
        Ok(p) => p,
        Err(e) => return silt_testkit::skip(&e),
    };
    let logs = dir.join("logs");
    let zr = silt_gen::generate_zeek(
        &logs,
        3000,
        &silt_gen::GenOptions {
            logs: Some(vec!["conn".into()]),
            ..Default::default()
        },
    )
    .unwrap();
    let mut c = BoundedCollect::new(1_000_000);
    for f in &zr.files {
        silt_ingest::jobs::read_file(
            &silt_readers::zeek::FORMAT,
            &f.path,
            &Default::default(),
            &mut c,
        )
        .unwrap();
    }
    let (configs, _) = matrix::build(
        &[StoreKind::Parquet],
        &[CodecSpec::parse(codec).unwrap()],
        &[32 << 20],
    );
    let o = silt_bench::run(
        c.finish(true).unwrap().tables,
        &BenchOptions {
            out: dir.join("report"),
            configs,
            repetitions: 3,
            reads: false,
            variants: false,
            baselines: true,
            python: Some(py),
            keep_files: true,
            source: "generated test data".into(),
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    Some(o)
}

/// Without silt's zstd:1 configuration in the matrix, the baselines still run (after the last
/// configuration of the table).
#[test]
fn baselines_run_without_the_goal_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let Some(o) = bench(dir.path(), "none") else {
        return;
    };
    assert_eq!(o.baselines.len(), 2, "{:#?}", o.baselines);
    assert!(o
        .baselines
        .iter()
        .all(|b| b.error.is_none() && b.rows == 3000));
}

#[test]
fn baselines_repeat_and_keep_the_median() {
    let dir = tempfile::tempdir().unwrap();
    let Some(o) = bench(dir.path(), "zstd:1") else {
        return;
    };
    let out = dir.path().join("report");
    let events = o.rows[0].events;
    let mut tools: Vec<&str> = o.baselines.iter().map(|b| b.tool.as_str()).collect();
    tools.sort();
    assert_eq!(tools, ["duckdb", "pyarrow"], "{:#?}", o.baselines);
    for b in &o.baselines {
        assert_eq!(b.error, None);
        assert_eq!(b.schema, "zeek.conn");
        assert_eq!(b.rows, events, "{} wrote silt's rows", b.tool);
        assert_eq!(b.repetitions, 3);
        assert_eq!(b.cpu_s_each.len(), 3);
        let mut each = b.cpu_s_each.clone();
        each.sort_by(f64::total_cmp);
        assert_eq!(b.cpu_s, each[1], "{}: the median of {each:?}", b.tool);
        let file = b.file.as_deref().expect("the file the tool wrote");
        assert_eq!(
            std::fs::metadata(file).unwrap().len(),
            b.output_bytes,
            "{file}"
        );
        assert!(Path::new(file).starts_with(out.join("baselines").join("zeek.conn")));
    }
    let csv = std::fs::read_to_string(out.join("baselines.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "cpu_s_each").unwrap();
    for line in csv.lines().skip(1) {
        assert_eq!(line.split(',').nth(col).unwrap().split(';').count(), 3);
    }

    // With the baselines, columns.csv also holds the order-0 estimate of the same rows: one row
    // per leaf of silt's file, the same names, and less in total than any writer's file.
    let cols: Vec<silt_bench::columns::ColumnSize> =
        csv::Reader::from_path(out.join("columns.csv"))
            .unwrap()
            .deserialize()
            .map(|r| r.unwrap())
            .collect();
    let names = |w: &str| -> Vec<String> {
        cols.iter()
            .filter(|c| c.writer == w && c.column != silt_bench::columns::OVERHEAD)
            .map(|c| c.column.clone())
            .collect()
    };
    let est = silt_bench::entropy::WRITER;
    assert_eq!(names(est), names("silt"));
    let total = |w: &str| -> u64 { cols.iter().filter(|c| c.writer == w).map(|c| c.bytes).sum() };
    for w in ["silt", "duckdb", "pyarrow"] {
        assert!(total(est) < total(w), "{w}: {} vs {}", total(w), total(est));
    }
    assert!(cols
        .iter()
        .filter(|c| c.writer == est)
        .all(|c| ["dictionary", "plain", "delta"].contains(&c.encodings.as_str())));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains(&format!("{est}: ")), "summary line");
}
