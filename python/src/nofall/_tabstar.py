"""scikit-learn estimators on libnofall's TabSTAR predictor.

``fit`` is upstream's fit (fine_tune=True, the default; docs/finetune-tabstar.md):
the validation split, the verbalizer fitted on the train part, LoRA
fine-tuning with early stopping, the adapter merged into a private copy of
the model (nf_predictor_tabstar_fit, as ``nofall predict --fine-tune``).
With fine_tune=False it fits TabSTAR's verbalizer on the whole training
table and keeps the weights as they are (``nofall predict`` on a TabSTAR
model directory: README "TabSTAR"): column names normalized, each column
numerical (binned, z-scored) or text, the target's classes or scaler.
``predict_proba`` / ``predict`` verbalize the rows into cells and run one
forward.

Inputs as the Mitra estimators take them: pandas DataFrames (a column keeps
its pandas dtype, which decides numerical or text as upstream's
``is_numerical_feature`` does) or array-likes (columns named x0, x1, ...).
The target's values and name take part in the model's input ("Target
Feature: NAME / Feature Value: CLASS"): ``y`` keeps its dtype, and a pandas
Series its name (otherwise ``target_name``).
"""
import os

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, check_is_fitted, column_or_1d

from . import _nofall
from ._estimators import _MitraBase, _check_model_type, _frame_columns, _load_model
from ._model import Model

_TASK_CLASSIFICATION, _TASK_REGRESSION = 1, 2


def _target_column(y, name):
    """y as one table column with its own dtype (int64, float64, bool or text)"""
    if hasattr(y, "to_frame") and hasattr(y, "dtype"):
        return _frame_columns(y.to_frame(name))[0]
    y = np.asarray(y)
    if y.dtype.kind in "iu":
        return (name, "int64", np.ascontiguousarray(y, dtype=np.int64))
    if y.dtype.kind == "f":
        return (name, "float64", np.ascontiguousarray(y, dtype=np.float64))
    if y.dtype.kind == "b":
        return (name, "bool", [bool(v) for v in y])
    return (name, "text", [None if v is None else str(v) for v in y.tolist()])


class _TabSTARBase(BaseEstimator):
    _task = None
    _columns = _MitraBase._columns
    __getstate__ = _MitraBase.__getstate__

    def __init__(self, model_dir=None, device="cpu", adapter=None, target_name="target", column_types=None,
                 fine_tune=True, max_epochs=50, patience=5, seed=0, dropout=0.0, no_average=False):
        self.model_dir = model_dir
        self.device = device
        self.adapter = adapter
        self.target_name = target_name
        self.column_types = column_types
        self.fine_tune = fine_tune
        self.max_epochs = max_epochs
        self.patience = patience
        self.seed = seed
        self.dropout = dropout
        self.no_average = no_average

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags

    def _model(self):
        adapter = None if self.adapter is None else os.path.realpath(os.fspath(self.adapter))
        return _load_model(self.model_dir, self.device, adapter, estimator=type(self).__name__)

    def _fit(self, X, y, X_val=None, y_val=None):
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val go together")
        if X_val is not None and not self.fine_tune:
            raise ValueError("X_val / y_val are the fine-tuning's validation data: they need fine_tune=True")
        classifier = self._task == _TASK_CLASSIFICATION
        model = self._model()
        _check_model_type(model, self.model_dir, "tabstar", classifier, type(self).__name__)
        cols, n = self._columns(X, reset=True)
        if n == 0 or not cols:
            raise ValueError("0 feature(s) (shape=(%d, 0)) while a minimum of 1 is required." % n)
        check_consistent_length(cols[0][2], y)
        name = getattr(y, "name", None)
        target = name if isinstance(name, str) and name else str(self.target_name)
        names = {c[0] for c in cols}
        while target in names:
            target = "_" + target
        self._state_ = {"columns": cols + [_target_column(y, target)], "n": n, "target": target}
        self._cache_ = {}
        pred = self._predictor()
        pred.check_model(model._m, f"model_dir {self.model_dir}")
        self.fine_tune_result_ = None
        self.fine_tuned_verbalizer_ = False
        if self.fine_tune:
            val = None
            if X_val is not None:
                vcols, vn = self._columns(X_val, reset=False)
                check_consistent_length(vcols[0][2], y_val)
                val = (vcols + [_target_column(y_val, target)], vn)
            self._fine_tune(pred, val)
        else:
            # a directory nofall's fit wrote: the verbalizer it was fine-tuned with (its verbalizer.json)
            self.fine_tuned_verbalizer_ = pred.tabstar_use_fit(os.path.realpath(os.fspath(self.model_dir)),
                                                               self._state_["columns"], n)
            if self.adapter is not None and not getattr(model, "_adapter_merged", False):
                with model._lock:
                    pred.merge_adapter(model._m, str(self.adapter))
                model._adapter_merged = True
        self.report_ = pred.report()
        self.target_name_ = target
        self.columns_kept_ = [c["name"] for c in self.report_["columns_kept"]]
        self.columns_dropped_ = {c["name"]: c["reason"] for c in self.report_["columns_dropped"]}
        return self

    def _fine_tune(self, pred, val=None):
        """upstream's fit: a private copy of the model (the adapter, if any, merged first), fine-tuned in place
        (nf_predictor_tabstar_fit) on val (columns, n: upstream's x_val / y_val) or upstream's split; the
        predictor then predicts with the train part's verbalizer"""
        d = os.path.realpath(os.fspath(self.model_dir))
        own = Model(d, self.device)
        s = self._state_
        with own._lock:
            if self.adapter is not None:
                pred.merge_adapter(own._m, os.path.realpath(os.fspath(self.adapter)))
            extra = () if val is None else val
            self.fine_tune_result_ = pred.tabstar_fit(own._m, d, s["columns"], s["n"], int(self.max_epochs),
                                                      int(self.patience), int(self.seed), bool(self.no_average),
                                                      *(extra or (None, 0)), float(self.dropout))
        self._cache_["model"] = own

    def _predictor(self):
        p = self._cache_.get("predictor")
        if p is None:
            s = self._state_
            p = self._cache_["predictor"] = _nofall.Predictor(s["columns"], s["n"], s["target"], task=self._task,
                                                              name="the training data", model_type="tabstar")
        return p

    def _run(self, X, logits=False):
        check_is_fitted(self, "_state_")
        cols, n = self._columns(X, reset=False)
        pred = self._predictor()
        model = self._cache_.get("model") or self._model()
        k = self.report_["n_outputs"]
        out = np.empty((n, k) if self._task == _TASK_CLASSIFICATION else (n,), dtype=np.float64)
        lg = np.empty((1, n, k), dtype=np.float32)
        with model._lock:
            pred.predict(model._m, cols, n, out, lg)
        return lg[0] if logits else out

    def predict_logits(self, X):
        """the model's raw outputs, float32 (n_samples, n_outputs): one per target token (classes) or one"""
        return self._run(X, logits=True)


class TabSTARClassifier(ClassifierMixin, _TabSTARBase):
    """TabSTAR classification on tables, as upstream's TabSTARClassifier:
    fit fine-tunes the model on the training table (upstream's fit,
    docs/finetune-tabstar.md), then one forward per prediction.

    Parameters: model_dir (a TabSTAR checkpoint directory: config.json,
    model.safetensors, the tokenizer's vocab), device ("cpu", "opencl[:N]",
    "cuda[:N]"), adapter (None, or a PEFT LoRA adapter directory merged into
    the loaded model once; with fine_tune, into the copy fine-tuned),
    target_name (the target's name in the cells when y has none, e.g. a
    numpy array), column_types ({column: "category" | "numeric" | "text"}:
    nofall predict's --column-type; a pandas category column is "category";
    "datetime" is refused: no date encoder), fine_tune (True: upstream's fit, on a private copy of the
    model; False: the weights as they are, the verbalizer fitted on the whole
    training table), max_epochs (50), patience (5), seed (0: the batch
    orders and the initial LoRA A), no_average (False: the averaged adapter;
    True: the best epoch's, upstream's is_paper_version), as `nofall finetune`
    / `nofall predict` take them (--no-average). fit(X, y, X_val=None, y_val=None): X_val / y_val
    are upstream's x_val / y_val (`--val`): the fit validates on them instead
    of split_to_val's part of X, and fits the verbalizer on the whole X. With
    fine_tune=False on a directory `nofall finetune` wrote, the verbalizer is
    the one the model was fine-tuned with (its verbalizer.json; X must be the
    table it was fine-tuned on). dropout (0.0: off;
    p: nofall's own dropout while fitting, its masks from seed, not
    upstream-reproducible).

    Fitted: classes_ (the sorted labels; predict_proba's columns),
    n_features_in_, feature_names_in_, columns_kept_, columns_dropped_,
    target_name_, report_ (what the fit decided), fine_tune_result_ (epochs,
    best_epoch, epochs_averaged, val_loss, metric, stopped_at, n_train, n_val,
    validation; None without fine_tune), fine_tuned_verbalizer_ (True: the
    model directory's verbalizer.json was taken).
    """

    _task = _TASK_CLASSIFICATION

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        tags.classifier_tags.multi_label = False
        return tags

    def fit(self, X, y, X_val=None, y_val=None):
        """fit (upstream's fit with fine_tune=True: on X_val / y_val as upstream's x_val / y_val, or its
        split_to_val of X)"""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        yv = column_or_1d(y, warn=True)
        check_classification_targets(yv)
        if y_val is not None and not hasattr(y_val, "to_frame"):
            y_val = column_or_1d(y_val, warn=True)
        self._fit(X, y if hasattr(y, "to_frame") else yv, X_val, y_val)
        lib = self.report_["classes"]
        self.classes_ = np.unique(yv)
        if len(self.classes_) != len(lib):
            raise ValueError(f"{len(self.classes_)} classes in y; the verbalizer found {len(lib)}")
        # the library's columns in classes_ order (both sorted as LabelEncoder sorts; matched by str())
        strs = [str(c) for c in self.classes_]
        self._order_ = [lib.index(s) for s in strs] if sorted(strs) == sorted(lib) else list(range(len(lib)))
        return self

    def predict_proba(self, X):
        """the softmax over the target tokens, (n_samples, n_classes), columns in classes_ order"""
        return self._run(X)[:, self._order_]

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


class TabSTARRegressor(RegressorMixin, _TabSTARBase):
    """TabSTAR regression on tables, as upstream's TabSTARRegressor: the
    target z-scored with a StandardScaler fitted on the training table (the
    train part's, with fine_tune), the model's output scaled back (float32
    values).

    Parameters and fitted attributes as TabSTARClassifier's (no classes_).
    """

    _task = _TASK_REGRESSION

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        return tags

    def fit(self, X, y, X_val=None, y_val=None):
        """fit (upstream's fit with fine_tune=True: on X_val / y_val as upstream's x_val / y_val, or its
        split_to_val of X)"""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        yv = column_or_1d(check_array(y, ensure_2d=False, dtype="numeric", input_name="y"), warn=True)
        name = getattr(y, "name", None)
        if hasattr(y, "to_frame"):
            import pandas as pd

            yv = pd.Series(np.asarray(yv, dtype=np.float64), name=name)
        if y_val is not None:
            y_val = column_or_1d(check_array(y_val, ensure_2d=False, dtype="numeric", input_name="y_val"))
            y_val = np.asarray(y_val, dtype=np.float64)
        return self._fit(X, yv, X_val, y_val)

    def predict(self, X):
        return self._run(X)
