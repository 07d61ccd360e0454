//! silt-forward: the server side of fluentd's Forward protocol v1 (what fluentd's `in_forward`
//! and fluent-bit's `in_forward` speak), for `silt serve`. One connection, one task:
//!
//! ```text
//!   client ──bytes──> FrameSplitter ──one whole msgpack value──> frame::parse ──Frame──> ForwardSink
//!     ▲  (handshake       (scan.rs: finds where the     (the four event modes,      │ (the future
//!     │   first when a     value ends, resumable,       gzip, `size` checked,       │  resolves once
//!     │   shared key is    never more than              events counted)             │  the events are
//!     │   set)             max_frame_bytes held)                                    │  durable)
//!     └───────────────────── {"ack": chunk} once the sink's future resolved Ok ◄──────┘
//! ```
//!
//! - [`scan`]: MessagePack headers (markers from `rmp`), skipping whole values, and the
//!   resumable [`FrameSplitter`] that cuts a byte stream into top-level values;
//! - [`frame`]: one whole value -> a keepalive, or the tag, entries, event count and options of
//!   one of the four event modes (Message, Forward, PackedForward, CompressedPackedForward);
//! - [`handshake`]: HELO / PING / PONG with the shared key and optional users;
//! - [`conn`]: [`serve_connection`], the per-connection loop (reads, frames, the sink, acks,
//!   timeouts, limits);
//! - [`server`]: [`serve`] (the accept loop) and [`serve_heartbeat`] (the UDP heartbeat);
//! - [`stats`]: [`ForwardStats`], the counters every connection updates;
//! - [`fuzz`]: the fuzz harness (a whole connection over an in-memory stream), shared by the
//!   afl target `fuzz/src/bin/forward.rs` and the replay test of its saved inputs.
//!
//! Written by hand, not taken from a crate: no maintained Rust crate implements the server side
//! of the Forward protocol with acks and the handshake, and the PackedForward path has to hand
//! the entries over as the bytes received (no decode, no re-encode) to keep up with the
//! ingest benchmark. MessagePack markers and the encoding of the few replies come from `rmp`;
//! skipping over values is hand-written (see [`scan`]) because the splitter must be resumable
//! and must know sizes before the bytes arrive (for the frame limit).
//!
//! Not supported: the JSON variant of the protocol (fluentd accepts `[`/`{` text too; nothing
//! that silt targets sends it), per-network shared keys. TLS is rustls (`server::serve` with an
//! acceptor), as fluentd's in_forward `<transport tls>` and Docker's `tls://` fluentd address.
//!
//! Touches the sockets it is given and the sink it is given; nothing else (no files, no
//! global state; logs through `tracing`).

pub mod conn;
pub mod frame;
pub mod fuzz;
pub mod handshake;
pub mod scan;
pub mod server;
pub mod stats;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;

pub use conn::{serve_connection, serve_connection_until};
pub use frame::Mode;
pub use scan::{FrameSplitter, ScanError};
pub use server::{serve, serve_heartbeat, serve_heartbeat_counted};
pub use stats::{DisconnectReason, ForwardStats, StatsSnapshot};

/// What the server hands over for one accepted frame: all its events as a MessagePack stream
/// of fluentd entries `[time, record]` concatenated. For PackedForward this is the `entries`
/// bytes as received (a slice of the read buffer, no copy); decompressed for
/// CompressedPackedForward; for Forward the entries array's contents as received (also a
/// slice); for Message one entry rebuilt from the raw bytes of time and record. Times are as
/// the client sent them: integer seconds, EventTime (ext 0), or whatever else it put there.
#[derive(Debug, Clone)]
pub struct Frame {
    pub tag: String,
    pub entries: bytes::Bytes,
    /// How many `[time, record]` entries `entries` holds (at least 1).
    pub events: usize,
    /// The `chunk` option: acked (`{"ack": chunk}`) once the sink's future resolved Ok.
    pub chunk: Option<String>,
    /// The frame's size on the wire (compressed, with tag and options).
    pub wire_bytes: usize,
    /// Which of the four event modes the frame came in.
    pub mode: Mode,
}

/// Why a sink did not take a frame. Either way no ack is sent, so a client that asked for one
/// sends the chunk again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkError {
    /// Full for now: the connection is kept, and it is not read again until every append in
    /// flight on it has resolved.
    Backpressure(String),
    /// Could not take the frame: the connection is closed (the client reconnects and resends).
    Failed(String),
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::Backpressure(m) => write!(f, "backpressure: {m}"),
            SinkError::Failed(m) => write!(f, "sink failed: {m}"),
        }
    }
}

impl std::error::Error for SinkError {}

/// Where frames go. `append` is called in the order frames arrive on a connection; the
/// returned future resolves once the events are durable, and only then is the chunk's ack
/// sent. Several futures of one connection may be pending at once (up to
/// [`ForwardConfig::max_inflight_frames`]); they may resolve in any order (acks carry their
/// chunk id). A future dropped unresolved (the connection died) means no ack.
pub trait ForwardSink: Send + Sync + 'static {
    fn append(&self, frame: Frame) -> BoxFuture<'static, Result<(), SinkError>>;
}

/// How the server behaves. [`Default`] gives no authentication and the limits below.
#[derive(Clone)]
pub struct ForwardConfig {
    /// Turns the handshake on (HELO/PING/PONG); `None`: clients send events right away.
    pub shared_key: Option<String>,
    /// The server's name in PONG (and in the digest the client checks).
    pub self_hostname: String,
    /// `(username, password)`; empty: no user authentication. Only with a shared key.
    pub users: Vec<(String, String)>,
    /// The largest frame accepted (a larger one closes the connection as soon as its size is
    /// known, before it is buffered); also the limit on decompressed entries. Default 64 MiB.
    pub max_frame_bytes: usize,
    /// No byte from the client for this long (and nothing pending for it): closed. Default
    /// 120 s.
    pub idle_timeout: Duration,
    /// A frame (or the PING of the handshake) must arrive whole within this long of its first
    /// byte: the guard against clients that dribble. Default 60 s.
    pub frame_timeout: Duration,
    /// Appends in flight per connection before it stops reading. Default 64.
    pub max_inflight_frames: usize,
    /// Wire bytes of frames in flight per connection before it stops reading. Default 64 MiB.
    pub max_inflight_bytes: usize,
    /// Connections served at once by [`serve`]; more are closed at accept. Default 1024.
    pub max_connections: usize,
    /// After shutdown, how long [`serve`] waits for connections to finish their appends and
    /// acks before it drops them. Default 10 s.
    pub shutdown_grace: Duration,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            shared_key: None,
            self_hostname: std::env::var("HOSTNAME")
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "silt".to_string()),
            users: Vec::new(),
            max_frame_bytes: 64 << 20,
            idle_timeout: Duration::from_secs(120),
            frame_timeout: Duration::from_secs(60),
            max_inflight_frames: 64,
            max_inflight_bytes: 64 << 20,
            max_connections: 1024,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl fmt::Debug for ForwardConfig {
    // By hand: the shared key and the passwords stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForwardConfig")
            .field("shared_key", &self.shared_key.as_ref().map(|_| "<set>"))
            .field("self_hostname", &self.self_hostname)
            .field(
                "users",
                &self
                    .users
                    .iter()
                    .map(|(u, _)| u.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("idle_timeout", &self.idle_timeout)
            .field("frame_timeout", &self.frame_timeout)
            .field("max_inflight_frames", &self.max_inflight_frames)
            .field("max_inflight_bytes", &self.max_inflight_bytes)
            .field("max_connections", &self.max_connections)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish()
    }
}

impl ForwardConfig {
    /// Settings that cannot work together.
    pub fn validate(&self) -> Result<(), String> {
        if !self.users.is_empty() && self.shared_key.is_none() {
            return Err(
                "forward: users need a shared key (user authentication is part of the handshake)"
                    .into(),
            );
        }
        if self.max_frame_bytes < 16 {
            return Err(format!(
                "forward: max_frame_bytes {} is too small",
                self.max_frame_bytes
            ));
        }
        if self.max_inflight_frames == 0
            || self.max_inflight_bytes == 0
            || self.max_connections == 0
        {
            return Err("forward: max_inflight_frames, max_inflight_bytes and max_connections must be at least 1".into());
        }
        if self.idle_timeout.is_zero() || self.frame_timeout.is_zero() {
            return Err("forward: idle_timeout and frame_timeout must not be zero".into());
        }
        Ok(())
    }
}

/// Why a connection ended other than by the client closing it cleanly between frames.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("not MessagePack at byte {offset} of the frame: {reason}")]
    Malformed { offset: usize, reason: &'static str },
    #[error("frame of at least {needed} bytes is over the limit of {limit}")]
    Oversized { needed: u64, limit: usize },
    #[error("bad frame: {0}")]
    BadFrame(String),
    #[error("client closed the connection in the middle of a frame ({buffered} bytes buffered)")]
    Truncated { buffered: usize },
    #[error("no data for {0:?}")]
    Idle(Duration),
    #[error("frame not complete after {0:?}")]
    FrameTimeout(Duration),
    #[error("writing a reply timed out after {0:?}")]
    WriteTimeout(Duration),
    #[error("authentication failed: {0}")]
    Auth(String),
    #[error("{0}")]
    Sink(SinkError),
    #[error("configuration: {0}")]
    Config(String),
}

impl ForwardError {
    /// The counter this error is counted under.
    pub fn reason(&self) -> DisconnectReason {
        match self {
            ForwardError::Io(_) => DisconnectReason::Io,
            ForwardError::Malformed { .. } => DisconnectReason::Malformed,
            ForwardError::Oversized { .. } => DisconnectReason::Oversized,
            ForwardError::BadFrame(_) => DisconnectReason::BadFrame,
            ForwardError::Truncated { .. } => DisconnectReason::Truncated,
            ForwardError::Idle(_) | ForwardError::FrameTimeout(_) => DisconnectReason::Timeout,
            ForwardError::WriteTimeout(_) => DisconnectReason::Timeout,
            ForwardError::Auth(_) => DisconnectReason::Auth,
            ForwardError::Sink(_) => DisconnectReason::Sink,
            ForwardError::Config(_) => DisconnectReason::Config,
        }
    }
}
