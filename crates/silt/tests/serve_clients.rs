//! Real clients against `silt serve` itself (started from a `--config` file, every listener on
//! a port of its own choosing): Go's `fluent-logger-golang` with RequestAck (the library behind
//! Docker's fluentd log driver; crates/silt-forward/tests/go) and Python's `fluent-logger`
//! (crates/silt-forward/tests/python) over Forward, util-linux `logger` and Debian's `rsyslog`
//! (forwarding over TCP with octet counting and over UDP) into the syslog listeners, and Python
//! `adbc-driver-flightsql` asking Flight SQL what HTTP `/v1/query` answers; NetFlow v5 and sFlow
//! datagrams into `--netflow` / `--sflow`. Every event is
//! then checked by its values in the server's answers, and in the lake after a clean stop.
//!
//! A missing client (Go, the Python packages, logger, rsyslogd) skips its part with a message,
//! unless `CI=true`, where it fails. Touches loopback sockets and temporary directories; runs
//! `go build` (Go modules come from the module proxy into the Go module cache).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const SILT: &str = env!("CARGO_BIN_EXE_silt");

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips (or fails under CI) when a client is missing.
fn missing(what: &str) {
    if ci() {
        panic!("CI=true and {what} is missing");
    }
    eprintln!("SKIPPED part: {what} is missing (set CI=true to make this a failure)");
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} did not start: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Kills the process when the test ends, also on a failed assertion (a process left running
/// would keep the test's output pipe open).
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Serve {
    child: common::Server,
    http: String,
    forward: String,
    flight: String,
    syslog_tcp: String,
    syslog_udp: String,
    /// `--syslog tls://` (its certificate, for clients, in `ca`).
    syslog_tls: String,
    ca: PathBuf,
    sflow: String,
    netflow: String,
}

/// Starts `silt serve --config` and reads every listener's address from its banner.
fn start(dir: &Path) -> Serve {
    // A self-signed certificate for the TLS syslog listener (localhost and 127.0.0.1).
    let (cert, key) = common::self_signed(dir);
    let config = dir.join("silt.toml");
    std::fs::write(
        &config,
        format!(
            r#"lake = "lake"
http = "127.0.0.1:0"
forward = "127.0.0.1:0"
flight = "127.0.0.1:0"
syslog = ["tcp://127.0.0.1:0=syslog.tcp", "udp://127.0.0.1:0=syslog.udp", "tls://127.0.0.1:0=syslog.tls"]
tls-cert = "{}"
tls-key = "{}"
sflow = ["udp://127.0.0.1:0"]
netflow = ["udp://127.0.0.1:0"]
flush-age = "500ms"

[[route]]
tag = "go.**"
table = "go.events"

[[route]]
tag = "py.**"
table = "py.events"
"#,
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let (child, lines) =
        common::spawn_serve([std::ffi::OsStr::new("--config"), config.as_os_str()]);
    // Its standard error, echoed into the test's output.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines {
            eprintln!("serve: {line}");
            let _ = tx.send(line);
        }
    });
    let mut banner = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !banner.iter().any(|l: &String| l.contains("Ctrl-C")) {
        let left = deadline.saturating_duration_since(Instant::now());
        banner.push(
            rx.recv_timeout(left)
                .expect("silt serve did not print its banner"),
        );
    }
    let field = |prefix: &str| -> String {
        banner
            .iter()
            .find_map(|l| {
                let l = l.trim_start();
                l.strip_prefix(prefix)
                    .map(|r| r.split_whitespace().next().unwrap().to_string())
            })
            .unwrap_or_else(|| panic!("no {prefix} line in {banner:?}"))
    };
    let after = |s: String, scheme: &str| s.trim_start_matches(scheme).to_string();
    Serve {
        http: field("http "),
        forward: field("forward "),
        flight: after(field("flight "), "grpc://"),
        sflow: after(field("sflow "), "udp://"),
        netflow: after(field("netflow "), "udp://"),
        syslog_tcp: banner
            .iter()
            .find_map(|l| {
                l.contains("syslog")
                    .then(|| l.split("tcp://").nth(1))
                    .flatten()
            })
            .map(|r| r.split_whitespace().next().unwrap().to_string())
            .expect("syslog tcp line"),
        syslog_udp: banner
            .iter()
            .find_map(|l| {
                l.contains("syslog")
                    .then(|| l.split("udp://").nth(1))
                    .flatten()
            })
            .map(|r| r.split_whitespace().next().unwrap().to_string())
            .expect("syslog udp line"),
        syslog_tls: banner
            .iter()
            .find_map(|l| {
                l.contains("syslog")
                    .then(|| l.split("tls://").nth(1))
                    .flatten()
            })
            .map(|r| r.split_whitespace().next().unwrap().to_string())
            .expect("syslog tls line"),
        ca: cert,
        child,
    }
}

fn host_port(addr: &str) -> (String, String) {
    let (h, p) = addr.rsplit_once(':').unwrap();
    (h.to_string(), p.to_string())
}

/// NDJSON rows of a query through HTTP.
fn query(http: &str, sql: &str) -> Vec<serde_json::Value> {
    let body = ureq::post(&format!("{http}/v1/query?format=ndjson"))
        .send(sql)
        .unwrap_or_else(|e| panic!("query {sql:?}: {e}"))
        .into_body()
        .read_to_string()
        .unwrap();
    body.lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A value, or the JSON a text value holds.
fn json_of(v: &serde_json::Value) -> serde_json::Value {
    v.as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| v.clone())
}

fn count(http: &str, sql_from: &str) -> i64 {
    let sql = format!("SELECT count(*) AS n FROM {sql_from}");
    // A table that does not exist yet is an error; treat it as no rows while waiting.
    let Ok(resp) = ureq::post(&format!("{http}/v1/query?format=ndjson")).send(&sql) else {
        return 0;
    };
    let body = resp.into_body().read_to_string().unwrap();
    let v: serde_json::Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    v["n"].as_i64().unwrap()
}

/// Waits until `sql_from` has `want` rows (events are visible within a second of their ack;
/// syslog has no ack, so its messages are awaited).
fn wait_count(http: &str, sql_from: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let n = count(http, sql_from);
        if n == want {
            return;
        }
        assert!(
            Instant::now() < deadline && n < want,
            "{sql_from}: {n} rows, want {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn go_client(forward: &str, work: &Path) -> bool {
    go_client_with(forward, work, None)
}

/// [`go_client`], over TLS when `ca` (the server's certificate, trusted through SSL_CERT_FILE)
/// is given.
fn go_client_with(forward: &str, work: &Path, ca: Option<&Path>) -> bool {
    if !have("go") {
        missing("go (for fluent-logger-golang)");
        return false;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../silt-forward/tests/go");
    let bin = work.join("fluent-go-client");
    run(
        Command::new("go")
            .args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(&src)
            .env("GOFLAGS", "-mod=mod"),
        "go build of the fluent-logger-golang client",
    );
    let (h, p) = host_port(forward);
    let mut cmd = Command::new(&bin);
    cmd.args([&h, &p]);
    if let Some(ca) = ca {
        cmd.arg("tls").env("SSL_CERT_FILE", ca);
    }
    run(&mut cmd, "fluent-logger-golang client");
    true
}

fn python_client(forward: &str) -> bool {
    let Some(py) = silt_testkit::python_with("fluent.sender, msgpack") else {
        missing("python with fluent-logger and msgpack (scripts/pyenv.sh)");
        return false;
    };
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../silt-forward/tests/python/send_events.py");
    let (h, p) = host_port(forward);
    let out = run(
        Command::new(py).arg(script).args([&h, &p]),
        "fluent-logger (Python) client",
    );
    assert_eq!(out.trim(), "ok");
    true
}

fn logger_client(tcp: &str, udp: &str) -> bool {
    if !have("logger") {
        missing("util-linux logger");
        return false;
    }
    let (th, tp) = host_port(tcp);
    let (uh, up) = host_port(udp);
    for i in 0..5 {
        run(
            Command::new("logger").args([
                "--tcp",
                "--octet-count",
                "--rfc5424",
                "--server",
                &th,
                "--port",
                &tp,
                "-t",
                "silt-logger",
                &format!("logger-tcp {i}"),
            ]),
            "logger --tcp",
        );
        run(
            Command::new("logger").args([
                "--udp",
                "--rfc3164",
                "--server",
                &uh,
                "--port",
                &up,
                "-t",
                "silt-logger",
                &format!("logger-udp {i}"),
            ]),
            "logger --udp",
        );
    }
    true
}

/// rsyslog takes messages on a UDP port of its own and forwards each to silt three times: over
/// TCP with octet counting, over UDP, and over TLS (gnutls, the server's name checked against
/// its certificate).
fn rsyslog_client(s: &Serve, work: &Path) -> Option<Reap> {
    let (tcp, udp) = (s.syslog_tcp.as_str(), s.syslog_udp.as_str());
    if !Path::new("/usr/lib/x86_64-linux-gnu/rsyslog/lmnsd_gtls.so").exists() {
        missing("rsyslog's TLS driver (rsyslog-gnutls; scripts/apt-deps.sh installs it)");
        return None;
    }
    let rsyslogd = ["/usr/sbin/rsyslogd", "rsyslogd"]
        .into_iter()
        .find(|p| Path::new(p).exists() || have(p));
    let Some(rsyslogd) = rsyslogd else {
        missing("rsyslogd (scripts/apt-deps.sh installs it)");
        return None;
    };
    if !have("logger") {
        missing("util-linux logger");
        return None;
    }
    let in_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (th, tp) = host_port(tcp);
    let (uh, up) = host_port(udp);
    let (_, sp) = host_port(&s.syslog_tls);
    let wd = work.join("rsyslog");
    std::fs::create_dir_all(&wd).unwrap();
    let conf = wd.join("rsyslog.conf");
    std::fs::write(
        &conf,
        format!(
            r#"global(workDirectory="{wd}" DefaultNetstreamDriverCAFile="{ca}")
module(load="imudp")
input(type="imudp" address="127.0.0.1" port="{in_port}")
action(type="omfwd" target="{th}" port="{tp}" protocol="tcp" TCP_Framing="octet-counted")
action(type="omfwd" target="{uh}" port="{up}" protocol="udp")
action(type="omfwd" target="localhost" port="{sp}" protocol="tcp" TCP_Framing="octet-counted"
       StreamDriver="gtls" StreamDriverMode="1" StreamDriverAuthMode="x509/name"
       StreamDriverPermittedPeers="localhost")
"#,
            wd = wd.display(),
            ca = s.ca.display()
        ),
    )
    .unwrap();
    let child = Command::new(rsyslogd)
        .args(["-n", "-f"])
        .arg(&conf)
        .arg("-i")
        .arg(wd.join("rsyslogd.pid"))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map(Reap)
        .expect("rsyslogd starts");
    // rsyslog opens its input port shortly after start; send until the messages come through
    // (checked by the caller), numbering each so duplicates would show.
    std::thread::sleep(Duration::from_millis(1500));
    for i in 0..5 {
        run(
            Command::new("logger").args([
                "--udp",
                "--rfc3164",
                "--server",
                "127.0.0.1",
                "--port",
                &in_port.to_string(),
                "-t",
                "via-rsyslog",
                &format!("rsyslog-forwarded {i}"),
            ]),
            "logger into rsyslog",
        );
    }
    Some(child)
}

/// A NetFlow v5 datagram of `n` flows (10.0.0.1:40000+i -> 10.0.0.2:53, UDP, 1000 bytes).
fn netflow_v5(n: u16, seq: u32) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend(5u16.to_be_bytes());
    d.extend(n.to_be_bytes());
    for v in [3_600_000u32, 1_700_000_000, 0, seq] {
        d.extend(v.to_be_bytes());
    }
    d.extend([0, 0, 0, 0]);
    for i in 0..n {
        d.extend([10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0, 2]);
        for v in [10u32, 1000, 1000, 2000] {
            d.extend(v.to_be_bytes());
        }
        d.extend((40000 + i).to_be_bytes());
        d.extend([0, 53, 0, 0, 17, 0, 0, 0, 0, 0, 24, 24, 0, 0]);
    }
    d
}

/// The UDP payloads of a classic little-endian pcap of Ethernet/IPv4/UDP frames (the fuzz
/// seeds' captures, hand-made by fuzz/seeds/make_seeds.py).
fn udp_payloads(pcap: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let len = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        let frame = &pcap[at + 16..at + 16 + len];
        out.push(frame[14 + 20 + 8..].to_vec());
        at += 16 + len;
    }
    out
}

fn flow_export(s: &Serve) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for seq in 0..3 {
        sock.send_to(&netflow_v5(2, seq * 2), &s.netflow).unwrap();
    }
    let seed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/sflow/flow-and-counter.pcap");
    for p in udp_payloads(&std::fs::read(seed).unwrap()) {
        sock.send_to(&p, &s.sflow).unwrap();
    }
    wait_count(&s.http, "netflow.flow", 6);
    let r = query(
        &s.http,
        "SELECT exporter, count(DISTINCT sport) AS ports, sum(bytes) AS bytes FROM netflow.flow GROUP BY 1",
    );
    assert_eq!(
        r,
        [serde_json::json!({"exporter": "127.0.0.1", "ports": 2, "bytes": 6000})]
    );
    wait_count(&s.http, "sflow.sample", 2);
    wait_count(&s.http, "sflow.counter", 2);
    let r = query(
        &s.http,
        "SELECT src, dst, dport, src_vlan FROM sflow.sample ORDER BY sample_seq",
    );
    assert_eq!(
        r[0],
        serde_json::json!({"src": "10.0.0.1", "dst": "10.0.0.2", "dport": 443, "src_vlan": 100})
    );
}

const ADBC_SCRIPT: &str = r#"
import json, sys
import adbc_driver_flightsql.dbapi as flight_sql
conn = flight_sql.connect(sys.argv[1])
cur = conn.cursor()
out = {}
for name, sql in json.loads(sys.argv[2]).items():
    if isinstance(sql, list):
        # A prepared statement with parameters: [sql, [values...]].
        cur.execute(sql[0], sql[1])
    else:
        cur.execute(sql)
    out[name] = [list(r) for r in cur.fetchall()]
cur.close(); conn.close()
print(json.dumps(out))
"#;

#[test]
fn real_clients_against_silt_serve() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start(dir.path());
    let go = go_client(&s.forward, dir.path());
    let py = python_client(&s.forward);
    let lg = logger_client(&s.syslog_tcp, &s.syslog_udp);
    // A client that speaks plain TCP to the TLS listener fails its handshake and is
    // disconnected; the listener goes on serving (rsyslog's TLS connection below).
    {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(&s.syslog_tls).unwrap();
        let _ = c.write_all(b"<13>1 2024-03-24T17:00:00Z h app - - - not TLS\n");
    }
    let mut rsys = rsyslog_client(&s, dir.path());
    flow_export(&s);

    if go {
        // fluent-logger-golang with RequestAck: 5 events with EventTime, 5 with integer time.
        wait_count(&s.http, "go.events", 10);
        let rows = query(
            &s.http,
            "SELECT n, msg, bin, nested FROM go.events ORDER BY n",
        );
        assert_eq!(rows.len(), 10);
        for (i, r) in rows.iter().enumerate() {
            let n = (i / 2) as i64;
            assert_eq!(r["n"].as_i64(), Some(n), "{r}");
            assert_eq!(
                r["msg"].as_str(),
                Some(format!("hello {n}").as_str()),
                "{r}"
            );
            assert_eq!(r["bin"].as_str(), Some("0001ff"), "binary as hex: {r}");
            // A nested map is a struct; a list of mixed types is a list of their texts (the
            // JSON readers' rule for mixed lists).
            let nested = &r["nested"];
            assert_eq!(nested["f"], 1.5, "{r}");
            assert_eq!(
                json_of(&nested["list"]),
                serde_json::json!(["1", "x", "true"]),
                "{r}"
            );
        }
        // EventTime keeps nanoseconds to the microsecond; integer time is whole seconds.
        let times = query(
            &s.http,
            "SELECT CAST(time AS VARCHAR) AS t FROM go.events WHERE n = 1 ORDER BY time",
        );
        let t: Vec<&str> = times.iter().map(|r| r["t"].as_str().unwrap()).collect();
        assert_eq!(
            t,
            ["2023-11-14T22:13:21Z", "2023-11-14T22:13:21.123456Z"],
            "{times:?}"
        );
    }
    if py {
        // send_events.py: 3 EventTime + 3 integer-time events (Message mode), a PackedForward
        // and a gzip CompressedPackedForward chunk of 4 each, both acknowledged.
        wait_count(&s.http, "py.events", 14);
        let rows = query(&s.http, "SELECT n FROM py.events ORDER BY n");
        let ns: Vec<i64> = rows.iter().map(|r| r["n"].as_i64().unwrap()).collect();
        assert_eq!(ns, [0, 1, 2, 10, 11, 12, 20, 20, 21, 21, 22, 22, 23, 23]);
    }
    let tcp_expected = if lg { 5 } else { 0 } + if rsys.is_some() { 5 } else { 0 };
    if tcp_expected > 0 {
        wait_count(&s.http, "syslog.tcp", tcp_expected);
        wait_count(&s.http, "syslog.udp", tcp_expected);
        for table in ["syslog.tcp", "syslog.udp"] {
            let rows = query(
                &s.http,
                &format!("SELECT message FROM {table} ORDER BY message"),
            );
            let mut want: Vec<String> = Vec::new();
            if lg {
                let proto = if table == "syslog.tcp" { "tcp" } else { "udp" };
                want.extend((0..5).map(|i| format!("logger-{proto} {i}")));
            }
            if rsys.is_some() {
                want.extend((0..5).map(|i| format!("rsyslog-forwarded {i}")));
            }
            want.sort();
            let got: Vec<String> = rows
                .iter()
                .map(|r| r["message"].as_str().unwrap().trim().to_string())
                .collect();
            assert_eq!(got, want, "{table}");
        }
    }
    if rsys.is_some() {
        wait_count(&s.http, "syslog.tls", 5);
        let rows = query(&s.http, "SELECT message FROM syslog.tls ORDER BY message");
        let got: Vec<String> = rows
            .iter()
            .map(|r| r["message"].as_str().unwrap().trim().to_string())
            .collect();
        let want: Vec<String> = (0..5).map(|i| format!("rsyslog-forwarded {i}")).collect();
        assert_eq!(got, want, "syslog.tls");
    }
    drop(rsys.take());

    // Flight SQL through ADBC answers what HTTP answers.
    if let Some(py) = silt_testkit::python_with("adbc_driver_flightsql.dbapi") {
        let queries = serde_json::json!({
            "tables": "SELECT 'go' AS t, count(*) AS n FROM go.events UNION ALL SELECT 'py', count(*) FROM py.events ORDER BY t",
            "syslog": "SELECT message FROM syslog.tcp ORDER BY message",
            // Bound parameters (DoPut on the prepared statement), checked against the same
            // query with the values written in.
            "bound": ["SELECT message FROM syslog.tcp WHERE message LIKE ? OR message = ? ORDER BY message", ["%1%", "nothing"]],
            // An empty result (the server panicked on it, and the client got an error).
            "empty": "SELECT message FROM syslog.tcp WHERE message = 'no such message'",
            "empty_bound": ["SELECT message FROM syslog.tcp WHERE message = ?", ["no such message"]],
        });
        let literal = serde_json::json!({
            "bound": "SELECT message FROM syslog.tcp WHERE message LIKE '%1%' OR message = 'nothing' ORDER BY message",
            "empty_bound": "SELECT message FROM syslog.tcp WHERE message = 'no such message'",
        });
        let out = run(
            Command::new(py).args([
                "-c",
                ADBC_SCRIPT,
                &format!("grpc://{}", s.flight),
                &queries.to_string(),
            ]),
            "adbc-driver-flightsql client",
        );
        let got: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        for (name, sql) in queries.as_object().unwrap() {
            let sql = literal.get(name).unwrap_or(sql);
            let http: Vec<Vec<serde_json::Value>> = query(&s.http, sql.as_str().unwrap())
                .into_iter()
                .map(|r| r.as_object().unwrap().values().cloned().collect())
                .collect();
            assert_eq!(got[name], serde_json::json!(http), "{name}");
        }
        if tcp_expected > 0 {
            let (bound, all) = (
                got["bound"].as_array().unwrap(),
                got["syslog"].as_array().unwrap(),
            );
            assert!(!bound.is_empty() && bound.len() < all.len(), "{got}");
        }
    } else {
        missing("python with adbc-driver-flightsql (scripts/pyenv.sh)");
    }

    // A clean stop writes everything to the lake's files.
    let before: Vec<(String, i64)> = [
        "go.events",
        "py.events",
        "syslog.tcp",
        "syslog.udp",
        "netflow.flow",
        "sflow.sample",
        "sflow.counter",
    ]
    .iter()
    .map(|t| (t.to_string(), count(&s.http, t)))
    .collect();
    run(
        Command::new("kill").args(["-TERM", &s.child.0.id().to_string()]),
        "kill -TERM",
    );
    let status = s.child.0.wait().unwrap();
    assert!(status.success(), "silt serve exited with {status}");
    for (table, n) in before {
        if n == 0 {
            continue;
        }
        let out = run(
            Command::new(SILT)
                .args(["query", "--lake"])
                .arg(dir.path().join("lake"))
                .args(["--format", "csv"])
                .arg(format!("SELECT count(*) FROM {table}")),
            "silt query",
        );
        assert_eq!(out.lines().nth(1), Some(n.to_string().as_str()), "{table}");
    }
}

/// `--forward tls://`: fluent-logger-golang (the library of Docker's fluentd log driver, whose
/// `fluentd-address=tls://` it serves) sends over TLS with RequestAck, checking the server's
/// certificate; every event is acked and queryable. A plain client is refused and counted.
#[test]
fn go_client_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = common::self_signed(dir.path());
    let (tx, rx) = std::sync::mpsc::channel();
    let (_child, http) = common::serve(
        &dir.path().join("lake"),
        &[
            "--forward",
            "tls://127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--route",
            "go.**=go.events",
            "--flush-age",
            "500ms",
        ],
        Some(tx),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let forward = loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("no forward line in the banner");
        eprintln!("serve: {line}");
        if let Some(rest) = line.trim_start().strip_prefix("forward ") {
            assert!(line.contains("TLS"), "{line}");
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || {
        for line in rx {
            eprintln!("serve: {line}");
        }
    });
    // A plain client: its handshake fails and it is closed, counted in /metrics.
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(&forward).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = c.write_all(&[0x93, 0xa1, b't', 0x01, 0x80]);
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        assert!(got.is_empty() || got[0] == 0x15, "plain client got {got:?}");
    }
    if !go_client_with(&forward, dir.path(), Some(&cert)) {
        return;
    }
    wait_count(&http, "go.events", 10);
    let rows = query(&http, "SELECT n, msg FROM go.events ORDER BY n, time");
    let got: Vec<(i64, String)> = rows
        .iter()
        .map(|r| {
            (
                r["n"].as_i64().unwrap(),
                r["msg"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(i64, String)> = (0..5)
        .flat_map(|n| [(n, format!("hello {n}")), (n, format!("hello {n}"))])
        .collect();
    assert_eq!(got, want);
    let metrics = ureq::get(&format!("{http}/metrics"))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("silt_forward_tls_failures_total 1")),
        "{metrics}"
    );
}

/// A lake file whose footer reads but whose pages do not (zeroed) is named by both front ends,
/// with what to do: HTTP answers 500, and a Flight SQL client (ADBC) gets the same message with
/// `DATA_LOSS`.
#[test]
fn a_damaged_file_is_named_over_http_and_flight_sql() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    for seed in ["1", "2"] {
        let logs = dir.path().join(format!("logs{seed}"));
        let (logs, lake) = (common::p(&logs), common::p(&lake));
        common::ok(&[
            "generate", "zeek", "--events", "1500", "--seed", seed, "-o", logs,
        ]);
        common::ok(&[
            "import",
            "zeek",
            logs,
            "--lake",
            lake,
            "--partition",
            "none",
            "-q",
        ]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(lake.join("zeek.conn"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    let victim = &files[0];
    let mut bytes = std::fs::read(victim).unwrap();
    let half = bytes.len() / 2;
    bytes[4..half].fill(0);
    std::fs::write(victim, &bytes).unwrap();
    let name = victim.file_name().unwrap().to_string_lossy().to_string();
    let s = start(dir.path());
    let sql = "SELECT count(DISTINCT uid), max(history) FROM zeek.conn";

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent
        .post(&format!("{}/v1/query", s.http))
        .send(sql)
        .unwrap();
    let body = resp.body_mut().read_to_string().unwrap();
    assert_eq!(resp.status().as_u16(), 500, "{body}");
    assert!(
        body.contains(&format!("{name} is damaged")) && body.contains("move it out of the lake"),
        "{body}"
    );

    if let Some(py) = silt_testkit::python_with("adbc_driver_flightsql.dbapi") {
        let script = r#"
import sys
import adbc_driver_flightsql.dbapi as flight_sql
conn = flight_sql.connect(sys.argv[1])
cur = conn.cursor()
try:
    cur.execute(sys.argv[2])
    print("ROWS", cur.fetchall())
except Exception as e:
    print("ERROR", e)
"#;
        let out = run(
            Command::new(py).args(["-c", script, &format!("grpc://{}", s.flight), sql]),
            "adbc-driver-flightsql client",
        );
        // ADBC names the gRPC status: DATA_LOSS (HTTP's 500), not the query's fault.
        assert!(
            out.starts_with("ERROR")
                && out.contains(&format!("{name} is damaged"))
                && out.contains("move it out of the lake")
                && out.contains("(DataLoss;"),
            "{out}"
        );
    } else {
        missing("python with adbc-driver-flightsql (scripts/pyenv.sh)");
    }
}

/// Answers each connection to `listener` once with `body` (HTTP 200, an Arrow IPC stream), as a
/// server that is not silt serve, or whose answer was damaged on the way, would.
fn answer_with(listener: std::net::TcpListener, bodies: Vec<Vec<u8>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    for body in bodies {
        let (conn, _) = listener.accept().unwrap();
        let mut r = BufReader::new(conn);
        let mut length = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        let mut sql = vec![0; length];
        r.read_exact(&mut sql).unwrap();
        let mut conn = r.into_inner();
        write!(
            conn,
            "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apache.arrow.stream\r\n\
Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .unwrap();
        conn.write_all(&body).unwrap();
    }
}

/// `silt query --server` reads the answer of a server it was pointed at: a damaged or forged
/// answer is an error that says so, never an abort. A zstd-compressed buffer whose length prefix
/// says 2^40 bytes made arrow-ipc reserve them, and the allocation failure aborted silt (SIGABRT);
/// a truncated stream and bytes that are not Arrow at all are errors too.
#[test]
fn a_damaged_answer_to_query_server_is_an_error_not_an_abort() {
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::ipc::writer::{IpcWriteOptions, StreamWriter};
    let schema = std::sync::Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![std::sync::Arc::new(Int64Array::from_iter_values(0..5000))],
    )
    .unwrap();
    let opts = IpcWriteOptions::default()
        .try_with_compression(Some(arrow::ipc::CompressionType::ZSTD))
        .unwrap();
    let mut intact = Vec::new();
    let mut w = StreamWriter::try_new_with_options(&mut intact, &schema, opts).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    drop(w);
    // The values buffer's prefix: its uncompressed length, 5000 * 8 bytes.
    let prefix = 40_000u64.to_le_bytes();
    let at = intact
        .windows(8)
        .position(|w| w == prefix)
        .expect("the compressed buffer's length prefix");
    let mut forged = intact.clone();
    forged[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("intact", intact.clone(), ""),
        ("forged length", forged, "damaged or forged length"),
        (
            "truncated",
            intact[..intact.len() - 100].to_vec(),
            "not a valid Arrow IPC stream",
        ),
        (
            "not Arrow",
            b"<html>hello</html>".to_vec(),
            "not a valid Arrow IPC stream",
        ),
    ];
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let bodies = cases.iter().map(|c| c.1.clone()).collect();
    let server = std::thread::spawn(move || answer_with(listener, bodies));
    for (what, _, want) in &cases {
        let o = Command::new(SILT)
            .args([
                "query",
                "--server",
                &url,
                "--format",
                "csv",
                "SELECT n FROM t",
            ])
            .output()
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        if want.is_empty() {
            assert!(o.status.success(), "{what}: {err}");
            assert_eq!(out.lines().count(), 5001, "{what}");
        } else {
            assert_eq!(o.status.code(), Some(1), "{what}: {}\n{err}", o.status);
            assert!(err.contains(want) && err.contains(&url), "{what}: {err}");
        }
    }
    server.join().unwrap();
}
