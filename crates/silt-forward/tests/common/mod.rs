//! Shared by the integration tests: a sink that collects frames (optionally held until
//! released, or answering errors), a server on 127.0.0.1:0, and MessagePack helpers.
//! Touches only loopback sockets.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use rmpv::Value as V;
use silt_forward::{serve, ForwardConfig, ForwardSink, ForwardStats, Frame, SinkError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};

/// What the collecting sink answers.
#[derive(Clone, Debug)]
pub enum Answer {
    Ok,
    Backpressure,
    Failed,
}

pub struct CollectSink {
    pub frames: Mutex<Vec<Frame>>,
    /// When set, each append waits for a permit (tests release them one by one).
    pub gate: Option<Arc<Semaphore>>,
    /// Answers for the next appends, in order; `Ok` once they run out.
    pub answers: Mutex<Vec<Answer>>,
}

impl CollectSink {
    pub fn new() -> Arc<Self> {
        Arc::new(CollectSink {
            frames: Mutex::new(Vec::new()),
            gate: None,
            answers: Mutex::new(Vec::new()),
        })
    }

    pub fn gated(gate: Arc<Semaphore>) -> Arc<Self> {
        Arc::new(CollectSink {
            frames: Mutex::new(Vec::new()),
            gate: Some(gate),
            answers: Mutex::new(Vec::new()),
        })
    }

    pub fn answering(answers: Vec<Answer>) -> Arc<Self> {
        let s = CollectSink::new();
        *s.answers.lock().unwrap() = answers.into_iter().rev().collect();
        s
    }

    /// Every event received so far: `(tag, time, record)`.
    pub fn events(&self) -> Vec<(String, V, V)> {
        let frames = self.frames.lock().unwrap();
        let mut out = Vec::new();
        for f in frames.iter() {
            for e in decode_entries(&f.entries) {
                let V::Array(mut pair) = e else {
                    panic!("entry is not an array: {e:?}")
                };
                assert_eq!(pair.len(), 2);
                let record = pair.pop().unwrap();
                let time = pair.pop().unwrap();
                out.push((f.tag.clone(), time, record));
            }
        }
        out
    }

    pub fn event_count(&self) -> usize {
        self.frames.lock().unwrap().iter().map(|f| f.events).sum()
    }
}

impl ForwardSink for CollectSink {
    fn append(&self, frame: Frame) -> BoxFuture<'static, Result<(), SinkError>> {
        let answer = self.answers.lock().unwrap().pop().unwrap_or(Answer::Ok);
        if matches!(answer, Answer::Ok) {
            assert_eq!(decode_entries(&frame.entries).len(), frame.events);
            self.frames.lock().unwrap().push(frame);
        }
        let gate = self.gate.clone();
        async move {
            if let Some(g) = gate {
                g.acquire().await.unwrap().forget();
            }
            match answer {
                Answer::Ok => Ok(()),
                Answer::Backpressure => Err(SinkError::Backpressure("full".into())),
                Answer::Failed => Err(SinkError::Failed("broken".into())),
            }
        }
        .boxed()
    }
}

pub fn decode_entries(mut b: &[u8]) -> Vec<V> {
    let mut out = Vec::new();
    while !b.is_empty() {
        out.push(rmpv::decode::read_value(&mut b).expect("entries decode"));
    }
    out
}

pub fn enc(v: &V) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, v).unwrap();
    out
}

pub fn event_time(s: u32, ns: u32) -> V {
    let mut b = s.to_be_bytes().to_vec();
    b.extend(ns.to_be_bytes());
    V::Ext(0, b)
}

pub fn opt(pairs: &[(&str, V)]) -> V {
    V::Map(
        pairs
            .iter()
            .map(|(k, v)| (V::from(*k), v.clone()))
            .collect(),
    )
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub struct Server {
    pub addr: SocketAddr,
    pub stats: Arc<ForwardStats>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    pub async fn start(cfg: ForwardConfig, sink: Arc<dyn ForwardSink>) -> Server {
        Server::start_tls(cfg, sink, None).await
    }

    /// [`Server::start`], with TLS when `tls` is given.
    pub async fn start_tls(
        cfg: ForwardConfig,
        sink: Arc<dyn ForwardSink>,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(ForwardStats::new());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(
            listener,
            Arc::new(cfg),
            sink,
            stats.clone(),
            tls,
            async move {
                let _ = rx.await;
            },
        ));
        Server {
            addr,
            stats,
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(20), self.task.take().unwrap())
            .await
            .expect("serve returns after shutdown")
            .unwrap()
            .unwrap();
    }
}

/// Reads one MessagePack value from the stream (a reply), within `wait`.
pub async fn read_reply(s: &mut TcpStream, wait: Duration) -> Option<V> {
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if !buf.is_empty() {
            let mut r = &buf[..];
            if let Ok(v) = rmpv::decode::read_value(&mut r) {
                return Some(v);
            }
        }
        let mut tmp = [0u8; 4096];
        match tokio::time::timeout_at(deadline, s.read(&mut tmp)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
            Ok(Ok(n)) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

/// True when the server closed the connection within `wait` (reads EOF or reset).
pub async fn closed(s: &mut TcpStream, wait: Duration) -> bool {
    let mut tmp = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut tmp)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

pub fn ack_of(v: &V) -> Option<String> {
    let m = v.as_map()?;
    let (k, val) = m.first()?;
    (k.as_str()? == "ack").then(|| val.as_str().map(str::to_string))?
}

pub async fn send(s: &mut TcpStream, v: &V) {
    s.write_all(&enc(v)).await.unwrap();
}

/// Polls `cond` until true (or fails the test after 10 s).
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// A record like nginx's access log, as `silt gen` makes them.
pub fn nginx_record(i: u64) -> V {
    V::Map(vec![
        (
            V::from("remote_addr"),
            V::from(format!("10.0.{}.{}", i % 256, i % 200)),
        ),
        (V::from("method"), V::from("GET")),
        (V::from("path"), V::from(format!("/api/v1/items/{i}"))),
        (V::from("status"), V::from(200 + (i % 5))),
        (V::from("bytes"), V::from(1000 + i)),
        (V::from("referer"), V::from("-")),
        (
            V::from("user_agent"),
            V::from("Mozilla/5.0 (X11; Linux x86_64)"),
        ),
        (V::from("request_time"), V::F64(0.001 * (i % 100) as f64)),
    ])
}

/// Reads `n` acks (however the replies are cut into reads), sorted.
pub async fn read_acks(s: &mut TcpStream, n: usize, wait: Duration) -> Vec<String> {
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let mut r = &buf[..];
        let mut acks = Vec::new();
        while let Ok(v) = rmpv::decode::read_value(&mut r) {
            acks.push(ack_of(&v).unwrap_or_else(|| panic!("not an ack: {v:?}")));
        }
        if acks.len() >= n {
            acks.sort();
            return acks;
        }
        let mut tmp = [0u8; 4096];
        match tokio::time::timeout_at(deadline, s.read(&mut tmp)).await {
            Ok(Ok(0)) | Ok(Err(_)) => panic!("closed after {} of {n} acks", acks.len()),
            Err(_) => panic!("timed out after {} of {n} acks", acks.len()),
            Ok(Ok(k)) => buf.extend_from_slice(&tmp[..k]),
        }
    }
}
