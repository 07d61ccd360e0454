//! `silt serve` killed with SIGKILL at random moments while a client sends batches with
//! acknowledgements (and resends what it did not see acknowledged, with the same idempotency
//! key, as Forward clients resend chunks): after 20 kills and a clean stop, every batch is in the
//! lake exactly once and every file reads.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SILT: &str = env!("CARGO_BIN_EXE_silt");
const BATCH: usize = 50;

/// Starts `silt serve` and returns it with its HTTP address (read from its banner).
fn start(lake: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(SILT)
        .args(["serve", "--lake"])
        .arg(lake)
        .args(["--http", "127.0.0.1:0", "--flush-age", "150ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(i) = line.find("http://") {
                    let addr = line[i..].split_whitespace().next().unwrap().to_string();
                    let _ = tx.send(addr);
                    sent = true;
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("silt serve did not print its address");
    (child, addr)
}

fn batch_body(b: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for j in 0..BATCH {
        let id = b * BATCH + j;
        out.extend_from_slice(
            format!(
                "{{\"time\":\"2024-03-24T17:{:02}:{:02}Z\",\"id\":{id},\"payload\":\"{}\"}}\n",
                (id / 60) % 60,
                id % 60,
                "x".repeat(id % 50)
            )
            .as_bytes(),
        );
    }
    out
}

/// Sends batches from `next` on until `stop`; a batch counts as acknowledged on a 200.
fn client(addr: String, next: Arc<AtomicUsize>, stop: Arc<AtomicBool>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    while !stop.load(Ordering::Relaxed) {
        let b = next.load(Ordering::Relaxed);
        let r = agent
            .post(&format!("{addr}/v1/ingest/app.events"))
            .header("Content-Type", "application/x-ndjson")
            .header("Idempotency-Key", &format!("batch-{b}"))
            .send(&batch_body(b)[..]);
        match r {
            Ok(resp) if resp.status().as_u16() == 200 => {
                next.fetch_add(1, Ordering::Relaxed);
            }
            // The server died (or is busy): resend the same batch to the next one.
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[test]
fn sigkill_at_random_moments_loses_and_duplicates_nothing() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let next = Arc::new(AtomicUsize::new(0));
    let mut seed = Instant::now().elapsed().as_nanos() as u64 | 1;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20 {
        let (mut child, addr) = start(&lake);
        let stop = Arc::new(AtomicBool::new(false));
        let c = {
            let (n, s) = (next.clone(), stop.clone());
            std::thread::spawn(move || client(addr, n, s))
        };
        std::thread::sleep(Duration::from_millis(100 + rnd() % 500));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        c.join().unwrap();
    }
    // A last server: the pending batch is resent, then a clean stop (SIGTERM) drains.
    let (mut child, addr) = start(&lake);
    let stop = Arc::new(AtomicBool::new(false));
    let target = next.load(Ordering::Relaxed) + 3;
    let c = {
        let (n, s) = (next.clone(), stop.clone());
        std::thread::spawn(move || client(addr, n, s))
    };
    while next.load(Ordering::Relaxed) < target {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    c.join().unwrap();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
    let acked = next.load(Ordering::Relaxed);
    eprintln!("{acked} batches of {BATCH} acknowledged across 20 kills");
    assert!(acked > 20, "only {acked} batches acknowledged in 21 runs");
    let out = Command::new(SILT)
        .args(["query", "--lake"])
        .arg(&lake)
        .args([
            "--format",
            "csv",
            "SELECT count(*) AS n, count(DISTINCT id) AS d, min(id) AS lo, max(id) AS hi FROM app.events",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let row: Vec<u64> = text
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let n = (acked * BATCH) as u64;
    assert_eq!(row, vec![n, n, 0, n - 1], "{text}");
}
