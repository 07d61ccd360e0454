#!/usr/bin/env bash
# RASP pipeline benchmark (issue 23): sFlow enriched with ASN, geo, reverse DNS at import
# against a DuckDB join, and RASP's queries (bench/rasp.py; docs/enrich.md).
#   bench/rasp.sh [--rdns-rows 20000000] [--samples 10000000] [--reps 3]
#   SILT=path/to/silt bench/rasp.sh ...     # use this binary, skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
PY="$(scripts/pyenv.sh)"
exec "$PY" bench/rasp.py --silt "$SILT" --python "$PY" "$@"
