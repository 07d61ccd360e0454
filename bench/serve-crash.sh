#!/usr/bin/env bash
# silt serve, kill -9 ×N (issue 22's benchmark item 4): crates/silt/tests/serve_crash.rs's
# SIGKILL test with SILT_CRASH_KILLS=N (default 100) against a release build. A client sends
# batches of 50 events over HTTP with acknowledgements and resends what it did not see
# acknowledged (same idempotency key); the server is killed at a random moment 100–600 ms into
# each run (every other run while compacting), then stopped cleanly. Prints the acknowledged
# events and what the lake holds: lost and duplicated must be 0 (the test fails otherwise).
#   bench/serve-crash.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"
SILT_CRASH_KILLS="${1:-100}" exec cargo test --release -q -p silt --test serve_crash \
  sigkill_at_random_moments_loses_and_duplicates_nothing -- --nocapture
