//! The `pcap.packet` schema and its column builders (reused across batches, no per-packet
//! allocation: addresses and Community IDs are written straight into the string builders).

use std::net::IpAddr;
use std::sync::Arc;

use arrow::array::NullBufferBuilder;
use arrow::array::{
    ArrayRef, BinaryBuilder, ListBuilder, StringBuilder, StructArray, StructBuilder,
    TimestampMicrosecondBuilder, UInt16Builder, UInt32Builder, UInt8Builder,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use silt_core::addr::AddrText;
use silt_core::meta;

use crate::decode::Decoded;

/// Table name of the packet records.
pub const PACKET_TABLE: (&str, &str) = ("pcap", "packet");

fn vlan_fields() -> Fields {
    Fields::from(vec![
        Field::new("outer", DataType::UInt16, true),
        Field::new("inner", DataType::UInt16, true),
    ])
}

/// The struct of one `tunnel` list element (type, outer src/dst, key); also the `tunnel`
/// column of sampled headers in `sflow.sample`.
pub fn tunnel_fields() -> Fields {
    Fields::from(vec![
        Field::new("type", DataType::Utf8, true),
        Field::new("src", DataType::Utf8, true),
        Field::new("dst", DataType::Utf8, true),
        Field::new("key", DataType::UInt32, true),
    ])
}

/// The `pcap.packet` schema; `payload` (Binary) is present only when `with_payload`.
pub fn packet_schema(with_payload: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("time", silt_core::time::timestamp_type(), true),
        Field::new("interface", DataType::UInt32, true),
        Field::new("link_type", DataType::UInt16, true),
        Field::new("length", DataType::UInt32, true),
        Field::new("caplen", DataType::UInt32, true),
        Field::new("ethertype", DataType::UInt16, true),
        Field::new("vlan", DataType::Struct(vlan_fields()), true),
        Field::new("src", DataType::Utf8, true),
        Field::new("dst", DataType::Utf8, true),
        Field::new("proto", DataType::UInt8, true),
        Field::new("sport", DataType::UInt16, true),
        Field::new("dport", DataType::UInt16, true),
        Field::new("icmp_type", DataType::UInt8, true),
        Field::new("icmp_code", DataType::UInt8, true),
        Field::new("tcp_flags", DataType::UInt8, true),
        Field::new("community_id", DataType::Utf8, true),
        Field::new(
            "tunnel",
            DataType::List(Arc::new(Field::new(
                "item",
                DataType::Struct(tunnel_fields()),
                true,
            ))),
            true,
        ),
    ];
    if with_payload {
        fields.push(Field::new("payload", DataType::Binary, true));
    }
    let md = [
        (meta::TIME_COLUMN.to_string(), "time".to_string()),
        (meta::TABLE.to_string(), "pcap.packet".to_string()),
        (
            meta::LOOKUP_COLUMNS.to_string(),
            "community_id,src,dst".to_string(),
        ),
    ];
    Arc::new(Schema::new(fields).with_metadata(md.into_iter().collect()))
}

/// Per-frame values that do not come from the decoder.
pub struct FrameMeta<'a> {
    pub time_us: Option<i64>,
    pub interface: Option<u32>,
    pub link_type: u32,
    pub length: u32,
    pub data: &'a [u8],
}

/// Column builders for `pcap.packet`.
pub struct PacketColumns {
    schema: SchemaRef,
    payload_limit: Option<usize>,
    time: TimestampMicrosecondBuilder,
    interface: UInt32Builder,
    link_type: UInt16Builder,
    length: UInt32Builder,
    caplen: UInt32Builder,
    ethertype: UInt16Builder,
    vlan_outer: UInt16Builder,
    vlan_inner: UInt16Builder,
    vlan_valid: NullBufferBuilder,
    src: StringBuilder,
    dst: StringBuilder,
    proto: UInt8Builder,
    sport: UInt16Builder,
    dport: UInt16Builder,
    icmp_type: UInt8Builder,
    icmp_code: UInt8Builder,
    tcp_flags: UInt8Builder,
    community_id: StringBuilder,
    tunnel: ListBuilder<StructBuilder>,
    payload: BinaryBuilder,
    rows: usize,
    /// Captured bytes of the rows in the current batch (for `Emit::table_bytes`).
    pub bytes: u64,
}

impl PacketColumns {
    /// `payload_limit`: `None` = no payload column, `Some(usize::MAX)` = whole frames.
    pub fn new(payload_limit: Option<usize>) -> Self {
        let tunnel_struct = StructBuilder::new(
            tunnel_fields(),
            vec![
                Box::new(StringBuilder::new()),
                Box::new(StringBuilder::new()),
                Box::new(StringBuilder::new()),
                Box::new(UInt32Builder::new()),
            ],
        );
        Self {
            schema: packet_schema(payload_limit.is_some()),
            payload_limit,
            time: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            interface: UInt32Builder::new(),
            link_type: UInt16Builder::new(),
            length: UInt32Builder::new(),
            caplen: UInt32Builder::new(),
            ethertype: UInt16Builder::new(),
            vlan_outer: UInt16Builder::new(),
            vlan_inner: UInt16Builder::new(),
            vlan_valid: NullBufferBuilder::new(1024),
            src: StringBuilder::new(),
            dst: StringBuilder::new(),
            proto: UInt8Builder::new(),
            sport: UInt16Builder::new(),
            dport: UInt16Builder::new(),
            icmp_type: UInt8Builder::new(),
            icmp_code: UInt8Builder::new(),
            tcp_flags: UInt8Builder::new(),
            community_id: StringBuilder::new(),
            tunnel: ListBuilder::new(tunnel_struct),
            payload: BinaryBuilder::new(),
            rows: 0,
            bytes: 0,
        }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends one row. `community_id` is the already computed ID (empty = null).
    pub fn append(&mut self, f: &FrameMeta<'_>, d: &Decoded, community_id: &str) {
        self.rows += 1;
        self.bytes += f.data.len() as u64;
        self.time.append_option(f.time_us);
        self.interface.append_option(f.interface);
        self.link_type
            .append_option(u16::try_from(f.link_type).ok());
        self.length.append_value(f.length);
        self.caplen.append_value(f.data.len() as u32);
        self.ethertype.append_option(d.ethertype);
        if d.nvlans > 0 {
            self.vlan_outer.append_option(d.vlan_outer());
            self.vlan_inner.append_option(d.vlan_inner());
            self.vlan_valid.append_non_null();
        } else {
            self.vlan_outer.append_null();
            self.vlan_inner.append_null();
            self.vlan_valid.append_null();
        }
        match &d.ip {
            Some(ip) => {
                write_addr(&mut self.src, ip.src);
                write_addr(&mut self.dst, ip.dst);
                self.proto.append_value(ip.proto);
                self.sport.append_option(ip.ports.map(|p| p.0));
                self.dport.append_option(ip.ports.map(|p| p.1));
                self.icmp_type.append_option(ip.icmp.map(|p| p.0));
                self.icmp_code.append_option(ip.icmp.map(|p| p.1));
                self.tcp_flags.append_option(ip.tcp_flags);
            }
            None => {
                self.src.append_null();
                self.dst.append_null();
                self.proto.append_null();
                self.sport.append_null();
                self.dport.append_null();
                self.icmp_type.append_null();
                self.icmp_code.append_null();
                self.tcp_flags.append_null();
            }
        }
        if community_id.is_empty() {
            self.community_id.append_null();
        } else {
            self.community_id.append_value(community_id);
        }
        if d.ntunnels == 0 {
            self.tunnel.append(false);
        } else {
            let sb = self.tunnel.values();
            for t in d.tunnels() {
                sb.field_builder::<StringBuilder>(0)
                    .expect("type builder")
                    .append_value(t.kind);
                let s = sb.field_builder::<StringBuilder>(1).expect("src builder");
                match t.src {
                    Some(a) => write_addr(s, a),
                    None => s.append_null(),
                }
                let s = sb.field_builder::<StringBuilder>(2).expect("dst builder");
                match t.dst {
                    Some(a) => write_addr(s, a),
                    None => s.append_null(),
                }
                sb.field_builder::<UInt32Builder>(3)
                    .expect("key builder")
                    .append_option(t.key);
                sb.append(true);
            }
            self.tunnel.append(true);
        }
        if let Some(limit) = self.payload_limit {
            let n = f.data.len().min(limit);
            self.payload.append_value(&f.data[..n]);
        }
    }

    /// Finishes the current rows into a batch (builders are reset for the next one).
    pub fn finish(&mut self) -> anyhow::Result<RecordBatch> {
        let vlan = StructArray::new(
            vlan_fields(),
            vec![
                Arc::new(self.vlan_outer.finish()) as ArrayRef,
                Arc::new(self.vlan_inner.finish()),
            ],
            self.vlan_valid.finish(),
        );
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.time.finish()),
            Arc::new(self.interface.finish()),
            Arc::new(self.link_type.finish()),
            Arc::new(self.length.finish()),
            Arc::new(self.caplen.finish()),
            Arc::new(self.ethertype.finish()),
            Arc::new(vlan),
            Arc::new(self.src.finish()),
            Arc::new(self.dst.finish()),
            Arc::new(self.proto.finish()),
            Arc::new(self.sport.finish()),
            Arc::new(self.dport.finish()),
            Arc::new(self.icmp_type.finish()),
            Arc::new(self.icmp_code.finish()),
            Arc::new(self.tcp_flags.finish()),
            Arc::new(self.community_id.finish()),
            Arc::new(self.tunnel.finish()),
        ];
        if self.payload_limit.is_some() {
            cols.push(Arc::new(self.payload.finish()));
        }
        self.rows = 0;
        self.bytes = 0;
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }
}

/// Canonical address text (what `silt_core::addr::canonical_addr` produces: `Display` of
/// `IpAddr`), formatted by [`AddrText`] straight into the column's value buffer instead of via
/// a `String`.
pub fn write_addr(b: &mut StringBuilder, a: IpAddr) {
    let mut buf = AddrText::default();
    b.append_value(buf.format(a));
}

#[cfg(test)]
mod addr_tests {
    use super::*;

    /// `AddrText` itself is checked against `Display` in silt-core; here, that its text is what
    /// lands in the column.
    #[test]
    fn write_addr_appends_display() {
        let addrs: Vec<IpAddr> = ["10.0.9.100", "2001:db8::ff00:42:8329", "::ffff:1.2.3.4"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let mut b = StringBuilder::new();
        for a in &addrs {
            write_addr(&mut b, *a);
        }
        let arr = b.finish();
        for (i, a) in addrs.iter().enumerate() {
            assert_eq!(arr.value(i), a.to_string());
        }
    }
}
