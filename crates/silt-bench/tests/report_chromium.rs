//! Acceptance 4: renders a small report (tiny generated input, one repetition) and opens it in
//! headless Chromium: the page must load, hold as many plots (SVG elements) as the report says
//! it has (and at least the fixed set), and log no console errors. Skips with a message
//! without Chromium (installed by scripts/apt-deps.sh), fails in CI (silt-testkit).

use std::path::Path;
use std::process::Command;

use silt_bench::matrix::{self, CodecSpec};
use silt_bench::{BenchOptions, BoundedCollect};
use silt_lake::StoreKind;

fn chromium() -> Option<String> {
    silt_testkit::tool(
        &["chromium", "chromium-browser", "google-chrome"],
        "scripts/apt-deps.sh installs it",
    )
}

fn read_into(path: &Path, fmt: &silt_core::FormatSpec, c: &mut BoundedCollect) {
    silt_ingest::jobs::read_file(fmt, path, &Default::default(), c).unwrap();
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(chrome) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let zr = silt_gen::generate_zeek(
        &logs,
        2000,
        &silt_gen::GenOptions {
            logs: Some(vec!["conn".into(), "dns".into(), "http".into()]),
            ..Default::default()
        },
    )
    .unwrap();
    let mut c = BoundedCollect::new(100_000);
    for f in &zr.files {
        read_into(&f.path, &silt_readers::zeek::FORMAT, &mut c);
    }
    let codecs: Vec<CodecSpec> = ["none", "zstd:-5", "zstd:1"]
        .iter()
        .map(|s| CodecSpec::parse(s).unwrap())
        .collect();
    let (configs, _) = matrix::build(
        &[StoreKind::Parquet, StoreKind::Feather],
        &codecs,
        &[32 << 20],
    );
    let out = dir.path().join("report");
    let o = silt_bench::run(
        c.finish(true).unwrap().tables,
        &BenchOptions {
            out: out.clone(),
            configs,
            repetitions: 1,
            source: "generated test data".into(),
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    // bytes/event, parquet vs feather, write speed, size vs speed, 4 read-path plots.
    assert_eq!(o.plots, 8);

    let url = format!("file://{}", o.report.canonicalize().unwrap().display());
    let profile = dir.path().join("chrome-profile");
    let res = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=1",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&res.stdout);
    let log = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "chromium failed: {log}");
    assert!(
        dom.contains("silt bench: Parquet vs Feather"),
        "page did not load: {dom:.500}"
    );
    // Every table here has fewer than 10,000 events: the report says the medians include them.
    assert!(
        dom.contains("id=\"small-schemas\""),
        "no small-table note: {dom:.500}"
    );
    let svgs = dom.matches("<svg").count();
    let said: usize = dom
        .split("name=\"silt-plots\" content=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .expect("plot count in the page");
    assert_eq!(said, o.plots);
    assert_eq!(svgs, said, "plots in the DOM vs the report's count");
    // Every plot carries drawn content, not an empty canvas.
    assert!(dom.matches("<rect").count() >= said);
    // Console messages appear in Chromium's log as `CONSOLE(...)`; the page has no script, so
    // any such line is an error (a failed resource, a parse problem, ...).
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    assert!(!log.contains("Uncaught"), "{log}");
}
