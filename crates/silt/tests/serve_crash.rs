//! `silt serve` killed with SIGKILL at random moments while a client sends batches with
//! acknowledgements (and resends what it did not see acknowledged, with the same idempotency
//! key, as Forward clients resend chunks): after 20 kills (`SILT_CRASH_KILLS=N` for more:
//! `bench/serve-crash.sh` runs 100 against a release build; half of them of servers compacting
//! with `--compact-every`) and a clean stop, every batch is in the lake exactly once and every
//! file reads. And while a server compacts, queries see every acknowledged row exactly once.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SILT: &str = env!("CARGO_BIN_EXE_silt");
const BATCH: usize = 50;

/// Starts `silt serve` (with `extra` flags) and returns it with its HTTP address.
fn start(lake: &std::path::Path, extra: &[&str]) -> (common::Server, String) {
    let mut args = vec!["--flush-age", "150ms"];
    args.extend_from_slice(extra);
    common::serve(lake, &args, None)
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
    let kills: usize = std::env::var("SILT_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(20);
    let t0 = Instant::now();
    for round in 0..kills {
        // Every other server also compacts the small files the flushes make, so kills land in
        // compactions too.
        let extra: &[&str] = if round % 2 == 1 {
            &["--compact-every", "200ms"]
        } else {
            &[]
        };
        let (mut child, addr) = start(&lake, extra);
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
    let (mut child, addr) = start(&lake, &[]);
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
    common::terminate(&mut child);
    let acked = next.load(Ordering::Relaxed);
    eprintln!(
        "{acked} batches of {BATCH} acknowledged across {kills} kills in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        acked > kills,
        "only {acked} batches acknowledged in {} runs",
        kills + 1
    );
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
    eprintln!(
        "lake: {} rows, {} distinct ids, for {n} acknowledged events: lost {}, duplicated {}",
        row[0],
        row[1],
        n.saturating_sub(row[1]),
        row[0] - row[1]
    );
    assert_eq!(row, vec![n, n, 0, n - 1], "{text}");
}

/// `count(*)` and `count(DISTINCT id)` of app.events through the server's query API.
fn counts(agent: &ureq::Agent, addr: &str) -> Result<(u64, u64), String> {
    let mut r = agent
        .post(&format!("{addr}/v1/query?format=csv"))
        .send("SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events")
        .map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("{status}: {text}"));
    }
    let row = text.lines().nth(1).ok_or(text.clone())?.to_string();
    let (n, d) = row.split_once(',').ok_or(text.clone())?;
    Ok((
        n.parse().map_err(|_| text.clone())?,
        d.parse().map_err(|_| text.clone())?,
    ))
}

#[test]
fn queries_stay_exact_while_the_server_compacts() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let (mut child, addr) = start(&lake, &["--compact-every", "300ms"]);
    let next = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let c = {
        let (n, s, a) = (next.clone(), stop.clone(), addr.clone());
        std::thread::spawn(move || client(a, n, s))
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    // The table exists once the first acknowledged batch is decoded (moments after the
    // acknowledgement, longer on a loaded machine); from then on every query must succeed.
    while next.load(Ordering::Relaxed) == 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let visible_by = Instant::now() + Duration::from_secs(10);
    while counts(&agent, &addr).is_err() && Instant::now() < visible_by {
        std::thread::sleep(Duration::from_millis(10));
    }
    let until = Instant::now() + Duration::from_secs(6);
    let (mut queries, mut last) = (0, 0);
    while Instant::now() < until {
        let (n, distinct) =
            counts(&agent, &addr).unwrap_or_else(|e| panic!("query failed during compaction: {e}"));
        assert_eq!(
            n, distinct,
            "a row counted twice (old and merged file both seen)"
        );
        // (An acknowledged row becomes visible moments later, once decoded; after that it
        // never leaves: a swap of files that lost rows for a moment would show here.)
        assert!(n >= last, "rows went missing: {last} then {n}");
        last = n;
        queries += 1;
    }
    stop.store(true, Ordering::Relaxed);
    c.join().unwrap();
    let compactions = common::metric(&agent, &addr, "silt_compactions_total");
    let flushes = common::metric(&agent, &addr, "silt_flush_total");
    assert!(compactions > 0);
    common::terminate(&mut child);
    let acked = (next.load(Ordering::Relaxed) * BATCH) as u64;
    eprintln!(
        "{queries} queries, {compactions} compactions, {flushes} flushes, {acked} rows acknowledged"
    );
    let out = Command::new(SILT)
        .args(["query", "--lake"])
        .arg(&lake)
        .args([
            "--format",
            "csv",
            "SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().nth(1).unwrap(), format!("{acked},{acked}"));
    // The flushes' small files were merged: far fewer files than flushes. What is left is the
    // last merged file plus the flushes since the last compaction, which on a loaded machine
    // (compactions wait for the queries in flight) can be several: at most a quarter of the
    // flushes, and never more than 6 when there were few.
    let (files, _) = count_parquet(&lake.join("app.events"));
    assert!(
        files as u64 <= (flushes / 4).max(6),
        "{files} files left after compaction of {flushes} flushes"
    );
}

/// Parquet files below `d`, and the directories that hold them (partitions).
fn count_parquet(d: &std::path::Path) -> (usize, usize) {
    let (mut files, mut parts) = (0, 0);
    let mut here = 0;
    for e in std::fs::read_dir(d).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            let (f, p) = count_parquet(&e.path());
            files += f;
            parts += p;
        } else if e.path().extension().is_some_and(|x| x == "parquet") {
            here += 1;
        }
    }
    (files + here, parts + usize::from(here > 0))
}

/// An operator's `silt compact` next to a running server: the server notices (within its 5 s
/// watch), lists the lake again, and answers from the merged file with the same rows.
#[test]
fn an_external_compaction_is_picked_up_by_a_running_server() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let (mut child, addr) = start(&lake, &[]);
    let next = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let c = {
        let (n, s, a) = (next.clone(), stop.clone(), addr.clone());
        std::thread::spawn(move || client(a, n, s))
    };
    // A second's worth of flushes (150 ms each): several small files.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    c.join().unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let acked = (next.load(Ordering::Relaxed) * BATCH) as u64;
    // Everything acknowledged is in files once a flush age has passed.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(counts(&agent, &addr).unwrap(), (acked, acked));
    compact(&lake);
    let deadline = Instant::now() + Duration::from_secs(15);
    let rescans = loop {
        let n = common::metric(&agent, &addr, "silt_lake_rescans_total");
        if n > 0 || Instant::now() > deadline {
            break n;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(rescans > 0, "the server did not list the lake again");
    assert_eq!(counts(&agent, &addr).unwrap(), (acked, acked));
    common::terminate(&mut child);
    // One merged file per partition, and at most one flush since.
    let (files, parts) = count_parquet(&lake.join("app.events"));
    assert!(files <= 1 + parts, "{files} files in {parts} partition(s)");
}

/// The lines a server writes to its standard error, kept as a test waits for them.
struct Said {
    rx: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Said {
    /// Waits until a line contains `what`, at most `within`.
    fn wait_for(&mut self, what: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.seen.iter().any(|l| l.contains(what)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!(
                    "no {what:?} within {within:?}; the server said:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }
}

/// Sends SIGTERM to `server` and waits for it to exit, at most `within` (`why`: what was wrong
/// with its log or lake, for the failure message).
fn stop_within(
    server: &mut common::Server,
    within: Duration,
    why: &str,
) -> std::process::ExitStatus {
    common::signal(server, "-TERM");
    let t0 = Instant::now();
    loop {
        if let Some(s) = server.try_wait().unwrap() {
            eprintln!("stopped in {:?} ({s})", t0.elapsed());
            return s;
        }
        assert!(
            t0.elapsed() < within,
            "silt serve did not stop within {within:?} of SIGTERM with {why}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `n` Suricata DNS events from id `from` on, one per line.
fn eve_lines(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| {
            format!(
                "{{\"timestamp\":\"2024-03-24T17:{:02}:{:02}.000000+0000\",\"event_type\":\"dns\",\
\"flow_id\":{i},\"src_ip\":\"10.0.0.1\",\"dest_ip\":\"10.0.0.2\",\"proto\":\"UDP\"}}\n",
                (i / 60) % 60,
                i % 60
            )
        })
        .collect()
}

/// A write-ahead log that refuses every write (`SILT_FAILPOINT=wal-write`, as a full or failing
/// disk would) holds neither the tail nor the stop: SIGTERM ends the server within bounds and
/// says what it did not log, the tail position stays where the log left it, and the next start,
/// with a log that works, reads every line exactly once. (Before, the tail retried the append
/// without end, and the server's stop waited for it without end.)
#[test]
fn a_log_that_refuses_writes_does_not_hold_a_tailing_server_at_stop() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let logs = d.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let eve = logs.join("eve.json");
    std::fs::write(&eve, eve_lines(0, 300)).unwrap();
    let tail = format!("suricata:{}/*.json", logs.display());
    let (tx, rx) = std::sync::mpsc::channel();
    let env = [("SILT_FAILPOINT".to_string(), "wal-write".to_string())];
    let (mut server, _) = common::serve_in(&env, &lake, &["--tail", &tail], Some(tx));
    let mut said = Said {
        rx,
        seen: Vec::new(),
    };
    said.wait_for("failpoint wal-write; retrying", Duration::from_secs(30));
    stop_within(
        &mut server,
        Duration::from_secs(30),
        "its log refusing writes",
    );
    said.wait_for(
        "stopping without logging its bytes from 0 on",
        Duration::from_secs(5),
    );
    assert!(
        !common::parquet_files(&lake)
            .iter()
            .any(|p| p.to_string_lossy().contains("suricata.dns")),
        "nothing was logged, so nothing may be in the lake"
    );

    // A log that works: every line once, those written while the server was down included.
    std::fs::write(&eve, eve_lines(0, 400)).unwrap();
    let (mut server, addr) = start(&lake, &["--tail", &tail]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let sql = "SELECT count(*) AS n, count(DISTINCT flow_id) AS d FROM suricata.dns";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut r = agent
            .post(&format!("{addr}/v1/query?format=csv"))
            .send(sql)
            .unwrap();
        let text = r.body_mut().read_to_string().unwrap();
        if text.lines().nth(1) == Some("400,400") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lake did not reach 400 events: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    common::terminate(&mut server);
    assert_eq!(common::query_csv(&lake, sql), "n,d\n400,400\n");
}

/// A lake that refuses every flush (`SILT_FAILPOINT=serve-flush`, as a full disk would) does not
/// hold the stop either: SIGTERM gives the flush `STOP_FLUSH_RETRY` (10 s) more, then ends the
/// server with an error that says the events stay in the log; the next start writes every
/// acknowledged event once. (Before, the flush was retried without end and SIGTERM never
/// returned.)
#[test]
fn a_lake_that_refuses_flushes_does_not_hold_the_stop() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let (tx, rx) = std::sync::mpsc::channel();
    let env = [("SILT_FAILPOINT".to_string(), "serve-flush".to_string())];
    let (mut server, addr) = common::serve_in(&env, &lake, &["--flush-age", "150ms"], Some(tx));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    for b in 0..4 {
        let r = agent
            .post(&format!("{addr}/v1/ingest/app.events"))
            .header("Content-Type", "application/x-ndjson")
            .send(&batch_body(b)[..])
            .unwrap();
        assert_eq!(
            r.status().as_u16(),
            200,
            "the log works: events are acknowledged"
        );
    }
    let mut said = Said {
        rx,
        seen: Vec::new(),
    };
    said.wait_for("failpoint serve-flush; retrying", Duration::from_secs(30));
    let status = stop_within(&mut server, Duration::from_secs(60), "its flushes failing");
    assert!(
        !status.success(),
        "a stop that left events out of the lake must say so"
    );
    said.wait_for(
        "stopped without writing every event to the lake",
        Duration::from_secs(5),
    );
    assert!(common::parquet_files(&lake.join("app.events")).is_empty());

    let (mut server, addr) = start(&lake, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while counts(&agent, &addr) != Ok((4 * BATCH as u64, 4 * BATCH as u64)) {
        assert!(Instant::now() < deadline, "{:?}", counts(&agent, &addr));
        std::thread::sleep(Duration::from_millis(100));
    }
    common::terminate(&mut server);
    let sql = "SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events";
    assert_eq!(
        common::query_csv(&lake, sql),
        format!("n,d\n{0},{0}\n", 4 * BATCH)
    );
}

/// A compaction held by its disk (a merge that never finishes) does not hold the stop: the
/// server drains and flushes first, waits `MAINTAIN_WAIT` (10 s) more for the compaction, then
/// leaves it as a crash would and exits 0, every acknowledged event in the lake once. (Before,
/// the stop waited for the compaction's group before it even drained the listeners, without
/// end.)
#[test]
fn a_stalled_compaction_does_not_hold_the_stop() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let (tx, rx) = std::sync::mpsc::channel();
    let env = [(
        "SILT_FAILPOINT".to_string(),
        "stall:compact-published".to_string(),
    )];
    let (mut server, addr) = common::serve_in(
        &env,
        &lake,
        &["--flush-age", "150ms", "--compact-every", "300ms"],
        Some(tx),
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let send = |b: usize| {
        let r = agent
            .post(&format!("{addr}/v1/ingest/app.events"))
            .header("Content-Type", "application/x-ndjson")
            .send(&batch_body(b)[..])
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    };
    let mut said = Said {
        rx,
        seen: Vec::new(),
    };
    // Batches a flush apart make small files, until a compaction starts merging them and
    // stalls.
    let mut b = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !said
        .seen
        .iter()
        .any(|l| l.contains("compact-published reached"))
    {
        assert!(Instant::now() < deadline, "{}", said.seen.join("\n"));
        send(b);
        b += 1;
        std::thread::sleep(Duration::from_millis(250));
        while let Ok(l) = said.rx.try_recv() {
            said.seen.push(l);
        }
    }
    // Acknowledged while the compaction stalls: written by the stop's flush.
    send(b);
    b += 1;
    let t0 = Instant::now();
    let status = stop_within(&mut server, Duration::from_secs(45), "a compaction stalled");
    assert!(status.success(), "{}", said.seen.join("\n"));
    assert!(
        t0.elapsed() >= Duration::from_secs(9),
        "stopped in {:?}: the compaction was not waited for",
        t0.elapsed()
    );
    said.wait_for("leaving it unfinished", Duration::from_secs(5));
    let sql = "SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events";
    let all = format!("n,d\n{0},{0}\n", b * BATCH);
    assert_eq!(common::query_csv(&lake, sql), all);
    // The compaction stalled after its commit, before it removed its inputs: they are still
    // on disk beside the merged file, and readers leave them out (its replacement record says
    // so), as the count above shows. The next maintenance removes them.
    let (files, parts) = count_parquet(&lake.join("app.events"));
    assert!(files > parts + 1, "{files} files in {parts} partition(s)");
    compact(&lake);
    assert_eq!(common::query_csv(&lake, sql), all);
    let (files, parts) = count_parquet(&lake.join("app.events"));
    assert!(files <= parts, "{files} files in {parts} partition(s)");
}

/// Runs `silt compact` on `lake`, which must succeed.
fn compact(lake: &std::path::Path) {
    common::ok(&["compact", "--lake", common::p(lake)]);
}
