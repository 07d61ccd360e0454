//! The counters of a forward server: one [`ForwardStats`] shared (in an `Arc`) by the accept
//! loop and every connection, updated with relaxed atomics, read with [`ForwardStats::snapshot`]
//! (for `silt serve`'s status line and the tests). Touches nothing else.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters; all monotonic except `active_connections`.
#[derive(Debug, Default)]
pub struct ForwardStats {
    /// Connections accepted (including those closed at once for `max_connections`).
    pub connections: AtomicU64,
    /// Connections being served now.
    pub active_connections: AtomicU64,
    /// Connections closed at accept because `max_connections` were being served.
    pub rejected_connections: AtomicU64,
    /// Frames handed to the sink (or acked at once when they held no event).
    pub frames: AtomicU64,
    /// Events in those frames.
    pub events: AtomicU64,
    /// Bytes read from clients.
    pub bytes: AtomicU64,
    /// Acks sent.
    pub acks: AtomicU64,
    /// Whole frames refused: wrong shape, tag not UTF-8, `size` mismatch, bad gzip.
    pub rejected_frames: AtomicU64,
    /// Handshakes that failed (wrong key, unknown user, wrong password, not a PING).
    pub auth_failures: AtomicU64,
    /// TLS handshakes that failed or did not finish in time (the connection was closed).
    pub tls_failures: AtomicU64,
    /// Appends the sink answered with Backpressure.
    pub sink_backpressure: AtomicU64,
    /// Appends the sink answered with Failed.
    pub sink_failures: AtomicU64,
    /// UDP heartbeats answered.
    pub heartbeats: AtomicU64,
    /// Connections ended, by reason.
    pub disconnects: Disconnects,
}

/// One counter per [`DisconnectReason`].
#[derive(Debug, Default)]
pub struct Disconnects {
    pub closed: AtomicU64,
    pub shutdown: AtomicU64,
    pub io: AtomicU64,
    pub malformed: AtomicU64,
    pub oversized: AtomicU64,
    pub bad_frame: AtomicU64,
    pub truncated: AtomicU64,
    pub timeout: AtomicU64,
    pub auth: AtomicU64,
    pub sink: AtomicU64,
    pub config: AtomicU64,
}

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DisconnectReason {
    /// The client closed it between frames.
    Closed,
    /// The server was shutting down.
    Shutdown,
    /// A read or write failed.
    Io,
    /// Not MessagePack (an invalid marker): the stream cannot be resynchronised.
    Malformed,
    /// A frame over `max_frame_bytes`.
    Oversized,
    /// A whole frame of the wrong shape (see [`crate::frame`]).
    BadFrame,
    /// The client closed it in the middle of a frame.
    Truncated,
    /// Idle, a frame too slow to arrive, or a reply the client did not read.
    Timeout,
    /// The handshake failed.
    Auth,
    /// The sink answered Failed.
    Sink,
    /// The configuration does not validate.
    Config,
}

impl DisconnectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DisconnectReason::Closed => "closed",
            DisconnectReason::Shutdown => "shutdown",
            DisconnectReason::Io => "io",
            DisconnectReason::Malformed => "malformed",
            DisconnectReason::Oversized => "oversized",
            DisconnectReason::BadFrame => "bad_frame",
            DisconnectReason::Truncated => "truncated",
            DisconnectReason::Timeout => "timeout",
            DisconnectReason::Auth => "auth",
            DisconnectReason::Sink => "sink",
            DisconnectReason::Config => "config",
        }
    }
}

/// The counters at one moment, as plain numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub connections: u64,
    pub active_connections: u64,
    pub rejected_connections: u64,
    pub frames: u64,
    pub events: u64,
    pub bytes: u64,
    pub acks: u64,
    pub rejected_frames: u64,
    pub auth_failures: u64,
    pub tls_failures: u64,
    pub sink_backpressure: u64,
    pub sink_failures: u64,
    pub heartbeats: u64,
    /// `(reason, count)` for every reason, in [`DisconnectReason`] order.
    pub disconnects: Vec<(DisconnectReason, u64)>,
}

impl StatsSnapshot {
    /// The count of one disconnect reason.
    pub fn disconnects(&self, reason: DisconnectReason) -> u64 {
        self.disconnects
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl ForwardStats {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn disconnected(&self, reason: DisconnectReason) {
        let d = &self.disconnects;
        let c = match reason {
            DisconnectReason::Closed => &d.closed,
            DisconnectReason::Shutdown => &d.shutdown,
            DisconnectReason::Io => &d.io,
            DisconnectReason::Malformed => &d.malformed,
            DisconnectReason::Oversized => &d.oversized,
            DisconnectReason::BadFrame => &d.bad_frame,
            DisconnectReason::Truncated => &d.truncated,
            DisconnectReason::Timeout => &d.timeout,
            DisconnectReason::Auth => &d.auth,
            DisconnectReason::Sink => &d.sink,
            DisconnectReason::Config => &d.config,
        };
        add(c, 1);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let d = &self.disconnects;
        StatsSnapshot {
            connections: g(&self.connections),
            active_connections: g(&self.active_connections),
            rejected_connections: g(&self.rejected_connections),
            frames: g(&self.frames),
            events: g(&self.events),
            bytes: g(&self.bytes),
            acks: g(&self.acks),
            rejected_frames: g(&self.rejected_frames),
            auth_failures: g(&self.auth_failures),
            tls_failures: g(&self.tls_failures),
            sink_backpressure: g(&self.sink_backpressure),
            sink_failures: g(&self.sink_failures),
            heartbeats: g(&self.heartbeats),
            disconnects: vec![
                (DisconnectReason::Closed, g(&d.closed)),
                (DisconnectReason::Shutdown, g(&d.shutdown)),
                (DisconnectReason::Io, g(&d.io)),
                (DisconnectReason::Malformed, g(&d.malformed)),
                (DisconnectReason::Oversized, g(&d.oversized)),
                (DisconnectReason::BadFrame, g(&d.bad_frame)),
                (DisconnectReason::Truncated, g(&d.truncated)),
                (DisconnectReason::Timeout, g(&d.timeout)),
                (DisconnectReason::Auth, g(&d.auth)),
                (DisconnectReason::Sink, g(&d.sink)),
                (DisconnectReason::Config, g(&d.config)),
            ],
        }
    }
}
