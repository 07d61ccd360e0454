//! Throughput of the Zeek TSV reader on a synthetic 2M-record conn.log (about 240 MB, the size
//! of the import benchmark). Ignored by default; run with
//! `cargo test --release -p silt-readers --test zeek_bench -- --ignored --nocapture`
//! (`ZEEK_BENCH_RECORDS=n` changes the size; `ZEEK_BENCH_FILE=conn.log` times a real file).

use std::time::Instant;

use silt_core::{Emit, ReadOptions, Reject, SourceInfo, TableName};

struct Count {
    rows: usize,
    rejects: usize,
}

impl Emit for Count {
    fn batch(&mut self, _: &TableName, b: arrow::record_batch::RecordBatch) -> anyhow::Result<()> {
        self.rows += b.num_rows();
        Ok(())
    }
    fn reject(&mut self, _: Reject) -> anyhow::Result<()> {
        self.rejects += 1;
        Ok(())
    }
}

/// A conn.log with realistic value shapes (Zeek 6 columns).
pub fn synthetic_conn_log(records: usize) -> Vec<u8> {
    let mut s: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = String::with_capacity(records * 130);
    out.push_str("#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n#path\tconn\n#open\t2024-04-12-19-29-12\n");
    out.push_str("#fields\tts\tuid\tid.orig_h\tid.orig_p\tid.resp_h\tid.resp_p\tproto\tservice\tduration\torig_bytes\tresp_bytes\tconn_state\tlocal_orig\tlocal_resp\tmissed_bytes\thistory\torig_pkts\torig_ip_bytes\tresp_pkts\tresp_ip_bytes\ttunnel_parents\n");
    out.push_str("#types\ttime\tstring\taddr\tport\taddr\tport\tenum\tstring\tinterval\tcount\tcount\tstring\tbool\tbool\tcount\tstring\tcount\tcount\tcount\tcount\tset[string]\n");
    let alnum = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut ts = 1_521_911_721_000_000u64;
    use std::fmt::Write;
    for _ in 0..records {
        ts += rnd() % 2000;
        let uid: String = std::iter::once('C')
            .chain((0..17).map(|_| alnum[(rnd() % 62) as usize] as char))
            .collect();
        let r = rnd();
        let (proto, service) = match r % 3 {
            0 => ("tcp", if r % 7 == 0 { "-" } else { "http" }),
            1 => ("udp", "dns"),
            _ => ("icmp", "-"),
        };
        let unset = r % 5 == 0;
        write!(
            out,
            "{}.{:06}\t{uid}\t10.{}.{}.{}\t{}\t{}.{}.{}.{}\t{}\t{proto}\t{service}\t",
            ts / 1_000_000,
            ts % 1_000_000,
            rnd() % 256,
            rnd() % 256,
            rnd() % 256,
            rnd() % 65536,
            rnd() % 223 + 1,
            rnd() % 256,
            rnd() % 256,
            rnd() % 256,
            [53, 80, 443, 22, 123][(rnd() % 5) as usize],
        )
        .unwrap();
        if unset {
            out.push_str("-\t-\t-\t");
        } else {
            write!(
                out,
                "{}.{:06}\t{}\t{}\t",
                rnd() % 100,
                rnd() % 1_000_000,
                rnd() % 100_000,
                rnd() % 1_000_000
            )
            .unwrap();
        }
        writeln!(
            out,
            "{}\t{}\t{}\t0\t{}\t{}\t{}\t{}\t{}\t(empty)",
            ["SF", "S0", "REJ", "OTH"][(rnd() % 4) as usize],
            if r % 2 == 0 { "T" } else { "F" },
            if r % 3 == 0 { "T" } else { "F" },
            ["ShADadFf", "D", "S", "ShAdDaFf"][(rnd() % 4) as usize],
            rnd() % 100,
            rnd() % 100_000,
            rnd() % 100,
            rnd() % 100_000,
        )
        .unwrap();
    }
    out.into_bytes()
}

#[test]
#[ignore]
fn conn_log_throughput() {
    let records = std::env::var("ZEEK_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let (data, records) = match std::env::var_os("ZEEK_BENCH_FILE") {
        Some(f) => {
            let data = std::fs::read(f).unwrap();
            let n = data
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty() && !l.starts_with(b"#"))
                .count();
            (data, n)
        }
        None => (synthetic_conn_log(records), records),
    };
    let src = SourceInfo {
        display: "conn.log".into(),
        file_name: Some("conn.log".into()),
    };
    for round in 0..3 {
        let mut out = Count {
            rows: 0,
            rejects: 0,
        };
        let t = Instant::now();
        silt_readers::zeek::tsv::read_slice(&data, &src, &ReadOptions::default(), &mut out)
            .unwrap();
        let dt = t.elapsed().as_secs_f64();
        assert_eq!(out.rows, records);
        assert_eq!(out.rejects, 0);
        eprintln!(
            "round {round}: {records} records, {:.1} MB in {:.3} s = {:.0} MB/s, {:.2} M rows/s",
            data.len() as f64 / 1e6,
            dt,
            data.len() as f64 / 1e6 / dt,
            records as f64 / 1e6 / dt
        );
    }
    // Through the streaming entry point (1 MiB buffer, as `source.rs` opens files).
    let mut out = Count {
        rows: 0,
        rejects: 0,
    };
    let t = Instant::now();
    let mut r = std::io::BufReader::with_capacity(1 << 20, &data[..]);
    silt_readers::zeek::tsv::read(&mut r, &src, &ReadOptions::default(), &mut out).unwrap();
    eprintln!("streaming: {:.3} s", t.elapsed().as_secs_f64());
    assert_eq!(out.rows, records);
}
