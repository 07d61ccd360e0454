//! Reverse-DNS enrichment for silt: an on-disk index from IP address to PTR name, built from
//! Rapid7-style `ip,name` CSV (billions of rows, far larger than memory) and queried through
//! mmap without loading it.
//!
//! - [`build`] reads `ip,name` lines (a header line is detected and skipped, bad lines are
//!   counted and reported with their line number and reason, duplicate addresses keep their
//!   first name), sorts them externally within [`BuildOptions::memory`] (sorted runs spilled
//!   zstd-compressed to [`BuildOptions::tmp_dir`], k-way merged, extra merge passes when the
//!   runs outnumber what the budget can read at once) and writes the index atomically
//!   (temporary name in the output directory, fsync, rename).
//! - [`RdnsIndex`] opens an index (checks its footer, layout and the checksum of its
//!   dictionary and block index: a truncated or damaged file is an error at open) and answers
//!   [`lookup`](RdnsIndex::lookup) and [`lookup_many`](RdnsIndex::lookup_many). Each block
//!   carries a crc32 checked when it is first read: a damaged block is an error, never garbage.
//! - [`gen`] writes realistic synthetic Rapid7-shaped data for tests and benchmarks.
//!
//! # Index format (details in FORMAT.md)
//!
//! ```text
//! header "SILTRDNS" version
//! IPv4 blocks | IPv6 blocks        each: crc32, raw_len, zstd frame (with the dictionary)
//! zstd dictionary                  trained on a sample of the input's blocks
//! IPv4 block index                 first and last key of each block (u32), block offsets (u64)
//! IPv6 block index                 first and last key of each block (u128), block offsets
//! footer "RDNSFOOT"                counts, offsets, file length, crc of the metadata, own crc
//! ```
//!
//! A block holds up to 128 entries in key order: the entry count, the key deltas (varints,
//! the first key is in the block index), the name lengths, then the names. Names are stored
//! as templates relative to their own address: `c-73-15-2-1.hsd1.ca.comcast.net` under the key
//! 73.15.2.1 is stored as `c-\x03.hsd1.ca.comcast.net`, where `\x03` means "this key written
//! as a-b-c-d" (nine IPv4 and five IPv6 spellings: dashed, dotted, reversed, zero-padded, hex,
//! nibbles, …). Neighbouring addresses of an ISP pool then have byte-identical names and the
//! block compresses to a few bytes per entry. A lookup binary-searches the block index in the
//! mapping (an address between two blocks' key ranges is absent without reading a block; a
//! block also ends at wide key gaps), decompresses one block (a few KiB) and walks it.
//!
//! # Memory
//!
//! The build uses the budget for the run buffer (fixed capacities, never grown), then the
//! same budget for the merge readers (fan-in = budget / 2 / 640 KiB). The block index under
//! construction goes to temporary files, not memory. Lookups keep one bounded cache of recent
//! results ([`CacheOptions`], default 262,144 entries) and a pool of decompression buffers.
//!
//! # Concurrency
//!
//! [`RdnsIndex`] is `Send + Sync`; share it with `Arc`. The file must not be modified in place
//! while open (replacing it by rename is fine: the mapping keeps the old file).

mod build;
pub mod format;
pub mod gen;
mod index;
mod parse;
mod runs;
pub mod template;

pub use build::{build, BuildOptions, BuildReport, Reject};
pub use index::{CacheOptions, IndexStats, Name, RdnsIndex};
pub use template::Key;

/// Peak resident memory of this process so far (VmHWM), in bytes; `None` off Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets VmHWM to the current RSS (Linux: writes "5" to /proc/self/clear_refs). Returns
/// false when not possible.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn index_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::RdnsIndex>();
    }
}
