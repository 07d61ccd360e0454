#!/usr/bin/env bash
# silt serve benchmark: Forward ingest with acks, freshness, RSS (bench/serve.py; docs/serve.md).
#   bench/serve.sh [--seconds 60] [--connections 2] [--window 8]
#   SILT=path/to/silt bench/serve.sh ...     # use this binary, skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
PY="$(scripts/pyenv.sh)"
exec "$PY" bench/serve.py --silt "$SILT" "$@"
