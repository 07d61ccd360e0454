//! Kafka in (issue 24), against a real broker: Kafka 4.3.1 in KRaft mode started by
//! `scripts/kafka.sh`, records produced by `scripts/kafka/client.py` (confluent-kafka from
//! `scripts/pyenv.sh`).
//!
//! - every reader silt has, through topics with each message compression, gives the rows a file
//!   import of the same records gives; a poison message is rejected with its topic, partition
//!   and offset, and its partition keeps flowing;
//! - exactly once with two `silt serve` members of one group on one lake, one of them SIGKILLed
//!   at random moments (10 times) and started again while records keep arriving: every id is in
//!   the lake once, and the committed offsets are the end offsets;
//! - the broker stopped for 12 s and started again while a server consumes, once within the
//!   group's session and once past a 6 s session (the member loses its partitions and must join
//!   again): nothing lost or doubled, and the server says the broker is away;
//! - `--kafka-meta`: message keys, headers, times and offsets as columns of every format's rows;
//! - into an object-store lake (MinIO): `silt import kafka` twice and a serve member, every id
//!   once.
//!
//! The tests share one broker and run one at a time (a lock), each on topics of its own.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{lake_rejects, ok, p};

static BROKER: Mutex<()> = Mutex::new(());

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kafka_sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(root().join("scripts/kafka.sh"))
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

/// The broker's address and the Python with confluent-kafka, or None after a skip message (a
/// failure in CI).
fn setup() -> Option<(String, String)> {
    let broker = match kafka_sh(&["start"]) {
        Ok(out) => out.lines().last().unwrap_or("").to_string(),
        Err(e) => return silt_testkit::skip(&format!("no Kafka broker (scripts/kafka.sh): {e}")),
    };
    let py = Command::new("bash")
        .arg(root().join("scripts/pyenv.sh"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match py {
        Some(py) if !py.is_empty() => Some((broker, py)),
        _ => silt_testkit::skip("no Python with confluent-kafka (scripts/pyenv.sh)"),
    }
}

/// A topic name of its own for this run.
fn topic(base: &str, partitions: u32) -> String {
    let t = format!(
        "{base}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 1_000_000_000
    );
    kafka_sh(&["topic", &t, &partitions.to_string()]).expect("create topic");
    t
}

fn client(py: &str, args: &[&str]) -> String {
    let out = Command::new(py)
        .arg(root().join("scripts/kafka/client.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The single-row, single-column result of `sql` over `lake`, as text.
fn scalar(lake: &Path, sql: &str) -> String {
    let out = ok(&["query", "--lake", p(lake), "--format", "csv", sql]);
    out.lines().nth(1).unwrap_or("").trim().to_string()
}

fn counts(lake: &Path, table: &str) -> (u64, u64) {
    let s = scalar(
        lake,
        &format!("SELECT count(*) || '/' || count(DISTINCT id) FROM {table}"),
    );
    let (a, b) = s.split_once('/').unwrap_or(("0", "0"));
    (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
}

/// `silt import kafka` of `topics` (NAME=FORMAT[:TABLE]) into `lake`; asserts success and
/// returns its summary (stderr).
fn import_kafka(broker: &str, group: &str, topics: &[String], lake: &Path) -> String {
    let mut args = vec!["import", "kafka", "--kafka", broker, "--group", group];
    for t in topics {
        args.extend(["--topic", t.as_str()]);
    }
    args.extend(["--lake", p(lake), "--quiet"]);
    let out = common::silt(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "silt {args:?}: {stderr}");
    stderr
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    BROKER.lock().unwrap_or_else(|e| e.into_inner())
}

/// `src` (gzip) unzipped to `dst` (client.py sends lines of a plain file).
fn gunzip(src: &Path, dst: &Path) {
    use std::io::Read;
    let mut s = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(src).unwrap())
        .read_to_end(&mut s)
        .unwrap();
    std::fs::write(dst, s).unwrap();
}

/// `client.py consume-avro BROKER TOPIC N ARGS...` (fastavro), one JSON object per message.
fn consume_avro(
    py: &str,
    broker: &str,
    topic: &str,
    n: u64,
    args: &[&str],
) -> Vec<serde_json::Value> {
    let n = n.to_string();
    let mut all = vec!["consume-avro", broker, topic, n.as_str()];
    all.extend(args);
    client(py, &all)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A TCP port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// POSTs the NDJSON file `body` to a server's `/v1/ingest/TABLE` until it answers 200 (it may
/// still be starting), at most 30 s; returns the last status.
fn post_ndjson(port: u16, table: &str, body: &Path) -> String {
    let t0 = Instant::now();
    loop {
        let r = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-H",
                "Content-Type: application/x-ndjson",
                "--data-binary",
                &format!("@{}", p(body)),
                &format!("http://127.0.0.1:{port}/v1/ingest/{table}"),
            ])
            .output()
            .unwrap();
        let code = String::from_utf8_lossy(&r.stdout).to_string();
        if code == "200" || t0.elapsed() > Duration::from_secs(30) {
            return code;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn every_reader_through_compressed_topics_and_a_poison_message() {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let Some(eve) = silt_testkit::corpus_path("suricata/surevego-eve.json") else {
        return;
    };
    let Some(conn) = silt_testkit::corpus_path("zeek-json/vast-conn.log.json.gz") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    // Zeek JSON unzipped (client.py sends lines of a plain file).
    let conn_json = d.path().join("conn.json");
    gunzip(&conn, &conn_json);
    // RASP-style netdata rows (no header) and generic records for msgpack.
    let netdata = d.path().join("netdata.csv");
    let mut rows = String::new();
    let records = d.path().join("records.ndjson");
    let mut recs = String::new();
    for i in 0..5000u64 {
        rows.push_str(&format!(
            "2024-03-24T17:{:02}:{:02}Z,agent{},10.1.{}.{},192.0.2.{},{},{},{}\n",
            i / 60 % 60,
            i % 60,
            i % 4,
            i % 256,
            i % 100,
            i % 254 + 1,
            [80, 443][(i % 2) as usize],
            i * 7 % 1500,
            6 + (i % 2) * 11
        ));
        recs.push_str(&format!(
            "{{\"id\":{i},\"msg\":\"event {i}\",\"n\":{},\"tags\":[\"a\",\"b{}\"]}}\n",
            i * 3,
            i % 5
        ));
    }
    std::fs::write(&netdata, rows).unwrap();
    std::fs::write(&records, recs).unwrap();

    let (t_eve, t_conn, t_net, t_mp) = (
        topic("eve", 3),
        topic("zeek-conn", 2),
        topic("netdata", 4),
        topic("records", 2),
    );
    let n_eve: u64 = client(
        &py,
        &[
            "produce-file",
            &broker,
            &t_eve,
            p(&eve),
            "--compression",
            "zstd",
            "--poison-at",
            "5",
        ],
    )
    .parse()
    .unwrap();
    for (t, f, c, extra) in [
        (&t_conn, &conn_json, "gzip", None),
        (&t_net, &netdata, "lz4", None),
        (&t_mp, &records, "snappy", Some("--msgpack")),
    ] {
        let mut args = vec!["produce-file", &broker, t, p(f), "--compression", c];
        args.extend(extra);
        client(&py, &args);
    }
    let lake = d.path().join("lake");
    let out = common::silt(&[
        "import",
        "kafka",
        "--kafka",
        &broker,
        "--group",
        &format!("readers-{t_eve}"),
        "--topic",
        &format!("{t_eve}=suricata"),
        "--topic",
        &format!("{t_conn}=zeek:zeek.conn"),
        "--topic",
        &format!("{t_net}=csv:rasp.netdata"),
        "--topic-columns",
        &format!("{t_net}=ts,agent,src,dst,dst_port,bytes,proto"),
        "--topic",
        &format!("{t_mp}=msgpack:app.records"),
        "--lake",
        p(&lake),
        "--quiet",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(" 1 rejects"), "{stderr}");

    // The same records imported from files give the same rows.
    let reference = d.path().join("ref");
    // conn.json: the file name names the Zeek log (its records have no _path), zeek.conn.
    for (fmt, f) in [("suricata", &eve), ("zeek", &conn_json)] {
        ok(&["import", fmt, p(f), "--lake", p(&reference), "--quiet"]);
    }
    let tables: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&["tables", "--lake", p(&reference), "--json"])).unwrap();
    let mut total_eve = 0;
    for t in &tables {
        let name = t["table"].as_str().unwrap();
        let q = format!("SELECT count(*) FROM {name}");
        assert_eq!(scalar(&lake, &q), scalar(&reference, &q), "{name}");
        if name.starts_with("suricata.") {
            total_eve += t["rows"].as_u64().unwrap();
        }
    }
    assert!(tables.len() >= 3, "{tables:?}");
    assert!(total_eve > 0 && total_eve <= n_eve);
    let q = "SELECT sum(orig_bytes) FROM zeek.conn";
    assert_eq!(scalar(&lake, q), scalar(&reference, q));
    assert_eq!(
        scalar(&lake, "SELECT count(*) || '/' || sum(bytes) || '/' || count(DISTINCT agent) FROM rasp.netdata"),
        format!("5000/{}/4", (0..5000u64).map(|i| i * 7 % 1500).sum::<u64>())
    );
    assert_eq!(
        scalar(
            &lake,
            "SELECT count(*) || '/' || sum(n) || '/' || count(DISTINCT id) FROM app.records"
        ),
        format!("5000/{}/5000", (0..5000u64).map(|i| i * 3).sum::<u64>())
    );
    // The poison message: rejected with its topic, partition and offset; everything after it
    // in its partition arrived (the counts above).
    let rejects = lake_rejects(&lake);
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    let r = &rejects[0];
    assert!(
        r["source"]
            .as_str()
            .unwrap()
            .starts_with(&format!("kafka {t_eve}[")),
        "{r}"
    );
    assert_eq!(r["raw"], "{\"broken", "{r}");
    assert!(
        r["line"].as_u64().unwrap() <= 6,
        "the offset within its partition: {r}"
    );

    // Running again reads nothing twice.
    let again = import_kafka(
        &broker,
        &format!("readers-{t_eve}"),
        &[
            format!("{t_eve}=suricata"),
            format!("{t_mp}=msgpack:app.records"),
        ],
        &lake,
    );
    assert!(again.contains("kafka: 0 messages"), "{again}");
    assert_eq!(
        scalar(&lake, "SELECT count(*) FROM app.records"),
        "5000",
        "a second import of the same topics adds nothing"
    );
}

/// `--kafka-meta all`: every row carries its own message's topic, partition, offset, time, key
/// and headers, whatever the format (JSON, EVE spread over tables, MessagePack, header-less CSV);
/// the rows are otherwise those of an import without it, and a reject keeps its original bytes.
#[test]
fn message_attributes_as_columns() {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let Some(eve) = silt_testkit::corpus_path("suricata/surevego-eve.json") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let n = 300u64;
    let records = d.path().join("records.ndjson");
    let rows = d.path().join("rows.csv");
    let (mut recs, mut csv) = (String::new(), String::new());
    for i in 0..n {
        recs.push_str(&format!("{{\"id\":{i},\"v\":\"x{i}\"}}\n"));
        csv.push_str(&format!("{i},agent{}\n", i % 3));
    }
    std::fs::write(&records, recs).unwrap();
    std::fs::write(&rows, csv).unwrap();
    let (t_json, t_csv, t_mp, t_eve) = (
        topic("meta-json", 3),
        topic("meta-csv", 2),
        topic("meta-mp", 2),
        topic("meta-eve", 2),
    );
    for (t, f, extra) in [
        (&t_json, &records, None),
        (&t_csv, &rows, None),
        (&t_mp, &records, Some("--msgpack")),
    ] {
        let mut args = vec!["produce-file", &broker, t, p(f), "--meta"];
        args.extend(extra);
        client(&py, &args);
    }
    let n_eve: u64 = client(
        &py,
        &[
            "produce-file",
            &broker,
            &t_eve,
            p(&eve),
            "--meta",
            "--poison-at",
            "3",
        ],
    )
    .parse()
    .unwrap();
    let lake = d.path().join("lake");
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let out = common::silt(&[
        "import",
        "kafka",
        "--kafka",
        &broker,
        "--group",
        &format!("meta-{t_json}"),
        "--topic",
        &format!("{t_json}=json:app.json"),
        "--topic",
        &format!("{t_csv}=csv:app.csv"),
        "--topic-columns",
        &format!("{t_csv}=id,agent"),
        "--topic",
        &format!("{t_mp}=msgpack:app.mp"),
        "--topic",
        &format!("{t_eve}=suricata"),
        "--kafka-meta",
        "all",
        "--lake",
        p(&lake),
        "--quiet",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(" 1 rejects"), "{stderr}");
    let unkeyed = (0..n).filter(|i| i % 50 == 7).count();
    for (table, t) in [
        ("app.json", &t_json),
        ("app.csv", &t_csv),
        ("app.mp", &t_mp),
    ] {
        let q = format!(
            "SELECT count(*) || '/' || count(DISTINCT id) \
             || '/' || sum(CASE WHEN _kafka_key = CAST(id AS VARCHAR) THEN 1 ELSE 0 END) \
             || '/' || sum(CASE WHEN _kafka_key IS NULL THEN 1 ELSE 0 END) \
             || '/' || sum(CASE WHEN _kafka_headers['n'] = CAST(id AS VARCHAR) THEN 1 ELSE 0 END) \
             || '/' || min(_kafka_headers['bin']) || '/' || min(_kafka_headers['tag']) \
             || '/' || min(cardinality(_kafka_headers)) \
             || '/' || count(DISTINCT _kafka_partition || ':' || _kafka_offset) \
             || '/' || min(_kafka_topic) || '/' || max(_kafka_topic) \
             || '/' || CAST(min(_kafka_timestamp) >= to_timestamp({}) AS VARCHAR) \
             FROM {table}",
            t0 - 3600
        );
        assert_eq!(
            scalar(&lake, &q),
            format!(
                "{n}/{n}/{}/{unkeyed}/{n}/\\xffok/b/3/{n}/{t}/{t}/true",
                n as usize - unkeyed
            ),
            "{table}"
        );
        // No trace of the splice, and the record's own columns are all there.
        let cols = ok(&[
            "query",
            "--lake",
            p(&lake),
            "--format",
            "csv",
            &format!("SELECT * FROM {table} LIMIT 1"),
        ]);
        let header = cols.lines().next().unwrap_or("");
        assert!(
            header.starts_with("id,") && !header.contains("__silt_kafka_row"),
            "{header}"
        );
    }
    // EVE: every line is one row in its event_type's table, each with its own message.
    let tables: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&["tables", "--lake", p(&lake), "--json"])).unwrap();
    let (mut rows_eve, mut distinct) = (0u64, 0u64);
    for t in &tables {
        let name = t["table"].as_str().unwrap();
        if name.starts_with("suricata.") {
            rows_eve += t["rows"].as_u64().unwrap();
            distinct += scalar(
                &lake,
                &format!(
                    "SELECT count(DISTINCT _kafka_partition || ':' || _kafka_offset) FROM {name} \
                     WHERE _kafka_key IS NOT NULL OR _kafka_headers['n'] IS NOT NULL"
                ),
            )
            .parse::<u64>()
            .unwrap();
        }
    }
    assert_eq!(rows_eve, n_eve);
    assert_eq!(
        distinct, n_eve,
        "every EVE row has its own message's attributes"
    );
    // The poison message's reject holds the bytes that were sent.
    let rejects = lake_rejects(&lake);
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    assert_eq!(rejects[0]["raw"], "{\"broken", "{}", rejects[0]);

    // A format whose records have nowhere to carry the message's place is refused up front.
    let out = common::silt(&[
        "import",
        "kafka",
        "--kafka",
        &broker,
        "--topic",
        "x=syslog",
        "--kafka-meta",
        "key",
        "--lake",
        p(&lake),
    ]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("--kafka-meta") && e.contains("syslog"),
        "{e}"
    );
}

/// A `silt serve` group member on `lake`.
fn member(lake: &Path, name: &str, broker: &str, topic: &str, group: &str, log: &Path) -> Child {
    member_with(
        lake,
        name,
        (broker, topic, group),
        log,
        &["--http", "none", "--flush-age", "1s"],
    )
}

/// [`member`] with the options `more` (which must give `--http` and `--flush-age`).
fn member_with(
    lake: &Path,
    name: &str,
    (broker, topic, group): (&str, &str, &str),
    log: &Path,
    more: &[&str],
) -> Child {
    member_env(lake, name, (broker, topic, group), log, more, &[])
}

/// [`member_with`] with the variables `env` added to the member's environment.
fn member_env(
    lake: &Path,
    name: &str,
    (broker, topic, group): (&str, &str, &str),
    log: &Path,
    more: &[&str],
    env: &[(&str, &str)],
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_silt"))
        .envs(env.iter().copied())
        .args([
            "serve",
            "--lake",
            p(lake),
            "--instance",
            name,
            "--kafka",
            broker,
            "--group",
            group,
            "--topic",
            &format!("{topic}=json:app.ids"),
        ])
        .args(more)
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        )
        .spawn()
        .unwrap()
}

/// Sends SIGTERM and waits up to 60 s for the server to end. If it does not, the failure shows
/// its log (`log`) and every thread's stack (from gdb, when installed) before it is killed.
fn stop(mut c: Child, log: &Path) {
    let _ = Command::new("kill")
        .args(["-TERM", &c.id().to_string()])
        .status();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if c.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stacks = Command::new("timeout")
        .args([
            "60",
            "gdb",
            "-p",
            &c.id().to_string(),
            "-batch",
            "-ex",
            "thread apply all bt",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| format!("(no stacks: gdb: {e})"));
    let _ = c.kill();
    let _ = c.wait();
    panic!(
        "silt serve did not stop within 60 s of SIGTERM; its log:\n{}\nits threads:\n{stacks}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// Waits until `table` holds `n` rows (or `secs` pass); returns the last counts.
fn wait_rows(lake: &Path, table: &str, n: u64, secs: u64) -> (u64, u64) {
    wait_rows_at(&["--lake", p(lake)], table, n, secs)
}

/// [`wait_rows`] asking `at` (`--lake DIR` or `--server URL`).
fn wait_rows_at(at: &[&str], table: &str, n: u64, secs: u64) -> (u64, u64) {
    let t0 = Instant::now();
    let sql = format!("SELECT count(*) || '/' || count(DISTINCT id) FROM {table}");
    loop {
        // The table appears with the first flush (and may be missing again for a moment
        // while a member's interrupted flush is undone).
        let mut args = vec!["query"];
        args.extend(at);
        args.extend(["--format", "csv", &sql]);
        let q = common::silt(&args);
        let text = String::from_utf8_lossy(&q.stdout).to_string();
        let c = text
            .lines()
            .nth(1)
            .and_then(|l| l.trim().split_once('/'))
            .map(|(a, b)| (a.parse().unwrap_or(0), b.parse().unwrap_or(0)))
            .unwrap_or((0, 0));
        if c.0 >= n || t0.elapsed() > Duration::from_secs(secs) {
            return c;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn exactly_once_with_two_members_one_killed_ten_times() {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let t = topic("ids", 6);
    let group = format!("eo-{t}");
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let logs = [d.path().join("a.log"), d.path().join("b.log")];
    let names = ["a", "b"];
    let chunk = 20_000u64;
    client(&py, &["produce-ids", &broker, &t, "0", &chunk.to_string()]);
    let mut members: Vec<Option<Child>> = (0..2)
        .map(|i| Some(member(&lake, names[i], &broker, &t, &group, &logs[i])))
        .collect();
    // The lake holds a first flush (with its Kafka positions) before the first kill, so that a
    // member coming back has something to resume from. Without it, a kill before the first flush
    // leaves the group waiting for the dead member's session to time out, and the later kills
    // can all land in that wait, so nothing is ever resumed from the lake (a CI run saw it).
    let (first, _) = wait_rows(&lake, "app.ids", 1, 120);
    assert!(first > 0, "nothing reached the lake in 120 s");
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill schedule seed {seed}");
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut produced = chunk;
    for k in 0..10 {
        // Records keep arriving while members die and come back.
        client(
            &py,
            &[
                "produce-ids",
                &broker,
                &t,
                &produced.to_string(),
                &chunk.to_string(),
            ],
        );
        produced += chunk;
        std::thread::sleep(Duration::from_millis(200 + rnd() % 2500));
        let i = (rnd() % 2) as usize;
        let mut c = members[i].take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
        eprintln!("kill {k}: member {} SIGKILLed", names[i]);
        std::thread::sleep(Duration::from_millis(rnd() % 1500));
        members[i] = Some(member(&lake, names[i], &broker, &t, &group, &logs[i]));
    }
    let (rows, distinct) = wait_rows(&lake, "app.ids", produced, 180);
    for (c, log) in members.into_iter().zip(&logs) {
        if let Some(c) = c {
            stop(c, log);
        }
    }
    let (rows2, distinct2) = counts(&lake, "app.ids");
    let logs_text: String = logs
        .iter()
        .map(|l| std::fs::read_to_string(l).unwrap_or_default())
        .collect();
    assert_eq!(
        (rows, distinct),
        (produced, produced),
        "before stopping; logs:\n{logs_text}"
    );
    assert_eq!((rows2, distinct2), (produced, produced), "{logs_text}");
    let v: serde_json::Value =
        serde_json::from_str(&client(&py, &["offsets", &broker, &group, &t])).unwrap();
    assert_eq!(
        v["committed"], v["end"],
        "committed offsets are the end offsets"
    );
    assert!(
        logs_text.contains("(lake)"),
        "members resumed from the lake:\n{logs_text}"
    );
}

/// A member stopped (SIGSTOP) past its group session while it holds records it has not flushed
/// is a zombie: the other member takes its partitions over and writes those records. When the
/// stopped one resumes, its flush finds the partitions claimed by the other member: it removes
/// what it published, records nothing and exits with status 75, and the lake holds every record
/// once. (Without the fence the lake ends with each of them twice.)
#[test]
fn a_member_stopped_past_its_session_is_fenced() {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let t = topic("fence", 3);
    let group = format!("fz-{t}");
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let logs = [d.path().join("a.log"), d.path().join("b.log")];
    let n = 20_000u64;
    client(&py, &["produce-ids", &broker, &t, "0", &n.to_string()]);
    let short_session = [
        "--kafka-option",
        "session.timeout.ms=6000",
        "--kafka-option",
        "heartbeat.interval.ms=1000",
    ];
    let port = free_port();
    let http = format!("127.0.0.1:{port}");
    let server = format!("http://{http}");
    let mut a_args = vec!["--http", http.as_str(), "--flush-age", "10m"];
    a_args.extend(short_session);
    let mut a = member_with(&lake, "a", (&broker, &t, &group), &logs[0], &a_args);
    // Member a has read every record (its queries see them) but flushed none of them.
    assert_eq!(
        wait_rows_at(&["--server", &server], "app.ids", n, 120),
        (n, n),
        "member a consumed every record"
    );
    assert_eq!(
        wait_rows(&lake, "app.ids", 1, 0),
        (0, 0),
        "a flushed nothing"
    );
    let signal = |sig: &str, c: &Child| {
        assert!(Command::new("kill")
            .args([sig, &c.id().to_string()])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP", &a);
    let mut b_args = vec!["--http", "none", "--flush-age", "1s"];
    b_args.extend(short_session);
    let b = member_with(&lake, "b", (&broker, &t, &group), &logs[1], &b_args);
    let read = |l: &Path| std::fs::read_to_string(l).unwrap_or_default();
    assert_eq!(
        wait_rows(&lake, "app.ids", n, 120),
        (n, n),
        "member b took every partition over once a's session ended; b's log:\n{}",
        read(&logs[1])
    );
    signal("-CONT", &a);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = a.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = a.kill();
            panic!("the resumed zombie did not stop: {}", read(&logs[0]));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let a_log = read(&logs[0]);
    assert_eq!(status.code(), Some(75), "{a_log}");
    assert!(
        a_log.contains("fenced: ") && a_log.contains("instance \"b\""),
        "a says why it stopped:\n{a_log}"
    );
    assert_eq!(counts(&lake, "app.ids"), (n, n), "{a_log}");
    // Member b goes on alone.
    client(
        &py,
        &["produce-ids", &broker, &t, &n.to_string(), &n.to_string()],
    );
    let after = wait_rows(&lake, "app.ids", 2 * n, 120);
    stop(b, &logs[1]);
    assert_eq!(after, (2 * n, 2 * n), "{}", read(&logs[1]));
    assert_eq!(counts(&lake, "app.ids"), (2 * n, 2 * n));
    let v: serde_json::Value =
        serde_json::from_str(&client(&py, &["offsets", &broker, &group, &t])).unwrap();
    assert_eq!(
        v["committed"], v["end"],
        "committed offsets are the end offsets"
    );
}

#[test]
fn broker_restart_while_consuming() {
    broker_away_while_consuming("restart", &[], false);
}

/// The broker away for longer than the group's session (6 s here): the member's session ends
/// (librdkafka's SESSTMOUT), it gives up its partitions, and it must join the group again once
/// the broker is back and read on from where the lake ends.
#[test]
fn broker_away_longer_than_the_session() {
    broker_away_while_consuming(
        "away",
        &[
            "--kafka-option",
            "session.timeout.ms=6000",
            "--kafka-option",
            "heartbeat.interval.ms=1000",
        ],
        true,
    );
}

/// SIGTERM while the broker is down: the server still stops, promptly, with every record it
/// consumed in the lake. It cannot commit or leave its group; the lake holds its positions, so
/// a restart reads on from there. (rdkafka's drop of the consumer waited for librdkafka to leave
/// the group without a bound: 43 s in most runs, more than a minute in some.)
#[test]
fn stops_while_the_broker_is_down() {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let t = topic("down", 3);
    let group = format!("rs-{t}");
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let log = d.path().join("serve.log");
    let n = 20_000u64;
    client(&py, &["produce-ids", &broker, &t, "0", &n.to_string()]);
    let m = member_env(
        &lake,
        "r",
        (&broker, &t, &group),
        &log,
        &["--http", "none", "--flush-age", "1s"],
        &[("SILT_LOG", "warn,silt_serve::kafka=info")],
    );
    assert_eq!(wait_rows(&lake, "app.ids", n, 60).0, n);
    kafka_sh(&["stop"]).expect("stop the broker");
    let t0 = Instant::now();
    stop(m, &log);
    let took = t0.elapsed();
    let back = kafka_sh(&["start"]).expect("start the broker again");
    assert_eq!(back.lines().last(), Some(broker.as_str()), "same address");
    assert_eq!(counts(&lake, "app.ids"), (n, n));
    // A bound on a hang, not a speed target: the consumer's close waits at most 5 s.
    assert!(took < Duration::from_secs(30), "stopped in {took:?}");
}

/// A member consumes 20,000 records, the broker stops for 12 s and starts again, 20,000 more
/// arrive: every record is in the lake once. The member logs librdkafka's account of its group
/// and connections (debug), which a failure prints.
fn broker_away_while_consuming(name: &str, more: &[&str], session_ends: bool) {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let t = topic(name, 3);
    let group = format!("rs-{t}");
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let log = d.path().join("serve.log");
    let first = 20_000u64;
    client(&py, &["produce-ids", &broker, &t, "0", &first.to_string()]);
    let mut args = vec![
        "--http",
        "none",
        "--flush-age",
        "1s",
        "--kafka-option",
        "debug=cgrp,broker",
    ];
    args.extend(more);
    let m = member_env(
        &lake,
        "r",
        (&broker, &t, &group),
        &log,
        &args,
        &[("SILT_LOG", "warn,silt_serve::kafka=info,silt_kafka=debug")],
    );
    assert_eq!(wait_rows(&lake, "app.ids", first, 60).0, first);
    kafka_sh(&["stop"]).expect("stop the broker");
    std::thread::sleep(Duration::from_secs(12));
    let back = kafka_sh(&["start"]).expect("start the broker again");
    assert_eq!(back.lines().last(), Some(broker.as_str()), "same address");
    client(
        &py,
        &["produce-ids", &broker, &t, &first.to_string(), "20000"],
    );
    let (rows, distinct) = wait_rows(&lake, "app.ids", 2 * first, 120);
    stop(m, &log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!((rows, distinct), (2 * first, 2 * first), "{text}");
    assert_eq!(counts(&lake, "app.ids"), (2 * first, 2 * first), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("kafka:") && l.contains("WARN")),
        "the server says the broker is away:\n{text}"
    );
    if session_ends {
        assert!(
            text.lines()
                .any(|l| l.contains("WARN") && l.contains("SESSTMOUT")),
            "the member's session ended while the broker was away:\n{text}"
        );
        assert!(
            text.lines()
                .filter(|l| l.contains("kafka: assigned"))
                .count()
                >= 2,
            "the member was assigned its partitions again:\n{text}"
        );
    }
}

#[test]
fn export_produces_query_rows_that_read_back_equal() {
    let _g = lock();
    let Some((broker, _py)) = setup() else { return };
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let input = d.path().join("in.ndjson");
    let mut s = String::new();
    for i in 0..3000u64 {
        s.push_str(&format!(
            "{{\"id\":{i},\"sev\":{},\"sig\":\"rule {}\",\"nested\":{{\"a\":{i}}}}}\n",
            i % 4,
            i % 9
        ));
    }
    std::fs::write(&input, s).unwrap();
    ok(&["import", "json", p(&input), "--lake", p(&lake), "--quiet"]);
    let t = topic("alerts", 3);
    let sql = "SELECT id, sig, nested FROM json.in WHERE sev <= 1";
    let out = common::silt(&[
        "export",
        "--lake",
        p(&lake),
        "--kafka",
        &broker,
        "--topic",
        &t,
        "--key",
        "id",
        sql,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("exported 1500 rows"), "{stderr}");
    let back = d.path().join("back");
    import_kafka(
        &broker,
        &format!("g-{t}"),
        &[format!("{t}=json:alerts.back")],
        &back,
    );
    let q =
        "SELECT count(*) || '/' || sum(id) || '/' || sum(nested.a) || '/' || count(DISTINCT sig)";
    assert_eq!(
        scalar(&back, &format!("{q} FROM alerts.back")),
        scalar(&lake, &format!("{q} FROM json.in WHERE sev <= 1"))
    );
    // The same from a lake in an object store (MinIO): the same rows arrive.
    if let Some(env) = common::minio() {
        let s3 = format!("s3://{}/lake", common::bucket("export"));
        let silt_env = |args: &[&str]| {
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_silt"))
                .env_remove("AWS_PROFILE")
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .args(args)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "silt {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8_lossy(&o.stderr).into_owned()
        };
        silt_env(&["import", "json", p(&input), "--lake", &s3, "--quiet"]);
        let t2 = topic("alerts-s3", 3);
        let said = silt_env(&[
            "export", "--lake", &s3, "--kafka", &broker, "--topic", &t2, "--key", "id", sql,
        ]);
        assert!(said.contains("exported 1500 rows"), "{said}");
        let back2 = d.path().join("back2");
        import_kafka(
            &broker,
            &format!("g-{t2}"),
            &[format!("{t2}=json:alerts.back")],
            &back2,
        );
        assert_eq!(
            scalar(&back2, &format!("{q} FROM alerts.back")),
            scalar(&back, &format!("{q} FROM alerts.back"))
        );
    }
    // A key column that is not in the result is refused before anything is produced.
    let bad = common::silt(&[
        "export",
        "--lake",
        p(&lake),
        "--kafka",
        &broker,
        "--topic",
        &t,
        "--key",
        "nope",
        sql,
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no such column"));
}

/// `silt export --message-format avro`: Suricata alerts (unsigned 64-bit flow ids, nested
/// records) and Zeek connections (addresses, ports, durations, lists) as single-object encoded
/// Avro, read back by fastavro with the schemas silt wrote (whose fingerprints fastavro computes
/// itself): every row, every value.
#[test]
fn export_avro_reads_back_with_fastavro() {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let Some(eve) = silt_testkit::corpus_path("suricata/surevego-eve.json") else {
        return;
    };
    let Some(conn) = silt_testkit::corpus_path("zeek-json/vast-conn.log.json.gz") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let conn_json = d.path().join("conn.json");
    gunzip(&conn, &conn_json);
    ok(&["import", "suricata", p(&eve), "--lake", p(&lake), "--quiet"]);
    ok(&[
        "import",
        "zeek",
        p(&conn_json),
        "--lake",
        p(&lake),
        "--quiet",
    ]);
    let schemas = lake.join("_silt/avro-schemas");
    for (table, key, check, expect_sql) in [
        (
            "suricata.alert",
            "flow_id",
            // count / sum(flow_id) / sum(signature_id) / sum(timestamp µs) / keys = flow ids
            "alert",
            "SELECT count(*) || '/' || sum(CAST(flow_id AS DECIMAL(38,0))) || '/' \
             || sum(alert.signature_id) || '/' || sum(CAST(timestamp AS BIGINT)) FROM suricata.alert",
        ),
        (
            "zeek.conn",
            "uid",
            "conn",
            "SELECT count(*) || '/' || sum(id.orig_p) || '/' || count(DISTINCT id.resp_h) || '/' \
             || sum(CAST(ts AS BIGINT)) || '/' || sum(COALESCE(orig_bytes, 0)) FROM zeek.conn",
        ),
    ] {
        let t = topic("avro", 2);
        let out = common::silt(&[
            "export",
            "--lake",
            p(&lake),
            "--kafka",
            &broker,
            "--topic",
            &t,
            "--key",
            key,
            "--message-format",
            "avro",
            &format!("SELECT * FROM {table}"),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let n: u64 = scalar(&lake, &format!("SELECT count(*) FROM {table}"))
            .parse()
            .unwrap();
        let msgs = consume_avro(&py, &broker, &t, n, &["--schemas", p(&schemas)]);
        assert_eq!(msgs.len() as u64, n, "{table}");
        let v = |m: &serde_json::Value, path: &str| -> i128 {
            let mut x = &m["value"];
            for k in path.split('.') {
                x = &x[k];
            }
            x.as_i64().map(i128::from).or_else(|| x.as_u64().map(i128::from)).unwrap_or(0)
        };
        let sum = |path: &str| msgs.iter().map(|m| v(m, path)).sum::<i128>();
        let got = if check == "alert" {
            for m in &msgs {
                assert_eq!(
                    m["key"].as_str().unwrap(),
                    v(m, "flow_id").to_string(),
                    "the key is the flow id: {m}"
                );
            }
            format!(
                "{}/{}/{}/{}",
                msgs.len(),
                sum("flow_id"),
                sum("alert.signature_id"),
                sum("timestamp")
            )
        } else {
            let resp: std::collections::HashSet<&str> = msgs
                .iter()
                .map(|m| m["value"]["id"]["resp_h"].as_str().unwrap())
                .collect();
            format!(
                "{}/{}/{}/{}/{}",
                msgs.len(),
                sum("id.orig_p"),
                resp.len(),
                sum("ts"),
                sum("orig_bytes")
            )
        };
        assert_eq!(got, scalar(&lake, expect_sql), "{table}");
    }
    let schema_files = std::fs::read_dir(&schemas).unwrap().count();
    assert_eq!(schema_files, 2, "one schema per table");

    // The Confluent wire format, with the schema registered in a real registry (Apicurio, by
    // scripts/registry.sh), read back by fastavro with the schema the registry returns.
    let registry = match Command::new("bash")
        .arg(root().join("scripts/registry.sh"))
        .arg("start")
        .output()
    {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .unwrap_or("")
            .to_string(),
        other => {
            silt_testkit::skip::<()>(&format!(
                "no schema registry (scripts/registry.sh): {other:?}"
            ));
            return;
        }
    };
    let t = topic("avro-registry", 2);
    let sql = "SELECT * FROM suricata.alert";
    for _ in 0..2 {
        let out = common::silt(&[
            "export",
            "--lake",
            p(&lake),
            "--kafka",
            &broker,
            "--topic",
            &t,
            "--message-format",
            "avro",
            "--schema-registry",
            &registry,
            sql,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let n: u64 = scalar(&lake, "SELECT count(*) FROM suricata.alert")
        .parse()
        .unwrap();
    let msgs = consume_avro(&py, &broker, &t, 2 * n, &["--registry", &registry]);
    assert_eq!(msgs.len() as u64, 2 * n);
    let ids: std::collections::HashSet<u64> =
        msgs.iter().map(|m| m["id"].as_u64().unwrap()).collect();
    assert_eq!(
        ids.len(),
        1,
        "the same schema keeps its registry id: {ids:?}"
    );
    let flow_ids: u128 = msgs
        .iter()
        .map(|m| m["value"]["flow_id"].as_u64().unwrap() as u128)
        .sum();
    assert_eq!(
        flow_ids.to_string(),
        scalar(
            &lake,
            "SELECT 2 * sum(CAST(flow_id AS DECIMAL(38,0))) FROM suricata.alert"
        )
    );
}

/// `silt serve --to-kafka` whose messages cannot be delivered (no broker there): the rows are
/// not lost, they go to the lake at the next flush, and the log says why.
#[test]
fn to_kafka_undelivered_rows_go_to_the_lake() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    // A port nothing listens on.
    let nobody = free_port();
    let log = d.path().join("a.log");
    let lake = d.path().join("lake");
    let a = Command::new(env!("CARGO_BIN_EXE_silt"))
        .args([
            "serve",
            "--lake",
            p(&lake),
            "--http",
            &format!("127.0.0.1:{port}"),
            "--kafka",
            &format!("127.0.0.1:{nobody}"),
            "--kafka-option",
            "message.timeout.ms=2000",
            "--to-kafka",
            "app.events=nowhere",
            "--flush-age",
            "1s",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let body: String = (0..300).map(|i| format!("{{\"id\":{i}}}\n")).collect();
    let body_file = d.path().join("body.ndjson");
    std::fs::write(&body_file, &body).unwrap();
    let status = post_ndjson(port, "app.events", &body_file);
    assert_eq!(status, "200", "{}", std::fs::read_to_string(&log).unwrap());
    // Delivery fails after 2 s; the flush after that writes the rows to the lake.
    let t0 = Instant::now();
    while !lake.join("app.events").exists() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
    }
    stop(a, &log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("were not delivered"), "{text}");
    assert_eq!(
        scalar(
            &lake,
            "SELECT count(*) || '/' || count(DISTINCT id) FROM app.events"
        ),
        "300/300",
        "{text}"
    );
}

/// `silt serve --to-kafka`: rows ingested over HTTP, enriched by a transform, go to a topic
/// instead of the lake; a consumer of the topic gets every one, as JSON and (a second server)
/// as Avro.
#[test]
fn serve_produces_a_table_to_kafka() {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let d = tempfile::tempdir().unwrap();
    let t = topic("forwarded", 3);
    let port = free_port();
    let log = d.path().join("a.log");
    let lake_a = d.path().join("a");
    let a = Command::new(env!("CARGO_BIN_EXE_silt"))
        .args([
            "serve",
            "--lake",
            p(&lake_a),
            "--http",
            &format!("127.0.0.1:{port}"),
            "--kafka",
            &broker,
            "--to-kafka",
            &format!("app.events={t}"),
            "--parse-field",
            "app.events:line=access",
            "--flush-age",
            "1s",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut body = String::new();
    for i in 0..2000 {
        body.push_str(&format!(
            "{{\"id\":{i},\"line\":\"10.0.0.{} - - [24/Mar/2024:17:00:{:02} +0000] \\\"GET /p{i} HTTP/1.1\\\" 200 {} \\\"-\\\" \\\"curl\\\"\"}}\n",
            i % 250,
            i % 60,
            100 + i
        ));
    }
    let body_file = d.path().join("body.ndjson");
    std::fs::write(&body_file, &body).unwrap();
    let status = post_ndjson(port, "app.events", &body_file);
    assert_eq!(status, "200", "{}", std::fs::read_to_string(&log).unwrap());
    std::thread::sleep(Duration::from_secs(2));
    stop(a, &log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !lake_a.join("app.events").exists(),
        "routed rows do not reach A's lake"
    );
    let lake_b = d.path().join("b");
    import_kafka(
        &broker,
        &format!("g-{t}"),
        &[format!("{t}=json:app.events")],
        &lake_b,
    );
    assert_eq!(
        scalar(
            &lake_b,
            "SELECT count(*) || '/' || count(DISTINCT id) || '/' || sum(bytes) || '/' || min(status) FROM app.events"
        ),
        format!("2000/2000/{}/200", (0..2000u64).map(|i| 100 + i).sum::<u64>()),
        "{text}"
    );

    // The same rows as Avro (--message-format avro), read back by fastavro with the schema the
    // server wrote into its lake.
    let t2 = topic("forwarded-avro", 2);
    let lake_c = d.path().join("c");
    let c = Command::new(env!("CARGO_BIN_EXE_silt"))
        .args([
            "serve",
            "--lake",
            p(&lake_c),
            "--http",
            &format!("127.0.0.1:{port}"),
            "--kafka",
            &broker,
            "--to-kafka",
            &format!("app.events={t2}"),
            "--message-format",
            "avro",
            "--parse-field",
            "app.events:line=access",
            "--flush-age",
            "1s",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let status = post_ndjson(port, "app.events", &body_file);
    assert_eq!(status, "200", "{}", std::fs::read_to_string(&log).unwrap());
    std::thread::sleep(Duration::from_secs(2));
    stop(c, &log);
    let msgs = consume_avro(
        &py,
        &broker,
        &t2,
        2000,
        &["--schemas", p(&lake_c.join("_silt/avro-schemas"))],
    );
    let ids: std::collections::HashSet<i64> = msgs
        .iter()
        .map(|m| m["value"]["id"].as_i64().unwrap())
        .collect();
    let bytes: i64 = msgs
        .iter()
        .map(|m| m["value"]["bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(
        (msgs.len(), ids.len(), bytes),
        (2000, 2000, (0..2000i64).map(|i| 100 + i).sum::<i64>())
    );
}

/// Kafka into an object-store lake (MinIO, `scripts/minio.sh`): `silt import kafka` writes every
/// record once, a second run reads only what arrived since (positions from the bucket's flush
/// records), and a `silt serve --kafka` member on the bucket goes on from there; the committed
/// offsets end at the end offsets.
#[test]
fn kafka_into_a_bucket_once() {
    let _g = lock();
    let Some((broker, py)) = setup() else { return };
    let Some(env) = common::minio() else { return };
    let bucket = common::bucket("kafka");
    let s3 = format!("s3://{bucket}/l");
    let t = topic("s3ids", 3);
    let group = format!("s3-{t}");
    let topic_arg = format!("{t}=json:app.ids");
    let silt_env = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_silt"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "silt {args:?}: {stderr}");
        (String::from_utf8_lossy(&out.stdout).to_string(), stderr)
    };
    let import = || {
        silt_env(&[
            "import", "kafka", "--kafka", &broker, "--group", &group, "--topic", &topic_arg,
            "--lake", &s3, "--quiet",
        ])
        .1
    };
    let in_bucket = || {
        silt_env(&[
            "query",
            "--lake",
            &s3,
            "--format",
            "csv",
            "SELECT count(*) || '/' || count(DISTINCT id) FROM app.ids",
        ])
        .0
        .lines()
        .nth(1)
        .unwrap_or("")
        .trim()
        .to_string()
    };
    client(&py, &["produce-ids", &broker, &t, "0", "30000"]);
    let said = import();
    assert!(said.contains("30000 events"), "{said}");
    assert_eq!(in_bucket(), "30000/30000");
    client(&py, &["produce-ids", &broker, &t, "30000", "10000"]);
    let said = import();
    assert!(said.contains("10000 events"), "{said}");
    assert_eq!(in_bucket(), "40000/40000");

    // A serve member on the bucket resumes where the imports ended.
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let (mut child, addr) = common::serve_in(
        &env,
        Path::new(&s3),
        &[
            "--state",
            p(&state),
            "--kafka",
            &broker,
            "--group",
            &group,
            "--topic",
            &topic_arg,
            "--flush-age",
            "1s",
        ],
        None,
    );
    client(&py, &["produce-ids", &broker, &t, "40000", "5000"]);
    let c = wait_rows_at(&["--server", &addr], "app.ids", 45_000, 120);
    common::terminate(&mut child);
    assert_eq!(c, (45_000, 45_000));
    assert_eq!(in_bucket(), "45000/45000");
    let v: serde_json::Value =
        serde_json::from_str(&client(&py, &["offsets", &broker, &group, &t])).unwrap();
    assert_eq!(
        v["committed"], v["end"],
        "committed offsets are the end offsets"
    );
}
