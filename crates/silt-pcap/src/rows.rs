//! Blocks to frames, frames to rows. [`Framing`] turns the blocks the framing in
//! [`crate::decoder`] cuts out into numbered frames (remembering pcapng interface blocks for the
//! frames that name them) and hands each to a [`FrameHandler`]. The `pcap` format's handler is
//! [`PacketRows`]: each frame becomes exactly one `pcap.packet` row or one reject (decoded by
//! [`crate::decode`], with its Community ID), and with flows on also feeds the flow tracker.
//! Other readers of captures (the flow-export collectors: sFlow, NetFlow, IPFIX) bring their own
//! handler and reuse the framing. Touches nothing but its own state and the `Emit` sink.

use pcap_parser::pcapng::Block;
use pcap_parser::PcapBlockOwned;
use silt_core::{Emit, Reject, SourceInfo, TableName};

use crate::decode::{self, Decoded, Fragment};
use crate::schema::{FrameMeta, PacketColumns};
use crate::{flow_table, flows, packet_table, PcapOptions, Tables, REJECT_RAW_BYTES};

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

/// What a reader of captures does with each frame; see the module documentation.
pub trait FrameHandler: Send {
    /// The table a reject of this stream belongs to (frames the framing could not give out
    /// are rejected there too).
    fn reject_table(&self) -> TableName;

    /// Frame number `number` (1-based; the `line` of its rejects). Every frame must end as
    /// rows or as a reject (or be counted by the handler's own report).
    fn frame(&mut self, number: u64, f: &FrameMeta<'_>, out: &mut dyn Emit) -> anyhow::Result<()>;

    /// Emits what is buffered; `end` at the end of the input.
    fn flush(&mut self, out: &mut dyn Emit, end: bool) -> anyhow::Result<()>;

    /// A reject the framing made (a frame it could not give out, a truncated or corrupt
    /// capture). Emitted at once by default; a handler that emits its own output later (from
    /// another thread) keeps it in order with that output.
    fn reject(&mut self, r: Reject, out: &mut dyn Emit) -> anyhow::Result<()> {
        out.reject(r)
    }
}

/// Turns framed blocks into numbered frames for a [`FrameHandler`], for one stream.
pub(crate) struct Framing<H> {
    source: SourceInfo,
    pub(crate) handler: H,
    /// Frames seen (packet records), the `line` of rejects.
    pub(crate) frame: u64,
    /// Classic pcap: link type and nanosecond flag.
    legacy_link: u32,
    legacy_ns: bool,
    ifaces: Vec<Iface>,
}

/// The `pcap` format's [`FrameHandler`]: `pcap.packet` rows (and `pcap.flow` records).
pub struct PacketRows {
    source: SourceInfo,
    opts: PcapOptions,
    packets: Option<PacketColumns>,
    flows: Option<flows::Tracker>,
    decoded: Decoded,
    cid: String,
}

impl PacketRows {
    pub fn new(source: &SourceInfo, opts: PcapOptions) -> Self {
        let packets = (opts.tables != Tables::Flows).then(|| PacketColumns::new(opts.payload));
        let flows = (opts.tables != Tables::Packets).then(|| flows::Tracker::new(&opts));
        Self {
            source: source.clone(),
            opts,
            packets,
            flows,
            decoded: Decoded::default(),
            cid: String::with_capacity(64),
        }
    }
}

impl<H: FrameHandler> Framing<H> {
    pub(crate) fn new(source: &SourceInfo, handler: H) -> Self {
        Self {
            source: source.clone(),
            handler,
            frame: 0,
            legacy_link: 1,
            legacy_ns: false,
            ifaces: Vec::new(),
        }
    }

    /// The stream's description.
    pub(crate) fn source(&self) -> &SourceInfo {
        &self.source
    }

    /// One block: a file header, a packet record (one row or one reject) or a pcapng block.
    pub(crate) fn block(
        &mut self,
        block: PcapBlockOwned<'_>,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
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
                self.give(
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
                self.give(
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
                self.give(
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

    /// Frame number `self.frame + 1`, handed to the handler.
    fn give(&mut self, out: &mut dyn Emit, f: FrameMeta<'_>) -> anyhow::Result<()> {
        self.frame += 1;
        self.handler.frame(self.frame, &f, out)
    }

    /// A reject for frame number `self.frame`.
    pub(crate) fn reject_frame(
        &mut self,
        out: &mut dyn Emit,
        reason: String,
        raw: Vec<u8>,
    ) -> anyhow::Result<()> {
        let r = Reject {
            source: self.source.display.clone(),
            line: self.frame,
            reason,
            raw,
            table: Some(self.handler.reject_table()),
        };
        self.handler.reject(r, out)
    }

    /// Emits what the handler buffers; `end` at the end of the input.
    pub(crate) fn flush(&mut self, out: &mut dyn Emit, end: bool) -> anyhow::Result<()> {
        self.handler.flush(out, end)
    }
}

impl FrameHandler for PacketRows {
    fn reject_table(&self) -> TableName {
        packet_table()
    }

    fn frame(&mut self, number: u64, f: &FrameMeta<'_>, out: &mut dyn Emit) -> anyhow::Result<()> {
        if let Err(reason) = decode::decode_frame(f.link_type, f.data, &mut self.decoded) {
            return out.reject(Reject {
                source: self.source.display.clone(),
                line: number,
                reason: reason.into_owned(),
                raw: head(f.data),
                table: Some(packet_table()),
            });
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
            cols.append(f, d, &self.cid);
            if cols.len() >= self.opts.batch_rows.max(1) {
                FrameHandler::flush(self, out, false)?;
            }
        }
        Ok(())
    }

    /// Emits the buffered packet rows; at the end of input also the remaining flows.
    fn flush(&mut self, out: &mut dyn Emit, end: bool) -> anyhow::Result<()> {
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

/// The first [`REJECT_RAW_BYTES`] bytes of `b`, for a reject.
pub(crate) fn head(b: &[u8]) -> Vec<u8> {
    b[..b.len().min(REJECT_RAW_BYTES)].to_vec()
}
