#!/usr/bin/env python3
"""The RASP pipeline as a benchmark (issue 23): sFlow samples enriched with ASN, geo and reverse
DNS at import, against the same lookups as a DuckDB join, then RASP's queries.

  bench/rasp.sh [--rdns-rows 200000000] [--samples 10000000] [--reps 3] [--from-pcap TRACE.pcap]

1. `silt generate rdns` (Rapid7-shaped ip,name rows) plus one PTR-shaped row per distinct
   address of the capture (real traffic's addresses mostly have PTR records), and `silt index
   rdns`: build wall time, peak RSS of that process (wait4), index bytes against the gzip'd CSV.
2. `silt generate sflow` (sFlow v5 datagrams of sampled packets, pcap; with --from-pcap the
   packets of a real-derived capture, e.g. bench/pcap.sh's repeated browsing trace), then `silt import sflow`
   twice into fresh lakes: without enrichment, and with `--enrich asn,geo,rdns` (the corpus's
   MaxMind test databases for ASN and City, the index of 1.). events/s of each, and what the
   enrichment costs. The page cache is dropped before each import when this runs as root
   (`/proc/sys/vm/drop_caches`); the report says whether it was.
3. The same reverse-DNS lookups as a DuckDB join: the rows of the unenriched lake joined on src
   and dst with the rdns table in Parquet, written to Parquet; lookups/s and bytes on disk
   (index vs Parquet table).
4. RASP's queries over the enriched rows: count in a time window, top-10 AS pairs by sampled
   packets, top-10 reverse-DNS pairs; silt (`silt query` process wall time, start-up included)
   and DuckDB (in-process, a glob over the same files), median of --reps, ratios silt/DuckDB.
5. Embedded key-value stores holding the same pairs (RocksDB, and redb where its file fits on
   disk; through the silt-rdns example `rdns-bench --index --lookups --kv`): the index's pairs
   loaded into each, then the first 2,000,000 of the capture's lookups (each sample's src and dst,
   in time order) against the index and against each store, cold (pages dropped first) and warm:
   lookups/s (single and batched), hits and bytes on disk.
"""
import argparse, json, os, re, shutil, statistics, subprocess, sys, tempfile, time
from peak_rss import child_peak


def timed(cmd, env=None):
    """Runs cmd; returns (stdout, wall seconds, peak RSS bytes) of that very process."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = b"", b""
    _, status, ru = os.wait4(p.pid, 0)
    out = p.stdout.read()
    err = p.stderr.read()
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed: {err.decode()[-2000:]}")
    return out.decode() + err.decode(), wall, child_peak(ru, cmd)


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def duck(py, sql, fetch=True):
    code = ("import duckdb, time, sys, json\n"
            "c = duckdb.connect()\n"
            "c.execute('SET threads = 2')\n"
            "c.execute('SET enable_progress_bar = false')\n"
            "t = time.perf_counter()\n"
            "r = c.execute(sys.argv[1]).fetchall()\n"
            "print(json.dumps([time.perf_counter() - t, [[str(x) for x in row] for row in r]]))\n")
    out = subprocess.run([py, "-c", code, sql], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"duckdb failed: {out.stderr[-2000:]}\n{sql}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--silt", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--rdns-bench", required=True, help="the silt-rdns example rdns-bench (release build)")
    ap.add_argument("--kv-lookups", type=int, default=2_000_000,
                    help="how many of the capture's lookups the key-value comparison makes")
    ap.add_argument("--kv-stores", default="auto",
                    help="key-value stores to compare with (redb,rocksdb); auto: rocksdb, and redb when its "
                         "file (about 190 bytes per pair while it loads) would take under half the free disk")
    ap.add_argument("--rdns-rows", type=int, default=200_000_000)
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default=None)
    ap.add_argument("--from-pcap", default=None,
                    help="sample the packets of this capture (real-derived) instead of generated traffic")
    a = ap.parse_args()
    corpus = os.environ.get("SILT_CORPUS") or os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpus")
    mm = os.path.join(corpus, "mmdb")
    asn_db, city_db = os.path.join(mm, "GeoLite2-ASN-Test.mmdb"), os.path.join(mm, "GeoLite2-City-Test.mmdb")
    for f in (asn_db, city_db):
        if not os.path.exists(f):
            sys.exit(f"{f}: corpus MaxMind test database not found (set SILT_CORPUS)")
    work = a.work or tempfile.mkdtemp(prefix="silt-bench-rasp-")
    os.makedirs(work, exist_ok=True)
    S = a.silt
    csv, idx = os.path.join(work, "rdns.csv.gz"), os.path.join(work, "rdns.idx")
    cap = os.path.join(work, "sflow.pcap")

    print(f"== generating {a.rdns_rows:,} rdns rows and {a.samples:,} sFlow samples in {work}", flush=True)
    base = os.path.join(work, "rdns-base.csv.gz")
    if not os.path.exists(base):
        timed([S, "generate", "rdns", "--events", str(a.rdns_rows), "-o", base])
    if not os.path.exists(cap):
        gen = [S, "generate", "sflow", "--events", str(a.samples), "-o", cap]
        if a.from_pcap:
            gen += ["--from", a.from_pcap]
        out, _, _ = timed(gen)
        print("   " + out.strip().splitlines()[-1], flush=True)

    lake0, lake1 = os.path.join(work, "lake-plain"), os.path.join(work, "lake-enriched")
    for l in (lake0, lake1):
        subprocess.run(["rm", "-rf", l])
    dropped0 = drop_caches()
    _, plain_s, plain_rss = timed([S, "import", "sflow", cap, "--lake", lake0, "-q"])

    # Most addresses of real traffic have a PTR record in Rapid7's data: the generated set gets
    # one row per distinct address of the capture (PTR-shaped names), as a second gzip member.
    traffic = os.path.join(work, "rdns-traffic.csv.gz")
    duck(a.python, f"COPY (SELECT ip, 'host-' || replace(replace(ip, '.', '-'), ':', '-') || '.' || "
                   f"(['dyn.example.net', 'static.isp.example', 'cloud.example.com'])[CAST(1 + hash(ip) % 3 AS BIGINT)] AS name "
                   f"FROM (SELECT src AS ip FROM read_parquet('{lake0}/sflow.sample/**/*.parquet', hive_partitioning = true) "
                   f"UNION SELECT dst FROM read_parquet('{lake0}/sflow.sample/**/*.parquet', hive_partitioning = true)) "
                   f"WHERE ip IS NOT NULL) TO '{traffic}' (FORMAT csv, HEADER false, COMPRESSION gzip)")
    # Streamed: a benchmark process that held the 1.2 GB set would lend its peak to every
    # child's measured RSS (bench/peak_rss.py).
    with open(csv, "wb") as out:
        for part in (base, traffic):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
    out, build_s, build_rss = timed([S, "index", "rdns", csv, "-o", idx])
    gz, ib = os.path.getsize(csv), os.path.getsize(idx)

    dropped1 = drop_caches()
    out, enr_s, enr_rss = timed([S, "import", "sflow", cap, "--lake", lake1, "--enrich", "asn,geo,rdns",
                                 "--mmdb", asn_db, "--mmdb", city_db, "--rdns", idx])
    enrich_lines = [l.strip() for l in out.splitlines() if l.strip().startswith("enrich")]
    n = int(duck(a.python, f"SELECT count(*) FROM read_parquet('{lake0}/sflow.sample/**/*.parquet', hive_partitioning = true)")[1][0][0])

    # 3. DuckDB: the same reverse-DNS lookups as a join.
    rdns_pq = os.path.join(work, "rdns.parquet")
    if not os.path.exists(rdns_pq):
        # The index keeps an address's first name; so does this table.
        duck(a.python, f"COPY (SELECT ip, first(name ORDER BY rn) AS name FROM (SELECT column0 AS ip, column1 AS name, "
                       f"row_number() OVER () AS rn FROM read_csv('{csv}', header = false, "
                       f"columns = {{'column0': 'VARCHAR', 'column1': 'VARCHAR'}})) GROUP BY ip) TO '{rdns_pq}' (FORMAT parquet, COMPRESSION zstd)")
    joined = os.path.join(work, "joined.parquet")
    sql = (f"COPY (SELECT s.*, r1.name AS src_rdns, r2.name AS dst_rdns "
           f"FROM read_parquet('{lake0}/sflow.sample/**/*.parquet', hive_partitioning = true) s "
           f"LEFT JOIN read_parquet('{rdns_pq}') r1 ON s.src = r1.ip "
           f"LEFT JOIN read_parquet('{rdns_pq}') r2 ON s.dst = r2.ip) TO '{joined}' (FORMAT parquet, COMPRESSION zstd)")
    duck_join_s, _ = duck(a.python, sql)
    pqb = os.path.getsize(rdns_pq)
    hits_silt, _, _ = timed([S, "query", "--lake", lake1, "--format", "csv",
                             "SELECT count(src_rdns) AS s, count(dst_rdns) AS d FROM sflow.sample"])
    _, hits_duck = duck(a.python, f"SELECT count(src_rdns), count(dst_rdns) FROM read_parquet('{joined}')")

    # 5. The same lookups against an embedded key-value store holding the same pairs.
    lookups = os.path.join(work, "lookups.txt")
    duck(a.python, f"COPY (SELECT ip FROM (SELECT src AS ip, time, frame, 0 AS k FROM read_parquet('{lake0}/sflow.sample/**/*.parquet', hive_partitioning = true) "
                   f"UNION ALL SELECT dst, time, frame, 1 FROM read_parquet('{lake0}/sflow.sample/**/*.parquet', hive_partitioning = true)) "
                   f"WHERE ip IS NOT NULL ORDER BY time, frame, k LIMIT {a.kv_lookups}) TO '{lookups}' (FORMAT csv, HEADER false)")
    stores = a.kv_stores
    free = os.statvfs(work).f_bavail * os.statvfs(work).f_frsize
    if stores == "auto":
        redb_bytes = 190 * (a.rdns_rows + 2 * a.samples)
        stores = "rocksdb" + (",redb" if redb_bytes < free / 2 else "")
        if "redb" not in stores:
            print(f"   redb left out: about {redb_bytes / 1e9:.0f} GB for these pairs, {free / 1e9:.0f} GB free", flush=True)
    kv_out, kv_s, kv_rss = timed([a.rdns_bench, "--index", idx, "--lookups", lookups, "--kv", stores,
                                  "--dir", os.path.join(work, "kv")])
    kv = {}
    for line in kv_out.splitlines():
        m = re.match(r"\s*index capture (cold|warm)\s+hits (\d+) lookup 1 thr ([\d.]+) M/s\s+lookup_many 1 thr ([\d.]+) M/s", line)
        if m:
            kv[("index", m[1])] = (int(m[2]), float(m[3]), float(m[4]))
        m = re.match(r"\s*kv (\w+) capture\s+(cold|warm)\s+hits\s+[\d.]+ % \((\d+)\)\s+get 1 thr\s+([\d.]+) M/s\s+batched 1 thr (-|([\d.]+) M/s)", line)
        if m:
            kv[(m[1], m[2])] = (int(m[3]), float(m[4]), float(m[6]) if m[6] else None)
        m = re.match(r"kv (\w+): (\d+) entries loaded in ([\d.]+) s(.*)", line)
        if m:
            kv[("load", m[1])] = (int(m[2]), float(m[3]), m[4].strip(" ,;()"))
        m = re.match(r"kv (\w+): ([\d.]+) MiB on disk", line)
        if m:
            kv[("bytes", m[1])] = float(m[2]) * 2**20
    stores = stores.split(",")
    if len(kv) != 2 + 4 * len(stores):
        sys.exit(f"rdns-bench output not understood:\n{kv_out}")

    # 4. RASP's queries over the enriched lake.
    t = "sflow.sample"
    g = f"read_parquet('{lake1}/{t}/**/*.parquet', hive_partitioning = true)"
    lo_hi, _, _ = timed([S, "query", "--lake", lake1, "--format", "csv",
                         f"SELECT min(time) AS lo, max(time) AS hi FROM {t}"])
    lo, hi = lo_hi.strip().splitlines()[1].split(",")
    # The middle third of the capture's time range.
    q_lo, q_hi = duck(a.python, f"SELECT CAST(TIMESTAMP '{lo[:26]}' + (TIMESTAMP '{hi[:26]}' - TIMESTAMP '{lo[:26]}') / 3 AS VARCHAR), "
                                f"CAST(TIMESTAMP '{lo[:26]}' + 2 * (TIMESTAMP '{hi[:26]}' - TIMESTAMP '{lo[:26]}') / 3 AS VARCHAR)")[1][0]
    queries = [
        ("count in a window",
         f"SELECT count(*) AS n FROM {t} WHERE time >= TIMESTAMP '{q_lo}' AND time < TIMESTAMP '{q_hi}'",
         f"SELECT count(*) AS n FROM {g} WHERE time >= TIMESTAMP '{q_lo}' AND time < TIMESTAMP '{q_hi}'"),
        ("top-10 AS pairs by packets",
         f"SELECT src_asn, dst_asn, sum(sampling_rate) AS packets FROM {t} GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 10",
         f"SELECT src_asn, dst_asn, sum(sampling_rate) AS packets FROM {g} GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 10"),
        ("top-10 DNS pairs",
         f"SELECT src_rdns, dst_rdns, count(*) AS n FROM {t} GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 10",
         f"SELECT src_rdns, dst_rdns, count(*) AS n FROM {g} GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 10"),
    ]
    qres = []
    for name, sq, dq in queries:
        st, dt = [], []
        for _ in range(a.reps):
            _, w, _ = timed([S, "query", "--lake", lake1, "--format", "csv", sq])
            st.append(w)
            dt.append(duck(a.python, dq)[0])
        qres.append((name, statistics.median(st), statistics.median(dt)))

    source = f"packets of {a.from_pcap} (real-derived)" if a.from_pcap else "generated traffic"
    print(f"\n### RASP pipeline: {n:,} sFlow samples of {source}, {a.rdns_rows:,} reverse-DNS rows (2 CPUs)\n")
    print("| step | measure | value | goal / baseline | ratio |")
    print("|---|---|---|---|---|")
    print(f"| rdns index build | wall, peak RSS | {build_s:.1f} s, {build_rss / 2**20:.0f} MiB | RSS <= 1 GiB | {build_rss / 2**30:.2f} |")
    print(f"| rdns index size | index / gzip'd CSV | {ib / 1e6:.1f} MB / {gz / 1e6:.1f} MB | < 1 | {ib / gz:.3f} |")
    print(f"| import sflow, no enrichment | events/s | {n / plain_s:,.0f} ({plain_s:.1f} s, RSS {plain_rss / 2**20:.0f} MiB) | | |")
    print(f"| import sflow, --enrich asn,geo,rdns | events/s | {n / enr_s:,.0f} ({enr_s:.1f} s, RSS {enr_rss / 2**20:.0f} MiB) | >= 1,000,000 | {n / enr_s / 1e6:.2f} |")
    print(f"| enrichment's share of the import | extra wall | {enr_s - plain_s:+.1f} s | | {enr_s / plain_s:.2f} |")
    print(f"| DuckDB join (src, dst) with rdns in Parquet | lookups/s | {2 * n / duck_join_s:,.0f} ({duck_join_s:.1f} s) | silt's rdns inside the import | silt/DuckDB wall {enr_s / duck_join_s:.2f} |")
    print(f"| reverse DNS on disk | index / Parquet table | {ib / 1e6:.1f} MB / {pqb / 1e6:.1f} MB | | {ib / pqb:.3f} |")
    n_kv = min(a.kv_lookups, 2 * n)
    for store in stores:
        for state in ("cold", "warm"):
            ih, i1, im = kv[("index", state)]
            rh, r1, rm = kv[(store, state)]
            rb = f" (batched {rm:.3f})" if rm is not None else ""
            print(f"| rdns lookups, the capture's first {n_kv:,}, {state} | silt index / {store}, M lookups/s (1 thread) | {i1:.3f} (batched {im:.3f}) / {r1:.3f}{rb} | {store} | {i1 / r1:.2f} |")
            print(f"| rdns hits, {state} | silt index / {store} | {ih:,} / {rh:,} | equal | {'equal' if ih == rh else 'DIFFERENT'} |")
        ke, kl, kd = kv[("load", store)]
        kb = kv[("bytes", store)]
        print(f"| reverse DNS on disk | index / {store} ({ke:,} pairs, loaded in {kl:.0f} s: {kd}) | {ib / 1e6:.1f} MB / {kb / 1e6:,.1f} MB | | {ib / kb:.4f} |")
    hs = hits_silt.strip().splitlines()[1]
    print(f"| rdns hits (src, dst) | silt / DuckDB | {hs} / {','.join(hits_duck[0])} | equal | {'equal' if hs == ','.join(hits_duck[0]) else 'DIFFERENT'} |")
    for name, s_m, d_m in qres:
        print(f"| query: {name} | silt / DuckDB (median of {a.reps}) | {s_m * 1e3:.0f} ms / {d_m * 1e3:.0f} ms | RASP topN over 10M: 7.2 s | {s_m / d_m:.2f} |")
    print(f"\npage cache dropped before the imports: {dropped0 and dropped1}; enrichment summary: {'; '.join(enrich_lines)}")
    print("silt import and query times are whole processes; DuckDB's are in-process execute times.")


if __name__ == "__main__":
    main()
