#!/usr/bin/env bash
# tabstar-fit-vs-upstream.sh [BUILD_DIR] -- one run on this machine: TabSTAR's
# fit, nofall's cpu backend (`nofall finetune`) beside upstream's own
# TabSTARClassifier.fit (tabstar 1.1.16, torch CPU fp32, reference/
# bench_tabstar_fit.py), the same table, the same epochs, one thread each
# (OMP_NUM_THREADS=1, torch.set_num_threads(1)). A benchmark: it asserts
# nothing.
#
# Table: sklearn's wine (178 rows x 13 numeric columns, 3 cultivars), real
# data shipped with sklearn. Model: `nofall gen-weights tabstar` at full size
# (12 text layers, vocab 30522: e5-small's shape; upstream's model built on
# the same weights). EPOCHS epochs (OneCycle's length too, no early stop).
# Sides, interleaved ROUNDS times (the machine may be shared: CPU seconds,
# not wall time, are compared; the load average is printed):
#   upstream          fit() as upstream runs it: dropout 0.1 everywhere
#                     (CPU seconds of fit() alone; the process's too)
#   nofall-dropout    nofall finetune --dropout 0.1 (the same kind of work:
#                     text layers 0-5 per batch, masks applied)
#   nofall            nofall finetune (its default: dropout off)
# nofall's figure is the whole process (load, verbalize, fit, write the
# merged checkpoint). Ratio = upstream fit() CPU s / nofall process CPU s,
# per round and the median.
# Env: EPOCHS (3), ROUNDS (2), PY (/work/.venv-tab/bin/python), MODEL
# (build dir's tabstar-bench-model).
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
EPOCHS=${EPOCHS:-3}; ROUNDS=${ROUNDS:-2}
PY=${PY:-/work/.venv-tab/bin/python}
MODEL=${MODEL:-$B/tabstar-bench-model}
[ -x "$PY" ] || { echo "no $PY (pip install tabstar==1.1.16 in a venv)" >&2; exit 1; }
cmake --build "$B" --target nofall-cli -j2 >/dev/null || exit 1
BIN=$B/nofall
[ -f "$MODEL/model.safetensors" ] || "$BIN" gen-weights tabstar --out "$MODEL" --seed 5 >/dev/null || exit 1
DATA=$(mktemp -d)
trap 'rm -rf "$DATA"' EXIT
"$PY" reference/bench_tabstar_fit.py --write-data "$DATA" || exit 1
echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'), $(nproc --all) cores; threads: 1"
export OMP_NUM_THREADS=1
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); table: wine 178 x 13; epochs: $EPOCHS"
echo "uptime before: $(uptime)"
RES=$DATA/results.txt
: > "$RES"
nofall_run() { # NAME DROPOUT
  /usr/bin/time -o "$DATA/nf.time" -f "%U %S %e %M" "$BIN" finetune --model "$MODEL" --train "$DATA/wine.csv" \
    --target cultivar --task classification --out "$DATA/out" --max-epochs "$EPOCHS" --dropout "$2" \
    > "$DATA/nf.out" 2>/dev/null
  set -- "$1" $(tail -1 "$DATA/nf.time")
  echo "$1 cpu_s=$(echo "$2 + $3" | bc) wall_s=$4 peak_rss_mb=$(( $5 / 1024 )) $(grep -E '^(EPOCHS|VAL_METRIC)=' "$DATA/nf.out" | tr '\n' ' ')"
}
for r in $(seq 1 "$ROUNDS"); do
  u=$("$PY" reference/bench_tabstar_fit.py --model "$MODEL" --train "$DATA/wine.csv" --epochs "$EPOCHS" 2>/dev/null | tail -1)
  echo "round $r upstream: $u"
  ucpu=$(echo "$u" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["fit_cpu_s"])' 2>/dev/null || echo nan)
  nd=$(nofall_run nofall-dropout 0.1); echo "round $r $nd"
  n0=$(nofall_run nofall 0); echo "round $r $n0"
  echo "$r $ucpu $(echo "$nd" | sed 's/.*cpu_s=\([0-9.]*\).*/\1/') $(echo "$n0" | sed 's/.*cpu_s=\([0-9.]*\).*/\1/')" >> "$RES"
done
echo "uptime after: $(uptime)"
python3 - "$RES" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
ra = [float(u) / float(d) for _, u, d, _ in rows]
rb = [float(u) / float(n) for _, u, _, n in rows]
for (r, u, d, n), a, b in zip(rows, ra, rb):
    print(f"round {r}: upstream fit {u} CPU s; nofall --dropout 0.1 {d} CPU s (x{a:.2f}); nofall {n} CPU s (x{b:.2f})")
print(f"RATIO upstream/nofall-dropout (median) x{statistics.median(ra):.2f}; upstream/nofall (median) x{statistics.median(rb):.2f}")
EOF
