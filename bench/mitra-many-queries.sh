#!/usr/bin/env bash
# mitra-many-queries.sh [BUILD_DIR] -- one run on this machine, printed as
# ratios: Mitra with many test rows (issue #14: 1,000 training rows x 20
# features, 10,000 test rows, the full-size synthetic checkpoint), cpu:
#   nofall           the support once, the queries streamed (the default)
#   nofall-recompute the support recomputed per 1,024-query pass
#                    (--query-chunk 1024 --kv-cache-mb 1: what upstream does)
#   torch            upstream Tab2D fp32 (reference/bench_torch.py
#                    --query-chunk 1024: AutoGluon's 1,024-row query chunks,
#                    each forward with the whole support), when .venv-ref exists
# A benchmark: it asserts nothing. One timed forward each (they take minutes),
# after one warm-up forward of nofall on a small case.
# Env: SIZES="1000 10000 20" (support, query, features), MODEL (checkpoint dir).
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
BIN=$B/nofall
read -r S Q F <<< "${SIZES:-1000 10000 20}"
MODEL=${MODEL:-models/mitra-synthetic}
[ -f "$MODEL/model.safetensors" ] || "$BIN" gen-weights mitra --out "$MODEL" --seed 0 >/dev/null
PY=.venv-ref/bin/python
val() { sed -n "s/^$1=//p"; }

echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'), $(nproc) cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" devices | sed -n 's/^  cpu  /cpu backend: /p'
echo "case: ${S} support x ${Q} queries x ${F} features, model $MODEL"
printf '%-18s %12s %10s %14s %12s %12s\n' run ms GFLOP/s support_passes peak_rss_mb torch/this
run_nofall() { # name, extra flags...
  local name=$1; shift
  local out; out=$("$BIN" bench --model "$MODEL" --device cpu --warmup 0 --runs 1 --support "$S" --query "$Q" --features "$F" "$@")
  local ms; ms=$(echo "$out" | val MEDIAN_MS)
  echo "$name $ms $(echo "$out" | val GFLOPS) $(echo "$out" | val SUPPORT_PASSES) $(echo "$out" | val PEAK_RSS_MB)"
}
r1=$(run_nofall nofall)
r2=$(run_nofall nofall-recompute --query-chunk 1024 --kv-cache-mb 1)
tms=n/a
if [ -x "$PY" ]; then
  tms=$("$PY" reference/bench_torch.py --model "$MODEL" --support "$S" --query "$Q" --features "$F" \
          --query-chunk 1024 --warmup 0 --runs 1 2>/dev/null |
        python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["median_ms"])' 2>/dev/null)
  [ -n "$tms" ] || { echo "torch: reference/bench_torch.py failed (is .venv-ref complete?)"; tms=n/a; }
fi
for r in "$r1" "$r2"; do
  read -r name ms gf passes rss <<< "$r"
  ratio=n/a
  [ "$tms" != n/a ] && ratio=$(python3 -c "print('%.2f' % ($tms / $ms))")
  printf '%-18s %12s %10s %14s %12s %12s\n' "$name" "$ms" "$gf" "$passes" "$rss" "$ratio"
done
printf '%-18s %12s\n' "torch (1024 chunks)" "$tms"
read -r _ ms1 _ <<< "$r1"; read -r _ ms2 _ <<< "$r2"
echo "support once vs recomputed per 1,024 queries: $(python3 -c "print('%.2f' % ($ms2 / $ms1))")x"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
