//! Throughput of the CSV decoder on RASP "netdata" rows, the columnar path against the `Value`
//! path in the same run. Ignored by default; run with
//! `cargo test --release -p silt-logs --test csv_bench -- --ignored --nocapture`
//! (`CSV_BENCH_FILE=x.csv` times another file, default `/tmp/kb/netdata-h.csv`; when that file
//! is absent, 2M generated rows of the same shape, `CSV_BENCH_ROWS=n` for another count).

use std::io::BufReader;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use silt_core::{Decoder, Emit, ReadOptions, Reject, SourceInfo, TableName};
use silt_logs::delimited::DelimitedDecoder;
use silt_logs::{LogFormat, LogOptions};

/// Keeps the batches (for the comparison of the two paths).
#[derive(Default)]
struct Keep(Vec<RecordBatch>);

impl Emit for Keep {
    fn batch(&mut self, _t: &TableName, b: RecordBatch) -> anyhow::Result<()> {
        self.0.push(b);
        Ok(())
    }
    fn reject(&mut self, r: Reject) -> anyhow::Result<()> {
        panic!("reject {r:?}")
    }
}

#[derive(Default)]
struct Count {
    rows: usize,
    rejects: usize,
    batches: usize,
}

impl Emit for Count {
    fn batch(&mut self, _t: &TableName, b: RecordBatch) -> anyhow::Result<()> {
        self.rows += b.num_rows();
        self.batches += 1;
        Ok(())
    }
    fn reject(&mut self, _r: Reject) -> anyhow::Result<()> {
        self.rejects += 1;
        Ok(())
    }
}

/// Rows shaped like the RASP netdata export: `ts,agent,src,dst,sport,dport,proto,bytes,packets,
/// sampling`.
fn synthetic(rows: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut s: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = String::with_capacity(rows * 75);
    out.push_str("ts,agent,src,dst,sport,dport,proto,bytes,packets,sampling\n");
    for i in 0..rows {
        writeln!(
            out,
            "{}.{:03},10.255.0.{},10.0.{}.{},192.0.{}.{},{},{},{},{},{},{}",
            1_711_299_600 + i / 1000,
            i % 1000,
            rnd() % 8 + 1,
            rnd() % 256,
            rnd() % 256,
            rnd() % 256,
            rnd() % 256,
            1024 + rnd() % 60000,
            [443, 80, 53, 22][(rnd() % 4) as usize],
            [6, 17][(rnd() % 2) as usize],
            40 + rnd() % 1460,
            1 + rnd() % 3,
            [512, 1024][(rnd() % 2) as usize],
        )
        .unwrap();
    }
    out.into_bytes()
}

fn decoder(columns: bool) -> DelimitedDecoder {
    let source = SourceInfo {
        display: "netdata.csv".into(),
        file_name: Some("netdata.csv".into()),
    };
    let lo = LogOptions {
        table: Some(TableName::new("rasp", "netdata")),
        ..LogOptions::default()
    };
    let mut d =
        DelimitedDecoder::new(LogFormat::Csv, &source, &ReadOptions::default(), &lo).unwrap();
    d.use_columns(columns);
    d
}

fn run(data: &[u8], columns: bool) -> (Count, f64) {
    let mut d = decoder(columns);
    let mut out = Count::default();
    let t = Instant::now();
    // As `silt import` reads a file: 1 MiB buffers.
    let mut r = BufReader::with_capacity(1 << 20, data);
    d.read(&mut r, &mut out).unwrap();
    (out, t.elapsed().as_secs_f64())
}

#[test]
#[ignore]
fn netdata_throughput() {
    let path = std::env::var("CSV_BENCH_FILE").unwrap_or_else(|_| "/tmp/kb/netdata-h.csv".into());
    let data = match std::fs::read(&path) {
        Ok(d) => {
            eprintln!("{path}: {:.1} MB", d.len() as f64 / 1e6);
            d
        }
        Err(e) => {
            let rows = std::env::var("CSV_BENCH_ROWS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2_000_000);
            eprintln!("{path}: {e}; {rows} generated rows instead");
            synthetic(rows)
        }
    };
    // The two paths give the same batches (on the first 200k rows, to keep memory small).
    let head = match data
        .iter()
        .enumerate()
        .filter(|(_, &c)| c == b'\n')
        .nth(200_000)
    {
        Some((i, _)) => &data[..=i],
        None => &data[..],
    };
    let (mut a, mut b) = (Keep::default(), Keep::default());
    silt_core::decode::decode_slice(&mut decoder(false), head, &mut a).unwrap();
    silt_core::decode::decode_slice(&mut decoder(true), head, &mut b).unwrap();
    assert!(a.0 == b.0, "the two paths differ");
    eprintln!("same {} batches from both paths", a.0.len());
    let mut rows = None;
    for round in 0..2 {
        for (name, columns) in [("value path", false), ("columnar", true)] {
            let (out, dt) = run(&data, columns);
            assert_eq!(out.rejects, 0);
            assert_eq!(*rows.get_or_insert(out.rows), out.rows);
            eprintln!(
                "round {round} {name:>10}: {} rows in {} batches, {dt:.3} s = {:.0} k rows/s, \
                 {:.0} MB/s",
                out.rows,
                out.batches,
                out.rows as f64 / 1e3 / dt,
                data.len() as f64 / 1e6 / dt
            );
        }
    }
}
