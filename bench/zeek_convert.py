#!/usr/bin/env python3
"""Zeek TSV -> Parquet (zstd level 1) conversion benchmark: silt vs DuckDB vs pyarrow.

Run through bench/zeek-convert.sh, which builds silt in release mode and provides the Python
venv (scripts/pyenv.sh). This script:
  1. makes N Zeek conn and dns records per input family (--family gen|real|both):
     gen:  the generator's dense data (`silt generate zeek --log conn ...`);
     real: the corpus logs zeek-tsv/vast/conn.log and dns.log (8,462 and 32 real records)
           repeated with shifted times to N records at the conn log's own density (8,462
           records a day, ~350 an hour: 2M records span ~236 days), every copy with new unique
           uids and shifted addresses (see make_real_log), cached in OUT/zeek-real/,
  2. converts each file with every tool, RUNS times, interleaved (run 1 of every tool, then run 2,
     ..., so a slow spell of a shared machine hits all alike; --silt-old adds a second silt
     binary, e.g. the previous commit's, to check a change for regressions), each run a separate
     process whose wall time and peak RSS are measured (os.wait4 rusage of that very child, so /usr/bin/time is not
     needed and the numbers are per-process, not cumulative; bench/peak_rss.py warns when a figure
     could be this process's own peak, which Linux lends to every child it forks),
  3. checks every tool wrote the same number of rows, and prints/writes a table of medians
     (with the bytes and the number of files each tool wrote) and, per family, the silt/DuckDB
     ratios next to the targets and the silt/pyarrow (and silt/duckdb-hourly: DuckDB writing
     PARTITION_BY (dt, hour), real family only) ratios.

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
import zlib
from pathlib import Path
from peak_rss import child_peak

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
# The "real" family: corpus logs repeated with shifted times, new uids and shifted addresses

REAL_VERSION = 1  # bump when make_real_log's output changes (it is part of the cache key)
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
M64 = (1 << 64) - 1
KEEP_ADDRS = {"0.0.0.0", "255.255.255.255", "::", "-"}  # special addresses stay as they are


def corpus_dir():
    if os.environ.get("SILT_CORPUS"):
        return Path(os.environ["SILT_CORPUS"])
    return Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def mix64(x):
    """splitmix64's finalizer: a bijection on 64-bit integers, so distinct inputs never collide."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & M64
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & M64
    return x ^ (x >> 31)


def real_uid(g, salt):
    """Zeek-style uid ('C' + base62 of 96 bits) for the g-th record of the output: the high 64
    bits are a bijection of g (plus a per-log salt), so every record gets its own uid; the digits
    look random, as Zeek's do, so neither dictionaries nor zstd find copies in them."""
    x = mix64((g + salt) & M64)
    v = (x << 32) | (mix64(x ^ 0xA5A5A5A5A5A5A5A5) >> 32)
    out = []
    while v:
        v, r = divmod(v, 62)
        out.append(B62[r])
    return "C" + "".join(reversed(out))


def addr_shifter(addrs):
    """Returns f(addr, k): the address of copy k. IPv4 moves within its /16 (the low 16 bits plus
    a per-copy offset, mod 2^16), IPv6 within its last group; copy 0 is the original, the
    mapping within a copy is one-to-one, and 0.0.0.0, 255.255.255.255 and :: stay."""
    import ipaddress

    v4, v6 = {}, {}
    for a in addrs:
        if a in KEEP_ADDRS:
            continue
        if ":" in a:
            v6[a] = int(ipaddress.IPv6Address(a))
        else:
            o = a.split(".")
            v4[a] = (f"{o[0]}.{o[1]}.", (int(o[2]) << 8) | int(o[3]))
    cache = {}

    def shift(a, k):
        d = (k * 40503) & 0xFFFF  # odd multiplier: distinct offsets for 65,536 copies
        if d == 0 or a in KEEP_ADDRS:
            return a
        p = v4.get(a)
        if p is not None:
            lo = (p[1] + d) & 0xFFFF
            return f"{p[0]}{lo >> 8}.{lo & 255}"
        key = (a, d)
        r = cache.get(key)
        if r is None:
            x = v6[a]
            r = ipaddress.IPv6Address((x & ~0xFFFF) | (((x & 0xFFFF) + d) & 0xFFFF)).compressed
            if len(cache) > 200_000:
                cache.clear()
            cache[key] = r
        return r

    return shift


def make_real_log(src, dst, events, period_us):
    """Writes `events` records made from the Zeek TSV log `src` to `dst`: the records sorted by
    ts, repeated as copies k = 0, 1, ... shifted by k * period_us, merged so that ts ascends
    (copies overlap when the log lasts longer than the period). In copy k every record gets a
    new unique uid (real_uid) and its addr columns (id.orig_h, id.resp_h) the copy's shift
    (addr_shifter); every other field is kept verbatim, and so is the header, with #open and
    #close set to the first and last ts. Plain streaming Python: the copies in flight sit on a
    heap, one entry each."""
    import heapq

    cols, _ = zeek_header(src)
    names = [n for n, _ in cols]
    ts_i, uid_i = names.index("ts"), names.index("uid")
    addr_is = [i for i, (_, t) in enumerate(cols) if t == "addr"]
    head, recs = [], []
    with open(src, "r", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                if not recs:
                    head.append(line)
                continue
            fs = line.split("\t")
            sec, _, frac = fs[ts_i].partition(".")
            recs.append((int(sec) * 1_000_000 + int(frac.ljust(6, "0")[:6]), fs))
    recs.sort(key=lambda r: r[0])
    t0, n = recs[0][0], len(recs)
    offs = [t - t0 for t, _ in recs]
    shift = addr_shifter({r[1][i] for r in recs for i in addr_is})
    rows = [r[1] for r in recs]
    salt = zlib.crc32(Path(src).name.encode()) << 40  # conn and dns get different uids

    def stamp(us):
        return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(us // 1_000_000))

    tmp = Path(str(dst) + ".inprogress")
    written, t_last = 0, t0
    with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as o:
        for h in head:
            if h.startswith("#open\t"):
                h = "#open\t" + stamp(t0)
            elif h.startswith("#close\t"):
                continue
            o.write(h + "\n")
        heap = [(t0, 0, 0)]  # (ts in µs, copy, record): the next record of each copy in flight
        buf = []
        while heap and written < events:
            t, k, i = heapq.heappop(heap)
            if i + 1 < n:
                heapq.heappush(heap, (t0 + k * period_us + offs[i + 1], k, i + 1))
            if i == 0:  # copy k started: copy k + 1 starts no earlier than this
                heapq.heappush(heap, (t0 + (k + 1) * period_us, k + 1, 0))
            fs = rows[i][:]
            fs[ts_i] = f"{t // 1_000_000}.{t % 1_000_000:06d}"
            fs[uid_i] = real_uid(k * n + i, salt)
            for j in addr_is:
                fs[j] = shift(fs[j], k)
            buf.append("\t".join(fs))
            written += 1
            t_last = t
            if len(buf) >= 8192:
                o.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            o.write("\n".join(buf) + "\n")
        o.write("#close\t" + stamp(t_last) + "\n")
    tmp.rename(dst)
    return written, t0, t_last


def real_input(ds, events, per_hour, cache_dir):
    """The cached real-family input for dataset `ds` (conn or dns); made on first use. Each
    copy of the corpus log is shifted by its record count / per_hour hours, so the output has
    `per_hour` records an hour on average whatever the log."""
    src = corpus_dir() / "zeek-tsv" / "vast" / f"{ds}.log"
    if not src.exists():
        sys.exit(f"{src}: corpus log not found (set SILT_CORPUS)")
    n = count_records(src)
    period_us = round(n * 3600e6 / per_hour)
    st = src.stat()
    key = f"v{REAL_VERSION}-{n}-{st.st_size}-{period_us}"
    dst = Path(cache_dir) / f"real-{ds}-{events}-{key}.log"
    if dst.exists():
        print(f"== reusing {dst}", flush=True)
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    print(f"== making {events} real-derived {ds} records from {src} ({n} records, one copy "
          f"every {period_us / 3600e6:.3f} h)", flush=True)
    t = time.perf_counter()
    written, first, last = make_real_log(src, dst, events, period_us)
    print(f"   {dst} ({tree_bytes(dst) / 1e6:.1f} MB, {written} records over "
          f"{(last - first) / 86400e6:.1f} days) in {time.perf_counter() - t:.1f} s", flush=True)
    return dst


# ----------------------------------------------------------------------------------------------
# Workers (each runs in its own process so its RSS is its own)

def duckdb_select(src):
    cols, _ = zeek_header(src)
    spec = ", ".join(f"'{n}': '{duck_type(t)}'" for n, t in cols)
    select = ", ".join(
        f'to_timestamp("{n}") AS "{n}"' if t == "time" else f'"{n}"' for n, t in cols
    )
    return (f"SELECT {select} FROM read_csv('{src}', delim='\\t', header=false, comment='#', "
            f"nullstr='-', quote='', escape='', auto_detect=false, columns={{{spec}}})")


def worker_duckdb(src, out):
    import duckdb

    sql = (f"COPY ({duckdb_select(src)}) "
           f"TO '{out}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)")
    duckdb.connect().execute(sql)


def worker_duckdb_hourly(src, out):
    """DuckDB writing hive partitions dt=YYYY-MM-DD/hour=H (UTC), as silt's hour layout does;
    the partition columns live in the paths only (DuckDB's default)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    sql = (f"COPY (SELECT *, strftime(ts, '%Y-%m-%d') AS dt, hour(ts) AS hour "
           f"FROM ({duckdb_select(src)})) TO '{out}' "
           f"(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, PARTITION_BY (dt, hour))")
    con.execute(sql)


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
    # wait4 gives this child's rusage (its ru_maxrss: see bench/peak_rss.py).
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {' '.join(map(str, cmd))}\n{err[-3000:]}")
    return wall, child_peak(ru, cmd)


def tree_bytes(path):
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def tree_files(path, pattern="*"):
    """Files under path matching pattern (1 for a single file)."""
    p = Path(path)
    if p.is_file():
        return 1
    return sum(1 for f in p.rglob(pattern) if f.is_file())


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
    ap.add_argument("--gen", help="generator command prefix (e.g. 'silt generate zeek'); needed for --family gen")
    ap.add_argument("--family", default="both", choices=["gen", "real", "both"],
                    help="input family: gen (the generator's dense data), real (the corpus logs "
                         "repeated with shifted times, uids and addresses), both (default)")
    ap.add_argument("--real-per-hour", type=float, default=None,
                    help="records per hour of the real family (default: the corpus conn.log's own "
                         "density, 8,462 records a day, i.e. one copy of conn.log per day)")
    ap.add_argument("--events", type=int, default=2_000_000, help="records per dataset (default 2000000)")
    ap.add_argument("--runs", type=int, default=3, help="runs per tool and dataset; the median is reported (default 3)")
    ap.add_argument("--datasets", default="conn,dns", help="Zeek logs to convert (default conn,dns)")
    ap.add_argument("--tools", default="silt,duckdb,pyarrow,duckdb-hourly",
                    help="tools to run (default silt,duckdb,pyarrow,duckdb-hourly; duckdb-hourly, "
                         "DuckDB with PARTITION_BY (dt, hour), runs on the real family only)")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "silt-bench"),
                    help="scratch directory for generated logs and outputs (default $TMPDIR/silt-bench)")
    ap.add_argument("--silt-args", default="", help="extra arguments for `silt import`")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"),
                    help="where the .md/.csv results go; the real family's inputs are cached in OUT/zeek-real/")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--silt-old", help="a second silt binary (e.g. the previous commit's) run as tool "
                    "'silt-old', interleaved with the others; the report adds silt/silt-old ratios")
    a = ap.parse_args()

    if a.worker:
        tool, src, out = a.worker
        {"duckdb": worker_duckdb, "pyarrow": worker_pyarrow,
         "duckdb-hourly": worker_duckdb_hourly}[tool](src, out)
        return

    tools = [t for t in a.tools.split(",") if t]
    if a.silt_old and "silt-old" not in tools:
        tools.append("silt-old")
    unknown = set(tools) - {"silt", "silt-old", "duckdb", "pyarrow", "duckdb-hourly"}
    if unknown:
        sys.exit(f"unknown tools: {', '.join(sorted(unknown))}")
    datasets = [d for d in a.datasets.split(",") if d]
    families = ["gen", "real"] if a.family == "both" else [a.family]
    if "silt" in tools and not a.silt:
        sys.exit("--silt is required to run the silt tool")
    if "gen" in families and not a.gen:
        sys.exit("--gen is required for the gen family (or use --family real)")
    per_hour = a.real_per_hour
    if "real" in families and per_hour is None:
        per_hour = count_records(corpus_dir() / "zeek-tsv" / "vast" / "conn.log") / 24
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    results = []  # dicts

    for fam in families:
        fam_tools = [t for t in tools if fam == "real" or t != "duckdb-hourly"]
        for ds in datasets:
            if fam == "real":
                src = real_input(ds, a.events, per_hour, Path(a.out) / "zeek-real")
            else:
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
            # Runs are interleaved (run 1 of every tool, then run 2, ... with the order rotated
            # each round) so that a slow spell of this shared machine hits every tool alike.
            acc = {t: {"walls": [], "rsss": [], "size": None, "rows": None, "files": None,
                       "parquet_files": None} for t in fam_tools}
            with open(src, "rb") as f:  # warm the page cache once, for every tool alike
                while f.read(1 << 24):
                    pass
            n_tools = len(fam_tools)
            for i in range(a.runs):
                for tool in fam_tools[i % n_tools:] + fam_tools[:i % n_tools]:
                    out = work / f"out-{tool}-{fam}-{ds}"
                    shutil.rmtree(out, ignore_errors=True)
                    out.mkdir(parents=True)
                    if tool in ("silt", "silt-old"):
                        binary = a.silt if tool == "silt" else a.silt_old
                        target = out / "lake"
                        cmd = [binary, "import", "zeek", str(src), "--lake", str(target),
                               "--codec", "zstd", "--level", "1", "--quiet"] + a.silt_args.split()
                    else:
                        target = out / (f"{ds}.parquet" if tool != "duckdb-hourly" else "parts")
                        cmd = [sys.executable, __file__, "--worker", tool, str(src), str(target)]
                    wall, rss = run_measured(cmd)
                    r = acc[tool]
                    r["walls"].append(wall)
                    r["rsss"].append(rss)
                    r["size"] = tree_bytes(target)
                    r["rows"] = parquet_rows(target)
                    r["files"] = tree_files(target)
                    r["parquet_files"] = tree_files(target, "*.parquet")
                    print(f"   {tool:13} {fam:4} {ds:5} run {i + 1}: {wall:7.2f} s  {rss / 2**20:8.1f} MiB  "
                          f"{r['size'] / 1e6:8.1f} MB  {r['files']:6} files  {r['rows']} rows", flush=True)
                    shutil.rmtree(out, ignore_errors=True)
            for tool in fam_tools:
                r = acc[tool]
                if r["rows"] != expected:
                    print(f"!! {tool} wrote {r['rows']} rows for {fam} {ds}, input has {expected}",
                          file=sys.stderr)
                results.append({
                    "family": fam, "tool": tool, "dataset": ds, "input_mb": round(in_mb, 1),
                    "rows": r["rows"], "expected_rows": expected,
                    "wall_s": statistics.median(r["walls"]), "rss_mb": statistics.median(r["rsss"]) / 2**20,
                    "output_mb": r["size"] / 1e6, "files": r["files"],
                    "parquet_files": r["parquet_files"], "runs": a.runs,
                })

    # ------------------------------------------------------------------------------------------
    # Report
    by = {(r["family"], r["tool"], r["dataset"]): r for r in results}
    header = ["family", "tool", "dataset", "rows", "input MB", "wall s", "peak RSS MiB", "output MB",
              "files (parquet)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        lines.append(
            f"| {r['family']} | {r['tool']} | {r['dataset']} | {r['rows']} | {r['input_mb']:.1f} | "
            f"{r['wall_s']:.2f} | {r['rss_mb']:.1f} | {r['output_mb']:.1f} | "
            f"{r['files']} ({r['parquet_files']}) |"
        )
    ratio_lines = []
    for fam in families:
        for ds in datasets:
            s = by.get((fam, "silt", ds))
            for base in ("duckdb", "pyarrow", "duckdb-hourly", "silt-old"):
                b = by.get((fam, base, ds))
                if not s or not b:
                    continue
                w = s["wall_s"] / b["wall_s"]
                m = s["rss_mb"] / b["rss_mb"]
                o = s["output_mb"] / b["output_mb"] if b["output_mb"] else None
                if base == "duckdb":
                    ratio_lines.append(
                        f"| {fam} | silt/duckdb | {ds} | {fmt_ratio(w, TARGETS['wall'])} | "
                        f"{fmt_ratio(m, TARGETS['rss'])} | {fmt_ratio(o, TARGETS['bytes'])} |"
                    )
                else:
                    ratio_lines.append(f"| {fam} | silt/{base} | {ds} | {w:.2f} | {m:.2f} | "
                                       f"{'n/a' if o is None else f'{o:.2f}'} |")
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
    env_line = (f"{a.events} records per dataset, families {', '.join(families)}"
                + (f" (real: {per_hour:.1f} records/hour)" if "real" in families else "")
                + f", median of {a.runs} runs, zstd level 1, {os.cpu_count()} CPUs; "
                + ", ".join(f"{k} {v}" for k, v in versions.items())
                + (f"; silt args `{a.silt_args}`" if a.silt_args else ""))
    table = "\n".join(lines)
    ratios = "\n".join(
        ["| family | ratio | dataset | wall | peak RSS | output bytes |", "|---|---|---|---|---|---|"]
        + ratio_lines
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
        w = csv.DictWriter(f, fieldnames=list(results[0].keys()) if results else ["family", "tool"])
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
