#!/usr/bin/env python3
"""Runs one query over a Delta table with DuckDB's delta_scan (scripts/duckdb-delta.sh's venv)
and prints the first row as comma-separated values: what a Delta reader other than silt sees.

    PY="$(scripts/duckdb-delta.sh)"
    "$PY" scripts/interop/delta_scan.py LAKE/zeek.conn "count(*), sum(orig_bytes)"

The query is `SELECT <exprs> FROM delta_scan(DIR)`.
Exit status 1 with the error on stderr when DuckDB cannot read the table (a file the log names
is missing, for instance).
"""
import glob
import os
import sys

import duckdb
import duckdb_ext


def main():
    table_dir, exprs = sys.argv[1], sys.argv[2]
    ext = glob.glob(os.path.join(os.path.dirname(duckdb_ext.__path__[0]), "duckdb_ext", "extensions",
                                 "v" + duckdb.__version__, "*", "delta.duckdb_extension"))[0]
    con = duckdb.connect()
    con.sql("SET TimeZone = 'UTC'")
    con.sql(f"LOAD '{ext}'")
    path = os.path.abspath(table_dir).replace("'", "''")
    row = con.sql(f"SELECT {exprs} FROM delta_scan('{path}')").fetchone()
    print(",".join("" if v is None else str(v) for v in row))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001
        print(f"delta_scan.py: {e}", file=sys.stderr)
        sys.exit(1)
