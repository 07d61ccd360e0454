#!/usr/bin/env python3
"""Interop checker: do silt, DuckDB and Spark read a silt lake with the same answers?

    PY="$(scripts/spark.sh)"
    "$PY" scripts/interop/engines.py --silt target/release/silt --lake ./lake [--json]

For every table that `silt tables --lake DIR --json` lists, the same questions are asked of

  * silt     `silt query --format json` (DataFusion over the lake),
  * DuckDB   read_parquet('DIR/T/**/*.parquet', hive_partitioning = true, union_by_name = true),
  * Spark    a local[2] session reading DIR/T with Hive partition discovery and mergeSchema,

and the answers are compared:

  * the row count; per top-level column and per numeric field nested in structs (id.orig_p) the
    count of non-null values; per numeric column or nested field the sum (integers summed as
    DECIMAL(38,0), so no engine overflows; decimals as they are; floats as DOUBLE);
  * count(DISTINCT ...) of the lookup columns present (uid, fuid, community_id, src_ip, ...);
  * min and max of every timestamp column (the table's time column first) as epoch microseconds;
  * the partition columns the directories give (dt, hour, month): non-null count, distinct
    count, min and max, as text;
  * in tables with a `uid`: the row with the smallest uid, every top-level scalar field by
    value, and `id.orig_h` written as a user would in each engine (silt `id.orig_h`, DuckDB
    `id.orig_h` and `id['orig_h']`, Spark `id.orig_h`); in zeek.conn also sum(orig_bytes) per
    proto;
  * the statements of `silt ddl --dialect spark` (CREATE TABLE + MSCK REPAIR TABLE) executed in
    Spark SQL, of `silt ddl --dialect duckdb` executed in DuckDB and, with --trino URL (a server
    from scripts/trino.sh), of `silt ddl --dialect trino` executed in Trino's Hive connector
    (CREATE TABLE ... external_location + sync_partition_metadata): count(*), the top-level
    sums and the time range through the created table must match silt's.

Values are equal when identical, except floats (relative tolerance 1e-9); integers and decimals
are compared exactly as decimals, timestamps as epoch microseconds. A query that fails in one
engine is a difference too.

Types are reported, not judged as failures: per column (and nested field, list element) silt's
Arrow type, the type Spark infers from the files, the type the Spark DDL declares and DuckDB's
type, with findings for what a Spark user would not expect (decimal(20,0) for an unsigned
count, decimal(18,6) for an interval, a Null column, timestamp_ntz, a DDL type that differs from
what Spark reads from the files, ...).

Exit status: 0 all equal, 1 some value differs (or an engine failed a query), 2 the checker
could not run (bad arguments, silt failed to list the lake, Spark did not start).
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from decimal import Decimal, InvalidOperation

ENGINES = ("silt", "duckdb", "spark", "trino")
PARTITION_KEYS = ("dt", "hour", "month")
LOOKUP_CANDIDATES = (
    ("uid",), ("fuid",), ("community_id",), ("flow_id",),
    ("src_ip",), ("dest_ip",), ("src",), ("dst",),
    ("id", "orig_h"), ("id", "resp_h"),
)
FLOAT_REL_TOL = 1e-9
BATCH = 150  # expressions per SELECT (silt takes the SQL as one argument: keep it well below 128 KiB)


# ---------------------------------------------------------------------------------------------
# Arrow types as DataFusion prints them (`DESCRIBE`): Utf8, UInt64, Decimal128(18, 6),
# Timestamp(µs, "UTC"), List(Utf8), Struct("orig_h": Utf8, "orig_p": UInt16), Map(...)

class AType:
    def __init__(self, name, args=None, fields=None, elem=None):
        self.name = name          # Utf8, UInt64, Struct, List, Decimal128, Timestamp, ...
        self.args = args or []    # raw arguments of parameterized scalars
        self.fields = fields      # [(name, AType)] for Struct
        self.elem = elem          # AType for List / LargeList / FixedSizeList / Map entries

    def __str__(self):
        if self.fields is not None:
            inner = ", ".join('"%s": %s' % (n, t) for n, t in self.fields)
            return "%s(%s)" % (self.name, inner)
        if self.elem is not None:
            return "%s(%s)" % (self.name, self.elem)
        if self.args:
            return "%s(%s)" % (self.name, ", ".join(self.args))
        return self.name

    @property
    def kind(self):
        n = self.name
        if n in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"):
            return "int"
        if n in ("Float16", "Float32", "Float64"):
            return "float"
        if n.startswith("Decimal"):
            return "decimal"
        if n in ("Utf8", "LargeUtf8", "Utf8View"):
            return "string"
        if n == "Boolean":
            return "bool"
        if n == "Timestamp":
            return "timestamp"
        if n in ("Date32", "Date64"):
            return "date"
        if n in ("Binary", "LargeBinary", "BinaryView", "FixedSizeBinary"):
            return "binary"
        if n == "Null":
            return "null"
        if self.fields is not None:
            return "struct"
        if self.elem is not None:
            return "list" if "List" in n else "map"
        return "other"


class _TypeParser:
    def __init__(self, text):
        self.s = text
        self.i = 0

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def peek(self):
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def expect(self, c):
        self.ws()
        if not self.s.startswith(c, self.i):
            raise ValueError("expected %r at %d in %r" % (c, self.i, self.s))
        self.i += len(c)

    def ident(self):
        self.ws()
        j = self.i
        while j < len(self.s) and (self.s[j].isalnum() or self.s[j] in "_"):
            j += 1
        if j == self.i:
            raise ValueError("expected a type name at %d in %r" % (self.i, self.s))
        word = self.s[self.i:j]
        self.i = j
        return word

    def quoted(self):
        self.expect('"')
        out = []
        while True:
            c = self.s[self.i]
            if c == "\\":
                out.append(self.s[self.i + 1])
                self.i += 2
                continue
            self.i += 1
            if c == '"':
                return "".join(out)
            out.append(c)

    def raw_arg(self):
        # one argument of a parameterized scalar: up to the next top-level ',' or ')'
        self.ws()
        depth, j = 0, self.i
        while j < len(self.s):
            c = self.s[j]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            elif c == "," and depth == 0:
                break
            elif c == '"':
                j = self.s.index('"', j + 1)
            j += 1
        arg = self.s[self.i:j].strip()
        self.i = j
        return arg

    def typ(self):
        name = self.ident()
        while name in ("nullable", "non", "null") and self.peek() not in ("(", ",", ")", ""):
            # field annotations of some DataFusion versions: `nullable Utf8`, `non-null Utf8`
            if self.s.startswith("-", self.i):
                self.i += 1
            name = self.ident()
        if self.peek() != "(":
            return AType(name)
        self.expect("(")
        if name == "Struct":
            fields = []
            while self.peek() != ")":
                fname = self.quoted()
                self.expect(":")
                fields.append((fname, self.typ()))
                if self.peek() == ",":
                    self.expect(",")
            self.expect(")")
            return AType(name, fields=fields)
        if name in ("List", "LargeList", "ListView", "LargeListView", "Map"):
            if self.peek() == '"':          # Map("entries": Struct(...), sorted) forms
                self.quoted()
                self.expect(":")
            elem = self.typ()
            while self.peek() == ",":      # Map(..., false)
                self.expect(",")
                self.raw_arg()
            self.expect(")")
            return AType(name, elem=elem)
        if name == "FixedSizeList":
            elem = self.typ()
            self.expect(",")
            size = self.raw_arg()
            self.expect(")")
            return AType(name, args=[size], elem=elem)
        args = []
        while self.peek() != ")":
            args.append(self.raw_arg())
            if self.peek() == ",":
                self.expect(",")
        self.expect(")")
        return AType(name, args=args)


def parse_arrow_type(text):
    p = _TypeParser(text)
    t = p.typ()
    p.ws()
    if p.i != len(p.s):
        raise ValueError("trailing text in type %r" % text)
    return t


# ---------------------------------------------------------------------------------------------
# SQL rendering per engine

def q_dq(name):
    return '"' + name.replace('"', '""') + '"'


def q_bt(name):
    return "`" + name.replace("`", "``") + "`"


def q_str(s):
    return "'" + s.replace("'", "''") + "'"


def col(engine, path):
    """A (nested) column reference, unambiguous in each engine."""
    if engine == "silt":
        return q_dq(path[0]) + "".join("[%s]" % q_str(p) for p in path[1:])
    if engine == "trino":
        return ".".join(q_dq(p) for p in path)
    if engine == "duckdb":
        out = q_dq(path[0])
        for p in path[1:]:
            out = "struct_extract(%s, %s)" % (out, q_str(p))
        return out
    return ".".join(q_bt(p) for p in path)


def epoch_us(engine, expr):
    if engine == "silt":
        return "CAST(%s AS BIGINT)" % expr
    if engine == "duckdb":
        return "epoch_us(%s)" % expr
    if engine == "trino":
        # (date_diff has no microsecond unit; epoch seconds of a timestamp(6) fit a double's 53
        # bits exactly at microsecond resolution, so rounding gives the exact count back.)
        return "CAST(round(to_unixtime(with_timezone(%s, 'UTC')) * 1e6) AS BIGINT)" % expr
    return "unix_micros(CAST(%s AS TIMESTAMP))" % expr


def as_text(engine, expr):
    return "CAST(%s AS %s)" % (expr, "STRING" if engine == "spark" else "VARCHAR")


def as_hex(engine, expr):
    if engine == "silt":
        return "encode(%s, 'hex')" % expr
    if engine == "trino":
        return "lower(to_hex(%s))" % expr
    return "lower(hex(%s))" % expr


def pathname(path):
    return ".".join(path)


# ---------------------------------------------------------------------------------------------
# Values

def canon(v, kind):
    """An engine's answer as a comparable Python value: Decimal for integers and decimals, float
    for floats, str, bool or None."""
    if v is None:
        return None
    if kind == "float":
        if isinstance(v, str):
            return float(v)
        return float(v)
    if kind in ("int", "decimal", "count"):
        if isinstance(v, bool):
            return Decimal(int(v))
        if isinstance(v, float):
            return Decimal(repr(v))
        try:
            return Decimal(v) if not isinstance(v, Decimal) else v
        except (InvalidOperation, TypeError):
            return str(v)
    if kind == "bool":
        return bool(v)
    if kind == "hex":
        return str(v).lower()
    if isinstance(v, (Decimal, int, float, bool)):
        return v
    return str(v)


def equal(a, b, kind):
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return False
        return all(equal(a[k], b[k], kind) for k in a)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        try:
            fa, fb = float(a), float(b)
        except (TypeError, ValueError):
            return False
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        if fa == fb:
            return True
        return math.isclose(fa, fb, rel_tol=FLOAT_REL_TOL, abs_tol=0.0)
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a == b
    return a == b


def show(v):
    if isinstance(v, Error):
        return "ERROR " + v.msg
    if isinstance(v, Decimal):
        s = format(v, "f")
        if "." in s:
            s = s.rstrip("0").rstrip(".")
        return s
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (k, show(x)) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))) + "}"
    if v is None:
        return "null"
    return json.dumps(v) if isinstance(v, str) else str(v)


def to_json(v):
    if isinstance(v, Error):
        return {"error": v.msg}
    if isinstance(v, Decimal):
        return show(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else repr(v)
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    return v


class Error:
    def __init__(self, msg):
        msg = str(msg).strip()
        lines = [l.strip() for l in msg.splitlines() if l.strip()]
        # Py4J's first line ("An error occurred while calling o123.parquet.") says nothing: take
        # the Java exception's line instead
        if lines and lines[0].startswith("An error occurred while calling"):
            java = [l for l in lines[1:] if ("Exception" in l or "Error" in l) and not l.startswith("at ")]
            lines = [l.lstrip(": ") for l in java] or lines
        main = lines[0] if lines else msg
        causes = [l[len("Caused by:"):].strip() for l in lines if l.startswith("Caused by:")]
        if causes and causes[-1] not in main:
            main = "%s / caused by: %s" % (main.rstrip(":"), causes[-1])
        self.msg = main[:600]

    def __eq__(self, other):
        return False


# ---------------------------------------------------------------------------------------------
# Engines

class SiltEngine:
    name = "silt"

    def __init__(self, binary, lake):
        self.binary = binary
        self.lake = lake

    def run(self, sql):
        p = subprocess.run([self.binary, "query", "--lake", self.lake, "--format", "json", sql],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip() or "silt query exited %d" % p.returncode)
        out = p.stdout.strip()
        if not out:
            return []
        rows = json.loads(out, parse_float=Decimal)
        return [list(r.values()) for r in rows]

    def version(self):
        p = subprocess.run([self.binary, "--version"], stdout=subprocess.PIPE, text=True)
        return p.stdout.strip()


class DuckEngine:
    name = "duckdb"

    def __init__(self):
        import duckdb
        self.duckdb = duckdb
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")

    def run(self, sql):
        return [list(r) for r in self.con.execute(sql).fetchall()]

    def execute(self, sql):
        self.con.execute(sql)

    def version(self):
        return self.duckdb.__version__

    def types(self, relation_sql):
        rel = self.con.sql(relation_sql)
        return list(zip(rel.columns, rel.types))


class TrinoEngine:
    """A Trino server's REST API (POST /v1/statement, then nextUri until done), in the catalog
    `hive` and a schema of its own."""
    name = "trino"

    def __init__(self, url, schema):
        self.url = url.rstrip("/")
        self.schema = schema
        # Delta tables registered in the catalog `delta` (unregistered at the end: the files
        # are the lake's).
        self.registered = []
        self.delta_schema = False
        self.execute("CREATE SCHEMA IF NOT EXISTS hive.%s" % schema)

    def ensure_delta_schema(self):
        if not self.delta_schema:
            self.execute("CREATE SCHEMA IF NOT EXISTS delta.%s" % self.schema)
            self.delta_schema = True

    def _request(self, method, url, body=None, catalog="hive"):
        import urllib.request
        req = urllib.request.Request(url, data=body, method=method, headers={
            "X-Trino-User": "silt", "X-Trino-Catalog": catalog, "X-Trino-Schema": self.schema,
            "X-Trino-Time-Zone": "UTC"})
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.loads(r.read().decode(), parse_float=Decimal)

    def run(self, sql, catalog="hive"):
        doc = self._request("POST", self.url + "/v1/statement", sql.encode(), catalog)
        rows = []
        while True:
            if "error" in doc:
                raise RuntimeError(doc["error"].get("message", str(doc["error"])))
            rows.extend(doc.get("data") or [])
            nxt = doc.get("nextUri")
            if not nxt:
                return rows
            doc = self._request("GET", nxt)

    def execute(self, sql, catalog="hive"):
        self.run(sql, catalog)

    def version(self):
        return self.run("SELECT version()")[0][0]

    def cleanup(self):
        for name in self.registered:
            try:
                self.execute("CALL delta.system.unregister_table(%s, %s)" % (q_str(self.schema), q_str(name)))
            except Exception:  # noqa: BLE001
                pass
        for catalog in ("hive",) + (("delta",) if self.delta_schema else ()):
            try:
                self.execute("DROP SCHEMA %s.%s CASCADE" % (catalog, self.schema))
            except Exception:  # noqa: BLE001
                pass


class SparkEngine:
    name = "spark"

    def __init__(self, workdir, memory, delta=False):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession
        import pyspark
        self.pyspark = pyspark
        builder = (
            SparkSession.builder.master("local[2]")
            .appName("silt-interop")
            .config("spark.driver.memory", memory)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.warehouse.dir", os.path.join(workdir, "warehouse"))
            .config("spark.driver.extraJavaOptions",
                    "-Dderby.system.home=%s -Duser.timezone=UTC" % workdir)
            .config("spark.sql.catalogImplementation", "in-memory")
        )
        if delta:
            # The Delta Lake jars that scripts/spark.sh fetched into its Ivy cache.
            from delta import configure_spark_with_delta_pip
            builder = (
                builder.config("spark.jars.ivy", os.environ.get(
                    "SILT_SPARK_IVY", os.path.expanduser("~/.cache/silt-spark-ivy")))
                .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                .config("spark.sql.catalog.spark_catalog",
                        "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            )
            builder = configure_spark_with_delta_pip(builder)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")

    def run(self, sql):
        return [list(r) for r in self.spark.sql(sql).collect()]

    def execute(self, sql):
        self.spark.sql(sql).collect()

    def version(self):
        return self.spark.version

    def java_version(self):
        try:
            jvm = self.spark.sparkContext._jvm
            return jvm.java.lang.System.getProperty("java.version")
        except Exception:  # noqa: BLE001
            return "?"


# ---------------------------------------------------------------------------------------------
# One table

class Check:
    def __init__(self, name, kind, exprs):
        self.name = name
        self.kind = kind      # int / decimal / float / count / string / bool / hex / group
        self.exprs = exprs    # engine -> SQL expression (an engine missing: not asked)


class TableReport:
    def __init__(self, table):
        self.table = table
        self.results = []     # (check name, kind, {engine: value}, equal)
        self.types = []       # dict rows
        self.findings = []    # dict rows
        self.notes = []

    def add(self, name, kind, values, abs_tol=None):
        present = {e: v for e, v in values.items() if v is not _ABSENT}
        vals = list(present.values())
        ok = bool(vals) and not any(isinstance(v, Error) for v in vals)
        note = ""
        if ok:
            ref = vals[0]
            ok = all(equal(ref, v, kind) for v in vals[1:])
            if not ok and abs_tol is not None and all(isinstance(v, float) for v in vals):
                # a float sum is exact only up to its rounding: n * eps * sum(|x|) bounds how far
                # two summation orders can land apart (catastrophic cancellation)
                spread = max(vals) - min(vals)
                if not math.isnan(spread) and spread <= abs_tol:
                    ok = True
                    note = "within the float summation bound %.3g (2 n eps sum|x|)" % abs_tol
        self.results.append((name, kind, present, ok, note))

    @property
    def differences(self):
        return [r for r in self.results if not r[3]]


_ABSENT = object()


def leaves(fields, prefix=()):
    """(path, AType) for every struct member, depth first; lists and maps are leaves."""
    for name, t in fields:
        path = prefix + (name,)
        yield path, t
        if t.kind == "struct":
            yield from leaves(t.fields, path)


def silt_float(expr):
    # silt's JSON output writes inf and NaN as null: ask for the text (shortest round trip)
    return "CAST(%s AS VARCHAR)" % expr


def run_batch(engine, source, checks, report, values):
    """Ask `engine` every check (one SELECT per BATCH of expressions); on an error, ask them one
    by one so that one failing expression does not hide the others."""
    todo = [c for c in checks if engine.name in c.exprs]
    if engine.name == "silt":
        todo = [Check(c.name, c.kind, {"silt": silt_float(c.exprs["silt"])}) if c.kind == "float" else c
                for c in todo]
    for i in range(0, len(todo), BATCH):
        chunk = todo[i:i + BATCH]
        sql = "SELECT " + ", ".join("%s AS c%d" % (c.exprs[engine.name], j) for j, c in enumerate(chunk)) + " FROM " + source
        try:
            row = engine.run(sql)[0]
            for c, v in zip(chunk, row):
                values.setdefault(c.name, {})[engine.name] = canon(v, c.kind)
        except Exception as e:  # noqa: BLE001
            if len(chunk) == 1:
                values.setdefault(chunk[0].name, {})[engine.name] = Error(e)
                continue
            for c in chunk:
                try:
                    v = engine.run("SELECT %s AS c0 FROM %s" % (c.exprs[engine.name], source))[0][0]
                    values.setdefault(c.name, {})[engine.name] = canon(v, c.kind)
                except Exception as e1:  # noqa: BLE001
                    values.setdefault(c.name, {})[engine.name] = Error(e1)


def spark_type_at(dtype, path):
    from pyspark.sql.types import StructType
    t = dtype
    for p in path:
        if not isinstance(t, StructType):
            return None
        match = [f for f in t.fields if f.name == p]
        if not match:
            match = [f for f in t.fields if f.name.lower() == p.lower()]
        if not match:
            return None
        t = match[0].dataType
    return t


def duck_type_at(dtype, path):
    t = dtype
    for p in path:
        try:
            if t is None or t.id != "struct":
                return None
            kids = dict(t.children)
        except Exception:  # noqa: BLE001
            return None
        if p not in kids:
            return None
        t = kids[p]
    return t


def type_findings(path, atype, spark_read, spark_ddl, spark_read_schema=True):
    """What a Spark user would not expect of this column (leaves and list elements)."""
    out = []
    sr = spark_read.simpleString() if spark_read is not None else None
    sd = spark_ddl.simpleString() if spark_ddl is not None else None
    kind = atype.kind

    def add(category, text):
        out.append({"column": pathname(path), "category": category, "silt": str(atype),
                    "spark": sr, "spark_ddl": sd, "finding": text})

    if spark_read is None and spark_read_schema:
        add("missing-in-spark", "Spark's file schema has no such column")
    if sr is not None and sd is not None and sr != sd:
        add("ddl-differs", "silt ddl declares %s, Spark infers %s from the files" % (sd, sr))
    if kind in ("struct", "list", "map"):
        return out
    if kind == "null":
        add("null-type", "%s has Arrow type Null (never seen with a value; Parquet INT32 with the Null "
                         "logical type): Spark infers %s from the files, silt ddl declares %s"
            % (pathname(path), sr or "-", sd or "-"))
        return out
    for label, s in (("read", sr), ("ddl", sd)):
        if s is None:
            continue
        if s == "decimal(20,0)":
            add("count-as-decimal",
                "%s: %s is decimal(20,0) in Spark (%s), a count a Spark user expects as bigint"
                % (pathname(path), atype, label))
            break
        if s.startswith("decimal(") and kind == "decimal":
            add("interval-as-decimal",
                "%s: %s is %s in Spark (%s), seconds as an exact decimal (not double, not an "
                "interval)" % (pathname(path), atype, s, label))
            break
        if s.startswith("decimal("):
            add("unexpected-decimal", "%s (%s) is %s in Spark (%s)" % (pathname(path), atype, s, label))
            break
        if s == "timestamp_ntz":
            add("timestamp-ntz", "%s (%s) is timestamp_ntz in Spark (%s): not an instant"
                % (pathname(path), atype, label))
            break
        if kind == "timestamp" and s != "timestamp":
            add("unexpected-timestamp", "%s (%s) is %s in Spark (%s)" % (pathname(path), atype, s, label))
            break
    return out


def is_delta(tdir):
    return os.path.isdir(os.path.join(tdir, "_delta_log"))


def check_table(args, info, silt, duck, spark, report, trino=None):
    table = info["table"]
    tdir = os.path.join(args.lake, table)
    time_col = info.get("time_column")

    # silt's schema (the unified schema of every file), minus its virtual partition columns
    desc = silt.run("DESCRIBE %s" % ".".join(q_dq(p) for p in table.split(".", 1)))
    cols = []
    for name, dtype, _nullable in desc:
        cols.append((name, parse_arrow_type(dtype)))
    while cols and cols[-1][0] in PARTITION_KEYS and cols[-1][1].name in ("Date32", "Int32", "Utf8"):
        cols.pop()
    silt_virtual = {r[0] for r in desc} - {n for n, _ in cols}
    top = {n for n, _ in cols}

    # partition keys as the directories give them
    pkeys = []
    for root, dirs, _files in os.walk(tdir):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for d in dirs:
            if "=" in d:
                k = d.split("=", 1)[0]
                if k not in pkeys:
                    pkeys.append(k)

    # sources
    # A Delta table's _delta_log/ holds Parquet checkpoints: name the partition directories
    # rather than descend everywhere.
    glob = (os.path.join(os.path.abspath(tdir), *["%s=*" % k for k in pkeys], "*.parquet")
            if is_delta(tdir) else os.path.join(os.path.abspath(tdir), "**", "*.parquet"))
    duck_src = "read_parquet(%s, hive_partitioning = true, union_by_name = true)" % q_str(glob)
    view = "src_" + re.sub(r"\W", "_", table)
    duck_ok = spark_ok = True
    duck_types = {}
    try:
        duck.execute("CREATE OR REPLACE VIEW %s AS SELECT * FROM %s" % (view, duck_src))
        duck_types = dict(duck.types("SELECT * FROM %s" % view))
    except Exception as e:  # noqa: BLE001
        duck_ok = False
        report.notes.append("DuckDB could not read the table: %s" % Error(e).msg)
        report.add("duckdb reads the table", "string", {"silt": "yes", "duckdb": Error(e)})
    spark_schema = None
    if spark is not None:
        try:
            if is_delta(tdir):
                # A table with a Delta log is read as Delta: the files its log names.
                df = spark.spark.read.format("delta").load(os.path.abspath(tdir))
            else:
                df = spark.spark.read.option("mergeSchema", "true").parquet(os.path.abspath(tdir))
            df.createOrReplaceTempView(view)
            spark_schema = df.schema
        except Exception as e:  # noqa: BLE001
            spark_ok = False
            report.notes.append("Spark could not read the table: %s" % Error(e).msg)
            report.add("spark reads the table", "string", {"silt": "yes", "spark": Error(e)})

    engines = [silt] + ([duck] if duck_ok else []) + ([spark] if spark is not None and spark_ok else [])
    sources = {"silt": ".".join(q_dq(p) for p in table.split(".", 1)), "duckdb": view, "spark": view}

    def per_engine(render, names=None):
        # rendered for every engine (the DDL checks run where the plain read failed); asked only
        # of the engines that read the table
        return {e: render(e) for e in ENGINES if names is None or e in names}

    # -- aggregate checks
    checks = [Check("count(*)", "count", per_engine(lambda e: "count(*)"))]
    tcols = [(p, t) for p, t in leaves(cols) if t.kind == "timestamp"]
    tcols.sort(key=lambda pt: (pathname(pt[0]) != time_col,))
    for path, t in leaves(cols):
        nested = len(path) > 1
        k = t.kind
        if not nested or k in ("int", "float", "decimal"):
            checks.append(Check("count(%s)" % pathname(path), "count",
                                per_engine(lambda e, p=path: "count(%s)" % col(e, p))))
        if k == "int":
            checks.append(Check("sum(%s)" % pathname(path), "int",
                                per_engine(lambda e, p=path: "sum(CAST(%s AS DECIMAL(38,0)))" % col(e, p))))
        elif k == "decimal":
            checks.append(Check("sum(%s)" % pathname(path), "decimal",
                                per_engine(lambda e, p=path: "sum(%s)" % col(e, p))))
        elif k == "float":
            checks.append(Check("sum(%s)" % pathname(path), "float",
                                per_engine(lambda e, p=path: "sum(CAST(%s AS DOUBLE))" % col(e, p))))
            # the sum of a float column depends on the order of the additions; sum(|x|) bounds
            # that rounding, and min/max are exact whatever the order
            checks.append(Check("sum(abs(%s))" % pathname(path), "float",
                                per_engine(lambda e, p=path: "sum(abs(CAST(%s AS DOUBLE)))" % col(e, p))))
            for fn in ("min", "max"):
                checks.append(Check("%s(%s)" % (fn, pathname(path)), "float",
                                    per_engine(lambda e, p=path, f=fn: "%s(CAST(%s AS DOUBLE))" % (f, col(e, p)))))
    for path in LOOKUP_CANDIDATES:
        t = dict(leaves(cols)).get(path)
        if t is not None and t.kind in ("string", "int"):
            checks.append(Check("count(DISTINCT %s)" % pathname(path), "count",
                                per_engine(lambda e, p=path: "count(DISTINCT %s)" % col(e, p))))
    for path, t in tcols:
        label = pathname(path) + (" (time column)" if pathname(path) == time_col else "")
        for fn in ("min", "max"):
            checks.append(Check("%s(%s) epoch µs" % (fn, label), "int",
                                per_engine(lambda e, p=path, f=fn: epoch_us(e, "%s(%s)" % (f, col(e, p))))))
    for k in pkeys:
        names = {"duckdb", "spark"} | ({"silt"} if k in silt_virtual else set())
        checks.append(Check("partition %s: count" % k, "count",
                            per_engine(lambda e, k=k: "count(%s)" % col(e, (k,)), names)))
        checks.append(Check("partition %s: count(DISTINCT)" % k, "count",
                            per_engine(lambda e, k=k: "count(DISTINCT %s)" % col(e, (k,)), names)))
        for fn in ("min", "max"):
            if k == "hour":
                # the hour a directory names, whatever type the engine gives it (DuckDB's
                # hive_partitioning keeps `07` as VARCHAR; see the partition type findings)
                checks.append(Check("partition %s: %s as integer" % (k, fn), "int",
                                    per_engine(lambda e, k=k, f=fn: "%s(CAST(%s AS INTEGER))" % (f, col(e, (k,))), names)))
            else:
                checks.append(Check("partition %s: %s as text" % (k, fn), "string",
                                    per_engine(lambda e, k=k, f=fn: as_text(e, "%s(%s)" % (f, col(e, (k,)))), names)))

    values = {}
    for e in engines:
        run_batch(e, sources[e.name], checks, report, values)
    read_by = {e.name for e in engines}
    float_tol = {}
    for c in checks:
        if c.kind == "float" and c.name.startswith("sum(") and not c.name.startswith("sum(abs("):
            inner = c.name[4:-1]
            n = values.get("count(%s)" % inner, {}).get("silt")
            sabs = [v for v in values.get("sum(abs(%s))" % inner, {}).values() if isinstance(v, float)]
            if isinstance(n, Decimal) and sabs:
                float_tol[c.name] = 2.0 * float(n) * 2.0 ** -53 * max(sabs)
    for c in checks:
        report.add(c.name, c.kind, {e: values.get(c.name, {}).get(e, _ABSENT) for e in ENGINES if e in c.exprs and e in read_by},
                   abs_tol=float_tol.get(c.name))

    # -- the row with the smallest uid
    if "uid" in top and dict(cols)["uid"].kind == "string":
        scalars = [(n, t) for n, t in cols if t.kind in ("int", "float", "decimal", "string", "bool", "timestamp", "date", "binary", "null")]
        order_cols = [n for n, t in scalars if t.kind != "null"]

        def row_sql(e):
            sel = []
            for n, t in scalars:
                c = col(e, (n,))
                if t.kind == "timestamp":
                    c = epoch_us(e, c)
                elif t.kind == "date":
                    c = as_text(e, c)
                elif t.kind == "binary":
                    c = as_hex(e, c)
                elif t.kind == "float" and e == "silt":
                    c = silt_float(c)
                sel.append(c)
            nested = []
            if "id" in top:
                if e == "silt":
                    nested = ["id.orig_h"]
                elif e == "duckdb":
                    nested = ["id.orig_h", "id['orig_h']"]
                else:
                    nested = ["id.orig_h"]
            order = ", ".join("%s ASC NULLS FIRST" % col(e, (n,)) for n in ["uid"] + [o for o in order_cols if o != "uid"])
            exprs = ", ".join("%s AS c%d" % (x, j) for j, x in enumerate(sel + nested))
            return "SELECT %s FROM %s ORDER BY %s LIMIT 1" % (exprs, sources[e], order), len(nested)

        rows = {}
        for e in engines:
            sql, _n = row_sql(e.name)
            try:
                r = e.run(sql)
                rows[e.name] = r[0] if r else []
            except Exception as ex:  # noqa: BLE001
                rows[e.name] = Error(ex)
        kinds = {"timestamp": "int", "date": "string", "binary": "hex"}
        for i, (n, t) in enumerate(scalars):
            vals = {}
            for e in engines:
                r = rows[e.name]
                vals[e.name] = r if isinstance(r, Error) else (canon(r[i], kinds.get(t.kind, t.kind)) if i < len(r) else Error("no row"))
            report.add("smallest-uid row: %s" % n, kinds.get(t.kind, t.kind), vals)
        if "id" in top:
            vals = {}
            for e in engines:
                r = rows[e.name]
                base = len(scalars)
                if isinstance(r, Error):
                    vals[e.name] = r
                    continue
                vals[e.name] = canon(r[base], "string") if len(r) > base else Error("no row")
                if e.name == "duckdb" and len(r) > base + 1:
                    vals["duckdb id['orig_h']"] = canon(r[base + 1], "string")
            report.add("smallest-uid row: id.orig_h (nested syntax)", "string", vals)
            # count(DISTINCT id.orig_h) written as users write it
            syn = {"silt": "id.orig_h", "duckdb": "id.orig_h", "spark": "id.orig_h"}
            vals = {}
            for e in engines:
                try:
                    vals[e.name] = canon(e.run("SELECT count(DISTINCT %s) FROM %s" % (syn[e.name], sources[e.name]))[0][0], "count")
                except Exception as ex:  # noqa: BLE001
                    vals[e.name] = Error(ex)
            if duck_ok:
                try:
                    vals["duckdb id['orig_h']"] = canon(duck.run("SELECT count(DISTINCT id['orig_h']) FROM %s" % view)[0][0], "count")
                except Exception as ex:  # noqa: BLE001
                    vals["duckdb id['orig_h']"] = Error(ex)
            report.add("count(DISTINCT id.orig_h) (nested syntax)", "count", vals)

    # -- zeek.conn: sum(orig_bytes) per proto
    if table == "zeek.conn" and "proto" in top and "orig_bytes" in top:
        vals = {}
        for e in engines:
            sql = "SELECT %s, sum(CAST(%s AS DECIMAL(38,0))) FROM %s GROUP BY %s" % (
                col(e.name, ("proto",)), col(e.name, ("orig_bytes",)), sources[e.name], col(e.name, ("proto",)))
            try:
                vals[e.name] = {str(k): canon(v, "int") for k, v in e.run(sql)}
            except Exception as ex:  # noqa: BLE001
                vals[e.name] = Error(ex)
        report.add("sum(orig_bytes) GROUP BY proto", "int", vals)

    # -- silt ddl, executed in each engine
    ddl_types = None
    top_checks = [c for c in checks if c.name == "count(*)" or
                  (c.name.startswith(("sum(", "count(")) and c.name[c.name.index("(") + 1:-1] in top) or
                  (c.name.startswith(("min(", "max(")) and "time column" in c.name)]
    for dialect, eng in (("duckdb", duck), ("spark", spark), ("trino", trino)):
        if eng is None:
            continue
        # A Delta table is registered in Trino's Delta Lake catalog (silt ddl prints the CALL),
        # which reads the log's snapshot; its timestamps come back as timestamp(3) with time zone.
        trino_delta = dialect == "trino" and is_delta(tdir)
        catalog = {}
        if dialect == "trino":
            # An earlier run's table of the same name (external: dropping keeps the files).
            try:
                if trino_delta:
                    eng.ensure_delta_schema()
                    catalog = {"catalog": "delta"}
                    eng.execute("CALL delta.system.unregister_table(%s, %s)" % (
                        q_str(eng.schema), q_str(table.replace(".", "_"))))
                else:
                    eng.execute("DROP TABLE IF EXISTS %s" % q_dq(table.replace(".", "_")))
            except Exception:  # noqa: BLE001
                pass
        p = subprocess.run([args.silt, "ddl", "--dialect", dialect, table, "--lake", args.lake],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        label = "silt ddl --dialect %s" % dialect
        if p.returncode != 0:
            report.add(label, "string", {"silt": "statement", dialect: Error(p.stderr)})
            continue
        stmts = [s.strip() for s in re.split(r";\s*(?:\n|$)", p.stdout) if s.strip()]
        m = re.search(r"CREATE (?:OR REPLACE )?(?:TABLE|VIEW)(?: IF NOT EXISTS)?\s+(\S+)", p.stdout)
        name = m.group(1) if m else None
        if trino_delta:
            name = "delta.%s.%s" % (q_dq(eng.schema), q_dq(table.replace(".", "_")))
        try:
            for s in stmts:
                eng.execute(s, **catalog)
        except Exception as ex:  # noqa: BLE001
            report.add("%s: executes" % label, "string", {"silt": "ok", dialect: Error(ex)})
            continue
        if trino_delta:
            eng.registered.append(table.replace(".", "_"))
        if dialect == "spark":
            try:
                ddl_types = eng.spark.table(name).schema
            except Exception:  # noqa: BLE001
                ddl_types = None
        sub = {}
        ms_checks = {}
        for c in top_checks:
            if trino_delta and c.name.endswith(" epoch µs"):
                # Compared at milliseconds: Trino rounds the microseconds (half up).
                fn, inner = c.name.split("(", 1)
                path = tuple(inner.split(" (time column)")[0].rstrip(")").split("."))
                ms = Check(c.name.replace(" epoch µs", " epoch ms (Trino's Delta connector: timestamp(3))"), "int",
                           {dialect: "CAST(round(to_unixtime(%s(%s)) * 1e3) AS BIGINT)" % (fn, col(dialect, path))})
                ms_checks[c.name] = ms
                sub[ms.name] = ms
                continue
            sub[c.name] = Check(c.name, c.kind, {dialect: c.exprs[dialect]})
        dv = {}
        run_batch(eng, name, list(sub.values()), report, dv)
        for us_name, ms in ms_checks.items():
            v = values.get(us_name, {}).get("silt", _ABSENT)
            if isinstance(v, Decimal):
                v = (v + 500) // 1000
            report.add("%s: %s" % (label, ms.name), "int",
                       {"silt": v, dialect: dv.get(ms.name, {}).get(dialect, _ABSENT)})
        for c in top_checks:
            if dialect not in c.exprs or c.name in ms_checks:
                continue
            report.add("%s: %s" % (label, c.name), c.kind,
                       {"silt": values.get(c.name, {}).get("silt", _ABSENT), dialect: dv.get(c.name, {}).get(dialect, _ABSENT)},
                       abs_tol=float_tol.get(c.name))

    # -- types
    def walk_types(path, atype, sread, sddl, dtype):
        report.types.append({
            "column": pathname(path), "silt": str(atype) if atype.kind not in ("struct",) else "Struct",
            "spark": (sread.simpleString() if sread is not None else None) if atype.kind != "struct" else ("struct" if sread is not None else None),
            "spark_ddl": (sddl.simpleString() if sddl is not None else None) if atype.kind != "struct" else ("struct" if sddl is not None else None),
            "duckdb": (str(dtype) if dtype is not None else None) if atype.kind != "struct" else ("STRUCT" if dtype is not None else None),
        })
        if spark is not None:
            report.findings.extend(type_findings(path, atype, sread, sddl, spark_schema is not None))
        if atype.kind == "struct":
            for fname, ft in atype.fields:
                walk_types(path + (fname,), ft, spark_type_at(sread, [fname]) if sread is not None else None,
                           spark_type_at(sddl, [fname]) if sddl is not None else None,
                           duck_type_at(dtype, [fname]))
        elif atype.kind == "list" and atype.elem is not None:
            def elem_of(t):
                return getattr(t, "elementType", None)

            def duck_elem(t):
                try:
                    return t.child if t is not None and t.id == "list" else None
                except Exception:  # noqa: BLE001
                    return None
            walk_types(path[:-1] + (path[-1] + "[]",), atype.elem, elem_of(sread), elem_of(sddl), duck_elem(dtype))

    for n, t in cols:
        sread = spark_type_at(spark_schema, [n]) if spark_schema is not None else None
        sddl = spark_type_at(ddl_types, [n]) if ddl_types is not None else None
        walk_types((n,), t, sread, sddl, duck_types.get(n))
    # partition columns as each engine sees them
    for k in pkeys:
        sr = spark_type_at(spark_schema, [k]) if spark_schema is not None else None
        sd = spark_type_at(ddl_types, [k]) if ddl_types is not None else None
        row = {
            "column": k + " (partition)",
            "silt": next((str(parse_arrow_type(r[1])) for r in desc if r[0] == k), None),
            "spark": sr.simpleString() if sr is not None else None,
            "spark_ddl": sd.simpleString() if sd is not None else None,
            "duckdb": str(duck_types.get(k)) if k in duck_types else None,
        }
        report.types.append(row)
        if k == "hour" and row["duckdb"] and row["duckdb"] not in ("INTEGER", "BIGINT", "SMALLINT", "TINYINT"):
            report.findings.append({
                "column": k, "category": "duckdb-partition-type", "silt": row["silt"], "spark": row["spark"],
                "spark_ddl": row["spark_ddl"], "duckdb": row["duckdb"],
                "finding": "partition column hour: read_parquet(hive_partitioning = true) gives %s ('07', not 7; "
                           "`hour < 10` is a binder error), silt %s, Spark %s; silt ddl's DuckDB view sets "
                           "hive_types hour INTEGER" % (row["duckdb"], row["silt"], row["spark"])})
        if row["spark"] and row["spark_ddl"] and row["spark"] != row["spark_ddl"]:
            report.findings.append({
                "column": k, "category": "partition-type", "silt": row["silt"], "spark": row["spark"],
                "spark_ddl": row["spark_ddl"],
                "finding": "partition column %s: Spark's partition discovery infers %s, silt ddl declares %s "
                           "(silt %s, DuckDB %s)" % (k, row["spark"], row["spark_ddl"], row["silt"], row["duckdb"])})
    if duck_ok:
        try:
            duck.execute("DROP VIEW IF EXISTS %s" % view)
        except Exception:  # noqa: BLE001
            pass
    if spark is not None and spark_ok:
        try:
            spark.spark.catalog.dropTempView(view)
        except Exception:  # noqa: BLE001
            pass


# ---------------------------------------------------------------------------------------------
# Output

def print_report(out, reports, args, meta):
    w = out.write
    w("silt interop check: lake %s\n" % os.path.abspath(args.lake))
    w("engines: %s\n\n" % ", ".join("%s %s" % (k, v) for k, v in meta.items()))
    total_checks = total_diff = 0
    for r in reports:
        diffs = r.differences
        total_checks += len(r.results)
        total_diff += len(diffs)
        w("== %s: %d checks, %s\n" % (r.table, len(r.results),
                                      "all equal" if not diffs else "%d DIFFERENT" % len(diffs)))
        for note in r.notes:
            w("   note: %s\n" % note)
        for name, kind, vals, ok, note in r.results:
            if ok and args.differences_only and not note:
                continue
            if ok and note:
                w("   equal      %-58s %s\n" % (name, "  ".join("%s=%s" % (e, show(v)) for e, v in vals.items())))
                w("              (%s)\n" % note)
            elif ok:
                w("   equal      %-58s %s\n" % (name, show(next(iter(vals.values())))))
            else:
                w("   DIFFERENT  %s\n" % name)
                for e, v in vals.items():
                    w("                %-18s %s\n" % (e, show(v)))
        if r.findings:
            w("   type findings:\n")
            for f in r.findings:
                w("     [%s] %s\n" % (f["category"], f["finding"]))
        if args.types or not args.differences_only:
            w("   types: %-34s %-26s %-20s %-20s %s\n" % ("column", "silt (Arrow)", "spark (files)", "spark (ddl)", "duckdb"))
            for t in r.types:
                w("          %-34s %-26s %-20s %-20s %s\n" % (t["column"], _short(t["silt"]), _short(t["spark"]), _short(t["spark_ddl"]), _short(t["duckdb"])))
        w("\n")
    findings = sum(len(r.findings) for r in reports)
    if findings:
        w("type findings by category (not failures):\n")
        cats = {}
        for r in reports:
            for f in r.findings:
                cats.setdefault(f["category"], []).append("%s.%s" % (r.table, f["column"]))
        for c, where in sorted(cats.items()):
            w("  %-22s %3d  %s\n" % (c, len(where), ", ".join(where)))
        w("\n")
    w("summary: %d tables, %d checks, %d different, %d type findings -> %s\n" % (
        len(reports), total_checks, total_diff, findings, "ALL EQUAL" if total_diff == 0 else "DIFFERENCES"))


def _short(s):
    if s is None:
        return "-"
    s = str(s)
    return s if len(s) <= 60 else s[:57] + "..."


def json_summary(reports, args, meta):
    tables = []
    for r in reports:
        tables.append({
            "table": r.table,
            "checks": len(r.results),
            "equal": len(r.results) - len(r.differences),
            "differences": [{"check": n, "values": {e: to_json(v) for e, v in vals.items()}}
                            for n, _k, vals, ok, _note in r.results if not ok],
            "within_float_bound": [{"check": n, "values": {e: to_json(v) for e, v in vals.items()}, "note": note}
                                   for n, _k, vals, ok, note in r.results if ok and note],
            "type_findings": r.findings,
            "ddl_checks": {d: sum(1 for n, *_ in r.results if n.startswith("silt ddl --dialect %s:" % d))
                           for d in ("duckdb", "spark", "trino")},
            "types": r.types,
            "notes": r.notes,
        })
    return {
        "lake": os.path.abspath(args.lake),
        "engines": meta,
        "tables": tables,
        "checks": sum(t["checks"] for t in tables),
        "different": sum(len(t["differences"]) for t in tables),
        "type_findings": sum(len(t["type_findings"]) for t in tables),
        "ok": all(not t["differences"] for t in tables),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--silt", required=True, help="the silt binary")
    ap.add_argument("--lake", required=True, help="the lake directory")
    ap.add_argument("--json", action="store_true", help="print a machine-readable summary instead of the report")
    ap.add_argument("--table", action="append", default=[], help="check only this table (repeatable)")
    ap.add_argument("--no-spark", action="store_true", help="compare silt and DuckDB only")
    ap.add_argument("--differences-only", action="store_true", help="report lists only what differs")
    ap.add_argument("--types", action="store_true",
                    help="with --differences-only: still print every column's type in each engine")
    ap.add_argument("--spark-memory", default="1g", help="spark.driver.memory (default 1g)")
    ap.add_argument("--trino", help="a Trino server (scripts/trino.sh start) to run silt ddl --dialect trino in")
    args = ap.parse_args()

    # Everything the JVM or a library prints goes to stderr; the report to the real stdout.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    silt = SiltEngine(args.silt, args.lake)
    p = subprocess.run([args.silt, "tables", "--lake", args.lake, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print("engines.py: silt tables failed: %s" % p.stderr.strip(), file=sys.stderr)
        return 2
    tables = json.loads(p.stdout)
    if args.table:
        tables = [t for t in tables if t["table"] in args.table]
    duck = DuckEngine()
    workdir = tempfile.mkdtemp(prefix="silt-interop-")
    spark = None
    trino = None
    try:
        if not args.no_spark:
            t0 = time.time()
            try:
                delta = any(is_delta(os.path.join(args.lake, t["table"])) for t in tables)
                spark = SparkEngine(workdir, args.spark_memory, delta)
            except Exception as e:  # noqa: BLE001
                print("engines.py: Spark did not start: %s" % e, file=sys.stderr)
                return 2
            print("engines.py: Spark %s up in %.1f s" % (spark.version(), time.time() - t0), file=sys.stderr)
        if args.trino:
            try:
                trino = TrinoEngine(args.trino, "silt_interop_%d" % os.getpid())
            except Exception as e:  # noqa: BLE001
                print("engines.py: Trino at %s did not answer: %s" % (args.trino, e), file=sys.stderr)
                return 2
        meta = {"silt": silt.version(), "duckdb": duck.version()}
        if trino is not None:
            meta["trino"] = trino.version()
        if spark is not None:
            meta["spark"] = spark.version()
            meta["java"] = spark.java_version()
        reports = []
        for info in tables:
            t0 = time.time()
            r = TableReport(info["table"])
            try:
                check_table(args, info, silt, duck, spark, r, trino)
            except Exception as e:  # noqa: BLE001
                r.notes.append("checker failed on this table: %s" % Error(e).msg)
                r.add("checker ran", "string", {"silt": "ok", "checker": Error(traceback.format_exc().strip().splitlines()[-1])})
            print("engines.py: %s: %d checks, %d different (%.1f s)" % (
                info["table"], len(r.results), len(r.differences), time.time() - t0), file=sys.stderr)
            reports.append(r)
        if args.json:
            json.dump(json_summary(reports, args, meta), out, indent=2)
            out.write("\n")
        else:
            print_report(out, reports, args, meta)
        out.flush()
        return 0 if all(not r.differences for r in reports) else 1
    finally:
        if trino is not None:
            trino.cleanup()
        if spark is not None:
            try:
                spark.spark.stop()
            except Exception:  # noqa: BLE001
                pass
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
