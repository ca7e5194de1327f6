"""The estimators against AutoGluon's own pipeline on the committed real-data
cases (tests/fixtures/predict, made by reference/predict_fixtures.py), on
cpu: probabilities max_abs <= 1e-5 (regression: predictions within 1e-5 x
max(1, max|y|)), identical labels, kept / dropped columns, types, signs;
one of them on opencl:0 too, on its small weights (every one with
NOFALL_TEST_OPENCL_ALL=1: about 5 minutes on PoCL on 2 cores, left out of CI
for its length; run by hand). The C library's own tests run the pipeline on
opencl:0 (predict-opencl) and every kernel (backend-ops); what this one adds
is the estimator's device reaching the library."""
import json
import os

import numpy as np
import pandas as pd
import pytest

import nofall
from conftest import FIXTURES, case_model, model_dir

CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "case.json").exists()) if FIXTURES.is_dir() else []


def _load(name):
    d = FIXTURES / name
    c = json.loads((d / "case.json").read_text())
    # case.json column_types (the case column_types) as upstream read the tables: pandas category and
    # float64 dtypes, datetime64 columns -- what the estimators take as such (docs/tables.md). A category
    # column is read as text, then made a category: pandas 2 (upstream's, AutoGluon needs < 2.4) parses
    # read_csv(dtype="category")'s categories as strings always, pandas 3 infers them (zip: int64)
    ct = c.get("column_types", {})
    cat = [k for k, t in ct.items() if t == "category"]
    kw = dict(dtype={k: (str if t == "category" else "float64") for k, t in ct.items() if t != "datetime"},
              parse_dates=[k for k, t in ct.items() if t == "datetime"]) if ct else {}
    train = pd.read_csv(d / "train.csv", **kw).astype({k: "category" for k in cat})
    test = pd.read_csv(d / "test.csv", **kw).astype({k: "category" for k in cat})
    y = train[c["target"]]
    X = train.drop(columns=[c["target"]])
    Xt = test.drop(columns=[c["target"]], errors="ignore")
    return d, c, X, y, Xt


def _estimator(c, device="cpu"):
    cls = c["weights"]["task"] == "classification"
    est = nofall.MitraClassifier if cls else nofall.MitraRegressor
    return est(case_model(c), device=device, n_estimators=c["n_estimators"],
               random_state=c["seed"], mirror=c.get("mirror_enabled", True), fine_tune=False)


def _check_report(est, c):
    r = est.report_
    assert [x["name"] for x in r["columns_kept"]] == c["kept"]
    assert sorted(x["name"] for x in r["columns_dropped"]) == sorted(c["dropped"])
    assert [x["type"] for x in r["columns_kept"]] == [c["types"][k] for k in c["kept"]]
    assert est.mirror_signs_ == c["mirror"]


def _opencl():
    return "opencl:0" in nofall.devices()


@pytest.mark.skipif(not CASES, reason=f"no parity fixtures at {FIXTURES}")
@pytest.mark.parametrize("name", CASES)
def test_parity_dataframe(name):
    _parity(name, "cpu")


@pytest.mark.skipif(not CASES or not _opencl(), reason="no parity fixtures, or no OpenCL device opencl:0")
@pytest.mark.parametrize("name", CASES if os.environ.get("NOFALL_TEST_OPENCL_ALL") == "1"
                         else [n for n in ("dates_sample_yes",) if n in CASES])
def test_parity_opencl(name):
    """the same on the OpenCL backend (PoCL in CI): a classifier with dates (small weights)"""
    _parity(name, "opencl:0")


def _parity(name, device):
    if name == "pandas_types" and int(pd.__version__.split(".")[0]) >= 3:
        pytest.skip("the case is read_csv's dtypes of pandas 2 (AutoGluon needs pandas < 2.4); pandas 3 reads "
                    "1e400 as inf, integers beyond uint64 as Python ints and 'NA' next to uint64 as a string "
                    "column: another DataFrame (the CLI's test covers the case)")
    if name == "float_labels":
        pytest.skip("scikit-learn classifiers refuse a continuous target (2.5 is no class to "
                    "check_classification_targets, as check_estimator requires); the CLI's test covers the case")
    d, c, X, y, Xt = _load(name)
    est = _estimator(c, device).fit(X, y)
    _check_report(est, c)
    assert est.n_features_in_ == X.shape[1]
    assert list(est.feature_names_in_) == list(X.columns)
    if "labels" in c:
        assert [str(k) for k in est.classes_] == c["classes"]
        proba = est.predict_proba(Xt)
        exp = np.loadtxt(d / "expected_probabilities.csv", delimiter=",", ndmin=2)
        assert proba.shape == exp.shape
        err = float(np.max(np.abs(proba - exp)))
        assert err <= 1e-5, f"max_abs {err}"
        assert [str(v) for v in est.predict(Xt)] == c["labels"]
    else:
        assert est.regression_mirror_ == c["regression_mirror"]
        pred = est.predict(Xt)
        exp = np.loadtxt(d / "expected_predictions.csv", ndmin=1)
        scale = max(1.0, float(np.max(np.abs(exp))))
        err = float(np.max(np.abs(pred - exp)))
        assert err <= 1e-5 * scale, f"max_abs {err} (scale {scale})"


@pytest.mark.skipif(not CASES, reason=f"no parity fixtures at {FIXTURES}")
@pytest.mark.parametrize("name", [n for n in CASES if n == "iris"])
def test_parity_numpy(name):
    """the numeric cases through plain numpy arrays: the same numbers"""
    d, c, X, y, Xt = _load(name)
    a = _estimator(c).fit(X, y)
    b = _estimator(c).fit(X.to_numpy(), y.to_numpy())
    assert not hasattr(b, "feature_names_in_")
    if "labels" in c:
        np.testing.assert_array_equal(a.predict_proba(Xt), b.predict_proba(Xt.to_numpy()))
    else:
        np.testing.assert_array_equal(a.predict(Xt), b.predict(Xt.to_numpy()))


@pytest.mark.skipif(not CASES, reason=f"no parity fixtures at {FIXTURES}")
def test_mirror_signs_reproduce(tmp_path):
    """the signs of one fit (its report, as a dict or as a report.json file) given to another reproduce it"""
    d, c, X, y, Xt = _load("penguins")
    a = nofall.MitraClassifier(model_dir("small_cls"), n_estimators=3, random_state=11, fine_tune=False).fit(X, y)
    f = tmp_path / "report.json"
    f.write_text(json.dumps(a.report_))
    for spec in (a.report_, str(f)):
        b = nofall.MitraClassifier(model_dir("small_cls"), n_estimators=3, random_state=0, mirror_signs=spec, fine_tune=False).fit(X, y)
        assert b.mirror_signs_ == a.mirror_signs_
        np.testing.assert_array_equal(a.predict_proba(Xt), b.predict_proba(Xt))
    bad = dict(a.report_, mirror_signs=[[2] * len(a.columns_kept_)] * 3)
    with pytest.raises(nofall.NofallInputError, match="not 1 or -1"):
        nofall.MitraClassifier(model_dir("small_cls"), n_estimators=3, mirror_signs=bad, fine_tune=False).fit(X, y)
