#!/usr/bin/env bash
# The whole test suite: Rust unit, corpus and SQL golden tests, then the cross-checks against
# DuckDB (installed into a private virtualenv from PyPI by scripts/pyenv.sh, with the Python
# clients the serve tests drive: fluent-logger, the ADBC Flight SQL driver; Go's
# fluent-logger-golang comes from the Go module proxy). tshark and chromium
# (independent references for PCAP counts and report rendering) come from scripts/apt-deps.sh.
# Real test data is read from ../shared/corpus (or $SILT_CORPUS); tests skip with a message
# when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# A one-shot run gains nothing from incremental caches (gigabytes per crate set); a developer who
# wants them sets CARGO_INCREMENTAL=1.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== reference tools (tshark, chromium) from Debian, if missing"
scripts/apt-deps.sh

# Cargo's JSON messages of every build below, for scripts/prune-target.sh (diagnostics are still
# rendered on stderr as usual).
messages="$(mktemp)"
trap 'rm -f "$messages"' EXIT
json=(--message-format=json-render-diagnostics)

echo "== formatting and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets "${json[@]}" -- -D warnings >>"$messages"

echo "== Python clients and DuckDB (scripts/pyenv.sh)"
PY="$(scripts/pyenv.sh)"
export SILT_PYTHON="$PY"

echo "== build the tests and the binary, then drop what earlier builds left in the target"
cargo test --workspace --no-run "${json[@]}" >>"$messages"
scripts/prune-target.sh "$CARGO_TARGET_DIR" <"$messages"
# The `silt` binary that build made for the integration tests (a separate `cargo build -p silt`
# would resolve other dependency features and build DataFusion a second time).
SILT_BIN="$(python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line) if line.startswith("{") else {}
    t = m.get("target", {})
    # Not the unit-test harness of the bin (same name and kind, profile.test true).
    if (m.get("executable") and t.get("name") == "silt" and "bin" in t.get("kind", [])
            and not m.get("profile", {}).get("test")):
        print(m["executable"])
        break
' <"$messages")"
[ -x "$SILT_BIN" ] || { echo "no silt binary in the test build" >&2; exit 1; }

echo "== cargo test"
cargo test --workspace

echo "== cross-checks with DuckDB"
SILT="$SILT_BIN" "$PY" tests/crosscheck.py
