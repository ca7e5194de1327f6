#!/usr/bin/env bash
# tools/gpu-check.sh -- the checks of the cuda backend that need a real GPU,
# in one run of at most ~8 minutes, from the repository root:
#
#   1. configure + build from scratch (Release, build-gpu/)
#   2. `nofall devices` sees cuda:0
#   3. the op conformance suite (tests/test-backend-ops: every op on cuda:0
#      against the cpu); the rest of ctest runs near the end
#   4. verify cuda:0 against the cpu, exact fp32, --max-abs 1e-5 --mean-abs 1e-6,
#      seeds 42,100,101,102,105,110,111, for every committed fixture model
#      (tests/fixtures/mitra/*/case.json gives its gen-weights command) and
#      the full-size synthetic checkpoint (gen-weights mitra --seed 0);
#      and against each fixture's own PyTorch logits
#   5. placement and transfers of one full-size run (--trace): weights on
#      cuda:0, no op off the device, H2D_COPIES / D2H_COPIES
#   6. determinism: two runs give bitwise identical logits; ATTENTION forced
#      through cuBLAS (NF_CUDA_ATTENTION=cublas) and chunked, against the cpu
#   7. bench on the full-size model: 16x8x13 and 1024x1024x32, exact and tf32
#   7b. SpTransformer (gen-weights sptransformer --seed 0): verify cuda:0
#      against the committed upstream fixtures (tests/fixtures/sptransformer:
#      logits, splice classes, bucket choices) and against the cpu (seeded,
#      varied lengths), placement of one run, bench at L = 8201 (batch 1 and
#      8, exact and tf32; the goal is <= 10 ms exact at batch 1 on an H200)
#   7c. --precision bf16-autocast (never yet run on a GPU; optional steps):
#      Mitra's seed42 fixture and SpTransformer's L8001 against upstream's own
#      autocast logits (expected_logits_bf16.npy), the mode's default bounds
#   8. the tf32 error (verify --precision tf32), for the record
#   9. compute-sanitizer memcheck + racecheck on a small run (where it works)
#
# usage:
#   tools/gpu-check.sh                run everything (on the GPU machine)
#   tools/gpu-check.sh --fetch-deps   run HERE, with apt: stage cJSON and
#                                     oneDNN (headers + libraries) in
#                                     tmp/gpudeps for an image that lacks them;
#                                     then carry "tmp/gpudeps" with the run
# env: NF_GPU_BUDGET_S (470: total seconds), NF_GPU_BUILD (build-gpu),
#      NF_DEPS (tmp/gpudeps), NF_GPU_OPENCL (OFF), NF_GPU_SANITIZE (1),
#      NF_GPU_CMAKE_EXTRA (more cmake args), and for dry runs only:
#      NF_GPU_SEEDS, NF_GPU_FULL_ARGS, NF_GPU_BENCH_SHAPES, NF_GPU_FIXTURES,
#      NF_GPU_CTEST_ARGS,
#      OUT (where the device tool collects files: the log and summary go there)
# Exit status 0 only if every required step passed.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2

DEPS=${NF_DEPS:-$ROOT/tmp/gpudeps}

if [ "${1:-}" = "--fetch-deps" ]; then
    rm -rf "$DEPS" && mkdir -p "$DEPS/debs" || exit 1
    ( cd "$DEPS/debs" &&
      apt-get download libcjson1 libcjson-dev libdnnl2 libdnnl-dev libgomp1 ocl-icd-libopencl1 libzip4 libzip-dev ) || exit 1
    for f in "$DEPS"/debs/*.deb; do dpkg -x "$f" "$DEPS" || exit 1; done
    rm -rf "$DEPS/debs" "$DEPS/usr/share"
    find "$DEPS" -name '*.a' -delete
    du -sh "$DEPS"
    echo "staged in $DEPS; carry it: run(command='tools/gpu-check.sh', carry=['tmp/gpudeps'])"
    exit 0
fi

BUDGET=${NF_GPU_BUDGET_S:-470}
BUILD=${NF_GPU_BUILD:-build-gpu}
WORK=$BUILD/gpu-check
LOGDIR=$WORK/logs
T0=$(date +%s)
NF=$BUILD/nofall
# overrides, for dry runs of this script against a NOFALL_CUDA_EMU=ON build:
SEEDS=${NF_GPU_SEEDS:-42,100,101,102,105,110,111}
FULL_ARGS=${NF_GPU_FULL_ARGS:---seed 0}
BENCH_SHAPES=${NF_GPU_BENCH_SHAPES:-16x8x13 1024x1024x32}
FIXTURES=${NF_GPU_FIXTURES:-}

rm -rf "$BUILD"
mkdir -p "$LOGDIR" "$WORK/models" "$WORK/out"
SUMMARY=$WORK/summary.txt
: > "$SUMMARY"
FAILED=0

elapsed()   { echo $(( $(date +%s) - T0 )); }
remaining() { echo $(( BUDGET - $(elapsed) )); }
note()      { echo "$*" | tee -a "$SUMMARY"; }

# step NAME TIMEOUT required|optional COMMAND...   (COMMAND run by bash -c)
STEP_N=0
step() {
    local name=$1 limit=$2 kind=$3; shift 3
    STEP_N=$((STEP_N + 1))
    local log; log=$(printf '%s/%02d-%s.log' "$LOGDIR" "$STEP_N" "$name")
    local left; left=$(remaining)
    if [ "$left" -le 5 ]; then
        note "[$(elapsed)s] $name: SKIP (time budget spent)"
        [ "$kind" = required ] && FAILED=1
        return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    local t1; t1=$(date +%s)
    echo "== [$(elapsed)s] $name (limit ${limit}s): $*" > "$log"
    timeout --kill-after=5 "$limit" bash -c "$*" >> "$log" 2>&1
    local rc=$?
    local dt=$(( $(date +%s) - t1 ))
    if [ $rc -eq 0 ]; then
        note "[$(elapsed)s] $name: PASS (${dt}s)"
    else
        local why="rc=$rc"
        [ $rc -eq 124 ] && why="TIMEOUT after ${limit}s"
        if [ "$kind" = required ]; then note "[$(elapsed)s] $name: FAIL ($why, ${dt}s)"; FAILED=1
        else note "[$(elapsed)s] $name: WARN ($why, ${dt}s; optional)"; fi
        tail -n 25 "$log" | sed 's/^/    | /'
    fi
    return $rc
}

# KEY=value lines of a log
val() { grep -m1 "^$2=" "$1" 2>/dev/null | cut -d= -f2-; }

note "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) in $ROOT, budget ${BUDGET}s"
{ if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader 2>&1 | head -n 4
  else echo "nvidia-smi: not on PATH"; fi
  nvcc --version 2>&1 | tail -n 2; cmake --version 2>&1 | head -n 1; } | sed 's/^/  /' | tee -a "$SUMMARY"

# ---- 1. configure + build --------------------------------------------------------
CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DNOFALL_OPENCL=${NF_GPU_OPENCL:-OFF} -DNOFALL_CUDA=ON ${NF_GPU_CMAKE_EXTRA:-}"
if [ ! -f /usr/include/cjson/cJSON.h ] && [ -f "$DEPS/usr/include/cjson/cJSON.h" ]; then
    CMAKE_ARGS="$CMAKE_ARGS -DCJSON_INCLUDE_DIR=$DEPS/usr/include -DCJSON_LIBRARY=$DEPS/usr/lib/x86_64-linux-gnu/libcjson.so"
    note "  using cJSON from $DEPS"
fi
if [ ! -f /usr/include/oneapi/dnnl/dnnl.h ] && [ -f "$DEPS/usr/include/oneapi/dnnl/dnnl.h" ]; then
    CMAKE_ARGS="$CMAKE_ARGS -DDNNL_INCLUDE_DIR=$DEPS/usr/include"
    CMAKE_ARGS="$CMAKE_ARGS -DDNNL_LIBRARY=$DEPS/usr/lib/x86_64-linux-gnu/libdnnl.so"
    note "  using oneDNN from $DEPS"
fi
if [ ! -f /usr/include/zip.h ] && [ -f "$DEPS/usr/include/zip.h" ]; then
    CMAKE_ARGS="$CMAKE_ARGS -DLIBZIP_INCLUDE_DIR=$DEPS/usr/include -DLIBZIP_LIBRARY=$DEPS/usr/lib/x86_64-linux-gnu/libzip.so"
    note "  using libzip from $DEPS"
fi
if [ -d "$DEPS/usr/lib/x86_64-linux-gnu" ]; then
    export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
JOBS=$(nproc 2>/dev/null || echo 8)

step configure 90 required "cmake -S . -B $BUILD $CMAKE_ARGS" || {
    note "  (missing cJSON/oneDNN? on a machine with apt: tools/gpu-check.sh --fetch-deps, then carry tmp/gpudeps)"
    note "RESULT=FAIL (configure)"; exit 1; }
grep -E "nofall: cuda|not built" "$LOGDIR"/*configure.log | sed 's/^.*-- /  /' | tee -a "$SUMMARY"
step build 180 required "cmake --build $BUILD -j$JOBS" || { note "RESULT=FAIL (build)"; exit 1; }
step devices 30 required "set -o pipefail; $NF devices 2>&1 | tee /dev/stderr | grep '^  cuda:0 ' >/dev/null"
grep -h "cuda" "$LOGDIR"/*devices.log | sed 's/^/  /' | tee -a "$SUMMARY"

# ---- 2. the op conformance suite first (most diagnostic), the rest of ctest later ---
# (must have run cuda:0, not skipped it)
step conformance 120 required "set -o pipefail; $BUILD/tests/test-backend-ops 2>&1 | tee /dev/stderr | grep '^---- cuda:0' >/dev/null"
grep -E "^(FAIL|SKIP|----)|cases OK|not available" "$LOGDIR"/*conformance.log | head -n 20 | sed 's/^/  /' | tee -a "$SUMMARY"

# ---- 2b. training (#28): a Mitra training step on cuda:0 against the cpu, and every
# upstream fine-tuning fixture (step-1 gradients, the runs, the prediction after fit) -----
step train-step 60 required "$BUILD/tests/test-mitra-train cuda:0"
grep -E "on cuda:0|checks" "$LOGDIR"/*train-step.log | head -n 4 | sed 's/^/  /' | tee -a "$SUMMARY"
step finetune-parity 120 required "$BUILD/tests/test-finetune-parity tests/fixtures/finetune cuda:0"
grep -E "on cuda:0|checks" "$LOGDIR"/*finetune-parity.log | head -n 14 | sed 's/^/  /' | tee -a "$SUMMARY"

# ---- 3. models: the fixtures' own weights, and the full-size synthetic --------------
MODELS=""
for case in tests/fixtures/mitra/*/case.json; do
    [ -f "$case" ] || continue
    name=$(basename "$(dirname "$case")")
    if [ -n "$FIXTURES" ] && ! echo " $FIXTURES " | grep -q " $name "; then continue; fi
    cmd=$(sed -n 's/.*"gen_weights_command"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$case" | head -n 1)
    [ -n "$cmd" ] || { note "  $name: no gen_weights_command in case.json"; FAILED=1; continue; }
    args=${cmd#nofall }
    args=${args//DIR/$WORK/models/$name}
    step "gen-$name" 60 required "$NF $args" && MODELS="$MODELS $name"
done
FULL=$WORK/models/full-synth
step gen-full-synth 60 required "$NF gen-weights mitra --out $FULL $FULL_ARGS"

# ---- 4. verify against the cpu (exact) and against the PyTorch fixtures -----------
for name in $MODELS; do
    step "verify-cpu-$name" 60 required \
        "$NF verify --model $WORK/models/$name --device cuda:0 --against cpu --seeds $SEEDS --max-abs 1e-5 --mean-abs 1e-6"
    log=$(ls "$LOGDIR"/*"verify-cpu-$name.log")
    note "    $name vs cpu: $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS) worst=$(val "$log" WORST_CASE)"
    step "verify-torch-$name" 60 required \
        "$NF verify --model $WORK/models/$name --device cuda:0 --against tests/fixtures/mitra/$name --max-abs 1e-5 --mean-abs 1e-6"
    log=$(ls "$LOGDIR"/*"verify-torch-$name.log")
    note "    $name vs torch fixture: $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS)"
done
step verify-cpu-full-synth 120 required \
    "$NF verify --model $FULL --device cuda:0 --against cpu --seeds $SEEDS --max-abs 1e-5 --mean-abs 1e-6"
log=$(ls "$LOGDIR"/*verify-cpu-full-synth.log)
note "    full-synth vs cpu: $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS) worst=$(val "$log" WORST_CASE)"

# ---- 5. placement and transfers; 6. determinism -------------------------------------
step trace-full 60 required \
    "$NF run --model $FULL --device cuda:0 --out $WORK/out/run1 --trace $WORK/out/trace-full.json"
log=$(ls "$LOGDIR"/*trace-full.log)
note "    run: MODEL_DEVICE=$(val "$log" MODEL_DEVICE) LOGITS_DEVICE=$(val "$log" LOGITS_DEVICE) OPS_TOTAL=$(val "$log" OPS_TOTAL) OPS_OFF_DEVICE=$(val "$log" OPS_OFF_DEVICE) CPU_FALLBACK=$(val "$log" CPU_FALLBACK) H2D_COPIES=$(val "$log" H2D_COPIES) D2H_COPIES=$(val "$log" D2H_COPIES)"
if [ "$(val "$log" MODEL_DEVICE)" != "cuda:0" ] || [ "$(val "$log" OPS_OFF_DEVICE)" != "0" ] || [ "$(val "$log" CPU_FALLBACK)" != "false" ]; then
    note "    placement: FAIL"; FAILED=1
fi
pd=$(sed -n 's/.*"precision_detail"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$WORK/out/run1/report.json" 2>/dev/null | head -n 1)
note "    precision_detail: ${pd:-?}"
step determinism 60 required \
    "$NF run --model $FULL --device cuda:0 --out $WORK/out/run2 >/dev/null && cmp $WORK/out/run1/logits.npy $WORK/out/run2/logits.npy"

# ATTENTION through cuBLAS everywhere (the seed cases' small support sets
# otherwise take the one-kernel path; the ties fixture, 300 support rows,
# takes the cuBLAS path on its own)
step verify-cublas-attention 120 required \
    "NF_CUDA_ATTENTION=cublas $NF verify --model $FULL --device cuda:0 --against cpu --seeds $SEEDS --max-abs 1e-5 --mean-abs 1e-6"
log=$(ls "$LOGDIR"/*verify-cublas-attention.log)
note "    full-synth vs cpu, NF_CUDA_ATTENTION=cublas: $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS)"

# the chunked paths (attention by group and query-row chunks, LINEAR by row chunks)
CHUNKM=$(for n in $MODELS; do [ "$n" = seed42 ] && echo "$n"; done)
[ -n "$CHUNKM" ] || CHUNKM=$(echo $MODELS | awk '{print $1}')
if [ -n "$CHUNKM" ]; then
    step verify-chunked 60 required \
        "NF_CUDA_CHUNK_FLOATS=1000 NF_CUDA_ATTENTION=cublas $NF verify --model $WORK/models/$CHUNKM --device cuda:0 --against cpu --seeds 42,100 --max-abs 1e-5 --mean-abs 1e-6"
fi

# device out of memory: a 10M-row support set needs a ~675 GB stream; the
# forward must fail at once naming cudaMalloc, not fall back or crash
step oom 90 required \
    "out=\$($NF bench --model $FULL --device cuda:0 --warmup 0 --runs 1 --support 10000000 --query 1 --features 32 2>&1); rc=\$?; echo \"\$out\" | tail -n 5; [ \$rc -ne 0 ] && echo \"\$out\" | grep -q 'cudaMalloc.*cudaErrorMemoryAllocation'"
log=$(ls "$LOGDIR"/*oom.log)
note "    oom: $(grep -m1 -o 'cudaMalloc of [0-9]* bytes[^;]*' "$log" || echo 'no cudaMalloc message')"

# ---- 7. bench; 8. tf32 error ------------------------------------------------------------
for prec in exact tf32; do
    for shape in $BENCH_SHAPES; do
        set -- ${shape//x/ }
        tag="bench-$prec-$1x$2x$3"
        step "$tag" 90 required \
            "$NF bench --model $FULL --device cuda:0 --warmup 2 --runs 10 --support $1 --query $2 --features $3 --precision $prec"
        log=$(ls "$LOGDIR"/*"$tag.log")
        note "    $prec $1x$2x$3: median $(val "$log" MEDIAN_MS) ms, $(val "$log" GFLOPS) GFLOP/s, $(val "$log" OPS_PER_FORWARD) ops, H2D/fwd $(val "$log" H2D_COPIES_PER_FORWARD), D2H/fwd $(val "$log" D2H_COPIES_PER_FORWARD), device allocs in timed runs $(val "$log" DEVICE_ALLOCS_TIMED)"
    done
done
step verify-tf32-full-synth 90 optional \
    "$NF verify --model $FULL --device cuda:0 --against cpu --seeds $SEEDS --precision tf32"
log=$(ls "$LOGDIR"/*verify-tf32-full-synth.log)
note "    tf32 vs cpu (informational; default thresholds 1e-3/1e-4): $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS)"

# ---- 7b. SpTransformer -----------------------------------------------------------------
SPT=$WORK/models/sptransformer
step gen-sptransformer 60 required "$NF gen-weights sptransformer --out $SPT --seed 0"
step spt-verify-torch 90 required \
    "$NF verify --model $SPT --device cuda:0 --against tests/fixtures/sptransformer --max-abs 1e-4 --mean-abs 1e-5"
log=$(ls "$LOGDIR"/*spt-verify-torch.log)
note "    sptransformer vs torch fixtures: $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS) buckets=$(val "$log" BUCKETS_AGREE) near-tie flips=$(val "$log" BUCKET_NEAR_TIE_FLIPS)"
step spt-verify-cpu 120 required \
    "$NF verify --model $SPT --device cuda:0 --against cpu --seeds 42 --samples 2 --max-abs 1e-4 --mean-abs 1e-5"
log=$(ls "$LOGDIR"/*spt-verify-cpu.log)
note "    sptransformer vs cpu: $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS) buckets=$(val "$log" BUCKETS_AGREE)"
step spt-run 60 required \
    "$NF run --model $SPT --device cuda:0 --out $WORK/out/spt-run --seed 20240816 --length 128 --trace $WORK/out/trace-spt.json"
log=$(ls "$LOGDIR"/*spt-run.log)
note "    sptransformer run: LOGITS_SHAPE=$(val "$log" LOGITS_SHAPE) MODEL_DEVICE=$(val "$log" MODEL_DEVICE) OPS_OFF_DEVICE=$(val "$log" OPS_OFF_DEVICE) CPU_FALLBACK=$(val "$log" CPU_FALLBACK) H2D_COPIES=$(val "$log" H2D_COPIES) D2H_COPIES=$(val "$log" D2H_COPIES)"
[ "$(val "$log" CPU_FALLBACK)" = false ] && [ "$(val "$log" OPS_OFF_DEVICE)" = 0 ] || { note "    sptransformer placement: FAIL"; FAILED=1; }
# ---- 7c. bf16-autocast against upstream's autocast (optional: a first run) -------------
for n in $MODELS; do
    [ "$n" = seed42 ] || continue
    step mitra-verify-bf16 60 optional \
        "$NF verify --model $WORK/models/seed42 --device cuda:0 --against tests/fixtures/mitra/seed42 --precision bf16-autocast"
    log=$(ls "$LOGDIR"/*mitra-verify-bf16.log)
    note "    mitra seed42 bf16-autocast vs upstream autocast: $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS)"
done
step spt-verify-bf16 120 optional \
    "$NF verify --model $SPT --device cuda:0 --against tests/fixtures/sptransformer/L8001 --precision bf16-autocast"
log=$(ls "$LOGDIR"/*spt-verify-bf16.log)
note "    sptransformer L8001 bf16-autocast vs upstream autocast: $(val "$log" RESULT) max_abs=$(val "$log" WORST_MAX_ABS) mean_abs=$(val "$log" WORST_MEAN_ABS) buckets=$(val "$log" BUCKETS_AGREE)"
for prec in exact tf32; do
    for bs in 1 8; do
        tag="spt-bench-$prec-b$bs"
        step "$tag" 90 required \
            "$NF bench --model $SPT --device cuda:0 --warmup 3 --runs 20 --length 8201 --batch $bs --precision $prec"
        log=$(ls "$LOGDIR"/*"$tag.log")
        note "    sptransformer $prec L=8201 batch $bs: median $(val "$log" MEDIAN_MS) ms, $(val "$log" GFLOPS) GFLOP/s, device memory $(val "$log" DEVICE_ALLOC_MB) MB, allocs in timed runs $(val "$log" DEVICE_ALLOCS_TIMED)"
    done
done

# ---- the rest of ctest (fixtures-cuda is what steps 3-4 did already) --------------
CTEST_ARGS=${NF_GPU_CTEST_ARGS:-"-E 'fixtures-cuda|backend-ops'"}
step ctest 180 required "ctest --test-dir $BUILD --output-on-failure -j4 --timeout 150 $CTEST_ARGS"
grep -E "tests passed|tests failed|\*\*\*" "$LOGDIR"/*ctest.log | head -n 12 | sed 's/^/  /' | tee -a "$SUMMARY"

# ---- 9. compute-sanitizer -------------------------------------------------------------
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
SMALL=$(for n in $MODELS; do [ "$n" = seed42 ] && echo "$n"; done)
[ -n "$SMALL" ] || SMALL=$(echo $MODELS | awk '{print $1}')
if [ "${NF_GPU_SANITIZE:-1}" = 1 ] && [ -n "$SAN" ] && [ -n "$SMALL" ]; then
    for tool in memcheck racecheck; do
        step "sanitize-$tool" 75 optional \
            "$SAN --tool $tool --error-exitcode 99 $NF run --model $WORK/models/$SMALL --device cuda:0 --out $WORK/out/san-$tool"
        log=$(ls "$LOGDIR"/*"sanitize-$tool.log")
        note "    $tool: $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" || echo 'no summary line')"
    done
else
    note "[$(elapsed)s] sanitize: SKIP (NF_GPU_SANITIZE=${NF_GPU_SANITIZE:-1}, compute-sanitizer '${SAN}')"
fi

# ---- summary ------------------------------------------------------------------------------
if [ $FAILED -eq 0 ]; then note "RESULT=PASS (all required steps, $(elapsed)s)"; else note "RESULT=FAIL ($(elapsed)s)"; fi
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cat "$LOGDIR"/*.log > "$OUT/gpu-check-logs.txt" 2>/dev/null
    cp "$SUMMARY" "$OUT/gpu-check-summary.txt"
    [ -f "$WORK/out/trace-full.json" ] && cp "$WORK/out/trace-full.json" "$OUT/trace-full.json"
fi
echo
echo "==== summary ($SUMMARY) ===="
cat "$SUMMARY"
exit $FAILED
