//! Benchmark of silt-rdns: generates a Rapid7-shaped `.csv.gz`, builds the index within a
//! memory budget and measures lookups. Touches only `--dir` (default ./rdns-bench-data).
//!
//! `rdns-bench --rows 20000000 [--memory-mib 256] [--block 128] [--level 9] [--dict 32768]
//!  [--no-templates] [--sorted] [--queries 2000000] [--dir D] [--reuse] [--keep] [--kv redb,rocksdb]`
//!
//! `rdns-bench --index IDX --lookups FILE [--kv STORES] [--dir D]` measures an existing index (left in
//! place) on the addresses of FILE (one per line, in order; `bench/rasp.sh` gives the source and
//! destination addresses of its capture's samples) instead of generated query sets.
//!
//! `--kv redb,rocksdb` also loads the index's pairs (in key order) into embedded key-value
//! stores and runs the same queries against them in the same run: bytes on disk and lookups/s
//! side by side with the index's. The address is the key (4 or 16 big-endian bytes; RocksDB's
//! keys carry a leading 4 or 6 so that every IPv4 key sorts before every IPv6 one), the name the
//! value.
//! - `redb`: a pure-Rust B-tree store; pairs inserted one write transaction per million, then
//!   `compact()`. The file reaches about 190 bytes per pair while loading (about 90 allocated
//!   at rest, in a sparse file of 190), so 200M pairs would need ~37 GB of free disk.
//! - `rocksdb` (needs the crate's `rocksdb` feature): an LSM tree, bulk-loaded the way RocksDB
//!   documents for sorted data (`SstFileWriter` files, then `ingest_external_file`), zstd
//!   blocks, a 10-bit bloom filter per key, a 64 MiB block cache.

use std::fs::File;
use std::io::BufReader;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use silt_rdns::{gen, BuildOptions, CacheOptions, RdnsIndex};

struct Args {
    rows: u64,
    memory_mib: usize,
    block: usize,
    level: i32,
    dict: usize,
    templates: bool,
    sorted: bool,
    queries: usize,
    dir: PathBuf,
    reuse: bool,
    keep: bool,
    skip_build: bool,
    /// Key-value stores to compare with (`--kv redb,rocksdb`).
    kv: Vec<Store>,
    /// An existing index to measure (nothing generated or built, the index kept).
    index: Option<PathBuf>,
    /// Addresses to look up, one per line.
    lookups: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        rows: 20_000_000,
        memory_mib: 256,
        block: 128,
        level: 9,
        dict: 32 << 10,
        templates: true,
        sorted: false,
        queries: 2_000_000,
        dir: PathBuf::from("rdns-bench-data"),
        reuse: false,
        keep: false,
        skip_build: false,
        kv: Vec::new(),
        index: None,
        lookups: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().with_context(|| format!("{k} needs a value"));
        match k.as_str() {
            "--rows" => a.rows = v()?.replace('_', "").parse()?,
            "--memory-mib" => a.memory_mib = v()?.parse()?,
            "--block" => a.block = v()?.parse()?,
            "--level" => a.level = v()?.parse()?,
            "--dict" => a.dict = v()?.parse()?,
            "--queries" => a.queries = v()?.parse()?,
            "--dir" => a.dir = PathBuf::from(v()?),
            "--no-templates" => a.templates = false,
            "--sorted" => a.sorted = true,
            "--reuse" => a.reuse = true,
            "--keep" => a.keep = true,
            "--skip-build" => a.skip_build = true,
            "--kv" => {
                for name in v()?.split(',') {
                    a.kv.push(match name {
                        "redb" => Store::Redb,
                        "rocksdb" if cfg!(feature = "rocksdb") => Store::Rocks,
                        "rocksdb" => bail!(
                            "--kv rocksdb needs the rocksdb feature: cargo build --release -p silt-rdns --features rocksdb --example rdns-bench"
                        ),
                        _ => bail!("--kv takes redb, rocksdb or both (comma-separated), not {name:?}"),
                    });
                }
            }
            "--index" => a.index = Some(PathBuf::from(v()?)),
            "--lookups" => a.lookups = Some(PathBuf::from(v()?)),
            _ => bail!("unknown argument {k} (see the doc comment of src/bin/rdns-bench.rs)"),
        }
    }
    Ok(a)
}

/// Cache size, overridable with RDNS_RESULT_CACHE (entries).
fn cache_opts() -> CacheOptions {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse().ok());
    let d = CacheOptions::default();
    CacheOptions {
        results: env("RDNS_RESULT_CACHE").unwrap_or(d.results),
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// Drops the file's pages from the page cache (cold-cache measurements).
fn drop_cache(path: &std::path::Path) {
    if let Ok(f) = File::open(path) {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on an open descriptor.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

fn main() -> Result<()> {
    let a = parse_args()?;
    std::fs::create_dir_all(&a.dir)?;
    if let Some(idx) = &a.index {
        let Some(file) = &a.lookups else {
            bail!("--index needs --lookups FILE (the addresses to look up)");
        };
        return given_lookups(&a, idx, file);
    }
    let csv = a.dir.join(format!(
        "rdns-{}{}.csv.gz",
        a.rows,
        if a.sorted { "-sorted" } else { "" }
    ));
    if !(a.reuse && csv.exists()) {
        let t = Instant::now();
        let mut o = gen::GenOptions::new(a.rows, 42);
        if a.sorted {
            o.order = gen::Order::Sorted;
        }
        let f = std::io::BufWriter::with_capacity(1 << 20, File::create(&csv)?);
        gen::write_csv_gz_with(&o, f, |_| {})?;
        let s = t.elapsed().as_secs_f64();
        println!(
            "generate: {} rows in {s:.1} s ({:.2} M rows/s)",
            a.rows,
            a.rows as f64 / s / 1e6
        );
    }
    let gz_bytes = std::fs::metadata(&csv)?.len();
    println!(
        "csv.gz: {} ({:.1} MiB, {:.2} bytes/row)",
        csv.display(),
        mib(gz_bytes),
        gz_bytes as f64 / a.rows as f64
    );

    let idx_path = a.dir.join(format!("rdns-{}.idx", a.rows));
    if !(a.skip_build && idx_path.exists()) {
        let rss_before = silt_rdns::peak_rss_bytes().unwrap_or(0);
        let reset = silt_rdns::reset_peak_rss();
        let opts = BuildOptions {
            memory: a.memory_mib << 20,
            tmp_dir: a.dir.clone(),
            block_entries: a.block,
            zstd_level: a.level,
            dict_size: a.dict,
            templates: a.templates,
            ..Default::default()
        };
        let input = BufReader::with_capacity(
            1 << 20,
            flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 20, File::open(&csv)?)),
        );
        let r = silt_rdns::build(input, &idx_path, opts)?;
        let peak = silt_rdns::peak_rss_bytes().unwrap_or(0);
        let secs = r.elapsed.as_secs_f64();
        println!(
            "build: {} rows in {secs:.1} s ({:.2} M rows/s); runs {} merge passes {}; unique v4 {} v6 {} dups {} rejects {}",
            r.rows_in, r.rows_in as f64 / secs / 1e6, r.runs, r.merge_passes, r.unique_v4, r.unique_v6, r.duplicates, r.rejects
        );
        println!(
            "build peak RSS (VmHWM{}): {:.1} MiB with --memory-mib {} (RSS before build {:.1} MiB)",
            if reset {
                ", reset before build"
            } else {
                ", whole process"
            },
            mib(peak),
            a.memory_mib,
            mib(rss_before)
        );
        println!(
            "names: {:.1} MiB raw, {:.1} MiB after templates ({:.0} %); dict {} bytes; blocks {}",
            mib(r.name_bytes),
            mib(r.templated_name_bytes),
            100.0 * r.templated_name_bytes as f64 / r.name_bytes.max(1) as f64,
            r.dict_bytes,
            r.blocks
        );
        println!(
            "index: {:.1} MiB = {:.2} bytes/entry; index/csv.gz = {:.3}",
            mib(r.bytes_written),
            r.bytes_written as f64 / r.unique() as f64,
            r.bytes_written as f64 / gz_bytes as f64
        );
    }

    // Present keys: a reservoir sample of the index itself.
    let idx = RdnsIndex::open(&idx_path)?;
    let mut rng = SmallRng::seed_from_u64(7);
    let mut present: Vec<IpAddr> = Vec::with_capacity(1 << 20);
    let mut seen = 0u64;
    let t = Instant::now();
    idx.for_each(|ip, _| {
        seen += 1;
        if present.len() < 1 << 20 {
            present.push(ip);
        } else {
            let j = rng.random_range(0..seen);
            if (j as usize) < present.len() {
                present[j as usize] = ip;
            }
        }
    })?;
    println!(
        "full scan (decode every entry): {:.1} s, {:.2} M entries/s",
        t.elapsed().as_secs_f64(),
        seen as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    drop(idx);

    let q = a.queries;
    let present_q: Vec<Option<IpAddr>> = (0..q)
        .map(|_| Some(present[rng.random_range(0..present.len())]))
        .collect();
    let absent_q: Vec<Option<IpAddr>> = (0..q)
        .map(|_| {
            Some(IpAddr::V4(Ipv4Addr::from(
                rng.random_range((1u32 << 24)..(224u32 << 24)),
            )))
        })
        .collect();
    // Zipf (s = 1) over 100k distinct addresses: 90 % present, 10 % random (mostly absent).
    let distinct: Vec<IpAddr> = (0..100_000)
        .map(|i| {
            if i % 10 == 9 {
                IpAddr::V4(Ipv4Addr::from(rng.random::<u32>()))
            } else {
                present[rng.random_range(0..present.len())]
            }
        })
        .collect();
    let mut cdf = Vec::with_capacity(distinct.len());
    let mut acc = 0.0;
    for r in 1..=distinct.len() {
        acc += 1.0 / r as f64;
        cdf.push(acc);
    }
    let zipf_q: Vec<Option<IpAddr>> = (0..q * 2)
        .map(|_| {
            let u = rng.random::<f64>() * acc;
            Some(distinct[cdf.partition_point(|c| *c < u).min(distinct.len() - 1)])
        })
        .collect();

    println!("lookups ({} queries per case; fresh index = empty caches; 'cold' = index pages dropped from the page cache first):", q);
    for (name, qs) in [
        ("present", &present_q),
        ("absent", &absent_q),
        ("zipf-100k", &zipf_q),
    ] {
        for cold in [true, false] {
            let (hits, single, batch1) = one_thread_passes(&idx_path, qs, cold)?;
            // batches, 2 threads sharing one index (fresh)
            if cold {
                drop_cache(&idx_path);
            }
            let idx = Arc::new(RdnsIndex::open_with(&idx_path, cache_opts())?);
            let t = Instant::now();
            let half = qs.len() / 2;
            let parts = [&qs[..half], &qs[half..]];
            std::thread::scope(|s| -> Result<()> {
                let hs: Vec<_> = parts
                    .iter()
                    .map(|p| {
                        let idx = idx.clone();
                        s.spawn(move || -> Result<()> {
                            let mut out = Vec::new();
                            for chunk in p.chunks(8192) {
                                idx.lookup_many(chunk, &mut out)?;
                            }
                            Ok(())
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().map_err(|_| anyhow::anyhow!("thread panicked"))??;
                }
                Ok(())
            })?;
            let batch2 = qs.len() as f64 / t.elapsed().as_secs_f64();
            println!(
                "  {name:<10} {:<5} hits {:>5.1} %  lookup 1 thr {:>6.2} M/s  lookup_many 1 thr {:>6.2} M/s  lookup_many 2 thr {:>6.2} M/s",
                if cold { "cold" } else { "warm" },
                100.0 * hits as f64 / qs.len() as f64, single / 1e6, batch1 / 1e6, batch2 / 1e6
            );
        }
    }
    // Steady state of the repeated set: a second pass over the same queries, caches warm.
    let idx = RdnsIndex::open(&idx_path)?;
    let mut out = Vec::new();
    for chunk in zipf_q.chunks(8192) {
        idx.lookup_many(chunk, &mut out)?;
    }
    let t = Instant::now();
    for chunk in zipf_q.chunks(8192) {
        idx.lookup_many(chunk, &mut out)?;
    }
    let b = zipf_q.len() as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for ip in zipf_q.iter().flatten() {
        idx.lookup_shared(*ip)?;
    }
    let s1 = zipf_q.len() as f64 / t.elapsed().as_secs_f64();
    println!("  zipf-100k second pass (caches warm): lookup 1 thr {:.2} M/s  lookup_many 1 thr {:.2} M/s", s1 / 1e6, b / 1e6);
    if !a.kv.is_empty() {
        kv_compare(
            &a,
            &idx_path,
            &[
                ("present", &present_q),
                ("absent", &absent_q),
                ("zipf-100k", &zipf_q),
            ],
        )?;
    }
    println!(
        "peak RSS of the whole run: {:.1} MiB",
        mib(silt_rdns::peak_rss_bytes().unwrap_or(0))
    );
    if !a.keep {
        let _ = std::fs::remove_file(&idx_path);
    }
    Ok(())
}

/// The index on `qs` on one thread, each pass with a fresh index (empty caches) and, when
/// `cold`, the file's pages dropped first: hits and lookups/s of single lookups, then of
/// `lookup_many` in batches of 8192.
fn one_thread_passes(
    idx_path: &std::path::Path,
    qs: &[Option<IpAddr>],
    cold: bool,
) -> Result<(u64, f64, f64)> {
    let fresh = || {
        if cold {
            drop_cache(idx_path);
        }
        RdnsIndex::open_with(idx_path, cache_opts())
    };
    let idx = fresh()?;
    let single = measure(qs, || {
        let mut hits = 0u64;
        for ip in qs.iter().flatten() {
            hits += u64::from(idx.lookup_shared(*ip)?.is_some());
        }
        Ok(hits)
    })?;
    let idx = fresh()?;
    let batched = measure(qs, || {
        let mut out = Vec::new();
        for chunk in qs.chunks(8192) {
            idx.lookup_many(chunk, &mut out)?;
        }
        Ok(0)
    })?;
    Ok((single.hits, single.per_s, batched.per_s))
}

/// `--index IDX --lookups FILE`: the index (and with `--kv` the stores) on the given addresses, in
/// their order: single lookups on one thread and `lookup_many` in batches of 8192, cold (the
/// file's pages dropped first, a fresh index) and warm.
fn given_lookups(a: &Args, idx_path: &std::path::Path, file: &std::path::Path) -> Result<()> {
    use std::io::BufRead;
    let mut qs: Vec<Option<IpAddr>> = Vec::new();
    let mut bad = 0u64;
    for line in
        BufReader::new(File::open(file).with_context(|| format!("{}", file.display()))?).lines()
    {
        match line?.trim().parse::<IpAddr>() {
            Ok(ip) => qs.push(Some(ip)),
            Err(_) => bad += 1,
        }
    }
    println!(
        "lookups: {} addresses from {} ({bad} lines not an address, skipped)",
        qs.len(),
        file.display()
    );
    let idx_bytes = std::fs::metadata(idx_path)?.len();
    println!("index: {:.1} MiB", mib(idx_bytes));
    for cold in [true, false] {
        let (hits, single, batch) = one_thread_passes(idx_path, &qs, cold)?;
        println!(
            "  index capture {:<5} hits {hits} lookup 1 thr {:.3} M/s  lookup_many 1 thr {:.3} M/s",
            if cold { "cold" } else { "warm" },
            single / 1e6,
            batch / 1e6
        );
    }
    if !a.kv.is_empty() {
        kv_compare(a, idx_path, &[("capture", &qs)])?;
    }
    println!(
        "peak RSS of the whole run: {:.1} MiB",
        mib(silt_rdns::peak_rss_bytes().unwrap_or(0))
    );
    Ok(())
}

/// An embedded key-value store the index is compared with.
#[derive(Clone, Copy, PartialEq)]
enum Store {
    Redb,
    Rocks,
}

/// Lookups on one thread: hits and lookups/s.
struct Measured {
    hits: u64,
    per_s: f64,
}

/// One store's side of the comparison: loaded from the index's pairs, then queried.
trait Kv {
    fn name(&self) -> &'static str;
    /// Single lookups of `qs` in order on one thread (a fresh handle, after `drop_pages` for cold).
    fn get_each(&self, qs: &[Option<IpAddr>]) -> Result<Measured>;
    /// The same lookups in batches of 8192 where the store has a batched read, else None.
    fn get_batched(&self, qs: &[Option<IpAddr>]) -> Result<Option<Measured>>;
    /// Drops the store's files from the page cache and reopens it (cold measurements).
    fn reopen_cold(&mut self) -> Result<()>;
    fn bytes_on_disk(&self) -> Result<u64>;
}

/// Bytes a file takes on disk: its allocated blocks, not its length (redb's file is sparse).
fn allocated(path: &std::path::Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(path)?.blocks() * 512)
}

/// Times `f` over `qs` (addresses only) and counts its hits.
fn measure(qs: &[Option<IpAddr>], f: impl FnOnce() -> Result<u64>) -> Result<Measured> {
    let t = Instant::now();
    let hits = f()?;
    Ok(Measured {
        hits,
        per_s: qs.len() as f64 / t.elapsed().as_secs_f64(),
    })
}

/// The key-value store comparison (`--kv`): the index's pairs loaded into each store, then the
/// same query sets, single lookups (and batched where the store has them) on one thread, cold
/// (the files' pages dropped first) and warm.
fn kv_compare(
    a: &Args,
    idx_path: &std::path::Path,
    sets: &[(&str, &Vec<Option<IpAddr>>)],
) -> Result<()> {
    let stem = match &a.index {
        Some(p) => p
            .file_stem()
            .map_or("index".to_string(), |s| s.to_string_lossy().into_owned()),
        None => format!("rdns-{}", a.rows),
    };
    let idx = RdnsIndex::open(idx_path)?;
    let idx_bytes = allocated(idx_path)?;
    for &store in &a.kv {
        let dir = a.dir.join(format!(
            "{stem}.{}",
            if store == Store::Redb {
                "redb"
            } else {
                "rocksdb"
            }
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut kv: Box<dyn Kv> = match store {
            Store::Redb => Box::new(RedbKv::load(&idx, &dir)?),
            #[cfg(feature = "rocksdb")]
            Store::Rocks => Box::new(rocks::RocksKv::load(&idx, &dir)?),
            #[cfg(not(feature = "rocksdb"))]
            Store::Rocks => unreachable!("refused by parse_args without the feature"),
        };
        let kv_bytes = kv.bytes_on_disk()?;
        println!(
            "kv {}: {:.1} MiB on disk (allocated blocks) = {:.1}x the index ({:.1} MiB)",
            kv.name(),
            mib(kv_bytes),
            kv_bytes as f64 / idx_bytes as f64,
            mib(idx_bytes)
        );
        for (name, qs) in sets {
            for cold in [true, false] {
                if cold {
                    kv.reopen_cold()?;
                }
                let single = kv.get_each(qs)?;
                if cold {
                    kv.reopen_cold()?;
                }
                let batched = kv.get_batched(qs)?;
                println!(
                    "  kv {} {name:<10} {:<5} hits {:>5.1} % ({})  get 1 thr {:>6.3} M/s  batched 1 thr {}",
                    kv.name(),
                    if cold { "cold" } else { "warm" },
                    100.0 * single.hits as f64 / qs.len() as f64,
                    single.hits,
                    single.per_s / 1e6,
                    batched.map_or("-".to_string(), |b| format!(
                        "{:.3} M/s (hits {})",
                        b.per_s / 1e6,
                        b.hits
                    )),
                );
            }
        }
        drop(kv);
        if !a.keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}

const REDB: redb::TableDefinition<&[u8], &str> = redb::TableDefinition::new("rdns");

/// An address as a redb key: 4 or 16 big-endian bytes.
fn redb_key(ip: &IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// redb, a pure-Rust B-tree store.
struct RedbKv {
    path: PathBuf,
    /// None only while reopening.
    db: Option<redb::Database>,
}

impl RedbKv {
    /// Inserts the index's pairs in key order, one write transaction per million, then compacts.
    fn load(idx: &RdnsIndex, dir: &std::path::Path) -> Result<Self> {
        use redb::{ReadableDatabase, ReadableTableMetadata};
        let path = dir.join("rdns.redb");
        let t = Instant::now();
        let db = redb::Database::create(&path)?;
        let mut pairs: Vec<(Vec<u8>, String)> = Vec::with_capacity(1 << 20);
        let load = |pairs: &mut Vec<(Vec<u8>, String)>| -> Result<()> {
            let w = db.begin_write()?;
            {
                let mut table = w.open_table(REDB)?;
                for (k, v) in pairs.drain(..) {
                    table.insert(k.as_slice(), v.as_str())?;
                }
            }
            w.commit()?;
            Ok(())
        };
        let mut err = None;
        idx.for_each(|ip, name| {
            pairs.push((redb_key(&ip), name.to_string()));
            if pairs.len() == 1 << 20 && err.is_none() {
                err = load(&mut pairs).err();
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        load(&mut pairs)?;
        let entries = db.begin_read()?.open_table(REDB)?.len()?;
        let loaded = t.elapsed().as_secs_f64();
        drop(db);
        let mut db = redb::Database::open(&path)?;
        let t = Instant::now();
        db.compact()?;
        println!(
            "kv redb: {entries} entries loaded in {loaded:.1} s, compacted in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        // Closed and reopened, so that the bytes on disk are the file's at rest. The file is
        // sparse after `compact()` (20M pairs: 3.7 GB long, 1.8 GB allocated), and bytes on disk
        // are the allocated ones.
        drop(db);
        let db = redb::Database::open(&path)?;
        Ok(Self { path, db: Some(db) })
    }
}

impl Kv for RedbKv {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn get_each(&self, qs: &[Option<IpAddr>]) -> Result<Measured> {
        use redb::ReadableDatabase;
        let r = self.db.as_ref().expect("open between calls").begin_read()?;
        let table = r.open_table(REDB)?;
        measure(qs, || {
            let mut hits = 0u64;
            for ip in qs.iter().flatten() {
                hits += u64::from(table.get(redb_key(ip).as_slice())?.is_some());
            }
            Ok(hits)
        })
    }

    /// redb has no batched read.
    fn get_batched(&self, _qs: &[Option<IpAddr>]) -> Result<Option<Measured>> {
        Ok(None)
    }

    fn reopen_cold(&mut self) -> Result<()> {
        // Closed before the pages are dropped, so nothing of the old handle stays cached.
        self.db = None;
        drop_cache(&self.path);
        self.db = Some(redb::Database::open(&self.path)?);
        Ok(())
    }

    fn bytes_on_disk(&self) -> Result<u64> {
        allocated(&self.path)
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    //! RocksDB, bulk-loaded from the index's pairs as RocksDB documents for sorted data.
    use super::*;
    use rocksdb::{
        BlockBasedOptions, Cache, DBCompressionType, IngestExternalFileOptions, Options,
        SstFileWriter, DB,
    };

    /// Every regular file under `dir` (a store's files), with its length.
    fn files_under(dir: &std::path::Path) -> Result<Vec<(PathBuf, u64)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let md = e.metadata()?;
            if md.is_file() {
                out.push((e.path(), md.len()));
            }
        }
        Ok(out)
    }

    /// Pairs per bulk-load file.
    const PAIRS_PER_SST: u64 = 16 << 20;

    /// An address as a RocksDB key: 4 then 4 bytes, or 6 then 16, so IPv4 sorts first.
    fn key(ip: &IpAddr, buf: &mut Vec<u8>) {
        buf.clear();
        match ip {
            IpAddr::V4(a) => {
                buf.push(4);
                buf.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                buf.push(6);
                buf.extend_from_slice(&a.octets());
            }
        }
    }

    /// zstd blocks (the smallest on disk of RocksDB's codecs), a 10-bit bloom filter per key
    /// (absent addresses answered without reading a block), a 64 MiB block cache.
    fn options() -> Options {
        let mut o = Options::default();
        o.create_if_missing(true);
        o.set_compression_type(DBCompressionType::Zstd);
        o.set_bottommost_compression_type(DBCompressionType::Zstd);
        let mut b = BlockBasedOptions::default();
        b.set_bloom_filter(10.0, false);
        b.set_block_cache(&Cache::new_lru_cache(64 << 20));
        o.set_block_based_table_factory(&b);
        o
    }

    /// Opens the store with its default column family named, so that `cf_handle` (which
    /// `batched_multi_get_cf` needs) finds it.
    fn open(opts: &Options, dir: &std::path::Path) -> Result<DB> {
        Ok(DB::open_cf(
            opts,
            dir,
            [rocksdb::DEFAULT_COLUMN_FAMILY_NAME],
        )?)
    }

    pub(super) struct RocksKv {
        dir: PathBuf,
        db: Option<DB>,
    }

    impl RocksKv {
        pub(super) fn load(idx: &RdnsIndex, dir: &std::path::Path) -> Result<Self> {
            let t = Instant::now();
            let opts = options();
            let mut ssts: Vec<PathBuf> = Vec::new();
            let mut writer: Option<SstFileWriter> = None;
            let mut in_file = 0u64;
            let mut entries = 0u64;
            let mut k = Vec::with_capacity(17);
            let mut err: Option<anyhow::Error> = None;
            idx.for_each(|ip, name| {
                if err.is_some() {
                    return;
                }
                let r = (|| -> Result<()> {
                    if writer.is_none() {
                        let p = dir.join(format!("load-{}.sst", ssts.len()));
                        let w = SstFileWriter::create(&opts);
                        w.open(&p)?;
                        ssts.push(p);
                        writer = Some(w);
                    }
                    key(&ip, &mut k);
                    let w = writer.as_mut().expect("opened above");
                    w.put(&k, name.as_bytes())?;
                    entries += 1;
                    in_file += 1;
                    if in_file == PAIRS_PER_SST {
                        writer.take().expect("open").finish()?;
                        in_file = 0;
                    }
                    Ok(())
                })();
                err = r.err();
            })?;
            if let Some(e) = err {
                return Err(e);
            }
            if let Some(mut w) = writer.take() {
                w.finish()?;
            }
            let written = t.elapsed().as_secs_f64();
            let db_dir = dir.join("db");
            let db = DB::open(&opts, &db_dir)?;
            let mut ing = IngestExternalFileOptions::default();
            ing.set_move_files(true);
            db.ingest_external_file_opts(&ing, ssts.clone())?;
            drop(db);
            for p in &ssts {
                let _ = std::fs::remove_file(p);
            }
            println!(
                "kv rocksdb: {entries} entries loaded in {:.1} s ({} bulk-load files written in {written:.1} s, then ingested)",
                t.elapsed().as_secs_f64(),
                ssts.len()
            );
            let db = open(&opts, &db_dir)?;
            Ok(Self {
                dir: db_dir,
                db: Some(db),
            })
        }

        fn db(&self) -> &DB {
            self.db.as_ref().expect("open between calls")
        }
    }

    impl Kv for RocksKv {
        fn name(&self) -> &'static str {
            "rocksdb"
        }

        fn get_each(&self, qs: &[Option<IpAddr>]) -> Result<Measured> {
            let db = self.db();
            let mut k = Vec::with_capacity(17);
            measure(qs, || {
                let mut hits = 0u64;
                for ip in qs.iter().flatten() {
                    key(ip, &mut k);
                    hits += u64::from(db.get_pinned(&k)?.is_some());
                }
                Ok(hits)
            })
        }

        /// `batched_multi_get_cf`, RocksDB's batched point lookup, 8192 keys at a time.
        fn get_batched(&self, qs: &[Option<IpAddr>]) -> Result<Option<Measured>> {
            let db = self.db();
            let cf = db
                .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
                .context("no default column family")?;
            let m = measure(qs, || {
                let mut hits = 0u64;
                let mut keys: Vec<Vec<u8>> = Vec::with_capacity(8192);
                for chunk in qs.chunks(8192) {
                    keys.clear();
                    for ip in chunk.iter().flatten() {
                        let mut k = Vec::with_capacity(17);
                        key(ip, &mut k);
                        keys.push(k);
                    }
                    for r in db.batched_multi_get_cf(&cf, &keys, false) {
                        hits += u64::from(r?.is_some());
                    }
                }
                Ok(hits)
            })?;
            Ok(Some(m))
        }

        fn reopen_cold(&mut self) -> Result<()> {
            self.db = None;
            for (p, _) in files_under(&self.dir)? {
                drop_cache(&p);
            }
            self.db = Some(open(&options(), &self.dir)?);
            Ok(())
        }

        fn bytes_on_disk(&self) -> Result<u64> {
            let mut sum = 0;
            for (p, _) in files_under(&self.dir)? {
                sum += allocated(&p)?;
            }
            Ok(sum)
        }
    }
}
