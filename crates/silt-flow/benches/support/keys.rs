//! Shared by the criterion bench and the report example: reproducible flow keys and the seed's
//! (Zeek's clustered dictionary) published figures.

#![allow(dead_code)]

use silt_flow::{FlowKeyV4, FlowKeyV6};

/// Sizes the issue asks for.
pub const SIZES: [usize; 7] = [1, 10, 100, 1_000, 10_000, 100_000, 147_695];

/// xorshift64*: tiny deterministic generator so runs are comparable (no `rand` needed).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Keys shaped like real flows: client addresses in a /16, a few servers, ephemeral ports.
pub fn v4_keys(n: usize, seed: u64) -> Vec<FlowKeyV4> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| {
            let x = r.next();
            let client = 0x0a00_0000 | (x as u32 & 0xffff);
            let server = 0xc633_6400 | ((x >> 16) as u32 & 0x3f);
            let sport = 32768 + ((x >> 24) as u32 % 28000);
            let dport = [53u32, 80, 443, 123][(x >> 40) as usize & 3];
            FlowKeyV4 {
                words: [
                    client.min(server),
                    client.max(server),
                    (sport << 16) | dport,
                    6 << 24,
                ],
            }
        })
        .collect()
}

pub fn v6_keys(n: usize, seed: u64) -> Vec<FlowKeyV6> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| {
            let x = r.next();
            let y = r.next();
            let mut w = [0u32; 10];
            w[0] = 0x2001_0db8;
            w[2] = y as u32;
            w[3] = (y >> 32) as u32;
            w[4] = 0x2001_0db8;
            w[5] = 0xffff;
            w[7] = (x >> 48) as u32 & 0x3f;
            w[8] = ((32768 + (x as u32 % 28000)) << 16) | 443;
            w[9] = 6 << 24;
            FlowKeyV6 { words: w }
        })
        .collect()
}

/// Zeek's clustered dictionary, from the issue: (size, lookup hit ns, bytes/entry) where known.
pub const ZEEK_BYTES_PER_ENTRY: &str = "73-102";
pub const ZEEK_HIT_NS: &str = "12-19 (small), 175 (147,695)";
pub const ZEEK_MISS_NS: &str = "14-62";
pub const ZEEK_REMOVE_NS: &str = "15-309";
