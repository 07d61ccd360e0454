//! The end of a pipeline: a [`Sink`] takes what decoders and transforms emit (it is an [`Emit`])
//! and can be asked to make everything it has received durable and visible ([`Sink::commit`]),
//! so that a long-running ingest publishes on a clock and acknowledges what it published.
//!
//! Implemented by the lake writer (`silt_lake::LakeWriter`: publishes files, rotates the rejects
//! file), the single-file writer of `silt convert` (nothing can be published before the end: its
//! commit does nothing and acknowledges nothing), in-memory collectors, and `silt serve`'s
//! generations (handed to a flush thread: a commit that ends in the background).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::Emit;

/// A position in a source's data, acknowledged once everything before it is durable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    /// Which stream (a path, `-`, a connection, a log, a topic partition).
    pub stream: Arc<str>,
    /// The source's own position in that stream (bytes, a record number, an offset).
    pub position: u64,
}

/// What a [`Sink::commit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// Nothing was made durable (nothing to commit, or the sink cannot commit before its end):
    /// acknowledge nothing.
    No,
    /// Everything received so far is durable: acknowledge it.
    Durable,
    /// Everything received so far was handed to a writer that makes it durable in the
    /// background, as hand-over number `n` (increasing); acknowledge it once [`Sink::settled`]
    /// reaches `n`.
    Started(u64),
}

/// An [`Emit`] that can commit; see the module documentation.
pub trait Sink: Emit + Send {
    /// Makes everything received so far durable and visible, if the sink can (only then may
    /// the data be acknowledged to its source).
    fn commit(&mut self, now: SystemTime) -> anyhow::Result<Committed>;

    /// Whether the sink wants a commit before the pipeline's clock asks (its buffer is full,
    /// its oldest row old enough); the pipeline asks after every message and when idle.
    fn wants_commit(&mut self) -> bool {
        false
    }

    /// A sink that commits in the background ([`Committed::Started`]): the last hand-over that
    /// is durable, waiting up to `wait` for hand-over `n` when given; an error when the rest
    /// can never become durable (its writer stopped). Others have none.
    fn settled(&mut self, _wait: Option<(u64, Duration)>) -> anyhow::Result<u64> {
        Ok(0)
    }

    /// A checkpoint placed after the data received so far (the sink may record where its data
    /// came from; the pipeline acknowledges it either way).
    fn checkpoint(&mut self, _checkpoint: &Checkpoint) {}
}

impl Sink for crate::CollectEmit {
    /// Memory is as durable as a collector gets: a commit always succeeds.
    fn commit(&mut self, _now: SystemTime) -> anyhow::Result<Committed> {
        Ok(Committed::Durable)
    }
}
