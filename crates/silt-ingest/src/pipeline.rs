//! The pipeline: source → decoder → transforms → sink, with checkpoints acknowledged back.
//!
//! [`Pipeline::run`] starts a reader thread that runs the [`Source`]; the source makes a decoder
//! per stream ([`Decoders`]: the format given, or the one detected from the first bytes) and the
//! decoders' batches and rejects travel over a bounded channel to the caller's thread: bounded in
//! batch bytes ([`Pipeline::channel_bytes`], so that a fast reader cannot run further ahead of
//! the sink than that and memory stays bounded whatever the batches' size), and in messages.
//! There the transforms run (on the sink's side: `--parse-field` on the reader thread made it the
//! bottleneck, 71 % of a conversion's CPU samples) and the sink takes the result. Parsing and
//! writing (sorting, encoding) overlap.
//!
//! Commits: with [`Pipeline::commit_every`] the sink is asked to commit on that clock, whenever
//! it asks itself ([`Sink::wants_commit`]: `silt serve`'s generations, sealed by size and age),
//! and once more when the source is done ([`Pipeline::final_commit`]). After a commit that made
//! data durable, every checkpoint the source placed before it is acknowledged: sent back to the
//! running source, or handed to [`Source::acknowledge`] when it has returned. A commit that ends
//! in the background ([`Committed::Started`]) is acknowledged once [`Sink::settled`] says so, and
//! `run` waits for the last ones before it returns. Every checkpoint is also shown to the sink
//! ([`Sink::checkpoint`]) between the data around it.
//!
//! Progress and rejects are reported to an [`Observer`] on the caller's thread (the CLI draws a
//! progress bar with it; this crate has no terminal code). The sink's error wins over the
//! reader's: when the sink stops, the reader's next send fails and it ends.
//!
//! Touches nothing itself: the source reads, the sink writes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use arrow::record_batch::RecordBatch;
use silt_core::format::{binary_head, without_padding, Probe};
use silt_core::transform::apply_all;
use silt_core::{
    Committed, Emit, FormatOptions, FormatSpec, Reject, Sink, SourceInfo, TableName, Transform,
};

use crate::registry;
use crate::source::{whole_input_reject, Checkpoint, Opened, Source, SourceContext};

/// Which format decodes each stream.
#[derive(Debug, Clone, Copy)]
pub enum FormatChoice {
    /// This one, for every stream.
    Fixed(&'static FormatSpec),
    /// The one its first bytes look like ([`registry::detect`]); with `extension_first`, a file
    /// extension that names a format decides before the content is looked at (`silt convert`).
    Auto { extension_first: bool },
}

/// Makes a decoder per stream: the format choice and the options every decoder is made from.
pub struct Decoders {
    pub choice: FormatChoice,
    pub options: FormatOptions,
    formats_used: std::sync::Mutex<BTreeMap<&'static str, u64>>,
}

impl Decoders {
    pub fn new(choice: FormatChoice, options: FormatOptions) -> Self {
        Self {
            choice,
            options,
            formats_used: Default::default(),
        }
    }

    /// The format of a stream whose first bytes are `head`; `None` when no format recognises
    /// them.
    pub fn choose(&self, info: &SourceInfo, head: &[u8]) -> Option<&'static FormatSpec> {
        match self.choice {
            FormatChoice::Fixed(f) => Some(f),
            FormatChoice::Auto { extension_first } => {
                let by_ext = extension_first
                    .then(|| info.file_name.as_deref().and_then(registry::by_extension))
                    .flatten();
                by_ext.or_else(|| {
                    let head = without_padding(head);
                    let probe = Probe {
                        head: &head,
                        file_name: info.file_name.as_deref(),
                    };
                    registry::detect(&probe).map(|d| d.format)
                })
            }
        }
    }

    /// A decoder for a stream (see [`SourceContext::open`]); rejects what cannot be decoded.
    pub fn open(
        &self,
        info: &SourceInfo,
        head: &[u8],
        out: &mut dyn Emit,
    ) -> anyhow::Result<Opened> {
        let auto = matches!(self.choice, FormatChoice::Auto { .. });
        if auto && head.iter().all(u8::is_ascii_whitespace) {
            return Ok(Opened::Empty);
        }
        let Some(format) = self.choose(info, head) else {
            let first = head.split(|&c| c == b'\n').next().unwrap_or(&[]);
            let first = &first[..first.len().min(200)];
            out.reject(Reject {
                source: info.display.clone(),
                line: 1,
                reason: format!(
                    "cannot detect the format (silt reads {}); give the format explicitly, e.g. silt import csv",
                    registry::names().collect::<Vec<_>>().join(", ")
                ),
                raw: first.to_vec(),
                table: None,
            })?;
            return Ok(Opened::Rejected);
        };
        if let Some(what) = format.text.then(|| binary_head(head)).flatten() {
            out.reject(whole_input_reject(
                &info.display,
                format!(
                    "not {} input: {what}, which a text format never has; the whole input is skipped (give the format it is in: `silt import --help` lists them)",
                    format.name
                ),
            ))?;
            return Ok(Opened::Rejected);
        }
        match (format.open)(&self.options, info) {
            Ok(d) => {
                self.used(format);
                Ok(Opened::Decoder(format, d))
            }
            Err(e) => {
                out.reject(whole_input_reject(
                    &info.display,
                    format!("cannot read as {}: {e:#}", format.name),
                ))?;
                Ok(Opened::Rejected)
            }
        }
    }

    /// Counts a stream decoded as `format` (for [`RunReport::formats`]).
    pub(crate) fn used(&self, format: &'static FormatSpec) {
        *self
            .formats_used
            .lock()
            .expect("not poisoned")
            .entry(format.name)
            .or_default() += 1;
    }
}

/// What the reader thread sends to the sink's thread.
enum Msg {
    /// A batch and the bytes it holds in [`InFlight`].
    Batch(TableName, RecordBatch, usize),
    Reject(Reject),
    Progress(u64),
    TableBytes(TableName, u64),
    Note(String),
    Useful,
    Checkpoint(Checkpoint),
}

/// An [`Emit`] that forwards to the sink's thread over a bounded channel.
///
/// Progress is summed here and sent with the next message (or at the end): decoders' drivers
/// report it per buffer, and a message each cost a thread wake-up each, which once profiled at
/// over half of an NDJSON conversion's time.
pub(crate) struct ChannelEmit {
    tx: SyncSender<Msg>,
    in_flight: Arc<InFlight>,
    progress: u64,
}

/// The bytes of the batches sent to the sink's thread and not yet received there: the reader
/// waits while they are at [`Pipeline::channel_bytes`] (one batch always goes, however large).
///
/// Bounded in bytes rather than in batches: a count of batches bounded neither memory (a batch
/// of long lines is hundreds of megabytes) nor, for small batches, let the reader run ahead
/// while the sink was busy. Measured 2026-12-07 on a 2M-record Zeek conn import: with 8
/// messages (about 4 batches, as progress took slots too) the reader waited about 50 ms at the
/// start while the sink chose the table's partitioning and encodings, and the whole import took
/// 1.01 s against 0.95 s with 32 MiB of room (`silt import`, medians of 6 alternated runs; the
/// same CPU time, 10-20 MB more peak RSS).
struct InFlight {
    state: Mutex<(usize, bool)>,
    room: Condvar,
    limit: usize,
}

impl InFlight {
    fn new(limit: usize) -> Self {
        Self {
            state: Mutex::new((0, false)),
            room: Condvar::new(),
            limit,
        }
    }

    /// Waits until `n` more bytes fit (or nothing is in flight) and counts them; false once the
    /// sink's side is closed.
    fn enter(&self, n: usize) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while !s.1 && s.0 > 0 && s.0.saturating_add(n) > self.limit {
            s = self.room.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.1 {
            return false;
        }
        s.0 += n;
        true
    }

    /// `n` bytes were received.
    fn leave(&self, n: usize) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 = s.0.saturating_sub(n);
        self.room.notify_all();
    }

    /// The sink's side stopped receiving: a waiting reader gives up.
    fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.room.notify_all();
    }
}

impl ChannelEmit {
    fn send(&mut self, m: Msg) -> anyhow::Result<()> {
        if self.progress > 0 {
            let p = std::mem::take(&mut self.progress);
            self.tx
                .send(Msg::Progress(p))
                .map_err(|_| anyhow::anyhow!("the sink stopped"))?;
        }
        self.tx
            .send(m)
            .map_err(|_| anyhow::anyhow!("the sink stopped"))
    }

    pub(crate) fn checkpoint(&mut self, c: Checkpoint) -> anyhow::Result<()> {
        self.send(Msg::Checkpoint(c))
    }
}

impl Drop for ChannelEmit {
    fn drop(&mut self) {
        if self.progress > 0 {
            let _ = self.tx.send(Msg::Progress(self.progress));
        }
    }
}

impl Emit for ChannelEmit {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        let n = batch.get_array_memory_size();
        if !self.in_flight.enter(n) {
            anyhow::bail!("the sink stopped");
        }
        let sent = self.send(Msg::Batch(table.clone(), batch, n));
        if sent.is_err() {
            self.in_flight.leave(n);
        }
        sent
    }
    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.send(Msg::Reject(reject))
    }
    fn progress(&mut self, bytes: u64) {
        self.progress += bytes;
    }
    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        let _ = self.send(Msg::TableBytes(table.clone(), bytes));
    }
    fn note(&mut self, line: String) {
        let _ = self.send(Msg::Note(line));
    }
    fn useful(&mut self) {
        let _ = self.send(Msg::Useful);
    }
}

/// Where the pipeline is, for an [`Observer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Raw (on-disk, compressed) bytes read so far.
    pub raw_bytes: u64,
    /// Raw bytes in all, when the source knows.
    pub total: Option<u64>,
    pub events: u64,
    pub rejects: u64,
}

/// Watches a run from the sink's thread (the CLI's progress bar and reject lines).
pub trait Observer {
    fn progress(&mut self, _p: &Progress) {}
    /// Every reject, as it passes (the sink keeps it; show the first few).
    fn reject(&mut self, _r: &Reject) {}
}

/// An observer that shows nothing.
pub struct Quiet;
impl Observer for Quiet {}

/// What one stream gave, counted between the checkpoint before it and its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamReport {
    pub checkpoint: Checkpoint,
    pub events: u64,
    pub rejects: u64,
    /// The decoder said the stream served the run without rows ([`Emit::useful`]).
    pub useful: bool,
}

impl StreamReport {
    /// Nothing from this stream reached the sink (it was empty, not the format, or every
    /// record was rejected), and it served the run no other way.
    pub fn is_empty(&self) -> bool {
        self.events == 0 && !self.useful
    }
}

/// What a run did, besides what its sink reports.
#[derive(Debug, Default, Clone)]
pub struct RunReport {
    pub events: u64,
    pub rejects: u64,
    /// Per stream (one per checkpoint the source placed), in order.
    pub streams: Vec<StreamReport>,
    /// Streams decoded per format (what `import auto` detected).
    pub formats: BTreeMap<&'static str, u64>,
    /// Checkpoints acknowledged (the sink committed everything before them).
    pub acknowledged: Vec<Checkpoint>,
    /// What the decoders noted (`Emit::note`) and the transforms say they did, for the
    /// summary.
    pub transform_reports: Vec<String>,
    /// Commits that made data durable.
    pub commits: u64,
}

/// The pipeline's settings; see the module documentation.
pub struct Pipeline {
    pub format: FormatChoice,
    pub options: FormatOptions,
    pub transforms: Vec<Box<dyn Transform>>,
    /// Ask the sink to commit this often while data flows.
    pub commit_every: Option<Duration>,
    /// Ask the sink to commit once more when the source is done (then the last checkpoints are
    /// acknowledged before `run` returns).
    pub final_commit: bool,
    /// Bytes of batches in flight between the reader thread and the sink, at most (one batch
    /// always goes, however large); [`CHANNEL_BYTES`] unless set.
    pub channel_bytes: usize,
    /// Keep a [`StreamReport`] per checkpoint and every acknowledged checkpoint in the
    /// [`RunReport`]: on for runs over files; off for a server, whose checkpoints never end.
    pub report_streams: bool,
}

/// The reader's lead over the sink, in batch bytes, unless [`Pipeline::channel_bytes`] says
/// otherwise: room for the batches it decodes while the sink looks at a new table's first rows
/// (its partitioning and encodings, tens of milliseconds) on top of a few for the steady state.
pub const CHANNEL_BYTES: usize = 32 << 20;
/// Messages in flight between the reader thread and the sink, at most: batches are bounded by
/// [`Pipeline::channel_bytes`], and the others (rejects, progress, checkpoints) are small.
const CHANNEL_MESSAGES: usize = 256;

/// How often the sink's thread wakes up while no message comes, to ask a sink that commits on
/// its own terms ([`Sink::wants_commit`]) and one that commits in the background
/// ([`Sink::settled`]).
const IDLE_WAKE: Duration = Duration::from_millis(100);

/// Checkpoints on their way to being acknowledged.
#[derive(Default)]
struct Acks {
    /// Placed since the last commit.
    pending: Vec<Checkpoint>,
    /// Committed in the background, with the hand-over that holds them.
    in_flight: std::collections::VecDeque<(u64, Vec<Checkpoint>)>,
}

impl Acks {
    /// Commits `sink`; the checkpoints it made durable go to `ack`.
    fn commit(
        &mut self,
        sink: &mut dyn Sink,
        report: &mut RunReport,
        ack: &mut dyn FnMut(Checkpoint),
    ) -> anyhow::Result<()> {
        match sink.commit(SystemTime::now())? {
            Committed::No => {}
            Committed::Durable => {
                report.commits += 1;
                self.pending.drain(..).for_each(&mut *ack);
            }
            Committed::Started(n) => {
                report.commits += 1;
                self.in_flight
                    .push_back((n, std::mem::take(&mut self.pending)));
            }
        }
        Ok(())
    }

    /// Acknowledges the background commits the sink has finished; with `wait`, waits for all
    /// of them (for as long as the sink's writer works at them: a writer that retries is
    /// waited for, one that stopped is an error).
    fn settle(
        &mut self,
        sink: &mut dyn Sink,
        wait: bool,
        ack: &mut dyn FnMut(Checkpoint),
    ) -> anyhow::Result<()> {
        while let Some(&(n, _)) = self.in_flight.front() {
            let done = sink.settled(wait.then_some((n, Duration::from_secs(1))))?;
            if done < n {
                if wait {
                    continue;
                }
                return Ok(());
            }
            while self.in_flight.front().is_some_and(|(m, _)| *m <= done) {
                let (_, cs) = self.in_flight.pop_front().expect("just seen");
                cs.into_iter().for_each(&mut *ack);
            }
        }
        Ok(())
    }
}

impl Pipeline {
    pub fn new(format: FormatChoice, options: FormatOptions) -> Self {
        Self {
            format,
            options,
            transforms: Vec::new(),
            commit_every: None,
            final_commit: true,
            channel_bytes: CHANNEL_BYTES,
            report_streams: true,
        }
    }

    pub fn with_transform(mut self, t: Box<dyn Transform>) -> Self {
        self.transforms.push(t);
        self
    }

    /// Runs `source` into `sink` until the source is done; returns the source (with its
    /// acknowledgements delivered) and the report. The caller finishes the sink.
    pub fn run<S: Source + 'static>(
        mut self,
        mut source: S,
        sink: &mut dyn Sink,
        observer: &mut dyn Observer,
    ) -> anyhow::Result<(S, RunReport)> {
        let raw = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let total = source.size_hint();
        let (tx, rx) = sync_channel::<Msg>(CHANNEL_MESSAGES);
        let in_flight = Arc::new(InFlight::new(self.channel_bytes));
        let (ack_tx, ack_rx) = channel::<Checkpoint>();
        let decoders = Arc::new(Decoders::new(self.format, self.options.clone()));
        let reader = {
            let raw = raw.clone();
            let stop = stop.clone();
            let decoders = decoders.clone();
            let in_flight = in_flight.clone();
            std::thread::Builder::new()
                .name("silt-reader".into())
                .spawn(move || {
                    let mut out = ChannelEmit {
                        tx,
                        in_flight,
                        progress: 0,
                    };
                    let mut ctx = SourceContext {
                        out: &mut out,
                        decoders: &decoders,
                        acks: &ack_rx,
                        raw_bytes: raw,
                        stop: &stop,
                    };
                    let r = source.run(&mut ctx);
                    // Acknowledgements the source did not take while it ran are delivered
                    // after the sink's thread is done (some are sent after this thread ends).
                    (source, r, ack_rx)
                })?
        };
        let mut report = RunReport::default();
        let mut acks = Acks::default();
        let drained = self.drain(
            &rx,
            &in_flight,
            sink,
            observer,
            &raw,
            total,
            &ack_tx,
            &mut acks,
            &mut report,
        );
        if drained.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        in_flight.close();
        drop(rx);
        let (mut source, read_result, ack_rx) = reader
            .join()
            .map_err(|_| anyhow::anyhow!("the reader thread panicked"))?;
        for c in ack_rx.try_iter() {
            source.acknowledge(&c);
        }
        drained?;
        read_result?;
        let keep = self.report_streams;
        let mut acknowledged = Vec::new();
        let mut ack = |c: Checkpoint| {
            source.acknowledge(&c);
            if keep {
                acknowledged.push(c);
            }
        };
        if self.final_commit {
            acks.commit(sink, &mut report, &mut ack)?;
        }
        acks.settle(sink, true, &mut ack)?;
        report.acknowledged.extend(acknowledged);
        report.formats = decoders.formats_used.lock().expect("not poisoned").clone();
        report
            .transform_reports
            .extend(self.transforms.iter().flat_map(|t| t.report()));
        Ok((source, report))
    }

    /// Feeds the channel's messages into the transforms and the sink until the reader is done,
    /// committing when the clock or the sink asks; checkpoints not yet acknowledged stay in
    /// `acks`.
    #[allow(clippy::too_many_arguments)]
    fn drain(
        &mut self,
        rx: &Receiver<Msg>,
        in_flight: &InFlight,
        sink: &mut dyn Sink,
        observer: &mut dyn Observer,
        raw: &AtomicU64,
        total: Option<u64>,
        ack_tx: &std::sync::mpsc::Sender<Checkpoint>,
        acks: &mut Acks,
        report: &mut RunReport,
    ) -> anyhow::Result<()> {
        let mut next_commit = self.commit_every.map(|d| Instant::now() + d);
        // Events and rejects since the last checkpoint.
        let (mut since_events, mut since_rejects, mut since_useful) = (0u64, 0u64, false);
        let keep = self.report_streams;
        let mut acknowledged = Vec::new();
        let mut ack = |c: Checkpoint| {
            if keep {
                acknowledged.push(c.clone());
            }
            let _ = ack_tx.send(c);
        };
        loop {
            let wake = next_commit.map_or(IDLE_WAKE, |at| {
                at.saturating_duration_since(Instant::now()).min(IDLE_WAKE)
            });
            let msg = match rx.recv_timeout(wake) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            match msg {
                Some(Msg::Batch(t, b, n)) => {
                    in_flight.leave(n);
                    report.events += b.num_rows() as u64;
                    since_events += b.num_rows() as u64;
                    let b = apply_all(&mut self.transforms, &t, b)?;
                    sink.batch(&t, b)?;
                }
                Some(Msg::Reject(r)) => {
                    report.rejects += 1;
                    since_rejects += 1;
                    observer.reject(&r);
                    sink.reject(r)?;
                }
                Some(Msg::Progress(n)) => sink.progress(n),
                Some(Msg::TableBytes(t, n)) => sink.table_bytes(&t, n),
                Some(Msg::Note(line)) => report.transform_reports.push(line),
                Some(Msg::Useful) => since_useful = true,
                Some(Msg::Checkpoint(c)) => {
                    sink.checkpoint(&c);
                    let (events, rejects, useful) = (
                        std::mem::take(&mut since_events),
                        std::mem::take(&mut since_rejects),
                        std::mem::take(&mut since_useful),
                    );
                    if keep {
                        report.streams.push(StreamReport {
                            checkpoint: c.clone(),
                            events,
                            rejects,
                            useful,
                        });
                    }
                    acks.pending.push(c);
                }
                None => {}
            }
            observer.progress(&Progress {
                raw_bytes: raw.load(Ordering::Relaxed),
                total,
                events: report.events,
                rejects: report.rejects,
            });
            let clock = next_commit.is_some_and(|at| Instant::now() >= at);
            if clock || sink.wants_commit() {
                acks.commit(sink, report, &mut ack)?;
                if let Some(every) = self.commit_every.filter(|_| clock) {
                    next_commit = Some(Instant::now() + every);
                }
            }
            acks.settle(sink, false, &mut ack)?;
        }
        report.acknowledged.extend(acknowledged);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use std::sync::Mutex;

    /// Every text format refuses, whole, an input whose first line holds a NUL byte (an
    /// executable, a capture, a gzip'd file of another kind), and opens one with a NUL further on
    /// (a log padded with zeros by a crash) as it always did; binary formats never refuse for it.
    #[test]
    fn a_text_format_refuses_binary_input_whole() {
        let elf = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\n\x01\x02,3\nx=1\n";
        let bom_blank = b"\xEF\xBB\xBF\n  \n\x01\x00\x02\n";
        let zeros_later = b"a,b\n1,2\n\x00\x00\x00\n3,4\n";
        // Zero padding after a blank first line is padding, not binary data.
        let padded_after_blank = b"\n\x00\x00\x00\x00\x00a,b\n1,2\n";
        let info = SourceInfo {
            display: "/x/in".into(),
            file_name: Some("in".into()),
        };
        let mut text = 0;
        for name in registry::names() {
            let format = registry::find(name).unwrap();
            let decoders = Decoders::new(FormatChoice::Fixed(format), FormatOptions::default());
            for head in [&elf[..], &bom_blank[..]] {
                let mut out = silt_core::CollectEmit::default();
                let opened = decoders.open(&info, head, &mut out).unwrap();
                if format.text {
                    assert!(matches!(opened, Opened::Rejected), "{name}");
                    assert_eq!(out.rejects.len(), 1, "{name}");
                    let r = &out.rejects[0];
                    assert_eq!((r.line, r.source.as_str()), (0, "/x/in"), "{name}");
                    assert!(
                        r.reason.starts_with(&format!(
                            "not {name} input: its first line holds a NUL byte"
                        )),
                        "{name}: {}",
                        r.reason
                    );
                } else {
                    assert!(out.rejects.iter().all(|r| !r.reason.contains("NUL byte")));
                }
            }
            if format.text {
                text += 1;
                let mut out = silt_core::CollectEmit::default();
                for head in [&zeros_later[..], &padded_after_blank[..]] {
                    let opened = decoders.open(&info, head, &mut out).unwrap();
                    assert!(matches!(opened, Opened::Decoder(..)), "{name}");
                    assert!(out.rejects.is_empty(), "{name}");
                }
            }
        }
        // zeek, suricata, json, csv, tsv, ltsv, syslog, access, docker.
        assert!(text >= 9, "{text} text formats");
    }

    /// Places a one-row batch and a checkpoint per position; records every acknowledgement.
    struct Numbers {
        upto: u64,
        acked: Arc<Mutex<Vec<u64>>>,
        durable: Arc<AtomicU64>,
    }

    impl Numbers {
        fn acked(&mut self, c: &Checkpoint) {
            assert!(
                c.position <= self.durable.load(Ordering::SeqCst),
                "checkpoint {} acknowledged before the sink made it durable",
                c.position
            );
            self.acked.lock().unwrap().push(c.position);
        }
    }

    impl Source for Numbers {
        fn describe(&self) -> String {
            "numbers".into()
        }
        fn run(&mut self, ctx: &mut SourceContext<'_>) -> anyhow::Result<()> {
            let t = TableName::parse("t.n").unwrap();
            for i in 1..=self.upto {
                let b = RecordBatch::try_from_iter([(
                    "n",
                    Arc::new(Int64Array::from(vec![i as i64])) as _,
                )])?;
                ctx.out().batch(&t, b)?;
                ctx.checkpoint(Checkpoint {
                    stream: "s".into(),
                    position: i,
                })?;
                for c in ctx.acknowledged() {
                    self.acked(&c);
                }
            }
            Ok(())
        }
        fn acknowledge(&mut self, c: &Checkpoint) {
            self.acked(c);
        }
    }

    /// Commits in the background after every checkpoint: hand-over `n` becomes durable when
    /// hand-over `n + 1` starts, or when the pipeline waits for it at the end.
    struct Background {
        rows: u64,
        since_checkpoint: bool,
        started: u64,
        /// The last position checkpointed in each hand-over.
        handed: Vec<u64>,
        seen: u64,
        durable_handover: u64,
        durable: Arc<AtomicU64>,
    }

    impl Background {
        fn settle(&mut self, n: u64) {
            self.durable_handover = self.durable_handover.max(n);
            let pos = self.handed[n as usize - 1];
            self.durable.fetch_max(pos, Ordering::SeqCst);
        }
    }

    impl Emit for Background {
        fn batch(&mut self, _t: &TableName, b: RecordBatch) -> anyhow::Result<()> {
            self.rows += b.num_rows() as u64;
            self.since_checkpoint = true;
            Ok(())
        }
        fn reject(&mut self, _r: Reject) -> anyhow::Result<()> {
            Ok(())
        }
    }

    impl Sink for Background {
        fn commit(&mut self, _now: SystemTime) -> anyhow::Result<Committed> {
            if self.since_checkpoint || self.handed.last() == Some(&self.seen) {
                return Ok(Committed::No);
            }
            if self.started > 0 {
                self.settle(self.started);
            }
            self.started += 1;
            self.handed.push(self.seen);
            Ok(Committed::Started(self.started))
        }
        fn wants_commit(&mut self) -> bool {
            !self.since_checkpoint && self.seen > 0
        }
        fn settled(&mut self, wait: Option<(u64, Duration)>) -> anyhow::Result<u64> {
            if let Some((n, _)) = wait {
                self.settle(n);
            }
            Ok(self.durable_handover)
        }
        fn checkpoint(&mut self, c: &Checkpoint) {
            self.seen = c.position;
            self.since_checkpoint = false;
        }
    }

    #[test]
    fn a_commit_that_ends_in_the_background_is_acknowledged_once_settled_and_run_waits_for_the_last(
    ) {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let durable = Arc::new(AtomicU64::new(0));
        let source = Numbers {
            upto: 50,
            acked: acked.clone(),
            durable: durable.clone(),
        };
        let mut sink = Background {
            rows: 0,
            since_checkpoint: false,
            started: 0,
            handed: Vec::new(),
            seen: 0,
            durable_handover: 0,
            durable: durable.clone(),
        };
        let p = Pipeline {
            report_streams: true,
            ..Pipeline::new(
                FormatChoice::Auto {
                    extension_first: false,
                },
                FormatOptions::default(),
            )
        };
        let (_, report) = p.run(source, &mut sink, &mut Quiet).unwrap();
        assert_eq!(sink.rows, 50);
        assert_eq!(*acked.lock().unwrap(), (1..=50).collect::<Vec<_>>());
        let positions: Vec<u64> = report.acknowledged.iter().map(|c| c.position).collect();
        assert_eq!(positions, (1..=50).collect::<Vec<_>>());
        assert_eq!(report.commits, sink.started);
        assert_eq!(durable.load(Ordering::SeqCst), 50);
        // Every hand-over held whole checkpoints, in order, and the last was waited for.
        assert!(sink.handed.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sink.durable_handover, sink.started);
    }

    /// Whether `f` is still running after a while (it waits, as it should) or returned.
    fn waits<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let h = std::thread::spawn(f);
        std::thread::sleep(Duration::from_millis(100));
        assert!(!h.is_finished(), "returned at once instead of waiting");
        h
    }

    #[test]
    fn batches_in_flight_are_bounded_in_bytes_one_batch_always_goes_and_closing_frees_the_reader() {
        let f = Arc::new(InFlight::new(100));
        // A batch larger than the whole bound goes when nothing is in flight.
        assert!(f.enter(250));
        // Nothing more goes until it is received.
        let g = f.clone();
        let next = waits(move || g.enter(10));
        f.leave(250);
        assert!(next.join().unwrap());
        // Several fit together up to the bound.
        assert!(f.enter(90));
        let g = f.clone();
        let over = waits(move || g.enter(10));
        f.leave(10);
        assert!(over.join().unwrap(), "90 + 10 fit once 10 were received");
        // A reader waiting when the sink's side closes gives up, and so does every later one.
        let g = f.clone();
        let stuck = waits(move || g.enter(100));
        f.close();
        assert!(!stuck.join().unwrap());
        assert!(!f.enter(1));
    }

    /// A source of `n` batches of 1,000 rows each.
    struct Many(usize);

    impl Source for Many {
        fn describe(&self) -> String {
            "many".into()
        }
        fn run(&mut self, ctx: &mut SourceContext<'_>) -> anyhow::Result<()> {
            let t = TableName::parse("t.n").unwrap();
            for i in 0..self.0 {
                let b = RecordBatch::try_from_iter([(
                    "n",
                    Arc::new(Int64Array::from(vec![i as i64; 1000])) as _,
                )])?;
                ctx.out().batch(&t, b)?;
            }
            Ok(())
        }
        fn acknowledge(&mut self, _c: &Checkpoint) {}
    }

    /// Takes 20 ms a batch (the reader soon waits for room) and fails on its `fail_at`th batch
    /// (from 1; never with 0).
    struct Slow {
        fail_at: usize,
        seen: usize,
    }

    impl Emit for Slow {
        fn batch(&mut self, _t: &TableName, _b: RecordBatch) -> anyhow::Result<()> {
            self.seen += 1;
            std::thread::sleep(Duration::from_millis(20));
            if self.seen == self.fail_at {
                anyhow::bail!("disk full");
            }
            Ok(())
        }
        fn reject(&mut self, _r: Reject) -> anyhow::Result<()> {
            Ok(())
        }
    }

    impl Sink for Slow {
        fn commit(&mut self, _now: SystemTime) -> anyhow::Result<Committed> {
            Ok(Committed::Durable)
        }
    }

    #[test]
    fn a_sink_that_fails_while_the_reader_waits_for_room_ends_the_run_with_its_error() {
        let one =
            RecordBatch::try_from_iter([("n", Arc::new(Int64Array::from(vec![0i64; 1000])) as _)])
                .unwrap()
                .get_array_memory_size();
        let pipeline = |bytes| Pipeline {
            channel_bytes: bytes,
            ..Pipeline::new(
                FormatChoice::Auto {
                    extension_first: false,
                },
                FormatOptions::default(),
            )
        };
        // Room for two batches: the reader waits for room at once, and the sink fails. (On a
        // thread of its own, so that a reader left waiting fails the test instead of hanging it.)
        let (tx, rx) = channel();
        let p = pipeline(2 * one);
        std::thread::spawn(move || {
            let mut sink = Slow {
                fail_at: 3,
                seen: 0,
            };
            let r = p.run(Many(1000), &mut sink, &mut Quiet).map(|_| ());
            let _ = tx.send((r, sink.seen));
        });
        let (r, seen) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the run ended (the reader was left waiting for room)");
        assert_eq!(r.expect_err("the sink's error").to_string(), "disk full");
        assert_eq!(seen, 3);
        // Without a failure every batch arrives, however small the room.
        let mut sink = Slow {
            fail_at: 0,
            seen: 0,
        };
        pipeline(1).run(Many(10), &mut sink, &mut Quiet).unwrap();
        assert_eq!(sink.seen, 10);
    }
}
