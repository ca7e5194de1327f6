#!/usr/bin/env bash
# fixtures.sh BIN FIXTURE_DIR TMP DEVICE [CASE...]
# For every committed upstream fixture (or the CASEs named): regenerate its
# synthetic weights with `nofall gen-weights` (from case.json), then `nofall
# verify` DEVICE against the PyTorch fp32 logits -- with the seeds' thresholds
# (1e-4) and with ours (1e-5 / 1e-6). On a non-cpu device: ours only (a pass
# within 1e-5 / 1e-6 is a pass within 1e-4 / 1e-5), and against the cpu
# backend over the seeds' seed list (7 table shapes) -- on opencl for the
# small models only: on the full-size model that is 2 minutes of PoCL for
# what the small models and the op conformance suite's shapes already
# prove. On cpu, a case with expected_logits_bf16.npy (upstream under its bf16
# autocast) is also verified with --precision bf16-autocast, where the CPU runs it.
# Exit 77 (skip) when DEVICE is absent.
set -u
BIN=$1; FIX=$2; TMP=$3; DEV=$4
shift 4
NAMED=$#
CASES=("$FIX"/*/)
if [ "$NAMED" -gt 0 ]; then CASES=(); for c in "$@"; do CASES+=("$FIX/$c/"); done; fi
rm -rf "$TMP"; mkdir -p "$TMP"
if [ "$DEV" != cpu ]; then
  # the device's runtime threads (PoCL) and the cpu reference's OpenMP pool
  # share this process and two cores: idle OpenMP threads must not spin
  export OMP_WAIT_POLICY=PASSIVE
  if ! "$BIN" devices | grep -q "^  $DEV "; then
    echo "device $DEV not available here: skipped"; "$BIN" devices; exit 77
  fi
fi
fail=0
n=0
for case in "${CASES[@]}"; do
  case=${case%/}; name=$(basename "$case")
  [ -f "$case/expected_logits.npy" ] || { [ "$NAMED" -eq 0 ] || { echo "FAIL $name: no fixture in $FIX"; fail=1; }; continue; }
  cmd=$(sed -n 's/.*"gen_weights_command": "nofall \(.*\)".*/\1/p' "$case/case.json")
  [ -n "$cmd" ] || { echo "FAIL $name: no gen_weights_command in case.json"; fail=1; continue; }
  model="$TMP/model-$name"
  # shellcheck disable=SC2086
  "$BIN" ${cmd/--out DIR/--out $model} >/dev/null || { echo "FAIL $name: gen-weights"; fail=1; continue; }
  thrs=("1e-4 1e-5" "1e-5 1e-6")
  [ "$DEV" = cpu ] || thrs=("1e-5 1e-6")
  for thr in "${thrs[@]}"; do
    set -- $thr
    if "$BIN" verify --model "$model" --device "$DEV" --against "$case" --max-abs "$1" --mean-abs "$2" > "$TMP/$name-$1.txt" 2>&1; then
      echo "PASS $name vs upstream ($(grep -E '^case ' "$TMP/$name-$1.txt" | sed 's/  */ /g'))"
    else
      echo "FAIL $name vs upstream at max_abs<=$1 mean_abs<=$2:"; cat "$TMP/$name-$1.txt"; fail=1
    fi
  done
  # --precision bf16-autocast against upstream's own autocast logits (docs/precision.md), on cpu where it runs
  if [ "$DEV" = cpu ] && [ -f "$case/expected_logits_bf16.npy" ] &&
     "$BIN" devices | grep -q "^  cpu  precision modes: exact, bf16-autocast"; then
    if "$BIN" verify --model "$model" --device cpu --against "$case" --precision bf16-autocast > "$TMP/$name-bf16.txt" 2>&1; then
      echo "PASS $name bf16-autocast vs upstream autocast ($(grep -E '^case ' "$TMP/$name-bf16.txt" | grep -o 'max_abs=[^ ]* mean_abs=[^ ]*'))"
    else
      echo "FAIL $name bf16-autocast vs upstream autocast:"; cat "$TMP/$name-bf16.txt"; fail=1
    fi
  fi
  if [ "$DEV" != cpu ] && { [ "${DEV%%:*}" != opencl ] || ! grep -q -- '--dim 512 ' "$case/case.json"; }; then
    if "$BIN" verify --model "$model" --device "$DEV" --against cpu --max-abs 1e-5 --mean-abs 1e-6 \
         --seeds 42,100,101,102,105,110,111 --samples 1 > "$TMP/$name-cpu.txt" 2>&1; then
      echo "PASS $name $DEV vs cpu ($(grep WORST_MAX_ABS "$TMP/$name-cpu.txt"))"
    else
      echo "FAIL $name $DEV vs cpu:"; cat "$TMP/$name-cpu.txt"; fail=1
    fi
  fi
  n=$((n + 1))
done
[ "$n" -ge 7 ] || [ "$NAMED" -gt 0 ] || { echo "FAIL: only $n fixtures found in $FIX"; fail=1; }
[ "$n" -ge "$NAMED" ] || { echo "FAIL: $n of the $NAMED fixtures named ran"; fail=1; }
# where every op ran, from the trace of a run on the device (full-size model)
model="$TMP/model-full-seed0"
if [ -f "$model/model.safetensors" ]; then
  if "$BIN" run --model "$model" --device "$DEV" --out "$TMP/run" --trace "$TMP/trace.json" > "$TMP/run.txt" 2>&1 &&
     python3 - "$TMP/trace.json" "$DEV" "$TMP/run.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); dev = sys.argv[2]
m = dict(l.strip().split("=", 1) for l in open(sys.argv[3]) if "=" in l)
assert d["device"] == dev and d["totals"]["ops"] > 0
assert all(o["device"] == dev and o["operands_on"] == dev for o in d["ops"]), "an op ran off the device"
assert d["totals"]["ops_off_device"] == 0
h2d = [x["what"] for x in d["transfers"] if x["direction"] == "h2d"]
d2h = [x["what"] for x in d["transfers"] if x["direction"] == "d2h"]
assert h2d == ["weights", "x_support", "x_query", "y_support"] and d2h == ["logits"], (h2d, d2h)
assert m["CPU_FALLBACK"] == "false" and m["MODEL_DEVICE"] == dev and m["INPUT_DEVICE"] == dev and m["LOGITS_DEVICE"] == dev
print("trace: %d ops, all on %s; transfers: weights once + 3 inputs in, logits out" % (d["totals"]["ops"], dev))
PY
  then echo "PASS trace on $DEV"; else echo "FAIL trace on $DEV"; cat "$TMP/run.txt"; fail=1; fi
fi
exit $fail
