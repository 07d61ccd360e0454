//! The HTTP API (axum): ingest, query, health and metrics.
//!
//! - `POST /v1/ingest/<table>`: NDJSON (`Content-Type: application/x-ndjson` or
//!   `application/json`; a JSON array of records or one object over several lines is taken too)
//!   or MessagePack (`application/msgpack`), or any format silt reads with
//!   `?format=<name>` (`access`, `syslog`, `zeek`, ...); `Content-Encoding: gzip` or `zstd`;
//!   `Idempotency-Key` makes a retried request count once (`422` when the key was used for a
//!   different body). `200` only once the body is in the
//!   fsynced write-ahead log; `400` bad table or format, `401` missing token, `413` body (or its
//!   decompressed form) over `--max-body`, `429` the log's queue is full, `503` the lake writer is
//!   behind by more than the memory budget. Every error is JSON `{"error": "..."}`.
//!   `?wait=visible` answers once the events are queryable too (`"visible": true`; false when
//!   that took over 10 s), for read-your-writes.
//! - `GET|POST /v1/query`: SQL in the body or `?q=`; `?after=SEQ` runs it once the log's record
//!   SEQ (an ingest answer's `seq`) is queryable; `?format=` or `Accept` picks json
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
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
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "no such endpoint: the API has POST /v1/ingest/TABLE, GET or POST /v1/query, \
                 GET /health and GET /metrics",
            )
        })
        .method_not_allowed_fallback(|| async {
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                "this endpoint does not take that method: ingest is POST, /v1/query GET or POST, \
                 /health and /metrics GET",
            )
        })
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(shared)
}

/// How long a client has to send a request's headers (hyper closes the connection after it).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client has to send a request's body once its headers came (`408` after it).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(120);

/// What the HTTP accept loop allows.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How long a client has to send a request's headers ([`HEADER_TIMEOUT`]).
    pub header_timeout: Duration,
    /// Connections one client (IP address) may hold open at once; 0: no limit. One more is
    /// answered `503` and closed, so that one client cannot take every file descriptor the
    /// server has (many half-sent requests held open until the header timeout, again and
    /// again), while others are still served.
    pub per_client: usize,
    /// Connections refused for that (`silt_http_connections_refused_total`).
    pub refused: Arc<AtomicU64>,
}

/// Connections open per client, shared by the accept loop and the connections' tasks.
type Open = Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>;

/// A connection counted in [`Open`]; uncounted when dropped.
struct Held {
    open: Open,
    ip: std::net::IpAddr,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Answers a connection over the client's limit with a `503` and closes it (within a second:
/// a client that does not read is simply dropped).
async fn refuse<I: tokio::io::AsyncWrite + Unpin>(mut io: I, limit: usize) {
    use tokio::io::AsyncWriteExt;
    let body = serde_json::json!({
        "error": format!(
            "this client has {limit} connections open to the API already \
             (--http-max-connections-per-client): reuse them (keep-alive) or close some"
        )
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        io.write_all(answer.as_bytes()).await?;
        io.shutdown().await
    })
    .await;
}

/// Serves `app` on `listener` until `stop` ends, then lets the connections finish their requests
/// (as `axum::serve` with its graceful shutdown). Unlike `axum::serve` it gives hyper a timer, so
/// a client that never finishes its headers is closed after `limits.header_timeout` instead of
/// holding a connection (and a file descriptor) for good, and it bounds the connections one
/// client holds ([`Limits::per_client`]). The connections are this future's own: dropping it
/// closes them.
pub async fn serve<L: axum::serve::Listener<Addr = std::net::SocketAddr>>(
    mut listener: L,
    app: Router,
    stop: impl std::future::Future<Output = ()>,
    limits: Limits,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut conns = tokio::task::JoinSet::new();
    let open: Open = Default::default();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            (io, addr) = listener.accept() => {
                let ip = addr.ip();
                let admitted = {
                    let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
                    let n = open.entry(ip).or_insert(0);
                    let admitted = limits.per_client == 0 || *n < limits.per_client;
                    *n += usize::from(admitted);
                    admitted
                };
                if !admitted {
                    limits.refused.fetch_add(1, Ordering::Relaxed);
                    conns.spawn(refuse(io, limits.per_client));
                    continue;
                }
                let held = Held { open: open.clone(), ip };
                let svc = hyper_util::service::TowerToHyperService::new(app.clone());
                let conn = http.serve_connection(TokioIo::new(io), svc);
                let mut closed = closed.clone();
                conns.spawn(async move {
                    let _held = held;
                    tokio::pin!(conn);
                    let closing = tokio::select! {
                        _ = conn.as_mut() => false,
                        r = closed.wait_for(|c| *c) => r.is_ok(),
                    };
                    if closing {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            () = &mut stop => break,
        }
    }
    drop(listener);
    let _ = closing.send(true);
    while conns.join_next().await.is_some() {}
}

/// A request's body, at most `limit` bytes, within `timeout` ([`BODY_TIMEOUT`]).
async fn read_body(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, Response> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body did not arrive within {timeout:?}; send it faster or in smaller requests"
            ),
        )),
        Ok(Err(_)) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {limit} bytes (--max-body); send smaller batches"),
        )),
        Ok(Ok(b)) => Ok(b),
    }
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
            // The scheme is case-insensitive (RFC 7235).
            .and_then(|v| {
                v.get(..7)
                    .filter(|s| s.eq_ignore_ascii_case("bearer "))
                    .map(|_| &v[7..])
            })
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

/// A parameter the endpoint does not know is a 400 naming the ones it knows (a misspelt
/// `?wiat=visible` answered as if it were absent would wait for nothing).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct IngestParams {
    format: Option<String>,
    /// `visible`: answer once the events are queryable too, not only durable.
    wait: Option<String>,
}

/// How long `?wait=visible` and `/v1/query?after=` wait for events to become queryable.
const VISIBLE_WAIT: Duration = Duration::from_secs(10);

async fn ingest(
    State(s): State<Arc<Shared>>,
    Path(table): Path<String>,
    p: Result<Query<IngestParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let p = match p {
        Ok(Query(p)) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
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
                format!("Content-Type {other:?}: send application/x-ndjson, application/json or application/msgpack, or name the format with ?format="),
            )
        }
    };
    if let Err(e) = silt_ingest::registry::require(&format) {
        return error(StatusCode::BAD_REQUEST, format!("{e:#}"));
    }
    let wait_visible = match p.wait.as_deref() {
        None | Some("durable") => false,
        Some("visible") => true,
        Some(other) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("wait={other:?}: use wait=visible (answer once the events are queryable) or leave it out"),
            )
        }
    };
    let limit = s.cfg.max_body;
    let raw = match read_body(body, limit, BODY_TIMEOUT).await {
        Ok(b) => b,
        Err(r) => {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                s.metrics.http_too_large.fetch_add(1, Ordering::Relaxed);
            }
            return r;
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
    let body = if format == "json" {
        match json_lines(body) {
            Ok(b) => b,
            Err(msg) => return error(StatusCode::BAD_REQUEST, msg),
        }
    } else {
        body
    };
    if s.behind() {
        s.metrics.http_busy.fetch_add(1, Ordering::Relaxed);
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the lake writer is behind (rows in memory exceed the server's memory budget); retry later",
        );
    }
    // The key with a digest of what it sends: a resend is a duplicate, the key reused for other
    // data a conflict.
    let chunk = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| {
            let mut content = format.as_bytes().to_vec();
            content.push(0);
            content.extend_from_slice(&body);
            crate::wal::with_digest(&format!("http:{table}:{k}"), &content)
        });
    let n = body.len();
    let entry = Entry {
        table: Some(table.to_string()),
        format,
        source: "http".into(),
        chunk: chunk.clone(),
        body,
        kafka: None,
    };
    match s.wal.try_append(entry).await {
        Ok(Some(Appended::Durable(seq))) => {
            s.metrics
                .http_ingest_bytes
                .fetch_add(n as u64, Ordering::Relaxed);
            if wait_visible {
                // Durable either way; `visible` says whether a query now sees the events.
                let visible = s.wait_visible(seq, VISIBLE_WAIT).await;
                return json(
                    serde_json::json!({"status": "durable", "seq": seq, "bytes": n, "visible": visible}),
                );
            }
            json(serde_json::json!({"status": "durable", "seq": seq, "bytes": n}))
        }
        Ok(Some(Appended::Duplicate)) => {
            // The first send's record: a resend that waits for visibility waits for it. A
            // resend queued with the first learns its number once the first is written.
            let chunk = chunk.as_deref().unwrap_or_default();
            let mut seq = s.wal.seq_of(chunk);
            if wait_visible {
                let deadline = tokio::time::Instant::now() + VISIBLE_WAIT;
                while seq.is_none() && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    seq = s.wal.seq_of(chunk);
                }
                let visible = match seq {
                    Some(seq) => s.wait_visible(seq, VISIBLE_WAIT).await,
                    None => false,
                };
                return json(
                    serde_json::json!({"status": "duplicate", "seq": seq, "bytes": n, "visible": visible}),
                );
            }
            json(serde_json::json!({"status": "duplicate", "seq": seq, "bytes": n}))
        }
        Ok(Some(Appended::Conflict)) => error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "this Idempotency-Key was used for a different body (format or data) that the server holds; \
             send new data with a new key",
        ),
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

/// A JSON body as the line-per-record form the JSON decoder reads: a top-level array becomes one
/// line per element, a single object written over several lines becomes one line; anything else
/// (NDJSON, one line per record) is kept as it is. An array that is not valid JSON is refused.
fn json_lines(body: Vec<u8>) -> Result<Vec<u8>, String> {
    // A byte order mark (some Windows tools write one) is not part of the JSON.
    let bom = if body.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    let start = body[bom..]
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map_or(body.len(), |p| bom + p);
    let text = &body[start..];
    // A record's raw text on one line: outside strings, JSON's only line breaks are whitespace,
    // and inside them a raw line break is not valid JSON (so no valid value changes).
    let one_line = |raw: &str, out: &mut Vec<u8>| {
        out.extend(
            raw.bytes()
                .map(|b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
        );
        out.push(b'\n');
    };
    match text.first() {
        Some(b'[') => {
            let items: Vec<&serde_json::value::RawValue> =
                serde_json::from_slice(text).map_err(|e| {
                    format!("the body starts with '[' but is not a JSON array of records: {e}")
                })?;
            let mut out = Vec::with_capacity(text.len());
            for item in items {
                one_line(item.get(), &mut out);
            }
            Ok(out)
        }
        Some(b'{') if text.trim_ascii_end().contains(&b'\n') => {
            match serde_json::from_slice::<&serde_json::value::RawValue>(text) {
                Ok(one) => {
                    let mut out = Vec::with_capacity(text.len());
                    one_line(one.get(), &mut out);
                    Ok(out)
                }
                // Several values (NDJSON) or a bad line: the decoder takes it line by line.
                Err(_) => Ok(body),
            }
        }
        _ => Ok(body),
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
#[serde(deny_unknown_fields)]
struct QueryParams {
    q: Option<String>,
    format: Option<String>,
    /// Run once the log's record `after` (an ingest answer's `seq`) is queryable.
    after: Option<u64>,
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
    p: Result<Query<QueryParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let p = match p {
        Ok(Query(p)) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    s.metrics.queries.fetch_add(1, Ordering::Relaxed);
    let body = match read_body(body, s.cfg.max_body, BODY_TIMEOUT).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    // An empty `?q=` and a body of white space are no SQL.
    let q = p.q.as_deref().filter(|q| !q.trim().is_empty());
    let body_empty = body.iter().all(u8::is_ascii_whitespace);
    let sql = match (q, body_empty) {
        (Some(_), false) => {
            return error(
                StatusCode::BAD_REQUEST,
                "the SQL came twice, as ?q= and as the request body: send it one way",
            )
        }
        (Some(q), true) => q.to_string(),
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
    if let Some(seq) = p.after {
        let last = s.wal.stats.last_seq.load(Ordering::Relaxed);
        if seq > last {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "after={seq}: the log's last record is {last}; give the seq an ingest answered"
                ),
            );
        }
        if !s
            .wait_visible(seq, VISIBLE_WAIT.min(s.cfg.query_timeout))
            .await
        {
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "record {seq} is not queryable yet (decoded up to {}): the server is behind; retry",
                    s.ingest.visible_seq.load(Ordering::Relaxed)
                ),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return r;
        }
    }
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
            // Data the server cannot read (a damaged file) is its fault, not the request's.
            let status = if silt_query::damage::decode_failure(&e) {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::BAD_REQUEST
            };
            return error(status, format!("{e:#}"));
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
    fn json_arrays_and_multi_line_objects_become_one_line_per_record() {
        let lines =
            |b: &str| String::from_utf8(json_lines(b.as_bytes().to_vec()).unwrap()).unwrap();
        assert_eq!(
            lines(" [ {\"a\": 1},\n  {\"a\": \"x\\ny\",\n \"b\": [1, 2]} ]\n"),
            "{\"a\": 1}\n{\"a\": \"x\\ny\",  \"b\": [1, 2]}\n"
        );
        assert_eq!(lines("{\n  \"a\": 1\r\n}\n"), "{   \"a\": 1  }\n");
        // NDJSON, and a bad line among good ones, stay as they are for the decoder.
        for ndjson in ["{\"a\":1}\n{\"a\":2}\n", "{\"a\":1}\n{bad\n", "{\"a\":1}"] {
            assert_eq!(lines(ndjson), ndjson);
        }
        assert_eq!(lines("[]"), "");
        assert_eq!(lines("\u{feff}[{\"a\": 1}]"), "{\"a\": 1}\n");
        assert_eq!(lines("\u{feff}{\n\"a\": 1}"), "{ \"a\": 1}\n");
        let err = json_lines(b"[{\"a\":1},".to_vec()).unwrap_err();
        assert!(err.contains("not a JSON array"), "{err}");
    }

    #[tokio::test]
    async fn a_body_that_does_not_come_times_out_and_one_too_large_is_refused() {
        let never = Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
        let r = read_body(never, 100, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(r.status(), StatusCode::REQUEST_TIMEOUT);
        let r = read_body(Body::from(vec![b'x'; 101]), 100, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let b = read_body(Body::from("abc"), 100, Duration::from_secs(5)).await;
        assert_eq!(&b.unwrap()[..], b"abc");
    }

    /// [`serve`] of a `GET /` answering `hi` on a local port, with `limits`: its address, the
    /// sender that stops it, and its task.
    async fn hi_server(
        limits: Limits,
    ) -> (
        std::net::SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/", get(|| async { "hi" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(
            listener,
            app,
            async move {
                let _ = stopped.await;
            },
            limits,
        ));
        (addr, stop, server)
    }

    /// A connection whose headers never end is closed after the header timeout; complete
    /// requests are answered, and the stop ends with an idle keep-alive connection open.
    #[tokio::test]
    async fn half_sent_headers_are_cut_off_and_the_stop_does_not_wait_for_idle_connections() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (addr, stop, server) = hi_server(Limits {
            header_timeout: Duration::from_millis(300),
            per_client: 0,
            refused: Default::default(),
        })
        .await;
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 1024];
        let n = idle.read(&mut buf).await.unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("hi"),
            "{answer}"
        );
        // The half-sent request: closed (with or without a 408) well before 5 s.
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut got))
            .await
            .expect("the connection was not closed after the header timeout")
            .ok();
        let text = String::from_utf8_lossy(&got);
        assert!(got.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the stop waited for an idle keep-alive connection")
            .unwrap();
    }

    /// A client holding its limit of connections gets a JSON 503 for one more and the
    /// connection closed; once it closes one, a new one is served.
    #[tokio::test]
    async fn a_client_over_its_connection_limit_is_answered_503() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let refused = Arc::new(AtomicU64::new(0));
        let (addr, stop, server) = hi_server(Limits {
            header_timeout: Duration::from_secs(30),
            per_client: 3,
            refused: refused.clone(),
        })
        .await;
        async fn get_hi(c: &mut tokio::net::TcpStream) -> String {
            c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut buf = vec![0u8; 1024];
            let n = c.read(&mut buf).await.unwrap();
            String::from_utf8_lossy(&buf[..n]).to_string()
        }
        let mut held = Vec::new();
        for _ in 0..3 {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            assert!(get_hi(&mut c).await.starts_with("HTTP/1.1 200"));
            held.push(c);
        }
        let mut over = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), over.read_to_end(&mut got))
            .await
            .expect("the connection over the limit was not closed")
            .unwrap();
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 503"), "{text}");
        let body: serde_json::Value =
            serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("3 connections open"),
            "{body}"
        );
        assert_eq!(refused.load(Ordering::Relaxed), 1);
        // The held connections still work; one closed makes room for another.
        assert!(get_hi(&mut held[0]).await.starts_with("HTTP/1.1 200"));
        drop(held.pop());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            let answer = get_hi(&mut c).await;
            if answer.starts_with("HTTP/1.1 200") {
                break;
            }
            // The server may not have seen the close yet.
            assert!(Instant::now() < deadline, "{answer}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.send(()).unwrap();
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap();
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
