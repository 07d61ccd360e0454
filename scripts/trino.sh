#!/usr/bin/env bash
# A real Trino server for tests: one coordinator that also runs tasks, on 127.0.0.1, run from the
# release's server tarball on Maven Central (io.trino:trino-server:VERSION:tar.gz, unpacked once
# into $HOME/.cache/silt-trino with every plugin but hive, delta-lake and tpch removed) plus the
# CLI (io.trino:trino-cli:VERSION:jar:executable); no Docker. Two catalogs read local files:
#
#   hive   connector.name=hive, file metastore in $DIR/metastore/hive; tables are made with
#          CREATE TABLE hive.s.t (...) WITH (external_location='file:///abs/dir', format='PARQUET',
#          partitioned_by=ARRAY['dt']) and CALL hive.system.sync_partition_metadata('s','t','FULL').
#          Timestamps are read at microsecond precision (hive.timestamp-precision=MICROSECONDS, so a
#          column must be declared timestamp(6); timestamp(3) is refused). The Hive connector has
#          no "timestamp with time zone" column type ("Unsupported Hive type"): declare a Parquet
#          TIMESTAMP(MICROS, isAdjustedToUTC=true) column as timestamp(6); it reads as the UTC wall
#          clock (the server's JVM runs in UTC), e.g. 2024-03-24 12:34:56.123456.
#   delta  connector.name=delta_lake, file metastore in $DIR/metastore/delta; an existing Delta
#          table is registered with CALL delta.system.register_table('s', 't', 'file:///abs/dir')
#          (after CREATE SCHEMA delta.s); a Delta timestamp reads as timestamp(3) with time zone.
#
# Both catalogs reach the whole local file system as file:///abs/path through Trino's Hadoop file
# system support (fs.hadoop.enabled). Not through the native local one (fs.native-local.enabled
# with local.location=/): in Trino 476 it does accept file:/// locations, but it lists files as
# local:///..., so the Hive connector finds no file under a file:/// table or partition location
# and every query returns no rows, without an error. The metastores are kept across restarts.
#
#   trino.sh start       fetch the server if needed, start (idempotent), wait until it runs
#                        queries; the last stdout line is http://127.0.0.1:PORT
#   trino.sh url         print the URL of the running server
#   trino.sh query SQL   run SQL (the arguments, joined by spaces; "-" or none: read stdin) with
#                        the CLI; the result goes to stdout as CSV with a header line; exit
#                        non-zero on any error
#   trino.sh status      exit 0 and say so when running, exit 3 when not
#   trino.sh stop        stop the server and wait for it to exit (the metastores are kept)
#   trino.sh clean       stop, then delete the state directory (config, log, metastores)
#   trino.sh fetch       only fetch the server and the CLI into the cache
#
#   SILT_TRINO_PORT       HTTP port on 127.0.0.1 (default 18832; must be free)
#   SILT_TRINO_DIR        state: config, log, pid, port, metastores (default $SILT_TRINO_CACHE/run)
#   SILT_TRINO_HEAP       -Xmx (default 2G)
#   SILT_TRINO_VERSION    Trino release (default 476; 470+ needs Java >= 24.0.1)
#   SILT_TRINO_CACHE      download cache (default $HOME/.cache/silt-trino)
#   SILT_TRINO_JAVA_HOME  a JDK/JRE >= 24 to run it with (default: the newest >= 24 found in
#                         JAVA_HOME, on PATH or under /usr/lib/jvm)
#   SILT_TRINO_CDS        1 (default): keep a JVM class-data-sharing archive in the cache, written
#                         when the first run stops, which makes later starts faster; 0: don't
#   SILT_TRINO_FULL_JIT   0 (default): the server compiles with C1 only (-XX:TieredStopAtLevel=1),
#                         which starts it in about half the time, with slower long queries;
#                         1: the JVM's full tiered compilation
#
# Needs Java >= 24 (the default Java 17 cannot run it) and, on the first run only, Maven; Maven
# is installed with apt-get when missing, and so is a Java 25 when none is found and apt offers one
# (as root, or with passwordless sudo). The first fetch downloads ~820 MB (~420 MB kept, plus a ~125 MB class-data archive after the first stop).
# Progress and errors go to stderr.
set -euo pipefail

VERSION="${SILT_TRINO_VERSION:-476}"
CACHE="${SILT_TRINO_CACHE:-$HOME/.cache/silt-trino}"
SERVER="$CACHE/$VERSION/server"
CLI="$CACHE/$VERSION/trino-cli.jar"
DIR="${SILT_TRINO_DIR:-$CACHE/run}"
PORT="${SILT_TRINO_PORT:-18832}"
HEAP="${SILT_TRINO_HEAP:-2G}"
START_TIMEOUT="${SILT_TRINO_START_TIMEOUT:-180}"
CDS="${SILT_TRINO_CDS:-1}"
FULL_JIT="${SILT_TRINO_FULL_JIT:-0}"
DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
MIN_JAVA=24
KEEP_PLUGINS="hive delta-lake tpch"

say() { echo "trino.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# shellcheck source=scripts/lib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"
# shellcheck source=scripts/lib/service.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/service.sh"

# The version of the java binary $1 as MAJOR.MINOR.PATCH (empty when it does not run).
java_version() {
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -n 1
}

# Whether version $1 (e.g. 24, 24.0.1, 25.0.3) is at least 24.0.1, Trino's minimum.
java_ok() {
  local maj min pat
  IFS=. read -r maj min pat <<<"$1"
  [ -n "$maj" ] || return 1
  [ "$maj" -gt "$MIN_JAVA" ] && return 0
  [ "$maj" -eq "$MIN_JAVA" ] && [ $(( ${min:-0} * 1000 + ${pat:-0} )) -ge 1 ]
}

# Print the path of a java >= MIN_JAVA: SILT_TRINO_JAVA_HOME, JAVA_HOME, PATH, then the newest
# under /usr/lib/jvm.
find_java() {
  local c v best="" bestv=0
  if [ -n "${SILT_TRINO_JAVA_HOME:-}" ]; then
    c="$SILT_TRINO_JAVA_HOME/bin/java"
    v="$(java_version "$c" 2>/dev/null || true)"
    java_ok "$v" || die "SILT_TRINO_JAVA_HOME=$SILT_TRINO_JAVA_HOME has no java >= 24.0.1"
    echo "$c"; return
  fi
  for c in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java 2>/dev/null || true)"; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    v="$(java_version "$c" 2>/dev/null || true)"
    if java_ok "$v"; then echo "$c"; return; fi
  done
  for c in /usr/lib/jvm/*/bin/java; do
    [ -x "$c" ] || continue
    v="$(java_version "$c" 2>/dev/null || true)"
    if java_ok "$v" && [ "${v%%.*}" -gt "$bestv" ]; then best="$c"; bestv="${v%%.*}"; fi
  done
  [ -n "$best" ] && echo "$best"
}

need_java() {
  local j pkg=openjdk-25-jre-headless
  j="$(find_java || true)"
  if [ -z "$j" ] && apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    apt_install "$pkg"
    j="$(find_java || true)"
  fi
  [ -n "$j" ] || die "Trino $VERSION needs Java >= 24.0.1 and none was found (JAVA_HOME, PATH, /usr/lib/jvm) nor offered by apt; set SILT_TRINO_JAVA_HOME to one"
  echo "$j"
}

# The server unpacked into $SERVER (trimmed to the plugins we use) and the CLI jar, once.
fetch() {
  [ -f "$SERVER/.complete" ] && [ -f "$CLI" ] && return
  mkdir -p "$CACHE"
  exec 7>"$CACHE/fetch.lock"
  if command -v flock >/dev/null 2>&1; then flock 7; fi
  if [ -f "$SERVER/.complete" ] && [ -f "$CLI" ]; then exec 7>&-; return; fi
  command -v mvn >/dev/null 2>&1 || apt_install maven
  local work="$CACHE/$VERSION.fetch" t0=$SECONDS tgz p removed=()
  rm -rf "$work" "$SERVER"
  mkdir -p "$work/unpack"
  say "fetching io.trino:trino-server:$VERSION:tar.gz (~820 MB) and io.trino:trino-cli:$VERSION from Maven Central into $CACHE/$VERSION (first run only)"
  # Standalone goals: no pom needed; the local repository is thrown away afterwards.
  (cd "$work" && nice -n 19 mvn -q -B -Dmaven.repo.local="$work/m2" "$DEP_PLUGIN:copy" \
    -Dartifact="io.trino:trino-server:$VERSION:tar.gz" -DoutputDirectory="$work" \
    -Dmdep.overWriteReleases=true >&2) \
    || die "mvn could not fetch io.trino:trino-server:$VERSION:tar.gz (see above); is Maven Central reachable?"
  (cd "$work" && nice -n 19 mvn -q -B -Dmaven.repo.local="$work/m2" "$DEP_PLUGIN:copy" \
    -Dartifact="io.trino:trino-cli:$VERSION:jar:executable" -DoutputDirectory="$work" \
    -Dmdep.overWriteReleases=true >&2) \
    || die "mvn could not fetch io.trino:trino-cli:$VERSION:jar:executable (see above); is Maven Central reachable?"
  tgz="$work/trino-server-$VERSION.tar.gz"
  [ -f "$tgz" ] || die "mvn reported success but $tgz is missing"
  rm -rf "$work/m2"   # it holds a second copy of the tarball
  nice -n 19 tar -xzf "$tgz" -C "$work/unpack" || die "unpacking $tgz failed"
  rm -f "$tgz"
  [ -d "$work/unpack/trino-server-$VERSION/lib" ] || die "$tgz has no trino-server-$VERSION/lib; not the expected layout"
  for p in "$work/unpack/trino-server-$VERSION/plugin"/*; do
    case " $KEEP_PLUGINS " in *" $(basename "$p") "*) ;; *) removed+=("$(basename "$p")"); rm -rf "$p" ;; esac
  done
  for p in $KEEP_PLUGINS; do
    [ -d "$work/unpack/trino-server-$VERSION/plugin/$p" ] || die "the server tarball has no plugin/$p"
  done
  mkdir -p "$CACHE/$VERSION"
  mv "$work/trino-cli-$VERSION-executable.jar" "$CLI"
  mv "$work/unpack/trino-server-$VERSION" "$SERVER"
  rm -rf "$work"
  touch "$SERVER/.complete"
  say "removed ${#removed[@]} unused plugins: ${removed[*]}"
  say "fetched Trino $VERSION ($(du -sh "$CACHE/$VERSION" | cut -f1) kept) in $((SECONDS - t0)) s"
  exec 7>&-
}

# The pid of our running server, if any (checks that the pid still is one started on our DIR).
running_pid() { pid_of "$DIR/trino.pid" "-Dconfig=$DIR/etc/config.properties "; }

url() { echo "http://127.0.0.1:$(cat "$DIR/port")"; }

# Whether the server has finished starting: GET /v1/info answers "starting":false.
started() {
  local body
  if command -v curl >/dev/null 2>&1; then
    body="$(curl -s -m 5 "http://127.0.0.1:$1/v1/info" 2>/dev/null)" || return 1
  else
    body="$( (exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
      printf 'GET /v1/info HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$1" >&3
      cat <&3) 2>/dev/null)" || return 1
  fi
  [[ "$body" == *'"starting":false'* ]]
}

# Whether the server runs a query that needs a worker node to the end. For some seconds after it
# has started it still fails such queries with "No nodes available to run query" (while a query
# without a table scan, like SELECT 1, already works), until the node has announced itself.
# Through the REST API with curl (following nextUri), else with the CLI.
PROBE_SQL="SELECT count(*) FROM tpch.tiny.region"
serves_queries() {
  local resp next
  if ! command -v curl >/dev/null 2>&1; then
    run_cli "http://127.0.0.1:$1" "$PROBE_SQL" >/dev/null 2>&1
    return
  fi
  resp="$(curl -s -m 10 -X POST -H 'X-Trino-User: silt' --data "$PROBE_SQL" "http://127.0.0.1:$1/v1/statement")" || return 1
  for _ in $(seq 1 200); do
    [[ "$resp" == *'"error":'* ]] && return 1
    next="$(sed -n 's/.*"nextUri":"\([^"]*\)".*/\1/p' <<<"$resp")"
    if [ -z "$next" ]; then [[ "$resp" == *'"state":"FINISHED"'* ]]; return; fi
    resp="$(curl -s -m 10 -H 'X-Trino-User: silt' "$next")" || return 1
  done
  return 1
}

write_config() {
  local port="$1"
  rm -rf "${DIR:?}/etc"
  mkdir -p "$DIR/etc/catalog" "$DIR/metastore/hive" "$DIR/metastore/delta"
  cat >"$DIR/etc/config.properties" <<PROPS
# Written by trino.sh on every start.
node.environment=silt
node.id=silt-trino
node.internal-address=127.0.0.1
node.bind-ip=127.0.0.1
coordinator=true
node-scheduler.include-coordinator=true
http-server.http.port=$port
discovery.uri=http://127.0.0.1:$port
plugin.dir=$SERVER/plugin
catalog.config-dir=$DIR/etc/catalog
catalog.management=static
query.max-memory=1GB
query.max-memory-per-node=512MB
task.concurrency=2
task.max-worker-threads=4
PROPS
  cat >"$DIR/etc/log.properties" <<PROPS
io.trino=INFO
PROPS
  cat >"$DIR/etc/catalog/hive.properties" <<PROPS
connector.name=hive
hive.metastore=file
hive.metastore.catalog.dir=file://$DIR/metastore/hive
fs.hadoop.enabled=true
hive.timestamp-precision=MICROSECONDS
hive.parquet.time-zone=UTC
PROPS
  cat >"$DIR/etc/catalog/delta.properties" <<PROPS
connector.name=delta_lake
hive.metastore=file
hive.metastore.catalog.dir=file://$DIR/metastore/delta
fs.hadoop.enabled=true
delta.register-table-procedure.enabled=true
PROPS
  # tpch: generated tables, for the readiness probe (and handy in tests).
  cat >"$DIR/etc/catalog/tpch.properties" <<PROPS
connector.name=tpch
PROPS
}

# The server answers what the tests ask of it.
ready() { started "$PORT" && serves_queries "$PORT"; }

start() {
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if running_pid >/dev/null; then url; return; fi
  fetch
  local java ver pid t0=$SECONDS cds=() jit=(-XX:TieredStopAtLevel=1)
  [ "$FULL_JIT" = 1 ] && jit=()
  java="$(need_java)"
  ver="$(java_version "$java")"
  if [ "$CDS" = 1 ]; then
    # Written when a run without a usable archive exits (some seconds more at that stop), then
    # mapped by later starts; the JVM rebuilds it by itself if it no longer matches.
    cds=(-XX:+AutoCreateSharedArchive -XX:SharedArchiveFile="$CACHE/$VERSION/cds-java${ver%%.*}.jsa" -Xlog:cds=off -Xlog:cds+dynamic=off)
  fi
  port_free "$PORT" || die "port $PORT on 127.0.0.1 is in use by something else; free it or set SILT_TRINO_PORT"
  echo "$PORT" >"$DIR/port"
  write_config "$PORT"
  : >"$DIR/trino.log"
  # setsid: the server does not share the caller's process group or terminal; it must not keep
  # the lock files open (7-9), or the next start would wait on them forever. Trino refuses to run
  # with fewer than 4096 file descriptors: raise the soft limit to the hard one.
  (cd "$DIR" && ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec setsid "$java" \
    -Xms256m -Xmx"$HEAP" "${jit[@]}" -XX:+UseG1GC -XX:G1HeapRegionSize=4M -XX:+ExplicitGCInvokesConcurrent \
    -XX:+ExitOnOutOfMemoryError -XX:-OmitStackTraceInFastThrow -XX:ReservedCodeCacheSize=256M \
    -XX:PerMethodRecompilationCutoff=10000 -XX:PerBytecodeRecompilationCutoff=10000 \
    -XX:+EnableDynamicAgentLoading -Djdk.attach.allowAttachSelf=true \
    -Djdk.nio.maxCachedBufferSize=2000000 -Dfile.encoding=UTF-8 -Duser.timezone=UTC \
    --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
    -XX:+IgnoreUnrecognizedVMOptions "${cds[@]}" \
    -Dconfig="$DIR/etc/config.properties" -Dlog.levels-file="$DIR/etc/log.properties" \
    -cp "$SERVER/lib/*" io.trino.server.TrinoServer >"$DIR/trino.log" 2>&1 </dev/null 7>&- 8>&- 9>&-) &
  pid=$!
  echo "$pid" >"$DIR/trino.pid"
  await_ready "$pid" "$DIR/trino.log" "$DIR/trino.pid" "$START_TIMEOUT" "the server" ready
  say "Trino $VERSION up in $((SECONDS - t0)) s (pid $pid, java $ver, log $DIR/trino.log)"
  url
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then rm -f "$DIR/trino.pid"; say "not running"; return; fi
  stop_pid "$pid" "$DIR/trino.pid" "$CACHE/$VERSION"/cds-java*.jsa
}

need_running() {
  running_pid >/dev/null || die "not running (state dir $DIR); start it with trino.sh start"
}

query() {
  local sql
  if [ $# -eq 0 ] || { [ $# -eq 1 ] && [ "$1" = - ]; }; then sql="$(cat)"; else sql="$*"; fi
  [ -n "${sql//[[:space:]]/}" ] || die "usage: trino.sh query SQL (or SQL on stdin)"
  need_running
  [ -f "$CLI" ] || die "$CLI is missing; run trino.sh fetch"
  run_cli "$(url)" "$sql"
}

# Run SQL ($2) against the server at URL $1 with the CLI: each ;-separated statement in turn,
# stopping at the first that fails, with a non-zero exit; results go to stdout as CSV with a header
# line, errors to stderr.
run_cli() {
  local java
  java="$(need_java)"
  "$java" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
    --enable-native-access=ALL-UNNAMED -XX:+IgnoreUnrecognizedVMOptions -Dorg.jline.terminal.dumb=true \
    -jar "$CLI" --server "$1" --user silt --output-format CSV_HEADER --no-progress \
    --disable-auto-suggestion --execute "$2" </dev/null
}

cmd="${1:-}"
case "$cmd" in
  start) start ;;
  stop) stop ;;
  clean) stop; rm -rf "$DIR"; say "removed $DIR" ;;
  status)
    if pid="$(running_pid)"; then say "running: pid $pid, $(url), log $DIR/trino.log"; exit 0; fi
    say "not running (state dir $DIR)"; exit 3 ;;
  url) need_running; url ;;
  query) shift; query "$@" ;;
  fetch) fetch; echo "$SERVER" ;;
  *) echo "usage: $0 start|stop|status|url|query SQL|clean|fetch" >&2; exit 2 ;;
esac
