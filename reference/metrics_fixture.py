#!/usr/bin/env python3
"""The metrics `nofall predict` reports when the test table has the target
(docs/tables.md "Summary and metrics"; src/tabular/metrics.c), computed by
scikit-learn itself on small cases: ties in ROC-AUC's scores, probabilities
of exactly 0 and 1 (log_loss clips them to [eps, 1 - eps], eps of float64),
float32-rounded probabilities (TabSTAR's), a class absent from the labels
(ROC-AUC undefined: nan), a label no training class (accuracy only),
regression with a constant target (r2_score: 1 if exact, else 0) and one row
(r2 nan). Writes tests/fixtures/tables/metrics.txt, read by test-tables:

    cls NAME N K            reg NAME N
    y (N class ids, -1: unknown)    y (N values)
    P (N x K, row-major)    yhat (N values)
    accuracy log_loss roc_auc      r2 rmse mae

usage: metrics_fixture.py [OUT]   (run with /work/.venv-ref: scikit-learn 1.9.1, numpy 2.4)
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import sklearn
from sklearn.metrics import (accuracy_score, log_loss, mean_absolute_error, r2_score, roc_auc_score,
                             root_mean_squared_error)

REPO = Path(__file__).resolve().parent.parent


def cls_case(name, y, P):
    """y: class ids (-1 a label no class); P: n x K probabilities"""
    y = np.asarray(y)
    P = np.asarray(P, dtype=np.float64)
    K = P.shape[1]
    labels = list(range(K))
    pred = P.argmax(axis=1)
    acc = accuracy_score(y, pred)
    if (y < 0).any():
        ll = auc = float("nan")
    else:
        ll = log_loss(y, P, labels=labels)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # UndefinedMetricWarning: nan
            if K == 2:
                auc = roc_auc_score(y, P[:, 1])
            else:
                auc = roc_auc_score(y, P, multi_class="ovr", average="macro", labels=labels)
    return [f"cls {name} {len(y)} {K}", " ".join(str(int(v)) for v in y),
            " ".join(repr(float(v)) for v in P.ravel()), " ".join(repr(float(v)) for v in (acc, ll, auc))]


def reg_case(name, y, p):
    y = np.asarray(y, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one row: r2 nan
        r2 = r2_score(y, p)
    vals = (r2, root_mean_squared_error(y, p), mean_absolute_error(y, p))
    return [f"reg {name} {len(y)}", " ".join(repr(float(v)) for v in y), " ".join(repr(float(v)) for v in p),
            " ".join(repr(float(v)) for v in vals)]


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "tests" / "fixtures" / "tables" / "metrics.txt"
    rng = np.random.default_rng(29)
    lines = [f"# scikit-learn {sklearn.__version__}, numpy {np.__version__}: reference/metrics_fixture.py"]
    # binary, scores with ties across the classes (roc_curve: one point per distinct score)
    n = 40
    p1 = rng.choice([0.1, 0.25, 0.5, 0.5, 0.75, 0.9], size=n)
    y = (rng.random(n) < p1).astype(int)
    lines += cls_case("binary_ties", y, np.stack([1 - p1, p1], axis=1))
    # binary, continuous scores
    p1 = rng.random(n)
    y = (rng.random(n) < p1).astype(int)
    lines += cls_case("binary", y, np.stack([1 - p1, p1], axis=1))
    # probabilities 0 and 1, some on the wrong class: log_loss clips to [eps, 1 - eps]
    p1 = np.array([0.0, 1.0, 1.0, 0.0, 0.3, 1.0, 0.0, 0.7])
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    lines += cls_case("binary_clip", y, np.stack([1 - p1, p1], axis=1))
    # one class only: ROC-AUC nan
    lines += cls_case("binary_one_class", np.ones(6, dtype=int), np.stack([1 - p1[:6], p1[:6]], axis=1))
    # multiclass, float32-rounded softmax (TabSTAR's), with ties
    z = np.round(rng.normal(size=(60, 4)), 1)
    P = softmax(z).astype(np.float32).astype(np.float64)
    y = np.array([rng.choice(4, p=P[i] / P[i].sum()) for i in range(60)])
    lines += cls_case("multiclass", y, P)
    # multiclass, a class absent from y: its one-vs-rest curve undefined, the macro average nan
    z = rng.normal(size=(20, 3))
    P = softmax(z)
    y = rng.choice([0, 2], size=20)
    lines += cls_case("multiclass_absent", y, P)
    # a label that is no class: wrong for the accuracy; log-loss and ROC-AUC not computed
    y = rng.choice(3, size=20)
    y[3] = -1
    lines += cls_case("unknown_label", y, P)
    # regression
    yv = np.round(rng.normal(size=50) * 30 + 100, 2)
    lines += reg_case("regression", yv, yv + rng.normal(size=50) * 10)
    lines += reg_case("regression_constant_exact", np.full(5, 3.5), np.full(5, 3.5))
    lines += reg_case("regression_constant", np.full(5, 3.5), np.array([3.5, 3.0, 4.0, 3.5, 3.5]))
    lines += reg_case("regression_one_row", np.array([2.0]), np.array([1.5]))
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
