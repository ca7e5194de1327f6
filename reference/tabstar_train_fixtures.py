#!/usr/bin/env python3
"""Parity fixtures for TabSTAR's training step (issue #30; spec finetune.md
§3.2, §3.3, §4), llm.c style: upstream's own model (the `tabstar` package),
PEFT LoRA set up as upstream's training/lora.py does (r 32, lora_alpha 64,
the same target and excluded modules), one batch forward + loss/2 backward,
then clip_grad_norm_ + upstream's AdamW (get_optimizer) with the lr / beta1
of upstream's OneCycleLR (get_scheduler), twice.

    /work/.venv-tab/bin/python reference/tabstar_train_fixtures.py --nofall build/nofall \
        --out tests/fixtures/tabstar-train

Settings: CPU, fp32, autocast off; model.train() with every dropout p = 0
(nn.Dropout incl. PEFT's lora_dropout, MultiheadAttention.dropout, BERT's
attention dropout_prob): model.eval() would let nn.TransformerEncoderLayer
take its fused fast path, which skips the linear1/linear2 adapters (the
base weights are frozen, so "grad enabled" does not disable it): checked
here, the script asserts that the train-mode forward differs from the
eval-mode one once the adapters are non-zero.

Initial A and B are not PEFT's random init (torch's global RNG cannot be
replayed) but a hash of (case, module, A/B, element) that
tests/test-tabstar-train.c computes too (splitmix64, 24-bit values times
2^-4 (A) or 2^-6 (B), exact in float32), so nothing of size 1M floats is
committed; B is non-zero so dA is not trivially 0.

A float64 twin (model.double(), the same batch, A/B, lr, beta1) gives the
calibrated bound of spec §4.5: e_pt = |g32 - g64| / |g64| per module.

What is stored (the adapters hold ~1M floats: only every STRIDE-th element
of each A and B, plus per-module full-tensor norms):
  case.json: gen-weights seed / layers / vocab, the batch (token ids of the
    distinct strings in np.unique order, cell -> string, x_num, y), the
    module names in arena order, loss / loss64 / logits, per step: lr,
    beta1, max_norm, the total norm before clipping (torch), loss at step 2;
    per module: |g32|, |g64|, e_pt (full tensor and subset), |p1 - p0|.
  sub.npy (float32, 4 x n_sub): grad32, grad64 (rounded to float32), params
    after update 1, params after update 2, at the subset's elements.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tabstar_fixtures import build_e5, upstream_model  # noqa: E402

R, ALPHA, STRIDE = 32, 64, 53
LORA_TARGETS = ["query", "key", "value", "out_proj", "linear1", "linear2", "cls_head.layers.0", "reg_head.layers.0"]
# name -> (gen-weights seed, text layers, vocab, C (1: regression), rows, hash seed)
CASES = {
    "cls3": (31, 7, 1000, 3, 4, 1),
    "reg": (32, 7, 1000, 1, 3, 2),
}
M64 = (1 << 64) - 1


def module_names(layers, C):
    names = []
    for layer in range(6, layers):
        for c in ("query", "key", "value"):
            names.append(f"text_encoder.encoder.layer.{layer}.attention.self.{c}")
    names += ["numerical_fusion.fusion_block.linear1", "numerical_fusion.fusion_block.linear2"]
    for layer in range(6):
        names += [f"tabular_encoder.encoder.layers.{layer}.linear1", f"tabular_encoder.encoder.layers.{layer}.linear2"]
    names.append("reg_head.layers.0" if C == 1 else "cls_head.layers.0")
    return names


def hash_init(seed, mi, w, n, scale):
    """24-bit splitmix64 values * 2^-23 * scale (w: 0 = A, 1 = B), as tests/test-tabstar-train.c."""
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = ((np.uint64(mi * 2 + w) << np.uint64(32)) | i) ^ np.uint64((seed * 0x9E3779B97F4A7C15) & M64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    v = (z >> np.uint64(40)).astype(np.int64) - (1 << 23)
    return (v.astype(np.float64) * 2.0 ** -23 * scale).astype(np.float32)


def make_batch(C, n_rows, rng):
    if C == 1:
        targets = ["Numerical Target Feature: price"]
    else:
        targets = [f"Target Feature: grade\nFeature Value: {v}" for v in ["low", "medium", "high"][:C]]
    cities = ["Paris", "Tokyo", "New York", "Rome", "a b c d e f"]
    xt, xn = [], []
    for r in range(n_rows):
        row_t, row_n = list(targets), [0.0] * len(targets)
        row_t.append(f"Predictive Feature: city\nFeature Value: {cities[int(rng.integers(len(cities)))]}")
        row_n.append(0.0)
        row_t.append("Predictive Feature: age\nFeature Value: 20 to 30 (Quantile 10 - 20%)")
        row_n.append(float(rng.normal(0, 1)))
        row_t.append(f"Predictive Feature: note\nFeature Value: {['x', 'yes', 'no'][r % 3]}")
        row_n.append(0.0)
        xt.append(row_t)
        xn.append(row_n)
    y = rng.normal(0, 1, n_rows).astype(np.float32) if C == 1 else (np.arange(n_rows) % C).astype(np.int64)
    return np.array(xt, dtype=object), np.array(xn, dtype=np.float32), y


def no_dropout(model):
    import torch
    for mod in model.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
        if isinstance(mod, torch.nn.MultiheadAttention):
            mod.dropout = 0.0
        if hasattr(mod, "dropout_prob"):
            mod.dropout_prob = 0.0


def peft_model(base, layers, names, hseed):
    import torch
    from peft import LoraConfig, get_peft_model
    prefixes = tuple(f"text_encoder.encoder.layer.{i}." for i in range(6))
    excl = [n for n, _ in base.named_modules() if n.startswith(prefixes)]
    pm = get_peft_model(base, LoraConfig(r=R, lora_alpha=ALPHA, target_modules=LORA_TARGETS, exclude_modules=excl,
                                         lora_dropout=0.1, bias="none"))
    params = dict(pm.named_parameters())
    with torch.no_grad():
        for mi, n in enumerate(names):
            A = params[f"base_model.model.{n}.lora_A.default.weight"]
            B = params[f"base_model.model.{n}.lora_B.default.weight"]
            A.copy_(torch.from_numpy(hash_init(hseed, mi, 0, A.numel(), 2.0 ** -4).reshape(A.shape)))
            B.copy_(torch.from_numpy(hash_init(hseed, mi, 1, B.numel(), 2.0 ** -6).reshape(B.shape)))
    # the trainable set: ours, the 7 out_proj adapters and the other head's, which never get a gradient
    trainable = [n for n, p in pm.named_parameters() if p.requires_grad]
    assert len(trainable) == 2 * (len(names) + 8), len(trainable)  # + the other head's (no gradient either)
    return pm, params


def lora_tensors(params, names, what):
    out = []
    for n in names:
        for ab in ("A", "B"):
            p = params[f"base_model.model.{n}.lora_{ab}.default.weight"]
            out.append((p.grad if what == "grad" else p).detach().double().numpy().ravel())
    return out


def subset(arrs):
    return np.concatenate([a[::STRIDE] for a in arrs])


def run_case(name, args):
    import torch
    from tabstar.training.metrics import calculate_loss
    from tabstar.training.optimizer import get_optimizer, get_scheduler
    seed, layers, vocab, C, n_rows, hseed = CASES[name]
    rng = np.random.default_rng(seed)
    xt, xn, y = make_batch(C, n_rows, rng)
    with tempfile.TemporaryDirectory() as tmp:
        mdir, e5 = os.path.join(tmp, "m"), os.path.join(tmp, "e5")
        subprocess.run([args.nofall, "gen-weights", "tabstar", "--out", mdir, "--seed", str(seed), "--layers",
                        str(layers), "--vocab", str(vocab)], check=True, stdout=subprocess.DEVNULL)
        build_e5(e5, layers, os.path.join(mdir, "vocab.txt"), vocab)
        names = module_names(layers, C)
        res = {}
        for dt in ("f32", "f64"):
            base = upstream_model(mdir, e5)
            pm, params = peft_model(base, layers, names, hseed)
            if dt == "f64":
                pm.double()
                params = dict(pm.named_parameters())
            no_dropout(pm)
            pm.train()
            lp = [p for p in pm.parameters() if p.requires_grad]
            yt = torch.tensor(y, dtype=torch.float64 if dt == "f64" else torch.float32) if C == 1 else y
            with torch.autocast(device_type="cpu", enabled=False):
                logits = pm(xt, xn, C)
                loss = calculate_loss(predictions=logits, y=yt, d_output=C)
                (loss / 2).backward()
            r = {"loss": loss.item(), "logits": logits.detach().double().numpy().reshape(-1).tolist(),
                 "grad": lora_tensors(params, names, "grad"), "p0": lora_tensors(params, names, "p")}
            if dt == "f32":
                with torch.no_grad():
                    pm.eval()
                    ev = pm(xt, xn, C).double().numpy().reshape(-1)
                    pm.train()
                    tr = pm(xt, xn, C).double().numpy().reshape(-1)
                # eval() takes the TELs' fast path, which drops the linear1/linear2 adapters
                r["eval_vs_train"] = float(np.abs(ev - tr).max())
                assert r["eval_vs_train"] > 1e-4, "eval() did not drop the linear1/linear2 adapters: check the fast path"
                assert np.abs(tr - np.array(r["logits"])).max() == 0, "train-mode forward not deterministic"
                opt = get_optimizer(pm, lr=1e-3, wd=0.0)
                sch = get_scheduler(opt, max_lr=1e-3, epochs=50)
                steps = []
                for s in range(2):
                    gnorm = torch.norm(torch.stack([p.grad.detach().norm() for p in lp if p.grad is not None]))
                    max_norm = 1.0 if s == 0 else float(np.float32(0.5 * gnorm.item()))
                    lr, beta1 = opt.param_groups[0]["lr"], opt.param_groups[0]["betas"][0]
                    tot = torch.nn.utils.clip_grad_norm_(pm.parameters(), max_norm=max_norm)
                    opt.step()
                    opt.zero_grad()
                    sch.step()
                    r[f"p{s + 1}"] = lora_tensors(params, names, "p")
                    st = {"lr": lr, "beta1": beta1, "beta2": opt.param_groups[0]["betas"][1],
                          "eps": opt.param_groups[0]["eps"], "weight_decay": opt.param_groups[0]["weight_decay"],
                          "max_norm": max_norm, "norm": tot.item()}
                    if s == 0:
                        with torch.autocast(device_type="cpu", enabled=False):
                            l2 = calculate_loss(predictions=pm(xt, xn, C), y=yt, d_output=C)
                            (l2 / 2).backward()
                        st["loss_after"] = l2.item()
                    steps.append(st)
                r["steps"] = steps
            res[dt] = r
        uniq, inv = np.unique(xt, return_inverse=True)
        from transformers import AutoTokenizer
        tk = AutoTokenizer.from_pretrained(e5)
        ids = [tk(str(s), truncation=True)["input_ids"] for s in uniq]
    f32, f64 = res["f32"], res["f64"]
    mods = []
    for mi, n in enumerate(names):
        g32 = np.concatenate([f32["grad"][2 * mi], f32["grad"][2 * mi + 1]])
        g64 = np.concatenate([f64["grad"][2 * mi], f64["grad"][2 * mi + 1]])
        s32 = np.concatenate([f32["grad"][2 * mi][::STRIDE], f32["grad"][2 * mi + 1][::STRIDE]])
        s64 = np.concatenate([f64["grad"][2 * mi][::STRIDE], f64["grad"][2 * mi + 1][::STRIDE]])
        d1 = np.concatenate([f32["p1"][2 * mi] - f32["p0"][2 * mi], f32["p1"][2 * mi + 1] - f32["p0"][2 * mi + 1]])
        mods.append({"name": n, "g32_norm": float(np.linalg.norm(g32)), "g64_norm": float(np.linalg.norm(g64)),
                     "e_pt": float(np.linalg.norm(g32 - g64) / np.linalg.norm(g64)),
                     "e_pt_sub": float(np.linalg.norm(s32 - s64) / np.linalg.norm(s64)),
                     "upd1_norm": float(np.linalg.norm(d1))})
    sub = np.stack([subset(f32["grad"]), subset(f64["grad"]), subset(f32["p1"]), subset(f32["p2"])]).astype(np.float32)
    case = {"upstream": "tabstar 1.1.16 TabStarModel + PEFT LoRA (training/lora.py), train mode, dropouts 0, cpu fp32",
            "seed": seed, "layers": layers, "vocab": vocab, "C": C, "hash_seed": hseed, "stride": STRIDE,
            "scale_a": 2.0 ** -4, "scale_b": 2.0 ** -6, "loss_scale": 0.5,
            "n_rows": n_rows, "n_cells": int(xt.shape[1]), "strings": [str(s) for s in uniq], "ids": ids,
            "cell": [int(v) for v in np.asarray(inv).reshape(-1)], "x_num": [float(v) for v in xn.reshape(-1)],
            "y": [float(v) for v in y] if C == 1 else [int(v) for v in y],
            "loss": f32["loss"], "loss64": f64["loss"], "logits": f32["logits"], "logits64": f64["logits"],
            "eval_vs_train": f32["eval_vs_train"], "steps": f32["steps"], "modules": mods}
    cdir = os.path.join(args.out, name)
    os.makedirs(cdir, exist_ok=True)
    with open(os.path.join(cdir, "case.json"), "w", encoding="utf-8") as f:
        json.dump(case, f, ensure_ascii=False, indent=0)
    np.save(os.path.join(cdir, "sub.npy"), sub)
    print(f"{name}: loss {f32['loss']:.6g} (f64 {f64['loss']:.6g}), {len(uniq)} strings, "
          f"norms {[round(s['norm'], 5) for s in f32['steps']]}, eval-vs-train {f32['eval_vs_train']:.3g}, "
          f"max e_pt {max(m['e_pt'] for m in mods):.3g}, sub {sub.shape}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nofall", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    torch.set_float32_matmul_precision("highest")
    import tabstar.arch.arch  # noqa: F401
    for name in CASES:
        if args.only and name not in args.only.split(","):
            continue
        run_case(name, args)


if __name__ == "__main__":
    main()
