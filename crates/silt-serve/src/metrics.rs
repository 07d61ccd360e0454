//! `/metrics` in the Prometheus text exposition format (version 0.0.4): counters and gauges of
//! the log, the ingest and flush threads, the HTTP API, the Forward listener and maintenance.
//!
//! Touches nothing: reads the counters.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Shared;

/// Counters of the network side.
#[derive(Debug, Default)]
pub struct ServerMetrics {
    pub http_ingest_requests: AtomicU64,
    pub http_ingest_bytes: AtomicU64,
    pub http_too_large: AtomicU64,
    pub http_busy: AtomicU64,
    pub queries: AtomicU64,
    pub query_errors: AtomicU64,
    /// Queries refused because --max-queries were running.
    pub queries_refused: AtomicU64,
    pub query_micros: AtomicU64,
    /// Enrichment databases reloaded (SIGHUP), and reloads refused.
    pub lookup_reloads: AtomicU64,
    pub lookup_reload_failures: AtomicU64,
    /// TLS handshakes on the HTTP API and Flight SQL that failed or timed out.
    pub api_tls_failures: std::sync::Arc<AtomicU64>,
    /// HTTP API connections refused: their client held --http-max-connections-per-client.
    pub http_connections_refused: std::sync::Arc<AtomicU64>,
}

fn line(out: &mut String, name: &str, kind: &str, help: &str, v: impl std::fmt::Display) {
    let _ = writeln!(out, "# HELP silt_{name} {help}");
    let _ = writeln!(out, "# TYPE silt_{name} {kind}");
    let _ = writeln!(out, "silt_{name} {v}");
}

/// The whole exposition.
pub fn render(s: &Shared) -> String {
    let mut o = String::new();
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let w = &s.wal.stats;
    line(
        &mut o,
        "wal_appends_total",
        "counter",
        "Records appended to the write-ahead log.",
        l(&w.appends),
    );
    line(
        &mut o,
        "wal_bytes_total",
        "counter",
        "Bytes written to the write-ahead log.",
        l(&w.bytes),
    );
    line(
        &mut o,
        "wal_fsyncs_total",
        "counter",
        "fsyncs of the write-ahead log (group commits).",
        l(&w.fsyncs),
    );
    line(
        &mut o,
        "wal_duplicates_total",
        "counter",
        "Chunks acknowledged again without appending (resent by a client).",
        l(&w.duplicates),
    );
    line(
        &mut o,
        "wal_last_seq",
        "gauge",
        "Sequence number of the last durable log record.",
        l(&w.last_seq),
    );
    line(
        &mut o,
        "wal_segments_deleted_total",
        "counter",
        "Log segments deleted after their records reached the lake.",
        l(&w.segments_deleted),
    );
    let i = &s.ingest;
    line(
        &mut o,
        "ingest_records_total",
        "counter",
        "Log records decoded.",
        l(&i.records),
    );
    line(
        &mut o,
        "ingest_events_total",
        "counter",
        "Rows decoded (queryable).",
        l(&i.events),
    );
    line(
        &mut o,
        "ingest_rejects_total",
        "counter",
        "Records rejected (kept under _rejects/).",
        l(&i.rejects),
    );
    line(
        &mut o,
        "ingest_visible_seq",
        "gauge",
        "Last log record visible to queries.",
        l(&i.visible_seq),
    );
    line(
        &mut o,
        "flush_total",
        "counter",
        "Flushes to the lake.",
        l(&i.flushes),
    );
    line(
        &mut o,
        "flush_failures_total",
        "counter",
        "Flush attempts that failed (retried).",
        l(&i.flush_failures),
    );
    line(
        &mut o,
        "flush_files_total",
        "counter",
        "Files published by flushes.",
        l(&i.files),
    );
    line(
        &mut o,
        "flush_rows_total",
        "counter",
        "Rows published by flushes.",
        l(&i.rows_flushed),
    );
    line(
        &mut o,
        "flushed_seq",
        "gauge",
        "Last log record in the lake.",
        l(&i.flushed_seq),
    );
    line(
        &mut o,
        "memory_rows_bytes",
        "gauge",
        "Bytes of rows held in memory until their flush.",
        l(&i.memory_bytes),
    );
    line(
        &mut o,
        "memory_trims_total",
        "counter",
        "Times freed memory was handed back to the kernel after a backlog drained.",
        l(&i.trim.trims),
    );
    line(
        &mut o,
        "memory_trim_seconds_total",
        "counter",
        "Time spent handing freed memory back to the kernel.",
        i.trim.micros.load(Ordering::Relaxed) as f64 / 1e6,
    );
    let index = s.live.index();
    line(
        &mut o,
        "lake_files",
        "gauge",
        "Data files in the server's index of the lake (each costs index memory until compaction merges it).",
        index.tables.values().map(|t| t.files.len()).sum::<usize>(),
    );
    line(
        &mut o,
        "footer_cache_bytes",
        "gauge",
        "Bytes of Parquet footers kept between queries (at most 64 MiB).",
        s.footers.bytes(),
    );
    let m = &s.metrics;
    line(
        &mut o,
        "http_ingest_requests_total",
        "counter",
        "POST /v1/ingest requests.",
        l(&m.http_ingest_requests),
    );
    line(
        &mut o,
        "http_ingest_bytes_total",
        "counter",
        "Bytes made durable through POST /v1/ingest.",
        l(&m.http_ingest_bytes),
    );
    line(
        &mut o,
        "http_too_large_total",
        "counter",
        "Ingest requests refused with 413.",
        l(&m.http_too_large),
    );
    line(
        &mut o,
        "http_busy_total",
        "counter",
        "Ingest requests refused with 429 or 503 (backpressure).",
        l(&m.http_busy),
    );
    line(
        &mut o,
        "api_tls_failures_total",
        "counter",
        "TLS handshakes on the HTTP API and Flight SQL that failed or timed out (connection closed).",
        l(&m.api_tls_failures),
    );
    line(
        &mut o,
        "queries_total",
        "counter",
        "Queries run.",
        l(&m.queries),
    );
    line(
        &mut o,
        "query_errors_total",
        "counter",
        "Queries that failed or timed out.",
        l(&m.query_errors),
    );
    line(
        &mut o,
        "query_seconds_total",
        "counter",
        "Time spent answering queries.",
        l(&m.query_micros) as f64 / 1e6,
    );
    let f = s.forward.snapshot();
    line(
        &mut o,
        "forward_connections_total",
        "counter",
        "Forward connections accepted.",
        f.connections,
    );
    line(
        &mut o,
        "forward_frames_total",
        "counter",
        "Forward frames accepted.",
        f.frames,
    );
    line(
        &mut o,
        "forward_events_total",
        "counter",
        "Forward events accepted.",
        f.events,
    );
    line(
        &mut o,
        "forward_acks_total",
        "counter",
        "Forward acks sent (chunks durable).",
        f.acks,
    );
    line(
        &mut o,
        "forward_rejected_frames_total",
        "counter",
        "Forward frames refused (malformed, oversized, bad shape); the connection was closed.",
        f.rejected_frames,
    );
    line(
        &mut o,
        "forward_auth_failures_total",
        "counter",
        "Forward handshakes refused.",
        f.auth_failures,
    );
    line(
        &mut o,
        "forward_tls_failures_total",
        "counter",
        "Forward TLS handshakes that failed or timed out; the connection was closed.",
        f.tls_failures,
    );
    line(
        &mut o,
        "http_connections_refused_total",
        "counter",
        "HTTP API connections refused (503) because their client held --http-max-connections-per-client.",
        l(&s.metrics.http_connections_refused),
    );
    line(
        &mut o,
        "queries_refused_total",
        "counter",
        "Queries refused because --max-queries were running.",
        l(&s.metrics.queries_refused),
    );
    line(
        &mut o,
        "enrich_reloads_total",
        "counter",
        "Enrichment databases reloaded (SIGHUP).",
        l(&s.metrics.lookup_reloads),
    );
    line(
        &mut o,
        "enrich_reload_failures_total",
        "counter",
        "Enrichment database reloads refused (the old databases stayed).",
        l(&s.metrics.lookup_reload_failures),
    );
    line(
        &mut o,
        "queries_running",
        "gauge",
        "Queries running now (HTTP and Flight SQL).",
        s.cfg.max_queries - s.query_slots.available_permits(),
    );
    let m = &s.maintain;
    for (name, help, v) in [
        (
            "maintenance_runs_total",
            "Compaction/retention rounds run.",
            &m.runs,
        ),
        (
            "compactions_total",
            "Groups of small files merged into one.",
            &m.groups,
        ),
        (
            "compacted_files_total",
            "Small files merged away.",
            &m.files_in,
        ),
        (
            "compacted_bytes_in_total",
            "Bytes of the files merged.",
            &m.bytes_in,
        ),
        (
            "compacted_bytes_out_total",
            "Bytes of the merged files written.",
            &m.bytes_out,
        ),
        (
            "retention_dropped_partitions_total",
            "Partitions dropped by --keep.",
            &m.partitions_dropped,
        ),
        (
            "lake_rescans_total",
            "Listings of the lake after another process changed it.",
            &m.rescans,
        ),
        (
            "maintenance_failures_total",
            "Compaction groups or maintenance rounds that failed.",
            &m.failures,
        ),
    ] {
        line(&mut o, name, "counter", help, l(v));
    }
    kafka(&mut o, s);
    o
}

/// The `--kafka` consumer's counters and, per assigned partition, its lag: records behind the
/// partition's end (high watermark, from librdkafka's statistics every 5 s) that this server has
/// not consumed (`silt_kafka_consumer_lag`) and that the lake does not hold yet
/// (`silt_kafka_lake_lag`).
fn kafka(o: &mut String, s: &Shared) {
    let k = &s.kafka;
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    for (name, help, v) in [
        (
            "kafka_messages_total",
            "Kafka messages consumed.",
            &k.messages,
        ),
        (
            "kafka_bytes_total",
            "Bytes of Kafka message payloads consumed.",
            &k.bytes,
        ),
        (
            "kafka_empty_messages_total",
            "Kafka messages without a payload (skipped).",
            &k.empty,
        ),
        (
            "kafka_skipped_messages_total",
            "Kafka messages at offsets the lake already holds (skipped).",
            &k.skipped,
        ),
        (
            "kafka_rebalances_total",
            "Consumer group rebalances seen.",
            &k.rebalances,
        ),
        (
            "kafka_commits_total",
            "Offset commits (after the lake took the records).",
            &k.commits,
        ),
        (
            "kafka_commit_failures_total",
            "Offset commits that failed.",
            &k.commit_failures,
        ),
        (
            "kafka_errors_total",
            "Errors librdkafka reported (broker unreachable, ...).",
            &k.errors,
        ),
        (
            "kafka_produced_total",
            "Messages produced by --to-kafka.",
            &s.ingest.produced,
        ),
        (
            "kafka_produce_acked_total",
            "--to-kafka messages the brokers acknowledged (as of the last flush).",
            &s.ingest.produce_acked,
        ),
        (
            "kafka_produce_failed_total",
            "--to-kafka messages that could not be delivered.",
            &s.ingest.produce_failed,
        ),
        (
            "kafka_meta_unnumbered_total",
            "Rows whose message could not be matched for --kafka-meta (their metadata is null).",
            &s.ingest.kafka_meta_unnumbered,
        ),
    ] {
        line(o, name, "counter", help, l(v));
    }
    line(
        o,
        "kafka_assigned_partitions",
        "gauge",
        "Partitions assigned to this server.",
        k.assigned.load(Ordering::Relaxed),
    );
    let parts = k.partitions.lock().expect("not poisoned").clone();
    if parts.is_empty() {
        return;
    }
    let flushed = s.ingest.kafka_flushed.lock().expect("not poisoned").clone();
    let _ = writeln!(
        o,
        "# HELP silt_kafka_consumer_lag Records of the partition not consumed yet (high watermark minus next offset)."
    );
    let _ = writeln!(o, "# TYPE silt_kafka_consumer_lag gauge");
    for ((t, p), (next, hi)) in &parts {
        if *hi >= 0 {
            let _ = writeln!(
                o,
                "silt_kafka_consumer_lag{{topic=\"{t}\",partition=\"{p}\"}} {}",
                (hi - next).max(0)
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP silt_kafka_lake_lag Records of the partition the lake does not hold yet (high watermark minus the offset the last flush recorded)."
    );
    let _ = writeln!(o, "# TYPE silt_kafka_lake_lag gauge");
    for ((t, p), (next, hi)) in &parts {
        let held = flushed
            .get(t)
            .and_then(|m| m.get(p))
            .copied()
            .unwrap_or(*next);
        if *hi >= 0 {
            let _ = writeln!(
                o,
                "silt_kafka_lake_lag{{topic=\"{t}\",partition=\"{p}\"}} {}",
                (hi - held).max(0)
            );
        }
    }
}
