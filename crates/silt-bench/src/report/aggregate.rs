//! The report's figures: one [`Agg`] (medians over repetitions) per schema × configuration, and
//! what is read off them over schemas: medians per configuration, the Pareto front of size and
//! write time, the note on small schemas.
//!
//! Touches nothing: it only computes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::results::{median, Row};

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
pub(super) fn configs(aggs: &[Agg]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in aggs {
        if !out.contains(&a.config) {
            out.push(a.config.clone());
        }
    }
    out
}

/// Configurations in first-seen order that have a row of the default writer variant.
pub(super) fn default_configs(aggs: &[Agg]) -> Vec<String> {
    configs(aggs)
        .into_iter()
        .filter(|c| {
            aggs.iter()
                .any(|a| &a.config == c && a.variant == "default")
        })
        .collect()
}

/// Schemas, sorted.
pub(super) fn schemas(aggs: &[Agg]) -> Vec<String> {
    let mut s: Vec<String> = aggs.iter().map(|a| a.schema.clone()).collect();
    s.sort();
    s.dedup();
    s
}

/// Median over schemas of one configuration's per-schema medians.
pub(super) fn over_schemas(
    aggs: &[Agg],
    config: &str,
    f: &dyn Fn(&Agg) -> Option<f64>,
) -> Option<f64> {
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

/// The configurations on the Pareto front of (median B/event, median ns/event) over schemas,
/// default writer variant only; sorted by size.
pub fn pareto(aggs: &[Agg]) -> Vec<(String, f64, f64)> {
    let pts: Vec<(String, f64, f64)> = default_configs(aggs)
        .into_iter()
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

#[cfg(test)]
mod tests {
    use super::*;

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
