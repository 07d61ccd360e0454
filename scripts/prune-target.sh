#!/usr/bin/env bash
# Keep a reused cargo target directory bounded. Cargo never deletes an output whose hash changed
# (new flags, new dependency versions, edited code), so a long-lived CARGO_TARGET_DIR gains a full
# set of test executables (one per test target, each linking DataFusion) and of libraries with
# every change, until the disk fills. Given cargo's JSON messages for the current build on stdin
# (cargo lists fresh units too), this deletes every other executable, .rlib, .rmeta and .so in the
# deps directories that build used, and the incremental caches when CARGO_INCREMENTAL=0. Other
# profiles' directories are left alone. Hard links (cargo links a bin to <target>/debug/silt and
# workspace libraries to <target>/debug/lib*.rlib) count as the same file.
# Usage: cargo test --no-run --message-format=json ... | scripts/prune-target.sh TARGET_DIR
set -euo pipefail
target="${1:?usage: prune-target.sh TARGET_DIR < cargo-json-messages}"
python3 -c '
import json, os, stat, sys
target = os.path.realpath(sys.argv[1])
keep, dirs = set(), set()
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    msg = json.loads(line)
    for path in (msg.get("filenames") or []) + [msg.get("executable")]:
        if path and os.path.exists(path):
            st = os.stat(path)
            keep.add((st.st_dev, st.st_ino))
            profile_dir = os.path.relpath(os.path.realpath(path), target).split(os.sep)[0]
            if profile_dir not in ("..", "."):
                dirs.add(os.path.join(target, profile_dir, "deps"))
if not keep:
    sys.exit("prune-target: no artifacts in the cargo messages; nothing pruned")
freed = 0
for deps in sorted(d for d in dirs if os.path.isdir(d)):
    for name in os.listdir(deps):
        path = os.path.join(deps, name)
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            continue
        library = name.endswith((".rlib", ".rmeta", ".so"))
        executable = "." not in name and st.st_mode & 0o111
        if (library or executable) and (st.st_dev, st.st_ino) not in keep:
            freed += st.st_size
            os.remove(path)
print(f"prune-target: removed {freed / 1e9:.1f} GB of earlier builds from {len(dirs)} directories",
      file=sys.stderr)
' "$target"
if [ "${CARGO_INCREMENTAL:-}" = 0 ]; then
    rm -rf "$target"/*/incremental
fi
