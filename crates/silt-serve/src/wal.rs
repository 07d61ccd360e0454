//! The write-ahead log: where an event becomes durable before it is acknowledged.
//!
//! Sources hand [`Entry`]s (a table or none, a format, the raw bytes of one request, frame or
//! chunk of lines) to [`Wal::append`]. One thread, `silt-wal`, takes every append waiting at that
//! moment, writes them with one `write` and makes them durable with one `fdatasync` (group
//! commit: under load, one fsync serves hundreds of appends), then answers each append with its
//! sequence number and passes the records, in order, to the ingest side. An append is answered
//! only after its fsync, so a source may acknowledge then (Forward `ack`, HTTP 200).
//!
//! On disk: `<lake>/_silt/serve/wal/<first seq, 20 digits>.wal` segments of records
//! `len u32 LE | xxh64(payload) u64 LE | payload`, payload = `seq u64 | table | format | source |
//! chunk id | body` (each string a u16-length-prefixed UTF-8). A new segment is started at each
//! start and when one passes [`SEGMENT_BYTES`]. [`replay`] reads them back in order: a record cut
//! short or failing its checksum at the end of the last segment is the torn write of a crash (it
//! was never acknowledged) and the segment is truncated there; anywhere else it is reported.
//! Segments whose records are all in the lake ([`Wal::release`]) are deleted once they are older
//! than the retention (kept that long so that a client resending an unacknowledged chunk after a
//! crash is recognised by its chunk id).
//!
//! Touches only the `wal/` directory.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use tokio::sync::{mpsc, oneshot};
use twox_hash::XxHash64;

/// A segment is closed and a new one started past this size.
pub const SEGMENT_BYTES: u64 = 64 << 20;
/// Largest record accepted (a body beyond this is refused before it reaches the log).
pub const MAX_RECORD_BYTES: usize = 256 << 20;
/// Log already in the lake kept at most (bytes), whatever the retention (see [`Janitor::release`]).
pub const RETAIN_BYTES: u64 = 256 << 20;
/// Appends written and fsynced together at most (bytes).
const GROUP_BYTES: usize = 16 << 20;

/// What a source asks the log to keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entry {
    /// The table every row of `body` goes to; `None` lets the decoder name it (EVE, Zeek).
    pub table: Option<String>,
    /// A format of the registry (`json`, `msgpack`, `syslog`, `zeek`, ...).
    pub format: String,
    /// Where it came from, for rejects and logs (`http 127.0.0.1:5123`, `forward ...`).
    pub source: String,
    /// The client's id for this chunk (Forward `chunk`, HTTP `Idempotency-Key`): a chunk id the
    /// log already holds is acknowledged without being appended again.
    pub chunk: Option<String>,
    pub body: Vec<u8>,
    /// Set for records read from Kafka: such an entry is numbered and handed on in order like
    /// any other, but not written to the log (Kafka keeps it; after a crash the consumer resumes
    /// from the offsets the lake's flush record holds, see `crate::kafka`), so it is never
    /// replayed.
    pub kafka: Option<KafkaSpan>,
}

/// Where in Kafka an entry's records came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaSpan {
    pub topic: String,
    pub partition: i32,
    /// The offset after the entry's last record.
    pub next: i64,
    /// The offset of the message each line of the body came from (each record, for msgpack),
    /// so that a reject names its message; a header line given for the topic is -1.
    pub line_offsets: Vec<i64>,
    /// `--kafka-meta`: the messages' attributes, attached to their rows after decoding.
    pub meta: Option<std::sync::Arc<crate::kafka_meta::EntryMeta>>,
}

/// An entry with its place in the log.
#[derive(Debug, Clone)]
pub struct Record {
    pub seq: u64,
    pub entry: Entry,
}

/// How an append ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Written and fsynced as record `seq`.
    Durable(u64),
    /// The log already holds this chunk id (a client resending what it did not see acknowledged).
    Duplicate,
    /// The log holds this chunk id with another content digest (see [`with_digest`]): the client
    /// used one id for two different chunks. Nothing is logged.
    Conflict,
}

/// How often a source whose appends the log keeps refusing says so again.
pub const REFUSED_NOTE: Duration = Duration::from_secs(30);

/// What a source retrying a refused append (a full disk, a failing fsync) tells the operator:
/// the first refusal, then at most one line per [`REFUSED_NOTE`] with the count so far, and one
/// when the log takes the append at last, rather than a line at every retry.
#[derive(Debug, Default)]
pub struct Refusals {
    first: Option<Instant>,
    said: Option<Instant>,
    count: u64,
}

impl Refusals {
    /// The log refused `source`'s append with `e`: logs it if it is time to.
    pub fn refused(&mut self, source: &str, e: &anyhow::Error) {
        if let Some(line) = self.refused_at(Instant::now(), source, e) {
            tracing::error!("{line}");
        }
    }

    /// The log took `source`'s append: says so if it had refused it before.
    pub fn taken(&mut self, source: &str) {
        if let Some(line) = self.taken_at(Instant::now(), source) {
            tracing::warn!("{line}");
        }
    }

    fn refused_at(&mut self, now: Instant, source: &str, e: &anyhow::Error) -> Option<String> {
        self.count += 1;
        let first = *self.first.get_or_insert(now);
        if self
            .said
            .is_some_and(|t| now.duration_since(t) < REFUSED_NOTE)
        {
            return None;
        }
        self.said = Some(now);
        Some(if self.count == 1 {
            format!(
                "{source}: {e:#}; retrying (said again every {}s while it lasts)",
                REFUSED_NOTE.as_secs()
            )
        } else {
            format!(
                "{source}: {e:#}; still retrying ({} attempts in {}s)",
                self.count,
                now.duration_since(first).as_secs()
            )
        })
    }

    fn taken_at(&mut self, now: Instant, source: &str) -> Option<String> {
        let first = self.first.take()?;
        let line = format!(
            "{source}: the write-ahead log takes appends again, after {} refused in {:.1}s",
            self.count,
            now.duration_since(first).as_secs_f64()
        );
        *self = Self::default();
        Some(line)
    }
}

/// `id` marked with a digest of the chunk's content, so that the id reused for other content is
/// told from a resend ([`Appended::Conflict`]). The mark is the suffix `#` + 16 hex digits; ids
/// without it (Forward's, Kafka's) are compared as ids alone.
pub fn with_digest(id: &str, content: &[u8]) -> String {
    format!(
        "{id}#{:016x}",
        twox_hash::XxHash64::oneshot(0x5117, content)
    )
}

/// What a chunk whose id is logged already is, by the content digests of the logged one and
/// of this one: the same content (or no digest to compare) is a resend, other content a conflict.
fn resend(known: Option<u64>, digest: Option<u64>) -> Appended {
    match (known, digest) {
        (Some(a), Some(b)) if a != b => Appended::Conflict,
        _ => Appended::Duplicate,
    }
}

/// A chunk string's id and its content digest, if [`with_digest`] marked it.
fn split_digest(chunk: &str) -> (&str, Option<u64>) {
    if let Some(cut) = chunk.len().checked_sub(17) {
        if chunk.as_bytes()[cut] == b'#' {
            if let Some(d) = chunk
                .get(cut + 1..)
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                return (&chunk[..cut], Some(d));
            }
        }
    }
    (chunk, None)
}

struct Append {
    entry: Entry,
    /// Taken when answered.
    done: Option<oneshot::Sender<anyhow::Result<Appended>>>,
}

/// Counters of the log, for `/metrics`.
#[derive(Debug, Default)]
pub struct WalStats {
    pub appends: AtomicU64,
    pub bytes: AtomicU64,
    pub fsyncs: AtomicU64,
    pub duplicates: AtomicU64,
    /// Sequence number of the last durable record.
    pub last_seq: AtomicU64,
    pub segments_deleted: AtomicU64,
}

/// The log's handle for sources (cheap to clone); see the module documentation. The writer
/// thread stops once every handle is dropped (after writing what it was given).
#[derive(Clone)]
pub struct Wal {
    /// `None` once [`Wal::close`]d (by any clone): the writer ends when the last sender is gone.
    tx: Arc<std::sync::RwLock<Option<mpsc::Sender<Append>>>>,
    janitor: Janitor,
    pub stats: Arc<WalStats>,
}

/// The part of the log that deletes what is in the lake; it does not keep the writer running.
#[derive(Clone)]
pub struct Janitor {
    chunks: Arc<Mutex<ChunkIndex>>,
    dir: PathBuf,
    retain: Duration,
    stats: Arc<WalStats>,
    /// The segment being written (never deleted).
    current: Arc<Mutex<PathBuf>>,
}

/// Chunk ids seen recently, with when they were first logged.
#[derive(Default)]
struct ChunkIndex {
    /// By id: when first logged, the content digest when the chunk string had one, and the
    /// record's sequence number.
    seen: HashMap<String, (Instant, Option<u64>, u64)>,
}

impl ChunkIndex {
    fn prune(&mut self, keep: Duration) {
        let now = Instant::now();
        self.seen
            .retain(|_, (t, _, _)| now.duration_since(*t) < keep);
    }

    fn insert(&mut self, chunk: &str, seq: u64, now: Instant) {
        let (id, digest) = split_digest(chunk);
        self.seen
            .entry(id.to_string())
            .or_insert((now, digest, seq));
    }

    /// How `chunk` compares with what the log holds: `None` when its id is new.
    fn lookup(&self, chunk: &str) -> Option<Appended> {
        let (id, digest) = split_digest(chunk);
        let (_, known, _) = self.seen.get(id)?;
        Some(resend(*known, digest))
    }
}

/// What [`replay`] found.
pub struct Replayed {
    /// Records after `covered`, in order.
    pub records: Vec<Record>,
    /// The highest sequence number in the log (or `covered` when the log holds nothing newer).
    pub last_seq: u64,
    /// Chunk ids in the retained segments (acknowledged or not, covered or not), with their
    /// records' sequence numbers.
    pub chunks: Vec<(String, u64)>,
    /// What was repaired or could not be read, for the log.
    pub notes: Vec<String>,
}

fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}.wal"))
}

/// The segments of `dir`, by first sequence number.
fn segments(dir: &Path) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    for e in rd {
        let p = e?.path();
        let first = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".wal"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(first) = first {
            out.push((first, p));
        }
    }
    out.sort();
    Ok(out)
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    buf.extend_from_slice(&(b.len() as u16).to_le_bytes());
    buf.extend_from_slice(b);
}

/// Appends the framed record to `buf`.
fn encode(buf: &mut Vec<u8>, seq: u64, e: &Entry) {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; 12]);
    buf.extend_from_slice(&seq.to_le_bytes());
    put_str(buf, e.table.as_deref().unwrap_or(""));
    put_str(buf, &e.format);
    put_str(buf, &e.source);
    put_str(buf, e.chunk.as_deref().unwrap_or(""));
    buf.extend_from_slice(&e.body);
    let len = (buf.len() - start - 12) as u32;
    let sum = XxHash64::oneshot(0, &buf[start + 12..]);
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    buf[start + 4..start + 12].copy_from_slice(&sum.to_le_bytes());
}

fn take_str<'a>(p: &mut &'a [u8]) -> Option<&'a str> {
    if p.len() < 2 {
        return None;
    }
    let n = u16::from_le_bytes([p[0], p[1]]) as usize;
    let s = p.get(2..2 + n)?;
    *p = &p[2 + n..];
    std::str::from_utf8(s).ok()
}

fn decode(payload: &[u8]) -> Option<Record> {
    let mut p = payload;
    let seq = u64::from_le_bytes(p.get(..8)?.try_into().ok()?);
    p = &p[8..];
    let table = take_str(&mut p)?;
    let format = take_str(&mut p)?.to_string();
    let source = take_str(&mut p)?.to_string();
    let chunk = take_str(&mut p)?;
    Some(Record {
        seq,
        entry: Entry {
            table: (!table.is_empty()).then(|| table.to_string()),
            format,
            source,
            chunk: (!chunk.is_empty()).then(|| chunk.to_string()),
            body: p.to_vec(),
            kafka: None,
        },
    })
}

/// Reads the records of one segment; `Err(offset)` with the records before it when a record is
/// cut short or fails its checksum at `offset`.
fn read_segment(path: &Path) -> anyhow::Result<(Vec<Record>, Option<u64>)> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut data))
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let bad = Some(at as u64);
        let Some(head) = data.get(at..at + 12) else {
            return Ok((out, bad));
        };
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let sum = u64::from_le_bytes(head[4..12].try_into().expect("8 bytes"));
        let Some(payload) = data.get(at + 12..at + 12 + len) else {
            return Ok((out, bad));
        };
        if XxHash64::oneshot(0, payload) != sum {
            return Ok((out, bad));
        }
        match decode(payload) {
            Some(r) => out.push(r),
            None => return Ok((out, bad)),
        }
        at += 12 + len;
    }
    Ok((out, None))
}

/// Reads the log in `dir`: the records after `covered` (those before are in the lake), the
/// chunk ids of every record, and the highest sequence number. Repairs a torn last record.
pub fn replay(dir: &Path, covered: u64) -> anyhow::Result<Replayed> {
    let segs = segments(dir)?;
    let mut out = Replayed {
        records: Vec::new(),
        last_seq: covered,
        chunks: Vec::new(),
        notes: Vec::new(),
    };
    let n = segs.len();
    for (i, (_, path)) in segs.iter().enumerate() {
        let (records, bad) = read_segment(path)?;
        if let Some(at) = bad {
            if i + 1 == n {
                // The torn tail of the write a crash interrupted: never acknowledged.
                OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|f| {
                        f.set_len(at)?;
                        f.sync_all()
                    })
                    .with_context(|| format!("cannot truncate {}", path.display()))?;
                out.notes.push(format!(
                    "{}: cut an incomplete last record at byte {at} (a write the crash interrupted; it was never acknowledged)",
                    path.display()
                ));
            } else {
                out.notes.push(format!(
                    "{}: record at byte {at} is damaged; the rest of this segment cannot be read",
                    path.display()
                ));
            }
        }
        for r in records {
            out.last_seq = out.last_seq.max(r.seq);
            if let Some(c) = &r.entry.chunk {
                out.chunks.push((c.clone(), r.seq));
            }
            if r.seq > covered {
                out.records.push(r);
            }
        }
    }
    Ok(out)
}

/// Settings of the log.
#[derive(Debug, Clone)]
pub struct WalConfig {
    pub dir: PathBuf,
    /// Segments wholly in the lake are kept this long (chunk ids stay known).
    pub retain: Duration,
    /// Appends waiting for the writer at most (beyond: [`Wal::try_append`] says "busy").
    pub queue: usize,
}

impl Wal {
    /// Starts the writer thread. `next_seq` follows the last record of the existing log;
    /// `chunks` are the chunk ids already in it; durable records go to `records`, in order.
    pub fn start(
        cfg: WalConfig,
        next_seq: u64,
        chunks: Vec<(String, u64)>,
        records: std::sync::mpsc::SyncSender<Record>,
    ) -> anyhow::Result<Self> {
        fs::create_dir_all(&cfg.dir)
            .with_context(|| format!("cannot create {}", cfg.dir.display()))?;
        let (tx, rx) = mpsc::channel::<Append>(cfg.queue.max(1));
        let stats = Arc::new(WalStats::default());
        stats
            .last_seq
            .store(next_seq.saturating_sub(1), Ordering::Relaxed);
        let mut index = ChunkIndex::default();
        let now = Instant::now();
        for (c, seq) in chunks {
            index.insert(&c, seq, now);
        }
        let chunks = Arc::new(Mutex::new(index));
        let first = segment_path(&cfg.dir, next_seq);
        let current = Arc::new(Mutex::new(first.clone()));
        let mut writer = Writer {
            dir: cfg.dir.clone(),
            file: open_segment(&first)?,
            size: 0,
            next_seq,
            stats: stats.clone(),
            chunks: chunks.clone(),
            current: current.clone(),
        };
        std::thread::Builder::new()
            .name("silt-wal".into())
            .spawn(move || writer.run(rx, records))?;
        Ok(Self {
            tx: Arc::new(std::sync::RwLock::new(Some(tx))),
            janitor: Janitor {
                chunks,
                dir: cfg.dir,
                retain: cfg.retain,
                stats: stats.clone(),
                current,
            },
            stats,
        })
    }

    /// The cleanup handle (see [`Janitor`]).
    pub fn janitor(&self) -> Janitor {
        self.janitor.clone()
    }

    fn sender(&self) -> anyhow::Result<mpsc::Sender<Append>> {
        self.tx
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                anyhow::anyhow!("the write-ahead log has stopped (the server is stopping)")
            })
    }

    /// Takes no more appends: the writer ends once those in progress are durable, even while
    /// something still holds this `Wal` (a connection a client keeps open past a server's stop).
    pub fn close(&self) {
        self.tx.write().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Logs `entry` and waits until it is durable. A chunk id the log holds already is
    /// [`Appended::Duplicate`] (or [`Appended::Conflict`]) at once.
    pub async fn append(&self, entry: Entry) -> anyhow::Result<Appended> {
        if let Some(known) = self.known(&entry) {
            return Ok(known);
        }
        let (done, wait) = oneshot::channel();
        self.sender()?
            .send(Append {
                entry,
                done: Some(done),
            })
            .await
            .map_err(|_| anyhow::anyhow!("the write-ahead log has stopped"))?;
        wait.await
            .map_err(|_| anyhow::anyhow!("the write-ahead log has stopped"))?
    }

    /// [`Wal::append`] that gives `Ok(None)` at once, without logging, when the writer's queue is
    /// full (the caller answers "busy": HTTP 429).
    pub async fn try_append(&self, entry: Entry) -> anyhow::Result<Option<Appended>> {
        if let Some(known) = self.known(&entry) {
            return Ok(Some(known));
        }
        let (done, wait) = oneshot::channel();
        match self.sender()?.try_send(Append {
            entry,
            done: Some(done),
        }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return Ok(None),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                anyhow::bail!("the write-ahead log has stopped")
            }
        }
        wait.await
            .map_err(|_| anyhow::anyhow!("the write-ahead log has stopped"))?
            .map(Some)
    }

    /// [`Janitor::release`].
    pub fn release(&self, covered: u64) -> anyhow::Result<()> {
        self.janitor.release(covered)
    }

    /// The sequence number of the record that logged `chunk`'s id, while the log knows it
    /// (what a duplicate answers, so that a client can wait for that record).
    pub fn seq_of(&self, chunk: &str) -> Option<u64> {
        let (id, _) = split_digest(chunk);
        let idx = self.janitor.chunks.lock().expect("not poisoned");
        idx.seen.get(id).map(|(_, _, seq)| *seq)
    }

    fn known(&self, e: &Entry) -> Option<Appended> {
        let c = e.chunk.as_deref()?;
        let hit = self.janitor.chunks.lock().expect("not poisoned").lookup(c);
        if hit == Some(Appended::Duplicate) {
            self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }
}

impl Janitor {
    /// Every record up to and including `covered` is in the lake: deletes the segments that hold
    /// nothing newer once they are older than the retention, or sooner, oldest first, while such
    /// segments take more than [`RETAIN_BYTES`] (a fast stream must not fill the disk with log
    /// it no longer needs; chunk ids stay known in memory for the retention either way). Forgets
    /// chunk ids older than the retention.
    pub fn release(&self, covered: u64) -> anyhow::Result<()> {
        self.chunks.lock().expect("not poisoned").prune(self.retain);
        let segs = segments(&self.dir)?;
        let current = self.current.lock().expect("not poisoned").clone();
        let now = SystemTime::now();
        // Segments wholly in the lake (a segment ends where the next begins), oldest first.
        let mut done: Vec<(PathBuf, Duration, u64)> = Vec::new();
        for (i, (_, path)) in segs.iter().enumerate() {
            let Some((next_first, _)) = segs.get(i + 1) else {
                break;
            };
            if *path == current || *next_first > covered + 1 {
                continue;
            }
            let md = fs::metadata(path).ok();
            let age = md
                .as_ref()
                .and_then(|m| m.modified().ok())
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            done.push((path.clone(), age, md.map(|m| m.len()).unwrap_or(0)));
        }
        let mut kept: u64 = done.iter().map(|d| d.2).sum();
        for (path, age, bytes) in done {
            if age >= self.retain || kept > RETAIN_BYTES {
                fs::remove_file(&path)
                    .with_context(|| format!("cannot delete {}", path.display()))?;
                self.stats.segments_deleted.fetch_add(1, Ordering::Relaxed);
                kept -= bytes;
            }
        }
        Ok(())
    }
}

fn open_segment(path: &Path) -> anyhow::Result<File> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    silt_lake::publish::sync_dir(path.parent().unwrap_or(Path::new(".")));
    Ok(f)
}

struct Writer {
    dir: PathBuf,
    file: File,
    size: u64,
    next_seq: u64,
    stats: Arc<WalStats>,
    chunks: Arc<Mutex<ChunkIndex>>,
    current: Arc<Mutex<PathBuf>>,
}

impl Writer {
    fn run(
        &mut self,
        mut rx: mpsc::Receiver<Append>,
        records: std::sync::mpsc::SyncSender<Record>,
    ) {
        let mut buf = Vec::new();
        while let Some(first) = rx.blocking_recv() {
            let mut group = vec![first];
            let mut bytes = group[0].entry.body.len();
            while bytes < GROUP_BYTES {
                match rx.try_recv() {
                    Ok(a) => {
                        bytes += a.entry.body.len();
                        group.push(a);
                    }
                    Err(_) => break,
                }
            }
            // A chunk id logged by an earlier group, or twice in this one (a client that resent
            // while its first request was still queued): answered as the check before the queue
            // would answer it, and not logged again. The index is only written by this thread,
            // after each group, so this check sees every chunk logged before.
            {
                let idx = self.chunks.lock().expect("not poisoned");
                let mut here = HashMap::new();
                group.retain_mut(|a| {
                    let Some(c) = a.entry.chunk.as_deref() else {
                        return true;
                    };
                    let (id, digest) = split_digest(c);
                    let known = idx.lookup(c).or_else(|| {
                        here.get(id)
                            .map(|known: &Option<u64>| resend(*known, digest))
                    });
                    match known {
                        Some(k) => {
                            if k == Appended::Duplicate {
                                self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                            }
                            if let Some(done) = a.done.take() {
                                let _ = done.send(Ok(k));
                            }
                            false
                        }
                        None => {
                            here.insert(id.to_string(), digest);
                            true
                        }
                    }
                });
            }
            if group.is_empty() {
                continue;
            }
            buf.clear();
            let first_seq = self.next_seq;
            for (i, a) in group.iter().enumerate() {
                if a.entry.kafka.is_none() {
                    encode(&mut buf, first_seq + i as u64, &a.entry);
                }
            }
            let written = if buf.is_empty() {
                Ok(())
            } else {
                self.write(&buf)
            };
            match written {
                Ok(()) => {
                    self.next_seq += group.len() as u64;
                    self.stats
                        .appends
                        .fetch_add(group.len() as u64, Ordering::Relaxed);
                    self.stats
                        .bytes
                        .fetch_add(buf.len() as u64, Ordering::Relaxed);
                    self.stats
                        .last_seq
                        .store(self.next_seq - 1, Ordering::Relaxed);
                    {
                        let mut idx = self.chunks.lock().expect("not poisoned");
                        let now = Instant::now();
                        for (i, a) in group.iter().enumerate() {
                            if let Some(c) = &a.entry.chunk {
                                idx.insert(c, first_seq + i as u64, now);
                            }
                        }
                    }
                    // Every append of the group is answered before any record is handed on:
                    // handing on waits while the decoder is behind (that is the backpressure),
                    // and an ack must not wait for it once the events are durable.
                    for (i, a) in group.iter_mut().enumerate() {
                        if let Some(done) = a.done.take() {
                            let _ = done.send(Ok(Appended::Durable(first_seq + i as u64)));
                        }
                    }
                    for (i, a) in group.into_iter().enumerate() {
                        let seq = first_seq + i as u64;
                        if records
                            .send(Record {
                                seq,
                                entry: a.entry,
                            })
                            .is_err()
                        {
                            return;
                        }
                    }
                }
                Err(e) => {
                    tracing::error!("write-ahead log: {e:#}");
                    for a in group {
                        if let Some(done) = a.done {
                            let _ = done.send(Err(anyhow::anyhow!(
                                "the write-ahead log could not make the events durable: {e:#}"
                            )));
                        }
                    }
                    // Whatever part of the group reached the file is a torn record that replay
                    // cuts off; start a fresh segment so the next group is not behind it.
                    if let Err(e) = self.roll() {
                        tracing::error!("write-ahead log: {e:#}");
                    }
                }
            }
        }
    }

    fn write(&mut self, buf: &[u8]) -> anyhow::Result<()> {
        if self.size > 0 && self.size + buf.len() as u64 > SEGMENT_BYTES {
            self.roll()?;
        }
        if silt_lake::replace::failpoint_set("wal-write") {
            anyhow::bail!("cannot write the log: failpoint wal-write");
        }
        self.file.write_all(buf).context("cannot write the log")?;
        self.file.sync_data().context("cannot fsync the log")?;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.size += buf.len() as u64;
        Ok(())
    }

    fn roll(&mut self) -> anyhow::Result<()> {
        let path = segment_path(&self.dir, self.next_seq);
        self.file = open_segment(&path)?;
        self.size = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        *self.current.lock().expect("not poisoned") = path;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refusals are said once, then once per REFUSED_NOTE with the count, and the recovery once.
    #[test]
    fn refusals_are_said_at_most_every_note() {
        let e = anyhow::anyhow!("No space left on device");
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_millis(s);
        let mut r = Refusals::default();
        assert_eq!(r.taken_at(at(0), "tail x"), None, "nothing was refused");
        let first = r.refused_at(at(0), "tail x", &e).unwrap();
        assert!(first.starts_with("tail x: No space left on device; retrying"));
        for ms in (500..30_000).step_by(500) {
            assert_eq!(r.refused_at(at(ms), "tail x", &e), None, "at {ms} ms");
        }
        let again = r.refused_at(at(30_000), "tail x", &e).unwrap();
        assert!(
            again.ends_with("still retrying (61 attempts in 30s)"),
            "{again}"
        );
        assert_eq!(r.refused_at(at(30_500), "tail x", &e), None);
        let back = r.taken_at(at(31_000), "tail x").unwrap();
        assert!(back.ends_with("after 62 refused in 31.0s"), "{back}");
        assert_eq!(r.taken_at(at(31_500), "tail x"), None, "said once");
        // A new spell of refusals is said at once.
        assert!(r
            .refused_at(at(32_000), "tail x", &e)
            .unwrap()
            .contains("; retrying"));
    }

    /// A log in `dir/wal` keeping chunk ids 10 minutes, with a queue of `queue` appends.
    fn test_config(dir: &Path, queue: usize) -> WalConfig {
        WalConfig {
            dir: dir.join("wal"),
            retain: Duration::from_secs(600),
            queue,
        }
    }

    fn entry(i: usize, chunk: Option<&str>) -> Entry {
        Entry {
            table: Some("t.x".into()),
            format: "json".into(),
            source: "test".into(),
            chunk: chunk.map(str::to_string),
            body: format!("{{\"i\":{i}}}\n").into_bytes(),
            kafka: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appends_are_durable_in_order_and_replay_after_covered() {
        let d = tempfile::tempdir().unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(1000);
        let cfg = WalConfig {
            dir: d.path().join("wal"),
            retain: Duration::ZERO,
            queue: 64,
        };
        let wal = Wal::start(cfg.clone(), 1, vec![], tx).unwrap();
        let mut tasks = Vec::new();
        for i in 0..200 {
            let w = wal.clone();
            tasks.push(tokio::spawn(async move { w.append(entry(i, None)).await }));
        }
        let mut seqs = Vec::new();
        for t in tasks {
            match t.await.unwrap().unwrap() {
                Appended::Durable(s) => seqs.push(s),
                Appended::Duplicate | Appended::Conflict => panic!("no chunk ids given"),
            }
        }
        seqs.sort();
        assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
        // Appends are answered before their records are handed on (an ack must not wait for
        // the decoder), so the last group's records may still be on their way here.
        let got: Vec<u64> = (0..200)
            .map(|_| {
                rx.recv_timeout(Duration::from_secs(30))
                    .expect("every record handed on")
                    .seq
            })
            .collect();
        assert_eq!(got, (1..=200).collect::<Vec<_>>());
        assert!(rx.try_recv().is_err(), "no record handed on twice");
        assert!(wal.stats.fsyncs.load(Ordering::Relaxed) <= 200);
        let r = replay(&cfg.dir, 150).unwrap();
        assert_eq!(r.last_seq, 200);
        assert_eq!(r.records.len(), 50);
        assert_eq!(r.records[0].seq, 151);
        assert_eq!(r.records[0].entry.table.as_deref(), Some("t.x"));
    }

    #[tokio::test]
    async fn a_chunk_id_already_logged_is_a_duplicate_even_after_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let (tx, _rx) = std::sync::mpsc::sync_channel(10);
        let cfg = test_config(d.path(), 4);
        let wal = Wal::start(cfg.clone(), 1, vec![], tx).unwrap();
        assert_eq!(
            wal.append(entry(1, Some("c1"))).await.unwrap(),
            Appended::Durable(1)
        );
        assert_eq!(
            wal.append(entry(1, Some("c1"))).await.unwrap(),
            Appended::Duplicate
        );
        let r = replay(&cfg.dir, 1).unwrap();
        assert!(r.records.is_empty());
        assert_eq!(r.chunks, vec![("c1".to_string(), 1)]);
        let (tx, _rx2) = std::sync::mpsc::sync_channel(10);
        let wal2 = Wal::start(cfg, r.last_seq + 1, r.chunks, tx).unwrap();
        assert_eq!(
            wal2.append(entry(1, Some("c1"))).await.unwrap(),
            Appended::Duplicate
        );
        assert_eq!(
            wal2.append(entry(2, Some("c2"))).await.unwrap(),
            Appended::Durable(2)
        );
    }

    /// Resends that reach the queue before the first send is durable are still logged once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_resends_of_one_chunk_are_logged_once() {
        let d = tempfile::tempdir().unwrap();
        let (tx, _rx) = std::sync::mpsc::sync_channel(1000);
        let cfg = test_config(d.path(), 64);
        let wal = Wal::start(cfg.clone(), 1, vec![], tx).unwrap();
        for round in 0..20 {
            let chunk = with_digest(&format!("http:t.x:k{round}"), b"same");
            let other = with_digest(&format!("http:t.x:k{round}"), b"other");
            let tasks: Vec<_> = (0..16)
                .map(|i| {
                    let wal = wal.clone();
                    let c = if i == 15 {
                        other.clone()
                    } else {
                        chunk.clone()
                    };
                    tokio::spawn(async move { wal.append(entry(1, Some(&c))).await.unwrap() })
                })
                .collect();
            let mut got = Vec::new();
            for t in tasks {
                got.push(t.await.unwrap());
            }
            let durable = got
                .iter()
                .filter(|a| matches!(a, Appended::Durable(_)))
                .count();
            assert_eq!(durable, 1, "round {round}: {got:?}");
            // The one with other content: refused, unless it came first and was logged.
            assert!(
                matches!(got[15], Appended::Conflict | Appended::Durable(_)),
                "{got:?}"
            );
        }
        drop(wal);
        assert_eq!(replay(&cfg.dir, 0).unwrap().records.len(), 20);
    }

    #[tokio::test]
    async fn a_chunk_id_reused_for_other_content_is_a_conflict_even_after_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let (tx, _rx) = std::sync::mpsc::sync_channel(10);
        let cfg = test_config(d.path(), 4);
        let a = with_digest("http:t.x:k1", b"one");
        let b = with_digest("http:t.x:k1", b"two");
        assert_ne!(a, b);
        assert_eq!(split_digest(&a).0, "http:t.x:k1");
        // A key that itself looks marked keeps its own mark as part of the id.
        let odd = with_digest("k#0123456789abcdef", b"x");
        assert_eq!(split_digest(&odd).0, "k#0123456789abcdef");
        let wal = Wal::start(cfg.clone(), 1, vec![], tx).unwrap();
        assert_eq!(
            wal.append(entry(1, Some(&a))).await.unwrap(),
            Appended::Durable(1)
        );
        assert_eq!(
            wal.append(entry(1, Some(&a))).await.unwrap(),
            Appended::Duplicate
        );
        assert_eq!(
            wal.append(entry(2, Some(&b))).await.unwrap(),
            Appended::Conflict
        );
        // An unmarked id equal to a marked one's id is a resend: nothing to compare.
        assert_eq!(
            wal.append(entry(1, Some("http:t.x:k1"))).await.unwrap(),
            Appended::Duplicate
        );
        drop(wal);
        let r = replay(&cfg.dir, 1).unwrap();
        assert_eq!(r.chunks, vec![(a.clone(), 1)]);
        let (tx, _rx2) = std::sync::mpsc::sync_channel(10);
        let wal2 = Wal::start(cfg, r.last_seq + 1, r.chunks, tx).unwrap();
        // The record that logged the id, known across the restart.
        assert_eq!(wal2.seq_of(&a), Some(1));
        assert_eq!(wal2.seq_of("http:t.x:unknown"), None);
        assert_eq!(
            wal2.append(entry(1, Some(&a))).await.unwrap(),
            Appended::Duplicate
        );
        assert_eq!(
            wal2.append(entry(2, Some(&b))).await.unwrap(),
            Appended::Conflict
        );
    }

    #[test]
    fn a_torn_last_record_is_cut_and_earlier_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        fs::create_dir_all(&dir).unwrap();
        let mut buf = Vec::new();
        for i in 1..=3 {
            encode(&mut buf, i, &entry(i as usize, None));
        }
        let whole = buf.len();
        encode(&mut buf, 4, &entry(4, None));
        // Every cut inside the fourth record keeps exactly the first three.
        for cut in whole..buf.len() {
            let p = segment_path(&dir, 1);
            fs::write(&p, &buf[..cut]).unwrap();
            let r = replay(&dir, 0).unwrap();
            assert_eq!(r.records.len(), 3, "cut at {cut}");
            assert_eq!(fs::metadata(&p).unwrap().len() as usize, whole);
            assert_eq!(r.notes.len(), usize::from(cut > whole));
        }
        // A flipped bit in the last record is a torn write too.
        let p = segment_path(&dir, 1);
        let mut bad = buf.clone();
        *bad.last_mut().unwrap() ^= 1;
        fs::write(&p, &bad).unwrap();
        assert_eq!(replay(&dir, 0).unwrap().records.len(), 3);
    }

    #[tokio::test]
    async fn release_deletes_covered_segments_but_not_the_current_one() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        fs::create_dir_all(&dir).unwrap();
        for first in [1u64, 11] {
            let mut buf = Vec::new();
            for s in first..first + 10 {
                encode(&mut buf, s, &entry(s as usize, None));
            }
            fs::write(segment_path(&dir, first), &buf).unwrap();
        }
        let (tx, _rx) = std::sync::mpsc::sync_channel(10);
        let cfg = WalConfig {
            dir: dir.clone(),
            retain: Duration::ZERO,
            queue: 4,
        };
        let wal = Wal::start(cfg, 21, vec![], tx).unwrap();
        wal.release(15).unwrap();
        let left: Vec<u64> = segments(&dir).unwrap().into_iter().map(|s| s.0).collect();
        assert_eq!(left, vec![11, 21]);
        wal.release(20).unwrap();
        let left: Vec<u64> = segments(&dir).unwrap().into_iter().map(|s| s.0).collect();
        assert_eq!(left, vec![21]);
    }
}
