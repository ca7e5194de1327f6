#!/usr/bin/env bash
# format.sh -- apply the repository's .clang-format, or check it.
#   tools/format.sh            format the files in place
#   tools/format.sh --check    report files that differ (exit 1), change nothing
#   tools/format.sh [--check] PATH...   only these files / directories
# Default scope: src/, include/, tests/ and python/src/ (*.c *.h *.cu). Not the OpenCL C kernel
# source (kernels-*.cl), the op table (*.def) or *.in templates.
set -eu
cd "$(dirname "$0")/.."
DEFAULT_DIRS="src include tests python/src"
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
CF=${CLANG_FORMAT:-clang-format}
command -v "$CF" >/dev/null 2>&1 || { echo "format.sh: $CF not found (Debian: apt-get install clang-format)" >&2; exit 2; }
[ $# -gt 0 ] || set -- $DEFAULT_DIRS
files=$(find "$@" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
[ -n "$files" ] || { echo "format.sh: no files" >&2; exit 2; }
if [ $check = 1 ]; then
  # shellcheck disable=SC2086
  "$CF" --style=file --dry-run -Werror $files
  echo "format.sh: $(echo "$files" | wc -l) files checked, all formatted"
else
  # shellcheck disable=SC2086
  "$CF" --style=file -i $files
fi
