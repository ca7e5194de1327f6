#!/usr/bin/env bash
# bf16.sh BIN FIXTURE_DIR TMP -- --precision bf16-autocast on cpu (docs/precision.md):
#   1. refused, naming the missing CPU feature, when oneDNN's bf16 kernels are
#      capped away (ONEDNN_MAX_CPU_ISA=AVX512_CORE) -- never a silent fp32 run;
#   2. where the CPU has them: Mitra's logits against upstream's own
#      torch.autocast("cpu", bfloat16) logits (expected_logits_bf16.npy, made by
#      reference/mitra_bf16_fixtures.py) within the mode's default bounds, the
#      logits bf16 values (the mode does run), report.json naming the mode, and
#      against the exact fp32 cpu backend within the mode's bounds for that;
#   3. TabSTAR (no upstream bf16 autocast) refuses the mode; SpTransformer against upstream's autocast
#      (L8001, L8201) on cpu, and a small SpTransformer on opencl:0 (or DEVICE) against cpu (exact fp32
#      and bf16);
#   4. opencl:0 (fp32 kernels with bf16 rounding): against upstream's autocast as in 2.
# With a 4th argument DEVICE (cuda:0 in the emulator build): the small SpTransformer of step 3 and step 4
# on that device only.
set -u
BIN=$1; FIX=$2; TMP=$3; ONLY=${4:-}
rm -rf "$TMP"; mkdir -p "$TMP"
fail=0
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1"; fail=1; }
cmd=$(sed -n 's/.*"gen_weights_command": "nofall \(.*\)".*/\1/p' "$FIX/seed42/case.json")
# shellcheck disable=SC2086
"$BIN" ${cmd/--out DIR/--out $TMP/m-seed42} >/dev/null || { echo "FAIL gen-weights"; exit 1; }
run_in() { "$BIN" run --model "$TMP/m-seed42" --support-x "$FIX/seed42/support_x.npy" --support-y "$FIX/seed42/support_y.npy" \
             --query-x "$FIX/seed42/query_x.npy" --out "$@"; }

# 1. the refusal (on any CPU: capped here, or lacking the feature)
if [ -n "$ONLY" ]; then :
elif ONEDNN_MAX_CPU_ISA=AVX512_CORE run_in "$TMP/capped" --precision bf16-autocast > "$TMP/capped.txt" 2>&1; then
  bad "capped ISA: the run succeeded"; cat "$TMP/capped.txt"
elif grep -q "bf16-autocast is not available: .*AVX512_BF16" "$TMP/capped.txt" && [ ! -e "$TMP/capped/logits.npy" ]; then
  ok "capped ISA refused: $(grep -o 'not available: .*' "$TMP/capped.txt" | cut -c1-90)..."
else
  bad "capped ISA: wrong refusal"; cat "$TMP/capped.txt"
fi

# 2. parity with upstream's autocast, where the CPU runs bf16
if [ -n "$ONLY" ]; then :
elif "$BIN" devices | grep -q "^  cpu  precision modes: exact, bf16-autocast"; then
  for name in seed42 regressor wide ties; do
    cmd=$(sed -n 's/.*"gen_weights_command": "nofall \(.*\)".*/\1/p' "$FIX/$name/case.json")
    # shellcheck disable=SC2086
    [ "$name" = seed42 ] || "$BIN" ${cmd/--out DIR/--out $TMP/m-$name} >/dev/null
    if "$BIN" verify --model "$TMP/m-$name" --device cpu --against "$FIX/$name" --precision bf16-autocast \
         > "$TMP/v-$name.txt" 2>&1 && grep -q "^PRECISION=bf16-autocast$" "$TMP/v-$name.txt"; then
      ok "$name vs upstream autocast: $(grep -E '^case ' "$TMP/v-$name.txt" | grep -o 'max_abs=[^ ]* mean_abs=[^ ]*'); $(grep -o 'max_abs<=[^ ]* mean_abs<=[^ ]*' "$TMP/v-$name.txt" | tail -1)"
    else
      bad "$name vs upstream autocast"; cat "$TMP/v-$name.txt"
    fi
  done
  # against the exact fp32 cpu backend: the whole bf16 error, within the mode's fp32 bounds
  if "$BIN" verify --model "$TMP/m-seed42" --device cpu --against cpu --precision bf16-autocast --seeds 42,111 \
       > "$TMP/v-cpu.txt" 2>&1; then
    ok "seed42 vs exact fp32 cpu: $(grep WORST_MAX_ABS "$TMP/v-cpu.txt")"
  else
    bad "seed42 vs exact fp32 cpu"; cat "$TMP/v-cpu.txt"
  fi
  if run_in "$TMP/b" --precision bf16-autocast > "$TMP/b.txt" 2>&1 &&
     grep -q '"precision":[[:space:]]*"bf16-autocast"' "$TMP/b/report.json" &&
     python3 - "$TMP/b/logits.npy" <<'PY'
import ast, struct, sys
d = open(sys.argv[1], "rb").read()
hl = struct.unpack("<H", d[8:10])[0]
h = ast.literal_eval(d[10:10 + hl].decode())
assert h["descr"] == "<f4", h
v = struct.unpack("<%dI" % ((len(d) - 10 - hl) // 4), d[10 + hl:])
assert v and all(x & 0xFFFF == 0 for x in v), "logits are not bf16 values"
assert any(x != 0 for x in v)
PY
  then ok "run --precision bf16-autocast: bf16 logits, report.json names the mode"
  else bad "run --precision bf16-autocast"; cat "$TMP/b.txt"; fi
else
  echo "SKIP parity: $("$BIN" devices | grep '^  cpu  precision modes')"
fi

# 3. refusal: another model
[ -n "$ONLY" ] || "$BIN" gen-weights tabstar --out "$TMP/tab" --seed 1 --layers 1 --vocab 2000 >/dev/null 2>&1 || true
if [ -f "$TMP/tab/config.json" ]; then
  if "$BIN" run --model "$TMP/tab" --precision bf16-autocast --out "$TMP/tabo" > "$TMP/tab.txt" 2>&1; then
    bad "tabstar ran in bf16-autocast"
  elif grep -q "bf16-autocast has no upstream counterpart for TabSTAR: upstream TabSTAR never runs under bf16" \
       "$TMP/tab.txt"; then ok "tabstar refused"
  else bad "tabstar: wrong refusal"; cat "$TMP/tab.txt"; fi
fi
#    SpTransformer: on cpu against upstream's autocast (L8001, the shortest case; L8201, 201 scored
#    positions, where splice classes differ in a few rows within the logit bounds: counted, not failures)
SFIX=$FIX/../sptransformer
[ -n "$ONLY" ] || "$BIN" gen-weights sptransformer --out "$TMP/spt" --seed 0 >/dev/null 2>&1 || true
if [ -f "$TMP/spt/config.json" ] && "$BIN" devices | grep -q "^  cpu  precision modes: exact, bf16-autocast"; then
  for c in L8001 L8201; do
    if "$BIN" verify --model "$TMP/spt" --device cpu --against "$SFIX/$c" --precision bf16-autocast \
         > "$TMP/spt-v.txt" 2>&1 && grep -q "^PRECISION=bf16-autocast$" "$TMP/spt-v.txt"; then
      ok "sptransformer $c vs upstream autocast: $(grep -E '^case ' "$TMP/spt-v.txt" | grep -o -E '(max_abs|mean_abs|splice_agree)=[^ ]*' | tr '\n' ' ')$(grep -o 'max_abs<=[^ ]* mean_abs<=[^ ]*' "$TMP/spt-v.txt" | tail -1)"
    else bad "sptransformer $c vs upstream autocast"; cat "$TMP/spt-v.txt"; fi
  done
fi
#    and on opencl:0 (kernels-bf16-spt.cl; or DEVICE: cuda-kernels-bf16.cu): a small model that runs
#    every rule (conv, batch norm, axial positions, local and sinkhorn heads with the sort net, the bf16
#    residual; the L8001 parity takes a minute on PoCL, docs/precision.md): within the mode's bounds
#    against the exact fp32 cpu backend,
#    within its bounds against upstream (4u, u) of the cpu's bf16 mode (both bf16: their probabilities),
#    and not an fp32 run (its outputs differ from the exact fp32 ones)
for SDEV in ${ONLY:-opencl:0}; do
if "$BIN" devices | grep -q "^  $SDEV " && "$BIN" devices | grep -q "^  cpu  precision modes: exact, bf16-autocast"; then
  "$BIN" gen-weights sptransformer --out "$TMP/spt-s" --seed 0 --dim 16 --depth 1 --context 64 --window 128 >/dev/null
  # OMP_NUM_THREADS=1: the cpu side of a small model, where a second thread only spins (seconds on a loaded machine)
  if OMP_NUM_THREADS=1 "$BIN" verify --model "$TMP/spt-s" --device "$SDEV" --against cpu --seeds 42 \
       --precision bf16-autocast > "$TMP/spt-s-v.txt" 2>&1 && grep -q "^PRECISION=bf16-autocast$" "$TMP/spt-s-v.txt"; then
    ok "sptransformer (small) $SDEV bf16 vs exact fp32 cpu: $(grep -E '^case ' "$TMP/spt-s-v.txt" | grep -o 'max_abs=[^ ]* mean_abs=[^ ]*'); $(grep -o 'max_abs<=[^ ]* mean_abs<=[^ ]*' "$TMP/spt-s-v.txt" | tail -1)"
  else bad "sptransformer (small) $SDEV bf16 vs exact fp32 cpu"; cat "$TMP/spt-s-v.txt"; fi
  seq=$(printf 'ACGTTGCAAGCTTCGATCGGATCCATGCATGCAAGGCCTTAGCTAGGCTAACGTACGATCGTAGCTAGTCGATCGAT%.0s' 1 2)
  for r in cpu:bf16-autocast "$SDEV:bf16-autocast" cpu:exact; do
    OMP_NUM_THREADS=1 "$BIN" run --model "$TMP/spt-s" --sequence "$seq" --device "${r%:*}" --precision "${r##*:}" \
      --out "$TMP/spt-s-${r//:/-}" > "$TMP/spt-s-run.txt" 2>&1 || { cat "$TMP/spt-s-run.txt"; break; }
  done
  if python3 - "$TMP/spt-s-cpu-bf16-autocast/tracks.tsv" "$TMP/spt-s-${SDEV//:/-}-bf16-autocast/tracks.tsv" \
       "$TMP/spt-s-cpu-exact/tracks.tsv" > "$TMP/spt-s-cmp.txt" 2>&1 <<'PY'
import sys
rd = lambda f: [float(x) for l in open(f).read().split("\n")[1:] if l for x in l.split("\t")[3:]]
cpu, ocl, ex = (rd(f) for f in sys.argv[1:4])
assert len(cpu) == len(ocl) == len(ex) > 1000, (len(cpu), len(ocl), len(ex))
d = [abs(a - b) for a, b in zip(cpu, ocl)]
u = 2.0 ** -8
print("max %.2e mean %.2e (bounds %.2e / %.2e); %d of %d differ from exact fp32's" % (
    max(d), sum(d) / len(d), 4 * u, u, sum(a != b for a, b in zip(ocl, ex)), len(ex)))
assert max(d) <= 4 * u and sum(d) / len(d) <= u
assert sum(a != b for a, b in zip(ocl, ex)) > len(ex) // 2, "the device's bf16 outputs are fp32 ones"
PY
  then ok "sptransformer (small) $SDEV bf16 vs cpu bf16: $(tail -1 "$TMP/spt-s-cmp.txt")"
  else bad "sptransformer (small) $SDEV bf16 vs cpu bf16"; cat "$TMP/spt-s-cmp.txt"; fi
fi
done
# 4. opencl:0 (or DEVICE): the mode (fp32 kernels with bf16 rounding on opencl), against upstream's
#    autocast within the same bounds (seed42: classifier; regressor: the Linear(1, D) label
#    embedding), and bf16 logits
for DEV in ${ONLY:-opencl:0}; do
if "$BIN" devices | grep -q "^  $DEV "; then
  for name in seed42 regressor; do
    cmd=$(sed -n 's/.*"gen_weights_command": "nofall \(.*\)".*/\1/p' "$FIX/$name/case.json")
    # shellcheck disable=SC2086
    [ -d "$TMP/m-$name" ] || "$BIN" ${cmd/--out DIR/--out $TMP/m-$name} >/dev/null
    if "$BIN" verify --model "$TMP/m-$name" --device $DEV --against "$FIX/$name" --precision bf16-autocast \
         > "$TMP/vo-${DEV%:*}-$name.txt" 2>&1 && grep -q "^PRECISION=bf16-autocast$" "$TMP/vo-${DEV%:*}-$name.txt"; then
      ok "$DEV $name vs upstream autocast: $(grep -E '^case ' "$TMP/vo-${DEV%:*}-$name.txt" | grep -o 'max_abs=[^ ]* mean_abs=[^ ]*'); $(grep -o 'max_abs<=[^ ]* mean_abs<=[^ ]*' "$TMP/vo-${DEV%:*}-$name.txt" | tail -1)"
    else
      bad "$DEV $name vs upstream autocast"; cat "$TMP/vo-${DEV%:*}-$name.txt"
    fi
  done
  if run_in "$TMP/ocl-${DEV%:*}" --device $DEV --precision bf16-autocast > "$TMP/ocl-${DEV%:*}.txt" 2>&1 &&
     grep -q '"precision":[[:space:]]*"bf16-autocast"' "$TMP/ocl-${DEV%:*}/report.json" &&
     python3 - "$TMP/ocl-${DEV%:*}/logits.npy" <<'PY'
import ast, struct, sys
d = open(sys.argv[1], "rb").read()
hl = struct.unpack("<H", d[8:10])[0]
h = ast.literal_eval(d[10:10 + hl].decode())
assert h["descr"] == "<f4", h
v = struct.unpack("<%dI" % ((len(d) - 10 - hl) // 4), d[10 + hl:])
assert v and all(x & 0xFFFF == 0 for x in v), "logits are not bf16 values"
assert any(x != 0 for x in v)
PY
  then ok "$DEV run --precision bf16-autocast: bf16 logits, report.json names the mode"
  else bad "$DEV run --precision bf16-autocast"; cat "$TMP/ocl-${DEV%:*}.txt"; fi
elif [ -n "$ONLY" ]; then
  bad "$DEV is not listed by nofall devices"
fi
done
exit $fail
