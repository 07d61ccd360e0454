//! The report: `index.html` (self-contained: every plot is an inline SVG, no external JS, CSS
//! or fonts) plus the same plots as `plots/*.svg`.
//!
//! Plots are drawn with `plotters` (SVG backend, no font feature: text is written as SVG
//! `<text>` with a generic `sans-serif` family, which any browser renders without extra
//! fonts). Figures are medians: first over the repetitions of one schema × configuration,
//! then (for the summary tables) over schemas, as the study did. Touches only `out/index.html`
//! and `out/plots/`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::baselines::BaselineResult;
use crate::columns::{side_by_side, ColumnSize};
use crate::results::{median, Row};

/// What the report says about the run besides the rows.
#[derive(Debug, Clone, Default)]
pub struct ReportContext {
    pub source: String,
    pub notes: Vec<String>,
    pub skipped: Vec<(String, u64)>,
    pub max_events: u64,
    pub repetitions: u32,
    pub reads: bool,
}

/// The study's headline figures (Tenzir, "Parquet & Feather: Writing Security Telemetry"):
/// (configuration as we name it, how the study names it, B/event, ratio vs original).
/// The issue gives the 90.8 / 2.6 row without naming its configuration; we read it as
/// Parquet without compression (the study's matrix was store × {none, zstd levels}), and the
/// report says so.
pub const STUDY: &[(&str, &str, f64, f64)] = &[
    ("parquet+zstd:1", "Parquet + Zstd level 1", 55.8, 4.2),
    ("feather+zstd:1", "Feather + Zstd level 1", 68.9, 3.4),
    (
        "parquet+none",
        "Parquet, uncompressed (our reading; the issue does not name this row)",
        90.8,
        2.6,
    ),
    ("feather+none", "Feather, uncompressed", 255.1, 0.9),
];

const QUERIES: [&str; 4] = ["scan", "filter", "topn", "needle"];

/// Medians of one schema × configuration over its repetitions.
#[derive(Debug, Clone)]
pub struct Agg {
    pub schema: String,
    pub config: String,
    pub store: String,
    pub codec: String,
    pub variant: String,
    pub events: u64,
    pub bpe: f64,
    pub ns: f64,
    pub wall_ns: f64,
    pub ratio_in: Option<f64>,
    pub ratio_arrow: f64,
    pub read_s: [Option<f64>; 4],
    pub read_bytes: [Option<f64>; 4],
}

/// Groups rows by schema × configuration (in first-seen order) and takes medians.
pub fn aggregate(rows: &[Row]) -> Vec<Agg> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        let k = (r.schema.clone(), r.config.clone());
        if !groups.contains_key(&k) {
            order.push(k.clone());
        }
        groups.entry(k).or_default().push(r);
    }
    let med = |g: &[&Row], f: &dyn Fn(&Row) -> Option<f64>| {
        median(g.iter().filter_map(|r| f(r)).collect())
    };
    order
        .into_iter()
        .map(|k| {
            let g = &groups[&k];
            let r0 = g[0];
            let rs = |i: usize| -> Option<f64> {
                med(g, &|r: &Row| match i {
                    0 => r.read_scan_s,
                    1 => r.read_filter_s,
                    2 => r.read_topn_s,
                    _ => r.read_needle_s,
                })
            };
            let rb = |i: usize| -> Option<f64> {
                med(g, &|r: &Row| {
                    match i {
                        0 => r.read_scan_bytes,
                        1 => r.read_filter_bytes,
                        2 => r.read_topn_bytes,
                        _ => r.read_needle_bytes,
                    }
                    .map(|b| b as f64)
                })
            };
            Agg {
                schema: k.0.clone(),
                config: k.1.clone(),
                store: r0.store.clone(),
                codec: match r0.level {
                    Some(l) => format!("{}:{l}", r0.codec),
                    None => r0.codec.clone(),
                },
                variant: r0.variant.clone(),
                events: r0.events,
                bpe: med(g, &|r| Some(r.bytes_per_event)).unwrap_or(0.0),
                ns: med(g, &|r| Some(r.ns_per_event)).unwrap_or(0.0),
                wall_ns: med(g, &|r| Some(r.wall_ns_per_event)).unwrap_or(0.0),
                ratio_in: med(g, &|r| r.ratio_vs_input),
                ratio_arrow: med(g, &|r| Some(r.ratio_vs_arrow)).unwrap_or(0.0),
                read_s: [rs(0), rs(1), rs(2), rs(3)],
                read_bytes: [rb(0), rb(1), rb(2), rb(3)],
            }
        })
        .collect()
}

/// Configurations in first-seen order.
fn configs(aggs: &[Agg]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in aggs {
        if !out.contains(&a.config) {
            out.push(a.config.clone());
        }
    }
    out
}

/// Median over schemas of one configuration's per-schema medians.
fn over_schemas(aggs: &[Agg], config: &str, f: &dyn Fn(&Agg) -> Option<f64>) -> Option<f64> {
    median(
        aggs.iter()
            .filter(|a| a.config == config)
            .filter_map(f)
            .collect(),
    )
}

/// The study's smaller cut: it left out schemas with fewer events than this (and, in a second
/// view, fewer than 100k). `--min-events` makes the same cut here; without it the medians
/// include small tables, and the report and the command's summary say so.
pub const STUDY_MIN_EVENTS: u64 = 10_000;

/// A plain-text note when some benchmarked schemas have fewer than [`STUDY_MIN_EVENTS`]
/// events: how many, and their median Parquet zstd:1 file size and event count (a file's
/// fixed cost — schema, footer, indexes — spread over few events pulls bytes per event up).
pub fn small_schema_note(aggs: &[Agg]) -> Option<String> {
    let mut events: BTreeMap<&str, u64> = BTreeMap::new();
    for a in aggs {
        events.insert(&a.schema, a.events);
    }
    let small = events.values().filter(|&&e| e < STUDY_MIN_EVENTS).count();
    if small == 0 {
        return None;
    }
    let mut s = format!(
        "{small} of {} schemas have fewer than {STUDY_MIN_EVENTS} events (the study left such schemas out; --min-events {STUDY_MIN_EVENTS} does the same here), and the medians over schemas include them.",
        events.len()
    );
    // The median file of the default Parquet configuration over the small schemas.
    let small_files: Vec<&Agg> = aggs
        .iter()
        .filter(|a| a.config == crate::matrix::GOAL_CONFIG && a.events < STUDY_MIN_EVENTS)
        .collect();
    let kib = median(
        small_files
            .iter()
            .map(|a| a.bpe * a.events as f64 / 1024.0)
            .collect(),
    );
    let ev = median(small_files.iter().map(|a| a.events as f64).collect());
    if let (Some(kib), Some(ev)) = (kib, ev) {
        let _ = write!(
            s,
            " A file's fixed cost (schema, footer, indexes) is spread over few events in them: their median parquet+zstd:1 file is {kib:.1} KiB for a median of {ev:.0} events.",
        );
    }
    Some(s)
}

type PlotResult = anyhow::Result<String>;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("plot: {e}")
}

fn positive_range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let mut lo = f64::MAX;
    let mut hi = f64::MIN;
    for v in vals.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.1, 10.0);
    }
    (lo / 1.5, hi * 1.5)
}

fn cat_label(cats: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 || i as usize >= cats.len() {
        return String::new();
    }
    cats[i as usize].clone()
}

/// Box plot (log scale) of `values[i]` for each category, with the points overlaid.
fn box_plot(title: &str, y_desc: &str, cats: &[String], values: &[Vec<f64>]) -> PlotResult {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (lo, hi) = positive_range(values.iter().flatten().copied());
        let n = cats.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(150)
            .y_label_area_size(80)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo..hi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| cat_label(cats, *x))
            .x_label_style(
                ("sans-serif", 12)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            )
            .y_desc(y_desc)
            .draw()
            .map_err(err)?;
        for (i, v) in values.iter().enumerate() {
            let mut v: Vec<f64> = v.iter().copied().filter(|x| *x > 0.0).collect();
            if v.is_empty() {
                continue;
            }
            v.sort_by(|a, b| a.total_cmp(b));
            let q = |p: f64| {
                let pos = p * (v.len() - 1) as f64;
                let (a, b) = (pos.floor() as usize, pos.ceil() as usize);
                v[a] + (v[b] - v[a]) * (pos - a as f64)
            };
            let x = i as f64;
            let color = Palette99::pick(i).mix(0.9);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x - 0.3, q(0.25)), (x + 0.3, q(0.75))],
                    color.mix(0.3).filled(),
                )))
                .map_err(err)?;
            chart
                .draw_series([
                    PathElement::new(
                        vec![(x - 0.3, q(0.5)), (x + 0.3, q(0.5))],
                        BLACK.stroke_width(2),
                    ),
                    PathElement::new(vec![(x, v[0]), (x, q(0.25))], BLACK.stroke_width(1)),
                    PathElement::new(
                        vec![(x, q(0.75)), (x, v[v.len() - 1])],
                        BLACK.stroke_width(1),
                    ),
                    PathElement::new(
                        vec![
                            (x - 0.3, q(0.25)),
                            (x + 0.3, q(0.25)),
                            (x + 0.3, q(0.75)),
                            (x - 0.3, q(0.75)),
                            (x - 0.3, q(0.25)),
                        ],
                        color.stroke_width(1),
                    ),
                ])
                .map_err(err)?;
            chart
                .draw_series(v.iter().map(|&y| Circle::new((x, y), 3, color.filled())))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Parquet vs Feather per schema (log-log scatter, one colour per codec, identity line).
fn parquet_vs_feather(aggs: &[Agg]) -> PlotResult {
    let mut pairs: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for p in aggs
        .iter()
        .filter(|a| a.store == "parquet" && a.variant == "default")
    {
        if let Some(f) = aggs.iter().find(|f| {
            f.store == "feather"
                && f.schema == p.schema
                && f.codec == p.codec
                && f.variant == "default"
        }) {
            let v = pairs.entry(p.codec.clone()).or_default();
            // one point per schema and codec (the first row-group size)
            if !v.iter().any(|&(x, _)| x == f.bpe) {
                v.push((f.bpe, p.bpe));
            }
        }
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (700, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (lo, hi) = positive_range(pairs.values().flatten().flat_map(|&(a, b)| [a, b]));
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Parquet vs Feather, bytes/event per schema",
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("Feather B/event")
            .y_desc("Parquet B/event")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(lo, lo), (hi, hi)],
                BLACK.mix(0.5).stroke_width(1),
            )))
            .map_err(err)?
            .label("identity (equal size)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
        for (i, (codec, pts)) in pairs.iter().enumerate() {
            let color = Palette99::pick(i).mix(0.9);
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 5, color.filled())))
                .map_err(err)?
                .label(codec.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Convex hull (monotone chain) of points; returns the closed polygon.
pub fn convex_hull(mut p: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    p.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    p.dedup();
    if p.len() < 3 {
        return p;
    }
    let cross = |o: (f64, f64), a: (f64, f64), b: (f64, f64)| {
        (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
    };
    let mut lower: Vec<(f64, f64)> = Vec::new();
    for &q in &p {
        while lower.len() >= 2 && cross(lower[lower.len() - 2], lower[lower.len() - 1], q) <= 0.0 {
            lower.pop();
        }
        lower.push(q);
    }
    let mut upper: Vec<(f64, f64)> = Vec::new();
    for &q in p.iter().rev() {
        while upper.len() >= 2 && cross(upper[upper.len() - 2], upper[upper.len() - 1], q) <= 0.0 {
            upper.pop();
        }
        upper.push(q);
    }
    lower.pop();
    upper.pop();
    lower.extend(upper);
    lower
}

/// Size vs speed: one point per schema × configuration, each configuration's convex hull
/// (computed in log-log space, where the plot is drawn).
fn size_vs_speed(aggs: &[Agg]) -> PlotResult {
    let cfgs: Vec<String> = configs(aggs)
        .into_iter()
        .filter(|c| {
            aggs.iter()
                .any(|a| &a.config == c && a.variant == "default")
        })
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 650)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let pts: Vec<&Agg> = aggs.iter().filter(|a| a.variant == "default").collect();
        let (xlo, xhi) = positive_range(pts.iter().map(|a| a.ns));
        let (ylo, yhi) = positive_range(pts.iter().map(|a| a.bpe));
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Size vs write speed per schema, convex hull per configuration",
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("write CPU ns/event")
            .y_desc("B/event")
            .draw()
            .map_err(err)?;
        for (i, c) in cfgs.iter().enumerate() {
            let color = Palette99::pick(i).mix(0.9);
            let mine: Vec<(f64, f64)> = pts
                .iter()
                .filter(|a| &a.config == c && a.ns > 0.0 && a.bpe > 0.0)
                .map(|a| (a.ns, a.bpe))
                .collect();
            let hull: Vec<(f64, f64)> =
                convex_hull(mine.iter().map(|&(x, y)| (x.log10(), y.log10())).collect())
                    .into_iter()
                    .map(|(x, y)| (10f64.powf(x), 10f64.powf(y)))
                    .collect();
            if hull.len() >= 3 {
                chart
                    .draw_series(std::iter::once(Polygon::new(
                        hull.clone(),
                        color.mix(0.12).filled(),
                    )))
                    .map_err(err)?;
                let mut closed = hull.clone();
                closed.push(hull[0]);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        closed,
                        color.stroke_width(1),
                    )))
                    .map_err(err)?;
            } else if hull.len() == 2 {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        hull.clone(),
                        color.stroke_width(1),
                    )))
                    .map_err(err)?;
            }
            chart
                .draw_series(mine.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(err)?
                .label(c.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Bars: compression ratio vs the original for silt and each baseline, per schema.
fn baseline_bars(schemas: &[String], series: &[(String, Vec<Option<f64>>)]) -> PlotResult {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let hi = series
            .iter()
            .flat_map(|s| s.1.iter().flatten())
            .fold(1.0f64, |a, &b| a.max(b))
            * 1.15;
        let n = schemas.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Parquet zstd level 1: ratio vs original, silt vs DuckDB vs pyarrow",
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(130)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| cat_label(schemas, *x))
            .x_label_style(
                ("sans-serif", 12)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            )
            .y_desc("input bytes / output bytes")
            .draw()
            .map_err(err)?;
        let k = series.len().max(1) as f64;
        let w = 0.8 / k;
        for (j, (name, vals)) in series.iter().enumerate() {
            let color = Palette99::pick(j).mix(0.9);
            chart
                .draw_series(vals.iter().enumerate().filter_map(|(i, v)| {
                    v.map(|v| {
                        let x0 = i as f64 - 0.4 + j as f64 * w;
                        Rectangle::new([(x0, 0.0), (x0 + w * 0.9, v)], color.filled())
                    })
                }))
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `+1.2`, `-3.4`, and `0.0` for anything that rounds to zero (no `-0.0`).
fn signed(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == 0.0 {
        "0.0".into()
    } else {
        format!("{r:+.1}")
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.prec$}"))
}

fn human_bytes(b: f64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", U[i])
}

/// The answer in words (HTML): the Pareto front of median size and median write CPU time per
/// event over the schemas in `aggs`, and Parquet+zstd:1 against Feather+zstd:1 and uncompressed
/// Feather. `None` without measurements.
fn answer(aggs: &[Agg]) -> Option<String> {
    let front = pareto(aggs);
    if front.is_empty() {
        return None;
    }
    let mut s = String::from(
        "the Pareto front of median size and median write CPU time per event (over schemas) is: ",
    );
    let parts: Vec<String> = front
        .iter()
        .map(|(c, b, n)| format!("<b>{}</b> ({b:.1} B/event, {n:.0} ns/event)", esc(c)))
        .collect();
    s.push_str(&parts.join(", "));
    s.push_str(". ");
    let get = |c: &str| {
        Some((
            over_schemas(aggs, c, &|a| Some(a.bpe))?,
            over_schemas(aggs, c, &|a| Some(a.ns))?,
        ))
    };
    if let (Some((pb, pn)), Some((fb, fnn))) = (get("parquet+zstd:1"), get("feather+zstd:1")) {
        let _ = write!(
            s,
            "Parquet+zstd:1 is {:.0}% {} than Feather+zstd:1 and takes {:.2}× its write CPU time per event. ",
            ((pb / fb) - 1.0).abs() * 100.0,
            if pb <= fb { "smaller" } else { "larger" },
            pn / fnn.max(1e-9)
        );
        let on_front = front.iter().any(|f| f.0 == "parquet+zstd:1");
        let _ = write!(
            s,
            "Parquet+zstd:1 {} on the front.",
            if on_front { "is" } else { "is not" }
        );
        if let Some((fnb, fnn2)) = get("feather+none") {
            // Uncompressed Feather is usually the fastest to write; say so only when it was.
            let fastest = front.iter().all(|f| f.2 >= fnn2);
            let _ = write!(
                s,
                " Against uncompressed Feather ({}{fnb:.1} B/event, {fnn2:.0} ns/event) it is {:.1}× smaller for {:.1}× the CPU time.",
                if fastest { "the fastest to write, " } else { "" },
                fnb / pb.max(1e-9),
                pn / fnn2.max(1e-9)
            );
        }
    }
    Some(s)
}

/// The configurations on the Pareto front of (median B/event, median ns/event) over schemas,
/// default writer variant only; sorted by size.
pub fn pareto(aggs: &[Agg]) -> Vec<(String, f64, f64)> {
    let pts: Vec<(String, f64, f64)> = configs(aggs)
        .into_iter()
        .filter(|c| {
            aggs.iter()
                .any(|a| &a.config == c && a.variant == "default")
        })
        .filter_map(|c| {
            let b = over_schemas(aggs, &c, &|a| Some(a.bpe))?;
            let n = over_schemas(aggs, &c, &|a| Some(a.ns))?;
            Some((c, b, n))
        })
        .collect();
    let mut front: Vec<(String, f64, f64)> = pts
        .iter()
        .filter(|(_, b, n)| {
            !pts.iter()
                .any(|(_, b2, n2)| b2 <= b && n2 <= n && (b2 < b || n2 < n))
        })
        .cloned()
        .collect();
    front.sort_by(|a, b| a.1.total_cmp(&b.1));
    front
}

/// Writes `index.html` and `plots/*.svg`; returns the page's path and its number of plots.
pub fn write(
    out: &Path,
    rows: &[Row],
    baselines: &[BaselineResult],
    columns: &[ColumnSize],
    ctx: &ReportContext,
) -> anyhow::Result<(PathBuf, usize)> {
    let aggs = aggregate(rows);
    let cfgs = configs(&aggs);
    let default_cfgs: Vec<String> = cfgs
        .iter()
        .filter(|c| {
            aggs.iter()
                .any(|a| &a.config == *c && a.variant == "default")
        })
        .cloned()
        .collect();
    let schemas: Vec<String> = {
        let mut s: Vec<String> = aggs.iter().map(|a| a.schema.clone()).collect();
        s.sort();
        s.dedup();
        s
    };
    let per_cfg = |f: &dyn Fn(&Agg) -> Option<f64>, cs: &[String]| -> Vec<Vec<f64>> {
        cs.iter()
            .map(|c| {
                aggs.iter()
                    .filter(|a| &a.config == c)
                    .filter_map(f)
                    .collect()
            })
            .collect()
    };

    let mut plots: Vec<(&str, String, String)> = Vec::new(); // (file stem, title, svg)
    if !aggs.is_empty() {
        plots.push((
            "bytes_per_event",
            "Bytes per event per store and codec (one point per schema)".into(),
            box_plot(
                "Bytes/event per configuration (log scale)",
                "B/event",
                &default_cfgs,
                &per_cfg(&|a| Some(a.bpe), &default_cfgs),
            )?,
        ));
        plots.push((
            "parquet_vs_feather",
            "Parquet vs Feather per schema".into(),
            parquet_vs_feather(&aggs)?,
        ));
        plots.push((
            "write_speed",
            "Write time per event per store and codec (CPU, conversion only)".into(),
            box_plot(
                "Write CPU time per event (log scale)",
                "ns/event",
                &cfgs,
                &per_cfg(&|a| Some(a.ns), &cfgs),
            )?,
        ));
        plots.push((
            "size_vs_speed",
            "Size vs speed per schema with each configuration's convex hull".into(),
            size_vs_speed(&aggs)?,
        ));
        if ctx.reads {
            for (qi, q) in QUERIES.iter().enumerate() {
                let vals = per_cfg(&|a| a.read_s[qi].map(|s| s * 1e3), &cfgs);
                if vals.iter().all(Vec::is_empty) {
                    continue;
                }
                plots.push((
                    q,
                    format!("Read path: {q} (wall ms per file)"),
                    box_plot(
                        &format!("Read path: {q}, wall time (log scale)"),
                        "ms",
                        &cfgs,
                        &vals,
                    )?,
                ));
            }
        }
    }

    // Goal 3 figures.
    let silt_cfg = crate::matrix::GOAL_CONFIG;
    let mut goal_rows: Vec<(String, String, f64, Option<f64>, f64, f64)> = Vec::new(); // schema, tool, B/ev, ratio, ns/ev cpu, ns/ev wall
    for b in baselines.iter().filter(|b| b.error.is_none() && b.rows > 0) {
        let Some(a) = aggs
            .iter()
            .find(|a| a.schema == b.schema && a.config == silt_cfg)
        else {
            continue;
        };
        let input = rows
            .iter()
            .find(|r| r.schema == b.schema)
            .and_then(|r| r.input_bytes);
        goal_rows.push((
            b.schema.clone(),
            format!("{} {}", b.tool, b.version),
            b.output_bytes as f64 / b.rows as f64,
            input.map(|i| i as f64 / b.output_bytes.max(1) as f64),
            b.cpu_s * 1e9 / b.rows as f64,
            b.wall_s * 1e9 / b.rows as f64,
        ));
        let _ = a;
    }
    if !goal_rows.is_empty() {
        let tools: Vec<String> = {
            let mut t: Vec<String> = goal_rows.iter().map(|g| g.1.clone()).collect();
            t.sort();
            t.dedup();
            t
        };
        let gschemas: Vec<String> = {
            let mut s: Vec<String> = goal_rows.iter().map(|g| g.0.clone()).collect();
            s.sort();
            s.dedup();
            s
        };
        let mut series = vec![(
            "silt".to_string(),
            gschemas
                .iter()
                .map(|s| {
                    aggs.iter()
                        .find(|a| &a.schema == s && a.config == silt_cfg)
                        .and_then(|a| a.ratio_in)
                })
                .collect::<Vec<_>>(),
        )];
        for t in &tools {
            series.push((
                t.clone(),
                gschemas
                    .iter()
                    .map(|s| {
                        goal_rows
                            .iter()
                            .find(|g| &g.0 == s && &g.1 == t)
                            .and_then(|g| g.3)
                    })
                    .collect(),
            ));
        }
        plots.push((
            "baselines",
            "Goal 3: silt vs DuckDB vs pyarrow (Parquet, zstd level 1, same rows)".into(),
            baseline_bars(&gschemas, &series)?,
        ));
    }

    let plot_dir = out.join("plots");
    std::fs::create_dir_all(&plot_dir)?;
    for (stem, _, svg) in &plots {
        std::fs::write(plot_dir.join(format!("{stem}.svg")), svg)?;
    }

    // ---- HTML ----
    let mut h = String::new();
    let n_plots = plots.len();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"silt-plots\" content=\"{n_plots}\"><title>silt bench report</title>\
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #bbb;padding:3px 8px;text-align:right}}\
th{{background:#eee}}td:first-child,th:first-child{{text-align:left}}figure{{margin:1.5em 0}}\
figure svg{{max-width:100%;height:auto}}.note{{color:#555;font-size:90%}}</style></head><body>\n"
    );
    let _ = writeln!(h, "<h1>silt bench: Parquet vs Feather</h1>");
    let total_events: u64 = {
        let mut seen = BTreeMap::new();
        for a in &aggs {
            seen.insert(a.schema.clone(), a.events);
        }
        seen.values().sum()
    };
    let _ = writeln!(
        h,
        "<p>Data: {}. {} schemas, {} events benchmarked (at most {} per schema), {} configurations, {} repetition(s) each (median kept). This report has <span id=\"plot-count\">{n_plots}</span> plots.</p>",
        esc(&ctx.source),
        schemas.len(),
        total_events,
        ctx.max_events,
        cfgs.len(),
        ctx.repetitions
    );
    let _ = writeln!(
        h,
        "<p class=\"note\">Measured per schema × configuration: output bytes of one file written by silt's own writer (the code <code>silt import</code> uses; rows sorted by the time column once, before timing), write time as process CPU time and wall time for conversion only (Arrow in memory → file in the OS page cache, no fsync), Arrow in-memory bytes as the sum of <code>get_array_memory_size</code> (allocated capacity: readers' builders preallocate for a full batch, so tables with few rows show an inflated Arrow size and ratio vs Arrow), original bytes as the decompressed input lines that became the rows. Raw figures: <a href=\"results.csv\">results.csv</a>.</p>"
    );

    // Headline table.
    let _ = writeln!(h, "<h2>Headline: our medians next to the study's</h2>");
    // When some schemas are small and others not, two more columns give the medians over the
    // schemas the study would have kept.
    let large: Vec<Agg> = aggs
        .iter()
        .filter(|a| a.events >= STUDY_MIN_EVENTS)
        .cloned()
        .collect();
    let n_large = large
        .iter()
        .map(|a| a.schema.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let split = n_large > 0 && n_large < schemas.len();
    let _ = write!(h, "<table><tr><th>configuration</th><th>ours B/event</th><th>ours ratio vs original</th><th>ours ratio vs Arrow</th>");
    if split {
        let _ = write!(
            h,
            "<th>ours B/event, the {n_large} schema(s) with ≥ {STUDY_MIN_EVENTS} events</th><th>their ratio vs original</th>"
        );
    }
    let _ = writeln!(h, "<th>study B/event</th><th>study ratio</th></tr>");
    for (cfg, study_name, sb, sr) in STUDY {
        let b = over_schemas(&aggs, cfg, &|a| Some(a.bpe));
        let r = over_schemas(&aggs, cfg, &|a| a.ratio_in);
        let ra = over_schemas(&aggs, cfg, &|a| Some(a.ratio_arrow));
        let _ = write!(
            h,
            "<tr><td>{} <span class=\"note\">({})</span></td><td>{}</td><td>{}</td><td>{}</td>",
            esc(cfg),
            esc(study_name),
            opt(b, 1),
            opt(r, 2),
            opt(ra, 2)
        );
        if split {
            let _ = write!(
                h,
                "<td>{}</td><td>{}</td>",
                opt(over_schemas(&large, cfg, &|a| Some(a.bpe)), 1),
                opt(over_schemas(&large, cfg, &|a| a.ratio_in), 2)
            );
        }
        let _ = writeln!(h, "<td>{sb:.1}</td><td>{sr:.1}</td></tr>");
    }
    let _ = writeln!(h, "</table>");
    if let Some(note) = small_schema_note(&aggs) {
        let _ = writeln!(
            h,
            "<p id=\"small-schemas\"><b>Small tables.</b> {}</p>",
            esc(&note)
        );
    }
    let _ = writeln!(
        h,
        "<p><b>How the data differ.</b> The study wrote 42 schemas of Zeek and Suricata logs produced from one 3.77 GB PCAP (the M57 case study with injected attacks) through VAST's 2022 writer; its \"original\" is the logs as VAST ingested them. Here: {} schema(s) from {}, written by silt (arrow-rs/parquet-rs 59, dictionary chosen per column, delta-encoded timestamps, bloom filters on lookup columns, rows sorted by time), and \"original\" is the decompressed input lines that became each table's rows{}. Different log volumes per schema, different field sets (silt keeps Zeek's types: addresses as text, intervals as decimals, nested <code>id</code> structs) and a different writer all move these figures; compare the shape (which store and level wins by how much), not the absolute bytes.</p>",
        schemas.len(),
        esc(&ctx.source),
        if rows.iter().any(|r| r.input_bytes.is_none()) {
            " (not known for tables loaded from a lake: those ratios are left empty)"
        } else {
            ""
        }
    );

    // The answer in words (and again over the schemas the study would have kept).
    let _ = writeln!(h, "<h2>The answer</h2>");
    match answer(&aggs) {
        None => {
            let _ = writeln!(h, "<p>No measurements.</p>");
        }
        Some(s) => {
            let _ = writeln!(h, "<p>On this data {s}</p>");
            if split {
                if let Some(s) = answer(&large) {
                    let _ = writeln!(
                        h,
                        "<p>Over the {n_large} schema(s) with at least {STUDY_MIN_EVENTS} events only, {s}</p>"
                    );
                }
            }
        }
    }

    // Medians table.
    let _ = writeln!(h, "<h2>Medians over schemas</h2>");
    let _ = writeln!(h, "<table><tr><th>configuration</th><th>B/event</th><th>size % of original</th><th>ratio vs original</th><th>ratio vs Arrow</th><th>write CPU ns/event</th><th>write wall ns/event</th></tr>");
    for c in &cfgs {
        let b = over_schemas(&aggs, c, &|a| Some(a.bpe));
        let r = over_schemas(&aggs, c, &|a| a.ratio_in);
        let pct = over_schemas(&aggs, c, &|a| a.ratio_in.map(|r| 100.0 / r));
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(c),
            opt(b, 1),
            opt(pct, 1),
            opt(r, 2),
            opt(over_schemas(&aggs, c, &|a| Some(a.ratio_arrow)), 2),
            opt(over_schemas(&aggs, c, &|a| Some(a.ns)), 0),
            opt(over_schemas(&aggs, c, &|a| Some(a.wall_ns)), 0),
        );
    }
    let _ = writeln!(h, "</table>");

    // Per-schema table (parquet+zstd:1 and feather+zstd:1 if present).
    let _ = writeln!(h, "<h2>Per schema</h2><table><tr><th>schema</th><th>events</th><th>parquet+zstd:1 B/event</th><th>feather+zstd:1 B/event</th><th>feather+none B/event</th><th>parquet+zstd:1 ratio vs original</th></tr>");
    for s in &schemas {
        let f = |c: &str| aggs.iter().find(|a| &a.schema == s && a.config == c);
        let ev = aggs.iter().find(|a| &a.schema == s).map_or(0, |a| a.events);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{ev}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(s),
            opt(f("parquet+zstd:1").map(|a| a.bpe), 1),
            opt(f("feather+zstd:1").map(|a| a.bpe), 1),
            opt(f("feather+none").map(|a| a.bpe), 1),
            opt(f("parquet+zstd:1").and_then(|a| a.ratio_in), 2),
        );
    }
    let _ = writeln!(h, "</table>");

    // Read path table.
    if ctx.reads {
        let _ = writeln!(h, "<h2>Read path</h2><p class=\"note\">Per file, DataFusion: <i>scan</i> = <code>SELECT *</code> to the end; <i>filter</i> = count over 10% of the time range; <i>topn</i> = top 10 of a low-cardinality text column; <i>needle</i> = count of one existing <code>uid</code>/<code>community_id</code>/<code>flow_id</code>. Bytes read = byte ranges requested from the file (footer, indexes, bloom filters, data). Medians over schemas of per-file medians; warm OS cache.</p>");
        let _ = writeln!(h, "<table><tr><th>configuration</th>");
        for q in QUERIES {
            let _ = write!(h, "<th>{q} ms</th><th>{q} read</th>");
        }
        let _ = writeln!(h, "</tr>");
        for c in &cfgs {
            let _ = write!(h, "<tr><td>{}</td>", esc(c));
            for qi in 0..4 {
                let t = over_schemas(&aggs, c, &|a| a.read_s[qi].map(|s| s * 1e3));
                let b = over_schemas(&aggs, c, &|a| a.read_bytes[qi]);
                let _ = write!(
                    h,
                    "<td>{}</td><td>{}</td>",
                    opt(t, 1),
                    b.map_or("–".into(), human_bytes)
                );
            }
            let _ = writeln!(h, "</tr>");
        }
        let _ = writeln!(h, "</table>");
    }

    // Goal 3.
    if !goal_rows.is_empty() || baselines.iter().any(|b| b.error.is_some()) {
        let _ = writeln!(
            h,
            "<h2>Goal 3: silt's Parquet vs DuckDB and pyarrow (zstd level 1, same rows)</h2>"
        );
        let _ = writeln!(h, "<p class=\"note\">The rows silt wrote (sorted by time) were exported once as Arrow IPC; DuckDB and pyarrow loaded them untimed and wrote Parquet with zstd level 1 and their defaults otherwise, each once untimed (a warm-up, as silt's first configuration of each table was) and then as many times as silt (median kept), right after silt's own zstd:1 writes of the same table; CPU is process time (DuckDB's threads included). Goal: silt's ratio vs original ≥ 1.25× each baseline's, write time per event ≤ theirs, judged over the schemas with at least {GOAL_MIN_EVENTS} events (generated data), as the summary lines below say; the table lists every schema.</p>");
        let _ = writeln!(h, "<table><tr><th>schema</th><th>writer</th><th>B/event</th><th>ratio vs original</th><th>silt ratio / this</th><th>CPU ns/event</th><th>wall ns/event</th></tr>");
        let mut last = String::new();
        for g in &goal_rows {
            let a = aggs
                .iter()
                .find(|a| a.schema == g.0 && a.config == silt_cfg);
            if g.0 != last {
                if let Some(a) = a {
                    let _ = writeln!(
                        h,
                        "<tr><td>{}</td><td>silt</td><td>{:.1}</td><td>{}</td><td>1.00</td><td>{:.0}</td><td>{:.0}</td></tr>",
                        esc(&g.0), a.bpe, opt(a.ratio_in, 2), a.ns, a.wall_ns
                    );
                }
                last = g.0.clone();
            }
            let rel = a.and_then(|a| Some(a.ratio_in? / g.3?));
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td></tr>",
                esc(&g.0), esc(&g.1), g.2, opt(g.3, 2), opt(rel, 2), g.4, g.5
            );
        }
        let _ = writeln!(h, "</table>");
        for g in goal_summary(rows, baselines) {
            let _ = writeln!(h, "<p><b>{}</b></p>", esc(&g.to_string()));
        }
        for b in baselines.iter().filter(|b| b.error.is_some()) {
            let _ = writeln!(
                h,
                "<p class=\"note\">{} on {}: {}</p>",
                esc(&b.tool),
                esc(&b.schema),
                esc(b.error.as_deref().unwrap_or(""))
            );
        }
    }

    // Where the bytes go, column by column.
    column_section(&mut h, &aggs, columns);

    // What buys what (variants).
    let variants: Vec<&String> = cfgs.iter().filter(|c| c.contains('[')).collect();
    if !variants.is_empty() {
        let _ = writeln!(h, "<h2>What sorting, types, dictionaries and bloom filters buy (Parquet, zstd level 1)</h2><table><tr><th>schema</th><th>variant</th><th>B/event</th><th>Δ size vs default</th><th>CPU ns/event</th><th>needle ms</th><th>needle read</th><th>filter read</th></tr>");
        for s in &schemas {
            let Some(base) = aggs.iter().find(|a| &a.schema == s && a.config == silt_cfg) else {
                continue;
            };
            for a in aggs.iter().filter(|a| {
                &a.schema == s && (a.config == silt_cfg || variants.contains(&&a.config))
            }) {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{}%</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(s), esc(&a.variant), a.bpe, signed((a.bpe / base.bpe.max(1e-9) - 1.0) * 100.0), a.ns,
                    opt(a.read_s[3].map(|x| x * 1e3), 1),
                    a.read_bytes[3].map_or("–".into(), human_bytes),
                    a.read_bytes[1].map_or("–".into(), human_bytes),
                );
            }
        }
        let _ = writeln!(h, "</table><p class=\"note\">default = as <code>silt import</code> writes (sorted by time, bloom filters on lookup columns, dictionary per column by cardinality); no-bloom = without bloom filters; unsorted = rows in input order; by-host = rows sorted by source address, then time (tables with a source address only); no-dict = no dictionary encoding on any column outside lists; as-text = every typed column (times, numbers, decimals, booleans) written as its text, as the log carried it, in the same order and with the same writer (no read figures: the queries are typed).</p>");
        let mut said = Vec::new();
        for v in ["unsorted", "by-host", "as-text", "no-dict", "no-bloom"] {
            let deltas: Vec<f64> = schemas
                .iter()
                .filter_map(|s| {
                    let base = aggs
                        .iter()
                        .find(|a| &a.schema == s && a.config == silt_cfg)?;
                    let a = aggs.iter().find(|a| {
                        &a.schema == s && a.variant == v && variants.contains(&&a.config)
                    })?;
                    Some((a.bpe / base.bpe.max(1e-9) - 1.0) * 100.0)
                })
                .collect();
            if let Some(m) = median(deltas.clone()) {
                let what = match v {
                    "unsorted" => "without the sort by time",
                    "by-host" => "sorted by source address instead",
                    "as-text" => "with every typed column as text",
                    "no-dict" => "without dictionaries",
                    _ => "without bloom filters",
                };
                said.push(format!(
                    "{what} {} % (from {} to {} %)",
                    signed(m),
                    signed(deltas.iter().copied().fold(f64::MAX, f64::min)),
                    signed(deltas.iter().copied().fold(f64::MIN, f64::max))
                ));
            }
        }
        if !said.is_empty() {
            let _ = writeln!(
                h,
                "<p><b>What buys what, in words.</b> Against silt's default file, the median over schemas of the change in size is: {}. A positive figure is what silt's choice saves (a negative one for by-host: what sorting by host would save over sorting by time, which the time-window queries pay for); bloom filters cost bytes and buy needle lookups (the needle columns above).</p>",
                esc(&said.join("; "))
            );
        }
    }

    // Plots.
    let _ = writeln!(h, "<h2>Plots</h2>");
    for (stem, title, svg) in &plots {
        let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
        let _ = writeln!(
            h,
            "<figure id=\"plot-{stem}\">{body}<figcaption>{}</figcaption></figure>",
            esc(title)
        );
    }
    if !ctx.notes.is_empty() || !ctx.skipped.is_empty() {
        let _ = writeln!(h, "<h2>Notes</h2><ul>");
        for n in &ctx.notes {
            let _ = writeln!(h, "<li>{}</li>", esc(n));
        }
        for (s, e) in &ctx.skipped {
            let _ = writeln!(
                h,
                "<li>{} left out: {e} events (below --min-events)</li>",
                esc(s)
            );
        }
        let _ = writeln!(h, "</ul>");
    }
    let _ = writeln!(h, "</body></html>");
    let path = out.join("index.html");
    std::fs::write(&path, h)?;
    Ok((path, n_plots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hull_of_square_with_inner_point() {
        let h = convex_hull(vec![
            (0.0, 0.0),
            (1.0, 0.0),
            (1.0, 1.0),
            (0.0, 1.0),
            (0.5, 0.5),
        ]);
        assert_eq!(h.len(), 4);
        assert!(!h.contains(&(0.5, 0.5)));
    }

    fn agg(schema: &str, config: &str, events: u64, bpe: f64) -> Agg {
        Agg {
            schema: schema.into(),
            config: config.into(),
            store: "parquet".into(),
            codec: "zstd:1".into(),
            variant: "default".into(),
            events,
            bpe,
            ns: 1000.0,
            wall_ns: 1000.0,
            ratio_in: Some(4.0),
            ratio_arrow: 5.0,
            read_s: [None; 4],
            read_bytes: [None; 4],
        }
    }

    #[test]
    fn small_schemas_are_counted_and_their_median_file_named() {
        let aggs = vec![
            agg("zeek.conn", "parquet+zstd:1", 50_000, 40.0),
            agg("zeek.conn", "feather+zstd:1", 50_000, 60.0),
            agg("zeek.weird", "parquet+zstd:1", 4, 2048.0),
            agg("zeek.weird", "feather+zstd:1", 4, 900.0),
            agg("zeek.x509", "parquet+zstd:1", 9_999, 100.0),
        ];
        let note = small_schema_note(&aggs).expect("two small schemas");
        assert!(
            note.starts_with("2 of 3 schemas have fewer than 10000 events"),
            "{note}"
        );
        // Parquet zstd:1 files of the small schemas: 4 × 2048 B = 8 KiB and 9,999 × 100 B =
        // 976.5 KiB (median 492.2 KiB); the Feather file and the large schema do not count.
        assert!(
            note.contains("median parquet+zstd:1 file is 492.2 KiB for a median of 5002 events"),
            "{note}"
        );
        assert_eq!(small_schema_note(&aggs[..2]), None);
    }
}

/// Goal 3 in numbers, per baseline tool: silt's Parquet zstd:1 against it on the same rows.
#[derive(Debug, Clone)]
pub struct GoalSummary {
    pub tool: String,
    pub schemas: usize,
    /// Whether the schemas counted have at least [`GOAL_MIN_EVENTS`] events each (the goal's
    /// condition); when no schema has, all are counted and the goal is not judged.
    pub qualified: bool,
    /// Σ input / Σ output over the schemas both wrote, for silt and for the tool.
    pub silt_ratio: f64,
    pub tool_ratio: f64,
    /// Median over schemas of silt's ratio / the tool's ratio (goal ≥ 1.25).
    pub median_rel: f64,
    pub min_rel: f64,
    /// Σ CPU and wall seconds / Σ events, nanoseconds, silt and tool.
    pub silt_cpu_ns: f64,
    pub tool_cpu_ns: f64,
    pub silt_wall_ns: f64,
    pub tool_wall_ns: f64,
}

/// The goal's condition: generated data with at least this many events per schema.
pub const GOAL_MIN_EVENTS: u64 = 1_000_000;

/// The goal: silt's ratio vs original at least this many times each baseline's.
pub const GOAL_RATIO: f64 = 1.25;

/// Summarises goal 3 per tool over the schemas where input bytes are known, silt wrote zstd:1
/// and there are at least [`GOAL_MIN_EVENTS`] events (or over all such schemas, not judged, when
/// none is that large).
pub fn goal_summary(rows: &[Row], baselines: &[BaselineResult]) -> Vec<GoalSummary> {
    let aggs = aggregate(rows);
    let qualified = baselines.iter().any(|b| {
        b.error.is_none()
            && aggs
                .iter()
                .any(|a| a.schema == b.schema && a.events >= GOAL_MIN_EVENTS)
    });
    let min_events = if qualified { GOAL_MIN_EVENTS } else { 0 };
    let mut tools: Vec<String> = baselines
        .iter()
        .filter(|b| b.error.is_none())
        .map(|b| b.tool.clone())
        .collect();
    tools.sort();
    tools.dedup();
    let mut out = Vec::new();
    for t in tools {
        let (mut si, mut so, mut to) = (0f64, 0f64, 0f64);
        let (mut sc, mut tc, mut sw, mut tw, mut ev) = (0f64, 0f64, 0f64, 0f64, 0f64);
        let mut rel = Vec::new();
        for b in baselines
            .iter()
            .filter(|b| b.tool == t && b.error.is_none() && b.rows > 0)
        {
            let Some(a) = aggs.iter().find(|a| {
                a.schema == b.schema
                    && a.config == crate::matrix::GOAL_CONFIG
                    && a.events >= min_events
            }) else {
                continue;
            };
            let Some(input) = rows
                .iter()
                .find(|r| r.schema == b.schema)
                .and_then(|r| r.input_bytes)
            else {
                continue;
            };
            let n = a.events as f64;
            si += input as f64;
            so += a.bpe * n;
            to += b.output_bytes as f64;
            sc += a.ns * n;
            sw += a.wall_ns * n;
            tc += b.cpu_s * 1e9;
            tw += b.wall_s * 1e9;
            ev += n;
            rel.push((b.output_bytes as f64) / (a.bpe * n).max(1.0));
        }
        if rel.is_empty() {
            continue;
        }
        out.push(GoalSummary {
            tool: t,
            schemas: rel.len(),
            qualified,
            silt_ratio: si / so.max(1.0),
            tool_ratio: si / to.max(1.0),
            median_rel: median(rel.clone()).unwrap_or(0.0),
            min_rel: rel.iter().copied().fold(f64::MAX, f64::min),
            silt_cpu_ns: sc / ev,
            tool_cpu_ns: tc / ev,
            silt_wall_ns: sw / ev,
            tool_wall_ns: tw / ev,
        });
    }
    out
}

impl std::fmt::Display for GoalSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "silt vs {} on {} schemas{}: ratio vs original {:.2} vs {:.2} = {:.2}x overall (median per schema {:.2}x, min {:.2}x; goal >= 1.25x: {}); write time per event CPU {:.0} vs {:.0} ns, wall {:.0} vs {:.0} ns (goal <= theirs: {})",
            self.tool,
            self.schemas,
            if self.qualified {
                format!(" with >= {GOAL_MIN_EVENTS} events")
            } else {
                format!(" (none has the goal's {GOAL_MIN_EVENTS} events: not judged)")
            },
            self.silt_ratio,
            self.tool_ratio,
            self.silt_ratio / self.tool_ratio.max(1e-9),
            self.median_rel,
            self.min_rel,
            match (self.qualified, self.silt_ratio / self.tool_ratio.max(1e-9) >= GOAL_RATIO) {
                (false, _) => "not judged",
                (true, true) => "met",
                (true, false) => "missed",
            },
            self.silt_cpu_ns,
            self.tool_cpu_ns,
            self.silt_wall_ns,
            self.tool_wall_ns,
            match (self.qualified, self.silt_cpu_ns <= self.tool_cpu_ns) {
                (false, _) => "not judged",
                (true, true) => "met (CPU)",
                (true, false) => "missed (CPU)",
            },
        )
    }
}

/// What the note under the per-column heading says about the estimate's column, when there is one.
const ESTIMATE_NOTE: &str = " The \"{writer}\" column is what the values themselves cost a coder that sees one column at a time in this order: the cheapest of a dictionary model (the entropy of the values' frequencies, plus the distinct values once, zstd level {level}), the values in order compressed (for columns with many distinct values), and the entropy of successive differences (integers and times), each with what nulls and list lengths cost. It is an estimate, not a bound (a writer can beat it on values that come in runs or repeat close together; the summary line names such columns), but on values that do not, no column-wise writer gets much below it; the summary line compares its total with the size the goal needs.";

/// The per-column section: for each schema goal 3 compares (the largest first; those with
/// [`GOAL_MIN_EVENTS`] events when any has), silt's, DuckDB's and pyarrow's bytes per event
/// column by column, silt's encodings, what a file made of the smallest choice per column
/// would weigh and, when the run has it, the order-0 estimate of the values next to them.
fn column_section(h: &mut String, aggs: &[Agg], columns: &[ColumnSize]) {
    let has_estimate = columns.iter().any(|c| c.writer == crate::entropy::WRITER);
    let mut schemas: Vec<(&str, u64)> = Vec::new();
    for c in columns {
        if schemas.iter().any(|s| s.0 == c.schema) {
            continue;
        }
        let events = aggs
            .iter()
            .find(|a| a.schema == c.schema)
            .map_or(0, |a| a.events);
        schemas.push((&c.schema, events));
    }
    let any_large = schemas.iter().any(|s| s.1 >= GOAL_MIN_EVENTS);
    schemas.retain(|s| !any_large || s.1 >= GOAL_MIN_EVENTS);
    schemas.sort_by_key(|s| std::cmp::Reverse(s.1));
    // Only schemas that the baselines wrote too.
    schemas.retain(|s| {
        columns
            .iter()
            .any(|c| c.schema == s.0 && c.writer != "silt")
    });
    if schemas.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<h2>Where the bytes go, column by column (Parquet, zstd level 1)</h2>"
    );
    let _ = writeln!(h, "<p class=\"note\">Compressed bytes of each column's chunks per event, from the footers of the files compared above{}. \"best of\" adds, for every column and for the rest of the file, the smallest of the writers: what taking the best of what these writers did, column by column, on these rows in this order, would give. It is not a hard floor (an encoding none of them used can do better on a column), but columns whose figures agree across writers are at what their values cost (random ids, hashes).{}</p>", if any_large { format!(" (schemas with at least {GOAL_MIN_EVENTS} events)") } else { String::new() }, if has_estimate { ESTIMATE_NOTE.replace("{writer}", crate::entropy::WRITER).replace("{level}", &crate::entropy::ZSTD_LEVEL.to_string()) } else { String::new() });
    for (i, (schema, events)) in schemas.iter().enumerate() {
        let mine: Vec<&ColumnSize> = columns
            .iter()
            .filter(|c| c.schema == *schema && c.writer != crate::entropy::WRITER)
            .collect();
        let estimate: Vec<&ColumnSize> = columns
            .iter()
            .filter(|c| c.schema == *schema && c.writer == crate::entropy::WRITER)
            .collect();
        let est_total: Option<f64> =
            (!estimate.is_empty()).then(|| estimate.iter().map(|c| c.bytes_per_event).sum());
        let sbs = side_by_side(&mine);
        let totals: Vec<f64> = (0..sbs.writers.len())
            .map(|w| sbs.rows.iter().filter_map(|r| r.2[w]).sum())
            .collect();
        let silt_total = totals.first().copied().unwrap_or(0.0);
        let mut summary = format!("{schema} ({events} events): ");
        summary.push_str(
            &sbs.writers
                .iter()
                .zip(&totals)
                .map(|(w, t)| format!("{w} {t:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        summary.push_str(" B/event");
        if let Some(b) = sbs.best_of {
            summary.push_str(&format!("; best of: {b:.1}"));
            for (w, t) in sbs.writers.iter().zip(&totals).skip(1) {
                summary.push_str(&format!(" ({:.2}x {w}'s ratio)", t / b.max(1e-9)));
            }
        }
        if let Some(e) = est_total {
            summary.push_str(&format!("; {}: {e:.1}", crate::entropy::WRITER));
            let needs: Vec<String> = sbs
                .writers
                .iter()
                .zip(&totals)
                .skip(1)
                .map(|(w, t)| format!("{:.1} against {w}", t / GOAL_RATIO))
                .collect();
            if !needs.is_empty() {
                summary.push_str(&format!(
                    " (the goal's {GOAL_RATIO}x needs at most {})",
                    needs.join(" and ")
                ));
            }
            // Columns some writer got below the estimate (by more than rounding).
            let below: Vec<&str> = sbs
                .rows
                .iter()
                .filter(|(col, _, vals)| {
                    let best = vals.iter().flatten().copied().fold(f64::MAX, f64::min);
                    estimate
                        .iter()
                        .any(|e| &e.column == col && best < e.bytes_per_event - 0.005)
                })
                .map(|r| r.0.as_str())
                .collect();
            if !below.is_empty() {
                summary.push_str(&format!("; a writer is below it on {}", below.join(", ")));
            }
        }
        // The three largest columns of silt's file and how far apart the writers are on them.
        let mut big: Vec<&(String, String, Vec<Option<f64>>)> = sbs
            .rows
            .iter()
            .filter(|r| r.0 != crate::columns::OVERHEAD && r.2.first().copied().flatten().is_some())
            .collect();
        big.sort_by(|a, b| {
            b.2[0]
                .partial_cmp(&a.2[0])
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let top: Vec<String> = big
            .iter()
            .take(3)
            .map(|r| {
                let v: Vec<f64> = r.2.iter().copied().flatten().collect();
                let lo = v.iter().copied().fold(f64::MAX, f64::min);
                let hi = v.iter().copied().fold(f64::MIN, f64::max);
                format!(
                    "{} {:.1} ({:.0} % of silt's file; writers {:.1}–{:.1})",
                    r.0,
                    r.2[0].unwrap_or(0.0),
                    r.2[0].unwrap_or(0.0) / silt_total.max(1e-9) * 100.0,
                    lo,
                    hi
                )
            })
            .collect();
        let _ = writeln!(
            h,
            "<details{}><summary>{}</summary><p>Largest columns: {}.</p><table><tr><th>column</th><th>silt's encodings</th>{}<th>smallest</th>{}</tr>",
            if i == 0 { " open" } else { "" },
            esc(&summary),
            esc(&top.join("; ")),
            sbs.writers
                .iter()
                .map(|w| format!("<th>{} B/event</th>", esc(w)))
                .collect::<String>(),
            if est_total.is_some() {
                format!("<th>{} B/event (model)</th>", crate::entropy::WRITER)
            } else {
                String::new()
            }
        );
        for (col, enc, vals) in &sbs.rows {
            let smallest = vals
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| (i, v)))
                .min_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal))
                .map_or(String::new(), |(i, _)| sbs.writers[i].clone());
            let est_cell = match (est_total, estimate.iter().find(|e| &e.column == col)) {
                (None, _) => String::new(),
                (Some(_), Some(e)) => {
                    format!("<td>{:.2} ({})</td>", e.bytes_per_event, esc(&e.encodings))
                }
                (Some(_), None) => "<td>–</td>".into(),
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td>{}<td>{}</td>{est_cell}</tr>",
                esc(col),
                esc(enc),
                vals.iter()
                    .map(|v| format!("<td>{}</td>", opt(*v, 2)))
                    .collect::<String>(),
                esc(&smallest)
            );
        }
        let _ = writeln!(
            h,
            "<tr><th>total</th><th></th>{}<th>{}</th>{}</tr></table></details>",
            totals
                .iter()
                .map(|t| format!("<th>{t:.2}</th>"))
                .collect::<String>(),
            sbs.best_of
                .map_or("–".into(), |b| format!("best of {b:.2}")),
            est_total.map_or(String::new(), |e| format!("<th>{e:.2}</th>"))
        );
    }
}
