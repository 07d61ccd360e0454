//! Benchmark of silt-rdns: generates a Rapid7-shaped `.csv.gz`, builds the index within a
//! memory budget and measures lookups. Touches only `--dir` (default ./rdns-bench-data).
//!
//! `rdns-bench --rows 20000000 [--memory-mib 256] [--block 128] [--level 9] [--dict 32768]
//!  [--no-templates] [--sorted] [--queries 2000000] [--dir D] [--reuse] [--keep] [--kv]`
//!
//! `rdns-bench --index IDX --lookups FILE [--kv] [--dir D]` measures an existing index (left in
//! place) on the addresses of FILE (one per line, in order; `bench/rasp.sh` gives the source and
//! destination addresses of its capture's samples) instead of generated query sets.
//!
//! `--kv` also loads the index's pairs (in key order, one write transaction per million) into
//! redb, an embedded key-value store (B-tree, pure Rust; the address as 4 or 16 big-endian bytes,
//! the name as the value), and runs the same queries against it in the same run: bytes on disk
//! and lookups/s side by side with the index's.

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
    kv: bool,
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
        kv: false,
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
            "--kv" => a.kv = true,
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
            if cold {
                drop_cache(&idx_path);
            }
            // single lookups, 1 thread
            let idx = RdnsIndex::open_with(&idx_path, cache_opts())?;
            let t = Instant::now();
            let mut hits = 0u64;
            for ip in qs.iter().flatten() {
                hits += u64::from(idx.lookup_shared(*ip)?.is_some());
            }
            let single = qs.len() as f64 / t.elapsed().as_secs_f64();
            // batches of 8192, 1 thread (fresh index)
            if cold {
                drop_cache(&idx_path);
            }
            let idx = RdnsIndex::open_with(&idx_path, cache_opts())?;
            let t = Instant::now();
            let mut out = Vec::new();
            for chunk in qs.chunks(8192) {
                idx.lookup_many(chunk, &mut out)?;
            }
            let batch1 = qs.len() as f64 / t.elapsed().as_secs_f64();
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
    if a.kv {
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

/// `--index IDX --lookups FILE`: the index (and with `--kv` redb) on the given addresses, in
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
        if cold {
            drop_cache(idx_path);
        }
        let idx = RdnsIndex::open_with(idx_path, cache_opts())?;
        let t = Instant::now();
        let mut hits = 0u64;
        for ip in qs.iter().flatten() {
            hits += u64::from(idx.lookup_shared(*ip)?.is_some());
        }
        let single = qs.len() as f64 / t.elapsed().as_secs_f64();
        if cold {
            drop_cache(idx_path);
        }
        let idx = RdnsIndex::open_with(idx_path, cache_opts())?;
        let t = Instant::now();
        let mut out = Vec::new();
        for chunk in qs.chunks(8192) {
            idx.lookup_many(chunk, &mut out)?;
        }
        let batch = qs.len() as f64 / t.elapsed().as_secs_f64();
        println!(
            "  index capture {:<5} hits {hits} lookup 1 thr {:.3} M/s  lookup_many 1 thr {:.3} M/s",
            if cold { "cold" } else { "warm" },
            single / 1e6,
            batch / 1e6
        );
    }
    if a.kv {
        kv_compare(a, idx_path, &[("capture", &qs)])?;
    }
    println!(
        "peak RSS of the whole run: {:.1} MiB",
        mib(silt_rdns::peak_rss_bytes().unwrap_or(0))
    );
    Ok(())
}

const KV: redb::TableDefinition<&[u8], &str> = redb::TableDefinition::new("rdns");

/// An address as a redb key: 4 or 16 big-endian bytes.
fn kv_key(ip: &IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// The key-value store comparison (`--kv`): the index's pairs loaded into redb, then the same
/// query sets, single lookups on one thread, cold (the file's pages dropped first) and warm.
fn kv_compare(
    a: &Args,
    idx_path: &std::path::Path,
    sets: &[(&str, &Vec<Option<IpAddr>>)],
) -> Result<()> {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let stem = match &a.index {
        Some(p) => p
            .file_stem()
            .map_or("index".to_string(), |s| s.to_string_lossy().into_owned()),
        None => format!("rdns-{}", a.rows),
    };
    let path = a.dir.join(format!("{stem}.redb"));
    let _ = std::fs::remove_file(&path);
    let idx = RdnsIndex::open(idx_path)?;
    let t = Instant::now();
    let db = redb::Database::create(&path)?;
    let mut pairs: Vec<(Vec<u8>, String)> = Vec::with_capacity(1 << 20);
    let load = |pairs: &mut Vec<(Vec<u8>, String)>| -> Result<()> {
        let w = db.begin_write()?;
        {
            let mut table = w.open_table(KV)?;
            for (k, v) in pairs.drain(..) {
                table.insert(k.as_slice(), v.as_str())?;
            }
        }
        w.commit()?;
        Ok(())
    };
    let mut err = None;
    idx.for_each(|ip, name| {
        pairs.push((kv_key(&ip), name.to_string()));
        if pairs.len() == 1 << 20 && err.is_none() {
            err = load(&mut pairs).err();
        }
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    load(&mut pairs)?;
    let entries = db.begin_read()?.open_table(KV)?.len()?;
    let loaded = t.elapsed().as_secs_f64();
    drop(db);
    let mut db = redb::Database::open(&path)?;
    let t = Instant::now();
    db.compact()?;
    let compacted = t.elapsed().as_secs_f64();
    drop(db);
    let kv_bytes = std::fs::metadata(&path)?.len();
    let idx_bytes = std::fs::metadata(idx_path)?.len();
    println!(
        "redb: {entries} entries loaded in {loaded:.1} s, compacted in {compacted:.1} s; {:.1} MiB on disk = {:.1}x the index ({:.1} MiB)",
        mib(kv_bytes),
        kv_bytes as f64 / idx_bytes as f64,
        mib(idx_bytes)
    );
    for (name, qs) in sets {
        for cold in [true, false] {
            if cold {
                drop_cache(&path);
            }
            let db = redb::Database::open(&path)?;
            let r = db.begin_read()?;
            let table = r.open_table(KV)?;
            let t = Instant::now();
            let mut hits = 0u64;
            for ip in qs.iter().flatten() {
                hits += u64::from(table.get(kv_key(ip).as_slice())?.is_some());
            }
            let single = qs.len() as f64 / t.elapsed().as_secs_f64();
            println!(
                "  redb {name:<10} {:<5} hits {:>5.1} % ({hits})  get 1 thr {:>6.3} M/s",
                if cold { "cold" } else { "warm" },
                100.0 * hits as f64 / qs.len() as f64,
                single / 1e6
            );
        }
    }
    if !a.keep {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}
