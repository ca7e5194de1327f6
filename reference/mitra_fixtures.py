#!/usr/bin/env python3
"""PyTorch reference fixtures for the Mitra (Tab2D) forward pass.

This script IMPORTS the upstream model (autogluon.tabular's Mitra package) and
runs it in plain fp32 on the CPU; it contains no copy of the upstream code.

Modes
-----
expected  --model DIR --case DIR
    DIR (model) holds config.json + model.safetensors in the Hugging Face layout
    of autogluon/mitra-classifier.  The case dir holds support_x.npy (float32
    (n_s,F)), support_y.npy (int64 for classification / float32 for
    regression) and query_x.npy (float32 (n_q,F)).  Builds the upstream Tab2D,
    loads the weights with a strict load_state_dict, runs one batch-1,
    unpadded forward in fp32 (no autocast, SDPA math backend, flash-attn off)
    and writes expected_logits.npy: float32 (n_q, dim_output) for a classifier,
    (n_q,) for a dim_output=1 regressor.  Versions are merged into case.json.
    With --dump-z it also writes the upstream quantile-embedding outputs
    expected_z_support.npy / expected_z_query.npy (float32 (n,F)).

make  [--nofall build/nofall] [--fixtures tests/fixtures/mitra] [--only a,b]
    Regenerates all committed fixtures: creates the weights with
    `nofall gen-weights mitra ...` (weights are not committed), writes the
    inputs (.npy), case.json and runs `expected` on each case.

selftest  [--keep DIR]
    Writes a small random checkpoint with Python (Appendix A key names and
    shapes), runs `expected` on random inputs and checks the result against a
    second, independent call of the upstream module.  Needs no nofall binary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURES = REPO / "tests" / "fixtures" / "mitra"
DEFAULT_NOFALL = REPO / "build" / "nofall"


# --------------------------------------------------------------------------
# Reference forward (upstream Tab2D, fp32)
# --------------------------------------------------------------------------

def _torch_fp32_setup():
    """Import torch and switch off every reduced-precision shortcut."""
    import torch

    torch.set_default_dtype(torch.float32)
    torch.set_float32_matmul_precision("highest")
    # Older and newer spellings of the TF32 / reduced-precision switches; all
    # are no-ops on a CPU-only run but make the intent explicit.
    for obj, attr, val in [
        (getattr(torch.backends, "cuda", None) and torch.backends.cuda.matmul, "allow_tf32", False),
        (getattr(torch.backends, "cuda", None) and torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", False),
        (getattr(torch.backends, "cuda", None) and torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", False),
        (getattr(torch.backends, "cudnn", None), "allow_tf32", False),
    ]:
        if obj is not None and hasattr(obj, attr):
            try:
                setattr(obj, attr, val)
            except Exception:
                pass
    # torch >= 2.9 fp32_precision API ("ieee" = no TF32/bf16 internal math).
    for obj in [getattr(torch.backends, "mkldnn", None),
                getattr(getattr(torch.backends, "mkldnn", None), "matmul", None),
                getattr(getattr(torch.backends, "mkldnn", None), "conv", None),
                getattr(getattr(torch.backends, "cuda", None), "matmul", None),
                getattr(torch.backends, "cudnn", None)]:
        if obj is not None and hasattr(obj, "fp32_precision"):
            try:
                obj.fp32_precision = "ieee"
            except Exception:
                pass
    return torch


def versions() -> dict:
    import torch
    import numpy
    try:
        import autogluon.tabular as agt
        ag_version = agt.__version__
    except Exception:  # pragma: no cover
        from importlib.metadata import version
        ag_version = version("autogluon.tabular")
    return {"torch_version": torch.__version__, "autogluon_version": ag_version,
            "numpy_version": numpy.__version__}


def load_model(model_dir: Path):
    torch = _torch_fp32_setup()
    from safetensors.torch import load_file
    from autogluon.tabular.models.mitra._internal.models import tab2d as upstream

    cfg = json.loads((model_dir / "config.json").read_text())
    model = upstream.Tab2D(
        dim=cfg["dim"],
        dim_output=cfg["dim_output"],
        n_layers=cfg["n_layers"],
        n_heads=cfg["n_heads"],
        task=cfg["task"],
        use_pretrained_weights=False,
        path_to_weights="",
        device="cpu",
    )
    if model.use_flash_attn:
        raise RuntimeError("upstream Tab2D selected the flash-attn path; the reference must use SDPA")
    state = load_file(str(model_dir / "model.safetensors"), device="cpu")
    bad = {k: v.dtype for k, v in state.items() if v.dtype != torch.float32}
    if bad:
        raise RuntimeError(f"non-F32 tensors in checkpoint: {bad}")
    model.load_state_dict(state, strict=True)
    model = model.float().eval()
    return model, cfg


def _forward(model, cfg, sx: np.ndarray, sy: np.ndarray, qx: np.ndarray, want_z: bool = False):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from autogluon.tabular.models.mitra._internal.config.enums import Task

    classification = model.task == Task.CLASSIFICATION
    x_s = torch.from_numpy(np.ascontiguousarray(sx, dtype=np.float32))[None].clone()
    x_q = torch.from_numpy(np.ascontiguousarray(qx, dtype=np.float32))[None].clone()
    if classification:
        y_s = torch.from_numpy(np.ascontiguousarray(sy, dtype=np.int64))[None].clone()
    else:
        y_s = torch.from_numpy(np.ascontiguousarray(sy, dtype=np.float32))[None].clone()
    n_s, n_f = sx.shape
    n_q = qx.shape[0]
    pad_f = torch.zeros((1, n_f), dtype=torch.bool)
    pad_s = torch.zeros((1, n_s), dtype=torch.bool)
    pad_q = torch.zeros((1, n_q), dtype=torch.bool)

    with torch.no_grad(), torch.autocast("cpu", enabled=False), sdpa_kernel([SDPBackend.MATH]):
        out = model(x_s.clone(), y_s.clone(), x_q.clone(), pad_f.clone(), pad_s.clone(), pad_q.clone())
        z = None
        if want_z:
            z = model.x_quantile(x_s.clone(), x_q.clone(), pad_s.clone(), pad_f.clone())
    if out.dtype != torch.float32:
        raise RuntimeError(f"forward produced {out.dtype}, expected float32")
    out = out[0].numpy().astype(np.float32)
    if z is not None:
        z = (z[0][0].numpy().astype(np.float32), z[1][0].numpy().astype(np.float32))
    return out, z


def check_inputs(cfg: dict, sx, sy, qx):
    cls = cfg["task"].upper() == "CLASSIFICATION"
    assert sx.ndim == 2 and qx.ndim == 2 and sy.ndim == 1, (sx.shape, sy.shape, qx.shape)
    assert sx.shape[1] == qx.shape[1] and sx.shape[0] == sy.shape[0]
    assert sx.dtype == np.float32 and qx.dtype == np.float32, (sx.dtype, qx.dtype)
    if cls:
        assert sy.dtype == np.int64, f"classification support_y must be int64, got {sy.dtype}"
        assert sy.min() >= 0 and sy.max() < cfg["dim_output"], (sy.min(), sy.max())
    else:
        assert sy.dtype == np.float32, f"regression support_y must be float32, got {sy.dtype}"


def run_expected(model_dir: Path, case_dir: Path, dump_z: bool = False) -> np.ndarray:
    model, cfg = load_model(model_dir)
    sx = np.load(case_dir / "support_x.npy")
    sy = np.load(case_dir / "support_y.npy")
    qx = np.load(case_dir / "query_x.npy")
    check_inputs(cfg, sx, sy, qx)
    out, z = _forward(model, cfg, sx, sy, qx, want_z=dump_z)
    n_q = qx.shape[0]
    if cfg["task"].upper() == "REGRESSION" and cfg["dim_output"] == 1:
        assert out.shape == (n_q,), out.shape
    else:
        assert out.shape == (n_q, cfg["dim_output"]), out.shape
    if not np.all(np.isfinite(out)):
        raise RuntimeError("non-finite reference logits")
    np.save(case_dir / "expected_logits.npy", out)
    if z is not None:
        np.save(case_dir / "expected_z_support.npy", z[0])
        np.save(case_dir / "expected_z_query.npy", z[1])

    import torch
    meta_path = case_dir / "case.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta.update(versions())
    meta["reference"] = {
        "module": "autogluon.tabular.models.mitra._internal.models.tab2d.Tab2D",
        "device": "cpu", "dtype": "float32", "autocast": False,
        "sdpa_backend": "MATH", "flash_attn": False, "batch": 1, "padding": False,
        "load_state_dict": "strict",
    }
    meta["expected_logits_shape"] = list(out.shape)
    if z is not None:
        meta["expected_z_files"] = ["expected_z_support.npy", "expected_z_query.npy"]
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return out


# --------------------------------------------------------------------------
# Checkpoint written in Python (self-test without the C binary)
# --------------------------------------------------------------------------

def tab2d_key_shapes(dim: int, layers: int, outputs: int, task: str) -> dict:
    """Key names / shapes of spec Appendix A (classifier) / B (regressor)."""
    D, C = dim, outputs
    ks = {"x_embedding.x_embedding.weight": (D, 1), "x_embedding.x_embedding.bias": (D,)}
    if task.upper() == "REGRESSION" and C == 1:
        ks["y_embedding.y_embedding.weight"] = (D, 1)
        ks["y_embedding.y_embedding.bias"] = (D,)
    else:
        ks["y_embedding.y_embedding.weight"] = (C, D)
    ks["y_embedding.y_mask.weight"] = (1, D)
    for i in range(layers):
        p = f"layers.{i}."
        for a in ("attention1", "attention2"):
            for m in "qkvo":
                ks[p + f"{a}.{m}.weight"] = (D, D)
                ks[p + f"{a}.{m}.bias"] = (D,)
        for n in range(1, 5):
            ks[p + f"layer_norm{n}.weight"] = (D,)
            ks[p + f"layer_norm{n}.bias"] = (D,)
        for n, (o, i_) in {1: (4 * D, D), 2: (D, 4 * D), 3: (4 * D, D), 4: (D, 4 * D)}.items():
            ks[p + f"linear{n}.weight"] = (o, i_)
            ks[p + f"linear{n}.bias"] = (o,)
    ks["final_layer_norm.weight"] = (D,)
    ks["final_layer_norm.bias"] = (D,)
    ks["final_layer.weight"] = (C, D)
    ks["final_layer.bias"] = (C,)
    return ks


def write_python_checkpoint(out_dir: Path, dim: int, layers: int, heads: int, outputs: int,
                            task: str, seed: int) -> None:
    import torch
    from safetensors.torch import save_file

    rng = np.random.default_rng(seed)
    tensors = {}
    for k, shape in tab2d_key_shapes(dim, layers, outputs, task).items():
        fan_in = shape[1] if len(shape) == 2 else dim
        if "layer_norm" in k:
            a = (1.0 + 0.1 * rng.standard_normal(shape)) if k.endswith("weight") else 0.1 * rng.standard_normal(shape)
        elif "embedding" in k:
            a = rng.standard_normal(shape)
        else:
            a = rng.standard_normal(shape) / np.sqrt(fan_in)
        tensors[k] = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / "model.safetensors"))
    cfg = {"dim": dim, "dim_output": outputs, "n_layers": layers, "n_heads": heads, "task": task.upper()}
    (out_dir / "config.json").write_text(json.dumps(cfg))


def selftest(keep: Path | None) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="mitra_selftest_")) if keep is None else keep
    ok = True
    for task, outputs in (("classification", 3), ("regression", 1)):
        mdir, cdir = tmp / f"model_{task}", tmp / f"case_{task}"
        write_python_checkpoint(mdir, dim=16, layers=2, heads=2, outputs=outputs, task=task, seed=7)
        cdir.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(11)
        sx = rng.standard_normal((20, 4)).astype(np.float32)
        sx[:, 1] = rng.integers(0, 3, 20)
        sx[:, 2] = 5.0  # constant column
        qx = rng.standard_normal((6, 4)).astype(np.float32)
        sy = (rng.integers(0, outputs, 20).astype(np.int64) if task == "classification"
              else rng.random(20).astype(np.float32))
        np.save(cdir / "support_x.npy", sx)
        np.save(cdir / "support_y.npy", sy)
        np.save(cdir / "query_x.npy", qx)
        out = run_expected(mdir, cdir, dump_z=True)
        # Independent check: upstream from_pretrained path + plain call.
        import torch
        from autogluon.tabular.models.mitra._internal.models.tab2d import Tab2D
        m2 = Tab2D.from_pretrained(str(mdir), device="cpu").eval()
        with torch.no_grad():
            o2 = m2(torch.from_numpy(sx)[None], torch.from_numpy(sy)[None], torch.from_numpy(qx)[None],
                    torch.zeros(1, 4, dtype=torch.bool), torch.zeros(1, 20, dtype=torch.bool),
                    torch.zeros(1, 6, dtype=torch.bool))[0].numpy()
        diff = float(np.max(np.abs(o2 - out)))
        zq = np.load(cdir / "expected_z_query.npy")
        good = diff < 1e-5 and np.all(zq[:, 2] == 0)
        ok &= good
        print(json.dumps({"task": task, "logits_shape": list(out.shape), "max_abs_diff_vs_from_pretrained": diff,
                          "ok": bool(good), "dir": str(tmp)}))
    if keep is None:
        shutil.rmtree(tmp)
    return 0 if ok else 1


# --------------------------------------------------------------------------
# make: regenerate all committed fixtures
# --------------------------------------------------------------------------

FULL = {"dim": 512, "layers": 12, "heads": 4}

CASES = {
    "seed42": {
        "weights": {"seed": 1, "dim": 64, "layers": 2, "heads": 4, "outputs": 10, "task": "classification"},
        "inputs": "nofall-run-seed42",
        "description": "small classifier; inputs are the ones `nofall run --seed 42` generates "
                       "(16 support, 8 query, 13 features, labels 0..9)",
    },
    "ties": {
        "weights": {"seed": 2, "dim": 32, "layers": 3, "heads": 2, "outputs": 3, "task": "classification"},
        "inputs": "ties", "rng_seed": 1002,
        "description": "quantile/bucketize edge cases: 300x6 support (col0 ties in {0,1,2}, col1 constant, "
                       "col2 integers 0..50, col3 normal, col4 continuous with duplicates, col5 lognormal); "
                       "40 queries incl. values below min, above max, equal to support values and equal to "
                       "the float32 quantile boundaries; labels 0..2",
    },
    "regressor": {
        "weights": {"seed": 3, "dim": 48, "layers": 2, "heads": 3, "outputs": 1, "task": "regression"},
        "inputs": "regression", "rng_seed": 1003, "n_support": 64, "n_query": 20, "n_features": 5,
        "description": "small regressor, 64x5 support, 20 queries, y float32 min-max scaled to [0,1]",
    },
    "tiny": {
        "weights": {"seed": 4, "dim": 8, "layers": 1, "heads": 2, "outputs": 2, "task": "classification"},
        "inputs": "tiny", "rng_seed": 1004,
        "description": "smallest legal table: 1 support row, 1 feature, 1 query row (support variance 0 -> z = 0)",
    },
    "wide": {
        "weights": {"seed": 5, "dim": 32, "layers": 2, "heads": 4, "outputs": 10, "task": "classification"},
        "inputs": "wide", "rng_seed": 1005, "n_support": 50, "n_query": 7, "n_features": 40,
        "description": "wide table: 50x40 support (mixed distributions), 7 queries, labels 0..9",
    },
    "full-seed0": {
        "weights": {"seed": 0, **FULL, "outputs": 10, "task": "classification"},
        "inputs": "nofall-run-seed42",
        "description": "full-size default classifier (gen-weights mitra --seed 0: dim 512, 12 layers, 4 heads, "
                       "10 outputs) on the `nofall run --seed 42` inputs",
    },
    "full-reg-seed0": {
        "weights": {"seed": 0, **FULL, "outputs": 1, "task": "regression"},
        "inputs": "regression", "rng_seed": 1007, "n_support": 32, "n_query": 8, "n_features": 8,
        "description": "full-size regressor (gen-weights mitra --task regression --outputs 1 --seed 0), "
                       "32x8 support, 8 queries, y in [0,1]",
    },
}


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout)
        raise SystemExit(f"command failed (rc={r.returncode}): {' '.join(cmd)}")


def gen_weights(nofall: str, out: Path, w: dict) -> None:
    _run([nofall, "gen-weights", "mitra", "--out", str(out), "--seed", str(w["seed"]),
          "--dim", str(w["dim"]), "--layers", str(w["layers"]), "--heads", str(w["heads"]),
          "--outputs", str(w["outputs"]), "--task", w["task"]])
    cfg = json.loads((out / "config.json").read_text())
    want = {"dim": w["dim"], "dim_output": w["outputs"], "n_layers": w["layers"], "n_heads": w["heads"],
            "task": w["task"].upper()}
    if {k: cfg.get(k) for k in want} != want:
        raise SystemExit(f"gen-weights wrote config {cfg}, expected {want}")


def inputs_from_nofall_run(nofall: str, model_dir: Path, tmp: Path, seed: int = 42):
    out = tmp / "run_out"
    if out.exists():
        shutil.rmtree(out)
    _run([nofall, "run", "--model", str(model_dir), "--device", "cpu", "--out", str(out), "--seed", str(seed)])
    sx = np.load(out / "support_x.npy")
    sy = np.load(out / "support_y.npy")
    qx = np.load(out / "query_x.npy")
    return sx, sy, qx


def _quantile_boundaries(col: np.ndarray) -> np.ndarray:
    """float32 boundaries the way the model computes them (torch.quantile, linear)."""
    import torch
    q = torch.arange(1, 1000, dtype=torch.float) / 1000
    return torch.quantile(torch.from_numpy(col.astype(np.float32)), q).numpy()


def inputs_ties(seed: int):
    rng = np.random.default_rng(seed)
    n, nq = 300, 40
    sx = np.empty((n, 6), dtype=np.float32)
    sx[:, 0] = rng.integers(0, 3, n)
    sx[:, 1] = 2.5
    sx[:, 2] = rng.integers(0, 51, n)
    sx[:, 3] = rng.standard_normal(n)
    pool = rng.standard_normal(37) * 3.0 + 1.0
    sx[:, 4] = pool[rng.integers(0, len(pool), n)]
    sx[:, 5] = rng.lognormal(0.0, 1.0, n)
    sy = rng.integers(0, 3, n).astype(np.int64)
    sy[:3] = [0, 1, 2]

    qx = np.empty((nq, 6), dtype=np.float32)
    lo, hi = sx.min(axis=0), sx.max(axis=0)
    qx[0:8] = sx[rng.choice(n, 8, replace=False)]             # exact copies of support rows
    qx[8:12] = lo - np.array([[1.0], [0.5], [1e-3], [100.0]], dtype=np.float32)   # below the minimum
    qx[12:16] = hi + np.array([[1.0], [0.5], [1e-3], [100.0]], dtype=np.float32)  # above the maximum
    qx[16] = lo                                                 # exactly the minimum
    qx[17] = hi                                                 # exactly the maximum
    qx[18] = np.median(sx, axis=0).astype(np.float32)
    # exactly equal to (interpolated) quantile boundaries
    ks = [0, 1, 249, 499, 500, 749, 997, 998, 2, 333]
    for r, k in enumerate(ks):
        for j in range(6):
            qx[19 + r, j] = _quantile_boundaries(sx[:, j])[k]
    # support values of other rows per column (mixing columns from different rows)
    for r in range(29, 34):
        qx[r] = sx[rng.integers(0, n, 6), np.arange(6)]
    # fresh draws from the same distributions (ties column also gets out-of-set values)
    m = nq - 34
    qx[34:, 0] = rng.choice([0.0, 1.0, 2.0, 1.5, -1.0, 3.0], m)
    qx[34:, 1] = rng.choice([2.5, 2.0, 3.0], m)
    qx[34:, 2] = rng.integers(-3, 55, m)
    qx[34:, 3] = rng.standard_normal(m)
    qx[34:, 4] = rng.standard_normal(m) * 3.0 + 1.0
    qx[34:, 5] = rng.lognormal(0.0, 1.0, m)
    return sx, sy, qx


def inputs_regression(seed: int, n_s: int, n_q: int, n_f: int):
    rng = np.random.default_rng(seed)
    sx = rng.standard_normal((n_s, n_f)).astype(np.float32)
    qx = rng.standard_normal((n_q, n_f)).astype(np.float32)
    w = rng.standard_normal(n_f)
    raw = np.tanh(sx.astype(np.float64) @ w / np.sqrt(n_f)) + 0.1 * rng.standard_normal(n_s)
    y = (raw - raw.min()) / (raw.max() - raw.min())   # exactly [0, 1] like AutoGluon's transform_y
    return sx, y.astype(np.float32), qx


def inputs_tiny(seed: int):
    rng = np.random.default_rng(seed)
    sx = rng.standard_normal((1, 1)).astype(np.float32)
    qx = (sx + np.float32(0.75)).astype(np.float32)
    sy = np.array([1], dtype=np.int64)
    return sx, sy, qx


def inputs_wide(seed: int, n_s: int, n_q: int, n_f: int):
    rng = np.random.default_rng(seed)
    sx = np.empty((n_s, n_f), dtype=np.float32)
    qx = np.empty((n_q, n_f), dtype=np.float32)
    for j in range(n_f):
        kind = j % 4
        if kind == 0:
            f = lambda k: rng.standard_normal(k)
        elif kind == 1:
            f = lambda k: rng.integers(0, 5, k).astype(np.float64)
        elif kind == 2:
            f = lambda k: rng.exponential(2.0, k)
        else:
            f = lambda k: rng.uniform(-10, 10, k)
        sx[:, j] = f(n_s)
        qx[:, j] = f(n_q)
    sy = rng.integers(0, 10, n_s).astype(np.int64)
    sy[:10] = np.arange(10)
    return sx, sy, qx


def make(nofall: str, fixtures: Path, only: list[str] | None, dump_z: bool) -> int:
    nofall = str(Path(nofall).resolve())
    if not os.access(nofall, os.X_OK):
        raise SystemExit(f"nofall binary not found/executable: {nofall}")
    fixtures.mkdir(parents=True, exist_ok=True)
    tmp_root = Path(tempfile.mkdtemp(prefix="mitra_make_"))
    summary = []
    try:
        for name, spec in CASES.items():
            if only and name not in only:
                continue
            w = spec["weights"]
            tmp = tmp_root / name
            mdir = tmp / "model"
            tmp.mkdir(parents=True)
            gen_weights(nofall, mdir, w)
            kind = spec["inputs"]
            if kind == "nofall-run-seed42":
                sx, sy, qx = inputs_from_nofall_run(nofall, mdir, tmp, 42)
                src = "nofall run --model <weights> --device cpu --out <dir> --seed 42 (support_x/support_y/query_x.npy)"
            elif kind == "ties":
                sx, sy, qx = inputs_ties(spec["rng_seed"])
                src = f"numpy default_rng({spec['rng_seed']}), reference/mitra_fixtures.py inputs_ties"
            elif kind == "regression":
                sx, sy, qx = inputs_regression(spec["rng_seed"], spec["n_support"], spec["n_query"], spec["n_features"])
                src = f"numpy default_rng({spec['rng_seed']}), reference/mitra_fixtures.py inputs_regression"
            elif kind == "tiny":
                sx, sy, qx = inputs_tiny(spec["rng_seed"])
                src = f"numpy default_rng({spec['rng_seed']}), reference/mitra_fixtures.py inputs_tiny"
            elif kind == "wide":
                sx, sy, qx = inputs_wide(spec["rng_seed"], spec["n_support"], spec["n_query"], spec["n_features"])
                src = f"numpy default_rng({spec['rng_seed']}), reference/mitra_fixtures.py inputs_wide"
            else:
                raise AssertionError(kind)
            cfg = json.loads((mdir / "config.json").read_text())
            check_inputs(cfg, sx, sy, qx)

            cdir = fixtures / name
            if cdir.exists():
                shutil.rmtree(cdir)
            cdir.mkdir(parents=True)
            np.save(cdir / "support_x.npy", sx)
            np.save(cdir / "support_y.npy", sy)
            np.save(cdir / "query_x.npy", qx)
            meta = {
                "weights": w,
                "n_support": int(sx.shape[0]), "n_query": int(qx.shape[0]), "n_features": int(sx.shape[1]),
                "description": spec["description"],
                "inputs_source": src,
                "gen_weights_command": (f"nofall gen-weights mitra --out DIR --seed {w['seed']} --dim {w['dim']} "
                                        f"--layers {w['layers']} --heads {w['heads']} --outputs {w['outputs']} "
                                        f"--task {w['task']}"),
            }
            (cdir / "case.json").write_text(json.dumps(meta, indent=2) + "\n")
            out = run_expected(mdir, cdir, dump_z=dump_z)
            summary.append({"case": name, "support_x": list(sx.shape), "support_y": [list(sy.shape), str(sy.dtype)],
                            "query_x": list(qx.shape), "expected_logits": list(out.shape)})
            print(json.dumps(summary[-1]), flush=True)
        # seed42 and full-seed0 must share inputs when both are generated
        a, b = fixtures / "seed42", fixtures / "full-seed0"
        if (a / "support_x.npy").exists() and (b / "support_x.npy").exists():
            same = all(np.array_equal(np.load(a / f), np.load(b / f))
                       for f in ("support_x.npy", "support_y.npy", "query_x.npy"))
            print(json.dumps({"seed42_and_full-seed0_inputs_identical": same}))
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return 0


# --------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    e = sub.add_parser("expected", help="write expected_logits.npy for one case dir")
    e.add_argument("--model", required=True, type=Path)
    e.add_argument("--case", required=True, type=Path)
    e.add_argument("--dump-z", action="store_true", help="also write expected_z_{support,query}.npy")
    m = sub.add_parser("make", help="regenerate all fixtures under tests/fixtures/mitra")
    m.add_argument("--nofall", default=str(DEFAULT_NOFALL))
    m.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    m.add_argument("--only", default="", help="comma-separated case names")
    m.add_argument("--no-z", action="store_true", help="do not write expected_z_*.npy")
    s = sub.add_parser("selftest", help="python-written checkpoint, no nofall binary needed")
    s.add_argument("--keep", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.mode == "expected":
        out = run_expected(a.model, a.case, dump_z=a.dump_z)
        print(json.dumps({"case": str(a.case), "expected_logits_shape": list(out.shape), **versions()}))
        return 0
    if a.mode == "make":
        only = [x for x in a.only.split(",") if x] or None
        if only:
            unknown = set(only) - set(CASES)
            if unknown:
                raise SystemExit(f"unknown cases: {sorted(unknown)}")
        return make(a.nofall, a.fixtures, only, dump_z=not a.no_z)
    if a.mode == "selftest":
        return selftest(a.keep)
    return 2


if __name__ == "__main__":
    sys.exit(main())
