//! Timed benchmark of the Enricher: rows/s over a stream of batches whose address columns hold
//! Zipf-distributed addresses drawn from a fixed set of distinct addresses, enriched with
//! asn+geo+rdns against the corpus test databases (GeoLite2-ASN-Test + GeoLite2-City-Test and a
//! `MapNames` reverse-DNS map naming half the addresses).
//!
//! cargo run --release --example enrich_bench -- [rows=10000000] [batch=16384] [distinct=100000]
//!     [zipf_s=1.0] [columns=2] [attrs=asn,geo,rdns]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use silt_core::{TableName, Transform};
use silt_enrich::{Databases, EnrichConfig, Enricher, MapNames};

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    let rows: usize = arg(1, 10_000_000);
    let batch: usize = arg(2, 16_384);
    let distinct: usize = arg(3, 100_000);
    let s: f64 = arg(4, 1.0);
    let ncols: usize = arg(5, 2);
    let attrs: String = arg(6, "asn,geo,rdns".to_string());
    let corpus = std::env::var("SILT_CORPUS").unwrap_or_else(|_| "/work/shared/corpus".into());
    let mmdb = std::path::Path::new(&corpus).join("mmdb");

    let mut rng = SmallRng::seed_from_u64(42);
    // Distinct addresses: 70 % inside networks of the ASN and City test databases (so lookups
    // find data),
    // 25 % random IPv4, 5 % random IPv6.
    let json: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(
        &std::fs::read_to_string(mmdb.join("source-data/GeoLite2-ASN-Test.json"))?,
    )?;
    let mut nets: Vec<(IpAddr, IpAddr)> = json
        .iter()
        .flat_map(|m| m.keys())
        .map(|n| silt_enrich::ranges::parse_network(n).unwrap())
        .collect();
    // And the networks of the City test database, so geo lookups find data too.
    let city = maxminddb::Reader::open_readfile(mmdb.join("GeoLite2-City-Test.mmdb"))?;
    for item in city.networks(Default::default())? {
        let net = item?.network()?;
        nets.push(silt_enrich::ranges::parse_network(&net.to_string()).unwrap());
    }
    let mut ips: Vec<IpAddr> = Vec::with_capacity(distinct);
    let mut seen = std::collections::HashSet::new();
    while ips.len() < distinct {
        let r: f64 = rng.random();
        let ip = if r < 0.70 {
            match nets[rng.random_range(0..nets.len())] {
                (IpAddr::V4(a), IpAddr::V4(b)) => IpAddr::V4(Ipv4Addr::from(
                    rng.random_range(u32::from(a)..=u32::from(b)),
                )),
                (IpAddr::V6(a), IpAddr::V6(b)) => {
                    let (a, b) = (u128::from(a), u128::from(b));
                    IpAddr::V6(Ipv6Addr::from(
                        a + rng.random_range(0..=(b - a).min(1 << 40)),
                    ))
                }
                _ => unreachable!(),
            }
        } else if r < 0.95 {
            IpAddr::V4(Ipv4Addr::from(rng.random::<u32>()))
        } else {
            IpAddr::V6(Ipv6Addr::from(rng.random::<u128>()))
        };
        if seen.insert(ip) {
            ips.push(ip);
        }
    }
    let texts: Vec<String> = ips.iter().map(|i| i.to_string()).collect();
    let mut names = MapNames::new();
    for (i, ip) in ips.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        names.insert(*ip, &format!("host-{i}.example.net"));
    }

    // Zipf(s) over ranks 1..=distinct by inverse CDF.
    let mut cdf = Vec::with_capacity(distinct);
    let mut acc = 0.0;
    for k in 1..=distinct {
        acc += 1.0 / (k as f64).powf(s);
        cdf.push(acc);
    }
    let total = acc;

    let col_names = ["src", "dst", "src_ip", "dest_ip"];
    let fields: Vec<Field> = (0..ncols)
        .map(|c| Field::new(col_names[c], DataType::Utf8, true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let nbatches = rows.div_ceil(batch);
    let mut batches = Vec::with_capacity(nbatches);
    let mut used = std::collections::HashSet::new();
    for b in 0..nbatches {
        let n = batch.min(rows - b * batch);
        let cols: Vec<ArrayRef> = (0..ncols)
            .map(|_| {
                let v: Vec<&str> = (0..n)
                    .map(|_| {
                        let u: f64 = rng.random::<f64>() * total;
                        let k = cdf.partition_point(|&c| c < u).min(distinct - 1);
                        used.insert(k);
                        texts[k].as_str()
                    })
                    .collect();
                Arc::new(StringArray::from(v)) as ArrayRef
            })
            .collect();
        batches.push(RecordBatch::try_new(schema.clone(), cols)?);
    }

    let mut dbs = Databases::new();
    dbs.add_mmdb(&mmdb.join("GeoLite2-ASN-Test.mmdb"))?;
    dbs.add_mmdb(&mmdb.join("GeoLite2-City-Test.mmdb"))?;
    dbs.set_names(Arc::new(names));
    let mut e = Enricher::new(EnrichConfig::new(attrs.parse()?), dbs)?;
    let table = TableName::new("pcap", "flow");
    println!(
        "{rows} rows in batches of {batch}, {ncols} address columns, {distinct} distinct addresses (Zipf s={s}; {} used), attrs {attrs}",
        used.len()
    );
    for pass in ["cold", "warm", "warm"] {
        let t = Instant::now();
        let c0 = cpu_seconds();
        let mut out_cols = 0;
        for b in &batches {
            let o = e.apply(&table, b.clone())?;
            out_cols = o.num_columns();
        }
        let dt = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - c0;
        println!(
            "{pass}: {:.3} s wall, {:.3} s CPU; {:.2} M rows/s wall, {:.2} M rows/s per CPU second, {:.2} M addresses/s wall ({out_cols} output columns)",
            dt,
            cpu,
            rows as f64 / dt / 1e6,
            rows as f64 / cpu / 1e6,
            (rows * ncols) as f64 / dt / 1e6
        );
    }
    for l in e.report() {
        println!("{l}");
    }
    Ok(())
}

/// CPU time of this thread (Linux `/proc/thread-self/schedstat`), for figures that do not
/// depend on what else the shared machine runs.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map(|ns| ns as f64 / 1e9)
        .unwrap_or(f64::NAN)
}
