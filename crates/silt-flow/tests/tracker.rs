//! Flow tracker behaviour: both directions -> one flow, FIN/RST/idle/active/eof endings,
//! batching, and bounded memory under churn. Expected values are worked out by hand from the
//! packets each test feeds in (and the Community ID spec's README table).

use std::net::IpAddr;

use arrow::array::{
    Array, AsArray, Decimal128Array, StringArray, StructArray, TimestampMicrosecondArray,
    UInt16Array, UInt8Array,
};
use arrow::datatypes::{Int64Type, UInt16Type, UInt8Type};
use arrow::record_batch::RecordBatch;
use silt_flow::{FlowConfig, FlowTracker, PacketInfo};

const S: i64 = 1_000_000;
const T0: i64 = 1_700_000_000 * S;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[allow(clippy::too_many_arguments)]
fn pkt(
    ts: i64,
    src: &str,
    dst: &str,
    proto: u8,
    sport: u16,
    dport: u16,
    flags: u8,
    payload: u32,
) -> PacketInfo {
    PacketInfo {
        ts_us: ts,
        src: ip(src),
        dst: ip(dst),
        proto,
        sport,
        dport,
        has_ports: true,
        vlan_outer: None,
        vlan_inner: None,
        ip_bytes: 40 + payload,
        payload_bytes: payload,
        tcp_flags: flags,
        tcp_seq: 0,
    }
}

fn col_str(b: &RecordBatch, name: &str, row: usize) -> String {
    b.column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .value(row)
        .to_string()
}
fn col_u64(b: &RecordBatch, name: &str, row: usize) -> u64 {
    b.column_by_name(name)
        .unwrap()
        .as_primitive::<Int64Type>()
        .value(row) as u64
}

fn all_rows(t: &mut FlowTracker) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    while let Some(b) = t.take_batch() {
        out.push(b);
    }
    out.extend(t.finish());
    out
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;

#[test]
fn tcp_both_directions_one_flow_fin() {
    let (a, b) = ("1.2.3.4", "5.6.7.8");
    let mut t = FlowTracker::new(FlowConfig::default());
    t.packet(&pkt(T0, a, b, 6, 1122, 3344, SYN, 0));
    t.packet(&pkt(T0 + 1000, b, a, 6, 3344, 1122, SYN | ACK, 0));
    t.packet(&pkt(T0 + 2000, a, b, 6, 1122, 3344, ACK, 0));
    t.packet(&pkt(T0 + 3000, a, b, 6, 1122, 3344, ACK | PSH, 100));
    t.packet(&pkt(T0 + 4000, b, a, 6, 3344, 1122, ACK | PSH, 500));
    t.packet(&pkt(T0 + 5000, a, b, 6, 1122, 3344, FIN | ACK, 0));
    t.packet(&pkt(T0 + 6000, b, a, 6, 3344, 1122, FIN | ACK, 0));
    t.packet(&pkt(T0 + 7000, a, b, 6, 1122, 3344, ACK, 0)); // final ACK: same flow
    assert_eq!(t.live_flows(), 1);
    let batches = all_rows(&mut t);
    assert_eq!(batches.len(), 1);
    let r = &batches[0];
    assert_eq!(r.num_rows(), 1);
    assert_eq!(col_str(r, "src", 0), a);
    assert_eq!(col_str(r, "dst", 0), b);
    assert_eq!(
        r.column_by_name("sport")
            .unwrap()
            .as_primitive::<UInt16Type>()
            .value(0),
        1122
    );
    assert_eq!(
        r.column_by_name("dport")
            .unwrap()
            .as_primitive::<UInt16Type>()
            .value(0),
        3344
    );
    assert_eq!(
        r.column_by_name("proto")
            .unwrap()
            .as_primitive::<UInt8Type>()
            .value(0),
        6
    );
    assert_eq!(col_u64(r, "orig_pkts", 0), 5);
    assert_eq!(col_u64(r, "resp_pkts", 0), 3);
    assert_eq!(col_u64(r, "orig_bytes", 0), 5 * 40 + 100);
    assert_eq!(col_u64(r, "resp_bytes", 0), 3 * 40 + 500);
    assert_eq!(col_u64(r, "orig_payload_bytes", 0), 100);
    assert_eq!(col_u64(r, "resp_payload_bytes", 0), 500);
    let fo = r
        .column_by_name("tcp_flags_orig")
        .unwrap()
        .as_any()
        .downcast_ref::<UInt8Array>()
        .unwrap();
    let fr = r
        .column_by_name("tcp_flags_resp")
        .unwrap()
        .as_any()
        .downcast_ref::<UInt8Array>()
        .unwrap();
    assert_eq!(fo.value(0), SYN | ACK | PSH | FIN);
    assert_eq!(fr.value(0), SYN | ACK | PSH | FIN);
    assert_eq!(col_str(r, "end_reason", 0), "fin");
    // From the Community ID spec README (default seed).
    assert_eq!(
        col_str(r, "community_id", 0),
        "1:wCb3OG7yAFWelaUydu0D+125CLM="
    );
    let ts = r
        .column_by_name("ts")
        .unwrap()
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .unwrap();
    assert_eq!(ts.value(0), T0);
    let dur = r
        .column_by_name("duration")
        .unwrap()
        .as_any()
        .downcast_ref::<Decimal128Array>()
        .unwrap();
    assert_eq!(dur.value_as_string(0), "0.007000");
    let md = r.schema().metadata().clone();
    assert_eq!(md.get("silt.time_column").map(String::as_str), Some("ts"));
    assert_eq!(md.get("silt.table").map(String::as_str), Some("pcap.flow"));
    assert_eq!(
        md.get("silt.lookup_columns").map(String::as_str),
        Some("community_id,src,dst")
    );
}

#[test]
fn fin_flow_emitted_after_linger_and_port_reuse() {
    let (a, b) = ("10.0.0.1", "10.0.0.2");
    let cfg = FlowConfig {
        batch_rows: 1,
        ..Default::default()
    };
    let mut t = FlowTracker::new(cfg);
    t.packet(&pkt(T0, a, b, 6, 40000, 80, SYN, 0));
    t.packet(&pkt(T0 + S, a, b, 6, 40000, 80, FIN | ACK, 0));
    t.packet(&pkt(T0 + 2 * S, b, a, 6, 80, 40000, FIN | ACK, 0));
    assert!(t.take_batch().is_none(), "lingers after the second FIN");
    // A new SYN on the same 5-tuple during the linger starts a new flow.
    t.packet(&pkt(T0 + 3 * S, a, b, 6, 40000, 80, SYN, 0));
    let first = t.take_batch().expect("first flow ended by the new SYN");
    assert_eq!(first.num_rows(), 1);
    assert_eq!(col_str(&first, "end_reason", 0), "fin");
    assert_eq!(col_u64(&first, "orig_pkts", 0), 2);
    // RST ends the second flow once 5 s of packet time pass.
    t.packet(&pkt(T0 + 4 * S, b, a, 6, 80, 40000, RST | ACK, 0));
    t.packet(&pkt(T0 + 8 * S, "9.9.9.9", "8.8.8.8", 17, 1, 53, 0, 10));
    assert!(t.take_batch().is_none());
    t.packet(&pkt(T0 + 10 * S, "9.9.9.9", "8.8.8.8", 17, 1, 53, 0, 10));
    let second = t.take_batch().expect("rst flow ended after linger");
    assert_eq!(col_str(&second, "end_reason", 0), "rst");
    assert_eq!(col_u64(&second, "orig_pkts", 0), 1);
    assert_eq!(col_u64(&second, "resp_pkts", 0), 1);
    let rest = t.finish().unwrap();
    assert_eq!(rest.num_rows(), 1);
    assert_eq!(col_str(&rest, "end_reason", 0), "eof");
    assert_eq!(col_u64(&rest, "orig_pkts", 0), 2);
}

#[test]
fn idle_and_active_timeouts() {
    let cfg = FlowConfig {
        idle_timeout_us: 60 * S,
        active_timeout_us: 1800 * S,
        batch_rows: 1,
        ..Default::default()
    };
    let mut t = FlowTracker::new(cfg);
    // UDP: two packets 59 s apart = one flow; then 61 s silence = a new flow.
    t.packet(&pkt(T0, "10.1.1.1", "10.2.2.2", 17, 5000, 53, 0, 20));
    t.packet(&pkt(
        T0 + 59 * S,
        "10.2.2.2",
        "10.1.1.1",
        17,
        53,
        5000,
        0,
        80,
    ));
    t.packet(&pkt(
        T0 + 120 * S,
        "10.1.1.1",
        "10.2.2.2",
        17,
        5000,
        53,
        0,
        20,
    ));
    let b = t.take_batch().expect("idle flow");
    assert_eq!(col_str(&b, "end_reason", 0), "idle");
    assert_eq!(
        (col_u64(&b, "orig_pkts", 0), col_u64(&b, "resp_pkts", 0)),
        (1, 1)
    );
    // Active: one packet every 50 s for 40 minutes (49 packets) on a single TCP flow.
    let mut t = FlowTracker::new(FlowConfig {
        batch_rows: 1000,
        ..Default::default()
    });
    for i in 0..49 {
        t.packet(&pkt(
            T0 + i * 50 * S,
            "10.1.1.1",
            "10.2.2.2",
            6,
            5000,
            22,
            ACK,
            10,
        ));
    }
    let rows = all_rows(&mut t);
    let b = &rows[0];
    assert_eq!(b.num_rows(), 2);
    assert_eq!(col_str(b, "end_reason", 0), "active");
    assert_eq!(col_str(b, "end_reason", 1), "eof");
    // 1800 s / 50 s = 36: packets 0..=35 are younger than 30 min, packet 36 starts flow 2.
    assert_eq!(col_u64(b, "orig_pkts", 0), 36);
    assert_eq!(col_u64(b, "orig_pkts", 1), 13);
    assert_eq!(col_str(b, "community_id", 0), col_str(b, "community_id", 1));
}

#[test]
fn idle_expiry_is_driven_by_other_traffic() {
    // The TCP flow (idle 300 s) must be expired by the clock of unrelated packets.
    let mut t = FlowTracker::new(FlowConfig {
        batch_rows: 1,
        ..Default::default()
    });
    t.packet(&pkt(T0, "10.0.0.1", "10.0.0.2", 6, 1000, 443, ACK, 0));
    t.packet(&pkt(T0 + 299 * S, "10.0.0.1", "10.0.0.3", 17, 1, 2, 0, 0));
    assert!(t.take_batch().is_none());
    t.packet(&pkt(T0 + 301 * S, "10.0.0.1", "10.0.0.3", 17, 1, 2, 0, 0));
    let b = t.take_batch().unwrap();
    assert_eq!(col_str(&b, "end_reason", 0), "idle");
    assert_eq!(col_str(&b, "dst", 0), "10.0.0.2");
}

#[test]
fn synack_first_is_flipped_and_icmp_echo_pairs() {
    let mut t = FlowTracker::new(FlowConfig::default());
    t.packet(&pkt(T0, "5.6.7.8", "1.2.3.4", 6, 3344, 1122, SYN | ACK, 0));
    t.packet(&pkt(T0 + 1, "1.2.3.4", "5.6.7.8", 6, 1122, 3344, ACK, 0));
    t.packet(&pkt(T0 + 2, "1.2.3.4", "5.6.7.8", 1, 8, 0, 0, 56));
    t.packet(&pkt(T0 + 3, "5.6.7.8", "1.2.3.4", 1, 0, 0, 0, 56));
    t.packet(&pkt(T0 + 4, "1.2.3.4", "5.6.7.8", 1, 11, 0, 0, 0)); // one-way: own flow
    let b = t.finish().unwrap();
    assert_eq!(b.num_rows(), 3);
    assert_eq!(col_str(&b, "src", 0), "1.2.3.4");
    assert_eq!(col_u64(&b, "orig_pkts", 0), 1);
    assert_eq!(col_u64(&b, "resp_pkts", 0), 1);
    let sport = b
        .column_by_name("sport")
        .unwrap()
        .as_any()
        .downcast_ref::<UInt16Array>()
        .unwrap();
    assert_eq!(sport.value(0), 1122);
    assert_eq!(
        col_str(&b, "community_id", 1),
        "1:crodRHL2FEsHjbv3UkRrfbs4bZ0="
    );
    assert_eq!(
        (col_u64(&b, "orig_pkts", 1), col_u64(&b, "resp_pkts", 1)),
        (1, 1)
    );
    assert_eq!(sport.value(1), 8);
    assert_eq!(
        col_str(&b, "community_id", 2),
        "1:f/YiSyWqczrTgfUCZlBUnvHRcPk="
    );
    assert!(b.column_by_name("tcp_flags_orig").unwrap().is_null(1));
}

#[test]
fn vlan_ipv6_and_portless() {
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut p = pkt(T0, "fe80::1", "fe80::2", 17, 1, 2, 0, 0);
    t.packet(&p);
    p.vlan_outer = Some(100);
    t.packet(&p);
    p.vlan_inner = Some(7);
    t.packet(&p);
    std::mem::swap(&mut p.src, &mut p.dst);
    std::mem::swap(&mut p.sport, &mut p.dport);
    t.packet(&p); // reverse direction of the QinQ flow
    let mut q = pkt(T0 + 1, "1.2.3.4", "5.6.7.8", 46, 0, 0, 0, 0);
    q.has_ports = false;
    t.packet(&q);
    let b = t.finish().unwrap();
    assert_eq!(b.num_rows(), 4);
    let vlan = b
        .column_by_name("vlan")
        .unwrap()
        .as_any()
        .downcast_ref::<StructArray>()
        .unwrap();
    let outer = vlan.column(0).as_primitive::<UInt16Type>();
    let inner = vlan.column(1).as_primitive::<UInt16Type>();
    assert!(outer.is_null(0) && inner.is_null(0));
    assert_eq!((outer.value(1), inner.is_null(1)), (100, true));
    assert_eq!((outer.value(2), inner.value(2)), (100, 7));
    assert_eq!(
        (col_u64(&b, "orig_pkts", 2), col_u64(&b, "resp_pkts", 2)),
        (1, 1)
    );
    assert!(b.column_by_name("sport").unwrap().is_null(3));
    assert_eq!(
        col_str(&b, "community_id", 3),
        "1:ikv3kmf89luf73WPz1jOs49S768="
    );
}

#[test]
fn batches_and_bounded_memory_under_churn() {
    // 200,000 short UDP flows, one new flow every 1 ms, each with 2 packets, idle 1 s:
    // about 1,000 flows are live at any time, so memory must stay near that, not grow with N.
    let cfg = FlowConfig {
        idle_timeout_us: S,
        batch_rows: 4096,
        ..Default::default()
    };
    let mut t = FlowTracker::new(cfg);
    let n: i64 = 200_000;
    let mut rows = 0usize;
    let mut max_live = 0;
    for i in 0..n {
        let src = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        let ts = T0 + i * 1000;
        t.packet(&pkt(ts, &src, "192.0.2.1", 17, 40000, 53, 0, 30));
        t.packet(&pkt(ts + 10, "192.0.2.1", &src, 17, 53, 40000, 0, 90));
        while let Some(b) = t.take_batch() {
            assert!(b.num_rows() >= 4096);
            rows += b.num_rows();
        }
        max_live = max_live.max(t.live_flows());
        assert!(t.pending_rows() < 4096 + 2);
    }
    let (slab, queued) = t.footprint();
    assert!(max_live <= 1002, "live flows {max_live}");
    assert!(slab <= 4096, "slab capacity {slab}");
    assert!(queued <= 4096, "timer entries {queued}");
    rows += t.finish().map_or(0, |b| b.num_rows());
    assert_eq!(rows, n as usize);
}

#[test]
fn unordered_timestamps_keep_duration_non_negative() {
    let mut t = FlowTracker::new(FlowConfig::default());
    t.packet(&pkt(T0 + 5 * S, "10.0.0.1", "10.0.0.2", 17, 1, 2, 0, 0));
    t.packet(&pkt(T0 + 2 * S, "10.0.0.2", "10.0.0.1", 17, 2, 1, 0, 0));
    let b = t.finish().unwrap();
    let dur = b
        .column_by_name("duration")
        .unwrap()
        .as_any()
        .downcast_ref::<Decimal128Array>()
        .unwrap();
    assert_eq!(dur.value_as_string(0), "3.000000");
    assert_eq!(
        b.schema()
            .field_with_name("orig_bytes")
            .unwrap()
            .data_type(),
        &arrow::datatypes::DataType::Int64,
        "counters are BIGINT for Spark"
    );
}
