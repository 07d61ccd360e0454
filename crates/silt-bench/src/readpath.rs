//! The read path the study never measured: four queries over each written file, run by
//! DataFusion (the engine behind `silt query`), each with its wall time and the bytes read.
//!
//! - `scan`: `SELECT *` streamed to the end (every column decoded);
//! - `filter`: `count(*)` over a 10% window of the time column (45%..55% of its range);
//! - `topn`: `GROUP BY` a low-cardinality text column chosen per schema, top 10 by count;
//! - `needle`: `count(*)` where the lookup column (`uid`, `community_id` or `flow_id`) equals
//!   one value that exists (taken from the middle row).
//!
//! Bytes read are counted by [`CountingStore`], an object store wrapped around DataFusion's
//! local file system store that adds up the byte ranges every `get` asks for (footer, page
//! indexes, bloom filters and column chunks alike); it works the same for Parquet and Feather,
//! where DataFusion's `bytes_scanned` metric exists only for Parquet. Each query runs in a
//! fresh `SessionContext`, so no metadata cache carries over between queries (the OS page
//! cache does: these are warm-cache figures). DataFusion's default options (page index and
//! bloom filters used on read, no filter pushdown into the decoder). Touches only the file
//! it reads.

use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, TimeUnit};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use bytes::Bytes;
use datafusion::datasource::file_format::options::ArrowReadOptions;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use silt_lake::StoreKind;

use crate::measure::Prepared;

/// The queries of one schema, fixed once per table so every store answers the same ones.
#[derive(Debug, Clone, Default)]
pub struct ReadPlan {
    pub time_column: Option<String>,
    /// `[start, end)` in UTC microseconds.
    pub window: Option<(i64, i64)>,
    pub group_column: Option<String>,
    /// Column and SQL literal of the needle.
    pub needle: Option<(String, String)>,
}

/// Candidate needle columns, in order of preference.
const NEEDLE_COLUMNS: &[&str] = &["uid", "community_id", "flow_id"];
/// Text columns that make a good top-N when present (low cardinality, meaningful).
const GROUP_PREFERRED: &[&str] = &[
    "event_type",
    "proto",
    "service",
    "conn_state",
    "qtype_name",
    "method",
    "app_proto",
];
/// Rows sampled to judge a column's cardinality.
const SAMPLE: usize = 50_000;

impl ReadPlan {
    /// Chooses the queries for a prepared table.
    pub fn for_table(p: &Prepared) -> Self {
        let mut plan = ReadPlan::default();
        let Some(first) = p.sorted.first() else {
            return plan;
        };
        let schema = p.schema.clone();
        // Time window: 45%..55% of the time range.
        if let Some(tc) = silt_core::meta::time_column(&schema) {
            plan.time_column = Some(tc.to_string());
            let mut lo = i64::MAX;
            let mut hi = i64::MIN;
            for b in &p.sorted {
                if let Some(col) = silt_lake::writer::column_by_path(b, tc) {
                    if let Some(ts) =
                        col.as_primitive_opt::<arrow::datatypes::TimestampMicrosecondType>()
                    {
                        for v in ts.iter().flatten() {
                            lo = lo.min(v);
                            hi = hi.max(v);
                        }
                    }
                }
            }
            if lo <= hi {
                let span = (hi - lo) as f64;
                let a = lo + (span * 0.45) as i64;
                let b = (lo + (span * 0.55) as i64).max(a + 1);
                plan.window = Some((a, b));
            }
        }
        // Group-by column: a top-level text column with 2..=64 distinct values in a sample,
        // preferring the well-known names, then the one with the most non-null values.
        let mut best: Option<(bool, usize, String)> = None;
        for (i, f) in schema.fields().iter().enumerate() {
            if f.data_type() != &DataType::Utf8 {
                continue;
            }
            let mut distinct = HashSet::new();
            let mut valid = 0usize;
            let mut seen = 0usize;
            for b in &p.sorted {
                let s = b.column(i).as_string::<i32>();
                for v in s.iter() {
                    seen += 1;
                    if let Some(v) = v {
                        valid += 1;
                        if distinct.len() <= 64 {
                            distinct.insert(v.to_string());
                        }
                    }
                }
                if seen >= SAMPLE {
                    break;
                }
            }
            if !(2..=64).contains(&distinct.len()) {
                continue;
            }
            let key = (GROUP_PREFERRED.contains(&f.name().as_str()), valid);
            if best.as_ref().is_none_or(|(p, v, _)| key > (*p, *v)) {
                best = Some((key.0, key.1, f.name().clone()));
            }
        }
        plan.group_column = best.map(|b| b.2);
        // Needle: the value of the lookup column in the middle row (or the first non-null
        // after it).
        for name in NEEDLE_COLUMNS {
            let Ok(i) = schema.index_of(name) else {
                continue;
            };
            let total: usize = p.sorted.iter().map(RecordBatch::num_rows).sum();
            let mut skip = total / 2;
            'found: for b in &p.sorted {
                if skip >= b.num_rows() {
                    skip -= b.num_rows();
                    continue;
                }
                let col = b.column(i);
                for r in skip..b.num_rows() {
                    if let Some(lit) = sql_literal(col.as_ref(), r) {
                        plan.needle = Some((name.to_string(), lit));
                        break 'found;
                    }
                }
                skip = 0;
            }
            if plan.needle.is_some() {
                break;
            }
        }
        let _ = first;
        plan
    }

    /// The SQL of each query, by name; a query without a suitable column is left out.
    pub fn queries(&self) -> Vec<(&'static str, String)> {
        let mut q = vec![("scan", "SELECT * FROM t".to_string())];
        if let (Some(tc), Some((a, b))) = (&self.time_column, self.window) {
            q.push((
                "filter",
                format!(
                    "SELECT count(*) FROM t WHERE {c} >= {} AND {c} < {}",
                    ts_literal(a),
                    ts_literal(b),
                    c = ident(tc)
                ),
            ));
        }
        if let Some(g) = &self.group_column {
            q.push((
                "topn",
                format!(
                    "SELECT {c}, count(*) AS n FROM t GROUP BY {c} ORDER BY n DESC LIMIT 10",
                    c = ident(g)
                ),
            ));
        }
        if let Some((c, v)) = &self.needle {
            q.push((
                "needle",
                format!("SELECT count(*) FROM t WHERE {} = {v}", ident(c)),
            ));
        }
        q
    }
}

/// A column path as a SQL identifier (`id.orig_h` -> `"id"['orig_h']` is not needed: only
/// top-level or time columns are used, which have no dots in silt's schemas).
fn ident(c: &str) -> String {
    format!("\"{}\"", c.replace('"', "\"\""))
}

fn ts_literal(us: i64) -> String {
    let t = chrono::DateTime::from_timestamp_micros(us).unwrap_or_default();
    format!("TIMESTAMP '{}'", t.format("%Y-%m-%d %H:%M:%S%.6f"))
}

/// The value at row `r` as a SQL literal, for text and integer columns.
fn sql_literal(a: &dyn Array, r: usize) -> Option<String> {
    if a.is_null(r) {
        return None;
    }
    match a.data_type() {
        DataType::Utf8 => Some(format!(
            "'{}'",
            a.as_string::<i32>().value(r).replace('\'', "''")
        )),
        DataType::Int64 => Some(
            a.as_primitive::<arrow::datatypes::Int64Type>()
                .value(r)
                .to_string(),
        ),
        DataType::UInt64 => Some(
            a.as_primitive::<arrow::datatypes::UInt64Type>()
                .value(r)
                .to_string(),
        ),
        DataType::Timestamp(TimeUnit::Microsecond, _) => None,
        _ => None,
    }
}

/// One query's figures.
#[derive(Debug, Clone)]
pub struct ReadResult {
    pub query: &'static str,
    pub wall_s: f64,
    pub bytes_read: u64,
    /// Rows returned by `scan`, the count of `filter`/`needle`, the groups of `topn`.
    pub value: u64,
}

/// Runs the plan's queries over one file.
pub fn run_queries(
    rt: &tokio::runtime::Runtime,
    plan: &ReadPlan,
    store: StoreKind,
    path: &Path,
) -> anyhow::Result<Vec<ReadResult>> {
    let mut out = Vec::new();
    for (name, sql) in plan.queries() {
        let r = rt.block_on(run_one(store, path, &sql))?;
        out.push(ReadResult {
            query: name,
            wall_s: r.0,
            bytes_read: r.1,
            value: r.2,
        });
    }
    Ok(out)
}

async fn run_one(store: StoreKind, path: &Path, sql: &str) -> anyhow::Result<(f64, u64, u64)> {
    let counter = Arc::new(AtomicU64::new(0));
    let ctx = SessionContext::new();
    let url = url::Url::parse("file://")?;
    ctx.register_object_store(
        &url,
        Arc::new(CountingStore {
            inner: Arc::new(LocalFileSystem::new()),
            bytes: counter.clone(),
        }),
    );
    let p = std::fs::canonicalize(path)?;
    let p = p.to_string_lossy();
    let t0 = Instant::now();
    match store {
        StoreKind::Parquet => {
            ctx.register_parquet("t", p.as_ref(), ParquetReadOptions::default())
                .await?
        }
        StoreKind::Feather => {
            let opts = ArrowReadOptions {
                file_extension: ".feather",
                ..Default::default()
            };
            ctx.register_arrow("t", p.as_ref(), opts).await?
        }
    }
    let df = ctx.sql(sql).await?;
    let mut stream = df.execute_stream().await?;
    let mut rows = 0u64;
    let mut value = None;
    while let Some(b) = stream.next().await {
        let b = b?;
        rows += b.num_rows() as u64;
        if value.is_none() && b.num_columns() == 1 && b.num_rows() == 1 {
            value = b
                .column(0)
                .as_primitive_opt::<arrow::datatypes::Int64Type>()
                .map(|c| c.value(0) as u64);
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let value = if sql.starts_with("SELECT count(*)") {
        value.unwrap_or(0)
    } else {
        rows
    };
    Ok((wall, counter.load(Ordering::Relaxed), value))
}

/// An [`ObjectStore`] that counts the bytes of every range read from the store it wraps.
#[derive(Debug)]
pub struct CountingStore {
    pub inner: Arc<dyn ObjectStore>,
    pub bytes: Arc<AtomicU64>,
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &ObjPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let head = options.head;
        let r = self.inner.get_opts(location, options).await?;
        if !head {
            self.bytes
                .fetch_add(r.range.end - r.range.start, Ordering::Relaxed);
        }
        Ok(r)
    }

    async fn get_ranges(
        &self,
        location: &ObjPath,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let r = self.inner.get_ranges(location, ranges).await?;
        let n: usize = r.iter().map(Bytes::len).sum();
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(r)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjPath,
        to: &ObjPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
