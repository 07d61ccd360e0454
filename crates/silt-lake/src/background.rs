//! [`Background`]: a [`FileSink`] that encodes on a thread of its own.
//!
//! Encoding (dictionaries, bloom filters, compression) is most of the CPU time of an import;
//! the rest is reading and sorting. With the sink writing synchronously, the writer's thread
//! stopped receiving and sorting whenever it encoded, and an import used about 1.5 of the two
//! cores it was measured on. Here `write` hands the (already sorted) batch to the sink's own
//! thread over a one-slot channel and returns, so sorting the next buffer overlaps encoding
//! this one. Memory stays bounded: at most one batch waits while another is being encoded,
//! and both are slices of sort buffers the writer accounts for anyway.
//!
//! Errors of the encoding thread surface on the next `write` or at `finish`; a panic there is
//! reported as an error, never propagated as a panic. A sink dropped without `finish` (an error
//! elsewhere) stops after the batch it is encoding: the waiting batch and the file's footer are
//! skipped, since the temp file is removed anyway.
//!
//! This module touches nothing but the sink it wraps.

use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow::record_batch::RecordBatch;

use crate::store::FileSink;

/// A sink running on its own thread.
pub(crate) struct Background {
    tx: Option<SyncSender<RecordBatch>>,
    handle: Option<JoinHandle<anyhow::Result<BufWriter<File>>>>,
    /// The wrapped sink's `memory_size`, updated after every batch.
    memory: Arc<AtomicUsize>,
    /// Set when the sink is dropped without `finish`: the thread stops without finishing.
    abandoned: Arc<AtomicBool>,
}

impl Background {
    pub(crate) fn spawn(mut inner: Box<dyn FileSink>) -> anyhow::Result<Self> {
        let (tx, rx) = sync_channel::<RecordBatch>(1);
        let memory = Arc::new(AtomicUsize::new(inner.memory_size()));
        let mem = memory.clone();
        let abandoned = Arc::new(AtomicBool::new(false));
        let stop = abandoned.clone();
        let handle = std::thread::Builder::new()
            .name("silt-encode".into())
            .spawn(move || {
                for batch in rx {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    inner.write(&batch)?;
                    mem.store(inner.memory_size(), Ordering::Relaxed);
                }
                if stop.load(Ordering::Relaxed) {
                    anyhow::bail!("abandoned before it was finished");
                }
                inner.finish()
            })?;
        Ok(Self {
            tx: Some(tx),
            handle: Some(handle),
            memory,
            abandoned,
        })
    }

    /// Waits for the thread and returns what it ended with.
    fn join(&mut self) -> anyhow::Result<BufWriter<File>> {
        self.tx = None;
        match self.handle.take() {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the file encoding thread panicked"))),
            None => anyhow::bail!("the file encoding thread has already ended"),
        }
    }
}

impl FileSink for Background {
    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        let sent = match &self.tx {
            Some(tx) => tx.send(batch.clone()).is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The thread stopped taking batches: it failed. Its error is the one to report.
        match self.join() {
            Err(e) => Err(e),
            Ok(_) => anyhow::bail!("the file encoding thread ended early"),
        }
    }

    fn memory_size(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<BufWriter<File>> {
        self.join()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // Abandoned (an error elsewhere): stop the thread, and let it end before the temp file
        // is removed.
        if self.handle.is_some() {
            self.abandoned.store(true, Ordering::Relaxed);
            let _ = self.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    /// Counts rows; fails (or panics) at the `fail_at`-th batch.
    struct Probe {
        rows: Arc<AtomicUsize>,
        finished: Arc<AtomicBool>,
        fail_at: Option<(usize, bool)>,
        seen: usize,
        out: BufWriter<File>,
    }

    impl FileSink for Probe {
        fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
            self.seen += 1;
            match self.fail_at {
                Some((n, false)) if n == self.seen => anyhow::bail!("disk full at batch {n}"),
                Some((n, true)) if n == self.seen => panic!("encoder bug at batch {n}"),
                _ => {}
            }
            self.rows.fetch_add(batch.num_rows(), Ordering::Relaxed);
            Ok(())
        }
        fn memory_size(&self) -> usize {
            self.seen
        }
        fn finish(self: Box<Self>) -> anyhow::Result<BufWriter<File>> {
            self.finished.store(true, Ordering::Relaxed);
            Ok(self.out)
        }
    }

    fn probe(fail_at: Option<(usize, bool)>) -> (Box<dyn FileSink>, Arc<AtomicUsize>) {
        let (s, rows, _) = probe_finish(fail_at);
        (s, rows)
    }

    fn probe_finish(
        fail_at: Option<(usize, bool)>,
    ) -> (Box<dyn FileSink>, Arc<AtomicUsize>, Arc<AtomicBool>) {
        let rows = Arc::new(AtomicUsize::new(0));
        let finished = Arc::new(AtomicBool::new(false));
        let out = BufWriter::new(tempfile::tempfile().unwrap());
        let p = Probe {
            rows: rows.clone(),
            finished: finished.clone(),
            fail_at,
            seen: 0,
            out,
        };
        (
            Box::new(Background::spawn(Box::new(p)).unwrap()),
            rows,
            finished,
        )
    }

    #[test]
    fn a_dropped_sink_stops_without_finishing() {
        let (mut s, rows, finished) = probe_finish(None);
        for _ in 0..10 {
            s.write(&batch(10)).unwrap();
        }
        drop(s);
        assert!(!finished.load(Ordering::Relaxed));
        assert!(rows.load(Ordering::Relaxed) <= 100);
        let (s, _, finished) = probe_finish(None);
        s.finish().unwrap();
        assert!(finished.load(Ordering::Relaxed));
    }

    fn batch(n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..n))]).unwrap()
    }

    #[test]
    fn every_batch_is_written_before_finish_returns() {
        let (mut s, rows) = probe(None);
        for _ in 0..100 {
            s.write(&batch(10)).unwrap();
        }
        s.finish().unwrap();
        assert_eq!(rows.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn an_error_surfaces_on_a_later_write_or_at_finish() {
        for panics in [false, true] {
            let (mut s, _) = probe(Some((3, panics)));
            let mut failed = None;
            for _ in 0..50 {
                if let Err(e) = s.write(&batch(1)) {
                    failed = Some(e);
                    break;
                }
            }
            let err = match failed {
                Some(e) => e,
                None => s.finish().unwrap_err(),
            };
            let want = if panics {
                "panicked"
            } else {
                "disk full at batch 3"
            };
            assert!(format!("{err:#}").contains(want), "{err:#}");
        }
    }
}
