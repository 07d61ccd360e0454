//! The listener with TLS (`serve` given an acceptor): a TLS client's frames are acked and
//! arrive; a client that speaks plain TCP to it, or never finishes the handshake, is counted
//! (`tls_failures`) and closed while TLS clients go on. The certificate is made by `openssl req`
//! (scripts/apt-deps.sh installs it). Touches a temporary directory and loopback sockets.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rmpv::Value as V;
use silt_forward::ForwardConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

const WAIT: Duration = Duration::from_secs(10);

/// A self-signed certificate for localhost and 127.0.0.1: (cert, key) PEM files in `dir`, or
/// `None` (outside CI) when openssl is missing.
fn certificate(dir: &std::path::Path) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        // A server certificate, not a CA: rustls refuses a CA as the end entity.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output();
    match out {
        Ok(o) if o.status.success() => Some((cert, key)),
        other => {
            let why = format!(
                "openssl req failed or is missing ({other:?}); scripts/apt-deps.sh installs it"
            );
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{why}");
            }
            eprintln!("SKIP: {why}");
            None
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn acceptor(cert: &std::path::Path, key: &std::path::Path) -> tokio_rustls::TlsAcceptor {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

fn connector(cert: &std::path::Path) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(cert).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One MessagePack value read from `s` within [`WAIT`]; `None` when it closes first.
async fn reply<S: AsyncRead + Unpin>(s: &mut S) -> Option<V> {
    let mut buf = Vec::new();
    loop {
        if let Ok(v) = rmpv::decode::read_value(&mut &buf[..]) {
            return Some(v);
        }
        let mut tmp = [0u8; 4096];
        match tokio::time::timeout(WAIT, s.read(&mut tmp)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
            Ok(Ok(n)) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

fn message(tag: &str, n: i64, chunk: &str) -> Vec<u8> {
    enc(&V::Array(vec![
        V::from(tag),
        V::from(1_700_000_000 + n),
        V::Map(vec![(V::from("n"), V::from(n))]),
        V::Map(vec![(V::from("chunk"), V::from(chunk))]),
    ]))
}

#[tokio::test]
async fn tls_clients_are_acked_and_plain_ones_are_closed_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let Some((cert, key)) = certificate(dir.path()) else {
        return;
    };
    let sink = CollectSink::new();
    let server = Server::start_tls(
        ForwardConfig::default(),
        sink.clone(),
        Some(acceptor(&cert, &key)),
    )
    .await;
    let tls = connector(&cert);
    let name = ServerName::try_from("localhost").unwrap();

    let mut a = tls
        .connect(name.clone(), TcpStream::connect(server.addr).await.unwrap())
        .await
        .expect("TLS handshake with the server");
    a.write_all(&message("tls.a", 1, "c1")).await.unwrap();
    let ack = reply(&mut a).await.expect("an ack over TLS");
    assert_eq!(ack, V::Map(vec![(V::from("ack"), V::from("c1"))]));

    // Plain TCP to the TLS listener: the handshake fails, the connection is closed, counted.
    let mut plain = TcpStream::connect(server.addr).await.unwrap();
    plain.write_all(&message("plain", 2, "c2")).await.unwrap();
    // At most a TLS alert record (content type 21) comes back, then the end of the stream.
    let mut got = Vec::new();
    tokio::time::timeout(WAIT, plain.read_to_end(&mut got))
        .await
        .expect("the server closes a plain connection")
        .ok();
    assert!(
        got.is_empty() || got[0] == 0x15,
        "a plain client got {got:?}, not a TLS alert"
    );

    // The TLS client goes on; a second one too.
    a.write_all(&message("tls.a", 3, "c3")).await.unwrap();
    assert!(reply(&mut a).await.is_some());
    let mut b = tls
        .connect(name, TcpStream::connect(server.addr).await.unwrap())
        .await
        .unwrap();
    b.write_all(&message("tls.b", 4, "c4")).await.unwrap();
    assert!(reply(&mut b).await.is_some());

    let tags: Vec<String> = sink.events().into_iter().map(|(t, _, _)| t).collect();
    assert_eq!(tags, vec!["tls.a", "tls.a", "tls.b"]);
    let s = server.stats.snapshot();
    assert_eq!(s.tls_failures, 1);
    assert_eq!(s.acks, 3);
    drop((a, b));
    server.stop().await;
}
