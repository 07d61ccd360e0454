//! Queries over a lake built from real corpus files (see /work/shared/corpus/PROVENANCE.md) by
//! the real pipeline: `silt_ingest::jobs::read_file` into `silt_lake::LakeWriter`, in Parquet and in
//! Feather. Skips when the corpus is absent.
//!
//! - `corpus_golden_*` runs `tests/slt_corpus/*.slt`, whose expected values were computed from
//!   the raw log files by a separate script splitting lines on tabs (not by silt);
//! - the other tests compute their expectations here, again by plain string splitting of the
//!   log files, and also check pruning statistics on real data.

mod slt_db;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_lake::{LakeWriter, StoreKind, WriterConfig};
use silt_query::{OutputFormat, QueryResult, SiltSession};

fn corpus() -> Option<PathBuf> {
    silt_testkit::corpus()
}

const ZEEK: &[&str] = &[
    "zeek-tsv/vast-example-pcap/conn.log.gz",
    "zeek-tsv/vast-example-pcap/files.log.gz",
    "zeek-tsv/vast-example-pcap/http.log.gz",
    "zeek-tsv/vast/conn.log",
    "zeek-tsv/vast/dns.log",
    "zeek-tsv/vast/http.log",
    "zeek-tsv/vast/small_conn.log",
    "zeek-tsv/vast/ssl.log",
];
const EVE: &str = "suricata/vast-example-pcap-eve.json.gz";

/// Imports the corpus files into a new lake at `lake`; returns the number of rejects.
fn build_lake(corpus: &Path, lake: &Path, store: StoreKind) -> u64 {
    let cfg = WriterConfig {
        store,
        ..Default::default()
    };
    let mut w = LakeWriter::new(lake, cfg).unwrap();
    let inputs: Vec<(&silt_core::FormatSpec, &str)> = ZEEK
        .iter()
        .map(|f| (&silt_readers::zeek::FORMAT, *f))
        .chain([(&silt_readers::suricata::FORMAT, EVE)])
        .collect();
    for (fmt, rel) in inputs {
        silt_ingest::jobs::read_file(fmt, &corpus.join(rel), &Default::default(), &mut w)
            .unwrap_or_else(|e| panic!("{rel}: {e:#}"));
    }
    let summary = w.finish().unwrap();
    if summary.total_rejects() > 0 {
        eprintln!("rejects: {:?}", summary.sample_rejects);
    }
    summary.total_rejects()
}

async fn session(corpus: &Path, store: StoreKind) -> (tempfile::TempDir, Arc<SiltSession>) {
    let dir = tempfile::tempdir().unwrap();
    let rejects = build_lake(corpus, dir.path(), store);
    assert_eq!(rejects, 0, "the corpus files import without rejects");
    let s = silt_query::open(dir.path()).await.unwrap();
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    (dir, Arc::new(s))
}

async fn golden(store: StoreKind) {
    let Some(corpus) = corpus() else { return };
    let (_dir, s) = session(&corpus, store).await;
    let slt_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt_corpus");
    let mut files: Vec<_> = std::fs::read_dir(&slt_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for f in files {
        let mut runner = slt_db::runner(s.clone());
        if let Err(e) = runner.run_file_async(&f).await {
            panic!("[{store:?}] {}: {e}", f.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_golden_parquet() {
    golden(StoreKind::Parquet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_golden_feather() {
    golden(StoreKind::Feather).await;
}

/// The data rows of a Zeek TSV log as field-name -> value maps (unset `-` left as is).
fn zeek_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let bytes = std::fs::read(path).unwrap();
    let text = if bytes.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .unwrap();
        s
    } else {
        String::from_utf8(bytes).unwrap()
    };
    let mut fields: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("#fields\t") {
            fields = f.split('\t').map(str::to_string).collect();
        } else if !line.starts_with('#') {
            rows.push(
                fields
                    .iter()
                    .cloned()
                    .zip(line.split('\t').map(str::to_string))
                    .collect(),
            );
        }
    }
    rows
}

/// Epoch seconds text to microseconds, by splitting at the dot.
fn micros(s: &str) -> i64 {
    let (a, b) = s.split_once('.').unwrap_or((s, "0"));
    let frac = format!("{b:0<6}");
    a.parse::<i64>().unwrap() * 1_000_000 + frac[..6].parse::<i64>().unwrap()
}

fn csv(r: &QueryResult) -> String {
    let mut out = Vec::new();
    r.write(OutputFormat::Csv, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_counts_pruning_and_lookups() {
    let Some(corpus) = corpus() else { return };
    let conn: Vec<_> = [
        "zeek-tsv/vast-example-pcap/conn.log.gz",
        "zeek-tsv/vast/conn.log",
        "zeek-tsv/vast/small_conn.log",
    ]
    .iter()
    .flat_map(|f| zeek_rows(&corpus.join(f)))
    .collect();

    for store in [StoreKind::Parquet, StoreKind::Feather] {
        let (_dir, s) = session(&corpus, store).await;

        let r = s.query("SELECT count(*) FROM zeek.conn").await.unwrap();
        assert_eq!(csv(&r), format!("count(*)\n{}\n", conn.len()));
        let all_files = r.stats.files_total;

        // One hour of 2009-11-18 (UTC): rows counted by splitting, fewer files read.
        let lo = 1_258_560_000_000_000i64; // 2009-11-18T16:00:00Z
        let hi = lo + 3_600_000_000;
        let want = conn
            .iter()
            .filter(|r| (lo..hi).contains(&micros(&r["ts"])))
            .count();
        assert!(want > 0);
        let r = s
            .query(
                "SELECT count(*) FROM zeek.conn \
                 WHERE ts >= TIMESTAMP '2009-11-18 16:00:00' AND ts < TIMESTAMP '2009-11-18 17:00:00'",
            )
            .await
            .unwrap();
        assert_eq!(csv(&r), format!("count(*)\n{want}\n"), "{store:?}");
        assert!(
            r.stats.files_selected >= 1 && r.stats.files_selected < all_files,
            "{}",
            r.stats
        );
        assert!(r.stats.bytes_scanned < r.stats.bytes_total, "{}", r.stats);

        // A uid lookup: the rows with that uid, by splitting.
        let uid = &conn[100]["uid"];
        let want = conn.iter().filter(|r| &r["uid"] == uid).count();
        let r = s
            .query(&format!(
                "SELECT count(*) FROM zeek.conn WHERE uid = '{uid}'"
            ))
            .await
            .unwrap();
        assert_eq!(csv(&r), format!("count(*)\n{want}\n"), "{store:?}");
        eprintln!("[{store:?}] uid lookup:\n{}", r.stats);
        if store == StoreKind::Parquet {
            let st = &r.stats;
            // The files' uid bounds (left out unopened), then row-group statistics and bloom
            // filters (silt-lake writes them on lookup columns such as uid) leave only a few of
            // the row groups.
            assert!(
                (st.files_total - st.files_selected)
                    + st.row_groups_pruned_bloom_filter
                    + st.row_groups_pruned_statistics
                    > 0,
                "{st}"
            );
            assert!(st.row_groups_scanned < st.row_groups_total, "{st}");
        }
    }
}
