//! The fuzz harness of the Forward protocol: arbitrary bytes sent by a client, served by
//! [`serve_connection`] (the very loop `silt serve` runs per connection) over an in-memory
//! stream, with a sink that takes every frame at once. Shared, like `silt_ingest::fuzz`, by the
//! afl target `fuzz/src/bin/forward.rs` (which also decodes each accepted frame's entries with
//! the `msgpack` decoder, as `silt serve` does, through `silt_ingest::fuzz::check_entries`) and
//! the replay test `tests/fuzz_replay.rs`, which runs the saved inputs (`fuzz/corpus/forward/`,
//! `fuzz/regressions/forward/`, `fuzz/seeds/forward/`) in CI.
//!
//! [`run`] serves the input three times and panics (the bug a fuzzer reports) when:
//!
//! - the connection loop panics, or does not end once the client has closed its side;
//! - without a shared key, the input sent in pieces (sizes taken from the input's own bytes,
//!   the task yielding between them so that the server reads them one by one) and sent whole
//!   give different outcomes: the frames the sink got (tag, mode, entries, event count, chunk),
//!   the acks (as a multiset: appends resolve in any order) and how the connection ended;
//! - a frame the sink got has entries that are not `events` whole `[time, map]` pairs, checked
//!   with `rmpv` (an independent MessagePack decoder, not the scanner under test), or a
//!   Message-mode frame not exactly one;
//! - an accepted frame's chunk is not acked, or a reply is not a well-formed `{"ack": chunk}`;
//! - with a shared key (and a user), any frame reaches the sink (the client cannot know the
//!   random nonce, so its PING can never pass), or the first reply is not a HELO.
//!
//! Limits are small (frames of 64 KiB, a few frames in flight) so that the oversize and
//! in-flight paths are reachable from small inputs. Touches nothing: all in memory.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmpv::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{serve_connection, ForwardConfig, ForwardSink, ForwardStats, Frame, Mode, SinkError};

/// One frame the sink got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub tag: String,
    pub mode: Mode,
    /// The entries as handed over (decompressed), a MessagePack stream of `[time, record]`.
    pub entries: Vec<u8>,
    pub events: usize,
    pub chunk: Option<String>,
}

/// What serving one input gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The frames the sink got, in the order they were appended.
    pub frames: Vec<Accepted>,
    /// Every reply the server sent, decoded (HELO, PONG, acks), in order.
    pub replies: Vec<Value>,
    /// `ok`, or the error the connection ended with.
    pub end: String,
}

impl Outcome {
    /// The chunk ids acked, sorted.
    pub fn acks(&self) -> Vec<String> {
        let mut acks: Vec<String> = self.replies.iter().filter_map(ack_of).collect();
        acks.sort();
        acks
    }
}

/// `Some(chunk)` for a reply `{"ack": chunk}`.
fn ack_of(v: &Value) -> Option<String> {
    match v {
        Value::Map(m) if m.len() == 1 && m[0].0.as_str() == Some("ack") => {
            m[0].1.as_str().map(str::to_string)
        }
        _ => None,
    }
}

#[derive(Default)]
struct Collect(Mutex<Vec<Accepted>>);

impl ForwardSink for Collect {
    fn append(&self, frame: Frame) -> BoxFuture<'static, Result<(), SinkError>> {
        self.0.lock().unwrap().push(Accepted {
            tag: frame.tag,
            mode: frame.mode,
            entries: frame.entries.to_vec(),
            events: frame.events,
            chunk: frame.chunk,
        });
        Box::pin(async { Ok(()) })
    }
}

/// The configuration of the runs: small limits; with `auth`, a shared key and one user.
fn config(auth: bool) -> ForwardConfig {
    ForwardConfig {
        shared_key: auth.then(|| "fuzz-key".to_string()),
        self_hostname: "fuzz".into(),
        users: if auth {
            vec![("user".into(), "pass".into())]
        } else {
            Vec::new()
        },
        max_frame_bytes: 64 << 10,
        max_inflight_frames: 4,
        max_inflight_bytes: 16 << 10,
        ..ForwardConfig::default()
    }
}

/// The pieces `data` is sent in: each piece's length (1 to 61 bytes) comes from its first
/// byte, so a mutation of the input moves the boundaries too.
fn pieces(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(&b) = rest.first() {
        let n = (1 + (usize::from(b) * 7) % 61).min(rest.len());
        let (p, after) = rest.split_at(n);
        out.push(p);
        rest = after;
    }
    out
}

/// Serves `data` once: sent in [`pieces`] or whole, then the client's side closed.
pub fn serve(data: &[u8], in_pieces: bool, auth: bool) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    rt.block_on(async {
        let (client, server) = tokio::io::duplex(16 << 10);
        let (mut rd, mut wr) = tokio::io::split(client);
        let sink = Arc::new(Collect::default());
        let peer: SocketAddr = ([127, 0, 0, 1], 0).into();
        let send = async move {
            // A write fails once the server has closed after a protocol error: the rest is
            // not sent, as with a real socket.
            if in_pieces {
                for p in pieces(data) {
                    if wr.write_all(p).await.is_err() {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
            } else if wr.write_all(data).await.is_err() {
                return;
            }
            let _ = wr.shutdown().await;
        };
        let receive = async move {
            let mut replies = Vec::new();
            let _ = rd.read_to_end(&mut replies).await;
            replies
        };
        let conn = serve_connection(
            server,
            peer,
            Arc::new(config(auth)),
            sink.clone(),
            Arc::new(ForwardStats::new()),
        );
        let ((), replies, end) = tokio::join!(send, receive, conn);
        let mut decoded = Vec::new();
        let mut rest = &replies[..];
        while !rest.is_empty() {
            let v = rmpv::decode::read_value(&mut rest)
                .unwrap_or_else(|e| panic!("the server's replies are not MessagePack: {e}"));
            decoded.push(v);
        }
        let frames = std::mem::take(&mut *sink.0.lock().unwrap());
        Outcome {
            frames,
            replies: decoded,
            end: match end {
                Ok(()) => "ok".into(),
                Err(e) => e.to_string(),
            },
        }
    })
}

/// Checks that `entries` are `events` whole `[time, map]` pairs, with `rmpv`.
fn check_shape(f: &Accepted) {
    let mut rest = &f.entries[..];
    let mut n = 0;
    while !rest.is_empty() {
        let v = rmpv::decode::read_value(&mut rest).unwrap_or_else(|e| {
            panic!(
                "{:?} frame: entry {} is not MessagePack: {e}: {f:?}",
                f.mode,
                n + 1
            )
        });
        let ok = matches!(&v, Value::Array(a) if a.len() == 2 && a[1].is_map()
            && matches!(a[0], Value::Integer(_) | Value::F32(_) | Value::F64(_) | Value::Ext(..) | Value::Array(_)));
        assert!(
            ok,
            "{:?} frame: entry {} is {v}, not [time, map]",
            f.mode,
            n + 1
        );
        n += 1;
    }
    assert_eq!(n, f.events, "{:?} frame: events miscounted: {f:?}", f.mode);
    assert!(f.events >= 1, "a frame without events reached the sink");
    if f.mode == Mode::Message {
        assert_eq!(f.events, 1, "a Message frame carries one event");
    }
}

/// The harness on one input (see the module documentation); returns the outcome of the run
/// without a shared key, input sent whole.
pub fn run(data: &[u8]) -> Outcome {
    let whole = serve(data, false, false);
    let split = serve(data, true, false);
    assert_eq!(
        (&whole.frames, whole.acks(), &whole.end),
        (&split.frames, split.acks(), &split.end),
        "sent in pieces and sent whole give different outcomes"
    );
    for f in &whole.frames {
        check_shape(f);
    }
    for r in &whole.replies {
        assert!(ack_of(r).is_some(), "a reply that is not an ack: {r}");
    }
    let acks = whole.acks();
    for chunk in whole.frames.iter().filter_map(|f| f.chunk.as_ref()) {
        assert!(
            acks.binary_search(chunk).is_ok(),
            "chunk {chunk:?} accepted but not acked: {whole:?}"
        );
    }
    let auth = serve(data, true, true);
    assert!(
        auth.frames.is_empty(),
        "a frame passed the handshake: {auth:?}"
    );
    let helo = auth
        .replies
        .first()
        .and_then(|v| v.as_array()?.first()?.as_str());
    assert_eq!(helo, Some("HELO"), "no HELO first: {auth:?}");
    whole
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, v).unwrap();
        out
    }

    fn entry(t: i64) -> Value {
        Value::Array(vec![
            Value::from(t),
            Value::Map(vec![(Value::from("log"), Value::from("x"))]),
        ])
    }

    fn opts(chunk: &str) -> Value {
        Value::Map(vec![(Value::from("chunk"), Value::from(chunk))])
    }

    #[test]
    fn frames_and_acks_are_seen_whatever_the_pieces() {
        let mut data = enc(&Value::Array(vec![
            Value::from("a.tag"),
            Value::from(1_700_000_000),
            Value::Map(vec![(Value::from("k"), Value::from(1))]),
            opts("c1"),
        ]));
        data.extend(enc(&Value::Nil));
        let packed: Vec<u8> = (0..3).flat_map(|i| enc(&entry(i))).collect();
        data.extend(enc(&Value::Array(vec![
            Value::from("b.tag"),
            Value::Binary(packed),
            opts("c2"),
        ])));
        let out = run(&data);
        assert_eq!(out.end, "ok");
        let got: Vec<_> = out.frames.iter().map(|f| (f.mode, f.events)).collect();
        assert_eq!(got, [(Mode::Message, 1), (Mode::PackedForward, 3)]);
        assert_eq!(out.acks(), ["c1", "c2"]);
    }

    #[test]
    fn a_bad_frame_ends_the_connection_after_the_good_ones() {
        let mut data = enc(&Value::Array(vec![
            Value::from("t"),
            Value::Array(vec![entry(1), entry(2)]),
            opts("ok"),
        ]));
        data.extend(enc(&Value::Array(vec![
            Value::from("t"),
            Value::from(true),
        ])));
        data.extend(b"\xc1 never read");
        let out = run(&data);
        assert_eq!(out.frames.len(), 1);
        assert_eq!(out.acks(), ["ok"]);
        assert!(
            out.end.starts_with("bad frame: second element"),
            "{}",
            out.end
        );
    }

    #[test]
    fn a_miscounted_or_misshapen_frame_is_caught() {
        let f = |entries: Vec<u8>, events| Accepted {
            tag: "t".into(),
            mode: Mode::PackedForward,
            entries,
            events,
            chunk: None,
        };
        let two = [enc(&entry(1)), enc(&entry(2))].concat();
        check_shape(&f(two.clone(), 2));
        for bad in [
            f(two.clone(), 3),
            f(two[..two.len() - 1].to_vec(), 2),
            f(enc(&Value::Array(vec![Value::from(1), Value::from(2)])), 1),
        ] {
            assert!(
                std::panic::catch_unwind(|| check_shape(&bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn pieces_cover_the_input() {
        let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let p = pieces(&data);
        assert_eq!(p.concat(), data);
        assert!(p.iter().all(|p| (1..=61).contains(&p.len())));
        assert!(pieces(b"").is_empty());
    }
}
