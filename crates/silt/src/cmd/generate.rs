//! `silt generate zeek|suricata|pcap`: realistic synthetic telemetry from `silt-gen`.

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
    if a.kind == GenKind::Pcap {
        return pcap(&a, started);
    }
    if a.kind == GenKind::DockerNginx {
        return docker_nginx(&a, started);
    }
    let report = match a.kind {
        GenKind::Zeek => silt_gen::generate_zeek(&a.output, a.events, &opts)?,
        GenKind::Suricata => silt_gen::generate_suricata(&a.output, a.events, &opts)?,
        GenKind::Pcap | GenKind::DockerNginx => unreachable!("handled above"),
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

/// `silt generate pcap`: one capture file (or standard output), sized by --bytes or --events.
fn pcap(a: &GenerateArgs, started: std::time::Instant) -> anyhow::Result<i32> {
    let opts = silt_gen::PcapOptions {
        seed: a.seed,
        packets: a.pcap.bytes.is_none().then_some(a.events),
        bytes: a.pcap.bytes.map(|b| b as u64),
        pcapng: a.pcap.pcapng,
        concurrent_flows: a.pcap.concurrent_flows,
        ..silt_gen::PcapOptions::default()
    };
    let stdout = a.output.as_os_str() == "-";
    let r = if stdout {
        silt_gen::write_pcap(&mut std::io::stdout().lock(), &opts)?
    } else {
        silt_gen::generate_pcap(&a.output, &opts)?
    };
    let secs = started.elapsed().as_secs_f64();
    // The summary goes to stderr when the trace itself goes to stdout.
    let line = format!(
        "{} packets, {} flows ({} tcp, {} udp, {} icmp packets; {} ipv6, {} vlan, {} qinq, {} vxlan), {} in {:.2} s ({:.0} MB/s)",
        r.packets,
        r.flows,
        r.tcp,
        r.udp,
        r.icmp,
        r.ipv6,
        r.vlan,
        r.qinq,
        r.vxlan,
        human_bytes(r.bytes),
        secs,
        r.bytes as f64 / secs.max(1e-9) / 1e6
    );
    if stdout {
        eprintln!("{line}");
    } else {
        println!(
            "{:<40} {:>10} packets {:>10}",
            a.output.display(),
            r.packets,
            human_bytes(r.bytes)
        );
        println!("{line}");
    }
    Ok(0)
}

/// `silt generate docker-nginx`: one MessagePack or NDJSON file (or standard output).
fn docker_nginx(a: &GenerateArgs, started: std::time::Instant) -> anyhow::Result<i32> {
    use silt_gen::weblog::{write_docker_nginx, WeblogFormat, WeblogOptions};
    let format = match a.weblog.weblog_format.as_str() {
        "ndjson" => WeblogFormat::Ndjson,
        _ => WeblogFormat::Msgpack,
    };
    let opts = WeblogOptions {
        seed: a.seed,
        target_bytes: a.pcap.bytes.map(|b| b as u64),
        records: a.pcap.bytes.is_none().then_some(a.events),
        ..WeblogOptions::default()
    };
    let stdout = a.output.as_os_str() == "-";
    let r = if stdout {
        write_docker_nginx(&mut std::io::stdout().lock(), format, &opts)?
    } else {
        let f = std::fs::File::create(&a.output)
            .map_err(|e| anyhow::anyhow!("creating {}: {e}", a.output.display()))?;
        write_docker_nginx(&mut std::io::BufWriter::new(f), format, &opts)?
    };
    let line = format!(
        "{} records ({} access lines, {} with status 200), {} in {:.2} s",
        r.records,
        r.access_lines,
        r.status_200,
        human_bytes(r.bytes),
        started.elapsed().as_secs_f64()
    );
    if stdout {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    Ok(0)
}
