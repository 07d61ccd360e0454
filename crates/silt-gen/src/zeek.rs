//! Zeek 6 TSV rendering: header blocks, field lists and one writer per log (conn, dns, http,
//! ssl, files, weird), fed from the shared flow simulation.
//!
//! Touches only the [`Write`] sinks it is handed. Field lists and types are those of Zeek 6.x
//! with the default `local.zeek` (e.g. ssl.log `validation_status` from
//! `policy/protocols/ssl/validate-certs`, files.log hashes from `hash-all-files`); conn.log may
//! carry the `community_id` column of `policy/protocols/conn/community-id-logging`.

use std::io::Write;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::flows::{App, Flow, FlowGen, Kind, Uid, KINDS};
use crate::fmt;
use crate::model::{community_id, World};
use crate::out::{Pending, SinkStats};
use crate::GenOptions;

/// The Zeek logs the generator writes, in the default mix's order.
pub const ZEEK_LOGS: [&str; 6] = ["conn", "dns", "http", "ssl", "files", "weird"];

/// The default share of each log in a mixed run (percent, same order as [`ZEEK_LOGS`]).
pub const ZEEK_MIX: [u32; 6] = [55, 25, 10, 6, 3, 1];

const CONN: usize = 0;
const DNS: usize = 1;
const HTTP: usize = 2;
const SSL: usize = 3;
const FILES: usize = 4;
const WEIRD: usize = 5;

const ID: [(&str, &str); 4] = [
    ("id.orig_h", "addr"),
    ("id.orig_p", "port"),
    ("id.resp_h", "addr"),
    ("id.resp_p", "port"),
];

/// `(name, Zeek type)` of every column of `log`, in order.
pub fn zeek_fields(
    log: &str,
    with_community_id: bool,
) -> Option<Vec<(&'static str, &'static str)>> {
    let mut v: Vec<(&str, &str)> = vec![("ts", "time")];
    let rest: &[(&str, &str)] = match log {
        "conn" => &[
            ("uid", "string"),
            ID[0],
            ID[1],
            ID[2],
            ID[3],
            ("proto", "enum"),
            ("service", "string"),
            ("duration", "interval"),
            ("orig_bytes", "count"),
            ("resp_bytes", "count"),
            ("conn_state", "string"),
            ("local_orig", "bool"),
            ("local_resp", "bool"),
            ("missed_bytes", "count"),
            ("history", "string"),
            ("orig_pkts", "count"),
            ("orig_ip_bytes", "count"),
            ("resp_pkts", "count"),
            ("resp_ip_bytes", "count"),
            ("tunnel_parents", "set[string]"),
        ],
        "dns" => &[
            ("uid", "string"),
            ID[0],
            ID[1],
            ID[2],
            ID[3],
            ("proto", "enum"),
            ("trans_id", "count"),
            ("rtt", "interval"),
            ("query", "string"),
            ("qclass", "count"),
            ("qclass_name", "string"),
            ("qtype", "count"),
            ("qtype_name", "string"),
            ("rcode", "count"),
            ("rcode_name", "string"),
            ("AA", "bool"),
            ("TC", "bool"),
            ("RD", "bool"),
            ("RA", "bool"),
            ("Z", "count"),
            ("answers", "vector[string]"),
            ("TTLs", "vector[interval]"),
            ("rejected", "bool"),
        ],
        "http" => &[
            ("uid", "string"),
            ID[0],
            ID[1],
            ID[2],
            ID[3],
            ("trans_depth", "count"),
            ("method", "string"),
            ("host", "string"),
            ("uri", "string"),
            ("referrer", "string"),
            ("version", "string"),
            ("user_agent", "string"),
            ("origin", "string"),
            ("request_body_len", "count"),
            ("response_body_len", "count"),
            ("status_code", "count"),
            ("status_msg", "string"),
            ("info_code", "count"),
            ("info_msg", "string"),
            ("tags", "set[enum]"),
            ("username", "string"),
            ("password", "string"),
            ("proxied", "set[string]"),
            ("orig_fuids", "vector[string]"),
            ("orig_filenames", "vector[string]"),
            ("orig_mime_types", "vector[string]"),
            ("resp_fuids", "vector[string]"),
            ("resp_filenames", "vector[string]"),
            ("resp_mime_types", "vector[string]"),
        ],
        "ssl" => &[
            ("uid", "string"),
            ID[0],
            ID[1],
            ID[2],
            ID[3],
            ("version", "string"),
            ("cipher", "string"),
            ("curve", "string"),
            ("server_name", "string"),
            ("resumed", "bool"),
            ("last_alert", "string"),
            ("next_protocol", "string"),
            ("established", "bool"),
            ("ssl_history", "string"),
            ("cert_chain_fps", "vector[string]"),
            ("client_cert_chain_fps", "vector[string]"),
            ("sni_matches_cert", "bool"),
            ("validation_status", "string"),
        ],
        "files" => &[
            ("fuid", "string"),
            ("uid", "string"),
            ID[0],
            ID[1],
            ID[2],
            ID[3],
            ("source", "string"),
            ("depth", "count"),
            ("analyzers", "set[string]"),
            ("mime_type", "string"),
            ("filename", "string"),
            ("duration", "interval"),
            ("local_orig", "bool"),
            ("is_orig", "bool"),
            ("seen_bytes", "count"),
            ("total_bytes", "count"),
            ("missing_bytes", "count"),
            ("overflow_bytes", "count"),
            ("timedout", "bool"),
            ("parent_fuid", "string"),
            ("md5", "string"),
            ("sha1", "string"),
            ("sha256", "string"),
            ("extracted", "string"),
            ("extracted_cutoff", "bool"),
            ("extracted_size", "count"),
        ],
        "weird" => &[
            ("uid", "string"),
            ID[0],
            ID[1],
            ID[2],
            ID[3],
            ("name", "string"),
            ("addl", "string"),
            ("notice", "bool"),
            ("peer", "string"),
            ("source", "string"),
        ],
        _ => return None,
    };
    v.extend_from_slice(rest);
    if log == "conn" && with_community_id {
        v.push(("community_id", "string"));
    }
    Some(v)
}

/// The header block Zeek writes at the top of `<log>.log` (ends with the `#types` line).
pub fn zeek_header(log: &str, open_micros: i64, with_community_id: bool) -> Option<String> {
    let fields = zeek_fields(log, with_community_id)?;
    let mut h = String::new();
    h.push_str("#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n");
    h.push_str(&format!(
        "#path\t{log}\n#open\t{}\n#fields",
        fmt::zeek_header_time(open_micros)
    ));
    for (n, _) in &fields {
        h.push('\t');
        h.push_str(n);
    }
    h.push_str("\n#types");
    for (_, t) in &fields {
        h.push('\t');
        h.push_str(t);
    }
    h.push('\n');
    Some(h)
}

/// Tab-separated line builder.
struct Line<'b>(&'b mut Vec<u8>);

impl Line<'_> {
    #[inline]
    fn s(&mut self, v: &str) -> &mut Self {
        self.0.extend_from_slice(v.as_bytes());
        self.0.push(b'\t');
        self
    }
    #[inline]
    fn os(&mut self, v: Option<&str>) -> &mut Self {
        self.s(v.unwrap_or("-"))
    }
    #[inline]
    fn u(&mut self, v: u64) -> &mut Self {
        fmt::u64(self.0, v);
        self.0.push(b'\t');
        self
    }
    #[inline]
    fn ou(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            Some(v) => self.u(v),
            None => self.s("-"),
        }
    }
    #[inline]
    fn t(&mut self, micros: i64) -> &mut Self {
        fmt::micros_as_secs(self.0, micros);
        self.0.push(b'\t');
        self
    }
    #[inline]
    fn ot(&mut self, v: Option<i64>) -> &mut Self {
        match v {
            Some(v) => self.t(v),
            None => self.s("-"),
        }
    }
    #[inline]
    fn b(&mut self, v: bool) -> &mut Self {
        self.s(if v { "T" } else { "F" })
    }
    #[inline]
    fn uid(&mut self, prefix: u8, u: Uid) -> &mut Self {
        fmt::zeek_uid(self.0, prefix, u.0, u.1);
        self.0.push(b'\t');
        self
    }
    fn id(&mut self, f: &Flow) -> &mut Self {
        self.s(&f.orig.zeek)
            .u(f.orig_p as u64)
            .s(&f.resp.zeek)
            .u(f.resp_p as u64)
    }
    /// Replaces the trailing tab with the newline.
    fn end(&mut self) {
        if let Some(last) = self.0.last_mut() {
            *last = b'\n';
        }
    }
}

/// Remaining record budget over the selected logs.
struct Budget {
    listed: [bool; 6],
    left: u64,
}

impl Budget {
    #[inline]
    fn take(&mut self, log: usize) -> bool {
        if self.listed[log] && self.left > 0 {
            self.left -= 1;
            true
        } else {
            false
        }
    }
}

/// Writes `events` records over the logs in `sinks` (index order of [`ZEEK_LOGS`]; `None` = not
/// generated). Returns per-log statistics (records, bytes excluding headers).
pub(crate) fn run(
    sinks: Vec<Option<&mut dyn Write>>,
    events: u64,
    opts: &GenOptions,
) -> anyhow::Result<Vec<SinkStats>> {
    let mut listed = [false; 6];
    for (i, s) in sinks.iter().enumerate() {
        listed[i] = s.is_some();
    }
    let mut rng = SmallRng::seed_from_u64(opts.seed);
    let world = World::new(&mut rng);
    // Only draw kinds of flow groups that can produce one of the requested logs.
    let kinds: Vec<(Kind, u32)> = KINDS
        .iter()
        .copied()
        .filter(|(k, _)| {
            listed[CONN]
                || listed[WEIRD]
                || match k {
                    Kind::Web => true,
                    Kind::Dns | Kind::Local => listed[DNS],
                    _ => false,
                }
        })
        .collect();
    let cid = opts.community_id;
    let mut pend = Pending::new(sinks);
    let t0 = opts.start_micros;
    let span = opts.span_secs.max(1) as f64 * 1e6;
    for (i, log) in ZEEK_LOGS.iter().enumerate() {
        if let Some(w) = pend.sinks[i].as_mut() {
            let h = zeek_header(log, t0, cid).unwrap_or_default();
            w.write_all(h.as_bytes())?;
        }
    }
    let mut gen = FlowGen::new(
        &world,
        SmallRng::seed_from_u64(rng.random()),
        opts.ipv6_share,
        kinds,
    );
    let mut jitter = SmallRng::seed_from_u64(opts.seed ^ 0x5eed);
    let mut budget = Budget {
        listed,
        left: events,
    };
    let gap = (span / events.max(1) as f64).max(1.0);
    let mut flows: Vec<Flow> = Vec::with_capacity(8);
    while budget.left > 0 {
        let done = (events - budget.left) as f64;
        let t = t0
            + (span * done / events as f64) as i64
            + jitter.random_range(0..(gap * 2.0) as i64 + 1);
        flows.clear();
        gen.group(t, &mut flows);
        for f in &flows {
            render(f, &mut budget, &mut pend, cid);
        }
        pend.flush_until(t)?;
    }
    pend.flush_all()?;
    let stats = pend.stats.clone();
    for (i, w) in pend.sinks.iter_mut().enumerate() {
        if let Some(w) = w.as_mut() {
            let close = if stats[i].records > 0 {
                stats[i].last_write
            } else {
                t0
            };
            writeln!(w, "#close\t{}", fmt::zeek_header_time(close))?;
            w.flush()?;
        }
    }
    Ok(stats)
}

fn render(f: &Flow, budget: &mut Budget, pend: &mut Pending, cid: bool) {
    if budget.listed[CONN] {
        if !budget.take(CONN) {
            return;
        }
        let mut buf = pend.buf();
        let mut l = Line(&mut buf);
        l.t(f.start)
            .uid(b'C', f.uid)
            .id(f)
            .s(f.proto.zeek())
            .s(f.service);
        l.ot(f.duration)
            .ou(f.orig_bytes)
            .ou(f.resp_bytes)
            .s(f.conn_state)
            .b(f.orig.local)
            .b(f.resp.local)
            .u(f.missed_bytes)
            .s(f.history)
            .u(f.orig_pkts)
            .u(f.orig_ip_bytes)
            .u(f.resp_pkts)
            .u(f.resp_ip_bytes)
            .s("-");
        if cid {
            let id = community_id(
                &f.orig.ip,
                &f.resp.ip,
                f.orig_p,
                f.resp_p,
                f.proto.number(f.orig.is_v6()),
            );
            l.s(&id);
        }
        l.end();
        pend.push(CONN, f.removal(), buf);
    }
    match &f.app {
        App::None => {}
        App::Dns(txs) => {
            for d in txs {
                if !budget.take(DNS) {
                    break;
                }
                let mut buf = pend.buf();
                let mut l = Line(&mut buf);
                l.t(d.ts).uid(b'C', f.uid).id(f).s(f.proto.zeek());
                l.u(d.trans_id as u64)
                    .ot(d.rtt)
                    .s(&d.query)
                    .u(1)
                    .s("C_INTERNET");
                l.u(d.qtype as u64).s(d.qtype_name);
                match d.rcode {
                    Some((c, n)) => l.u(c as u64).s(n),
                    None => l.s("-").s("-"),
                };
                l.b(d.aa).b(false).b(d.rd).b(d.ra).u(0);
                if d.answers.is_empty() {
                    l.s("-").s("-");
                } else {
                    for (i, a) in d.answers.iter().enumerate() {
                        if i > 0 {
                            l.0.push(b',');
                        }
                        l.0.extend_from_slice(a.text.as_bytes());
                    }
                    l.0.push(b'\t');
                    for (i, a) in d.answers.iter().enumerate() {
                        if i > 0 {
                            l.0.push(b',');
                        }
                        fmt::micros_as_secs(l.0, a.ttl as i64 * 1_000_000);
                    }
                    l.0.push(b'\t');
                }
                l.b(false);
                l.end();
                let at = match d.rtt {
                    Some(r) => d.ts + r,
                    None => f.removal(),
                };
                pend.push(DNS, at, buf);
            }
        }
        App::Http(txs) => {
            for h in txs {
                // An http record naming a file needs room for the files record too, so every
                // resp_fuid joins to files.log.
                if h.file.is_some()
                    && budget.listed[FILES]
                    && budget.listed[HTTP]
                    && budget.left < 2
                {
                    break;
                }
                if budget.listed[HTTP] && budget.left == 0 {
                    break;
                }
                if budget.take(HTTP) {
                    let mut buf = pend.buf();
                    let mut l = Line(&mut buf);
                    l.t(h.ts).uid(b'C', f.uid).id(f).u(h.depth as u64);
                    l.s(h.method).s(h.host).s(&h.uri).os(h.referrer.as_deref());
                    l.os(h.status.map(|_| "1.1")).s(h.user_agent).s("-");
                    l.u(h.req_len).u(h.resp_len);
                    match h.status {
                        Some((c, m)) => l.u(c as u64).s(m),
                        None => l.s("-").s("-"),
                    };
                    l.s("-").s("-").s("(empty)").s("-").s("-").s("-");
                    l.s("-").s("-").s("-");
                    match &h.file {
                        Some(file) => {
                            l.uid(b'F', file.fuid).s("-").s(file.mime);
                        }
                        None => {
                            l.s("-").s("-").s("-");
                        }
                    }
                    l.end();
                    pend.push(HTTP, h.done, buf);
                }
                if let Some(file) = &h.file {
                    if budget.take(FILES) {
                        let mut buf = pend.buf();
                        let mut l = Line(&mut buf);
                        l.t(file.ts).uid(b'F', file.fuid).uid(b'C', f.uid).id(f);
                        l.s("HTTP").u(0).s("MD5,SHA1").s(file.mime);
                        l.os(file.filename.as_deref()).t(file.duration);
                        l.b(f.resp.local).b(false).u(file.size);
                        // Chunked responses carry no Content-Length.
                        l.ou((file.size % 5 != 0).then_some(file.size));
                        l.u(0).u(0).b(false).s("-");
                        fmt::hex(l.0, &file.md5);
                        l.0.push(b'\t');
                        fmt::hex(l.0, &file.sha1);
                        l.0.push(b'\t');
                        l.s("-").s("-").s("-").s("-");
                        l.end();
                        pend.push(FILES, file.ts + file.duration, buf);
                    }
                }
            }
        }
        App::Tls(t) => {
            if budget.take(SSL) {
                let mut buf = pend.buf();
                let mut l = Line(&mut buf);
                l.t(f.start + (t.ts - f.start) / 4).uid(b'C', f.uid).id(f);
                l.s(t.version)
                    .s(t.cipher)
                    .os(t.curve)
                    .os(t.sni)
                    .b(t.resumed)
                    .s("-");
                l.os(t.next_protocol).b(t.established).s(t.history);
                match t.cert_fps {
                    Some(fps) => l.s(fps).s("(empty)"),
                    None => l.s("-").s("-"),
                };
                match t.sni_matches {
                    Some(b) => l.b(b),
                    None => l.s("-"),
                };
                l.os(t.validation);
                l.end();
                pend.push(SSL, t.ts, buf);
            }
        }
    }
    if let Some((ts, name, source)) = f.weird {
        if budget.take(WEIRD) {
            let mut buf = pend.buf();
            let mut l = Line(&mut buf);
            l.t(ts)
                .uid(b'C', f.uid)
                .id(f)
                .s(name)
                .s("-")
                .b(false)
                .s("zeek")
                .s(source);
            l.end();
            pend.push(WEIRD, ts, buf);
        }
    }
}
