#!/usr/bin/env bash
# sptransformer-vs-torch.sh [BUILD_DIR] -- one run on this machine, printed as
# ratios: the cpu backend's SpTransformer forward at L = 8201 (the
# variant-scoring window, batch 1) beside upstream PyTorch fp32 at the same
# length in the same run (reference/bench_torch_spt.py: needs .venv-ref and
# UPSTREAM=a clone of ShenLab-Genomics/SpliceTransformer), its GFLOP/s beside
# the machine's rate of the same GEMM library (build/nofall-sgemm), and the
# peak memory (RSS, device allocation) at the longest input L = 16192. Prints
# the CPU model and the load average (the ratios are only as good as the
# machine is quiet). A benchmark: it asserts nothing.
# Env: RUNS (default 3), UPSTREAM (the clone), MODEL (default
# models/sptransformer-synthetic, made by gen-weights --seed 0 if absent).
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
BIN=$B/nofall
RUNS=${RUNS:-3}
MODEL=${MODEL:-models/sptransformer-synthetic}
[ -f "$MODEL/model.safetensors" ] || "$BIN" gen-weights sptransformer --out "$MODEL" --seed 0 >/dev/null
PY=.venv-ref/bin/python
val() { sed -n "s/^$1=//p"; }

echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'), $(nproc) cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" devices | sed -n 's/^  cpu  /cpu backend: /p'
sg=$("$B/nofall-sgemm" 4096 2048 512 5 | val GFLOPS)
echo "sgemm (4096x2048x512, the cpu backend's GEMM): $sg GFLOP/s; threads: ${OMP_NUM_THREADS:-default}"
printf '%-18s %12s %10s %12s %12s %14s\n' case nofall_ms GFLOP/s torch_ms torch/nofall nofall/sgemm
for c in "8201 1" "8201 2"; do
  read -r L bs <<< "$c"
  out=$("$BIN" bench --model "$MODEL" --device cpu --warmup 1 --runs "$RUNS" --length "$L" --batch "$bs")
  ms=$(echo "$out" | val MEDIAN_MS); gf=$(echo "$out" | val GFLOPS)
  tms=n/a; ratio=n/a
  if [ -x "$PY" ] && [ -n "${UPSTREAM:-}" ]; then
    tms=$("$PY" reference/bench_torch_spt.py --upstream "$UPSTREAM" --model "$MODEL" --length "$L" --batch "$bs" \
            --warmup 1 --runs "$RUNS" 2>/dev/null | python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["median_ms"])')
    ratio=$(python3 -c "print('%.2f' % ($tms / $ms))" 2>/dev/null || echo n/a)
  fi
  eff=$(python3 -c "print('%.2f' % ($gf / $sg))")
  printf '%-18s %12s %10s %12s %12s %14s\n' "L=$L batch=$bs" "$ms" "$gf" "$tms" "$ratio" "$eff"
done
out=$("$BIN" bench --model "$MODEL" --device cpu --warmup 0 --runs 1 --length 16192)
echo "L=16192 batch=1: $(echo "$out" | val MEDIAN_MS) ms; peak RSS $(echo "$out" | val PEAK_RSS_MB) MB; device allocation $(echo "$out" | val DEVICE_ALLOC_MB) MB (weights + workspace + scratch)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
