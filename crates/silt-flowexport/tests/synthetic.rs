//! Hand-built datagrams for what the corpus lacks: sFlow counter samples (checked against
//! tshark on a generated capture when tshark is installed), IPFIX enterprise and
//! variable-length fields, template withdrawal, invalid templates, held-data bounds, sequence
//! gaps, rejects for malformed datagrams, batch sizes.

mod common;

use std::net::IpAddr;
use std::process::Command;

use silt_core::{CollectEmit, SourceInfo};
use silt_flowexport::{Collector, Datagram, FlowExportOptions, Protocol};

fn be32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_be_bytes());
}
fn be16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_be_bytes());
}
fn be64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_be_bytes());
}

const EXPORTER: [u8; 4] = [192, 0, 2, 7];

fn collector(p: Protocol, opts: FlowExportOptions) -> Collector {
    Collector::new(
        p,
        &SourceInfo {
            display: "synthetic".into(),
            file_name: None,
        },
        opts,
    )
}

fn feed(c: &mut Collector, out: &mut CollectEmit, frame: u64, payload: &[u8]) {
    let d = Datagram {
        frame,
        received_us: 1_700_000_000_000_000 + frame as i64,
        exporter: IpAddr::from(EXPORTER),
        exporter_port: 50000,
        collector_port: 6343,
        payload,
    };
    c.datagram(&d, out).expect("emit");
}

/// sFlow v5 datagram from agent 10.0.0.1 with the given (tag, body) samples.
fn sflow(seq: u32, samples: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::new();
    for x in [5, 1] {
        be32(&mut v, x);
    }
    v.extend_from_slice(&[10, 0, 0, 1]);
    for x in [7, seq, 123_456, samples.len() as u32] {
        be32(&mut v, x);
    }
    for (tag, body) in samples {
        be32(&mut v, *tag);
        be32(&mut v, body.len() as u32);
        v.extend_from_slice(body);
    }
    v
}

fn counter_sample() -> Vec<u8> {
    let mut generic = Vec::new();
    for x in [5u32, 6] {
        be32(&mut generic, x);
    }
    be64(&mut generic, 1_000_000_000);
    for x in [1u32, 3] {
        be32(&mut generic, x);
    }
    be64(&mut generic, 123_456_789_012);
    for x in [100u32, 2, 3, 4, 5, 6] {
        be32(&mut generic, x);
    }
    be64(&mut generic, 987_654_321_098);
    for x in [200u32, 7, 8, 9, 10, 1] {
        be32(&mut generic, x);
    }
    assert_eq!(generic.len(), 88);
    let mut eth = Vec::new();
    for x in 1..=13u32 {
        be32(&mut eth, x * 11);
    }
    let mut body = Vec::new();
    for x in [42u32, 5, 3] {
        be32(&mut body, x);
    }
    for (tag, rec) in [(1u32, generic), (2, eth), (1001, vec![0u8; 28])] {
        be32(&mut body, tag);
        be32(&mut body, rec.len() as u32);
        body.extend_from_slice(&rec);
    }
    body
}

#[test]
fn sflow_counter_sample_columns() {
    let mut c = collector(Protocol::Sflow, FlowExportOptions::default());
    let mut out = CollectEmit::default();
    feed(&mut c, &mut out, 1, &sflow(9, &[(2, counter_sample())]));
    c.finish(&mut out).unwrap();
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let t = "sflow.counter";
    assert_eq!(out.rows(t), 1);
    let get = |col: &str| common::col(&out, t, col)[0].clone().unwrap_or_default();
    for (col, v) in [
        ("agent", "10.0.0.1"),
        ("exporter", "192.0.2.7"),
        ("sub_agent", "7"),
        ("datagram_seq", "9"),
        ("sample_seq", "42"),
        ("source_id_index", "5"),
        ("if_index", "5"),
        ("if_type", "6"),
        ("if_speed", "1000000000"),
        ("if_direction", "1"),
        ("if_admin_up", "true"),
        ("if_oper_up", "true"),
        ("in_octets", "123456789012"),
        ("in_ucast_pkts", "100"),
        ("in_unknown_protos", "6"),
        ("out_octets", "987654321098"),
        ("out_errors", "10"),
        ("promiscuous", "1"),
        ("eth_alignment_errors", "11"),
        ("eth_symbol_errors", "143"),
        (
            "other_records",
            "[{enterprise: 0, format: 1001, length: 28}]",
        ),
    ] {
        assert_eq!(get(col), v, "{col}");
    }
    assert_eq!(c.stats().sflow_unknown_counter_records, 1);
}

/// Writes a one-frame classic pcap: Ethernet/IPv4/UDP to port 6343 carrying `payload`.
fn write_pcap(path: &std::path::Path, payload: &[u8]) {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(EXPORTER, [192, 0, 2, 8], 64)
        .udp(50000, 6343);
    let mut frame = Vec::new();
    b.write(&mut frame, payload).expect("build frame");
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    for x in [0u32, 0, 65535, 1] {
        f.extend_from_slice(&x.to_le_bytes());
    }
    for x in [1_700_000_000u32, 0, frame.len() as u32, frame.len() as u32] {
        f.extend_from_slice(&x.to_le_bytes());
    }
    f.extend_from_slice(&frame);
    std::fs::write(path, f).expect("write pcap");
}

#[test]
fn sflow_counter_sample_matches_tshark() {
    if !common::tshark_available() {
        return;
    }
    let payload = sflow(9, &[(2, counter_sample())]);
    let path = std::env::temp_dir().join(format!(
        "silt-flowexport-counter-{}.pcap",
        std::process::id()
    ));
    write_pcap(&path, &payload);
    // The helper that reads the corpus reads this capture too.
    let (out, _, _) = common::collect(Protocol::Sflow, std::slice::from_ref(&path));
    let fields = [
        ("sflow_245.ifindex", "if_index"),
        ("sflow_245.iftype", "if_type"),
        ("sflow_245.ifspeed", "if_speed"),
        ("sflow_245.ifdirection", "if_direction"),
        ("sflow_245.ifinoct", "in_octets"),
        ("sflow_245.ifinpkt", "in_ucast_pkts"),
        ("sflow_245.ifinmcast", "in_multicast_pkts"),
        ("sflow_245.ifinbcast", "in_broadcast_pkts"),
        ("sflow_245.ifindisc", "in_discards"),
        ("sflow_245.ifinerr", "in_errors"),
        ("sflow_245.ifinunk", "in_unknown_protos"),
        ("sflow_245.ifoutoct", "out_octets"),
        ("sflow_245.ifoutpkt", "out_ucast_pkts"),
        ("sflow_245.ifoutmcast", "out_multicast_pkts"),
        ("sflow_245.ifoutbcast", "out_broadcast_pkts"),
        ("sflow_245.ifoutdisc", "out_discards"),
        ("sflow_245.ifouterr", "out_errors"),
        ("sflow_245.ifpromisc", "promiscuous"),
        ("sflow.counters_sample.sequence_number", "sample_seq"),
        ("sflow_245.sequence_number", "datagram_seq"),
        ("sflow_245.sub_agent_id", "sub_agent"),
    ];
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(&path).args(["-T", "fields"]);
    for (f, _) in &fields {
        cmd.arg("-e").arg(f);
    }
    let o = cmd.output().expect("tshark");
    let line = String::from_utf8_lossy(&o.stdout).to_string();
    let theirs: Vec<&str> = line.trim_end_matches('\n').split('\t').collect();
    assert_eq!(theirs.len(), fields.len(), "{line}");
    for ((f, col), t) in fields.iter().zip(theirs) {
        let mine = common::col(&out, "sflow.counter", col)[0]
            .clone()
            .unwrap_or_default();
        assert_eq!(mine, t, "{f} vs {col}");
    }
    let _ = std::fs::remove_file(&path);
}

/// IPFIX message with the given sets (id, body).
fn ipfix(seq: u32, domain: u32, sets: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (id, b) in sets {
        be16(&mut body, *id);
        be16(&mut body, (b.len() + 4) as u16);
        body.extend_from_slice(b);
    }
    let mut v = Vec::new();
    be16(&mut v, 10);
    be16(&mut v, (body.len() + 16) as u16);
    for x in [1_700_000_000u32, seq, domain] {
        be32(&mut v, x);
    }
    v.extend(body);
    v
}

/// Template 300: src v4 (8), dst v4 (12), octets (1, 4 bytes), an enterprise field
/// (PEN 9, id 5, variable length), flowEndSeconds (151).
fn tpl300() -> Vec<u8> {
    let mut t = Vec::new();
    for x in [300u16, 5, 8, 4, 12, 4, 1, 4, 0x8005, 0xffff] {
        be16(&mut t, x);
    }
    be32(&mut t, 9);
    for x in [151u16, 4] {
        be16(&mut t, x);
    }
    t
}

fn rec300(last: u8, text: &[u8]) -> Vec<u8> {
    let mut r = vec![10, 0, 0, last, 10, 0, 1, last];
    be32(&mut r, 1000 + u32::from(last));
    r.push(text.len() as u8);
    r.extend_from_slice(text);
    be32(&mut r, 1_700_000_100);
    r
}

#[test]
fn ipfix_enterprise_variable_length_and_withdrawal() {
    let mut c = collector(Protocol::Netflow, FlowExportOptions::default());
    let mut out = CollectEmit::default();
    let mut data = rec300(1, b"hello");
    data.extend(rec300(2, b""));
    feed(
        &mut c,
        &mut out,
        1,
        &ipfix(0, 5, &[(2, tpl300()), (300, data.clone())]),
    );
    // Withdraw template 300, then data for it is held and finally dropped.
    let mut w = Vec::new();
    for x in [300u16, 0] {
        be16(&mut w, x);
    }
    feed(&mut c, &mut out, 2, &ipfix(2, 5, &[(2, w)]));
    feed(&mut c, &mut out, 3, &ipfix(2, 5, &[(300, data)]));
    c.finish(&mut out).unwrap();
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let t = "netflow.flow";
    assert_eq!(out.rows(t), 2);
    assert_eq!(common::vals(&out, t, "src"), ["10.0.0.1", "10.0.0.2"]);
    assert_eq!(common::vals(&out, t, "bytes"), ["1001", "1002"]);
    assert_eq!(
        common::vals(&out, t, "flow_end"),
        ["2023-11-14T22:15:00Z"; 2]
    );
    let extra = common::vals(&out, t, "extra");
    assert_eq!(extra[0], "[{enterprise: 9, field: 5, value: 68656c6c6f}]");
    assert_eq!(extra[1], "[{enterprise: 9, field: 5, value: }]");
    let st = c.stats();
    assert_eq!(st.templates_withdrawn, 1);
    assert_eq!(st.unknown_template_sets, 1);
    assert_eq!(st.sequence_gaps(), 0, "{:?}", st.sequences);
}

#[test]
fn held_data_is_bounded_and_counted() {
    let opts = FlowExportOptions {
        max_held_sets_per_key: 2,
        ..FlowExportOptions::default()
    };
    let mut c = collector(Protocol::Netflow, opts);
    let mut out = CollectEmit::default();
    for i in 0..5u8 {
        feed(
            &mut c,
            &mut out,
            u64::from(i) + 1,
            &ipfix(0, 5, &[(300, rec300(i, b"x"))]),
        );
    }
    assert_eq!(c.held().0, 2);
    feed(&mut c, &mut out, 6, &ipfix(0, 5, &[(2, tpl300())]));
    c.finish(&mut out).unwrap();
    let st = c.stats();
    assert_eq!((st.held_sets, st.held_evicted, st.held_decoded), (5, 3, 2));
    assert_eq!(st.unknown_template_sets, 3);
    // Only the last two survive, with their own frame numbers.
    assert_eq!(
        common::vals(&out, "netflow.flow", "src"),
        ["10.0.0.3", "10.0.0.4"]
    );
    assert_eq!(common::vals(&out, "netflow.flow", "frame"), ["4", "5"]);
    let r = c.report().join("\n");
    assert!(
        r.contains(
            "unknown template 300 from 192.0.2.7 (version 10, domain 5): 3 data sets dropped"
        ),
        "{r}"
    );
}

#[test]
fn sequence_gaps_are_counted() {
    let mut c = collector(Protocol::Netflow, FlowExportOptions::default());
    let mut out = CollectEmit::default();
    feed(
        &mut c,
        &mut out,
        1,
        &ipfix(0, 5, &[(2, tpl300()), (300, rec300(1, b""))]),
    );
    feed(&mut c, &mut out, 2, &ipfix(1, 5, &[(300, rec300(2, b""))]));
    feed(&mut c, &mut out, 3, &ipfix(6, 5, &[(300, rec300(3, b""))]));
    let mut s = collector(Protocol::Sflow, FlowExportOptions::default());
    for (f, seq) in [(1, 1), (2, 2), (3, 10)] {
        feed(&mut s, &mut out, f, &sflow(seq, &[]));
    }
    let t = &c.stats().sequences["ipfix 192.0.2.7 domain 5"];
    assert_eq!((t.gaps, t.missing), (1, 4));
    let t = &s.stats().sequences["sflow 10.0.0.1 sub-agent 7"];
    assert_eq!((t.gaps, t.missing), (1, 7));
    assert!(s.report().iter().any(|l| l.contains("1 gaps (7 missing)")));
}

#[test]
fn malformed_datagrams_become_rejects_with_offsets() {
    let mut c = collector(Protocol::Netflow, FlowExportOptions::default());
    let mut out = CollectEmit::default();
    // Template announcing 60000 fields in a short set.
    let mut huge = Vec::new();
    for x in [301u16, 60000, 8, 4] {
        be16(&mut huge, x);
    }
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![0, 7, 0, 1], "unsupported NetFlow version 7"),
        (vec![0, 9, 0], "truncated"),
        (ipfix(0, 1, &[(2, huge)]), "truncated field id"),
        (
            {
                let mut v = ipfix(0, 1, &[]);
                v.extend_from_slice(&[1, 44, 0, 2]);
                v[3] = 20;
                v
            },
            "length 2 < 4",
        ),
        (
            {
                let mut v = ipfix(0, 1, &[]);
                v[2] = 0x10;
                v
            },
            "IPFIX message",
        ),
        (
            {
                let mut v = Vec::new();
                for x in [5u16, 2] {
                    be16(&mut v, x);
                }
                v.extend_from_slice(&[0; 20]);
                v.extend_from_slice(&[0; 48]);
                v
            },
            "v5 header announces 2 records",
        ),
    ];
    for (i, (payload, want)) in cases.iter().enumerate() {
        feed(&mut c, &mut out, i as u64 + 1, payload);
        let r = out
            .rejects
            .last()
            .unwrap_or_else(|| panic!("case {i}: no reject"));
        assert_eq!(r.line, i as u64 + 1);
        assert!(r.reason.contains(want), "case {i}: {}", r.reason);
        assert!(r.reason.contains("at offset"), "case {i}: {}", r.reason);
        assert_eq!(&r.raw, payload);
        assert_eq!(
            r.table.as_ref().map(|t| t.to_string()).as_deref(),
            Some("netflow.flow")
        );
        assert_eq!(r.source, "synthetic");
    }
    assert_eq!(out.rejects.len(), cases.len());
    // A v9 template with no fields is ignored (and reported), not a reject.
    let mut v9 = Vec::new();
    for x in [9u16, 1] {
        be16(&mut v9, x);
    }
    for x in [0u32, 0, 0, 0] {
        be32(&mut v9, x);
    }
    for x in [0u16, 8, 400, 0] {
        be16(&mut v9, x);
    }
    feed(&mut c, &mut out, 99, &v9);
    assert_eq!(out.rejects.len(), cases.len());
    assert_eq!(c.stats().templates_invalid, 1);
    assert!(c
        .report()
        .iter()
        .any(|l| l.contains("template 400 from 192.0.2.7 has no fields")));

    let mut s = collector(Protocol::Sflow, FlowExportOptions::default());
    let mut bad = sflow(1, &[(2, counter_sample())]);
    bad.truncate(bad.len() - 10);
    feed(&mut s, &mut out, 7, &bad);
    let r = out.rejects.last().unwrap();
    assert_eq!(r.line, 7);
    assert!(
        r.reason.starts_with("sFlow: truncated sample"),
        "{}",
        r.reason
    );
    assert_eq!(
        r.table.as_ref().map(|t| t.to_string()).as_deref(),
        Some("sflow.sample")
    );
    feed(&mut s, &mut out, 8, &[0, 0, 0, 4]);
    assert!(out
        .rejects
        .last()
        .unwrap()
        .reason
        .contains("not sFlow v5: version 4 at offset 0"));
}

#[test]
fn batches_respect_batch_rows_and_schemas() {
    let Some(dir) = common::corpus() else {
        return;
    };
    let opts = FlowExportOptions {
        batch_rows: 10,
        ..FlowExportOptions::default()
    };
    let mut c = collector(Protocol::Netflow, opts);
    let mut out = CollectEmit::default();
    for d in common::read_pcap(&dir.join("netflow/nfv5.pcap"), 1) {
        c.datagram(&d.datagram(), &mut out).unwrap();
    }
    c.flush(&mut out).unwrap();
    let bs = common::batches(&out, "netflow.flow");
    assert_eq!(
        bs.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
        [10, 10, 9]
    );
    for b in bs {
        assert_eq!(b.schema(), silt_flowexport::netflow_flow_schema());
        assert_eq!(silt_core::meta::time_column(&b.schema()), Some("time"));
    }
    assert!(out.table_bytes.values().sum::<u64>() > 0);
    assert_eq!(
        silt_flowexport::sflow_sample_schema().metadata()["silt.table"],
        "sflow.sample"
    );
    assert_eq!(
        silt_flowexport::sflow_counter_schema().metadata()["silt.table"],
        "sflow.counter"
    );
}
