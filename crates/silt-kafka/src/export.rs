//! The Kafka sink: rows of record batches produced to topics as JSON objects (one message per
//! row, the columns as keys, nested types as JSON) or as Avro records ([`crate::avro`]),
//! optionally keyed by a column's value,
//! through an idempotent producer (`enable.idempotence=true`, `acks=all`: a retry after a lost
//! acknowledgement never writes a message twice, and order per partition is kept).
//!
//! [`TopicSink`] is shared by `silt export` ([`produce_json`]) and `silt serve --to-kafka`
//! (tables routed to topics). Delivery failures are counted and reported, never dropped
//! silently; [`TopicSink::flush`] waits until every message sent so far is acknowledged or has
//! definitely failed. Touches the network only.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

use crate::{KafkaClient, Quiet};

/// What a sink produced so far.
#[derive(Debug, Default, Clone)]
pub struct Produced {
    pub messages: u64,
    pub bytes: u64,
    pub acknowledged: u64,
    pub failed: u64,
    /// The first delivery error, for the message.
    pub first_error: Option<String>,
}

#[derive(Default)]
struct Deliveries {
    quiet: Quiet,
    sent: AtomicU64,
    bytes: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

struct Ctx(Arc<Deliveries>);

impl ClientContext for Ctx {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, msg: &str) {
        self.0.quiet.log(level, fac, msg)
    }
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.0.quiet.error(error, reason)
    }
}

impl ProducerContext for Ctx {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(_) => {
                self.0.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                let mut f = self.0.first_error.lock().expect("not poisoned");
                if f.is_none() {
                    *f = Some(e.to_string());
                }
                if self.0.quiet.fresh(&e.to_string()) {
                    tracing::error!("kafka: a message was not delivered: {e}");
                }
            }
        }
    }
}

/// How rows become messages.
pub enum Encoding {
    /// One JSON object per row.
    Json,
    /// One Avro record per row, framed as [`crate::avro::Framing`] says.
    Avro(crate::avro::AvroEncoder),
}

/// An idempotent producer of rows (see the module documentation).
pub struct TopicSink {
    producer: ThreadedProducer<Ctx>,
    d: Arc<Deliveries>,
    encoding: Encoding,
}

impl TopicSink {
    pub fn new(client: &KafkaClient, encoding: Encoding) -> anyhow::Result<Self> {
        let d = Arc::new(Deliveries::default());
        let mut cfg = client.config();
        cfg.set("acks", "all")
            .set("compression.type", "zstd")
            .set("linger.ms", "5");
        // The user's properties win (a broker without zstd, say), except idempotence.
        for (k, v) in &client.properties {
            cfg.set(k, v);
        }
        cfg.set("enable.idempotence", "true");
        let producer = cfg.create_with_context(Ctx(d.clone())).map_err(|e| {
            anyhow::anyhow!("cannot create a Kafka producer for {}: {e}", client.brokers)
        })?;
        Ok(Self {
            producer,
            d,
            encoding,
        })
    }

    /// Sends every row of `b` to `topic` as one message; `key` names a column whose value (as
    /// text) keys each message. Returns the messages sent (waiting while the producer's queue
    /// is full).
    pub fn send(&self, topic: &str, key: Option<&str>, b: &RecordBatch) -> anyhow::Result<u64> {
        if b.num_rows() == 0 {
            return Ok(0);
        }
        let keys = match key {
            Some(k) => {
                let i = b.schema().index_of(k).map_err(|_| {
                    anyhow::anyhow!(
                        "--key {k:?}: the result has no such column (it has {})",
                        b.schema()
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
                let col = arrow::compute::cast(b.column(i), &arrow::datatypes::DataType::Utf8)?;
                Some(
                    col.as_any()
                        .downcast_ref::<arrow::array::StringArray>()
                        .expect("cast to Utf8")
                        .clone(),
                )
            }
            None => None,
        };
        let key_of = |row: usize| {
            keys.as_ref()
                .and_then(|a| (!arrow::array::Array::is_null(a, row)).then(|| a.value(row)))
        };
        match &self.encoding {
            Encoding::Json => {
                let mut buf = Vec::new();
                {
                    let mut w = arrow::json::LineDelimitedWriter::new(&mut buf);
                    w.write(b)?;
                    w.finish()?;
                }
                let lines = buf.split(|c| *c == b'\n').filter(|l| !l.is_empty());
                for (row, line) in lines.enumerate() {
                    self.produce(topic, key_of(row), line)?;
                }
            }
            Encoding::Avro(avro) => {
                for (row, m) in avro.encode(topic, b)?.iter().enumerate() {
                    self.produce(topic, key_of(row), m)?;
                }
            }
        }
        Ok(b.num_rows() as u64)
    }

    /// Produces one message, waiting while the producer's queue is full.
    fn produce(&self, topic: &str, key: Option<&str>, payload: &[u8]) -> anyhow::Result<()> {
        let mut rec = BaseRecord::<str, [u8]>::to(topic).payload(payload);
        if let Some(k) = key {
            rec = rec.key(k);
        }
        let mut rec = Some(rec);
        while let Some(r) = rec.take() {
            match self.producer.send(r) {
                Ok(()) => {}
                Err((e, r))
                    if e.rdkafka_error_code()
                        == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                    rec = Some(r);
                }
                Err((e, _)) => anyhow::bail!("cannot produce to {topic}: {e}"),
            }
        }
        self.d.sent.fetch_add(1, Ordering::Relaxed);
        self.d
            .bytes
            .fetch_add(payload.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Waits until every message sent is acknowledged or failed, at most `timeout`; returns
    /// the counts.
    pub fn flush(&self, timeout: Duration) -> Produced {
        let t0 = Instant::now();
        let _ = self.producer.flush(timeout);
        while self.pending() > 0 && t0.elapsed() < timeout {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.produced()
    }

    fn pending(&self) -> u64 {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        l(&self.d.sent).saturating_sub(l(&self.d.ok) + l(&self.d.failed))
    }

    /// The counts so far.
    pub fn produced(&self) -> Produced {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Produced {
            messages: l(&self.d.sent),
            bytes: l(&self.d.bytes),
            acknowledged: l(&self.d.ok),
            failed: l(&self.d.failed),
            first_error: self.d.first_error.lock().expect("not poisoned").clone(),
        }
    }
}

/// Produces every row of `batches` to `topic` (`silt export`) and waits up to `timeout` for
/// the acknowledgements.
pub fn produce_rows(
    client: &KafkaClient,
    encoding: Encoding,
    topic: &str,
    key: Option<&str>,
    batches: &[RecordBatch],
    timeout: Duration,
) -> anyhow::Result<Produced> {
    let sink = TopicSink::new(client, encoding)?;
    for b in batches {
        sink.send(topic, key, b)?;
    }
    let mut p = sink.flush(timeout);
    // Not acknowledged within the timeout counts as failed.
    let unknown = p.messages - p.acknowledged - p.failed;
    if unknown > 0 {
        p.failed += unknown;
        p.first_error
            .get_or_insert_with(|| format!("no acknowledgement within {timeout:?}"));
    }
    Ok(p)
}
