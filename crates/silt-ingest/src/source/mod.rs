//! Sources: where the bytes come from. A [`Source`] runs on the pipeline's reader thread; for
//! each stream it reads (a file, standard input; later a connection, a tailed file, a Kafka
//! partition) it asks the [`SourceContext`] for a decoder, feeds or reads it, and after the data
//! it wants acknowledged it places a [`Checkpoint`]. Once the sink has committed everything
//! before a checkpoint, the checkpoint comes back ([`SourceContext::acknowledged`] while the
//! source runs, [`Source::acknowledge`] for those that arrive after it returned): that is when a
//! network source may answer "ack" and a tailing source may save its read offset.
//!
//! One file per kind of source: [`file`] (files, directories, gzip, stdin).
//!
//! Touches only what each source reads.

pub mod file;

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

pub use silt_core::Checkpoint;
use silt_core::{Decoder, Emit, Reject, SourceInfo};

use crate::pipeline::{ChannelEmit, Decoders};

pub use file::FileSource;

/// Where bytes come from; see the module documentation.
pub trait Source: Send {
    /// What the user calls it (`3 files`, `standard input`).
    fn describe(&self) -> String;

    /// Raw bytes to read in all, when known (for a progress bar).
    fn size_hint(&self) -> Option<u64> {
        None
    }

    /// Reads everything (or until [`SourceContext::stopping`]), decoding through `ctx`.
    fn run(&mut self, ctx: &mut SourceContext<'_>) -> anyhow::Result<()>;

    /// `checkpoint` is durable (called after [`Source::run`] returned, for the checkpoints the
    /// sink committed at the end).
    fn acknowledge(&mut self, _checkpoint: &Checkpoint) {}
}

/// What a running source can use: decoders, the way to the sink, checkpoints and their
/// acknowledgements, the byte counter and the stop flag.
pub struct SourceContext<'a> {
    pub(crate) out: &'a mut ChannelEmit,
    pub(crate) decoders: &'a Decoders,
    pub(crate) acks: &'a Receiver<Checkpoint>,
    pub(crate) raw_bytes: Arc<AtomicU64>,
    pub(crate) stop: &'a AtomicBool,
}

/// What [`SourceContext::open`] decided for a stream.
pub enum Opened {
    /// A decoder of this format.
    Decoder(&'static silt_core::FormatSpec, Box<dyn Decoder>),
    /// The stream was empty: nothing to decode.
    Empty,
    /// The stream is not a format silt can decode (already rejected as a whole).
    Rejected,
}

impl<'a> SourceContext<'a> {
    /// Where decoders send batches and rejects.
    pub fn out(&mut self) -> &mut dyn Emit {
        self.out
    }

    /// The counter of raw (on-disk, compressed) bytes read, which drives the progress bar;
    /// sources add to it as they read.
    pub fn raw_bytes(&self) -> Arc<AtomicU64> {
        self.raw_bytes.clone()
    }

    /// Whether this source's streams may be in a text format: the pipeline's format is one, or
    /// is detected (no binary format silt detects starts with a NUL byte).
    pub fn may_be_text(&self) -> bool {
        match self.decoders.choice {
            crate::pipeline::FormatChoice::Fixed(f) => f.text,
            crate::pipeline::FormatChoice::Auto { .. } => true,
        }
    }

    /// Whether the pipeline asked its source to stop (a long-running source checks this).
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A decoder for the stream `info` whose first bytes are `head` (up to
    /// [`silt_core::format::PROBE_BYTES`]): the pipeline's format, or the detected one. A stream
    /// that no format recognises is rejected as a whole here (with its first line), and an
    /// empty one is reported as such.
    pub fn open(&mut self, info: &SourceInfo, head: &[u8]) -> anyhow::Result<Opened> {
        self.decoders.open(info, head, self.out)
    }

    /// A decoder of `format` for the stream `info`, whatever the pipeline's format choice: for a
    /// source whose streams say their own format (`silt serve`'s log records).
    pub fn open_format(
        &mut self,
        format: &'static silt_core::FormatSpec,
        info: &SourceInfo,
    ) -> anyhow::Result<Box<dyn Decoder>> {
        let d = (format.open)(&self.decoders.options, info)?;
        self.decoders.used(format);
        Ok(d)
    }

    /// Places a checkpoint after the data emitted so far.
    pub fn checkpoint(&mut self, c: Checkpoint) -> anyhow::Result<()> {
        self.out.checkpoint(c)
    }

    /// Checkpoints acknowledged since the last call (the sink committed everything before them).
    pub fn acknowledged(&mut self) -> Vec<Checkpoint> {
        self.acks.try_iter().collect()
    }

    /// Reads a whole stream with `decoder`; an error that stops the stream becomes a reject of
    /// the whole stream (what was decoded before it is kept) and the source goes on.
    pub fn read_stream(
        &mut self,
        info: &SourceInfo,
        decoder: &mut dyn Decoder,
        input: &mut dyn BufRead,
    ) -> anyhow::Result<()> {
        if let Err(e) = decoder.read(input, self.out) {
            self.out.reject(whole_input_reject(
                &info.display,
                format!("stopped reading: {e:#}"),
            ))?;
        }
        Ok(())
    }
}

/// A reject that stands for a whole input (line 0): it could not be opened, detected or read to
/// its end.
pub fn whole_input_reject(source: &str, reason: String) -> Reject {
    Reject {
        source: source.to_string(),
        line: 0,
        reason,
        raw: Vec::new(),
        table: None,
    }
}
