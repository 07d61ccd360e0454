//! Criterion benchmark of the flow table: ns per insert / successful lookup / failed lookup /
//! remove at the sizes (1 .. 147,695) for IPv4 (16-byte) and IPv6 (40-byte) keys, plus
//! the many-small-tables cache-miss case. Bytes per entry are printed first (memory is not a
//! time, so criterion does not measure it). `examples/flow_table_report.rs` prints the same
//! figures as one markdown table next to Zeek's.
//!
//! Run: `cargo bench -p silt-flow` (add `-- --quick` style criterion filters as needed).

#[path = "support/keys.rs"]
mod keys;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use keys::*;
use silt_flow::{FlowTable, TableKey};

fn build<K: TableKey>(keys: &[K]) -> FlowTable<K, u32> {
    let mut t = FlowTable::with_seed(42);
    for (i, k) in keys.iter().enumerate() {
        t.insert(*k, i as u32);
    }
    t
}

fn bench_family<K: TableKey>(c: &mut Criterion, fam: &str, gen: fn(usize, u64) -> Vec<K>) {
    let mut g = c.benchmark_group(format!("flow_table_{fam}"));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for &n in &SIZES {
        let keys = gen(n, 1);
        let absent = gen(n.max(1000), 2);
        let t = build(&keys);
        // Probe in a random order: packets of interleaved flows do not arrive in insert order.
        let mut probe = keys.clone();
        let mut r = Rng(3);
        for i in (1..probe.len()).rev() {
            probe.swap(i, r.next() as usize % (i + 1));
        }
        eprintln!(
            "{fam} n={n}: {:.1} bytes/entry (Zeek clustered: {ZEEK_BYTES_PER_ENTRY})",
            t.heap_bytes() as f64 / n as f64
        );
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("insert", n), &keys, |b, keys| {
            b.iter(|| black_box(build(keys)))
        });
        g.bench_with_input(BenchmarkId::new("lookup_hit", n), &probe, |b, keys| {
            b.iter(|| {
                let mut s = 0u64;
                for k in keys {
                    s += *t.get(k).unwrap() as u64;
                }
                black_box(s)
            })
        });
        g.throughput(Throughput::Elements(absent.len() as u64));
        g.bench_with_input(BenchmarkId::new("lookup_miss", n), &absent, |b, absent| {
            b.iter(|| absent.iter().filter(|k| t.get(k).is_some()).count())
        });
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("remove", n), &probe, |b, keys| {
            b.iter_batched(
                || t.clone(),
                |mut t| {
                    for k in keys {
                        black_box(t.remove(k));
                    }
                    t
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

fn flow_table(c: &mut Criterion) {
    bench_family(c, "v4", v4_keys);
    bench_family(c, "v6", v6_keys);
}

fn many_small(c: &mut Criterion) {
    let keys = v4_keys(10_000 * 16, 7);
    let tables: Vec<_> = keys.chunks(16).map(build).collect();
    let mut order: Vec<usize> = (0..keys.len()).collect();
    let mut r = Rng(9);
    for i in (1..order.len()).rev() {
        order.swap(i, r.next() as usize % (i + 1));
    }
    let mut g = c.benchmark_group("flow_table_many_small");
    g.sample_size(10).measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function("lookup_hit_10000x16", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for &i in &order {
                s += *tables[i / 16].get(&keys[i]).unwrap() as u64;
            }
            black_box(s)
        })
    });
    g.finish();
}

criterion_group!(benches, flow_table, many_small);
criterion_main!(benches);
