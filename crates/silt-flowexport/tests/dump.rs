//! Developer aid (ignored by default): prints the batches, rejects and report of corpus files.
//! `FILES=netflow/template.pcap,netflow/data.pcap COLS=src,dst cargo test --test dump -- --ignored --nocapture`
mod common;
use silt_flowexport::Protocol;

#[test]
#[ignore]
fn dump() {
    let dir = common::corpus().unwrap();
    let files: Vec<_> = std::env::var("FILES")
        .unwrap()
        .split(',')
        .map(|f| dir.join(f))
        .collect();
    let proto = if files[0].to_string_lossy().contains("sflow") {
        Protocol::Sflow
    } else {
        Protocol::Netflow
    };
    let (out, c, _) = common::collect(proto, &files);
    for (t, bs) in &out.batches {
        println!("== {t}");
        let bs: Vec<_> = match std::env::var("COLS") {
            Ok(c) => bs
                .iter()
                .map(|b| {
                    let s = b.schema();
                    let idx: Vec<usize> = c.split(',').filter_map(|n| s.index_of(n).ok()).collect();
                    b.project(&idx).unwrap()
                })
                .collect(),
            Err(_) => bs.clone(),
        };
        println!(
            "{}",
            arrow::util::pretty::pretty_format_batches(&bs).unwrap()
        );
    }
    for r in &out.rejects {
        println!("REJECT {} {}", r.line, r.reason);
    }
    for l in c.report() {
        println!("REPORT {l}");
    }
}
