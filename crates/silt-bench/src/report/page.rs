//! The page, `index.html`, as maud templates: one function per section, each taking the
//! figures the [`View`] holds (see the parent module for why maud).
//!
//! Touches nothing: it only renders.

use std::collections::{BTreeMap, BTreeSet};

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::aggregate::{configs, over_schemas, schemas, small_schema_note, Agg, STUDY_MIN_EVENTS};
use super::goal::{goal_summary, GoalRow, GOAL_MIN_EVENTS};
use super::plots::Plot;
use super::{answer, column_section, ReportContext, QUERIES, STUDY};
use crate::baselines::BaselineResult;
use crate::columns::ColumnSize;
use crate::results::{median, Row};

/// The page's style sheet.
const CSS: &str = "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}\
th{background:#eee}td:first-child,th:first-child{text-align:left}figure{margin:1.5em 0}\
figure svg{max-width:100%;height:auto}.note{color:#555;font-size:90%}";

/// What the page shows: the run's inputs and the figures computed from them.
pub(super) struct View<'a> {
    pub rows: &'a [Row],
    pub baselines: &'a [BaselineResult],
    pub columns: &'a [ColumnSize],
    pub ctx: &'a ReportContext,
    pub aggs: &'a [Agg],
    pub goal_rows: &'a [GoalRow],
    pub plots: &'a [Plot],
    /// Configurations in first-seen order; schemas sorted.
    pub cfgs: Vec<String>,
    pub schemas: Vec<String>,
    /// The figures of the schemas with at least [`STUDY_MIN_EVENTS`] events, and how many
    /// schemas that is; `split` when some schemas are that large and others not.
    pub large: Vec<Agg>,
    pub n_large: usize,
    pub split: bool,
}

impl<'a> View<'a> {
    pub(super) fn new(
        rows: &'a [Row],
        baselines: &'a [BaselineResult],
        columns: &'a [ColumnSize],
        ctx: &'a ReportContext,
        aggs: &'a [Agg],
        goal_rows: &'a [GoalRow],
        plots: &'a [Plot],
    ) -> Self {
        let schemas = schemas(aggs);
        let large: Vec<Agg> = aggs
            .iter()
            .filter(|a| a.events >= STUDY_MIN_EVENTS)
            .cloned()
            .collect();
        let n_large = large
            .iter()
            .map(|a| a.schema.as_str())
            .collect::<BTreeSet<_>>()
            .len();
        let split = n_large > 0 && n_large < schemas.len();
        Self {
            rows,
            baselines,
            columns,
            ctx,
            aggs,
            goal_rows,
            plots,
            cfgs: configs(aggs),
            schemas,
            large,
            n_large,
            split,
        }
    }
}

/// The whole page.
pub(super) fn page(v: &View) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="silt-plots" content=(v.plots.len());
                title { "silt bench report" }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { "silt bench: Parquet vs Feather" }
                (intro(v))
                (headline(v))
                (how_the_data_differ(v))
                (the_answer(v))
                (medians(v))
                (per_schema(v))
                @if v.ctx.reads { (read_path(v)) }
                (goal3(v))
                (column_section::section(v.aggs, v.columns))
                (variants(v))
                (plots(v.plots))
                (notes(v.ctx))
            }
        }
    }
}

/// What was measured, and how.
fn intro(v: &View) -> Markup {
    let mut events = BTreeMap::new();
    for a in v.aggs {
        events.insert(a.schema.clone(), a.events);
    }
    let total_events: u64 = events.values().sum();
    html! {
        p {
            "Data: " (v.ctx.source) ". " (v.schemas.len()) " schemas, " (total_events)
            " events benchmarked (at most " (v.ctx.max_events) " per schema), " (v.cfgs.len())
            " configurations, " (v.ctx.repetitions)
            " repetition(s) each (median kept). This report has "
            span #plot-count { (v.plots.len()) } " plots."
        }
        p.note {
            "Measured per schema × configuration: output bytes of one file written by silt's own writer (the code "
            code { "silt import" }
            " uses; rows sorted by the time column once, before timing), write time as process CPU time and wall time for conversion only (Arrow in memory → file in the OS page cache, no fsync), Arrow in-memory bytes as the sum of "
            code { "get_array_memory_size" }
            " (allocated capacity: readers' builders preallocate for a full batch, so tables with few rows show an inflated Arrow size and ratio vs Arrow), original bytes as the decompressed input lines that became the rows. Raw figures: "
            a href="results.csv" { "results.csv" } "."
        }
    }
}

/// Our medians next to the study's headline figures (and, when some schemas are small and
/// others not, two more columns over the schemas the study would have kept).
fn headline(v: &View) -> Markup {
    let (aggs, large) = (v.aggs, v.large.as_slice());
    html! {
        h2 { "Headline: our medians next to the study's" }
        table {
            tr {
                th { "configuration" } th { "ours B/event" } th { "ours ratio vs original" }
                th { "ours ratio vs Arrow" }
                @if v.split {
                    th { "ours B/event, the " (v.n_large) " schema(s) with ≥ " (STUDY_MIN_EVENTS) " events" }
                    th { "their ratio vs original" }
                }
                th { "study B/event" } th { "study ratio" }
            }
            @for (cfg, study_name, sb, sr) in STUDY {
                tr {
                    td { (cfg) " " span.note { "(" (study_name) ")" } }
                    td { (opt(over_schemas(aggs, cfg, &|a| Some(a.bpe)), 1)) }
                    td { (opt(over_schemas(aggs, cfg, &|a| a.ratio_in), 2)) }
                    td { (opt(over_schemas(aggs, cfg, &|a| Some(a.ratio_arrow)), 2)) }
                    @if v.split {
                        td { (opt(over_schemas(large, cfg, &|a| Some(a.bpe)), 1)) }
                        td { (opt(over_schemas(large, cfg, &|a| a.ratio_in), 2)) }
                    }
                    td { (format!("{sb:.1}")) } td { (format!("{sr:.1}")) }
                }
            }
        }
        @if let Some(note) = small_schema_note(aggs) {
            p #small-schemas { b { "Small tables." } " " (note) }
        }
    }
}

/// How the study's data and writer differ from this run's.
fn how_the_data_differ(v: &View) -> Markup {
    let unknown_input = v.rows.iter().any(|r| r.input_bytes.is_none());
    html! {
        p {
            b { "How the data differ." }
            " The study wrote 42 schemas of Zeek and Suricata logs produced from one 3.77 GB PCAP (the M57 case study with injected attacks) through VAST's 2022 writer; its \"original\" is the logs as VAST ingested them. Here: "
            (v.schemas.len()) " schema(s) from " (v.ctx.source)
            ", written by silt (arrow-rs/parquet-rs 59, dictionary chosen per column, delta-encoded timestamps, bloom filters on lookup columns, rows sorted by time), and \"original\" is the decompressed input lines that became each table's rows"
            @if unknown_input {
                " (not known for tables loaded from a lake: those ratios are left empty)"
            }
            ". Different log volumes per schema, different field sets (silt keeps Zeek's types: addresses as text, intervals as decimals, nested "
            code { "id" }
            " structs) and a different writer all move these figures; compare the shape (which store and level wins by how much), not the absolute bytes."
        }
    }
}

/// The answer in words, and again over the schemas the study would have kept.
fn the_answer(v: &View) -> Markup {
    html! {
        h2 { "The answer" }
        @match answer::answer(v.aggs) {
            None => p { "No measurements." },
            Some(s) => {
                p { "On this data " (s) }
                @if v.split {
                    @if let Some(s) = answer::answer(&v.large) {
                        p {
                            "Over the " (v.n_large) " schema(s) with at least "
                            (STUDY_MIN_EVENTS) " events only, " (s)
                        }
                    }
                }
            }
        }
    }
}

/// One row per configuration: medians over schemas.
fn medians(v: &View) -> Markup {
    let aggs = v.aggs;
    html! {
        h2 { "Medians over schemas" }
        table {
            tr {
                th { "configuration" } th { "B/event" } th { "size % of original" }
                th { "ratio vs original" } th { "ratio vs Arrow" } th { "write CPU ns/event" }
                th { "write wall ns/event" }
            }
            @for c in &v.cfgs {
                tr {
                    td { (c) }
                    td { (opt(over_schemas(aggs, c, &|a| Some(a.bpe)), 1)) }
                    td { (opt(over_schemas(aggs, c, &|a| a.ratio_in.map(|r| 100.0 / r)), 1)) }
                    td { (opt(over_schemas(aggs, c, &|a| a.ratio_in), 2)) }
                    td { (opt(over_schemas(aggs, c, &|a| Some(a.ratio_arrow)), 2)) }
                    td { (opt(over_schemas(aggs, c, &|a| Some(a.ns)), 0)) }
                    td { (opt(over_schemas(aggs, c, &|a| Some(a.wall_ns)), 0)) }
                }
            }
        }
    }
}

/// One row per schema: Parquet and Feather with zstd:1, uncompressed Feather.
fn per_schema(v: &View) -> Markup {
    html! {
        h2 { "Per schema" }
        table {
            tr {
                th { "schema" } th { "events" } th { "parquet+zstd:1 B/event" }
                th { "feather+zstd:1 B/event" } th { "feather+none B/event" }
                th { "parquet+zstd:1 ratio vs original" }
            }
            @for s in &v.schemas {
                @let f = |c: &str| v.aggs.iter().find(|a| &a.schema == s && a.config == c);
                tr {
                    td { (s) }
                    td { (v.aggs.iter().find(|a| &a.schema == s).map_or(0, |a| a.events)) }
                    td { (opt(f("parquet+zstd:1").map(|a| a.bpe), 1)) }
                    td { (opt(f("feather+zstd:1").map(|a| a.bpe), 1)) }
                    td { (opt(f("feather+none").map(|a| a.bpe), 1)) }
                    td { (opt(f("parquet+zstd:1").and_then(|a| a.ratio_in), 2)) }
                }
            }
        }
    }
}

/// The four queries: medians over schemas of wall time and bytes read, per configuration.
fn read_path(v: &View) -> Markup {
    html! {
        h2 { "Read path" }
        p.note {
            "Per file, DataFusion: " i { "scan" } " = " code { "SELECT *" } " to the end; "
            i { "filter" } " = count over 10% of the time range; " i { "topn" }
            " = top 10 of a low-cardinality text column; " i { "needle" }
            " = count of one existing " code { "uid" } "/" code { "community_id" } "/"
            code { "flow_id" }
            ". Bytes read = byte ranges requested from the file (footer, indexes, bloom filters, data). Medians over schemas of per-file medians; warm OS cache."
        }
        table {
            tr {
                th { "configuration" }
                @for q in QUERIES { th { (q) " ms" } th { (q) " read" } }
            }
            @for c in &v.cfgs {
                tr {
                    td { (c) }
                    @for qi in 0..QUERIES.len() {
                        td { (opt(over_schemas(v.aggs, c, &|a| a.read_s[qi].map(|s| s * 1e3)), 1)) }
                        td { (bytes(over_schemas(v.aggs, c, &|a| a.read_bytes[qi]))) }
                    }
                }
            }
        }
    }
}

/// Goal 3: silt's Parquet next to DuckDB's and pyarrow's, per schema, the summary per tool and
/// the baselines that failed.
fn goal3(v: &View) -> Markup {
    let failed: Vec<&BaselineResult> = v.baselines.iter().filter(|b| b.error.is_some()).collect();
    if v.goal_rows.is_empty() && failed.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Goal 3: silt's Parquet vs DuckDB and pyarrow (zstd level 1, same rows)" }
        p.note {
            "The rows silt wrote (sorted by time) were exported once as Arrow IPC; DuckDB and pyarrow loaded them untimed and wrote Parquet with zstd level 1 and their defaults otherwise, each once untimed (a warm-up, as silt's first configuration of each table was) and then as many times as silt (median kept), right after silt's own zstd:1 writes of the same table; CPU is process time (DuckDB's threads included). Goal: silt's ratio vs original ≥ 1.25× each baseline's, write time per event ≤ theirs, judged over the schemas with at least "
            (GOAL_MIN_EVENTS)
            " events (generated data), as the summary lines below say; the table lists every schema."
        }
        (goal_table(v))
        @for g in goal_summary(v.rows, v.baselines) {
            p { b { (g.to_string()) } }
        }
        @for b in failed {
            p.note { (b.tool) " on " (b.schema) ": " (b.error.as_deref().unwrap_or("")) }
        }
    }
}

/// Goal 3's table: per schema, silt's row, then each baseline's.
fn goal_table(v: &View) -> Markup {
    let silt = |schema: &str| {
        v.aggs
            .iter()
            .find(|a| a.schema == schema && a.config == crate::matrix::GOAL_CONFIG)
    };
    html! {
        table {
            tr {
                th { "schema" } th { "writer" } th { "B/event" } th { "ratio vs original" }
                th { "silt ratio / this" } th { "CPU ns/event" } th { "wall ns/event" }
            }
            @for (i, g) in v.goal_rows.iter().enumerate() {
                @let a = silt(&g.schema);
                @if i == 0 || v.goal_rows[i - 1].schema != g.schema {
                    @if let Some(a) = a {
                        tr {
                            td { (g.schema) } td { "silt" } td { (format!("{:.1}", a.bpe)) }
                            td { (opt(a.ratio_in, 2)) } td { "1.00" }
                            td { (format!("{:.0}", a.ns)) } td { (format!("{:.0}", a.wall_ns)) }
                        }
                    }
                }
                tr {
                    td { (g.schema) } td { (g.tool) } td { (format!("{:.1}", g.bytes_per_event)) }
                    td { (opt(g.ratio_in, 2)) }
                    td { (opt(a.and_then(|a| Some(a.ratio_in? / g.ratio_in?)), 2)) }
                    td { (format!("{:.0}", g.cpu_ns)) } td { (format!("{:.0}", g.wall_ns)) }
                }
            }
        }
    }
}

/// The writer variants (configurations named `...[variant]`) against silt's default file.
fn variants(v: &View) -> Markup {
    let variants: Vec<&String> = v.cfgs.iter().filter(|c| c.contains('[')).collect();
    if variants.is_empty() {
        return html! {};
    }
    let silt_cfg = crate::matrix::GOAL_CONFIG;
    html! {
        h2 { "What sorting, types, dictionaries and bloom filters buy (Parquet, zstd level 1)" }
        table {
            tr {
                th { "schema" } th { "variant" } th { "B/event" } th { "Δ size vs default" }
                th { "CPU ns/event" } th { "needle ms" } th { "needle read" } th { "filter read" }
            }
            @for s in &v.schemas {
                @if let Some(base) = v.aggs.iter().find(|a| &a.schema == s && a.config == silt_cfg) {
                    @for a in v.aggs.iter().filter(|a| {
                        &a.schema == s && (a.config == silt_cfg || variants.contains(&&a.config))
                    }) {
                        tr {
                            td { (s) } td { (a.variant) } td { (format!("{:.1}", a.bpe)) }
                            td { (signed((a.bpe / base.bpe.max(1e-9) - 1.0) * 100.0)) "%" }
                            td { (format!("{:.0}", a.ns)) }
                            td { (opt(a.read_s[3].map(|x| x * 1e3), 1)) }
                            td { (bytes(a.read_bytes[3])) } td { (bytes(a.read_bytes[1])) }
                        }
                    }
                }
            }
        }
        p.note {
            "default = as " code { "silt import" }
            " writes (sorted by time, bloom filters on lookup columns, dictionary per column by cardinality); no-bloom = without bloom filters; unsorted = rows in input order; by-host = rows sorted by source address, then time (tables with a source address only); no-dict = no dictionary encoding on any column outside lists; as-text = every typed column (times, numbers, decimals, booleans) written as its text, as the log carried it, in the same order and with the same writer (no read figures: the queries are typed)."
        }
        @let said = variant_medians(v, &variants);
        @if !said.is_empty() {
            p {
                b { "What buys what, in words." }
                " Against silt's default file, the median over schemas of the change in size is: "
                (said.join("; "))
                ". A positive figure is what silt's choice saves (a negative one for by-host: what sorting by host would save over sorting by time, which the time-window queries pay for); bloom filters cost bytes and buy needle lookups (the needle columns above)."
            }
        }
    }
}

/// Per variant that has rows, the median (and range) over schemas of its change in size
/// against silt's default file, in words.
fn variant_medians(v: &View, variants: &[&String]) -> Vec<String> {
    let silt_cfg = crate::matrix::GOAL_CONFIG;
    let mut said = Vec::new();
    for var in ["unsorted", "by-host", "as-text", "no-dict", "no-bloom"] {
        let deltas: Vec<f64> = v
            .schemas
            .iter()
            .filter_map(|s| {
                let base = v
                    .aggs
                    .iter()
                    .find(|a| &a.schema == s && a.config == silt_cfg)?;
                let a = v.aggs.iter().find(|a| {
                    &a.schema == s && a.variant == var && variants.contains(&&a.config)
                })?;
                Some((a.bpe / base.bpe.max(1e-9) - 1.0) * 100.0)
            })
            .collect();
        if let Some(m) = median(deltas.clone()) {
            let what = match var {
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
    said
}

/// Every plot inline, as a figure with its caption.
fn plots(plots: &[Plot]) -> Markup {
    html! {
        h2 { "Plots" }
        @for p in plots {
            // The SVG element itself, without the XML declaration before it.
            @let body = p.svg.find("<svg").map_or(p.svg.as_str(), |i| &p.svg[i..]);
            figure id=(format!("plot-{}", p.stem)) {
                (PreEscaped(body))
                figcaption { (p.title) }
            }
        }
    }
}

/// The run's notes and the tables `--min-events` left out.
fn notes(ctx: &ReportContext) -> Markup {
    if ctx.notes.is_empty() && ctx.skipped.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Notes" }
        ul {
            @for n in &ctx.notes { li { (n) } }
            @for (s, e) in &ctx.skipped {
                li { (s) " left out: " (e) " events (below --min-events)" }
            }
        }
    }
}

/// `+1.2`, `-3.4`, and `0.0` for anything that rounds to zero (no `-0.0`).
pub(super) fn signed(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == 0.0 {
        "0.0".into()
    } else {
        format!("{r:+.1}")
    }
}

/// `v` with `prec` decimals, or a dash.
pub(super) fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.prec$}"))
}

/// Bytes in binary units with one decimal, or a dash.
fn bytes(b: Option<f64>) -> String {
    b.map_or("–".into(), human_bytes)
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
