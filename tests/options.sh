#!/bin/bash
# options.sh NOFALL docs/cli.md -- the option table (src/cli/options.def) as users see it: for every
# command, `nofall CMD --help` (exit 0) lists each of its options and equals `nofall help CMD`, the
# man page lists them too, an unknown option is refused (exit 2, named, with the command's --help),
# no option name has two rows in one command; the bash completion completes from the table; and the
# docs/cli.md's command reference ("The command line") names exactly the table's options per command.
set -u
NF=$1
README=$2
fails=0
ok() { echo "ok   $*"; }
bad() {
  echo "FAIL $*"
  fails=$((fails + 1))
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

cmds=$("$NF" help --options) || bad "nofall help --options"
for c in $cmds; do
  [ "$c" = help ] || [ "$c" = completion ] && continue
  "$NF" "$c" --help > "$T/$c.help" 2> "$T/$c.err"
  rc=$?
  [ $rc = 0 ] && [ ! -s "$T/$c.err" ] && head -1 "$T/$c.help" | grep -q "^usage: nofall $c" ||
    bad "$c --help: exit $rc, $(head -1 "$T/$c.help" "$T/$c.err")"
  "$NF" help "$c" > "$T/$c.help2" 2>&1 && cmp -s "$T/$c.help" "$T/$c.help2" || bad "nofall help $c differs from $c --help"
  "$NF" "$c" -h | cmp -s - "$T/$c.help" || bad "$c -h differs from $c --help"
  "$NF" help --man "$c" > "$T/$c.1" || bad "help --man $c"
  "$NF" help --options "$c" > "$T/$c.opts" || bad "help --options $c"
  dup=$(sort "$T/$c.opts" | uniq -d)
  [ -z "$dup" ] || bad "$c: options with two rows: $dup"
  n=0 f0=$fails
  while read -r o; do
    n=$((n + 1))
    grep -qE -- "^  $o( |\$)" "$T/$c.help" || bad "$c --help lacks $o"
    grep -qF -- "\\fB${o//-/\\-}\\fR" "$T/$c.1" || bad "the man page of $c lacks $o"
  done < "$T/$c.opts"
  # an unknown option: exit 2, named, with where to look
  args=("$c")
  [ "$c" = gen-weights ] && args+=(mitra)
  "$NF" "${args[@]}" --no-such-option > "$T/$c.unk.out" 2> "$T/$c.unk"
  rc=$?
  [ $rc = 2 ] && grep -qE -- "^error: unknown option --no-such-option for \`nofall ${args[*]}\`( on a [A-Za-z]+ model)?; see \`nofall $c --help\`" "$T/$c.unk" ||
    bad "$c --no-such-option: exit $rc, $(cat "$T/$c.unk")"
  [ $fails = "$f0" ] && ok "$c: --help = help $c, $n options in it and in the man page, an unknown option refused"
done

# --help after an option's value is still the help; a value that reads --help is a value
"$NF" run --model /nonexistent --help | cmp -s - "$T/run.help" && ok "run --model X --help: the help" || bad "run --model X --help"
"$NF" convert --model /nonexistent --out --help > /dev/null 2>&1
[ $? = 1 ] && ok "convert --out --help: --help is --out's value" || bad "convert --out --help: not taken as a value"
# uniform errors (the texts tests/hostile.sh and others assert)
chk() { # name exit needle cmd...
  local name=$1 want=$2 needle=$3
  shift 3
  "$NF" "$@" > /dev/null 2> "$T/e.err"
  local rc=$?
  [ $rc = "$want" ] && grep -qF -- "$needle" "$T/e.err" && ok "$name: exit $rc, '$needle'" || { bad "$name: exit $rc"; cat "$T/e.err"; }
}
chk missing-value 2 "error: --model needs a value" convert --model
chk range 2 "error: --runs takes an integer in [1, 1000000], got '0'" bench --runs 0
chk choice 2 "error: --precision must be exact, tf32 or bf16-autocast, got 'fp16'" run --precision fp16
chk quiet-progress-tabstar 2 "error: --quiet and --progress exclude each other" predict --quiet --progress
chk tabstar-only 2 "unknown option --adapter for \`nofall predict\` on a Mitra model" predict --adapter x
chk unknown-command 2 "error: unknown command 'frobnicate'" frobnicate
chk help-unknown 2 "error: unknown command 'frobnicate'" help frobnicate
"$NF" help > "$T/list" && "$NF" --help | cmp -s - "$T/list" && for c in $cmds; do grep -q "^  $c " "$T/list" || bad "the command list lacks $c"; done &&
  ok "nofall help = nofall --help, every command listed" || bad "nofall help"

# bash completion from the table
"$NF" completion bash > "$T/comp.bash" || bad "completion bash"
compl() { bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _nofall; echo "${COMPREPLY[*]}"' _ "$T/comp.bash" "$@"; }
[ "$(compl nofall ann)" = annotate ] && [ "$(compl nofall run --prec)" = --precision ] &&
  [ "$(compl nofall run --precision '')" = "exact tf32 bf16-autocast" ] && [ "$(compl nofall predict --ta)" = "--target --task" ] &&
  [ "$(compl nofall gen-weights sp)" = sptransformer ] && ok "bash completion: commands, options, choices" ||
  bad "bash completion: '$(compl nofall run --prec)' '$(compl nofall run --precision '')' '$(compl nofall predict --ta)'"

# the command reference (docs/cli.md) against the table
if python3 - "$README" "$T" $cmds << 'PY'; then
import re, sys
readme, tmp, cmds = sys.argv[1], sys.argv[2], sys.argv[3:]
text = open(readme, encoding="utf-8").read()
sec = text.split("\n## Commands\n", 1)[1]
block = sec.split("```", 2)[1]
doc, cur = {}, None
for line in block.splitlines():
    m = re.match(r"nofall ([a-z-]+)", line)
    if m:
        cur = m.group(1)
    elif not line.startswith(" "):
        continue
    if cur is None:
        continue
    # --opt[=a|b]: the option, and --opt=a, --opt=b (rows of their own in the table)
    for o in re.findall(r"(--[a-z][a-z0-9-]*)(\[=([a-z|]+)\])?", line):
        doc.setdefault(cur, set()).add(o[0])
        for v in o[2].split("|") if o[1] else []:
            doc[cur].add(o[0] + "=" + v)
good = True
for c in cmds:
    if c in ("help", "completion"):
        continue
    table = set(open(f"{tmp}/{c}.opts").read().split())
    mine = doc.get(c, set()) - {"--help"}
    if table - mine:
        print(f"  docs/cli.md lacks for {c}: {' '.join(sorted(table - mine))}")
        good = False
    if mine - table:
        print(f"  docs/cli.md has for {c}, the table not: {' '.join(sorted(mine - table))}")
        good = False
    if c not in doc and c != "devices":
        print(f"  docs/cli.md has no line for {c}")
        good = False
if set(doc) - set(cmds):
    print(f"  docs/cli.md names commands nofall lacks: {sorted(set(doc) - set(cmds))}")
    good = False
sys.exit(0 if good else 1)
PY
  ok "docs/cli.md's command reference = the option table"
else
  bad "docs/cli.md's command reference differs from the option table"
fi

[ $fails = 0 ] && echo "options: all passed" || echo "options: $fails failed"
[ $fails = 0 ]
