#!/usr/bin/env python3
"""Fixture for nofall's copy of numpy's legacy RandomState (src/tabular/np-random.c):
the support subsets Mitra draws above 8,192 training rows (spec mitra.md §5.4,
dataset_finetune.py: ``rng.choice(n_support, size=min(8192, n_support),
replace=False)`` with ``rng = np.random.RandomState(get_numpy_seed(seed))``).

This script IMPORTS numpy (and AutoGluon's get_numpy_seed) and writes what they
draw; it contains no copy of their code. One line per draw, several draws in
sequence from one RandomState per case:

    seed n k call  first8...  last8...  checksum

checksum = sum_j (j + 1) * idx[j] over the k indices (the whole draw).
usage: np_random_fixtures.py [OUT]   (default tests/fixtures/np-random/choice.txt)
"""
import sys
from pathlib import Path

import numpy as np
from autogluon.common.utils.random import get_numpy_seed

REPO = Path(__file__).resolve().parent.parent
out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "tests/fixtures/np-random/choice.txt"
# (seed as given to AutoGluon, n, k, calls): n = 10,000 > 8,192 (the subsets),
# n <= 8,192 (a permutation: the draws that only advance the stream), tiny and
# 64-bit seeds (get_numpy_seed's XOR-fold)
cases = [(0, 10000, 8192, 4), (1, 10000, 8192, 3), (12345, 9000, 8192, 2), (0, 8192, 8192, 2), (7, 150, 150, 3),
         (3, 1, 1, 2), (3, 2, 2, 4), (4294967295, 10000, 8192, 2), (4294967296 + 17, 8193, 8192, 2),
         (2**53 - 1, 12000, 8192, 2)]
lines = [f"# numpy {np.__version__}: seed n k call first8 last8 checksum (reference/np_random_fixtures.py)"]
for seed, n, k, calls in cases:
    rng = np.random.RandomState(get_numpy_seed(seed))
    for c in range(calls):
        idx = rng.choice(n, size=min(k, n), replace=False).astype(np.int64)
        ck = int(np.sum((np.arange(len(idx), dtype=np.int64) + 1) * idx))
        first = list(idx[:8]) + [-1] * (8 - len(idx[:8]))
        last = list(idx[-8:]) + [-1] * (8 - len(idx[-8:]))
        lines.append(" ".join(str(int(v)) for v in [seed, n, k, c] + first + last + [ck]))
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("\n".join(lines) + "\n")
print(f"{out}: {len(lines) - 1} draws")
