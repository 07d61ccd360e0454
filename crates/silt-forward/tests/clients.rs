//! Real clients against the server: Python's `fluent-logger` (tests/python/send_events.py) and
//! Go's `fluent-logger-golang` with RequestAck (tests/go). Each runs against a server on
//! 127.0.0.1:0 with a collecting sink; the test decodes the entries and checks the values.
//! When the interpreter, the library or Go is missing the test is skipped with a message,
//! unless `CI=true`, where it fails. Touches loopback sockets, runs `python` and `go build`
//! (which may download Go modules through the module proxy into the Go module cache).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use rmpv::Value as V;
use silt_forward::ForwardConfig;

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips (or fails under CI) when a tool is missing.
fn missing(what: &str) {
    if ci() {
        panic!("CI=true and {what} is missing");
    }
    eprintln!("SKIPPED: {what} is missing (set CI=true to make this a failure)");
}

fn get<'a>(record: &'a V, key: &str) -> &'a V {
    record
        .as_map()
        .unwrap_or_else(|| panic!("not a map: {record:?}"))
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key} in {record:?}"))
}

fn event_time_parts(t: &V) -> Option<(u32, u32)> {
    match t {
        V::Ext(0, b) if b.len() == 8 => Some((
            u32::from_be_bytes(b[..4].try_into().unwrap()),
            u32::from_be_bytes(b[4..].try_into().unwrap()),
        )),
        _ => None,
    }
}

async fn try_run(mut cmd: tokio::process::Command, what: &str) -> Result<(), String> {
    let out = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .map_err(|_| format!("{what} timed out"))?
        .map_err(|e| format!("{what} did not start: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

async fn run(cmd: tokio::process::Command, what: &str) {
    if let Err(e) = try_run(cmd, what).await {
        panic!("{e}");
    }
}

#[tokio::test]
async fn python_fluent_logger() {
    let Some(py) = silt_testkit::python_with("fluent.sender, msgpack") else {
        missing("python with fluent-logger (pip install fluent-logger)");
        return;
    };
    let sink = CollectSink::new();
    let server = Server::start(ForwardConfig::default(), sink.clone()).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/send_events.py");
    let mut cmd = tokio::process::Command::new(py);
    cmd.arg(script)
        .arg("127.0.0.1")
        .arg(server.addr.port().to_string());
    run(cmd, "python client").await;
    eventually("14 events", || sink.event_count() == 14).await;
    let events = sink.events();
    let by_tag = |tag: &str| -> Vec<(V, V)> {
        events
            .iter()
            .filter(|(t, _, _)| t == tag)
            .map(|(_, t, r)| (t.clone(), r.clone()))
            .collect()
    };
    let ns = by_tag("py.ns");
    assert_eq!(ns.len(), 3);
    for (i, (t, r)) in ns.iter().enumerate() {
        assert_eq!(
            event_time_parts(t),
            Some((1_700_000_000 + i as u32, 250_000_000))
        );
        assert_eq!(get(r, "n"), &V::from(i));
        assert_eq!(get(r, "msg"), &V::from(format!("hello {i}")));
        assert_eq!(get(r, "bin"), &V::Binary(vec![0, 1, 255]));
        let nested = get(r, "nested");
        assert_eq!(
            get(nested, "list"),
            &V::Array(vec![V::from(1), V::from("x"), V::Boolean(true), V::Nil])
        );
        assert_eq!(get(nested, "f"), &V::F64(1.5));
        assert_eq!(get(get(nested, "deeper"), "k"), &V::from("v"));
    }
    let int = by_tag("py.int");
    assert_eq!(int.len(), 3);
    for (i, (t, r)) in int.iter().enumerate() {
        assert_eq!(t, &V::from(1_700_000_100 + i as u64));
        assert_eq!(get(r, "n"), &V::from(10 + i));
    }
    for tag in ["py.packed", "py.gzip"] {
        let es = by_tag(tag);
        assert_eq!(es.len(), 4, "{tag}");
        for (i, (t, r)) in es.iter().enumerate() {
            assert_eq!(event_time_parts(t), Some((1_700_000_200 + i as u32, 7)));
            assert_eq!(get(r, "n"), &V::from(20 + i));
        }
    }
    let s = server.stats.snapshot();
    assert_eq!((s.acks, s.rejected_frames), (2, 0), "{s:?}");
    server.stop().await;
}

#[tokio::test]
async fn go_fluent_logger_with_request_ack() {
    let go_ok = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !go_ok {
        missing("go");
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go");
    let bin = std::env::temp_dir().join(format!("silt-forward-go-client-{}", std::process::id()));
    let mut build = tokio::process::Command::new("go");
    build
        .current_dir(&dir)
        .arg("build")
        .arg("-o")
        .arg(&bin)
        .arg(".");
    // Without the module cache and no way to the module proxy the build fails: a missing
    // tool as far as this test is concerned.
    if let Err(e) = try_run(build, "go build of tests/go").await {
        missing(&format!("a working `go build` of tests/go ({e})"));
        return;
    }

    let sink = CollectSink::new();
    let server = Server::start(ForwardConfig::default(), sink.clone()).await;
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.arg("127.0.0.1").arg(server.addr.port().to_string());
    run(cmd, "go client").await;
    let _ = std::fs::remove_file(&bin);

    // Each Post waited for its ack, so everything is in the sink already.
    let events = sink.events();
    assert_eq!(events.len(), 10);
    for (i, (tag, t, r)) in events.iter().enumerate() {
        let n = i % 5;
        if i < 5 {
            assert_eq!(tag, "go.ns");
            assert_eq!(
                event_time_parts(t),
                Some((1_700_000_000 + n as u32, 123_456_789))
            );
        } else {
            assert_eq!(tag, "go.int");
            assert_eq!(t, &V::from(1_700_000_000 + n as u64));
        }
        assert_eq!(get(r, "n"), &V::from(n));
        assert_eq!(get(r, "msg"), &V::from(format!("hello {n}")));
        assert_eq!(get(r, "bin"), &V::Binary(vec![0, 1, 255]));
        let nested = get(r, "nested");
        assert_eq!(
            get(nested, "list"),
            &V::Array(vec![V::from(1), V::from("x"), V::Boolean(true)])
        );
        assert_eq!(get(nested, "f"), &V::F64(1.5));
    }
    let s = server.stats.snapshot();
    assert_eq!((s.acks, s.frames, s.rejected_frames), (10, 10, 0), "{s:?}");
    server.stop().await;
}
