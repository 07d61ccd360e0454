//! Test support: a stub [`QueryEngine`] over in-memory batches and a server started on
//! 127.0.0.1:0 for the length of one test.
//!
//! The stub understands a handful of fixed statements (case and trailing `;` ignored):
//!
//! - `SELECT * FROM events`: 3 rows in 2 batches: ints, strings, timestamps with tz "UTC", a
//!   struct column and floats, with nulls;
//! - `SELECT * FROM empty`: no batches (the events schema);
//! - `SELECT * FROM big`: [`BIG_BATCHES`] batches of [`BIG_ROWS`] ints made one at a time as
//!   the stream is read, counted in [`StubEngine::big_made`];
//! - `SELECT * FROM broken`: one batch, then an error in the stream;
//! - `SELECT * FROM failing`: an error as the first item of the stream;
//! - anything starting with INSERT, UPDATE, DELETE, CREATE or DROP: "queries are read-only";
//! - anything else: "table not found".
//!
//! Touches only loopback sockets.

#![allow(dead_code)] // each test binary uses part of it

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use futures::stream::{self, BoxStream, StreamExt};
use silt_flight::{EngineError, ErrorKind, FlightConfig, QueryEngine};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const BIG_BATCHES: usize = 500;
pub const BIG_ROWS: usize = 10_000;

/// The timestamps of the three event rows, microseconds since the epoch.
pub const TS: [i64; 3] = [
    1_700_000_000_000_000,
    1_700_000_001_500_000,
    1_700_000_003_000_000,
];

pub fn events_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("attrs", DataType::Struct(attrs_fields()), true),
        Field::new("score", DataType::Float64, true),
    ]))
}

fn attrs_fields() -> Fields {
    Fields::from(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Int32, true),
    ])
}

/// The events rows: (id, name, ts, attrs (k, v) or null, score).
pub fn events_batches() -> Vec<RecordBatch> {
    let batch = |ids: Vec<i64>,
                 names: Vec<Option<&str>>,
                 ts: Vec<Option<i64>>,
                 attrs: Vec<Option<(&str, i32)>>,
                 scores: Vec<Option<f64>>| {
        let k: StringArray = attrs.iter().map(|a| a.map(|a| a.0)).collect();
        let v: Int32Array = attrs.iter().map(|a| a.map(|a| a.1)).collect();
        let valid = NullBuffer::from(attrs.iter().map(Option::is_some).collect::<Vec<_>>());
        let attrs = StructArray::new(
            attrs_fields(),
            vec![Arc::new(k) as ArrayRef, Arc::new(v)],
            Some(valid),
        );
        RecordBatch::try_new(
            events_schema(),
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(names)),
                Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
                Arc::new(attrs),
                Arc::new(Float64Array::from(scores)),
            ],
        )
        .unwrap()
    };
    vec![
        batch(
            vec![1, 2],
            vec![Some("alpha"), None],
            vec![Some(TS[0]), Some(TS[1])],
            vec![Some(("host", 7)), None],
            vec![Some(0.5), None],
        ),
        batch(
            vec![3],
            vec![Some("gamma")],
            vec![Some(TS[2])],
            vec![Some(("port", 443))],
            vec![Some(2.25)],
        ),
    ]
}

pub fn big_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]))
}

/// The stub engine; `big_made` counts the `big` batches made so far.
#[derive(Default)]
pub struct StubEngine {
    pub big_made: Arc<AtomicUsize>,
}

enum Query {
    Events,
    Empty,
    Big,
    Broken,
    Failing,
    Busy,
}

fn parse(sql: &str) -> Result<Query, String> {
    let norm = sql.trim().trim_end_matches(';').trim().to_ascii_lowercase();
    let norm = norm.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = norm.split(' ').next().unwrap_or("");
    if ["insert", "update", "delete", "create", "drop"].contains(&first) {
        return Err(format!("queries are read-only: {first} is not allowed"));
    }
    match norm.as_str() {
        "select * from events" => Ok(Query::Events),
        "select * from empty" => Ok(Query::Empty),
        "select * from big" => Ok(Query::Big),
        "select * from broken" => Ok(Query::Broken),
        "select * from failing" => Ok(Query::Failing),
        "select * from busy" => Ok(Query::Busy),
        _ => Err(format!("table not found in: {sql}")),
    }
}

#[async_trait::async_trait]
impl QueryEngine for StubEngine {
    async fn plan_schema(
        &self,
        sql: &str,
        _params: Option<&RecordBatch>,
    ) -> Result<SchemaRef, EngineError> {
        Ok(match parse(sql)? {
            Query::Big => big_schema(),
            _ => events_schema(),
        })
    }

    async fn execute(
        &self,
        sql: &str,
        _params: Option<&RecordBatch>,
    ) -> Result<BoxStream<'static, Result<RecordBatch, EngineError>>, EngineError> {
        Ok(match parse(sql)? {
            Query::Events => stream::iter(events_batches().into_iter().map(Ok)).boxed(),
            // An engine's stream need not be fused: this one panics when polled after its end
            // (as a `stream::unfold` does), which the server must not do.
            Query::Empty => stream::unfold((), |()| async {
                None::<(Result<RecordBatch, EngineError>, ())>
            })
            .boxed(),
            Query::Big => {
                let made = self.big_made.clone();
                stream::iter(0..BIG_BATCHES)
                    .map(move |i| {
                        made.fetch_add(1, Ordering::SeqCst);
                        let start = (i * BIG_ROWS) as i64;
                        let values = Int64Array::from_iter_values(start..start + BIG_ROWS as i64);
                        Ok(RecordBatch::try_new(big_schema(), vec![Arc::new(values)]).unwrap())
                    })
                    .boxed()
            }
            Query::Broken => stream::iter(vec![
                Ok(events_batches().remove(0)),
                Err("division by zero in row 3".to_string().into()),
            ])
            .boxed(),
            Query::Failing => stream::iter(vec![Err(EngineError::new(
                ErrorKind::Damaged,
                "cannot read part-0001.parquet: it is damaged",
            ))])
            .boxed(),
            Query::Busy => {
                return Err(EngineError::new(
                    ErrorKind::Busy,
                    "4 queries are running already",
                ))
            }
        })
    }

    async fn tables(&self) -> Result<Vec<(String, String, String, SchemaRef)>, EngineError> {
        let t = |schema: &str, table: &str, s: SchemaRef| {
            ("silt".to_string(), schema.to_string(), table.to_string(), s)
        };
        Ok(vec![
            t("lake", "events", events_schema()),
            t("lake", "big", big_schema()),
            t("audit", "logins", events_schema()),
        ])
    }
}

/// A server running for one test; dropping it does not stop it, [`Server::stop`] does.
pub struct Server {
    pub addr: SocketAddr,
    pub engine: Arc<StubEngine>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Server {
    pub async fn start(token: Option<&str>) -> Server {
        Server::start_with(FlightConfig {
            token: token.map(str::to_string),
            ..FlightConfig::default()
        })
        .await
    }

    pub async fn start_with(cfg: FlightConfig) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let engine = Arc::new(StubEngine::default());
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(silt_flight::serve(listener, engine.clone(), cfg, async {
            let _ = rx.await;
        }));
        Server {
            addr,
            engine,
            stop: Some(tx),
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server and returns what `serve` returned.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap()
    }
}
