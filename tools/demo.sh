#!/usr/bin/env bash
# demo.sh -- set up, build, make the full-size synthetic Mitra checkpoint and
# run the seed case on DEVICE (default cpu). Prints the run's markers.
set -eu
cd "$(dirname "$0")/.."
DEVICE=${1:-cpu}
bash tools/setup.sh
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
[ -f models/mitra-synthetic/model.safetensors ] || build/nofall gen-weights mitra --out models/mitra-synthetic --seed 0
build/nofall run --model models/mitra-synthetic --device "$DEVICE" --out out/seed42 --seed 42
