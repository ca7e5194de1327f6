"""Shared fixtures: synthetic Mitra checkpoints made by the library itself
(nofall.gen_weights = `nofall gen-weights mitra`, no downloads), and the
committed AutoGluon parity cases (tests/fixtures/predict)."""
import os
import pathlib
import tempfile

import pytest

import nofall

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(os.environ.get("NOFALL_PREDICT_FIXTURES", ROOT / "tests" / "fixtures" / "predict"))
_DIR = pathlib.Path(tempfile.mkdtemp(prefix="nofall-pytest-"))
_MADE = {}


def model_dir(name):
    """full: the official configuration, seed 0 (what tests/predict.sh generates); small: 64 wide, 2 layers"""
    if name not in _MADE:
        opts = {
            "cls": {},
            "reg": {"task": "regression", "outputs": 1},
            "small_cls": {"dim": 64, "layers": 2, "heads": 4},
            "small_reg": {"dim": 64, "layers": 2, "heads": 4, "task": "regression", "outputs": 1},
        }[name]
        d = _DIR / name
        nofall.gen_weights("mitra", str(d), 0, opts)
        _MADE[name] = str(d)
    return _MADE[name]


def case_model(c):
    """the checkpoint of a parity case (case.json "weights": the task, and gen-weights flags such as
    ["--dim", "16", "--layers", "1"] for the cases made on a small model)"""
    cls = c["weights"]["task"] == "classification"
    args = c["weights"].get("args") or []
    if not args:
        return model_dir("cls" if cls else "reg")
    key = ("cls " if cls else "reg ") + " ".join(args)
    if key not in _MADE:
        opts = {} if cls else {"task": "regression", "outputs": 1}
        for k, v in zip(args[::2], args[1::2]):
            opts[k.lstrip("-").replace("-", "_")] = int(v) if v.lstrip("-").isdigit() else v
        d = _DIR / ("case%d" % len(_MADE))
        nofall.gen_weights("mitra", str(d), 0, opts)
        _MADE[key] = str(d)
    return _MADE[key]


@pytest.fixture(scope="session")
def cls_model():
    return model_dir("cls")


@pytest.fixture(scope="session")
def reg_model():
    return model_dir("reg")


@pytest.fixture(scope="session")
def small_cls():
    return model_dir("small_cls")


@pytest.fixture(scope="session")
def small_reg():
    return model_dir("small_reg")
