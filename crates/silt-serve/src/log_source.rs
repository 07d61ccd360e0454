//! The write-ahead log as the source of the server's ingest pipeline (`silt_ingest::Pipeline`,
//! the one `silt import` and `silt convert` run): every durable log record (replayed ones
//! first, then new ones as the log's writer hands them on) is decoded with the format it names,
//! through the pipeline's decoders, into the table it names; its rows then go through the
//! pipeline's transforms to [`crate::ingest`]'s sink.
//!
//! After each record the source places a checkpoint: [`LOG_STREAM`] at the record's sequence
//! number and, for a record read from Kafka, [`kafka_stream`] at the offset after it. The sink
//! records them with the generation that holds the record; once that generation is in the lake,
//! the pipeline acknowledges them back here, and the log's segments up to the acknowledged
//! record are released ([`crate::wal::Janitor::release`]).
//!
//! Records from Kafka keep their origin: `--kafka-meta` columns are attached to their rows
//! (`crate::kafka_meta`), and their rejects are named by topic, partition and message offset.
//!
//! Touches nothing but the log's segments it releases.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use silt_core::{Checkpoint, Emit, Reject, SourceInfo, TableName};
use silt_ingest::{Source, SourceContext};

use crate::ingest::IngestStats;
use crate::wal::{Janitor, KafkaSpan, Record};

/// The checkpoint stream of log records (position: the record's sequence number).
pub const LOG_STREAM: &str = "log";

/// The checkpoint stream of a Kafka partition (position: the offset after a record).
pub fn kafka_stream(topic: &str, partition: i32) -> Arc<str> {
    format!("kafka {topic}[{partition}]").into()
}

/// The topic and partition of a [`kafka_stream`] (Kafka topic names hold no `[`).
pub fn parse_kafka_stream(stream: &str) -> Option<(&str, i32)> {
    let (topic, partition) = stream
        .strip_prefix("kafka ")?
        .strip_suffix(']')?
        .rsplit_once('[')?;
    Some((topic, partition.parse().ok()?))
}

/// The log's records as a pipeline source; see the module documentation.
pub struct LogSource {
    replayed: std::vec::IntoIter<Record>,
    records: Receiver<Record>,
    wal: Janitor,
    stats: Arc<IngestStats>,
    log_stream: Arc<str>,
    /// The last record whose segments were released.
    released: u64,
    /// Warnings given once per run.
    said: HashSet<String>,
}

impl LogSource {
    /// `replayed` are the log records after the last flush (decoded first); `records` brings
    /// the new ones until the log's writer stops.
    pub fn new(
        replayed: Vec<Record>,
        records: Receiver<Record>,
        wal: Janitor,
        stats: Arc<IngestStats>,
    ) -> Self {
        Self {
            replayed: replayed.into_iter(),
            records,
            wal,
            stats,
            log_stream: LOG_STREAM.into(),
            released: 0,
            said: HashSet::new(),
        }
    }

    fn record(&mut self, ctx: &mut SourceContext<'_>, r: Record) -> anyhow::Result<()> {
        self.stats.records.fetch_add(1, Ordering::Relaxed);
        let table = r.entry.table.as_deref().and_then(TableName::parse);
        // Entries of followed files carry their path: the decoder may name the table after it.
        let info = if r.entry.source.starts_with('/') {
            SourceInfo::from_path(std::path::Path::new(&r.entry.source))
        } else {
            SourceInfo {
                display: r.entry.source.clone(),
                file_name: None,
            }
        };
        let decoder =
            crate::flows::format(&r.entry.format).and_then(|spec| ctx.open_format(spec, &info));
        let mut out = RecordEmit {
            inner: ctx.out(),
            table: table.as_ref(),
            kafka: r.entry.kafka.as_ref(),
            entry_source: &r.entry.source,
            stats: &self.stats,
            said: &mut self.said,
            sink_stopped: false,
        };
        let decoded = decoder.and_then(|mut d| {
            d.feed(&r.entry.body, &mut out)?;
            d.finish(&mut out)
        });
        if let Err(e) = decoded {
            if out.sink_stopped {
                return Err(e);
            }
            // The record's bytes are kept with the reject (up to 1 MiB), not only its reason.
            let mut reject = silt_ingest::source::whole_input_reject(
                &info.display,
                format!("log record {}: stopped decoding: {e:#}", r.seq),
            );
            reject.raw = r.entry.body[..r.entry.body.len().min(1 << 20)].to_vec();
            out.reject(reject)?;
        }
        if let Some(k) = &r.entry.kafka {
            ctx.checkpoint(Checkpoint {
                stream: kafka_stream(&k.topic, k.partition),
                position: k.next.max(0) as u64,
            })?;
        }
        ctx.checkpoint(Checkpoint {
            stream: self.log_stream.clone(),
            position: r.seq,
        })
    }

    /// Releases the log's segments up to the last acknowledged record.
    fn release(&mut self, acknowledged: impl IntoIterator<Item = Checkpoint>) {
        let upto = acknowledged
            .into_iter()
            .filter(|c| *c.stream == *LOG_STREAM)
            .map(|c| c.position)
            .max()
            .unwrap_or(0);
        if upto > self.released {
            self.released = upto;
            if let Err(e) = self.wal.release(upto) {
                tracing::warn!("write-ahead log cleanup: {e:#}");
            }
        }
    }
}

impl Source for LogSource {
    fn describe(&self) -> String {
        "the write-ahead log".into()
    }

    fn run(&mut self, ctx: &mut SourceContext<'_>) -> anyhow::Result<()> {
        while let Some(r) = self.replayed.next() {
            self.record(ctx, r)?;
        }
        while !ctx.stopping() {
            self.release(ctx.acknowledged());
            match self.records.recv_timeout(Duration::from_millis(100)) {
                Ok(r) => self.record(ctx, r)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(())
    }

    fn acknowledge(&mut self, checkpoint: &Checkpoint) {
        self.release([checkpoint.clone()]);
    }
}

/// Passes one record's decoder output on, named after the record's table when it has one, with
/// Kafka's metadata and positions when it came from there.
struct RecordEmit<'a> {
    inner: &'a mut dyn Emit,
    table: Option<&'a TableName>,
    kafka: Option<&'a KafkaSpan>,
    entry_source: &'a str,
    stats: &'a IngestStats,
    said: &'a mut HashSet<String>,
    /// The pipeline's channel closed (the sink stopped): an error to pass on, not a reject.
    sink_stopped: bool,
}

impl RecordEmit<'_> {
    fn passed(&mut self, r: anyhow::Result<()>) -> anyhow::Result<()> {
        self.sink_stopped |= r.is_err();
        r
    }

    /// `batch` with the record's `--kafka-meta` columns, when it came from Kafka and asked.
    fn with_kafka_meta(&mut self, t: &TableName, batch: RecordBatch) -> RecordBatch {
        let Some((k, m)) = self.kafka.and_then(|k| k.meta.as_ref().map(|m| (k, m))) else {
            return batch;
        };
        match crate::kafka_meta::attach(&batch, &k.topic, k.partition, m) {
            Ok((with, done)) => {
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
                with
            }
            Err(e) => {
                tracing::error!(
                    "{t}: --kafka-meta columns not attached: {e:#}; rows kept without them"
                );
                batch
            }
        }
    }
}

impl Emit for RecordEmit<'_> {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        let t = self.table.unwrap_or(table).clone();
        let b = self.with_kafka_meta(&t, batch);
        let r = self.inner.batch(&t, b);
        self.passed(r)
    }

    fn reject(&mut self, mut reject: Reject) -> anyhow::Result<()> {
        if let Some(t) = self.table {
            reject.table = Some(t.clone());
        }
        if let Some(k) = self.kafka {
            // A Kafka reject is named by its message: source `kafka TOPIC[PARTITION]`, line =
            // the message's offset.
            let at = (reject.line as usize)
                .checked_sub(1)
                .and_then(|i| k.line_offsets.get(i));
            reject.source = format!("kafka {}[{}]", k.topic, k.partition);
            if let Some(m) = &k.meta {
                reject.raw = crate::kafka_meta::unsplice(m.splice, &reject.raw);
            }
            if let Some(o) = at {
                reject.line = (*o).max(0) as u64;
            } else {
                reject.reason = format!("{} (in {})", reject.reason, self.entry_source);
            }
        }
        let r = self.inner.reject(reject);
        self.passed(r)
    }

    fn note(&mut self, line: String) {
        // A decoder's counts for one log record (flow export: datagrams, sequence gaps, unknown
        // templates); per record they are many and small, so at debug level.
        tracing::debug!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kafka_stream_names_its_topic_and_partition() {
        let s = kafka_stream("zeek.conn-v2_x", 11);
        assert_eq!(parse_kafka_stream(&s), Some(("zeek.conn-v2_x", 11)));
        assert_eq!(parse_kafka_stream(LOG_STREAM), None);
        assert_eq!(parse_kafka_stream("kafka t[x]"), None);
    }
}
