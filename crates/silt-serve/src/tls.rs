//! TLS for the TCP listeners that take it (`--syslog tls://HOST:PORT`, RFC 5425): a rustls
//! server configuration from a PEM certificate chain and private key (`--tls-cert`,
//! `--tls-key`), TLS 1.2 and 1.3, no client certificates. The handshake runs in the connection's
//! own task with a time limit, so a client that never finishes it holds nothing but its socket.
//!
//! Touches the two files it is given, once, at start.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls;

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
    let certs = certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        anyhow::anyhow!(
            "--tls-key {}: no PEM private key read ({e}); give the key of --tls-cert, PKCS#8, PKCS#1 or SEC1",
            files.key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
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
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
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
