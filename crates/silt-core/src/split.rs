//! One stream's lines decoded on several threads.
//!
//! The stream is cut into blocks of whole lines; each block is decoded by a copy of the decoder
//! made where the block starts ([`SplitLines::fork`]: header state, nothing buffered), on a small
//! pool of threads; what the copies emit is passed on in stream order, with each reject's line
//! number made stream-wide. The result is what decoding the stream on one thread gives, except
//! where batches end (a block's rows end its batch).
//!
//! Why: one thread parses Zeek TSV at about 400 MB/s, which bounds an import of one large log
//! wherever the sink needs less than the rest of the machine (see [`Split::auto`] for when
//! threads are started by default).
//!
//! Bounds: at most `threads + 1` blocks are read ahead of the rows passed on. A block that holds
//! no line end at all (a line longer than a block) ends the split: from there the rest of the
//! stream is decoded on the calling thread, where the decoder's own line limit applies.
//!
//! Touches nothing but the stream it reads, `out`, and the threads it starts (joined before it
//! returns).

use std::collections::VecDeque;
use std::io::{BufRead, ErrorKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use arrow::record_batch::RecordBatch;
use memchr::memrchr;

use crate::decode::read_stream;
use crate::{Decoder, Emit, Reject, TableName};

/// A line-based decoder whose state between two lines can be copied.
pub trait SplitLines: Decoder {
    /// The decoder of one block.
    type Part: Decoder + 'static;

    /// A decoder for the lines that follow what [`SplitLines::skip`] has seen: the state those
    /// lines are decoded in (headers, separators), nothing buffered, and its line numbers
    /// counted from 1 at its block's first line.
    fn fork(&self) -> Self::Part;

    /// Takes `block` (whole lines, in stream order) into the state later forks start from,
    /// without decoding its rows: header lines are all that count.
    fn skip(&mut self, block: &[u8]);

    /// Lines a part has been fed so far.
    fn part_lines(part: &Self::Part) -> u64;
}

/// How a stream is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Decoding threads; below 2 the stream is decoded on the calling thread.
    pub threads: usize,
    /// Bytes per block (a block ends at the last line end within this many bytes).
    pub block_bytes: usize,
}

impl Split {
    /// Threads for the cores the sink's side leaves ([`SINK_CORES`]; at most [`MAX_THREADS`]),
    /// in blocks of 4 MiB (about as many Zeek conn rows as two batches hold).
    /// `SILT_DECODE_THREADS` sets the threads instead (`1`: the reading thread alone).
    ///
    /// On two cores that leaves none: a Parquet import there is bound by all of its CPU time,
    /// not by the reading thread, and decoding ahead only filled the queues (wall time the same
    /// on the Zeek benchmark, peak memory 31-45 % higher). Where decoding is the bound (an
    /// import into Feather files, more cores than the sink uses), two threads cut a real-derived
    /// conn import's wall time by a fifth (0.80 to 0.63 s into Feather on two cores).
    pub fn auto() -> Self {
        // Looked up once: a directory of small logs asks for every file.
        static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let threads = *THREADS.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            std::env::var("SILT_DECODE_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(cores.saturating_sub(SINK_CORES).min(MAX_THREADS))
        });
        Split {
            threads,
            block_bytes: 4 << 20,
        }
    }
}

/// Cores [`Split::auto`] leaves to the sink: its thread (routing, sorting) and the Parquet
/// writer's two column-encoding threads.
pub const SINK_CORES: usize = 3;

/// The most threads [`Split::auto`] starts.
pub const MAX_THREADS: usize = 8;

/// What a part emitted, kept until its turn comes.
enum Event {
    Batch(TableName, RecordBatch),
    Reject(Reject),
    TableBytes(TableName, u64),
    Note(String),
}

#[derive(Default)]
struct Recorded(Vec<Event>);

impl Emit for Recorded {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        self.0.push(Event::Batch(table.clone(), batch));
        Ok(())
    }
    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.0.push(Event::Reject(reject));
        Ok(())
    }
    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        self.0.push(Event::TableBytes(table.clone(), bytes));
    }
    fn note(&mut self, line: String) {
        self.0.push(Event::Note(line));
    }
}

/// Passes on to `out` what a part emitted, its reject line numbers moved by `lines` (the
/// stream's lines before the part's first); progress is counted where bytes are read.
struct Shifted<'a> {
    out: &'a mut dyn Emit,
    lines: u64,
}

impl Shifted<'_> {
    fn shift(&self, mut r: Reject) -> Reject {
        // Line 0 stands for a whole input, not a line.
        if r.line > 0 {
            r.line += self.lines;
        }
        r
    }
}

impl Emit for Shifted<'_> {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        self.out.batch(table, batch)
    }
    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        let r = self.shift(reject);
        self.out.reject(r)
    }
    fn progress(&mut self, bytes: u64) {
        self.out.progress(bytes)
    }
    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        self.out.table_bytes(table, bytes)
    }
    fn note(&mut self, line: String) {
        self.out.note(line)
    }
}

/// One block to decode, and where its result goes.
struct Job<P> {
    part: P,
    block: Vec<u8>,
    last: bool,
    reply: SyncSender<Done>,
}

/// A decoded block: what its part emitted, its lines, how it ended, and the block's buffer for
/// reuse.
struct Done {
    events: Vec<Event>,
    lines: u64,
    result: anyhow::Result<()>,
    block: Vec<u8>,
}

/// Reads the whole stream `input` with `dec`, split as `split` says (see the module
/// documentation), and finishes it. Reports the bytes it reads as progress. On an I/O error,
/// what was read is decoded and emitted first (as [`read_stream`] does), then the error is
/// returned.
pub fn read_split<D: SplitLines>(
    dec: &mut D,
    input: &mut dyn BufRead,
    out: &mut dyn Emit,
    split: Split,
) -> anyhow::Result<()> {
    if split.threads < 2 {
        return read_stream(dec, input, out);
    }
    let block_bytes = split.block_bytes.max(1);
    let mut block = Vec::with_capacity(block_bytes);
    let (mut end, err) = fill(input, &mut block, block_bytes, out);
    if end {
        // One block is all there is: no thread is worth starting.
        dec.feed(&block, out)?;
        dec.finish(out)?;
        return err.map_or(Ok(()), Err);
    }
    let stop = AtomicBool::new(false);
    let (job_tx, job_rx) = sync_channel::<Job<D::Part>>(split.threads);
    let job_rx = Arc::new(Mutex::new(job_rx));
    std::thread::scope(|scope| {
        for i in 0..split.threads {
            let rx = job_rx.clone();
            let stop = &stop;
            std::thread::Builder::new()
                .name(format!("silt-decode-{i}"))
                .spawn_scoped(scope, move || work::<D>(&rx, stop))?;
        }
        let r = dispatch(
            dec,
            input,
            out,
            block_bytes,
            split.threads,
            &job_tx,
            &mut block,
            &mut end,
        );
        if r.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        drop(job_tx);
        r
    })?;
    err.map_or(Ok(()), Err)
}

/// The reading thread's part of [`read_split`]: cuts blocks, hands them out, and passes on the
/// results in order. `block` holds the first block read (`end`: the stream ended in it).
#[allow(clippy::too_many_arguments)]
fn dispatch<D: SplitLines>(
    dec: &mut D,
    input: &mut dyn BufRead,
    out: &mut dyn Emit,
    block_bytes: usize,
    threads: usize,
    jobs: &SyncSender<Job<D::Part>>,
    block: &mut Vec<u8>,
    end: &mut bool,
) -> anyhow::Result<()> {
    let mut pending: VecDeque<Receiver<Done>> = VecDeque::new();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut lines = 0u64;
    let mut err: Option<anyhow::Error> = None;
    loop {
        let cut = if *end {
            Some(block.len())
        } else {
            memrchr(b'\n', block).map(|i| i + 1)
        };
        let Some(cut) = cut else {
            // A line longer than a block: the rest is decoded here, where the decoder's line
            // limit (and its memory bound) applies.
            while let Some(rx) = pending.pop_front() {
                pass_on(rx, out, &mut lines, &mut spare)?;
            }
            let mut part = dec.fork();
            let mut shifted = Shifted { out, lines };
            part.feed(block, &mut shifted)?;
            return read_stream(&mut part, input, &mut shifted);
        };
        let mut next = spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(block_bytes));
        next.clear();
        next.extend_from_slice(&block[cut..]);
        block.truncate(cut);
        let part = dec.fork();
        dec.skip(block);
        let (reply, rx) = sync_channel(1);
        let job = Job {
            part,
            block: std::mem::replace(block, next),
            last: *end,
            reply,
        };
        if jobs.send(job).is_err() {
            anyhow::bail!("the decoding threads stopped");
        }
        pending.push_back(rx);
        while pending.len() > threads {
            let rx = pending.pop_front().expect("not empty");
            pass_on(rx, out, &mut lines, &mut spare)?;
        }
        if *end {
            break;
        }
        let (e, read_err) = fill(input, block, block_bytes, out);
        *end = e;
        if read_err.is_some() {
            err = read_err;
        }
    }
    while let Some(rx) = pending.pop_front() {
        pass_on(rx, out, &mut lines, &mut spare)?;
    }
    err.map_or(Ok(()), Err)
}

/// Passes on one decoded block's events (reject lines moved by `lines`, which then counts its
/// lines too); its error, if it had one, after them.
fn pass_on(
    rx: Receiver<Done>,
    out: &mut dyn Emit,
    lines: &mut u64,
    spare: &mut Vec<Vec<u8>>,
) -> anyhow::Result<()> {
    let done = rx
        .recv()
        .map_err(|_| anyhow::anyhow!("a decoding thread stopped without a result"))?;
    let mut shifted = Shifted { out, lines: *lines };
    for e in done.events {
        match e {
            Event::Batch(t, b) => shifted.batch(&t, b)?,
            Event::Reject(r) => shifted.reject(r)?,
            Event::TableBytes(t, n) => shifted.table_bytes(&t, n),
            Event::Note(l) => shifted.note(l),
        }
    }
    *lines += done.lines;
    spare.push(done.block);
    done.result
}

/// A decoding thread: takes blocks until there are none (or the reader stopped).
fn work<D: SplitLines>(jobs: &Mutex<Receiver<Job<D::Part>>>, stop: &AtomicBool) {
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(Job {
            mut part,
            block,
            last,
            reply,
        }) = job
        else {
            return;
        };
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let mut rec = Recorded::default();
        // A panic (a decoder bug) becomes this block's error, not a dead reader.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            part.feed(&block, &mut rec)?;
            if last {
                part.finish(&mut rec)
            } else {
                part.flush(&mut rec)
            }
        }))
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the decoder panicked on this block")));
        let _ = reply.send(Done {
            events: rec.0,
            lines: D::part_lines(&part),
            result,
            block,
        });
    }
}

/// Appends to `block` from `input` until it holds `size` bytes or the stream ends, reporting
/// what it read as progress. Returns whether the stream ended, and the I/O error that ended
/// it, if one did.
fn fill(
    input: &mut dyn BufRead,
    block: &mut Vec<u8>,
    size: usize,
    out: &mut dyn Emit,
) -> (bool, Option<anyhow::Error>) {
    while block.len() < size {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return (true, Some(anyhow::Error::new(e).context("read error"))),
        };
        if buf.is_empty() {
            return (true, None);
        }
        let n = buf.len().min(size - block.len());
        block.extend_from_slice(&buf[..n]);
        input.consume(n);
        out.progress(n as u64);
    }
    (false, None)
}
