//! The per-column section: for each schema goal 3 compares (the largest first; those with
//! [`GOAL_MIN_EVENTS`] events when any has), silt's, DuckDB's and pyarrow's bytes per event
//! column by column, silt's encodings, what a file made of the smallest choice per column
//! would weigh and, when the run has it, the order-0 estimate of the values next to them.
//!
//! Touches nothing: it only computes and renders.

use maud::{html, Markup};

use super::aggregate::Agg;
use super::goal::{GOAL_MIN_EVENTS, GOAL_RATIO};
use super::page::opt;
use crate::columns::{side_by_side, ColumnSize, SideBySide};
use crate::entropy::WRITER as ESTIMATE;

/// What the note under the per-column heading says about the estimate's column, when there is one.
const ESTIMATE_NOTE: &str = " The \"{writer}\" column is what the values themselves cost a coder that sees one column at a time in this order: the cheapest of a dictionary model (the entropy of the values' frequencies, plus the distinct values once, zstd level {level}), the values in order compressed (for columns with many distinct values), and the entropy of successive differences (integers and times), each with what nulls and list lengths cost. It is an estimate, not a bound (a writer can beat it on values that come in runs or repeat close together; the summary line names such columns), but on values that do not, no column-wise writer gets much below it; the summary line compares its total with the size the goal needs.";

/// The section (see the module doc); empty when no baseline wrote a schema's columns.
pub(super) fn section(aggs: &[Agg], columns: &[ColumnSize]) -> Markup {
    let has_estimate = columns.iter().any(|c| c.writer == ESTIMATE);
    let (schemas, any_large) = compared_schemas(aggs, columns);
    if schemas.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Where the bytes go, column by column (Parquet, zstd level 1)" }
        p.note {
            "Compressed bytes of each column's chunks per event, from the footers of the files compared above"
            @if any_large { " (schemas with at least " (GOAL_MIN_EVENTS) " events)" }
            ". \"best of\" adds, for every column and for the rest of the file, the smallest of the writers: what taking the best of what these writers did, column by column, on these rows in this order, would give. It is not a hard floor (an encoding none of them used can do better on a column), but columns whose figures agree across writers are at what their values cost (random ids, hashes)."
            @if has_estimate {
                (ESTIMATE_NOTE
                    .replace("{writer}", ESTIMATE)
                    .replace("{level}", &crate::entropy::ZSTD_LEVEL.to_string()))
            }
        }
        @for (i, (schema, events)) in schemas.iter().enumerate() {
            (schema_details(&Schema::new(schema, *events, columns), i == 0))
        }
    }
}

/// The schemas with columns of a baseline's file, with their events, the largest first; only
/// those with [`GOAL_MIN_EVENTS`] events when any has (the second value says whether).
fn compared_schemas<'a>(aggs: &[Agg], columns: &'a [ColumnSize]) -> (Vec<(&'a str, u64)>, bool) {
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
    (schemas, any_large)
}

/// One schema's columns: the writers' side by side, and the estimate's.
struct Schema<'a> {
    name: &'a str,
    events: u64,
    estimate: Vec<&'a ColumnSize>,
    est_total: Option<f64>,
    sbs: SideBySide,
    /// Each writer's total bytes per event (silt's first).
    totals: Vec<f64>,
}

impl<'a> Schema<'a> {
    fn new(name: &'a str, events: u64, columns: &'a [ColumnSize]) -> Self {
        let mine: Vec<&ColumnSize> = columns
            .iter()
            .filter(|c| c.schema == name && c.writer != ESTIMATE)
            .collect();
        let estimate: Vec<&ColumnSize> = columns
            .iter()
            .filter(|c| c.schema == name && c.writer == ESTIMATE)
            .collect();
        let est_total: Option<f64> =
            (!estimate.is_empty()).then(|| estimate.iter().map(|c| c.bytes_per_event).sum());
        let sbs = side_by_side(&mine);
        let totals: Vec<f64> = (0..sbs.writers.len())
            .map(|w| sbs.rows.iter().filter_map(|r| r.2[w]).sum())
            .collect();
        Self {
            name,
            events,
            estimate,
            est_total,
            sbs,
            totals,
        }
    }

    fn silt_total(&self) -> f64 {
        self.totals.first().copied().unwrap_or(0.0)
    }
}

/// The summary line: each writer's total, the best of them, the estimate, what the goal needs.
fn summary(s: &Schema) -> String {
    let mut summary = format!("{} ({} events): ", s.name, s.events);
    summary.push_str(
        &s.sbs
            .writers
            .iter()
            .zip(&s.totals)
            .map(|(w, t)| format!("{w} {t:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    summary.push_str(" B/event");
    if let Some(b) = s.sbs.best_of {
        summary.push_str(&format!("; best of: {b:.1}"));
        for (w, t) in s.sbs.writers.iter().zip(&s.totals).skip(1) {
            summary.push_str(&format!(" ({:.2}x {w}'s ratio)", t / b.max(1e-9)));
        }
    }
    if let Some(e) = s.est_total {
        summary.push_str(&format!("; {ESTIMATE}: {e:.1}"));
        let needs: Vec<String> = s
            .sbs
            .writers
            .iter()
            .zip(&s.totals)
            .skip(1)
            .map(|(w, t)| format!("{:.1} against {w}", t / GOAL_RATIO))
            .collect();
        if !needs.is_empty() {
            summary.push_str(&format!(
                " (the goal's {GOAL_RATIO}x needs at most {})",
                needs.join(" and ")
            ));
        }
        let below = below_estimate(s);
        if !below.is_empty() {
            summary.push_str(&format!("; a writer is below it on {}", below.join(", ")));
        }
    }
    summary
}

/// Columns some writer got below the estimate (by more than rounding).
fn below_estimate<'a>(s: &'a Schema) -> Vec<&'a str> {
    s.sbs
        .rows
        .iter()
        .filter(|(col, _, vals)| {
            let best = vals.iter().flatten().copied().fold(f64::MAX, f64::min);
            s.estimate
                .iter()
                .any(|e| &e.column == col && best < e.bytes_per_event - 0.005)
        })
        .map(|r| r.0.as_str())
        .collect()
}

/// The three largest columns of silt's file and how far apart the writers are on them.
fn largest(s: &Schema) -> Vec<String> {
    let silt_total = s.silt_total();
    let mut big: Vec<&(String, String, Vec<Option<f64>>)> = s
        .sbs
        .rows
        .iter()
        .filter(|r| r.0 != crate::columns::OVERHEAD && r.2.first().copied().flatten().is_some())
        .collect();
    big.sort_by(|a, b| {
        b.2[0]
            .partial_cmp(&a.2[0])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    big.iter()
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
        .collect()
}

/// One schema's collapsible table (the first one open).
fn schema_details(s: &Schema, open: bool) -> Markup {
    html! {
        details open[open] {
            summary { (summary(s)) }
            p { "Largest columns: " (largest(s).join("; ")) "." }
            table {
                tr {
                    th { "column" } th { "silt's encodings" }
                    @for w in &s.sbs.writers { th { (w) " B/event" } }
                    th { "smallest" }
                    @if s.est_total.is_some() { th { (ESTIMATE) " B/event (model)" } }
                }
                @for (col, enc, vals) in &s.sbs.rows { (column_row(s, col, enc, vals)) }
                tr {
                    th { "total" } th {}
                    @for t in &s.totals { th { (format!("{t:.2}")) } }
                    th { (s.sbs.best_of.map_or("–".into(), |b| format!("best of {b:.2}"))) }
                    @if let Some(e) = s.est_total { th { (format!("{e:.2}")) } }
                }
            }
        }
    }
}

/// One column's row: silt's encodings, each writer's bytes per event, the smallest writer and
/// the estimate (when the run has one).
fn column_row(s: &Schema, col: &String, enc: &str, vals: &[Option<f64>]) -> Markup {
    let smallest = vals
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| (i, v)))
        .min_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal))
        .map_or(String::new(), |(i, _)| s.sbs.writers[i].clone());
    let estimate = s.estimate.iter().find(|e| &e.column == col);
    html! {
        tr {
            td { (col) } td { (enc) }
            @for v in vals { td { (opt(*v, 2)) } }
            td { (smallest) }
            @if s.est_total.is_some() {
                @match estimate {
                    Some(e) => td { (format!("{:.2}", e.bytes_per_event)) " (" (e.encodings) ")" },
                    None => td { "–" },
                }
            }
        }
    }
}
