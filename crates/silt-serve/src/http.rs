//! The HTTP API (axum): ingest, query, health and metrics.
//!
//! - `POST /v1/ingest/<table>`: NDJSON (`Content-Type: application/x-ndjson` or
//!   `application/json`) or MessagePack (`application/msgpack`), or any format silt reads with
//!   `?format=<name>` (`access`, `syslog`, `zeek`, ...); `Content-Encoding: gzip` or `zstd`;
//!   `Idempotency-Key` makes a retried request count once. `200` only once the body is in the
//!   fsynced write-ahead log; `400` bad table or format, `401` missing token, `413` body (or its
//!   decompressed form) over `--max-body`, `429` the log's queue is full, `503` the lake writer is
//!   behind by more than the memory budget. Every error is JSON `{"error": "..."}`.
//! - `GET|POST /v1/query`: SQL in the body or `?q=`; `?format=` or `Accept` picks json
//!   (default), ndjson, csv or arrow (an Arrow IPC stream). Read-only (the same rules as
//!   `silt query`), with `--query-timeout` and `--query-memory`; `429` (with `Retry-After: 1`)
//!   when `--max-queries` are running already.
//! - `GET /health`: JSON status (`degraded` while flushes fail, with the error);
//!   `GET /metrics`: Prometheus text format.
//!
//! With a token (`--token-file`), every route but `/health` needs `Authorization: Bearer <token>`.
//!
//! Touches nothing itself: appends go to the log, queries read the lake through `silt_query`.

use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use silt_core::TableName;
use silt_query::OutputFormat;

use crate::wal::{Appended, Entry};
use crate::Shared;

/// The router over the server's shared state.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/ingest/{table}", post(ingest))
        .route("/v1/query", get(query).post(query))
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), auth))
        .route("/health", get(health))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(shared)
}

/// A JSON error response.
fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": msg.into() });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn auth(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    if let Some(token) = &s.cfg.token {
        let ok = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| constant_time_eq(t.trim().as_bytes(), token.as_bytes()));
        if !ok {
            return error(
                StatusCode::UNAUTHORIZED,
                "missing or wrong token: send `Authorization: Bearer <token>` (the token in the server's --token-file)",
            );
        }
    }
    next.run(req).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[derive(Deserialize, Default)]
struct IngestParams {
    format: Option<String>,
}

async fn ingest(
    State(s): State<Arc<Shared>>,
    Path(table): Path<String>,
    Query(p): Query<IngestParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    s.metrics
        .http_ingest_requests
        .fetch_add(1, Ordering::Relaxed);
    let Some(table) = TableName::parse(&table) else {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "table {table:?}: use module.type with [a-z0-9_] in each part, e.g. docker.nginx"
            ),
        );
    };
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let format = match (p.format.as_deref(), ctype.as_str()) {
        (Some(f), _) => f.to_string(),
        (None, "application/x-ndjson" | "application/json" | "application/jsonl" | "") => {
            "json".into()
        }
        (None, "application/msgpack" | "application/x-msgpack" | "application/vnd.msgpack") => {
            "msgpack".into()
        }
        (None, other) => {
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("Content-Type {other:?}: send application/x-ndjson or application/msgpack, or name the format with ?format="),
            )
        }
    };
    if let Err(e) = silt_ingest::registry::require(&format) {
        return error(StatusCode::BAD_REQUEST, format!("{e:#}"));
    }
    let limit = s.cfg.max_body;
    let raw = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(_) => {
            s.metrics.http_too_large.fetch_add(1, Ordering::Relaxed);
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {limit} bytes (--max-body); send smaller batches"),
            );
        }
    };
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    let body = match decode_body(&raw, &encoding, limit) {
        Ok(b) => b,
        Err((status, msg)) => {
            if status == StatusCode::PAYLOAD_TOO_LARGE {
                s.metrics.http_too_large.fetch_add(1, Ordering::Relaxed);
            }
            return error(status, msg);
        }
    };
    if s.behind() {
        s.metrics.http_busy.fetch_add(1, Ordering::Relaxed);
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the lake writer is behind (rows in memory exceed the server's memory budget); retry later",
        );
    }
    let chunk = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| format!("http:{table}:{k}"));
    let n = body.len();
    let entry = Entry {
        table: Some(table.to_string()),
        format,
        source: "http".into(),
        chunk,
        body,
        kafka: None,
    };
    match s.wal.try_append(entry).await {
        Ok(Some(Appended::Durable(seq))) => {
            s.metrics
                .http_ingest_bytes
                .fetch_add(n as u64, Ordering::Relaxed);
            json(serde_json::json!({"status": "durable", "seq": seq, "bytes": n}))
        }
        Ok(Some(Appended::Duplicate)) => {
            json(serde_json::json!({"status": "duplicate", "bytes": n}))
        }
        Ok(None) => {
            s.metrics.http_busy.fetch_add(1, Ordering::Relaxed);
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "the write-ahead log's queue is full; retry after a moment",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, format!("{e:#}")),
    }
}

/// Undoes `Content-Encoding`, refusing output over `limit`.
fn decode_body(raw: &[u8], encoding: &str, limit: usize) -> Result<Vec<u8>, (StatusCode, String)> {
    let too_big = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the decompressed body is larger than {limit} bytes (--max-body); send smaller batches"),
        )
    };
    let read_limited = |r: &mut dyn Read| -> Result<Vec<u8>, (StatusCode, String)> {
        let mut out = Vec::new();
        r.take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| {
                (
                    StatusCode::BAD_REQUEST,
                    format!("cannot decompress the body: {e}"),
                )
            })?;
        if out.len() > limit {
            return Err(too_big());
        }
        Ok(out)
    };
    match encoding {
        "identity" | "" => Ok(raw.to_vec()),
        "gzip" | "x-gzip" => read_limited(&mut flate2::read::MultiGzDecoder::new(raw)),
        "zstd" => {
            let mut d = zstd::stream::read::Decoder::new(raw).map_err(|e| {
                (
                    StatusCode::BAD_REQUEST,
                    format!("cannot decompress the body: {e}"),
                )
            })?;
            read_limited(&mut d)
        }
        other => Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Encoding {other:?}: silt takes gzip, zstd or none"),
        )),
    }
}

fn json(v: serde_json::Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

#[derive(Deserialize, Default)]
struct QueryParams {
    q: Option<String>,
    format: Option<String>,
}

/// Output formats of `/v1/query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Text(OutputFormat),
    Arrow,
}

fn wire_format(p: Option<&str>, accept: Option<&str>) -> Result<Wire, String> {
    let name = match p {
        Some(f) => f.to_ascii_lowercase(),
        None => match accept.unwrap_or("") {
            a if a.contains("application/vnd.apache.arrow.stream") => "arrow".into(),
            a if a.contains("text/csv") => "csv".into(),
            a if a.contains("application/x-ndjson") => "ndjson".into(),
            _ => "json".into(),
        },
    };
    match name.as_str() {
        "arrow" => Ok(Wire::Arrow),
        "json" => Ok(Wire::Text(OutputFormat::Json)),
        "ndjson" => Ok(Wire::Text(OutputFormat::Ndjson)),
        "csv" => Ok(Wire::Text(OutputFormat::Csv)),
        other => Err(format!("format {other:?}: use json, ndjson, csv or arrow")),
    }
}

async fn query(
    State(s): State<Arc<Shared>>,
    Query(p): Query<QueryParams>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    s.metrics.queries.fetch_add(1, Ordering::Relaxed);
    let sql = match (&p.q, body.is_empty()) {
        (Some(q), _) => q.clone(),
        (None, false) => match String::from_utf8(body.to_vec()) {
            Ok(q) => q,
            Err(_) => return error(StatusCode::BAD_REQUEST, "the SQL is not UTF-8"),
        },
        (None, true) => {
            return error(
                StatusCode::BAD_REQUEST,
                "no SQL: send it as the request body or as ?q=",
            )
        }
    };
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let wire = match wire_format(p.format.as_deref(), accept) {
        Ok(w) => w,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let _slot = match s.query_slot() {
        Ok(slot) => slot,
        Err(e) => {
            let mut r = error(StatusCode::TOO_MANY_REQUESTS, e);
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return r;
        }
    };
    let started = Instant::now();
    let result = tokio::time::timeout(s.cfg.query_timeout, s.run_query(&sql)).await;
    let result = match result {
        Err(_) => {
            s.metrics.query_errors.fetch_add(1, Ordering::Relaxed);
            return error(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the query ran longer than {:?} (--query-timeout)",
                    s.cfg.query_timeout
                ),
            );
        }
        Ok(Err(e)) => {
            s.metrics.query_errors.fetch_add(1, Ordering::Relaxed);
            return error(StatusCode::BAD_REQUEST, format!("{e:#}"));
        }
        Ok(Ok(r)) => r,
    };
    s.metrics
        .query_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    let mut out = Vec::new();
    let ctype = match wire {
        Wire::Arrow => {
            let w = arrow::ipc::writer::StreamWriter::try_new(&mut out, &result.schema).and_then(
                |mut w| {
                    for b in &result.batches {
                        w.write(b)?;
                    }
                    w.finish()
                },
            );
            if let Err(e) = w {
                return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
            }
            "application/vnd.apache.arrow.stream"
        }
        Wire::Text(f) => {
            if let Err(e) = result.write(f, &mut out) {
                return error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}"));
            }
            match f {
                OutputFormat::Csv => "text/csv",
                OutputFormat::Ndjson => "application/x-ndjson",
                _ => "application/json",
            }
        }
    };
    ([(header::CONTENT_TYPE, ctype)], out).into_response()
}

async fn health(State(s): State<Arc<Shared>>) -> Response {
    let err = s.ingest.last_error.lock().expect("not poisoned").clone();
    let v = serde_json::json!({
        "status": if err.is_some() { "degraded" } else { "ok" },
        "error": err,
        "uptime_seconds": s.started.elapsed().as_secs_f64(),
        "wal_last_seq": s.wal.stats.last_seq.load(Ordering::Relaxed),
        "visible_seq": s.ingest.visible_seq.load(Ordering::Relaxed),
        "flushed_seq": s.ingest.flushed_seq.load(Ordering::Relaxed),
        "memory_bytes": s.ingest.memory_bytes.load(Ordering::Relaxed),
    });
    json(v)
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::render(&s),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_from_parameter_or_accept() {
        assert_eq!(
            wire_format(Some("CSV"), None),
            Ok(Wire::Text(OutputFormat::Csv))
        );
        assert_eq!(
            wire_format(None, Some("application/vnd.apache.arrow.stream")),
            Ok(Wire::Arrow)
        );
        assert_eq!(wire_format(None, None), Ok(Wire::Text(OutputFormat::Json)));
        assert!(wire_format(Some("xml"), None).is_err());
    }

    #[test]
    fn bodies_decompress_within_the_limit() {
        use std::io::Write;
        let data = b"{\"a\":1}\n".repeat(1000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&data).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(decode_body(&gz, "gzip", 1 << 20).unwrap(), data);
        let zs = zstd::encode_all(&data[..], 1).unwrap();
        assert_eq!(decode_body(&zs, "zstd", 1 << 20).unwrap(), data);
        // A small body that inflates past the limit is refused, not buffered.
        assert_eq!(
            decode_body(&gz, "gzip", 100).unwrap_err().0,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(
            decode_body(&gz, "br", 1 << 20).unwrap_err().0,
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        assert_eq!(
            decode_body(b"not gzip", "gzip", 100).unwrap_err().0,
            StatusCode::BAD_REQUEST
        );
    }
}
