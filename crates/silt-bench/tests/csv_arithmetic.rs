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
use silt_lake::StoreKind;

fn read_into(path: &Path, fmt: &silt_core::FormatSpec, c: &mut BoundedCollect) {
    silt_ingest::jobs::read_file(fmt, path, &Default::default(), c).unwrap();
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
        read_into(&f.path, &silt_readers::zeek::FORMAT, &mut c);
    }
    for f in &sr.files {
        read_into(&f.path, &silt_readers::suricata::FORMAT, &mut c);
    }
    assert_eq!(c.rejects, 0);
    let tables = c.finish(true).unwrap().tables;

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
    // 4 configurations + 4 variants (+ by-host where there is a source address), 2
    // repetitions, per table.
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
    for s in &schemas {
        let n = rows.iter().filter(|r| &r.schema == s).count();
        let by_host = rows
            .iter()
            .any(|r| &r.schema == s && r.variant == "by-host");
        assert_eq!(n, if by_host { 9 * 2 } else { 8 * 2 }, "{s}");
    }
    assert!(rows
        .iter()
        .any(|r| r.schema == "zeek.conn" && r.variant == "by-host"));

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
        if r.variant == "as-text" {
            // Typed queries do not run on the text file.
            assert_eq!(r.read_scan_value, None, "{r:?}");
            continue;
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

    // The as-text file: the same rows, every leaf text, values as the typed file prints them.
    let conn_file = |variant: &str| {
        rows.iter()
            .find(|r| {
                r.schema == "zeek.conn"
                    && r.variant == variant
                    && r.store == "parquet"
                    && r.codec == "zstd"
                    && r.repetition == 0
            })
            .map(|r| r.file.clone())
            .unwrap()
    };
    let read_all = |f: &str| {
        let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(f).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect::<Vec<_>>();
        arrow::compute::concat_batches(&b[0].schema(), &b).unwrap()
    };
    let typed = read_all(&conn_file("default"));
    let text = read_all(&conn_file("as-text"));
    assert_eq!(typed.num_rows(), text.num_rows());
    fn leaves(dt: &arrow::datatypes::DataType, out: &mut Vec<arrow::datatypes::DataType>) {
        use arrow::datatypes::DataType::*;
        match dt {
            Struct(fs) => fs.iter().for_each(|f| leaves(f.data_type(), out)),
            List(f) | LargeList(f) => leaves(f.data_type(), out),
            d => out.push(d.clone()),
        }
    }
    let mut text_leaves = Vec::new();
    for f in text.schema().fields() {
        leaves(f.data_type(), &mut text_leaves);
    }
    assert!(
        text_leaves
            .iter()
            .all(|d| matches!(d, arrow::datatypes::DataType::Utf8)),
        "{text_leaves:?}"
    );
    let port = |b: &arrow::record_batch::RecordBatch| {
        use arrow::array::AsArray;
        let id = b.column_by_name("id").unwrap().as_struct().clone();
        arrow::compute::cast(
            id.column_by_name("orig_p").unwrap(),
            &arrow::datatypes::DataType::Utf8,
        )
        .unwrap()
    };
    assert_eq!(&port(&typed), &port(&text));

    // The by-host file: every row, ordered by id.orig_h, then ts.
    let host = read_all(&conn_file("by-host"));
    assert_eq!(host.num_rows(), typed.num_rows());
    {
        use arrow::array::AsArray;
        let id = host.column_by_name("id").unwrap().as_struct().clone();
        let h = id
            .column_by_name("orig_h")
            .unwrap()
            .as_string::<i32>()
            .clone();
        let ts = host
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
            .clone();
        for i in 1..host.num_rows() {
            let (a, b) = ((h.value(i - 1), ts.value(i - 1)), (h.value(i), ts.value(i)));
            assert!(a <= b, "row {i}: {a:?} before {b:?}");
        }
    }

    // columns.csv: silt's goal file (parquet+zstd:1, first repetition) of every schema, one row
    // per leaf plus the rest of the file; together they are the file.
    let mut cols = csv::Reader::from_path(out.join("columns.csv")).unwrap();
    let cols: Vec<silt_bench::columns::ColumnSize> =
        cols.deserialize().map(|r| r.unwrap()).collect();
    for s in &schemas {
        let f = rows
            .iter()
            .find(|r| &r.schema == s && r.config == "parquet+zstd:1" && r.repetition == 0)
            .unwrap();
        let mine: Vec<_> = cols.iter().filter(|c| &c.schema == s).collect();
        assert!(mine.iter().all(|c| c.writer == "silt"));
        assert_eq!(
            mine.iter().map(|c| c.bytes).sum::<u64>(),
            f.output_bytes,
            "{s}"
        );
        let md =
            parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&f.file).unwrap())
                .unwrap();
        use parquet::file::reader::FileReader;
        let leaves = md.metadata().file_metadata().schema_descr().num_columns();
        assert_eq!(mine.len(), leaves + 1, "{s}");
        for c in &mine {
            let per = c.bytes as f64 / f.events as f64;
            assert!((c.bytes_per_event - per).abs() < 1e-9, "{c:?}");
        }
    }
}
