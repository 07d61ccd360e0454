//! Test helpers: locate the corpus and tshark, read classic pcap captures with `pcap-parser`,
//! take each frame's UDP payload with `etherparse`, feed a `Collector`, read columns back.
#![allow(dead_code)]

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow::array::Array;
use arrow::record_batch::RecordBatch;
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use silt_core::{CollectEmit, SourceInfo};
use silt_flowexport::{Collector, Datagram, FlowExportOptions, Protocol};

/// A datagram with its payload owned.
#[derive(Debug, Clone)]
pub struct Owned {
    pub frame: u64,
    pub received_us: i64,
    pub exporter: IpAddr,
    pub exporter_port: u16,
    pub collector_port: u16,
    pub payload: Vec<u8>,
}

impl Owned {
    pub fn datagram(&self) -> Datagram<'_> {
        Datagram {
            frame: self.frame,
            received_us: self.received_us,
            exporter: self.exporter,
            exporter_port: self.exporter_port,
            collector_port: self.collector_port,
            payload: &self.payload,
        }
    }
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `<corpus>/flows/akvorado`, or `None` after a skip message (silt-testkit's rule: a failure
/// under `CI=true`).
pub fn corpus() -> Option<PathBuf> {
    silt_testkit::corpus_path("flows/akvorado")
}

/// Whether tshark and mergecap run; prints a skip message otherwise (panics when CI=true).
pub fn tshark_available() -> bool {
    let ok = |c: &str| {
        Command::new(c)
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ok("tshark") && ok("mergecap") {
        return true;
    }
    assert!(!ci(), "CI=true but tshark/mergecap is not installed");
    eprintln!("SKIP: tshark or mergecap not installed");
    false
}

/// Every UDP datagram of a classic pcap (Ethernet) capture; frames numbered from `first`.
pub fn read_pcap(path: &Path, first: u64) -> Vec<Owned> {
    let data = std::fs::read(path).expect("read capture");
    let (_, cap) = pcap_parser::parse_pcap(&data).expect("classic pcap");
    let mut v = Vec::new();
    for (i, b) in cap.blocks.iter().enumerate() {
        let frame = first + i as u64;
        let Ok(p) = SlicedPacket::from_ethernet(b.data) else {
            continue;
        };
        let exporter: IpAddr = match &p.net {
            Some(NetSlice::Ipv4(ip)) => ip.header().source_addr().into(),
            Some(NetSlice::Ipv6(ip)) => ip.header().source_addr().into(),
            _ => continue,
        };
        let Some(TransportSlice::Udp(u)) = &p.transport else {
            continue;
        };
        v.push(Owned {
            frame,
            received_us: i64::from(b.ts_sec) * 1_000_000 + i64::from(b.ts_usec),
            exporter,
            exporter_port: u.source_port(),
            collector_port: u.destination_port(),
            payload: u.payload().to_vec(),
        });
    }
    v
}

/// Feeds `files` (in order, frames numbered across them) through one collector.
pub fn collect(protocol: Protocol, files: &[PathBuf]) -> (CollectEmit, Collector, Vec<Owned>) {
    let mut c = Collector::new(
        protocol,
        &SourceInfo {
            display: "test".into(),
            file_name: None,
        },
        FlowExportOptions::default(),
    );
    let mut out = CollectEmit::default();
    let mut all = Vec::new();
    for f in files {
        let ds = read_pcap(f, all.len() as u64 + 1);
        for d in &ds {
            c.datagram(&d.datagram(), &mut out).expect("emit");
        }
        all.extend(ds);
    }
    c.finish(&mut out).expect("finish");
    (out, c, all)
}

/// Batches of a table.
pub fn batches<'a>(out: &'a CollectEmit, table: &str) -> Vec<&'a RecordBatch> {
    out.batches
        .iter()
        .filter(|(t, _)| t.to_string() == table)
        .flat_map(|(_, b)| b.iter())
        .collect()
}

/// One column of a table as display strings (`None` for null), over all batches.
pub fn col(out: &CollectEmit, table: &str, name: &str) -> Vec<Option<String>> {
    let mut v = Vec::new();
    for b in batches(out, table) {
        let a = b
            .column_by_name(name)
            .unwrap_or_else(|| panic!("column {name}"));
        for i in 0..a.len() {
            v.push(if a.is_null(i) {
                None
            } else {
                Some(arrow::util::display::array_value_to_string(a, i).expect("display"))
            });
        }
    }
    v
}

/// Non-null values of a column.
pub fn vals(out: &CollectEmit, table: &str, name: &str) -> Vec<String> {
    col(out, table, name).into_iter().flatten().collect()
}

/// A timestamp column as µs since the epoch (`None` for null).
pub fn ts_values(out: &CollectEmit, table: &str, name: &str) -> Vec<Option<i64>> {
    use arrow::array::TimestampMicrosecondArray;
    let mut v = Vec::new();
    for b in batches(out, table) {
        let a = b
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
            .unwrap_or_else(|| panic!("timestamp column {name}"));
        v.extend(a.iter());
    }
    v
}
