//! The Feather files of an object-store lake, checked as a query reads them.
//!
//! arrow-ipc reserves the lengths a Feather file gives (a compressed buffer's uncompressed size)
//! before it reads anything, so a damaged or forged length aborts the process (see
//! `silt_core::ipc_check`). A local lake's Feather files are checked when the index opens them
//! (`lake.rs`), reading only their metadata and length prefixes; in an object store that would
//! be one request per buffer, so there DataFusion's own reads are checked instead: its Arrow
//! scan ([`ArrowSource`](datafusion::datasource::physical_plan::ArrowSource)) runs over
//! [`CheckedStore`], which checks a whole file it fetches (`silt_lake::ipc`'s checks, on the
//! bytes DataFusion would decode) and each block a ranged scan fetches
//! (`silt_core::ipc_check::check_block`) before handing them on. A damaged file is then an error
//! naming it, which the query reports as damage (`crate::damage`), not an abort.
//!
//! Touches nothing but the store DataFusion hands the scan.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Result;
use datafusion::datasource::physical_plan::{FileOpener, FileScanConfig, FileSource};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::object_store::path::Path as ObjPath;
use datafusion::object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use datafusion::physical_expr::projection::ProjectionExprs;
use datafusion::physical_expr::{LexOrdering, PhysicalExpr};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::DisplayFormatType;
use futures::stream::BoxStream;

/// A Feather scan whose reads go through [`CheckedStore`]; everything else is the inner
/// source's (DataFusion's `ArrowSource`).
pub struct CheckedSource(pub Arc<dyn FileSource>);

impl CheckedSource {
    fn wrap(inner: Arc<dyn FileSource>) -> Arc<dyn FileSource> {
        Arc::new(Self(inner))
    }
}

impl FileSource for CheckedSource {
    fn create_file_opener(
        &self,
        object_store: Arc<dyn ObjectStore>,
        base_config: &FileScanConfig,
        partition: usize,
    ) -> Result<Arc<dyn FileOpener>> {
        let store = Arc::new(CheckedStore(object_store));
        self.0.create_file_opener(store, base_config, partition)
    }

    fn table_schema(&self) -> &TableSchema {
        self.0.table_schema()
    }

    fn with_batch_size(&self, batch_size: usize) -> Arc<dyn FileSource> {
        Self::wrap(self.0.with_batch_size(batch_size))
    }

    fn filter(&self) -> Option<Arc<dyn PhysicalExpr>> {
        self.0.filter()
    }

    fn projection(&self) -> Option<&ProjectionExprs> {
        self.0.projection()
    }

    fn metrics(&self) -> &ExecutionPlanMetricsSet {
        self.0.metrics()
    }

    fn file_type(&self) -> &str {
        self.0.file_type()
    }

    fn fmt_extra(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.fmt_extra(t, f)
    }

    fn supports_repartitioning(&self) -> bool {
        self.0.supports_repartitioning()
    }

    fn repartitioned(
        &self,
        target_partitions: usize,
        repartition_file_min_size: usize,
        output_ordering: Option<LexOrdering>,
        config: &FileScanConfig,
    ) -> Result<Option<FileScanConfig>> {
        self.0.repartitioned(
            target_partitions,
            repartition_file_min_size,
            output_ordering,
            config,
        )
    }

    fn try_pushdown_projection(
        &self,
        projection: &ProjectionExprs,
    ) -> Result<Option<Arc<dyn FileSource>>> {
        Ok(self.0.try_pushdown_projection(projection)?.map(Self::wrap))
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.0.apply_expressions(f)
    }
}

/// An object store whose whole-object reads and ranged block reads are checked as Arrow IPC
/// (see the module documentation). Writes, lists and footer reads pass through.
#[derive(Debug)]
pub struct CheckedStore(pub Arc<dyn ObjectStore>);

impl fmt::Display for CheckedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CheckedFeather({})", self.0)
    }
}

/// The error a damaged file gives: names it (and reads as damage to `crate::damage`).
fn damaged(location: &ObjPath, why: impl fmt::Display) -> datafusion::object_store::Error {
    datafusion::object_store::Error::Generic {
        store: "silt",
        source: format!("damaged Arrow IPC data in {location}: {why}").into(),
    }
}

/// `silt_lake::ipc`'s checks of a whole Feather file: its footer, schema and dictionaries, then
/// every record batch's metadata and compressed lengths.
fn check_file(bytes: &Bytes) -> std::result::Result<(), String> {
    let mut r =
        silt_lake::ipc::open(std::io::Cursor::new(bytes.as_ref())).map_err(|e| e.to_string())?;
    r.check_batches().map_err(|e| e.to_string())
}

/// [`silt_core::ipc_check::check_block`] on a block fetched alone: its metadata length is the
/// encapsulated message's prefix and length (the Arrow writer's `metaDataLength`).
fn check_fetched_block(block: &[u8]) -> std::result::Result<(), String> {
    let meta_len = silt_core::ipc_check::prefix(block)
        .and_then(|(skip, len)| Some(skip + usize::try_from(len).ok()?));
    match meta_len {
        Some(l) if l <= block.len() => silt_core::ipc_check::check_block(block, l),
        _ => Err("its message's length does not fit the block".into()),
    }
}

#[async_trait::async_trait]
impl ObjectStore for CheckedStore {
    async fn put_opts(
        &self,
        location: &ObjPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> datafusion::object_store::Result<PutResult> {
        self.0.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjPath,
        opts: PutMultipartOptions,
    ) -> datafusion::object_store::Result<Box<dyn MultipartUpload>> {
        self.0.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjPath,
        options: GetOptions,
    ) -> datafusion::object_store::Result<GetResult> {
        // A ranged read is the footer's (the blocks come through `get_ranges`); a head has no
        // bytes.
        if options.range.is_some() || options.head {
            return self.0.get_opts(location, options).await;
        }
        let r = self.0.get_opts(location, options).await?;
        let (meta, range, attributes) = (r.meta.clone(), r.range.clone(), r.attributes.clone());
        let bytes = r.bytes().await?;
        let checked = bytes.clone();
        tokio::task::spawn_blocking(move || check_file(&checked))
            .await
            .map_err(|e| damaged(location, e))?
            .map_err(|e| damaged(location, e))?;
        Ok(GetResult {
            payload: GetResultPayload::Stream(Box::pin(futures::stream::once(async { Ok(bytes) }))),
            meta,
            range,
            attributes,
        })
    }

    async fn get_ranges(
        &self,
        location: &ObjPath,
        ranges: &[Range<u64>],
    ) -> datafusion::object_store::Result<Vec<Bytes>> {
        let blocks = self.0.get_ranges(location, ranges).await?;
        for (b, r) in blocks.iter().zip(ranges) {
            check_fetched_block(b)
                .map_err(|e| damaged(location, format!("the block at offset {}: {e}", r.start)))?;
        }
        Ok(blocks)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, datafusion::object_store::Result<ObjPath>>,
    ) -> BoxStream<'static, datafusion::object_store::Result<ObjPath>> {
        self.0.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjPath>,
    ) -> BoxStream<'static, datafusion::object_store::Result<ObjectMeta>> {
        self.0.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjPath>,
    ) -> datafusion::object_store::Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjPath,
        to: &ObjPath,
        options: CopyOptions,
    ) -> datafusion::object_store::Result<()> {
        self.0.copy_opts(from, to, options).await
    }
}
