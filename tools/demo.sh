#!/usr/bin/env bash
# demo.sh -- set up, build, make the full-size synthetic Mitra checkpoint and
# run the seed case on DEVICE (default cpu), then fine-tune a small model on a
# small table (nofall finetune, 3 steps). Prints the markers.
set -eu
cd "$(dirname "$0")/.."
DEVICE=${1:-cpu}
bash tools/setup.sh
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
[ -f models/mitra-synthetic/model.safetensors ] || build/nofall gen-weights mitra --out models/mitra-synthetic --seed 0
build/nofall run --model models/mitra-synthetic --device "$DEVICE" --out out/seed42 --seed 42
# fine-tuning (docs/mitra.md "Fine-tuning"): a small model, a small table, 3 steps
[ -f models/mitra-small/model.safetensors ] ||
  build/nofall gen-weights mitra --out models/mitra-small --seed 0 --dim 32 --layers 2 --heads 4
mkdir -p out
python3 -c 'import math
print("a,b,y")
for i in range(60): a = round(math.sin(i) * 3, 3); b = round(i * 0.7 % 2.3, 3); print(f"{a},{b},{int(a + b > 1)}")' > out/demo-train.csv
build/nofall finetune --model models/mitra-small --device "$DEVICE" --train out/demo-train.csv --target y \
  --out out/mitra-small-ft --steps 3 --lr 1e-3 --warmup-steps 2
