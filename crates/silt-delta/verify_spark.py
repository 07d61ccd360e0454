"""Reads the tables of `cargo run --example spark_fixture -- DIR` with Spark + Delta Lake and
checks them against what the fixture printed.

    PY="$(/work/main/scripts/spark.sh)"
    cargo run --example spark_fixture -- /tmp/lake > /tmp/lake/expect.json
    "$PY" verify_spark.py /tmp/lake /tmp/lake/expect.json
"""
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from decimal import Decimal

from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (DecimalType, IntegerType, StringType, TimestampNTZType,
                               TimestampType)

lake, expect_path = sys.argv[1], sys.argv[2]
expect = json.load(open(expect_path))
scratch = tempfile.mkdtemp()
ivy = os.environ.get("SILT_SPARK_IVY", os.path.expanduser("~/.cache/silt-spark-ivy"))
builder = (
    SparkSession.builder.master("local[1]")
    .appName("silt-delta-verify")
    .config("spark.jars.ivy", ivy)
    .config("spark.driver.memory", "1g")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "1")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.sql.warehouse.dir", scratch + "/warehouse")
    .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + scratch)
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
failures = []


def check(what, got, want):
    ok = got == want
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got!r}" + ("" if ok else f" (want {want!r})"))
    if not ok:
        failures.append(what)


conn = os.path.join(lake, "zeek.conn")
df = spark.read.format("delta").load(conn)
df.printSchema()
types = {f.name: f.dataType for f in df.schema.fields}
check("port type", types["port"], IntegerType())
check("bytes type", types["bytes"], DecimalType(20, 0))
check("ts type", types["ts"], TimestampType())
check("dt type", types["dt"], StringType())
check("hour type", types["hour"], IntegerType())
check("service type", types["service"], StringType())
check("partition columns", spark.sql(f"DESCRIBE DETAIL delta.`{conn}`").first()["partitionColumns"], ["dt", "hour"])
check("latest count", df.count(), expect["zeek.conn"]["versions"][max(expect["zeek.conn"]["versions"], key=int)])
agg = df.agg(F.min("port"), F.max("port"), F.max("bytes"), F.min("bytes")).first()
check("min port (> 32767)", agg[0], 65535 - 49)
check("max port", agg[1], 65535)
check("max bytes (u64::MAX)", agg[2], Decimal(2**64 - 1))
check("min bytes", agg[3], Decimal(2**64 - 1 - 49))
h18 = df.where("hour = 18")
check("hour=18 count", h18.count(), 70)
check("hour=18 min ts", h18.agg(F.min("ts")).first()[0], datetime(2024, 3, 24, 18, 0, 0))
check("hour=18 max ts", h18.agg(F.max("ts")).first()[0], datetime(2024, 3, 24, 18, 1, 19))
check("null partition rows", df.where("dt IS NULL AND hour IS NULL").count(), 5)
check("null partition ts all null", df.where("dt IS NULL").where("ts IS NOT NULL").count(), 0)
check("service = dns", df.where("service = 'dns'").count(), 20)
check("service null", df.where("service IS NULL").count(), 55)
check("struct field", df.where("id.orig_h = '10.0.0.3'").count(), 3)
check("list", df.where("array_contains(tags, 't7')").count(), 2)
check("dictionary column", sorted(r[0] for r in df.select("proto").distinct().collect()), ["tcp", "udp"])
# A time filter: data skipping on the ts statistics must not lose rows.
# 18:00:30..18:00:49 of the first file, 18:01:00..18:01:04 of the second.
check("ts window", df.where("ts >= '2024-03-24 18:00:30' AND ts < '2024-03-24 18:01:05'").count(), 25)
for v, n in sorted(expect["zeek.conn"]["versions"].items(), key=lambda kv: int(kv[0])):
    got = spark.read.format("delta").option("versionAsOf", int(v)).load(conn).count()
    check(f"count at version {v}", got, n)
check("files", sorted(os.path.relpath(p, conn) for p in
                     [f.replace("file:", "") for f in df.inputFiles()]), sorted(expect["zeek.conn"]["files"]))
hist = spark.sql(f"DESCRIBE HISTORY delta.`{conn}`").select("version", "operation", "userMetadata", "isBlindAppend").orderBy("version")
hist.show(truncate=False)

local = os.path.join(lake, "gen.local")
ldf = spark.read.format("delta").load(local)
ldf.printSchema()
ltypes = {f.name: f.dataType for f in ldf.schema.fields}
check("ntz type", ltypes["t"], TimestampNTZType())
check("ntz values", [r[0] for r in ldf.orderBy("t").select("t").collect()],
      [datetime(2024, 3, 24, 0), datetime(2024, 3, 24, 1), datetime(2024, 3, 24, 2)])
check("u64 values", sorted(r[0] for r in ldf.select("n").collect()), [Decimal(1), Decimal(3), Decimal(2**64 - 1)])
print(spark.sql(f"DESCRIBE DETAIL delta.`{local}`").select("minReaderVersion", "minWriterVersion", "tableFeatures").first())

# A column of the files that is all nulls (Arrow Null, Parquet INT32/UNKNOWN), declared string.
try:
    ndf = spark.read.format("delta").load(os.path.join(lake, "gen.nulls"))
    ndf.printSchema()
    check("null columns", [(r.n, r.nothing, r.s.asDict() if r.s else None, r.l) for r in ndf.orderBy("n").collect()],
          [(1, None, {"a": "x"}, [None]), (2, None, {"a": "y"}, []), (3, 7, None, None)])
except Exception as e:
    check("null columns", "error: " + str(e).splitlines()[0][:300], "rows")

# Spark can append to a table silt's log created (writer version 1), and silt's files stay.
spark.createDataFrame([(datetime(2024, 3, 24, 19, 0, 0), 40000, "2024-03-24", 19)],
                      "ts timestamp, port int, dt string, hour int") \
    .write.format("delta").mode("append").save(conn)
check("count after a Spark append", spark.read.format("delta").load(conn).count(), 76)
spark.stop()
print("FAILURES:", failures if failures else "none")
sys.exit(1 if failures else 0)
