#!/usr/bin/env python3
"""Time upstream SpTransformer's forward (fp32, CPU, eval, no_grad, TF32 off;
--autocast: under torch.autocast("cpu", bfloat16)) on our synthetic
checkpoint, loaded strictly into upstream's own class.

    .venv-ref/bin/python reference/bench_torch_spt.py --upstream CLONE --model DIR [--length 8201] [--batch 1]

--upstream: a clone of ShenLab-Genomics/SpliceTransformer (its model/model.py;
nothing of it is committed). Input: seeded tokens (the same splitmix64
generator as nofall, seeds seed, seed+1, ...) flanked by context_len N, as
`nofall bench --length L --batch B` builds it. 1 warm-up run (--warmup), then
--runs timed runs; prints one JSON line {"length", "batch", "median_ms",
"threads", "runs"}. Threads: torch's default unless --threads.
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
from sptransformer_fixtures import CONFIG, build_upstream, load_strict, one_hot, seeded_tokens  # noqa: E402


def main() -> None:
    a = argparse.ArgumentParser()
    a.add_argument("--upstream", required=True)
    a.add_argument("--model", required=True)
    a.add_argument("--length", type=int, default=8201)
    a.add_argument("--batch", type=int, default=1)
    a.add_argument("--seed", type=int, default=42)
    a.add_argument("--warmup", type=int, default=1)
    a.add_argument("--runs", type=int, default=3)
    a.add_argument("--threads", type=int, default=0)
    a.add_argument("--autocast", action="store_true", help="run under torch.autocast('cpu', bfloat16)")
    args = a.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if args.threads:
        torch.set_num_threads(args.threads)
    model = build_upstream(args.upstream)
    load_strict(model, args.model)
    model.eval()
    ctx = CONFIG["context_len"]
    n = args.length - 2 * ctx
    tok = np.full((args.batch, args.length), 4, dtype=np.int8)
    for b in range(args.batch):
        tok[b, ctx:ctx + n] = seeded_tokens(args.seed + b, n)
    x = torch.from_numpy(one_hot(tok))
    ms = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast):
        for i in range(args.warmup + args.runs):
            t0 = time.perf_counter()
            model(x)
            if i >= args.warmup:
                ms.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"length": args.length, "batch": args.batch, "median_ms": statistics.median(ms),
                      "threads": torch.get_num_threads(), "runs": args.runs,
                      "autocast": "bf16" if args.autocast else None}))


if __name__ == "__main__":
    main()
