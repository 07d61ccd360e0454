//! silt-flow: Community ID v1, the open-addressing flow table and the bidirectional flow tracker
//! that turns decoded packets into `pcap.flow` records.
//!
//! - [`community_id`]: the spec-exact Community ID v1 hash ([`community_id_v1`]);
//! - [`table`]: [`FlowTable`], open addressing with compact 16/40-byte keys;
//! - [`tracker`]: [`FlowTracker`], packets in, ended flows out as Arrow batches.
//!
//! This crate does no I/O: the pcap reader (`silt-pcap`) decodes packets and calls into it.
//! It may touch only its own modules; it depends on `silt-core` for metadata keys and types.

pub mod community_id;
pub mod table;
pub mod tracker;

pub use community_id::{
    community_id_v1, community_id_v1_digest, community_id_v1_into, CommunityId,
};
pub use table::{FlowKeyV4, FlowKeyV6, FlowTable, TableKey};
pub use tracker::{flow_schema, FlowConfig, FlowTracker, PacketInfo};
