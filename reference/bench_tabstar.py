#!/usr/bin/env python3
"""TabSTAR speed, nofall cpu vs upstream PyTorch fp32 (cpu), in the same run.

    .venv-tab/bin/python reference/bench_tabstar.py --nofall build/nofall [--threads 2] [--runs 3]

Full-size synthetic weights (`nofall gen-weights tabstar`, 12 text layers,
vocabulary 30522), two inputs: the seeded one-row case (2 targets + 6
numerical cells, as `nofall run --seed 42` builds it) and a 128-row x 10-column
table (2 targets, 6 numerical columns with upstream's bin labels, 4 text
columns drawn from 40 values each). Upstream: tabstar's TabStarModel.forward
(its own tokenizer, np.unique dedup, BERT in batches of 128 padded strings),
eval, no_grad, fp32, after one warm-up call; nofall: `nofall run --cells` (the
reported INFERENCE_WALL_MS is the forward; the process wall time includes
loading the 189 MB of weights and tokenizing). Prints one line per case.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tabstar_fixtures import build_e5, upstream_model  # noqa: E402


def seeded_cells():
    # the same strings and values as nofall's seeded input are not needed for timing; same shape: 1 x 8
    t = ["Target Feature: target\nFeature Value: no", "Target Feature: target\nFeature Value: yes"]
    t += [f"Predictive Feature: f{j}\nFeature Value: {10 * j} to {10 * j + 10} (Quantile {10 * j} - {10 * j + 10}%)"
          for j in range(6)]
    return [t], [[0.0, 0.0, -1.2, 0.3, 2.1, -0.7, 0.05, 1.4]], 2


def table_cells(rows=128, seed=0):
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "red", "green", "blue", "city", "tower", "river", "stone", "paper"]
    pools = [[" ".join(rng.choice(words, size=rng.integers(1, 6))) for _ in range(40)] for _ in range(4)]
    labels = [f"{10 * i} to {10 * i + 10} (Quantile {10 * i} - {10 * i + 10}%)" for i in range(10)]
    labels = ["Lower than 0 (Quantile 0%)"] + labels + ["Higher than 100 (Quantile 100%)", "Unknown Value"]
    xt, xn = [], []
    for _ in range(rows):
        t = ["Target Feature: outcome\nFeature Value: no", "Target Feature: outcome\nFeature Value: yes"]
        n = [0.0, 0.0]
        for j in range(6):
            t.append(f"Predictive Feature: num{j}\nFeature Value: {labels[rng.integers(len(labels))]}")
            n.append(float(np.clip(rng.normal(), -3, 3)))
        for j in range(4):
            t.append(f"Predictive Feature: text{j}\nFeature Value: {pools[j][rng.integers(40)]}")
            n.append(0.0)
        xt.append(t)
        xn.append(n)
    return xt, xn, 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nofall", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as tmp:
        mdir, e5 = os.path.join(tmp, "m"), os.path.join(tmp, "e5")
        subprocess.run([args.nofall, "gen-weights", "tabstar", "--out", mdir, "--seed", "1"], check=True,
                       stdout=subprocess.DEVNULL)
        build_e5(e5, 12, os.path.join(mdir, "vocab.txt"), 30522)
        model = upstream_model(mdir, e5)
        for name, (xt, xn, C) in {"seeded 1x8": seeded_cells(), "table 128x12": table_cells()}.items():
            cells = os.path.join(tmp, "cells.json")
            with open(cells, "w") as f:
                json.dump({"format": "nofall-tabstar-cells/1", "task": "classification", "n_target_tokens": C,
                           "n_rows": len(xt), "n_cells": len(xt[0]), "x_txt": xt, "x_num": xn,
                           "classes": ["no", "yes"]}, f)
            a, b = np.array(xt, dtype=object), np.array(xn, dtype=np.float32)
            with torch.no_grad():
                ref = model(a, b, C).numpy()  # warm-up
                ts = []
                for _ in range(args.runs):
                    t0 = time.perf_counter()
                    model(a, b, C)
                    ts.append(time.perf_counter() - t0)
            up = min(ts) * 1e3
            nf_fwd, nf_wall = [], []
            for _ in range(args.runs):
                out = os.path.join(tmp, "out")
                t0 = time.perf_counter()
                r = subprocess.run([args.nofall, "run", "--model", mdir, "--cells", cells, "--out", out],
                                   capture_output=True, text=True, env=env)
                nf_wall.append((time.perf_counter() - t0) * 1e3)
                if r.returncode != 0:
                    print(r.stdout, r.stderr)
                    return 1
                nf_fwd.append(float(re.search(r"INFERENCE_WALL_MS=([0-9.]+)", r.stdout).group(1)))
            got = np.load(os.path.join(out, "logits.npy"))
            fwd, wall = min(nf_fwd), min(nf_wall)
            print(f"{name}: {len(np.unique(a))} distinct strings; upstream forward {up:.1f} ms; nofall forward "
                  f"{fwd:.1f} ms ({up / fwd:.2f}x), nofall whole run {wall:.1f} ms; max |logit diff| "
                  f"{np.abs(got - ref).max():.2g}; threads {args.threads}, best of {args.runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
