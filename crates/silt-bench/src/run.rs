//! The whole benchmark: for each table, prepare (sort once), write it once untimed (a warm-up, as
//! the baselines get), then for each configuration and repetition write a file, time it, run the
//! read path, and record a [`Row`]; the baselines of a
//! table run right after silt's Parquet zstd:1 writes of it (or after its last configuration
//! when that one is not in the matrix). Then `results.csv`, `baselines.csv`, `columns.csv` and
//! the report. Touches only `opts.out`.

use std::path::{Path, PathBuf};

use silt_lake::{Codec, StoreKind};

use crate::baselines::{self, BaselineResult};
use crate::collect::TableData;
use crate::columns::{self, ColumnSize};
use crate::entropy;
use crate::matrix::{store_name, BenchConfig, Variant};
use crate::measure::{prepare, write_file, Prepared};
use crate::readpath::{run_queries, ReadPlan};
use crate::report::{self, ReportContext};
use crate::results::{write_csv, Row};

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Report directory (created): `results.csv`, `index.html`, `plots/`, `files/`.
    pub out: PathBuf,
    pub configs: Vec<BenchConfig>,
    /// Notes for the report (configurations left out, caps, ...).
    pub notes: Vec<String>,
    pub repetitions: u32,
    /// Tables with fewer events are left out (as the study left out tiny schemas).
    pub min_events: u64,
    /// The cap per table that was applied while reading (for the report).
    pub max_events: u64,
    pub keep_files: bool,
    /// Run the read path (four queries per file).
    pub reads: bool,
    /// Also write Parquet+zstd:1 without bloom filters, unsorted, sorted by source address, without
    /// dictionaries, and with every typed column as text, to show what they buy.
    pub variants: bool,
    /// Run DuckDB/pyarrow baselines.
    pub baselines: bool,
    pub python: Option<PathBuf>,
    /// Rows per batch handed to the writer.
    pub batch_rows: usize,
    /// What was benchmarked, for the report (`3 inputs: ...`, `lake ./lake`).
    pub source: String,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            out: PathBuf::from("bench-report"),
            configs: Vec::new(),
            notes: Vec::new(),
            repetitions: 1,
            min_events: 0,
            max_events: 2_000_000,
            keep_files: false,
            reads: true,
            variants: true,
            baselines: false,
            python: None,
            batch_rows: 16 * 1024,
            source: String::new(),
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct BenchOutcome {
    pub rows: Vec<Row>,
    pub baselines: Vec<BaselineResult>,
    pub csv: PathBuf,
    pub report: PathBuf,
    /// Number of plots (SVG elements) in the report.
    pub plots: usize,
    /// Tables left out by `--min-events`, with their event counts.
    pub skipped: Vec<(String, u64)>,
    pub notes: Vec<String>,
}

/// Runs the benchmark over `tables`; `log` gets one line per step.
pub fn run(
    tables: Vec<TableData>,
    opts: &BenchOptions,
    log: &mut dyn FnMut(&str),
) -> anyhow::Result<BenchOutcome> {
    std::fs::create_dir_all(&opts.out)?;
    let files_dir = opts.out.join("files");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut notes = opts.notes.clone();
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut base: Vec<BaselineResult> = Vec::new();
    let mut columns: Vec<ColumnSize> = Vec::new();
    let python = if opts.baselines {
        match baselines::find_python(opts.python.as_deref()) {
            Ok(p) => Some(p),
            Err(e) => {
                let m = format!("baselines skipped: {e}");
                log(&m);
                notes.push(m);
                None
            }
        }
    } else {
        None
    };

    let mut configs = opts.configs.clone();
    if opts.variants {
        if let Some(base) = configs
            .iter()
            .find(|c| {
                c.store == StoreKind::Parquet
                    && c.codec.codec == Codec::Zstd
                    && c.codec.level == Some(1)
            })
            .cloned()
        {
            for v in [
                Variant::NoBloom,
                Variant::Unsorted,
                Variant::ByHost,
                Variant::NoDictionary,
                Variant::AsText,
            ] {
                configs.push(BenchConfig {
                    variant: v,
                    ..base.clone()
                });
            }
        }
    }

    for t in tables {
        let name = t.name.to_string();
        if t.events < opts.min_events.max(1) {
            log(&format!(
                "{name}: {} events < --min-events {}, left out",
                t.events, opts.min_events
            ));
            skipped.push((name, t.events));
            continue;
        }
        if t.capped() {
            notes.push(format!(
                "{name}: capped at {} of {} events (--max-events); input bytes scaled to the rows kept",
                t.events, t.events_seen
            ));
        }
        let p = prepare(&t, opts.batch_rows)?;
        let plan = ReadPlan::for_table(&p);
        let arrow_bytes = t.arrow_bytes();
        let input_bytes = t.input_bytes();
        // The by-host variant needs a source address column.
        let applies = |c: &BenchConfig| c.variant != Variant::ByHost || p.host_column().is_some();
        let applicable: Vec<&BenchConfig> = configs.iter().filter(|c| applies(c)).collect();
        log(&format!(
            "{name}: {} events, {} Arrow bytes, {} configurations × {} repetitions",
            t.events,
            arrow_bytes,
            applicable.len(),
            opts.repetitions
        ));
        // The baselines run right after silt's own zstd:1 writes, else after the last one.
        let baselines_after = applicable
            .iter()
            .position(|c| c.is_goal_config())
            .unwrap_or(applicable.len().saturating_sub(1));
        // With the baselines, what the values cost, next to the goal-3 files' columns; before
        // the warm-up, so that its allocations are not what the first timed write pays for.
        if opts.baselines && applicable.iter().any(|c| c.is_goal_config()) {
            let started = std::time::Instant::now();
            let est = entropy::column_sizes(&name, &p.sorted, t.events)?;
            log(&format!(
                "{name}: {} of the values {:.1} B/event ({:.1} s)",
                entropy::WRITER,
                est.iter().map(|c| c.bytes_per_event).sum::<f64>(),
                started.elapsed().as_secs_f64()
            ));
            columns.extend(est);
        }
        // One untimed write first, as the baselines get (bench/baselines.py): the first write of
        // a table in this process pays for faulting in fresh heap pages, which a user's
        // long-running import pays once (goal-alone runs, zstd:1 the only configuration: the
        // cold write of suricata.dns took 1.3x the CPU of the next two).
        if let Some(first) = applicable.first() {
            let warm = files_dir.join(&name).join("warm-up.tmp");
            if write_file(first, &p, &warm).is_ok() {
                log(&format!(
                    "{name}: warm-up write ({}, untimed)",
                    first.label()
                ));
            }
            let _ = std::fs::remove_file(&warm);
        }
        for (ci, c) in applicable.into_iter().enumerate() {
            for rep in 0..opts.repetitions.max(1) {
                let fname = format!(
                    "{}-r{rep}.{}",
                    c.label()
                        .replace(['+', ':', ' ', '[', ']'], "_")
                        .replace("__", "_"),
                    store_name(c.store)
                );
                let path = files_dir.join(&name).join(fname);
                let w = match write_file(c, &p, &path) {
                    Ok(w) => w,
                    // A variant that cannot be written for this table is a note, not the end of
                    // the run; silt's own configurations must work.
                    Err(e) if c.variant != Variant::Default => {
                        let m = format!("{name}: {} not written: {e:#}", c.label());
                        log(&m);
                        notes.push(m);
                        let _ = std::fs::remove_file(&path);
                        break;
                    }
                    Err(e) => return Err(e),
                };
                let mut row = Row {
                    schema: name.clone(),
                    store: store_name(c.store).into(),
                    codec: c.codec.codec_name().into(),
                    level: c.codec.level,
                    row_group_size: if c.store == StoreKind::Parquet {
                        c.row_group_bytes as u64
                    } else {
                        0
                    },
                    variant: c.variant.name().into(),
                    config: c.label(),
                    repetition: rep,
                    events: t.events,
                    events_seen: t.events_seen,
                    capped: t.capped(),
                    batches: w.batches as u64,
                    arrow_bytes,
                    input_bytes,
                    output_bytes: w.output_bytes,
                    write_cpu_s: w.cpu_s,
                    write_wall_s: w.wall_s,
                    file: path.display().to_string(),
                    ..Default::default()
                };
                row.derive();
                if c.is_goal_config() && rep == 0 {
                    columns.extend(columns::of_file(&name, "silt", &path)?);
                }
                // The queries are typed (a time window, typed needles): a text file cannot answer them
                // the same way, so the as-text variant has no read figures.
                if opts.reads && c.variant != Variant::AsText {
                    for r in run_queries(&rt, &plan, c.store, &path)? {
                        match r.query {
                            "scan" => {
                                row.read_scan_s = Some(r.wall_s);
                                row.read_scan_bytes = Some(r.bytes_read);
                                row.read_scan_value = Some(r.value);
                            }
                            "filter" => {
                                row.read_filter_s = Some(r.wall_s);
                                row.read_filter_bytes = Some(r.bytes_read);
                                row.read_filter_value = Some(r.value);
                            }
                            "topn" => {
                                row.read_topn_s = Some(r.wall_s);
                                row.read_topn_bytes = Some(r.bytes_read);
                                row.read_topn_value = Some(r.value);
                                row.read_topn_column = plan.group_column.clone();
                            }
                            "needle" => {
                                row.read_needle_s = Some(r.wall_s);
                                row.read_needle_bytes = Some(r.bytes_read);
                                row.read_needle_value = Some(r.value);
                                row.read_needle_column = plan.needle.as_ref().map(|n| n.0.clone());
                            }
                            _ => {}
                        }
                    }
                }
                if !opts.keep_files {
                    std::fs::remove_file(&path)?;
                }
                log(&format!(
                    "  {} r{rep}: {:.1} B/event, {:.0} ns/event",
                    c.label(),
                    row.bytes_per_event,
                    row.ns_per_event
                ));
                rows.push(row);
            }
            if let (Some(py), true) = (&python, ci == baselines_after) {
                run_baselines(
                    py,
                    opts,
                    &name,
                    &p,
                    &mut base,
                    &mut columns,
                    &mut notes,
                    log,
                )?;
            }
        }
    }
    if !opts.keep_files {
        let _ = std::fs::remove_dir_all(&files_dir);
    }

    let csv = opts.out.join("results.csv");
    write_csv(&csv, &rows)?;
    if !base.is_empty() {
        let mut w = csv::Writer::from_path(opts.out.join("baselines.csv"))?;
        for b in &base {
            w.serialize(b)?;
        }
        w.flush()?;
    }
    let columns_csv = opts.out.join("columns.csv");
    if columns.is_empty() {
        let _ = std::fs::remove_file(&columns_csv);
    } else {
        let mut w = csv::Writer::from_path(&columns_csv)?;
        for c in &columns {
            w.serialize(c)?;
        }
        w.flush()?;
    }
    let ctx = ReportContext {
        source: opts.source.clone(),
        notes: notes.clone(),
        skipped: skipped.clone(),
        max_events: opts.max_events,
        repetitions: opts.repetitions,
        reads: opts.reads,
    };
    let (report, plots) = report::write(&opts.out, &rows, &base, &columns, &ctx)?;
    Ok(BenchOutcome {
        rows,
        baselines: base,
        csv,
        report,
        plots,
        skipped,
        notes,
    })
}

/// DuckDB and pyarrow writing one table's rows (`bench/baselines.py`): exports them, runs the
/// script, adds its results and the files' column sizes, and removes the files unless
/// `--keep-files`. A failing script is a note, not the end of the run.
#[allow(clippy::too_many_arguments)]
fn run_baselines(
    py: &Path,
    opts: &BenchOptions,
    name: &str,
    p: &Prepared,
    base: &mut Vec<BaselineResult>,
    columns: &mut Vec<ColumnSize>,
    notes: &mut Vec<String>,
    log: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    let dir = opts.out.join("baselines");
    let ipc = dir.join(format!("{name}.arrow"));
    baselines::export_ipc(p, &ipc)?;
    let results = baselines::run(
        py,
        &dir,
        &[(name.to_string(), ipc.clone())],
        opts.repetitions,
    );
    if !opts.keep_files {
        let _ = std::fs::remove_file(&ipc);
    }
    let results = match results {
        Ok(b) => b,
        Err(e) => {
            let m = format!("{name}: baselines failed: {e:#}");
            log(&m);
            notes.push(m);
            return Ok(());
        }
    };
    for b in &results {
        match (&b.error, &b.file) {
            (Some(e), _) => log(&format!("  baseline {}: error: {e}", b.tool)),
            (None, Some(f)) => {
                log(&format!(
                    "  baseline {} {}: {:.1} B/event, {:.0} ns/event (median of {})",
                    b.tool,
                    b.version,
                    b.output_bytes as f64 / b.rows.max(1) as f64,
                    b.cpu_s * 1e9 / b.rows.max(1) as f64,
                    b.repetitions
                ));
                match columns::of_file(&b.schema, &b.tool, Path::new(f)) {
                    Ok(c) => columns.extend(c),
                    Err(e) => notes.push(format!(
                        "{} on {}: could not read its file's columns: {e:#}",
                        b.tool, b.schema
                    )),
                }
            }
            (None, None) => {}
        }
    }
    if !opts.keep_files {
        let _ = std::fs::remove_dir_all(dir.join(name));
    }
    base.extend(results);
    Ok(())
}
