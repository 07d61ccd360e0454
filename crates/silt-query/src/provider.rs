//! [`SiltTable`]: the DataFusion table provider of one lake table.
//!
//! The table's columns are its files' unified columns followed by the partition columns
//! `dt DATE` and `hour INT` (Athena-style, visible and filterable; NULL in the
//! `__HIVE_DEFAULT_PARTITION__` directory and in layouts without that level). A partition column
//! is left out when the files have a column of the same name.
//!
//! A scan:
//! 1. derives an event-time interval from the filters on the time column
//!    ([`crate::timefilter`]) and keeps only files whose partition directories or footer
//!    statistics may hold such times (files with only null times never match a time predicate);
//! 2. evaluates filters that use only `dt`/`hour` on each file's partition values;
//! 3. checks all filters against each Parquet file's column bounds from its footer
//!    ([`crate::lake::FileBounds`]) with DataFusion's pruning logic, and leaves out the files
//!    no row of which can match, unopened;
//! 4. reads the remaining Parquet files with one `DataSourceExec` (row-group statistics, page
//!    index and bloom filters prune further, with the predicates DataFusion pushes into it) and
//!    the Feather files with one `DataSourceExec` per file schema under a
//!    [`crate::adapter::ConformExec`]; all under one union.
//!
//! Predicates are evaluated inside the Parquet decoder (late materialization) when every
//! Parquet file of the table can evaluate them there ([`crate::adapter::pushdown_safe`]);
//! otherwise DataFusion's filter above the scan does it after decoding.
//!
//! Every filter is declared `Inexact`, so DataFusion still evaluates each predicate on the rows
//! read: pruning only ever skips data that cannot match.
//!
//! The files of a table are the ones found when the session was opened (a session is a snapshot
//! of the lake). A table may also carry rows that are in no file yet ([`SiltTable::with_tail`]:
//! `silt serve`'s events acknowledged since the last flush); a scan reads them from memory,
//! conformed to the table's columns, with `dt`/`hour`/`month` computed from their event time, in
//! the same union as the files, so a query sees each row exactly once whether or not it has
//! been flushed yet. Each scan notes what it selected in the query's [`crate::stats::ScanLog`].
//! Reads only the table's files.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Int32Array, StringArray, UInt64Array,
};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{project_schema, Column, DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::file_format::FileFormat as _;
use datafusion::datasource::listing::helpers::expr_applicable_for_cols;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    ArrowSource, FileGroup, FileScanConfigBuilder, FileSource, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::object_store::path::Path as ObjectPath;
use datafusion::object_store::ObjectMeta;
use datafusion::physical_optimizer::pruning::{PruningPredicateBuilder, PruningStatistics};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::ExecutionPlan;

use crate::adapter::{ConformExec, SiltExprAdapterFactory};
use crate::lake::{DataFile, FileBounds, FileFormat, TableIndex, TimeBounds};
use crate::stats::{ScanLog, ScanNote};
use crate::timefilter::time_range;
use silt_lake::remote::RemoteLake;
use silt_lake::Partitioning;

/// Name of the date partition column.
pub const DT: &str = "dt";
/// Name of the hour partition column.
pub const HOUR: &str = "hour";
/// Name of the month partition column (`YYYY-MM`), present on tables with `month=` directories.
pub const MONTH: &str = "month";

/// A lake table as a DataFusion table.
#[derive(Debug)]
pub struct SiltTable {
    index: Arc<TableIndex>,
    /// The columns of the files (and of the tail): `index`'s unified schema, widened by the
    /// tail's columns (see [`SiltTable::with_tail`]).
    file_schema: SchemaRef,
    schema: SchemaRef,
    part_fields: Vec<FieldRef>,
    /// Rows in no file yet, each batch in its own schema (see [`SiltTable::with_tail`]).
    tail: Vec<RecordBatch>,
    /// How the writer will place the tail's rows, when the table's partitioning is decided.
    tail_placed: Option<Partitioning>,
    /// Whether predicates may be evaluated inside the Parquet decoder for this table
    /// (see [`crate::adapter::pushdown_safe`]).
    pushdown_safe: bool,
}

impl SiltTable {
    /// The table of `index`'s files. Costs no time in proportion to the files (a server makes
    /// one per query): what is known of all files is kept in the index.
    pub fn new(index: Arc<TableIndex>) -> Self {
        let fs = index.file_schema.clone();
        Self::with_schema(index, fs)
    }

    /// The table of `index`'s files read as `file_schema` (the index's own, or a wider one).
    fn with_schema(index: Arc<TableIndex>, file_schema: SchemaRef) -> Self {
        let fs = &file_schema;
        // `dt` and `hour` always (null where a file has no such directory), `month` only for
        // tables partitioned by month, so other tables' `SELECT *` stays as it was.
        let part_fields: Vec<FieldRef> = [
            (DT, DataType::Date32, true),
            (HOUR, DataType::Int32, true),
            (MONTH, DataType::Utf8, index.has_month),
        ]
        .into_iter()
        .filter(|(n, _, wanted)| *wanted && fs.field_with_name(n).is_err())
        .map(|(n, t, _)| (n, t))
        .map(|(n, t)| Arc::new(Field::new(n, t, true)))
        .collect();
        let mut fields: Vec<FieldRef> = fs.fields().iter().cloned().collect();
        fields.extend(part_fields.iter().cloned());
        let schema = Arc::new(Schema::new_with_metadata(fields, fs.metadata().clone()));
        // The index knows it for its own schema; a wider one (a tail's new column, or a type
        // widened) is checked file by file.
        let pushdown_safe = if Arc::ptr_eq(fs, &index.file_schema) || *fs == index.file_schema {
            index.pushdown_safe
        } else {
            index.files.iter().all(|f| f.pushdown_safe(fs))
        };
        Self {
            index,
            file_schema,
            schema,
            part_fields,
            tail: Vec::new(),
            tail_placed: None,
            pushdown_safe,
        }
    }

    /// The table `name` as its files (`index`, `None` when it has none yet) and the rows of
    /// `tail`, which are in no file yet: the columns are the files' and the tail's unified (as
    /// files of different shapes are), so a field that so far only arrived in memory is
    /// queryable at once.
    ///
    /// `placed`: the table's partitioning, once decided (its files, or the lake's record of the
    /// table): the tail's `dt`, `hour` and `month` are then what its files will hold (null where
    /// the partitioning has no such directory), so a query's answer does not change when the
    /// rows are flushed. Undecided (a new table whose writer has not chosen yet), they are worked
    /// out from the event time as for hour partitions (`month` too, where the table has it).
    pub fn with_tail(
        name: silt_core::TableName,
        index: Option<Arc<TableIndex>>,
        tail: Vec<RecordBatch>,
        placed: Option<Partitioning>,
    ) -> Self {
        let mut schema: Option<Schema> = index.as_ref().map(|i| i.file_schema.as_ref().clone());
        for b in &tail {
            schema = Some(match schema {
                None => b.schema().as_ref().clone(),
                Some(s) if s == *b.schema() => s,
                Some(s) => silt_core::schema::unify_schemas(&s, &b.schema()),
            });
        }
        let schema = schema.unwrap_or_else(|| Schema::new(Vec::<FieldRef>::new()));
        let schema = Arc::new(Schema::new_with_metadata(
            schema
                .fields()
                .iter()
                .map(crate::lake::nullable_field)
                .collect::<Vec<_>>(),
            schema.metadata().clone(),
        ));
        let index = index.unwrap_or_else(|| {
            let time_column = silt_core::meta::time_column(&schema)
                .filter(|c| {
                    schema
                        .field_with_name(c)
                        .is_ok_and(|f| matches!(f.data_type(), DataType::Timestamp(_, _)))
                })
                .map(str::to_string);
            Arc::new(TableIndex {
                name: name.clone(),
                dir: Default::default(),
                files: Vec::new(),
                file_schema: schema.clone(),
                time_column,
                remote: None,
                has_month: placed == Some(Partitioning::Month),
                pushdown_safe: true,
                footers: None,
            })
        });
        let mut t = Self::with_schema(index, schema);
        t.tail = tail;
        t.tail_placed = placed;
        t
    }

    /// Rows of the table that are in no file yet.
    pub fn tail_rows(&self) -> usize {
        self.tail.iter().map(RecordBatch::num_rows).sum()
    }

    /// The tail as one in-memory scan of the table's columns (see the module documentation).
    fn tail_exec(
        &self,
        projection: Option<&Vec<usize>>,
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let file_schema = self.file_schema.clone();
        let time = self.index.time_column.as_deref();
        let mut batches = Vec::with_capacity(self.tail.len());
        for b in &self.tail {
            let b = silt_core::schema::conform(b, &file_schema)?;
            let mut cols = b.columns().to_vec();
            let ts = time.and_then(|c| b.column_by_name(c)).cloned();
            for p in &self.part_fields {
                let placed = self.tail_placed;
                cols.push(tail_partition_column(
                    p.name(),
                    ts.as_ref(),
                    b.num_rows(),
                    placed,
                )?);
            }
            batches.push(RecordBatch::try_new(self.schema.clone(), cols)?);
        }
        let src = datafusion::datasource::memory::MemorySourceConfig::try_new(
            &[batches],
            self.schema.clone(),
            projection.cloned(),
        )?
        .with_limit(limit);
        Ok(DataSourceExec::from_data_source(src))
    }

    fn partition_values(&self, f: &DataFile) -> Vec<ScalarValue> {
        self.part_fields
            .iter()
            .map(|p| match p.name().as_str() {
                DT => ScalarValue::Date32(f.dt),
                MONTH => ScalarValue::Utf8(f.month.clone()),
                _ => ScalarValue::Int32(f.hour),
            })
            .collect()
    }

    /// The files a scan with `filters` must read, and the footers it read for them.
    fn select_files(&self, state: &dyn Session, filters: &[Expr]) -> Result<Selection<'_>> {
        let files = &self.index.files;
        let mut keep = vec![true; files.len()];
        let range = self
            .index
            .time_column
            .as_deref()
            .and_then(|tc| time_range(filters, tc));
        let in_range = |f: &DataFile| match (range, f.time) {
            (None, _) => true,
            (Some(r), TimeBounds::Unknown) => !r.is_empty(),
            (Some(_), TimeBounds::AllNull) => false,
            (Some(r), TimeBounds::Range { lo, hi }) => r.overlaps(lo, hi),
        };
        for (k, f) in keep.iter_mut().zip(files) {
            *k = in_range(f);
        }
        let names: Vec<&str> = self.part_fields.iter().map(|f| f.name().as_str()).collect();
        let part_filters: Vec<Expr> = filters
            .iter()
            .filter(|e| !names.is_empty() && expr_applicable_for_cols(&names, e))
            .filter(|e| !e.column_refs().is_empty())
            .cloned()
            .collect();
        if let Some(pred) = conjunction(part_filters) {
            // Pruning is an optimization: a predicate that cannot be evaluated on the partition
            // values alone (unexpected expression) just prunes nothing; DataFusion still applies
            // it to every row.
            if let Ok(matches) = self.eval_on_partitions(state, pred) {
                for (i, k) in keep.iter_mut().enumerate() {
                    *k &= matches.is_valid(i) && matches.value(i);
                }
            }
        }
        let mut selected: Vec<Cow<'_, DataFile>> = files
            .iter()
            .zip(keep)
            .filter_map(|(f, k)| k.then_some(Cow::Borrowed(f)))
            .collect();
        // Footers deferred when the lake was opened (crate::lake): read now, for the files the
        // filters above kept only; their statistics may narrow the time bounds further.
        let deferred = selected.iter().filter(|f| f.deferred).count();
        let mut read = (0, 0);
        if deferred > 0 {
            selected = self
                .index
                .read_deferred(selected)
                .map_err(|e| DataFusionError::External(e.into()))?;
            let cache = state.runtime_env().cache_manager.get_file_metadata_cache();
            for f in &selected {
                if let (Cow::Owned(f), Some(md)) = (f, &f.footer) {
                    read.0 += 1;
                    read.1 += f.row_groups as u64;
                    seed_footer(cache.as_ref(), self.index.remote.as_deref(), f, md)?;
                }
            }
            selected.retain(|f| in_range(f));
        }
        if let Some(pred) = conjunction(filters.to_vec()) {
            // An optimization as well: a predicate the pruner cannot use prunes nothing.
            let refs: Vec<&DataFile> = selected.iter().map(|f| f.as_ref()).collect();
            if let Ok(keep) = self.prune_by_bounds(state, pred, &refs) {
                let mut keep = keep.into_iter();
                selected.retain(|_| keep.next().unwrap_or(true));
            }
        }
        Ok(Selection {
            files: selected,
            footers_read: read.0,
            row_groups_read: read.1,
        })
    }

    /// Takes out of `keep` the files whose [`FileBounds`] (their footers' min/max and null
    /// counts) show that no row can satisfy `pred`, with DataFusion's own pruning logic (the
    /// one that skips row groups inside a file): a needle query over thousands of small files
    /// opens only those that may hold it.
    /// Which of `files` may hold a row matching `pred`.
    fn prune_by_bounds(
        &self,
        state: &dyn Session,
        pred: Expr,
        files: &[&DataFile],
    ) -> Result<Vec<bool>> {
        let df_schema = DFSchema::try_from(self.schema.clone())?;
        let expr = state.create_physical_expr(pred, &df_schema)?;
        let Some(pruning) = PruningPredicateBuilder::new()
            .with_file_schema(self.schema.clone())
            .with_max_in_list_size(state.config_options().execution.parquet.max_in_list_size)
            .build(expr)
        else {
            return Ok(vec![true; files.len()]); // nothing to prune with
        };
        let stats = Bounds {
            files: files.to_vec(),
            schema: &self.schema,
            partition: &self.part_fields,
        };
        pruning.prune(&stats)
    }

    /// Evaluates `pred` (using only partition columns) once over a batch of every file's
    /// partition values, as DataFusion's ListingTable does file by file.
    fn eval_on_partitions(&self, state: &dyn Session, pred: Expr) -> Result<BooleanArray> {
        let files = &self.index.files;
        let schema = Arc::new(Schema::new(self.part_fields.clone()));
        let cols: Vec<ArrayRef> = self
            .part_fields
            .iter()
            .map(|p| -> ArrayRef {
                match p.name().as_str() {
                    DT => Arc::new(files.iter().map(|f| f.dt).collect::<Date32Array>()),
                    MONTH => Arc::new(
                        files
                            .iter()
                            .map(|f| f.month.as_deref())
                            .collect::<StringArray>(),
                    ),
                    _ => Arc::new(files.iter().map(|f| f.hour).collect::<Int32Array>()),
                }
            })
            .collect();
        let batch = RecordBatch::try_new(schema.clone(), cols)?;
        let df_schema = DFSchema::try_from(schema)?;
        let expr = state.create_physical_expr(pred, &df_schema)?;
        let result = expr.evaluate(&batch)?.into_array(files.len())?;
        result
            .as_boolean_opt()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan("partition predicate is not boolean".into()))
    }

    /// The store the table's files are read from (registered with the session by
    /// [`crate::session`] for a lake in an object store).
    fn store_url(&self) -> Result<ObjectStoreUrl> {
        match &self.index.remote {
            None => Ok(ObjectStoreUrl::local_filesystem()),
            Some(r) => ObjectStoreUrl::parse(r.store_url()),
        }
    }

    fn partitioned_file(&self, f: &DataFile) -> Result<PartitionedFile> {
        let meta = object_meta(self.index.remote.as_deref(), f)?;
        Ok(PartitionedFile::new_from_meta(meta).with_partition_values(self.partition_values(f)))
    }

    async fn parquet_exec(
        &self,
        state: &dyn Session,
        files: &[&DataFile],
        projection: Option<&Vec<usize>>,
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let table_schema = TableSchema::builder(self.file_schema.clone())
            .with_table_partition_cols(self.part_fields.clone())
            .build();
        let mut opts = state.table_options().parquet.clone();
        opts.global.pushdown_filters = self.pushdown_safe;
        let source = ParquetSource::new(table_schema).with_table_parquet_options(opts.clone());
        let pfs = files
            .iter()
            .map(|f| self.partitioned_file(f))
            .collect::<Result<Vec<_>>>()?;
        let groups = FileGroup::new(pfs).split_files(state.config().target_partitions());
        let conf = FileScanConfigBuilder::new(self.store_url()?, Arc::new(source))
            .with_file_groups(groups)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .with_expr_adapter(Some(Arc::new(SiltExprAdapterFactory)))
            .build();
        // ParquetFormat adds the session's metadata cache and reader factory.
        ParquetFormat::default()
            .with_options(opts)
            .create_physical_plan(state, conf)
            .await
    }

    fn feather_execs(
        &self,
        state: &dyn Session,
        files: &[&DataFile],
        projected: &SchemaRef,
        limit: Option<usize>,
    ) -> Result<Vec<Arc<dyn ExecutionPlan>>> {
        // Group identically-shaped files: DataFusion's Arrow source reads each file with the
        // schema it is given, so each shape gets its own scan.
        let mut groups: BTreeMap<String, (SchemaRef, Vec<&DataFile>)> = BTreeMap::new();
        for f in files {
            let key = format!("{:?}", f.schema.fields());
            groups
                .entry(key)
                .or_insert_with(|| (f.schema.clone(), Vec::new()))
                .1
                .push(f);
        }
        let mut out = Vec::new();
        for (_, (schema, files)) in groups {
            let ts = TableSchema::builder(schema)
                .with_table_partition_cols(self.part_fields.clone())
                .build();
            let full = ts.table_schema().clone();
            let indices: Vec<usize> = projected
                .fields()
                .iter()
                .filter_map(|f| full.index_of(f.name()).ok())
                .collect();
            let pfs = files
                .iter()
                .map(|f| self.partitioned_file(f))
                .collect::<Result<Vec<_>>>()?;
            let groups = FileGroup::new(pfs).split_files(state.config().target_partitions());
            let mut source: Arc<dyn FileSource> = Arc::new(ArrowSource::new_file_source(ts));
            // A local lake's Feather files were checked when the index opened them.
            if self.index.remote.is_some() {
                source = Arc::new(crate::feather_check::CheckedSource(source));
            }
            let conf = FileScanConfigBuilder::new(self.store_url()?, source)
                .with_file_groups(groups)
                .with_projection_indices(Some(indices))?
                .with_limit(limit)
                .build();
            let scan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(conf);
            out.push(Arc::new(ConformExec::new(scan, projected.clone())) as _);
        }
        Ok(out)
    }
}

/// What [`SiltTable::select_files`] chose.
struct Selection<'a> {
    /// The files to read: the index's, or read again where their footers had been deferred.
    files: Vec<Cow<'a, DataFile>>,
    /// Deferred footers read for this scan, and the row groups they hold.
    footers_read: u64,
    row_groups_read: u64,
}

/// Puts the footer `md` of `f` into DataFusion's metadata cache, keyed as a scan asks for it
/// ([`object_meta`]), so that the scan does not read it from the store again.
pub(crate) fn seed_footer(
    cache: &datafusion::execution::cache::cache_manager::FileMetadataCache,
    remote: Option<&RemoteLake>,
    f: &DataFile,
    md: &Arc<datafusion::parquet::file::metadata::ParquetMetaData>,
) -> Result<()> {
    use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
    use datafusion::execution::cache::cache_manager::CachedFileMetadataEntry;
    let meta = object_meta(remote, f)?;
    let entry = CachedFileMetadataEntry::new(
        meta.clone(),
        Arc::new(CachedParquetMetaData::new(md.clone())),
    );
    cache.put(&meta.location, entry);
    Ok(())
}

/// The [`FileBounds`] of some files, as DataFusion's pruning reads them: one "container" per
/// file. A column is known in a file when the file has bounds for it and stores it as the
/// table's type (a file whose column has another type is read through an adaptation, so its
/// bounds would not compare), or when the file has no such column (it reads as nulls there);
/// otherwise it is unknown there, and the file is kept. Partition columns are unknown (they
/// were pruned by before).
struct Bounds<'a> {
    files: Vec<&'a DataFile>,
    schema: &'a SchemaRef,
    partition: &'a [FieldRef],
}

impl Bounds<'_> {
    /// The column's bounds in each file, `None` where unknown; `None` when unknown in all.
    fn each<T>(
        &self,
        column: &Column,
        pick: impl Fn(&FileBounds, &(ScalarValue, ScalarValue, u64)) -> T,
    ) -> Option<(Vec<Option<T>>, DataType)> {
        if self.partition.iter().any(|p| p.name() == column.name()) {
            return None;
        }
        let t = self.schema.field_with_name(column.name()).ok()?.data_type();
        let null = ScalarValue::try_from(t).ok()?;
        let out: Vec<Option<T>> = self
            .files
            .iter()
            .map(|f| {
                let b = f.bounds.as_deref()?;
                let Ok(i) = f.schema.index_of(column.name()) else {
                    return Some(pick(b, &(null.clone(), null.clone(), b.rows)));
                };
                if f.schema.field(i).data_type() != t {
                    return None;
                }
                b.columns.get(i)?.as_ref().map(|c| pick(b, c))
            })
            .collect();
        out.iter().any(Option::is_some).then(|| (out, t.clone()))
    }

    fn values(&self, column: &Column, max: bool) -> Option<ArrayRef> {
        let (v, t) = self.each(column, |_, (lo, hi, _)| if max { hi } else { lo }.clone())?;
        let null = ScalarValue::try_from(&t).ok()?;
        ScalarValue::iter_to_array(v.into_iter().map(|x| x.unwrap_or_else(|| null.clone()))).ok()
    }
}

impl PruningStatistics for Bounds<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column, false)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column, true)
    }

    fn num_containers(&self) -> usize {
        self.files.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let (v, _) = self.each(column, |_, (_, _, nulls)| *nulls)?;
        Some(Arc::new(UInt64Array::from(v)))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(UInt64Array::from(
            self.files
                .iter()
                .map(|f| f.bounds.as_ref().map(|b| b.rows))
                .collect::<Vec<_>>(),
        )))
    }

    fn contained(
        &self,
        _column: &Column,
        _values: &std::collections::HashSet<ScalarValue>,
    ) -> Option<BooleanArray> {
        None
    }
}

#[async_trait]
impl TableProvider for SiltTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // Inexact: the scan uses every filter for pruning, DataFusion re-checks every row.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let projected = project_schema(&self.schema, projection)?;
        let selection = self.select_files(state, filters)?;
        let files: Vec<&DataFile> = selection.files.iter().map(|f| f.as_ref()).collect();
        if let Some(log) = state.config().get_extension::<ScanLog>() {
            let mut note = ScanNote::new(&self.index, &files);
            note.row_groups_total += selection.row_groups_read;
            note.footers_unread = self.index.files.iter().filter(|f| f.deferred).count() as u64
                - selection.footers_read;
            log.push(note);
        }
        let (parquet, feather): (Vec<&DataFile>, Vec<&DataFile>) =
            files.iter().partition(|f| f.format == FileFormat::Parquet);
        let mut plans = Vec::new();
        if !parquet.is_empty() {
            plans.push(
                self.parquet_exec(state, &parquet, projection, limit)
                    .await?,
            );
        }
        if !feather.is_empty() {
            plans.extend(self.feather_execs(state, &feather, &projected, limit)?);
        }
        if !self.tail.is_empty() {
            plans.push(self.tail_exec(projection, limit)?);
        }
        if plans.is_empty() {
            return Ok(Arc::new(EmptyExec::new(projected)));
        }
        UnionExec::try_new(plans)
    }
}

/// The partition column `name` (`dt`, `hour` or `month`) of rows in no file yet, from their event
/// time `ts` (UTC), as the writer will place them with the partitioning `placed` (see
/// [`SiltTable::with_tail`]); null where the time is null or missing, or where `placed` has no
/// such directory.
fn tail_partition_column(
    name: &str,
    ts: Option<&ArrayRef>,
    rows: usize,
    placed: Option<Partitioning>,
) -> Result<ArrayRef> {
    use arrow::datatypes::TimeUnit;
    let has = match placed {
        None => true,
        Some(Partitioning::Hour) => name == DT || name == HOUR,
        Some(Partitioning::Day) => name == DT,
        Some(Partitioning::Month) => name == MONTH,
        Some(Partitioning::None) => false,
    };
    let ts = ts.filter(|_| has);
    let micros: Vec<Option<i64>> = match ts.map(|a| (a, a.data_type().clone())) {
        Some((a, DataType::Timestamp(unit, _))) => {
            let a = arrow::compute::cast(a, &DataType::Timestamp(unit, None))?;
            let a = arrow::compute::cast(&a, &DataType::Int64)?;
            let per_us: (i64, i64) = match unit {
                TimeUnit::Second => (1_000_000, 1),
                TimeUnit::Millisecond => (1_000, 1),
                TimeUnit::Microsecond => (1, 1),
                TimeUnit::Nanosecond => (1, 1_000),
            };
            a.as_primitive::<arrow::datatypes::Int64Type>()
                .iter()
                .map(|v| v.map(|v| v.saturating_mul(per_us.0).div_euclid(per_us.1)))
                .collect()
        }
        _ => vec![None; rows],
    };
    const DAY: i64 = 86_400_000_000;
    Ok(match name {
        DT => Arc::new(Date32Array::from_iter(
            micros.iter().map(|m| m.map(|m| m.div_euclid(DAY) as i32)),
        )),
        HOUR => Arc::new(Int32Array::from_iter(
            micros
                .iter()
                .map(|m| m.map(|m| (m.rem_euclid(DAY) / 3_600_000_000) as i32)),
        )),
        _ => Arc::new(StringArray::from_iter(micros.iter().map(|m| {
            m.and_then(chrono::DateTime::from_timestamp_micros)
                .map(|d| d.format("%Y-%m").to_string())
        }))),
    })
}

/// The object DataFusion reads for `f`: its path in the local filesystem store, or its key in
/// the lake's object store. Also the key of DataFusion's metadata cache
/// ([`crate::session`] seeds it with footers already read).
pub(crate) fn object_meta(remote: Option<&RemoteLake>, f: &DataFile) -> Result<ObjectMeta> {
    let location = match remote {
        // Index paths are canonical already (the lake root is canonicalized when it is
        // scanned): no `realpath` per file per query.
        None => ObjectPath::from_absolute_path(&f.path)
            .map_err(|e| DataFusionError::External(Box::new(e)))?,
        Some(r) => r
            .key_of(&f.path)
            .map_err(|e| DataFusionError::External(e.into()))?,
    };
    Ok(ObjectMeta {
        location,
        last_modified: f.modified.into(),
        size: f.size,
        e_tag: None,
        version: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::TimestampMicrosecondArray;

    #[test]
    fn a_tails_partition_columns_are_what_its_files_will_hold() {
        // 2024-03-24 17:00:00 UTC, and a null time.
        let ts: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![Some(1_711_299_600_000_000), None])
                .with_timezone("UTC"),
        );
        let col = |name: &str, placed| {
            let a = tail_partition_column(name, Some(&ts), 2, placed).unwrap();
            let f = arrow::util::display::ArrayFormatter::try_new(a.as_ref(), &Default::default())
                .unwrap();
            let v = f.value(0).to_string();
            v
        };
        use Partitioning as P;
        // Undecided: from the time, as for hour partitions.
        assert_eq!(
            (col(DT, None), col(HOUR, None)),
            ("2024-03-24".into(), "17".into())
        );
        assert_eq!(
            (col(DT, Some(P::Hour)), col(HOUR, Some(P::Hour))),
            ("2024-03-24".into(), "17".into())
        );
        assert_eq!(
            (col(DT, Some(P::Day)), col(HOUR, Some(P::Day))),
            ("2024-03-24".into(), "".into())
        );
        assert_eq!(
            (col(DT, Some(P::Month)), col(MONTH, Some(P::Month))),
            ("".into(), "2024-03".into())
        );
        assert_eq!(
            (col(DT, Some(P::None)), col(HOUR, Some(P::None))),
            ("".into(), "".into())
        );
        let a = tail_partition_column(DT, Some(&ts), 2, Some(P::Day)).unwrap();
        assert!(a.is_null(1));
    }
}
