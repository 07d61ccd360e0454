//! A lake in an object store (issue 25): `--lake s3://bucket/prefix` against a real S3 server,
//! MinIO, built from the Go module proxy and started by `scripts/minio.sh`.
//!
//! The same corpus inputs are imported into a local lake and into the bucket; every query, the
//! table listing and the DDL must agree, a re-run must add nothing, rejects must land in the
//! bucket, a file larger than one upload part must arrive whole (multipart upload), and nothing
//! may be written to a local directory named `s3:`. Compaction, retention and vacuum work in the
//! bucket, also when a compaction is killed at each of its steps, and so do tables with a Delta
//! log (`--table-format delta`), read back by DuckDB's `delta_scan`. `silt serve` ingests into the bucket, compacts
//! there, and loses nothing acknowledged when it is killed.

mod common;

use std::path::Path;
use std::process::Command;

use common::{bucket, delta_python, delta_scan_fingerprint, minio, p};

fn silt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_silt"))
}

/// Asserts `o` succeeded (printing its output if not) and returns it.
fn ok(o: &std::process::Output) -> &std::process::Output {
    assert!(
        o.status.success(),
        "silt failed ({}): {}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `silt ARGS` with the store's environment.
fn run(env: &[(String, String)], args: &[&str]) -> std::process::Output {
    let mut c = silt();
    // Nothing of the developer's own AWS setup may leak in.
    c.env_remove("AWS_PROFILE").env("HOME", "/nonexistent");
    c.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `silt query --lake LAKE --format csv SQL`'s output, asserting it succeeded.
fn query_csv(env: &[(String, String)], lake: &str, sql: &str) -> String {
    stdout(ok(&run(
        env,
        &["query", "--lake", lake, "--format", "csv", sql],
    )))
}

#[test]
fn import_query_tables_and_ddl_agree_with_a_local_lake() {
    let Some(env) = minio() else { return };
    let Some(conn) = silt_testkit::corpus_path("zeek-tsv/vast/conn.log") else {
        return;
    };
    // Suricata's own EVE for the corpus pcaps: a directory of files, many tables.
    let Some(eve) = silt_testkit::corpus_path("suricata/suricata-7.0.10-from-corpus-pcaps") else {
        return;
    };
    let bucket = bucket("import");
    let s3 = format!("s3://{bucket}/lake");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("lake");

    for (fmt, input) in [("zeek", &conn), ("suricata", &eve)] {
        ok(&run(&env, &["import", fmt, p(input), "--lake", &s3, "-q"]));
        ok(&run(
            &env,
            &["import", fmt, p(input), "--lake", p(&local), "-q"],
        ));
    }

    // Every answer is the same from the bucket and from the directory.
    let queries = [
        "SELECT count(*) AS n, sum(orig_bytes) AS ob, min(ts) AS lo, max(ts) AS hi FROM zeek.conn",
        "SELECT id.resp_p AS port, count(*) AS n FROM zeek.conn GROUP BY 1 ORDER BY n DESC, port LIMIT 5",
        "SELECT uid, id.orig_h, duration FROM zeek.conn WHERE ts >= TIMESTAMP '2009-11-18 00:00:00' ORDER BY uid LIMIT 3",
        "SELECT count(*) AS n, min(timestamp) AS lo, max(timestamp) AS hi FROM suricata.alert",
        "SELECT alert.signature_id AS sid, count(*) AS n FROM suricata.alert GROUP BY 1 ORDER BY n DESC, sid LIMIT 5",
        "SELECT count(*) AS n, count(DISTINCT dns.rrname) AS names FROM suricata.dns",
        "SELECT proto, count(*) AS n, sum(flow.bytes_toserver) AS b FROM suricata.flow GROUP BY 1 ORDER BY 1",
    ];
    let tables = stdout(ok(&run(&env, &["tables", "--lake", &s3, "--json"])));
    let local_tables = stdout(ok(&run(&env, &["tables", "--lake", p(&local), "--json"])));
    let names: Vec<String> = serde_json::from_str::<serde_json::Value>(&tables)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap().to_string())
        .collect();
    // HOME is /nonexistent in `run`, so there is no footer cache unless one is named.
    let footers = tempfile::tempdir().unwrap();
    let mut cached_env = env.clone();
    cached_env.push((
        "SILT_FOOTER_CACHE".into(),
        footers.path().display().to_string(),
    ));
    for q in queries {
        let table = q
            .split("FROM ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap();
        assert!(names.iter().any(|n| n == table), "{table} not in {tables}");
        let remote = stdout(ok(&run(
            &env,
            &["query", "--lake", &s3, "--format", "csv", q],
        )));
        let here = stdout(ok(&run(
            &env,
            &["query", "--lake", p(&local), "--format", "csv", q],
        )));
        assert_eq!(remote, here, "{q}");
        assert!(remote.lines().count() >= 2, "{q}: no rows: {remote}");
        // With the footer cache: filled by the first query, answering the next ones.
        for _ in 0..2 {
            let cached = stdout(ok(&run(
                &cached_env,
                &["query", "--lake", &s3, "--format", "csv", q],
            )));
            assert_eq!(cached, here, "{q} with the footer cache");
        }
    }
    // One footer per data file of the tables the queries read (every file is Parquet here),
    // and none of the other tables' (a query opens only the tables it names).
    let queried: Vec<&str> = queries
        .iter()
        .map(|q| {
            q.split("FROM ")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
        })
        .collect();
    let files = |read: bool| -> u64 {
        serde_json::from_str::<serde_json::Value>(&tables)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| queried.contains(&t["table"].as_str().unwrap()) == read)
            .map(|t| t["files"].as_u64().unwrap())
            .sum()
    };
    assert!(files(false) > 0, "every table is queried: {tables}");
    let entries = std::fs::read_dir(footers.path()).unwrap().count() as u64;
    assert_eq!(entries, files(true), "footers cached");
    // The listing: same tables, rows, files and time ranges (bytes may differ by file names in
    // nothing, but are not compared: the point is the rows).
    let strip = |s: &str| -> Vec<(String, u64, u64, String, String)> {
        serde_json::from_str::<serde_json::Value>(s)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["table"].as_str().unwrap().to_string(),
                    t["rows"].as_u64().unwrap(),
                    t["files"].as_u64().unwrap(),
                    t["first_ts"].to_string(),
                    t["last_ts"].to_string(),
                )
            })
            .collect()
    };
    assert_eq!(strip(&tables), strip(&local_tables));
    assert!(names.iter().any(|n| n == "zeek.conn"), "{tables}");

    // DDL reads the bucket and points engines at it.
    let ddl = stdout(ok(&run(
        &env,
        &["ddl", "--dialect", "trino", "zeek.conn", "--lake", &s3],
    )));
    assert!(ddl.contains(&format!("'{s3}/zeek.conn'")), "{ddl}");
    let local_ddl = stdout(ok(&run(
        &env,
        &[
            "ddl",
            "--dialect",
            "trino",
            "zeek.conn",
            "--lake",
            p(&local),
        ],
    )));
    let cols = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("  ") && !l.contains("location"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(cols(&ddl), cols(&local_ddl));

    // `silt inspect` reads a file's footer in the bucket.
    let lake = with_env(&env, || {
        silt_lake::remote::LakeRoot::open(Path::new(&s3)).unwrap()
    });
    let file = lake
        .data_files(&silt_core::TableName::parse("zeek.conn").unwrap())
        .unwrap();
    let url = file[0].path.display().to_string();
    let shown = stdout(ok(&run(&env, &["inspect", &url, "--json"])));
    let v: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(v["bytes"].as_u64(), Some(file[0].bytes), "{shown}");
    assert!(
        shown.contains("id.orig_h") || shown.contains("orig_h"),
        "{shown}"
    );

    // A re-run adds nothing: the bucket's import record knows the input.
    let again = run(&env, &["import", "zeek", p(&conn), "--lake", &s3]);
    ok(&again);
    let said = String::from_utf8_lossy(&again.stderr).into_owned() + &stdout(&again);
    assert!(said.contains("skipped 1 input"), "{said}");
    let n = |lake: &str| {
        stdout(ok(&run(
            &env,
            &[
                "query",
                "--lake",
                lake,
                "--format",
                "csv",
                "SELECT count(*) FROM zeek.conn",
            ],
        )))
    };
    assert_eq!(n(&s3), n(p(&local)));
}

/// A first query from a machine (no footer cache) reads the footers of the files its time
/// filter keeps, plus one per schema tag for the table's columns, not one per file of the
/// table: the files a writer names carry their schema's tag, and `--stats` says how many
/// footers were never read. The answers are a local lake's; a compaction's output is tagged too.
#[test]
fn a_first_query_reads_only_the_footers_it_needs() {
    let Some(env) = minio() else { return };
    let Some(conn) = silt_testkit::corpus_path("zeek-tsv/vast/conn.log") else {
        return;
    };
    let bucket = bucket("deferred");
    let s3 = format!("s3://{bucket}/lake");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("lake");
    for lake in [s3.as_str(), p(&local)] {
        ok(&run(
            &env,
            &[
                "import",
                "zeek",
                p(&conn),
                "--lake",
                lake,
                "--partition",
                "hour",
                "-q",
            ],
        ));
    }
    let remote = remote_lake(&env, &s3);
    let table = silt_core::TableName::parse("zeek.conn").unwrap();
    let files = remote.data_files(&table).unwrap();
    assert!(files.len() >= 20, "one file per hour: {}", files.len());
    let tag = |f: &silt_lake::layout::DataFile| {
        let name = f.path.file_name().unwrap().to_str().unwrap().to_string();
        silt_lake::schema_tag::of_file_name(&name)
    };
    assert!(
        files.iter().all(|f| tag(f).is_some()),
        "every file is tagged"
    );
    let tags: std::collections::BTreeSet<_> = files.iter().map(tag).collect();

    // The last two hours of the log.
    let window =
        "SELECT count(*) AS n, sum(orig_bytes) AS b, count(DISTINCT uid) AS u FROM zeek.conn \
                  WHERE ts >= (SELECT max(ts) FROM zeek.conn) - INTERVAL '90 minutes'";
    let last = query_csv(&env, p(&local), "SELECT max(ts) FROM zeek.conn");
    let last = last.lines().nth(1).unwrap().trim().to_string();
    let window = window.replace(
        "(SELECT max(ts) FROM zeek.conn)",
        &format!("TIMESTAMP '{last}'"),
    );
    let footers = tempfile::tempdir().unwrap();
    let mut cached_env = env.clone();
    cached_env.push((
        "SILT_FOOTER_CACHE".into(),
        footers.path().display().to_string(),
    ));
    let o = ok(&run(
        &cached_env,
        &[
            "query", "--lake", &s3, "--format", "csv", "--stats", &window,
        ],
    ))
    .clone();
    assert_eq!(stdout(&o), query_csv(&env, p(&local), &window));
    let stats = String::from_utf8_lossy(&o.stderr).into_owned();
    let read = std::fs::read_dir(footers.path()).unwrap().count();
    assert!(
        read <= tags.len() + 3,
        "{read} footers read for a window of two or three hours of {} files: {stats}",
        files.len()
    );
    let unread = format!("footers:     {} of the pruned files", files.len() - read);
    assert!(stats.contains(&unread), "{unread:?} not in {stats}");

    // Every answer over the whole table is still the local lake's, with or without the cache.
    let all =
        "SELECT count(*) AS n, sum(orig_bytes) AS b, min(ts) AS lo, max(ts) AS hi FROM zeek.conn";
    let here = query_csv(&env, p(&local), all);
    assert_eq!(query_csv(&env, &s3, all), here);
    assert_eq!(query_csv(&cached_env, &s3, all), here);
    assert_eq!(
        std::fs::read_dir(footers.path()).unwrap().count(),
        files.len()
    );

    // A compaction's output carries its schema's tag too: the input once more (two files an
    // hour), merged.
    let count = "SELECT count(*) FROM zeek.conn";
    ok(&run(
        &env,
        &["import", "zeek", p(&conn), "--lake", &s3, "--force", "-q"],
    ));
    ok(&run(&env, &["compact", "--lake", &s3]));
    let compacted = remote.data_files(&table).unwrap();
    assert_eq!(compacted.len(), files.len(), "one file an hour again");
    assert!(compacted.iter().all(|f| tag(f).is_some()));
    assert!(compacted
        .iter()
        .all(|f| !files.iter().any(|o| o.path == f.path)));
    let n = |lake: &str| -> u64 {
        query_csv(&env, lake, count)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(n(&s3), 2 * n(p(&local)));

    // Every object, the compaction's outputs included, checks out against its footer's sum.
    let verified = run(&env, &["verify", "--lake", &s3, "--table", "zeek.conn"]);
    let o = ok(&verified);
    let out = stdout(o);
    let want = format!("zeek.conn: {} files", compacted.len());
    assert!(
        out.contains(&want)
            && out.contains(&format!("{} checksum ok, 0 decoded", compacted.len()))
            && out.contains("all intact"),
        "{out}"
    );
}

#[test]
fn rejects_large_files_and_refusals() {
    let Some(env) = minio() else { return };
    let bucket = bucket("rejects");
    let s3 = format!("s3://{bucket}/l");
    let dir = tempfile::tempdir().unwrap();

    // Rejects are kept in the bucket, and the summary names them there.
    let input = dir.path().join("mixed.ndjson");
    std::fs::write(
        &input,
        "{\"ts\":\"2024-03-24T17:00:00Z\",\"a\":1}\nnot json\n{\"ts\":\"2024-03-24T17:00:01Z\",\"a\":2}\n",
    )
    .unwrap();
    let o = run(&env, &["import", "json", p(&input), "--lake", &s3]);
    ok(&o);
    let said = String::from_utf8_lossy(&o.stderr).into_owned() + &stdout(&o);
    assert!(said.contains(&format!("{s3}/_rejects/")), "{said}");
    let remote = &remote_lake(&env, &s3);
    let rejects = remote.list("_rejects").unwrap();
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    let body = remote.get(&rejects[0].rel).unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&body).contains("not json"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    // No journal is left behind, one run is recorded, and nothing is staged in the lake.
    let record: Vec<String> = remote
        .list("_silt/imports")
        .unwrap()
        .into_iter()
        .map(|o| o.rel)
        .collect();
    assert_eq!(record.len(), 1, "{record:?}");
    assert!(record[0].starts_with("_silt/imports/done/"), "{record:?}");
    assert!(
        remote
            .list("")
            .unwrap()
            .iter()
            .all(|o| !o.rel.contains(".inprogress")),
        "temporary names in the bucket"
    );

    // A file larger than one part goes up as a multipart upload and arrives whole.
    let big = dir.path().join("big.bin");
    let bytes: Vec<u8> = (0..40u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&big, &bytes).unwrap();
    assert_eq!(
        remote.upload(&big, "blob/big.bin").unwrap(),
        bytes.len() as u64
    );
    let back = remote.get("blob/big.bin").unwrap().unwrap();
    assert!(
        back.len() == bytes.len() && back[..] == bytes[..],
        "multipart upload differs"
    );

    // `--table-format delta` on the bucket writes its log there, and nothing locally.
    let cwd = tempfile::tempdir().unwrap();
    {
        let other = dir.path().join("other.ndjson");
        std::fs::write(&other, "{\"ts\":\"2024-03-24T18:00:00Z\",\"a\":3}\n").unwrap();
        let args = [
            "import",
            "json",
            p(&other),
            "--lake",
            &s3,
            "--table",
            "app.mixed",
            "--table-format",
            "delta",
        ];
        let mut c = silt();
        let o = c
            .current_dir(cwd.path())
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .args(args)
            .output()
            .unwrap();
        ok(&o);
        assert!(remote.any_below("app.mixed/_delta_log").unwrap());
    }
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);

    // A bucket that does not exist is an error that says so.
    let o = run(
        &env,
        &[
            "import",
            "json",
            p(&input),
            "--lake",
            "s3://silt-no-such-bucket-x/l",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("silt-no-such-bucket-x"), "{err}");
}

/// The bucket lake `s3` (opened with the store's environment).
fn remote_lake(
    env: &[(String, String)],
    s3: &str,
) -> std::sync::Arc<silt_lake::remote::RemoteLake> {
    match with_env(env, || {
        silt_lake::remote::LakeRoot::open(Path::new(s3)).unwrap()
    }) {
        silt_lake::remote::LakeRoot::Remote(r) => r,
        _ => panic!("{s3} is not an object-store lake"),
    }
}

/// An HTTP client for `silt serve` that returns error statuses as responses.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(20)))
        .build()
        .into()
}

/// Runs `f` with the store's environment set in this process (the library reads it).
fn with_env<T>(env: &[(String, String)], f: impl FnOnce() -> T) -> T {
    for (k, v) in env {
        std::env::set_var(k, v);
    }
    f()
}

/// The corpus's real conn.log: its header (without `#close`, lines ending in newlines) and its
/// records; `None` after a skip message when the corpus is absent.
fn corpus_conn() -> Option<(String, Vec<String>)> {
    let conn = silt_testkit::corpus_path("zeek-tsv/vast/conn.log")?;
    let text = std::fs::read_to_string(&conn).unwrap();
    let (header, body): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.starts_with('#'));
    let head = header
        .iter()
        .take_while(|l| !l.starts_with("#close"))
        .map(|l| format!("{l}\n"))
        .collect();
    Some((head, body.into_iter().map(str::to_string).collect()))
}

/// SIGKILL while importing into the bucket, then the same import again: the lake holds every
/// row exactly once (the killed run's uploaded files are removed by the re-run, which imports
/// the input in full), and no journal is left.
#[test]
fn killed_imports_leave_every_row_once() {
    let Some(env) = minio() else { return };
    let Some((head, body)) = corpus_conn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The corpus log's records 40 times over, with hour partitions: 24 files uploaded one after
    // the other at the end of the run.
    let copies = 40;
    let mut big = head;
    for _ in 0..copies {
        for l in &body {
            big.push_str(l);
            big.push('\n');
        }
    }
    let input = dir.path().join("conn.log");
    std::fs::write(&input, big).unwrap();
    let expected = (body.len() * copies).to_string();

    // The runs' `$TMPDIR`, where each stages its files: a killed run's staging directory is
    // removed by the next run. Only for the child processes: `remote_lake` sets its environment
    // in this process, where other tests make their temporary directories.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut runs_env = env.clone();
    runs_env.push(("TMPDIR".into(), p(&tmp).to_string()));
    let staged = || -> Vec<String> {
        std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let bucket = bucket("kill");
    let s3 = format!("s3://{bucket}/lake");
    let remote = &remote_lake(&env, &s3);
    let args = [
        "import",
        "zeek",
        p(&input),
        "--lake",
        &s3,
        "--partition",
        "hour",
    ];
    // Each run is killed right after its first data file appears in the bucket (the run before
    // it left files there too: those are recovered by this run first).
    let mut killed = 0;
    for _ in 0..3 {
        let before: std::collections::HashSet<String> = remote
            .list("zeek.conn")
            .unwrap()
            .into_iter()
            .map(|o| o.rel)
            .collect();
        let mut c = silt();
        let mut child = c
            .envs(runs_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            let fresh = remote
                .list("zeek.conn")
                .unwrap()
                .into_iter()
                .any(|o| !before.contains(&o.rel));
            if fresh {
                child.kill().unwrap();
                killed += 1;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.wait().unwrap();
        // What the runs before this one left in `$TMPDIR` is gone; this one's is there if it
        // was killed.
        assert!(staged().len() <= 1, "{:?}", staged());
    }
    assert!(
        killed >= 1,
        "every run finished before its first upload was seen"
    );
    // `vacuum --dry-run` names the dead run and its uploaded files, and changes nothing.
    let journals = |remote: &silt_lake::remote::RemoteLake| -> Vec<String> {
        remote
            .list("_silt/imports")
            .unwrap()
            .into_iter()
            .map(|o| o.rel)
            .filter(|r| r.ends_with(".journal"))
            .collect()
    };
    let left = journals(remote);
    let objects = remote.list("zeek.conn").unwrap().len();
    let o = run(&env, &["vacuum", "--lake", &s3, "--dry-run", "--json"]);
    let dry: serde_json::Value = serde_json::from_str(&stdout(ok(&o))).unwrap();
    assert_eq!(dry["dead_imports"], left.len(), "{dry}");
    if !left.is_empty() {
        assert!(dry["dead_import_files"].as_u64().unwrap() >= 1, "{dry}");
    }
    assert_eq!(journals(remote), left);
    assert_eq!(remote.list("zeek.conn").unwrap().len(), objects);
    // The run that completes removes what the killed ones uploaded, and says so.
    let o = run(&runs_env, &args);
    ok(&o);
    let said = String::from_utf8_lossy(&o.stderr).into_owned() + &stdout(&o);
    assert!(said.contains("interrupted import"), "{said}");
    assert!(staged().is_empty(), "left in $TMPDIR: {:?}", staged());
    let count = query_csv(&env, &s3, "SELECT count(*) AS n FROM zeek.conn");
    let row = count.lines().nth(1).unwrap().to_string();
    assert_eq!(row, expected, "killed {killed} runs");
    assert!(journals(remote).is_empty(), "{:?}", journals(remote));
    // A second complete run is skipped: still once.
    ok(&run(&runs_env, &args));
    let again = query_csv(&env, &s3, "SELECT count(*) FROM zeek.conn");
    assert_eq!(again.lines().nth(1).unwrap(), expected);
}

/// Rows of every Parquet object below `table/` in the bucket, as a glob reader (DuckDB,
/// Spark) counts them: no records consulted.
fn glob_rows(remote: &silt_lake::remote::RemoteLake, table: &str) -> (u64, usize) {
    let mut rows = 0;
    let mut files = 0;
    for o in remote.list(table).unwrap() {
        if !o.rel.ends_with(".parquet") || o.rel.split('/').any(|c| c.starts_with('.')) {
            continue;
        }
        let bytes = remote.get(&o.rel).unwrap().unwrap();
        let md = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&bytes)
            .unwrap();
        rows += md.file_metadata().num_rows() as u64;
        files += 1;
    }
    (rows, files)
}

/// Many small files (four imports of parts of a real conn.log, hour partitions) are compacted in
/// the bucket: the answers stay the same, the files become one per partition. Compactions killed
/// after their record, after their upload and while deleting inputs never make silt count a row
/// twice or lose one, and the next maintenance command leaves the bucket right for glob readers
/// too. Then retention drops partitions by their time, and vacuum finishes.
#[test]
fn compaction_retention_and_vacuum_work_in_the_bucket() {
    let Some(env) = minio() else { return };
    let Some((head, body)) = corpus_conn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bucket = bucket("maint");
    let s3 = format!("s3://{bucket}/lake");
    let parts = 4;
    // Every fourth record to each import: each covers all 24 hours, so every hour partition
    // gets four small files.
    for i in 0..parts {
        let input = dir.path().join(format!("conn-{i}.log"));
        let mut t = head.clone();
        for l in body.iter().skip(i).step_by(parts) {
            t.push_str(l);
            t.push('\n');
        }
        std::fs::write(&input, t).unwrap();
        ok(&run(
            &env,
            &[
                "import",
                "zeek",
                p(&input),
                "--lake",
                &s3,
                "--partition",
                "hour",
            ],
        ));
    }
    let remote = &remote_lake(&env, &s3);
    let sql = "SELECT count(*) AS n, sum(orig_bytes) AS b, count(DISTINCT uid) AS u FROM zeek.conn";
    let query = || {
        stdout(ok(&run(
            &env,
            &["query", "--lake", &s3, "--format", "csv", sql],
        )))
    };
    let expected = query();
    assert!(
        expected.contains(&format!("\n{},", body.len())),
        "{expected}"
    );
    let (rows, files_before) = glob_rows(remote, "zeek.conn");
    assert_eq!(rows, body.len() as u64);
    assert_eq!(files_before, 24 * parts, "four files per hour partition");

    // Killed at each step of a compaction: silt's answers never change.
    for point in ["compact-recorded", "compact-published", "compact-removing"] {
        let mut c = silt();
        let o = c
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("SILT_FAILPOINT", point)
            .args(["compact", "--lake", &s3])
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "{point}: the failpoint was not reached"
        );
        assert_eq!(query(), expected, "after a compaction killed at {point}");
    }
    // The next compaction recovers first (finishing the one killed after its commit), then
    // merges the rest.
    let o = run(&env, &["compact", "--lake", &s3, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(ok(&o))).unwrap();
    assert_eq!(report["errors"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(query(), expected);
    let (rows, files_after) = glob_rows(remote, "zeek.conn");
    assert_eq!(
        rows,
        body.len() as u64,
        "a glob reader counts every row once"
    );
    assert_eq!(files_after, 24, "one file per hour partition");
    assert!(!remote.exists("_silt/maintenance.lock").unwrap());
    // Nothing left to merge.
    let o = run(&env, &["compact", "--lake", &s3]);
    assert!(
        stdout(ok(&o)).contains("nothing to compact"),
        "{}",
        stdout(&o)
    );

    // Retention by partition time: the 2009 conn.log goes, this hour's events stay, and a
    // 40-day-old partition of the same table goes.
    let now = chrono::Utc::now();
    let events = dir.path().join("events.ndjson");
    let old = now - chrono::Duration::days(40);
    std::fs::write(
        &events,
        format!(
            "{{\"ts\":\"{}\",\"a\":1}}\n{{\"ts\":\"{}\",\"a\":2}}\n",
            old.to_rfc3339(),
            now.to_rfc3339()
        ),
    )
    .unwrap();
    ok(&run(
        &env,
        &[
            "import",
            "json",
            p(&events),
            "--lake",
            &s3,
            "--table",
            "app.events",
            "--partition",
            "day",
        ],
    ));
    let o = run(&env, &["retain", "--lake", &s3, "--keep", "30d", "--json"]);
    let rep: serde_json::Value = serde_json::from_str(&stdout(ok(&o))).unwrap();
    let dropped: Vec<String> = rep["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["table"].as_str().unwrap(),
                d["partition"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        dropped,
        [
            format!("app.events/dt={}", old.format("%Y-%m-%d")),
            "zeek.conn/dt=2009-11-18".to_string(),
            "zeek.conn/dt=2009-11-19".to_string(),
        ],
        "{rep}"
    );
    let left = query_csv(&env, &s3, "SELECT sum(a) AS a FROM app.events");
    assert_eq!(left.lines().nth(1), Some("2"), "{left}");
    assert_eq!(glob_rows(remote, "zeek.conn"), (0, 0));
    // The emptied table keeps its columns (a schema kept in _silt/tables/): zero rows, not
    // "table not found".
    let empty = query_csv(
        &env,
        &s3,
        "SELECT count(*) AS n, count(id.orig_h) AS h, max(dt) AS d FROM zeek.conn",
    );
    assert_eq!(empty.trim(), "n,h,d\n0,0,", "{empty}");
    let tables = stdout(ok(&run(&env, &["tables", "--lake", &s3, "--json"])));
    assert!(tables.contains("\"zeek.conn\""), "{tables}");
    // Vacuum with no grace removes the records the maintenance left; its dry run reports the
    // same and removes nothing.
    let records = || {
        let mut r: Vec<String> = ["_silt/replace", "_silt/drop"]
            .iter()
            .flat_map(|d| remote.list(d).unwrap())
            .map(|o| o.rel)
            .collect();
        r.sort();
        r
    };
    let before = records();
    assert!(!before.is_empty());
    let vacuum = |dry: bool| -> serde_json::Value {
        let mut args = vec!["vacuum", "--lake", &s3, "--grace", "0s", "--json"];
        if dry {
            args.push("--dry-run");
        }
        serde_json::from_str(&stdout(ok(&run(&env, &args)))).unwrap()
    };
    let dry = vacuum(true);
    assert_eq!(records(), before);
    let done = vacuum(false);
    for k in [
        "records_expired",
        "trash",
        "compactions_undone",
        "dead_imports",
    ] {
        assert_eq!(dry[k], done[k], "{k}: {dry} vs {done}");
    }
    assert_eq!(
        (done["records_expired"].as_u64().unwrap() + done["trash"].as_u64().unwrap()) as usize,
        before.len(),
        "{done}"
    );
    for d in ["_silt/replace", "_silt/drop"] {
        assert!(remote.list(d).unwrap().is_empty(), "{d} left");
    }
}

/// The Delta log of `table` in the bucket, after checking that it names exactly the data files
/// silt's readers list there (paths below the table).
fn bucket_log(remote: &silt_lake::remote::RemoteLake, table: &str) -> silt_lake::delta::DeltaLog {
    let lake = silt_lake::delta::Lake::Remote(remote);
    let log = silt_lake::delta::DeltaLog::open_at(&lake.location(table).unwrap())
        .unwrap()
        .unwrap_or_else(|| panic!("{table} has no Delta log in the bucket"));
    let name = silt_core::TableName::parse(table).unwrap();
    let root = remote.root_path().join(table);
    let mut listed: Vec<String> = remote
        .data_files(&name)
        .unwrap()
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    listed.sort();
    assert_eq!(
        log.files().unwrap(),
        listed,
        "the log names the files silt lists"
    );
    log
}

/// Copies the objects below `table` in the bucket to `to/<table>` (what a Delta reader of the
/// bucket would read).
fn mirror(remote: &silt_lake::remote::RemoteLake, table: &str, to: &Path) -> std::path::PathBuf {
    let _ = std::fs::remove_dir_all(to);
    for o in remote.list(table).unwrap() {
        let local = to.join(&o.rel);
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        std::fs::write(&local, remote.get(&o.rel).unwrap().unwrap()).unwrap();
    }
    to.to_path_buf()
}

/// `--table-format delta` on a bucket: the table's log is kept at `zeek.conn/_delta_log/` in the
/// bucket, and after every step names exactly the files silt's readers list there: an import
/// that creates it, a plain import into the table afterwards, a compaction killed after its
/// upload and the one that recovers it, a stray file that vacuum removes, and retention. DuckDB's
/// `delta_scan` over a copy of the table's objects counts what silt counts, `silt tables` says
/// `delta`, and `silt ddl` for Athena declares a Delta table at the bucket's location.
#[test]
fn delta_tables_in_the_bucket() {
    let Some(env) = minio() else { return };
    let Some((head, body)) = corpus_conn() else {
        return;
    };
    let delta_py = delta_python();
    let dir = tempfile::tempdir().unwrap();
    let bucket = bucket("delta");
    let s3 = format!("s3://{bucket}/lake");
    for i in 0..2 {
        let input = dir.path().join(format!("conn-{i}.log"));
        let mut t = head.clone();
        for l in body.iter().skip(i).step_by(2) {
            t.push_str(l);
            t.push('\n');
        }
        std::fs::write(&input, t).unwrap();
        let mut args = vec![
            "import",
            "zeek",
            p(&input),
            "--lake",
            &s3,
            "--partition",
            "hour",
        ];
        if i == 0 {
            args.extend(["--table-format", "delta"]);
        }
        ok(&run(&env, &args));
    }
    let remote = &remote_lake(&env, &s3);
    let sql = "SELECT count(*) AS n, count(DISTINCT uid) AS u, sum(orig_bytes) AS b FROM zeek.conn";
    let query = || -> (u64, u64, u64) {
        let out = query_csv(&env, &s3, sql);
        let row = out.lines().nth(1).unwrap().to_string();
        let v: Vec<u64> = row.split(',').map(|x| x.parse().unwrap()).collect();
        (v[0], v[1], v[2])
    };
    let expected = query();
    assert_eq!(expected.0, body.len() as u64);
    let log = bucket_log(remote, "zeek.conn");
    assert_eq!(log.num_records().unwrap(), Some(expected.0));
    assert_eq!(log.files().unwrap().len(), 48, "two imports, 24 hours each");
    let check_delta_scan = |what: &str| {
        if let Some(py) = &delta_py {
            let copy = mirror(remote, "zeek.conn", &dir.path().join("mirror"));
            assert_eq!(
                delta_scan_fingerprint(py, &copy),
                query(),
                "DuckDB's delta_scan {what}"
            );
        }
    };
    check_delta_scan("after the imports");
    let tables = stdout(ok(&run(&env, &["tables", "--lake", &s3, "--json"])));
    let compact: String = tables.split_whitespace().collect();
    assert!(compact.contains("\"format\":\"delta\""), "{tables}");
    let ddl = stdout(ok(&run(
        &env,
        &["ddl", "--dialect", "athena", "zeek.conn", "--lake", &s3],
    )));
    assert!(
        ddl.contains(&format!("LOCATION '{s3}/zeek.conn/'")) && ddl.contains("'DELTA'"),
        "{ddl}"
    );

    // An import killed after its commit to the log and before its run is recorded: the next
    // maintenance command takes its files out of the log, then deletes them.
    let extra = dir.path().join("conn-extra.log");
    std::fs::write(&extra, format!("{head}{}\n", body[..100].join("\n"))).unwrap();
    let mut c = silt();
    let o = c
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("SILT_FAILPOINT", "import-committed")
        .args([
            "import",
            "zeek",
            p(&extra),
            "--lake",
            &s3,
            "--partition",
            "hour",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success(), "the failpoint was not reached");
    let log = silt_lake::delta::DeltaLog::open_at(
        &silt_lake::delta::Lake::Remote(remote)
            .location("zeek.conn")
            .unwrap(),
    )
    .unwrap()
    .unwrap();
    assert_eq!(log.num_records().unwrap(), Some(expected.0 + 100));
    let o = run(&env, &["vacuum", "--lake", &s3, "--json"]);
    let rep: serde_json::Value = serde_json::from_str(&stdout(ok(&o))).unwrap();
    assert_eq!(rep["dead_imports"], 1, "{rep}");
    assert_eq!(query(), expected);
    assert_eq!(
        bucket_log(remote, "zeek.conn").num_records().unwrap(),
        Some(expected.0)
    );

    // A compaction killed after its output is uploaded and before the log has the swap: silt
    // counts every row once; the next compaction commits the swap, then merges the rest.
    let mut c = silt();
    let o = c
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("SILT_FAILPOINT", "compact-renamed")
        .args(["compact", "--lake", &s3])
        .output()
        .unwrap();
    assert!(!o.status.success(), "the failpoint was not reached");
    assert_eq!(query(), expected);
    let o = run(&env, &["compact", "--lake", &s3, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(ok(&o))).unwrap();
    assert_eq!(report["errors"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(query(), expected);
    let log = bucket_log(remote, "zeek.conn");
    assert_eq!(
        log.files().unwrap().len(),
        24,
        "one file per hour partition"
    );
    assert_eq!(log.num_records().unwrap(), Some(expected.0));
    check_delta_scan("after the compaction");

    // A file the log does not name (a copy of one it does): vacuum removes it.
    let first = log.files().unwrap()[0].clone();
    let (part, _) = first.rsplit_once('/').unwrap();
    let stray = format!("zeek.conn/{part}/stray.parquet");
    let bytes = remote.get(&format!("zeek.conn/{first}")).unwrap().unwrap();
    remote.put(&stray, bytes.to_vec()).unwrap();
    let o = run(&env, &["vacuum", "--lake", &s3, "--grace", "0s", "--json"]);
    let rep: serde_json::Value = serde_json::from_str(&stdout(ok(&o))).unwrap();
    assert_eq!(rep["delta_unreferenced_files"], 1, "{rep}");
    assert!(!remote.exists(&stray).unwrap());
    bucket_log(remote, "zeek.conn");
    assert_eq!(query(), expected);

    // Retention drops the 2009 partitions: the log first stops naming their files.
    ok(&run(&env, &["retain", "--lake", &s3, "--keep", "30d"]));
    let log = bucket_log(remote, "zeek.conn");
    assert!(log.files().unwrap().is_empty());
    assert_eq!(log.num_records().unwrap(), Some(0));
}

/// `silt serve --lake s3://…`: events acknowledged over HTTP are queryable at once, reach the
/// bucket through flushes (merged there by `--compact-every`), with rejects in the bucket's
/// `_rejects/`; events only in the write-ahead log of a server killed with SIGKILL reach the
/// bucket once when it starts again, also when servers are killed at random moments while
/// flushing; an operator's compaction and retention on the bucket are picked up by a running
/// server; a second server for the same instance and a state directory of another lake are
/// refused.
#[test]
fn serve_writes_the_bucket_and_a_killed_server_loses_nothing() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let Some(env) = minio() else { return };
    let bucket = bucket("serve");
    let s3 = format!("s3://{bucket}/l");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let agent = agent();
    let post = |addr: &str, body: String| {
        let mut r = agent
            .post(&format!("{addr}/v1/ingest/app.events"))
            .header("Content-Type", "application/x-ndjson")
            .send(body.as_bytes())
            .unwrap();
        let text = r.body_mut().read_to_string().unwrap();
        assert_eq!(r.status().as_u16(), 200, "{text}");
    };
    let batch = |ids: std::ops::Range<u32>| -> String {
        ids.map(|i| {
            format!(
                "{{\"time\":\"2024-03-24T{:02}:{:02}:00Z\",\"id\":{i}}}\n",
                i % 24,
                i % 60
            )
        })
        .collect()
    };
    let counts = |addr: &str| -> String {
        let mut r = agent
            .post(&format!("{addr}/v1/query?format=csv"))
            .send("SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events")
            .unwrap();
        r.body_mut().read_to_string().unwrap()
    };
    // Acknowledged rows are queryable moments later, once decoded.
    let wait_counts = |addr: &str, want: &str| {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let c = counts(addr);
            if c.contains(want) {
                return;
            }
            assert!(Instant::now() < until, "{c} while waiting for {want}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let in_bucket = || {
        query_csv(
            &env,
            &s3,
            "SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events",
        )
    };
    let wait_metric = |addr: &str, name: &str, at_least: u64| {
        let until = Instant::now() + Duration::from_secs(60);
        while common::metric(&agent, addr, name) < at_least {
            assert!(Instant::now() < until, "{name} stayed below {at_least}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let lake = Path::new(&s3);
    let st = p(&state);

    // Without --state, serve says what it needs.
    let o = run(&env, &["serve", "--lake", &s3]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--state DIR"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // 1. Ten flushes' worth of batches, a bad line among them; compaction merges the files.
    let (mut child, addr) = common::serve_in(
        &env,
        lake,
        &[
            "--state",
            st,
            "--flush-age",
            "200ms",
            "--compact-every",
            "2s",
        ],
        None,
    );
    for b in 0..10 {
        post(&addr, batch(b * 100..(b + 1) * 100));
        std::thread::sleep(Duration::from_millis(250));
    }
    post(&addr, "not json\n".into());
    wait_counts(&addr, "1000,1000");
    wait_metric(&addr, "silt_flush_rows_total", 1000);
    wait_metric(&addr, "silt_compactions_total", 1);
    let flushes = common::metric(&agent, &addr, "silt_flush_total");
    wait_counts(&addr, "1000,1000");
    common::terminate(&mut child);
    assert!(in_bucket().contains("1000,1000"), "{}", in_bucket());
    let remote = remote_lake(&env, &s3);
    let files = remote
        .list("app.events")
        .unwrap()
        .into_iter()
        .filter(|o| o.rel.ends_with(".parquet"))
        .count();
    assert!(
        files as u64 <= flushes / 2,
        "{files} files in the bucket after compacting {flushes} flushes"
    );
    let rejects = remote.list("_rejects").unwrap();
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    let body = remote.get(&rejects[0].rel).unwrap().unwrap();
    assert!(String::from_utf8_lossy(&body).contains("not json"));
    // Nothing half-done is left: no journal, the lease released, the flush record in place.
    let record: Vec<String> = remote
        .list("_silt")
        .unwrap()
        .into_iter()
        .map(|o| o.rel)
        .filter(|r| r.starts_with("_silt/imports") || r.starts_with("_silt/serve"))
        .collect();
    assert_eq!(record, vec!["_silt/imports/flush.json".to_string()]);

    // 2. Acknowledged but only in the log: killed before any flush.
    let (mut child, addr) =
        common::serve_in(&env, lake, &["--state", st, "--flush-age", "1h"], None);
    post(&addr, batch(1000..1500));
    wait_counts(&addr, "1500,1500");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(in_bucket().contains("1000,1000"), "{}", in_bucket());

    // 3. The restart replays them into the bucket, once.
    let (mut child, addr) =
        common::serve_in(&env, lake, &["--state", st, "--flush-age", "200ms"], None);
    wait_metric(&addr, "silt_flush_rows_total", 500);
    wait_counts(&addr, "1500,1500");
    // A second server for the same instance, from another state directory, is refused.
    let other = dir.path().join("other");
    let o = run(
        &env,
        &[
            "serve",
            "--lake",
            &s3,
            "--state",
            p(&other),
            "--http",
            "127.0.0.1:0",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("another silt serve holds"), "{err}");
    common::terminate(&mut child);
    assert!(in_bucket().contains("1500,1500"), "{}", in_bucket());

    // 4. Killed at random moments while a client sends batches (resending an unacknowledged one
    // with the same idempotency key) and the server flushes every 100 ms: each batch once.
    let next = Arc::new(AtomicUsize::new(15));
    for kill in 0..6 {
        let (mut child, addr) =
            common::serve_in(&env, lake, &["--state", st, "--flush-age", "100ms"], None);
        let stop = Arc::new(AtomicBool::new(false));
        let c = {
            let (next, stop, agent) = (next.clone(), stop.clone(), agent.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let b = next.load(Ordering::Relaxed) as u32;
                    let r = agent
                        .post(&format!("{addr}/v1/ingest/app.events"))
                        .header("Content-Type", "application/x-ndjson")
                        .header("Idempotency-Key", &format!("batch-{b}"))
                        .send(batch(b * 100..(b + 1) * 100).as_bytes());
                    match r {
                        Ok(r) if r.status().as_u16() == 200 => {
                            next.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64;
        std::thread::sleep(Duration::from_millis(300 + nanos % 1200));
        if kill < 5 {
            child.kill().unwrap();
            child.wait().unwrap();
            stop.store(true, Ordering::Relaxed);
            c.join().unwrap();
        } else {
            // The last server takes the resent batch, then stops cleanly.
            stop.store(true, Ordering::Relaxed);
            c.join().unwrap();
            common::terminate(&mut child);
        }
    }
    let acked = next.load(Ordering::Relaxed) * 100;
    assert!(acked > 1500, "no batch acknowledged while killing");
    assert!(
        in_bucket().contains(&format!("{acked},{acked}")),
        "{} for {acked} acknowledged",
        in_bucket()
    );

    // 5. An operator's compaction and retention on the bucket next to a running server: the
    // server sees their records (within its 5 s watch), lists the bucket again, and answers
    // from the merged files, then without the dropped partitions. (app.events has no time
    // partitions, being small: app.old is made with day partitions by an import first.)
    let old = dir.path().join("old.ndjson");
    std::fs::write(&old, "{\"time\":\"2024-03-24T00:00:00Z\",\"id\":-1}\n").unwrap();
    let args = [
        "import",
        "json",
        p(&old),
        "--lake",
        &s3,
        "--table",
        "app.old",
    ];
    ok(&run(&env, &[&args[..], &["--partition", "day"]].concat()));
    let (mut child, addr) =
        common::serve_in(&env, lake, &["--state", st, "--flush-age", "100ms"], None);
    let old_counts = || {
        let mut r = agent
            .post(&format!("{addr}/v1/query?format=csv"))
            .send("SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.old")
            .unwrap();
        r.body_mut().read_to_string().unwrap()
    };
    for b in 0..4 {
        let mut r = agent
            .post(&format!("{addr}/v1/ingest/app.old"))
            .header("Content-Type", "application/x-ndjson")
            .send(batch(b * 100..(b + 1) * 100).as_bytes())
            .unwrap();
        assert_eq!(
            r.status().as_u16(),
            200,
            "{}",
            r.body_mut().read_to_string().unwrap()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_metric(&addr, "silt_flush_rows_total", 400);
    let until = Instant::now() + Duration::from_secs(30);
    while !old_counts().contains("\n401,401") {
        assert!(Instant::now() < until, "{}", old_counts());
        std::thread::sleep(Duration::from_millis(50));
    }
    let small = remote.list("app.old").unwrap().len();
    let o = run(
        &env,
        &["compact", "--lake", &s3, "--table", "app.old", "--json"],
    );
    let report: serde_json::Value = serde_json::from_str(&stdout(ok(&o))).unwrap();
    assert!(
        report["tables"][0]["groups"].as_u64() >= Some(1),
        "nothing compacted among {small} objects: {report}"
    );
    assert!(remote.list("app.old").unwrap().len() < small);
    wait_metric(&addr, "silt_lake_rescans_total", 1);
    assert!(old_counts().contains("\n401,401"), "{}", old_counts());
    let rescans = common::metric(&agent, &addr, "silt_lake_rescans_total");
    let kept = stdout(ok(&run(&env, &["retain", "--lake", &s3, "--keep", "30d"])));
    wait_metric(&addr, "silt_lake_rescans_total", rescans + 1);
    assert!(old_counts().contains("\n0,0"), "{}{kept}", old_counts());
    common::terminate(&mut child);
    assert!(
        in_bucket().contains(&format!("{acked},{acked}")),
        "{}",
        in_bucket()
    );

    // The state directory belongs to its lake.
    let o = run(
        &env,
        &[
            "serve",
            "--lake",
            &format!("s3://{bucket}/elsewhere"),
            "--state",
            st,
            "--http",
            "127.0.0.1:0",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("belongs to the lake"), "{err}");
}

/// `silt serve --table-format delta` on a bucket: every flush is committed to the table's Delta
/// log in the bucket, and the server's own compactions swap files in it, so that after a drain
/// the log names exactly the files silt lists and counts every acknowledged event once.
#[test]
fn serve_commits_flushes_to_a_delta_log_in_the_bucket() {
    use std::time::{Duration, Instant};
    let Some(env) = minio() else { return };
    let bucket = bucket("serve-delta");
    let s3 = format!("s3://{bucket}/l");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let agent = agent();
    let (mut child, addr) = common::serve_in(
        &env,
        Path::new(&s3),
        &[
            "--state",
            p(&state),
            "--table-format",
            "delta",
            "--flush-age",
            "200ms",
            "--compact-every",
            "2s",
        ],
        None,
    );
    for b in 0..6u32 {
        let body: String = (b * 100..(b + 1) * 100)
            .map(|i| {
                format!(
                    "{{\"time\":\"2024-03-24T{:02}:00:00Z\",\"id\":{i}}}\n",
                    i % 3
                )
            })
            .collect();
        let mut r = agent
            .post(&format!("{addr}/v1/ingest/app.events"))
            .header("Content-Type", "application/x-ndjson")
            .send(body.as_bytes())
            .unwrap();
        let text = r.body_mut().read_to_string().unwrap();
        assert_eq!(r.status().as_u16(), 200, "{text}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let until = Instant::now() + Duration::from_secs(60);
    while common::metric(&agent, &addr, "silt_compactions_total") < 1
        || common::metric(&agent, &addr, "silt_flush_rows_total") < 600
    {
        assert!(
            Instant::now() < until,
            "no flush of every row and compaction"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    common::terminate(&mut child);
    let remote = remote_lake(&env, &s3);
    let log = bucket_log(&remote, "app.events");
    assert_eq!(log.num_records().unwrap(), Some(600));
    assert!(
        log.version().unwrap() >= 2,
        "a creation and commits after it"
    );
    let q = query_csv(
        &env,
        &s3,
        "SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.events",
    );
    assert!(q.contains("600,600"), "{q}");
}

/// Four `silt import --table-format delta` processes at once into one table of a bucket: each
/// commit gets its own version through MinIO's conditional writes (the first creates the log,
/// the others find it), and the log ends up naming every file once.
#[test]
fn concurrent_importers_commit_to_one_delta_log_in_the_bucket() {
    let Some(env) = minio() else { return };
    let bucket = bucket("delta-race");
    let s3 = format!("s3://{bucket}/l");
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..4u32)
        .map(|w| {
            let input = dir.path().join(format!("w{w}.ndjson"));
            let body: String = (0..200u32)
                .map(|i| {
                    format!(
                        "{{\"ts\":\"2024-03-24T{:02}:00:00Z\",\"id\":{}}}\n",
                        i % 24,
                        w * 1000 + i
                    )
                })
                .collect();
            std::fs::write(&input, body).unwrap();
            let mut c = silt();
            c.env_remove("AWS_PROFILE").env("HOME", "/nonexistent");
            c.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .args(["import", "json", p(&input), "--lake", &s3])
                .args(["--table", "app.race", "--table-format", "delta"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        ok(&c.wait_with_output().unwrap());
    }
    let remote = remote_lake(&env, &s3);
    let log = bucket_log(&remote, "app.race");
    assert_eq!(log.num_records().unwrap(), Some(800));
    let q = query_csv(
        &env,
        &s3,
        "SELECT count(*) AS n, count(DISTINCT id) AS d FROM app.race",
    );
    assert!(q.contains("800,800"), "{q}");
}
