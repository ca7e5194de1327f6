"""The README's Python example as a user runs it, the message for an estimator without weights, and
__version__ against `nofall --version` (issue #29)."""
import os
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

import nofall
from conftest import ROOT


def test_readme_python_example(tmp_path, monkeypatch, capsys):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- readme-test: python -->\n```python\n(.*?)```", text, re.S)
    assert blocks, "the README has no tested python block"
    for f in set(re.findall(r"\b(tests/fixtures/[A-Za-z0-9_./-]+)", "\n".join(blocks))):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, tmp_path / f)
    monkeypatch.chdir(tmp_path)
    for b in blocks:
        exec(compile(b, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "(30, 3)" in out  # 30 iris test rows, 3 classes


@pytest.mark.parametrize("est,repo", [(nofall.MitraClassifier, "autogluon/mitra-classifier"),
                                      (nofall.MitraRegressor, "autogluon/mitra-regressor"),
                                      (nofall.TabSTARClassifier, "alana89/TabSTAR")])
def test_no_model_dir_says_where_the_weights_are(est, repo):
    X = pd.DataFrame({"a": np.arange(20.0), "b": np.arange(20.0) % 3})
    y = np.arange(20) % 2 if est is not nofall.MitraRegressor else np.arange(20.0)
    with pytest.raises(ValueError) as e:
        est().fit(X, y)
    msg = str(e.value)
    assert "model_dir=None" in msg and repo in msg and "nofall verify" in msg and "gen_weights" in msg, msg


def test_version_is_the_cli_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+(\+g[0-9a-f]{12}(\.dirty)?)?", nofall.__version__), nofall.__version__
    b = os.environ.get("NOFALL_BIN") or str(ROOT / "build" / "nofall")
    if not os.access(b, os.X_OK):
        pytest.skip(f"no nofall binary at {b}")
    first = subprocess.run([b, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    assert first == f"nofall {nofall.__version__}"  # one tree builds both (a stale build/ fails here)
