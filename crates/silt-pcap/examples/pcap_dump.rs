//! Prints the `pcap.packet` rows and rejects of a capture (a debugging aid):
//! `cargo run -p silt-pcap --example pcap_dump -- FILE [MAX_ROWS]`.
use std::io::BufReader;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = std::path::Path::new(&args[1]);
    let max: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let f = std::fs::File::open(path)?;
    let mut r: Box<dyn std::io::BufRead> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(f)))
    } else {
        Box::new(BufReader::new(f))
    };
    let mut out = silt_core::CollectEmit::default();
    silt_pcap::read(
        &mut r,
        &silt_core::SourceInfo::from_path(path),
        &Default::default(),
        &mut out,
    )?;
    for bs in out.batches.values() {
        for b in bs {
            let b = b.slice(0, b.num_rows().min(max));
            println!("{}", arrow::util::pretty::pretty_format_batches(&[b])?);
        }
    }
    for r in &out.rejects {
        println!("reject {}: {}", r.line, r.reason);
    }
    Ok(())
}
