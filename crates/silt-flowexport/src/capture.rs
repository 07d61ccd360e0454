//! Flow export in packet captures: the `sflow` and `netflow` formats (`silt import sflow
//! FILE.pcap`, `silt import netflow FILE.pcap`). silt-pcap's framing reads the capture (pcap or
//! pcapng, fed in pieces split anywhere) and hands each frame to [`FlowFrames`], which takes the
//! frame's UDP datagram (`silt_pcap::decode::Decoded::udp_payload`: VLANs, tunnels and link
//! types as for `pcap.packet`) and gives it to a [`Collector`]; the frame number is the
//! reject's line, as in tshark.
//!
//! The captures of one import share their NetFlow/IPFIX templates ([`CaptureOptions::templates`])
//! and the data sets that arrived before their template: a data capture read before the template
//! capture it needs (a directory is read in name order, `data.pcap` before `template.pcap`) has
//! its data decoded when the template comes (bounded as in one stream). What no capture of the
//! import brings a template for is reported at the end of each capture as still waiting. A
//! capture that brought templates but no flows is not "nothing imported" ([`Emit::useful`]).
//!
//! Which frames: UDP datagrams to `--port` (any port by default). A frame that is not an
//! unfragmented UDP datagram (or is to another port) is not flow export: it is counted and the
//! count is noted in the summary (`Emit::note`), not rejected. A frame the link layers cannot
//! decode is a reject. Touches nothing but the frames it is given and `out`.
//!
//! **Decoding on a thread of its own.** The reader thread (silt-pcap's framing, then each frame's
//! link, IP and UDP layers) copies the datagrams into chunks of about [`CHUNK_BYTES`]; a decoding
//! thread owns the [`Collector`], decodes the chunks in order and builds the batches, and the
//! reader hands what it emitted (batches, rejects, byte counts, notes) on to `out`, in the order
//! it was emitted. The stream's state stays in one collector, so sequence tracking and NetFlow
//! templates behave exactly as on one thread. Why: in an enriched sFlow import (10M samples on
//! 2 cores) the reader thread, which did everything here, was the stage every other one waited
//! for. At most [`CHUNKS_IN_FLIGHT`] + 1 chunks are on their way, which bounds the memory.

use std::net::IpAddr;
use std::ops::Range;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use arrow::record_batch::RecordBatch;
use silt_core::format::{Confidence, FormatOptions, FormatSpec, Probe};
use silt_core::{Decoder, Emit, Reject, SourceInfo, TableName};
use silt_pcap::decode::{decode_frame, Decoded};
use silt_pcap::{FrameHandler, FrameMeta, PcapDecoder};

use crate::{
    netflow_flow_table, sflow_sample_table, Collector, Datagram, FlowExportOptions, Protocol,
};

/// Options of the capture formats, carried in [`FormatOptions`].
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    /// Only UDP datagrams to this destination port (`--port`); `None`: every UDP datagram.
    pub port: Option<u16>,
    /// Community ID seed for sampled sFlow headers.
    pub community_id_seed: u16,
    /// NetFlow v9/IPFIX templates shared by every capture of one import, so a template capture
    /// given before its data captures serves them (as one collector sees them).
    pub templates: crate::SharedTemplates,
}

/// `sflow`: sFlow v5 datagrams in a pcap/pcapng capture.
pub static SFLOW_FORMAT: FormatSpec = FormatSpec {
    name: "sflow",
    aliases: &[],
    summary: "sFlow v5 datagrams in a pcap/pcapng capture (UDP, any port or --port); tables sflow.sample, sflow.counter",
    extensions: &[],
    sniff: never,
    open: open_sflow,
    text_fields: false,
    text: false,
};

/// `netflow`: NetFlow v5/v9 and IPFIX datagrams in a pcap/pcapng capture.
pub static NETFLOW_FORMAT: FormatSpec = FormatSpec {
    name: "netflow",
    aliases: &["ipfix"],
    summary: "NetFlow v5/v9 and IPFIX datagrams in a pcap/pcapng capture (UDP, any port or --port); table netflow.flow",
    extensions: &[],
    sniff: never,
    open: open_netflow,
    text_fields: false,
    text: false,
};

/// A capture of flow export is a capture first: `auto` reads it as `pcap`, and the flow
/// formats are chosen by name.
fn never(_: &Probe<'_>) -> Option<Confidence> {
    None
}

fn open_sflow(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    Ok(Box::new(decoder(Protocol::Sflow, opts, source)))
}

fn open_netflow(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    Ok(Box::new(decoder(Protocol::Netflow, opts, source)))
}

/// The decoder of a capture holding `protocol`'s datagrams.
pub fn decoder(
    protocol: Protocol,
    opts: &FormatOptions,
    source: &SourceInfo,
) -> PcapDecoder<FlowFrames> {
    let c: CaptureOptions = opts.get_or_default();
    let fo = FlowExportOptions {
        batch_rows: opts.read.batch_rows,
        community_id_seed: c.community_id_seed,
        ..FlowExportOptions::default()
    };
    PcapDecoder::with_handler(
        source,
        FlowFrames {
            protocol,
            port: c.port,
            collector: Some(
                Collector::new(protocol, source, fo)
                    .with_templates(c.templates.clone())
                    .holding_across_streams(),
            ),
            worker: None,
            chunk: Chunk::default(),
            spare: Vec::new(),
            source: source.display.clone(),
            decoded: Decoded::default(),
            skipped: 0,
            other_port: 0,
        },
    )
}

/// Payload bytes per chunk handed to the decoding thread.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Chunks handed to the decoding thread and not yet given back: once more are, the reader
/// waits for one (so at most one more than this are on their way).
pub const CHUNKS_IN_FLIGHT: usize = 3;

/// What the reader thread hands the decoding thread, in capture order.
enum Item {
    Datagram {
        frame: u64,
        received_us: i64,
        exporter: IpAddr,
        exporter_port: u16,
        collector_port: u16,
        /// The payload, within [`Chunk::bytes`].
        payload: Range<usize>,
    },
    /// A frame the reader rejected (kept in order with the datagrams' rejects).
    Reject(Reject),
}

/// Datagrams copied out of the capture, for the decoding thread.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    items: Vec<Item>,
    /// Bytes it holds: the payloads, and the rejects' raw bytes.
    weight: usize,
}

enum Job {
    Chunk(Chunk),
    /// Emit every buffered row; at the end of the stream, also the collector's report.
    Flush {
        end: bool,
    },
}

/// What the collector emitted, kept to be handed on in order by the reader thread.
enum Emitted {
    Batch(TableName, RecordBatch),
    Reject(Reject),
    TableBytes(TableName, u64),
    Note(String),
}

#[derive(Default)]
struct Recorded(Vec<Emitted>);

impl Emit for Recorded {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        self.0.push(Emitted::Batch(table.clone(), batch));
        Ok(())
    }
    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.0.push(Emitted::Reject(reject));
        Ok(())
    }
    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        self.0.push(Emitted::TableBytes(table.clone(), bytes));
    }
    fn note(&mut self, line: String) {
        self.0.push(Emitted::Note(line));
    }
}

impl Recorded {
    fn replay(self, out: &mut dyn Emit) -> anyhow::Result<()> {
        for e in self.0 {
            match e {
                Emitted::Batch(t, b) => out.batch(&t, b)?,
                Emitted::Reject(r) => out.reject(r)?,
                Emitted::TableBytes(t, n) => out.table_bytes(&t, n),
                Emitted::Note(n) => out.note(n),
            }
        }
        Ok(())
    }
}

/// A job done: what it emitted, the chunk's buffers to fill again, and at the end of the
/// stream the collector's report (and whether the stream brought templates).
struct Done {
    emitted: Recorded,
    spare: Option<Chunk>,
    report: Option<(Vec<String>, bool)>,
}

/// The decoding thread of one capture.
struct Worker {
    jobs: Option<Sender<Job>>,
    done: Receiver<anyhow::Result<Done>>,
    handle: Option<JoinHandle<()>>,
    /// Jobs sent and not yet answered.
    in_flight: usize,
}

impl Worker {
    fn spawn(mut collector: Collector) -> anyhow::Result<Self> {
        let (jobs, rx) = channel::<Job>();
        let (tx, done) = channel();
        let handle = std::thread::Builder::new()
            .name("silt-flows".into())
            .spawn(move || {
                for job in rx {
                    let r = run_job(&mut collector, job);
                    if tx.send(r).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Self {
            jobs: Some(jobs),
            done,
            handle: Some(handle),
            in_flight: 0,
        })
    }

    fn send(&mut self, job: Job) -> anyhow::Result<()> {
        match &self.jobs {
            Some(tx) if tx.send(job).is_ok() => {
                self.in_flight += 1;
                Ok(())
            }
            _ => Err(self.failed()),
        }
    }

    /// The next job's result; waits for it when `wait`.
    fn next(&mut self, wait: bool) -> anyhow::Result<Option<Done>> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        let r = if wait {
            self.done.recv().map_err(|_| self.failed())?
        } else {
            match self.done.try_recv() {
                Ok(r) => r,
                Err(std::sync::mpsc::TryRecvError::Empty) => return Ok(None),
                Err(_) => return Err(self.failed()),
            }
        };
        self.in_flight -= 1;
        r.map(Some)
    }

    /// The thread stopped answering: it panicked.
    fn failed(&mut self) -> anyhow::Error {
        self.jobs = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        anyhow::anyhow!("the flow-export decoding thread ended unexpectedly (it panicked)")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run_job(c: &mut Collector, job: Job) -> anyhow::Result<Done> {
    let mut out = Recorded::default();
    match job {
        Job::Chunk(mut chunk) => {
            for item in chunk.items.drain(..) {
                match item {
                    Item::Datagram {
                        frame,
                        received_us,
                        exporter,
                        exporter_port,
                        collector_port,
                        payload,
                    } => c.datagram(
                        &Datagram {
                            frame,
                            received_us,
                            exporter,
                            exporter_port,
                            collector_port,
                            payload: &chunk.bytes[payload],
                        },
                        &mut out,
                    )?,
                    Item::Reject(r) => out.reject(r)?,
                }
            }
            chunk.bytes.clear();
            chunk.weight = 0;
            Ok(Done {
                emitted: out,
                spare: Some(chunk),
                report: None,
            })
        }
        Job::Flush { end: false } => {
            c.flush(&mut out)?;
            Ok(Done {
                emitted: out,
                spare: None,
                report: None,
            })
        }
        Job::Flush { end: true } => {
            c.finish(&mut out)?;
            Ok(Done {
                emitted: out,
                spare: None,
                report: Some((c.report(), c.serves_later_streams())),
            })
        }
    }
}

/// The [`FrameHandler`] of the capture formats; see the module documentation.
pub struct FlowFrames {
    protocol: Protocol,
    port: Option<u16>,
    /// The stream's collector until the decoding thread takes it (at the first chunk).
    collector: Option<Collector>,
    worker: Option<Worker>,
    /// Datagrams not yet handed over, and emptied chunks to fill again.
    chunk: Chunk,
    spare: Vec<Chunk>,
    source: String,
    decoded: Decoded,
    /// Frames without an unfragmented UDP datagram.
    skipped: u64,
    /// UDP datagrams to another port than `--port`.
    other_port: u64,
}

impl FlowFrames {
    fn worker(&mut self) -> anyhow::Result<&mut Worker> {
        if self.worker.is_none() {
            let c = self
                .collector
                .take()
                .ok_or_else(|| anyhow::anyhow!("the flow-export decoding thread has ended"))?;
            self.worker = Some(Worker::spawn(c)?);
        }
        Ok(self.worker.as_mut().expect("just made"))
    }

    /// Hands what a finished job emitted on; returns its report, if it had one.
    fn take(&mut self, d: Done, out: &mut dyn Emit) -> anyhow::Result<Option<(Vec<String>, bool)>> {
        if let Some(c) = d.spare {
            self.spare.push(c);
        }
        d.emitted.replay(out)?;
        Ok(d.report)
    }

    /// Hands the chunk in progress to the decoding thread, then hands on what the thread has
    /// finished, waiting for it while more than [`CHUNKS_IN_FLIGHT`] chunks are on their way.
    fn send_chunk(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        if self.chunk.items.is_empty() {
            return Ok(());
        }
        let next = self.spare.pop().unwrap_or_default();
        let chunk = std::mem::replace(&mut self.chunk, next);
        let w = self.worker()?;
        w.send(Job::Chunk(chunk))?;
        loop {
            let w = self.worker.as_mut().expect("started above");
            let wait = w.in_flight > CHUNKS_IN_FLIGHT;
            match w.next(wait)? {
                Some(d) => {
                    self.take(d, out)?;
                }
                None => return Ok(()),
            }
        }
    }

    /// Sends `job` after the chunk in progress and hands on everything up to its result.
    fn finish_jobs(&mut self, job: Job, out: &mut dyn Emit) -> anyhow::Result<(Vec<String>, bool)> {
        self.send_chunk(out)?;
        self.worker()?.send(job)?;
        let mut report = (Vec::new(), false);
        while let Some(d) = self.worker.as_mut().expect("started above").next(true)? {
            if let Some(r) = self.take(d, out)? {
                report = r;
            }
        }
        Ok(report)
    }
}

impl FrameHandler for FlowFrames {
    fn reject_table(&self) -> TableName {
        match self.protocol {
            Protocol::Sflow => sflow_sample_table(),
            Protocol::Netflow => netflow_flow_table(),
        }
    }

    fn frame(&mut self, number: u64, f: &FrameMeta<'_>, out: &mut dyn Emit) -> anyhow::Result<()> {
        if let Err(reason) = decode_frame(f.link_type, f.data, &mut self.decoded) {
            let r = Reject {
                source: self.source.clone(),
                line: number,
                reason: format!("frame {number}: {reason}"),
                raw: f.data[..f.data.len().min(crate::REJECT_RAW_BYTES)].to_vec(),
                table: Some(self.reject_table()),
            };
            return FrameHandler::reject(self, r, out);
        }
        let (Some(ip), Some(payload)) = (self.decoded.ip, self.decoded.udp_payload(f.data)) else {
            self.skipped += 1;
            return Ok(());
        };
        let (sport, dport) = ip.ports.unwrap_or((0, 0));
        if self.port.is_some_and(|p| p != dport) {
            self.other_port += 1;
            return Ok(());
        }
        let at = self.chunk.bytes.len();
        self.chunk.bytes.extend_from_slice(payload);
        self.chunk.items.push(Item::Datagram {
            frame: number,
            received_us: f.time_us.unwrap_or(0),
            exporter: ip.src,
            exporter_port: sport,
            collector_port: dport,
            payload: at..self.chunk.bytes.len(),
        });
        self.chunk.weight += payload.len() + 64;
        if self.chunk.weight >= CHUNK_BYTES {
            self.send_chunk(out)?;
        }
        Ok(())
    }

    /// Queued with the datagrams, so that every reject of the capture comes in frame order.
    fn reject(&mut self, r: Reject, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.chunk.weight += r.raw.len() + 64;
        self.chunk.items.push(Item::Reject(r));
        if self.chunk.weight >= CHUNK_BYTES {
            self.send_chunk(out)?;
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut dyn Emit, end: bool) -> anyhow::Result<()> {
        if !end {
            self.finish_jobs(Job::Flush { end: false }, out)?;
            return Ok(());
        }
        let (report, templates) = self.finish_jobs(Job::Flush { end: true }, out)?;
        if templates {
            out.useful();
        }
        let what = match self.protocol {
            Protocol::Sflow => "sflow",
            Protocol::Netflow => "netflow",
        };
        if self.skipped > 0 {
            out.note(format!(
                "{what} {}: {} frames are not UDP datagrams (or are IP fragments) and were skipped",
                self.source, self.skipped
            ));
        }
        if self.other_port > 0 {
            out.note(format!(
                "{what} {}: {} UDP datagrams to other ports than --port {} were skipped",
                self.source,
                self.other_port,
                self.port.unwrap_or_default()
            ));
        }
        for line in report {
            out.note(format!("{what} {}: {line}", self.source));
        }
        Ok(())
    }
}
