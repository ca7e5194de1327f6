#!/usr/bin/env python3
"""Fixture for fine-tuned Mitra ensembles (issue #28; spec shared/specs/finetune.md §1.8).

Runs upstream's own `MitraClassifier(n_estimators=2, fine_tune=True).fit(X, y, X_val, y_val)` and
`predict_proba(X_test)` (autogluon.tabular 1.6.3, fp32, autocast off, SDPA's math kernel) on a tiny
`nofall gen-weights` checkpoint; contains no copy of upstream code. It wraps two upstream functions only to
record, without changing any value:

  * `MitraBase._create_config`: hyperparams["precision"] = "float32" (as finetune_fixtures.py does);
  * `Preprocessor.fit`: each member's fitted Preprocessor (its mirror, drawn from numpy's global RNG,
    seeded right before `fit`), from which each member's arrays are the Preprocessor's own `transform_X`.

What nofall must reproduce (tests/test-finetune-parity.c, the "ensemble" part): member 0 fine-tuned from
RandomState(seed), member 1 from the pretrained weights on the same RandomState continued, each on its own
arrays; then the prediction continuing that stream, member 0's support order first; the probabilities
sliced to K classes, softmaxed, averaged. Upstream's CPU fine-tune ends each member with its last step's
weights (finetune.md §1.6), so nofall runs with keep_last.

  .venv-ref/bin/python reference/finetune_ensemble.py [--nofall build/nofall] [--out tests/fixtures/finetune/ensemble]

Writes OUT/{inputs,expected}.safetensors and OUT/case.json (format: reference/README.md,
"finetune_ensemble.py").
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from finetune_cases import DEFAULT_NOFALL, REPO, SEED, W_CLS, gen_weights, make_data, st_write, torch_fp32, versions  # noqa: E402

CASE = dict(task="classification", labels="cls", data_seed=101, n_train=200, n_val=60, n_test=40, steps=3,
            n_estimators=2, hyper=dict(lr=1e-2, warmup_steps=1), global_seed=3)
DEFAULT_OUT = REPO / "tests" / "fixtures" / "finetune" / "ensemble"


def run(model_dir: Path, wsha: str, out: Path):
    torch = torch_fp32()
    warnings.filterwarnings("ignore", message="In CPU autocast, but the target dtype is not supported")
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from autogluon.tabular.models.mitra import sklearn_interface as si
    from autogluon.tabular.models.mitra._internal.data import preprocessor as pp

    c = CASE
    d = make_data(c)
    raw = {k: v.copy() for k, v in d.items()}
    preps, cfgs = [], []
    o_cfg, o_fit = si.MitraBase._create_config, pp.Preprocessor.fit

    def create_config(self, *a, **k):
        cfg, model_cls = o_cfg(self, *a, **k)
        cfg.hyperparams["precision"] = "float32"
        cfgs.append(cfg)
        return cfg, model_cls

    def pfit(self, X, y):
        r = o_fit(self, X, y)
        preps.append(self)
        return r

    si.MitraBase._create_config, pp.Preprocessor.fit = create_config, pfit
    try:
        est = si.MitraClassifier(device="cpu", hf_model=str(model_dir), fine_tune_steps=c["steps"], seed=SEED,
                                 n_estimators=c["n_estimators"], verbose=False, **c["hyper"])
        torch.manual_seed(0)
        with sdpa_kernel([SDPBackend.MATH]):
            np.random.seed(c["global_seed"])
            est.fit(d["x_train"].copy(), d["y_train"].copy(), d["x_val"].copy(), d["y_val"].copy(), time_limit=None)
            proba = est.predict_proba(raw["x_test"].copy())
    finally:
        si.MitraBase._create_config, pp.Preprocessor.fit = o_cfg, o_fit
    E = c["n_estimators"]
    assert len(preps) == E, f"{len(preps)} Preprocessor fits for {E} members"
    assert all(cf.hyperparams["precision"] == "float32" for cf in cfgs)
    inputs = {"y_train": preps[0].transform_y(raw["y_train"].copy()).astype(np.int64),
              "y_val": raw["y_val"].astype(np.int64)}
    mirrors = []
    for e, P in enumerate(preps):
        for part in ("train", "val", "test"):
            x = P.transform_X(raw["x_" + part].copy())
            assert x.dtype == np.float32, (part, x.dtype)
            inputs[f"x_{part}.{e}"] = x
        mirrors.append(np.asarray(P.mirror).reshape(-1).astype(int).tolist())
    assert mirrors[0] != mirrors[1], "the members drew the same mirror: pick another global_seed"
    out.mkdir(parents=True, exist_ok=True)
    st_write(out / "inputs.safetensors", inputs)
    st_write(out / "expected.safetensors", {"pred_proba": np.asarray(proba, dtype=np.float32)})
    assert c["n_test"] <= 1024, "one prediction chunk per member"
    case = {"task": c["task"], "n_train": c["n_train"], "n_val": c["n_val"], "n_test": c["n_test"],
            "steps": c["steps"], "n_estimators": E, "lr": c["hyper"]["lr"], "warmup_steps": c["hyper"]["warmup_steps"],
            "seed": SEED, "global_seed": c["global_seed"], "data_seed": c["data_seed"],
            "n_kept": int(inputs["x_train.0"].shape[1]), "K": int(proba.shape[1]),
            "weights": {"args": W_CLS, "sha256": wsha}, "mirrors": mirrors, "versions": versions()}
    (out / "case.json").write_text(json.dumps(case, indent=1) + "\n")
    return case


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nofall", default=str(DEFAULT_NOFALL))
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nofall-fte-"))
    try:
        md = tmp / "w"
        wsha = gen_weights(Path(a.nofall).resolve(), md, W_CLS)
        out = Path(a.out)
        if out.exists():
            shutil.rmtree(out)
        case = run(md, wsha, out)
        print(f"ensemble: mirrors {case['mirrors']}, {sum(p.stat().st_size for p in out.iterdir())} bytes")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
