//! The EVE reader never panics and never loses a line: random bytes, truncated and mutated EVE
//! lines, and randomly shaped JSON records whose fields change type from record to record.
//! For every input, rows + rejects == non-blank lines, and every table's batches conform to
//! their unified schema. A small deterministic PRNG keeps runs reproducible.

use arrow::record_batch::RecordBatch;
use silt_core::{CollectEmit, ReadOptions, SourceInfo};
use silt_readers::suricata;

#[path = "suricata_support.rs"]
mod support;

/// xorshift64*: enough randomness for input generation, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

fn nonblank_lines(data: &[u8]) -> usize {
    if data.is_empty() {
        return 0;
    }
    data.strip_suffix(b"\n")
        .unwrap_or(data)
        .split(|&c| c == b'\n')
        // Zero padding where a line starts is not part of the line.
        .filter(|l| {
            !l[silt_core::decode::nul_run(l)..]
                .iter()
                .all(u8::is_ascii_whitespace)
        })
        .count()
}

/// Reads `data` and checks the invariants; returns (rows, rejects).
fn check(data: &[u8], batch_rows: usize) -> (usize, usize) {
    let (out, _) = check_out(data, batch_rows);
    (out.total_rows(), out.rejects.len())
}

/// Like [`check`]; also returns every table's batches conformed and concatenated.
fn check_out(data: &[u8], batch_rows: usize) -> (CollectEmit, Vec<(String, RecordBatch)>) {
    let mut out = CollectEmit::default();
    suricata::read(
        &mut &data[..],
        &SourceInfo::stdin(),
        &ReadOptions { batch_rows },
        &mut out,
    )
    .unwrap();
    let rows = out.total_rows();
    // Zero padding is a reject of its own besides the line's row or reject.
    let padding = out
        .rejects
        .iter()
        .filter(|r| r.reason.contains("of zero padding skipped"))
        .count();
    assert_eq!(
        rows + out.rejects.len() - padding,
        nonblank_lines(data),
        "lost lines in input {:?}",
        String::from_utf8_lossy(&data[..data.len().min(2000)])
    );
    let tables = out
        .batches
        .iter()
        .map(|(t, b)| {
            (
                t.to_string(),
                support::unified(&b.iter().collect::<Vec<_>>()),
            )
        })
        .collect();
    (out, tables)
}

#[test]
fn random_bytes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let len = rng.below(400) as usize;
        let alphabet = b"{}[]\":,0123456789.-+eE truefalsnul\\\n\r\t\xff\xc3\xa9";
        let data: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(4) == 0 {
                    rng.next() as u8
                } else {
                    *rng.pick(alphabet)
                }
            })
            .collect();
        check(&data, 3);
    }
}

fn sample_lines() -> Vec<String> {
    let text = support::corpus_dir()
        .and_then(|d| std::fs::read_to_string(d.join("surevego-eve.json")).ok());
    match text {
        Some(t) => t.lines().take(60).map(str::to_string).collect(),
        None => {
            eprintln!("corpus not found, using built-in lines");
            // 60 lines, like the corpus sample: with only two, a round can leave both intact.
            [
                r#"{"timestamp":"2017-01-30T16:12:26.985026+0100","flow_id":955054024165314,"event_type":"dns","src_ip":"172.17.0.2","dns":{"type":"query","id":13786,"rrname":"x","tx_id":0}}"#,
                r#"{"timestamp":"2017-01-30T16:12:27.008466+0100","flow_id":1800462501880023,"event_type":"flow","vlan":[1],"flow":{"start":"2017-01-30T16:12:27.008466+0100","pkts":3}}"#,
            ]
            .iter()
            .cycle()
            .take(60)
            .map(|l| l.to_string())
            .collect()
        }
    }
}

#[test]
fn truncated_and_mutated_eve_lines() {
    let lines = sample_lines();
    let mut rng = Rng(42);
    for round in 0..40 {
        let mut data = Vec::new();
        for l in &lines {
            let b = l.as_bytes();
            match rng.below(4) {
                0 => data.extend_from_slice(&b[..rng.below(b.len() as u64 + 1) as usize]),
                1 => {
                    let mut m = b.to_vec();
                    for _ in 0..1 + rng.below(3) {
                        let i = rng.below(m.len() as u64) as usize;
                        m[i] = *rng.pick(b"{}[]\":,0-9.a\\ \x00\xff");
                    }
                    data.extend_from_slice(&m);
                }
                _ => data.extend_from_slice(b),
            }
            data.push(b'\n');
        }
        let (rows, rejects) = check(&data, 1 + round % 5);
        assert!(
            rows > 0 && rejects > 0,
            "round {round}: {rows} rows, {rejects} rejects"
        );
    }
}

/// A random JSON value whose shape depends on `rng` only, so the same key meets every kind.
fn random_value(rng: &mut Rng, depth: u32) -> String {
    let k = if depth > 4 {
        rng.below(7)
    } else {
        rng.below(10)
    };
    match k {
        0 => "null".into(),
        1 => rng.pick(&["true", "false"]).to_string(),
        2 => format!("{}", rng.next() as i64 >> rng.below(64)),
        3 => format!("{}", rng.next() >> rng.below(64)),
        4 => format!("{:.3}", (rng.next() % 100_000) as f64 / 7.0),
        5 => format!(
            "\"{}\"",
            rng.pick(&[
                "a",
                "10.0.0.1",
                "2017-01-30T16:12:27+0100",
                "",
                "\\u00e9\\n"
            ])
        ),
        6 => "{}".into(),
        7 | 8 => {
            let n = rng.below(4);
            let fields: Vec<String> = (0..n)
                .map(|_| {
                    format!(
                        "\"{}\":{}",
                        rng.pick(&["a", "b", "c", "d", ""]),
                        random_value(rng, depth + 1)
                    )
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        _ => {
            let n = rng.below(4);
            let items: Vec<String> = (0..n).map(|_| random_value(rng, depth + 1)).collect();
            format!("[{}]", items.join(","))
        }
    }
}

#[test]
fn random_shapes_unify_without_loss() {
    let mut rng = Rng(7);
    for round in 0..60 {
        let mut data = String::new();
        for _ in 0..40 {
            let et = rng.pick(&["flow", "alert", "dns"]);
            let mut fields = vec![
                format!(
                    "\"timestamp\":{}",
                    rng.pick(&[
                        "\"2020-01-01T00:00:00Z\"",
                        "\"2020-01-01T01:00:00+0100\"",
                        "\"bad\"",
                        "null",
                        "{}"
                    ])
                ),
                format!("\"event_type\":\"{et}\""),
            ];
            // (No hinted time paths below the top level, so that every value round-trips.)
            for key in ["x", "y", "fl", "tls", "vlan", "src_ip"] {
                if rng.below(3) > 0 {
                    fields.push(format!("\"{key}\":{}", random_value(&mut rng, 0)));
                }
            }
            data.push_str(&format!("{{{}}}\n", fields.join(",")));
        }
        let (out, tables) = check_out(data.as_bytes(), 1 + round % 7);
        assert_eq!((out.total_rows(), out.rejects.len()), (40, 0));
        // Every value survives, by the unification rules, in its table's final schema.
        for (table, all) in &tables {
            let want: Vec<serde_json::Value> = data
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .filter(|v| format!("suricata.{}", v["event_type"].as_str().unwrap()) == *table)
                .collect();
            let got = support::rows_as_json(all);
            assert_eq!(want.len(), got.len());
            for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                if let Err(e) = support::same_row(w, g) {
                    panic!("round {round} {table} row {i}: {e}\ninput {w}\noutput {g}");
                }
            }
        }
    }
}

#[test]
fn deep_nesting_and_long_lines() {
    let mut data = Vec::new();
    data.extend_from_slice(
        format!(
            "{{\"event_type\":\"x\",\"a\":{}1{}}}\n",
            "[".repeat(5000),
            "]".repeat(5000)
        )
        .as_bytes(),
    );
    data.extend_from_slice(
        format!(
            "{{\"event_type\":\"x\",\"a\":{}1{}}}\n",
            "[".repeat(100),
            "]".repeat(100)
        )
        .as_bytes(),
    );
    data.extend_from_slice(
        format!(
            "{{\"event_type\":\"x\",\"s\":\"{}\"}}\n",
            "y".repeat(3 << 20)
        )
        .as_bytes(),
    );
    assert_eq!(check(&data, 2), (2, 1));
}
