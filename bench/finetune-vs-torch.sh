#!/usr/bin/env bash
# finetune-vs-torch.sh [BUILD_DIR] -- one run on this machine: Mitra
# fine-tuning, nofall's cpu backend (build/nofall-bench-finetune, nf_finetune)
# beside upstream AutoGluon's own CPU fine-tune (reference/bench_finetune.py:
# MitraClassifier(fine_tune=True).fit in fp32, autocast off; and, on the full
# case, under AutoGluon's default bf16 autocast), the same data,
# steps and thread count, one after the other; then a small case on
# opencl:0. Prints each side's JSON, a table, and the ratios (upstream time /
# nofall time, nofall peak RSS / upstream peak RSS), with the load average
# before and after (the wall-clock ratios are only as good as the machine is
# quiet; the fit's process CPU seconds, fit_cpu_s, are the figure to quote on
# a shared machine, with THREADS=1).
# A benchmark: it asserts nothing.
#
# Full case: 1,000 x 20 table (800 train / 200 validation rows given as
# X_val, 3 classes), the full-size synthetic checkpoint (gen-weights mitra
# --seed 0: dim 512, 12 layers), STEPS steps. One step at this size is about
# 10-14 TFLOP plus a 4.6 TFLOP validation (finetune.md §5.2), so the default
# is STEPS=1 (AutoGluon's default is 50): the epoch-0 validation, one
# episode's forward/backward/AdamW and its validation.
# Small case (run first): the same table, a dim-32 2-layer checkpoint, SMALL_STEPS steps,
# on upstream cpu, nofall cpu and nofall opencl:0 (PoCL on a CPU is slow).
# Env: STEPS (1), SMALL_STEPS (3), THREADS (2: OMP_NUM_THREADS / torch
# threads), PY (.venv-ref/bin/python), MODEL (models/mitra-synthetic),
# TINY (models/mitra-ft-tiny), SKIP_FULL=1 / SKIP_SMALL=1.
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
STEPS=${STEPS:-1}; SMALL_STEPS=${SMALL_STEPS:-3}; THREADS=${THREADS:-2}
PY=${PY:-.venv-ref/bin/python}
MODEL=${MODEL:-models/mitra-synthetic}
TINY=${TINY:-models/mitra-ft-tiny}
[ -x "$PY" ] || { echo "no $PY: run reference/setup-venv.sh first" >&2; exit 1; }
cmake --build "$B" --target nofall-cli nofall-bench-finetune -j2 >/dev/null || exit 1
BIN=$B/nofall
[ -f "$MODEL/model.safetensors" ] || "$BIN" gen-weights mitra --out "$MODEL" --seed 0 >/dev/null
[ -f "$TINY/model.safetensors" ] || "$BIN" gen-weights mitra --out "$TINY" --seed 1 --dim 32 --layers 2 \
  --heads 4 --outputs 10 --task classification >/dev/null
DATA=$(mktemp -d)
trap 'rm -rf "$DATA"' EXIT
"$PY" reference/bench_finetune.py --write-data "$DATA" --no-fit || exit 1
export OMP_NUM_THREADS=$THREADS

echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'), $(nproc) cores; threads: $THREADS"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "uptime before: $(uptime)"
upstream() { "$PY" reference/bench_finetune.py --model "$1" --steps "$2" --threads "$THREADS" "${@:3}" 2>/dev/null | tail -1; }
nofall() { "$B/nofall-bench-finetune" --model "$1" --data "$DATA" --device "$2" --steps "$3"; }
RES=$DATA/results.jsonl
: > "$RES"
add() {
  case "$2" in "{"*) ;; *) echo "$1: no result: $2"; return;; esac
  echo "$2" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d["case"]=sys.argv[1]; print(json.dumps(d))' "$1" >> "$RES"
  echo "$1: $2"
}
if [ "${SKIP_SMALL:-0}" != 1 ]; then
  add "small-${SMALL_STEPS}step" "$(upstream "$TINY" "$SMALL_STEPS")"
  add "small-${SMALL_STEPS}step" "$(nofall "$TINY" cpu "$SMALL_STEPS")"
  add "small-${SMALL_STEPS}step" "$(nofall "$TINY" opencl:0 "$SMALL_STEPS" 2>&1 | tail -1)"
fi
if [ "${SKIP_FULL:-0}" != 1 ]; then
  add "full-${STEPS}step" "$(upstream "$MODEL" "$STEPS")"
  add "full-${STEPS}step" "$(nofall "$MODEL" cpu "$STEPS")"
  add "full-${STEPS}step" "$(upstream "$MODEL" "$STEPS" --autocast)"
  # nofall has no bf16-autocast fine-tune yet: the library refuses it (the backward ops have no
  # bf16 rules, docs/precision.md), so the autocast row has no nofall counterpart
fi
echo "uptime after: $(uptime)"
python3 - "$RES" <<'EOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    try:
        rows.append(json.loads(line))
    except ValueError:
        pass
def f(v):
    return "%.2f" % v if isinstance(v, (int, float)) else "n/a"
print("%-14s %-9s %-9s %-13s %10s %10s %12s %12s %10s %10s %10s" % ("case", "side", "device", "precision", "fit_s",
      "eval0_s", "step_s(1st)", "train_s(1st)", "fit_cpu_s", "eval0_cpu", "peak_MB"))
for r in rows:
    print("%-14s %-9s %-9s %-13s %10s %10s %12s %12s %10s %10s %10s" % (r["case"], r["side"], r["device"],
          r.get("precision", "fp32"), f(r.get("fit_s")),
          f(r.get("eval0_s")), f((r.get("step_s") or [None])[0]), f((r.get("train_s") or [None])[0]),
          f(r.get("fit_cpu_s")), f(r.get("eval0_cpu_s")), "%.0f" % r["peak_rss_mb"]))
print("ratios (upstream time / nofall time; nofall peak / upstream peak):")
for case in dict.fromkeys(r["case"] for r in rows):
    ups = [r for r in rows if r["case"] == case and r["side"] == "upstream"]
    for u, nf in ((u, nf) for u in ups for nf in rows if nf["case"] == case and nf["side"] == "nofall"):
        print("  upstream %s beside:" % u.get("precision", "fp32"))
        mean = lambda v: sum(v) / len(v) if v else float("nan")
        cpu = u.get("fit_cpu_s") and nf.get("fit_cpu_s") and u["fit_cpu_s"] / nf["fit_cpu_s"]
        print("  %-14s nofall %-9s fit %5.2fx  eval0 %5.2fx  step %5.2fx  train %5.2fx  fit CPU s %s  peak %.2f" % (
            case, nf["device"], u["fit_s"] / nf["fit_s"], u["eval0_s"] / nf["eval0_s"],
            mean(u["step_s"]) / mean(nf["step_s"]), mean(u["train_s"]) / mean(nf["train_s"]),
            "%5.2fx" % cpu if cpu else "n/a", nf["peak_rss_mb"] / u["peak_rss_mb"]))
EOF
