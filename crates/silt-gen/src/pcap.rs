//! Synthetic packet captures (classic pcap with microsecond timestamps, or pcapng) with a realistic
//! traffic mix, for tests and the PCAP import benchmark (`silt generate pcap`).
//!
//! Touches only the [`Write`] (or file) it is given; no other state.
//!
//! What a trace holds:
//! - TCP sessions with a three-way handshake (MSS option), request/response rounds with correct
//!   sequence and acknowledgement numbers (the receiver ACKs every second full segment, so no
//!   window fills), and a FIN/FIN/ACK or RST teardown; TLS-like sessions (443, 993, 8443, ...;
//!   each segment one TLS application-data record), HTTP/1.1 on port 80 (real request and
//!   response headers, `Content-Length` matching the body), refused connections (SYN, RST/ACK)
//!   and inbound SYN scans (a lone SYN).
//! - UDP: DNS query/response pairs (A/AAAA, some NXDOMAIN, real wire format), NTP client/server
//!   pairs, syslog messages.
//! - ICMP/ICMPv6 echo request/reply pairs and port-unreachable errors quoting the UDP probe.
//! - ~20% IPv6, ~15% of flows on an 802.1Q VLAN (a fifth of those QinQ, 802.1ad or double
//!   802.1Q outer tag), ~1% VXLAN-encapsulated (UDP 4789 between two VTEPs).
//! - Sizes: heavy-tailed response sizes (log-normal), so full 1514-byte segments, small ACKs and
//!   mid-sized requests mix (average frame ~700 bytes).
//! - Concurrency: [`PcapOptions::concurrent_flows`] flows are open at any time (default 10,000);
//!   each packet comes from a flow drawn uniformly among them, and a finished flow is replaced by
//!   a new one, so flows interleave and a flow tracker holds that many at once. Memory is
//!   constant (the flow table and two buffers), whatever the trace size.
//! - Hosts: 20,000 internal IPv4 and 5,000 IPv6 clients, 8,000 IPv4 and 3,000 IPv6 servers,
//!   chosen with Zipf popularity (a few heavy talkers, a long tail).
//! - Time: starts at [`PcapOptions::start_micros`], strictly increasing, mean gap
//!   [`PcapOptions::mean_gap_micros`] between packets.
//!
//! Headers are written by hand rather than with `etherparse::PacketBuilder`: the generator must
//! produce hundreds of MB/s, and building each packet in place in one reused buffer (checksums
//! included, summed 32 bits at a time) avoids the builder's per-packet allocations and
//! header structs. The pcap/pcapng file framing is a few fixed little-endian fields, also written
//! by hand (`pcap-file`'s writer would add a dependency for 30 lines).
//!
//! Determinism: the same options give byte-identical output on the same build.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::model::{lognormal, Zipf};

/// Generator settings for [`write_pcap`].
#[derive(Clone, Debug)]
pub struct PcapOptions {
    /// RNG seed; same seed, same output.
    pub seed: u64,
    /// Time of the first packet, UTC microseconds since the epoch.
    pub start_micros: i64,
    /// Stop after exactly this many packets (`None`: no packet limit).
    pub packets: Option<u64>,
    /// Stop once the file holds at least this many bytes (`None`: no size limit). When both
    /// limits are set, the first one reached stops the trace; with neither, 100,000 packets.
    pub bytes: Option<u64>,
    /// Write pcapng (SHB, one Ethernet IDB, EPBs) instead of classic pcap.
    pub pcapng: bool,
    /// Flows open at once (default 10,000).
    pub concurrent_flows: usize,
    /// Share of flows over IPv6 (default 0.2).
    pub ipv6_share: f64,
    /// Share of flows on a VLAN (default 0.15); a fifth of them are QinQ.
    pub vlan_share: f64,
    /// Share of (IPv4, untagged) flows inside VXLAN (default 0.01).
    pub vxlan_share: f64,
    /// Mean time between packets in microseconds (default 20, i.e. 50,000 packets/s).
    pub mean_gap_micros: u32,
}

impl Default for PcapOptions {
    fn default() -> Self {
        PcapOptions {
            seed: 1,
            start_micros: crate::DEFAULT_START_MICROS,
            packets: None,
            bytes: None,
            pcapng: false,
            concurrent_flows: 10_000,
            ipv6_share: 0.2,
            vlan_share: 0.15,
            vxlan_share: 0.01,
            mean_gap_micros: 20,
        }
    }
}

/// What [`write_pcap`] wrote. Counts are of packets (frames) unless named otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PcapReport {
    pub packets: u64,
    /// Bytes written, file header included (the file size).
    pub bytes: u64,
    /// Sum of frame lengths (captured = original: nothing is truncated).
    pub frame_bytes: u64,
    /// Flows started (including those still open when the trace ends).
    pub flows: u64,
    /// Flows that reached their last packet.
    pub flows_completed: u64,
    /// TCP sessions that completed a three-way handshake.
    pub tcp_handshakes: u64,
    /// Innermost protocol counts.
    pub tcp: u64,
    pub udp: u64,
    pub icmp: u64,
    /// Innermost IP version 6 (ICMPv6 counts under `icmp`).
    pub ipv6: u64,
    /// With at least one VLAN tag / with two tags / VXLAN-encapsulated.
    pub vlan: u64,
    pub qinq: u64,
    pub vxlan: u64,
    /// First and last packet time, UTC microseconds.
    pub first_micros: i64,
    pub last_micros: i64,
}

/// Writes a trace to `path` (created or truncated).
pub fn generate_pcap(path: &Path, opts: &PcapOptions) -> anyhow::Result<PcapReport> {
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut f = f;
    let r = write_pcap(&mut f, opts).with_context(|| format!("writing {}", path.display()))?;
    f.sync_all().ok();
    Ok(r)
}

/// Streams a trace to `out` (unbuffered writers are fine: output goes out in 1 MiB writes).
pub fn write_pcap(out: &mut dyn Write, opts: &PcapOptions) -> anyhow::Result<PcapReport> {
    let mut g = Gen::new(opts);
    g.file_header();
    let (max_packets, max_bytes) = match (opts.packets, opts.bytes) {
        (None, None) => (100_000, u64::MAX),
        (p, b) => (p.unwrap_or(u64::MAX), b.unwrap_or(u64::MAX)),
    };
    let n = opts.concurrent_flows.max(1);
    let mut active: Vec<Flow> = Vec::with_capacity(n);
    for _ in 0..n {
        let f = g.new_flow();
        active.push(f);
    }
    g.report.first_micros = g.now;
    while g.report.packets < max_packets && g.report.bytes < max_bytes {
        let i = g.rng.random_range(0..active.len());
        let done = g.step(&mut active[i]);
        if done {
            g.report.flows_completed += 1;
            active[i] = g.new_flow();
        }
        // Time advances after each packet: uniform in 1..=2*mean-1 keeps it strictly increasing.
        let gap = g.rng.random_range(1..(2 * g.mean_gap).max(2)) as i64;
        g.now += gap;
        if g.out.len() >= FLUSH {
            out.write_all(&g.out)?;
            g.out.clear();
        }
    }
    out.write_all(&g.out)?;
    out.flush()?;
    Ok(g.report)
}

const FLUSH: usize = 1 << 20;
const RAND_BUF: usize = 1 << 20;
const GW_MAC: [u8; 6] = [0x00, 0x1c, 0x73, 0x2a, 0x10, 0x01];
const VTEP_MAC: [[u8; 6]; 2] = [
    [0x0a, 0x8f, 0x3e, 0x00, 0x00, 0x01],
    [0x0a, 0x8f, 0x3e, 0x00, 0x00, 0x02],
];

const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Tls,
    Http,
    Scan,
    Refused,
    Dns,
    Ntp,
    Syslog,
    Echo,
    Unreach,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Syn,
    SynAck,
    RstRefuse,
    HsAck,
    CData,
    SData,
    Fin1,
    Fin2,
    LastAck,
    Rst,
}

/// One open flow: addresses, encapsulation and the state of its little state machine.
#[derive(Clone, Debug)]
struct Flow {
    kind: Kind,
    phase: Phase,
    v6: bool,
    /// VLAN ids, outer first; 0 = no tag.
    vlan: [u16; 2],
    /// Outer tag of a QinQ pair is 802.1ad (0x88a8) rather than 0x8100.
    qinq_ad: bool,
    /// VXLAN network identifier + 1; 0 = not encapsulated.
    vni: u32,
    caddr: [u8; 16],
    saddr: [u8; 16],
    cport: u16,
    sport: u16,
    cmac: [u8; 6],
    flow_label: u32,
    ttl_c: u8,
    ttl_s: u8,
    ipid_c: u16,
    ipid_s: u16,
    cseq: u32,
    sseq: u32,
    c_left: u32,
    s_left: u32,
    s_total: u32,
    body: u32,
    rounds: u16,
    unacked: u8,
    rst_end: bool,
    server_closes: bool,
    name: u32,
    step: u16,
    count: u16,
    ident: u16,
    qtype: u16,
    aux: u32,
}

impl Flow {
    fn mss(&self) -> u32 {
        if self.vni != 0 {
            1410
        } else if self.v6 {
            1440
        } else {
            1460
        }
    }
}

struct Name {
    text: Box<str>,
    wire: Box<[u8]>,
}

struct Gen {
    rng: SmallRng,
    pcapng: bool,
    now: i64,
    mean_gap: u32,
    out: Vec<u8>,
    frame: Vec<u8>,
    scratch: Vec<u8>,
    rand_buf: Vec<u8>,
    /// Offsets of the outer IPv4 and UDP headers of the VXLAN frame being built.
    vx: Option<(usize, usize)>,
    report: PcapReport,
    clients4: Vec<[u8; 4]>,
    clients6: Vec<[u8; 16]>,
    servers4: Vec<[u8; 4]>,
    servers6: Vec<[u8; 16]>,
    zc4: Zipf,
    zc6: Zipf,
    zs4: Zipf,
    zs6: Zipf,
    names: Vec<Name>,
    zn: Zipf,
    vlans: [u16; 12],
    opts: PcapOptions,
}

fn v4(a: [u8; 4]) -> [u8; 16] {
    let mut o = [0u8; 16];
    o[..4].copy_from_slice(&a);
    o
}

impl Gen {
    fn new(opts: &PcapOptions) -> Gen {
        let mut rng = SmallRng::seed_from_u64(opts.seed ^ 0x9e37_79b9_7f4a_7c15);
        let mut rand_buf = vec![0u8; RAND_BUF + 2048];
        rng.fill(&mut rand_buf[..]);
        let clients4 = (0..20_000)
            .map(|i| {
                if i % 5 == 4 {
                    [
                        192,
                        168,
                        rng.random_range(0..=20),
                        rng.random_range(2..=254),
                    ]
                } else {
                    [10, rng.random(), rng.random(), rng.random_range(2..=254)]
                }
            })
            .collect();
        let clients6 = (0..5_000)
            .map(|_| {
                let mut a = [0u8; 16];
                a[..6].copy_from_slice(&[0x2a, 0x02, 0x81, 0x09, 0x9c, 0x40]);
                rng.fill(&mut a[6..]);
                a
            })
            .collect();
        let servers4 = (0..8_000)
            .map(|_| loop {
                let a: [u8; 4] = rng.random();
                let public = match a[0] {
                    0 | 10 | 127 | 224..=255 => false,
                    100 => a[1] & 0xc0 != 0x40,
                    169 => a[1] != 254,
                    172 => !(16..32).contains(&a[1]),
                    192 => a[1] != 168,
                    _ => true,
                };
                if public && a[3] != 0 && a[3] != 255 {
                    break a;
                }
            })
            .collect();
        const P6: [[u8; 4]; 6] = [
            [0x26, 0x06, 0x47, 0x00],
            [0x2a, 0x00, 0x14, 0x50],
            [0x26, 0x20, 0x01, 0xec],
            [0x2a, 0x03, 0x28, 0x80],
            [0x24, 0x00, 0xcb, 0x00],
            [0x26, 0x00, 0x90, 0x00],
        ];
        let servers6 = (0..3_000)
            .map(|i| {
                let mut a = [0u8; 16];
                a[..4].copy_from_slice(&P6[i % P6.len()]);
                rng.fill(&mut a[4..8]);
                a[14] = rng.random();
                a[15] = rng.random();
                a
            })
            .collect();
        let names = make_names(&mut rng, 3_000);
        let mut vlans = [0u16; 12];
        for v in &mut vlans {
            *v = rng.random_range(2..4095);
        }
        Gen {
            rng,
            pcapng: opts.pcapng,
            now: opts.start_micros,
            mean_gap: opts.mean_gap_micros.max(1),
            out: Vec::with_capacity(FLUSH + 4096),
            frame: Vec::with_capacity(4096),
            scratch: Vec::with_capacity(4096),
            rand_buf,
            vx: None,
            report: PcapReport::default(),
            clients4,
            clients6,
            servers4,
            servers6,
            zc4: Zipf::new(20_000, 0.9),
            zc6: Zipf::new(5_000, 0.9),
            zs4: Zipf::new(8_000, 1.0),
            zs6: Zipf::new(3_000, 1.0),
            zn: Zipf::new(3_000, 1.0),
            names,
            vlans,
            opts: opts.clone(),
        }
    }

    fn file_header(&mut self) {
        let o = &mut self.out;
        if self.pcapng {
            // Section header block.
            o.extend_from_slice(&0x0A0D_0D0Au32.to_le_bytes());
            o.extend_from_slice(&28u32.to_le_bytes());
            o.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
            o.extend_from_slice(&1u16.to_le_bytes());
            o.extend_from_slice(&0u16.to_le_bytes());
            o.extend_from_slice(&(-1i64).to_le_bytes());
            o.extend_from_slice(&28u32.to_le_bytes());
            // Interface description block: Ethernet, default resolution (microseconds).
            o.extend_from_slice(&1u32.to_le_bytes());
            o.extend_from_slice(&20u32.to_le_bytes());
            o.extend_from_slice(&1u16.to_le_bytes());
            o.extend_from_slice(&0u16.to_le_bytes());
            o.extend_from_slice(&262_144u32.to_le_bytes());
            o.extend_from_slice(&20u32.to_le_bytes());
        } else {
            o.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
            o.extend_from_slice(&2u16.to_le_bytes());
            o.extend_from_slice(&4u16.to_le_bytes());
            o.extend_from_slice(&0i32.to_le_bytes());
            o.extend_from_slice(&0u32.to_le_bytes());
            o.extend_from_slice(&262_144u32.to_le_bytes());
            o.extend_from_slice(&1u32.to_le_bytes());
        }
        self.report.bytes = o.len() as u64;
    }

    fn new_flow(&mut self) -> Flow {
        let r = &mut self.rng;
        let flow_no = self.report.flows;
        self.report.flows += 1;
        let v6 = r.random_bool(self.opts.ipv6_share.clamp(0.0, 1.0));
        let kind = {
            let x = r.random_range(0..1000u32);
            match x {
                0..300 => Kind::Tls,
                300..400 => Kind::Http,
                400..430 => Kind::Scan,
                430..450 => Kind::Refused,
                450..820 => Kind::Dns,
                820..850 => Kind::Ntp,
                850..890 => Kind::Syslog,
                890..960 => Kind::Echo,
                _ => Kind::Unreach,
            }
        };
        let (ci, caddr) = if v6 {
            let i = self.zc6.sample(r);
            (i, self.clients6[i])
        } else {
            let i = self.zc4.sample(r);
            (i, v4(self.clients4[i]))
        };
        let mut saddr = match kind {
            Kind::Dns => {
                if v6 {
                    [
                        0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x88,
                    ]
                } else {
                    v4([[10, 0, 0, 53], [10, 0, 0, 54], [8, 8, 8, 8], [1, 1, 1, 1]]
                        [r.random_range(0..4)])
                }
            }
            Kind::Syslog if !v6 => v4([10, 0, 1, 14]),
            _ => {
                if v6 {
                    self.servers6[self.zs6.sample(r)]
                } else {
                    v4(self.servers4[self.zs4.sample(r)])
                }
            }
        };
        let mut caddr = caddr;
        if kind == Kind::Scan {
            // Inbound: an Internet scanner probing an internal host.
            std::mem::swap(&mut caddr, &mut saddr);
        }
        let mut vlan = [0u16; 2];
        let mut vni = 0;
        let mut qinq_ad = false;
        let e: f64 = r.random();
        if !v6 && e < self.opts.vxlan_share {
            vni = 5000 + r.random_range(0..8u32) + 1;
        } else if e < self.opts.vxlan_share + self.opts.vlan_share {
            vlan[0] = self.vlans[r.random_range(0..self.vlans.len())];
            if r.random_range(0..5) == 0 {
                vlan[1] = self.vlans[r.random_range(0..self.vlans.len())];
                qinq_ad = r.random_bool(0.5);
            }
        }
        let h = (ci as u32).wrapping_mul(2_654_435_761);
        let cport = 32768 + ((flow_no + (h >> 8) as u64) % 28232) as u16;
        let sport = match kind {
            Kind::Tls => {
                if r.random_range(0..10) < 8 {
                    443
                } else {
                    [993, 995, 465, 8443, 5223][r.random_range(0..5)]
                }
            }
            Kind::Http => 80,
            Kind::Scan | Kind::Refused => {
                [22, 23, 445, 3389, 8080, 21, 25, 3306, 5900, 1433, 135, 139][r.random_range(0..12)]
            }
            Kind::Dns => 53,
            Kind::Ntp => 123,
            Kind::Syslog => 514,
            Kind::Echo => 0,
            Kind::Unreach => 33434 + r.random_range(0..90),
        };
        let mut cmac = [0x02, 0, 0, 0, 0, 0];
        cmac[2..].copy_from_slice(&h.to_be_bytes());
        let mut f = Flow {
            kind,
            phase: Phase::Syn,
            v6,
            vlan,
            qinq_ad,
            vni,
            caddr,
            saddr,
            cport,
            sport,
            cmac,
            flow_label: r.random::<u32>() & 0xfffff,
            ttl_c: if h & 0x100 != 0 { 128 } else { 64 },
            ttl_s: r.random_range(40..60),
            ipid_c: r.random(),
            ipid_s: r.random(),
            cseq: r.random(),
            sseq: r.random(),
            c_left: 0,
            s_left: 0,
            s_total: 0,
            body: 0,
            rounds: 0,
            unacked: 0,
            rst_end: r.random_range(0..100) < 12,
            server_closes: r.random_range(0..100) < 30,
            name: self.zn.sample(r) as u32,
            step: 0,
            count: 1,
            ident: r.random(),
            qtype: if r.random_range(0..10) < 6 { 1 } else { 28 },
            aux: r.random_range(0..RAND_BUF as u32),
        };
        match kind {
            Kind::Tls => {
                f.rounds = 1 + (r.random_range(0..16u32).leading_zeros() as u16).saturating_sub(28);
                self.start_round(&mut f);
            }
            Kind::Http => {
                f.rounds = 1 + r.random_range(0..3);
                self.start_round(&mut f);
            }
            Kind::Syslog => f.count = self.rng.random_range(1..=6),
            Kind::Echo => f.count = self.rng.random_range(1..=4) * 2,
            _ => {}
        }
        f
    }

    /// Sizes of the next request/response round of a TCP session.
    fn start_round(&mut self, f: &mut Flow) {
        let mss = f.mss();
        // Heavy-tailed response size: median ~2.7 KB, a few MB at the far tail.
        let resp = lognormal(&mut self.rng, 7.9, 1.9).clamp(40.0, 8e6) as u32;
        match f.kind {
            Kind::Http => {
                f.body = resp;
                self.scratch.clear();
                let mut s = std::mem::take(&mut self.scratch);
                self.http_request(f, &mut s);
                f.c_left = s.len() as u32;
                s.clear();
                http_response_head(f.body, &mut s);
                f.s_left = s.len() as u32 + f.body;
                self.scratch = s;
            }
            _ => {
                // TLS: every segment is one record with a 5-byte header, so no segment may be
                // shorter than 6 bytes.
                let mut req = self.rng.random_range(80..1600u32);
                if (1..6).contains(&(req % mss)) {
                    req += 6;
                }
                let mut resp = resp;
                if (1..6).contains(&(resp % mss)) {
                    resp += 6;
                }
                f.c_left = req;
                f.s_left = resp;
            }
        }
        f.s_total = f.s_left;
    }

    fn http_request(&self, f: &Flow, out: &mut Vec<u8>) {
        const PATHS: [&str; 8] = [
            "/",
            "/index.html",
            "/api/v1/items?page=2",
            "/static/js/app.min.js",
            "/images/banner.jpg",
            "/download/update.bin",
            "/search?q=weather",
            "/favicon.ico",
        ];
        const UAS: [&str; 4] = [
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
            "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
            "curl/8.4.0",
            "Microsoft-CryptoAPI/10.0",
        ];
        let p = PATHS[(f.name as usize + f.rounds as usize) % PATHS.len()];
        let ua = UAS[(f.cmac[5] as usize) % UAS.len()];
        out.extend_from_slice(b"GET ");
        out.extend_from_slice(p.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(self.names[f.name as usize].text.as_bytes());
        out.extend_from_slice(b"\r\nUser-Agent: ");
        out.extend_from_slice(ua.as_bytes());
        out.extend_from_slice(b"\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n");
    }

    /// Emits the flow's next packet; true when that was its last.
    fn step(&mut self, f: &mut Flow) -> bool {
        match f.kind {
            Kind::Tls | Kind::Http | Kind::Scan | Kind::Refused => self.tcp_step(f),
            Kind::Dns => {
                self.dns(f, f.step == 0);
                f.step += 1;
                f.step == 2
            }
            Kind::Ntp => {
                self.ntp(f, f.step == 0);
                f.step += 1;
                f.step == 2
            }
            Kind::Syslog => {
                self.syslog(f);
                f.step += 1;
                f.step == f.count
            }
            Kind::Echo => {
                self.echo(f, f.step.is_multiple_of(2));
                f.step += 1;
                f.step == f.count
            }
            Kind::Unreach => {
                if f.step == 0 {
                    self.begin(f, true);
                    self.scratch.clear();
                    let mut s = std::mem::take(&mut self.scratch);
                    self.udp_probe(f, &mut s);
                    self.frame.extend_from_slice(&s);
                    self.scratch = s;
                    self.report.udp += 1;
                    self.close_frame(f);
                } else {
                    self.icmp_unreach(f);
                }
                f.step += 1;
                f.step == 2
            }
        }
    }

    fn tcp_step(&mut self, f: &mut Flow) -> bool {
        let mss = f.mss();
        match f.phase {
            Phase::Syn => {
                self.tcp(f, true, SYN, f.cseq, 0, 0);
                f.cseq = f.cseq.wrapping_add(1);
                match f.kind {
                    Kind::Scan => return true,
                    Kind::Refused => f.phase = Phase::RstRefuse,
                    _ => f.phase = Phase::SynAck,
                }
            }
            Phase::RstRefuse => {
                self.tcp(f, false, RST | ACK, 0, f.cseq, 0);
                return true;
            }
            Phase::SynAck => {
                self.tcp(f, false, SYN | ACK, f.sseq, f.cseq, 0);
                f.sseq = f.sseq.wrapping_add(1);
                f.phase = Phase::HsAck;
            }
            Phase::HsAck => {
                self.tcp(f, true, ACK, f.cseq, f.sseq, 0);
                self.report.tcp_handshakes += 1;
                f.phase = Phase::CData;
            }
            Phase::CData => {
                if f.unacked >= 2 {
                    self.tcp(f, false, ACK, f.sseq, f.cseq, 0);
                    f.unacked = 0;
                } else {
                    let n = f.c_left.min(mss);
                    let last = n == f.c_left;
                    let flags = if last { ACK | PSH } else { ACK };
                    self.tcp(f, true, flags, f.cseq, f.sseq, n);
                    f.cseq = f.cseq.wrapping_add(n);
                    f.c_left -= n;
                    f.unacked += 1;
                    if last {
                        f.unacked = 0;
                        f.phase = Phase::SData;
                    }
                }
            }
            Phase::SData => {
                if f.unacked >= 2 {
                    self.tcp(f, true, ACK, f.cseq, f.sseq, 0);
                    f.unacked = 0;
                } else {
                    let n = f.s_left.min(mss);
                    let last = n == f.s_left;
                    let flags = if last { ACK | PSH } else { ACK };
                    self.tcp(f, false, flags, f.sseq, f.cseq, n);
                    f.sseq = f.sseq.wrapping_add(n);
                    f.s_left -= n;
                    f.unacked += 1;
                    if last {
                        f.unacked = 0;
                        f.rounds -= 1;
                        if f.rounds > 0 {
                            self.start_round(f);
                            f.phase = Phase::CData;
                        } else if f.rst_end {
                            f.phase = Phase::Rst;
                        } else {
                            f.phase = Phase::Fin1;
                        }
                    }
                }
            }
            Phase::Fin1 => {
                let c = !f.server_closes;
                self.tcp_dir(f, c, FIN | ACK, 0);
                f.phase = Phase::Fin2;
            }
            Phase::Fin2 => {
                let c = f.server_closes;
                self.tcp_dir(f, c, FIN | ACK, 0);
                f.phase = Phase::LastAck;
            }
            Phase::LastAck => {
                let c = !f.server_closes;
                self.tcp_dir(f, c, ACK, 0);
                return true;
            }
            Phase::Rst => {
                let c = !f.server_closes;
                self.tcp_dir(f, c, RST | ACK, 0);
                return true;
            }
        }
        false
    }

    /// A teardown segment from one side with that side's sequence numbers (FIN counts one).
    fn tcp_dir(&mut self, f: &mut Flow, from_client: bool, flags: u8, len: u32) {
        let (seq, ack) = if from_client {
            (f.cseq, f.sseq)
        } else {
            (f.sseq, f.cseq)
        };
        self.tcp(f, from_client, flags, seq, ack, len);
        if flags & FIN != 0 {
            if from_client {
                f.cseq = f.cseq.wrapping_add(1);
            } else {
                f.sseq = f.sseq.wrapping_add(1);
            }
        }
    }

    /// Writes the link layer (and a VXLAN outer stack) for a packet of `f`.
    fn begin(&mut self, f: &mut Flow, from_client: bool) {
        let b = &mut self.frame;
        b.clear();
        self.vx = None;
        let (src_mac, dst_mac) = if from_client {
            (f.cmac, GW_MAC)
        } else {
            (GW_MAC, f.cmac)
        };
        if f.vni != 0 {
            let (a, z) = if from_client { (0, 1) } else { (1, 0) };
            b.extend_from_slice(&VTEP_MAC[z]);
            b.extend_from_slice(&VTEP_MAC[a]);
            b.extend_from_slice(&0x0800u16.to_be_bytes());
            let ip_off = b.len();
            let vtep = |i: usize| [172, 16, i as u8, 10 + (f.vni % 4) as u8];
            let id = if from_client { f.ipid_c } else { f.ipid_s };
            put_ipv4(b, vtep(a), vtep(z), 17, 64, id ^ 0x5a5a, false);
            let udp_off = b.len();
            let h = (f.cport as u32
                ^ f.sport as u32
                ^ u32::from_be_bytes([f.caddr[0], f.caddr[1], f.caddr[2], f.caddr[3]]))
            .wrapping_mul(2_654_435_761);
            b.extend_from_slice(&(49152 + (h >> 18) as u16).to_be_bytes());
            b.extend_from_slice(&4789u16.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, 0]);
            b.extend_from_slice(&[0x08, 0, 0, 0]);
            b.extend_from_slice(&((f.vni - 1) << 8).to_be_bytes());
            self.vx = Some((ip_off, udp_off));
            self.report.vxlan += 1;
        }
        b.extend_from_slice(&dst_mac);
        b.extend_from_slice(&src_mac);
        if f.vlan[0] != 0 {
            self.report.vlan += 1;
            let tpid: u16 = if f.vlan[1] != 0 && f.qinq_ad {
                0x88a8
            } else {
                0x8100
            };
            b.extend_from_slice(&tpid.to_be_bytes());
            b.extend_from_slice(&f.vlan[0].to_be_bytes());
            if f.vlan[1] != 0 {
                self.report.qinq += 1;
                b.extend_from_slice(&0x8100u16.to_be_bytes());
                b.extend_from_slice(&f.vlan[1].to_be_bytes());
            }
        }
        let et: u16 = if f.v6 { 0x86dd } else { 0x0800 };
        b.extend_from_slice(&et.to_be_bytes());
        if f.v6 {
            self.report.ipv6 += 1;
        }
    }

    /// Writes the IP header of a packet of `f` into `b` (lengths and checksum left for
    /// [`finish_ip`]); returns (ip header offset, transport offset).
    fn ip(b: &mut Vec<u8>, f: &mut Flow, from_client: bool, proto: u8) -> (usize, usize) {
        let ip_off = b.len();
        let (src, dst, ttl) = if from_client {
            (&f.caddr, &f.saddr, f.ttl_c)
        } else {
            (&f.saddr, &f.caddr, f.ttl_s)
        };
        if f.v6 {
            put_ipv6(b, src, dst, proto, ttl, f.flow_label);
        } else {
            let id = if from_client {
                f.ipid_c = f.ipid_c.wrapping_add(1);
                f.ipid_c
            } else {
                f.ipid_s = f.ipid_s.wrapping_add(1);
                f.ipid_s
            };
            let s4 = [src[0], src[1], src[2], src[3]];
            let d4 = [dst[0], dst[1], dst[2], dst[3]];
            put_ipv4(b, s4, d4, proto, ttl, id, proto == 6);
        }
        (ip_off, b.len())
    }

    fn tcp(&mut self, f: &mut Flow, from_client: bool, flags: u8, seq: u32, ack: u32, len: u32) {
        // HTTP text that starts this segment's payload (request, or the response head).
        let mut head = false;
        if len > 0 && f.kind == Kind::Http {
            self.scratch.clear();
            if from_client {
                let mut s = std::mem::take(&mut self.scratch);
                self.http_request(f, &mut s);
                self.scratch = s;
                head = true;
            } else if f.s_left == f.s_total {
                http_response_head(f.body, &mut self.scratch);
                head = true;
            }
        }
        self.begin(f, from_client);
        let (ip_off, l4) = Gen::ip(&mut self.frame, f, from_client, 6);
        let b = &mut self.frame;
        let (sp, dp) = if from_client {
            (f.cport, f.sport)
        } else {
            (f.sport, f.cport)
        };
        let syn = flags & SYN != 0;
        b.extend_from_slice(&sp.to_be_bytes());
        b.extend_from_slice(&dp.to_be_bytes());
        b.extend_from_slice(&seq.to_be_bytes());
        b.extend_from_slice(&(if flags & ACK != 0 { ack } else { 0 }).to_be_bytes());
        b.push(if syn { 6 << 4 } else { 5 << 4 });
        b.push(flags);
        let win: u16 = if from_client { 64240 } else { 65160 };
        b.extend_from_slice(&win.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        if syn {
            b.extend_from_slice(&[2, 4]);
            b.extend_from_slice(&(f.mss() as u16).to_be_bytes());
        }
        if len > 0 {
            let len = len as usize;
            let start = b.len();
            let off = self.rng.random_range(0..RAND_BUF);
            b.extend_from_slice(&self.rand_buf[off..off + len]);
            let p = &mut b[start..];
            if f.kind == Kind::Http {
                if head {
                    let n = self.scratch.len().min(p.len());
                    p[..n].copy_from_slice(&self.scratch[..n]);
                }
            } else {
                // One TLS 1.2 application-data record per segment.
                p[0] = 0x17;
                p[1] = 3;
                p[2] = 3;
                p[3..5].copy_from_slice(&((len - 5) as u16).to_be_bytes());
            }
        }
        finish_ip(&mut self.frame, ip_off, f.v6, 6, l4, Some(16), true);
        self.report.tcp += 1;
        self.close_frame(f);
    }

    /// A UDP datagram of `f` with payload written by `fill` (given the payload buffer).
    fn udp(&mut self, f: &mut Flow, from_client: bool, fill: impl FnOnce(&mut Gen, &mut Vec<u8>)) {
        self.begin(f, from_client);
        let (ip_off, l4) = Gen::ip(&mut self.frame, f, from_client, 17);
        let (sp, dp) = if from_client {
            (f.cport, f.sport)
        } else {
            (f.sport, f.cport)
        };
        let mut b = std::mem::take(&mut self.frame);
        b.extend_from_slice(&sp.to_be_bytes());
        b.extend_from_slice(&dp.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        fill(self, &mut b);
        let ulen = (b.len() - l4) as u16;
        b[l4 + 4..l4 + 6].copy_from_slice(&ulen.to_be_bytes());
        finish_ip(&mut b, ip_off, f.v6, 17, l4, Some(6), true);
        self.frame = b;
        self.report.udp += 1;
        self.close_frame(f);
    }

    fn dns(&mut self, f: &mut Flow, query: bool) {
        let name = f.name as usize;
        let (id, qtype) = (f.ident, f.qtype);
        let nx = f.aux.is_multiple_of(20);
        let answers = 1 + (f.aux % 3) as u16;
        let rdata_seed = (name as u32).wrapping_mul(2_654_435_761);
        self.udp(f, query, |g, b| {
            b.extend_from_slice(&id.to_be_bytes());
            let flags: u16 = if query {
                0x0100
            } else if nx {
                0x8183
            } else {
                0x8180
            };
            b.extend_from_slice(&flags.to_be_bytes());
            let an = if query || nx { 0 } else { answers };
            for c in [1u16, an, 0, 0] {
                b.extend_from_slice(&c.to_be_bytes());
            }
            b.extend_from_slice(&g.names[name].wire);
            b.extend_from_slice(&qtype.to_be_bytes());
            b.extend_from_slice(&1u16.to_be_bytes());
            for k in 0..an {
                b.extend_from_slice(&[0xc0, 0x0c]);
                b.extend_from_slice(&qtype.to_be_bytes());
                b.extend_from_slice(&1u16.to_be_bytes());
                b.extend_from_slice(&(60 + rdata_seed % 3540).to_be_bytes());
                let x = rdata_seed.wrapping_add(k as u32 * 7919).to_be_bytes();
                if qtype == 28 {
                    b.extend_from_slice(&16u16.to_be_bytes());
                    b.extend_from_slice(&[0x26, 0x06, 0x47, 0x00, 0, 0x10, 0, 0, 0, 0, 0, 0]);
                    b.extend_from_slice(&x);
                } else {
                    b.extend_from_slice(&4u16.to_be_bytes());
                    b.extend_from_slice(&[x[0] % 200 + 20, x[1], x[2], x[3] | 1]);
                }
            }
        });
    }

    fn ntp(&mut self, f: &mut Flow, request: bool) {
        let secs = (self.now / 1_000_000 + 2_208_988_800) as u32;
        let frac = ((self.now % 1_000_000) as u64 * (1u64 << 32) / 1_000_000) as u32;
        self.udp(f, request, |_, b| {
            if request {
                b.extend_from_slice(&[0x23, 0, 6, 0xe9]);
                b.extend_from_slice(&[0; 36]);
            } else {
                b.extend_from_slice(&[0x24, 2, 6, 0xe9, 0, 0, 0, 0x1c, 0, 0, 0, 0x2a]);
                b.extend_from_slice(&[0xc0, 0x21, 0x00, 0x0b]);
                b.extend_from_slice(&(secs - 64).to_be_bytes());
                b.extend_from_slice(&[0; 4]);
                b.extend_from_slice(&secs.to_be_bytes());
                b.extend_from_slice(&frac.wrapping_sub(40_000).to_be_bytes());
                b.extend_from_slice(&secs.to_be_bytes());
                b.extend_from_slice(&frac.wrapping_sub(20_000).to_be_bytes());
            }
            b.extend_from_slice(&secs.to_be_bytes());
            b.extend_from_slice(&frac.to_be_bytes());
        });
    }

    fn syslog(&mut self, f: &mut Flow) {
        const MSGS: [&str; 5] = [
            "sshd[2211]: Accepted publickey for deploy from 10.0.4.7 port 51122 ssh2: ED25519 SHA256:Fq3b9Yk0",
            "CRON[1822]: (root) CMD (run-parts /etc/cron.hourly)",
            "kernel: [UFW BLOCK] IN=eth0 OUT= MAC=00:1c:73:2a:10:01 SRC=185.220.101.4 DST=10.0.1.14 PROTO=TCP SPT=4431 DPT=23 WINDOW=1024",
            "systemd[1]: Started Session 4182 of user admin.",
            "sudo: operator : TTY=pts/0 ; PWD=/home/operator ; USER=root ; COMMAND=/usr/bin/systemctl restart nginx",
        ];
        let t = chrono::DateTime::from_timestamp_micros(self.now).unwrap_or_default();
        let host = f.cmac[4] as u32 * 256 + f.cmac[5] as u32;
        let msg = MSGS[(f.aux as usize + f.step as usize) % MSGS.len()];
        self.udp(f, true, |_, b| {
            let _ = write!(b, "<86>{} host-{host} {msg}", t.format("%b %e %H:%M:%S"));
        });
    }

    fn echo(&mut self, f: &mut Flow, request: bool) {
        let seq = f.step / 2 + 1;
        let secs = self.now / 1_000_000;
        self.begin(f, request);
        let proto = if f.v6 { 58 } else { 1 };
        let (ip_off, l4) = Gen::ip(&mut self.frame, f, request, proto);
        let b = &mut self.frame;
        let ty = match (f.v6, request) {
            (false, true) => 8,
            (false, false) => 0,
            (true, true) => 128,
            (true, false) => 129,
        };
        b.extend_from_slice(&[ty, 0, 0, 0]);
        b.extend_from_slice(&f.ident.to_be_bytes());
        b.extend_from_slice(&seq.to_be_bytes());
        // Linux ping: struct timeval, then bytes 0x10, 0x11, ...
        b.extend_from_slice(&(secs as u64).to_le_bytes());
        b.extend_from_slice(&(f.aux as u64 % 1_000_000).to_le_bytes());
        b.extend(0x10u8..0x38);
        finish_ip(b, ip_off, f.v6, proto, l4, Some(2), f.v6);
        self.report.icmp += 1;
        self.close_frame(f);
    }

    /// The UDP probe of an `Unreach` flow, IP header included (sent, then quoted in the error).
    fn udp_probe(&self, f: &Flow, b: &mut Vec<u8>) {
        let mut f2 = f.clone();
        // The probe's IP id is fixed per flow, so the quoted copy matches the sent one.
        f2.ipid_c = f.ident;
        let (ip_off, l4) = Gen::ip(b, &mut f2, true, 17);
        b.extend_from_slice(&f.cport.to_be_bytes());
        b.extend_from_slice(&f.sport.to_be_bytes());
        b.extend_from_slice(&40u16.to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        // Linux traceroute's payload, "@ABC...": random bytes here would trip tshark's RTP/RTCP
        // heuristics into "malformed" now and then.
        b.extend(0x40u8..0x60);
        finish_ip(b, ip_off, f.v6, 17, l4, Some(6), true);
    }

    fn icmp_unreach(&mut self, f: &mut Flow) {
        self.scratch.clear();
        let mut s = std::mem::take(&mut self.scratch);
        self.udp_probe(f, &mut s);
        self.begin(f, false);
        let proto = if f.v6 { 58 } else { 1 };
        let (ip_off, l4) = Gen::ip(&mut self.frame, f, false, proto);
        let b = &mut self.frame;
        if f.v6 {
            b.extend_from_slice(&[1, 4, 0, 0, 0, 0, 0, 0]);
        } else {
            b.extend_from_slice(&[3, 3, 0, 0, 0, 0, 0, 0]);
        }
        b.extend_from_slice(&s);
        finish_ip(b, ip_off, f.v6, proto, l4, Some(2), f.v6);
        self.scratch = s;
        self.report.icmp += 1;
        self.close_frame(f);
    }

    /// Patches the VXLAN outer headers, then appends the frame's record to the output.
    fn close_frame(&mut self, _f: &Flow) {
        let b = &mut self.frame;
        if let Some((ip_off, udp_off)) = self.vx {
            let total = (b.len() - ip_off) as u16;
            b[ip_off + 2..ip_off + 4].copy_from_slice(&total.to_be_bytes());
            let c = fold(sum32(&b[ip_off..ip_off + 20]));
            b[ip_off + 10..ip_off + 12].copy_from_slice(&c.to_be_bytes());
            let ulen = (b.len() - udp_off) as u16;
            b[udp_off + 4..udp_off + 6].copy_from_slice(&ulen.to_be_bytes());
        }
        let len = b.len() as u32;
        let t = self.now;
        let o = &mut self.out;
        let before = o.len();
        if self.pcapng {
            let pad = (4 - (len % 4)) % 4;
            let total = 32 + len + pad;
            let ts = t as u64;
            o.extend_from_slice(&6u32.to_le_bytes());
            o.extend_from_slice(&total.to_le_bytes());
            o.extend_from_slice(&0u32.to_le_bytes());
            o.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
            o.extend_from_slice(&(ts as u32).to_le_bytes());
            o.extend_from_slice(&len.to_le_bytes());
            o.extend_from_slice(&len.to_le_bytes());
            o.extend_from_slice(b);
            o.extend_from_slice(&[0u8; 3][..pad as usize]);
            o.extend_from_slice(&total.to_le_bytes());
        } else {
            o.extend_from_slice(&((t / 1_000_000) as u32).to_le_bytes());
            o.extend_from_slice(&((t % 1_000_000) as u32).to_le_bytes());
            o.extend_from_slice(&len.to_le_bytes());
            o.extend_from_slice(&len.to_le_bytes());
            o.extend_from_slice(b);
        }
        self.report.bytes += (o.len() - before) as u64;
        self.report.packets += 1;
        self.report.frame_bytes += len as u64;
        self.report.last_micros = t;
    }
}

fn http_response_head(body: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nContent-Type: application/octet-stream\r\nContent-Length: ",
    );
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(body).as_bytes());
    out.extend_from_slice(b"\r\nCache-Control: max-age=3600\r\n\r\n");
}

fn make_names(rng: &mut SmallRng, n: usize) -> Vec<Name> {
    const PRE: [&str; 10] = [
        "www", "api", "cdn", "mail", "static", "login", "img", "update", "assets", "m",
    ];
    const SYL: [&str; 16] = [
        "ka", "lo", "mi", "ne", "tor", "vex", "sa", "qui", "ra", "zen", "bel", "cor", "dra", "fi",
        "gus", "hal",
    ];
    const TLD: [&str; 7] = ["com", "net", "org", "io", "de", "co.uk", "app"];
    (0..n)
        .map(|_| {
            let mut s = String::new();
            s.push_str(PRE[rng.random_range(0..PRE.len())]);
            s.push('.');
            for _ in 0..rng.random_range(2..4) {
                s.push_str(SYL[rng.random_range(0..SYL.len())]);
            }
            if rng.random_bool(0.3) {
                s.push_str(&rng.random_range(1..100).to_string());
            }
            s.push('.');
            s.push_str(TLD[rng.random_range(0..TLD.len())]);
            let mut wire = Vec::with_capacity(s.len() + 2);
            for label in s.split('.') {
                wire.push(label.len() as u8);
                wire.extend_from_slice(label.as_bytes());
            }
            wire.push(0);
            Name {
                text: s.into(),
                wire: wire.into(),
            }
        })
        .collect()
}

fn put_ipv4(b: &mut Vec<u8>, src: [u8; 4], dst: [u8; 4], proto: u8, ttl: u8, id: u16, df: bool) {
    b.extend_from_slice(&[0x45, 0, 0, 0]);
    b.extend_from_slice(&id.to_be_bytes());
    b.extend_from_slice(&(if df { 0x4000u16 } else { 0 }).to_be_bytes());
    b.extend_from_slice(&[ttl, proto, 0, 0]);
    b.extend_from_slice(&src);
    b.extend_from_slice(&dst);
}

fn put_ipv6(b: &mut Vec<u8>, src: &[u8; 16], dst: &[u8; 16], nh: u8, hop: u8, label: u32) {
    b.extend_from_slice(&(0x6000_0000u32 | (label & 0xfffff)).to_be_bytes());
    b.extend_from_slice(&[0, 0, nh, hop]);
    b.extend_from_slice(src);
    b.extend_from_slice(dst);
}

/// Fills in IP lengths, the IPv4 header checksum and the transport checksum (at `l4 + csum`,
/// over the pseudo-header when `pseudo`) of the packet at `ip_off..` that ends at `b.len()`.
fn finish_ip(
    b: &mut [u8],
    ip_off: usize,
    v6: bool,
    proto: u8,
    l4: usize,
    csum: Option<usize>,
    pseudo: bool,
) {
    let l4_len = b.len() - l4;
    let mut ps: u64 = 0;
    if v6 {
        b[ip_off + 4..ip_off + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        if pseudo {
            ps = sum32(&b[ip_off + 8..ip_off + 40]) + l4_len as u64 + proto as u64;
        }
    } else {
        let total = (b.len() - ip_off) as u16;
        b[ip_off + 2..ip_off + 4].copy_from_slice(&total.to_be_bytes());
        let c = fold(sum32(&b[ip_off..ip_off + 20]));
        b[ip_off + 10..ip_off + 12].copy_from_slice(&c.to_be_bytes());
        if pseudo {
            ps = sum32(&b[ip_off + 12..ip_off + 20]) + l4_len as u64 + proto as u64;
        }
    }
    if let Some(c) = csum {
        let mut v = fold(ps + sum32(&b[l4..]));
        if proto == 17 && v == 0 {
            v = 0xffff;
        }
        b[l4 + c..l4 + c + 2].copy_from_slice(&v.to_be_bytes());
    }
}

/// Internet checksum partial sum (RFC 1071) over 32-bit big-endian words: the one's-complement
/// sum is independent of the word size as long as it is folded at the end, and 32-bit words
/// halve the loop count. `data` must start at an even offset of the summed region.
fn sum32(data: &[u8]) -> u64 {
    let mut s: u64 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        s += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let r = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..r.len()].copy_from_slice(r);
    s + u32::from_be_bytes(tail) as u64
}

/// Folds a partial sum to 16 bits and complements it.
fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 section 3 example: words 0001 f203 f4f5 f6f7 sum to ddf2 (complement 220d).
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum32(&d)), !0xddf2);
        // Odd length pads with a zero byte.
        assert_eq!(fold(sum32(&[0x12, 0x34, 0x56])), !(0x1234u16 + 0x5600));
    }

    #[test]
    fn ipv4_header_checksum_verifies() {
        let mut b = Vec::new();
        put_ipv4(&mut b, [10, 0, 0, 1], [8, 8, 8, 8], 17, 64, 7, false);
        b.extend_from_slice(&[0u8; 8]);
        finish_ip(&mut b, 0, false, 17, 20, None, false);
        // A header with its checksum in place sums to 0xffff (folds to 0 after complement).
        assert_eq!(fold(sum32(&b[..20])), 0);
    }
}
