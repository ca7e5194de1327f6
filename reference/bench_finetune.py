#!/usr/bin/env python3
"""Time upstream AutoGluon's own Mitra fine-tuning on the CPU (issue #28 item 6;
bench/finetune-vs-torch.sh runs it beside nofall's bench/bench-finetune.c).

    .venv-ref/bin/python reference/bench_finetune.py --model DIR --steps 1 --threads 2 [--write-data DIR]
    .venv-ref/bin/python reference/bench_finetune.py --write-data DIR --no-fit      # the arrays only

`MitraClassifier(fine_tune=True, fine_tune_steps=S, device="cpu", hf_model=DIR,
seed=0).fit(X, y, X_val, y_val, time_limit=None)` with AutoGluon's other
defaults, in fp32: `_create_config`'s precision is set to "float32" (the CPU
autocast then disables itself), as reference/finetune_fixtures.py does, with
its `torch_fp32()` settings (highest matmul precision, TF32 off). --autocast:
AutoGluon's own default instead, precision "bfloat16" (every forward under
torch.autocast("cpu", bfloat16), the backward in the forward's dtypes) -- what
its users' fine-tuning runs. PyTorch
picks its own CPU SDPA kernel, as AutoGluon would (--math-sdpa: the math
backend the fixtures force). Nothing else is wrapped: only timestamps around
`TrainerFinetune.evaluate`.

Data: numpy default_rng(0), x ~ N(0,1) float32 (rows, features); the class
is the tercile (--classes K: K-quantile) of x @ w, w ~ N(0,1); the first
rows - val rows train, the rest validate (X_val given, as AutoGluon's holdout
passes it). --write-data DIR writes x_train/x_val (float32) and
y_train/y_val (int64) .npy for the C side.

Prints one JSON line: fit_s (the whole fit: load, preprocessing, epoch-0
validation, S steps), setup_s (fit start to the first validation), eval0_s
(the pretrained weights' validation), step_s (per step: from the end of the
previous validation to the end of this step's, as the C side measures),
train_s (per step, the part before its validation: episode, forward,
backward, AdamW), eval_s (every validation), the losses, fit_cpu_s,
eval0_cpu_s and step_cpu_s (the same spans in the process's CPU seconds,
time.process_time: every thread; what a shared machine's load does not
inflate), peak_rss_mb
(getrusage ru_maxrss, the whole process: torch included) and
rss_before_fit_mb (the same after the imports, before fit).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def make_data(rows: int, features: int, n_val: int, classes: int):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, features)).astype(np.float32)
    w = rng.standard_normal(features)
    score = x.astype(np.float64) @ w
    cuts = np.quantile(score, np.arange(1, classes) / classes)
    y = np.searchsorted(cuts, score).astype(np.int64)
    n_tr = rows - n_val
    return x[:n_tr], y[:n_tr], x[n_tr:], y[n_tr:]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="dir with config.json + model.safetensors (a gen-weights dir)")
    ap.add_argument("--steps", type=int, default=1, help="fine_tune_steps (AutoGluon's default: 50)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 = torch default")
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--val", type=int, default=200, help="validation rows (the last ones)")
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--write-data", type=Path, help="write the arrays as .npy here")
    ap.add_argument("--no-fit", action="store_true", help="only write the data")
    ap.add_argument("--math-sdpa", action="store_true", help="force the SDPA math backend")
    ap.add_argument("--autocast", action="store_true", help="AutoGluon's default bf16 autocast (not fp32)")
    a = ap.parse_args()

    xt, yt, xv, yv = make_data(a.rows, a.features, a.val, a.classes)
    if a.write_data:
        a.write_data.mkdir(parents=True, exist_ok=True)
        for name, arr in (("x_train", xt), ("y_train", yt), ("x_val", xv), ("y_val", yv)):
            np.save(a.write_data / f"{name}.npy", np.ascontiguousarray(arr))
    if a.no_fit:
        return 0
    if a.model is None:
        ap.error("--model is needed unless --no-fit")

    from finetune_cases import torch_fp32  # noqa: E402  (the fixtures' fp32 settings)
    torch = torch_fp32()
    if a.threads:
        torch.set_num_threads(a.threads)
    warnings.filterwarnings("ignore", message="In CPU autocast, but the target dtype is not supported")
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from autogluon.tabular.models.mitra import sklearn_interface as si
    from autogluon.tabular.models.mitra._internal.core import trainer_finetune as tf

    o_cfg = si.MitraBase._create_config

    def create_config(self, *args, **kw):
        cfg, model_cls = o_cfg(self, *args, **kw)
        cfg.hyperparams["precision"] = "float32"
        return cfg, model_cls

    if not a.autocast:
        si.MitraBase._create_config = create_config

    evals = []  # (start, end, loss)
    o_eval = tf.TrainerFinetune.evaluate

    def evaluate(self, *args, **kw):
        t0, c0 = time.perf_counter(), time.process_time()
        m = o_eval(self, *args, **kw)
        evals.append((t0, time.perf_counter(), float(m.loss), c0, time.process_time()))
        return m

    tf.TrainerFinetune.evaluate = evaluate

    est = si.MitraClassifier(fine_tune=True, fine_tune_steps=a.steps, device="cpu", hf_model=str(a.model), seed=0,
                             verbose=False)
    rss0 = rss_mb()
    ctx = sdpa_kernel([SDPBackend.MATH]) if a.math_sdpa else contextlib.nullcontext()
    torch.manual_seed(0)
    np.random.seed(0)  # the Preprocessor's mirror signs (unseeded upstream); no effect on the cost
    with ctx:
        t0, c0 = time.perf_counter(), time.process_time()
        est.fit(xt.copy(), yt.copy(), xv.copy(), yv.copy(), time_limit=None)
        t1, c1 = time.perf_counter(), time.process_time()
    assert len(evals) == a.steps + 1, f"{len(evals)} validations for {a.steps} steps (early stop?)"
    step_s = [evals[i][1] - evals[i - 1][1] for i in range(1, len(evals))]
    train_s = [evals[i][0] - evals[i - 1][1] for i in range(1, len(evals))]
    cfg = json.loads((a.model / "config.json").read_text())
    print(json.dumps({
        "side": "upstream", "device": "cpu", "threads": torch.get_num_threads(), "n_train": int(len(yt)),
        "n_val": int(len(yv)), "features": a.features, "steps": a.steps, "fit_s": round(t1 - t0, 3),
        "setup_s": round(evals[0][0] - t0, 3), "eval0_s": round(evals[0][1] - evals[0][0], 3),
        "step_s": [round(v, 3) for v in step_s], "train_s": [round(v, 3) for v in train_s],
        "eval_s": [round(e[1] - e[0], 3) for e in evals], "val_loss": [round(e[2], 6) for e in evals],
        "fit_cpu_s": round(c1 - c0, 3), "eval0_cpu_s": round(evals[0][4] - evals[0][3], 3),
        "step_cpu_s": [round(evals[i][4] - evals[i - 1][4], 3) for i in range(1, len(evals))],
        "peak_rss_mb": round(rss_mb(), 1), "rss_before_fit_mb": round(rss0, 1),
        "sdpa": "math" if a.math_sdpa else "default", "precision": "bf16-autocast" if a.autocast else "fp32",
        "model": {k: cfg.get(k) for k in ("dim", "n_layers", "n_heads", "dim_output")},
        "torch_version": torch.__version__}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
