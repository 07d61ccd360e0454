#!/usr/bin/env bash
# Creates (first run) or reuses the private Python virtualenv that the interop checks use for
# Spark (pyspark, delta-spark) and DuckDB, installed from PyPI with pip, and fetches the Delta Lake
# jars from Maven Central once into an Ivy cache, so that a later Spark session started with
# `configure_spark_with_delta_pip` and `spark.jars.ivy=$SILT_SPARK_IVY` finds them without
# downloading. Installs a Java 17 runtime with apt when no `java` is on PATH. Idempotent and quiet:
# progress goes to stderr only when something is installed; stdout is exactly the venv's python
# path, so callers can do `PY="$(scripts/spark.sh)"` (scripts/interop/engines.py needs it).
#
#   SILT_SPARK_VENV  venv directory (default: $HOME/.cache/silt-spark-venv)
#   SILT_SPARK_IVY   Ivy cache for the Delta jars (default: $HOME/.cache/silt-spark-ivy)
#   PYTHON           interpreter used to create the venv (default: python3)
#
# Versions: delta-spark 4.4.0 is built per Spark minor version; its pip helper asks Maven for
# io.delta:delta-spark_<spark major.minor>_2.13, which exists for Spark 4.2 (and 4.0, 4.1), so
# pyspark is pinned to the 4.2 line that delta-spark 4.4.0 accepts (pyspark<=4.2.0). Spark 4
# needs Java 17 or 21.
set -euo pipefail

VENV="${SILT_SPARK_VENV:-$HOME/.cache/silt-spark-venv}"
IVY="${SILT_SPARK_IVY:-$HOME/.cache/silt-spark-ivy}"
PY="$VENV/bin/python"
PYSPARK_VERSION=4.2.0
DELTA_VERSION=4.4.0
PKGS=("pyspark==$PYSPARK_VERSION" "delta-spark==$DELTA_VERSION" duckdb)
# Written after a Spark session with the Delta jars wrote and read back a Delta table.
MARKER="$VENV/.silt-delta-jars"
WANT="delta-spark $DELTA_VERSION pyspark $PYSPARK_VERSION ivy $IVY"

have_java() {
  command -v java >/dev/null 2>&1 && java -version >/dev/null 2>&1
}

modules_ready() {
  [ -x "$PY" ] && "$PY" - "$PYSPARK_VERSION" "$DELTA_VERSION" >/dev/null 2>&1 <<'EOF'
import sys
import importlib.metadata as md
import duckdb, pyspark, delta  # noqa: F401
assert pyspark.__version__ == sys.argv[1], pyspark.__version__
assert md.version("delta-spark") == sys.argv[2]
EOF
}

ready() {
  have_java && modules_ready && [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$WANT" ]
}

if ! ready; then
  mkdir -p "$(dirname "$VENV")"
  # Serialize concurrent first runs (parallel tests) on a lock file next to the venv.
  exec 9>"$VENV.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if ! ready; then
    start=$(date +%s)
    if ! have_java; then
      echo "spark.sh: no java on PATH; installing openjdk-17-jre-headless with apt" >&2
      SUDO=""
      [ "$(id -u)" -eq 0 ] || SUDO="sudo"
      $SUDO apt-get update >&2
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends openjdk-17-jre-headless >&2
      have_java || { echo "spark.sh: java still not runnable after installing openjdk-17-jre-headless" >&2; exit 1; }
    fi
    if ! modules_ready; then
      if [ ! -x "$PY" ]; then
        echo "spark.sh: creating $VENV" >&2
        "${PYTHON:-python3}" -m venv "$VENV" >&2
      fi
      echo "spark.sh: installing ${PKGS[*]} (pyspark is a ~400 MB download)" >&2
      "$PY" -m pip install --quiet --disable-pip-version-check "${PKGS[@]}" >&2
      modules_ready || { echo "spark.sh: ${PKGS[*]} still not importable in $VENV" >&2; exit 1; }
    fi
    echo "spark.sh: fetching the Delta Lake jars into $IVY (one local Spark session)" >&2
    mkdir -p "$IVY"
    rm -f "$MARKER"
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    "$PY" - "$IVY" "$scratch" >&2 <<'EOF'
import sys
from pyspark.sql import SparkSession
from delta import configure_spark_with_delta_pip

ivy, scratch = sys.argv[1], sys.argv[2]
builder = (
    SparkSession.builder.master("local[1]")
    .appName("silt-spark-setup")
    .config("spark.jars.ivy", ivy)
    .config("spark.driver.memory", "512m")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "1")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.databricks.delta.snapshotPartitions", "1")
    .config("spark.sql.warehouse.dir", scratch + "/warehouse")
    .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + scratch)
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
path = scratch + "/delta-smoke"
spark.range(3).write.format("delta").save(path)
n = spark.read.format("delta").load(path).count()
spark.stop()
assert n == 3, n
print("spark.sh: Delta smoke test wrote and read 3 rows", file=sys.stderr)
EOF
    echo "$WANT" >"$MARKER"
    echo "spark.sh: ready in $(( $(date +%s) - start )) s" >&2
  fi
fi
echo "$PY"
