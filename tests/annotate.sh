#!/usr/bin/env bash
# annotate.sh BIN TMP [VCF_CONVERT] -- `nofall annotate` against upstream SpliceTransformer's
# own scoring (tests/fixtures/annotate, made by reference/annotate_fixtures.py):
# the .csv is byte-identical to upstream's expected.csv (every score and flag
# as formatted, the same rows in the same order, the same records skipped);
# the report counts the skips by reason; a --raw-score .vcf on a subset
# carries every input record and upstream's raw tissue deltas within 1e-5;
# bad input ends the run with exit != 0, a message naming the record or
# file, and no output file (a previous one stays as it was). With a small
# model: --out .vcf.gz / .tsv.gz (BGZF of the .vcf's / .tsv's bytes) and .bcf
# (back to VCF by VCF_CONVERT, tests/vcf-convert.c: the .vcf's bytes); a BCF
# and a .vcf.gz --vcf (made by VCF_CONVERT) give the plain VCF's output; the
# progress bar only on a terminal (script(1) or a Python pty), none in a
# pipe, none with --quiet.
# Env: DEVICE (default cpu) for parts 1 and 2; PARITY_ONLY=1 stops after them
# (e.g. DEVICE=opencl:0 PARITY_ONLY=1: the parity on PoCL, ~9 minutes on 2
# cores; not in CI); NO_PARITY=1 runs parts 3 and 4 only (ctest runs the
# two halves as annotate-parity, on both cores, and annotate-io, one thread,
# beside another test). SMALL=1 (the sanitizer build, where the full-size
# model's forwards prove nothing a small one does not): parts 1 and 2 with a
# small model of the released context (dim 16, depth 1, context 4000: the same
# windows, records and skips), checking all but the score values -- every
# row's record, ALT and gene as upstream's, the report's counts, every record
# in the --raw-score .vcf; the values are checked in the release build.
set -u
BIN=$(readlink -f "$1"); T=$2; CONV=${3:+$(readlink -f "$3")}
rm -rf "$T"; mkdir -p "$T"
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/annotate"
fails=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

SMALL=${SMALL:-0}
GEN=()
[ "$SMALL" = 1 ] && GEN=(--dim 16 --depth 1)
"$BIN" gen-weights sptransformer --out "$T/m" --seed 0 "${GEN[@]}" > "$T/gen.out" 2>&1 || { bad "gen-weights"; cat "$T/gen.out"; }
cp "$FX"/genome.fa "$FX"/genes.gtf "$FX"/*.vcf "$T/"
cd "$T" || exit 1
if [ "${NO_PARITY:-0}" != 1 ]; then

# 1. the whole fixture VCF, as upstream's .csv
DEVICE=${DEVICE:-cpu}
if "$BIN" annotate --model m --vcf input.vcf --fasta genome.fa --genes genes.gtf --out out.csv --device "$DEVICE" > run.out 2> run.err; then
  ok "annotate input.vcf: exit 0 ($(grep '^annotate:' run.err))"
else
  bad "annotate input.vcf: exit $?"; cat run.err
fi
if [ "$SMALL" = 1 ]; then
  # the columns before the scores: #CHROM POS ID REF ALT gene ...
  python3 - out.csv "$FX/expected.csv" <<'EOF' && ok "out.csv (small model): upstream's rows, records, ALTs and genes" || bad "out.csv rows (small model)"
import csv, sys
got, want = (list(csv.reader(open(f))) for f in sys.argv[1:3])
key = lambda rows: [r[:6] for r in rows]
if got[0] != want[0] or key(got) != key(want):
    sys.exit(f"rows differ: {key(got)[:3]} vs {key(want)[:3]}")
EOF
elif cmp -s out.csv "$FX/expected.csv"; then
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
if "$BIN" annotate --model m --vcf sub.vcf --fasta genome.fa --genes genes.gtf --out sub.vcf.out.vcf --raw-score --batch 2 --format sptransformer --device "$DEVICE" > sub.out 2> sub.err; then
  ok "annotate --raw-score --batch 2 -> .vcf: exit 0"
else
  bad "annotate --raw-score .vcf: exit $?"; cat sub.err
fi
python3 - sub.vcf sub.vcf.out.vcf "$FX/expected_raw.csv" "$SMALL" <<'EOF' && ok "raw .vcf: every record in order, INFO/SPT header, raw deltas within 1e-5 of upstream$([ "$SMALL" = 1 ] && echo ' (small model: not the values)')" || bad "raw .vcf"
import csv, sys
small = sys.argv[4] == "1"
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
        if small:
            n += 1
            continue
        if abs(float(v[1]) - float(e["score"])) > 0.005 + 1e-6:
            sys.exit(f"{o[:5]}: DELTA_SPLICE {v[1]} vs upstream {e['score']}")
        for t, x in zip(tissues, v[2:]):
            if abs(float(x) - float(e[t])) > 1e-5:
                sys.exit(f"{o[:5]} {t}: {x} vs upstream {e[t]}")
        n += 1
if n != 3:
    sys.exit(f"{n} ALTs compared, want 3")
EOF

fi # NO_PARITY
if [ "${PARITY_ONLY:-0}" = 1 ]; then
  [ $fails -eq 0 ] && echo "annotate ($DEVICE, parity only): all passed" || echo "annotate ($DEVICE, parity only): $fails failed"
  exit $((fails > 0))
fi

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
expect_fail out-ext "must end in .vcf, .vcf.gz, .bcf, .tsv, .tsv.gz, .csv or .csv.gz" o7.txt --vcf input.vcf --genes genes.gtf
expect_fail bcf-window-start "record 1 (chr3:4000 bad1): the window -100..8100 starts before contig chr3" o8.bcf --vcf bad-window-start.vcf --genes genes.gtf
expect_fail vcfgz-window-start "record 1 (chr3:4000 bad1): the window -100..8100 starts before contig chr3" o9.vcf.gz --vcf bad-window-start.vcf --genes genes.gtf
# a contig the header does not declare: fine in a .vcf, refused by htslib's
# BCF writer (after the header and a record, chr1:25000 in no gene, are
# written: the temporary file goes)
{ grep '^#' input.vcf; printf 'chr1\t25000\t.\tG\tT\t.\t.\t.\nchrUndecl\t500\t.\tA\tG\t.\t.\t.\n'; } > undeclared.vcf
expect_fail bcf-undeclared "record 2 (chrUndecl:500 .): its contig is not declared in the --vcf header; a .bcf --out needs" o10.bcf --vcf undeclared.vcf --genes genes.gtf
for f in o1.csv o2.csv o3.csv o4.csv o5.csv o6.csv o7.txt o8.bcf o9.vcf.gz o10.bcf; do [ -e "$f" ] && bad "$f written"; done
ok "no output file for any bad input"
# a failed run leaves a previous output as it was
echo "previous" > keep.csv
"$BIN" annotate --model m --vcf bad-window-start.vcf --fasta genome.fa --genes genes.gtf --out keep.csv > /dev/null 2>&1
[ "$(cat keep.csv)" = "previous" ] && ok "a failed run leaves the previous --out as it was" || bad "previous --out changed"

# 4. the encodings of --out and --vcf, the progress bar: a small model
# (context 10: windows of 221) and one thread, so the runs are short and alike
export OMP_NUM_THREADS=1
"$BIN" gen-weights sptransformer --out ms --seed 0 --dim 16 --depth 1 --context 10 --window 512 > gen-small.out 2>&1 ||
  { bad "gen-weights (small)"; cat gen-small.out; }
S=(--model ms --fasta genome.fa --genes genes.gtf)
small() { # name args... (exit 0 expected)
  local name=$1; shift
  "$BIN" annotate "${S[@]}" "$@" > "$name.out" 2> "$name.err" && return 0
  bad "$name: exit $?"; cat "$name.err"; return 1
}
small s-vcf --vcf input.vcf --out s.vcf
small s-tsv --vcf input.vcf --out s.tsv
small s-vcfgz --vcf input.vcf --out s.vcf.gz
small s-tsvgz --vcf input.vcf --out s.tsv.gz
small s-bcf --vcf input.vcf --out s.bcf
python3 - s.vcf s.vcf.gz s.tsv s.tsv.gz <<'EOF' && ok "--out .vcf.gz / .tsv.gz: BGZF (the EOF block) of the .vcf's / .tsv's bytes" || bad ".vcf.gz / .tsv.gz output"
import gzip, sys
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
for plain, gz in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    raw = open(gz, "rb").read()
    if not raw.endswith(EOF_BLOCK) or raw[12:14] != b"BC":
        sys.exit(f"{gz}: not BGZF")
    if gzip.decompress(raw) != open(plain, "rb").read():
        sys.exit(f"{gz} decompressed differs from {plain}")
EOF
# the default VCF layout is SpliceAI's (+ SPT_DS / SPT_TISSUES per ALT); --format sptransformer: upstream's INFO/SPT
small s-spt --vcf input.vcf --out s-spt.vcf --format sptransformer
grep -q '^##INFO=<ID=SPT,' s-spt.vcf && ! grep -q 'SpliceAI' s-spt.vcf && [ "$(grep -vc '^#' s-spt.vcf)" = 19 ] &&
  ok "s-spt.vcf (--format sptransformer): INFO/SPT header, 19 records" || bad "s-spt.vcf"
python3 - s.vcf s-spt.vcf ms <<'EOF' && ok "s.vcf: SpliceAI header and entries (one per scored ALT and gene), SPT_DS = INFO/SPT's DELTA_SPLICE per ALT, '.' for the unscored, provenance line with the weights' SHA-256" || bad "s.vcf (SpliceAI layout)"
import hashlib, re, sys
vcf, spt, model = sys.argv[1:4]
lines = open(vcf).read().splitlines()
hdr = [l for l in lines if l.startswith("##")]
prov = [l for l in hdr if l.startswith("##nofall_annotate=<")]
sha = hashlib.sha256(open(model + "/model.safetensors", "rb").read()).hexdigest()
assert len(prov) == 1 and "model.safetensors:sha256:" + sha in prov[0], prov
sai = [l for l in hdr if l.startswith("##INFO=<ID=SpliceAI,Number=.,Type=String")]
assert len(sai) == 1 and "Format: ALLELE|SYMBOL|DS_AG|DS_AL|DS_DG|DS_DL|DP_AG|DP_AL|DP_DG|DP_DL|Consequence\">" in sai[0]
assert any(l.startswith("##INFO=<ID=SPT_DS,Number=A,Type=Float") for l in hdr)
assert any(l.startswith("##INFO=<ID=SPT_TISSUES,Number=A,Type=String") for l in hdr)
genes = {}
for l in open("genes.gtf"):
    f = l.split("\t")
    if len(f) > 8 and f[2] == "gene":
        genes[re.search(r'gene_name "([^"]+)"', f[8]).group(1)] = f[6]
def info(l):
    return dict(kv.split("=", 1) for kv in l.split("\t")[7].split(";") if "=" in kv)
old = {tuple(l.split("\t")[:5]): info(l) for l in open(spt) if not l.startswith("#")}
n_entries = 0
for l in lines:
    if l.startswith("#"):
        continue
    f = l.split("\t")
    i, o = info(l), old[tuple(f[:5])]
    alts = f[4].split(",")
    spt_ds = {v.split("|")[0]: v.split("|")[1] for v in o.get("SPT", "").split(",") if v}
    if not spt_ds:
        assert "SPT_DS" not in i and "SpliceAI" not in i, l
        continue
    ds = i["SPT_DS"].split(",")
    assert len(ds) == len(alts), l
    for a, d in zip(alts, ds):
        assert (d == ".") == (a not in spt_ds), (l, a)
        if a in spt_ds:
            assert abs(float(d) - float(spt_ds[a])) < 1e-6, (l, a, d, spt_ds[a])
    for e in i.get("SpliceAI", "").split(","):
        if not e:
            continue
        v = e.split("|")
        assert len(v) == 11 and v[0] in spt_ds and v[1] in genes and v[10] == ".", e
        assert all(re.fullmatch(r"-?\d\.\d\d", x) for x in v[2:6]) and all(-100 <= int(x) <= 100 for x in v[6:10]), e
        n_entries += 1
assert n_entries >= 10, n_entries
EOF
# a skip reason over 10 % of the ALTs is a warning naming it and the way out (exit 0, as upstream): NCBI contig names
sed 's/^chr1\t/NC_000001.11\t/' input.vcf > nc.vcf
small s-nc --vcf nc.vcf --out s-nc.tsv &&
  grep -q '^warning: 16 of 21 ALTs (76%) not scored (contig_name_over_6_characters): .*rename the contigs' s-nc.err &&
  grep -q 'not scored (not_snv)' s-vcf.err && ok "skip-reason warnings: contig names (76% of the ALTs), not SNVs (14%)" ||
  { bad "skip-reason warnings"; cat s-nc.err; }
# bcftools (Debian's): +split-vep splits the SpliceAI entries by their Format, norm -m-any the Number=A tags per ALT
if command -v bcftools > /dev/null; then
  bcftools +split-vep -a SpliceAI -d -f '%POS\t%ALT\t%SYMBOL\t%DS_DG\t%DP_DG\n' s.vcf > sv.txt 2> sv.err &&
    [ "$(wc -l < sv.txt)" = "$(grep -v '^#' s.vcf | grep -o 'SpliceAI=[^;]*' | tr ',' '\n' | wc -l)" ] &&
    grep -qP '^14000\t[TA,]+\tGB\t' sv.txt && ok "bcftools +split-vep -a SpliceAI: one line per entry ($(wc -l < sv.txt))" ||
    { bad "bcftools +split-vep"; cat sv.err; head -3 sv.txt; }
  bcftools norm -m-any s.vcf 2> norm.err | grep -v '^#' > norm.txt &&
    [ "$(grep -cP '^chr1\t7000\t' norm.txt)" = 2 ] &&
    grep -P '^chr1\t7000\t.*\tGT\t' norm.txt | grep -q 'SPT_DS=\.;SPT_TISSUES=\.' &&
    grep -P '^chr1\t14000\t.*\tA\t' norm.txt | grep -q 'SPT_DS=0' &&
    ok "bcftools norm -m-any: each split record keeps its own ALT's SPT_DS / SPT_TISSUES ('.' for the unscored GT)" ||
    { bad "bcftools norm -m-any"; cat norm.err; grep -P '\t(7000|14000)\t' norm.txt | cut -c1-200; }
  # --out - (standard output: the VCF and nothing else; no report, no file) and -O v|z|b|u as bcftools
  # means them (-O b is the .bcf above), each read back by bcftools
  ls -A > before.ls
  "$BIN" annotate "${S[@]}" --vcf input.vcf --out - > so.vcf 2> so.err && cmp -s so.vcf s.vcf &&
    grep -q '^annotate: .* rows to standard output$' so.err && ls -A | grep -v '^so\.' | cmp -s - before.ls &&
    ok "--out -: stdout = the .vcf's bytes, the summary on stderr, no report, no file" ||
    { bad "--out -"; head -3 so.vcf; cat so.err; ls -A | diff - before.ls; }
  "$BIN" annotate "${S[@]}" --vcf input.vcf --out - -Oz --quiet 2> soz.err | bcftools view 2> soz.bv | grep -v '^##bcftools_' > soz.vcf
  cmp -s soz.vcf s.vcf && ! grep -qv '^warning: ' soz.err && ok "--out - -Oz --quiet: BGZF on stdout, bcftools view = the .vcf, only warnings on stderr" ||
    { bad "--out - -Oz"; cat soz.err soz.bv; }
  small s-u --vcf input.vcf --out s-u.out -O u && bcftools view s-u.out 2> su.bv | grep -v '^##bcftools_' | cmp -s - s.vcf &&
    [ "$(head -c 5 s-u.out | od -An -c | tr -d ' ')" = 'BCF002002' ] &&
    ok "-O u --out s-u.out: uncompressed BCF whatever the name, bcftools view = the .vcf" || { bad "-O u"; cat su.bv; }
  # -W / --write-index[=csi|tbi] as bcftools: the index of a sorted run (8 records of input.vcf on 6 contigs, 8
  # windows, sorted), read through by bcftools: index -s = the records per contig, view -r = a region's records
  python3 - input.vcf srt.vcf <<'EOF'
import sys
lines = open(sys.argv[1]).read().splitlines()
head = [l for l in lines if l.startswith("#")]
order = [l.split("ID=")[1].split(",")[0] for l in head if l.startswith("##contig")]
keep = {"13000", "25000", "26000", "9000", "8050", "15000", "100", "500"}
body = sorted((l for l in lines if not l.startswith("#") and l.split("\t")[1] in keep),
              key=lambda l: (order.index(l.split("\t")[0]), int(l.split("\t")[1])))
open(sys.argv[2], "w").write("\n".join(head + body) + "\n")
EOF
  idx_ok() { # FILE INDEX MAGIC
    python3 -c 'import gzip, sys; sys.exit(gzip.open(sys.argv[1]).read(4) != sys.argv[2].encode() + b"\1")' "$2" "$3" &&
      bcftools index -s "$1" > "$1.st" 2>&1 && [ "$(bcftools view -H "$1" | cut -f1 | uniq -c | awk '{print $2 "\t" $1}')" = "$(cut -f1,3 "$1.st")" ] &&
      bcftools view -H -r chr1:9000-14000 "$1" > "$1.reg" 2>&1 && [ -s "$1.reg" ] &&
      bcftools view -H "$1" | awk -F'\t' '$1 == "chr1" && $2 >= 9000 && $2 <= 14000' | cmp -s - "$1.reg"
  }
  small w-z --vcf srt.vcf --out w.vcf.gz --write-index && idx_ok w.vcf.gz w.vcf.gz.csi CSI && grep -qx 'INDEX=w.vcf.gz.csi' w-z.out &&
    grep -qP '"index":\s*"w.vcf.gz.csi"' w.vcf.gz.report.json && ok "--write-index, .vcf.gz: .csi, bcftools index -s and view -r read it" ||
    { bad "--write-index .vcf.gz"; cat w-z.err w.vcf.gz.st; }
  small w-t --vcf srt.vcf --out wt.vcf.gz -O z -Wtbi && idx_ok wt.vcf.gz wt.vcf.gz.tbi TBI && [ ! -e wt.vcf.gz.csi ] &&
    ok "-Wtbi -O z: .tbi, bcftools reads it" || { bad "-Wtbi"; cat w-t.err wt.vcf.gz.st; }
  small w-b --vcf srt.vcf --out w.bcf -W --write-index=tbi --write-index=csi && idx_ok w.bcf w.bcf.csi CSI &&
    ok "-W .bcf (the last --write-index given): .csi, bcftools reads it" || { bad "-W .bcf"; cat w-b.err w.bcf.st; }
  # an unsorted --vcf cannot be indexed: the run fails, the previous output and index stay, no temporary file
  cp w.vcf.gz w.prev && cp w.vcf.gz.csi w.prev.csi && cp w.vcf.gz.report.json w.prev.json
  { grep '^#' input.vcf; grep -v '^#' input.vcf | head -5; } > uns.vcf # chr1: 6000 8000 13000 14000 7000
  "$BIN" annotate "${S[@]}" --vcf uns.vcf --out w.vcf.gz -W > w-u.out 2> w-u.err; rc=$?
  [ $rc != 0 ] && grep -q 'cannot be indexed: its records .* are not sorted' w-u.err && cmp -s w.vcf.gz w.prev &&
    cmp -s w.vcf.gz.csi w.prev.csi && cmp -s w.vcf.gz.report.json w.prev.json && ! ls -A | grep -q '^\.w\.' &&
    ok "--write-index on an unsorted --vcf: exit $rc, said so; the previous output, index and report kept, no temporary file" ||
    { bad "--write-index unsorted: exit $rc"; cat w-u.err; ls -A | grep '^\.w\.'; }
else
  echo "skip bcftools checks (no bcftools: apt-get install bcftools)"
fi
# --write-index refused at once where there is nothing to index
expect_fail wi-vcf "--write-index: --out o12.vcf is an uncompressed VCF" o12.vcf --vcf input.vcf --genes genes.gtf --write-index
expect_fail wi-stdout "--write-index: --out - (standard output) cannot be indexed" - --vcf input.vcf --genes genes.gtf -W
expect_fail wi-u "is an uncompressed BCF (-O u)" o13.bcf --vcf input.vcf --genes genes.gtf -O u -W
expect_fail wi-tbi-bcf "--write-index=tbi: --out o14.bcf is a BCF, which takes a CSI index only" o14.bcf --vcf input.vcf --genes genes.gtf --write-index=tbi
expect_fail wi-tsv "--out o15.tsv.gz is a table" o15.tsv.gz --vcf input.vcf --genes genes.gtf -Wcsi
expect_fail wi-fmt "unknown option -Wbai" o16.vcf.gz --vcf input.vcf --genes genes.gtf -Wbai
for f in o12.vcf o13.bcf o13.bcf.csi o14.bcf o15.tsv.gz o16.vcf.gz; do [ -e "$f" ] && bad "$f written"; done
expect_fail otype-tsv "--output-type writes a VCF or BCF" o11.tsv --vcf input.vcf --genes genes.gtf -O b
# stdout full or closed: the markers cannot be written, so the run fails before its
# output and report replace the previous ones (issue #27: they were replaced first);
# two records are enough (the failure comes after all of them)
cp s.tsv keep-full.tsv && echo previous > keep-full.tsv.report.json && cp keep-full.tsv keep-full.before
{ grep '^#' input.vcf; grep -v '^#' input.vcf | head -2; } > two.vcf
for how in full closed; do
  if [ $how = full ]; then "$BIN" annotate "${S[@]}" --vcf two.vcf --out keep-full.tsv --quiet > /dev/full 2> full.err
  else "$BIN" annotate "${S[@]}" --vcf two.vcf --out keep-full.tsv --quiet >&- 2> full.err; fi
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "standard output" full.err && cmp -s keep-full.tsv keep-full.before &&
     [ "$(cat keep-full.tsv.report.json)" = previous ] && ! ls -A | grep -q '^\.keep-full'; then
    ok "stdout $how: exit $rc, the previous output and report kept, no temporary file left"
  else
    bad "stdout $how: rc=$rc"; cat full.err
  fi
done
if [ -n "$CONV" ]; then
  # the .bcf back to VCF: byte for byte the .vcf (htslib writes no IDX= keys in VCF)
  if "$CONV" s.bcf s-bcf-back.vcf w && cmp -s s-bcf-back.vcf s.vcf && python3 -c '
import gzip, sys; sys.exit(gzip.open(sys.argv[1]).read(5) != b"BCF\x02\x02")' s.bcf; then
    ok "--out .bcf: compressed BCF 2.2, back to VCF = the .vcf byte for byte"
  else
    bad "--out .bcf differs from the .vcf"; diff s-bcf-back.vcf s.vcf | head
  fi
  # BCF and .vcf.gz input
  "$CONV" input.vcf input.bcf wb && "$CONV" input.vcf input.vcf.gz wz || bad "vcf-convert input.vcf"
  for f in input.bcf input.vcf.gz; do
    small "in-$f" --vcf "$f" --out "in-$f.vcf" && small "in-$f-tsv" --vcf "$f" --out "in-$f.tsv" || continue
    if cmp -s "in-$f.vcf" s.vcf && cmp -s "in-$f.tsv" s.tsv; then
      ok "--vcf $f: the .vcf and the .tsv of the plain VCF, byte for byte"
    else
      bad "--vcf $f: output differs"; diff "in-$f.vcf" s.vcf | head
    fi
  done
else
  echo "skip .bcf read-back, BCF / .vcf.gz input (no vcf-convert given)"
fi
# no progress output in a pipe: stderr = that of --quiet plus the summary line
small s-quiet --vcf input.vcf --out s-quiet.vcf --quiet
if cmp -s s-quiet.vcf s.vcf && ! grep -q $'\r' s-vcf.err && ! grep -q '^annotate:' s-quiet.err &&
   grep -v '^annotate: ' s-vcf.err | cmp -s - s-quiet.err && [ "$(grep -c '^annotate: ' s-vcf.err)" = 1 ]; then
  ok "in a pipe: no progress bar (stderr = --quiet's + the summary line; --quiet: no summary, the warnings kept)"
else
  bad "stderr in a pipe"; cat -A s-vcf.err s-quiet.err | head
fi
# the bar's runs on the first 3 records (their output: s.vcf's header and first 3 records)
{ grep '^#' input.vcf; grep -v '^#' input.vcf | head -3; } > three.vcf
{ grep '^#' s.vcf; grep -v '^#' s.vcf | head -3; } > s3.vcf
# --progress: the bar in a pipe too; --quiet with --progress: a usage error
small s-prog --vcf three.vcf --out s-prog.vcf --progress
grep -q $'^\rannotate: 0/3 records (0.0%)' s-prog.err && grep -q 'annotate: 3/3 records (100.0%)' s-prog.err &&
  cmp -s s-prog.vcf s3.vcf && ok "--progress in a pipe: the bar" || { bad "--progress in a pipe"; cat -A s-prog.err | head; }
"$BIN" annotate "${S[@]}" --vcf input.vcf --out s-qp.vcf --quiet --progress > qp.out 2> qp.err; rc=$?
[ $rc = 2 ] && grep -q 'error: --quiet and --progress exclude each other' qp.err && [ ! -e s-qp.vcf ] &&
  ok "--quiet --progress: exit 2, they exclude each other" || { bad "--quiet --progress: exit $rc"; cat qp.err; }
# on a terminal: the bar ('\r'-refreshed, its final state, a newline); --quiet: nothing of it
on_tty() { # command... : its stdout and stderr under a pseudo-terminal
  if command -v script > /dev/null 2>&1; then
    script -qec "$(printf '%q ' "$@")" /dev/null
  else
    python3 -c 'import pty, sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)' "$@"
  fi
}
on_tty "$BIN" annotate "${S[@]}" --vcf three.vcf --out s-tty.vcf > tty.txt 2>&1
on_tty "$BIN" annotate "${S[@]}" --vcf three.vcf --out s-ttyq.vcf --quiet > ttyq.txt 2>&1
if grep -q $'\rannotate: 0/3 records (0.0%)' tty.txt &&
   grep -q $'annotate: 3/3 records (100.0%), [0-9.e+]*/s, ETA 0:00:00\r*$' tty.txt &&
   grep -q '^EXIT_CODE=0' tty.txt && cmp -s s-tty.vcf s3.vcf; then
  ok "on a terminal: the progress bar (0/3 .. 3/3 records, rate, ETA), the same output"
else
  bad "no progress bar on a terminal"; cat -A tty.txt | head
fi
if ! grep -q 'records (' ttyq.txt && ! grep -q '^annotate:' ttyq.txt && grep -q '^EXIT_CODE=0' ttyq.txt &&
   cmp -s s-ttyq.vcf s3.vcf; then
  ok "on a terminal with --quiet: no bar, no summary"
else
  bad "--quiet on a terminal"; cat -A ttyq.txt | head
fi
# an indexed --vcf (a sorted copy: .vcf.gz + .tbi): the total from the index
if [ -n "$CONV" ]; then
  python3 - input.vcf sorted.vcf <<'EOF'
import sys
lines = open(sys.argv[1]).read().splitlines()
head = [l for l in lines if l.startswith("#")]
order = [l.split("ID=")[1].split(",")[0] for l in head if l.startswith("##contig")]
body = sorted((l for l in lines if not l.startswith("#")), key=lambda l: (order.index(l.split("\t")[0]), int(l.split("\t")[1])))
open(sys.argv[2], "w").write("\n".join(head + body) + "\n")
EOF
  "$CONV" sorted.vcf sorted.vcf.gz wz index || bad "vcf-convert: sorted.vcf.gz + .tbi"
  on_tty "$BIN" annotate "${S[@]}" --vcf sorted.vcf.gz --out s-idx.vcf > ttyi.txt 2>&1
  grep -q $'\rannotate: 0/19 records (0.0%)' ttyi.txt && grep -q '^EXIT_CODE=0' ttyi.txt &&
    ok "--vcf .vcf.gz with a .tbi, on a terminal: the total (19)" || { bad "indexed --vcf on a terminal"; cat -A ttyi.txt | head; }
fi
# --vcf a pipe: not counted first (that would consume it): count and rate, no ETA
small s-fifo --vcf <(cat three.vcf) --out s-fifo.vcf && cmp -s s-fifo.vcf s3.vcf && ok "--vcf from a pipe: the same output" ||
  bad "--vcf from a pipe"
on_tty bash -c "cat three.vcf | $(printf '%q ' "$BIN" annotate "${S[@]}") --vcf - --out s-ttyp.vcf" > ttyp.txt 2>&1
if grep -q $'\rannotate: 3 records, [0-9.e+]*/s, 0:00:[0-9][0-9] elapsed' ttyp.txt && cmp -s s-ttyp.vcf s3.vcf; then
  ok "--vcf on a pipe, on a terminal: count and rate, no ETA"
else
  bad "piped --vcf on a terminal"; cat -A ttyp.txt | head
fi

[ $fails -eq 0 ] && echo "annotate: all passed" || echo "annotate: $fails failed"
exit $((fails > 0))
