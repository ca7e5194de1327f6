#!/bin/sh
# gemm-candidates.sh - compare CPU SGEMM candidate libraries (issue #9).
#
# Installs what is missing (apt: libblis4-openmp libdnnl2; pip download of the
# scipy-openblas32 wheel into tmp/ when PyPI is reachable), builds
# bench/gemm-candidates.c, runs each candidate in its own process and prints a table.
#
# The "as is" rows run with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE / BLIS_ARCH_TYPE
# removed from the environment, so each library does its own CPU detection.
# Extra rows set variables BY HAND, only to show what a (mis)dispatch costs; the
# program never sets any of them itself.
#
# Usage: bench/gemm-candidates.sh            (from the repository root or anywhere)
#        MAX_LOAD=1.5 WAIT_S=600 bench/gemm-candidates.sh
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$ROOT/tmp
mkdir -p "$TMP"
MAX_LOAD=${MAX_LOAD:-1.5}
WAIT_S=${WAIT_S:-600}

# ---- install what is missing ----
need=""
[ -e /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 ] || need="$need libopenblas0-openmp"
[ -e /usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4 ] || need="$need libblis4-openmp"
[ -e /usr/lib/x86_64-linux-gnu/libdnnl.so.2 ] || need="$need libdnnl2"
if [ -n "$need" ]; then
    echo "installing:$need"
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi
    $SUDO apt-get install -y $need >"$TMP/gemm-candidates-apt.log" 2>&1 ||
        { $SUDO apt-get update >/dev/null 2>&1 && $SUDO apt-get install -y $need >>"$TMP/gemm-candidates-apt.log" 2>&1; } ||
        echo "apt-get install failed (see $TMP/gemm-candidates-apt.log); missing candidates are skipped"
fi

SOB=$TMP/sob/scipy_openblas32/lib/libscipy_openblas.so
if [ ! -e "$SOB" ]; then
    whl=$(ls "$TMP"/scipy_openblas32-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$whl" ]; then
        (cd "$TMP" && timeout 180 python3 -m pip download --no-deps --only-binary=:all: \
            scipy-openblas32 -d . >/dev/null 2>&1) || echo "pip download of scipy-openblas32 failed (offline?)"
        whl=$(ls "$TMP"/scipy_openblas32-*.whl 2>/dev/null | head -1 || true)
    fi
    if [ -n "$whl" ]; then
        rm -rf "$TMP/sob" && mkdir -p "$TMP/sob"
        python3 -m zipfile -e "$whl" "$TMP/sob"
    fi
fi
export SCIPY_OPENBLAS_LIB="$SOB"

# ---- build ----
BIN=$TMP/gemm-candidates
gcc -O2 -std=c11 -Wall -fopenmp "$ROOT/bench/gemm-candidates.c" -o "$BIN" -ldl -lm

# ---- wait for a quiet machine ----
load1() { cut -d' ' -f1 /proc/loadavg; }
waited=0
while awk -v l="$(load1)" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }'; do
    if [ "$waited" -ge "$WAIT_S" ]; then
        echo "WARNING: load average still $(load1) after ${waited}s; timings are distorted"
        break
    fi
    sleep 15
    waited=$((waited + 15))
done
LOAD_BEFORE=$(cat /proc/loadavg)

# ---- run: one process per candidate ----
LOG=$TMP/gemm-candidates.log
: >"$LOG"
clean="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u BLIS_ARCH_TYPE -u BLIS_ARCH_DEBUG \
 -u ONEDNN_DEFAULT_FPMATH_MODE -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA"
for c in openblas-debian openblas-scipy blis onednn; do
    $clean "$BIN" "$c" >>"$LOG" 2>&1 || echo "ROW|$c|failed" >>"$LOG"
done
# extra rows: environment variables set BY HAND (never by the program)
$clean OPENBLAS_CORETYPE=Prescott GEMM_LABEL="openblas-debian CORETYPE=Prescott = simulated fallback (what Emerald Rapids gets)" \
    "$BIN" openblas-debian >>"$LOG" 2>&1 || true
$clean BLIS_ARCH_TYPE=0 GEMM_LABEL="blis BLIS_ARCH_TYPE=0 (skx forced by hand)" \
    "$BIN" blis >>"$LOG" 2>&1 || true
$clean ONEDNN_DEFAULT_FPMATH_MODE=bf16 GEMM_LABEL="onednn ONEDNN_DEFAULT_FPMATH_MODE=bf16 (precision probe)" \
    "$BIN" onednn >>"$LOG" 2>&1 || true
LOAD_AFTER=$(cat /proc/loadavg)

# ---- report ----
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')," \
    "family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')" \
    "model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')," \
    "$(nproc) cpus; $(grep -m1 '^OpenMP max threads' "$LOG")"
echo "load average before: $LOAD_BEFORE   after: $LOAD_AFTER"
echo
echo "Identification:"
grep -E '^== .* identification|^  (corename|config|version|arch|effective|default fpmath|OPENBLAS_CORETYPE)' "$LOG" |
    awk '/^== /{ if (!seen[$0]++) { p = 1; print } else p = 0; next } p' | sed 's/^== /  /'
echo
echo "GFLOP/s, C = A*B^T row-major (M,N,K); attention shapes are batches of many calls."
echo "err = max |C - C_ref| / (eps * sum|a*b|) over sampled rows (exact fp32: O(1); bf16: ~1e4)."
echo "rep = two repeated calls byte-identical; thr = 1-thread result == default-thread result (all shapes)."
printf '%-84s' "candidate"
for h in 4096x1536x512 4096x2048x512 4096x512x2048 4096x512x512 64x64x128 16x128x64 r4096x2048x512 8192x128x1408 8192x256x256; do
    printf ' %13s' "$h"
done
printf ' %6s %4s %4s\n' err rep thr
grep '^ROW|' "$LOG" | while IFS='|' read -r _ name g1 g2 g3 g4 g5 g6 g7 g8 g9 err rep thr; do
    printf '%-84.84s' "$name"
    if [ "$g1" = unavailable ] || [ "$g1" = failed ]; then echo " $g1"; continue; fi
    for g in "$g1" "$g2" "$g3" "$g4" "$g5" "$g6" "$g7" "$g8" "$g9"; do printf ' %13s' "$g"; done
    printf ' %6s %4s %4s\n' "$err" "$rep" "$thr"
done
echo
echo "full log: $LOG"
