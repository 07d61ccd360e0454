//! The end of a pipeline: a [`Sink`] takes what decoders and transforms emit (it is an [`Emit`])
//! and can be asked to make everything it has received durable and visible ([`Sink::commit`]),
//! so that a long-running ingest publishes on a clock and acknowledges what it published.
//!
//! Implemented by the lake writer (`silt_lake::LakeWriter`: publishes files, rotates the rejects
//! file), the single-file writer of `silt convert` (nothing can be published before the end: its
//! commit does nothing and acknowledges nothing) and in-memory collectors.

use std::time::SystemTime;

use crate::Emit;

/// An [`Emit`] that can commit; see the module documentation.
pub trait Sink: Emit + Send {
    /// Makes everything received so far durable and visible, if the sink can; returns whether
    /// it did (only then may the data be acknowledged to its source).
    fn commit(&mut self, now: SystemTime) -> anyhow::Result<bool>;
}

impl Sink for crate::CollectEmit {
    /// Memory is as durable as a collector gets: a commit always succeeds.
    fn commit(&mut self, _now: SystemTime) -> anyhow::Result<bool> {
        Ok(true)
    }
}
