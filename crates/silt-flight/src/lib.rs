//! silt-flight: the Arrow Flight SQL server of `silt serve`, over an abstract [`QueryEngine`]
//! (DataFusion over the lake, provided by the caller). Clients speak Flight SQL (ADBC, JDBC,
//! `arrow-flight`'s own client); every answer is Arrow, streamed batch by batch:
//!
//! ```text
//!   client ──gRPC──> TokenCheck ──> FlightSqlServer ──plan_schema/execute/tables──> QueryEngine
//!                    (bearer        (tickets carry          │
//!                     token)         the SQL; metadata)     │
//!         <── FlightData ── FlightDataEncoder <── batches ──┘  (pulled as the client reads)
//! ```
//!
//! - [`auth`]: the bearer-token check run before every call, and the Handshake answer;
//! - [`handle`]: statement tickets and prepared-statement handles; both carry the SQL itself, so
//!   the server keeps no per-client state and a handle never expires;
//! - [`metadata`]: SqlInfo (server name `silt`, version, read-only), catalogs, schemas, tables
//!   and table types built from [`QueryEngine::tables`];
//! - [`service`]: the [`arrow_flight::sql::server::FlightSqlService`] implementation: queries,
//!   prepared statements, catalog calls, and the refusals of everything that writes;
//! - [`serve`] (here): puts the service behind the interceptor on a listener until shutdown;
//!   [`serve_incoming`] does the same on connections accepted elsewhere ([`Conn`]: the TLS
//!   streams of `silt serve --flight grpc+tls://`).
//!
//! The server is read-only: updates, ingestion, Substrait plans and transactions are refused.
//! Touches the listener it is given and whatever the engine touches; nothing else.

pub mod auth;
pub mod handle;
pub mod metadata;
pub mod service;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_flight::flight_service_server::FlightServiceServer;
use futures::stream::BoxStream;
use futures::Stream;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::{Connected, TcpConnectInfo};

pub use auth::TokenCheck;
pub use service::FlightSqlServer;

/// An error of the engine's: a message meant for the client, and whose fault it is, which
/// picks the gRPC status the server answers (as `silt serve`'s HTTP API picks its status code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    pub kind: ErrorKind,
    pub message: String,
}

/// Whose fault an [`EngineError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request's (bad SQL, an unknown table, a refused write): `INVALID_ARGUMENT`
    /// (HTTP 400).
    Request,
    /// Data the server cannot read (a damaged lake file): `DATA_LOSS` (HTTP 500). The query
    /// was fine; sending it again gives the same error until the file is dealt with.
    Damaged,
    /// The query ran longer than the server allows: `DEADLINE_EXCEEDED` (HTTP 408).
    Timeout,
    /// The server runs as many queries as it allows: `RESOURCE_EXHAUSTED` (HTTP 429); a retry
    /// may succeed.
    Busy,
    /// Anything else of the server's: `INTERNAL` (HTTP 500).
    Internal,
}

impl EngineError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// A bare message is the request's fault (the common case: the engine refused the SQL).
impl From<String> for EngineError {
    fn from(message: String) -> Self {
        Self::new(ErrorKind::Request, message)
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The query engine behind the server. Every error is an [`EngineError`]: a message for the
/// client, sent back with the status its kind says.
#[async_trait::async_trait]
pub trait QueryEngine: Send + Sync + 'static {
    /// Plans `sql` with `params` bound to its placeholders (one row, a column per parameter)
    /// without running it, and returns the schema of its result. Errors are the engine's
    /// message (e.g. "queries are read-only: ...").
    async fn plan_schema(
        &self,
        sql: &str,
        params: Option<&RecordBatch>,
    ) -> Result<SchemaRef, EngineError>;
    /// What a prepared statement of `sql` answers: its result's schema and its parameters' (a
    /// field per placeholder, in order). The default: no parameters.
    async fn prepare(&self, sql: &str) -> Result<(SchemaRef, SchemaRef), EngineError> {
        Ok((
            self.plan_schema(sql, None).await?,
            Arc::new(arrow::datatypes::Schema::empty()),
        ))
    }
    /// Runs `sql` with `params` bound and streams its batches.
    async fn execute(
        &self,
        sql: &str,
        params: Option<&RecordBatch>,
    ) -> Result<BoxStream<'static, Result<RecordBatch, EngineError>>, EngineError>;
    /// Tables as (catalog, schema, table, arrow schema) for GetCatalogs/GetDbSchemas/GetTables.
    async fn tables(&self) -> Result<Vec<(String, String, String, SchemaRef)>, EngineError>;
}

/// How the server runs. Its `Debug` does not show the token.
#[derive(Clone)]
pub struct FlightConfig {
    /// When `Some`, every call must carry `authorization: Bearer <token>` (or, for clients that
    /// only know user and password, `authorization: Basic` with the token as the password).
    pub token: Option<String>,
    /// The largest gRPC message accepted or sent. Result batches are cut into messages of at
    /// most half of this (and at most 2 MiB, what every client accepts by default); one row
    /// larger than that still goes out whole.
    pub max_message_bytes: usize,
}

impl FlightConfig {
    /// The default for [`FlightConfig::max_message_bytes`]: 16 MiB.
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;
}

impl std::fmt::Debug for FlightConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightConfig")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("max_message_bytes", &self.max_message_bytes)
            .finish()
    }
}

impl Default for FlightConfig {
    fn default() -> Self {
        FlightConfig {
            token: None,
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

/// The tonic service [`serve`] runs: the Flight SQL service behind the token check. Exposed so
/// a caller can mount it on a tonic server of its own (next to other services).
pub type FlightSqlGrpc = InterceptedService<FlightServiceServer<FlightSqlServer>, TokenCheck>;

/// Builds the service [`serve`] runs, for callers that build their own tonic server.
pub fn flight_service(engine: Arc<dyn QueryEngine>, cfg: &FlightConfig) -> FlightSqlGrpc {
    let server = FlightServiceServer::new(FlightSqlServer::new(engine, cfg))
        .max_decoding_message_size(cfg.max_message_bytes)
        .max_encoding_message_size(cfg.max_message_bytes);
    InterceptedService::new(server, TokenCheck::new(cfg.token.clone()))
}

/// Serves Flight SQL on `listener` until `shutdown` resolves; calls in flight when it resolves
/// are finished first.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<dyn QueryEngine>,
    cfg: FlightConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = listener.local_addr().ok();
    let incoming = TcpListenerStream::new(listener).then(|conn| async move {
        match &conn {
            // Small answers (metadata, errors) should not wait for Nagle.
            Ok(stream) => drop(stream.set_nodelay(true)),
            // tonic skips failed accepts; pause so running out of file descriptors does not
            // spin.
            Err(e) => {
                tracing::warn!(error = %e, "Flight SQL: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        conn
    });
    serve_incoming(incoming, addr, engine, cfg, shutdown).await
}

/// Serves Flight SQL on the connections `incoming` yields (accepted, and for TLS handshaken, by
/// the caller: wrap such streams in [`Conn`]) until `shutdown` resolves; `addr` names the
/// listener in log lines.
pub async fn serve_incoming<IO>(
    incoming: impl Stream<Item = std::io::Result<IO>> + Send + 'static,
    addr: Option<SocketAddr>,
    engine: Arc<dyn QueryEngine>,
    cfg: FlightConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()>
where
    IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
{
    tracing::info!(?addr, auth = cfg.token.is_some(), "serving Flight SQL");
    tonic::transport::Server::builder()
        .add_service(flight_service(engine, &cfg))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| anyhow::anyhow!("Flight SQL server on {addr:?} failed: {e}"))
}

/// A connection accepted by the caller ([`serve_incoming`]): its stream and its peer.
pub struct Conn<T>(pub T, pub SocketAddr);

impl<T> Connected for Conn<T> {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        TcpConnectInfo {
            local_addr: None,
            remote_addr: Some(self.1),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Conn<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Conn<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}
