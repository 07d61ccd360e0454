//! `silt bench`: the Parquet-vs-Feather study (Tenzir, "Parquet & Feather: Writing Security
//! Telemetry") as a feature, plus the read path the study left out.
//!
//! For every table (schema) of the input, held in memory as Arrow (bounded by `max_events`), and
//! every configuration of the matrix (store × codec/level × row-group size), it writes one file
//! through silt's own writer (`silt_lake::store`, the code `silt import` uses), measures size and
//! write time (conversion only), runs four queries over the file with DataFusion (full scan,
//! filtered count on the time column, top-N group-by, needle lookup) counting the bytes read, and
//! writes `results.csv` and a self-contained `index.html` report with plots.
//!
//! - [`collect`]: the bounded in-memory [`silt_core::Emit`] and loading tables from a lake;
//! - [`matrix`]: the configurations;
//! - [`measure`]: writing and timing one file;
//! - [`readpath`]: the four queries and the byte-counting object store;
//! - [`results`]: `results.csv` rows;
//! - [`baselines`]: DuckDB/pyarrow through `bench/baselines.py` (goal 3);
//! - [`columns`]: per-column sizes of the goal-3 files (`columns.csv`);
//! - [`entropy`]: what the goal-3 rows' values cost, column by column (an order-0 estimate);
//! - [`report`]: plots (plotters, SVG) and `index.html`;
//! - [`run`]: the whole benchmark.
//!
//! This crate touches only the output directory it is given (and reads its inputs / lake).

pub mod baselines;
pub mod collect;
pub mod columns;
pub mod cpu;
pub mod entropy;
pub mod matrix;
pub mod measure;
pub mod readpath;
pub mod report;
pub mod results;
pub mod run;

pub use collect::{BoundedCollect, TableData};
pub use matrix::BenchConfig;
pub use run::{run, BenchOptions, BenchOutcome};
