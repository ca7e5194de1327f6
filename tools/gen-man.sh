#!/bin/sh
# gen-man.sh NOFALL OUTDIR: the man pages (OUTDIR/nofall.1, OUTDIR/nofall-CMD.1 per command) and the
# bash completion script (OUTDIR/nofall.bash), all made by the binary from its option table
# (src/cli/options.def). Run by the `man` build target; `cmake --install` installs them.
set -eu
NF=$1
OUT=$2
mkdir -p "$OUT"
"$NF" help --man > "$OUT/nofall.1"
for c in $("$NF" help --options); do
  case $c in help|completion) continue ;; esac
  "$NF" help --man "$c" > "$OUT/nofall-$c.1"
done
"$NF" completion bash > "$OUT/nofall.bash"
