#!/usr/bin/env python3
"""Fixture for nofall's Mitra fine-tuning episodes (src/tabular/mitra-episode.c,
spec shared/specs/finetune.md §1.2-§1.4, §1.8, §4.3): which training rows
AutoGluon's fine-tuning feeds as support and query, drawn from one legacy
numpy RandomState.

This script IMPORTS AutoGluon's own code and records what it does; it contains
no copy of it:
  - episodes: DatasetFinetuneGenerator (make_dataset_split + the truncation to
    max_samples_support / max_samples_query) and DatasetFinetune.__getitem__
    (the support's extra rng.choice(n_s, n_s, replace=False));
  - evaluation / predict support orders: DatasetFinetune over all training
    rows, one rng.choice(N_sup, min(N_sup, max_support)) per query chunk;
  - the internal validation split: MitraBase._split_data (classification:
    make_stratified_dataset_split with a fresh RandomState(get_numpy_seed(seed));
    regression: np.random.choice from the global RNG, which this script seeds
    with np.random.seed(get_numpy_seed(seed)), nofall's documented choice).
The features given to AutoGluon are the row ids themselves (x = arange(N) as
one int64 column), so what comes back out of upstream's functions is the row
ids. The RandomState is a subclass that logs every outermost permutation /
shuffle / choice call (sklearn's check_random_state accepts the subclass; it
changes no draw), and each case ends with the MT19937 state (pos and a checksum
of the key), so the C test also checks that the stream continues identically.

Arrays longer than BIG are stored as {"n", "head", "tail", "checksum"} with
checksum = sum_j (j + 1) * a[j].
usage: episode_fixtures.py [OUT]   (default tests/fixtures/finetune-episodes/episodes.json)
"""
import json
import sys
import types
from pathlib import Path

import numpy as np
import sklearn
import autogluon.tabular
from autogluon.common.utils.random import get_numpy_seed
from autogluon.tabular.models.mitra._internal.config.enums import Task
from autogluon.tabular.models.mitra._internal.data.dataset_finetune import DatasetFinetune, DatasetFinetuneGenerator
from autogluon.tabular.models.mitra._internal.data.dataset_split import make_stratified_dataset_split
from autogluon.tabular.models.mitra.sklearn_interface import MitraBase

REPO = Path(__file__).resolve().parent.parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "tests/fixtures/finetune-episodes/episodes.json"
BIG = 600


def enc(a):
    a = np.asarray(a, dtype=np.int64).ravel()
    if len(a) <= BIG:
        return [int(v) for v in a]
    ck = int(np.sum((np.arange(len(a), dtype=np.int64) + 1) * a))
    return {"n": len(a), "head": [int(v) for v in a[:16]], "tail": [int(v) for v in a[-16:]], "checksum": ck}


class LogRS(np.random.RandomState):
    """a RandomState that logs its outermost permutation / shuffle / choice calls"""

    def __init__(self, seed):
        super().__init__(seed)
        self.log = []
        self._depth = 0

    def _call(self, fn, *args, **kw):
        self._depth += 1
        try:
            return fn(*args, **kw)
        finally:
            self._depth -= 1

    def permutation(self, x):
        out = self._call(super().permutation, x)
        if self._depth == 0:
            self.log.append({"op": "permutation", "n": int(x), "out": enc(out)})
        return out

    def shuffle(self, x):
        before = np.array(x, copy=True)
        self._call(super().shuffle, x)
        if self._depth == 0:
            self.log.append({"op": "shuffle", "in": enc(before), "out": enc(x)})

    def choice(self, a, size=None, replace=True, p=None):
        out = self._call(super().choice, a, size, replace, p)
        if self._depth == 0:
            assert not replace and p is None
            self.log.append({"op": "choice", "n": int(a) if np.ndim(a) == 0 else len(a), "k": int(size),
                             "out": enc(out)})
        return out


def state(rng):
    _, key, pos, _, _ = rng.get_state()
    key = key.astype(np.int64)
    return {"pos": int(pos), "key_checksum": int(np.sum((np.arange(624, dtype=np.int64) + 1) * key))}


def ids(n):
    return np.arange(n, dtype=np.int64).reshape(-1, 1)


def episode(rng, y, n, ms, mq):
    """one training epoch's batch: DatasetFinetuneGenerator's next dataset, item 0"""
    task = Task.REGRESSION if y is None else Task.CLASSIFICATION
    yy = np.linspace(0.0, 1.0, n) if y is None else y
    gen = DatasetFinetuneGenerator(None, x=ids(n), y=yy, task=task, max_samples_support=ms,
                                   max_samples_query=mq, rng=rng)
    try:
        d = next(gen)
    except ValueError as e:
        return {"ev": "episode", "error": type(e).__name__, "msg": str(e)}
    assert len(d) == 1
    item = d[0]
    return {"ev": "episode", "support": enc(item["x_support"].numpy()[:, 0]),
            "query": enc(item["x_query"].numpy()[:, 0])}


def evaluate(rng, y, n_sup, n_query, ms, mq):
    """evaluate / predict: one support order per query chunk"""
    yy = np.linspace(0.0, 1.0, n_sup) if y is None else y
    d = DatasetFinetune(None, x_support=ids(n_sup), y_support=yy, x_query=ids(n_query), y_query=None,
                        max_samples_support=ms, max_samples_query=mq, rng=rng)
    chunks = []
    for i in range(len(d)):
        item = d[i]
        q = item["x_query"].numpy()[:, 0]
        assert q[0] == i * mq and len(q) == min(mq, n_query - i * mq)
        chunks.append(enc(item["x_support"].numpy()[:, 0]))
    return {"ev": "eval", "n_query": n_query, "chunks": chunks}


def labels(counts, seed, values=None):
    """a label vector with these class counts, rows in a seeded random order"""
    values = list(range(len(counts))) if values is None else values
    y = np.concatenate([np.full(c, v, dtype=np.int64) for c, v in zip(counts, values)])
    return y[np.random.RandomState(seed).permutation(len(y))]


# (name, seed, y (None: regression), n, max_support, max_query, events); events: ("ep",) or ("eval", n_query)
E = ("ep",)
y3 = labels([120, 73, 7], 11)
episode_cases = [
    ("stratified-3class", 0, y3, 200, 8192, 1024, [E, E, E]),
    ("class-of-4", 1, labels([60, 36, 4], 12), 100, 8192, 1024, [E, E]),
    ("zero-count-label", 2, labels([30, 20], 13, values=[0, 2]), 50, 8192, 1024, [E, E]),
    ("tiny-7", 3, np.array([0, 1, 0, 1, 1, 0, 1], dtype=np.int64), 7, 8192, 1024, [E, E, E]),
    ("tiny-2", 3, np.array([1, 0], dtype=np.int64), 2, 8192, 1024, [E, E]),
    ("binary-5-5", 9, labels([5, 5], 14), 10, 8192, 1024, [E, E]),
    ("one-class-6", 10, np.zeros(6, dtype=np.int64), 6, 8192, 1024, [E]),
    ("one-class-5", 10, np.zeros(5, dtype=np.int64), 5, 8192, 1024, [E]),
    ("regression", 4, None, 200, 8192, 1024, [E, E]),
    ("regression-tiny-3", 4, None, 3, 8192, 1024, [E]),
    ("limits-stratified", 5, y3, 200, 50, 16, [E, E]),
    ("limits-regression", 6, None, 200, 37, 11, [E, E]),
    ("seed-64bit", 2**40 + 5, labels([40, 25, 10, 5], 15, values=[3, 0, 2, 1]), 80, 8192, 1024, [E, E]),
    ("one-row", 8, None, 1, 8192, 1024, [E]),
    # the trainer's order: epoch-0 evaluate, then per epoch episode + evaluate; then predict
    ("trainer-stream", 0, y3, 200, 8192, 1024,
     [("eval", 1500), E, ("eval", 1500), E, ("eval", 1500), E, ("eval", 1500), ("eval", 700)]),
    # more than 8,192 support rows: choice(8192 of N) per chunk; the episode's support truncated to 8,192
    ("big-regression", 7, None, 10300, 8192, 1024, [("eval", 1100), E, ("eval", 1100)]),
]

# internal validation split: (name, seed, y (None: regression), n)
split_cases = [
    ("min-class-2", 0, labels([20, 8, 2], 21), 30),
    ("min-class-3", 1, labels([25, 12, 3], 22), 40),
    ("min-class-4", 2, labels([40, 16, 4], 23), 60),
    ("min-class-5+", 3, y3, 200),
    ("min-class-1", 4, labels([20, 9, 1], 24), 30),
    ("zero-count-label", 5, labels([12, 8], 25, values=[1, 2]), 20),
    ("tiny-4", 6, np.array([0, 1, 1, 0], dtype=np.int64), 4),
    ("tiny-2-one-class", 6, np.array([0, 0], dtype=np.int64), 2),
    ("seed-64bit", 2**40 + 5, labels([40, 25, 10, 5], 26), 80),
    ("regression", 3, None, 200),
    ("regression-7", 8, None, 7),
    ("regression-3", 9, None, 3),
    ("regression-64bit", 2**40 + 5, None, 53),
]

cases = []
for name, seed, y, n, ms, mq, events in episode_cases:
    rng = LogRS(get_numpy_seed(seed))
    out = []
    for ev in events:
        if ev[0] == "ep":
            r = episode(rng, y, n, ms, mq)
            out.append(r)
            if "error" in r:
                break
        else:
            out.append(evaluate(rng, y, n, ev[1], ms, mq))
    cases.append({"kind": "episodes", "name": name, "seed": seed, "y": None if y is None else [int(v) for v in y],
                  "n": n, "max_support": ms, "max_query": mq, "events": out, "draws": rng.log, "end": state(rng)})

for name, seed, y, n in split_cases:
    X = ids(n)
    obj = types.SimpleNamespace(task="regression" if y is None else "classification", seed=seed)
    if y is not None:
        xt, xv, _, _ = MitraBase._split_data(obj, X, y)
        rng = LogRS(get_numpy_seed(seed))  # the same draws, logged: what seed=int does inside
        xt2, xv2, _, _ = make_stratified_dataset_split(X, y, seed=rng)
        assert np.array_equal(xt, xt2) and np.array_equal(xv, xv2)
    else:
        np.random.seed(get_numpy_seed(seed))  # upstream leaves the global RNG unseeded
        xt, xv, _, _ = MitraBase._split_data(obj, X, np.linspace(0.0, 1.0, n))
        rng = LogRS(get_numpy_seed(seed))
        rng.choice(range(n), int(0.2 * n), replace=False)
    cases.append({"kind": "split", "name": name, "seed": seed, "y": None if y is None else [int(v) for v in y],
                  "n": n, "train": enc(xt[:, 0]), "val": enc(xv[:, 0]), "draws": rng.log, "end": state(rng)})

doc = {"made_by": "reference/episode_fixtures.py", "autogluon": autogluon.tabular.__version__,
       "numpy": np.__version__, "sklearn": sklearn.__version__, "big": BIG, "cases": cases}
OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
print(f"{OUT}: {len(cases)} cases, {OUT.stat().st_size} bytes")
