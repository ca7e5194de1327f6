#!/usr/bin/env bash
# cli.sh BIN TMP -- the command line as a user meets it: markers from real
# checks, verified artifacts, clear errors with no partial outputs.
set -u
BIN=$1; T=$2
rm -rf "$T"; mkdir -p "$T"
fails=0
# which machine this log comes from (byte-level results depend on it)
echo "cli.sh: $(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^model name[[:space:]]*: //'); $("$BIN" devices | grep -m1 '^  cpu ')"
ok()   { echo "ok   $*"; }
bad()  { echo "FAIL $*"; fails=$((fails + 1)); }
expect_line() { # file line
  grep -qxF "$2" "$1" && ok "$(basename "$1"): $2" || { bad "$(basename "$1") lacks '$2'"; cat "$1"; }
}
no_artifacts() { # dir what
  if [ -e "$1/logits.npy" ] || [ -e "$1/report.json" ] || ls "$1"/.*.tmp >/dev/null 2>&1; then bad "$2: artifacts left in $1"; ls -la "$1"; else ok "$2: no artifacts"; fi
}
expect_fail() { # name needle cmd...
  local name=$1 needle=$2; shift 2
  "$@" > "$T/$name.out" 2> "$T/$name.err"; local rc=$?
  if [ $rc -eq 0 ]; then bad "$name: exit 0"; return; fi
  grep -q -- "$needle" "$T/$name.err" && ok "$name: exit $rc, '$needle'" || { bad "$name: stderr lacks '$needle'"; cat "$T/$name.err"; }
}

# --- the seed case on the full-size synthetic checkpoint ----------------------
"$BIN" gen-weights mitra --out "$T/full" --seed 0 > /dev/null || bad "gen-weights full"
"$BIN" run --model "$T/full" --device cpu --out "$T/run" > "$T/run.out" 2> "$T/run.err" || { bad "run full"; cat "$T/run.err"; }
for m in INPUT_DEVICE=cpu MODEL_DEVICE=cpu LOGITS_DEVICE=cpu OUTPUT_DEVICE=cpu CPU_FALLBACK=false LOGITS_SHAPE=1x8x10 \
         LOGITS_FINITE=true ASSETS_VERIFIED=true EXIT_CODE=0 OPS_OFF_DEVICE=0 H2D_COPIES=4 D2H_COPIES=1; do
  expect_line "$T/run.out" "$m"
done
for m in PREDICTED_CLASS INFERENCE_WALL_MS OPS_TOTAL; do
  grep -q "^$m=" "$T/run.out" && ok "marker $m" || bad "marker $m missing"
done
grep -qE '^PREDICTED_CLASS=([0-9],){7}[0-9]$' "$T/run.out" && ok "8 predicted classes" || bad "PREDICTED_CLASS format"
for f in support_x.npy support_y.npy query_x.npy logits.npy class_ids.npy report.json; do
  [ -s "$T/run/$f" ] && ok "artifact $f" || bad "artifact $f missing"
done
grep -qE '"ASSETS_VERIFIED":[[:space:]]*true' "$T/run/report.json" && grep -qE '"precision":[[:space:]]*"exact-fp32"' "$T/run/report.json" \
  && ok "report.json markers + precision" || bad "report.json content"
# provenance: report.json names each file the model was read from with its SHA-256 (sha256sum's)
python3 - "$T/run/report.json" "$T/full" <<'PY' && ok "report.json: model files and their SHA-256" || bad "report.json model_files"
import hashlib, json, os, sys
files = json.load(open(sys.argv[1]))["model_files"]
want = [os.path.join(sys.argv[2], n) for n in ("config.json", "model.safetensors")]
assert [f["path"] for f in files] == want, files
for f in files:
    assert f["sha256"] == hashlib.sha256(open(f["path"], "rb").read()).hexdigest(), f
PY
# the generated input is deterministic: a second run gives byte-identical files
"$BIN" run --model "$T/full" --out "$T/run2" > /dev/null 2>&1
for f in support_x.npy support_y.npy query_x.npy logits.npy; do
  cmp -s "$T/run/$f" "$T/run2/$f" && ok "deterministic $f" || bad "$f differs between runs"
done
# with explicit files, the same inputs give the same logits
"$BIN" run --model "$T/full" --out "$T/run3" --support-x "$T/run/support_x.npy" --support-y "$T/run/support_y.npy" \
  --query-x "$T/run/query_x.npy" > /dev/null 2>&1 && cmp -s "$T/run/logits.npy" "$T/run3/logits.npy" \
  && ok "inputs from files reproduce the logits" || bad "inputs from files"

# bounded memory: processing the stream 3 rows at a time is another code path
# (other GEMM shapes, so the BLAS may pick other kernels): the same logits
# within fp32 rounding (docs/numerics.md "Determinism"), not necessarily the same bytes
if "$BIN" run --model "$T/full" --out "$T/run4" --chunk-rows 3 > /dev/null 2>&1 &&
   python3 "$(dirname "$0")/npy-close.py" "$T/run4/logits.npy" "$T/run/logits.npy" > "$T/chunk.cmp"; then
  ok "--chunk-rows 3: $(cat "$T/chunk.cmp")"
else
  bad "--chunk-rows 3 changes the logits beyond rounding: $(cat "$T/chunk.cmp" 2>/dev/null)"
fi
# ... and it is itself deterministic: the same chunking twice gives the same bytes
"$BIN" run --model "$T/full" --out "$T/run5" --chunk-rows 3 > /dev/null 2>&1 && cmp -s "$T/run4/logits.npy" "$T/run5/logits.npy" \
  && ok "--chunk-rows 3 twice: identical bytes" || bad "--chunk-rows 3 is not repeatable"

# many queries: --query-chunk 3 streams the 8 queries 3 at a time against the
# support computed once (docs/architecture.md "Many test rows"): within rounding of the
# all-at-once forward, and report.json says so
if "$BIN" run --model "$T/full" --out "$T/run6" --query-chunk 3 > /dev/null 2>&1 &&
   python3 "$(dirname "$0")/npy-close.py" "$T/run6/logits.npy" "$T/run/logits.npy" > "$T/qchunk.cmp"; then
  ok "--query-chunk 3: $(cat "$T/qchunk.cmp")"
else
  bad "--query-chunk 3 changes the logits beyond rounding: $(cat "$T/qchunk.cmp" 2>/dev/null)"
fi
python3 - "$T/run6/report.json" "$T/run/report.json" <<'PY' && ok "report.json: 3 queries a pass, the support computed once" || bad "report.json queries"
import json, sys
q = json.load(open(sys.argv[1]))["queries"]
a = json.load(open(sys.argv[2]))["queries"]
assert q["query_chunk"] == 3 and q["support_passes"] == 1 and q["kv_cache_bytes"] > 0, q
assert a["query_chunk"] == 8 and a["support_passes"] == 1, a
PY

# --- trace ------------------------------------------------------------------------
"$BIN" gen-weights mitra --out "$T/small" --dim 32 --layers 2 --heads 4 --outputs 10 --seed 3 > /dev/null
"$BIN" run --model "$T/small" --out "$T/tr" --trace "$T/trace.json" > "$T/tr.out" 2>&1 || bad "run --trace"
if python3 - "$T/trace.json" "$T/tr.out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
markers = dict(l.strip().split("=", 1) for l in open(sys.argv[2]) if "=" in l)
ops, xs, tot = d["ops"], d["transfers"], d["totals"]
assert len(ops) == tot["ops"] == int(markers["OPS_TOTAL"]) > 0, "op count"
assert all(o["device"] == "cpu" and o["operands_on"] == "cpu" for o in ops), "op placement"
assert tot["ops_off_device"] == 0
assert all(o["ms"] is not None and o["ms"] >= 0 for o in ops), "timed trace"
h2d = [x for x in xs if x["direction"] == "h2d"]; d2h = [x for x in xs if x["direction"] == "d2h"]
assert [x["what"] for x in h2d] == ["weights", "x_support", "x_query", "y_support"], h2d
assert [x["what"] for x in d2h] == ["logits"], d2h
assert len(h2d) == int(markers["H2D_COPIES"]) and len(d2h) == int(markers["D2H_COPIES"])
print("trace ok:", len(ops), "ops")
PY
then ok "trace JSON: every op on cpu, transfers = weights + 3 inputs + logits"; else bad "trace JSON"; fi

# a trace inside --out (a new one) is a member of the set; other files there are carried over
"$BIN" run --model "$T/small" --out "$T/tr-in" --trace "$T/tr-in/trace.json" > /dev/null 2>&1 && \
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$T/tr-in/trace.json" && ok "--trace inside a new --out" || bad "--trace inside a new --out"
echo notes > "$T/tr-in/notes.txt"
"$BIN" run --model "$T/small" --out "$T/tr-in" --seed 7 > /dev/null 2>&1 && [ "$(cat "$T/tr-in/notes.txt")" = notes ] && [ -s "$T/tr-in/trace.json" ] \
  && grep -q '"seed":[[:space:]]*7' "$T/tr-in/report.json" && ! ls -A "$T" | grep -q '^\.tr-in\.nofall' \
  && ok "a new set over an old one keeps the other files (notes.txt, the earlier trace)" || bad "carry-over of other files in --out"

# --- bad input: clear message, non-zero exit, no artifacts ------------------------
cp -r "$T/small" "$T/trunc"
head -c 100000 "$T/small/model.safetensors" > "$T/trunc/model.safetensors"
expect_fail truncated "model.safetensors" "$BIN" run --model "$T/trunc" --out "$T/o-trunc"
no_artifacts "$T/o-trunc" truncated
cp -r "$T/small" "$T/lying"
printf '\xff\xff\xff\x00' | dd of="$T/lying/model.safetensors" bs=1 seek=0 conv=notrunc 2>/dev/null
expect_fail lying-header "header length" "$BIN" run --model "$T/lying" --out "$T/o-lying"
no_artifacts "$T/o-lying" lying-header
"$BIN" gen-weights mitra --out "$T/wrongcfg" --dim 32 --layers 3 --heads 4 --outputs 10 --seed 3 > /dev/null
cp "$T/small/config.json" "$T/wrongcfg/config.json"
expect_fail extra-keys "unexpected 'layers.2." "$BIN" run --model "$T/wrongcfg" --out "$T/o-cfg"
expect_fail unknown-device "unknown device 'tpu:0'" "$BIN" run --model "$T/small" --device tpu:0 --out "$T/o-dev"
no_artifacts "$T/o-dev" unknown-device
# a failed run over a previous result set leaves it exactly as it was (the
# set is replaced only by a complete, verified new one: docs/outputs.md "Output sets")
cp -r "$T/tr" "$T/o-stale"
expect_fail stale "unknown device" "$BIN" run --model "$T/small" --device tpu:0 --out "$T/o-stale"
if diff -r "$T/tr" "$T/o-stale" > /dev/null && ! ls -a "$T" | grep -q '^\.o-stale\.nofall'; then
  ok "failed run over an old output dir: previous results intact, no staging left"
else
  bad "failed run over an old output dir changed it"; ls -la "$T/o-stale"
fi
# NaN in the support set: float32 NaN written over the first value (data at byte 128)
cp "$T/tr/support_x.npy" "$T/nan_x.npy"
printf '\x00\x00\xc0\x7f' | dd of="$T/nan_x.npy" bs=1 seek=128 conv=notrunc 2>/dev/null
expect_fail nan-input "support_x\[0, 0\] is NaN" "$BIN" run --model "$T/small" --out "$T/o-nan" \
  --support-x "$T/nan_x.npy" --support-y "$T/tr/support_y.npy" --query-x "$T/tr/query_x.npy"
no_artifacts "$T/o-nan" nan-input
expect_fail shape-mismatch "features" "$BIN" run --model "$T/small" --out "$T/o-shape" \
  --support-x "$T/tr/support_x.npy" --support-y "$T/tr/support_y.npy" --query-x "$T/tr/support_y.npy"
# a label out of range for a 3-class model
"$BIN" gen-weights mitra --out "$T/c3" --dim 16 --layers 1 --heads 2 --outputs 3 --seed 1 > /dev/null
expect_fail label-range "out of range 0..2" "$BIN" run --model "$T/c3" --out "$T/o-label" \
  --support-x "$T/tr/support_x.npy" --support-y "$T/tr/support_y.npy" --query-x "$T/tr/query_x.npy"
no_artifacts "$T/o-label" label-range

# --- verify: thresholds, impossible thresholds, bisect ---------------------------
"$BIN" verify --model "$T/small" --device cpu --against cpu --seeds 42,100 --samples 2 --max-abs 1e-5 --mean-abs 1e-6 \
  --json "$T/verify.json" > "$T/verify.out" 2>&1 && expect_line "$T/verify.out" "RESULT=PASS" || { bad "verify cpu vs cpu"; cat "$T/verify.out"; }
expect_line "$T/verify.out" "VERIFY_CASES=6"
expect_line "$T/verify.out" "INPUTS_IDENTICAL=true"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['pass'] and len(d['cases'])==6" "$T/verify.json" \
  && ok "verify --json" || bad "verify --json"
FIX=$(dirname "$0")/fixtures/mitra/seed42
"$BIN" gen-weights mitra --out "$T/fx" --dim 64 --layers 2 --heads 4 --outputs 10 --seed 1 > /dev/null
"$BIN" verify --model "$T/fx" --device cpu --against "$FIX" --max-abs 1e-30 > "$T/imp.out" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -qx "RESULT=FAIL" "$T/imp.out" && ok "impossible threshold fails (exit $rc)" || { bad "impossible threshold"; cat "$T/imp.out"; }
"$BIN" gen-weights mitra --out "$T/pert" --dim 32 --layers 3 --heads 4 --outputs 10 --seed 3 \
  --perturb layers.1.attention2.v.weight:0.05 > /dev/null
"$BIN" gen-weights mitra --out "$T/orig" --dim 32 --layers 3 --heads 4 --outputs 10 --seed 3 > /dev/null
"$BIN" verify --model "$T/orig" --reference-model "$T/pert" --device cpu --against cpu --seeds 42 --bisect \
  --max-abs 1e-5 --mean-abs 1e-6 > "$T/bisect.out" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "first stage over threshold: layers.1.feature_attention " "$T/bisect.out" \
  && ok "bisect names layers.1.feature_attention" || { bad "bisect"; cat "$T/bisect.out"; }
"$BIN" gen-weights mitra --out "$T/pert0" --dim 32 --layers 3 --heads 4 --outputs 10 --seed 3 \
  --perturb layers.0.linear1.bias:0.05 > /dev/null
"$BIN" verify --model "$T/orig" --reference-model "$T/pert0" --device cpu --against cpu --seeds 42 --bisect \
  --max-abs 1e-5 --mean-abs 1e-6 > "$T/bisect0.out" 2>&1
grep -q "first stage over threshold: layers.0.mlp1 " "$T/bisect0.out" && ok "bisect names layers.0.mlp1" || { bad "bisect mlp1"; cat "$T/bisect0.out"; }

# --- bench: five statistics and GFLOP/s (figures, no thresholds) -------------------
"$BIN" bench --model "$T/small" --device cpu --warmup 1 --runs 3 --json "$T/bench.json" > "$T/bench.out" 2>&1 || bad "bench"
for k in MEDIAN_MS MEAN_MS P90_MS MIN_MS MAX_MS GFLOPS FLOP_PER_FORWARD; do
  grep -qE "^$k=[0-9.e+-]+$" "$T/bench.out" && ok "bench $k" || bad "bench $k"
done
grep -q "^PRECISION_DETAIL=exact fp32; compiled with -ffp-contract=off" "$T/bench.out" && ok "bench PRECISION_DETAIL" || bad "bench PRECISION_DETAIL"
# after the warm-up the forward reuses its workspace: no device allocation in the timed runs
grep -qx "DEVICE_ALLOCS_TIMED=0" "$T/bench.out" && ok "bench: no allocation in timed runs" || bad "bench DEVICE_ALLOCS_TIMED"
"$BIN" bench --model "$T/small" --device cpu --warmup 0 --runs 2 > "$T/bench0.out" 2>&1 || bad "bench --warmup 0"
grep -qE "^DEVICE_ALLOCS_TIMED=[1-9][0-9]*$" "$T/bench0.out" && ok "bench --warmup 0: the first timed run allocates" \
  || bad "bench --warmup 0 DEVICE_ALLOCS_TIMED"

# --- opencl: a missing platform and a kernel that fails to build ------------------
if "$BIN" devices | grep -q "^opencl: not compiled in"; then
  echo "skip opencl error paths: opencl backend not compiled in"
else
  OCL_ICD_VENDORS=/nonexistent expect_fail opencl-no-platform "no OpenCL platform found" \
    "$BIN" run --model "$T/small" --device opencl:0 --out "$T/o-ocl-none"
  no_artifacts "$T/o-ocl-none" opencl-no-platform
  expect_fail opencl-no-device "opencl:9: no such device" "$BIN" run --model "$T/small" --device opencl:9 --out "$T/o-ocl-9"
  no_artifacts "$T/o-ocl-9" opencl-no-device
  NOFALL_OPENCL_TEST_BREAK_BUILD=1 NOFALL_OPENCL_NO_CACHE=1 expect_fail opencl-build "kernel build failed (clBuildProgram" \
    "$BIN" run --model "$T/small" --device opencl:0 --out "$T/o-ocl-build"
  grep -q "CL_BUILD_PROGRAM_FAILURE" "$T/opencl-build.err" && grep -qi "error" "$T/opencl-build.err" \
    && ok "opencl-build: the message carries the build log" || bad "opencl-build: no build log"
  no_artifacts "$T/o-ocl-build" opencl-build
  expect_fail opencl-tf32 "tf32" "$BIN" run --model "$T/small" --device opencl:0 --precision tf32 --out "$T/o-ocl-tf32"
fi

# --- devices ------------------------------------------------------------------------
"$BIN" devices > "$T/devices.out" && grep -q "^cpu: compiled in" "$T/devices.out" && ok "devices" || bad "devices"
# the cpu line names the CPU, its SIMD and the GEMM library + kernel; so does report.json
grep -qE "^  cpu  host CPU .*\((AVX-512|AVX2\+FMA|AVX|SSE4\.1|no SIMD)\).*GEMM: oneDNN [0-9.]+ dnnl_sgemm, JIT kernels for [a-z0-9_]+" "$T/devices.out" \
  && ok "devices names the CPU and the GEMM kernel" || { bad "devices cpu line"; cat "$T/devices.out"; }
grep -q '"device_description":[[:space:]]*"host CPU .*GEMM: oneDNN' "$T/run/report.json" && ok "report.json names the GEMM" || bad "report.json GEMM"
# a GEMM held below the CPU's ISA is reported on stderr (forced here with
# oneDNN's own ISA cap; on an SSE4.1-only CPU there is nothing below to force)
if grep -qE "^  cpu  host CPU .*\((AVX-512|AVX2\+FMA|AVX)\)" "$T/devices.out"; then
  ONEDNN_MAX_CPU_ISA=SSE41 "$BIN" run --model "$T/small" --out "$T/o-isa" > /dev/null 2> "$T/isa.err"
  grep -q "^warning: cpu: the cpu GEMM runs SSE4.1 kernels" "$T/isa.err" && ok "GEMM below the CPU's ISA: warning on stderr" \
    || { bad "no warning for a GEMM below the CPU's ISA"; cat "$T/isa.err"; }
  grep -q "warning" "$T/tr.out" && bad "warning without a cap: $(grep warning "$T/tr.out")" || ok "no GEMM warning at full ISA"
fi

echo "cli.sh: $fails failure(s)"
[ $fails -eq 0 ]
