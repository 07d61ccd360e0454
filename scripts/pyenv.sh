#!/usr/bin/env bash
# Creates (first run) or reuses the private Python virtualenv that tests and benchmarks use for
# DuckDB and pyarrow, and the real clients of `silt serve`'s tests (fluent-logger and msgpack for
# the Forward protocol, the ADBC Flight SQL driver; confluent-kafka for the broker that
# scripts/kafka.sh runs, and fastavro to read what silt produces as Avro), installed from PyPI with pip. Idempotent and quiet: pip's output goes to
# stderr only when something is installed; stdout is exactly the venv's python path, so callers
# can do `PY="$(scripts/pyenv.sh)"`.
#
#   SILT_VENV   venv directory (default: $HOME/.cache/silt-venv)
#   PYTHON      interpreter used to create it (default: python3)
set -euo pipefail

VENV="${SILT_VENV:-$HOME/.cache/silt-venv}"
PY="$VENV/bin/python"
PKGS=(duckdb pyarrow fluent-logger msgpack adbc-driver-flightsql adbc-driver-manager confluent-kafka fastavro)

ready() {
  [ -x "$PY" ] && "$PY" -c 'import duckdb, pyarrow, fluent.sender, msgpack, adbc_driver_flightsql.dbapi, confluent_kafka, fastavro' >/dev/null 2>&1
}

if ! ready; then
  mkdir -p "$(dirname "$VENV")"
  # Serialize concurrent first runs (parallel tests) on a lock file next to the venv.
  exec 9>"$VENV.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if ! ready; then
    if [ ! -x "$PY" ]; then
      "${PYTHON:-python3}" -m venv "$VENV" >&2
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check --upgrade "${PKGS[@]}" >&2
    ready || { echo "pyenv.sh: ${PKGS[*]} still not importable in $VENV" >&2; exit 1; }
  fi
fi
echo "$PY"
