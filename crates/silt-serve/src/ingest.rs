//! From the write-ahead log to the lake: the `silt-serve-ingest` thread decodes each durable
//! record with its format's decoder (the same registry and decoders as `silt import`), runs the
//! table's transforms (`--parse-field` of a route), and makes the rows queryable at once
//! ([`crate::live::Live::push`]); the `silt-serve-flush` thread writes them to the lake.
//!
//! Rows are grouped in generations. A generation is sealed when its rows reach the flush size or
//! its oldest row the flush age (`--flush-age`), or when the server stops; the flusher then writes
//! it with a [`LakeWriter`] (same partitioning, sorting, encodings and atomic publish as an
//! import) under an import-record journal (`silt_lake::imports`), and records the last log record
//! it holds (`wal_upto`) in the record that marks the flush done (`_silt/imports/flush.json`,
//! replaced by each flush). A crash before that record leaves a journal that the next start
//! removes with its files, and the log is replayed from the last recorded flush: every
//! acknowledged event ends up in the lake once.
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
//! Touches the lake (data files, rejects, `_silt/imports/`) through `silt_lake`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use silt_core::{Emit, FormatOptions, Reject, SourceInfo, TableName, Transform};
use silt_lake::imports::{merge_positions, ImportLog, KafkaPositions};
use silt_lake::publish::DirectoryPublisher;
use silt_lake::{LakeWriter, WriterConfig};

use crate::live::Live;
use crate::wal::{Janitor, Record};

/// Settings of the ingest and flush threads.
pub struct IngestConfig {
    pub lake: PathBuf,
    pub writer: WriterConfig,
    pub options: FormatOptions,
    /// Transforms per table (a route's `--parse-field`).
    pub transforms: HashMap<TableName, Vec<Box<dyn Transform>>>,
    /// Transforms of every table, after the table's own (`--enrich`).
    pub all_tables: Vec<Box<dyn Transform>>,
    pub flush_age: Duration,
    /// In-memory bytes of a generation that seal it.
    pub flush_bytes: usize,
    /// The server's `--instance` (which flush record is its own).
    pub instance: Option<String>,
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
    /// The last flush error, until a flush succeeds.
    pub last_error: Mutex<Option<String>>,
    /// Kafka positions the lake holds (this instance's flush record, as of its last flush).
    pub kafka_flushed: Mutex<KafkaPositions>,
    /// A source waiting for its records to reach the lake (a Kafka rebalance) asks for the
    /// generation holding log record `seal_upto` to be sealed now, not at its age.
    pub seal_upto: AtomicU64,
    /// `--to-kafka`: messages produced, acknowledged and failed.
    pub produced: AtomicU64,
    pub produce_acked: AtomicU64,
    pub produce_failed: AtomicU64,
    /// `--kafka-meta`: rows whose message could not be numbered (their metadata is null).
    pub kafka_meta_unnumbered: AtomicU64,
}

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

/// Collects one record's decoder output, naming every batch after the record's table when it
/// has one.
struct Collect<'a> {
    table: Option<&'a TableName>,
    batches: Vec<(TableName, RecordBatch)>,
    rejects: Vec<Reject>,
}

impl Emit for Collect<'_> {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        let t = self.table.unwrap_or(table).clone();
        self.batches.push((t, batch));
        Ok(())
    }
    fn reject(&mut self, mut reject: Reject) -> anyhow::Result<()> {
        if let Some(t) = self.table {
            reject.table = Some(t.clone());
        }
        self.rejects.push(reject);
        Ok(())
    }
    fn note(&mut self, line: String) {
        // A decoder's counts for one log record (flow export: datagrams, sequence gaps,
        // unknown templates); per record they are many and small, so at debug level.
        tracing::debug!("{line}");
    }
}

/// Starts both threads. `replayed` are the log records after the last flush (decoded first);
/// `records` brings the log's new records. Returns the handle to join at shutdown (the threads
/// end when the log's writer has stopped and everything is flushed).
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
    let flusher = {
        let (lake, writer, live, stats) = (
            cfg.lake.clone(),
            cfg.writer.clone(),
            live.clone(),
            stats.clone(),
        );
        let log = ImportLog::open_instance(&lake, cfg.instance.as_deref())?
            .with_table_format(writer.table_format);
        let positions = log.last_flush()?.map(|r| r.kafka).unwrap_or_default();
        *stats.kafka_flushed.lock().expect("not poisoned") = positions.clone();
        std::thread::Builder::new()
            .name("silt-serve-flush".into())
            .spawn(move || {
                lower_priority(flush_nice());
                flush_loop(gen_rx, log, positions, writer, live, wal, stats)
            })?
    };
    let handle = std::thread::Builder::new()
        .name("silt-serve-ingest".into())
        .spawn(move || {
            let mut ing = Ingest {
                cfg,
                live,
                stats,
                gen: Generation {
                    id: 1,
                    upto: 0,
                    batches: Vec::new(),
                    rejects: Vec::new(),
                    bytes: 0,
                    kafka: KafkaPositions::new(),
                },
                started: None,
                sealed_upto: 0,
                gen_tx,
                to_kafka,
                said: Default::default(),
                produced: Vec::new(),
                produced_bytes: 0,
                undelivered: 0,
            };
            for r in replayed {
                ing.record(r);
            }
            loop {
                match records.recv_timeout(Duration::from_millis(100)) {
                    Ok(r) => ing.record(r),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
                ing.maybe_seal(false);
            }
            ing.maybe_seal(true);
            drop(ing);
            let _ = flusher.join();
        })?;
    Ok(handle)
}

struct Ingest {
    cfg: IngestConfig,
    live: Arc<Live>,
    stats: Arc<IngestStats>,
    gen: Generation,
    /// When the current generation got its first record.
    started: Option<Instant>,
    /// The last record of the last generation sealed.
    sealed_upto: u64,
    gen_tx: SyncSender<Generation>,
    /// `--to-kafka`: the producer and each routed table's topic.
    to_kafka: Option<(silt_kafka::export::TopicSink, HashMap<TableName, String>)>,
    /// Warnings given once per run.
    said: std::collections::HashSet<String>,
    /// `--to-kafka`: the batches produced since the last seal (and their size), kept until the
    /// producer says whether every message was delivered: if not, the seal writes them to the
    /// lake instead, so that no acknowledged event is lost (at least once).
    produced: Vec<(TableName, RecordBatch)>,
    produced_bytes: usize,
    /// Messages failed or unacknowledged as of the last seal.
    undelivered: u64,
}

impl Ingest {
    fn record(&mut self, r: Record) {
        let table = r.entry.table.as_deref().and_then(TableName::parse);
        let mut out = Collect {
            table: table.as_ref(),
            batches: Vec::new(),
            rejects: Vec::new(),
        };
        // Entries of followed files carry their path: the decoder may name the table after it.
        let info = if r.entry.source.starts_with('/') {
            SourceInfo::from_path(std::path::Path::new(&r.entry.source))
        } else {
            SourceInfo {
                display: r.entry.source.clone(),
                file_name: None,
            }
        };
        let decoded = crate::flows::format(&r.entry.format)
            .and_then(|spec| (spec.open)(&self.cfg.options, &info))
            .and_then(|mut d| {
                d.feed(&r.entry.body, &mut out)?;
                d.finish(&mut out)
            });
        if let Err(e) = decoded {
            // The record's bytes are kept with the reject (up to 1 MiB), not only its reason.
            let mut reject = silt_ingest::source::whole_input_reject(
                &info.display,
                format!("log record {}: stopped decoding: {e:#}", r.seq),
            );
            reject.raw = r.entry.body[..r.entry.body.len().min(1 << 20)].to_vec();
            out.rejects.push(reject);
        }
        self.started.get_or_insert_with(Instant::now);
        self.stats.records.fetch_add(1, Ordering::Relaxed);
        let kafka_meta = r
            .entry
            .kafka
            .as_ref()
            .and_then(|k| k.meta.as_ref().map(|m| (k, m)));
        for (t, b) in out.batches {
            let mut b = b;
            if let Some((k, m)) = kafka_meta {
                match crate::kafka_meta::attach(&b, &k.topic, k.partition, m) {
                    Ok((with, done)) => {
                        b = with;
                        if done.unnumbered > 0 {
                            self.stats
                                .kafka_meta_unnumbered
                                .fetch_add(done.unnumbered as u64, Ordering::Relaxed);
                            if self.said.insert(format!("unnumbered {t}")) {
                                tracing::warn!(
                                    "{t}: {} rows from kafka {}[{}] could not be matched to their message (not a JSON object or MessagePack map?); their --kafka-meta columns are null",
                                    done.unnumbered, k.topic, k.partition
                                );
                            }
                        }
                        for c in done.clashes {
                            if self.said.insert(format!("clash {t} {c}")) {
                                tracing::warn!(
                                    "{t}: the records have a column {c} of their own; kept instead of --kafka-meta's"
                                );
                            }
                        }
                    }
                    Err(e) => tracing::error!(
                        "{t}: --kafka-meta columns not attached: {e:#}; rows kept without them"
                    ),
                }
            }
            let per_table = self.cfg.transforms.get_mut(&t).map(|v| v.as_mut_slice());
            for ts in [per_table, Some(self.cfg.all_tables.as_mut_slice())]
                .into_iter()
                .flatten()
                .filter(|ts| !ts.is_empty())
            {
                b = match silt_core::transform::apply_all(ts, &t, b.clone()) {
                    Ok(b) => b,
                    Err(e) => {
                        // The rows are kept as they came (never dropped); the log says why
                        // they are not transformed.
                        tracing::error!("{t}: transform failed, rows kept untransformed: {e:#}");
                        b
                    }
                };
            }
            if b.num_rows() == 0 {
                continue;
            }
            if let Some((sink, routes)) = &self.to_kafka {
                if let Some(topic) = routes.get(&t) {
                    if let Err(e) = sink.send(topic, None, &b) {
                        // Kept in the lake instead of lost.
                        tracing::error!("{t} -> kafka {topic}: {e:#}; rows written to the lake");
                    } else if !self.cfg.to_kafka.as_ref().is_some_and(|k| k.keep_in_lake) {
                        self.stats
                            .events
                            .fetch_add(b.num_rows() as u64, Ordering::Relaxed);
                        // Held until the seal learns whether Kafka acknowledged them.
                        self.produced_bytes += b.get_array_memory_size();
                        self.produced.push((t, b));
                        continue;
                    }
                }
            }
            let bytes = b.get_array_memory_size();
            self.gen.bytes += bytes;
            self.stats
                .memory_bytes
                .fetch_add(bytes as u64, Ordering::Relaxed);
            self.stats
                .events
                .fetch_add(b.num_rows() as u64, Ordering::Relaxed);
            self.live.push(self.gen.id, &t, b.clone());
            self.gen.batches.push((t, b));
        }
        if let Some(k) = &r.entry.kafka {
            // A Kafka reject is named by its message: source `kafka TOPIC[PARTITION]`, line =
            // the message's offset.
            for rej in &mut out.rejects {
                let at = (rej.line as usize)
                    .checked_sub(1)
                    .and_then(|i| k.line_offsets.get(i));
                rej.source = format!("kafka {}[{}]", k.topic, k.partition);
                if let Some(m) = &k.meta {
                    rej.raw = crate::kafka_meta::unsplice(m.splice, &rej.raw);
                }
                if let Some(o) = at {
                    rej.line = (*o).max(0) as u64;
                } else {
                    rej.reason = format!("{} (in {})", rej.reason, r.entry.source);
                }
            }
        }
        self.stats
            .rejects
            .fetch_add(out.rejects.len() as u64, Ordering::Relaxed);
        self.gen.rejects.extend(out.rejects);
        if let Some(k) = &r.entry.kafka {
            let v = self
                .gen
                .kafka
                .entry(k.topic.clone())
                .or_default()
                .entry(k.partition)
                .or_insert(k.next);
            *v = (*v).max(k.next);
        }
        self.gen.upto = r.seq;
        self.stats.visible_seq.store(r.seq, Ordering::Relaxed);
    }

    /// Seals the generation when it is due (or `now`, at shutdown) and hands it to the flusher
    /// (waiting while the flusher is busy with the previous one).
    fn maybe_seal(&mut self, now: bool) {
        let Some(started) = self.started else {
            return;
        };
        let asked = self.stats.seal_upto.load(Ordering::Relaxed);
        let due = now
            || self.gen.bytes + self.produced_bytes >= self.cfg.flush_bytes
            || started.elapsed() >= self.cfg.flush_age
            || (asked > self.sealed_upto && self.gen.upto >= asked);
        if !due {
            return;
        }
        let next = Generation {
            id: self.gen.id + 1,
            upto: self.gen.upto,
            batches: Vec::new(),
            rejects: Vec::new(),
            bytes: 0,
            kafka: KafkaPositions::new(),
        };
        if let Some((sink, _)) = &self.to_kafka {
            // The log is released once the flush is done: what went to Kafka must be
            // acknowledged by then (or it is produced again from the log after a crash).
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
                    let bytes = b.get_array_memory_size();
                    self.gen.bytes += bytes;
                    self.stats
                        .memory_bytes
                        .fetch_add(bytes as u64, Ordering::Relaxed);
                    self.live.push(self.gen.id, &t, b.clone());
                    self.gen.batches.push((t, b));
                }
            }
            self.undelivered = undelivered;
        }
        let sealed = std::mem::replace(&mut self.gen, next);
        self.sealed_upto = sealed.upto;
        self.started = None;
        if self.gen_tx.send(sealed).is_err() {
            tracing::error!("the flush thread has stopped");
        }
    }
}

fn flush_loop(
    rx: Receiver<Generation>,
    log: ImportLog,
    mut positions: KafkaPositions,
    writer: WriterConfig,
    live: Arc<Live>,
    wal: Janitor,
    stats: Arc<IngestStats>,
) {
    // Cleaning up after a failed attempt reads the whole import record, so only then.
    let mut failed = false;
    for gen in rx {
        let mut delay = Duration::from_millis(200);
        let mut upto = positions.clone();
        merge_positions(&mut upto, &gen.kafka);
        loop {
            match flush(
                &gen,
                &log,
                upto.clone(),
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
                    if let Err(e) = wal.release(gen.upto) {
                        tracing::warn!("write-ahead log cleanup: {e:#}");
                    }
                    break;
                }
                Err(e) => {
                    failed = true;
                    stats.flush_failures.fetch_add(1, Ordering::Relaxed);
                    let msg = format!("flush of log records up to {} failed: {e:#}", gen.upto);
                    tracing::error!("{msg}; retrying in {delay:?} (the rows stay in the log)");
                    *stats.last_error.lock().expect("not poisoned") = Some(msg);
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    }
}

/// Writes one generation; returns the files and rows published. After a failed attempt
/// (`recover`), that attempt's journal and files go first.
fn flush(
    gen: &Generation,
    log: &ImportLog,
    kafka: KafkaPositions,
    cfg: &WriterConfig,
    live: &Live,
    recover: bool,
) -> anyhow::Result<(u64, u64)> {
    // Held from before the first file appears: a re-listing of the lake (maintenance) then never
    // sees this flush's files while its rows are still in memory.
    let update = live.begin_update();
    let lake = log.root();
    if recover {
        log.recover()?;
    }
    let run = log.begin()?;
    let mut w = LakeWriter::new(lake, cfg.clone())?
        .with_publisher(run.publisher(Box::new(DirectoryPublisher))?);
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
    let paths: Vec<PathBuf> = summary.files.iter().map(|f| f.path.clone()).collect();
    let index = update.current.with_files(&paths)?;
    run.finish_with(vec![], &summary.files, Some(gen.upto), kafka)?;
    update.published(gen.id, index);
    let rows = summary.files.iter().map(|f| f.rows).sum();
    Ok((summary.files.len() as u64, rows))
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
