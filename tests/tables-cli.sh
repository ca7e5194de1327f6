#!/usr/bin/env bash
# tables-cli.sh NOFALL TMPDIR -- tables as pandas reads them, through `nofall predict`
# (docs/tables.md): the same table gzip / bzip2 / xz compressed (by the system's tools)
# (and zstd where the build has libzstd) gives byte-identical outputs to the plain one, for --train and --test; a truncated
# stream is an error naming the file, and --out is not created.
set -u
NF=$1
T=$2
rm -rf "$T"
mkdir -p "$T"
fail=0
ok() { echo "ok   $*"; }
bad() {
    echo "FAIL $*"
    fail=1
}
"$NF" gen-weights mitra --out "$T/m" --seed 0 --dim 16 --layers 1 --heads 2 >/dev/null || exit 1
python3 - "$T" <<'EOF'
import sys
t = sys.argv[1]
with open(f"{t}/train.csv", "w") as f:
    f.write("a,b,colour,y\n")
    for i in range(30):
        f.write(f"{i * 0.5},{(i * 7) % 5},{'red green blue'.split()[i % 3]},{'xyz'[i % 3 == 0]}\n")
with open(f"{t}/test.csv", "w") as f:
    f.write("a,b,colour\n")
    for i in range(7):
        f.write(f"{i * 1.5},{(i * 3) % 5},{'red green blue'.split()[i % 2]}\n")
EOF
run() { # name train test [args...]
    local name=$1 train=$2 test=$3
    shift 3
    "$NF" predict --model "$T/m" --train "$train" --test "$test" --target y --n-estimators 1 --out "$T/$name" "$@" \
        >"$T/$name.log" 2>&1
}
same() { # name: outputs identical to the plain run's
    local f
    for f in predictions.csv probabilities.csv logits.npy; do
        [ -e "$T/plain/$f" ] || continue
        cmp -s "$T/plain/$f" "$T/$1/$f" || return 1
    done
}
run plain "$T/train.csv" "$T/test.csv" || { bad "plain predict: $(tail -1 "$T/plain.log")"; exit 1; }
gzip -k "$T/train.csv" "$T/test.csv"
bzip2 -k "$T/train.csv" "$T/test.csv"
xz -k "$T/train.csv" "$T/test.csv"
zs=""
if command -v zstd >/dev/null; then # .zst: when the build has libzstd (else the refusal says so)
    zstd -q -k "$T/train.csv" "$T/test.csv"
    if run zst-probe "$T/train.csv.zst" "$T/test.csv"; then
        zs=zst
    elif grep -q "built without libzstd" "$T/zst-probe.log" && [ ! -e "$T/zst-probe" ]; then
        ok ".csv.zst: this build has no libzstd; refused, saying so"
    else
        bad ".csv.zst: $(tail -1 "$T/zst-probe.log")"
    fi
fi
for z in gz bz2 xz $zs; do
    if run "$z" "$T/train.csv.$z" "$T/test.csv.$z" && same "$z"; then
        ok "--train/--test .csv.$z: outputs identical to the plain table's"
    else
        bad ".csv.$z: $(tail -1 "$T/$z.log")"
    fi
    head -c 40 "$T/train.csv.$z" >"$T/cut.csv.$z"
    if run "cut-$z" "$T/cut.csv.$z" "$T/test.csv"; then
        bad "truncated .$z: exit 0"
    elif ! grep -q "cut.csv.$z: .*truncated\|cut.csv.$z: corrupt" "$T/cut-$z.log" || [ -e "$T/cut-$z" ]; then
        bad "truncated .$z: $(tail -1 "$T/cut-$z.log")"
    else
        ok "truncated .$z: $(grep error "$T/cut-$z.log")"
    fi
done

# --sep and .tsv: the same table tab / ';' separated gives the same outputs
tr , '\t' <"$T/train.csv" >"$T/train.tsv"
tr , '\t' <"$T/test.csv" >"$T/test.tsv"
gzip -k "$T/train.tsv"
tr , ';' <"$T/train.csv" >"$T/train.txt"
tr , ';' <"$T/test.csv" >"$T/test.txt"
tr , '\t' <"$T/train.csv" >"$T/train-tab.txt"
run tsv "$T/train.tsv.gz" "$T/test.tsv" && same tsv && ok ".tsv / .tsv.gz: tab-separated by the name" ||
    bad ".tsv: $(tail -1 "$T/tsv.log")"
run semi "$T/train.txt" "$T/test.txt" --sep ';' && same semi && ok "--sep ';'" || bad "--sep ';': $(tail -1 "$T/semi.log")"
run tab "$T/train-tab.txt" "$T/test.tsv" --sep tab && same tab && ok "--sep tab" || bad "--sep tab: $(tail -1 "$T/tab.log")"
run tab2 "$T/train-tab.txt" "$T/test.tsv" --sep '\t' && same tab2 && ok "--sep \\t" || bad "--sep \\t: $(tail -1 "$T/tab2.log")"
expect() { # name want-substring train test [args...]: fails, says want, --out not created
    local name=$1 want=$2
    shift 2
    if run "$name" "$@"; then
        bad "$name: exit 0"
    elif ! grep -qF -- "$want" "$T/$name.log" || [ -e "$T/$name" ]; then
        bad "$name: wanted '$want': $(tail -1 "$T/$name.log")"
    else
        ok "$name: $(grep error "$T/$name.log")"
    fi
}
expect hint-semi "no column 'y' (--target); the header is one column holding ';': a ';'-separated table? --sep ';'" \
    "$T/train.txt" "$T/test.txt"
expect hint-tab "no column 'y' (--target); the header is one column holding tabs: a tab-separated table? --sep tab" \
    "$T/train-tab.txt" "$T/test.txt"
expect sep-bad "--sep 'ab': one ASCII character" "$T/train.csv" "$T/test.csv" --sep ab

# --drop: the same outputs as tables without those columns; an unknown column is an error naming it
python3 - "$T" <<'EOF2'
import csv, sys
t = sys.argv[1]
for n in ("train", "test"):
    rows = list(csv.reader(open(f"{t}/{n}.csv")))
    keep = [i for i, c in enumerate(rows[0]) if c not in ("b", "colour")]
    csv.writer(open(f"{t}/{n}-dropped.csv", "w"), lineterminator="\n").writerows([[r[i] for i in keep] for r in rows])
EOF2
run dropped-plain "$T/train-dropped.csv" "$T/test-dropped.csv" &&
    run dropped "$T/train.csv" "$T/test.csv" --drop b,colour &&
    cmp -s "$T/dropped/predictions.csv" "$T/dropped-plain/predictions.csv" &&
    cmp -s "$T/dropped/probabilities.csv" "$T/dropped-plain/probabilities.csv" &&
    ok "--drop b,colour: outputs identical to the tables without them" || bad "--drop: $(tail -1 "$T/dropped.log")"
expect drop-unknown "train.csv: no column 'nosuch' to drop (--drop)" "$T/train.csv" "$T/test.csv" --drop b,nosuch

# category labels and ids pandas gives NaT are no dates: predicted, not refused
python3 - "$T" <<'EOF2'
import sys
t = sys.argv[1]
with open(f"{t}/rooms.csv", "w") as f:
    f.write("a,room,id,y\n")
    for i in range(12):
        f.write(f"{i},room {i % 3 + 1},A-{i:05d},{'xy'[i % 2]}\n")
EOF2
run rooms "$T/rooms.csv" "$T/rooms.csv" && ok "'room 2' / 'A-00017' columns: no dates (pandas: NaT)" ||
    bad "rooms: $(tail -1 "$T/rooms.log")"

# a row index as df.to_csv() writes it: a warning naming --drop; none once dropped
awk -F, 'NR == 1 { print "," $0; next } { print NR - 2 "," $0 }' "$T/train.csv" >"$T/indexed.csv"
run indexed "$T/indexed.csv" "$T/test.csv" # fails: the test table lacks the column
grep -qF "indexed.csv: the first column, unnamed, holds 0..29 like the row index df.to_csv() writes; it is used as a feature: --drop 'Unnamed: 0'" "$T/indexed.log" &&
    ! grep -q "test.csv.*row index" "$T/indexed.log" && run indexed2 "$T/indexed.csv" "$T/test.csv" --drop 'Unnamed: 0' &&
    ! grep -q warning "$T/indexed2.log" && same indexed2 && ok "row index column: warned, --drop 'Unnamed: 0' silences it" ||
    bad "row index warning: $(grep -h warning "$T/indexed.log" "$T/indexed2.log")"

# --column-type COL=TYPE (the parity with AutoGluon: tests/predict.sh, case column_types): a column
# refused as object (dates pandas reads, nofall does not) is predicted as a category; an unknown
# column or type, a value that cannot be the type: errors naming the flag and the column
python3 - "$T" <<'EOF2'
import sys
t = sys.argv[1]
for n, k in (("ct-train", 30), ("ct-test", 6)):
    with open(f"{t}/{n}.csv", "w") as f:
        f.write("a,when,code,note,y\n")
        for i in range(k):
            f.write(f"{i * 0.5},{['03/04/2021', '2020/12/01', 'Jan 5 2019'][i % 3]},{i % 4},w{i % 5},{'xy'[i % 3 == 0]}\n")
EOF2
expect ct-refused "'03/04/2021' might be a date" "$T/ct-train.csv" "$T/ct-test.csv"
run ct-cat "$T/ct-train.csv" "$T/ct-test.csv" --column-type when=category --column-type code=category &&
    python3 - "$T/ct-cat/report.json" <<'EOF2' && ok "--column-type when=category code=category: predicted, both categories" ||
import json, sys
cols = {c["name"]: c for c in json.load(open(sys.argv[1]))["columns_kept"]}
assert cols["when"]["type"] == "category" and cols["when"]["csv_type"] == "category", cols["when"]
assert cols["code"]["type"] == "category" and cols["code"]["categories"] == ["0", "1", "2", "3"], cols["code"]
EOF2
    bad "column-type category: $(tail -1 "$T/ct-cat.log")"
expect ct-nocol "ct-train.csv: no column 'whenn' (--column-type whenn=category)" "$T/ct-train.csv" "$T/ct-test.csv" \
    --column-type whenn=category
expect ct-type "--column-type when=categorical: unknown type 'categorical' (category, numeric (or float), text, datetime)" \
    "$T/ct-train.csv" "$T/ct-test.csv" --column-type when=categorical
expect ct-form "--column-type 'when': expected COLUMN=TYPE" "$T/ct-train.csv" "$T/ct-test.csv" --column-type when
expect ct-num "ct-train.csv: row 1, column 'note': 'w0' is not a number (--column-type note=numeric)" \
    "$T/ct-train.csv" "$T/ct-test.csv" --column-type note=numeric
expect ct-date "ct-train.csv: row 1, column 'when': '03/04/2021' is not a date nofall reads (--column-type when=datetime)" \
    "$T/ct-train.csv" "$T/ct-test.csv" --column-type when=datetime
expect ct-text "column 'note' is given the type text: AutoGluon derives" "$T/ct-train.csv" "$T/ct-test.csv" \
    --column-type when=category --column-type note=text

# TabSTAR (a small model): --column-type code=category verbalizes the int column as text; --quiet
# leaves out the summary line; datetime is refused (no date encoder)
"$NF" gen-weights tabstar --out "$T/ts" --seed 21 --layers 1 --vocab 1000 >/dev/null || bad "gen-weights tabstar"
ts() { # name args...
    local name=$1
    shift
    "$NF" predict --model "$T/ts" --train "$T/ct-train.csv" --test "$T/ct-test.csv" --target y --out "$T/$name" \
        --column-type when=category "$@" >"$T/$name.log" 2>&1
}
ts ts-num && ts ts-cat --column-type code=category --quiet && python3 - "$T" <<'EOF2' &&
import json, sys
t = sys.argv[1]
kind = lambda d: [k for k, cs in json.load(open(f"{t}/{d}/report.json"))["columns"].items()
                  if any(c["name"] == "code" for c in cs)]
assert kind("ts-num") == ["numerical"] and kind("ts-cat") == ["text"], (kind("ts-num"), kind("ts-cat"))
EOF2
    grep -q "^predict: predicted 6 rows (binary: x [0-9]*, y [0-9]*) into $T/ts-num (logits.npy, " "$T/ts-num.log" &&
    ! grep -q "^predict:" "$T/ts-cat.log" && ok "TabSTAR --column-type code=category: text; the summary line, none with --quiet" ||
    bad "TabSTAR --column-type: $(tail -1 "$T/ts-num.log") / $(tail -1 "$T/ts-cat.log")"
ts ts-date --column-type a=datetime && bad "TabSTAR datetime: exit 0" ||
    { grep -qF "is not a date nofall reads (--column-type a=datetime)" "$T/ts-date.log" && ok "TabSTAR a=datetime of numbers: refused" ||
        bad "TabSTAR datetime: $(tail -1 "$T/ts-date.log")"; }

# the summary line on stderr (none with --quiet); with the target in the test table, the metrics
# (accuracy recomputed here from predictions.csv; the values against scikit-learn: test-tables)
grep -qE "^predict: predicted 7 rows \(binary: x [0-9]+, y [0-9]+\) into $T/plain \(predictions.csv, probabilities.csv, logits.npy, report.json\)\$" "$T/plain.log" &&
    ! grep -q '"metrics"' "$T/plain/report.json" && ok "summary line: $(grep '^predict:' "$T/plain.log")" ||
    bad "summary line: $(grep -v '=' "$T/plain.log")"
run quiet "$T/train.csv" "$T/test.csv" --quiet && ! grep -q "^predict:" "$T/quiet.log" && ok "--quiet: no summary line" ||
    bad "--quiet: $(grep '^predict:' "$T/quiet.log")"
run scored "$T/train.csv" "$T/train.csv" &&
    python3 - "$T" <<'EOF2' && ok "metrics: $(grep '^predict:' "$T/scored.log" | sed 's/.*; on/on/')" || bad "metrics: $(tail -1 "$T/scored.log")"
import csv, json, sys
t = sys.argv[1]
m = json.load(open(f"{t}/scored/report.json"))["metrics"]
y = [r["y"] for r in csv.DictReader(open(f"{t}/train.csv"))]
pred = [r[0] for r in list(csv.reader(open(f"{t}/scored/predictions.csv")))[1:]]
acc = sum(a == b for a, b in zip(y, pred)) / len(y)
assert m["rows"] == 30 and m["unknown_labels"] == 0 and abs(m["accuracy"] - acc) < 1e-15, (m, acc)
assert 0 < m["log_loss"] and 0 <= m["roc_auc"] <= 1, m
line = [l for l in open(f"{t}/scored.log") if l.startswith("predict:")][0]
assert f"on the 30 rows with y: accuracy {acc:.4f}, log-loss " in line, line
EOF2

# predict's report.json: the command line, the UTC time, the version, the weights' SHA-256
python3 - "$T/plain/report.json" "$T" <<'EOF2' && ok "report.json: command_line, time_utc, nofall_version" || bad "report.json lacks the command line / time"
import json, re, sys
r = json.load(open(sys.argv[1]))
t = sys.argv[2]
want = ["nofall", "predict", "--model", f"{t}/m", "--train", f"{t}/train.csv", "--test", f"{t}/test.csv", "--target", "y",
        "--n-estimators", "1", "--out", f"{t}/plain"]
assert r["command_line"] == want, r["command_line"]
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["time_utc"]), r["time_utc"]
assert r["nofall_version"]
EOF2

[ $fail -eq 0 ] && echo "tables-cli.sh: all passed" || echo "tables-cli.sh: failures"
exit $fail
