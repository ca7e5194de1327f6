#!/bin/sh
# tests/cuda-nodevice.sh NOFALL_BIN WORKDIR
#
# On a machine WITHOUT a usable GPU (CI), the cuda backend must fail at once
# and say why -- never fall back to the cpu:
#   1. `nofall devices` lists cuda as compiled in with no device (or as not
#      compiled in, for builds without nvcc: then cuda:0 must say so);
#   2. `nofall run --device cuda:0` (exact and tf32) exits non-zero with a
#      message naming cuda, and writes no logits.npy;
#   3. a device index out of range fails the same way.
# Where `nofall devices` does list a CUDA device the test cannot apply and
# exits 77 (ctest SKIP_RETURN_CODE): GPU machines run tools/gpu-check.sh.
# NF_CUDA_EMU_DEVICES=0 makes a NOFALL_CUDA_EMU=ON test build behave as a
# machine with the driver but no GPU (ignored by real builds).
set -u
NF=${1:?usage: cuda-nodevice.sh NOFALL_BIN WORKDIR}
WORK=${2:?usage: cuda-nodevice.sh NOFALL_BIN WORKDIR}

fail() { echo "FAIL: $*"; exit 1; }

devs=$("$NF" devices 2>&1) || fail "'nofall devices' exited non-zero: $devs"
echo "$devs"
cudaline=$(printf '%s\n' "$devs" | grep '^cuda' | head -n 1)
expect=""
case "$cudaline" in
    "cuda: compiled in, no device"*) expect="cuda" ;;
    "cuda: not compiled in"*)        expect="not compiled" ;;
    "cuda: compiled in"*)            echo "GPU present; no-device test skipped"; exit 77 ;;
    *)                               fail "'nofall devices' has no cuda line" ;;
esac

rm -rf "$WORK"
mkdir -p "$WORK" || fail "cannot create $WORK"
"$NF" gen-weights mitra --out "$WORK/model" --dim 16 --layers 1 --heads 2 --outputs 3 --seed 1 \
    > "$WORK/gen.log" 2>&1 || { cat "$WORK/gen.log"; fail "gen-weights failed"; }

check_refused() { # device, extra args...
    dev=$1; shift
    out="$WORK/out-$(echo "$dev" | tr ':' '_')"
    msg=$("$NF" run --model "$WORK/model" --device "$dev" --out "$out" "$@" 2>&1)
    rc=$?
    echo "--- nofall run --device $dev $* -> rc=$rc"
    echo "$msg"
    [ "$rc" -ne 0 ] || fail "run --device $dev exited 0 without a GPU"
    printf '%s' "$msg" | grep -q "cuda" || fail "run --device $dev: the message does not mention cuda"
    printf '%s' "$msg" | grep -q "$expect" || fail "run --device $dev: the message does not say '$expect'"
    [ ! -e "$out/logits.npy" ] || fail "run --device $dev wrote $out/logits.npy"
}

check_refused cuda:0
check_refused cuda:0 --precision tf32
check_refused cuda:3
echo "PASS: cuda refuses cleanly without a GPU"
exit 0
