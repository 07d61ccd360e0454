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
/// `IpAddr`), formatted straight into the column's value buffer instead of via a `String`.
/// Both families are formatted by hand: `Display` went through the formatting machinery per
/// octet or group, about 6 % of `silt import sflow --enrich` for IPv4 (perf, bench/kafka.sh's
/// RASP pipeline), and `write_addr` with IPv6 through `Display` was 7 % of a plain sFlow
/// import's CPU; the tests compare every case with `Display`.
pub fn write_addr(b: &mut StringBuilder, a: IpAddr) {
    let mut buf = AddrText::default();
    b.append_value(buf.format(a));
}

/// A buffer that [`write_addr`]'s text is formatted into, for callers that append the same
/// address more than once (an sFlow datagram's agent on each of its samples).
#[derive(Clone, Copy)]
pub struct AddrText {
    // Longest: "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" cannot occur (only ::ffff:
    // mapped addresses print a dotted tail), so 39 bytes ("xxxx:" x 8 minus one) suffice.
    buf: [u8; 40],
    len: usize,
}

impl Default for AddrText {
    fn default() -> Self {
        Self {
            buf: [0; 40],
            len: 0,
        }
    }
}

impl AddrText {
    /// Formats `a` (replacing what the buffer held) and returns its text.
    pub fn format(&mut self, a: IpAddr) -> &str {
        self.len = match a {
            IpAddr::V4(v4) => put_v4(&mut self.buf, v4.octets()),
            IpAddr::V6(v6) => put_v6(&mut self.buf, v6),
        };
        self.as_str()
    }

    /// The text last formatted (empty before the first).
    pub fn as_str(&self) -> &str {
        // SAFETY: put_v4/put_v6 write only ASCII digits, hex letters, dots and colons. (from_utf8
        // here and in `CommunityId::as_str` was 2 % of an sFlow import's CPU together.)
        unsafe { std::str::from_utf8_unchecked(&self.buf[..self.len]) }
    }
}

/// Dotted decimal into the start of `buf`; returns the length.
fn put_v4(buf: &mut [u8], octets: [u8; 4]) -> usize {
    let mut n = 0;
    for (i, o) in octets.into_iter().enumerate() {
        if i > 0 {
            buf[n] = b'.';
            n += 1;
        }
        if o >= 100 {
            buf[n] = b'0' + o / 100;
            n += 1;
        }
        if o >= 10 {
            buf[n] = b'0' + o / 10 % 10;
            n += 1;
        }
        buf[n] = b'0' + o % 10;
        n += 1;
    }
    n
}

/// IPv6 text as `Display` writes it (RFC 5952): lower-case hex groups without leading zeros,
/// the longest run of two or more zero groups (the first of equal runs) as `::`, and
/// IPv4-mapped addresses as `::ffff:a.b.c.d`. Returns the length written into `buf`.
fn put_v6(buf: &mut [u8; 40], a: std::net::Ipv6Addr) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let g = a.segments();
    if g[..5] == [0; 5] && g[5] == 0xffff {
        buf[..7].copy_from_slice(b"::ffff:");
        let o = a.octets();
        return 7 + put_v4(&mut buf[7..], [o[12], o[13], o[14], o[15]]);
    }
    // The longest run of zero groups (length >= 2).
    let (mut best, mut best_len, mut i) = (8usize, 0usize, 0usize);
    while i < 8 {
        if g[i] == 0 {
            let start = i;
            while i < 8 && g[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                (best, best_len) = (start, i - start);
            }
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best = 8;
    }
    let mut n = 0;
    let put_group = |buf: &mut [u8; 40], n: &mut usize, v: u16| {
        let digits = ((16 - v.leading_zeros() as usize).max(1)).div_ceil(4);
        for k in (0..digits).rev() {
            buf[*n] = HEX[usize::from((v >> (4 * k)) & 0xf)];
            *n += 1;
        }
    };
    let mut i = 0;
    while i < 8 {
        if i == best {
            buf[n..n + 2].copy_from_slice(b"::");
            n += 2;
            i += best_len;
            continue;
        }
        if i > 0 && i != best + best_len {
            buf[n] = b':';
            n += 1;
        }
        put_group(buf, &mut n, g[i]);
        i += 1;
    }
    n
}

#[cfg(test)]
mod addr_tests {
    use super::*;

    #[test]
    fn write_addr_is_display() {
        let mut b = StringBuilder::new();
        let addrs: Vec<IpAddr> = [
            "0.0.0.0",
            "255.255.255.255",
            "10.0.9.100",
            "1.20.199.9",
            "::1",
            "2001:db8::ff00:42:8329",
            "::ffff:1.2.3.4",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        for a in &addrs {
            write_addr(&mut b, *a);
        }
        let arr = b.finish();
        for (i, a) in addrs.iter().enumerate() {
            assert_eq!(arr.value(i), a.to_string());
        }
        // IPv6 zero runs of every position and length, and mapped/compatible forms, against
        // Display.
        let mut b = StringBuilder::new();
        let mut want = Vec::new();
        for mask in 0u16..256 {
            for fill in [0x1u16, 0xabc, 0xffff, 0x10] {
                let mut g = [0u16; 8];
                for (k, v) in g.iter_mut().enumerate() {
                    if mask & (1 << k) != 0 {
                        *v = fill.wrapping_mul(k as u16 + 1);
                    }
                }
                let a = IpAddr::from(std::net::Ipv6Addr::from(g));
                write_addr(&mut b, a);
                want.push(a.to_string());
            }
        }
        for s in [
            "::ffff:0.0.0.0",
            "::ffff:255.1.20.3",
            "::1.2.3.4",
            "::ffff:0:1.2.3.4",
            "::",
        ] {
            let a: IpAddr = s.parse().unwrap();
            write_addr(&mut b, a);
            want.push(a.to_string());
        }
        let arr = b.finish();
        for (i, w) in want.iter().enumerate() {
            assert_eq!(arr.value(i), w);
        }
        // Every octet value.
        let mut b = StringBuilder::new();
        for o in 0..=255u8 {
            write_addr(&mut b, IpAddr::from([o, 255 - o, o / 3, 7]));
        }
        let arr = b.finish();
        for o in 0..=255u8 {
            let a = IpAddr::from([o, 255 - o, o / 3, 7]);
            assert_eq!(arr.value(o as usize), a.to_string());
        }
    }
}
