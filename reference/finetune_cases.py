#!/usr/bin/env python3
"""Shared by finetune_fixtures.py: the cases, the data generator, the strict
safetensors writer/reader, gen-weights, and the `selftest` mode (it re-checks
committed cases without running the trainer). Imports upstream (autogluon's
`make_dataset_split`) only inside selftest; contains no copy of upstream code."""

from __future__ import annotations

import contextlib
import hashlib
import json
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "fixtures" / "finetune"
DEFAULT_NOFALL = REPO / "build" / "nofall"
F = 7

# weights: the `nofall gen-weights mitra` arguments (after --out DIR)
W_CLS = ["--seed", "1", "--dim", "32", "--layers", "2", "--heads", "4", "--outputs", "10", "--task",
         "classification"]
W_REG = ["--seed", "2", "--dim", "32", "--layers", "2", "--heads", "4", "--outputs", "1", "--task", "regression"]

CASES = {
    # stratified episode path (every class >= 5 rows); full step-1 record + float64 twin
    "cls": dict(task="classification", labels="cls", data_seed=101, n_train=200, n_val=60, n_test=40, steps=5,
                weights=W_CLS, full=True),
    # a 4-row class: ShuffleSplit (train_test_split) episode path
    "cls_small": dict(task="classification", labels="small", data_seed=102, n_train=200, n_val=60, n_test=40,
                      steps=5, weights=W_CLS, full=False),
    "reg": dict(task="regression", labels="reg", data_seed=103, n_train=200, n_val=60, n_test=40, steps=5,
                weights=W_REG, full=False),
    # two 1,024-row evaluation chunks (1,024 + 76)
    "cls_bigval": dict(task="classification", labels="cls", data_seed=101, n_train=200, n_val=1100, n_test=40,
                       steps=2, weights=W_CLS, full=False),
    # not upstream's defaults: lr 0.1 with warmup_steps 3 (LinearLR stops at 7/9 of lr after epoch 3), so the
    # weights move enough for the validation loss to turn: the intended best epoch (3) is not the last (4), and
    # upstream's CPU alias returns the last step's weights anyway
    "cls_lr": dict(task="classification", labels="cls", data_seed=101, n_train=200, n_val=60, n_test=40, steps=4,
                   weights=W_CLS, full=False, hyper=dict(lr=1e-1, warmup_steps=3)),
    # AutoGluon's default run: fine_tune_steps 50 (lr 1e-4 with its 1000-step warmup, patience 40: early stopping
    # can fire from epoch 41)
    "cls_50": dict(task="classification", labels="cls", data_seed=104, n_train=200, n_val=60, n_test=40, steps=50,
                   weights=W_CLS, full=False),
}
SEED = 0  # Mitra's `seed` hyperparameter (AutoGluon's default)


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------

def table(rng, n):
    """7 features: a continuous one, a constant, a NaN column (quarter steps, so its float32 sum is exact and
    pre_nan_mean is one correctly rounded division), tied values, integer codes, a lognormal, a 0.1-step one."""
    c0 = np.round(rng.normal(size=n), 3)
    c1 = np.full(n, 5.0)
    c2 = rng.integers(-16, 17, size=n) / 4.0
    c2[rng.random(n) < 0.15] = np.nan
    c3 = rng.choice([-1.5, 0.0, 0.5, 2.0], size=n)
    c4 = rng.integers(0, 10, size=n).astype(np.float64)
    c5 = np.round(rng.lognormal(size=n), 2)
    c6 = np.round(rng.random(n) * 10, 1)
    x = np.stack([c0, c1, c2, c3, c4, c5, c6], axis=1).astype(np.float32)
    score = c0 + 0.5 * c3 - 0.2 * c4 + 0.3 * np.nan_to_num(c2) + 0.1 * c6 + 0.3 * rng.normal(size=n)
    return x, score


def labels(kind, score, small_keep):
    if kind == "reg":
        return (2.0 * score + 10.0).astype(np.float32)
    y = (score > -0.9).astype(np.int64) + (score > 0.6).astype(np.int64)
    if kind == "small":
        # class 2 keeps only `small_keep` rows (the first ones); the others become class 1
        two = np.flatnonzero(y == 2)
        y[two[small_keep:]] = 1
    return y


def make_data(c):
    rng = np.random.default_rng(c["data_seed"])
    out = {}
    for part, n, keep in (("train", c["n_train"], 4), ("val", c["n_val"], 2), ("test", c["n_test"], 1)):
        x, s = table(rng, n)
        out["x_" + part], out["y_" + part] = x, labels(c["labels"], s, keep)
    return out


# --------------------------------------------------------------------------
# torch set-up and the strict safetensors writer/reader
# --------------------------------------------------------------------------

def torch_fp32():
    import torch
    torch.set_default_dtype(torch.float32)
    torch.set_float32_matmul_precision("highest")
    cm = torch.backends.cuda.matmul
    for attr in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        with contextlib.suppress(Exception):
            setattr(cm, attr, False)
    with contextlib.suppress(Exception):
        torch.backends.cudnn.allow_tf32 = False
    for obj in (getattr(torch.backends, "mkldnn", None), getattr(torch.backends.cuda, "matmul", None)):
        if obj is not None and hasattr(obj, "fp32_precision"):
            with contextlib.suppress(Exception):
                obj.fp32_precision = "ieee"
    return torch


ALLOWED = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.float64): "F64"}


def st_write(path: Path, tensors: dict):
    """safetensors in nofall's strict form: F32/I64/F64 only, C order, unique names (a dict), data back to back
    in name order, no metadata."""
    hdr, blobs, at = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype not in ALLOWED:
            raise TypeError(f"{path.name}: {name}: dtype {a.dtype} (F32/I64/F64 only)")
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        hdr[name] = {"dtype": ALLOWED[a.dtype], "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def st_read_strict(path: Path) -> dict:
    """Reads a safetensors file the way nofall's loader (src/io/safetensors.c) accepts it, refusing what it
    refuses (duplicate names, gaps/overlaps/trailing bytes, size mismatch) and, for fixtures, any dtype other
    than F32/I64/F64. Independent of the `safetensors` package."""
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen == 0 or 8 + hlen > len(raw) or raw[8:9] != b"{":
        raise ValueError(f"{path}: bad header length/start")

    def no_dups(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError(f"{path}: duplicate key in header")
        return dict(pairs)

    hdr = json.loads(raw[8:8 + hlen].decode("utf-8"), object_pairs_hook=no_dups)
    data = raw[8 + hlen:]
    rev = {"F32": np.float32, "I64": np.int64, "F64": np.float64}
    ents = sorted(((k, v) for k, v in hdr.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0])
    at, out = 0, {}
    for k, v in ents:
        if v["dtype"] not in rev:
            raise ValueError(f"{path}: {k}: dtype {v['dtype']}")
        b, e = v["data_offsets"]
        n = int(np.prod(v["shape"], dtype=np.int64))
        if b != at or e - b != n * np.dtype(rev[v["dtype"]]).itemsize:
            raise ValueError(f"{path}: {k}: offsets {b},{e} (expected start {at}, {n} elements)")
        out[k] = np.frombuffer(data[b:e], dtype=np.dtype(rev[v["dtype"]]).newbyteorder("<")).reshape(v["shape"])
        at = e
    if at != len(data):
        raise ValueError(f"{path}: {len(data) - at} trailing bytes")
    return out


def versions():
    import autogluon.tabular
    import sklearn
    import torch
    return {"torch": torch.__version__, "autogluon.tabular": autogluon.tabular.__version__,
            "numpy": np.__version__, "scikit-learn": sklearn.__version__}


def gen_weights(nofall: Path, d: Path, args):
    subprocess.run([str(nofall), "gen-weights", "mitra", "--out", str(d), *args], check=True,
                   stdout=subprocess.DEVNULL)
    return hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()


# --------------------------------------------------------------------------
# selftest
# --------------------------------------------------------------------------

def selftest(args):
    """Internal consistency of committed cases; no trainer run. Optional: the nofall binary for w0."""
    torch = torch_fp32()
    from autogluon.tabular.models.mitra._internal.data.dataset_split import make_dataset_split
    from autogluon.tabular.models.mitra._internal.config.enums import Task

    out = Path(args.out)
    only = set(args.only.split(",")) if args.only else None
    nofall = Path(args.nofall) if args.nofall else None
    bad = 0
    for name, c in CASES.items():
        if only and name not in only:
            continue
        d = out / name
        case = json.loads((d / "case.json").read_text())
        inp = st_read_strict(d / "inputs.safetensors")
        exp = st_read_strict(d / "expected.safetensors")
        S, cls = case["steps"], case["task"] == "classification"
        errs, extra = [], []

        def chk(cond, what):
            if not cond:
                errs.append(what)

        # data regenerate identically
        dd = make_data(c)
        for k in ("x_train", "y_train", "x_val", "y_val", "x_test"):
            chk(np.array_equal(dd[k], inp[k], equal_nan=dd[k].dtype.kind == "f"), f"{k} != the generator's")
        # preprocessing: impute, drop singular, mirror, float32
        sing = np.array(case["preprocessor"]["singular_features"])
        mean = inp["pre_nan_mean"]
        for k in ("x_train", "x_val", "x_test"):
            x = inp[k].copy()
            r, cc = np.where(np.isnan(x))
            x[r, cc] = mean[cc]
            x = (x[:, ~sing] * inp["mirror"][None, :]).astype(np.float32)
            chk(np.array_equal(x, inp["pre." + k]), f"pre.{k} != impute/drop/mirror of {k}")
        if not cls:
            pm = case["preprocessor"]
            y = (inp["y_train"] - np.float32(pm["y_min"])) / (np.float32(pm["y_max"]) - np.float32(pm["y_min"]))
            if pm["regression_mirror"]:
                y = 1 - y
            chk(np.array_equal(y.astype(np.float32), inp["pre.y_train"]), "pre.y_train != scaled/mirrored y")
        # rng replay: upstream's own split + DatasetFinetune draws on a fresh RandomState(seed)
        rng = np.random.RandomState(case["seed"])
        n_tr = len(inp["x_train"])
        ch = case["eval_chunks"]
        ids = np.arange(n_tr, dtype=np.int64)
        task = Task.CLASSIFICATION if cls else Task.REGRESSION
        for e in range(S + 1):
            if e > 0:
                p0 = rng.get_state()
                i_s, i_q, _, _ = make_dataset_split(ids, inp["pre.y_train"], task, rng)
                rng2 = np.random.RandomState()
                rng2.set_state(p0)
                chk(np.array_equal(rng2.permutation(n_tr), exp[f"split.{e}.permutation"]), f"split.{e}.permutation")
                perm = rng.choice(len(i_s), size=len(i_s), replace=False)
                chk(np.array_equal(perm, exp[f"batch.{e}.support_perm"]), f"batch.{e}.support_perm")
                chk(np.array_equal(np.asarray(i_s)[:8192][perm], exp[f"batch.{e}.support_idx"]),
                    f"batch.{e}.support_idx")
                chk(np.array_equal(np.asarray(i_q)[:1024], exp[f"batch.{e}.query_idx"]), f"batch.{e}.query_idx")
                chk(len(np.intersect1d(exp[f"batch.{e}.support_idx"], exp[f"batch.{e}.query_idx"])) == 0,
                    f"batch.{e}: support and query overlap")
            for k in range(ch):
                perm = rng.choice(n_tr, size=min(8192, n_tr), replace=False)
                chk(np.array_equal(perm, exp[f"eval.{e}.{k}.support_perm"]), f"eval.{e}.{k}.support_perm")
        for k in range(-(-case["n_test"] // 1024)):
            perm = rng.choice(n_tr, size=min(8192, n_tr), replace=False)
            chk(np.array_equal(perm, exp[f"predict.{k}.support_perm"]), f"predict.{k}.support_perm")
        # lr: LinearLR(1/warmup) stepped after each epoch (while epoch < warmup)
        w = case["hyperparams"]["warmup_steps"]
        base = case["hyperparams"]["lr"]
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base)
        sch = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / w, end_factor=1.0, total_iters=w)
        lrs = []
        for e in range(1, S + 1):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()  # no grads: changes nothing (keeps the scheduler's order check quiet)
            if e < w:
                sch.step()
        chk(np.array_equal(np.array(lrs), exp["lr"]), f"lr {list(exp['lr'])} != LinearLR {lrs}")
        # best epoch
        vl = exp["val_loss"]
        chk(int(np.argmin(vl)) == case["best_epoch"], "best_epoch != argmin(val_loss)")
        chk(("best." + case["param_order"][0] in exp) == (0 < case["best_epoch"] < S), "best.* presence")
        if cls:
            pp_ = exp["pred_proba"]
            chk(pp_.shape == (case["n_test"], case["K"]) and np.allclose(pp_.sum(1), 1, atol=1e-5), "pred_proba")
            lg = exp["logits0"].astype(np.float64)
            yq = inp["pre.y_train"][exp["batch.1.query_idx"]]
            lse = np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1)) + lg.max(1)
            chk(abs((lse - lg[np.arange(len(yq)), yq]).mean() - exp["loss0"][0]) < 1e-5, "loss0 != CE(logits0)")
        else:
            yq = inp["pre.y_train"][exp["batch.1.query_idx"]].astype(np.float64)
            chk(abs(((exp["logits0"].astype(np.float64) - yq) ** 2).mean() - exp["loss0"][0]) < 1e-5,
                "loss0 != MSE(logits0)")
        # AdamW step-1 moments from the recorded grads (torch ops as in torch.optim.adam, bit-exact)
        names = case["param_order"]
        if case["e_pt"] is not None:
            for n in names:
                g = torch.from_numpy(exp["grad." + n].copy())
                m = torch.zeros_like(g).lerp_(g, 1 - 0.9)
                v = torch.zeros_like(g).mul_(0.999).addcmul_(g, g, value=1 - 0.999)
                chk(torch.equal(m, torch.from_numpy(exp["adam_m." + n].copy())), f"adam_m.{n} != lerp(0, g, 0.1)")
                chk(torch.equal(v, torch.from_numpy(exp["adam_v." + n].copy())), f"adam_v.{n} != 0.001 g^2")
            if nofall and nofall.exists():
                extra.append("w1 = AdamW(w0, grad) checked with gen-weights")
                with tempfile.TemporaryDirectory() as td:
                    sha = gen_weights(nofall, Path(td), case["weights"]["args"])
                    chk(sha == case["weights"]["sha256_model_safetensors"], "gen-weights sha256 differs")
                    from safetensors.torch import load_file
                    w0 = load_file(str(Path(td) / "model.safetensors"))
                ps = [torch.nn.Parameter(w0[n].clone()) for n in names]
                for p, n in zip(ps, names):
                    p.grad = torch.from_numpy(exp["grad." + n].copy())
                opt = torch.optim.AdamW(ps, lr=float(exp["lr"][0]), betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
                opt.step()
                chk(all(torch.equal(p.detach(), torch.from_numpy(exp["w1." + n].copy())) for p, n in zip(ps, names)),
                    "w1 != AdamW(w0, grad)")
        else:
            chk(not any(k.startswith("grad.") for k in exp), "grad.* in a non-full case")
        chk(set(k[3:] for k in exp if k.startswith("wS.")) == set(names), "wS.* names != param_order")
        print(f"{name}: {'OK' if not errs else 'FAIL: ' + '; '.join(errs)}" + "".join(f" ({x})" for x in extra))
        bad += bool(errs)
    return 1 if bad else 0
