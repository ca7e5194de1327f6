"""The lower-level API (Model: forwards on arrays, trace, placement), errors
as exceptions carrying the C message, DataFrame handling, the GIL."""
import pickle
import threading
import time

import numpy as np
import pandas as pd
import pytest

import nofall


def _data(n=60, f=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    return X, y


def test_model_forward_matches_predictor(small_cls):
    """numeric features, no mirror, nothing dropped: the predictor feeds the model the float32 table itself"""
    X, y = _data()
    est = nofall.MitraClassifier(small_cls, mirror=False, fine_tune=False).fit(X[:40], y[:40])
    m = nofall.Model(small_cls)
    assert m.info["type"] == "mitra" and m.n_classes == 10
    lg = m.forward(support_x=X[:40].astype(np.float32), support_y=y[:40], query_x=X[40:].astype(np.float32))
    assert lg.shape == (20, 10) and lg.dtype == np.float32
    np.testing.assert_array_equal(est.predict_logits(X[40:])[0], lg[:, :2])
    t = m.trace_totals()
    assert t["ops"] > 0 and t["h2d_copies"] >= 3
    m.trace_reset(nofall._model.TRACE_RECORDS)
    m.forward(support_x=X[:40].astype(np.float32), support_y=y[:40], query_x=X[40:].astype(np.float32))
    tr = m.trace()
    assert tr["ops"] and tr["totals"]["ops"] == len(tr["ops"])
    assert m.markers()["device"] == "cpu"


def test_model_errors(small_cls, tmp_path):
    with pytest.raises(nofall.NofallError) as e:
        nofall.Model(str(tmp_path / "absent"))
    assert "absent" in str(e.value) and e.value.code_name.startswith("NF_ERR_")
    with pytest.raises(nofall.NofallError, match="opencl|cuda|device"):
        nofall.Model(small_cls, device="cuda:7")
    m = nofall.Model(small_cls)
    X, y = _data()
    with pytest.raises(ValueError):
        m.forward(support_x=X[:40], support_y=y[:39], query_x=X[40:])
    with pytest.raises(ValueError, match="no input"):
        m.forward(nonsense=X)


def test_dataframe_categoricals_and_nan(small_cls):
    rng = np.random.default_rng(1)
    n = 80
    df = pd.DataFrame({
        "num": rng.normal(size=n),
        "num_nan": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
        "color": pd.Categorical(rng.choice(["red", "green", "blue"], size=n)),
        "city": rng.choice(np.array(["Austin", "Zürich", "boston", None], dtype=object), size=n),
        "flag": rng.random(n) < 0.5,
        "count": rng.integers(0, 5, size=n),
    })
    y = np.where(df["num"] > 0, "pos", "neg")
    est = nofall.MitraClassifier(small_cls, n_estimators=2, fine_tune=False).fit(df[:60], y[:60])
    assert list(est.classes_) == ["neg", "pos"]
    assert est.n_features_in_ == 6 and list(est.feature_names_in_) == list(df.columns)
    types = {c["name"]: c["type"] for c in est.report_["columns_kept"]}
    assert types["color"] == "category" and types["city"] == "category" and types["flag"] == "bool"
    p = est.predict_proba(df[60:])
    assert p.shape == (20, 2) and np.allclose(p.sum(axis=1), 1)
    assert set(est.predict(df[60:])) <= {"neg", "pos"}
    assert 0 <= est.score(df[60:], y[60:]) <= 1
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df[60:].rename(columns={"num": "other"}))


def test_integers_beyond_2_53(small_cls):
    """integer columns reach the C library as integers: 2^53 and 2^53 + 1 (one double) are two
    values, so a 0/1 column, as AutoGluon's int64 comparison makes them; the same from numpy"""
    rng = np.random.default_rng(4)
    n = 40
    p = 2 ** 53
    df = pd.DataFrame({"num": rng.normal(size=n), "big": p + rng.integers(0, 2, size=n),
                       "ubig": np.uint64(2 ** 64 - 1) - rng.integers(0, 2, size=n).astype(np.uint64)})
    assert df["ubig"].dtype == np.uint64
    y = np.where(df["num"] > 0, "pos", "neg")
    for X, bools in ((df, 2), (df[["big"]].to_numpy(), 1), (df[["ubig"]].to_numpy(), 1)):
        est = nofall.MitraClassifier(small_cls, fine_tune=False).fit(X, y)
        kinds = [c["type"] for c in est.report_["columns_kept"]]
        assert kinds.count("bool") == bools, (X.dtypes if hasattr(X, "dtypes") else X.dtype, kinds)


def test_errors_carry_the_message(small_cls, small_reg):
    X, _ = _data()
    with pytest.raises(nofall.NofallInputError, match="has 12 classes; Mitra takes at most 10"):
        nofall.MitraClassifier(small_cls, fine_tune=False).fit(X, np.arange(60) % 12)
    with pytest.raises(ValueError, match="regressor, not a classifier"):
        nofall.MitraClassifier(small_reg, fine_tune=False).fit(X, np.arange(60) % 2)
    with pytest.raises(nofall.NofallInputError, match="constant: nothing to regress"):
        nofall.MitraRegressor(small_reg, fine_tune=False).fit(X, np.ones(60))
    est = nofall.MitraClassifier(small_cls, fine_tune=False).fit(pd.DataFrame({"a": X[:, 0], "b": ["u", "v"] * 30}), np.arange(60) % 2)
    with pytest.raises(nofall.NofallInputError, match="row 2, column 'a': 'two' is not a number"):
        est.predict(pd.DataFrame({"a": np.array(["1", "two"], dtype=object), "b": ["u", "v"]}))


def test_regressor(small_reg):
    X, _ = _data()
    y = 3 * X[:, 0] + 10
    est = nofall.MitraRegressor(small_reg, n_estimators=2, random_state=3, fine_tune=False).fit(X[:40], y[:40])
    p = est.predict(X[40:])
    assert p.shape == (20,) and np.all(np.isfinite(p))
    assert len(est.regression_mirror_) == 2
    assert est.predict_logits(X[40:]).shape == (2, 20, 1)


def test_pickle_and_params(small_cls):
    X, y = _data()
    est = nofall.MitraClassifier(small_cls, n_estimators=2, fine_tune=False).fit(X[:40], y[:40])
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.predict_proba(X[40:]), est.predict_proba(X[40:]))
    assert est.get_params()["n_estimators"] == 2
    est.set_params(n_estimators=3, mirror=False)
    assert est.fit(X[:40], y[:40]).report_["n_estimators"] == 3


def test_gil_released_during_forward(small_cls):
    """another Python thread runs while a forward is in C"""
    X, y = _data(n=1500, f=8)
    est = nofall.MitraClassifier(small_cls, fine_tune=False).fit(X[:1000], y[:1000])
    est.predict_proba(X[1000:1010])  # warm the model
    ticks = 0
    done = threading.Event()

    def work():
        est.predict_proba(X[1000:])
        done.set()

    t = threading.Thread(target=work)
    t0 = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    elapsed = time.perf_counter() - t0
    assert elapsed > 0.05 and ticks > 10, (elapsed, ticks)
