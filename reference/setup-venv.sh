#!/usr/bin/env bash
# Create the PyTorch reference environment used ONLY to regenerate the test
# fixtures (tests/fixtures/mitra/, tests/fixtures/sptransformer/).  The C
# build and CI never need it.
#
# What it installs (from PyPI only):
#   - torch, pinned to the range that autogluon.tabular[mitra] 1.6.3 declares
#     (torch>=2.10,<2.14).  PyPI only carries the CUDA build of torch for
#     Linux x86_64, so this pulls the nvidia-* runtime wheels (a few GB); the
#     reference itself only ever runs on the CPU in fp32.
#   - autogluon.tabular[mitra]==1.6.3 with its full dependency set (pandas,
#     scikit-learn, scipy, pyarrow, boto3, matplotlib, transformers,
#     huggingface_hub, einops, einx, omegaconf, loguru, ...).  The full set is
#     needed because importing any autogluon.tabular submodule runs
#     autogluon/tabular/__init__.py, which imports TabularPredictor and hence
#     autogluon.core/common/features.  flash-attn is NOT installed, and the
#     reference builds Tab2D with device="cpu", so the SDPA path is used.
#   - numpy, safetensors, einops, einx (also pulled in by the above; listed
#     explicitly because the fixture script uses them directly).
#
# Usage:  bash reference/setup-venv.sh            # creates ./.venv-ref
#         VENV=/some/where bash reference/setup-venv.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv-ref}"
PY="${PYTHON:-python3}"

AUTOGLUON_VERSION="${AUTOGLUON_VERSION:-1.6.3}"
TORCH_SPEC="${TORCH_SPEC:-torch>=2.10,<2.14}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --upgrade pip
"$VENV/bin/python" -m pip install \
    "$TORCH_SPEC" \
    numpy safetensors einops einx \
    "autogluon.tabular[mitra]==$AUTOGLUON_VERSION"

# Smoke test: the upstream module must import and must not use flash-attn.
"$VENV/bin/python" - <<'EOF'
import torch, autogluon.tabular
from autogluon.tabular.models.mitra._internal.models import tab2d
from autogluon.tabular.models.mitra._internal.models.tab2d import Tab2D  # noqa: F401
print("torch", torch.__version__, "| autogluon.tabular", autogluon.tabular.__version__,
      "| flash_attn available:", tab2d.FLASH_ATTN_AVAILABLE)
EOF
# SpTransformer fixtures (reference/sptransformer_fixtures.py): the upstream
# SpliceTransformer model code imports these; the versions are pinned to the
# ones the released checkpoint matches (spec sptransformer.md §4.3: key names
# attn.pos_emb.weights_0/_1 need axial-positional-embedding < 0.3; §6.3:
# local-attention 1.4.4 masks the padded look-around keys, as <= 1.5.2 and
# >= 1.8.5 do). sinkhorn-transformer 0.11.4 is the last release.
"$VENV/bin/python" -m pip install \
    sinkhorn-transformer==0.11.4 local-attention==1.4.4 axial-positional-embedding==0.2.1
# upstream's annotator (reference/annotate_fixtures.py, bench_annotate.py) reads the FASTA with pyfaidx
"$VENV/bin/python" -m pip install pyfaidx
"$VENV/bin/python" -c "import sinkhorn_transformer, local_attention, axial_positional_embedding, pyfaidx; print('sptransformer deps ok')"
echo "reference venv ready: $VENV"
