#!/usr/bin/env bash
# cpu-vs-torch.sh [BUILD_DIR] -- one run on this machine, printed as ratios:
#   the cpu backend's forward on the seed case (16x8x13) and a larger case
#   (256 support x 256 query x 16 features) beside upstream PyTorch fp32
#   (reference/bench_torch.py, when .venv-ref exists) and beside the machine's
#   rate of the same GEMM library (oneDNN sgemm, build/nofall-sgemm). Prints
#   the CPU model, the GEMM library and kernel, and the load average (the
#   ratios are only as good as the machine is quiet). A benchmark: it asserts
#   nothing.
# Env: RUNS (default 10), BIG_RUNS (default 3), BIG="256 256 16".
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
BIN=$B/nofall
RUNS=${RUNS:-10}; BIG_RUNS=${BIG_RUNS:-3}; read -r BS BQ BF <<< "${BIG:-256 256 16}"
MODEL=${MODEL:-models/mitra-synthetic}
[ -f "$MODEL/model.safetensors" ] || "$BIN" gen-weights mitra --out "$MODEL" --seed 0 >/dev/null
PY=.venv-ref/bin/python
val() { sed -n "s/^$1=//p"; }

echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'), $(nproc) cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" devices | sed -n 's/^  cpu  /cpu backend: /p'
sg=$("$B/nofall-sgemm" 4096 2048 512 5 | val GFLOPS)
echo "sgemm (4096x2048x512, the cpu backend's GEMM): $sg GFLOP/s; threads: ${OMP_NUM_THREADS:-default}"
printf '%-14s %12s %10s %12s %12s %14s\n' case nofall_ms GFLOP/s torch_ms torch/nofall nofall/sgemm
for c in "16 8 13 $RUNS" "$BS $BQ $BF $BIG_RUNS"; do
  read -r s q f r <<< "$c"
  out=$("$BIN" bench --model "$MODEL" --device cpu --warmup 2 --runs "$r" --support "$s" --query "$q" --features "$f")
  ms=$(echo "$out" | val MEDIAN_MS); gf=$(echo "$out" | val GFLOPS)
  tms=n/a; ratio=n/a
  if [ -x "$PY" ]; then
    tms=$("$PY" reference/bench_torch.py --model "$MODEL" --support "$s" --query "$q" --features "$f" \
            --warmup 2 --runs "$r" 2>/dev/null | python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["median_ms"])')
    ratio=$(python3 -c "print('%.2f' % ($tms / $ms))")
  fi
  eff=$(python3 -c "print('%.2f' % ($gf / $sg))")
  printf '%-14s %12s %10s %12s %12s %14s\n' "${s}x${q}x${f}" "$ms" "$gf" "$tms" "$ratio" "$eff"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
