#!/usr/bin/env python3
"""Fixtures for TabSTAR's fit (src/tabular/tabstar-fit*.c; spec finetune.md §3):
the pieces that need no model, computed by upstream's own code (tabstar 1.1.16's
split_to_val, sklearn's roc_auc_score / r2_score, torch's stack().mean(0) and
float32 loss accumulation, upstream's CheckpointManager.adam_smooth_minmax).

This script IMPORTS tabstar, sklearn, numpy, torch and writes what they give;
it contains no copy of their code. Run with /work/.venv-tab/bin/python.

Output (tests/fixtures/tabstar-fit/pieces.txt), one record per line, values
space separated, floats as repr():
  split NAME KIND n val_size | y ... | train ... | val ...   (KIND reg/cls; y: class ids, sorted raw values;
                                                             train/val "error" where upstream raises)
  auc C n | y ... | p ... | value                                (p: float32 scores, n x C for C > 2, the class-1 column for C == 2)
  r2 n | y ... | p ... | value                                   (y float64, p float32)
  avgf32 k m | x ... | mean ...                                  (k x m float32 stacked; torch.stack().mean(0))
  valloss n | losses ... | sizes ... | value                     (upstream _evaluate_epoch's float32 accumulation)
  thresh best | value                                             (adam_smooth_minmax)
  inita MODULE r in seed | values                                 (nofall's initial lora_A, tabstar_fit_upstream.init_a)
usage: tabstar_fit_fixtures.py [OUT]                    (the pieces)
       tabstar_fit_fixtures.py fit --nofall build/nofall [--out DIR]   (upstream's fit, below)

`fit` runs UPSTREAM TabSTARClassifier / TabSTARRegressor.fit (tabstar 1.1.16, CPU,
fp32) on a tiny TabSTAR-shaped checkpoint (`nofall gen-weights tabstar`, 7 text
layers so that layer 6 trains, vocab 2000; upstream's model built on it as in
reference/tabstar_fixtures.py) with every dropout at p = 0 (lora_dropout=0.0
through upstream's own knob, nn.Dropout / MultiheadAttention / BERT attention
probabilities patched to 0), the TransformerEncoderLayer fast path off (upstream's
CPU evaluation would otherwise drop the linear1/linear2 adapters, tabstar.md
§10.2), max_epochs and patience through upstream's knobs,
and writes per case (tests/fixtures/tabstar-fit/CASE/):
  train.csv, test.csv          the tables;
  fit.safetensors              split.train / split.val (I64 row ids, upstream's
                               order), perm.E (I64, epoch E's RandomSampler
                               order, row positions in the train part),
                               final.<module>.norms (F64 |A|, |B|) and .BAv
                               (F64 B (A v), v = 1/sqrt(in)) of the adapter
                               upstream ends with, pred (F32, its predict_proba
                               / predict on test.csv); the initial A of every
                               module is nofall's own (numpy RandomState(
                               fnv1a32(module) ^ seed), U(+-1/sqrt(in)))
                               written into upstream's model, so not stored;
  case.json                    target, task, max_epochs, patience, per epoch the
                               train loss, validation loss and metric, the final
                               averaged evaluation, versions.
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import r2_score

from tabstar.preprocessing.splits import split_to_val
from tabstar.training.checkpoint_averaging import CheckpointManager
from tabstar.training.metrics import calculate_metric

REPO = Path(__file__).resolve().parent.parent
if len(sys.argv) > 1 and sys.argv[1] == "fit":
    sys.path.insert(0, str(REPO / "reference"))
    import tabstar_fit_upstream
    tabstar_fit_upstream.main(sys.argv[2:])
    sys.exit(0)
out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "tests/fixtures/tabstar-fit/pieces.txt"
lines = [f"# tabstar split_to_val, sklearn metrics, torch {torch.__version__} (reference/tabstar_fit_fixtures.py)"]


def j(v):
    return " ".join(repr(float(x)) if isinstance(x, (float, np.floating)) else str(int(x)) for x in v)


def split_case(name, y_raw, is_cls):
    n = len(y_raw)
    x = pd.DataFrame({"a": np.arange(n)})
    y = pd.Series(y_raw)
    try:
        xt, xv, yt, yv = split_to_val(x=x, y=y, is_cls=is_cls)
    except ValueError:  # upstream refuses: nofall must refuse too
        xt = xv = None
    if is_cls:
        classes = sorted(set(y_raw))
        ids = [classes.index(v) for v in y_raw]
    else:
        ids = []
    val_size = min(int(n * 0.1), 1000)
    tr, va = ("error", "error") if xt is None else (j(xt.index), j(xv.index))
    lines.append(f"split {name} {'cls' if is_cls else 'reg'} {n} {val_size} | {j(ids)} | {tr} | {va}")


rs = np.random.RandomState(7)
split_case("reg57", list(rs.randn(57)), False)
split_case("reg2500", list(rs.randn(2500)), False)
split_case("bin53", list(rs.choice(["no", "yes"], size=53, p=[0.7, 0.3])), True)
split_case("bin200", list(rs.choice([3, 8], size=200, p=[0.9, 0.1])), True)
split_case("bin11", ["a"] * 8 + ["b"] * 3, True)
split_case("multi80", list(rs.choice(["x", "y", "z", "w"], size=80, p=[0.4, 0.3, 0.2, 0.1])), True)
split_case("multi_small", ["a"] * 10 + ["b"] * 10 + ["c"] * 10 + ["d"] * 5, True)  # val 3 < 4 classes
split_case("multi_ties", ["a"] * 12 + ["b"] * 12 + ["c"] * 12 + ["d"] * 14, True)  # _approximate_mode ties
split_case("multi_rare", list(rs.choice([0, 1, 2], size=60)) + [5, 9], True)
split_case("multi_rare_small", [0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 0, 1, 2, 0, 1, 2, 0, 0, 1, 9], True)
split_case("multi2000", list(rs.choice(list(range(7)), size=12000)), True)


def auc_case(y, p):
    C = p.shape[1] if p.ndim == 2 else 2
    v = calculate_metric(y_true=np.asarray(y), y_pred=p, d_output=C).score
    lines.append(f"auc {C} {len(y)} | {j(y)} | {j(p.reshape(-1))} | {repr(float(v))}")


rs = np.random.RandomState(3)
for n in (7, 50, 300):
    y = rs.randint(0, 2, n)
    y[0], y[1] = 0, 1
    auc_case(y, rs.rand(n).astype(np.float32))
    auc_case(y, (np.round(rs.rand(n) * 4) / 4).astype(np.float32))  # many ties
for n, C in ((30, 3), (200, 5), (40, 4)):
    y = rs.randint(0, C, n)
    y[:C] = np.arange(C)
    logit = torch.tensor(rs.randn(n, C).astype(np.float32))
    if n == 40:
        logit = torch.round(logit * 2) / 2
    auc_case(y, torch.softmax(logit, dim=1).numpy())
# a class absent from y: upstream falls back to _per_class_auc
y = rs.randint(0, 3, 40)
y[:3] = [0, 1, 0]
y[y == 2] = 1
auc_case(y, torch.softmax(torch.tensor(rs.randn(40, 3).astype(np.float32)), dim=1).numpy())

for n in (5, 130, 1001):
    y = rs.randn(n)
    p = (y + 0.5 * rs.randn(n)).astype(np.float32).reshape(n, 1)
    v = calculate_metric(y_true=y, y_pred=p, d_output=1).score
    assert v == r2_score(y, p)
    lines.append(f"r2 {n} | {j(y)} | {j(p.reshape(-1))} | {repr(float(v))}")

for k, m in ((1, 5), (3, 64), (7, 100), (50, 33), (20, 70), (260, 33)):  # both of torch's sum paths, its cascade levels
    x = torch.tensor((rs.randn(k, m) * 10 ** rs.uniform(-3, 1, (k, m))).astype(np.float32))
    mean = torch.stack([x[i] for i in range(k)]).mean(dim=0)
    lines.append(f"avgf32 {k} {m} | {j(x.numpy().reshape(-1))} | {j(mean.numpy())}")

for sizes in ([128, 128, 7], [5], [128] * 9 + [100]):
    losses = torch.tensor(rs.rand(len(sizes)).astype(np.float32) * 3)
    total_loss, total = 0.0, 0
    for l, s in zip(losses, sizes):  # upstream's _evaluate_epoch arithmetic on its 0-dim float32 losses
        total_loss += l * s
        total += s
    v = (total_loss / total).item()
    lines.append(f"valloss {len(sizes)} | {j(losses.numpy())} | {j(sizes)} | {repr(v)}")

for b in (0.0, 0.1234567, 0.6931471824645996, 1.0986123, 3.5):
    lines.append(f"thresh {repr(b)} | {repr(float(CheckpointManager.adam_smooth_minmax(b)))}")

sys.path.insert(0, str(REPO / "reference"))
from tabstar_fit_upstream import init_a  # noqa: E402

for mod, r, n_in, seed in (("text_encoder.encoder.layer.6.attention.self.query", 2, 384, 21),
                           ("tabular_encoder.layers.0.linear2", 1, 1536, 2**32 + 5), ("cls_head.layers.0", 3, 7, 0)):
    lines.append(f"inita {mod} {r} {n_in} {seed} | {j(init_a(mod, r, n_in, seed & 0xFFFFFFFF).reshape(-1))}")

out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("\n".join(lines) + "\n")
print(f"wrote {out}: {len(lines) - 1} records")
