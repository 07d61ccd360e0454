//! External sort: a run buffer of bounded size that is sorted and spilled as a zstd-compressed
//! run file, and a k-way merge of run files (several passes when there are more runs than the
//! memory budget allows readers), keeping the first record of each key in input order.
//!
//! Touches only files inside the temporary directory it is given (created and removed by
//! [`TmpDir`]).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::template::Key;

/// Bytes of one record slot in the run buffer (besides its name bytes).
pub const REC_BYTES: usize = std::mem::size_of::<Rec>();
/// Memory one open run reader costs in the merge (zstd window of 128 KiB, zstd's block
/// buffers, the read buffer), used to size the merge fan-in from the budget.
pub const READER_COST: usize = 640 * 1024;
/// zstd window of the run files: small, so that readers stay cheap.
const RUN_WINDOW_LOG: u32 = 17;

/// A directory of temporary files, removed with everything in it when dropped.
pub struct TmpDir {
    path: PathBuf,
    next: u64,
}

impl TmpDir {
    pub fn new(parent: &Path) -> Result<TmpDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = parent.join(format!("silt-rdns-{}-{nanos:08x}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| {
            format!(
                "cannot create the temporary directory {} (set BuildOptions::tmp_dir to a \
                 writable directory with room for the compressed runs)",
                path.display()
            )
        })?;
        Ok(TmpDir { path, next: 0 })
    }

    pub fn new_file(&mut self, what: &str) -> PathBuf {
        self.next += 1;
        self.path.join(format!("{what}-{:06}", self.next))
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[derive(Clone, Copy)]
struct Rec {
    hi: u64,
    lo: u64,
    off: u32,
    len: u16,
    v6: bool,
}

impl Rec {
    fn cmp_key(&self, o: &Rec) -> Ordering {
        (self.v6, self.hi, self.lo).cmp(&(o.v6, o.hi, o.lo))
    }
}

fn split(k: Key) -> (bool, u64, u64) {
    match k {
        Key::V4(v) => (false, 0, u64::from(v)),
        Key::V6(v) => (true, (v >> 64) as u64, v as u64),
    }
}

fn join(v6: bool, hi: u64, lo: u64) -> Key {
    if v6 {
        Key::V6((u128::from(hi) << 64) | u128::from(lo))
    } else {
        Key::V4(lo as u32)
    }
}

/// The in-memory run: fixed capacities decided at creation, never grown.
pub struct RunBuffer {
    recs: Vec<Rec>,
    arena: Vec<u8>,
}

impl RunBuffer {
    /// A buffer using at most `bytes` (record slots and name bytes together).
    pub fn with_budget(bytes: usize) -> RunBuffer {
        let bytes = bytes.max(4096);
        // Names after templating average 10-25 bytes: give them ~45 % of the space.
        let arena = (bytes / 20 * 9).min(u32::MAX as usize);
        let recs = (bytes - arena) / REC_BYTES;
        RunBuffer {
            recs: Vec::with_capacity(recs.max(1)),
            arena: Vec::with_capacity(arena),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// Adds a record; false when it does not fit (spill first, then retry).
    pub fn push(&mut self, key: Key, name: &[u8]) -> bool {
        if self.recs.len() == self.recs.capacity()
            || self.arena.len() + name.len() > self.arena.capacity()
        {
            return false;
        }
        let (v6, hi, lo) = split(key);
        let off = self.arena.len() as u32;
        self.arena.extend_from_slice(name);
        self.recs.push(Rec {
            hi,
            lo,
            off,
            len: name.len() as u16,
            v6,
        });
        true
    }

    /// Sorts (ties keep input order), drops duplicate keys (counted in the return value) and
    /// writes the run to `path`. The buffer is empty afterwards.
    pub fn spill(&mut self, path: &Path) -> Result<u64> {
        // Unstable sort with the arena offset as tie-breaker = stable, without scratch memory.
        self.recs
            .sort_unstable_by(|a, b| a.cmp_key(b).then(a.off.cmp(&b.off)));
        let mut w = RunWriter::create(path)?;
        let mut dups = 0;
        let mut prev: Option<Rec> = None;
        for r in &self.recs {
            if let Some(p) = prev {
                if p.cmp_key(r) == Ordering::Equal {
                    dups += 1;
                    continue;
                }
            }
            prev = Some(*r);
            let name = &self.arena[r.off as usize..r.off as usize + r.len as usize];
            w.write(join(r.v6, r.hi, r.lo), name)?;
        }
        w.finish()?;
        self.recs.clear();
        self.arena.clear();
        Ok(dups)
    }
}

/// Writes records `[tag u8: 4|6][key LE][len u16 LE][name]` into a zstd stream.
pub struct RunWriter {
    enc: zstd::stream::write::Encoder<'static, BufWriter<File>>,
    path: PathBuf,
}

impl RunWriter {
    pub fn create(path: &Path) -> Result<RunWriter> {
        let f = File::create(path)
            .with_context(|| format!("cannot create the run file {}", path.display()))?;
        let mut enc = zstd::stream::write::Encoder::new(BufWriter::with_capacity(1 << 16, f), 1)?;
        enc.set_parameter(zstd::zstd_safe::CParameter::WindowLog(RUN_WINDOW_LOG))?;
        Ok(RunWriter {
            enc,
            path: path.to_path_buf(),
        })
    }

    pub fn write(&mut self, key: Key, name: &[u8]) -> Result<()> {
        let mut head = [0u8; 19];
        let n = match key {
            Key::V4(v) => {
                head[0] = 4;
                head[1..5].copy_from_slice(&v.to_le_bytes());
                5
            }
            Key::V6(v) => {
                head[0] = 6;
                head[1..17].copy_from_slice(&v.to_le_bytes());
                17
            }
        };
        head[n..n + 2].copy_from_slice(&(name.len() as u16).to_le_bytes());
        self.enc.write_all(&head[..n + 2])?;
        self.enc.write_all(name)?;
        Ok(())
    }

    pub fn finish(self) -> Result<()> {
        let path = self.path;
        let mut w = self.enc.finish()?;
        w.flush().with_context(|| {
            format!(
                "cannot write the run file {} (is the disk full?)",
                path.display()
            )
        })?;
        Ok(())
    }
}

/// Reads back a run file.
pub struct RunReader {
    dec: zstd::stream::read::Decoder<'static, BufReader<File>>,
    path: PathBuf,
    pub key: Key,
    pub name: Vec<u8>,
}

impl RunReader {
    pub fn open(path: &Path) -> Result<RunReader> {
        let f = File::open(path)
            .with_context(|| format!("cannot open the run file {}", path.display()))?;
        let dec = zstd::stream::read::Decoder::new(f)?;
        Ok(RunReader {
            dec,
            path: path.to_path_buf(),
            key: Key::V4(0),
            name: Vec::new(),
        })
    }

    /// Advances to the next record; false at the end of the run.
    pub fn advance(&mut self) -> Result<bool> {
        let mut tag = [0u8; 1];
        match self.dec.read_exact(&mut tag) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(self.damaged(e)),
        }
        let mut buf = [0u8; 18];
        self.key = match tag[0] {
            4 => {
                self.dec
                    .read_exact(&mut buf[..6])
                    .map_err(|e| self.damaged(e))?;
                let v = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                Key::V4(v)
            }
            6 => {
                self.dec
                    .read_exact(&mut buf[..18])
                    .map_err(|e| self.damaged(e))?;
                let mut k = [0u8; 16];
                k.copy_from_slice(&buf[..16]);
                Key::V6(u128::from_le_bytes(k))
            }
            t => {
                return Err(self.damaged(io::Error::other(format!("record tag {t}"))));
            }
        };
        let nl = match self.key {
            Key::V4(_) => u16::from_le_bytes([buf[4], buf[5]]),
            Key::V6(_) => u16::from_le_bytes([buf[16], buf[17]]),
        } as usize;
        self.name.resize(nl, 0);
        let mut name = std::mem::take(&mut self.name);
        let r = self.dec.read_exact(&mut name);
        self.name = name;
        r.map_err(|e| self.damaged(e))?;
        Ok(true)
    }

    fn damaged(&self, e: io::Error) -> anyhow::Error {
        anyhow::anyhow!(
            "the temporary run file {} cannot be read back ({e}): was the temporary directory \
             changed or the disk full during the build?",
            self.path.display()
        )
    }
}

struct HeapItem {
    key: Key,
    run: usize,
}

impl PartialEq for HeapItem {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for HeapItem {}
impl PartialOrd for HeapItem {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for HeapItem {
    // Reversed: BinaryHeap is a max-heap; the smallest key (then the earliest run) comes first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key.cmp(&self.key).then(o.run.cmp(&self.run))
    }
}

/// Merges `runs` (in input order) and calls `sink` once per distinct key with the name from
/// the earliest run. Returns the number of duplicates dropped.
pub fn merge(runs: &[PathBuf], mut sink: impl FnMut(Key, &[u8]) -> Result<()>) -> Result<u64> {
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (i, p) in runs.iter().enumerate() {
        let mut r = RunReader::open(p)?;
        if r.advance()? {
            heap.push(HeapItem { key: r.key, run: i });
        }
        readers.push(r);
    }
    let mut dups = 0;
    let mut last: Option<Key> = None;
    while let Some(top) = heap.pop() {
        let r = &mut readers[top.run];
        if last == Some(top.key) {
            dups += 1;
        } else {
            sink(top.key, &r.name)?;
            last = Some(top.key);
        }
        if r.advance()? {
            heap.push(HeapItem {
                key: r.key,
                run: top.run,
            });
        }
    }
    Ok(dups)
}

/// Merges groups of at most `fan_in` runs into new runs until at most `fan_in` remain
/// (groups are contiguous, so input order and "first wins" are kept). Removes merged inputs.
/// Returns the remaining runs, the duplicates dropped and the number of passes made.
pub fn reduce_runs(
    mut runs: Vec<PathBuf>,
    fan_in: usize,
    tmp: &mut TmpDir,
) -> Result<(Vec<PathBuf>, u64, u32)> {
    let fan_in = fan_in.max(2);
    let mut dups = 0;
    let mut passes = 0;
    while runs.len() > fan_in {
        passes += 1;
        let mut next = Vec::new();
        for group in runs.chunks(fan_in) {
            if group.len() == 1 {
                next.push(group[0].clone());
                continue;
            }
            let out = tmp.new_file("merged");
            let mut w = RunWriter::create(&out)?;
            dups += merge(group, |k, n| w.write(k, n))?;
            w.finish()?;
            for p in group {
                let _ = std::fs::remove_file(p);
            }
            next.push(out);
        }
        runs = next;
    }
    Ok((runs, dups, passes))
}
