//! Opening a lake as a DataFusion session and running SQL on it.
//!
//! [`SiltSession::open`] walks the lake once ([`crate::lake::LakeIndex`]), registers every table
//! `module.type` as table `type` in SQL schema `module` of the default catalog (so
//! `FROM zeek.conn` works) and registers [`crate::cidr`]'s `cidr_contains`. Parquet pruning by
//! row-group statistics, the page index and bloom filters is switched on explicitly; filter
//! pushdown into the Parquet decoder (late materialization) is decided per table by the table
//! provider. `information_schema` is enabled (`SHOW TABLES`, `SHOW COLUMNS`).
//!
//! [`SiltSession::query`] plans and runs one statement and returns its rows with
//! [`ScanStats`]; [`SiltSession::query_to_writer`] streams the rows to a writer instead. Each
//! query gets its own [`ScanLog`] so that concurrent queries on one session keep their
//! statistics apart.
//!
//! Touches the lake directory (read only) and nothing else.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use arrow::datatypes::{Field, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::physical_plan::ExecutionPlan;
use silt_core::TableName;

use crate::lake::LakeIndex;
use crate::output::{write_results_with_schema, OutputFormat, ResultWriter};
use crate::provider::SiltTable;
use crate::stats::{ScanLog, ScanStats};
use futures::StreamExt;

/// A multi-threaded tokio runtime for DataFusion (what a command runs its queries on).
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// The partitioning the lake's record of `table` holds (a local lake's; `None` without one).
fn recorded_partitioning(index: &LakeIndex, table: &TableName) -> Option<silt_lake::Partitioning> {
    if index.remote.is_some() {
        return None;
    }
    silt_lake::granularity::read_record(&index.root, table)
        .ok()
        .flatten()
        .and_then(|r| r.partitioning().ok())
}

/// Opens the lake at `lake` for SQL.
pub async fn open(lake: &Path) -> anyhow::Result<SiltSession> {
    SiltSession::open(lake).await
}

/// Opens the lake at `lake` for the one query `sql`: only the tables it names are indexed
/// ([`tables_named`]), so a query over one table of a lake of many (above all one in an object
/// store, where each footer is a request the first time) reads no other table's footers.
pub async fn open_for(lake: &Path, sql: &str) -> anyhow::Result<SiltSession> {
    SiltSession::open_tables(lake, tables_named(sql)).await
}

/// Whether `e` is a lake file gone when the query went to read it: listed, then removed by a
/// `silt compact` (its inputs, once the merged file is in place) or a `silt retain` running in
/// another process. The lake listed again is whole, so the query can run again.
pub fn lost_a_file(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let s = c.to_string();
        s.contains("Object at location") && s.contains("not found")
    })
}

#[cfg(test)]
mod retry_tests {
    use super::*;

    #[test]
    fn only_lost_files_run_again_and_only_until_given_out_or_late() {
        let lost = || anyhow::anyhow!("Object at location /l/t/a.parquet not found: gone");
        let mut r = LostFileRetry::within(std::time::Duration::from_secs(60));
        assert!(r.after(lost(), false).is_ok());
        let e = r
            .after(anyhow::anyhow!("division by zero"), false)
            .unwrap_err();
        assert_eq!(format!("{e:#}"), "division by zero");
        let e = r.after(lost(), true).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("a file of the lake was removed"),
            "{e:#}"
        );
        let mut late = LostFileRetry::within(std::time::Duration::ZERO);
        assert!(late.after(lost(), false).is_err());
    }
}

/// When a query that lost a file ([`lost_a_file`]) runs again, for callers that block (the
/// CLI's `query` and `export`; a server pins the files its queries read instead). The lake
/// listed again is whole, so the query can run again on a fresh session, as long as nothing of
/// its result has been given out. A compaction commits a group every few milliseconds, so a
/// query may have to wait until it is done: for up to a minute, with pauses that grow from
/// 20 ms to a second.
#[derive(Debug)]
pub struct LostFileRetry {
    started: std::time::Instant,
    pause: std::time::Duration,
    limit: std::time::Duration,
}

impl Default for LostFileRetry {
    fn default() -> Self {
        Self::within(std::time::Duration::from_secs(60))
    }
}

impl LostFileRetry {
    /// Runs again for at most `limit` from now.
    pub fn within(limit: std::time::Duration) -> Self {
        Self {
            started: std::time::Instant::now(),
            pause: std::time::Duration::from_millis(20),
            limit,
        }
    }

    /// After a run failed with `e` (`delivered`: part of its result was given out already):
    /// `Ok(())`, after the pause, when the caller should open a fresh session and run the query
    /// again; otherwise `e`, with what happened and what to do when it was a lost file.
    pub fn after(&mut self, e: anyhow::Error, delivered: bool) -> anyhow::Result<()> {
        if !lost_a_file(&e) {
            return Err(e);
        }
        if delivered || self.started.elapsed() >= self.limit {
            return Err(e.context(
                "a file of the lake was removed while the query read it (a `silt compact` or \
                 `silt retain` running?): run the query again",
            ));
        }
        std::thread::sleep(self.pause);
        self.pause = (self.pause * 2).min(std::time::Duration::from_secs(1));
        Ok(())
    }
}

/// DataFusion's "table 'datafusion.zeek.nope' not found" said as what is wrong and what there
/// is instead: `tables` (`Err` when they could not be listed) in `lake`. Other errors are
/// returned as they are.
pub fn explain_missing_table(
    e: anyhow::Error,
    lake: &str,
    tables: anyhow::Result<Vec<TableName>>,
) -> anyhow::Error {
    let msg = format!("{e:#}");
    let Some(name) = msg
        .split("table '")
        .nth(1)
        .and_then(|r| r.split_once("' not found"))
        .map(|(n, _)| n.trim_start_matches("datafusion.").to_string())
    else {
        return e;
    };
    if let Ok(t) = &tables {
        // `"zeek.conn"` in double quotes is one identifier, a table of the default schema.
        if let Some(quoted) = name
            .strip_prefix("public.")
            .filter(|q| t.iter().any(|t| t.to_string() == *q))
        {
            let (module, kind) = quoted.split_once('.').unwrap_or((quoted, ""));
            return anyhow::anyhow!(
                "no table \"{quoted}\" in the lake {lake}: in double quotes, {quoted} is one \
name; the table is {quoted} without quotes, or \"{module}\".\"{kind}\" quoted part by part"
            );
        }
        if t.iter().any(|t| t.to_string() == name) {
            // Its directory exists, but without a file there are no columns to answer with.
            return anyhow::anyhow!(
                "table {name} has no readable data files in the lake {lake} (its directory is \
there, without files, or with only files skipped as damaged in the warnings above: an import \
stopped before its first file, or its files were removed or damaged), so it has no columns to \
query; import into it first"
            );
        }
    }
    let have = match tables {
        Ok(t) if t.is_empty() => "it has no tables yet".to_string(),
        Ok(t) => format!(
            "its tables: {}",
            t.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(_) => "its tables cannot be listed".to_string(),
    };
    anyhow::anyhow!(
        "table {name} is not in the lake {lake} ({have}); `silt tables --lake {lake}` shows each with its rows and time range"
    )
}

/// The lake tables `sql` reads (`module.type` or `datafusion.module.type`, unquoted names
/// lower-cased as DataFusion does), or `None` when that cannot be told from the text: a
/// statement other than a query (`SHOW TABLES`, `DESCRIBE`), a look at `information_schema`,
/// no table at all, or SQL that does not parse (the session then says what is wrong). Names of
/// common table expressions and other one-part names are not lake tables and are left out.
pub fn tables_named(sql: &str) -> Option<BTreeSet<TableName>> {
    use datafusion::sql::sqlparser::ast::{visit_relations, Statement};
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    use std::ops::ControlFlow;

    let statements = Parser::parse_sql(&GenericDialect {}, sql).ok()?;
    let is_query = |s: &Statement| match s {
        Statement::Query(_) => true,
        Statement::Explain { statement, .. } => matches!(**statement, Statement::Query(_)),
        _ => false,
    };
    if statements.is_empty() || !statements.iter().all(is_query) {
        return None;
    }
    let mut out = BTreeSet::new();
    let flow = visit_relations(&statements, |name| {
        let parts: Option<Vec<String>> = name
            .0
            .iter()
            .map(|p| {
                let id = p.as_ident()?;
                Some(match id.quote_style {
                    None => id.value.to_lowercase(),
                    Some(_) => id.value.clone(),
                })
            })
            .collect();
        let Some(parts) = parts else {
            return ControlFlow::Break(());
        };
        let (schema, table) = match parts.as_slice() {
            [s, t] => (s, t),
            [c, s, t] if c == "datafusion" => (s, t),
            [_] => return ControlFlow::Continue(()),
            _ => return ControlFlow::Break(()),
        };
        if schema == "information_schema" {
            return ControlFlow::Break(());
        }
        match TableName::parse(&format!("{schema}.{table}")) {
            Some(t) => {
                out.insert(t);
                ControlFlow::Continue(())
            }
            None => ControlFlow::Break(()),
        }
    });
    (flow.is_continue() && !out.is_empty()).then_some(out)
}

/// A DataFusion session over one lake.
///
/// Read-only by default: DDL (`CREATE EXTERNAL TABLE ... LOCATION '/etc/passwd'`, `CREATE
/// TABLE`, `DROP`), DML and `COPY ... TO` (which writes files), and statements that change the
/// session (`SET`) are refused before anything runs, so a query can read nothing but the lake
/// and write nothing at all. [`SiltSession::allow_write`] lets `COPY ... TO` write to a path the
/// user names (`silt query --allow-write`); DDL stays refused.
pub struct SiltSession {
    ctx: SessionContext,
    index: Arc<LakeIndex>,
    /// Tables registered (the lake's and those only in memory).
    tables: Vec<TableName>,
    allow_write: bool,
}

/// The outcome of one SQL statement.
#[derive(Debug, Clone)]
pub struct QueryResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub stats: ScanStats,
}

impl QueryResult {
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// Writes the rows in `format` (see [`crate::output`]).
    pub fn write(&self, format: OutputFormat, out: &mut dyn Write) -> anyhow::Result<()> {
        write_results_with_schema(&self.schema, &self.batches, format, out)
    }
}

/// Hands the footers the lake scan read from an object store to DataFusion's metadata cache,
/// keyed as the scan will ask for them ([`crate::provider::object_meta`]), so that a query reads
/// each footer from the store at most once (none when the footer cache had it).
fn seed_footers(ctx: &SessionContext, index: &LakeIndex) -> anyhow::Result<()> {
    let cache = ctx.runtime_env().cache_manager.get_file_metadata_cache();
    for t in index.tables.values() {
        for f in &t.files {
            let Some(md) = &f.footer else { continue };
            crate::provider::seed_footer(cache.as_ref(), index.remote.as_deref(), f, md)?;
        }
    }
    Ok(())
}

/// Parquet footers kept across the sessions of one process (a server opens a session per
/// query): a query then reads only the footers of files it has not met yet, instead of every
/// file's again. Lake files are immutable; an entry is checked against the file's size and
/// modification time, and the least recently used go beyond the budget.
#[derive(Clone)]
pub struct SharedFooters(Arc<datafusion::execution::cache::cache_manager::FileMetadataCache>);

impl SharedFooters {
    /// A cache of at most `bytes` of footers.
    pub fn new(bytes: usize) -> Self {
        use datafusion::execution::cache::default_cache::DefaultCache;
        Self(Arc::new(
            DefaultCache::new(bytes).with_name("silt shared footers"),
        ))
    }

    /// Footers held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Bytes the held footers are accounted for (at most the budget given to [`Self::new`]).
    pub fn bytes(&self) -> usize {
        self.0.list_entries().values().map(|e| e.size_bytes).sum()
    }

    /// Whether no footer is held.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

impl std::fmt::Debug for SharedFooters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedFooters({} footers)", self.len())
    }
}

/// The session configuration silt uses: pruning by statistics, page index and bloom filters
/// on, `information_schema` on. Filter pushdown into the Parquet decoder stays off here: it is
/// a per-table decision ([`crate::provider::SiltTable`]), because a session-wide switch would
/// override it.
pub fn session_config() -> SessionConfig {
    let mut config = SessionConfig::new().with_information_schema(true);
    let pq = &mut config.options_mut().execution.parquet;
    pq.pruning = true;
    pq.enable_page_index = true;
    pq.bloom_filter_on_read = true;
    pq.pushdown_filters = false;
    pq.reorder_filters = true;
    config
}

impl SiltSession {
    /// Registers `asn()`, `as_org()`, `geo_country()`, `geo_city()` and `rdns()` over `dbs`
    /// (see [`crate::lookup`]).
    pub fn with_lookups(self, dbs: Arc<silt_enrich::Databases>) -> Self {
        for f in crate::lookup::lookup_udfs(dbs) {
            self.ctx.register_udf(f);
        }
        self
    }

    /// Walks the lake (a directory, or `s3://bucket/prefix`: see [`silt_lake::remote`]) and
    /// registers its tables; see the module documentation.
    pub async fn open(lake: &Path) -> anyhow::Result<Self> {
        Self::open_tables(lake, None).await
    }

    /// [`SiltSession::open`] with only the tables `only` names registered (all with `None`).
    pub async fn open_tables(
        lake: &Path,
        only: Option<BTreeSet<TableName>>,
    ) -> anyhow::Result<Self> {
        let lake = lake.to_path_buf();
        // Opening a store and reading footers is blocking I/O. Footers of an object-store
        // lake are deferred to the scans (`crate::lake`).
        let index = tokio::task::spawn_blocking(move || {
            LakeIndex::open_for_query(&silt_lake::remote::LakeRoot::open(&lake)?, only.as_ref())
        })
        .await
        .context("lake scan panicked")??;
        Self::live(Arc::new(index), Default::default(), None, None)
    }

    /// A session over a lake already indexed (`index`, kept current by its owner with
    /// [`LakeIndex::with_files`]) and rows in no file yet (`tails`, per table; see
    /// [`SiltTable::with_tail`]): what `silt serve` opens per query, without touching the disk.
    /// With `memory_limit`, operators that buffer (sorts, joins, aggregations) may hold at most
    /// that many bytes; a query that needs more fails with a message saying so. With
    /// `footers`, Parquet footers are taken from and kept in that cache (see [`SharedFooters`]).
    pub fn live(
        index: Arc<LakeIndex>,
        mut tails: std::collections::BTreeMap<TableName, Vec<RecordBatch>>,
        memory_limit: Option<usize>,
        footers: Option<&SharedFooters>,
    ) -> anyhow::Result<Self> {
        let ctx = if memory_limit.is_none() && footers.is_none() {
            SessionContext::new_with_config(session_config())
        } else {
            let mut rt = datafusion::execution::runtime_env::RuntimeEnvBuilder::new();
            if let Some(bytes) = memory_limit {
                rt = rt.with_memory_limit(bytes, 1.0);
            }
            if let Some(f) = footers {
                use datafusion::execution::cache::cache_manager::CacheManagerConfig;
                rt = rt.with_cache_manager(
                    CacheManagerConfig::default()
                        .with_file_metadata_cache(Some(f.0.clone()))
                        .with_metadata_cache_limit(f.0.cache_limit()),
                );
            }
            SessionContext::new_with_config_rt(session_config(), rt.build_arc()?)
        };
        ctx.register_udf(crate::cidr::cidr_contains_udf());
        if let Some(r) = &index.remote {
            let url = datafusion::execution::object_store::ObjectStoreUrl::parse(r.store_url())?;
            ctx.register_object_store(url.as_ref(), r.store());
            seed_footers(&ctx, &index)?;
        }
        let catalog = ctx
            .catalog("datafusion")
            .context("default catalog missing")?;
        let mut names: Vec<TableName> = index.tables.keys().cloned().collect();
        names.extend(
            tails
                .keys()
                .filter(|t| !index.tables.contains_key(*t))
                .cloned(),
        );
        let mut registered = Vec::new();
        for name in names {
            let schema = match catalog.schema(name.module()) {
                Some(s) => s,
                None => {
                    let s: Arc<dyn SchemaProvider> = Arc::new(MemorySchemaProvider::new());
                    catalog.register_schema(name.module(), s.clone())?;
                    s
                }
            };
            let files = index.tables.get(&name).cloned();
            let table = match tails.remove(&name) {
                Some(tail) if !tail.is_empty() => {
                    let placed = files
                        .as_ref()
                        .and_then(|f| f.partitioning_of_files())
                        .or_else(|| recorded_partitioning(&index, &name));
                    SiltTable::with_tail(name.clone(), files, tail, placed)
                }
                _ => match files {
                    Some(f) => SiltTable::new(f),
                    None => continue,
                },
            };
            schema.register_table(name.name().to_string(), Arc::new(table))?;
            registered.push(name);
        }
        registered.sort();
        Ok(Self {
            ctx,
            index,
            tables: registered,
            allow_write: false,
        })
    }

    /// Lets `COPY ... TO` write to the path it names (see the type's documentation).
    pub fn allow_write(mut self, allow: bool) -> Self {
        self.allow_write = allow;
        self
    }

    /// Plans `sql` under the session's rules: read-only unless writing was allowed.
    /// Plans `sql` with `params` (one row: a value per placeholder) bound to its placeholders
    /// (`?` or `$1`: see [`crate::params`]). A statement with placeholders and no values is an
    /// error that names them.
    async fn plan_bound(
        &self,
        ctx: &SessionContext,
        sql: &str,
        params: Option<&RecordBatch>,
    ) -> anyhow::Result<datafusion::dataframe::DataFrame> {
        let df = self.plan(ctx, sql).await?;
        let fields = crate::params::parameter_fields(df.logical_plan())?;
        let names = || {
            fields
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match params {
            _ if fields.is_empty() && params.is_none_or(|b| b.num_columns() == 0) => Ok(df),
            None => anyhow::bail!(
                "the statement has parameters ({}): bind a value to each (a prepared statement's \
                 parameters) or write the values into the SQL",
                names()
            ),
            Some(b) => {
                anyhow::ensure!(
                    b.num_rows() == 1,
                    "{} rows of parameter values were bound: bind one row per execution",
                    b.num_rows()
                );
                let values = crate::params::values(b, 0, &fields)?;
                Ok(df.with_param_values(values)?)
            }
        }
    }

    /// Plans `sql` (its `?` placeholders numbered) with silt's read-only rules.
    async fn plan(
        &self,
        ctx: &SessionContext,
        sql: &str,
    ) -> anyhow::Result<datafusion::dataframe::DataFrame> {
        let sql = crate::params::number_placeholders(sql)?;
        let sql = sql.as_str();
        let opts = datafusion::execution::context::SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(self.allow_write)
            .with_allow_statements(false);
        ctx.sql_with_options(sql, opts).await.map_err(|e| {
            let msg = e.to_string();
            let refused = ["DDL not supported", "DML not supported", "Statement not supported"];
            if refused.iter().any(|r| msg.contains(r)) {
                // Which option lifts it is the front end's to say (`silt query` has one, a
                // server none).
                anyhow::anyhow!(
                    "{msg}: queries are read-only: CREATE, DROP, INSERT, SET and COPY{} are refused",
                    if self.allow_write { " (but COPY ... TO)" } else { "" }
                )
            } else {
                anyhow::Error::new(e)
            }
        })
    }

    /// The underlying DataFusion context (tables and `cidr_contains` registered). Queries run
    /// directly on it work, but do not collect [`ScanStats`].
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The tables found when the session was opened (with those only in memory).
    pub fn tables(&self) -> Vec<TableName> {
        self.tables.clone()
    }

    /// The lake as it was read.
    pub fn lake(&self) -> &LakeIndex {
        &self.index
    }

    /// Files that could not be read and were left out (show these to the user).
    pub fn warnings(&self) -> &[String] {
        &self.index.warnings
    }

    /// Plans and runs one SQL statement, collecting its rows and scan statistics.
    pub async fn query(&self, sql: &str) -> anyhow::Result<QueryResult> {
        let (ctx, log) = self.query_context();
        let df = self.plan_bound(&ctx, sql, None).await?;
        let plan: Arc<dyn ExecutionPlan> = df.create_physical_plan().await?;
        let schema = display_schema(&plan.schema());
        let batches = datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx())
            .await?
            .into_iter()
            .map(|b| RecordBatch::try_new(schema.clone(), b.columns().to_vec()))
            .collect::<Result<Vec<_>, _>>()?;
        let stats = ScanStats::collect(&log.notes(), &plan);
        Ok(QueryResult {
            schema,
            batches,
            stats,
        })
    }

    /// Runs one SQL statement and writes its rows to `out` in `format` as they arrive (csv,
    /// json and ndjson stream; see [`ResultWriter`]); returns the number of rows and the scan
    /// statistics. This is what `silt query` should use for large results.
    pub async fn query_to_writer(
        &self,
        sql: &str,
        format: OutputFormat,
        out: &mut dyn Write,
    ) -> anyhow::Result<(u64, ScanStats)> {
        let (ctx, log) = self.query_context();
        let df = self.plan_bound(&ctx, sql, None).await?;
        let plan: Arc<dyn ExecutionPlan> = df.create_physical_plan().await?;
        let schema = display_schema(&plan.schema());
        let mut stream = datafusion::physical_plan::execute_stream(plan.clone(), ctx.task_ctx())?;
        let mut w = ResultWriter::new(&schema, format, out)?;
        while let Some(b) = stream.next().await {
            w.write(&RecordBatch::try_new(
                schema.clone(),
                b?.columns().to_vec(),
            )?)?;
        }
        drop(stream);
        let rows = w.rows();
        w.finish()?;
        Ok((rows, ScanStats::collect(&log.notes(), &plan)))
    }

    /// The schema of `sql`'s result (as [`SiltSession::query`] would name its columns) with
    /// `params` bound, planned but not run.
    pub async fn schema_of(
        &self,
        sql: &str,
        params: Option<&RecordBatch>,
    ) -> anyhow::Result<SchemaRef> {
        let (ctx, _) = self.query_context();
        let plan = self
            .plan_bound(&ctx, sql, params)
            .await?
            .create_physical_plan()
            .await?;
        Ok(display_schema(&plan.schema()))
    }

    /// What a prepared statement answers: the result's schema and the parameters (`$1, $2, …`
    /// with the types DataFusion inferred, `Null` where it could not; see [`crate::params`]).
    /// With parameters, the schema is the logical plan's (the values are not known yet).
    pub async fn prepare(&self, sql: &str) -> anyhow::Result<(SchemaRef, Vec<Field>)> {
        let (ctx, _) = self.query_context();
        let df = self.plan(&ctx, sql).await?;
        let fields = crate::params::parameter_fields(df.logical_plan())?;
        if fields.is_empty() {
            let plan = df.create_physical_plan().await?;
            return Ok((display_schema(&plan.schema()), fields));
        }
        let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        Ok((display_schema(&schema), fields))
    }

    /// Runs `sql` with `params` bound and streams its batches as they are computed (for
    /// servers).
    pub async fn query_stream(
        &self,
        sql: &str,
        params: Option<&RecordBatch>,
    ) -> anyhow::Result<(
        SchemaRef,
        futures::stream::BoxStream<'static, anyhow::Result<RecordBatch>>,
    )> {
        let (ctx, _) = self.query_context();
        let df = self.plan_bound(&ctx, sql, params).await?;
        let plan: Arc<dyn ExecutionPlan> = df.create_physical_plan().await?;
        let schema = display_schema(&plan.schema());
        let stream = datafusion::physical_plan::execute_stream(plan, ctx.task_ctx())?;
        let s2 = schema.clone();
        let out = stream
            .map(move |b| {
                let b = b?;
                Ok(RecordBatch::try_new(s2.clone(), b.columns().to_vec())?)
            })
            .boxed();
        Ok((schema, out))
    }

    /// The physical plan of `sql` after optimization, as text (`EXPLAIN` without running).
    pub async fn explain(&self, sql: &str) -> anyhow::Result<String> {
        let (ctx, _) = self.query_context();
        let plan = self
            .plan_bound(&ctx, sql, None)
            .await?
            .create_physical_plan()
            .await?;
        let text = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(true)
            .to_string();
        Ok(text)
    }

    /// A context sharing this session's catalog and configuration with a fresh [`ScanLog`].
    fn query_context(&self) -> (SessionContext, Arc<ScanLog>) {
        let mut state = self.ctx.state();
        let log = Arc::new(ScanLog::default());
        state.config_mut().set_extension(log.clone());
        (SessionContext::new_with_state(state), log)
    }
}

/// The result schema with struct-field columns named as the user wrote them: DataFusion calls
/// `SELECT id.orig_h FROM zeek.conn`'s column `zeek.conn.id[orig_h]`; silt prints `id.orig_h`
/// (what DuckDB and Spark print too). Names that would collide keep DataFusion's form.
pub fn display_schema(schema: &SchemaRef) -> SchemaRef {
    let renamed: Vec<Option<String>> = schema
        .fields()
        .iter()
        .map(|f| dotted_name(f.name()))
        .collect();
    let final_names: Vec<String> = schema
        .fields()
        .iter()
        .zip(&renamed)
        .map(|(f, r)| r.clone().unwrap_or_else(|| f.name().clone()))
        .collect();
    let unique = |n: &String| final_names.iter().filter(|m| *m == n).count() == 1;
    let fields: Vec<arrow::datatypes::FieldRef> = schema
        .fields()
        .iter()
        .zip(&renamed)
        .map(|(f, r)| match r {
            Some(n) if unique(n) => Arc::new(f.as_ref().clone().with_name(n.clone())),
            _ => f.clone(),
        })
        .collect();
    Arc::new(arrow::datatypes::Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))
}

/// `zeek.conn.id[orig_h]` -> `id.orig_h`, `a.alert[signature]` -> `alert.signature`,
/// `x[a][b]` -> `x.a.b`; `None` for anything that is not a plain field access.
fn dotted_name(name: &str) -> Option<String> {
    let open = name.find('[')?;
    let (head, mut rest) = name.split_at(open);
    let base = head.rsplit('.').next()?;
    if base.is_empty() || base.contains(['(', ')', ' ']) {
        return None;
    }
    let mut out = base.to_string();
    while !rest.is_empty() {
        let inner = rest.strip_prefix('[')?;
        let close = inner.find(']')?;
        let field = &inner[..close];
        if field.is_empty() || field.contains(['[', '(', ' ']) {
            return None;
        }
        out.push('.');
        out.push_str(field);
        rest = &inner[close + 1..];
    }
    Some(out)
}

#[cfg(test)]
mod display_tests {
    use super::dotted_name;

    #[test]
    fn struct_access_names() {
        assert_eq!(
            dotted_name("zeek.conn.id[orig_h]").as_deref(),
            Some("id.orig_h")
        );
        assert_eq!(
            dotted_name("a.alert[signature]").as_deref(),
            Some("alert.signature")
        );
        assert_eq!(dotted_name("x[a][b]").as_deref(), Some("x.a.b"));
        assert_eq!(dotted_name("count(*)"), None);
        assert_eq!(dotted_name("sum(zeek.conn.id[orig_p])"), None);
        assert_eq!(dotted_name("n"), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::lake::DataFile;
    use arrow::array::{ArrayRef, AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use silt_lake::remote::footers::FooterCache;
    use silt_lake::remote::RemoteLake;

    fn parquet(values: std::ops::Range<i64>) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(values))],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out
    }

    /// Sessions given one [`SharedFooters`] (a server's, one session per query) read each
    /// file's footer once: the second query finds the first's footers, and adds none.
    #[test]
    fn sessions_share_the_footers_they_read() {
        let dir = tempfile::tempdir().unwrap();
        for d in 1..=3 {
            let p = dir.path().join(format!("t.a/dt=2024-01-0{d}/f.parquet"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, parquet(d * 10..d * 10 + 5)).unwrap();
        }
        let index = Arc::new(LakeIndex::scan(dir.path()).unwrap());
        let footers = SharedFooters::new(1 << 20);
        let rt = runtime().unwrap();
        for round in 0..2 {
            let session =
                SiltSession::live(index.clone(), Default::default(), None, Some(&footers)).unwrap();
            let r = rt
                .block_on(session.query("SELECT sum(x) FROM t.a WHERE x % 2 = 0"))
                .unwrap();
            assert_eq!(
                r.batches[0].column(0).as_primitive::<Int64Type>().value(0),
                [10, 12, 14, 20, 22, 24, 30, 32, 34].iter().sum::<i64>()
            );
            assert_eq!(footers.len(), 3, "after query {round}");
            let own = session
                .context()
                .runtime_env()
                .cache_manager
                .get_file_metadata_cache();
            assert_eq!(own.len(), 3);
        }
    }

    /// A zstd-compressed Feather file of one batch of `x` = `values`, and where in it the
    /// values buffer's length prefix is (`None` for its intact bytes).
    fn feather(values: std::ops::Range<i64>) -> (Vec<u8>, usize) {
        let n = values.end - values.start;
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(values))],
        )
        .unwrap();
        let opts = arrow::ipc::writer::IpcWriteOptions::default()
            .try_with_compression(Some(arrow::ipc::CompressionType::ZSTD))
            .unwrap();
        let mut out = Vec::new();
        let mut w =
            arrow::ipc::writer::FileWriter::try_new_with_options(&mut out, &schema, opts).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        let prefix = (n as u64 * 8).to_le_bytes();
        let at = out.windows(8).position(|w| w == prefix).unwrap();
        (out, at)
    }

    /// An object-store lake's Feather file whose compressed buffer claims 2^40 bytes is an error
    /// that names it and reads as damage, in both ways DataFusion reads a Feather file (whole,
    /// and by ranges when a file is split across partitions); before, arrow-ipc reserved the
    /// length and the process aborted. The intact file still answers.
    #[test]
    fn a_remote_feather_file_with_a_forged_length_is_an_error_not_an_abort() {
        let dir = tempfile::tempdir().unwrap();
        let lake = bucket_lake(dir.path());
        lake.put("t.a/dt=2024-01-01/f1.feather", feather(0..50_000).0)
            .unwrap();
        let (mut bad, at) = feather(50_000..100_000);
        bad[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        lake.put("t.a/dt=2024-01-02/f2.feather", bad).unwrap();
        let index = LakeIndex::scan_remote_with(lake, &FooterCache::new(None)).unwrap();
        let index = Arc::new(index);
        let rt = runtime().unwrap();
        for min_size in [usize::MAX, 1] {
            let session = SiltSession::live(index.clone(), Default::default(), None, None).unwrap();
            {
                let state = session.context().state_ref();
                let mut state = state.write();
                let opts = state.config_mut().options_mut();
                // 1: every file split into ranges (DataFusion's ranged Arrow reads).
                opts.optimizer.repartition_file_min_size = min_size;
                opts.execution.target_partitions = 4;
            }
            let e = rt
                .block_on(session.query("SELECT sum(x) AS s FROM t.a"))
                .unwrap_err();
            let msg = format!("{e:#}");
            assert!(
                msg.contains("f2.feather") && msg.contains("damaged or forged length"),
                "{min_size}: {msg}"
            );
            assert!(crate::damage::decode_failure(&e), "{msg}");
            let r = rt
                .block_on(session.query("SELECT sum(x) AS s FROM t.a WHERE dt = DATE '2024-01-01'"))
                .unwrap();
            assert_eq!(
                r.batches[0].column(0).as_primitive::<Int64Type>().value(0),
                (0..50_000).sum::<i64>()
            );
        }
    }

    /// An object-store lake `s3://b/lake` kept in the directory `dir`.
    fn bucket_lake(dir: &Path) -> Arc<RemoteLake> {
        let store = datafusion::object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap();
        Arc::new(
            RemoteLake::with_store("s3://b/lake", "b".into(), "lake".into(), Arc::new(store))
                .unwrap(),
        )
    }

    /// The footers a remote scan read reach DataFusion: after the scan, every footer in the store
    /// is overwritten with garbage of the same length, and the query still reads the files (it
    /// would fail to decode them had it read the footers again).
    #[test]
    fn a_remote_scan_hands_its_footers_to_the_query() {
        let dir = tempfile::tempdir().unwrap();
        let lake = bucket_lake(dir.path());
        let rels: Vec<String> = (1..=3)
            .map(|d| format!("t.a/dt=2024-01-0{d}/f{d}.parquet"))
            .collect();
        for (i, rel) in rels.iter().enumerate() {
            let i = i as i64;
            lake.put(rel, parquet(i * 1000..(i + 1) * 1000)).unwrap();
        }
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = FooterCache::new(Some(cache_dir.path().to_path_buf()));
        let index = LakeIndex::scan_remote_with(lake.clone(), &cache).unwrap();
        assert!(index.warnings.is_empty(), "{:?}", index.warnings);
        let files = &index.tables[&TableName::parse("t.a").unwrap()].files;
        assert_eq!(files.len(), 3);
        assert!(files.iter().all(|f| f.footer.is_some()));
        assert_eq!(std::fs::read_dir(cache_dir.path()).unwrap().count(), 3);

        for rel in &rels {
            let mut bytes = lake.get(rel).unwrap().unwrap().to_vec();
            let n = bytes.len();
            let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
            bytes[n - 8 - len..n - 8].fill(0xff);
            lake.put(rel, bytes).unwrap();
        }
        let session = SiltSession::live(Arc::new(index), Default::default(), None, None).unwrap();
        let cached = session
            .context()
            .runtime_env()
            .cache_manager
            .get_file_metadata_cache();
        assert_eq!(cached.len(), 3);
        let rt = runtime().unwrap();
        let r = rt
            .block_on(
                session.query(
                    "SELECT sum(x) AS s, count(*) AS n FROM t.a WHERE dt >= DATE '2024-01-02'",
                ),
            )
            .unwrap();
        let b = &r.batches[0];
        assert_eq!(
            b.column(0).as_primitive::<Int64Type>().value(0),
            (1000..3000).sum::<i64>()
        );
        assert_eq!(b.column(1).as_primitive::<Int64Type>().value(0), 2000);

        // The footers in the store are indeed unreadable now: a scan that reads them (no cache,
        // and the objects' new modification times would miss it anyway) skips all three files.
        let index = LakeIndex::scan_remote_with(lake, &FooterCache::new(None)).unwrap();
        assert_eq!(index.warnings.len(), 3, "{:?}", index.warnings);
        assert!(index.tables.is_empty());
    }

    /// Parquet bytes of one batch.
    fn parquet_of(batch: &RecordBatch) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        out
    }

    /// `bytes` with the footer overwritten by garbage of the same length.
    fn spoil_footer(mut bytes: Vec<u8>) -> Vec<u8> {
        let n = bytes.len();
        let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
        bytes[n - 8 - len..n - 8].fill(0xff);
        bytes
    }

    /// Footers deferred: a table's schema comes from one file per schema tag, and a query reads
    /// the footers of the files its filters keep only. Files of other days whose footers are
    /// garbage do not matter to a query of the last two days; a query that needs them says which
    /// file it could not read; a file whose footer does not match its tag is an error, not a
    /// column dropped; footers read once come from the footer cache next time.
    #[test]
    fn a_query_reads_only_the_footers_of_the_files_its_filters_keep() {
        let dir = tempfile::tempdir().unwrap();
        let lake = bucket_lake(dir.path());
        let x = Field::new("x", DataType::Int64, false);
        let y = Field::new("y", DataType::Int64, false);
        let batch = |fields: Vec<Field>, v: i64| {
            let cols: Vec<ArrayRef> = fields
                .iter()
                .map(|_| Arc::new(Int64Array::from(vec![v])) as ArrayRef)
                .collect();
            RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
        };
        const A: &str = "-s00000000000000aa.parquet";
        for d in 1..=10 {
            let rel = format!("t.a/dt=2024-01-{d:02}/f{d}{A}");
            let bytes = parquet_of(&batch(vec![x.clone()], d));
            // Days 2 to 8 cannot be read; day 1 is the first file of its tag.
            let bytes = if (2..=8).contains(&d) {
                spoil_footer(bytes)
            } else {
                bytes
            };
            lake.put(&rel, bytes).unwrap();
        }
        // Another tag, with one more column: read for the table's schema.
        lake.put(
            "t.a/dt=2024-01-10/g-s00000000000000bb.parquet",
            parquet_of(&batch(vec![x.clone(), y.clone()], 100)),
        )
        .unwrap();
        let cache_dir = tempfile::tempdir().unwrap();
        let open = || {
            let footers = Arc::new(FooterCache::new(Some(cache_dir.path().to_path_buf())));
            let index = LakeIndex::scan_remote_deferred(lake.clone(), footers, None).unwrap();
            assert!(index.warnings.is_empty(), "{:?}", index.warnings);
            SiltSession::live(Arc::new(index), Default::default(), None, None).unwrap()
        };
        let session = open();
        let files = &session.lake().tables[&TableName::parse("t.a").unwrap()].files;
        let deferred = |files: &[DataFile]| files.iter().filter(|f| f.deferred).count();
        assert_eq!(files.len(), 11);
        assert_eq!(deferred(files), 9, "all but the first file of each tag");
        let rt = runtime().unwrap();
        let r = rt
            .block_on(session.query(
                "SELECT sum(x) AS x, sum(y) AS y, count(*) AS n FROM t.a \
                 WHERE dt >= DATE '2024-01-09'",
            ))
            .unwrap();
        let b = &r.batches[0];
        let v = |i: usize| b.column(i).as_primitive::<Int64Type>().value(0);
        assert_eq!((v(0), v(1), v(2)), (9 + 10 + 100, 100, 3));
        assert_eq!(r.stats.footers_unread, 7, "days 2 to 8");
        assert_eq!(r.stats.files_total, 11);

        // A query that needs a spoiled day fails and names the file.
        let e = rt
            .block_on(session.query("SELECT count(*) FROM t.a"))
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("cannot read the footer of")
                && format!("{e:#}").contains("f2-s"),
            "{e:#}"
        );

        // Days 9 and 10 are in the footer cache now: read when the lake is opened.
        let session = open();
        let files = &session.lake().tables[&TableName::parse("t.a").unwrap()].files;
        assert_eq!(deferred(files), 7);

        // A file whose footer does not match its tag (it has a column no file read has).
        lake.put(
            &format!("t.a/dt=2024-01-11/h{A}"),
            parquet_of(&batch(
                vec![x.clone(), Field::new("z", DataType::Int64, false)],
                7,
            )),
        )
        .unwrap();
        let session = open();
        let e = rt
            .block_on(session.query("SELECT count(*) FROM t.a WHERE dt = DATE '2024-01-11'"))
            .unwrap_err();
        assert!(format!("{e:#}").contains("must not be renamed"), "{e:#}");
    }

    fn named(sql: &str) -> Option<Vec<String>> {
        tables_named(sql).map(|s| s.iter().map(|t| t.to_string()).collect())
    }

    #[test]
    fn the_tables_a_query_names() {
        let one = Some(vec!["zeek.conn".to_string()]);
        assert_eq!(named("SELECT count(*) FROM zeek.conn"), one);
        assert_eq!(named("select * from Zeek.Conn where ts > now()"), one);
        assert_eq!(named("SELECT 1 FROM datafusion.zeek.conn"), one);
        assert_eq!(
            named("EXPLAIN ANALYZE SELECT * FROM zeek.conn LIMIT 1"),
            one
        );
        assert_eq!(
            named(
                "WITH c AS (SELECT uid FROM zeek.conn) SELECT * FROM c JOIN zeek.dns d \
                 ON c.uid = d.uid WHERE d.uid IN (SELECT uid FROM \"suricata\".\"dns\")"
            ),
            Some(vec![
                "suricata.dns".into(),
                "zeek.conn".into(),
                "zeek.dns".into()
            ])
        );
        // Every table: what the text cannot tell.
        for sql in [
            "SHOW TABLES",
            "DESCRIBE zeek.conn",
            "SELECT * FROM information_schema.tables",
            "SELECT 1",
            "SELECT * FROM zeek.conn WHERE",
            "SELECT * FROM a.b.c.d",
            "SELECT * FROM \"Zeek\".conn",
        ] {
            assert_eq!(named(sql), None, "{sql}");
        }
    }

    /// A scan of the tables a query names reads no other table's footers: another table's
    /// unreadable file is not even noticed.
    #[test]
    fn a_scan_of_named_tables_reads_no_other_table() {
        let dir = tempfile::tempdir().unwrap();
        let lake = bucket_lake(dir.path());
        lake.put("t.a/dt=2024-01-01/f.parquet", parquet(0..10))
            .unwrap();
        lake.put("t.b/dt=2024-01-01/f.parquet", b"not parquet".to_vec())
            .unwrap();
        let all = LakeIndex::scan_remote_with(lake.clone(), &FooterCache::new(None)).unwrap();
        assert_eq!(all.warnings.len(), 1, "{:?}", all.warnings);
        let only = tables_named("SELECT sum(x) FROM t.a").unwrap();
        let index =
            LakeIndex::scan_remote_tables(lake, &FooterCache::new(None), Some(&only)).unwrap();
        assert!(index.warnings.is_empty(), "{:?}", index.warnings);
        assert_eq!(
            index
                .tables
                .keys()
                .map(|t| t.to_string())
                .collect::<Vec<_>>(),
            ["t.a"]
        );
        assert_eq!(index.tables.values().next().unwrap().files.len(), 1);

        let local = tempfile::tempdir().unwrap();
        for t in ["t.a", "t.b"] {
            let d = local.path().join(t).join("dt=2024-01-01");
            std::fs::create_dir_all(&d).unwrap();
            let bytes = if t == "t.a" {
                parquet(0..10)
            } else {
                b"junk".to_vec()
            };
            std::fs::write(d.join("f.parquet"), bytes).unwrap();
        }
        assert_eq!(LakeIndex::scan(local.path()).unwrap().warnings.len(), 1);
        let index = LakeIndex::scan_tables(local.path(), Some(&only)).unwrap();
        assert!(index.warnings.is_empty(), "{:?}", index.warnings);
        assert_eq!(index.tables.len(), 1);
    }
}
