# shellcheck shell=bash
# Start and stop helpers shared by scripts/registry.sh and scripts/trino.sh (sourced; needs `say`
# and `die` functions).

# apt_install PACKAGE...: apt-get install them (root, or sudo without a password), serialized
# with scripts/apt-deps.sh on its lock.
apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "need $* but not root and no sudo: install them (apt-get install $*) and run again"
    sudo="sudo -n"
  fi
  say "installing $* with apt-get"
  exec 8>/tmp/silt-apt-deps.lock
  if command -v flock >/dev/null 2>&1; then flock 8; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2 \
    || die "apt-get install $* failed; install them by hand and run again"
  exec 8>&-
}

# pid_of PIDFILE MARKER: the pid in PIDFILE if that process runs and its command line holds
# MARKER (so a pid reused by another program is not taken for ours); else returns 1.
pid_of() {
  local pid
  pid="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2" || return 1
  echo "$pid"
}

# await_ready PID LOG PIDFILE TIMEOUT NAME CMD...: runs CMD every 0.25 s until it succeeds (then
# returns); if the process exits first, or TIMEOUT seconds pass, shows the log's last lines,
# removes the pid file and exits 1.
await_ready() {
  local pid=$1 log=$2 pidfile=$3 timeout=$4 name=$5
  shift 5
  for _ in $(seq 1 $((timeout * 4))); do
    if "$@"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      say "$name exited during startup; last lines of $log:"
      tail -n 40 "$log" >&2
      rm -f "$pidfile"
      exit 1
    fi
    sleep 0.25
  done
  say "$name did not serve within ${timeout}s; last lines of $log:"
  tail -n 40 "$log" >&2
  kill "$pid" 2>/dev/null || true
  rm -f "$pidfile"
  exit 1
}

# stop_pid PID PIDFILE [FILE...]: SIGTERM, then up to 60 s (a JVM writing its class-data archive
# at exit takes several seconds), then SIGKILL, after which FILE... (that archive, perhaps half
# written) are removed; the pid file goes in any case.
stop_pid() {
  local pid=$1 pidfile=$2
  shift 2
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 240); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "pid $pid did not exit within 60 s of SIGTERM; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    rm -f "$@"
  fi
  rm -f "$pidfile"
  say "stopped (pid $pid)"
}
