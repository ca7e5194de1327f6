#!/bin/sh
# tests/cuda-emu-oom.sh NOFALL_BIN WORKDIR   (NOFALL_CUDA_EMU=ON builds)
#
# The cuda backend runs out of device memory cleanly, never falling back to
# the cpu: with the emulated memory capped (NF_CUDA_EMU_MEM),
#   1. at load: the weights do not fit;
#   2. at the forward: the weights fit, the forward's workspace does not;
# each time `nofall run --device cuda:0` exits non-zero at once, the message
# names cudaMalloc, the error (cudaErrorMemoryAllocation), the size and what
# it was for, and no artifact is left, not even over a stale output directory.
set -u
NF=${1:?usage: cuda-emu-oom.sh NOFALL_BIN WORKDIR}
WORK=${2:?usage: cuda-emu-oom.sh NOFALL_BIN WORKDIR}

fail() { echo "FAIL: $*"; exit 1; }

rm -rf "$WORK"
mkdir -p "$WORK" || fail "cannot create $WORK"
"$NF" gen-weights mitra --out "$WORK/model" --dim 16 --layers 1 --heads 2 --outputs 3 --seed 1 \
    > "$WORK/gen.log" 2>&1 || { cat "$WORK/gen.log"; fail "gen-weights failed"; }
wbytes=$(wc -c < "$WORK/model/model.safetensors")

oom() { # name, memory cap in bytes, text the message must hold
    name=$1 cap=$2 want=$3
    out="$WORK/out-$name"
    mkdir -p "$out" && echo stale > "$out/logits.npy" && echo stale > "$out/report.json"
    msg=$(NF_CUDA_EMU_MEM=$cap "$NF" run --model "$WORK/model" --device cuda:0 --out "$out" 2>&1)
    rc=$?
    echo "--- $name (NF_CUDA_EMU_MEM=$cap) -> rc=$rc"
    echo "$msg"
    [ "$rc" -ne 0 ] || fail "$name: run exited 0"
    for w in "cuda:0" "cudaMalloc" "cudaErrorMemoryAllocation" "$want"; do
        printf '%s' "$msg" | grep -q -- "$w" || fail "$name: the message lacks '$w'"
    done
    printf '%s' "$msg" | grep -q "RESULT\|PREDICTED_CLASS" && fail "$name: it printed results"
    # a failed run keeps what --out held (docs/outputs.md "Output sets")
    for f in logits.npy report.json; do
        [ "$(cat "$out/$f" 2>/dev/null)" = stale ] || fail "$name: $out/$f changed: a failed run must keep the previous results"
    done
    ls -A "$WORK" | grep -q "^\.out-$name\.nofall" && fail "$name: staging or lock left in $WORK"
}

# 1: less than the checkpoint's size: the one weight upload cannot be allocated
oom load $((wbytes / 2)) "weights"
# 2: the weights fit (about the checkpoint's size), the forward's stream does not
oom forward $((wbytes + 65536)) "allocating tensor"
echo "PASS: cuda runs out of memory cleanly"
exit 0
