//! Flow export and enrichment through the CLI, on the corpus: `silt import sflow|netflow` of
//! Akvorado's captures (a template capture serving the data capture after it), `--enrich
//! asn,geo,rdns` with MaxMind's test databases and an index built by `silt index rdns`, the
//! SQL functions asn(), as_org(), geo_country(), geo_city(), rdns() in `silt query`, and the
//! errors a user gets for a bad database or a function without its database.

mod common;

use common::{ok, p, silt};

fn rows(lake: &std::path::Path, extra: &[&str], sql: &str) -> Vec<serde_json::Value> {
    let mut args = vec!["query", "--lake", p(lake), "--format", "ndjson"];
    args.extend_from_slice(extra);
    args.push(sql);
    ok(&args)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn flows_enriched_and_looked_up() {
    let Some(corpus) = silt_testkit::corpus() else {
        return;
    };
    let nf = corpus.join("flows/akvorado/netflow");
    let sf = corpus.join("flows/akvorado/sflow");
    let mm = corpus.join("mmdb");
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");

    // A reverse-DNS index from CSV: a header, a bad line (kept in the rejects file), a repeat.
    let csv = dir.path().join("rdns.csv");
    std::fs::write(
        &csv,
        "ip,name\n81.2.69.142,host.example.gb\n2a0c:8880:2:0:185:21:130:38,src.example.net\nnot a line\n81.2.69.142,second.example\n",
    )
    .unwrap();
    let idx = dir.path().join("rdns.idx");
    let out = ok(&["index", "rdns", p(&csv), "-o", p(&idx)]);
    assert!(out.contains("2 addresses"), "{out}");
    assert!(
        out.contains("1 duplicates") && out.contains("1 rejects"),
        "{out}"
    );
    let rejects = std::fs::read_to_string(dir.path().join("rdns.idx.rejects")).unwrap();
    assert!(rejects.contains("not a line"), "{rejects}");
    let strict = silt(&["index", "rdns", p(&csv), "-o", p(&idx), "--strict"]);
    assert_eq!(strict.status.code(), Some(2));

    // NetFlow v9: the template capture first, then its data; v5 alone.
    let o = ok(&[
        "import",
        "netflow",
        p(&nf.join("template.pcap")),
        p(&nf.join("data.pcap")),
        p(&nf.join("nfv5.pcap")),
        "--lake",
        p(&lake),
        "--allow-empty",
    ]);
    assert!(o.contains("33 events"), "{o}");
    let r = rows(
        &lake,
        &[],
        "SELECT version, count(*) AS n, sum(bytes) AS bytes FROM netflow.flow GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(r[0]["version"], 5);
    assert_eq!(r[0]["n"], 29);
    assert_eq!(r[1]["version"], 9);
    assert_eq!(r[1]["n"], 4);

    // sFlow with enrichment: src/dst get asn, as_org, country, city and rdns columns.
    let sflow: Vec<String> = std::fs::read_dir(&sf)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    let mut args = vec!["import", "sflow"];
    args.extend(sflow.iter().map(String::as_str));
    let asn = mm.join("GeoLite2-ASN-Test.mmdb");
    let city = mm.join("GeoLite2-City-Test.mmdb");
    args.extend_from_slice(&[
        "--lake",
        p(&lake),
        "--enrich",
        "asn,geo,rdns",
        "--mmdb",
        p(&asn),
        "--mmdb",
        p(&city),
        "--rdns",
        p(&idx),
    ]);
    let o = ok(&args);
    assert!(o.contains("14 events"), "{o}");
    let r = rows(
        &lake,
        &[],
        "SELECT src, src_rdns, src_asn, dst, dst_country FROM sflow.sample WHERE src = '2a0c:8880:2:0:185:21:130:38' LIMIT 1",
    );
    assert_eq!(r[0]["src_rdns"], "src.example.net", "{r:?}");
    let cols = rows(
        &lake,
        &[],
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'sample' ORDER BY ordinal_position",
    );
    let names: Vec<&str> = cols
        .iter()
        .map(|c| c["column_name"].as_str().unwrap())
        .collect();
    let at = names.iter().position(|c| *c == "src").unwrap();
    assert_eq!(
        &names[at..at + 6],
        [
            "src",
            "src_asn",
            "src_as_org",
            "src_country",
            "src_city",
            "src_rdns"
        ]
    );

    // The same lookups after the fact, in SQL.
    let r = rows(
        &lake,
        &["--mmdb", p(&asn), "--mmdb", p(&city), "--rdns", p(&idx)],
        "SELECT asn('1.128.0.1') AS a, as_org('1.128.0.1') AS o, geo_country('81.2.69.142') AS c, \
         geo_city('81.2.69.142') AS ci, rdns('::ffff:81.2.69.142') AS r, rdns('10.9.9.9') AS none, \
         asn('not an address') AS bad",
    );
    assert_eq!(r[0]["a"], 1221);
    assert_eq!(r[0]["o"], "Telstra Pty Ltd");
    assert_eq!(r[0]["c"], "GB");
    assert_eq!(r[0]["ci"], "London");
    assert_eq!(r[0]["r"], "host.example.gb");
    assert!(r[0]["none"].is_null() && r[0]["bad"].is_null(), "{r:?}");

    // A function without its database says which option to add.
    let o = silt(&["query", "--lake", p(&lake), "SELECT rdns('1.1.1.1')"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("rdns() needs a reverse-DNS index: --rdns"),
        "{e}"
    );

    // Bad databases fail at start, naming the file.
    for bad in std::fs::read_dir(mm.join("bad")).unwrap() {
        let bad = bad.unwrap().path();
        if bad.extension().is_none_or(|e| e != "mmdb") {
            continue;
        }
        let o = silt(&["query", "--lake", p(&lake), "--mmdb", p(&bad), "SELECT 1"]);
        assert!(!o.status.success(), "{} accepted", bad.display());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains(bad.file_name().unwrap().to_str().unwrap()),
            "{e}"
        );
    }
    let o = silt(&["query", "--lake", p(&lake), "--rdns", p(&csv), "SELECT 1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("silt index rdns"));
    // --enrich without databases, databases without --enrich: refused before reading input.
    let o = silt(&[
        "import",
        "sflow",
        &sflow[0],
        "--lake",
        p(&lake),
        "--enrich",
        "asn",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs databases"));
    let o = silt(&[
        "import",
        "sflow",
        &sflow[0],
        "--lake",
        p(&lake),
        "--mmdb",
        p(&asn),
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("databases of --enrich"));
}

/// `silt generate sflow` makes what `silt import sflow` reads completely (every flow sample with
/// its sampled packet decoded), and `silt generate rdns` what `silt index rdns` builds from.
#[test]
fn generated_sflow_and_rdns_feed_the_importer_and_the_index() {
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("s.pcap");
    let out = ok(&["generate", "sflow", "--events", "3000", "-o", p(&cap)]);
    assert!(out.contains("3000 flow samples"), "{out}");
    let lake = d.path().join("lake");
    ok(&[
        "import",
        "sflow",
        p(&cap),
        "--lake",
        p(&lake),
        "-q",
        "--strict",
    ]);
    let r = rows(
        &lake,
        &[],
        "SELECT count(*) AS n, count(DISTINCT agent) AS agents, min(sampling_rate) AS rate, \
         count(src) AS with_src, count(community_id) AS with_cid, count(decode_error) AS errors \
         FROM sflow.sample",
    );
    assert_eq!(r[0]["n"], 3000);
    assert_eq!(r[0]["agents"], 4);
    assert_eq!(r[0]["rate"], 1000);
    assert_eq!(r[0]["with_src"], 3000, "every sampled header decoded");
    assert_eq!(r[0]["with_cid"], 3000);
    assert_eq!(r[0]["errors"], 0);
    let c = rows(&lake, &[], "SELECT count(*) AS n FROM sflow.counter");
    assert!(c[0]["n"].as_i64().unwrap() > 0);

    let csv = d.path().join("r.csv.gz");
    let out = ok(&["generate", "rdns", "--events", "20000", "-o", p(&csv)]);
    assert!(out.contains("20000 rows"), "{out}");
    let idx = d.path().join("r.idx");
    ok(&["index", "rdns", p(&csv), "-o", p(&idx), "--strict"]);
    let text = String::from_utf8(
        std::process::Command::new("gzip")
            .arg("-dc")
            .arg(&csv)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let (ip, name) = text.lines().next().unwrap().split_once(',').unwrap();
    let q = rows(
        &lake,
        &["--rdns", p(&idx)],
        &format!("SELECT rdns('{ip}') AS name"),
    );
    assert_eq!(q[0]["name"], name);
}

/// `silt serve --enrich asn --enrich-table …`: SIGHUP opens the databases again while a client
/// keeps sending with acknowledgements. Rows decoded before the reload carry the old AS, rows after it the
/// new one, and the SQL functions answer from the new set; a reload that cannot open its files
/// is refused and the old set stays. Ingest never stops: every acknowledged event is in the lake
/// once, enriched. A table with an enrichment of its own gets only that, from the same (reloaded)
/// databases.
#[test]
fn enrichment_databases_reload_at_sighup_while_ingest_goes_on() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    let ranges = d.path().join("asn.csv");
    // 10.0.0.0/8 as integer ranges (RASP's `ipIntStart,ipIntEnd,AS name`), replaced by rename.
    let write_ranges = |org: &str| {
        let tmp = d.path().join("asn.csv.new");
        std::fs::write(
            &tmp,
            format!("ipIntStart,ipIntEnd,AS name\n167772160,184549375,{org}\n"),
        )
        .unwrap();
        std::fs::rename(&tmp, &ranges).unwrap();
    };
    write_ranges("AS100 First Org");
    let (log_tx, log_rx) = std::sync::mpsc::channel();
    let (mut child, addr) = common::serve(
        &lake,
        &[
            "--flush-age",
            "200ms",
            "--enrich",
            "asn",
            "--enrich-columns",
            "src_ip",
            "--ip-ranges",
            p(&ranges),
            // A table of its own enrichment instead of --enrich's, on the same databases.
            "--enrich-table",
            "app.peers=asn:peer_ip",
        ],
        Some(log_tx),
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    // A client sends 20-event batches, each acknowledged before the next.
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (acked, stop, addr, agent) = (acked.clone(), stop.clone(), addr.clone(), agent.clone());
        std::thread::spawn(move || {
            let mut b = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let body: String = (0..20)
                    .map(|j| format!("{{\"id\":{},\"src_ip\":\"10.1.2.3\"}}\n", b * 20 + j))
                    .collect();
                let r = agent
                    .post(&format!("{addr}/v1/ingest/app.events"))
                    .header("Content-Type", "application/x-ndjson")
                    .send(body.as_bytes())
                    .unwrap();
                assert_eq!(r.status().as_u16(), 200, "ingest refused during a reload");
                b += 1;
                acked.store(b * 20, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let query = |sql: &str| -> Vec<serde_json::Value> {
        let mut r = agent
            .post(&format!("{addr}/v1/query?format=ndjson"))
            .send(sql)
            .unwrap();
        let text = r.body_mut().read_to_string().unwrap();
        assert_eq!(r.status().as_u16(), 200, "{sql}: {text}");
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let t0 = Instant::now();
        while !done() {
            assert!(t0.elapsed() < Duration::from_secs(30), "timed out: {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let reloads = |name: &str| common::metric(&agent, &addr, name);
    wait_for("rows before the reload", &|| {
        acked.load(Ordering::Relaxed) >= 200
    });
    write_ranges("AS200 Second Org");
    common::signal(&child, "-HUP");
    wait_for("the reload", &|| reloads("silt_enrich_reloads_total") == 1);
    let at_reload = acked.load(Ordering::Relaxed);
    wait_for("rows after the reload", &|| {
        acked.load(Ordering::Relaxed) >= at_reload + 200
    });
    // The table with its own enrichment: only its column, and the reloaded set.
    let r = agent
        .post(&format!("{addr}/v1/ingest/app.peers"))
        .header("Content-Type", "application/x-ndjson")
        .send(&b"{\"peer_ip\":\"10.9.9.9\",\"src_ip\":\"10.1.2.3\"}\n"[..])
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    wait_for("app.peers", &|| {
        agent
            .post(&format!("{addr}/v1/query?format=csv"))
            .send("SELECT count(*) FROM app.peers")
            .is_ok_and(|mut r| {
                r.body_mut()
                    .read_to_string()
                    .unwrap_or_default()
                    .ends_with("1\n")
            })
    });
    let peers = query("SELECT * FROM app.peers");
    assert_eq!(peers[0]["peer_asn"], 200, "{peers:?}");
    assert_eq!(peers[0]["peer_as_org"], "Second Org", "{peers:?}");
    assert!(peers[0].get("src_asn").is_none(), "{peers:?}");
    // The file is gone for a moment: that reload is refused, the second set stays.
    std::fs::remove_file(&ranges).unwrap();
    common::signal(&child, "-HUP");
    wait_for("the refused reload", &|| {
        reloads("silt_enrich_reload_failures_total") == 1
    });
    let at_refusal = acked.load(Ordering::Relaxed);
    wait_for("rows after the refusal", &|| {
        acked.load(Ordering::Relaxed) >= at_refusal + 100
    });
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    let n = acked.load(Ordering::Relaxed) as u64;
    let asn = query(
        "SELECT src_asn, src_as_org, count(*) AS n, count(DISTINCT id) AS d, min(id) AS lo, max(id) AS hi \
         FROM app.events GROUP BY src_asn, src_as_org ORDER BY lo",
    );
    assert_eq!(asn.len(), 2, "{asn:?}");
    assert_eq!(
        (&asn[0]["src_asn"], &asn[0]["src_as_org"]),
        (&serde_json::json!(100), &serde_json::json!("First Org"))
    );
    assert_eq!(
        (&asn[1]["src_asn"], &asn[1]["src_as_org"]),
        (&serde_json::json!(200), &serde_json::json!("Second Org"))
    );
    // The old set served everything before the reload, the new one everything after: no row
    // without its AS, none twice, none lost.
    let count = |i: usize, k: &str| asn[i][k].as_u64().unwrap();
    assert_eq!(count(0, "n") + count(1, "n"), n);
    assert_eq!(count(0, "d") + count(1, "d"), n);
    assert_eq!(count(0, "hi") + 1, count(1, "lo"));
    assert!(count(0, "hi") + 1 >= 200 && count(0, "hi") < at_reload as u64 + 200);
    let f = query("SELECT asn('10.1.2.3') AS a, as_org('10.1.2.3') AS o");
    assert_eq!(f[0]["a"], 200);
    assert_eq!(f[0]["o"], "Second Org");
    common::terminate(&mut child);
    let log: Vec<String> = log_rx.try_iter().collect();
    assert!(
        log.iter()
            .any(|l| l.contains("SIGHUP: enrichment databases reloaded")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains("not reloaded, the old ones stay") && l.contains("asn.csv")),
        "{log:?}"
    );
}
