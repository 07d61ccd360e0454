//! The listeners: [`serve`] accepts TCP connections and serves each in its own task until
//! shutdown (then lets them finish their appends and acks for `shutdown_grace`, and drops the
//! rest); [`serve_heartbeat`] answers UDP heartbeats as in_forward does (one `\0` byte back
//! to the sender of each datagram; fluentd's out_forward uses them to tell a live server).
//!
//! Touches the listener and socket it is given; spawns tasks on the current tokio runtime.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::conn::serve_connection_until;
use crate::stats::add;
use crate::{ForwardConfig, ForwardSink, ForwardStats};

/// How long a client has to complete a TLS handshake.
pub const TLS_HANDSHAKE: Duration = Duration::from_secs(10);

/// Accepts clients on `listener` (one task each, up to `max_connections`) until `shutdown`
/// resolves. With `tls`, each connection first completes a TLS handshake (within
/// [`TLS_HANDSHAKE`], in its own task, so a client that never finishes it holds only its
/// socket); one that fails is counted (`tls_failures`), logged and closed. Accept errors (out of
/// file descriptors and the like) are logged and retried, never returned; the only error is a
/// configuration that does not validate.
pub async fn serve(
    listener: TcpListener,
    cfg: Arc<ForwardConfig>,
    sink: Arc<dyn ForwardSink>,
    stats: Arc<ForwardStats>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    cfg.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut shutdown = pin!(shutdown);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, auth = cfg.shared_key.is_some(), tls = tls.is_some(), "forward: listening");
    }
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((sock, peer)) => {
                    if tasks.len() >= cfg.max_connections {
                        add(&stats.connections, 1);
                        add(&stats.rejected_connections, 1);
                        tracing::warn!(peer = %peer, limit = cfg.max_connections, "forward: too many connections, closing the new one");
                        drop(sock);
                        continue;
                    }
                    let _ = sock.set_nodelay(true);
                    let (cfg, sink, stats, tls) = (cfg.clone(), sink.clone(), stats.clone(), tls.clone());
                    let mut stop = stop_rx.clone();
                    tasks.spawn(async move {
                        let stopped = async move {
                            let _ = stop.wait_for(|s| *s).await;
                        };
                        // Counted and logged inside.
                        let Some(acceptor) = tls else {
                            let _ = serve_connection_until(sock, peer, cfg, sink, stats, stopped).await;
                            return;
                        };
                        let why = match tokio::time::timeout(TLS_HANDSHAKE, acceptor.accept(sock)).await {
                            Ok(Ok(s)) => {
                                let _ = serve_connection_until(s, peer, cfg, sink, stats, stopped).await;
                                return;
                            }
                            Ok(Err(e)) => format!("TLS handshake failed: {e}"),
                            Err(_) => format!("no TLS handshake within {TLS_HANDSHAKE:?}"),
                        };
                        add(&stats.connections, 1);
                        add(&stats.tls_failures, 1);
                        tracing::warn!(peer = %peer, "forward: {why}; connection closed");
                    });
                }
                Err(e) => {
                    tracing::warn!("forward: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(cfg.shutdown_grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = tasks.len(),
            "forward: connections still busy after the shutdown grace, dropping them"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    Ok(())
}

/// Answers each datagram with one `\0` byte to its sender until `shutdown` resolves.
pub async fn serve_heartbeat(
    socket: UdpSocket,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_heartbeat_counted(socket, shutdown, None).await
}

/// [`serve_heartbeat`] that counts the answers in `stats.heartbeats`.
pub async fn serve_heartbeat_counted(
    socket: UdpSocket,
    shutdown: impl Future<Output = ()>,
    stats: Option<Arc<ForwardStats>>,
) -> io::Result<()> {
    let mut shutdown = pin!(shutdown);
    let mut buf = [0u8; 128];
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = socket.recv_from(&mut buf) => match r {
                Ok((_, from)) => match socket.send_to(b"\0", from).await {
                    Ok(_) => {
                        if let Some(s) = &stats {
                            add(&s.heartbeats, 1);
                        }
                    }
                    Err(e) => tracing::debug!(peer = %from, "forward: heartbeat answer failed: {e}"),
                },
                Err(e) => {
                    // ICMP errors from earlier answers surface here; not fatal.
                    tracing::debug!("forward: heartbeat receive failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
}
