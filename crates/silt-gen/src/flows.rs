//! Flow simulation shared by the Zeek and Suricata generators: produces groups of related
//! connections (a DNS lookup followed by the TLS or HTTP connection to the answer, a scan
//! attempt, an SMB session...) with their application-layer transactions.
//!
//! Pure computation over the [`World`]; touches no files. Renderers (`zeek`, `eve`) turn a
//! [`Flow`] into log lines. All times are UTC microseconds.

use rand::rngs::SmallRng;
use rand::Rng;

use crate::model::{self, exp, lognormal, one, pick, Addr, World, FILE_KINDS, USER_AGENTS};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
}

impl Proto {
    pub fn zeek(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
        }
    }
    pub fn number(self, v6: bool) -> u8 {
        match self {
            Proto::Tcp => 6,
            Proto::Udp => 17,
            Proto::Icmp if v6 => 58,
            Proto::Icmp => 1,
        }
    }
}

/// A 96-bit random id, rendered as a Zeek uid (`C...`) or fuid (`F...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Uid(pub u64, pub u32);

pub struct DnsAnswer<'w> {
    pub text: std::borrow::Cow<'w, str>,
    pub rrtype: &'static str,
    pub ttl: u32,
}

pub struct DnsTx<'w> {
    pub ts: i64,
    pub trans_id: u16,
    pub rtt: Option<i64>,
    pub query: std::borrow::Cow<'w, str>,
    pub qtype: u16,
    pub qtype_name: &'static str,
    /// `None`: no reply seen.
    pub rcode: Option<(u8, &'static str)>,
    pub aa: bool,
    pub rd: bool,
    pub ra: bool,
    pub answers: Vec<DnsAnswer<'w>>,
}

pub struct FileTx {
    pub fuid: Uid,
    pub ts: i64,
    pub duration: i64,
    pub mime: &'static str,
    pub size: u64,
    pub md5: [u8; 16],
    pub sha1: [u8; 20],
    pub filename: Option<String>,
}

pub struct HttpTx<'w> {
    pub ts: i64,
    pub done: i64,
    pub depth: u32,
    pub method: &'static str,
    pub host: &'w str,
    pub uri: String,
    pub referrer: Option<String>,
    pub user_agent: &'static str,
    pub req_len: u64,
    pub resp_len: u64,
    pub status: Option<(u16, &'static str)>,
    pub mime: &'static str,
    pub file: Option<FileTx>,
}

pub struct TlsTx<'w> {
    pub ts: i64,
    pub version: &'static str,
    pub cipher: &'static str,
    pub curve: Option<&'static str>,
    pub sni: Option<&'w str>,
    pub resumed: bool,
    pub next_protocol: Option<&'static str>,
    pub established: bool,
    pub history: &'static str,
    pub cert_fps: Option<&'w str>,
    pub sni_matches: Option<bool>,
    pub validation: Option<&'static str>,
}

pub enum App<'w> {
    None,
    Dns(Vec<DnsTx<'w>>),
    Http(Vec<HttpTx<'w>>),
    Tls(TlsTx<'w>),
}

/// One connection as Zeek's conn.log and Suricata's flow event see it.
pub struct Flow<'w> {
    pub uid: Uid,
    pub start: i64,
    /// `None` when Zeek writes `-` (single-packet attempts).
    pub duration: Option<i64>,
    pub orig: &'w Addr,
    pub resp: &'w Addr,
    pub orig_p: u16,
    pub resp_p: u16,
    pub proto: Proto,
    pub service: &'static str,
    pub orig_bytes: Option<u64>,
    pub resp_bytes: Option<u64>,
    pub conn_state: &'static str,
    pub history: &'static str,
    pub missed_bytes: u64,
    pub orig_pkts: u64,
    pub orig_ip_bytes: u64,
    pub resp_pkts: u64,
    pub resp_ip_bytes: u64,
    pub app: App<'w>,
    /// (weird name, analyzer source) when the flow triggers a weird / anomaly.
    pub weird: Option<(i64, &'static str, &'static str)>,
    /// Index into [`ALERTS`] when a Suricata rule fires on this flow.
    pub alert: Option<usize>,
}

impl Flow<'_> {
    pub fn end(&self) -> i64 {
        self.start + self.duration.unwrap_or(0)
    }
    /// When Zeek removes the connection state and writes conn.log: a few seconds after a TCP
    /// close, after the inactivity timeout for UDP/ICMP and half-open attempts.
    pub fn removal(&self) -> i64 {
        let delay = match (self.proto, self.conn_state) {
            (Proto::Tcp, "SF" | "REJ" | "RSTO" | "RSTR" | "RSTOS0" | "RSTRH") => 5_000_000,
            (Proto::Tcp, "S0" | "SH" | "SHR" | "OTH") => 60_000_000,
            (Proto::Tcp, _) => 300_000_000,
            (Proto::Udp, _) | (Proto::Icmp, _) => 60_000_000,
        };
        self.end() + delay
    }
}

/// Kinds of flow groups; the weights set the mix of conn.log services and of the other logs
/// (calibrated so Zeek output is ~55% conn, 25% dns, 10% http, 6% ssl, 3% files, 1% weird).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// Client looks up a site (sometimes) and connects to it over TLS or HTTP.
    Web,
    /// Background DNS: lookups without a following connection, PTR, SRV, search-list misses.
    Dns,
    /// mDNS/NetBIOS chatter on the local segment.
    Local,
    /// Internal services: SMB, Kerberos, LDAP, RDP, SSH.
    Internal,
    /// NTP, QUIC, ICMP echo, unknown high ports.
    Other,
    /// Inbound scan attempts from the Internet.
    Scan,
}

pub const KINDS: &[(Kind, u32)] = &[
    (Kind::Web, 250),
    (Kind::Dns, 200),
    (Kind::Local, 50),
    (Kind::Internal, 130),
    (Kind::Other, 150),
    (Kind::Scan, 170),
];

/// Suricata rules (gid 1) that fire in generated traffic: (sid, rev, msg, category, severity).
pub const ALERTS: &[(u32, u32, &str, &str, u8)] = &[
    (
        2013028,
        7,
        "ET POLICY curl User-Agent Outbound",
        "Attempted Information Leak",
        2,
    ),
    (
        2013504,
        6,
        "ET POLICY GNU/Linux APT User-Agent Outbound likely related to package management",
        "Not Suspicious Traffic",
        3,
    ),
    (
        2027390,
        3,
        "ET USER_AGENTS Microsoft Device Metadata Retrieval Client User-Agent",
        "Unknown Traffic",
        3,
    ),
    (
        2210045,
        2,
        "SURICATA STREAM Packet with invalid ack",
        "Generic Protocol Command Decode",
        3,
    ),
    (
        2210029,
        2,
        "SURICATA STREAM ESTABLISHED invalid ack",
        "Generic Protocol Command Decode",
        3,
    ),
    (
        2001219,
        20,
        "ET SCAN Potential SSH Scan",
        "Attempted Information Leak",
        2,
    ),
    (
        2010935,
        3,
        "ET SCAN Suspicious inbound to MSSQL port 1433",
        "Potentially Bad Traffic",
        2,
    ),
    (
        2010937,
        3,
        "ET SCAN Suspicious inbound to mySQL port 3306",
        "Potentially Bad Traffic",
        2,
    ),
    (
        2002911,
        6,
        "ET SCAN Potential VNC Scan 5900-5920",
        "Attempted Information Leak",
        2,
    ),
    (
        2027865,
        4,
        "ET INFO Observed DNS Query to .cloud TLD",
        "Potentially Bad Traffic",
        2,
    ),
    (
        2019401,
        3,
        "ET POLICY Vulnerable Java Version 1.8.x Detected",
        "Potential Corporate Privacy Violation",
        1,
    ),
    (
        2260002,
        1,
        "SURICATA Applayer Detect protocol only one direction",
        "Generic Protocol Command Decode",
        3,
    ),
];

const WEIRDS: &[((&str, &str), u32)] = &[
    (("TCP_ack_underflow_or_misorder", "TCP"), 20),
    (("above_hole_data_without_any_acks", "TCP"), 12),
    (("possible_split_routing", "TCP"), 10),
    (("data_before_established", "TCP"), 8),
    (("inappropriate_FIN", "TCP"), 6),
    (("SYN_seq_jump", "TCP"), 6),
    (("window_recision", "TCP"), 4),
    (("active_connection_reuse", "TCP"), 5),
    (("connection_originator_SYN_ack", "TCP"), 4),
    (("truncated_tcp_payload", "TCP"), 3),
    (("bad_HTTP_request", "HTTP"), 4),
    (("unknown_HTTP_method", "HTTP"), 2),
    (("dns_unmatched_reply", "DNS"), 6),
    (("DNS_RR_unknown_type", "DNS"), 2),
    (("dns_unmatched_msg", "DNS"), 4),
];

const STATUS: &[((u16, &str), u32)] = &[
    ((200, "OK"), 760),
    ((304, "Not Modified"), 70),
    ((302, "Found"), 40),
    ((301, "Moved Permanently"), 25),
    ((404, "Not Found"), 45),
    ((204, "No Content"), 30),
    ((206, "Partial Content"), 10),
    ((403, "Forbidden"), 8),
    ((400, "Bad Request"), 3),
    ((500, "Internal Server Error"), 4),
    ((503, "Service Unavailable"), 3),
    ((401, "Unauthorized"), 2),
];

const TLS12_CIPHERS: &[(&str, u32)] = &[
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 45),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 20),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", 15),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", 5),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 5),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", 4),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", 3),
    ("TLS_DHE_RSA_WITH_AES_256_CBC_SHA", 2),
];

const TLS13_CIPHERS: &[(&str, u32)] = &[
    ("TLS_AES_128_GCM_SHA256", 60),
    ("TLS_AES_256_GCM_SHA384", 30),
    ("TLS_CHACHA20_POLY1305_SHA256", 10),
];

/// Generates flow groups in (roughly) increasing start time.
pub struct FlowGen<'w> {
    pub world: &'w World,
    pub rng: SmallRng,
    pub ipv6_share: f64,
    kind_mask: Vec<(Kind, u32)>,
}

/// An index into the World's address pools, kept as a reference for the flows' lifetime.
type A<'w> = &'w Addr;

impl<'w> FlowGen<'w> {
    pub fn new(world: &'w World, rng: SmallRng, ipv6_share: f64, kinds: Vec<(Kind, u32)>) -> Self {
        FlowGen {
            world,
            rng,
            ipv6_share,
            kind_mask: kinds,
        }
    }

    pub fn uid(&mut self) -> Uid {
        Uid(self.rng.random(), self.rng.random())
    }

    fn ephemeral(&mut self) -> u16 {
        // Windows/Linux ephemeral ranges.
        if self.rng.random_bool(0.6) {
            self.rng.random_range(49152..=65535)
        } else {
            self.rng.random_range(32768..=60999)
        }
    }

    /// Appends one group of related flows starting at `t` to `out`.
    pub fn group(&mut self, t: i64, out: &mut Vec<Flow<'w>>) {
        let kind = pick(&mut self.rng, &self.kind_mask);
        match kind {
            Kind::Web => self.web(t, out),
            Kind::Dns => self.dns_background(t, out),
            Kind::Local => self.local(t, out),
            Kind::Internal => self.internal(t, out),
            Kind::Other => self.other(t, out),
            Kind::Scan => self.scan(t, out),
        }
        // A small share of flows carry a weird and (separately) a Suricata alert.
        for f in out.iter_mut() {
            if self.rng.random_bool(0.022) {
                // Weirds come from the analyzer that saw the flow.
                let want = match (f.proto, f.service) {
                    (Proto::Tcp, "http") => ["TCP", "HTTP"],
                    (Proto::Tcp, _) => ["TCP", "TCP"],
                    (Proto::Udp, "dns") => ["DNS", "DNS"],
                    _ => continue,
                };
                let options: Vec<((&str, &str), u32)> = WEIRDS
                    .iter()
                    .copied()
                    .filter(|((_, s), _)| want.contains(s))
                    .collect();
                let (name, src) = pick(&mut self.rng, &options);
                let dur = f.duration.unwrap_or(0).max(1);
                f.weird = Some((f.start + self.rng.random_range(0..dur), name, src));
            }
            if f.alert.is_none() && self.rng.random_bool(0.012) {
                f.alert = Some(self.rng.random_range(0..5));
            }
        }
    }

    fn client(&mut self) -> &'w model::Client {
        let w = self.world;
        &w.clients[w.client_zipf.sample(&mut self.rng)]
    }

    /// A base flow with TCP/UDP accounting filled from payload sizes.
    #[allow(clippy::too_many_arguments)]
    fn flow(
        &mut self,
        start: i64,
        orig: A<'w>,
        resp: A<'w>,
        orig_p: u16,
        resp_p: u16,
        proto: Proto,
        service: &'static str,
        duration: Option<i64>,
        ob: Option<u64>,
        rb: Option<u64>,
        state: &'static str,
        history: &'static str,
        app: App<'w>,
    ) -> Flow<'w> {
        // Heavy-tailed durations, capped at 30 minutes so records stay near the requested span.
        let duration = duration.map(|d| d.clamp(1, 1_800_000_000));
        let v6 = orig.is_v6();
        let (hdr, mss) = match (proto, v6) {
            (Proto::Tcp, false) => (52, 1448),
            (Proto::Tcp, true) => (72, 1428),
            (Proto::Udp, false) => (28, 1472),
            (Proto::Udp, true) => (48, 1452),
            (Proto::Icmp, false) => (28, 1472),
            (Proto::Icmp, true) => (48, 1452),
        };
        let o = ob.unwrap_or(0);
        let r = rb.unwrap_or(0);
        let (op, rp) = match proto {
            Proto::Tcp => {
                let od = o.div_ceil(mss);
                let rd = r.div_ceil(mss);
                let syn = history.starts_with('S') as u64;
                let synack = history.contains('h') as u64;
                let fin_o = history.contains('F') as u64;
                let fin_r = history.contains('f') as u64;
                let rst_o = history.contains('R') as u64;
                let rst_r = history.contains('r') as u64;
                let acks_o = if state == "SF" || state.starts_with("RST") {
                    1 + rd / 2
                } else {
                    0
                };
                let acks_r = if od > 0 { od.div_ceil(2) } else { 0 };
                (
                    syn + od + acks_o + fin_o + rst_o,
                    synack + rd + acks_r + fin_r + rst_r,
                )
            }
            _ => {
                let op = if o == 0 && duration.is_none() {
                    1
                } else {
                    o.div_ceil(mss).max(1)
                };
                let rp = if r == 0 { 0 } else { r.div_ceil(mss).max(1) };
                (op, rp)
            }
        };
        // Single packets and attempts: header bytes only.
        let (op, rp) = if state == "S0" && proto == Proto::Tcp {
            (op.max(1), 0)
        } else {
            (op, rp)
        };
        Flow {
            uid: self.uid(),
            start,
            duration,
            orig,
            resp,
            orig_p,
            resp_p,
            proto,
            service,
            orig_bytes: ob,
            resp_bytes: rb,
            conn_state: state,
            history,
            missed_bytes: 0,
            orig_pkts: op,
            orig_ip_bytes: op * hdr + o,
            resp_pkts: rp,
            resp_ip_bytes: rp * hdr + r,
            app,
            weird: None,
            alert: None,
        }
    }

    fn want_v6(&mut self, c: &'w model::Client) -> Option<A<'w>> {
        // Dual-stack clients mostly prefer IPv6 when the site has it; with the DNS share below
        // this gives ~10% IPv6 flows at the default `ipv6_share` of 0.10.
        let p = self.ipv6_share * 8.0;
        match &c.v6 {
            Some(a) if self.rng.random_bool(p.min(1.0)) => Some(a),
            _ => None,
        }
    }

    fn resolver(&mut self, c: &'w model::Client, v6: bool) -> A<'w> {
        let w = self.world;
        if v6 {
            &w.resolver_v6
        } else if c.v4.zeek.starts_with("192.168.") {
            &w.resolvers[2]
        } else {
            &w.resolvers[(self.rng.random_range(0..10) > 7) as usize]
        }
    }

    /// A DNS connection from client to resolver carrying `txs`.
    fn dns_flow(
        &mut self,
        t: i64,
        c: &'w model::Client,
        v6: bool,
        txs: Vec<DnsTx<'w>>,
    ) -> Flow<'w> {
        let orig = if v6 {
            c.v6.as_ref().unwrap_or(&c.v4)
        } else {
            &c.v4
        };
        let resp = self.resolver(c, v6);
        let q: u64 = txs.iter().map(|d| 17 + d.query.len() as u64 + 12).sum();
        let answered = txs.iter().filter(|d| d.rcode.is_some()).count() as u64;
        let r: u64 = txs
            .iter()
            .filter(|d| d.rcode.is_some())
            .map(|d| {
                29 + d.query.len() as u64
                    + d.answers
                        .iter()
                        .map(|a| 12 + a.text.len() as u64)
                        .sum::<u64>()
            })
            .sum();
        let last = txs
            .iter()
            .map(|d| d.ts - t + d.rtt.unwrap_or(0))
            .max()
            .unwrap_or(0);
        let sp = self.ephemeral();
        let (dur, ob, rb, state, hist) = if answered == 0 {
            (
                if txs.len() > 1 {
                    Some(last.max(1))
                } else {
                    None
                },
                if txs.len() > 1 { Some(q) } else { None },
                if txs.len() > 1 { Some(0) } else { None },
                "S0",
                "D",
            )
        } else {
            (Some(last.max(1)), Some(q), Some(r), "SF", "Dd")
        };
        let mut f = self.flow(
            t,
            orig,
            resp,
            sp,
            53,
            Proto::Udp,
            "dns",
            dur,
            ob,
            rb,
            state,
            hist,
            App::Dns(txs),
        );
        if answered == 0 {
            // Unanswered UDP: Zeek still counts the packets it saw.
            f.orig_pkts = f.orig_pkts.max(1);
        }
        f
    }

    fn dns_tx(
        &mut self,
        t: i64,
        query: std::borrow::Cow<'w, str>,
        qtype: (u16, &'static str),
        site: Option<&'w model::Site>,
    ) -> DnsTx<'w> {
        let rtt_local = self.rng.random_bool(0.7);
        let rtt = if rtt_local {
            (lognormal(&mut self.rng, 6.5, 0.6)) as i64 // ~0.7 ms cached
        } else {
            (lognormal(&mut self.rng, 10.0, 0.8)) as i64 // ~22 ms recursive
        };
        let no_reply = self.rng.random_bool(0.03);
        let mut answers = Vec::new();
        let rcode = if no_reply {
            None
        } else if let Some(s) = site {
            let mut ttl = s.ttl;
            if rtt_local {
                // Cached answers carry the remaining TTL.
                ttl = self.rng.random_range(1..=s.ttl.max(1));
            }
            if let Some(cn) = &s.cname {
                answers.push(DnsAnswer {
                    text: std::borrow::Cow::Borrowed(cn),
                    rrtype: "CNAME",
                    ttl: ttl.clamp(300, 3600),
                });
            }
            match qtype.0 {
                1 => {
                    for a in &s.v4 {
                        answers.push(DnsAnswer {
                            text: std::borrow::Cow::Borrowed(&a.zeek),
                            rrtype: "A",
                            ttl,
                        })
                    }
                }
                28 => {
                    for a in &s.v6 {
                        answers.push(DnsAnswer {
                            text: std::borrow::Cow::Borrowed(&a.zeek),
                            rrtype: "AAAA",
                            ttl,
                        })
                    }
                }
                _ => {}
            }
            Some((0, "NOERROR"))
        } else {
            None
        };
        DnsTx {
            ts: t,
            trans_id: self.rng.random(),
            rtt: rcode.map(|_| rtt.max(50)),
            query,
            qtype: qtype.0,
            qtype_name: qtype.1,
            rcode,
            aa: false,
            rd: true,
            ra: rcode.is_some(),
            answers,
        }
    }

    fn web(&mut self, t: i64, out: &mut Vec<Flow<'w>>) {
        let w = self.world;
        let c = self.client();
        let si = w.site_zipf.sample(&mut self.rng);
        let site = &w.sites[si];
        let v6c = self.want_v6(c);
        let v6 = v6c.is_some() && !site.v6.is_empty();
        let mut t = t;
        // Half the visits need a lookup first (the rest hit the client's cache).
        if self.rng.random_bool(0.5) {
            let mut txs = vec![self.dns_tx(
                t,
                std::borrow::Cow::Borrowed(&site.domain),
                (1, "A"),
                Some(site),
            )];
            if c.v6.is_some() || self.rng.random_bool(0.3) {
                let t2 = t + self.rng.random_range(5..200);
                txs.push(self.dns_tx(
                    t2,
                    std::borrow::Cow::Borrowed(&site.domain),
                    (28, "AAAA"),
                    Some(site),
                ));
            } else if self.rng.random_bool(0.15) {
                let t2 = t + self.rng.random_range(5..200);
                txs.push(self.dns_tx(
                    t2,
                    std::borrow::Cow::Borrowed(&site.domain),
                    (65, "HTTPS"),
                    Some(site),
                ));
            }
            let dv6 = c.v6.is_some() && self.rng.random_bool((self.ipv6_share * 3.0).min(1.0));
            let f = self.dns_flow(t, c, dv6, txs);
            t = f.end() + self.rng.random_range(200..5000);
            out.push(f);
        }
        let orig: A<'w> = if v6 { v6c.unwrap_or(&c.v4) } else { &c.v4 };
        let resp: A<'w> = if v6 {
            &site.v6[self.rng.random_range(0..site.v6.len())]
        } else {
            &site.v4[self.rng.random_range(0..site.v4.len())]
        };
        let sp = self.ephemeral();
        let tls = self.rng.random_range(0..100) < site.tls_pct;
        // A small share of web attempts fail (RST, no answer).
        let failed = self.rng.random_bool(0.04);
        if failed {
            let (state, hist, dur) = pick(
                &mut self.rng,
                &[
                    (("S0", "S", None), 50),
                    (("REJ", "Sr", Some(60_000)), 20),
                    (("SH", "ShAF", Some(400_000)), 10),
                    (("RSTR", "ShADr", Some(900_000)), 20),
                ],
            );
            let port = if tls { 443 } else { 80 };
            let (ob, rb) = if dur.is_some() {
                (Some(0), Some(0))
            } else {
                (None, None)
            };
            let f = self.flow(
                t,
                orig,
                resp,
                sp,
                port,
                Proto::Tcp,
                "-",
                dur,
                ob,
                rb,
                state,
                hist,
                App::None,
            );
            out.push(f);
            return;
        }
        if tls {
            let v13 = site.tls13 && self.rng.random_bool(0.9);
            let resumed = !v13 && self.rng.random_bool(0.2);
            let tx = TlsTx {
                ts: t + self.rng.random_range(20_000..120_000),
                version: if v13 { "TLSv13" } else { "TLSv12" },
                cipher: if v13 {
                    pick(&mut self.rng, TLS13_CIPHERS)
                } else {
                    pick(&mut self.rng, TLS12_CIPHERS)
                },
                curve: if self.rng.random_bool(0.9) {
                    Some(if self.rng.random_bool(0.75) {
                        "x25519"
                    } else {
                        "secp256r1"
                    })
                } else {
                    None
                },
                sni: if self.rng.random_bool(0.97) {
                    Some(&site.domain)
                } else {
                    None
                },
                resumed,
                next_protocol: if site.h2 {
                    Some("h2")
                } else if self.rng.random_bool(0.5) {
                    Some("http/1.1")
                } else {
                    None
                },
                established: self.rng.random_bool(0.97),
                history: if v13 || resumed {
                    "CsiI"
                } else {
                    one(&mut self.rng, &["CsxknGIi", "CsxknGIti", "CsxnGIi"])
                },
                cert_fps: if v13 || resumed {
                    None
                } else {
                    Some(&site.cert_fps)
                },
                sni_matches: if v13 || resumed {
                    None
                } else {
                    Some(self.rng.random_bool(0.98))
                },
                validation: if v13 || resumed {
                    None
                } else if self.rng.random_bool(0.95) {
                    Some("ok")
                } else {
                    Some(one(
                        &mut self.rng,
                        &[
                            "unable to get local issuer certificate",
                            "self signed certificate",
                            "certificate has expired",
                        ],
                    ))
                },
            };
            let ob = lognormal(&mut self.rng, 7.3, 1.2) as u64 + 517;
            let rb = lognormal(&mut self.rng, 9.0, 1.8) as u64 + 3000;
            let dur = (lognormal(&mut self.rng, 13.0, 1.6) as i64).max(30_000);
            let hist = pick(
                &mut self.rng,
                &[
                    ("ShADadFf", 45),
                    ("ShADadfF", 25),
                    ("ShADdaFf", 10),
                    ("ShADadFfR", 8),
                    ("ShADadR", 5),
                    ("ShADad", 7),
                ],
            );
            let state = match hist {
                "ShADadR" => "RSTO",
                "ShADad" => "S1",
                _ => "SF",
            };
            let mut f = self.flow(
                t,
                orig,
                resp,
                sp,
                443,
                Proto::Tcp,
                "ssl",
                Some(dur),
                Some(ob),
                Some(rb),
                state,
                hist,
                App::Tls(tx),
            );
            if self.rng.random_bool(0.005) {
                f.missed_bytes = self.rng.random_range(1..20_000);
            }
            out.push(f);
        } else {
            let port = pick(&mut self.rng, &[(80u16, 94), (8080, 5), (8000, 1)]);
            let n = 1 + (exp(&mut self.rng, 1.3) as u32).min(40);
            let ua = USER_AGENTS[(if self.rng.random_bool(0.8) {
                c.ua
            } else {
                c.ua2
            }) as usize];
            let ip_host = self.rng.random_bool(0.05);
            let mut txs = Vec::with_capacity(n as usize);
            let mut tt = t + self.rng.random_range(1_000..60_000);
            let mut ob = 0u64;
            let mut rb = 0u64;
            for depth in 1..=n {
                let pi = site.path_zipf.sample(&mut self.rng);
                let (path, kind) = &site.paths[pi];
                let (_, mime, mu, _) = FILE_KINDS[*kind as usize];
                let method = pick(
                    &mut self.rng,
                    &[
                        ("GET", 900),
                        ("POST", 70),
                        ("HEAD", 15),
                        ("OPTIONS", 5),
                        ("PUT", 3),
                    ],
                );
                let status = if self.rng.random_bool(0.005) {
                    None
                } else {
                    Some(pick(&mut self.rng, STATUS))
                };
                let mut uri = path.to_string();
                if self.rng.random_bool(0.25) {
                    // Query strings: session ids, cache busters, API parameters.
                    let k = one(
                        &mut self.rng,
                        &[
                            "id",
                            "v",
                            "q",
                            "t",
                            "session",
                            "cb",
                            "page",
                            "ref",
                            "utm_source",
                        ],
                    );
                    let v: u32 = self
                        .rng
                        .random_range(0..if k == "page" { 50 } else { 10_000_000 });
                    uri.push('?');
                    uri.push_str(k);
                    uri.push('=');
                    uri.push_str(&v.to_string());
                }
                let req_len = if method == "POST" || method == "PUT" {
                    lognormal(&mut self.rng, 7.0, 1.5) as u64
                } else {
                    0
                };
                let body = match status {
                    Some((200, _)) | Some((206, _)) => lognormal(&mut self.rng, mu, 1.0) as u64 + 1,
                    Some((404, _)) | Some((500, _)) | Some((403, _)) => {
                        lognormal(&mut self.rng, 6.5, 0.5) as u64
                    }
                    Some((301, _)) | Some((302, _)) => self.rng.random_range(0..400),
                    _ => 0,
                };
                let body = if method == "HEAD" { 0 } else { body };
                let xfer =
                    (body as f64 / 2_000.0) as i64 * 1000 + self.rng.random_range(2_000..80_000);
                let file = if body > 0 && self.rng.random_bool(0.33) {
                    let mut md5 = [0u8; 16];
                    let mut sha1 = [0u8; 20];
                    w.file_hashes(si, pi, &mut md5, &mut sha1);
                    Some(FileTx {
                        fuid: self.uid(),
                        ts: tt + xfer / 2,
                        duration: xfer / 2,
                        mime,
                        size: body,
                        md5,
                        sha1,
                        filename: None,
                    })
                } else {
                    None
                };
                let referrer = if depth > 1 || self.rng.random_bool(0.3) {
                    Some(format!("http://{}/", site.domain))
                } else {
                    None
                };
                ob += 150 + ua.len() as u64 + site.domain.len() as u64 + uri.len() as u64 + req_len;
                rb += 250 + body;
                txs.push(HttpTx {
                    ts: tt,
                    done: tt + xfer,
                    depth,
                    method,
                    host: if ip_host { &resp.zeek } else { &site.domain },
                    uri,
                    referrer,
                    user_agent: ua,
                    req_len,
                    resp_len: body,
                    status,
                    mime,
                    file,
                });
                tt += xfer + self.rng.random_range(500..400_000);
            }
            let dur = tt - t + self.rng.random_range(1_000..15_000_000);
            let hist = pick(
                &mut self.rng,
                &[
                    ("ShADadFf", 50),
                    ("ShADadfF", 25),
                    ("ShADadFfR", 10),
                    ("ShADadR", 5),
                    ("ShADadr", 5),
                    ("ShADad", 5),
                ],
            );
            let state = match hist {
                "ShADadR" => "RSTO",
                "ShADadr" => "RSTR",
                "ShADad" => "S1",
                _ => "SF",
            };
            let ua_alert = match ua {
                u if u.starts_with("curl/") => Some(0),
                u if u.starts_with("Debian APT") => Some(1),
                _ => None,
            };
            let mut f = self.flow(
                t,
                orig,
                resp,
                sp,
                port,
                Proto::Tcp,
                "http",
                Some(dur),
                Some(ob),
                Some(rb),
                state,
                hist,
                App::Http(txs),
            );
            f.alert = ua_alert;
            out.push(f);
        }
    }

    fn dns_background(&mut self, t: i64, out: &mut Vec<Flow<'w>>) {
        let w = self.world;
        let c = self.client();
        let v6 = c.v6.is_some() && self.rng.random_bool((self.ipv6_share * 3.0).min(1.0));
        let n = if self.rng.random_bool(0.2) { 2 } else { 1 };
        let mut txs = Vec::with_capacity(n);
        let mut tt = t;
        for _ in 0..n {
            let r = self.rng.random_range(0..100);
            let tx = if r < 55 {
                let site = &w.sites[w.site_zipf.sample(&mut self.rng)];
                let qt = pick(
                    &mut self.rng,
                    &[
                        ((1u16, "A"), 60),
                        ((28, "AAAA"), 30),
                        ((65, "HTTPS"), 6),
                        ((16, "TXT"), 2),
                        ((15, "MX"), 2),
                    ],
                );
                let mut tx =
                    self.dns_tx(tt, std::borrow::Cow::Borrowed(&site.domain), qt, Some(site));
                if qt.0 == 16 || qt.0 == 15 || qt.0 == 65 {
                    tx.answers.retain(|a| a.rrtype == "CNAME");
                    if qt.0 == 16 && tx.rcode.is_some() {
                        tx.answers.push(DnsAnswer {
                            text: std::borrow::Cow::Borrowed("v=spf1 include:_spf.google.com ~all"),
                            rrtype: "TXT",
                            ttl: 300,
                        });
                    }
                }
                tx
            } else if r < 70 {
                // Search-list expansion: the resolver says NXDOMAIN.
                let site = &w.sites[w.site_zipf.sample(&mut self.rng)];
                let q = format!("{}.{}", site.domain, w.ad_domain);
                let mut tx = self.dns_tx(tt, std::borrow::Cow::Owned(q), (1, "A"), None);
                if !self.rng.random_bool(0.03) {
                    tx.rcode = Some((3, "NXDOMAIN"));
                    tx.rtt = Some(lognormal(&mut self.rng, 6.8, 0.5) as i64);
                    tx.ra = true;
                }
                tx
            } else if r < 82 {
                // Reverse lookups of internal and external peers.
                let target: &Addr = if self.rng.random_bool(0.5) {
                    &w.clients[w.client_zipf.sample(&mut self.rng)].v4
                } else {
                    let s = &w.sites[w.site_zipf.sample(&mut self.rng)];
                    &s.v4[0]
                };
                let q = match target.ip {
                    std::net::IpAddr::V4(a) => {
                        let o = a.octets();
                        format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0])
                    }
                    std::net::IpAddr::V6(_) => "ip6.arpa".to_string(),
                };
                let local = target.local;
                let mut tx = self.dns_tx(tt, std::borrow::Cow::Owned(q), (12, "PTR"), None);
                if !self.rng.random_bool(0.03) {
                    tx.rtt =
                        Some(lognormal(&mut self.rng, if local { 6.5 } else { 10.5 }, 0.7) as i64);
                    tx.ra = true;
                    if self.rng.random_bool(0.6) {
                        tx.rcode = Some((0, "NOERROR"));
                        let name = if local {
                            format!("host-{}.{}", self.rng.random_range(1..5000), w.ad_domain)
                        } else {
                            format!(
                                "{}.static.{}",
                                self.rng.random_range(1..250),
                                one(
                                    &mut self.rng,
                                    &[
                                        "cloudfront.net",
                                        "akamaitechnologies.com",
                                        "1e100.net",
                                        "amazonaws.com"
                                    ]
                                )
                            )
                        };
                        tx.answers.push(DnsAnswer {
                            text: std::borrow::Cow::Owned(name),
                            rrtype: "PTR",
                            ttl: 3600,
                        });
                    } else {
                        tx.rcode = Some((3, "NXDOMAIN"));
                    }
                }
                tx
            } else if r < 92 {
                // Active Directory service discovery.
                let q = format!(
                    "{}.{}",
                    one(
                        &mut self.rng,
                        &[
                            "_ldap._tcp.dc._msdcs",
                            "_kerberos._tcp",
                            "_ldap._tcp.Default-First-Site-Name._sites.dc._msdcs",
                            "_gc._tcp"
                        ]
                    ),
                    w.ad_domain
                );
                let mut tx = self.dns_tx(tt, std::borrow::Cow::Owned(q), (33, "SRV"), None);
                if tx.rtt.is_some() || !self.rng.random_bool(0.03) {
                    tx.rtt = Some(lognormal(&mut self.rng, 6.3, 0.5) as i64);
                    tx.rcode = Some((0, "NOERROR"));
                    tx.ra = true;
                    tx.aa = true;
                    for k in 0..2 {
                        tx.answers.push(DnsAnswer {
                            text: std::borrow::Cow::Owned(format!("dc{}.{}", k + 1, w.ad_domain)),
                            rrtype: "SRV",
                            ttl: 600,
                        });
                    }
                }
                tx
            } else {
                // Typos, dead domains, DGA-looking names.
                let mut q = String::new();
                for _ in 0..self.rng.random_range(8..16) {
                    q.push((b'a' + self.rng.random_range(0..26)) as char);
                }
                q.push_str(one(
                    &mut self.rng,
                    &[".com", ".net", ".info", ".biz", ".ru", ".top"],
                ));
                let mut tx = self.dns_tx(tt, std::borrow::Cow::Owned(q), (1, "A"), None);
                if !self.rng.random_bool(0.05) {
                    tx.rtt = Some(lognormal(&mut self.rng, 10.5, 0.7) as i64);
                    tx.rcode = Some(if self.rng.random_bool(0.95) {
                        (3, "NXDOMAIN")
                    } else {
                        (2, "SERVFAIL")
                    });
                    tx.ra = true;
                }
                tx
            };
            tt += self.rng.random_range(10..5_000);
            txs.push(tx);
        }
        let f = self.dns_flow(t, c, v6, txs);
        out.push(f);
    }

    fn local(&mut self, t: i64, out: &mut Vec<Flow<'w>>) {
        // mDNS service discovery to the multicast group; Zeek logs it as dns.
        let c = self.client();
        let q = one(
            &mut self.rng,
            &[
                "_services._dns-sd._udp.local",
                "_googlecast._tcp.local",
                "_airplay._tcp.local",
                "_spotify-connect._tcp.local",
                "_companion-link._tcp.local",
            ],
        );
        let tx = DnsTx {
            ts: t,
            trans_id: 0,
            rtt: None,
            query: std::borrow::Cow::Borrowed(q),
            qtype: 12,
            qtype_name: "PTR",
            rcode: None,
            aa: false,
            rd: false,
            ra: false,
            answers: Vec::new(),
        };
        let v6 = self.rng.random_bool(0.2) && c.v6.is_some();
        let src = if v6 {
            c.v6.as_ref().unwrap_or(&c.v4)
        } else {
            &c.v4
        };
        let dst: &'w Addr = if v6 {
            &self.world.mdns6
        } else {
            &self.world.mdns4
        };
        let f = self.flow(
            t,
            src,
            dst,
            5353,
            5353,
            Proto::Udp,
            "dns",
            None,
            None,
            None,
            "S0",
            "D",
            App::Dns(vec![tx]),
        );
        out.push(f);
    }

    fn internal(&mut self, t: i64, out: &mut Vec<Flow<'w>>) {
        let w = self.world;
        let c = self.client();
        let srv = &w.servers[(w.client_zipf.sample(&mut self.rng)) % w.servers.len()];
        let sp = self.ephemeral();
        let (port, proto, service) = pick(
            &mut self.rng,
            &[
                ((445u16, Proto::Tcp, "smb,gssapi"), 30),
                ((88, Proto::Udp, "krb"), 15),
                ((88, Proto::Tcp, "krb_tcp"), 10),
                ((389, Proto::Tcp, "ldap"), 15),
                ((135, Proto::Tcp, "dce_rpc"), 8),
                ((3389, Proto::Tcp, "-"), 6),
                ((22, Proto::Tcp, "ssh"), 6),
                ((443, Proto::Tcp, "ssl"), 6),
                ((3268, Proto::Tcp, "ldap"), 4),
            ],
        );
        let dur = (lognormal(
            &mut self.rng,
            if port == 3389 || port == 22 {
                17.0
            } else {
                11.5
            },
            1.5,
        ) as i64)
            .max(200);
        let ob = lognormal(&mut self.rng, 7.5, 1.4) as u64 + 40;
        let rb = lognormal(&mut self.rng, 8.0, 1.6) as u64 + 40;
        let (state, hist) = if proto == Proto::Udp {
            ("SF", "Dd")
        } else {
            pick(
                &mut self.rng,
                &[
                    (("SF", "ShADadFf"), 60),
                    (("SF", "ShADadfF"), 20),
                    (("S1", "ShADad"), 8),
                    (("RSTO", "ShADadR"), 7),
                    (("RSTR", "ShADadr"), 5),
                ],
            )
        };
        let f = self.flow(
            t,
            &c.v4,
            srv,
            sp,
            port,
            proto,
            service,
            Some(dur),
            Some(ob),
            Some(rb),
            state,
            hist,
            App::None,
        );
        out.push(f);
    }

    fn other(&mut self, t: i64, out: &mut Vec<Flow<'w>>) {
        let w = self.world;
        let c = self.client();
        let r = self.rng.random_range(0..100);
        if r < 25 {
            let srv = &w.ntp[self.rng.random_range(0..w.ntp.len())];
            let dur = self.rng.random_range(10_000..90_000);
            let f = self.flow(
                t,
                &c.v4,
                srv,
                123,
                123,
                Proto::Udp,
                "ntp",
                Some(dur),
                Some(48),
                Some(48),
                "SF",
                "Dd",
                App::None,
            );
            out.push(f);
        } else if r < 45 {
            // QUIC to big sites.
            let site = &w.sites[w.site_zipf.sample(&mut self.rng) % 40];
            let sp = self.ephemeral();
            let dur = lognormal(&mut self.rng, 14.0, 1.5) as i64;
            let ob = lognormal(&mut self.rng, 8.5, 1.0) as u64 + 1250;
            let rb = lognormal(&mut self.rng, 10.5, 1.8) as u64 + 1250;
            let f = self.flow(
                t,
                &c.v4,
                &site.v4[0],
                sp,
                443,
                Proto::Udp,
                "quic",
                Some(dur),
                Some(ob),
                Some(rb),
                "SF",
                "Dd",
                App::None,
            );
            out.push(f);
        } else if r < 60 {
            let v6 = self.rng.random_bool(0.2) && c.v6.is_some();
            let site = &w.sites[w.site_zipf.sample(&mut self.rng) % 200];
            let (src, dst) = if v6 && !site.v6.is_empty() {
                (c.v6.as_ref().unwrap_or(&c.v4), &site.v6[0])
            } else {
                (&c.v4, &site.v4[0])
            };
            let n = self.rng.random_range(1..5u64);
            let typ = if dst.is_v6() { 128 } else { 8 };
            let lost = self.rng.random_bool(0.1);
            let mut f = self.flow(
                t,
                src,
                dst,
                typ,
                0,
                Proto::Icmp,
                "-",
                Some((n as i64 - 1) * 1_000_000 + 20_000),
                Some(n * 56),
                Some(if lost { 0 } else { n * 56 }),
                "OTH",
                "-",
                App::None,
            );
            f.orig_pkts = n;
            f.resp_pkts = if lost { 0 } else { n };
            let h = if dst.is_v6() { 48 } else { 28 };
            f.orig_ip_bytes = n * (56 + h);
            f.resp_ip_bytes = f.resp_pkts * (56 + h);
            out.push(f);
        } else {
            // Unknown TCP/UDP to random public peers and high ports.
            let peer: &'w Addr = &w.peers[w.client_zipf.sample(&mut self.rng) % w.peers.len()];
            let port = pick(
                &mut self.rng,
                &[
                    (5228u16, 20),
                    (8443, 15),
                    (6881, 8),
                    (993, 10),
                    (5223, 10),
                    (1194, 5),
                    (4070, 5),
                    (9000, 5),
                    (51820, 5),
                    (25565, 2),
                ],
            );
            let proto = if port == 1194 || port == 51820 || port == 6881 {
                Proto::Udp
            } else {
                Proto::Tcp
            };
            let sp = self.ephemeral();
            let dur = lognormal(&mut self.rng, 14.0, 2.0) as i64;
            let ob = lognormal(&mut self.rng, 7.0, 2.0) as u64;
            let rb = lognormal(&mut self.rng, 7.5, 2.2) as u64;
            let (state, hist) = if proto == Proto::Udp {
                ("SF", "Dd")
            } else {
                pick(
                    &mut self.rng,
                    &[
                        (("SF", "ShADadFf"), 40),
                        (("S1", "ShADad"), 15),
                        (("OTH", "DadA"), 10),
                        (("S0", "S"), 10),
                        (("RSTO", "ShADadR"), 10),
                        (("SH", "ShAF"), 5),
                        (("S3", "ShADadf"), 5),
                        (("RSTOS0", "ShR"), 5),
                    ],
                )
            };
            let (dur, ob, rb) = if state == "S0" {
                (None, None, None)
            } else {
                (Some(dur), Some(ob), Some(rb))
            };
            let service = if port == 993 && state != "S0" {
                "ssl"
            } else {
                "-"
            };
            let f = self.flow(
                t,
                &c.v4,
                peer,
                sp,
                port,
                proto,
                service,
                dur,
                ob,
                rb,
                state,
                hist,
                App::None,
            );
            out.push(f);
        }
    }

    fn scan(&mut self, t: i64, out: &mut Vec<Flow<'w>>) {
        let w = self.world;
        let sc = &w.scanners[w.client_zipf.sample(&mut self.rng) % w.scanners.len()];
        let target = &w.clients[self.rng.random_range(0..w.clients.len())].v4;
        let port = pick(
            &mut self.rng,
            &[
                (22u16, 20),
                (23, 15),
                (445, 10),
                (3389, 10),
                (80, 8),
                (443, 6),
                (1433, 5),
                (3306, 5),
                (5900, 4),
                (8080, 5),
                (2323, 3),
                (5060, 3),
                (6379, 2),
                (9200, 2),
                (37215, 2),
            ],
        );
        let sp = self.rng.random_range(1024..65535);
        let (state, hist, dur) = pick(
            &mut self.rng,
            &[
                (("S0", "S", None), 70),
                (("REJ", "Sr", Some(300)), 25),
                (("RSTOS0", "ShR", Some(150_000)), 5),
            ],
        );
        let (ob, rb) = if dur.is_some() {
            (Some(0), Some(0))
        } else {
            (None, None)
        };
        let proto = if port == 5060 { Proto::Udp } else { Proto::Tcp };
        let (state, hist) = if proto == Proto::Udp {
            ("S0", "D")
        } else {
            (state, hist)
        };
        let mut f = self.flow(
            t,
            sc,
            target,
            sp,
            port,
            proto,
            "-",
            dur,
            ob,
            rb,
            state,
            hist,
            App::None,
        );
        f.alert = match port {
            22 if self.rng.random_bool(0.1) => Some(5),
            1433 => Some(6),
            3306 => Some(7),
            5900 => Some(8),
            _ => None,
        };
        out.push(f);
    }
}
