//! The flow table: an open-addressing hash map from a compact flow key to a small value (the
//! tracker stores a `u32` flow-slab index), built for connection tracking.
//!
//! Layout (see docs/flows.md for the measurements):
//! - `slots: Vec<u64>`: one 8-byte word per slot, `(hash32 << 32) | (entry index + 1)`, 0 = empty.
//!   Linear probing over these words: eight slots share a cache line, and the stored 32-bit hash
//!   both filters key comparisons (a failed lookup almost never touches a key) and lets the
//!   table grow and delete without re-hashing keys.
//! - `entries: Vec<(K, V)>`: the keys and values, dense (no holes). Removal is `swap_remove`
//!   plus re-pointing the one slot of the moved entry, as `indexmap` does.
//! - Deletion is backward-shift (no tombstones), so churn never degrades probe lengths and no
//!   periodic rebuild is needed. Maximum load factor 3/4.
//! - The dense array grows by 1/8 (at least 1) instead of doubling, so unused key space is at
//!   most 12.5 % of the keys; the slot array doubles, but costs only 8 bytes per slot.
//!
//! Keys are compact and fixed-size per address family: [`FlowKeyV4`] is 16 bytes and
//! [`FlowKeyV6`] 40 bytes, so IPv4 flows (most traffic) do not pay for IPv6 width; the tracker
//! keeps one table per family. Hashing is a seeded folded-multiply over the key's 64-bit words
//! (the construction of `foldhash`/`ahash`'s fallback), written here because it must see the key
//! as exactly 2 or 5 words; the per-table random seed keeps crafted traffic from choosing
//! collisions.
//!
//! Why not `hashbrown`: its SwissTable stores `(K, V)` inline in the slot array, so a 40-byte
//! IPv6 key plus value at its 7/8 load factor and doubling growth costs 45-100 bytes per entry;
//! the indirection here keeps the sparse part at 8 bytes per slot. This module touches nothing
//! outside itself.

use std::hash::BuildHasher;

/// A key the flow table can hold: fixed size, compared bytewise, hashed from 64-bit words.
pub trait TableKey: Copy + Eq {
    /// A 64-bit hash of the key mixed with `seed`.
    fn hash_with(&self, seed: u64) -> u64;
}

const K0: u64 = 0x243f_6a88_85a3_08d3;
const K1: u64 = 0x1319_8a2e_0370_7344;
const K2: u64 = 0xa409_3822_299f_31d0;

#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// IPv4 flow key, 16 bytes: both addresses, both ports, protocol and two 12-bit VLAN IDs.
/// Built canonical (smaller endpoint first) by the tracker so both directions share it.
/// Stored as `u32` words (align 4) so that `(FlowKeyV4, u32)` is 20 bytes, not 24.
/// Words: `[addr1, addr2, port1 << 16 | port2, proto << 24 | vlan_outer << 12 | vlan_inner]`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct FlowKeyV4 {
    pub words: [u32; 4],
}

#[inline(always)]
fn w64(lo: u32, hi: u32) -> u64 {
    (lo as u64) | ((hi as u64) << 32)
}

impl TableKey for FlowKeyV4 {
    #[inline(always)]
    fn hash_with(&self, seed: u64) -> u64 {
        let w = &self.words;
        fold(fold(w64(w[0], w[1]) ^ seed, w64(w[2], w[3]) ^ K0), K1)
    }
}

/// IPv6 flow key, 40 bytes: both addresses (4 words each) and the same two tail words as
/// [`FlowKeyV4`]. Stored as `u32` words so `(FlowKeyV6, u32)` is 44 bytes with no padding.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct FlowKeyV6 {
    pub words: [u32; 10],
}

impl TableKey for FlowKeyV6 {
    #[inline(always)]
    fn hash_with(&self, seed: u64) -> u64 {
        let w = &self.words;
        let a = fold(w64(w[0], w[1]) ^ seed, w64(w[2], w[3]) ^ K0);
        let b = fold(w64(w[4], w[5]) ^ K1, w64(w[6], w[7]) ^ K2);
        fold(fold(a ^ w64(w[8], w[9]), b ^ K0), K1)
    }
}

impl TableKey for u64 {
    #[inline(always)]
    fn hash_with(&self, seed: u64) -> u64 {
        fold(fold(*self ^ seed, K0), K1)
    }
}

/// Open-addressing flow table; see the module documentation for the layout.
#[derive(Clone)]
pub struct FlowTable<K, V> {
    slots: Vec<u64>,
    mask: usize,
    entries: Vec<(K, V)>,
    seed: u64,
}

impl<K: TableKey, V> Default for FlowTable<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

#[inline(always)]
fn slot_word(h32: u32, idx: usize) -> u64 {
    ((h32 as u64) << 32) | (idx as u64 + 1)
}

impl<K: TableKey, V> FlowTable<K, V> {
    /// An empty table (allocates on the first insert), with a random hash seed.
    pub fn new() -> Self {
        // RandomState is std's per-process random key; hashing a constant through it gives us
        // a random u64 without another dependency.
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x5117u64);
        Self::with_seed(seed)
    }

    /// An empty table with a fixed hash seed (reproducible benchmarks and tests).
    pub fn with_seed(seed: u64) -> Self {
        FlowTable {
            slots: Vec::new(),
            mask: 0,
            entries: Vec::new(),
            seed,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Heap bytes owned by the table (slot array plus entry array, by capacity).
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<u64>()
            + self.entries.capacity() * std::mem::size_of::<(K, V)>()
    }

    #[inline(always)]
    fn hash32(&self, k: &K) -> u32 {
        (k.hash_with(self.seed) >> 32) as u32
    }

    /// Slot index holding `k`, if present.
    #[inline]
    fn find_slot(&self, k: &K, h32: u32) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = h32 as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if (s >> 32) as u32 == h32 {
                let idx = (s as u32 - 1) as usize;
                if self.entries[idx].0 == *k {
                    return Some(i);
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The value for `k`.
    #[inline]
    pub fn get(&self, k: &K) -> Option<&V> {
        let i = self.find_slot(k, self.hash32(k))?;
        let idx = (self.slots[i] as u32 - 1) as usize;
        Some(&self.entries[idx].1)
    }

    /// The value for `k`, mutably.
    #[inline]
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        let i = self.find_slot(k, self.hash32(k))?;
        let idx = (self.slots[i] as u32 - 1) as usize;
        Some(&mut self.entries[idx].1)
    }

    /// Inserts `k -> v`; returns the previous value if `k` was present.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        let h32 = self.hash32(&k);
        if let Some(i) = self.find_slot(&k, h32) {
            let idx = (self.slots[i] as u32 - 1) as usize;
            return Some(std::mem::replace(&mut self.entries[idx].1, v));
        }
        self.insert_new(k, h32, v);
        None
    }

    fn insert_new(&mut self, k: K, h32: u32, v: V) {
        if (self.entries.len() + 1) * 4 > self.slots.len() * 3 {
            self.grow_slots();
        }
        if self.entries.len() == self.entries.capacity() {
            // Grow the dense array by an eighth (at least one): at most 12.5 % idle key space,
            // still amortized O(1) (about 8 moves per entry); the extra reallocations cost less
            // than idle capacity, which is what bytes/entry measures.
            let extra = (self.entries.len() / 8).max(1);
            self.entries.reserve_exact(extra);
        }
        let idx = self.entries.len();
        assert!(idx < u32::MAX as usize, "flow table full");
        self.entries.push((k, v));
        let mut i = h32 as usize & self.mask;
        while self.slots[i] != 0 {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = slot_word(h32, idx);
    }

    fn grow_slots(&mut self) {
        let new_len = (self.slots.len() * 2).max(2);
        let old = std::mem::replace(&mut self.slots, vec![0u64; new_len]);
        self.mask = new_len - 1;
        // Re-place every word from its stored hash: no key is read or re-hashed.
        for s in old.into_iter().filter(|&s| s != 0) {
            let mut i = (s >> 32) as usize & self.mask;
            while self.slots[i] != 0 {
                i = (i + 1) & self.mask;
            }
            self.slots[i] = s;
        }
    }

    /// Removes `k`; returns its value.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        let i = self.find_slot(k, self.hash32(k))?;
        let idx = (self.slots[i] as u32 - 1) as usize;
        self.delete_slot(i);
        let last = self.entries.len() - 1;
        if idx != last {
            // The last entry moves into `idx`: re-point its slot.
            let moved_h32 = self.hash32(&self.entries[last].0);
            let mut j = moved_h32 as usize & self.mask;
            let want = slot_word(moved_h32, last);
            while self.slots[j] != want {
                j = (j + 1) & self.mask;
            }
            self.slots[j] = slot_word(moved_h32, idx);
        }
        Some(self.entries.swap_remove(idx).1)
    }

    /// Backward-shift deletion: pull later members of the probe run into the hole.
    fn delete_slot(&mut self, i: usize) {
        let mask = self.mask;
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = (s >> 32) as usize & mask;
            // `s` may move to `hole` iff `hole` lies in its probe path [home, j).
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = 0;
    }

    /// All entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Removes every entry, keeping the allocation.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.slots.iter_mut().for_each(|s| *s = 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
        Get(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Small key space so inserts, hits, misses and removes all collide often.
        prop_oneof![
            (0u64..64, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (0u64..64).prop_map(Op::Remove),
            (0u64..64).prop_map(Op::Get),
        ]
    }

    fn v6(k: u64) -> FlowKeyV6 {
        let (lo, hi) = (k as u32, (k >> 32) as u32);
        FlowKeyV6 {
            words: [lo, hi, !lo, 0, lo.rotate_left(7), 0, 0, 1, lo & 3, 9],
        }
    }

    proptest! {
        #[test]
        fn matches_std_hashmap(ops in proptest::collection::vec(op(), 0..600), seed in any::<u64>()) {
            let mut t: FlowTable<u64, u32> = FlowTable::with_seed(seed);
            let mut t6: FlowTable<FlowKeyV6, u32> = FlowTable::with_seed(seed);
            let mut m: HashMap<u64, u32> = HashMap::new();
            for o in ops {
                match o {
                    Op::Insert(k, v) => {
                        prop_assert_eq!(t.insert(k, v), m.insert(k, v));
                        t6.insert(v6(k), v);
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(t.remove(&k), m.remove(&k));
                        t6.remove(&v6(k));
                    }
                    Op::Get(k) => {
                        prop_assert_eq!(t.get(&k), m.get(&k));
                        prop_assert_eq!(t6.get(&v6(k)), m.get(&k));
                    }
                }
                prop_assert_eq!(t.len(), m.len());
                prop_assert_eq!(t6.len(), m.len());
            }
            for k in 0..64u64 {
                prop_assert_eq!(t.get(&k), m.get(&k));
                prop_assert_eq!(t6.get(&v6(k)), m.get(&k));
            }
        }
    }

    #[test]
    fn degenerate_seed_all_collide() {
        // A hash that maps every key to one slot must still be correct (long probe runs,
        // backward shift over wrap-around).
        #[derive(Clone, Copy, PartialEq, Eq)]
        struct Bad(u32);
        impl TableKey for Bad {
            fn hash_with(&self, _: u64) -> u64 {
                0xffff_ffff_0000_0000
            }
        }
        let mut t: FlowTable<Bad, u32> = FlowTable::with_seed(0);
        for i in 0..300 {
            assert_eq!(t.insert(Bad(i), i), None);
        }
        for i in (0..300).step_by(3) {
            assert_eq!(t.remove(&Bad(i)), Some(i));
        }
        for i in 0..300 {
            assert_eq!(t.get(&Bad(i)).copied(), (i % 3 != 0).then_some(i));
        }
    }

    #[test]
    fn churn_keeps_memory_bounded() {
        let mut t: FlowTable<FlowKeyV4, u32> = FlowTable::with_seed(1);
        let key = |i: u64| FlowKeyV4 {
            words: [i as u32, (i >> 32) as u32, (i * 31) as u32, 6],
        };
        for i in 0..1000 {
            t.insert(key(i), i as u32);
        }
        let bytes = t.heap_bytes();
        // One million insert/remove pairs with ~1000 live keys: no growth, no tombstones.
        for i in 1000..1_001_000u64 {
            assert!(t.remove(&key(i - 1000)).is_some());
            t.insert(key(i), i as u32);
        }
        assert_eq!(t.len(), 1000);
        assert_eq!(t.heap_bytes(), bytes);
        for i in 1_000_000..1_001_000u64 {
            assert_eq!(t.get(&key(i)), Some(&(i as u32)));
        }
        assert_eq!(t.get(&key(5)), None);
    }

    #[test]
    fn key_sizes() {
        assert_eq!(std::mem::size_of::<FlowKeyV4>(), 16);
        assert_eq!(std::mem::size_of::<FlowKeyV6>(), 40);
        assert_eq!(std::mem::size_of::<(FlowKeyV4, u32)>(), 20);
        assert_eq!(std::mem::size_of::<(FlowKeyV6, u32)>(), 44);
    }
}
