"""Reads the tables of `cargo run --example spark_fixture -- DIR` with DuckDB's delta extension
(delta_scan, built on delta-kernel-rs). DuckDB downloads extensions from its own site, which is
not reachable here, so the extension comes from PyPI's `duckdb-ext-delta` (built for DuckDB
1.4.4, hence a venv with duckdb==1.4.4):

    python3 -m venv .duckdb144
    .duckdb144/bin/pip install duckdb==1.4.4 duckdb-ext-delta==1.4.4.20260205
    .duckdb144/bin/python verify_duckdb.py /tmp/lake /tmp/lake/expect.json
"""
import glob
import json
import os
import sys

import duckdb
import duckdb_ext

lake, expect_path = sys.argv[1], sys.argv[2]
expect = json.load(open(expect_path))
ext = glob.glob(os.path.join(os.path.dirname(duckdb_ext.__path__[0]), "duckdb_ext", "extensions",
                             "v" + duckdb.__version__, "*", "delta.duckdb_extension"))[0]
con = duckdb.connect()
con.sql("SET TimeZone = 'UTC'")
con.sql(f"LOAD '{ext}'")
failures = []


def check(what, got, want):
    ok = got == want
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got!r}" + ("" if ok else f" (want {want!r})"))
    if not ok:
        failures.append(what)


conn = os.path.join(lake, "zeek.conn")
scan = f"delta_scan('{conn}')"
print(con.sql(f"DESCRIBE SELECT * FROM {scan}"))
types = dict(con.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {scan})").fetchall())
check("port type", types["port"], "INTEGER")
check("bytes type", types["bytes"], "DECIMAL(20,0)")
check("ts type", types["ts"], "TIMESTAMP WITH TIME ZONE")
check("hour type", types["hour"], "INTEGER")
latest = expect["zeek.conn"]["versions"][max(expect["zeek.conn"]["versions"], key=int)]
check("latest count", con.sql(f"SELECT count(*) FROM {scan}").fetchone()[0], latest)
row = con.sql(f"SELECT min(port), max(port), max(bytes)::VARCHAR FROM {scan}").fetchone()
check("min port", row[0], 65535 - 49)
check("max port", row[1], 65535)
check("max bytes", row[2], str(2**64 - 1))
check("hour=18 count", con.sql(f"SELECT count(*) FROM {scan} WHERE hour = 18").fetchone()[0], 70)
check("hour=18 min ts", con.sql(f"SELECT min(ts)::VARCHAR FROM {scan} WHERE hour = 18").fetchone()[0], "2024-03-24 18:00:00+00")
check("null partition", con.sql(f"SELECT count(*) FROM {scan} WHERE dt IS NULL AND hour IS NULL").fetchone()[0], 5)
check("service = dns", con.sql(f"SELECT count(*) FROM {scan} WHERE service = 'dns'").fetchone()[0], 20)
check("ts window", con.sql(f"SELECT count(*) FROM {scan} WHERE ts >= '2024-03-24 18:00:30+00' AND ts < '2024-03-24 18:01:05+00'").fetchone()[0], 25)
for v, n in sorted(expect["zeek.conn"]["versions"].items(), key=lambda kv: int(kv[0])):
    try:
        got = con.sql(f"SELECT count(*) FROM delta_scan('{conn}', version => {int(v)})").fetchone()[0]
        check(f"count at version {v}", got, n)
    except Exception as e:  # older extensions have no time travel
        print(f"skip version {v}: {str(e).splitlines()[0]}")
        break

local = os.path.join(lake, "gen.local")
lscan = f"delta_scan('{local}')"
print(con.sql(f"DESCRIBE SELECT * FROM {lscan}"))
check("ntz values", [r[0] for r in con.sql(f"SELECT t::VARCHAR FROM {lscan} ORDER BY t").fetchall()],
      ["2024-03-24 00:00:00", "2024-03-24 01:00:00", "2024-03-24 02:00:00"])
check("u64 values", [r[0] for r in con.sql(f"SELECT n::VARCHAR FROM {lscan} ORDER BY n").fetchall()],
      ["1", "3", str(2**64 - 1)])
try:
    got = con.sql(f"SELECT n, nothing, s, l FROM delta_scan('{os.path.join(lake, 'gen.nulls')}') ORDER BY n").fetchall()
    check("null columns", got, [(1, None, {"a": "x"}, [None]), (2, None, {"a": "y"}, []), (3, 7, None, None)])
except Exception as e:
    check("null columns", "error: " + str(e).splitlines()[0][:300], "rows")
print("FAILURES:", failures if failures else "none")
sys.exit(1 if failures else 0)
