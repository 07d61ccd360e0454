#!/usr/bin/env python3
"""Lake maintenance benchmark (issue 25): the small files of streaming ingest, compacted.

  bench/lake-ops.sh [--minutes 10] [--rate 20000] [--tables 4] [--kills 50]

1. Starts `silt serve --flush-age 1s` on a fresh lake with --tables Forward routes
   (docker.t<i> -> docker.nginx<i>, --parse-field log=access), and sends --rate events/s in total
   for --minutes through Forward with acks (the corpus's real nginx access log repeated with
   shifted days and addresses, as bench/serve.sh does; event time advances one second per wall
   second, so files land in the current hour's partition as a live feed's would). Every flush
   makes one small file per table. Then SIGTERM (drain).
2. Before and after `silt compact` (peak RSS and wall time of that very process, via wait4):
   files, bytes, and three queries per engine, silt (`silt query`, process wall time) and
   DuckDB (read_parquet glob with hive_partitioning, in-process time): a count in a time window,
   a top-N, a needle (one client address). Prints compaction MB/s, the speed-ups and that the
   answers are equal before/after and between the engines.
3. SIGKILL during compaction --kills times: each round starts from a hard-linked copy of the
   uncompacted lake (compaction never writes into existing files, it adds new ones and unlinks
   old ones, so the copy stays intact), kills `silt compact` at a random moment within its
   measured run time, and counts rows and a byte sum as silt sees them right away and as DuckDB's
   glob sees them after `silt vacuum` (silt's recovery): rows lost and duplicated must be 0.
With --table-format delta, the server keeps a Delta Lake log per table, and each kill round
also counts what DuckDB's `delta_scan` (scripts/duckdb-delta.sh) reads through the log right
after the kill, before any recovery, and again after `silt vacuum`.
The object-store lake is measured by bench/object-lake.sh.
"""
import argparse, json, os, random, shutil, socket, subprocess, sys, tempfile, threading, time
from peak_rss import child_peak

sys.path.insert(0, os.path.dirname(__file__))
import msgpack  # noqa: E402
from serve import corpus_lines, real_line, free_port  # noqa: E402


def frames_for(start_k, per_frame, lines, rnd, t0):
    """One PackedForward entries blob of per_frame records with event times around now."""
    entries = bytearray()
    now = time.time()
    for j in range(per_frame):
        k = start_k + j
        sec = int(now)
        t = msgpack.ExtType(0, sec.to_bytes(4, "big") + (k % 1000 * 1000).to_bytes(4, "big"))
        rec = {"container_id": "3f2a" * 16, "container_name": "/web", "source": "stdout",
               "log": real_line(lines, k, rnd)}
        entries += msgpack.packb([t, rec], use_bin_type=True)
    return bytes(entries)


def feeder(port, tables, rate, seconds, acked):
    """Sends rate events/s for seconds (frames of rate/20 events, 20 a second, round-robin over
    the tables' tags), waiting for each frame's ack."""
    lines = corpus_lines()
    rnd = random.Random(11)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    unpacker = msgpack.Unpacker(raw=False)
    per_frame = max(1, rate // 20)
    k, i = 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        tag = f"docker.t{i % tables}"
        chunk = f"c{i}"
        body = msgpack.packb([tag, frames_for(k, per_frame, lines, rnd, t0),
                              {"chunk": chunk, "size": per_frame}], use_bin_type=True)
        s.sendall(body)
        while True:
            unpacker.feed(s.recv(65536))
            got = [m for m in unpacker]
            if any(m.get("ack") == chunk for m in got):
                break
        acked[0] += per_frame
        k += per_frame
        i += 1
        due = t0 + i / 20
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    s.close()


def walk(lake):
    files, size = 0, 0
    for d, _, fs in os.walk(lake):
        if "/_" in d.replace(lake, ""):
            continue
        for f in fs:
            if f.endswith(".parquet"):
                files += 1
                size += os.path.getsize(os.path.join(d, f))
    return files, size


def run(cmd):
    """Runs cmd; returns (stdout, wall seconds, peak RSS bytes) of that very process."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    wall = time.perf_counter() - t
    # communicate() reaped it; resource usage of that child comes from the last wait.
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {err}")
    return out, wall


def run_rss(cmd):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed ({status})")
    return out.decode(), wall, child_peak(ru, cmd)


def queries(lake, tables):
    """(name, silt SQL, DuckDB SQL) over docker.nginx0: the window is the middle third of the
    run's event times, the needle a client address of the data."""
    t = "docker.nginx0"
    g = f"read_parquet('{data_glob(lake, t)}', hive_partitioning = true, union_by_name = true)"
    return [
        ("count in a window",
         f"SELECT count(*) AS n FROM {t} WHERE time >= TIMESTAMP '{{lo}}' AND time < TIMESTAMP '{{hi}}'",
         f"SELECT count(*) AS n FROM {g} WHERE time >= TIMESTAMP '{{lo}}' AND time < TIMESTAMP '{{hi}}'"),
        ("top-N paths",
         f"SELECT path AS p, count(*) AS n FROM {t} GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
         f"SELECT path AS p, count(*) AS n FROM {g} GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10"),
        ("needle by address",
         f"SELECT count(*) AS n FROM {t} WHERE remote_addr = '{{addr}}'",
         f"SELECT count(*) AS n FROM {g} WHERE remote_addr = '{{addr}}'"),
    ]


def data_glob(lake, t):
    """The glob of table t's data files: through its partition directories (dt=*/hour=*/,
    month=*/, none), not `**`, which would also take a Delta table's Parquet checkpoints in
    _delta_log/."""
    tdir = os.path.join(lake, t)
    for root, dirs, files in os.walk(tdir):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        if any(f.endswith(".parquet") for f in files):
            rel = os.path.relpath(root, tdir)
            keys = [] if rel == "." else [p.split("=", 1)[0] for p in rel.split(os.sep)]
            return os.path.join(tdir, *["%s=*" % k for k in keys], "*.parquet")
    return os.path.join(tdir, "**", "*.parquet")


def duck(py, sql):
    code = ("import duckdb, time, sys, json\n"
            "c = duckdb.connect()\n"
            "t = time.perf_counter()\n"
            "r = c.execute(sys.argv[1]).fetchall()\n"
            "print(json.dumps([time.perf_counter() - t, [list(map(str, x)) for x in r]]))\n")
    out = subprocess.run([py, "-c", code, sql], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"duckdb: {out.stderr}")
    secs, rows = json.loads(out.stdout)
    return secs, rows


def silt_q(silt, lake, sql):
    out, wall = run([silt, "query", "--lake", lake, "--format", "csv", sql])
    rows = [l.split(",") for l in out.strip().splitlines()[1:]]
    return wall, rows


def measure(silt, py, lake, qs, params, reps):
    res = {}
    for name, sq, dq in qs:
        s_sql, d_sql = sq.format(**params), dq.format(**params)
        s_times, d_times = [], []
        for _ in range(reps):
            w, s_rows = silt_q(silt, lake, s_sql)
            s_times.append(w)
            d, d_rows = duck(py, d_sql)
            d_times.append(d)
        res[name] = (min(s_times), min(d_times), s_rows, d_rows)
    return res


def fingerprint(silt, lake):
    out, _ = run([silt, "query", "--lake", lake, "--format", "csv",
                  "SELECT count(*) AS n, sum(bytes) AS b FROM docker.nginx0"])
    n, b = out.strip().splitlines()[1].split(",")
    return int(n), int(b or 0)


def duck_fingerprint(py, lake):
    _, rows = duck(py, f"SELECT count(*), sum(bytes) FROM read_parquet('{data_glob(lake, 'docker.nginx0')}', hive_partitioning = true, union_by_name = true)")
    return int(rows[0][0]), int(float(rows[0][1] or 0))


def delta_fingerprint(lake):
    """count(*) and sum(bytes) of docker.nginx0 as DuckDB's delta_scan reads the Delta log."""
    root = os.path.join(os.path.dirname(__file__), "..")
    py = subprocess.run([os.path.join(root, "scripts/duckdb-delta.sh")], check=True,
                        stdout=subprocess.PIPE, text=True).stdout.strip()
    out, _ = run([py, os.path.join(root, "scripts/interop/delta_scan.py"),
                  os.path.join(lake, "docker.nginx0"), "count(*), sum(bytes)"])
    n, b = out.strip().split(",")
    return int(n), int(b or 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--silt", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=int, default=20000, help="events/s in total")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--table-format", default="hive", choices=["hive", "delta"])
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="silt-bench-lakeops-")
    lake = os.path.join(work, "lake")
    fport, hport = free_port(), free_port()
    cmd = [a.silt, "serve", "--lake", lake, "--http", f"127.0.0.1:{hport}",
           "--forward", f"127.0.0.1:{fport}", "--flush-age", "1s",
           "--table-format", a.table_format]
    for i in range(a.tables):
        cmd += ["--route", f"docker.t{i}=docker.nginx{i}", "--parse-field", f"docker.nginx{i}:log=access"]
    srv = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    for line in srv.stderr:
        if line.startswith("Ctrl-C"):
            break
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
    acked = [0]
    seconds = a.minutes * 60
    print(f"== ingesting {a.rate:,} events/s into {a.tables} {a.table_format} tables through silt serve --flush-age 1s for {seconds:.0f} s", flush=True)
    t_lo = time.time()
    feeder(fport, a.tables, a.rate, seconds, acked)
    t_hi = time.time()
    srv.terminate()
    srv.wait(timeout=600)
    files0, bytes0 = walk(lake)
    print(f"   acked {acked[0]:,} events; lake: {files0:,} files, {bytes0 / 1e6:.1f} MB", flush=True)

    def iso(t):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
    third = (t_hi - t_lo) / 3
    sample, _ = run([a.silt, "query", "--lake", lake, "--format", "csv",
                     "SELECT remote_addr FROM docker.nginx0 GROUP BY 1 ORDER BY count(*), 1 LIMIT 1"])
    params = {"lo": iso(t_lo + third), "hi": iso(t_lo + 2 * third), "addr": sample.strip().splitlines()[1]}
    qs = queries(lake, a.tables)
    before = measure(a.silt, a.python, lake, qs, params, a.reps)
    fp0 = fingerprint(a.silt, lake)

    pristine = os.path.join(work, "pristine")
    subprocess.run(["cp", "-al", lake, pristine], check=True)
    print("== silt compact", flush=True)
    out, wall, peak = run_rss([a.silt, "compact", "--lake", lake, "--json", "-q"])
    rep = json.loads(out)
    b_in = sum(t["bytes_in"] for t in rep["tables"])
    b_out = sum(t["bytes_out"] for t in rep["tables"])
    files1, bytes1 = walk(lake)
    after = measure(a.silt, a.python, lake, qs, params, a.reps)
    fp1 = fingerprint(a.silt, lake)

    print(f"\n### Compaction after {seconds / 60:.0f} min of `silt serve --flush-age 1s` ({a.rate:,} events/s, {a.tables} tables)\n")
    print("| measure | before | after | ratio |")
    print("|---|---|---|---|")
    print(f"| files | {files0:,} | {files1:,} | {files1 / max(files0, 1):.4f} |")
    print(f"| bytes | {bytes0 / 1e6:.1f} MB | {bytes1 / 1e6:.1f} MB | {bytes1 / max(bytes0, 1):.3f} |")
    print(f"| rows, sum(bytes) of docker.nginx0 | {fp0[0]:,}, {fp0[1]:,} | {fp1[0]:,}, {fp1[1]:,} | {'equal' if fp0 == fp1 else 'DIFFERENT'} |")
    print(f"\ncompaction: {wall:.1f} s wall, {b_in / 1e6 / wall:.1f} MB/s of input, peak RSS {peak / 2**20:.0f} MiB (goal <= 512 MiB, default --memory 256MiB)\n")
    print("| query | silt before | silt after | silt speed-up | DuckDB before | DuckDB after | DuckDB speed-up | silt/DuckDB after | answers equal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, _, _ in qs:
        sb, db, sr0, dr0 = before[name]
        sa, da, sr1, dr1 = after[name]
        same = sr0 == sr1 == [[str(x) for x in r] for r in sr1] and [list(map(str, r)) for r in dr0] == [list(map(str, r)) for r in dr1]
        same = same and [r[-1] for r in sr1] == [r[-1] for r in dr1]
        print(f"| {name} | {sb * 1e3:.0f} ms | {sa * 1e3:.0f} ms | {sb / sa:.1f}x | {db * 1e3:.0f} ms | {da * 1e3:.0f} ms | {db / da:.1f}x | {sa / da:.2f} | {'yes' if same else 'NO'} |")
    print("(silt: `silt query` process wall time, including start-up; DuckDB: in-process execute time)")
    sys.stdout.flush()

    if a.kills <= 0:
        return
    print(f"\n== SIGKILL during silt compact x{a.kills}", flush=True)
    rnd = random.Random(5)
    lost = dup = 0
    delta_lost = delta_dup = 0
    killed = 0
    for r in range(a.kills):
        d = os.path.join(work, f"kill{r}")
        subprocess.run(["cp", "-al", pristine, d], check=True)
        p = subprocess.Popen([a.silt, "compact", "--lake", d, "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0, wall))
        if p.poll() is None:
            p.kill()
            killed += 1
        p.wait()
        seen = fingerprint(a.silt, d)
        delta_seen = []
        if a.table_format == "delta":
            delta_seen.append(delta_fingerprint(d))
        run([a.silt, "vacuum", "--lake", d])
        glob = duck_fingerprint(a.python, d)
        if a.table_format == "delta":
            delta_seen.append(delta_fingerprint(d))
        for fp in delta_seen:
            if fp[0] < fp0[0]:
                delta_lost += fp0[0] - fp[0]
            if fp[0] > fp0[0]:
                delta_dup += fp[0] - fp0[0]
            if fp[0] == fp0[0] and fp[1] != fp0[1]:
                delta_lost += 1
        for fp in (seen, glob):
            if fp[0] < fp0[0]:
                lost += fp0[0] - fp[0]
            if fp[0] > fp0[0]:
                dup += fp[0] - fp0[0]
            if fp[0] == fp0[0] and fp[1] != fp0[1]:
                lost += 1
        shutil.rmtree(d)
    print(f"\n| SIGKILL during compaction | rounds | killed mid-run | rows lost | rows duplicated |")
    print("|---|---|---|---|---|")
    print(f"| silt right away, DuckDB glob after `silt vacuum` | {a.kills} | {killed} | {lost} | {dup} |")
    if a.table_format == "delta":
        print(f"| Delta reader (DuckDB delta_scan) right away and after `silt vacuum` | {a.kills} | {killed} | {delta_lost} | {delta_dup} |")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
