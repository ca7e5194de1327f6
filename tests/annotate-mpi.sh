#!/usr/bin/env bash
# annotate-mpi.sh BIN TMP [MPIRUN] -- `mpirun -np N nofall annotate` (docs/cli.md
# "Running on a cluster with mpirun"): on the annotate fixture
# (tests/fixtures/annotate) with a small gen-weights model (context 10:
# windows of 221), the .tsv and the --raw-score .vcf of a 2-rank job are
# byte-identical to the plain run (no mpirun) of the same build (the .tsv of
# a 1-rank job too), and so are a 2-rank .bcf and .vcf.gz (rank 0 writes them) to the
# plain run's; --progress: rank 0 draws the bar (over all ranks' records),
# no other rank does, and none without it (mpirun pipes the ranks' stderr:
# never a terminal); the report holds the totals; a record that fails on rank 1 fails
# the job: exit != 0, rank 0 and rank 1 print rank 1's message, no output;
# so does a malformed record (every rank's), and SIGINT to mpirun mid-job.
# As root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) (set here).
set -u
BIN=$(readlink -f "$1"); T=$2; MPIRUN=${3:-mpirun}
rm -rf "$T"; mkdir -p "$T"
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/annotate"
fails=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one thread a process, in every run: the forwards of the plain run and of
# the ranks then have the same GEMM splits (docs/numerics.md "Determinism")
export OMP_NUM_THREADS=1
# localhost, more ranks than cores allowed; no CMA single-copy (containers
# without ptrace between processes)
# under AddressSanitizer (tools/test.sh stage 2) Open MPI's own allocations
# (its MCA components, dlclosed in MPI_Finalize) show as leaks at exit: they
# are not nofall's, so the ranks run without leak checking; the plain runs
# keep it
MPI=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$MPIRUN" --oversubscribe
     --mca btl_vader_single_copy_mechanism none -x ASAN_OPTIONS)

"$BIN" gen-weights sptransformer --out "$T/m" --seed 0 --dim 16 --depth 1 --context 10 --window 512 > "$T/gen.out" 2>&1 ||
  { bad "gen-weights"; cat "$T/gen.out"; }
cp "$FX"/genome.fa "$FX"/genes.gtf "$FX"/input.vcf "$FX"/bad-malformed.vcf "$T/"
cd "$T" || exit 1
ARGS=(--model m --vcf input.vcf --fasta genome.fa --genes genes.gtf)

run() { # name launcher... -- extra args
  local name=$1; shift
  local pre=()
  while [ "$1" != "--" ]; do pre+=("$1"); shift; done; shift
  if "${pre[@]}" "$BIN" annotate "${ARGS[@]}" "$@" > "$name.out" 2> "$name.err"; then
    ok "$name: exit 0"
  else
    bad "$name: exit $?"; tail -20 "$name.err"
  fi
}
# the plain run first (it creates genome.fa.fai; the jobs find it there)
run plain-tsv -- --out plain.tsv
run plain-vcf -- --out plain.vcf --raw-score --batch 2
# -np 1: the .tsv (the .vcf's writer under mpirun: np2's below)
run np1-tsv "${MPI[@]}" -np 1 -- --out np1.tsv
# several chunks (test builds: 2 records a rank a chunk) and one chunk
NOFALL_TEST_ANNOTATE_CHUNK=2 run np2-tsv "${MPI[@]}" -x NOFALL_TEST_ANNOTATE_CHUNK -np 2 -- --out np2.tsv
run np2-vcf "${MPI[@]}" -np 2 -- --out np2.vcf --raw-score --batch 2
run plain-bcf -- --out plain.bcf --raw-score --batch 2
run np2-bcf "${MPI[@]}" -np 2 -- --out np2.bcf --raw-score --batch 2
NOFALL_TEST_ANNOTATE_CHUNK=2 run np2-vcfgz "${MPI[@]}" -x NOFALL_TEST_ANNOTATE_CHUNK --tag-output -np 2 -- \
  --out np2.vcf.gz --raw-score --batch 2 --progress
cmp -s plain.bcf np2.bcf && ok "np2.bcf = plain.bcf (byte for byte)" || bad "np2.bcf differs from plain.bcf"
python3 -c 'import gzip, sys; sys.exit(gzip.open(sys.argv[1]).read() != open(sys.argv[2], "rb").read())' np2.vcf.gz plain.vcf &&
  ok "np2.vcf.gz decompressed = plain.vcf" || bad "np2.vcf.gz differs from plain.vcf"
if grep -q $'^\\[1,0\\]<stderr>:\rannotate: 0/19 records' np2-vcfgz.err && grep -q 'annotate: 19/19 records (100.0%)' np2-vcfgz.err &&
   ! grep '^\[1,1\]' np2-vcfgz.err | grep -q 'records (' && ! grep -q $'\r' np2-tsv.err; then
  ok "np2 --progress: rank 0 draws the bar over the 19 records of both ranks, rank 1 none; none without --progress"
else
  bad "np2 --progress"; cat -A np2-vcfgz.err | head
fi
for f in np1.tsv np2.tsv; do
  cmp -s plain.tsv "$f" && ok "$f = plain.tsv ($(($(wc -l < plain.tsv) - 1)) rows, byte for byte)" || { bad "$f differs from plain.tsv"; diff plain.tsv "$f" | head; }
done
for f in np2.vcf; do
  cmp -s plain.vcf "$f" && ok "$f = plain.vcf (--raw-score, $(grep -vc '^#' plain.vcf) records, byte for byte)" || { bad "$f differs from plain.vcf"; diff plain.vcf "$f" | head; }
done
grep -q '^##INFO=<ID=SpliceAI,' np2.vcf && [ "$(grep -c '^#CHROM' np2.vcf)" = 1 ] && ok "np2.vcf: one header, with INFO/SpliceAI" || bad "np2.vcf header"
grep -q 'on 2 ranks' np2-tsv.err && ok "np2: the summary says 2 ranks" || bad "np2: no '2 ranks' summary"
[ "$(grep -c '^EXIT_CODE=0' np2-tsv.out)" = 1 ] && [ "$(grep -c '^RECORDS=' np2-tsv.out)" = 1 ] && ok "np2: markers printed once (rank 0)" || { bad "np2 markers"; cat np2-tsv.out; }
python3 - plain.tsv.report.json np2.tsv.report.json <<'EOF' && ok "np2 report: the totals of the plain run, ranks 2" || bad "np2 report"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
if b.get("ranks") != 2 or "ranks" in a:
    sys.exit(f"ranks: {a.get('ranks')} / {b.get('ranks')}")
keys = ["records", "alts", "scored", "scored_no_gene", "scored_ref_mismatch", "records_window_cut_at_contig_end",
        "skipped", "rows_written", "windows"]
diff = {k: (a[k], b[k]) for k in keys if a[k] != b[k]}
if diff:
    sys.exit(f"differs: {diff}")
EOF

# failures: exit != 0, the failing rank's message on rank 0 (and on that
# rank), no output, no report, no temporary file; a previous --out kept
expect_fail() { # name needle-on-rank-0 rank needle-on-that-rank vcf [extension]
  local name=$1 needle=$2 fr=$3 needle_r=$4 vcf=$5 out=$1.${6:-tsv}
  echo previous > keep-$out
  "${MPI[@]}" --tag-output -np 2 "$BIN" annotate --model m --vcf "$vcf" --fasta genome.fa --genes genes.gtf --out "$out" \
    > "$name.out" 2> "$name.err"; local rc=$?
  "${MPI[@]}" -np 2 "$BIN" annotate --model m --vcf "$vcf" --fasta genome.fa --genes genes.gtf --out keep-$out \
    > /dev/null 2>&1
  cat "$name.out" >> "$name.err"
  if [ $rc -eq 0 ]; then bad "$name: exit 0"; return; fi
  if grep -q -F -- ",0]<stderr>:error: $needle" "$name.err" && grep -q -F -- ",$fr]<stderr>:error: $needle_r" "$name.err"; then
    ok "$name: exit $rc, rank 0 prints '$needle', rank $fr '$needle_r'"
  else
    bad "$name: rank 0 / rank $fr lack their messages"; cat "$name.err"
  fi
  grep -q ',0]<stdout>:EXIT_CODE=1' "$name.err" && ok "$name: EXIT_CODE=1 from rank 0" || bad "$name: no EXIT_CODE=1"
  [ ! -e "$out" ] && [ ! -e "$out.report.json" ] && ! ls .*.tmp > /dev/null 2>&1 && ok "$name: no output, no report, no temporary file" || bad "$name: files left"
  [ "$(cat keep-$out)" = previous ] && ok "$name: a previous --out stays as it was" || bad "$name: previous --out changed"
}
# record 2 is rank 1's: its window starts before chr3 (POS <= 110)
{ grep '^#' input.vcf; printf 'chr1\t13000\t.\tT\tA\t.\t.\t.\nchr3\t100\tbad1\tC\tA\t.\t.\t.\nchr1\t14000\t.\tG\tT\t.\t.\t.\n'; } > bad-rank1.vcf
W="--vcf record 2 (chr3:100 bad1): the window -10..210 starts before contig chr3"
expect_fail rank1 "rank 1 of 2: $W" 1 "rank 1 of 2: $W" bad-rank1.vcf
expect_fail rank1-bcf "rank 1 of 2: $W" 1 "rank 1 of 2: $W" bad-rank1.vcf bcf
expect_fail rank1-vcfgz "rank 1 of 2: $W" 1 "rank 1 of 2: $W" bad-rank1.vcf vcf.gz
# every rank reads the malformed record: rank 0 prints the lowest rank's
# message, every rank its own
M="--vcf bad-malformed.vcf: data record 2 is malformed"
expect_fail malformed "rank 0 of 2: $M" 1 "rank 1 of 2: $M" bad-malformed.vcf

# SIGINT to mpirun mid-job (test builds: rank 0 sleeps after its first
# chunk): every rank ends, rank 0's temporary file goes, no output
NOFALL_TEST_ANNOTATE_CHUNK=2 NOFALL_TEST_DELAY=annotate-chunk:60000 "${MPI[@]}" -x NOFALL_TEST_ANNOTATE_CHUNK \
  -x NOFALL_TEST_DELAY -np 2 "$BIN" annotate "${ARGS[@]}" --out sig.tsv > sig.out 2> sig.err &
pid=$!
for _ in $(seq 600); do grep -q 'test hook: annotate-chunk' sig.err && break; kill -0 $pid 2> /dev/null || break; sleep 0.1; done
if grep -q 'test hook: annotate-chunk' sig.err; then
  kill -INT $pid; wait $pid; rc=$?
  [ $rc -ne 0 ] && [ ! -e sig.tsv ] && ! ls .sig.tsv.*.tmp > /dev/null 2>&1 &&
    ok "SIGINT to mpirun mid-job: exit $rc, no output, no temporary file" || { bad "SIGINT mid-job: exit $rc / files left"; ls -a; }
else
  wait $pid
  echo "skip SIGINT mid-job (a build without NOFALL_TEST_HOOKS)"
fi

[ $fails -eq 0 ] && echo "annotate-mpi: all passed" || echo "annotate-mpi: $fails failed"
exit $((fails > 0))
