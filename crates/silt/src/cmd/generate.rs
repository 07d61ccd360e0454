//! `silt generate zeek|suricata`: realistic synthetic telemetry from `silt-gen`.

use silt_gen::GenOptions;
use silt_lake::summary::human_bytes;

use crate::cli::{GenKind, GenerateArgs};

pub fn run(a: GenerateArgs) -> anyhow::Result<i32> {
    let opts = GenOptions {
        seed: a.seed,
        logs: (!a.log.is_empty()).then(|| a.log.clone()),
        ..GenOptions::default()
    };
    let started = std::time::Instant::now();
    let report = match a.kind {
        GenKind::Zeek => silt_gen::generate_zeek(&a.output, a.events, &opts)?,
        GenKind::Suricata => silt_gen::generate_suricata(&a.output, a.events, &opts)?,
    };
    for f in &report.files {
        println!(
            "{:<40} {:>10} records {:>10}",
            f.path.display(),
            f.records,
            human_bytes(f.bytes)
        );
    }
    println!(
        "{} records, {} in {:.2} s",
        report.records(),
        human_bytes(report.bytes()),
        started.elapsed().as_secs_f64()
    );
    Ok(0)
}
