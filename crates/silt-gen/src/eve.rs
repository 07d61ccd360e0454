//! Suricata 7 EVE JSON rendering (one JSON object per line): alert, flow, dns (v2 query and
//! answer records), http, tls, fileinfo, anomaly and periodic stats events, fed from the shared
//! flow simulation.
//!
//! Touches only the [`Write`] sink it is handed. Follows Suricata 7 conventions: timestamps with
//! a `+0000` offset, IPv6 addresses fully expanded, `community_id` on every flow-bound event,
//! `flow_id` an unsigned 64-bit integer (about 10% of generated ids are >= 2^53, and some
//! > i64::MAX, so readers must not go through `f64` or `i64`).

use std::io::Write;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::flows::{App, Flow, FlowGen, Proto, ALERTS, KINDS};
use crate::fmt::{self, EveClock};
use crate::model::{community_id, World};
use crate::out::Pending;
use crate::GenOptions;

/// EVE event types the generator writes.
pub const EVE_TYPES: [&str; 8] = [
    "alert", "flow", "dns", "http", "tls", "fileinfo", "anomaly", "stats",
];

const ALERT: usize = 0;
const FLOW: usize = 1;
const DNS: usize = 2;
const HTTP: usize = 3;
const TLS: usize = 4;
const FILEINFO: usize = 5;
const ANOMALY: usize = 6;
const STATS: usize = 7;

/// Suricata's stats interval (`stats.interval: 8` in the default suricata.yaml).
const STATS_INTERVAL: i64 = 8_000_000;

/// JSON string body escaping (quotes, backslashes, control characters).
fn js(buf: &mut Vec<u8>, s: &str) {
    buf.push(b'"');
    for &c in s.as_bytes() {
        match c {
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            c if c < 0x20 => buf.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => buf.push(c),
        }
    }
    buf.push(b'"');
}

struct Ctx {
    clock: EveClock,
    clock2: EveClock,
    clock3: EveClock,
    listed: [bool; 8],
    left: u64,
    counts: Counters,
}

#[derive(Default)]
struct Counters {
    pkts: u64,
    bytes: u64,
    ipv4: u64,
    ipv6: u64,
    tcp: u64,
    udp: u64,
    icmp4: u64,
    icmp6: u64,
    flows_tcp: u64,
    flows_udp: u64,
    flows_icmp: u64,
    alerts: u64,
    app_http: u64,
    app_tls: u64,
    app_dns: u64,
    tx_http: u64,
    tx_tls: u64,
    tx_dns: u64,
}

impl Ctx {
    #[inline]
    fn take(&mut self, t: usize) -> bool {
        if self.listed[t] && self.left > 0 {
            self.left -= 1;
            true
        } else {
            false
        }
    }

    /// `{"timestamp":..,"flow_id":..,"in_iface":"eth0","event_type":..,` + 5-tuple.
    fn head(&mut self, b: &mut Vec<u8>, ts: i64, fid: u64, et: &str, f: &Flow, reverse: bool) {
        b.extend_from_slice(b"{\"timestamp\":\"");
        self.clock.write(b, ts);
        b.extend_from_slice(b"\",\"flow_id\":");
        fmt::u64(b, fid);
        b.extend_from_slice(b",\"in_iface\":\"eth0\",\"event_type\":\"");
        b.extend_from_slice(et.as_bytes());
        b.extend_from_slice(b"\",");
        let (s, d, sp, dp) = if reverse {
            (f.resp, f.orig, f.resp_p, f.orig_p)
        } else {
            (f.orig, f.resp, f.orig_p, f.resp_p)
        };
        b.extend_from_slice(b"\"src_ip\":\"");
        b.extend_from_slice(s.eve.as_bytes());
        if f.proto == Proto::Icmp {
            b.extend_from_slice(b"\",\"dest_ip\":\"");
            b.extend_from_slice(d.eve.as_bytes());
            b.extend_from_slice(b"\",\"proto\":\"");
            b.extend_from_slice(if f.orig.is_v6() {
                b"IPv6-ICMP"
            } else {
                b"ICMP"
            });
            b.extend_from_slice(b"\",\"icmp_type\":");
            fmt::u64(b, sp as u64);
            b.extend_from_slice(b",\"icmp_code\":0");
        } else {
            b.extend_from_slice(b"\",\"src_port\":");
            fmt::u64(b, sp as u64);
            b.extend_from_slice(b",\"dest_ip\":\"");
            b.extend_from_slice(d.eve.as_bytes());
            b.extend_from_slice(b"\",\"dest_port\":");
            fmt::u64(b, dp as u64);
            b.extend_from_slice(if f.proto == Proto::Tcp {
                b",\"proto\":\"TCP\""
            } else {
                b",\"proto\":\"UDP\""
            });
        }
    }
}

fn app_proto(f: &Flow) -> Option<&'static str> {
    match (&f.app, f.service) {
        (App::Dns(_), _) => Some("dns"),
        (App::Http(_), _) => Some("http"),
        (App::Tls(_), _) => Some("tls"),
        (_, "ssl") => Some("tls"),
        (_, "smb,gssapi") => Some("smb"),
        (_, "krb" | "krb_tcp") => Some("krb5"),
        (_, "ssh") => Some("ssh"),
        (_, "ntp") => Some("ntp"),
        (_, "quic") => Some("quic"),
        (_, "dce_rpc") => Some("dcerpc"),
        (_, "ldap") => Some("ldap"),
        _ if f.proto == Proto::Tcp && f.orig_bytes.unwrap_or(0) > 0 => Some("failed"),
        _ => None,
    }
}

fn cid(b: &mut Vec<u8>, f: &Flow) {
    let (sp, dp) = if f.proto == Proto::Icmp {
        (f.orig_p, 0)
    } else {
        (f.orig_p, f.resp_p)
    };
    let id = community_id(
        &f.orig.ip,
        &f.resp.ip,
        sp,
        dp,
        f.proto.number(f.orig.is_v6()),
    );
    b.extend_from_slice(b",\"community_id\":\"");
    b.extend_from_slice(id.as_bytes());
    b.push(b'"');
}

/// Writes `events` EVE lines (only the event types in `types`, `None` = all) to `w`.
pub(crate) fn run(
    w: &mut dyn Write,
    events: u64,
    opts: &GenOptions,
    types: [bool; 8],
) -> anyhow::Result<u64> {
    let mut rng = SmallRng::seed_from_u64(opts.seed);
    let world = World::new(&mut rng);
    let mut gen = FlowGen::new(
        &world,
        SmallRng::seed_from_u64(rng.random()),
        opts.ipv6_share,
        KINDS.to_vec(),
    );
    let mut jitter = SmallRng::seed_from_u64(opts.seed ^ 0xe7e);
    let mut pend = Pending::new(vec![Some(w)]);
    let mut cx = Ctx {
        clock: EveClock::default(),
        clock2: EveClock::default(),
        clock3: EveClock::default(),
        listed: types,
        left: events,
        counts: Counters::default(),
    };
    let t0 = opts.start_micros;
    let span = opts.span_secs.max(1) as f64 * 1e6;
    let gap = (span / events.max(1) as f64).max(1.0);
    let mut next_stats = t0 + STATS_INTERVAL;
    let mut flows = Vec::with_capacity(8);
    // With only stats requested, flows consume no budget: step the clock by stats intervals.
    let stats_only = types.iter().enumerate().all(|(i, &on)| on == (i == STATS));
    while cx.left > 0 {
        let done = (events - cx.left) as f64;
        let t = if stats_only {
            next_stats
        } else {
            t0 + (span * done / events as f64) as i64
                + jitter.random_range(0..(gap * 2.0) as i64 + 1)
        };
        while t >= next_stats && cx.left > 0 {
            if cx.take(STATS) {
                let mut b = pend.buf();
                stats(&mut cx, &mut b, next_stats, t0);
                pend.push(0, next_stats, b);
            }
            next_stats += STATS_INTERVAL;
        }
        flows.clear();
        gen.group(t, &mut flows);
        for f in &flows {
            let fid: u64 = if jitter.random_bool(0.1) {
                jitter.random::<u64>() | (1 << 53)
            } else {
                jitter.random::<u64>() & ((1 << 51) - 1)
            };
            render(&mut cx, &mut pend, f, fid, &mut jitter);
        }
        pend.flush_until(t)?;
    }
    pend.flush_all()?;
    let n = pend.stats[0].records;
    if let Some(w) = pend.sinks[0].as_mut() {
        w.flush()?;
    }
    Ok(n)
}

fn stats(cx: &mut Ctx, b: &mut Vec<u8>, ts: i64, t0: i64) {
    let c = &cx.counts;
    b.extend_from_slice(b"{\"timestamp\":\"");
    cx.clock3.write(b, ts);
    let mut s = String::with_capacity(900);
    use std::fmt::Write as _;
    let avg = c.bytes.checked_div(c.pkts).unwrap_or(0);
    let _ = writeln!(
        s,
        "\",\"event_type\":\"stats\",\"stats\":{{\"uptime\":{},\"capture\":{{\"kernel_packets\":{},\"kernel_drops\":{},\"errors\":0,\"afpacket\":{{\"busy_loop_avg\":0,\"polls\":{},\"poll_signal\":0,\"poll_timeout\":{},\"poll_data\":{},\"poll_errors\":0,\"send_errors\":0}}}},\
\"decoder\":{{\"pkts\":{},\"bytes\":{},\"invalid\":{},\"ipv4\":{},\"ipv6\":{},\"ethernet\":{},\"arp\":0,\"unknown_ethertype\":0,\"tcp\":{},\"udp\":{},\"sctp\":0,\"esp\":0,\"icmpv4\":{},\"icmpv6\":{},\"vlan\":0,\"avg_pkt_size\":{},\"max_pkt_size\":1514}},\
\"flow\":{{\"total\":{},\"active\":{},\"tcp\":{},\"udp\":{},\"icmpv4\":{},\"icmpv6\":0,\"tcp_reuse\":0,\"memuse\":{}}},\
\"detect\":{{\"engines\":[{{\"id\":0,\"last_reload\":\"{}\",\"rules_loaded\":43512,\"rules_failed\":3,\"rules_skipped\":0}}],\"alert\":{},\"alert_queue_overflow\":0,\"alerts_suppressed\":0}},\
\"app_layer\":{{\"flow\":{{\"http\":{},\"tls\":{},\"dns_udp\":{},\"failed_tcp\":0}},\"tx\":{{\"http\":{},\"tls\":{},\"dns_udp\":{}}}}}}}}}",
        (ts - t0) / 1_000_000,
        c.pkts,
        c.pkts / 20_000,
        c.pkts / 64 + 1,
        (ts - t0) / 1_000_000,
        c.pkts / 64,
        c.pkts,
        c.bytes,
        c.pkts / 50_000,
        c.ipv4,
        c.ipv6,
        c.pkts,
        c.tcp,
        c.udp,
        c.icmp4,
        c.icmp6,
        avg,
        c.flows_tcp + c.flows_udp + c.flows_icmp,
        (c.flows_tcp + c.flows_udp) / 50 + 1,
        c.flows_tcp,
        c.flows_udp,
        c.flows_icmp,
        7_340_032 + (c.flows_tcp + c.flows_udp) % 100_000 * 320,
        {
            let mut r = Vec::new();
            EveClock::default().write(&mut r, t0 - 3_600_000_000);
            String::from_utf8(r).unwrap_or_default()
        },
        c.alerts,
        c.app_http,
        c.app_tls,
        c.app_dns,
        c.tx_http,
        c.tx_tls,
        c.tx_dns,
    );
    b.extend_from_slice(s.as_bytes());
}

fn render(cx: &mut Ctx, pend: &mut Pending, f: &Flow, fid: u64, rng: &mut SmallRng) {
    let pkts = f.orig_pkts + f.resp_pkts;
    {
        let c = &mut cx.counts;
        c.pkts += pkts;
        c.bytes += f.orig_ip_bytes + f.resp_ip_bytes + pkts * 14;
        if f.orig.is_v6() {
            c.ipv6 += pkts
        } else {
            c.ipv4 += pkts
        }
        match f.proto {
            Proto::Tcp => {
                c.tcp += pkts;
                c.flows_tcp += 1
            }
            Proto::Udp => {
                c.udp += pkts;
                c.flows_udp += 1
            }
            Proto::Icmp if f.orig.is_v6() => {
                c.icmp6 += pkts;
                c.flows_icmp += 1
            }
            Proto::Icmp => {
                c.icmp4 += pkts;
                c.flows_icmp += 1
            }
        }
    }
    let ap = app_proto(f);
    // Packet-driven events first (they happen during the flow), the flow record last.
    match &f.app {
        App::None => {}
        App::Dns(txs) => {
            cx.counts.app_dns += 1;
            for (i, d) in txs.iter().enumerate() {
                cx.counts.tx_dns += 1;
                if cx.take(DNS) {
                    let mut b = pend.buf();
                    cx.head(&mut b, d.ts, fid, "dns", f, false);
                    b.extend_from_slice(b",\"pkt_src\":\"wire/pcap\"");
                    cid(&mut b, f);
                    b.extend_from_slice(b",\"dns\":{\"version\":2,\"type\":\"query\",\"id\":");
                    fmt::u64(&mut b, d.trans_id as u64);
                    b.extend_from_slice(b",\"rrname\":");
                    js(&mut b, &d.query);
                    b.extend_from_slice(b",\"rrtype\":\"");
                    b.extend_from_slice(d.qtype_name.as_bytes());
                    b.extend_from_slice(b"\",\"tx_id\":");
                    fmt::u64(&mut b, i as u64 * 2);
                    b.extend_from_slice(b",\"opcode\":0}}\n");
                    pend.push(0, d.ts, b);
                }
                if let (Some((code, rname)), Some(rtt)) = (d.rcode, d.rtt) {
                    if cx.take(DNS) {
                        let ts = d.ts + rtt;
                        let mut b = pend.buf();
                        cx.head(&mut b, ts, fid, "dns", f, true);
                        b.extend_from_slice(b",\"pkt_src\":\"wire/pcap\"");
                        cid(&mut b, f);
                        b.extend_from_slice(b",\"dns\":{\"version\":2,\"type\":\"answer\",\"id\":");
                        fmt::u64(&mut b, d.trans_id as u64);
                        let flags = 0x8100u16
                            | if d.ra { 0x80 } else { 0 }
                            | if d.aa { 0x400 } else { 0 }
                            | code as u16;
                        b.extend_from_slice(
                            format!(",\"flags\":\"{flags:x}\",\"qr\":true").as_bytes(),
                        );
                        if d.aa {
                            b.extend_from_slice(b",\"aa\":true");
                        }
                        b.extend_from_slice(b",\"rd\":true");
                        if d.ra {
                            b.extend_from_slice(b",\"ra\":true");
                        }
                        b.extend_from_slice(b",\"opcode\":0,\"rrname\":");
                        js(&mut b, &d.query);
                        b.extend_from_slice(b",\"rrtype\":\"");
                        b.extend_from_slice(d.qtype_name.as_bytes());
                        b.extend_from_slice(b"\",\"rcode\":\"");
                        b.extend_from_slice(rname.as_bytes());
                        b.push(b'"');
                        if !d.answers.is_empty() {
                            b.extend_from_slice(b",\"answers\":[");
                            for (k, a) in d.answers.iter().enumerate() {
                                if k > 0 {
                                    b.push(b',');
                                }
                                b.extend_from_slice(b"{\"rrname\":");
                                js(&mut b, &d.query);
                                b.extend_from_slice(b",\"rrtype\":\"");
                                b.extend_from_slice(a.rrtype.as_bytes());
                                b.extend_from_slice(b"\",\"ttl\":");
                                fmt::u64(&mut b, a.ttl as u64);
                                b.extend_from_slice(b",\"rdata\":");
                                // Suricata writes IPv6 rdata expanded, like its addresses.
                                match a.text.parse::<std::net::Ipv6Addr>() {
                                    Ok(v6) => js(&mut b, &crate::model::Addr::new(v6.into()).eve),
                                    Err(_) => js(&mut b, &a.text),
                                }
                                b.push(b'}');
                            }
                            b.extend_from_slice(b"],\"grouped\":{");
                            let mut first_group = true;
                            for ty in ["CNAME", "A", "AAAA", "PTR", "SRV", "TXT"] {
                                let mut any = false;
                                for a in d.answers.iter().filter(|a| a.rrtype == ty) {
                                    if !any {
                                        if !first_group {
                                            b.push(b',');
                                        }
                                        first_group = false;
                                        b.extend_from_slice(format!("\"{ty}\":[").as_bytes());
                                    } else {
                                        b.push(b',');
                                    }
                                    any = true;
                                    match a.text.parse::<std::net::Ipv6Addr>() {
                                        Ok(v6) => {
                                            js(&mut b, &crate::model::Addr::new(v6.into()).eve)
                                        }
                                        Err(_) => js(&mut b, &a.text),
                                    }
                                }
                                if any {
                                    b.push(b']');
                                }
                            }
                            b.push(b'}');
                        }
                        b.extend_from_slice(b"}}\n");
                        pend.push(0, ts, b);
                    }
                }
            }
        }
        App::Http(txs) => {
            cx.counts.app_http += 1;
            for (i, h) in txs.iter().enumerate() {
                cx.counts.tx_http += 1;
                let mut hobj = Vec::with_capacity(256);
                hobj.extend_from_slice(b"{\"hostname\":");
                js(&mut hobj, h.host);
                hobj.extend_from_slice(b",\"url\":");
                js(&mut hobj, &h.uri);
                hobj.extend_from_slice(b",\"http_user_agent\":");
                js(&mut hobj, h.user_agent);
                if h.resp_len > 0 {
                    hobj.extend_from_slice(b",\"http_content_type\":");
                    js(&mut hobj, h.mime);
                }
                if let Some(r) = &h.referrer {
                    hobj.extend_from_slice(b",\"http_refer\":");
                    js(&mut hobj, r);
                }
                hobj.extend_from_slice(b",\"http_method\":\"");
                hobj.extend_from_slice(h.method.as_bytes());
                hobj.extend_from_slice(b"\",\"protocol\":\"HTTP/1.1\"");
                if let Some((code, _)) = h.status {
                    hobj.extend_from_slice(b",\"status\":");
                    fmt::u64(&mut hobj, code as u64);
                }
                hobj.extend_from_slice(b",\"length\":");
                fmt::u64(&mut hobj, h.resp_len);
                hobj.push(b'}');
                if cx.take(HTTP) {
                    let mut b = pend.buf();
                    cx.head(&mut b, h.done, fid, "http", f, false);
                    b.extend_from_slice(b",\"pkt_src\":\"wire/pcap\"");
                    cid(&mut b, f);
                    b.extend_from_slice(b",\"tx_id\":");
                    fmt::u64(&mut b, i as u64);
                    b.extend_from_slice(b",\"http\":");
                    b.extend_from_slice(&hobj);
                    b.extend_from_slice(b"}\n");
                    pend.push(0, h.done, b);
                }
                if let Some(file) = &h.file {
                    if cx.take(FILEINFO) {
                        let mut b = pend.buf();
                        cx.head(&mut b, h.done, fid, "fileinfo", f, true);
                        b.extend_from_slice(b",\"pkt_src\":\"wire/pcap\"");
                        cid(&mut b, f);
                        b.extend_from_slice(b",\"http\":");
                        b.extend_from_slice(&hobj);
                        b.extend_from_slice(b",\"app_proto\":\"http\",\"fileinfo\":{\"filename\":");
                        let path = h.uri.split('?').next().unwrap_or("/");
                        js(&mut b, path);
                        b.extend_from_slice(b",\"gaps\":false,\"state\":\"CLOSED\",\"md5\":\"");
                        fmt::hex(&mut b, &file.md5);
                        b.extend_from_slice(b"\",\"sha1\":\"");
                        fmt::hex(&mut b, &file.sha1);
                        b.extend_from_slice(b"\",\"stored\":false,\"size\":");
                        fmt::u64(&mut b, file.size);
                        b.extend_from_slice(b",\"tx_id\":");
                        fmt::u64(&mut b, i as u64);
                        b.extend_from_slice(b"}}\n");
                        pend.push(0, h.done, b);
                    }
                }
            }
        }
        App::Tls(t) => {
            cx.counts.app_tls += 1;
            cx.counts.tx_tls += 1;
            if cx.take(TLS) {
                let mut b = pend.buf();
                cx.head(&mut b, t.ts, fid, "tls", f, false);
                b.extend_from_slice(b",\"pkt_src\":\"wire/pcap\"");
                cid(&mut b, f);
                b.extend_from_slice(b",\"tls\":{");
                let version = if t.version == "TLSv13" {
                    "TLS 1.3"
                } else {
                    "TLS 1.2"
                };
                if let (Some(fps), Some(sni)) = (t.cert_fps, t.sni) {
                    // Certificate details are only visible before TLS 1.3.
                    b.extend_from_slice(b"\"subject\":");
                    js(&mut b, &format!("CN={sni}"));
                    b.extend_from_slice(b",\"issuerdn\":\"C=US, O=DigiCert Inc, CN=DigiCert TLS RSA SHA256 2020 CA1\",\"serial\":\"");
                    let fp = fps.as_bytes();
                    for k in 0..16 {
                        if k > 0 {
                            b.push(b':');
                        }
                        b.extend_from_slice(&fp[2 * k..2 * k + 2].to_ascii_uppercase());
                    }
                    b.extend_from_slice(b"\",\"fingerprint\":\"");
                    for k in 0..20 {
                        if k > 0 {
                            b.push(b':');
                        }
                        b.extend_from_slice(&fp[2 * k..2 * k + 2]);
                    }
                    b.extend_from_slice(b"\",\"sni\":");
                    js(&mut b, sni);
                    b.extend_from_slice(b",\"version\":\"");
                    b.extend_from_slice(version.as_bytes());
                    b.extend_from_slice(b"\",\"notbefore\":\"2017-11-06T00:00:00\",\"notafter\":\"2019-01-10T12:00:00\"");
                } else {
                    if let Some(sni) = t.sni {
                        b.extend_from_slice(b"\"sni\":");
                        js(&mut b, sni);
                        b.push(b',');
                    }
                    b.extend_from_slice(b"\"version\":\"");
                    b.extend_from_slice(version.as_bytes());
                    b.push(b'"');
                }
                b.extend_from_slice(b"}}\n");
                pend.push(0, t.ts, b);
            }
        }
    }
    if let Some(ai) = f.alert {
        cx.counts.alerts += 1;
        if cx.take(ALERT) {
            let (sid, rev, msg, cat, sev) = ALERTS[ai];
            let ts = match &f.app {
                App::Http(txs) => txs[0].ts,
                _ => f.start + f.duration.unwrap_or(0).min(50_000),
            };
            let mut b = pend.buf();
            cx.head(&mut b, ts, fid, "alert", f, false);
            b.extend_from_slice(b",\"pkt_src\":\"wire/pcap\"");
            cid(&mut b, f);
            if matches!(f.app, App::Http(_)) {
                b.extend_from_slice(b",\"tx_id\":0");
            }
            b.extend_from_slice(b",\"alert\":{\"action\":\"allowed\",\"gid\":1,\"signature_id\":");
            fmt::u64(&mut b, sid as u64);
            b.extend_from_slice(b",\"rev\":");
            fmt::u64(&mut b, rev as u64);
            b.extend_from_slice(b",\"signature\":");
            js(&mut b, msg);
            b.extend_from_slice(b",\"category\":");
            js(&mut b, cat);
            b.extend_from_slice(b",\"severity\":");
            fmt::u64(&mut b, sev as u64);
            b.extend_from_slice(
                b",\"metadata\":{\"created_at\":[\"2011_06_14\"],\"updated_at\":[\"2019_07_26\"]}}",
            );
            if let Some(ap) = ap {
                b.extend_from_slice(b",\"app_proto\":\"");
                b.extend_from_slice(ap.as_bytes());
                b.push(b'"');
            }
            b.extend_from_slice(b",\"direction\":\"to_server\",\"flow\":{\"pkts_toserver\":");
            fmt::u64(&mut b, f.orig_pkts.min(3));
            b.extend_from_slice(b",\"pkts_toclient\":");
            fmt::u64(&mut b, f.resp_pkts.min(2));
            b.extend_from_slice(b",\"bytes_toserver\":");
            fmt::u64(&mut b, f.orig_ip_bytes.min(f.orig_pkts.min(3) * 600));
            b.extend_from_slice(b",\"bytes_toclient\":");
            fmt::u64(&mut b, f.resp_ip_bytes.min(f.resp_pkts.min(2) * 600));
            b.extend_from_slice(b",\"start\":\"");
            cx.clock2.write(&mut b, f.start);
            b.extend_from_slice(b"\"}}\n");
            pend.push(0, ts, b);
        }
    }
    if let Some((ts, name, source)) = f.weird {
        if cx.take(ANOMALY) {
            let mut b = pend.buf();
            cx.head(&mut b, ts, fid, "anomaly", f, false);
            b.extend_from_slice(b",\"pkt_src\":\"wire/pcap\"");
            cid(&mut b, f);
            match (source, ap) {
                ("TCP", _) | (_, None) => {
                    let ev = match name {
                        "SYN_seq_jump" | "connection_originator_SYN_ack" => {
                            "stream.3whs_synack_with_wrong_ack"
                        }
                        "data_before_established" => "stream.est_packet_out_of_window",
                        "inappropriate_FIN" => "stream.fin_invalid_ack",
                        "active_connection_reuse" => "stream.pkt_spurious_retransmission",
                        _ => "stream.pkt_invalid_ack",
                    };
                    b.extend_from_slice(b",\"anomaly\":{\"type\":\"stream\",\"event\":\"");
                    b.extend_from_slice(ev.as_bytes());
                    b.extend_from_slice(b"\"}}\n");
                }
                (_, Some(ap)) => {
                    b.extend_from_slice(b",\"anomaly\":{\"app_proto\":\"");
                    b.extend_from_slice(ap.as_bytes());
                    b.extend_from_slice(b"\",\"type\":\"applayer\",\"event\":\"");
                    b.extend_from_slice(if rng.random_bool(0.5) {
                        b"APPLAYER_DETECT_PROTOCOL_ONLY_ONE_DIRECTION\",\"layer\":\"proto_detect\"}}\n"
                    } else {
                        b"MALFORMED_DATA\",\"layer\":\"proto_parser\"}}\n"
                    });
                }
            }
            pend.push(0, ts, b);
        }
    }
    if cx.take(FLOW) {
        let at = f.removal();
        let mut b = pend.buf();
        cx.head(&mut b, at, fid, "flow", f, false);
        if let Some(ap) = ap {
            b.extend_from_slice(b",\"app_proto\":\"");
            b.extend_from_slice(ap.as_bytes());
            b.push(b'"');
        }
        b.extend_from_slice(b",\"flow\":{\"pkts_toserver\":");
        fmt::u64(&mut b, f.orig_pkts);
        b.extend_from_slice(b",\"pkts_toclient\":");
        fmt::u64(&mut b, f.resp_pkts);
        b.extend_from_slice(b",\"bytes_toserver\":");
        fmt::u64(&mut b, f.orig_ip_bytes + 14 * f.orig_pkts);
        b.extend_from_slice(b",\"bytes_toclient\":");
        fmt::u64(&mut b, f.resp_ip_bytes + 14 * f.resp_pkts);
        b.extend_from_slice(b",\"start\":\"");
        cx.clock2.write(&mut b, f.start);
        b.extend_from_slice(b"\",\"end\":\"");
        cx.clock3.write(&mut b, f.end());
        b.extend_from_slice(b"\",\"age\":");
        fmt::u64(&mut b, (f.duration.unwrap_or(0) / 1_000_000) as u64);
        let state = match (f.proto, f.conn_state) {
            (Proto::Tcp, "SF" | "RSTO" | "RSTR" | "REJ" | "RSTOS0") => "closed",
            (Proto::Tcp, "S0") => "new",
            (_, "S0") => "new",
            _ => "established",
        };
        b.extend_from_slice(b",\"state\":\"");
        b.extend_from_slice(state.as_bytes());
        b.extend_from_slice(b"\",\"reason\":\"timeout\",\"alerted\":");
        b.extend_from_slice(if f.alert.is_some() { b"true" } else { b"false" });
        b.push(b'}');
        cid(&mut b, f);
        if f.proto == Proto::Tcp {
            let h = f.history;
            let (mut ts_f, mut tc_f) = (0u8, 0u8);
            // TCP flag bits: FIN 01, SYN 02, RST 04, PSH 08, ACK 10.
            if h.contains('S') {
                ts_f |= 0x02;
            }
            if h.contains('h') {
                tc_f |= 0x12;
            }
            if h.contains('A') {
                ts_f |= 0x10;
            }
            if h.contains('D') {
                ts_f |= 0x18;
            }
            if h.contains('a') {
                tc_f |= 0x10;
            }
            if h.contains('d') {
                tc_f |= 0x18;
            }
            if h.contains('F') {
                ts_f |= 0x01;
            }
            if h.contains('f') {
                tc_f |= 0x01;
            }
            if h.contains('R') {
                ts_f |= 0x04;
            }
            if h.contains('r') {
                tc_f |= 0x14;
            }
            let all = ts_f | tc_f;
            b.extend_from_slice(format!(",\"tcp\":{{\"tcp_flags\":\"{all:02x}\",\"tcp_flags_ts\":\"{ts_f:02x}\",\"tcp_flags_tc\":\"{tc_f:02x}\"").as_bytes());
            for (bit, name) in [
                (0x01, "fin"),
                (0x02, "syn"),
                (0x04, "rst"),
                (0x08, "psh"),
                (0x10, "ack"),
            ] {
                if all & bit != 0 {
                    b.extend_from_slice(format!(",\"{name}\":true").as_bytes());
                }
            }
            b.extend_from_slice(b",\"state\":\"");
            b.extend_from_slice(if state == "new" {
                b"syn_sent"
            } else {
                state.as_bytes()
            });
            b.extend_from_slice(b"\"}");
        }
        b.extend_from_slice(b"}\n");
        pend.push(0, at, b);
    }
}
