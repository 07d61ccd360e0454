//! The decoder contract on access logs: a stream fed to [`AccessDecoder`] in pieces of any size
//! (down to one byte, seeded random sizes), with flushes sprinkled in, gives what reading it
//! whole gives: the same table, the same rows (values, batches concatenated), the same rejects
//! (line, reason, raw bytes), the same bytes per table. The decoder reports no progress itself.
//!
//! Inputs: every web log of the corpus (skipped with a message when the corpus is absent, a
//! failure under CI=true / SILT_REQUIRE_ALL=1) in the formats that fit them and in ones that do
//! not; the nginx lines of `silt_gen::weblog` (with its error-log lines, which are rejects);
//! hand-written lines with CRLF, a byte-order mark, blank lines, invalid UTF-8 and no final
//! newline.

use std::collections::BTreeMap;

use arrow::record_batch::RecordBatch;
use silt_access::{AccessDecoder, AccessOptions};
use silt_core::{CollectEmit, Decoder, FormatOptions, ReadOptions, SourceInfo};

#[derive(Debug, PartialEq)]
struct Outcome {
    tables: BTreeMap<String, (String, Vec<String>)>,
    rejects: Vec<(u64, String, Vec<u8>, Option<String>)>,
    table_bytes: BTreeMap<String, u64>,
}

fn outcome(out: CollectEmit) -> Outcome {
    let tables = out
        .batches
        .iter()
        .map(|(t, b): (_, &Vec<RecordBatch>)| {
            // One format, one schema: the batches concatenate as they are.
            let all = arrow::compute::concat_batches(&b[0].schema(), b).unwrap();
            let mut buf = Vec::new();
            {
                let mut w = arrow::json::LineDelimitedWriter::new(&mut buf);
                w.write(&all).unwrap();
                w.finish().unwrap();
            }
            let rows = String::from_utf8(buf)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
            (
                t.to_string(),
                (format!("{:?}", all.schema().fields()), rows),
            )
        })
        .collect();
    Outcome {
        tables,
        rejects: out
            .rejects
            .iter()
            .map(|r| {
                let table = r.table.as_ref().map(|t| t.to_string());
                (r.line, r.reason.clone(), r.raw.clone(), table)
            })
            .collect(),
        table_bytes: out
            .table_bytes
            .iter()
            .map(|(t, n)| (t.to_string(), *n))
            .collect(),
    }
}

const RO: ReadOptions = ReadOptions { batch_rows: 40 };

fn source(name: &str) -> SourceInfo {
    SourceInfo {
        display: name.to_string(),
        file_name: Some(name.to_string()),
    }
}

fn read_whole(name: &str, bytes: &[u8], format: &str) -> Outcome {
    let opts = AccessOptions::new(format, None).unwrap();
    let mut out = CollectEmit::default();
    silt_access::read(
        &mut std::io::BufReader::with_capacity(4096, bytes),
        &source(name),
        &RO,
        &opts,
        &mut out,
    )
    .unwrap();
    assert_eq!(out.bytes, bytes.len() as u64, "{name}: progress");
    outcome(out)
}

fn feed(
    name: &str,
    bytes: &[u8],
    format: &str,
    seed: u64,
    max_piece: u64,
    flush_pct: u64,
) -> Outcome {
    // Made the way the format registry makes it: `FORMAT.open` with the options by type.
    let opts = FormatOptions::new(RO).with(AccessOptions::new(format, None).unwrap());
    let mut d: Box<dyn Decoder> = (silt_access::FORMAT.open)(&opts, &source(name)).unwrap();
    let mut out = CollectEmit::default();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = |n: u64| {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    };
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = (1 + next(max_piece) as usize).min(rest.len());
        d.feed(&rest[..n], &mut out).unwrap();
        rest = &rest[n..];
        if next(100) < flush_pct {
            d.flush(&mut out).unwrap();
        }
    }
    d.finish(&mut out).unwrap();
    assert_eq!(out.bytes, 0, "{name}: decoders do not report progress");
    outcome(out)
}

fn check(name: &str, bytes: &[u8], format: &str) -> Outcome {
    let whole = read_whole(name, bytes, format);
    for (seed, max_piece, flush_pct) in [
        (1, 1, 3),
        (2, 9, 10),
        (3, 100, 30),
        (4, 5000, 50),
        (5, 1 << 20, 0),
    ] {
        // One-byte pieces: the first 32 KiB of a large input (debug builds are slow).
        if max_piece == 1 && bytes.len() > 32 << 10 {
            let small = &bytes[..32 << 10];
            assert_eq!(
                feed(name, small, format, seed, 1, flush_pct),
                read_whole(name, small, format),
                "{name} ({format}) first 32 KiB in 1-byte pieces"
            );
            continue;
        }
        assert_eq!(
            feed(name, bytes, format, seed, max_piece, flush_pct),
            whole,
            "{name} ({format}) in pieces of up to {max_piece} bytes, {flush_pct}% flushes"
        );
    }
    whole
}

fn nginx_lines() -> Vec<u8> {
    let mut nd = Vec::new();
    silt_gen::weblog::write_docker_nginx(
        &mut nd,
        silt_gen::weblog::WeblogFormat::Ndjson,
        &silt_gen::weblog::WeblogOptions {
            records: Some(600),
            ..Default::default()
        },
    )
    .unwrap();
    let mut out = Vec::new();
    for l in nd.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(l).unwrap();
        out.extend_from_slice(v["log"].as_str().unwrap().as_bytes());
        out.push(b'\n');
    }
    out
}

fn handwritten() -> Vec<u8> {
    let mut t = b"\xEF\xBB\xBF10.0.0.1 - - [01/Mar/2024:12:00:00 +0100] \"GET /a HTTP/1.1\" 200 5 \"-\" \"curl/8\"\r\n\r\n\n".to_vec();
    t.extend_from_slice(b"2001:DB8::1 - bob [01/Mar/2024:12:00:01 +0000] \"POST /q?a=\\\"x\\\" HTTP/1.1\" 201 - \"https://r/\" \"UA \\\"q\\\"\"\n");
    t.extend_from_slice(b"not an access line\n");
    t.extend_from_slice(
        b"10.0.0.9 - - [01/Mar/2024:12:00:03 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"caf\xe9\"\n",
    );
    t.extend_from_slice(b"10.0.0.9 - - [01/Mar/2024:12:00:04 +0000] \"GET / HTTP/1.1\" 2x0 1\n");
    t.extend_from_slice(b"10.0.0.9 - - [01/Mar/2024:12:00:05 +0000] \"GET /last HTTP/1.1\" 404 7");
    t
}

#[test]
fn feeding_in_pieces_equals_reading_whole() {
    let gen = nginx_lines();
    let w = check("nginx.log", &gen, "combined");
    let rows = w.tables["access.nginx"].1.len();
    // The generator writes ~0.5% error-log lines: rejects; every other line is a row.
    assert!(
        rows > 550 && !w.rejects.is_empty(),
        "{rows} rows, {} rejects",
        w.rejects.len()
    );
    assert_eq!(rows + w.rejects.len(), 600);
    check("nginx.log", &gen, "auto");
    let hw = handwritten();
    let w = check("hand.log", &hw, "auto");
    assert_eq!(w.tables["access.hand"].1.len(), 3);
    let lines: Vec<u64> = w.rejects.iter().map(|r| r.0).collect();
    assert_eq!(lines, [5, 6, 7]);
    check("hand.log", &hw, "main");
}

#[test]
fn the_comparison_can_fail() {
    let hw = handwritten();
    let whole = read_whole("hand.log", &hw, "auto");
    // A byte less (the `-` of the second line's bytes field) changes the outcome.
    let mut less = hw.clone();
    let at = memchr::memmem::find(&less, b"201 -").unwrap() + 4;
    less.remove(at);
    assert_ne!(feed("hand.log", &less, "auto", 2, 9, 10), whole);
}

#[test]
fn corpus_weblogs() {
    let Some(dir) = silt_testkit::corpus_path("weblogs") else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .chain(std::fs::read_dir(dir.join("docker-json-file")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 17, "{files:?}");
    for p in files {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let bytes = std::fs::read(&p).unwrap();
        for format in ["auto", "combined", "common"] {
            check(&name, &bytes, format);
        }
    }
    let shop = std::fs::read(dir.join("lnav-shop_access_log.0")).unwrap();
    let w = check("lnav-shop_access_log.0", &shop, "main");
    assert_eq!(w.tables.values().next().unwrap().1.len(), 1000);
    assert!(w.rejects.is_empty());
}

/// `AccessDecoder::new` and the registry's `open` make the same decoder.
#[test]
fn decoder_made_directly() {
    let hw = handwritten();
    let mut d = AccessDecoder::new(&source("hand.log"), &RO, &AccessOptions::default());
    let mut out = CollectEmit::default();
    for p in hw.chunks(13) {
        d.feed(p, &mut out).unwrap();
    }
    d.finish(&mut out).unwrap();
    assert_eq!(outcome(out), read_whole("hand.log", &hw, "auto"));
}
