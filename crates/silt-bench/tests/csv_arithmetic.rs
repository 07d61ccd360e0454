//! Acceptance 1 (arithmetic): runs the benchmark on small generated Zeek and Suricata data with
//! `keep_files`, then recomputes every row's sizes, ratios and per-event figures from the files
//! actually written (file size from the file system, rows from the file's own footer) and the
//! input bytes from the generated logs themselves (Zeek TSV: every non-`#` line plus its
//! newline), independently of the code under test.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use silt_bench::matrix::{self, CodecSpec};
use silt_bench::{BenchOptions, BoundedCollect};
use silt_core::SourceInfo;
use silt_lake::StoreKind;

fn read_into(path: &Path, fmt: silt_readers::Format, c: &mut BoundedCollect) {
    let f = std::fs::File::open(path).unwrap();
    let mut r = std::io::BufReader::new(f);
    silt_readers::read(
        fmt,
        &mut r,
        &SourceInfo::from_path(path),
        &silt_core::ReadOptions::default(),
        c,
    )
    .unwrap();
}

fn file_rows(path: &Path, store: &str) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    if store == "parquet" {
        let r = parquet::file::reader::SerializedFileReader::new(f).unwrap();
        use parquet::file::reader::FileReader;
        r.metadata().file_metadata().num_rows() as u64
    } else {
        arrow::ipc::reader::FileReader::try_new(f, None)
            .unwrap()
            .map(|b| b.unwrap().num_rows() as u64)
            .sum()
    }
}

#[test]
fn csv_figures_match_the_files_written() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let opts = silt_gen::GenOptions {
        logs: Some(vec!["conn".into(), "dns".into()]),
        community_id: true,
        ..Default::default()
    };
    let zr = silt_gen::generate_zeek(&logs, 3000, &opts).unwrap();
    let sr = silt_gen::generate_suricata(&logs.join("eve"), 1500, &Default::default()).unwrap();

    // Independent expectations from the generated Zeek TSV files.
    let mut expect_in: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for f in &zr.files {
        let (mut rows, mut bytes) = (0u64, 0u64);
        for line in std::io::BufReader::new(std::fs::File::open(&f.path).unwrap()).split(b'\n') {
            let line = line.unwrap();
            if !line.starts_with(b"#") && !line.is_empty() {
                rows += 1;
                bytes += line.len() as u64 + 1;
            }
        }
        expect_in.insert(format!("zeek.{}", f.log), (rows, bytes));
    }

    let mut c = BoundedCollect::new(1_000_000);
    for f in &zr.files {
        read_into(&f.path, silt_readers::Format::Zeek, &mut c);
    }
    for f in &sr.files {
        read_into(&f.path, silt_readers::Format::Suricata, &mut c);
    }
    assert_eq!(c.rejects, 0);
    let tables = c.finish(true).unwrap();

    let codecs: Vec<CodecSpec> = ["none", "zstd:1"]
        .iter()
        .map(|s| CodecSpec::parse(s).unwrap())
        .collect();
    let (configs, _) = matrix::build(
        &[StoreKind::Parquet, StoreKind::Feather],
        &codecs,
        &[32 << 20],
    );
    let out = dir.path().join("report");
    let bo = BenchOptions {
        out: out.clone(),
        configs,
        repetitions: 2,
        keep_files: true,
        reads: true,
        variants: true,
        source: "generated".into(),
        ..Default::default()
    };
    let outcome = silt_bench::run(tables, &bo, &mut |_| {}).unwrap();
    let rows = silt_bench::results::read_csv(&outcome.csv).unwrap();
    // 4 configurations + 3 variants, 2 repetitions, per table.
    let schemas: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r.schema.as_str()).collect();
    assert!(
        schemas.contains("zeek.conn") && schemas.contains("zeek.dns"),
        "{schemas:?}"
    );
    assert!(
        schemas.iter().any(|s| s.starts_with("suricata.")),
        "{schemas:?}"
    );
    assert_eq!(rows.len(), schemas.len() * 7 * 2);

    for r in &rows {
        let path = Path::new(&r.file);
        let size = std::fs::metadata(path).unwrap().len();
        assert_eq!(r.output_bytes, size, "{}", r.file);
        assert_eq!(file_rows(path, &r.store), r.events, "{}", r.file);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(
            close(r.bytes_per_event, size as f64 / r.events as f64),
            "{r:?}"
        );
        assert!(
            close(r.ratio_vs_arrow, r.arrow_bytes as f64 / size as f64),
            "{r:?}"
        );
        assert!(
            close(r.ns_per_event, r.write_cpu_s * 1e9 / r.events as f64),
            "{r:?}"
        );
        assert!(
            close(r.wall_ns_per_event, r.write_wall_s * 1e9 / r.events as f64),
            "{r:?}"
        );
        let input = r.input_bytes.expect("input bytes known for read inputs");
        assert!(
            close(r.ratio_vs_input.unwrap(), input as f64 / size as f64),
            "{r:?}"
        );
        if let Some((n, bytes)) = expect_in.get(&r.schema) {
            assert_eq!(r.events, *n, "{}", r.schema);
            assert_eq!(input, *bytes, "{}", r.schema);
        }
        // Read path: the full scan returns every row; the filter counts a subset; the needle
        // exists.
        assert_eq!(r.read_scan_value, Some(r.events), "{r:?}");
        if let Some(f) = r.read_filter_value {
            // 10% of the time range: a strict subset, non-empty for tables of some size.
            assert!(f < r.events || r.events < 2, "{r:?}");
            if r.events >= 1000 {
                assert!(f > 0, "{r:?}");
            }
        }
        if let Some(n) = r.read_needle_value {
            assert!(n >= 1, "{r:?}");
        }
        assert!(r.read_scan_bytes.unwrap() > 0);
    }
    // Zeek conn has uid (needle) and proto (top-N); the filter reads fewer bytes than the scan
    // would only with pruning, so just check both were measured.
    let conn = rows.iter().find(|r| r.schema == "zeek.conn").unwrap();
    assert_eq!(conn.read_needle_column.as_deref(), Some("uid"));
    assert!(conn.read_topn_column.is_some());
    assert!(outcome.report.is_file());
}
