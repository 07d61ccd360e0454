#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder (issue 21): the afl targets of fuzz/ (one per target of
# silt_ingest::fuzz::TARGETS, and `forward`, the fluentd Forward protocol of silt_forward::fuzz),
# each run for SECONDS with afl-fuzz.
#
#   bash bench/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 600 s, every target)
#
# Installs what is missing (Debian's afl++ with apt-get when run as root; cargo-afl pinned with
# `cargo install --locked`; the AFL++ runtime with `cargo afl config --build`), builds fuzz/ with
# `cargo afl build --release` into its own target dir ($SILT_FUZZ_TARGET_DIR, default
# ~/.cache/silt-target-fuzz; never the workspace's), seeds each target from fuzz/seeds/<target>/,
# its saved corpus fuzz/corpus/<target>/, small real files of the test corpus (../shared/corpus
# or $SILT_CORPUS, read in place) and, when a silt binary is at hand ($SILT_BIN, else
# target/release/silt or $CARGO_TARGET_DIR/release/silt), a little `silt generate` output. Then:
#
# - every crash and hang afl saved goes to fuzz/regressions/<target>/ (crashes minimised with
#   afl-tmin), named after its content's hash; the replay test
#   (crates/silt-ingest/tests/fuzz_replay.rs; crates/silt-forward/tests/ for forward) runs them
#   from then on;
# - fuzz/corpus/<target>/ is replaced by a small subset of afl's queue (afl-cmin first when
#   SILT_FUZZ_CMIN=1, then the smallest files up to $SILT_FUZZ_CORPUS_FILES files and $SILT_FUZZ_CORPUS_BYTES bytes);
# - a table is printed (and written to $WORK/summary.md): target, seconds, execs, execs/s,
#   paths (afl's corpus_count), crashes, hangs, with the afl-fuzz that ran.
#
# Environment: SILT_FUZZ_JOBS (targets fuzzed at once, default 1; this machine has 2 shared
# cores), SILT_FUZZ_WORK (afl's directories, default ~/.cache/silt-fuzz-work), SILT_FUZZ_AFL
# (`debian` or `cargo`: which afl-fuzz runs; default: Debian's when it can drive the targets,
# else the one cargo-afl built), SILT_FUZZ_TIMEOUT_MS (afl's hang limit, default 1000),
# SILT_FUZZ_MEM_MB (afl's memory limit per target, default 4096). afl-fuzz runs under nice -n 10.
set -euo pipefail

SECONDS_PER_TARGET=${1:-600}
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FUZZ=$ROOT/fuzz
TARGET_DIR=${SILT_FUZZ_TARGET_DIR:-$HOME/.cache/silt-target-fuzz}
WORK=${SILT_FUZZ_WORK:-$HOME/.cache/silt-fuzz-work}
JOBS=${SILT_FUZZ_JOBS:-1}
TIMEOUT_MS=${SILT_FUZZ_TIMEOUT_MS:-1000}
MEM_MB=${SILT_FUZZ_MEM_MB:-4096}
CORPUS_FILES=${SILT_FUZZ_CORPUS_FILES:-40}
CORPUS_BYTES=${SILT_FUZZ_CORPUS_BYTES:-40000}
CARGO_AFL_VERSION=0.18.2
CORPUS=${SILT_CORPUS:-$ROOT/../shared/corpus}

if [[ $# -gt 0 ]]; then
    TARGETS=("$@")
else
    TARGETS=()
    for f in "$FUZZ"/src/bin/*.rs; do TARGETS+=("$(basename "$f" .rs)"); done
fi
for t in "${TARGETS[@]}"; do
    [[ -f $FUZZ/src/bin/$t.rs ]] || { echo "no fuzz target $t (fuzz/src/bin/$t.rs)" >&2; exit 1; }
done

log() { echo "fuzz.sh: $*" >&2; }

# --- install ------------------------------------------------------------------------------------
if ! command -v afl-fuzz >/dev/null; then
    if [[ $(id -u) == 0 ]]; then
        log "installing afl++ (Debian)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y afl++ >/dev/null ||
            { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y afl++ >/dev/null; }
    else
        log "afl++ is not installed and this is not root: using cargo-afl's afl-fuzz only"
    fi
fi
if ! cargo afl --version 2>/dev/null | grep -q "cargo-afl $CARGO_AFL_VERSION"; then
    log "installing cargo-afl $CARGO_AFL_VERSION"
    cargo install --locked cargo-afl --version "$CARGO_AFL_VERSION"
fi
# The AFL++ runtime the targets link (and cargo-afl's own afl-fuzz), built once per rustc.
if ! out=$(cargo afl config --build 2>&1); then
    grep -q "already built" <<<"$out" || { echo "$out" >&2; exit 1; }
fi
CARGO_AFL_BIN=$(ls -d "$HOME"/.local/share/afl.rs/rustc-"$(rustc --version | awk '{print $2}')"-*/afl.rs-"$CARGO_AFL_VERSION"/afl/bin 2>/dev/null | head -1)

# --- build --------------------------------------------------------------------------------------
log "building fuzz/ into $TARGET_DIR"
(cd "$FUZZ" && CARGO_TARGET_DIR=$TARGET_DIR nice -n 10 cargo afl build --release --locked)
BIN=$TARGET_DIR/release

# --- which afl-fuzz -----------------------------------------------------------------------------
# Debian's afl++ may be older than the runtime cargo-afl links into the targets; try it on one
# target for a few seconds and fall back to cargo-afl's build when it cannot drive it.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1
# (No AFL_SKIP_BIN_CHECK: afl-fuzz finds the persistent-mode signature of the afl.rs targets
# by checking the binary; without it every input times out.)
export AFL_TRY_AFFINITY=0
# The targets instrument all of arrow and parquet: their coverage map (about 8.3 million entries
# with afl.rs 0.18.2) is larger than afl's default, and afl-fuzz refuses to start (or times out
# on every input) unless told a size at least as large.
export AFL_MAP_SIZE=${AFL_MAP_SIZE:-8388608}
AFL=${SILT_FUZZ_AFL:-}
if [[ -z $AFL ]]; then
    AFL=cargo
    if command -v afl-fuzz >/dev/null; then
        probe=$(mktemp -d)
        mkdir -p "$probe/in" && cp "$FUZZ"/seeds/json/* "$probe/in/"
        if timeout 60 afl-fuzz -i "$probe/in" -o "$probe/out" -V 5 -t "$TIMEOUT_MS" -m "$MEM_MB" \
            -- "$BIN/json" >"$probe/log" 2>&1 && [[ -f $probe/out/default/fuzzer_stats ]]; then
            AFL=debian
        else
            log "Debian's afl-fuzz cannot drive the targets ($(grep -m1 -E 'PROGRAM ABORT|ERROR|error' "$probe/log" | tr -d '\033' | cut -c1-160)); using cargo-afl's"
        fi
        rm -rf "$probe"
    fi
fi
if [[ $AFL == debian ]]; then
    AFL_DIR=$(dirname "$(command -v afl-fuzz)")
else
    AFL_DIR=$CARGO_AFL_BIN
fi
[[ -x $AFL_DIR/afl-fuzz ]] || { echo "no afl-fuzz in $AFL_DIR" >&2; exit 1; }
AFL_VERSION=$("$AFL_DIR"/afl-fuzz -h 2>&1 | grep -o 'afl-fuzz++[0-9.a-z]*' | head -1 || true)
log "afl-fuzz: $AFL_DIR/afl-fuzz ($AFL_VERSION)"

# --- seeds --------------------------------------------------------------------------------------
SILT=${SILT_BIN:-}
for c in "$ROOT/target/release/silt" "${CARGO_TARGET_DIR:-/nonexistent}/release/silt"; do
    [[ -z $SILT && -x $c ]] && SILT=$c
done

# Real files of the corpus for a target: paths below $CORPUS (find arguments).
corpus_files() {
    case $1 in
        zeek-tsv) find "$CORPUS/zeek-tsv" -type f ;;
        zeek-json) find "$CORPUS/zeek-json" -type f ;;
        suricata) find "$CORPUS/suricata" -type f -name '*.json' ;;
        pcap) find "$CORPUS/pcap" "$CORPUS/community-id" -type f -name '*.pcap' ;;
        pcapng) find "$CORPUS/pcap" -type f -name '*.pcapng' ;;
        sflow) find "$CORPUS/flows" -type f -path "*sflow*" -name "*.pcap" ;;
        netflow) find "$CORPUS/flows" -type f -path "*netflow*" -name "*.pcap" ;;
        json) find "$CORPUS/suricata" "$CORPUS/zeek-json" -type f -name '*.json' ;;
        docker) find "$CORPUS/weblogs/docker-json-file" -type f ;;
        access) find "$CORPUS/weblogs" -maxdepth 1 -type f -name '*access*' ;;
        syslog) find "$CORPUS/weblogs" -maxdepth 1 -type f -name '*syslog*' ;;
        *) ;;
    esac
}

# Copies one seed into $2 under its content hash (gunzipped when gzip), if at most 16 KiB.
add_seed() {
    local f=$1 dir=$2 tmp
    tmp=$(mktemp)
    if [[ $f == *.gz ]]; then gzip -dc "$f" >"$tmp" 2>/dev/null || true; else cat "$f" >"$tmp"; fi
    if [[ -s $tmp && $(stat -c %s "$tmp") -le 16384 ]]; then
        mv "$tmp" "$dir/seed-$(sha1sum "$tmp" | cut -c1-12)"
    else
        rm -f "$tmp"
    fi
}

seed() {
    local t=$1 in=$2 gen
    mkdir -p "$in"
    for f in "$FUZZ/seeds/$t"/* "$FUZZ/corpus/$t"/*; do [[ -f $f ]] && add_seed "$f" "$in"; done
    if [[ -d $CORPUS ]]; then
        # At most 24 real files, smallest first.
        while IFS= read -r f; do add_seed "$f" "$in"; done < <(corpus_files "$t" | xargs -r ls -S -r | head -24)
    fi
    if [[ -n $SILT ]]; then
        gen=$(mktemp -d)
        case $t in
            zeek-tsv) "$SILT" generate zeek --events 12 -o "$gen" >/dev/null 2>&1 || true ;;
            suricata) "$SILT" generate suricata --events 12 -o "$gen" >/dev/null 2>&1 || true ;;
            pcap) "$SILT" generate pcap --events 12 -o "$gen/gen.pcap" >/dev/null 2>&1 || true ;;
            pcapng) "$SILT" generate pcap --pcapng --events 12 -o "$gen/gen.pcapng" >/dev/null 2>&1 || true ;;
            msgpack) "$SILT" generate docker-nginx --format msgpack --events 6 -o "$gen/gen.msgpack" >/dev/null 2>&1 || true ;;
        esac
        while IFS= read -r f; do add_seed "$f" "$in"; done < <(find "$gen" -type f)
        rm -rf "$gen"
    fi
}

# --- fuzz ---------------------------------------------------------------------------------------
stat_of() { awk -F: -v k="$1" '{gsub(/ /,"",$1)} $1==k {gsub(/^ +/,"",$2); print $2}' "$2" 2>/dev/null | head -1; }

fuzz_one() {
    local t=$1 dir=$WORK/$t
    rm -rf "$dir"
    mkdir -p "$dir"
    seed "$t" "$dir/in"
    log "$t: $(ls "$dir/in" | wc -l) seeds, fuzzing for ${SECONDS_PER_TARGET}s"
    nice -n 10 "$AFL_DIR/afl-fuzz" -i "$dir/in" -o "$dir/out" -V "$SECONDS_PER_TARGET" \
        -t "$TIMEOUT_MS" -m "$MEM_MB" -- "$BIN/$t" >"$dir/afl.log" 2>&1 ||
        log "$t: afl-fuzz exited with $? (see $dir/afl.log)"
}

mkdir -p "$WORK"
running=0
for t in "${TARGETS[@]}"; do
    if ((running >= JOBS)); then wait -n || true; running=$((running - 1)); fi
    fuzz_one "$t" &
    running=$((running + 1))
done
wait || true

# --- collect ------------------------------------------------------------------------------------
keep_findings() {
    local t=$1 kind=$2 name=$3 src dest f h tmp
    src=$WORK/$t/out/default/$kind
    dest=$FUZZ/regressions/$t
    for f in "$src"/id:*; do
        [[ -f $f ]] || continue
        mkdir -p "$dest"
        tmp=$(mktemp)
        cp "$f" "$tmp"
        if [[ $kind == crashes ]]; then
            nice -n 10 "$AFL_DIR/afl-tmin" -i "$f" -o "$tmp" -t 5000 -m "$MEM_MB" -- "$BIN/$t" \
                >/dev/null 2>&1 || cp "$f" "$tmp"
        fi
        h=$(sha1sum "$tmp" | cut -c1-12)
        mv "$tmp" "$dest/$name-$h"
        log "$t: kept fuzz/regressions/$t/$name-$h"
    done
}

save_corpus() {
    local t=$1 q=$WORK/$t/out/default/queue cmin=$WORK/$t/cmin dest=$FUZZ/corpus/$t total=0 n=0 f s
    [[ -d $q ]] || return 0
    rm -rf "$cmin"
    # afl-cmin takes minutes per target with the targets' large coverage map, so it runs only when
    # asked (SILT_FUZZ_CMIN=1); otherwise the smallest entries of afl's queue are kept (each of
    # them added coverage when afl found it).
    if [[ ${SILT_FUZZ_CMIN:-0} == 1 ]]; then
        AFL_PATH=$AFL_DIR nice -n 10 "$AFL_DIR/afl-cmin" -i "$q" -o "$cmin" -t 5000 -m "$MEM_MB" -- "$BIN/$t" \
            >"$WORK/$t/cmin.log" 2>&1 || { log "$t: afl-cmin failed (see $WORK/$t/cmin.log), taking the queue"; cmin=$q; }
    else
        cmin=$q
    fi
    rm -rf "$dest"
    mkdir -p "$dest"
    while IFS= read -r f; do
        s=$(stat -c %s "$f")
        ((s > 0 && s <= 4096)) || continue
        ((n < CORPUS_FILES && total + s <= CORPUS_BYTES)) || break
        cp "$f" "$dest/$(sha1sum "$f" | cut -c1-12)"
        total=$((total + s))
        n=$((n + 1))
    done < <(find "$cmin" -maxdepth 1 -type f -name 'id*' -printf '%s %p\n' | sort -n | cut -d' ' -f2-)
}

{
    echo "| target | seconds | execs | execs/s | paths | crashes | hangs |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
} >"$WORK/summary.md"
for t in "${TARGETS[@]}"; do
    st=$WORK/$t/out/default/fuzzer_stats
    keep_findings "$t" crashes crash
    keep_findings "$t" hangs hang
    save_corpus "$t"
    start=$(stat_of start_time "$st")
    last=$(stat_of last_update "$st")
    execs=$(stat_of execs_done "$st")
    paths=$(stat_of corpus_count "$st")
    [[ -n $paths ]] || paths=$(stat_of paths_total "$st")
    crashes=$(stat_of saved_crashes "$st")
    [[ -n $crashes ]] || crashes=$(stat_of unique_crashes "$st")
    hangs=$(stat_of saved_hangs "$st")
    [[ -n $hangs ]] || hangs=$(stat_of unique_hangs "$st")
    secs=$(stat_of run_time "$st")
    [[ -n $secs ]] || secs=$(( ${last:-0} - ${start:-0} ))
    rate=$( ((secs > 0)) && echo $(( ${execs:-0} / secs )) || echo "-")
    echo "| $t | $secs | ${execs:--} | $rate | ${paths:--} | ${crashes:--} | ${hangs:--} |" >>"$WORK/summary.md"
done
echo "afl-fuzz: $AFL_VERSION ($AFL); ${SECONDS_PER_TARGET}s per target, $JOBS at a time; hang limit ${TIMEOUT_MS} ms"
cat "$WORK/summary.md"
