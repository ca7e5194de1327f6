#!/usr/bin/env bash
# test.sh -- set up, build (release + sanitizers) and run the whole test suite.
# This is the README's test command and what CI (.ci/run) runs.
set -eu
cd "$(dirname "$0")/.."
bash tools/setup.sh
export PATH="$PATH:/usr/local/cuda/bin"
JOBS=$(nproc)
# 1. release build: cpu + opencl (PoCL) + cuda (compiled and linked; no GPU
#    needed), with the test hooks (tests/signals.sh holds runs in a phase)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DNOFALL_TEST_HOOKS=ON
cmake --build build -j "$JOBS"
# which machine this log comes from: results are bitwise only per machine
# (README "Determinism"), so a failure report must say where it ran
echo "test.sh: CPU: $(grep -m1 "^model name" /proc/cpuinfo | sed "s/^model name[[:space:]]*: //") ($(nproc) cores)"
build/nofall devices | sed -n 's/^  cpu  /test.sh: cpu backend: /p'
ctest --test-dir build --output-on-failure
# 2. the same suite (the hostile-input corpus included) under AddressSanitizer
#    + UBSan with float-cast-overflow, no recovery (cpu backend)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNOFALL_SANITIZE=ON -DNOFALL_TEST_HOOKS=ON -DNOFALL_OPENCL=OFF -DNOFALL_CUDA=OFF
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure
# 3. the cuda backend's host and kernel code on the host emulator (no GPU
#    here): the conformance suite, small Mitra runs and SpTransformer at
#    small configurations (cuda-emu-sptransformer-small) against the cpu. This
#    checks the kernels' logic; only a GPU run (tools/gpu-check.sh) checks
#    the device itself.
if command -v nvcc >/dev/null 2>&1; then
  cmake -S . -B build-cuda-emu -DCMAKE_BUILD_TYPE=Release -DNOFALL_CUDA_EMU=ON -DNOFALL_OPENCL=OFF
  cmake --build build-cuda-emu -j "$JOBS"
  ctest --test-dir build-cuda-emu --output-on-failure -R "backend-ops|cuda-emu"
else
  echo "test.sh: nvcc not found: cuda emulator stage skipped"
fi
# 4. fuzzing: a libFuzzer target per reader, bounded, under ASan + UBSan,
#    from the committed seed corpus (new inputs go to build-fuzz/corpus-*)
CLANG=$(command -v clang-14 || command -v clang || true)
if [ -n "$CLANG" ]; then
  CC=$CLANG cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNOFALL_FUZZ=ON -DNOFALL_OPENCL=OFF -DNOFALL_CUDA=OFF
  cmake --build build-fuzz -j "$JOBS" --target fuzz-safetensors fuzz-npy fuzz-config fuzz-ckpt fuzz-tokenizer fuzz-csv
  for t in safetensors npy config ckpt tokenizer csv; do
    mkdir -p build-fuzz/corpus-$t
    if ! build-fuzz/fuzz-$t -max_total_time="${NOFALL_FUZZ_SECONDS:-30}" -print_final_stats=1 -artifact_prefix=build-fuzz/crash-$t- \
         build-fuzz/corpus-$t tests/fuzz/corpus/$t > build-fuzz/fuzz-$t.log 2>&1; then
      tail -60 build-fuzz/fuzz-$t.log
      echo "test.sh: fuzz-$t found a bug (input saved as build-fuzz/crash-$t-*)"
      exit 1
    fi
    echo "test.sh: fuzz-$t: $(sed -n 's/^stat::number_of_executed_units: //p' build-fuzz/fuzz-$t.log) executions, no finding"
  done
else
  echo "test.sh: clang not found: fuzz stage skipped"
fi
# 5. valgrind memcheck: one small forward per backend, and a refused input
#    (error paths free what they took); 0 errors required. opencl:0 is not
#    run: PoCL compiles its kernels with LLVM in-process, which under
#    memcheck does not finish a forward in 10 minutes, and its dlopen shows
#    glibc ld.so reads (dl-load.c is_dst) that are not nofall's.
if command -v valgrind >/dev/null 2>&1; then
  # tests/valgrind.supp: one over-read inside glibc's ld.so (is_dst), which
  # libcublasLt's constructor triggers in every run of a CUDA-enabled build
  VG="valgrind -q --error-exitcode=99 --suppressions=tests/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite"
  rm -rf build/vg && mkdir -p build/vg/bad
  build/nofall gen-weights mitra --out build/vg/model --dim 16 --layers 1 --heads 2 --outputs 4 --seed 1 > /dev/null
  $VG build/nofall run --model build/vg/model --device cpu --out build/vg/out > build/vg/cpu.log 2>&1 \
    || { cat build/vg/cpu.log; echo "test.sh: valgrind: errors in a cpu forward"; exit 1; }
  grep -qx "EXIT_CODE=0" build/vg/cpu.log || { cat build/vg/cpu.log; echo "test.sh: valgrind: the cpu forward failed"; exit 1; }
  build/nofall gen-weights sptransformer --out build/vg/spt --dim 16 --depth 1 --context 50 --window 64 --seed 1 > /dev/null
  $VG build/nofall run --model build/vg/spt --device cpu --out build/vg/spt-out --length 40 > build/vg/spt.log 2>&1 \
    || { cat build/vg/spt.log; echo "test.sh: valgrind: errors in a SpTransformer cpu forward"; exit 1; }
  grep -qx "EXIT_CODE=0" build/vg/spt.log || { cat build/vg/spt.log; echo "test.sh: valgrind: the SpTransformer forward failed"; exit 1; }
  cp build/vg/model/config.json build/vg/bad/
  rc=0; $VG build/nofall run --model build/vg/bad --device cpu --out build/vg/out > build/vg/bad.log 2>&1 || rc=$?
  [ $rc -eq 1 ] || { cat build/vg/bad.log; echo "test.sh: valgrind: a refused input gave exit $rc (99 = memcheck errors)"; exit 1; }
  echo "test.sh: valgrind memcheck: cpu forwards (Mitra, SpTransformer) and a refused input, 0 errors (opencl:0 not run, see above)"
else
  echo "test.sh: valgrind not found: memcheck stage skipped"
fi
# 6. the Python package (python/, README "Python"): a fresh venv, pip install
#    ./python (scikit-build-core from PyPI builds the _nofall extension with
#    this repository's CMake; OpenCL when found; CUDA off here, as the Python
#    tests run on cpu) with the test extras, then pytest: parity against the
#    AutoGluon fixtures (tests/fixtures/predict), scikit-learn's estimator
#    checks (documented expected failures: python/tests/test_sklearn.py), the
#    lower-level Model API, errors, the GIL
echo "test.sh: python package (pip install ./python, pytest python/tests)"
rm -rf .venv-test
python3 -m venv .venv-test
.venv-test/bin/python -m pip install -q --upgrade pip
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS .venv-test/bin/python -m pip install -q "./python[test]" \
  --config-settings=cmake.define.NOFALL_CUDA=OFF
(cd python && ../.venv-test/bin/python -m pytest -q -rfEx tests) \
  || { echo "test.sh: python package: pytest failed"; exit 1; }
echo "test.sh: python package: pytest passed"
echo "test.sh: all tests passed"
