//! Realistic synthetic security telemetry for demos, tests and benchmarks: Zeek 6 TSV logs
//! (conn, dns, http, ssl, files, weird) and Suricata 7 EVE JSON (alert, flow, dns, http, tls,
//! fileinfo, anomaly, stats); packet captures ([`pcap`]), Docker nginx logs ([`weblog`]) and
//! sFlow v5 export of the captures' packets ([`sflow`]).
//!
//! Touches only the directory or [`Write`] it is given; depends on nothing of silt's own.
//!
//! Both generators draw from one simulated network (`model`): ~4,000 internal clients in
//! 10.0.0.0/8 and 192.168.0.0/16 with a Zipf-distributed activity (a few heavy talkers, a long
//! tail), ~6,000 Internet sites with Zipf popularity, each with a fixed DNS name, addresses,
//! CNAME, TTL, URIs, certificate chain and file contents. Flows come in related groups (a DNS
//! lookup followed by the TLS/HTTP connection to the answered address, SMB/Kerberos/LDAP to
//! internal servers, NTP, QUIC, ICMP, inbound scans), so uids join across Zeek logs and values
//! have real-world repetition (names, addresses, user agents) and real-world variety (ports,
//! byte counts, timestamps, ids). About 10% of flows are IPv6.
//!
//! Times: records start at [`GenOptions::start_micros`] (default 2018-03-24 17:00:00 UTC) and
//! spread over [`GenOptions::span_secs`] (default one hour), whatever the record count. Records
//! are written in the order a sensor writes them (Zeek: conn.log at connection removal, so
//! `ts` is only roughly increasing), with `ts` the event's own time.
//!
//! Counts: `events` is the exact total number of records over the selected logs. With
//! `logs: None` it is split by the natural mix (about 55% conn, 25% dns, 10% http, 6% ssl,
//! 3% files, 1% weird); with one log selected, exactly `events` records of that log are written.
//! In a mixed Zeek run every uid in dns/http/ssl/files/weird has its conn.log record.
//!
//! Determinism: the same options (seed included) give byte-identical output on the same build
//! (rand's `SmallRng` is not promised stable across rand versions or platforms).

mod eve;
mod flows;
mod fmt;
mod model;
mod out;
pub mod pcap;
pub mod sflow;
pub mod weblog;
mod zeek;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

pub use eve::EVE_TYPES;
pub use pcap::{generate_pcap, write_pcap, PcapOptions, PcapReport};
pub use sflow::{generate_sflow, write_sflow, SflowOptions, SflowReport};
pub use zeek::{zeek_fields, zeek_header, ZEEK_LOGS, ZEEK_MIX};

/// 2018-03-24 17:00:00 UTC in microseconds (the WRCCDC 2018 sample captures start then).
pub const DEFAULT_START_MICROS: i64 = 1_521_910_800_000_000;

/// Generator settings.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// RNG seed; same seed, same output.
    pub seed: u64,
    /// First record time, UTC microseconds since the epoch.
    pub start_micros: i64,
    /// Records spread over this many seconds.
    pub span_secs: u64,
    /// Zeek logs (`conn`, `dns`, ...) or EVE event types (`flow`, `dns`, ...) to write;
    /// `None` = all, in the default mix.
    pub logs: Option<Vec<String>>,
    /// Add Zeek's `community_id` column to conn.log (community-id-logging policy script).
    pub community_id: bool,
    /// Share of flows over IPv6 (0.0..=0.3 is meaningful; default 0.10).
    pub ipv6_share: f64,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            seed: 1,
            start_micros: DEFAULT_START_MICROS,
            span_secs: 3600,
            logs: None,
            community_id: false,
            ipv6_share: 0.10,
        }
    }
}

/// One file written by a generator.
#[derive(Clone, Debug)]
pub struct GenFile {
    pub path: PathBuf,
    /// Zeek log name (`conn`) or `eve`.
    pub log: String,
    /// Data records (lines that are not `#` header/footer lines).
    pub records: u64,
    /// File size in bytes (headers included).
    pub bytes: u64,
}

/// What a generator wrote.
#[derive(Clone, Debug, Default)]
pub struct GenReport {
    pub files: Vec<GenFile>,
}

impl GenReport {
    pub fn records(&self) -> u64 {
        self.files.iter().map(|f| f.records).sum()
    }
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

fn selected(all: &[&str], logs: &Option<Vec<String>>) -> anyhow::Result<Vec<bool>> {
    match logs {
        None => Ok(vec![true; all.len()]),
        Some(list) => {
            if list.is_empty() {
                bail!("no log selected (valid: {})", all.join(", "));
            }
            let mut on = vec![false; all.len()];
            for l in list {
                let l = l.trim().trim_end_matches(".log");
                match all.iter().position(|a| *a == l) {
                    Some(i) => on[i] = true,
                    None => bail!("unknown log {l:?} (valid: {})", all.join(", ")),
                }
            }
            Ok(on)
        }
    }
}

const BUF: usize = 1 << 20;

/// Writes `<dir>/<log>.log` Zeek TSV files (all six logs, or those in `opts.logs`) holding
/// `events` records in total. Creates `dir` if needed; overwrites existing files.
pub fn generate_zeek(dir: &Path, events: u64, opts: &GenOptions) -> anyhow::Result<GenReport> {
    let on = selected(&ZEEK_LOGS, &opts.logs)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files: Vec<Option<(PathBuf, BufWriter<File>)>> = Vec::new();
    for (i, log) in ZEEK_LOGS.iter().enumerate() {
        if on[i] {
            let p = dir.join(format!("{log}.log"));
            let f = File::create(&p).with_context(|| format!("creating {}", p.display()))?;
            files.push(Some((p, BufWriter::with_capacity(BUF, f))));
        } else {
            files.push(None);
        }
    }
    let stats = {
        let sinks: Vec<Option<&mut dyn Write>> = files
            .iter_mut()
            .map(|f| f.as_mut().map(|(_, w)| w as &mut dyn Write))
            .collect();
        zeek::run(sinks, events, opts)?
    };
    let mut report = GenReport::default();
    for (i, f) in files.into_iter().enumerate() {
        if let Some((path, w)) = f {
            w.into_inner().map_err(|e| e.into_error())?.sync_all().ok();
            let bytes = std::fs::metadata(&path)?.len();
            report.files.push(GenFile {
                path,
                log: ZEEK_LOGS[i].to_string(),
                records: stats[i].records,
                bytes,
            });
        }
    }
    Ok(report)
}

/// Streams exactly `events` records of one Zeek log (`conn`, `dns`, ...) as a complete TSV file
/// (header block, records, `#close`) to `out`. `opts.logs` is ignored. Returns the record count.
pub fn write_zeek_log(
    out: &mut dyn Write,
    log: &str,
    events: u64,
    opts: &GenOptions,
) -> anyhow::Result<u64> {
    let on = selected(&ZEEK_LOGS, &Some(vec![log.to_string()]))?;
    let mut w = BufWriter::with_capacity(BUF, out);
    let stats = {
        let mut sinks: Vec<Option<&mut dyn Write>> = on.iter().map(|_| None).collect();
        if let Some(i) = on.iter().position(|&o| o) {
            sinks[i] = Some(&mut w);
        }
        zeek::run(sinks, events, opts)?
    };
    w.flush()?;
    Ok(stats.iter().map(|s| s.records).sum())
}

/// Writes `<dir>/eve.json` with `events` Suricata EVE lines (all event types in the natural mix,
/// or only the types in `opts.logs`).
pub fn generate_suricata(dir: &Path, events: u64, opts: &GenOptions) -> anyhow::Result<GenReport> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("eve.json");
    let f = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = BufWriter::with_capacity(BUF, f);
    let records = write_suricata(&mut w, events, opts)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all().ok();
    let bytes = std::fs::metadata(&path)?.len();
    Ok(GenReport {
        files: vec![GenFile {
            path,
            log: "eve".into(),
            records,
            bytes,
        }],
    })
}

/// Streams `events` Suricata EVE lines to `out`. Returns the line count.
pub fn write_suricata(out: &mut dyn Write, events: u64, opts: &GenOptions) -> anyhow::Result<u64> {
    let on = selected(&EVE_TYPES, &opts.logs)?;
    let mut types = [false; 8];
    types.copy_from_slice(&on);
    let mut w = BufWriter::with_capacity(BUF, out);
    let n = eve::run(&mut w, events, opts, types)?;
    w.flush()?;
    Ok(n)
}
