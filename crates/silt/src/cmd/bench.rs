//! `silt bench`: reads inputs the way `silt import` does (the same `silt_ingest` pipeline: format
//! registry and detection, options, `--parse-field`, progress bar) into bounded memory, or loads
//! the tables of a lake, and hands them to `silt_bench::run`.
//! Rejects are kept under `--out` (`_rejects/`), as import keeps them under the lake. Only
//! argument handling and printing here; the benchmark lives in the `silt-bench` crate.

use silt_bench::collect::Collected;
use silt_bench::matrix::{self, CodecSpec};
use silt_bench::{BenchOptions, BoundedCollect};
use silt_ingest::sink::InMemory;
use silt_ingest::FileSource;
use silt_lake::StoreKind;

use crate::cli::BenchArgs;
use crate::{opts, progress};

pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    // The report is a directory (created when missing): said before any input is read.
    anyhow::ensure!(
        !a.out.exists() || a.out.is_dir(),
        "--out {}: is a file, and the report is a directory (index.html and its files); give a \
         directory, a new one is created",
        a.out.display()
    );
    let stores: Vec<StoreKind> = a
        .stores
        .iter()
        .map(|s| s.parse().map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<_>>()?;
    let codecs: Vec<CodecSpec> = a
        .codecs
        .iter()
        .map(|c| CodecSpec::parse(c))
        .collect::<anyhow::Result<_>>()?;
    let (configs, mut notes) = matrix::build(&stores, &codecs, &a.row_group_size);
    anyhow::ensure!(!configs.is_empty(), "the matrix is empty: {notes:?}");
    for n in &notes {
        eprintln!("note: {n}");
    }

    // Asked-for baselines that cannot run are an error now, not a note after a long run.
    let python = if a.baselines {
        let py = silt_bench::baselines::find_python(a.python.as_deref()).map_err(|e| {
            anyhow::anyhow!(
                "--baselines: {e}. `bash scripts/pyenv.sh` makes a Python with both and prints \
                 its path (give it with --python); or leave out --baselines"
            )
        })?;
        Some(py)
    } else {
        None
    };
    // Rejects are kept under the report directory, as `silt import` keeps them under the lake.
    let mut c = BoundedCollect::new(a.max_events).keep_rejects(&a.out);
    let source = match &a.lake {
        Some(lake) => {
            anyhow::ensure!(
                a.inputs.is_empty(),
                "give either inputs or --lake, not both"
            );
            eprintln!("loading tables from {} ...", lake.display());
            silt_bench::collect::load_lake_into(lake, &mut c)?;
            format!("the tables of lake {}", lake.display())
        }
        None => {
            anyhow::ensure!(
                !a.inputs.is_empty(),
                "give input files/directories or --lake"
            );
            let name = a.format.clone();
            let choice = opts::format_choice(&name, false)?;
            let pipeline = opts::pipeline(
                choice,
                &a.log,
                &a.access,
                &a.pcap,
                &Default::default(),
                a.batch_rows,
            )?;
            let inputs = silt_ingest::expand(&a.inputs)?;
            eprintln!("reading {} input(s) ({name}) ...", inputs.len());
            let shown: Vec<String> = a.inputs.iter().map(|p| p.display().to_string()).collect();
            let source = format!("{} ({} files, {name})", shown.join(", "), inputs.len());
            // The same pipeline, progress bar and reject printing as `silt import`.
            let mut bar = progress::Bar::new(a.quiet);
            pipeline.run(FileSource::new(inputs), &mut InMemory(&mut c), &mut bar)?;
            source
        }
    };
    let (rejects, samples) = (c.rejects, c.sample_rejects.clone());
    let Collected {
        tables,
        rejects_file,
    } = c.finish(a.lake.is_none())?;
    let kept_in = rejects_file
        .as_ref()
        .map(|p| format!("; all are kept in {}", p.display()))
        .unwrap_or_default();
    if rejects > 0 {
        let m = format!(
            "{rejects} rejects (input lines or records the readers could not use, or lake files \
             that could not be read){kept_in}"
        );
        eprintln!("note: {m}");
        // The import pipeline printed the first rejects of inputs as they came; a lake's
        // (whole files, line 0) are printed here.
        if a.lake.is_some() {
            for r in &samples {
                eprintln!("  reject: {}: {}", r.source, r.reason);
            }
        }
        notes.push(m);
        if a.strict {
            eprintln!(
                "error: {rejects} rejects and --strict is set: nothing was measured{kept_in}"
            );
            return Ok(2);
        }
    }
    anyhow::ensure!(
        !tables.is_empty(),
        "nothing to measure: {source} gave no events{}",
        if rejects > 0 {
            format!("; {rejects} rejects{kept_in}")
        } else {
            " (empty inputs, or no files silt can read: see `silt import --help` for the formats)"
                .to_string()
        }
    );
    let floor = a.min_events.max(1);
    anyhow::ensure!(
        tables.iter().any(|t| t.events >= floor),
        "nothing to measure: every table has fewer than --min-events {} events ({}); lower \
         --min-events or give more input",
        a.min_events,
        tables
            .iter()
            .map(|t| format!("{} {}", t.name, t.events))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let opts = BenchOptions {
        out: a.out.clone(),
        configs,
        notes,
        repetitions: a.repetitions.max(1),
        min_events: a.min_events,
        max_events: a.max_events,
        keep_files: a.keep_files,
        reads: !a.no_reads,
        variants: !a.no_variants,
        baselines: a.baselines,
        python,
        batch_rows: a.batch_rows,
        source,
    };
    let quiet = a.quiet;
    let outcome = silt_bench::run(tables, &opts, &mut |m| {
        if !quiet {
            eprintln!("{m}");
        }
    })?;
    print_summary(&outcome);
    Ok(0)
}

fn print_summary(o: &silt_bench::BenchOutcome) {
    let aggs = silt_bench::report::aggregate(&o.rows);
    let mut cfgs: Vec<&str> = Vec::new();
    for a in &aggs {
        if !cfgs.contains(&a.config.as_str()) {
            cfgs.push(&a.config);
        }
    }
    println!(
        "{:<34} {:>10} {:>10} {:>10} {:>12}",
        "configuration", "B/event", "ratio/in", "ratio/arw", "CPU ns/ev"
    );
    for c in cfgs {
        let m = |f: &dyn Fn(&silt_bench::report::Agg) -> Option<f64>| {
            silt_bench::results::median(
                aggs.iter()
                    .filter(|a| a.config == c)
                    .filter_map(f)
                    .collect(),
            )
        };
        let s = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
        println!(
            "{:<34} {:>10} {:>10} {:>10} {:>12}",
            c,
            s(m(&|a| Some(a.bpe)), 1),
            s(m(&|a| a.ratio_in), 2),
            s(m(&|a| Some(a.ratio_arrow)), 2),
            s(m(&|a| Some(a.ns)), 0)
        );
    }
    for b in &o.baselines {
        match &b.error {
            Some(e) => println!("baseline {} {}: error: {e}", b.tool, b.schema),
            None => println!(
                "baseline {} {} on {}: {:.1} B/event, {:.0} CPU ns/event",
                b.tool,
                b.version,
                b.schema,
                b.output_bytes as f64 / b.rows.max(1) as f64,
                b.cpu_s * 1e9 / b.rows.max(1) as f64
            ),
        }
    }
    for g in silt_bench::report::goal_summary(&o.rows, &o.baselines) {
        println!("{g}");
    }
    for (s, e) in &o.skipped {
        println!("left out {s}: {e} events (below --min-events)");
    }
    if let Some(note) = silt_bench::report::small_schema_note(&aggs) {
        println!("note: {note}");
    }
    println!(
        "results: {}\nreport:  {} ({} plots)",
        o.csv.display(),
        o.report.display(),
        o.plots
    );
}
