//! silt-pcap: the PCAP/PCAPNG reader. Packets become rows of `pcap.packet` (the innermost flow
//! of each frame, tunnels kept in a `tunnel` column, spec-exact Community ID); with flows on,
//! the decoded packets also feed `silt_flow::FlowTracker`, whose records become `pcap.flow`.
//!
//! - [`read`]: the reader (`pub fn read(input, source, opts, out)` like every silt reader).
//! - [`decode`]: link layer / VLAN / MPLS / PPPoE / IP / transport / tunnel decoding.
//! - [`schema`]: the `pcap.packet` schema and its builders.
//!
//! Framing (classic pcap in both byte orders with µs or ns timestamps, PCAPNG sections,
//! interfaces, EPB/SPB) is done by `pcap-parser`'s streaming readers over a bounded buffer, so
//! memory does not grow with the input. This crate touches only its own modules; it uses
//! `silt-core` (Emit, Reject, metadata keys) and `silt-flow` (Community ID, flow tracker).
//! Decode rules, the schema and the reject rule are documented in `docs/pcap.md`.

pub mod decode;
pub mod schema;

use std::cell::RefCell;
use std::io::{BufRead, Read};
use std::rc::Rc;

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{LegacyPcapReader, PcapBlockOwned, PcapError, PcapNGReader};
use silt_core::{Emit, Reject, SourceInfo, TableName};

use crate::decode::{Decoded, Fragment};
use crate::schema::{FrameMeta, PacketColumns};

/// Which tables the reader produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tables {
    /// `pcap.packet` only (the default).
    #[default]
    Packets,
    /// `pcap.packet` and `pcap.flow`.
    PacketsAndFlows,
    /// `pcap.flow` only.
    Flows,
}

/// Options of the PCAP reader.
#[derive(Debug, Clone)]
pub struct PcapOptions {
    /// Rows per emitted batch.
    pub batch_rows: usize,
    /// `None`: no `payload` column; `Some(n)`: the first `n` captured bytes of each frame
    /// (`usize::MAX` for whole frames).
    pub payload: Option<usize>,
    /// Community ID seed (0 by default, as in the spec).
    pub community_id_seed: u16,
    /// Which tables to write.
    pub tables: Tables,
    /// Flow tracker settings (timeouts); its seed and batch size are taken from the fields
    /// above.
    pub flow: silt_flow::FlowConfig,
}

impl Default for PcapOptions {
    fn default() -> Self {
        Self {
            batch_rows: 16 * 1024,
            payload: None,
            community_id_seed: 0,
            tables: Tables::Packets,
            flow: silt_flow::FlowConfig::default(),
        }
    }
}

/// Initial read buffer; grown for larger blocks up to [`MAX_BUFFER`].
const INITIAL_BUFFER: usize = 1 << 20;
/// Largest block accepted (a bigger length field is treated as corruption).
const MAX_BUFFER: usize = 256 << 20;
/// How many leading bytes of a rejected frame are kept in the reject.
const REJECT_RAW_BYTES: usize = 128;

/// Keeps the I/O error that `pcap-parser` flattens into `PcapError::ReadError`, so the user
/// sees the real cause (e.g. a corrupt gzip stream).
struct ErrKeep<'a> {
    inner: &'a mut dyn BufRead,
    err: Rc<RefCell<Option<std::io::Error>>>,
}

impl Read for ErrKeep<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => Ok(n),
            Err(e) => {
                let copy = std::io::Error::new(e.kind(), e.to_string());
                *self.err.borrow_mut() = Some(e);
                Err(copy)
            }
        }
    }
}

/// One PCAPNG interface.
#[derive(Debug, Clone, Copy)]
struct Iface {
    link: u32,
    /// Timestamp units per second.
    resol: u64,
    /// Seconds added to every timestamp.
    offset: i64,
    snaplen: u32,
}

/// Reads a pcap or pcapng stream into `pcap.packet` (and/or `pcap.flow`) batches.
///
/// Every packet record becomes exactly one row or exactly one reject (see `docs/pcap.md`), so
/// rows + rejects equal the number of frames tshark counts. Input that is not pcap at all is
/// one reject (line 0). An unreadable input (I/O error) is `Err` after what was read is emitted.
pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &PcapOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let head = input.fill_buf()?;
    if head.is_empty() {
        out.reject(whole_reject(
            source,
            "empty input: not a pcap or pcapng file",
            &[],
        ))?;
        return Ok(());
    }
    let is_ng = head.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]);
    let head_copy: Vec<u8> = head.iter().take(REJECT_RAW_BYTES).copied().collect();
    let err = Rc::new(RefCell::new(None));
    let rd = ErrKeep {
        inner: input,
        err: err.clone(),
    };
    let reader: Result<Box<dyn PcapReaderIterator + '_>, _> = if is_ng {
        PcapNGReader::new(INITIAL_BUFFER, rd).map(|r| Box::new(r) as Box<dyn PcapReaderIterator>)
    } else {
        LegacyPcapReader::new(INITIAL_BUFFER, rd)
            .map(|r| Box::new(r) as Box<dyn PcapReaderIterator>)
    };
    let reader = match reader {
        Ok(r) => r,
        Err(e) => {
            if let Some(ioe) = err.borrow_mut().take() {
                return Err(ioe.into());
            }
            let what = if is_ng { "pcapng" } else { "pcap or pcapng" };
            out.reject(whole_reject(
                source,
                &format!("not a {what} file ({e:?})"),
                &head_copy,
            ))?;
            return Ok(());
        }
    };
    let mut st = State::new(source, opts);
    let res = st.run(reader, out, &err);
    // Whatever was decoded before an error is emitted.
    let fin = st.flush(out, true);
    res.and(fin)
}

fn whole_reject(source: &SourceInfo, reason: &str, raw: &[u8]) -> Reject {
    Reject {
        source: source.display.clone(),
        line: 0,
        reason: reason.to_string(),
        raw: raw.to_vec(),
        table: Some(packet_table()),
    }
}

/// `pcap.packet`.
pub fn packet_table() -> TableName {
    TableName::new(schema::PACKET_TABLE.0, schema::PACKET_TABLE.1)
}

/// `pcap.flow`.
pub fn flow_table() -> TableName {
    TableName::new("pcap", "flow")
}

struct State<'s> {
    source: &'s SourceInfo,
    opts: &'s PcapOptions,
    packets: Option<PacketColumns>,
    flows: Option<flows::Tracker>,
    decoded: Decoded,
    cid: String,
    /// Frames seen (packet records), the `line` of rejects.
    frame: u64,
    /// Classic pcap: link type and nanosecond flag.
    legacy_link: u32,
    legacy_ns: bool,
    ifaces: Vec<Iface>,
    /// Input bytes consumed since the last progress report.
    consumed: u64,
}

impl<'s> State<'s> {
    fn new(source: &'s SourceInfo, opts: &'s PcapOptions) -> Self {
        let packets = (opts.tables != Tables::Flows).then(|| PacketColumns::new(opts.payload));
        let flows = (opts.tables != Tables::Packets).then(|| flows::Tracker::new(opts));
        Self {
            source,
            opts,
            packets,
            flows,
            decoded: Decoded::default(),
            cid: String::with_capacity(64),
            frame: 0,
            legacy_link: 1,
            legacy_ns: false,
            ifaces: Vec::new(),
            consumed: 0,
        }
    }

    fn run(
        &mut self,
        mut reader: Box<dyn PcapReaderIterator + '_>,
        out: &mut dyn Emit,
        ioerr: &Rc<RefCell<Option<std::io::Error>>>,
    ) -> anyhow::Result<()> {
        let mut capacity = INITIAL_BUFFER;
        loop {
            match reader.next() {
                Ok((offset, block)) => {
                    self.block(block, out)?;
                    reader.consume(offset);
                    self.consumed += offset as u64;
                }
                Err(PcapError::Eof) => return Ok(()),
                Err(PcapError::Incomplete(_)) => {
                    if reader.refill().is_err() {
                        return Err(read_error(ioerr));
                    }
                }
                Err(PcapError::BufferTooSmall) => {
                    if capacity >= MAX_BUFFER {
                        let raw = head(reader.data());
                        self.frame += 1;
                        self.reject_frame(
                            out,
                            "block length exceeds 256 MiB: corrupt file, stopped reading".into(),
                            raw,
                        )?;
                        return Ok(());
                    }
                    capacity *= 2;
                    reader.grow(capacity);
                    if reader.refill().is_err() {
                        return Err(read_error(ioerr));
                    }
                }
                Err(PcapError::UnexpectedEof) => {
                    let raw = head(reader.data());
                    self.frame += 1;
                    self.reject_frame(
                        out,
                        format!(
                            "truncated last record: input ends {} bytes into it",
                            raw_len(reader.data())
                        ),
                        raw,
                    )?;
                    return Ok(());
                }
                Err(PcapError::ReadError) => return Err(read_error(ioerr)),
                Err(e) => {
                    let reason = format!("corrupt block, stopped reading: {e:?}");
                    let raw = head(reader.data());
                    self.frame += 1;
                    self.reject_frame(out, reason, raw)?;
                    return Ok(());
                }
            }
        }
    }

    fn block(&mut self, block: PcapBlockOwned<'_>, out: &mut dyn Emit) -> anyhow::Result<()> {
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                self.legacy_link = h.network.0 as u32;
                self.legacy_ns = h.is_nanosecond_precision();
            }
            PcapBlockOwned::Legacy(b) => {
                let frac = i64::from(b.ts_usec);
                let us = i64::from(b.ts_sec) * 1_000_000
                    + if self.legacy_ns { frac / 1000 } else { frac };
                let n = (b.caplen as usize).min(b.data.len());
                self.frame(
                    out,
                    FrameMeta {
                        time_us: Some(us),
                        interface: None,
                        link_type: self.legacy_link,
                        length: b.origlen,
                        data: &b.data[..n],
                    },
                )?;
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => self.ifaces.clear(),
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => self.ifaces.push(Iface {
                link: idb.linktype.0 as u32,
                resol: idb.ts_resolution().unwrap_or(1_000_000).max(1),
                offset: idb.ts_offset(),
                snaplen: idb.snaplen,
            }),
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let Some(iface) = self.ifaces.get(epb.if_id as usize).copied() else {
                    self.frame += 1;
                    let raw = head(epb.data);
                    return self.reject_frame(
                        out,
                        format!(
                            "enhanced packet block refers to interface {} but the section has {}",
                            epb.if_id,
                            self.ifaces.len()
                        ),
                        raw,
                    );
                };
                let ts = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let n = (epb.caplen as usize).min(epb.data.len());
                self.frame(
                    out,
                    FrameMeta {
                        time_us: ng_micros(ts, iface.resol, iface.offset),
                        interface: Some(epb.if_id),
                        link_type: iface.link,
                        length: epb.origlen,
                        data: &epb.data[..n],
                    },
                )?;
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                // A simple packet block has no timestamp (time is null) and belongs to
                // interface 0; its captured length is min(original length, snap length).
                let iface = self.ifaces.first().copied();
                let mut n = (spb.origlen as usize).min(spb.data.len());
                if let Some(i) = iface.filter(|i| i.snaplen > 0) {
                    n = n.min(i.snaplen as usize);
                }
                let Some(iface) = iface else {
                    self.frame += 1;
                    let raw = head(spb.data);
                    return self.reject_frame(
                        out,
                        "simple packet block before any interface description".into(),
                        raw,
                    );
                };
                self.frame(
                    out,
                    FrameMeta {
                        time_us: None,
                        interface: Some(0),
                        link_type: iface.link,
                        length: spb.origlen,
                        data: &spb.data[..n],
                    },
                )?;
            }
            // Statistics, name resolution, secrets, custom and unknown blocks carry no frame.
            PcapBlockOwned::NG(_) => {}
        }
        Ok(())
    }

    fn frame(&mut self, out: &mut dyn Emit, f: FrameMeta<'_>) -> anyhow::Result<()> {
        self.frame += 1;
        if let Err(reason) = decode::decode_frame(f.link_type, f.data, &mut self.decoded) {
            return self.reject_frame(out, reason.into_owned(), head(f.data));
        }
        let d = &self.decoded;
        self.cid.clear();
        if let Some(ip) = &d.ip {
            // A port protocol without its ports (a later fragment, a cut header) has no
            // computable Community ID: null rather than a hash of made-up zero ports.
            let (sport, dport, known) = match (ip.proto, ip.ports, ip.icmp) {
                (6 | 17 | 132, Some((s, p)), _) => (s, p, true),
                (6 | 17 | 132, None, _) => (0, 0, false),
                (1 | 58, _, Some((t, c))) => (u16::from(t), u16::from(c), true),
                (1 | 58, _, None) => (0, 0, false),
                _ => (0, 0, true),
            };
            if known {
                silt_flow::community_id_v1_into(
                    &mut self.cid,
                    ip.src,
                    ip.dst,
                    ip.proto,
                    sport,
                    dport,
                    self.opts.community_id_seed,
                    true,
                );
            }
            if let (Some(tracker), Some(ts)) = (self.flows.as_mut(), f.time_us) {
                let has_ports = ip.fragment != Fragment::Later
                    && known
                    && matches!(ip.proto, 1 | 6 | 17 | 58 | 132);
                tracker.packet(&flows::PacketInfo {
                    ts_us: ts,
                    src: ip.src,
                    dst: ip.dst,
                    proto: ip.proto,
                    sport,
                    dport,
                    has_ports,
                    vlan_outer: d.vlan_outer(),
                    vlan_inner: d.vlan_inner(),
                    ip_bytes: ip.ip_len,
                    payload_bytes: ip.payload_bytes,
                    tcp_flags: ip.tcp_flags.unwrap_or(0),
                    tcp_seq: ip.tcp_seq,
                });
                if let Some(b) = tracker.take_batch() {
                    out.batch(&flow_table(), b)?;
                }
            }
        }
        if let Some(cols) = self.packets.as_mut() {
            cols.append(&f, d, &self.cid);
            if cols.len() >= self.opts.batch_rows.max(1) {
                self.flush(out, false)?;
            }
        }
        Ok(())
    }

    fn reject_frame(
        &mut self,
        out: &mut dyn Emit,
        reason: String,
        raw: Vec<u8>,
    ) -> anyhow::Result<()> {
        out.reject(Reject {
            source: self.source.display.clone(),
            line: self.frame,
            reason,
            raw,
            table: Some(packet_table()),
        })
    }

    /// Emits the buffered packet rows; at the end of input also the remaining flows.
    fn flush(&mut self, out: &mut dyn Emit, end: bool) -> anyhow::Result<()> {
        if self.consumed > 0 {
            out.progress(self.consumed);
            self.consumed = 0;
        }
        if let Some(cols) = self.packets.as_mut() {
            if !cols.is_empty() {
                let bytes = cols.bytes;
                let b = cols.finish()?;
                out.table_bytes(&packet_table(), bytes);
                out.batch(&packet_table(), b)?;
            }
        }
        if end {
            if let Some(tracker) = self.flows.as_mut() {
                while let Some(b) = tracker.take_batch() {
                    out.batch(&flow_table(), b)?;
                }
                if let Some(b) = tracker.finish() {
                    out.batch(&flow_table(), b)?;
                }
            }
        }
        Ok(())
    }
}

/// PCAPNG timestamp (units of `1/resol` s since the epoch, plus `offset` seconds) to UTC
/// microseconds, exactly (integer arithmetic); `None` if out of range.
fn ng_micros(ts: u64, resol: u64, offset: i64) -> Option<i64> {
    let secs = i128::from(ts / resol) + i128::from(offset);
    let frac = i128::from(ts % resol) * 1_000_000 / i128::from(resol);
    i64::try_from(secs * 1_000_000 + frac).ok()
}

fn head(b: &[u8]) -> Vec<u8> {
    b[..b.len().min(REJECT_RAW_BYTES)].to_vec()
}

fn raw_len(b: &[u8]) -> usize {
    b.len()
}

fn read_error(ioerr: &Rc<RefCell<Option<std::io::Error>>>) -> anyhow::Error {
    match ioerr.borrow_mut().take() {
        Some(e) => anyhow::Error::new(e).context("reading the capture"),
        None => anyhow::anyhow!("reading the capture failed"),
    }
}

/// Whether `pcap.flow` is produced (the flow tracker is wired in).
pub const FLOWS_AVAILABLE: bool = true;

/// The bridge to `silt_flow::FlowTracker` (kept in one place so the reader does not depend on
/// the tracker's construction details).
mod flows {
    pub use silt_flow::PacketInfo;

    pub struct Tracker(silt_flow::FlowTracker);

    impl Tracker {
        pub fn new(opts: &crate::PcapOptions) -> Self {
            Self(silt_flow::FlowTracker::new(silt_flow::FlowConfig {
                community_id_seed: opts.community_id_seed,
                batch_rows: opts.batch_rows.max(1),
                ..opts.flow.clone()
            }))
        }
        pub fn packet(&mut self, p: &PacketInfo) {
            self.0.packet(p)
        }
        pub fn take_batch(&mut self) -> Option<arrow::record_batch::RecordBatch> {
            self.0.take_batch()
        }
        pub fn finish(&mut self) -> Option<arrow::record_batch::RecordBatch> {
            self.0.finish()
        }
    }
}
