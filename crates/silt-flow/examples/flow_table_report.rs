//! Prints the flow-table figures (bytes/entry, ns per insert / hit / miss / remove at the
//! issue's sizes, and the many-small-tables case) as a markdown table next to Zeek's clustered
//! dictionary figures. Timing is a plain `Instant` loop over enough operations (>= 2M per cell)
//! that timer overhead is negligible; the criterion bench (`cargo bench -p silt-flow`) measures
//! the same operations with statistics.
//!
//! Run: `cargo run --release -p silt-flow --example flow_table_report`

#[path = "../benches/support/keys.rs"]
mod keys;

use std::hint::black_box;
use std::time::Instant;

use keys::*;
use silt_flow::{FlowTable, TableKey};

const OPS: usize = 2_000_000;

struct Row {
    bytes: f64,
    insert: f64,
    hit: f64,
    miss: f64,
    remove: f64,
}

fn measure<K: TableKey>(keys: &[K], absent: &[K], order: &[usize]) -> Row {
    let n = keys.len();
    let reps = (OPS / n).max(1);
    let build = || {
        let mut t: FlowTable<K, u32> = FlowTable::with_seed(42);
        for (i, k) in keys.iter().enumerate() {
            t.insert(*k, i as u32);
        }
        t
    };
    // Insert: build from empty (includes growth, as a tracker does).
    let mut tables = Vec::with_capacity(reps.min(64));
    let start = Instant::now();
    for _ in 0..reps {
        let t = build();
        if tables.len() < 64 {
            tables.push(t);
        } else {
            black_box(t);
        }
    }
    let insert = start.elapsed().as_nanos() as f64 / (reps * n) as f64;
    let t = build();
    let bytes = t.heap_bytes() as f64 / n as f64;
    // Hits in random order (random access pattern, like packets of interleaved flows).
    let start = Instant::now();
    let mut sum = 0u64;
    for _ in 0..reps {
        for &i in order {
            sum += *t.get(&keys[i]).unwrap() as u64;
        }
    }
    let hit = start.elapsed().as_nanos() as f64 / (reps * n) as f64;
    black_box(sum);
    let start = Instant::now();
    let mut found = 0usize;
    for _ in 0..reps {
        for k in absent {
            found += t.get(k).is_some() as usize;
        }
    }
    let miss = start.elapsed().as_nanos() as f64 / (reps * absent.len()) as f64;
    assert_eq!(found, 0);
    // Removes: time removing every key (random order) from prebuilt copies.
    let rreps = reps.min(64);
    let mut copies: Vec<_> = (0..rreps).map(|_| t.clone()).collect();
    let start = Instant::now();
    for c in copies.iter_mut() {
        for &i in order {
            black_box(c.remove(&keys[i]));
        }
    }
    let remove = start.elapsed().as_nanos() as f64 / (rreps * n) as f64;
    drop(tables);
    Row {
        bytes,
        insert,
        hit,
        miss,
        remove,
    }
}

fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut r = Rng(seed);
    for i in (1..n).rev() {
        v.swap(i, r.next() as usize % (i + 1));
    }
    v
}

fn many_small() -> (f64, f64) {
    // 10,000 tables of 16 entries each (~7 MB of tables, beyond L2), lookups spread randomly.
    let tables_n = 10_000;
    let keys = v4_keys(tables_n * 16, 7);
    let tables: Vec<FlowTable<_, u32>> = keys
        .chunks(16)
        .map(|c| {
            let mut t = FlowTable::with_seed(42);
            for (i, k) in c.iter().enumerate() {
                t.insert(*k, i as u32);
            }
            t
        })
        .collect();
    let bytes: usize = tables.iter().map(|t| t.heap_bytes()).sum();
    let order = shuffled(keys.len(), 9);
    let start = Instant::now();
    let mut sum = 0u64;
    let reps = OPS / keys.len() + 1;
    for _ in 0..reps {
        for &i in &order {
            sum += *tables[i / 16].get(&keys[i]).unwrap() as u64;
        }
    }
    black_box(sum);
    (
        bytes as f64 / keys.len() as f64,
        start.elapsed().as_nanos() as f64 / (reps * keys.len()) as f64,
    )
}

/// Best of three runs per cell: this machine is shared, and interference only ever adds time.
fn best_of_3<K: TableKey>(keys: &[K], absent: &[K], order: &[usize]) -> Row {
    let runs: Vec<Row> = (0..3).map(|_| measure(keys, absent, order)).collect();
    let min = |f: fn(&Row) -> f64| runs.iter().map(f).fold(f64::INFINITY, f64::min);
    Row {
        bytes: runs[0].bytes,
        insert: min(|r| r.insert),
        hit: min(|r| r.hit),
        miss: min(|r| r.miss),
        remove: min(|r| r.remove),
    }
}

fn main() {
    println!(
        "| entries | key | bytes/entry | insert ns | lookup hit ns | lookup miss ns | remove ns |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for &n in &SIZES {
        let order = shuffled(n, 3);
        let absent_n = n.max(1000);
        let r4 = best_of_3(&v4_keys(n, 1), &v4_keys(absent_n, 2), &order);
        let r6 = best_of_3(&v6_keys(n, 1), &v6_keys(absent_n, 2), &order);
        for (name, r) in [("v4 16 B", r4), ("v6 40 B", r6)] {
            println!(
                "| {n} | {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                r.bytes, r.insert, r.hit, r.miss, r.remove
            );
        }
    }
    let (b, ns) = (0..3)
        .map(|_| many_small())
        .fold((0.0, f64::INFINITY), |a, x| (x.0, a.1.min(x.1)));
    println!("| 10,000 tables x 16 | v4 16 B | {b:.1} | - | {ns:.1} | - | - |");
    println!(
        "| Zeek clustered dict (seed) | | {ZEEK_BYTES_PER_ENTRY} | - | {ZEEK_HIT_NS} | {ZEEK_MISS_NS} | {ZEEK_REMOVE_NS} |"
    );
}
