#!/usr/bin/env bash
# ckpt-cli.sh -- `nofall convert`: a torch.save .ckpt to DIR/model.safetensors;
# refused checkpoints (a pickle naming os.system / eval, a whole nn.Module)
# exit non-zero and leave no output behind; `gen-weights --format ckpt`
# writes a .ckpt that converts back to its model.safetensors byte for byte.
# usage: ckpt-cli.sh NOFALL TEST_CKPT_TMP FIXTURE_DIR WORK_DIR TEST_CKPT_FILES_TMP
set -u
NF=$1; GEN=$2; FIX=$3; W=$4; GENF=$5
rm -rf "$W"; mkdir -p "$W"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# a genuine torch.save file -> safetensors, with the note about config.json
out=$("$NF" convert --model "$FIX/bn_wrapped.ckpt" --out "$W/bn" 2>&1) || fail "convert bn_wrapped: $out"
[ -f "$W/bn/model.safetensors" ] || fail "no model.safetensors"
[ -e "$W/bn/model.safetensors.tmp" ] && fail "a temp file was left"
echo "$out" | grep -q "9 tensors" || fail "tensor count not reported: $out"
echo "$out" | grep -q "config.json" || fail "no note about config.json: $out"
[ -e "$W/bn/config.json" ] && fail "config.json written without --config"
# byte-identical to what the library's nf__ckpt_to_safetensors wrote for the same file (test-ckpt.c
# checked that one tensor by tensor against torch.load)
cmp -s "$W/bn/model.safetensors" "$GENF/bn.safetensors" || fail "convert differs from nf__ckpt_to_safetensors"

# --config FILE is parsed and copied
echo '{"model_type": "test", "dim": 8}' > "$W/cfg.json"
"$NF" convert --model "$GEN/good.ckpt" --out "$W/good" --config "$W/cfg.json" > "$W/good.log" 2>&1 || fail "convert good.ckpt: $(cat "$W/good.log")"
grep -q '"dim"' "$W/good/config.json" 2>/dev/null || fail "config.json not copied"
echo 'not json' > "$W/bad.json"
"$NF" convert --model "$GEN/good.ckpt" --out "$W/badcfg" --config "$W/bad.json" > /dev/null 2>&1 && fail "a non-JSON --config was accepted"
[ -e "$W/badcfg" ] && fail "output written despite a bad --config"

# refused: exit != 0, the reason on stderr, nothing written
for f in "$GEN/evil-os-system.ckpt:global 'os.system' is not allowed" \
         "$GEN/evil-eval.ckpt:global '__builtin__.eval' is not allowed" \
         "$FIX/module.ckpt:global 'torch.nn.modules.linear.Linear' is not allowed" \
         "$FIX/noncontig.ckpt:is not contiguous" \
         "$FIX/legacy.ckpt:legacy"; do
  file=${f%%:*}; msg=${f#*:}
  d="$W/refused-$(basename "$file" .ckpt)"
  err=$("$NF" convert --model "$file" --out "$d" 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] || fail "$file: exit 0"
  echo "$err" | grep -qF "$msg" || fail "$file: stderr lacks \"$msg\": $err"
  [ -e "$d" ] && fail "$file: output directory created"
done
[ -e pwned ] && fail "something ran"

# gen-weights --format ckpt: DIR/SpTransformer_pytorch.ckpt beside model.safetensors; converted
# back, the same model.safetensors byte for byte
out=$("$NF" gen-weights sptransformer --out "$W/gen" --seed 4 --dim 8 --depth 1 --context 10 --window 64 --format ckpt 2>&1) \
  || fail "gen-weights --format ckpt: $out"
echo "$out" | grep -q "SpTransformer_pytorch.ckpt" || fail "gen-weights does not name the .ckpt: $out"
[ -f "$W/gen/SpTransformer_pytorch.ckpt" ] && [ -f "$W/gen/model.safetensors" ] && [ -f "$W/gen/config.json" ] \
  || fail "gen-weights --format ckpt: files missing: $(ls "$W/gen")"
ls -a "$W/gen" | grep -q "tmp" && fail "gen-weights left a temporary file: $(ls -a "$W/gen")"
"$NF" convert --model "$W/gen/SpTransformer_pytorch.ckpt" --out "$W/gen-back" > /dev/null 2>&1 || fail "convert the generated .ckpt"
cmp -s "$W/gen/model.safetensors" "$W/gen-back/model.safetensors" || fail "the generated .ckpt converts to other bytes than model.safetensors"
"$NF" gen-weights sptransformer --out "$W/gen2" --seed 4 --dim 8 --depth 1 --context 10 --window 64 --format ckpt > /dev/null 2>&1
cmp -s "$W/gen/SpTransformer_pytorch.ckpt" "$W/gen2/SpTransformer_pytorch.ckpt" || fail "the generated .ckpt is not deterministic"
"$NF" gen-weights sptransformer --out "$W/gen3" --format zip > /dev/null 2>&1; [ $? -eq 2 ] || fail "--format zip: exit != 2"
"$NF" gen-weights mitra --out "$W/gen3" --format ckpt > /dev/null 2>&1; [ $? -eq 2 ] || fail "mitra --format ckpt: exit != 2"
[ -e "$W/gen3" ] && fail "a refused gen-weights wrote $W/gen3"

# DIR is an output set: a failure leaves it as it was (no model.safetensors without its
# config.json), stdout that cannot be written fails the run before anything is replaced
mkdir -p "$W/cfgdir/config.json"
"$NF" convert --model "$GEN/good.ckpt" --out "$W/cfgdir" --config "$W/cfg.json" > /dev/null 2>&1 && fail "convert into a DIR whose config.json is a directory: exit 0"
[ -e "$W/cfgdir/model.safetensors" ] && fail "a failed convert left $W/cfgdir/model.safetensors"
[ "$(ls -A "$W/cfgdir")" = "config.json" ] || fail "a failed convert left files in $W/cfgdir: $(ls -A "$W/cfgdir")"
"$NF" convert --model "$GEN/good.ckpt" --out "$W/nostdout" >&- 2>/dev/null && fail "convert with stdout closed: exit 0"
[ -e "$W/nostdout" ] && fail "convert with stdout closed created $W/nostdout"
before=$(cd "$W/good" && ls -A && cat ./*)
"$NF" convert --model "$GEN/good.ckpt" --out "$W/good" --config "$W/bn/model.safetensors" > /dev/null 2>&1 && fail "convert with a --config that is not JSON: exit 0"
"$NF" convert --model "$GEN/good.ckpt" --out "$W/good" > /dev/full 2>/dev/null && fail "convert with stdout full: exit 0"
[ "$(cd "$W/good" && ls -A && cat ./*)" = "$before" ] || fail "a failed convert changed $W/good"
ls -A "$W" | grep -q 'nofall' && fail "a convert left a staging directory or lock in $W: $(ls -A "$W" | grep nofall)"

# usage errors
"$NF" convert --model "$GEN/good.ckpt" > /dev/null 2>&1; [ $? -eq 2 ] || fail "missing --out: exit != 2"
"$NF" convert --model "$GEN/good.ckpt" --out "$W/x" --bogus 1 > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option: exit != 2"

[ $fails -eq 0 ] && echo "ckpt-cli: all checks passed" || echo "ckpt-cli: $fails check(s) failed"
exit $((fails != 0))
