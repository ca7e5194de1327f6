#!/usr/bin/env bash
# device-vs-cpu.sh DEVICE [BUILD_DIR] -- one run: `nofall bench` on DEVICE and
# on the cpu backend for the seed case (16x8x13) and a larger case
# (BIG="64 64 16" by default; 256 256 16 or 1024 1024 32 on a GPU), printed
# side by side with the ratio. A benchmark: it asserts nothing.
set -u
cd "$(dirname "$0")/.."
DEV=${1:?usage: device-vs-cpu.sh DEVICE [BUILD_DIR]}
B=${2:-build}
BIN=$B/nofall
RUNS=${RUNS:-5}; read -r BS BQ BF <<< "${BIG:-64 64 16}"
MODEL=${MODEL:-models/mitra-synthetic}
[ -f "$MODEL/model.safetensors" ] || "$BIN" gen-weights mitra --out "$MODEL" --seed 0 >/dev/null
val() { sed -n "s/^$1=//p"; }
echo "device: $("$BIN" devices | grep "^  $DEV " | sed 's/^  *//')"
printf '%-14s %14s %10s %12s %10s %16s\n' case "${DEV}_ms" GFLOP/s cpu_ms GFLOP/s "${DEV}/cpu time"
for c in "16 8 13" "$BS $BQ $BF"; do
  read -r s q f <<< "$c"
  d=$("$BIN" bench --model "$MODEL" --device "$DEV" --warmup 2 --runs "$RUNS" --support "$s" --query "$q" --features "$f")
  h=$("$BIN" bench --model "$MODEL" --device cpu --warmup 2 --runs "$RUNS" --support "$s" --query "$q" --features "$f")
  dm=$(echo "$d" | val MEDIAN_MS); hm=$(echo "$h" | val MEDIAN_MS)
  printf '%-14s %14s %10s %12s %10s %16s\n' "${s}x${q}x${f}" "$dm" "$(echo "$d" | val GFLOPS)" "$hm" "$(echo "$h" | val GFLOPS)" \
    "$(python3 -c "print('%.2f' % ($dm / $hm))")"
done
