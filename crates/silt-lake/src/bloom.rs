//! Parquet bloom filters for lookup columns (`silt.lookup_columns`), built by silt instead of by
//! parquet-rs's column writers.
//!
//! The filters are bit for bit the ones parquet-rs builds (the Parquet spec's split-block bloom
//! filter: XXH64 with seed 0 of the plain-encoded value, block chosen from the hash's upper 32
//! bits, eight salted bits from its lower 32), sized the same way (`Sbbf::new_with_ndv_fpp`) and
//! folded the same way (`Sbbf::fold_to_target_fpp`); the file writer stores them as it stores its
//! own. What differs is the order of the insertions, and why this module exists:
//! - parquet-rs inserts each value as it is encoded, at a random place in a filter sized for a
//!   whole row group (2 MiB for a million rows at fpp 0.01). Each insertion is a cache miss: in a
//!   profile of `silt bench` on zeek.conn, `Sbbf::insert_hash` alone was 12 % of the samples, and
//!   the bloom code 155 ns per event of write CPU.
//! - Here a value whose hash is still in a small cache of recent hashes (a host's next
//!   connection) is not set again; the other hashes are buffered ([`PENDING`] of them),
//!   partitioned by the filter region they fall in (one counting pass), and then set region by
//!   region, so the filter is swept in address order and each region's cache lines are loaded
//!   once per sweep. With AVX2 a block's eight words are set as one vector. The same profile:
//!   97 ns per event with the buffering alone, 68 with the cache and AVX2 (107 before it in
//!   that run); most of what is left is hashing.
//!
//! Memory: the filter, twice `PENDING` hashes (8 bytes each) and the 16 KiB cache per lookup
//! column of a row group.
//!
//! Only leaves reached through structs (not lists or maps) whose values parquet-rs hashes as
//! plain bytes are handled here (text, binary, 32- and 64-bit integers, see [`supported`]);
//! other lookup columns keep parquet-rs's own filter. This module touches nothing but the arrays
//! it is given.

use arrow::array::{Array, ArrayRef, AsArray, StructArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Int32Type, Int64Type, UInt32Type, UInt64Type};
use arrow::record_batch::RecordBatch;
use parquet::bloom_filter::Sbbf;
use twox_hash::XxHash64;

/// Hashes buffered before they are set in the filter (256 KiB, and as much again to partition
/// them).
const PENDING: usize = 1 << 15;

/// Slots of the recent-hash cache (16 KiB): a host column's repeats within a row group are
/// mostly caught by it, so they are hashed but not set again.
const RECENT: usize = 1 << 11;

/// The spec's salts (parquet-format BloomFilter.md, "Technical approach").
const SALT: [u32; 8] = [
    0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31,
];

/// Whether this module builds the filter of a leaf of type `dt` (else parquet-rs does).
pub(crate) fn supported(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::Int32
            | DataType::UInt32
            | DataType::Int64
            | DataType::UInt64
    )
}

/// One column chunk's bloom filter in the making.
pub(crate) struct BloomBuilder {
    /// The filter's blocks, eight 32-bit words each (allocated at the first sweep).
    blocks: Vec<[u32; 8]>,
    num_blocks: usize,
    /// Hashes not yet set in `blocks`.
    pending: Vec<u64>,
    /// `pending` partitioned by region (reused between sweeps).
    scratch: Vec<u64>,
    /// The last hash pushed into each slot (chosen by the hash's low bits); allocated at the
    /// first push. Slot `i` starts with `i ^ 1`, which no hash landing in slot `i` can equal.
    recent: Vec<u64>,
    fpp: f64,
}

impl BloomBuilder {
    /// A filter sized as parquet-rs sizes it for `ndv` distinct values at false-positive
    /// probability `fpp`.
    pub(crate) fn new(ndv: u64, fpp: f64) -> parquet::errors::Result<Self> {
        let num_blocks = Sbbf::new_with_ndv_fpp(ndv, fpp)?.num_blocks();
        Ok(Self {
            blocks: Vec::new(),
            num_blocks,
            pending: Vec::new(),
            scratch: Vec::new(),
            recent: Vec::new(),
            fpp,
        })
    }

    /// Adds the non-null values of the leaf at dotted `path` of `batch` (a value under a null
    /// struct is null). Returns false if the path does not lead to a [`supported`] leaf.
    pub(crate) fn add_path(&mut self, batch: &RecordBatch, path: &str) -> bool {
        let mut parts = path.split('.');
        let Some(mut arr) = parts.next().and_then(|p| batch.column_by_name(p)).cloned() else {
            return false;
        };
        let mut nulls: Option<NullBuffer> = arr.logical_nulls();
        for p in parts {
            let Some(child) = arr
                .as_any()
                .downcast_ref::<StructArray>()
                .and_then(|s| s.column_by_name(p))
                .cloned()
            else {
                return false;
            };
            nulls = NullBuffer::union(nulls.as_ref(), child.logical_nulls().as_ref());
            arr = child;
        }
        self.add(&arr, nulls.as_ref())
    }

    /// Adds the values of `a` that `nulls` marks valid (all when `None`).
    pub(crate) fn add(&mut self, a: &ArrayRef, nulls: Option<&NullBuffer>) -> bool {
        // One loop per array type, the value bytes taken as parquet-rs's plain encoding has them.
        macro_rules! each {
            ($arr:expr, |$v:ident| $bytes:expr) => {{
                let arr = $arr;
                match nulls {
                    None => {
                        for i in 0..arr.len() {
                            let $v = arr.value(i);
                            self.push(XxHash64::oneshot(0, $bytes));
                        }
                    }
                    Some(n) => {
                        for i in n.valid_indices() {
                            let $v = arr.value(i);
                            self.push(XxHash64::oneshot(0, $bytes));
                        }
                    }
                }
            }};
        }
        match a.data_type() {
            DataType::Utf8 => each!(a.as_string::<i32>(), |v| v.as_bytes()),
            DataType::LargeUtf8 => each!(a.as_string::<i64>(), |v| v.as_bytes()),
            DataType::Utf8View => each!(a.as_string_view(), |v| v.as_bytes()),
            DataType::Binary => each!(a.as_binary::<i32>(), |v| v),
            DataType::LargeBinary => each!(a.as_binary::<i64>(), |v| v),
            DataType::BinaryView => each!(a.as_binary_view(), |v| v),
            // Parquet stores unsigned integers in the signed physical type of the same width:
            // the same little-endian bytes.
            DataType::Int32 => each!(a.as_primitive::<Int32Type>(), |v| &v.to_le_bytes()),
            DataType::UInt32 => each!(a.as_primitive::<UInt32Type>(), |v| &v.to_le_bytes()),
            DataType::Int64 => each!(a.as_primitive::<Int64Type>(), |v| &v.to_le_bytes()),
            DataType::UInt64 => each!(a.as_primitive::<UInt64Type>(), |v| &v.to_le_bytes()),
            _ => return false,
        }
        true
    }

    /// Bytes held: the filter, the pending hashes and the recent-hash cache.
    pub(crate) fn memory_size(&self) -> usize {
        self.blocks.len() * 32
            + (self.pending.capacity() + self.scratch.capacity() + self.recent.capacity()) * 8
    }

    fn push(&mut self, h: u64) {
        // A value seen recently (a host's next connection) is already in the filter or pending:
        // setting it again would change nothing.
        if self.recent.is_empty() {
            self.recent = (0..RECENT as u64).map(|i| i ^ 1).collect();
            self.pending.reserve_exact(PENDING);
        }
        let slot = &mut self.recent[h as usize & (RECENT - 1)];
        if *slot == h {
            return;
        }
        *slot = h;
        self.pending.push(h);
        if self.pending.len() == PENDING {
            self.sweep();
        }
    }

    /// Sets the pending hashes, region by region in address order.
    fn sweep(&mut self) {
        if self.blocks.is_empty() {
            self.blocks = vec![[0; 8]; self.num_blocks];
        }
        // The block index grows with the hash's upper 32 bits, so its top byte names one of 256
        // consecutive regions of the filter.
        let region = |h: u64| (h >> 56) as usize;
        let mut start = [0usize; 257];
        for &h in &self.pending {
            start[region(h) + 1] += 1;
        }
        for r in 0..256 {
            start[r + 1] += start[r];
        }
        self.scratch.clear();
        self.scratch.resize(self.pending.len(), 0);
        for &h in &self.pending {
            let r = region(h);
            self.scratch[start[r]] = h;
            start[r] += 1;
        }
        set_all(&mut self.blocks, &self.scratch);
        self.pending.clear();
    }

    /// The finished filter, folded to the smallest size that keeps the target probability.
    pub(crate) fn finish(mut self) -> Sbbf {
        self.sweep();
        let mut bytes = Vec::with_capacity(self.blocks.len() * 32);
        for w in self.blocks.iter().flatten() {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        let mut sbbf = Sbbf::new(&bytes);
        sbbf.fold_to_target_fpp(self.fpp);
        sbbf
    }
}

/// Sets each hash's eight bits in its block. With AVX2 (checked at run time), the eight salted
/// words of a block are computed and set as one vector: in a profile of `silt bench` on
/// zeek.conn the scalar loop was most of the bloom code's time.
fn set_all(blocks: &mut [[u32; 8]], hashes: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { set_all_avx2(blocks, hashes) };
    }
    set_all_body(blocks, hashes)
}

/// [`set_all_body`] compiled for AVX2 (the compiler vectorizes its eight-word loop).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn set_all_avx2(blocks: &mut [[u32; 8]], hashes: &[u64]) {
    set_all_body(blocks, hashes)
}

#[inline(always)]
fn set_all_body(blocks: &mut [[u32; 8]], hashes: &[u64]) {
    let n = blocks.len() as u64;
    for &h in hashes {
        let block = &mut blocks[(((h >> 32) * n) >> 32) as usize];
        let x = h as u32;
        let mut bits = [0u32; 8];
        for (b, salt) in bits.iter_mut().zip(SALT) {
            *b = 1 << (x.wrapping_mul(salt) >> 27);
        }
        for (w, b) in block.iter_mut().zip(bits) {
            *w |= b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn sets_what_it_was_given() {
        let mut b = BloomBuilder::new(100_000, 0.01).unwrap();
        let words: Vec<String> = (0..100_000).map(|i| format!("C{i:017}")).collect();
        let a: ArrayRef = Arc::new(StringArray::from_iter_values(&words));
        assert!(b.add(&a, None));
        let ints: ArrayRef = Arc::new(Int64Array::from_iter_values(0..1000));
        assert!(b.add(&ints, None));
        let f = b.finish();
        assert!(words.iter().all(|w| f.check(w.as_str())));
        assert!((0..1000i64).all(|i| f.check(&i)));
        let absent = (0..10_000)
            .filter(|i| f.check(format!("X{i:017}").as_str()))
            .count();
        assert!(absent < 300, "{absent} false positives in 10000");
    }

    #[test]
    fn vector_and_portable_sets_agree() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let hashes: Vec<u64> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        let (mut a, mut b) = (vec![[0u32; 8]; 333], vec![[0u32; 8]; 333]);
        set_all(&mut a, &hashes);
        set_all_body(&mut b, &hashes);
        assert_eq!(a, b);
        assert!(a.iter().flatten().any(|w| *w != 0));
    }
}
