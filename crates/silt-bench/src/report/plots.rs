//! The report's plots, drawn with `plotters` (SVG backend, no font feature: text is written as
//! SVG `<text>` with a generic `sans-serif` family, which any browser renders without extra
//! fonts): which plots a run gets ([`plots`]), each drawing, and `plots/*.svg`.
//!
//! Touches only `out/plots/` ([`write_files`]); the rest only computes.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::aggregate::{configs, default_configs, Agg};
use super::goal::GoalRow;
use super::QUERIES;

/// One plot of the report.
pub(super) struct Plot {
    /// File stem under `plots/` and the figure's id (`plot-<stem>`).
    pub stem: String,
    /// The figure's caption.
    pub title: String,
    pub svg: String,
}

impl Plot {
    fn new(stem: &str, title: impl Into<String>, svg: String) -> Self {
        Self {
            stem: stem.into(),
            title: title.into(),
            svg,
        }
    }
}

/// The plots of a run: sizes and write times per configuration (when there are measurements),
/// the read path's four queries (when `reads`), and goal 3's bars (when baselines wrote rows).
pub(super) fn plots(aggs: &[Agg], goal_rows: &[GoalRow], reads: bool) -> anyhow::Result<Vec<Plot>> {
    let mut out = Vec::new();
    if !aggs.is_empty() {
        out.extend(measurement_plots(aggs)?);
        if reads {
            out.extend(read_plots(aggs)?);
        }
    }
    if !goal_rows.is_empty() {
        out.push(Plot::new(
            "baselines",
            "Goal 3: silt vs DuckDB vs pyarrow (Parquet, zstd level 1, same rows)",
            goal_bars(aggs, goal_rows)?,
        ));
    }
    Ok(out)
}

/// Writes each plot to `out/plots/<stem>.svg`.
pub(super) fn write_files(out: &Path, plots: &[Plot]) -> anyhow::Result<()> {
    let plot_dir = out.join("plots");
    std::fs::create_dir_all(&plot_dir)?;
    for p in plots {
        std::fs::write(plot_dir.join(format!("{}.svg", p.stem)), &p.svg)?;
    }
    Ok(())
}

/// `f` of each schema's figures, per configuration in `cs`.
fn per_config(aggs: &[Agg], cs: &[String], f: &dyn Fn(&Agg) -> Option<f64>) -> Vec<Vec<f64>> {
    cs.iter()
        .map(|c| {
            aggs.iter()
                .filter(|a| &a.config == c)
                .filter_map(f)
                .collect()
        })
        .collect()
}

/// Bytes per event, Parquet vs Feather, write time and size vs speed.
fn measurement_plots(aggs: &[Agg]) -> anyhow::Result<Vec<Plot>> {
    let cfgs = configs(aggs);
    let default_cfgs = default_configs(aggs);
    Ok(vec![
        Plot::new(
            "bytes_per_event",
            "Bytes per event per store and codec (one point per schema)",
            box_plot(
                "Bytes/event per configuration (log scale)",
                "B/event",
                &default_cfgs,
                &per_config(aggs, &default_cfgs, &|a| Some(a.bpe)),
            )?,
        ),
        Plot::new(
            "parquet_vs_feather",
            "Parquet vs Feather per schema",
            parquet_vs_feather(aggs)?,
        ),
        Plot::new(
            "write_speed",
            "Write time per event per store and codec (CPU, conversion only)",
            box_plot(
                "Write CPU time per event (log scale)",
                "ns/event",
                &cfgs,
                &per_config(aggs, &cfgs, &|a| Some(a.ns)),
            )?,
        ),
        Plot::new(
            "size_vs_speed",
            "Size vs speed per schema with each configuration's convex hull",
            size_vs_speed(aggs)?,
        ),
    ])
}

/// One box plot of wall times per query that has any.
fn read_plots(aggs: &[Agg]) -> anyhow::Result<Vec<Plot>> {
    let cfgs = configs(aggs);
    let mut out = Vec::new();
    for (qi, q) in QUERIES.iter().enumerate() {
        let vals = per_config(aggs, &cfgs, &|a| a.read_s[qi].map(|s| s * 1e3));
        if vals.iter().all(Vec::is_empty) {
            continue;
        }
        out.push(Plot::new(
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
    Ok(out)
}

/// Goal 3's bars: ratio vs original per schema for silt and each baseline tool.
fn goal_bars(aggs: &[Agg], goal_rows: &[GoalRow]) -> anyhow::Result<String> {
    let sorted = |f: &dyn Fn(&GoalRow) -> String| -> Vec<String> {
        let mut v: Vec<String> = goal_rows.iter().map(f).collect();
        v.sort();
        v.dedup();
        v
    };
    let tools = sorted(&|g| g.tool.clone());
    let gschemas = sorted(&|g| g.schema.clone());
    let mut series = vec![(
        "silt".to_string(),
        gschemas
            .iter()
            .map(|s| {
                aggs.iter()
                    .find(|a| &a.schema == s && a.config == crate::matrix::GOAL_CONFIG)
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
                        .find(|g| &g.schema == s && &g.tool == t)
                        .and_then(|g| g.ratio_in)
                })
                .collect(),
        ));
    }
    baseline_bars(&gschemas, &series)
}

/// A plot as SVG text.
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
    let cfgs = default_configs(aggs);
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
            draw_hull(&mut chart, &log_hull(&mine), color)?;
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

/// The convex hull of `points` computed in log-log space (where the plot is drawn).
fn log_hull(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    convex_hull(
        points
            .iter()
            .map(|&(x, y)| (x.log10(), y.log10()))
            .collect(),
    )
    .into_iter()
    .map(|(x, y)| (10f64.powf(x), 10f64.powf(y)))
    .collect()
}

/// A log-log chart drawn into an SVG string.
type LogChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, LogCoord<f64>>>;

/// A hull: a filled polygon with its outline (three points or more), a line (two), nothing (one).
fn draw_hull(chart: &mut LogChart, hull: &[(f64, f64)], color: RGBAColor) -> anyhow::Result<()> {
    if hull.len() >= 3 {
        chart
            .draw_series(std::iter::once(Polygon::new(
                hull.to_vec(),
                color.mix(0.12).filled(),
            )))
            .map_err(err)?;
        let mut closed = hull.to_vec();
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
                hull.to_vec(),
                color.stroke_width(1),
            )))
            .map_err(err)?;
    }
    Ok(())
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
}
