#!/usr/bin/env python3
"""Goal 3 of `silt bench`: DuckDB and pyarrow write the SAME rows as silt to Parquet with zstd
level 1 and otherwise their defaults, and we measure size and write time.

Input: a JSON manifest on the command line, a list of {"schema", "ipc", "out_dir"}. Each "ipc"
is an uncompressed Arrow IPC file that silt exported (the rows silt's writer got, in the same
order). Loading it is NOT timed: pyarrow reads it into a Table and DuckDB copies that into a
native table first; only the Parquet write is timed (wall with perf_counter, CPU with
process_time, which covers DuckDB's worker threads too since they run in this process).

Output (stdout): a JSON list of {"schema", "tool", "rows", "output_bytes", "wall_s", "cpu_s",
"version"}; errors per tool are reported as {"schema", "tool", "error"} and do not stop the rest.
"""
import json
import os
import sys
import time


def measure(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def main():
    manifest = json.load(open(sys.argv[1]))
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
    import duckdb

    out = []
    for item in manifest:
        schema, src, out_dir = item["schema"], item["ipc"], item["out_dir"]
        os.makedirs(out_dir, exist_ok=True)
        with pa.memory_map(src) as f:
            table = ipc.open_file(f).read_all()
        table = table.combine_chunks()

        path = os.path.join(out_dir, "pyarrow.parquet")
        try:
            wall, cpu = measure(lambda: pq.write_table(table, path, compression="zstd", compression_level=1))
            out.append(dict(schema=schema, tool="pyarrow", rows=table.num_rows,
                            output_bytes=os.path.getsize(path), wall_s=wall, cpu_s=cpu,
                            version=pa.__version__, file=path))
        except Exception as e:  # report, keep going
            out.append(dict(schema=schema, tool="pyarrow", error=str(e)))

        path = os.path.join(out_dir, "duckdb.parquet")
        try:
            con = duckdb.connect()
            con.register("src", table)
            con.execute("CREATE TABLE t AS SELECT * FROM src")
            con.unregister("src")
            q = f"COPY t TO '{path}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)"
            wall, cpu = measure(lambda: con.execute(q))
            rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
            con.close()
            out.append(dict(schema=schema, tool="duckdb", rows=rows,
                            output_bytes=os.path.getsize(path), wall_s=wall, cpu_s=cpu,
                            version=duckdb.__version__, file=path))
        except Exception as e:
            out.append(dict(schema=schema, tool="duckdb", error=str(e)))
        del table
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
