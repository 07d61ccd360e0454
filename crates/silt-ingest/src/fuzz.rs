//! The fuzz harness: one target per input format, each decoding arbitrary bytes through the
//! format registry and checking what must hold for any input. It lives here, as plain public
//! code behind no feature, so that both users run the very same checks:
//!
//! - the coverage-guided fuzz targets in `fuzz/` at the repository root (a crate of its own,
//!   outside the workspace, built with `cargo afl`; `bench/fuzz.sh` runs them), whose `main` is
//!   one call of [`run`] per input; and
//! - the workspace test `tests/fuzz_replay.rs`, which replays every saved input
//!   (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`) through [`run`] in CI, where afl is
//!   not installed.
//!
//! [`run`] makes the target's decoder with [`crate::registry::require`] and the target's fixed
//! options, then decodes the input twice:
//!
//! 1. fed in pieces whose sizes (runs of 1-byte pieces, small, medium, large) and the `flush`
//!    calls between them come from a seeded generator whose seed is a hash of the input, so a
//!    saved input replays exactly and mutating it moves the frame boundaries too; then finished;
//! 2. fed whole in one piece, then finished.
//!
//! It panics (the bug a fuzzer reports) when a decoder panics, when the two runs differ in their
//! outcome (rows per table, bytes per table, every reject's line, reason, raw bytes and table, or
//! the error), or when the accounting of records does not add up: for the line formats whose
//! every non-blank line is one record (JSON, LTSV, syslog, access logs, Suricata EVE, Zeek JSON)
//! rows + rejects must equal the non-blank lines; for the others whose records are lines or made
//! of lines (CSV/TSV, Zeek TSV, Docker) rows + rejects can not exceed the lines, and a Docker
//! input with a non-blank line gives at least one row or reject. A batch whose row count is not
//! its columns' length is caught by Arrow itself.
//!
//! Touches nothing: everything happens in memory.

use std::collections::BTreeMap;

use arrow::record_batch::RecordBatch;
use silt_core::decode::{strip_bom, strip_cr};
use silt_core::{Decoder, Emit, FormatOptions, ReadOptions, Reject, SourceInfo, TableName};

/// How the records of a target's input are counted (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accounting {
    /// Every non-blank line (after `\r` and a leading byte-order mark are removed; blank = only
    /// ASCII white space) is exactly one row or one reject.
    NonBlankLines,
    /// Like [`Accounting::NonBlankLines`], but a line of only spaces or tabs is a record too
    /// (access logs trim line ends only).
    NonEmptyLines,
    /// Rows + rejects are at most the number of lines (headers and multi-line records), lines
    /// ended by `\n` or by `\r` (CSV takes a lone `\r` as a record end).
    AtMostLines,
    /// Docker json-file: at most the non-blank lines (partial lines are joined), at least one
    /// when there is a non-blank line.
    JoinedLines,
    /// Zeek: a JSON stream (decided as the decoder decides, [`silt_readers::zeek::is_json_head`])
    /// is counted as [`Accounting::NonBlankLines`], a TSV one as [`Accounting::AtMostLines`].
    Zeek,
    /// Binary formats: no count, the other checks only.
    None,
}

/// One fuzz target: a format of the registry, the options it is fuzzed with and how its
/// records are counted. Several targets may fuzz one format from different seeds (Zeek TSV and
/// JSON, pcap and pcapng).
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The target's name: the fuzz binary, `fuzz/corpus/<name>/`, `fuzz/regressions/<name>/`.
    pub name: &'static str,
    /// The registry name of the format.
    pub format: &'static str,
    /// How records are counted.
    pub accounting: Accounting,
}

/// Every fuzz target, one or more per format of the registry.
pub static TARGETS: &[Target] = &[
    Target {
        name: "zeek-tsv",
        format: "zeek",
        accounting: Accounting::Zeek,
    },
    Target {
        name: "zeek-json",
        format: "zeek",
        accounting: Accounting::Zeek,
    },
    Target {
        name: "suricata",
        format: "suricata",
        accounting: Accounting::NonBlankLines,
    },
    Target {
        name: "pcap",
        format: "pcap",
        accounting: Accounting::None,
    },
    Target {
        name: "pcapng",
        format: "pcap",
        accounting: Accounting::None,
    },
    Target {
        name: "sflow",
        format: "sflow",
        accounting: Accounting::None,
    },
    Target {
        name: "netflow",
        format: "netflow",
        accounting: Accounting::None,
    },
    Target {
        name: "json",
        format: "json",
        accounting: Accounting::NonBlankLines,
    },
    Target {
        name: "msgpack",
        format: "msgpack",
        accounting: Accounting::None,
    },
    Target {
        name: "csv",
        format: "csv",
        accounting: Accounting::AtMostLines,
    },
    Target {
        name: "tsv",
        format: "tsv",
        accounting: Accounting::AtMostLines,
    },
    Target {
        name: "ltsv",
        format: "ltsv",
        accounting: Accounting::NonBlankLines,
    },
    Target {
        name: "avro",
        format: "avro",
        accounting: Accounting::None,
    },
    Target {
        name: "docker",
        format: "docker",
        accounting: Accounting::JoinedLines,
    },
    Target {
        name: "syslog",
        format: "syslog",
        accounting: Accounting::NonBlankLines,
    },
    Target {
        name: "access",
        format: "access",
        accounting: Accounting::NonEmptyLines,
    },
];

/// Fuzz targets of network protocols rather than formats (they share `fuzz/` and
/// `bench/fuzz.sh` with the targets above). Their harness lives with the protocol
/// (`silt_forward::fuzz`), which replays their saved inputs in its own tests; each frame they
/// accept goes through [`check_entries`], as `silt serve` hands it to the `msgpack` decoder.
pub static PROTOCOL_TARGETS: &[&str] = &["forward"];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Rows per batch in both runs: small, so that inputs of a few records cross batch boundaries.
const BATCH_ROWS: usize = 16;

/// The options every target is fuzzed with: small batches, a fixed syslog year (so a replay
/// gives the same rows in any year), pcap with flows and a payload column.
fn options() -> FormatOptions {
    let read = ReadOptions {
        batch_rows: BATCH_ROWS,
    };
    FormatOptions::new(read)
        .with(silt_logs::LogOptions {
            syslog_year: Some(2024),
            ..Default::default()
        })
        .with(silt_pcap::PcapOptions {
            batch_rows: BATCH_ROWS,
            payload: Some(48),
            tables: silt_pcap::Tables::PacketsAndFlows,
            ..Default::default()
        })
}

/// What one decoding gave, in comparable form.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// Rows per table.
    pub rows: BTreeMap<TableName, usize>,
    /// [`Emit::table_bytes`] per table.
    pub table_bytes: BTreeMap<TableName, u64>,
    /// Every reject: line, reason, raw bytes, table.
    pub rejects: Vec<(u64, String, Vec<u8>, Option<TableName>)>,
    /// The error that ended the stream, if any.
    pub error: Option<String>,
}

impl Outcome {
    /// Rows of every table.
    pub fn total_rows(&self) -> usize {
        self.rows.values().sum()
    }
}

impl Emit for Outcome {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        *self.rows.entry(table.clone()).or_default() += batch.num_rows();
        Ok(())
    }

    fn reject(&mut self, r: Reject) -> anyhow::Result<()> {
        self.rejects.push((r.line, r.reason, r.raw, r.table));
        Ok(())
    }

    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        *self.table_bytes.entry(table.clone()).or_default() += bytes;
    }
}

/// A seeded generator (xorshift64*): the pieces an input is cut into.
struct Rng(u64);

impl Rng {
    /// Seeded with a hash (FNV-1a) of the input.
    fn for_input(data: &[u8]) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in data {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        Rng(h | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as usize % n.max(1)
    }
}

fn source(t: &Target) -> SourceInfo {
    // A file name gives the table names of the generic formats; Zeek JSON records without
    // `_path` fall back to it.
    let name = format!("fuzz.{}", t.name);
    SourceInfo {
        display: name.clone(),
        file_name: Some(name),
    }
}

fn decoder(t: &Target) -> Box<dyn Decoder> {
    let spec = crate::registry::require(t.format).expect("every fuzz target is a registry format");
    (spec.open)(&options(), &source(t)).expect("the fuzz options are valid")
}

/// Fed in pieces derived from the input, with `flush` calls between them; then finished. Like
/// [`silt_core::decode::read_stream`], an error from `feed` ends the stream.
pub fn decode_in_pieces(t: &Target, data: &[u8]) -> Outcome {
    let mut d = decoder(t);
    let mut out = Outcome::default();
    let mut rng = Rng::for_input(data);
    let mut rest = data;
    while !rest.is_empty() {
        let n = match rng.below(10) {
            0..=2 => 1,
            3..=5 => 1 + rng.below(16),
            6..=8 => 1 + rng.below(512),
            _ => 1 + rng.below(64 << 10),
        };
        // A 1-byte piece starts a run of them (records cut at every byte).
        let (n, ones) = if n == 1 {
            (rest.len().min(1 + rng.below(64)), true)
        } else {
            (n.min(rest.len()), false)
        };
        let (piece, after) = rest.split_at(n);
        let fed = if ones {
            piece.chunks(1).try_for_each(|b| d.feed(b, &mut out))
        } else {
            d.feed(piece, &mut out)
        };
        if let Err(e) = fed {
            out.error = Some(format!("{e:#}"));
            return out;
        }
        rest = after;
        if rng.below(4) == 0 {
            if let Err(e) = d.flush(&mut out) {
                out.error = Some(format!("{e:#}"));
                return out;
            }
        }
    }
    if let Err(e) = d.finish(&mut out) {
        out.error = Some(format!("{e:#}"));
    }
    out
}

/// Fed in one piece, then finished.
pub fn decode_whole(t: &Target, data: &[u8]) -> Outcome {
    let mut d = decoder(t);
    let mut out = Outcome::default();
    let r = d.feed(data, &mut out).and_then(|()| d.finish(&mut out));
    if let Err(e) = r {
        out.error = Some(format!("{e:#}"));
    }
    out
}

/// The lines of `data` as a line decoder cuts them: split at `\n`, a last line without one
/// counted, zero padding where a line starts, `\r` before the `\n` and a byte-order mark on
/// line 1 removed.
fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let empty = data.is_empty();
    body.split(|&c| c == b'\n')
        .filter(move |_| !empty)
        .enumerate()
        .map(|(i, l)| {
            let l = strip_cr(&l[silt_core::decode::nul_run(l)..]);
            if i == 0 {
                strip_bom(l)
            } else {
                l
            }
        })
}

fn non_blank(data: &[u8]) -> usize {
    lines(data)
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .count()
}

/// Checks the record accounting of `out` (a run that ended without error) against `data`.
fn check_accounting(t: &Target, data: &[u8], out: &Outcome) {
    // Zero padding is reported as a reject of the line after it, besides that line's own row
    // or reject.
    let padding = out
        .rejects
        .iter()
        .filter(|r| r.1.contains("of zero padding skipped"))
        .count();
    let got = out.total_rows() + out.rejects.len() - padding;
    let mut accounting = t.accounting;
    if accounting == Accounting::Zeek {
        accounting = if silt_readers::zeek::is_json_head(data, true) == Some(true) {
            Accounting::NonBlankLines
        } else {
            Accounting::AtMostLines
        };
    }
    match accounting {
        Accounting::NonBlankLines => {
            let want = non_blank(data);
            assert_eq!(
                got, want,
                "{}: rows + rejects must be the {want} non-blank lines: {out:?}",
                t.name
            );
        }
        Accounting::NonEmptyLines => {
            let want = lines(data)
                .filter(|l| !silt_access::format::trim_eol(l).is_empty())
                .count();
            assert_eq!(
                got, want,
                "{}: rows + rejects must be the {want} non-empty lines: {out:?}",
                t.name
            );
        }
        Accounting::AtMostLines => {
            let ends = data.iter().filter(|&&c| c == b'\n' || c == b'\r').count();
            let most = ends + usize::from(!data.is_empty());
            assert!(
                got <= most,
                "{}: rows + rejects exceed the {most} lines: {out:?}",
                t.name
            );
        }
        Accounting::JoinedLines => {
            let most = non_blank(data);
            assert!(
                got <= most && (got > 0 || most == 0),
                "{}: rows + rejects must be between 1 and the {most} non-blank lines: {out:?}",
                t.name
            );
        }
        Accounting::Zeek | Accounting::None => {}
    }
}

/// The harness of target `t` on one input; panics when a check fails (see the module
/// documentation). Returns the outcome of the run in pieces.
pub fn run(t: &Target, data: &[u8]) -> Outcome {
    let pieces = decode_in_pieces(t, data);
    let whole = decode_whole(t, data);
    assert_eq!(
        pieces, whole,
        "{}: fed in pieces and fed whole give different outcomes",
        t.name
    );
    if whole.error.is_none() {
        check_accounting(t, data, &whole);
    }
    pieces
}

/// [`run`] for the target called `name`; panics if there is none.
pub fn run_named(name: &str, data: &[u8]) -> Outcome {
    let t = target(name).unwrap_or_else(|| panic!("no fuzz target {name:?}"));
    run(t, data)
}

/// The entries of one frame a protocol front end accepted (a MessagePack stream of `events`
/// whole `[time, record]` pairs, see [`PROTOCOL_TARGETS`]), through the `msgpack` target's
/// [`run`]; besides its checks, the events must all be accounted for: rows + rejects between 1
/// (a stream the decoder cannot read on from, nesting past its limit say, is one reject) and
/// `events` (one row or one reject each).
pub fn check_entries(entries: &[u8], events: usize) -> Outcome {
    let out = run_named("msgpack", entries);
    let got = out.total_rows() + out.rejects.len();
    assert!(
        out.error.is_none() && (1..=events).contains(&got),
        "{events} accepted events gave {got} rows + rejects: {out:?}"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_is_a_registry_format_and_every_format_has_a_target() {
        for t in TARGETS {
            assert!(crate::registry::find(t.format).is_some(), "{}", t.name);
        }
        for name in crate::registry::names() {
            assert!(TARGETS.iter().any(|t| t.format == name), "{name}");
        }
    }

    #[test]
    fn lines_are_counted_as_the_framer_cuts_them() {
        assert_eq!(lines(b"").count(), 0);
        assert_eq!(lines(b"\n").count(), 1);
        assert_eq!(lines(b"a\nb").count(), 2);
        assert_eq!(lines(b"a\nb\n").count(), 2);
        assert_eq!(non_blank(b"\xEF\xBB\xBF\r\n \t\nx\r\n\n"), 1);
    }

    #[test]
    fn a_broken_accounting_is_caught() {
        let t = target("json").unwrap();
        let out = run(t, b"{\"a\":1}\n\n{bad\n");
        assert_eq!((out.total_rows(), out.rejects.len()), (1, 1));
        let short = Outcome::default();
        let r = std::panic::catch_unwind(|| check_accounting(t, b"{\"a\":1}\n", &short));
        assert!(r.is_err());
    }
}
