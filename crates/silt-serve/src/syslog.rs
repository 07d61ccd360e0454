//! The `--syslog` front end: RFC 3164 and 5424 messages over UDP, and over TCP with both RFC 6587
//! framings (octet counting `LEN SP MSG`, and one message per line), into the write-ahead log as
//! `syslog`-format entries of one table (`syslog.messages` unless the address names another:
//! `--syslog tcp://127.0.0.1:6514=net.syslog`).
//!
//! syslog has no acknowledgement, so durability is what flow control gives: a TCP connection is
//! not read further until what was read is in the log (the sender's buffer fills and it waits);
//! UDP datagrams that arrive while the log is full are counted as dropped by the kernel's socket
//! buffer, as with any UDP collector. Messages received together (up to 1 MiB or 5 ms) share one
//! log entry, so a busy sender does not cost an fsync per message. A message's own newlines
//! (possible with octet counting) become spaces, because the decoder reads one message per line.
//! A frame that is not octet counting's `digits SP` or is longer than 1 MiB closes the TCP
//! connection with a log line; other connections go on.
//!
//! TLS is not built in yet (terminate it in front).
//!
//! Touches the sockets it is given and the log.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::wal::Entry;
use crate::Shared;

/// Longest message accepted.
const MAX_MESSAGE: usize = 1 << 20;

/// One `--syslog udp://HOST:PORT[=TABLE]`, `tcp://...` or `tls://...` (TCP with TLS, RFC 5425;
/// needs `--tls-cert` and `--tls-key`).
#[derive(Debug, Clone)]
pub struct SyslogSpec {
    pub tcp: bool,
    pub tls: bool,
    pub addr: SocketAddr,
    pub table: String,
}

impl SyslogSpec {
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let (proto, rest) = s.split_once("://").ok_or_else(|| {
            anyhow::anyhow!(
                "--syslog {s:?}: use udp://HOST:PORT, tcp://HOST:PORT or tls://HOST:PORT[=TABLE]"
            )
        })?;
        let (tcp, tls) = match proto {
            "tcp" => (true, false),
            "tls" => (true, true),
            "udp" => (false, false),
            other => anyhow::bail!("--syslog {s:?}: {other} is not udp, tcp or tls"),
        };
        let (addr, table) = rest.split_once('=').unwrap_or((rest, "syslog.messages"));
        let addr = addr
            .parse()
            .map_err(|_| anyhow::anyhow!("--syslog {s:?}: {addr:?} is not HOST:PORT"))?;
        anyhow::ensure!(
            silt_core::TableName::parse(table).is_some(),
            "--syslog {s:?}: table {table:?} must be module.type"
        );
        Ok(Self {
            tcp,
            tls,
            addr,
            table: table.to_string(),
        })
    }
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct SyslogStats {
    pub messages: AtomicU64,
    pub connections: AtomicU64,
    pub bad_frames: AtomicU64,
}

async fn append(shared: &Shared, table: &str, source: &str, body: Vec<u8>) {
    let entry = Entry {
        table: Some(table.to_string()),
        format: "syslog".into(),
        source: source.to_string(),
        chunk: None,
        body,
        kafka: None,
    };
    let mut refusals = crate::wal::Refusals::default();
    let source = format!("syslog {source}");
    while let Err(e) = shared.wal.append(entry.clone()).await {
        refusals.refused(&source, &e);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    refusals.taken(&source);
}

fn push_message(out: &mut Vec<u8>, msg: &[u8]) {
    let msg = msg.strip_suffix(b"\n").unwrap_or(msg);
    let msg = msg.strip_suffix(b"\r").unwrap_or(msg);
    out.extend(msg.iter().map(|&b| if b == b'\n' { b' ' } else { b }));
    out.push(b'\n');
}

/// Serves UDP until `stop` turns true.
pub async fn serve_udp(
    socket: tokio::net::UdpSocket,
    table: String,
    shared: Arc<Shared>,
    stats: Arc<SyslogStats>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 65536];
    loop {
        let first = tokio::select! {
            r = socket.recv_from(&mut buf) => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let Ok((n, peer)) = first else { continue };
        // What else arrived meanwhile shares an entry with what its sender sent: an entry's
        // source (what a reject names) is the sender, as for TCP.
        let mut bodies: Vec<(std::net::SocketAddr, Vec<u8>)> = vec![(peer, Vec::new())];
        let mut index: hashbrown::HashMap<std::net::SocketAddr, usize> = [(peer, 0)].into();
        push_message(&mut bodies[0].1, &buf[..n]);
        let mut total = bodies[0].1.len();
        let mut count = 1;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(5);
        while total < MAX_MESSAGE {
            match tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await {
                Ok(Ok((n, peer))) => {
                    let i = *index.entry(peer).or_insert_with(|| {
                        bodies.push((peer, Vec::new()));
                        bodies.len() - 1
                    });
                    let before = bodies[i].1.len();
                    push_message(&mut bodies[i].1, &buf[..n]);
                    total += bodies[i].1.len() - before;
                    count += 1;
                }
                _ => break,
            }
        }
        stats.messages.fetch_add(count, Ordering::Relaxed);
        for (peer, body) in bodies {
            append(&shared, &table, &format!("syslog udp {peer}"), body).await;
        }
    }
}

/// Serves TCP (with TLS when `tls` is given) until `stop` turns true (connections in progress
/// finish what they read).
pub async fn serve_tcp(
    listener: tokio::net::TcpListener,
    table: String,
    shared: Arc<Shared>,
    stats: Arc<SyslogStats>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        let Ok((stream, peer)) = accepted else {
            continue;
        };
        stats.connections.fetch_add(1, Ordering::Relaxed);
        let (table, shared, stats, stop, tls) = (
            table.clone(),
            shared.clone(),
            stats.clone(),
            stop.clone(),
            tls.clone(),
        );
        conns.spawn(async move {
            let kind = if tls.is_some() { "tls" } else { "tcp" };
            let done = match tls {
                None => connection(stream, peer, "tcp", &table, &shared, &stats, stop).await,
                Some(acceptor) => {
                    match tokio::time::timeout(crate::tls::HANDSHAKE, acceptor.accept(stream)).await
                    {
                        Ok(Ok(s)) => {
                            connection(s, peer, "tls", &table, &shared, &stats, stop).await
                        }
                        Ok(Err(e)) => Err(format!("TLS handshake failed: {e}")),
                        Err(_) => Err(format!(
                            "no TLS handshake within {:?}",
                            crate::tls::HANDSHAKE
                        )),
                    }
                }
            };
            if let Err(e) = done {
                stats.bad_frames.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("syslog {kind} {peer}: {e}; connection closed");
            }
        });
    }
    while conns.join_next().await.is_some() {}
}

/// Cuts complete messages off the front of `buf` into `out`; `Err` on a bad octet count.
fn frames(buf: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<usize, String> {
    let mut at = 0;
    let mut n = 0;
    loop {
        let rest = &buf[at..];
        let Some(&first) = rest.first() else { break };
        if first.is_ascii_digit() {
            // Octet counting: LEN SP MSG.
            let Some(sp) = rest.iter().position(|&b| b == b' ') else {
                if rest.len() > 10 {
                    return Err("an octet count longer than 10 digits".into());
                }
                break;
            };
            let len: usize = std::str::from_utf8(&rest[..sp])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| {
                    "a frame that starts with digits but is not `LEN SP MSG`".to_string()
                })?;
            if len > MAX_MESSAGE {
                return Err(format!("a message of {len} bytes (at most {MAX_MESSAGE})"));
            }
            if rest.len() < sp + 1 + len {
                break;
            }
            push_message(out, &rest[sp + 1..sp + 1 + len]);
            at += sp + 1 + len;
        } else {
            // Newline framing.
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                if rest.len() > MAX_MESSAGE {
                    return Err(format!("a line longer than {MAX_MESSAGE} bytes"));
                }
                break;
            };
            if nl > 0 {
                push_message(out, &rest[..nl]);
                n += 1;
            }
            at += nl + 1;
            continue;
        }
        n += 1;
    }
    buf.drain(..at);
    Ok(n)
}

async fn connection<S: tokio::io::AsyncRead + Unpin>(
    mut stream: S,
    peer: SocketAddr,
    transport: &str,
    table: &str,
    shared: &Shared,
    stats: &SyslogStats,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), String> {
    let source = format!("syslog {transport} {peer}");
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        let n = tokio::select! {
            r = stream.read(&mut chunk) => match r {
                Ok(n) => n,
                // A TLS client gone without close_notify (rsyslog at its own shutdown): the
                // end of its stream, as a plain TCP close is; a message cut short is still
                // reported below.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
                Err(e) => return Err(e.to_string()),
            },
            _ = stop.wait_for(|s| *s) => 0,
        };
        if n == 0 {
            // The end: a last line without its newline is still a message.
            if !buf.is_empty() && !buf[0].is_ascii_digit() {
                buf.push(b'\n');
            }
            let mut out = Vec::new();
            let m = frames(&mut buf, &mut out)?;
            if m > 0 {
                stats.messages.fetch_add(m as u64, Ordering::Relaxed);
                append(shared, table, &source, out).await;
            }
            if !buf.is_empty() {
                return Err(format!(
                    "{} bytes of an incomplete message at the end",
                    buf.len()
                ));
            }
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        let m = frames(&mut buf, &mut out)?;
        if m > 0 {
            stats.messages.fetch_add(m as u64, Ordering::Relaxed);
            // Not read further until durable: TCP flow control pushes back on the sender.
            append(shared, table, &source, out).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_framings_and_bad_counts() {
        let mut buf = b"11 <13>hello\nx12 <13>a b".to_vec();
        let mut out = Vec::new();
        // "11 <13>hello\nx" is one counted frame whose message holds a newline.
        assert_eq!(frames(&mut buf, &mut out).unwrap(), 1);
        assert_eq!(out, b"<13>hello x\n");
        assert_eq!(buf, b"12 <13>a b");
        let mut buf = b"<13>one\n<13>two\r\n<13>thr".to_vec();
        let mut out = Vec::new();
        assert_eq!(frames(&mut buf, &mut out).unwrap(), 2);
        assert_eq!(out, b"<13>one\n<13>two\n");
        assert_eq!(buf, b"<13>thr");
        let mut bad = b"12x <13>a\n".to_vec();
        assert!(frames(&mut bad, &mut Vec::new()).is_err());
        let mut huge = b"99999999 x".to_vec();
        assert!(frames(&mut huge, &mut Vec::new()).is_err());
        assert!(
            SyslogSpec::parse("tcp://127.0.0.1:6514=net.syslog")
                .unwrap()
                .tcp
        );
        assert_eq!(
            SyslogSpec::parse("udp://127.0.0.1:5514").unwrap().table,
            "syslog.messages"
        );
        assert!(SyslogSpec::parse("127.0.0.1:5514").is_err());
        let t = SyslogSpec::parse("tls://127.0.0.1:6514").unwrap();
        assert!(t.tcp && t.tls);
        assert!(!SyslogSpec::parse("tcp://127.0.0.1:6514").unwrap().tls);
        assert!(SyslogSpec::parse("ssl://127.0.0.1:6514").is_err());
    }
}
