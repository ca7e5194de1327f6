#!/usr/bin/env bash
# tables-cli.sh NOFALL TMPDIR -- tables as pandas reads them, through `nofall predict`
# (docs/tables.md): the same table gzip / bzip2 / xz compressed (by the system's tools)
# gives byte-identical outputs to the plain one, for --train and --test; a truncated
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
for z in gz bz2 xz; do
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
[ $fail -eq 0 ] && echo "tables-cli.sh: all passed" || echo "tables-cli.sh: failures"
exit $fail
