//! `silt demo`, the README's first command: it generates sample telemetry, imports it into a
//! lake, lists the tables and runs the example queries. Run here small (5,000 events), twice in
//! the same directory (a second run must work too), with the lake then checked by a query of
//! its own.

mod common;

use common::p;

#[test]
fn demo_generates_imports_and_answers_every_example_query() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("demo");
    let mut last = String::new();
    for run in 0..2 {
        let out = common::silt(&["demo", "--dir", p(&work), "--events", "5000"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "run {run}: silt demo failed ({}): {stdout}{stderr}",
            out.status
        );
        for step in [
            "== 1. generating",
            "== 2. silt import",
            "== 3. silt tables",
            "== 4. example queries",
        ] {
            assert!(stdout.contains(step), "run {run}: no {step:?} in {stdout}");
        }
        assert!(
            stdout.contains(", 0 rejects,"),
            "run {run}: the generated telemetry has rejects: {stdout}"
        );
        // Every example query answered: each `$ silt query` is followed by its table and the
        // statistics block that ends a successful query.
        let queries = stdout.matches("\n$ silt query").count();
        assert!(
            queries >= 5,
            "run {run}: {queries} example queries: {stdout}"
        );
        assert_eq!(
            stdout.matches("\ntables:").count(),
            queries,
            "run {run}: a query did not answer: {stdout}"
        );
        assert!(!stdout.contains("error"), "run {run}: {stdout}");
        last = stdout.into_owned();
    }
    // The lake holds what step 1 generated, once (the second run did not add it again).
    let stdout = last;
    let conn = stdout
        .lines()
        .find(|l| l.contains("zeek/conn.log"))
        .and_then(|l| l.split_whitespace().rev().nth(1))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no conn.log count in {stdout}"));
    let lake = work.join("lake");
    let n = common::ok(&[
        "query",
        "--lake",
        p(&lake),
        "--format",
        "csv",
        "SELECT count(*) AS n FROM zeek.conn",
    ]);
    assert_eq!(n.trim(), format!("n\n{conn}"), "{stdout}");
}
