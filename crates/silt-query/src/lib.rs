//! SQL over a silt lake with DataFusion.
//!
//! ```no_run
//! # async fn f() -> anyhow::Result<()> {
//! let session = silt_query::open(std::path::Path::new("/data/lake")).await?;
//! let result = session
//!     .query("SELECT id.orig_h, count(*) FROM zeek.conn \
//!             WHERE ts >= TIMESTAMP '2018-03-24 17:00:00' GROUP BY 1")
//!     .await?;
//! result.write(silt_query::OutputFormat::Table, &mut std::io::stdout())?;
//! eprintln!("{}", result.stats);
//! # Ok(()) }
//! ```
//!
//! - [`session`]: opening a lake ([`open`]), running SQL ([`SiltSession::query`]);
//! - [`lake`]: finding tables and files and reading their footers;
//! - [`damage`]: naming the damaged file a failed query could not decode;
//! - [`feather_check`]: an object-store lake's Feather files checked as a query reads them;
//! - [`provider`]: the table provider (time -> partition pruning, Parquet and Feather scans);
//! - [`timefilter`]: deriving an event-time interval from filters;
//! - [`adapter`]: reading files whose schema differs from the table's unified schema;
//! - [`cidr`]: the `cidr_contains(cidr, addr)` function;
//! - [`lookup`]: `asn()`, `as_org()`, `geo_country()`, `geo_city()`, `rdns()` over the
//!   enrichment databases (`silt-enrich`);
//! - [`stats`]: scan statistics for `silt query --stats`;
//! - [`output`]: csv, json, ndjson, table and parquet output.
//!
//! This crate reads the lake and nothing else; it never writes to it.

pub mod adapter;
pub mod cidr;
pub mod damage;
pub mod feather_check;
pub mod lake;
pub mod lookup;
pub mod output;
pub mod params;
pub mod provider;
pub mod session;
pub mod stats;
pub mod timefilter;

pub use output::{write_results, write_results_with_schema, OutputFormat, ResultWriter};
pub use session::{
    explain_missing_table, lost_a_file, open, open_for, runtime, session_config, tables_named,
    LostFileRetry, QueryResult, SharedFooters, SiltSession,
};
pub use stats::ScanStats;
