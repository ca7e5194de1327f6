#!/usr/bin/env bash
# tabstar-finetune-cli.sh BIN TMP -- the surfaces of TabSTAR's fit (docs/finetune-tabstar.md) on a
# tiny gen-weights model: `finetune` writes report.json (Mitra's keys where they mean the same, the
# fit's summary under "fine_tune") and draws a bar of epochs with --progress, none with --quiet;
# --val is upstream's x_val (no split); `predict --no-fine-tune` on the fine-tuned directory takes
# its verbalizer.json and so predicts what `predict` (fit + predict in one process) predicts, bit
# for bit (with --max-epochs, --patience, --no-average given to both), and refuses another --train;
# the under-10-rows refusal names the ways out; --no-fine-tune refuses the fit's options.
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
"$BIN" gen-weights tabstar --out "$T/m" --seed 5 --layers 2 --vocab 2000 > /dev/null || { echo "gen-weights failed"; exit 1; }
python3 - "$T" << 'PY'
import sys, math
t = sys.argv[1]
def write(name, rows, target=True):
    with open(f"{t}/{name}", "w") as f:
        f.write("a,b,c" + (",y" if target else "") + "\n")
        for i in rows:
            a = round(math.sin(i) * 3 + i % 5, 3); b = round((i * 0.7) % 2.3, 3); c = "xyz"[i % 3]
            f.write(f"{a},{b},{c}" + ((",yes" if a + b > 2 else ",no") if target else "") + "\n")
write("train.csv", list(range(20)))
write("val.csv", list(range(20, 26)))
write("test.csv", list(range(26, 30)), target=False)
write("small.csv", list(range(9)))
write("other.csv", list(range(30, 50)))
PY
M=$T/m
D=$T

# ---- finetune with --val, --progress: the bar, report.json, the markers, split.json ----
"$BIN" finetune --model "$M" --train "$D/train.csv" --val "$D/val.csv" --target y --max-epochs 2 --progress \
  --out "$T/ftv" > "$T/ftv.out" 2> "$T/ftv.err"
rc=$?
if [ $rc = 0 ] && grep -q '^VALIDATION=table$' "$T/ftv.out" && grep -q '^EPOCHS=2$' "$T/ftv.out" &&
  grep -q '^STOPPED_AT=-1$' "$T/ftv.out" && grep -q '^PRECISION=' "$T/ftv.out" && grep -q 'finetune' "$T/ftv.err" &&
  grep -q 'epochs' "$T/ftv.err"; then
  ok "finetune --val --progress: exit 0, the markers, a bar of epochs"
else
  bad "finetune --val --progress: exit $rc"
  cat "$T/ftv.out" "$T/ftv.err" | head -20
fi
python3 - "$T/ftv" "$D/val.csv" << 'PY' && ok "finetune --val: report.json and split.json" || bad "finetune --val: report.json / split.json"
import json, sys
d, val = sys.argv[1], sys.argv[2]
r = json.load(open(f"{d}/report.json"))
for k in ("command_line", "nofall_version", "model_files", "device", "precision", "train", "val", "options",
          "target", "task", "n_train", "fine_tune", "best_epoch", "epochs_run", "stopped_at", "wall_ms"):
    assert k in r, k
assert r["command_line"][:2] == ["nofall", "finetune"] and r["val"] == val and r["task"] == "classification"
assert all(len(f["sha256"]) == 64 for f in r["model_files"])
f = r["fine_tune"]
assert f["validation"] == "table" and f["n_train_rows"] == 20 and f["n_val_rows"] == 6, f
assert f["epochs_run"] == r["epochs_run"] == 2 and len(f["epochs"]) == 2 and f["stopped_at"] is None
assert [e["epoch"] for e in f["epochs"]] == [1, 2] and 1 <= r["best_epoch"] <= 2
log = [json.loads(l) for l in open(f"{d}/training-log.jsonl")]
assert [e["val_loss"] for e in f["epochs"]] == [e["val_loss"] for e in log[:2]]
s = json.load(open(f"{d}/split.json"))
assert s["train"] == list(range(20)) and s["val"] == list(range(6)) and s["val_table"] == val, s
PY

# ---- without --val (split_to_val), --quiet: no bar; predict --no-fine-tune on it = predict's fit, the
# fit's options (--max-epochs, --patience, --no-average) the same in both commands ----
"$BIN" finetune --model "$M" --train "$D/train.csv" --target y --max-epochs 3 --patience 1 --no-average --quiet \
  --out "$T/ft" \
  > "$T/ft.out" 2> "$T/ft.err"
rc=$?
[ $rc = 0 ] && [ ! -s "$T/ft.err" ] && grep -q '^VALIDATION=internal-split$' "$T/ft.out" &&
  ok "finetune --quiet: exit 0, nothing on stderr" || { bad "finetune --quiet: exit $rc"; cat "$T/ft.err"; }
"$BIN" predict --model "$T/ft" --no-fine-tune --train "$D/train.csv" --test "$D/test.csv" --target y --quiet \
  --out "$T/pno" > /dev/null 2> "$T/pno.err" || { bad "predict --no-fine-tune on the fine-tuned directory"; cat "$T/pno.err"; }
"$BIN" predict --model "$M" --max-epochs 3 --patience 1 --no-average --train "$D/train.csv" --test "$D/test.csv" \
  --target y --quiet --out "$T/pfit" > /dev/null 2> "$T/pfit.err" || { bad "predict (fit first)"; cat "$T/pfit.err"; }
python3 - "$T" << 'PY' && ok "predict --no-fine-tune on the fine-tuned dir = predict's fit + predict, bit for bit" || bad "fine-tuned dir's predictions"
import json, sys
t = sys.argv[1]
a, b = open(f"{t}/pno/logits.npy", "rb").read(), open(f"{t}/pfit/logits.npy", "rb").read()
assert a == b, "logits differ"
rn, rf = json.load(open(f"{t}/pno/report.json")), json.load(open(f"{t}/pfit/report.json"))
assert "verbalizer.json" in rn["verbalizer_fit"] and "fine_tune" not in rn, rn["verbalizer_fit"]
f, ft = rf["fine_tune"], json.load(open(f"{t}/ft/report.json"))["fine_tune"]
assert f["validation"] == "internal split" and f["n_train_rows"] + f["n_val_rows"] == 20
assert f["max_epochs"] == 3 and f["patience"] == 1 and f["average"] is False and f["final"] == "best epoch", f
assert f["epochs"] == ft["epochs"] and f["best_epoch"] == ft["best_epoch"] and f["stopped_at"] == ft["stopped_at"]
assert "split_to_val" in rf["verbalizer_fit"]
PY
"$BIN" predict --model "$T/ft" --no-fine-tune --train "$D/other.csv" --test "$D/test.csv" --target y --quiet \
  --out "$T/pother" > /dev/null 2> "$T/pother.err"
rc=$?
[ $rc != 0 ] && grep -q 'verbalizer.json: the verbalizer the model was fine-tuned with differs' "$T/pother.err" &&
  [ ! -e "$T/pother" ] && ok "another --train on the fine-tuned dir: refused, exit $rc" ||
  { bad "another --train: exit $rc"; cat "$T/pother.err"; }

# ---- the refusals ----
"$BIN" finetune --model "$M" --train "$D/small.csv" --target y --quiet --out "$T/small" > /dev/null 2> "$T/small.err"
rc=$?
[ $rc != 0 ] && grep -q 'at least 10 rows' "$T/small.err" && grep -q -- '--val VAL.csv' "$T/small.err" &&
  grep -q -- '--no-fine-tune (Python: fine_tune=False)' "$T/small.err" && [ ! -e "$T/small" ] &&
  ok "9 rows: refused, naming --val and --no-fine-tune" || { bad "9 rows: exit $rc"; cat "$T/small.err"; }
"$BIN" predict --model "$M" --no-fine-tune --val "$D/val.csv" --train "$D/train.csv" --test "$D/test.csv" --target y \
  --out "$T/noval" > /dev/null 2> "$T/noval.err"
rc=$?
[ $rc = 2 ] && grep -q -- '--no-fine-tune excludes --val' "$T/noval.err" && ok "--no-fine-tune --val: usage error" ||
  { bad "--no-fine-tune --val: exit $rc"; cat "$T/noval.err"; }
for o in "--patience 2" --no-average; do
  # shellcheck disable=SC2086 # $o: the option and its value
  "$BIN" predict --model "$M" --no-fine-tune $o --train "$D/train.csv" --test "$D/test.csv" --target y \
    --out "$T/nopat" > /dev/null 2> "$T/nopat.err"
  rc=$?
  [ $rc = 2 ] && grep -q -- "--no-fine-tune excludes ${o% *}\$" "$T/nopat.err" && ok "--no-fine-tune $o: usage error" ||
    { bad "--no-fine-tune $o: exit $rc"; cat "$T/nopat.err"; }
done
exit $fails
