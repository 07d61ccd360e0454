//! Reader throughput on Docker/nginx-like records (the benchmark's shape), for a quick look:
//! `cargo test --release -p silt-logs --test perf -- --ignored --nocapture`.

use std::io::BufReader;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use silt_core::{Emit, ReadOptions, Reject, SourceInfo, TableName};
use silt_logs::{LogFormat, LogOptions};

#[derive(Default)]
struct Count {
    rows: usize,
    rejects: usize,
}

impl Emit for Count {
    fn batch(&mut self, _t: &TableName, b: RecordBatch) -> anyhow::Result<()> {
        self.rows += b.num_rows();
        Ok(())
    }
    fn reject(&mut self, _r: Reject) -> anyhow::Result<()> {
        self.rejects += 1;
        Ok(())
    }
}

fn records(n: usize) -> Vec<serde_json::Value> {
    (0..n)
        .map(|i| {
            serde_json::json!({
                "log_time": 1_700_000_000_000i64 + i as i64 * 4,
                "container_id": format!("{:064x}", (i % 7) * 0x1234_5678_9abc),
                "container_name": format!("/web-{}", i % 7),
                "source": if i % 10 == 0 { "stderr" } else { "stdout" },
                "log": format!("10.0.{}.{} - - [14/Nov/2023:22:13:20 +0000] \"GET /api/v1/items/{i}?page={} HTTP/1.1\" {} {} \"https://example.com/\" \"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0 Safari/537.36\"", i % 250, i % 200, i % 13, if i % 17 == 0 { 404 } else { 200 }, 500 + i % 9000),
            })
        })
        .collect()
}

#[test]
#[ignore]
fn throughput() {
    let recs = records(200_000);
    let mut mp = Vec::new();
    let mut nd = Vec::new();
    for r in &recs {
        mp.extend(rmp_serde::to_vec_named(r).unwrap());
        nd.extend(serde_json::to_vec(r).unwrap());
        nd.push(b'\n');
    }
    let lo = LogOptions {
        time_field: Some("log_time".into()),
        time_unit: Some(silt_logs::TimeUnit::Millis),
        ..LogOptions::default()
    };
    for (name, format, bytes) in [
        ("msgpack", LogFormat::Msgpack, &mp),
        ("ndjson", LogFormat::Json, &nd),
    ] {
        let t = Instant::now();
        let mut out = Count::default();
        silt_logs::read(
            format,
            &mut BufReader::with_capacity(1 << 20, &bytes[..]),
            &SourceInfo::stdin(),
            &ReadOptions::default(),
            &lo,
            &mut out,
        )
        .unwrap();
        let s = t.elapsed().as_secs_f64();
        assert_eq!((out.rows, out.rejects), (recs.len(), 0));
        eprintln!(
            "{name}: {} MB in {s:.3} s = {:.0} MB/s",
            bytes.len() / 1_000_000,
            bytes.len() as f64 / 1e6 / s
        );
    }
}
