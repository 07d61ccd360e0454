//! `silt_lake::single::SingleFileWriter` (the writer of `silt convert`): one sorted file in bounded
//! memory (spilled runs merged), schema changes unified, Feather output.

mod common;

use std::io::BufReader;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Int64Type, TimestampMicrosecondType};
use silt_core::{ReadOptions, SourceInfo};
use silt_lake::single::SingleFileWriter;
use silt_lake::{StoreKind, WriterConfig};
use silt_logs::{LogFormat, LogOptions};

/// `n` NDJSON records with times in a scrambled order; from record `n/2` on they have a new field.
fn scrambled(n: u64) -> Vec<u8> {
    // A permutation of 0..n (n is a power of two, the multiplier odd).
    records(n, |i| (i * 40_503 + 17) % n, n / 2)
}

fn convert_with(
    cfg: WriterConfig,
    name: &str,
    bytes: &[u8],
) -> (std::path::PathBuf, usize, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let mut w = SingleFileWriter::new(&path, cfg, dir.path()).unwrap();
    let lo = LogOptions {
        time_unit: Some(silt_logs::TimeUnit::Millis),
        ..LogOptions::default()
    };
    let ro = ReadOptions { batch_rows: 4096 };
    silt_logs::read(
        LogFormat::Json,
        &mut BufReader::new(bytes),
        &SourceInfo::stdin(),
        &ro,
        &lo,
        &mut w,
    )
    .unwrap();
    let s = w.finish().unwrap();
    assert_eq!(s.rejects, 0);
    // Only the output is left: no temporary run files.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [name], "{names:?}");
    (path, s.runs, dir)
}

#[test]
fn spilled_runs_merge_into_one_sorted_file() {
    let n = 1u64 << 16;
    let bytes = scrambled(n);
    let cfg = WriterConfig {
        memory_bytes: 3 << 20, // 1 MiB buffer: several runs
        ..WriterConfig::default()
    };
    let (path, runs, _dir) = convert_with(cfg, "out.parquet", &bytes);
    assert!(runs >= 3, "runs: {runs}");
    let b = common::read_parquet(&path);
    assert_eq!(b.num_rows() as u64, n);
    let ts = b
        .column_by_name("ts")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    let k = b.column_by_name("k").unwrap().as_primitive::<Int64Type>();
    for i in 0..b.num_rows() {
        // Sorted by time, and every k appears exactly once (k = position after sorting).
        assert_eq!(k.value(i), i as i64);
        assert_eq!(ts.value(i), (1_700_000_000_000 + i as i64) * 1000);
    }
    // The field that appeared half way is in the file, null where it was absent.
    let later = b.column_by_name("later").unwrap().as_string::<i32>();
    assert_eq!(later.null_count() as u64, n / 2);
}

#[test]
fn in_memory_and_feather() {
    let bytes = scrambled(1 << 10);
    let cfg = WriterConfig {
        store: StoreKind::Feather,
        codec: silt_lake::Codec::Lz4,
        ..WriterConfig::default()
    };
    let (path, runs, _dir) = convert_with(cfg, "out.feather", &bytes);
    assert_eq!(runs, 0);
    let f = std::fs::File::open(&path).unwrap();
    let r = arrow::ipc::reader::FileReader::try_new(f, None).unwrap();
    let batches: Vec<_> = r.map(|b| b.unwrap()).collect();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 1 << 10);
    let first = batches[0]
        .column_by_name("k")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!(first.value(0), 0);
    assert_eq!(first.value(1), 1);
}

/// `n` NDJSON records whose times follow `time_of(i)`; `k` is the record's rank by time.
fn records(n: u64, time_of: impl Fn(u64) -> u64, later_from: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let k = time_of(i);
        let extra = if i >= later_from {
            format!(",\"later\":\"x{i}\"")
        } else {
            String::new()
        };
        out.extend_from_slice(
            format!(
                "{{\"ts\":{},\"k\":{k},\"pad\":\"{}\"{extra}}}\n",
                1_700_000_000_000i64 + k as i64,
                "p".repeat(40)
            )
            .as_bytes(),
        );
    }
    out
}

/// A 1 MiB sort buffer and 1 MiB for late rows.
fn small_buffers() -> WriterConfig {
    WriterConfig {
        memory_bytes: 3 << 20,
        sort_buffer_bytes: 1 << 20,
        ..WriterConfig::default()
    }
}

/// The file holds `n` rows sorted by time, with `k` = position.
fn assert_sorted_ranks(path: &std::path::Path, n: u64) {
    let b = common::read_parquet(path);
    assert_eq!(b.num_rows() as u64, n);
    let k = b.column_by_name("k").unwrap().as_primitive::<Int64Type>();
    let ts = b
        .column_by_name("ts")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    for i in 0..b.num_rows() {
        assert_eq!(k.value(i), i as i64, "row {i}");
        assert_eq!(ts.value(i), (1_700_000_000_000 + i as i64) * 1000);
    }
}

#[test]
fn in_order_input_larger_than_memory_is_written_in_one_pass() {
    // 64Ki records (about 6 MiB as Arrow) through a 1 MiB sort buffer: nothing is late, so the
    // output is written once, with no temporary runs to merge.
    let n = 1u64 << 16;
    let cfg = small_buffers();
    let (path, runs, _dir) = convert_with(cfg, "out.parquet", &records(n, |i| i, n));
    assert_eq!(runs, 0);
    assert_sorted_ranks(&path, n);
}

#[test]
fn rows_out_of_order_within_the_sort_buffer_still_make_one_pass() {
    // Pairs swapped (1,0,3,2,...): out of order by one row, far less than half the buffer.
    let n = 1u64 << 16;
    let cfg = small_buffers();
    let (path, runs, _dir) = convert_with(cfg, "out.parquet", &records(n, |i| i ^ 1, n));
    assert_eq!(runs, 0);
    assert_sorted_ranks(&path, n);
}

#[test]
fn late_rows_are_merged_into_the_one_file() {
    // In order, except that every 100th record arrives 30k records late (the 1 MiB buffer holds
    // about 10k): those rows are older than what the main run holds by then, so they are kept
    // aside and merged at the end. The new field half way also closes the main run.
    let n = 1u64 << 16;
    let mut arrival: Vec<u64> = Vec::new();
    let mut delayed: std::collections::VecDeque<(u64, u64)> = Default::default();
    for t in 0..n {
        if t % 100 == 0 && t + 30_000 < n {
            delayed.push_back((t + 30_000, t));
        } else {
            arrival.push(t);
        }
        while delayed.front().is_some_and(|&(due, _)| due <= t) {
            arrival.push(delayed.pop_front().unwrap().1);
        }
    }
    arrival.extend(delayed.into_iter().map(|(_, t)| t));
    assert_eq!(arrival.len() as u64, n);
    let cfg = small_buffers();
    let bytes = records(n, |i| arrival[i as usize], n / 2);
    let (path, runs, _dir) = convert_with(cfg, "out.parquet", &bytes);
    assert!(runs >= 2, "runs: {runs}");
    assert_sorted_ranks(&path, n);
}

#[test]
fn a_sort_key_widened_from_integer_to_float_half_way() {
    // `--sort v`: integers first, then numbers with fractions (the column becomes a float).
    let n = 1u64 << 15;
    let mut bytes = Vec::new();
    for i in 0..n {
        let v = if i < n / 2 {
            format!("{}", n - i)
        } else {
            format!("{}.5", n - i)
        };
        bytes.extend_from_slice(
            format!("{{\"v\":{v},\"pad\":\"{}\"}}\n", "p".repeat(40)).as_bytes(),
        );
    }
    let cfg = WriterConfig {
        sort: vec!["v".into()],
        ..small_buffers()
    };
    let (path, _runs, _dir) = convert_with(cfg, "out.parquet", &bytes);
    let b = common::read_parquet(&path);
    assert_eq!(b.num_rows() as u64, n);
    let v = b
        .column_by_name("v")
        .unwrap()
        .as_primitive::<arrow::datatypes::Float64Type>();
    assert!((1..b.num_rows()).all(|i| v.value(i - 1) <= v.value(i)));
}

#[test]
fn many_schema_changes_merge_into_one_sorted_file() {
    // A new field every 2,048 records (batches of 4,096: 16 schema changes, each closing the part
    // written so far), times in scrambled order: every part and the late rows are merged.
    let n = 1u64 << 16;
    let mut bytes = Vec::new();
    for i in 0..n {
        let k = (i * 40_503 + 17) % n;
        bytes.extend_from_slice(
            format!(
                "{{\"ts\":{},\"k\":{k},\"f{}\":{i}}}\n",
                1_700_000_000_000i64 + k as i64,
                i / 2048
            )
            .as_bytes(),
        );
    }
    let (path, runs, _dir) = convert_with(small_buffers(), "out.parquet", &bytes);
    assert!(runs >= 16, "runs: {runs}");
    assert_sorted_ranks(&path, n);
    let b = common::read_parquet(&path);
    for f in 0..32 {
        let c = b.column_by_name(&format!("f{f}")).expect("every field");
        assert_eq!(c.len() - c.null_count(), 2048, "f{f}");
    }
}
