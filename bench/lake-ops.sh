#!/usr/bin/env bash
# Lake maintenance benchmark (issue 25): small files from silt serve, compacted; SIGKILL during
# compaction (bench/lake_ops.py; docs/lake.md).
#   bench/lake-ops.sh [--minutes 10] [--rate 20000] [--tables 4] [--kills 50] [--table-format delta]
#   SILT=path/to/silt bench/lake-ops.sh ...     # use this binary, skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
PY="$(scripts/pyenv.sh)"
exec "$PY" bench/lake_ops.py --silt "$SILT" --python "$PY" "$@"
