#!/usr/bin/env python3
"""Runs two silt binaries on the same inputs and compares what they wrote, by content.

    python bench/compare-outputs.py OLD_SILT NEW_SILT [--work DIR] [--corpus DIR]

For every case (imports of each corpus directory, of generated Zeek/EVE/pcap/Docker-nginx data,
and `silt convert` runs) both binaries write into their own lake or file. Then, with DuckDB:
- the same tables exist (and the same rejects count, by source/line/reason);
- each table has the same columns with the same types;
- the rows are the same multiset (`EXCEPT ALL` both ways is empty), so row order, file names,
  file boundaries and row groups may differ but no value may.
Exit status 0 when every case matches; each difference is printed. Parquet bytes are not compared
(file names carry a time and a random id, and batch boundaries may move row groups).
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import duckdb


def run(binary, args, cwd=None):
    r = subprocess.run([binary, *args], capture_output=True, text=True, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def tables(lake):
    lake = pathlib.Path(lake)
    if not lake.is_dir():
        return {}
    out = {}
    for d in sorted(lake.iterdir()):
        if d.is_dir() and not d.name.startswith(("_", ".")) and "." in d.name:
            files = [p for p in d.rglob("*") if p.suffix in (".parquet", ".feather")
                     and not any(part.startswith((".", "_")) for part in p.relative_to(d).parts)]
            if files:
                out[d.name] = files
    return out


def rejects(root):
    rows = []
    for p in sorted(pathlib.Path(root).rglob("*.ndjson")):
        if "_rejects" not in p.parts:
            continue
        for line in p.read_text().splitlines():
            r = json.loads(line)
            rows.append((r.get("source"), r.get("line"), r.get("table"), r.get("reason"), r.get("raw")))
    return sorted(rows, key=lambda r: tuple("" if v is None else str(v) for v in r))


def relation(con, files, name):
    parquet = [str(f) for f in files if f.suffix == ".parquet"]
    if not parquet:
        return None
    glob = json.dumps(parquet)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM read_parquet({glob}, union_by_name=true)")
    return con.execute(f"DESCRIBE {name}").fetchall()


def compare_lakes(a, b, label):
    problems = []
    ta, tb = tables(a), tables(b)
    if set(ta) != set(tb):
        problems.append(f"{label}: tables differ: only old {sorted(set(ta) - set(tb))}, only new {sorted(set(tb) - set(ta))}")
    con = duckdb.connect()
    for t in sorted(set(ta) & set(tb)):
        da = relation(con, ta[t], "a")
        db = relation(con, tb[t], "b")
        if da is None or db is None:
            continue
        cols_a = [(c[0], c[1]) for c in da]
        cols_b = [(c[0], c[1]) for c in db]
        if cols_a != cols_b:
            problems.append(f"{label} {t}: columns differ:\n  old {cols_a}\n  new {cols_b}")
            continue
        na = con.execute("SELECT count(*) FROM a").fetchone()[0]
        nb = con.execute("SELECT count(*) FROM b").fetchone()[0]
        only_a = con.execute("SELECT count(*) FROM (SELECT * FROM a EXCEPT ALL SELECT * FROM b)").fetchone()[0]
        only_b = con.execute("SELECT count(*) FROM (SELECT * FROM b EXCEPT ALL SELECT * FROM a)").fetchone()[0]
        if na != nb or only_a or only_b:
            problems.append(f"{label} {t}: rows old {na}, new {nb}; only in old {only_a}, only in new {only_b}")
    ra, rb = rejects(a), rejects(b)
    if ra != rb:
        problems.append(f"{label}: rejects differ: old {len(ra)}, new {len(rb)}; "
                        f"first old-only {next((r for r in ra if r not in rb), None)}, "
                        f"first new-only {next((r for r in rb if r not in ra), None)}")
    return problems, sum(len(v) for v in ta.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--work", default=None)
    ap.add_argument("--corpus", default=os.environ.get("SILT_CORPUS", str(pathlib.Path(__file__).resolve().parents[2] / "shared" / "corpus")))
    a = ap.parse_args()
    corpus = pathlib.Path(a.corpus)
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="silt-compare-"))
    gen = work / "gen"
    if not gen.exists():
        gen.mkdir(parents=True)
        subprocess.run([a.new, "generate", "zeek", "--events", "60000", "-o", str(gen / "zeek")], check=True, capture_output=True)
        subprocess.run([a.new, "generate", "suricata", "--events", "30000", "-o", str(gen / "eve")], check=True, capture_output=True)
        subprocess.run([a.new, "generate", "pcap", "--events", "40000", "-o", str(gen / "trace.pcap")], check=True, capture_output=True)
        subprocess.run([a.new, "generate", "docker-nginx", "--events", "30000", "-o", str(gen / "nginx.msgpack")], check=True, capture_output=True)
        subprocess.run([a.new, "generate", "docker-nginx", "--events", "30000", "--format", "ndjson", "-o", str(gen / "nginx.ndjson")], check=True, capture_output=True)

    cases = [
        ("zeek tsv corpus", ["import", "zeek", str(corpus / "zeek-tsv")]),
        ("zeek json corpus", ["import", "zeek", str(corpus / "zeek-json")]),
        ("suricata corpus", ["import", "suricata", str(corpus / "suricata" / "vast-eve.json"), str(corpus / "suricata" / "surevego-eve.json"), str(corpus / "suricata" / "fever-jsonparse_eve.json"), str(corpus / "suricata" / "surevego-eve_broken.json")]),
        ("pcap corpus --flows", ["import", "pcap", str(corpus / "pcap"), "--flows"]),
        ("access corpus", ["import", "access", str(corpus / "weblogs" / "lnav-access_log.0"), str(corpus / "weblogs" / "lnav-bad_access_log.0")]),
        ("docker corpus", ["import", "docker", str(corpus / "weblogs" / "docker-json-file")]),
        ("generated zeek", ["import", "zeek", str(gen / "zeek")]),
        ("generated eve", ["import", "suricata", str(gen / "eve")]),
        ("generated zeek+eve auto", ["import", "auto", str(gen / "zeek"), str(gen / "eve")]),
        ("generated pcap --flows", ["import", "pcap", str(gen / "trace.pcap"), "--flows"]),
        ("generated msgpack parse-field", ["import", "msgpack", str(gen / "nginx.msgpack"), "--time-field", "log_time", "--time-unit", "ms", "--parse-field", "log=access"]),
        ("generated ndjson", ["import", "json", str(gen / "nginx.ndjson")]),
    ]
    converts = [
        ("convert msgpack parse-field", [str(gen / "nginx.msgpack"), "--time-field", "log_time", "--time-unit", "ms", "--parse-field", "log=access"]),
        ("convert ndjson", [str(gen / "nginx.ndjson")]),
        ("convert access", [str(corpus / "weblogs" / "lnav-access_log.0"), "--format", "access"]),
    ]
    problems = []
    checked = 0
    for label, args in cases:
        lakes = []
        for which, binary in (("old", a.old), ("new", a.new)):
            lake = work / "lakes" / label.replace(" ", "_") / which
            shutil.rmtree(lake, ignore_errors=True)
            code, out, err = run(binary, [*args, "--lake", str(lake), "--quiet"])
            lakes.append((lake, code, err))
        if (lakes[0][1], lakes[1][1]) == (0, 4) and "nothing was imported from" in lakes[1][2]:
            # Intended (issue 21): an input that gave no rows is exit status 4 now, 0 before.
            print(f"{label}: exit status 4 (an input gave no rows), 0 before: intended")
        elif lakes[0][1] != lakes[1][1]:
            problems.append(f"{label}: exit status old {lakes[0][1]}, new {lakes[1][1]}\n  old: {lakes[0][2][-300:]}\n  new: {lakes[1][2][-300:]}")
        p, n = compare_lakes(lakes[0][0], lakes[1][0], label)
        problems += p
        checked += n
        print(f"{label}: {n} files, {'same' if not p else 'DIFFERENT'}")
    for label, args in converts:
        outs = []
        for which, binary in (("old", a.old), ("new", a.new)):
            d = work / "convert" / label.replace(" ", "_") / which
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            out = d / "t.sub" / "out.parquet"
            out.parent.mkdir()
            code, _, err = run(binary, ["convert", *args, "-o", str(out), "--quiet"])
            outs.append((d, code, err))
        if outs[0][1] != outs[1][1]:
            problems.append(f"{label}: exit status old {outs[0][1]}, new {outs[1][1]}: {outs[1][2][-300:]}")
        p, n = compare_lakes(outs[0][0], outs[1][0], label)
        problems += p
        print(f"{label}: {n} files, {'same' if not p else 'DIFFERENT'}")
    for p in problems:
        print("DIFFERENCE:", p)
    print(f"{len(cases) + len(converts)} cases, {len(problems)} differences (work dir {work})")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
