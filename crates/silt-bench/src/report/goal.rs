//! Goal 3 in numbers: silt's Parquet zstd:1 against DuckDB's and pyarrow's on the same rows,
//! per schema ([`GoalRow`], for the report's table and plot) and per tool over schemas
//! ([`GoalSummary`], for the report and the command's summary).
//!
//! Touches nothing: it only computes.

use super::aggregate::{aggregate, Agg};
use crate::baselines::BaselineResult;
use crate::results::{median, Row};

/// One baseline's file of one schema, next to silt's of the same rows.
#[derive(Debug, Clone)]
pub(super) struct GoalRow {
    pub schema: String,
    /// `tool version`.
    pub tool: String,
    pub bytes_per_event: f64,
    pub ratio_in: Option<f64>,
    pub cpu_ns: f64,
    pub wall_ns: f64,
}

/// The baselines that wrote rows without an error, of the schemas silt wrote with
/// [`crate::matrix::GOAL_CONFIG`], in the baselines' order.
pub(super) fn goal_rows(rows: &[Row], baselines: &[BaselineResult], aggs: &[Agg]) -> Vec<GoalRow> {
    let mut out = Vec::new();
    for b in baselines.iter().filter(|b| b.error.is_none() && b.rows > 0) {
        if !aggs
            .iter()
            .any(|a| a.schema == b.schema && a.config == crate::matrix::GOAL_CONFIG)
        {
            continue;
        }
        let input = rows
            .iter()
            .find(|r| r.schema == b.schema)
            .and_then(|r| r.input_bytes);
        out.push(GoalRow {
            schema: b.schema.clone(),
            tool: format!("{} {}", b.tool, b.version),
            bytes_per_event: b.output_bytes as f64 / b.rows as f64,
            ratio_in: input.map(|i| i as f64 / b.output_bytes.max(1) as f64),
            cpu_ns: b.cpu_s * 1e9 / b.rows as f64,
            wall_ns: b.wall_s * 1e9 / b.rows as f64,
        });
    }
    out
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
