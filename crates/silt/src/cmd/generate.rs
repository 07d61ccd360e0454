//! `silt generate zeek|suricata|pcap|docker-nginx|sflow|rdns`: realistic synthetic telemetry
//! from `silt-gen` (reverse-DNS rows from `silt-rdns`'s generator).

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
    if a.kind == GenKind::Sflow {
        let r = silt_gen::generate_sflow(
            &a.output,
            &silt_gen::SflowOptions {
                seed: a.seed,
                samples: a.events,
                from: a.pcap.from.clone(),
                ..silt_gen::SflowOptions::default()
            },
        )?;
        println!(
            "{:<40} {} flow samples, {} counter samples in {} datagrams, {} in {:.2} s",
            a.output.display(),
            r.flow_samples,
            r.counter_samples,
            r.datagrams,
            human_bytes(r.bytes),
            started.elapsed().as_secs_f64()
        );
        return Ok(0);
    }
    if a.kind == GenKind::Rdns {
        let f = std::fs::File::create(&a.output)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", a.output.display()))?;
        let mut w = std::io::BufWriter::new(f);
        silt_rdns::gen::write_csv_gz(a.events, a.seed, &mut w)?;
        std::io::Write::flush(&mut w)?;
        let bytes = std::fs::metadata(&a.output)?.len();
        println!(
            "{:<40} {} rows, {} in {:.2} s",
            a.output.display(),
            a.events,
            human_bytes(bytes),
            started.elapsed().as_secs_f64()
        );
        return Ok(0);
    }
    let report = match a.kind {
        GenKind::Zeek => silt_gen::generate_zeek(&a.output, a.events, &opts)?,
        GenKind::Suricata => silt_gen::generate_suricata(&a.output, a.events, &opts)?,
        GenKind::Pcap | GenKind::DockerNginx | GenKind::Sflow | GenKind::Rdns => {
            unreachable!("handled above")
        }
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
