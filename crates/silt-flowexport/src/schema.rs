//! The three tables (`sflow.sample`, `sflow.counter`, `netflow.flow`): their Arrow schemas, the
//! row structs the decoders fill, and the conversion of buffered rows into a `RecordBatch`.
//! Pure data transformation: no I/O, no decoding; touches only the rows it is handed.
//!
//! Conventions follow `pcap.packet` (see silt's `docs/pcap.md`): addresses are canonical text
//! (`Display` of `IpAddr`), times are `Timestamp(Microsecond, "UTC")`, and every schema carries
//! the `silt.table`, `silt.time_column` and `silt.lookup_columns` metadata keys.

use std::net::IpAddr;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanArray, ListArray, ListBuilder, StringArray, StringBuilder,
    StructBuilder, TimestampMicrosecondArray, UInt16Array, UInt16Builder, UInt32Array,
    UInt32Builder, UInt64Array, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, UInt32Type};
use arrow::record_batch::RecordBatch;
use silt_core::meta;

/// `sflow.sample`.
pub const SFLOW_SAMPLE_TABLE: (&str, &str) = ("sflow", "sample");
/// `sflow.counter`.
pub const SFLOW_COUNTER_TABLE: (&str, &str) = ("sflow", "counter");
/// `netflow.flow`.
pub const NETFLOW_FLOW_TABLE: (&str, &str) = ("netflow", "flow");

fn ts() -> DataType {
    silt_core::time::timestamp_type()
}

fn list_of(dt: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", dt, true)))
}

// The same tunnel struct as `pcap.packet`'s (silt-pcap decodes the sampled headers).
use silt_pcap::schema::tunnel_fields;

fn record_fields() -> Fields {
    Fields::from(vec![
        Field::new("enterprise", DataType::UInt32, true),
        Field::new("format", DataType::UInt32, true),
        Field::new("length", DataType::UInt32, true),
    ])
}

fn extra_fields() -> Fields {
    Fields::from(vec![
        Field::new("enterprise", DataType::UInt32, true),
        Field::new("field", DataType::UInt16, true),
        Field::new("value", DataType::Binary, true),
    ])
}

fn with_meta(fields: Vec<Field>, table: &str, lookup: &str) -> SchemaRef {
    let md = [
        (meta::TIME_COLUMN.to_string(), "time".to_string()),
        (meta::TABLE.to_string(), table.to_string()),
        (meta::LOOKUP_COLUMNS.to_string(), lookup.to_string()),
    ];
    Arc::new(Schema::new(fields).with_metadata(md.into_iter().collect()))
}

fn f(name: &str, dt: DataType) -> Field {
    Field::new(name, dt, true)
}

/// Columns every sFlow row starts with (datagram context).
fn sflow_common() -> Vec<Field> {
    vec![
        f("time", ts()),
        f("exporter", DataType::Utf8),
        f("exporter_port", DataType::UInt16),
        f("frame", DataType::UInt64),
        f("agent", DataType::Utf8),
        f("sub_agent", DataType::UInt32),
        f("datagram_seq", DataType::UInt32),
        f("uptime_ms", DataType::UInt32),
        f("sample_seq", DataType::UInt32),
        f("expanded", DataType::Boolean),
        f("source_id_type", DataType::UInt32),
        f("source_id_index", DataType::UInt32),
    ]
}

/// The `sflow.sample` schema: one row per flow sample (formats 1 and 3).
pub fn sflow_sample_schema() -> SchemaRef {
    let mut v = sflow_common();
    v.extend([
        f("sampling_rate", DataType::UInt32),
        f("sample_pool", DataType::UInt32),
        f("drops", DataType::UInt32),
        f("input_format", DataType::UInt32),
        f("input", DataType::UInt32),
        f("output_format", DataType::UInt32),
        f("output", DataType::UInt32),
        f("header_protocol", DataType::UInt32),
        f("frame_length", DataType::UInt32),
        f("stripped", DataType::UInt32),
        f("header_length", DataType::UInt32),
        f("src", DataType::Utf8),
        f("dst", DataType::Utf8),
        f("proto", DataType::UInt8),
        f("sport", DataType::UInt16),
        f("dport", DataType::UInt16),
        f("icmp_type", DataType::UInt8),
        f("icmp_code", DataType::UInt8),
        f("tcp_flags", DataType::UInt8),
        f("ip_length", DataType::UInt32),
        f("tos", DataType::UInt8),
        f("vlan_outer", DataType::UInt16),
        f("vlan_inner", DataType::UInt16),
        f("tunnel", list_of(DataType::Struct(tunnel_fields()))),
        f("community_id", DataType::Utf8),
        f("src_vlan", DataType::UInt32),
        f("src_priority", DataType::UInt32),
        f("dst_vlan", DataType::UInt32),
        f("dst_priority", DataType::UInt32),
        f("next_hop", DataType::Utf8),
        f("src_mask", DataType::UInt32),
        f("dst_mask", DataType::UInt32),
        f("bgp_next_hop", DataType::Utf8),
        f("router_as", DataType::UInt32),
        f("src_as", DataType::UInt32),
        f("src_peer_as", DataType::UInt32),
        f("dst_as", DataType::UInt32),
        f("dst_as_path", list_of(DataType::UInt32)),
        f("communities", list_of(DataType::UInt32)),
        f("decode_error", DataType::Utf8),
        f("other_records", list_of(DataType::Struct(record_fields()))),
    ]);
    with_meta(v, "sflow.sample", "community_id,src,dst,agent")
}

/// Generic interface counter names (sFlow counter record 1), in wire order after the header.
pub const IF_COUNTERS: [&str; 14] = [
    "in_octets",
    "in_ucast_pkts",
    "in_multicast_pkts",
    "in_broadcast_pkts",
    "in_discards",
    "in_errors",
    "in_unknown_protos",
    "out_octets",
    "out_ucast_pkts",
    "out_multicast_pkts",
    "out_broadcast_pkts",
    "out_discards",
    "out_errors",
    "promiscuous",
];

/// Ethernet counter names (sFlow counter record 2), wire order.
pub const ETH_COUNTERS: [&str; 13] = [
    "eth_alignment_errors",
    "eth_fcs_errors",
    "eth_single_collision_frames",
    "eth_multiple_collision_frames",
    "eth_sqe_test_errors",
    "eth_deferred_transmissions",
    "eth_late_collisions",
    "eth_excessive_collisions",
    "eth_internal_mac_transmit_errors",
    "eth_carrier_sense_errors",
    "eth_frame_too_longs",
    "eth_internal_mac_receive_errors",
    "eth_symbol_errors",
];

/// The `sflow.counter` schema: one row per counter sample (formats 2 and 4).
pub fn sflow_counter_schema() -> SchemaRef {
    let mut v = sflow_common();
    v.extend([
        f("if_index", DataType::UInt32),
        f("if_type", DataType::UInt32),
        f("if_speed", DataType::UInt64),
        f("if_direction", DataType::UInt32),
        f("if_admin_up", DataType::Boolean),
        f("if_oper_up", DataType::Boolean),
    ]);
    for n in IF_COUNTERS {
        v.push(f(n, DataType::UInt64));
    }
    for n in ETH_COUNTERS {
        v.push(f(n, DataType::UInt32));
    }
    v.push(f(
        "other_records",
        list_of(DataType::Struct(record_fields())),
    ));
    with_meta(v, "sflow.counter", "agent")
}

/// The `netflow.flow` schema: one row per NetFlow v5/v9 or IPFIX data record.
pub fn netflow_flow_schema() -> SchemaRef {
    let v = vec![
        f("time", ts()),
        f("received", ts()),
        f("exporter", DataType::Utf8),
        f("exporter_port", DataType::UInt16),
        f("frame", DataType::UInt64),
        f("version", DataType::UInt16),
        f("domain", DataType::UInt32),
        f("sequence", DataType::UInt32),
        f("template_id", DataType::UInt16),
        f("src", DataType::Utf8),
        f("dst", DataType::Utf8),
        f("next_hop", DataType::Utf8),
        f("bgp_next_hop", DataType::Utf8),
        f("sport", DataType::UInt16),
        f("dport", DataType::UInt16),
        f("proto", DataType::UInt8),
        f("bytes", DataType::UInt64),
        f("packets", DataType::UInt64),
        f("flow_start", ts()),
        f("flow_end", ts()),
        f("tcp_flags", DataType::UInt16),
        f("tos", DataType::UInt8),
        f("icmp_type", DataType::UInt8),
        f("icmp_code", DataType::UInt8),
        f("src_as", DataType::UInt32),
        f("dst_as", DataType::UInt32),
        f("src_mask", DataType::UInt8),
        f("dst_mask", DataType::UInt8),
        f("input", DataType::UInt32),
        f("output", DataType::UInt32),
        f("direction", DataType::UInt8),
        f("sampling_rate", DataType::UInt64),
        f("end_reason", DataType::UInt8),
        f("src_vlan", DataType::UInt16),
        f("dst_vlan", DataType::UInt16),
        f("mpls_labels", list_of(DataType::UInt32)),
        f("post_nat_src", DataType::Utf8),
        f("post_nat_dst", DataType::Utf8),
        f("post_nat_sport", DataType::UInt16),
        f("post_nat_dport", DataType::UInt16),
        f("community_id", DataType::Utf8),
        f("extra", list_of(DataType::Struct(extra_fields()))),
    ];
    with_meta(v, "netflow.flow", "community_id,src,dst,exporter")
}

/// Datagram context shared by every sFlow row of one datagram.
#[derive(Debug, Clone)]
pub struct SflowCtx {
    pub received_us: i64,
    pub exporter: IpAddr,
    pub exporter_port: u16,
    pub frame: u64,
    pub agent: IpAddr,
    pub sub_agent: u32,
    pub datagram_seq: u32,
    pub uptime_ms: u32,
}

/// Sample header fields shared by flow and counter samples.
#[derive(Debug, Clone, Default)]
pub struct SampleHead {
    pub seq: u32,
    pub expanded: bool,
    pub source_id_type: u32,
    pub source_id_index: u32,
}

/// A tunnel layer of a sampled header (as in `pcap.packet`).
#[derive(Debug, Clone)]
pub struct TunnelRow {
    pub kind: &'static str,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub key: Option<u32>,
}

/// One `sflow.sample` row.
#[derive(Debug, Clone, Default)]
pub struct SampleRow {
    pub head: SampleHead,
    pub sampling_rate: u32,
    pub sample_pool: u32,
    pub drops: u32,
    pub input_format: u32,
    pub input: u32,
    pub output_format: u32,
    pub output: u32,
    pub header_protocol: Option<u32>,
    pub frame_length: Option<u32>,
    pub stripped: Option<u32>,
    pub header_length: Option<u32>,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub proto: Option<u8>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
    pub tcp_flags: Option<u8>,
    pub ip_length: Option<u32>,
    pub tos: Option<u8>,
    pub vlan_outer: Option<u16>,
    pub vlan_inner: Option<u16>,
    pub tunnels: Vec<TunnelRow>,
    pub community_id: Option<silt_flow::CommunityId>,
    pub src_vlan: Option<u32>,
    pub src_priority: Option<u32>,
    pub dst_vlan: Option<u32>,
    pub dst_priority: Option<u32>,
    pub next_hop: Option<IpAddr>,
    pub src_mask: Option<u32>,
    pub dst_mask: Option<u32>,
    pub bgp_next_hop: Option<IpAddr>,
    pub router_as: Option<u32>,
    pub src_as: Option<u32>,
    pub src_peer_as: Option<u32>,
    pub dst_as: Option<u32>,
    pub dst_as_path: Option<Vec<u32>>,
    pub communities: Option<Vec<u32>>,
    pub decode_error: Option<String>,
    /// (enterprise, format, length) of records not decoded into columns.
    pub other_records: Vec<(u32, u32, u32)>,
}

/// One `sflow.counter` row.
#[derive(Debug, Clone, Default)]
pub struct CounterRow {
    pub head: SampleHead,
    pub if_index: Option<u32>,
    pub if_type: Option<u32>,
    pub if_speed: Option<u64>,
    pub if_direction: Option<u32>,
    pub if_admin_up: Option<bool>,
    pub if_oper_up: Option<bool>,
    pub if_counters: Option<[u64; 14]>,
    pub eth_counters: Option<[u32; 13]>,
    pub other_records: Vec<(u32, u32, u32)>,
}

/// Datagram context shared by every flow of one NetFlow/IPFIX datagram.
#[derive(Debug, Clone)]
pub struct FlowCtx {
    pub received_us: i64,
    pub exporter: IpAddr,
    pub exporter_port: u16,
    pub frame: u64,
    pub version: u16,
    pub domain: u32,
    pub sequence: u32,
    /// Unix seconds of the header (v5/v9: unix_secs, IPFIX: export time).
    pub unix_secs: u32,
    /// v5 nanoseconds residual.
    pub unix_nsecs: u32,
    /// v5/v9: milliseconds since the exporter booted.
    pub sys_uptime_ms: Option<u32>,
}

/// One `netflow.flow` row.
#[derive(Debug, Clone, Default)]
pub struct FlowRow {
    pub template_id: Option<u16>,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub next_hop: Option<IpAddr>,
    pub bgp_next_hop: Option<IpAddr>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    pub proto: Option<u8>,
    pub bytes: Option<u64>,
    pub packets: Option<u64>,
    pub flow_start: Option<i64>,
    pub flow_end: Option<i64>,
    pub tcp_flags: Option<u16>,
    pub tos: Option<u8>,
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
    pub src_as: Option<u32>,
    pub dst_as: Option<u32>,
    pub src_mask: Option<u8>,
    pub dst_mask: Option<u8>,
    pub input: Option<u32>,
    pub output: Option<u32>,
    pub direction: Option<u8>,
    pub sampling_rate: Option<u64>,
    pub end_reason: Option<u8>,
    pub src_vlan: Option<u16>,
    pub dst_vlan: Option<u16>,
    pub mpls_labels: Vec<u32>,
    pub post_nat_src: Option<IpAddr>,
    pub post_nat_dst: Option<IpAddr>,
    pub post_nat_sport: Option<u16>,
    pub post_nat_dport: Option<u16>,
    pub community_id: Option<silt_flow::CommunityId>,
    /// (enterprise, field id, raw bytes) of fields without a typed column.
    pub extra: Vec<(u32, u16, Vec<u8>)>,
}

/// Addresses as text. An address equal to the row before's is copied rather than formatted
/// again: the exporter and agent columns repeat one datagram's address on each of its samples.
fn addr_col<'a, I: ExactSizeIterator<Item = Option<&'a IpAddr>>>(it: I) -> ArrayRef {
    // IPv4 text is 7 to 15 bytes.
    let mut b = StringBuilder::with_capacity(it.len(), it.len() * 14);
    let mut last: Option<IpAddr> = None;
    let mut text = silt_core::addr::AddrText::default();
    for a in it {
        match a {
            Some(a) if last == Some(*a) => b.append_value(text.as_str()),
            Some(a) => {
                b.append_value(text.format(*a));
                last = Some(*a);
            }
            None => b.append_null(),
        }
    }
    Arc::new(b.finish())
}

fn ts_col<I: Iterator<Item = Option<i64>>>(it: I) -> ArrayRef {
    Arc::new(
        it.collect::<TimestampMicrosecondArray>()
            .with_timezone("UTC"),
    )
}

fn ts_vals<I: Iterator<Item = i64>>(it: I) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from_iter_values(it).with_timezone("UTC"))
}

fn u32_list<'a, I: Iterator<Item = Option<&'a Vec<u32>>>>(it: I) -> ArrayRef {
    Arc::new(ListArray::from_iter_primitive::<UInt32Type, _, _>(it.map(
        |o| o.map(|v| v.iter().map(|&x| Some(x)).collect::<Vec<_>>()),
    )))
}

fn records_col<'a, I: Iterator<Item = &'a Vec<(u32, u32, u32)>>>(it: I) -> ArrayRef {
    let sb = StructBuilder::new(
        record_fields(),
        vec![
            Box::new(UInt32Builder::new()),
            Box::new(UInt32Builder::new()),
            Box::new(UInt32Builder::new()),
        ],
    );
    let mut lb = ListBuilder::new(sb).with_field(Arc::new(Field::new(
        "item",
        DataType::Struct(record_fields()),
        true,
    )));
    for recs in it {
        for &(e, fmt, len) in recs {
            let s = lb.values();
            for (i, v) in [e, fmt, len].into_iter().enumerate() {
                if let Some(b) = s.field_builder::<UInt32Builder>(i) {
                    b.append_value(v);
                }
            }
            s.append(true);
        }
        lb.append(!recs.is_empty());
    }
    Arc::new(lb.finish())
}

fn tunnels_col<'a, I: Iterator<Item = &'a Vec<TunnelRow>>>(it: I) -> ArrayRef {
    let sb = StructBuilder::new(
        tunnel_fields(),
        vec![
            Box::new(StringBuilder::new()),
            Box::new(StringBuilder::new()),
            Box::new(StringBuilder::new()),
            Box::new(UInt32Builder::new()),
        ],
    );
    let mut lb = ListBuilder::new(sb).with_field(Arc::new(Field::new(
        "item",
        DataType::Struct(tunnel_fields()),
        true,
    )));
    for ts in it {
        for t in ts {
            let s = lb.values();
            if let Some(b) = s.field_builder::<StringBuilder>(0) {
                b.append_value(t.kind);
            }
            for (i, a) in [(1, t.src), (2, t.dst)] {
                if let Some(b) = s.field_builder::<StringBuilder>(i) {
                    b.append_option(a.map(|a| a.to_string()));
                }
            }
            if let Some(b) = s.field_builder::<UInt32Builder>(3) {
                b.append_option(t.key);
            }
            s.append(true);
        }
        lb.append(!ts.is_empty());
    }
    Arc::new(lb.finish())
}

fn extra_col<'a, I: Iterator<Item = &'a Vec<(u32, u16, Vec<u8>)>>>(it: I) -> ArrayRef {
    let sb = StructBuilder::new(
        extra_fields(),
        vec![
            Box::new(UInt32Builder::new()),
            Box::new(UInt16Builder::new()),
            Box::new(BinaryBuilder::new()),
        ],
    );
    let mut lb = ListBuilder::new(sb).with_field(Arc::new(Field::new(
        "item",
        DataType::Struct(extra_fields()),
        true,
    )));
    for xs in it {
        for (e, id, v) in xs {
            let s = lb.values();
            if let Some(b) = s.field_builder::<UInt32Builder>(0) {
                b.append_value(*e);
            }
            if let Some(b) = s.field_builder::<UInt16Builder>(1) {
                b.append_value(*id);
            }
            if let Some(b) = s.field_builder::<BinaryBuilder>(2) {
                b.append_value(v);
            }
            s.append(true);
        }
        lb.append(!xs.is_empty());
    }
    Arc::new(lb.finish())
}

macro_rules! col {
    ($arr:ty, $rows:expr, |$r:ident| $e:expr) => {
        Arc::new($rows.iter().map(|$r| $e).collect::<$arr>()) as ArrayRef
    };
}

/// A column that is never null: no validity bitmap to build here, nor to read when encoding.
macro_rules! vals {
    ($arr:ty, $rows:expr, |$r:ident| $e:expr) => {
        Arc::new(<$arr>::from_iter_values($rows.iter().map(|$r| $e))) as ArrayRef
    };
}

fn sflow_common_cols<T>(
    rows: &[(Arc<SflowCtx>, T)],
    head: impl Fn(&T) -> &SampleHead,
) -> Vec<ArrayRef> {
    vec![
        ts_vals(rows.iter().map(|(c, _)| c.received_us)),
        addr_col(rows.iter().map(|(c, _)| Some(&c.exporter))),
        vals!(UInt16Array, rows, |r| r.0.exporter_port),
        vals!(UInt64Array, rows, |r| r.0.frame),
        addr_col(rows.iter().map(|(c, _)| Some(&c.agent))),
        vals!(UInt32Array, rows, |r| r.0.sub_agent),
        vals!(UInt32Array, rows, |r| r.0.datagram_seq),
        vals!(UInt32Array, rows, |r| r.0.uptime_ms),
        vals!(UInt32Array, rows, |r| head(&r.1).seq),
        col!(BooleanArray, rows, |r| Some(head(&r.1).expanded)),
        vals!(UInt32Array, rows, |r| head(&r.1).source_id_type),
        vals!(UInt32Array, rows, |r| head(&r.1).source_id_index),
    ]
}

/// Builds an `sflow.sample` batch.
pub fn sample_batch(rows: &[(Arc<SflowCtx>, SampleRow)]) -> anyhow::Result<RecordBatch> {
    let mut c = sflow_common_cols(rows, |r: &SampleRow| &r.head);
    c.extend([
        vals!(UInt32Array, rows, |r| r.1.sampling_rate),
        vals!(UInt32Array, rows, |r| r.1.sample_pool),
        vals!(UInt32Array, rows, |r| r.1.drops),
        vals!(UInt32Array, rows, |r| r.1.input_format),
        vals!(UInt32Array, rows, |r| r.1.input),
        vals!(UInt32Array, rows, |r| r.1.output_format),
        vals!(UInt32Array, rows, |r| r.1.output),
        col!(UInt32Array, rows, |r| r.1.header_protocol),
        col!(UInt32Array, rows, |r| r.1.frame_length),
        col!(UInt32Array, rows, |r| r.1.stripped),
        col!(UInt32Array, rows, |r| r.1.header_length),
        addr_col(rows.iter().map(|r| r.1.src.as_ref())),
        addr_col(rows.iter().map(|r| r.1.dst.as_ref())),
        col!(UInt8Array, rows, |r| r.1.proto),
        col!(UInt16Array, rows, |r| r.1.sport),
        col!(UInt16Array, rows, |r| r.1.dport),
        col!(UInt8Array, rows, |r| r.1.icmp_type),
        col!(UInt8Array, rows, |r| r.1.icmp_code),
        col!(UInt8Array, rows, |r| r.1.tcp_flags),
        col!(UInt32Array, rows, |r| r.1.ip_length),
        col!(UInt8Array, rows, |r| r.1.tos),
        col!(UInt16Array, rows, |r| r.1.vlan_outer),
        col!(UInt16Array, rows, |r| r.1.vlan_inner),
        tunnels_col(rows.iter().map(|r| &r.1.tunnels)),
        col!(StringArray, rows, |r| r
            .1
            .community_id
            .as_ref()
            .map(|c| c.as_str())),
        col!(UInt32Array, rows, |r| r.1.src_vlan),
        col!(UInt32Array, rows, |r| r.1.src_priority),
        col!(UInt32Array, rows, |r| r.1.dst_vlan),
        col!(UInt32Array, rows, |r| r.1.dst_priority),
        addr_col(rows.iter().map(|r| r.1.next_hop.as_ref())),
        col!(UInt32Array, rows, |r| r.1.src_mask),
        col!(UInt32Array, rows, |r| r.1.dst_mask),
        addr_col(rows.iter().map(|r| r.1.bgp_next_hop.as_ref())),
        col!(UInt32Array, rows, |r| r.1.router_as),
        col!(UInt32Array, rows, |r| r.1.src_as),
        col!(UInt32Array, rows, |r| r.1.src_peer_as),
        col!(UInt32Array, rows, |r| r.1.dst_as),
        u32_list(rows.iter().map(|r| r.1.dst_as_path.as_ref())),
        u32_list(rows.iter().map(|r| r.1.communities.as_ref())),
        col!(StringArray, rows, |r| r.1.decode_error.as_deref()),
        records_col(rows.iter().map(|r| &r.1.other_records)),
    ]);
    Ok(RecordBatch::try_new(sflow_sample_schema(), c)?)
}

/// Builds an `sflow.counter` batch.
pub fn counter_batch(rows: &[(Arc<SflowCtx>, CounterRow)]) -> anyhow::Result<RecordBatch> {
    let mut c = sflow_common_cols(rows, |r: &CounterRow| &r.head);
    c.extend([
        col!(UInt32Array, rows, |r| r.1.if_index),
        col!(UInt32Array, rows, |r| r.1.if_type),
        col!(UInt64Array, rows, |r| r.1.if_speed),
        col!(UInt32Array, rows, |r| r.1.if_direction),
        col!(BooleanArray, rows, |r| r.1.if_admin_up),
        col!(BooleanArray, rows, |r| r.1.if_oper_up),
    ]);
    for i in 0..14 {
        c.push(col!(UInt64Array, rows, |r| r.1.if_counters.map(|a| a[i])));
    }
    for i in 0..13 {
        c.push(col!(UInt32Array, rows, |r| r.1.eth_counters.map(|a| a[i])));
    }
    c.push(records_col(rows.iter().map(|r| &r.1.other_records)));
    Ok(RecordBatch::try_new(sflow_counter_schema(), c)?)
}

/// Builds a `netflow.flow` batch. The time column is `flow_end`, else `received`.
pub fn flow_batch(rows: &[(Arc<FlowCtx>, FlowRow)]) -> anyhow::Result<RecordBatch> {
    let c: Vec<ArrayRef> = vec![
        ts_vals(
            rows.iter()
                .map(|(c, r)| r.flow_end.unwrap_or(c.received_us)),
        ),
        ts_vals(rows.iter().map(|(c, _)| c.received_us)),
        addr_col(rows.iter().map(|(c, _)| Some(&c.exporter))),
        vals!(UInt16Array, rows, |r| r.0.exporter_port),
        vals!(UInt64Array, rows, |r| r.0.frame),
        vals!(UInt16Array, rows, |r| r.0.version),
        vals!(UInt32Array, rows, |r| r.0.domain),
        vals!(UInt32Array, rows, |r| r.0.sequence),
        col!(UInt16Array, rows, |r| r.1.template_id),
        addr_col(rows.iter().map(|r| r.1.src.as_ref())),
        addr_col(rows.iter().map(|r| r.1.dst.as_ref())),
        addr_col(rows.iter().map(|r| r.1.next_hop.as_ref())),
        addr_col(rows.iter().map(|r| r.1.bgp_next_hop.as_ref())),
        col!(UInt16Array, rows, |r| r.1.sport),
        col!(UInt16Array, rows, |r| r.1.dport),
        col!(UInt8Array, rows, |r| r.1.proto),
        col!(UInt64Array, rows, |r| r.1.bytes),
        col!(UInt64Array, rows, |r| r.1.packets),
        ts_col(rows.iter().map(|r| r.1.flow_start)),
        ts_col(rows.iter().map(|r| r.1.flow_end)),
        col!(UInt16Array, rows, |r| r.1.tcp_flags),
        col!(UInt8Array, rows, |r| r.1.tos),
        col!(UInt8Array, rows, |r| r.1.icmp_type),
        col!(UInt8Array, rows, |r| r.1.icmp_code),
        col!(UInt32Array, rows, |r| r.1.src_as),
        col!(UInt32Array, rows, |r| r.1.dst_as),
        col!(UInt8Array, rows, |r| r.1.src_mask),
        col!(UInt8Array, rows, |r| r.1.dst_mask),
        col!(UInt32Array, rows, |r| r.1.input),
        col!(UInt32Array, rows, |r| r.1.output),
        col!(UInt8Array, rows, |r| r.1.direction),
        col!(UInt64Array, rows, |r| r.1.sampling_rate),
        col!(UInt8Array, rows, |r| r.1.end_reason),
        col!(UInt16Array, rows, |r| r.1.src_vlan),
        col!(UInt16Array, rows, |r| r.1.dst_vlan),
        Arc::new(ListArray::from_iter_primitive::<UInt32Type, _, _>(
            rows.iter().map(|r| {
                (!r.1.mpls_labels.is_empty())
                    .then(|| r.1.mpls_labels.iter().map(|&x| Some(x)).collect::<Vec<_>>())
            }),
        )),
        addr_col(rows.iter().map(|r| r.1.post_nat_src.as_ref())),
        addr_col(rows.iter().map(|r| r.1.post_nat_dst.as_ref())),
        col!(UInt16Array, rows, |r| r.1.post_nat_sport),
        col!(UInt16Array, rows, |r| r.1.post_nat_dport),
        col!(StringArray, rows, |r| r
            .1
            .community_id
            .as_ref()
            .map(|c| c.as_str())),
        extra_col(rows.iter().map(|r| &r.1.extra)),
    ];
    Ok(RecordBatch::try_new(netflow_flow_schema(), c)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};

    #[test]
    fn an_address_column_is_display_text_with_runs_copied() {
        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "10.0.0.255".parse().unwrap();
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let addrs = [
            Some(v4),
            Some(v4),
            None,
            Some(v4),
            Some(other),
            Some(v6),
            Some(v6),
            Some(v4),
        ];
        let col = addr_col(addrs.iter().map(|a| a.as_ref()));
        let s = col.as_string::<i32>();
        assert_eq!(s.len(), addrs.len());
        for (i, a) in addrs.iter().enumerate() {
            match a {
                Some(a) => assert_eq!(s.value(i), a.to_string(), "row {i}"),
                None => assert!(s.is_null(i), "row {i}"),
            }
        }
    }
}
