#!/usr/bin/env python3
"""Fixtures for `nofall predict`: AutoGluon's own pipeline on CSV tables.

This script IMPORTS AutoGluon (autogluon.tabular 1.6.3 from PyPI) and runs its
pipeline; it contains no copy of the upstream code:

    pandas.read_csv -> LabelCleaner -> AutoMLPipelineFeatureGenerator
    -> MitraModel (fine_tune=False, hf_model = a `nofall gen-weights` dir)
    -> MitraModel.predict_proba / predict

with three changes, each needed for an exact comparison:
  * torch.autocast is switched off (fp32 everywhere) and SDPA uses its math
    backend;
  * the Preprocessor's random mirror signs (global numpy RNG upstream) are
    replaced by nofall's draw from --seed (splitmix64, below), so both sides
    use the same signs;
  * MitraModel.fit gets X_val = X (the whole training table): without
    validation data Mitra fits its Preprocessor (NaN means, singular columns,
    target range) on an internal 80 % split; nofall uses the whole table.
The support set is the whole training table (n <= 8192: a permutation of it).
Above 8,192 training rows (the case "big": 9,900 rows, a small model) each
1,024-row test chunk of each member gets a random 8,192-row subset from
Mitra's RandomState(get_numpy_seed(seed)); that case passes the case's seed
as Mitra's `seed` hyperparameter (nofall: --seed), so both draw the same
subsets. (The cases of <= 8,192 rows were made without it: there the draw
only permutes the support.)

usage: predict_fixtures.py make [--nofall build/nofall] [--out tests/fixtures/predict] [--only a,b]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
M64 = (1 << 64) - 1


def splitmix64(state: int):
    """nofall's mirror generator: yields 64-bit outputs from state `seed`."""
    while True:
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        yield z ^ (z >> 31)


class MirrorDraw:
    """Per member, in AutoGluon's order: the regression mirror (regression
    only), then one sign per feature (top bit set = -1)."""

    def __init__(self, seed: int, enabled: bool):
        self.gen = splitmix64(seed)
        self.enabled = enabled
        self.signs = []
        self.reg = []

    def regression(self):
        v = bool(next(self.gen) >> 63) if self.enabled else False
        self.reg.append(v)
        return v

    def features(self, n):
        s = [(-1 if (next(self.gen) >> 63) else 1) if self.enabled else 1 for _ in range(n)]
        self.signs.append(s)
        return np.array(s, dtype=np.int64).reshape(1, n)


def run_autogluon(model_dir: Path, train: Path, test: Path, target: str, task: str, n_est: int, seed: int,
                  mirror: bool, mitra_seed: int | None = None, column_types: dict | None = None):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from autogluon.core.data import LabelCleaner
    from autogluon.core.utils import infer_problem_type
    from autogluon.features.generators import AutoMLPipelineFeatureGenerator
    from autogluon.tabular.models.mitra.mitra_model import MitraModel
    from autogluon.tabular.models.mitra._internal.data import preprocessor as pp

    torch.set_float32_matmul_precision("highest")
    real_autocast = torch.autocast
    torch.autocast = lambda *a, **k: real_autocast("cpu", enabled=False)

    draw = MirrorDraw(seed, mirror)
    pp.Preprocessor.determine_regression_mirror = lambda self: setattr(self, "regression_mirror", draw.regression())
    pp.Preprocessor.determine_mirror = lambda self, x: setattr(self, "mirror", draw.features(x.shape[1]))
    singular = []
    orig_sing = pp.Preprocessor.determine_which_features_are_singular

    def sing(self, x):
        orig_sing(self, x)
        singular.append([bool(v) for v in self.singular_features])

    pp.Preprocessor.determine_which_features_are_singular = sing

    # --column-type COL=TYPE as pandas reads it: read_csv(dtype=...) (category: the values as written;
    # numeric: float64), datetime: parse_dates
    ct = column_types or {}
    dtype = {c: ("category" if t == "category" else "float64") for c, t in ct.items() if t != "datetime"}
    parse_dates = [c for c, t in ct.items() if t == "datetime"]
    df = pd.read_csv(train, dtype=dtype or None, parse_dates=parse_dates or None)
    dt = pd.read_csv(test, dtype=dtype or None, parse_dates=parse_dates or None)
    for c in parse_dates:  # a column of dates and blanks: datetime64 (read_csv leaves it so)
        assert str(df[c].dtype).startswith("datetime64"), (c, df[c].dtype)
    y = df[target]
    X = df.drop(columns=[target])
    Xt = dt.drop(columns=[target]) if target in dt.columns else dt
    problem_type = "regression" if task == "regression" else infer_problem_type(y)
    if task == "classification" and problem_type == "regression":
        problem_type = "multiclass" if y.nunique() > 2 else "binary"
    cleaner = LabelCleaner.construct(problem_type=problem_type, y=y)
    yc = cleaner.transform(y)
    fg = AutoMLPipelineFeatureGenerator(verbosity=0)
    Xf = fg.fit_transform(X)
    Xtf = fg.transform(Xt)
    ag_features = list(Xf.columns)
    fmeta = fg.feature_metadata
    cat_features = set(fmeta.get_features(valid_raw_types=["category"]))
    bool_features = set(fmeta.get_features(required_special_types=["bool"]))
    date_features = set(fmeta.get_features(required_special_types=["datetime_as_int"]))
    # what each input column generates (a date column: DatetimeFeatureGenerator's five)
    date_in = set(fg.feature_metadata_in.get_features(required_special_types=["datetime_as_object"]))
    date_in |= set(fg.feature_metadata_in.get_features(valid_raw_types=["datetime"]))
    generated = []
    for c in X.columns:
        generated += [c] + ([c + p for p in (".year", ".month", ".day", ".dayofweek")] if c in date_in else [])

    hyp = {"fine_tune": False, "hf_model": str(model_dir), "n_estimators": n_est, "device": "cpu"}
    if mitra_seed is not None:
        hyp["seed"] = mitra_seed
    m = MitraModel(path=tempfile.mkdtemp(), name="Mitra", problem_type=problem_type, eval_metric=None,
                   hyperparameters=hyp)
    with torch.no_grad(), sdpa_kernel([SDPBackend.MATH]):
        m.fit(X=Xf, y=yc, X_val=Xf, y_val=yc, num_gpus=0, num_cpus=2)
        if problem_type == "regression":
            pred = np.asarray(m.predict(Xtf), dtype=np.float64)
            proba = None
        else:
            proba = np.asarray(m.predict_proba(Xtf), dtype=np.float64)
            if proba.ndim == 1:  # binary: AutoGluon returns P(class 1)
                proba = np.stack([1 - proba, proba], axis=1)
            pred = np.argmax(proba, axis=1)
    sing0 = singular[0] if singular else [False] * len(ag_features)
    kept = [f for f, s in zip(ag_features, sing0) if not s]
    dropped = [c for c in generated if c not in ag_features] + [f for f, s in zip(ag_features, sing0) if s]
    types = {f: ("category" if f in cat_features else "bool" if f in bool_features else
                 "datetime" if f in date_features else "numeric") for f in kept}
    info = {
        "problem_type": problem_type,
        "kept": kept, "dropped": dropped, "types": types,
        "mirror": draw.signs[:n_est], "regression_mirror": draw.reg[:n_est],
    }
    if problem_type != "regression":
        classes = list(cleaner.ordered_class_labels)
        info["classes"] = [str(c) for c in classes]
        labels = [str(classes[i]) for i in pred]
    else:
        labels = None
    return info, proba, pred, labels


# ----- tables -------------------------------------------------------------------------

def sk_table(name):
    from sklearn import datasets
    f = {"iris": datasets.load_iris, "wine": datasets.load_wine, "breast_cancer": datasets.load_breast_cancer,
         "diabetes": datasets.load_diabetes}[name]
    b = f(as_frame=True)
    df = b.frame.copy()
    if name in ("iris", "wine"):
        df["target"] = [str(b.target_names[i]) for i in b.target]
    return df


def penguins():
    import palmerpenguins
    return palmerpenguins.load_penguins()


def rules_table():
    """Every preprocessing rule in one small table (numpy default_rng(7))."""
    rng = np.random.default_rng(7)
    n = 100
    a = rng.normal(size=n)
    df = pd.DataFrame({
        "num": np.round(a, 3),
        "num_nan": np.where(rng.random(n) < 0.2, np.nan, np.round(rng.normal(size=n), 2)),
        "color": rng.choice(["red", "green", "blue", "Zed", "éclair", ""], size=n),
        "rare": [f"v{rng.integers(0, 40)}" for _ in range(n)],
        "ident": [f"id{i}" for i in range(n)],
        "const": 5,
        "allnan": np.nan,
        "two": rng.choice(["yes", "no"], size=n),
        "two_nan": np.where(rng.random(n) < 0.3, np.nan, 3.5),
        "intcol": rng.integers(0, 9, size=n),
        "dup": None,
        "one_rare": np.where(np.arange(n) == 4, "only", "common"),
    })
    df["dup"] = df["num"]
    y = (a + 0.5 * rng.normal(size=n) > 0).astype(int) + (a > 1).astype(int)
    df["label"] = np.array(["lo", "mid", "hi"])[y]
    return df


def dates_table():
    """ISO 8601 date columns (DatetimeFeatureGenerator), numpy default_rng(3)."""
    rng = np.random.default_rng(3)
    n = 100
    day = pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 4 * 365, size=n), unit="D")
    sec = rng.integers(0, 86400, size=n)
    when = []
    for i in range(n):
        t = day[i] + pd.to_timedelta(int(sec[i]), unit="s")
        form = i % 6
        when.append(t.strftime("%Y-%m-%d") if form == 0 else t.strftime("%Y-%m-%d %H:%M:%S") if form == 1 else
                    t.strftime("%Y-%m-%dT%H:%M:%SZ") if form == 2 else t.strftime("%Y-%m-%dT%H:%M:%S+02:00")
                    if form == 3 else t.strftime("%Y-%m-%d %H:%M:%S.") + "%06d" % rng.integers(0, 10**6)
                    if form == 4 else t.strftime("%Y-%m-%dT%H:%M"))
    when = np.array(when, dtype=object)
    when[rng.random(n) < 0.1] = np.nan
    when[[7, 31]] = "unknown"   # no date: NaT -> the training mean
    stamp = [f"2020-{m:02d}-{d:02d}" for m, d in zip(rng.integers(1, 13, size=n), rng.integers(1, 29, size=n))]
    x = np.round(rng.normal(size=n), 3)
    df = pd.DataFrame({"x": x, "when": when, "grp": rng.choice(["a", "b", "c"], size=n), "stamp": stamp})
    month = pd.to_datetime(pd.Series(when), errors="coerce", utc=True, format="mixed").dt.month.fillna(6)
    df["label"] = np.where(x + (month.values > 6) * 0.8 + 0.3 * rng.normal(size=n) > 0.4, "late", "early")
    return df


def dates_edit(te):
    te = te.copy()
    te.loc[0, "when"] = np.nan             # missing in test -> the training mean
    te.loc[1, "when"] = "unknown"          # no date
    te.loc[2, "when"] = "2031-05-06 07:08:09"   # outside the training range
    te.loc[3, "stamp"] = "2021-02-03"      # a year training never saw
    return te
def big_table():
    """More than 8,192 training rows (numpy default_rng(3)): 3 features, 3 classes."""
    rng = np.random.default_rng(3)
    n = 11000
    a = np.round(rng.normal(size=n), 4)
    b = np.round(rng.random(n) * 10, 3)
    c = rng.integers(0, 6, size=n)
    s = a + 0.2 * b - 0.3 * c + 0.5 * rng.normal(size=n)
    y = np.where(s > 0.5, "p", np.where(c % 2 == 1, "q", "r"))
    return pd.DataFrame({"a": a, "b": b, "c": c, "y": y})


def date_sample_table(sampled):
    """600 training rows (then 20 test rows) whose column `d` is a date column for AutoGluon only because of
    Series.sample(n=500, random_state=0) (sampled=True: 100 ISO dates, all in the sample: 20 % of it, 16.7 %
    of the rows), or only because of the rows it leaves out (sampled=False: 120 ISO dates, 100 outside the
    sample: 20 % of the rows, 4 % of the sample -> not a date column, a category); numpy default_rng(5)"""
    n = 600
    rng = np.random.default_rng(5)
    perm = np.random.RandomState(0).permutation(n)
    iso_rows = perm[:100] if sampled else np.concatenate([perm[500:], perm[:20]])
    d = rng.choice(["x", "y", "z"], size=n + 20).astype(object)
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 1000, size=len(iso_rows)), unit="D")
    d[iso_rows] = [t.strftime("%Y-%m-%d") for t in days]
    d[n:n + 5] = ["2021-03-04", "2019-12-31", "x", "2022-07-08", "y"]
    x = np.round(rng.normal(size=n + 20), 3)
    y = np.where(x + 0.5 * rng.normal(size=n + 20) > 0, "b", "a")
    return pd.DataFrame({"x": x, "d": d, "y": y})


def pandas_types_table():
    """read_csv's dtypes at their edges (pandas 2.x C parser), numpy default_rng(13): bools in any case
    (bool dtype), bools with blanks (an object column of bools and NaN: categories False, True, ''), one
    bool and blanks (0/1), integers above INT64_MAX (uint64), beyond UINT64_MAX (text), 1e400 (no
    float: text), uint64 values with a missing one (text, 'NA' kept as written), codes that are
    text in training and all integers in the test table (another kind: no category matches)."""
    rng = np.random.default_rng(13)
    n = 100
    x = np.round(rng.normal(size=n), 3)
    u = rng.integers(0, 4, size=n)
    df = pd.DataFrame({
        "x": x,
        "flag": rng.choice(["True", "TRUE", "true", "False", "FALSE", "false"], size=n),
        "flag_na": np.where(rng.random(n) < 0.2, "", rng.choice(["TRUE", "FALSE"], size=n)),
        "only_true": np.where(rng.random(n) < 0.5, "", "True"),
        "big_u": [str(9223372036854775808 + 2**60 * int(k) + 1) for k in u],  # distinct as doubles too
        "big_over": [str(18446744073709551616 + int(k)) for k in rng.integers(0, 5, size=n)],
        "huge": rng.choice(["1e400", "-1e400", "2.5", "7"], size=n),
        "conflict": np.where(rng.random(n) < 0.15, "NA", [str(9223372036854775808 + int(k)) for k in u]),
        "codes": rng.choice(["A1", "7", "12", "B"], size=n),
    }, dtype=object)
    s = x + 0.6 * (df["flag"].str.lower() == "true") - 0.4 * u
    df["label"] = np.where(s > 0.3, "p", np.where(s < -0.8, "n", "z"))
    return df


def float_labels_table():
    """iris with float64 class labels written as "1", "2.5", "+3e0": AutoGluon's classes are 1.0, 2.5, 3.0
    (str() of the float64 values), sorted by value"""
    df = sk_table("iris")
    df["target"] = df["target"].map({"setosa": "2.5", "versicolor": "1", "virginica": "+3e0"})
    return df


def int_labels_table():
    """iris with integer class labels beyond 2^53, one beyond INT64_MAX (a uint64 column; one label
    written with a leading zero): AutoGluon's classes are the exact integers, sorted, as str() prints
    them -- 9007199254740992 and 9007199254740993 are one double; and int features like them"""
    df = sk_table("iris")
    df["target"] = df["target"].map({"setosa": "9007199254740993", "versicolor": "09007199254740992",
                                     "virginica": "18446744073709551615"})
    # features of the same kind: two values one double apart (AutoGluon's 0/1 column), three
    # values that are two doubles (an int column, not 0/1)
    r = np.random.default_rng(23)
    df["big2"] = [str(9007199254740992 + int(v)) for v in r.integers(0, 2, len(df))]
    df["big3"] = [str(9007199254740992 + int(v)) for v in r.integers(0, 3, len(df))]
    return df


def two_valued_table():
    """iris with three two-valued columns (bool, int 0/1, float 0.5/1.5): AutoGluon's 0/1 features"""
    df = sk_table("iris")
    r = np.random.default_rng(21)
    df["flag"] = r.choice([True, False], size=len(df))
    df["i01"] = r.choice([0, 1], size=len(df))
    df["f2"] = r.choice([0.5, 1.5], size=len(df))
    return df


def two_valued_edit(te):
    """a string in each of the test table's two-valued columns: pandas reads them as object
    columns, and AutoGluon's `== value` matches none of their strings ('1', '0.5', 'True'
    included): 0 throughout"""
    te = te.copy().astype({"flag": object, "i01": object, "f2": object})
    te.loc[0, "flag"] = "yes"
    te.loc[1, "i01"] = "n/a?"
    te.loc[2, "f2"] = "high"
    return te


def pandas_types_edit(te):
    te = te.copy()
    te["codes"] = [str(v) for v in np.random.default_rng(14).choice([7, 12, 3], size=len(te))]  # int64 in test
    te.loc[0, "flag"] = ""        # bool in training, bools and NaN in test: missing -> 0
    te["flag_na"] = te["flag_na"].replace("", "FALSE")  # bools and NaN in training, bool dtype in test
    return te


def column_types_table():
    """--column-type (docs/tables.md "Column types"), numpy default_rng(31): `room` a category with
    missing values (they stay NaN: no '' category); `zip` integers read as category strings (code
    point order: "1001" < "20" < "95"); `when` dates pandas reads but nofall does not (refused as
    object, a category as given); `notes` free text (refused as object, a category as given);
    `count` int64 -> float64 (a missing test value is then the mean, not 0); `seen` ISO dates in 15 %
    of the rows (an object column of too few dates: a category) given as datetime (date features)."""
    rng = np.random.default_rng(31)
    n = 100
    x = np.round(rng.normal(size=n), 3)
    room = rng.choice(["room 1", "room 2", "room 3", "Ward 9"], size=n).astype(object)
    room[rng.random(n) < 0.15] = np.nan
    zipc = rng.choice([95, 1001, 20, 7], size=n)
    when = rng.choice(["03/04/2021", "2020/12/01", "Jan 5 2019", "5.6.2022"], size=n)
    notes = rng.choice(["very quiet corner room", "next to the lift shaft", "big window facing north",
                        "small and dark but cheap", "shared bath on the floor"], size=n)
    count = rng.integers(0, 12, size=n)
    seen = np.array([np.nan] * n, dtype=object)
    k = rng.choice(n, size=15, replace=False)
    seen[k] = [f"2021-{m:02d}-{d:02d}" for m, d in zip(rng.integers(1, 13, size=15), rng.integers(1, 29, size=15))]
    s = x + 0.5 * (zipc > 50) - 0.08 * count + 0.4 * (room == "room 2")
    label = np.where(s > 0.2, "yes", "no")
    return pd.DataFrame({"x": x, "room": room, "zip": zipc, "when": when, "notes": notes, "count": count,
                         "seen": seen, "label": label})


def column_types_edit(te):
    te = te.copy()
    te["count"] = te["count"].astype(float)
    te.loc[0, "count"] = np.nan         # float64 as given: the training mean
    te.loc[1, "room"] = np.nan          # a missing category: code -1
    te.loc[2, "zip"] = 555              # an unseen category
    te.loc[3, "seen"] = "2030-01-02"    # a date training never saw
    return te


COLUMN_TYPES = {"room": "category", "zip": "category", "when": "category", "notes": "category",
                "count": "numeric", "seen": "datetime"}


def write_split(df, d: Path, n_train, n_test, seed, edit_test=None, ordered=False):
    idx = np.arange(len(df)) if ordered else np.random.default_rng(seed).permutation(len(df))
    tr = df.iloc[idx[:n_train]].reset_index(drop=True)
    te = df.iloc[idx[n_train:n_train + n_test]].reset_index(drop=True)
    if edit_test:
        te = edit_test(te)
    d.mkdir(parents=True, exist_ok=True)
    tr.to_csv(d / "train.csv", index=False)
    te.to_csv(d / "test.csv", index=False)


def rules_edit(te):
    te = te.copy()
    te["intcol"] = te["intcol"].astype(float)
    te.loc[0, "intcol"] = np.nan       # int column, missing only in test
    te.loc[1, "color"] = "purple"      # unseen category
    te.loc[2, "two"] = "maybe"         # a third value of a two-valued column
    te.loc[3, "num"] = np.nan          # missing numeric in test
    return te


CASES = {
    "iris": dict(table=lambda: sk_table("iris"), target="target", task="auto", n_train=120, n_test=30, n_est=1),
    "wine": dict(table=lambda: sk_table("wine"), target="target", task="auto", n_train=140, n_test=38, n_est=2),
    "breast_cancer": dict(table=lambda: sk_table("breast_cancer"), target="target", task="auto", n_train=150,
                          n_test=40, n_est=1),
    "diabetes": dict(table=lambda: sk_table("diabetes"), target="target", task="regression", n_train=150,
                     n_test=40, n_est=2, seed=2),  # seed 2: regression mirror on in member 0, off in 1
    "penguins": dict(table=penguins, target="species", task="auto", n_train=150, n_test=50, n_est=1),
    "iris_4": dict(table=lambda: sk_table("iris"), target="target", task="auto", n_train=120, n_test=30, n_est=4,
                   seed=9),  # an ensemble of 4 members
    "iris_nomirror": dict(table=lambda: sk_table("iris"), target="target", task="classification", n_train=120,
                          n_test=30, n_est=1, mirror=False),
    "rules": dict(table=rules_table, target="label", task="auto", n_train=80, n_test=20, n_est=1,
                  edit=rules_edit),
    "dates": dict(table=dates_table, target="label", task="auto", n_train=80, n_test=20, n_est=1,
                  edit=dates_edit),
    "pandas_types": dict(table=pandas_types_table, target="label", task="auto", n_train=80, n_test=20, n_est=1,
                         edit=pandas_types_edit),
    "float_labels": dict(table=float_labels_table, target="target", task="classification", n_train=120,
                         n_test=30, n_est=1),
    "int_labels": dict(table=int_labels_table, target="target", task="auto", n_train=120, n_test=30, n_est=1),
    "two_valued": dict(table=two_valued_table, target="target", task="auto", n_train=120, n_test=30, n_est=1,
                       edit=two_valued_edit),
    # --column-type (small model: the point is the columns)
    "column_types": dict(table=column_types_table, target="label", task="auto", n_train=80, n_test=20, n_est=1,
                         edit=column_types_edit, column_types=COLUMN_TYPES,
                         weights=["--dim", "16", "--layers", "1", "--heads", "2"]),
    # > 8,192 training rows: two 1,024-row test chunks, two members sharing one RandomState; a small
    # model (the full-size one would take minutes a forward on a CPU)
    "big": dict(table=big_table, target="y", task="auto", n_train=9900, n_test=1100, n_est=2, mitra_seed=True,
                weights=["--dim", "16", "--layers", "1", "--heads", "2"]),
    # AutoGluon's date detection on its 500-row sample (a small model: the point is the columns)
    "dates_sample_yes": dict(table=lambda: date_sample_table(True), target="y", task="auto", n_train=600,
                             n_test=20, n_est=1, ordered=True, weights=["--dim", "16", "--layers", "1", "--heads", "2"]),
    "dates_sample_no": dict(table=lambda: date_sample_table(False), target="y", task="auto", n_train=600,
                            n_test=20, n_est=1, ordered=True, weights=["--dim", "16", "--layers", "1", "--heads", "2"]),
}


def make(args):
    nofall = Path(args.nofall).resolve()
    out = Path(args.out)
    only = set(args.only.split(",")) if args.only else None
    tmp = Path(tempfile.mkdtemp())
    models = {}
    for task, extra in (("classification", []), ("regression", ["--task", "regression", "--outputs", "1"])):
        d = tmp / task
        subprocess.run([str(nofall), "gen-weights", "mitra", "--out", str(d), "--seed", "0", *extra], check=True,
                       stdout=subprocess.DEVNULL)
        models[task] = d
    for name, c in CASES.items():
        if only and name not in only:
            continue
        mtask = "regression" if c["task"] == "regression" else "classification"
        if c.get("weights"):
            md = tmp / f"{name}-{mtask}"
            extra = ["--task", "regression", "--outputs", "1"] if mtask == "regression" else []
            subprocess.run([str(nofall), "gen-weights", "mitra", "--out", str(md), "--seed", "0", *extra,
                            *c["weights"]], check=True, stdout=subprocess.DEVNULL)
            models[f"{name}-{mtask}"] = md
        d = out / name
        if d.exists():
            shutil.rmtree(d)
        write_split(c["table"](), d, c["n_train"], c["n_test"], 11, c.get("edit"), c.get("ordered", False))
        seed = c.get("seed", 5)
        mkey = f"{name}-{mtask}" if c.get("weights") else mtask
        info, proba, pred, labels = run_autogluon(models[mkey], d / "train.csv", d / "test.csv", c["target"],
                                                  c["task"], c["n_est"], seed, c.get("mirror", True),
                                                  seed if c.get("mitra_seed") else None, c.get("column_types"))
        case = {"target": c["target"], "task": c["task"], "n_estimators": c["n_est"], "seed": seed,
                "mirror_enabled": c.get("mirror", True),
                "weights": {"seed": 0, "task": mtask, **({"args": c["weights"]} if c.get("weights") else {})},
                **({"column_types": c["column_types"]} if c.get("column_types") else {}), **info}
        if proba is not None:
            np.save(d / "expected_probabilities.npy", proba.astype(np.float64))
            with open(d / "expected_probabilities.csv", "w") as f:  # for the test, which has no numpy
                for row in proba:
                    f.write(",".join(repr(float(v)) for v in row) + "\n")
            case["labels"] = labels
        else:
            np.save(d / "expected_predictions.npy", pred.astype(np.float64))
            with open(d / "expected_predictions.csv", "w") as f:
                for v in pred:
                    f.write(repr(float(v)) + "\n")
        import autogluon.tabular, torch
        case["versions"] = {"autogluon.tabular": autogluon.tabular.__version__, "torch": torch.__version__,
                            "pandas": pd.__version__}
        (d / "case.json").write_text(json.dumps(case, indent=1) + "\n")
        print(f"{name}: kept {info['kept']} dropped {info['dropped']}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["make"])
    ap.add_argument("--nofall", default=str(REPO / "build" / "nofall"))
    ap.add_argument("--out", default=str(REPO / "tests" / "fixtures" / "predict"))
    ap.add_argument("--only", default="")
    make(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
