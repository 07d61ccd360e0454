//! Helpers shared by the integration tests: corpus location, reading a capture into memory.
#![allow(dead_code)]

pub mod build;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray};
use silt_core::{CollectEmit, SourceInfo};
use silt_pcap::PcapOptions;

/// `../shared/corpus` relative to the workspace, or `None` (tests then skip).
pub fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    p.is_dir().then_some(p)
}

/// Every pcap/pcapng (optionally gzipped) under the corpus' `pcap/` and `community-id/`.
pub fn corpus_pcaps(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in ["pcap", "community-id"] {
        walk(&root.join(d), &mut out);
    }
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            let n = n.trim_end_matches(".gz");
            if n.ends_with(".pcap") || n.ends_with(".pcapng") {
                out.push(p);
            }
        }
    }
}

/// Opens a file, gunzipping `.gz`.
pub fn open(path: &Path) -> Box<dyn BufRead> {
    let f = std::fs::File::open(path).expect("open");
    if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(f)))
    } else {
        Box::new(BufReader::new(f))
    }
}

/// Reads a capture file with the given options into memory.
pub fn read_file(path: &Path, opts: &PcapOptions) -> (CollectEmit, anyhow::Result<()>) {
    let mut out = CollectEmit::default();
    let mut r = open(path);
    let res = silt_pcap::read(&mut r, &SourceInfo::from_path(path), opts, &mut out);
    (out, res)
}

/// Reads bytes with default options.
pub fn read_bytes(bytes: &[u8]) -> CollectEmit {
    let mut out = CollectEmit::default();
    let mut r: &[u8] = bytes;
    silt_pcap::read(
        &mut r,
        &SourceInfo::stdin(),
        &PcapOptions::default(),
        &mut out,
    )
    .expect("read");
    out
}

/// Distinct non-null values of a Utf8 column of a table.
pub fn strings(out: &CollectEmit, table: &str, col: &str) -> Vec<Option<String>> {
    let mut v = Vec::new();
    for (t, bs) in &out.batches {
        if t.to_string() != table {
            continue;
        }
        for b in bs {
            let a = b.column_by_name(col).expect("column");
            let a = a.as_string::<i32>();
            for i in 0..a.len() {
                v.push(a.is_valid(i).then(|| a.value(i).to_string()));
            }
        }
    }
    v
}

/// tshark's frame count for a file, or `None` if tshark is not installed. Also returns
/// whether tshark reported an error (e.g. a file cut short).
pub fn tshark_count(path: &Path) -> Option<(usize, bool, String)> {
    let o = std::process::Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-T", "fields", "-e", "frame.number"])
        .output()
        .ok()?;
    let n = o
        .stdout
        .split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    Some((
        n,
        !o.status.success(),
        String::from_utf8_lossy(&o.stderr).trim().to_string(),
    ))
}
