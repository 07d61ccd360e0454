//! `silt serve` in process: HTTP ingest is acknowledged once durable and queryable at once;
//! bad requests get the documented status codes; a drain writes everything to the lake; a
//! restart replays nothing twice; Forward frames land in their routed table.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use silt_serve::{route::Route, ServeConfig, Server};

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

fn config(lake: &std::path::Path) -> ServeConfig {
    let mut cfg = ServeConfig::new(lake.to_path_buf());
    cfg.http = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.flush_age = Duration::from_secs(3600);
    cfg.wal_retain = Duration::ZERO;
    cfg
}

fn post(addr: SocketAddr, path: &str, ctype: &str, body: &[u8]) -> (u16, serde_json::Value) {
    let mut r = agent()
        .post(&format!("http://{addr}{path}"))
        .header("Content-Type", ctype)
        .send(body)
        .unwrap();
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap();
    let v = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    (status, v)
}

/// The server's `/metrics` text.
fn metrics(addr: SocketAddr) -> String {
    agent()
        .get(&format!("http://{addr}/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap()
}

fn query(addr: SocketAddr, sql: &str) -> serde_json::Value {
    let (status, v) = post(
        addr,
        "/v1/query?format=json",
        "application/sql",
        sql.as_bytes(),
    );
    assert_eq!(status, 200, "{sql}: {v}");
    v
}

/// Rows of `table`; 0 while the table does not exist yet (its first rows not decoded yet).
fn count(addr: SocketAddr, table: &str) -> i64 {
    let sql = format!("SELECT count(*) AS n FROM {table}");
    let (status, v) = post(
        addr,
        "/v1/query?format=json",
        "application/sql",
        sql.as_bytes(),
    );
    // The error names the table and says what the lake has instead.
    let missing = format!("table {table} is not in the lake");
    if status == 400 && v["error"].as_str().is_some_and(|e| e.contains(&missing)) {
        return 0;
    }
    assert_eq!(status, 200, "{sql}: {v}");
    v[0]["n"].as_i64().unwrap()
}

fn ndjson(from: usize, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in from..from + n {
        writeln!(
            out,
            r#"{{"time":"2024-03-24T17:{:02}:{:02}Z","id":{i},"host":"h{}","msg":"event {i}"}}"#,
            (i / 60) % 60,
            i % 60,
            i % 7
        )
        .unwrap();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_ingest_is_queryable_at_once_and_drains_to_the_lake() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let server = Server::start(config(&lake)).await.unwrap();
    let addr = server.http_addr.unwrap();
    let t = tokio::task::spawn_blocking(move || {
        for k in 0..5 {
            let (s, v) = post(
                addr,
                "/v1/ingest/app.events",
                "application/x-ndjson",
                &ndjson(k * 100, 100),
            );
            assert_eq!(s, 200, "{v}");
            assert_eq!(v["status"], "durable");
            // Acknowledged means visible within a second (here: polled right away).
            let deadline = std::time::Instant::now() + Duration::from_secs(1);
            while count(addr, "app.events") < (k as i64 + 1) * 100 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "not visible within 1 s"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let v = query(
            addr,
            "SELECT count(DISTINCT id) AS d, min(id) AS lo, max(id) AS hi FROM app.events",
        );
        assert_eq!(v[0]["d"], 500);
        assert_eq!(v[0]["hi"], 499);
        // Partition columns of rows in memory come from their time, as the files' will.
        let v = query(
            addr,
            "SELECT count(*) AS n FROM app.events WHERE dt = DATE '2024-03-24' AND hour = 17",
        );
        assert_eq!(v[0]["n"], 500);
        // Other output formats.
        let mut r = agent()
            .get(&format!("http://{addr}/v1/query?q=SELECT%20id%20FROM%20app.events%20ORDER%20BY%20id%20LIMIT%202&format=csv"))
            .call()
            .unwrap();
        assert_eq!(r.body_mut().read_to_string().unwrap(), "id\n0\n1\n");
        // Bad requests.
        assert_eq!(
            post(
                addr,
                "/v1/ingest/Bad%20Table",
                "application/x-ndjson",
                b"{}"
            )
            .0,
            400
        );
        assert_eq!(
            post(
                addr,
                "/v1/ingest/app.events?format=nope",
                "application/x-ndjson",
                b"{}"
            )
            .0,
            400
        );
        assert_eq!(
            post(addr, "/v1/ingest/app.events", "image/png", b"{}").0,
            415
        );
        let (s, v) = post(
            addr,
            "/v1/query",
            "application/sql",
            b"COPY (SELECT 1) TO '/tmp/x.csv'",
        );
        assert_eq!(s, 400);
        assert!(v["error"].as_str().unwrap().contains("read-only"), "{v}");
        let (s, v) = post(
            addr,
            "/v1/query",
            "application/sql",
            b"CREATE EXTERNAL TABLE p STORED AS CSV LOCATION '/etc/passwd'",
        );
        assert_eq!(s, 400, "{v}");
        // gzip and an idempotency key.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&ndjson(1000, 10)).unwrap();
        let gz = gz.finish().unwrap();
        for expect in ["durable", "duplicate"] {
            let mut r = agent()
                .post(&format!("http://{addr}/v1/ingest/app.events"))
                .header("Content-Type", "application/x-ndjson")
                .header("Content-Encoding", "gzip")
                .header("Idempotency-Key", "batch-1000")
                .send(&gz[..])
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
            let v: serde_json::Value =
                serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
            assert_eq!(v["status"], expect);
            // A duplicate names the first send's record, as its first answer did.
            assert!(v["seq"].as_u64().is_some(), "{v}");
        }
        // The same key with other data is refused, and nothing of it is stored.
        let r = agent()
            .post(&format!("http://{addr}/v1/ingest/app.events"))
            .header("Content-Type", "application/x-ndjson")
            .header("Idempotency-Key", "batch-1000")
            .send(&b"{\"id\":9999}\n"[..])
            .unwrap();
        assert_eq!(r.status().as_u16(), 422);
        // A JSON array of records, and one object written over several lines.
        let (s, v) = post(
            addr,
            "/v1/ingest/app.events",
            "application/json",
            b"[{\"id\": 3000, \"msg\": \"a\"},\n {\"id\": 3001}, {\"id\": 3002}]",
        );
        assert_eq!(s, 200, "{v}");
        let (s, v) = post(
            addr,
            "/v1/ingest/app.events",
            "application/json",
            b"{\n  \"id\": 3003,\n  \"msg\": \"b\"\n}\n",
        );
        assert_eq!(s, 200, "{v}");
        let (s, v) = post(
            addr,
            "/v1/ingest/app.events",
            "application/json",
            b"[{\"id\": 1},",
        );
        assert_eq!(s, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains("JSON array"), "{v}");
        // A bad line is a reject, not a failure of the request.
        let (s, _) = post(
            addr,
            "/v1/ingest/app.events",
            "application/x-ndjson",
            b"{\"id\":2000}\nnot json\n",
        );
        assert_eq!(s, 200);
        let h: serde_json::Value = serde_json::from_str(
            &agent()
                .get(&format!("http://{addr}/health"))
                .call()
                .unwrap()
                .body_mut()
                .read_to_string()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(h["status"], "ok");
        let m = metrics(addr);
        assert!(m.contains("silt_wal_appends_total 9"), "{m}");
    });
    t.await.unwrap();
    server.shutdown().await.unwrap();
    // Everything is in files now, once.
    let files = silt_lake::layout::data_files(&lake.join("app.events")).unwrap();
    assert!(!files.is_empty());
    let rejects = std::fs::read_dir(lake.join("_rejects")).unwrap().count();
    assert!(rejects > 0);
    // A restart replays nothing (the log up to the last flush is in the lake).
    let server = Server::start(config(&lake)).await.unwrap();
    assert!(server.recovery.is_empty(), "{:?}", server.recovery);
    let addr = server.http_addr.unwrap();
    tokio::task::spawn_blocking(move || {
        let v = query(
            addr,
            "SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events",
        );
        assert_eq!(v[0]["n"], 515);
        assert_eq!(v[0]["d"], 515);
        let v = query(
            addr,
            "SELECT count(*) AS n FROM app.events WHERE id BETWEEN 3000 AND 3003 OR id = 9999",
        );
        assert_eq!(v[0]["n"], 4);
        // The index holds the lake's files, and the query's footers are kept for the next.
        let m = metrics(addr);
        assert!(
            m.contains(&format!("silt_lake_files {}\n", files.len())),
            "{m}"
        );
        let footers: u64 = m
            .lines()
            .find_map(|l| l.strip_prefix("silt_footer_cache_bytes "))
            .expect("footer cache gauge")
            .parse()
            .unwrap();
        assert!(footers > 0, "{m}");
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_refused_with_413_and_a_non_loopback_bind_needs_a_token() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(&d.path().join("lake"));
    cfg.max_body = 1000;
    let server = Server::start(cfg).await.unwrap();
    let addr = server.http_addr.unwrap();
    tokio::task::spawn_blocking(move || {
        let (s, v) = post(
            addr,
            "/v1/ingest/app.events",
            "application/x-ndjson",
            &ndjson(0, 100),
        );
        assert_eq!(s, 413);
        assert!(v["error"].as_str().unwrap().contains("--max-body"), "{v}");
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
    let mut cfg = config(&d.path().join("lake2"));
    cfg.http = Some(SocketAddr::from(([0, 0, 0, 0], 0)));
    let e = Server::start(cfg).await.err().unwrap().to_string();
    assert!(e.contains("--token-file"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_configured() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(&d.path().join("lake"));
    cfg.token = Some("s3cret".into());
    let server = Server::start(cfg).await.unwrap();
    let addr = server.http_addr.unwrap();
    tokio::task::spawn_blocking(move || {
        assert_eq!(
            post(addr, "/v1/query", "application/sql", b"SELECT 1").0,
            401
        );
        // The scheme in any case (RFC 7235); a wrong token, or a token without the scheme, not.
        for (auth, status) in [
            ("Bearer s3cret", 200),
            ("bearer s3cret", 200),
            ("BEARER s3cret", 200),
            ("Bearer s3cre", 401),
            ("s3cret", 401),
        ] {
            let r = agent()
                .post(&format!("http://{addr}/v1/query"))
                .header("Authorization", auth)
                .send(&b"SELECT 1 AS one"[..])
                .unwrap();
            assert_eq!(r.status().as_u16(), status, "{auth}");
        }
        // Health needs no token.
        assert_eq!(
            agent()
                .get(&format!("http://{addr}/health"))
                .call()
                .unwrap()
                .status()
                .as_u16(),
            200
        );
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
}

/// With `--max-queries 1` and one query running, the next gets 429 with `Retry-After` and says
/// why (over Flight SQL, RESOURCE_EXHAUSTED); once the first finishes, queries run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_beyond_max_queries_are_refused_with_429() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(&d.path().join("lake"));
    cfg.max_queries = 1;
    let server = Server::start(cfg).await.unwrap();
    let addr = server.http_addr.unwrap();
    // A running query holds the one slot.
    let running = server.shared.query_slot().unwrap();
    tokio::task::spawn_blocking(move || {
        let r = agent()
            .post(&format!("http://{addr}/v1/query"))
            .send(&b"SELECT 1 AS one"[..])
            .unwrap();
        assert_eq!(r.status().as_u16(), 429);
        assert_eq!(r.headers().get("retry-after").unwrap(), "1");
        let (s, v) = post(addr, "/v1/query", "application/sql", b"SELECT 1 AS one");
        assert_eq!(s, 429);
        assert!(
            v["error"].as_str().unwrap().contains("--max-queries 1"),
            "{v}"
        );
        let m = metrics(addr);
        assert!(m.contains("silt_queries_refused_total 2"), "{m}");
        assert!(m.contains("silt_queries_running 1"), "{m}");
    })
    .await
    .unwrap();
    // Flight SQL takes the same slots: refused the same way, with RESOURCE_EXHAUSTED's kind.
    {
        use silt_flight::QueryEngine;
        let engine = silt_serve::flight::Engine(server.shared.clone());
        let Err(e) = engine.execute("SELECT 1 AS one", None).await else {
            panic!("a Flight SQL query ran beyond --max-queries");
        };
        assert_eq!(e.kind, silt_flight::ErrorKind::Busy, "{e}");
        assert!(e.message.contains("--max-queries 1"), "{e}");
    }
    drop(running);
    tokio::task::spawn_blocking(move || {
        assert_eq!(query(addr, "SELECT 1 AS one")[0]["one"], 1);
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
}

/// A query past `--query-timeout` is stopped: HTTP answers 408, and Flight SQL's engine gives
/// the Timeout kind (DEADLINE_EXCEEDED) with the same message; the server then answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_past_its_timeout_is_stopped_over_http_and_flight() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(&d.path().join("lake"));
    cfg.query_timeout = Duration::from_millis(200);
    let server = Server::start(cfg).await.unwrap();
    let addr = server.http_addr.unwrap();
    // Billions of rows: seconds of work at the least, far past the timeout.
    const SLOW: &str = "SELECT count(*) AS n FROM generate_series(1, 5000000000)";
    tokio::task::spawn_blocking(move || {
        let (s, v) = post(addr, "/v1/query", "application/sql", SLOW.as_bytes());
        assert_eq!(s, 408, "{v}");
        assert!(
            v["error"].as_str().unwrap().contains("--query-timeout"),
            "{v}"
        );
    })
    .await
    .unwrap();
    {
        use futures::StreamExt;
        use silt_flight::QueryEngine;
        let engine = silt_serve::flight::Engine(server.shared.clone());
        let e = match engine.execute(SLOW, None).await {
            Err(e) => e,
            Ok(mut batches) => loop {
                match batches.next().await {
                    Some(Err(e)) => break e,
                    Some(Ok(_)) => {}
                    None => panic!("the slow query finished within the timeout"),
                }
            },
        };
        assert_eq!(e.kind, silt_flight::ErrorKind::Timeout, "{e}");
        assert!(e.message.contains("--query-timeout"), "{e}");
    }
    tokio::task::spawn_blocking(move || {
        assert_eq!(query(addr, "SELECT 1 AS one")[0]["one"], 1);
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
}

/// A PackedForward frame with `chunk`: acked once durable, routed to its table, queryable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_frames_are_acked_and_routed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(&d.path().join("lake"));
    cfg.forward = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.routes = vec![Route::parse("docker.**=docker.nginx").unwrap()];
    let server = Server::start(cfg).await.unwrap();
    let (http, fwd) = (server.http_addr.unwrap(), server.forward_addr.unwrap());
    // [tag, entries(bin), {"chunk": "c1", "size": 3}] with entries [time, {"log": ..., "n": i}].
    let mut entries = Vec::new();
    for i in 0..3u32 {
        rmp::encode::write_array_len(&mut entries, 2).unwrap();
        rmp::encode::write_uint(&mut entries, 1_711_300_000 + u64::from(i)).unwrap();
        rmp::encode::write_map_len(&mut entries, 2).unwrap();
        rmp::encode::write_str(&mut entries, "log").unwrap();
        rmp::encode::write_str(&mut entries, &format!("line {i}")).unwrap();
        rmp::encode::write_str(&mut entries, "n").unwrap();
        rmp::encode::write_uint(&mut entries, u64::from(i)).unwrap();
    }
    let mut frame = Vec::new();
    rmp::encode::write_array_len(&mut frame, 3).unwrap();
    rmp::encode::write_str(&mut frame, "docker.abc123").unwrap();
    rmp::encode::write_bin(&mut frame, &entries).unwrap();
    rmp::encode::write_map_len(&mut frame, 2).unwrap();
    rmp::encode::write_str(&mut frame, "chunk").unwrap();
    rmp::encode::write_str(&mut frame, "c1").unwrap();
    rmp::encode::write_str(&mut frame, "size").unwrap();
    rmp::encode::write_uint(&mut frame, 3).unwrap();
    let mut s = tokio::net::TcpStream::connect(fwd).await.unwrap();
    s.write_all(&frame).await.unwrap();
    let mut ack = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut ack))
        .await
        .unwrap()
        .unwrap();
    assert!(ack[..n].windows(3).any(|w| w == b"ack"), "{:?}", &ack[..n]);
    // The same chunk again (a client that missed the ack) is acked and not stored twice.
    s.write_all(&frame).await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut ack))
        .await
        .unwrap()
        .unwrap();
    assert!(ack[..n].windows(3).any(|w| w == b"ack"));
    tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while count(http, "docker.nginx") < 3 {
            assert!(std::time::Instant::now() < deadline, "not visible");
            std::thread::sleep(Duration::from_millis(10));
        }
        let v = query(http, "SELECT log, n FROM docker.nginx ORDER BY n");
        assert_eq!(v.as_array().unwrap().len(), 3);
        assert_eq!(v[2]["log"], "line 2");
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
}

fn zeek_header() -> String {
    "#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n#path\tconn\n#open\t2024-03-24-17-00-00\n#fields\tts\tuid\tid.orig_h\n#types\ttime\tstring\taddr\n".to_string()
}

fn zeek_rows(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| {
            format!(
                "{}.000001\tC{i:08}\t10.0.0.{}\n",
                1_711_299_600 + i,
                i % 250
            )
        })
        .collect()
}

fn append(path: &std::path::Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn wait_count(addr: SocketAddr, table: &str, n: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let c = count(addr, table);
        if c == n {
            return;
        }
        assert!(c < n, "{table}: {c} rows, more than the {n} written");
        assert!(
            std::time::Instant::now() < deadline,
            "{table}: {c} of {n} rows after 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Followed Zeek logs: rows arrive, a rotation by rename loses nothing, and a restart resumes
/// where the log says it was (nothing read twice), with the header block kept per file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tailed_zeek_logs_survive_rotation_and_restart_exactly_once() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let logs = d.path().join("current");
    std::fs::create_dir_all(&logs).unwrap();
    let conn = logs.join("conn.log");
    append(&conn, &(zeek_header() + &zeek_rows(0, 100)));
    let tail_cfg = || {
        let mut cfg = config(&lake);
        cfg.tails =
            vec![
                silt_serve::tail::TailSpec::parse(&format!("zeek:{}/*.log", logs.display()))
                    .unwrap(),
            ];
        cfg
    };
    let server = Server::start(tail_cfg()).await.unwrap();
    let addr = server.http_addr.unwrap();
    let (c2, l2) = (conn.clone(), logs.clone());
    tokio::task::spawn_blocking(move || {
        wait_count(addr, "zeek.conn", 100);
        append(&c2, &zeek_rows(100, 50));
        std::fs::rename(&c2, l2.join("conn.log.1")).unwrap();
        append(&c2, &(zeek_header() + &zeek_rows(150, 30)));
        wait_count(addr, "zeek.conn", 180);
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
    let server = Server::start(tail_cfg()).await.unwrap();
    let addr = server.http_addr.unwrap();
    let c2 = conn.clone();
    tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(count(addr, "zeek.conn"), 180, "a restart read rows again");
        append(&c2, &zeek_rows(180, 20));
        wait_count(addr, "zeek.conn", 200);
        let v = query(
            addr,
            "SELECT count(DISTINCT uid) AS d, min(ts) AS lo FROM zeek.conn",
        );
        assert_eq!(v[0]["d"], 200);
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
}

/// util-linux `logger` over UDP and over TCP with octet counting (RFC 5424) and newline framing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syslog_from_logger_over_udp_and_tcp() {
    if silt_testkit::tool(&["logger"], "apt-get install bsdutils (util-linux logger)").is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(&d.path().join("lake"));
    let free = |tcp: bool| {
        if tcp {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
        } else {
            std::net::UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
        }
    };
    let (udp, tcp) = (free(false), free(true));
    cfg.syslogs = vec![
        silt_serve::syslog::SyslogSpec::parse(&format!("udp://{udp}")).unwrap(),
        silt_serve::syslog::SyslogSpec::parse(&format!("tcp://{tcp}=net.syslog")).unwrap(),
    ];
    let server = Server::start(cfg).await.unwrap();
    let addr = server.http_addr.unwrap();
    let bad_sender = tokio::task::spawn_blocking(move || {
        let logger = |args: &[&str]| {
            let st = std::process::Command::new("logger")
                .args(args)
                .status()
                .unwrap();
            assert!(st.success(), "logger {args:?}");
        };
        let (up, tp) = (udp.port().to_string(), tcp.port().to_string());
        for i in 0..3 {
            logger(&[
                "-d",
                "-n",
                "127.0.0.1",
                "-P",
                &up,
                "-t",
                "app",
                &format!("udp message {i}"),
            ]);
        }
        logger(&[
            "-T",
            "--octet-count",
            "-n",
            "127.0.0.1",
            "-P",
            &tp,
            "-t",
            "app",
            "counted message",
        ]);
        logger(&[
            "-T",
            "--rfc3164",
            "-n",
            "127.0.0.1",
            "-P",
            &tp,
            "-t",
            "app",
            "newline message",
        ]);
        // A datagram that is no syslog (not UTF-8): its reject names its sender.
        let bad = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        bad.send_to(b"<13>Mar 24 17:00:00 h app: \xff\xfe\n", udp)
            .unwrap();
        wait_count(addr, "syslog.messages", 3);
        wait_count(addr, "net.syslog", 2);
        let v = query(addr, "SELECT * FROM net.syslog");
        let text = v.to_string();
        assert!(
            text.contains("counted message") && text.contains("newline message"),
            "{text}"
        );
        bad.local_addr().unwrap()
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
    let mut rejects = String::new();
    let mut dirs = vec![d.path().join("lake/_rejects")];
    while let Some(dir) = dirs.pop() {
        for f in std::fs::read_dir(dir).unwrap() {
            let p = f.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                rejects += &std::fs::read_to_string(p).unwrap();
            }
        }
    }
    let bad_sender = bad_sender.to_string();
    assert!(
        rejects.contains(&format!("\"source\":\"syslog udp {bad_sender}\"")),
        "{rejects}"
    );
}

/// Rows the Delta log of `table` counts, after checking it names exactly the files silt lists
/// (on a thread of its own: the log blocks on a runtime of its own, which tokio refuses inside
/// the test's).
fn delta_rows(lake: &std::path::Path, table: &str) -> u64 {
    std::thread::scope(|s| s.spawn(|| delta_rows_here(lake, table)).join().unwrap())
}

fn delta_rows_here(lake: &std::path::Path, table: &str) -> u64 {
    let dir = lake.join(table);
    let log = silt_lake::delta::DeltaLog::open(&dir)
        .unwrap()
        .expect("the table has a Delta log");
    let mut listed: Vec<String> = silt_lake::layout::data_files(&dir)
        .unwrap()
        .into_iter()
        .map(|f| {
            f.path
                .strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    listed.sort();
    assert_eq!(log.files().unwrap(), listed);
    log.num_records().unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushes_commit_to_a_delta_log_and_a_restart_takes_a_dead_flushs_files_out() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let mut cfg = config(&lake);
    cfg.writer.table_format = silt_lake::TableFormat::Delta;
    cfg.flush_age = Duration::from_millis(200);
    let server = Server::start(cfg).await.unwrap();
    let addr = server.http_addr.unwrap();
    tokio::task::spawn_blocking(move || {
        for k in 0..3 {
            let (s, v) = post(
                addr,
                "/v1/ingest/app.events",
                "application/x-ndjson",
                &ndjson(k * 100, 100),
            );
            assert_eq!(s, 200, "{v}");
            std::thread::sleep(Duration::from_millis(400));
        }
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
    assert_eq!(delta_rows(&lake, "app.events"), 300);
    let version = std::thread::scope(|s| {
        s.spawn(|| {
            let log = silt_lake::delta::DeltaLog::open(&lake.join("app.events"))
                .unwrap()
                .unwrap();
            log.version().unwrap()
        })
        .join()
        .unwrap()
    });
    assert!(version >= 2, "a commit per flush: version {version}");

    // A flush that died after its commit: a copy of a file, committed, named by a journal
    // nobody holds.
    let dir = lake.join("app.events");
    let file = silt_lake::layout::data_files(&dir).unwrap()[0].path.clone();
    let copy = file.with_file_name("dead-flush.parquet");
    std::fs::copy(&file, &copy).unwrap();
    let rel = copy
        .strip_prefix(&lake)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    silt_lake::delta::commit_published(
        silt_lake::delta::Lake::Dir(&lake),
        std::slice::from_ref(&rel),
        false,
        &Default::default(),
        "test",
    )
    .unwrap();
    std::fs::write(
        lake.join("_silt/imports/20240101T000000-deadbeef.journal"),
        format!("{rel}\n"),
    )
    .unwrap();
    assert!(delta_rows(&lake, "app.events") > 300);
    // The restart recovers (inside the server's async start) and replays nothing twice.
    let server = Server::start(config(&lake)).await.unwrap();
    assert!(!copy.exists());
    assert_eq!(delta_rows(&lake, "app.events"), 300);
    let addr = server.http_addr.unwrap();
    tokio::task::spawn_blocking(move || {
        let v = query(
            addr,
            "SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events",
        );
        assert_eq!(v[0]["n"], 300);
        assert_eq!(v[0]["d"], 300);
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
}

/// Read-your-writes: `?wait=visible` answers once a query sees the events, and a query with
/// `?after=SEQ` runs once the record is queryable; either way every event posted is counted
/// by the very next query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_after_wait_visible_or_after_seq_sees_the_events() {
    let d = tempfile::tempdir().unwrap();
    let server = Server::start(config(&d.path().join("lake"))).await.unwrap();
    let addr = server.http_addr.unwrap();
    tokio::task::spawn_blocking(move || {
        for i in 1..=40i64 {
            let body = format!("{{\"id\":{i}}}\n");
            if i % 2 == 0 {
                let (s, v) = post(
                    addr,
                    "/v1/ingest/app.events?wait=visible",
                    "application/x-ndjson",
                    body.as_bytes(),
                );
                assert_eq!((s, &v["visible"]), (200, &serde_json::json!(true)), "{v}");
                assert_eq!(count(addr, "app.events"), i);
            } else {
                let (s, v) = post(
                    addr,
                    "/v1/ingest/app.events",
                    "application/x-ndjson",
                    body.as_bytes(),
                );
                assert_eq!(s, 200, "{v}");
                let seq = v["seq"].as_u64().unwrap();
                let (s, r) = post(
                    addr,
                    &format!("/v1/query?format=json&after={seq}"),
                    "application/sql",
                    b"SELECT count(*) AS n FROM app.events",
                );
                assert_eq!(s, 200, "{r}");
                assert_eq!(r[0]["n"], i, "after {seq}");
            }
        }
        let (s, v) = post(
            addr,
            "/v1/query?after=1000000",
            "application/sql",
            b"SELECT 1",
        );
        assert_eq!(s, 400, "{v}");
        let (s, v) = post(
            addr,
            "/v1/ingest/app.events?wait=forever",
            "application/x-ndjson",
            b"{}",
        );
        assert_eq!(s, 400, "{v}");
        // A query string that does not parse is a JSON error like the others.
        for path in ["/v1/query?after=-1", "/v1/query?after=abc"] {
            let (s, v) = post(addr, path, "application/sql", b"SELECT 1");
            assert_eq!(s, 400, "{v}");
            assert!(v["error"].as_str().unwrap().contains("after"), "{v}");
        }
        // A parameter an endpoint does not know is refused with the ones it knows, and nothing
        // of the body is stored.
        let (s, v) = post(
            addr,
            "/v1/ingest/app.events?wiat=visible",
            "application/x-ndjson",
            b"{\"id\": 999999}",
        );
        assert_eq!(s, 400, "{v}");
        let e = v["error"].as_str().unwrap();
        assert!(e.contains("wiat") && e.contains("wait"), "{v}");
        let (s, v) = post(addr, "/v1/query?fromat=csv", "application/sql", b"SELECT 1");
        assert_eq!(s, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains("fromat"), "{v}");
        // Unknown endpoints and methods answer JSON too.
        let (s, v) = post(addr, "/v1/nope", "application/sql", b"SELECT 1");
        assert_eq!(s, 404, "{v}");
        assert!(v["error"].as_str().unwrap().contains("/v1/query"), "{v}");
        let (s, v) = post(addr, "/health", "application/json", b"{}");
        assert_eq!(s, 405, "{v}");
        assert!(v["error"].as_str().unwrap().contains("method"), "{v}");
        // An empty ?q= is no SQL, so the body is the SQL.
        let (s, v) = post(
            addr,
            "/v1/query?q=&format=json",
            "application/sql",
            b"SELECT 7 AS n",
        );
        assert_eq!(s, 200, "{v}");
        assert_eq!(v[0]["n"], 7, "{v}");
        // The SQL given twice is refused rather than one of them run.
        let (s, v) = post(
            addr,
            "/v1/query?q=SELECT%201",
            "application/sql",
            b"SELECT 2",
        );
        assert_eq!(s, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains("came twice"), "{v}");
        let (s, v) = post(
            addr,
            "/v1/query?format=json",
            "application/sql",
            b"SELECT count(*) AS n FROM app.events WHERE id = 999999",
        );
        assert_eq!(s, 200, "{v}");
        assert_eq!(v[0]["n"], 0, "{v}");
    })
    .await
    .unwrap();
    server.shutdown().await.unwrap();
}
