#!/usr/bin/env bash
# bf16-vs-exact.sh [BUILD_DIR] -- one run on this machine: the cpu backend's
#   Mitra forward (full-size synthetic weights) in --precision bf16-autocast
#   beside exact fp32 at a mid size (default 128 support x 64 query x 16
#   features), alternating the two modes ROUNDS times in the same run, and
#   the bf16/exact speed-up (exact_ms / bf16_ms, from the medians). Prints
#   the CPU model and its bf16 flags, the kernels oneDNN picked and the load
#   average before and after (the machine may be shared: the wall-clock ratio
#   is only as good as the load is steady, so the CPU seconds each bench
#   process used are printed too, with OMP_WAIT_POLICY=PASSIVE so that
#   threads waiting at a barrier do not count). A benchmark: it asserts nothing.
# Env: CASE="128 64 16", RUNS (per round, default 3), ROUNDS (default 2), MODEL.
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
BIN=$B/nofall
RUNS=${RUNS:-3}; ROUNDS=${ROUNDS:-2}; read -r S Q F <<< "${CASE:-128 64 16}"
MODEL=${MODEL:-models/mitra-synthetic}
[ -f "$MODEL/model.safetensors" ] || "$BIN" gen-weights mitra --out "$MODEL" --seed 0 >/dev/null
val() { sed -n "s/^$1=//p"; }

echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'), $(nproc) cores;" \
     "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
"$BIN" devices | sed -n 's/^  cpu  /cpu backend: /p'
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); case ${S}x${Q}x${F}, $RUNS runs x $ROUNDS rounds per mode"
export OMP_WAIT_POLICY=PASSIVE
TMPF=$(mktemp); trap 'rm -f "$TMPF"' EXIT
ex=(); bf=(); exc=(); bfc=()
for r in $(seq "$ROUNDS"); do
  for mode in exact bf16-autocast; do
    out=$(/usr/bin/time -f "%U %S" -o "$TMPF" "$BIN" bench --model "$MODEL" --device cpu --precision "$mode" \
            --warmup 1 --runs "$RUNS" --support "$S" --query "$Q" --features "$F") ||
      { echo "bench --precision $mode failed"; exit 1; }
    cpu=$(awk 'END { print $1 + $2 }' "$TMPF")
    ms=$(echo "$out" | val MEDIAN_MS)
    echo "round $r $mode: median ${ms} ms ($(echo "$out" | val GFLOPS) GFLOP/s); the process used ${cpu} CPU s"
    if [ "$mode" = exact ]; then ex+=("$ms"); exc+=("$cpu"); else bf+=("$ms"); bfc+=("$cpu"); fi
  done
done
python3 - "${ex[*]}" "${bf[*]}" "${exc[*]}" "${bfc[*]}" <<'PY'
import statistics, sys
ex, bf, exc, bfc = ([float(x) for x in a.split()] for a in sys.argv[1:5])
e, b = statistics.median(ex), statistics.median(bf)
print("exact median %.1f ms, bf16-autocast median %.1f ms, speed-up exact/bf16 (wall) = %.2fx" % (e, b, e / b))
print("CPU seconds per process (same forwards, same load step): exact %.1f, bf16-autocast %.1f, ratio %.2fx"
      % (statistics.median(exc), statistics.median(bfc), statistics.median(exc) / statistics.median(bfc)))
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
