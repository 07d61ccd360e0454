//! The fluentd Forward front end: `silt_forward`'s protocol server with a sink that logs each
//! frame's entries (a MessagePack stream of `[time, record]`, read later by the `msgpack`
//! decoder) to the write-ahead log under the table its tag routes to. The future a frame waits on
//! resolves once the entries are durable, so the `ack` the protocol then sends means "in the
//! log". While the lake writer is behind (rows in memory over the budget) the future waits first,
//! so acks are withheld and, past the connection's in-flight limit, the socket is not read.
//!
//! Touches nothing but the log.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use silt_forward::{ForwardSink, Frame, SinkError};

use crate::route::{resolve, Route};
use crate::wal::Entry;
use crate::Shared;

/// See the module documentation.
pub struct LogSink {
    pub shared: Arc<Shared>,
    pub routes: Arc<Vec<Route>>,
}

impl ForwardSink for LogSink {
    fn append(&self, frame: Frame) -> BoxFuture<'static, Result<(), SinkError>> {
        let shared = self.shared.clone();
        let table = resolve(&self.routes, &frame.tag);
        Box::pin(async move {
            while shared.behind() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let entry = Entry {
                table: Some(table.to_string()),
                format: "msgpack".into(),
                source: format!("forward tag {}", frame.tag),
                chunk: frame.chunk.map(|c| format!("forward:{c}")),
                body: frame.entries.to_vec(),
                kafka: None,
            };
            match shared.wal.append(entry).await {
                Ok(_) => Ok(()),
                Err(e) => Err(SinkError::Failed(format!("{e:#}"))),
            }
        })
    }
}
