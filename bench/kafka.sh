#!/usr/bin/env bash
# Kafka ingest benchmark (issue 24): one silt process draining pre-filled 6-partition topics of
# Zeek conn JSON (real-derived) and RASP-style netdata CSV, against DuckDB converting the same
# records from a file in the same run; then two processes of one group against one
# (bench/kafka_bench.py; docs/kafka.md). Starts the broker with scripts/kafka.sh.
#   bench/kafka.sh [--conn 1000000] [--netdata 2000000] [--skip-ingest] [--rasp-direct]
#   SILT=path/to/silt bench/kafka.sh ...     # use this binary, skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
PY="$(scripts/pyenv.sh)"
BROKER="$(scripts/kafka.sh start | tail -n 1)"
exec "$PY" bench/kafka_bench.py --silt "$SILT" --broker "$BROKER" "$@"
