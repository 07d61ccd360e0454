//! The lake: a directory of plain Parquet or Feather (Arrow IPC) files in Hive layout,
//! `<lake>/<module>.<type>/dt=YYYY-MM-DD/hour=HH/<unique>.parquet` (or `dt=` days, `month=`
//! months, or no partition directories, chosen per table from its data). The files are the only
//! truth about data: there is no catalog of files, and DuckDB, Spark, Trino or Athena can read the
//! directory as is. `<lake>/_silt/` holds small records of silt's own: what imports consumed,
//! each table's partitioning, and the replacements compaction made.
//!
//! - [`writer`]: [`LakeWriter`], the [`silt_core::Emit`] that partitions rows by event time, sorts them,
//!   and writes files through a [`store`] format;
//! - [`publish`]: the one place where a finished file becomes part of a table (temp name, fsync,
//!   rename); a transaction log (Delta Lake) can later replace it without touching the writer;
//! - [`store`]: one Parquet or Feather file ([`store::FileSink`], [`store::open`]): the Parquet
//!   writer properties, the per-column choices made on a file's first batch, the user's encoding
//!   hints, and the sinks;
//! - `background`: a file sink that encodes on a thread of its own, overlapping sorting;
//! - `bloom`: the bloom filters of lookup columns, built in address order;
//! - `permute`: a sort buffer's rows put in sorted order, each column read in order and each
//!   value written to its place;
//! - `narrow`: list columns of a sliced batch narrowed to the values its rows use, before
//!   parquet-rs encodes them;
//! - [`layout`]: partition directories and file names;
//! - [`granularity`]: a new table's time partitioning chosen from its data (`--partition auto`)
//!   and recorded under `<lake>/_silt/tables/`;
//! - [`rejects`]: rejected input kept under `<lake>/_rejects/`;
//! - [`catalog`]: listing tables with rows, files, bytes and time range, read from file footers;
//! - [`imports`]: the record of what imports consumed (no duplicate rows on a re-run or after a
//!   crash);
//! - [`inspect`]: a Parquet file's row groups, column chunks, encodings and statistics.
//! - [`ipc`]: Feather (Arrow IPC) files opened and read with arrow-ipc's panics on damaged bytes
//!   turned into errors;
//! - [`compact`]: a partition's small files merged into files of a target size;
//! - [`replace`]: how a merged file takes its inputs' place atomically for every silt reader,
//!   and the recovery of a compaction a crash interrupted;
//! - [`retain`]: whole partitions older than a retention window dropped;
//! - [`emptied`]: the schema of a table retention left without files, kept so it stays queryable;
//! - [`scratch`]: scratch directories in `$TMPDIR`, removed by a later run when their run was killed;
//! - [`checksum`]: the CRC-32 of the whole file each data file carries in its footer;
//! - [`verify`]: every data file of a lake checked against its sum (or decoded);
//! - [`vacuum`]: crash leftovers (temporary files, dead imports, finished records) removed;
//! - [`ddl`]: CREATE statements for Athena, Trino, Spark and DuckDB over a table of the lake.
//!
//! This crate touches only the lake directory it is given, the files it is asked to inspect, and
//! its own scratch directories ([`scratch`]).

mod background;
mod bloom;
pub mod catalog;
pub mod checksum;
pub mod claims;
pub mod compact;
pub mod config;
pub mod ddl;
pub mod delta;
pub mod emptied;
pub mod granularity;
pub mod imports;
pub mod inspect;
pub mod ipc;
pub mod layout;
mod narrow;
mod permute;
pub mod publish;
pub mod rejects;
pub mod remote;
pub mod replace;
pub mod retain;
pub mod schema_tag;
pub mod scratch;
pub mod single;
pub mod store;
pub mod summary;
pub mod vacuum;
pub mod verify;
pub mod writer;

pub use config::{
    Codec, EncodingHints, PartitionChoice, Partitioning, StoreKind, TableFormat, WriterConfig,
    DEFAULT_PAGE_ROWS, DEFAULT_ROW_GROUP_ROWS,
};
pub use summary::{ImportSummary, TableSummary};
pub use writer::{Commit, LakeWriter};
