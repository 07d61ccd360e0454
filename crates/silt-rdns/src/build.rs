//! [`build`]: reads `ip,name` lines, sorts them externally within a memory budget and writes
//! the index file (FORMAT.md) atomically.
//!
//! Touches: the input reader; a temporary directory under [`BuildOptions::tmp_dir`] (removed
//! at the end, also on error); `<out>.tmp-<pid>` next to the output, renamed onto the output
//! path after an fsync; the optional rejects file. Starts one helper thread (block
//! compression) for the duration of the call.

use std::fs::File;
use std::io::{BufRead, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};

use crate::format::{self, BlockBuilder, Footer, HEADER_LEN, HEADER_MAGIC, VERSION};
use crate::parse::{self, Line, LineReader, RejectReason};
use crate::runs::{self, RunBuffer, TmpDir, READER_COST};
use crate::template::{self, Key};

/// Options of [`build`].
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Memory budget in bytes for the sort (run buffer, then merge readers). Default 256 MiB.
    /// Peak RSS is about this plus a constant (~30 MiB: the dictionary sample, zstd contexts,
    /// I/O buffers, the code).
    pub memory: usize,
    /// Where the temporary runs go (needs roughly the compressed size of the input, templated:
    /// typically a third of the gzip'd CSV). Default: the system temporary directory.
    pub tmp_dir: PathBuf,
    /// Entries per block (the unit of decompression at lookup). Default 128.
    pub block_entries: usize,
    /// zstd level of the blocks. Default 9.
    pub zstd_level: i32,
    /// Largest zstd dictionary, trained on a sample of the input; 0 for none. Default 32 KiB.
    /// Smaller inputs get a smaller one (at most 1/200 of their templated names), none below
    /// 1 KiB.
    pub dict_size: usize,
    /// Encode names relative to their address (templates). Default true; false is only for
    /// measuring what the templates bring.
    pub templates: bool,
    /// If set, every rejected line is written there as `line<TAB>reason<TAB>text`.
    pub rejects_path: Option<PathBuf>,
    /// How many rejects [`BuildReport::reject_samples`] keeps. Default 100.
    pub reject_samples: usize,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            memory: 256 << 20,
            tmp_dir: std::env::temp_dir(),
            block_entries: 128,
            zstd_level: 9,
            dict_size: 32 << 10,
            templates: true,
            rejects_path: None,
            reject_samples: 100,
        }
    }
}

/// One rejected line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reject {
    /// 1-based line number in the (decompressed) input.
    pub line: u64,
    pub reason: &'static str,
    /// The line (cut to 256 bytes, lossy UTF-8).
    pub text: String,
}

/// What [`build`] did.
#[derive(Clone, Debug, Default)]
pub struct BuildReport {
    /// Data lines read (header and blank lines excluded, rejects included).
    pub rows_in: u64,
    pub header_skipped: bool,
    pub blank_lines: u64,
    pub unique_v4: u64,
    pub unique_v6: u64,
    /// Rows dropped because their address came earlier in the input (the first name is kept).
    pub duplicates: u64,
    pub rejects: u64,
    /// The first [`BuildOptions::reject_samples`] rejects.
    pub reject_samples: Vec<Reject>,
    /// Sorted runs spilled to the temporary directory, and extra merge passes made.
    pub runs: u64,
    pub merge_passes: u32,
    pub blocks: u64,
    pub dict_bytes: u64,
    /// Size of the index file.
    pub bytes_written: u64,
    /// Bytes of names before / after templating (how much the templates removed).
    pub name_bytes: u64,
    pub templated_name_bytes: u64,
    pub elapsed: Duration,
}

impl BuildReport {
    pub fn unique(&self) -> u64 {
        self.unique_v4 + self.unique_v6
    }
}

/// Key gaps at which a block ends early (IPv4: a /20's worth of addresses; IPv6: a /64's).
const GAP_V4: u128 = 1 << 12;
const GAP_V6: u128 = 1 << 64;

/// Records kept for training the dictionary (reservoir sample over the whole input).
const SAMPLE_RECORDS: usize = 60_000;

/// Builds the index at `out_path` from `ip,name` lines. See the crate documentation.
pub fn build(input: impl BufRead, out_path: &Path, opts: BuildOptions) -> Result<BuildReport> {
    let start = Instant::now();
    if opts.block_entries == 0 || opts.block_entries > 65_536 {
        bail!(
            "BuildOptions::block_entries must be between 1 and 65536, got {}",
            opts.block_entries
        );
    }
    let mut report = BuildReport::default();
    let mut tmp = TmpDir::new(&opts.tmp_dir)?;
    let mut rejects_out = match &opts.rejects_path {
        Some(p) => Some(BufWriter::new(File::create(p).with_context(|| {
            format!("cannot create the rejects file {}", p.display())
        })?)),
        None => None,
    };

    // Phase 1: read, template, fill the run buffer, spill sorted runs.
    let mut runs = Vec::new();
    let mut buf = RunBuffer::with_budget(opts.memory);
    let mut enc = template::Encoder::default();
    let mut enc_name = Vec::with_capacity(256);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
    let mut sample: Vec<(Key, Vec<u8>)> = Vec::new();
    let mut seen: u64 = 0;
    let mut lines = LineReader::new(input);
    let mut first = true;
    loop {
        let (line_no, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "reading the input failed after line {} (a truncated or damaged .gz?)",
                    lines.line_no
                )))
            }
        };
        let text = match line {
            Line::TooLong(t) => {
                report.rows_in += 1;
                reject(
                    &mut report,
                    &mut rejects_out,
                    &opts,
                    line_no,
                    RejectReason::LineTooLong,
                    t,
                )?;
                first = false;
                continue;
            }
            Line::Text(t) => t,
        };
        if text.iter().all(|b| b.is_ascii_whitespace()) {
            report.blank_lines += 1;
            continue;
        }
        if first {
            first = false;
            if parse::is_header(text) {
                report.header_skipped = true;
                continue;
            }
        }
        report.rows_in += 1;
        let (key, name) = match parse::parse_line(text) {
            Ok(v) => v,
            Err(r) => {
                reject(&mut report, &mut rejects_out, &opts, line_no, r, text)?;
                continue;
            }
        };
        enc_name.clear();
        if opts.templates {
            enc.encode(key, name, &mut enc_name);
        } else {
            enc_name.extend_from_slice(name);
        }
        report.name_bytes += name.len() as u64;
        report.templated_name_bytes += enc_name.len() as u64;
        // Reservoir sample for the dictionary.
        seen += 1;
        if sample.len() < SAMPLE_RECORDS {
            sample.push((key, enc_name.clone()));
        } else {
            let j = rng.random_range(0..seen);
            if (j as usize) < SAMPLE_RECORDS {
                sample[j as usize] = (key, enc_name.clone());
            }
        }
        if !buf.push(key, &enc_name) {
            let p = tmp.new_file("run");
            report.duplicates += buf.spill(&p)?;
            runs.push(p);
            if !buf.push(key, &enc_name) {
                bail!(
                    "internal: a {}-byte name does not fit an empty run buffer",
                    enc_name.len()
                );
            }
        }
    }
    if !buf.is_empty() {
        let p = tmp.new_file("run");
        report.duplicates += buf.spill(&p)?;
        runs.push(p);
    }
    drop(buf);
    if let Some(w) = rejects_out.as_mut() {
        w.flush().context("cannot write the rejects file")?;
    }
    report.runs = runs.len() as u64;

    // The dictionary, from pseudo-blocks of the sample in key order.
    // A dictionary pays for itself only on inputs ~200 times its size.
    let dict_size = opts
        .dict_size
        .min((report.templated_name_bytes / 200) as usize);
    let dict = if dict_size < 1024 {
        Vec::new()
    } else {
        train_dict(&mut sample, dict_size)
    };
    drop(sample);
    report.dict_bytes = dict.len() as u64;

    // Phase 2: merge passes until the fan-in fits the budget, then the final merge into blocks.
    let fan_in = (opts.memory / 2 / READER_COST).clamp(2, 1024);
    let (runs, dups, passes) = runs::reduce_runs(runs, fan_in, &mut tmp)?;
    report.duplicates += dups;
    report.merge_passes = passes;

    let file_name = out_path
        .file_name()
        .with_context(|| format!("output path {} has no file name", out_path.display()))?;
    let dir = match out_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp_out = dir.join(format!(
        ".{}.tmp-{}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let result = write_index(&runs, &tmp_out, &dict, &opts, &mut tmp, &mut report);
    let written = match result {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp_out);
            return Err(e);
        }
    };
    report.duplicates += written.dups;
    if let Err(e) = std::fs::rename(&tmp_out, out_path) {
        let _ = std::fs::remove_file(&tmp_out);
        return Err(e).with_context(|| {
            format!(
                "cannot rename {} onto {}",
                tmp_out.display(),
                out_path.display()
            )
        });
    }
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    report.bytes_written = written.bytes;
    report.elapsed = start.elapsed();
    Ok(report)
}

fn reject(
    report: &mut BuildReport,
    out: &mut Option<BufWriter<File>>,
    opts: &BuildOptions,
    line: u64,
    reason: RejectReason,
    text: &[u8],
) -> Result<()> {
    report.rejects += 1;
    let cut = &text[..text.len().min(256)];
    if report.reject_samples.len() < opts.reject_samples {
        report.reject_samples.push(Reject {
            line,
            reason: reason.as_str(),
            text: String::from_utf8_lossy(cut).into_owned(),
        });
    }
    if let Some(w) = out {
        let clean: Vec<u8> = cut
            .iter()
            .map(|&b| if b == b'\t' || b == b'\n' { b' ' } else { b })
            .collect();
        (|| -> std::io::Result<()> {
            write!(w, "{line}\t{reason}\t")?;
            w.write_all(&clean)?;
            w.write_all(b"\n")
        })()
        .context("cannot write the rejects file")?;
    }
    Ok(())
}

fn train_dict(sample: &mut [(Key, Vec<u8>)], dict_size: usize) -> Vec<u8> {
    if dict_size == 0 || sample.len() < 1000 {
        return Vec::new();
    }
    sample.sort_by_key(|a| a.0);
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    let mut bb = BlockBuilder::new();
    let mut last: Option<Key> = None;
    // Pseudo-blocks of 16 sampled records: sampled neighbours are far apart, so shorter groups
    // resemble real blocks' name mix better than full-size ones.
    for (k, name) in sample.iter() {
        if last == Some(*k) {
            continue;
        }
        let kv = format::key_value(*k);
        let same_family = matches!(
            (last, k),
            (Some(Key::V4(_)), Key::V4(_)) | (Some(Key::V6(_)), Key::V6(_))
        );
        if bb.len() >= 16 || (!bb.is_empty() && !same_family) {
            let mut p = Vec::new();
            bb.finish(&mut p);
            payloads.push(p);
        }
        bb.push(kv, name);
        last = Some(*k);
    }
    if !bb.is_empty() {
        let mut p = Vec::new();
        bb.finish(&mut p);
        payloads.push(p);
    }
    zstd::dict::from_samples(&payloads, dict_size).unwrap_or_default()
}

/// What the compression thread hands back: the index file, the block index parts, the block
/// counts per section and the start of the IPv6 blocks.
type WriterDone = (BufWriter<File>, Vec<BufWriter<File>>, [u64; 2], u64);

struct Written {
    bytes: u64,
    dups: u64,
}

/// A raw block handed to the compression thread.
struct RawBlock {
    v6: bool,
    first: u128,
    last: u128,
    payload: Vec<u8>,
}

fn write_index(
    runs: &[PathBuf],
    tmp_out: &Path,
    dict: &[u8],
    opts: &BuildOptions,
    tmp: &mut TmpDir,
    report: &mut BuildReport,
) -> Result<Written> {
    let file = File::create(tmp_out).with_context(|| {
        format!(
            "cannot create {} (is the output directory writable?)",
            tmp_out.display()
        )
    })?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(HEADER_MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    out.write_all(&header)?;

    // The block index goes to temporary files while blocks are written (bounded memory),
    // and is appended after the blocks: per section first keys, last keys, offsets.
    let part_paths: Vec<PathBuf> = ["first4", "last4", "offs4", "first6", "last6", "offs6"]
        .iter()
        .map(|w| tmp.new_file(w))
        .collect();
    let mut parts = Vec::with_capacity(6);
    for p in &part_paths {
        parts.push(BufWriter::new(
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        ));
    }

    let (tx, rx) = mpsc::sync_channel::<RawBlock>(64);
    let level = opts.zstd_level;
    let dict_owned = dict.to_vec();
    // Compression thread: compresses blocks in order and writes them with their index entry.
    let writer = std::thread::spawn(move || -> Result<WriterDone> {
        let mut comp = if dict_owned.is_empty() {
            zstd::bulk::Compressor::new(level)?
        } else {
            zstd::bulk::Compressor::with_dictionary(level, &dict_owned)?
        };
        comp.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))?;
        comp.set_parameter(zstd::zstd_safe::CParameter::DictIdFlag(false))?;
        comp.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(false))?;
        let mut pos = HEADER_LEN as u64;
        let mut blocks = [0u64; 2];
        let mut frame = Vec::new();
        let mut v6_start = None;
        for b in rx {
            if b.v6 && v6_start.is_none() {
                v6_start = Some(pos);
            }
            frame.clear();
            frame.reserve(zstd::zstd_safe::compress_bound(b.payload.len()));
            comp.compress_to_buffer(&b.payload, &mut frame)?;
            let raw_len = (b.payload.len() as u32).to_le_bytes();
            let mut h = crc32fast::Hasher::new();
            h.update(&raw_len);
            h.update(&frame);
            out.write_all(&h.finalize().to_le_bytes())?;
            out.write_all(&raw_len)?;
            out.write_all(&frame)?;
            if b.v6 {
                parts[3].write_all(&b.first.to_le_bytes())?;
                parts[4].write_all(&b.last.to_le_bytes())?;
                parts[5].write_all(&pos.to_le_bytes())?;
                blocks[1] += 1;
            } else {
                parts[0].write_all(&(b.first as u32).to_le_bytes())?;
                parts[1].write_all(&(b.last as u32).to_le_bytes())?;
                parts[2].write_all(&pos.to_le_bytes())?;
                blocks[0] += 1;
            }
            pos += (format::BLOCK_HEADER_LEN + frame.len()) as u64;
        }
        let v6_start = v6_start.unwrap_or(pos);
        // Closing offsets: the end of each section.
        parts[2].write_all(&v6_start.to_le_bytes())?;
        parts[5].write_all(&pos.to_le_bytes())?;
        Ok((out, parts, blocks, v6_start))
    });

    let mut bb = BlockBuilder::new();
    let mut cur_v6 = false;
    let mut counts = [0u64; 2];
    let block_entries = opts.block_entries;
    let send = |bb: &mut BlockBuilder, v6: bool| -> Result<()> {
        let first = bb.first.unwrap_or(0);
        let last = bb.last();
        let mut payload = Vec::new();
        bb.finish(&mut payload);
        tx.send(RawBlock {
            v6,
            first,
            last,
            payload,
        })
        .map_err(|_| anyhow::anyhow!("the block compression thread stopped"))
    };
    let merged = runs::merge(runs, |k, name| {
        let v6 = matches!(k, Key::V6(_));
        // A block also ends before a wide gap between keys, so that addresses in the gap are
        // known absent from the block index alone (no block to read).
        let kv = format::key_value(k);
        let gap = !bb.is_empty()
            && v6 == cur_v6
            && kv.saturating_sub(bb.last()) >= if v6 { GAP_V6 } else { GAP_V4 };
        if !bb.is_empty() && (bb.len() >= block_entries || v6 != cur_v6 || gap) {
            send(&mut bb, cur_v6)?;
        }
        cur_v6 = v6;
        counts[usize::from(v6)] += 1;
        bb.push(kv, name);
        Ok(())
    });
    let tail = match merged {
        Ok(d) => {
            if !bb.is_empty() {
                send(&mut bb, cur_v6).map(|_| d)
            } else {
                Ok(d)
            }
        }
        Err(e) => Err(e),
    };
    drop(tx);
    let joined = writer
        .join()
        .map_err(|_| anyhow::anyhow!("the block compression thread panicked"))?;
    let dups = tail?;
    let (mut out, parts, blocks, v6_start) =
        joined.context("writing the index blocks failed (is the disk full?)")?;

    // Dictionary, then the block index parts, then the footer.
    let mut meta = crc32fast::Hasher::new();
    meta.update(&header);
    let dict_off = out.stream_position()?;
    out.write_all(dict)?;
    meta.update(dict);
    let mut part_offs = [0u64; 6];
    for (i, w) in parts.into_iter().enumerate() {
        let f = w.into_inner().map_err(|e| e.into_error())?;
        drop(f);
        part_offs[i] = out.stream_position()?;
        let mut r = File::open(&part_paths[i])?;
        r.seek(SeekFrom::Start(0))?;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = r.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            meta.update(&chunk[..n]);
            out.write_all(&chunk[..n])?;
        }
        let _ = std::fs::remove_file(&part_paths[i]);
    }
    let footer_off = out.stream_position()?;
    let footer = Footer {
        block_entries: block_entries as u32,
        v4_count: counts[0],
        v6_count: counts[1],
        v4_blocks: blocks[0],
        v6_blocks: blocks[1],
        v4_data_off: HEADER_LEN as u64,
        v6_data_off: v6_start,
        dict_off,
        dict_len: dict.len() as u64,
        v4_index_off: part_offs[0],
        v6_index_off: part_offs[3],
        footer_off,
        file_len: footer_off + format::FOOTER_LEN as u64,
        reserved: 0,
        meta_crc: meta.finalize(),
    };
    out.write_all(&footer.to_bytes())?;
    let f = out.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()
        .with_context(|| format!("cannot fsync {}", tmp_out.display()))?;
    report.unique_v4 = counts[0];
    report.unique_v6 = counts[1];
    report.blocks = blocks[0] + blocks[1];
    Ok(Written {
        bytes: footer.file_len,
        dups,
    })
}
