#!/usr/bin/env bash
# bf16-vs-torch.sh [BUILD_DIR] -- one run on this machine: the cpu backend's
#   forward in exact fp32 and --precision bf16-autocast beside upstream PyTorch
#   in fp32 and under its own torch.autocast("cpu", bfloat16) (Mitra:
#   reference/bench_torch.py, SpTransformer: reference/bench_torch_spt.py with
#   UPSTREAM=a clone of ShenLab-Genomics/SpliceTransformer; both need
#   .venv-ref). Wall-clock medians, default threads on both sides; the cases
#   of cpu-vs-torch.sh and sptransformer-vs-torch.sh (synthetic full-size
#   weights, seed 0). Prints the CPU model, its bf16 flags and the load
#   average. A benchmark: it asserts nothing.
# Env: RUNS (default 5), BIG_RUNS (default 2), UPSTREAM.
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
BIN=$B/nofall
RUNS=${RUNS:-5}; BIG_RUNS=${BIG_RUNS:-2}
MITRA=${MITRA:-models/mitra-synthetic}; SPT=${SPT:-models/sptransformer-synthetic}
[ -f "$MITRA/model.safetensors" ] || "$BIN" gen-weights mitra --out "$MITRA" --seed 0 >/dev/null
[ -f "$SPT/model.safetensors" ] || "$BIN" gen-weights sptransformer --out "$SPT" --seed 0 >/dev/null
PY=.venv-ref/bin/python
val() { sed -n "s/^$1=//p"; }
last_ms() { python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["median_ms"])' 2>/dev/null || echo n/a; }
ratio() { python3 -c "print('%.2f' % ($1 / $2))" 2>/dev/null || echo n/a; }

echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'), $(nproc) cores;" \
     "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|amx_bf16)$' | tr '\n' ' ');" \
     "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-20s %10s %10s %10s %10s %12s %12s %12s\n' case exact_ms bf16_ms torch_ms torchbf_ms exact/bf16 torch/exact torchbf/bf16
row() { # NAME RUNS NOFALL_ARGS... -- TORCH_CMD...
  local name=$1 r=$2 nargs=() targs=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do nargs+=("$1"); shift; done
  shift
  targs=("$@")
  local e b t tb
  e=$("$BIN" bench --device cpu --warmup 1 --runs "$r" "${nargs[@]}" | val MEDIAN_MS)
  b=$("$BIN" bench --device cpu --warmup 1 --runs "$r" --precision bf16-autocast "${nargs[@]}" | val MEDIAN_MS)
  t=n/a tb=n/a
  if [ -x "$PY" ] && [ ${#targs[@]} -gt 0 ]; then
    t=$("$PY" "${targs[@]}" --warmup 1 --runs "$r" 2>/dev/null | last_ms)
    tb=$("$PY" "${targs[@]}" --warmup 1 --runs "$r" --autocast 2>/dev/null | last_ms)
  fi
  printf '%-20s %10s %10s %10s %10s %12s %12s %12s\n' "$name" "$e" "$b" "$t" "$tb" "$(ratio "$e" "$b")" \
    "$(ratio "$t" "$e")" "$(ratio "$tb" "$b")"
}
for c in "16 8 13 $RUNS" "256 256 16 $BIG_RUNS"; do
  read -r s q f r <<< "$c"
  row "Mitra ${s}x${q}x${f}" "$r" --model "$MITRA" --support "$s" --query "$q" --features "$f" -- \
    reference/bench_torch.py --model "$MITRA" --support "$s" --query "$q" --features "$f"
done
if [ -n "${UPSTREAM:-}" ]; then
  row "SpT L=8201 batch=1" "$BIG_RUNS" --model "$SPT" --length 8201 -- \
    reference/bench_torch_spt.py --upstream "$UPSTREAM" --model "$SPT" --length 8201
else
  row "SpT L=8201 batch=1" "$BIG_RUNS" --model "$SPT" --length 8201 --
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
