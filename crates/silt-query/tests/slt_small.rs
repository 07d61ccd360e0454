//! Golden SQL tests (`tests/slt/*.slt`, sqllogictest format) over the small test lake, once
//! with every file Parquet, once with every file Feather and once with both stores mixed within
//! each table: all three must give the same answers.

mod common;
mod slt_db;

use common::{build_small_lake, Store};

async fn run_variant(name: &str, pick: fn(usize) -> Store) {
    let dir = tempfile::tempdir().unwrap();
    build_small_lake(dir.path(), pick);
    let session = std::sync::Arc::new(silt_query::open(dir.path()).await.unwrap());
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    let slt_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<_> = std::fs::read_dir(&slt_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for f in files {
        let mut runner = slt_db::runner(session.clone());
        if let Err(e) = runner.run_file_async(&f).await {
            panic!("[{name}] {}: {e}", f.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_parquet() {
    run_variant("parquet", |_| Store::Parquet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_feather() {
    run_variant("feather", |_| Store::Feather).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_mixed() {
    run_variant("mixed", |i| {
        if i % 2 == 0 {
            Store::Parquet
        } else {
            Store::Feather
        }
    })
    .await;
    run_variant("mixed2", |i| {
        if i % 2 == 1 {
            Store::Parquet
        } else {
            Store::Feather
        }
    })
    .await;
}
