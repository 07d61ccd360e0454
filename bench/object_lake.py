#!/usr/bin/env python3
"""Object-store lake against a local one (issue 25, benchmark 3): the same `silt import` and the
same queries on `--lake DIR` and on `--lake s3://bucket/prefix` served by MinIO on this machine
(scripts/minio.sh), with the ratio s3/local printed for each.

Inputs: the real-derived Zeek conn log (the corpus's `zeek-tsv/vast/conn.log` repeated with
shifted times, uids and addresses, as bench/zeek_convert.py makes it) and, with --gen, the
generator's dense conn log. Queries: a count in a time window, a top-N, a needle by uid; each is a
whole `silt query` process (start-up, listing and footers included), median of --runs. On the
object store each query is timed twice: with the footer cache off (SILT_FOOTER_CACHE=off: every
footer read from the store, as on a first query from a new machine) and with a warm footer cache
(filled by one untimed run first: what a user's repeated queries see). Then compaction: the input
imported --compact-imports times into a fresh lake of each kind, one `silt compact` each, timed
(MB/s of the files merged), answers checked before and after. Last, `silt serve` into each lake
for --serve-seconds (bench/serve.py's closed loop over Forward): events/s acknowledged, ack and
freshness p99, drain time, and every acknowledged event counted in the lake.

MinIO runs on the same 2 cores as silt and stores to the same disk, so the ratio is the cost of
the S3 protocol (HTTP, signing, listing, range requests) over local file access, not of a network.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zeek_convert  # noqa: E402  (real-derived inputs, measured runs)

ROOT = Path(__file__).resolve().parent.parent


def minio_env():
    out = subprocess.run(["bash", str(ROOT / "scripts/minio.sh"), "start"], check=True,
                         capture_output=True, text=True).stdout
    env = dict(os.environ)
    for line in out.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    return env


def bucket(name):
    subprocess.run(["bash", str(ROOT / "scripts/minio.sh"), "bucket", name], check=True,
                   capture_output=True)


def timed(cmd, env, runs):
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
        out = p.stdout
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--silt", required=True)
    ap.add_argument("--events", type=int, default=2_000_000, help="records (default 2000000)")
    ap.add_argument("--runs", type=int, default=3, help="runs per measure; the median (default 3)")
    ap.add_argument("--partition", default="auto", help="--partition for the imports (default auto)")
    ap.add_argument("--compact-imports", type=int, default=4,
                    help="imports (of the same input, --force) into the lakes `silt compact` merges; "
                         "0 skips the compaction measure (default 4)")
    ap.add_argument("--serve-seconds", type=float, default=30,
                    help="`silt serve` into each lake for this long (bench/serve.py, closed loop, the "
                         "corpus web log over Forward); 0 skips the serve measure (default 30)")
    ap.add_argument("--out", default=str(ROOT / "bench/out"))
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "silt-bench-s3"))
    a = ap.parse_args()

    env = minio_env()
    src = zeek_convert.real_input("conn", a.events, 8462 / 24, Path(a.out) / "zeek-real")
    size = src.stat().st_size
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rows = []

    def import_to(lake):
        # A fresh lake each run: a re-run would be skipped by the import record.
        return [a.silt, "import", "zeek", str(src), "--lake", lake, "-q", "--partition", a.partition]

    local_t, s3_t = [], []
    for r in range(a.runs):
        lake = work / f"local-{r}"
        t = time.perf_counter()
        subprocess.run(import_to(str(lake)), env=env, check=True, capture_output=True)
        local_t.append(time.perf_counter() - t)
        b = f"silt-bench-{os.getpid()}-{r}"
        bucket(b)
        t = time.perf_counter()
        p = subprocess.run(import_to(f"s3://{b}/lake"), env=env, capture_output=True, text=True)
        s3_t.append(time.perf_counter() - t)
        if p.returncode != 0:
            sys.exit(f"s3 import failed: {p.stderr[-2000:]}")
    lt, st = statistics.median(local_t), statistics.median(s3_t)
    rows.append(("import (MB/s of input)", size / 1e6 / lt, size / 1e6 / st))
    local = str(work / "local-0")
    s3 = f"s3://silt-bench-{os.getpid()}-0/lake"
    tables = json.loads(subprocess.run([a.silt, "tables", "--lake", s3, "--json"], env=env, check=True,
                                       capture_output=True, text=True).stdout)
    files = sum(t["files"] for t in tables)
    nbytes = sum(t["bytes"] for t in tables)

    uid = subprocess.run([a.silt, "query", "--lake", local, "--format", "csv",
                          "SELECT uid FROM zeek.conn ORDER BY ts DESC LIMIT 1 OFFSET 12345"],
                         env=env, check=True, capture_output=True, text=True).stdout.split()[-1]
    lo = subprocess.run([a.silt, "query", "--lake", local, "--format", "csv",
                         "SELECT min(ts) + INTERVAL '30 days' FROM zeek.conn"],
                        env=env, check=True, capture_output=True, text=True).stdout.split("\n")[1]
    queries = {
        "count in a 2-day window": f"SELECT count(*) FROM zeek.conn WHERE ts >= TIMESTAMP '{lo}' "
                                   f"AND ts < TIMESTAMP '{lo}' + INTERVAL '2 days'",
        "top-10 responder ports": "SELECT id.resp_p, count(*) n FROM zeek.conn GROUP BY 1 "
                                  "ORDER BY n DESC LIMIT 10",
        "needle by uid": f"SELECT ts, uid, id.orig_h FROM zeek.conn WHERE uid = '{uid}'",
        "full count": "SELECT count(*), sum(orig_bytes) FROM zeek.conn",
    }
    cold = dict(env, SILT_FOOTER_CACHE="off")
    warm = dict(env, SILT_FOOTER_CACHE=str(work / "footers"))
    for name, q in queries.items():
        cmd = [a.silt, "query", "--format", "csv", q]
        lq, lout = timed(cmd + ["--lake", local], env, a.runs)
        sq, sout = timed(cmd + ["--lake", s3], cold, a.runs)
        timed(cmd + ["--lake", s3], warm, 1)
        wq, wout = timed(cmd + ["--lake", s3], warm, a.runs)
        for what, out in [("s3", sout), ("s3 with the footer cache", wout)]:
            if lout != out:
                sys.exit(f"answers differ for {name}:\nlocal: {lout}\n{what}: {out}")
        rows.append((f"query: {name} (s)", lq, sq, wq))

    # Compaction: the input imported --compact-imports times into a fresh lake of each kind, so
    # each partition holds that many files, then one `silt compact` each, timed; the answers
    # must be the same before and after, and equal between the two.
    compact_note = ""
    if a.compact_imports > 1:
        check = [a.silt, "query", "--format", "csv",
                 "SELECT count(*), sum(orig_bytes), count(DISTINCT uid) FROM zeek.conn"]
        local_c, s3_c, files_in, files_out, bytes_in = [], [], 0, 0, 0
        for r in range(a.runs):
            lake_l = str(work / f"compact-{r}")
            b = f"silt-bench-c-{os.getpid()}-{r}"
            bucket(b)
            lake_s = f"s3://{b}/lake"
            for lake in (lake_l, lake_s):
                for _ in range(a.compact_imports):
                    subprocess.run(import_to(lake) + ["--force"], env=env, check=True,
                                   capture_output=True)
            before = subprocess.run(check + ["--lake", lake_l], env=env, check=True,
                                    capture_output=True, text=True).stdout
            tables = json.loads(subprocess.run([a.silt, "tables", "--lake", lake_s, "--json"], env=env,
                                               check=True, capture_output=True, text=True).stdout)
            files_in = sum(t["files"] for t in tables)
            bytes_in = sum(t["bytes"] for t in tables)
            for lake, times in ((lake_l, local_c), (lake_s, s3_c)):
                t = time.perf_counter()
                p = subprocess.run([a.silt, "compact", "--lake", lake, "--json"], env=env,
                                   capture_output=True, text=True)
                times.append(time.perf_counter() - t)
                if p.returncode != 0:
                    sys.exit(f"compaction of {lake} failed: {p.stderr[-2000:]}")
                after = subprocess.run(check + ["--lake", lake], env=env, check=True,
                                       capture_output=True, text=True).stdout
                if after != before:
                    sys.exit(f"compaction of {lake} changed the answers:\n{before}\n{after}")
            tables = json.loads(subprocess.run([a.silt, "tables", "--lake", lake_s, "--json"], env=env,
                                               check=True, capture_output=True, text=True).stdout)
            files_out = sum(t["files"] for t in tables)
            shutil.rmtree(lake_l, ignore_errors=True)
        lc, sc = statistics.median(local_c), statistics.median(s3_c)
        rows.append(("compact (MB/s of input files)", bytes_in / 1e6 / lc, bytes_in / 1e6 / sc))
        compact_note = (f"compaction: the input imported {a.compact_imports} times (`--force`), "
                        f"{files_in} files ({bytes_in / 1e6:.1f} MB) merged into {files_out}; "
                        "answers equal before and after. ")

    # silt serve into each lake: bench/serve.py's closed loop (the highest acknowledged rate
    # the server sustains), then a drain; every acknowledged event must be in the lake.
    serve_note = ""
    if a.serve_seconds > 0:
        got = {}
        for kind in ("local", "s3"):
            result = work / f"serve-{kind}.json"
            cmd = [sys.executable, str(ROOT / "bench/serve.py"), "--silt", a.silt, "--family", "real",
                   "--seconds", str(a.serve_seconds), "--result", str(result)]
            if kind == "s3":
                b = f"silt-bench-serve-{os.getpid()}"
                bucket(b)
                cmd += ["--lake", f"s3://{b}/lake"]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if p.returncode != 0 or not result.exists():
                sys.exit(f"serve into the {kind} lake failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
            got[kind] = json.loads(result.read_text())
            if got[kind]["in_lake"] != got[kind]["acked"]:
                sys.exit(f"serve into the {kind} lake: {got[kind]['in_lake']} rows in the lake for "
                         f"{got[kind]['acked']} acknowledged")
        lo, so = got["local"], got["s3"]
        rows.append(("serve: Forward events/s acknowledged", lo["events_per_s"], so["events_per_s"]))
        for key, name in (("ack_p99_ms", "serve: ack latency p99 (ms)"),
                          ("fresh_p99_ms", "serve: freshness p99, 200 to visible (ms)"),
                          ("drain_s", "serve: drain after SIGTERM (s)")):
            rows.append((name, lo[key], so[key]))
        serve_note = (f"serve: {a.serve_seconds:.0f} s each, every acknowledged event in the lake after the "
                      f"drain ({lo['acked']:,} local, {so['acked']:,} s3). ")

    lines = [f"# object-store lake (MinIO) vs local, {time.strftime('%Y-%m-%d %H:%M')}", "",
             f"input: {src.name}, {a.events} real-derived conn records, {size / 1e6:.0f} MB; "
             f"lake: {files} files, {nbytes / 1e6:.1f} MB (--partition {a.partition}); "
             f"median of {a.runs} runs; answers equal", "",
             "| measure | local | s3 (MinIO), no footer cache | s3/local | s3, footer cache warm | s3/local |",
             "|---|---|---|---|---|---|"]
    for name, l, s, *w in rows:
        ratio = (l / s) if "/s" in name else (s / l)  # a rate, else a time
        num = lambda v: f"{v:,.0f}" if v >= 1000 else f"{v:.2f}"
        line = f"| {name} | {num(l)} | {num(s)} | {ratio:.2f} |"
        line += f" {w[0]:.2f} | {w[0] / l:.2f} |" if w else " | |"
        lines.append(line)
    lines.append("")
    lines.append(compact_note + serve_note + "s3/local: for throughput, local rate / s3 rate; for times, s3 time / "
                 "local time (above 1: slower on the object store). The import does not read footers.")
    text = "\n".join(lines)
    print(text)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "object-lake.md").write_text(text + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
