//! silt-pcap: the PCAP/PCAPNG reader. Packets become rows of `pcap.packet` (the innermost flow
//! of each frame, tunnels kept in a `tunnel` column, spec-exact Community ID); with flows on,
//! the decoded packets also feed `silt_flow::FlowTracker`, whose records become `pcap.flow`.
//!
//! - [`PcapDecoder`] and [`FORMAT`] (in `decoder.rs`): the [`silt_core::Decoder`] of the `pcap`
//!   format, fed the capture in pieces split anywhere, and its registry entry; [`read`] is the
//!   thin wrapper (`pub fn read(input, source, opts, out)` like every silt reader).
//! - `rows.rs`: each packet record becomes one `pcap.packet` row or one reject (and feeds the
//!   flow tracker).
//! - [`decode`]: link layer / VLAN / MPLS / PPPoE / IP / transport / tunnel decoding.
//! - [`schema`]: the `pcap.packet` schema and its builders.
//!
//! Framing (classic pcap in both byte orders with µs or ns timestamps, PCAPNG sections,
//! interfaces, EPB/SPB) uses `pcap-parser`'s slice parsers on whole blocks; only a block that
//! straddles two fed pieces is buffered, so memory does not grow with the input. This crate
//! touches only its own modules; it uses `silt-core` (Emit, Reject, metadata keys, the decoder
//! contract) and `silt-flow` (Community ID, flow tracker).
//! Decode rules, the schema and the reject rule are documented in `docs/pcap.md`.

pub mod decode;
mod decoder;
mod rows;
pub mod schema;

use std::io::BufRead;

use silt_core::{Decoder, Emit, SourceInfo, TableName};

pub use decoder::{sniff, PcapDecoder, FORMAT};
pub use rows::{FrameHandler, PacketRows};
pub use schema::FrameMeta;

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

/// Options of the PCAP reader. For the format registry they travel in
/// [`silt_core::FormatOptions`] (`opts.get_or_default::<PcapOptions>()`); `batch_rows` is then
/// taken from the options every format honours (`opts.read.batch_rows`).
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

/// A buffer that grew beyond this for one big block is let go afterwards.
const INITIAL_BUFFER: usize = 1 << 20;
/// Blocks of this length or more are not accepted (such a length field is treated as
/// corruption), which bounds the buffer of a block that straddles two fed pieces.
const MAX_BUFFER: usize = 256 << 20;
/// How many leading bytes of a rejected frame are kept in the reject.
const REJECT_RAW_BYTES: usize = 128;

/// Reads a pcap or pcapng stream into `pcap.packet` (and/or `pcap.flow`) batches.
///
/// Every packet record becomes exactly one row or exactly one reject (see `docs/pcap.md`), so
/// rows + rejects equal the number of frames tshark counts. Input that is not pcap at all is
/// one reject (line 0). An unreadable input (I/O error) is `Err` after what was read is emitted.
/// A thin wrapper over [`PcapDecoder`].
pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &PcapOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    PcapDecoder::new(source, opts.clone()).read(input, out)
}

/// `pcap.packet`.
pub fn packet_table() -> TableName {
    TableName::new(schema::PACKET_TABLE.0, schema::PACKET_TABLE.1)
}

/// `pcap.flow`.
pub fn flow_table() -> TableName {
    TableName::new("pcap", "flow")
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
