//! Lake maintenance through the binary (issue 25): `silt compact` killed at each of its steps and
//! at random moments never loses or duplicates a row, as silt sees the lake right away and as
//! DuckDB's glob sees it once silt has opened the lake again, and for a Delta table
//! (`--table-format delta`) as its log (silt's and DuckDB's `delta_scan`) sees it at every moment;
//! `silt retain` drops whole old partitions; `silt vacuum` removes crash leftovers.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{delta_python, delta_scan_fingerprint, ok, p, silt};

/// A lake of zeek tables with six small files per partition (six imports), of `--table-format
/// format`.
fn small_files_lake(dir: &Path, format: &str) -> PathBuf {
    generated_lake(
        dir,
        &format!("lake-{format}"),
        6,
        "1500",
        &["--partition", "hour", "--table-format", format],
    )
}

/// `dir/name`, a lake of `imports` imports of generated zeek logs (`events` each, seeds 0, 1, ...)
/// with `import_args`.
fn generated_lake(
    dir: &Path,
    name: &str,
    imports: u32,
    events: &str,
    import_args: &[&str],
) -> PathBuf {
    let lake = dir.join(name);
    for i in 0..imports {
        let logs = dir.join(format!("logs{i}"));
        let seed = i.to_string();
        ok(&[
            "generate",
            "zeek",
            "--events",
            events,
            "--seed",
            &seed,
            "-o",
            p(&logs),
        ]);
        let mut args = vec!["import", "zeek", p(&logs), "--lake", p(&lake), "-q"];
        args.extend_from_slice(import_args);
        ok(&args);
    }
    lake
}

const FINGERPRINT: &str = "SELECT count(*), count(DISTINCT uid), sum(orig_bytes), sum(resp_bytes), min(ts), max(ts) FROM zeek.conn";

/// Rows, distinct uids and sums of zeek.conn as silt sees them.
fn silt_fingerprint(lake: &Path) -> String {
    ok(&["query", "--lake", p(lake), "--format", "csv", FINGERPRINT])
}

/// `silt compact --lake LAKE -q`, running.
fn spawn_compact(lake: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_silt"))
        .args(["compact", "--lake", p(lake), "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn parquet_files(d: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let path = e.path();
        if e.file_type().unwrap().is_dir() {
            n += parquet_files(&path);
        } else if path.extension().is_some_and(|x| x == "parquet") {
            n += 1;
        }
    }
    n
}

/// The venv python with duckdb (scripts/pyenv.sh), or None after a skip message (a failure in CI).
fn python() -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pyenv.sh");
    let out = Command::new("bash").arg(script).output().ok()?;
    let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if out.status.success() && !p.is_empty() {
        Some(p)
    } else {
        silt_testkit::skip("duckdb (scripts/pyenv.sh) is not available")
    }
}

/// The same figures through DuckDB's glob over the table directory (what other engines see).
fn duckdb_fingerprint(py: &str, lake: &Path) -> (u64, u64, u64) {
    let script = r#"
import duckdb, sys
q = f"""SELECT count(*), count(DISTINCT uid), sum(orig_bytes) FROM
  read_parquet('{sys.argv[1]}', hive_partitioning = true)"""
print(",".join(str(x) for x in duckdb.connect().execute(q).fetchall()[0]))
"#;
    let glob = data_glob(&lake.join("zeek.conn"));
    let out = Command::new(py)
        .args(["-c", script, &glob])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    let v: Vec<u64> = s.trim().split(',').map(|x| x.parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

/// The glob of a table's data files through its partition directories (`dt=*/hour=*/*.parquet`
/// for the hour layout), as a plain DuckDB user writes it: not `**`, which would also take a
/// Delta table's Parquet checkpoints in `_delta_log/` (bench/lake_ops.py does the same).
fn data_glob(table: &Path) -> String {
    let mut dir = table.to_path_buf();
    let mut levels = Vec::new();
    loop {
        let entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        if entries
            .iter()
            .any(|e| e.extension().is_some_and(|x| x == "parquet"))
        {
            break;
        }
        let Some(sub) = entries.into_iter().find(|e| {
            e.is_dir()
                && e.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with(['_', '.']) && n.contains('='))
        }) else {
            break;
        };
        let name = sub.file_name().unwrap().to_str().unwrap().to_string();
        levels.push(format!("{}=*", name.split('=').next().unwrap()));
        dir = sub;
    }
    let mut glob = table.to_path_buf();
    glob.extend(levels);
    p(&glob.join("*.parquet")).to_string()
}

/// Rows, distinct uids and orig_bytes sum from silt's CSV fingerprint.
fn head3(fp: &str) -> (u64, u64, u64) {
    let row = fp.lines().nth(1).unwrap();
    let v: Vec<u64> = row.split(',').take(3).map(|x| x.parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// What a Delta reader sees of zeek.conn: the rows the log's statistics count, after checking
/// that every file the log names exists (a reader would fail on a missing one).
fn delta_rows(lake: &Path) -> u64 {
    let dir = lake.join("zeek.conn");
    let log = silt_lake::delta::DeltaLog::open(&dir)
        .unwrap()
        .expect("zeek.conn has a Delta log");
    for f in log.files().unwrap() {
        assert!(
            dir.join(&f).is_file(),
            "the Delta log names {f}, which is gone"
        );
    }
    log.num_records()
        .unwrap()
        .expect("every file has statistics")
}

#[test]
fn compaction_of_a_delta_table_killed_at_every_step_keeps_the_log_true() {
    let delta_py = delta_python();
    let t = tempfile::tempdir().unwrap();
    let pristine = small_files_lake(t.path(), "delta");
    let expected = silt_fingerprint(&pristine);
    let (rows, _, _) = head3(&expected);
    assert_eq!(delta_rows(&pristine), rows);
    for point in [
        "compact-recorded",
        "compact-renamed",
        "compact-published",
        "compact-removing",
    ] {
        let lake = t.path().join(point);
        copy_dir(&pristine, &lake);
        let o = Command::new(env!("CARGO_BIN_EXE_silt"))
            .args(["compact", "--lake", p(&lake), "-q"])
            .env("SILT_FAILPOINT", point)
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "{point}: the failpoint was not reached"
        );
        // Right after the crash: silt and a Delta reader each see every row once.
        assert_eq!(
            silt_fingerprint(&lake),
            expected,
            "after a crash at {point}"
        );
        assert_eq!(delta_rows(&lake), rows, "Delta after a crash at {point}");
        if let Some(py) = &delta_py {
            assert_eq!(
                delta_scan_fingerprint(py, &lake),
                head3(&expected),
                "DuckDB's delta_scan after a crash at {point}"
            );
        }
        ok(&["compact", "--lake", p(&lake), "-q"]);
        assert_eq!(
            silt_fingerprint(&lake),
            expected,
            "after recovery from {point}"
        );
        assert_eq!(delta_rows(&lake), rows, "Delta after recovery from {point}");
        if let Some(py) = &delta_py {
            assert_eq!(
                delta_scan_fingerprint(py, &lake),
                head3(&expected),
                "DuckDB's delta_scan after recovery from {point}"
            );
        }
        // The log names exactly the files on disk.
        let log = silt_lake::delta::DeltaLog::open(&lake.join("zeek.conn"))
            .unwrap()
            .unwrap();
        assert_eq!(
            log.files().unwrap().len(),
            parquet_files(&lake.join("zeek.conn")),
            "{point}"
        );
    }
}

#[test]
fn concurrent_importers_and_compactions_of_one_delta_table_lose_no_commit() {
    let delta_py = delta_python();
    let t = tempfile::tempdir().unwrap();
    let lake = t.path().join("lake");
    let mut logs = Vec::new();
    for i in 0..4 {
        let dir = t.path().join(format!("logs{i}"));
        ok(&[
            "generate",
            "zeek",
            "--events",
            "1500",
            "--seed",
            &i.to_string(),
            "-o",
            p(&dir),
        ]);
        logs.push(dir);
    }
    // Four importers at once (the first commits create the log: one of them wins version 0),
    // and compactions running beside them.
    let importers: Vec<_> = logs
        .iter()
        .map(|dir| {
            Command::new(env!("CARGO_BIN_EXE_silt"))
                .args(["import", "zeek", p(dir), "--lake", p(&lake)])
                .args(["--partition", "hour", "--table-format", "delta", "-q"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Compactions start once the first commit made the log (while the others still import).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !lake.join("zeek.conn/_delta_log").is_dir() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..3 {
        let o = silt(&["compact", "--lake", p(&lake), "-q"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    for c in importers {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    ok(&["compact", "--lake", p(&lake), "-q"]);
    let fp = silt_fingerprint(&lake);
    let (rows, uids, _) = head3(&fp);
    assert_eq!(rows, uids, "{fp}");
    assert!(rows > 4 * 500, "{fp}");
    assert_eq!(delta_rows(&lake), rows);
    let log = silt_lake::delta::DeltaLog::open(&lake.join("zeek.conn"))
        .unwrap()
        .unwrap();
    assert_eq!(
        log.files().unwrap().len(),
        parquet_files(&lake.join("zeek.conn"))
    );
    if let Some(py) = &delta_py {
        assert_eq!(delta_scan_fingerprint(py, &lake), head3(&fp));
    }
}

#[test]
fn compaction_killed_at_every_step_loses_and_duplicates_nothing() {
    let py = python();
    let t = tempfile::tempdir().unwrap();
    let pristine = small_files_lake(t.path(), "hive");
    let expected = silt_fingerprint(&pristine);
    let (rows, uids, _) = head3(&expected);
    assert!(rows > 1000 && rows == uids, "{expected}");
    let files_before = parquet_files(&pristine);

    for (i, point) in [
        "compact-read",
        "compact-recorded",
        "compact-published",
        "compact-removing",
    ]
    .iter()
    .enumerate()
    {
        let lake = t.path().join(format!("crash{i}"));
        copy_dir(&pristine, &lake);
        let o = Command::new(env!("CARGO_BIN_EXE_silt"))
            .args(["compact", "--lake", p(&lake), "-q"])
            .env("SILT_FAILPOINT", point)
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "{point}: the failpoint was not reached"
        );
        // Right after the crash, silt sees every row exactly once.
        assert_eq!(
            silt_fingerprint(&lake),
            expected,
            "after a crash at {point}"
        );
        // The next maintenance command finishes or undoes the interrupted group, then compacts.
        ok(&["compact", "--lake", p(&lake), "-q"]);
        assert_eq!(
            silt_fingerprint(&lake),
            expected,
            "after recovery from {point}"
        );
        let files_after = parquet_files(&lake);
        assert!(
            files_after < files_before / 3,
            "{point}: {files_before} -> {files_after} files"
        );
        if let Some(py) = &py {
            assert_eq!(
                duckdb_fingerprint(py, &lake),
                head3(&expected),
                "DuckDB's glob after recovery from {point}"
            );
        }
        // Nothing is left behind that vacuum would still have to remove, except records in
        // their grace period.
        let v = ok(&["vacuum", "--lake", p(&lake), "--grace", "0s", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&v).unwrap();
        assert_eq!(v["temp_files"], 0, "{point}: {v}");
        assert_eq!(v["compactions_finished"], 0, "{point}: {v}");
    }
}

#[test]
fn compaction_killed_at_random_moments_loses_and_duplicates_nothing() {
    let py = python();
    let t = tempfile::tempdir().unwrap();
    let pristine = small_files_lake(t.path(), "hive");
    let expected = silt_fingerprint(&pristine);
    // A different moment each round, spread over a compaction's run time.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut killed = 0;
    for round in 0..8 {
        let lake = t.path().join(format!("kill{round}"));
        copy_dir(&pristine, &lake);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_millis(seed % 400);
        let mut child = spawn_compact(&lake);
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            killed += 1;
        }
        child.wait().unwrap();
        assert_eq!(silt_fingerprint(&lake), expected, "killed after {delay:?}");
        ok(&["compact", "--lake", p(&lake), "-q"]);
        assert_eq!(
            silt_fingerprint(&lake),
            expected,
            "recovered after {delay:?}"
        );
        if let Some(py) = &py {
            assert_eq!(duckdb_fingerprint(py, &lake), head3(&expected));
        }
    }
    assert!(killed > 0, "no round killed a running compaction");
}

#[test]
fn queries_while_another_process_compacts_see_every_row_once() {
    let t = tempfile::tempdir().unwrap();
    let pristine = small_files_lake(t.path(), "hive");
    let expected = silt_fingerprint(&pristine);
    let mut during = 0;
    for round in 0..3 {
        let lake = t.path().join(format!("race{round}"));
        copy_dir(&pristine, &lake);
        let mut child = spawn_compact(&lake);
        // Before the fix, a query that listed a partition before a group's output arrived and
        // found its inputs gone left the group's rows out, or failed on a removed file.
        while child.try_wait().unwrap().is_none() {
            assert_eq!(silt_fingerprint(&lake), expected, "round {round}");
            during += 1;
        }
        assert_eq!(silt_fingerprint(&lake), expected, "round {round}, after");
    }
    assert!(during > 0, "no query ran while a compaction did");
}

#[test]
fn retain_drops_old_partitions_and_vacuum_cleans_up() {
    let t = tempfile::tempdir().unwrap();
    let lake = small_files_lake(t.path(), "hive");
    // The generator's logs are from 2018: a 30-day window drops them all, per table windows
    // apply to their table only.
    let dry = ok(&[
        "retain",
        "--lake",
        p(&lake),
        "--table",
        "zeek.dns=30d",
        "--dry-run",
    ]);
    assert!(dry.contains("would drop zeek.dns/dt=2018-03-24"), "{dry}");
    assert!(!dry.contains("zeek.conn"), "{dry}");
    let out = ok(&["retain", "--lake", p(&lake), "--table", "zeek.dns=30d"]);
    assert!(out.contains("dropped 1 partition(s)"), "{out}");
    let n = ok(&[
        "query",
        "--lake",
        p(&lake),
        "--format",
        "csv",
        "SELECT count(*) AS n FROM zeek.conn",
    ]);
    assert_ne!(n.trim(), "n\n0");
    assert!(!lake.join("zeek.dns/dt=2018-03-24").exists());
    // The emptied table keeps its columns (a schema kept in _silt/tables/): zero rows, not
    // "table not found".
    let q = "SELECT count(*) AS n, count(query) AS q, max(dt) AS d FROM zeek.dns";
    let empty = ok(&["query", "--lake", p(&lake), "--format", "csv", q]);
    assert_eq!(empty.trim(), "n,q,d\n0,0,", "{empty}");
    assert!(lake.join("_silt/tables/zeek.dns.schema.arrow").exists());
    // A table the lake does not have is named, with the tables it has.
    let o = silt(&["query", "--lake", p(&lake), "SELECT * FROM zeek.nope"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("table zeek.nope is not in the lake"), "{err}");
    assert!(err.contains("zeek.conn, zeek.dns"), "{err}");
    // A table name quoted whole is one identifier: the error says how to write it.
    let o = silt(&["query", "--lake", p(&lake), "SELECT * FROM \"zeek.conn\""]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("the table is zeek.conn without quotes, or \"zeek\".\"conn\""),
        "{err}"
    );

    // A window long enough keeps everything.
    let out = ok(&["retain", "--lake", p(&lake), "--keep", "9000d"]);
    assert!(out.contains("dropped 0 partition(s)"), "{out}");

    // Bad windows are refused with what to write instead.
    let o = silt(&["retain", "--lake", p(&lake), "--table", "zeek.conn"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("TABLE=DURATION"));
    let o = silt(&["retain", "--lake", p(&lake)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--keep"));

    // Vacuum: a crashed writer's temporary file goes once past the grace period.
    let part = lake.join("zeek.conn/dt=2018-03-24/hour=17");
    let stale = part.join(".20180324-x.parquet.inprogress");
    std::fs::write(&stale, b"half a file").unwrap();
    let v = ok(&["vacuum", "--lake", p(&lake), "--json"]);
    assert!(v.contains("\"temp_files\": 0"), "{v}");
    assert!(stale.exists());
    let v = ok(&["vacuum", "--lake", p(&lake), "--grace", "0s", "--dry-run"]);
    assert!(v.contains("would remove 1 temporary file(s)"), "{v}");
    assert!(stale.exists());
    let v = ok(&["vacuum", "--lake", p(&lake), "--grace", "0s"]);
    assert!(v.contains("removed 1 temporary file(s)"), "{v}");
    assert!(!stale.exists());
}

/// A damaged data file (here: cut short) is named and skipped alike by `silt tables`, `silt
/// ddl` and `silt query`, which all go on with the readable files (tables and ddl failed
/// outright while query skipped it).
#[test]
fn a_damaged_file_is_named_and_skipped_by_tables_ddl_and_query() {
    let dir = tempfile::tempdir().unwrap();
    let lake = small_files_lake(dir.path(), "hive");
    let count = |lake: &Path| {
        let out = silt(&[
            "query",
            "--lake",
            p(lake),
            "--format",
            "csv",
            "SELECT count(*) AS n FROM zeek.conn",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let n: u64 = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        (n, String::from_utf8(out.stderr).unwrap())
    };
    let (all, _) = count(&lake);
    let mut files: Vec<PathBuf> = walk(&lake.join("zeek.conn"));
    files.retain(|f| f.extension().is_some_and(|e| e == "parquet"));
    files.sort();
    assert!(files.len() > 1, "{files:?}");
    let victim = &files[0];
    let victim_rows = parquet::file::reader::FileReader::metadata(
        &parquet::file::serialized_reader::SerializedFileReader::new(
            std::fs::File::open(victim).unwrap(),
        )
        .unwrap(),
    )
    .file_metadata()
    .num_rows() as u64;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(victim)
        .unwrap();
    f.set_len(1000).unwrap();
    drop(f);
    let name = victim.file_name().unwrap().to_string_lossy().to_string();

    let (n, stderr) = count(&lake);
    assert_eq!(n, all - victim_rows);
    assert!(stderr.contains(&name), "{stderr}");
    let out = silt(&["tables", "--lake", p(&lake), "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&name) && stderr.contains("not readable"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let conn = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "zeek.conn")
        .unwrap();
    assert_eq!(conn["rows"], n);
    assert_eq!(conn["damaged_files"].as_array().unwrap().len(), 1, "{conn}");
    let out = silt(&["ddl", "--dialect", "trino", "zeek.conn", "--lake", p(&lake)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&name), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("CREATE TABLE"));

    // A file whose footer reads but whose data pages are zeroed passes the footer checks; a
    // query that decodes it fails, and the error names it and says what to do.
    let zeroed = &files[1];
    let mut bytes = std::fs::read(zeroed).unwrap();
    let half = bytes.len() / 2;
    bytes[4..half].fill(0);
    std::fs::write(zeroed, &bytes).unwrap();
    let zname = zeroed.file_name().unwrap().to_string_lossy().to_string();
    let sql = "SELECT count(DISTINCT uid), min(ts), max(history) FROM zeek.conn";
    let out = silt(&["query", "--lake", p(&lake), sql]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{zname} is damaged: its footer reads, but its data does not"
        )) && stderr.contains("move it out of the lake"),
        "{stderr}"
    );
    let error = stderr.lines().find(|l| l.starts_with("error:")).unwrap();
    assert!(
        !error.contains(&name),
        "only the file that fails is named: {stderr}"
    );

    // Compaction leaves both damaged files in place, names them, merges the rest of their
    // partition, and exits 3.
    let dir = zeroed.parent().unwrap();
    let before = walk(dir).len();
    let out = silt(&["compact", "--lake", p(&lake), "--older-than", "0s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    for n in [&name, &zname] {
        assert!(
            stderr.contains(&format!("{n} left in place, damaged")),
            "{n}: {stderr}"
        );
    }
    assert!(zeroed.exists() && victim.exists());
    let after: Vec<PathBuf> = walk(dir)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "parquet"))
        .collect();
    assert!(
        after.len() < before && after.len() >= 2,
        "{before} -> {after:?}"
    );
}

/// Makes the checksum in the footer of the silt-written Parquet file `bytes` match its (damaged)
/// bytes again, in place (the value keeps its length, so the footer stays valid).
fn reseal(bytes: &mut [u8]) {
    use silt_lake::checksum::{KEY, PLACEHOLDER};
    // The key and its value as Thrift writes them: a field header (binary, next field), the
    // value's length, its bytes (`created_by` names the key too, without them).
    let mut key = KEY.as_bytes().to_vec();
    key.extend([0x18, PLACEHOLDER.len() as u8]);
    let at = bytes
        .windows(key.len())
        .rposition(|w| w == key)
        .expect("a footer checksum");
    let value = at + key.len()..at + key.len() + PLACEHOLDER.len();
    bytes[value.clone()].copy_from_slice(PLACEHOLDER.as_bytes());
    let sum = format!("{:08x}:{:016x}", crc32fast::hash(bytes), bytes.len());
    bytes[value].copy_from_slice(sum.as_bytes());
}

/// Every file under `d`.
fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Whether parquet-rs's reader panics on the file `bytes` (rather than returning an error);
/// `scratch` is where they are written to be read.
fn reader_panics(bytes: &[u8], scratch: &Path) -> bool {
    std::fs::write(scratch, bytes).unwrap();
    let file = std::fs::File::open(scratch).unwrap();
    std::panic::catch_unwind(move || {
        if let Ok(b) = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        {
            if let Ok(r) = b.build() {
                for batch in r {
                    if batch.is_err() {
                        break;
                    }
                }
            }
        }
    })
    .is_err()
}

/// A damaged page on which parquet-rs's reader panics (instead of returning an error) is a
/// damaged file like any other: the query names it and exits 1, compaction leaves it in place,
/// names it and exits 3; neither crashes.
#[test]
fn a_file_the_parquet_reader_panics_on_is_named_not_a_crash() {
    let t = tempfile::tempdir().unwrap();
    let lake = small_files_lake(t.path(), "hive");
    let mut files: Vec<PathBuf> = walk(&lake.join("zeek.conn"));
    files.retain(|f| f.extension().is_some_and(|e| e == "parquet"));
    files.sort();
    let victim = &files[0];
    let good = std::fs::read(victim).unwrap();
    // One flipped byte in the first column chunk that makes the reader panic.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let bad = (4..4096.min(good.len() / 2)).find_map(|i| {
        let mut b = good.clone();
        b[i] ^= 0xff;
        reader_panics(&b, &t.path().join("scratch.parquet")).then_some(b)
    });
    std::panic::set_hook(hook);
    let mut bad = bad.expect("no flipped byte made the reader panic: find another damage");
    // Its footer's checksum would name it before any page is decoded; made to match, the
    // damage reaches the decoder, as in a file written without one.
    reseal(&mut bad);
    std::fs::write(victim, &bad).unwrap();
    let name = victim.file_name().unwrap().to_string_lossy().to_string();

    let out = silt(&["query", "--lake", p(&lake), "SELECT * FROM zeek.conn"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("{name} is damaged")), "{stderr}");

    let out = silt(&["compact", "--lake", p(&lake), "--older-than", "0s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!("{name} left in place")),
        "{stderr}"
    );
    assert!(stderr.contains("panicked"), "{stderr}");
    assert!(victim.exists());
}

/// Feather files damaged in the three ways arrow-ipc does not survive: a footer schema type it
/// panics on, and two lengths it reserves memory for before reading (an allocation of terabytes
/// aborts the process): a record batch block longer than the file, and a compressed buffer's
/// uncompressed length. Each is a damaged file like any other: `silt tables`, `silt ddl` and
/// `silt query` name it and go on with the other files (the first two: the third's footer is
/// intact, and only `query` reads further), `silt inspect` says what is wrong with it,
/// compaction leaves it out; none crashes.
#[test]
fn feather_files_arrow_ipc_panics_or_aborts_on_are_named_not_a_crash() {
    let t = tempfile::tempdir().unwrap();
    let lake = generated_lake(
        t.path(),
        "lake",
        4,
        "1500",
        &["--partition", "hour", "--store", "feather"],
    );
    let count = |what: &str| -> (u64, String) {
        let out = silt(&[
            "query",
            "--lake",
            p(&lake),
            "--format",
            "csv",
            &format!("SELECT count(*) FROM zeek.conn {what}"),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        let n = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        (n, stderr)
    };
    let (all, _) = count("");
    let mut files: Vec<PathBuf> = walk(&lake.join("zeek.conn"));
    files.retain(|f| f.extension().is_some_and(|e| e == "feather"));
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    let rows = |f: &Path| -> u64 {
        let r = arrow::ipc::reader::FileReader::try_new(std::fs::File::open(f).unwrap(), None);
        r.unwrap().map(|b| b.unwrap().num_rows() as u64).sum()
    };
    let (panics, aborts, claims) = (&files[0], &files[1], &files[2]);
    let lost = rows(panics) + rows(aborts) + rows(claims);

    // A byte of the footer's schema that makes arrow-ipc panic when it opens the file.
    let good = std::fs::read(panics).unwrap();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let bad = (0..good.len()).rev().take(4096).find_map(|i| {
        let mut b = good.clone();
        b[i] ^= 0x4d;
        let opened = std::panic::catch_unwind(|| {
            arrow::ipc::reader::FileReader::try_new(std::io::Cursor::new(b.clone()), None).is_ok()
        });
        opened.is_err().then_some(b)
    });
    std::panic::set_hook(hook);
    std::fs::write(
        panics,
        bad.expect("no byte of the footer makes arrow-ipc panic"),
    )
    .unwrap();

    // The first record batch's block made 2^39 bytes longer. The footer's `Block` structs are
    // 24 bytes: offset (i64), metaDataLength (i32), 4 bytes of padding, bodyLength (i64).
    let mut bytes = std::fs::read(aborts).unwrap();
    let tail: [u8; 10] = bytes[bytes.len() - 10..].try_into().unwrap();
    let footer = bytes.len() - 10 - arrow::ipc::reader::read_footer_length(tail).unwrap();
    let blocks = arrow::ipc::root_as_footer(&bytes[footer..bytes.len() - 10])
        .unwrap()
        .recordBatches()
        .unwrap();
    let block = blocks.get(0);
    let mut raw = Vec::new();
    raw.extend_from_slice(&block.offset().to_le_bytes());
    raw.extend_from_slice(&block.metaDataLength().to_le_bytes());
    raw.extend_from_slice(&[0; 4]);
    raw.extend_from_slice(&block.bodyLength().to_le_bytes());
    let at = footer
        + bytes[footer..]
            .windows(24)
            .position(|w| w == raw)
            .expect("the first block in the footer");
    bytes[at + 16 + 4] ^= 0x80;
    std::fs::write(aborts, &bytes).unwrap();

    // The zstd-compressed buffers of the first record batch claiming 2^40 bytes uncompressed,
    // which arrow-ipc reserves before it decompresses (in DataFusion's scan as in silt's
    // readers): every column, so that any query reading a column of the file would abort.
    let mut bytes = std::fs::read(claims).unwrap();
    let tail: [u8; 10] = bytes[bytes.len() - 10..].try_into().unwrap();
    let footer = bytes.len() - 10 - arrow::ipc::reader::read_footer_length(tail).unwrap();
    let block = *arrow::ipc::root_as_footer(&bytes[footer..bytes.len() - 10])
        .unwrap()
        .recordBatches()
        .unwrap()
        .get(0);
    let (offset, meta) = (block.offset() as usize, block.metaDataLength() as usize);
    let message = arrow::ipc::root_as_message(&bytes[offset + 8..offset + meta]).unwrap();
    let batch = message.header_as_record_batch().unwrap();
    assert!(
        batch.compression().is_some(),
        "Feather files are compressed"
    );
    let compressed: Vec<usize> = batch
        .buffers()
        .unwrap()
        .iter()
        .filter(|b| b.length() >= 8)
        .map(|b| offset + meta + b.offset() as usize)
        .filter(|&a| i64::from_le_bytes(bytes[a..a + 8].try_into().unwrap()) > 0)
        .collect();
    assert!(compressed.len() > 5, "{compressed:?}");
    for at in compressed {
        bytes[at..at + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
    }
    std::fs::write(claims, &bytes).unwrap();

    let names: Vec<String> = [panics, aborts, claims]
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    for what in ["", "WHERE uid <> ''"] {
        let (n, stderr) = count(what);
        assert_eq!(n, all - lost, "{stderr}");
        for n in &names {
            assert!(stderr.contains("skipped") && stderr.contains(n), "{stderr}");
        }
        assert!(stderr.contains("damaged Arrow IPC footer"), "{stderr}");
        assert!(stderr.contains("damaged or forged length"), "{stderr}");
        assert!(!stderr.contains("panicked at"), "{stderr}");
    }
    // `tables` and `ddl` read footers only: the third file's is intact.
    let names = &names[..2];
    let out = silt(&["tables", "--lake", p(&lake)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for n in names {
        assert!(
            stderr.contains(n) && stderr.contains("not readable"),
            "{stderr}"
        );
    }
    // No engine reads Feather as a table, so ddl refuses the table, after naming the files.
    let out = silt(&["ddl", "--dialect", "trino", "zeek.conn", "--lake", p(&lake)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("re-import it with --store parquet"),
        "{stderr}"
    );
    for n in names {
        assert!(
            stderr.contains(n) && stderr.contains("not readable"),
            "{stderr}"
        );
    }
    for (f, what) in [
        (panics, "damaged Arrow IPC footer"),
        (aborts, "damaged Arrow IPC footer"),
        (claims, "damaged or forged length"),
    ] {
        let out = silt(&["inspect", p(f)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(what), "{stderr}");
        assert!(!stderr.contains("panicked at"), "{stderr}");
    }
    let out = silt(&["verify", "--lake", p(&lake)]);
    assert_eq!(out.status.code(), Some(3));
    let out = silt(&["compact", "--lake", p(&lake), "--older-than", "0s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked at"), "{stderr}");
    assert!(out.status.code().is_some(), "{stderr}");
    assert!(panics.exists() && aborts.exists() && claims.exists());
    assert_eq!(count("").0, all - lost);
}

/// Whether parquet-rs reads every row of the Parquet file `bytes` without an error; its rows
/// pretty-printed when it does.
fn decodes(bytes: &[u8]) -> Option<String> {
    let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::copy_from_slice(bytes),
    )
    .ok()?
    .build()
    .ok()?;
    let batches = r.collect::<Result<Vec<_>, _>>().ok()?;
    for b in &batches {
        for c in b.columns() {
            c.to_data().validate_full().ok()?;
        }
    }
    Some(
        arrow::util::pretty::pretty_format_batches(&batches)
            .ok()?
            .to_string(),
    )
}

/// Damage that still decodes (a flipped byte in an uncompressed page reads as another value,
/// with no error) is found by the checksum silt keeps in each file's footer: `silt verify` names
/// the file and exits 3, compaction leaves it in place; a file without a checksum (another tool's)
/// is decoded instead, and once the damaged file is moved out the lake verifies clean.
#[test]
fn damage_that_still_decodes_is_found_by_the_files_checksum() {
    let t = tempfile::tempdir().unwrap();
    let lake = generated_lake(
        t.path(),
        "lake",
        3,
        "800",
        &["--partition", "none", "--codec", "none"],
    );
    let mut files: Vec<PathBuf> = walk(&lake.join("zeek.conn"));
    files.retain(|f| f.extension().is_some_and(|e| e == "parquet"));
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    let out = silt(&["verify", "--lake", p(&lake)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("zeek.conn: 3 files") && stdout.contains("3 checksum ok, 0 decoded"),
        "{stdout}"
    );
    assert!(stdout.contains("all intact"), "{stdout}");

    // A flipped byte, from the middle on, after which every row still reads but not as written.
    let victim = &files[0];
    let good = std::fs::read(victim).unwrap();
    let rows = decodes(&good).expect("the file as written reads");
    let bad = (good.len() / 2..good.len() - 8)
        .find_map(|i| {
            let mut b = good.clone();
            b[i] ^= 0x01;
            decodes(&b).is_some_and(|r| r != rows).then_some(b)
        })
        .expect("no flipped byte decoded into other values");
    std::fs::write(victim, &bad).unwrap();
    let name = victim.file_name().unwrap().to_string_lossy().to_string();

    let out = silt(&["verify", "--lake", p(&lake)]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("{name} is damaged: checksum mismatch"))
            && stderr.contains("move it out of the lake"),
        "{stderr}"
    );
    assert!(
        stdout.contains("2 checksum ok, 0 decoded (no checksum), 1 damaged"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok_status(&["verify", "--lake", p(&lake), "--json"], 3)).unwrap();
    assert_eq!(v["failed"], 1, "{v}");
    let failed = v["failed_files"][0]["path"].as_str().unwrap();
    assert!(failed.ends_with(&name), "{v}");

    // Compaction leaves it in place, says why, and merges the two others.
    let out = silt(&["compact", "--lake", p(&lake)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!("{name} left in place, damaged (checksum mismatch")),
        "{stderr}"
    );
    assert!(victim.exists());

    // Moved out, the lake verifies clean; a file without a checksum (written here by parquet-rs
    // alone, as another tool would) is decoded instead, and damage in it is found that way.
    let moved = t.path().join(&name);
    std::fs::rename(victim, &moved).unwrap();
    let plain = victim.with_file_name("other-tool.parquet");
    let copied = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::from(good.clone()))
        .unwrap()
        .file_metadata()
        .key_value_metadata()
        .unwrap()
        .iter()
        .find(|k| k.key == silt_lake::checksum::KEY)
        .unwrap()
        .value
        .clone()
        .unwrap();
    let batches: Vec<_> = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(good),
    )
    .unwrap()
    .build()
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&plain).unwrap(),
        batches[0].schema(),
        None,
    )
    .unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    // As pyarrow does, the key-value metadata read from the silt file (its checksum included)
    // is written into the new one: a sum that is not this file's.
    w.append_key_value_metadata(parquet::file::metadata::KeyValue::new(
        silt_lake::checksum::KEY.into(),
        copied,
    ));
    w.close().unwrap();
    let out = silt(&["verify", "--lake", p(&lake)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("1 checksum ok, 1 decoded (no checksum), 0 damaged"),
        "{stdout}"
    );
    let out = silt(&[
        "verify",
        "--lake",
        p(&lake),
        "--decode",
        "--table",
        "zeek.conn",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let mut bytes = std::fs::read(&plain).unwrap();
    let half = bytes.len() / 2;
    bytes[4..half].fill(0);
    std::fs::write(&plain, &bytes).unwrap();
    let out = silt(&["verify", "--lake", p(&lake), "--table", "zeek.conn"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("other-tool.parquet is damaged: its data does not decode"),
        "{stderr}"
    );
    let out = silt(&["verify", "--lake", p(&lake), "--table", "zeek.nope"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no table zeek.nope"), "{stderr}");
}

/// `silt ARGS`' standard output; panics unless it exits with `code`.
fn ok_status(args: &[&str], code: i32) -> String {
    let out = silt(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
