//! The `--kafka` front end: a consumer-group member that reads topics into the lake exactly
//! once.
//!
//! Messages are gathered per topic partition into entries (up to [`KafkaSpec::entry_bytes`], or
//! whatever arrived within [`GATHER`]), each entry carrying the partition and the offset after its
//! last message ([`crate::wal::KafkaSpan`]). Entries go through the server's log like any other
//! source's (numbered and handed on in order, queryable as soon as they are decoded), but are not
//! written to disk: Kafka keeps them. Exactly once into the lake then rests on three rules:
//!
//! 1. **The lake says where to resume.** Each flush records, in the same atomic write that makes
//!    it done (`_silt/imports/flush[-INSTANCE].json`), the next offset of every partition its
//!    rows came from. When partitions are assigned, files of flushes that died are removed first
//!    (their journals), then each partition starts at the highest offset any instance recorded,
//!    or, for a partition the lake has never seen, at the group's committed offset (else
//!    `auto.offset.reset`, earliest by default). Committed offsets are only a mirror for tools and
//!    lag: they are committed after the flush that covers them.
//! 2. **A revoked partition is flushed before it is given up.** On a rebalance the consumer
//!    drops what it gathered of revoked partitions and not yet logged, asks the server to flush
//!    everything logged so far, waits until it is in the lake, and only then lets the group move
//!    the partitions (librdkafka's rebalance callback blocks the member meanwhile). If the flush
//!    cannot finish in [`REVOKE_FLUSH`], the process exits rather than let another member read the
//!    same records a second time; nothing acknowledged is lost (the log holds the other sources'
//!    events, Kafka holds these).
//! 3. **A crash loses nothing and duplicates nothing:** rows in memory were never recorded, the
//!    files of a flush in progress are removed by the next start or assignment, and the records
//!    are read again from the recorded offsets.
//!
//! 4. **A member that stalled is fenced.** A member that stops without dying (SIGSTOP, a frozen
//!    VM) longer than the group's session timeout, or that takes longer than
//!    `max.poll.interval.ms` to flush at a rebalance, is expelled and its partitions go to
//!    another member, which claims them in the lake ([`silt_lake::claims`]) before reading
//!    where the lake ends. When the stalled member wakes and flushes, its flush finds the claims
//!    moved: it removes the files it had published, records nothing, and the process exits with
//!    status 75 (other sources' events stay in its log for the next start).
//!
//! Touches the network, the log and (at assignment) the import record and the partition claims.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use silt_kafka::rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use silt_kafka::rdkafka::error::KafkaError;
use silt_kafka::rdkafka::statistics::Statistics;
use silt_kafka::rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use silt_kafka::rdkafka::types::RDKafkaRespErr;
use silt_kafka::rdkafka::{ClientContext, Message};
use silt_kafka::{KafkaClient, MetaColumns, Quiet, TopicRoute};
use silt_lake::imports::ImportLog;
use silt_lake::remote::record::RemoteImportLog;
use silt_lake::remote::LakeRoot;

use crate::kafka_meta::{EntryMeta, MessageMeta, Splice};
use crate::wal::{Entry, KafkaSpan};
use crate::Shared;

/// Messages of one partition that arrive within this time share an entry.
pub const GATHER: Duration = Duration::from_millis(20);
/// How long a rebalance waits for the server to flush what it holds of revoked partitions.
pub const REVOKE_FLUSH: Duration = Duration::from_secs(240);

/// Everything `--kafka` is configured with.
#[derive(Debug, Clone)]
pub struct KafkaSpec {
    pub client: KafkaClient,
    /// `--group` (consumer group id).
    pub group: String,
    pub topics: Vec<TopicRoute>,
    /// Where a partition the lake and the group have never seen starts: `earliest` or `latest`.
    pub start: String,
    /// Stop once every assigned partition is read up to the end it had when assigned
    /// (`silt import kafka --until-end`).
    pub until_end: bool,
    /// Bytes of messages per log entry at most.
    pub entry_bytes: usize,
    /// `--kafka-meta`: message attributes kept as columns ([`crate::kafka_meta`]).
    pub meta: MetaColumns,
}

impl KafkaSpec {
    pub fn new(brokers: &str, group: &str) -> Self {
        Self {
            client: KafkaClient {
                brokers: brokers.to_string(),
                properties: Vec::new(),
            },
            group: group.to_string(),
            topics: Vec::new(),
            start: "earliest".into(),
            until_end: false,
            entry_bytes: 1 << 20,
            meta: MetaColumns::default(),
        }
    }

    /// How each topic's messages carry their number for `--kafka-meta` (empty without it).
    pub fn splices(&self) -> anyhow::Result<hashbrown::HashMap<String, Splice>> {
        if !self.meta.any() {
            return Ok(hashbrown::HashMap::new());
        }
        self.topics
            .iter()
            .map(|t| {
                let name = crate::flows::format(&t.format)?.name;
                let s = Splice::for_format(name, t.columns.is_some())
                    .map_err(|e| anyhow::anyhow!("--topic {}={}: {e}", t.topic, t.format))?;
                Ok((t.topic.clone(), s))
            })
            .collect()
    }

    /// Checks the routes' formats and options before anything connects.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.topics.is_empty(),
            "--kafka needs at least one --topic NAME=FORMAT[:TABLE]"
        );
        anyhow::ensure!(!self.group.is_empty(), "--group must not be empty");
        anyhow::ensure!(
            self.start == "earliest" || self.start == "latest",
            "--kafka-start {:?}: give earliest or latest",
            self.start
        );
        let mut seen = HashSet::new();
        for t in &self.topics {
            crate::flows::format(&t.format)
                .map_err(|e| anyhow::anyhow!("--topic {}={}: {e:#}", t.topic, t.format))?;
            anyhow::ensure!(seen.insert(&t.topic), "--topic {} is given twice", t.topic);
            if t.columns.is_some() {
                anyhow::ensure!(
                    t.format == "csv" || t.format == "tsv",
                    "--topic-columns {}: only csv and tsv topics take column names",
                    t.topic
                );
            }
        }
        self.splices()?;
        for (k, _) in &self.client.properties {
            anyhow::ensure!(
                !matches!(
                    k.as_str(),
                    "enable.auto.commit" | "enable.auto.offset.store" | "group.id"
                ),
                "--kafka-option {k}: silt sets this itself (offsets are committed only once the lake holds the records)"
            );
        }
        Ok(())
    }
}

/// `--to-kafka TABLE=TOPIC`: rows of these tables, decoded and transformed (enriched), are
/// produced to topics as JSON objects or Avro records (at least once: an event whose log record is replayed
/// after a crash may be produced again; the producer is idempotent within a run) instead of, or
/// with `keep_in_lake` as well as, being written to the lake.
#[derive(Debug, Clone)]
pub struct ToKafka {
    pub client: KafkaClient,
    pub routes: Vec<(silt_core::TableName, String)>,
    pub keep_in_lake: bool,
    /// Avro instead of JSON (`--message-format avro`).
    pub avro: Option<silt_kafka::avro::Framing>,
}

impl ToKafka {
    /// Parses one `TABLE=TOPIC`.
    pub fn parse_route(s: &str) -> anyhow::Result<(silt_core::TableName, String)> {
        let (t, topic) = s.split_once('=').ok_or_else(|| {
            anyhow::anyhow!("--to-kafka {s:?}: give TABLE=TOPIC, e.g. sflow.sample=netdata")
        })?;
        let table = silt_core::TableName::parse(t)
            .ok_or_else(|| anyhow::anyhow!("--to-kafka {s:?}: {t:?} is not SCHEMA.NAME"))?;
        anyhow::ensure!(!topic.is_empty(), "--to-kafka {s:?}: the topic is empty");
        Ok((table, topic.to_string()))
    }
}

/// Counters for `/metrics` and the summary of `silt import kafka`.
#[derive(Debug, Default)]
pub struct KafkaStats {
    pub messages: AtomicU64,
    pub bytes: AtomicU64,
    pub entries: AtomicU64,
    /// Messages without a payload (tombstones), skipped.
    pub empty: AtomicU64,
    /// Messages at offsets already in the lake (delivered again after a seek), skipped.
    pub skipped: AtomicU64,
    pub rebalances: AtomicU64,
    pub commits: AtomicU64,
    pub commit_failures: AtomicU64,
    pub errors: AtomicU64,
    /// Partitions assigned now.
    pub assigned: AtomicI64,
    /// Per partition: (next offset consumed, high watermark from the last statistics).
    pub partitions: Mutex<BTreeMap<(String, i32), (i64, i64)>>,
    /// Set when `--until-end` is satisfied (or the consumer stopped).
    pub finished: AtomicBool,
    /// Why the consumer stopped on its own, if it did.
    pub failure: Mutex<Option<String>>,
}

/// A partition's messages not yet logged.
struct Gathered {
    body: Vec<u8>,
    /// The message offset of each line (record) of `body`.
    line_offsets: Vec<i64>,
    /// Offset after the last message gathered.
    next: i64,
    /// Offset of the first message gathered.
    first: i64,
    since: Instant,
    /// `--kafka-meta`: each message's attributes, by its number.
    meta: Vec<MessageMeta>,
}

/// What the consumer thread and the rebalance callback share.
struct State {
    lake: LakeRoot,
    /// `--instance` (empty for the unnamed instance), for the partitions' claims.
    instance: String,
    shared: Arc<Shared>,
    spec: KafkaSpec,
    /// (hashbrown, as the maps below: looked up per message.)
    routes: hashbrown::HashMap<String, TopicRoute>,
    /// `--kafka-meta`: how each topic's messages are numbered (empty without it).
    splices: hashbrown::HashMap<String, Splice>,
    stats: Arc<KafkaStats>,
    rt: tokio::runtime::Handle,
    /// True once the server is stopping: a log that refuses entries then no longer holds the
    /// consumer (see [`State::log_gathered`]).
    stopping: tokio::sync::watch::Receiver<bool>,
    quiet: Quiet,
    inner: Mutex<Inner>,
}

/// A partition's key borrowed from a message, to look up the maps [`State::gather`] touches for
/// every message without allocating (it hashes as `(String, i32)` does).
#[derive(Hash)]
struct KeyRef<'a>(&'a str, i32);

impl hashbrown::Equivalent<(String, i32)> for KeyRef<'_> {
    fn equivalent(&self, k: &(String, i32)) -> bool {
        k.1 == self.1 && k.0 == self.0
    }
}

#[derive(Default)]
struct Inner {
    /// (hashbrown: looked up per message by [`KeyRef`].)
    gathered: hashbrown::HashMap<(String, i32), Gathered>,
    /// Next offset expected per assigned partition (messages before it are skipped).
    expect: hashbrown::HashMap<(String, i32), i64>,
    /// Partitions assigned now, with the offset each started at.
    assigned: hashbrown::HashMap<(String, i32), i64>,
    /// `--until-end`: the end each assigned partition had when assigned.
    ends: HashMap<(String, i32), i64>,
    /// The highest log sequence number appended.
    last_seq: u64,
    /// Positions last committed to Kafka.
    committed: BTreeMap<(String, i32), i64>,
}

struct Ctx(Arc<State>);

impl ClientContext for Ctx {
    fn log(&self, level: silt_kafka::rdkafka::config::RDKafkaLogLevel, fac: &str, msg: &str) {
        self.0.quiet.log(level, fac, msg)
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.0.stats.errors.fetch_add(1, Ordering::Relaxed);
        self.0.quiet.error(error, reason)
    }

    fn stats(&self, s: Statistics) {
        let mut parts = self.0.stats.partitions.lock().expect("not poisoned");
        for (topic, t) in &s.topics {
            for (p, ps) in &t.partitions {
                if *p < 0 {
                    continue;
                }
                if let Some(e) = parts.get_mut(&(topic.clone(), *p)) {
                    e.1 = ps.hi_offset;
                }
            }
        }
    }
}

impl ConsumerContext for Ctx {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        self.0.stats.rebalances.fetch_add(1, Ordering::Relaxed);
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                if let Err(e) = self.0.assign(consumer, tpl) {
                    // Without knowing where the lake ends, reading could duplicate: stop.
                    self.0
                        .fail(format!("cannot take the assigned partitions: {e:#}"));
                    let _ = consumer.unassign();
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.0.revoke(consumer, tpl);
            }
            e => {
                tracing::error!("kafka: rebalance error {e:?}; giving up the assignment");
                self.0.revoke(consumer, tpl);
            }
        }
    }
}

fn key(t: &str, p: i32) -> (String, i32) {
    (t.to_string(), p)
}

impl State {
    fn fail(&self, why: String) {
        tracing::error!("kafka: {why}");
        *self.stats.failure.lock().expect("not poisoned") = Some(why);
        self.stats.finished.store(true, Ordering::Relaxed);
    }

    /// Starts each assigned partition where the lake ends.
    fn assign(
        &self,
        consumer: &BaseConsumer<Ctx>,
        tpl: &mut TopicPartitionList,
    ) -> anyhow::Result<()> {
        let elements: Vec<(String, i32)> = tpl
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        // Claimed before the lake's positions are read: a member that stalled while holding
        // these partitions cannot record a flush of them from now on (it would be fenced), and
        // one it recorded before this is among the positions read below.
        let token = silt_lake::claims::claim_in(&self.lake, &self.instance, &elements)?;
        {
            let mut claims = self
                .shared
                .ingest
                .kafka_claims
                .lock()
                .expect("not poisoned");
            for k in &elements {
                claims.insert(k.clone(), token.clone());
            }
        }
        // Files of flushes that died (any instance's) hold records past their recorded offsets:
        // they go before anyone reads those records again.
        let (rec, positions) = match &self.lake {
            LakeRoot::Dir(d) => {
                let log = ImportLog::open(d)?;
                (log.recover()?, log.kafka_positions()?)
            }
            LakeRoot::Remote(r) => {
                let log = RemoteImportLog::new(r.clone());
                (log.recover()?, log.kafka_positions()?)
            }
        };
        if !rec.paths.is_empty() {
            // This server's queries must not look for them any more.
            let u = self.shared.live.begin_update();
            let index = u.current.without_files(&rec.paths);
            u.replace(index);
        }
        if rec.files > 0 {
            tracing::info!(
                "kafka: removed {} file(s) of {} interrupted flush(es) before resuming",
                rec.files,
                rec.runs.len()
            );
        }
        // Partitions the lake has never seen start at the group's committed offset, else at
        // the earliest or latest offset (`--kafka-start`).
        let committed = if elements
            .iter()
            .any(|(t, p)| positions.get(t).and_then(|m| m.get(p)).is_none())
        {
            consumer
                .committed_offsets(tpl.clone(), Duration::from_secs(30))
                .map_err(|e| anyhow::anyhow!("cannot read the group's committed offsets: {e}"))?
        } else {
            TopicPartitionList::new()
        };
        let mut inner = self.inner.lock().expect("not poisoned");
        let mut said = Vec::new();
        for (topic, p) in elements {
            let (lo, hi) = consumer
                .fetch_watermarks(&topic, p, Duration::from_secs(30))
                .map_err(|e| anyhow::anyhow!("cannot read the offsets of {topic}[{p}]: {e}"))?;
            let (at, from) = match positions.get(&topic).and_then(|m| m.get(&p)) {
                Some(o) => (*o, "lake"),
                None => match committed.find_partition(&topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => (o, "committed"),
                    _ if self.spec.start == "latest" => (hi, "latest"),
                    _ => (lo, "earliest"),
                },
            };
            // Records before the low watermark are gone (retention): start at the first kept.
            let at = at.max(lo);
            tpl.set_partition_offset(&topic, p, Offset::Offset(at))?;
            let k = key(&topic, p);
            inner.expect.insert(k.clone(), at);
            inner.assigned.insert(k.clone(), at);
            if self.spec.until_end {
                inner.ends.insert(k.clone(), hi.max(at));
            }
            said.push(format!("{topic}[{p}]@{at} ({from})"));
            self.stats
                .partitions
                .lock()
                .expect("not poisoned")
                .insert(k, (at, hi));
        }
        self.stats
            .assigned
            .store(tpl.count() as i64, Ordering::Relaxed);
        drop(inner);
        consumer.assign(tpl)?;
        tracing::info!("kafka: assigned {}", said.join(" "));
        Ok(())
    }

    /// Gives up partitions: what they gathered is dropped, everything logged is flushed and its
    /// offsets committed, then the assignment is released.
    fn revoke(&self, consumer: &BaseConsumer<Ctx>, tpl: &TopicPartitionList) {
        let revoked: Vec<(String, i32)> = tpl
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        let last = {
            let mut inner = self.inner.lock().expect("not poisoned");
            for k in &revoked {
                inner.gathered.remove(k);
                inner.expect.remove(k);
                inner.ends.remove(k);
            }
            inner.last_seq
        };
        let t0 = Instant::now();
        if last > 0 && !self.shared.ingest.flush_through(last, REVOKE_FLUSH) {
            tracing::error!(
                "kafka: the lake did not take the records of the revoked partitions within {REVOKE_FLUSH:?}; exiting so that no other member reads them a second time (restart resumes from the lake)"
            );
            std::process::exit(75);
        }
        self.commit(consumer, CommitMode::Sync);
        {
            let mut parts = self.stats.partitions.lock().expect("not poisoned");
            let mut inner = self.inner.lock().expect("not poisoned");
            for k in &revoked {
                parts.remove(k);
                inner.assigned.remove(k);
            }
        }
        let _ = consumer.unassign();
        self.stats.assigned.store(0, Ordering::Relaxed);
        tracing::info!(
            "kafka: gave up {} partition(s) after flushing their records ({:?})",
            revoked.len(),
            t0.elapsed()
        );
    }

    /// Commits the positions the lake holds for the assigned partitions, when they moved.
    fn commit(&self, consumer: &BaseConsumer<Ctx>, mode: CommitMode) {
        let flushed = self
            .shared
            .ingest
            .kafka_flushed
            .lock()
            .expect("not poisoned")
            .clone();
        let mut inner = self.inner.lock().expect("not poisoned");
        let mut tpl = TopicPartitionList::new();
        let mut moved = Vec::new();
        for (topic, ps) in &flushed {
            for (p, o) in ps {
                let k = key(topic, *p);
                // A partition not assigned now is another member's to commit; a position below
                // where it started here is an old one of this instance's (another member took
                // the partition further meanwhile).
                let start = inner.assigned.get(&k).copied();
                if start.is_none_or(|s| *o < s) || inner.committed.get(&k) == Some(o) {
                    continue;
                }
                if tpl
                    .add_partition_offset(topic, *p, Offset::Offset(*o))
                    .is_ok()
                {
                    moved.push((k, *o));
                }
            }
        }
        if moved.is_empty() {
            return;
        }
        match consumer.commit(&tpl, mode) {
            Ok(()) => {
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                for (k, o) in moved {
                    inner.committed.insert(k, o);
                }
            }
            Err(e) => {
                self.stats.commit_failures.fetch_add(1, Ordering::Relaxed);
                if self.quiet.fresh(&format!("commit {e}")) {
                    tracing::warn!(
                        "kafka: committing offsets failed ({e}); the lake holds them, the next commit retries"
                    );
                }
            }
        }
    }

    /// Logs what a partition gathered, retrying while the log refuses it. Once the server is
    /// stopping, a refusal gives up instead, so that a log that stays broken cannot hold the stop:
    /// the lake then records no offset past what was logged before, and the next start reads these
    /// messages again.
    fn log_gathered(&self, k: &(String, i32), g: Gathered) {
        if let Some(e) = self
            .stats
            .partitions
            .lock()
            .expect("not poisoned")
            .get_mut(k)
        {
            e.0 = e.0.max(g.next);
        }
        let route = &self.routes[&k.0];
        let entry = Entry {
            table: route.table.clone(),
            format: route.format.clone(),
            source: format!("kafka {}[{}] offsets {}..{}", k.0, k.1, g.first, g.next - 1),
            chunk: None,
            body: g.body,
            kafka: Some(KafkaSpan {
                topic: k.0.clone(),
                partition: k.1,
                next: g.next,
                line_offsets: g.line_offsets,
                meta: self.splices.get(&k.0).map(|s| {
                    Arc::new(EntryMeta {
                        columns: self.spec.meta,
                        splice: *s,
                        messages: g.meta,
                    })
                }),
            }),
        };
        self.stats.entries.fetch_add(1, Ordering::Relaxed);
        let wal = self.shared.wal.clone();
        let mut refusals = crate::wal::Refusals::default();
        loop {
            let appended = self.rt.block_on(wal.append(entry.clone()));
            if appended.is_ok() {
                refusals.taken("kafka");
            }
            match appended {
                Ok(crate::wal::Appended::Durable(seq)) => {
                    let mut inner = self.inner.lock().expect("not poisoned");
                    inner.last_seq = inner.last_seq.max(seq);
                    return;
                }
                Ok(crate::wal::Appended::Duplicate | crate::wal::Appended::Conflict) => return,
                Err(e) if *self.stopping.borrow() => {
                    tracing::error!(
                        "kafka: {e:#}; stopping without logging {} (read again at the next \
start)",
                        entry.source
                    );
                    return;
                }
                Err(e) => {
                    refusals.refused("kafka", &e);
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }

    /// Logs every partition's gathered messages that are due (or all, `all`).
    fn log_due(&self, all: bool, entry_bytes: usize) {
        let due: Vec<((String, i32), Gathered)> = {
            let mut inner = self.inner.lock().expect("not poisoned");
            let keys: Vec<(String, i32)> = inner
                .gathered
                .iter()
                .filter(|(_, g)| all || g.body.len() >= entry_bytes || g.since.elapsed() >= GATHER)
                .map(|(k, _)| k.clone())
                .collect();
            keys.into_iter()
                .filter_map(|k| inner.gathered.remove(&k).map(|g| (k, g)))
                .collect()
        };
        for (k, g) in due {
            self.log_gathered(&k, g);
        }
    }

    /// A partition's gathering, begun at `offset` (with the topic's header line, if any).
    fn new_gathered(&self, topic: &str, route: &TopicRoute, offset: i64) -> Gathered {
        let mut body = Vec::new();
        let mut line_offsets = Vec::new();
        if let Some(c) = &route.columns {
            let c = match self.splices.get(topic) {
                Some(s) => s.header(c),
                None => c.clone(),
            };
            body.extend_from_slice(c.as_bytes());
            body.push(b'\n');
            line_offsets.push(-1);
        }
        Gathered {
            body,
            line_offsets,
            next: offset + 1,
            first: offset,
            since: Instant::now(),
            meta: Vec::new(),
        }
    }

    /// Adds one message to its partition's gathering; `true` when the entry is full.
    fn gather(
        &self,
        topic: &str,
        p: i32,
        offset: i64,
        payload: Option<&[u8]>,
        meta: Option<MessageMeta>,
    ) -> bool {
        let k = KeyRef(topic, p);
        let mut inner = self.inner.lock().expect("not poisoned");
        if !inner.assigned.contains_key(&k) {
            // Fetched before the partition was revoked: its new owner reads it.
            self.stats.skipped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        match inner.expect.get_mut(&k) {
            Some(e) if offset < *e => {
                self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            Some(e) => *e = offset + 1,
            None => {
                inner.expect.insert(key(topic, p), offset + 1);
            }
        }
        let route = &self.routes[topic];
        if !inner.gathered.contains_key(&k) {
            let g = self.new_gathered(topic, route, offset);
            inner.gathered.insert(key(topic, p), g);
        }
        let g = inner.gathered.get_mut(&k).expect("inserted above");
        g.next = offset + 1;
        match payload {
            Some(b) if !b.is_empty() => {
                self.stats.messages.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .bytes
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
                match (self.splices.get(topic), meta) {
                    (Some(s), Some(m)) => {
                        let n = g.meta.len() as u32;
                        g.meta.push(m);
                        crate::kafka_meta::splice(*s, n, b, &mut g.body);
                    }
                    _ => g.body.extend_from_slice(b),
                }
                // Line formats: a message ends its line (msgpack objects follow each other).
                if route.format == "msgpack" {
                    g.line_offsets.push(offset);
                } else {
                    if !g.body.ends_with(b"\n") {
                        g.body.push(b'\n');
                    }
                    let lines =
                        memchr::memchr_iter(b'\n', b).count() + usize::from(!b.ends_with(b"\n"));
                    for _ in 0..lines {
                        g.line_offsets.push(offset);
                    }
                }
            }
            _ => {
                self.stats.empty.fetch_add(1, Ordering::Relaxed);
            }
        }
        g.body.len() >= self.spec.entry_bytes
    }

    /// Moves the expected offsets up to the consumer's fetch positions (nothing was gathered
    /// from the partitions concerned: called when idle).
    fn advance_to(&self, pos: &TopicPartitionList) {
        let mut inner = self.inner.lock().expect("not poisoned");
        if !inner.gathered.is_empty() {
            return;
        }
        for e in pos.elements() {
            if let Offset::Offset(o) = e.offset() {
                let k = key(e.topic(), e.partition());
                if let Some(x) = inner.expect.get_mut(&k) {
                    *x = (*x).max(o);
                }
            }
        }
    }

    /// `--until-end`: every assigned partition has reached its end.
    fn at_end(&self) -> bool {
        let inner = self.inner.lock().expect("not poisoned");
        if inner.ends.is_empty() || !inner.gathered.is_empty() {
            return false;
        }
        inner
            .ends
            .iter()
            .all(|(k, end)| inner.expect.get(k).is_some_and(|e| *e >= *end))
    }
}

/// What `--kafka-meta` keeps of a message.
fn message_meta(m: &silt_kafka::rdkafka::message::BorrowedMessage<'_>) -> MessageMeta {
    use silt_kafka::rdkafka::message::Headers;
    MessageMeta {
        offset: m.offset(),
        timestamp: m.timestamp().to_millis(),
        key: m.key().map(<[u8]>::to_vec),
        headers: m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|x| (x.key.to_string(), x.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Starts the consumer thread; it ends when `stopping` turns true (after logging what it
/// gathered, flushing and committing) or, with `--until-end`, when the topics are read.
pub fn start(
    spec: KafkaSpec,
    lake: LakeRoot,
    instance: String,
    shared: Arc<Shared>,
    stats: Arc<KafkaStats>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
    rt: tokio::runtime::Handle,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    spec.check()?;
    let routes = spec
        .topics
        .iter()
        .map(|t| (t.topic.clone(), t.clone()))
        .collect();
    let splices = spec.splices()?;
    let state = Arc::new(State {
        lake,
        instance,
        shared,
        routes,
        splices,
        stats: stats.clone(),
        rt,
        stopping: stopping.clone(),
        quiet: Quiet::default(),
        inner: Mutex::new(Inner::default()),
        spec: spec.clone(),
    });
    let mut cfg = spec.client.config();
    // Defaults the user's --kafka-option may change:
    // - records are queryable a moment after they are consumed, so a fetch waits for more data
    //   at most 50 ms (librdkafka: 500 ms);
    // - when the prefetched queue is over its size, librdkafka postpones the partition's next
    //   fetch by `fetch.queue.backoff.ms`, 1 s by default: a consumer slower than the broker
    //   (always, when it decodes and writes) emptied its queue and then idled for most of that
    //   second. One `silt import kafka` of 1M conn JSON records used 2.4 CPU-s over a 3.9 s
    //   wall, with two half-second stretches at 2-4 % CPU; with 10 ms, 1.6 s (260k -> 630k
    //   records/s; netdata CSV 390k -> 1.19M; the topics of bench/kafka.sh);
    // - so refilled promptly, the queue can be smaller than librdkafka's 64 MiB, and fetches
    //   need not be larger than its 1 MiB per partition (4 MiB had been set here when 1 MiB
    //   measured slower, most likely because each fetch then brought less per second of
    //   backoff): with an 8 MiB queue and 1 MiB fetches the same import
    //   ran as fast and peaked at 530-550 MB RSS instead of 620-660 (4 MiB fetches, 16 MiB
    //   queue; netdata 470-500 instead of 540-580). At 220 MB/s of conn JSON, 8 MiB are 35 ms of
    //   records: a broker farther away than that may want a larger
    //   `queued.max.messages.kbytes`.
    for (k, v) in [
        ("fetch.wait.max.ms", "50"),
        ("fetch.queue.backoff.ms", "10"),
        ("queued.max.messages.kbytes", "8192"),
    ] {
        if !spec.client.properties.iter().any(|(p, _)| p == k) {
            cfg.set(k, v);
        }
    }
    cfg.set("group.id", &spec.group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", &spec.start)
        .set("statistics.interval.ms", "5000")
        .set("partition.assignment.strategy", "range,roundrobin");
    let consumer: BaseConsumer<Ctx> = cfg.create_with_context(Ctx(state.clone())).map_err(|e| {
        anyhow::anyhow!(
            "cannot create a Kafka consumer for {}: {e}",
            spec.client.brokers
        )
    })?;
    let topics: Vec<&str> = spec.topics.iter().map(|t| t.topic.as_str()).collect();
    let topics_list = topics.join(", ");
    // The group's first assignment covers only the topics its leader knows: wait until the
    // broker describes every topic (a topic created a moment ago may not be known yet), so that
    // `--until-end` does not stop before a topic was ever assigned.
    let t0 = Instant::now();
    let mut missing: Vec<&str> = topics.clone();
    while !missing.is_empty() && t0.elapsed() < Duration::from_secs(30) {
        missing.retain(|t| {
            !consumer
                .fetch_metadata(Some(t), Duration::from_secs(5))
                .is_ok_and(|m| {
                    m.topics()
                        .iter()
                        .any(|mt| mt.error().is_none() && !mt.partitions().is_empty())
                })
        });
        if !missing.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    if !missing.is_empty() {
        tracing::warn!(
            "kafka: the broker does not describe {} (yet); consuming them once they exist",
            missing.join(", ")
        );
    }
    consumer
        .subscribe(&topics)
        .map_err(|e| anyhow::anyhow!("cannot subscribe to {}: {e}", topics.join(", ")))?;
    tracing::info!(
        "kafka: consuming {} from {} as group {}",
        topics.join(", "),
        spec.client.brokers,
        spec.group
    );
    let h = std::thread::Builder::new()
        .name("silt-kafka".into())
        .spawn(move || {
            let mut last_commit = Instant::now();
            let started = Instant::now();
            // Messages since gatherings were last checked for their age: at full speed the
            // checks (a clock read per partition) run every CHECK_EVERY messages, not per
            // message; when the consumer is idle, at every empty poll.
            const CHECK_EVERY: u32 = 256;
            let mut unchecked = 0u32;
            loop {
                if *stopping.borrow_and_update() || stats.finished.load(Ordering::Relaxed) {
                    break;
                }
                let mut idle = false;
                match consumer.poll(Duration::from_millis(10)) {
                    Some(Ok(m)) => {
                        let meta = spec.meta.any().then(|| message_meta(&m));
                        if state.gather(m.topic(), m.partition(), m.offset(), m.payload(), meta) {
                            state.log_due(false, spec.entry_bytes);
                        }
                    }
                    Some(Err(e)) => {
                        state.stats.errors.fetch_add(1, Ordering::Relaxed);
                        if state.quiet.fresh(&e.to_string()) {
                            tracing::warn!("kafka: {e} (retrying)");
                        }
                    }
                    None => {
                        idle = true;
                        if spec.until_end {
                            // Transaction markers and compacted-away records leave gaps the
                            // messages never show: the fetch position says where we are.
                            if let Ok(pos) = consumer.position() {
                                state.advance_to(&pos);
                            }
                        }
                    }
                }
                unchecked += 1;
                if !idle && unchecked < CHECK_EVERY {
                    continue;
                }
                unchecked = 0;
                if spec.until_end
                    && started.elapsed() > Duration::from_secs(60)
                    && state.inner.lock().expect("not poisoned").ends.is_empty()
                    && stats.rebalances.load(Ordering::Relaxed) == 0
                {
                    state.fail(format!(
                        "no partition of {} was assigned within 60 s: do the topics exist (kafka-topics.sh --list), and is the broker reachable?",
                        topics_list
                    ));
                    break;
                }
                state.log_due(false, spec.entry_bytes);
                if last_commit.elapsed() >= Duration::from_millis(500) {
                    state.commit(&consumer, CommitMode::Async);
                    last_commit = Instant::now();
                }
                if spec.until_end && state.at_end() {
                    tracing::info!("kafka: every assigned partition is read to its end");
                    break;
                }
            }
            // Stop: what was gathered is logged, flushed and committed, then the group is left
            // (the revoke callback flushes again, which costs nothing now).
            state.log_due(true, 0);
            let last = state.inner.lock().expect("not poisoned").last_seq;
            if last > 0 && !state.shared.ingest.flush_through(last, REVOKE_FLUSH) {
                tracing::error!("kafka: the last records did not reach the lake in time; they are read again at the next start");
            }
            state.commit(&consumer, CommitMode::Sync);
            consumer.unsubscribe();
            // Serve the revoke that unsubscribing triggers.
            let t0 = Instant::now();
            while stats.assigned.load(Ordering::Relaxed) > 0 && t0.elapsed() < Duration::from_secs(10)
            {
                let _ = consumer.poll(Duration::from_millis(50));
            }
            stats.finished.store(true, Ordering::Relaxed);
            close(consumer);
        })?;
    Ok(h)
}

/// How long a stopping consumer waits for librdkafka to leave its group.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Leaves the group and frees the consumer, waiting at most [`CLOSE_WAIT`]. rdkafka's drop does
/// both, polling until librdkafka says the consumer is closed, without a bound: with the broker
/// unreachable that took 43 s and sometimes more than a minute (measured with
/// `kafka.rs::stops_while_the_broker_is_down`), and `silt serve` did not stop on SIGTERM. So the
/// drop runs on a thread of its own, and past the wait this one goes on without it (that thread
/// ends with the process; the broker ends the member's session when it times out). What the
/// consumer read is in the lake, and committed when the broker could be reached, before this.
fn close(consumer: BaseConsumer<Ctx>) {
    let (done, closed) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("silt-kafka-close".into())
        .spawn(move || {
            drop(consumer);
            let _ = done.send(());
        });
    if spawned.is_ok() && closed.recv_timeout(CLOSE_WAIT).is_err() {
        tracing::warn!(
            "kafka: the consumer did not leave its group within {CLOSE_WAIT:?} (is the broker \
             reachable?); stopping without it (the broker ends its session when it times out)"
        );
    }
}
