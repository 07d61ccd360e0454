//! Throughput of the Zeek TSV reader on a synthetic 2M-record conn.log (about 240 MB, the size
//! of the import benchmark). Ignored by default; run with
//! `cargo test --release -p silt-readers --test zeek_bench -- --ignored --nocapture`
//! (`ZEEK_BENCH_RECORDS=n` changes the size; `ZEEK_BENCH_FILE=conn.log` times a real file).
//! `json_throughput` does the same for the Zeek JSON reader (`ZEEK_BENCH_JSON_FILE=conn.json`
//! times a real NDJSON file), and `json_dump` writes what the JSON reader makes of files, to
//! compare two builds (see each test's comment).

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

/// The JSON form of [`synthetic_conn_log`] (what Zeek's `LogAscii::use_json` writes for it:
/// epoch-seconds times, unset fields left out, sets as arrays).
pub fn synthetic_conn_json(records: usize) -> Vec<u8> {
    let tsv = synthetic_conn_log(records);
    let text = std::str::from_utf8(&tsv).unwrap();
    let fields: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("#fields\t"))
        .unwrap()
        .split('\t')
        .collect();
    let types: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("#types\t"))
        .unwrap()
        .split('\t')
        .collect();
    let mut out = String::with_capacity(tsv.len() * 2);
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        out.push('{');
        let mut first = true;
        for ((f, t), v) in fields.iter().zip(&types).zip(l.split('\t')) {
            if v == "-" {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            out.push('"');
            out.push_str(f);
            out.push_str("\":");
            match *t {
                "time" | "interval" | "count" | "port" => out.push_str(v),
                "bool" => out.push_str(if v == "T" { "true" } else { "false" }),
                "set[string]" if v == "(empty)" => out.push_str("[]"),
                _ => {
                    out.push('"');
                    out.push_str(v);
                    out.push('"');
                }
            }
        }
        out.push_str("}\n");
    }
    out.into_bytes()
}

/// Throughput of the Zeek JSON reader: `ZEEK_BENCH_JSON_FILE=conn.json` times a real file, else
/// [`synthetic_conn_json`] of `ZEEK_BENCH_RECORDS` records (default 1M). Run with
/// `cargo test --release -p silt-readers --test zeek_bench json_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn json_throughput() {
    let records = std::env::var("ZEEK_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let data = match std::env::var_os("ZEEK_BENCH_JSON_FILE") {
        Some(f) => std::fs::read(f).unwrap(),
        None => synthetic_conn_json(records),
    };
    let records = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .count();
    let src = SourceInfo {
        display: "conn.json".into(),
        file_name: Some("conn.json".into()),
    };
    for round in 0..3 {
        let mut out = Count {
            rows: 0,
            rejects: 0,
        };
        let t = Instant::now();
        silt_readers::zeek::json::read_slice(&data, &src, &ReadOptions::default(), &mut out)
            .unwrap();
        let dt = t.elapsed().as_secs_f64();
        assert_eq!(out.rows + out.rejects, records);
        eprintln!(
            "round {round}: {records} records ({} rejects), {:.1} MB in {:.3} s = {:.0} MB/s, {:.0} k records/s",
            out.rejects,
            data.len() as f64 / 1e6,
            dt,
            data.len() as f64 / 1e6 / dt,
            records as f64 / 1e3 / dt
        );
    }
}

/// Writes a digest of everything the JSON reader gives for each input (batches as hashes of their
/// Arrow IPC form, with schema and row count; rejects in full) to `$ZEEK_JSON_DUMP_OUT/<n>.txt`,
/// for comparing two builds of the reader byte for byte. Inputs: the files (or directories) listed
/// in `$ZEEK_JSON_DUMP_IN`, separated by `:`.
#[test]
#[ignore]
fn json_dump() {
    use std::hash::Hasher;
    use std::io::Write;
    let (Some(inputs), Some(outdir)) = (
        std::env::var_os("ZEEK_JSON_DUMP_IN"),
        std::env::var_os("ZEEK_JSON_DUMP_OUT"),
    ) else {
        return;
    };
    let outdir = std::path::PathBuf::from(outdir);
    std::fs::create_dir_all(&outdir).unwrap();
    let mut paths = Vec::new();
    for p in std::env::split_paths(&inputs) {
        let mut stack = vec![p];
        while let Some(p) = stack.pop() {
            if p.is_dir() {
                for e in std::fs::read_dir(&p).unwrap() {
                    stack.push(e.unwrap().path());
                }
            } else {
                paths.push(p);
            }
        }
    }
    paths.sort();
    for (n, p) in paths.iter().enumerate() {
        let raw = std::fs::read(p).unwrap();
        let data = if raw.starts_with(&[0x1f, 0x8b]) {
            let mut d = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&raw[..]), &mut d)
                .unwrap();
            d
        } else {
            raw
        };
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(outdir.join(format!("{n}.txt"))).unwrap(),
        );
        writeln!(f, "input {}", p.display()).unwrap();
        for batch_rows in [3, 65536] {
            let mut out = silt_core::CollectEmit::default();
            let src = SourceInfo::from_path(p);
            silt_readers::zeek::json::read_slice(
                &data,
                &src,
                &ReadOptions { batch_rows },
                &mut out,
            )
            .unwrap();
            for (t, bs) in &out.batches {
                for b in bs {
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    let fo = arrow::util::display::FormatOptions::default().with_null("<NULL>");
                    for c in b.columns() {
                        let fmt = arrow::util::display::ArrayFormatter::try_new(c, &fo).unwrap();
                        for i in 0..c.len() {
                            h.write(fmt.value(i).to_string().as_bytes());
                            h.write_u8(0xff);
                        }
                    }
                    writeln!(
                        f,
                        "batch {t} rows={} values={:016x} md={:?} schema={}",
                        b.num_rows(),
                        h.finish(),
                        b.schema()
                            .metadata()
                            .iter()
                            .collect::<std::collections::BTreeMap<_, _>>(),
                        schema_text(b.schema().fields())
                    )
                    .unwrap();
                }
            }
            writeln!(f, "table_bytes {:?}", out.table_bytes).unwrap();
            for r in &out.rejects {
                writeln!(
                    f,
                    "reject line={} table={:?} reason={:?} raw={:?}",
                    r.line,
                    r.table,
                    r.reason,
                    String::from_utf8_lossy(&r.raw)
                )
                .unwrap();
            }
        }
    }
}

/// A schema as text with its metadata in sorted order (a `HashMap`'s own order varies by run).
fn schema_text(fields: &arrow::datatypes::Fields) -> String {
    use arrow::datatypes::DataType;
    let mut s = String::new();
    for fl in fields {
        let md: std::collections::BTreeMap<_, _> = fl.metadata().iter().collect();
        let ty = match fl.data_type() {
            DataType::Struct(inner) => format!("struct<{}>", schema_text(inner)),
            DataType::List(item) => format!(
                "list<{}>",
                schema_text(&arrow::datatypes::Fields::from(vec![item.clone()]))
            ),
            t => format!("{t:?}"),
        };
        s.push_str(&format!("{}:{ty}:{}:{md:?}; ", fl.name(), fl.is_nullable()));
    }
    s
}
