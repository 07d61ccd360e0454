//! Synthetic sFlow v5 export (`silt generate sflow`): what a few switches sampling the traffic of
//! [`crate::pcap`] would send to a collector, as a classic pcap of UDP datagrams to port 6343, for
//! tests and the RASP-style benchmarks (sFlow -> enrichment -> lake).
//!
//! Touches only the [`Write`] (or file) it is given.
//!
//! With [`SflowOptions::from`], the sampled packets are those of a real capture instead (for
//! real-derived benchmarks), in its order.
//!
//! Model: the packets of [`write_pcap`] (same mix: TCP/UDP/ICMP, IPv4/IPv6, VLAN, QinQ, VXLAN)
//! are the sampled packets, one flow sample each. [`SflowOptions::agents`] agents
//! (`10.255.0.1`, `10.255.0.2`, ...) share them by flow, each with its own datagram sequence,
//! sample sequence, sample pool (`sampling_rate` more per sample) and uptime; a sample carries a
//! raw packet header record (Ethernet, the frame's first 128 bytes, 4 bytes of FCS stripped) and
//! an extended switch record (the frame's VLAN, or 1). Every 20th datagram of an agent also
//! carries a counter sample (generic interface counters of one of its 48 ports). An agent sends
//! a datagram once it holds 6 samples or its oldest sample is 1 s old, so datagrams stay under a
//! 1500-byte MTU. The datagrams are written by hand (XDR is fixed-size big-endian words), as the
//! packets of `pcap.rs` are.
//!
//! Determinism: the same options give byte-identical output.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::Context;

use crate::pcap::{write_pcap, PcapOptions};

/// Settings of [`write_sflow`].
#[derive(Clone, Debug)]
pub struct SflowOptions {
    pub seed: u64,
    /// Flow samples in total.
    pub samples: u64,
    /// Switches exporting (default 4).
    pub agents: u8,
    /// 1-in-N packet sampling the samples claim (default 1000).
    pub sampling_rate: u32,
    /// Time of the first sample, UTC microseconds.
    pub start_micros: i64,
    /// Mean time between samples in microseconds (default 200, i.e. 5,000 samples/s in all).
    pub mean_gap_micros: u32,
    /// Sample the packets of this capture (classic pcap) instead of generated ones, up to
    /// `samples` of them.
    pub from: Option<std::path::PathBuf>,
}

impl Default for SflowOptions {
    fn default() -> Self {
        Self {
            seed: 1,
            samples: 100_000,
            agents: 4,
            sampling_rate: 1000,
            start_micros: crate::DEFAULT_START_MICROS,
            mean_gap_micros: 200,
            from: None,
        }
    }
}

/// What [`write_sflow`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SflowReport {
    pub datagrams: u64,
    pub flow_samples: u64,
    pub counter_samples: u64,
    /// Bytes written (the file size).
    pub bytes: u64,
}

/// Samples an agent holds before it sends a datagram.
const PER_DATAGRAM: usize = 6;
/// Bytes of a sampled frame kept in its raw header record.
const HEADER_BYTES: usize = 128;
const COLLECTOR: [u8; 4] = [10, 255, 255, 1];
const COLLECTOR_MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0x10, 0x63, 0x43];

struct Agent {
    ip: [u8; 4],
    datagram_seq: u32,
    sample_seq: u32,
    counter_seq: u32,
    pool: u32,
    /// Encoded flow samples waiting, and the time of the first.
    pending: Vec<Vec<u8>>,
    first_us: i64,
    /// Octets seen per port, for the counter samples.
    port_octets: [u64; 48],
    port_packets: [u32; 48],
}

/// Writes `opts.samples` flow samples as sFlow datagrams in a classic pcap to `path`.
pub fn generate_sflow(path: &Path, opts: &SflowOptions) -> anyhow::Result<SflowReport> {
    let mut f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let r = write_sflow(&mut f, opts).with_context(|| format!("writing {}", path.display()))?;
    f.sync_all().ok();
    Ok(r)
}

/// Streams the capture to `out`.
pub fn write_sflow(out: &mut dyn Write, opts: &SflowOptions) -> anyhow::Result<SflowReport> {
    let mut w = Exporter {
        out,
        buf: Vec::with_capacity(1 << 20),
        agents: (0..opts.agents.clamp(1, 250))
            .map(|i| Agent {
                ip: [10, 255, 0, i + 1],
                datagram_seq: 0,
                sample_seq: 0,
                counter_seq: 0,
                pool: 0,
                pending: Vec::new(),
                first_us: 0,
                port_octets: [0; 48],
                port_packets: [0; 48],
            })
            .collect(),
        opts: opts.clone(),
        start_us: opts.start_micros,
        report: SflowReport::default(),
        pcap_head: Vec::new(),
        head_done: false,
    };
    w.file_header();
    if let Some(from) = &opts.from {
        // Real-derived: the packets of a capture (classic pcap), in its order, one sample each.
        let mut f = File::open(from).with_context(|| format!("opening {}", from.display()))?;
        let mut magic = [0u8; 4];
        std::io::Read::read_exact(&mut f, &mut magic)
            .with_context(|| format!("reading {}", from.display()))?;
        anyhow::ensure!(
            magic == 0xa1b2_c3d4u32.to_le_bytes(),
            "{}: not a little-endian classic pcap with microsecond times (pcapng and others: \
             convert with `editcap -F pcap`)",
            from.display()
        );
        w.write_all(&magic)?;
        std::io::copy(&mut f, &mut w)?;
        w.finish()?;
        return Ok(w.report);
    }
    let inner = PcapOptions {
        seed: opts.seed,
        start_micros: opts.start_micros,
        packets: Some(opts.samples),
        mean_gap_micros: opts.mean_gap_micros.max(1),
        concurrent_flows: 2_000,
        ..PcapOptions::default()
    };
    write_pcap(&mut w, &inner)?;
    w.finish()?;
    Ok(w.report)
}

/// Receives the inner capture's bytes (as a [`Write`]) and turns each packet into a sample.
struct Exporter<'a> {
    out: &'a mut dyn Write,
    buf: Vec<u8>,
    agents: Vec<Agent>,
    opts: SflowOptions,
    start_us: i64,
    report: SflowReport,
    /// Unparsed bytes of the inner capture.
    pcap_head: Vec<u8>,
    head_done: bool,
}

impl Write for Exporter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.pcap_head.extend_from_slice(data);
        let mut at = 0;
        if !self.head_done {
            if self.pcap_head.len() < 24 {
                return Ok(data.len());
            }
            at = 24;
            self.head_done = true;
        }
        let buf = std::mem::take(&mut self.pcap_head);
        while buf.len() >= at + 16 {
            let le = |o: usize| u32::from_le_bytes(buf[o..o + 4].try_into().expect("4 bytes"));
            let (sec, usec, incl) = (le(at), le(at + 4), le(at + 8) as usize);
            if buf.len() < at + 16 + incl {
                break;
            }
            let ts = sec as i64 * 1_000_000 + usec as i64;
            let frame = buf[at + 16..at + 16 + incl].to_vec();
            self.sample(ts, &frame)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            at += 16 + incl;
        }
        self.pcap_head = buf[at..].to_vec();
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn put(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_be_bytes());
}

/// A cheap deterministic hash (splitmix64) for choosing agents and ports by flow.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The frame's outermost VLAN id, if tagged.
fn vlan(frame: &[u8]) -> Option<u32> {
    match frame.get(12..14)? {
        [0x81, 0x00] | [0x88, 0xa8] | [0x91, 0x00] => {
            let tci = u16::from_be_bytes([*frame.get(14)?, *frame.get(15)?]);
            Some(u32::from(tci & 0x0fff))
        }
        _ => None,
    }
}

/// A key of the frame's addresses (order-independent), so a flow's samples stay on one agent.
fn flow_key(frame: &[u8]) -> u64 {
    let mut h: u64 = 0;
    // Sum of the bytes that usually hold the addresses (after Ethernet and a tag or two); the
    // same for both directions since the sum is symmetric.
    for (i, b) in frame.iter().take(60).enumerate().skip(26) {
        h = h.wrapping_add(u64::from(*b) << (i % 8));
    }
    mix(h)
}

impl Exporter<'_> {
    fn file_header(&mut self) {
        let o = &mut self.buf;
        o.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        o.extend_from_slice(&2u16.to_le_bytes());
        o.extend_from_slice(&4u16.to_le_bytes());
        o.extend_from_slice(&0i32.to_le_bytes());
        o.extend_from_slice(&0u32.to_le_bytes());
        o.extend_from_slice(&65_535u32.to_le_bytes());
        o.extend_from_slice(&1u32.to_le_bytes());
    }

    fn sample(&mut self, ts: i64, frame: &[u8]) -> anyhow::Result<()> {
        if self.report.flow_samples >= self.opts.samples || frame.len() < 14 {
            return Ok(());
        }
        let key = flow_key(frame);
        let a = (key % self.agents.len() as u64) as usize;
        let port = ((key >> 8) % 48) as usize;
        let out_port = ((key >> 16) % 48) as usize;
        let rate = self.opts.sampling_rate.max(1);
        let agent = &mut self.agents[a];
        agent.sample_seq = agent.sample_seq.wrapping_add(1);
        agent.pool = agent.pool.wrapping_add(rate);
        agent.port_octets[port] += frame.len() as u64 * u64::from(rate);
        agent.port_packets[port] = agent.port_packets[port].wrapping_add(rate);
        let v = vlan(frame).unwrap_or(1);

        let mut s = Vec::with_capacity(256);
        put(&mut s, agent.sample_seq);
        put(&mut s, port as u32 + 1); // source id: type 0 (ifIndex), index = input port
        put(&mut s, rate);
        put(&mut s, agent.pool);
        put(&mut s, 0); // drops
        put(&mut s, port as u32 + 1);
        put(&mut s, out_port as u32 + 1);
        put(&mut s, 2); // records
                        // Raw packet header (enterprise 0, format 1).
        let hlen = frame.len().min(HEADER_BYTES);
        let padded = hlen.div_ceil(4) * 4;
        put(&mut s, 1);
        put(&mut s, (16 + padded) as u32);
        put(&mut s, 1); // header protocol: Ethernet
        put(&mut s, frame.len() as u32 + 4); // frame length on the wire, FCS included
        put(&mut s, 4); // stripped: the FCS
        put(&mut s, hlen as u32);
        s.extend_from_slice(&frame[..hlen]);
        s.resize(s.len() + padded - hlen, 0);
        // Extended switch (enterprise 0, format 1001).
        put(&mut s, 1001);
        put(&mut s, 16);
        put(&mut s, v);
        put(&mut s, 0);
        put(&mut s, v);
        put(&mut s, 0);

        if agent.pending.is_empty() {
            agent.first_us = ts;
        }
        agent.pending.push(s);
        self.report.flow_samples += 1;
        let due = agent.pending.len() >= PER_DATAGRAM || ts - agent.first_us >= 1_000_000;
        if due {
            self.send(a, ts + 500)?;
        }
        Ok(())
    }

    /// Sends agent `a`'s pending samples (and every 20th time a counter sample) at time `ts`.
    fn send(&mut self, a: usize, ts: i64) -> anyhow::Result<()> {
        let start = self.start_us;
        let agent = &mut self.agents[a];
        if agent.pending.is_empty() {
            return Ok(());
        }
        agent.datagram_seq = agent.datagram_seq.wrapping_add(1);
        let with_counters = agent.datagram_seq.is_multiple_of(20);
        let mut d = Vec::with_capacity(1500);
        put(&mut d, 5);
        put(&mut d, 1);
        d.extend_from_slice(&agent.ip);
        put(&mut d, 0); // sub-agent
        put(&mut d, agent.datagram_seq);
        put(&mut d, ((ts - start).max(0) / 1000) as u32 + 3_600_000); // uptime: up an hour before
        put(
            &mut d,
            (agent.pending.len() + usize::from(with_counters)) as u32,
        );
        for s in agent.pending.drain(..) {
            put(&mut d, 1); // flow sample
            put(&mut d, s.len() as u32);
            d.extend_from_slice(&s);
        }
        if with_counters {
            agent.counter_seq = agent.counter_seq.wrapping_add(1);
            let port = (agent.datagram_seq / 20 % 48) as usize;
            put(&mut d, 2); // counter sample
            put(&mut d, 12 + 8 + 88);
            put(&mut d, agent.counter_seq);
            put(&mut d, port as u32 + 1);
            put(&mut d, 1); // records
            put(&mut d, 1); // generic interface counters
            put(&mut d, 88);
            put(&mut d, port as u32 + 1);
            put(&mut d, 6); // ethernetCsmacd
            d.extend_from_slice(&10_000_000_000u64.to_be_bytes());
            put(&mut d, 1); // full duplex
            put(&mut d, 3); // admin and oper up
            d.extend_from_slice(&agent.port_octets[port].to_be_bytes());
            for v in [agent.port_packets[port], 0, 0, 0, 0, 0] {
                put(&mut d, v);
            }
            d.extend_from_slice(&(agent.port_octets[port] / 2).to_be_bytes());
            for v in [agent.port_packets[port] / 2, 0, 0, 0, 0, 0] {
                put(&mut d, v);
            }
            self.report.counter_samples += 1;
        }
        let src = agent.ip;
        let sport = 40_000 + u16::from(agent.ip[3]);
        self.frame(ts, src, sport, &d);
        self.report.datagrams += 1;
        if self.buf.len() >= 1 << 20 {
            self.out.write_all(&self.buf)?;
            self.report.bytes += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    /// One pcap record: Ethernet, IPv4 (checksummed), UDP to the collector's 6343.
    fn frame(&mut self, ts: i64, src: [u8; 4], sport: u16, payload: &[u8]) {
        let udp_len = 8 + payload.len();
        let ip_len = 20 + udp_len;
        let len = 14 + ip_len;
        let o = &mut self.buf;
        o.extend_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
        o.extend_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
        o.extend_from_slice(&(len as u32).to_le_bytes());
        o.extend_from_slice(&(len as u32).to_le_bytes());
        o.extend_from_slice(&COLLECTOR_MAC);
        o.extend_from_slice(&[0x02, 0x00, 0x5e, 0x10, src[2], src[3]]);
        o.extend_from_slice(&[0x08, 0x00]);
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
        ip[6] = 0x40; // don't fragment
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&COLLECTOR);
        let mut sum: u32 = 0;
        for c in ip.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        o.extend_from_slice(&ip);
        o.extend_from_slice(&sport.to_be_bytes());
        o.extend_from_slice(&6343u16.to_be_bytes());
        o.extend_from_slice(&(udp_len as u16).to_be_bytes());
        o.extend_from_slice(&0u16.to_be_bytes()); // no checksum (allowed over IPv4)
        o.extend_from_slice(payload);
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        for a in 0..self.agents.len() {
            let ts = self.agents[a].first_us + 1_000_000;
            self.send(a, ts)?;
        }
        self.out.write_all(&self.buf)?;
        self.report.bytes += self.buf.len() as u64;
        self.buf.clear();
        self.out.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_hold_every_sample_under_the_mtu_and_are_deterministic() {
        let opts = SflowOptions {
            samples: 5_000,
            ..SflowOptions::default()
        };
        let mut a = Vec::new();
        let r = write_sflow(&mut a, &opts).unwrap();
        assert_eq!(r.flow_samples, 5_000);
        assert!(r.datagrams >= 5_000 / PER_DATAGRAM as u64, "{r:?}");
        assert!(r.counter_samples > 0);
        assert_eq!(r.bytes, a.len() as u64);
        // Walk the pcap: every record is a UDP datagram to 6343 within 1500 bytes of IP.
        let mut at = 24;
        let mut n = 0;
        let mut samples = 0u64;
        while at < a.len() {
            let incl = u32::from_le_bytes(a[at + 8..at + 12].try_into().unwrap()) as usize;
            let f = &a[at + 16..at + 16 + incl];
            assert!(incl - 14 <= 1500, "datagram of {incl} bytes");
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), 6343);
            let p = &f[42..];
            assert_eq!(u32::from_be_bytes(p[0..4].try_into().unwrap()), 5);
            let nsamples = u32::from_be_bytes(p[24..28].try_into().unwrap());
            samples += u64::from(nsamples);
            at += 16 + incl;
            n += 1;
        }
        assert_eq!(n, r.datagrams);
        assert_eq!(samples, r.flow_samples + r.counter_samples);
        let mut b = Vec::new();
        write_sflow(&mut b, &opts).unwrap();
        assert_eq!(a, b);
    }
}
