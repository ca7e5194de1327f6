#!/usr/bin/env bash
# signals.sh BIN TMP -- output sets under interruption and concurrency
# (issue #11): SIGINT/SIGTERM during the forward, the write phase and the
# commit; SIGKILL during the write phase; two and four runs on one --out.
# Needs a build with -DNOFALL_TEST_HOOKS=ON (the NOFALL_TEST_DELAY hook that
# holds a run in a phase); skipped (77) without it.
set -u
BIN=$1; T=$2
rm -rf "$T"; mkdir -p "$T"
fails=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

"$BIN" gen-weights mitra --out "$T/m" --dim 16 --layers 1 --heads 2 --outputs 4 --seed 1 > /dev/null || exit 1
for s in 1 2 3 4 5; do "$BIN" run --model "$T/m" --out "$T/ref$s" --seed $s > /dev/null 2>&1 || { echo "reference run $s failed"; exit 1; }; done
NOFALL_TEST_DELAY=forward:1 "$BIN" run --model "$T/m" --out "$T/probe" 2> "$T/probe.err" > /dev/null
if ! grep -q "test hook: forward phase" "$T/probe.err"; then
  echo "skip: $BIN was built without -DNOFALL_TEST_HOOKS=ON (no delay hook to hold a run in a phase)"
  exit 77
fi

# same_set DIR REF: the same arrays and the same seed in report.json
same_set() {
  for f in support_x.npy support_y.npy query_x.npy logits.npy class_ids.npy; do cmp -s "$1/$f" "$2/$f" || return 1; done
  [ "$(grep '"seed"' "$1/report.json")" = "$(grep '"seed"' "$2/report.json")" ]
}
leftovers() { ls -A "$T" | grep "^\.$1\.nofall" | tr '\n' ' '; }
# wait_hook ERRFILE PHASE: until the run reports it is held in PHASE
wait_hook() {
  for _ in $(seq 1 400); do grep -q "test hook: $2 phase" "$1" 2>/dev/null && return 0; sleep 0.05; done
  return 1
}

# ---- a signal in each phase ----------------------------------------------------------
for phase in forward write commit; do
  for sig in INT TERM; do
    name=o-$phase-$sig
    rm -rf "$T/$name"; cp -a "$T/ref1" "$T/$name"
    NOFALL_TEST_DELAY=$phase:$([ $phase = commit ] && echo 1000 || echo 20000) "$BIN" run --model "$T/m" --out "$T/$name" --seed 2 > "$T/$name.out" 2> "$T/$name.err" &
    pid=$!
    if ! wait_hook "$T/$name.err" $phase; then bad "$phase/$sig: the run never reached the hook"; kill -KILL $pid; wait $pid; continue; fi
    kill -$sig $pid; wait $pid; rc=$?
    want=$((128 + $(kill -l $sig)))
    left=$(leftovers "$name")
    if [ $phase = commit ]; then
      # signals wait until the swap is done: the new set, complete
      if [ $rc -eq $want ] && same_set "$T/$name" "$T/ref2" && [ -z "$left" ]; then ok "SIG$sig during $phase: exit $rc, the new set complete, nothing left"
      else bad "SIG$sig during $phase: rc=$rc left='$left'"; ls -la "$T/$name"; fi
    else
      if [ $rc -eq $want ] && same_set "$T/$name" "$T/ref1" && diff -r "$T/$name" "$T/ref1" > /dev/null && [ -z "$left" ]; then
        ok "SIG$sig during $phase: exit $rc, previous results intact, no staging left"
      else bad "SIG$sig during $phase: rc=$rc left='$left'"; ls -la "$T/$name"; fi
    fi
  done
done

# ---- SIGKILL in the write phase: the next run removes the stale staging directory -------
name=o-kill
cp -a "$T/ref1" "$T/$name"
NOFALL_TEST_DELAY=write:20000 "$BIN" run --model "$T/m" --out "$T/$name" --seed 2 > /dev/null 2> "$T/$name.err" &
pid=$!
wait_hook "$T/$name.err" write; kill -KILL $pid; wait $pid 2>/dev/null
[ -n "$(leftovers $name)" ] && diff -r "$T/$name" "$T/ref1" > /dev/null && ok "SIGKILL during write: previous results intact (staging left: $(leftovers $name))" \
  || bad "SIGKILL during write"
"$BIN" run --model "$T/m" --out "$T/$name" --seed 3 > /dev/null 2>&1 && same_set "$T/$name" "$T/ref3" && [ -z "$(leftovers $name)" ] \
  && ok "the next run cleans up and writes its set" || bad "the run after SIGKILL: left='$(leftovers $name)'"
# a run killed between the two renames of the fallback swap: the previous set waits under .B.nofall-old.*
name=o-restore
mv "$T/$name" /dev/null 2>/dev/null; cp -a "$T/ref1" "$T/.$name.nofall-old.99999.0"
"$BIN" run --model "$T/m" --out "$T/$name" --device tpu:0 > /dev/null 2> "$T/$name.err"
[ $? -ne 0 ] && diff -r "$T/$name" "$T/ref1" > /dev/null && [ -z "$(leftovers $name)" ] && grep -q "restored the previous results" "$T/$name.err" \
  && ok "previous results restored from an interrupted swap" || { bad "restore after an interrupted swap"; cat "$T/$name.err"; }

# ---- concurrency ----------------------------------------------------------------------------
name=o-two
cp -a "$T/ref1" "$T/$name"
NOFALL_TEST_DELAY=forward:3000 "$BIN" run --model "$T/m" --out "$T/$name" --seed 2 > "$T/$name.a.out" 2> "$T/$name.a.err" &
pid=$!
wait_hook "$T/$name.a.err" forward
"$BIN" run --model "$T/m" --out "$T/$name" --seed 3 > "$T/$name.b.out" 2> "$T/$name.b.err"; rcb=$?
wait $pid; rca=$?
if [ $rca -eq 0 ] && [ $rcb -eq 1 ] && grep -q "another nofall run (pid $pid) is writing it" "$T/$name.b.err" && same_set "$T/$name" "$T/ref2" \
   && [ -z "$(leftovers $name)" ]; then ok "two runs on one --out: the second refused, naming the first's pid; the first's set complete"
else bad "two runs: rca=$rca rcb=$rcb"; cat "$T/$name.b.err"; fi
# four at once, no delays: each succeeds or is refused; the result is one run's complete set
name=o-four
cp -a "$T/ref1" "$T/$name"
pids=()
for s in 2 3 4 5; do "$BIN" run --model "$T/m" --out "$T/$name" --seed $s > "$T/$name.$s.out" 2> "$T/$name.$s.err" & pids+=($!); done
okruns=0; consistent=0; other=0
for i in 0 1 2 3; do
  s=$((i + 2)); wait ${pids[$i]}; rc=$?
  if [ $rc -eq 0 ]; then okruns=$((okruns + 1)); same_set "$T/$name" "$T/ref$s" && consistent=1
  elif ! grep -q "another nofall run" "$T/$name.$s.err"; then other=1; cat "$T/$name.$s.err"; fi
done
match=0; for s in 2 3 4 5; do same_set "$T/$name" "$T/ref$s" && match=1; done
if [ $okruns -ge 1 ] && [ $match -eq 1 ] && [ $other -eq 0 ] && [ -z "$(leftovers $name)" ]; then
  ok "four runs on one --out: $okruns succeeded, the rest refused; --out holds one complete set"
else bad "four runs: ok=$okruns match=$match other=$other left='$(leftovers $name)'"; fi

echo "signals.sh: $fails failure(s)"
[ $fails -eq 0 ]
