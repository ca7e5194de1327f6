#!/usr/bin/env bash
# install.sh BUILD SRC TMP -- `cmake --install` into a temporary prefix, as a user installs: the
# program, libnofall.so + the static libraries, the headers, nofall.pc, the man pages and the bash
# completion are there; the README's C example (the block marked `<!-- readme-test: c -->`) builds
# against the installed library with pkg-config, shared and static, and runs on a model the
# installed nofall generates; its nf_version() is `nofall --version`'s.
set -u
B=$(readlink -f "$1"); SRC=$(readlink -f "$2"); T=$3
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
rm -rf "$T" && mkdir -p "$T"
P="$T/prefix"
cmake --install "$B" --prefix "$P" > "$T/install.out" 2>&1 && ok "cmake --install" || { bad "cmake --install"; cat "$T/install.out"; exit 1; }
LIBDIR=$(readlink -f "$(dirname "$(find "$P" -name nofall.pc | head -n 1)")/..")
for f in bin/nofall include/nofall.h include/nofall-tabular.h include/nofall-genomics.h \
         share/man/man1/nofall.1 share/man/man1/nofall-predict.1 share/bash-completion/completions/nofall; do
  [ -s "$P/$f" ] && ok "installed $f" || bad "not installed: $f"
done
for f in libnofall.a libnofall-genomics.a libnofall.so pkgconfig/nofall-static.pc; do
  [ -e "$LIBDIR/$f" ] && ok "installed $f" || bad "not installed: $f"
done
# only the public API leaves the shared library
if command -v nm > /dev/null; then
  internal=$(nm -D --defined-only "$LIBDIR/libnofall.so" | awk '$2 == "T" && $3 !~ /^nf_/ {print $3}' | grep -v '^_' | head -n 5)
  nf=$(nm -D --defined-only "$LIBDIR/libnofall.so" | awk '$2 == "T" && $3 ~ /^nf_/' | wc -l)
  leaked=$(nm -D --defined-only "$LIBDIR/libnofall.so" | awk '$3 ~ /^nf__/' | head -n 3)
  [ "$nf" -gt 100 ] && [ -z "$leaked" ] && ok "libnofall.so exports $nf nf_ functions, no nf__ internals" ||
    bad "libnofall.so exports: $nf nf_ functions; internals: $leaked $internal"
fi
"$P/bin/nofall" --version > "$T/version.out" 2>&1 || bad "installed nofall --version"
version=$(head -n 1 "$T/version.out" | cut -d' ' -f2)
grep -q '^backends: cpu' "$T/version.out" && grep -q '^gemm: cpu: ' "$T/version.out" &&
  ok "nofall --version: $(tr '\n' ';' < "$T/version.out")" || { bad "nofall --version"; cat "$T/version.out"; }
bash -c "source '$P/share/bash-completion/completions/nofall' && complete -p nofall" > /dev/null 2>&1 &&
  ok "the completion script loads" || bad "the completion script does not load"
# the README's C example against the installed library
python3 - "$SRC/README.md" "$T/hello.c" << 'PY' || { bad "the README has no tested C block"; exit 1; }
import re, sys
b = re.findall(r"<!-- readme-test: c -->\n```c\n(.*?)```", open(sys.argv[1], encoding="utf-8").read(), re.S)
assert len(b) == 1
open(sys.argv[2], "w").write(b[0])
PY
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
"$P/bin/nofall" gen-weights mitra --out "$T/m" --seed 0 --dim 16 --layers 1 --heads 2 > /dev/null 2>&1 || bad "gen-weights"
CC=${CC:-cc}
# shellcheck disable=SC2046
if $CC -Wall -Werror "$T/hello.c" $(pkg-config --cflags --libs nofall) -o "$T/hello" 2> "$T/cc.out"; then
  ok "hello.c builds with pkg-config (shared)"
  out=$(LD_LIBRARY_PATH="$LIBDIR" "$T/hello" "$T/m" 2>&1)
  LD_LIBRARY_PATH="$LIBDIR" ldd "$T/hello" 2>/dev/null | grep -q "libnofall.so.0 => $LIBDIR/libnofall.so" && ok "linked to the installed libnofall.so" ||
    bad "not linked to the installed libnofall.so: $(LD_LIBRARY_PATH="$LIBDIR" ldd "$T/hello" | grep nofall)"
  [ "$out" = "nofall $version
loaded $T/m on cpu" ] && ok "hello runs: $(echo "$out" | tr '\n' ';')" || bad "hello printed: $out"
  LD_LIBRARY_PATH="$LIBDIR" "$T/hello" "$T/nothing" > /dev/null 2> "$T/err.out" && bad "hello on a missing model succeeded" ||
    { grep -q "error: .*nothing" "$T/err.out" && ok "a missing model: $(head -c 120 "$T/err.out")" || bad "error text: $(cat "$T/err.out")"; }
else
  bad "hello.c does not build with pkg-config:"; cat "$T/cc.out"
fi
# shellcheck disable=SC2046
if $CC "$T/hello.c" $(pkg-config --cflags --libs nofall-static) -o "$T/hello-static" 2> "$T/cc-static.out"; then
  out=$("$T/hello-static" "$T/m" 2>&1)
  [ "$(echo "$out" | tail -n 1)" = "loaded $T/m on cpu" ] && ! ldd "$T/hello-static" | grep -q libnofall &&
    ok "hello builds with pkg-config nofall-static and runs" || bad "static hello: $out"
else
  bad "hello.c does not build with pkg-config nofall-static:"; tail -n 20 "$T/cc-static.out"
fi
echo "install: $fails failure(s)"
[ "$fails" = 0 ]
