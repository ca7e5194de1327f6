#!/usr/bin/env bash
# plots.sh BIN TMP [PNG_DIR] -- nofall's pictures (docs/plots.md) with small
# models: run --plot (SpTransformer splice tracks along a --fasta --region),
# annotate --plot-variant/--plot (ref vs alt around one SNV), verify --plot
# (error per case against the bound, and per stage with --bisect=always),
# each checked by tests/plot-check.py (XML, the marks and labels; rendered by
# headless chromium when it is installed: not blank, the tracks' colours);
# the same input twice gives the same bytes; the picture does not change the
# run's own outputs; bench --trace-format chrome: trace events, one per op
# of the nofall trace's ops. PNG_DIR (optional): the screenshots kept there.
set -u
BIN=$(readlink -f "$1"); T=$2; KEEP=${3:-}
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK=(python3 "$HERE/plot-check.py")
rm -rf "$T"; mkdir -p "$T"
cp "$HERE"/fixtures/annotate/genome.fa "$HERE"/fixtures/annotate/genes.gtf "$T/"
cd "$T" || exit 1
fails=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { "${CHECK[@]}" "$1" "$2" $KEEP || bad "plot-check $1 $2"; }

# small models: SpTransformer at context 400 in a 1024-row window; Mitra dim 32, 2 layers (+ a perturbed copy)
"$BIN" gen-weights sptransformer --out spt --seed 0 --dim 16 --depth 1 --context 400 --window 1024 > gen.out 2>&1 || { bad "gen-weights sptransformer"; cat gen.out; }
"$BIN" gen-weights mitra --out mm --seed 0 --dim 32 --layers 2 > gen.out 2>&1 || bad "gen-weights mitra"
"$BIN" gen-weights mitra --out mp --seed 0 --dim 32 --layers 2 --perturb layers.1.attention1.o.bias:0.003 > gen.out 2>&1 || bad "gen-weights mitra --perturb"

# 1. run --plot: the tracks along the region, genomic positions on the x axis
RUN=(run --model spt --fasta genome.fa --region chr1:5001-5201 --context pad)
"$BIN" "${RUN[@]}" --out o1 --plot run.svg > run.out 2>&1 || { bad "run --plot: exit $?"; cat run.out; }
"$BIN" "${RUN[@]}" --out o2 --plot run2.svg > /dev/null 2>&1 || bad "run --plot (again)"
"$BIN" "${RUN[@]}" --out o3 > /dev/null 2>&1 || bad "run without --plot"
check run.svg run
cmp -s run.svg run2.svg && ok "run --plot: the same input, the same bytes" || bad "run --plot: not deterministic"
grep -q 'chr1 position (1-based)' run.svg && grep -q '>5100<' run.svg && ok "run --plot: x axis in chr1 positions" || bad "run --plot: x axis"
for f in position_logits.npy probabilities.npy tokens.npy; do
  cmp -s o1/$f o3/$f || bad "run --plot changed $f"
done
ok "run --plot: the output set is the one without it"
"$BIN" "${RUN[@]}" --out o2 --plot run2.svg > /dev/null 2>&1 && cmp -s run.svg run2.svg && ok "run --plot: an existing picture replaced" || bad "run --plot over an existing picture"
# a region longer than the model's window (1,024): tiled, the picture drawn from the tiles' rows (tracks.tsv)
"$BIN" run --model spt --fasta genome.fa --region chr1:5001-6600 --context pad --out ot --plot tiled.svg > t.out 2>&1 \
  && [ -s tiled.svg ] && grep -q '"tiles_each":.2,' ot/report.json || bad "run --plot on a tiled region: $(tail -2 t.out)"
check tiled.svg run
grep -q 'chr1 position (1-based)' tiled.svg && grep -q '>6400<' tiled.svg && ok "run --plot on a tiled region: drawn, x axis in chr1 positions" || bad "tiled run --plot: x axis"
cp genome.fa g2.fa
"$BIN" run --model spt --fasta g2.fa --region chr1:5001-5201 --context pad --out o5 --plot g2.fa > x.out 2>&1 && bad "run --plot INPUT accepted" || {
  cmp -s g2.fa genome.fa && grep -q 'a file this command reads' x.out && ok "run --plot on an input: refused, the input intact" || bad "run --plot INPUT: $(cat x.out)"; }
"$BIN" run --model mm --out o4 --plot x.svg > x.out 2>&1 && bad "run --plot on Mitra: accepted" || ok "run --plot on Mitra: refused ($(head -1 x.out))"

# 2. annotate --plot-variant: one record, ref vs alt around it
printf '##fileformat=VCFv4.2\n##contig=<ID=chr1>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\nchr1\t6000\trs1\tT\tA\t.\t.\t.\n' > one.vcf
ANN=(annotate --model spt --vcf one.vcf --fasta genome.fa --genes genes.gtf --quiet)
NOFALL_TEST_PLOT_SOURCE=1 "$BIN" "${ANN[@]}" --out a.vcf --plot-variant chr1:6000:T:A --plot variant.svg > ann.out 2>&1 || { bad "annotate --plot: exit $?"; cat ann.out; }
check variant.svg variant
grep -q 'chr1:6000 T&gt;A, + strand' variant.svg && ok "annotate --plot: the variant and its strand in the title" || bad "annotate --plot: title"
"$BIN" "${ANN[@]}" --out b.vcf > /dev/null 2>&1 || bad "annotate without --plot"
cmp -s a.vcf b.vcf && ok "annotate --plot: the VCF is the one without it" || bad "annotate --plot changed the VCF"
# the variant in the VCF: its tracks taken from the run's own forward; not in it (a VCF of no record): one
# forward of its own; the same picture, byte for byte
grep -v '^chr1' one.vcf > none.vcf
NOFALL_TEST_PLOT_SOURCE=1 "$BIN" "${ANN[@]/one.vcf/none.vcf}" --out n.vcf --plot-variant chr1:6000:T:A --plot alone.svg > alone.out 2>&1 || { bad "annotate --plot, no record: exit $?"; cat alone.out; }
grep -q 'test hook: --plot tracks from the run.s forward' ann.out && grep -q 'test hook: --plot tracks computed alone' alone.out &&
  cmp -s variant.svg alone.svg && ok "annotate --plot: the tracks from the run's forward (no second forward), the picture computed alone byte for byte" ||
  { bad "annotate --plot: run's tracks vs alone"; cat ann.out alone.out; }
"$BIN" "${ANN[@]}" --out c.vcf --plot-variant chr1:6000:T > bad.out 2>&1; rc=$?
[ $rc = 2 ] && ok "annotate --plot-variant without --plot: usage error" || bad "--plot-variant alone: exit $rc"
"$BIN" "${ANN[@]}" --out c.vcf --plot-variant chr1:6000:TT:A --plot c.svg > bad.out 2>&1 && bad "a bad --plot-variant accepted" || {
  grep -q 'CHR:POS:REF:ALT' bad.out && [ ! -e c.vcf ] && [ ! -e c.svg ] && ok "a bad --plot-variant: refused before any scoring ($(head -1 bad.out))" || bad "bad --plot-variant: $(cat bad.out)"; }

# 3. verify --plot: per case against the bound; per stage with --bisect=always
"$BIN" verify --model mm --reference-model mp --device cpu --against cpu --seeds 42,100 --plot verify.svg > v.out 2>&1 || { bad "verify --plot: exit $?"; cat v.out; }
check verify.svg verify
"$BIN" verify --model mm --reference-model mp --device cpu --against cpu --seeds 42,100 --bisect=always \
  --plot verify-stages.svg --json v.json > v.out 2>&1 || { bad "verify --bisect=always --plot: exit $?"; cat v.out; }
check verify-stages.svg verify-stages
python3 - v.json verify-stages.svg <<'EOF' && ok "verify --plot: a bar per stage, red exactly where the stage's error is over the bound" || bad "verify stage bars"
import json, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1])); bound = d["max_abs_threshold"]
st = [s for c in d["cases"] for s in c["stages"]]
assert st and any(s["stage"] == "layers.1.row_attention" for s in st), st
bars = [r for r in ET.parse(sys.argv[2]).getroot().iter("{http://www.w3.org/2000/svg}rect") if r.get("class") == "bar"]
stage_bars = bars[len(d["cases"]):]
assert len(stage_bars) == len(st), (len(stage_bars), len(st))
for s, b in zip(st, stage_bars):
    assert (b.get("fill") == "#d62728") == (s["max_abs_error"] > bound), (s, b.get("fill"))
assert any(s["max_abs_error"] > bound for s in st) and any(s["max_abs_error"] <= bound for s in st)
EOF
"$BIN" verify --model mm --reference-model mp --device cpu --against cpu --seeds 42,100 --bisect=always --json v2.json > /dev/null 2>&1
grep -q '"stages"' v2.json && bad "verify --json without --plot carries stages" || ok "verify --json without --plot: no stages (as before)"

# 4. bench --trace-format chrome: trace events, one per op
"$BIN" bench --model mm --runs 1 --warmup 0 --trace t.json > /dev/null 2>&1 || bad "bench --trace"
"$BIN" bench --model mm --runs 1 --warmup 0 --trace tc.json --trace-format chrome > /dev/null 2>&1 || bad "bench --trace-format chrome"
python3 - t.json tc.json <<'EOF' && ok "bench --trace-format chrome: a complete event per op, end to end, stages over them" || bad "chrome trace"
import json, sys
t, c = (json.load(open(f)) for f in sys.argv[1:3])
ops = [e for e in c["traceEvents"] if e.get("cat") == "op"]
assert [e["name"] for e in ops] == [o["op"] for o in t["ops"]], "the ops differ from the nofall trace's"
assert all(e["ph"] == "X" and e["dur"] >= 0 for e in ops)
assert all(abs(a["ts"] + a["dur"] - b["ts"]) < 0.01 for a, b in zip(ops, ops[1:])), "not end to end"
st = [e for e in c["traceEvents"] if e.get("cat") == "stage"]
assert st and abs(sum(e["dur"] for e in st) - sum(e["dur"] for e in ops)) < 0.1
assert any(e["ph"] == "M" and e["name"] == "process_name" for e in c["traceEvents"])
EOF

# 5. the checker itself fails a picture without its marks
printf '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><text>position</text></svg>\n' > empty.svg
NOFALL_NO_BROWSER=1 "${CHECK[@]}" empty.svg run > /dev/null 2>&1 && bad "plot-check passed an empty picture" || ok "plot-check fails an empty picture"

[ $fails = 0 ] && echo "plots: all ok" || echo "plots: $fails failed"
exit $((fails > 0))
