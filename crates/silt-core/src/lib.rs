//! The shared vocabulary of silt.
//!
//! Every other crate speaks in these terms:
//! - [`TableName`]: `module.type` names such as `zeek.conn` or `suricata.dns`;
//! - [`Emit`]: where a reader sends its [`arrow::record_batch::RecordBatch`]es and its [`Reject`]s;
//! - [`schema`]: unifying two schemas and conforming a batch to a unified schema;
//! - [`time`] and [`addr`]: exact parsing of timestamps and canonical IP address text;
//! - [`meta`]: the schema metadata keys readers set and the lake writer reads.
//!
//! This crate depends on nothing of silt's own and does no I/O besides what a caller hands it.

pub mod addr;
pub mod emit;
pub mod meta;
pub mod schema;
pub mod table;
pub mod time;

pub use emit::{CollectEmit, Emit, ReadOptions, Reject, SourceInfo};
pub use table::TableName;
