//! Throughput of the PackedForward path over loopback TCP: nginx-like records, 1000 per frame,
//! each frame acked by a sink that resolves at once, client and server on one 2-worker
//! runtime. Ignored by default (a measurement, not a check); run it with
//! `cargo test --release --test throughput -- --ignored --nocapture`. Touches loopback only.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::future::BoxFuture;
use futures::FutureExt;
use rmpv::Value as V;
use silt_forward::{ForwardConfig, ForwardSink, Frame, SinkError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct CountSink(AtomicU64);

impl ForwardSink for CountSink {
    fn append(&self, frame: Frame) -> BoxFuture<'static, Result<(), SinkError>> {
        self.0.fetch_add(frame.events as u64, Ordering::Relaxed);
        async { Ok(()) }.boxed()
    }
}

async fn client(addr: std::net::SocketAddr, frame: Arc<Vec<u8>>, frames: usize, window: usize) {
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.set_nodelay(true).unwrap();
    let (mut rd, mut wr) = c.split();
    let mut sent = 0;
    let mut acked = 0;
    let ack_len = enc(&opt(&[("ack", V::from("chunk-0001"))])).len();
    let mut buf = vec![0u8; 64 << 10];
    let mut pending_bytes = 0usize;
    while acked < frames {
        while sent < frames && sent - acked < window {
            wr.write_all(&frame).await.unwrap();
            sent += 1;
        }
        let n = rd.read(&mut buf).await.unwrap();
        assert!(n > 0, "server closed");
        pending_bytes += n;
        acked += pending_bytes / ack_len;
        pending_bytes %= ack_len;
    }
}

fn run(window: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sink = Arc::new(CountSink(AtomicU64::new(0)));
        let server = Server::start(ForwardConfig::default(), sink.clone()).await;
        let per_frame: u64 = 1000;
        let entries: Vec<u8> = (0..per_frame)
            .flat_map(|i| {
                enc(&V::Array(vec![
                    event_time(1_700_000_000 + i as u32, 5),
                    nginx_record(i),
                ]))
            })
            .collect();
        let frame = Arc::new(enc(&V::Array(vec![
            V::from("nginx.access"),
            V::Binary(entries.clone()),
            opt(&[
                ("chunk", V::from("chunk-0001")),
                ("size", V::from(per_frame)),
            ]),
        ])));
        let frames = 2000;
        let t0 = Instant::now();
        client(server.addr, frame.clone(), frames, window).await;
        let dt = t0.elapsed();
        let events = sink.0.load(Ordering::Relaxed);
        assert_eq!(events, frames as u64 * per_frame);
        println!(
            "window {window}: {events} events ({:.1} MB of frames) in {:.2?}: {:.0} events/s, {:.0} MB/s",
            (frames * frame.len()) as f64 / 1e6,
            dt,
            events as f64 / dt.as_secs_f64(),
            (frames * frame.len()) as f64 / 1e6 / dt.as_secs_f64()
        );
        tokio::time::timeout(Duration::from_secs(10), server.stop())
            .await
            .unwrap();
    });
}

#[test]
#[ignore = "a measurement; run with --release -- --ignored --nocapture"]
fn packed_forward_throughput() {
    // One frame at a time, as fluent-bit does with require_ack_response.
    run(1);
    // Pipelined.
    run(8);
}
