#!/usr/bin/env python3
"""Per-file overhead on small files (issue 21): silt vs DuckDB on the first N records of a real
Zeek log.

For each N (default 100, 300, 1000, 3000), the first N records of the corpus log
(`zeek-tsv/vast/conn.log` in ../shared/corpus or $SILT_CORPUS; --log to choose another) with its
header are imported by `silt import zeek` on its defaults into a fresh lake (one file: N records
of a day make one partition), and written by DuckDB as one Parquet file with the same SELECT and
settings as bench/zeek_convert.py (zstd level 1). Prints, per N: both files' bytes and their
ratio, and where silt's bytes go: column chunks, footer, its `ARROW:schema` and
`silt.source_types` entries, and the rest (bloom filters, page index).

    "$(scripts/pyenv.sh)" bench/small_files.py --silt target/release/silt [--rows 100,300]

Exits 1 if a tool wrote a different row count.
"""

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zeek_convert  # noqa: E402


def anatomy(path):
    """Bytes of a Parquet file: total, footer, column chunks, the rest, and key-value entries."""
    import pyarrow.parquet as pq

    data = Path(path).read_bytes()
    footer = struct.unpack("<I", data[-8:-4])[0]
    md = pq.ParquetFile(path).metadata
    chunks = sum(
        md.row_group(i).column(j).total_compressed_size
        for i in range(md.num_row_groups)
        for j in range(md.num_columns)
    )
    kv = {k.decode(): len(v) for k, v in (md.metadata or {}).items()}
    # 4-byte magic at each end and the 4-byte footer length.
    return {
        "bytes": len(data),
        "footer": footer,
        "chunks": chunks,
        "other": len(data) - footer - chunks - 12,
        "kv": kv,
        "rows": md.num_rows,
    }


def head_records(src, n, out):
    """The header of `src` and its first `n` records."""
    with open(src) as f, open(out, "w") as o:
        taken = 0
        for line in f:
            if line.startswith("#"):
                if line.startswith("#close"):
                    continue
                o.write(line)
            elif taken < n:
                o.write(line)
                taken += 1
    return taken


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--silt", required=True, help="silt binary")
    ap.add_argument("--rows", default="100,300,1000,3000")
    corpus = Path(os.environ.get("SILT_CORPUS", Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"))
    ap.add_argument("--log", default=str(corpus / "zeek-tsv" / "vast" / "conn.log"))
    a = ap.parse_args()
    import duckdb

    work = Path(tempfile.mkdtemp(prefix="silt-small-"))
    bad = False
    print("| rows | silt bytes | DuckDB bytes | silt/DuckDB | silt chunks | DuckDB chunks "
          "| silt footer | DuckDB footer | ARROW:schema | silt.source_types | silt other | DuckDB other |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    try:
        for n in [int(x) for x in a.rows.split(",")]:
            src = work / f"head-{n}.log"
            got = head_records(a.log, n, src)
            lake = work / f"lake-{n}"
            subprocess.run([a.silt, "import", "zeek", str(src), "--lake", str(lake), "--quiet"],
                           check=True, stdout=subprocess.DEVNULL)
            files = [p for p in lake.rglob("*.parquet") if "_silt" not in p.parts]
            if len(files) != 1:
                sys.exit(f"silt wrote {len(files)} files for {n} rows, expected 1")
            duck = work / f"duck-{n}.parquet"
            duckdb.connect().execute(
                f"COPY ({zeek_convert.duckdb_select(str(src))}) TO '{duck}' "
                "(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)")
            s, d = anatomy(files[0]), anatomy(duck)
            for who, x in (("silt", s), ("duckdb", d)):
                if x["rows"] != got:
                    print(f"{who} wrote {x['rows']} rows of {got}", file=sys.stderr)
                    bad = True
            print(f"| {got} | {s['bytes']:,} | {d['bytes']:,} | {s['bytes'] / d['bytes']:.2f} "
                  f"| {s['chunks']:,} | {d['chunks']:,} | {s['footer']:,} | {d['footer']:,} "
                  f"| {s['kv'].get('ARROW:schema', 0):,} | {s['kv'].get('silt.source_types', 0):,} "
                  f"| {s['other']:,} | {d['other']:,} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
