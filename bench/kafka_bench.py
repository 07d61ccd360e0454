#!/usr/bin/env python3
"""Kafka ingest benchmark (issue 24); run it through bench/kafka.sh.

1. Inputs: the corpus's Zeek conn log in JSON (zeek-json/vast-conn.log.json.gz, 8,462 records)
   repeated with its times shifted by a day per copy up to --conn records; RASP-style netdata
   CSV rows (sampled packets: time, agent, addresses, ports, protocol, bytes, sampling rate)
   generated up to --netdata. Both are written to files and produced (lz4, as producers
   usually send) to 6-partition topics made for this run.
2. `silt import kafka` drains each topic into a fresh lake (one process, its wall time from
   start to exit, start-up and the final flush included): records/s. DuckDB converts the same
   records from the files to one Parquet file (read_json / read_csv, zstd) in the same run:
   records/s. The ratio is silt/DuckDB (DuckDB reads a local file; silt fetches from the
   broker and writes a partitioned lake with its sort, statistics and bloom filters).
3. Two `silt import kafka` processes of one group on one lake drain the conn topic again (a
   new group, new lake) against one process: the wall-time ratio one/two.
Not measured: the RASP pipeline end to end (sFlow -> serve -> Kafka -> serve), which needs
the serve route to Kafka that does not exist yet.
"""
import argparse, gzip, json, os, subprocess, sys, tempfile, time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    return r.stdout


def conn_file(path, n):
    src = os.path.join(ROOT, "..", "shared", "corpus", "zeek-json", "vast-conn.log.json.gz")
    recs = [json.loads(l) for l in gzip.open(src, "rt") if l.strip()]
    with open(path, "w") as f:
        k = 0
        while k < n:
            shift = 86400 * (k // len(recs))
            for r in recs:
                if k >= n:
                    break
                r2 = dict(r)
                r2["ts"] = r["ts"] + shift if isinstance(r["ts"], (int, float)) else r["ts"]
                f.write(json.dumps(r2, separators=(",", ":")) + "\n")
                k += 1
    return n


NETDATA_COLS = "ts,agent,src,dst,sport,dport,proto,bytes,packets,sampling"


def netdata_file(path, n):
    t0 = 1711299600
    with open(path, "w") as f:
        for i in range(n):
            f.write(
                f"{t0 + i // 20000}.{i % 1000:03d},10.255.0.{i % 4 + 1},"
                f"10.{(i >> 8) % 256}.{i % 256}.{(i * 7) % 254 + 1},192.0.{(i * 13) % 256}.{(i * 31) % 254 + 1},"
                f"{1024 + (i * 17) % 60000},{(443, 80, 53, 22)[i % 4]},{(6, 17)[i % 3 == 0]},"
                f"{40 + (i * 37) % 1460},1,{(512, 1024, 2048)[i % 3]}\n")
    return n


def produce(py, broker, topic, path):
    sh(["bash", os.path.join(ROOT, "scripts/kafka.sh"), "topic", topic, "6"])
    t = time.perf_counter()
    n = int(sh([py, os.path.join(ROOT, "scripts/kafka/client.py"), "produce-file", broker, topic,
                path, "--compression", "lz4"]).strip())
    return n, time.perf_counter() - t


def silt_import(silt, broker, topic, spec, lake, group, extra=(), instance=None):
    cmd = [silt, "import", "kafka", "--kafka", broker, "--topic", f"{topic}={spec}",
           "--group", group, "--lake", lake, "--quiet", *extra]
    if instance:
        cmd += ["--instance", instance]
    return cmd


def timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    return time.perf_counter() - t, r.stderr


def rows(silt, lake, table):
    out = sh([silt, "query", "--lake", lake, "--format", "csv", f"SELECT count(*) FROM {table}"])
    return int(out.splitlines()[1])


def duckdb_convert(sql):
    import duckdb
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    t = time.perf_counter()
    con.execute(sql)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--silt", required=True)
    ap.add_argument("--broker", required=True)
    ap.add_argument("--conn", type=int, default=1_000_000)
    ap.add_argument("--netdata", type=int, default=2_000_000)
    a = ap.parse_args()
    py = sys.executable
    run = f"{os.getpid()}-{int(time.time())}"
    with tempfile.TemporaryDirectory(prefix="silt-bench-kafka-") as d:
        conn, net = os.path.join(d, "conn.json"), os.path.join(d, "netdata.csv")
        conn_file(conn, a.conn)
        netdata_file(net, a.netdata)
        results = []
        for name, path, spec, table, extra, duck in [
            ("zeek conn JSON", conn, "zeek:zeek.conn", "zeek.conn", [],
             f"COPY (SELECT * FROM read_json('{conn}', format='newline_delimited')) TO '{d}/conn.parquet' (FORMAT parquet, COMPRESSION zstd)"),
            ("netdata CSV", net, "csv:rasp.netdata", "rasp.netdata",
             ["--topic-columns", f"TOPIC={NETDATA_COLS}"],
             f"COPY (SELECT * FROM read_csv('{net}', header=false, names={NETDATA_COLS.split(',')})) TO '{d}/net.parquet' (FORMAT parquet, COMPRESSION zstd)"),
        ]:
            topic = f"bench-{table.replace('.', '-')}-{run}"
            n, ptime = produce(py, a.broker, topic, path)
            extra = [e.replace("TOPIC", topic) for e in extra]
            lake = os.path.join(d, f"lake-{table}")
            wall, _ = timed(silt_import(a.silt, a.broker, topic, spec, lake, f"b1-{topic}", extra))
            got = rows(a.silt, lake, table)
            if got != n:
                sys.exit(f"{table}: {got} rows in the lake, {n} produced")
            dwall = duckdb_convert(duck)
            results.append((name, n, wall, dwall, ptime))
            if table == "zeek.conn":
                # Two processes of one group against the one above.
                lake2 = os.path.join(d, "lake-two")
                t = time.perf_counter()
                procs = [subprocess.Popen(
                    silt_import(a.silt, a.broker, topic, spec, lake2, f"b2-{topic}", extra, f"i{i}"),
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
                errs = [p.communicate()[1] for p in procs]
                two = time.perf_counter() - t
                if any(p.returncode for p in procs):
                    sys.exit(f"two processes failed: {errs}")
                got2 = rows(a.silt, lake2, table)
                if got2 != n:
                    sys.exit(f"two processes: {got2} rows in the lake, {n} produced")
                two_procs = (wall, two)
        print(f"{'topic (6 partitions)':<18} {'records':>10} {'silt s':>8} {'silt rec/s':>11} "
              f"{'DuckDB s':>9} {'DuckDB rec/s':>13} {'ratio silt/DuckDB':>18}")
        for name, n, wall, dwall, _ in results:
            print(f"{name:<18} {n:>10,} {wall:>8.2f} {n / wall:>11,.0f} {dwall:>9.2f} "
                  f"{n / dwall:>13,.0f} {(n / wall) / (n / dwall):>18.2f}")
        one, two = two_procs
        print(f"conn, two processes of one group: {two:.2f} s vs one {one:.2f} s "
              f"(throughput ratio two/one {one / two:.2f}; 2 cores shared with the broker)")
        print(f"(producing with confluent-kafka took {', '.join(f'{r[4]:.1f} s' for r in results)}; not timed above)")


if __name__ == "__main__":
    main()
