//! The answer in words: the Pareto front of median size and median write CPU time per event
//! over schemas, and Parquet+zstd:1 against Feather+zstd:1 and uncompressed Feather.
//!
//! Touches nothing: it only renders.

use std::fmt::Write as _;

use maud::{html, Markup};

use super::aggregate::{over_schemas, pareto, Agg};

/// The answer over the schemas in `aggs` (a sentence that follows "On this data "); `None`
/// without measurements.
pub(super) fn answer(aggs: &[Agg]) -> Option<Markup> {
    let front = pareto(aggs);
    if front.is_empty() {
        return None;
    }
    Some(html! {
        "the Pareto front of median size and median write CPU time per event (over schemas) is: "
        @for (i, (config, bpe, ns)) in front.iter().enumerate() {
            @if i > 0 { ", " }
            b { (config) } (format!(" ({bpe:.1} B/event, {ns:.0} ns/event)"))
        }
        ". "
        (comparison(aggs, &front))
    })
}

/// Parquet+zstd:1 against Feather+zstd:1 (size, CPU time, whether it is on the `front`) and
/// against uncompressed Feather, when the run has them; empty otherwise.
fn comparison(aggs: &[Agg], front: &[(String, f64, f64)]) -> String {
    let get = |c: &str| {
        Some((
            over_schemas(aggs, c, &|a| Some(a.bpe))?,
            over_schemas(aggs, c, &|a| Some(a.ns))?,
        ))
    };
    let mut s = String::new();
    let (Some((pb, pn)), Some((fb, fnn))) = (get("parquet+zstd:1"), get("feather+zstd:1")) else {
        return s;
    };
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
    s
}
