#!/usr/bin/env bash
# hostile-paths.sh BIN TMP FIXTURES -- path collisions (issue #27): an output
# (a trace, annotate's report, an output set's artifact or lock) named as one
# of the files a command reads -- a model's vocab.txt, an adapter's config, the
# config.json beside a .ckpt, a FASTA's .fai, a GTF, an input stored inside
# --out -- is refused before any work (src/io/path-guard.c). Every case:
# exit non-zero (not a signal), a message naming both files, every input
# byte for byte as it was, no new file or directory left anywhere under TMP.
set -u
BIN=$1; T=$2; FX=$3
rm -rf "$T"; mkdir -p "$T"
fails=0; cases=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
tree() { (cd "$T" && find . | LC_ALL=C sort && find . -type f -exec sha256sum {} + | LC_ALL=C sort); }

# pc NAME NEEDLE CMD...: the case refused, naming NEEDLE, with TMP unchanged
pc() {
  local name=$1 needle=$2; shift 2
  cases=$((cases + 1))
  local before; before=$(tree)
  timeout 60 "$@" > "$T.$name.out" 2> "$T.$name.err"; local rc=$?
  local why=""
  if [ $rc -eq 0 ]; then why="exit 0"
  elif [ $rc -ge 124 ]; then why="killed or hung (exit $rc)"
  elif ! grep -qF -- "is a file this command reads" "$T.$name.err"; then why="not refused as an input"
  elif ! grep -qF -- "$needle" "$T.$name.err"; then why="stderr lacks '$needle'"
  elif [ "$(tree)" != "$before" ]; then why="files under $T changed: $(diff <(echo "$before") <(tree) | head -3 | tr '\n' ' ')"
  fi
  if [ -z "$why" ]; then ok "$name: exit $rc"; else bad "$name: $why"; sed 's/^/    /' "$T.$name.err" | head -4; fi
  rm -f "$T.$name.out" "$T.$name.err"
}

"$BIN" gen-weights tabstar --out "$T/tab" --layers 1 --seed 3 > /dev/null || { echo "gen-weights tabstar failed"; exit 1; }
"$BIN" gen-weights sptransformer --out "$T/spt" --dim 16 --depth 1 --context 50 --window 64 --seed 1 --format ckpt \
  > /dev/null || { echo "gen-weights sptransformer failed"; exit 1; }
"$BIN" gen-weights mitra --out "$T/mitra" --dim 16 --layers 1 --heads 2 --seed 1 > /dev/null || { echo "gen-weights mitra failed"; exit 1; }
mkdir -p "$T/ad" "$T/fa" "$T/ann" "$T/pred" "$T/tok"
cp "$FX/tabstar/lora-cls3/adapter/"* "$T/ad/"
printf '>c1\nACGTACGTACGTACGTACGTACGTACGTACGTACGTACGTACGTACGTACGTACGTACGT\n' > "$T/fa/in.fa"
"$BIN" run --model "$T/spt" --fasta "$T/fa/in.fa" --context pad --out "$T/fa/first" > /dev/null 2>&1 &&
  [ -s "$T/fa/in.fa.fai" ] || { echo "a first FASTA run (it writes the .fai) failed"; exit 1; }
rm -rf "$T/fa/first"
cp "$FX/annotate/genome.fa" "$FX/annotate/input.vcf" "$T/ann/"
cp "$FX/annotate/genes.gtf" "$T/ann/out.vcf.report.json" # a GTF whose name is annotate's report for --out out.vcf
printf 'a,b,y\n1,2,x\n3,4,z\n5,6,x\n7,8,z\n' > "$T/pred/train.csv"
mkdir -p "$T/pred/res"
cp "$T/pred/train.csv" "$T/pred/res/predictions.csv" # an input stored in --out under an artifact's name
cp "$T/pred/train.csv" "$T/pred/.res2.nofall.lock"   # an input named as the lock of --out res2
mkdir -p "$T/tok/res" # int8 tokens (1, 164), written as numpy.save writes them
python3 -c '
import sys
h = "{\"descr\": \"|i1\", \"fortran_order\": False, \"shape\": (1, 164), }".replace("\"", chr(39))
h += " " * (127 - 10 - len(h)) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() + bytes(164))
' "$T/tok/res/tokens.npy" || { echo "writing tokens.npy failed"; exit 1; }

pc trace-vocab "--model $T/tab/vocab.txt" "$BIN" run --model "$T/tab" --out "$T/o1" --trace "$T/tab/vocab.txt"
pc trace-adapter "--adapter $T/ad/adapter_config.json" \
  "$BIN" run --model "$T/tab" --adapter "$T/ad" --out "$T/o2" --trace "$T/ad/adapter_config.json"
pc trace-ckpt-config "$T/spt/config.json" \
  "$BIN" run --model "$T/spt/SpTransformer_pytorch.ckpt" --length 60 --out "$T/o3" --trace "$T/spt/config.json"
pc trace-fai "--fasta $T/fa/in.fa.fai" \
  "$BIN" run --model "$T/spt" --fasta "$T/fa/in.fa" --context pad --out "$T/o4" --trace "$T/fa/in.fa.fai"
pc annotate-report-gtf "--genes $T/ann/out.vcf.report.json" \
  "$BIN" annotate --model "$T/spt" --vcf "$T/ann/input.vcf" --fasta "$T/ann/genome.fa" \
  --genes "$T/ann/out.vcf.report.json" --out "$T/ann/out.vcf"
pc predict-artifact-input "--out (its predictions.csv)" \
  "$BIN" predict --model "$T/mitra" --train "$T/pred/res/predictions.csv" --test "$T/pred/train.csv" --target y \
  --out "$T/pred/res"
pc predict-lock-input "--out (its lock file)" \
  "$BIN" predict --model "$T/mitra" --train "$T/pred/.res2.nofall.lock" --test "$T/pred/train.csv" --target y \
  --out "$T/pred/res2"
pc verify-json-ckpt-config "$T/spt/config.json" \
  "$BIN" verify --model "$T/spt/SpTransformer_pytorch.ckpt" --device cpu --against cpu --json "$T/spt/config.json"
pc run-tokens-artifact "--out (its tokens.npy)" \
  "$BIN" run --model "$T/spt" --tokens "$T/tok/res/tokens.npy" --context pad --out "$T/tok/res"

echo "hostile-paths.sh: $cases cases, $fails failure(s)"
[ $cases -ge 8 ] || { echo "hostile-paths.sh: fewer than 8 cases"; fails=$((fails + 1)); }
[ $fails -eq 0 ]
