#!/usr/bin/env bash
# bf16-cpu-seconds.sh [BIN...] -- the cpu backend's full-size Mitra forward
#   (synthetic weights, seed 0) in exact fp32 and --precision bf16-autocast,
#   measured in CPU seconds per forward on ONE thread: for each binary and
#   mode, (CPU s of a process running 4 forwards - CPU s of one running 1) / 3,
#   so the model load and start-up cancel. Binaries and modes interleave,
#   ROUNDS times, so that a shared machine's load falls on all of them alike;
#   the load average is printed with each line. Compare builds by passing
#   several binaries (e.g. a baseline build's nofall first). A benchmark: it
#   asserts nothing. Env: CASE="64 32 16" (support query features), ROUNDS=3.
#   SPT=1: SpTransformer instead (synthetic full-size weights, seed 0), one
#   sequence of LENGTH=8201 tokens.
set -u
cd "$(dirname "$0")/.." || exit 1
[ $# -gt 0 ] || set -- build/nofall
read -r S Q F <<< "${CASE:-64 32 16}"
if [ -n "${SPT:-}" ]; then
  MODEL=${MODEL:-models/sptransformer-synthetic}
  [ -f "$MODEL/model.safetensors" ] || "$1" gen-weights sptransformer --out "$MODEL" --seed 0 >/dev/null
  SHAPE=(--length "${LENGTH:-8201}"); CASENAME="SpTransformer L=${LENGTH:-8201}"
else
  MODEL=${MODEL:-models/mitra-synthetic}
  [ -f "$MODEL/model.safetensors" ] || "$1" gen-weights mitra --out "$MODEL" --seed 0 >/dev/null
  SHAPE=(--support "$S" --query "$Q" --features "$F"); CASENAME="Mitra ${S}x${Q}x${F}"
fi
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
TMPF=$(mktemp); trap 'rm -f "$TMPF"' EXIT
cpu() {
  /usr/bin/time -f "%U %S" -o "$TMPF" "$1" bench --model "$MODEL" --device cpu --precision "$2" --warmup 0 \
    --runs "$3" "${SHAPE[@]}" >/dev/null || { echo "bench $1 $2 failed"; exit 1; }
  awk '{ print $1 + $2 }' "$TMPF"
}
echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //');" \
     "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|amx_bf16)$' | tr '\n' ' ')"
echo "case $CASENAME, one thread, CPU s per forward = (4 forwards - 1 forward) / 3"
for r in $(seq "${ROUNDS:-3}"); do
  for b in "$@"; do
    line="round $r $b:"
    for m in exact bf16-autocast; do
      one=$(cpu "$b" "$m" 1); four=$(cpu "$b" "$m" 4)
      line="$line $m $(awk -v a="$one" -v b="$four" 'BEGIN { printf "%.3f", (b - a) / 3 }')"
    done
    echo "$line  (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done | tee "$TMPF.log"
awk '{ for (i = 1; i <= NF; i++) if ($i == "exact") { e[$3] += $(i + 1); n[$3]++ } else if ($i == "bf16-autocast") b[$3] += $(i + 1) }
     END { for (k in e) printf "%s mean: exact %.3f s, bf16-autocast %.3f s, exact / bf16 = %.2fx\n", k, e[k] / n[k], b[k] / n[k], e[k] / b[k] }' "$TMPF.log"
rm -f "$TMPF.log"
