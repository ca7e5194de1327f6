#!/usr/bin/env bash
# annotate-scaling.sh -- variants/s of `mpirun -np N nofall annotate` for
# several N on the same VCF, and the ratio to -np 1 (a benchmark, not a
# test; docs/cli.md "Running on a cluster with mpirun"). Each rank gets one core
# and one OpenMP thread (--bind-to core, OMP_NUM_THREADS=1), so the ratio is
# the scaling over ranks; the plain run (no mpirun, every core's threads) is
# printed beside it. Every job's output is checked byte-identical to -np 1's.
#
#   bench/annotate-scaling.sh [--bin build/nofall] [--np "1 2"] [--model M | --small]
#                             [--vcf V --fasta F --genes G] [--device cpu] [--batch 16] [--repeat K]
#
# Defaults: the annotate fixture (tests/fixtures/annotate: 19 records, 17
# scored ALTs), repeated K times (--repeat, default 1) into one VCF, and a
# gen-weights model of the released size (--small: context 100, dim 16,
# depth 1, for a quick check that the script runs).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
FX="$HERE/../tests/fixtures/annotate"
BIN="$HERE/../build/nofall" NPS="1 2" MODEL="" SMALL=0 DEVICE=cpu BATCH=16 REPEAT=1
VCF="$FX/input.vcf" FASTA="$FX/genome.fa" GENES="$FX/genes.gtf"
MPIRUN=${MPIRUN:-mpirun}
while [ $# -gt 0 ]; do
  case $1 in
    --bin) BIN=$2; shift 2 ;;
    --np) NPS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --small) SMALL=1; shift ;;
    --vcf) VCF=$2; shift 2 ;;
    --fasta) FASTA=$2; shift 2 ;;
    --genes) GENES=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=$(readlink -f "$BIN")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d "${TMPDIR:-/tmp}/annotate-scaling.XXXXXX")
trap 'rm -rf "$T"' EXIT
cp "$FASTA" "$T/ref.fa"
if [ -z "$MODEL" ]; then
  MODEL="$T/model"
  if [ $SMALL -eq 1 ]; then
    "$BIN" gen-weights sptransformer --out "$MODEL" --seed 0 --dim 16 --depth 1 --context 100 --window 512 > /dev/null
  else
    "$BIN" gen-weights sptransformer --out "$MODEL" --seed 0 > /dev/null
  fi
fi
# the VCF, its records repeated (same positions: the same work each time)
{ grep '^#' "$VCF"; for _ in $(seq "$REPEAT"); do grep -v '^#' "$VCF"; done; } > "$T/in.vcf"
ARGS=(annotate --model "$MODEL" --vcf "$T/in.vcf" --fasta "$T/ref.fa" --genes "$GENES" --device "$DEVICE" --batch "$BATCH")
"$BIN" "${ARGS[@]}" --out "$T/warm.tsv" > /dev/null 2>&1 # builds the .fai, warms the page cache

now() { date +%s.%N; }
measure() { # label out launcher...
  local label=$1 out=$2; shift 2
  local t0 t1
  t0=$(now)
  "$@" "$BIN" "${ARGS[@]}" --out "$out" > "$out.stdout" 2> "$out.stderr" || { echo "$label failed:"; tail "$out.stderr"; exit 1; }
  t1=$(now)
  local alts windows
  alts=$(sed -n 's/^ALTS_SCORED=//p' "$out.stdout")
  windows=$(sed -n 's/^WINDOWS=//p' "$out.stdout")
  python3 -c "import sys; w=float(sys.argv[1])-float(sys.argv[2]); print(f'{w:.3f} {int(sys.argv[3])/w:.4f} {int(sys.argv[4])/w:.4f}')" \
    "$t1" "$t0" "$alts" "$windows"
}
echo "annotate-scaling: $(grep -vc '^#' "$T/in.vcf") records, device $DEVICE, batch $BATCH, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %10s %12s %12s %8s\n' run wall_s variants/s windows/s ratio
read -r w v x < <(measure plain "$T/plain.tsv")
printf '%-22s %10s %12s %12s %8s\n' "plain ($(nproc) threads)" "$w" "$v" "$x" -
base=""
for n in $NPS; do
  read -r w v x < <(measure "np$n" "$T/np$n.tsv" "$MPIRUN" --oversubscribe --bind-to core -x OMP_NUM_THREADS=1 -np "$n")
  [ -z "$base" ] && base=$v && first=$n
  cmp -s "$T/np$first.tsv" "$T/np$n.tsv" || { echo "np$n: output differs from np$first"; exit 1; }
  printf '%-22s %10s %12s %12s %8s\n' "-np $n (1 thread each)" "$w" "$v" "$x" \
    "$(python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}')" "$v" "$base")"
done
cmp -s "$T/plain.tsv" "$T/np$first.tsv" && echo "outputs: every job byte-identical to the plain run" ||
  echo "outputs: the jobs agree with each other; the plain run (other thread count) differs from them"
