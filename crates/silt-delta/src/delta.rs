//! A Delta Lake transaction log (`<table>/_delta_log/`) kept beside a silt table's Hive
//! directories, so that Spark, DuckDB (`delta_scan`), Trino or Athena can read the table as a
//! Delta table: the files a commit names, and no others, are the table.
//!
//! **Where.** A table directory, or a table in an object store ([`TableLocation::Store`]: the
//! caller's own store, committed to with put-if-absent; see `register_s3_log_store` for why
//! deltalake's S3 feature is not used).
//!
//! **What it touches.** Only `<table_dir>/_delta_log/` (commit JSON files, and the Parquet
//! checkpoints and `_last_checkpoint` that deltalake writes every `delta.checkpointInterval`
//! commits, 100 by default) and, read-only, the footers of the Parquet files it is asked to
//! describe ([`NewFile::from_parquet`]). It never writes, moves or deletes data files: silt
//! writes and renames a file into place first (`publish.rs`), then commits it here; a file a
//! commit removes stays on disk until silt deletes it (after a grace period, as a Delta VACUUM
//! would), because readers of older versions may still read it.
//!
//! **Commit protocol.** Every change is one commit `_delta_log/<version>.json`, written by
//! deltalake's [`CommitBuilder`] as a put-if-absent of the next version number (on a local
//! filesystem an atomic hard link, so any number of threads and processes can commit to one
//! table). A commit is built against the latest snapshot; when another writer took the version
//! first, deltalake reads the winning commits, checks them for conflicts and tries the next
//! version (up to 15 times). Blind appends never conflict with appends or compactions. What
//! deltalake does treat as a conflict (another commit changed the schema; a retention commit
//! removed files while this commit was prepared, which deltalake without its `datafusion`
//! feature counts against every concurrent commit) is retried here from a fresh snapshot, the
//! commit rebuilt: an append merges its schema again, a replace checks again that its inputs are
//! all still in the table (else it fails and the caller drops its merged file), a removal skips
//! the files that are already gone. Creation writes version 0 directly as put-if-absent, so two
//! writers creating one table both succeed and the table keeps the first one's metadata.
//!
//! **Schema.** The Delta schema is written from the Arrow schema of the files by
//! [`delta_type`], following what Spark's Parquet reader infers from the files' Parquet types
//! (the kernel's own conversion maps `UInt16` to `short`, which cannot hold a port above
//! 32767): unsigned integers go to the next wider signed type and `UInt64` to `decimal(20,0)`.
//! All fields are nullable. Files must not hold columns of the Arrow `Null` type (a JSON field
//! only ever seen as null): Spark cannot read parquet-rs's encoding of them as any Delta type,
//! so [`DeltaLog::append`] refuses them and [`spark_readable`] leaves them out of a batch
//! before it is written. The partition columns (`dt` string, `hour` integer, `month` string,
//! any other name string) follow the file columns. An append whose files have columns the table
//! lacks (top level, or inside structs, lists of structs and map values) first commits the wider
//! schema in the same commit; a column whose type changed is refused (Delta's `typeWidening`
//! table feature would allow a few widenings, but deltalake cannot commit to such a table).
//!
//! **Protocol.** Reader version 1, writer version 1 (no table features) unless a column is
//! `timestamp_ntz` (an Arrow timestamp without time zone), which needs reader version 3 and
//! writer version 7 with the `timestampNtz` reader and writer feature; an append that brings
//! the first such column upgrades the protocol in the same commit. Writer version 2 (Spark's
//! default) is avoided on purpose: it implies the `invariants` feature, which deltalake built
//! without `datafusion` refuses to write.
//!
//! **Runtime.** deltalake is async; each [`DeltaLog`] owns a tokio current-thread runtime and
//! blocks on it, so callers must be plain threads, never inside a tokio runtime. (deltalake's
//! kernel engine adds a short-lived background thread of its own for each snapshot read on such
//! a runtime.)

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions, StructArray};
use arrow::compute::kernels::aggregate;
use arrow::datatypes::{
    DataType as ArrowType, Date32Type, Field, FieldRef, Int64Type, Schema, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake::kernel::{
    Action, Add, ArrayType, DataType, MapType, Metadata, Protocol, Remove, StructField, StructType,
};
use deltalake::logstore::{
    default_logstore, logstore_factories, CommitOrBytes, LogStore as _, LogStoreFactory,
    LogStoreRef, ObjectStoreRef, StorageConfig,
};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::table::state::DeltaTableState;
use deltalake::{DeltaTableBuilder, DeltaTableError};
use deltalake::{ObjectStore, Path as ObjectPath};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::RowGroupMetaData;
use serde_json::{json, Map, Value};
use url::Url;

/// The directory of the log below the table directory.
pub const LOG_DIR: &str = "_delta_log";

/// Hive's directory value for a null partition value.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Attempts of one operation, each from a fresh snapshot, when deltalake reports a conflict it
/// did not resolve itself (each attempt already retries up to 15 versions inside deltalake).
const MAX_ATTEMPTS: usize = 10;

/// Strings longer than this (in bytes) get no min/max statistics (the log would grow with
/// whole log lines; Spark itself keeps 32-character prefixes).
const MAX_STAT_STRING: usize = 64;

/// A data file to add to the table: already written and renamed into place by silt.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFile {
    /// Path relative to the table directory, `/`-separated, e.g.
    /// `dt=2024-03-24/hour=17/20240324T170000-….parquet`.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// The partition values the file's directories say, by column name; `None` for
    /// `__HIVE_DEFAULT_PARTITION__`. Must name every partition column of the table.
    pub partition_values: BTreeMap<String, Option<String>>,
    /// Per-file statistics for the log (`numRecords`, and min/max/null counts where known).
    pub stats: Option<FileStats>,
}

impl NewFile {
    /// Describes a Parquet file that is in place at `<table_dir>/<rel_path>`: its size, the
    /// partition values of its `key=value` directories and statistics from its footer.
    pub fn from_parquet(table_dir: &Path, rel_path: &str) -> anyhow::Result<NewFile> {
        check_relative(rel_path)?;
        let full = table_dir.join(rel_path);
        let file = std::fs::File::open(&full)
            .with_context(|| format!("cannot open {}", full.display()))?;
        let size = file.metadata()?.len();
        let stats = FileStats::from_parquet(&file)
            .with_context(|| format!("cannot read the footer of {}", full.display()))?;
        Ok(NewFile {
            path: rel_path.to_string(),
            size,
            partition_values: partition_values_of(rel_path),
            stats: Some(stats),
        })
    }

    /// Describes a Parquet file of `size` bytes at `rel_path` below the table directory from
    /// its footer as already read (a file in an object store, whose footer the caller has).
    pub fn from_metadata(
        rel_path: &str,
        size: u64,
        meta: &ArrowReaderMetadata,
    ) -> anyhow::Result<NewFile> {
        check_relative(rel_path)?;
        Ok(NewFile {
            path: rel_path.to_string(),
            size,
            partition_values: partition_values_of(rel_path),
            stats: Some(FileStats::from_metadata(meta)),
        })
    }
}

/// The partition values of a relative path's `key=value` directories (not the file name).
pub fn partition_values_of(rel_path: &str) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    let mut parts: Vec<&str> = rel_path.split('/').collect();
    parts.pop();
    for p in parts {
        if let Some((k, v)) = p.split_once('=') {
            let v = (v != NULL_PARTITION).then(|| v.to_string());
            out.insert(k.to_string(), v);
        }
    }
    out
}

/// Delta per-file statistics (`add.stats`): the record count, and for top-level columns whose
/// footer statistics allow it the null count and the exact min/max (integers, dates, timestamps
/// with a time zone, short strings). Readers use them to skip files, so nothing approximate is
/// written: a column without trustworthy values is left out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FileStats {
    pub num_records: u64,
    pub min_values: Map<String, Value>,
    pub max_values: Map<String, Value>,
    pub null_count: Map<String, Value>,
}

impl FileStats {
    /// Only the record count.
    pub fn rows(num_records: u64) -> FileStats {
        FileStats {
            num_records,
            ..Default::default()
        }
    }

    /// Reads the statistics of a Parquet file from its footer.
    pub fn from_parquet(file: &std::fs::File) -> anyhow::Result<FileStats> {
        let meta = ArrowReaderMetadata::load(file, ArrowReaderOptions::new())?;
        Ok(Self::from_metadata(&meta))
    }

    /// The statistics a Parquet footer (with its Arrow schema) gives.
    pub fn from_metadata(meta: &ArrowReaderMetadata) -> FileStats {
        let pq = meta.metadata();
        let row_groups = pq.row_groups();
        let mut stats = FileStats::rows(pq.file_metadata().num_rows().max(0) as u64);
        for field in meta.schema().fields() {
            if field.data_type().is_nested() {
                continue;
            }
            let Ok(conv) = StatisticsConverter::try_new(
                field.name(),
                meta.schema().as_ref(),
                meta.parquet_schema(),
            ) else {
                continue;
            };
            let conv = conv.with_missing_null_counts_as_zero(false);
            if conv.parquet_column_index().is_none() {
                continue;
            }
            if let Ok(nulls) = conv.row_group_null_counts(row_groups.iter()) {
                if nulls.null_count() == 0 && !row_groups.is_empty() {
                    let total: u64 = nulls.values().iter().sum();
                    stats.null_count.insert(field.name().clone(), json!(total));
                }
            }
            if let Some((min, max)) = min_max(&conv, row_groups, field.data_type()) {
                stats.min_values.insert(field.name().clone(), min);
                stats.max_values.insert(field.name().clone(), max);
            }
        }
        stats
    }

    /// The JSON of `add.stats`.
    pub fn to_json(&self) -> String {
        let mut o = Map::new();
        o.insert("numRecords".into(), json!(self.num_records));
        if !self.min_values.is_empty() {
            o.insert("minValues".into(), Value::Object(self.min_values.clone()));
            o.insert("maxValues".into(), Value::Object(self.max_values.clone()));
        }
        if !self.null_count.is_empty() {
            o.insert("nullCount".into(), Value::Object(self.null_count.clone()));
        }
        Value::Object(o).to_string()
    }
}

/// The exact min and max of a column over all row groups, as Delta stats JSON values; `None`
/// unless every row group has exact statistics.
fn min_max(
    conv: &StatisticsConverter<'_>,
    row_groups: &[RowGroupMetaData],
    t: &ArrowType,
) -> Option<(Value, Value)> {
    let mins = conv.row_group_mins(row_groups.iter()).ok()?;
    let maxes = conv.row_group_maxes(row_groups.iter()).ok()?;
    let exact = |a: parquet::errors::Result<BooleanArray>| {
        a.map(|a| a.null_count() == 0 && a.true_count() == a.len())
            .unwrap_or(false)
    };
    if row_groups.is_empty()
        || mins.null_count() > 0
        || maxes.null_count() > 0
        || !exact(conv.row_group_is_min_value_exact(row_groups.iter()))
        || !exact(conv.row_group_is_max_value_exact(row_groups.iter()))
    {
        return None;
    }
    let cast = |a: &ArrayRef, to: &ArrowType| arrow::compute::cast(a, to).ok();
    match t {
        ArrowType::Int8 | ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64 => {
            let (lo, hi) = (
                cast(&mins, &ArrowType::Int64)?,
                cast(&maxes, &ArrowType::Int64)?,
            );
            let lo = aggregate::min(lo.as_any().downcast_ref::<arrow::array::Int64Array>()?)?;
            let hi = aggregate::max(hi.as_any().downcast_ref::<arrow::array::Int64Array>()?)?;
            Some((json!(lo), json!(hi)))
        }
        ArrowType::UInt8 | ArrowType::UInt16 | ArrowType::UInt32 | ArrowType::UInt64 => {
            let (lo, hi) = (
                cast(&mins, &ArrowType::UInt64)?,
                cast(&maxes, &ArrowType::UInt64)?,
            );
            let lo = aggregate::min(lo.as_any().downcast_ref::<arrow::array::UInt64Array>()?)?;
            let hi = aggregate::max(hi.as_any().downcast_ref::<arrow::array::UInt64Array>()?)?;
            Some((json!(lo), json!(hi)))
        }
        ArrowType::Date32 => {
            let lo = aggregate::min(mins.as_any().downcast_ref::<arrow::array::Date32Array>()?)?;
            let hi = aggregate::max(maxes.as_any().downcast_ref::<arrow::array::Date32Array>()?)?;
            let day = |d: i32| {
                Some(
                    Date32Type::to_naive_date_opt(d)?
                        .format("%Y-%m-%d")
                        .to_string(),
                )
            };
            Some((json!(day(lo)?), json!(day(hi)?)))
        }
        // Only zoned timestamps: Delta keeps them as UTC instants with millisecond precision, so
        // the min is rounded down and the max up to stay bounds of the data.
        ArrowType::Timestamp(unit, Some(_)) => {
            let (lo, hi) = (micros(&mins, *unit)?, micros(&maxes, *unit)?);
            let lo = aggregate::min(&lo)?.div_euclid(1000);
            let hi = (aggregate::max(&hi)? + 999).div_euclid(1000);
            let iso = |ms: i64| {
                chrono::DateTime::from_timestamp_millis(ms)
                    .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
            };
            Some((json!(iso(lo)?), json!(iso(hi)?)))
        }
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => {
            let (lo, hi) = (
                cast(&mins, &ArrowType::Utf8)?,
                cast(&maxes, &ArrowType::Utf8)?,
            );
            let lo =
                aggregate::min_string(lo.as_any().downcast_ref::<arrow::array::StringArray>()?)?;
            let hi =
                aggregate::max_string(hi.as_any().downcast_ref::<arrow::array::StringArray>()?)?;
            if lo.len() > MAX_STAT_STRING || hi.len() > MAX_STAT_STRING {
                return None;
            }
            Some((json!(lo), json!(hi)))
        }
        _ => None,
    }
}

/// Timestamps of any unit as microseconds.
fn micros(a: &ArrayRef, unit: TimeUnit) -> Option<arrow::array::Int64Array> {
    use arrow::array::AsArray;
    let v: arrow::array::Int64Array = match unit {
        TimeUnit::Second => a
            .as_primitive_opt::<TimestampSecondType>()?
            .unary::<_, Int64Type>(|s| s.saturating_mul(1_000_000)),
        TimeUnit::Millisecond => a
            .as_primitive_opt::<TimestampMillisecondType>()?
            .unary::<_, Int64Type>(|s| s.saturating_mul(1000)),
        TimeUnit::Microsecond => a
            .as_primitive_opt::<TimestampMicrosecondType>()?
            .unary::<_, Int64Type>(|s| s),
        TimeUnit::Nanosecond => a
            .as_primitive_opt::<TimestampNanosecondType>()?
            .unary::<_, Int64Type>(|s| s.div_euclid(1000)),
    };
    Some(v)
}

/// The Delta type of an Arrow column type, as Spark's Parquet reader would infer it from the
/// Parquet file parquet-rs writes for that Arrow type. Nested types are nullable throughout.
pub fn delta_type(t: &ArrowType) -> anyhow::Result<DataType> {
    use ArrowType as A;
    Ok(match t {
        A::Null | A::Utf8 | A::LargeUtf8 | A::Utf8View => DataType::STRING,
        A::Boolean => DataType::BOOLEAN,
        A::Int8 => DataType::BYTE,
        A::Int16 | A::UInt8 => DataType::SHORT,
        A::Int32 | A::UInt16 => DataType::INTEGER,
        A::Int64 | A::UInt32 => DataType::LONG,
        A::UInt64 => DataType::decimal(20, 0)?,
        A::Float32 => DataType::FLOAT,
        A::Float64 => DataType::DOUBLE,
        A::Binary | A::LargeBinary | A::BinaryView | A::FixedSizeBinary(_) => DataType::BINARY,
        A::Date32 | A::Date64 => DataType::DATE,
        A::Timestamp(TimeUnit::Nanosecond, _) => bail!(
            "nanosecond timestamps have no Delta type that Spark reads \
             (Delta's timestampNanos feature is not supported here); write microseconds"
        ),
        A::Timestamp(_, Some(_)) => DataType::TIMESTAMP,
        A::Timestamp(_, None) => DataType::TIMESTAMP_NTZ,
        A::Decimal32(p, s) | A::Decimal64(p, s) | A::Decimal128(p, s) | A::Decimal256(p, s) => {
            if *s < 0 || *p > 38 {
                bail!("decimal({p},{s}) has no Delta type (precision at most 38, scale at least 0)")
            }
            DataType::decimal(*p, *s as u8)?
        }
        A::List(f)
        | A::LargeList(f)
        | A::ListView(f)
        | A::LargeListView(f)
        | A::FixedSizeList(f, _) => ArrayType::new(delta_type(f.data_type())?, true).into(),
        A::Struct(fields) => DataType::try_struct_type(
            fields
                .iter()
                .map(|f| Ok(StructField::nullable(f.name(), delta_type(f.data_type())?)))
                .collect::<anyhow::Result<Vec<_>>>()?,
        )?,
        A::Map(entries, _) => {
            let A::Struct(kv) = entries.data_type() else {
                bail!("map entries are not a struct: {entries}")
            };
            if kv.len() != 2 {
                bail!("map entries do not have two fields: {entries}")
            }
            MapType::new(
                delta_type(kv[0].data_type())?,
                delta_type(kv[1].data_type())?,
                true,
            )
            .into()
        }
        A::Dictionary(_, v) => delta_type(v)?,
        other => bail!("Arrow type {other} has no Delta type"),
    })
}

/// A batch as it should be written into a Delta table's Parquet files: without columns (and
/// struct fields) of the Arrow `Null` type, and with `Null` inside lists and maps made `Utf8`.
/// parquet-rs writes a `Null` column as `INT32` with the `UNKNOWN` logical type, which Spark's
/// Parquet reader cannot read as any declared Delta type (`FAILED_READ_FILE.
/// PARQUET_COLUMN_DATA_TYPE_MISMATCH`); a column left out of a file reads as null, and once
/// values of a real type arrive the table gets the column with that type.
pub fn spark_readable(batch: &RecordBatch) -> anyhow::Result<RecordBatch> {
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        if let Some((f, c)) = readable_column(f, c)? {
            fields.push(f);
            columns.push(c);
        }
    }
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        batch.schema().metadata().clone(),
    ));
    Ok(RecordBatch::try_new_with_options(
        schema,
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// The schema of [`spark_readable`]'s batches.
pub fn spark_readable_schema(schema: &Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .filter_map(|f| readable_type(f.data_type()).map(|t| f.as_ref().clone().with_data_type(t)))
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The type a column is written with (`None`: left out).
fn readable_type(t: &ArrowType) -> Option<ArrowType> {
    use ArrowType as A;
    let inner = |t: &ArrowType| readable_type(t).unwrap_or(A::Utf8);
    let field = |f: &FieldRef, t: ArrowType| Arc::new(f.as_ref().clone().with_data_type(t));
    Some(match t {
        A::Null => return None,
        A::Struct(fs) => {
            let kept: Vec<FieldRef> = fs
                .iter()
                .filter_map(|f| readable_type(f.data_type()).map(|t| field(f, t)))
                .collect();
            if kept.is_empty() {
                return None;
            }
            A::Struct(kept.into())
        }
        A::List(f) => A::List(field(f, inner(f.data_type()))),
        A::LargeList(f) => A::LargeList(field(f, inner(f.data_type()))),
        A::FixedSizeList(f, n) => A::FixedSizeList(field(f, inner(f.data_type())), *n),
        A::Map(f, sorted) => A::Map(field(f, readable_type(f.data_type())?), *sorted),
        A::Dictionary(_, v) if **v == A::Null => A::Utf8,
        other => other.clone(),
    })
}

fn readable_column(f: &FieldRef, c: &ArrayRef) -> anyhow::Result<Option<(FieldRef, ArrayRef)>> {
    let Some(t) = readable_type(f.data_type()) else {
        return Ok(None);
    };
    if &t == f.data_type() {
        return Ok(Some((f.clone(), c.clone())));
    }
    let out: ArrayRef = match (f.data_type(), c.as_any().downcast_ref::<StructArray>()) {
        (ArrowType::Struct(_), Some(s)) => {
            let mut fields = Vec::new();
            let mut columns = Vec::new();
            for (cf, cc) in s.fields().iter().zip(s.columns()) {
                if let Some((cf, cc)) = readable_column(cf, cc)? {
                    fields.push(cf);
                    columns.push(cc);
                }
            }
            Arc::new(StructArray::try_new(
                fields.into(),
                columns,
                s.nulls().cloned(),
            )?)
        }
        _ => arrow::compute::cast(c, &t)
            .with_context(|| format!("cannot write column {} as {t}", f.name()))?,
    };
    Ok(Some((Arc::new(f.as_ref().clone().with_data_type(t)), out)))
}

/// Refuses schemas with `Null`-typed columns or fields (see [`spark_readable`]).
fn check_no_null_type(schema: &Schema) -> anyhow::Result<()> {
    if spark_readable_schema(schema) != *schema {
        bail!(
            "the files have columns of the Arrow Null type, which Spark cannot read from Parquet \
             as any Delta type; write them through spark_readable (columns: {})",
            schema
                .fields()
                .iter()
                .filter(|f| readable_type(f.data_type()).as_ref() != Some(f.data_type()))
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// The Delta schema of files with this Arrow schema (without partition columns).
pub fn delta_schema(schema: &Schema) -> anyhow::Result<StructType> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| {
            delta_type(f.data_type())
                .map(|t| StructField::nullable(f.name(), t))
                .with_context(|| format!("column {}", f.name()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(StructType::try_new(fields)?)
}

/// The type of a partition column: `hour` is an integer, `dt` and `month` (and anything else)
/// are strings.
pub fn partition_type(name: &str) -> DataType {
    match name {
        "hour" => DataType::INTEGER,
        _ => DataType::STRING,
    }
}

/// Where a Delta table lives.
#[derive(Clone)]
pub enum TableLocation {
    /// A local table directory.
    Dir(PathBuf),
    /// A table in an object store: the store, rooted at the bucket (`/` is the bucket's root,
    /// as `object_store`'s S3 store is), and the table's URL (`s3://bucket/prefix/zeek.conn`).
    /// Commits are written with a put-if-absent (`If-None-Match: *` on S3), so the store must
    /// support it (MinIO and `object_store`'s in-memory store do, as tested; AWS documents it
    /// for S3).
    Store {
        store: Arc<dyn ObjectStore>,
        url: Url,
    },
}

impl std::fmt::Display for TableLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableLocation::Dir(d) => write!(f, "{}", d.display()),
            TableLocation::Store { url, .. } => write!(f, "{url}"),
        }
    }
}

impl TableLocation {
    /// Whether the table has a log: `_delta_log/` is a directory, or (in an object store) holds
    /// an object.
    pub fn has_log(&self) -> anyhow::Result<bool> {
        match self {
            TableLocation::Dir(d) => Ok(d.join(LOG_DIR).is_dir()),
            TableLocation::Store { store, url } => {
                let prefix = ObjectPath::from_url_path(url.path())
                    .with_context(|| format!("not a table location: {url}"))?
                    .join(LOG_DIR);
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start a tokio runtime")?;
                let first = rt.block_on(async {
                    use futures::StreamExt;
                    store.list(Some(&prefix)).next().await.transpose()
                });
                Ok(first
                    .with_context(|| format!("cannot list {url}/{LOG_DIR}"))?
                    .is_some())
            }
        }
    }
}

/// deltalake finds the log store of a table by its URL's scheme, and knows only `file://` and
/// `memory://` without its cloud features. Those features would bring the AWS SDK (a second S3
/// client beside `object_store`'s, and DynamoDB for a locking scheme silt does not need): silt
/// gives deltalake its own store instead, and registers deltalake's default log store (commits
/// as put-if-absent) for `s3://` and `s3a://`.
fn register_s3_log_store() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        struct Default;
        impl LogStoreFactory for Default {
            fn with_options(
                &self,
                prefixed_store: ObjectStoreRef,
                root_store: ObjectStoreRef,
                location: &Url,
                options: &StorageConfig,
            ) -> deltalake::DeltaResult<LogStoreRef> {
                Ok(default_logstore(
                    prefixed_store,
                    root_store,
                    location,
                    options,
                ))
            }
        }
        let factories = logstore_factories();
        for scheme in ["s3://", "s3a://"] {
            let url = Url::parse(scheme).expect("a scheme URL");
            if !factories.contains_key(&url) {
                factories.insert(url, Arc::new(Default));
            }
        }
    });
}

/// The log of one Delta table.
pub struct DeltaLog {
    location: TableLocation,
    log_store: LogStoreRef,
    rt: tokio::runtime::Runtime,
    /// The latest snapshot read, brought up to date before each operation (incrementally).
    state: Mutex<Option<DeltaTableState>>,
    /// Versions deltalake found taken and moved past (conflict checked) while committing.
    retries: AtomicU64,
    /// Operations planned again after a conflict deltalake did not resolve.
    replans: AtomicU64,
}

/// How much this log's commits raced other writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Contention {
    /// Versions another writer took first, which deltalake checked for conflicts and moved past.
    pub retries: u64,
    /// Operations planned again from a fresh snapshot after a conflict deltalake reported.
    pub replans: u64,
}

impl std::fmt::Debug for DeltaLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaLog")
            .field("location", &self.location.to_string())
            .finish_non_exhaustive()
    }
}

/// What an operation commits, decided against a snapshot (`None` from a planner: nothing left
/// to do, e.g. every file to remove is already gone).
struct Plan {
    actions: Vec<Action>,
    operation: DeltaOperation,
    blind_append: bool,
}

impl DeltaLog {
    /// Opens the table's log, or `None` when `<table_dir>/_delta_log` does not exist. Nothing is
    /// read yet: a log directory without version 0 (a creation still under way) fails at the
    /// first operation.
    pub fn open(table_dir: &Path) -> anyhow::Result<Option<DeltaLog>> {
        Self::open_at(&TableLocation::Dir(table_dir.to_path_buf()))
    }

    /// [`DeltaLog::open`] for a table directory or a table in an object store.
    pub fn open_at(location: &TableLocation) -> anyhow::Result<Option<DeltaLog>> {
        if !location.has_log()? {
            return Ok(None);
        }
        Self::connect(location).map(Some)
    }

    /// Opens the log of the table at `location` without checking that it has one (the caller
    /// knows; an operation on a table without a log fails).
    pub fn at(location: &TableLocation) -> anyhow::Result<DeltaLog> {
        Self::connect(location)
    }

    fn connect(location: &TableLocation) -> anyhow::Result<DeltaLog> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start a tokio runtime")?;
        let (location, log_store) = match location {
            TableLocation::Dir(table_dir) => {
                let table_dir = std::path::absolute(table_dir)
                    .with_context(|| format!("cannot resolve {}", table_dir.display()))?;
                let url = deltalake::ensure_table_uri(table_dir.to_string_lossy())
                    .with_context(|| format!("not a table location: {}", table_dir.display()))?;
                let _guard = rt.enter();
                let store = DeltaTableBuilder::from_url(url)?.build_storage()?;
                (TableLocation::Dir(table_dir), store)
            }
            TableLocation::Store { store, url } => {
                register_s3_log_store();
                let _guard = rt.enter();
                let log_store = DeltaTableBuilder::from_url(url.clone())?
                    .with_storage_backend(store.clone(), url.clone())
                    .build_storage()?;
                (location.clone(), log_store)
            }
        };
        Ok(DeltaLog {
            location,
            log_store,
            rt,
            state: Mutex::new(None),
            retries: AtomicU64::new(0),
            replans: AtomicU64::new(0),
        })
    }

    /// Creates the log (version 0: protocol and metadata) for a table whose files have this
    /// Arrow schema, partitioned by these columns in this order (`["dt", "hour"]`,
    /// `["month"]`, or none), unless the table already has a log, which is then opened as it
    /// is (also when another writer creates it at the same moment).
    pub fn create(
        table_dir: &Path,
        schema: &Schema,
        partition_cols: &[&str],
    ) -> anyhow::Result<DeltaLog> {
        Self::create_at(
            &TableLocation::Dir(table_dir.to_path_buf()),
            schema,
            partition_cols,
        )
    }

    /// [`DeltaLog::create`] for a table directory or a table in an object store.
    pub fn create_at(
        location: &TableLocation,
        schema: &Schema,
        partition_cols: &[&str],
    ) -> anyhow::Result<DeltaLog> {
        check_no_null_type(schema)?;
        let mut fields: Vec<StructField> = delta_schema(schema)?.fields().cloned().collect();
        for p in partition_cols {
            if schema.field_with_name(p).is_ok() {
                bail!("the files have a column {p}, which is also a partition column");
            }
            fields.push(StructField::nullable(*p, partition_type(p)));
        }
        let table_schema = StructType::try_new(fields)?;
        let log = Self::connect(location)?;
        let protocol = protocol_for(&table_schema, None)?;
        let metadata = new_metadata(&table_schema, partition_cols)?;
        let operation = DeltaOperation::Create {
            mode: SaveMode::ErrorIfExists,
            location: log.log_store.root_url().clone(),
            protocol: protocol.clone(),
            metadata: metadata.clone(),
        };
        let data = deltalake::kernel::transaction::CommitData::new(
            vec![Action::Protocol(protocol), Action::Metadata(metadata)],
            operation,
            HashMap::new(),
            Vec::new(),
        );
        let bytes = data.get_bytes()?;
        let written = log.rt.block_on(log.log_store.write_commit_entry(
            0,
            CommitOrBytes::LogBytes(bytes),
            uuid::Uuid::new_v4(),
        ));
        match written {
            Ok(()) | Err(TransactionError::VersionAlreadyExists(0)) => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot create the Delta log of {}", log.location))
            }
        }
        // An existing table must be partitioned the same way.
        let existing = log.with_state(|s| Ok(s.metadata().partition_columns().to_vec()))?;
        if existing != partition_cols {
            bail!(
                "the Delta table {} is partitioned by {existing:?}, not {partition_cols:?}",
                log.location
            );
        }
        Ok(log)
    }

    /// How much the commits of this log raced other writers so far.
    pub fn contention(&self) -> Contention {
        Contention {
            retries: self.retries.load(Ordering::Relaxed),
            replans: self.replans.load(Ordering::Relaxed),
        }
    }

    /// Where the table is.
    pub fn location(&self) -> &TableLocation {
        &self.location
    }

    /// The version of the latest snapshot.
    pub fn version(&self) -> anyhow::Result<i64> {
        self.with_state(|s| Ok(s.version() as i64))
    }

    /// The table's Delta schema (file columns, then partition columns).
    pub fn schema(&self) -> anyhow::Result<StructType> {
        self.with_state(|s| Ok(s.schema().as_ref().clone()))
    }

    /// One commit adding these files (blind append, `dataChange=true`), preceded in the same
    /// commit by a metadata update when `schema` has columns the table lacks (and a protocol
    /// upgrade when they need one). `app` goes into the commit's `userMetadata` (shown by
    /// Spark's `DESCRIBE HISTORY`). Returns the committed version (the current one when there
    /// is nothing to commit: no files and no new columns).
    pub fn append(&self, files: &[NewFile], schema: &Schema, app: &str) -> anyhow::Result<i64> {
        check_no_null_type(schema)?;
        let incoming = delta_schema(schema)?;
        for f in files {
            check_relative(&f.path)?;
        }
        self.run(app, |state| {
            let mut actions = Vec::new();
            let current = state.schema();
            if let Some(merged) = merge_schema(&current, &incoming)? {
                let protocol = protocol_for(&merged, Some(state.protocol()))?;
                if &protocol != state.protocol() {
                    actions.push(Action::Protocol(protocol));
                }
                actions.push(Action::Metadata(with_schema(state.metadata(), &merged)?));
            }
            let partition_cols = state.metadata().partition_columns();
            let now = chrono::Utc::now().timestamp_millis();
            for f in files {
                actions.push(Action::Add(Add {
                    path: f.path.clone(),
                    partition_values: partition_values(f, partition_cols)?,
                    size: f.size as i64,
                    modification_time: now,
                    data_change: true,
                    stats: f.stats.as_ref().map(FileStats::to_json),
                    ..Default::default()
                }));
            }
            if actions.is_empty() {
                return Ok(None);
            }
            let blind_append = actions.iter().all(|a| matches!(a, Action::Add(_)));
            Ok(Some(Plan {
                actions,
                operation: DeltaOperation::Write {
                    mode: SaveMode::Append,
                    partition_by: (!partition_cols.is_empty()).then(|| partition_cols.to_vec()),
                    predicate: None,
                },
                blind_append,
            }))
        })
    }

    /// One commit replacing `removed` by `added` without changing the data (compaction:
    /// `dataChange=false` on both sides). Fails when one of `removed` is no longer in the table
    /// (a retention run removed it meanwhile); then nothing is committed and the caller should
    /// delete its merged files.
    pub fn replace(&self, removed: &[String], added: &[NewFile], app: &str) -> anyhow::Result<i64> {
        for f in added {
            check_relative(&f.path)?;
        }
        let target_size = added.iter().map(|f| f.size as i64).max().unwrap_or(0);
        self.run(app, |state| {
            let live = live_files(state);
            let mut actions = Vec::new();
            for path in removed {
                let Some(view) = live.get(path.as_str()) else {
                    bail!("cannot replace {path}: it is not (or no longer) in the Delta table");
                };
                actions.push(Action::Remove(view.clone().into_remove(false)));
            }
            let partition_cols = state.metadata().partition_columns();
            let now = chrono::Utc::now().timestamp_millis();
            for f in added {
                actions.push(Action::Add(Add {
                    path: f.path.clone(),
                    partition_values: partition_values(f, partition_cols)?,
                    size: f.size as i64,
                    modification_time: now,
                    data_change: false,
                    stats: f.stats.as_ref().map(FileStats::to_json),
                    ..Default::default()
                }));
            }
            if actions.is_empty() {
                return Ok(None);
            }
            Ok(Some(Plan {
                actions,
                operation: DeltaOperation::Optimize {
                    predicate: None,
                    target_size,
                },
                blind_append: false,
            }))
        })
    }

    /// One commit removing files (retention: `dataChange=true`). Files that are not in the
    /// table are skipped; when none is left, nothing is committed and the current version is
    /// returned. The files stay on disk: deleting them later is the caller's.
    pub fn remove(&self, removed: &[String], app: &str) -> anyhow::Result<i64> {
        self.run(app, |state| {
            let live = live_files(state);
            let actions: Vec<Action> = removed
                .iter()
                .filter_map(|p| live.get(p.as_str()))
                .map(|f| Action::Remove(f.clone().into_remove(true)))
                .collect();
            if actions.is_empty() {
                return Ok(None);
            }
            Ok(Some(Plan {
                actions,
                operation: DeltaOperation::Delete { predicate: None },
                blind_append: false,
            }))
        })
    }

    /// The files of the latest snapshot (paths relative to the table directory), sorted.
    pub fn files(&self) -> anyhow::Result<Vec<String>> {
        self.with_state(|s| {
            let mut v: Vec<String> = s.log_data().iter().map(|f| f.path().into_owned()).collect();
            v.sort();
            Ok(v)
        })
    }

    /// The number of records of the latest snapshot, from the files' statistics (`None` when
    /// a file has none).
    pub fn num_records(&self) -> anyhow::Result<Option<u64>> {
        self.with_state(|s| {
            Ok(s.log_data()
                .iter()
                .map(|f| f.num_records().map(|n| n as u64))
                .sum())
        })
    }

    /// Runs `f` on the latest snapshot.
    fn with_state<T>(
        &self,
        f: impl FnOnce(&DeltaTableState) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.refresh(&mut guard)?;
        f(guard.as_ref().expect("refreshed"))
    }

    /// Brings the cached snapshot to the latest version (reads only the new commits).
    fn refresh(&self, state: &mut Option<DeltaTableState>) -> anyhow::Result<()> {
        let store = self.log_store.as_ref();
        let result = self.rt.block_on(async {
            match state.as_mut() {
                Some(s) => s.update(store, None).await,
                None => {
                    *state = Some(DeltaTableState::try_new(store, None).await?);
                    Ok(())
                }
            }
        });
        if result.is_err() {
            // Start from scratch next time (e.g. after log cleanup removed what we had read).
            *state = None;
        }
        result.with_context(|| format!("cannot read the Delta log of {}", self.location))
    }

    /// Plans against the latest snapshot and commits; replans from a fresh snapshot when
    /// deltalake reports a conflict it could not resolve.
    fn run(
        &self,
        app: &str,
        mut plan: impl FnMut(&DeltaTableState) -> anyhow::Result<Option<Plan>>,
    ) -> anyhow::Result<i64> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.refresh(&mut guard)?;
            let state = guard.as_ref().expect("refreshed");
            let Some(Plan {
                actions,
                operation,
                blind_append,
            }) = plan(state)?
            else {
                return Ok(state.version() as i64);
            };
            let mut info: HashMap<String, Value> = HashMap::new();
            info.insert("userMetadata".into(), json!(app));
            info.insert("isBlindAppend".into(), json!(blind_append));
            info.insert("readVersion".into(), json!(state.version()));
            let properties = CommitProperties::default().with_metadata(info);
            let result = self.rt.block_on(async {
                CommitBuilder::from(properties)
                    .with_actions(actions)
                    .build(Some(state), self.log_store.clone(), operation)
                    .await
            });
            match result {
                Ok(done) => {
                    self.retries
                        .fetch_add(done.metrics.num_retries, Ordering::Relaxed);
                    return Ok(done.version() as i64);
                }
                Err(e) if retryable(&e) && attempt < MAX_ATTEMPTS => {
                    self.replans.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("cannot commit to the Delta log of {}", self.location)
                    })
                }
            }
        }
    }
}

/// Conflicts deltalake did not resolve, which a fresh plan can.
fn retryable(e: &DeltaTableError) -> bool {
    matches!(
        e,
        DeltaTableError::Transaction {
            source: TransactionError::CommitConflict(_) | TransactionError::MaxCommitAttempts(_)
        } | DeltaTableError::VersionAlreadyExists(_)
    )
}

/// A live file of a snapshot, enough to write its removal.
#[derive(Clone)]
struct LiveFile {
    path: String,
    size: i64,
    partition_values: HashMap<String, Option<String>>,
}

impl LiveFile {
    fn into_remove(self, data_change: bool) -> Remove {
        Remove {
            path: self.path,
            data_change,
            deletion_timestamp: Some(chrono::Utc::now().timestamp_millis()),
            extended_file_metadata: Some(true),
            partition_values: Some(self.partition_values),
            size: Some(self.size),
            ..Default::default()
        }
    }
}

fn live_files(state: &DeltaTableState) -> HashMap<String, LiveFile> {
    state
        .log_data()
        .iter()
        .map(|f| {
            let path = f.path().into_owned();
            let live = LiveFile {
                path: path.clone(),
                size: f.size(),
                partition_values: f.partition_values_map(),
            };
            (path, live)
        })
        .collect()
}

/// A file's partition values for its add action: exactly the table's partition columns,
/// integers in their canonical form (`hour=07` → `7`).
fn partition_values(
    f: &NewFile,
    partition_cols: &[String],
) -> anyhow::Result<HashMap<String, Option<String>>> {
    let given: BTreeSet<&String> = f.partition_values.keys().collect();
    let wanted: BTreeSet<&String> = partition_cols.iter().collect();
    if given != wanted {
        bail!(
            "{}: partition values for {given:?}, but the table is partitioned by {partition_cols:?}",
            f.path
        );
    }
    partition_cols
        .iter()
        .map(|c| {
            let v = f.partition_values[c].clone();
            let v = match (v, partition_type(c)) {
                (Some(s), DataType::Primitive(deltalake::kernel::PrimitiveType::Integer)) => Some(
                    s.parse::<i32>()
                        .with_context(|| format!("{}: {c}={s} is not an integer", f.path))?
                        .to_string(),
                ),
                (v, _) => v,
            };
            Ok((c.clone(), v))
        })
        .collect()
}

/// Refuses absolute paths, `..` and empty paths: the log holds paths relative to the table.
fn check_relative(path: &str) -> anyhow::Result<()> {
    let p = Path::new(path);
    if path.is_empty()
        || path.contains('\\')
        || p.components().any(|c| !matches!(c, Component::Normal(_)))
    {
        bail!("{path:?} is not a path relative to the table directory");
    }
    Ok(())
}

/// The table schema widened by the columns of `incoming` it lacks (`None` when it has them
/// all). Columns keep their order and new ones go last, after the partition columns too (Delta
/// finds partition columns by name, wherever they are in the schema).
fn merge_schema(table: &StructType, incoming: &StructType) -> anyhow::Result<Option<StructType>> {
    let merged = merge_struct(table, incoming, "")?;
    Ok((merged != *table).then_some(merged))
}

fn merge_struct(table: &StructType, incoming: &StructType, at: &str) -> anyhow::Result<StructType> {
    let mut fields: Vec<StructField> = table.fields().cloned().collect();
    for f in incoming.fields() {
        let path = format!("{at}{}", f.name());
        match fields.iter().position(|t| t.name() == f.name()) {
            Some(i) => {
                let t = merge_type(fields[i].data_type(), f.data_type(), &path)?;
                if &t != fields[i].data_type() {
                    fields[i] = StructField::new(f.name(), t, true)
                        .with_metadata(fields[i].metadata().clone());
                }
            }
            None => {
                if let Some(t) = fields
                    .iter()
                    .find(|t| t.name().eq_ignore_ascii_case(f.name()))
                {
                    bail!(
                        "column {path} differs from the table's {} only in case, \
                         which Delta readers cannot tell apart",
                        t.name()
                    );
                }
                fields.push(f.clone());
            }
        }
    }
    Ok(StructType::try_new(fields)?)
}

fn merge_type(table: &DataType, incoming: &DataType, path: &str) -> anyhow::Result<DataType> {
    Ok(match (table, incoming) {
        (a, b) if a == b => a.clone(),
        (DataType::Struct(a), DataType::Struct(b)) => {
            DataType::Struct(Box::new(merge_struct(a, b, &format!("{path}."))?))
        }
        (DataType::Array(a), DataType::Array(b)) => ArrayType::new(
            merge_type(a.element_type(), b.element_type(), &format!("{path}[]"))?,
            true,
        )
        .into(),
        (DataType::Map(a), DataType::Map(b)) if a.key_type() == b.key_type() => MapType::new(
            a.key_type().clone(),
            merge_type(a.value_type(), b.value_type(), &format!("{path}{{}}"))?,
            true,
        )
        .into(),
        (a, b) => bail!(
            "column {path} is {} in the Delta table but {} in the new files; \
             Delta cannot change a column's type in place",
            type_name(a),
            type_name(b)
        ),
    })
}

fn type_name(t: &DataType) -> String {
    serde_json::to_string(t).unwrap_or_else(|_| format!("{t:?}"))
}

fn contains_ntz(t: &DataType) -> bool {
    match t {
        DataType::Primitive(deltalake::kernel::PrimitiveType::TimestampNtz) => true,
        DataType::Struct(s) => s.fields().any(|f| contains_ntz(f.data_type())),
        DataType::Array(a) => contains_ntz(a.element_type()),
        DataType::Map(m) => contains_ntz(m.key_type()) || contains_ntz(m.value_type()),
        _ => false,
    }
}

/// The protocol a table with this schema needs, keeping what `current` already has: (1, 1)
/// without table features for a new table, or (3, 7) with the `timestampNtz` reader and writer
/// feature when a column needs it (a legacy protocol upgraded to table features lists the
/// features its versions implied, as Spark does).
fn protocol_for(schema: &StructType, current: Option<&Protocol>) -> anyhow::Result<Protocol> {
    let mut v = match current {
        Some(p) => serde_json::to_value(p)?,
        None => json!({"minReaderVersion": 1, "minWriterVersion": 1}),
    };
    if schema.fields().any(|f| contains_ntz(f.data_type())) {
        let o = v.as_object_mut().context("protocol is not an object")?;
        let version =
            |o: &Map<String, Value>, k: &str| o.get(k).and_then(Value::as_i64).unwrap_or(1);
        let reader = version(o, "minReaderVersion");
        if reader < 3 {
            let implied: &[&str] = if reader == 2 { &["columnMapping"] } else { &[] };
            o.insert("minReaderVersion".into(), json!(3));
            o.insert("readerFeatures".into(), json!(implied));
        }
        let writer = version(o, "minWriterVersion");
        if writer < 7 {
            const LEGACY: [&str; 7] = [
                "appendOnly",
                "invariants",
                "checkConstraints",
                "changeDataFeed",
                "generatedColumns",
                "columnMapping",
                "identityColumns",
            ];
            let implied = match writer {
                2 => &LEGACY[..2],
                3 => &LEGACY[..3],
                4 => &LEGACY[..5],
                5 => &LEGACY[..6],
                6 => &LEGACY[..],
                _ => &[],
            };
            o.insert("minWriterVersion".into(), json!(7));
            o.insert("writerFeatures".into(), json!(implied));
        }
        for key in ["readerFeatures", "writerFeatures"] {
            let list = o
                .get_mut(key)
                .and_then(Value::as_array_mut)
                .context("protocol without its feature list")?;
            if !list.iter().any(|f| f == "timestampNtz") {
                list.push(json!("timestampNtz"));
            }
        }
    }
    Ok(serde_json::from_value(v)?)
}

/// A new table's metaData action (built through its JSON form: the kernel's type has no public
/// constructor).
fn new_metadata(schema: &StructType, partition_cols: &[&str]) -> anyhow::Result<Metadata> {
    Ok(serde_json::from_value(json!({
        "id": uuid::Uuid::new_v4().to_string(),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": serde_json::to_string(schema)?,
        "partitionColumns": partition_cols,
        "configuration": {},
        "createdTime": chrono::Utc::now().timestamp_millis(),
    }))?)
}

/// `current` with another schema; everything else (id, name, configuration...) kept.
fn with_schema(current: &Metadata, schema: &StructType) -> anyhow::Result<Metadata> {
    let mut v = serde_json::to_value(current)?;
    v["schemaString"] = json!(serde_json::to_string(schema)?);
    Ok(serde_json::from_value(v)?)
}
