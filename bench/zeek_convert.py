#!/usr/bin/env python3
"""Zeek TSV -> Parquet (zstd level 1) conversion benchmark: silt vs DuckDB vs pyarrow.

Run through bench/zeek-convert.sh, which builds silt in release mode and provides the Python
venv (scripts/pyenv.sh). This script:
  1. generates N Zeek conn and dns records (`silt generate zeek --log conn ...`),
  2. converts each file with every tool, RUNS times, interleaved (run 1 of every tool, then run 2,
     ..., so a slow spell of a shared machine hits all alike; --silt-old adds a second silt
     binary, e.g. the previous commit's, to check a change for regressions), each run a separate
     process whose wall time and peak RSS are measured (os.wait4 rusage of that very child, so /usr/bin/time is not
     needed and the numbers are per-process, not cumulative),
  3. checks every tool wrote the same number of rows, and prints/writes a table of medians with
     the silt/DuckDB and silt/pyarrow ratios next to the targets.

Baselines are typed readers with an explicit column spec derived from the log's own #fields and
#types header (see column_spec below and docs/benchmarks.md):
  time -> TIMESTAMP (UTC, microseconds; read as DOUBLE then converted), interval/double -> DOUBLE,
  count -> UBIGINT, int -> BIGINT, port -> USMALLINT, bool -> BOOLEAN (T/F),
  addr/subnet/string/enum -> VARCHAR, set[...]/vector[...] -> VARCHAR (kept as Zeek's
  comma-joined text: a cheaper type than silt's List, which favours the baselines),
  '-' -> NULL. Column names stay flat ("id.orig_h"); silt nests them into an `id` struct.
"""

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {"wall": 0.5, "rss": 0.5, "bytes": 0.9}  # silt / DuckDB, all zstd level 1


# ----------------------------------------------------------------------------------------------
# Column spec from the Zeek header

def zeek_header(path):
    """Returns ([(name, zeek_type)], number of leading '#' lines)."""
    fields, types, n = None, None, 0
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("#"):
                break
            n += 1
            line = line.rstrip("\n")
            if line.startswith("#fields\t"):
                fields = line.split("\t")[1:]
            elif line.startswith("#types\t"):
                types = line.split("\t")[1:]
    if not fields or not types or len(fields) != len(types):
        sys.exit(f"{path}: no usable #fields/#types header")
    return list(zip(fields, types)), n


DUCK = {
    "time": "DOUBLE",  # converted with to_timestamp() below
    "interval": "DOUBLE",
    "double": "DOUBLE",
    "count": "UBIGINT",
    "int": "BIGINT",
    "port": "USMALLINT",
    "bool": "BOOLEAN",
}


def duck_type(zt):
    return DUCK.get(zt, "VARCHAR")


def arrow_type(zt):
    import pyarrow as pa

    return {
        "time": pa.float64(),  # converted to timestamp[us, UTC] after reading
        "interval": pa.float64(),
        "double": pa.float64(),
        "count": pa.uint64(),
        "int": pa.int64(),
        "port": pa.uint16(),
        "bool": pa.bool_(),
    }.get(zt, pa.string())


# ----------------------------------------------------------------------------------------------
# Workers (each runs in its own process so its RSS is its own)

def worker_duckdb(src, out):
    import duckdb

    cols, _ = zeek_header(src)
    spec = ", ".join(f"'{n}': '{duck_type(t)}'" for n, t in cols)
    select = ", ".join(
        f'to_timestamp("{n}") AS "{n}"' if t == "time" else f'"{n}"' for n, t in cols
    )
    sql = (
        f"COPY (SELECT {select} FROM read_csv('{src}', delim='\\t', header=false, comment='#', "
        f"nullstr='-', quote='', escape='', auto_detect=false, columns={{{spec}}})) "
        f"TO '{out}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)"
    )
    duckdb.connect().execute(sql)


def worker_pyarrow(src, out):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    cols, nhead = zeek_header(src)
    names = [n for n, _ in cols]
    table = pcsv.read_csv(
        src,
        read_options=pcsv.ReadOptions(column_names=names, skip_rows=nhead),
        parse_options=pcsv.ParseOptions(
            delimiter="\t",
            quote_char=False,
            escape_char=False,
            # The trailing "#close" line has 2 columns: pyarrow's CSV reader has no comment
            # option, so rows with the wrong column count are skipped instead.
            invalid_row_handler=lambda row: "skip",
        ),
        convert_options=pcsv.ConvertOptions(
            column_types={n: arrow_type(t) for n, t in cols},
            null_values=["-"],
            strings_can_be_null=True,
            true_values=["T"],
            false_values=["F"],
        ),
    )
    for i, (n, t) in enumerate(cols):
        if t == "time":
            us = pc.cast(pc.round(pc.multiply(table.column(i), 1e6)), pa.int64())
            table = table.set_column(i, n, pc.cast(us, pa.timestamp("us", tz="UTC")))
    pq.write_table(table, out, compression="zstd", compression_level=1)


# ----------------------------------------------------------------------------------------------
# Measurement

def run_measured(cmd, env=None):
    """Runs cmd; returns (wall seconds, peak RSS bytes) of that process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    # wait4 gives the rusage of exactly this child (ru_maxrss in KiB on Linux).
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {' '.join(map(str, cmd))}\n{err[-3000:]}")
    return wall, ru.ru_maxrss * 1024


def tree_bytes(path):
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def parquet_rows(path):
    import pyarrow.parquet as pq

    p = Path(path)
    files = [p] if p.is_file() else sorted(p.rglob("*.parquet"))
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def count_records(path):
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if not line.startswith(b"#"):
                n += 1
    return n


def fmt_ratio(x, target):
    if x is None:
        return "n/a"
    mark = "ok" if x <= target else "MISS"
    return f"{x:.2f} (target <= {target}, {mark})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=3, metavar=("TOOL", "SRC", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--silt", help="path to the silt binary")
    ap.add_argument("--gen", help="generator command prefix (e.g. 'silt generate zeek')")
    ap.add_argument("--events", type=int, default=2_000_000, help="records per dataset (default 2000000)")
    ap.add_argument("--runs", type=int, default=3, help="runs per tool and dataset; the median is reported (default 3)")
    ap.add_argument("--datasets", default="conn,dns", help="Zeek logs to convert (default conn,dns)")
    ap.add_argument("--tools", default="silt,duckdb,pyarrow", help="tools to run (default silt,duckdb,pyarrow)")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "silt-bench"),
                    help="scratch directory for generated logs and outputs (default $TMPDIR/silt-bench)")
    ap.add_argument("--silt-args", default="", help="extra arguments for `silt import`")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"), help="where the .md/.csv results go")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--silt-old", help="a second silt binary (e.g. the previous commit's) run as tool "
                    "'silt-old', interleaved with the others; the report adds silt/silt-old ratios")
    a = ap.parse_args()

    if a.worker:
        tool, src, out = a.worker
        {"duckdb": worker_duckdb, "pyarrow": worker_pyarrow}[tool](src, out)
        return

    tools = [t for t in a.tools.split(",") if t]
    if a.silt_old and "silt-old" not in tools:
        tools.append("silt-old")
    datasets = [d for d in a.datasets.split(",") if d]
    if "silt" in tools and not a.silt:
        sys.exit("--silt is required to run the silt tool")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    results = []  # dicts

    for ds in datasets:
        src_dir = work / f"gen-{ds}-{a.events}"
        src = src_dir / f"{ds}.log"
        if not src.exists():
            print(f"== generating {a.events} {ds} records", flush=True)
            cmd = a.gen.split() + ["--log", ds, "--events", str(a.events), "-o", str(src_dir)]
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            print(f"   {src} ({tree_bytes(src) / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s", flush=True)
        expected = count_records(src)
        in_mb = tree_bytes(src) / 1e6
        # Runs are interleaved (run 1 of every tool, then run 2, ... with the order rotated each
        # round) so that a slow spell of this shared machine hits every tool alike.
        acc = {t: {"walls": [], "rsss": [], "size": None, "rows": None} for t in tools}
        with open(src, "rb") as f:  # warm the page cache once, for every tool alike
            while f.read(1 << 24):
                pass
        for i in range(a.runs):
            for tool in tools[i % len(tools):] + tools[:i % len(tools)]:
                out = work / f"out-{tool}-{ds}"
                shutil.rmtree(out, ignore_errors=True)
                if tool in ("silt", "silt-old"):
                    binary = a.silt if tool == "silt" else a.silt_old
                    cmd = [binary, "import", "zeek", str(src), "--lake", str(out / "lake"),
                           "--codec", "zstd", "--level", "1", "--quiet"] + a.silt_args.split()
                    target = out / "lake"
                    out.mkdir(parents=True)
                else:
                    out.mkdir(parents=True)
                    target = out / f"{ds}.parquet"
                    cmd = [sys.executable, __file__, "--worker", tool, str(src), str(target)]
                wall, rss = run_measured(cmd)
                r = acc[tool]
                r["walls"].append(wall)
                r["rsss"].append(rss)
                r["size"] = tree_bytes(target)
                r["rows"] = parquet_rows(target)
                print(f"   {tool:8} {ds:5} run {i + 1}: {wall:7.2f} s  {rss / 2**20:8.1f} MiB  "
                      f"{r['size'] / 1e6:8.1f} MB  {r['rows']} rows", flush=True)
                shutil.rmtree(out, ignore_errors=True)
        for tool in tools:
            r = acc[tool]
            if r["rows"] != expected:
                print(f"!! {tool} wrote {r['rows']} rows for {ds}, input has {expected}", file=sys.stderr)
            results.append({
                "tool": tool, "dataset": ds, "input_mb": round(in_mb, 1), "rows": r["rows"],
                "expected_rows": expected,
                "wall_s": statistics.median(r["walls"]), "rss_mb": statistics.median(r["rsss"]) / 2**20,
                "output_mb": r["size"] / 1e6, "runs": a.runs,
            })

    # ------------------------------------------------------------------------------------------
    # Report
    by = {(r["tool"], r["dataset"]): r for r in results}
    header = ["tool", "dataset", "rows", "input MB", "wall s", "peak RSS MiB", "output MB"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        lines.append(
            f"| {r['tool']} | {r['dataset']} | {r['rows']} | {r['input_mb']:.1f} | {r['wall_s']:.2f} | "
            f"{r['rss_mb']:.1f} | {r['output_mb']:.1f} |"
        )
    ratio_lines = []
    for ds in datasets:
        s = by.get(("silt", ds))
        for base in ("duckdb", "pyarrow", "silt-old"):
            b = by.get((base, ds))
            if not s or not b:
                continue
            w = s["wall_s"] / b["wall_s"]
            m = s["rss_mb"] / b["rss_mb"]
            o = s["output_mb"] / b["output_mb"] if b["output_mb"] else None
            if base == "duckdb":
                ratio_lines.append(
                    f"| silt/duckdb | {ds} | {fmt_ratio(w, TARGETS['wall'])} | {fmt_ratio(m, TARGETS['rss'])} | "
                    f"{fmt_ratio(o, TARGETS['bytes'])} |"
                )
            else:
                ratio_lines.append(f"| silt/{base} | {ds} | {w:.2f} | {m:.2f} | {o:.2f} |")
    versions = {"python": platform.python_version()}
    try:
        import duckdb
        import pyarrow

        versions["duckdb"] = duckdb.__version__
        versions["pyarrow"] = pyarrow.__version__
    except ImportError:
        pass
    if a.silt:
        try:
            versions["silt"] = subprocess.run([a.silt, "--version"], capture_output=True, text=True).stdout.strip().removeprefix("silt ")
        except OSError:
            pass
    env_line = (f"{a.events} records per dataset, median of {a.runs} runs, zstd level 1, "
                f"{os.cpu_count()} CPUs; " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    table = "\n".join(lines)
    ratios = "\n".join(
        ["| ratio | dataset | wall | peak RSS | output bytes |", "|---|---|---|---|---|"] + ratio_lines
    ) if ratio_lines else ""
    text = f"{env_line}\n\n{table}\n\n{ratios}\n"
    print()
    print(text)
    outdir = Path(a.out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "zeek-convert.md").write_text(
        "# Zeek TSV -> Parquet conversion (generated by bench/zeek-convert.sh)\n\n"
        f"Run {time.strftime('%Y-%m-%d %H:%M:%S %Z')}. {text}"
    )
    with open(outdir / "zeek-convert.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0].keys()) if results else ["tool"])
        w.writeheader()
        for r in results:
            w.writerow(r)
    (outdir / "zeek-convert.json").write_text(json.dumps({"env": versions, "results": results}, indent=1))
    print(f"wrote {outdir / 'zeek-convert.md'} and .csv")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    if any(r["rows"] != r["expected_rows"] for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
