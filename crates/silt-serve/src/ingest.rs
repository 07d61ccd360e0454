//! From the write-ahead log to the lake, through the one ingest pipeline `silt import` and
//! `silt convert` run (`silt_ingest::Pipeline`): its source is the log
//! ([`crate::log_source::LogSource`]: each durable record decoded with its format's decoder from
//! the same registry), its transforms a route's `--parse-field` and `--enrich`, and its sink
//! [`LiveSink`], which makes the rows queryable at once ([`crate::live::Live::push`]); the
//! `silt-serve-flush` thread writes them to the lake. The pipeline runs on the
//! `silt-serve-ingest` thread (transforms and sink) and its reader thread (decoding).
//!
//! Rows are grouped in generations. A generation is sealed (the pipeline's commit) when its rows
//! reach the flush size or its oldest row the flush age (`--flush-age`), or when the server stops;
//! the flusher then writes it with a [`LakeWriter`] (same partitioning, sorting, encodings and
//! atomic publish as an import) under an import-record journal (`silt_lake::imports`), and
//! records the last log record it holds (`wal_upto`) in the record that marks the flush done (`_silt/imports/flush.json`,
//! replaced by each flush). A crash before that record leaves a journal that the next start
//! removes with its files, and the log is replayed from the last recorded flush: every
//! acknowledged event ends up in the lake once. Once a generation's flush is done, the pipeline
//! acknowledges its records back to the source, which releases the log's segments.
//!
//! The flush thread (and the encoding threads it starts) runs [`FLUSH_NICE`] nice levels below the
//! rest of the server (Linux): encoding a generation takes both cores for a moment several times a
//! second at full rate, and the log writer, the connections' tasks and the decoder, which stand
//! between an event and its acknowledgement, come first; the flusher still takes whatever CPU
//! they leave. `SILT_FLUSH_NICE=N` sets another number of levels (0: none), for comparing the
//! two in the benchmark (`bench/serve.sh --rate 300000`; docs/serve.md, "Benchmark").
//!
//! A flush that fails (a full disk, a table that cannot be written) is retried with backoff; its
//! rows stay queryable in memory and its log records stay on disk meanwhile, and `/health` says
//! what is wrong. Memory: at most one generation is being flushed while the next fills; when the
//! flusher falls behind, this thread waits, the log's queue fills, and sources push back.
//!
//! On an object-store lake ([`Target::Remote`]) a flush writes and seals its files in a staging
//! directory below the server's state directory, uploads them under a journal in the bucket
//! ([`silt_lake::remote::record`]), and records the flush by replacing the instance's flush
//! record there: the same commit point, the same recovery, with the instance's lease
//! ([`silt_lake::remote::lock`]) checked before it.
//!
//! Touches the lake (data files, rejects, `_silt/imports/`) through `silt_lake`, and the staging
//! directory of an object-store lake.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use arrow::record_batch::RecordBatch;
use silt_core::{Checkpoint, Committed, Emit, FormatOptions, Reject, Sink, TableName, Transform};
use silt_lake::claims::{Fence, Fenced};
use silt_lake::imports::{merge_positions, ImportLog, KafkaPositions};
use silt_lake::publish::DirectoryPublisher;
use silt_lake::remote::lock::LockWatch;
use silt_lake::remote::record::{self, RemoteImportLog};
use silt_lake::remote::RemoteLake;
use silt_lake::{LakeWriter, WriterConfig};

use crate::live::Live;
use crate::log_source::{parse_kafka_stream, LogSource, LOG_STREAM};
use crate::wal::{Janitor, Record};

/// Where the flush thread writes.
pub enum Target {
    /// A lake directory, with the instance's import record in it.
    Dir(ImportLog),
    /// An object-store lake.
    Remote(RemoteTarget),
}

/// An object-store lake as the flush thread writes it.
pub struct RemoteTarget {
    pub lake: Arc<RemoteLake>,
    /// A directory of the server's own (below its state directory) where each flush writes
    /// and seals its files before they are uploaded.
    pub staging: PathBuf,
    /// The instance's flush record (`silt_lake::imports::flush_record_name`).
    pub record: String,
    /// The instance's lease: a flush is recorded only while it is held.
    pub lease: LockWatch,
    /// Tables that had a Delta log when the server started (their files are written without
    /// `Null` columns; with `--table-format delta` every table's are).
    pub delta_tables: Vec<silt_core::TableName>,
}

/// The flush thread lost its right to record flushes (another server took the instance's
/// lease over): its files are removed and the process must stop.
#[derive(Debug)]
pub struct LeaseLost(pub String);

impl std::fmt::Display for LeaseLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LeaseLost {}

/// Settings of the ingest and flush threads.
pub struct IngestConfig {
    pub target: Target,
    pub writer: WriterConfig,
    pub options: FormatOptions,
    /// Transforms per table (a route's `--parse-field`, `--enrich-table`).
    pub transforms: HashMap<TableName, Vec<Box<dyn Transform>>>,
    /// Transforms of every table, after the table's own (`--enrich`), but for the tables in
    /// `all_tables_except`.
    pub all_tables: Vec<Box<dyn Transform>>,
    pub all_tables_except: std::collections::HashSet<TableName>,
    pub flush_age: Duration,
    /// In-memory bytes of a generation that seal it.
    pub flush_bytes: usize,
    /// Tables produced to Kafka topics (`--to-kafka`).
    pub to_kafka: Option<crate::kafka::ToKafka>,
}

/// Counters for `/metrics` and `/health`.
#[derive(Debug, Default)]
pub struct IngestStats {
    pub records: AtomicU64,
    pub events: AtomicU64,
    pub rejects: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_failures: AtomicU64,
    pub files: AtomicU64,
    pub rows_flushed: AtomicU64,
    /// Last log record decoded (visible to queries).
    pub visible_seq: AtomicU64,
    /// Last log record in the lake.
    pub flushed_seq: AtomicU64,
    /// Bytes of rows in memory.
    pub memory_bytes: AtomicU64,
    /// The highest [`Self::memory_bytes`] since the flush thread last looked
    /// ([`crate::memory::Trimmer`]).
    pub memory_high: AtomicU64,
    /// The last flush error, until a flush succeeds.
    pub last_error: Mutex<Option<String>>,
    /// Kafka positions the lake holds (this instance's flush record, as of its last flush).
    pub kafka_flushed: Mutex<KafkaPositions>,
    /// The token of the assignment under which this member holds each Kafka partition
    /// ([`silt_lake::claims`]): a flush with records of a partition whose claim has moved on is
    /// fenced.
    pub kafka_claims: Mutex<HashMap<(String, i32), String>>,
    /// A source waiting for its records to reach the lake (a Kafka rebalance) asks for the
    /// generation holding log record `seal_upto` to be sealed now, not at its age.
    pub seal_upto: AtomicU64,
    /// `--to-kafka`: messages produced, acknowledged and failed.
    pub produced: AtomicU64,
    pub produce_acked: AtomicU64,
    pub produce_failed: AtomicU64,
    /// `--kafka-meta`: rows whose message could not be numbered (their metadata is null).
    pub kafka_meta_unnumbered: AtomicU64,
    /// Memory handed back to the kernel after flushes ([`crate::memory`]).
    pub trim: crate::memory::TrimStats,
    /// When the server began to stop ([`crate::Server::shutdown`]): a flush still failing
    /// [`STOP_FLUSH_RETRY`] after that is given up.
    pub stop_began: std::sync::OnceLock<Instant>,
    /// A flush was given up at the stop ([`STOP_FLUSH_RETRY`]).
    pub flush_given_up: std::sync::atomic::AtomicBool,
}

/// How long a stopping server goes on retrying a flush that fails (a full disk, an object store
/// that does not answer). Past it the flush is given up rather than hold the stop without end:
/// its events stay in the write-ahead log (Kafka's in Kafka, the lake's positions not moved), are
/// written at the next start, and the stop says so with an error.
pub const STOP_FLUSH_RETRY: Duration = Duration::from_secs(10);

impl IngestStats {
    /// Seals the generation that holds log record `seq` (or the next one, if it is not decoded
    /// yet) at once, and waits until it is in the lake; `false` after `timeout`.
    pub fn flush_through(&self, seq: u64, timeout: Duration) -> bool {
        self.seal_upto.fetch_max(seq, Ordering::Relaxed);
        let t0 = Instant::now();
        while self.flushed_seq.load(Ordering::Relaxed) < seq {
            if t0.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }
}

/// Nice levels the flush thread runs below the rest of the server (see the module documentation).
pub const FLUSH_NICE: i32 = 10;

/// [`FLUSH_NICE`], or what `SILT_FLUSH_NICE` says.
fn flush_nice() -> i32 {
    match std::env::var("SILT_FLUSH_NICE") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            tracing::warn!("SILT_FLUSH_NICE={v:?} is not a number; using {FLUSH_NICE}");
            FLUSH_NICE
        }),
        Err(_) => FLUSH_NICE,
    }
}

/// Lowers the calling thread's CPU priority by `steps` nice levels (at most to 19); threads it
/// starts afterwards inherit it. Linux only (elsewhere, and when the kernel refuses, nothing
/// changes).
fn lower_priority(steps: i32) {
    if steps <= 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: system calls about the calling thread only; errno is this thread's.
        let refused = unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            *libc::__errno_location() = 0;
            let now = libc::getpriority(libc::PRIO_PROCESS, tid);
            if now == -1 && *libc::__errno_location() != 0 {
                true
            } else {
                libc::setpriority(libc::PRIO_PROCESS, tid, (now + steps).min(19)) != 0
            }
        };
        if refused {
            tracing::debug!(
                "cannot lower the flush thread's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = steps;
}

/// A sealed generation on its way to the lake.
struct Generation {
    id: u64,
    /// Last log record it holds.
    upto: u64,
    batches: Vec<(TableName, RecordBatch)>,
    rejects: Vec<Reject>,
    bytes: usize,
    /// Kafka positions after its records.
    kafka: KafkaPositions,
}

impl Generation {
    fn new(id: u64, upto: u64) -> Self {
        Self {
            id,
            upto,
            batches: Vec::new(),
            rejects: Vec::new(),
            bytes: 0,
            kafka: KafkaPositions::new(),
        }
    }
}

/// The last generation in the lake, which the flush thread raises and the sink waits on; and
/// whether the flush thread has stopped (then nothing more will be).
#[derive(Default)]
struct Settled {
    upto: Mutex<(u64, bool)>,
    changed: Condvar,
}

impl Settled {
    fn set(&self, id: u64) {
        self.upto.lock().unwrap_or_else(|e| e.into_inner()).0 = id;
        self.changed.notify_all();
    }

    fn stopped(&self) {
        self.upto.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.changed.notify_all();
    }

    fn wait(&self, id: Option<(u64, Duration)>) -> anyhow::Result<u64> {
        let g = self.upto.lock().unwrap_or_else(|e| e.into_inner());
        let (upto, stopped) = match id {
            None => *g,
            Some((id, timeout)) => {
                *self
                    .changed
                    .wait_timeout_while(g, timeout, |(upto, stopped)| *upto < id && !*stopped)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
        anyhow::ensure!(
            !stopped || id.is_none_or(|(id, _)| upto >= id),
            "the flush thread stopped: log records after generation {upto} stay in the log for the next start"
        );
        Ok(upto)
    }
}

/// Tells the sink when the flush thread ends, however it ends (a panic included).
struct StopGuard(Arc<Settled>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.0.stopped();
    }
}

/// A route's `--parse-field`, `--enrich-table` and the server's `--enrich`, as one transform of
/// the pipeline: the table's own transforms, then every table's. A transform that fails leaves the batch as it
/// came (rows are never dropped) and the log says why.
struct RouteTransforms {
    per_table: HashMap<TableName, Vec<Box<dyn Transform>>>,
    all_tables: Vec<Box<dyn Transform>>,
    all_tables_except: std::collections::HashSet<TableName>,
}

impl Transform for RouteTransforms {
    fn name(&self) -> String {
        "routes".into()
    }

    fn apply(&mut self, t: &TableName, mut b: RecordBatch) -> anyhow::Result<RecordBatch> {
        let per_table = self.per_table.get_mut(t).map(|v| v.as_mut_slice());
        let all = (!self.all_tables_except.contains(t)).then_some(self.all_tables.as_mut_slice());
        for ts in [per_table, all]
            .into_iter()
            .flatten()
            .filter(|ts| !ts.is_empty())
        {
            b = match silt_core::transform::apply_all(ts, t, b.clone()) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!("{t}: transform failed, rows kept untransformed: {e:#}");
                    b
                }
            };
        }
        Ok(b)
    }

    fn report(&self) -> Vec<String> {
        let per_table = self.per_table.values().flatten();
        per_table
            .chain(&self.all_tables)
            .flat_map(|t| t.report())
            .collect()
    }
}

/// Starts the server's ingest pipeline (`silt_ingest::Pipeline`: the log's records as its
/// source, [`LogSource`]; the decoders; the routes' transforms; [`LiveSink`]) on the
/// `silt-serve-ingest` thread, and the flush thread. `replayed` are the log records after the
/// last flush (decoded first); `records` brings the log's new records. Returns the handle to
/// join at shutdown (the threads end when the log's writer has stopped and everything is
/// flushed).
pub fn start(
    cfg: IngestConfig,
    replayed: Vec<Record>,
    records: Receiver<Record>,
    live: Arc<Live>,
    wal: Janitor,
    stats: Arc<IngestStats>,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let (gen_tx, gen_rx) = std::sync::mpsc::sync_channel::<Generation>(1);
    let to_kafka = match &cfg.to_kafka {
        Some(k) => Some((
            silt_kafka::export::TopicSink::new(
                &k.client,
                match &k.avro {
                    Some(f) => silt_kafka::export::Encoding::Avro(
                        silt_kafka::avro::AvroEncoder::new(f.clone())?,
                    ),
                    None => silt_kafka::export::Encoding::Json,
                },
            )?,
            k.routes.iter().cloned().collect::<HashMap<_, _>>(),
        )),
        None => None,
    };
    let settled = Arc::new(Settled::default());
    let flusher = {
        let (writer, live, stats, settled) = (
            cfg.writer.clone(),
            live.clone(),
            stats.clone(),
            settled.clone(),
        );
        let target = match cfg.target {
            Target::Dir(log) => Target::Dir(log.with_table_format(writer.table_format)),
            remote => remote,
        };
        let positions = match &target {
            Target::Dir(log) => log.last_flush()?,
            Target::Remote(t) => RemoteImportLog::new(t.lake.clone()).last_flush(&t.record)?,
        }
        .map(|r| r.kafka)
        .unwrap_or_default();
        *stats.kafka_flushed.lock().expect("not poisoned") = positions.clone();
        std::thread::Builder::new()
            .name("silt-serve-flush".into())
            .spawn(move || {
                let _guard = StopGuard(settled.clone());
                lower_priority(flush_nice());
                flush_loop(gen_rx, target, positions, writer, live, settled, stats)
            })?
    };
    let pipeline = silt_ingest::Pipeline {
        transforms: vec![Box::new(RouteTransforms {
            per_table: cfg.transforms,
            all_tables: cfg.all_tables,
            all_tables_except: cfg.all_tables_except,
        })],
        // The sink seals a generation on its own terms (size, age, a Kafka rebalance's
        // request: `LiveSink::wants_commit`), and once more at the end.
        commit_every: None,
        final_commit: true,
        report_streams: false,
        ..silt_ingest::Pipeline::new(
            // Unused: every log record names its format (`LogSource`).
            silt_ingest::FormatChoice::Auto {
                extension_first: false,
            },
            cfg.options,
        )
    };
    let keep_in_lake = cfg.to_kafka.as_ref().is_some_and(|k| k.keep_in_lake);
    let source = LogSource::new(replayed, records, wal, stats.clone());
    let handle = std::thread::Builder::new()
        .name("silt-serve-ingest".into())
        .spawn(move || {
            let mut sink = LiveSink {
                flush_age: cfg.flush_age,
                flush_bytes: cfg.flush_bytes,
                keep_in_lake,
                live,
                stats,
                gen: Generation::new(1, 0),
                started: None,
                sealed_upto: 0,
                mid_record: false,
                gen_tx,
                settled,
                to_kafka,
                produced: Vec::new(),
                produced_bytes: 0,
                undelivered: 0,
            };
            if let Err(e) = pipeline.run(source, &mut sink, &mut silt_ingest::pipeline::Quiet) {
                tracing::error!("the ingest pipeline stopped: {e:#}");
            }
            drop(sink);
            let _ = flusher.join();
        })?;
    Ok(handle)
}

/// The end of the server's pipeline: rows are queryable as they arrive ([`Live::push`]) and
/// collected into a generation, which a commit seals and hands to the flush thread (a commit
/// that ends in the background, `Committed::Started(generation)`); the pipeline then
/// acknowledges the generation's log records once the flush thread has put it in the lake.
struct LiveSink {
    flush_age: Duration,
    /// In-memory bytes of a generation that seal it.
    flush_bytes: usize,
    /// `--to-kafka … --keep-in-lake`: routed rows go to the lake as well.
    keep_in_lake: bool,
    live: Arc<Live>,
    stats: Arc<IngestStats>,
    gen: Generation,
    /// When the current generation got its first record.
    started: Option<Instant>,
    /// The last record of the last generation sealed.
    sealed_upto: u64,
    /// Rows or rejects came after the last log record's checkpoint: a record is in the middle
    /// of arriving, and a seal now would put its first rows in a generation whose `upto` does
    /// not cover them (a restart would replay them into the lake twice).
    mid_record: bool,
    gen_tx: SyncSender<Generation>,
    settled: Arc<Settled>,
    /// `--to-kafka`: the producer and each routed table's topic.
    to_kafka: Option<(silt_kafka::export::TopicSink, HashMap<TableName, String>)>,
    /// `--to-kafka`: the batches produced since the last seal (and their size), kept until the
    /// producer says whether every message was delivered: if not, the seal writes them to the
    /// lake instead, so that no acknowledged event is lost (at least once).
    produced: Vec<(TableName, RecordBatch)>,
    produced_bytes: usize,
    /// Messages failed or unacknowledged as of the last seal.
    undelivered: u64,
}

impl LiveSink {
    /// Rows into the current generation, queryable at once.
    fn keep(&mut self, t: TableName, b: RecordBatch) {
        let bytes = b.get_array_memory_size();
        self.gen.bytes += bytes;
        let held = self
            .stats
            .memory_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed)
            + bytes as u64;
        self.stats.memory_high.fetch_max(held, Ordering::Relaxed);
        self.live.push(self.gen.id, &t, b.clone());
        self.gen.batches.push((t, b));
    }

    /// `--to-kafka`: waits for the producer; what it could not deliver since the last seal
    /// goes into the generation (the log is released once the flush is done, so what went to
    /// Kafka must be acknowledged by then, or it is produced again from the log after a crash).
    fn settle_produced(&mut self) {
        let Some((sink, _)) = &self.to_kafka else {
            return;
        };
        let p = sink.flush(Duration::from_secs(60));
        self.stats.produced.store(p.messages, Ordering::Relaxed);
        self.stats
            .produce_acked
            .store(p.acknowledged, Ordering::Relaxed);
        self.stats.produce_failed.store(p.failed, Ordering::Relaxed);
        let unknown = p.messages.saturating_sub(p.acknowledged + p.failed);
        let undelivered = p.failed + unknown;
        let produced = std::mem::take(&mut self.produced);
        self.produced_bytes = 0;
        if undelivered > self.undelivered && !produced.is_empty() {
            let rows: usize = produced.iter().map(|(_, b)| b.num_rows()).sum();
            tracing::error!(
                "--to-kafka: {} messages were not delivered ({}); the {rows} rows routed to Kafka since the last flush are written to the lake instead (some may be in Kafka as well)",
                undelivered - self.undelivered,
                p.first_error.as_deref().unwrap_or("no acknowledgement within 60 s")
            );
            for (t, b) in produced {
                self.keep(t, b);
            }
        }
        self.undelivered = undelivered;
    }
}

impl Emit for LiveSink {
    fn batch(&mut self, t: &TableName, b: RecordBatch) -> anyhow::Result<()> {
        self.mid_record = true;
        if b.num_rows() == 0 {
            return Ok(());
        }
        self.stats
            .events
            .fetch_add(b.num_rows() as u64, Ordering::Relaxed);
        if let Some((sink, routes)) = &self.to_kafka {
            if let Some(topic) = routes.get(t) {
                if let Err(e) = sink.send(topic, None, &b) {
                    // Kept in the lake instead of lost.
                    tracing::error!("{t} -> kafka {topic}: {e:#}; rows written to the lake");
                } else if !self.keep_in_lake {
                    // Held until the seal learns whether Kafka acknowledged them.
                    self.produced_bytes += b.get_array_memory_size();
                    self.produced.push((t.clone(), b));
                    return Ok(());
                }
            }
        }
        self.keep(t.clone(), b);
        Ok(())
    }

    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.mid_record = true;
        self.stats.rejects.fetch_add(1, Ordering::Relaxed);
        self.gen.rejects.push(reject);
        Ok(())
    }
}

impl Sink for LiveSink {
    fn checkpoint(&mut self, c: &Checkpoint) {
        if *c.stream == *LOG_STREAM {
            self.mid_record = false;
            self.started.get_or_insert_with(Instant::now);
            self.gen.upto = c.position;
            self.stats.visible_seq.store(c.position, Ordering::Relaxed);
        } else if let Some((topic, partition)) = parse_kafka_stream(&c.stream) {
            self.mid_record = true;
            let v = self
                .gen
                .kafka
                .entry(topic.to_string())
                .or_default()
                .entry(partition)
                .or_insert(c.position as i64);
            *v = (*v).max(c.position as i64);
        }
    }

    fn wants_commit(&mut self) -> bool {
        let Some(started) = self.started.filter(|_| !self.mid_record) else {
            return false;
        };
        let asked = self.stats.seal_upto.load(Ordering::Relaxed);
        self.gen.bytes + self.produced_bytes >= self.flush_bytes
            || started.elapsed() >= self.flush_age
            || (asked > self.sealed_upto && self.gen.upto >= asked)
    }

    /// Seals the generation and hands it to the flush thread (waiting while the flush thread
    /// is busy with the previous one: that is where the sources' backpressure starts). Only
    /// between log records: a generation holds whole records.
    fn commit(&mut self, _now: SystemTime) -> anyhow::Result<Committed> {
        if self.started.is_none() || self.mid_record {
            return Ok(Committed::No);
        }
        self.settle_produced();
        let next = Generation::new(self.gen.id + 1, self.gen.upto);
        let sealed = std::mem::replace(&mut self.gen, next);
        let id = sealed.id;
        self.sealed_upto = sealed.upto;
        self.started = None;
        self.gen_tx
            .send(sealed)
            .map_err(|_| anyhow::anyhow!("the flush thread has stopped"))?;
        Ok(Committed::Started(id))
    }

    fn settled(&mut self, wait: Option<(u64, Duration)>) -> anyhow::Result<u64> {
        self.settled.wait(wait)
    }
}

fn flush_loop(
    rx: Receiver<Generation>,
    target: Target,
    mut positions: KafkaPositions,
    writer: WriterConfig,
    live: Arc<Live>,
    settled: Arc<Settled>,
    stats: Arc<IngestStats>,
) {
    // Cleaning up after a failed attempt reads the whole import record, so only then.
    let mut failed = false;
    // In an object store, a run that died on another machine is known dead only once its
    // journal is STALE: flushes look for such runs that often, so that their files (records
    // another member may have read again) do not stay in the lake until the next start.
    let mut recovered = Instant::now();
    let mut trimmer = crate::memory::Trimmer::new();
    for gen in rx {
        if matches!(target, Target::Remote(_))
            && recovered.elapsed() >= silt_lake::remote::record::STALE / 2
        {
            failed = true;
            recovered = Instant::now();
        }
        let mut delay = Duration::from_millis(200);
        let mut upto = positions.clone();
        merge_positions(&mut upto, &gen.kafka);
        // The claims the generation's Kafka records were read under (taken now: a partition is
        // claimed anew only after everything read under its old claim was flushed).
        let mut fence = Fence::default();
        {
            let claims = stats.kafka_claims.lock().expect("not poisoned");
            for (topic, ps) in &gen.kafka {
                for p in ps.keys() {
                    let k = (topic.clone(), *p);
                    let token = claims.get(&k).cloned();
                    fence.partitions.push((k.0, k.1, token));
                }
            }
        }
        loop {
            match flush(
                &gen,
                &target,
                (upto.clone(), &fence),
                &writer,
                &live,
                std::mem::take(&mut failed),
            ) {
                Ok((files, rows)) => {
                    positions = upto.clone();
                    *stats.kafka_flushed.lock().expect("not poisoned") = upto.clone();
                    stats.flushes.fetch_add(1, Ordering::Relaxed);
                    stats.files.fetch_add(files, Ordering::Relaxed);
                    stats.rows_flushed.fetch_add(rows, Ordering::Relaxed);
                    stats.flushed_seq.store(gen.upto, Ordering::Relaxed);
                    stats
                        .memory_bytes
                        .fetch_sub(gen.bytes as u64, Ordering::Relaxed);
                    *stats.last_error.lock().expect("not poisoned") = None;
                    // The pipeline acknowledges the generation's log records to `LogSource`,
                    // which releases their segments.
                    settled.set(gen.id);
                    break;
                }
                Err(e) if e.is::<LeaseLost>() => {
                    tracing::error!(
                        "{e:#}; exiting (status 75) without recording the flush: its events stay in the log and are replayed when this server starts again"
                    );
                    std::process::exit(75);
                }
                Err(e) if e.is::<Fenced>() => {
                    // Another member owns the records now (the flush removed its files). What
                    // other sources sent stays in the log for the next start; this process must
                    // not go on holding partitions the group gave away.
                    tracing::error!(
                        "kafka: {e:#}; exiting (status 75) without publishing them: the new owner read them again from the lake's positions. Restart silt serve to rejoin the group (other sources' events are kept in the log and replayed then)"
                    );
                    std::process::exit(75);
                }
                Err(e) => {
                    failed = true;
                    stats.flush_failures.fetch_add(1, Ordering::Relaxed);
                    let msg = format!("flush of log records up to {} failed: {e:#}", gen.upto);
                    if let Some(began) = stats.stop_began.get() {
                        if began.elapsed() >= STOP_FLUSH_RETRY {
                            tracing::error!(
                                "{msg}; stopping without it: its events stay in the log and are \
written to the lake when the server starts again"
                            );
                            stats.flush_given_up.store(true, Ordering::Relaxed);
                            return;
                        }
                        delay = delay.min(Duration::from_secs(1));
                    }
                    tracing::error!("{msg}; retrying in {delay:?} (the rows stay in the log)");
                    *stats.last_error.lock().expect("not poisoned") = Some(msg);
                    // In steps, so that a stop cuts a long backoff short.
                    let wake = Instant::now() + delay;
                    let slept = Instant::now();
                    while Instant::now() < wake
                        && (stats.stop_began.get().is_none()
                            || slept.elapsed() < Duration::from_secs(1))
                    {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
        // The generation's rows are freed here (the live view let go of them when the flush
        // was published); their memory goes back to the kernel once a backlog has drained.
        drop(gen);
        let left = stats.memory_bytes.load(Ordering::Relaxed);
        let high = stats.memory_high.swap(left, Ordering::Relaxed);
        if trimmer.after_flush(high, left, Instant::now()) {
            crate::memory::trim(&stats.trim);
        }
    }
}

/// Writes one generation; returns the files and rows published. After a failed attempt
/// (`recover`), that attempt's journal and files go first.
fn flush(
    gen: &Generation,
    target: &Target,
    (kafka, fence): (KafkaPositions, &Fence),
    cfg: &WriterConfig,
    live: &Live,
    recover: bool,
) -> anyhow::Result<(u64, u64)> {
    // Held from before the first file appears: a re-listing of the lake (maintenance) then never
    // sees this flush's files while its rows are still in memory.
    let update = live.begin_update();
    if silt_lake::replace::failpoint_set("serve-flush") {
        anyhow::bail!("failpoint serve-flush");
    }
    let files = match target {
        Target::Dir(log) => {
            if recover {
                log.recover()?;
            }
            let run = log.begin()?;
            let w = LakeWriter::new(log.root(), cfg.clone())?
                .with_publisher(run.publisher(Box::new(DirectoryPublisher))?);
            let files = write_generation(w, gen)?;
            let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
            let index = update.current.with_files(&paths)?;
            run.finish_fenced(vec![], &files, Some(gen.upto), kafka, fence)?;
            update.published(gen.id, index);
            files
        }
        Target::Remote(t) => {
            let log = RemoteImportLog::new(t.lake.clone()).with_table_format(cfg.table_format);
            if recover {
                log.recover()?;
            }
            // A directory per flush: the table records pulled into it are current, and its
            // rejects files are uploaded once.
            let staging = tempfile::Builder::new()
                .prefix("flush-")
                .tempdir_in(&t.staging)
                .with_context(|| {
                    format!(
                        "cannot create a staging directory in {}",
                        t.staging.display()
                    )
                })?;
            let pulled = record::pull_records(&t.lake, staging.path())?;
            let run = log.begin()?;
            let w = LakeWriter::new(staging.path(), cfg.clone())?
                .with_delta_tables(t.delta_tables.iter().cloned())
                .with_publisher(run.publisher(staging.path()));
            let files = write_generation(w, gen)?;
            record::push_records(&t.lake, staging.path(), &pulled)?;
            let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
            let index = update.current.with_files(&paths)?;
            if let Err(e) = t.lease.check() {
                let removed = run.abandon()?;
                return Err(LeaseLost(format!(
                    "{e:#} (another silt serve with this instance name took over; removed the {removed} file(s) of this flush)"
                ))
                .into());
            }
            run.finish_flush(&files, (gen.upto, kafka), &t.record, fence)?;
            update.published(gen.id, index);
            files
        }
    };
    let rows = files.iter().map(|f| f.rows).sum();
    Ok((files.len() as u64, rows))
}

/// Writes a generation's rows and rejects with `w`; returns the files published, or the first
/// table that could not be written.
fn write_generation(
    mut w: LakeWriter,
    gen: &Generation,
) -> anyhow::Result<Vec<silt_lake::publish::PublishedFile>> {
    for (t, b) in &gen.batches {
        w.batch(t, b.clone())?;
    }
    for r in &gen.rejects {
        w.reject(r.clone())?;
    }
    let summary = w.finish()?;
    if let Some((t, s)) = summary.tables.iter().find(|(_, s)| s.error.is_some()) {
        anyhow::bail!(
            "table {t}: {}",
            s.error.as_deref().unwrap_or("could not be written")
        );
    }
    Ok(summary.files)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The calling thread's nice value.
    fn nice() -> i32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // Field 19, counted after the command name (which may hold spaces) and its ')'.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[test]
    fn lowering_the_priority_touches_the_calling_thread_and_the_threads_it_starts() {
        let here = nice();
        std::thread::spawn(|| {
            let before = nice();
            lower_priority(FLUSH_NICE);
            let after = nice();
            assert_eq!(after, (before + FLUSH_NICE).min(19));
            // The encoding threads a flush starts inherit it.
            assert_eq!(std::thread::spawn(nice).join().unwrap(), after);
        })
        .join()
        .unwrap();
        assert_eq!(nice(), here);
    }
}

#[cfg(test)]
mod settle_tests {
    use super::*;

    #[test]
    fn a_stopped_flush_thread_ends_the_wait_with_an_error_but_not_what_it_finished() {
        let s = Arc::new(Settled::default());
        s.set(3);
        assert_eq!(s.wait(Some((3, Duration::from_secs(5)))).unwrap(), 3);
        assert_eq!(s.wait(Some((4, Duration::from_millis(10)))).unwrap(), 3);
        let t = {
            let s = s.clone();
            std::thread::spawn(move || {
                let _guard = StopGuard(s);
                panic!("the flush thread dies");
            })
        };
        assert!(t.join().is_err());
        let e = s.wait(Some((4, Duration::from_secs(5)))).unwrap_err();
        assert!(e.to_string().contains("flush thread stopped"), "{e}");
        assert_eq!(s.wait(Some((3, Duration::from_secs(5)))).unwrap(), 3);
        assert_eq!(s.wait(None).unwrap(), 3);
    }
}
