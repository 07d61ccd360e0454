//! The shared vocabulary of silt.
//!
//! Every other crate speaks in these terms:
//! - [`TableName`]: `module.type` names such as `zeek.conn` or `suricata.dns`;
//! - [`Emit`]: where a reader sends its [`arrow::record_batch::RecordBatch`]es and its [`Reject`]s;
//! - [`schema`]: unifying two schemas and conforming a batch to a unified schema;
//! - [`time`] and [`addr`]: exact parsing of timestamps and canonical IP address text;
//! - [`meta`]: the schema metadata keys readers set and the lake writer reads;
//! - [`panics`]: another library's panic on bad input turned into an error;
//! - [`ipc_check`]: Arrow IPC messages from untrusted bytes checked before arrow-ipc reserves
//!   what they claim;
//! - [`decode`]: the [`Decoder`] contract every format implements (fed in pieces or read whole),
//!   and the line framer the line-based formats share;
//! - [`split`]: one stream's blocks of lines decoded on several threads, in stream order;
//! - [`format`]: [`FormatSpec`], what each format declares for the one format registry;
//! - [`transform`]: [`Transform`], a step between decoder and sink (`--parse-field`);
//! - [`sink`]: [`Sink`], the end of a pipeline, which can commit what it received.
//!
//! This crate depends on nothing of silt's own and does no I/O besides what a caller hands it.

pub mod addr;
pub mod decode;
pub mod emit;
pub mod format;
pub mod ipc_check;
pub mod meta;
pub mod panics;
pub mod schema;
pub mod sink;
pub mod split;
pub mod table;
pub mod time;
pub mod transform;

pub use decode::Decoder;
pub use emit::{CollectEmit, Emit, ReadOptions, Reject, SourceInfo};
pub use format::{FormatOptions, FormatSpec, Probe};
pub use sink::{Checkpoint, Committed, Sink};
pub use table::TableName;
pub use transform::Transform;
