"""Fine-tuning (README "Fine-tuning"): MitraClassifier / MitraRegressor with
fine_tune=True (AutoGluon's default) on a tiny model: fit fine-tunes a private
copy of the model (nf_predictor_finetune), predict uses it; equal to `nofall
predict --fine-tune` (the same library path, bit for bit); the shared
(zero-shot) model is untouched; the refusals."""
import os
import pathlib
import pickle
import subprocess

import numpy as np
import pandas as pd
import pytest

import nofall
from conftest import model_dir

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _data(n, off=0):
    i = np.arange(off, off + n)
    X = pd.DataFrame({"a": np.round(np.sin(i) * 3, 4), "b": np.round((i * 0.7) % 2.3, 4)})
    y = np.where(X["a"] + X["b"] > 1, "yes", "no")
    return X, y


def test_finetune_classifier_equals_cli(tmp_path):
    X, y = _data(40)
    Xv, yv = _data(12, 40)
    Xt, _ = _data(8, 52)
    kw = dict(fine_tune_steps=3, lr=1e-3, warmup_steps=2, mirror=False)
    est = nofall.MitraClassifier(model_dir("small_cls"), **kw).fit(X, y, X_val=Xv, y_val=yv)
    r = est.fine_tune_result_
    assert r["steps_run"] == 3 and 0 <= r["best_step"] <= 3 and r["stopped_at"] == -1
    proba = est.predict_proba(Xt)
    zero = nofall.MitraClassifier(model_dir("small_cls"), mirror=False, fine_tune=False).fit(X, y).predict_proba(Xt)
    assert not np.array_equal(proba, zero)
    # the shared model is untouched: a zero-shot estimator after the fine-tuning gives the same
    zero2 = nofall.MitraClassifier(model_dir("small_cls"), mirror=False, fine_tune=False).fit(X, y).predict_proba(Xt)
    assert np.array_equal(zero, zero2)
    b = os.environ.get("NOFALL_BIN") or str(ROOT / "build" / "nofall")
    if not os.access(b, os.X_OK):
        pytest.skip(f"no nofall binary at {b}")
    X.assign(y=y).to_csv(tmp_path / "train.csv", index=False)
    Xv.assign(y=yv).to_csv(tmp_path / "val.csv", index=False)
    Xt.to_csv(tmp_path / "test.csv", index=False)
    subprocess.run([b, "predict", "--model", model_dir("small_cls"), "--train", str(tmp_path / "train.csv"),
                    "--test", str(tmp_path / "test.csv"), "--target", "y", "--out", str(tmp_path / "o"),
                    "--fine-tune", "--fine-tune-steps", "3", "--val", str(tmp_path / "val.csv"), "--lr", "1e-3",
                    "--warmup-steps", "2", "--no-mirror", "--quiet"], check=True, capture_output=True)
    cli = pd.read_csv(tmp_path / "o" / "probabilities.csv")[list(est.classes_)].to_numpy()
    assert np.array_equal(cli, proba)


def test_finetune_regressor_internal_split():
    X, _ = _data(40)
    y = 2 * X["a"].to_numpy() - X["b"].to_numpy()
    est = nofall.MitraRegressor(model_dir("small_reg"), fine_tune_steps=2, random_state=1).fit(X, y)
    assert est.fine_tune_result_["steps_run"] == 2
    p = est.predict(_data(5, 40)[0])
    assert p.shape == (5,) and np.isfinite(p).all()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(est)


def test_finetune_ensemble():
    # two members, as AutoGluon's n_estimators: the first is the one-member run, the second continues its stream
    X, y = _data(40)
    one = nofall.MitraClassifier(model_dir("small_cls"), fine_tune_steps=2, mirror=False).fit(X, y)
    two = nofall.MitraClassifier(model_dir("small_cls"), fine_tune_steps=2, mirror=False, n_estimators=2).fit(X, y)
    p1, p2 = one.predict_proba(X), two.predict_proba(X)
    assert p2.shape == p1.shape and np.allclose(p2.sum(axis=1), 1.0) and not np.array_equal(p1, p2)
    assert two.fine_tune_result_["steps_run"] == 2


def test_finetune_refusals():
    X, y = _data(40)
    with pytest.raises(ValueError, match="need fine_tune=True"):
        nofall.MitraClassifier(model_dir("small_cls"), fine_tune=False).fit(X, y, X_val=X, y_val=y)
    with pytest.raises(ValueError, match="is not a class of y"):
        nofall.MitraClassifier(model_dir("small_cls"), fine_tune_steps=1).fit(X, y, X_val=X[:3], y_val=["yes", "no", "maybe"])
