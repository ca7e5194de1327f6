#!/usr/bin/env bash
# predict-progress.sh NOFALL TMPDIR FIXTURES -- `nofall predict`'s progress
# bar (src/cli/progress.c, docs/cli.md "Progress") with a small Mitra model on the
# iris fixture, 3 members: in a pipe no bar on stderr, only the summary line (nothing with
# --quiet); on a pseudo-terminal (script(1), else a Python pty) the bar,
# 0/3 .. 3/3 forwards; --quiet there: none; --progress in a pipe: the bar;
# the outputs the same in every run; --quiet with --progress: a usage error.
set -u
NF=$(readlink -f "$1")
T=$2
FX=$(readlink -f "$3")
rm -rf "$T"
mkdir -p "$T"
cd "$T" || exit 1
fails=0
ok() { echo "ok   $*"; }
bad() {
    echo "FAIL $*"
    fails=$((fails + 1))
}
on_tty() { # command... : its stdout and stderr under a pseudo-terminal
    if command -v script >/dev/null 2>&1; then
        script -qec "$(printf '%q ' "$@")" /dev/null
    else
        python3 -c 'import pty, sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)' "$@"
    fi
}
export OMP_NUM_THREADS=1
"$NF" gen-weights mitra --out m --dim 16 --layers 2 --heads 2 --outputs 16 --seed 7 >gen.out 2>&1 || {
    bad "gen-weights"
    cat gen.out
}
A=(predict --model m --train "$FX/iris/train.csv" --test "$FX/iris/test.csv" --target target --n-estimators 3 --seed 5)
"$NF" "${A[@]}" --out o-pipe >pipe.out 2>pipe.err || bad "predict in a pipe: exit $?"
"$NF" "${A[@]}" --out o-quiet --quiet >quiet.out 2>quiet.err || bad "predict --quiet: exit $?"
if [ "$(wc -l <pipe.err)" = 1 ] && grep -q "^predict: predicted 30 rows (multiclass" pipe.err && [ ! -s quiet.err ]; then
    ok "in a pipe: no bar, only the summary line on stderr; nothing with --quiet"
else
    bad "stderr in a pipe"
    cat -A pipe.err quiet.err | head
fi
"$NF" "${A[@]}" --out o-prog --progress >prog.out 2>prog.err || bad "predict --progress: exit $?"
grep -q $'^\rpredict: 0/3 forwards (0.0%)' prog.err && grep -q 'predict: 3/3 forwards (100.0%), [0-9.e+]*/s, ETA 0:00:00$' prog.err &&
    ok "--progress in a pipe: the bar, 0/3 .. 3/3 forwards, a newline at the end" || {
    bad "--progress in a pipe"
    cat -A prog.err
}
on_tty "$NF" "${A[@]}" --out o-tty >tty.txt 2>&1
on_tty "$NF" "${A[@]}" --out o-ttyq --quiet >ttyq.txt 2>&1
if grep -q $'\rpredict: 0/3 forwards (0.0%)' tty.txt && grep -q $'predict: 3/3 forwards (100.0%)' tty.txt &&
    grep -q '^EXIT_CODE=0' tty.txt; then
    ok "on a terminal: the bar"
else
    bad "no bar on a terminal"
    cat -A tty.txt | head
fi
if ! grep -q 'forwards (' ttyq.txt && grep -q '^EXIT_CODE=0' ttyq.txt; then
    ok "on a terminal with --quiet: no bar"
else
    bad "--quiet on a terminal"
    cat -A ttyq.txt | head
fi
same=1
for d in o-quiet o-prog o-tty o-ttyq; do
    for f in predictions.csv probabilities.csv logits.npy; do cmp -s "o-pipe/$f" "$d/$f" || same=0; done
done
[ $same = 1 ] && ok "the same predictions, probabilities and logits in every run" || bad "outputs differ between runs"
"$NF" "${A[@]}" --out o-qp --quiet --progress >qp.out 2>qp.err
rc=$?
[ $rc = 2 ] && grep -q 'error: --quiet and --progress exclude each other' qp.err && [ ! -e o-qp ] &&
    ok "--quiet --progress: exit 2" || {
    bad "--quiet --progress: exit $rc"
    cat qp.err
}
[ $fails -eq 0 ] && echo "predict-progress: all passed" || echo "predict-progress: $fails failed"
exit $((fails > 0))
