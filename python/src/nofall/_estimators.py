"""scikit-learn estimators on libnofall's Mitra predictor.

``fit`` stores the support set and fits AutoGluon's preprocessing in the C
library (the same code as ``nofall predict``: README "predict"); each
``predict_proba`` / ``predict`` runs one forward per ensemble member with the
whole training table as support.

Inputs: pandas DataFrames (numeric, bool, categorical, object / string
columns, NaN / None / pd.NA missing) or array-likes (numeric, or object
arrays whose columns are numbers or strings). A DataFrame column keeps its
pandas dtype (an object column is text, hence categories, as AutoGluon does
with it); array columns are named x0, x1, ...
"""
import json
import os
import threading

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (_check_feature_names, _check_n_features, check_array, check_consistent_length,
                                      check_is_fitted, column_or_1d)

from . import _nofall
from ._model import Model

_TASK_CLASSIFICATION, _TASK_REGRESSION = 1, 2
_models = {}
_models_lock = threading.Lock()


# where an estimator's weights come from, for the message when no model_dir was given (README "Getting
# the official weights")
_WEIGHTS_HELP = {
    "MitraClassifier": "a Mitra classifier directory (config.json + model.safetensors), e.g. "
                       "`huggingface-cli download autogluon/mitra-classifier --local-dir models/mitra-classifier`",
    "MitraRegressor": "a Mitra regressor directory (config.json + model.safetensors), e.g. "
                      "`huggingface-cli download autogluon/mitra-regressor --local-dir models/mitra-regressor`",
    "TabSTAR": "a TabSTAR directory (config.json + model.safetensors from Hugging Face alana89/TabSTAR, and "
               "vocab.txt from intfloat/e5-small-v2), e.g. `huggingface-cli download alana89/TabSTAR config.json "
               "model.safetensors --local-dir models/tabstar` and `huggingface-cli download intfloat/e5-small-v2 "
               "vocab.txt --local-dir models/tabstar`",
}


def _load_model(model_dir, device, variant=None, estimator="MitraClassifier"):
    """one loaded model per (directory, device, variant) in the process: estimators and their clones share
    it (variant: e.g. the TabSTAR adapter merged into it)"""
    if model_dir is None:
        kind = "TabSTAR" if estimator.startswith("TabSTAR") else estimator
        raise ValueError(f"{estimator}: no model directory given (model_dir=None). nofall ships no weights: pass "
                         f"{_WEIGHTS_HELP.get(kind, _WEIGHTS_HELP['MitraClassifier'])}, as "
                         f"{estimator}(\"models/...\"); `nofall verify --model DIR --device cpu --against cpu` "
                         f"checks a download. For a try-out without downloading, nofall.gen_weights(...) writes "
                         f"random synthetic weights in the official layout (see the README, \"Getting the "
                         f"official weights\").")
    key = (os.path.realpath(os.fspath(model_dir)), device, variant)
    with _models_lock:
        m = _models.get(key)
        if m is None:
            m = _models[key] = Model(key[0], device)
        return m


_ESTIMATORS = {("mitra", True): "MitraClassifier", ("mitra", False): "MitraRegressor",
               ("tabstar", True): "TabSTARClassifier", ("tabstar", False): "TabSTARRegressor"}
_TYPE_NAMES = {"mitra": "Mitra", "tabstar": "TabSTAR", "sptransformer": "SpTransformer"}


def _check_model_type(model, model_dir, want, classifier, estimator):
    """a wrong model directory: the model type found and the estimator that takes it"""
    found = model.info["type"]
    if found == want:
        return
    name = _TYPE_NAMES.get(found, found)
    if found == "mitra":
        classifier = bool(model.n_classes)
        name += " classifier" if classifier else " regressor"
    use = _ESTIMATORS.get((found, classifier))
    hint = f"; use {use}" if use else f"; {estimator} takes a {_TYPE_NAMES[want]} checkpoint"
    raise ValueError(f"model_dir {model_dir}: a {name} model (config.json model_type {found!r}), "
                     f"not a {_TYPE_NAMES[want]} model{hint}")


def _is_frame(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def _text(values, missing):
    return [None if miss else (v if isinstance(v, str) else str(v)) for v, miss in zip(values, missing)]


def _all_bools(s, miss):
    if s.dtype != object or miss.all():
        return False
    return all(isinstance(v, (bool, np.bool_)) for v, m in zip(s.tolist(), miss) if not m)


_COLUMN_TYPES = ("category", "numeric", "float", "text", "datetime")


def _category_column(key, s, miss):
    """a pandas category column: its values as text, typed "category" (AutoGluon: no date / free-text
    inference, missing values stay missing); categories of another type than str only where their
    order as text is their order (AutoGluon sorts the categories themselves)"""
    cats = list(s.cat.categories)
    if not all(isinstance(c, str) for c in cats):
        try:
            same = sorted(cats) == sorted(cats, key=str)
        except TypeError:
            same = False
        if not same:
            raise ValueError(
                f"column {key!r}: a category dtype of {type(cats[0]).__name__} values whose order as text differs "
                f"from their own order (AutoGluon's category codes follow theirs); give the categories as "
                f"strings (X[{key!r}].astype(str).astype('category')) or the column as numbers")
    return (key, "text", _text(s.astype(object).tolist(), miss), "category")


def _with_types(cols, column_types, where="column_types"):
    """apply column_types={name: type} (docs/tables.md "Column types") to (name, kind, data[, type]) columns"""
    if not column_types:
        return cols
    if not isinstance(column_types, dict):
        raise TypeError(f"{where}: a dict {{column: type}}, not {type(column_types).__name__}")
    names = [c[0] for c in cols]
    for k, t in column_types.items():
        if str(k) not in names:
            raise ValueError(f"{where}: no column {k!r} in X (columns: {names[:8]}{' ...' if len(names) > 8 else ''})")
        if not isinstance(t, str) or t.lower() not in _COLUMN_TYPES:
            raise ValueError(f"{where}[{k!r}] = {t!r}: not a type (category, numeric (or float), text, datetime)")
    ct = {str(k): t.lower() for k, t in column_types.items()}
    return [c[:3] + (ct[c[0]],) if c[0] in ct else c for c in cols]


def _frame_columns(X):
    import pandas as pd

    cols = []
    for j, name in enumerate(X.columns):
        s = X.iloc[:, j]
        dt = s.dtype
        key = str(name)
        miss = s.isna().to_numpy()
        if isinstance(dt, pd.CategoricalDtype):
            cols.append(_category_column(key, s, miss))
        elif pd.api.types.is_datetime64_any_dtype(dt):  # AutoGluon's raw type datetime: date features
            cols.append((key, "text", [None if m else v.isoformat() for v, m in zip(s.tolist(), miss)], "datetime"))
        elif pd.api.types.is_bool_dtype(dt) or _all_bools(s, miss):
            # bool dtype, or an object column of bools and NaN (read_csv's True / False with blanks)
            cols.append((key, "bool", [None if m else bool(v) for v, m in zip(s.astype(object).tolist(), miss)]))
        elif pd.api.types.is_numeric_dtype(dt) and not pd.api.types.is_bool_dtype(dt):
            if pd.api.types.is_complex_dtype(dt):
                raise ValueError("Complex data not supported")
            if pd.api.types.is_integer_dtype(dt) and not miss.any():
                # the integers themselves: beyond 2^53 doubles would merge them
                u = pd.api.types.is_unsigned_integer_dtype(dt) and s.to_numpy().max(initial=0) > np.iinfo(np.int64).max
                v = s.to_numpy(dtype=np.uint64 if u else np.int64)
                cols.append((key, "uint64" if u else "int64", np.ascontiguousarray(v)))
                continue
            v = s.to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isinf(v).any():
                raise ValueError(f"Input X contains infinity (column {key!r})")
            cols.append((key, "float64", np.ascontiguousarray(v)))
        else:  # object, string, category, bool with missing values, datetime: text
            cols.append((key, "text", _text(s.astype(object).tolist(), miss)))
    return cols


def _array_columns(X, min_samples):
    X = check_array(X, dtype=None, ensure_all_finite="allow-nan", ensure_min_samples=min_samples)
    cols = []
    if X.dtype.kind in "iu":  # integers, exactly (beyond 2^53 doubles would merge them)
        u = X.dtype.kind == "u" and X.size > 0 and X.max() > np.iinfo(np.int64).max
        Xi = np.asarray(X, dtype=np.uint64 if u else np.int64)
        return [(f"x{j}", "uint64" if u else "int64", np.ascontiguousarray(Xi[:, j])) for j in range(X.shape[1])]
    if X.dtype.kind in "bf":
        kind = "int64" if X.dtype.kind == "b" else "float64"
        Xf = np.asarray(X, dtype=np.float64)
        for j in range(X.shape[1]):
            cols.append((f"x{j}", kind, np.ascontiguousarray(Xf[:, j])))
        return cols
    if X.dtype.kind != "O":
        raise ValueError(f"X of dtype {X.dtype}: numbers, or an object array of numbers and strings")
    for j in range(X.shape[1]):
        c = X[:, j]
        try:
            v = c.astype(np.float64)
        except ValueError:  # strings: a text column (None / NaN missing)
            miss = [v is None or (isinstance(v, float) and np.isnan(v)) for v in c]
            cols.append((f"x{j}", "text", _text(c.tolist(), miss)))
            continue
        if np.isinf(v).any():
            raise ValueError("Input X contains infinity")
        cols.append((f"x{j}", "float64", np.ascontiguousarray(v)))
    return cols


def _mirror_spec(mirror_signs):
    """None, a report.json-like file, or a dict {"columns_kept", "mirror_signs"[, "regression_mirror"]}"""
    if mirror_signs is None:
        return None
    if isinstance(mirror_signs, (str, os.PathLike)):
        return _nofall.read_mirror_signs(os.fspath(mirror_signs))
    d = dict(mirror_signs)
    names = [c["name"] if isinstance(c, dict) else str(c) for c in d["columns_kept"]]
    signs = [[int(s) for s in row] for row in d["mirror_signs"]]
    rm = d.get("regression_mirror")
    rm = [bool(b) for b in rm] if rm else None
    return (names, signs, rm)


class _MitraBase(BaseEstimator):
    _task = None

    def __init__(self, model_dir=None, device="cpu", n_estimators=1, random_state=0, mirror=True, mirror_signs=None,
                 fine_tune=True, fine_tune_steps=50, lr=1e-4, weight_decay=0.1, warmup_steps=1000, patience=40,
                 keep_last=False, column_types=None):
        self.model_dir = model_dir
        self.device = device
        self.n_estimators = n_estimators
        self.random_state = random_state
        self.mirror = mirror
        self.mirror_signs = mirror_signs
        self.fine_tune = fine_tune
        self.fine_tune_steps = fine_tune_steps
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup_steps = warmup_steps
        self.patience = patience
        self.keep_last = keep_last
        self.column_types = column_types

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags

    # -- tables ----------------------------------------------------------------------
    def _columns(self, X, reset):
        if _is_frame(X):
            _check_feature_names(self, X, reset=reset)
            _check_n_features(self, X, reset=reset)
            n = len(X)
            if n < (2 if reset else 1):
                raise ValueError(f"Found array with {n} sample(s) (shape={X.shape}) while a minimum of "
                                 f"{2 if reset else 1} is required.")
            return _with_types(_frame_columns(X), self.column_types), n
        X = check_array(X, dtype=None, ensure_all_finite="allow-nan", ensure_min_samples=2 if reset else 1)
        _check_feature_names(self, X, reset=reset)
        _check_n_features(self, X, reset=reset)
        return _with_types(_array_columns(X, 2 if reset else 1), self.column_types), X.shape[0]

    def _seed(self):
        rs = self.random_state
        if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool):
            if rs < 0:
                raise ValueError(f"random_state must be >= 0, not {rs}")
            return int(rs)
        return int(check_random_state(rs).randint(0, 2**31 - 1))

    def _fit(self, X, y_column, y_kind, X_val=None, y_val_column=None):
        n_est = self.n_estimators
        if not isinstance(n_est, (int, np.integer)) or isinstance(n_est, bool) or n_est < 1:
            raise ValueError(f"n_estimators must be an int >= 1, not {n_est!r}")
        if (X_val is None) != (y_val_column is None):
            raise ValueError("X_val and y_val go together")
        if X_val is not None and not self.fine_tune:
            raise ValueError("X_val / y_val are the fine-tuning's validation data: they need fine_tune=True")
        model = _load_model(self.model_dir, self.device, estimator=type(self).__name__)
        _check_model_type(model, self.model_dir, "mitra", self._task == _TASK_CLASSIFICATION, type(self).__name__)
        cols, n = self._columns(X, reset=True)
        if n == 0 or not cols:
            raise ValueError("0 feature(s) (shape=(%d, 0)) while a minimum of 1 is required." % n)
        check_consistent_length(cols[0][2], y_column)
        names = {c[0] for c in cols}
        target = "y"
        while target in names:
            target = "_" + target
        spec = _mirror_spec(self.mirror_signs)
        seed = self._seed()
        # the support set and the fitted preprocessing (the C predictor keeps its own copy)
        self._state_ = {
            "columns": cols + [(target, y_kind, np.ascontiguousarray(y_column, dtype=np.float64))],
            "n": n, "target": target, "task": self._task, "n_estimators": int(n_est), "seed": seed,
            "mirror": bool(self.mirror), "spec": spec,
        }
        self._cache_ = {}
        pred = self._predictor()
        self.fine_tune_result_ = None
        if self.fine_tune:
            self._finetune(pred, model, target, X_val, y_val_column, y_kind, seed)
        self.report_ = pred.report()
        self.columns_kept_ = [c["name"] for c in self.report_["columns_kept"]]
        self.columns_dropped_ = {c["name"]: c["reason"] for c in self.report_["columns_dropped"]}
        self.mirror_signs_ = self.report_["mirror_signs"]
        self.regression_mirror_ = self.report_["regression_mirror"]
        self.seed_ = seed
        if self._task == _TASK_CLASSIFICATION:
            k = model.n_classes
            if k == 0:
                raise ValueError(f"model_dir {self.model_dir}: a Mitra regressor, not a classifier")
            if k < len(self.classes_):
                raise ValueError(f"{len(self.classes_)} classes; the model at {self.model_dir} has {k} outputs")
        elif model.n_classes:
            raise ValueError(f"model_dir {self.model_dir}: a Mitra classifier, not a regressor")
        return self

    def _finetune(self, pred, model, target, X_val, y_val_column, y_kind, seed):
        """AutoGluon's fit with fine_tune=True: a private copy of the model, trained in place
        (nf_predictor_finetune); the predictions then use it"""
        _check_model_type(model, self.model_dir, "mitra", self._task == _TASK_CLASSIFICATION, type(self).__name__)
        own = Model(os.path.realpath(os.fspath(self.model_dir)), self.device)
        vcols, vn = None, 0
        if X_val is not None:
            vcols, vn = self._columns(X_val, reset=False)
            check_consistent_length(vcols[0][2], y_val_column)
            vcols = vcols + [(target, y_kind, np.ascontiguousarray(y_val_column, dtype=np.float64))]
        with own._lock:
            self.fine_tune_result_ = pred.finetune(
                own._m, vcols, vn, int(self.fine_tune_steps), float(self.lr), float(self.weight_decay),
                int(self.warmup_steps), int(self.patience), seed, bool(self.keep_last))
        self._cache_["model"] = own

    def _predictor(self):
        cache = self._cache_
        p = cache.get("predictor")
        if p is None:
            s = self._state_
            p = cache["predictor"] = _nofall.Predictor(
                s["columns"], s["n"], s["target"], task=s["task"], n_estimators=s["n_estimators"], seed=s["seed"],
                mirror=s["mirror"], mirror_signs=s["spec"], name="the training data")
        return p

    def __getstate__(self):
        if getattr(self, "fine_tune_result_", None) is not None:
            raise TypeError(f"a fine-tuned {type(self).__name__} cannot be pickled: its weights live in its loaded "
                            "model (nofall finetune writes a fine-tuned checkpoint to load instead)")
        d = self.__dict__.copy()
        if "_cache_" in d:
            d["_cache_"] = {}
        return d

    def _run(self, X, logits=False):
        check_is_fitted(self, "_state_")
        cols, n = self._columns(X, reset=False)
        pred = self._predictor()
        model = self._cache_.get("model") or _load_model(self.model_dir, self.device,
                                                         estimator=type(self).__name__)
        k = self.report_["n_outputs"]
        out = np.empty((n, k) if self._task == _TASK_CLASSIFICATION else (n,), dtype=np.float64)
        lg = np.empty((self.report_["n_estimators"], n, k), dtype=np.float32) if logits else None
        with model._lock:
            pred.predict(model._m, cols, n, out, lg)
        return lg if logits else out

    def predict_logits(self, X):
        """each ensemble member's raw model outputs, float32 (n_estimators, n_samples, n_outputs)"""
        return self._run(X, logits=True)


class MitraClassifier(ClassifierMixin, _MitraBase):
    """Mitra classification on tables, as AutoGluon's MitraModel feeds it.

    Parameters: model_dir (a Mitra classifier checkpoint directory), device
    ("cpu", "opencl[:N]", "cuda[:N]"), n_estimators (ensemble members, each
    with its own mirror draw), random_state (the mirror draws; an int is
    nofall predict's --seed), mirror (False: no mirroring), mirror_signs
    (None, a report.json-like file or dict: the signs given explicitly).
    At most 10 classes (Mitra's limit). fine_tune (AutoGluon's default True:
    fit fine-tunes a private copy of the model as AutoGluon's fit does, on
    fit's X_val / y_val or upstream's internal split; with n_estimators > 1
    the members one after another, as AutoGluon's ensemble),
    fine_tune_steps, lr, weight_decay, warmup_steps, patience (AutoGluon's
    names and defaults), keep_last (upstream's CPU behaviour: the last step's
    weights); fine_tune_result_ (steps_run, best_step, stopped_at,
    best_val_loss) after a fine-tuning fit. column_types ({column: "category"
    | "numeric" | "text" | "datetime"}: nofall predict's --column-type, as
    AutoGluon's feature types; a pandas category column is "category").
    score(X, y): scikit-learn's accuracy (the classifier) or R2 (the regressor).

    Fitted: classes_, n_features_in_, feature_names_in_ (DataFrames with
    string column names), columns_kept_, columns_dropped_, mirror_signs_,
    report_ (everything the fit decided).
    """

    _task = _TASK_CLASSIFICATION

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # the tests run synthetic weights: predictions are not meant to be good
        tags.classifier_tags.poor_score = True
        tags.classifier_tags.multi_label = False
        return tags

    def fit(self, X, y, X_val=None, y_val=None):
        """fit (and, with fine_tune=True, fine-tune as AutoGluon's MitraClassifier.fit: on X_val / y_val,
        or upstream's internal split of X)"""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        y = column_or_1d(y, warn=True)
        if y.dtype.kind in "fc":
            y = column_or_1d(check_array(y, ensure_2d=False, dtype=None, input_name="y"))
        elif y.dtype.kind == "O":
            if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in y):
                raise ValueError("Input y contains NaN.")
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        vcodes = None
        if y_val is not None:
            y_val = column_or_1d(y_val, warn=True)
            vcodes = np.searchsorted(self.classes_, y_val)
            bad = (vcodes >= len(self.classes_)) | (self.classes_[np.minimum(vcodes, len(self.classes_) - 1)] != y_val)
            if bad.any():
                raise ValueError(f"y_val[{int(np.argmax(bad))}] = {y_val[int(np.argmax(bad))]!r} is not a class of y")
            vcodes = vcodes.astype(np.float64)
        return self._fit(X, codes.astype(np.float64), "int64", X_val, vcodes)

    def predict_proba(self, X):
        """the averaged probabilities, (n_samples, n_classes), columns in classes_ order"""
        return self._run(X)

    def predict(self, X):
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


class MitraRegressor(RegressorMixin, _MitraBase):
    """Mitra regression on tables, as AutoGluon's MitraModel feeds it.

    Parameters as MitraClassifier's; model_dir is a Mitra regressor checkpoint
    (one output). The target is min-max scaled to [0, 1] (and mirrored per
    member when mirror is on); predictions are de-normalised and averaged.
    """

    _task = _TASK_REGRESSION

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        return tags

    def fit(self, X, y, X_val=None, y_val=None):
        """fit (and, with fine_tune=True, fine-tune as AutoGluon's MitraRegressor.fit)"""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        y = column_or_1d(check_array(y, ensure_2d=False, dtype="numeric", input_name="y"), warn=True)
        yv = None
        if y_val is not None:
            yv = column_or_1d(check_array(y_val, ensure_2d=False, dtype="numeric", input_name="y_val")).astype(np.float64)
        return self._fit(X, y.astype(np.float64), "float64", X_val, yv)

    def predict(self, X):
        return self._run(X)
