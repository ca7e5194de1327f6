#!/usr/bin/env bash
# test.sh -- set up, build (release + sanitizers) and run the whole test suite.
# This is the README's test command and what CI (.ci/run) runs.
set -eu
cd "$(dirname "$0")/.."
bash tools/setup.sh
export PATH="$PATH:/usr/local/cuda/bin"
JOBS=$(nproc)
# 1. release build: cpu + opencl (PoCL) + cuda (compiled and linked; no GPU needed)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$JOBS"
# which machine this log comes from: results are bitwise only per machine
# (README "Determinism"), so a failure report must say where it ran
echo "test.sh: CPU: $(grep -m1 "^model name" /proc/cpuinfo | sed "s/^model name[[:space:]]*: //") ($(nproc) cores)"
build/nofall devices | sed -n 's/^  cpu  /test.sh: cpu backend: /p'
ctest --test-dir build --output-on-failure
# 2. the same suite under AddressSanitizer + UBSan (cpu backend)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNOFALL_SANITIZE=ON -DNOFALL_OPENCL=OFF -DNOFALL_CUDA=OFF
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure
# 3. the cuda backend's host and kernel code on the host emulator (no GPU
#    here): the conformance suite and small Mitra runs against the cpu. This
#    checks the kernels' logic; only a GPU run (tools/gpu-check.sh) checks
#    the device itself.
if command -v nvcc >/dev/null 2>&1; then
  cmake -S . -B build-cuda-emu -DCMAKE_BUILD_TYPE=Release -DNOFALL_CUDA_EMU=ON -DNOFALL_OPENCL=OFF
  cmake --build build-cuda-emu -j "$JOBS"
  ctest --test-dir build-cuda-emu --output-on-failure -R "backend-ops|cuda-emu"
else
  echo "test.sh: nvcc not found: cuda emulator stage skipped"
fi
echo "test.sh: all tests passed"
