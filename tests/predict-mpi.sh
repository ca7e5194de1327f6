#!/usr/bin/env bash
# predict-mpi.sh BIN TMP FIXTURES [MPIRUN] [quick] -- `mpirun -np N nofall predict`
# (docs/cli.md "Running on a cluster with mpirun"): the test rows sharded over the
# ranks, rank 0 writing. With a small gen-weights model: predictions.csv,
# probabilities.csv and logits.npy of 1-, 2- and 3-rank jobs are
# byte-identical to the plain run (no mpirun) of the same build --
#   * <= 8,192 training rows (tests/fixtures/predict/breast_cancer,
#     diabetes): --query-chunk 8, so the ranks split the model's query
#     passes, each computing the support stream itself; and the default (one
#     pass: rank 0 computes it);
#   * > 8,192 training rows (tests/fixtures/predict/big: 9,900 rows, 1,100
#     test rows = two 1,024-row chunks, two members): each rank its chunks,
#     drawing the other ranks' random support subsets too (skipped in the
#     quick mode of the sanitizer builds: ~50x slower);
# the report says 2 ranks and which rows each predicted; a rank that fails
# (test builds: NOFALL_TEST_PREDICT_FAIL_RANK) fails the job: exit != 0,
# rank 0 and that rank print its message, no output, a previous --out kept;
# a bad table (every rank's) likewise. As root, Open MPI needs
# OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) (set here).
set -u
BIN=$(readlink -f "$1"); T=$2; FX=$(readlink -f "$3"); MPIRUN=${4:-mpirun}; QUICK=${5:-}
rm -rf "$T"; mkdir -p "$T"
fails=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one thread a process, in every run: the plain run's GEMMs and the ranks'
# then have the same splits (docs/numerics.md "Determinism")
export OMP_NUM_THREADS=1
# localhost, more ranks than cores allowed; no CMA single-copy; under
# AddressSanitizer the ranks without leak checking (Open MPI's own
# allocations, dlclosed in MPI_Finalize), the plain runs keep it
MPI=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$MPIRUN" --oversubscribe
     --mca btl_vader_single_copy_mechanism none -x ASAN_OPTIONS -x OMP_NUM_THREADS)
cd "$T" || exit 1
"$BIN" gen-weights mitra --out cls --seed 0 --dim 16 --layers 1 --heads 2 > gen.out 2>&1 &&
  "$BIN" gen-weights mitra --out reg --seed 0 --dim 16 --layers 1 --heads 2 --task regression --outputs 1 \
    >> gen.out 2>&1 || { bad "gen-weights"; cat gen.out; exit 1; }

run() { # name launcher... -- predict args
  local name=$1; shift
  local pre=()
  while [ "$1" != "--" ]; do pre+=("$1"); shift; done; shift
  if "${pre[@]}" "$BIN" predict "$@" --out "$name" > "$name.out" 2> "$name.err"; then
    ok "$name: exit 0"
  else
    bad "$name: exit $?"; tail -20 "$name.err"
  fi
}
same() { # plain other...
  local p=$1; shift
  for o in "$@"; do
    local good=1
    for f in predictions.csv probabilities.csv logits.npy; do
      [ -f "$p/$f" ] || continue
      cmp -s "$p/$f" "$o/$f" || { good=0; bad "$o/$f differs from $p/$f"; }
    done
    [ $good = 1 ] && ok "$o = $p ($(($(wc -l < "$p/predictions.csv") - 1)) rows, byte for byte)"
  done
}
rows() { # out ranks: the report's ranks and row blocks, end to end
  python3 - "$1/report.json" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2]); q = r["queries"]
rr = q["rank_rows"]
ok = r.get("ranks") == n and len(rr) == n and rr[0][0] == 0 and rr[-1][1] == r["n_test"] and \
     all(rr[i][1] == rr[i + 1][0] for i in range(n - 1))
print(f"  ranks {r.get('ranks')}, rows {rr}, forwards {q['forwards']}, support passes {q['support_passes_total']}")
sys.exit(0 if ok else 1)
PY
}

BC=(--model cls --train "$FX/breast_cancer/train.csv" --test "$FX/breast_cancer/test.csv" --target target
    --n-estimators 2 --seed 3)
run bc-plain -- "${BC[@]}" --query-chunk 8
run bc-np1 "${MPI[@]}" -np 1 -- "${BC[@]}" --query-chunk 8
run bc-np2 "${MPI[@]}" -np 2 -- "${BC[@]}" --query-chunk 8
run bc-np3 "${MPI[@]}" -np 3 -- "${BC[@]}" --query-chunk 8
same bc-plain bc-np1 bc-np2 bc-np3
rows bc-np2 2 && ok "bc-np2 report: 2 ranks, their rows end to end" || bad "bc-np2 report"
rows bc-np3 3 && ok "bc-np3 report: 3 ranks, their rows end to end" || bad "bc-np3 report"
grep -q '^EXIT_CODE=0' bc-np2.out && [ "$(grep -c '^EXIT_CODE=' bc-np2.out)" = 1 ] &&
  ok "bc-np2: markers printed once (rank 0)" || { bad "bc-np2 markers"; cat bc-np2.out; }
# the default: all 40 test rows in one pass (rank 0's)
run bc1-plain -- "${BC[@]}"
run bc1-np2 "${MPI[@]}" -np 2 -- "${BC[@]}"
same bc1-plain bc1-np2
DB=(--model reg --train "$FX/diabetes/train.csv" --test "$FX/diabetes/test.csv" --target target --task regression
    --n-estimators 2 --seed 2 --query-chunk 8)
run db-plain -- "${DB[@]}"
run db-np2 "${MPI[@]}" -np 2 -- "${DB[@]}"
same db-plain db-np2

if [ "$QUICK" != quick ]; then
  BG=(--model cls --train "$FX/big/train.csv" --test "$FX/big/test.csv" --target y --n-estimators 2 --seed 5)
  run big-plain -- "${BG[@]}"
  run big-np2 "${MPI[@]}" -np 2 -- "${BG[@]}"
  same big-plain big-np2
  python3 - big-np2/report.json <<'PY' && ok "big-np2 report: subsets, rank 0 rows [0, 1024), rank 1 [1024, 1100)" || bad "big-np2 report"
import json, sys
q = json.load(open(sys.argv[1]))["queries"]
print(f"  {q}")
sys.exit(0 if q["support_subsets"] and q["rank_rows"] == [[0, 1024], [1024, 1100]] and q["forwards"] == 4 else 1)
PY
else
  echo "skip > 8,192 training rows (quick: a sanitizer build)"
fi

# failures: exit != 0, the failing rank's message on rank 0 and on that rank,
# no output, a previous --out as it was
expect_fail() { # name needle-on-rank-0 rank needle-on-that-rank env... -- predict args
  local name=$1 needle=$2 fr=$3 needle_r=$4; shift 4
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  mkdir -p "keep-$name"; echo previous > "keep-$name/predictions.csv"
  env "${envs[@]}" "${MPI[@]}" -x NOFALL_TEST_PREDICT_FAIL_RANK --tag-output -np 2 "$BIN" predict "$@" \
    --out "$name" > "$name.out" 2> "$name.err"; local rc=$?
  env "${envs[@]}" "${MPI[@]}" -x NOFALL_TEST_PREDICT_FAIL_RANK -np 2 "$BIN" predict "$@" --out "keep-$name" \
    > /dev/null 2>&1
  cat "$name.out" >> "$name.err"
  if [ $rc -eq 0 ]; then bad "$name: exit 0"; return; fi
  if grep -q -F -- ",0]<stderr>:error: $needle" "$name.err" && grep -q -F -- ",$fr]<stderr>:error: $needle_r" "$name.err"; then
    ok "$name: exit $rc, rank 0 prints '$needle', rank $fr '$needle_r'"
  else
    bad "$name: rank 0 / rank $fr lack their messages"; cat "$name.err"
  fi
  grep -q ',0]<stdout>:EXIT_CODE=1' "$name.err" && ok "$name: EXIT_CODE=1 from rank 0" || bad "$name: no EXIT_CODE=1"
  [ ! -e "$name" ] && ! ls -a | grep -q "^\.$name" && ok "$name: no output, no temporary directory" || { bad "$name: files left"; ls -a; }
  [ "$(cat "keep-$name/predictions.csv")" = previous ] && [ "$(ls "keep-$name")" = predictions.csv ] &&
    ok "$name: a previous --out stays as it was" || bad "$name: previous --out changed"
}
# the hook on the plain run (rank 0 of 1): a test build fails it
if NOFALL_TEST_PREDICT_FAIL_RANK=0 "$BIN" predict "${BC[@]}" --out hook-probe > /dev/null 2>&1; then
  echo "skip the failing rank (a build without NOFALL_TEST_HOOKS)"
else
  H="test hook: rank 1 fails its test rows [24, 40)"
  expect_fail rank1 "rank 1 of 2: $H" 1 "rank 1 of 2: $H" NOFALL_TEST_PREDICT_FAIL_RANK=1 -- "${BC[@]}" --query-chunk 8
fi
printf 'mean radius,target\n1,2\n' > badcols.csv
M="badcols.csv: column 'mean texture' of the training table"
expect_fail badtable "rank 0 of 2: $M" 1 "rank 1 of 2: $M" NOFALL_TEST_PREDICT_FAIL_RANK=-1 -- \
  --model cls --train "$FX/breast_cancer/train.csv" --test badcols.csv --target target

[ $fails -eq 0 ] && echo "predict-mpi: all passed" || echo "predict-mpi: $fails failed"
exit $((fails > 0))
