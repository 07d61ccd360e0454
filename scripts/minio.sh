#!/usr/bin/env bash
# A real S3 server for tests: one MinIO server on 127.0.0.1, built once from source through the
# Go module proxy (`go install github.com/minio/minio@<pinned pseudo-version>`) into
# $HOME/.cache/silt-minio/bin; no Docker and no prebuilt download.
#
#   scripts/minio.sh start        build if needed, start (idempotent), wait for /minio/health/live,
#                                 print the env block below on stdout
#   scripts/minio.sh env          print the env block for the running server:
#                                   eval "$(scripts/minio.sh env)"
#                                 sets AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL,
#                                 AWS_REGION (and AWS_DEFAULT_REGION) = us-east-1, AWS_ALLOW_HTTP=true
#   scripts/minio.sh endpoint     print http://127.0.0.1:PORT
#   scripts/minio.sh bucket NAME  create bucket NAME (curl --aws-sigv4; an existing bucket is fine)
#   scripts/minio.sh status       exit 0 and say so when running, exit 3 when not
#   scripts/minio.sh stop         stop the server and wait for it to exit (data is kept)
#   scripts/minio.sh clean        stop, then delete the state directory
#   scripts/minio.sh build        only build (or find) the cached binary
#
#   SILT_MINIO_DIR      state: data, log, pid, port (default ${TMPDIR:-/tmp}/silt-minio)
#   SILT_MINIO_PORT     S3 port (default: the previous run's port if free, else a free one)
#   SILT_MINIO_VERSION  module version to build (default pinned below)
#   SILT_MINIO_CACHE    binary cache (default $HOME/.cache/silt-minio)
#
# Progress and errors go to stderr, so stdout is only what a caller evaluates or reads.
# MinIO is AGPL-3.0: it runs here as a separate test server; none of its code goes into silt.
set -euo pipefail

VERSION="${SILT_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
CACHE="${SILT_MINIO_CACHE:-$HOME/.cache/silt-minio}"
BIN="$CACHE/bin/minio"
STAMP="$CACHE/bin/minio.version"
DIR="${SILT_MINIO_DIR:-${TMPDIR:-/tmp}/silt-minio}"
ACCESS_KEY="silt-test"
SECRET_KEY="silt-test-secret"
REGION="us-east-1"
START_TIMEOUT="${SILT_MINIO_START_TIMEOUT:-60}"

say() { echo "minio.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# Go: the one on PATH, else the usual /usr/local/go, else Debian's golang-go. The pinned MinIO
# needs Go >= 1.24; a Go >= 1.21 fetches a newer toolchain itself (GOTOOLCHAIN=auto) from the
# module proxy, an older one cannot.
find_go() {
  if command -v go >/dev/null 2>&1; then command -v go; return; fi
  if [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go; return; fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "no Go found and not root; install Go >= 1.24 (https://go.dev/doc/install) or run as root so that apt-get can install golang-go"
    sudo="sudo -n"
  fi
  say "no Go found; installing Debian's golang-go"
  exec 8>/tmp/silt-apt-deps.lock
  if command -v flock >/dev/null 2>&1; then flock 8; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends golang-go ca-certificates >&2 \
    || die "apt-get install golang-go failed; install Go >= 1.24 by hand"
  command -v go
}

build() {
  if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION" ]; then return; fi
  mkdir -p "$CACHE/bin"
  exec 7>"$CACHE/build.lock"
  if command -v flock >/dev/null 2>&1; then flock 7; fi
  if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION" ]; then return; fi
  local go gov
  go="$(find_go)"
  gov="$("$go" env GOVERSION 2>/dev/null || true)"
  case "$gov" in
    go1.2[1-9]*|go1.[3-9][0-9]*|go[2-9]*) ;;
    *) die "$go is ${gov:-too old} (no automatic toolchain switch); MinIO needs Go >= 1.24: install a newer Go (e.g. from go.dev) and put it first on PATH" ;;
  esac
  say "building github.com/minio/minio@$VERSION with $gov into $CACHE/bin (first run only; several minutes)"
  local t0=$SECONDS
  rm -f "$STAMP"
  GOBIN="$CACHE/bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false nice -n 19 \
    "$go" install -trimpath -ldflags "-s -w" "github.com/minio/minio@$VERSION" >&2 \
    || die "go install github.com/minio/minio@$VERSION failed (see above); is the Go module proxy reachable (go env GOPROXY)?"
  echo "$VERSION" >"$STAMP"
  say "built in $((SECONDS - t0)) s: $BIN"
}

# shellcheck source=scripts/lib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"

# The pid of our running server, if any (checks that the pid still is a minio on our data dir).
running_pid() {
  local pid
  pid="$(cat "$DIR/minio.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/data" || return 1
  echo "$pid"
}

endpoint() { echo "http://127.0.0.1:$(cat "$DIR/port")"; }

print_env() {
  cat <<ENV
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_ENDPOINT_URL=$(endpoint)
export AWS_REGION=$REGION
export AWS_DEFAULT_REGION=$REGION
export AWS_ALLOW_HTTP=true
ENV
}

live() { curl -fsS -o /dev/null --max-time 2 "$(endpoint)/minio/health/live" 2>/dev/null; }

start() {
  command -v curl >/dev/null 2>&1 || die "curl is needed (apt-get install curl)"
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if running_pid >/dev/null; then print_env; return; fi
  build
  local port console pid
  if [ -n "${SILT_MINIO_PORT:-}" ]; then
    port="$SILT_MINIO_PORT"
    port_free "$port" || die "SILT_MINIO_PORT=$port is in use on 127.0.0.1; pick another or unset it"
  else
    port="$(cat "$DIR/port" 2>/dev/null || true)"
    if [ -z "$port" ] || ! port_free "$port"; then port="$(free_port)"; fi
  fi
  console="$(free_port)"
  while [ "$console" = "$port" ]; do console="$(free_port)"; done
  echo "$port" >"$DIR/port"
  mkdir -p "$DIR/data"
  : >"$DIR/minio.log"
  # setsid: the server does not share the caller's process group or terminal; it must not keep
  # the lock files open (7-9), or the next start would wait on them forever.
  MINIO_ROOT_USER="$ACCESS_KEY" MINIO_ROOT_PASSWORD="$SECRET_KEY" MINIO_SITE_REGION="$REGION" \
    MINIO_BROWSER=off MINIO_UPDATE=off \
    setsid "$BIN" server --quiet --anonymous --address "127.0.0.1:$port" \
    --console-address "127.0.0.1:$console" "$DIR/data" >"$DIR/minio.log" 2>&1 </dev/null 7>&- 8>&- 9>&- &
  pid=$!
  echo "$pid" >"$DIR/minio.pid"
  for _ in $(seq 1 $((START_TIMEOUT * 4))); do
    if live; then
      say "MinIO up at $(endpoint) (pid $pid, data $DIR/data)"
      print_env
      return
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      say "MinIO exited during startup; last lines of $DIR/minio.log:"
      tail -n 30 "$DIR/minio.log" >&2
      rm -f "$DIR/minio.pid"
      exit 1
    fi
    sleep 0.25
  done
  say "MinIO did not answer $(endpoint)/minio/health/live within ${START_TIMEOUT}s; last lines of $DIR/minio.log:"
  tail -n 30 "$DIR/minio.log" >&2
  kill "$pid" 2>/dev/null || true
  rm -f "$DIR/minio.pid"
  exit 1
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then rm -f "$DIR/minio.pid"; say "not running"; return; fi
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 80); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "pid $pid did not exit within 20 s of SIGTERM; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$DIR/minio.pid"
  say "stopped (pid $pid)"
}

need_running() {
  running_pid >/dev/null || die "not running (state dir $DIR); start it with scripts/minio.sh start"
}

bucket() {
  local name="${1:-}" code
  [ -n "$name" ] || die "usage: minio.sh bucket NAME"
  need_running
  # S3 signature v4 over an empty body; the payload hash header is signed along.
  code="$(curl -sS -o "$DIR/bucket.out" -w '%{http_code}' -X PUT \
    --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    "$(endpoint)/$name")" || die "curl failed creating bucket $name"
  case "$code" in
    200) say "bucket $name created" ;;
    409)
      grep -q BucketAlreadyOwnedByYou "$DIR/bucket.out" || die "bucket $name: HTTP 409: $(cat "$DIR/bucket.out")"
      say "bucket $name exists" ;;
    *) die "bucket $name: HTTP $code: $(cat "$DIR/bucket.out")" ;;
  esac
}

cmd="${1:-}"
case "$cmd" in
  start) start ;;
  stop) stop ;;
  clean) stop; rm -rf "$DIR"; say "removed $DIR" ;;
  status)
    if pid="$(running_pid)"; then say "running: pid $pid, $(endpoint), data $DIR/data"; exit 0; fi
    say "not running (state dir $DIR)"; exit 3 ;;
  endpoint) need_running; endpoint ;;
  env) need_running; print_env ;;
  bucket) shift; bucket "$@" ;;
  build) build; echo "$BIN" ;;
  *) echo "usage: $0 start|stop|status|endpoint|env|bucket NAME|clean|build" >&2; exit 2 ;;
esac
