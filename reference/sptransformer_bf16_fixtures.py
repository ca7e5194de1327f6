#!/usr/bin/env python3
"""Upstream SpTransformer under torch.autocast("cpu", dtype=torch.bfloat16),
for nofall's --precision bf16-autocast (docs/precision.md, "SpTransformer").

This script IMPORTS the upstream model through reference/sptransformer_fixtures.py
(build_upstream: a clone of ShenLab-Genomics/SpliceTransformer passed as
--upstream; load_strict: strict load of `nofall gen-weights` weights); it
contains no copy of the upstream code.

Modes
-----
make   --upstream DIR [--nofall build/nofall] [--fixtures tests/fixtures/sptransformer] [--only L8001]
    For each named committed fixture case: regenerate the weights from
    case.json, run the upstream forward under torch.no_grad() and
    torch.autocast("cpu", dtype=torch.bfloat16), write
    expected_logits_bf16.npy (float32 copy of the bf16 logits, same layout
    as expected_logits.npy), expected_buckets_bf16.npy (upstream's top-1
    bucket choices under autocast, int8 (B, layers, heads, buckets) as
    expected_buckets.npy) and add a "reference_bf16" entry to case.json
    with the bf16-vs-fp32 difference upstream itself shows.

trace  --upstream DIR [--nofall build/nofall] [--case L8001] [--all]
    Prints the aten ops of one upstream forward under CPU autocast with
    their input/output dtypes and shapes (views left out), in order; --all
    prints each distinct (op, dtypes) once with its count instead.
    docs/precision.md summarises the result.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sptransformer_fixtures as sf  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURES = ROOT / "tests" / "fixtures" / "sptransformer"
DEFAULT_NOFALL = ROOT / "build" / "nofall"
DEFAULT_CASES = ["L8001"]
VIEWS = ("view", "t.default", "transpose", "permute", "unsqueeze", "slice", "split", "_unsafe_view", "alias",
         "expand", "empty", "arange", "detach")


def load(upstream: str, nofall: str, cdir: Path, tmp: Path):
    meta = json.loads((cdir / "case.json").read_text())
    mdir = tmp / "model"
    subprocess.run([nofall, "gen-weights", "sptransformer", "--out", str(mdir), "--seed",
                    str(meta["weights"]["seed"])], check=True, stdout=subprocess.DEVNULL)
    model = sf.build_upstream(upstream)
    sf.load_strict(model, str(mdir))
    model.eval()
    t = np.load(cdir / "tokens.npy")
    return meta, model, (t.reshape(1, -1) if t.ndim == 1 else t)


def forward_bf16(model, tokens, record=False):
    """the logits; with record=True also the top-1 bucket choices (sf.BucketRecorder)"""
    import torch
    x = torch.from_numpy(sf.one_hot(tokens))
    rec = sf.BucketRecorder(model) if record else None
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            y = model(x)
    finally:
        for h in rec.handles if rec else []:
            h.remove()
    if y.dtype != torch.bfloat16:
        raise RuntimeError(f"autocast forward produced {y.dtype}, expected bfloat16")
    out = y.float().permute(0, 2, 1).contiguous().numpy().astype(np.float32)  # (B, L - 8000, 18)
    return (out, rec.arrays()[0]) if record else out


def make(args) -> int:
    import torch
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    versions = sf.check_versions()
    for name in args.only.split(","):
        cdir = args.fixtures / name
        tmp = Path(tempfile.mkdtemp(prefix="spt_bf16_"))
        try:
            meta, model, tokens = load(args.upstream, args.nofall, cdir, tmp)
            out, buckets = forward_bf16(model, tokens, record=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if not np.all(np.isfinite(out)):
            raise RuntimeError(f"{name}: non-finite bf16 logits")
        np.save(cdir / "expected_logits_bf16.npy", out)
        np.save(cdir / "expected_buckets_bf16.npy", buckets.astype(np.int8))  # (B, layers, heads, buckets)
        ref = np.load(cdir / "expected_logits.npy")
        d = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        meta["reference_bf16"] = {
            "file": "expected_logits_bf16.npy", "versions": versions, "torch": torch.__version__,
            "autocast": 'torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad()',
            "torch_threads": torch.get_num_threads(),
            "upstream_bf16_vs_fp32_max_abs": float(d.max()), "upstream_bf16_vs_fp32_mean_abs": float(d.mean()),
            "max_abs_logit": float(np.abs(ref).max()),
            "argmax_agree": float((out.argmax(-1) == ref.argmax(-1)).mean()),
            "bucket_choices_differing_from_fp32": int((buckets != np.load(cdir / "expected_buckets.npy")).sum()),
            "bucket_choices_differing_per_layer": [int(v) for v in
                                                   (buckets != np.load(cdir / "expected_buckets.npy")).sum(axis=(0, 2, 3))],
        }
        (cdir / "case.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(json.dumps({"case": name, **{k: v for k, v in meta["reference_bf16"].items() if k != "versions"}}))
    return 0


def trace(args) -> int:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def desc(a):
        if isinstance(a, torch.Tensor):
            return f"{str(a.dtype).replace('torch.', '')}{tuple(a.shape)}"
        if isinstance(a, (list, tuple)):
            return "[" + ",".join(desc(b) for b in a if isinstance(b, torch.Tensor)) + "]"
        return None

    def dts(a):
        if isinstance(a, torch.Tensor):
            return str(a.dtype).replace("torch.", "")
        if isinstance(a, (list, tuple)):
            return "[" + ",".join(dts(b) for b in a if isinstance(b, torch.Tensor)) + "]"
        return None

    counts = collections.OrderedDict()

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args_=(), kwargs=None):
            out = func(*args_, **(kwargs or {}))
            f = str(func).replace("aten.", "")
            if args.all:
                key = (f, " ".join(d for d in map(dts, args_) if d), dts(out))
                counts[key] = counts.get(key, 0) + 1
            elif not any(v in f for v in VIEWS):
                print(f"{f:30s} {' '.join(d for d in map(desc, args_) if d)} -> {desc(out)}")
            return out

    tmp = Path(tempfile.mkdtemp(prefix="spt_bf16_trace_"))
    try:
        _, model, tokens = load(args.upstream, args.nofall, args.fixtures / args.case, tmp)
        with Log():
            forward_bf16(model, tokens)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for (f, i, o), n in counts.items():
        print(f"{n:5d} {f:32s} {i} -> {o}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    for name in ("make", "trace"):
        a = sub.add_parser(name)
        a.add_argument("--upstream", required=True)
        a.add_argument("--nofall", default=str(DEFAULT_NOFALL))
        a.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
        if name == "make":
            a.add_argument("--only", default=",".join(DEFAULT_CASES))
        else:
            a.add_argument("--case", default="L8001")
            a.add_argument("--all", action="store_true")
    args = ap.parse_args(argv)
    args.nofall = str(Path(args.nofall).resolve())
    return make(args) if args.mode == "make" else trace(args)


if __name__ == "__main__":
    sys.exit(main())
