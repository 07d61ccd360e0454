//! `silt import`: readers on one thread, the lake writer on another, a progress bar, a summary.

use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use silt_core::{Emit, ReadOptions, Reject, SourceInfo, TableName};
use silt_lake::{ImportSummary, LakeWriter, WriterConfig};
use silt_readers::source::{self, Input};
use silt_readers::Format;

use crate::cli::{ImportArgs, ImportFormat, WriteOpts};

/// What the reader thread sends to the writer.
enum Msg {
    Batch(TableName, RecordBatch),
    Reject(Reject),
    Progress(u64),
    TableBytes(TableName, u64),
}

/// An [`Emit`] that forwards to the writer thread over a bounded channel (so a fast reader
/// cannot run ahead of the writer by more than a few batches: memory stays bounded).
///
/// Progress is summed here and sent with the next batch, reject or table total (or at the end):
/// line readers report it per line, and a message per line cost a thread wake-up each, which
/// profiled at over half of an NDJSON conversion's time.
struct ChannelEmit {
    tx: SyncSender<Msg>,
    progress: u64,
}

impl ChannelEmit {
    fn new(tx: SyncSender<Msg>) -> Self {
        Self { tx, progress: 0 }
    }

    fn send(&mut self, m: Msg) -> anyhow::Result<()> {
        if self.progress > 0 {
            let p = std::mem::take(&mut self.progress);
            self.tx
                .send(Msg::Progress(p))
                .map_err(|_| anyhow::anyhow!("the writer stopped"))?;
        }
        self.tx
            .send(m)
            .map_err(|_| anyhow::anyhow!("the writer stopped"))
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
        self.send(Msg::Batch(table.clone(), batch))
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
}

/// Builds the writer configuration from the command-line options.
pub fn writer_config(w: &WriteOpts) -> anyhow::Result<WriterConfig> {
    // `--partition-by FIELD[:hour|day|none]` = the time column override + `--partition`.
    let (time_column, partition) = match &w.partition_by {
        Some(spec) => {
            let (field, gran) = spec.split_once(':').unwrap_or((spec.as_str(), "hour"));
            let p = gran
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--partition-by {spec}: {e}"))?;
            (Some(field.to_string()), p)
        }
        None => (None, w.partition.parse().map_err(anyhow::Error::msg)?),
    };
    let cfg = WriterConfig {
        store: w.store.parse().map_err(anyhow::Error::msg)?,
        codec: w.codec.parse().map_err(anyhow::Error::msg)?,
        level: w.level,
        row_group_bytes: w.row_group_size,
        page_bytes: w.page_size,
        dictionary_page_bytes: w.dictionary_page_size,
        partition,
        sort: w.sort.clone(),
        bloom_columns: w.bloom.clone(),
        bloom_lookup_columns: !w.no_bloom,
        memory_bytes: w.memory,
        sort_buffer_bytes: w.sort_buffer,
        time_column,
        encodings: silt_lake::EncodingHints {
            dictionary: w.dictionary.clone(),
            no_dictionary: w.no_dictionary.clone(),
            delta: w.delta.clone(),
            byte_stream_split: w.byte_stream_split.clone(),
        },
        ..WriterConfig::default()
    };
    cfg.validate().map_err(anyhow::Error::msg)?;
    Ok(cfg)
}

pub fn run(a: ImportArgs) -> anyhow::Result<i32> {
    let cfg = writer_config(&a.write)?;
    let inputs = source::expand(&a.inputs)?;
    let format = reader_spec(&a)?;
    let show_progress = !a.quiet && std::io::stderr().is_terminal();
    let summary = import(&inputs, format, &a.lake, cfg, a.batch_rows, show_progress)?;
    print_summary(&summary, &a.lake);
    if a.strict && summary.total_rejects() > 0 {
        eprintln!(
            "error: {} input lines were rejected and --strict is set (valid rows were imported)",
            summary.total_rejects()
        );
        return Ok(2);
    }
    Ok(0)
}

/// How inputs of `a.format` are read (custom readers take their options from `a`). `silt bench`
/// calls it too, so every format `silt import` knows can be benchmarked.
pub fn reader_spec(a: &ImportArgs) -> anyhow::Result<ReaderSpec> {
    let spec = match a.format {
        ImportFormat::Zeek => ReaderSpec::Known(Format::Zeek),
        ImportFormat::Suricata => ReaderSpec::Known(Format::Suricata),
        ImportFormat::Auto => ReaderSpec::Auto,
        ImportFormat::Access => {
            return crate::cmd::access::access_reader(
                &a.access,
                a.log.table.as_deref(),
                a.batch_rows,
            );
        }
        ImportFormat::Pcap => pcap_reader(&a.pcap, a.batch_rows)?,
        f => {
            let format = crate::cmd::convert::log_format(f)
                .ok_or_else(|| anyhow::anyhow!("no reader for format {f:?}"))?;
            let spec = crate::cmd::convert::log_reader(format, &a.log, a.batch_rows)?;
            return crate::cmd::access::with_parse_field(spec, &a.access);
        }
    };
    let name = a
        .format
        .to_possible_value()
        .map_or_else(|| format!("{:?}", a.format), |v| v.get_name().to_string());
    crate::cmd::access::refuse_parse_field(&a.access, &name)?;
    Ok(spec)
}

/// How each input is read.
pub enum ReaderSpec {
    /// Detect the format of each input from its first bytes (Zeek TSV/JSON, Suricata EVE).
    Auto,
    /// One of the formats `silt_readers::read` dispatches.
    Known(Format),
    /// Any other reader (PCAP, generic logs, ...): called once per input, with the reader's own
    /// options captured in the closure. It follows the reader contract of `silt_core::emit`.
    Custom(ReadFn),
}

/// A reader with its options bound: `read(input, source, out)`.
pub type ReadFn =
    Box<dyn FnMut(&mut dyn BufRead, &SourceInfo, &mut dyn Emit) -> anyhow::Result<()> + Send>;

impl From<Option<Format>> for ReaderSpec {
    fn from(f: Option<Format>) -> Self {
        f.map_or(ReaderSpec::Auto, ReaderSpec::Known)
    }
}

/// Imports `inputs` into the lake; the library-level entry point that the demo shares.
pub fn import(
    inputs: &[Input],
    format: impl Into<ReaderSpec>,
    lake: &Path,
    cfg: WriterConfig,
    batch_rows: usize,
    show_progress: bool,
) -> anyhow::Result<ImportSummary> {
    let mut writer = LakeWriter::new(lake, cfg)?;
    let total: Option<u64> = inputs.iter().map(Input::size).sum();
    let reader_inputs = inputs.to_vec();
    let opts = ReadOptions { batch_rows };
    let mut format = format.into();
    pipeline(&mut writer, show_progress, total, move |counter, out| {
        read_inputs(&reader_inputs, &mut format, &opts, counter, out)
    })?;
    writer.finish()
}

/// Runs `read` on a reader thread and feeds what it emits into `writer` on this one, so parsing
/// and writing (sorting, encoding) overlap; the bounded channel between them keeps memory bounded.
/// `read` gets the byte counter that the progress bar shows (`total` bytes, when known). Shared
/// by `silt import` and `silt convert`. The writer's error wins over the reader's: when the writer
/// stops, the reader's next send fails and it ends.
pub fn pipeline<W: Emit>(
    writer: &mut W,
    show_progress: bool,
    total: Option<u64>,
    read: impl FnOnce(Arc<AtomicU64>, &mut dyn Emit) -> anyhow::Result<()> + Send + 'static,
) -> anyhow::Result<()> {
    let counter = Arc::new(AtomicU64::new(0));
    let bar = progress_bar(show_progress, total);
    let (tx, rx) = sync_channel::<Msg>(8);
    let reader_counter = counter.clone();
    let reader = std::thread::Builder::new()
        .name("silt-reader".into())
        .spawn(move || read(reader_counter, &mut ChannelEmit::new(tx)))?;
    let write_result = drain(&rx, writer, &bar, &counter);
    drop(rx);
    let read_result = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader thread panicked"))?;
    bar.finish_and_clear();
    write_result?;
    read_result
}

fn progress_bar(show: bool, total: Option<u64>) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(t) => ProgressBar::new(t).with_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta}) {msg}")
                .expect("template"),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bytes} read ({bytes_per_sec}) {msg}").expect("template"),
        ),
    };
    bar.set_draw_target(ProgressDrawTarget::stderr());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn drain<W: Emit>(
    rx: &Receiver<Msg>,
    w: &mut W,
    bar: &ProgressBar,
    counter: &AtomicU64,
) -> anyhow::Result<()> {
    let mut events = 0u64;
    let mut rejects = 0u64;
    for m in rx {
        match m {
            Msg::Batch(t, b) => {
                events += b.num_rows() as u64;
                w.batch(&t, b)?;
            }
            Msg::Reject(r) => {
                rejects += 1;
                if rejects <= 5 {
                    bar.suspend(|| eprintln!("reject: {}:{}: {}", r.source, r.line, r.reason));
                }
                w.reject(r)?;
            }
            Msg::Progress(n) => w.progress(n),
            Msg::TableBytes(t, n) => w.table_bytes(&t, n),
        }
        bar.set_position(counter.load(Ordering::Relaxed));
        bar.set_message(format!("{events} events, {rejects} rejects"));
    }
    Ok(())
}

/// Reads every input into `out` with the reader `spec` selects (detection per input for
/// `Auto`). An unreadable or undetectable input, or one that breaks off (corrupt gzip, I/O
/// error), becomes a reject of that input: what was read is kept and the other inputs go on.
/// Shared by `silt import` (into the writer's channel) and `silt bench` (into memory).
pub fn read_inputs(
    inputs: &[Input],
    spec: &mut ReaderSpec,
    opts: &ReadOptions,
    counter: Arc<AtomicU64>,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    for input in inputs {
        let info = input.info();
        let mut r = match input.open(counter.clone()) {
            Ok(r) => r,
            Err(e) => {
                out.reject(whole_input_reject(&info.display, format!("{e:#}")))?;
                continue;
            }
        };
        let fmt = match spec {
            ReaderSpec::Known(f) => Some(*f),
            ReaderSpec::Custom(_) => None,
            ReaderSpec::Auto => match silt_readers::detect::sniff(&mut *r)? {
                Some(f) => Some(f),
                None if r.fill_buf()?.is_empty() => continue,
                None => {
                    // Not a format silt knows: keep the fact as a reject rather than guessing.
                    let head: Vec<u8> = r.fill_buf()?.iter().take(200).copied().collect();
                    out.reject(Reject {
                        source: info.display.clone(),
                        line: 1,
                        reason: "cannot detect the format (not Zeek TSV/JSON or Suricata EVE); give the format explicitly".into(),
                        raw: head.split(|&c| c == b'\n').next().unwrap_or(&[]).to_vec(),
                        table: None,
                    })?;
                    continue;
                }
            },
        };
        let result = match (fmt, &mut *spec) {
            (Some(fmt), _) => silt_readers::read(fmt, &mut *r, &info, opts, out),
            (None, ReaderSpec::Custom(read)) => read(&mut *r, &info, out),
            (None, _) => unreachable!("Auto and Known always choose a Format"),
        };
        if let Err(e) = result {
            out.reject(whole_input_reject(
                &info.display,
                format!("stopped reading: {e:#}"),
            ))?;
        }
    }
    Ok(())
}

fn whole_input_reject(source: &str, reason: String) -> Reject {
    Reject {
        source: source.to_string(),
        line: 0,
        reason,
        raw: Vec::new(),
        table: None,
    }
}

/// Prints the per-table summary and where rejects went.
pub fn print_summary(s: &ImportSummary, lake: &Path) {
    println!("{s}");
    for p in &s.rejects_files {
        println!("rejected lines kept in {}", p.display());
    }
    if s.total_events() > 0 {
        println!("lake: {}", lake.display());
    }
}

/// `silt import pcap`: the PCAP/PCAPNG reader with its options (docs/pcap.md).
fn pcap_reader(p: &crate::cli::PcapArgs, batch_rows: usize) -> anyhow::Result<ReaderSpec> {
    let payload = match p.payload.as_deref() {
        None => None,
        Some("full") => Some(usize::MAX),
        Some(n) => Some(n.parse::<usize>().map_err(|_| {
            anyhow::anyhow!("--payload takes `full` or a number of bytes, not {n:?}")
        })?),
    };
    let secs = |s: f64, what: &str| -> anyhow::Result<i64> {
        anyhow::ensure!(
            s > 0.0 && s.is_finite(),
            "--{what} must be a positive number of seconds"
        );
        Ok((s * 1e6).round() as i64)
    };
    let opts = silt_pcap::PcapOptions {
        batch_rows,
        payload,
        community_id_seed: p.community_id_seed,
        tables: match (p.flows, p.flows_only) {
            (_, true) => silt_pcap::Tables::Flows,
            (true, false) => silt_pcap::Tables::PacketsAndFlows,
            (false, false) => silt_pcap::Tables::Packets,
        },
        flow: silt_flow::FlowConfig {
            idle_timeout_us: secs(p.idle_timeout, "idle-timeout")?,
            tcp_idle_timeout_us: secs(p.tcp_idle_timeout, "tcp-idle-timeout")?,
            active_timeout_us: secs(p.active_timeout, "active-timeout")?,
            ..Default::default()
        },
    };
    Ok(ReaderSpec::Custom(Box::new(move |input, source, out| {
        silt_pcap::read(input, source, &opts, out)
    })))
}
