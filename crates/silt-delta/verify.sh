#!/usr/bin/env bash
# Builds the fixture tables (examples/spark_fixture.rs) and reads them with Spark + Delta Lake
# and with DuckDB's delta extension. Usage: ./verify.sh [dir] (default /tmp/silt-delta-lake).
set -euo pipefail
cd "$(dirname "$0")"
DIR="${1:-/tmp/silt-delta-lake}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | python3 -c "import json,sys; print(json.load(sys.stdin)[\"target_directory\"])")}"
export CARGO_TARGET_DIR
nice cargo build -p silt-delta --examples
rm -rf "$DIR" "$DIR-duckdb"
mkdir -p "$DIR"
"$CARGO_TARGET_DIR/debug/examples/spark_fixture" "$DIR" >"$DIR/expect.json"
cp -r "$DIR" "$DIR-duckdb"
# DuckDB cannot download extensions here; PyPI's duckdb-ext-delta is built for DuckDB 1.4.4.
if [ ! -x .duckdb144/bin/python ]; then
  python3 -m venv .duckdb144
  .duckdb144/bin/pip install --quiet --disable-pip-version-check duckdb==1.4.4 duckdb-ext-delta==1.4.4.20260205
fi
.duckdb144/bin/python verify_duckdb.py "$DIR-duckdb" "$DIR-duckdb/expect.json"
PY="$(../../scripts/spark.sh)"
# Last: it appends a row with Spark.
nice "$PY" verify_spark.py "$DIR" "$DIR/expect.json" 2>&1 | grep -E '^(ok|FAIL|FAILURES)|^\||^\+|^ \|-- |^root|^Row'
