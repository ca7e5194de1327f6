#!/usr/bin/env bash
# tidy.sh [BUILD_DIR] -- clang-tidy (.clang-tidy: bugprone-*, a few
# clang-analyzer checks) over the C sources of src/ that BUILD_DIR (default
# build) compiles, from its compile_commands.json (CMakeLists.txt exports
# it), less the files using GCC's target_clones (with noinline clang cannot
# parse them: the cpu kernels). Any
# finding fails (exit 1). Debian: clang-tidy (tools/setup.sh).
#   TIDY_JOBS=N   parallel runs (default: the cores)
set -u
cd "$(dirname "$0")/.." || exit 2
B=${1:-build}
CT=${CLANG_TIDY:-clang-tidy}
command -v "$CT" > /dev/null 2>&1 || { echo "tidy.sh: $CT not found (Debian: apt-get install clang-tidy)" >&2; exit 2; }
[ -f "$B/compile_commands.json" ] || { echo "tidy.sh: $B/compile_commands.json missing: configure $B with cmake first" >&2; exit 2; }
files=$(python3 -c '
import json, os, sys
root = os.getcwd() + "/src/"
seen = set()
for e in json.load(open(sys.argv[1])):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    # the cpu kernels with GCC target_clones + noinline, which clang refuses to parse
    if f.startswith(root) and f.endswith(".c") and f not in seen and "target_clones" not in open(f).read():
        seen.add(f)
        print(f)
' "$B/compile_commands.json" | sort)
[ -n "$files" ] || { echo "tidy.sh: no sources of src/ in $B/compile_commands.json" >&2; exit 2; }
t0=$(date +%s)
out=$(mktemp)
# shellcheck disable=SC2086
printf '%s\n' $files | xargs -P "${TIDY_JOBS:-$(nproc)}" -n 4 "$CT" -p "$B" --quiet --extra-arg=-Wno-unknown-warning-option > "$out" 2>&1
rc=$?
n=$(printf '%s\n' $files | wc -l)
if [ $rc -ne 0 ] || grep -q 'error:\|warning:' "$out"; then
  grep -E 'error:|warning:' "$out" | sort -u
  echo "tidy.sh: findings in the $n files of src/ ($(($(date +%s) - t0)) s)"
  rm -f "$out"
  exit 1
fi
rm -f "$out"
echo "tidy.sh: $n files of src/, no findings ($(($(date +%s) - t0)) s)"
