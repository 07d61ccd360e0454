//! `silt bench` with bad input, end to end: rejected lines are counted, printed and kept in a
//! rejects file under `--out`; `--strict` stops before measuring with status 2; inputs that give
//! nothing to measure are an error, not an empty report; `--baselines` without a Python that has
//! duckdb and pyarrow stops at the start.

use std::path::Path;
use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_silt"))
        .arg("bench")
        .args(args)
        .args([
            "--stores",
            "parquet",
            "--codecs",
            "zstd:1",
            "--no-variants",
            "--no-reads",
        ])
        .output()
        .expect("run silt")
}

/// Three good EVE records and two bad lines.
fn write_eve(dir: &Path) -> String {
    let good = |i: u32| {
        format!(
            r#"{{"timestamp":"2024-03-24T17:00:0{i}.000000+0000","flow_id":{i},"event_type":"dns","src_ip":"10.0.0.1","src_port":5353,"dest_ip":"10.0.0.2","dest_port":53,"proto":"UDP","dns":{{"type":"query","id":{i},"rrname":"example.com","rrtype":"A"}}}}"#
        )
    };
    let text = format!(
        "{}\n{{\"timestamp\": broken\n{}\nnot json at all\n{}\n",
        good(1),
        good(2),
        good(3)
    );
    let p = dir.join("eve.json");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn rejects_files(out: &Path) -> Vec<std::path::PathBuf> {
    let root = out.join("_rejects");
    let mut v = Vec::new();
    for d in std::fs::read_dir(&root).into_iter().flatten() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            v.push(f.unwrap().path());
        }
    }
    v
}

#[test]
fn rejects_are_kept_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let eve = write_eve(dir.path());
    let out = dir.path().join("report");
    let o = bench(&[&eve, "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("2 rejects"), "{stderr}");
    assert!(stderr.contains("eve.json:2: "), "{stderr}");
    assert!(stderr.contains("eve.json:4: "), "{stderr}");
    let files = rejects_files(&out);
    assert_eq!(files.len(), 1, "{files:?}");
    let kept = std::fs::read_to_string(&files[0]).unwrap();
    let raws: Vec<String> = kept
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["raw"].to_string())
        .collect();
    assert_eq!(
        raws,
        ["\"{\\\"timestamp\\\": broken\"", "\"not json at all\""],
        "{kept}"
    );
    assert!(stderr.contains(&files[0].display().to_string()), "{stderr}");
    // The good records were measured, and the report says there were rejects.
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.lines().any(|l| l.contains("suricata.dns")), "{csv}");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("2 rejects"));
}

#[test]
fn strict_stops_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let eve = write_eve(dir.path());
    let out = dir.path().join("report");
    let o = bench(&[&eve, "--out", out.to_str().unwrap(), "--strict"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--strict is set: nothing was measured"),
        "{stderr}"
    );
    assert_eq!(rejects_files(&out).len(), 1);
    assert!(!out.join("results.csv").exists());
}

#[test]
fn nothing_to_measure_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = dir.path().join("report");
    let o = bench(&[empty.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    // The inputs are expanded first: an empty directory is an error of its own.
    assert!(stderr.contains("holds no files to read"), "{stderr}");
    assert!(!out.join("index.html").exists());
    // An input without events.
    let blank = dir.path().join("blank.json");
    std::fs::write(&blank, b"").unwrap();
    let o = bench(&[blank.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("nothing to measure"), "{stderr}");
    assert!(!out.join("index.html").exists());

    // A report path that is a file: said before anything is read, the file left alone.
    let o = bench(&[blank.to_str().unwrap(), "--out", blank.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is a file, and the report is a directory"),
        "{stderr}"
    );

    // Every table under --min-events: said with the counts.
    let eve = write_eve(dir.path());
    let o = bench(&[&eve, "--out", out.to_str().unwrap(), "--min-events", "10"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("every table has fewer than --min-events 10 events (suricata.dns 3)"),
        "{stderr}"
    );
}

/// `--baselines` that cannot run (no Python with duckdb and pyarrow) stops at the start with
/// what to do, instead of a long run whose report lacks them.
#[test]
fn baselines_without_python_stop_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let eve = write_eve(dir.path());
    let out = dir.path().join("report");
    let missing = dir.path().join("no-python");
    let o = bench(&[
        &eve,
        "--out",
        out.to_str().unwrap(),
        "--baselines",
        "--python",
        missing.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot import duckdb and pyarrow"),
        "{stderr}"
    );
    assert!(stderr.contains("scripts/pyenv.sh"), "{stderr}");
    assert!(!out.exists(), "nothing read or written before the check");
}
