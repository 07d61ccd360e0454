//! silt-kafka: what silt's Kafka source (`silt serve --kafka`, `silt import kafka`) and sink
//! (`silt export --kafka`) share: the client settings built from the command line, the per-topic
//! routes (`--topic NAME=FORMAT[:TABLE]`), and librdkafka's log and errors turned into `tracing`
//! lines without repeating the same complaint every second while a broker is away.
//!
//! The client is `rdkafka` over librdkafka (built from source with cmake: zstd, lz4, snappy and
//! gzip message compression, TLS and SASL PLAIN/SCRAM). The consumer loop lives with the server
//! (`silt_serve::kafka`) because its acknowledgements are the server's flushes; the producer is
//! [`export`]. Touches the network only.

pub mod avro;
pub mod export;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use rdkafka;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::ClientContext;

/// How a topic's messages are read: a format of the registry and, optionally, the table every
/// row goes to (otherwise the decoder names it: EVE's `event_type`, Zeek's `_path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRoute {
    pub topic: String,
    pub format: String,
    pub table: Option<String>,
    /// For CSV/TSV topics whose messages are rows without a header: the column names, given
    /// to the decoder as the header of every batch.
    pub columns: Option<String>,
}

impl TopicRoute {
    /// `NAME=FORMAT[:TABLE]`, e.g. `eve=suricata`, `zeek-conn=zeek:zeek.conn`,
    /// `netdata=csv:rasp.netdata`.
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let (topic, rest) = s.split_once('=').ok_or_else(|| {
            anyhow::anyhow!(
                "--topic {s:?}: give NAME=FORMAT[:TABLE], e.g. eve=suricata or netdata=csv:rasp.netdata"
            )
        })?;
        anyhow::ensure!(
            !topic.is_empty()
                && topic.len() <= 249
                && topic
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "--topic {s:?}: {topic:?} is not a Kafka topic name (letters, digits, '.', '_', '-')"
        );
        let (format, table) = match rest.split_once(':') {
            Some((f, t)) => (f, Some(t.to_string())),
            None => (rest, None),
        };
        anyhow::ensure!(!format.is_empty(), "--topic {s:?}: the format is missing");
        if let Some(t) = &table {
            anyhow::ensure!(
                t.contains('.') && !t.starts_with('.') && !t.ends_with('.'),
                "--topic {s:?}: the table {t:?} must be SCHEMA.NAME, e.g. rasp.netdata"
            );
        }
        Ok(Self {
            topic: topic.to_string(),
            format: format.to_string(),
            table,
            columns: None,
        })
    }
}

/// `--kafka-meta`: which of a message's own attributes become columns of the rows decoded from
/// it (`_kafka_topic`, `_kafka_partition`, `_kafka_offset`, `_kafka_timestamp`, `_kafka_key`,
/// `_kafka_headers`; see `silt_serve::kafka_meta`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetaColumns {
    pub topic: bool,
    pub partition: bool,
    pub offset: bool,
    pub timestamp: bool,
    pub key: bool,
    pub headers: bool,
}

impl MetaColumns {
    /// The names `--kafka-meta` takes.
    pub const NAMES: [&'static str; 6] = [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "headers",
    ];

    /// A comma-separated list of [`Self::NAMES`], or `all`.
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let mut m = Self::default();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match w {
                "topic" => m.topic = true,
                "partition" => m.partition = true,
                "offset" => m.offset = true,
                "timestamp" => m.timestamp = true,
                "key" => m.key = true,
                "headers" => m.headers = true,
                "all" => {
                    m = Self {
                        topic: true,
                        partition: true,
                        offset: true,
                        timestamp: true,
                        key: true,
                        headers: true,
                    }
                }
                other => anyhow::bail!(
                    "--kafka-meta {other:?}: give a comma-separated list of {} (or all)",
                    Self::NAMES.join(", ")
                ),
            }
        }
        Ok(m)
    }

    /// Whether any column is asked for.
    pub fn any(&self) -> bool {
        self.topic || self.partition || self.offset || self.timestamp || self.key || self.headers
    }
}

/// Connection settings common to consumers and producers.
#[derive(Debug, Clone, Default)]
pub struct KafkaClient {
    /// `--kafka HOST:PORT[,HOST:PORT…]`.
    pub brokers: String,
    /// `-X key=value` librdkafka properties passed through as given (`security.protocol`,
    /// `ssl.ca.location`, `sasl.mechanism`, `sasl.username`, …).
    pub properties: Vec<(String, String)>,
}

impl KafkaClient {
    /// Parses one `-X key=value` (`--kafka-option`).
    pub fn parse_property(s: &str) -> anyhow::Result<(String, String)> {
        let (k, v) = s.split_once('=').ok_or_else(|| {
            anyhow::anyhow!(
                "--kafka-option {s:?}: give KEY=VALUE, a librdkafka property such as security.protocol=SASL_SSL"
            )
        })?;
        anyhow::ensure!(
            !k.trim().is_empty(),
            "--kafka-option {s:?}: the key is empty"
        );
        Ok((k.trim().to_string(), v.to_string()))
    }

    /// The librdkafka configuration: brokers, then the given properties (which may override
    /// anything silt sets, except what correctness needs; see the callers).
    pub fn config(&self) -> ClientConfig {
        // librdkafka's own log below warnings (and what `--kafka-option debug=cgrp,...` asks for)
        // only when this crate's debug log is on (`SILT_LOG=silt_kafka=debug`): they would be
        // dropped here anyway, after librdkafka formatted them.
        let level = if tracing::enabled!(tracing::Level::DEBUG) {
            RDKafkaLogLevel::Debug
        } else {
            RDKafkaLogLevel::Warning
        };
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("client.id", "silt")
            .set_log_level(level);
        for (k, v) in &self.properties {
            c.set(k, v);
        }
        c
    }
}

/// A [`ClientContext`] that sends librdkafka's log and errors to `tracing`, saying the same
/// thing at most once per [`QUIET`] (a broker that is down is reported every few seconds, not on
/// every reconnect attempt).
#[derive(Default)]
pub struct Quiet {
    said: Mutex<HashMap<String, Instant>>,
}

/// How long the same complaint is not repeated.
pub const QUIET: Duration = Duration::from_secs(10);

impl Quiet {
    /// Whether `what` was not said within [`QUIET`].
    pub fn fresh(&self, what: &str) -> bool {
        let mut m = self.said.lock().expect("not poisoned");
        let now = Instant::now();
        if m.len() > 1000 {
            m.retain(|_, t| now.duration_since(*t) < QUIET);
            // More than a thousand different lines within QUIET (librdkafka's debug log): forget
            // them all rather than sweep again at every line.
            if m.len() > 1000 {
                m.clear();
            }
        }
        match m.get(what) {
            Some(t) if now.duration_since(*t) < QUIET => false,
            _ => {
                m.insert(what.to_string(), now);
                true
            }
        }
    }
}

impl ClientContext for Quiet {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, msg: &str) {
        if !self.fresh(msg) {
            return;
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!("kafka: {fac}: {msg}"),
            RDKafkaLogLevel::Warning => tracing::warn!("kafka: {fac}: {msg}"),
            _ => tracing::debug!("kafka: {fac}: {msg}"),
        }
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        let what = format!("{error}: {reason}");
        if self.fresh(&what) {
            tracing::warn!("kafka: {what} (retrying; nothing is lost meanwhile)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_routes() {
        let r = TopicRoute::parse("netdata=csv:rasp.netdata").unwrap();
        assert_eq!(r.topic, "netdata");
        assert_eq!(r.format, "csv");
        assert_eq!(r.table.as_deref(), Some("rasp.netdata"));
        let r = TopicRoute::parse("eve=suricata").unwrap();
        assert_eq!((r.format.as_str(), r.table), ("suricata", None));
        for bad in ["eve", "=json", "a b=json", "t=", "t=csv:nodot", "t=csv:.x"] {
            assert!(TopicRoute::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn meta_columns() {
        let m = MetaColumns::parse("key, headers").unwrap();
        assert!(m.key && m.headers && !m.offset && m.any());
        assert!(MetaColumns::parse("all").unwrap().timestamp);
        assert!(!MetaColumns::parse("").unwrap().any());
        let e = MetaColumns::parse("key,value").unwrap_err().to_string();
        assert!(e.contains("\"value\"") && e.contains("headers"), "{e}");
    }

    #[test]
    fn properties() {
        assert_eq!(
            KafkaClient::parse_property("sasl.mechanism=SCRAM-SHA-256").unwrap(),
            ("sasl.mechanism".into(), "SCRAM-SHA-256".into())
        );
        assert!(KafkaClient::parse_property("novalue").is_err());
    }

    #[test]
    fn quiet_says_things_once() {
        let q = Quiet::default();
        assert!(q.fresh("broker down"));
        assert!(!q.fresh("broker down"));
        assert!(q.fresh("other"));
        // Thousands of different lines at once (a debug log): the memory of them stays bounded,
        // and a line said before is only said again once it was forgotten.
        for i in 0..5000 {
            assert!(q.fresh(&format!("line {i}")));
        }
        assert!(q.said.lock().unwrap().len() <= 1001);
        assert!(!q.fresh("line 4999"));
    }
}
