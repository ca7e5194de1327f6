"""TabSTARClassifier / TabSTARRegressor: parity with the committed TabSTAR
fixtures (tests/fixtures/tabstar-predict, upstream's TabSTARVerbalizer and
forward; the tolerances of tests/tabstar-predict.sh), and the messages for a
model directory of the other model."""
import json
import os
import pathlib

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
    est = (nofall.TabSTARClassifier if cls else nofall.TabSTARRegressor)(m, adapter=adapter).fit(X, y)
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
    a = nofall.TabSTARClassifier(m).fit(X, y)
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
