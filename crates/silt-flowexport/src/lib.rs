//! silt-flowexport: flow-export collectors. sFlow v5, NetFlow v5, NetFlow v9 and IPFIX datagrams
//! (UDP payloads, handed in one at a time as [`Datagram`]s) become Arrow batches of
//! `sflow.sample`, `sflow.counter` and `netflow.flow`, and every datagram that cannot be decoded
//! becomes a [`silt_core::Reject`]. Tables, columns, the time column rule and the template
//! handling are documented in `FLOWS.md`.
//!
//! - [`Collector`]: all state of one stream (templates, held data sets, sampling rates, sequence
//!   tracking, buffered rows); `datagram`, `flush`, `finish`, `report`, `stats`.
//! - `sflow` (module): the sFlow v5 decoder; `netflow` (module): NetFlow v5/v9/IPFIX and the
//!   template state; `schema` (module): schemas, row structs and batch building; `wire`
//!   (module): the bounds-checked reader both decoders use.
//!
//! **Why the wire formats are decoded by hand.** `netflow_parser` 1.0.6 (crates.io, MIT/Apache)
//! was evaluated: it scopes templates per exporter/domain (`AutoScopedParser`), parses options
//! templates and enterprise fields, and bounds its pending-data cache. It does not fit because
//! a data set held for a missing template is stored as bare bytes (`PendingFlowEntry { raw_data,
//! cached_at }`) and, when the template arrives, is re-parsed *into the template packet's*
//! flowsets: the replayed records lose the header of the datagram that carried them (v9
//! `sysUptime`/`unix_secs`, which first/last switched are relative to, the sequence number, and
//! for silt the frame number and arrival time). Its errors name no absolute offset within the
//! datagram, and its output is an owned tree of enums per field, which silt would convert again.
//! For sFlow, `sflow-parser` 0.7 (pre-1.0, one maintainer) decodes a whole datagram into owned
//! structures and fails the whole datagram on any record error without an offset, and `sflow`
//! 0.0.1 is unmaintained; the sFlow XDR layout is small enough to walk with bounds checks.
//!
//! - [`capture`]: the `sflow` and `netflow` formats: captures read by silt-pcap's framing, each
//!   frame's UDP datagram handed to a [`Collector`];
//! - [`datagrams`]: datagrams received live (`silt serve --sflow/--netflow`), framed for the
//!   write-ahead log, and the formats that decode them.
//!
//! This crate does no I/O: callers (silt-pcap's framing through [`capture`], a live socket) hand
//! it datagrams. It uses `silt-core` (Emit, Reject, metadata keys), `silt-pcap` (`decode_frame` for
//! sampled packet headers) and `silt-flow` (Community ID); it touches only its own modules.

pub mod capture;
pub mod datagrams;
pub mod netflow;
pub mod schema;
pub mod sflow;
pub mod wire;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use silt_core::{Emit, Reject, SourceInfo, TableName};

pub use capture::{CaptureOptions, FlowFrames, NETFLOW_FORMAT, SFLOW_FORMAT};
pub use datagrams::{NETFLOW_DATAGRAMS_FORMAT, SFLOW_DATAGRAMS_FORMAT};
pub use schema::{netflow_flow_schema, sflow_counter_schema, sflow_sample_schema};

use schema::{FlowCtx, FlowRow};

/// How many bytes of a rejected datagram are kept in the reject.
pub const REJECT_RAW_BYTES: usize = 64 * 1024;
/// Most distinct sequence keys / report notes remembered (memory bound for hostile input).
const MAX_REPORT_KEYS: usize = 10_000;

/// NetFlow v9/IPFIX template state (templates, options, data held for a template) that several
/// collectors share, as one collector process keeps it across the captures it reads.
#[derive(Clone, Default)]
pub struct SharedTemplates(Arc<std::sync::Mutex<netflow::NetflowState>>);

impl SharedTemplates {
    fn lock(&self) -> std::sync::MutexGuard<'_, netflow::NetflowState> {
        // A panic while holding it cannot leave the state half-updated in a way that matters
        // more than losing it: keep going with what is there.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for SharedTemplates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedTemplates")
    }
}

/// One UDP datagram of a flow-export stream.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// 1-based frame number in the capture, or a sequence number in a live socket.
    pub frame: u64,
    /// Capture/arrival time, µs since the Unix epoch (UTC).
    pub received_us: i64,
    /// The UDP source address (the exporter).
    pub exporter: IpAddr,
    pub exporter_port: u16,
    pub collector_port: u16,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// Which wire format a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// sFlow v5.
    Sflow,
    /// NetFlow v5, v9 and IPFIX, told apart by the version field of each datagram.
    Netflow,
}

/// Options of a [`Collector`].
#[derive(Debug, Clone)]
pub struct FlowExportOptions {
    /// Rows per emitted batch (per table).
    pub batch_rows: usize,
    /// Community ID seed (0 by default, as in the spec).
    pub community_id_seed: u16,
    /// Most data sets held per template key (exporter, version, domain) while waiting for
    /// their template; the oldest is dropped (and counted) beyond it. 0 disables holding.
    pub max_held_sets_per_key: usize,
    /// Most bytes of held data sets per template key.
    pub max_held_bytes_per_key: usize,
    /// Most bytes of held data sets over all keys; a data set that would exceed it is dropped
    /// (and counted) instead of held.
    pub max_held_bytes_total: usize,
}

impl Default for FlowExportOptions {
    fn default() -> Self {
        Self {
            batch_rows: 16 * 1024,
            community_id_seed: 0,
            max_held_sets_per_key: 256,
            max_held_bytes_per_key: 1 << 20,
            max_held_bytes_total: 16 << 20,
        }
    }
}

/// Sequence tracking of one (exporter/agent, domain) key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqTrack {
    /// The sequence number expected next.
    pub expected: Option<u32>,
    /// Times the sequence jumped forward.
    pub gaps: u64,
    /// Sum of the forward jumps (datagrams for v9/sFlow, records for v5/IPFIX).
    pub missing: u64,
    /// Times it went backwards (restart, reordering).
    pub resets: u64,
}

/// The counters behind [`Collector::report`].
#[derive(Debug, Clone, Default)]
pub struct FlowExportStats {
    pub datagrams: u64,
    pub rejected: u64,
    /// sFlow datagrams decoded (not rejected), and their samples.
    pub sflow_datagrams: u64,
    pub sflow_flow_samples: u64,
    pub sflow_counter_samples: u64,
    /// Samples of other formats or enterprises (skipped by their length).
    pub sflow_unknown_samples: u64,
    /// Flow records not decoded into columns (kept as `other_records`).
    pub sflow_unknown_flow_records: u64,
    /// Counter records not decoded into columns (kept as `other_records`).
    pub sflow_unknown_counter_records: u64,
    /// Raw packet headers whose `decode_frame` failed (row kept, `decode_error` set).
    pub sflow_header_errors: u64,
    /// Raw packet headers of a protocol other than Ethernet/IPv4/IPv6 (not decoded).
    pub sflow_undecoded_headers: u64,
    /// Datagrams per version whose header was read (rejected ones included).
    pub netflow_v5: u64,
    pub netflow_v9: u64,
    pub ipfix: u64,
    /// `netflow.flow` rows produced (rows of a rejected datagram are not).
    pub flows: u64,
    pub templates: u64,
    pub options_templates: u64,
    pub templates_withdrawn: u64,
    /// Templates ignored: id < 256, no fields, too many fields, bad scope count.
    pub templates_invalid: u64,
    /// New templates ignored because a key had too many.
    pub template_limit_drops: u64,
    /// Template keys refused because too many exporters/domains were seen.
    pub key_limit_drops: u64,
    pub options_records: u64,
    pub sampling_updates: u64,
    /// Sets with an id 4..=255 (IPFIX) or 2..=255 (v9), skipped.
    pub reserved_sets: u64,
    /// Data sets held waiting for their template.
    pub held_sets: u64,
    /// Held data sets decoded once the template arrived.
    pub held_decoded: u64,
    /// Held data sets evicted by the per-key bounds.
    pub held_evicted: u64,
    /// Data sets dropped for want of a template (evicted, over the bounds, or still held at
    /// the end of the stream).
    pub unknown_template_sets: u64,
    /// Dropped data sets per (exporter, version, domain, template id).
    pub unknown_templates: BTreeMap<(String, u16, u32, u16), u64>,
    /// Sequence tracking per key (`sflow 192.0.2.1 sub-agent 0`, `ipfix 192.0.2.1 domain 5`).
    pub sequences: BTreeMap<String, SeqTrack>,
    /// Free-form notes (invalid templates), bounded.
    pub notes: Vec<String>,
}

impl FlowExportStats {
    /// Records a sequence number and what the next one should be.
    pub fn check_seq(&mut self, key: &str, seq: u32, next: u32) {
        if !self.sequences.contains_key(key) {
            if self.sequences.len() >= MAX_REPORT_KEYS {
                return;
            }
            self.sequences.insert(key.to_string(), SeqTrack::default());
        }
        let t = self
            .sequences
            .get_mut(key)
            .expect("present or inserted above");
        if let Some(exp) = t.expected {
            if seq != exp {
                let d = seq.wrapping_sub(exp);
                if d < 1 << 31 {
                    t.gaps += 1;
                    t.missing += u64::from(d);
                } else {
                    t.resets += 1;
                }
            }
        }
        t.expected = Some(next);
    }

    /// The next sequence number of `key` cannot be predicted (IPFIX with held data sets).
    pub fn forget_seq(&mut self, key: &str) {
        if let Some(t) = self.sequences.get_mut(key) {
            t.expected = None;
        }
    }

    /// A data set was dropped for want of its template.
    pub fn note_unknown_template(&mut self, key: &netflow::Key, tid: u16) {
        self.unknown_template_sets += 1;
        let k = (key.0.to_string(), key.1, key.2, tid);
        if self.unknown_templates.contains_key(&k) || self.unknown_templates.len() < MAX_REPORT_KEYS
        {
            *self.unknown_templates.entry(k).or_default() += 1;
        }
    }

    /// A free-form note for the report (bounded).
    pub fn note(&mut self, s: String) {
        if self.notes.len() < 100 {
            self.notes.push(s);
        }
    }

    /// Total sequence gaps over all keys.
    pub fn sequence_gaps(&self) -> u64 {
        self.sequences.values().map(|t| t.gaps).sum()
    }
}

/// All state of one flow-export stream; see the crate documentation.
pub struct Collector {
    protocol: Protocol,
    source: String,
    opts: FlowExportOptions,
    stats: FlowExportStats,
    /// Templates, options and held data per exporter/domain; shared by the streams of one
    /// import (see [`SharedTemplates`]).
    netflow: SharedTemplates,
    /// Data held for a template outlives this stream: a later capture of the import may bring
    /// the template ([`Collector::holding_across_streams`]).
    hold_across_streams: bool,
    sflow: sflow::SflowRows,
    /// `sequences` keys of sFlow agents (agent address, sub-agent).
    sflow_seq_keys: std::collections::HashMap<(IpAddr, u32), String>,
    flows: Vec<(Arc<FlowCtx>, FlowRow)>,
    sample_bytes: u64,
    counter_bytes: u64,
    flow_bytes: u64,
}

/// `sflow.sample`.
pub fn sflow_sample_table() -> TableName {
    TableName::new(schema::SFLOW_SAMPLE_TABLE.0, schema::SFLOW_SAMPLE_TABLE.1)
}

/// `sflow.counter`.
pub fn sflow_counter_table() -> TableName {
    TableName::new(schema::SFLOW_COUNTER_TABLE.0, schema::SFLOW_COUNTER_TABLE.1)
}

/// `netflow.flow`.
pub fn netflow_flow_table() -> TableName {
    TableName::new(schema::NETFLOW_FLOW_TABLE.0, schema::NETFLOW_FLOW_TABLE.1)
}

impl Collector {
    pub fn new(protocol: Protocol, source: &SourceInfo, opts: FlowExportOptions) -> Self {
        Self {
            protocol,
            source: source.display.clone(),
            opts: FlowExportOptions {
                batch_rows: opts.batch_rows.max(1),
                ..opts
            },
            stats: FlowExportStats::default(),
            netflow: SharedTemplates::default(),
            hold_across_streams: false,
            sflow: sflow::SflowRows::default(),
            sflow_seq_keys: Default::default(),
            flows: Vec::new(),
            sample_bytes: 0,
            counter_bytes: 0,
            flow_bytes: 0,
        }
    }

    /// Decodes one datagram: its rows are buffered (and emitted in batches of `batch_rows`),
    /// or it becomes one reject. `Err` only when `out` fails.
    pub fn datagram(&mut self, d: &Datagram<'_>, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.stats.datagrams += 1;
        match self.protocol {
            Protocol::Sflow => self.sflow(d, out)?,
            Protocol::Netflow => self.netflow(d, out)?,
        }
        if self.sflow.samples.len() >= self.opts.batch_rows
            || self.sflow.counters.len() >= self.opts.batch_rows
            || self.flows.len() >= self.opts.batch_rows
        {
            self.flush(out)?;
        }
        Ok(())
    }

    fn reject(
        &mut self,
        frame: u64,
        reason: String,
        raw: &[u8],
        table: TableName,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        self.stats.rejected += 1;
        out.reject(Reject {
            source: self.source.clone(),
            line: frame,
            reason,
            raw: raw[..raw.len().min(REJECT_RAW_BYTES)].to_vec(),
            table: Some(table),
        })
    }

    fn sflow(&mut self, d: &Datagram<'_>, out: &mut dyn Emit) -> anyhow::Result<()> {
        let (ns0, nc0) = (self.sflow.samples.len(), self.sflow.counters.len());
        let r = sflow::decode(
            d,
            self.opts.community_id_seed,
            &mut self.stats,
            &mut self.sflow,
        );
        match r {
            Ok(c) => {
                let ns = (self.sflow.samples.len() - ns0) as u64;
                let nc = (self.sflow.counters.len() - nc0) as u64;
                self.stats.sflow_datagrams += 1;
                self.stats.sflow_flow_samples += ns;
                self.stats.sflow_counter_samples += nc;
                // The key is formatted once per agent, not once per datagram.
                let n_keys = self.sflow_seq_keys.len();
                use std::collections::hash_map::Entry;
                let key = match self.sflow_seq_keys.entry((c.agent, c.sub_agent)) {
                    Entry::Occupied(e) => Some(e.into_mut()),
                    Entry::Vacant(e) if n_keys < MAX_REPORT_KEYS => {
                        Some(e.insert(format!("sflow {} sub-agent {}", c.agent, c.sub_agent)))
                    }
                    // Beyond the report's bound (check_seq would ignore the key too).
                    Entry::Vacant(_) => None,
                };
                if let Some(key) = key {
                    self.stats
                        .check_seq(key, c.datagram_seq, c.datagram_seq.wrapping_add(1));
                }
                let len = d.payload.len() as u64;
                // Bytes per table in proportion to the samples each got.
                if let Some(to_samples) = (len * ns).checked_div(ns + nc) {
                    self.sample_bytes += to_samples;
                    self.counter_bytes += len - to_samples;
                }
                Ok(())
            }
            Err(e) => self.reject(
                d.frame,
                format!("sFlow: {e}"),
                d.payload,
                sflow_sample_table(),
                out,
            ),
        }
    }

    fn netflow(&mut self, d: &Datagram<'_>, out: &mut dyn Emit) -> anyhow::Result<()> {
        let info = netflow::DatagramInfo {
            received_us: d.received_us,
            exporter: d.exporter,
            exporter_port: d.exporter_port,
            frame: d.frame,
        };
        let mut state = self.netflow.lock();
        let r = netflow::decode(d.payload, &info, &mut state, &self.opts, &mut self.stats);
        drop(state);
        match r {
            Ok(o) => {
                self.stats.flows += o.rows.len() as u64;
                if !o.rows.is_empty() {
                    self.flow_bytes += d.payload.len() as u64;
                }
                self.flows.extend(o.rows);
                for h in o.held_errors {
                    self.reject(
                        h.ctx.frame,
                        format!("NetFlow/IPFIX: {}", h.error),
                        &h.body,
                        netflow_flow_table(),
                        out,
                    )?;
                }
                Ok(())
            }
            Err(e) => {
                let v = d.payload.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
                let what = match v {
                    Some(5) => "NetFlow v5",
                    Some(9) => "NetFlow v9",
                    Some(10) => "IPFIX",
                    _ => "NetFlow/IPFIX",
                };
                self.reject(
                    d.frame,
                    format!("{what}: {e}"),
                    d.payload,
                    netflow_flow_table(),
                    out,
                )
            }
        }
    }

    /// Emits every buffered row (the stream goes on).
    pub fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let n = self.opts.batch_rows;
        if !self.sflow.samples.is_empty() {
            let t = sflow_sample_table();
            out.table_bytes(&t, std::mem::take(&mut self.sample_bytes));
            for chunk in self.sflow.samples.chunks(n) {
                out.batch(&t, schema::sample_batch(chunk)?)?;
            }
            self.sflow.samples.clear();
        }
        if !self.sflow.counters.is_empty() {
            let t = sflow_counter_table();
            out.table_bytes(&t, std::mem::take(&mut self.counter_bytes));
            for chunk in self.sflow.counters.chunks(n) {
                out.batch(&t, schema::counter_batch(chunk)?)?;
            }
            self.sflow.counters.clear();
        }
        if !self.flows.is_empty() {
            let t = netflow_flow_table();
            out.table_bytes(&t, std::mem::take(&mut self.flow_bytes));
            for chunk in self.flows.chunks(n) {
                out.batch(&t, schema::flow_batch(chunk)?)?;
            }
            self.flows.clear();
        }
        Ok(())
    }

    /// The end of the stream: data sets still waiting for a template are counted as dropped
    /// (unknown template), unless they outlive it ([`Collector::holding_across_streams`]: the
    /// report then says how many still wait), and every buffered row is emitted.
    pub fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut state = self.netflow.lock();
        if self.hold_across_streams {
            let (sets, _) = state.held();
            if sets > 0 {
                self.stats.note(format!(
                    "{sets} data sets wait for a template no capture so far brought: a later \
capture of this import that brings it decodes them, else they are lost (give template captures \
first)"
                ));
            }
        } else {
            state.drain_held(&mut self.stats);
        }
        drop(state);
        self.flush(out)
    }

    /// Whether this stream served the streams after it, rows or not: it received NetFlow v9 or
    /// IPFIX templates or options records (sampling rates, interface names for the flows that
    /// follow), or left data sets for a template a later capture brings (their rows then come
    /// with that capture). A capture of templates alone gives no rows, yet it is not "nothing
    /// imported".
    pub fn serves_later_streams(&self) -> bool {
        let s = &self.stats;
        s.templates + s.options_templates + s.options_records + s.held_sets > 0
    }

    /// Human lines for the import summary.
    pub fn report(&self) -> Vec<String> {
        let s = &self.stats;
        let mut v = Vec::new();
        match self.protocol {
            Protocol::Sflow => {
                v.push(format!(
                    "sFlow: {} datagrams, {} flow samples, {} counter samples, {} rejected",
                    s.datagrams, s.sflow_flow_samples, s.sflow_counter_samples, s.rejected
                ));
                if s.sflow_unknown_samples > 0 {
                    v.push(format!(
                        "sFlow: {} samples of unknown format skipped",
                        s.sflow_unknown_samples
                    ));
                }
                if s.sflow_unknown_flow_records + s.sflow_unknown_counter_records > 0 {
                    v.push(format!(
                        "sFlow: {} flow records and {} counter records of other types kept as other_records",
                        s.sflow_unknown_flow_records, s.sflow_unknown_counter_records
                    ));
                }
                if s.sflow_header_errors > 0 {
                    v.push(format!(
                        "sFlow: {} sampled headers could not be decoded (decode_error set)",
                        s.sflow_header_errors
                    ));
                }
                if s.sflow_undecoded_headers > 0 {
                    v.push(format!(
                        "sFlow: {} sampled headers of a protocol other than Ethernet/IPv4/IPv6",
                        s.sflow_undecoded_headers
                    ));
                }
            }
            Protocol::Netflow => {
                v.push(format!(
                    "NetFlow/IPFIX: {} datagrams (v5 {}, v9 {}, IPFIX {}), {} flows, {} rejected",
                    s.datagrams, s.netflow_v5, s.netflow_v9, s.ipfix, s.flows, s.rejected
                ));
                v.push(format!(
                    "templates: {} data, {} options, {} withdrawn, {} invalid; {} options records",
                    s.templates,
                    s.options_templates,
                    s.templates_withdrawn,
                    s.templates_invalid,
                    s.options_records
                ));
                if s.held_sets > 0 {
                    v.push(format!(
                        "{} data sets arrived before their template: {} decoded later, {} evicted",
                        s.held_sets, s.held_decoded, s.held_evicted
                    ));
                }
                for ((exp, ver, dom, tid), n) in &s.unknown_templates {
                    v.push(format!(
                        "unknown template {tid} from {exp} (version {ver}, domain {dom}): {n} data sets dropped"
                    ));
                }
                if s.template_limit_drops + s.key_limit_drops > 0 {
                    v.push(format!(
                        "limits: {} templates and {} exporter/domain keys refused",
                        s.template_limit_drops, s.key_limit_drops
                    ));
                }
            }
        }
        for (k, t) in &s.sequences {
            if t.gaps + t.resets > 0 {
                v.push(format!(
                    "sequence gaps {k}: {} gaps ({} missing), {} resets",
                    t.gaps, t.missing, t.resets
                ));
            }
        }
        v.extend(s.notes.iter().cloned());
        v
    }

    /// The counters behind [`Collector::report`].
    pub fn stats(&self) -> &FlowExportStats {
        &self.stats
    }

    /// Data sets currently held for a template, and their bytes.
    pub fn held(&self) -> (usize, usize) {
        self.netflow.lock().held()
    }

    /// A collector whose NetFlow/IPFIX templates live in `templates`, shared with other
    /// collectors (the captures of one import: a template capture, then its data captures).
    pub fn with_templates(mut self, templates: SharedTemplates) -> Self {
        self.netflow = templates;
        self
    }

    /// Data held for a template stays in the shared templates when this stream ends, for the
    /// next stream sharing them (the captures of one import, read one after the other).
    pub fn holding_across_streams(mut self) -> Self {
        self.hold_across_streams = true;
        self
    }
}
