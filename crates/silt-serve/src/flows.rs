//! The `--sflow udp://HOST:PORT` and `--netflow udp://HOST:PORT` front ends: flow-export
//! datagrams received on a UDP socket go to the write-ahead log, those that arrive within 5 ms of
//! each other (up to 1 MiB) sharing one entry, in `silt_flowexport::datagrams`' framing with
//! their arrival time and exporter. The ingest thread decodes them with a `Collector` into
//! `sflow.sample` / `sflow.counter` / `netflow.flow`; NetFlow v9/IPFIX templates are kept for the
//! server's lifetime (`silt_flowexport::CaptureOptions` in the server's format options).
//!
//! UDP has no acknowledgement: as with any collector, datagrams the socket drops while the log is
//! behind are lost (the kernel's receive buffer is the only queue); what reached the log is never
//! lost. Touches its socket and the log.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use silt_core::format::FormatSpec;
use silt_flowexport::{datagrams, NETFLOW_DATAGRAMS_FORMAT, SFLOW_DATAGRAMS_FORMAT};

use crate::wal::Entry;
use crate::Shared;

/// Entries larger than this are cut (a datagram is at most 64 KiB).
const MAX_ENTRY: usize = 1 << 20;

/// A format of the registry, or one of the datagram formats only the server writes.
pub fn format(name: &str) -> anyhow::Result<&'static FormatSpec> {
    match name {
        n if n == SFLOW_DATAGRAMS_FORMAT.name => Ok(&SFLOW_DATAGRAMS_FORMAT),
        n if n == NETFLOW_DATAGRAMS_FORMAT.name => Ok(&NETFLOW_DATAGRAMS_FORMAT),
        n => silt_ingest::registry::require(n),
    }
}

/// Which protocol a listener takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowProtocol {
    Sflow,
    Netflow,
}

impl FlowProtocol {
    fn flag(self) -> &'static str {
        match self {
            FlowProtocol::Sflow => "--sflow",
            FlowProtocol::Netflow => "--netflow",
        }
    }

    fn format(self) -> &'static str {
        match self {
            FlowProtocol::Sflow => SFLOW_DATAGRAMS_FORMAT.name,
            FlowProtocol::Netflow => NETFLOW_DATAGRAMS_FORMAT.name,
        }
    }
}

/// One `--sflow` / `--netflow` listener.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    pub protocol: FlowProtocol,
    pub addr: SocketAddr,
}

impl FlowSpec {
    /// `udp://HOST:PORT` (or `HOST:PORT`).
    pub fn parse(protocol: FlowProtocol, s: &str) -> anyhow::Result<Self> {
        let rest = s.strip_prefix("udp://").unwrap_or(s);
        let addr = rest.parse().map_err(|_| {
            anyhow::anyhow!(
                "{} {s:?}: give udp://HOST:PORT, e.g. udp://127.0.0.1:{}",
                protocol.flag(),
                if protocol == FlowProtocol::Sflow {
                    6343
                } else {
                    2055
                }
            )
        })?;
        Ok(Self { protocol, addr })
    }
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct FlowStats {
    pub datagrams: AtomicU64,
}

/// Receives until `stop` turns true.
pub async fn serve_udp(
    socket: tokio::net::UdpSocket,
    protocol: FlowProtocol,
    shared: Arc<Shared>,
    stats: Arc<FlowStats>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let local = socket.local_addr().ok();
    let port = local.map_or(0, |a| a.port());
    let source = format!(
        "{} udp {}",
        protocol.flag().trim_start_matches("--"),
        local.map(|a| a.to_string()).unwrap_or_default()
    );
    let now_us = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64)
    };
    let mut buf = vec![0u8; 65536];
    loop {
        let first = tokio::select! {
            r = socket.recv_from(&mut buf) => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let Ok((n, from)) = first else { continue };
        let mut body = Vec::new();
        datagrams::encode(&mut body, now_us(), from, port, &buf[..n]);
        let mut count = 1;
        // What else arrived meanwhile shares the entry.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(5);
        while body.len() < MAX_ENTRY {
            match tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await {
                Ok(Ok((n, from))) => {
                    datagrams::encode(&mut body, now_us(), from, port, &buf[..n]);
                    count += 1;
                }
                _ => break,
            }
        }
        stats.datagrams.fetch_add(count, Ordering::Relaxed);
        let entry = Entry {
            table: None,
            format: protocol.format().into(),
            source: source.clone(),
            chunk: None,
            body,
            kafka: None,
        };
        let mut refusals = crate::wal::Refusals::default();
        while let Err(e) = shared.wal.append(entry.clone()).await {
            refusals.refused(&source, &e);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        refusals.taken(&source);
    }
}
