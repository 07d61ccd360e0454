//! Stand-alone driver for the generator (benchmarks and manual checks without the `silt` CLI):
//!
//! ```text
//! cargo run --release -p silt-gen --example gen -- zeek|suricata [--events N] [--log NAME]...
//!     [--seed S] [--span SECS] [--community-id] [-o DIR | --stdout]
//! ```
//! Argument parsing is by hand to keep the example free of extra dependencies.

use std::path::PathBuf;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_default();
    let mut opts = silt_gen::GenOptions::default();
    let mut events = 100_000u64;
    let mut dir = PathBuf::from("gen-out");
    let mut stdout = false;
    let mut logs = Vec::new();
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--events" | "-n" => events = val()?.replace('_', "").parse()?,
            "--log" => logs.push(val()?),
            "--seed" => opts.seed = val()?.parse()?,
            "--span" => opts.span_secs = val()?.parse()?,
            "--community-id" => opts.community_id = true,
            "-o" | "--out" => dir = PathBuf::from(val()?),
            "--stdout" => stdout = true,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    if !logs.is_empty() {
        opts.logs = Some(logs.clone());
    }
    let t = Instant::now();
    match (what.as_str(), stdout) {
        ("zeek", false) => {
            let r = silt_gen::generate_zeek(&dir, events, &opts)?;
            for f in &r.files {
                eprintln!(
                    "{}\t{} records\t{} bytes",
                    f.path.display(),
                    f.records,
                    f.bytes
                );
            }
        }
        ("zeek", true) => {
            anyhow::ensure!(logs.len() == 1, "--stdout needs exactly one --log");
            let n =
                silt_gen::write_zeek_log(&mut std::io::stdout().lock(), &logs[0], events, &opts)?;
            eprintln!("{n} records");
        }
        ("suricata" | "eve", false) => {
            let r = silt_gen::generate_suricata(&dir, events, &opts)?;
            for f in &r.files {
                eprintln!(
                    "{}\t{} records\t{} bytes",
                    f.path.display(),
                    f.records,
                    f.bytes
                );
            }
        }
        ("suricata" | "eve", true) => {
            let n = silt_gen::write_suricata(&mut std::io::stdout().lock(), events, &opts)?;
            eprintln!("{n} records");
        }
        _ => anyhow::bail!(
            "usage: gen zeek|suricata [--events N] [--log NAME]... [--seed S] [-o DIR | --stdout]"
        ),
    }
    eprintln!("generated in {:.2}s", t.elapsed().as_secs_f64());
    Ok(())
}
