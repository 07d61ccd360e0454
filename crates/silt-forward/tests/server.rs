//! The server over real loopback TCP (and in-memory streams for the split-frame property):
//! the four modes, acks and the sink, the handshake, and every kind of bad client. Touches
//! only loopback sockets.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use proptest::prelude::*;
use rmpv::Value as V;
use silt_forward::{
    handshake::client_ping, serve_connection, serve_heartbeat_counted, DisconnectReason,
    ForwardConfig, ForwardSink, ForwardStats, Mode,
};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::Semaphore;

const WAIT: Duration = Duration::from_secs(5);

fn rec(i: i64) -> V {
    V::Map(vec![
        (V::from("i"), V::from(i)),
        (V::from("msg"), V::from(format!("hello {i}"))),
        (
            V::from("nested"),
            V::Map(vec![(
                V::from("list"),
                V::Array(vec![V::from(1), V::Nil, V::Boolean(true)]),
            )]),
        ),
        (V::from("raw"), V::Binary(vec![0, 159, 255])),
    ])
}

fn entries(from: i64, n: i64) -> Vec<V> {
    (from..from + n)
        .map(|i| {
            let t = if i % 2 == 0 {
                V::from(1_700_000_000 + i)
            } else {
                event_time(1_700_000_000, i as u32)
            };
            V::Array(vec![t, rec(i)])
        })
        .collect()
}

fn packed(es: &[V]) -> Vec<u8> {
    es.iter().flat_map(enc).collect()
}

#[tokio::test]
async fn all_four_modes_are_acked_and_arrive_whole() {
    let sink = CollectSink::new();
    let server = Server::start(ForwardConfig::default(), sink.clone()).await;
    let mut c = TcpStream::connect(server.addr).await.unwrap();
    let es = entries(0, 10);
    // Message, with integer time then EventTime.
    let frames = [
        V::Array(vec![
            V::from("m.int"),
            V::from(1_700_000_000),
            rec(100),
            opt(&[("chunk", V::from("c1"))]),
        ]),
        V::Array(vec![
            V::from("m.et"),
            event_time(1_700_000_001, 5),
            rec(101),
            opt(&[("chunk", V::from("c2"))]),
        ]),
        V::Array(vec![
            V::from("fwd"),
            V::Array(es[..3].to_vec()),
            opt(&[("chunk", V::from("c3")), ("size", V::from(3))]),
        ]),
        V::Array(vec![
            V::from("packed"),
            V::Binary(packed(&es[3..6])),
            opt(&[("chunk", V::from("c4"))]),
        ]),
        V::Array(vec![
            V::from("gz"),
            V::Binary([gzip(&packed(&es[6..8])), gzip(&packed(&es[8..]))].concat()),
            opt(&[
                ("chunk", V::from("c5")),
                ("compressed", V::from("gzip")),
                ("size", V::from(4)),
            ]),
        ]),
    ];
    for (i, f) in frames.iter().enumerate() {
        send(&mut c, f).await;
        let ack = read_reply(&mut c, WAIT).await.expect("ack");
        assert_eq!(
            ack_of(&ack).as_deref(),
            Some(format!("c{}", i + 1).as_str())
        );
    }
    // Without chunk: no reply, still delivered.
    send(
        &mut c,
        &V::Array(vec![V::from("noack"), V::from(1), rec(7)]),
    )
    .await;
    assert!(read_reply(&mut c, Duration::from_millis(200))
        .await
        .is_none());
    eventually("the unacked event", || sink.event_count() == 13).await;

    let got = sink.events();
    assert_eq!(got[0], ("m.int".into(), V::from(1_700_000_000), rec(100)));
    assert_eq!(
        got[1],
        ("m.et".into(), event_time(1_700_000_001, 5), rec(101))
    );
    let tail: Vec<V> = got[2..12]
        .iter()
        .map(|(_, t, r)| V::Array(vec![t.clone(), r.clone()]))
        .collect();
    assert_eq!(tail, es);
    assert_eq!(got[12].0, "noack");
    let modes: Vec<Mode> = sink.frames.lock().unwrap().iter().map(|f| f.mode).collect();
    assert_eq!(
        modes,
        [
            Mode::Message,
            Mode::Message,
            Mode::Forward,
            Mode::PackedForward,
            Mode::CompressedPackedForward,
            Mode::Message
        ]
    );
    // PackedForward hands over the bytes as received.
    assert_eq!(
        &sink.frames.lock().unwrap()[3].entries[..],
        &packed(&es[3..6])[..]
    );
    let s = server.stats.snapshot();
    assert_eq!(
        (s.frames, s.events, s.acks, s.rejected_frames),
        (6, 13, 5, 0)
    );
    drop(c);
    server.stop().await;
}

#[tokio::test]
async fn ack_waits_for_the_sink_and_acks_can_be_pipelined() {
    let gate = Arc::new(Semaphore::new(0));
    let sink = CollectSink::gated(gate.clone());
    let server = Server::start(ForwardConfig::default(), sink.clone()).await;
    let mut c = TcpStream::connect(server.addr).await.unwrap();
    send(
        &mut c,
        &V::Array(vec![
            V::from("t"),
            V::from(1),
            rec(1),
            opt(&[("chunk", V::from("a"))]),
        ]),
    )
    .await;
    eventually("the frame reached the sink", || {
        sink.frames.lock().unwrap().len() == 1
    })
    .await;
    // The sink has the frame but has not resolved: no ack.
    assert!(read_reply(&mut c, Duration::from_millis(300))
        .await
        .is_none());
    assert_eq!(server.stats.snapshot().acks, 0);
    gate.add_permits(1);
    assert_eq!(
        ack_of(&read_reply(&mut c, WAIT).await.unwrap()).as_deref(),
        Some("a")
    );

    // Several frames in flight at once; each acked once its append resolves.
    for i in 0..5 {
        let chunk = format!("p{i}");
        send(
            &mut c,
            &V::Array(vec![
                V::from("t"),
                V::from(1),
                rec(i),
                opt(&[("chunk", V::from(chunk))]),
            ]),
        )
        .await;
    }
    eventually("all five in the sink", || {
        sink.frames.lock().unwrap().len() == 6
    })
    .await;
    assert!(read_reply(&mut c, Duration::from_millis(200))
        .await
        .is_none());
    gate.add_permits(5);
    let acks = read_acks(&mut c, 5, WAIT).await;
    assert_eq!(acks, ["p0", "p1", "p2", "p3", "p4"]);
    drop(c);
    server.stop().await;
}

#[tokio::test]
async fn sink_errors_mean_no_ack() {
    // Backpressure: no ack, the connection stays and serves the next frame.
    let sink = CollectSink::answering(vec![Answer::Backpressure, Answer::Ok, Answer::Failed]);
    let server = Server::start(ForwardConfig::default(), sink.clone()).await;
    let mut c = TcpStream::connect(server.addr).await.unwrap();
    send(
        &mut c,
        &V::Array(vec![
            V::from("t"),
            V::from(1),
            rec(1),
            opt(&[("chunk", V::from("bp"))]),
        ]),
    )
    .await;
    assert!(read_reply(&mut c, Duration::from_millis(300))
        .await
        .is_none());
    send(
        &mut c,
        &V::Array(vec![
            V::from("t"),
            V::from(1),
            rec(2),
            opt(&[("chunk", V::from("ok"))]),
        ]),
    )
    .await;
    assert_eq!(
        ack_of(&read_reply(&mut c, WAIT).await.unwrap()).as_deref(),
        Some("ok")
    );
    // Failed: no ack and the connection is closed.
    send(
        &mut c,
        &V::Array(vec![
            V::from("t"),
            V::from(1),
            rec(3),
            opt(&[("chunk", V::from("f"))]),
        ]),
    )
    .await;
    assert!(closed(&mut c, WAIT).await);
    let s = server.stats.snapshot();
    assert_eq!((s.acks, s.sink_backpressure, s.sink_failures), (1, 1, 1));
    assert_eq!(s.disconnects(DisconnectReason::Sink), 1);
    assert_eq!(sink.event_count(), 1);
    server.stop().await;
}

#[tokio::test]
async fn bad_clients_are_dropped_and_counted_and_others_keep_going() {
    let cfg = ForwardConfig {
        max_frame_bytes: 4096,
        idle_timeout: Duration::from_millis(400),
        frame_timeout: Duration::from_millis(600),
        ..ForwardConfig::default()
    };
    let sink = CollectSink::new();
    let server = Server::start(cfg, sink.clone()).await;
    let addr = server.addr;
    // A well-behaved client connected all along.
    let mut good = TcpStream::connect(addr).await.unwrap();

    async fn bad(addr: SocketAddr, bytes: &[u8], close_write: bool) -> TcpStream {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(bytes).await.unwrap();
        if close_write {
            c.shutdown().await.unwrap();
        }
        c
    }
    // Invalid marker.
    let mut c = bad(addr, &[0x93, 0xa1, b't', 0xc1, 1, 2, 3], false).await;
    assert!(closed(&mut c, WAIT).await);
    // JSON text: `{` is a positive fixint, not an array.
    let mut c = bad(addr, br#"{"a":1}"#, false).await;
    assert!(closed(&mut c, WAIT).await);
    // Wrong shape.
    let mut c = bad(
        addr,
        &enc(&V::Array(vec![V::from("t"), V::from("x"), V::from(3)])),
        false,
    )
    .await;
    assert!(closed(&mut c, WAIT).await);
    // Tag not UTF-8.
    let mut c = bad(
        addr,
        &enc(&V::Array(vec![
            V::Binary(vec![0xc3, 0x28]),
            V::from(1),
            rec(1),
        ])),
        false,
    )
    .await;
    assert!(closed(&mut c, WAIT).await);
    // `size` that does not match.
    let f = V::Array(vec![
        V::from("t"),
        V::Binary(packed(&entries(0, 2))),
        opt(&[("size", V::from(3)), ("chunk", V::from("z"))]),
    ]);
    let mut c = bad(addr, &enc(&f), false).await;
    assert!(read_reply(&mut c, Duration::from_millis(300))
        .await
        .is_none());
    assert!(closed(&mut c, WAIT).await);
    // Oversized: a bin32 announcing 1 GiB is refused from its header, before the bytes.
    let mut c = bad(
        addr,
        &[0x93, 0xa1, b't', 0xc6, 0x40, 0, 0, 0, 1, 2, 3],
        false,
    )
    .await;
    assert!(closed(&mut c, WAIT).await);
    // Oversized: small values adding up past the limit.
    let many = V::Array(vec![
        V::from("t"),
        V::Array(
            (0..2000)
                .map(|i| V::Array(vec![V::from(i), V::Map(vec![])]))
                .collect(),
        ),
    ]);
    let mut c = TcpStream::connect(addr).await.unwrap();
    let _ = c.write_all(&enc(&many)).await; // the server may close before it has all of it
    assert!(closed(&mut c, WAIT).await);
    // Disconnect in the middle of a frame.
    let whole = enc(&V::Array(vec![V::from("t"), V::from(1), rec(1)]));
    let mut c = bad(addr, &whole[..whole.len() / 2], true).await;
    assert!(closed(&mut c, WAIT).await);
    // Connects and sends nothing.
    let t0 = std::time::Instant::now();
    let mut idle = TcpStream::connect(addr).await.unwrap();
    assert!(closed(&mut idle, WAIT).await);
    assert!(
        t0.elapsed() >= Duration::from_millis(350),
        "{:?}",
        t0.elapsed()
    );
    // Dribbles one byte every 100 ms: never idle for 400 ms, but the frame takes too long.
    let mut drib = TcpStream::connect(addr).await.unwrap();
    let t0 = std::time::Instant::now();
    let mut dropped = false;
    for b in whole.iter().cycle().take(200) {
        if drib.write_all(&[*b]).await.is_err() {
            dropped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if t0.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    assert!(dropped || closed(&mut drib, Duration::from_millis(100)).await);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());

    // The good client is still served (it was idle too long meanwhile: reconnect).
    assert!(closed(&mut good, WAIT).await);
    let mut good = TcpStream::connect(addr).await.unwrap();
    send(
        &mut good,
        &V::Array(vec![
            V::from("ok"),
            V::from(1),
            rec(9),
            opt(&[("chunk", V::from("still"))]),
        ]),
    )
    .await;
    assert_eq!(
        ack_of(&read_reply(&mut good, WAIT).await.unwrap()).as_deref(),
        Some("still")
    );

    let s = server.stats.snapshot();
    assert_eq!(s.disconnects(DisconnectReason::Malformed), 1, "{s:?}");
    assert_eq!(s.disconnects(DisconnectReason::BadFrame), 4, "{s:?}");
    assert_eq!(s.rejected_frames, 4, "{s:?}");
    assert_eq!(s.disconnects(DisconnectReason::Oversized), 2, "{s:?}");
    assert_eq!(s.disconnects(DisconnectReason::Truncated), 1, "{s:?}");
    // The idle client, the dribbler, and the first good connection.
    assert_eq!(s.disconnects(DisconnectReason::Timeout), 3, "{s:?}");
    assert_eq!(sink.event_count(), 1);
    assert_eq!(s.active_connections, 1);
    drop(good);
    server.stop().await;
}

async fn handshake(addr: SocketAddr, key: &str, user: Option<(&str, &str)>) -> (TcpStream, V) {
    let mut c = TcpStream::connect(addr).await.unwrap();
    let helo = read_reply(&mut c, WAIT).await.expect("HELO");
    assert_eq!(helo[0], V::from("HELO"));
    let ping = client_ping(&enc(&helo), "client-host", key, user).unwrap();
    c.write_all(&ping).await.unwrap();
    let pong = read_reply(&mut c, WAIT).await.expect("PONG");
    assert_eq!(pong[0], V::from("PONG"));
    (c, pong)
}

#[tokio::test]
async fn handshake_with_shared_key_and_users() {
    let cfg = ForwardConfig {
        shared_key: Some("s3cret".into()),
        self_hostname: "silt-server".into(),
        ..ForwardConfig::default()
    };
    let sink = CollectSink::new();
    let server = Server::start(cfg, sink.clone()).await;
    // Right key: PONG true with the server's proof, then events flow.
    let (mut c, pong) = handshake(server.addr, "s3cret", None).await;
    assert_eq!(pong[1], V::Boolean(true));
    assert_eq!(pong[3], V::from("silt-server"));
    assert_eq!(pong[4].as_str().unwrap().len(), 128);
    send(
        &mut c,
        &V::Array(vec![
            V::from("t"),
            V::from(1),
            rec(1),
            opt(&[("chunk", V::from("h1"))]),
        ]),
    )
    .await;
    assert_eq!(
        ack_of(&read_reply(&mut c, WAIT).await.unwrap()).as_deref(),
        Some("h1")
    );
    // Wrong key: PONG false with the reason, closed, counted.
    let (mut c, pong) = handshake(server.addr, "wrong", None).await;
    assert_eq!(pong[1], V::Boolean(false));
    assert_eq!(pong[2], V::from("shared_key mismatch"));
    assert!(closed(&mut c, WAIT).await);
    // Events before the handshake are not events.
    let mut c = TcpStream::connect(server.addr).await.unwrap();
    let _helo = read_reply(&mut c, WAIT).await.unwrap();
    send(&mut c, &V::Array(vec![V::from("t"), V::from(1), rec(1)])).await;
    let pong = read_reply(&mut c, WAIT).await.unwrap();
    assert_eq!(
        (&pong[1], &pong[2]),
        (&V::Boolean(false), &V::from("invalid ping message"))
    );
    assert!(closed(&mut c, WAIT).await);
    let s = server.stats.snapshot();
    assert_eq!(
        (s.auth_failures, s.disconnects(DisconnectReason::Auth)),
        (2, 2)
    );
    assert_eq!(sink.event_count(), 1);
    server.stop().await;

    let cfg = ForwardConfig {
        shared_key: Some("k".into()),
        users: vec![("alice".into(), "pw".into())],
        ..ForwardConfig::default()
    };
    let server = Server::start(cfg, CollectSink::new()).await;
    let (_c, pong) = handshake(server.addr, "k", Some(("alice", "pw"))).await;
    assert_eq!(pong[1], V::Boolean(true));
    let (_c, pong) = handshake(server.addr, "k", Some(("alice", "nope"))).await;
    assert_eq!(
        (&pong[1], &pong[2]),
        (&V::Boolean(false), &V::from("username/password mismatch"))
    );
    assert_eq!(server.stats.snapshot().auth_failures, 1);
    server.stop().await;
}

#[tokio::test]
async fn udp_heartbeat_answers_the_sender() {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let stats = Arc::new(ForwardStats::new());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve_heartbeat_counted(
        sock,
        async move {
            let _ = rx.await;
        },
        Some(stats.clone()),
    ));
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for _ in 0..3 {
        client.send_to(b"\0", addr).await.unwrap();
        let mut buf = [9u8; 8];
        let (n, from) = tokio::time::timeout(WAIT, client.recv_from(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((n, buf[0], from), (1, 0, addr));
    }
    assert_eq!(stats.snapshot().heartbeats, 3);
    tx.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_lets_appends_in_flight_finish_and_ack() {
    let gate = Arc::new(Semaphore::new(0));
    let sink = CollectSink::gated(gate.clone());
    let server = Server::start(ForwardConfig::default(), sink.clone()).await;
    let mut c = TcpStream::connect(server.addr).await.unwrap();
    send(
        &mut c,
        &V::Array(vec![
            V::from("t"),
            V::from(1),
            rec(1),
            opt(&[("chunk", V::from("last"))]),
        ]),
    )
    .await;
    eventually("in the sink", || sink.frames.lock().unwrap().len() == 1).await;
    let stats = server.stats.clone();
    let stopping = tokio::spawn(server.stop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.add_permits(1);
    assert_eq!(
        ack_of(&read_reply(&mut c, WAIT).await.unwrap()).as_deref(),
        Some("last")
    );
    assert!(closed(&mut c, WAIT).await);
    stopping.await.unwrap();
    assert_eq!(stats.snapshot().disconnects(DisconnectReason::Shutdown), 1);
}

/// One of the four modes for a batch of events.
fn frame_in_mode(mode: u8, tag: &str, es: &[V], chunk: &str) -> Vec<u8> {
    let o = opt(&[("chunk", V::from(chunk)), ("size", V::from(es.len()))]);
    let v = match mode {
        0 => {
            let V::Array(pair) = &es[0] else {
                unreachable!()
            };
            V::Array(vec![
                V::from(tag),
                pair[0].clone(),
                pair[1].clone(),
                opt(&[("chunk", V::from(chunk))]),
            ])
        }
        1 => V::Array(vec![V::from(tag), V::Array(es.to_vec()), o]),
        2 => V::Array(vec![V::from(tag), V::Binary(packed(es)), o]),
        _ => {
            let body = packed(es);
            let cut = body.len() / 2;
            V::Array(vec![
                V::from(tag),
                V::Binary([gzip(&body[..cut]), gzip(&body[cut..])].concat()),
                opt(&[("chunk", V::from(chunk)), ("compressed", V::from("gzip"))]),
            ])
        }
    };
    enc(&v)
}

fn arb_value() -> impl Strategy<Value = V> {
    let leaf = prop_oneof![
        Just(V::Nil),
        any::<bool>().prop_map(V::Boolean),
        any::<i64>().prop_map(V::from),
        any::<u64>().prop_map(V::from),
        any::<f64>()
            .prop_filter("NaN != NaN", |f| !f.is_nan())
            .prop_map(V::F64),
        ".{0,40}".prop_map(V::from),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(V::Binary),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(V::Array),
            proptest::collection::vec(("[a-z]{1,8}".prop_map(V::from), inner), 0..6)
                .prop_map(V::Map),
        ]
    })
}

fn arb_entry() -> impl Strategy<Value = V> {
    let time = prop_oneof![
        any::<u32>().prop_map(V::from),
        (any::<u32>(), 0u32..1_000_000_000).prop_map(|(s, n)| event_time(s, n)),
    ];
    let record = proptest::collection::vec(("[a-z_]{1,10}".prop_map(V::from), arb_value()), 0..8)
        .prop_map(V::Map);
    (time, record).prop_map(|(t, r)| V::Array(vec![t, r]))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Frames of every mode, back to back, written in pieces cut anywhere: the sink gets the
    /// same events and every chunk is acked.
    #[test]
    fn frames_split_anywhere_decode_the_same(
        batches in proptest::collection::vec((0u8..4, proptest::collection::vec(arb_entry(), 1..6)), 1..6),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..30),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let mut stream = Vec::new();
            let mut want = Vec::new();
            for (i, (mode, es)) in batches.iter().enumerate() {
                let es = if *mode == 0 { &es[..1] } else { &es[..] };
                stream.extend(frame_in_mode(*mode, &format!("tag.{i}"), es, &format!("chunk-{i}")));
                want.extend(es.iter().map(|e| (format!("tag.{i}"), e.clone())));
            }
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(stream.len())).collect();
            at.push(stream.len());
            at.sort();
            let (client, server) = tokio::io::duplex(64);
            let sink = CollectSink::new();
            let stats = Arc::new(ForwardStats::new());
            let srv = tokio::spawn(serve_connection(
                server,
                "127.0.0.1:1".parse().unwrap(),
                Arc::new(ForwardConfig::default()),
                sink.clone() as Arc<dyn ForwardSink>,
                stats.clone(),
            ));
            let (mut rd, mut wr) = tokio::io::split(client);
            let reader = tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut all = Vec::new();
                rd.read_to_end(&mut all).await.unwrap();
                all
            });
            let mut prev = 0;
            for a in at {
                wr.write_all(&stream[prev..a]).await.unwrap();
                wr.flush().await.unwrap();
                tokio::task::yield_now().await;
                prev = a;
            }
            wr.shutdown().await.unwrap();
            srv.await.unwrap().unwrap();
            let replies = reader.await.unwrap();
            let mut acks: Vec<String> = decode_entries(&replies).iter().map(|v| ack_of(v).unwrap()).collect();
            let mut want_acks: Vec<String> = (0..batches.len()).map(|i| format!("chunk-{i}")).collect();
            acks.sort();
            want_acks.sort();
            assert_eq!(acks, want_acks);
            let got: Vec<(String, V)> = sink
                .events()
                .into_iter()
                .map(|(tag, t, r)| (tag, V::Array(vec![t, r])))
                .collect();
            assert_eq!(got, want);
            assert_eq!(stats.snapshot().disconnects(DisconnectReason::Closed), 1);
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random bytes, alone or after a valid frame: the connection ends (with an error or not)
    /// and nothing panics.
    #[test]
    fn garbage_never_panics(
        prefix in any::<bool>(),
        junk in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let mut bytes = Vec::new();
            if prefix {
                bytes.extend(frame_in_mode(2, "t", &entries(0, 2), "c"));
            }
            bytes.extend(junk);
            let (mut client, server) = tokio::io::duplex(1 << 16);
            let cfg = ForwardConfig {
                max_frame_bytes: 1024,
                idle_timeout: Duration::from_millis(200),
                frame_timeout: Duration::from_millis(200),
                ..ForwardConfig::default()
            };
            let srv = tokio::spawn(serve_connection(
                server,
                "127.0.0.1:1".parse().unwrap(),
                Arc::new(cfg),
                CollectSink::new() as Arc<dyn ForwardSink>,
                Arc::new(ForwardStats::new()),
            ));
            client.write_all(&bytes).await.unwrap();
            client.shutdown().await.unwrap();
            let r = tokio::time::timeout(WAIT, srv).await.expect("connection ends").expect("no panic");
            let _ = r;
        });
    }
}

#[tokio::test]
async fn large_frames_and_the_in_flight_limit() {
    // Frames over the blocking threshold (decompressed and counted off the async threads).
    let gate = Arc::new(Semaphore::new(0));
    let sink = CollectSink::gated(gate.clone());
    let cfg = ForwardConfig {
        max_inflight_frames: 2,
        ..ForwardConfig::default()
    };
    let server = Server::start(cfg, sink.clone()).await;
    let es: Vec<V> = (0..20_000)
        .map(|i| V::Array(vec![event_time(1_700_000_000, i), nginx_record(i as u64)]))
        .collect();
    let body = packed(&es);
    assert!(body.len() > 2 << 20);
    let mut c = TcpStream::connect(server.addr).await.unwrap();
    let mut frames = Vec::new();
    for i in 0..4 {
        let f = if i % 2 == 0 {
            V::Array(vec![
                V::from("big"),
                V::Binary(body.clone()),
                opt(&[("chunk", V::from(format!("b{i}")))]),
            ])
        } else {
            V::Array(vec![
                V::from("big.gz"),
                V::Binary(gzip(&body)),
                opt(&[
                    ("chunk", V::from(format!("b{i}"))),
                    ("compressed", V::from("gzip")),
                ]),
            ])
        };
        frames.extend(enc(&f));
    }
    let writer = tokio::spawn(async move {
        c.write_all(&frames).await.unwrap();
        c
    });
    // Two appends in flight, the connection is not read further until one resolves.
    eventually("two frames in the sink", || {
        sink.frames.lock().unwrap().len() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sink.frames.lock().unwrap().len(), 2);
    gate.add_permits(4);
    let mut c = writer.await.unwrap();
    let acks = read_acks(&mut c, 4, WAIT).await;
    assert_eq!(acks, ["b0", "b1", "b2", "b3"]);
    assert_eq!(sink.event_count(), 80_000);
    let got = sink.events();
    assert_eq!(got[20_000].0, "big.gz");
    assert_eq!(
        V::Array(vec![got[25_000].1.clone(), got[25_000].2.clone()]),
        es[5_000]
    );
    drop(c);
    server.stop().await;
}
