#!/usr/bin/env bash
# Object-store lake (MinIO, scripts/minio.sh) against a local lake: import and query throughput,
# ratios printed (issue 25, benchmark 3; bench/object_lake.py, docs/lake.md).
#   bench/object-lake.sh [--events 2000000] [--runs 3] [--partition auto]
#   SILT=path/to/silt bench/object-lake.sh ...     # use this binary, skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
PY="$(scripts/pyenv.sh)"
exec "$PY" bench/object_lake.py --silt "$SILT" "$@"
