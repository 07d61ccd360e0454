//! The Kafka sink of `silt export`: rows of record batches produced to a topic as JSON objects
//! (one message per row, the columns as keys, nested types as JSON), optionally keyed by a
//! column's value, through an idempotent producer (`enable.idempotence=true`: a retry after a
//! lost acknowledgement never writes a message twice, and order per partition is kept).
//!
//! [`produce_json`] returns only when every message is acknowledged by the brokers (`acks=all`)
//! or has definitely failed; failures are counted and reported, never dropped silently.
//! Touches the network only.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::ClientContext;

use crate::{KafkaClient, Quiet};

/// What an export produced.
#[derive(Debug, Default, Clone)]
pub struct Produced {
    pub messages: u64,
    pub bytes: u64,
    pub failed: u64,
    /// The first delivery error, for the message.
    pub first_error: Option<String>,
}

#[derive(Default)]
struct Deliveries {
    quiet: Quiet,
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
            }
        }
    }
}

/// Produces every row of `batches` to `topic` as a JSON object; `key` names a column whose
/// value (as text) keys each message. Waits up to `timeout` at the end for acknowledgements.
pub fn produce_json(
    client: &KafkaClient,
    topic: &str,
    key: Option<&str>,
    batches: &[RecordBatch],
    timeout: Duration,
) -> anyhow::Result<Produced> {
    let d = Arc::new(Deliveries::default());
    let mut cfg = client.config();
    cfg.set("enable.idempotence", "true")
        .set("acks", "all")
        .set("compression.type", "zstd")
        .set("linger.ms", "20");
    // The user's properties win (a broker without zstd, say), except idempotence.
    for (k, v) in &client.properties {
        cfg.set(k, v);
    }
    cfg.set("enable.idempotence", "true");
    let producer: BaseProducer<Ctx> = cfg.create_with_context(Ctx(d.clone())).map_err(|e| {
        anyhow::anyhow!("cannot create a Kafka producer for {}: {e}", client.brokers)
    })?;
    let mut out = Produced::default();
    for b in batches {
        if b.num_rows() == 0 {
            continue;
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
        let mut buf = Vec::new();
        {
            let mut w = arrow::json::LineDelimitedWriter::new(&mut buf);
            w.write(b)?;
            w.finish()?;
        }
        for (row, line) in buf
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
        {
            let k = keys
                .as_ref()
                .and_then(|a| (!arrow::array::Array::is_null(a, row)).then(|| a.value(row)));
            let mut rec = BaseRecord::<str, [u8]>::to(topic).payload(line);
            if let Some(k) = k {
                rec = rec.key(k);
            }
            let mut rec = Some(rec);
            while let Some(r) = rec.take() {
                match producer.send(r) {
                    Ok(()) => {}
                    Err((e, r))
                        if e.rdkafka_error_code()
                            == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) =>
                    {
                        producer.poll(Duration::from_millis(50));
                        rec = Some(r);
                    }
                    Err((e, _)) => anyhow::bail!("cannot produce to {topic}: {e}"),
                }
            }
            out.messages += 1;
            out.bytes += line.len() as u64;
            producer.poll(Duration::ZERO);
        }
    }
    let t0 = Instant::now();
    producer
        .flush(timeout)
        .map_err(|e| anyhow::anyhow!("waiting for Kafka to acknowledge {topic}: {e}"))?;
    while d.ok.load(Ordering::Relaxed) + d.failed.load(Ordering::Relaxed) < out.messages
        && t0.elapsed() < timeout
    {
        producer.poll(Duration::from_millis(50));
    }
    out.failed = d.failed.load(Ordering::Relaxed);
    out.first_error = d.first_error.lock().expect("not poisoned").clone();
    Ok(out)
}
