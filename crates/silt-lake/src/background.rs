//! [`Background`]: a [`FileSink`] that encodes on a thread of its own.
//!
//! Encoding (dictionaries, bloom filters, compression) is most of the CPU time of an import;
//! the rest is reading and sorting. With the sink writing synchronously, the writer's thread
//! stopped receiving and sorting whenever it encoded, and an import used about 1.5 of the two
//! cores it was measured on. Here `write` hands the (already sorted) batch to the sink's own
//! thread and returns, so sorting the next buffer overlaps encoding this one.
//!
//! Memory stays bounded: batches wait for the encoder up to a byte budget (half the writer's
//! sort buffer, which is what the writer emits at a time; always at least one batch), counted
//! by the bytes their rows take ([`arrow::array::ArrayData::get_slice_memory_size`]: the writer
//! hands on slices of its sort buffers) from `write` until the encoder is done with them, and
//! reported in `memory_size`, so that the writer's `--memory` accounting includes them.
//!
//! Why a budget rather than one batch, as before: with one batch the pipeline waited on itself.
//! The writer's thread blocked handing over the batches of a sorted half while the encoder
//! worked; meanwhile the reader filled its channel and blocked too (an sFlow import's reader
//! spent about 1 s of 3.5 in that wait, `perf sched`), and then the encoder idled while the
//! writer refilled and sorted. Measured 2026-11-28 with `silt import` (2 cores, five
//! alternated runs each, medians), this build against the one before it (one batch; the
//! difference includes a small change to sFlow address columns made with it):
//! - sFlow, 3M generated samples, `--enrich asn,geo,rdns`: 3.18 s against 3.89 s; peak RSS
//!   271 MiB against 238;
//! - the same without enrichment: 2.71 s against 3.43 s; peak RSS 220 MiB against 233;
//! - Zeek conn, 2M generated rows: 1.93 s either way; peak RSS 250 MiB against 241 (runs of one
//!   build vary by ±10 MiB).
//!
//! Errors of the encoding thread surface on the next `write` or at `finish`; a panic there is
//! reported as an error, never propagated as a panic. A sink dropped without `finish` (an error
//! elsewhere) stops after the batch it is encoding: the waiting batches and the file's footer are
//! skipped, since the temp file is removed anyway.
//!
//! This module touches nothing but the sink it wraps.

use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use arrow::record_batch::RecordBatch;

use crate::store::FileSink;

/// Bytes of batches handed to the encoding thread and not yet encoded, with the budget they
/// must stay within.
struct Waiting {
    bytes: Mutex<Queued>,
    changed: Condvar,
    budget: usize,
}

#[derive(Default)]
struct Queued {
    bytes: usize,
    /// The thread has ended (finished, failed or abandoned): nothing waits for room any more.
    ended: bool,
}

impl Waiting {
    /// Waits until `bytes` more fit the budget (or nothing waits, or the thread ended), then
    /// counts them. A batch counts from here until the encoder is done with it.
    fn admit(&self, bytes: usize) {
        let mut q = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        while !q.ended && q.bytes > 0 && q.bytes + bytes > self.budget {
            q = self.changed.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        q.bytes += bytes;
    }

    fn done(&self, bytes: usize) {
        let mut q = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        q.bytes = q.bytes.saturating_sub(bytes);
        self.changed.notify_all();
    }

    fn end(&self) {
        self.bytes.lock().unwrap_or_else(|e| e.into_inner()).ended = true;
        self.changed.notify_all();
    }
}

/// Ends the budget when the thread ends, however it ends (a writer waiting for room wakes up
/// and finds the thread gone).
struct EndOnDrop(Arc<Waiting>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// Bytes the rows of `batch` take (not the whole buffers a slice of it shares).
pub(crate) fn slice_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| {
            c.to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size())
        })
        .sum()
}

/// A sink running on its own thread.
pub(crate) struct Background {
    tx: Option<Sender<(RecordBatch, usize)>>,
    handle: Option<JoinHandle<anyhow::Result<BufWriter<File>>>>,
    /// The wrapped sink's `memory_size`, updated after every batch.
    memory: Arc<AtomicUsize>,
    /// Set when the sink is dropped without `finish`: the thread stops without finishing.
    abandoned: Arc<AtomicBool>,
    waiting: Arc<Waiting>,
    /// The wrapped sink's `codec_memory`, updated after every batch.
    codec: Arc<AtomicUsize>,
}

impl Background {
    /// `inner` on a thread of its own, with up to `budget` bytes of batches waiting for it
    /// (always at least one batch).
    pub(crate) fn spawn(mut inner: Box<dyn FileSink>, budget: usize) -> anyhow::Result<Self> {
        let (tx, rx) = channel::<(RecordBatch, usize)>();
        let memory = Arc::new(AtomicUsize::new(inner.memory_size()));
        let codec = Arc::new(AtomicUsize::new(inner.codec_memory()));
        let codec_mem = codec.clone();
        let mem = memory.clone();
        let abandoned = Arc::new(AtomicBool::new(false));
        let stop = abandoned.clone();
        let waiting = Arc::new(Waiting {
            bytes: Mutex::new(Queued::default()),
            changed: Condvar::new(),
            budget,
        });
        let ends = EndOnDrop(waiting.clone());
        let handle = std::thread::Builder::new()
            .name("silt-encode".into())
            .spawn(move || {
                let _ends = ends;
                for (batch, bytes) in rx {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = inner.write(&batch);
                    drop(batch);
                    _ends.0.done(bytes);
                    r?;
                    mem.store(inner.memory_size(), Ordering::Relaxed);
                    codec_mem.store(inner.codec_memory(), Ordering::Relaxed);
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
            waiting,
            codec,
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
        let bytes = slice_bytes(batch);
        self.waiting.admit(bytes);
        let sent = match &self.tx {
            Some(tx) => tx.send((batch.clone(), bytes)).is_ok(),
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
        let waiting = self
            .waiting
            .bytes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .bytes;
        self.memory.load(Ordering::Relaxed) + waiting
    }

    fn codec_memory(&self) -> usize {
        self.codec.load(Ordering::Relaxed)
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
            Box::new(Background::spawn(Box::new(p), 1).unwrap()),
            rows,
            finished,
        )
    }

    /// Encodes nothing until the test lets it (one batch per message on `gate`).
    struct Gated {
        gate: std::sync::mpsc::Receiver<()>,
        out: BufWriter<File>,
    }

    impl FileSink for Gated {
        fn write(&mut self, _: &RecordBatch) -> anyhow::Result<()> {
            self.gate.recv()?;
            Ok(())
        }
        fn memory_size(&self) -> usize {
            0
        }
        fn finish(self: Box<Self>) -> anyhow::Result<BufWriter<File>> {
            Ok(self.out)
        }
    }

    #[test]
    fn batches_wait_for_the_encoder_up_to_the_budget() {
        let one = slice_bytes(&batch(1000));
        // A slice counts the rows it holds, not the buffer it shares.
        assert!(slice_bytes(&batch(1000).slice(0, 100)) * 5 < one);
        let (open, gate) = std::sync::mpsc::channel();
        let inner = Gated {
            gate,
            out: BufWriter::new(tempfile::tempfile().unwrap()),
        };
        let mut s: Box<dyn FileSink> =
            Box::new(Background::spawn(Box::new(inner), one * 7 / 2).unwrap());
        // The first batch is being encoded (held at the gate, and counted until it is done),
        // two more fit the budget...
        for _ in 0..3 {
            s.write(&batch(1000)).unwrap();
        }
        assert_eq!(s.memory_size(), 3 * one);
        // ...and a fourth waits until the encoder has taken one.
        let (done_tx, done) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            s.write(&batch(1000)).unwrap();
            done_tx.send(()).unwrap();
            s
        });
        assert!(done
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_err());
        open.send(()).unwrap();
        done.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the fourth batch was admitted once one was encoded");
        let s = writer.join().unwrap();
        for _ in 0..3 {
            open.send(()).unwrap();
        }
        s.finish().unwrap();
    }

    #[test]
    fn a_writer_waiting_for_room_is_released_when_the_encoder_fails() {
        let (s, _) = probe(Some((1, false)));
        let mut s = s;
        // Budget of 1 byte: every write after the first waits for the encoder, which fails on
        // its first batch; the waits end and the error surfaces.
        let mut err = None;
        for _ in 0..5 {
            if let Err(e) = s.write(&batch(10)) {
                err = Some(e);
                break;
            }
        }
        let e = err
            .map(|e| e.to_string())
            .unwrap_or_else(|| s.finish().unwrap_err().to_string());
        assert!(e.contains("disk full"), "{e}");
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
