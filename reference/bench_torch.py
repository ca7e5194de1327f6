#!/usr/bin/env python3
"""Time the upstream Mitra Tab2D forward (fp32, CPU, no autocast; --autocast:
under torch.autocast("cpu", bfloat16), AutoGluon's default).  By default
PyTorch picks its own CPU SDPA kernel, as AutoGluon would; --math-sdpa forces
the math backend that the fixtures use.

    .venv-ref/bin/python reference/bench_torch.py --model DIR                       # both default cases
    .venv-ref/bin/python reference/bench_torch.py --model DIR --support 256 --query 256 --features 16

Inputs come from numpy default_rng(0): x ~ N(0,1) float32; classification
labels uniform in 0..min(9, dim_output-1), regression targets uniform [0,1].
2 warm-up runs, then 10 timed runs; prints one JSON line per case:
{"case": ..., "median_ms": ..., "threads": ...}.  Threads = torch default
(torch.get_num_threads()) unless --threads is given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mitra_fixtures import load_model  # noqa: E402


def bench(model, cfg, n_s: int, n_q: int, n_f: int, warmup: int, runs: int, math_sdpa: bool,
          query_chunk: int = 0, autocast: bool = False) -> float:
    import contextlib
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rng = np.random.default_rng(0)
    sx = torch.from_numpy(rng.standard_normal((1, n_s, n_f)).astype(np.float32))
    qx = torch.from_numpy(rng.standard_normal((1, n_q, n_f)).astype(np.float32))
    if cfg["task"].upper() == "CLASSIFICATION":
        sy = torch.from_numpy(rng.integers(0, min(10, cfg["dim_output"]), (1, n_s)).astype(np.int64))
    else:
        sy = torch.from_numpy(rng.random((1, n_s)).astype(np.float32))
    pf = torch.zeros((1, n_f), dtype=torch.bool)
    ps = torch.zeros((1, n_s), dtype=torch.bool)
    pq = torch.zeros((1, n_q), dtype=torch.bool)
    ctx = sdpa_kernel([SDPBackend.MATH]) if math_sdpa else contextlib.nullcontext()
    times = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), ctx:
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            if query_chunk:
                # as AutoGluon's Mitra predicts (trainer_finetune.predict): the
                # queries in order, query_chunk rows a forward, each forward with
                # the whole support set
                for c0 in range(0, n_q, query_chunk):
                    model(sx, sy, qx[:, c0:c0 + query_chunk], pf, ps, pq[:, c0:c0 + query_chunk])
            else:
                model(sx, sy, qx, pf, ps, pq)
            t1 = time.perf_counter()
            if i >= warmup:
                times.append((t1 - t0) * 1e3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path, help="dir with config.json + model.safetensors")
    ap.add_argument("--support", type=int)
    ap.add_argument("--query", type=int)
    ap.add_argument("--features", type=int)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="0 = torch default")
    ap.add_argument("--math-sdpa", action="store_true", help="force the SDPA math backend (as the fixtures do)")
    ap.add_argument("--query-chunk", type=int, default=0,
                    help="run the queries in forwards of this many rows, each with the whole support (AutoGluon: 1024)")
    ap.add_argument("--autocast", action="store_true", help="run under torch.autocast('cpu', bfloat16)")
    a = ap.parse_args()

    import torch
    if a.threads:
        torch.set_num_threads(a.threads)
    model, cfg = load_model(a.model)
    if a.support or a.query or a.features:
        if not (a.support and a.query and a.features):
            ap.error("--support, --query and --features go together")
        cases = [(f"{a.support}x{a.query}x{a.features}", a.support, a.query, a.features)]
    else:
        cases = [("seed42-16x8x13", 16, 8, 13), ("256x256x16", 256, 256, 16)]
    for name, n_s, n_q, n_f in cases:
        ms = bench(model, cfg, n_s, n_q, n_f, a.warmup, a.runs, a.math_sdpa, a.query_chunk, a.autocast)
        print(json.dumps({"case": name, "median_ms": round(ms, 3), "threads": torch.get_num_threads(),
                          "query_chunk": a.query_chunk, "autocast": "bf16" if a.autocast else None,
                          "model": {k: cfg[k] for k in ("dim", "n_layers", "n_heads", "dim_output", "task")},
                          "torch_version": torch.__version__}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
