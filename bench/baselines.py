#!/usr/bin/env python3
"""Goal 3 of `silt bench`: DuckDB and pyarrow write the SAME rows as silt to Parquet with zstd
level 1 and otherwise their defaults, and we measure size and write time.

Input: a JSON manifest on the command line, a list of {"schema", "ipc", "out_dir",
"repetitions"}. Each "ipc" is an uncompressed Arrow IPC file that silt exported (the rows silt's
writer got, in the same order). Loading it is NOT timed: pyarrow reads it into a Table and DuckDB
copies that into a native table first; only the Parquet write is timed (wall with perf_counter,
CPU with process_time, which covers DuckDB's worker threads too since they run in this process).
Each tool writes the file once untimed (warm-up), then "repetitions" times (as silt does), and
the median wall and CPU time are kept, with every timed repetition's CPU time in "cpu_s_each".

Output (stdout): a JSON list of {"schema", "tool", "rows", "output_bytes", "wall_s", "cpu_s",
"cpu_s_each", "repetitions", "version"}; errors per tool are reported as {"schema", "tool",
"error"} and do not stop the rest.
"""
import json
import os
import statistics
import sys
import time


def measure(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def repeat(fn, path, n):
    """Runs the write once untimed (a warm-up: silt's zstd:1 write of a table follows its writes
    of other configurations in the same process, and a first write in a fresh process pays for
    growing the heap), then `n` times timed (the previous file removed first, untimed); returns
    the median wall and CPU seconds, every timed repetition's CPU seconds, and the last file's
    size."""
    fn()
    walls, cpus = [], []
    for _ in range(max(1, n)):
        if os.path.exists(path):
            os.remove(path)
        wall, cpu = measure(fn)
        walls.append(wall)
        cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus), cpus, os.path.getsize(path)


def main():
    manifest = json.load(open(sys.argv[1]))
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
    import duckdb

    out = []
    for item in manifest:
        schema, src, out_dir = item["schema"], item["ipc"], item["out_dir"]
        reps = int(item.get("repetitions", 1))
        os.makedirs(out_dir, exist_ok=True)
        with pa.memory_map(src) as f:
            table = ipc.open_file(f).read_all()
        table = table.combine_chunks()

        path = os.path.join(out_dir, "pyarrow.parquet")
        try:
            wall, cpu, each, size = repeat(
                lambda: pq.write_table(table, path, compression="zstd", compression_level=1),
                path, reps)
            out.append(dict(schema=schema, tool="pyarrow", rows=table.num_rows,
                            output_bytes=size, wall_s=wall, cpu_s=cpu, cpu_s_each=each,
                            repetitions=len(each), version=pa.__version__, file=path))
        except Exception as e:  # report, keep going
            out.append(dict(schema=schema, tool="pyarrow", error=str(e)))

        path = os.path.join(out_dir, "duckdb.parquet")
        try:
            con = duckdb.connect()
            con.register("src", table)
            con.execute("CREATE TABLE t AS SELECT * FROM src")
            con.unregister("src")
            q = f"COPY t TO '{path}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)"
            wall, cpu, each, size = repeat(lambda: con.execute(q), path, reps)
            rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
            con.close()
            out.append(dict(schema=schema, tool="duckdb", rows=rows,
                            output_bytes=size, wall_s=wall, cpu_s=cpu, cpu_s_each=each,
                            repetitions=len(each), version=duckdb.__version__, file=path))
        except Exception as e:
            out.append(dict(schema=schema, tool="duckdb", error=str(e)))
        del table
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
