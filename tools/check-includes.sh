#!/usr/bin/env bash
# check-includes.sh -- the front ends stay clients of the library (README
# "Architecture"): every #include "..." of
#   python/src/  names a public header (include/) or one of python/src/'s own;
#   src/cli/     names a public header, one of src/cli/'s own, or a header of
#                the layers under core/ (base/, io/, text/) or core's nf-impl.h
#                and weights.h (errors, escaping, message helpers) -- never a
#                model (src/models/), core's model.h or verify.h, a backend or
#                a pipeline's internals (src/genomics/, src/tabular/);
# and the CLI target has no src/models on its include path (CMakeLists.txt).
# Exit 1 naming each offending line.
set -u
cd "$(dirname "$0")/.." || exit 1
bad=0
check() { # DIR ALLOWED_REGEX
  local dir=$1 extra=$2 f line inc
  for f in "$dir"/*.c "$dir"/*.h "$dir"/*.def; do
    [ -f "$f" ] || continue
    while IFS= read -r line; do
      inc=${line#*:}; inc=${inc#*\"}; inc=${inc%%\"*}
      if [ -f "include/$inc" ] || [ -f "$dir/$inc" ]; then continue; fi
      if [ -n "$extra" ] && [[ $inc =~ $extra ]]; then continue; fi
      echo "check-includes: $f:${line%%:*}: #include \"$inc\" is not allowed in $dir/"
      bad=1
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
  done
}
check python/src ''
check src/cli '^((base|io|text)/[A-Za-z0-9_.-]+\.h|nf-impl\.h|weights\.h)$'
if grep -E 'target_include_directories\(nofall-cli[^)]*src/models' CMakeLists.txt > /dev/null; then
  echo "check-includes: CMakeLists.txt: the nofall-cli target has src/models on its include path"
  bad=1
fi
[ "$bad" -eq 0 ] && echo "check-includes: src/cli/ and python/src/ include only what the layering allows"
exit "$bad"
