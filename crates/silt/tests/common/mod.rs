//! Helpers shared by the tests that run the `silt` binary.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// `silt query --lake LAKE --format csv SQL`, asserted to succeed: its stdout.
pub fn query_csv(lake: &Path, sql: &str) -> String {
    ok(&["query", "--lake", p(lake), "--format", "csv", sql])
}

/// The Parquet files under `dir`, at any depth (none when `dir` does not exist).
pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(parquet_files(&path));
        } else if path.extension().is_some_and(|x| x == "parquet") {
            out.push(path);
        }
    }
    out
}

/// Runs the `silt` binary of this build.
pub fn silt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_silt"))
        .args(args)
        .output()
        .expect("run silt")
}

/// Runs silt, asserts it succeeded (printing its output if not), and returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let o = silt(args);
    assert!(
        o.status.success(),
        "silt {args:?} failed ({}): {}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// A `silt serve` a test started: a [`Child`] that is killed when dropped, so that a failing
/// test (a panic unwinds through its locals) leaves no server running behind it.
pub struct Server(pub Child);

impl std::ops::Deref for Server {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `silt serve ARGS` and returns it with the lines of its standard error, as they come.
pub fn spawn_serve<S: AsRef<std::ffi::OsStr>>(
    args: impl IntoIterator<Item = S>,
) -> (Server, std::sync::mpsc::Receiver<String>) {
    spawn_serve_in(&[], args)
}

/// [`spawn_serve`] with the variables `env` added to its environment (an object store's).
pub fn spawn_serve_in<S: AsRef<std::ffi::OsStr>>(
    env: &[(String, String)],
    args: impl IntoIterator<Item = S>,
) -> (Server, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_silt"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("serve")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    (Server(child), rx)
}

/// Starts `silt serve --lake LAKE --http 127.0.0.1:0` with `extra` flags and returns it with
/// its HTTP address (read from its banner). Its standard error goes on to `log` line by line
/// (the banner included), when given.
pub fn serve(
    lake: &Path,
    extra: &[&str],
    log: Option<std::sync::mpsc::Sender<String>>,
) -> (Server, String) {
    serve_in(&[], lake, extra, log)
}

/// [`serve`] with the variables `env` added to its environment (an object store's).
pub fn serve_in(
    env: &[(String, String)],
    lake: &Path,
    extra: &[&str],
    log: Option<std::sync::mpsc::Sender<String>>,
) -> (Server, String) {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--lake".as_ref(), lake.as_os_str()];
    args.extend(["--http", "127.0.0.1:0"].map(std::ffi::OsStr::new));
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let (child, lines) = spawn_serve_in(env, args);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let addr = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = lines
            .recv_timeout(left)
            .expect("silt serve did not print its address");
        let addr = line
            .find("http://")
            .map(|i| line[i..].split_whitespace().next().unwrap().to_string());
        if let Some(l) = &log {
            let _ = l.send(line);
        }
        if let Some(addr) = addr {
            break addr;
        }
    };
    // The rest of its standard error: to `log`, or read and dropped (a full pipe would stop
    // the server).
    std::thread::spawn(move || {
        for line in lines {
            if let Some(l) = &log {
                let _ = l.send(line);
            }
        }
    });
    (child, addr)
}

/// Sends `signal` (`-TERM`, `-HUP`) to `child`.
pub fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Stops `child` with SIGTERM and asserts it exited cleanly.
pub fn terminate(child: &mut Child) {
    signal(child, "-TERM");
    assert!(child.wait().unwrap().success());
}

/// A counter of the server's `/metrics`.
pub fn metric(agent: &ureq::Agent, addr: &str, name: &str) -> u64 {
    let text = agent
        .get(&format!("{addr}/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .parse()
        .unwrap()
}

/// A path as the `&str` an argument list needs.
pub fn p(x: &Path) -> &str {
    x.to_str().unwrap()
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The environment of a running MinIO (scripts/minio.sh start), or None after a skip message
/// (a failure in CI).
pub fn minio() -> Option<Vec<(String, String)>> {
    let out = Command::new("bash")
        .arg(repo().join("scripts/minio.sh"))
        .arg("start")
        .output()
        .ok()?;
    if !out.status.success() {
        return silt_testkit::skip(&format!(
            "MinIO (scripts/minio.sh start) did not start: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let env: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert!(
        env.iter().any(|(k, _)| k == "AWS_ENDPOINT_URL"),
        "scripts/minio.sh start printed no environment: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Some(env)
}

/// A new bucket for one test.
pub fn bucket(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!("silt-{tag}-{}-{nanos:x}", std::process::id());
    let out = Command::new("bash")
        .arg(repo().join("scripts/minio.sh"))
        .args(["bucket", &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    name
}

/// The venv python with DuckDB's delta extension (scripts/duckdb-delta.sh), or None after a
/// skip message (a failure in CI).
pub fn delta_python() -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/duckdb-delta.sh");
    let out = Command::new("bash").arg(script).output().ok()?;
    let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if out.status.success() && !p.is_empty() {
        Some(p)
    } else {
        silt_testkit::skip(&format!(
            "DuckDB's delta extension (scripts/duckdb-delta.sh) is not available: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Rows, distinct uids and sum(orig_bytes) of zeek.conn as DuckDB's `delta_scan` sees the Delta
/// table (a reader of the log other than silt's own).
pub fn delta_scan_fingerprint(py: &str, lake: &Path) -> (u64, u64, u64) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/interop/delta_scan.py");
    let out = Command::new(py)
        .arg(script)
        .arg(lake.join("zeek.conn"))
        .arg("count(*), count(DISTINCT uid), sum(orig_bytes)")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "delta_scan failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    let v: Vec<u64> = s.trim().split(',').map(|x| x.parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

/// A self-signed certificate for localhost and 127.0.0.1: (cert, key) PEM files in `dir`, made
/// by `openssl req` (scripts/apt-deps.sh installs openssl).
pub fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    openssl(
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=localhost"])
            .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert),
    );
    (cert, key)
}

/// A certificate authority and a server certificate it signed for localhost and 127.0.0.1, as
/// PEM files in `dir`: (CA certificate, server certificate, server key). rustls (webpki) does not
/// take a self-signed CA certificate as a server's own, so its clients need this.
pub fn ca_signed(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let f = |n: &str| dir.join(n);
    openssl(
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=silt test CA", "-keyout"])
            .arg(f("ca-key.pem"))
            .arg("-out")
            .arg(f("ca.pem")),
    );
    openssl(
        Command::new("openssl")
            .args([
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
            ])
            .arg("-keyout")
            .arg(f("key.pem"))
            .arg("-out")
            .arg(f("server.csr")),
    );
    std::fs::write(
        f("server.ext"),
        "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-in"])
            .arg(f("server.csr"))
            .arg("-CA")
            .arg(f("ca.pem"))
            .arg("-CAkey")
            .arg(f("ca-key.pem"))
            .args(["-CAcreateserial", "-extfile"])
            .arg(f("server.ext"))
            .arg("-out")
            .arg(f("cert.pem")),
    );
    (f("ca.pem"), f("cert.pem"), f("key.pem"))
}

fn openssl(cmd: &mut Command) {
    let out = cmd
        .output()
        .expect("openssl did not start (scripts/apt-deps.sh installs openssl)");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every reject the lake keeps (`_rejects/*/*`), as JSON.
pub fn lake_rejects(lake: &Path) -> Vec<serde_json::Value> {
    std::fs::read_dir(lake.join("_rejects"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .flat_map(|f| {
            std::fs::read_to_string(f.unwrap().path())
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}
