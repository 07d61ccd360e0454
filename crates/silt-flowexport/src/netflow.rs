//! NetFlow v5 (fixed records), NetFlow v9 (RFC 3954) and IPFIX (RFC 7011) datagrams ->
//! `netflow.flow` rows, with the template state a collector keeps. Written by hand; see the
//! crate documentation for why `netflow_parser` was not used. Touches only the datagram bytes,
//! its own [`NetflowState`] and the statistics it is handed; sampled data-link frames (IPFIX
//! element 315) are decoded with `silt_pcap::decode::decode_frame`.
//!
//! State is kept per *template key* = (exporter address, version, source id / observation
//! domain): templates and options templates, held data sets waiting for a template (bounded per
//! key in sets and bytes, oldest evicted first and counted), sampling rates learned from options
//! data records (per sampler id), and the IPFIX system init time. A datagram decodes completely
//! or becomes one reject; templates it defined before the error stay learned, as collectors do.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use silt_pcap::decode::{decode_frame, linktype, Decoded};

use crate::schema::{FlowCtx, FlowRow};
use crate::sflow::community_id;
use crate::wire::{addr, err, uint, Rd, WireError, WireResult};
use crate::{FlowExportOptions, FlowExportStats};

/// Template key: exporter address, version (9 or 10), source id / observation domain id.
pub type Key = (IpAddr, u16, u32);

/// Most fields accepted in one template; longer templates are ignored and counted.
pub const MAX_TEMPLATE_FIELDS: usize = 512;
/// Most templates kept per key; further new templates are ignored and counted.
pub const MAX_TEMPLATES_PER_KEY: usize = 2048;
/// Most template keys (exporter, version, domain) kept.
pub const MAX_KEYS: usize = 4096;
/// Most template fields kept over all keys (about 8 MiB); further new templates are refused.
pub const MAX_TEMPLATE_FIELDS_TOTAL: usize = 1 << 20;
/// Most sampler ids remembered per key.
pub const MAX_SAMPLERS_PER_KEY: usize = 256;
/// Seconds between the NTP epoch (1900) and the Unix epoch.
const NTP_UNIX_OFFSET: i64 = 2_208_988_800;

/// One field of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    pub id: u16,
    /// 0 for IANA elements.
    pub enterprise: u32,
    /// 65535 = variable length (IPFIX).
    pub len: u16,
}

/// A (data or options) template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub fields: Vec<FieldSpec>,
    /// Leading scope fields (options templates only).
    pub scope: usize,
    pub options: bool,
    /// Smallest record length (variable-length fields count 1 byte).
    pub min_len: usize,
}

impl Template {
    fn new(fields: Vec<FieldSpec>, scope: usize, options: bool) -> Self {
        let min_len = fields
            .iter()
            .map(|f| {
                if f.len == 0xffff {
                    1
                } else {
                    usize::from(f.len)
                }
            })
            .sum();
        Self {
            fields,
            scope,
            options,
            min_len,
        }
    }
}

/// A data set held until its template arrives.
#[derive(Debug, Clone)]
pub struct Held {
    pub ctx: Arc<FlowCtx>,
    pub template_id: u16,
    pub body: Vec<u8>,
    /// Offset of `body` in its datagram (for error messages).
    pub offset: usize,
}

#[derive(Debug, Default)]
struct KeyState {
    templates: HashMap<u16, Arc<Template>>,
    held: VecDeque<Held>,
    held_bytes: usize,
    /// Sampling rate per sampler/selector id (0 when the options record names none).
    sampling: HashMap<u64, u64>,
    /// IPFIX systemInitTimeMilliseconds from options data.
    sys_init_ms: Option<i64>,
}

/// Everything a NetFlow/IPFIX collector remembers between datagrams.
#[derive(Debug, Default)]
pub struct NetflowState {
    keys: HashMap<Key, KeyState>,
    /// Bytes of held data sets over all keys.
    held_total: usize,
    /// Template fields over all keys.
    fields_total: usize,
}

/// A held data set that failed to decode once its template arrived.
pub struct HeldError {
    pub ctx: Arc<FlowCtx>,
    pub error: WireError,
    pub body: Vec<u8>,
}

/// Rows and side results of one datagram.
#[derive(Default)]
pub struct NetflowOut {
    pub rows: Vec<(Arc<FlowCtx>, FlowRow)>,
    /// Held data sets (from earlier datagrams) that failed when finally decoded.
    pub held_errors: Vec<HeldError>,
}

impl NetflowState {
    fn key(&mut self, k: Key, stats: &mut FlowExportStats) -> Option<&mut KeyState> {
        if !self.keys.contains_key(&k) && self.keys.len() >= MAX_KEYS {
            stats.key_limit_drops += 1;
            return None;
        }
        Some(self.keys.entry(k).or_default())
    }

    /// Data sets still held at the end of the stream: counted as dropped (unknown template).
    pub fn drain_held(&mut self, stats: &mut FlowExportStats) {
        for (k, ks) in self.keys.iter_mut() {
            for h in ks.held.drain(..) {
                stats.note_unknown_template(k, h.template_id);
            }
            ks.held_bytes = 0;
        }
        self.held_total = 0;
    }

    /// Data sets currently held, and their bytes.
    pub fn held(&self) -> (usize, usize) {
        self.keys
            .values()
            .fold((0, 0), |(n, b), k| (n + k.held.len(), b + k.held_bytes))
    }
}

/// Per-datagram context before rows are made.
pub struct DatagramInfo {
    pub received_us: i64,
    pub exporter: IpAddr,
    pub exporter_port: u16,
    pub frame: u64,
}

/// Decodes one NetFlow v5/v9 or IPFIX datagram (told apart by the version field).
pub fn decode(
    payload: &[u8],
    info: &DatagramInfo,
    state: &mut NetflowState,
    opts: &FlowExportOptions,
    stats: &mut FlowExportStats,
) -> WireResult<NetflowOut> {
    let mut r = Rd::new(payload);
    let version = r.u16("version")?;
    match version {
        5 => v5(&mut r, info, opts, stats),
        9 | 10 => v9_ipfix(&mut r, version, info, state, opts, stats),
        v => err(0, format!("unsupported NetFlow version {v}")),
    }
}

fn v5(
    r: &mut Rd<'_>,
    info: &DatagramInfo,
    opts: &FlowExportOptions,
    stats: &mut FlowExportStats,
) -> WireResult<NetflowOut> {
    let count = r.u16("v5 record count")?;
    let uptime = r.u32("v5 sys uptime")?;
    let secs = r.u32("v5 unix secs")?;
    let nsecs = r.u32("v5 unix nsecs")?;
    let seq = r.u32("v5 flow sequence")?;
    let engine_type = r.u8("v5 engine type")?;
    let engine_id = r.u8("v5 engine id")?;
    let sampling = r.u16("v5 sampling interval")?;
    if count == 0 || count > 30 {
        return err(2, format!("v5 record count {count} outside 1..=30"));
    }
    if r.remaining() < usize::from(count) * 48 {
        return err(
            24,
            format!(
                "v5 header announces {count} records ({} bytes) but {} bytes follow",
                usize::from(count) * 48,
                r.remaining()
            ),
        );
    }
    let domain = (u32::from(engine_type) << 8) | u32::from(engine_id);
    stats.netflow_v5 += 1;
    stats.check_seq(
        &format!(
            "netflow v5 {} engine {engine_type}/{engine_id}",
            info.exporter
        ),
        seq,
        seq.wrapping_add(u32::from(count)),
    );
    let ctx = Arc::new(FlowCtx {
        received_us: info.received_us,
        exporter: info.exporter,
        exporter_port: info.exporter_port,
        frame: info.frame,
        version: 5,
        domain,
        sequence: seq,
        unix_secs: secs,
        unix_nsecs: nsecs,
        sys_uptime_ms: Some(uptime),
    });
    let boot_us = i64::from(secs) * 1_000_000 + i64::from(nsecs) / 1000 - i64::from(uptime) * 1000;
    let rate = u64::from(sampling & 0x3fff);
    let mut out = NetflowOut::default();
    for _ in 0..count {
        let src = r.ipv4("v5 srcaddr")?;
        let dst = r.ipv4("v5 dstaddr")?;
        let nh = r.ipv4("v5 nexthop")?;
        let input = r.u16("v5 input")?;
        let output = r.u16("v5 output")?;
        let packets = r.u32("v5 dPkts")?;
        let bytes = r.u32("v5 dOctets")?;
        let first = r.u32("v5 first")?;
        let last = r.u32("v5 last")?;
        let sport = r.u16("v5 srcport")?;
        let dport = r.u16("v5 dstport")?;
        r.skip(1, "v5 pad1")?;
        let flags = r.u8("v5 tcp_flags")?;
        let proto = r.u8("v5 prot")?;
        let tos = r.u8("v5 tos")?;
        let src_as = r.u16("v5 src_as")?;
        let dst_as = r.u16("v5 dst_as")?;
        let src_mask = r.u8("v5 src_mask")?;
        let dst_mask = r.u8("v5 dst_mask")?;
        r.skip(2, "v5 pad2")?;
        let mut row = FlowRow {
            src: Some(src.into()),
            dst: Some(dst.into()),
            next_hop: Some(nh.into()),
            input: Some(input.into()),
            output: Some(output.into()),
            packets: Some(packets.into()),
            bytes: Some(bytes.into()),
            flow_start: Some(boot_us + i64::from(first) * 1000),
            flow_end: Some(boot_us + i64::from(last) * 1000),
            sport: Some(sport),
            dport: Some(dport),
            tcp_flags: Some(flags.into()),
            proto: Some(proto),
            tos: Some(tos),
            src_as: Some(src_as.into()),
            dst_as: Some(dst_as.into()),
            src_mask: Some(src_mask),
            dst_mask: Some(dst_mask),
            sampling_rate: (rate > 0).then_some(rate),
            ..FlowRow::default()
        };
        finish_row(&mut row, opts.community_id_seed);
        out.rows.push((ctx.clone(), row));
    }
    Ok(out)
}

fn v9_ipfix(
    r: &mut Rd<'_>,
    version: u16,
    info: &DatagramInfo,
    state: &mut NetflowState,
    opts: &FlowExportOptions,
    stats: &mut FlowExportStats,
) -> WireResult<NetflowOut> {
    let ipfix = version == 10;
    let (uptime, secs, seq, domain, mut body) = if ipfix {
        let len = usize::from(r.u16("IPFIX message length")?);
        let secs = r.u32("IPFIX export time")?;
        let seq = r.u32("IPFIX sequence")?;
        let domain = r.u32("IPFIX observation domain")?;
        if len < 16 {
            return err(2, format!("IPFIX message length {len} < 16"));
        }
        let body = r.sub(len - 16, "IPFIX message (length field)")?;
        (None, secs, seq, domain, body)
    } else {
        let _count = r.u16("v9 count")?;
        let uptime = r.u32("v9 sys uptime")?;
        let secs = r.u32("v9 unix secs")?;
        let seq = r.u32("v9 sequence")?;
        let domain = r.u32("v9 source id")?;
        let n = r.remaining();
        (Some(uptime), secs, seq, domain, r.sub(n, "v9 body")?)
    };
    if ipfix {
        stats.ipfix += 1;
    } else {
        stats.netflow_v9 += 1;
    }
    let key: Key = (info.exporter, version, domain);
    let ctx = Arc::new(FlowCtx {
        received_us: info.received_us,
        exporter: info.exporter,
        exporter_port: info.exporter_port,
        frame: info.frame,
        version,
        domain,
        sequence: seq,
        unix_secs: secs,
        unix_nsecs: 0,
        sys_uptime_ms: uptime,
    });
    let mut out = NetflowOut::default();
    let mut held_now: Vec<Held> = Vec::new();
    let mut learned: Vec<u16> = Vec::new();
    let mut records_here: u64 = 0;
    let (tpl_set, opt_set) = if ipfix { (2, 3) } else { (0, 1) };
    // v9 may pad the packet after the last set; fewer than 4 bytes cannot be a set.
    while body.remaining() >= 4 {
        let set_at = body.offset();
        let set_id = body.u16("set id")?;
        let set_len = usize::from(body.u16("set length")?);
        if set_len < 4 {
            return err(set_at, format!("set {set_id} length {set_len} < 4"));
        }
        let mut set = body.sub(set_len - 4, &format!("set {set_id} (length {set_len})"))?;
        if set_id == tpl_set || set_id == opt_set {
            let options = set_id == opt_set;
            templates(&mut set, ipfix, options, key, state, &mut learned, stats)?;
        } else if set_id >= 256 {
            let known = state
                .keys
                .get(&key)
                .and_then(|k| k.templates.get(&set_id))
                .cloned();
            match known {
                Some(t) => {
                    records_here += data_set(
                        &mut set, &t, set_id, &ctx, key, state, opts, stats, &mut out,
                    )?;
                }
                None => {
                    let offset = set.offset();
                    held_now.push(Held {
                        ctx: ctx.clone(),
                        template_id: set_id,
                        body: set.rest().to_vec(),
                        offset,
                    });
                }
            }
        } else {
            stats.reserved_sets += 1;
        }
    }
    // Sequence: v9 counts packets, IPFIX counts data records (unknown while sets are held).
    let label = format!(
        "{} {} domain {domain}",
        if ipfix { "ipfix" } else { "netflow v9" },
        info.exporter
    );
    if ipfix {
        if held_now.is_empty() {
            stats.check_seq(&label, seq, seq.wrapping_add(records_here as u32));
        } else {
            stats.forget_seq(&label);
        }
    } else {
        stats.check_seq(&label, seq, seq.wrapping_add(1));
    }
    // Hold data sets whose template is unknown, within the bounds.
    for h in held_now {
        hold(h, key, state, opts, stats);
    }
    // Templates learned here may complete held data sets (this datagram's or earlier ones).
    for tid in learned {
        release(key, tid, state, opts, stats, &mut out);
    }
    Ok(out)
}

fn hold(
    h: Held,
    key: Key,
    state: &mut NetflowState,
    opts: &FlowExportOptions,
    stats: &mut FlowExportStats,
) {
    let len = h.body.len();
    if opts.max_held_sets_per_key == 0
        || len > opts.max_held_bytes_per_key
        || state.held_total + len > opts.max_held_bytes_total
    {
        stats.note_unknown_template(&key, h.template_id);
        return;
    }
    let Some(ks) = state.key(key, stats) else {
        stats.note_unknown_template(&key, h.template_id);
        return;
    };
    ks.held_bytes += len;
    ks.held.push_back(h);
    let mut freed = 0;
    stats.held_sets += 1;
    while ks.held.len() > opts.max_held_sets_per_key || ks.held_bytes > opts.max_held_bytes_per_key
    {
        let Some(old) = ks.held.pop_front() else {
            break;
        };
        ks.held_bytes -= old.body.len();
        freed += old.body.len();
        stats.held_evicted += 1;
        stats.note_unknown_template(&key, old.template_id);
    }
    state.held_total = state.held_total + len - freed;
}

fn release(
    key: Key,
    tid: u16,
    state: &mut NetflowState,
    opts: &FlowExportOptions,
    stats: &mut FlowExportStats,
    out: &mut NetflowOut,
) {
    let Some(ks) = state.keys.get_mut(&key) else {
        return;
    };
    let Some(t) = ks.templates.get(&tid).cloned() else {
        return;
    };
    if !ks.held.iter().any(|h| h.template_id == tid) {
        return;
    }
    let (ready, keep): (VecDeque<Held>, VecDeque<Held>) =
        ks.held.drain(..).partition(|h| h.template_id == tid);
    ks.held = keep;
    ks.held_bytes = ks.held.iter().map(|h| h.body.len()).sum();
    let released: usize = ready.iter().map(|h| h.body.len()).sum();
    state.held_total = state.held_total.saturating_sub(released);
    for h in ready {
        stats.held_decoded += 1;
        let mut rd = Rd::new(&h.body);
        let before = out.rows.len();
        if let Err(e) = data_set(&mut rd, &t, tid, &h.ctx, key, state, opts, stats, out) {
            out.rows.truncate(before);
            out.held_errors.push(HeldError {
                ctx: h.ctx.clone(),
                error: WireError {
                    offset: h.offset + e.offset,
                    what: format!("held data set for template {tid}: {}", e.what),
                },
                body: h.body,
            });
        }
    }
}

fn templates(
    set: &mut Rd<'_>,
    ipfix: bool,
    options: bool,
    key: Key,
    state: &mut NetflowState,
    learned: &mut Vec<u16>,
    stats: &mut FlowExportStats,
) -> WireResult<()> {
    // Padding at the end of a set is shorter than a template header.
    let min_hdr = if options && !ipfix { 6 } else { 4 };
    while set.remaining() >= min_hdr {
        let at = set.offset();
        let id = set.u16("template id")?;
        let (count, scope) = if options && !ipfix {
            let scope_len = usize::from(set.u16("options scope length")?);
            let opt_len = usize::from(set.u16("options length")?);
            if scope_len % 4 != 0 || opt_len % 4 != 0 {
                return err(at, format!("options template {id}: scope length {scope_len} / option length {opt_len} not multiples of 4"));
            }
            if scope_len + opt_len == 0 {
                // Padding.
                break;
            }
            ((scope_len + opt_len) / 4, scope_len / 4)
        } else if options {
            let count = usize::from(set.u16("field count")?);
            let scope = usize::from(set.u16("scope field count")?);
            (count, scope)
        } else {
            (usize::from(set.u16("field count")?), 0)
        };
        if count == 0 {
            if ipfix {
                // Withdrawal (RFC 7011 8.1): id 2/3 withdraws all templates of the set type.
                if let Some(ks) = state.keys.get_mut(&key) {
                    let before: usize = ks.templates.values().map(|t| t.fields.len()).sum();
                    if id == 2 || id == 3 {
                        ks.templates.retain(|_, t| t.options != options);
                    } else {
                        ks.templates.remove(&id);
                    }
                    let after: usize = ks.templates.values().map(|t| t.fields.len()).sum();
                    state.fields_total = state.fields_total.saturating_sub(before - after);
                }
                stats.templates_withdrawn += 1;
                continue;
            }
            if id == 0 {
                break; // v9 padding
            }
            stats.templates_invalid += 1;
            stats.note(format!("template {id} from {} has no fields", key.0));
            continue;
        }
        let mut fields = Vec::new();
        for _ in 0..count {
            let mut fid = set.u16("field id")?;
            let len = set.u16("field length")?;
            let mut enterprise = 0;
            if ipfix && fid & 0x8000 != 0 {
                fid &= 0x7fff;
                enterprise = set.u32("enterprise number")?;
            }
            if fields.len() < MAX_TEMPLATE_FIELDS {
                fields.push(FieldSpec {
                    id: fid,
                    enterprise,
                    len,
                });
            }
        }
        let bad = if id < 256 {
            Some(format!("template id {id} < 256"))
        } else if count > MAX_TEMPLATE_FIELDS {
            Some(format!(
                "template {id} has {count} fields (max {MAX_TEMPLATE_FIELDS})"
            ))
        } else if options && (scope == 0 || scope > count) {
            Some(format!(
                "options template {id}: scope count {scope} of {count} fields"
            ))
        } else if !ipfix && fields.iter().any(|f| f.len == 0xffff) {
            Some(format!("v9 template {id} has a variable-length field"))
        } else {
            None
        };
        if let Some(why) = bad {
            stats.templates_invalid += 1;
            stats.note(format!("{why} from {} ignored", key.0));
            continue;
        }
        let t = Arc::new(Template::new(fields, scope, options));
        let total = state.fields_total;
        let Some(ks) = state.key(key, stats) else {
            continue;
        };
        let old = ks.templates.get(&id).map_or(0, |t| t.fields.len());
        if (old == 0 && ks.templates.len() >= MAX_TEMPLATES_PER_KEY)
            || total - old + t.fields.len() > MAX_TEMPLATE_FIELDS_TOTAL
        {
            stats.template_limit_drops += 1;
            continue;
        }
        state.fields_total = total - old + t.fields.len();
        let Some(ks) = state.keys.get_mut(&key) else {
            continue;
        };
        if options {
            stats.options_templates += 1;
        } else {
            stats.templates += 1;
        }
        ks.templates.insert(id, t);
        if !learned.contains(&id) {
            learned.push(id);
        }
    }
    Ok(())
}

/// Decodes every record of one data set; returns the number of records.
#[allow(clippy::too_many_arguments)]
fn data_set(
    set: &mut Rd<'_>,
    t: &Template,
    tid: u16,
    ctx: &Arc<FlowCtx>,
    key: Key,
    state: &mut NetflowState,
    opts: &FlowExportOptions,
    stats: &mut FlowExportStats,
    out: &mut NetflowOut,
) -> WireResult<u64> {
    let ipfix = ctx.version == 10;
    let mut n = 0;
    let mut values: Vec<(FieldSpec, &[u8])> = Vec::with_capacity(t.fields.len());
    while set.remaining() >= t.min_len.max(1) {
        let start = set.offset();
        values.clear();
        for f in &t.fields {
            let len = if f.len == 0xffff {
                let l = set.u8("variable length")?;
                if l == 255 {
                    usize::from(set.u16("variable length (long)")?)
                } else {
                    usize::from(l)
                }
            } else {
                usize::from(f.len)
            };
            values.push((
                *f,
                set.bytes(len, &format!("field {} of template {tid}", f.id))?,
            ));
        }
        n += 1;
        if t.options {
            stats.options_records += 1;
            // v9 scope field types are not information elements; IPFIX scopes are.
            let skip = if ipfix { 0 } else { t.scope };
            options_record(&values[skip..], key, state, stats);
        } else {
            let ks = state.keys.get(&key);
            let row = flow_record(&values, tid, ctx, ks, opts.community_id_seed);
            out.rows.push((ctx.clone(), row));
        }
        if set.offset() == start {
            break; // zero-length records: one is enough
        }
    }
    Ok(n)
}

/// Sampling information carried by a record.
#[derive(Default)]
struct Sampling {
    rate: Option<u64>,
    packet_interval: Option<u64>,
    packet_space: Option<u64>,
    sampler: Option<u64>,
}

impl Sampling {
    fn field(&mut self, id: u16, v: Option<u64>) -> bool {
        match id {
            34 | 50 => self.rate = v.filter(|&x| x > 0),
            305 => self.packet_interval = v.filter(|&x| x > 0),
            306 => self.packet_space = v,
            48 | 302 => self.sampler = v,
            _ => return false,
        }
        true
    }

    fn rate(&self) -> Option<u64> {
        if let Some(i) = self.packet_interval {
            return Some(i.saturating_add(self.packet_space.unwrap_or(0)) / i);
        }
        self.rate
    }
}

fn options_record(
    values: &[(FieldSpec, &[u8])],
    key: Key,
    state: &mut NetflowState,
    stats: &mut FlowExportStats,
) {
    let mut s = Sampling::default();
    let mut init = None;
    for (f, v) in values {
        if f.enterprise != 0 {
            continue;
        }
        if !s.field(f.id, uint(v)) && f.id == 160 {
            init = uint(v).and_then(|x| i64::try_from(x).ok());
        }
    }
    let rate = s.rate();
    if rate.is_none() && init.is_none() {
        return;
    }
    let Some(ks) = state.key(key, stats) else {
        return;
    };
    if let Some(rate) = rate {
        if ks.sampling.len() < MAX_SAMPLERS_PER_KEY
            || ks.sampling.contains_key(&s.sampler.unwrap_or(0))
        {
            ks.sampling.insert(s.sampler.unwrap_or(0), rate);
            stats.sampling_updates += 1;
        }
    }
    if init.is_some() {
        ks.sys_init_ms = init;
    }
}

/// Raw time fields of one record, resolved once all fields are read.
#[derive(Default)]
struct Times {
    start_up: Option<u64>,
    end_up: Option<u64>,
    start_s: Option<u64>,
    end_s: Option<u64>,
    start_ms: Option<u64>,
    end_ms: Option<u64>,
    start_ntp: Option<u64>,
    end_ntp: Option<u64>,
    start_delta_us: Option<u64>,
    end_delta_us: Option<u64>,
    sys_init_ms: Option<u64>,
}

fn ntp_to_us(v: u64) -> i64 {
    let secs = (v >> 32) as i64 - NTP_UNIX_OFFSET;
    let frac = ((v & 0xffff_ffff) * 1_000_000) >> 32;
    secs * 1_000_000 + frac as i64
}

impl Times {
    fn resolve(&self, ctx: &FlowCtx, ks_init: Option<i64>) -> (Option<i64>, Option<i64>) {
        let ms = |v: u64| i64::try_from(v).ok().map(|x| x.saturating_mul(1000));
        let s = |v: u64| i64::try_from(v).ok().map(|x| x.saturating_mul(1_000_000));
        let export_us = i64::from(ctx.unix_secs) * 1_000_000;
        // sysUpTime-relative: v9 from the header, IPFIX from systemInitTimeMilliseconds.
        let boot_ms = match ctx.sys_uptime_ms {
            Some(up) => Some(i64::from(ctx.unix_secs) * 1000 - i64::from(up)),
            None => self
                .sys_init_ms
                .and_then(|v| i64::try_from(v).ok())
                .or(ks_init),
        };
        // Exporter-supplied values may be anything: all arithmetic is checked.
        let up = |v: Option<u64>| {
            boot_ms?
                .checked_add(i64::try_from(v?).ok()?)?
                .checked_mul(1000)
        };
        let pick = |abs_ms: Option<u64>,
                    abs_s: Option<u64>,
                    ntp: Option<u64>,
                    delta: Option<u64>,
                    upv: Option<u64>| {
            ntp.map(ntp_to_us)
                .or_else(|| abs_ms.and_then(ms))
                .or_else(|| abs_s.and_then(s))
                .or_else(|| {
                    delta
                        .and_then(|d| i64::try_from(d).ok())
                        .and_then(|d| export_us.checked_sub(d))
                })
                .or_else(|| up(upv))
        };
        (
            pick(
                self.start_ms,
                self.start_s,
                self.start_ntp,
                self.start_delta_us,
                self.start_up,
            ),
            pick(
                self.end_ms,
                self.end_s,
                self.end_ntp,
                self.end_delta_us,
                self.end_up,
            ),
        )
    }
}

fn flow_record(
    values: &[(FieldSpec, &[u8])],
    tid: u16,
    ctx: &FlowCtx,
    ks: Option<&KeyState>,
    seed: u16,
) -> FlowRow {
    let mut row = FlowRow {
        template_id: Some(tid),
        ..FlowRow::default()
    };
    let mut times = Times::default();
    let mut samp = Sampling::default();
    let mut mpls: [Option<u32>; 10] = [None; 10];
    let mut datalink: Option<&[u8]> = None;
    for &(f, v) in values {
        let typed = f.enterprise == 0 && field(&mut row, &mut times, &mut samp, &mut mpls, f.id, v);
        if f.enterprise == 0 && f.id == 315 {
            datalink = Some(v);
        }
        if !typed {
            row.extra.push((f.enterprise, f.id, v.to_vec()));
        }
    }
    row.mpls_labels = mpls.iter().flatten().copied().collect();
    let (start, end) = times.resolve(ctx, ks.and_then(|k| k.sys_init_ms));
    row.flow_start = start;
    row.flow_end = end;
    row.sampling_rate = samp
        .rate()
        .or_else(|| ks.and_then(|k| k.sampling.get(&samp.sampler.unwrap_or(0)).copied()));
    if let (Some(frame), None) = (datalink, row.src) {
        let mut d = Decoded::default();
        let _ = decode_frame(linktype::ETHERNET, frame, &mut d);
        if let Some(ip) = d.ip {
            row.src = Some(ip.src);
            row.dst = Some(ip.dst);
            row.proto = Some(ip.proto);
            row.sport = ip.ports.map(|p| p.0);
            row.dport = ip.ports.map(|p| p.1);
            if let Some((t, c)) = ip.icmp {
                row.icmp_type = Some(t);
                row.icmp_code = Some(c);
            }
            row.tcp_flags = row.tcp_flags.or(ip.tcp_flags.map(u16::from));
        }
        if row.src_vlan.is_none() {
            row.src_vlan = d.vlan_outer();
        }
    }
    finish_row(&mut row, seed);
    row
}

/// ICMP type/code from the destination port (the NetFlow convention `type << 8 | code`) when
/// no ICMP element was given, then Community ID.
fn finish_row(row: &mut FlowRow, seed: u16) {
    if row.proto.is_some_and(|p| p != 1 && p != 58) {
        // Exporters send icmpTypeCode = 0 on every flow of a shared template.
        row.icmp_type = None;
        row.icmp_code = None;
    }
    if matches!(row.proto, Some(1) | Some(58)) && row.icmp_type.is_none() {
        if let Some(dp) = row.dport {
            row.icmp_type = Some((dp >> 8) as u8);
            row.icmp_code = Some((dp & 0xff) as u8);
        }
    }
    let ports = match (row.proto, row.icmp_type, row.icmp_code) {
        (Some(1) | Some(58), Some(t), Some(c)) => (u16::from(t), u16::from(c)),
        _ => (row.sport.unwrap_or(0), row.dport.unwrap_or(0)),
    };
    row.community_id = community_id(row.src, row.dst, row.proto, ports, seed);
}

/// Sets an address column unless it already holds a specified address (templates that carry
/// both the IPv4 and the IPv6 element leave the unused one as `0.0.0.0` or `::`).
fn next_hop(slot: &mut Option<IpAddr>, a: Option<IpAddr>) -> bool {
    let Some(a) = a else {
        return false;
    };
    if slot.is_none() || slot.is_some_and(|s| s.is_unspecified()) {
        *slot = Some(a);
    }
    true
}

/// Maps one IANA element to a typed column; `false` sends it to `extra`.
fn field(
    row: &mut FlowRow,
    t: &mut Times,
    s: &mut Sampling,
    mpls: &mut [Option<u32>; 10],
    id: u16,
    v: &[u8],
) -> bool {
    let u = uint(v);
    let u8v = u.and_then(|x| u8::try_from(x).ok());
    let u16v = u.and_then(|x| u16::try_from(x).ok());
    let u32v = u.and_then(|x| u32::try_from(x).ok());
    let a = addr(v);
    macro_rules! set {
        ($slot:expr, $val:expr) => {{
            match $val {
                Some(x) => {
                    $slot = Some(x);
                    true
                }
                None => false,
            }
        }};
    }
    macro_rules! alt {
        ($slot:expr, $val:expr) => {{
            match $val {
                Some(x) => {
                    if $slot.is_none() {
                        $slot = Some(x);
                    }
                    true
                }
                None => false,
            }
        }};
    }
    match id {
        1 => set!(row.bytes, u),
        23 | 85 => alt!(row.bytes, u),
        2 => set!(row.packets, u),
        24 | 86 => alt!(row.packets, u),
        4 => set!(row.proto, u8v),
        5 => set!(row.tos, u8v),
        6 => set!(row.tcp_flags, u16v),
        7 => set!(row.sport, u16v),
        11 => set!(row.dport, u16v),
        8 | 27 => next_hop(&mut row.src, a),
        12 | 28 => next_hop(&mut row.dst, a),
        9 | 29 => set!(row.src_mask, u8v),
        13 | 30 => set!(row.dst_mask, u8v),
        10 => set!(row.input, u32v),
        14 => set!(row.output, u32v),
        // ingress/egressPhysicalInterface when the (logical) interface is absent.
        252 => alt!(row.input, u32v),
        253 => alt!(row.output, u32v),
        // v4 and v6 addresses may both be present: a specified one wins over `0.0.0.0`/`::`.
        15 | 62 => next_hop(&mut row.next_hop, a),
        18 | 63 => next_hop(&mut row.bgp_next_hop, a),
        16 => set!(row.src_as, u32v),
        17 => set!(row.dst_as, u32v),
        22 => set!(t.start_up, u),
        21 => set!(t.end_up, u),
        150 => set!(t.start_s, u),
        151 => set!(t.end_s, u),
        152 => set!(t.start_ms, u),
        153 => set!(t.end_ms, u),
        154 | 156 if v.len() == 8 => set!(t.start_ntp, u),
        155 | 157 if v.len() == 8 => set!(t.end_ntp, u),
        158 => set!(t.start_delta_us, u),
        159 => set!(t.end_delta_us, u),
        160 => {
            t.sys_init_ms = u;
            false
        }
        32 | 139 => match u16v {
            Some(tc) => {
                row.icmp_type = Some((tc >> 8) as u8);
                row.icmp_code = Some((tc & 0xff) as u8);
                true
            }
            None => false,
        },
        176 | 178 => set!(row.icmp_type, u8v),
        177 | 179 => set!(row.icmp_code, u8v),
        34 | 50 | 305 | 306 => s.field(id, u),
        48 | 302 => {
            s.field(id, u);
            false // the sampler id itself stays visible in `extra`
        }
        58 => set!(row.src_vlan, u16v),
        59 => set!(row.dst_vlan, u16v),
        243 => alt!(row.src_vlan, u16v),
        254 => alt!(row.dst_vlan, u16v),
        61 => set!(row.direction, u8v),
        136 => set!(row.end_reason, u8v),
        70..=79 if v.len() == 3 => {
            // Label (20 bits), TC, bottom-of-stack; all zero = no label at that depth.
            if v != [0, 0, 0] {
                mpls[usize::from(id - 70)] = Some(u32::from_be_bytes([0, v[0], v[1], v[2]]) >> 4);
            }
            true
        }
        225 | 281 => next_hop(&mut row.post_nat_src, a),
        226 | 282 => next_hop(&mut row.post_nat_dst, a),
        227 => set!(row.post_nat_sport, u16v),
        228 => set!(row.post_nat_dport, u16v),
        _ => false,
    }
}
