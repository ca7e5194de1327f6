#!/usr/bin/env bash
# predict.sh NOFALL TMPDIR FIXTURES [DEVICE [CASE...]] -- `nofall predict` on DEVICE (cpu) against
# AutoGluon's own pipeline (tests/fixtures/predict, made by
# reference/predict_fixtures.py; "big": 9,900 training rows, so a random
# 8,192-row support per 1,024 test rows and member, as AutoGluon draws it):
# probabilities max_abs <= 1e-5 (regression:
# predictions within 1e-5 * max(1, max|y|)), identical labels, identical kept /
# dropped columns and mirror signs; the same with --query-chunk 3 (the test
# rows streamed 3 at a time against the support computed once) on three
# cases; then (cpu only: the rest is device-independent) --mirror-signs and
# the bad tables: exit != 0, a message naming the file / row / column, and
# --out left as it was.
# CASE...: only these fixtures (NAME, or NAME@qc for its --query-chunk 3 run);
# tests/CMakeLists.txt runs every case on cpu, two on opencl:0 (the kernels
# are the op conformance suite's; predict-opencl proves the pipeline's
# placement on the device, small and full-size weights).
# SMALL=1 (the sanitizer build): the cases on the full-size weights run on a
# small model (dim 16, 1 layer, 2 heads) and check everything but the values
# (columns kept / dropped and their types, mirror signs, classes, rows, the
# support plan); the cases with their own small weights ("big", the date
# samples) keep their values. The release build checks every value.
set -u
SMALL=${SMALL:-0}
NF=$1
T=$2
FX=$3
DEV=${4:-cpu}
shift $(($# < 4 ? $# : 4))
rm -rf "$T"
mkdir -p "$T"
fail=0
ok() { echo "ok   $*"; }
bad() {
    echo "FAIL $*"
    fail=1
}

# the small model (cls-s, reg-s): --mirror-signs, column typing, and under SMALL every case on full-size weights
"$NF" gen-weights mitra --out "$T/cls-s" --seed 0 --dim 16 --layers 1 --heads 2 >/dev/null || exit 1
"$NF" gen-weights mitra --out "$T/reg-s" --seed 0 --task regression --outputs 1 --dim 16 --layers 1 --heads 2 >/dev/null ||
    exit 1
CLS=$T/cls-s REG=$T/reg-s
if [ "$SMALL" != 1 ]; then
    CLS=$T/cls REG=$T/reg
    "$NF" gen-weights mitra --out "$CLS" --seed 0 >/dev/null || exit 1
    "$NF" gen-weights mitra --out "$REG" --seed 0 --task regression --outputs 1 >/dev/null || exit 1
fi

ALL=("$FX"/*/ "$FX"/iris/@qc "$FX"/penguins/@qc "$FX"/diabetes/@qc)
if [ $# -gt 0 ]; then
    ALL=()
    for c in "$@"; do
        case $c in *@qc) ALL+=("$FX/${c%@qc}/@qc") ;; *) ALL+=("$FX/$c/") ;; esac
        [ -f "$FX/${c%@qc}/case.json" ] || { echo "FAIL no fixture $c in $FX"; exit 1; }
    done
fi
for d in "${ALL[@]}"; do
    qc=()
    case $d in */@qc) d=${d%@qc}; qc=(--query-chunk 3) ;; esac
    [ -f "$d/case.json" ] || continue
    c=$(basename "$d")${qc[0]:+-qc3}
    read -r target task nest seed wtask nomirror < <(python3 -c "
import json; c = json.load(open('$d/case.json'))
print(c['target'], c['task'], c['n_estimators'], c['seed'], c['weights']['task'],
      '' if c.get('mirror_enabled', True) else '--no-mirror')")
    m=$CLS
    [ "$wtask" = regression ] && m=$REG
    # a case's own (small) weights: case.json weights.args, e.g. the > 8,192-row case
    wargs=$(python3 -c "import json; print(' '.join(json.load(open('$d/case.json'))['weights'].get('args', [])))")
    if [ -n "$wargs" ]; then
        m=$T/w-$(basename "$d")
        [ -d "$m" ] || { [ "$wtask" = regression ] && extra=(--task regression --outputs 1) || extra=();
            "$NF" gen-weights mitra --out "$m" --seed 0 "${extra[@]}" $wargs >/dev/null || exit 1; }
    fi
    # --column-type COL=TYPE: case.json column_types (read_csv's dtype / parse_dates upstream)
    ctypes=()
    while read -r ct; do [ -n "$ct" ] && ctypes+=(--column-type "$ct"); done < <(python3 -c "
import json; [print(f'{k}={v}') for k, v in json.load(open('$d/case.json')).get('column_types', {}).items()]")
    if ! "$NF" predict --model "$m" --train "$d/train.csv" --test "$d/test.csv" --target "$target" --task "$task" \
        --n-estimators "$nest" --seed "$seed" $nomirror --device "$DEV" "${qc[@]}" "${ctypes[@]}" \
        --out "$T/out-$c" >"$T/$c.log" 2>&1; then
        bad "$c: predict failed: $(tail -1 "$T/$c.log")"
        continue
    fi
    values=1
    [ "$SMALL" = 1 ] && [ -z "$wargs" ] && values=0
    if python3 - "$d" "$T/out-$c" "$values" <<'EOF'; then ok "$c$([ $values = 0 ] && echo ' (small model: not the values)')"; else bad "$c"; fi
import csv, json, sys
d, o = sys.argv[1], sys.argv[2]
values = sys.argv[3] == "1"
c = json.load(open(f"{d}/case.json"))
r = json.load(open(f"{o}/report.json"))
good = True
def check(what, cond, detail=""):
    global good
    if not cond:
        print(f"  {what}: mismatch {detail}")
        good = False
kept = [x["name"] for x in r["columns_kept"]]
dropped = sorted(x["name"] for x in r["columns_dropped"])
check("kept columns", kept == c["kept"], f"{kept} vs {c['kept']}")
check("dropped columns", dropped == sorted(c["dropped"]), f"{dropped} vs {c['dropped']}")
check("column types", [x["type"] for x in r["columns_kept"]] == [c["types"][k] for k in c["kept"]])
check("mirror signs", r["mirror_signs"] == c["mirror"])
pred = [row[0] for row in list(csv.reader(open(f"{o}/predictions.csv")))[1:]]
if "labels" in c:
    rows = list(csv.reader(open(f"{o}/probabilities.csv")))
    check("classes", rows[0] == c["classes"], f"{rows[0]} vs {c['classes']}")
    got = [[float(v) for v in row] for row in rows[1:]]
    exp = [[float(v) for v in l.split(",")] for l in open(f"{d}/expected_probabilities.csv")]
    check("rows", len(got) == len(exp))
    err = max(abs(a - b) for ga, ea in zip(got, exp) for a, b in zip(ga, ea))
    if values:
        check("probabilities", err <= 1e-5, f"max_abs {err}")
        check("labels", pred == c["labels"])
    else:
        check("labels are classes", all(p in c["classes"] for p in pred), str(pred[:5]))
    print(f"  max_abs {err:.3g}, {len(pred)} labels")
else:
    check("regression mirror", r["regression_mirror"] == c["regression_mirror"])
    got = [float(v) for v in pred]
    exp = [float(l) for l in open(f"{d}/expected_predictions.csv")]
    check("rows", len(got) == len(exp))
    s = max(1.0, max(abs(v) for v in exp))
    err = max(abs(a - b) for a, b in zip(got, exp))
    if values:
        check("predictions", err <= 1e-5 * s, f"max_abs {err} (scale {s})")
    print(f"  max_abs {err:.3g} (scale {s:.3g})")
q = r["queries"]
check("support computed once per estimator", q["support_passes"] == 1, str(q))
n_train = sum(1 for _ in open(f"{d}/train.csv")) - 1
if n_train > 8192:
    # a random 8,192-row subset per 1,024 test rows and member (docs/mitra.md "More than 8,192 training rows")
    n_test = len(pred)
    check("support subsets", q["support_subsets"] is True and q["support_rows"] == 8192 and
          q["forwards"] == c["n_estimators"] * -(-n_test // 1024), str(q))
else:
    check("the whole table as support", q["support_subsets"] is False and q["support_rows"] == n_train and
          q["forwards"] == c["n_estimators"], str(q))
if o.endswith("-qc3"):
    check("queries 3 a pass", q["query_chunk"] == 3, str(q))
sys.exit(0 if good else 1)
EOF
done
if [ "$DEV" != cpu ]; then
    [ $fail -eq 0 ] && echo "predict.sh ($DEV): all passed" || echo "predict.sh ($DEV): failures"
    exit $fail
fi

# ---- --mirror-signs: a previous run's report.json reproduces it byte for byte ---------
# (on a small model: what is checked is the byte-for-byte replay, not a value)
M=$T/mirror
mkdir -p "$M"
for c in penguins diabetes; do
    d=$FX/$c
    read -r target wtask < <(python3 -c "
import json; c = json.load(open('$d/case.json')); print(c['target'], c['weights']['task'])")
    m=$T/cls-s
    [ "$wtask" = regression ] && m=$T/reg-s
    if ! "$NF" predict --model "$m" --train "$d/train.csv" --test "$d/test.csv" --target "$target" --n-estimators 3 \
        --seed 11 --out "$M/a-$c" >"$M/a-$c.log" 2>&1 ||
        ! "$NF" predict --model "$m" --train "$d/train.csv" --test "$d/test.csv" --target "$target" \
            --mirror-signs "$M/a-$c/report.json" --out "$M/b-$c" >"$M/b-$c.log" 2>&1; then
        bad "mirror-signs $c: predict failed: $(tail -1 "$M/a-$c.log") $(tail -1 "$M/b-$c.log")"
        continue
    fi
    same=1
    for f in predictions.csv probabilities.csv logits.npy; do
        [ -f "$M/a-$c/$f" ] || continue
        cmp -s "$M/a-$c/$f" "$M/b-$c/$f" || same=0
    done
    if [ $same -eq 1 ] && python3 -c "
import json, sys
a, b = (json.load(open(f'$M/{x}-$c/report.json')) for x in 'ab')
sys.exit(0 if a['mirror_signs'] == b['mirror_signs'] and a.get('regression_mirror') == b.get('regression_mirror')
         and b['n_estimators'] == 3 else 1)"; then
        ok "mirror-signs $c: the report's signs reproduce its outputs byte for byte"
    else
        bad "mirror-signs $c: outputs differ"
    fi
done
# bad mirror-signs files: refused, nothing written
d=$FX/penguins
target=$(python3 -c "import json; print(json.load(open('$d/case.json'))['target'])")
python3 - "$M/a-penguins/report.json" "$M" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
def put(name, doc):
    json.dump(doc, open(f"{sys.argv[2]}/{name}.json", "w"))
names = [c["name"] for c in r["columns_kept"]]
put("cols", {"columns_kept": names[::-1], "mirror_signs": r["mirror_signs"]})
put("fewcols", {"columns_kept": names[:-1], "mirror_signs": [s[:-1] for s in r["mirror_signs"]]})
put("short", {"columns_kept": names, "mirror_signs": [r["mirror_signs"][0][:-1]]})
put("value", {"columns_kept": names, "mirror_signs": [[2] + r["mirror_signs"][0][1:]]})
put("nosigns", {"columns_kept": names})
open(f"{sys.argv[2]}/notjson.json", "w").write("{\"columns_kept\": [")
EOF
expect_mirror_fail() {
    local name=$1 want=$2
    shift 2
    if "$NF" predict --model "$T/cls-s" --train "$d/train.csv" --test "$d/test.csv" --target "$target" \
        --mirror-signs "$M/$name.json" "$@" --out "$M/new-$name" >"$M/$name.log" 2>&1; then
        bad "bad mirror-signs $name: exit 0"
    elif ! grep -qF -- "$want" "$M/$name.log"; then
        bad "bad mirror-signs $name: message lacks '$want': $(grep error "$M/$name.log")"
    elif [ -e "$M/new-$name" ]; then
        bad "bad mirror-signs $name: --out created"
    else
        ok "bad mirror-signs $name: $(grep error "$M/$name.log")"
    fi
}
expect_mirror_fail cols "cols.json: kept column 1 is"
expect_mirror_fail fewcols "kept columns, the preprocessing of"
expect_mirror_fail short "mirror_signs[0] is not a list of"
expect_mirror_fail value "mirror_signs[0][0] is not 1 or -1"
expect_mirror_fail nosigns "no \"mirror_signs\" list"
expect_mirror_fail notjson "notjson.json"
cp "$M/a-penguins/report.json" "$M/members.json"
expect_mirror_fail members "3 lists of signs (ensemble members), the predictor has 2" --n-estimators 2

# ---- bad tables ---------------------------------------------------------------------
B=$T/bad
mkdir -p "$B"
printf 'a,b,y\n1,2,x\n3,4,z\n5,6,x\n7,8,z\n' >"$B/good.csv"
printf 'a,b,y\n1,2,x\n3,4\n5,6,x\n' >"$B/ragged.csv"
printf 'a,b,y\n1,2,x\n3,4,5,6\n' >"$B/long.csv"
printf 'a,b\n1,2\n3,4\n' >"$B/notarget.csv"
printf 'a,c,y\n1,2,x\n' >"$B/othercols.csv"
printf 'a,y\n1,x\n' >"$B/fewercols.csv"
printf 'a,b,y\n1,2,x\n3,4,x\n' >"$B/oneclass.csv"
python3 -c "
print('a,b,y')
for i in range(24): print(f'{i},{i % 3},c{i % 12}')" >"$B/many.csv"
printf 'a,b,y\n1,2,x\n3,\xff\xfe,z\n' >"$B/latin.csv"
: >"$B/empty.csv"
printf 'a,b,y\n1,"2,x\n' >"$B/quote.csv"
printf 'a,b,y\n1,two,x\n' >"$B/textnum.csv"
# AutoGluon's special types: free text (refused), dates nofall cannot read as pandas does
printf 'a,b,y\n1,the quick brown fox,x\n2,jumps over the dog,z\n3,a b c d,x\n4,and so it goes,z\n' >"$B/text.csv"
printf 'a,b,y\n1,2021-03-04,x\n2,03/04/2021,z\n3,2021-05-06 10:00,x\n4,2020-01-02,z\n' >"$B/dateus.csv"
printf 'a,b,y\n1,2021-03-04,x\n2,unknown,z\n3,2021-05-06 10:00,x\n4,2020-01-02,z\n' >"$B/dates.csv"
printf 'a,b,y\n1,2021-03-04,x\n2,4 May 2021,z\n' >"$B/datetest.csv"
printf 'a,b,y\n1,A1,x\n2,x1,z\n3,10:30,x\n4,B2,z\n5,C3,x\n' >"$B/dateunsure.csv"

mkdir -p "$B/out"
echo keep >"$B/out/predictions.csv"
cp -r "$B/out" "$B/out.orig"
# name: train test expected-substring
expect_fail() {
    local name=$1 train=$2 test=$3 want=$4
    local o
    for o in "$B/out" "$B/new-$name"; do
        if "$NF" predict --model "$CLS" --train "$train" --test "$test" --target y --out "$o" >"$B/$name.log" 2>&1; then
            bad "bad table $name: exit 0"
            return
        fi
    done
    if ! grep -qF -- "$want" "$B/$name.log"; then
        bad "bad table $name: message lacks '$want': $(grep error "$B/$name.log")"
        return
    fi
    if ! diff -r "$B/out" "$B/out.orig" >/dev/null || [ -e "$B/new-$name" ]; then
        bad "bad table $name: --out changed or created"
        return
    fi
    ok "bad table $name: $(grep error "$B/$name.log")"
}
expect_fail ragged "$B/ragged.csv" "$B/good.csv" "ragged.csv: row 2 has 2 fields, the header has 3"
expect_fail long-test "$B/good.csv" "$B/long.csv" "long.csv: row 2 has 4 fields, the header has 3"
expect_fail no-target "$B/notarget.csv" "$B/good.csv" "notarget.csv: no column 'y'"
expect_fail other-columns "$B/good.csv" "$B/othercols.csv" "othercols.csv: column 'c' is not in the training table"
expect_fail fewer-columns "$B/good.csv" "$B/fewercols.csv" "fewercols.csv: column 'b' of the training table"
expect_fail one-class "$B/oneclass.csv" "$B/good.csv" "column 'y' (the target) has one class only"
expect_fail many-classes "$B/many.csv" "$B/good.csv" "has 12 classes; Mitra takes at most 10"
expect_fail non-utf8 "$B/good.csv" "$B/latin.csv" "latin.csv: row 2, column 2 ('b'): not valid UTF-8"
expect_fail empty "$B/empty.csv" "$B/good.csv" "empty.csv: empty file"
expect_fail quote "$B/quote.csv" "$B/good.csv" "quote.csv: row 1: malformed CSV"
expect_fail text-in-numeric "$B/good.csv" "$B/textnum.csv" "textnum.csv: row 1, column 'b': 'two' is not a number"
expect_fail free-text "$B/text.csv" "$B/good.csv" "text.csv: column 'b' is free text by AutoGluon's rule"
expect_fail date-not-iso "$B/dateus.csv" "$B/good.csv" "dateus.csv: row 2, column 'b': '03/04/2021' might be a date"
expect_fail date-test-not-iso "$B/dates.csv" "$B/datetest.csv" "datetest.csv: row 2, column 'b': '4 May 2021' is not an ISO 8601 date"
expect_fail date-unsure "$B/dateunsure.csv" "$B/good.csv" "dateunsure.csv: row 3, column 'b': '10:30' might be a date"

# ---- column typing as pandas.read_csv (dtypes taken from pandas 2.3.3) ----------------
python3 - "$B/types.csv" <<'EOF'
import csv, sys
vals = [" 1.5", "1e5", "inf", "+3", "1_000", "0x10", ".5", "5.", "-inf", "True", "1,5", "Infinity", "-0", "\uff11",
        "1.5 ", "nan"]
w = csv.writer(open(sys.argv[1], "w"))
w.writerow([f"c{i}" for i in range(len(vals))] + ["y"])
for r in range(6):
    w.writerow([vals[i] if r == 0 else str(r + i % 3 + (r * 7) % 5) for i in range(len(vals))] + ["ab"[r % 2]])
EOF
if "$NF" predict --model "$T/cls-s" --train "$B/types.csv" --test "$B/types.csv" --target y --out "$B/types" \
    >"$B/types.log" 2>&1 && python3 - "$B/types/report.json" <<'EOF'; then ok "column types as pandas"; else bad "column types"; fi
import json, sys
r = json.load(open(sys.argv[1]))
got = {c["name"]: c["csv_type"] for c in r["columns_kept"] + r["columns_dropped"]}
want = {"c0": "float64", "c1": "float64", "c2": "float64", "c3": "int64", "c4": "object", "c5": "object",
        "c6": "float64", "c7": "float64", "c8": "float64", "c9": "object", "c10": "object", "c11": "float64",
        "c12": "int64", "c13": "object", "c14": "float64", "c15": "float64"}
if got != want:
    print("  got", got)
    sys.exit(1)
EOF

[ $fail -eq 0 ] && echo "predict: all passed"
exit $fail
