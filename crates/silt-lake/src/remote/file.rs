//! One object of a remote lake read in byte ranges, for the synchronous readers: Parquet's
//! footer reader ([`parquet::file::reader::ChunkReader`]) and Arrow IPC's file reader
//! ([`std::io::Read`] + [`std::io::Seek`]). Footers and schemas take one or two range requests;
//! data is read by DataFusion through the store itself, not through this.
//!
//! Touches only the one object it is given.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use super::RemoteLake;

/// Bytes fetched at least per request when reading sequentially (fewer round trips).
const READ_AHEAD: u64 = 256 << 10;

/// An object of known size.
#[derive(Clone)]
pub struct RemoteFile {
    lake: Arc<RemoteLake>,
    key: ObjectPath,
    size: u64,
}

impl RemoteFile {
    pub fn new(lake: Arc<RemoteLake>, key: ObjectPath, size: u64) -> Self {
        Self { lake, key, size }
    }

    /// A reader from the start, for `Read + Seek` consumers.
    pub fn reader(&self) -> RemoteReader {
        RemoteReader {
            file: self.clone(),
            pos: 0,
            buf: Bytes::new(),
            buf_at: 0,
        }
    }

    fn fetch(&self, start: u64, end: u64) -> std::io::Result<Bytes> {
        self.lake
            .get_range(&self.key, start..end)
            .map_err(|e| std::io::Error::other(format!("{e:#}")))
    }
}

impl Length for RemoteFile {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for RemoteFile {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self
            .get_bytes(start, (self.size.saturating_sub(start)) as usize)?
            .reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let end = start + length as u64;
        if end > self.size {
            return Err(ParquetError::EOF(format!(
                "range {start}..{end} beyond the {} bytes of {}",
                self.size, self.key
            )));
        }
        if length == 0 {
            return Ok(Bytes::new());
        }
        self.fetch(start, end)
            .map_err(|e| ParquetError::External(Box::new(e)))
    }
}

/// A `Read + Seek` view of a [`RemoteFile`] that fetches at least [`READ_AHEAD`] bytes a request.
pub struct RemoteReader {
    file: RemoteFile,
    pos: u64,
    buf: Bytes,
    buf_at: u64,
}

impl Read for RemoteReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.file.size || out.is_empty() {
            return Ok(0);
        }
        let in_buf = self.pos >= self.buf_at && self.pos < self.buf_at + self.buf.len() as u64;
        if !in_buf {
            let want = (out.len() as u64).max(READ_AHEAD);
            let end = (self.pos + want).min(self.file.size);
            self.buf = self.file.fetch(self.pos, end)?;
            self.buf_at = self.pos;
        }
        let off = (self.pos - self.buf_at) as usize;
        let n = out.len().min(self.buf.len() - off);
        out[..n].copy_from_slice(&self.buf[off..off + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for RemoteReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let p = match to {
            SeekFrom::Start(p) => p as i128,
            SeekFrom::End(d) => self.file.size as i128 + d as i128,
            SeekFrom::Current(d) => self.pos as i128 + d as i128,
        };
        if p < 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start of the object",
            ));
        }
        self.pos = p as u64;
        Ok(self.pos)
    }
}
