#!/usr/bin/env bash
# setup.sh -- install what nofall needs to build and test (Debian/Ubuntu).
# The CUDA backend is built when the CUDA toolkit (nvcc) is on PATH; it is
# not installed here.
set -eu
PKGS="build-essential cmake bcftools libdnnl-dev libcjson-dev libzip-dev libcsv-dev libutf8proc-dev zlib1g-dev libbz2-dev liblzma-dev libzstd-dev libssl-dev libhts-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo libclblast-dev python3 clang-14 libclang-rt-14-dev valgrind util-linux openmpi-bin libopenmpi-dev python3-venv python3-dev clang-format clang-tidy"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
export PATH="$PATH:/usr/local/cuda/bin"
echo "setup: packages present; nvcc: $(command -v nvcc || echo 'not found (cuda backend will not be built)')"
