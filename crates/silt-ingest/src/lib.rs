//! silt-ingest: the one ingest pipeline behind `silt import`, `silt convert`, `silt bench` and
//! `silt serve` (whose source is its write-ahead log, `silt_serve::log_source`, and whose sink
//! commits in the background). Data flows one way, acknowledgements the other:
//!
//! ```text
//!   Source ──bytes──> Decoder ──batches, rejects──> Transforms ──> Sink
//!     ▲  (files, stdin;   (one per format,          (--parse-field,   (lake writer,
//!     │   the server's     from the registry)         enrichment)       single file, memory,
//!     │   log)                                                          the server's generations)
//!     └────────────── checkpoints acknowledged once the sink committed ◄─┘
//! ```
//!
//! - [`registry`]: the one list of formats ([`silt_core::FormatSpec`] entries declared next to
//!   each decoder), name lookup, extension lookup and content detection for `import auto`;
//! - [`source`]: the [`Source`] seam and the file source (files, directories, gzip, stdin);
//! - [`pipeline`]: [`Pipeline::run`]: a reader thread runs the source and its decoders, a bounded
//!   channel carries batches to the caller's thread, which runs the transforms and the sink,
//!   commits on a clock or when the sink asks (and acknowledges a commit that ends in the
//!   background once the sink says it has), and reports progress through an [`Observer`] (the CLI draws
//!   the progress bar; this crate has no terminal code and no command-line parsing);
//! - [`sink`]: adapters around [`silt_core::Sink`] (one table per output file for `convert`);
//! - [`fuzz`]: the fuzz harness, one target per format, shared by the afl targets in `fuzz/`
//!   and the replay test of their saved inputs;
//! - [`jobs`]: the pipeline put together with a file source and a lake or single-file sink, as
//!   `import`, `convert` and `demo` run it.
//!
//! Touches what its sources read and what its sink writes; nothing else.

pub mod fuzz;
pub mod jobs;
pub mod pipeline;
pub mod registry;
pub mod sink;
pub mod source;

pub use jobs::{Grown, Reimport, Skipped};
pub use pipeline::{FormatChoice, Observer, Pipeline, Progress, RunReport, StreamReport};
pub use source::file::{expand, FileSource, Input};
pub use source::{Checkpoint, Source, SourceContext};
