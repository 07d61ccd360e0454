//! No input may panic the collectors: random bytes, and real corpus datagrams mutated (bytes
//! flipped, lengths rewritten, truncated, spliced), fed to collectors that already hold the
//! corpus templates. Also checks that memory stays bounded (held data sets).

mod common;

use std::net::IpAddr;

use proptest::prelude::*;
use silt_core::{CollectEmit, SourceInfo};
use silt_flowexport::{Collector, Datagram, FlowExportOptions, Protocol};

fn collector(p: Protocol) -> Collector {
    Collector::new(
        p,
        &SourceInfo {
            display: "fuzz".into(),
            file_name: None,
        },
        FlowExportOptions {
            batch_rows: 64,
            max_held_sets_per_key: 8,
            max_held_bytes_per_key: 16 * 1024,
            max_held_bytes_total: 64 * 1024,
            ..FlowExportOptions::default()
        },
    )
}

fn feed(c: &mut Collector, out: &mut CollectEmit, frame: u64, payload: &[u8]) {
    let d = Datagram {
        frame,
        received_us: 0,
        exporter: IpAddr::from([192, 0, 2, (frame % 3) as u8]),
        exporter_port: 1,
        collector_port: 2,
        payload,
    };
    c.datagram(&d, out).expect("emit");
}

/// The corpus datagrams (sFlow, NetFlow), or a few built-in seeds without the corpus.
fn seeds() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut sflow = Vec::new();
    let mut netflow = Vec::new();
    if let Some(dir) = common::corpus() {
        for (sub, v) in [("sflow", &mut sflow), ("netflow", &mut netflow)] {
            let mut files: Vec<_> = std::fs::read_dir(dir.join(sub))
                .expect("dir")
                .map(|e| e.expect("entry").path())
                .collect();
            // Templates first so that mutated data sets meet known templates.
            files.sort_by_key(|p| !p.to_string_lossy().contains("template"));
            for f in files {
                v.extend(common::read_pcap(&f, 1).into_iter().map(|d| d.payload));
            }
        }
    }
    sflow.push(vec![
        0, 0, 0, 5, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    netflow.push({
        let mut v = vec![0, 10, 0, 16];
        v.extend_from_slice(&[0; 12]);
        v
    });
    (sflow, netflow)
}

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(r: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    match r.below(6) {
        0 => {
            for _ in 0..1 + r.below(8) {
                let i = r.below(v.len());
                if let Some(b) = v.get_mut(i) {
                    *b = r.next() as u8;
                }
            }
        }
        1 => v.truncate(r.below(v.len() + 1)),
        2 => {
            // Rewrite a 16/32-bit word with an extreme value (lengths, counts).
            let i = r.below(v.len().saturating_sub(4)) & !1;
            let x: [u8; 4] = match r.below(4) {
                0 => [0xff; 4],
                1 => [0; 4],
                2 => [0, 0, 0xff, 0xff],
                _ => (r.next() as u32).to_be_bytes(),
            };
            for (k, b) in x.iter().enumerate() {
                if let Some(d) = v.get_mut(i + k) {
                    *d = *b;
                }
            }
        }
        3 => {
            let cut = r.below(v.len());
            v.truncate(cut);
            v.extend_from_slice(&other[r.below(other.len())..]);
        }
        4 => {
            let i = r.below(v.len());
            let n = r.below(64);
            let fill = r.next() as u8;
            v.splice(i..i, std::iter::repeat_n(fill, n));
        }
        _ => {
            let i = r.below(v.len());
            let n = r.below(v.len() - i.min(v.len()) + 1);
            v.drain(i..(i + n).min(v.len()));
        }
    }
    v
}

#[test]
fn fuzz_loop_mutated_corpus_never_panics() {
    let (sflow, netflow) = seeds();
    let iterations: usize = std::env::var("FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    for (proto, seeds) in [(Protocol::Sflow, &sflow), (Protocol::Netflow, &netflow)] {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut c = collector(proto);
        let mut out = CollectEmit::default();
        // Real datagrams first: the collector learns the templates.
        for (i, s) in seeds.iter().enumerate() {
            feed(&mut c, &mut out, i as u64, s);
        }
        for i in 0..iterations {
            let a = &seeds[r.below(seeds.len())];
            let b = &seeds[r.below(seeds.len())];
            let m = mutate(&mut r, a, b);
            feed(&mut c, &mut out, i as u64, &m);
            let (_, bytes) = c.held();
            assert!(bytes <= 64 * 1024, "held bytes {bytes}");
            if i % 1000 == 0 {
                c.flush(&mut out).expect("flush");
                out.batches.clear();
            }
        }
        c.finish(&mut out).expect("finish");
        let st = c.stats();
        assert_eq!(st.datagrams, (seeds.len() + iterations) as u64);
        assert!(out
            .rejects
            .iter()
            .all(|r| r.raw.len() <= 64 * 1024 && !r.reason.is_empty()));
        let _ = c.report();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), version in 0u8..12) {
        for proto in [Protocol::Sflow, Protocol::Netflow] {
            let mut c = collector(proto);
            let mut out = CollectEmit::default();
            feed(&mut c, &mut out, 1, &bytes);
            // Same bytes behind a plausible header.
            let mut v = bytes.clone();
            if v.len() >= 4 {
                v[0] = 0;
                v[1] = version;
                v[2] = 0;
                v[3] = if proto == Protocol::Sflow { 5 } else { v[3] };
            }
            feed(&mut c, &mut out, 2, &v);
            c.finish(&mut out).unwrap();
            prop_assert!(out.rejects.len() as u64 == c.stats().rejected);
        }
    }

    #[test]
    fn mutated_real_datagrams_never_panic(seed in any::<u64>(), pick in any::<usize>()) {
        let (sflow, netflow) = seeds();
        let mut r = Rng(seed | 1);
        for (proto, seeds) in [(Protocol::Sflow, &sflow), (Protocol::Netflow, &netflow)] {
            let mut c = collector(proto);
            let mut out = CollectEmit::default();
            for (i, s) in seeds.iter().enumerate() {
                feed(&mut c, &mut out, i as u64, s);
            }
            let a = &seeds[pick % seeds.len()];
            let b = &seeds[r.below(seeds.len())];
            let mut m = mutate(&mut r, a, b);
            for _ in 0..r.below(4) {
                m = mutate(&mut r, &m, b);
            }
            feed(&mut c, &mut out, 999, &m);
            c.finish(&mut out).unwrap();
        }
    }
}
