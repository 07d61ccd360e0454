//! `silt import auto`'s detection on every format silt reads: the real corpus files (each
//! directory has the format its PROVENANCE says) and generated or hand-written inputs of every
//! kind, seen through the same probe the file source builds (the first 64 KiB after gzip is
//! undone, and the file name).

use std::io::Read;
use std::path::{Path, PathBuf};

use silt_core::format::{Probe, PROBE_BYTES};
use silt_ingest::registry;

/// The probe bytes of a file: its first 64 KiB, gunzipped when it is gzip.
fn head(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    if raw.starts_with(&[0x1f, 0x8b]) {
        flate2::read::MultiGzDecoder::new(&raw[..])
            .take(PROBE_BYTES as u64)
            .read_to_end(&mut out)
            .unwrap();
    } else {
        out = raw[..raw.len().min(PROBE_BYTES)].to_vec();
    }
    out
}

fn detected(head: &[u8], name: &str) -> Option<&'static str> {
    registry::detect(&Probe {
        head,
        file_name: Some(name),
    })
    .map(|d| d.format.name)
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(|c: char| c == '.' || c.is_ascii_uppercase())
            {
                // PROVENANCE.md / README.md / .hidden are not data.
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every corpus file of a directory must be detected as `want`, except the listed ones
/// (`(file name, expected)`, where `None` means "no format": not data silt can tell).
fn check_dir(rel: &str, want: &str, except: &[(&str, Option<&str>)]) -> usize {
    let Some(dir) = silt_testkit::corpus_path(rel) else {
        return 0;
    };
    let mut wrong = Vec::new();
    let mut n = 0;
    for f in files(&dir) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let h = head(&f);
        if h.iter().all(|b| b.is_ascii_whitespace()) {
            continue; // empty inputs are "nothing to import", whatever the format
        }
        let expect = except
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, e)| *e)
            .unwrap_or(Some(want));
        let got = detected(&h, &name);
        n += 1;
        if got != expect {
            wrong.push(format!(
                "{}: detected {got:?}, expected {expect:?}",
                f.display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{rel}:\n{}", wrong.join("\n"));
    n
}

#[test]
fn corpus_zeek_tsv() {
    let n = check_dir("zeek-tsv", "zeek", &[]);
    eprintln!("zeek-tsv: {n} files");
}

#[test]
fn corpus_zeek_json() {
    check_dir("zeek-json/zed-sample-data", "zeek", &[]);
    let Some(dir) = silt_testkit::corpus_path("zeek-json") else {
        return;
    };
    for f in [
        "vast-conn.log.json.gz",
        "vast-weird.log.json.gz",
        "vast-zeek.json",
    ] {
        assert_eq!(detected(&head(&dir.join(f)), f), Some("zeek"), "{f}");
    }
    // zeek-baselines are Zeek's own test baselines: canonified timestamps
    // (`"ts":XXXXXXXXXX.XXXXXX`, not JSON) and records without any Zeek field (`{"d":2.0}`).
    // Whatever they are taken for, detection must not fail on them.
    for f in files(&dir.join("zeek-baselines")) {
        let _ = detected(&head(&f), &f.file_name().unwrap().to_string_lossy());
    }
}

#[test]
fn corpus_suricata() {
    check_dir(
        "suricata",
        "suricata",
        // surevego-eve_broken.json starts with a line of junk: the sniffer looks past it.
        &[],
    );
}

#[test]
fn corpus_pcap() {
    check_dir("pcap", "pcap", &[]);
}

#[test]
fn corpus_access_logs() {
    let Some(dir) = silt_testkit::corpus_path("weblogs") else {
        return;
    };
    for (file, want) in [
        ("lnav-access_log.0", Some("access")),
        ("lnav-access_log.1", Some("access")),
        ("lnav-shop_access_log.0", Some("access")),
        ("lnav-syslog_with_access_log.0", Some("syslog")),
    ] {
        let p = dir.join(file);
        assert_eq!(detected(&head(&p), file), want, "{}", p.display());
    }
}

#[test]
fn corpus_docker_json_file() {
    check_dir(
        "weblogs/docker-json-file",
        "docker",
        // fluent-bit's "invalid" sample starts with a line that is not JSON.
        &[],
    );
}

fn gen_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn generated_zeek_eve_pcap_and_weblogs() {
    let d = gen_dir();
    let z = silt_gen::generate_zeek(&d.path().join("zeek"), 2000, &Default::default()).unwrap();
    for f in &z.files {
        let name = f.path.file_name().unwrap().to_string_lossy().to_string();
        assert_eq!(detected(&head(&f.path), &name), Some("zeek"), "{name}");
    }
    let s = silt_gen::generate_suricata(&d.path().join("eve"), 500, &Default::default()).unwrap();
    for f in &s.files {
        assert_eq!(detected(&head(&f.path), "eve.json"), Some("suricata"));
    }
    for pcapng in [false, true] {
        let p = d.path().join(if pcapng { "t.pcapng" } else { "t.pcap" });
        silt_gen::pcap::generate_pcap(
            &p,
            &silt_gen::pcap::PcapOptions {
                packets: Some(200),
                pcapng,
                ..Default::default()
            },
        )
        .unwrap();
        // The content decides, not the name.
        assert_eq!(
            detected(&head(&p), "capture.bin"),
            Some("pcap"),
            "pcapng={pcapng}"
        );
    }
    for (fmt, want) in [
        (silt_gen::weblog::WeblogFormat::Msgpack, "msgpack"),
        (silt_gen::weblog::WeblogFormat::Ndjson, "json"),
    ] {
        let mut buf = Vec::new();
        silt_gen::weblog::write_docker_nginx(
            &mut buf,
            fmt,
            &silt_gen::weblog::WeblogOptions {
                records: Some(300),
                ..Default::default()
            },
        )
        .unwrap();
        let h = &buf[..buf.len().min(PROBE_BYTES)];
        assert_eq!(detected(h, "fluentd.buffer"), Some(want), "{fmt:?}");
    }
}

#[test]
fn handwritten_inputs_of_every_other_format() {
    let cases: &[(&str, &[u8], Option<&str>)] = &[
        (
            "zeek json",
            b"{\"_path\":\"conn\",\"ts\":1521911721.5,\"uid\":\"C1\",\"id.orig_h\":\"10.0.0.1\"}\n",
            Some("zeek"),
        ),
        (
            "zeek json without _path",
            b"{\"ts\":\"2018-03-24T17:15:21.5Z\",\"uid\":\"C1\",\"id.orig_h\":\"10.0.0.1\"}\n",
            Some("zeek"),
        ),
        (
            "eve",
            b"{\"timestamp\":\"2024-03-24T17:00:00.000000+0000\",\"event_type\":\"dns\",\"src_ip\":\"10.0.0.1\"}\n",
            Some("suricata"),
        ),
        (
            "docker json-file",
            b"{\"log\":\"hello\\n\",\"stream\":\"stdout\",\"time\":\"2024-03-24T17:00:00.123456789Z\"}\n",
            Some("docker"),
        ),
        (
            "generic json",
            b"{\"level\":\"info\",\"msg\":\"started\",\"at\":1711300000}\n{\"level\":\"warn\"}\n",
            Some("json"),
        ),
        (
            "nginx combined",
            b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612 \"-\" \"curl/8.0\"\n",
            Some("access"),
        ),
        (
            "common log format",
            b"10.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326\n",
            Some("access"),
        ),
        (
            "syslog rfc3164",
            b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8\n",
            Some("syslog"),
        ),
        (
            "syslog rfc5424",
            b"<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut=\"3\"] An application event\n",
            Some("syslog"),
        ),
        (
            "syslog file without PRI",
            b"Mar 24 17:00:00 host sshd[123]: Accepted publickey for root\n",
            Some("syslog"),
        ),
        (
            "ltsv",
            b"time:2024-03-24T17:00:00Z\thost:10.0.0.1\treq:GET / HTTP/1.1\tstatus:200\n",
            Some("ltsv"),
        ),
        (
            "csv",
            b"ts,host,bytes\n2024-03-24T17:00:00Z,10.0.0.1,12\n2024-03-24T17:00:01Z,10.0.0.2,13\n",
            Some("csv"),
        ),
        (
            "tsv",
            b"time\thost\tbytes\n2024-03-24T17:00:00Z\t10.0.0.1\t12\n2024-03-24T17:00:01Z\t10.0.0.2\t13\n",
            Some("tsv"),
        ),
        ("elf binary", b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00", None),
        ("prose", b"Hello, this is just some text.\nNothing to see here.\n", None),
    ];
    let mut wrong = Vec::new();
    for (what, bytes, want) in cases {
        let got = detected(bytes, "input");
        if got != *want {
            wrong.push(format!("{what}: detected {got:?}, expected {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_avro_object_container_file() {
    let schema = apache_avro::Schema::parse_str(
        r#"{"type":"record","name":"r","fields":[{"name":"host","type":"string"},{"name":"n","type":"long"}]}"#,
    )
    .unwrap();
    let mut w = apache_avro::Writer::new(&schema, Vec::new()).unwrap();
    for i in 0..100i64 {
        let mut r = apache_avro::types::Record::new(&schema).unwrap();
        r.put("host", format!("10.0.0.{}", i % 7));
        r.put("n", i);
        w.append_value(r).unwrap();
    }
    let bytes = w.into_inner().unwrap();
    assert_eq!(detected(&bytes, "events.bin"), Some("avro"));
}

#[test]
fn msgpack_needs_a_whole_map_with_string_keys() {
    // fixmap of one entry "a" => 1, then junk: a map, so msgpack.
    assert_eq!(
        detected(b"\x81\xa1a\x01\x81\xa1b\x02", "x"),
        Some("msgpack")
    );
    // A map marker followed by garbage is not MessagePack.
    assert_eq!(detected(b"\x8f\xff\xff\xff\x00\x01", "x"), None);
}
