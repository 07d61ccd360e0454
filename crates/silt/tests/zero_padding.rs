//! Zero padding in text logs (`silt_core::decode`'s padding rule): a log truncated by logrotate's
//! `copytruncate` while its writer kept its offset starts with a hole of NUL bytes as long as the
//! file was, and a crash can leave a block of them before the next line. Every text format
//! imports such a file as it imports the same file without the padding (the same rows, with the
//! same values), and reports each run of NUL bytes as one reject of the line after it; before,
//! the file was refused whole for the NUL bytes in its first line.

mod common;

use std::path::Path;

use common::{p, query_csv, silt};
use serde_json::Value;

/// One input of each text format: lines, and how many of them come before the mid-file hole.
const INPUTS: &[(&str, &str, &[&str], usize)] = &[
    (
        "zeek",
        "conn.log",
        &[
            "#separator \\x09",
            "#set_separator\t,",
            "#empty_field\t(empty)",
            "#unset_field\t-",
            "#path\tconn",
            "#fields\tts\tuid\tid.orig_h\tid.orig_p\tid.resp_h\tid.resp_p\tproto",
            "#types\ttime\tstring\taddr\tport\taddr\tport\tenum",
            "1711299600.000001\tCa1\t10.0.0.1\t40000\t10.0.0.2\t53\tudp",
            "1711299601.000002\tCa2\t10.0.0.1\t40001\t10.0.0.3\t80\ttcp",
            "1711299602.000003\tCa3\t10.0.0.4\t40002\t10.0.0.2\t443\ttcp",
        ],
        8,
    ),
    (
        "suricata",
        "eve.json",
        &[
            r#"{"timestamp":"2024-03-24T17:00:00.000001+0000","event_type":"dns","src_ip":"10.0.0.1","dest_ip":"10.0.0.2","proto":"UDP"}"#,
            r#"{"timestamp":"2024-03-24T17:00:01.000001+0000","event_type":"dns","src_ip":"10.0.0.1","dest_ip":"10.0.0.3","proto":"UDP"}"#,
            r#"{"timestamp":"2024-03-24T17:00:02.000001+0000","event_type":"dns","src_ip":"10.0.0.4","dest_ip":"10.0.0.2","proto":"UDP"}"#,
        ],
        1,
    ),
    (
        "json",
        "app.json",
        &[
            r#"{"time":"2024-03-24T17:00:00Z","user":"a","n":1}"#,
            r#"{"time":"2024-03-24T17:00:01Z","user":"b","n":2}"#,
            r#"{"time":"2024-03-24T17:00:02Z","user":"c","n":3}"#,
        ],
        2,
    ),
    (
        "csv",
        "app.csv",
        &[
            "time,user,n",
            "2024-03-24T17:00:00Z,a,1",
            "2024-03-24T17:00:01Z,b,2",
            "2024-03-24T17:00:02Z,c,3",
        ],
        2,
    ),
    (
        "tsv",
        "app.tsv",
        &[
            "time\tuser\tn",
            "2024-03-24T17:00:00Z\ta\t1",
            "2024-03-24T17:00:01Z\tb\t2",
            "2024-03-24T17:00:02Z\tc\t3",
        ],
        2,
    ),
    (
        "ltsv",
        "app.ltsv",
        &[
            "time:2024-03-24T17:00:00Z\tuser:a\tn:1",
            "time:2024-03-24T17:00:01Z\tuser:b\tn:2",
            "time:2024-03-24T17:00:02Z\tuser:c\tn:3",
        ],
        1,
    ),
    (
        "syslog",
        "messages",
        &[
            "<34>1 2024-03-24T17:00:00Z host1 app 12 ID1 - first message",
            "<34>1 2024-03-24T17:00:01Z host1 app 12 ID1 - second message",
            "<34>1 2024-03-24T17:00:02Z host2 app 13 ID2 - third message",
        ],
        2,
    ),
    (
        "access",
        "access.log",
        &[
            r#"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.0""#,
            r#"10.0.0.2 - - [24/Mar/2024:17:00:01 +0000] "GET /a HTTP/1.1" 404 10 "-" "curl/8.0""#,
            r#"10.0.0.3 - - [24/Mar/2024:17:00:02 +0000] "POST /b HTTP/1.1" 201 5 "-" "curl/8.0""#,
        ],
        1,
    ),
    (
        "docker",
        "c-json.log",
        &[
            r#"{"log":"first\n","stream":"stdout","time":"2024-03-24T17:00:00.000000001Z"}"#,
            r#"{"log":"second\n","stream":"stderr","time":"2024-03-24T17:00:01.000000001Z"}"#,
            r#"{"log":"third\n","stream":"stdout","time":"2024-03-24T17:00:02.000000001Z"}"#,
        ],
        2,
    ),
];

/// More than the 64 KiB detection looks at, so the hole alone fills the probe.
const LEADING: usize = 70_000;
const MIDDLE: usize = 4096;
const TRAILING: usize = 7;

/// Imports `file` as `format` into a new lake `lake`; returns the exit code and stdout.
fn import(format: &str, file: &Path, lake: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["import", format, p(file), "--lake", p(lake), "-q"];
    args.extend(extra);
    let o = silt(&args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    )
}

/// Every table of the lake, each with its rows as sorted CSV lines.
fn contents(lake: &Path) -> Vec<(String, Vec<String>)> {
    let out = common::ok(&["tables", "--lake", p(lake), "--json"]);
    let tables: Value = serde_json::from_str(&out).unwrap();
    let mut all = Vec::new();
    for t in tables.as_array().unwrap() {
        let name = t["table"].as_str().unwrap().to_string();
        let csv = query_csv(lake, &format!("SELECT * FROM {name}"));
        let mut rows: Vec<String> = csv.lines().map(str::to_string).collect();
        rows.sort();
        all.push((name, rows));
    }
    all.sort();
    all
}

/// The rejects the lake keeps (`_rejects/*/*`): (line, reason).
fn rejects(lake: &Path) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = common::lake_rejects(lake)
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().unwrap(),
                r["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn padded_text_logs_import_like_unpadded_ones() {
    let t = tempfile::tempdir().unwrap();
    for &(format, name, lines, before) in INPUTS {
        let dir = t.path().join(format);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(name);
        let plain = lines.join("\n") + "\n";
        std::fs::write(&file, &plain).unwrap();
        let clean = dir.join("clean");
        let (code, said) = import(format, &file, &clean, &["--strict"]);
        assert_eq!(code, 0, "{format}: {said}");
        let want = contents(&clean);
        let rows: usize = want.iter().map(|(_, r)| r.len() - 1).sum();
        assert_eq!(
            rows,
            lines.len()
                - if format == "zeek" {
                    7
                } else if matches!(format, "csv" | "tsv") {
                    1
                } else {
                    0
                },
            "{format}: {want:?}"
        );

        let mut padded = vec![0u8; LEADING];
        padded.extend_from_slice((lines[..before].join("\n") + "\n").as_bytes());
        padded.extend(std::iter::repeat_n(0u8, MIDDLE));
        padded.extend_from_slice((lines[before..].join("\n") + "\n").as_bytes());
        padded.extend(std::iter::repeat_n(0u8, TRAILING));
        std::fs::write(&file, &padded).unwrap();
        let n = lines.len() as u64;
        for given in [format, "auto"] {
            let lake = dir.join(format!("padded-{given}"));
            let (code, said) = import(given, &file, &lake, &[]);
            assert_eq!(code, 0, "{format} as {given}: {said}");
            assert_eq!(contents(&lake), want, "{format} as {given}");
            let got = rejects(&lake);
            let lines_and_bytes: Vec<(u64, &str)> = got
                .iter()
                .map(|(l, r)| (*l, r.split(' ').next().unwrap()))
                .collect();
            assert_eq!(
                lines_and_bytes,
                vec![(1, "70000"), (before as u64 + 1, "4096"), (n + 1, "7")],
                "{format} as {given}: {got:?}"
            );
            assert!(
                got.iter()
                    .all(|(_, r)| r.contains("NUL bytes of zero padding")),
                "{got:?}"
            );
        }
        // Padding is bad input all the same: --strict says so.
        let (code, said) = import(format, &file, &dir.join("strict"), &["--strict"]);
        assert_eq!(code, 2, "{format}: {said}");
    }
}

/// Padding after a blank first line (or after a line end at the start) is padding too, not
/// binary data; a binary file is still refused.
#[test]
fn padding_after_a_blank_first_line_is_no_binary_input() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("app.json");
    let mut data = b"\n".to_vec();
    data.extend(std::iter::repeat_n(0u8, 5));
    data.extend_from_slice(b"{\"a\":1}\n{\"a\":2}\n");
    std::fs::write(&file, &data).unwrap();
    for given in ["json", "auto"] {
        let lake = t.path().join(format!("lake-{given}"));
        let (code, said) = import(given, &file, &lake, &[]);
        assert_eq!(code, 0, "{given}: {said}");
        assert_eq!(contents(&lake)[0].1.len(), 3, "{given}: header and 2 rows");
        let got = rejects(&lake);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 2, "{got:?}");
    }
    let (code, said) = import("json", Path::new("/bin/ls"), &t.path().join("ls"), &[]);
    assert_eq!(code, 4, "{said}");
    assert!(said.contains("NUL byte"), "{said}");
}
