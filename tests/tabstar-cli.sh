#!/usr/bin/env bash
# tabstar-cli.sh BIN TMP -- TabSTAR on the command line: gen-weights writes
# the official layout (+ vocab.txt); `run --cells` gives upstream's logits
# (the committed fixture cls2) with its artifacts and markers; the seeded run;
# bad input is refused with a message, exit != 0, nothing written.
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
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/tabstar"

"$BIN" gen-weights tabstar --out "$T/m" --seed 11 --layers 2 --vocab 2000 > "$T/gen.out" 2>&1 || { bad "gen-weights tabstar"; cat "$T/gen.out"; }
grep -q '"model_type":[[:space:]]*"tabstar"' "$T/m/config.json" && ok "config.json model_type" || bad "config.json model_type"
[ "$(wc -l < "$T/m/vocab.txt")" -eq 2000 ] && ok "vocab.txt: 2000 lines" || bad "vocab.txt lines"
"$BIN" gen-weights tabstar --out "$T/m2" --seed 11 --layers 2 --vocab 2000 > /dev/null 2>&1
cmp -s "$T/m/model.safetensors" "$T/m2/model.safetensors" && ok "gen-weights is deterministic" || bad "gen-weights not deterministic"
rm -rf "$T/m2"

"$BIN" run --model "$T/m" --cells "$FX/cls2/cells.json" --out "$T/o1" > "$T/run1.out" 2>&1
grep -q '^EXIT_CODE=0' "$T/run1.out" && ok "run --cells" || { bad "run --cells"; cat "$T/run1.out"; }
for k in LOGITS_SHAPE=4x2 LOGITS_FINITE=true ASSETS_VERIFIED=true CPU_FALLBACK=false OPS_OFF_DEVICE=0; do
  grep -q "^$k" "$T/run1.out" && ok "marker $k" || bad "marker $k missing"
done
for f in logits.npy probabilities.npy class_ids.npy report.json; do
  [ -f "$T/o1/$f" ] && ok "artifact $f" || bad "artifact $f missing"
done
# the logits against upstream's (fixture cls2: the same seed/config)
od -An -tx1 -j128 "$FX/cls2/logits.npy" > /dev/null 2>&1
if command -v python3 > /dev/null && python3 -c 'import numpy' 2> /dev/null; then
  python3 - "$T/o1/logits.npy" "$FX/cls2/logits.npy" << 'PY' && ok "run logits = upstream's within 1e-4" || bad "run logits differ from upstream's"
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
print("max_abs", float(abs(a - b).max()))
sys.exit(0 if a.shape == b.shape and abs(a - b).max() <= 1e-4 else 1)
PY
fi
"$BIN" run --model "$T/m" --out "$T/o2" --seed 42 > "$T/run2.out" 2>&1
grep -q '^LOGITS_SHAPE=1x2' "$T/run2.out" && grep -q '^EXIT_CODE=0' "$T/run2.out" && ok "seeded run" || { bad "seeded run"; cat "$T/run2.out"; }
"$BIN" run --model "$T/m" --out "$T/o3" --seed 42 > /dev/null 2>&1
cmp -s "$T/o2/logits.npy" "$T/o3/logits.npy" && ok "seeded run is deterministic" || bad "seeded run not deterministic"

# --adapter: the fixture lora-cls3's PEFT adapter on its weights (seed 15)
"$BIN" gen-weights tabstar --out "$T/ml" --seed 15 --layers 2 --vocab 2000 > /dev/null 2>&1
"$BIN" run --model "$T/ml" --adapter "$FX/lora-cls3/adapter" --cells "$FX/lora-cls3/cells.json" --out "$T/o4" > "$T/run4.out" 2>&1
grep -q '^EXIT_CODE=0' "$T/run4.out" && grep -q '"adapter":.*26 modules, r 2' "$T/o4/report.json" && ok "run --adapter: report.json names the merge" || { bad "run --adapter"; cat "$T/run4.out"; }
expect_fail adapter-spt "adapter_config.json" "$BIN" run --model "$T/ml" --adapter "$T/m" --out "$T/bad0"
empty_dir "$T/bad0" "not an adapter directory"

# tokenize: upstream's ids (the fixture's token_ids.json, all its strings)
if command -v python3 > /dev/null; then
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); json.dump(d["strings"], open(sys.argv[2],"w"))' "$FX/cls2/token_ids.json" "$T/strings.json"
  "$BIN" tokenize --model "$T/m" --strings "$T/strings.json" --out "$T/tok" > "$T/tok.out" 2>&1
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))["ids"]; sys.exit(0 if a==b else 1)' "$T/tok/token_ids.json" "$FX/cls2/token_ids.json" \
    && ok "tokenize: ids identical to upstream's" || { bad "tokenize"; cat "$T/tok.out"; }
fi
printf '["fine", "bad \xff"]' > "$T/badstr.json"
expect_fail tokenize-utf8 "invalid UTF-8" "$BIN" tokenize --model "$T/m" --strings "$T/badstr.json" --out "$T/badtok"
empty_dir "$T/badtok" "tokenize, invalid UTF-8"
# U+0000 in a data string: dropped, as BERT's normaliser drops it (upstream tokenises
# such strings); an escaped backslash before "u0000" is text, kept
printf '%s' '["a\u0000b c", "ab c", "x \u0000 y", "x  y", "q\\u0000", "q"]' > "$T/nulstr.json"
"$BIN" tokenize --model "$T/m" --strings "$T/nulstr.json" --out "$T/nultok" > "$T/nultok.out" 2>&1
if command -v python3 > /dev/null; then
  python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); sys.exit(0 if i[0]==i[1] and i[2]==i[3] and i[4]!=i[5] else 1)' "$T/nultok/token_ids.json" \
    && ok "tokenize: U+0000 dropped from data strings as BERT drops it" || { bad "tokenize U+0000"; cat "$T/nultok.out"; }
fi

# verify against the fixture (its weights) and against cpu; the wrong weights fail (exit 3); bench
"$BIN" verify --model "$T/m" --device cpu --against "$FX/cls2" > "$T/v1.out" 2>&1
[ $? -eq 0 ] && grep -q '^RESULT=PASS' "$T/v1.out" && ok "verify --against the fixture" || { bad "verify fixture"; cat "$T/v1.out"; }
"$BIN" verify --model "$T/m" --device cpu --against cpu > "$T/v2.out" 2>&1
[ $? -eq 0 ] && grep -q '^RESULT=PASS' "$T/v2.out" && ok "verify --against cpu" || { bad "verify cpu"; cat "$T/v2.out"; }
"$BIN" verify --model "$T/m" --device cpu --against "$FX/cls5" > "$T/v3.out" 2>&1
[ $? -eq 3 ] && grep -q '^RESULT=FAIL' "$T/v3.out" && ok "verify: other weights fail (exit 3)" || { bad "verify mismatch"; cat "$T/v3.out"; }
"$BIN" bench --model "$T/m" --device cpu --warmup 0 --runs 1 > "$T/b.out" 2>&1
[ $? -eq 0 ] && grep -q '^MEDIAN_MS=' "$T/b.out" && grep -qx 'ROWS=1' "$T/b.out" && ok "bench (generic: the seeded row's facts)" || { bad "bench"; cat "$T/b.out"; }

# bad input: exit != 0, nothing written
printf '{"format":"nofall-tabstar-cells/1","task":"classification","n_target_tokens":2,"n_rows":1,"n_cells":3,"x_txt":[["a","b"]],"x_num":[[0,0,0]],"classes":["x","y"]}' > "$T/ragged.json"
expect_fail ragged "does not have n_cells" "$BIN" run --model "$T/m" --cells "$T/ragged.json" --out "$T/bad1"
empty_dir "$T/bad1" "ragged cells"
printf '{"format":"nofall-tabstar-cells/1","task":"regression","n_target_tokens":1,"n_rows":1,"n_cells":2,"x_txt":[["a","b \xff"]],"x_num":[[0,0]]}' > "$T/utf8.json"
expect_fail utf8 "invalid UTF-8" "$BIN" run --model "$T/m" --cells "$T/utf8.json" --out "$T/bad2"
empty_dir "$T/bad2" "invalid UTF-8"
printf '{"format":"nofall-tabstar-cells/1","task":"regression","n_target_tokens":1,"n_rows":1,"n_cells":2,"x_txt":[["a","b"]],"x_num":[[0,1e300]]}' > "$T/big.json"
expect_fail bignum "does not fit a float32" "$BIN" run --model "$T/m" --cells "$T/big.json" --out "$T/bad4"
empty_dir "$T/bad4" "x_num past float32"
cp -r "$T/m" "$T/mv"; rm "$T/mv/vocab.txt"
expect_fail novocab "vocab.txt" "$BIN" run --model "$T/mv" --out "$T/bad3"
empty_dir "$T/bad3" "no vocab.txt"
echo "$fails failures"
[ $fails -eq 0 ]
