#!/usr/bin/env bash
# sptransformer-cli.sh BIN TMP -- SpTransformer on the command line while its
# forward is not implemented: gen-weights writes the official layout, a
# strict load runs, and `run` fails cleanly (exit != 0, the not-implemented
# message, no artifacts, no partial files) instead of pretending to work.
set -u
BIN=$1; T=$2
rm -rf "$T"; mkdir -p "$T"
fails=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
expect_fail() { # name needle cmd...
  local name=$1 needle=$2; shift 2
  "$@" > "$T/$name.out" 2> "$T/$name.err"; local rc=$?
  if [ $rc -eq 0 ]; then bad "$name: exit 0"; return; fi
  grep -q -- "$needle" "$T/$name.err" && ok "$name: exit $rc, '$needle'" || { bad "$name: stderr lacks '$needle'"; cat "$T/$name.err"; }
}
empty_dir() { # dir what
  if [ -n "$(ls -A "$1" 2>/dev/null)" ]; then bad "$2: files left in $1"; ls -la "$1"; else ok "$2: nothing written"; fi
}

"$BIN" gen-weights sptransformer --out "$T/m" --seed 0 > "$T/gen.out" 2>&1 || { bad "gen-weights sptransformer"; cat "$T/gen.out"; }
grep -q '"model_type":[[:space:]]*"sptransformer"' "$T/m/config.json" && ok "config.json model_type" || bad "config.json model_type"
for k in dim context_len tissue_num max_seq_len attn_depth; do
  grep -q "\"$k\":" "$T/m/config.json" && ok "config.json $k" || bad "config.json lacks $k"
done
[ "$(stat -c %s "$T/m/model.safetensors")" -gt 68355216 ] && ok "model.safetensors holds the 68,355,216-byte payload" || bad "model.safetensors size"
# the weights the committed fixtures were made with (tests/fixtures/sptransformer/*/case.json)
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/sptransformer"
want=$(sed -n 's/.*"model_safetensors_sha256": "\([0-9a-f]*\)".*/\1/p' "$FX/L8128/case.json")
got=$(sha256sum "$T/m/model.safetensors" | cut -d' ' -f1)
[ -n "$want" ] && [ "$want" = "$got" ] && ok "gen-weights --seed 0 = the fixtures' weights ($got)" || bad "gen-weights --seed 0: sha256 $got, fixtures want '$want'"
# the same seed gives the same bytes
"$BIN" gen-weights sptransformer --out "$T/m2" --seed 0 > /dev/null 2>&1
cmp -s "$T/m/model.safetensors" "$T/m2/model.safetensors" && ok "gen-weights is deterministic" || bad "gen-weights not deterministic"
rm -rf "$T/m2"

# run: loads (strictly), then says the forward is not there
mkdir -p "$T/run"
expect_fail run "SpTransformer forward not implemented yet" "$BIN" run --model "$T/m" --device cpu --out "$T/run"
grep -q "EXIT_CODE=0" "$T/run.out" && bad "run printed EXIT_CODE=0" || ok "run: no success marker"
grep -q "LOGITS_SHAPE" "$T/run.out" && bad "run printed LOGITS_SHAPE" || ok "run: no LOGITS_SHAPE"
empty_dir "$T/run" "run"
# a strict-load failure comes first and names the key
cp -r "$T/m" "$T/bad"
sed -i 's/"tissue_num":[[:space:]]*15/"tissue_num": 11/' "$T/bad/config.json"
mkdir -p "$T/run-bad"
expect_fail run-badcfg "'usage.weight' has shape \[15, 256, 1\] (expected \[11, 256, 1\])" "$BIN" run --model "$T/bad" --device cpu --out "$T/run-bad"
empty_dir "$T/run-bad" "run-badcfg"
rm -rf "$T/bad"
# gen-weights options
expect_fail gen-badopt "unknown option --heads" "$BIN" gen-weights sptransformer --out "$T/x" --heads 4
expect_fail gen-baddim "dim 30 must be a multiple of 4" "$BIN" gen-weights sptransformer --out "$T/x" --dim 30

if [ $fails -ne 0 ]; then echo "sptransformer-cli.sh: $fails failure(s)"; exit 1; fi
echo "sptransformer-cli.sh: all passed"
rm -rf "$T"
