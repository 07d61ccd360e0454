//! The Flight SQL service over a [`QueryEngine`]: `arrow-flight`'s
//! [`FlightSqlService`] dispatches the protocol's commands here.
//!
//! - Queries: GetFlightInfo(CommandStatementQuery) plans the SQL (a bad query fails here, with
//!   the engine's message) and answers the plan's schema and one endpoint whose ticket carries
//!   the SQL ([`crate::handle`]); DoGet runs it and streams the engine's batches through the
//!   standard [`FlightDataEncoderBuilder`] as they come (dictionaries hydrated, batches cut to
//!   the message size), so a result is never held whole in memory.
//! - Prepared statements (what JDBC and ADBC use): CreatePreparedStatement plans and answers a
//!   handle with the dataset schema and the parameters' (`?` or `$1` placeholders, typed as the
//!   engine inferred them); DoPut on it binds one row of values and answers a new handle that
//!   carries them (an empty binding, which some clients send, changes nothing); GetFlightInfo
//!   and DoGet on CommandPreparedStatementQuery run it; ClosePreparedStatement is a no-op.
//! - Metadata: GetCatalogs, GetDbSchemas, GetTables (with `include_schema`), GetTableTypes and
//!   GetSqlInfo, answered in one batch ([`crate::metadata`]).
//! - Refused: updates, ingestion and every other DoPut (`permission_denied`: the server is
//!   read-only), Substrait plans, transactions, savepoints, cancellation, primary/foreign keys,
//!   XDBC type info and DoExchange (`unimplemented`).
//!
//! Engine errors, whether from planning, from starting a query or in the middle of its
//! stream, reach the client with the engine's message and the status of its kind
//! ([`crate::ErrorKind`]: `invalid_argument` for the request's fault, `data_loss` for a damaged
//! file, `deadline_exceeded`, `resource_exhausted`, `internal`).
//!
//! Touches nothing but the engine.

use std::pin::Pin;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use arrow::ipc::writer::IpcWriteOptions;
use arrow::record_batch::RecordBatch;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionBeginSavepointRequest, ActionBeginSavepointResult, ActionBeginTransactionRequest,
    ActionBeginTransactionResult, ActionCancelQueryRequest, ActionCancelQueryResult,
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, ActionCreatePreparedSubstraitPlanRequest,
    ActionEndSavepointRequest, ActionEndTransactionRequest, Any, Command, CommandGetCatalogs,
    CommandGetCrossReference, CommandGetDbSchemas, CommandGetExportedKeys, CommandGetImportedKeys,
    CommandGetPrimaryKeys, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables,
    CommandGetXdbcTypeInfo, CommandPreparedStatementQuery, CommandPreparedStatementUpdate,
    CommandStatementIngest, CommandStatementQuery, CommandStatementSubstraitPlan,
    CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt, SqlInfo,
    TicketStatementQuery,
};
use arrow_flight::{
    Action, FlightData, FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest,
    HandshakeResponse, IpcMessage, SchemaAsIpc, Ticket,
};
use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::{TokenCheck, AUTHORIZATION};
use crate::metadata::{self, TableEntry};
use crate::{handle, EngineError, ErrorKind, FlightConfig, QueryEngine};

/// Parameter values a client sends (DoPut), decoded: a panic of arrow-ipc's on a damaged
/// message is an error (a malformed schema panics rather than fails), and so the end of the
/// request rather than of the task serving the connection.
struct CheckedBatches(FlightRecordBatchStream);

impl Stream for CheckedBatches {
    type Item = Result<RecordBatch, FlightError>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let inner = &mut self.0;
        silt_core::panics::catch(|| inner.poll_next_unpin(cx)).unwrap_or_else(|p| {
            std::task::Poll::Ready(Some(Err(FlightError::DecodeError(format!(
                "damaged Arrow IPC data in the parameter values (the decoder panicked on it: {p})"
            )))))
        })
    }
}

/// A client's FlightData checked by [`silt_core::ipc_check`] before arrow-ipc decodes it: a
/// compressed buffer claiming terabytes would otherwise be reserved, and abort the server.
fn check_flight_data(d: &FlightData) -> Result<(), FlightError> {
    match arrow::ipc::root_as_message(&d.data_header) {
        Ok(m) => silt_core::ipc_check::check_body(&m, &d.data_body)
            .map_err(|e| FlightError::DecodeError(format!("parameter values: {e}"))),
        // arrow-flight says what is wrong with it.
        Err(_) => Ok(()),
    }
}

/// What DoGet answers.
type DoGetStream = <FlightSqlServer as FlightService>::DoGetStream;
/// What Handshake answers.
type HandshakeStream = Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>;

/// The largest message the encoder aims for, whatever the configured limit: 2 MiB is what
/// gRPC clients accept by default (4 MiB) with room for the IPC framing.
const MAX_FLIGHT_DATA_SIZE: usize = 2 << 20;

/// Why the server refuses writes.
const READ_ONLY: &str = "silt's Flight SQL server is read-only";

/// The Flight SQL service. Serve it with [`crate::serve`] (which also puts the token check in
/// front), or wrap it in [`arrow_flight::flight_service_server::FlightServiceServer`].
pub struct FlightSqlServer {
    engine: Arc<dyn QueryEngine>,
    auth: TokenCheck,
    max_flight_data_size: usize,
}

impl FlightSqlServer {
    /// A service over `engine`. The token in `cfg` is only used to answer Handshake: the
    /// check itself is [`TokenCheck`], run by [`crate::flight_service`] before every call.
    pub fn new(engine: Arc<dyn QueryEngine>, cfg: &FlightConfig) -> Self {
        FlightSqlServer {
            engine,
            auth: TokenCheck::new(cfg.token.clone()),
            max_flight_data_size: (cfg.max_message_bytes / 2).clamp(1024, MAX_FLIGHT_DATA_SIZE),
        }
    }

    /// Plans `sql` with `params` bound, mapping the engine's error.
    async fn plan(&self, sql: &str, params: Option<&RecordBatch>) -> Result<SchemaRef, Status> {
        self.engine
            .plan_schema(sql, params)
            .await
            .map_err(engine_error)
    }

    /// A FlightInfo with one endpoint whose ticket is `ticket`.
    #[allow(clippy::result_large_err)] // tonic's own error type
    fn flight_info(
        schema: &Schema,
        ticket: Bytes,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = FlightInfo::new()
            .try_with_schema(&hydrated(schema))
            .map_err(|e| Status::internal(format!("cannot encode the result schema: {e}")))?
            .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket)))
            .with_descriptor(descriptor)
            .with_ordered(true);
        Ok(Response::new(info))
    }

    /// A FlightInfo whose one ticket is `command` (as `Any`), which DoGet dispatches on.
    #[allow(clippy::result_large_err)] // tonic's own error type
    fn command_info(
        schema: &Schema,
        command: impl ProstMessageExt,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        Self::flight_info(schema, command.as_any().encode_to_vec().into(), descriptor)
    }

    /// Runs the statement and streams its result.
    async fn run(&self, st: handle::Statement) -> Result<Response<DoGetStream>, Status> {
        // Fused: after an empty result's end, `chain` below polls it once more.
        let mut batches = self
            .engine
            .execute(&st.sql, st.params.as_ref())
            .await
            .map_err(engine_error)?
            .fuse();
        // The first batch gives the schema; an error before any data is the call's error, not
        // one in the middle of a stream. An empty result still sends its schema (planned again).
        let first = batches.next().await.transpose().map_err(engine_error)?;
        let schema = match &first {
            Some(batch) => batch.schema(),
            None => self.plan(&st.sql, st.params.as_ref()).await?,
        };
        let batches = futures::stream::iter(first.map(Ok))
            .chain(batches)
            .map_err(|e| FlightError::Tonic(Box::new(engine_error(e))));
        let data = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .with_max_flight_data_size(self.max_flight_data_size)
            .build(batches)
            .map_err(Status::from);
        Ok(Response::new(Box::pin(data)))
    }

    /// The one batch of a metadata answer, encoded.
    fn one_batch(batch: RecordBatch) -> Response<DoGetStream> {
        let data = FlightDataEncoderBuilder::new()
            .with_schema(batch.schema())
            .build(futures::stream::once(async { Ok(batch) }))
            .map_err(Status::from);
        Response::new(Box::pin(data))
    }

    /// The engine's tables.
    async fn tables(&self) -> Result<Vec<TableEntry>, Status> {
        self.engine.tables().await.map_err(engine_error)
    }
}

/// An engine error for the client, with the status of its kind.
fn engine_error(e: EngineError) -> Status {
    match e.kind {
        ErrorKind::Request => Status::invalid_argument(e.message),
        ErrorKind::Damaged => Status::data_loss(e.message),
        ErrorKind::Timeout => Status::deadline_exceeded(e.message),
        ErrorKind::Busy => Status::resource_exhausted(e.message),
        ErrorKind::Internal => Status::internal(e.message),
    }
}

/// A metadata builder's error (a bug, not the client's).
fn build_error(e: FlightError) -> Status {
    Status::internal(format!("cannot build the metadata answer: {e}"))
}

/// Refusal of something that writes.
fn read_only(what: &str) -> Status {
    Status::permission_denied(format!("{READ_ONLY}: {what} is not supported"))
}

/// Refusal of something the server does not do.
fn unsupported(what: &str) -> Status {
    Status::unimplemented(format!(
        "{what} is not supported by silt's Flight SQL server"
    ))
}

/// `schema` as DoGet sends it: dictionaries replaced by their values (the encoder hydrates
/// them), so FlightInfo and the stream agree.
fn hydrated(schema: &Schema) -> Schema {
    fn field(f: &FieldRef) -> Field {
        let data_type = match f.data_type() {
            DataType::Dictionary(_, value) => value.as_ref().clone(),
            DataType::Struct(children) => DataType::Struct(children.iter().map(field).collect()),
            DataType::List(child) => DataType::List(Arc::new(field(child))),
            DataType::LargeList(child) => DataType::LargeList(Arc::new(field(child))),
            DataType::FixedSizeList(child, n) => {
                DataType::FixedSizeList(Arc::new(field(child)), *n)
            }
            DataType::Map(entries, sorted) => DataType::Map(Arc::new(field(entries)), *sorted),
            other => other.clone(),
        };
        f.as_ref().clone().with_data_type(data_type)
    }
    Schema::new(schema.fields().iter().map(field).collect::<Vec<_>>())
        .with_metadata(schema.metadata().clone())
}

/// `schema` as an IPC message, the form prepared statements answer with.
#[allow(clippy::result_large_err)] // tonic's own error type
fn schema_bytes(schema: &Schema) -> Result<Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(&hydrated(schema), &IpcWriteOptions::default())
        .try_into()
        .map_err(|e| Status::internal(format!("cannot encode the result schema: {e}")))?;
    Ok(bytes)
}

#[tonic::async_trait]
impl FlightSqlService for FlightSqlServer {
    type FlightService = FlightSqlServer;

    /// The token check already ran (see [`crate::auth`]): answer with the bearer token.
    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<HandshakeStream>, Status> {
        let reply = HandshakeResponse {
            protocol_version: 0,
            payload: self.auth.handshake_payload().into(),
        };
        let stream: HandshakeStream = Box::pin(futures::stream::iter([Ok(reply)]));
        let mut response = Response::new(stream);
        if let Some(value) = self.auth.handshake_metadata() {
            response.metadata_mut().insert(AUTHORIZATION, value);
        }
        Ok(response)
    }

    // ---- queries

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        if query.transaction_id.is_some() {
            return Err(unsupported("transactions"));
        }
        let schema = self.plan(&query.query, None).await?;
        let ticket = TicketStatementQuery {
            statement_handle: handle::encode(&query.query),
        };
        Self::command_info(&schema, ticket, request.into_inner())
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.run(handle::decode(&ticket.statement_handle)?).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        if query.transaction_id.is_some() {
            return Err(unsupported("transactions"));
        }
        let (schema, params) = self
            .engine
            .prepare(&query.query)
            .await
            .map_err(engine_error)?;
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle::encode(&query.query),
            dataset_schema: schema_bytes(&schema)?,
            parameter_schema: schema_bytes(&params)?,
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        // Handles hold no server state; still refuse what this server never handed out.
        handle::decode(&query.prepared_statement_handle).map(drop)
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let st = handle::decode(&cmd.prepared_statement_handle)?;
        let schema = self.plan(&st.sql, st.params.as_ref()).await?;
        Self::command_info(&schema, cmd, request.into_inner())
    }

    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.run(handle::decode(&query.prepared_statement_handle)?)
            .await
    }

    /// Binding parameters: one row of values gives a new handle that carries them (checked
    /// against the statement by planning it); an empty binding (no columns or no rows) keeps
    /// the handle. Several rows are refused: a query runs with one row of values.
    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let st = handle::decode(&query.prepared_statement_handle)?;
        let mut batches = CheckedBatches(FlightRecordBatchStream::new_from_flight_data(
            request
                .into_inner()
                .map_err(FlightError::from)
                .and_then(|d| async move { check_flight_data(&d).map(|()| d) }),
        ));
        let mut bound: Vec<RecordBatch> = Vec::new();
        while let Some(batch) = batches.next().await {
            let batch = batch.map_err(|e| Status::invalid_argument(e.to_string()))?;
            if batch.num_columns() > 0 && batch.num_rows() > 0 {
                bound.push(batch);
            }
        }
        let rows: usize = bound.iter().map(RecordBatch::num_rows).sum();
        let handle = match bound.as_slice() {
            [] => query.prepared_statement_handle,
            [one] if rows == 1 => {
                self.plan(&st.sql, Some(one)).await?;
                handle::encode_bound(&st.sql, one)?
            }
            _ => {
                return Err(unsupported(&format!(
                    "binding {rows} rows of parameter values to a query (bind one row, and \
                     execute once per row)"
                )))
            }
        };
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle),
        })
    }

    // ---- metadata

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        Self::command_info(&schema, query, request.into_inner())
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = metadata::catalogs(query, &self.tables().await?).map_err(build_error)?;
        Ok(Self::one_batch(batch))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        Self::command_info(&schema, query, request.into_inner())
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = metadata::db_schemas(query, &self.tables().await?).map_err(build_error)?;
        Ok(Self::one_batch(batch))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        Self::command_info(&schema, query, request.into_inner())
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = metadata::tables(query, &self.tables().await?).map_err(build_error)?;
        Ok(Self::one_batch(batch))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        Self::command_info(&schema, query, request.into_inner())
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = metadata::table_types(query).map_err(build_error)?;
        Ok(Self::one_batch(batch))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = metadata::sql_info().schema();
        Self::command_info(&schema, query, request.into_inner())
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = query
            .into_builder(metadata::sql_info())
            .build()
            .map_err(build_error)?;
        Ok(Self::one_batch(batch))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}

    // ---- refusals: writes

    async fn do_put_statement_update(
        &self,
        _ticket: CommandStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        Err(read_only("executing updates"))
    }

    async fn do_put_prepared_statement_update(
        &self,
        _query: CommandPreparedStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        // What ADBC's `executemany` and JDBC's `executeUpdate`/`executeBatch` send, whatever
        // the statement is: a SELECT too.
        Err(Status::permission_denied(format!(
            "{READ_ONLY}: executing a prepared statement as an update (ADBC executemany, JDBC \
             executeUpdate or executeBatch) is not supported; run it as a query with execute() \
             (executeQuery in JDBC), binding one row of parameters at a time"
        )))
    }

    async fn do_put_statement_ingest(
        &self,
        _ticket: CommandStatementIngest,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        Err(read_only("bulk ingestion"))
    }

    async fn do_put_substrait_plan(
        &self,
        _query: CommandStatementSubstraitPlan,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        Err(read_only("executing Substrait plans"))
    }

    async fn do_put_fallback(
        &self,
        _request: Request<PeekableFlightDataStream>,
        message: Any,
    ) -> Result<Response<<Self as FlightService>::DoPutStream>, Status> {
        Err(read_only(&format!("DoPut ({})", message.type_url)))
    }

    // ---- refusals: what the server does not do

    async fn get_flight_info_substrait_plan(
        &self,
        _query: CommandStatementSubstraitPlan,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(unsupported("Substrait plans (send SQL)"))
    }

    async fn do_action_create_prepared_substrait_plan(
        &self,
        _query: ActionCreatePreparedSubstraitPlanRequest,
        _request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        Err(unsupported("Substrait plans (send SQL)"))
    }

    async fn do_action_begin_transaction(
        &self,
        _query: ActionBeginTransactionRequest,
        _request: Request<Action>,
    ) -> Result<ActionBeginTransactionResult, Status> {
        Err(unsupported("transactions"))
    }

    async fn do_action_end_transaction(
        &self,
        _query: ActionEndTransactionRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        Err(unsupported("transactions"))
    }

    async fn do_action_begin_savepoint(
        &self,
        _query: ActionBeginSavepointRequest,
        _request: Request<Action>,
    ) -> Result<ActionBeginSavepointResult, Status> {
        Err(unsupported("savepoints"))
    }

    async fn do_action_end_savepoint(
        &self,
        _query: ActionEndSavepointRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        Err(unsupported("savepoints"))
    }

    async fn do_action_cancel_query(
        &self,
        _query: ActionCancelQueryRequest,
        _request: Request<Action>,
    ) -> Result<ActionCancelQueryResult, Status> {
        Err(unsupported(
            "cancelling queries (close the DoGet stream instead)",
        ))
    }

    async fn get_flight_info_primary_keys(
        &self,
        _query: CommandGetPrimaryKeys,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(unsupported("primary keys"))
    }

    async fn get_flight_info_exported_keys(
        &self,
        _query: CommandGetExportedKeys,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(unsupported("foreign keys"))
    }

    async fn get_flight_info_imported_keys(
        &self,
        _query: CommandGetImportedKeys,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(unsupported("foreign keys"))
    }

    async fn get_flight_info_cross_reference(
        &self,
        _query: CommandGetCrossReference,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(unsupported("foreign keys"))
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        _query: CommandGetXdbcTypeInfo,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(unsupported("XDBC type info"))
    }

    async fn get_flight_info_fallback(
        &self,
        cmd: Command,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(match cmd {
            Command::CommandStatementUpdate(_)
            | Command::CommandPreparedStatementUpdate(_)
            | Command::CommandStatementIngest(_) => read_only("GetFlightInfo on an update"),
            other => unsupported(&format!("GetFlightInfo on {}", other.type_url())),
        })
    }

    async fn do_exchange_fallback(
        &self,
        _request: Request<Streaming<FlightData>>,
    ) -> Result<Response<<Self as FlightService>::DoExchangeStream>, Status> {
        Err(unsupported("DoExchange"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hydrated_replaces_dictionaries() {
        let dict = DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8));
        let schema = Schema::new(vec![
            Field::new("part", dict.clone(), false),
            Field::new_list("l", Field::new("item", dict, true), true),
            Field::new("n", DataType::Int64, true),
        ]);
        let h = hydrated(&schema);
        assert_eq!(h.field(0).data_type(), &DataType::Utf8);
        assert!(!h.field(0).is_nullable());
        assert_eq!(
            h.field(1).data_type(),
            &DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
        );
        assert_eq!(h.field(2).data_type(), &DataType::Int64);
    }
}
