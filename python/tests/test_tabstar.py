"""TabSTARClassifier / TabSTARRegressor: parity with the committed TabSTAR
fixtures (tests/fixtures/tabstar-predict, upstream's TabSTARVerbalizer and
forward; the tolerances of tests/tabstar-predict.sh), and the messages for a
model directory of the other model."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pandas as pd
import pytest

import nofall
from conftest import _DIR, ROOT, model_dir

TS_FIXTURES = pathlib.Path(os.environ.get("NOFALL_TABSTAR_FIXTURES", ROOT / "tests" / "fixtures" / "tabstar-predict"))
CASES = sorted(p.parent.name for p in TS_FIXTURES.glob("*/case.json"))
_TS = {}


def tabstar_dir(seed, layers=2, vocab=2000):
    """a synthetic TabSTAR checkpoint (nofall.gen_weights = `nofall gen-weights tabstar`), as the fixtures' cases make"""
    key = (seed, layers, vocab)
    if key not in _TS:
        d = _DIR / ("tabstar%d-%d-%d" % key)
        nofall.gen_weights("tabstar", str(d), seed, {"layers": layers, "vocab": vocab})
        _TS[key] = str(d)
    return _TS[key]


def _case(name):
    d = TS_FIXTURES / name
    c = json.load(open(d / "case.json"))
    train = pd.read_csv(d / "train.csv")
    test = pd.read_csv(d / "test.csv")
    for f in (train, test):  # upstream's (and the fixture script's) object columns, not pandas 3's str
        for col in f.columns:
            if not pd.api.types.is_numeric_dtype(f[col]) and not pd.api.types.is_bool_dtype(f[col]):
                f[col] = f[col].astype(object)
    t = c["target"]
    return d, c, train.drop(columns=[t]), train[t], test.drop(columns=[t], errors="ignore")


@pytest.mark.parametrize("name", CASES)
def test_tabstar_parity(name):
    d, c, X, y, Xt = _case(name)
    m = tabstar_dir(c["seed"], c["layers"], c["vocab"])
    adapter = str((d / c["adapter"]).resolve()) if c.get("adapter") else None
    cls = c["task"] == "classification"
    Est = nofall.TabSTARClassifier if cls else nofall.TabSTARRegressor
    est = Est(m, adapter=adapter, fine_tune=False).fit(X, y)  # the fixtures' base weights
    lg = est.predict_logits(Xt)
    exp = np.load(d / "logits.npy")
    assert lg.shape == exp.shape
    diff = np.abs(lg.astype(np.float64) - exp)
    assert diff.max() <= 1e-4 and diff.mean() <= 1e-5, (diff.max(), diff.mean())
    if cls:
        assert (np.argmax(lg, axis=1) == np.argmax(exp, axis=1)).all()
        assert [str(v) for v in est.predict(Xt)] == c["predictions"]
    else:
        pe = np.load(d / "predictions.npy")
        got = est.predict(Xt)
        assert np.abs(got - pe).max() <= 1e-5 * max(1.0, np.abs(pe).max())
        assert est.report_["model_type"] == "tabstar"
    num = sorted(c["numerical"])
    kept_num = sorted(n for n, k in ((x["name"], x["type"]) for x in est.report_["columns_kept"]) if k == "numerical")
    assert len(kept_num) == len(num)
    assert (adapter is not None) == ("adapter" in c)


def test_tabstar_clone_and_classes():
    from sklearn.base import clone

    _, c, X, y, Xt = _case("e2e-multi")
    m = tabstar_dir(c["seed"], c["layers"], c["vocab"])
    a = nofall.TabSTARClassifier(m, fine_tune=False).fit(X, y)
    b = clone(a).fit(X, y)
    p = a.predict_proba(Xt)
    np.testing.assert_array_equal(p, b.predict_proba(Xt))
    assert p.shape == (len(Xt), len(a.classes_)) and list(a.classes_) == sorted(set(y))
    np.testing.assert_allclose(p.sum(axis=1), 1, rtol=1e-5)


def test_wrong_model_messages():
    X = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": ["x", "y", "x", "y"]})
    y = np.array([0, 1, 0, 1])
    ts = tabstar_dir(21)
    with pytest.raises(ValueError, match=r"a TabSTAR model \(config.json model_type 'tabstar'\).*use TabSTARClassifier"):
        nofall.MitraClassifier(ts, fine_tune=False).fit(X, y)
    with pytest.raises(ValueError, match=r"a TabSTAR model .*use TabSTARRegressor"):
        nofall.MitraRegressor(ts, fine_tune=False).fit(X, y.astype(float))
    with pytest.raises(ValueError, match=r"a Mitra classifier model .*not a TabSTAR model; use MitraClassifier"):
        nofall.TabSTARClassifier(model_dir("small_cls")).fit(X, y)
    with pytest.raises(ValueError, match=r"a Mitra regressor model .*not a TabSTAR model; use MitraRegressor"):
        nofall.TabSTARRegressor(model_dir("small_reg")).fit(X, y.astype(float))


def _cli():
    b = os.environ.get("NOFALL_BIN") or str(ROOT / "build" / "nofall")
    if not os.access(b, os.X_OK):
        pytest.skip(f"no nofall binary at {b} (build the CLI, or set NOFALL_BIN)")
    return b


def _fit_table(cls, n=40, seed=5):
    """a small mixed table (numerical, text, a target of text labels or values) as CSV and DataFrames"""
    r = np.random.RandomState(seed)
    a = np.round(r.normal(size=n) * 3, 2)
    b = np.array(["red", "green", "blue"], dtype=object)[r.randint(0, 3, n)]
    y = np.where(a + (b == "red") > 0, "yes", "no").astype(object) if cls else np.round(a * 2 + r.normal(size=n), 3)
    f = pd.DataFrame({"a": a, "b": b, "y": y})
    return f.iloc[:30].reset_index(drop=True), f.iloc[30:].reset_index(drop=True)


@pytest.mark.parametrize("cls", [True, False], ids=["classification", "regression"])
def test_tabstar_fit_is_predict_fine_tune(cls, tmp_path):
    """fit = upstream's fit (fine_tune=True): Python's predictions are `nofall predict`'s (which fine-tunes by
    default) on the same table and options, bit for bit; fine_tune=False is `nofall predict --no-fine-tune`'s"""
    b = _cli()
    m = tabstar_dir(3)
    train, test = _fit_table(cls)
    train.to_csv(tmp_path / "train.csv", index=False)
    test.to_csv(tmp_path / "test.csv", index=False)
    Est = nofall.TabSTARClassifier if cls else nofall.TabSTARRegressor
    X, y, Xt = train.drop(columns="y"), train["y"], test.drop(columns="y")

    def cli(*extra):
        out = tmp_path / ("out%d" % len(list(tmp_path.glob("out*"))))
        task = "classification" if cls else "regression"
        subprocess.run([b, "predict", "--model", m, "--train", str(tmp_path / "train.csv"), "--test",
                        str(tmp_path / "test.csv"), "--target", "y", "--task", task, "--out", str(out), "--quiet",
                        *extra], check=True, capture_output=True)
        return np.load(out / "logits.npy").reshape(len(Xt), -1)  # (n, outputs)

    ft = Est(m, max_epochs=2, patience=1, no_average=True, seed=0).fit(X, y)
    r = ft.fine_tune_result_
    assert r["epochs"] <= 2 and 1 <= r["best_epoch"] <= r["epochs"] and r["epochs_averaged"] == 0
    got = ft.predict_logits(Xt)
    # predict fine-tunes by default, as upstream; the fit's options as the estimator's
    np.testing.assert_array_equal(got, cli("--max-epochs", "2", "--patience", "1", "--no-average"))
    base = Est(m, fine_tune=False).fit(X, y)
    assert base.fine_tune_result_ is None
    lb = base.predict_logits(Xt)
    np.testing.assert_array_equal(lb, cli("--no-fine-tune"))
    assert np.abs(got - lb).max() > 1e-4  # the fit moved the weights (of a private copy: base's are unchanged)
    np.testing.assert_array_equal(Est(m, fine_tune=False).fit(X, y).predict_logits(Xt), lb)
    if cls:
        assert list(ft.classes_) == ["no", "yes"] and ft.predict_proba(Xt).shape == (len(Xt), 2)
    with pytest.raises(TypeError, match="cannot be pickled"):
        import pickle

        pickle.dumps(ft)


@pytest.mark.parametrize("cls", [True, False], ids=["classification", "regression"])
def test_tabstar_fit_x_val(cls, tmp_path):
    """fit(X, y, X_val, y_val) = upstream's fit with x_val / y_val = `nofall predict --val`, bit for bit; the
    pairs go together and need fine_tune; fine_tune=False on a directory `nofall finetune` wrote takes its
    verbalizer.json, as `nofall predict --no-fine-tune` on it"""
    b = _cli()
    m = tabstar_dir(3)
    train, test = _fit_table(cls)
    val, train = train.iloc[:8].reset_index(drop=True), train.iloc[8:].reset_index(drop=True)
    for name, f in (("train", train), ("val", val), ("test", test)):
        f.to_csv(tmp_path / (name + ".csv"), index=False)
    Est = nofall.TabSTARClassifier if cls else nofall.TabSTARRegressor
    X, y, Xv, yv, Xt = train.drop(columns="y"), train["y"], val.drop(columns="y"), val["y"], test.drop(columns="y")
    task = "classification" if cls else "regression"

    def cli(cmd, model, out, *extra):
        subprocess.run([b, cmd, "--model", model, "--train", str(tmp_path / "train.csv"), "--target", "y", "--task",
                        task, "--out", str(tmp_path / out), "--quiet", *extra], check=True, capture_output=True)
        return tmp_path / out

    def logits(d):
        return np.load(d / "logits.npy").reshape(len(Xt), -1)

    test_csv = str(tmp_path / "test.csv")
    ft = Est(m, max_epochs=1).fit(X, y, Xv, yv)
    r = ft.fine_tune_result_
    assert r["validation"] == "table" and r["n_train"] == len(X) and r["n_val"] == len(Xv) and r["epochs"] == 1
    want = logits(cli("predict", m, "pv", "--test", test_csv, "--val", str(tmp_path / "val.csv"), "--max-epochs", "1"))
    np.testing.assert_array_equal(ft.predict_logits(Xt), want)
    with pytest.raises(ValueError, match="go together"):
        Est(m).fit(X, y, Xv)
    with pytest.raises(ValueError, match="need fine_tune=True"):
        Est(m, fine_tune=False).fit(X, y, Xv, yv)
    if cls:  # a fine-tuned directory (split_to_val's fit): its verbalizer.json, as predict --no-fine-tune on it
        d = str(cli("finetune", m, "ft", "--max-epochs", "1"))
        got = Est(d, fine_tune=False).fit(X, y)
        assert got.fine_tuned_verbalizer_ and not Est(m, fine_tune=False).fit(X, y).fine_tuned_verbalizer_
        want = logits(cli("predict", d, "pno", "--test", test_csv, "--no-fine-tune"))
        np.testing.assert_array_equal(got.predict_logits(Xt), want)
