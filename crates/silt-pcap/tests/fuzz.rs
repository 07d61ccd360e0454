//! Fuzz-ish robustness: random bytes, every truncation and random byte flips of valid
//! captures never panic, and every frame is still accounted for (row or reject).

mod common;

use common::build::*;
use silt_core::{CollectEmit, SourceInfo};
use silt_pcap::PcapOptions;

/// Small deterministic generator (xorshift) so failures reproduce without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn run(bytes: &[u8]) -> CollectEmit {
    let mut out = CollectEmit::default();
    let opts = PcapOptions {
        tables: silt_pcap::Tables::PacketsAndFlows,
        payload: Some(32),
        ..Default::default()
    };
    // An Err is allowed (never for in-memory input in practice); a panic is not.
    let _ = silt_pcap::read(&mut &bytes[..], &SourceInfo::stdin(), &opts, &mut out);
    out
}

fn samples() -> Vec<Vec<u8>> {
    let t = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, &tcp(1, 2, 2, b"x"));
    let mut vx = vec![0x08, 0, 0, 0, 0, 0, 1, 0];
    vx.extend(eth(0x0800, &t));
    let outer = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, &udp(9, 4789, &vx));
    let mut q = vlan_tag(1, 0x8100);
    q.extend(vlan_tag(2, 0x0800));
    q.extend(&t);
    vec![
        pcap(
            1,
            false,
            false,
            &[
                (1, 0, eth(0x0800, &t)),
                (2, 0, eth(0x0800, &outer)),
                (3, 0, eth(0x88a8, &q)),
            ],
        ),
        pcap(101, true, true, &[(1, 0, t.clone()), (2, 0, outer.clone())]),
        pcapng(
            &[(1, None), (101, Some(9))],
            &[(0, 5, eth(0x0800, &outer)), (1, 6, t.clone())],
        ),
    ]
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    for i in 0..2000 {
        let len = (rng.next() % 512) as usize;
        let mut v: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Half of the inputs get a valid magic so the framing code is exercised too.
        if i % 2 == 0 && v.len() >= 4 {
            let magic: &[u8] = match i % 6 {
                0 => &[0xd4, 0xc3, 0xb2, 0xa1],
                2 => &[0x4d, 0x3c, 0xb2, 0xa1],
                _ => &[0x0a, 0x0d, 0x0d, 0x0a],
            };
            v[..4].copy_from_slice(magic);
        }
        run(&v);
    }
}

#[test]
fn truncations_never_panic_and_account_for_frames() {
    for s in samples() {
        for cut in 0..=s.len() {
            run(&s[..cut]);
        }
    }
    // Classic pcap: record boundaries are known, so the accounting is exact: every complete
    // record is a row, a record cut short is one reject, a cut header is one whole-input reject.
    let frames: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 20 + usize::from(i)]).collect();
    let file = pcap(
        147, // a user link type: rows without decoding, so decoding cannot add rejects
        false,
        false,
        &frames.iter().map(|f| (1, 0, f.clone())).collect::<Vec<_>>(),
    );
    let mut ends = vec![24usize];
    for f in &frames {
        ends.push(ends.last().unwrap() + 16 + f.len());
    }
    for cut in 0..=file.len() {
        let out = run(&file[..cut]);
        let complete = ends[1..].iter().filter(|&&e| e <= cut).count();
        let partial = usize::from(cut < 24 || !ends.contains(&cut));
        assert_eq!(out.rows("pcap.packet"), complete, "cut {cut}");
        assert_eq!(out.rejects.len(), partial, "cut {cut}: {:?}", out.rejects);
    }
}

#[test]
fn byte_flips_never_panic() {
    let mut rng = Rng(42);
    for s in samples() {
        for _ in 0..3000 {
            let mut v = s.clone();
            for _ in 0..(1 + rng.next() % 4) {
                let at = (rng.next() as usize) % v.len();
                v[at] = rng.next() as u8;
            }
            run(&v);
        }
    }
}
