//! The server through `arrow-flight`'s own Flight SQL client: statement queries, prepared
//! statements, catalog calls, errors and refusals, the token check, and streaming.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, AsArray, BinaryArray, BooleanArray, StringArray, UnionArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Int64Type, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use arrow_flight::error::FlightError;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{CommandGetDbSchemas, CommandGetTables, SqlInfo};
use arrow_flight::{FlightInfo, IpcMessage};
use common::{Server, BIG_BATCHES, BIG_ROWS};
use futures::{StreamExt, TryStreamExt};
use silt_flight::FlightConfig;
use tonic::transport::Channel;
use tonic::Code;

async fn client(server: &Server, token: Option<&str>) -> FlightSqlServiceClient<Channel> {
    let channel = Channel::from_shared(server.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = FlightSqlServiceClient::new(channel);
    if let Some(t) = token {
        c.set_token(t.to_string());
    }
    c
}

/// Every batch of every endpoint of `info`.
async fn fetch(
    c: &mut FlightSqlServiceClient<Channel>,
    info: FlightInfo,
) -> Result<Vec<RecordBatch>, FlightError> {
    let mut out = Vec::new();
    for endpoint in info.endpoint {
        let ticket = endpoint.ticket.expect("endpoint has a ticket");
        let batches: Vec<RecordBatch> = c.do_get(ticket).await?.try_collect().await?;
        out.extend(batches);
    }
    Ok(out)
}

/// The gRPC status inside a client error.
fn status(e: &FlightError) -> (Code, String) {
    match e {
        FlightError::Tonic(s) => (s.code(), s.message().to_string()),
        other => panic!("not a gRPC status: {other:?}"),
    }
}

fn one(batches: &[RecordBatch]) -> RecordBatch {
    assert!(!batches.is_empty());
    concat_batches(&batches[0].schema(), batches).unwrap()
}

fn assert_events(batch: &RecordBatch) {
    let expected = one(&common::events_batches());
    assert_eq!(batch.schema(), expected.schema());
    assert_eq!(batch, &expected);
    // Spot checks that do not rely on RecordBatch equality.
    assert!(matches!(
        batch.column_by_name("ts").unwrap().data_type(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC"
    ));
    assert!(batch.column_by_name("name").unwrap().is_null(1));
    assert!(batch.column_by_name("attrs").unwrap().is_null(1));
    assert_eq!(
        batch
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec(),
        vec![1, 2, 3]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_query() {
    let server = Server::start(None).await;
    let mut c = client(&server, None).await;
    let info = c
        .execute("SELECT * FROM events".into(), None)
        .await
        .unwrap();
    let schema = info.clone().try_decode_schema().unwrap();
    assert_eq!(Arc::new(schema), common::events_schema());
    assert_eq!(info.endpoint.len(), 1);
    let batches = fetch(&mut c, info).await.unwrap();
    assert_events(&one(&batches));
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_result_still_has_its_schema() {
    let server = Server::start(None).await;
    let mut c = client(&server, None).await;
    let info = c
        .execute("select * from empty;".into(), None)
        .await
        .unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let mut stream = c.do_get(ticket).await.unwrap();
    assert!(stream.next().await.is_none());
    assert_eq!(stream.schema().cloned(), Some(common::events_schema()));
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statement() {
    let server = Server::start(None).await;
    let mut c = client(&server, None).await;
    let mut stmt = c
        .prepare("SELECT * FROM events".into(), None)
        .await
        .unwrap();
    assert_eq!(
        stmt.dataset_schema().unwrap(),
        common::events_schema().as_ref()
    );
    assert_eq!(stmt.parameter_schema().unwrap(), &Schema::empty());
    // Twice: the handle stays valid.
    for _ in 0..2 {
        let info = stmt.execute().await.unwrap();
        let batches = fetch(&mut c, info).await.unwrap();
        assert_events(&one(&batches));
    }
    stmt.close().await.unwrap();

    // An empty binding (what some clients send before every execution) is accepted.
    let mut stmt = c
        .prepare("SELECT * FROM events".into(), None)
        .await
        .unwrap();
    stmt.set_parameters(RecordBatch::new_empty(Arc::new(Schema::empty())))
        .unwrap();
    let info = stmt.execute().await.unwrap();
    assert_events(&one(&fetch(&mut c, info).await.unwrap()));

    // One row of values is bound (the stub engine ignores them: the real binding is tested in
    // silt-query and through ADBC against silt serve); several rows are refused; a bad
    // statement fails when prepared.
    let mut stmt = c
        .prepare("SELECT * FROM events".into(), None)
        .await
        .unwrap();
    let rows = common::events_batches().remove(0);
    assert!(rows.num_rows() > 1);
    stmt.set_parameters(rows.slice(0, 1)).unwrap();
    let info = stmt.execute().await.unwrap();
    assert_events(&one(&fetch(&mut c, info).await.unwrap()));
    stmt.set_parameters(rows).unwrap();
    let (code, msg) = status(&stmt.execute().await.unwrap_err());
    assert_eq!(code, Code::Unimplemented, "{msg}");
    assert!(msg.contains("rows of parameter values"), "{msg}");
    let err = c
        .prepare("SELECT * FROM nope".into(), None)
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Code::InvalidArgument);
    drop(c);
    server.stop().await.unwrap();
}

fn code_of(e: &FlightError) -> Code {
    status(e).0
}

fn strings(batch: &RecordBatch, col: &str) -> Vec<String> {
    let a = batch.column_by_name(col).unwrap();
    let a = a.as_any().downcast_ref::<StringArray>().unwrap();
    (0..a.len()).map(|i| a.value(i).to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogs_schemas_tables() {
    let server = Server::start(None).await;
    let mut c = client(&server, None).await;

    let info = c.get_catalogs().await.unwrap();
    let catalogs = one(&fetch(&mut c, info).await.unwrap());
    assert_eq!(strings(&catalogs, "catalog_name"), ["silt"]);

    let info = c
        .get_db_schemas(CommandGetDbSchemas {
            catalog: Some("silt".into()),
            db_schema_filter_pattern: None,
        })
        .await
        .unwrap();
    let schemas = one(&fetch(&mut c, info).await.unwrap());
    assert_eq!(strings(&schemas, "db_schema_name"), ["audit", "lake"]);

    let info = c
        .get_tables(CommandGetTables {
            catalog: None,
            db_schema_filter_pattern: Some("lake".into()),
            table_name_filter_pattern: Some("e%".into()),
            table_types: vec!["TABLE".into()],
            include_schema: true,
        })
        .await
        .unwrap();
    let tables = one(&fetch(&mut c, info).await.unwrap());
    assert_eq!(strings(&tables, "table_name"), ["events"]);
    assert_eq!(strings(&tables, "table_type"), ["TABLE"]);
    let ipc = tables.column_by_name("table_schema").unwrap();
    let ipc = ipc.as_any().downcast_ref::<BinaryArray>().unwrap();
    let schema = Schema::try_from(IpcMessage(ipc.value(0).to_vec().into())).unwrap();
    assert_eq!(&schema, common::events_schema().as_ref());

    let info = c
        .get_tables(CommandGetTables {
            catalog: None,
            db_schema_filter_pattern: None,
            table_name_filter_pattern: None,
            table_types: vec![],
            include_schema: false,
        })
        .await
        .unwrap();
    let tables = one(&fetch(&mut c, info).await.unwrap());
    assert_eq!(strings(&tables, "table_name"), ["logins", "big", "events"]);
    assert!(tables.column_by_name("table_schema").is_none());

    let info = c.get_table_types().await.unwrap();
    let types = one(&fetch(&mut c, info).await.unwrap());
    assert_eq!(strings(&types, "table_type"), ["TABLE"]);
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_info() {
    let server = Server::start(None).await;
    let mut c = client(&server, None).await;
    let info = c
        .get_sql_info(vec![
            SqlInfo::FlightSqlServerName,
            SqlInfo::FlightSqlServerVersion,
            SqlInfo::FlightSqlServerReadOnly,
        ])
        .await
        .unwrap();
    let batch = one(&fetch(&mut c, info).await.unwrap());
    assert_eq!(batch.num_rows(), 3);
    let names = batch
        .column(0)
        .as_primitive::<arrow::datatypes::UInt32Type>();
    let values = batch
        .column(1)
        .as_any()
        .downcast_ref::<UnionArray>()
        .unwrap();
    for row in 0..3 {
        let value = values.value(row);
        match names.value(row) {
            n if n == SqlInfo::FlightSqlServerName as u32 => {
                let s = value.as_any().downcast_ref::<StringArray>().unwrap();
                assert_eq!(s.value(0), "silt");
            }
            n if n == SqlInfo::FlightSqlServerVersion as u32 => {
                let s = value.as_any().downcast_ref::<StringArray>().unwrap();
                assert_eq!(s.value(0), env!("CARGO_PKG_VERSION"));
            }
            n if n == SqlInfo::FlightSqlServerReadOnly as u32 => {
                let b = value.as_any().downcast_ref::<BooleanArray>().unwrap();
                assert!(b.value(0));
            }
            n => panic!("unexpected info {n}"),
        }
    }
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_and_refusals() {
    let server = Server::start(None).await;
    let mut c = client(&server, None).await;

    // Planning errors: the engine's message, invalid_argument.
    let (code, msg) = status(
        &c.execute("SELECT * FROM nope".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.contains("table not found"), "{msg}");
    let (code, msg) = status(
        &c.execute("DROP TABLE events".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.contains("queries are read-only"), "{msg}");

    // An error before the first batch fails DoGet itself.
    let info = c
        .execute("SELECT * FROM failing".into(), None)
        .await
        .unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let err = match c.do_get(ticket).await {
        Err(e) => e,
        Ok(stream) => stream.try_collect::<Vec<_>>().await.unwrap_err(),
    };
    let (code, msg) = status(&err);
    // A damaged file is the server's fault, not the query's (HTTP: 500).
    assert_eq!(code, Code::DataLoss);
    assert!(msg.contains("part-0001.parquet"), "{msg}");

    // Too many queries at once: a retry may succeed (HTTP: 429).
    let info = c.execute("SELECT * FROM busy".into(), None).await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let (code, msg) = status(&c.do_get(ticket).await.map(|_| ()).unwrap_err());
    assert_eq!(code, Code::ResourceExhausted);
    assert!(msg.contains("running already"), "{msg}");

    // An error in the middle of the stream arrives after the data before it.
    let info = c
        .execute("SELECT * FROM broken".into(), None)
        .await
        .unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let mut stream = c.do_get(ticket).await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first.num_rows(), 2);
    let (code, msg) = status(&stream.next().await.unwrap().unwrap_err());
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.contains("division by zero"), "{msg}");

    // A ticket this server did not make.
    let bogus = arrow_flight::Ticket::new(prost::Message::encode_to_vec(
        &arrow_flight::sql::ProstMessageExt::as_any(&arrow_flight::sql::TicketStatementQuery {
            statement_handle: "SELECT 1".into(),
        }),
    ));
    let (code, _) = status(&c.do_get(bogus).await.map(|_| ()).unwrap_err());
    assert_eq!(code, Code::InvalidArgument);

    // Writes, Substrait and transactions are refused.
    let (code, msg) = status(
        &c.execute_update("INSERT INTO events VALUES (1)".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, Code::PermissionDenied);
    assert!(msg.contains("read-only"), "{msg}");
    let batches = futures::stream::iter(common::events_batches().into_iter().map(Ok));
    let (code, msg) = status(
        &c.execute_ingest(
            arrow_flight::sql::CommandStatementIngest {
                table: "events".into(),
                ..Default::default()
            },
            batches,
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, Code::PermissionDenied);
    assert!(msg.contains("read-only"), "{msg}");
    let (code, msg) = status(&c.begin_transaction().await.unwrap_err());
    assert_eq!(code, Code::Unimplemented);
    assert!(msg.contains("transactions"), "{msg}");
    let (code, _) = status(
        &c.execute("SELECT * FROM events".into(), Some("tx1".into()))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, Code::Unimplemented);
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_missing_wrong_right() {
    let server = Server::start(Some("s3cret")).await;

    let mut none = client(&server, None).await;
    let (code, msg) = status(
        &none
            .execute("SELECT * FROM events".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, Code::Unauthenticated);
    assert!(msg.contains("authorization: Bearer <token>"), "{msg}");
    let (code, _) = status(&none.get_catalogs().await.unwrap_err());
    assert_eq!(code, Code::Unauthenticated);

    let mut wrong = client(&server, Some("guess")).await;
    let (code, msg) = status(
        &wrong
            .execute("SELECT * FROM events".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, Code::Unauthenticated);
    assert!(msg.contains("wrong token"), "{msg}");

    let mut right = client(&server, Some("s3cret")).await;
    let info = right
        .execute("SELECT * FROM events".into(), None)
        .await
        .unwrap();
    assert_events(&one(&fetch(&mut right, info).await.unwrap()));
    // The ticket alone does not get around the token.
    let info = right
        .execute("SELECT * FROM events".into(), None)
        .await
        .unwrap();
    let err = none
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(code_of(&err), Code::Unauthenticated);

    // Handshake with user and password: the password is the token; the answer is the bearer.
    let mut basic = client(&server, None).await;
    assert!(basic.handshake("anyone", "guess").await.is_err());
    let payload = basic.handshake("anyone", "s3cret").await.unwrap();
    assert_eq!(&payload[..], b"s3cret");
    assert_eq!(basic.token().map(String::as_str), Some("s3cret"));
    let info = basic
        .execute("SELECT * FROM events".into(), None)
        .await
        .unwrap();
    assert_events(&one(&fetch(&mut basic, info).await.unwrap()));

    drop((none, wrong, right, basic));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_without_a_token() {
    let server = Server::start(None).await;
    let mut c = client(&server, None).await;
    let payload = c.handshake("user", "pass").await.unwrap();
    assert!(payload.is_empty());
    assert!(c.token().is_none());
    drop(c);
    server.stop().await.unwrap();
}

/// A large result is streamed: while the client holds back, the engine has made only part of
/// it; read through, every row arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_results_stream() {
    let server = Server::start(None).await;
    let made = server.engine.big_made.clone();
    let mut c = client(&server, None).await;
    let info = c.execute("SELECT * FROM big".into(), None).await.unwrap();
    assert_eq!(made.load(Ordering::SeqCst), 0, "planning runs nothing");
    let mut stream = c
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(first.num_rows() > 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let made_while_waiting = made.load(Ordering::SeqCst);
    eprintln!("{made_while_waiting} of {BIG_BATCHES} batches made while the client waited");
    assert!(
        made_while_waiting < BIG_BATCHES / 2,
        "the server made {made_while_waiting} of {BIG_BATCHES} batches before the client read them"
    );
    let mut rows = first.num_rows();
    let mut next = first.num_rows() as i64;
    while let Some(batch) = stream.next().await {
        let batch = batch.unwrap();
        let col = batch.column(0).as_primitive::<Int64Type>();
        assert_eq!(col.value(0), next, "rows arrive in order");
        next += batch.num_rows() as i64;
        rows += batch.num_rows();
    }
    assert_eq!(rows, BIG_BATCHES * BIG_ROWS);
    assert_eq!(made.load(Ordering::SeqCst), BIG_BATCHES);
    drop(c);
    server.stop().await.unwrap();
}

/// With a small message limit, batches are cut to fit and still arrive whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_cut_to_the_message_limit() {
    let server = Server::start_with(FlightConfig {
        token: None,
        max_message_bytes: 64 << 10,
    })
    .await;
    let mut c = client(&server, None).await;
    let info = c.execute("SELECT * FROM big".into(), None).await.unwrap();
    let batches = fetch(&mut c, info).await.unwrap();
    // 10,000 int64 rows are 80 KB: cut to at most 32 KB (4,096 rows) each.
    assert!(
        batches.len() >= BIG_BATCHES * 3,
        "{} batches",
        batches.len()
    );
    assert!(batches.iter().all(|b| b.num_rows() <= 4096));
    let all = one(&batches);
    assert_eq!(all.num_rows(), BIG_BATCHES * BIG_ROWS);
    let col = all.column(0).as_primitive::<Int64Type>();
    assert!(col.values().iter().enumerate().all(|(i, &v)| v == i as i64));
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_serve() {
    let server = Server::start(None).await;
    let addr = server.addr;
    server.stop().await.unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// Parameter values (DoPut on a prepared statement) whose messages a client changed: a
/// compressed buffer claiming a terabyte uncompressed (which arrow-ipc would reserve, aborting
/// the server) and every byte of the schema message changed (on some of which arrow-ipc
/// panics) are refused as INVALID_ARGUMENT, and the server answers the next query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_parameter_values_are_refused() {
    use arrow::array::Int64Array;
    use arrow::ipc::writer::IpcWriteOptions;
    use arrow::ipc::CompressionType;
    use arrow_flight::encode::FlightDataEncoderBuilder;
    use arrow_flight::sql::{CommandPreparedStatementQuery, ProstMessageExt};
    use arrow_flight::{FlightData, FlightDescriptor};
    use prost::Message;

    let server = Server::start(None).await;
    let mut c = client(&server, None).await;
    let values =
        RecordBatch::try_from_iter([("$1", Arc::new(Int64Array::from(vec![7; 4000])) as _)])
            .unwrap();
    let cmd = CommandPreparedStatementQuery {
        prepared_statement_handle: b"silt1:SELECT * FROM events".to_vec().into(),
    };
    let descriptor = FlightDescriptor::new_cmd(cmd.as_any().encode_to_vec());
    let opts = IpcWriteOptions::default()
        .try_with_compression(Some(CompressionType::ZSTD))
        .unwrap();
    let data: Vec<FlightData> = FlightDataEncoderBuilder::new()
        .with_options(opts)
        .with_flight_descriptor(Some(descriptor))
        .build(futures::stream::iter([Ok(values)]))
        .try_collect()
        .await
        .unwrap();
    let is = |d: &FlightData, t| {
        arrow::ipc::root_as_message(&d.data_header).is_ok_and(|m| m.header_type() == t)
    };
    let schema_at = data
        .iter()
        .position(|d| is(d, arrow::ipc::MessageHeader::Schema))
        .unwrap();
    let batch_at = data
        .iter()
        .position(|d| is(d, arrow::ipc::MessageHeader::RecordBatch))
        .unwrap();
    // What the server answers `data`: Ok, or the refusal's code and message.
    async fn put(
        c: &mut FlightSqlServiceClient<Channel>,
        data: Vec<FlightData>,
    ) -> Result<(), (Code, String)> {
        match c.do_put(futures::stream::iter(data)).await {
            Ok(s) => s
                .try_collect::<Vec<_>>()
                .await
                .map(drop)
                .map_err(|s| (s.code(), s.message().to_string())),
            Err(e) => Err(status(&e)),
        }
    }

    // The intact values are bound (several rows: refused as such, not as damaged).
    let (code, msg) = put(&mut c, data.clone()).await.unwrap_err();
    assert_eq!(code, Code::Unimplemented, "{msg}");

    // A compressed buffer's length prefix set to 2^40.
    let mut forged = data.clone();
    let body = {
        let m = arrow::ipc::root_as_message(&forged[batch_at].data_header).unwrap();
        let b = m.header_as_record_batch().unwrap();
        let at = b
            .buffers()
            .unwrap()
            .iter()
            .map(|b| b.offset() as usize)
            .find(|&o| {
                let p = &data[batch_at].data_body[o..o + 8];
                i64::from_le_bytes(p.try_into().unwrap()) > 0
            })
            .expect("a buffer stored compressed");
        let mut body = forged[batch_at].data_body.to_vec();
        body[at..at + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
        body
    };
    forged[batch_at].data_body = body.into();
    let (code, msg) = put(&mut c, forged).await.unwrap_err();
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("damaged or forged length"), "{msg}");

    // Every byte of the schema message changed: refused, never a dropped connection.
    let mut panicked = 0;
    for i in 0..data[schema_at].data_header.len() {
        for x in [0x4du8, 0x80] {
            let mut bad = data.clone();
            let mut header = bad[schema_at].data_header.to_vec();
            header[i] ^= x;
            bad[schema_at].data_header = header.into();
            if let Err((code, msg)) = put(&mut c, bad).await {
                assert!(
                    matches!(code, Code::InvalidArgument | Code::Unimplemented),
                    "byte {i} ^ {x:#x}: {code:?} {msg}"
                );
                panicked += msg.contains("panicked") as usize;
            }
        }
    }
    assert!(panicked > 0, "no change made arrow-ipc panic");

    let info = c
        .execute("SELECT * FROM events".into(), None)
        .await
        .unwrap();
    assert_events(&one(&fetch(&mut c, info).await.unwrap()));
    drop(c);
    server.stop().await.unwrap();
}
