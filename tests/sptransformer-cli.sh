#!/usr/bin/env bash
# sptransformer-cli.sh BIN TMP -- SpTransformer on the command line:
# gen-weights writes the official layout; `run` with every input form
# (seeded, --tokens, --sequence, --fasta [--region], --context pad|given)
# gives upstream's logits (the committed fixtures) and the same bytes for the
# same tokens whatever form they came in; its artifacts and markers; bad
# input is refused with a message naming the place, exit != 0, nothing written.
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
NPYC="$(cd "$(dirname "$0")" && pwd)/npy-close.py"
want=$(sed -n 's/.*"model_safetensors_sha256": "\([0-9a-f]*\)".*/\1/p' "$FX/L8128/case.json")
got=$(sha256sum "$T/m/model.safetensors" | cut -d' ' -f1)
[ -n "$want" ] && [ "$want" = "$got" ] && ok "gen-weights --seed 0 = the fixtures' weights ($got)" || bad "gen-weights --seed 0: sha256 $got, fixtures want '$want'"
# the same seed gives the same bytes
"$BIN" gen-weights sptransformer --out "$T/m2" --seed 0 > /dev/null 2>&1
cmp -s "$T/m/model.safetensors" "$T/m2/model.safetensors" && ok "gen-weights is deterministic" || bad "gen-weights not deterministic"
rm -rf "$T/m2"

# run, seeded: the seeds' delivery case = fixture L8128
run() { # name args... : a run into $T/<name>
  local name=$1; shift
  "$BIN" run --model "$T/m" --device cpu --out "$T/$name" "$@" > "$T/$name.out" 2> "$T/$name.err"
}
run seed --seed 20240816 --length 128 && ok "run seeded: exit 0" || { bad "run seeded"; cat "$T/seed.err"; }
for mk in LOGITS_SHAPE=1x128x18 CPU_FALLBACK=false OUTPUT_DEVICE=cpu ASSETS_VERIFIED=true EXIT_CODE=0 H2D_COPIES=2 D2H_COPIES=1; do
  grep -qx "$mk" "$T/seed.out" && ok "seeded: $mk" || { bad "seeded: no $mk"; cat "$T/seed.out"; }
done
grep -q '^PREDICTED_CLASS=no_splice:[0-9]*,acceptor:[0-9]*,donor:[0-9]*$' "$T/seed.out" && ok "seeded: PREDICTED_CLASS counts" || bad "seeded: PREDICTED_CLASS"
for f in tokens.npy position_logits.npy class_ids.npy probabilities.npy encoding_metadata.json report.json; do
  [ -s "$T/seed/$f" ] && ok "seeded: $f" || bad "seeded: no $f"
done
python3 "$NPYC" "$T/seed/position_logits.npy" "$FX/L8128/expected_logits.npy" --max-abs 1e-4 --mean-abs 1e-5 > "$T/seed.cmp" \
  && ok "seeded = upstream L8128 ($(cat "$T/seed.cmp"))" || { bad "seeded vs upstream"; cat "$T/seed.cmp"; }
python3 - "$T/seed/tokens.npy" "$FX/L8128/tokens.npy" <<'PY' && ok "tokens.npy = the fixture's ids" || bad "tokens.npy differs from the fixture"
import sys
def body(p):
    d = open(p, "rb").read(); return d[-8128:]
sys.exit(0 if body(sys.argv[1]) == body(sys.argv[2]) else 1)
PY
grep -q '"flank_mode":[[:space:]]*"pad"' "$T/seed/encoding_metadata.json" && grep -q '"output_offset":[[:space:]]*4000' "$T/seed/encoding_metadata.json" \
  && ok "encoding_metadata: pad, offset 4000" || bad "encoding_metadata"
# the same 128 nt as --sequence (lower case, U for T) and as FASTA (whole and --region): the same bytes
SEQ=$(python3 -c "import sys; d=open(sys.argv[1],'rb').read()[-8128:][4000:4128]; print(''.join('acgu'[b] if i%3==0 else 'ACGT'[b] for i,b in enumerate(d)))" "$FX/L8128/tokens.npy")
run seqin --sequence "$SEQ" && cmp -s "$T/seqin/position_logits.npy" "$T/seed/position_logits.npy" \
  && ok "--sequence (lower case, U): byte-identical to seeded" || { bad "--sequence"; cat "$T/seqin.err"; }
{ printf '>other\nACGT\n>chr7 test\n'; printf '%s' "NNNNNNNNNN${SEQ}NNNNN" | fold -w 70; echo; } > "$T/in.fa"
run fa --fasta "$T/in.fa" --region chr7:11-138 --context pad && cmp -s "$T/fa/position_logits.npy" "$T/seed/position_logits.npy" \
  && ok "--fasta --region --context pad: byte-identical to seeded" || { bad "--fasta --region"; cat "$T/fa.err"; }
# --tokens: a fixture's ids, flanks given (the default for files)
run tok --tokens "$FX/L8201/tokens.npy" && grep -qx LOGITS_SHAPE=1x201x18 "$T/tok.out" \
  && python3 "$NPYC" "$T/tok/position_logits.npy" "$FX/L8201/expected_logits.npy" --max-abs 1e-4 --mean-abs 1e-5 > "$T/tok.cmp" \
  && ok "--tokens L8201 = upstream ($(cat "$T/tok.cmp"))" || { bad "--tokens L8201"; cat "$T/tok.err" "$T/tok.cmp" 2>/dev/null; }
grep -q '"flank_mode":[[:space:]]*"given"' "$T/tok/encoding_metadata.json" && ok "--tokens: context given" || bad "--tokens: flank mode"
# bad input: named, exit != 0, nothing written
mkdir -p "$T/none"
expect_fail bad-letter "position 3 is 'R'" "$BIN" run --model "$T/m" --out "$T/none" --sequence ACRT
expect_fail bad-given "taken as already flanked (--context given" "$BIN" run --model "$T/m" --out "$T/none" --sequence ACGT --context given
printf '>r\nACGTNNXA\n' > "$T/bad.fa"
expect_fail bad-fasta "r position 7 is 'X'" "$BIN" run --model "$T/m" --out "$T/none" --fasta "$T/bad.fa" --context pad
expect_fail bad-region "region 'chrZ:1-5' is not in the file" "$BIN" run --model "$T/m" --out "$T/none" --fasta "$T/in.fa" --region chrZ:1-5
expect_fail ragged-fasta "one forward takes sequences of one length" "$BIN" run --model "$T/m" --out "$T/none" --fasta "$T/in.fa" --context pad
python3 - "$T/bad-tok.npy" <<'PY'
import sys
hdr = "{'descr': '|i1', 'fortran_order': False, 'shape': (8001,), }"
hdr += " " * (63 - len(hdr) % 64) + "\n"
body = bytes([4] * 4000 + [7] + [4] * 4000)
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode() + body)
PY
expect_fail bad-token "token \[0, 4000\] is 7" "$BIN" run --model "$T/m" --out "$T/none" --tokens "$T/bad-tok.npy"
expect_fail too-long "length 16201 is not in \[8001, 16192\]" "$BIN" run --model "$T/m" --out "$T/none" --length 8201
expect_fail two-inputs "give one of --tokens, --sequence, --fasta" "$BIN" run --model "$T/m" --out "$T/none" --sequence ACGT --tokens "$T/bad-tok.npy"
expect_fail region-alone "--region goes with --fasta" "$BIN" run --model "$T/m" --out "$T/none" --region chr1:1-4
expect_fail mitra-flag "unknown option --support-x" "$BIN" run --model "$T/m" --out "$T/none" --support-x x.npy
empty_dir "$T/none" "refused runs"
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
