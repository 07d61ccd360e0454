//! The Feather sink: one Arrow IPC file, compressed with zstd (at the configured level, 1 by
//! default) or lz4 (frame), or not at all for the other codecs, which Arrow IPC does not have.
//!
//! Touches only the file writer it is given.

use std::fs::File;
use std::io::BufWriter;

use arrow::datatypes::SchemaRef;
use arrow::ipc::writer::{FileWriter as IpcFileWriter, IpcWriteOptions};
use arrow::record_batch::RecordBatch;

use super::FileSink;
use crate::checksum::{self, Summing};
use crate::config::{Codec, WriterConfig};

pub(super) struct FeatherSink {
    /// Summed as it is written ([`crate::checksum`]).
    w: IpcFileWriter<Summing<BufWriter<File>>>,
}

impl FeatherSink {
    pub(super) fn new(
        cfg: &WriterConfig,
        schema: &SchemaRef,
        out: BufWriter<File>,
    ) -> anyhow::Result<Self> {
        let mut opts = IpcWriteOptions::default();
        let (ctype, level) = match cfg.codec {
            Codec::Zstd => (
                Some(arrow::ipc::CompressionType::ZSTD),
                Some(cfg.level.unwrap_or(1)),
            ),
            Codec::Lz4 => (Some(arrow::ipc::CompressionType::LZ4_FRAME), None),
            _ => (None, None),
        };
        opts = opts.try_with_compression(ctype)?;
        if level.is_some() {
            opts = opts.try_with_compression_level(level)?;
        }
        let w = IpcFileWriter::try_new_with_options(Summing::new(out), schema, opts)?;
        Ok(Self { w })
    }
}

impl FileSink for FeatherSink {
    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        Ok(self.w.write(batch)?)
    }

    fn memory_size(&self) -> usize {
        0
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<BufWriter<File>> {
        // The whole file is summed: the footer holds a placeholder, overwritten with the sum
        // once all is written.
        self.w.write_metadata(checksum::KEY, checksum::PLACEHOLDER);
        self.w.get_mut().watch();
        self.w.finish()?;
        Ok(self.w.into_inner()?.seal()?)
    }
}
