//! `silt index rdns`: flags to `silt_rdns::BuildOptions`, build, print the report.

use std::io::{BufRead, BufReader, Read};

use anyhow::Context;

use crate::cli::{IndexCommand, IndexRdnsArgs};

pub fn run(c: IndexCommand) -> anyhow::Result<i32> {
    match c {
        IndexCommand::Rdns(a) => rdns(a),
    }
}

/// The input, gunzipped when it starts with the gzip magic.
fn open_input(path: &std::path::Path) -> anyhow::Result<Box<dyn BufRead>> {
    let raw: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
        )
    };
    let mut r = BufReader::with_capacity(1 << 20, raw);
    let gz = r.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gz {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::bufread::MultiGzDecoder::new(r),
        ))
    } else {
        Box::new(r)
    })
}

fn rdns(a: IndexRdnsArgs) -> anyhow::Result<i32> {
    let input = open_input(&a.input)?;
    let mut rejects_path = a.output.clone().into_os_string();
    rejects_path.push(".rejects");
    let rejects_path = std::path::PathBuf::from(rejects_path);
    let mut opts = silt_rdns::BuildOptions {
        memory: a.memory,
        rejects_path: Some(rejects_path.clone()),
        ..Default::default()
    };
    if let Some(t) = &a.tmp_dir {
        opts.tmp_dir = t.clone();
    }
    eprintln!(
        "building {} from {} (memory {} MiB) ...",
        a.output.display(),
        a.input.display(),
        a.memory >> 20
    );
    let r = silt_rdns::build(input, &a.output, opts)
        .with_context(|| format!("building the reverse-DNS index {}", a.output.display()))?;
    println!(
        "{}: {} addresses ({} IPv4, {} IPv6) from {} rows in {:.1} s; {} duplicates (first name kept), {} rejects",
        a.output.display(),
        r.unique(),
        r.unique_v4,
        r.unique_v6,
        r.rows_in,
        r.elapsed.as_secs_f64(),
        r.duplicates,
        r.rejects
    );
    println!(
        "index {} bytes ({:.2} bytes per address); names {} -> {} bytes after templates; {} sorted runs",
        r.bytes_written,
        r.bytes_written as f64 / r.unique().max(1) as f64,
        r.name_bytes,
        r.templated_name_bytes,
        r.runs
    );
    if r.rejects > 0 {
        for s in r.reject_samples.iter().take(10) {
            eprintln!(
                "rejected: {}:{}: {} ({})",
                a.input.display(),
                s.line,
                s.reason,
                s.text
            );
        }
        eprintln!("rejected lines kept in {}", rejects_path.display());
    } else {
        let _ = std::fs::remove_file(&rejects_path);
    }
    Ok(if a.strict && r.rejects > 0 { 2 } else { 0 })
}
