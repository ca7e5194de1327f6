#!/usr/bin/env bash
# annotate.sh BIN TMP -- `nofall annotate` against upstream SpliceTransformer's
# own scoring (tests/fixtures/annotate, made by reference/annotate_fixtures.py):
# the .csv is byte-identical to upstream's expected.csv (every score and flag
# as formatted, the same rows in the same order, the same records skipped);
# the report counts the skips by reason; a --raw-score .vcf on a subset
# carries every input record and upstream's raw tissue deltas within 1e-5;
# bad input ends the run with exit != 0, a message naming the record or
# file, and no output file (a previous one stays as it was).
set -u
BIN=$(readlink -f "$1"); T=$2
rm -rf "$T"; mkdir -p "$T"
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/annotate"
fails=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

"$BIN" gen-weights sptransformer --out "$T/m" --seed 0 > "$T/gen.out" 2>&1 || { bad "gen-weights"; cat "$T/gen.out"; }
cp "$FX"/genome.fa "$FX"/genes.gtf "$FX"/*.vcf "$T/"
cd "$T" || exit 1

# 1. the whole fixture VCF, as upstream's .csv
if "$BIN" annotate --model m --vcf input.vcf --fasta genome.fa --genes genes.gtf --out out.csv > run.out 2> run.err; then
  ok "annotate input.vcf: exit 0 ($(grep '^annotate:' run.err))"
else
  bad "annotate input.vcf: exit $?"; cat run.err
fi
if cmp -s out.csv "$FX/expected.csv"; then
  ok "out.csv = upstream's expected.csv ($(($(wc -l < out.csv) - 1)) rows, byte for byte)"
else
  bad "out.csv differs from upstream's expected.csv"; diff out.csv "$FX/expected.csv" | head -20
fi
python3 - "$FX/expected_report.json" out.csv.report.json <<'EOF' && ok "report: the same records scored / skipped for the same reasons" || bad "report counts"
import json, sys
want, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
bad = {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v}
if bad:
    sys.exit(f"report differs: {bad}")
EOF

# 2. --raw-score as a .vcf on a subset: both strands, a window cut by the contig
# end, a deletion (skipped, kept in the VCF), no gene (score 0)
{ grep '^#' input.vcf; awk -F'\t' '!/^#/ && (($1=="chr1" && ($2==13000 || $2==9000 || $2==25000)) || ($1=="chr3" && $2==8050))' input.vcf; } > sub.vcf
if "$BIN" annotate --model m --vcf sub.vcf --fasta genome.fa --genes genes.gtf --out sub.vcf.out.vcf --raw-score --batch 2 > sub.out 2> sub.err; then
  ok "annotate --raw-score --batch 2 -> .vcf: exit 0"
else
  bad "annotate --raw-score .vcf: exit $?"; cat sub.err
fi
python3 - sub.vcf sub.vcf.out.vcf "$FX/expected_raw.csv" <<'EOF' && ok "raw .vcf: every record in order, INFO/SPT header, raw deltas within 1e-5 of upstream" || bad "raw .vcf"
import csv, sys
inp = [l.split("\t")[:5] for l in open(sys.argv[1]) if not l.startswith("#")]
out = [l.rstrip("\n").split("\t") for l in open(sys.argv[2]) if not l.startswith("#")]
hdr = [l for l in open(sys.argv[2]) if l.startswith("##INFO=<ID=SPT,")]
exp = {(r["#CHROM"], r["POS"], r["ALT"]): r for r in csv.DictReader(open(sys.argv[3]))}
if len(hdr) != 1:
    sys.exit("no ##INFO=<ID=SPT header")
if [o[:5] for o in out] != inp:
    sys.exit(f"records differ: {[o[:5] for o in out]} vs {inp}")
tissues = list(csv.DictReader(open(sys.argv[3])).fieldnames[7:])
n = 0
for o in out:
    spt = [f[4:] for f in o[7].split(";") if f.startswith("SPT=")]
    key_alts = o[4].split(",")
    for a in key_alts:
        e = exp.get((o[0], o[1], a))
        vals = [v for v in (spt[0].split(",") if spt else []) if v.split("|")[0] == a]
        if e is None:
            if vals:
                sys.exit(f"{o[:5]}: SPT for an ALT upstream skips")
            continue
        if len(vals) != 1:
            sys.exit(f"{o[:5]}: no SPT for ALT {a}")
        v = vals[0].split("|")
        if abs(float(v[1]) - float(e["score"])) > 0.005 + 1e-6:
            sys.exit(f"{o[:5]}: DELTA_SPLICE {v[1]} vs upstream {e['score']}")
        for t, x in zip(tissues, v[2:]):
            if abs(float(x) - float(e[t])) > 1e-5:
                sys.exit(f"{o[:5]} {t}: {x} vs upstream {e[t]}")
        n += 1
if n != 3:
    sys.exit(f"{n} ALTs compared, want 3")
EOF

# 3. bad input: exit != 0, the record or file named, no output, no report
expect_fail() { # name needle out args...
  local name=$1 needle=$2 out=$3; shift 3
  "$BIN" annotate --model m --fasta genome.fa --out "$out" "$@" > "$name.out" 2> "$name.err"; local rc=$?
  if [ $rc -eq 0 ]; then bad "$name: exit 0"; return; fi
  grep -q -- "$needle" "$name.err" && ok "$name: exit $rc, '$needle'" || { bad "$name: stderr lacks '$needle'"; cat "$name.err"; }
  [ ! -e "$out.report.json" ] && ! ls .*.tmp > /dev/null 2>&1 && ok "$name: no report, no temporary file" || bad "$name: files left"
}
expect_fail window-start "record 1 (chr3:4000 bad1): the window -100..8100 starts before contig chr3" o1.csv --vcf bad-window-start.vcf --genes genes.gtf
expect_fail window-end "record 1 (chr3:11000 bad1): the window 6900..15100 runs 3100 nt past the end" o2.csv --vcf bad-window-end.vcf --genes genes.gtf
expect_fail contig "record 1 (chr5:2000 bad1): contig chr5 is not in --fasta" o3.csv --vcf bad-contig.vcf --genes genes.gtf
expect_fail malformed "data record 2 is malformed" o4.csv --vcf bad-malformed.vcf --genes genes.gtf
printf 'not a gtf\n' > garbage.gtf
expect_fail gtf-garbage "genes garbage.gtf line 1: not a GTF line" o5.csv --vcf input.vcf --genes garbage.gtf
expect_fail gtf-missing "genes missing.gtf: cannot open" o6.csv --vcf input.vcf --genes missing.gtf
expect_fail out-ext "must end in .vcf, .tsv or .csv" o7.txt --vcf input.vcf --genes genes.gtf
for f in o1.csv o2.csv o3.csv o4.csv o5.csv o6.csv o7.txt; do [ -e "$f" ] && bad "$f written"; done
ok "no output file for any bad input"
# a failed run leaves a previous output as it was
echo "previous" > keep.csv
"$BIN" annotate --model m --vcf bad-window-start.vcf --fasta genome.fa --genes genes.gtf --out keep.csv > /dev/null 2>&1
[ "$(cat keep.csv)" = "previous" ] && ok "a failed run leaves the previous --out as it was" || bad "previous --out changed"

[ $fails -eq 0 ] && echo "annotate: all passed" || echo "annotate: $fails failed"
exit $((fails > 0))
