//! `silt bench --lake`: tables loaded from a lake hold every row the lake has (up to the cap),
//! input bytes are unknown (empty ratios), and the benchmark runs on them.

use silt_bench::collect::load_lake;
use silt_bench::matrix::{self, CodecSpec};
use silt_bench::BenchOptions;
use silt_core::{Emit, SourceInfo};
use silt_lake::{LakeWriter, StoreKind, WriterConfig};

#[test]
fn bench_over_a_lake() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let zr = silt_gen::generate_zeek(
        &logs,
        3000,
        &silt_gen::GenOptions {
            logs: Some(vec!["conn".into(), "dns".into()]),
            ..Default::default()
        },
    )
    .unwrap();
    let lake = dir.path().join("lake");
    let mut w = LakeWriter::new(&lake, WriterConfig::default()).unwrap();
    for f in &zr.files {
        let mut r = std::io::BufReader::new(std::fs::File::open(&f.path).unwrap());
        silt_readers::read(
            silt_readers::Format::Zeek,
            &mut r,
            &SourceInfo::from_path(&f.path),
            &Default::default(),
            &mut w as &mut dyn Emit,
        )
        .unwrap();
    }
    w.finish().unwrap();

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
