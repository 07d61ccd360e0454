//! The Arrow Flight SQL front end: `silt_flight`'s server over the same read-only queries as
//! `/v1/query` (the lake and the rows in memory, one snapshot per statement).
//!
//! Touches nothing: queries read through `silt_query`.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use futures::stream::BoxStream;
use futures::StreamExt;

use silt_flight::{EngineError, ErrorKind};

use crate::Shared;

/// See the module documentation.
pub struct Engine(pub Arc<Shared>);

impl Engine {
    fn session(&self) -> Result<silt_query::SiltSession, EngineError> {
        Ok(self.pinned()?.0)
    }

    /// The session and the pin to hold while its results stream (see `Shared::session`).
    fn pinned(&self) -> Result<(silt_query::SiltSession, Arc<()>), EngineError> {
        self.0
            .session()
            .map_err(|e| EngineError::new(ErrorKind::Internal, format!("{e:#}")))
    }
}

#[async_trait::async_trait]
impl silt_flight::QueryEngine for Engine {
    async fn plan_schema(
        &self,
        sql: &str,
        params: Option<&RecordBatch>,
    ) -> Result<SchemaRef, EngineError> {
        self.session()?
            .schema_of(sql, params)
            .await
            .map_err(query_error)
    }

    async fn prepare(&self, sql: &str) -> Result<(SchemaRef, SchemaRef), EngineError> {
        let (schema, params) = self.session()?.prepare(sql).await.map_err(query_error)?;
        Ok((schema, Arc::new(arrow::datatypes::Schema::new(params))))
    }

    async fn execute(
        &self,
        sql: &str,
        params: Option<&RecordBatch>,
    ) -> Result<BoxStream<'static, Result<RecordBatch, EngineError>>, EngineError> {
        let slot = self
            .0
            .query_slot()
            .map_err(|e| EngineError::new(ErrorKind::Busy, e))?;
        let (session, pin) = self.pinned()?;
        let limit = self.0.cfg.query_timeout;
        let deadline = tokio::time::Instant::now() + limit;
        let late = move || {
            EngineError::new(
                ErrorKind::Timeout,
                format!("the query ran longer than {limit:?} (--query-timeout)"),
            )
        };
        let (_, stream) = tokio::time::timeout_at(deadline, session.query_stream(sql, params))
            .await
            .map_err(|_| late())?
            .map_err(query_error)?;
        // The stream reads files as it goes: it holds the pin until it is dropped. Past
        // --query-timeout, as over HTTP, the query stops (its stream is dropped) with an error.
        let stream = stream.map(move |b| {
            let _held = (&pin, &slot);
            b
        });
        // A file whose footer reads but whose data does not is named, as over HTTP (reading
        // the tables' files again blocks, for at most the budget).
        let (root, sql) = (session.lake().root.clone(), sql.to_string());
        let stream = stream.then(move |b| {
            let (root, sql) = (root.clone(), sql.clone());
            async move {
                match b {
                    Ok(b) => Ok(b),
                    Err(e) if silt_query::damage::decode_failure(&e) => {
                        let budget = std::time::Duration::from_secs(10);
                        let e = tokio::task::spawn_blocking(move || {
                            silt_query::damage::explain_damage(e, &root, &sql, budget)
                        })
                        .await
                        .map_err(|j| EngineError::new(ErrorKind::Internal, format!("{j}")))?;
                        Err(EngineError::new(ErrorKind::Damaged, format!("{e:#}")))
                    }
                    Err(e) => Err(query_error(e)),
                }
            }
        });
        Ok(
            futures::stream::unfold(Some(stream.boxed()), move |st| async move {
                let mut st = st?;
                match tokio::time::timeout_at(deadline, st.next()).await {
                    Ok(Some(item)) => Some((item, Some(st))),
                    Ok(None) => None,
                    Err(_) => Some((Err(late()), None)),
                }
            })
            // Polled again after its end it stays ended (an unfold panics): the service chains
            // it behind the first batch it took, which for an empty result is its end.
            .fuse()
            .boxed(),
        )
    }

    async fn tables(&self) -> Result<Vec<(String, String, String, SchemaRef)>, EngineError> {
        let s = self.session()?;
        let mut out = Vec::new();
        for t in s.tables() {
            let schema = s
                .context()
                // From its parts, not parsed as SQL: `a.1b` (a name HTTP ingest and Forward
                // tags allow) does not parse as a table reference.
                .table_provider(datafusion::common::TableReference::partial(
                    t.module(),
                    t.name(),
                ))
                .await
                .map_err(|e| EngineError::new(ErrorKind::Internal, e.to_string()))?
                .schema();
            out.push((
                "datafusion".to_string(),
                t.module().to_string(),
                t.name().to_string(),
                schema,
            ));
        }
        Ok(out)
    }
}

/// A query's error: a damaged file's is the server's (`DATA_LOSS`, HTTP 500), any other the
/// request's, as `/v1/query` decides.
fn query_error(e: anyhow::Error) -> EngineError {
    let kind = if silt_query::damage::decode_failure(&e) {
        ErrorKind::Damaged
    } else {
        ErrorKind::Request
    };
    EngineError::new(kind, format!("{e:#}"))
}
