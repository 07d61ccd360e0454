//! Flow export in packet captures: the `sflow` and `netflow` formats (`silt import sflow
//! FILE.pcap`, `silt import netflow FILE.pcap`). silt-pcap's framing reads the capture (pcap or
//! pcapng, fed in pieces split anywhere) and hands each frame to [`FlowFrames`], which takes the
//! frame's UDP datagram (`silt_pcap::decode::Decoded::udp_payload`: VLANs, tunnels and link
//! types as for `pcap.packet`) and gives it to a [`Collector`]; the frame number is the
//! reject's line, as in tshark.
//!
//! The captures of one import share their NetFlow/IPFIX templates ([`CaptureOptions::templates`]):
//! give a template capture before the data captures that need it, as a collector would see them
//! (data sets that arrive before their template are held and decoded when it comes, within the
//! same capture; at the end of each capture what is still held is counted as unknown-template).
//!
//! Which frames: UDP datagrams to `--port` (any port by default). A frame that is not an
//! unfragmented UDP datagram (or is to another port) is not flow export: it is counted and the
//! count is noted in the summary (`Emit::note`), not rejected. A frame the link layers cannot
//! decode is a reject. Touches nothing but the frames it is given and `out`.

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
            collector: Collector::new(protocol, source, fo).with_templates(c.templates.clone()),
            source: source.display.clone(),
            decoded: Decoded::default(),
            skipped: 0,
            other_port: 0,
        },
    )
}

/// The [`FrameHandler`] of the capture formats; see the module documentation.
pub struct FlowFrames {
    protocol: Protocol,
    port: Option<u16>,
    collector: Collector,
    source: String,
    decoded: Decoded,
    /// Frames without an unfragmented UDP datagram.
    skipped: u64,
    /// UDP datagrams to another port than `--port`.
    other_port: u64,
}

impl FlowFrames {
    /// The collector (for its counters).
    pub fn collector(&self) -> &Collector {
        &self.collector
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
            return out.reject(Reject {
                source: self.source.clone(),
                line: number,
                reason: format!("frame {number}: {reason}"),
                raw: f.data[..f.data.len().min(crate::REJECT_RAW_BYTES)].to_vec(),
                table: Some(self.reject_table()),
            });
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
        self.collector.datagram(
            &Datagram {
                frame: number,
                received_us: f.time_us.unwrap_or(0),
                exporter: ip.src,
                exporter_port: sport,
                collector_port: dport,
                payload,
            },
            out,
        )
    }

    fn flush(&mut self, out: &mut dyn Emit, end: bool) -> anyhow::Result<()> {
        if !end {
            return self.collector.flush(out);
        }
        self.collector.finish(out)?;
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
        for line in self.collector.report() {
            out.note(format!("{what} {}: {line}", self.source));
        }
        Ok(())
    }
}
