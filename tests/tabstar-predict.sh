#!/usr/bin/env bash
# tabstar-predict.sh NOFALL TMPDIR FIXTURES [DEVICE] -- `nofall predict` on a
# TabSTAR model against upstream's TabSTARVerbalizer + TabStarModel.forward
# (tests/fixtures/tabstar-predict, made by reference/tabstar_fixtures.py e2e):
# per case, the verbalized cells (cells.json) equal upstream's (strings
# byte-equal, x_num float32-equal), logits within max_abs 1e-4 / mean_abs
# 1e-5 with identical argmax, the predictions (labels; regression values
# within 1e-5 relative; probabilities.csv: class-named columns, the values of
# probabilities.npy), the numerical / dropped columns, and `run --cells`
# on the written cells.json giving the same logits. Then (cpu only) the bad
# tables: exit != 0, a message naming file / row / column, --out not made.
set -u
NF=$1
T=$2
FX=$3
DEV=${4:-cpu}
rm -rf "$T"
mkdir -p "$T"
fail=0
ok() { echo "ok   $*"; }
bad() {
    echo "FAIL $*"
    fail=1
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ''))" "$1" "$2"; }

for d in "$FX"/*/; do
    [ -f "$d/case.json" ] || continue
    c=$(basename "$d")
    seed=$(field "$d/case.json" seed)
    target=$(field "$d/case.json" target)
    adapter=$(field "$d/case.json" adapter)
    m=$T/m$seed
    [ -d "$m" ] || "$NF" gen-weights tabstar --out "$m" --seed "$seed" --layers "$(field "$d/case.json" layers)" \
        --vocab "$(field "$d/case.json" vocab)" >/dev/null || { bad "$c: gen-weights"; continue; }
    ad=()
    [ -n "$adapter" ] && ad=(--adapter "$d/$adapter")
    if ! "$NF" predict --model "$m" "${ad[@]}" --no-fine-tune --train "$d/train.csv" --test "$d/test.csv" \
        --target "$target" --device "$DEV" --out "$T/out-$c" >"$T/$c.log" 2>&1; then
        bad "$c: predict failed: $(tail -2 "$T/$c.log" | head -1)"
        continue
    fi
    grep -q '^ASSETS_VERIFIED=true' "$T/$c.log" && grep -q '^CPU_FALLBACK=false' "$T/$c.log" ||
        bad "$c: markers ($(grep -E '^(ASSETS_VERIFIED|CPU_FALLBACK)' "$T/$c.log" | tr '\n' ' '))"
    "$NF" run --model "$m" "${ad[@]}" --cells "$T/out-$c/cells.json" --device "$DEV" --out "$T/run-$c" >"$T/$c.run.log" 2>&1 ||
        bad "$c: run --cells on the written cells.json failed"
    if python3 - "$d" "$T/out-$c" "$T/run-$c" "$c" "$DEV" <<'EOF'; then ok "$c"; else bad "$c"; fi
import csv, json, struct, sys
d, o, ro, name, dev = sys.argv[1:6]
case = json.load(open(f"{d}/case.json"))
exp = json.load(open(f"{d}/expected_cells.json", encoding="utf-8"))
got = json.load(open(f"{o}/cells.json", encoding="utf-8"))
rep = json.load(open(f"{o}/report.json"))
good = True
def check(what, cond, detail=""):
    global good
    if not cond:
        print(f"  {what}: mismatch {detail}")
        good = False
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
for k in ("task", "n_target_tokens", "n_rows", "n_cells", "classes"):
    check(k, got[k] == exp[k], f"{got[k]!r} vs {exp[k]!r}")
nt = nn = 0
for r, (a, b) in enumerate(zip(got["x_txt"], exp["x_txt"])):
    for s, (x, y) in enumerate(zip(a, b)):
        nt += 1
        check(f"x_txt[{r}][{s}]", x.encode() == y.encode(), f"{x!r} vs {y!r}")
for r, (a, b) in enumerate(zip(got["x_num"], exp["x_num"])):
    for s, (x, y) in enumerate(zip(a, b)):
        nn += 1
        check(f"x_num[{r}][{s}]", f32(x) == f32(y), f"{x!r} vs {y!r}")
def npy(path):
    data = open(path, "rb").read()
    hl = struct.unpack("<H", data[8:10])[0]
    hdr = eval(data[10:10 + hl].decode("latin1"))
    n = 1
    for v in hdr["shape"]:
        n *= v
    fmt = {"<f4": "f", "<i8": "q"}[hdr["descr"]]
    return hdr["shape"], struct.unpack(f"<{n}{fmt}", data[10 + hl:])
sa, a = npy(f"{o}/logits.npy")
sb, b = npy(f"{d}/logits.npy")
check("logits shape", sa == sb, f"{sa} vs {sb}")
diff = [abs(x - y) for x, y in zip(a, b)]
mx, mean = max(diff), sum(diff) / len(diff)
check("logits max_abs", mx <= 1e-4, mx)
check("logits mean_abs", mean <= 1e-5, mean)
C = sa[1]
am = lambda v, r: max(range(C), key=lambda k: (v[r * C + k], -k))
if case["task"] == "classification":
    check("argmax", all(am(a, r) == am(b, r) for r in range(sa[0])))
    labels = [row[0] for row in csv.reader(open(f"{o}/predictions.csv", encoding="utf-8"))][1:]
    check("predictions.csv", labels == case["predictions"], f"{labels} vs {case['predictions']}")
    # probabilities.csv: the class names as header, the values those of probabilities.npy (as Mitra's file)
    rows = list(csv.reader(open(f"{o}/probabilities.csv", encoding="utf-8")))
    _, pn = npy(f"{o}/probabilities.npy")
    check("probabilities.csv header", rows[0] == got["classes"], f"{rows[0]} vs {got['classes']}")
    check("probabilities.csv values", [f32(float(v)) for r in rows[1:] for v in r] == list(pn))
else:
    _, pg = npy(f"{o}/predictions.npy")
    _, pe = npy(f"{d}/predictions.npy")
    scale = max(1.0, max(abs(v) for v in pe))
    check("predictions", max(abs(x - y) for x, y in zip(pg, pe)) <= 1e-5 * scale, f"{pg} vs {pe}")
    check("target scaler", rep["target_mean"] == case["target_mean"] and rep["target_scale"] == case["target_scale"],
          f"{rep['target_mean']}, {rep['target_scale']} vs {case['target_mean']}, {case['target_scale']}")
cols = rep["columns"]
num = [x["normalized"] for x in cols["numerical"]]
check("numerical columns", num == case["numerical"], f"{num} vs {case['numerical']}")
dropped = sorted(x["normalized"] for x in cols["dropped"])
check("dropped columns", dropped == sorted(case["constant"]), f"{dropped} vs {case['constant']}")
check("adapter in report", (rep["adapter"] != "none") == ("adapter" in case), rep["adapter"])
_, ra = npy(f"{ro}/logits.npy")
check("run --cells cells.json gives the same logits", ra == a)
print(f"  {name} [{dev}]: {nt} strings byte-equal, {nn} x_num float32-equal; logits max_abs {mx:.3g} mean_abs {mean:.3g}")
sys.exit(0 if good else 1)
EOF
done

[ "$DEV" = cpu ] || exit $fail

# ---- bad input: exit != 0, the message, no --out ---------------------------------------
E=$FX/e2e-objnum
m=$T/m24
[ -d "$m" ] || "$NF" gen-weights tabstar --out "$m" --seed 24 --layers 2 --vocab 2000 >/dev/null
expect_fail() { # name needle train test target [task]
    local name=$1 needle=$2 tr=$3 te=$4 tg=$5 task=${6:-auto}
    "$NF" predict --model "$m" --no-fine-tune --train "$tr" --test "$te" --target "$tg" --task "$task" \
        --out "$T/bad-$name" \
        >"$T/bad-$name.log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ]; then
        bad "$name: exit 0"
    elif ! grep -qF -- "$needle" "$T/bad-$name.log"; then
        bad "$name: no '$needle' in: $(grep error "$T/bad-$name.log")"
    elif [ -e "$T/bad-$name" ]; then
        bad "$name: --out was made"
    else
        ok "$name: exit $rc, '$needle'"
    fi
}
B=$T/bad
mkdir -p "$B"
printf 'a,b,y\n1,x,p\n2,\xff\xfe,q\n3,z,p\n' >"$B/utf8.csv"
expect_fail utf8 "utf8.csv: row 2, column 2 ('b'): not valid UTF-8" "$B/utf8.csv" "$E/test.csv" y
printf 'a,b,y\n1,x,p\n2,y\n3,z,p\n' >"$B/ragged.csv"
expect_fail ragged "ragged.csv: row 2 has 2 fields, the header has 3" "$B/ragged.csv" "$E/test.csv" y
expect_fail no-target "no column 'nope' (--target)" "$E/train.csv" "$E/test.csv" nope
head -1 "$E/test.csv" | sed 's/$/,extra/' >"$B/extra.csv"
tail -n +2 "$E/test.csv" | sed 's/$/,1/' >>"$B/extra.csv"
expect_fail test-extra "extra.csv: column 'extra' is not a column of the training table" "$E/train.csv" "$B/extra.csv" outcome
cut -d, -f2- "$E/test.csv" >"$B/nozip.csv"
expect_fail test-missing "nozip.csv: no column 'zip' (a column of the training table)" "$E/train.csv" "$B/nozip.csv" outcome
sed '5s/,[a-z]*$/,/' "$E/train.csv" >"$B/nulltarget.csv"
expect_fail null-target "target column 'outcome' has 1 missing values (row 4 first)" "$B/nulltarget.csv" "$E/test.csv" outcome
printf 'zip,code,score,outcome\n?,1,1,yes\nunknown,2,2,no\n10037,3,3,yes\n' >"$B/twotokens.csv"
expect_fail two-tokens "column 'zip' (numerical in the training table): two different non-numeric values, '?' (row 1) and 'unknown' (row 2)" \
    "$E/train.csv" "$B/twotokens.csv" outcome
printf 'f,g,y\n1,a,5\n2,b,5\n3,c,5\n' >"$B/constreg.csv"
expect_fail const-regression "target column 'y' is constant" "$B/constreg.csv" "$B/constreg.csv" y regression
expect_fail text-regression "a regression needs a numeric target" "$E/train.csv" "$E/test.csv" outcome regression
printf 'f,y\n1,a\n2,a\n' >"$B/oneclass.csv"
expect_fail one-class "has one class only ('a')" "$B/oneclass.csv" "$B/oneclass.csv" y
printf 'zip,code,score,outcome\n10037,1,inf,yes\n' >"$B/inf.csv"
expect_fail inf "inf.csv: row 1, column 'score' (numerical): an infinite value" "$E/train.csv" "$B/inf.csv" outcome
# invalid UTF-8 inside cells.json for `run --cells`: named by row and cell
python3 - "$T/out-e2e-objnum/cells.json" "$B/cells-utf8.json" <<'EOF'
import sys
t = open(sys.argv[1], "rb").read()
i = t.index(b"Feature Value: ", t.index(b'"x_txt"'))
i = t.index(b"Feature Value: ", i + 1)  # the second cell of row 0
i = t.index(b"Feature Value: ", t.index(b"],", i))  # row 1, cell 0
for _ in range(2):
    i = t.index(b"Feature Value: ", i + 1)  # row 1, cell 2
open(sys.argv[2], "wb").write(t[:i + 15] + b"\xff" + t[i + 15:])
EOF
"$NF" run --model "$m" --cells "$B/cells-utf8.json" --out "$T/bad-cells" >"$T/bad-cells.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -qF "x_txt[1][2] (row 1, cell 2): invalid UTF-8 at byte" "$T/bad-cells.log" && [ ! -e "$T/bad-cells" ]; then
    ok "cells.json invalid UTF-8: exit $rc, row and cell named"
else
    bad "cells.json invalid UTF-8: exit $rc: $(grep error "$T/bad-cells.log")"
fi
exit $fail
