//! Flow export received live (`silt serve --sflow udp://… --netflow udp://…`): the datagrams a
//! socket received, framed one after another so a write-ahead log entry can hold many, and the
//! `sflow-datagrams` / `netflow-datagrams` formats that decode such an entry with a
//! [`Collector`].
//!
//! A record is `len: u32 BE` (the bytes after it), `received_us: i64 BE`, `family: u8` (4 or 6),
//! the exporter's address (4 or 16 bytes), `exporter_port: u16 BE`, `collector_port: u16 BE`, then
//! the UDP payload. Each record's number in the entry is the reject's line. A record that does
//! not frame (a length past the end, a bad family) ends the entry with one reject holding the rest
//! (it cannot be resynchronised); that only happens to a damaged log.
//!
//! NetFlow v9/IPFIX templates live in [`crate::CaptureOptions::templates`], which the server
//! keeps for its lifetime, so data in one entry uses templates from earlier ones (as a collector
//! process does; after a restart, until the exporter sends its templates again, data sets are
//! counted as unknown-template, as with every collector). Touches nothing but its input and `out`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use silt_core::format::{Confidence, FormatOptions, FormatSpec, Probe};
use silt_core::{Decoder, Emit, Reject, SourceInfo};

use crate::{
    netflow_flow_table, sflow_sample_table, CaptureOptions, Collector, Datagram, FlowExportOptions,
    Protocol,
};

/// Appends one received datagram to `out` in the framing above.
pub fn encode(out: &mut Vec<u8>, received_us: i64, from: SocketAddr, to_port: u16, payload: &[u8]) {
    let addr: Vec<u8> = match from.ip() {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let len = 8 + 1 + addr.len() + 2 + 2 + payload.len();
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&received_us.to_be_bytes());
    out.push(if addr.len() == 4 { 4 } else { 6 });
    out.extend_from_slice(&addr);
    out.extend_from_slice(&from.port().to_be_bytes());
    out.extend_from_slice(&to_port.to_be_bytes());
    out.extend_from_slice(payload);
}

/// `sflow-datagrams`: sFlow v5 datagrams as `silt serve --sflow` logs them.
pub static SFLOW_DATAGRAMS_FORMAT: FormatSpec = FormatSpec {
    name: "sflow-datagrams",
    aliases: &[],
    summary: "sFlow v5 datagrams as silt serve --sflow logs them (internal)",
    extensions: &[],
    sniff: never,
    open: open_sflow,
    text_fields: false,
    text: false,
};

/// `netflow-datagrams`: NetFlow/IPFIX datagrams as `silt serve --netflow` logs them.
pub static NETFLOW_DATAGRAMS_FORMAT: FormatSpec = FormatSpec {
    name: "netflow-datagrams",
    aliases: &[],
    summary: "NetFlow v5/v9 and IPFIX datagrams as silt serve --netflow logs them (internal)",
    extensions: &[],
    sniff: never,
    open: open_netflow,
    text_fields: false,
    text: false,
};

fn never(_: &Probe<'_>) -> Option<Confidence> {
    None
}

fn open_sflow(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    Ok(Box::new(DatagramDecoder::new(
        Protocol::Sflow,
        opts,
        source,
    )))
}

fn open_netflow(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    Ok(Box::new(DatagramDecoder::new(
        Protocol::Netflow,
        opts,
        source,
    )))
}

/// The decoder of the datagram formats; see the module documentation.
pub struct DatagramDecoder {
    protocol: Protocol,
    collector: Collector,
    source: String,
    buf: Vec<u8>,
    record: u64,
    failed: bool,
}

impl DatagramDecoder {
    pub fn new(protocol: Protocol, opts: &FormatOptions, source: &SourceInfo) -> Self {
        let c: CaptureOptions = opts.get_or_default();
        let fo = FlowExportOptions {
            batch_rows: opts.read.batch_rows,
            community_id_seed: c.community_id_seed,
            ..FlowExportOptions::default()
        };
        Self {
            protocol,
            collector: Collector::new(protocol, source, fo).with_templates(c.templates.clone()),
            source: source.display.clone(),
            buf: Vec::new(),
            record: 0,
            failed: false,
        }
    }

    /// Decodes every whole record at the start of `self.buf`; keeps the unfinished rest.
    fn drain(&mut self, end: bool, out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut at = 0;
        while !self.failed {
            let rest = &self.buf[at..];
            if rest.len() < 4 {
                break;
            }
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let Some(rec) = rest.get(4..4 + len) else {
                if len > 1 << 20 {
                    self.fail(at, format!("a record claims {len} bytes"), out)?;
                }
                break;
            };
            self.record += 1;
            match parse(rec) {
                Some((received_us, exporter, collector_port, payload)) => {
                    self.collector.datagram(
                        &Datagram {
                            frame: self.record,
                            received_us,
                            exporter: exporter.ip(),
                            exporter_port: exporter.port(),
                            collector_port,
                            payload,
                        },
                        out,
                    )?;
                }
                None => {
                    self.fail(at, "a record whose header does not frame".into(), out)?;
                    break;
                }
            }
            at += 4 + len;
        }
        if self.failed {
            self.buf.clear();
        } else {
            self.buf.drain(..at);
            if end && !self.buf.is_empty() {
                self.record += 1;
                let rest = std::mem::take(&mut self.buf);
                self.reject(
                    format!("the entry ends {} bytes into a record", rest.len()),
                    rest,
                    out,
                )?;
            }
        }
        Ok(())
    }

    fn fail(&mut self, at: usize, why: String, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.failed = true;
        let raw = self.buf[at..].to_vec();
        self.record += 1;
        self.reject(format!("{why}: the rest of the entry is skipped"), raw, out)
    }

    fn reject(
        &mut self,
        reason: String,
        mut raw: Vec<u8>,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        raw.truncate(crate::REJECT_RAW_BYTES);
        out.reject(Reject {
            source: self.source.clone(),
            line: self.record,
            reason,
            raw,
            table: Some(match self.protocol {
                Protocol::Sflow => sflow_sample_table(),
                Protocol::Netflow => netflow_flow_table(),
            }),
        })
    }
}

/// `(received_us, exporter, collector_port, payload)` of one record.
fn parse(rec: &[u8]) -> Option<(i64, SocketAddr, u16, &[u8])> {
    let received = i64::from_be_bytes(rec.get(..8)?.try_into().ok()?);
    let (ip, rest): (IpAddr, &[u8]) = match *rec.get(8)? {
        4 => {
            let a: [u8; 4] = rec.get(9..13)?.try_into().ok()?;
            (IpAddr::V4(Ipv4Addr::from(a)), rec.get(13..)?)
        }
        6 => {
            let a: [u8; 16] = rec.get(9..25)?.try_into().ok()?;
            (IpAddr::V6(Ipv6Addr::from(a)), rec.get(25..)?)
        }
        _ => return None,
    };
    let sport = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
    let dport = u16::from_be_bytes(rest.get(2..4)?.try_into().ok()?);
    Some((received, SocketAddr::new(ip, sport), dport, rest.get(4..)?))
}

impl Decoder for DatagramDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        if !self.failed {
            self.buf.extend_from_slice(bytes);
            self.drain(false, out)?;
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.collector.flush(out)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.drain(true, out)?;
        self.collector.finish(out)?;
        for line in self.collector.report() {
            out.note(format!("{}: {line}", self.source));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use silt_core::CollectEmit;

    fn v5(n: u16) -> Vec<u8> {
        let mut d = Vec::new();
        for v in [5u16, n] {
            d.extend(v.to_be_bytes());
        }
        for v in [3_600_000u32, 1_700_000_000, 0, 1] {
            d.extend(v.to_be_bytes());
        }
        d.extend([0, 0, 0, 0]);
        for i in 0..n {
            d.extend([10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 0, 0]);
            d.extend([0, 1, 0, 2]);
            for v in [10u32 + u32::from(i), 1000, 1000, 2000] {
                d.extend(v.to_be_bytes());
            }
            d.extend([0x9c, 0x40, 0, 53, 0, 0x18, 17, 0, 0, 0, 0, 0, 24, 24, 0, 0]);
        }
        d
    }

    #[test]
    fn records_round_trip_in_any_pieces_and_a_torn_tail_is_a_reject() {
        let from: SocketAddr = "192.0.2.7:5000".parse().unwrap();
        let mut body = Vec::new();
        encode(&mut body, 1_700_000_000_000_000, from, 2055, &v5(2));
        encode(
            &mut body,
            1_700_000_000_000_001,
            "[2001:db8::1]:9".parse().unwrap(),
            2055,
            &v5(1),
        );
        encode(&mut body, 1_700_000_000_000_002, from, 2055, b"not netflow");
        let opts = FormatOptions::new(silt_core::ReadOptions::default());
        let src = SourceInfo::stdin();
        for piece in [1, 7, body.len()] {
            let mut d = DatagramDecoder::new(Protocol::Netflow, &opts, &src);
            let mut out = CollectEmit::default();
            for c in body.chunks(piece) {
                d.feed(c, &mut out).unwrap();
            }
            d.finish(&mut out).unwrap();
            assert_eq!(out.rows("netflow.flow"), 3, "pieces of {piece}");
            assert_eq!(out.rejects.len(), 1, "{:?}", out.rejects);
            assert_eq!(out.rejects[0].line, 3);
        }
        let mut torn = body.clone();
        torn.truncate(body.len() - 3);
        let mut d = DatagramDecoder::new(Protocol::Netflow, &opts, &src);
        let mut out = CollectEmit::default();
        d.feed(&torn, &mut out).unwrap();
        d.finish(&mut out).unwrap();
        assert_eq!(out.rows("netflow.flow"), 3);
        assert!(out.rejects[0].reason.contains("ends"), "{:?}", out.rejects);
    }
}
