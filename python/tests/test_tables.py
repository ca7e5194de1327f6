"""Column types given by the user (column_types, pandas category and datetime64
dtypes; docs/tables.md "Column types") and score() as scikit-learn's. The
parity of the types with AutoGluon: test_parity.py, case column_types (read
with pandas' category / float64 / datetime64 dtypes)."""
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, r2_score

import nofall
from test_tabstar import tabstar_dir


def _frame(n=40, seed=3):
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(size=n), 3)
    return pd.DataFrame({
        "x": x,
        "when": rng.choice(["03/04/2021", "2020/12/01", "Jan 5 2019"], size=n),  # dates pandas reads, nofall not
        "code": rng.integers(0, 4, size=n),
    }), np.where(x > 0, "hi", "lo")


def test_column_types_category(small_cls):
    X, y = _frame()
    with pytest.raises(nofall.NofallInputError, match="might be a date"):
        nofall.MitraClassifier(small_cls, fine_tune=False).fit(X, y)
    a = nofall.MitraClassifier(small_cls, fine_tune=False, column_types={"when": "category"}).fit(X, y)
    kept = {c["name"]: c for c in a.report_["columns_kept"]}
    assert kept["when"]["type"] == "category" and kept["when"]["csv_type"] == "category"
    # a pandas category column is the same
    Xc = X.assign(when=X["when"].astype("category"))
    b = nofall.MitraClassifier(small_cls, fine_tune=False).fit(Xc, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(Xc))
    # score: scikit-learn's accuracy of predict
    assert a.score(X, y) == accuracy_score(y, a.predict(X))


def test_column_types_errors(small_cls):
    X, y = _frame()
    est = lambda ct: nofall.MitraClassifier(small_cls, fine_tune=False, column_types=ct)  # noqa: E731
    with pytest.raises(ValueError, match=r"column_types: no column 'nope'"):
        est({"nope": "category"}).fit(X, y)
    with pytest.raises(ValueError, match=r"column_types\['when'\] = 'categorical': not a type"):
        est({"when": "categorical"}).fit(X, y)
    with pytest.raises(nofall.NofallInputError, match=r"row 1, column 'when': '[^']*' is not a number \(column_types "
                                                      r"when=numeric\)"):
        est({"when": "numeric"}).fit(X, y)
    with pytest.raises(nofall.NofallInputError, match=r"row 1, column 'when': '[^']*' is not a date nofall reads"):
        est({"when": "datetime"}).fit(X, y)
    # integer categories whose order as text is not theirs: refused, saying how to give them
    Xi = X.assign(when="a", code=pd.Categorical(np.tile([95, 1001, 20, 7], 10)))
    with pytest.raises(ValueError, match="column 'code': a category dtype of int values"):
        nofall.MitraClassifier(small_cls, fine_tune=False).fit(Xi, y)


def test_datetime64_column(small_cls):
    """a datetime64 column is AutoGluon's datetime raw type: date features, also when few values are set"""
    X, y = _frame()
    d = pd.Series(pd.NaT, index=X.index, dtype="datetime64[ns]")
    d[::8] = pd.Timestamp("2021-03-04 05:06:07")
    d[1::8] = pd.Timestamp("2022-01-01")
    est = nofall.MitraClassifier(small_cls, fine_tune=False).fit(X.assign(when=d), y)
    kept = [c["name"] for c in est.report_["columns_kept"]]
    assert "when.year" in kept or "when" in kept
    assert all(c["type"] == "datetime" for c in est.report_["columns_kept"] if c["name"].startswith("when"))


def test_regressor_score(small_reg):
    X, y = _frame()
    yv = X["x"].to_numpy() * 3 + 1
    est = nofall.MitraRegressor(small_reg, fine_tune=False, column_types={"when": "category"}).fit(X, yv)
    assert est.score(X, yv) == pytest.approx(r2_score(yv, est.predict(X)), rel=1e-12, abs=1e-12)


def test_tabstar_column_types():
    """TabSTAR: an int column given as category is verbalized as text; datetime is refused (no date encoder)"""
    X, y = _frame()
    m = tabstar_dir(21)
    a = nofall.TabSTARClassifier(m).fit(X, y)
    b = nofall.TabSTARClassifier(m, column_types={"code": "category"}).fit(X, y)
    kind = lambda e: {c["name"]: c["type"] for c in e.report_["columns_kept"]}["code"]  # noqa: E731
    assert kind(a) == "numerical" and kind(b) == "text"
    with pytest.raises(nofall.NofallInputError, match="given the type datetime: TabSTAR encodes dates"):
        nofall.TabSTARClassifier(m, column_types={"when": "datetime"}).fit(X.assign(when="2021-01-02"), y)
