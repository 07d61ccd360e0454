//! The report: `index.html` (self-contained: every plot is an inline SVG, no external JS, CSS
//! or fonts) plus the same plots as `plots/*.svg`.
//!
//! Figures are medians: first over the repetitions of one schema × configuration, then (for the
//! summary tables) over schemas, as the study did.
//! - `aggregate`: the medians ([`Agg`], [`aggregate`]), the Pareto front, the small-schema note;
//! - `goal`: goal 3 in numbers ([`GoalSummary`]);
//! - `plots`: the plots, drawn with `plotters` (SVG backend, no font feature: text is written as
//!   SVG `<text>` with a generic `sans-serif` family, which any browser renders without extra
//!   fonts);
//! - `page`, `answer`, `column_section`: the page, as maud templates.
//!
//! The page is written with maud rather than askama: the report is mostly tables of numbers
//! computed in Rust, and maud's templates are Rust (loops, matches and closures over the
//! figures, checked by the compiler like the rest of the crate) with no separate template
//! files or template language, and escape text exactly as the hand-written `esc` before them did
//! (`&`, `<`, `>`, `"`; askama's HTML escaper also rewrites `'`, which the report's text is full
//! of). Inline SVG goes in as `PreEscaped`.
//!
//! Touches only `out/index.html` and `out/plots/`.

mod aggregate;
mod answer;
mod column_section;
mod goal;
mod page;
mod plots;

use std::path::{Path, PathBuf};

use crate::baselines::BaselineResult;
use crate::columns::ColumnSize;
use crate::results::Row;

pub use aggregate::{aggregate, pareto, small_schema_note, Agg, STUDY_MIN_EVENTS};
pub use goal::{goal_summary, GoalSummary, GOAL_MIN_EVENTS, GOAL_RATIO};
pub use plots::convex_hull;

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

/// Writes `index.html` and `plots/*.svg`; returns the page's path and its number of plots.
pub fn write(
    out: &Path,
    rows: &[Row],
    baselines: &[BaselineResult],
    columns: &[ColumnSize],
    ctx: &ReportContext,
) -> anyhow::Result<(PathBuf, usize)> {
    let aggs = aggregate(rows);
    let goal_rows = goal::goal_rows(rows, baselines, &aggs);
    let plots = plots::plots(&aggs, &goal_rows, ctx.reads)?;
    plots::write_files(out, &plots)?;
    let view = page::View::new(rows, baselines, columns, ctx, &aggs, &goal_rows, &plots);
    let path = out.join("index.html");
    std::fs::write(&path, page::page(&view).into_string())?;
    Ok((path, plots.len()))
}
