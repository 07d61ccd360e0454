//! The flow tracker: folds decoded packets ([`PacketInfo`]) into bidirectional flow records
//! (table `pcap.flow`) as a connection tracker would, and emits each flow when it ends.
//!
//! Semantics (also in docs/flows.md):
//! - Key: canonical 5-tuple + VLAN (outer, inner), ordered like Community ID (smaller
//!   `(address, port)` endpoint first; ICMP type/code mapped to the spec's port equivalents, one-way
//!   ICMP types keep their direction), so both directions of a conversation share one flow and each
//!   flow has exactly one `community_id`. VLAN ID 0 (802.1Q "priority tag, no VLAN") keys like an
//!   absent tag, as in Suricata; the `vlan` column keeps what the first packet carried.
//! - Originator: the sender of the first packet seen, except that a TCP flow whose first packet is
//!   a SYN-ACK is flipped (its receiver is the originator), as Zeek does.
//! - Ends: `fin` (FIN seen from both sides) and `rst` (any RST) start a 5 s linger (Zeek's
//!   `tcp_close_delay`/`tcp_reset_delay`) so the final ACKs still count in the flow; a SYN
//!   without ACK during the linger starts a new flow. `idle`: no packet for the idle timeout
//!   (TCP 5 min like Zeek's `tcp_inactivity_timeout`, others 1 min like Zeek's
//!   `udp/icmp_inactivity_timeout`). `active`: a packet arrives when the flow is older than the
//!   active timeout (default 30 min, NetFlow's usual value): the old flow ends and the packet
//!   starts a new one with the same key. `eof`: still open at [`FlowTracker::finish`].
//! - Time: the tracker's clock is the highest packet time seen; `ts` is the earliest packet time
//!   of the flow and `last_ts` the latest, so `duration` is never negative on unordered input.
//! - Expiry without scanning: a min-heap of `(deadline, slab index, generation)` timers. A flow
//!   pushes a timer when created and when it starts closing, not per packet; a popped timer whose
//!   flow has seen newer packets is re-pushed with the flow's real deadline (at most once per idle
//!   period of an active flow), and timers of ended flows are skipped (generation mismatch): lazy
//!   deletion, O(log flows) per flow event and O(1) per packet, at most two timers per live flow.
//!   A heap rather than a FIFO because re-pushed deadlines are not in insertion order: a FIFO
//!   would expire flows up to one idle period late and hold up to twice the live flows.
//! - Fragments: a packet with `has_ports == false` (a non-first fragment) keys with ports 0, so
//!   it forms its own flow with null ports; no reassembly.
//!
//! Touches only its own state; the reader decides what to do with the batches.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::IpAddr;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Decimal128Builder, Int64Builder, StringBuilder, StructArray,
    TimestampMicrosecondBuilder, UInt16Builder, UInt8Builder,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::community_id::{community_id_v1_into, icmp_port_equivalents, proto_has_ports};
use crate::table::{FlowKeyV4, FlowKeyV6, FlowTable};

const TCP: u8 = 6;
const ICMP: u8 = 1;
const ICMP6: u8 = 58;
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

/// One decoded packet, as the pcap reader hands it to the tracker.
#[derive(Debug, Clone)]
pub struct PacketInfo {
    /// Capture time, UTC microseconds.
    pub ts_us: i64,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IP protocol number (innermost).
    pub proto: u8,
    /// Ports; ICMP: type, code; 0 when absent.
    pub sport: u16,
    pub dport: u16,
    /// False for non-first fragments and protocols without ports.
    pub has_ports: bool,
    pub vlan_outer: Option<u16>,
    pub vlan_inner: Option<u16>,
    /// IP total length of the innermost IP packet (Zeek's `ip_bytes`).
    pub ip_bytes: u32,
    /// Transport payload bytes.
    pub payload_bytes: u32,
    /// Raw TCP flags byte, 0 for non-TCP.
    pub tcp_flags: u8,
    /// TCP sequence number (0 for non-TCP).
    pub tcp_seq: u32,
}

/// Tracker settings. Build with `FlowConfig { idle_timeout_us: .., ..Default::default() }`:
/// fields may be added.
#[derive(Debug, Clone)]
pub struct FlowConfig {
    /// Idle timeout for UDP, ICMP and other non-TCP flows. Default 60 s (Zeek's
    /// `udp_inactivity_timeout` and `icmp_inactivity_timeout`).
    pub idle_timeout_us: i64,
    /// A flow older than this ends (`active`) when its next packet arrives; that packet starts a
    /// new flow. Default 30 min (NetFlow's customary active timeout). `i64::MAX` disables.
    pub active_timeout_us: i64,
    /// Community ID seed. Default 0.
    pub community_id_seed: u16,
    /// [`FlowTracker::take_batch`] returns a batch once this many flows have ended. Default 8192.
    pub batch_rows: usize,
    /// Idle timeout for TCP flows. Default 300 s (Zeek's `tcp_inactivity_timeout`).
    pub tcp_idle_timeout_us: i64,
    /// How long a TCP flow lingers after FIN from both sides or a RST, so trailing ACKs and
    /// retransmitted RSTs stay in it. Default 5 s (Zeek's `tcp_close_delay`).
    pub tcp_close_linger_us: i64,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            idle_timeout_us: 60_000_000,
            active_timeout_us: 1_800_000_000,
            community_id_seed: 0,
            batch_rows: 8192,
            tcp_idle_timeout_us: 300_000_000,
            tcp_close_linger_us: 5_000_000,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AnyKey {
    V4(FlowKeyV4),
    V6(FlowKeyV6),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EndReason {
    Fin,
    Rst,
    Idle,
    Active,
    Eof,
}

impl EndReason {
    fn as_str(self) -> &'static str {
        match self {
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::Idle => "idle",
            EndReason::Active => "active",
            EndReason::Eof => "eof",
        }
    }
}

/// Per-flow state (one slab entry).
#[derive(Clone, Debug)]
struct Flow {
    key: AnyKey,
    gen: u32,
    live: bool,
    orig: IpAddr,
    resp: IpAddr,
    orig_port: u16,
    resp_port: u16,
    proto: u8,
    has_ports: bool,
    vlan_outer: Option<u16>,
    vlan_inner: Option<u16>,
    ts: i64,
    last_ts: i64,
    orig_pkts: u64,
    resp_pkts: u64,
    orig_ip_bytes: u64,
    resp_ip_bytes: u64,
    orig_payload: u64,
    resp_payload: u64,
    flags_orig: u8,
    flags_resp: u8,
    fin_orig: bool,
    fin_resp: bool,
    /// Set when the flow starts closing (both FINs or a RST): (time, reason).
    closing: Option<(i64, EndReason)>,
}

/// An ended flow waiting for the next batch.
struct Ended {
    flow: Flow,
    reason: EndReason,
}

/// Bidirectional flow tracker producing `pcap.flow` batches. See the module documentation.
pub struct FlowTracker {
    cfg: FlowConfig,
    schema: SchemaRef,
    v4: FlowTable<FlowKeyV4, u32>,
    v6: FlowTable<FlowKeyV6, u32>,
    slab: Vec<Flow>,
    free: Vec<u32>,
    timers: BinaryHeap<Reverse<(i64, u32, u32)>>,
    ended: Vec<Ended>,
    now: i64,
    cid_buf: String,
}

/// Arrow schema of table `pcap.flow`.
pub fn flow_schema() -> SchemaRef {
    use silt_core::meta;
    let ts = silt_core::time::timestamp_type();
    // Counters are signed 64-bit (BIGINT in Spark, Trino, Athena; an unsigned INT64 reads as
    // decimal(20,0) in Spark); a flow's packets and bytes never approach 2^63.
    let u64f = |n: &str| Field::new(n, DataType::Int64, true);
    let vlan = Fields::from(vec![
        Field::new("outer", DataType::UInt16, true),
        Field::new("inner", DataType::UInt16, true),
    ]);
    let fields = vec![
        Field::new("ts", ts.clone(), true),
        Field::new("last_ts", ts, true),
        Field::new("duration", DataType::Decimal128(18, 6), true),
        Field::new("src", DataType::Utf8, true),
        Field::new("dst", DataType::Utf8, true),
        Field::new("sport", DataType::UInt16, true),
        Field::new("dport", DataType::UInt16, true),
        Field::new("proto", DataType::UInt8, true),
        Field::new("vlan", DataType::Struct(vlan), true),
        u64f("orig_pkts"),
        u64f("orig_bytes"),
        u64f("orig_payload_bytes"),
        u64f("resp_pkts"),
        u64f("resp_bytes"),
        u64f("resp_payload_bytes"),
        Field::new("tcp_flags_orig", DataType::UInt8, true),
        Field::new("tcp_flags_resp", DataType::UInt8, true),
        Field::new("end_reason", DataType::Utf8, true),
        Field::new("community_id", DataType::Utf8, true),
    ];
    let md = [
        (meta::TIME_COLUMN.to_string(), "ts".to_string()),
        (meta::TABLE.to_string(), "pcap.flow".to_string()),
        (
            meta::LOOKUP_COLUMNS.to_string(),
            "community_id,src,dst".to_string(),
        ),
    ];
    Arc::new(Schema::new(fields).with_metadata(md.into_iter().collect()))
}

/// 12-bit VLAN ID for the key; 0 (absent or priority-tagged) keys alike.
fn vid(v: Option<u16>) -> u32 {
    v.map_or(0, |v| (v & 0x0fff) as u32)
}

fn v6_words(a: IpAddr) -> [u32; 4] {
    let o = match a {
        IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
        IpAddr::V6(v) => v.octets(),
    };
    std::array::from_fn(|i| {
        u32::from_be_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]])
    })
}

/// Canonical key of a packet (see the module documentation).
fn packet_key(p: &PacketInfo) -> AnyKey {
    let ports = p.has_ports && proto_has_ports(p.proto);
    let (mut sp, mut dp, mut one_way) = if ports {
        (p.sport, p.dport, false)
    } else {
        (0, 0, false)
    };
    if ports && (p.proto == ICMP || p.proto == ICMP6) {
        (sp, dp, one_way) = icmp_port_equivalents(p.proto, p.sport, p.dport);
    }
    let tail = ((p.proto as u32) << 24) | (vid(p.vlan_outer) << 12) | vid(p.vlan_inner);
    match (p.src, p.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let (s, d) = (u32::from(s), u32::from(d));
            let (a1, a2, p1, p2) = if one_way || (s, sp) <= (d, dp) {
                (s, d, sp, dp)
            } else {
                (d, s, dp, sp)
            };
            AnyKey::V4(FlowKeyV4 {
                words: [a1, a2, ((p1 as u32) << 16) | p2 as u32, tail],
            })
        }
        (s, d) => {
            let (s, d) = (v6_words(s), v6_words(d));
            let (a1, a2, p1, p2) = if one_way || (s, sp) <= (d, dp) {
                (s, d, sp, dp)
            } else {
                (d, s, dp, sp)
            };
            let mut words = [0u32; 10];
            words[..4].copy_from_slice(&a1);
            words[4..8].copy_from_slice(&a2);
            words[8] = ((p1 as u32) << 16) | p2 as u32;
            words[9] = tail;
            AnyKey::V6(FlowKeyV6 { words })
        }
    }
}

impl FlowTracker {
    /// A tracker with the given settings.
    pub fn new(cfg: FlowConfig) -> Self {
        FlowTracker {
            cfg,
            schema: flow_schema(),
            v4: FlowTable::new(),
            v6: FlowTable::new(),
            slab: Vec::new(),
            free: Vec::new(),
            timers: BinaryHeap::new(),
            ended: Vec::new(),
            now: i64::MIN,
            cid_buf: String::with_capacity(32),
        }
    }

    /// Schema of the batches (table `pcap.flow`).
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Number of flows currently open (tracked in memory).
    pub fn live_flows(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// Number of ended flows waiting for [`FlowTracker::take_batch`].
    pub fn pending_rows(&self) -> usize {
        self.ended.len()
    }

    /// Memory-relevant sizes: (slab capacity, queued timer entries). For bounded-memory tests.
    pub fn footprint(&self) -> (usize, usize) {
        (self.slab.capacity(), self.timers.len())
    }

    fn idle_of(&self, proto: u8) -> i64 {
        if proto == TCP {
            self.cfg.tcp_idle_timeout_us
        } else {
            self.cfg.idle_timeout_us
        }
    }

    /// When the flow at `idx` is due to end, and why, given no further packets.
    fn due(&self, f: &Flow) -> (i64, EndReason) {
        let idle = f.last_ts.saturating_add(self.idle_of(f.proto));
        match f.closing {
            Some((t, r)) => {
                let linger = t.saturating_add(self.cfg.tcp_close_linger_us);
                if linger <= idle {
                    (linger, r)
                } else {
                    (idle, EndReason::Idle)
                }
            }
            None => (idle, EndReason::Idle),
        }
    }

    /// Ends every flow whose deadline is at or before `now`.
    fn expire(&mut self, now: i64) {
        while let Some(&Reverse((deadline, idx, gen))) = self.timers.peek() {
            if deadline > now {
                break;
            }
            self.timers.pop();
            let f = &self.slab[idx as usize];
            if !f.live || f.gen != gen {
                continue; // lazy deletion: the flow ended or the slot was reused
            }
            let (due, reason) = self.due(f);
            if due <= now {
                self.end_flow(idx, reason);
            } else {
                self.timers.push(Reverse((due, idx, gen)));
            }
        }
    }

    fn end_flow(&mut self, idx: u32, reason: EndReason) {
        let f = &mut self.slab[idx as usize];
        f.live = false;
        let flow = f.clone();
        f.gen = f.gen.wrapping_add(1);
        match flow.key {
            AnyKey::V4(k) => {
                self.v4.remove(&k);
            }
            AnyKey::V6(k) => {
                self.v6.remove(&k);
            }
        }
        self.free.push(idx);
        self.ended.push(Ended { flow, reason });
    }

    fn new_flow(&mut self, key: AnyKey, p: &PacketInfo) {
        let ports = p.has_ports && proto_has_ports(p.proto);
        // Zeek flips a TCP connection whose first packet is a SYN-ACK: the sender is the responder.
        let flip = p.proto == TCP && p.tcp_flags & (SYN | ACK) == (SYN | ACK);
        let (orig, resp, op, rp) = if flip {
            (p.dst, p.src, p.dport, p.sport)
        } else {
            (p.src, p.dst, p.sport, p.dport)
        };
        let flow = Flow {
            key,
            gen: 0,
            live: true,
            orig,
            resp,
            orig_port: if ports { op } else { 0 },
            resp_port: if ports { rp } else { 0 },
            proto: p.proto,
            has_ports: ports,
            vlan_outer: p.vlan_outer,
            vlan_inner: p.vlan_inner,
            ts: p.ts_us,
            last_ts: p.ts_us,
            orig_pkts: 0,
            resp_pkts: 0,
            orig_ip_bytes: 0,
            resp_ip_bytes: 0,
            orig_payload: 0,
            resp_payload: 0,
            flags_orig: 0,
            flags_resp: 0,
            fin_orig: false,
            fin_resp: false,
            closing: None,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                let gen = self.slab[i as usize].gen;
                self.slab[i as usize] = Flow { gen, ..flow };
                i
            }
            None => {
                self.slab.push(flow);
                (self.slab.len() - 1) as u32
            }
        };
        match key {
            AnyKey::V4(k) => {
                self.v4.insert(k, idx);
            }
            AnyKey::V6(k) => {
                self.v6.insert(k, idx);
            }
        }
        let f = &self.slab[idx as usize];
        let (due, _) = self.due(f);
        let gen = f.gen;
        self.timers.push(Reverse((due, idx, gen)));
        self.update(idx, p);
    }

    fn update(&mut self, idx: u32, p: &PacketInfo) {
        let linger_q = {
            let f = &mut self.slab[idx as usize];
            let from_orig = if f.orig != f.resp {
                p.src == f.orig
            } else {
                p.sport == f.orig_port
            };
            f.ts = f.ts.min(p.ts_us);
            f.last_ts = f.last_ts.max(p.ts_us);
            if from_orig {
                f.orig_pkts += 1;
                f.orig_ip_bytes += p.ip_bytes as u64;
                f.orig_payload += p.payload_bytes as u64;
                f.flags_orig |= p.tcp_flags;
            } else {
                f.resp_pkts += 1;
                f.resp_ip_bytes += p.ip_bytes as u64;
                f.resp_payload += p.payload_bytes as u64;
                f.flags_resp |= p.tcp_flags;
            }
            if f.proto == TCP && f.closing.is_none() {
                if p.tcp_flags & FIN != 0 {
                    if from_orig {
                        f.fin_orig = true;
                    } else {
                        f.fin_resp = true;
                    }
                }
                if p.tcp_flags & RST != 0 {
                    f.closing = Some((p.ts_us, EndReason::Rst));
                } else if f.fin_orig && f.fin_resp {
                    f.closing = Some((p.ts_us, EndReason::Fin));
                }
                f.closing.map(|(t, _)| (t, f.gen))
            } else {
                None
            }
        };
        if let Some((t, gen)) = linger_q {
            let due = t.saturating_add(self.cfg.tcp_close_linger_us);
            self.timers.push(Reverse((due, idx, gen)));
        }
    }

    /// Accounts one packet; may end flows (timeouts as the packet clock advances).
    pub fn packet(&mut self, p: &PacketInfo) {
        if p.ts_us > self.now {
            self.now = p.ts_us;
            self.expire(self.now);
        }
        let key = packet_key(p);
        let found = match &key {
            AnyKey::V4(k) => self.v4.get(k).copied(),
            AnyKey::V6(k) => self.v6.get(k).copied(),
        };
        let Some(idx) = found else {
            self.new_flow(key, p);
            return;
        };
        let f = &self.slab[idx as usize];
        let ended = if let Some((t, r)) = f.closing {
            let new_syn = p.tcp_flags & (SYN | ACK) == SYN;
            (new_syn || p.ts_us >= t.saturating_add(self.cfg.tcp_close_linger_us)).then_some(r)
        } else {
            None
        }
        .or_else(|| {
            (p.ts_us >= f.last_ts.saturating_add(self.idle_of(f.proto))).then_some(EndReason::Idle)
        })
        .or_else(|| {
            (p.ts_us.saturating_sub(f.ts) >= self.cfg.active_timeout_us)
                .then_some(EndReason::Active)
        });
        match ended {
            Some(reason) => {
                self.end_flow(idx, reason);
                self.new_flow(key, p);
            }
            None => self.update(idx, p),
        }
    }

    /// Ended flows as a batch, once at least `batch_rows` have ended; `None` before that.
    /// Call in a loop after each packet or chunk of packets.
    pub fn take_batch(&mut self) -> Option<RecordBatch> {
        if self.ended.len() >= self.cfg.batch_rows.max(1) {
            Some(self.build_batch())
        } else {
            None
        }
    }

    /// End of input: ends every open flow (`eof`) and returns all ended flows not yet taken
    /// (`None` if there are none). The tracker is empty afterwards and can be reused.
    pub fn finish(&mut self) -> Option<RecordBatch> {
        let mut open: Vec<(i64, u32)> = self
            .slab
            .iter()
            .enumerate()
            .filter(|(_, f)| f.live)
            .map(|(i, f)| (f.ts, i as u32))
            .collect();
        open.sort_unstable(); // deterministic output order
        for (_, idx) in open {
            // A TCP flow already closing (FIN both ways / RST) keeps that reason.
            let reason = self.slab[idx as usize]
                .closing
                .map_or(EndReason::Eof, |(_, r)| r);
            self.end_flow(idx, reason);
        }
        self.timers.clear();
        self.slab.clear();
        self.free.clear();
        self.now = i64::MIN;
        (!self.ended.is_empty()).then(|| self.build_batch())
    }

    fn build_batch(&mut self) -> RecordBatch {
        let rows = std::mem::take(&mut self.ended);
        let n = rows.len();
        let mut ts = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut last_ts = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut duration = Decimal128Builder::with_capacity(n);
        let mut src = StringBuilder::with_capacity(n, n * 16);
        let mut dst = StringBuilder::with_capacity(n, n * 16);
        let mut sport = UInt16Builder::with_capacity(n);
        let mut dport = UInt16Builder::with_capacity(n);
        let mut proto = UInt8Builder::with_capacity(n);
        let mut outer = UInt16Builder::with_capacity(n);
        let mut inner = UInt16Builder::with_capacity(n);
        let mut u64s: [Int64Builder; 6] = std::array::from_fn(|_| Int64Builder::with_capacity(n));
        let mut fo = UInt8Builder::with_capacity(n);
        let mut fr = UInt8Builder::with_capacity(n);
        let mut reason = StringBuilder::with_capacity(n, n * 4);
        let mut cid = StringBuilder::with_capacity(n, n * 30);
        let mut text = String::with_capacity(48);
        for Ended { flow: f, reason: r } in &rows {
            use std::fmt::Write as _;
            ts.append_value(f.ts);
            last_ts.append_value(f.last_ts);
            // Decimal128(18, 6) seconds: the unscaled value is exactly the microseconds.
            duration.append_value((f.last_ts - f.ts) as i128);
            text.clear();
            let _ = write!(text, "{}", f.orig); // IpAddr Display = silt_core::addr canonical text
            src.append_value(&text);
            text.clear();
            let _ = write!(text, "{}", f.resp);
            dst.append_value(&text);
            sport.append_option(f.has_ports.then_some(f.orig_port));
            dport.append_option(f.has_ports.then_some(f.resp_port));
            proto.append_value(f.proto);
            outer.append_option(f.vlan_outer);
            inner.append_option(f.vlan_inner);
            let vals = [
                f.orig_pkts,
                f.orig_ip_bytes,
                f.orig_payload,
                f.resp_pkts,
                f.resp_ip_bytes,
                f.resp_payload,
            ];
            for (b, v) in u64s.iter_mut().zip(vals) {
                b.append_value(i64::try_from(v).unwrap_or(i64::MAX));
            }
            let tcp = f.proto == TCP;
            fo.append_option(tcp.then_some(f.flags_orig));
            fr.append_option(tcp.then_some(f.flags_resp));
            reason.append_value(r.as_str());
            self.cid_buf.clear();
            community_id_v1_into(
                &mut self.cid_buf,
                f.orig,
                f.resp,
                f.proto,
                f.orig_port,
                f.resp_port,
                self.cfg.community_id_seed,
                true,
            );
            cid.append_value(&self.cid_buf);
        }
        let vlan_fields = match self.schema.field_with_name("vlan").map(|f| f.data_type()) {
            Ok(DataType::Struct(fs)) => fs.clone(),
            _ => unreachable!("pcap.flow schema has a vlan struct"),
        };
        let vlan = StructArray::new(
            vlan_fields,
            vec![
                Arc::new(outer.finish()) as ArrayRef,
                Arc::new(inner.finish()),
            ],
            None,
        );
        let [op, ob, opl, rp, rb, rpl] = u64s.map(|mut b| Arc::new(b.finish()) as ArrayRef);
        let cols: Vec<ArrayRef> = vec![
            Arc::new(ts.finish()),
            Arc::new(last_ts.finish()),
            Arc::new(
                duration
                    .finish()
                    .with_precision_and_scale(18, 6)
                    .expect("valid decimal type"),
            ),
            Arc::new(src.finish()),
            Arc::new(dst.finish()),
            Arc::new(sport.finish()),
            Arc::new(dport.finish()),
            Arc::new(proto.finish()),
            Arc::new(vlan),
            op,
            ob,
            opl,
            rp,
            rb,
            rpl,
            Arc::new(fo.finish()),
            Arc::new(fr.finish()),
            Arc::new(reason.finish()),
            Arc::new(cid.finish()),
        ];
        RecordBatch::try_new(self.schema.clone(), cols).expect("pcap.flow batch matches its schema")
    }
}
