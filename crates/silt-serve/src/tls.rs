//! TLS for the TCP listeners that take it (`--syslog tls://HOST:PORT`, RFC 5425; `--forward
//! tls://`; `--http https://`; `--flight grpc+tls://`): a rustls server configuration from a PEM
//! certificate chain and private key (`--tls-cert`, `--tls-key`), TLS 1.2 and 1.3, no client
//! certificates. The handshake runs in the connection's own task with a time limit, so a client
//! that never finishes it holds nothing but its socket.
//!
//! [`TlsListener`] is the HTTP API's and Flight SQL's listener: hyper (through axum) and tonic
//! take already-encrypted streams from it, so their own TLS features are not needed.
//!
//! Touches the two files it is given, once, at start, and the sockets it accepts.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;

/// How long a client has to complete the handshake.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// `--tls-cert` and `--tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// The acceptor for `files`; errors say which file is wrong and why.
pub fn acceptor(files: &TlsFiles) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    acceptor_for(files, &[])
}

/// The acceptor for `files` offering the application protocols `alpn` (`h2` for gRPC, whose
/// clients insist on it; `http/1.1` for the HTTP API).
pub fn acceptor_for(files: &TlsFiles, alpn: &[&[u8]]) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    let certs = certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        anyhow::anyhow!(
            "--tls-key {}: no PEM private key read ({e}); give the key of --tls-cert, PKCS#8, PKCS#1 or SEC1",
            files.key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            anyhow::anyhow!(
                "--tls-cert {} with --tls-key {}: {e} (is the key the certificate's?)",
                files.cert.display(),
                files.key.display()
            )
        })?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// A TCP listener whose connections are handed on once their TLS handshake is done. Each
/// accepted socket's handshake runs in a task of its own, limited to [`HANDSHAKE`], so a client
/// that stalls it (or speaks plain text) delays nobody else; one that fails is logged, counted in
/// `failures` and closed. Dropping the listener stops accepting.
pub struct TlsListener {
    rx: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting on `listener`; `what` names the listener in log lines (`--http`).
    pub fn new(
        listener: TcpListener,
        acceptor: tokio_rustls::TlsAcceptor,
        what: &'static str,
        failures: Arc<AtomicU64>,
    ) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        // Connections handshaken but not yet taken by the server: a few, as a backlog.
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let accepting = tokio::spawn(async move {
            loop {
                let (sock, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors, typically: pause rather than spin.
                        tracing::warn!("{what}: cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // Small answers (metadata, errors) should not wait for Nagle.
                let _ = sock.set_nodelay(true);
                let (acceptor, tx, failures) = (acceptor.clone(), tx.clone(), failures.clone());
                tokio::spawn(async move {
                    let why = match tokio::time::timeout(HANDSHAKE, acceptor.accept(sock)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                            return;
                        }
                        Ok(Err(e)) => format!("TLS handshake failed: {e}"),
                        Err(_) => format!("no TLS handshake within {HANDSHAKE:?}"),
                    };
                    failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("{what}: connection from {peer} closed: {why}");
                });
            }
        });
        Ok(TlsListener {
            rx,
            local,
            accepting,
        })
    }

    /// The next connection whose handshake is done (waits for ever once accepting stopped).
    pub async fn next(&mut self) -> (TlsStream<TcpStream>, SocketAddr) {
        match self.rx.recv().await {
            Some(c) => c,
            None => std::future::pending().await,
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.next().await
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

fn certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow::anyhow!("--tls-cert {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--tls-cert {}: {e}", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "--tls-cert {}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)",
        path.display()
    );
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_say_which_and_why() {
        let d = tempfile::tempdir().unwrap();
        let (cert, key) = (d.path().join("c.pem"), d.path().join("k.pem"));
        std::fs::write(&cert, "not a certificate").unwrap();
        std::fs::write(&key, "not a key").unwrap();
        let e = acceptor(&TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        })
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("--tls-cert") && e.contains("no PEM certificate"),
            "{e}"
        );
        let e = acceptor(&TlsFiles {
            cert: d.path().join("missing.pem"),
            key,
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("missing.pem"), "{e}");
    }
}
