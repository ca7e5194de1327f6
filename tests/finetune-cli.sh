#!/usr/bin/env bash
# finetune-cli.sh BIN TMP -- `nofall finetune` (docs/mitra.md "Fine-tuning") on tiny
# gen-weights Mitra models: the output set (weights, logs, report.json), the
# markers; the written checkpoint has the input's keys and loads with `run`
# and `predict`; the weights moved; --steps = --fine-tune-steps; every bad
# input a clear error naming the flag / file, exit non-zero, --out untouched
# and nothing left behind.
set -u
BIN=$1
T=$2
rm -rf "$T"
mkdir -p "$T"
fails=0
ok() { echo "ok   $*"; }
bad() {
  echo "FAIL $*"
  fails=$((fails + 1))
}

"$BIN" gen-weights mitra --out "$T/mc" --dim 32 --layers 2 --heads 4 --seed 1 > /dev/null || { echo "gen-weights failed"; exit 1; }
"$BIN" gen-weights mitra --out "$T/mr" --dim 32 --layers 2 --heads 4 --outputs 1 --task regression --seed 2 > /dev/null ||
  { echo "gen-weights (regression) failed"; exit 1; }
python3 - "$T" << 'PY'
import sys, math
t = sys.argv[1]
def write(name, rows, target="y", bad=None):
    with open(f"{t}/{name}", "w") as f:
        f.write("a,b,c" + (f",{target}" if target else "") + "\n")
        for i in rows:
            a = round(math.sin(i) * 3, 4); b = round((i * 0.7) % 2.3, 4); c = "xyz"[i % 3]
            y = "yes" if (a + b) > 1 else "no"
            if bad is not None and i == rows[-1]: y = bad
            v = {"y": y, "r": round(2 * a - b, 4)}.get(target)
            f.write(f"{a},{b},{c}" + (f",{v}" if target else "") + "\n")
write("train.csv", list(range(40)))
write("train-r.csv", list(range(40)), target="r")
write("val.csv", list(range(40, 52)))
write("test.csv", list(range(52, 60)), target=None)
write("val-badclass.csv", list(range(40, 52)), bad="maybe")
with open(f"{t}/val-noy.csv", "w") as f:
    f.write("a,b,c\n1,2,x\n")
with open(f"{t}/val-extra.csv", "w") as f:
    f.write("a,b,c,y,zz\n1,2,x,yes,5\n")
PY
keys() { python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; h=json.loads(f.read(n)); print(" ".join(sorted((k, tuple(v["shape"])).__repr__() for k,v in h.items() if k!="__metadata__")))' "$1"; }

# ---- a classification fine-tune with a validation table ----
"$BIN" finetune --model "$T/mc" --train "$T/train.csv" --val "$T/val.csv" --target y --out "$T/ft" --steps 3 \
  --lr 1e-3 --warmup-steps 2 --no-mirror --quiet > "$T/ft.out" 2> "$T/ft.err"
rc=$?
if [ $rc = 0 ] && grep -q '^EXIT_CODE=0$' "$T/ft.out" && grep -q '^STEPS_RUN=3$' "$T/ft.out" &&
  grep -qE '^BEST_STEP=[0-3]$' "$T/ft.out" && grep -qE '^VAL_LOSS=[0-9.e+-]+$' "$T/ft.out" &&
  grep -q '^VALIDATION=table$' "$T/ft.out"; then
  ok "finetune (classification, --val): exit 0, the markers"
else
  bad "finetune (classification, --val): exit $rc"
  cat "$T/ft.out" "$T/ft.err" | head -20
fi
[ "$(ls "$T/ft" | LC_ALL=C sort | tr '\n' ' ')" = "config.json model.safetensors report.json training-log.csv training-log.json " ] &&
  ok "finetune: the output set" || bad "finetune: the output set is $(ls "$T/ft" | tr '\n' ' ')"
[ "$(keys "$T/mc/model.safetensors")" = "$(keys "$T/ft/model.safetensors")" ] && ok "finetune: the checkpoint's keys and shapes" ||
  bad "finetune: the keys differ from the input checkpoint's"
cmp -s "$T/mc/model.safetensors" "$T/ft/model.safetensors" && bad "finetune: the weights did not change" || ok "finetune: the weights changed"
python3 - "$T/ft" "$(grep '^BEST_STEP=' "$T/ft.out" | cut -d= -f2)" << 'PY' && ok "finetune: training-log.csv / .json (steps 0..3, best step = the marker), report.json" || bad "finetune: logs / report"
import csv, json, sys
d, best = sys.argv[1], int(sys.argv[2])
rows = list(csv.DictReader(open(f"{d}/training-log.csv")))
assert [int(r["step"]) for r in rows] == [0, 1, 2, 3], rows
assert rows[0]["train_loss"] == "" and all(float(r["train_loss"]) > 0 for r in rows[1:])
vals = [float(r["val_loss"]) for r in rows]
assert min(range(4), key=lambda i: (vals[i], i)) == best, (vals, best)
assert int(rows[-1]["best_step"]) == best
js = json.load(open(f"{d}/training-log.json"))
assert [s["step"] for s in js["steps"]] == [0, 1, 2, 3] and js["steps"][0]["train_loss"] is None
r = json.load(open(f"{d}/report.json"))
assert r["best_step"] == best and r["steps_run"] == 3 and r["options"]["steps"] == 3 and r["options"]["lr"] == 1e-3
assert r["fine_tune"]["validation"] == "table" and r["command_line"][1] == "finetune" and r["device"] == "cpu"
assert r["nofall_version"] and r["precision"] and r["mirror_signs"] == [[1, 1, 1]], r.get("mirror_signs")
PY
"$BIN" run --model "$T/ft" --out "$T/ft-run" > /dev/null 2>&1 && ok "the fine-tuned checkpoint runs (nofall run)" || bad "nofall run on the fine-tuned checkpoint"
"$BIN" predict --model "$T/ft" --train "$T/train.csv" --test "$T/test.csv" --target y --out "$T/ft-pred" --no-mirror --quiet > /dev/null 2>&1 &&
  ok "the fine-tuned checkpoint predicts (nofall predict)" || bad "nofall predict on the fine-tuned checkpoint"

# ---- --fine-tune-steps = --steps; regression with the internal split; a seed-derived mirror ----
"$BIN" finetune --model "$T/mc" --train "$T/train.csv" --val "$T/val.csv" --target y --out "$T/ft2" --fine-tune-steps 3 \
  --lr 1e-3 --warmup-steps 2 --no-mirror --quiet > /dev/null 2>&1 && cmp -s "$T/ft/model.safetensors" "$T/ft2/model.safetensors" &&
  ok "--fine-tune-steps 3 = --steps 3 (the same weights)" || bad "--fine-tune-steps differs from --steps"
"$BIN" finetune --model "$T/mr" --train "$T/train-r.csv" --target r --out "$T/ftr" --steps 2 --quiet > "$T/ftr.out" 2>&1 &&
  grep -q '^VALIDATION=internal-split$' "$T/ftr.out" && grep -q '^STEPS_RUN=2$' "$T/ftr.out" &&
  "$BIN" run --model "$T/ftr" --out "$T/ftr-run" > /dev/null 2>&1 && ok "finetune (regression, internal split, mirror from --seed)" ||
  { bad "finetune (regression, internal split)"; head -20 "$T/ftr.out"; }

# ---- predict --fine-tune: fit with fine-tuning, then predict (report.json says so) ----
"$BIN" predict --model "$T/mc" --train "$T/train.csv" --test "$T/test.csv" --target y --out "$T/pft" --fine-tune \
  --fine-tune-steps 3 --val "$T/val.csv" --lr 1e-3 --warmup-steps 2 --no-mirror --quiet > "$T/pft.out" 2>&1
rc=$?
"$BIN" predict --model "$T/mc" --train "$T/train.csv" --test "$T/test.csv" --target y --out "$T/p0" --no-mirror --quiet > /dev/null 2>&1
if [ $rc = 0 ] && python3 - "$T/pft/report.json" "$T/ft/report.json" "$T/p0/report.json" << 'PY'; then
import json, sys
r, f, z = (json.load(open(p)) for p in sys.argv[1:4])
ft = r["fine_tune"]
assert ft["steps"] == 3 and ft["steps_run"] == 3 and ft["best_step"] == f["best_step"], ft
assert ft["best_val_loss"] == f["best_val_loss"] and ft["validation"] == "table"
assert "fine_tune" not in z
PY
  ok "predict --fine-tune: report.json's fine_tune item (the steps, finetune's best step and loss)"
else
  bad "predict --fine-tune: exit $rc"
  head -20 "$T/pft.out"
fi
cmp -s "$T/pft/predictions.csv" "$T/p0/predictions.csv" && cmp -s "$T/pft/probabilities.csv" "$T/p0/probabilities.csv" &&
  bad "predict --fine-tune: the probabilities equal zero-shot's" || ok "predict --fine-tune: other probabilities than zero-shot's"
"$BIN" predict --model "$T/mc" --train "$T/train.csv" --test "$T/test.csv" --target y --out "$T/pbad" --lr 1e-3 > "$T/pbad.out" 2>&1
[ $? = 2 ] && grep -qF -- "--lr is a fine-tuning option: it needs --fine-tune" "$T/pbad.out" && [ ! -e "$T/pbad" ] &&
  ok "predict --lr without --fine-tune refused" || bad "predict --lr without --fine-tune: $(cat "$T/pbad.out")"
# --no-fine-tune on Mitra: its default said (TabSTAR's spelling), the zero-shot outputs; with --fine-tune: refused
"$BIN" predict --model "$T/mc" --train "$T/train.csv" --test "$T/test.csv" --target y --out "$T/pno" --no-mirror --quiet \
  --no-fine-tune > /dev/null 2>&1 && cmp -s "$T/pno/probabilities.csv" "$T/p0/probabilities.csv" &&
  cmp -s "$T/pno/logits.npy" "$T/p0/logits.npy" && ok "predict --no-fine-tune on Mitra: the zero-shot outputs" ||
  bad "predict --no-fine-tune on Mitra"
"$BIN" predict --model "$T/mc" --train "$T/train.csv" --test "$T/test.csv" --target y --out "$T/pbad" --no-fine-tune \
  --fine-tune > "$T/pbad.out" 2>&1
[ $? = 2 ] && grep -qF -- "--no-fine-tune excludes --fine-tune" "$T/pbad.out" && [ ! -e "$T/pbad" ] &&
  ok "predict --no-fine-tune --fine-tune refused" || bad "predict --no-fine-tune --fine-tune: $(cat "$T/pbad.out")"
# an ensemble of fine-tuned members (upstream's n_estimators): member 0 is the one-member run (the same
# stream from the same seed), member 1 continues it; report.json lists both runs
"$BIN" predict --model "$T/mc" --train "$T/train.csv" --test "$T/test.csv" --target y --out "$T/pens" --fine-tune \
  --fine-tune-steps 3 --val "$T/val.csv" --lr 1e-3 --warmup-steps 2 --no-mirror --n-estimators 2 --quiet > "$T/pens.out" 2>&1
rc=$?
if [ $rc = 0 ] && python3 - "$T/pens/report.json" "$T/pft/report.json" << 'PY'; then
import json, sys
e, one = (json.load(open(p))["fine_tune"] for p in sys.argv[1:3])
m = e["members"]
assert len(m) == 2 and m[0]["best_step"] == one["best_step"] and m[0]["best_val_loss"] == one["best_val_loss"], (m, one)
assert m[1]["steps_run"] == 3 and m[1]["best_val_loss"] == e["best_val_loss"], m
PY
  ok "predict --fine-tune --n-estimators 2: two members, the first the one-member run"
else
  bad "predict --fine-tune --n-estimators 2: exit $rc"
  head -20 "$T/pens.out"
fi

# ---- refusals: exit non-zero, the flag / file named, --out untouched, nothing left behind ----
mkdir -p "$T/prev"
echo keep > "$T/prev/config.json"
snapshot() { (cd "$1" && ls -A | LC_ALL=C sort && find . -type f -exec sha256sum {} + | LC_ALL=C sort); }
before=$(snapshot "$T/prev")
refuse() { # name want-exit needle args...
  local name=$1 want=$2 needle=$3
  shift 3
  "$BIN" finetune "$@" > "$T/$name.out" 2> "$T/$name.err"
  local rc=$?
  if [ $rc = "$want" ] && grep -qF -- "$needle" "$T/$name.err" && [ "$(snapshot "$T/prev")" = "$before" ] &&
    ! ls -A "$T" | grep -q '^\.prev\.nofall'; then
    ok "$name: exit $rc, '$needle'"
  else
    bad "$name: exit $rc (want $want, '$needle')"
    head -5 "$T/$name.err"
  fi
}
M=(--model "$T/mc" --train "$T/train.csv" --target y --out "$T/prev" --steps 1 --quiet)
refuse no-out 2 "finetune needs --model DIR --train TRAIN.csv --target COLUMN --out MODEL_DIR" --model "$T/mc" --train "$T/train.csv" --target y
refuse bad-lr 2 "--lr" "${M[@]}" --lr -1
refuse bad-patience 2 "--patience" "${M[@]}" --patience 0
refuse steps-differ 2 "--steps 1 and --fine-tune-steps 2 differ" "${M[@]}" --fine-tune-steps 2
refuse mirror-both 2 "--mirror-signs and --no-mirror exclude each other" "${M[@]}" --no-mirror --mirror-signs "$T/ft/report.json"
refuse no-target 1 "train.csv: no column 'zz' (--target)" --model "$T/mc" --train "$T/train.csv" --target zz --out "$T/prev"
refuse val-missing 1 "nope.csv" "${M[@]}" --val "$T/nope.csv"
refuse val-no-target 1 "val-noy.csv: no column 'y' (--target; --val needs it)" "${M[@]}" --val "$T/val-noy.csv"
refuse val-extra-column 1 "val-extra.csv: column 'zz' is not in the training table" "${M[@]}" --val "$T/val-extra.csv"
refuse val-bad-class 1 "val-badclass.csv: row 12, column 'y' (the target): 'maybe' is not a class" "${M[@]}" --val "$T/val-badclass.csv"
refuse wrong-model 1 "regressor" --model "$T/mr" --train "$T/train.csv" --target y --out "$T/prev" --steps 1 --quiet
refuse out-is-input 1 "--out" --model "$T/mc" --train "$T/train.csv" --target y --out "$T/mc" --steps 1 --quiet
[ -f "$T/mc/model.safetensors" ] && [ "$(keys "$T/mc/model.safetensors")" = "$(keys "$T/ft/model.safetensors")" ] &&
  ok "--out = --model refused: the model intact" || bad "--out = --model: the model was touched"

echo "finetune-cli: $fails failed"
[ $fails = 0 ]
