#!/usr/bin/env python3
"""Docker/nginx logs -> Parquet: silt convert vs DuckDB, and the seed's two Athena questions.

Run through bench/weblogs.sh (it builds silt and finds the venv python). Each process runs --runs
times (default 3) and the medians of wall time and peak RSS are reported:
  1. `silt generate docker-nginx` writes one hour (12:00-13:00 UTC) of fluentd-style records
     {log_time, container_id, container_name, source, log} as MessagePack (--bytes, default 255MB)
     and the same records as NDJSON.
  2. silt convert: {msgpack, ndjson} x {log kept as a string, --parse-field log=access} x
     {zstd, snappy}; DuckDB: read_json(NDJSON, five typed columns) -> COPY (FORMAT parquet) with
     snappy and zstd. Wall time and peak RSS of each process (wait4), output bytes, ratios.
  3. DuckDB answers "status-200 lines in the hour" and "... in 12:00-12:10" on the silt files
     (parsed: `status = 200`; string: `log LIKE '%" 200 %'`) and on DuckDB's files, checks
     the answers against the generator's own count, and prints the bytes a Parquet reader has
     to scan: the compressed size of the referenced column chunks in the row groups that the
     min/max statistics cannot rule out (read from the footers with pyarrow).
Writes bench/out/weblogs.{md,csv}.
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from peak_rss import child_peak

START_MS = 1_711_281_600_000  # 2024-03-24 12:00:00 UTC
TEN_MIN_MS = 600_000
GOALS = {"wall": 1.0, "rss": 0.5, "bytes": 1.0, "bytes_parsed": 0.5}  # silt / DuckDB, same codec


def worker_duckdb(src, out, codec):
    import duckdb

    cols = ("{'log_time': 'BIGINT', 'container_id': 'VARCHAR', 'container_name': 'VARCHAR', "
            "'source': 'VARCHAR', 'log': 'VARCHAR'}")
    duckdb.connect().execute(
        f"COPY (SELECT * FROM read_json('{src}', format='newline_delimited', columns={cols})) "
        f"TO '{out}' (FORMAT parquet, COMPRESSION {codec})"
    )


def run_measured(cmd):
    """Runs cmd; returns (wall seconds, peak RSS bytes, stdout) of that process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read().decode(errors="replace")
    # wait4 gives this child's rusage (its ru_maxrss: see bench/peak_rss.py).
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"command failed ({code}): {' '.join(map(str, cmd))}\n{out[-2000:]}{err[-3000:]}")
    return wall, child_peak(ru, cmd), out


def run_median(cmd, runs):
    """Runs cmd `runs` times; returns the median wall seconds and the median peak RSS."""
    return run_interleaved([cmd], runs)[0]


def run_interleaved(cmds, runs):
    """Runs every command of cmds `runs` times, interleaved (run 1 of each, then run 2, ..., the
    order rotated each round, so a slow spell of a shared machine hits them alike); returns
    [(median wall seconds, median peak RSS)] in the order of cmds."""
    walls, rsss = [[] for _ in cmds], [[] for _ in cmds]
    for i in range(runs):
        for k in [(j + i) % len(cmds) for j in range(len(cmds))]:
            wall, rss, _ = run_measured(cmds[k])
            walls[k].append(wall)
            rsss[k].append(rss)
    return [(statistics.median(w), statistics.median(r)) for w, r in zip(walls, rsss)]


def silt_runs(a, work, name, args, **row):
    """Runs `silt ARGS -o work/silt-NAME.parquet` (and, with --silt-old, the old binary writing
    work/silt-old-NAME.parquet, interleaved); returns the result rows."""
    bins = [("silt", a.silt)] + ([("silt-old", a.silt_old)] if a.silt_old else [])
    outs = [work / f"{tool}-{name}.parquet" for tool, _ in bins]
    cmds = [[b] + args[:2] + ["-o", str(o)] + args[2:] + a.silt_args.split() for (_, b), o in zip(bins, outs)]
    meds = run_interleaved(cmds, a.runs)
    return [dict(row, tool=tool, wall=wall, rss=rss, bytes=o.stat().st_size, path=o)
            for (tool, _), o, (wall, rss) in zip(bins, outs, meds)]


def scan_estimate(path, columns, preds):
    """(row groups, row groups kept, bytes scanned, bytes of the whole file) for a query that
    reads `columns` with `preds` = {column: (lo, hi)} (inclusive), pruning on min/max stats."""
    import pyarrow.parquet as pq

    md = pq.ParquetFile(path).metadata
    names = [md.schema.column(i).path for i in range(md.num_columns)]
    kept, scanned = 0, 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        ok = True
        for col, (lo, hi) in preds.items():
            st = rg.column(names.index(col)).statistics
            if st is None or not st.has_min_max:
                continue
            mn, mx = st.min, st.max
            if hasattr(mn, "timestamp"):  # datetime from a timestamp column: to epoch ms
                mn, mx = int(mn.timestamp() * 1000), int(mx.timestamp() * 1000)
            if mx < lo or mn > hi:
                ok = False
        if ok:
            kept += 1
            scanned += sum(rg.column(names.index(c)).total_compressed_size for c in columns)
    return md.num_row_groups, kept, scanned, os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=3, metavar=("SRC", "OUT", "CODEC"), help=argparse.SUPPRESS)
    ap.add_argument("--silt", help="path to the silt binary")
    ap.add_argument("--bytes", default="255MB", help="MessagePack size of the generated hour (default 255MB)")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--runs", type=int, default=3, help="runs per configuration; medians are reported (default 3)")
    ap.add_argument("--silt-args", default="", help="extra arguments for every `silt convert`")
    ap.add_argument("--silt-old", help="a second silt binary (e.g. the previous commit's), run interleaved with "
                    "--silt on every silt configuration; the report adds silt/silt-old ratios")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "silt-weblogs"))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    a = ap.parse_args()
    if a.worker:
        worker_duckdb(*a.worker)
        return
    if not a.silt:
        sys.exit("--silt is required")
    import duckdb
    import pyarrow

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    for f in work.glob("*.parquet"):
        f.unlink()
    mp, nd = work / "nginx.msgpack", work / "nginx.ndjson"
    gen_out = {}
    for path, fmt in ((mp, "msgpack"), (nd, "ndjson")):
        wall, _, out = run_measured([a.silt, "generate", "docker-nginx", "--bytes", a.bytes, "--seed", a.seed,
                                     "--format", fmt, "-o", str(path)])
        m = re.search(r"(\d+) records \((\d+) access lines, (\d+) with status 200\)", out)
        gen_out[fmt] = tuple(int(x) for x in m.groups())
        print(f"generated {path.name}: {gen_out[fmt][0]} records, {path.stat().st_size / 1e6:.1f} MB in {wall:.1f} s")
    assert gen_out["msgpack"] == gen_out["ndjson"], "msgpack and NDJSON records differ"
    records, _, expected_200 = gen_out["msgpack"]

    runs = []  # dicts: tool, input, log, codec, wall, rss, bytes, path
    for codec in ("snappy", "zstd"):
        out = work / f"duckdb-{codec}.parquet"
        wall, rss = run_median([sys.executable, __file__, "--worker", str(nd), str(out), codec], a.runs)
        runs.append(dict(tool="duckdb", input="ndjson", log="string", codec=codec, wall=wall, rss=rss,
                         bytes=out.stat().st_size, path=out))
        for inp, src, fmt in (("msgpack", mp, "msgpack"), ("ndjson", nd, "json")):
            for log in ("string", "parsed"):
                args = ["convert", str(src), "--format", fmt, "--time-field", "log_time",
                        "--time-unit", "ms", "--codec", codec] + (["--parse-field", "log=access"] if log == "parsed" else [])
                runs += silt_runs(a, work, f"{inp}-{log}-{codec}", args, input=inp, log=log, codec=codec)
        if codec == "zstd":
            # Small row groups, to show min/max pruning of the 12:00-12:10 question on silt's
            # time-sorted files (at the default 32 MiB a whole hour is one row group).
            args = ["convert", str(mp), "--format", "msgpack", "--time-field", "log_time", "--time-unit", "ms",
                    "--codec", codec, "--parse-field", "log=access", "--row-group-size", "1MiB"]
            runs += silt_runs(a, work, "msgpack-parsed-zstd-rg1mib", args, input="msgpack", log="parsed",
                              codec=codec, note="1 MiB row groups")
        for r in [r for r in runs if r["codec"] == codec]:
            print(f"{r['tool']:6} {r['input']:7} log={r['log']:6} {codec:6}: {r['wall']:6.2f} s "
                  f"{r['rss'] / 2**20:7.1f} MiB {r['bytes'] / 1e6:7.2f} MB")

    # Ratios against DuckDB at the same codec.
    base = {r["codec"]: r for r in runs if r["tool"] == "duckdb"}
    for r in runs:
        b = base[r["codec"]]
        r["wall_x"], r["rss_x"], r["bytes_x"] = r["wall"] / b["wall"], r["rss"] / b["rss"], r["bytes"] / b["bytes"]

    # The two Athena questions on every output.
    con = duckdb.connect()
    hour = (START_MS, START_MS + 3_600_000 - 1)
    ten = (START_MS, START_MS + TEN_MIN_MS - 1)
    questions = []
    for r in runs:
        p = r["path"]
        if r["tool"] == "duckdb":
            t_lo, t_hi = "1711281600000", str(START_MS + TEN_MIN_MS)
        else:
            t_lo, t_hi = "TIMESTAMPTZ '2024-03-24 12:00:00+00'", "TIMESTAMPTZ '2024-03-24 12:10:00+00'"
        cond = "status = 200" if r["log"] == "parsed" else "log LIKE '%\" 200 %'"
        cols = ["status"] if r["log"] == "parsed" else ["log"]
        for q, tcond, rng in (("hour", "", hour), ("12:00-12:10", f" AND log_time >= {t_lo} AND log_time < {t_hi}", ten)):
            sql = f"SELECT count(*) FROM '{p}' WHERE {cond}{tcond}"
            t0 = time.perf_counter()
            n = con.execute(sql).fetchone()[0]
            secs = time.perf_counter() - t0
            qcols = cols + (["log_time"] if tcond else [])
            preds = {"log_time": rng} if tcond else {}
            if r["log"] == "parsed":
                preds["status"] = (200, 200)
            groups, kept, scanned, total = scan_estimate(p, qcols, preds)
            questions.append(dict(file=p.name, question=q, where=cond + tcond.replace(t_lo, "12:00").replace(t_hi, "12:10"),
                                  count=n, secs=secs, row_groups=groups, row_groups_read=kept,
                                  bytes_scanned=scanned, file_bytes=total))
    # Independent check: the generator counted its status-200 lines.
    for q in questions:
        if q["question"] == "hour" and q["count"] != expected_200:
            sys.exit(f"{q['file']}: {q['count']} status-200 lines, the generator wrote {expected_200}")
    ten_counts = {q["count"] for q in questions if q["question"] != "hour"}
    if len(ten_counts) != 1:
        sys.exit(f"the 12:00-12:10 answers differ between files: {ten_counts}")

    # Report.
    def ok(x, goal):
        return f"{x:.2f}x {'ok' if x <= goal else 'MISSED'}"

    lines = [
        f"# Docker/nginx logs -> Parquet ({subprocess.run([a.silt, '--version'], capture_output=True, text=True).stdout.strip()}, "
        f"DuckDB {duckdb.__version__}, pyarrow {pyarrow.__version__})",
        "",
        f"Input: {records} records (one hour, {gen_out['msgpack'][1]} access lines), MessagePack "
        f"{mp.stat().st_size / 1e6:.1f} MB, NDJSON {nd.stat().st_size / 1e6:.1f} MB; {os.cpu_count()} CPUs. "
        f"Median of {a.runs} runs each (wall and peak RSS). DuckDB runs in a Python process (read_json with the five typed columns -> COPY).",
        "",
        "| tool | input | log | codec | wall s | peak RSS MiB | output MB | wall x | RSS x | bytes x |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        if r["tool"] == "duckdb":
            ratios = "| 1 | 1 | 1 |"
        else:
            bgoal = GOALS["bytes_parsed"] if r["log"] == "parsed" else GOALS["bytes"]
            ratios = f"| {ok(r['wall_x'], GOALS['wall'])} | {ok(r['rss_x'], GOALS['rss'])} | {ok(r['bytes_x'], bgoal)} |"
        note = f" ({r['note']})" if r.get("note") else ""
        lines.append(f"| {r['tool']} | {r['input']} | {r['log']}{note} | {r['codec']} | {r['wall']:.2f} | "
                     f"{r['rss'] / 2**20:.0f} | {r['bytes'] / 1e6:.2f} {ratios}")
    if a.silt_old:
        old = {(r["input"], r["log"], r["codec"], r.get("note")): r for r in runs if r["tool"] == "silt-old"}
        lines += ["", f"## silt / silt-old ({a.silt_old}), interleaved runs", "",
                  "| input | log | codec | wall | peak RSS | bytes |", "|---|---|---|---:|---:|---:|"]
        for r in runs:
            o = old.get((r["input"], r["log"], r["codec"], r.get("note")))
            if r["tool"] == "silt" and o:
                note = f" ({r['note']})" if r.get("note") else ""
                lines.append(f"| {r['input']} | {r['log']}{note} | {r['codec']} | {r['wall'] / o['wall']:.2f} | "
                             f"{r['rss'] / o['rss']:.2f} | {r['bytes'] / o['bytes']:.3f} |")
    lines += [
        "",
        f"Goals (silt/DuckDB, same codec): wall <= {GOALS['wall']}x, RSS <= {GOALS['rss']}x, bytes <= {GOALS['bytes']}x, "
        f"with log parsed bytes <= {GOALS['bytes_parsed']}x.",
        "",
        f"## The two questions (DuckDB {duckdb.__version__} querying each file; generator's own count of status-200 lines: {expected_200})",
        "",
        "| file | question | WHERE | count | query s | row groups read / total | bytes scanned | file bytes |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for q in questions:
        lines.append(f"| {q['file']} | {q['question']} | `{q['where']}` | {q['count']} | {q['secs']:.3f} | "
                     f"{q['row_groups_read']} / {q['row_groups']} | {q['bytes_scanned']:,} | {q['file_bytes']:,} |")
    lines += [
        "",
        "bytes scanned = compressed size of the column chunks the query references, in the row groups whose "
        "min/max statistics do not rule the predicate out (from the Parquet footers).",
    ]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    outdir = Path(a.out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "weblogs.md").write_text(text)
    with open(outdir / "weblogs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "tool", "input", "log", "codec", "wall_s", "rss_mib", "output_bytes", "wall_x", "rss_x", "bytes_x",
                    "question", "count", "row_groups_read", "row_groups", "bytes_scanned"])
        for r in runs:
            w.writerow(["convert", r["tool"], r["input"], r["log"], r["codec"], f"{r['wall']:.3f}", f"{r['rss'] / 2**20:.1f}",
                        r["bytes"], f"{r['wall_x']:.3f}", f"{r['rss_x']:.3f}", f"{r['bytes_x']:.3f}", "", "", "", "", ""])
        for q in questions:
            w.writerow(["query", q["file"], "", "", "", f"{q['secs']:.4f}", "", q["file_bytes"], "", "", "",
                        q["question"], q["count"], q["row_groups_read"], q["row_groups"], q["bytes_scanned"]])
    print(f"wrote {outdir / 'weblogs.md'} and {outdir / 'weblogs.csv'}")


if __name__ == "__main__":
    main()
