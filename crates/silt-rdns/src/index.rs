//! [`RdnsIndex`]: opens an index file through mmap, checks its footer, dictionary and block
//! index, and answers lookups (single and batched) with a bounded thread-safe cache of recent
//! results. Decompression buffers and contexts are pooled (no allocation per block read).
//!
//! Touches only the index file (read-only mapping); never writes.

use std::fs::File;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use memmap2::Mmap;

use crate::format::{self, Footer, BLOCK_HEADER_LEN, FOOTER_LEN, HEADER_LEN, HEADER_MAGIC};
use crate::template::{self, Key};

/// A looked-up name, shared with the cache.
pub type Name = Arc<str>;

/// Cache sizes of an [`RdnsIndex`].
#[derive(Clone, Copy, Debug)]
pub struct CacheOptions {
    /// Result slots (address -> name or absent), rounded up to a power of two; 0 disables the
    /// cache. Default 262144 (~16 MiB of slots plus the names).
    pub results: usize,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions { results: 1 << 18 }
    }
}

/// A reverse-DNS index opened for lookups. `Send + Sync`: share it with `Arc` between threads.
pub struct RdnsIndex {
    map: Mmap,
    path: PathBuf,
    footer: Footer,
    dict: Vec<u8>,
    scratch: Mutex<Vec<Scratch>>,
    results: Cache,
}

impl std::fmt::Debug for RdnsIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdnsIndex")
            .field("path", &self.path)
            .field("footer", &self.footer)
            .finish()
    }
}

/// Counts of an open index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexStats {
    pub v4_entries: u64,
    pub v6_entries: u64,
    pub v4_blocks: u64,
    pub v6_blocks: u64,
    pub dict_bytes: u64,
    pub file_bytes: u64,
}

impl RdnsIndex {
    /// Opens and checks an index (footer, offsets, checksum of dictionary and block index).
    /// Blocks are checked when first read.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, CacheOptions::default())
    }

    pub fn open_with(path: impl AsRef<Path>, cache: CacheOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path)
            .with_context(|| format!("cannot open the rdns index {}", path.display()))?;
        // SAFETY: the index is written once to a temporary name and renamed into place; it is
        // never modified in place. Replacing it while mapped is fine (rename keeps the old
        // inode); truncating it in place is not supported (documented).
        let map = unsafe { Mmap::map(&file) }
            .with_context(|| format!("cannot mmap the rdns index {}", path.display()))?;
        let shown = path.display().to_string();
        let bad = move |what: String| {
            anyhow::anyhow!(
                "{shown} is not a usable silt rdns index: {what}; rebuild it with silt_rdns::build"
            )
        };
        let len = map.len();
        if len < HEADER_LEN + FOOTER_LEN {
            return Err(bad(format!(
                "file is {len} bytes, shorter than header + footer (truncated?)"
            )));
        }
        if &map[..8] != HEADER_MAGIC {
            return Err(bad("no header magic (not an index file)".into()));
        }
        let footer = Footer::parse(&map[len - FOOTER_LEN..]).map_err(&bad)?;
        if footer.file_len != len as u64 {
            return Err(bad(format!(
                "footer says {} bytes, file has {len} (truncated or appended to)",
                footer.file_len
            )));
        }
        let f = &footer;
        let v4_idx_len = f
            .v4_blocks
            .checked_mul(8)
            .and_then(|k| f.v4_blocks.checked_add(1)?.checked_mul(8)?.checked_add(k));
        let v6_idx_len = f
            .v6_blocks
            .checked_mul(32)
            .and_then(|k| f.v6_blocks.checked_add(1)?.checked_mul(8)?.checked_add(k));
        let layout_ok = f.v4_data_off == HEADER_LEN as u64
            && f.v4_data_off <= f.v6_data_off
            && f.v6_data_off <= f.dict_off
            && f.dict_off.checked_add(f.dict_len) == Some(f.v4_index_off)
            && v4_idx_len.and_then(|l| f.v4_index_off.checked_add(l)) == Some(f.v6_index_off)
            && v6_idx_len.and_then(|l| f.v6_index_off.checked_add(l)) == Some(f.footer_off)
            && f.footer_off.checked_add(FOOTER_LEN as u64) == Some(f.file_len)
            && f.block_entries > 0
            && f.v4_count <= f.v4_blocks.saturating_mul(u64::from(f.block_entries))
            && f.v6_count <= f.v6_blocks.saturating_mul(u64::from(f.block_entries));
        if !layout_ok {
            return Err(bad(
                "footer offsets are inconsistent (damaged footer)".into()
            ));
        }
        let mut meta = crc32fast::Hasher::new();
        meta.update(&map[..HEADER_LEN]);
        meta.update(&map[f.dict_off as usize..f.footer_off as usize]);
        if meta.finalize() != f.meta_crc {
            return Err(bad(
                "checksum of the dictionary and block index does not match (damaged file)".into(),
            ));
        }
        let dict = map[f.dict_off as usize..(f.dict_off + f.dict_len) as usize].to_vec();
        // A lookup reads one block of ~150 bytes at a random place: without this advice the
        // kernel reads 128 KiB around every page fault, which on an index larger than the page
        // cache reads (and maps into RSS) most of the file for a few thousand lookups. Advice
        // only; a kernel that refuses it changes nothing but speed.
        let _ = map.advise(memmap2::Advice::Random);
        let idx = RdnsIndex {
            path,
            footer,
            dict,
            scratch: Mutex::new(Vec::new()),
            results: Cache::new(cache.results),
            map,
        };
        // Block offsets must increase within their section (checked once: cheap, sequential).
        for v6 in [false, true] {
            let (n, lo, hi) = if v6 {
                (f.v6_blocks, f.v6_data_off, f.dict_off)
            } else {
                (f.v4_blocks, f.v4_data_off, f.v6_data_off)
            };
            let mut prev = lo;
            for b in 0..=n {
                let o = idx.block_offset(v6, b);
                let min = if b == 0 {
                    lo
                } else {
                    prev + BLOCK_HEADER_LEN as u64
                };
                if (b == 0 && o != lo) || o < min || o > hi || (b == n && o != hi) {
                    return Err(bad(format!(
                        "block offset {b} of the IPv{} section is out of order (damaged index)",
                        if v6 { 6 } else { 4 }
                    )));
                }
                prev = o;
            }
        }
        Ok(idx)
    }

    pub fn stats(&self) -> IndexStats {
        let f = &self.footer;
        IndexStats {
            v4_entries: f.v4_count,
            v6_entries: f.v6_count,
            v4_blocks: f.v4_blocks,
            v6_blocks: f.v6_blocks,
            dict_bytes: f.dict_len,
            file_bytes: f.file_len,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Exact-match lookup. `::ffff:a.b.c.d` looks up `a.b.c.d`. `Err` only for a damaged block.
    pub fn lookup(&self, ip: IpAddr) -> Result<Option<String>> {
        Ok(self.lookup_key(Key::from_ip(ip))?.map(|n| n.to_string()))
    }

    /// Like [`lookup`](Self::lookup) but returns the shared name (no copy when cached).
    pub fn lookup_shared(&self, ip: IpAddr) -> Result<Option<Name>> {
        self.lookup_key(Key::from_ip(ip))
    }

    fn lookup_key(&self, key: Key) -> Result<Option<Name>> {
        if let Some(r) = self.results.get(&key) {
            return Ok(r);
        }
        let r = match self.find_block(key) {
            None => None,
            Some((v6, b)) => {
                let mut s = self.scratch()?;
                let r = self
                    .load_block(&mut s, v6, b)
                    .and_then(|()| self.find_in(key, v6, b, &s.buf));
                self.give_back(s);
                r?
            }
        };
        self.results.insert(key, r.clone());
        Ok(r)
    }

    /// Batch lookup: `out[i]` is the name of `ips[i]` (`None` for absent or `None` input).
    /// Keys are sorted and deduplicated so that each block is read once per batch.
    pub fn lookup_many(&self, ips: &[Option<IpAddr>], out: &mut Vec<Option<Name>>) -> Result<()> {
        out.clear();
        out.resize(ips.len(), None);
        let mut todo: Vec<(Key, usize)> = Vec::new();
        for (i, ip) in ips.iter().enumerate() {
            let Some(ip) = ip else { continue };
            let key = Key::from_ip(*ip);
            match self.results.get(&key) {
                Some(r) => out[i] = r,
                None => todo.push((key, i)),
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        todo.sort_unstable();
        let mut s = self.scratch()?;
        let r = self.lookup_sorted(&todo, &mut s, out);
        self.give_back(s);
        r
    }

    fn lookup_sorted(
        &self,
        todo: &[(Key, usize)],
        s: &mut Scratch,
        out: &mut [Option<Name>],
    ) -> Result<()> {
        let mut cur_block: Option<(bool, u64)> = None;
        let mut prev: Option<(Key, Option<Name>)> = None;
        for &(key, i) in todo {
            if let Some((pk, pr)) = &prev {
                if *pk == key {
                    out[i] = pr.clone();
                    continue;
                }
            }
            let r = match self.find_block(key) {
                None => None,
                Some(id) => {
                    if cur_block != Some(id) {
                        self.load_block(s, id.0, id.1)?;
                        cur_block = Some(id);
                    }
                    self.find_in(key, id.0, id.1, &s.buf)?
                }
            };
            self.results.insert(key, r.clone());
            out[i] = r.clone();
            prev = Some((key, r));
        }
        Ok(())
    }

    fn find_in(&self, key: Key, v6: bool, b: u64, payload: &[u8]) -> Result<Option<Name>> {
        let first = self.first_key(v6, b);
        let kv = format::key_value(key);
        let enc =
            format::find_in_payload(payload, first, kv).map_err(|e| self.damaged(v6, b, &e))?;
        let Some(enc) = enc else { return Ok(None) };
        let mut name = Vec::with_capacity(enc.len() + 32);
        template::decode(key, enc, &mut name).map_err(|e| self.damaged(v6, b, &e.to_string()))?;
        let s = String::from_utf8(name)
            .map_err(|_| self.damaged(v6, b, "a stored name is not UTF-8"))?;
        Ok(Some(Arc::from(s)))
    }

    fn damaged(&self, v6: bool, b: u64, what: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "rdns index {}: block {b} of the IPv{} section is damaged ({what}); rebuild the index",
            self.path.display(),
            if v6 { 6 } else { 4 }
        )
    }

    fn block_offset(&self, v6: bool, b: u64) -> u64 {
        let f = &self.footer;
        let base = if v6 {
            f.v6_index_off + 32 * f.v6_blocks
        } else {
            f.v4_index_off + 8 * f.v4_blocks
        };
        format::le_u64(&self.map, (base + 8 * b) as usize)
    }

    fn first_key(&self, v6: bool, b: u64) -> u128 {
        let f = &self.footer;
        if v6 {
            format::le_u128(&self.map, (f.v6_index_off + 16 * b) as usize)
        } else {
            u128::from(format::le_u32(&self.map, (f.v4_index_off + 4 * b) as usize))
        }
    }

    fn last_key(&self, v6: bool, b: u64) -> u128 {
        let f = &self.footer;
        if v6 {
            format::le_u128(
                &self.map,
                (f.v6_index_off + 16 * (f.v6_blocks + b)) as usize,
            )
        } else {
            u128::from(format::le_u32(
                &self.map,
                (f.v4_index_off + 4 * (f.v4_blocks + b)) as usize,
            ))
        }
    }

    /// The block that may hold `key`: the last one whose first key is <= key, if its last key
    /// is >= key (keys between blocks are absent without reading a block).
    fn find_block(&self, key: Key) -> Option<(bool, u64)> {
        let (v6, n, kv) = match key {
            Key::V4(v) => (false, self.footer.v4_blocks, u128::from(v)),
            Key::V6(v) => (true, self.footer.v6_blocks, v),
        };
        // Number of blocks whose first key <= kv.
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.first_key(v6, mid) <= kv {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo > 0 && self.last_key(v6, lo - 1) >= kv).then(|| (v6, lo - 1))
    }

    /// Reads a block into `s.buf` (decompressed payload), checked against its crc.
    fn load_block(&self, s: &mut Scratch, v6: bool, b: u64) -> Result<()> {
        let start = self.block_offset(v6, b) as usize;
        let end = self.block_offset(v6, b + 1) as usize;
        let raw = self
            .map
            .get(start..end)
            .filter(|r| r.len() >= BLOCK_HEADER_LEN)
            .ok_or_else(|| self.damaged(v6, b, "block bounds"))?;
        let crc = format::le_u32(raw, 0);
        if crc32fast::hash(&raw[4..]) != crc {
            return Err(self.damaged(v6, b, "checksum mismatch"));
        }
        let raw_len = format::le_u32(raw, 4) as usize;
        if raw_len > format::MAX_RAW_BLOCK {
            return Err(self.damaged(v6, b, "impossible block size"));
        }
        s.buf.clear();
        // Slack lets zstd use its fast copies up to the end of the output.
        s.buf.reserve(raw_len + 64);
        match s
            .d
            .decompress_to_buffer(&raw[BLOCK_HEADER_LEN..], &mut s.buf)
        {
            Ok(n) if n == raw_len => Ok(()),
            Ok(_) => Err(self.damaged(v6, b, "decompressed size differs")),
            Err(e) => Err(self.damaged(v6, b, &format!("zstd: {e}"))),
        }
    }

    fn scratch(&self) -> Result<Scratch> {
        if let Some(s) = self.scratch.lock().ok().and_then(|mut v| v.pop()) {
            return Ok(s);
        }
        let d = if self.dict.is_empty() {
            zstd::bulk::Decompressor::new()
        } else {
            zstd::bulk::Decompressor::with_dictionary(&self.dict)
        };
        let d = d.with_context(|| {
            format!(
                "rdns index {}: cannot load its zstd dictionary (damaged?)",
                self.path.display()
            )
        })?;
        Ok(Scratch {
            d,
            buf: Vec::with_capacity(8192),
        })
    }

    fn give_back(&self, s: Scratch) {
        if let Ok(mut v) = self.scratch.lock() {
            if v.len() < 16 && s.buf.capacity() <= 1 << 20 {
                v.push(s);
            }
        }
    }

    /// Decodes every entry (for tests and `verify`): calls `f(key, name)` in key order.
    pub fn for_each(&self, mut f: impl FnMut(IpAddr, &str)) -> Result<()> {
        // A scan reads the whole file in order: read ahead meanwhile, random access after.
        let _ = self.map.advise(memmap2::Advice::Sequential);
        let r = self.for_each_entry(&mut f);
        let _ = self.map.advise(memmap2::Advice::Random);
        r
    }

    fn for_each_entry(&self, f: &mut impl FnMut(IpAddr, &str)) -> Result<()> {
        for v6 in [false, true] {
            let n = if v6 {
                self.footer.v6_blocks
            } else {
                self.footer.v4_blocks
            };
            let mut prev: Option<u128> = None;
            let mut s = self.scratch()?;
            for b in 0..n {
                self.load_block(&mut s, v6, b)?;
                let first = self.first_key(v6, b);
                let entries = format::entries_of_payload(&s.buf, first)
                    .map_err(|e| self.damaged(v6, b, &e))?;
                if entries.last().map(|e| e.0) != Some(self.last_key(v6, b)) {
                    bail!(self.damaged(v6, b, "last key differs from the block index"));
                }
                for (k, enc) in entries {
                    if prev.is_some_and(|p| p >= k) {
                        bail!(self.damaged(v6, b, "keys out of order"));
                    }
                    prev = Some(k);
                    let key = if v6 { Key::V6(k) } else { Key::V4(k as u32) };
                    let mut name = Vec::new();
                    template::decode(key, enc, &mut name)
                        .map_err(|e| self.damaged(v6, b, &e.to_string()))?;
                    let s = std::str::from_utf8(&name)
                        .map_err(|_| self.damaged(v6, b, "a stored name is not UTF-8"))?;
                    let ip = match key {
                        Key::V4(v) => IpAddr::V4(v.into()),
                        Key::V6(v) => IpAddr::V6(v.into()),
                    };
                    f(ip, s);
                }
            }
        }
        Ok(())
    }
}

/// A decompression context (with the dictionary loaded) and its output buffer.
struct Scratch {
    d: zstd::bulk::Decompressor<'static>,
    buf: Vec<u8>,
}

/// A bounded cache of lookup results: a 2-way set-associative table of `cap` entries (rounded
/// up to a power of two); each set of two is behind its own lock and kept in LRU order (a hit
/// moves to the front, an insert evicts the back). One memory access per probe, no
/// allocation, no rehashing.
/// Two entries, most recently used first.
type Set = [Option<(Key, Option<Name>)>; 2];

struct Cache {
    sets: Vec<Mutex<Set>>,
    mask: usize,
}

impl Cache {
    fn new(cap: usize) -> Self {
        let n = if cap < 2 {
            0
        } else {
            cap.next_power_of_two() / 2
        };
        Cache {
            sets: (0..n).map(|_| Mutex::new([None, None])).collect(),
            mask: n.saturating_sub(1),
        }
    }

    fn set(&self, k: &Key) -> Option<&Mutex<Set>> {
        if self.sets.is_empty() {
            return None;
        }
        let h = match *k {
            Key::V4(v) => u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            Key::V6(v) => ((v as u64) ^ ((v >> 64) as u64).rotate_left(29) ^ 0x6b)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15),
        };
        self.sets.get((h >> 20) as usize & self.mask)
    }

    fn get(&self, k: &Key) -> Option<Option<Name>> {
        let mut g = self.set(k)?.lock().ok()?;
        match &g[..] {
            [Some((k0, v)), _] if k0 == k => Some(v.clone()),
            [_, Some((k1, v))] if k1 == k => {
                let v = v.clone();
                g.swap(0, 1);
                Some(v)
            }
            _ => None,
        }
    }

    fn insert(&self, k: Key, v: Option<Name>) {
        let Some(m) = self.set(&k) else { return };
        let Ok(mut g) = m.lock() else { return };
        if matches!(&g[0], Some((k0, _)) if *k0 == k) {
            g[0] = Some((k, v));
            return;
        }
        g[1] = g[0].take();
        g[0] = Some((k, v));
    }
}
