//! sFlow v5 datagrams (<https://sflow.org/sflow_version_5.txt>) -> `sflow.sample` and
//! `sflow.counter` rows. Written by hand: the XDR layout is small and every sample and record is
//! length-prefixed, so a bounds-checked walk is short; see the crate documentation for why the
//! `sflow-parser` crate was not used. Touches only the datagram bytes and the rows/statistics it
//! is handed; the sampled packet headers are decoded by `silt_pcap::decode::decode_frame`.
//!
//! A datagram decodes completely or not at all: any structural error (a length pointing past
//! the end, a truncated record) returns a [`WireError`] with the offset, and the caller turns the
//! whole datagram into a reject. Unknown sample and record types are skipped by their length and
//! counted; a raw packet header that `decode_frame` cannot decode still gives a row, with
//! `decode_error` set.

use std::net::IpAddr;
use std::sync::Arc;

use silt_pcap::decode::{decode_frame, linktype, Decoded};

use crate::schema::{CounterRow, SampleHead, SampleRow, SflowCtx, TunnelRow};
use crate::wire::{err, Rd, WireResult};
use crate::{Datagram, FlowExportStats};

/// Where [`decode`] appends the rows of a datagram. Rows are filled in place here rather than
/// built and moved: a sample row is a few hundred bytes, and moving each twice (into a
/// per-datagram vector, then into the batch buffer, with the reallocations of the first) cost
/// about 5 % of an sFlow import's CPU.
#[derive(Default)]
pub struct SflowRows {
    pub samples: Vec<(Arc<SflowCtx>, SampleRow)>,
    pub counters: Vec<(Arc<SflowCtx>, CounterRow)>,
}

/// sFlow address: type 1 = IPv4, 2 = IPv6; 0 (unknown) has no bytes.
fn address(r: &mut Rd<'_>, what: &str) -> WireResult<Option<IpAddr>> {
    let at = r.offset();
    match r.u32(what)? {
        0 => Ok(None),
        1 => Ok(Some(IpAddr::V4(r.ipv4(what)?))),
        2 => Ok(Some(IpAddr::V6(r.ipv6(what)?))),
        t => err(at, format!("{what}: unknown address type {t}")),
    }
}

/// Decodes one sFlow v5 datagram, appending its rows to `rows` and returning its context. On an
/// error nothing of the datagram stays in `rows`.
pub fn decode(
    d: &Datagram<'_>,
    seed: u16,
    stats: &mut FlowExportStats,
    rows: &mut SflowRows,
) -> WireResult<Arc<SflowCtx>> {
    let (ns, nc) = (rows.samples.len(), rows.counters.len());
    let r = decode_into(d, seed, stats, rows);
    if r.is_err() {
        rows.samples.truncate(ns);
        rows.counters.truncate(nc);
    }
    r
}

fn decode_into(
    dg: &Datagram<'_>,
    seed: u16,
    stats: &mut FlowExportStats,
    rows: &mut SflowRows,
) -> WireResult<Arc<SflowCtx>> {
    let payload = dg.payload;
    let mut r = Rd::new(payload);
    let version = r.u32("version")?;
    if version != 5 {
        return err(0, format!("not sFlow v5: version {version}"));
    }
    let agent = match address(&mut r, "agent address")? {
        Some(a) => a,
        None => return err(4, "agent address type 0 (unknown)"),
    };
    let sub_agent = r.u32("sub-agent id")?;
    let datagram_seq = r.u32("sequence number")?;
    let uptime_ms = r.u32("uptime")?;
    let nsamples = r.u32("sample count")?;
    let ctx = Arc::new(SflowCtx {
        received_us: dg.received_us,
        exporter: dg.exporter,
        exporter_port: dg.exporter_port,
        frame: dg.frame,
        agent,
        sub_agent,
        datagram_seq,
        uptime_ms,
    });
    let mut d = Decoded::default();
    for i in 0..nsamples {
        if r.is_empty() {
            return err(
                r.offset(),
                format!("datagram ends after {i} of {nsamples} samples"),
            );
        }
        let tag = r.u32("sample type")?;
        let len = r.u32("sample length")? as usize;
        let mut s = r.sub(len, "sample")?;
        let (enterprise, format) = (tag >> 12, tag & 0xfff);
        match (enterprise, format) {
            (0, 1) | (0, 3) => {
                rows.samples.push((ctx.clone(), SampleRow::default()));
                let row = &mut rows.samples.last_mut().expect("just pushed").1;
                flow_sample(&mut s, format == 3, seed, &mut d, stats, row)?;
            }
            (0, 2) | (0, 4) => {
                let row = counter_sample(&mut s, format == 4, stats)?;
                rows.counters.push((ctx.clone(), row));
            }
            _ => stats.sflow_unknown_samples += 1,
        }
    }
    Ok(ctx)
}

fn sample_head(s: &mut Rd<'_>, expanded: bool) -> WireResult<SampleHead> {
    let seq = s.u32("sample sequence")?;
    let (source_id_type, source_id_index) = if expanded {
        (s.u32("source id type")?, s.u32("source id index")?)
    } else {
        let v = s.u32("source id")?;
        (v >> 24, v & 0x00ff_ffff)
    };
    Ok(SampleHead {
        seq,
        expanded,
        source_id_type,
        source_id_index,
    })
}

fn flow_sample(
    s: &mut Rd<'_>,
    expanded: bool,
    seed: u16,
    d: &mut Decoded,
    stats: &mut FlowExportStats,
    row: &mut SampleRow,
) -> WireResult<()> {
    row.head = sample_head(s, expanded)?;
    row.sampling_rate = s.u32("sampling rate")?;
    row.sample_pool = s.u32("sample pool")?;
    row.drops = s.u32("drops")?;
    if expanded {
        row.input_format = s.u32("input format")?;
        row.input = s.u32("input value")?;
        row.output_format = s.u32("output format")?;
        row.output = s.u32("output value")?;
    } else {
        // Compact interface: format in the top 2 bits, value in the low 30.
        let i = s.u32("input")?;
        let o = s.u32("output")?;
        row.input_format = i >> 30;
        row.input = i & 0x3fff_ffff;
        row.output_format = o >> 30;
        row.output = o & 0x3fff_ffff;
    }
    let nrec = s.u32("flow record count")?;
    for i in 0..nrec {
        if s.is_empty() {
            return err(
                s.offset(),
                format!("flow sample ends after {i} of {nrec} records"),
            );
        }
        let tag = s.u32("flow record type")?;
        let len = s.u32("flow record length")?;
        let mut rec = s.sub(len as usize, "flow record")?;
        let (ent, fmt) = (tag >> 12, tag & 0xfff);
        match (ent, fmt) {
            (0, 1) => raw_header(&mut rec, row, seed, d, stats)?,
            (0, 3) => sampled_ip(&mut rec, row, false)?,
            (0, 4) => sampled_ip(&mut rec, row, true)?,
            (0, 1001) => {
                // 0xffffffff means "unknown" in the extended switch record.
                let known = |v: u32| (v != u32::MAX).then_some(v);
                row.src_vlan = known(rec.u32("src vlan")?);
                row.src_priority = known(rec.u32("src priority")?);
                row.dst_vlan = known(rec.u32("dst vlan")?);
                row.dst_priority = known(rec.u32("dst priority")?);
            }
            (0, 1002) => {
                row.next_hop = address(&mut rec, "router next hop")?;
                row.src_mask = Some(rec.u32("src mask")?);
                row.dst_mask = Some(rec.u32("dst mask")?);
            }
            (0, 1003) => gateway(&mut rec, row)?,
            _ => {
                stats.sflow_unknown_flow_records += 1;
                row.other_records.push((ent, fmt, len));
            }
        }
    }
    if row.community_id.is_none() {
        row.community_id = community_id(row.src, row.dst, row.proto, row.ports(), seed);
    }
    Ok(())
}

/// A sampled IPv4 (format 3) or IPv6 (format 4) record: length, protocol, src, dst, ports, tcp
/// flags, then tos (IPv6: priority). The addresses and ports fill the row only when no raw
/// header gave them; the tos always does.
fn sampled_ip(rec: &mut Rd<'_>, row: &mut SampleRow, v6: bool) -> WireResult<()> {
    // Names for error messages only (static: this runs for every sample).
    let n = if v6 {
        [
            "ipv6 length",
            "ipv6 protocol",
            "ipv6 src port",
            "ipv6 dst port",
            "ipv6 tcp flags",
            "ipv6 priority",
        ]
    } else {
        [
            "ipv4 length",
            "ipv4 protocol",
            "ipv4 src port",
            "ipv4 dst port",
            "ipv4 tcp flags",
            "ipv4 tos",
        ]
    };
    let ip_len = rec.u32(n[0])?;
    let proto = rec.u32(n[1])?;
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        (rec.ipv6("ipv6 src")?.into(), rec.ipv6("ipv6 dst")?.into())
    } else {
        (rec.ipv4("ipv4 src")?.into(), rec.ipv4("ipv4 dst")?.into())
    };
    let sport = rec.u32(n[2])?;
    let dport = rec.u32(n[3])?;
    let flags = rec.u32(n[4])?;
    let tos = rec.u32(n[5])?;
    if row.src.is_none() {
        row.ip_length = Some(ip_len);
        row.proto = Some(proto as u8);
        row.src = Some(src);
        row.dst = Some(dst);
        row.sport = Some(sport as u16);
        row.dport = Some(dport as u16);
        row.tcp_flags = Some(flags as u8);
    }
    row.tos = Some(tos as u8);
    Ok(())
}

impl SampleRow {
    /// Ports for Community ID: transport ports, or ICMP type/code.
    fn ports(&self) -> (u16, u16) {
        match (self.icmp_type, self.icmp_code) {
            (Some(t), Some(c)) => (u16::from(t), u16::from(c)),
            _ => (self.sport.unwrap_or(0), self.dport.unwrap_or(0)),
        }
    }
}

/// Community ID when source, destination and protocol are known.
pub fn community_id(
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    proto: Option<u8>,
    ports: (u16, u16),
    seed: u16,
) -> Option<silt_flow::CommunityId> {
    let (src, dst, proto) = (src?, dst?, proto?);
    if src.is_ipv4() != dst.is_ipv4() {
        return None;
    }
    Some(silt_flow::CommunityId::v1(
        src, dst, proto, ports.0, ports.1, seed,
    ))
}

fn raw_header(
    rec: &mut Rd<'_>,
    row: &mut SampleRow,
    seed: u16,
    d: &mut Decoded,
    stats: &mut FlowExportStats,
) -> WireResult<()> {
    let proto = rec.u32("header protocol")?;
    let frame_length = rec.u32("frame length")?;
    let stripped = rec.u32("stripped")?;
    let hlen = rec.u32("header length")?;
    let header = rec.bytes(hlen as usize, "sampled header")?;
    row.header_protocol = Some(proto);
    row.frame_length = Some(frame_length);
    row.stripped = Some(stripped);
    row.header_length = Some(hlen);
    let link = match proto {
        1 => linktype::ETHERNET,
        11 => linktype::IPV4,
        12 => linktype::IPV6,
        _ => {
            stats.sflow_undecoded_headers += 1;
            return Ok(());
        }
    };
    if let Err(e) = decode_frame(link, header, d) {
        stats.sflow_header_errors += 1;
        row.decode_error = Some(e.into_owned());
    }
    row.vlan_outer = d.vlan_outer();
    row.vlan_inner = d.vlan_inner();
    row.tunnels = d
        .tunnels()
        .iter()
        .map(|t| TunnelRow {
            kind: t.kind,
            src: t.src,
            dst: t.dst,
            key: t.key,
        })
        .collect();
    if let Some(ip) = &d.ip {
        row.src = Some(ip.src);
        row.dst = Some(ip.dst);
        row.proto = Some(ip.proto);
        row.sport = ip.ports.map(|p| p.0);
        row.dport = ip.ports.map(|p| p.1);
        row.icmp_type = ip.icmp.map(|p| p.0);
        row.icmp_code = ip.icmp.map(|p| p.1);
        row.tcp_flags = ip.tcp_flags;
        row.ip_length = Some(ip.ip_len);
        row.community_id = community_id(row.src, row.dst, row.proto, row.ports(), seed);
    }
    Ok(())
}

/// Extended gateway (1003): next hop, AS, src AS, src peer AS, AS path segments, communities,
/// local preference. `dst_as` is the last AS of the path (null for an empty path); values are
/// kept as exported (a collector may read `src_as` 0 or an empty path as the router's own AS,
/// which `router_as` holds).
fn gateway(rec: &mut Rd<'_>, row: &mut SampleRow) -> WireResult<()> {
    row.bgp_next_hop = address(rec, "gateway next hop")?;
    row.router_as = Some(rec.u32("router AS")?);
    row.src_as = Some(rec.u32("src AS")?);
    row.src_peer_as = Some(rec.u32("src peer AS")?);
    let nseg = rec.u32("AS path segment count")?;
    let mut path = Vec::new();
    for _ in 0..nseg {
        let _seg_type = rec.u32("AS path segment type")?;
        let n = rec.u32("AS path segment length")?;
        if (n as usize).saturating_mul(4) > rec.remaining() {
            return err(
                rec.offset(),
                format!("AS path segment of {n} ASes past the end"),
            );
        }
        for _ in 0..n {
            path.push(rec.u32("AS")?);
        }
    }
    row.dst_as = path.last().copied();
    row.dst_as_path = Some(path);
    // Communities and local preference follow; older agents may omit them.
    if !rec.is_empty() {
        let n = rec.u32("community count")?;
        if (n as usize).saturating_mul(4) > rec.remaining() {
            return err(rec.offset(), format!("{n} communities past the end"));
        }
        let mut c = Vec::new();
        for _ in 0..n {
            c.push(rec.u32("community")?);
        }
        row.communities = Some(c);
    }
    Ok(())
}

fn counter_sample(
    s: &mut Rd<'_>,
    expanded: bool,
    stats: &mut FlowExportStats,
) -> WireResult<CounterRow> {
    let head = sample_head(s, expanded)?;
    let mut row = CounterRow {
        head,
        ..CounterRow::default()
    };
    let nrec = s.u32("counter record count")?;
    for i in 0..nrec {
        if s.is_empty() {
            return err(
                s.offset(),
                format!("counter sample ends after {i} of {nrec} records"),
            );
        }
        let tag = s.u32("counter record type")?;
        let len = s.u32("counter record length")?;
        let mut rec = s.sub(len as usize, "counter record")?;
        match (tag >> 12, tag & 0xfff) {
            (0, 1) => {
                row.if_index = Some(rec.u32("ifIndex")?);
                row.if_type = Some(rec.u32("ifType")?);
                row.if_speed = Some(rec.u64("ifSpeed")?);
                row.if_direction = Some(rec.u32("ifDirection")?);
                let status = rec.u32("ifStatus")?;
                row.if_admin_up = Some(status & 1 != 0);
                row.if_oper_up = Some(status & 2 != 0);
                let mut c = [0u64; 14];
                for (i, v) in c.iter_mut().enumerate() {
                    // in_octets (0) and out_octets (7) are 64-bit, the rest 32-bit.
                    *v = if i == 0 || i == 7 {
                        rec.u64("interface counter")?
                    } else {
                        u64::from(rec.u32("interface counter")?)
                    };
                }
                row.if_counters = Some(c);
            }
            (0, 2) => {
                let mut c = [0u32; 13];
                for v in c.iter_mut() {
                    *v = rec.u32("ethernet counter")?;
                }
                row.eth_counters = Some(c);
            }
            (ent, fmt) => {
                stats.sflow_unknown_counter_records += 1;
                row.other_records.push((ent, fmt, len));
            }
        }
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(v: &mut Vec<u8>, x: u32) {
        v.extend_from_slice(&x.to_be_bytes());
    }

    /// A datagram of two flow samples, one with a sampled IPv4 record (format 3) and one with a
    /// sampled IPv6 record (format 4): addresses, ports, protocol, flags and tos/priority.
    #[test]
    fn sampled_ipv4_and_ipv6_records() {
        let mut d = Vec::new();
        for x in [5, 1, 0x0a00_0001, 0, 7, 1000, 2] {
            put(&mut d, x); // version, agent 10.0.0.1, sub-agent, seq, uptime, 2 samples
        }
        for v6 in [false, true] {
            let mut rec = Vec::new();
            put(&mut rec, 1500); // length
            put(&mut rec, 6); // tcp
            if v6 {
                rec.extend_from_slice(
                    &"2001:db8::1"
                        .parse::<std::net::Ipv6Addr>()
                        .unwrap()
                        .octets(),
                );
                rec.extend_from_slice(
                    &"2001:db8::2"
                        .parse::<std::net::Ipv6Addr>()
                        .unwrap()
                        .octets(),
                );
            } else {
                rec.extend_from_slice(&[192, 0, 2, 1]);
                rec.extend_from_slice(&[192, 0, 2, 2]);
            }
            for x in [443, 51000, 0x12, 5] {
                put(&mut rec, x); // ports, tcp flags, tos / priority
            }
            let mut s = Vec::new();
            for x in [1, 3, 100, 2000, 0, 1, 2, 1] {
                put(&mut s, x); // seq, source id, rate, pool, drops, input, output, 1 record
            }
            put(&mut s, if v6 { 4 } else { 3 });
            put(&mut s, rec.len() as u32);
            s.extend_from_slice(&rec);
            put(&mut d, 1);
            put(&mut d, s.len() as u32);
            d.extend_from_slice(&s);
        }
        let mut stats = FlowExportStats::default();
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        let mut out = SflowRows::default();
        let dg = |payload| Datagram {
            frame: 1,
            received_us: 0,
            exporter: ip,
            exporter_port: 6343,
            collector_port: 6343,
            payload,
        };
        decode(&dg(&d), 0, &mut stats, &mut out).unwrap();
        assert_eq!(out.samples.len(), 2);
        for ((_, row), (src, dst)) in out
            .samples
            .iter()
            .zip([("192.0.2.1", "192.0.2.2"), ("2001:db8::1", "2001:db8::2")])
        {
            assert_eq!(row.src, Some(src.parse().unwrap()));
            assert_eq!(row.dst, Some(dst.parse().unwrap()));
            assert_eq!((row.sport, row.dport), (Some(443), Some(51000)));
            assert_eq!(row.proto, Some(6));
            assert_eq!(row.ip_length, Some(1500));
            assert_eq!(row.tcp_flags, Some(0x12));
            assert_eq!(row.tos, Some(5));
            assert!(row.community_id.is_some());
        }
        // Cut inside the IPv6 record: an error naming the field, never a panic.
        let e = decode(&dg(&d[..d.len() - 10]), 0, &mut stats, &mut out).err();
        assert!(e.is_some());
        // ... and the failed datagram leaves nothing behind.
        assert_eq!(out.samples.len(), 2);
    }
}
