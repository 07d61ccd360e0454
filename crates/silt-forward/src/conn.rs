//! One connection, served to its end by [`serve_connection`] in one task: read into the
//! [`FrameSplitter`], take each whole frame (the PING first when a shared key is set), hand its
//! events to the sink, and send `{"ack": chunk}` when the sink's future resolves Ok. Appends
//! of one connection are pipelined (a client that does not wait for acks is not held to one
//! frame per commit) up to `max_inflight_frames` / `max_inflight_bytes`; at the limit, after a
//! Backpressure answer (until everything in flight resolved), and while draining, the
//! connection is not read, so TCP pushes back on the client.
//!
//! Every way a connection can end is counted in [`ForwardStats`] and, unless the client just
//! closed it, logged at warn with the peer and the reason. After a protocol error (malformed,
//! oversized, bad frame, truncated, timeout) the connection stops reading, waits for the
//! appends already in flight, sends their acks, then closes: the client's earlier chunks are
//! not resent for nothing. I/O errors and sink failures close at once.
//!
//! Touches the stream it is given and the sink it is given.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{sleep_until, timeout, Instant};

use crate::frame::{self, Parsed, Raw, BLOCKING_THRESHOLD};
use crate::handshake::Handshake;
use crate::scan::{FrameSplitter, ScanError};
use crate::stats::{add, DisconnectReason, ForwardStats};
use crate::{ForwardConfig, ForwardError, ForwardSink, Frame, SinkError};

/// The most one read brings in.
pub const READ_CHUNK: usize = 64 << 10;

/// Serves one accepted connection to its end. `Ok` when the client closed it between frames;
/// the error otherwise (already counted and logged).
pub async fn serve_connection<S>(
    stream: S,
    peer: SocketAddr,
    cfg: Arc<ForwardConfig>,
    sink: Arc<dyn ForwardSink>,
    stats: Arc<ForwardStats>,
) -> Result<(), ForwardError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    serve_connection_until(stream, peer, cfg, sink, stats, std::future::pending()).await
}

struct Done {
    chunk: Option<String>,
    wire_bytes: usize,
    result: Result<(), SinkError>,
}

/// Counts the connection as active while it lives.
struct Active<'a>(&'a ForwardStats);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0
            .active_connections
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// [`serve_connection`] that also stops when `shutdown` resolves: it stops reading, waits for
/// the appends in flight, sends their acks and returns `Ok` (counted as a shutdown).
pub async fn serve_connection_until<S, F>(
    stream: S,
    peer: SocketAddr,
    cfg: Arc<ForwardConfig>,
    sink: Arc<dyn ForwardSink>,
    stats: Arc<ForwardStats>,
    shutdown: F,
) -> Result<(), ForwardError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    F: Future<Output = ()> + Send,
{
    add(&stats.connections, 1);
    add(&stats.active_connections, 1);
    let _active = Active(&stats);
    let (result, stopped) = if let Err(e) = cfg.validate() {
        (Err(ForwardError::Config(e)), false)
    } else {
        let mut c = Conn {
            peer,
            cfg: &cfg,
            sink: &sink,
            stats: &stats,
            inflight: FuturesUnordered::new(),
            inflight_bytes: 0,
        };
        c.run(stream, shutdown).await
    };
    let reason = match &result {
        Ok(()) if stopped => DisconnectReason::Shutdown,
        Ok(()) => DisconnectReason::Closed,
        Err(e) => e.reason(),
    };
    stats.disconnected(reason);
    match &result {
        Ok(()) => {
            tracing::debug!(peer = %peer, reason = reason.as_str(), "forward: connection closed")
        }
        Err(e) => {
            tracing::warn!(peer = %peer, reason = reason.as_str(), "forward: connection dropped: {e}")
        }
    }
    result
}

struct Conn<'a> {
    peer: SocketAddr,
    cfg: &'a ForwardConfig,
    sink: &'a Arc<dyn ForwardSink>,
    stats: &'a ForwardStats,
    inflight: FuturesUnordered<BoxFuture<'static, Done>>,
    inflight_bytes: usize,
}

impl Conn<'_> {
    fn room(&self) -> bool {
        self.inflight.len() < self.cfg.max_inflight_frames
            && self.inflight_bytes < self.cfg.max_inflight_bytes
    }

    /// Returns the result and whether it ended for shutdown.
    async fn run<S, F>(&mut self, stream: S, shutdown: F) -> (Result<(), ForwardError>, bool)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
        F: Future<Output = ()> + Send,
    {
        let mut shutdown = pin!(shutdown);
        let (mut rd, mut wr) = tokio::io::split(stream);
        let cfg = self.cfg;
        let started = Instant::now();
        let mut split = FrameSplitter::new(cfg.max_frame_bytes);
        let mut handshake = cfg.shared_key.as_ref().map(|_| Handshake::new(cfg));
        if let Some(hs) = &handshake {
            if let Err(e) = self.write(&mut wr, &hs.helo()).await {
                return (Err(e), false);
            }
        }
        let mut eof = false;
        let mut stopping = false;
        // A protocol error: stop reading, drain what is in flight, then return it.
        let mut fatal: Option<ForwardError> = None;
        let mut paused = false;
        let mut last_read = started;
        let mut frame_start: Option<Instant> = None;
        loop {
            // Take the whole frames buffered, as far as the in-flight limits allow.
            while fatal.is_none() && !paused && self.room() {
                let frame = match split.next_frame() {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(ScanError::Invalid { offset, reason }) => {
                        fatal = Some(ForwardError::Malformed { offset, reason });
                        break;
                    }
                    Err(ScanError::TooLarge { needed, limit }) => {
                        fatal = Some(ForwardError::Oversized { needed, limit });
                        break;
                    }
                };
                frame_start = None;
                if let Some(hs) = &handshake {
                    match hs.check_ping(&frame, cfg) {
                        Ok(pong) => {
                            if let Err(e) = self.write(&mut wr, &pong).await {
                                return (Err(e), false);
                            }
                            handshake = None;
                            tracing::debug!(peer = %self.peer, "forward: handshake done");
                        }
                        Err((reason, pong)) => {
                            add(&self.stats.auth_failures, 1);
                            let _ = self.write(&mut wr, &pong).await;
                            let _ = wr.shutdown().await;
                            return (Err(ForwardError::Auth(reason)), false);
                        }
                    }
                    continue;
                }
                if let Err(e) = self.frame(frame, &mut wr).await {
                    if matches!(e, ForwardError::BadFrame(_)) {
                        fatal = Some(e);
                        break;
                    }
                    return (Err(e), false);
                }
            }
            if split.buffered() == 0 {
                frame_start = None;
            } else if frame_start.is_none() {
                frame_start = Some(last_read);
            }
            let ending = eof || stopping || fatal.is_some();
            if ending && self.inflight.is_empty() {
                let _ = wr.shutdown().await;
                if let Some(e) = fatal {
                    return (Err(e), false);
                }
                if stopping {
                    return (Ok(()), true);
                }
                if split.buffered() > 0 {
                    return (
                        Err(ForwardError::Truncated {
                            buffered: split.buffered(),
                        }),
                        false,
                    );
                }
                return (Ok(()), false);
            }
            if paused && self.inflight.is_empty() {
                paused = false;
                continue;
            }
            let reading = !ending && !paused && self.room();
            // Timeouts apply while the connection waits for the client only.
            let deadline = if !reading {
                None
            } else if handshake.is_some() {
                Some((started + cfg.frame_timeout, true))
            } else if let Some(fs) = frame_start {
                let idle = last_read + cfg.idle_timeout;
                let slow = fs + cfg.frame_timeout;
                Some(if slow < idle {
                    (slow, true)
                } else {
                    (idle, false)
                })
            } else if self.inflight.is_empty() {
                Some((last_read + cfg.idle_timeout, false))
            } else {
                None
            };
            let far = Instant::now() + Duration::from_secs(86400 * 365);
            if reading {
                split.buffer_mut().reserve(READ_CHUNK);
            }
            let mut into = split.buffer_mut().limit(READ_CHUNK);
            tokio::select! {
                Some(done) = self.inflight.next(), if !self.inflight.is_empty() => {
                    self.inflight_bytes -= done.wire_bytes;
                    match done.result {
                        Ok(()) => {
                            if let Some(chunk) = done.chunk {
                                if let Err(e) = self.ack(&mut wr, &chunk).await {
                                    return (Err(e), false);
                                }
                            }
                        }
                        Err(SinkError::Backpressure(m)) => {
                            add(&self.stats.sink_backpressure, 1);
                            tracing::warn!(peer = %self.peer, chunk = ?done.chunk, "forward: sink backpressure, no ack, pausing the connection: {m}");
                            paused = true;
                        }
                        Err(e @ SinkError::Failed(_)) => {
                            add(&self.stats.sink_failures, 1);
                            return (Err(ForwardError::Sink(e)), false);
                        }
                    }
                }
                r = rd.read_buf(&mut into), if reading => {
                    match r {
                        Ok(0) => eof = true,
                        Ok(n) => {
                            add(&self.stats.bytes, n as u64);
                            last_read = Instant::now();
                        }
                        Err(e) => return (Err(ForwardError::Io(e)), false),
                    }
                }
                _ = sleep_until(deadline.map_or(far, |d| d.0)), if deadline.is_some() => {
                    let slow = deadline.is_some_and(|d| d.1);
                    fatal = Some(if slow {
                        ForwardError::FrameTimeout(cfg.frame_timeout)
                    } else {
                        ForwardError::Idle(cfg.idle_timeout)
                    });
                }
                _ = &mut shutdown, if !stopping => stopping = true,
            }
        }
    }

    // `&mut self` (not `&self`) across awaits: `Conn` is Send, not Sync (its in-flight set).
    async fn write<W: AsyncWrite + Unpin>(
        &mut self,
        wr: &mut W,
        bytes: &[u8],
    ) -> Result<(), ForwardError> {
        let t = self.cfg.idle_timeout;
        match timeout(t, async {
            wr.write_all(bytes).await?;
            wr.flush().await
        })
        .await
        {
            Ok(r) => r.map_err(ForwardError::Io),
            Err(_) => Err(ForwardError::WriteTimeout(t)),
        }
    }

    async fn ack<W: AsyncWrite + Unpin>(
        &mut self,
        wr: &mut W,
        chunk: &str,
    ) -> Result<(), ForwardError> {
        let mut out = Vec::with_capacity(8 + chunk.len());
        // Writing into a Vec cannot fail.
        let _ = rmp::encode::write_map_len(&mut out, 1);
        let _ = rmp::encode::write_str(&mut out, "ack");
        let _ = rmp::encode::write_str(&mut out, chunk);
        self.write(wr, &out).await?;
        add(&self.stats.acks, 1);
        Ok(())
    }

    /// One whole frame after the handshake.
    async fn frame<W: AsyncWrite + Unpin>(
        &mut self,
        bytes: Bytes,
        wr: &mut W,
    ) -> Result<(), ForwardError> {
        let wire_bytes = bytes.len();
        let raw = match frame::parse(&bytes) {
            Ok(Parsed::Keepalive) => return Ok(()),
            Ok(Parsed::Events(raw)) => raw,
            Err(reason) => return Err(self.reject(reason, None)),
        };
        drop(bytes);
        let tag = raw.tag.clone();
        let raw = match self.finish(raw).await {
            Ok(raw) => raw,
            Err(reason) => return Err(self.reject(reason, Some(&tag))),
        };
        let events = raw.events.unwrap_or(0);
        add(&self.stats.frames, 1);
        if events == 0 {
            // Nothing to make durable.
            if let Some(chunk) = &raw.chunk {
                self.ack(wr, chunk).await?;
            }
            return Ok(());
        }
        add(&self.stats.events, events as u64);
        let Raw {
            tag,
            mode,
            entries,
            chunk,
            ..
        } = raw;
        let fut = self.sink.append(Frame {
            tag,
            entries,
            events,
            chunk: chunk.clone(),
            wire_bytes,
            mode,
        });
        self.inflight_bytes += wire_bytes;
        self.inflight.push(
            async move {
                Done {
                    chunk,
                    wire_bytes,
                    result: fut.await,
                }
            }
            .boxed(),
        );
        Ok(())
    }

    /// Decompresses and counts the packed modes, off the async threads when large.
    async fn finish(&mut self, raw: Raw) -> Result<Raw, String> {
        let limit = self.cfg.max_frame_bytes;
        let heavy = raw.events.is_none() && raw.entries.len() >= BLOCKING_THRESHOLD;
        if !heavy {
            return raw.finish(limit);
        }
        match tokio::task::spawn_blocking(move || raw.finish(limit)).await {
            Ok(r) => r,
            Err(e) => Err(format!("decoding task failed: {e}")),
        }
    }

    fn reject(&self, reason: String, tag: Option<&str>) -> ForwardError {
        add(&self.stats.rejected_frames, 1);
        tracing::warn!(peer = %self.peer, tag = tag.unwrap_or(""), "forward: frame rejected: {reason}");
        ForwardError::BadFrame(reason)
    }
}
